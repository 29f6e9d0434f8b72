/*
 * tests/unit/reconcile/test_no_show.c: a pool whose launched nodes never
 * enroll, in the pure pass (controller/reconcile/no_show.c) and the alert
 * evaluation: the backoff grows with the run and stops at its cap; a
 * held pool launches nothing and records one launch_held per hold (the
 * same hold end in every pass of it), its waiting job says why, once; the
 * launch goes when the hold ends or when a node of the pool heartbeats;
 * the alert holds from the N-th such node until one enrolls; the keys are
 * validated.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "controller/reconcile/alerts.h"
#include "controller/reconcile/reconcile.h"
#include "core/config.h"
#include "tests/lib/snap_fixture.h"

#define AGENT_YAML(extra)                                                                     \
    "agent: {unreachable_after: 2m, requeue_after: 5m, terminate_after: 15m, boot_allowance: 10m," \
    " no_show_backoff: 1m, no_show_backoff_max: 8m, no_show_alert_after: 3" extra "}\n"

#define POOLS_YAML                                                                            \
    "providers:\n" SNAP_FIXTURE_YAML_SIM("sim", "r1")                                         \
    "pools:\n"                                                                                \
    "  - {name: od, provider: sim, zones: [z1], instance_types: [sim.8x], gpu_model: A100,"   \
    "     gpus_per_node: 8, capacity_type: on_demand, min_nodes: 0, max_nodes: 4, idle_grace: 60s}\n"

static const char config_yaml[] = SNAP_FIXTURE_YAML_HEAD("unit") AGENT_YAML("") POOLS_YAML;

#define NOW 1000000000
#define MIN 60000

struct fixture {
    SNAP_FIXTURE_MEMBERS(8);
    SNAP_FIXTURE_PASS_MEMBERS;
    bool real[1];
    struct tm_snap_no_show no_shows[16];
};

static int setup(void **state)
{
    static struct fixture f;
    memset(&f, 0, sizeof(f));
    if (SNAP_FIXTURE_PASS_INIT(&f, config_yaml) < 0)
        return -1;
    f.real[0] = true;
    f.snap.no_shows = f.no_shows;
    *state = &f;
    return 0;
}

static int teardown(void **state)
{
    SNAP_FIXTURE_PASS_RELEASE((struct fixture *)*state);
    return 0;
}

/* k nodes of pool od given up on without a heartbeat, ids 1..k, the newest
 * (id k) at last_ms, one minute apart, newest first as the store reads them. */
static void add_no_shows(struct fixture *f, int k, int64_t last_ms)
{
    f->snap.nno_shows = 0;
    for (int i = k; i >= 1; i--)
        f->no_shows[f->snap.nno_shows++] = (struct tm_snap_no_show){
            .pool = 0, .node_id = i, .requested_ms = last_ms - (k - i) * MIN - 12 * MIN,
            .given_up_ms = last_ms - (k - i) * MIN};
}

/* One queued job of 8 GPUs: it needs a new node of pool od. */
static struct tm_snap_job *add_queued(struct fixture *f)
{
    struct tm_snap_job *j = &f->jobs[f->snap.njobs++];
    *j = (struct tm_snap_job){.id = 7, .pool = -1, .gpus = 8, .gpu_milli = 1000, .nodes = 1,
                              .cpu_milli = 1000, .memory_mib = 1000, .state = TM_JOB_QUEUED,
                              .submitted_ms = NOW - 30 * MIN};
    snprintf(j->team, sizeof(j->team), "t");
    snprintf(j->gpu_model, sizeof(j->gpu_model), "A100");
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

static int count(const struct fixture *f, const char *op)
{
    return snap_fixture_count_op(f->plan.actions, op);
}

static double input_num(const cJSON *a, const char *name)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(a, "inputs"), name);
    assert_true(cJSON_IsNumber(v));
    return v->valuedouble;
}

static const char *reason_of(const cJSON *a)
{
    const cJSON *r = cJSON_GetObjectItemCaseSensitive(a, "reason");
    assert_true(cJSON_IsString(r));
    return r->valuestring;
}

/* 1, 2, 4, 8 min, then 8 min: doubling per node in the run, up to the cap;
 * the hold ends at the newest node's giving up plus the backoff. */
static void test_backoff_grows_and_caps(void **state)
{
    struct fixture *f = *state;
    static const int64_t want[] = {0, 1, 2, 4, 8, 8, 8};
    struct tm_no_show_hold h;

    for (int k = 0; k <= 6; k++) {
        add_no_shows(f, k, NOW);
        tm_reconcile_no_show(&f->cfg, &f->snap, 0, &h);
        assert_int_equal(h.streak, k);
        assert_int_equal(h.delay_ms, want[k] * MIN);
        assert_int_equal(h.until_ms, k ? NOW + want[k] * MIN : 0);
        if (k)
            assert_int_equal(h.last_node_id, k);
    }
    /* 64 in a row (the most the store reads) stays at the cap. */
    for (int i = 0; i < 16; i++)
        f->no_shows[i] = (struct tm_snap_no_show){.pool = 0, .node_id = 100 - i, .given_up_ms = NOW};
    f->snap.nno_shows = 16;
    tm_reconcile_no_show(&f->cfg, &f->snap, 0, &h);
    assert_int_equal(h.delay_ms, 8 * MIN);
}

/* Today the planner relaunches at once; with 3 no-shows the last given up
 * 1 min ago the pool waits 4 min: no request_node, one launch_held naming
 * the hold's end, the job's reason says so; a later pass of the same hold
 * names the same end (the apply keeps one decision) and, the reason being
 * recorded, writes no wait again; at the end the launch goes. */
static void test_hold_launch_decision_once_then_launch(void **state)
{
    struct fixture *f = *state;
    struct tm_snap_job *j = add_queued(f);

    run(f, NOW);
    assert_int_equal(count(f, "request_node"), 1);
    assert_int_equal(count(f, "launch_held"), 0);

    add_no_shows(f, 3, NOW - MIN);
    run(f, NOW);
    assert_int_equal(count(f, "request_node"), 0);
    assert_int_equal(count(f, "launch_held"), 1);
    const cJSON *held = snap_fixture_nth_op(f->plan.actions, "launch_held", 0);
    assert_string_equal(cJSON_GetObjectItemCaseSensitive(held, "pool")->valuestring, "od");
    assert_int_equal((int64_t)input_num(held, "until_ms"), NOW + 3 * MIN);
    assert_int_equal((int64_t)input_num(held, "backoff_ms"), 4 * MIN);
    assert_int_equal((int)input_num(held, "no_shows"), 3);
    assert_int_equal((int64_t)input_num(held, "last_node"), 3);
    assert_non_null(strstr(reason_of(held), "pool od: 3 nodes launched in a row never enrolled"));
    const cJSON *wait = snap_fixture_nth_op(f->plan.actions, "wait", 0);
    assert_non_null(wait);
    const char *why = reason_of(wait);
    assert_non_null(strstr(why, "pool od: 3 nodes launched in a row never enrolled"));
    assert_non_null(strstr(why, "next launch held until 13:49:40 UTC (backoff 4 min)"));
    snprintf(j->reason, sizeof(j->reason), "%s", why); /* recorded by the apply */

    run(f, NOW + 2 * MIN);
    assert_int_equal(count(f, "request_node"), 0);
    assert_int_equal(count(f, "launch_held"), 1);
    held = snap_fixture_nth_op(f->plan.actions, "launch_held", 0);
    assert_int_equal((int64_t)input_num(held, "until_ms"), NOW + 3 * MIN);
    assert_int_equal(count(f, "wait"), 0);

    run(f, NOW + 3 * MIN);
    assert_int_equal(count(f, "request_node"), 1);
    assert_int_equal(count(f, "launch_held"), 0);
    f->snap.njobs = 0;
    f->snap.nno_shows = 0;
}

/* A node of the pool that heartbeats ends the run: the launch goes at once. */
static void test_enrollment_resets(void **state)
{
    struct fixture *f = *state;
    add_queued(f);
    add_no_shows(f, 3, NOW - MIN);
    f->nodes[f->snap.nnodes++] = (struct tm_snap_node){
        .id = 9, .pool = 0, .gpus = 8, .cpu_milli = 96000, .memory_mib = 1000000,
        .state = TM_NODE_DRAINING, .cordoned = true, .requested_ms = NOW - 20 * MIN,
        .last_heartbeat_ms = NOW - 1000, .capacity = TM_CAPACITY_ON_DEMAND};
    struct tm_no_show_hold h;
    tm_reconcile_no_show(&f->cfg, &f->snap, 0, &h);
    assert_int_equal(h.streak, 0);
    assert_int_equal(h.until_ms, 0);
    run(f, NOW);
    assert_int_equal(count(f, "launch_held"), 0);
    assert_int_equal(count(f, "request_node"), 1);
    f->snap.njobs = 0;
    f->snap.nnodes = 0;
    f->snap.nno_shows = 0;
}

/* A pool's min_nodes waits out the hold too. */
static void test_min_nodes_held(void **state)
{
    struct fixture *f = *state;
    f->cfg.pools[0].min_nodes = 1;
    add_no_shows(f, 1, NOW);
    run(f, NOW);
    assert_int_equal(count(f, "request_node"), 0);
    assert_int_equal(count(f, "launch_held"), 1);
    run(f, NOW + MIN);
    assert_int_equal(count(f, "request_node"), 1);
    f->cfg.pools[0].min_nodes = 0;
    f->snap.nno_shows = 0;
}

static int alerts_for(struct fixture *f, const char *key)
{
    struct tm_alert_input in = {.cfg = &f->cfg, .snap = &f->snap, .now_ms = NOW};
    struct tm_alert_set set = {0};
    struct tm_alert_state next = {0};
    int n = 0;

    assert_int_equal(tm_alerts_evaluate(&in, NULL, &set, &next), 0);
    for (size_t i = 0; i < set.n; i++) {
        if (strcmp(set.items[i].key, key) != 0)
            continue;
        n++;
        assert_string_equal(set.items[i].decision_subject_kind, "pool");
        assert_non_null(strstr(set.items[i].message, "agent.controller_url"));
    }
    tm_alert_set_release(&set);
    tm_alert_state_release(&next);
    return n;
}

/* The alert holds from the 3rd such node in a row (agent.no_show_alert_after)
 * until one enrolls: one key, so the alerter fires it once per episode. */
static void test_alert_after_n(void **state)
{
    struct fixture *f = *state;

    add_no_shows(f, 2, NOW);
    assert_int_equal(alerts_for(f, "pool_no_show:od"), 0);
    add_no_shows(f, 3, NOW);
    assert_int_equal(alerts_for(f, "pool_no_show:od"), 1);
    add_no_shows(f, 7, NOW);
    assert_int_equal(alerts_for(f, "pool_no_show:od"), 1);
    f->nodes[f->snap.nnodes++] = (struct tm_snap_node){.id = 8, .pool = 0, .gpus = 8,
                                                       .state = TM_NODE_READY,
                                                       .last_heartbeat_ms = NOW};
    assert_int_equal(alerts_for(f, "pool_no_show:od"), 0);
    f->snap.nnodes = 0;
    f->cfg.agent.no_show_alert_after = 0; /* off */
    assert_int_equal(alerts_for(f, "pool_no_show:od"), 0);
    f->cfg.agent.no_show_alert_after = 3;
    f->snap.nno_shows = 0;
}

/* A cap below the base is refused naming the key; 0 turns the backoff off. */
static void test_keys_validated(void **state)
{
    (void)state;
    static const char bad[] = SNAP_FIXTURE_YAML_HEAD("unit")
        "agent: {no_show_backoff: 10m, no_show_backoff_max: 5m}\n" POOLS_YAML;
    static const char off[] = SNAP_FIXTURE_YAML_HEAD("unit")
        "agent: {no_show_backoff: 0, no_show_backoff_max: 0, no_show_alert_after: 0}\n" POOLS_YAML;
    static const char neg[] = SNAP_FIXTURE_YAML_HEAD("unit")
        "agent: {no_show_alert_after: -1}\n" POOLS_YAML;
    struct tm_config cfg;
    char err[256];

    assert_true(tm_config_load_string(bad, strlen(bad), "unit.yaml", &cfg, err, sizeof(err)) < 0);
    assert_non_null(strstr(err, "agent.no_show_backoff_max"));
    assert_true(tm_config_load_string(neg, strlen(neg), "unit.yaml", &cfg, err, sizeof(err)) < 0);
    assert_non_null(strstr(err, "no_show_alert_after"));
    assert_int_equal(tm_config_load_string(off, strlen(off), "unit.yaml", &cfg, err, sizeof(err)), 0);
    struct tm_snap_no_show x = {.pool = 0, .node_id = 1, .given_up_ms = NOW};
    struct tm_snapshot s = {.no_shows = &x, .nno_shows = 1};
    struct tm_no_show_hold h;
    tm_reconcile_no_show(&cfg, &s, 0, &h);
    assert_int_equal(h.streak, 1);
    assert_int_equal(h.until_ms, 0);
    tm_config_release(&cfg);

    static const char dflt[] = SNAP_FIXTURE_YAML_HEAD("unit") POOLS_YAML;
    assert_int_equal(tm_config_load_string(dflt, strlen(dflt), "unit.yaml", &cfg, err, sizeof(err)), 0);
    assert_int_equal(cfg.agent.no_show_backoff_ms, MIN);
    assert_int_equal(cfg.agent.no_show_backoff_max_ms, 60 * MIN);
    assert_int_equal(cfg.agent.no_show_alert_after, 3);
    tm_config_release(&cfg);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_backoff_grows_and_caps, setup, teardown),
        cmocka_unit_test_setup_teardown(test_hold_launch_decision_once_then_launch, setup, teardown),
        cmocka_unit_test_setup_teardown(test_enrollment_resets, setup, teardown),
        cmocka_unit_test_setup_teardown(test_min_nodes_held, setup, teardown),
        cmocka_unit_test_setup_teardown(test_alert_after_n, setup, teardown),
        cmocka_unit_test(test_keys_validated),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
