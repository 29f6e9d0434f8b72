/*
 * tests/unit/reconcile/test_reconcile_burst.c: owned first, the clouds
 * for the overflow, through tm_reconcile with known answers.  One pool
 * group holds a full owned pool (one 8-GPU node running an 8-GPU job) and
 * a sim cloud's on-demand and spot pools; a queued 1-GPU job is put to the
 * group's burst rule (controller/reconcile/burst.c): it waits for owned
 * capacity (no launch, its wait reason says so) or it bursts (a launch
 * whose reason names the projected owned start and the price).  Also the
 * configuration's pool_groups rules (the field named).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "controller/reconcile/reconcile.h"
#include "core/config.h"
#include "core/err.h"
#include "tests/lib/snap_fixture.h"

#define OWNED_PROVIDER                                                                       \
    "  - name: site\n"                                                                       \
    "    kind: owned\n"                                                                      \
    "    region: lab\n"

#define POOLS                                                                                \
    "pools:\n"                                                                               \
    "  - {name: cloud, provider: sim, zones: [z], instance_types: [sim.8x], group: a100,"    \
    "     max_nodes: 4, idle_grace: 60s}\n"                                                  \
    "  - {name: cloudspot, provider: sim, zones: [z], instance_types: [sim.8x], group: a100," \
    "     capacity_type: spot, max_nodes: 4, idle_grace: 60s}\n"                             \
    "  - {name: dgx, provider: site, gpu_model: A100, gpus_per_node: 8, group: a100,"        \
    "     max_nodes: 4, idle_grace: 60s, cost_per_node_hour: \"20.00\"}\n"

/* The starvation bound well past every wait here, so that the budget,
 * the deadline or the constant wait decides. */
#define HEAD                                                                                 \
    SNAP_FIXTURE_YAML_HEAD("unit")                                                           \
    "scheduler: {starvation_bound: 2d}\n"                                                    \
    "providers:\n" SNAP_FIXTURE_YAML_SIM("sim", "r") OWNED_PROVIDER POOLS

static const char yaml_cost[] = HEAD;
static const char yaml_never[] = HEAD "pool_groups:\n  - {name: a100, burst: never}\n";
static const char yaml_after[] = HEAD "pool_groups:\n  - {name: a100, burst: after 10m}\n";

#define NOW 1000000000
#define MIN 60000LL
#define DGX 2
#define DGX_NODE 7
#define QUEUED 1

struct fixture {
    SNAP_FIXTURE_MEMBERS(8);
    SNAP_FIXTURE_PASS_MEMBERS;
    struct tm_observed observed[2];
    bool real_agent[3];
};

static int setup_with(void **state, const char *yaml)
{
    static struct fixture f;
    memset(&f, 0, sizeof(f));
    if (SNAP_FIXTURE_PASS_INIT(&f, yaml) < 0)
        return -1;
    f.observed[0] = f.obs;
    f.observed[1] = (struct tm_observed){.provider = "site", .complete = false};
    f.real_agent[0] = f.real_agent[1] = f.real_agent[2] = true;
    *state = &f;
    return 0;
}

static int setup_cost(void **state) { return setup_with(state, yaml_cost); }
static int setup_never(void **state) { return setup_with(state, yaml_never); }
static int setup_after(void **state) { return setup_with(state, yaml_after); }

static int teardown(void **state)
{
    SNAP_FIXTURE_PASS_RELEASE((struct fixture *)*state);
    return 0;
}

/* The owned pool full: its one node runs an 8-GPU job whose expected end
 * is `ends_in` from now (it started a minute ago: the estimator expects
 * max(estimate - elapsed, elapsed) more). */
static void owned_full(struct fixture *f, int64_t ends_in)
{
    struct tm_snap_node *n = &f->nodes[f->snap.nnodes++];
    *n = (struct tm_snap_node){.id = DGX_NODE, .pool = DGX, .gpus = 8, .cpu_milli = 96000,
                               .memory_mib = 1000000, .capacity = TM_CAPACITY_ON_DEMAND,
                               .state = TM_NODE_READY, .requested_ms = NOW - 3600000,
                               .billed = true, .last_heartbeat_ms = NOW};
    snprintf(n->gpu_model, sizeof(n->gpu_model), "A100");
    snprintf(n->token, sizeof(n->token), "join-7");
    snprintf(n->instance_type, sizeof(n->instance_type), "owned");
    snprintf(n->zone, sizeof(n->zone), "owned");
    struct tm_snap_job *j = &f->jobs[f->snap.njobs++];
    *j = (struct tm_snap_job){.id = 100, .pool = -1, .gpus = 8, .gpu_milli = 1000, .nodes = 1,
                              .state = TM_JOB_RUNNING, .node_id = DGX_NODE,
                              .estimate_ms = ends_in + MIN, .started_ms = NOW - MIN,
                              .submitted_ms = NOW - 5 * 3600000LL};
    snprintf(j->team, sizeof(j->team), "t");
    f->allocs[f->snap.nallocs++] = (struct tm_snap_alloc){.job_id = 100, .node_id = DGX_NODE,
                                                          .gpu_mask = 0xff, .gpu_milli = 1000,
                                                          .cpu_milli = 1000, .memory_mib = 1000};
}

/* A queued 1-GPU job of the group (any pool), estimate est, waited so far. */
static struct tm_snap_job *queued(struct fixture *f, int64_t est, int64_t waited)
{
    struct tm_snap_job *j = &f->jobs[f->snap.njobs++];
    *j = (struct tm_snap_job){.id = QUEUED, .pool = -1, .gpus = 1, .gpu_milli = 1000, .nodes = 1,
                              .state = TM_JOB_QUEUED, .estimate_ms = est,
                              .submitted_ms = NOW - waited};
    snprintf(j->team, sizeof(j->team), "t");
    snprintf(j->gpu_model, sizeof(j->gpu_model), "A100");
    return j;
}

static void run(struct fixture *f)
{
    struct tm_reconcile_input in = {.cfg = &f->cfg, .snap = &f->snap, .observed = f->observed,
                                    .nobserved = 2, .now_ms = NOW, .policy = TM_POLICY_TARMAC,
                                    .pool_real_agent = f->real_agent};
    tm_rc_plan_release(&f->plan);
    assert_int_equal(tm_reconcile(&in, &f->plan), 0);
}

static const char *reason_of(const cJSON *a)
{
    const cJSON *r = cJSON_GetObjectItemCaseSensitive(a, "reason");
    return cJSON_IsString(r) ? r->valuestring : "";
}

/* The plan's wait for the queued job: its reason must hold want. */
static void waits_for_owned(const struct fixture *f, const char *want)
{
    const cJSON *a;
    assert_int_equal(snap_fixture_count_op(f->plan.actions, "request_node"), 0);
    for (int k = 0; (a = snap_fixture_nth_op(f->plan.actions, "wait", k)); k++) {
        const cJSON *j = cJSON_GetObjectItemCaseSensitive(a, "job");
        if (!cJSON_IsNumber(j) || j->valuedouble != QUEUED)
            continue;
        if (!strstr(reason_of(a), "waiting for owned capacity: projected owned start") ||
            !strstr(reason_of(a), want))
            fail_msg("wait reason: %s", reason_of(a));
        return;
    }
    fail_msg("no wait for job %d", QUEUED);
}

/* One launch for the queued job, of capacity cap, its reason holding want
 * and the burst's figures in its inputs. */
static void bursts(const struct fixture *f, const char *cap, const char *want)
{
    const cJSON *a = snap_fixture_nth_op(f->plan.actions, "request_node", 0);
    assert_non_null(a);
    assert_int_equal(snap_fixture_count_op(f->plan.actions, "request_node"), 1);
    if (!strstr(reason_of(a), want) || !strstr(reason_of(a), "projected owned start in"))
        fail_msg("launch reason: %s", reason_of(a));
    const cJSON *in = cJSON_GetObjectItemCaseSensitive(a, "inputs");
    const cJSON *c = cJSON_GetObjectItemCaseSensitive(in, "capacity_type");
    if (c && cJSON_IsString(c))
        assert_string_equal(c->valuestring, cap);
    const cJSON *bj = cJSON_GetObjectItemCaseSensitive(in, "burst_job");
    assert_true(cJSON_IsNumber(bj) && bj->valuedouble == QUEUED);
    assert_true(cJSON_IsNumber(cJSON_GetObjectItemCaseSensitive(in, "burst_price_per_hour")));
    assert_true(cJSON_IsNumber(cJSON_GetObjectItemCaseSensitive(in, "projected_owned_start_ms")));
}

/* Owned capacity frees in 20 minutes; a 2-hour 1-GPU job's waiting
 * budget (its cloud bill in hours of waiting: estimate + boot at the
 * default value) holds that wait: it waits, and nothing is bought. */
static void test_near_start_waits(void **state)
{
    struct fixture *f = *state;
    owned_full(f, 20 * MIN);
    queued(f, 120 * MIN, MIN);
    run(f);
    waits_for_owned(f, "within its waiting budget");
}

/* A whole-node job behind the running one: the projection is the
 * scheduler's own (its reservation on the owned node when it makes one,
 * else the running job's expected end), in the wait's inputs; its budget
 * (8 GPUs' bill) holds 20 minutes. */
static void test_whole_node_projection(void **state)
{
    struct fixture *f = *state;
    const cJSON *a;
    owned_full(f, 20 * MIN);
    queued(f, 120 * MIN, MIN)->gpus = 8;
    run(f);
    waits_for_owned(f, "within its waiting budget");
    for (int k = 0; (a = snap_fixture_nth_op(f->plan.actions, "wait", k)); k++) {
        const cJSON *in = cJSON_GetObjectItemCaseSensitive(a, "inputs");
        const cJSON *st = cJSON_GetObjectItemCaseSensitive(in, "projected_owned_start_ms");
        const cJSON *rv = cJSON_GetObjectItemCaseSensitive(in, "reserved_start_ms");
        assert_true(cJSON_IsNumber(st));
        assert_true(st->valuedouble == (double)(NOW + 20 * MIN));
        if (rv)
            assert_true(rv->valuedouble == st->valuedouble);
    }
}

/* Owned capacity frees in 3 hours; a 10-minute job's budget is far
 * shorter: it bursts to on-demand, the launch naming why. */
static void test_far_start_bursts(void **state)
{
    struct fixture *f = *state;
    owned_full(f, 180 * MIN);
    queued(f, 10 * MIN, MIN);
    run(f);
    bursts(f, "on_demand", "burst on-demand at $4.00/h");
    assert_non_null(strstr(reason_of(snap_fixture_nth_op(f->plan.actions, "request_node", 0)),
                           "passes its waiting budget"));
}

/* The near start of the first test, but the job's deadline falls before
 * the owned start plus its estimate: it bursts now. */
static void test_deadline_bursts(void **state)
{
    struct fixture *f = *state;
    owned_full(f, 20 * MIN);
    queued(f, 120 * MIN, MIN)->deadline_ms = NOW + 130 * MIN;
    run(f);
    bursts(f, "on_demand", "misses its deadline");
}

/* Preemptible work bursts to spot, at the spot price. */
static void test_preemptible_bursts_to_spot(void **state)
{
    struct fixture *f = *state;
    owned_full(f, 180 * MIN);
    queued(f, 10 * MIN, MIN)->preemptible = true;
    run(f);
    bursts(f, "spot", "burst spot at $1.25/h");
}

/* burst: never: however far the owned start, nothing is bought. */
static void test_never(void **state)
{
    struct fixture *f = *state;
    owned_full(f, 180 * MIN);
    queued(f, 10 * MIN, MIN);
    run(f);
    waits_for_owned(f, "burst: never");
}

/* burst: after 10m: a job that waited 5 minutes waits on; one that waited
 * 11 bursts. */
static void test_after(void **state)
{
    struct fixture *f = *state;
    owned_full(f, 180 * MIN);
    struct tm_snap_job *j = queued(f, 10 * MIN, 5 * MIN);
    run(f);
    waits_for_owned(f, "waited 300 s of 600 s");
    j->submitted_ms = NOW - 11 * MIN;
    run(f);
    bursts(f, "on_demand", "the constant wait is 600 s");
}

/* Without a group's burst rule applying (the owned pool not in the
 * group), the job goes to the cloud at once, as before. */
static void test_no_owned_in_group(void **state)
{
    struct fixture *f = *state;
    owned_full(f, 180 * MIN);
    queued(f, 10 * MIN, MIN)->pool = 0;
    run(f);
    assert_int_equal(snap_fixture_count_op(f->plan.actions, "request_node"), 1);
    const cJSON *in = cJSON_GetObjectItemCaseSensitive(
        snap_fixture_nth_op(f->plan.actions, "request_node", 0), "inputs");
    assert_null(cJSON_GetObjectItemCaseSensitive(in, "burst_job"));
}

/* An idle owned node and an idle, older cloud node: the job goes to the
 * owned one (paid for either way), so the cloud node can empty and go. */
static void test_owned_node_first(void **state)
{
    struct fixture *f = *state;
    struct tm_snap_node *c = &f->nodes[f->snap.nnodes++];
    *c = (struct tm_snap_node){.id = 3, .pool = 0, .gpus = 8, .cpu_milli = 96000,
                               .memory_mib = 1000000, .capacity = TM_CAPACITY_ON_DEMAND,
                               .state = TM_NODE_READY, .requested_ms = NOW - 3600000,
                               .idle_since_ms = NOW - 1000, .billed = true, .last_heartbeat_ms = NOW};
    snprintf(c->gpu_model, sizeof(c->gpu_model), "A100");
    snprintf(c->instance_id, sizeof(c->instance_id), "i-3");
    snprintf(c->token, sizeof(c->token), "tok-3");
    snprintf(c->instance_type, sizeof(c->instance_type), "sim.8x");
    snprintf(c->zone, sizeof(c->zone), "z");
    struct tm_instance *in = &f->inst[f->obs.n++];
    *in = (struct tm_instance){.state = TM_INSTANCE_RUNNING, .node_id = 3,
                               .capacity = TM_CAPACITY_ON_DEMAND, .launched_ms = NOW - 3600000};
    snprintf(in->id, sizeof(in->id), "i-3");
    snprintf(in->token, sizeof(in->token), "tok-3");
    snprintf(in->instance_type, sizeof(in->instance_type), "sim.8x");
    snprintf(in->zone, sizeof(in->zone), "z");
    f->observed[0] = f->obs;
    struct tm_snap_node *o = &f->nodes[f->snap.nnodes++];
    *o = (struct tm_snap_node){.id = DGX_NODE, .pool = DGX, .gpus = 8, .cpu_milli = 96000,
                               .memory_mib = 1000000, .capacity = TM_CAPACITY_ON_DEMAND,
                               .state = TM_NODE_READY, .requested_ms = NOW - 3600000,
                               .idle_since_ms = NOW - 1000, .billed = true, .last_heartbeat_ms = NOW};
    snprintf(o->gpu_model, sizeof(o->gpu_model), "A100");
    snprintf(o->token, sizeof(o->token), "join-7");
    snprintf(o->instance_type, sizeof(o->instance_type), "owned");
    snprintf(o->zone, sizeof(o->zone), "owned");
    queued(f, 10 * MIN, MIN);
    run(f);
    const cJSON *allocs = cJSON_GetObjectItemCaseSensitive(
        snap_fixture_nth_op(f->plan.actions, "place", 0), "allocs");
    const cJSON *node = cJSON_GetObjectItemCaseSensitive(cJSON_GetArrayItem(allocs, 0), "node");
    assert_true(cJSON_IsNumber(node) && node->valuedouble == DGX_NODE);
    assert_int_equal(snap_fixture_count_op(f->plan.actions, "request_node"), 0);
}

/* load pools + groups; expect a refusal naming want. */
static void refused(const char *pools, const char *groups, const char *want)
{
    char yaml[4096], err[512];
    struct tm_config cfg;

    snprintf(yaml, sizeof(yaml), "%sproviders:\n%s%s%spool_groups:\n%s", SNAP_FIXTURE_YAML_HEAD("unit"),
             SNAP_FIXTURE_YAML_SIM("sim", "r"), OWNED_PROVIDER, pools, groups);
    err[0] = '\0';
    if (tm_config_load_string(yaml, strlen(yaml), "unit.yaml", &cfg, err, sizeof(err)) == 0) {
        tm_config_release(&cfg);
        fail_msg("loaded: %s", groups);
    }
    if (!strstr(err, want))
        fail_msg("want \"%s\" in: %s", want, err);
}

static void test_config(void **state)
{
    (void)state;
    struct tm_config cfg;
    char err[512];
    const char *cloud_only =
        "pools:\n  - {name: c, provider: sim, zones: [z], instance_types: [sim.8x], group: g,"
        " max_nodes: 1}\n";
    const char *owned_only =
        "pools:\n  - {name: d, provider: site, gpu_model: A100, gpus_per_node: 8, group: g,"
        " max_nodes: 1, cost_per_node_hour: \"1\"}\n";

    assert_int_equal(tm_config_load_string(yaml_after, strlen(yaml_after), "unit.yaml", &cfg, err,
                                           sizeof(err)), 0);
    const struct tm_config_pool_group *g = tm_config_pool_group_find(&cfg, "a100");
    assert_non_null(g);
    assert_int_equal(g->burst_rule, TM_CONFIG_BURST_AFTER);
    assert_int_equal(g->burst_after_ms, 10 * MIN);
    tm_config_release(&cfg);

    /* the mapping spelling of the constant wait */
    const char *yaml_map = HEAD "pool_groups:\n  - name: a100\n    burst: {after: 90s}\n";
    assert_int_equal(tm_config_load_string(yaml_map, strlen(yaml_map), "unit.yaml", &cfg, err,
                                           sizeof(err)), 0);
    g = tm_config_pool_group_find(&cfg, "a100");
    assert_int_equal(g->burst_rule, TM_CONFIG_BURST_AFTER);
    assert_int_equal(g->burst_after_ms, 90000);
    tm_config_release(&cfg);

    refused(POOLS, "  - {name: a100, burst: {after: soon}}\n", "\"pool_groups[0].burst.after\"");
    refused(POOLS, "  - {name: a100, burst: {later: 1m}}\n", "\"pool_groups[0].burst.later\"");
    refused(POOLS, "  - {name: a100, burst: {}}\n", "pool_groups[0].burst");
    refused(owned_only, "  - {name: g, burst: {after: 1m}}\n",
            "\"pool_groups[0].burst\": group \"g\" has no cloud pools");
    refused(cloud_only, "  - {name: g, burst: cost}\n",
            "\"pool_groups[0].burst\": group \"g\" has no owned pools");
    refused(owned_only, "  - {name: g, burst: never}\n",
            "\"pool_groups[0].burst\": group \"g\" has no cloud pools");
    refused(POOLS, "  - {name: nosuch, burst: never}\n",
            "\"pool_groups[0].name\": no pool names group \"nosuch\"");
    refused(POOLS, "  - {name: a100, burst: sometimes}\n",
            "\"pool_groups[0].burst\": expected never, cost or after DURATION");
    refused(POOLS, "  - {name: a100, burst: after soon}\n", "\"pool_groups[0].burst\"");
    refused(POOLS, "  - {name: a100}\n  - {name: a100, burst: never}\n",
            "\"pool_groups[1].name\": \"a100\" is already pool_groups[0]");
    refused(POOLS, "  - {name: a100, wait_value: \"-1\"}\n", "pool_groups[0].wait_value");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_near_start_waits, setup_cost, teardown),
        cmocka_unit_test_setup_teardown(test_whole_node_projection, setup_cost, teardown),
        cmocka_unit_test_setup_teardown(test_far_start_bursts, setup_cost, teardown),
        cmocka_unit_test_setup_teardown(test_deadline_bursts, setup_cost, teardown),
        cmocka_unit_test_setup_teardown(test_preemptible_bursts_to_spot, setup_cost, teardown),
        cmocka_unit_test_setup_teardown(test_never, setup_never, teardown),
        cmocka_unit_test_setup_teardown(test_after, setup_after, teardown),
        cmocka_unit_test_setup_teardown(test_no_owned_in_group, setup_cost, teardown),
        cmocka_unit_test_setup_teardown(test_owned_node_first, setup_cost, teardown),
        cmocka_unit_test(test_config),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
