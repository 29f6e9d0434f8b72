/*
 * tests/unit/reconcile/test_reconcile_gang_start.c: the start barrier's
 * timeout in the pure pass (controller/reconcile/gang_start.c).
 *
 * A running 3-node job whose members claimed the attempt at the times
 * given (0: not yet).  Nobody claimed: nothing (the barrier has not begun).
 * Some claimed, one missing, less than agent.gang_start_timeout since the
 * first claim: nothing; at the timeout: one gang_start_timeout naming the
 * job, the attempt (started_ms), a node that did not come, and the nodes
 * absent and waiting in its reason and inputs.  Every member claimed: no
 * action however long ago.  A job of one node never has one.
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
    " gang_start_timeout: 30s}\n"
    "providers:\n"
    SNAP_FIXTURE_YAML_SIM("sim", "r1")
    "pools:\n"
    "  - {name: od, provider: sim, zones: [z1], instance_types: [sim.8x], gpu_model: A100,"
    "     gpus_per_node: 8, capacity_type: on_demand, min_nodes: 0, max_nodes: 20, idle_grace: 60m}\n";

#define NOW 1000000000
#define NMAX 8

struct fixture {
    struct tm_config cfg;
    struct tm_snap_node nodes[NMAX];
    struct tm_snap_job jobs[NMAX];
    struct tm_snap_alloc allocs[NMAX];
    struct tm_snapshot snap;
    struct tm_instance inst[NMAX];
    struct tm_observed obs;
    struct tm_rc_plan plan;
    bool real[1];
};

static int setup(void **state)
{
    static struct fixture f;
    memset(&f, 0, sizeof(f));
    f.obs = snap_fixture_observed(f.inst);
    if (snap_fixture_init(&f.cfg, config_yaml, &f.snap, f.nodes, f.jobs, f.allocs) < 0)
        return -1;
    f.real[0] = true;
    *state = &f;
    return 0;
}

static int teardown(void **state)
{
    struct fixture *f = *state;
    snap_fixture_pass_release(&f->plan, &f->cfg);
    return 0;
}

static void add_node(struct fixture *f, int64_t id)
{
    struct tm_snap_node *n = &f->nodes[f->snap.nnodes++];
    *n = (struct tm_snap_node){.id = id, .pool = 0, .gpus = 8, .cpu_milli = 96000, .memory_mib = 1000000,
                               .state = TM_NODE_READY, .requested_ms = NOW - 3600000, .billed = true,
                               .last_heartbeat_ms = NOW - 1000, .capacity = TM_CAPACITY_ON_DEMAND};
    snprintf(n->token, sizeof(n->token), "tok-%lld", (long long)id);
    snprintf(n->instance_id, sizeof(n->instance_id), "i-%lld", (long long)id);
    snprintf(n->instance_type, sizeof(n->instance_type), "sim.8x");
    snprintf(n->zone, sizeof(n->zone), "z1");
    snprintf(n->gpu_model, sizeof(n->gpu_model), "A100");
    struct tm_instance *i = &f->inst[f->obs.n++];
    memset(i, 0, sizeof(*i));
    snprintf(i->id, sizeof(i->id), "i-%lld", (long long)id);
    snprintf(i->token, sizeof(i->token), "tok-%lld", (long long)id);
    snprintf(i->pool, sizeof(i->pool), "od");
    snprintf(i->instance_type, sizeof(i->instance_type), "sim.8x");
    snprintf(i->zone, sizeof(i->zone), "z1");
    i->state = TM_INSTANCE_RUNNING;
}

/* Job id on nodes 1..n (all 8 GPUs of each), each member's claim from
 * claims[] (0: not claimed). */
static void add_gang(struct fixture *f, int64_t id, int n, const int64_t *claims)
{
    struct tm_snap_job *j = &f->jobs[f->snap.njobs++];
    *j = (struct tm_snap_job){.id = id, .pool = -1, .gpus = 8, .gpu_milli = 1000, .nodes = n,
                              .state = TM_JOB_RUNNING, .submitted_ms = NOW - 600000,
                              .started_ms = NOW - 300000, .node_id = 1, .attempts = 1};
    snprintf(j->team, sizeof(j->team), "t");
    for (int k = 0; k < n; k++)
        f->allocs[f->snap.nallocs++] = (struct tm_snap_alloc){.job_id = id, .node_id = k + 1, .gpu_mask = 0xff,
                                                              .gpu_milli = 1000, .claimed_ms = claims[k]};
}

static void run(struct fixture *f, int64_t now)
{
    struct tm_reconcile_input in = {.cfg = &f->cfg, .snap = &f->snap, .observed = &f->obs,
                                    .nobserved = 1, .now_ms = now, .policy = TM_POLICY_FIFO,
                                    .pool_real_agent = f->real, .hearing_since_ms = 1};
    tm_rc_plan_release(&f->plan);
    assert_int_equal(tm_reconcile(&in, &f->plan), 0);
}

static const cJSON *find(const struct fixture *f, const char *op)
{
    const cJSON *a;
    cJSON_ArrayForEach(a, f->plan.actions)
        if (strcmp(cJSON_GetObjectItemCaseSensitive(a, "op")->valuestring, op) == 0)
            return a;
    return NULL;
}

static void test_timeout(void **state)
{
    struct fixture *f = *state;
    const int64_t claims[3] = {NOW - 40000, 0, NOW - 35000};

    for (int64_t id = 1; id <= 3; id++)
        add_node(f, id);
    add_gang(f, 7, 3, claims);
    run(f, NOW - 10001); /* 29.999 s after the first claim */
    assert_null(find(f, "gang_start_timeout"));
    run(f, NOW - 10000);
    const cJSON *a = find(f, "gang_start_timeout");
    assert_non_null(a);
    assert_int_equal((int64_t)cJSON_GetObjectItemCaseSensitive(a, "job")->valuedouble, 7);
    assert_int_equal((int64_t)cJSON_GetObjectItemCaseSensitive(a, "node")->valuedouble, 2);
    assert_int_equal((int64_t)cJSON_GetObjectItemCaseSensitive(a, "started_ms")->valuedouble, NOW - 300000);
    const char *why = cJSON_GetObjectItemCaseSensitive(a, "reason")->valuestring;
    assert_non_null(strstr(why, "node(s) 2 did not claim attempt 1 within 30 s"));
    assert_non_null(strstr(why, "node(s) 1, 3 waited"));
    const cJSON *in = cJSON_GetObjectItemCaseSensitive(a, "inputs");
    assert_string_equal(cJSON_GetObjectItemCaseSensitive(in, "absent_nodes")->valuestring, "2");
    assert_string_equal(cJSON_GetObjectItemCaseSensitive(in, "waiting_nodes")->valuestring, "1, 3");
    assert_int_equal((int64_t)cJSON_GetObjectItemCaseSensitive(in, "first_claim_ms")->valuedouble, NOW - 40000);
    /* the requeued gang is not placed again in the same pass */
    const cJSON *x;
    cJSON_ArrayForEach(x, f->plan.actions)
        assert_string_not_equal(cJSON_GetObjectItemCaseSensitive(x, "op")->valuestring, "place");
}

static void test_no_action(void **state)
{
    struct fixture *f = *state;
    const int64_t none[3] = {0, 0, 0}, all[3] = {NOW - 900000, NOW - 900000, NOW - 800000};
    const int64_t one[1] = {0};

    for (int64_t id = 1; id <= 3; id++)
        add_node(f, id);
    /* nobody claimed yet: the barrier has not begun */
    add_gang(f, 7, 3, none);
    run(f, NOW);
    assert_null(find(f, "gang_start_timeout"));
    /* everybody claimed long ago: released */
    f->snap.njobs = f->snap.nallocs = 0;
    add_gang(f, 8, 3, all);
    run(f, NOW);
    assert_null(find(f, "gang_start_timeout"));
    /* a job of one node has no barrier */
    f->snap.njobs = f->snap.nallocs = 0;
    add_gang(f, 9, 1, one);
    f->allocs[0].claimed_ms = 0;
    run(f, NOW);
    assert_null(find(f, "gang_start_timeout"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_timeout, setup, teardown),
        cmocka_unit_test_setup_teardown(test_no_action, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
