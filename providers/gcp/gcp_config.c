/*
 * providers/gcp/gcp_config.c: kind gcp's keys in the configuration file
 * (core/config_kind.h, providers/gcp/README.md).
 */
#include "core/config_kind.h"

static const struct cfg_field gcp_keys[] = {
    {.key = "project", .type = CFG_STR, .offset = CFG_OFF(tm_config_provider, project)},
    /* Google's when absent; tests point them at a loopback fake. */
    {.key = "token_url", .type = CFG_STR, .offset = CFG_OFF(tm_config_provider, token_url)},
    {.key = "token_audience", .type = CFG_STR,
     .offset = CFG_OFF(tm_config_provider, token_audience)},
    {.key = "metadata_url", .type = CFG_STR, .offset = CFG_OFF(tm_config_provider, metadata_url)},
};

static int gcp_check(struct cfg_ctx *c, const struct tm_config *cfg, size_t i)
{
    if (cfg->providers[i].project)
        return 0;
    tm_cfg_path_set(c, "providers[%zu].project", i);
    return tm_cfg_fail_at(c, "missing required key (a gcp provider names its project)");
}

const struct tm_config_kind tm_config_kind_gcp = {
    .name = "gcp",
    .keys = gcp_keys,
    .nkeys = CFG_NFIELDS(gcp_keys),
    .check = gcp_check,
};
