/*
 * tests/integration/test_log_store_s3.c: the S3 log store
 * (controller/api/log_store_s3.c) with a real PostgreSQL index (the
 * migrations, rows written as the ingest writes them) and moto's S3 server
 * with signature checking on (tests/lib/moto_fixture.sh ... s3:*).
 *
 * What it holds the store to: put writes every chunk the index does not
 * hold yet and never overwrites an object a row names (a resend with other
 * boundaries); get reads a chunk back byte for byte; forget deletes the
 * objects of dropped rows, and, once a stream's row is gone, the objects
 * no row ever named (what a crash between put and the ingest leaves),
 * without touching another stream (job 12 against job 123); keys come from
 * the credential chain (the environment here) and a wrong secret is
 * refused by moto, with no secret in the message.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>
#include <libpq-fe.h>
#include <uv.h>

#include "controller/api/log_store.h"
#include "controller/io/http_uv.h"
#include "controller/io/pg_uv.h"
#include "controller/io/s3.h"
#include "controller/store/migrate.h"
#include "controller/store/store.h"
#include "core/config.h"
#include "core/err.h"
#include "core/log.h"
#include "tests/lib/tm_test.h"

#define BUCKET "tarmac-store"
#define PREFIX "itest-"

static struct {
    char state_dir[1024];
    char moto_url[128];
    char access_key[128], secret_key[128];
    const char *db_url;
    PGconn *conn;
    int64_t node;
} g;

/* ---- fixtures ------------------------------------------------------------ */

static const char *src_dir(void)
{
    const char *s = getenv("TM_SOURCE_DIR");

    return s ? s : TM_SOURCE_DIR;
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
    PGresult *res = PQexec(g.conn, sql);
    int64_t v = -1;

    if (PQresultStatus(res) == PGRES_TUPLES_OK && PQntuples(res) == 1)
        v = strtoll(PQgetvalue(res, 0, 0), NULL, 10);
    else
        fprintf(stderr, "%s: %s\n", sql, PQresultErrorMessage(res));
    PQclear(res);
    return v;
}

static int moto_start(void)
{
    char cmd[2048], line[512];
    const char *st = getenv("TM_TEST_STATE");
    int port = 0;
    FILE *p;

    snprintf(g.state_dir, sizeof(g.state_dir), "%s/s3-store-%d", st ? st : "/tmp", (int)getpid());
    snprintf(cmd, sizeof(cmd), "%s/tests/lib/moto_fixture.sh start '%s' 's3:*'", src_dir(), g.state_dir);
    p = popen(cmd, "r");
    if (!p)
        return -1;
    while (fgets(line, sizeof(line), p)) {
        line[strcspn(line, "\n")] = '\0';
        if (sscanf(line, "MOTO_PORT=%d", &port) == 1)
            continue;
        if (strncmp(line, "MOTO_ACCESS_KEY_ID=", 19) == 0)
            snprintf(g.access_key, sizeof(g.access_key), "%.100s", line + 19);
        else if (strncmp(line, "MOTO_SECRET_ACCESS_KEY=", 23) == 0)
            snprintf(g.secret_key, sizeof(g.secret_key), "%.100s", line + 23);
    }
    if (pclose(p) != 0 || port <= 0 || !g.access_key[0] || !g.secret_key[0])
        return -1;
    snprintf(g.moto_url, sizeof(g.moto_url), "http://127.0.0.1:%d", port);
    return 0;
}

static int group_setup(void **state)
{
    char err[512];
    int applied = 0;

    (void)state;
    if (moto_start() < 0) {
        fprintf(stderr, "could not start moto\n");
        return -1;
    }
    tm_log_add_secret(g.secret_key);
    g.db_url = tm_test_db_url("tm_log_store_s3");
    if (!g.db_url)
        return -1;
    g.conn = tm_store_connect_blocking(g.db_url, err, sizeof(err));
    if (!g.conn || tm_migrate(g.conn, &applied, err, sizeof(err)) < 0) {
        fprintf(stderr, "setup: %s\n", err);
        return -1;
    }
    sql_ok("INSERT INTO pools (name, provider, provider_kind, region, zones, instance_types,"
           " gpu_model, gpus_per_node, capacity_type, min_nodes, max_nodes, idle_grace_ms, updated_ms)"
           " VALUES ('a100', 'sim', 'sim', 'r1', '{z1}', '{sim.8x-a100}', 'A100', 8, 'on_demand', 0, 10, 600000, 1)");
    g.node = sql_i64("INSERT INTO nodes (pool, launch_token, instance_id, zone, instance_type, gpus,"
                     " gpu_model, cpu_milli, memory_mib, capacity_type, state, price_uusd_per_hour,"
                     " requested_ms, billed_from_ms, ready_ms)"
                     " VALUES ('a100', 'tok-1', 'i-1', 'z1', 'sim.8x-a100', 8, 'A100', 96000, 1000000,"
                     " 'on_demand', 'ready', 32770000, 1, 1, 2) RETURNING id");
    /* Jobs 12 and 123: one's stream prefix is a prefix of the other's name
     * unless the name says where the job id ends. */
    sql_ok("INSERT INTO jobs (id, team, name, command, gpus, gpu_milli, nodes, cpu_milli, memory_mib,"
           " class, priority, preemptible, checkpointable, submitted_ms) VALUES"
           " (12, 'vision', 'a', '', 1, 1000, 1, 0, 0, 'batch', 0, false, false, 1),"
           " (123, 'vision', 'b', '', 1, 1000, 1, 0, 0, 'batch', 0, false, false, 1)");
    return g.node > 0 ? 0 : -1;
}

static int group_teardown(void **state)
{
    char cmd[2048];

    (void)state;
    if (g.conn)
        PQfinish(g.conn);
    snprintf(cmd, sizeof(cmd), "%s/tests/lib/moto_fixture.sh stop '%s'", src_dir(), g.state_dir);
    return system(cmd) == 0 ? 0 : -1;
}

/* ---- a store on a loop, and calls run to their answer -------------------- */

struct env {
    uv_loop_t loop;
    struct tm_pg_pool *pool;
    struct tm_log_store *store;
    struct tm_http *http; /* the test's own client, to look into the bucket */
    struct tm_s3 *s3;
};

struct seen {
    bool done;
    int status;
    char message[512];
    unsigned char *bytes;
    size_t len;
    size_t nkeys;
};

static void on_done(int status, const char *message, void *data)
{
    struct seen *s = data;

    s->done = true;
    s->status = status;
    snprintf(s->message, sizeof(s->message), "%s", message ? message : "");
}

static void on_got(int status, const char *message, const unsigned char *bytes, size_t len, void *data)
{
    struct seen *s = data;

    on_done(status, message, data);
    if (bytes) {
        s->bytes = malloc(len + 1);
        memcpy(s->bytes, bytes, len);
        s->len = len;
    }
}

static void on_s3(const struct tm_s3_result *res, void *data)
{
    struct seen *s = data;

    on_done(res->status, res->error, data);
    s->nkeys = res->nkeys;
}

static void wait_done(struct env *e, struct seen *s)
{
    while (!s->done)
        uv_run(&e->loop, UV_RUN_ONCE);
}

static struct tm_config store_cfg(void)
{
    struct tm_config cfg = {0};

    cfg.logs.store = "s3";
    cfg.logs.s3.bucket = BUCKET;
    cfg.logs.s3.endpoint = g.moto_url;
    cfg.logs.s3.region = "us-east-1";
    cfg.logs.s3.prefix = PREFIX;
    cfg.logs.s3.credentials.source = "env";
    cfg.logs.s3.timeout_ms = 30000;
    return cfg;
}

static void env_open(struct env *e, const char *secret)
{
    struct tm_config cfg = store_cfg();
    struct tm_s3_options o = {.endpoint = g.moto_url, .region = "us-east-1", .bucket = BUCKET};
    struct tm_aws_credentials cred = {0};
    char err[256];

    memset(e, 0, sizeof(*e));
    setenv("AWS_ACCESS_KEY_ID", g.access_key, 1);
    setenv("AWS_SECRET_ACCESS_KEY", secret, 1);
    unsetenv("AWS_SESSION_TOKEN");
    assert_int_equal(uv_loop_init(&e->loop), 0);
    assert_int_equal(tm_pg_pool_create(&e->loop, g.db_url, 2, NULL, NULL, &e->pool), 0);
    assert_int_equal(tm_log_store_open(&e->loop, e->pool, &cfg, &e->store), 0);
    assert_string_equal(e->store->ops->name, "s3");
    assert_false(e->store->ops->inline_bytes);
    assert_int_equal(tm_http_create(&e->loop, &e->http), 0);
    assert_int_equal(tm_s3_create(&e->loop, e->http, &o, &e->s3, err, sizeof(err)), 0);
    snprintf(cred.access_key, sizeof(cred.access_key), "%s", g.access_key);
    snprintf(cred.secret_key, sizeof(cred.secret_key), "%s", g.secret_key);
    assert_int_equal(tm_s3_set_credentials(e->s3, &cred), 0);
    tm_aws_credentials_clear(&cred);
}

static void env_close(struct env *e)
{
    tm_log_store_free(e->store);
    tm_s3_close(e->s3);
    tm_http_close(e->http, NULL, NULL);
    tm_pg_pool_close(e->pool, NULL, NULL);
    while (uv_run(&e->loop, UV_RUN_DEFAULT))
        ;
    assert_int_equal(uv_loop_close(&e->loop), 0);
}

static void make_bucket(struct env *e)
{
    struct seen s = {0};

    assert_int_equal(tm_s3_create_bucket(e->s3, on_s3, &s), 0);
    wait_done(e, &s);
    assert_int_equal(s.status, 0);
}

static void put(struct env *e, const struct tm_log_piece *p, size_t n)
{
    struct seen s = {0};

    assert_int_equal(e->store->ops->put(e->store, p, n, on_done, &s), 0);
    assert_false(s.done);
    wait_done(e, &s);
    if (s.status != 0)
        fail_msg("put: %s", s.message);
}

/* The bytes of an object as the bucket has them; NULL when it has none. */
static unsigned char *object(struct env *e, const struct tm_log_key *k, size_t len, size_t *ret_len)
{
    struct seen s = {0};

    assert_int_equal(e->store->ops->get(e->store, k, len, on_got, &s), 0);
    wait_done(e, &s);
    if (s.status == TM_ENOTFOUND)
        return NULL;
    if (s.status != 0)
        fail_msg("get: %s", s.message);
    *ret_len = s.len;
    return s.bytes;
}

static size_t listed(struct env *e, const char *prefix)
{
    struct seen s = {0};

    assert_int_equal(tm_s3_list(e->s3, prefix, NULL, 0, on_s3, &s), 0);
    wait_done(e, &s);
    assert_int_equal(s.status, 0);
    return s.nkeys;
}

static void forget(struct env *e, const struct tm_log_key *k, size_t n)
{
    struct seen s = {0};

    assert_int_equal(e->store->ops->forget(e->store, k, n, on_done, &s), 0);
    wait_done(e, &s);
    if (s.status != 0)
        fail_msg("forget: %s", s.message);
}

/* ---- the tests ------------------------------------------------------------ */

static void test_put_get_forget_sweep(void **state)
{
    struct env e;
    unsigned char *b;
    size_t len = 0;
    static const unsigned char first[] = "0123456789abcdefghijklmnopqrstuvwxy\xff\x00z";
    char sql[512];

    (void)state;
    env_open(&e, g.secret_key);
    make_bucket(&e);

    /* A batch of three chunks of job 12's stream, nothing indexed yet. */
    {
        struct tm_log_piece p[] = {
            {{12, 1, 0, 0}, first, 10},
            {{12, 1, 0, 10}, first + 10, 15},
            {{12, 1, 0, 25}, first + 25, 13},
        };

        put(&e, p, 3);
    }
    b = object(&e, &(struct tm_log_key){12, 1, 0, 10}, 15, &len);
    assert_non_null(b);
    assert_int_equal(len, 15);
    assert_memory_equal(b, first + 10, 15);
    free(b);
    b = object(&e, &(struct tm_log_key){12, 1, 0, 25}, 13, &len);
    assert_non_null(b);
    assert_int_equal(len, 13);
    assert_memory_equal(b, first + 25, 13); /* a NUL and a 0xff among them */
    free(b);

    {
        struct tm_log_piece p[] = {{{123, 1, 0, 0}, (const unsigned char *)"job3", 4}};

        put(&e, p, 1);
    }

    /* The ingest commits them: the stream expects offset 38 next. */
    snprintf(sql, sizeof(sql),
             "INSERT INTO job_log_streams (job_id, attempt, rank, node_id, next_offset, stored_bytes,"
             " opened_ms, updated_ms) VALUES (12, 1, 0, %lld, 38, 38, 1, 1), (123, 1, 0, %lld, 4, 4, 1, 1)",
             (long long)g.node, (long long)g.node);
    sql_ok(sql);
    sql_ok("INSERT INTO job_log_chunks (job_id, attempt, rank, off, len) VALUES"
           " (12, 1, 0, 0, 10), (12, 1, 0, 10, 15), (12, 1, 0, 25, 13), (123, 1, 0, 0, 4)");
    /* An agent that restarted resends from offset 10 with other
     * boundaries (10 + 20, then 30 onwards): the indexed object at 10 is
     * kept as its row says; what starts at 38 and after is written. */
    {
        static const unsigned char resend[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789!?";
        struct tm_log_piece p[] = {
            {{12, 1, 0, 10}, resend, 20},
            {{12, 1, 0, 38}, resend + 20, 6},
            {{12, 1, 0, 44}, resend + 26, 5},
        };

        put(&e, p, 3);
    }
    b = object(&e, &(struct tm_log_key){12, 1, 0, 10}, 15, &len);
    assert_non_null(b);
    assert_int_equal(len, 15);
    assert_memory_equal(b, first + 10, 15);
    free(b);
    b = object(&e, &(struct tm_log_key){12, 1, 0, 38}, 6, &len);
    assert_non_null(b);
    assert_int_equal(len, 6);
    free(b);
    /* Say the ingest of that batch never committed (the controller died):
     * 38 and 44 are objects no row names. */
    assert_int_equal(listed(&e, PREFIX "12-1-0-"), 5);

    /* The cap drops chunk 0: its object goes, the stream's others stay. */
    sql_ok("DELETE FROM job_log_chunks WHERE job_id = 12 AND off = 0");
    forget(&e, &(struct tm_log_key){12, 1, 0, 0}, 1);
    assert_null(object(&e, &(struct tm_log_key){12, 1, 0, 0}, 10, &len));
    assert_int_equal(listed(&e, PREFIX "12-1-0-"), 4);

    /* The retention takes the whole stream: its rows' objects go, and so do
     * the two no row named; job 123's stream is untouched. */
    sql_ok("DELETE FROM job_log_streams WHERE job_id = 12");
    {
        struct tm_log_key k[] = {{12, 1, 0, 10}, {12, 1, 0, 25}};

        forget(&e, k, 2);
    }
    assert_int_equal(listed(&e, PREFIX "12-"), 0);
    assert_int_equal(listed(&e, PREFIX "123-1-0-"), 1);
    b = object(&e, &(struct tm_log_key){123, 1, 0, 0}, 4, &len);
    assert_non_null(b);
    assert_memory_equal(b, "job3", 4);
    free(b);
    /* Forgetting what is gone already is no error. */
    forget(&e, &(struct tm_log_key){12, 1, 0, 10}, 1);
    env_close(&e);
}

/* A store whose secret is wrong: moto refuses every put, and the message
 * names S3's refusal without the secret. */
static void test_wrong_secret(void **state)
{
    struct env e;
    struct seen s = {0};
    char wrong[128];
    struct tm_log_piece p[] = {{{123, 1, 0, 4}, (const unsigned char *)"forged", 6}};
    size_t len;

    (void)state;
    snprintf(wrong, sizeof(wrong), "%s", g.secret_key);
    wrong[1] = wrong[1] == 'x' ? 'y' : 'x';
    env_open(&e, wrong);
    assert_int_equal(e.store->ops->put(e.store, p, 1, on_done, &s), 0);
    wait_done(&e, &s);
    assert_int_equal(s.status, TM_EAUTH);
    assert_non_null(strstr(s.message, "SignatureDoesNotMatch"));
    assert_null(strstr(s.message, wrong));
    assert_null(strstr(s.message, g.secret_key));
    env_close(&e);

    env_open(&e, g.secret_key);
    assert_null(object(&e, &(struct tm_log_key){123, 1, 0, 4}, 6, &len));
    env_close(&e);
}

/* Bad logs.s3 settings: no store, an error naming the key. */
static void test_bad_config(void **state)
{
    uv_loop_t loop;
    struct tm_pg_pool *pool;
    struct tm_log_store *st = NULL;
    struct tm_config cfg = store_cfg();

    (void)state;
    assert_int_equal(uv_loop_init(&loop), 0);
    assert_int_equal(tm_pg_pool_create(&loop, g.db_url, 1, NULL, NULL, &pool), 0);
    cfg.logs.s3.bucket = NULL;
    assert_int_equal(tm_log_store_open(&loop, pool, &cfg, &st), TM_EINVAL);
    cfg = store_cfg();
    cfg.logs.s3.endpoint = "ftp://nowhere";
    assert_true(tm_log_store_open(&loop, pool, &cfg, &st) < 0);
    cfg = store_cfg();
    cfg.logs.s3.credentials.source = "telepathy";
    assert_true(tm_log_store_open(&loop, pool, &cfg, &st) < 0);
    assert_null(st);
    tm_pg_pool_close(pool, NULL, NULL);
    while (uv_run(&loop, UV_RUN_DEFAULT))
        ;
    assert_int_equal(uv_loop_close(&loop), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_bad_config),
        cmocka_unit_test(test_put_get_forget_sweep),
        cmocka_unit_test(test_wrong_secret),
    };

    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
