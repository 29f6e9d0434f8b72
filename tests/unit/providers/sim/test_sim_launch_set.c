/*
 * tests/unit/providers/sim/test_sim_launch_set.c: a gang's set on the sim
 * provider in memory mode, all or none: refused whole (TM_EQUOTA) when the
 * type has no room for every member, nothing left alive; made whole in
 * one zone otherwise; the callback never fires inside the call.
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
#include "providers/sim/sim_provider.h"
#include "providers/sim/simcloud.h"

struct clock {
    int64_t ms;
};

static int64_t clock_now(void *c) { return ((struct clock *)c)->ms; }

static int in_call;

struct result {
    int calls, status;
    size_t n;
    struct tm_instance inst[4];
};

static void on_set(int status, const struct tm_instance *insts, size_t n, void *data)
{
    struct result *r = data;
    assert_int_equal(in_call, 0);
    r->calls++;
    r->status = status;
    r->n = n;
    for (size_t i = 0; i < n && i < 4; i++)
        r->inst[i] = insts[i];
}

static void on_closed(void *data) { (*(int *)data)++; }

static int set_wait(uv_loop_t *loop, struct tm_provider *p, const char *stem, size_t n,
                    struct result *r)
{
    struct tm_launch_request reqs[4];
    char tokens[4][TM_ID_MAX];
    int rc;

    memset(r, 0, sizeof(*r));
    for (size_t k = 0; k < n; k++) {
        tm_launch_member_token(stem, (unsigned)k, tokens[k]);
        reqs[k] = (struct tm_launch_request){.cluster = "c1", .pool = "gpu", .node_id = (int64_t)(20 + k),
                                             .token = tokens[k], .instance_type = "sim.8x-a100",
                                             .zone = "sim-b", .capacity = TM_CAPACITY_ON_DEMAND};
    }
    struct tm_launch_set set = {.reqs = reqs, .n = n, .set_token = stem};
    in_call = 1;
    rc = p->ops->launch_set(p, &set, on_set, r);
    in_call = 0;
    assert_int_equal(rc, 0);
    assert_int_equal(r->calls, 0);
    while (r->calls == 0)
        uv_run(loop, UV_RUN_ONCE);
    assert_int_equal(r->calls, 1);
    return r->status;
}

static void test_sim_set_all_or_none(void **state)
{
    uv_loop_t loop;
    struct tm_simcloud_params params;
    struct tm_provider *p = NULL;
    struct clock clk = {1000};
    struct result r;
    int closed = 0;
    (void)state;

    tm_simcloud_params_init(&params);
    params.ntypes = 1;
    snprintf(params.types[0].name, TM_ID_MAX, "sim.8x-a100");
    params.types[0].gpus = 8;
    snprintf(params.types[0].gpu_model, TM_ID_MAX, "A100");
    params.types[0].on_demand_uusd_per_hour = 32770000;
    params.types[0].capacity = 2;
    params.nzones = 2;
    snprintf(params.zones[0], TM_ID_MAX, "sim-a");
    snprintf(params.zones[1], TM_ID_MAX, "sim-b");
    assert_int_equal(uv_loop_init(&loop), 0);
    assert_int_equal(tm_sim_provider_create_memory(&loop, &params, clock_now, &clk, &p), 0);
    assert_non_null(p->ops->launch_set);

    /* 3 members, room for 2: none made */
    assert_int_equal(set_wait(&loop, p, "c1-gpu-1000-0", 3, &r), TM_EQUOTA);
    assert_int_equal(r.n, 0);
    assert_int_equal(tm_simcloud_count_alive(tm_sim_provider_cloud(p), "sim.8x-a100", clk.ms), 0);

    /* 2 members: both, in order, in the set's zone */
    assert_int_equal(set_wait(&loop, p, "c1-gpu-1000-1", 2, &r), 0);
    assert_int_equal(r.n, 2);
    for (int k = 0; k < 2; k++) {
        assert_int_equal(r.inst[k].node_id, 20 + k);
        assert_string_equal(r.inst[k].zone, "sim-b");
    }
    assert_string_not_equal(r.inst[0].id, r.inst[1].id);
    assert_int_equal(tm_simcloud_count_alive(tm_sim_provider_cloud(p), "sim.8x-a100", clk.ms), 2);

    /* the type full now: a set of 1 is refused */
    assert_int_equal(set_wait(&loop, p, "c1-gpu-1000-2", 1, &r), TM_EQUOTA);

    p->ops->close(p, on_closed, &closed);
    while (!closed)
        uv_run(&loop, UV_RUN_ONCE);
    assert_int_equal(uv_run(&loop, UV_RUN_DEFAULT), 0);
    assert_int_equal(uv_loop_close(&loop), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sim_set_all_or_none),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
