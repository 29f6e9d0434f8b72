/*
 * tests/unit/io/test_gc_gate.c: the group commit's priority gate
 * (controller/io/group_commit.h, "Priority"), against a real PostgreSQL:
 * a kind that yields sends nothing while its gate is raised and goes on
 * lowering, a kind that does not yield is never held, a raise that is
 * never lowered lets go after its bound (and holds nothing more until the
 * gate is lowered and raised again), and closing a raised gate lets its
 * group commits go.
 *
 * Holding is shown without timing anything: a gate whose bound is a
 * minute holds for the short stretch the loop runs, and a gate whose bound
 * is short is waited on until it lets go (with a watchdog far past it).
 */
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

/* One row per value; each answer row: the ordinal and its transaction. */
static const char insert_sql[] =
    "WITH r AS (SELECT * FROM unnest($1::text[]) WITH ORDINALITY AS r(v, i)),"
    " ins AS (INSERT INTO gate_t (v) SELECT v FROM r ORDER BY i RETURNING v)"
    " SELECT r.i, txid_current() FROM r JOIN ins ON ins.v = r.v";

#define MAX_ITEMS 16
#define LONG_HOLD_MS 60000

struct rec {
    int answered;
    int status[MAX_ITEMS];
    char tx[MAX_ITEMS][24];
};

struct item {
    struct rec *rec;
    int n;
    char v[16];
};

static struct item items[MAX_ITEMS];

static void on_item(const struct tm_gc_result *r, void *data)
{
    struct item *it = data;

    it->rec->answered++;
    it->rec->status[it->n] = r->status;
    if (r->status == 0 && r->row >= 0)
        snprintf(it->rec->tx[it->n], sizeof(it->rec->tx[0]), "%s", PQgetvalue(r->res, r->row, 1));
}

static void on_timer(uv_timer_t *t)
{
    *(int *)t->data = 1;
}

static void run_until(uv_loop_t *loop, const int *count, int want)
{
    uv_timer_t watchdog;
    int expired = 0;

    uv_timer_init(loop, &watchdog);
    watchdog.data = &expired;
    uv_timer_start(&watchdog, on_timer, 20000, 0);
    while (*count < want && !expired)
        uv_run(loop, UV_RUN_ONCE);
    uv_close((uv_handle_t *)&watchdog, NULL);
    uv_run(loop, UV_RUN_NOWAIT);
    assert_false(expired);
}

/* Let the loop run ms: long enough for an unheld batch to come back. */
static void run_for(uv_loop_t *loop, uint64_t ms)
{
    uv_timer_t t;
    int expired = 0;

    uv_timer_init(loop, &t);
    t.data = &expired;
    uv_timer_start(&t, on_timer, ms, 0);
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

static void env_open(struct env *e, const char *name)
{
    const char *url = tm_test_db_url(name);
    PGresult *res;

    assert_non_null(url);
    memset(e, 0, sizeof(*e));
    assert_int_equal(uv_loop_init(&e->loop), 0);
    e->check = PQconnectdb(url);
    assert_int_equal(PQstatus(e->check), CONNECTION_OK);
    res = PQexec(e->check, "CREATE TABLE gate_t (v text PRIMARY KEY)");
    assert_int_equal(PQresultStatus(res), PGRES_COMMAND_OK);
    PQclear(res);
    assert_int_equal(tm_pg_pool_create(&e->loop, url, 2, NULL, NULL, &e->pool), 0);
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

static void add(struct env *e, struct tm_gc *gc, int n)
{
    const char *values[1];

    items[n] = (struct item){.rec = &e->rec, .n = n};
    snprintf(items[n].v, sizeof(items[n].v), "v%d", n);
    values[0] = items[n].v;
    assert_int_equal(tm_gc_add(gc, values, uv_now(&e->loop) + LONG_HOLD_MS, on_item, &items[n]), 0);
}

static int64_t rows(struct env *e)
{
    PGresult *res = PQexec(e->check, "SELECT count(*) FROM gate_t");
    int64_t n;

    assert_int_equal(PQresultStatus(res), PGRES_TUPLES_OK);
    n = strtoll(PQgetvalue(res, 0, 0), NULL, 10);
    PQclear(res);
    return n;
}

static const struct tm_gc_kind low_kind = {.name = "low", .sql = insert_sql, .format = TM_GC_ARRAYS,
                                           .nparams = 1, .max_items = 8, .max_bytes = 1 << 20,
                                           .max_inflight = 1, .max_waiting = 2, .yields = true};
static const struct tm_gc_kind high_kind = {.name = "high", .sql = insert_sql, .format = TM_GC_ARRAYS,
                                            .nparams = 1, .max_items = 8, .max_bytes = 1 << 20,
                                            .max_inflight = 1, .max_waiting = 2};

/* A batch sent before the raise is not recalled (the gate counts it in
 * flight until it is back); raised, the yielding kind's items wait
 * (nothing written, nothing answered) and share one batch; lowered: they
 * go, in one transaction. */
static void test_held_while_raised(void **state)
{
    struct env e;
    struct tm_gc_gate *gate;
    struct tm_gc *gc;

    (void)state;
    env_open(&e, "gate_held");
    gate = tm_gc_gate_new(&e.loop, LONG_HOLD_MS);
    assert_non_null(gate);
    gc = tm_gc_new(&e.loop, e.pool, &low_kind);
    assert_non_null(gc);
    tm_gc_set_gate(gc, gate);
    add(&e, gc, 0);
    assert_int_equal(tm_gc_gate_inflight(gate), 1);
    tm_gc_gate_raise(gate);
    assert_true(tm_gc_gate_holding(gate));
    for (int n = 1; n < 4; n++)
        add(&e, gc, n);
    run_until(&e.loop, &e.rec.answered, 1);
    assert_int_equal(e.rec.status[0], 0);
    assert_int_equal(tm_gc_gate_inflight(gate), 0);
    run_for(&e.loop, 300);
    assert_int_equal(e.rec.answered, 1);
    assert_int_equal(tm_gc_pending(gc), 3);
    assert_int_equal(rows(&e), 1);
    tm_gc_gate_lower(gate);
    assert_false(tm_gc_gate_holding(gate));
    run_until(&e.loop, &e.rec.answered, 4);
    for (int n = 1; n < 4; n++) {
        assert_int_equal(e.rec.status[n], 0);
        assert_string_equal(e.rec.tx[n], e.rec.tx[1]);
    }
    assert_string_not_equal(e.rec.tx[1], e.rec.tx[0]);
    assert_int_equal(rows(&e), 4);
    /* Open: an item goes at once. */
    add(&e, gc, 4);
    run_until(&e.loop, &e.rec.answered, 5);
    assert_int_equal(e.rec.status[4], 0);
    assert_int_equal(tm_gc_gate_expired(gate), 0);
    tm_gc_free(gc);
    tm_gc_gate_close(gate);
    env_close(&e);
}

/* A kind that does not yield ignores the gate, raised or not. */
static void test_high_never_held(void **state)
{
    struct env e;
    struct tm_gc_gate *gate;
    struct tm_gc *gc;

    (void)state;
    env_open(&e, "gate_high");
    gate = tm_gc_gate_new(&e.loop, LONG_HOLD_MS);
    gc = tm_gc_new(&e.loop, e.pool, &high_kind);
    tm_gc_set_gate(gc, gate);
    tm_gc_gate_raise(gate);
    add(&e, gc, 0);
    add(&e, gc, 1);
    run_until(&e.loop, &e.rec.answered, 2);
    assert_int_equal(e.rec.status[0], 0);
    assert_int_equal(e.rec.status[1], 0);
    assert_true(tm_gc_gate_holding(gate));
    tm_gc_free(gc);
    tm_gc_gate_close(gate);
    env_close(&e);
}

/* A raise never lowered lets go after its bound; raising again before a
 * lower holds nothing; lowered and raised, it holds again. */
static void test_bound_lets_go(void **state)
{
    struct env e;
    struct tm_gc_gate *gate;
    struct tm_gc *gc;

    (void)state;
    env_open(&e, "gate_bound");
    gate = tm_gc_gate_new(&e.loop, 200);
    gc = tm_gc_new(&e.loop, e.pool, &low_kind);
    tm_gc_set_gate(gc, gate);
    tm_gc_gate_raise(gate);
    add(&e, gc, 0);
    add(&e, gc, 1);
    assert_int_equal(e.rec.answered, 0);
    run_until(&e.loop, &e.rec.answered, 2);
    assert_int_equal(e.rec.status[0], 0);
    assert_int_equal(e.rec.status[1], 0);
    assert_int_equal(tm_gc_gate_expired(gate), 1);
    assert_false(tm_gc_gate_holding(gate));
    tm_gc_gate_raise(gate);
    assert_false(tm_gc_gate_holding(gate));
    add(&e, gc, 2);
    run_until(&e.loop, &e.rec.answered, 3);
    assert_int_equal(e.rec.status[2], 0);
    tm_gc_gate_lower(gate);
    tm_gc_gate_raise(gate);
    assert_true(tm_gc_gate_holding(gate));
    add(&e, gc, 3);
    run_until(&e.loop, &e.rec.answered, 4);
    assert_int_equal(e.rec.status[3], 0);
    assert_int_equal(tm_gc_gate_expired(gate), 2);
    tm_gc_free(gc);
    tm_gc_gate_close(gate);
    env_close(&e);
}

/* Closing a raised gate lets its group commits go, and they outlive it;
 * freeing a group commit first leaves the gate whole. */
static void test_close_lets_go(void **state)
{
    struct env e;
    struct tm_gc_gate *gate;
    struct tm_gc *gc, *early;

    (void)state;
    env_open(&e, "gate_close");
    gate = tm_gc_gate_new(&e.loop, LONG_HOLD_MS);
    gc = tm_gc_new(&e.loop, e.pool, &low_kind);
    early = tm_gc_new(&e.loop, e.pool, &low_kind);
    tm_gc_set_gate(gc, gate);
    tm_gc_set_gate(early, gate);
    tm_gc_free(early);
    tm_gc_gate_raise(gate);
    add(&e, gc, 0);
    run_for(&e.loop, 100);
    assert_int_equal(e.rec.answered, 0);
    tm_gc_gate_close(gate);
    run_until(&e.loop, &e.rec.answered, 1);
    assert_int_equal(e.rec.status[0], 0);
    add(&e, gc, 1);
    run_until(&e.loop, &e.rec.answered, 2);
    assert_int_equal(e.rec.status[1], 0);
    tm_gc_free(gc);
    env_close(&e);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_held_while_raised),
        cmocka_unit_test(test_high_never_held),
        cmocka_unit_test(test_bound_lets_go),
        cmocka_unit_test(test_close_lets_go),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
