/*
 * tests/unit/reconcile/test_reconcile_restart.c: consolidation by restart
 * in the live tick (controller/reconcile/moves.c, plan_restart), with known
 * answers on hand-built snapshots: the "restart" op the pure pass writes
 * for tarmac_apply (migrations/0015_restart.sql), and the same decision
 * the planner makes for the same snapshot when called directly.
 *
 * One on-demand pool of 8-GPU A100 nodes at $32 an hour (it also gets the
 * preemptible work: no spot pool).  Node 1 runs a non-preemptible 6-GPU job
 * with 10 hours of work; node 2 one preemptible 1-GPU job that cannot
 * checkpoint, 10 minutes into a 4-hour estimate.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "controller/fleet/planner.h"
#include "controller/reconcile/reconcile.h"
#include "core/config.h"
#include "tests/lib/snap_fixture.h"

#define CONFIG(extra)                                                                   \
    SNAP_FIXTURE_YAML_HEAD("unit")                                                      \
    "providers:\n"                                                                      \
    SNAP_FIXTURE_YAML_SIM("sim", "r1")                                                  \
    "pools:\n"                                                                          \
    "  - {name: od8, provider: sim, zones: [z1], instance_types: [sim.8x], gpu_model: A100," \
    "     gpus_per_node: 8, capacity_type: on_demand, min_nodes: 0, max_nodes: 4,"      \
    "     idle_grace: 60s" extra "}\n"

static const char config_plain[] = CONFIG("");
static const char config_off[] = CONFIG(", consolidate_restart: false");
static const char config_budget[] = CONFIG(", disruption_nodes: 0, disruption_interval: 10m");

#define NOW 1000000000
#define HOUR 3600000LL

struct fixture {
    SNAP_FIXTURE_MEMBERS(16);
    SNAP_FIXTURE_PASS_MEMBERS;
    struct tm_snap_disruption disruptions[4];
};

static int setup_with(void **state, const char *yaml)
{
    static struct fixture f;
    memset(&f, 0, sizeof(f));
    if (SNAP_FIXTURE_PASS_INIT(&f, yaml) < 0)
        return -1;
    f.snap.disruptions = f.disruptions;
    *state = &f;
    return 0;
}

static int setup(void **state)
{
    return setup_with(state, config_plain);
}

static int setup_off(void **state)
{
    return setup_with(state, config_off);
}

static int setup_budget(void **state)
{
    return setup_with(state, config_budget);
}

static int teardown(void **state)
{
    SNAP_FIXTURE_PASS_RELEASE((struct fixture *)*state);
    return 0;
}

static void add_node(struct fixture *f, int64_t id)
{
    struct tm_snap_node *n = &f->nodes[f->snap.nnodes++];
    *n = (struct tm_snap_node){.id = id, .pool = 0, .gpus = 8, .cpu_milli = 96000,
                               .memory_mib = 1000000, .state = TM_NODE_READY,
                               .requested_ms = NOW - HOUR, .capacity = TM_CAPACITY_ON_DEMAND,
                               .price_uusd_per_hour = 32000000, .billed = true};
    snprintf(n->token, sizeof(n->token), "tok-%" PRId64, id);
    snprintf(n->instance_id, sizeof(n->instance_id), "i-%" PRId64, id);
    snprintf(n->instance_type, sizeof(n->instance_type), "sim.8x");
    snprintf(n->zone, sizeof(n->zone), "z1");
    snprintf(n->gpu_model, sizeof(n->gpu_model), "A100");
    struct tm_instance *i = &f->inst[f->obs.n++];
    memset(i, 0, sizeof(*i));
    snprintf(i->id, sizeof(i->id), "i-%" PRId64, id);
    snprintf(i->token, sizeof(i->token), "tok-%" PRId64, id);
    snprintf(i->pool, sizeof(i->pool), "od8");
    snprintf(i->zone, sizeof(i->zone), "z1");
    i->state = TM_INSTANCE_RUNNING;
}

/* A job running on node since 10 minutes ago, on GPUs `mask`. */
static struct tm_snap_job *run_job(struct fixture *f, int64_t id, int64_t node, uint32_t mask,
                                   bool preemptible, int64_t estimate_ms, int attempts)
{
    struct tm_snap_job *j = &f->jobs[f->snap.njobs++];
    *j = (struct tm_snap_job){.id = id, .pool = -1, .gpus = __builtin_popcount(mask), .gpu_milli = 1000,
                              .nodes = 1, .preemptible = preemptible, .state = TM_JOB_RUNNING,
                              .estimate_ms = estimate_ms, .submitted_ms = NOW - 2 * HOUR,
                              .node_id = node, .started_ms = NOW - 600000, .attempts = attempts};
    snprintf(j->team, sizeof(j->team), "t");
    f->allocs[f->snap.nallocs++] = (struct tm_snap_alloc){.job_id = id, .node_id = node,
                                                          .gpu_mask = mask, .gpu_milli = 1000};
    return j;
}

static void world(struct fixture *f, int attempts)
{
    add_node(f, 1);
    add_node(f, 2);
    run_job(f, 100, 1, 0x3f, false, 10 * HOUR + 600000, 1);
    run_job(f, 200, 2, 0x1, true, 4 * HOUR, attempts);
}

static void run(struct fixture *f)
{
    struct tm_reconcile_input in = {.cfg = &f->cfg, .snap = &f->snap, .observed = &f->obs,
                                    .nobserved = 1, .now_ms = NOW, .policy = TM_POLICY_FIFO};
    tm_rc_plan_release(&f->plan);
    assert_int_equal(tm_reconcile(&in, &f->plan), 0);
}

static double num(const cJSON *a, const char *key)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(a, key);
    assert_true(cJSON_IsNumber(v));
    return v->valuedouble;
}

static const char *str(const cJSON *a, const char *key)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(a, key);
    assert_true(cJSON_IsString(v));
    return v->valuestring;
}

/* The restart op: node 2 cordoned, its job requeued to start over (cause
 * consolidate, next attempt 2), the decision's inputs stating both sums:
 * saved 3 h 50 min x $32 = $122.67, redone 10 GPU-min x $4 = $0.67. */
static void test_restart_op(void **state)
{
    struct fixture *f = *state;
    world(f, 1);
    run(f);
    assert_int_equal(snap_fixture_count_op(f->plan.actions, "restart"), 1);
    assert_int_equal(snap_fixture_count_op(f->plan.actions, "move"), 0);
    const cJSON *a = snap_fixture_nth_op(f->plan.actions, "restart", 0);
    assert_int_equal((int)num(a, "node"), 2);
    assert_non_null(strstr(str(a, "reason"), "consolidate by restart"));
    const cJSON *in = cJSON_GetObjectItemCaseSensitive(a, "inputs");
    assert_string_equal(str(in, "disruption"), "restart");
    assert_string_equal(str(in, "pool"), "od8");
    assert_int_equal((int)num(in, "restarting"), 1);
    assert_int_equal((int)(num(in, "saving_usd") * 100 + 0.5), 12267);
    assert_int_equal((int)(num(in, "redone_usd") * 100 + 0.5), 67);
    const cJSON *jobs = cJSON_GetObjectItemCaseSensitive(a, "jobs");
    assert_int_equal(cJSON_GetArraySize(jobs), 1);
    const cJSON *j = cJSON_GetArrayItem(jobs, 0);
    assert_int_equal((int)num(j, "job"), 200);
    assert_string_equal(str(j, "cause"), "consolidate");
    assert_true(num(j, "started_ms") == NOW - 600000);
    assert_int_equal((int)num(cJSON_GetObjectItemCaseSensitive(j, "inputs"), "next_attempt"), 2);
}

/* The same snapshot through the planner directly, as the elastic replay
 * calls it (controller/replay/elastic.c plan()): the same node, the same
 * sums.  The live tick and the replay share one planner. */
static void test_same_decision_as_the_planner(void **state)
{
    struct fixture *f = *state;
    world(f, 1);
    run(f);
    const cJSON *live = snap_fixture_nth_op(f->plan.actions, "restart", 0);
    assert_non_null(live);

    struct tm_price_table t = {0};
    struct tm_price_type *ty = &t.types[t.ntypes++];
    snprintf(ty->name, sizeof(ty->name), "sim.8x");
    ty->gpus = 8;
    ty->cpu_milli = 96000;
    ty->memory_mib = 1000000;
    ty->on_demand_uusd_per_hour = 32000000;
    ty->spot_uusd_per_hour = 10000000;
    struct tm_planner_node n[2] = {
        {.id = 1, .ready = true, .used_milli = 6000, .free_whole = 2, .jobs = 1,
         .busy_until_ms = NOW + 10 * HOUR},
        {.id = 2, .ready = true, .used_milli = 1000, .free_whole = 7, .jobs = 1, .only_preemptible = true,
         .busy_until_ms = NOW + 4 * HOUR - 600000},
    };
    struct tm_planner_job j[2] = {
        {.id = 100, .gpus = 6, .milli = 6000, .running = true, .node = 0, .remaining_ms = 10 * HOUR,
         .attempts = 1, .ran_ms = 600000},
        {.id = 200, .gpus = 1, .milli = 1000, .preemptible = true, .running = true, .node = 1,
         .remaining_ms = 4 * HOUR - 600000, .attempts = 1, .ran_ms = 600000},
    };
    struct tm_planner_input in = {.now_ms = NOW, .prices = &t, .nodes = n, .nnodes = 2, .jobs = j,
                                  .njobs = 2};
    in.forecast_gpus[0] = in.forecast_gpus[1] = -1;
    in.keep_gpus[0] = in.keep_gpus[1] = -1;
    in.params.boot_ms = 90000;
    in.params.tick_ms = 30000;
    in.params.idle_grace_ms = 60000;
    in.params.max_nodes[0] = 4;
    in.params.disruption_nodes = 100;
    in.params.move_cost_ms = 60000;
    in.params.launch_use_ms = 600000;
    in.params.consolidate_restart = true;
    struct tm_planner_result r = {0};
    assert_int_equal(tm_planner_run(&in, &r), 0);
    const struct tm_planner_action *x = NULL;
    for (size_t k = 0; k < r.nactions; k++)
        if (r.actions[k].kind == TM_PLANNER_RESTART)
            x = &r.actions[k];
    assert_non_null(x);
    assert_int_equal((int)n[x->node].id, (int)num(live, "node"));
    const cJSON *li = cJSON_GetObjectItemCaseSensitive(live, "inputs");
    assert_true(num(li, "saving_usd") == (double)x->saving_uusd / 1e6);
    assert_true(num(li, "redone_usd") == (double)x->cost_uusd / 1e6);
    assert_non_null(strstr(str(live, "reason"), x->reason));
    tm_planner_result_release(&r);
}

/* consolidate_restart: false on the pool: no restart op. */
static void test_pool_forbids(void **state)
{
    struct fixture *f = *state;
    world(f, 1);
    run(f);
    assert_int_equal(snap_fixture_count_op(f->plan.actions, "restart"), 0);
}

/* A disruption budget of 0 nodes per interval: none. */
static void test_disruption_budget(void **state)
{
    struct fixture *f = *state;
    world(f, 1);
    run(f);
    assert_int_equal(snap_fixture_count_op(f->plan.actions, "restart"), 0);
}

/* The attempt counter: a job on its third attempt is not restarted. */
static void test_attempt_cap(void **state)
{
    struct fixture *f = *state;
    world(f, TM_PLANNER_RESTART_ATTEMPTS_MAX);
    run(f);
    assert_int_equal(snap_fixture_count_op(f->plan.actions, "restart"), 0);
}

/* A gang member on the node: never restarted by one node's restart. */
static void test_gang_never(void **state)
{
    struct fixture *f = *state;
    world(f, 1);
    f->jobs[1].nodes = 2;
    run(f);
    assert_int_equal(snap_fixture_count_op(f->plan.actions, "restart"), 0);
}

/* The key: default true (not given), false when given so. */
static void test_config_key(void **state)
{
    struct fixture *f = *state;
    assert_true(f->cfg.pools[0].consolidate_restart);
    assert_false(f->cfg.pools[0].consolidate_restart_set);
}

static void test_config_key_off(void **state)
{
    struct fixture *f = *state;
    assert_false(f->cfg.pools[0].consolidate_restart);
    assert_true(f->cfg.pools[0].consolidate_restart_set);
}

/* Only pools that preemptible work is routed to count as having it: od8
 * alone does; beside a spot pool of its model it does not (the key set
 * there does nothing, and the daemon says so once at start), while the
 * spot pool does. */
static const char config_with_spot[] =
    SNAP_FIXTURE_YAML_HEAD("unit")
    "providers:\n"
    SNAP_FIXTURE_YAML_SIM("sim", "r1")
    "pools:\n"
    "  - {name: od8, provider: sim, zones: [z1], instance_types: [sim.8x], gpu_model: A100,"
    "     gpus_per_node: 8, capacity_type: on_demand, min_nodes: 0, max_nodes: 4,"
    "     consolidate_restart: true}\n"
    "  - {name: spot8, provider: sim, zones: [z1], instance_types: [sim.8x], gpu_model: A100,"
    "     gpus_per_node: 8, capacity_type: spot, min_nodes: 0, max_nodes: 4}\n";

static int setup_with_spot(void **state)
{
    return setup_with(state, config_with_spot);
}

static void test_pool_gets_preemptible(void **state)
{
    struct fixture *f = *state;
    assert_true(tm_reconcile_pool_gets_preemptible(&f->cfg, 0));
}

static void test_pool_beside_spot_gets_none(void **state)
{
    struct fixture *f = *state;
    assert_true(f->cfg.pools[0].consolidate_restart_set);
    assert_false(tm_reconcile_pool_gets_preemptible(&f->cfg, 0));
    assert_true(tm_reconcile_pool_gets_preemptible(&f->cfg, 1));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_restart_op, setup, teardown),
        cmocka_unit_test_setup_teardown(test_same_decision_as_the_planner, setup, teardown),
        cmocka_unit_test_setup_teardown(test_pool_forbids, setup_off, teardown),
        cmocka_unit_test_setup_teardown(test_disruption_budget, setup_budget, teardown),
        cmocka_unit_test_setup_teardown(test_attempt_cap, setup, teardown),
        cmocka_unit_test_setup_teardown(test_gang_never, setup, teardown),
        cmocka_unit_test_setup_teardown(test_config_key, setup, teardown),
        cmocka_unit_test_setup_teardown(test_config_key_off, setup_off, teardown),
        cmocka_unit_test_setup_teardown(test_pool_gets_preemptible, setup, teardown),
        cmocka_unit_test_setup_teardown(test_pool_beside_spot_gets_none, setup_with_spot, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
