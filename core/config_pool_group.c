/*
 * core/config_pool_group.c: `pool_groups:`, a pool group's own settings
 * (config.h's struct tm_config_pool_group).  Its one rule today is burst:
 * how a group of owned and cloud pools sends queued work to the clouds
 * (controller/fleet/burst.h decides, controller/reconcile/burst.c applies).
 */
#include <stdio.h>
#include <string.h>

#include "core/config_internal.h"
#include "core/err.h"
#include "core/units.h"

static int pg_parse(struct cfg_ctx *c, const struct cfg_section *s, void *base,
                    const struct yaml_node_s *node);

#define PG_NAME_ROW                                                                          \
    {.key = "name", .type = CFG_STR, .offset = CFG_OFF(tm_config_pool_group, name),          \
     .flags = CFG_REQUIRED | CFG_NAME}
#define PG_WAIT_VALUE_ROW                                                                    \
    {.key = "wait_value", .type = CFG_PRICE,                                                 \
     .offset = CFG_OFF(tm_config_pool_group, wait_value_uusd_per_hour), .def = "0", .min = 0, \
     .max = TM_PRICE_MAX_UUSD}

static const struct cfg_field cfg_pool_group_fields[] = {
    PG_NAME_ROW,
    /* "never", "cost" or "after DURATION": one key, as the rule is one
     * choice; the wait is parsed below.  {after: DURATION} is read by
     * the table after this one. */
    {.key = "burst", .type = CFG_STR, .offset = CFG_OFF(tm_config_pool_group, burst), .def = "cost"},
    PG_WAIT_VALUE_ROW,
};
const struct cfg_section tm_cfg_pool_group_section = {
    .fields = cfg_pool_group_fields, .nfields = CFG_NFIELDS(cfg_pool_group_fields),
    .size = sizeof(struct tm_config_pool_group), .parse_elem = pg_parse};

/* The same entry with burst written as a mapping, `burst: {after: 30m}`:
 * the same keys, burst's one key parsed by the table into the wait. */
static const struct cfg_field cfg_burst_after_fields[] = {
    {.key = "after", .type = CFG_DURATION, .offset = CFG_OFF(tm_config_pool_group, burst_after_ms),
     .min = 0, .max = 365 * CFG_DAY, .flags = CFG_REQUIRED},
};
static const struct cfg_section cfg_burst_after_section = {
    .fields = cfg_burst_after_fields, .nfields = CFG_NFIELDS(cfg_burst_after_fields), .size = 0};
static const struct cfg_field cfg_pool_group_after_fields[] = {
    PG_NAME_ROW,
    {.key = "burst", .type = CFG_SECTION, .offset = 0, .sub = &cfg_burst_after_section},
    PG_WAIT_VALUE_ROW,
};
static const struct cfg_section cfg_pool_group_after_section = {
    .fields = cfg_pool_group_after_fields, .nfields = CFG_NFIELDS(cfg_pool_group_after_fields),
    .size = sizeof(struct tm_config_pool_group)};

/* One entry: by the table whose burst row fits the value given. */
static int pg_parse(struct cfg_ctx *c, const struct cfg_section *s, void *base,
                    const struct yaml_node_s *node)
{
    struct tm_config_pool_group *g = base;
    const yaml_node_t *burst = NULL;

    if (node->type == YAML_MAPPING_NODE)
        for (yaml_node_pair_t *p = node->data.mapping.pairs.start; p < node->data.mapping.pairs.top; p++) {
            const yaml_node_t *k = tm_cfg_node(c, p->key);
            if (k && k->type == YAML_SCALAR_NODE && strcmp((const char *)k->data.scalar.value, "burst") == 0)
                burst = tm_cfg_node(c, p->value);
        }
    g->burst_mapping = burst && burst->type == YAML_MAPPING_NODE;
    if (g->burst_mapping)
        s = &cfg_pool_group_after_section;
    int r = tm_cfg_apply_defaults(c, s, g);
    if (r == 0)
        r = tm_cfg_parse_mapping(c, s, g, node);
    if (r == 0 && g->burst_mapping && !(g->burst = tm_cfg_strdup("after")))
        return tm_cfg_nomem(c);
    return r;
}

/* burst's text into its rule and wait; false when it is none of them. */
static bool pg_parse_burst(struct tm_config_pool_group *g)
{
    const char *b = g->burst;

    if (strcmp(b, "cost") == 0) {
        g->burst_rule = TM_CONFIG_BURST_COST;
        return true;
    }
    if (g->burst_mapping) { /* {after: D}: the table parsed the wait */
        g->burst_rule = TM_CONFIG_BURST_AFTER;
        return true;
    }
    if (strcmp(b, "never") == 0) {
        g->burst_rule = TM_CONFIG_BURST_NEVER;
        return true;
    }
    if (strncmp(b, "after", 5) != 0)
        return false;
    b += 5;
    if (*b == ':')
        b++;
    if (*b != ' ')
        return false;
    while (*b == ' ')
        b++;
    g->burst_rule = TM_CONFIG_BURST_AFTER;
    return tm_duration_parse(b, &g->burst_after_ms) == 0;
}

int tm_cfg_check_pool_groups(struct cfg_ctx *c, struct tm_config *cfg)
{
    for (size_t i = 0; i < cfg->npool_groups; i++) {
        struct tm_config_pool_group *g = &cfg->pool_groups[i];
        bool owned = false, cloud = false;

        for (size_t k = 0; k < i; k++)
            if (strcmp(cfg->pool_groups[k].name, g->name) == 0) {
                tm_cfg_path_set(c, "pool_groups[%zu].name", i);
                return tm_cfg_fail_at(c, "\"%s\" is already pool_groups[%zu]", g->name, k);
            }
        for (size_t pi = 0; pi < cfg->npools; pi++) {
            const struct tm_config_pool *pool = &cfg->pools[pi];
            if (!pool->group || strcmp(pool->group, g->name) != 0)
                continue;
            owned = owned || pool->owned;
            cloud = cloud || !pool->owned;
        }
        if (!owned && !cloud) {
            tm_cfg_path_set(c, "pool_groups[%zu].name", i);
            return tm_cfg_fail_at(c, "no pool names group \"%s\" (pools[].group)", g->name);
        }
        if (!pg_parse_burst(g)) {
            tm_cfg_path_set(c, "pool_groups[%zu].burst", i);
            return tm_cfg_fail_at(c, "expected never, cost or after DURATION (such as \"after 10m\"), "
                                     "got \"%s\"", g->burst);
        }
        if (!cloud || !owned) {
            tm_cfg_path_set(c, "pool_groups[%zu].burst", i);
            return tm_cfg_fail_at(c, "group \"%s\" has no %s pools: the burst rule sends work from "
                                     "owned pools to cloud pools of one group", g->name,
                                  cloud ? "owned" : "cloud");
        }
    }
    return 0;
}
