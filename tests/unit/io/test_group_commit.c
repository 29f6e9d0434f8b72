/*
 * tests/unit/io/test_group_commit.c: controller/io/group_commit.c against a
 * real PostgreSQL: items keep their order, batches keep their bounds, a
 * refused item or batch is isolated, a blob kind's bytes arrive as they
 * are, and every callback comes after the commit of what it answers.
 *
 * Each test gets a fresh database from the run's cluster (tm_test_db_url)
 * and its own loop.  A second, blocking connection (the test's own) looks
 * at the table from outside the batch's transaction.
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

#include <cmocka.h>

#include "controller/io/group_commit.h"
#include "controller/io/pg_uv.h"
#include "core/err.h"
#include "tests/lib/tm_test.h"

/* The batch statement: one row per value, except 'skip' (the statement's
 * own check refuses it); 'bad' breaks the table's CHECK and so the whole
 * batch.  Each answer row: the ordinal, the row's id and its transaction. */
static const char insert_sql[] =
    "WITH r AS (SELECT * FROM unnest($1::text[], $2::text[]) WITH ORDINALITY AS r(v, tag, i)),"
    " ins AS (INSERT INTO gc_t (v, tag) SELECT v, tag FROM r WHERE v IS DISTINCT FROM 'skip'"
    "  ORDER BY i RETURNING id, v)"
    " SELECT r.i, ins.id, txid_current() FROM r JOIN ins ON ins.v = r.v";

static const char json_sql[] =
    "SELECT (x ->> 'i')::int, coalesce(x ->> 'v', '-'), x::text FROM jsonb_array_elements($1::jsonb) x";

#define MAX_ITEMS 64

struct rec {
    PGconn *check;           /* the test's own connection */
    int answered;
    int order[MAX_ITEMS];    /* item numbers in the order answered */
    int status[MAX_ITEMS];
    bool sent[MAX_ITEMS];
    int row[MAX_ITEMS], nrows[MAX_ITEMS];
    int64_t id[MAX_ITEMS];
    char tx[MAX_ITEMS][24];
    char text[MAX_ITEMS][64];
    bool visible[MAX_ITEMS]; /* the row was committed when its callback ran */
    bool in_add;             /* a tm_gc_add() call is running */
    bool fired_in_add[MAX_ITEMS];
};

struct item {
    struct rec *rec;
    int n;
    char v[32];
};

static struct item items[MAX_ITEMS];

static void on_item(const struct tm_gc_result *r, void *data)
{
    struct item *it = data;
    struct rec *rec = it->rec;

    rec->order[rec->answered++] = it->n;
    rec->status[it->n] = r->status;
    rec->sent[it->n] = r->sent;
    rec->fired_in_add[it->n] = rec->in_add;
    rec->id[it->n] = -1;
    rec->row[it->n] = r->row;
    rec->nrows[it->n] = r->nrows;
    if (r->status == 0 && r->row >= 0) {
        rec->id[it->n] = strtoll(PQgetvalue(r->res, r->row, 1), NULL, 10);
        snprintf(rec->tx[it->n], sizeof(rec->tx[0]), "%s", PQgetvalue(r->res, r->row, 2));
        snprintf(rec->text[it->n], sizeof(rec->text[0]), "%s",
                 PQnfields(r->res) > 2 ? PQgetvalue(r->res, r->row, 2) : "");
    }
    if (rec->check) {
        const char *p[] = {it->v};
        PGresult *res = PQexecParams(rec->check, "SELECT count(*) FROM gc_t WHERE v = $1", 1, NULL,
                                     p, NULL, NULL, 0);
        assert_int_equal(PQresultStatus(res), PGRES_TUPLES_OK);
        rec->visible[it->n] = strcmp(PQgetvalue(res, 0, 0), "1") == 0;
        PQclear(res);
    }
}

static void on_watchdog(uv_timer_t *t)
{
    *(int *)t->data = 1;
}

static void run_until(uv_loop_t *loop, const int *count, int want)
{
    uv_timer_t watchdog;
    int expired = 0;

    uv_timer_init(loop, &watchdog);
    watchdog.data = &expired;
    uv_timer_start(&watchdog, on_watchdog, 20000, 0);
    while (*count < want && !expired)
        uv_run(loop, UV_RUN_ONCE);
    uv_close((uv_handle_t *)&watchdog, NULL);
    uv_run(loop, UV_RUN_NOWAIT);
    assert_false(expired);
}

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

struct env {
    uv_loop_t loop;
    struct tm_pg_pool *pool;
    PGconn *check;
    struct rec rec;
};

static void on_closed(void *data)
{
    (*(int *)data)++;
}

static void env_open(struct env *e, const char *name, unsigned pool_size)
{
    const char *url = tm_test_db_url(name);
    PGresult *res;

    assert_non_null(url);
    memset(e, 0, sizeof(*e));
    assert_int_equal(uv_loop_init(&e->loop), 0);
    e->check = PQconnectdb(url);
    assert_int_equal(PQstatus(e->check), CONNECTION_OK);
    res = PQexec(e->check, "CREATE TABLE gc_t (id bigserial PRIMARY KEY, v text UNIQUE"
                           " CHECK (v <> 'bad'), tag text)");
    assert_int_equal(PQresultStatus(res), PGRES_COMMAND_OK);
    PQclear(res);
    assert_int_equal(tm_pg_pool_create(&e->loop, url, pool_size, NULL, NULL, &e->pool), 0);
    e->rec.check = e->check;
}

static void env_close(struct env *e)
{
    int closed = 0;

    tm_pg_pool_close(e->pool, on_closed, &closed);
    uv_run(&e->loop, UV_RUN_DEFAULT);
    assert_int_equal(closed, 1);
    assert_int_equal(uv_loop_close(&e->loop), 0);
    PQfinish(e->check);
}

static int add(struct env *e, struct tm_gc *gc, int n, const char *v)
{
    const char *values[2];
    int r;

    items[n] = (struct item){.rec = &e->rec, .n = n};
    snprintf(items[n].v, sizeof(items[n].v), "%s", v);
    values[0] = items[n].v;
    values[1] = n % 2 ? NULL : "t\"a\\g"; /* NULL and quoting both travel */
    e->rec.in_add = true;
    r = tm_gc_add(gc, values, uv_now(&e->loop) + 10000, on_item, &items[n]);
    e->rec.in_add = false;
    return r;
}

static int64_t count_rows(PGconn *c, const char *where)
{
    char sql[256];
    PGresult *res;
    int64_t n;

    snprintf(sql, sizeof(sql), "SELECT count(*) FROM gc_t WHERE %s", where);
    res = PQexec(c, sql);
    assert_int_equal(PQresultStatus(res), PGRES_TUPLES_OK);
    n = strtoll(PQgetvalue(res, 0, 0), NULL, 10);
    PQclear(res);
    return n;
}

/* One in flight, batches of 4, two may wait: the first item goes alone at
 * once, the next eight fill two batches behind it, the tenth is refused;
 * answers come in the order of adding, each after its commit, one
 * transaction per batch, ids in the order of adding. */
static void test_order_and_bounds(void **state)
{
    struct env e;
    const struct tm_gc_kind kind = {.name = "t", .sql = insert_sql, .format = TM_GC_ARRAYS,
                                    .nparams = 2, .max_items = 4, .max_bytes = 1 << 20,
                                    .max_inflight = 1, .max_waiting = 2};
    struct tm_gc *gc;
    char v[16];

    (void)state;
    env_open(&e, "gc_order", 2);
    gc = tm_gc_new(&e.loop, e.pool, &kind);
    assert_non_null(gc);
    for (int n = 0; n < 9; n++) {
        snprintf(v, sizeof(v), "v%d", n);
        assert_int_equal(add(&e, gc, n, v), 0);
    }
    assert_int_equal(add(&e, gc, 9, "v9"), -EAGAIN);
    assert_int_equal(tm_gc_pending(gc), 9);
    assert_int_equal(e.rec.answered, 0); /* nothing before its commit */
    run_until(&e.loop, &e.rec.answered, 9);
    for (int n = 0; n < 9; n++) {
        assert_int_equal(e.rec.order[n], n);
        assert_int_equal(e.rec.status[n], 0);
        assert_true(e.rec.visible[n]);
        assert_false(e.rec.fired_in_add[n]);
        if (n > 0)
            assert_true(e.rec.id[n] > e.rec.id[n - 1]);
    }
    /* Batches: {0}, {1..4}, {5..8}. */
    assert_string_not_equal(e.rec.tx[0], e.rec.tx[1]);
    for (int n = 2; n <= 4; n++)
        assert_string_equal(e.rec.tx[n], e.rec.tx[1]);
    assert_string_not_equal(e.rec.tx[5], e.rec.tx[4]);
    for (int n = 6; n <= 8; n++)
        assert_string_equal(e.rec.tx[n], e.rec.tx[5]);
    assert_int_equal(count_rows(e.check, "tag = 't\"a\\g'"), 5);
    assert_int_equal(count_rows(e.check, "tag IS NULL"), 4);
    assert_int_equal(tm_gc_pending(gc), 0);
    /* With the slot free again, an item goes at once. */
    assert_int_equal(add(&e, gc, 9, "v9"), 0);
    run_until(&e.loop, &e.rec.answered, 10);
    assert_int_equal(e.rec.status[9], 0);
    tm_gc_free(gc);
    env_close(&e);
}

/* max_bytes splits batches: an item is 15 bytes of array text (an even
 * one: its tag quoted) or 10 (an odd one: NULL) and a batch holds 30, so
 * two items a batch. */
static void test_byte_bound(void **state)
{
    struct env e;
    const struct tm_gc_kind kind = {.name = "t", .sql = insert_sql, .format = TM_GC_ARRAYS,
                                    .nparams = 2, .max_items = 64, .max_bytes = 30,
                                    .max_inflight = 1, .max_waiting = 8};
    struct tm_gc *gc;
    char v[16];

    (void)state;
    env_open(&e, "gc_bytes", 1);
    gc = tm_gc_new(&e.loop, e.pool, &kind);
    for (int n = 0; n < 7; n++) {
        snprintf(v, sizeof(v), "b%d", n);
        assert_int_equal(add(&e, gc, n, v), 0);
    }
    run_until(&e.loop, &e.rec.answered, 7);
    /* {0}, {1,2}, {3,4}, {5,6}. */
    assert_string_equal(e.rec.tx[1], e.rec.tx[2]);
    assert_string_not_equal(e.rec.tx[2], e.rec.tx[3]);
    assert_string_equal(e.rec.tx[3], e.rec.tx[4]);
    assert_string_equal(e.rec.tx[5], e.rec.tx[6]);
    assert_string_not_equal(e.rec.tx[4], e.rec.tx[5]);
    tm_gc_free(gc);
    env_close(&e);
}

/* A row the statement refuses: only that item gets row -1, the batch
 * commits.  A row the table refuses: the whole batch answers TM_EDB and
 * none of it was written, so each item can go alone (the callers' way). */
static void test_failure_isolation(void **state)
{
    struct env e;
    const struct tm_gc_kind kind = {.name = "t", .sql = insert_sql, .format = TM_GC_ARRAYS,
                                    .nparams = 2, .max_items = 8, .max_bytes = 1 << 20,
                                    .max_inflight = 1, .max_waiting = 2};
    struct tm_gc *gc;

    (void)state;
    env_open(&e, "gc_fail", 1);
    gc = tm_gc_new(&e.loop, e.pool, &kind);
    assert_int_equal(add(&e, gc, 0, "first"), 0); /* alone, in flight */
    assert_int_equal(add(&e, gc, 1, "a1"), 0);
    assert_int_equal(add(&e, gc, 2, "skip"), 0);
    assert_int_equal(add(&e, gc, 3, "a3"), 0);
    run_until(&e.loop, &e.rec.answered, 4);
    assert_int_equal(e.rec.status[2], 0);
    assert_int_equal(e.rec.id[2], -1);
    assert_true(e.rec.id[1] > 0 && e.rec.id[3] > e.rec.id[1]);
    assert_string_equal(e.rec.tx[1], e.rec.tx[3]);

    assert_int_equal(add(&e, gc, 4, "first2"), 0);
    assert_int_equal(add(&e, gc, 5, "c5"), 0);
    assert_int_equal(add(&e, gc, 6, "bad"), 0);
    assert_int_equal(add(&e, gc, 7, "c7"), 0);
    run_until(&e.loop, &e.rec.answered, 8);
    assert_int_equal(e.rec.status[4], 0);
    for (int n = 5; n <= 7; n++) {
        assert_int_equal(e.rec.status[n], TM_EDB);
        assert_true(e.rec.sent[n]);
        assert_false(e.rec.visible[n]);
    }
    assert_int_equal(count_rows(e.check, "v IN ('c5', 'bad', 'c7')"), 0);
    /* One by one, the good ones go in and the bad one alone fails. */
    assert_int_equal(add(&e, gc, 8, "c5"), 0);
    run_until(&e.loop, &e.rec.answered, 9);
    assert_int_equal(add(&e, gc, 9, "bad"), 0);
    run_until(&e.loop, &e.rec.answered, 10);
    assert_int_equal(add(&e, gc, 10, "c7"), 0);
    run_until(&e.loop, &e.rec.answered, 11);
    assert_int_equal(e.rec.status[8], 0);
    assert_int_equal(e.rec.status[9], TM_EDB);
    assert_int_equal(e.rec.status[10], 0);
    assert_int_equal(count_rows(e.check, "v IN ('c5', 'bad', 'c7')"), 2);
    tm_gc_free(gc);
    env_close(&e);
}

/* The JSON form: each object gets its ordinal as "i", an empty one too. */
static void test_json_items(void **state)
{
    struct env e;
    const struct tm_gc_kind kind = {.name = "j", .sql = json_sql, .format = TM_GC_JSON,
                                    .nparams = 1, .max_items = 8, .max_bytes = 1 << 20,
                                    .max_inflight = 1, .max_waiting = 1};
    struct tm_gc *gc;
    const char *docs[] = {"{\"v\":\"x\"}", "{ \"v\" : \"y\" }", "{}", "{\"v\":\"q\\\"z\"}"};
    const char *values[1];

    (void)state;
    env_open(&e, "gc_json", 1);
    e.rec.check = NULL;
    gc = tm_gc_new(&e.loop, e.pool, &kind);
    values[0] = "[1]";
    assert_int_equal(tm_gc_add(gc, values, uv_now(&e.loop) + 10000, on_item, &items[0]), TM_EINVAL);
    for (int n = 0; n < 4; n++) {
        items[n] = (struct item){.rec = &e.rec, .n = n};
        values[0] = docs[n];
        assert_int_equal(tm_gc_add(gc, values, uv_now(&e.loop) + 10000, on_item, &items[n]), 0);
    }
    run_until(&e.loop, &e.rec.answered, 4);
    /* Item 0 went alone: its ordinal is 1 like item 1's, in another batch. */
    assert_string_equal(e.rec.text[0], "{\"i\": 1, \"v\": \"x\"}");
    assert_string_equal(e.rec.text[1], "{\"i\": 1, \"v\": \"y\"}");
    assert_string_equal(e.rec.text[2], "{\"i\": 2}");
    assert_string_equal(e.rec.text[3], "{\"i\": 3, \"v\": \"q\\\"z\"}");
    tm_gc_free(gc);
    env_close(&e);
}

/* A kind with blob: each item's bytes (NUL and 0xff included, or none)
 * reach the statement as one binary bytea, in the items' order, and each
 * item finds its own from the lengths of those before it. */
static const char blob_sql[] =
    "SELECT o, 0, encode(substring($2::bytea FROM (p - n + 1)::int FOR n), 'hex') FROM"
    " (SELECT (x ->> 'i')::int AS o, (x ->> 'n')::int AS n,"
    "   sum((x ->> 'n')::int) OVER (ORDER BY (x ->> 'i')::int) AS p"
    "  FROM jsonb_array_elements($1::jsonb) x) s ORDER BY o";

static void test_blob_items(void **state)
{
    struct env e;
    const struct tm_gc_kind kind = {.name = "b", .sql = blob_sql, .format = TM_GC_JSON,
                                    .nparams = 1, .max_items = 8, .max_bytes = 1 << 20,
                                    .max_inflight = 1, .max_waiting = 1, .blob = true};
    const struct tm_gc_kind plain = {.name = "p", .sql = json_sql, .format = TM_GC_JSON,
                                     .nparams = 1, .max_items = 8, .max_bytes = 1 << 20,
                                     .max_inflight = 1, .max_waiting = 1};
    struct tm_gc *gc, *gc_plain;
    static const unsigned char bytes[][3] = {{0x00, 0x01}, {0xff}, {0}, {'a', 'b', 'c'}};
    static const size_t lens[] = {2, 1, 0, 3};
    const char *docs[] = {"{\"n\":2}", "{\"n\":1}", "{\"n\":0}", "{\"n\":3}"};
    const char *values[1];

    (void)state;
    env_open(&e, "gc_blob", 1);
    e.rec.check = NULL;
    gc = tm_gc_new(&e.loop, e.pool, &kind);
    gc_plain = tm_gc_new(&e.loop, e.pool, &plain);
    values[0] = docs[0];
    /* Bytes for a kind that takes none are refused, not dropped. */
    assert_int_equal(tm_gc_add_blob(gc_plain, values, bytes[0], 2, uv_now(&e.loop) + 10000, on_item, &items[0]),
                     TM_EINVAL);
    for (int n = 0; n < 4; n++) {
        items[n] = (struct item){.rec = &e.rec, .n = n};
        values[0] = docs[n];
        assert_int_equal(tm_gc_add_blob(gc, values, bytes[n], lens[n], uv_now(&e.loop) + 10000, on_item, &items[n]),
                         0);
    }
    run_until(&e.loop, &e.rec.answered, 4);
    for (int n = 0; n < 4; n++)
        assert_int_equal(e.rec.status[n], 0);
    assert_string_equal(e.rec.text[0], "0001");
    assert_string_equal(e.rec.text[1], "ff");
    assert_string_equal(e.rec.text[2], "");
    assert_string_equal(e.rec.text[3], "616263");
    tm_gc_free(gc);
    tm_gc_free(gc_plain);
    env_close(&e);
}

/* Never sent: a deadline already past, and a pool that knows the database
 * is gone, answer at once with sent false; tm_gc_free() cancels what waits
 * and lets what is in flight finish. */
static void test_not_sent(void **state)
{
    struct env e;
    const struct tm_gc_kind kind = {.name = "t", .sql = insert_sql, .format = TM_GC_ARRAYS,
                                    .nparams = 2, .max_items = 4, .max_bytes = 1 << 20,
                                    .max_inflight = 1, .max_waiting = 1};
    struct tm_gc *gc;
    const char *values[2] = {"late", NULL};

    (void)state;
    env_open(&e, "gc_unsent", 1);
    gc = tm_gc_new(&e.loop, e.pool, &kind);
    items[0] = (struct item){.rec = &e.rec, .n = 0};
    snprintf(items[0].v, sizeof(items[0].v), "late");
    e.rec.in_add = true;
    assert_int_equal(tm_gc_add(gc, values, uv_now(&e.loop), on_item, &items[0]), 0);
    e.rec.in_add = false;
    assert_int_equal(e.rec.answered, 1);
    assert_int_equal(e.rec.status[0], -ETIMEDOUT);
    assert_false(e.rec.sent[0]);
    assert_true(e.rec.fired_in_add[0]);

    assert_int_equal(add(&e, gc, 1, "w1"), 0); /* in flight */
    assert_int_equal(add(&e, gc, 2, "w2"), 0); /* waiting */
    tm_gc_free(gc);
    assert_int_equal(e.rec.answered, 2);
    assert_int_equal(e.rec.status[2], TM_ECANCELED);
    assert_false(e.rec.sent[2]);
    run_until(&e.loop, &e.rec.answered, 3);
    assert_int_equal(e.rec.status[1], 0);
    assert_true(e.rec.visible[1]);
    env_close(&e);

    /* A pool whose only member cannot connect. */
    struct tm_pg_pool *down = NULL;
    uv_loop_t loop;
    int closed = 0;
    struct rec rec = {0};

    assert_int_equal(uv_loop_init(&loop), 0);
    assert_int_equal(tm_pg_pool_create(&loop, "postgresql://127.0.0.1:1/x?connect_timeout=2", 1,
                                       NULL, NULL, &down),
                     0);
    for (int i = 0; i < 200 && !tm_pg_pool_down(down); i++)
        uv_run(&loop, UV_RUN_ONCE);
    assert_true(tm_pg_pool_down(down));
    gc = tm_gc_new(&loop, down, &kind);
    items[3] = (struct item){.rec = &rec, .n = 3};
    assert_int_equal(tm_gc_add(gc, values, uv_now(&loop) + 10000, on_item, &items[3]), 0);
    assert_int_equal(rec.answered, 1);
    assert_int_equal(rec.status[3], TM_EUNAVAIL);
    assert_false(rec.sent[3]);
    tm_gc_free(gc);
    tm_pg_pool_close(down, on_closed, &closed);
    uv_run(&loop, UV_RUN_DEFAULT);
    assert_int_equal(closed, 1);
    assert_int_equal(uv_loop_close(&loop), 0);
}

/* The statement is prepared on each connection the first time: a prepare
 * the server refuses (its table is missing) answers every item TM_EDB and
 * is tried again with the next batch, which then runs. */
static void test_prepare_refused(void **state)
{
    struct env e;
    const struct tm_gc_kind kind = {.name = "late", .sql =
                                        "SELECT r.i, 0, 0 FROM unnest($1::text[], $2::text[])"
                                        " WITH ORDINALITY AS r(v, tag, i), gc_late",
                                    .format = TM_GC_ARRAYS, .nparams = 2, .max_items = 4,
                                    .max_bytes = 1 << 20, .max_inflight = 1, .max_waiting = 1};
    struct tm_gc *gc;
    PGresult *res;

    (void)state;
    env_open(&e, "gc_prepare", 1);
    e.rec.check = NULL;
    gc = tm_gc_new(&e.loop, e.pool, &kind);
    assert_int_equal(add(&e, gc, 0, "p0"), 0);
    run_until(&e.loop, &e.rec.answered, 1);
    assert_int_equal(e.rec.status[0], TM_EDB);
    assert_true(e.rec.sent[0]);
    res = PQexec(e.check, "CREATE TABLE gc_late AS SELECT 1 AS x");
    assert_int_equal(PQresultStatus(res), PGRES_COMMAND_OK);
    PQclear(res);
    assert_int_equal(add(&e, gc, 1, "p1"), 0);
    assert_int_equal(add(&e, gc, 2, "p2"), 0);
    run_until(&e.loop, &e.rec.answered, 3);
    assert_int_equal(e.rec.status[1], 0);
    assert_int_equal(e.rec.status[2], 0);
    assert_int_equal(e.rec.id[1], 0);
    assert_int_equal(e.rec.id[2], 0);
    tm_gc_free(gc);
    env_close(&e);
}

/* A session that ends takes its prepared statements along: after the
 * server drops the pool's connection, the next batches prepare again on
 * the new one and commit; none is refused for a statement that is gone. */
static void test_prepared_after_reconnect(void **state)
{
    struct env e;
    const struct tm_gc_kind kind = {.name = "t", .sql = insert_sql, .format = TM_GC_ARRAYS,
                                    .nparams = 2, .max_items = 4, .max_bytes = 1 << 20,
                                    .max_inflight = 1, .max_waiting = 1};
    struct tm_gc *gc;
    PGresult *res;
    char v[16];
    int n = 0;

    (void)state;
    env_open(&e, "gc_reconnect", 1);
    gc = tm_gc_new(&e.loop, e.pool, &kind);
    assert_int_equal(add(&e, gc, n, "r0"), 0);
    run_until(&e.loop, &e.rec.answered, ++n);
    assert_int_equal(e.rec.status[0], 0);
    res = PQexec(e.check, "SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
                          " WHERE datname = current_database() AND pid <> pg_backend_pid()");
    assert_int_equal(PQresultStatus(res), PGRES_TUPLES_OK);
    PQclear(res);
    for (; n < 40; n++) {
        snprintf(v, sizeof(v), "r%d", n);
        assert_int_equal(add(&e, gc, n, v), 0);
        run_until(&e.loop, &e.rec.answered, n + 1);
        /* The connection's loss may fail one in flight; never TM_EDB. */
        assert_int_not_equal(e.rec.status[n], TM_EDB);
        if (e.rec.status[n] == 0)
            break;
        run_for(&e.loop, 100); /* the pool reconnects after its backoff */
    }
    assert_true(n < 40);
    assert_int_equal(e.rec.status[n], 0);
    assert_true(e.rec.visible[n]);
    tm_gc_free(gc);
    env_close(&e);
}

/* A statement may answer several rows for an item, together: the item
 * learns the first and how many; an item with none gets row -1. */
static void test_rows_per_item(void **state)
{
    struct env e;
    const struct tm_gc_kind kind = {.name = "m", .sql =
                                        "SELECT (x ->> 'i')::int, g, x::text"
                                        " FROM jsonb_array_elements($1::jsonb) x,"
                                        " generate_series(1, (x ->> 'n')::int) g ORDER BY 1, 2",
                                    .format = TM_GC_JSON, .nparams = 1, .max_items = 8,
                                    .max_bytes = 1 << 20, .max_inflight = 1, .max_waiting = 1};
    const char *docs[] = {"{\"n\":1}", "{\"n\":3}", "{\"n\":0}", "{\"n\":2}"};
    struct tm_gc *gc;

    (void)state;
    env_open(&e, "gc_rows", 1);
    e.rec.check = NULL;
    gc = tm_gc_new(&e.loop, e.pool, &kind);
    for (int n = 0; n < 4; n++) {
        const char *values[1] = {docs[n]};
        items[n] = (struct item){.rec = &e.rec, .n = n};
        assert_int_equal(tm_gc_add(gc, values, uv_now(&e.loop) + 10000, on_item, &items[n]), 0);
    }
    run_until(&e.loop, &e.rec.answered, 4);
    /* Item 0 alone; items 1..3 in one batch: rows 0-2, none, 3-4. */
    assert_int_equal(e.rec.row[0], 0);
    assert_int_equal(e.rec.nrows[0], 1);
    assert_int_equal(e.rec.row[1], 0);
    assert_int_equal(e.rec.nrows[1], 3);
    assert_int_equal(e.rec.row[2], -1);
    assert_int_equal(e.rec.nrows[2], 0);
    assert_int_equal(e.rec.status[2], 0);
    assert_int_equal(e.rec.row[3], 3);
    assert_int_equal(e.rec.nrows[3], 2);
    tm_gc_free(gc);
    env_close(&e);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_order_and_bounds),
        cmocka_unit_test(test_byte_bound),
        cmocka_unit_test(test_failure_isolation),
        cmocka_unit_test(test_json_items),
        cmocka_unit_test(test_blob_items),
        cmocka_unit_test(test_not_sent),
        cmocka_unit_test(test_prepare_refused),
        cmocka_unit_test(test_prepared_after_reconnect),
        cmocka_unit_test(test_rows_per_item),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
