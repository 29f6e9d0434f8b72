/*
 * core/config.c: load, validate and normalise the YAML configuration.
 *
 * libyaml's document API builds a node tree that remembers where each node
 * started in the file, so every message can name the file, the line and the
 * full key path.  The shape of the file is described by one static table per
 * section (struct cfg_field, in the manner of nginx's command tables): key,
 * type, offsetof, default written in file syntax, and limits.  The same tables
 * drive parsing, applying defaults and releasing memory, so the three cannot
 * drift apart, and config/tarmac.example.yaml documents exactly these rows.
 *
 * Order of work: parse (types, ranges, unknown and duplicate keys, per
 * table), then validate (rules that span keys: unique names, references from
 * pools to providers and types, min <= max), then normalise (fill values a
 * pool may leave to its instance types).  The result is handed to the caller
 * only when all three succeed.
 */
#include "core/config.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sys/stat.h>

#include <openssl/crypto.h>
#include <yaml.h>

#include "core/err.h"
#include "core/log.h"
#include "core/spot_hazards.h"
#include "core/units.h"

/* A configuration file is written by a person; anything larger is a mistake
 * (or an attack on the parser), and it bounds libyaml's memory use. */
#define CFG_FILE_MAX (1024u * 1024u)
#define CFG_PATH_MAX 256
#define CFG_FIELDS_MAX 32
#define CFG_NAME_MAX 64
#define CFG_STRING_MAX 4096

#define CFG_SEC (1000LL)
#define CFG_MIN (60LL * CFG_SEC)
#define CFG_HOUR (60LL * CFG_MIN)
#define CFG_DAY (24LL * CFG_HOUR)
#define CFG_UUSD 1000000LL

/*
 * Allocation failures are injected by tests that #include this file with
 * TM_CONFIG_FAULT_INJECTION defined (SQLite's countdown allocator): the
 * allocation numbered cfg_fault_countdown fails.  libyaml's own allocations
 * are not covered.
 */
#ifdef TM_CONFIG_FAULT_INJECTION
static long cfg_fault_countdown = -1;

static bool cfg_fault(void)
{
    if (cfg_fault_countdown < 0)
        return false;
    return cfg_fault_countdown-- == 0;
}
#else
static bool cfg_fault(void)
{
    return false;
}
#endif

static void *cfg_calloc(size_t n, size_t size)
{
    if (cfg_fault())
        return NULL;
    return calloc(n, size);
}

static char *cfg_strdup(const char *s)
{
    if (cfg_fault())
        return NULL;
    return strdup(s);
}

static char *cfg_strndup(const char *s, size_t n)
{
    if (cfg_fault())
        return NULL;
    return strndup(s, n);
}

enum cfg_type {
    CFG_STR,      /* char * */
    CFG_INT,      /* int, [min, max] */
    CFG_UINT,     /* unsigned, [min, max] */
    CFG_I64,      /* int64_t, [min, max] */
    CFG_U64,      /* uint64_t, any value */
    CFG_DOUBLE,   /* double, [dmin, dmax] */
    CFG_DURATION, /* int64_t milliseconds, [min, max] */
    CFG_PRICE,    /* int64_t micro-dollars, [min, max] */
    CFG_BOOL,     /* bool: true or false */
    CFG_STRLIST,  /* char ** plus size_t count at count_offset, [min, max] entries */
    CFG_SECTION,  /* a nested mapping whose fields are relative to offset */
    CFG_LIST,     /* an array of sub->size structs plus size_t count, [min, max] entries */
};

enum cfg_flags {
    CFG_REQUIRED = (1u << 0), /* the key must be present and not null */
    CFG_NAME = (1u << 1),     /* [A-Za-z0-9._-]{1,64}: names, zones, models */
};

struct cfg_section;

struct cfg_field {
    const char *key;
    enum cfg_type type;
    size_t offset;
    const char *def;             /* default in file syntax; NULL = none */
    int64_t min, max;            /* integers, durations (ms), prices, list lengths */
    double dmin, dmax;           /* CFG_DOUBLE */
    unsigned flags;
    const char *const *choices;  /* CFG_STR: the allowed values, NULL-terminated */
    const struct cfg_section *sub;
    size_t count_offset;         /* CFG_LIST, CFG_STRLIST */
};

struct cfg_section {
    const struct cfg_field *fields;
    size_t nfields;
    size_t size; /* of one element, for CFG_LIST */
};

#define CFG_NFIELDS(a) (sizeof(a) / sizeof((a)[0]))
#define CFG_OFF(type, member) offsetof(struct type, member)

static const char *const cfg_log_levels[] = {"debug", "info", "warn", "error", NULL};
static const char *const cfg_policies[] = {"fifo", "backfill", "tarmac", NULL};
static const char *const cfg_kinds[] = {"sim", "aws", "gcp", "azure", NULL};
static const char *const cfg_cred_sources[] = {"none", "env", "file", "instance_role", NULL};
static const char *const cfg_capacity_types[] = {"on_demand", "spot", "spot_then_on_demand", NULL};

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
    cfg_type_fields, CFG_NFIELDS(cfg_type_fields), sizeof(struct tm_config_instance_type)};

static const struct cfg_field cfg_cred_fields[] = {
    {.key = "source", .type = CFG_STR, .offset = CFG_OFF(tm_config_credentials, source),
     .def = "none", .choices = cfg_cred_sources},
    {.key = "file", .type = CFG_STR, .offset = CFG_OFF(tm_config_credentials, file)},
    {.key = "profile", .type = CFG_STR, .offset = CFG_OFF(tm_config_credentials, profile),
     .flags = CFG_NAME},
};
static const struct cfg_section cfg_cred_section = {
    cfg_cred_fields, CFG_NFIELDS(cfg_cred_fields), sizeof(struct tm_config_credentials)};

static const struct cfg_field cfg_provider_fields[] = {
    {.key = "name", .type = CFG_STR, .offset = CFG_OFF(tm_config_provider, name),
     .flags = CFG_REQUIRED | CFG_NAME},
    {.key = "kind", .type = CFG_STR, .offset = CFG_OFF(tm_config_provider, kind),
     .flags = CFG_REQUIRED, .choices = cfg_kinds},
    {.key = "region", .type = CFG_STR, .offset = CFG_OFF(tm_config_provider, region),
     .flags = CFG_REQUIRED | CFG_NAME},
    {.key = "endpoint", .type = CFG_STR, .offset = CFG_OFF(tm_config_provider, endpoint)},
    {.key = "image_id", .type = CFG_STR, .offset = CFG_OFF(tm_config_provider, image_id)},
    {.key = "credentials", .type = CFG_SECTION, .offset = CFG_OFF(tm_config_provider, credentials),
     .sub = &cfg_cred_section},
    {.key = "boot_delay", .type = CFG_DURATION, .offset = CFG_OFF(tm_config_provider, boot_delay_ms),
     .def = "90s", .min = 0, .max = CFG_DAY},
    {.key = "spot_hazard", .type = CFG_DOUBLE,
     .offset = CFG_OFF(tm_config_provider, spot_hazard_per_hour), .def = "0", .dmin = 0, .dmax = 100},
    {.key = "spot_notice", .type = CFG_DURATION, .offset = CFG_OFF(tm_config_provider, spot_notice_ms),
     .def = "120s", .min = 0, .max = CFG_HOUR},
    {.key = "shutdown_delay", .type = CFG_DURATION,
     .offset = CFG_OFF(tm_config_provider, shutdown_delay_ms), .def = "30s", .min = 0, .max = CFG_HOUR},
    {.key = "seed", .type = CFG_U64, .offset = CFG_OFF(tm_config_provider, seed), .def = "1"},
    /* A path; cfg_load_spot_hazards() reads the table once validation passed. */
    {.key = "spot_hazards", .type = CFG_STR, .offset = CFG_OFF(tm_config_provider, spot_hazards_file)},
    {.key = "instance_types", .type = CFG_LIST, .offset = CFG_OFF(tm_config_provider, types),
     .count_offset = CFG_OFF(tm_config_provider, ntypes), .min = 0, .max = 256,
     .sub = &cfg_type_section},
};
static const struct cfg_section cfg_provider_section = {
    cfg_provider_fields, CFG_NFIELDS(cfg_provider_fields), sizeof(struct tm_config_provider)};

static const struct cfg_field cfg_pool_fields[] = {
    {.key = "name", .type = CFG_STR, .offset = CFG_OFF(tm_config_pool, name),
     .flags = CFG_REQUIRED | CFG_NAME},
    {.key = "provider", .type = CFG_STR, .offset = CFG_OFF(tm_config_pool, provider),
     .flags = CFG_REQUIRED | CFG_NAME},
    {.key = "zones", .type = CFG_STRLIST, .offset = CFG_OFF(tm_config_pool, zones),
     .count_offset = CFG_OFF(tm_config_pool, nzones), .min = 1, .max = 64,
     .flags = CFG_REQUIRED | CFG_NAME},
    {.key = "instance_types", .type = CFG_STRLIST, .offset = CFG_OFF(tm_config_pool, instance_types),
     .count_offset = CFG_OFF(tm_config_pool, ninstance_types), .min = 1, .max = 64,
     .flags = CFG_REQUIRED | CFG_NAME},
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
};
static const struct cfg_section cfg_pool_section = {
    cfg_pool_fields, CFG_NFIELDS(cfg_pool_fields), sizeof(struct tm_config_pool)};

/* database: and scheduler: fill fields of struct tm_config itself, so their
 * offsets are relative to it and their sections sit at offset 0. */
static const struct cfg_field cfg_database_fields[] = {
    /* Required unless TARMAC_DATABASE_URL is set: checked in validate(). */
    {.key = "url", .type = CFG_STR, .offset = CFG_OFF(tm_config, database_url)},
    {.key = "pool_size", .type = CFG_UINT, .offset = CFG_OFF(tm_config, database_pool_size),
     .def = "4", .min = 1, .max = 64},
};
static const struct cfg_section cfg_database_section = {
    cfg_database_fields, CFG_NFIELDS(cfg_database_fields), 0};

static const struct cfg_field cfg_scheduler_fields[] = {
    {.key = "policy", .type = CFG_STR, .offset = CFG_OFF(tm_config, scheduler_policy),
     .def = "tarmac", .choices = cfg_policies},
    {.key = "starvation_bound", .type = CFG_DURATION, .offset = CFG_OFF(tm_config, starvation_ms),
     .def = "1h", .min = CFG_MIN, .max = 30 * CFG_DAY},
};
static const struct cfg_section cfg_scheduler_section = {
    cfg_scheduler_fields, CFG_NFIELDS(cfg_scheduler_fields), 0};

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
};
static const struct cfg_section cfg_api_section = {
    cfg_api_fields, CFG_NFIELDS(cfg_api_fields), sizeof(struct tm_config_api)};

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
    cfg_alerts_fields, CFG_NFIELDS(cfg_alerts_fields), sizeof(struct tm_config_alerts)};

static const struct cfg_field cfg_forecast_fields[] = {
    {.key = "quantile", .type = CFG_DOUBLE, .offset = CFG_OFF(tm_config_forecast, quantile),
     .def = "0.9", .dmin = 0.5, .dmax = 0.999},
    {.key = "history", .type = CFG_DURATION, .offset = CFG_OFF(tm_config_forecast, history_ms),
     .def = "8d", .min = 0, .max = 35 * CFG_DAY},
};
static const struct cfg_section cfg_forecast_section = {
    cfg_forecast_fields, CFG_NFIELDS(cfg_forecast_fields), sizeof(struct tm_config_forecast)};

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
    {.key = "providers", .type = CFG_LIST, .offset = CFG_OFF(tm_config, providers),
     .count_offset = CFG_OFF(tm_config, nproviders), .min = 1, .max = 64,
     .flags = CFG_REQUIRED, .sub = &cfg_provider_section},
    {.key = "pools", .type = CFG_LIST, .offset = CFG_OFF(tm_config, pools),
     .count_offset = CFG_OFF(tm_config, npools), .min = 1, .max = 1024,
     .flags = CFG_REQUIRED, .sub = &cfg_pool_section},
};
static const struct cfg_section cfg_root_section = {
    cfg_root_fields, CFG_NFIELDS(cfg_root_fields), sizeof(struct tm_config)};

/* State of one load: where messages go and the key path being parsed. */
struct cfg_ctx {
    const char *name;
    yaml_document_t *doc;
    const yaml_node_t *root;
    char *err;
    size_t errsize;
    char path[CFG_PATH_MAX];
    size_t pathlen;
};

/* ---- messages ---------------------------------------------------------- */

static size_t cfg_node_line(const yaml_node_t *node)
{
    return node ? node->start_mark.line + 1 : 1;
}

/* Write "FILE:LINE: key \"PATH\": REASON" (or without the key part at the
 * top level) and return TM_EINVAL, so callers can `return cfg_fail(...)`. */
static int cfg_failv(struct cfg_ctx *c, const yaml_node_t *at, const char *fmt, va_list ap)
{
    int n;

    if (!c->err || c->errsize == 0)
        return TM_EINVAL;
    if (c->pathlen > 0)
        n = snprintf(c->err, c->errsize, "%s:%zu: key \"%s\": ", c->name, cfg_node_line(at),
                     c->path);
    else
        n = snprintf(c->err, c->errsize, "%s:%zu: ", c->name, cfg_node_line(at));
    if (n >= 0 && (size_t)n < c->errsize)
        vsnprintf(c->err + n, c->errsize - (size_t)n, fmt, ap);
    return TM_EINVAL;
}

__attribute__((format(printf, 3, 4)))
static int cfg_fail(struct cfg_ctx *c, const yaml_node_t *at, const char *fmt, ...)
{
    va_list ap;
    int r;

    va_start(ap, fmt);
    r = cfg_failv(c, at, fmt, ap);
    va_end(ap);
    return r;
}

static int cfg_nomem(struct cfg_ctx *c)
{
    if (c->err && c->errsize > 0)
        snprintf(c->err, c->errsize, "%s: out of memory", c->name);
    return TM_ENOMEM;
}

/* Key paths are built as parsing descends: "pools[1].max_nodes".  Bytes
 * from the file that could garble a terminal are shown as '?'. */
static size_t cfg_path_push_key(struct cfg_ctx *c, const char *key)
{
    size_t old = c->pathlen;
    size_t room = sizeof(c->path) - 1;

    if (c->pathlen > 0 && c->pathlen < room)
        c->path[c->pathlen++] = '.';
    for (const char *p = key; *p && c->pathlen < room; p++) {
        unsigned char ch = (unsigned char)*p;
        c->path[c->pathlen++] = (ch < 0x20 || ch == 0x7f || ch == '"') ? '?' : (char)ch;
    }
    c->path[c->pathlen] = '\0';
    return old;
}

static size_t cfg_path_push_index(struct cfg_ctx *c, size_t i)
{
    size_t old = c->pathlen;
    int n = snprintf(c->path + c->pathlen, sizeof(c->path) - c->pathlen, "[%zu]", i);

    if (n > 0)
        c->pathlen += (size_t)n;
    if (c->pathlen >= sizeof(c->path))
        c->pathlen = sizeof(c->path) - 1;
    return old;
}

static void cfg_path_pop(struct cfg_ctx *c, size_t len)
{
    c->pathlen = len;
    c->path[len] = '\0';
}

/* Set the path outright, for checks that run after parsing. */
__attribute__((format(printf, 2, 3)))
static void cfg_path_set(struct cfg_ctx *c, const char *fmt, ...)
{
    va_list ap;
    int n;

    va_start(ap, fmt);
    n = vsnprintf(c->path, sizeof(c->path), fmt, ap);
    va_end(ap);
    if (n < 0)
        n = 0;
    c->pathlen = (size_t)n < sizeof(c->path) ? (size_t)n : sizeof(c->path) - 1;
    c->path[c->pathlen] = '\0';
}

static const char *cfg_node_kind(const yaml_node_t *node)
{
    switch (node->type) {
    case YAML_MAPPING_NODE:
        return "a mapping";
    case YAML_SEQUENCE_NODE:
        return "a sequence";
    default:
        return "a scalar";
    }
}

static const char *cfg_type_noun(enum cfg_type t)
{
    switch (t) {
    case CFG_STR:
        return "a string";
    case CFG_INT:
    case CFG_UINT:
    case CFG_I64:
    case CFG_U64:
        return "an integer";
    case CFG_DOUBLE:
        return "a number";
    case CFG_DURATION:
        return "a duration";
    case CFG_PRICE:
        return "a price";
    case CFG_BOOL:
        return "true or false";
    case CFG_STRLIST:
    case CFG_LIST:
        return "a sequence";
    case CFG_SECTION:
        return "a mapping";
    }
    return "a value";
}

/* Milliseconds in the largest unit that divides them, for limits in
 * messages ("must be between 100ms and 10m"). */
static void cfg_format_duration(int64_t ms, char *buf, size_t size)
{
    static const struct { int64_t ms; const char *unit; } units[] = {
        {CFG_DAY, "d"}, {CFG_HOUR, "h"}, {CFG_MIN, "m"}, {CFG_SEC, "s"},
    };

    for (size_t i = 0; i < sizeof(units) / sizeof(units[0]); i++)
        if (ms != 0 && ms % units[i].ms == 0) {
            snprintf(buf, size, "%lld%s", (long long)(ms / units[i].ms), units[i].unit);
            return;
        }
    snprintf(buf, size, "%lldms", (long long)ms);
}

static void cfg_format_price(int64_t uusd, char *buf, size_t size)
{
    snprintf(buf, size, "%lld.%06lld", (long long)(uusd / CFG_UUSD), (long long)(uusd % CFG_UUSD));
}

/* ---- scalar parsers ----------------------------------------------------- */

static bool cfg_is_digit(char ch)
{
    return ch >= '0' && ch <= '9';
}

/* Decimal only: YAML 1.1's 0x, 0o, 1_000 and 1:30 forms are typos more often
 * than intent in this file.  Returns false on garbage or overflow. */
static bool cfg_parse_i64(const char *s, int64_t *ret)
{
    bool neg = false;
    uint64_t v = 0;
    uint64_t limit;

    if (*s == '-' || *s == '+')
        neg = *s++ == '-';
    if (!cfg_is_digit(*s))
        return false;
    limit = neg ? (uint64_t)INT64_MAX + 1 : (uint64_t)INT64_MAX;
    for (; *s; s++) {
        if (!cfg_is_digit(*s))
            return false;
        if (v > (limit - (uint64_t)(*s - '0')) / 10)
            return false;
        v = v * 10 + (uint64_t)(*s - '0');
    }
    /* -(INT64_MIN) does not fit, so negate in unsigned arithmetic. */
    *ret = neg ? (int64_t)(0 - v) : (int64_t)v;
    return true;
}

static bool cfg_parse_u64(const char *s, uint64_t *ret)
{
    uint64_t v = 0;

    if (*s == '+')
        s++;
    if (!cfg_is_digit(*s))
        return false;
    for (; *s; s++) {
        if (!cfg_is_digit(*s))
            return false;
        if (v > (UINT64_MAX - (uint64_t)(*s - '0')) / 10)
            return false;
        v = v * 10 + (uint64_t)(*s - '0');
    }
    *ret = v;
    return true;
}

static bool cfg_parse_double(const char *s, double *ret)
{
    char *end;
    double v;

    /* strtod also takes "inf", "nan" and hex floats; allow only what a person
     * writes for a rate or a factor. */
    for (const char *p = s; *p; p++)
        if (!cfg_is_digit(*p) && !strchr("+-.eE", *p))
            return false;
    if (!*s)
        return false;
    errno = 0;
    v = strtod(s, &end);
    if (*end != '\0' || errno == ERANGE || !isfinite(v))
        return false;
    *ret = v;
    return true;
}

/* ---- table-driven parsing ------------------------------------------------ */

static char *cfg_field_ptr(void *base, const struct cfg_field *f)
{
    return (char *)base + f->offset;
}

static bool cfg_name_ok(const char *s)
{
    size_t n = strlen(s);

    if (n == 0 || n > CFG_NAME_MAX)
        return false;
    for (; *s; s++)
        if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') || cfg_is_digit(*s) ||
              *s == '.' || *s == '_' || *s == '-'))
            return false;
    return true;
}

static int cfg_check_choice(struct cfg_ctx *c, const struct cfg_field *f, const char *s,
                            const yaml_node_t *at)
{
    char list[256];
    size_t used = 0;

    for (const char *const *ch = f->choices; *ch; ch++)
        if (strcmp(*ch, s) == 0)
            return 0;
    list[0] = '\0';
    for (const char *const *ch = f->choices; *ch; ch++) {
        int n = snprintf(list + used, sizeof(list) - used, "%s%s", used ? ", " : "", *ch);
        if (n < 0 || (size_t)n >= sizeof(list) - used)
            break;
        used += (size_t)n;
    }
    return cfg_fail(c, at, "unrecognized value \"%.64s\", expected one of: %s", s, list);
}

static int cfg_check_string(struct cfg_ctx *c, const struct cfg_field *f, const char *s,
                            const yaml_node_t *at)
{
    if (f->choices)
        return cfg_check_choice(c, f, s, at);
    if (f->flags & CFG_NAME) {
        if (!cfg_name_ok(s))
            return cfg_fail(c, at, "bad name \"%.64s\": expected 1 to %d of A-Z a-z 0-9 . _ -", s,
                            CFG_NAME_MAX);
        return 0;
    }
    if (!*s)
        return cfg_fail(c, at, "must not be empty");
    if (strlen(s) > CFG_STRING_MAX)
        return cfg_fail(c, at, "is longer than %d bytes", CFG_STRING_MAX);
    for (const char *p = s; *p; p++)
        if ((unsigned char)*p < 0x20 || *p == 0x7f)
            return cfg_fail(c, at, "must not contain control characters");
    return 0;
}

/* Convert one scalar and store it.  Also used for defaults, with at == NULL:
 * a default that fails here is a bug in the tables, caught by every test. */
static int cfg_set_scalar(struct cfg_ctx *c, const struct cfg_field *f, void *base,
                          const char *s, const yaml_node_t *at)
{
    char *slot = cfg_field_ptr(base, f);
    char lo[32], hi[32];
    int64_t v = 0;
    int r;

    switch (f->type) {
    case CFG_STR: {
        char *copy;

        r = cfg_check_string(c, f, s, at);
        if (r < 0)
            return r;
        copy = cfg_strdup(s);
        if (!copy)
            return cfg_nomem(c);
        free(*(char **)slot);
        *(char **)slot = copy;
        return 0;
    }
    case CFG_INT:
    case CFG_UINT:
    case CFG_I64:
        if (!cfg_parse_i64(s, &v))
            return cfg_fail(c, at, "expected an integer, got \"%.64s\"", s);
        if (v < f->min || v > f->max)
            return cfg_fail(c, at, "must be between %lld and %lld, got %lld", (long long)f->min,
                            (long long)f->max, (long long)v);
        if (f->type == CFG_INT)
            *(int *)slot = (int)v;
        else if (f->type == CFG_UINT)
            *(unsigned *)slot = (unsigned)v;
        else
            *(int64_t *)slot = v;
        return 0;
    case CFG_U64: {
        uint64_t u;

        if (!cfg_parse_u64(s, &u))
            return cfg_fail(c, at, "expected an integer from 0 to %llu, got \"%.64s\"",
                            (unsigned long long)UINT64_MAX, s);
        *(uint64_t *)slot = u;
        return 0;
    }
    case CFG_DOUBLE: {
        double d;

        if (!cfg_parse_double(s, &d))
            return cfg_fail(c, at, "expected a number, got \"%.64s\"", s);
        if (d < f->dmin || d > f->dmax)
            return cfg_fail(c, at, "must be between %g and %g, got %g", f->dmin, f->dmax, d);
        *(double *)slot = d;
        return 0;
    }
    case CFG_DURATION:
        if (tm_duration_parse(s, &v) < 0)
            return cfg_fail(c, at,
                            "bad duration \"%.64s\": expected seconds or a number with a unit "
                            "(ms, s, m, h, d) such as 90s or 15m",
                            s);
        if (v < f->min || v > f->max) {
            cfg_format_duration(f->min, lo, sizeof(lo));
            cfg_format_duration(f->max, hi, sizeof(hi));
            return cfg_fail(c, at, "must be between %s and %s, got \"%.64s\"", lo, hi, s);
        }
        *(int64_t *)slot = v;
        return 0;
    case CFG_PRICE: {
        const char *why = tm_price_problem(s, &v);

        if (why)
            return cfg_fail(c, at, "bad price \"%.64s\": %s", s, why);
        if (v < f->min || v > f->max) {
            cfg_format_price(f->min, lo, sizeof(lo));
            cfg_format_price(f->max, hi, sizeof(hi));
            return cfg_fail(c, at, "must be between %s and %s", lo, hi);
        }
        *(int64_t *)slot = v;
        return 0;
    }
    case CFG_BOOL:
        /* YAML 1.2's core schema: true/false only, not yes/no/on/off. */
        if (strcmp(s, "true") == 0 || strcmp(s, "false") == 0) {
            *(bool *)slot = s[0] == 't';
            return 0;
        }
        return cfg_fail(c, at, "expected true or false, got \"%.64s\"", s);
    case CFG_STRLIST:
    case CFG_SECTION:
    case CFG_LIST:
        break;
    }
    return cfg_fail(c, at, "internal error: field type %d is not a scalar", (int)f->type);
}

static int cfg_apply_defaults(struct cfg_ctx *c, const struct cfg_section *s, void *base)
{
    for (size_t i = 0; i < s->nfields; i++) {
        const struct cfg_field *f = &s->fields[i];
        int r = 0;

        if (f->type == CFG_SECTION)
            r = cfg_apply_defaults(c, f->sub, cfg_field_ptr(base, f));
        else if (f->def)
            r = cfg_set_scalar(c, f, base, f->def, NULL);
        if (r < 0)
            return r;
    }
    return 0;
}

/* The free side of the tables: whatever parsing may have stored. */
static void cfg_release_section(const struct cfg_section *s, void *base)
{
    for (size_t i = 0; i < s->nfields; i++) {
        const struct cfg_field *f = &s->fields[i];
        char *slot = cfg_field_ptr(base, f);

        switch (f->type) {
        case CFG_STR:
            free(*(char **)slot);
            *(char **)slot = NULL;
            break;
        case CFG_STRLIST: {
            char **list = *(char ***)slot;
            size_t *count = (size_t *)((char *)base + f->count_offset);

            for (size_t j = 0; list && j < *count; j++)
                free(list[j]);
            free(list);
            *(char ***)slot = NULL;
            *count = 0;
            break;
        }
        case CFG_SECTION:
            cfg_release_section(f->sub, slot);
            break;
        case CFG_LIST: {
            char *arr = *(char **)slot;
            size_t *count = (size_t *)((char *)base + f->count_offset);

            for (size_t j = 0; arr && j < *count; j++)
                cfg_release_section(f->sub, arr + j * f->sub->size);
            free(arr);
            *(char **)slot = NULL;
            *count = 0;
            break;
        }
        default:
            break;
        }
    }
}

static const yaml_node_t *cfg_node(struct cfg_ctx *c, int index)
{
    return yaml_document_get_node(c->doc, index);
}

/* Plain "", "~" and "null" mean "no value", as in YAML 1.1's core schema;
 * quoted, they are strings. */
static bool cfg_is_null(const yaml_node_t *n)
{
    const char *v;

    if (n->type != YAML_SCALAR_NODE || n->data.scalar.style != YAML_PLAIN_SCALAR_STYLE)
        return false;
    v = (const char *)n->data.scalar.value;
    return n->data.scalar.length == 0 || strcmp(v, "~") == 0 || strcmp(v, "null") == 0 ||
           strcmp(v, "Null") == 0 || strcmp(v, "NULL") == 0;
}

static int cfg_parse_mapping(struct cfg_ctx *c, const struct cfg_section *s, void *base,
                             const yaml_node_t *map);

static size_t cfg_seq_len(const yaml_node_t *seq)
{
    return (size_t)(seq->data.sequence.items.top - seq->data.sequence.items.start);
}

/* Entry counts of lists: null or absent is an empty list. */
static int cfg_check_count(struct cfg_ctx *c, const struct cfg_field *f, size_t n,
                           const yaml_node_t *at)
{
    if ((int64_t)n < f->min)
        return cfg_fail(c, at, "must have at least %lld %s", (long long)f->min,
                        f->min == 1 ? "entry" : "entries");
    if ((int64_t)n > f->max)
        return cfg_fail(c, at, "must have at most %lld entries, got %zu", (long long)f->max, n);
    return 0;
}

static int cfg_parse_strlist(struct cfg_ctx *c, const struct cfg_field *f, void *base,
                             const yaml_node_t *node)
{
    char ***slot = (char ***)cfg_field_ptr(base, f);
    size_t *count = (size_t *)((char *)base + f->count_offset);
    size_t n = 0;
    int r;

    if (!cfg_is_null(node) && node->type != YAML_SEQUENCE_NODE)
        return cfg_fail(c, node, "expected a sequence, got %s", cfg_node_kind(node));
    if (node->type == YAML_SEQUENCE_NODE)
        n = cfg_seq_len(node);
    r = cfg_check_count(c, f, n, node);
    if (r < 0 || n == 0)
        return r;
    *slot = cfg_calloc(n, sizeof(char *));
    if (!*slot)
        return cfg_nomem(c);
    for (size_t i = 0; i < n; i++) {
        const yaml_node_t *item = cfg_node(c, node->data.sequence.items.start[i]);
        size_t mark = cfg_path_push_index(c, i);
        const char *v;

        if (item->type != YAML_SCALAR_NODE || cfg_is_null(item))
            return cfg_fail(c, item, "expected a string, got %s",
                            cfg_is_null(item) ? "null" : cfg_node_kind(item));
        v = (const char *)item->data.scalar.value;
        if (strlen(v) != item->data.scalar.length)
            return cfg_fail(c, item, "must not contain NUL bytes");
        r = cfg_check_string(c, f, v, item);
        if (r < 0)
            return r;
        for (size_t j = 0; j < i; j++)
            if (strcmp((*slot)[j], v) == 0)
                return cfg_fail(c, item, "duplicate value \"%s\"", v);
        (*slot)[i] = cfg_strdup(v);
        if (!(*slot)[i])
            return cfg_nomem(c);
        *count = i + 1; /* so release frees exactly what was stored */
        cfg_path_pop(c, mark);
    }
    return 0;
}

static int cfg_parse_list(struct cfg_ctx *c, const struct cfg_field *f, void *base,
                          const yaml_node_t *node)
{
    char **slot = (char **)cfg_field_ptr(base, f);
    size_t *count = (size_t *)((char *)base + f->count_offset);
    size_t n = 0;
    int r;

    if (!cfg_is_null(node) && node->type != YAML_SEQUENCE_NODE)
        return cfg_fail(c, node, "expected a sequence, got %s", cfg_node_kind(node));
    if (node->type == YAML_SEQUENCE_NODE)
        n = cfg_seq_len(node);
    r = cfg_check_count(c, f, n, node);
    if (r < 0 || n == 0)
        return r;
    *slot = cfg_calloc(n, f->sub->size);
    if (!*slot)
        return cfg_nomem(c);
    /* Zeroed elements release cleanly, so the whole array counts at once. */
    *count = n;
    for (size_t i = 0; i < n; i++) {
        const yaml_node_t *item = cfg_node(c, node->data.sequence.items.start[i]);
        void *elem = *slot + i * f->sub->size;
        size_t mark = cfg_path_push_index(c, i);

        r = cfg_apply_defaults(c, f->sub, elem);
        if (r < 0)
            return r;
        r = cfg_parse_mapping(c, f->sub, elem, item);
        if (r < 0)
            return r;
        cfg_path_pop(c, mark);
    }
    return 0;
}

static int cfg_check_required(struct cfg_ctx *c, const struct cfg_section *s, const bool *seen,
                              const yaml_node_t *map);

static int cfg_parse_value(struct cfg_ctx *c, const struct cfg_field *f, void *base,
                           const yaml_node_t *node)
{
    const char *v;

    switch (f->type) {
    case CFG_SECTION:
        if (cfg_is_null(node))
            return cfg_check_required(c, f->sub, NULL, node);
        return cfg_parse_mapping(c, f->sub, cfg_field_ptr(base, f), node);
    case CFG_LIST:
        return cfg_parse_list(c, f, base, node);
    case CFG_STRLIST:
        return cfg_parse_strlist(c, f, base, node);
    default:
        break;
    }
    if (node->type != YAML_SCALAR_NODE)
        return cfg_fail(c, node, "expected %s, got %s", cfg_type_noun(f->type),
                        cfg_node_kind(node));
    if (cfg_is_null(node)) {
        /* No value: keep the default, unless one is required. */
        if (f->flags & CFG_REQUIRED)
            return cfg_fail(c, node, "must not be empty");
        return 0;
    }
    v = (const char *)node->data.scalar.value;
    if (strlen(v) != node->data.scalar.length)
        return cfg_fail(c, node, "must not contain NUL bytes");
    return cfg_set_scalar(c, f, base, v, node);
}

/* Missing required keys, including those of sections left out entirely.
 * seen is NULL when the whole section is absent. */
static int cfg_check_required(struct cfg_ctx *c, const struct cfg_section *s, const bool *seen,
                              const yaml_node_t *map)
{
    for (size_t i = 0; i < s->nfields; i++) {
        const struct cfg_field *f = &s->fields[i];
        size_t mark;
        int r = 0;

        if (seen && seen[i])
            continue;
        mark = cfg_path_push_key(c, f->key);
        if (f->flags & CFG_REQUIRED)
            r = cfg_fail(c, map, "missing required key");
        else if (f->type == CFG_SECTION)
            r = cfg_check_required(c, f->sub, NULL, map);
        if (r < 0)
            return r;
        cfg_path_pop(c, mark);
    }
    return 0;
}

static int cfg_unknown_key(struct cfg_ctx *c, const struct cfg_section *s, const yaml_node_t *at)
{
    char list[512];
    size_t used = 0;

    list[0] = '\0';
    for (size_t i = 0; i < s->nfields; i++) {
        int n = snprintf(list + used, sizeof(list) - used, "%s%s", used ? ", " : "",
                         s->fields[i].key);
        if (n < 0 || (size_t)n >= sizeof(list) - used)
            break;
        used += (size_t)n;
    }
    return cfg_fail(c, at, "unknown key, expected one of: %s", list);
}

static int cfg_parse_mapping(struct cfg_ctx *c, const struct cfg_section *s, void *base,
                             const yaml_node_t *map)
{
    bool seen[CFG_FIELDS_MAX] = {false};
    size_t first_line[CFG_FIELDS_MAX] = {0};

    if (map->type != YAML_MAPPING_NODE)
        return cfg_fail(c, map, "expected a mapping, got %s", cfg_node_kind(map));
    for (yaml_node_pair_t *p = map->data.mapping.pairs.start; p < map->data.mapping.pairs.top;
         p++) {
        const yaml_node_t *key = cfg_node(c, p->key);
        const yaml_node_t *value = cfg_node(c, p->value);
        const char *k;
        size_t i, mark;
        int r;

        if (key->type != YAML_SCALAR_NODE)
            return cfg_fail(c, key, "keys must be strings, got %s", cfg_node_kind(key));
        k = (const char *)key->data.scalar.value;
        for (i = 0; i < s->nfields; i++)
            if (strcmp(s->fields[i].key, k) == 0 && strlen(k) == key->data.scalar.length)
                break;
        mark = cfg_path_push_key(c, k);
        if (i == s->nfields)
            return cfg_unknown_key(c, s, key);
        if (seen[i])
            return cfg_fail(c, key, "duplicate key (first set at line %zu)", first_line[i]);
        seen[i] = true;
        first_line[i] = cfg_node_line(key);
        r = cfg_parse_value(c, &s->fields[i], base, value);
        if (r < 0)
            return r;
        cfg_path_pop(c, mark);
    }
    return cfg_check_required(c, s, seen, map);
}

/* ---- validation ---------------------------------------------------------- */

static const yaml_node_t *cfg_map_get(struct cfg_ctx *c, const yaml_node_t *map, const char *key)
{
    if (!map || map->type != YAML_MAPPING_NODE)
        return NULL;
    for (yaml_node_pair_t *p = map->data.mapping.pairs.start; p < map->data.mapping.pairs.top;
         p++) {
        const yaml_node_t *k = cfg_node(c, p->key);
        if (k->type == YAML_SCALAR_NODE && strcmp((const char *)k->data.scalar.value, key) == 0)
            return cfg_node(c, p->value);
    }
    return NULL;
}

static const yaml_node_t *cfg_seq_get(struct cfg_ctx *c, const yaml_node_t *seq, size_t i)
{
    if (!seq || seq->type != YAML_SEQUENCE_NODE || i >= cfg_seq_len(seq))
        return NULL;
    return cfg_node(c, seq->data.sequence.items.start[i]);
}

/* The node of key inside map, or map itself when the key is absent, so a
 * message points at the nearest line that exists. */
static const yaml_node_t *cfg_at(struct cfg_ctx *c, const yaml_node_t *map, const char *key)
{
    const yaml_node_t *n = cfg_map_get(c, map, key);

    if (n)
        return n;
    return map ? map : c->root;
}

/* Listen addresses: "host:port" or "[v6]:port", port 0..65535 (0: any free port). */
static bool cfg_listen_ok(const char *s)
{
    const char *colon = strrchr(s, ':');
    int64_t port;

    if (!colon || colon == s || !cfg_parse_i64(colon + 1, &port) || colon[1] == '+' ||
        colon[1] == '-' || port < 0 || port > 65535)
        return false;
    if (s[0] == '[')
        return colon[-1] == ']' && colon - s > 2;
    for (const char *p = s; p < colon; p++)
        if (*p == ':' || *p == '[' || *p == ']' || *p == '/' || (unsigned char)*p <= ' ')
            return false;
    return true;
}

static bool cfg_cluster_ok(const char *s)
{
    size_t n = strlen(s);

    if (n == 0 || n > 40)
        return false;
    for (; *s; s++)
        if (!((*s >= 'a' && *s <= 'z') || cfg_is_digit(*s) || *s == '-'))
            return false;
    return true;
}

/* Register raw[0..len) and, when it is percent-encoded, its decoded form:
 * either may end up in a log line (our own or one quoted from libpq). */
static int cfg_add_secret(const char *raw, size_t len)
{
    char *copy = cfg_strndup(raw, len);
    size_t o = 0;

    if (!copy)
        return TM_ENOMEM;
    tm_log_add_secret(copy);
    for (size_t i = 0; i < len; i++) {
        int hi, lo;

        if (raw[i] == '%' && i + 2 < len &&
            (hi = OPENSSL_hexchar2int((unsigned char)raw[i + 1])) >= 0 &&
            (lo = OPENSSL_hexchar2int((unsigned char)raw[i + 2])) >= 0) {
            copy[o++] = (char)(hi * 16 + lo);
            i += 2;
        } else {
            copy[o++] = raw[i];
        }
    }
    copy[o] = '\0';
    tm_log_add_secret(copy);
    OPENSSL_cleanse(copy, len);
    free(copy);
    return 0;
}

/*
 * Find the password in a libpq connection string and register it with the
 * logger.  Both forms libpq takes are covered: URIs
 * ("postgresql://user:pw@host/db?password=pw") and keyword/value strings
 * ("host=h password='p w'").  Returns 0 or TM_ENOMEM.
 */
static int cfg_register_db_secret(const char *url)
{
    const char *rest = NULL;
    int r;

    if (strncmp(url, "postgresql://", 13) == 0)
        rest = url + 13;
    else if (strncmp(url, "postgres://", 11) == 0)
        rest = url + 11;

    if (rest) {
        size_t auth = strcspn(rest, "/?#");
        const char *at = NULL, *q;

        for (size_t i = 0; i < auth; i++)
            if (rest[i] == '@')
                at = rest + i;
        if (at) {
            const char *colon = memchr(rest, ':', (size_t)(at - rest));
            if (colon && at - colon > 1) {
                r = cfg_add_secret(colon + 1, (size_t)(at - colon - 1));
                if (r < 0)
                    return r;
            }
        }
        q = strchr(rest, '?');
        while (q) {
            q++;
            if (strncmp(q, "password=", 9) == 0) {
                size_t n = strcspn(q + 9, "&#");
                if (n > 0) {
                    r = cfg_add_secret(q + 9, n);
                    if (r < 0)
                        return r;
                }
            }
            q = strchr(q, '&');
        }
        return 0;
    }

    /* keyword = value pairs, values optionally single-quoted with \ escapes */
    for (const char *p = url; (p = strstr(p, "password")) != NULL; p += 8) {
        const char *v = p + 8;
        char *buf;
        size_t n = 0;

        if (p != url && p[-1] != ' ' && p[-1] != '\t')
            continue;
        while (*v == ' ' || *v == '\t')
            v++;
        if (*v != '=')
            continue;
        v++;
        while (*v == ' ' || *v == '\t')
            v++;
        buf = cfg_strdup(v);
        if (!buf)
            return TM_ENOMEM;
        if (*v == '\'') {
            for (v++; *v && *v != '\''; v++) {
                if (*v == '\\' && v[1])
                    v++;
                buf[n++] = *v;
            }
        } else {
            for (; *v && *v != ' ' && *v != '\t'; v++)
                buf[n++] = *v;
        }
        buf[n] = '\0';
        tm_log_add_secret(buf);
        OPENSSL_cleanse(buf, n);
        free(buf);
    }
    return 0;
}

static int cfg_validate_providers(struct cfg_ctx *c, const struct tm_config *cfg)
{
    const yaml_node_t *list = cfg_map_get(c, c->root, "providers");

    for (size_t i = 0; i < cfg->nproviders; i++) {
        const struct tm_config_provider *p = &cfg->providers[i];
        const yaml_node_t *pn = cfg_seq_get(c, list, i);
        const yaml_node_t *tlist = cfg_map_get(c, pn, "instance_types");
        const struct tm_config_credentials *cr = &p->credentials;

        for (size_t j = 0; j < i; j++)
            if (strcmp(cfg->providers[j].name, p->name) == 0) {
                cfg_path_set(c, "providers[%zu].name", i);
                return cfg_fail(c, cfg_at(c, pn, "name"),
                                "duplicate provider name \"%s\" (first used by providers[%zu])",
                                p->name, j);
            }
        if (strcmp(p->kind, "sim") == 0 && p->ntypes == 0) {
            cfg_path_set(c, "providers[%zu].instance_types", i);
            return cfg_fail(c, cfg_at(c, pn, "instance_types"),
                            "a sim provider must describe at least one instance type");
        }
        if (strcmp(cr->source, "file") == 0 && !cr->file) {
            cfg_path_set(c, "providers[%zu].credentials.file", i);
            return cfg_fail(c, cfg_at(c, cfg_map_get(c, pn, "credentials"), "file"),
                            "missing required key (credentials.source is \"file\")");
        }
        if (strcmp(cr->source, "file") != 0 && cr->file) {
            cfg_path_set(c, "providers[%zu].credentials.file", i);
            return cfg_fail(c, cfg_at(c, cfg_map_get(c, pn, "credentials"), "file"),
                            "only used when credentials.source is \"file\", not \"%s\"",
                            cr->source);
        }
        for (size_t t = 0; t < p->ntypes; t++) {
            const struct tm_config_instance_type *ty = &p->types[t];
            const yaml_node_t *tn = cfg_seq_get(c, tlist, t);

            for (size_t u = 0; u < t; u++)
                if (strcmp(p->types[u].name, ty->name) == 0) {
                    cfg_path_set(c, "providers[%zu].instance_types[%zu].name", i, t);
                    return cfg_fail(c, cfg_at(c, tn, "name"),
                                    "duplicate instance type name \"%s\" (first used by "
                                    "providers[%zu].instance_types[%zu])",
                                    ty->name, i, u);
                }
        }
    }
    return 0;
}

static int cfg_validate_pools(struct cfg_ctx *c, const struct tm_config *cfg)
{
    const yaml_node_t *list = cfg_map_get(c, c->root, "pools");

    for (size_t i = 0; i < cfg->npools; i++) {
        const struct tm_config_pool *pool = &cfg->pools[i];
        const yaml_node_t *pn = cfg_seq_get(c, list, i);
        const struct tm_config_provider *prov;

        for (size_t j = 0; j < i; j++)
            if (strcmp(cfg->pools[j].name, pool->name) == 0) {
                cfg_path_set(c, "pools[%zu].name", i);
                return cfg_fail(c, cfg_at(c, pn, "name"),
                                "duplicate pool name \"%s\" (first used by pools[%zu])",
                                pool->name, j);
            }
        prov = tm_config_provider_find(cfg, pool->provider);
        if (!prov) {
            cfg_path_set(c, "pools[%zu].provider", i);
            return cfg_fail(c, cfg_at(c, pn, "provider"), "unknown provider \"%s\"",
                            pool->provider);
        }
        if (pool->min_nodes > pool->max_nodes) {
            cfg_path_set(c, "pools[%zu].max_nodes", i);
            return cfg_fail(c, cfg_at(c, pn, "max_nodes"), "must be at least min_nodes (%d)",
                            pool->min_nodes);
        }
        for (size_t t = 0; t < pool->ninstance_types; t++) {
            const char *tname = pool->instance_types[t];
            const struct tm_config_instance_type *ty = tm_config_type_find(prov, tname);
            const yaml_node_t *tn = cfg_seq_get(c, cfg_map_get(c, pn, "instance_types"), t);

            if (!tn)
                tn = cfg_at(c, pn, "instance_types");
            cfg_path_set(c, "pools[%zu].instance_types[%zu]", i, t);
            if (!ty) {
                /* A cloud provider may offer types the file does not
                 * describe; the simulator knows only what it is told. */
                if (strcmp(prov->kind, "sim") == 0)
                    return cfg_fail(c, tn, "unknown instance type \"%s\" for provider \"%s\"",
                                    tname, prov->name);
                continue;
            }
            if (pool->gpu_model && strcmp(pool->gpu_model, ty->gpu_model) != 0)
                return cfg_fail(c, tn,
                                "instance type \"%s\" has GPU model \"%s\", but the pool's "
                                "gpu_model is \"%s\"",
                                tname, ty->gpu_model, pool->gpu_model);
            if (pool->gpus_per_node && pool->gpus_per_node != ty->gpus)
                return cfg_fail(c, tn,
                                "instance type \"%s\" has %d GPUs, but the pool's gpus_per_node "
                                "is %d",
                                tname, ty->gpus, pool->gpus_per_node);
            /* A pool limited to spot must be able to buy spot. */
            if (strcmp(pool->capacity_type, "spot") == 0 && ty->spot_uusd_per_hour == 0)
                return cfg_fail(c, tn,
                                "instance type \"%s\" offers no spot capacity (spot_price is 0)",
                                tname);
            /* Types described for one pool must also agree with each
             * other, or the pool would not be one shape of node. */
            if (!pool->gpu_model || !pool->gpus_per_node) {
                for (size_t u = 0; u < t; u++) {
                    const struct tm_config_instance_type *other =
                        tm_config_type_find(prov, pool->instance_types[u]);
                    if (other && (strcmp(other->gpu_model, ty->gpu_model) != 0 ||
                                  other->gpus != ty->gpus))
                        return cfg_fail(c, tn,
                                        "instance type \"%s\" (%d x %s) differs from \"%s\" "
                                        "(%d x %s); give the pool one GPU shape",
                                        tname, ty->gpus, ty->gpu_model, other->name, other->gpus,
                                        other->gpu_model);
                }
            }
        }
    }
    return 0;
}

/* Read each provider's spot_hazards table.  Its own errors ("FILE:LINE:
 * reason", or the file that could not be opened) are given under the key
 * that named it, so the operator sees both files.  A table that names
 * none of the provider's pools' (type, zone) cells is not an error: those
 * pools keep their spot_hazard (tm_config_spot_hazard). */
static int cfg_load_spot_hazards(struct cfg_ctx *c, struct tm_config *cfg)
{
    const yaml_node_t *list = cfg_map_get(c, c->root, "providers");

    for (size_t i = 0; i < cfg->nproviders; i++) {
        struct tm_config_provider *p = &cfg->providers[i];
        char why[512];
        int r;

        if (!p->spot_hazards_file)
            continue;
        /* A table is a file: a FIFO, a device or a directory would block
         * the load or make no sense (stat does not open it). */
        struct stat st;
        if (stat(p->spot_hazards_file, &st) == 0 && !S_ISREG(st.st_mode)) {
            cfg_path_set(c, "providers[%zu].spot_hazards", i);
            return cfg_fail(c, cfg_at(c, cfg_seq_get(c, list, i), "spot_hazards"),
                            "%s: not a regular file", p->spot_hazards_file);
        }
        p->spot_hazards = cfg_calloc(1, sizeof(*p->spot_hazards));
        if (!p->spot_hazards)
            return cfg_nomem(c);
        r = tm_spot_hazards_load(p->spot_hazards_file, p->spot_hazards, why, sizeof(why));
        if (r == TM_ENOMEM)
            return cfg_nomem(c);
        if (r < 0) {
            /* -errno too: a table that cannot be read is a bad value of
             * the key, not an I/O failure of the configuration file. */
            cfg_path_set(c, "providers[%zu].spot_hazards", i);
            return cfg_fail(c, cfg_at(c, cfg_seq_get(c, list, i), "spot_hazards"), "%s", why);
        }
    }
    return 0;
}

static int cfg_validate(struct cfg_ctx *c, struct tm_config *cfg)
{
    const char *env_url = getenv("TARMAC_DATABASE_URL");
    const yaml_node_t *db = cfg_map_get(c, c->root, "database");
    int r;

    if (!cfg_cluster_ok(cfg->cluster)) {
        cfg_path_set(c, "cluster");
        return cfg_fail(c, cfg_at(c, c->root, "cluster"),
                        "bad cluster tag \"%.64s\": expected 1 to 40 of a-z 0-9 -", cfg->cluster);
    }
    if (!cfg_listen_ok(cfg->listen)) {
        cfg_path_set(c, "listen");
        return cfg_fail(c, cfg_at(c, c->root, "listen"),
                        "bad address \"%.128s\": expected host:port with port 0 to 65535",
                        cfg->listen);
    }
    if (!cfg->database_url && !(env_url && *env_url)) {
        cfg_path_set(c, "database.url");
        return cfg_fail(c, db ? db : c->root,
                        "missing required key (or set TARMAC_DATABASE_URL)");
    }
    if (!cfg->api.tls_cert_file != !cfg->api.tls_key_file) {
        const yaml_node_t *api = cfg_map_get(c, c->root, "api");

        cfg_path_set(c, cfg->api.tls_cert_file ? "api.tls_key_file" : "api.tls_cert_file");
        return cfg_fail(c, api ? api : c->root,
                        "missing: TLS needs both tls_cert_file and tls_key_file");
    }
    if (cfg->alerts.webhook_url) {
        const char *u = cfg->alerts.webhook_url;

        if (strncmp(u, "http://", 7) != 0 && strncmp(u, "https://", 8) != 0) {
            cfg_path_set(c, "alerts.webhook_url");
            return cfg_fail(c, cfg_at(c, cfg_map_get(c, c->root, "alerts"), "webhook_url"),
                            "expected an http:// or https:// URL");
        }
        /* Webhook URLs carry their credential in the path (Slack, Teams):
         * the whole URL is a secret. */
        if (cfg_add_secret(u, strlen(u)) < 0)
            return cfg_nomem(c);
    }
    r = cfg_validate_providers(c, cfg);
    if (r < 0)
        return r;
    r = cfg_validate_pools(c, cfg);
    if (r < 0)
        return r;
    r = cfg_load_spot_hazards(c, cfg);
    if (r < 0)
        return r;
    if (cfg->database_url) {
        r = cfg_register_db_secret(cfg->database_url);
        if (r < 0)
            return cfg_nomem(c);
    }
    cfg_path_set(c, "%s", "");
    return 0;
}

/* Fill what a pool may leave to the instance types its provider describes. */
static int cfg_normalise(struct cfg_ctx *c, struct tm_config *cfg)
{
    const yaml_node_t *list = cfg_map_get(c, c->root, "pools");

    for (size_t i = 0; i < cfg->npools; i++) {
        struct tm_config_pool *pool = &cfg->pools[i];
        const struct tm_config_provider *prov = tm_config_provider_find(cfg, pool->provider);
        const struct tm_config_instance_type *ty = NULL;
        const yaml_node_t *pn = cfg_seq_get(c, list, i);

        for (size_t t = 0; t < pool->ninstance_types && !ty; t++)
            ty = tm_config_type_find(prov, pool->instance_types[t]);
        if (!pool->gpu_model) {
            if (!ty) {
                cfg_path_set(c, "pools[%zu].gpu_model", i);
                return cfg_fail(c, pn,
                                "missing required key (provider \"%s\" describes none of the "
                                "pool's instance types)",
                                prov->name);
            }
            pool->gpu_model = cfg_strdup(ty->gpu_model);
            if (!pool->gpu_model)
                return cfg_nomem(c);
        }
        if (!pool->gpus_per_node) {
            if (!ty) {
                cfg_path_set(c, "pools[%zu].gpus_per_node", i);
                return cfg_fail(c, pn,
                                "missing required key (provider \"%s\" describes none of the "
                                "pool's instance types)",
                                prov->name);
            }
            pool->gpus_per_node = ty->gpus;
        }
        if (!cfg_map_get(c, pn, "spot_hazard"))
            pool->spot_hazard_per_hour = prov->spot_hazard_per_hour;
        if (!cfg_map_get(c, pn, "spot_notice"))
            pool->spot_notice_ms = prov->spot_notice_ms;
        pool->disruption_limited = cfg_map_get(c, pn, "disruption_nodes") ||
                                   cfg_map_get(c, pn, "disruption_pct");
    }
    return 0;
}

/* ---- loading ------------------------------------------------------------- */

/* libyaml's reader errors carry a byte offset instead of a mark. */
static size_t cfg_line_of_offset(const char *text, size_t len, size_t offset)
{
    size_t line = 1;

    for (size_t i = 0; i < offset && i < len; i++)
        if (text[i] == '\n')
            line++;
    return line;
}

static int cfg_syntax_error(struct cfg_ctx *c, const yaml_parser_t *parser, const char *text,
                            size_t len)
{
    size_t line;

    if (parser->error == YAML_MEMORY_ERROR)
        return cfg_nomem(c);
    if (parser->error == YAML_READER_ERROR)
        line = cfg_line_of_offset(text, len, parser->problem_offset);
    else
        line = parser->problem_mark.line + 1;
    if (c->err && c->errsize > 0) {
        if (parser->context)
            snprintf(c->err, c->errsize, "%s:%zu: syntax error: %s %s (line %zu)", c->name, line,
                     parser->problem ? parser->problem : "invalid YAML", parser->context,
                     parser->context_mark.line + 1);
        else
            snprintf(c->err, c->errsize, "%s:%zu: syntax error: %s", c->name, line,
                     parser->problem ? parser->problem : "invalid YAML");
    }
    return TM_EINVAL;
}

int tm_config_load_string(const char *text, size_t len, const char *name,
                          struct tm_config *ret_cfg, char *err, size_t errsize)
{
    struct tm_config cfg = {0};
    struct cfg_ctx c = {.name = name ? name : "<config>", .err = err, .errsize = errsize};
    yaml_parser_t parser;
    yaml_document_t doc, extra;
    bool have_parser = false, have_doc = false, have_extra = false;
    int r;

    if (err && errsize > 0)
        err[0] = '\0';
    if (!text)
        len = 0;
    if (len > CFG_FILE_MAX) {
        r = TM_EINVAL;
        if (err && errsize > 0)
            snprintf(err, errsize, "%s:1: file is larger than %u bytes", c.name, CFG_FILE_MAX);
        goto out;
    }
    if (!yaml_parser_initialize(&parser)) {
        r = cfg_nomem(&c);
        goto out;
    }
    have_parser = true;
    yaml_parser_set_input_string(&parser, (const unsigned char *)(text ? text : ""), len);
    if (!yaml_parser_load(&parser, &doc)) {
        r = cfg_syntax_error(&c, &parser, text, len);
        goto out;
    }
    have_doc = true;
    c.doc = &doc;
    c.root = yaml_document_get_root_node(&doc);
    if (!c.root) {
        r = cfg_fail(&c, NULL, "the file holds no configuration");
        goto out;
    }
    /* A second document would be silently ignored; say so instead. */
    if (!yaml_parser_load(&parser, &extra)) {
        r = cfg_syntax_error(&c, &parser, text, len);
        goto out;
    }
    have_extra = true;
    if (yaml_document_get_root_node(&extra)) {
        r = cfg_fail(&c, yaml_document_get_root_node(&extra),
                     "more than one YAML document; a configuration is one document");
        goto out;
    }

    cfg.path = cfg_strdup(c.name);
    if (!cfg.path) {
        r = cfg_nomem(&c);
        goto out;
    }
    r = cfg_apply_defaults(&c, &cfg_root_section, &cfg);
    if (r < 0)
        goto out;
    r = cfg_parse_mapping(&c, &cfg_root_section, &cfg, c.root);
    if (r < 0)
        goto out;
    r = cfg_validate(&c, &cfg);
    if (r < 0)
        goto out;
    r = cfg_normalise(&c, &cfg);
    if (r < 0)
        goto out;

    *ret_cfg = cfg; /* hand over only on success */
    cfg = (struct tm_config){0};
    r = 0;
out:
    tm_config_release(&cfg);
    if (have_extra)
        yaml_document_delete(&extra);
    if (have_doc)
        yaml_document_delete(&doc);
    if (have_parser)
        yaml_parser_delete(&parser);
    return r;
}

int tm_config_load(const char *path, struct tm_config *ret_cfg, char *err, size_t errsize)
{
    FILE *f = NULL;
    char *buf = NULL;
    size_t len = 0;
    int r;

    if (err && errsize > 0)
        err[0] = '\0';
    f = fopen(path, "rb");
    if (!f) {
        r = -errno;
        if (err && errsize > 0)
            snprintf(err, errsize, "%s: could not open: %s", path, strerror(-r));
        goto out;
    }
    /* One byte more than the limit tells "too large" from "exactly full". */
    buf = cfg_calloc(1, CFG_FILE_MAX + 1);
    if (!buf) {
        r = TM_ENOMEM;
        if (err && errsize > 0)
            snprintf(err, errsize, "%s: out of memory", path);
        goto out;
    }
    len = fread(buf, 1, CFG_FILE_MAX + 1, f);
    if (ferror(f)) {
        r = -EIO;
        if (err && errsize > 0)
            snprintf(err, errsize, "%s: could not read: %s", path, strerror(EIO));
        goto out;
    }
    r = tm_config_load_string(buf, len, path, ret_cfg, err, errsize);
out:
    free(buf);
    if (f)
        fclose(f);
    return r;
}

int tm_config_apply_env(struct tm_config *cfg, char *err, size_t errsize)
{
    const char *url = getenv("TARMAC_DATABASE_URL");
    const char *listen = getenv("TARMAC_LISTEN");
    char *new_url = NULL, *new_listen = NULL;
    int r = 0;

    if (err && errsize > 0)
        err[0] = '\0';
    /* An empty variable is treated as unset, as shells make that easy. */
    if (url && *url) {
        bool ctl = false;
        for (const char *p = url; *p; p++)
            ctl |= (unsigned char)*p < 0x20 || *p == 0x7f;
        if (ctl || strlen(url) > CFG_STRING_MAX) {
            r = TM_EINVAL;
            if (err && errsize > 0)
                snprintf(err, errsize,
                         "environment TARMAC_DATABASE_URL: must be at most %d bytes without "
                         "control characters",
                         CFG_STRING_MAX);
            goto out;
        }
        new_url = cfg_strdup(url);
        if (!new_url) {
            r = TM_ENOMEM;
            goto out;
        }
    }
    if (listen && *listen) {
        if (!cfg_listen_ok(listen)) {
            r = TM_EINVAL;
            if (err && errsize > 0)
                snprintf(err, errsize,
                         "environment TARMAC_LISTEN: bad address \"%.128s\": expected host:port "
                         "with port 0 to 65535",
                         listen);
            goto out;
        }
        new_listen = cfg_strdup(listen);
        if (!new_listen) {
            r = TM_ENOMEM;
            goto out;
        }
    }
    if (!new_url && !cfg->database_url) {
        r = TM_EINVAL;
        if (err && errsize > 0)
            snprintf(err, errsize, "%s: database.url is not set and TARMAC_DATABASE_URL is empty",
                     cfg->path ? cfg->path : "<config>");
        goto out;
    }
    if (new_url) {
        r = cfg_register_db_secret(new_url);
        if (r < 0)
            goto out;
        free(cfg->database_url);
        cfg->database_url = new_url;
        new_url = NULL;
    }
    if (new_listen) {
        free(cfg->listen);
        cfg->listen = new_listen;
        new_listen = NULL;
    }
out:
    if (r == TM_ENOMEM && err && errsize > 0)
        snprintf(err, errsize, "environment: out of memory");
    free(new_url);
    free(new_listen);
    return r;
}

void tm_config_release(struct tm_config *cfg)
{
    if (!cfg)
        return;
    /* The one member the field tables do not describe: a loaded table. */
    for (size_t i = 0; cfg->providers && i < cfg->nproviders; i++)
        free(cfg->providers[i].spot_hazards);
    cfg_release_section(&cfg_root_section, cfg);
    free(cfg->path);
    *cfg = (struct tm_config){0};
}

const struct tm_config_pool *tm_config_pool_find(const struct tm_config *cfg, const char *name)
{
    if (!cfg || !name)
        return NULL;
    for (size_t i = 0; i < cfg->npools; i++)
        if (cfg->pools[i].name && strcmp(cfg->pools[i].name, name) == 0)
            return &cfg->pools[i];
    return NULL;
}

const struct tm_config_provider *tm_config_provider_find(const struct tm_config *cfg,
                                                         const char *name)
{
    if (!cfg || !name)
        return NULL;
    for (size_t i = 0; i < cfg->nproviders; i++)
        if (cfg->providers[i].name && strcmp(cfg->providers[i].name, name) == 0)
            return &cfg->providers[i];
    return NULL;
}

const struct tm_config_instance_type *tm_config_type_find(const struct tm_config_provider *p,
                                                          const char *name)
{
    if (!p || !name)
        return NULL;
    for (size_t i = 0; i < p->ntypes; i++)
        if (p->types[i].name && strcmp(p->types[i].name, name) == 0)
            return &p->types[i];
    return NULL;
}

/* The cells of pool (its instance types, or `type` alone, by its zones)
 * that table gives a hazard for; the highest of those hazards goes to
 * *ret_worst (may be NULL; 0 when none). */
static size_t fitted_cells(const struct tm_spot_hazards *table, const struct tm_config_pool *pool,
                           const char *type, double *ret_worst)
{
    size_t n = 0, ntypes = type ? 1 : pool->ninstance_types;
    double worst = 0, h;

    for (size_t t = 0; t < ntypes; t++)
        for (size_t z = 0; z < pool->nzones; z++)
            if (tm_spot_hazards_fitted(table, type ? type : pool->instance_types[t], pool->zones[z], &h)) {
                n++;
                if (h > worst)
                    worst = h;
            }
    if (ret_worst)
        *ret_worst = worst;
    return n;
}

size_t tm_config_spot_cells_fitted(const struct tm_config *cfg, const struct tm_config_pool *pool,
                                   const char *type)
{
    const struct tm_config_provider *p = tm_config_provider_find(cfg, pool->provider);

    return p ? fitted_cells(p->spot_hazards, pool, type, NULL) : 0;
}

double tm_config_spot_hazard(const struct tm_config *cfg, const struct tm_config_pool *pool,
                             const char *type, const char *zone, bool *ret_fitted)
{
    const struct tm_config_provider *p = tm_config_provider_find(cfg, pool->provider);
    bool fitted = false;
    double h = 0;

    if (p && type && zone)
        fitted = tm_spot_hazards_fitted(p->spot_hazards, type, zone, &h);
    if (ret_fitted)
        *ret_fitted = fitted;
    if (fitted)
        return h;
    if (pool->spot_hazard_per_hour > 0 || !p || !type)
        return pool->spot_hazard_per_hour;
    /* A pool hazard of 0 (the default) says nothing is known: the zone is
     * taken to be no safer than the worst zone of the pool the table fits
     * for this type, so that the planner never prefers the zone it knows
     * least (availability-only rows are common in spot-fit's output). */
    fitted_cells(p->spot_hazards, pool, type, &h);
    return h;
}
