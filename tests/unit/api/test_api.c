/*
 * tests/unit/api/test_api.c: the HTTP API end to end against a real PostgreSQL
 * (label integration;service, fixture pg).
 *
 * The main thread runs one loop with the pg_uv pool and two API servers on
 * free loopback ports: a roomy one, and a tight one (1 KiB bodies, 5 items
 * a page, 3 requests of burst) for the limits.  A second thread is the
 * client and runs the cmocka tests: libcurl (one handle, so a connection
 * stays alive and the shutdown must close an idle keep-alive connection),
 * libpq for what was written, and tests/lib/openapi_check.py for the role
 * matrix and docs/openapi.yaml.  The loop ends with uv_loop_close() == 0.
 */
#include <inttypes.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <fcntl.h>
#include <unistd.h>

#include <cmocka.h>
#include <cjson/cJSON.h>
#include <curl/curl.h>
#include <libpq-fe.h>
#include <uv.h>

#include "controller/api/routes.h"
#include "controller/api/server.h"
#include "controller/api/internal.h"
#include "controller/api/fleet_stats.h"
#include "controller/store/migrate.h"
#include "controller/store/store.h"
#include "controller/cli/cli.h"
#include "controller/daemon/quotas.h"
#include "controller/spec/token.h"
#include "controller/store/tokens.h"
#include "core/config.h"
#include "core/err.h"
#include "tests/lib/tm_test.h"

enum { T_ADMIN, T_FINANCE, T_ENGINEER, T_VIEWER, T_OTHER, T_REVOKED, T_MAX };

static struct {
    const char *url;
    PGconn *conn;
    uv_loop_t loop;
    uv_async_t stop;
    struct tm_pg_pool *pool;
    struct tm_api *api, *tight;
    int port, tight_port;
    int closed;
    char tok[T_MAX][TM_TOKEN_LEN + 1];
    int64_t node_id, node2_id;
    CURL *curl;
    struct tm_fleet_stats fleet;   /* the roomy server's, set before the loop runs */
} g;

/* ---- the server thread --------------------------------------------------- */

static void on_api_closed(void *data)
{
    (void)data;
    if (++g.closed == 2)
        tm_pg_pool_close(g.pool, NULL, NULL);
}

static void on_stop(uv_async_t *a)
{
    uv_close((uv_handle_t *)a, NULL);
    tm_api_close(g.api, on_api_closed, NULL);
    tm_api_close(g.tight, on_api_closed, NULL);
}

/* Known controller counters for the roomy server's /metrics (the tight
 * one has none): written here, before the loop runs, and never again, so
 * the client thread's scrapes race with nothing.  test_metrics expects
 * exactly these. */
static int fleet_fixture(void)
{
    static const char *const names[] = {"sim-x"};
    int r = tm_fleet_stats_init(&g.fleet, names, 1);

    if (r < 0)
        return r;
    g.fleet.ticks = 5;
    g.fleet.leader = true;
    tm_fleet_stats_tick_done(&g.fleet, 0.003);
    tm_fleet_stats_tick_done(&g.fleet, 0.2);
    tm_fleet_stats_tick_done(&g.fleet, 40);
    tm_fleet_stats_call(&g.fleet, 0, TM_FLEET_OP_LIST, 0);
    tm_fleet_stats_call(&g.fleet, 0, TM_FLEET_OP_LIST, TM_EAUTH);
    tm_fleet_stats_call(&g.fleet, 0, TM_FLEET_OP_LAUNCH, TM_EQUOTA);
    tm_fleet_stats_call(&g.fleet, 0, TM_FLEET_OP_LAUNCH, TM_EQUOTA);
    tm_fleet_stats_call(&g.fleet, 0, TM_FLEET_OP_TERMINATE, TM_ECANCELED); /* not counted */
    tm_api_set_fleet_stats(g.api, &g.fleet);
    return 0;
}

/* The server runs on the main thread: h2o keeps thread-local free lists
 * of memory chunks, which stay reachable (not leaks) only while their
 * thread lives. */
static int start_server(void)
{
    struct tm_api_limits roomy, tight;
    int r;

    tm_api_limits_default(&roomy);
    roomy.rate_per_s = 1e6;
    roomy.burst = 1e6;
    tight = roomy;
    tight.max_body_bytes = 1024;
    tight.max_list = 5;
    tight.rate_per_s = 0.001;
    tight.burst = 3;
    r = uv_loop_init(&g.loop);
    if (r == 0)
        r = tm_pg_pool_create(&g.loop, g.url, 2, NULL, NULL, &g.pool);
    if (r == 0)
        r = tm_api_start_listen(&g.loop, g.pool, &tm_api_v1_routes, "127.0.0.1:0", &roomy, &g.api);
    if (r == 0)
        r = tm_api_start_listen(&g.loop, g.pool, &tm_api_v1_routes, "localhost:0", &tight, &g.tight);
    if (r == 0)
        r = uv_async_init(&g.loop, &g.stop, on_stop);
    if (r == 0)
        r = fleet_fixture();
    g.port = tm_api_port(g.api);
    g.tight_port = tm_api_port(g.tight);
    return r;
}

/* ---- client helpers ------------------------------------------------------- */

struct buf {
    char *p;
    size_t n;
};

static size_t on_data(char *ptr, size_t size, size_t nmemb, void *data)
{
    struct buf *b = data;
    size_t n = size * nmemb;
    char *p = realloc(b->p, b->n + n + 1);

    if (!p)
        return 0;
    memcpy(p + b->n, ptr, n);
    b->p = p;
    b->n += n;
    b->p[b->n] = '\0';
    return n;
}

static char last_retry_after[32];

static size_t on_header(char *ptr, size_t size, size_t nmemb, void *data)
{
    size_t n = size * nmemb;
    (void)data;
    if (n > 13 && strncasecmp(ptr, "Retry-After: ", 13) == 0)
        snprintf(last_retry_after, sizeof(last_retry_after), "%.*s", (int)(n - 13), ptr + 13);
    return n;
}

/* A thread other than the client's uses its own handle. */
static __thread CURL *tl_curl;

/* One request; returns the status, *ret_body (caller frees) the answer. */
static long http_on(int port, const char *method, const char *path, const char *token,
                    const char *body, size_t body_len, char **ret_body, long timeout_ms)
{
    char url[512], auth[512];
    struct curl_slist *h = NULL;
    struct buf b = {0};
    long status = 0;
    CURLcode rc;

    CURL *curl = tl_curl ? tl_curl : g.curl;

    snprintf(url, sizeof(url), "http://127.0.0.1:%d%s", port, path);
    curl_easy_reset(curl);
    curl_easy_setopt(curl, CURLOPT_URL, url);
    curl_easy_setopt(curl, CURLOPT_CUSTOMREQUEST, method);
    curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, on_data);
    curl_easy_setopt(curl, CURLOPT_WRITEDATA, &b);
    curl_easy_setopt(curl, CURLOPT_HEADERFUNCTION, on_header);
    curl_easy_setopt(curl, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(curl, CURLOPT_TIMEOUT_MS, timeout_ms);
    if (token) {
        snprintf(auth, sizeof(auth), "Authorization: Bearer %s", token);
        h = curl_slist_append(h, auth);
    }
    if (body) {
        h = curl_slist_append(h, "Content-Type: application/json");
        curl_easy_setopt(curl, CURLOPT_POSTFIELDS, body);
        curl_easy_setopt(curl, CURLOPT_POSTFIELDSIZE, (long)body_len);
    }
    curl_easy_setopt(curl, CURLOPT_HTTPHEADER, h);
    last_retry_after[0] = '\0';
    rc = curl_easy_perform(curl);
    if (rc == CURLE_OK)
        curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &status);
    curl_slist_free_all(h);
    if (ret_body)
        *ret_body = b.p ? b.p : strdup("");
    else
        free(b.p);
    return rc == CURLE_OK ? status : -(long)rc;
}

static long http(const char *method, const char *path, int who, const char *body, char **ret)
{
    return http_on(g.port, method, path, who >= 0 ? g.tok[who] : NULL, body,
                   body ? strlen(body) : 0, ret, 20000);
}

/* The answer's "field", or "" when absent or null. */
static void assert_error(const char *body, const char *field)
{
    cJSON *o = cJSON_Parse(body);
    const cJSON *f, *e;

    assert_non_null(o);
    e = cJSON_GetObjectItemCaseSensitive(o, "error");
    f = cJSON_GetObjectItemCaseSensitive(o, "field");
    assert_true(cJSON_IsString(e));
    assert_non_null(f);
    if (field) {
        if (!cJSON_IsString(f) || strcmp(f->valuestring, field) != 0)
            fail_msg("expected field \"%s\" in %s", field, body);
    } else {
        assert_true(cJSON_IsNull(f));
    }
    cJSON_Delete(o);
}

static int64_t json_i64(const char *body, const char *key)
{
    cJSON *o = cJSON_Parse(body);
    const cJSON *v = o ? cJSON_GetObjectItemCaseSensitive(o, key) : NULL;
    int64_t r = cJSON_IsNumber(v) ? (int64_t)v->valuedouble : -1;

    cJSON_Delete(o);
    return r;
}

static char *json_str(const char *body, const char *key)
{
    cJSON *o = cJSON_Parse(body);
    const cJSON *v = o ? cJSON_GetObjectItemCaseSensitive(o, key) : NULL;
    char *r = cJSON_IsString(v) ? strdup(v->valuestring) : NULL;

    if (!r && cJSON_IsBool(v))
        r = strdup(cJSON_IsTrue(v) ? "true" : "false");
    cJSON_Delete(o);
    return r;
}

static long long sql_count(const char *sql)
{
    PGresult *res = PQexec(g.conn, sql);
    long long n;

    if (PQresultStatus(res) != PGRES_TUPLES_OK)
        fail_msg("%s: %s", sql, PQresultErrorMessage(res));
    n = atoll(PQgetvalue(res, 0, 0));
    PQclear(res);
    return n;
}

static void sql_ok(const char *sql)
{
    PGresult *res = PQexec(g.conn, sql);
    ExecStatusType st = PQresultStatus(res);

    if (st != PGRES_COMMAND_OK && st != PGRES_TUPLES_OK)
        fail_msg("%s: %s", sql, PQresultErrorMessage(res));
    PQclear(res);
}

static int64_t sql_i64(const char *sql)
{
    return (int64_t)sql_count(sql);
}

/* ---- fixture -------------------------------------------------------------- */

/* Blocking, before the loop runs: schema, pools, nodes, tokens. */
static int make_fixture(void)
{
    char err[512];
    int applied = 0;
    static const struct { int who; const char *name, *role, *team; } toks[] = {
        {T_ADMIN, "t-admin", "admin", NULL},
        {T_FINANCE, "t-finance", "finance", NULL},
        {T_ENGINEER, "t-engineer", "engineer", "vision"},
        {T_VIEWER, "t-viewer", "viewer", NULL},
        {T_OTHER, "t-other", "engineer", "speech"},
        {T_REVOKED, "t-revoked", "admin", NULL},
    };

    g.url = tm_test_db_url("tm_api");
    if (!g.url)
        return -1;
    g.conn = tm_store_connect_blocking(g.url, err, sizeof(err));
    if (!g.conn || tm_migrate(g.conn, &applied, err, sizeof(err)) < 0) {
        fprintf(stderr, "setup: %s\n", err);
        return -1;
    }
    sql_ok("INSERT INTO pools (name, provider, provider_kind, region, zones, instance_types,"
           " gpu_model, gpus_per_node, capacity_type, min_nodes, max_nodes, idle_grace_ms, updated_ms)"
           " VALUES ('a100', 'sim', 'sim', 'r1', '{z1}', '{sim.8x-a100}', 'A100', 8, 'on_demand', 0, 10, 600000, 1),"
           " ('h100', 'sim', 'sim', 'r1', '{z1}', '{sim.8x-h100}', 'H100', 8, 'spot', 0, 10, 600000, 1)");
    g.node_id = sql_i64("INSERT INTO nodes (pool, launch_token, instance_id, zone, instance_type, gpus,"
                        " gpu_model, cpu_milli, memory_mib, capacity_type, state, price_uusd_per_hour,"
                        " requested_ms, billed_from_ms, ready_ms)"
                        " VALUES ('a100', 'tok-1', 'i-1', 'z1', 'sim.8x-a100', 8, 'A100', 96000, 1000000,"
                        " 'on_demand', 'ready', 32770000, 1, 1, 2) RETURNING id");
    g.node2_id = sql_i64("INSERT INTO nodes (pool, launch_token, instance_id, zone, instance_type, gpus,"
                         " gpu_model, cpu_milli, memory_mib, capacity_type, state, price_uusd_per_hour,"
                         " requested_ms, billed_from_ms, ready_ms)"
                         " VALUES ('a100', 'tok-2', 'i-2', 'z1', 'sim.8x-a100', 8, 'A100', 96000, 1000000,"
                         " 'on_demand', 'ready', 32770000, 1, 1, 2) RETURNING id");
    for (size_t i = 0; i < sizeof(toks) / sizeof(toks[0]); i++) {
        if (tm_token_create(g.conn, toks[i].name, toks[i].role, toks[i].team, 1, g.tok[toks[i].who],
                            err, sizeof(err)) < 0) {
            fprintf(stderr, "setup: %s\n", err);
            return -1;
        }
    }
    return tm_token_revoke(g.conn, "t-revoked", err, sizeof(err)) < 0 ? -1 : 0;
}

static int setup(void **state)
{
    (void)state;
    curl_global_init(CURL_GLOBAL_DEFAULT);
    g.curl = curl_easy_init();
    /* Ready once the pool has a connection. */
    for (int i = 0; i < 200; i++) {
        char *b;
        long st = http("GET", "/readyz", -1, NULL, &b);
        free(b);
        if (st == 200)
            return 0;
        usleep(25000);
    }
    fprintf(stderr, "setup: never ready\n");
    return -1;
}

static int teardown(void **state)
{
    (void)state;
    /* The curl handle keeps its idle keep-alive connection open on
     * purpose: the server's shutdown must close it. */
    return 0;
}


/* ---- tests ---------------------------------------------------------------- */

static void test_health(void **state)
{
    char *b;
    (void)state;

    assert_int_equal(http("GET", "/healthz", -1, NULL, &b), 200);
    assert_non_null(strstr(b, "\"ok\""));
    free(b);
    assert_int_equal(http("GET", "/readyz", -1, NULL, &b), 200);
    free(b);
    assert_int_equal(http("GET", "/metrics", -1, NULL, &b), 200);
    assert_non_null(strstr(b, "# TYPE tarmac_api_requests_total counter"));
    free(b);
    assert_int_equal(http("GET", "/v1/nope", T_ADMIN, NULL, &b), 404);
    assert_error(b, NULL);
    free(b);
    assert_int_equal(http("PUT", "/v1/jobs", T_ADMIN, "{}", &b), 405);
    assert_error(b, NULL);
    free(b);
}

static void test_submit_roles(void **state)
{
    const char *job = "{\"team\":\"vision\",\"name\":\"resnet\",\"command\":\"python train.py\","
                      "\"gpus\":2,\"gpu_model\":\"A100|H100\",\"cpu_milli\":8000,\"memory_mib\":65536,"
                      "\"class\":\"train\",\"priority\":10,\"runtime_estimate_s\":3600,"
                      "\"preemptible\":true,\"checkpointable\":true,\"deadline\":86400}";
    char *b, *s, path[64];
    int64_t id;
    (void)state;

    assert_int_equal(http("POST", "/v1/jobs", T_ENGINEER, job, &b), 201);
    id = json_i64(b, "id");
    assert_true(id > 0);
    assert_int_equal(json_i64(b, "gpus"), 2);
    assert_int_equal(json_i64(b, "gpu_milli"), 1000);
    assert_int_equal(json_i64(b, "runtime_estimate_s"), 3600);
    assert_true(json_i64(b, "deadline_ms") > json_i64(b, "submitted_ms"));
    s = json_str(b, "state");
    assert_string_equal(s, "queued");
    free(s);
    s = json_str(b, "preemptible");
    assert_string_equal(s, "true");
    free(s);
    free(b);

    snprintf(path, sizeof(path), "/v1/jobs/%" PRId64, id);
    for (int who = T_ADMIN; who <= T_VIEWER; who++) {
        assert_int_equal(http("GET", path, who, NULL, &b), 200);
        assert_int_equal(json_i64(b, "id"), id);
        free(b);
    }
    /* A share of one GPU. */
    assert_int_equal(http("POST", "/v1/jobs", T_ADMIN,
                          "{\"team\":\"vision\",\"gpu_milli\":250,\"class\":\"inference\"}", &b),
                     201);
    assert_int_equal(json_i64(b, "gpus"), 0);
    assert_int_equal(json_i64(b, "gpu_milli"), 250);
    free(b);

    long long before = sql_count("SELECT count(*) FROM jobs");
    assert_int_equal(http("POST", "/v1/jobs", T_OTHER, job, &b), 403);
    assert_error(b, "team");
    free(b);
    assert_int_equal(http("POST", "/v1/jobs", T_VIEWER, job, &b), 403);
    free(b);
    assert_int_equal(http("POST", "/v1/jobs", T_FINANCE, job, &b), 403);
    free(b);
    assert_int_equal(http("POST", "/v1/jobs", -1, job, &b), 401);
    assert_error(b, "Authorization");
    free(b);
    assert_int_equal(http("POST", "/v1/jobs", T_REVOKED, job, &b), 401);
    free(b);
    assert_int_equal(http_on(g.port, "POST", "/v1/jobs", "tmk_0000", job, strlen(job), &b, 20000),
                     401);
    free(b);
    assert_int_equal(sql_count("SELECT count(*) FROM jobs"), before);
}

/* POST /v1/jobs's fast path (a recently authenticated token, rows batched
 * into one statement): the same answers as the normal path, each row its
 * own answer, and a revoked token refused by its very next request. */
static void test_submit_fast(void **state)
{
    enum { N = 48 };
    const char *odd = "{\"team\":\"vision\",\"name\":\"NULL\",\"command\":\"echo \\\"a\\\\b\\\" {x,y} NULL\","
                      "\"gpus\":1,\"gpu_model\":\"H100\"}";
    char tok[TM_TOKEN_LEN + 1], err[256], *b, *s;
    CURL *easy[N];
    struct curl_slist *h = NULL;
    struct buf bufs[N];
    char bodies[N][96], url[128], auth[512];
    CURLM *multi;
    long long before;
    int running;
    (void)state;

    assert_int_equal(tm_token_create(g.conn, "t-fast", "admin", NULL, 1, tok, err, sizeof(err)), 0);
    /* The first call authenticates (and caches); the rest take the fast path. */
    for (int i = 0; i < 3; i++) {
        assert_int_equal(http_on(g.port, "POST", "/v1/jobs", tok, odd, strlen(odd), &b, 20000), 201);
        s = json_str(b, "name");
        assert_string_equal(s, "NULL");
        free(s);
        s = json_str(b, "command");
        assert_string_equal(s, "echo \"a\\b\" {x,y} NULL");
        free(s);
        s = json_str(b, "gpu_model");
        assert_string_equal(s, "H100");
        free(s);
        assert_true(strstr(b, "\"pool\":null") || strstr(b, "\"pool\" : null"));
        free(b);
    }
    /* Refusals come from the normal path, with its words. */
    before = sql_count("SELECT count(*) FROM jobs");
    assert_int_equal(http_on(g.port, "POST", "/v1/jobs", tok, "{\"team\":\"vision\"}", strlen("{\"team\":\"vision\"}"), &b, 20000),
                     400);
    assert_error(b, "gpus");
    free(b);
    assert_int_equal(http_on(g.port, "POST", "/v1/jobs", tok,
                             "{\"team\":\"vision\",\"gpus\":1,\"pool\":\"nope\"}", strlen("{\"team\":\"vision\",\"gpus\":1,\"pool\":\"nope\"}"), &b, 20000),
                     400);
    assert_error(b, "pool");
    free(b);
    assert_int_equal(http_on(g.port, "POST", "/v1/jobs", tok,
                             "{\"team\":\"vision\",\"gpus\":9}", strlen("{\"team\":\"vision\",\"gpus\":9}"), &b, 20000),
                     400);
    assert_error(b, "gpus");
    free(b);
    assert_int_equal(http("POST", "/v1/jobs", T_ENGINEER, "{\"team\":\"vision\",\"gpus\":1}", &b), 201);
    free(b);
    assert_int_equal(http("POST", "/v1/jobs", T_ENGINEER, "{\"team\":\"speech\",\"gpus\":1}", &b), 403);
    assert_error(b, "team");
    free(b);
    assert_int_equal(sql_count("SELECT count(*) FROM jobs"), before + 1);

    /* Many at once: each answer is its own row. */
    multi = curl_multi_init();
    snprintf(url, sizeof(url), "http://127.0.0.1:%d/v1/jobs", g.port);
    snprintf(auth, sizeof(auth), "Authorization: Bearer %s", tok);
    h = curl_slist_append(h, auth);
    h = curl_slist_append(h, "Content-Type: application/json");
    for (int i = 0; i < N; i++) {
        bufs[i] = (struct buf){0};
        snprintf(bodies[i], sizeof(bodies[i]), "{\"team\":\"vision\",\"name\":\"fast-%d\",\"gpus\":%d}",
                 i, 1 + i % 8);
        easy[i] = curl_easy_init();
        curl_easy_setopt(easy[i], CURLOPT_URL, url);
        curl_easy_setopt(easy[i], CURLOPT_HTTPHEADER, h);
        curl_easy_setopt(easy[i], CURLOPT_POSTFIELDS, bodies[i]);
        curl_easy_setopt(easy[i], CURLOPT_WRITEFUNCTION, on_data);
        curl_easy_setopt(easy[i], CURLOPT_WRITEDATA, &bufs[i]);
        curl_easy_setopt(easy[i], CURLOPT_NOSIGNAL, 1L);
        curl_easy_setopt(easy[i], CURLOPT_TIMEOUT_MS, 20000L);
        curl_multi_add_handle(multi, easy[i]);
    }
    do {
        curl_multi_perform(multi, &running);
        if (running)
            curl_multi_poll(multi, NULL, 0, 100, NULL);
    } while (running);
    for (int i = 0; i < N; i++) {
        long status = 0;
        char name[32];
        curl_easy_getinfo(easy[i], CURLINFO_RESPONSE_CODE, &status);
        assert_int_equal(status, 201);
        snprintf(name, sizeof(name), "fast-%d", i);
        s = json_str(bufs[i].p, "name");
        assert_string_equal(s, name);
        free(s);
        assert_int_equal(json_i64(bufs[i].p, "gpus"), 1 + i % 8);
        free(bufs[i].p);
        curl_multi_remove_handle(multi, easy[i]);
        curl_easy_cleanup(easy[i]);
    }
    curl_multi_cleanup(multi);
    curl_slist_free_all(h);
    assert_int_equal(sql_count("SELECT count(*) FROM jobs WHERE name LIKE 'fast-%'"), N);

    /* Revoked: the next request is refused, cache or not. */
    before = sql_count("SELECT count(*) FROM jobs");
    assert_int_equal(tm_token_revoke(g.conn, "t-fast", err, sizeof(err)), 0);
    assert_int_equal(http_on(g.port, "POST", "/v1/jobs", tok, odd, strlen(odd), &b, 20000), 401);
    assert_error(b, "Authorization");
    free(b);
    assert_int_equal(sql_count("SELECT count(*) FROM jobs"), before);
}

static void test_bad_bodies(void **state)
{
    static const struct { const char *body, *field; } cases[] = {
        {"not json", "body"},
        {"[]", "body"},
        {"", "body"},
        {"{}", "team"},
        {"{\"team\":\"vision\"}", "gpus"},
        {"{\"team\":\"vision\",\"gpus\":\"1\"}", "gpus"},
        {"{\"team\":\"vision\",\"gpus\":1.5}", "gpus"},
        {"{\"team\":\"vision\",\"gpus\":-1}", "gpus"},
        {"{\"team\":\"vision\",\"gpus\":17}", "gpus"},
        {"{\"team\":\"vision\",\"gpus\":1e300}", "gpus"},
        {"{\"team\":\"vision\",\"gpus\":null}", "gpus"},
        {"{\"team\":\"vision\",\"gpus\":1,\"gpu_milli\":500}", "gpu_milli"},
        {"{\"team\":\"vision\",\"gpu_milli\":500,\"nodes\":2}", "nodes"},
        {"{\"team\":\"vision\",\"gpu_milli\":1000}", "gpu_milli"},
        {"{\"team\":\"vision\",\"gpus\":1,\"bogus\":1}", "bogus"},
        {"{\"team\":\"vision\",\"gpus\":1,\"gpus\":2}", "gpus"},
        {"{\"team\":\"bad team!\",\"gpus\":1}", "team"},
        {"{\"team\":7,\"gpus\":1}", "team"},
        {"{\"team\":\"vision\",\"gpus\":1,\"priority\":5000}", "priority"},
        {"{\"team\":\"vision\",\"gpus\":1,\"class\":\"party\"}", "class"},
        {"{\"team\":\"vision\",\"gpus\":1,\"preemptible\":\"yes\"}", "preemptible"},
        {"{\"team\":\"vision\",\"gpus\":1,\"checkpointable\":1}", "checkpointable"},
        {"{\"team\":\"vision\",\"gpus\":1,\"memory_mib\":-5}", "memory_mib"},
        {"{\"team\":\"vision\",\"gpus\":1,\"cpu_milli\":1e15}", "cpu_milli"},
        {"{\"team\":\"vision\",\"gpus\":1,\"runtime_estimate_s\":0}", "runtime_estimate_s"},
        {"{\"team\":\"vision\",\"gpus\":1,\"runtime_estimate_s\":999999999}", "runtime_estimate_s"},
        {"{\"team\":\"vision\",\"gpus\":1,\"deadline\":\"soon\"}", "deadline"},
        {"{\"team\":\"vision\",\"gpus\":1,\"deadline\":-3}", "deadline"},
        {"{\"team\":\"vision\",\"gpus\":1,\"command\":123}", "command"},
        {"{\"team\":\"vision\",\"gpus\":1,\"gpu_model\":\"A100||\"}", "gpu_model"},
        {"{\"team\":\"vision\",\"gpus\":1,\"gpu_model\":\"TPU\"}", "gpu_model"},
        {"{\"team\":\"vision\",\"gpus\":1,\"pool\":\"nope\"}", "pool"},
        {"{\"team\":\"vision\",\"gpus\":9}", "gpus"},
        {"{\"team\":\"vision\",\"gpus\":1,\"pool\":\"h100\",\"gpu_model\":\"A100\"}", "gpus"},
        {"{\"team\":\"vision\",\"gpus\":1}garbage", "body"},
    };
    long long before = sql_count("SELECT count(*) FROM jobs");
    char *b;
    (void)state;

    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        long st = http("POST", "/v1/jobs", T_ADMIN, cases[i].body, &b);
        if (st != 400)
            fail_msg("body %s: status %ld (%s)", cases[i].body, st, b);
        assert_error(b, cases[i].field);
        free(b);
    }
    /* Over the body limit, under h2o's own: 400 naming the body. */
    size_t n = 300 * 1024;
    char *big = malloc(n + 1);
    assert_non_null(big);
    memset(big, ' ', n);
    memcpy(big, "{\"team\":\"vision\",\"gpus\":1,\"name\":\"", 35);
    big[n - 2] = '"';
    big[n - 1] = '}';
    big[n] = '\0';
    assert_int_equal(http_on(g.port, "POST", "/v1/jobs", g.tok[T_ADMIN], big, n, &b, 20000), 400);
    assert_error(b, "body");
    free(b);
    free(big);
    assert_int_equal(sql_count("SELECT count(*) FROM jobs"), before);
}

/* Walk every page of path (which has a query string) and return how many
 * items, checking ids strictly decrease across pages. */
static int walk_pages(const char *path, int who)
{
    char url[512], *b;
    char cursor[32] = "";
    int total = 0, pages = 0;
    int64_t last = INT64_MAX;

    for (;;) {
        cJSON *o, *items, *next;
        const cJSON *it;
        snprintf(url, sizeof(url), "%s%s%s", path, cursor[0] ? "&cursor=" : "", cursor);
        assert_int_equal(http("GET", url, who, NULL, &b), 200);
        o = cJSON_Parse(b);
        assert_non_null(o);
        items = cJSON_GetObjectItemCaseSensitive(o, "items");
        next = cJSON_GetObjectItemCaseSensitive(o, "next_cursor");
        assert_true(cJSON_IsArray(items));
        cJSON_ArrayForEach(it, items) {
            int64_t id = (int64_t)cJSON_GetObjectItemCaseSensitive(it, "id")->valuedouble;
            assert_true(id < last);
            last = id;
            total++;
        }
        pages++;
        if (cJSON_IsNull(next)) {
            cJSON_Delete(o);
            free(b);
            break;
        }
        assert_true(cJSON_IsString(next));
        snprintf(cursor, sizeof(cursor), "%s", next->valuestring);
        cJSON_Delete(o);
        free(b);
        assert_true(pages < 100);
    }
    return total;
}

static void test_list_paging(void **state)
{
    char *b;
    (void)state;

    for (int i = 0; i < 25; i++) {
        assert_int_equal(http("POST", "/v1/jobs", T_ADMIN,
                              i % 2 ? "{\"team\":\"paging\",\"gpus\":1,\"class\":\"eval\"}"
                                    : "{\"team\":\"paging\",\"gpus\":1,\"preemptible\":true}",
                              &b),
                         201);
        free(b);
    }
    assert_int_equal(walk_pages("/v1/jobs?team=paging&limit=10", T_VIEWER), 25);
    assert_int_equal(walk_pages("/v1/jobs?team=paging&limit=1000", T_FINANCE), 25);
    assert_int_equal(walk_pages("/v1/jobs?team=paging&class=eval&limit=4", T_ADMIN), 12);
    /* An engineer of vision sees none of team paging's jobs. */
    assert_int_equal(walk_pages("/v1/jobs?team=paging&limit=4", T_ENGINEER), 0);
    assert_int_equal(walk_pages("/v1/jobs?team=paging&preemptible=true&state=queued&limit=7",
                                T_ADMIN), 13);
    assert_int_equal(walk_pages("/v1/jobs?team=nobody", T_ADMIN), 0);
    /* A percent-encoded value decodes. */
    assert_int_equal(walk_pages("/v1/jobs?team=pag%69ng&limit=50", T_ADMIN), 25);

    static const struct { const char *path, *field; } bad[] = {
        {"/v1/jobs?state=bogus", "state"},
        {"/v1/jobs?class=party", "class"},
        {"/v1/jobs?preemptible=maybe", "preemptible"},
        {"/v1/jobs?limit=0", "limit"},
        {"/v1/jobs?limit=1001", "limit"},
        {"/v1/jobs?limit=ten", "limit"},
        {"/v1/jobs?cursor=-4", "cursor"},
        {"/v1/jobs?color=red", "color"},
        {"/v1/jobs?team=a&team=b", "team"},
        {"/v1/jobs?team=%zz", "team"},
        {"/v1/nodes?state=sleeping", "state"},
        {"/v1/decisions?subject_kind=planet", "subject_kind"},
        {"/v1/decisions?since_ms=yesterday", "since_ms"},
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        long st = http("GET", bad[i].path, T_VIEWER, NULL, &b);
        if (st != 400)
            fail_msg("%s: status %ld", bad[i].path, st);
        assert_error(b, bad[i].field);
        free(b);
    }
}

static void test_cancel_retag(void **state)
{
    char *b, *s, path[96];
    int64_t id, id2;
    (void)state;

    assert_int_equal(http("POST", "/v1/jobs", T_ENGINEER, "{\"team\":\"vision\",\"gpus\":1}", &b),
                     201);
    id = json_i64(b, "id");
    free(b);
    snprintf(path, sizeof(path), "/v1/jobs/%" PRId64, id);

    /* Another team's engineer neither reads nor changes it: 404, as for a
     * job that does not exist. */
    assert_int_equal(http("GET", path, T_OTHER, NULL, &b), 404);
    assert_error(b, NULL);
    free(b);
    assert_int_equal(http("PATCH", path, T_OTHER, "{\"preemptible\":true}", &b), 404);
    free(b);
    assert_int_equal(http("PATCH", path, T_VIEWER, "{\"preemptible\":true}", &b), 403);
    free(b);
    assert_int_equal(http("PATCH", path, T_ENGINEER, "{\"preemptible\":1}", &b), 400);
    assert_error(b, "preemptible");
    free(b);
    assert_int_equal(http("PATCH", path, T_ENGINEER, "{\"priority\":3}", &b), 400);
    assert_error(b, "priority");
    free(b);
    assert_int_equal(http("PATCH", path, T_ENGINEER, "{}", &b), 400);
    assert_error(b, "preemptible");
    free(b);
    assert_int_equal(http("PATCH", path, T_ENGINEER, "{\"preemptible\":true}", &b), 200);
    s = json_str(b, "preemptible");
    assert_string_equal(s, "true");
    free(s);
    free(b);

    snprintf(path, sizeof(path), "/v1/jobs/%" PRId64 "/cancel", id);
    assert_int_equal(http("POST", path, T_OTHER, NULL, &b), 404);
    free(b);
    assert_int_equal(http("POST", path, T_ENGINEER, "{\"reason\":\"wrong data\",\"x\":1}", &b), 400);
    assert_error(b, "x");
    free(b);
    assert_int_equal(http("POST", path, T_ENGINEER, "{\"reason\":\"wrong data\"}", &b), 200);
    s = json_str(b, "state");
    assert_string_equal(s, "cancelled");
    free(s);
    free(b);
    assert_int_equal(http("POST", path, T_ENGINEER, NULL, &b), 409);
    free(b);
    snprintf(path, sizeof(path), "/v1/jobs/%" PRId64, id);
    assert_int_equal(http("PATCH", path, T_ADMIN, "{\"preemptible\":false}", &b), 409);
    free(b);
    assert_int_equal(http("GET", "/v1/jobs/999999999", T_ADMIN, NULL, &b), 404);
    free(b);
    assert_int_equal(http("POST", "/v1/jobs/999999999/cancel", T_ADMIN, NULL, &b), 404);
    free(b);
    /* A path parameter that is not one is the client's mistake, named. */
    assert_int_equal(http("GET", "/v1/jobs/0", T_ADMIN, NULL, &b), 400);
    assert_error(b, "id");
    free(b);
    assert_int_equal(http("GET", "/v1/jobs/abc", T_ADMIN, NULL, &b), 400);
    assert_error(b, "id");
    free(b);

    /* An admin cancels a running job: its allocation goes, the node idles. */
    char sql[512];
    assert_int_equal(http("POST", "/v1/jobs", T_ADMIN, "{\"team\":\"speech\",\"gpus\":2}", &b), 201);
    id2 = json_i64(b, "id");
    free(b);
    snprintf(sql, sizeof(sql),
             "WITH a AS (INSERT INTO job_allocations VALUES (%" PRId64 ", %" PRId64 ", 3, 1000, 0, 0))"
             " UPDATE jobs SET state = 'running', node_id = %" PRId64 ", started_ms = 5 WHERE id = %" PRId64,
             id2, g.node2_id, g.node2_id, id2);
    sql_ok(sql);
    snprintf(path, sizeof(path), "/v1/jobs/%" PRId64 "/cancel", id2);
    assert_int_equal(http("POST", path, T_ADMIN, NULL, &b), 200);
    free(b);
    snprintf(sql, sizeof(sql), "SELECT count(*) FROM job_allocations WHERE job_id = %" PRId64, id2);
    assert_int_equal(sql_count(sql), 0);
    snprintf(sql, sizeof(sql),
             "SELECT count(*) FROM decisions WHERE kind = 'cancel' AND subject_id = '%" PRId64 "'", id2);
    assert_int_equal(sql_count(sql), 1);
}

static void test_pools_nodes(void **state)
{
    char *b, *s, path[96];
    (void)state;

    assert_int_equal(http("GET", "/v1/pools", T_VIEWER, NULL, &b), 200);
    assert_non_null(strstr(b, "\"a100\""));
    assert_non_null(strstr(b, "\"h100\""));
    free(b);
    assert_int_equal(walk_pages("/v1/nodes?pool=a100&limit=1", T_FINANCE), 2);
    assert_int_equal(http("GET", "/v1/pools/h100", T_ENGINEER, NULL, &b), 200);
    s = json_str(b, "capacity_type");
    assert_string_equal(s, "spot");
    free(s);
    free(b);
    assert_int_equal(http("GET", "/v1/pools/nope", T_ENGINEER, NULL, &b), 404);
    free(b);
    snprintf(path, sizeof(path), "/v1/nodes/%" PRId64, g.node2_id);
    assert_int_equal(http("GET", path, T_VIEWER, NULL, &b), 200);
    assert_int_equal(json_i64(b, "gpus"), 8);
    free(b);

    snprintf(path, sizeof(path), "/v1/nodes/%" PRId64 "/drain", g.node2_id);
    assert_int_equal(http("POST", path, T_ENGINEER, NULL, &b), 403);
    free(b);
    assert_int_equal(http("POST", path, T_ADMIN, "{\"reason\":\"bad GPU\"}", &b), 200);
    s = json_str(b, "state");
    assert_string_equal(s, "draining");
    free(s);
    s = json_str(b, "cordoned");
    assert_string_equal(s, "true");
    free(s);
    free(b);
    assert_int_equal(http("POST", "/v1/nodes/999999/drain", T_ADMIN, NULL, &b), 404);
    free(b);
    assert_int_equal(http("POST", path, T_ADMIN, "{\"reason\":5}", &b), 400);
    assert_error(b, "reason");
    free(b);
}

static void test_heartbeat(void **state)
{
    char *b, sql[512], path[96], body[512];
    int64_t job;
    (void)state;

    /* A job the controller placed on the node. */
    assert_int_equal(http("POST", "/v1/jobs", T_ADMIN, "{\"team\":\"vision\",\"gpus\":1}", &b), 201);
    job = json_i64(b, "id");
    free(b);
    snprintf(sql, sizeof(sql),
             "WITH a AS (INSERT INTO job_allocations VALUES (%" PRId64 ", %" PRId64 ", 1, 1000, 0, 0))"
             " UPDATE jobs SET state = 'running', node_id = %" PRId64 ", started_ms = 5 WHERE id = %" PRId64,
             job, g.node_id, g.node_id, job);
    sql_ok(sql);
    long long samples = sql_count("SELECT count(*) FROM gpu_samples");

    snprintf(path, sizeof(path), "/v1/nodes/%" PRId64 "/heartbeat", g.node_id);
    /* Bad reports write nothing: not even the heartbeat. */
    snprintf(body, sizeof(body), "{\"jobs\":[{\"id\":%" PRId64 ",\"state\":\"running\"}]}", job);
    assert_int_equal(http("POST", path, T_ADMIN, body, &b), 400);
    assert_error(b, "jobs[0].state");
    free(b);
    assert_int_equal(http("POST", path, T_ADMIN,
                          "{\"gpus\":[{\"index\":0,\"util_percent\":5,\"memory_used_mib\":1},"
                          "{\"index\":16,\"util_percent\":5,\"memory_used_mib\":1}]}", &b), 400);
    assert_error(b, "gpus[1].index");
    free(b);
    assert_int_equal(http("POST", path, T_ADMIN, "{\"gpus\":[{\"index\":0,\"util_percent\":101,"
                                                 "\"memory_used_mib\":1}]}", &b), 400);
    assert_error(b, "gpus[0].util_percent");
    free(b);
    assert_int_equal(http("POST", path, T_ADMIN, "{\"jobs\":{}}", &b), 400);
    assert_error(b, "jobs");
    free(b);
    assert_int_equal(sql_count("SELECT count(*) FROM gpu_samples"), samples);
    snprintf(sql, sizeof(sql), "SELECT count(*) FROM nodes WHERE id = %" PRId64
             " AND last_heartbeat_ms IS NOT NULL", g.node_id);
    assert_int_equal(sql_count(sql), 0);

    /* An hour ago: within agent.sample_max_age, outside /metrics' window. */
    snprintf(body, sizeof(body),
             "{\"jobs\":[{\"id\":%" PRId64 ",\"state\":\"succeeded\",\"reason\":\"exit 0\"}],"
             "\"gpus\":[{\"index\":0,\"util_percent\":97.5,\"memory_used_mib\":70000,\"at_ms\":%lld},"
             "{\"index\":1,\"util_percent\":0,\"memory_used_mib\":0}]}",
             job, ((long long)time(NULL) - 3600) * 1000);
    assert_int_equal(http("POST", path, T_ENGINEER, body, &b), 403);
    free(b);
    assert_int_equal(http("POST", path, T_ADMIN, body, &b), 200);
    assert_int_equal(json_i64(b, "finished"), 1);
    assert_int_equal(json_i64(b, "samples"), 2);
    free(b);
    snprintf(sql, sizeof(sql), "SELECT count(*) FROM jobs WHERE id = %" PRId64
             " AND state = 'succeeded' AND finished_ms IS NOT NULL AND state_reason = 'exit 0'", job);
    assert_int_equal(sql_count(sql), 1);
    snprintf(sql, sizeof(sql), "SELECT count(*) FROM job_allocations WHERE job_id = %" PRId64, job);
    assert_int_equal(sql_count(sql), 0);
    snprintf(sql, sizeof(sql), "SELECT count(*) FROM decisions WHERE kind = 'job_succeeded'"
             " AND subject_id = '%" PRId64 "'", job);
    assert_int_equal(sql_count(sql), 1);
    assert_int_equal(sql_count("SELECT count(*) FROM gpu_samples"), samples + 2);
    /* A late repeat finishes nothing twice. */
    assert_int_equal(http("POST", path, T_ADMIN, body, &b), 200);
    assert_int_equal(json_i64(b, "finished"), 0);
    free(b);
    /* A bare heartbeat, and one from a node we do not know. */
    assert_int_equal(http("POST", path, T_ADMIN, NULL, &b), 200);
    free(b);
    assert_int_equal(http("POST", "/v1/nodes/999999/heartbeat", T_ADMIN, "{\"gpus\":[{\"index\":0,"
                          "\"util_percent\":1,\"memory_used_mib\":1}]}", &b), 404);
    free(b);
    assert_int_equal(sql_count("SELECT count(*) FROM gpu_samples WHERE node_id = 999999"), 0);

    /* A terminated node's heartbeat is refused with 409 and writes nothing. */
    snprintf(sql, sizeof(sql), "UPDATE nodes SET state = 'terminated', terminated_ms = 7 WHERE id = %" PRId64,
             g.node_id);
    sql_ok(sql);
    samples = sql_count("SELECT count(*) FROM gpu_samples");
    snprintf(sql, sizeof(sql), "SELECT last_heartbeat_ms FROM nodes WHERE id = %" PRId64, g.node_id);
    long long beat = sql_count(sql);
    assert_int_equal(http("POST", path, T_ADMIN, "{\"gpus\":[{\"index\":0,\"util_percent\":1,"
                                                 "\"memory_used_mib\":1}]}", &b), 409);
    assert_error(b, "id");
    free(b);
    assert_int_equal(sql_count("SELECT count(*) FROM gpu_samples"), samples);
    assert_int_equal(sql_count(sql), beat);
    snprintf(sql, sizeof(sql), "UPDATE nodes SET state = 'ready', terminated_ms = NULL WHERE id = %" PRId64,
             g.node_id);
    sql_ok(sql);
}

static void test_interruption_decisions(void **state)
{
    char *b, *s, path[96];
    (void)state;

    snprintf(path, sizeof(path), "/v1/nodes/%" PRId64 "/interruption", g.node_id);
    assert_int_equal(http("POST", path, T_ADMIN, "{\"in_s\":99999}", &b), 400);
    assert_error(b, "in_s");
    free(b);
    assert_int_equal(http("POST", path, T_ADMIN, "{\"in_s\":120,\"reason\":\"spot notice\"}", &b),
                     200);
    s = json_str(b, "cordoned");
    assert_string_equal(s, "true");
    free(s);
    free(b);
    assert_int_equal(walk_pages("/v1/decisions?kind=interruption_notice&subject_kind=node",
                                T_VIEWER), 1);
    assert_int_equal(http("GET", "/v1/decisions?subject_kind=job&kind=cancel&limit=1", T_FINANCE,
                          NULL, &b), 200);
    assert_non_null(strstr(b, "\"kind\" : \"cancel\""));
    free(b);
}

/* Count the items of a one-page list whose "team" is (or is not) team. */
static void count_teams(const char *path, int who, const char *team, int *ret_mine, int *ret_other)
{
    char *b;
    cJSON *o, *items;
    const cJSON *it;

    *ret_mine = *ret_other = 0;
    assert_int_equal(http("GET", path, who, NULL, &b), 200);
    o = cJSON_Parse(b);
    assert_non_null(o);
    items = cJSON_GetObjectItemCaseSensitive(o, "items");
    assert_true(cJSON_IsArray(items));
    cJSON_ArrayForEach(it, items) {
        const cJSON *t = cJSON_GetObjectItemCaseSensitive(it, "team");
        assert_true(cJSON_IsString(t));
        if (strcmp(t->valuestring, team) == 0)
            (*ret_mine)++;
        else
            (*ret_other)++;
    }
    cJSON_Delete(o);
    free(b);
}

/* No leak between teams: an engineer sees its own team's jobs and the
 * decisions about them only; admin, finance and viewer see all. */
static void test_team_isolation(void **state)
{
    char *b, path[96], sql[256];
    int mine, other;
    int64_t vid, sid;
    (void)state;

    assert_int_equal(http("POST", "/v1/jobs", T_ENGINEER, "{\"team\":\"vision\",\"gpus\":1}", &b), 201);
    vid = json_i64(b, "id");
    free(b);
    assert_int_equal(http("POST", "/v1/jobs", T_OTHER, "{\"team\":\"speech\",\"gpus\":1}", &b), 201);
    sid = json_i64(b, "id");
    free(b);

    count_teams("/v1/jobs?limit=1000", T_ENGINEER, "vision", &mine, &other);
    assert_true(mine > 0);
    assert_int_equal(other, 0);
    count_teams("/v1/jobs?limit=1000", T_OTHER, "speech", &mine, &other);
    assert_true(mine > 0);
    assert_int_equal(other, 0);
    /* Asking for the other team by name gives nothing either. */
    assert_int_equal(walk_pages("/v1/jobs?team=speech", T_ENGINEER), 0);
    for (int who = T_ADMIN; who <= T_VIEWER; who++) {
        if (who == T_ENGINEER)
            continue;
        count_teams("/v1/jobs?limit=1000", who, "vision", &mine, &other);
        assert_true(mine > 0);
        assert_true(other > 0);
    }

    /* Another team's job: 404, exactly as a job that does not exist. */
    snprintf(path, sizeof(path), "/v1/jobs/%" PRId64, sid);
    assert_int_equal(http("GET", path, T_ENGINEER, NULL, &b), 404);
    assert_error(b, NULL);
    assert_non_null(strstr(b, "no such job"));
    free(b);
    assert_int_equal(http("PATCH", path, T_ENGINEER, "{\"preemptible\":true}", &b), 404);
    free(b);
    snprintf(path, sizeof(path), "/v1/jobs/%" PRId64 "/cancel", sid);
    assert_int_equal(http("POST", path, T_ENGINEER, NULL, &b), 404);
    free(b);
    snprintf(sql, sizeof(sql), "SELECT count(*) FROM jobs WHERE id = %" PRId64
             " AND state = 'queued' AND NOT preemptible", sid);
    assert_int_equal(sql_count(sql), 1);
    snprintf(path, sizeof(path), "/v1/jobs/%" PRId64, vid);
    assert_int_equal(http("GET", path, T_ENGINEER, NULL, &b), 200);
    free(b);

    /* Decisions: each team cancels its own job; each engineer sees only
     * its own cancel, the other roles both. */
    snprintf(path, sizeof(path), "/v1/jobs/%" PRId64 "/cancel", vid);
    assert_int_equal(http("POST", path, T_ENGINEER, NULL, &b), 200);
    free(b);
    snprintf(path, sizeof(path), "/v1/jobs/%" PRId64 "/cancel", sid);
    assert_int_equal(http("POST", path, T_OTHER, NULL, &b), 200);
    free(b);
    for (int who = T_ADMIN; who <= T_OTHER; who++) {
        char q[128];
        snprintf(q, sizeof(q), "/v1/decisions?kind=cancel&subject_id=%" PRId64, vid);
        assert_int_equal(walk_pages(q, who), who == T_OTHER ? 0 : 1);
        snprintf(q, sizeof(q), "/v1/decisions?kind=cancel&subject_id=%" PRId64, sid);
        assert_int_equal(walk_pages(q, who), who == T_ENGINEER ? 0 : 1);
    }
    /* Decisions about nodes stay visible to engineers. */
    assert_true(walk_pages("/v1/decisions?subject_kind=node", T_ENGINEER) > 0);
}

/* The month's period ('YYYY-MM', UTC) and its end in ms, as the test's
 * own clock sees them. */
static void this_month(int64_t now_ms, char *period, size_t size, int64_t *ret_end_ms)
{
    time_t t = (time_t)(now_ms / 1000);
    struct tm tm;

    gmtime_r(&t, &tm);
    strftime(period, size, "%Y-%m", &tm);
    tm.tm_mday = 1;
    tm.tm_hour = tm.tm_min = tm.tm_sec = 0;
    tm.tm_mon += 1;
    *ret_end_ms = (int64_t)timegm(&tm) * 1000;
}

static cJSON *get_json(const char *path, int who)
{
    char *b;
    cJSON *o;

    if (http("GET", path, who, NULL, &b) != 200)
        fail_msg("GET %s: %s", path, b);
    o = cJSON_Parse(b);
    free(b);
    assert_non_null(o);
    return o;
}

static int64_t item_i64(const cJSON *o, const char *key)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    if (!cJSON_IsNumber(v))
        fail_msg("%s is not a number", key);
    return (int64_t)v->valuedouble;
}

/* The array item whose key is value, or NULL. */
static const cJSON *find_item(const cJSON *o, const char *array, const char *key, const char *value)
{
    const cJSON *it;

    cJSON_ArrayForEach(it, cJSON_GetObjectItemCaseSensitive(o, array)) {
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(it, key);
        if (cJSON_IsString(v) && strcmp(v->valuestring, value) == 0)
            return it;
    }
    return NULL;
}

static void test_budgets(void **state)
{
    static const char ok[] = "{\"cap_cents\":500000,\"period\":\"month\",\"hard\":true,"
                             "\"warn_percent\":80}";
    static const struct { const char *path, *body, *field; } bad[] = {
        {"/v1/budgets/vision", "{\"cap_cents\":5,\"period\":\"month\",\"hard\":true,"
                               "\"warn_percent\":80,\"currency\":\"EUR\"}", "currency"},
        {"/v1/budgets/vision", "{\"cap_cents\":-5,\"period\":\"month\",\"hard\":true,"
                               "\"warn_percent\":80}", "cap_cents"},
        {"/v1/budgets/vision", "{\"cap_cents\":5,\"period\":\"year\",\"hard\":true,"
                               "\"warn_percent\":80}", "period"},
        {"/v1/budgets/vision", "{\"cap_cents\":5,\"period\":\"month\",\"hard\":\"yes\","
                               "\"warn_percent\":80}", "hard"},
        {"/v1/budgets/vision", "{\"cap_cents\":5,\"period\":\"month\",\"hard\":true,"
                               "\"warn_percent\":0}", "warn_percent"},
        {"/v1/budgets/vision", "{\"cap_cents\":5,\"period\":\"month\",\"hard\":true,"
                               "\"warn_percent\":80,\"scope_kind\":\"pool\"}", "scope_kind"},
        {"/v1/budgets/vision", "{\"cap_cents\":5}", "period"},
        {"/v1/budgets/vision", "not json", "body"},
        /* Nobody ever named this team: a typo, refused. */
        {"/v1/budgets/visoin", ok, "team"},
        /* A SQL-looking name is only a name that matches nothing. */
        {"/v1/budgets/x'or'1", ok, NULL},
    };
    long long budgets = sql_count("SELECT count(*) FROM budgets");
    long long decisions = sql_count("SELECT count(*) FROM decisions");
    char *b, *s;
    cJSON *o;
    const cJSON *it;
    (void)state;

    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        long st = http("PUT", bad[i].path, T_FINANCE, bad[i].body, &b);
        if (bad[i].field) {
            if (st != 400)
                fail_msg("%s %s: status %ld (%s)", bad[i].path, bad[i].body, st, b);
            assert_error(b, bad[i].field);
        } else if (st != 400 && st != 404) {
            fail_msg("%s: status %ld", bad[i].path, st);
        }
        free(b);
    }
    for (int who = T_ENGINEER; who <= T_OTHER; who++) {
        assert_int_equal(http("PUT", "/v1/budgets/vision", who, ok, &b), 403);
        free(b);
    }
    assert_int_equal(sql_count("SELECT count(*) FROM budgets"), budgets);
    assert_int_equal(sql_count("SELECT count(*) FROM decisions"), decisions);

    /* Finance sets, admin replaces; speech is known by its token alone. */
    assert_int_equal(http("PUT", "/v1/budgets/vision", T_FINANCE, ok, &b), 200);
    assert_int_equal(json_i64(b, "cap_cents"), 500000);
    s = json_str(b, "scope_kind");
    assert_string_equal(s, "team");
    free(s);
    free(b);
    assert_int_equal(http("PUT", "/v1/budgets/vision", T_ADMIN,
                          "{\"cap_cents\":700000,\"period\":\"month\",\"hard\":false,"
                          "\"warn_percent\":90,\"currency\":\"USD\",\"scope_kind\":\"team\"}", &b),
                     200);
    free(b);
    assert_int_equal(sql_count("SELECT count(*) FROM budgets WHERE scope_kind = 'team'"
                               " AND scope = 'vision' AND cap_cents = 700000 AND NOT hard"
                               " AND warn_percent = 90 AND currency = 'USD'"), 1);
    assert_int_equal(http("PUT", "/v1/budgets/speech", T_FINANCE, ok, &b), 200);
    free(b);
    assert_int_equal(http("PUT", "/v1/budgets/acme", T_FINANCE,
                          "{\"cap_cents\":2000000,\"period\":\"month\",\"hard\":true,"
                          "\"warn_percent\":75,\"scope_kind\":\"org\"}", &b), 200);
    free(b);
    assert_int_equal(sql_count("SELECT count(*) FROM budgets"), budgets + 3);
    assert_int_equal(sql_count("SELECT count(*) FROM decisions WHERE kind = 'budget_set'"
                               " AND subject_kind = 'budget' AND subject_id = 'team:vision'"), 2);
    /* Budget decisions: an engineer sees its own team's only. */
    assert_int_equal(walk_pages("/v1/decisions?kind=budget_set&subject_id=team:vision", T_ENGINEER), 2);
    assert_int_equal(walk_pages("/v1/decisions?kind=budget_set&subject_id=team:speech", T_ENGINEER), 0);
    assert_int_equal(walk_pages("/v1/decisions?kind=budget_set&subject_id=org:acme", T_ENGINEER), 0);
    assert_int_equal(walk_pages("/v1/decisions?kind=budget_set&subject_id=team:speech", T_OTHER), 1);
    assert_int_equal(walk_pages("/v1/decisions?kind=budget_set", T_VIEWER), 4);

    /* Everyone but an engineer reads them all; an engineer its own. */
    for (int who = T_ADMIN; who <= T_OTHER; who++) {
        o = get_json("/v1/budgets", who);
        int n = cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(o, "items"));
        if (who == T_ENGINEER || who == T_OTHER) {
            assert_int_equal(n, 1);
            it = find_item(o, "items", "scope", who == T_ENGINEER ? "vision" : "speech");
            assert_non_null(it);
        } else {
            assert_int_equal(n, budgets + 3);
            it = find_item(o, "items", "scope", "acme");
            assert_non_null(it);
            assert_int_equal(item_i64(it, "cap_cents"), 2000000);
        }
        cJSON_Delete(o);
    }
}

static void test_spend(void **state)
{
    char sql[1024], period[16];
    int64_t now = (int64_t)time(NULL) * 1000, end_ms, rate;
    cJSON *o;
    const cJSON *it;
    (void)state;

    this_month(now, period, sizeof(period), &end_ms);
    /* The row of another month must not count. */
    snprintf(sql, sizeof(sql),
             "INSERT INTO spend (at_ms, period, node_id, pool, team, kind, cents) VALUES"
             " (%" PRId64 ", '%s', %" PRId64 ", 'a100', 'vision', 'job', 1000),"
             " (%" PRId64 ", '%s', %" PRId64 ", 'a100', 'speech', 'job', 500),"
             " (%" PRId64 ", '%s', %" PRId64 ", 'a100', NULL, 'idle', 300),"
             " (%" PRId64 ", '%s', %" PRId64 ", 'a100', 'vision', 'job', 250),"
             " (1, '1999-12', %" PRId64 ", 'a100', 'vision', 'job', 7777)",
             now, period, g.node_id, now, period, g.node_id, now, period, g.node2_id, now, period,
             g.node2_id, g.node_id);
    sql_ok(sql);
    rate = sql_i64("SELECT coalesce(sum(price_uusd_per_hour), 0) FROM nodes"
                   " WHERE state IN ('booting', 'ready', 'draining', 'terminating')");
    assert_true(rate > 0);

    for (int who = T_ADMIN; who <= T_VIEWER; who++) {
        if (who == T_ENGINEER)
            continue;
        o = get_json("/v1/spend", who);
        it = cJSON_GetObjectItemCaseSensitive(o, "period");
        assert_string_equal(it->valuestring, period);
        assert_int_equal(item_i64(o, "total_cents"), 2050);
        assert_int_equal(item_i64(o, "job_cents"), 1750);
        assert_int_equal(item_i64(o, "idle_cents"), 300);
        assert_int_equal(item_i64(o, "rate_uusd_per_hour"), rate);
        assert_int_equal(item_i64(o, "month_end_ms"), end_ms);
        int64_t at = item_i64(o, "now_ms");
        assert_true(at >= now - 1000 && at <= now + 60000);
        /* Spend so far + rate x hours left, in cents, rounded. */
        double want = 2050.0 + (double)rate * (double)(end_ms - at) / 3.6e10;
        double got = (double)item_i64(o, "projected_cents");
        if (got < want - 0.51 || got > want + 0.51)
            fail_msg("projected %.0f, expected %.2f", got, want);
        it = find_item(o, "teams", "team", "vision");
        assert_non_null(it);
        assert_int_equal(item_i64(it, "cents"), 1250);
        it = find_item(o, "teams", "team", "speech");
        assert_non_null(it);
        assert_int_equal(item_i64(it, "cents"), 500);
        assert_int_equal(cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(o, "teams")), 2);
        it = find_item(o, "pools", "pool", "a100");
        assert_non_null(it);
        assert_int_equal(item_i64(it, "job_cents"), 1750);
        assert_int_equal(item_i64(it, "idle_cents"), 300);
        assert_int_equal(item_i64(it, "cents"), 2050);
        cJSON_Delete(o);
    }
    /* An engineer: its team's spend only, no fleet-wide figures. */
    o = get_json("/v1/spend", T_ENGINEER);
    assert_int_equal(item_i64(o, "total_cents"), 1250);
    assert_int_equal(cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(o, "teams")), 1);
    assert_non_null(find_item(o, "teams", "team", "vision"));
    assert_true(cJSON_IsNull(cJSON_GetObjectItemCaseSensitive(o, "idle_cents")));
    assert_true(cJSON_IsNull(cJSON_GetObjectItemCaseSensitive(o, "projected_cents")));
    assert_true(cJSON_IsNull(cJSON_GetObjectItemCaseSensitive(o, "rate_uusd_per_hour")));
    it = find_item(o, "pools", "pool", "a100");
    assert_non_null(it);
    assert_int_equal(item_i64(it, "idle_cents"), 0);
    assert_int_equal(item_i64(it, "cents"), 1250);
    cJSON_Delete(o);

    /* Budgets show their spend: a team its jobs', the org everything. */
    o = get_json("/v1/budgets", T_FINANCE);
    it = find_item(o, "items", "scope", "vision");
    assert_non_null(it);
    assert_int_equal(item_i64(it, "spent_cents"), 1250);
    it = find_item(o, "items", "scope", "acme");
    assert_non_null(it);
    assert_int_equal(item_i64(it, "spent_cents"), 2050);
    cJSON_Delete(o);
}

/* The families of an exposition, through tests/lib/prom_parse.py. */
static cJSON *scrape(void)
{
    const char *src = getenv("TM_SOURCE_DIR"), *dir = getenv("TM_TEST_STATE");
    char file[512], cmd[1200], *b, *out = NULL;
    size_t n = 0, cap = 0;
    FILE *f;
    cJSON *fams;

    assert_int_equal(http("GET", "/metrics", -1, NULL, &b), 200);
    snprintf(file, sizeof(file), "%s/metrics.txt", dir);
    f = fopen(file, "w");
    assert_non_null(f);
    fputs(b, f);
    fclose(f);
    free(b);
    snprintf(cmd, sizeof(cmd), "python3 %s/tests/lib/prom_parse.py %s", src, file);
    f = popen(cmd, "r");
    assert_non_null(f);
    for (;;) {
        if (n + 4096 + 1 > cap) {
            cap = cap ? cap * 2 : 65536;
            out = realloc(out, cap);
            assert_non_null(out);
        }
        size_t got = fread(out + n, 1, 4096, f);
        if (got == 0)
            break;
        n += got;
    }
    out[n] = '\0';
    if (pclose(f) != 0)
        fail_msg("the exposition in %s does not parse", file);
    fams = cJSON_Parse(out);
    free(out);
    assert_non_null(fams);
    unlink(file);
    return fams;
}

static const cJSON *family(const cJSON *fams, const char *name, const char *type)
{
    const cJSON *f = cJSON_GetObjectItemCaseSensitive(fams, name);
    const cJSON *t = f ? cJSON_GetObjectItemCaseSensitive(f, "type") : NULL;

    if (!f)
        fail_msg("no family %s", name);
    if (!cJSON_IsString(t) || strcmp(t->valuestring, type) != 0)
        fail_msg("%s is not a %s", name, type);
    return cJSON_GetObjectItemCaseSensitive(f, "samples");
}

/* The value of the sample called sample (NULL: the family's own name)
 * whose labels are exactly want ("k=v,k=v", keys sorted): a number, or
 * the string "NaN", "+Inf" or "-Inf"; NULL when absent. */
static const cJSON *sample_value(const cJSON *fams, const char *name, const char *type,
                                 const char *sample, const char *want)
{
    const cJSON *it;

    cJSON_ArrayForEach(it, family(fams, name, type)) {
        const cJSON *l, *n = cJSON_GetObjectItemCaseSensitive(it, "name");
        char key[512] = "";
        size_t k = 0;
        if (sample && !(cJSON_IsString(n) && strcmp(n->valuestring, sample) == 0))
            continue;
        cJSON_ArrayForEach(l, cJSON_GetObjectItemCaseSensitive(it, "labels"))
            k += (size_t)snprintf(key + k, sizeof(key) - k, "%s%s=%s", k ? "," : "", l->string,
                                  l->valuestring);
        if (strcmp(key, want) == 0)
            return cJSON_GetObjectItemCaseSensitive(it, "value");
    }
    return NULL;
}

/* The value of the series whose labels are exactly want ("k=v,k=v", keys
 * sorted); -1 when absent. */
static double series(const cJSON *fams, const char *name, const char *type, const char *want)
{
    const cJSON *v = sample_value(fams, name, type, NULL, want);

    if (!v)
        return -1;
    assert_true(cJSON_IsNumber(v));
    return v->valuedouble;
}

/* A series whose value is not a number: "NaN" or "+Inf". */
static void assert_series_text(const cJSON *fams, const char *name, const char *type,
                               const char *labels, const char *want)
{
    const cJSON *v = sample_value(fams, name, type, NULL, labels);

    if (!cJSON_IsString(v) || strcmp(v->valuestring, want) != 0)
        fail_msg("%s{%s} is not %s", name, labels, want);
}

static void assert_hist(const cJSON *fams, const char *name, const char *sample, const char *labels,
                        double want)
{
    const cJSON *v = sample_value(fams, name, "histogram", sample, labels);

    if (!cJSON_IsNumber(v) || v->valuedouble < want - 1e-6 || v->valuedouble > want + 1e-6)
        fail_msg("%s{%s} = %g, expected %g", sample, labels, cJSON_IsNumber(v) ? v->valuedouble : -1,
                 want);
}

static void assert_series(const cJSON *fams, const char *name, const char *type, const char *labels,
                          double want)
{
    double got = series(fams, name, type, labels);

    if (got < want - 1e-6 || got > want + 1e-6)
        fail_msg("%s{%s} = %g, expected %g", name, labels, got, want);
}

/* /metrics against the database: every family, type and value. */
static void test_metrics(void **state)
{
    static const char *const classes[] = {"train", "eval", "preprocess", "inference", "batch"};
    static const char *const states[] = {"requested", "booting", "ready", "draining",
                                         "terminating", "terminated", "interrupted"};
    char *b, sql[512], labels[256];
    int64_t j1, j2;
    cJSON *fams;
    PGresult *res;
    (void)state;

    /* Two GPUs held whole and a quarter of a third: 2.25 allocated. */
    assert_int_equal(sql_count("SELECT count(*) FROM job_allocations"), 0);
    assert_int_equal(http("POST", "/v1/jobs", T_ADMIN, "{\"team\":\"vision\",\"gpus\":2}", &b), 201);
    j1 = json_i64(b, "id");
    free(b);
    assert_int_equal(http("POST", "/v1/jobs", T_ADMIN,
                          "{\"team\":\"speech\",\"gpu_milli\":250,\"class\":\"inference\"}", &b), 201);
    j2 = json_i64(b, "id");
    free(b);
    snprintf(sql, sizeof(sql),
             "WITH a AS (INSERT INTO job_allocations VALUES (%" PRId64 ", %" PRId64 ", 3, 1000, 0, 0),"
             " (%" PRId64 ", %" PRId64 ", 4, 250, 0, 0))"
             " UPDATE jobs SET state = 'running', node_id = %" PRId64 ", started_ms = 5"
             " WHERE id IN (%" PRId64 ", %" PRId64 ")",
             j1, g.node_id, j2, g.node_id, g.node_id, j1, j2);
    sql_ok(sql);
    /* A queued job a minute old. */
    sql_ok("INSERT INTO jobs (team, name, command, gpus, gpu_milli, nodes, cpu_milli, memory_mib,"
           " class, priority, preemptible, checkpointable, submitted_ms) VALUES ('vision', 'old',"
           " '', 1, 1000, 1, 0, 0, 'batch', 0, false, false,"
           " (extract(epoch FROM now()) * 1000)::bigint - 60000)");
    /* Heartbeat samples on the second node: two in the window (40% and
     * 80%), one too old and one from the future, which do not count. */
    snprintf(sql, sizeof(sql),
             "INSERT INTO gpu_samples SELECT %" PRId64 ", i, (extract(epoch FROM now()) * 1000)::bigint + d,"
             " u, 1 FROM (VALUES (2, -10000, 40), (3, -10000, 80), (4, -400000, 0), (5, 600000, 0))"
             " x (i, d, u)", g.node2_id);
    sql_ok(sql);
    /* A job requeued when its node went (2 GPUs for an hour lost) and
     * one checkpointed (nothing lost). */
    snprintf(sql, sizeof(sql),
             "INSERT INTO job_interruptions (job_id, node_id, at_ms, attempt, cause, ran_ms, kept_ms,"
             " gpu_milli, lost_gpu_ms) VALUES (%" PRId64 ", %" PRId64 ", 5, 1, 'interrupted', 3600000, 0,"
             " 2000, 7200000), (%" PRId64 ", %" PRId64 ", 6, 2, 'checkpoint', 60000, 60000, 2000, 0)",
             j1, g.node2_id, j1, g.node2_id);
    sql_ok(sql);
    /* A zero cap with spend against it: an infinite ratio. */
    sql_ok("INSERT INTO budgets (scope_kind, scope, cap_cents, updated_ms) VALUES ('org', 'zero', 0, 1)");

    fams = scrape();
    int64_t billed = sql_i64("SELECT coalesce(sum(gpus), 0) FROM nodes WHERE pool = 'a100'"
                             " AND state IN ('booting', 'ready', 'draining', 'terminating')");
    assert_true(billed > 0);
    assert_series(fams, "tarmac_gpus", "gauge", "model=A100,pool=a100,state=provisioned", (double)billed);
    assert_series(fams, "tarmac_gpus", "gauge", "model=A100,pool=a100,state=allocated", 2.25);
    assert_series(fams, "tarmac_gpus", "gauge", "model=A100,pool=a100,state=idle", (double)billed - 2.25);
    assert_series(fams, "tarmac_gpus", "gauge", "model=H100,pool=h100,state=provisioned", 0);
    assert_int_equal(cJSON_GetArraySize(family(fams, "tarmac_gpus", "gauge")), 6);

    for (size_t i = 0; i < sizeof(classes) / sizeof(classes[0]); i++) {
        snprintf(sql, sizeof(sql), "SELECT count(*) FROM jobs WHERE state = 'queued' AND class = '%s'",
                 classes[i]);
        snprintf(labels, sizeof(labels), "class=%s", classes[i]);
        assert_series(fams, "tarmac_queue_jobs", "gauge", labels, (double)sql_count(sql));
        snprintf(sql, sizeof(sql),
                 "SELECT coalesce(max(extract(epoch FROM now()) * 1000 - submitted_ms), 0)::bigint"
                 " FROM jobs WHERE state = 'queued' AND class = '%s'", classes[i]);
        double age = series(fams, "tarmac_queue_oldest_age_seconds", "gauge", labels);
        double want = (double)sql_i64(sql) / 1000.0;
        if (age < want - 10 || age > want + 1)
            fail_msg("oldest %s age %g s, expected about %g s", classes[i], age, want);
    }
    assert_true(series(fams, "tarmac_queue_oldest_age_seconds", "gauge", "class=batch") >= 59);

    for (int p = 0; p < 2; p++) {
        for (size_t i = 0; i < sizeof(states) / sizeof(states[0]); i++) {
            const char *pool = p ? "h100" : "a100";
            snprintf(sql, sizeof(sql), "SELECT count(*) FROM nodes WHERE pool = '%s' AND state = '%s'",
                     pool, states[i]);
            snprintf(labels, sizeof(labels), "pool=%s,state=%s", pool, states[i]);
            assert_series(fams, "tarmac_nodes", "gauge", labels, (double)sql_count(sql));
        }
    }
    assert_int_equal(cJSON_GetArraySize(family(fams, "tarmac_nodes", "gauge")), 14);

    /* This month's ledger (test_spend's rows). */
    res = PQexec(g.conn, "SELECT coalesce(team, '_idle'), sum(cents) FROM spend"
                         " WHERE period = to_char(now() AT TIME ZONE 'UTC', 'YYYY-MM') GROUP BY 1");
    assert_int_equal(PQresultStatus(res), PGRES_TUPLES_OK);
    assert_true(PQntuples(res) >= 3);
    assert_int_equal(cJSON_GetArraySize(family(fams, "tarmac_spend_cents_total", "counter")),
                     PQntuples(res));
    for (int i = 0; i < PQntuples(res); i++) {
        snprintf(labels, sizeof(labels), "team=%s", PQgetvalue(res, i, 0));
        assert_series(fams, "tarmac_spend_cents_total", "counter", labels,
                      atof(PQgetvalue(res, i, 1)));
    }
    PQclear(res);
    assert_series(fams, "tarmac_spend_cents_total", "counter", "team=vision", 1250);
    assert_series(fams, "tarmac_spend_cents_total", "counter", "team=_idle", 300);

    res = PQexec(g.conn, "SELECT scope_kind, scope, cap_cents FROM budgets");
    assert_int_equal(PQresultStatus(res), PGRES_TUPLES_OK);
    assert_true(PQntuples(res) >= 3);
    assert_int_equal(cJSON_GetArraySize(family(fams, "tarmac_budget_cap_cents", "gauge")),
                     PQntuples(res));
    for (int i = 0; i < PQntuples(res); i++) {
        snprintf(labels, sizeof(labels), "scope=%s,scope_kind=%s", PQgetvalue(res, i, 1),
                 PQgetvalue(res, i, 0));
        assert_series(fams, "tarmac_budget_cap_cents", "gauge", labels, atof(PQgetvalue(res, i, 2)));
    }
    PQclear(res);

    /* Spend against each cap, attributed as GET /v1/budgets does: a team
     * its jobs' (test_spend: vision 1250), an org everything (2050). */
    res = PQexec(g.conn, "SELECT b.scope_kind, b.scope, b.cap_cents, (SELECT coalesce(sum(s.cents), 0)"
                         " FROM spend s WHERE s.period = to_char(now() AT TIME ZONE 'UTC', 'YYYY-MM')"
                         " AND (b.scope_kind = 'org' OR s.team = b.scope)) FROM budgets b");
    assert_int_equal(PQresultStatus(res), PGRES_TUPLES_OK);
    assert_int_equal(cJSON_GetArraySize(family(fams, "tarmac_budget_spent_cents", "gauge")),
                     PQntuples(res));
    assert_int_equal(cJSON_GetArraySize(family(fams, "tarmac_budget_spent_ratio", "gauge")),
                     PQntuples(res));
    for (int i = 0; i < PQntuples(res); i++) {
        double cap = atof(PQgetvalue(res, i, 2)), spent = atof(PQgetvalue(res, i, 3));
        snprintf(labels, sizeof(labels), "scope=%s,scope_kind=%s", PQgetvalue(res, i, 1),
                 PQgetvalue(res, i, 0));
        assert_series(fams, "tarmac_budget_spent_cents", "gauge", labels, spent);
        if (cap > 0)
            assert_series(fams, "tarmac_budget_spent_ratio", "gauge", labels, spent / cap);
    }
    PQclear(res);
    assert_series(fams, "tarmac_budget_spent_cents", "gauge", "scope=vision,scope_kind=team", 1250);
    assert_series(fams, "tarmac_budget_spent_cents", "gauge", "scope=acme,scope_kind=org", 2050);
    assert_series(fams, "tarmac_budget_spent_cents", "gauge", "scope=zero,scope_kind=org", 2050);
    assert_series_text(fams, "tarmac_budget_spent_ratio", "gauge", "scope=zero,scope_kind=org", "+Inf");
    sql_ok("DELETE FROM budgets WHERE scope_kind = 'org' AND scope = 'zero'");

    /* Utilisation: the samples of the last 5 minutes, whatever test_heartbeat
     * left besides ours; none at all in h100. */
    res = PQexec(g.conn, "SELECT avg(s.util_percent) / 100, count(*) FROM gpu_samples s"
                         " JOIN nodes n ON n.id = s.node_id WHERE n.pool = 'a100'"
                         " AND s.at_ms > (extract(epoch FROM now()) * 1000)::bigint - 300000"
                         " AND s.at_ms <= (extract(epoch FROM now()) * 1000)::bigint");
    assert_int_equal(PQresultStatus(res), PGRES_TUPLES_OK);
    assert_true(atoi(PQgetvalue(res, 0, 1)) >= 2);
    assert_series(fams, "tarmac_gpu_utilisation_ratio", "gauge", "model=A100,pool=a100",
                  atof(PQgetvalue(res, 0, 0)));
    assert_series(fams, "tarmac_gpu_utilisation_samples", "gauge", "model=A100,pool=a100",
                  atof(PQgetvalue(res, 0, 1)));
    PQclear(res);
    assert_series_text(fams, "tarmac_gpu_utilisation_ratio", "gauge", "model=H100,pool=h100", "NaN");
    assert_series(fams, "tarmac_gpu_utilisation_samples", "gauge", "model=H100,pool=h100", 0);

    /* What the billed nodes cost now: 1 cent = 10^4 micro-dollars. */
    assert_series(fams, "tarmac_spend_rate_cents_per_hour", "gauge", "pool=a100",
                  (double)sql_i64("SELECT sum(price_uusd_per_hour) FROM nodes WHERE pool = 'a100'"
                                  " AND state IN ('booting', 'ready', 'draining', 'terminating')") / 1e4);
    assert_true(series(fams, "tarmac_spend_rate_cents_per_hour", "gauge", "pool=a100") >= 2 * 3277);
    assert_series(fams, "tarmac_spend_rate_cents_per_hour", "gauge", "pool=h100", 0);

    /* Node history, every pool shown: the fixture's two on-demand a100
     * nodes (and whatever other tests added), nothing in h100. */
    for (int p = 0; p < 2; p++) {
        static const struct { const char *family, *where; } counts[] = {
            {"tarmac_node_launch_failures_total", "instance_id IS NULL AND state IN ('terminated', 'interrupted')"},
            {"tarmac_node_terminations_total", "instance_id IS NOT NULL AND state = 'terminated'"},
            {"tarmac_spot_notices_total", "notice_ms IS NOT NULL"},
            {"tarmac_spot_interruptions_total", "state = 'interrupted'"},
        };
        const char *pool = p ? "h100" : "a100";
        for (int ct = 0; ct < 2; ct++) {
            const char *type = ct ? "spot" : "on_demand";
            snprintf(sql, sizeof(sql), "SELECT count(*) FROM nodes WHERE pool = '%s' AND capacity_type = '%s'",
                     pool, type);
            snprintf(labels, sizeof(labels), "capacity_type=%s,pool=%s", type, pool);
            assert_series(fams, "tarmac_node_launches_total", "counter", labels, (double)sql_count(sql));
        }
        snprintf(labels, sizeof(labels), "pool=%s", pool);
        for (size_t i = 0; i < sizeof(counts) / sizeof(counts[0]); i++) {
            snprintf(sql, sizeof(sql), "SELECT count(*) FROM nodes WHERE pool = '%s' AND %s", pool,
                     counts[i].where);
            assert_series(fams, counts[i].family, "counter", labels, (double)sql_count(sql));
            assert_int_equal(cJSON_GetArraySize(family(fams, counts[i].family, "counter")), 2);
        }
    }
    assert_true(series(fams, "tarmac_node_launches_total", "counter", "capacity_type=on_demand,pool=a100") >= 2);
    assert_series(fams, "tarmac_node_launches_total", "counter", "capacity_type=spot,pool=h100", 0);
    assert_int_equal(cJSON_GetArraySize(family(fams, "tarmac_node_launches_total", "counter")), 4);
    assert_series(fams, "tarmac_job_interruptions_total", "counter", "cause=interrupted,pool=a100", 1);
    assert_series(fams, "tarmac_job_interruptions_total", "counter", "cause=checkpoint,pool=a100", 1);
    assert_series(fams, "tarmac_job_interruptions_total", "counter", "cause=terminated,pool=a100", 0);
    assert_series(fams, "tarmac_job_interruptions_total", "counter", "cause=interrupted,pool=h100", 0);
    assert_int_equal(cJSON_GetArraySize(family(fams, "tarmac_job_interruptions_total", "counter")), 6);
    assert_series(fams, "tarmac_job_lost_gpu_seconds_total", "counter", "pool=a100", 7200);
    assert_series(fams, "tarmac_job_lost_gpu_seconds_total", "counter", "pool=h100", 0);

    /* The controller's counters (fleet_fixture): the roomy server has them. */
    assert_series(fams, "tarmac_leader", "gauge", "", 1);
    assert_series(fams, "tarmac_ticks_total", "counter", "", 5);
    {
        static const struct { const char *le; double n; } buckets[] = {
            {"0.001", 0}, {"0.0025", 0}, {"0.005", 1}, {"0.01", 1}, {"0.1", 1}, {"0.25", 2}, {"10", 2}, {"30", 2}, {"+Inf", 3},
        };
        for (size_t i = 0; i < sizeof(buckets) / sizeof(buckets[0]); i++) {
            snprintf(labels, sizeof(labels), "le=%s", buckets[i].le);
            assert_hist(fams, "tarmac_tick_duration_seconds", "tarmac_tick_duration_seconds_bucket",
                        labels, buckets[i].n);
        }
        assert_hist(fams, "tarmac_tick_duration_seconds", "tarmac_tick_duration_seconds_count", "", 3);
        assert_hist(fams, "tarmac_tick_duration_seconds", "tarmac_tick_duration_seconds_sum", "", 40.203);
        assert_int_equal(cJSON_GetArraySize(family(fams, "tarmac_tick_duration_seconds", "histogram")),
                         TM_FLEET_TICK_BUCKETS + 3);
    }
    assert_series(fams, "tarmac_provider_calls_total", "counter", "op=list,provider=sim-x", 2);
    assert_series(fams, "tarmac_provider_calls_total", "counter", "op=launch,provider=sim-x", 2);
    assert_series(fams, "tarmac_provider_calls_total", "counter", "op=terminate,provider=sim-x", 0);
    assert_series(fams, "tarmac_provider_errors_total", "counter", "kind=quota,op=launch,provider=sim-x", 2);
    assert_series(fams, "tarmac_provider_errors_total", "counter", "kind=auth,op=list,provider=sim-x", 1);
    assert_series(fams, "tarmac_provider_errors_total", "counter", "kind=auth,op=launch,provider=sim-x", 0);
    assert_series(fams, "tarmac_provider_errors_total", "counter", "kind=other,op=terminate,provider=sim-x", 0);
    assert_int_equal(cJSON_GetArraySize(family(fams, "tarmac_provider_errors_total", "counter")),
                     TM_FLEET_OP_MAX * TM_FLEET_ERR_MAX);

    /* HTTP answers by code: this run has had 200s, 400s, 403s and 404s;
     * the counts never exceed the requests received. */
    double answered = 0;
    const cJSON *it;
    assert_true(series(fams, "tarmac_http_requests_total", "counter", "code=200") > 10);
    assert_true(series(fams, "tarmac_http_requests_total", "counter", "code=400") > 0);
    assert_true(series(fams, "tarmac_http_requests_total", "counter", "code=403") > 0);
    assert_true(series(fams, "tarmac_http_requests_total", "counter", "code=404") > 0);
    cJSON_ArrayForEach(it, family(fams, "tarmac_http_requests_total", "counter"))
        answered += cJSON_GetObjectItemCaseSensitive(it, "value")->valuedouble;
    assert_true(answered <= series(fams, "tarmac_api_requests_total", "counter", ""));
    cJSON_Delete(fams);

    /* Counters only grow between scrapes. */
    double before = 0, after = 0;
    fams = scrape();
    before = series(fams, "tarmac_http_requests_total", "counter", "code=200");
    cJSON_Delete(fams);
    fams = scrape();
    after = series(fams, "tarmac_http_requests_total", "counter", "code=200");
    cJSON_Delete(fams);
    assert_true(after >= before + 1);

    /* A server without the controller's counters leaves them out. */
    assert_int_equal(http_on(g.tight_port, "GET", "/metrics", NULL, NULL, 0, &b, 20000), 200);
    assert_non_null(strstr(b, "\ntarmac_gpus{"));
    assert_null(strstr(b, "tarmac_leader"));
    assert_null(strstr(b, "tarmac_tick_duration_seconds"));
    free(b);

    /* Leave no running jobs for the tests after. */
    snprintf(sql, sizeof(sql),
             "WITH d AS (DELETE FROM job_allocations WHERE job_id IN (%" PRId64 ", %" PRId64 "))"
             " UPDATE jobs SET state = 'cancelled', finished_ms = 6 WHERE id IN (%" PRId64 ", %" PRId64 ")",
             j1, j2, j1, j2);
    sql_ok(sql);
}

/* A client that gives up while its statement waits: the answer is
 * dropped, nothing leaks, the server carries on. */
static void test_client_gone(void **state)
{
    char *b, path[96], sql[256];
    (void)state;

    sql_ok("BEGIN");
    snprintf(sql, sizeof(sql), "SELECT 1 FROM nodes WHERE id = %" PRId64 " FOR UPDATE", g.node_id);
    sql_ok(sql);
    snprintf(path, sizeof(path), "/v1/nodes/%" PRId64 "/heartbeat", g.node_id);
    assert_true(http_on(g.port, "POST", path, g.tok[T_ADMIN], "{}", 2, &b, 300) < 0);
    free(b);
    sql_ok("COMMIT");
    usleep(200000);
    assert_int_equal(http("GET", "/healthz", -1, NULL, &b), 200);
    free(b);
    assert_int_equal(http("POST", path, T_ADMIN, "{}", &b), 200);
    free(b);
}

static void test_limits(void **state)
{
    char *b, big[2048];
    long st;
    (void)state;

    memset(big, ' ', sizeof(big) - 1);
    big[0] = '{';
    big[sizeof(big) - 2] = '}';
    big[sizeof(big) - 1] = '\0';
    st = http_on(g.tight_port, "POST", "/v1/jobs", g.tok[T_ADMIN], big, strlen(big), &b, 20000);
    assert_int_equal(st, 400);
    assert_error(b, "body");
    free(b);
    /* The body check costs no token; now the bucket of 3. */
    st = http_on(g.tight_port, "GET", "/v1/jobs?limit=6", g.tok[T_VIEWER], NULL, 0, &b, 20000);
    assert_int_equal(st, 400);
    assert_error(b, "limit");
    free(b);
    for (int i = 0; i < 2; i++) {
        st = http_on(g.tight_port, "GET", "/v1/jobs?limit=5", g.tok[T_VIEWER], NULL, 0, &b, 20000);
        assert_int_equal(st, 200);
        free(b);
    }
    st = http_on(g.tight_port, "GET", "/v1/jobs", g.tok[T_VIEWER], NULL, 0, &b, 20000);
    assert_int_equal(st, 429);
    assert_error(b, "Authorization");
    assert_string_equal(last_retry_after, "1\r\n");
    free(b);
    /* Another token has its own bucket. */
    st = http_on(g.tight_port, "GET", "/v1/pools", g.tok[T_FINANCE], NULL, 0, &b, 20000);
    assert_int_equal(st, 200);
    free(b);
}

/* tm_token_main with its standard output thrown away. */
static int quiet(int argc, char **argv)
{
    int saved, null = open("/dev/null", O_WRONLY), rc;

    fflush(stdout);
    saved = dup(1);
    dup2(null, 1);
    close(null);
    rc = tm_token_main(argc, argv);
    fflush(stdout);
    dup2(saved, 1);
    close(saved);
    return rc;
}

/* `tarmac token create|revoke`: printed once, stored hashed, revocable. */
static void test_token_cli(void **state)
{
    char tmpl[] = "/tmp/tm_api_tokenXXXXXX", token[256] = "", hash[TM_TOKEN_HASH_LEN + 1], sql[512];
    char url[600], *b;
    int fd = mkstemp(tmpl), saved, rc;
    FILE *f;
    (void)state;

    assert_true(fd >= 0);
    snprintf(url, sizeof(url), "%s", g.url);
    char *create[] = {"token", "create", "--name", "cli-viewer", "--role", "viewer",
                      "--database-url", url, NULL};
    fflush(stdout);
    saved = dup(1);
    dup2(fd, 1);
    rc = tm_token_main(8, create);
    fflush(stdout);
    dup2(saved, 1);
    close(saved);
    assert_int_equal(rc, 0);
    f = fdopen(fd, "r");
    rewind(f);
    assert_non_null(fgets(token, sizeof(token), f));
    fclose(f);
    unlink(tmpl);
    token[strcspn(token, "\n")] = '\0';
    assert_int_equal(strlen(token), TM_TOKEN_LEN);
    assert_int_equal(strncmp(token, "tmk_", 4), 0);
    tm_token_hash(token, strlen(token), hash);
    snprintf(sql, sizeof(sql), "SELECT count(*) FROM api_tokens WHERE name = 'cli-viewer' AND hash = '%s'",
             hash);
    assert_int_equal(sql_count(sql), 1);
    snprintf(sql, sizeof(sql), "SELECT count(*) FROM api_tokens WHERE hash LIKE '%%%s%%'", token + 4);
    assert_int_equal(sql_count(sql), 0);

    assert_int_equal(http_on(g.port, "GET", "/v1/jobs?limit=1", token, NULL, 0, &b, 20000), 200);
    free(b);
    assert_int_equal(http_on(g.port, "POST", "/v1/jobs", token, "{}", 2, &b, 20000), 403);
    free(b);

    char *dup_name[] = {"token", "create", "--name", "cli-viewer", "--role", "admin",
                        "--database-url", url, NULL};
    char *no_team[] = {"token", "create", "--name", "cli-eng", "--role", "engineer",
                       "--database-url", url, NULL};
    char *bad_role[] = {"token", "create", "--name", "cli-x", "--role", "root",
                        "--database-url", url, NULL};
    char *revoke[] = {"token", "revoke", "--name", "cli-viewer", "--database-url", url, NULL};
    char *revoke_none[] = {"token", "revoke", "--name", "nobody", "--database-url", url, NULL};
    assert_int_equal(quiet(8, dup_name), 1);
    assert_int_equal(quiet(8, no_team), 2);
    assert_int_equal(quiet(8, bad_role), 2);
    assert_int_equal(quiet(6, revoke), 0);
    assert_int_equal(quiet(6, revoke_none), 1);
    assert_int_equal(http_on(g.port, "GET", "/v1/jobs?limit=1", token, NULL, 0, &b, 20000), 401);
    free(b);
}

/* The role matrix and the schemas, from docs/openapi.yaml. */
/* The fixture's pool, for the routes that read the configuration: quota
 * writes check their flavor against it, as `tarmac serve`'s do. */
static const char openapi_config[] =
    "database: {url: \"postgresql:///x\"}\n"
    "cluster: unit\n"
    "providers:\n"
    "  - name: sim\n"
    "    kind: sim\n"
    "    region: r1\n"
    "    instance_types:\n"
    "      - {name: sim.8x, gpus: 8, gpu_model: A100, cpu_milli: 96000, memory_mib: 1000000,\n"
    "         on_demand_price: \"32.00\", spot_price: \"10.00\"}\n"
    "pools:\n"
    "  - {name: a100, provider: sim, zones: [z1], instance_types: [sim.8x], gpu_model: A100,\n"
    "     gpus_per_node: 8, capacity_type: on_demand, min_nodes: 0, max_nodes: 4}\n";

static void test_openapi(void **state)
{
    const char *src = getenv("TM_SOURCE_DIR"), *dir = getenv("TM_TEST_STATE");
    char fixture[512], routes[512], cmd[2048], err[256];
    struct tm_config cfg;
    FILE *f;
    int rc;
    (void)state;

    if (system("python3 -c 'import yaml, jsonschema' 2>/dev/null") != 0) {
        skip();
        return;
    }
    if (tm_config_load_string(openapi_config, strlen(openapi_config), "openapi.yaml", &cfg, err,
                              sizeof(err)) != 0)
        fail_msg("%s", err);
    tm_daemon_quotas_start();
    tm_api_set_config(g.api, &cfg);
    snprintf(fixture, sizeof(fixture), "%s/api_fixture.json", dir);
    snprintf(routes, sizeof(routes), "%s/api_routes.txt", dir);
    f = fopen(routes, "w");
    assert_non_null(f);
    for (const struct api_route *r = tm_api_v1_routes.table; r->method; r++)
        fprintf(f, "%s %s\n", r->method, r->pattern);
    fclose(f);
    f = fopen(fixture, "w");
    assert_non_null(f);
    fprintf(f,
            "{\"tokens\": {\"admin\": \"%s\", \"finance\": \"%s\", \"engineer\": \"%s\","
            " \"viewer\": \"%s\", \"engineer_other\": \"%s\", \"revoked\": \"%s\"},"
            " \"team\": \"vision\", \"other_team\": \"speech\", \"node_id\": %" PRId64 ","
            " \"pool\": \"a100\"}\n",
            g.tok[T_ADMIN], g.tok[T_FINANCE], g.tok[T_ENGINEER], g.tok[T_VIEWER], g.tok[T_OTHER],
            g.tok[T_REVOKED], g.node_id);
    fclose(f);
    snprintf(cmd, sizeof(cmd),
             "python3 %s/tests/lib/openapi_check.py --spec %s/docs/openapi.yaml"
             " --base http://127.0.0.1:%d --fixture %s --routes %s",
             src, src, g.port, fixture, routes);
    rc = system(cmd);
    tm_api_set_config(g.api, NULL);
    tm_config_release(&cfg);
    assert_int_equal(rc, 0);
    unlink(fixture);
}

static int client_rc = 1;
static long inflight_status;

static void inflight_main(void *arg)
{
    char path[96], *b = NULL;
    (void)arg;

    tl_curl = curl_easy_init();
    snprintf(path, sizeof(path), "/v1/nodes/%" PRId64 "/heartbeat", g.node2_id);
    inflight_status = http_on(g.port, "POST", path, g.tok[T_ADMIN], "{}", 2, &b, 20000);
    free(b);
    curl_easy_cleanup(tl_curl);
}

/* Shutdown with a statement in flight (the node row is locked, so the
 * heartbeat waits): the API stops listening, but answers it before it
 * reports closed. */
static int stop_with_inflight(void)
{
    uv_thread_t t;
    char sql[128];

    sql_ok("BEGIN");
    snprintf(sql, sizeof(sql), "SELECT 1 FROM nodes WHERE id = %" PRId64 " FOR UPDATE", g.node2_id);
    sql_ok(sql);
    if (uv_thread_create(&t, inflight_main, NULL) != 0)
        return -1;
    usleep(300000);
    uv_async_send(&g.stop);
    usleep(300000);
    sql_ok("COMMIT");
    uv_thread_join(&t);
    if (inflight_status != 200) {
        fprintf(stderr, "in-flight request at shutdown: status %ld, expected 200\n", inflight_status);
        return -1;
    }
    return 0;
}

/* The client: every test, then the server is told to stop. */
static void client_main(void *arg)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_health),
        cmocka_unit_test(test_submit_roles),
        cmocka_unit_test(test_submit_fast),
        cmocka_unit_test(test_bad_bodies),
        cmocka_unit_test(test_list_paging),
        cmocka_unit_test(test_cancel_retag),
        cmocka_unit_test(test_pools_nodes),
        cmocka_unit_test(test_heartbeat),
        cmocka_unit_test(test_interruption_decisions),
        cmocka_unit_test(test_team_isolation),
        cmocka_unit_test(test_budgets),
        cmocka_unit_test(test_spend),
        cmocka_unit_test(test_metrics),
        cmocka_unit_test(test_client_gone),
        cmocka_unit_test(test_limits),
        cmocka_unit_test(test_openapi),
        cmocka_unit_test(test_token_cli),
    };
    (void)arg;
    client_rc = cmocka_run_group_tests(tests, setup, teardown);
    if (client_rc == 0) {
        if (stop_with_inflight() < 0)
            client_rc = 1;
    } else {
        uv_async_send(&g.stop);
    }
}

int main(void)
{
    uv_thread_t client;
    int r;

    if (make_fixture() < 0)
        return 1;
    r = start_server();
    if (r < 0) {
        fprintf(stderr, "server did not start: %s\n", tm_strerror(r));
        return 1;
    }
    if (uv_thread_create(&client, client_main, NULL) != 0)
        return 1;
    uv_run(&g.loop, UV_RUN_DEFAULT);
    uv_thread_join(&client);
    r = uv_loop_close(&g.loop);
    if (r != 0)
        fprintf(stderr, "uv_loop_close() = %d\n", r);
    if (g.curl)
        curl_easy_cleanup(g.curl);
    curl_global_cleanup();
    PQfinish(g.conn);
    tm_fleet_stats_release(&g.fleet);
    return client_rc != 0 || r != 0;
}
