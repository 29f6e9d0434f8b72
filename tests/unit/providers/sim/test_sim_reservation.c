/*
 * tests/unit/providers/sim/test_sim_reservation.c: reserved capacity on
 * the simulated cloud, through the launch engine, in both of the sim
 * provider's modes (in memory, as replay runs it, and in PostgreSQL, as
 * the live controller does): launches go into the named reservation, only
 * inside its term and up to its count, a full one falls over to the open
 * market (or fails, for a pool with reservation_fallback false), a
 * relaunch of a token is the same instance, and a block's instances end
 * before the block does.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>
#include <uv.h>

#include "core/err.h"
#include "providers/sim/simcloud.h"
#include "providers/sim/sim_provider.h"
#include "tests/lib/tm_test.h"

#define HOUR (3600LL * 1000)

struct clock {
    int64_t ms;
};

static int64_t clock_now(void *c) { return ((struct clock *)c)->ms; }

struct result {
    int calls;
    int status;
    struct tm_instance inst;
};

static void on_launch(int status, const struct tm_instance *inst, void *data)
{
    struct result *r = data;

    r->calls++;
    r->status = status;
    if (status == 0)
        r->inst = *inst;
}

static void on_closed(void *data) { (*(int *)data)++; }

static void wait_for(uv_loop_t *loop, const int *calls, int want)
{
    while (*calls < want) {
        uv_run(loop, UV_RUN_NOWAIT);
        if (*calls >= want)
            break;
        assert_true(uv_run(loop, UV_RUN_ONCE) != 0 || *calls >= want);
    }
}

/* One type (capacity 1 on the open market), two zones; pool "res" holds
 * reservation r1 (2 instances in sim-b from hour 10 to hour 20) and block
 * b1 (1 instance in sim-a from hour 10 to hour 12); pool "only" holds r2 (1
 * instance) and may buy nothing else. */
static void params_of(struct tm_simcloud_params *p)
{
    tm_simcloud_params_init(p);
    p->ntypes = 1;
    snprintf(p->types[0].name, TM_ID_MAX, "sim.8x-a100");
    p->types[0].gpus = 8;
    snprintf(p->types[0].gpu_model, TM_ID_MAX, "A100");
    p->types[0].on_demand_uusd_per_hour = 32770000;
    p->types[0].capacity = 1;
    p->nzones = 2;
    snprintf(p->zones[0], TM_ID_MAX, "sim-a");
    snprintf(p->zones[1], TM_ID_MAX, "sim-b");
    p->boot_delay_ms = 1000;
    p->spot_notice_ms = 120000;
    p->nreservations = 3;
    p->reservations[0] = (struct tm_sim_reservation){
        .id = "r1", .pool = "res", .instance_type = "sim.8x-a100", .zone = "sim-b", .count = 2,
        .start_ms = 10 * HOUR, .end_ms = 20 * HOUR};
    p->reservations[1] = (struct tm_sim_reservation){
        .id = "b1", .pool = "res", .instance_type = "sim.8x-a100", .zone = "sim-a", .count = 1,
        .start_ms = 10 * HOUR, .end_ms = 12 * HOUR, .block = true};
    p->reservations[2] = (struct tm_sim_reservation){
        .id = "r2", .pool = "only", .instance_type = "sim.8x-a100", .zone = "sim-a", .count = 1,
        .start_ms = 10 * HOUR, .end_ms = 20 * HOUR, .only = true};
}

static int launch_wait(uv_loop_t *loop, struct tm_provider *p, const char *pool, const char *token,
                       struct result *r)
{
    const struct tm_launch_request rq = {
        .cluster = "c1", .pool = pool, .node_id = 1, .token = token,
        .instance_type = "sim.8x-a100", .zone = "", .capacity = TM_CAPACITY_ON_DEMAND,
    };

    memset(r, 0, sizeof(*r));
    assert_int_equal(p->ops->launch(p, &rq, on_launch, r), 0);
    wait_for(loop, &r->calls, 1);
    return r->status;
}

/* The instance id launched into a reservation, "" none (memory mode can
 * read its row; pg mode tells it by zone, each reservation having its own). */
static void exercise(uv_loop_t *loop, struct tm_provider *p, struct clock *clk)
{
    struct tm_simcloud *sc = tm_sim_provider_cloud(p);
    struct result a, b, c, d;

    /* Before the term: the open market (capacity 1). */
    clk->ms = 9 * HOUR;
    assert_int_equal(launch_wait(loop, p, "res", "t0", &a), 0);
    if (sc)
        assert_string_equal(tm_simcloud_find(sc, a.inst.id)->reservation, "");
    /* In the term: the reservations, r1's zone and the block's, the block
     * first only by table order; the open market is full (t0). */
    clk->ms = 10 * HOUR + 1;
    assert_int_equal(launch_wait(loop, p, "res", "t1", &a), 0);
    assert_int_equal(launch_wait(loop, p, "res", "t2", &b), 0);
    assert_int_equal(launch_wait(loop, p, "res", "t3", &c), 0);
    assert_string_equal(a.inst.zone, "sim-b");
    assert_string_equal(b.inst.zone, "sim-b");
    assert_string_equal(c.inst.zone, "sim-a");
    assert_int_equal(c.inst.capacity, TM_CAPACITY_ON_DEMAND);
    if (sc) {
        assert_string_equal(tm_simcloud_find(sc, a.inst.id)->reservation, "r1");
        assert_string_equal(tm_simcloud_find(sc, c.inst.id)->reservation, "b1");
    }
    /* The same token is the same instance, full reservations or not. */
    assert_int_equal(launch_wait(loop, p, "res", "t1", &d), 0);
    assert_string_equal(d.inst.id, a.inst.id);
    /* Every reservation full and the market full: no capacity. */
    assert_int_equal(launch_wait(loop, p, "res", "t4", &d), TM_EQUOTA);
    /* The block's instance ends before the block (its last 30 minutes). */
    clk->ms = 12 * HOUR - 30 * 60 * 1000;
    assert_int_equal(launch_wait(loop, p, "res", "t3", &d), 0);
    assert_int_equal(d.inst.state, TM_INSTANCE_TERMINATED);
    assert_true(d.inst.interrupted);
    /* A pool that buys nothing past its reservation: one, then none,
     * though the market would have room once t0 is gone. */
    assert_int_equal(launch_wait(loop, p, "only", "o1", &a), 0);
    assert_string_equal(a.inst.zone, "sim-a");
    assert_int_equal(launch_wait(loop, p, "only", "o2", &b), TM_EQUOTA);
    /* After the term: the market again (t0 still holds it: no room). */
    clk->ms = 21 * HOUR;
    assert_int_equal(launch_wait(loop, p, "res", "t5", &a), TM_EQUOTA);
}

static void close_provider(uv_loop_t *loop, struct tm_provider *p)
{
    int closed = 0;

    p->ops->close(p, on_closed, &closed);
    wait_for(loop, &closed, 1);
    assert_int_equal(uv_run(loop, UV_RUN_DEFAULT), 0);
}

static void test_memory(void **state)
{
    uv_loop_t loop;
    struct tm_simcloud_params params;
    struct tm_provider *p = NULL;
    struct clock clk = {0};

    (void)state;
    params_of(&params);
    assert_int_equal(uv_loop_init(&loop), 0);
    assert_int_equal(tm_sim_provider_create_memory(&loop, &params, clock_now, &clk, &p), 0);
    exercise(&loop, p, &clk);
    close_provider(&loop, p);
    assert_int_equal(uv_loop_close(&loop), 0);
}

static void test_pg(void **state)
{
    uv_loop_t loop;
    struct tm_simcloud_params params;
    struct tm_provider *p = NULL;
    struct clock clk = {0};
    const char *url = tm_test_db_url("test_sim_reservation_pg");

    (void)state;
    if (!url)
        fail_msg("no test database: run through ctest (fixture pg)");
    params_of(&params);
    assert_int_equal(uv_loop_init(&loop), 0);
    assert_int_equal(tm_sim_provider_create_pg(&loop, &params, url, clock_now, &clk, &p), 0);
    exercise(&loop, p, &clk);
    close_provider(&loop, p);
    assert_int_equal(uv_loop_close(&loop), 0);
}

/* The pure plan: the reservation's zone and market, its term, its type. */
static void test_plan(void **state)
{
    struct tm_simcloud_params params;
    struct tm_sim_instance row;
    struct tm_launch_request rq = {
        .cluster = "c1", .pool = "res", .node_id = 1, .token = "x",
        .instance_type = "sim.8x-a100", .zone = "", .capacity = TM_CAPACITY_SPOT,
    };

    (void)state;
    params_of(&params);
    assert_int_equal(tm_sim_reservation_plan(&params, &rq, "r1", 10 * HOUR, &row), 0);
    assert_string_equal(row.zone, "sim-b");
    assert_int_equal(row.capacity, TM_CAPACITY_ON_DEMAND);
    assert_int_equal(row.interrupt_ms, TM_SIM_NEVER);
    assert_int_equal(tm_sim_reservation_plan(&params, &rq, "b1", 10 * HOUR, &row), 0);
    assert_int_equal(row.interrupt_ms, 12 * HOUR - TM_SIM_BLOCK_END_MS);
    assert_int_equal(tm_sim_reservation_plan(&params, &rq, "r1", 20 * HOUR, &row), TM_EQUOTA);
    assert_int_equal(tm_sim_reservation_plan(&params, &rq, "r9", 10 * HOUR, &row), TM_ENOTFOUND);
    rq.zone = "sim-a";
    assert_int_equal(tm_sim_reservation_plan(&params, &rq, "r1", 10 * HOUR, &row), TM_EINVAL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_plan),
        cmocka_unit_test(test_memory),
        cmocka_unit_test(test_pg),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
