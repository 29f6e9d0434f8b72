/*
 * tests/unit/reconcile/test_reconcile.c: the reconcile pass as a table of
 * (configuration, snapshot, what the cloud lists, now) -> plan.
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
    "providers:\n"
    SNAP_FIXTURE_YAML_SIM("sim", "r1")
    "pools:\n"
    "  - {name: od, provider: sim, zones: [z1, z2], instance_types: [sim.8x], gpu_model: A100,"
    "     gpus_per_node: 8, capacity_type: on_demand, min_nodes: 0, max_nodes: 2, idle_grace: 60s}\n"
    "  - {name: spot, provider: sim, zones: [z1], instance_types: [sim.8x], gpu_model: A100,"
    "     gpus_per_node: 8, capacity_type: spot, min_nodes: 0, max_nodes: 3, idle_grace: 60s}\n";

#define NOW 1000000000

struct fixture {
    SNAP_FIXTURE_MEMBERS(8);
    SNAP_FIXTURE_PASS_MEMBERS;
};

static int setup(void **state)
{
    static struct fixture f;
    memset(&f, 0, sizeof(f));
    if (SNAP_FIXTURE_PASS_INIT(&f, config_yaml) < 0)
        return -1;
    *state = &f;
    return 0;
}

static int teardown(void **state)
{
    SNAP_FIXTURE_PASS_RELEASE((struct fixture *)*state);
    return 0;
}

static struct tm_snap_node *add_node(struct fixture *f, int64_t id, int pool, enum tm_node_state st,
                                     const char *token, const char *instance)
{
    struct tm_snap_node *n = &f->nodes[f->snap.nnodes++];
    *n = (struct tm_snap_node){.id = id, .pool = pool, .gpus = 8, .cpu_milli = 96000,
                               .memory_mib = 1000000, .state = st, .requested_ms = NOW - 100000,
                               .capacity = pool == 1 ? TM_CAPACITY_SPOT : TM_CAPACITY_ON_DEMAND};
    snprintf(n->token, sizeof(n->token), "%s", token);
    snprintf(n->instance_id, sizeof(n->instance_id), "%s", instance);
    snprintf(n->instance_type, sizeof(n->instance_type), "sim.8x");
    snprintf(n->zone, sizeof(n->zone), "z1");
    snprintf(n->gpu_model, sizeof(n->gpu_model), "A100");
    return n;
}

static struct tm_instance *add_instance(struct fixture *f, const char *id, const char *token,
                                        enum tm_instance_state st)
{
    struct tm_instance *i = &f->inst[f->obs.n++];
    memset(i, 0, sizeof(*i));
    snprintf(i->id, sizeof(i->id), "%s", id);
    snprintf(i->token, sizeof(i->token), "%s", token);
    snprintf(i->pool, sizeof(i->pool), "od");
    i->state = st;
    return i;
}

static struct tm_snap_job *add_job(struct fixture *f, int64_t id, int gpus, bool preemptible)
{
    struct tm_snap_job *j = &f->jobs[f->snap.njobs++];
    *j = (struct tm_snap_job){.id = id, .pool = -1, .gpus = gpus, .gpu_milli = 1000, .nodes = 1,
                              .preemptible = preemptible, .state = TM_JOB_QUEUED,
                              .submitted_ms = NOW - 1000 * id};
    snprintf(j->team, sizeof(j->team), "t");
    return j;
}

static void run(struct fixture *f)
{
    struct tm_reconcile_input in = {.cfg = &f->cfg, .snap = &f->snap, .observed = &f->obs,
                                    .nobserved = 1, .now_ms = NOW, .policy = TM_POLICY_FIFO};
    assert_int_equal(tm_reconcile(&in, &f->plan), 0);
}

/* How many actions of op the plan holds (optionally about one subject). */
static int count_op(const struct fixture *f, const char *op, const char *key, double subject)
{
    int n = 0;
    const cJSON *a;
    cJSON_ArrayForEach(a, f->plan.actions) {
        const cJSON *o = cJSON_GetObjectItemCaseSensitive(a, "op");
        if (!cJSON_IsString(o) || strcmp(o->valuestring, op) != 0)
            continue;
        if (key) {
            const cJSON *s = cJSON_GetObjectItemCaseSensitive(a, key);
            if (!cJSON_IsNumber(s) || s->valuedouble != subject)
                continue;
        }
        n++;
    }
    return n;
}

static const cJSON *first_op(const struct fixture *f, const char *op)
{
    const cJSON *a;
    cJSON_ArrayForEach(a, f->plan.actions) {
        const cJSON *o = cJSON_GetObjectItemCaseSensitive(a, "op");
        if (cJSON_IsString(o) && strcmp(o->valuestring, op) == 0)
            return a;
    }
    fail_msg("no %s action in the plan", op);
    return NULL;
}

static void test_requested_node_running_becomes_ready(void **state)
{
    struct fixture *f = *state;
    add_node(f, 1, 0, TM_NODE_BOOTING, "tok-1", "i-1");
    add_instance(f, "i-1", "tok-1", TM_INSTANCE_RUNNING);
    run(f);
    assert_int_equal(count_op(f, "node_ready", "node", 1), 1);
    assert_int_equal(f->plan.nlaunches, 0);
    assert_int_equal(f->plan.nterminates, 0);
}

static void test_requested_node_without_instance_is_launched_again_same_token(void **state)
{
    struct fixture *f = *state;
    add_node(f, 1, 0, TM_NODE_REQUESTED, "tok-1", "");
    run(f);
    assert_int_equal(f->plan.nlaunches, 1);
    assert_int_equal(f->plan.launches[0].node_id, 1);
    assert_string_equal(f->plan.launches[0].token, "tok-1");
    assert_int_equal(count_op(f, "request_node", NULL, 0), 0);
}

static void test_instance_found_by_token_is_adopted_not_relaunched(void **state)
{
    struct fixture *f = *state;
    add_node(f, 1, 0, TM_NODE_REQUESTED, "tok-1", "");
    add_instance(f, "i-9", "tok-1", TM_INSTANCE_PENDING);
    run(f);
    assert_int_equal(count_op(f, "adopt", "node", 1), 1);
    assert_int_equal(f->plan.nlaunches, 0);
}

static void test_orphan_terminated_only_after_complete_listing(void **state)
{
    struct fixture *f = *state;
    add_instance(f, "i-7", "someone-elses-token", TM_INSTANCE_RUNNING);
    f->obs.complete = false;
    run(f);
    assert_int_equal(count_op(f, "orphan", NULL, 0), 0);
    assert_int_equal(f->plan.nterminates, 0);
    tm_rc_plan_release(&f->plan);
    f->obs.complete = true;
    run(f);
    assert_int_equal(count_op(f, "orphan", NULL, 0), 1);
    assert_int_equal(f->plan.nterminates, 1);
    assert_string_equal(f->plan.terminates[0].instance_id, "i-7");
}

static void test_ready_node_gone_from_cloud_requeues(void **state)
{
    struct fixture *f = *state;
    add_node(f, 1, 1, TM_NODE_READY, "tok-1", "i-1");
    struct tm_instance *i = add_instance(f, "i-1", "tok-1", TM_INSTANCE_TERMINATED);
    i->interrupted = true;
    run(f);
    assert_int_equal(count_op(f, "node_gone", "node", 1), 1);
    const cJSON *a = first_op(f, "node_gone");
    assert_string_equal(cJSON_GetObjectItem(a, "state")->valuestring, "interrupted");
}

static void test_queued_job_is_placed_on_ready_node(void **state)
{
    struct fixture *f = *state;
    add_node(f, 1, 0, TM_NODE_READY, "tok-1", "i-1");
    add_instance(f, "i-1", "tok-1", TM_INSTANCE_RUNNING);
    add_job(f, 10, 4, false);
    run(f);
    assert_int_equal(count_op(f, "place", "job", 10), 1);
    assert_int_equal(count_op(f, "request_node", NULL, 0), 0);
}

static void test_queue_grows_pool_up_to_max(void **state)
{
    struct fixture *f = *state;
    for (int i = 0; i < 5; i++)
        add_job(f, 10 + i, 8, false); /* five whole nodes wanted, max is 2 */
    run(f);
    assert_int_equal(count_op(f, "request_node", NULL, 0), 2);
    assert_int_equal(f->plan.nlaunches, 2);
    assert_string_not_equal(f->plan.launches[0].token, f->plan.launches[1].token);
    /* Zones spread. */
    assert_string_not_equal(f->plan.launches[0].zone, f->plan.launches[1].zone);
}

static void test_booting_capacity_counts_before_asking_more(void **state)
{
    struct fixture *f = *state;
    add_node(f, 1, 0, TM_NODE_BOOTING, "tok-1", "i-1");
    add_instance(f, "i-1", "tok-1", TM_INSTANCE_PENDING);
    add_job(f, 10, 4, false);
    add_job(f, 11, 4, false);
    run(f);
    assert_int_equal(count_op(f, "request_node", NULL, 0), 0);
}

static void test_preemptible_goes_to_spot_other_to_on_demand(void **state)
{
    struct fixture *f = *state;
    add_job(f, 10, 8, true);
    run(f);
    const cJSON *a = first_op(f, "request_node");
    assert_string_equal(cJSON_GetObjectItem(a, "pool")->valuestring, "spot");
    assert_string_equal(cJSON_GetObjectItem(a, "capacity_type")->valuestring, "spot");
    tm_rc_plan_release(&f->plan);
    f->snap.njobs = 0;
    add_job(f, 11, 8, false);
    run(f);
    a = first_op(f, "request_node");
    assert_string_equal(cJSON_GetObjectItem(a, "pool")->valuestring, "od");
}

static void test_idle_node_released_only_past_grace(void **state)
{
    struct fixture *f = *state;
    struct tm_snap_node *n = add_node(f, 1, 0, TM_NODE_READY, "tok-1", "i-1");
    add_instance(f, "i-1", "tok-1", TM_INSTANCE_RUNNING);
    n->idle_since_ms = NOW - 59000;
    run(f);
    assert_int_equal(count_op(f, "terminate", "node", 1), 0);
    tm_rc_plan_release(&f->plan);
    n->idle_since_ms = NOW - 61000;
    run(f);
    assert_int_equal(count_op(f, "terminate", "node", 1), 1);
    assert_int_equal(f->plan.nterminates, 1);
    assert_string_equal(f->plan.terminates[0].instance_id, "i-1");
}

static void test_busy_node_not_released(void **state)
{
    struct fixture *f = *state;
    struct tm_snap_node *n = add_node(f, 1, 0, TM_NODE_READY, "tok-1", "i-1");
    add_instance(f, "i-1", "tok-1", TM_INSTANCE_RUNNING);
    n->idle_since_ms = NOW - 600000;
    struct tm_snap_job *j = add_job(f, 10, 8, false);
    j->state = TM_JOB_RUNNING;
    j->started_ms = NOW - 1000;
    f->allocs[f->snap.nallocs++] = (struct tm_snap_alloc){.job_id = 10, .node_id = 1, .gpu_mask = 0xff,
                                                          .gpu_milli = 1000};
    run(f);
    assert_int_equal(count_op(f, "terminate", NULL, 0), 0);
}

static void test_terminating_node_confirmed_terminated(void **state)
{
    struct fixture *f = *state;
    add_node(f, 1, 0, TM_NODE_TERMINATING, "tok-1", "i-1");
    add_instance(f, "i-1", "tok-1", TM_INSTANCE_TERMINATED);
    add_node(f, 2, 0, TM_NODE_TERMINATING, "tok-2", "i-2");
    add_instance(f, "i-2", "tok-2", TM_INSTANCE_RUNNING);
    run(f);
    assert_int_equal(count_op(f, "node_gone", "node", 1), 1);
    assert_int_equal(count_op(f, "node_gone", "node", 2), 0);
    assert_int_equal(f->plan.nterminates, 1); /* node 2 is asked again */
    assert_string_equal(f->plan.terminates[0].instance_id, "i-2");
}

static void test_same_input_same_plan(void **state)
{
    struct fixture *f = *state;
    add_node(f, 1, 0, TM_NODE_READY, "tok-1", "i-1");
    add_instance(f, "i-1", "tok-1", TM_INSTANCE_RUNNING);
    for (int i = 0; i < 6; i++)
        add_job(f, 10 + i, 1 + i % 4, i % 2);
    run(f);
    char *a = cJSON_PrintUnformatted(f->plan.actions);
    tm_rc_plan_release(&f->plan);
    run(f);
    char *b = cJSON_PrintUnformatted(f->plan.actions);
    assert_string_equal(a, b);
    cJSON_free(a);
    cJSON_free(b);
}

static void test_missing_estimate_predicted_from_history(void **state)
{
    struct fixture *f = *state;
    struct tm_snap_history hist[4];
    for (int i = 0; i < 4; i++) {
        hist[i] = (struct tm_snap_history){.klass = TM_CLASS_TRAIN, .gpu_milli = 4000,
                                           .runtime_ms = 600000 + i * 1000};
        snprintf(hist[i].team, sizeof(hist[i].team), "t");
    }
    f->snap.history = hist;
    f->snap.nhistory = 4;
    add_node(f, 1, 0, TM_NODE_READY, "tok-1", "i-1");
    add_instance(f, "i-1", "tok-1", TM_INSTANCE_RUNNING);
    add_job(f, 10, 4, false); /* no estimate of its own */
    run(f);
    const cJSON *in = cJSON_GetObjectItem(first_op(f, "place"), "inputs");
    /* Median of 600, 601, 602, 603 s. */
    assert_true(cJSON_GetObjectItem(in, "estimate_s")->valuedouble >= 600);
    assert_true(cJSON_GetObjectItem(in, "estimate_s")->valuedouble <= 603);
    assert_string_equal(cJSON_GetObjectItem(in, "estimate_from")->valuestring, "history of similar jobs");
    f->snap.history = NULL;
    f->snap.nhistory = 0;
}

/* A job submitted again (same team, name, class, GPUs: three earlier runs
 * of an hour) has a known estimate, and is placed where the work already
 * running ends soonest after it (node 2, whose job ends in 2 h), not first
 * fit (node 1, 10 h): node 2 then empties on time.  A job with only
 * similar work's history keeps first fit. */
static void test_recurring_job_placed_by_end(void **state)
{
    struct fixture *f = *state;
    struct tm_snap_history hist[3];
    for (int i = 0; i < 3; i++) {
        hist[i] = (struct tm_snap_history){.gpu_milli = 1000, .runtime_ms = 3600000};
        snprintf(hist[i].team, sizeof(hist[i].team), "t");
        snprintf(hist[i].name, sizeof(hist[i].name), "nightly-eval");
    }
    f->snap.history = hist;
    f->snap.nhistory = 3;
    for (int n = 1; n <= 2; n++) {
        char tok[16], id[16];
        snprintf(tok, sizeof(tok), "tok-%d", n);
        snprintf(id, sizeof(id), "i-%d", n);
        add_node(f, n, 0, TM_NODE_READY, tok, id);
        add_instance(f, id, tok, TM_INSTANCE_RUNNING);
        struct tm_snap_job *r = add_job(f, 20 + n, 1, false);
        r->state = TM_JOB_RUNNING;
        r->started_ms = NOW - 1000;
        r->estimate_ms = n == 1 ? 10 * 3600000LL : 2 * 3600000LL;
        f->allocs[f->snap.nallocs++] = (struct tm_snap_alloc){.job_id = 20 + n, .node_id = n,
                                                              .gpu_mask = 0x1, .gpu_milli = 1000};
    }
    struct tm_snap_job *again = add_job(f, 10, 1, false);
    snprintf(again->name, sizeof(again->name), "nightly-eval");
    struct tm_snap_job *other = add_job(f, 11, 1, false);
    snprintf(other->name, sizeof(other->name), "ad-hoc");
    run(f);
    const cJSON *a;
    int seen = 0;
    cJSON_ArrayForEach(a, f->plan.actions) {
        const cJSON *op = cJSON_GetObjectItem(a, "op");
        if (!cJSON_IsString(op) || strcmp(op->valuestring, "place") != 0)
            continue;
        double job = cJSON_GetObjectItem(a, "job")->valuedouble;
        const cJSON *al = cJSON_GetArrayItem(cJSON_GetObjectItem(a, "allocs"), 0);
        const cJSON *in = cJSON_GetObjectItem(a, "inputs");
        double node = cJSON_GetObjectItem(al, "node")->valuedouble;
        if (job == 10) {
            assert_true(node == 2);
            assert_string_equal(cJSON_GetObjectItem(in, "estimate_from")->valuestring,
                                "earlier runs of this job");
        } else {
            assert_true(job == 11);
            assert_true(node == 1);
            assert_string_equal(cJSON_GetObjectItem(in, "estimate_from")->valuestring,
                                "history of similar jobs");
        }
        seen++;
    }
    assert_int_equal(seen, 2);
    f->snap.history = NULL;
    f->snap.nhistory = 0;
}

static int count_budget(const struct fixture *f, const char *kind, const char *scope)
{
    int n = 0;
    const cJSON *a;
    cJSON_ArrayForEach(a, f->plan.actions) {
        const cJSON *op = cJSON_GetObjectItem(a, "op");
        if (!cJSON_IsString(op) || strcmp(op->valuestring, "budget") != 0)
            continue;
        if (strcmp(cJSON_GetObjectItem(a, "kind")->valuestring, kind) == 0 &&
            strcmp(cJSON_GetObjectItem(a, "scope")->valuestring, scope) == 0)
            n++;
    }
    return n;
}

static void test_org_hard_cap_refuses_exactly_the_launch_that_overshoots(void **state)
{
    struct fixture *f = *state;
    /* A launch here: $32/h for 90 s boot + 1 h of work + 60 s grace = $33.33.
     * $50 holds one, not two; $70 holds two. */
    struct tm_snap_budget cap = {.org = true, .cap_cents = 5000, .hard = true, .warn_percent = 80};
    snprintf(cap.scope, sizeof(cap.scope), "acme");
    f->snap.budgets = &cap;
    f->snap.nbudgets = 1;
    for (int i = 0; i < 3; i++)
        add_job(f, 10 + i, 8, false)->estimate_ms = 3600000;
    run(f);
    assert_int_equal(count_op(f, "request_node", NULL, 0), 1);
    assert_int_equal(count_budget(f, "budget_refuse", "org:acme"), 1);
    const cJSON *in = cJSON_GetObjectItem(first_op(f, "budget"), "inputs");
    assert_int_equal((int)cJSON_GetObjectItem(in, "cap_cents")->valuedouble, 5000);
    assert_true(cJSON_GetObjectItem(in, "projected_cents")->valuedouble > 5000);
    tm_rc_plan_release(&f->plan);
    cap.cap_cents = 7000;
    run(f);
    assert_int_equal(count_op(f, "request_node", NULL, 0), 2);
    assert_int_equal(count_budget(f, "budget_refuse", "org:acme"), 0);
    /* What the ledger already holds this month counts. */
    tm_rc_plan_release(&f->plan);
    struct tm_snap_spend spent = {.cents = 4000};
    snprintf(spent.period, sizeof(spent.period), "1970-01");
    f->snap.spend = &spent;
    f->snap.nspend = 1;
    run(f);
    assert_int_equal(count_op(f, "request_node", NULL, 0), 0);
    /* Last month's spend does not. */
    tm_rc_plan_release(&f->plan);
    snprintf(spent.period, sizeof(spent.period), "1969-12");
    run(f);
    assert_int_equal(count_op(f, "request_node", NULL, 0), 2);
    f->snap.budgets = NULL;
    f->snap.nbudgets = 0;
    f->snap.spend = NULL;
    f->snap.nspend = 0;
}

static void test_team_hard_cap_holds_the_job_that_would_pass_it(void **state)
{
    struct fixture *f = *state;
    /* 4 GPUs for 1 h at $4 per GPU-hour: $16.  A $20 cap takes one such
     * job, not two; another team's job is not counted against it. */
    struct tm_snap_budget cap = {.cap_cents = 2000, .hard = true, .warn_percent = 80};
    snprintf(cap.scope, sizeof(cap.scope), "t");
    f->snap.budgets = &cap;
    f->snap.nbudgets = 1;
    add_node(f, 1, 0, TM_NODE_READY, "tok-1", "i-1");
    add_instance(f, "i-1", "tok-1", TM_INSTANCE_RUNNING);
    add_job(f, 10, 4, false)->estimate_ms = 3600000;
    add_job(f, 11, 4, false)->estimate_ms = 3600000;
    struct tm_snap_job *other = add_job(f, 12, 4, false);
    snprintf(other->team, sizeof(other->team), "u");
    run(f);
    assert_int_equal(count_op(f, "place", "job", 10), 1);
    assert_int_equal(count_op(f, "place", "job", 11), 0);
    /* The held job does not block another team's work from the room. */
    assert_int_equal(count_op(f, "place", "job", 12), 1);
    assert_int_equal(count_budget(f, "budget_refuse", "team:t"), 1);
    assert_int_equal(count_op(f, "wait", "job", 11), 1);
    f->snap.budgets = NULL;
    f->snap.nbudgets = 0;
}

static void test_soft_cap_warns_without_refusing(void **state)
{
    struct fixture *f = *state;
    struct tm_snap_budget cap = {.org = true, .cap_cents = 4000, .hard = false, .warn_percent = 50};
    snprintf(cap.scope, sizeof(cap.scope), "acme");
    f->snap.budgets = &cap;
    f->snap.nbudgets = 1;
    for (int i = 0; i < 3; i++)
        add_job(f, 10 + i, 8, false)->estimate_ms = 3600000;
    run(f);
    assert_int_equal(count_op(f, "request_node", NULL, 0), 2);
    assert_int_equal(count_budget(f, "budget_refuse", "org:acme"), 0);
    assert_int_equal(count_budget(f, "budget_warn", "org:acme"), 1);
    f->snap.budgets = NULL;
    f->snap.nbudgets = 0;
}

static void test_gang_is_one_place_action_with_every_node(void **state)
{
    struct fixture *f = *state;
    add_node(f, 1, 0, TM_NODE_READY, "tok-1", "i-1");
    add_instance(f, "i-1", "tok-1", TM_INSTANCE_RUNNING);
    add_node(f, 2, 0, TM_NODE_READY, "tok-2", "i-2");
    add_instance(f, "i-2", "tok-2", TM_INSTANCE_RUNNING);
    add_job(f, 9, 1, false);                    /* placed alongside */
    add_job(f, 10, 4, false)->nodes = 2;        /* 4 GPUs on each of 2 nodes */
    run(f);
    assert_int_equal(count_op(f, "place", "job", 10), 1);
    assert_int_equal(count_op(f, "place", "job", 9), 1);
    const cJSON *a;
    cJSON_ArrayForEach(a, f->plan.actions) {
        const cJSON *job = cJSON_GetObjectItem(a, "job");
        if (strcmp(cJSON_GetObjectItem(a, "op")->valuestring, "place") != 0 || job->valuedouble != 10)
            continue;
        const cJSON *allocs = cJSON_GetObjectItem(a, "allocs");
        assert_int_equal(cJSON_GetArraySize(allocs), 2);
        assert_true(cJSON_GetObjectItem(cJSON_GetArrayItem(allocs, 0), "node")->valuedouble !=
                    cJSON_GetObjectItem(cJSON_GetArrayItem(allocs, 1), "node")->valuedouble);
    }
}

static void test_gpu_model_lists(void **state)
{
    (void)state;
    assert_true(tm_gpu_model_accepts("", "A100"));
    assert_true(tm_gpu_model_accepts("V100|A100", "A100"));
    assert_false(tm_gpu_model_accepts("V100|A10", "A100"));
    assert_false(tm_gpu_model_accepts("A1000", "A100"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_requested_node_running_becomes_ready, setup, teardown),
        cmocka_unit_test_setup_teardown(test_requested_node_without_instance_is_launched_again_same_token, setup, teardown),
        cmocka_unit_test_setup_teardown(test_instance_found_by_token_is_adopted_not_relaunched, setup, teardown),
        cmocka_unit_test_setup_teardown(test_orphan_terminated_only_after_complete_listing, setup, teardown),
        cmocka_unit_test_setup_teardown(test_ready_node_gone_from_cloud_requeues, setup, teardown),
        cmocka_unit_test_setup_teardown(test_queued_job_is_placed_on_ready_node, setup, teardown),
        cmocka_unit_test_setup_teardown(test_queue_grows_pool_up_to_max, setup, teardown),
        cmocka_unit_test_setup_teardown(test_booting_capacity_counts_before_asking_more, setup, teardown),
        cmocka_unit_test_setup_teardown(test_preemptible_goes_to_spot_other_to_on_demand, setup, teardown),
        cmocka_unit_test_setup_teardown(test_idle_node_released_only_past_grace, setup, teardown),
        cmocka_unit_test_setup_teardown(test_busy_node_not_released, setup, teardown),
        cmocka_unit_test_setup_teardown(test_terminating_node_confirmed_terminated, setup, teardown),
        cmocka_unit_test_setup_teardown(test_same_input_same_plan, setup, teardown),
        cmocka_unit_test_setup_teardown(test_missing_estimate_predicted_from_history, setup, teardown),
        cmocka_unit_test_setup_teardown(test_recurring_job_placed_by_end, setup, teardown),
        cmocka_unit_test_setup_teardown(test_org_hard_cap_refuses_exactly_the_launch_that_overshoots, setup, teardown),
        cmocka_unit_test_setup_teardown(test_team_hard_cap_holds_the_job_that_would_pass_it, setup, teardown),
        cmocka_unit_test_setup_teardown(test_soft_cap_warns_without_refusing, setup, teardown),
        cmocka_unit_test_setup_teardown(test_gang_is_one_place_action_with_every_node, setup, teardown),
        cmocka_unit_test(test_gpu_model_lists),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
