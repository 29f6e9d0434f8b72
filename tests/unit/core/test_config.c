/*
 * tests/unit/core/test_config.c: the configuration loader.
 *
 * The loader's five files are included rather than linked (h2o's way of
 * reaching static functions) so the countdown allocator in config_table.c
 * can be switched on: every allocation of a load is failed in turn,
 * expecting TM_ENOMEM and, under ASan, no leak.  Defining them all here
 * keeps the linker from taking tarmac_core's own copies.
 */
#define TM_CONFIG_FAULT_INJECTION 1
#include "core/config.c"
#include "core/config_table.c"
#include "core/config_check.c"
#include "core/config_load.c"
#include "core/config_lookup.c"
#include "core/config_reservation.c"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "core/err.h"
#include "core/log.h"
#include "providers/sim/sim_config.h"

static const char *source_dir(void)
{
    const char *d = getenv("TM_SOURCE_DIR");
#ifdef TM_SOURCE_DIR
    if (!d)
        d = TM_SOURCE_DIR;
#endif
    return d ? d : ".";
}

static void source_path(char *buf, size_t size, const char *rel)
{
    snprintf(buf, size, "%s/%s", source_dir(), rel);
}

static char *slurp(const char *path, size_t *ret_len)
{
    FILE *f = fopen(path, "rb");
    char *buf;
    long n;

    assert_non_null(f);
    assert_int_equal(fseek(f, 0, SEEK_END), 0);
    n = ftell(f);
    assert_true(n >= 0);
    rewind(f);
    buf = malloc((size_t)n + 1);
    assert_non_null(buf);
    assert_int_equal(fread(buf, 1, (size_t)n, f), (size_t)n);
    buf[n] = '\0';
    fclose(f);
    *ret_len = (size_t)n;
    return buf;
}

static int setup_env(void **state)
{
    (void)state;
    /* A developer's shell must not change what the file tests see. */
    unsetenv("TARMAC_DATABASE_URL");
    unsetenv("TARMAC_LISTEN");
    cfg_fault_countdown = -1;
    return 0;
}

static int teardown_env(void **state)
{
    (void)state;
    unsetenv("TARMAC_DATABASE_URL");
    unsetenv("TARMAC_LISTEN");
    tm_log_clear_secrets();
    cfg_fault_countdown = -1;
    return 0;
}

static int load(const char *text, struct tm_config *cfg, char *err, size_t errsize)
{
    return tm_config_load_string(text, strlen(text), "t.yaml", cfg, err, errsize);
}

/* The building blocks of the small configs below, with their line numbers
 * (the error tests depend on them). */
#define HEAD                                                                   \
    "database: {url: \"postgresql:///t\"}\n" /* 1 */                          \
    "cluster: c1\n"                          /* 2 */
#define PROV_P(od)                                                             \
    "providers:\n"        /* 3 */                                              \
    "  - name: sim\n"     /* 4 */                                              \
    "    kind: sim\n"     /* 5 */                                              \
    "    region: r1\n"    /* 6 */                                              \
    "    instance_types:\n" /* 7 */                                            \
    "      - {name: t8, gpus: 8, gpu_model: A100, cpu_milli: 1000, memory_mib: 1000, " \
    "on_demand_price: " od ", spot_price: \"0.5\"}\n" /* 8 */
#define PROV PROV_P("\"1.5\"")
#define POOL_HEAD                                                              \
    "pools:\n"                  /* 9 */                                        \
    "  - name: p1\n"            /* 10 */                                       \
    "    provider: sim\n"       /* 11 */                                       \
    "    zones: [z1]\n"         /* 12 */                                       \
    "    instance_types: [t8]\n" /* 13 */
#define POOL POOL_HEAD "    max_nodes: 2\n" /* 14 */

/* ---- files that ship ----------------------------------------------------- */

static void test_example_loads(void **state)
{
    struct tm_config cfg = {0};
    const struct tm_config_provider *p;
    const struct tm_config_instance_type *t;
    const struct tm_config_pool *od, *spot;
    char path[1024], err[512];

    (void)state;
    source_path(path, sizeof(path), "config/tarmac.example.yaml");
    assert_int_equal(tm_config_load(path, &cfg, err, sizeof(err)), 0);
    assert_string_equal(err, "");
    assert_string_equal(cfg.path, path);
    assert_string_equal(cfg.cluster, "prod-gpu");
    assert_int_equal(cfg.nproviders, 1);
    assert_int_equal(cfg.npools, 2);

    p = tm_config_provider_find(&cfg, "sim");
    assert_non_null(p);
    assert_string_equal(p->kind, "sim");
    assert_int_equal(p->ntypes, 2);
    t = tm_config_type_find(p, "sim.8x-a100");
    assert_non_null(t);
    assert_int_equal(t->gpus, 8);
    assert_int_equal(t->on_demand_uusd_per_hour, 32770000);
    assert_int_equal(t->spot_uusd_per_hour, 9830000);
    t = tm_config_type_find(p, "sim.1x-a100");
    assert_non_null(t);
    assert_int_equal(t->gpus, 1);
    assert_null(tm_config_type_find(p, "nope"));

    od = tm_config_pool_find(&cfg, "a100-od");
    spot = tm_config_pool_find(&cfg, "a100-spot");
    assert_non_null(od);
    assert_non_null(spot);
    assert_null(tm_config_pool_find(&cfg, "nope"));
    assert_string_equal(od->capacity_type, "on_demand");
    assert_string_equal(spot->capacity_type, "spot");
    assert_int_equal(od->nzones, 2);
    assert_string_equal(od->zones[1], "sim-east-1b");
    tm_config_release(&cfg);
}

static void test_demo_loads(void **state)
{
    struct tm_config cfg = {0};
    const struct tm_config_provider *p;
    const struct tm_config_pool *od, *spot;
    char path[1024], err[512];

    (void)state;
    source_path(path, sizeof(path), "config/demo.yaml");
    assert_int_equal(tm_config_load(path, &cfg, err, sizeof(err)), 0);
    assert_string_equal(cfg.cluster, "tarmac-demo");
    assert_int_equal(cfg.tick_interval_ms, 1000);
    assert_true(cfg.time_scale == 60.0);
    assert_string_equal(cfg.database_url, "postgresql:///tarmac");
    p = &cfg.providers[0];
    assert_string_equal(p->kind, "sim");
    assert_int_equal(tm_sim_config(p)->boot_delay_ms, 180000);
    assert_true(p->spot_hazard_per_hour == 0.05);
    od = tm_config_pool_find(&cfg, "a100-od");
    spot = tm_config_pool_find(&cfg, "a100-spot");
    assert_non_null(od);
    assert_non_null(spot);
    assert_string_equal(od->capacity_type, "on_demand");
    assert_string_equal(od->gpu_model, "A100");
    assert_int_equal(od->gpus_per_node, 8);
    assert_int_equal(od->max_nodes, 4);
    assert_int_equal(od->idle_grace_ms, 300000);
    assert_string_equal(spot->capacity_type, "spot");
    assert_int_equal(spot->max_nodes, 4);
    tm_config_release(&cfg);
}

/* ---- defaults, environment, secrets ---------------------------------------- */

static void test_defaults(void **state)
{
    struct tm_config cfg = {0};
    const struct tm_config_provider *p;
    const struct tm_config_pool *pool;
    char err[512];

    (void)state;
    /* The pool leaves gpu_model and gpus_per_node to its instance type. */
    assert_int_equal(load(HEAD PROV POOL, &cfg, err, sizeof(err)), 0);
    assert_int_equal(cfg.database_pool_size, 4);
    assert_string_equal(cfg.listen, "127.0.0.1:8080");
    assert_int_equal(cfg.tick_interval_ms, 5000);
    assert_true(cfg.time_scale == 1.0);
    assert_string_equal(cfg.log_level, "info");
    assert_string_equal(cfg.scheduler_policy, "tarmac");
    assert_int_equal(cfg.starvation_ms, 3600000);
    p = &cfg.providers[0];
    assert_null(p->endpoint);
    assert_string_equal(p->credentials.source, "none");
    assert_null(p->credentials.file);
    assert_int_equal(tm_sim_config(p)->boot_delay_ms, 90000);
    assert_true(p->spot_hazard_per_hour == 0.0);
    assert_int_equal(p->spot_notice_ms, 120000);
    assert_int_equal(tm_sim_config(p)->seed, 1);
    assert_int_equal(p->types[0].capacity, 0);
    pool = &cfg.pools[0];
    assert_string_equal(pool->capacity_type, "on_demand");
    assert_int_equal(pool->min_nodes, 0);
    assert_int_equal(pool->idle_grace_ms, 600000);
    assert_string_equal(pool->gpu_model, "A100");
    assert_int_equal(pool->gpus_per_node, 8);
    assert_true(pool->spot_hazard_per_hour == p->spot_hazard_per_hour);
    assert_int_equal(pool->spot_notice_ms, p->spot_notice_ms);
    assert_null(cfg.api.tls_cert_file);
    assert_int_equal(cfg.api.max_body_bytes, 256 * 1024);
    assert_int_equal(cfg.api.max_list, 1000);
    assert_true(cfg.api.rate_per_s == 100.0 && cfg.api.burst == 200.0);
    assert_null(cfg.alerts.webhook_url);
    assert_int_equal(cfg.alerts.webhook_attempts, 5);
    assert_int_equal(cfg.alerts.webhook_backoff_ms, 2000);
    assert_true(cfg.alerts.pool_util_below_percent == 0.0);
    assert_int_equal(cfg.alerts.queue_age_above_ms, 0);
    assert_true(cfg.alerts.soft_cap && cfg.alerts.provider_auth);
    assert_true(cfg.forecast.quantile == 0.9);
    assert_int_equal(cfg.forecast.history_ms, 8 * 86400000LL);

    /* Release is idempotent and safe on a zeroed struct. */
    tm_config_release(&cfg);
    tm_config_release(&cfg);
    tm_config_release(NULL);
}

/* The api: and alerts: sections, and a pool's own spot hazard and notice. */
static void test_api_alerts_pool_spot(void **state)
{
    struct tm_config cfg = {0};
    char err[512], line[256];

    (void)state;
    assert_int_equal(load(HEAD
                          "api: {tls_cert_file: /c.pem, tls_key_file: /k.pem, max_list: 50, "
                          "rate_per_token: 5, burst: 10}\n"
                          "alerts: {webhook_url: \"https://h.example/T/B/s3cr3t\", soft_cap: false, "
                          "queue_age_above: 30m, pool_utilisation_below_percent: 25}\n" PROV POOL
                          "    spot_hazard: 0.05\n    spot_notice: 30s\n",
                          &cfg, err, sizeof(err)),
                     0);
    assert_string_equal(cfg.api.tls_cert_file, "/c.pem");
    assert_string_equal(cfg.api.tls_key_file, "/k.pem");
    assert_int_equal(cfg.api.max_list, 50);
    assert_true(cfg.api.rate_per_s == 5.0 && cfg.api.burst == 10.0);
    assert_false(cfg.alerts.soft_cap);
    assert_true(cfg.alerts.provider_auth);
    assert_int_equal(cfg.alerts.queue_age_above_ms, 30 * 60000);
    assert_true(cfg.alerts.pool_util_below_percent == 25.0);
    assert_true(cfg.pools[0].spot_hazard_per_hour == 0.05);
    assert_int_equal(cfg.pools[0].spot_notice_ms, 30000);
    /* No disruption budget unless asked for. */
    assert_false(cfg.pools[0].disruption_limited);
    assert_int_equal(cfg.pools[0].disruption_interval_ms, 600000);
    assert_false(cfg.pools[0].drain_oversized);
    tm_config_release(&cfg);
    assert_int_equal(load(HEAD "forecast: {quantile: 0.95, history: 0}\n" PROV POOL, &cfg, err,
                          sizeof(err)),
                     0);
    assert_true(cfg.forecast.quantile == 0.95);
    assert_int_equal(cfg.forecast.history_ms, 0);
    /* The webhook URL carries its credential: it never reaches a log line. */
    snprintf(line, sizeof(line), "posting to https://h.example/T/B/s3cr3t failed");
    tm_log_redact(line, sizeof(line));
    assert_null(strstr(line, "s3cr3t"));
    tm_config_release(&cfg);
}

/* A pool's disruption budget: either key turns it on; the interval and
 * drain_oversized are read as given. */
static void test_pool_disruption_budget(void **state)
{
    struct tm_config cfg = {0};
    char err[512];

    (void)state;
    assert_int_equal(load(HEAD PROV POOL "    disruption_pct: 12.5\n    disruption_interval: 30m\n"
                                         "    drain_oversized: true\n",
                          &cfg, err, sizeof(err)),
                     0);
    assert_true(cfg.pools[0].disruption_limited);
    assert_int_equal(cfg.pools[0].disruption_nodes, 0);
    assert_true(cfg.pools[0].disruption_pct == 12.5);
    assert_int_equal(cfg.pools[0].disruption_interval_ms, 30 * 60000);
    assert_true(cfg.pools[0].drain_oversized);
    tm_config_release(&cfg);
    assert_int_equal(load(HEAD PROV POOL "    disruption_nodes: 2\n", &cfg, err, sizeof(err)), 0);
    assert_true(cfg.pools[0].disruption_limited);
    assert_int_equal(cfg.pools[0].disruption_nodes, 2);
    tm_config_release(&cfg);
}

static void test_null_means_default(void **state)
{
    struct tm_config cfg = {0};
    char err[512];

    (void)state;
    assert_int_equal(load(HEAD "listen: ~\nscheduler:\n" PROV POOL, &cfg, err, sizeof(err)), 0);
    assert_string_equal(cfg.listen, "127.0.0.1:8080");
    assert_string_equal(cfg.scheduler_policy, "tarmac");
    tm_config_release(&cfg);
}

static void test_env_override(void **state)
{
    struct tm_config cfg = {0};
    char err[512];

    (void)state;
    assert_int_equal(load(HEAD PROV POOL, &cfg, err, sizeof(err)), 0);

    setenv("TARMAC_DATABASE_URL", "postgresql://u@db.example:5433/tarmac", 1);
    setenv("TARMAC_LISTEN", "[::1]:9090", 1);
    assert_int_equal(tm_config_apply_env(&cfg, err, sizeof(err)), 0);
    assert_string_equal(cfg.database_url, "postgresql://u@db.example:5433/tarmac");
    assert_string_equal(cfg.listen, "[::1]:9090");

    /* A bad value is refused as the file's would be, and changes nothing. */
    setenv("TARMAC_DATABASE_URL", "postgresql:///other", 1);
    setenv("TARMAC_LISTEN", "no-port", 1);
    assert_int_equal(tm_config_apply_env(&cfg, err, sizeof(err)), TM_EINVAL);
    assert_non_null(strstr(err, "TARMAC_LISTEN"));
    assert_non_null(strstr(err, "no-port"));
    assert_string_equal(cfg.database_url, "postgresql://u@db.example:5433/tarmac");
    assert_string_equal(cfg.listen, "[::1]:9090");
    setenv("TARMAC_LISTEN", "127.0.0.1:70000", 1);
    assert_int_equal(tm_config_apply_env(&cfg, err, sizeof(err)), TM_EINVAL);
    tm_config_release(&cfg);

    /* With the variable set, the file may leave database.url out. */
    unsetenv("TARMAC_LISTEN");
    assert_int_equal(load("cluster: c1\n" PROV POOL, &cfg, err, sizeof(err)), 0);
    assert_null(cfg.database_url);
    assert_int_equal(tm_config_apply_env(&cfg, err, sizeof(err)), 0);
    assert_string_equal(cfg.database_url, "postgresql:///other");
    tm_config_release(&cfg);

    /* Without it, the file must say. */
    unsetenv("TARMAC_DATABASE_URL");
    assert_int_equal(load("cluster: c1\n" PROV POOL, &cfg, err, sizeof(err)), TM_EINVAL);
    assert_string_equal(err, "t.yaml:1: key \"database.url\": missing required key "
                             "(or set TARMAC_DATABASE_URL)");
}

static void test_password_redacted(void **state)
{
    struct tm_config cfg = {0};
    char err[512], line[256];

    (void)state;
    assert_int_equal(load("database: {url: \"postgresql://tarmac:s3cret%21pw@db/t\"}\n"
                          "cluster: c1\n" PROV POOL,
                          &cfg, err, sizeof(err)),
                     0);
    snprintf(line, sizeof(line), "could not connect to %s", cfg.database_url);
    tm_log_redact(line, sizeof(line));
    assert_null(strstr(line, "s3cret"));
    assert_non_null(strstr(line, "[redacted]"));
    snprintf(line, sizeof(line), "password was s3cret!pw");
    tm_log_redact(line, sizeof(line));
    assert_null(strstr(line, "s3cret"));
    tm_config_release(&cfg);

    /* keyword/value form, via the environment */
    assert_int_equal(load(HEAD PROV POOL, &cfg, err, sizeof(err)), 0);
    setenv("TARMAC_DATABASE_URL", "host=db dbname=t password='hunter two'", 1);
    assert_int_equal(tm_config_apply_env(&cfg, err, sizeof(err)), 0);
    snprintf(line, sizeof(line), "auth failed: hunter two");
    tm_log_redact(line, sizeof(line));
    assert_null(strstr(line, "hunter"));
    tm_config_release(&cfg);
}

/* ---- prices and durations ------------------------------------------------- */

static void test_prices(void **state)
{
    static const struct {
        const char *text;
        int64_t uusd; /* -1: refused */
    } cases[] = {
        {"0.000001", 1},     {"32.77", 32770000}, {"0", 0},           {"4.10", 4100000},
        {"1.5", 1500000},    {"12", 12000000},    {"9999999.999999", 9999999999999},
        {"1e3", -1},         {"-1", -1},          {"1.2345678", -1},  {"", -1},
        {"32.", -1},         {".5", -1},          {"10000000", -1},   {"1,5", -1},
        {"+1", -1},          {"0x10", -1},        {"1.5 ", -1},       {"nan", -1},
    };
    struct tm_config cfg = {0};
    char err[512];

    (void)state;
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        int64_t v = -7;
        int r = tm_price_parse(cases[i].text, &v);

        if (cases[i].uusd < 0) {
            assert_int_equal(r, TM_EINVAL);
            assert_int_equal(v, -7);
        } else {
            assert_int_equal(r, 0);
            assert_int_equal(v, cases[i].uusd);
        }
    }

    /* Through the file, plain and quoted, both exact. */
    assert_int_equal(load(HEAD PROV_P("0.000001") POOL, &cfg, err, sizeof(err)), 0);
    assert_int_equal(cfg.providers[0].types[0].on_demand_uusd_per_hour, 1);
    tm_config_release(&cfg);
    assert_int_equal(load(HEAD PROV_P("\"32.77\"") POOL, &cfg, err, sizeof(err)), 0);
    assert_int_equal(cfg.providers[0].types[0].on_demand_uusd_per_hour, 32770000);
    tm_config_release(&cfg);
}

static void test_durations(void **state)
{
    static const struct {
        const char *text;
        int64_t ms; /* -1: refused */
    } cases[] = {
        {"500ms", 500},     {"90s", 90000},   {"15m", 900000}, {"2h", 7200000},
        {"1d", 86400000},   {"90", 90000},    {"0", 0},        {"1h30m", 5400000},
        {"5x", -1},         {"-5s", -1},      {"", -1},        {"1.5s", -1},
        {"s", -1},          {"5 s", -1},      {"99999999999999999999", -1},
        {"99999999999d", -1},
    };

    (void)state;
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        int64_t v = -7;
        int r = tm_duration_parse(cases[i].text, &v);

        if (cases[i].ms < 0) {
            assert_int_equal(r, TM_EINVAL);
            assert_int_equal(v, -7);
        } else {
            assert_int_equal(r, 0);
            assert_int_equal(v, cases[i].ms);
        }
    }
}

/* ---- every error class, with file, line and key path ----------------------- */

static void expect_error(const char *text, const char *want)
{
    struct tm_config cfg = {0};
    char err[512];
    int r = load(text, &cfg, err, sizeof(err));

    if (r != TM_EINVAL || strncmp(err, want, strlen(want)) != 0)
        fail_msg("want \"%s...\"\n got \"%s\" (r=%d)", want, err, r);
    /* Nothing is handed over on failure. */
    assert_null(cfg.path);
    assert_int_equal(cfg.npools, 0);
}

static void test_errors(void **state)
{
    (void)state;
    /* the forecast section's limits */
    expect_error(HEAD "forecast: {quantile: 0.3}\n" PROV POOL,
                 "t.yaml:3: key \"forecast.quantile\": ");
    expect_error(HEAD "forecast: {history: 40d}\n" PROV POOL,
                 "t.yaml:3: key \"forecast.history\": ");
    /* unknown key */
    expect_error(HEAD PROV POOL "    colour: red\n",
                 "t.yaml:15: key \"pools[0].colour\": unknown key, expected one of: name,");
    expect_error("databse: {url: x}\ncluster: c1\n" PROV POOL,
                 "t.yaml:1: key \"databse\": unknown key");
    /* wrong type */
    expect_error(HEAD "tick_interval: [1]\n" PROV POOL,
                 "t.yaml:3: key \"tick_interval\": expected a duration, got a sequence");
    expect_error(HEAD PROV "pools: {name: p1}\n",
                 "t.yaml:9: key \"pools\": expected a sequence, got a mapping");
    expect_error(HEAD PROV POOL_HEAD "    max_nodes: four\n",
                 "t.yaml:14: key \"pools[0].max_nodes\": expected an integer, got \"four\"");
    expect_error("- a\n- b\n", "t.yaml:1: expected a mapping, got a sequence");
    /* out of range */
    expect_error(HEAD "time_scale: 0.5\n" PROV POOL,
                 "t.yaml:3: key \"time_scale\": must be between 1 and 10000, got 0.5");
    expect_error(HEAD "tick_interval: 50ms\n" PROV POOL,
                 "t.yaml:3: key \"tick_interval\": must be between 100ms and 10m");
    expect_error("database: {url: x, pool_size: 65}\ncluster: c1\n" PROV POOL,
                 "t.yaml:1: key \"database.pool_size\": must be between 1 and 64, got 65");
    expect_error(HEAD PROV POOL_HEAD "    max_nodes: 10001\n",
                 "t.yaml:14: key \"pools[0].max_nodes\": must be between 0 and 10000");
    expect_error(HEAD PROV POOL "    min_nodes: 3\n",
                 "t.yaml:14: key \"pools[0].max_nodes\": must be at least min_nodes (3)");
    expect_error(HEAD "api: {tls_cert_file: /c.pem}\n" PROV POOL,
                 "t.yaml:3: key \"api.tls_key_file\": missing: TLS needs both");
    expect_error(HEAD "alerts: {webhook_url: \"ftp://x\"}\n" PROV POOL,
                 "t.yaml:3: key \"alerts.webhook_url\": expected an http:// or https:// URL");
    expect_error(HEAD "alerts: {soft_cap: yes}\n" PROV POOL,
                 "t.yaml:3: key \"alerts.soft_cap\": expected true or false, got \"yes\"");
    expect_error(HEAD PROV POOL "    spot_hazard: -1\n",
                 "t.yaml:15: key \"pools[0].spot_hazard\": must be between 0 and 100");
    expect_error(HEAD PROV POOL "    disruption_nodes: -1\n",
                 "t.yaml:15: key \"pools[0].disruption_nodes\": must be between 0 and 10000, got -1");
    expect_error(HEAD PROV POOL "    disruption_pct: 101\n",
                 "t.yaml:15: key \"pools[0].disruption_pct\": must be between 0 and 100, got 101");
    expect_error(HEAD PROV POOL "    disruption_interval: 2d\n",
                 "t.yaml:15: key \"pools[0].disruption_interval\": must be between 1s and 1d");
    expect_error(HEAD PROV POOL "    drain_oversized: maybe\n",
                 "t.yaml:15: key \"pools[0].drain_oversized\": expected true or false, got \"maybe\"");
    expect_error(HEAD "log_level: loud\n" PROV POOL,
                 "t.yaml:3: key \"log_level\": unrecognized value \"loud\", expected one of: "
                 "debug, info, warn, error");
    expect_error("database: {url: x}\ncluster: Prod_1\n" PROV POOL,
                 "t.yaml:2: key \"cluster\": bad cluster tag \"Prod_1\"");
    expect_error(HEAD "listen: localhost\n" PROV POOL,
                 "t.yaml:3: key \"listen\": bad address \"localhost\"");
    /* duplicate key */
    expect_error(HEAD "cluster: c2\n" PROV POOL,
                 "t.yaml:3: key \"cluster\": duplicate key (first set at line 2)");
    /* duplicate names */
    expect_error(HEAD PROV POOL "  - name: p1\n    provider: sim\n    zones: [z1]\n"
                 "    instance_types: [t8]\n    max_nodes: 1\n",
                 "t.yaml:15: key \"pools[1].name\": duplicate pool name \"p1\"");
    expect_error(HEAD PROV "  - {name: sim, kind: aws, region: r2}\n" POOL,
                 "t.yaml:9: key \"providers[1].name\": duplicate provider name \"sim\"");
    expect_error(HEAD PROV
                 "      - {name: t8, gpus: 1, gpu_model: A100, cpu_milli: 1, memory_mib: 1, "
                 "on_demand_price: 1}\n" POOL,
                 "t.yaml:9: key \"providers[0].instance_types[1].name\": duplicate instance "
                 "type name \"t8\"");
    expect_error(HEAD PROV POOL_HEAD "    zones: [z1]\n    max_nodes: 1\n",
                 "t.yaml:14: key \"pools[0].zones\": duplicate key (first set at line 12)");
    expect_error(HEAD PROV "pools:\n  - name: p1\n    provider: sim\n    zones: [z1, z1]\n",
                 "t.yaml:12: key \"pools[0].zones[1]\": duplicate value \"z1\"");
    /* missing required key */
    expect_error("database: {url: x}\n" PROV POOL,
                 "t.yaml:1: key \"cluster\": missing required key");
    expect_error(HEAD PROV POOL_HEAD, "t.yaml:10: key \"pools[0].max_nodes\": missing required key");
    expect_error(HEAD PROV, "t.yaml:1: key \"pools\": missing required key");
    expect_error(HEAD PROV "pools: []\n", "t.yaml:9: key \"pools\": must have at least 1 entry");
    expect_error(HEAD "providers:\n  - {name: a, kind: aws}\n" POOL,
                 "t.yaml:4: key \"providers[0].region\": missing required key");
    expect_error(HEAD PROV_P("~") POOL,
                 "t.yaml:8: key \"providers[0].instance_types[0].on_demand_price\": must not be "
                 "empty");
    /* references between pools and providers */
    expect_error(HEAD PROV "pools:\n  - name: p1\n    provider: nope\n    zones: [z1]\n"
                 "    instance_types: [t8]\n    max_nodes: 2\n",
                 "t.yaml:11: key \"pools[0].provider\": unknown provider \"nope\"");
    expect_error(HEAD PROV "pools:\n  - name: p1\n    provider: sim\n    zones: [z1]\n"
                 "    instance_types: [t8, t9]\n    max_nodes: 2\n",
                 "t.yaml:13: key \"pools[0].instance_types[1]\": unknown instance type \"t9\" "
                 "for provider \"sim\"");
    /* GPU shape of pool and type */
    expect_error(HEAD PROV POOL "    gpu_model: H100\n",
                 "t.yaml:13: key \"pools[0].instance_types[0]\": instance type \"t8\" has GPU "
                 "model \"A100\", but the pool's gpu_model is \"H100\"");
    expect_error(HEAD PROV POOL "    gpus_per_node: 4\n",
                 "t.yaml:13: key \"pools[0].instance_types[0]\": instance type \"t8\" has 8 "
                 "GPUs, but the pool's gpus_per_node is 4");
    /* bad duration */
    expect_error(HEAD "tick_interval: 5 minutes\n" PROV POOL,
                 "t.yaml:3: key \"tick_interval\": bad duration \"5 minutes\"");
    expect_error(HEAD PROV POOL "    idle_grace: -1m\n",
                 "t.yaml:15: key \"pools[0].idle_grace\": bad duration \"-1m\"");
    /* bad price */
    expect_error(HEAD PROV_P("\"-1\"") POOL,
                 "t.yaml:8: key \"providers[0].instance_types[0].on_demand_price\": bad price "
                 "\"-1\": must not be negative");
    expect_error(HEAD PROV_P("1.2345678") POOL,
                 "t.yaml:8: key \"providers[0].instance_types[0].on_demand_price\": bad price "
                 "\"1.2345678\": has more than 6 decimal places");
    expect_error(HEAD PROV_P("1e3") POOL,
                 "t.yaml:8: key \"providers[0].instance_types[0].on_demand_price\": bad price "
                 "\"1e3\": expected decimal dollars");
    expect_error(HEAD PROV_P("cheap") POOL,
                 "t.yaml:8: key \"providers[0].instance_types[0].on_demand_price\": bad price "
                 "\"cheap\"");
    /* a spot pool needs spot prices */
    expect_error(HEAD "providers:\n  - name: sim\n    kind: sim\n    region: r1\n"
                 "    instance_types:\n      - {name: t8, gpus: 8, gpu_model: A100, "
                 "cpu_milli: 1, memory_mib: 1, on_demand_price: 1}\n" POOL
                 "    capacity_type: spot\n",
                 "t.yaml:13: key \"pools[0].instance_types[0]\": instance type \"t8\" offers no "
                 "spot capacity");
    /* credentials */
    expect_error(HEAD "providers:\n  - name: aws\n    kind: aws\n    region: us-east-1\n"
                 "    credentials: {source: file}\n" POOL,
                 "t.yaml:7: key \"providers[0].credentials.file\": missing required key");
    /* a cloud provider that describes no types: the pool must give its shape */
    expect_error(HEAD "providers:\n  - {name: sim, kind: aws, region: us-east-1}\n" POOL,
                 "t.yaml:6: key \"pools[0].gpu_model\": missing required key");
    /* documents */
    expect_error("", "t.yaml:1: the file holds no configuration");
    expect_error(HEAD PROV POOL "---\ncluster: c2\n",
                 "t.yaml:16: more than one YAML document");
}

/* Fencing: agent.fence_after defaults to 30m and may not be shorter than
 * agent.requeue_after; providers fence unless they say fence: false. */
static void test_fence_keys(void **state)
{
    struct tm_config cfg = {0};
    char err[512];

    (void)state;
    assert_int_equal(load(HEAD PROV POOL, &cfg, err, sizeof(err)), 0);
    assert_int_equal(cfg.agent.fence_after_ms, 30 * 60000);
    assert_true(cfg.providers[0].fence);
    tm_config_release(&cfg);
    assert_int_equal(load(HEAD "agent: {requeue_after: 10s, fence_after: 10s}\n" PROV POOL, &cfg, err,
                          sizeof(err)),
                     0);
    assert_int_equal(cfg.agent.fence_after_ms, 10000);
    tm_config_release(&cfg);
    expect_error(HEAD "agent: {requeue_after: 10m, fence_after: 5m}\n" PROV POOL,
                 "t.yaml:3: key \"agent.fence_after\": must be at least agent.requeue_after (600 s)");
    expect_error(HEAD "agent: {fence_after: 0s}\n" PROV POOL, "t.yaml:3: key \"agent.fence_after\": must be");
}

/* Multi-node rendezvous: the master port range, 29500-29999 by default,
 * at least one port. */
static void test_rendezvous_keys(void **state)
{
    struct tm_config cfg = {0};
    char err[512];

    (void)state;
    assert_int_equal(load(HEAD PROV POOL, &cfg, err, sizeof(err)), 0);
    assert_int_equal(cfg.agent.rendezvous_port_min, 29500);
    assert_int_equal(cfg.agent.rendezvous_port_max, 29999);
    tm_config_release(&cfg);
    assert_int_equal(load(HEAD "agent: {rendezvous_port_min: 40000, rendezvous_port_max: 40000}\n" PROV POOL,
                          &cfg, err, sizeof(err)),
                     0);
    assert_int_equal(cfg.agent.rendezvous_port_max, 40000);
    tm_config_release(&cfg);
    expect_error(HEAD "agent: {rendezvous_port_min: 40000, rendezvous_port_max: 39999}\n" PROV POOL,
                 "t.yaml:3: key \"agent.rendezvous_port_max\": must be at least agent.rendezvous_port_min (40000)");
    expect_error(HEAD "agent: {rendezvous_port_min: 80}\n" PROV POOL,
                 "t.yaml:3: key \"agent.rendezvous_port_min\": must be between 1024 and 65535, got 80");
}

/* A gang's start barrier: 5 minutes by default, 1 s at least. */
static void test_gang_start_timeout(void **state)
{
    struct tm_config cfg = {0};
    char err[512];

    (void)state;
    assert_int_equal(load(HEAD PROV POOL, &cfg, err, sizeof(err)), 0);
    assert_int_equal(cfg.agent.gang_start_timeout_ms, 300000);
    tm_config_release(&cfg);
    assert_int_equal(load(HEAD "agent: {gang_start_timeout: 3s}\n" PROV POOL, &cfg, err, sizeof(err)), 0);
    assert_int_equal(cfg.agent.gang_start_timeout_ms, 3000);
    tm_config_release(&cfg);
    expect_error(HEAD "agent: {gang_start_timeout: 0s}\n" PROV POOL,
                 "t.yaml:3: key \"agent.gang_start_timeout\": must be");
}

/* logs.s3: read as written, defaults filled, and checked only when
 * logs.store is s3 (then the bucket is required), naming the key. */
static void test_logs_s3_keys(void **state)
{
    struct tm_config cfg = {0};
    char err[512];

    (void)state;
    assert_int_equal(load(HEAD PROV POOL, &cfg, err, sizeof(err)), 0);
    assert_string_equal(cfg.logs.s3.prefix, "tarmac-logs/");
    assert_int_equal(cfg.logs.s3.timeout_ms, 60000);
    assert_null(cfg.logs.s3.bucket);
    tm_config_release(&cfg);
    assert_int_equal(load(HEAD "logs:\n  store: s3\n  s3:\n    bucket: team-logs\n"
                               "    endpoint: \"http://127.0.0.1:9000/\"\n    region: eu-west-1\n"
                               "    prefix: a/b-\n    credentials: {source: env}\n    timeout: 5s\n" PROV POOL,
                          &cfg, err, sizeof(err)),
                     0);
    assert_string_equal(cfg.logs.store, "s3");
    assert_string_equal(cfg.logs.s3.bucket, "team-logs");
    assert_string_equal(cfg.logs.s3.region, "eu-west-1");
    assert_string_equal(cfg.logs.s3.prefix, "a/b-");
    assert_string_equal(cfg.logs.s3.credentials.source, "env");
    assert_int_equal(cfg.logs.s3.timeout_ms, 5000);
    tm_config_release(&cfg);
    /* The bucket of a store that is not s3 is not looked at. */
    assert_int_equal(load(HEAD "logs: {s3: {bucket: X}}\n" PROV POOL, &cfg, err, sizeof(err)), 0);
    tm_config_release(&cfg);
    expect_error(HEAD "logs: {store: s3}\n" PROV POOL,
                 "t.yaml:3: key \"logs.s3.bucket\": missing required key (logs.store is s3)");
    expect_error(HEAD "logs: {store: s3, s3: {bucket: Team_Logs}}\n" PROV POOL,
                 "t.yaml:3: key \"logs.s3.bucket\": expected 3 to 63 of a-z 0-9 . -");
    expect_error(HEAD "logs: {store: s3, s3: {bucket: ok-bucket, endpoint: \"http://h:9000/sub\"}}\n" PROV POOL,
                 "t.yaml:3: key \"logs.s3.endpoint\": expected http:// or https://");
    expect_error(HEAD "logs: {store: s3, s3: {bucket: ok-bucket, endpoint: \"ftp://h\"}}\n" PROV POOL,
                 "t.yaml:3: key \"logs.s3.endpoint\": ");
    expect_error(HEAD "logs: {store: s3, s3: {bucket: ok-bucket, region: \"US East\"}}\n" PROV POOL,
                 "t.yaml:3: key \"logs.s3.region\": ");
    expect_error(HEAD "logs: {store: s3, s3: {bucket: ok-bucket, prefix: \"/abs\"}}\n" PROV POOL,
                 "t.yaml:3: key \"logs.s3.prefix\": ");
    expect_error(HEAD "logs: {store: s3, s3: {bucket: ok-bucket, prefix: \"a b\"}}\n" PROV POOL,
                 "t.yaml:3: key \"logs.s3.prefix\": ");
    expect_error(HEAD "logs: {store: s3, s3: {bucket: ok-bucket, credentials: {source: magic}}}\n" PROV POOL,
                 "t.yaml:3: key \"logs.s3.credentials.source\": ");
    expect_error(HEAD "logs: {store: s3, s3: {bucket: ok-bucket, secret_key: x}}\n" PROV POOL,
                 "t.yaml:3: key \"logs.s3.secret_key\": unknown key");
}

static void test_syntax_errors(void **state)
{
    (void)state;
    expect_error(HEAD "listen: \"127.0.0.1:80\n",
                 "t.yaml:4: syntax error: found unexpected end of stream");
    expect_error(HEAD "providers:\n  - name: a\n   kind: b\n",
                 "t.yaml:5: syntax error: ");
    expect_error("a: [1, 2\nb: 3\n", "t.yaml:");
    expect_error("a: \xff\n", "t.yaml:1: syntax error: invalid");
}

static void test_io_errors(void **state)
{
    struct tm_config cfg = {0};
    char err[512];

    (void)state;
    assert_int_equal(tm_config_load("/nonexistent/tarmac.yaml", &cfg, err, sizeof(err)),
                     -ENOENT);
    assert_non_null(strstr(err, "/nonexistent/tarmac.yaml"));
    /* err may be absent */
    assert_int_equal(load("cluster: [", &cfg, NULL, 0), TM_EINVAL);
}

static void test_cloud_provider_pool(void **state)
{
    struct tm_config cfg = {0};
    char err[512];

    (void)state;
    /* Cloud pools may name types the file does not describe. */
    assert_int_equal(load(HEAD "providers:\n  - name: aws\n    kind: aws\n    region: us-east-1\n"
                               "    credentials: {source: file, file: /etc/x, profile: tm}\n"
                               "pools:\n  - {name: p, provider: aws, zones: [us-east-1a], "
                               "instance_types: [p4d.24xlarge], gpu_model: A100, "
                               "gpus_per_node: 8, max_nodes: 2, capacity_type: "
                               "spot_then_on_demand}\n",
                          &cfg, err, sizeof(err)),
                     0);
    assert_string_equal(cfg.providers[0].credentials.file, "/etc/x");
    assert_string_equal(cfg.pools[0].instance_types[0], "p4d.24xlarge");
    tm_config_release(&cfg);
}

/* ---- a provider's fitted spot hazard table (spot_hazards) ----------------- */

/* The table the spot_hazards tests read: t8 fitted in z1, availability
 * only in z2 (no hazard: the pool's applies), nothing for z3. */
static const char spot_table[] =
    "hazards:\n"                                                     /* 1 */
    "  - {type: t8, zone: z1, hazard_per_hour: 0.7353, availability: 0.5}\n" /* 2 */
    "  - {type: t8, zone: z2, availability: 0.9}\n";                 /* 3 */

/* The tables' directory, made by setup_table_dir and emptied by
 * teardown_table_dir, which cmocka runs after a failed test too. */
static char table_dir[] = "/tmp/tm-config-XXXXXX";
static const char *const table_names[] = {"hazards.yaml", "bad.yaml", "twice.yaml"};

static int setup_table_dir(void **state)
{
    snprintf(table_dir, sizeof(table_dir), "/tmp/tm-config-XXXXXX");
    if (!mkdtemp(table_dir))
        return -1;
    return setup_env(state);
}

static int teardown_table_dir(void **state)
{
    char path[512];

    for (size_t i = 0; i < sizeof(table_names) / sizeof(table_names[0]); i++) {
        snprintf(path, sizeof(path), "%s/%s", table_dir, table_names[i]);
        unlink(path);
    }
    rmdir(table_dir);
    return teardown_env(state);
}

/* Write text to table_dir/name (one of table_names) and put the path in
 * path. */
static void write_file(const char *name, const char *text, char *path, size_t size)
{
    FILE *f;

    snprintf(path, size, "%s/%s", table_dir, name);
    f = fopen(path, "w");
    assert_non_null(f);
    assert_int_equal(fputs(text, f) >= 0, 1);
    assert_int_equal(fclose(f), 0);
}

/* HEAD PROV, then the provider's spot_hazards (line 9), then a pool p1 in
 * zones z1, z2, z3 with its own spot_hazard 0.05. */
static void config_with_table(char *buf, size_t size, const char *table_path)
{
    snprintf(buf, size,
             HEAD PROV "    spot_hazards: \"%s\"\n" /* 9 */
             "pools:\n"
             "  - {name: p1, provider: sim, zones: [z1, z2, z3], instance_types: [t8],"
             " capacity_type: spot, max_nodes: 2, spot_hazard: 0.05}\n",
             table_path);
}

static void test_spot_hazards_table(void **state)
{
    struct tm_config cfg = {0};
    const struct tm_config_pool *pool;
    char table[512], text[2048], err[512];
    bool fitted = true;
    long n;

    (void)state;
    write_file("hazards.yaml", spot_table, table, sizeof(table));
    config_with_table(text, sizeof(text), table);
    assert_int_equal(load(text, &cfg, err, sizeof(err)), 0);
    assert_string_equal(cfg.providers[0].spot_hazards_file, table);
    assert_non_null(cfg.providers[0].spot_hazards);
    pool = &cfg.pools[0];
    /* The fitted cell takes the table's figure ... */
    assert_true(tm_config_spot_hazard(&cfg, pool, "t8", "z1", &fitted) == 0.7353);
    assert_true(fitted);
    /* ... a row without a hazard, and a cell the table lacks, the pool's. */
    assert_true(tm_config_spot_hazard(&cfg, pool, "t8", "z2", &fitted) == 0.05);
    assert_false(fitted);
    assert_true(tm_config_spot_hazard(&cfg, pool, "t8", "z3", &fitted) == 0.05);
    assert_false(fitted);
    assert_true(tm_config_spot_hazard(&cfg, pool, "t1", "z1", NULL) == 0.05);
    assert_int_equal(tm_config_spot_cells_fitted(&cfg, pool, NULL), 1); /* (t8, z1) alone */
    assert_int_equal(tm_config_spot_cells_fitted(&cfg, pool, "t8"), 1);
    assert_int_equal(tm_config_spot_cells_fitted(&cfg, pool, "t1"), 0);
    tm_config_release(&cfg);

    /* A pool whose own hazard is 0 (unset: unknown) takes its cells the
     * table lacks to be no safer than its worst fitted zone of the type,
     * so the planner never prefers the zone it knows least; a type the
     * table never fits stays 0. */
    snprintf(text, sizeof(text),
             HEAD PROV "    spot_hazards: \"%s\"\n"
             "pools:\n"
             "  - {name: p1, provider: sim, zones: [z1, z2, z3], instance_types: [t8],"
             " capacity_type: spot, max_nodes: 2}\n",
             table);
    assert_int_equal(load(text, &cfg, err, sizeof(err)), 0);
    pool = &cfg.pools[0];
    assert_true(tm_config_spot_hazard(&cfg, pool, "t8", "z1", &fitted) == 0.7353);
    assert_true(tm_config_spot_hazard(&cfg, pool, "t8", "z2", &fitted) == 0.7353);
    assert_false(fitted);
    assert_true(tm_config_spot_hazard(&cfg, pool, "t8", "z3", &fitted) == 0.7353);
    assert_true(tm_config_spot_hazard(&cfg, pool, "t1", "z1", &fitted) == 0);
    assert_false(fitted);
    tm_config_release(&cfg);

    /* The table's memory comes from the loader's allocator: each failure
     * is a clean TM_ENOMEM (and no leak under ASan). */
    for (n = 0; n < 10000; n++) {
        int r;
        cfg_fault_countdown = n;
        r = load(text, &cfg, err, sizeof(err));
        if (r == 0)
            break;
        assert_int_equal(r, TM_ENOMEM);
        assert_null(cfg.path);
    }
    cfg_fault_countdown = -1;
    assert_true(n < 10000);
    tm_config_release(&cfg);

    /* Key absent: no table, so every cell has the pool's own hazard. */
    assert_int_equal(load(HEAD PROV POOL "    spot_hazard: 0.05\n", &cfg, err, sizeof(err)), 0);
    assert_null(cfg.providers[0].spot_hazards_file);
    assert_null(cfg.providers[0].spot_hazards);
    assert_true(tm_config_spot_hazard(&cfg, &cfg.pools[0], "t8", "z1", &fitted) == 0.05);
    assert_false(fitted);
    assert_int_equal(tm_config_spot_cells_fitted(&cfg, &cfg.pools[0], NULL), 0);
    tm_config_release(&cfg);
}

static void test_spot_hazards_errors(void **state)
{
    char table[512], text[2048], want[1024];

    (void)state;
    /* A file that is not there: the key, then the table loader's reason. */
    config_with_table(text, sizeof(text), "/nonexistent/hazards.yaml");
    expect_error(text, "t.yaml:9: key \"providers[0].spot_hazards\": /nonexistent/hazards.yaml: "
                       "could not open: No such file or directory");
    /* Not a file: refused before it is opened (a FIFO would block). */
    config_with_table(text, sizeof(text), "/dev/null");
    expect_error(text, "t.yaml:9: key \"providers[0].spot_hazards\": /dev/null: not a regular file");
    config_with_table(text, sizeof(text), "/tmp");
    expect_error(text, "t.yaml:9: key \"providers[0].spot_hazards\": /tmp: not a regular file");
    /* A bad row: the table's own file and line after the key's. */
    write_file("bad.yaml",
               "hazards:\n"
               "  - type: t8\n"
               "    zone: z1\n"
               "    hazard_per_hour: fast\n",
               table, sizeof(table));
    config_with_table(text, sizeof(text), table);
    snprintf(want, sizeof(want),
             "t.yaml:9: key \"providers[0].spot_hazards\": %s:4: \"hazard_per_hour\" must be a "
             "number, not \"fast\"",
             table);
    expect_error(text, want);
    /* A pair named twice is the table's error too. */
    write_file("twice.yaml",
               "hazards:\n"
               "  - {type: t8, zone: z1, hazard_per_hour: 0.1}\n"
               "  - {type: t8, zone: z1, hazard_per_hour: 0.2}\n",
               table, sizeof(table));
    config_with_table(text, sizeof(text), table);
    snprintf(want, sizeof(want),
             "t.yaml:9: key \"providers[0].spot_hazards\": %s:3: t8 z1 (1 nodes) is named twice",
             table);
    expect_error(text, want);
}

/* SQLite's countdown: fail allocation n for n = 0, 1, ... until the load
 * succeeds; every failure must be a clean TM_ENOMEM (ASan checks leaks). */
static void test_allocation_failures(void **state)
{
    char path[1024], err[512];
    size_t len;
    char *text;
    long n;

    (void)state;
    source_path(path, sizeof(path), "config/tarmac.example.yaml");
    text = slurp(path, &len);
    for (n = 0; n < 100000; n++) {
        struct tm_config cfg = {0};
        int r;

        cfg_fault_countdown = n;
        r = tm_config_load_string(text, len, "x.yaml", &cfg, err, sizeof(err));
        if (r == 0) {
            tm_config_release(&cfg);
            break;
        }
        assert_int_equal(r, TM_ENOMEM);
        assert_non_null(strstr(err, "out of memory"));
        assert_null(cfg.path);
    }
    cfg_fault_countdown = -1;
    fprintf(stderr, "load succeeded after %ld injected allocation failures\n", n);
    assert_true(n > 20); /* the example makes many allocations */
    assert_true(n < 100000);
    free(text);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_example_loads, setup_env, teardown_env),
        cmocka_unit_test_setup_teardown(test_demo_loads, setup_env, teardown_env),
        cmocka_unit_test_setup_teardown(test_defaults, setup_env, teardown_env),
        cmocka_unit_test_setup_teardown(test_api_alerts_pool_spot, setup_env, teardown_env),
        cmocka_unit_test_setup_teardown(test_null_means_default, setup_env, teardown_env),
        cmocka_unit_test_setup_teardown(test_env_override, setup_env, teardown_env),
        cmocka_unit_test_setup_teardown(test_password_redacted, setup_env, teardown_env),
        cmocka_unit_test_setup_teardown(test_prices, setup_env, teardown_env),
        cmocka_unit_test_setup_teardown(test_durations, setup_env, teardown_env),
        cmocka_unit_test_setup_teardown(test_errors, setup_env, teardown_env),
        cmocka_unit_test_setup_teardown(test_syntax_errors, setup_env, teardown_env),
        cmocka_unit_test_setup_teardown(test_io_errors, setup_env, teardown_env),
        cmocka_unit_test_setup_teardown(test_cloud_provider_pool, setup_env, teardown_env),
        cmocka_unit_test_setup_teardown(test_pool_disruption_budget, setup_env, teardown_env),
        cmocka_unit_test_setup_teardown(test_fence_keys, setup_env, teardown_env),
        cmocka_unit_test_setup_teardown(test_rendezvous_keys, setup_env, teardown_env),
        cmocka_unit_test_setup_teardown(test_gang_start_timeout, setup_env, teardown_env),
        cmocka_unit_test_setup_teardown(test_logs_s3_keys, setup_env, teardown_env),
        cmocka_unit_test_setup_teardown(test_allocation_failures, setup_env, teardown_env),
        cmocka_unit_test_setup_teardown(test_spot_hazards_table, setup_table_dir, teardown_table_dir),
        cmocka_unit_test_setup_teardown(test_spot_hazards_errors, setup_table_dir, teardown_table_dir),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
