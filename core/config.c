/*
 * core/config.c: the schema of the configuration file, one table per
 * section (how the loader uses them: config_internal.h).
 */
#include "core/config_internal.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/sched_policies.h"

static const char *const cfg_log_levels[] = {"debug", "info", "warn", "error", NULL};
/* The scheduler's own rows (sched_policies.h), so a new policy needs no
 * second list here. */
#define CFG_POLICY_NAME(id, name) #name,
static const char *const cfg_policies[] = {TM_SCHED_POLICIES(CFG_POLICY_NAME) NULL};
#undef CFG_POLICY_NAME
static const char *const cfg_cred_sources[] = {"none", "env", "file", "instance_role", NULL};
static const char *const cfg_capacity_types[] = {"on_demand", "spot", "spot_then_on_demand", NULL};
static const char *const cfg_idle_job_actions[] = {"report", "requeue", "cancel", NULL};

static const struct cfg_field cfg_type_fields[] = {
    {.key = "name", .type = CFG_STR, .offset = CFG_OFF(tm_config_instance_type, name),
     .flags = CFG_REQUIRED | CFG_NAME},
    {.key = "gpus", .type = CFG_INT, .offset = CFG_OFF(tm_config_instance_type, gpus),
     .min = 1, .max = 64, .flags = CFG_REQUIRED},
    {.key = "gpu_model", .type = CFG_STR, .offset = CFG_OFF(tm_config_instance_type, gpu_model),
     .flags = CFG_REQUIRED | CFG_NAME},
    {.key = "cpu_milli", .type = CFG_I64, .offset = CFG_OFF(tm_config_instance_type, cpu_milli),
     .min = 1, .max = 100000000, .flags = CFG_REQUIRED},
    {.key = "memory_mib", .type = CFG_I64, .offset = CFG_OFF(tm_config_instance_type, memory_mib),
     .min = 1, .max = 1LL << 30, .flags = CFG_REQUIRED},
    {.key = "on_demand_price", .type = CFG_PRICE,
     .offset = CFG_OFF(tm_config_instance_type, on_demand_uusd_per_hour),
     .min = 0, .max = TM_PRICE_MAX_UUSD, .flags = CFG_REQUIRED},
    {.key = "spot_price", .type = CFG_PRICE,
     .offset = CFG_OFF(tm_config_instance_type, spot_uusd_per_hour), .def = "0",
     .min = 0, .max = TM_PRICE_MAX_UUSD},
    {.key = "capacity", .type = CFG_INT, .offset = CFG_OFF(tm_config_instance_type, capacity),
     .def = "0", .min = 0, .max = 1000000},
};
static const struct cfg_section cfg_type_section = {
    .fields = cfg_type_fields, .nfields = CFG_NFIELDS(cfg_type_fields),
    .size = sizeof(struct tm_config_instance_type)};

static const struct cfg_field cfg_cred_fields[] = {
    {.key = "source", .type = CFG_STR, .offset = CFG_OFF(tm_config_credentials, source),
     .def = "none", .choices = cfg_cred_sources},
    {.key = "file", .type = CFG_STR, .offset = CFG_OFF(tm_config_credentials, file)},
    {.key = "profile", .type = CFG_STR, .offset = CFG_OFF(tm_config_credentials, profile),
     .flags = CFG_NAME},
};
static const struct cfg_section cfg_cred_section = {
    .fields = cfg_cred_fields, .nfields = CFG_NFIELDS(cfg_cred_fields),
    .size = sizeof(struct tm_config_credentials)};

/* providers[]: the keys every kind has.  Each kind's own come from its
 * folder (core/config_kind.h); cfg_provider_build() puts them beside these
 * once, in the kinds' order, and fills kind's choices with their names. */
static const struct cfg_field cfg_provider_fields[] = {
    {.key = "name", .type = CFG_STR, .offset = CFG_OFF(tm_config_provider, name),
     .flags = CFG_REQUIRED | CFG_NAME},
    {.key = "kind", .type = CFG_STR, .offset = CFG_OFF(tm_config_provider, kind),
     .flags = CFG_REQUIRED},
    {.key = "region", .type = CFG_STR, .offset = CFG_OFF(tm_config_provider, region),
     .flags = CFG_REQUIRED | CFG_NAME},
    {.key = "endpoint", .type = CFG_STR, .offset = CFG_OFF(tm_config_provider, endpoint)},
    {.key = "credentials", .type = CFG_SECTION, .offset = CFG_OFF(tm_config_provider, credentials),
     .sub = &cfg_cred_section},
    /* The defaults of its pools' keys of the same names. */
    {.key = "spot_hazard", .type = CFG_DOUBLE,
     .offset = CFG_OFF(tm_config_provider, spot_hazard_per_hour), .def = "0", .dmin = 0, .dmax = 100},
    {.key = "spot_notice", .type = CFG_DURATION, .offset = CFG_OFF(tm_config_provider, spot_notice_ms),
     .def = "120s", .min = 0, .max = CFG_HOUR},
    /* A path; cfg_load_spot_hazards() reads the table once validation passed. */
    {.key = "spot_hazards", .type = CFG_STR, .offset = CFG_OFF(tm_config_provider, spot_hazards_file)},
    {.key = "instance_types", .type = CFG_LIST, .offset = CFG_OFF(tm_config_provider, types),
     .count_offset = CFG_OFF(tm_config_provider, ntypes), .min = 0, .max = 256,
     .sub = &cfg_type_section},
    /* Fencing: whether terminating an instance through this provider, once
     * its listing confirms it, guarantees the node's processes are gone
     * (controller/reconcile/staleness.c); false: agent.fence_after. */
    {.key = "fence", .type = CFG_BOOL, .offset = CFG_OFF(tm_config_provider, fence), .def = "true"},
};
static struct cfg_field cfg_provider_all[CFG_FIELDS_MAX];
static const char *cfg_kind_names[CFG_KINDS_MAX + 1];
/* Every provider key a file may carry, for the message of an unknown one. */
static struct cfg_field cfg_provider_names_rows[CFG_FIELDS_MAX * 2];
static struct cfg_section cfg_provider_names = {.fields = cfg_provider_names_rows};
/* Each kind's block rows but its sections: what a provider of another
 * kind reads and ignores (core/config_kind.h). */
static struct cfg_field cfg_kind_plain_rows[CFG_KINDS_MAX][CFG_FIELDS_MAX];
static struct cfg_section cfg_kind_plain[CFG_KINDS_MAX];
static int cfg_provider_parse(struct cfg_ctx *c, const struct cfg_section *s, void *base,
                              const struct yaml_node_s *map);
static void cfg_provider_release(const struct cfg_section *s, void *base);
static struct cfg_section cfg_provider_section = {
    .fields = cfg_provider_all, .size = sizeof(struct tm_config_provider),
    .parse_elem = cfg_provider_parse, .release_elem = cfg_provider_release};
static pthread_once_t cfg_provider_once = PTHREAD_ONCE_INIT;

/* Add row to rows[*n] unless a row of that key is there; false when full. */
static bool cfg_rows_add(struct cfg_field *rows, size_t *n, size_t max, const struct cfg_field *row)
{
    for (size_t i = 0; i < *n; i++)
        if (strcmp(rows[i].key, row->key) == 0)
            return true;
    if (*n == max)
        return false;
    rows[(*n)++] = *row;
    return true;
}

/* The generic rows (kind's choices filled with the kinds' names), the
 * names of every key for the message of an unknown one (a key two kinds
 * share appears once), and each kind's plain rows. */
static void cfg_provider_build(void)
{
    size_t n = 0, nn = 0;

    for (size_t i = 0; i < CFG_NFIELDS(cfg_provider_fields); i++) {
        cfg_provider_all[n++] = cfg_provider_fields[i];
        cfg_provider_names_rows[nn++] = cfg_provider_fields[i];
    }
    for (size_t k = 0; k < tm_config_nkinds && k < CFG_KINDS_MAX; k++) {
        const struct tm_config_kind *kind = tm_config_kinds[k];
        size_t np = 0;

        cfg_kind_names[k] = kind->name;
        for (size_t j = 0; kind->block && j < kind->block->nfields; j++) {
            const struct cfg_field *row = &kind->block->fields[j];

            if (row->type == CFG_SECTION || np == CFG_FIELDS_MAX)
                continue;
            cfg_kind_plain_rows[k][np++] = *row;
            cfg_rows_add(cfg_provider_names_rows, &nn, CFG_NFIELDS(cfg_provider_names_rows), row);
        }
        cfg_kind_plain[k] = (struct cfg_section){
            .fields = cfg_kind_plain_rows[k], .nfields = np,
            .size = kind->block ? kind->block->size : 0};
    }
    for (size_t i = 0; i < n; i++)
        if (strcmp(cfg_provider_all[i].key, "kind") == 0)
            cfg_provider_all[i].choices = cfg_kind_names;
    cfg_provider_section.nfields = n;
    cfg_provider_names.nfields = nn;
}

/* The value of key in map when it is a plain string, else NULL. */
static const char *cfg_scalar_of(struct cfg_ctx *c, const yaml_node_t *map, const char *key)
{
    for (yaml_node_pair_t *kv = map->data.mapping.pairs.start; kv < map->data.mapping.pairs.top; kv++) {
        const yaml_node_t *k = tm_cfg_node(c, kv->key), *v = tm_cfg_node(c, kv->value);

        if (k->type == YAML_SCALAR_NODE && strcmp((const char *)k->data.scalar.value, key) == 0)
            return v->type == YAML_SCALAR_NODE ? (const char *)v->data.scalar.value : NULL;
    }
    return NULL;
}

/* Another kind's section (a CFG_SECTION row of its block): refused under
 * its own name, before the walk would call it unknown. */
static int cfg_provider_foreign_block(struct cfg_ctx *c, const struct tm_config_kind *own,
                                      const yaml_node_t *map)
{
    for (yaml_node_pair_t *kv = map->data.mapping.pairs.start; kv < map->data.mapping.pairs.top; kv++) {
        const yaml_node_t *k = tm_cfg_node(c, kv->key);

        if (k->type != YAML_SCALAR_NODE)
            continue;
        for (size_t n = 0; n < tm_config_nkinds; n++) {
            const struct tm_config_kind *other = tm_config_kinds[n];

            for (size_t j = 0; other != own && other->block && j < other->block->nfields; j++)
                if (other->block->fields[j].type == CFG_SECTION &&
                    strcmp(other->block->fields[j].key, (const char *)k->data.scalar.value) == 0) {
                    char at[CFG_PATH_MAX];

                    snprintf(at, sizeof(at), "%s", c->path);
                    tm_cfg_path_set(c, "%s.%s", at, other->block->fields[j].key);
                    return tm_cfg_fail(c, k, "only used by kind \"%s\", not \"%s\"", other->name,
                                       own->name);
                }
        }
    }
    return 0;
}

/* Whether map has a key of section s. */
static bool cfg_map_has_row(struct cfg_ctx *c, const yaml_node_t *map, const struct cfg_section *s)
{
    for (yaml_node_pair_t *kv = map->data.mapping.pairs.start; kv < map->data.mapping.pairs.top; kv++) {
        const yaml_node_t *k = tm_cfg_node(c, kv->key);

        for (size_t j = 0; k->type == YAML_SCALAR_NODE && j < s->nfields; j++)
            if (strcmp(s->fields[j].key, (const char *)k->data.scalar.value) == 0)
                return true;
    }
    return false;
}

/* One providers[] entry: the generic keys into the struct, its kind's block keys into a block of the kind's own,
 * and another kind's plain keys into a scratch block of that kind, read
 * and dropped (core/config_kind.h).  With no kind or an unknown one there
 * is no block; the walk says what is wrong. */
static int cfg_provider_parse(struct cfg_ctx *c, const struct cfg_section *s, void *base,
                              const struct yaml_node_s *node)
{
    const yaml_node_t *map = node;
    struct tm_config_provider *p = base;
    const struct tm_config_kind *kind = NULL;
    struct cfg_part part[CFG_PARTS_MAX];
    size_t n = 0, nown;
    int r = tm_cfg_apply_defaults(c, s, base);

    if (r < 0)
        return r;
    if (map->type == YAML_MAPPING_NODE)
        kind = tm_config_kind_find(cfg_scalar_of(c, map, "kind"));
    if (kind) {
        r = cfg_provider_foreign_block(c, kind, map);
        if (r < 0)
            return r;
    }
    part[n++] = (struct cfg_part){s, base};
    if (kind && kind->block) {
        p->kind_row = kind;
        p->kind_block = tm_cfg_calloc(1, kind->block->size);
        if (!p->kind_block)
            return tm_cfg_nomem(c);
        r = tm_cfg_apply_defaults(c, kind->block, p->kind_block);
        if (r < 0)
            return r;
        part[n++] = (struct cfg_part){kind->block, p->kind_block};
    }
    nown = n;
    for (size_t k = 0; map->type == YAML_MAPPING_NODE && k < tm_config_nkinds && k < CFG_KINDS_MAX;
         k++) {
        if (tm_config_kinds[k] == kind || !cfg_map_has_row(c, map, &cfg_kind_plain[k]))
            continue;
        part[n].s = &cfg_kind_plain[k];
        part[n].base = tm_cfg_calloc(1, cfg_kind_plain[k].size);
        if (!part[n].base) {
            r = tm_cfg_nomem(c);
            break;
        }
        n++;
    }
    if (r == 0)
        r = tm_cfg_parse_parts(c, part, n, nown, &cfg_provider_names, map);
    for (size_t w = nown; w < n; w++) {
        tm_cfg_release_section(part[w].s, part[w].base);
        free(part[w].base);
    }
    return r;
}

/* The block goes by the kind that made it (p->kind may not have been
 * parsed yet when a load stops). */
static void cfg_provider_release(const struct cfg_section *s, void *base)
{
    struct tm_config_provider *p = base;

    (void)s;
    if (p->kind_block && p->kind_row && p->kind_row->block)
        tm_cfg_release_section(p->kind_row->block, p->kind_block);
    free(p->kind_block);
    p->kind_block = NULL;
    p->kind_row = NULL;
}

const struct cfg_section *tm_cfg_provider_section(void)
{
    pthread_once(&cfg_provider_once, cfg_provider_build);
    return &cfg_provider_section;
}

const struct tm_config_kind *tm_config_kind_find(const char *name)
{
    for (size_t k = 0; name && k < tm_config_nkinds; k++)
        if (strcmp(tm_config_kinds[k]->name, name) == 0)
            return tm_config_kinds[k];
    return NULL;
}

static const struct cfg_field cfg_pool_fields[] = {
    {.key = "name", .type = CFG_STR, .offset = CFG_OFF(tm_config_pool, name),
     .flags = CFG_REQUIRED | CFG_NAME},
    {.key = "provider", .type = CFG_STR, .offset = CFG_OFF(tm_config_pool, provider),
     .flags = CFG_REQUIRED | CFG_NAME},
    /* Required but on an owned pool (cfg_validate_pools), which has
     * nothing to buy: normalise() gives it ["owned"] for both. */
    {.key = "zones", .type = CFG_STRLIST, .offset = CFG_OFF(tm_config_pool, zones),
     .count_offset = CFG_OFF(tm_config_pool, nzones), .min = 1, .max = 64, .flags = CFG_NAME},
    {.key = "instance_types", .type = CFG_STRLIST, .offset = CFG_OFF(tm_config_pool, instance_types),
     .count_offset = CFG_OFF(tm_config_pool, ninstance_types), .min = 1, .max = 64,
     .flags = CFG_NAME},
    /* Both may be left out when the provider describes the listed types:
     * normalise() copies them from the first one. */
    {.key = "gpu_model", .type = CFG_STR, .offset = CFG_OFF(tm_config_pool, gpu_model),
     .flags = CFG_NAME},
    {.key = "gpus_per_node", .type = CFG_INT, .offset = CFG_OFF(tm_config_pool, gpus_per_node),
     .min = 1, .max = 64},
    {.key = "capacity_type", .type = CFG_STR, .offset = CFG_OFF(tm_config_pool, capacity_type),
     .def = "on_demand", .choices = cfg_capacity_types},
    {.key = "min_nodes", .type = CFG_INT, .offset = CFG_OFF(tm_config_pool, min_nodes),
     .def = "0", .min = 0, .max = 10000},
    /* Required: the ceiling on spending must be a decision, not a default. */
    {.key = "max_nodes", .type = CFG_INT, .offset = CFG_OFF(tm_config_pool, max_nodes),
     .min = 0, .max = 10000, .flags = CFG_REQUIRED},
    {.key = "idle_grace", .type = CFG_DURATION, .offset = CFG_OFF(tm_config_pool, idle_grace_ms),
     .def = "10m", .min = 0, .max = 7 * CFG_DAY},
    /* Absent: the provider's.  normalise() fills them, so readers of a
     * loaded config never look at the provider for these. */
    {.key = "spot_hazard", .type = CFG_DOUBLE,
     .offset = CFG_OFF(tm_config_pool, spot_hazard_per_hour), .dmin = 0, .dmax = 100},
    {.key = "spot_notice", .type = CFG_DURATION, .offset = CFG_OFF(tm_config_pool, spot_notice_ms),
     .min = 0, .max = CFG_HOUR},
    /* No default on purpose: absent (both) means no disruption budget, set
     * (either) means one; normalise() records which.  The interval is at
     * most a day because the snapshot reads a day of disruptions. */
    {.key = "disruption_nodes", .type = CFG_INT, .offset = CFG_OFF(tm_config_pool, disruption_nodes),
     .min = 0, .max = 10000},
    {.key = "disruption_pct", .type = CFG_DOUBLE, .offset = CFG_OFF(tm_config_pool, disruption_pct),
     .dmin = 0, .dmax = 100},
    {.key = "disruption_interval", .type = CFG_DURATION,
     .offset = CFG_OFF(tm_config_pool, disruption_interval_ms), .def = "10m", .min = 1000,
     .max = CFG_DAY},
    {.key = "drain_oversized", .type = CFG_BOOL, .offset = CFG_OFF(tm_config_pool, drain_oversized),
     .def = "false"},
    /* The node agent: read and checked in config_check.c (cfg_load_bootstraps). */
    {.key = "bootstrap", .type = CFG_STR, .offset = CFG_OFF(tm_config_pool, bootstrap_file)},
    {.key = "checkpoint_dir", .type = CFG_STR, .offset = CFG_OFF(tm_config_pool, checkpoint_dir)},
    {.key = "idle_job_action", .type = CFG_STR, .offset = CFG_OFF(tm_config_pool, idle_job_action),
     .def = "report", .choices = cfg_idle_job_actions},
    /* Consolidation by restart of preemptible jobs that cannot checkpoint
     * (controller/fleet/planner.h); false forbids it on the pool's nodes. */
    {.key = "consolidate_restart", .type = CFG_BOOL,
     .offset = CFG_OFF(tm_config_pool, consolidate_restart), .def = "true"},
    /* Gangs bought whole: the cluster placement group (EC2) or compact
     * resource policy (GCP) a gang's set goes into; absent: none. */
    {.key = "placement_group", .type = CFG_STR, .offset = CFG_OFF(tm_config_pool, placement_group),
     .flags = CFG_NAME},
    /* One queue across clouds: config_check.c checks the members agree. */
    {.key = "group", .type = CFG_STR, .offset = CFG_OFF(tm_config_pool, group), .flags = CFG_NAME},
    /* Owned pools only (refused elsewhere in cfg_validate_pools). */
    {.key = "mixed_shapes", .type = CFG_BOOL, .offset = CFG_OFF(tm_config_pool, mixed_shapes),
     .def = "false"},
    {.key = "cost_per_node_hour", .type = CFG_PRICE,
     .offset = CFG_OFF(tm_config_pool, cost_uusd_per_node_hour), .min = 0, .max = TM_PRICE_MAX_UUSD},
    {.key = "suspended_cost_per_node_hour", .type = CFG_PRICE,
     .offset = CFG_OFF(tm_config_pool, suspended_cost_uusd_per_node_hour), .min = 0,
     .max = TM_PRICE_MAX_UUSD},
    /* Power saving, owned pools only: both commands or neither
     * (config_check.c). */
    {.key = "suspend_command", .type = CFG_STRLIST, .offset = CFG_OFF(tm_config_pool, suspend_command),
     .count_offset = CFG_OFF(tm_config_pool, nsuspend_command), .min = 1, .max = 64},
    {.key = "resume_command", .type = CFG_STRLIST, .offset = CFG_OFF(tm_config_pool, resume_command),
     .count_offset = CFG_OFF(tm_config_pool, nresume_command), .min = 1, .max = 64},
    {.key = "suspend_after", .type = CFG_DURATION, .offset = CFG_OFF(tm_config_pool, suspend_after_ms),
     .def = "30m", .min = 1000, .max = 30 * CFG_DAY},
    {.key = "power_changes_max", .type = CFG_INT, .offset = CFG_OFF(tm_config_pool, power_changes_max),
     .def = "1", .min = 1, .max = 10000},
    {.key = "resume_timeout", .type = CFG_DURATION, .offset = CFG_OFF(tm_config_pool, resume_timeout_ms),
     .def = "10m", .min = 1000, .max = CFG_DAY},
    {.key = "command_timeout", .type = CFG_DURATION,
     .offset = CFG_OFF(tm_config_pool, command_timeout_ms), .def = "1m", .min = 100, .max = CFG_HOUR},
    /* Reserved capacity: config_reservation.c checks what spans the keys,
     * the kind how its cloud spells an id. */
    {.key = "reservations", .type = CFG_LIST, .offset = CFG_OFF(tm_config_pool, reservations),
     .count_offset = CFG_OFF(tm_config_pool, nreservations), .min = 0, .max = 64,
     .sub = &tm_cfg_reservation_section},
    {.key = "reservation_fallback", .type = CFG_BOOL,
     .offset = CFG_OFF(tm_config_pool, reservation_fallback), .def = "true"},
};
static const struct cfg_section cfg_pool_section = {
    .fields = cfg_pool_fields, .nfields = CFG_NFIELDS(cfg_pool_fields),
    .size = sizeof(struct tm_config_pool)};

/* database: and scheduler: fill fields of struct tm_config itself, so their
 * offsets are relative to it and their sections sit at offset 0. */
static const struct cfg_field cfg_database_fields[] = {
    /* Required unless TARMAC_DATABASE_URL is set: checked in validate(). */
    {.key = "url", .type = CFG_STR, .offset = CFG_OFF(tm_config, database_url)},
    {.key = "pool_size", .type = CFG_UINT, .offset = CFG_OFF(tm_config, database_pool_size),
     .def = "4", .min = 1, .max = 64},
    /* docs/ha.md: a leader that renews nothing for this long is replaced. */
    {.key = "leader_lease", .type = CFG_DURATION, .offset = CFG_OFF(tm_config, database_leader_lease_ms),
     .def = "15s", .min = 500, .max = 10 * CFG_MIN},
};
static const struct cfg_section cfg_database_section = {
    .fields = cfg_database_fields, .nfields = CFG_NFIELDS(cfg_database_fields), .size = 0};

static const struct cfg_field cfg_scheduler_fields[] = {
    {.key = "policy", .type = CFG_STR, .offset = CFG_OFF(tm_config, scheduler_policy),
     .def = "tarmac", .choices = cfg_policies},
    {.key = "starvation_bound", .type = CFG_DURATION, .offset = CFG_OFF(tm_config, starvation_ms),
     .def = "1h", .min = CFG_MIN, .max = 30 * CFG_DAY},
};
static const struct cfg_section cfg_scheduler_section = {
    .fields = cfg_scheduler_fields, .nfields = CFG_NFIELDS(cfg_scheduler_fields), .size = 0};

static const struct cfg_field cfg_api_fields[] = {
    {.key = "tls_cert_file", .type = CFG_STR, .offset = CFG_OFF(tm_config_api, tls_cert_file)},
    {.key = "tls_key_file", .type = CFG_STR, .offset = CFG_OFF(tm_config_api, tls_key_file)},
    {.key = "metrics_token_file", .type = CFG_STR,
     .offset = CFG_OFF(tm_config_api, metrics_token_file)},
    {.key = "max_body_bytes", .type = CFG_I64, .offset = CFG_OFF(tm_config_api, max_body_bytes),
     .def = "262144", .min = 1024, .max = 64LL << 20},
    {.key = "max_list", .type = CFG_UINT, .offset = CFG_OFF(tm_config_api, max_list),
     .def = "1000", .min = 1, .max = 100000},
    {.key = "rate_per_token", .type = CFG_DOUBLE, .offset = CFG_OFF(tm_config_api, rate_per_s),
     .def = "100", .dmin = 0.01, .dmax = 1e6},
    {.key = "burst", .type = CFG_DOUBLE, .offset = CFG_OFF(tm_config_api, burst),
     .def = "200", .dmin = 1, .dmax = 1e7},
    /* docs/ha.md: past it a request answers 503 and its statement is dropped. */
    {.key = "request_timeout", .type = CFG_DURATION, .offset = CFG_OFF(tm_config_api, request_timeout_ms),
     .def = "5s", .min = 100, .max = 10 * CFG_MIN},
    /* Enrollment's bucket per client address (controller/api/auth.c). */
    {.key = "enroll_rate_per_address", .type = CFG_DOUBLE,
     .offset = CFG_OFF(tm_config_api, enroll_rate_per_s), .def = "2", .dmin = 0.01, .dmax = 1e6},
    {.key = "enroll_burst", .type = CFG_DOUBLE, .offset = CFG_OFF(tm_config_api, enroll_burst),
     .def = "50", .dmin = 1, .dmax = 1e7},
};
static const struct cfg_section cfg_api_section = {
    .fields = cfg_api_fields, .nfields = CFG_NFIELDS(cfg_api_fields),
    .size = sizeof(struct tm_config_api)};

static const struct cfg_field cfg_alerts_fields[] = {
    {.key = "webhook_url", .type = CFG_STR, .offset = CFG_OFF(tm_config_alerts, webhook_url)},
    {.key = "webhook_timeout", .type = CFG_DURATION,
     .offset = CFG_OFF(tm_config_alerts, webhook_timeout_ms), .def = "5s", .min = 100,
     .max = CFG_MIN},
    {.key = "webhook_attempts", .type = CFG_INT, .offset = CFG_OFF(tm_config_alerts, webhook_attempts),
     .def = "5", .min = 1, .max = 100},
    {.key = "webhook_backoff", .type = CFG_DURATION,
     .offset = CFG_OFF(tm_config_alerts, webhook_backoff_ms), .def = "2s", .min = 10,
     .max = CFG_HOUR},
    {.key = "pool_utilisation_below_percent", .type = CFG_DOUBLE,
     .offset = CFG_OFF(tm_config_alerts, pool_util_below_percent), .def = "0", .dmin = 0,
     .dmax = 100},
    {.key = "pool_utilisation_for", .type = CFG_DURATION,
     .offset = CFG_OFF(tm_config_alerts, pool_util_for_ms), .def = "15m", .min = 0,
     .max = 7 * CFG_DAY},
    {.key = "queue_age_above", .type = CFG_DURATION,
     .offset = CFG_OFF(tm_config_alerts, queue_age_above_ms), .def = "0", .min = 0,
     .max = 30 * CFG_DAY},
    {.key = "soft_cap", .type = CFG_BOOL, .offset = CFG_OFF(tm_config_alerts, soft_cap),
     .def = "true"},
    {.key = "provider_auth", .type = CFG_BOOL, .offset = CFG_OFF(tm_config_alerts, provider_auth),
     .def = "true"},
};
static const struct cfg_section cfg_alerts_section = {
    .fields = cfg_alerts_fields, .nfields = CFG_NFIELDS(cfg_alerts_fields),
    .size = sizeof(struct tm_config_alerts)};

static const struct cfg_field cfg_forecast_fields[] = {
    {.key = "quantile", .type = CFG_DOUBLE, .offset = CFG_OFF(tm_config_forecast, quantile),
     .def = "0.9", .dmin = 0.5, .dmax = 0.999},
    {.key = "history", .type = CFG_DURATION, .offset = CFG_OFF(tm_config_forecast, history_ms),
     .def = "8d", .min = 0, .max = 35 * CFG_DAY},
};
static const struct cfg_section cfg_forecast_section = {
    .fields = cfg_forecast_fields, .nfields = CFG_NFIELDS(cfg_forecast_fields),
    .size = sizeof(struct tm_config_forecast)};

static const struct cfg_field cfg_agent_fields[] = {
    {.key = "controller_url", .type = CFG_STR, .offset = CFG_OFF(tm_config_agent, controller_url)},
    {.key = "ca_file", .type = CFG_STR, .offset = CFG_OFF(tm_config_agent, ca_file)},
    {.key = "enroll_ttl", .type = CFG_DURATION, .offset = CFG_OFF(tm_config_agent, enroll_ttl_ms),
     .def = "30m", .min = CFG_MIN, .max = CFG_DAY},
    {.key = "unreachable_after", .type = CFG_DURATION,
     .offset = CFG_OFF(tm_config_agent, unreachable_after_ms), .def = "2m", .min = 1000,
     .max = CFG_DAY},
    {.key = "requeue_after", .type = CFG_DURATION,
     .offset = CFG_OFF(tm_config_agent, requeue_after_ms), .def = "5m", .min = 1000,
     .max = CFG_DAY},
    {.key = "terminate_after", .type = CFG_DURATION,
     .offset = CFG_OFF(tm_config_agent, terminate_after_ms), .def = "15m", .min = 1000,
     .max = 7 * CFG_DAY},
    {.key = "boot_allowance", .type = CFG_DURATION,
     .offset = CFG_OFF(tm_config_agent, boot_allowance_ms), .def = "10m", .min = 0,
     .max = CFG_DAY},
    {.key = "sample_retention", .type = CFG_DURATION,
     .offset = CFG_OFF(tm_config_agent, sample_retention_ms), .def = "7d", .min = CFG_MIN,
     .max = 365 * CFG_DAY},
    /* fencing: an unfenceable silent node's jobs wait this long */
    {.key = "fence_after", .type = CFG_DURATION,
     .offset = CFG_OFF(tm_config_agent, fence_after_ms), .def = "30m", .min = 1000,
     .max = 7 * CFG_DAY},
    /* Bounded telemetry (controller/api/nodes.c). */
    {.key = "clock_skew", .type = CFG_DURATION, .offset = CFG_OFF(tm_config_agent, clock_skew_ms),
     .def = "2m", .min = 1000, .max = CFG_HOUR},
    {.key = "sample_max_age", .type = CFG_DURATION,
     .offset = CFG_OFF(tm_config_agent, sample_max_age_ms), .def = "6h", .min = CFG_MIN,
     .max = 365 * CFG_DAY},
    {.key = "min_sample_period", .type = CFG_DURATION,
     .offset = CFG_OFF(tm_config_agent, min_sample_period_ms), .def = "1s", .min = 100,
     .max = CFG_HOUR},
    /* Nodes that never enroll (controller/reconcile/no_show.c). */
    {.key = "no_show_backoff", .type = CFG_DURATION,
     .offset = CFG_OFF(tm_config_agent, no_show_backoff_ms), .def = "1m", .min = 0, .max = CFG_DAY},
    {.key = "no_show_backoff_max", .type = CFG_DURATION,
     .offset = CFG_OFF(tm_config_agent, no_show_backoff_max_ms), .def = "1h", .min = 0,
     .max = 7 * CFG_DAY},
    {.key = "no_show_alert_after", .type = CFG_INT,
     .offset = CFG_OFF(tm_config_agent, no_show_alert_after), .def = "3", .min = 0, .max = 1000},
    /* Mass silence: many nodes silent at once is the controller's or the
     * network's problem (controller/reconcile/staleness.c). */
    {.key = "mass_silence_share", .type = CFG_DOUBLE,
     .offset = CFG_OFF(tm_config_agent, mass_silence_share), .def = "0.55", .dmin = 0.05, .dmax = 1},
    {.key = "mass_silence_min_nodes", .type = CFG_INT,
     .offset = CFG_OFF(tm_config_agent, mass_silence_min_nodes), .def = "3", .min = 0, .max = 100000},
    /* Multi-node rendezvous: the master ports (migrations/0020). */
    {.key = "rendezvous_port_min", .type = CFG_INT,
     .offset = CFG_OFF(tm_config_agent, rendezvous_port_min), .def = "29500", .min = 1024, .max = 65535},
    {.key = "rendezvous_port_max", .type = CFG_INT,
     .offset = CFG_OFF(tm_config_agent, rendezvous_port_max), .def = "29999", .min = 1024, .max = 65535},
    /* A gang's start barrier: how long its first claim waits for the
     * others before the gang is requeued whole (migrations/0021). */
    {.key = "gang_start_timeout", .type = CFG_DURATION,
     .offset = CFG_OFF(tm_config_agent, gang_start_timeout_ms), .def = "5m", .min = 1000,
     .max = CFG_DAY},
};
static const struct cfg_section cfg_agent_section = {
    .fields = cfg_agent_fields, .nfields = CFG_NFIELDS(cfg_agent_fields),
    .size = sizeof(struct tm_config_agent)};

static const struct cfg_field cfg_idle_gpu_fields[] = {
    {.key = "threshold", .type = CFG_DOUBLE, .offset = CFG_OFF(tm_config_idle_gpu, threshold_percent),
     .def = "5", .dmin = 0, .dmax = 100},
    {.key = "window", .type = CFG_DURATION, .offset = CFG_OFF(tm_config_idle_gpu, window_ms),
     .def = "30m", .min = 1000, .max = 7 * CFG_DAY},
};
static const struct cfg_section cfg_idle_gpu_section = {
    .fields = cfg_idle_gpu_fields, .nfields = CFG_NFIELDS(cfg_idle_gpu_fields),
    .size = sizeof(struct tm_config_idle_gpu)};

/* logs.s3: the bucket of logs.store: s3 (docs/logs.md). */
static const struct cfg_field cfg_logs_s3_fields[] = {
    {.key = "bucket", .type = CFG_STR, .offset = CFG_OFF(tm_config_logs_s3, bucket)},
    {.key = "endpoint", .type = CFG_STR, .offset = CFG_OFF(tm_config_logs_s3, endpoint)},
    {.key = "region", .type = CFG_STR, .offset = CFG_OFF(tm_config_logs_s3, region)},
    {.key = "prefix", .type = CFG_STR, .offset = CFG_OFF(tm_config_logs_s3, prefix),
     .def = "tarmac-logs/"},
    {.key = "credentials", .type = CFG_SECTION, .offset = CFG_OFF(tm_config_logs_s3, credentials),
     .sub = &cfg_cred_section},
    {.key = "timeout", .type = CFG_DURATION, .offset = CFG_OFF(tm_config_logs_s3, timeout_ms),
     .def = "60s", .min = 1000, .max = 10 * CFG_MIN},
};
static const struct cfg_section cfg_logs_s3_section = {
    .fields = cfg_logs_s3_fields, .nfields = CFG_NFIELDS(cfg_logs_s3_fields),
    .size = sizeof(struct tm_config_logs_s3)};

/* logs: a job's output kept by the controller (docs/logs.md). */
static const char *const cfg_log_stores[] = {"postgres", "s3", NULL};
static const struct cfg_field cfg_logs_fields[] = {
    {.key = "store", .type = CFG_STR, .offset = CFG_OFF(tm_config_logs, store), .def = "postgres",
     .choices = cfg_log_stores},
    {.key = "max_bytes_per_job", .type = CFG_I64, .offset = CFG_OFF(tm_config_logs, max_bytes_per_job),
     .def = "67108864", .min = 65536, .max = 1LL << 40},
    {.key = "retention", .type = CFG_DURATION, .offset = CFG_OFF(tm_config_logs, retention_ms),
     .def = "14d", .min = CFG_HOUR, .max = 3650 * CFG_DAY},
    {.key = "max_chunk", .type = CFG_I64, .offset = CFG_OFF(tm_config_logs, max_chunk),
     .def = "65536", .min = 1024, .max = 1 << 20},
    {.key = "follow_limit", .type = CFG_DURATION, .offset = CFG_OFF(tm_config_logs, follow_limit_ms),
     .def = "30s", .min = 1000, .max = 10 * CFG_MIN},
    {.key = "s3", .type = CFG_SECTION, .offset = CFG_OFF(tm_config_logs, s3), .sub = &cfg_logs_s3_section},
};
static const struct cfg_section cfg_logs_section = {
    .fields = cfg_logs_fields, .nfields = CFG_NFIELDS(cfg_logs_fields),
    .size = sizeof(struct tm_config_logs)};

static const struct cfg_field cfg_root_fields[] = {
    {.key = "database", .type = CFG_SECTION, .offset = 0, .sub = &cfg_database_section},
    {.key = "listen", .type = CFG_STR, .offset = CFG_OFF(tm_config, listen),
     .def = "127.0.0.1:8080"},
    {.key = "cluster", .type = CFG_STR, .offset = CFG_OFF(tm_config, cluster),
     .flags = CFG_REQUIRED},
    {.key = "tick_interval", .type = CFG_DURATION, .offset = CFG_OFF(tm_config, tick_interval_ms),
     .def = "5s", .min = 100, .max = 10 * CFG_MIN},
    {.key = "time_scale", .type = CFG_DOUBLE, .offset = CFG_OFF(tm_config, time_scale),
     .def = "1", .dmin = 1, .dmax = 10000},
    {.key = "log_level", .type = CFG_STR, .offset = CFG_OFF(tm_config, log_level),
     .def = "info", .choices = cfg_log_levels},
    {.key = "scheduler", .type = CFG_SECTION, .offset = 0, .sub = &cfg_scheduler_section},
    {.key = "api", .type = CFG_SECTION, .offset = CFG_OFF(tm_config, api), .sub = &cfg_api_section},
    {.key = "alerts", .type = CFG_SECTION, .offset = CFG_OFF(tm_config, alerts),
     .sub = &cfg_alerts_section},
    {.key = "forecast", .type = CFG_SECTION, .offset = CFG_OFF(tm_config, forecast),
     .sub = &cfg_forecast_section},
    {.key = "agent", .type = CFG_SECTION, .offset = CFG_OFF(tm_config, agent),
     .sub = &cfg_agent_section},
    {.key = "idle_gpu", .type = CFG_SECTION, .offset = CFG_OFF(tm_config, idle_gpu),
     .sub = &cfg_idle_gpu_section},
    {.key = "logs", .type = CFG_SECTION, .offset = CFG_OFF(tm_config, logs), .sub = &cfg_logs_section},
    {.key = "providers", .type = CFG_LIST, .offset = CFG_OFF(tm_config, providers),
     .count_offset = CFG_OFF(tm_config, nproviders), .min = 1, .max = 64,
     .flags = CFG_REQUIRED, .sub = &cfg_provider_section},
    {.key = "pools", .type = CFG_LIST, .offset = CFG_OFF(tm_config, pools),
     .count_offset = CFG_OFF(tm_config, npools), .min = 1, .max = 1024,
     .flags = CFG_REQUIRED, .sub = &cfg_pool_section},
    /* A pool group's own settings (config_pool_group.c). */
    {.key = "pool_groups", .type = CFG_LIST, .offset = CFG_OFF(tm_config, pool_groups),
     .count_offset = CFG_OFF(tm_config, npool_groups), .min = 0, .max = 1024,
     .sub = &tm_cfg_pool_group_section},
};
const struct cfg_section tm_cfg_root_section = {
    .fields = cfg_root_fields, .nfields = CFG_NFIELDS(cfg_root_fields),
    .size = sizeof(struct tm_config)};
