/*
 * tests/unit/io/test_pg_uv.c: controller/io/pg_uv.c against a real PostgreSQL.
 *
 * Each test gets a fresh database from the run's cluster (tm_test_db_url),
 * runs its own loop, and ends by asserting uv_loop_close() == 0.  With
 * TM_PG_UV_TESTS=unit only the cases that need no server run.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <netinet/in.h>
#include <unistd.h>

#include <cmocka.h>

#include "controller/io/pg_uv.h"
#include "core/err.h"
#include "tests/lib/tm_test.h"

static int in_api; /* set while a tm_pg_* call runs: callbacks must not */

/* ---- recorders --------------------------------------------------------- */

struct state_log {
    int ok;
    int fail;
    int last;
    int seq_fail; /* event number of the last failure */
    uint64_t fail_at[32];
    uv_loop_t *loop;
};

static int events; /* orders state and query callbacks across a test */

static void on_state(int status, const char *error, void *data)
{
    struct state_log *log = data;

    assert_int_equal(in_api, 0);
    log->last = status;
    if (status == 0) {
        log->ok++;
        return;
    }
    assert_non_null(error);
    assert_null(strstr(error, "s3cret"));
    log->seq_fail = ++events;
    if (log->fail < 32 && log->loop)
        log->fail_at[log->fail] = uv_now(log->loop);
    log->fail++;
}

struct qres {
    int calls;
    int status;
    int seq;
    char sqlstate[8];
    char error[256];
    size_t nresults;
    char value[8][64]; /* first cell of each result */
    char value2[64];   /* second cell of the first result */
};

static void on_reply(const struct tm_pg_reply *reply, void *data)
{
    struct qres *q = data;

    assert_int_equal(in_api, 0);
    q->calls++;
    q->seq = ++events;
    q->status = reply->status;
    q->nresults = reply->nresults;
    snprintf(q->sqlstate, sizeof(q->sqlstate), "%s", reply->sqlstate ? reply->sqlstate : "");
    snprintf(q->error, sizeof(q->error), "%s", reply->error ? reply->error : "");
    if (reply->status == 0)
        assert_null(reply->error);
    else
        assert_non_null(reply->error);
    for (size_t i = 0; i < reply->nresults && i < 8; i++) {
        const PGresult *res = reply->results[i];

        if (PQntuples(res) > 0 && PQnfields(res) > 0)
            snprintf(q->value[i], sizeof(q->value[i]), "%s", PQgetvalue(res, 0, 0));
        if (i == 0 && PQntuples(res) > 0 && PQnfields(res) > 1)
            snprintf(q->value2, sizeof(q->value2), "%s", PQgetvalue(res, 0, 1));
    }
}

static void on_done(void *data)
{
    (*(int *)data)++;
}

/* ---- loop helpers ------------------------------------------------------ */

static void on_watchdog(uv_timer_t *t)
{
    *(int *)t->data = 1;
}

/* Run the loop until *count >= want; fail after limit_ms. */
static void run_until(uv_loop_t *loop, const int *count, int want, uint64_t limit_ms)
{
    uv_timer_t watchdog;
    int expired = 0;

    uv_timer_init(loop, &watchdog);
    watchdog.data = &expired;
    uv_timer_start(&watchdog, on_watchdog, limit_ms, 0);
    while (*count < want && !expired)
        uv_run(loop, UV_RUN_ONCE);
    uv_close((uv_handle_t *)&watchdog, NULL);
    uv_run(loop, UV_RUN_NOWAIT);
    assert_false(expired);
}

/* Run the loop for ms milliseconds. */
static void run_for(uv_loop_t *loop, uint64_t ms)
{
    uv_timer_t t;
    int expired = 0;

    uv_timer_init(loop, &t);
    t.data = &expired;
    uv_timer_start(&t, on_watchdog, ms, 0);
    while (!expired)
        uv_run(loop, UV_RUN_ONCE);
    uv_close((uv_handle_t *)&t, NULL);
    uv_run(loop, UV_RUN_NOWAIT);
}

static void close_pg(uv_loop_t *loop, struct tm_pg *pg)
{
    int closed = 0;

    in_api = 1;
    tm_pg_close(pg, on_done, &closed);
    in_api = 0;
    uv_run(loop, UV_RUN_DEFAULT);
    assert_int_equal(closed, 1);
}

/* Close two connections together: the loop runs until both are gone. */
static void close_two(uv_loop_t *loop, struct tm_pg *a, struct tm_pg *b)
{
    int closed = 0;

    in_api = 1;
    tm_pg_close(a, on_done, &closed);
    tm_pg_close(b, on_done, &closed);
    in_api = 0;
    uv_run(loop, UV_RUN_DEFAULT);
    assert_int_equal(closed, 2);
}

static int query(struct tm_pg *pg, const char *sql, int n, const char *const *params, struct qres *q)
{
    int r;

    in_api = 1;
    r = tm_pg_query(pg, sql, n, params, on_reply, q);
    in_api = 0;
    return r;
}

static int exec_script(struct tm_pg *pg, const char *script, struct qres *q)
{
    int r;

    in_api = 1;
    r = tm_pg_exec(pg, script, on_reply, q);
    in_api = 0;
    return r;
}

static const char *db_url(const char *name)
{
    const char *url = tm_test_db_url(name);

    assert_non_null(url);
    return url;
}

static struct tm_pg *connect_db(uv_loop_t *loop, const char *url, struct state_log *log)
{
    struct tm_pg *pg = NULL;

    log->loop = loop;
    in_api = 1;
    assert_int_equal(tm_pg_create(loop, url, on_state, log, &pg), 0);
    in_api = 0;
    assert_int_equal(log->ok + log->fail, 0); /* never from inside the call */
    run_until(loop, &log->ok, 1, 10000);
    assert_true(tm_pg_connected(pg));
    return pg;
}

static int closed_port(void)
{
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof(sa);
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    int port;

    assert_true(fd >= 0);
    assert_int_equal(bind(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
    assert_int_equal(getsockname(fd, (struct sockaddr *)&sa, &len), 0);
    port = ntohs(sa.sin_port);
    close(fd);
    return port;
}

/* ---- unit: redaction --------------------------------------------------- */

static void expect_redacted(const char *in, const char *want)
{
    char buf[256];

    tm_pg_conninfo_redact(in, buf, sizeof(buf));
    assert_string_equal(buf, want);
}

static void test_redact(void **state)
{
    char small[12];

    expect_redacted("postgresql://tarmac:s3cret@db.example:5432/tarmac",
                    "postgresql://tarmac:***@db.example:5432/tarmac");
    expect_redacted("postgres://u:p%40s3cret@h1:5432,h2/db?sslmode=require&password=s3cret",
                    "postgres://u:***@h1:5432,h2/db?sslmode=require&password=***");
    expect_redacted("postgresql://u@h/db?passw%6Frd=s3cret&connect_timeout=5",
                    "postgresql://u@h/db?passw%6Frd=***&connect_timeout=5");
    expect_redacted("postgresql://h/db?password=s3cret", "postgresql://h/db?password=***");
    expect_redacted("postgresql://u@h/db", "postgresql://u@h/db");
    expect_redacted("postgresql://h:5432/db?user=u", "postgresql://h:5432/db?user=u");
    expect_redacted("host=db user=u password=s3cret dbname=x",
                    "host=db user=u password=*** dbname=x");
    expect_redacted("host=db password = 'a s3cret \\' quote' port=5432",
                    "host=db password = *** port=5432");
    expect_redacted("PASSWORD=s3cret", "PASSWORD=***");
    expect_redacted("dbname=postgresql://u:s3cret@h/db sslmode=disable",
                    "dbname=postgresql://u:***@h/db sslmode=disable");
    expect_redacted("", "");
    /* A short buffer truncates and terminates, and still hides the secret. */
    tm_pg_conninfo_redact("password=s3cret host=h", small, sizeof(small));
    assert_string_equal(small, "password=**");
    tm_pg_conninfo_redact("postgresql://u:s3cret@h/db", small, sizeof(small));
    assert_null(strstr(small, "s3c"));
    assert_int_equal(strlen(small), sizeof(small) - 1);
}

static void test_bad_conninfo(void **state)
{
    uv_loop_t loop;
    struct tm_pg *pg = NULL;
    struct tm_pg_pool *pool = NULL;

    assert_int_equal(uv_loop_init(&loop), 0);
    assert_int_equal(tm_pg_create(&loop, "host=h password='s3cret", NULL, NULL, &pg), TM_EINVAL);
    assert_null(pg);
    assert_int_equal(tm_pg_create(&loop, "postgresql://h/db?nosuchkey=1", NULL, NULL, &pg),
                     TM_EINVAL);
    assert_int_equal(tm_pg_pool_create(&loop, "host=h", 0, NULL, NULL, &pool), TM_EINVAL);
    assert_int_equal(tm_pg_pool_create(&loop, "bogus==", 2, NULL, NULL, &pool), TM_EINVAL);
    assert_null(pool);
    uv_run(&loop, UV_RUN_DEFAULT);
    assert_int_equal(uv_loop_close(&loop), 0);
}

/* ---- integration ------------------------------------------------------- */

static void test_connect_query(void **state)
{
    uv_loop_t loop;
    struct state_log log = {0};
    struct qres q = {0}, timeout = {0}, app = {0};
    const char *params[] = {"41", "h\xc3\xa9llo 'quoted'", NULL};
    struct tm_pg *pg;

    assert_int_equal(uv_loop_init(&loop), 0);
    pg = connect_db(&loop, db_url("pg_uv_connect"), &log);
    assert_int_equal(query(pg, "SELECT $1::int + 1, $2::text, $3::text IS NULL", 3, params, &q), 0);
    assert_int_equal(query(pg, "SHOW statement_timeout", 0, NULL, &timeout), 0);
    assert_int_equal(query(pg, "SELECT current_setting('application_name')", 0, NULL, &app), 0);
    assert_int_equal(q.calls, 0);
    run_until(&loop, &app.calls, 1, 10000);
    assert_int_equal(q.status, 0);
    assert_int_equal(q.nresults, 1);
    assert_string_equal(q.value[0], "42");
    assert_string_equal(q.value2, "h\xc3\xa9llo 'quoted'");
    assert_true(q.seq < timeout.seq && timeout.seq < app.seq); /* FIFO */
    assert_string_equal(timeout.value[0], "1min");
    assert_string_equal(app.value[0], "tarmac");

    /* A parameter far larger than the socket buffers exercises the
     * PQflush() loop (watch both ways until the output is out). */
    {
        size_t n = 16u << 20;
        char *big = malloc(n + 1);
        const char *big_params[1];
        struct qres len = {0};

        assert_non_null(big);
        memset(big, 'a', n);
        big[n] = '\0';
        big_params[0] = big;
        assert_int_equal(query(pg, "SELECT length($1)", 1, big_params, &len), 0);
        free(big); /* copied by tm_pg_query */
        run_until(&loop, &len.calls, 1, 30000);
        assert_int_equal(len.status, 0);
        assert_string_equal(len.value[0], "16777216");
    }
    assert_int_equal(log.fail, 0);
    close_pg(&loop, pg);
    assert_int_equal(uv_loop_close(&loop), 0);
}

/* libpq moves to the next host on a new socket: the watcher must follow. */
static void test_multi_host(void **state)
{
    uv_loop_t loop;
    struct state_log log = {0};
    struct qres q = {0};
    const char *base = db_url("pg_uv_multihost");
    const char *at = strchr(base, '@');
    char url[600];
    struct tm_pg *pg;

    assert_non_null(at);
    snprintf(url, sizeof(url), "%.*s127.0.0.1:%d,%s", (int)(at + 1 - base), base, closed_port(),
             at + 1);
    assert_int_equal(uv_loop_init(&loop), 0);
    pg = connect_db(&loop, url, &log);
    assert_int_equal(query(pg, "SELECT current_database()", 0, NULL, &q), 0);
    run_until(&loop, &q.calls, 1, 10000);
    assert_int_equal(q.status, 0);
    assert_string_equal(q.value[0], "pg_uv_multihost");
    assert_int_equal(log.fail, 0);
    close_pg(&loop, pg);
    assert_int_equal(uv_loop_close(&loop), 0);
}

static void test_script(void **state)
{
    uv_loop_t loop;
    struct state_log log = {0};
    struct qres q = {0};
    struct tm_pg *pg;

    assert_int_equal(uv_loop_init(&loop), 0);
    pg = connect_db(&loop, db_url("pg_uv_script"), &log);
    assert_int_equal(exec_script(pg,
                                 "BEGIN ISOLATION LEVEL REPEATABLE READ;"
                                 "CREATE TABLE t (x int);"
                                 "INSERT INTO t VALUES (1), (2);"
                                 "SELECT count(*) FROM t;"
                                 "SELECT txid_current();"
                                 "SELECT txid_current();"
                                 "COMMIT",
                                 &q),
                     0);
    run_until(&loop, &q.calls, 1, 10000);
    assert_int_equal(q.status, 0);
    assert_int_equal(q.nresults, 7);
    assert_string_equal(q.value[3], "2");
    assert_true(q.value[4][0] != '\0');
    assert_string_equal(q.value[4], q.value[5]); /* one transaction */
    close_pg(&loop, pg);
    assert_int_equal(uv_loop_close(&loop), 0);
}

static void test_failure_keeps_connection(void **state)
{
    uv_loop_t loop;
    struct state_log log = {0};
    struct qres pid1 = {0}, div = {0}, syntax = {0}, create = {0}, script = {0}, count = {0},
                pid2 = {0};
    struct tm_pg *pg;

    assert_int_equal(uv_loop_init(&loop), 0);
    pg = connect_db(&loop, db_url("pg_uv_failure"), &log);
    assert_int_equal(query(pg, "SELECT pg_backend_pid()", 0, NULL, &pid1), 0);
    assert_int_equal(query(pg, "SELECT 1/0", 0, NULL, &div), 0);
    assert_int_equal(query(pg, "SELEC 1", 0, NULL, &syntax), 0);
    assert_int_equal(exec_script(pg, "CREATE TABLE u (x int)", &create), 0);
    assert_int_equal(
        exec_script(pg, "BEGIN; INSERT INTO u VALUES (1); SELECT 1/0; COMMIT", &script), 0);
    assert_int_equal(query(pg, "SELECT count(*) FROM u", 0, NULL, &count), 0);
    assert_int_equal(query(pg, "SELECT pg_backend_pid()", 0, NULL, &pid2), 0);
    run_until(&loop, &pid2.calls, 1, 10000);
    assert_int_equal(div.status, TM_EDB);
    assert_string_equal(div.sqlstate, "22012");
    assert_string_equal(div.error, "division by zero");
    assert_int_equal(syntax.status, TM_EDB);
    assert_string_equal(syntax.sqlstate, "42601");
    assert_int_equal(create.status, 0);
    assert_int_equal(script.status, TM_EDB);
    assert_string_equal(script.sqlstate, "22012");
    /* The failed transaction was rolled back and the session is clean. */
    assert_int_equal(count.status, 0);
    assert_string_equal(count.value[0], "0");
    assert_int_equal(pid2.status, 0);
    assert_string_equal(pid1.value[0], pid2.value[0]); /* same connection */
    assert_int_equal(log.fail, 0);
    close_pg(&loop, pg);
    assert_int_equal(uv_loop_close(&loop), 0);
}

#define POOL_QUERIES 2000

struct pool_item {
    struct qres q;
    int done_order;
};

static int pool_done;

static void on_pool_reply(const struct tm_pg_reply *reply, void *data)
{
    struct pool_item *item = data;

    on_reply(reply, &item->q);
    item->done_order = pool_done++;
}

static void test_pool_many(void **state)
{
    uv_loop_t loop;
    struct state_log log = {.loop = NULL};
    struct tm_pg_pool *pool = NULL;
    static struct pool_item items[POOL_QUERIES];
    long last_seq[3] = {-1, -1, -1};
    char pids[3][64] = {{0}};
    int npids = 0;
    int closed = 0;

    memset(items, 0, sizeof(items));
    pool_done = 0;
    assert_int_equal(uv_loop_init(&loop), 0);
    in_api = 1;
    assert_int_equal(tm_pg_pool_create(&loop, db_url("pg_uv_pool"), 3, on_state, &log, &pool), 0);
    in_api = 0;
    run_until(&loop, &log.ok, 1, 10000);
    assert_int_equal(log.ok, 1);
    for (int i = 0; i < POOL_QUERIES; i++) {
        char seq[16];
        const char *params[] = {seq};

        snprintf(seq, sizeof(seq), "%d", i);
        in_api = 1;
        assert_int_equal(tm_pg_pool_query(pool, "SELECT $1::int, pg_backend_pid()", 1, params,
                                          on_pool_reply, &items[i]),
                         0);
        in_api = 0;
    }
    run_until(&loop, &pool_done, POOL_QUERIES, 60000);
    assert_int_equal(tm_pg_pool_connected(pool), 3);
    assert_int_equal(log.ok, 1); /* reported once */
    assert_int_equal(log.fail, 0);
    for (int i = 0; i < POOL_QUERIES; i++) {
        struct qres *q = &items[i].q;
        int slot = -1;

        assert_int_equal(q->calls, 1);
        assert_int_equal(q->status, 0);
        assert_int_equal(atoi(q->value[0]), i);
        for (int p = 0; p < npids; p++)
            if (strcmp(pids[p], q->value2) == 0)
                slot = p;
        if (slot < 0) {
            assert_true(npids < 3);
            slot = npids++;
            snprintf(pids[slot], sizeof(pids[slot]), "%s", q->value2);
        }
        /* Each connection answers in the order the requests were made. */
        assert_true(items[i].done_order > last_seq[slot]);
        last_seq[slot] = items[i].done_order;
    }
    assert_int_equal(npids, 3); /* the work was spread */
    in_api = 1;
    tm_pg_pool_close(pool, on_done, &closed);
    in_api = 0;
    uv_run(&loop, UV_RUN_DEFAULT);
    assert_int_equal(closed, 1);
    assert_int_equal(uv_loop_close(&loop), 0);
}

static void on_terminate_timer(uv_timer_t *t)
{
    void **args = t->data;
    struct tm_pg *killer = args[0];
    const char *params[] = {args[1]};

    assert_int_equal(tm_pg_query(killer, "SELECT pg_terminate_backend($1)", 1, params, on_reply,
                                 args[2]),
                     0);
}

static void test_connection_loss(void **state)
{
    uv_loop_t loop;
    struct state_log log = {0}, klog = {0};
    struct qres pid = {0}, sleeping = {0}, queued = {0}, killed = {0}, after = {0};
    struct tm_pg *pg, *killer;
    const char *url;
    uv_timer_t timer;
    void *args[3];

    assert_int_equal(uv_loop_init(&loop), 0);
    url = db_url("pg_uv_loss");
    pg = connect_db(&loop, url, &log);
    killer = connect_db(&loop, url, &klog);
    assert_int_equal(query(pg, "SELECT pg_backend_pid()", 0, NULL, &pid), 0);
    run_until(&loop, &pid.calls, 1, 10000);
    assert_int_equal(pid.status, 0);

    events = 0;
    assert_int_equal(query(pg, "SELECT pg_sleep(30)", 0, NULL, &sleeping), 0);
    /* Queued behind the sleep: never sent before the loss, so it waits for
     * the next connection and succeeds there. */
    assert_int_equal(query(pg, "SELECT pg_backend_pid()", 0, NULL, &queued), 0);
    args[0] = killer;
    args[1] = pid.value[0];
    args[2] = &killed;
    uv_timer_init(&loop, &timer);
    timer.data = args;
    uv_timer_start(&timer, on_terminate_timer, 300, 0);
    run_until(&loop, &sleeping.calls, 1, 10000);
    assert_int_equal(sleeping.status, -ECONNRESET);
    assert_int_equal(log.fail, 1);
    assert_true(log.seq_fail < sleeping.seq); /* the state callback hears first */
    assert_false(tm_pg_connected(pg));

    run_until(&loop, &queued.calls, 1, 10000);
    assert_int_equal(queued.status, 0);
    assert_string_not_equal(queued.value[0], pid.value[0]); /* a new backend */
    assert_int_equal(log.ok, 2); /* connected, lost, reconnected */
    assert_true(tm_pg_connected(pg));
    assert_int_equal(killed.status, 0);
    assert_string_equal(killed.value[0], "t");

    assert_int_equal(query(pg, "SELECT 7", 0, NULL, &after), 0);
    run_until(&loop, &after.calls, 1, 10000);
    assert_int_equal(after.status, 0);
    assert_string_equal(after.value[0], "7");

    uv_close((uv_handle_t *)&timer, NULL);
    close_two(&loop, killer, pg);
    assert_int_equal(uv_loop_close(&loop), 0);
}

static void test_refused_backoff(void **state)
{
    uv_loop_t loop;
    struct state_log log = {0}, plog = {0};
    struct qres q = {0};
    struct tm_pg *pg = NULL;
    struct tm_pg_pool *pool = NULL;
    char url[128];
    int closed = 0;

    assert_int_equal(uv_loop_init(&loop), 0);
    log.loop = &loop;
    snprintf(url, sizeof(url), "postgresql://postgres:s3cret@127.0.0.1:%d/postgres", closed_port());
    assert_int_equal(tm_pg_create(&loop, url, on_state, &log, &pg), 0);
    assert_int_equal(tm_pg_pool_create(&loop, url, 2, on_state, &plog, &pool), 0);
    assert_int_equal(query(pg, "SELECT 1", 0, NULL, &q), 0);
    run_for(&loop, 1200);
    /* Delays 50-100, 100-200, 200-400, 400-800 ms: 4 or 5 attempts in
     * 1.2 s.  A hot loop would make hundreds, no retry would make one. */
    assert_in_range(log.fail, 3, 6);
    assert_int_equal(log.ok, 0);
    assert_true(log.last < 0);
    assert_true(log.fail_at[log.fail - 1] - log.fail_at[log.fail - 2] >
                log.fail_at[1] - log.fail_at[0]); /* it backs off */
    assert_in_range(plog.fail, 4, 12); /* both members report */
    assert_int_equal(plog.ok, 0);
    assert_false(tm_pg_connected(pg));
    assert_int_equal(tm_pg_pool_connected(pool), 0);
    assert_int_equal(q.calls, 0); /* still queued */
    in_api = 1;
    tm_pg_close(pg, on_done, &closed);
    tm_pg_pool_close(pool, on_done, &closed);
    in_api = 0;
    assert_int_equal(q.calls, 0);
    uv_run(&loop, UV_RUN_DEFAULT);
    assert_int_equal(closed, 2);
    assert_int_equal(q.calls, 1);
    assert_int_equal(q.status, TM_ECANCELED);
    assert_int_equal(uv_loop_close(&loop), 0);
}

static void test_close_with_queued_work(void **state)
{
    uv_loop_t loop;
    struct state_log log = {0}, plog = {0};
    static struct qres qs[TM_PG_QUEUE_MAX];
    static struct qres ps[100];
    struct qres extra = {0};
    struct tm_pg *pg;
    struct tm_pg_pool *pool = NULL;
    const char *url;
    int closed = 0;

    memset(qs, 0, sizeof(qs));
    memset(ps, 0, sizeof(ps));
    assert_int_equal(uv_loop_init(&loop), 0);
    url = db_url("pg_uv_close");
    pg = connect_db(&loop, url, &log);
    assert_int_equal(tm_pg_pool_create(&loop, url, 2, on_state, &plog, &pool), 0);
    run_until(&loop, &plog.ok, 1, 10000);
    for (int i = 0; i < TM_PG_QUEUE_MAX; i++)
        assert_int_equal(query(pg, "SELECT pg_sleep(10)", 0, NULL, &qs[i]), 0);
    assert_int_equal(query(pg, "SELECT 1", 0, NULL, &extra), -EAGAIN); /* bounded */
    for (int i = 0; i < 100; i++) {
        in_api = 1;
        assert_int_equal(tm_pg_pool_query(pool, "SELECT pg_sleep(10)", 0, NULL, on_reply, &ps[i]),
                         0);
        in_api = 0;
    }
    run_for(&loop, 200); /* the first ones are in flight now */

    in_api = 1;
    tm_pg_close(pg, on_done, &closed);
    tm_pg_pool_close(pool, on_done, &closed);
    in_api = 0;
    assert_int_equal(qs[0].calls, 0); /* not from inside the close calls */
    assert_int_equal(ps[0].calls, 0);
    assert_int_equal(tm_pg_pool_query(pool, "SELECT 1", 0, NULL, on_reply, &extra), TM_ECANCELED);
    uv_run(&loop, UV_RUN_DEFAULT);
    assert_int_equal(closed, 2);
    for (int i = 0; i < TM_PG_QUEUE_MAX; i++) {
        assert_int_equal(qs[i].calls, 1);
        assert_int_equal(qs[i].status, TM_ECANCELED);
    }
    for (int i = 0; i < 100; i++) {
        assert_int_equal(ps[i].calls, 1);
        assert_int_equal(ps[i].status, TM_ECANCELED);
    }
    assert_int_equal(extra.calls, 0);
    assert_int_equal(uv_loop_close(&loop), 0);
}

/* A server that accepts TCP but never speaks, and a server that is not
 * there: the connect attempt is abandoned after 10 s, and a request that
 * no connection could send fails after TM_PG_WAIT_MS. */
static void test_timeouts(void **state)
{
    uv_loop_t loop;
    struct state_log hang = {0}, gone = {0};
    struct qres q = {0};
    struct tm_pg *pg_hang = NULL, *pg_gone = NULL;
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof(sa);
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    char url[128];
    uint64_t start;

    assert_int_equal(uv_loop_init(&loop), 0);
    assert_true(fd >= 0);
    assert_int_equal(bind(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
    assert_int_equal(listen(fd, 16), 0);
    assert_int_equal(getsockname(fd, (struct sockaddr *)&sa, &len), 0);
    hang.loop = &loop;
    snprintf(url, sizeof(url), "host=127.0.0.1 port=%d user=postgres dbname=x", ntohs(sa.sin_port));
    assert_int_equal(tm_pg_create(&loop, url, on_state, &hang, &pg_hang), 0);
    snprintf(url, sizeof(url), "host=127.0.0.1 port=%d user=postgres dbname=x", closed_port());
    assert_int_equal(tm_pg_create(&loop, url, on_state, &gone, &pg_gone), 0);
    assert_int_equal(query(pg_gone, "SELECT 1", 0, NULL, &q), 0);
    start = uv_now(&loop);

    run_until(&loop, &hang.fail, 1, 15000);
    assert_int_equal(hang.last, -ETIMEDOUT);
    assert_in_range(hang.fail_at[0] - start, 9500, 11000);
    assert_int_equal(q.calls, 0);
    run_until(&loop, &q.calls, 1, TM_PG_WAIT_MS + 5000);
    assert_int_equal(q.status, -ETIMEDOUT);
    assert_in_range(uv_now(&loop) - start, TM_PG_WAIT_MS - 100, TM_PG_WAIT_MS + 2000);
    assert_true(gone.fail > 5);

    close_two(&loop, pg_hang, pg_gone);
    assert_int_equal(q.calls, 1); /* not called again */
    close(fd);
    assert_int_equal(uv_loop_close(&loop), 0);
}

int main(void)
{
    const struct CMUnitTest unit[] = {
        cmocka_unit_test(test_redact),
        cmocka_unit_test(test_bad_conninfo),
    };
    const struct CMUnitTest integration[] = {
        cmocka_unit_test(test_redact),
        cmocka_unit_test(test_bad_conninfo),
        cmocka_unit_test(test_connect_query),
        cmocka_unit_test(test_multi_host),
        cmocka_unit_test(test_script),
        cmocka_unit_test(test_failure_keeps_connection),
        cmocka_unit_test(test_pool_many),
        cmocka_unit_test(test_connection_loss),
        cmocka_unit_test(test_refused_backoff),
        cmocka_unit_test(test_close_with_queued_work),
        cmocka_unit_test(test_timeouts),
    };
    const char *only = getenv("TM_PG_UV_TESTS");

    if (only && strcmp(only, "unit") == 0)
        return cmocka_run_group_tests(unit, NULL, NULL);
    return cmocka_run_group_tests(integration, NULL, NULL);
}
