/*
 * tests/unit/reconcile/test_reconcile_silence.c: silence the controller
 * could not hear, and many nodes silent at once, in the pure pass.
 *
 * Silence counts from tm_reconcile_input.hearing_since_ms at the earliest
 * (the leader's start, its database back): a node whose last heartbeat is
 * older than that is not unreachable until unreachable_after past it, and
 * the node_unreachable message says what it counted from.  A provider
 * with at least agent.mass_silence_min_nodes and agent.mass_silence_share
 * of its nodes silent holds them all back (no node_unreachable, no
 * requeue, no terminate, no new work; one silence_hold action naming the
 * provider, and the alert mass_silence:<provider>); a single silent node
 * among many, and a small fleet's dead node, are still handled; nodes
 * never heard from are never held.
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

static const char config_yaml[] =
    SNAP_FIXTURE_YAML_HEAD("unit")
    "agent: {unreachable_after: 2m, requeue_after: 5m, terminate_after: 15m, boot_allowance: 10m}\n"
    "providers:\n"
    SNAP_FIXTURE_YAML_SIM("sim", "r1")
    "pools:\n"
    "  - {name: od, provider: sim, zones: [z1], instance_types: [sim.8x], gpu_model: A100,"
    "     gpus_per_node: 8, capacity_type: on_demand, min_nodes: 0, max_nodes: 20, idle_grace: 60m}\n";

#define NOW 1000000000
#define MIN 60000
#define NMAX 16

struct fixture {
    struct tm_config cfg;
    struct tm_snap_node nodes[NMAX];
    struct tm_snap_job jobs[NMAX + 1];
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

/* Node id (1..) heard from last at last_hb (0: never), with job 100 + id
 * running on its first GPU; the cloud lists it running. */
static struct tm_snap_node *add_node(struct fixture *f, int64_t id, int64_t last_hb)
{
    struct tm_snap_node *n = &f->nodes[f->snap.nnodes++];
    *n = (struct tm_snap_node){.id = id, .pool = 0, .gpus = 8, .cpu_milli = 96000, .memory_mib = 1000000,
                               .state = TM_NODE_READY, .requested_ms = NOW - 60 * MIN, .billed = true,
                               .last_heartbeat_ms = last_hb, .capacity = TM_CAPACITY_ON_DEMAND};
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

    struct tm_snap_job *j = &f->jobs[f->snap.njobs++];
    *j = (struct tm_snap_job){.id = 100 + id, .pool = -1, .gpus = 1, .gpu_milli = 1000, .nodes = 1,
                              .state = TM_JOB_RUNNING, .submitted_ms = NOW - 120 * MIN,
                              .started_ms = NOW - 100 * MIN, .node_id = id, .attempts = 1};
    snprintf(j->team, sizeof(j->team), "t");
    f->allocs[f->snap.nallocs++] = (struct tm_snap_alloc){.job_id = 100 + id, .node_id = id,
                                                          .gpu_mask = 0x1, .gpu_milli = 1000};
    return n;
}

/* A queued one-GPU job, id 999: where does the pass place it? */
static void add_queued(struct fixture *f)
{
    struct tm_snap_job *j = &f->jobs[f->snap.njobs++];
    *j = (struct tm_snap_job){.id = 999, .pool = -1, .gpus = 1, .gpu_milli = 1000, .nodes = 1,
                              .state = TM_JOB_QUEUED, .submitted_ms = NOW - MIN};
    snprintf(j->team, sizeof(j->team), "t");
}

static void run(struct fixture *f, int64_t now, int64_t hearing_since)
{
    struct tm_reconcile_input in = {.cfg = &f->cfg, .snap = &f->snap, .observed = &f->obs,
                                    .nobserved = 1, .now_ms = now, .policy = TM_POLICY_FIFO,
                                    .pool_real_agent = f->real, .hearing_since_ms = hearing_since};
    tm_rc_plan_release(&f->plan);
    assert_int_equal(tm_reconcile(&in, &f->plan), 0);
}

/* Actions of op on node (-1: any). */
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

/* A silent node's jobs on their way elsewhere: fenced (the provider can
 * terminate the node) or requeued past agent.fence_after (it cannot). */
static int moved(const struct fixture *f, double node)
{
    return count(f, "fence", node) + count(f, "unreachable_requeue", node);
}

static const cJSON *find(const struct fixture *f, const char *op)
{
    const cJSON *a;
    cJSON_ArrayForEach(a, f->plan.actions)
        if (strcmp(cJSON_GetObjectItemCaseSensitive(a, "op")->valuestring, op) == 0)
            return a;
    return NULL;
}

/* The node a placement of job 999 went to, 0 if none. */
static int64_t placed_on(const struct fixture *f)
{
    const cJSON *a;
    cJSON_ArrayForEach(a, f->plan.actions) {
        const cJSON *j = cJSON_GetObjectItemCaseSensitive(a, "job");
        if (strcmp(cJSON_GetObjectItemCaseSensitive(a, "op")->valuestring, "place") == 0 && cJSON_IsNumber(j) &&
            j->valuedouble == 999)
            return (int64_t)cJSON_GetObjectItemCaseSensitive(
                       cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(a, "allocs"), 0), "node")
                ->valuedouble;
    }
    return 0;
}

/* The database was away for 20 minutes: the node last spoke before it, the
 * leader read the database again a minute ago.  Nothing is held against
 * the node until unreachable_after past the return, and the message says
 * so; its job is requeued only requeue_after past the return. */
static void test_outage_not_counted(void **state)
{
    struct fixture *f = *state;
    add_node(f, 1, NOW - 21 * MIN);
    int64_t back = NOW - MIN;

    assert_int_equal(tm_reconcile_silent_ms(&f->cfg, &f->nodes[0], back, NOW), MIN);
    assert_int_equal(tm_reconcile_silent_ms(&f->cfg, &f->nodes[0], 0, NOW), 21 * MIN);
    run(f, NOW, back);
    assert_int_equal(count(f, "node_unreachable", -1), 0);
    assert_int_equal(moved(f, -1), 0);
    assert_int_equal(count(f, "terminate", -1), 0);

    run(f, back + 2 * MIN, back);
    assert_int_equal(count(f, "node_unreachable", 1), 1);
    assert_int_equal(moved(f, -1), 0);
    const cJSON *a = find(f, "node_unreachable");
    const char *why = cJSON_GetObjectItemCaseSensitive(a, "reason")->valuestring;
    /* The silence counted (120 s, not the 22 min since the heartbeat) and from what. */
    assert_non_null(strstr(why, "for 120.0 s counted since when the controller could hear again"));
    const cJSON *in = cJSON_GetObjectItemCaseSensitive(a, "inputs");
    assert_string_equal(cJSON_GetObjectItemCaseSensitive(in, "counted_from")->valuestring, "hearing_since");
    assert_int_equal((int64_t)cJSON_GetObjectItemCaseSensitive(in, "silent_ms")->valuedouble, 2 * MIN);

    f->nodes[0].unreachable_ms = back + 2 * MIN;
    run(f, back + 5 * MIN - 1, back);
    assert_int_equal(moved(f, -1), 0);
    run(f, back + 5 * MIN, back);
    assert_int_equal(moved(f, 1), 1);
}

/* Without a gap the message counts from the last heartbeat, and says so. */
static void test_message_from_heartbeat(void **state)
{
    struct fixture *f = *state;
    add_node(f, 1, NOW - 150 * 1000);
    run(f, NOW, NOW - 60 * MIN);
    const cJSON *a = find(f, "node_unreachable");
    assert_non_null(a);
    assert_non_null(strstr(cJSON_GetObjectItemCaseSensitive(a, "reason")->valuestring,
                           "for 150.0 s counted since its last heartbeat, past agent.unreachable_after of 120 s"));
}

/* 8 of 10 nodes silent for 20 minutes (past requeue_after and
 * terminate_after): none marked, requeued or terminated; one silence_hold
 * for the provider; the queued job goes to a node that speaks. */
static void test_mass_silence_held(void **state)
{
    struct fixture *f = *state;
    for (int i = 1; i <= 10; i++)
        add_node(f, i, i <= 8 ? NOW - 20 * MIN : NOW - 10000);
    add_queued(f);
    run(f, NOW, 0);
    assert_int_equal(count(f, "node_unreachable", -1), 0);
    assert_int_equal(moved(f, -1), 0);
    assert_int_equal(count(f, "terminate", -1), 0);
    assert_int_equal((int)f->plan.nterminates, 0);
    assert_int_equal(f->plan.silence_held, 8);
    assert_int_equal(count(f, "silence_hold", -1), 1);
    const cJSON *a = find(f, "silence_hold");
    assert_string_equal(cJSON_GetObjectItemCaseSensitive(a, "provider")->valuestring, "sim");
    assert_int_equal((int64_t)cJSON_GetObjectItemCaseSensitive(a, "since_ms")->valuedouble, NOW - 20 * MIN);
    const cJSON *in = cJSON_GetObjectItemCaseSensitive(a, "inputs");
    assert_int_equal((int)cJSON_GetObjectItemCaseSensitive(in, "silent_nodes")->valuedouble, 8);
    assert_int_equal((int)cJSON_GetObjectItemCaseSensitive(in, "watched_nodes")->valuedouble, 10);
    int64_t to = placed_on(f);
    assert_true(to == 9 || to == 10); /* never on a held node */

    /* Already marked before the rest fell silent: still not requeued. */
    f->nodes[0].unreachable_ms = NOW - 17 * MIN;
    run(f, NOW + MIN, 0);
    assert_int_equal(moved(f, -1), 0);
    assert_int_equal(count(f, "silence_hold", -1), 1);
}

/* The share: 5 of 10 silent (50% < 55%) are handled one by one; 6 of 10
 * are held. */
static void test_share_boundary(void **state)
{
    struct fixture *f = *state;
    for (int i = 1; i <= 10; i++)
        add_node(f, i, i <= 5 ? NOW - 6 * MIN : NOW - 10000);
    run(f, NOW, 0);
    assert_int_equal(count(f, "node_unreachable", -1), 5);
    assert_int_equal(moved(f, -1), 5);
    assert_int_equal(count(f, "silence_hold", -1), 0);
    f->nodes[5].last_heartbeat_ms = NOW - 6 * MIN;
    run(f, NOW, 0);
    assert_int_equal(count(f, "node_unreachable", -1), 0);
    assert_int_equal(moved(f, -1), 0);
    assert_int_equal(count(f, "silence_hold", -1), 1);
    assert_int_equal(f->plan.silence_held, 6);
}

/* One silent node among ten: unreachable, requeued, terminated as before. */
static void test_single_silent_among_many(void **state)
{
    struct fixture *f = *state;
    for (int i = 1; i <= 10; i++)
        add_node(f, i, i == 4 ? NOW - 16 * MIN : NOW - 10000);
    run(f, NOW, 0);
    assert_int_equal(count(f, "node_unreachable", 4), 1);
    assert_int_equal(moved(f, 4), 1);
    assert_int_equal(count(f, "node_unreachable", -1), 1);
    assert_int_equal(count(f, "silence_hold", -1), 0);
    assert_int_equal(f->plan.silence_held, 0);
}

/* A one-node fleet whose node is dead, and a two-node fleet with both
 * dead: fewer than mass_silence_min_nodes (3) silent, so handled. */
static void test_small_fleet(void **state)
{
    struct fixture *f = *state;
    add_node(f, 1, NOW - 16 * MIN);
    run(f, NOW, 0);
    assert_int_equal(count(f, "node_unreachable", 1), 1);
    assert_int_equal(moved(f, 1), 1);
    add_node(f, 2, NOW - 16 * MIN);
    run(f, NOW, 0);
    assert_int_equal(moved(f, -1), 2);
    assert_int_equal(count(f, "silence_hold", -1), 0);
    /* A third: held (3 of 3). */
    add_node(f, 3, NOW - 16 * MIN);
    run(f, NOW, 0);
    assert_int_equal(moved(f, -1), 0);
    assert_int_equal(count(f, "silence_hold", -1), 1);
    /* min_nodes 0 turns the guard off. */
    f->cfg.agent.mass_silence_min_nodes = 0;
    run(f, NOW, 0);
    assert_int_equal(moved(f, -1), 3);
}

/* Nodes never heard from (past their boot allowance) are not a partition:
 * they are marked unreachable whatever their number, never held. */
static void test_never_heard_not_held(void **state)
{
    struct fixture *f = *state;
    for (int i = 1; i <= 5; i++)
        add_node(f, i, 0)->requested_ms = NOW - 13 * MIN;
    add_node(f, 6, NOW - 10000);
    run(f, NOW, 0);
    assert_int_equal(count(f, "node_unreachable", -1), 5);
    assert_int_equal(count(f, "silence_hold", -1), 0);
    const cJSON *a = find(f, "node_unreachable");
    assert_non_null(strstr(cJSON_GetObjectItemCaseSensitive(a, "reason")->valuestring,
                           "counted since its request plus agent.boot_allowance"));
}

/* The alert: mass_silence:sim holds with the pass's hold, and not for a
 * single silent node. */
static void test_alert(void **state)
{
    struct fixture *f = *state;
    for (int i = 1; i <= 10; i++)
        add_node(f, i, i <= 8 ? NOW - 20 * MIN : NOW - 10000);
    struct tm_alert_input in = {.cfg = &f->cfg, .snap = &f->snap, .now_ms = NOW,
                                .pool_real_agent = f->real};
    struct tm_alert_set set = {0};
    struct tm_alert_state next = {0};
    assert_int_equal(tm_alerts_evaluate(&in, NULL, &set, &next), 0);
    int found = 0;
    for (size_t i = 0; i < set.n; i++)
        if (strcmp(set.items[i].key, "mass_silence:sim") == 0) {
            found++;
            assert_string_equal(set.items[i].decision_subject_kind, "provider");
            assert_non_null(strstr(set.items[i].message, "8 of the 10 nodes of provider sim"));
        }
    assert_int_equal(found, 1);
    tm_alert_set_release(&set);
    tm_alert_state_release(&next);

    /* After a gap the silence starts again: nothing holds. */
    in.hearing_since_ms = NOW - MIN;
    assert_int_equal(tm_alerts_evaluate(&in, NULL, &set, &next), 0);
    for (size_t i = 0; i < set.n; i++)
        assert_null(strstr(set.items[i].key, "mass_silence"));
    tm_alert_set_release(&set);
    tm_alert_state_release(&next);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_outage_not_counted, setup, teardown),
        cmocka_unit_test_setup_teardown(test_message_from_heartbeat, setup, teardown),
        cmocka_unit_test_setup_teardown(test_mass_silence_held, setup, teardown),
        cmocka_unit_test_setup_teardown(test_share_boundary, setup, teardown),
        cmocka_unit_test_setup_teardown(test_single_silent_among_many, setup, teardown),
        cmocka_unit_test_setup_teardown(test_small_fleet, setup, teardown),
        cmocka_unit_test_setup_teardown(test_never_heard_not_held, setup, teardown),
        cmocka_unit_test_setup_teardown(test_alert, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
