/*
 * tests/unit/reconcile/test_reconcile_quota.c: team quotas in the live tick
 * (controller/reconcile/quotas.c), known answers on hand-built snapshots.
 *
 * One on-demand pool of one 8-GPU A100 node (flavor A100, 8 GPUs the fleet
 * can hold).  Team a is guaranteed all 8; team b has no quota.  b's job
 * runs on all 8 GPUs (borrowed: b has no quota), 10 minutes in; a submits
 * an 8-GPU job within its quota.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <inttypes.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "controller/reconcile/reconcile.h"
#include "core/config.h"
#include "tests/lib/snap_fixture.h"

#define CONFIG_MAX(max, extra)                                                          \
    SNAP_FIXTURE_YAML_HEAD("unit")                                                      \
    "providers:\n"                                                                      \
    SNAP_FIXTURE_YAML_SIM("sim", "r1")                                                  \
    "pools:\n"                                                                          \
    "  - {name: od8, provider: sim, zones: [z1], instance_types: [sim.8x], gpu_model: A100," \
    "     gpus_per_node: 8, capacity_type: on_demand, min_nodes: 0, max_nodes: " max ","  \
    "     idle_grace: 60s" extra "}\n"
#define CONFIG(extra) CONFIG_MAX("1", extra)

static const char config_plain[] = CONFIG("");
static const char config_budget[] = CONFIG(", disruption_nodes: 0, disruption_interval: 10m");
static const char config_grows[] = CONFIG_MAX("4", "");

#define NOW 1000000000
#define HOUR 3600000LL

struct fixture {
    SNAP_FIXTURE_MEMBERS(16);
    SNAP_FIXTURE_PASS_MEMBERS;
    struct tm_snap_quota quotas[4];
};

static int setup_with(void **state, const char *yaml)
{
    static struct fixture f;
    memset(&f, 0, sizeof(f));
    if (SNAP_FIXTURE_PASS_INIT(&f, yaml) < 0)
        return -1;
    f.snap.quotas = f.quotas;
    *state = &f;
    return 0;
}

static int setup(void **state)
{
    return setup_with(state, config_plain);
}

static int setup_budget(void **state)
{
    return setup_with(state, config_budget);
}

static int setup_grows(void **state)
{
    return setup_with(state, config_grows);
}

static int teardown(void **state)
{
    SNAP_FIXTURE_PASS_RELEASE((struct fixture *)*state);
    return 0;
}

static void add_quota(struct fixture *f, const char *team, int64_t gpus)
{
    struct tm_snap_quota *q = &f->quotas[f->snap.nquotas++];
    *q = (struct tm_snap_quota){.gpus = gpus, .borrowing_limit = -1, .lending_limit = -1, .weight = 1};
    snprintf(q->team, sizeof(q->team), "%s", team);
    snprintf(q->flavor, sizeof(q->flavor), "A100");
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

static void run_job(struct fixture *f, int64_t id, const char *team, bool preemptible, bool ckpt)
{
    struct tm_snap_job *j = &f->jobs[f->snap.njobs++];
    *j = (struct tm_snap_job){.id = id, .pool = -1, .gpus = 8, .gpu_milli = 1000, .nodes = 1,
                              .preemptible = preemptible, .checkpointable = ckpt,
                              .state = TM_JOB_RUNNING, .estimate_ms = 4 * HOUR,
                              .submitted_ms = NOW - 2 * HOUR, .node_id = 1,
                              .started_ms = NOW - 600000, .attempts = 1};
    snprintf(j->team, sizeof(j->team), "%s", team);
    f->allocs[f->snap.nallocs++] = (struct tm_snap_alloc){.job_id = id, .node_id = 1,
                                                          .gpu_mask = 0xff, .gpu_milli = 1000};
}

static void queue_job(struct fixture *f, int64_t id, const char *team)
{
    struct tm_snap_job *j = &f->jobs[f->snap.njobs++];
    *j = (struct tm_snap_job){.id = id, .pool = -1, .gpus = 8, .gpu_milli = 1000, .nodes = 1,
                              .state = TM_JOB_QUEUED, .estimate_ms = HOUR,
                              .submitted_ms = NOW - 60000};
    snprintf(j->team, sizeof(j->team), "%s", team);
}

static void run(struct fixture *f)
{
    struct tm_reconcile_input in = {.cfg = &f->cfg, .snap = &f->snap, .observed = &f->obs,
                                    .nobserved = 1, .now_ms = NOW, .policy = TM_POLICY_FIFO};
    tm_rc_plan_release(&f->plan);
    assert_int_equal(tm_reconcile(&in, &f->plan), 0);
}

static const cJSON *get(const cJSON *a, const char *key)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(a, key);
    assert_non_null(v);
    return v;
}

/* The wait op of job id, or NULL. */
static const cJSON *wait_of(const struct fixture *f, int64_t id)
{
    for (int k = 0; k < snap_fixture_count_op(f->plan.actions, "wait"); k++) {
        const cJSON *a = snap_fixture_nth_op(f->plan.actions, "wait", k);
        if ((int64_t)get(a, "job")->valuedouble == id)
            return a;
    }
    return NULL;
}

/* b's preemptible job is stopped for a's job: a preempt op naming the job,
 * for whom and the GPU-time redone (8 GPUs x 10 min), counted against the
 * pool's disruption budget; a's job waits on quota for the GPUs. */
static void test_reclaim_preemptible(void **state)
{
    struct fixture *f = *state;
    add_quota(f, "a", 8);
    add_node(f, 1);
    run_job(f, 100, "b", true, false);
    queue_job(f, 200, "a");
    run(f);
    assert_int_equal(snap_fixture_count_op(f->plan.actions, "preempt"), 1);
    const cJSON *p = snap_fixture_nth_op(f->plan.actions, "preempt", 0);
    assert_int_equal((int)get(p, "job")->valuedouble, 100);
    assert_non_null(strstr(get(p, "reason")->valuestring,
                           "quota reclaim: job 100 of team b borrowed team a's quota of A100; "
                           "stopped for job 200, 1.333 GPU-hours redone"));
    const cJSON *in = get(p, "inputs");
    assert_string_equal(get(in, "for_team")->valuestring, "a");
    assert_int_equal((int)get(in, "for_job")->valuedouble, 200);
    assert_true(get(in, "redone_gpu_ms")->valuedouble == 8 * 600000.0);
    assert_string_equal(get(in, "disruption")->valuestring, "quota_reclaim");
    assert_string_equal(get(in, "pool")->valuestring, "od8");
    const cJSON *w = wait_of(f, 200);
    assert_non_null(w);
    assert_non_null(strstr(get(w, "reason")->valuestring, "reclaims 1 borrowed job"));
    assert_string_equal(get(get(w, "inputs"), "held_by")->valuestring, "quota");
    assert_int_equal((int)f->plan.reclaimed, 1);
}

/* A checkpointable borrower is checkpointed (progress kept, nothing
 * redone): the checkpoint op with its node and attempt. */
static void test_reclaim_checkpointable(void **state)
{
    struct fixture *f = *state;
    add_quota(f, "a", 8);
    add_node(f, 1);
    run_job(f, 100, "b", true, true);
    queue_job(f, 200, "a");
    run(f);
    assert_int_equal(snap_fixture_count_op(f->plan.actions, "preempt"), 0);
    const cJSON *c = NULL;
    for (int k = 0; k < snap_fixture_count_op(f->plan.actions, "checkpoint"); k++) {
        const cJSON *a = snap_fixture_nth_op(f->plan.actions, "checkpoint", k);
        if (cJSON_GetObjectItemCaseSensitive(get(a, "inputs"), "quota_reclaim"))
            c = a;
    }
    assert_non_null(c);
    assert_int_equal((int)get(c, "job")->valuedouble, 100);
    assert_int_equal((int)get(c, "node")->valuedouble, 1);
    assert_true(get(c, "started_ms")->valuedouble == NOW - 600000);
    assert_non_null(strstr(get(c, "reason")->valuestring, "checkpointed for job 200, nothing redone"));
    assert_true(get(get(c, "inputs"), "redone_gpu_ms")->valuedouble == 0);
}

/* Work that is neither preemptible nor checkpointable is never reclaimed:
 * the owner waits, and says why. */
static void test_never_reclaim_nonpreemptible(void **state)
{
    struct fixture *f = *state;
    add_quota(f, "a", 8);
    add_node(f, 1);
    run_job(f, 100, "b", false, false);
    queue_job(f, 200, "a");
    run(f);
    assert_int_equal(snap_fixture_count_op(f->plan.actions, "preempt"), 0);
    assert_int_equal(snap_fixture_count_op(f->plan.actions, "checkpoint"), 0);
    const cJSON *w = wait_of(f, 200);
    assert_non_null(w);
    assert_non_null(strstr(get(w, "reason")->valuestring, "waits on quota"));
}

/* The pool's disruption budget is spent: no reclaim this pass. */
static void test_disruption_budget(void **state)
{
    struct fixture *f = *state;
    add_quota(f, "a", 8);
    add_node(f, 1);
    run_job(f, 100, "b", true, false);
    queue_job(f, 200, "a");
    run(f);
    assert_int_equal(snap_fixture_count_op(f->plan.actions, "preempt"), 0);
    assert_int_equal((int)f->plan.reclaimed, 0);
}

/* A team with no quota waits on quota for a non-preemptible job on a
 * flavor under quotas; with no quota set at all, the pass is as before
 * (placed) and writes no view. */
static void test_no_quota_team_and_no_quotas(void **state)
{
    struct fixture *f = *state;
    add_node(f, 1);
    queue_job(f, 200, "b");
    run(f);
    assert_int_equal(snap_fixture_count_op(f->plan.actions, "place"), 1);
    assert_null(f->plan.quota_view);
    add_quota(f, "a", 8);
    run(f);
    assert_int_equal(snap_fixture_count_op(f->plan.actions, "place"), 0);
    const cJSON *w = wait_of(f, 200);
    assert_non_null(w);
    assert_non_null(strstr(get(w, "reason")->valuestring, "waits on quota"));
}

/* A fleet that can still grow (4 nodes, 32 GPUs, 8 of them a's): b
 * borrows the GPUs under no quota, so a's job waits for a new node and
 * nothing is reclaimed. */
static void test_no_reclaim_while_the_fleet_grows(void **state)
{
    struct fixture *f = *state;
    add_quota(f, "a", 8);
    add_node(f, 1);
    run_job(f, 100, "b", true, false);
    queue_job(f, 200, "a");
    run(f);
    assert_int_equal(snap_fixture_count_op(f->plan.actions, "preempt"), 0);
    assert_int_equal((int)f->plan.reclaimed, 0);
    const cJSON *w = wait_of(f, 200);
    assert_non_null(w);
    assert_null(strstr(get(w, "reason")->valuestring, "quota"));
}

/* The view: what a is guaranteed and lends while b borrows it. */
static void test_view(void **state)
{
    struct fixture *f = *state;
    add_quota(f, "a", 8);
    add_node(f, 1);
    run_job(f, 100, "b", true, false);
    run(f);
    assert_non_null(f->plan.quota_view);
    cJSON *v = cJSON_Parse(f->plan.quota_view);
    assert_non_null(v);
    assert_string_equal(get(v, "overcommit")->valuestring, "");
    const cJSON *x;
    int seen = 0;
    cJSON_ArrayForEach(x, get(v, "items")) {
        const char *team = get(x, "team")->valuestring;
        if (strcmp(team, "a") == 0) {
            assert_int_equal((int)get(x, "quota")->valuedouble, 8);
            assert_int_equal((int)get(x, "used")->valuedouble, 0);
            assert_int_equal((int)get(x, "lent")->valuedouble, 8);
            seen++;
        } else {
            assert_int_equal((int)get(x, "used")->valuedouble, 8);
            assert_int_equal((int)get(x, "borrowed")->valuedouble, 8);
            seen++;
        }
    }
    assert_int_equal(seen, 2);
    cJSON_Delete(v);
}

/* Quotas above what the fleet can hold: the overcommit line. */
static void test_overcommit(void **state)
{
    struct fixture *f = *state;
    add_quota(f, "a", 8);
    add_quota(f, "b", 4);
    run(f);
    cJSON *v = cJSON_Parse(f->plan.quota_view);
    assert_string_equal(get(v, "overcommit")->valuestring, "quotas exceed the fleet: A100 by 4 GPUs");
    cJSON_Delete(v);
}

/* A stored set the configuration no longer fits (its flavor's pools were
 * removed): scheduled without quotas, and the view says why. */
static void test_stored_set_refused(void **state)
{
    struct fixture *f = *state;
    add_quota(f, "a", 8);
    snprintf(f->quotas[0].flavor, sizeof(f->quotas[0].flavor), "H100");
    add_node(f, 1);
    queue_job(f, 200, "b");
    run(f);
    assert_int_equal(snap_fixture_count_op(f->plan.actions, "place"), 1);
    cJSON *v = cJSON_Parse(f->plan.quota_view);
    assert_non_null(v);
    assert_non_null(strstr(get(v, "error")->valuestring, "quotas[0].flavor"));
    cJSON_Delete(v);
}

/* The whole-set check the daemon hands the API: the model's refusals. */
static void test_check(void **state)
{
    struct fixture *f = *state;
    char err[200];
    struct tm_quota_row ok[] = {{.team = "a", .flavor = "A100", .gpus = 8, .borrowing_limit = NAN,
                                 .lending_limit = NAN, .weight = NAN}};
    assert_int_equal(tm_reconcile_quota_check(&f->cfg, ok, 1, err, sizeof(err)), 0);
    struct tm_quota_row bad[] = {{.team = "a", .flavor = "H100", .gpus = 8, .borrowing_limit = NAN,
                                  .lending_limit = NAN, .weight = NAN}};
    assert_int_not_equal(tm_reconcile_quota_check(&f->cfg, bad, 1, err, sizeof(err)), 0);
    assert_non_null(strstr(err, "quotas[0].flavor"));
    struct tm_quota_row cycle[] = {
        {.team = "a", .org = "o", .flavor = "A100", .gpus = 1, .borrowing_limit = NAN,
         .lending_limit = NAN, .weight = NAN},
        {.team = "o", .org = "a", .flavor = "A100", .gpus = 1, .borrowing_limit = NAN,
         .lending_limit = NAN, .weight = NAN},
    };
    assert_int_not_equal(tm_reconcile_quota_check(&f->cfg, cycle, 2, err, sizeof(err)), 0);
    assert_non_null(strstr(err, ".org"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_reclaim_preemptible, setup, teardown),
        cmocka_unit_test_setup_teardown(test_reclaim_checkpointable, setup, teardown),
        cmocka_unit_test_setup_teardown(test_never_reclaim_nonpreemptible, setup, teardown),
        cmocka_unit_test_setup_teardown(test_disruption_budget, setup_budget, teardown),
        cmocka_unit_test_setup_teardown(test_no_quota_team_and_no_quotas, setup, teardown),
        cmocka_unit_test_setup_teardown(test_no_reclaim_while_the_fleet_grows, setup_grows, teardown),
        cmocka_unit_test_setup_teardown(test_view, setup, teardown),
        cmocka_unit_test_setup_teardown(test_overcommit, setup, teardown),
        cmocka_unit_test_setup_teardown(test_stored_set_refused, setup, teardown),
        cmocka_unit_test_setup_teardown(test_check, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
