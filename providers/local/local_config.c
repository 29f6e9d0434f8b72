/*
 * providers/local/local_config.c: kind local's keys in the configuration
 * file (core/config_kind.h, providers/local/README.md): required where the
 * provider needs them; those only it reads are refused under other kinds.
 */
#include "providers/local/local_config.h"

#include <string.h>

#include "core/config_kind.h"

/* Where the agents it starts read interruption notices: its own file, a
 * fake of a cloud's metadata service at metadata_url, or nowhere. */
static const char *const local_metadata[] = {"local", "aws", "gcp", "azure", "none", NULL};

static const struct cfg_field local_fields[] = {
    {.key = "state_dir", .type = CFG_STR, .offset = CFG_OFF(tm_config_local, state_dir),
     .flags = CFG_KIND_ONLY},
    {.key = "metadata", .type = CFG_STR, .offset = CFG_OFF(tm_config_local, metadata),
     .def = "local", .choices = local_metadata, .flags = CFG_KIND_ONLY},
    /* The fake's root for metadata aws|gcp|azure (gcp's own key too). */
    {.key = "metadata_url", .type = CFG_STR, .offset = CFG_OFF(tm_config_local, metadata_url)},
    {.key = "gpu_util_percent", .type = CFG_DOUBLE,
     .offset = CFG_OFF(tm_config_local, gpu_util_percent), .def = "0", .dmin = 0, .dmax = 100,
     .flags = CFG_KIND_ONLY},
    {.key = "gpu_busy_util_percent", .type = CFG_DOUBLE,
     .offset = CFG_OFF(tm_config_local, gpu_busy_util_percent), .def = "0", .dmin = 0, .dmax = 100,
     .flags = CFG_KIND_ONLY},
    {.key = "agent_args", .type = CFG_STR, .offset = CFG_OFF(tm_config_local, agent_args),
     .flags = CFG_KIND_ONLY},
};
static const struct cfg_section local_block = {
    .fields = local_fields, .nfields = CFG_NFIELDS(local_fields),
    .size = sizeof(struct tm_config_local)};

static int local_check(struct cfg_ctx *c, const struct tm_config *cfg, size_t i)
{
    const struct tm_config_provider *p = &cfg->providers[i];
    const struct tm_config_local *l = tm_local_config(p);
    /* Every choice but local and none is a fake at metadata_url. */
    bool http_fake = strcmp(l->metadata, "local") != 0 && strcmp(l->metadata, "none") != 0;

    if (!l->state_dir || !l->state_dir[0]) {
        tm_cfg_path_set(c, "providers[%zu].state_dir", i);
        return tm_cfg_fail_at(c, "missing required key (kind is \"local\")");
    }
    if (strlen(l->state_dir) > 200) {
        tm_cfg_path_set(c, "providers[%zu].state_dir", i);
        return tm_cfg_fail_at(c, "longer than 200 bytes");
    }
    if (http_fake && (!l->metadata_url || strncmp(l->metadata_url, "http", 4) != 0)) {
        tm_cfg_path_set(c, "providers[%zu].metadata_url", i);
        return tm_cfg_fail_at(c, "an http(s) URL is required when metadata is \"%s\"", l->metadata);
    }
    if (!http_fake && l->metadata_url) {
        tm_cfg_path_set(c, "providers[%zu].metadata_url", i);
        return tm_cfg_fail_at(c, "only used when metadata is aws, gcp or azure, not \"%s\"",
                              l->metadata);
    }
    if (l->agent_args && strpbrk(l->agent_args, "'\"`$\\;&|<>()\n")) {
        tm_cfg_path_set(c, "providers[%zu].agent_args", i);
        return tm_cfg_fail_at(c, "plain flags only: no quotes, $, `, \\, ;, &, |, <, >, ( or )");
    }
    return 0;
}

const struct tm_config_kind tm_config_kind_local = {
    .name = "local",
    .block = &local_block,
    .types_closed = true,
    .check = local_check,
};
