/*
 * tests/unit/agent/test_staleness.c: the node agent's side of the pure
 * reconcile pass, as known answers: a silent node goes unreachable, then
 * its jobs are requeued (once per attempt), then it is terminated; a
 * simulated pool's nodes, a node still in its boot allowance and a node
 * that heard from its agent are left alone; idle GPUs give gpu_idle with
 * the pool's action.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "controller/reconcile/reconcile.h"
#include "core/config.h"
#include "tests/lib/snap_fixture.h"

static const char config_yaml[] =
    SNAP_FIXTURE_YAML_HEAD("unit")
    "agent: {unreachable_after: 2m, requeue_after: 5m, terminate_after: 15m, boot_allowance: 10m,"
    " fence_after: 20m}\n"
    "idle_gpu: {threshold: 5, window: 30m}\n"
    "providers:\n"
    SNAP_FIXTURE_YAML_SIM("sim", "r1")
    "pools:\n"
    "  - {name: od, provider: sim, zones: [z1], instance_types: [sim.8x], gpu_model: A100,"
    "     gpus_per_node: 8, capacity_type: on_demand, min_nodes: 1, max_nodes: 2, idle_grace: 60s}\n"
    "  - {name: cut, provider: sim, zones: [z1], instance_types: [sim.8x], gpu_model: A100,"
    "     gpus_per_node: 8, capacity_type: on_demand, min_nodes: 1, max_nodes: 2, idle_grace: 60s,"
    "     idle_job_action: cancel}\n";

#define NOW 1000000000
#define MIN 60000

struct fixture {
    SNAP_FIXTURE_MEMBERS(8);
    SNAP_FIXTURE_PASS_MEMBERS;
    bool real[2];
    struct tm_snap_gpu_use use[16];
};

static int setup(void **state)
{
    static struct fixture f;
    memset(&f, 0, sizeof(f));
    if (SNAP_FIXTURE_PASS_INIT(&f, config_yaml) < 0)
        return -1;
    f.real[0] = f.real[1] = true;
    f.snap.gpu_use = f.use;
    *state = &f;
    return 0;
}

static int teardown(void **state)
{
    SNAP_FIXTURE_PASS_RELEASE((struct fixture *)*state);
    return 0;
}

static struct tm_snap_node *add_node(struct fixture *f, int64_t id, int pool, int64_t last_hb)
{
    struct tm_snap_node *n = &f->nodes[f->snap.nnodes++];
    *n = (struct tm_snap_node){.id = id, .pool = pool, .gpus = 8, .cpu_milli = 96000,
                               .memory_mib = 1000000, .state = TM_NODE_READY,
                               .requested_ms = NOW - 60 * MIN, .billed = true,
                               .last_heartbeat_ms = last_hb, .capacity = TM_CAPACITY_ON_DEMAND};
    snprintf(n->token, sizeof(n->token), "tok-%lld", (long long)id);
    snprintf(n->instance_id, sizeof(n->instance_id), "i-%lld", (long long)id);
    snprintf(n->instance_type, sizeof(n->instance_type), "sim.8x");
    snprintf(n->zone, sizeof(n->zone), "z1");
    snprintf(n->gpu_model, sizeof(n->gpu_model), "A100");
    /* The cloud lists it running: only the agent is silent. */
    struct tm_instance *i = &f->inst[f->obs.n++];
    memset(i, 0, sizeof(*i));
    snprintf(i->id, sizeof(i->id), "i-%lld", (long long)id);
    snprintf(i->token, sizeof(i->token), "tok-%lld", (long long)id);
    snprintf(i->pool, sizeof(i->pool), "%s", f->cfg.pools[pool].name);
    snprintf(i->instance_type, sizeof(i->instance_type), "sim.8x");
    snprintf(i->zone, sizeof(i->zone), "z1");
    i->state = TM_INSTANCE_RUNNING;
    return n;
}

static struct tm_snap_job *add_running(struct fixture *f, int64_t id, int64_t node, uint32_t mask,
                                       int attempts)
{
    struct tm_snap_job *j = &f->jobs[f->snap.njobs++];
    *j = (struct tm_snap_job){.id = id, .pool = -1, .gpus = __builtin_popcount(mask),
                              .gpu_milli = 1000, .nodes = 1, .state = TM_JOB_RUNNING,
                              .submitted_ms = NOW - 120 * MIN, .started_ms = NOW - 100 * MIN,
                              .node_id = node, .attempts = attempts};
    snprintf(j->team, sizeof(j->team), "t");
    f->allocs[f->snap.nallocs++] = (struct tm_snap_alloc){.job_id = id, .node_id = node,
                                                          .gpu_mask = mask, .gpu_milli = 1000};
    return j;
}

static void run(struct fixture *f, int64_t now)
{
    struct tm_reconcile_input in = {.cfg = &f->cfg, .snap = &f->snap, .observed = &f->obs,
                                    .nobserved = 1, .now_ms = now, .policy = TM_POLICY_FIFO,
                                    .pool_real_agent = f->real};
    tm_rc_plan_release(&f->plan);
    assert_int_equal(tm_reconcile(&in, &f->plan), 0);
}

static int count(const struct fixture *f, const char *op, double node)
{
    int n = 0;
    const cJSON *a;
    cJSON_ArrayForEach(a, f->plan.actions) {
        const cJSON *o = cJSON_GetObjectItemCaseSensitive(a, "op");
        const cJSON *k = cJSON_GetObjectItemCaseSensitive(a, "node");
        if (strcmp(o->valuestring, op) == 0 && (node < 0 || (cJSON_IsNumber(k) && k->valuedouble == node)))
            n++;
    }
    return n;
}

static const cJSON *first_op(const struct fixture *f, const char *op)
{
    const cJSON *a;
    cJSON_ArrayForEach(a, f->plan.actions)
        if (strcmp(cJSON_GetObjectItemCaseSensitive(a, "op")->valuestring, op) == 0)
            return a;
    return NULL;
}

/* 1 min silent: nothing; 3 min: unreachable; 6 min: fenced (its instance
 * terminated, its job still allocated); requeued only once the listing
 * says the instance is terminated. */
static void test_silent_node_transitions(void **state)
{
    struct fixture *f = *state;
    add_node(f, 1, 0, NOW - MIN);
    add_running(f, 10, 1, 0x3, 2);

    run(f, NOW);
    assert_int_equal(count(f, "node_unreachable", 1), 0);
    assert_int_equal(count(f, "unreachable_requeue", 1), 0);

    run(f, NOW + 2 * MIN);
    assert_int_equal(count(f, "node_unreachable", 1), 1);
    assert_int_equal(count(f, "unreachable_requeue", 1), 0);
    assert_int_equal(f->plan.unreachable, 1);

    f->nodes[0].unreachable_ms = NOW + 2 * MIN; /* recorded */
    run(f, NOW + 5 * MIN);
    assert_int_equal(count(f, "node_unreachable", 1), 0); /* once */
    /* Fenced, not requeued: the old process may still run. */
    assert_int_equal(count(f, "unreachable_requeue", 1), 0);
    assert_int_equal(count(f, "requeue", 1), 0);
    assert_int_equal(count(f, "fence", 1), 1);
    const cJSON *a = first_op(f, "fence");
    assert_int_equal((int)cJSON_GetObjectItemCaseSensitive(a, "last_heartbeat_ms")->valuedouble,
                     NOW - MIN);
    assert_int_equal((int)f->plan.nterminates, 1);
    assert_string_equal(f->plan.terminates[0].instance_id, "i-1");
    assert_int_equal(count(f, "place", -1), 0);

    /* The fence applied but the controller died before the cloud call:
     * the next pass asks again; nothing is requeued. */
    f->nodes[0].state = TM_NODE_TERMINATING;
    run(f, NOW + 6 * MIN);
    assert_int_equal((int)f->plan.nterminates, 1);
    assert_int_equal(count(f, "requeue", -1), 0);
    assert_int_equal(count(f, "unreachable_requeue", -1), 0);

    /* The cloud is shutting it down. */
    f->inst[0].state = TM_INSTANCE_STOPPING;
    run(f, NOW + 7 * MIN);
    assert_int_equal(count(f, "requeue", -1), 0);
    assert_int_equal(count(f, "unreachable_requeue", -1), 0);
    assert_int_equal(count(f, "node_gone", 1), 0);
    assert_int_equal(count(f, "place", -1), 0);

    /* Long past every bound, still not confirmed: still nothing requeued. */
    run(f, NOW + 90 * MIN);
    assert_int_equal(count(f, "requeue", -1), 0);
    assert_int_equal(count(f, "unreachable_requeue", -1), 0);

    /* Confirmed terminated: the node goes, its job is requeued. */
    f->inst[0].state = TM_INSTANCE_TERMINATED;
    run(f, NOW + 91 * MIN);
    assert_int_equal(count(f, "node_gone", 1), 1);
    assert_int_equal(count(f, "requeue", 1), 1);
    a = first_op(f, "node_gone");
    assert_non_null(strstr(cJSON_GetObjectItemCaseSensitive(a, "reason")->valuestring, "fenced"));
}

/* An empty silent node is not fenced: it is terminated past
 * agent.terminate_after, as before. */
static void test_silent_empty_node_terminated(void **state)
{
    struct fixture *f = *state;
    add_node(f, 1, 0, NOW)->unreachable_ms = NOW + 2 * MIN;
    run(f, NOW + 6 * MIN);
    assert_int_equal(count(f, "fence", 1), 0);
    assert_int_equal(count(f, "terminate", 1), 0);
    run(f, NOW + 15 * MIN);
    assert_int_equal(count(f, "terminate", 1), 1);
    assert_int_equal((int)f->plan.nterminates, 1);
}

/* A provider that cannot fence (fence: false): the node is never
 * terminated for its jobs' sake; they are requeued past agent.fence_after
 * (20 min here), not at requeue_after. */
static void test_unfenceable_waits_for_bound(void **state)
{
    struct fixture *f = *state;
    f->cfg.providers[0].fence = false;
    add_node(f, 1, 0, NOW)->unreachable_ms = NOW + 2 * MIN;
    add_running(f, 10, 1, 0x3, 1);

    run(f, NOW + 6 * MIN);
    assert_int_equal(count(f, "fence", -1), 0);
    assert_int_equal(count(f, "unreachable_requeue", -1), 0);
    run(f, NOW + 19 * MIN);
    assert_int_equal(count(f, "unreachable_requeue", -1), 0);
    assert_int_equal((int)f->plan.nterminates, 0);

    run(f, NOW + 20 * MIN);
    assert_int_equal(count(f, "unreachable_requeue", 1), 1);
    const cJSON *a = first_op(f, "unreachable_requeue");
    const cJSON *in = cJSON_GetObjectItemCaseSensitive(a, "inputs");
    assert_int_equal((int)cJSON_GetObjectItemCaseSensitive(in, "fence_after_ms")->valuedouble, 20 * MIN);
    assert_non_null(strstr(cJSON_GetObjectItemCaseSensitive(a, "reason")->valuestring, "agent.fence_after"));
    assert_int_equal((int)f->plan.nterminates, 0);
}

static struct tm_snap_job *add_gang(struct fixture *f, int64_t id, int64_t n1, int64_t n2)
{
    struct tm_snap_job *j = add_running(f, id, n1, 0x3, 1);
    j->nodes = 2;
    f->allocs[f->snap.nallocs++] = (struct tm_snap_alloc){.job_id = id, .node_id = n2,
                                                          .gpu_mask = 0x3, .gpu_milli = 1000};
    return j;
}

/* A gang on two silent nodes: both fenced; one confirmed terminated first
 * does not requeue the gang while the other may still run its part. */
static void test_gang_waits_for_every_member(void **state)
{
    struct fixture *f = *state;
    add_node(f, 1, 0, NOW)->unreachable_ms = NOW + 2 * MIN;
    add_node(f, 2, 0, NOW)->unreachable_ms = NOW + 2 * MIN;
    add_gang(f, 20, 1, 2);

    run(f, NOW + 6 * MIN);
    assert_int_equal(count(f, "fence", 1), 1);
    assert_int_equal(count(f, "fence", 2), 1);
    assert_int_equal(count(f, "requeue", -1), 0);

    f->nodes[0].state = f->nodes[1].state = TM_NODE_TERMINATING;
    f->inst[0].state = TM_INSTANCE_TERMINATED;
    f->inst[1].state = TM_INSTANCE_STOPPING;
    run(f, NOW + 7 * MIN);
    assert_int_equal(count(f, "requeue", -1), 0);
    assert_int_equal(count(f, "node_gone", -1), 0);
    assert_int_equal(count(f, "place", -1), 0);

    f->inst[1].state = TM_INSTANCE_TERMINATED;
    run(f, NOW + 8 * MIN);
    assert_int_equal(count(f, "node_gone", -1), 2);
    assert_int_equal(count(f, "requeue", -1), 1); /* the gang, once, whole */
}

/* A gang with one member whose instance the cloud took and one member
 * whose agent is silent but not fenced: the gang waits for the fence; a
 * member whose agent still answers does not hold it back. */
static void test_gang_waits_for_silent_member(void **state)
{
    struct fixture *f = *state;
    add_node(f, 1, 0, NOW + 3 * MIN);
    add_node(f, 2, 0, NOW)->unreachable_ms = NOW + 2 * MIN;
    add_gang(f, 20, 1, 2);
    f->inst[0].state = TM_INSTANCE_TERMINATED;
    run(f, NOW + 4 * MIN);
    assert_int_equal(count(f, "node_gone", 1), 0);
    assert_int_equal(count(f, "requeue", -1), 0);

    /* The silent member answers again: nothing holds the gang. */
    f->nodes[1].last_heartbeat_ms = NOW + 4 * MIN;
    f->nodes[1].unreachable_ms = 0;
    run(f, NOW + 4 * MIN);
    assert_int_equal(count(f, "node_gone", 1), 1);
    assert_int_equal(count(f, "requeue", -1), 1);
}

/* A simulated pool (pool_real_agent false) never goes stale. */
static void test_sim_pool_never_stale(void **state)
{
    struct fixture *f = *state;
    f->real[0] = false;
    add_node(f, 1, 0, 0);
    add_running(f, 10, 1, 0x1, 1);
    run(f, NOW + 60 * MIN);
    assert_int_equal(count(f, "node_unreachable", -1), 0);
    assert_int_equal(count(f, "unreachable_requeue", -1), 0);
}

/* Never heard from: counted from its request plus the boot allowance. */
static void test_boot_allowance(void **state)
{
    struct fixture *f = *state;
    struct tm_snap_node *n = add_node(f, 1, 0, 0);
    n->requested_ms = NOW;
    run(f, NOW + 11 * MIN); /* 1 min past the allowance */
    assert_int_equal(count(f, "node_unreachable", 1), 0);
    run(f, NOW + 12 * MIN);
    assert_int_equal(count(f, "node_unreachable", 1), 1);
}

static void add_use(struct fixture *f, int64_t node, int gpu, double max, int64_t first)
{
    f->use[f->snap.ngpu_use++] = (struct tm_snap_gpu_use){
        .node_id = node, .gpu_index = gpu, .max_util = max, .mean_util = max / 2,
        .first_ms = first, .nsamples = 30};
}

/* Both GPUs of job 10 below 5% over the window: gpu_idle naming it (pool
 * action report); job 11 has one busy GPU; job 12's samples start inside
 * the window; job 13 (pool cut) is idle and cancelled. */
static void test_gpu_idle(void **state)
{
    struct fixture *f = *state;
    add_node(f, 1, 0, NOW);
    add_node(f, 2, 1, NOW);
    add_running(f, 10, 1, 0x3, 1);
    add_running(f, 11, 1, 0xc, 1);
    add_running(f, 12, 1, 0x10, 1);
    add_running(f, 13, 2, 0x1, 1);
    f->snap.samples_end_ms = NOW;
    add_use(f, 1, 0, 1.0, NOW - 40 * MIN);
    add_use(f, 1, 1, 4.9, NOW - 40 * MIN);
    add_use(f, 1, 2, 0.0, NOW - 40 * MIN);
    add_use(f, 1, 3, 80.0, NOW - 40 * MIN);
    add_use(f, 1, 4, 0.0, NOW - 20 * MIN);
    add_use(f, 2, 0, 0.0, NOW - 40 * MIN);
    run(f, NOW);
    assert_int_equal(count(f, "gpu_idle", -1), 2);
    assert_int_equal(f->plan.gpu_idle, 2);
    const cJSON *a, *idle10 = NULL;
    cJSON_ArrayForEach(a, f->plan.actions)
        if (strcmp(cJSON_GetObjectItemCaseSensitive(a, "op")->valuestring, "gpu_idle") == 0 &&
            cJSON_GetObjectItemCaseSensitive(a, "job")->valuedouble == 10)
            idle10 = a;
    assert_non_null(idle10);
    const cJSON *in = cJSON_GetObjectItemCaseSensitive(idle10, "inputs");
    assert_int_equal((int)cJSON_GetObjectItemCaseSensitive(in, "gpus")->valuedouble, 2);
    assert_true(cJSON_GetObjectItemCaseSensitive(in, "max_util_percent")->valuedouble == 4.9);
    assert_string_equal(cJSON_GetObjectItemCaseSensitive(in, "action")->valuestring, "report");
    assert_int_equal(count(f, "idle_cancel", 2), 1);
    assert_int_equal(count(f, "idle_requeue", -1), 0);
}

/* A drained node of a real-agent pool: its checkpointable job checkpoints
 * and requeues (to resume elsewhere), the plain one runs on; a simulated
 * pool's drain waits. */
static void test_drain_checkpoints(void **state)
{
    struct fixture *f = *state;
    struct tm_snap_node *n = add_node(f, 1, 0, NOW);
    n->state = TM_NODE_DRAINING;
    n->cordoned = true;
    add_running(f, 10, 1, 0x1, 1)->checkpointable = true;
    add_running(f, 11, 1, 0x2, 1);
    run(f, NOW);
    assert_int_equal(count(f, "checkpoint", 1), 1);
    const cJSON *a = cJSON_GetArrayItem(f->plan.actions, 0);
    assert_int_equal((int)cJSON_GetObjectItemCaseSensitive(a, "job")->valuedouble, 10);
    f->real[0] = false;
    run(f, NOW);
    assert_int_equal(count(f, "checkpoint", 1), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_silent_node_transitions, setup, teardown),
        cmocka_unit_test_setup_teardown(test_silent_empty_node_terminated, setup, teardown),
        cmocka_unit_test_setup_teardown(test_unfenceable_waits_for_bound, setup, teardown),
        cmocka_unit_test_setup_teardown(test_gang_waits_for_every_member, setup, teardown),
        cmocka_unit_test_setup_teardown(test_gang_waits_for_silent_member, setup, teardown),
        cmocka_unit_test_setup_teardown(test_sim_pool_never_stale, setup, teardown),
        cmocka_unit_test_setup_teardown(test_boot_allowance, setup, teardown),
        cmocka_unit_test_setup_teardown(test_gpu_idle, setup, teardown),
        cmocka_unit_test_setup_teardown(test_drain_checkpoints, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
