/*
 * providers/gcp/gcp_config.c: kind gcp's keys in the configuration file
 * (core/config_kind.h, providers/gcp/README.md).
 */
#include "providers/gcp/gcp_config.h"

#include "core/config_kind.h"

static const struct cfg_field gcp_fields[] = {
    {.key = "project", .type = CFG_STR, .offset = CFG_OFF(tm_config_gcp, project)},
    /* Google's when absent; tests point them at a loopback fake. */
    {.key = "token_url", .type = CFG_STR, .offset = CFG_OFF(tm_config_gcp, token_url)},
    {.key = "token_audience", .type = CFG_STR, .offset = CFG_OFF(tm_config_gcp, token_audience)},
    {.key = "metadata_url", .type = CFG_STR, .offset = CFG_OFF(tm_config_gcp, metadata_url)},
    /* The boot image (aws's key of the same name is the AMI). */
    {.key = "image_id", .type = CFG_STR, .offset = CFG_OFF(tm_config_gcp, image_id)},
};
static const struct cfg_section gcp_block = {
    .fields = gcp_fields, .nfields = CFG_NFIELDS(gcp_fields), .size = sizeof(struct tm_config_gcp)};

static int gcp_check(struct cfg_ctx *c, const struct tm_config *cfg, size_t i)
{
    if (tm_gcp_config(&cfg->providers[i])->project)
        return 0;
    tm_cfg_path_set(c, "providers[%zu].project", i);
    return tm_cfg_fail_at(c, "missing required key (a gcp provider names its project)");
}

const struct tm_config_kind tm_config_kind_gcp = {
    .name = "gcp",
    .block = &gcp_block,
    .check = gcp_check,
};
