/*
 * tests/unit/reconcile/test_reconcile_spot.c: spot interruptions in the reconcile
 * pass, as (snapshot, listing, now) -> plan with known answers: a notice
 * cordons the node and checkpoints its checkpointable jobs with their
 * progress kept; a node that goes requeues what still ran on it with the
 * attempt's GPU time counted as lost.
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
    "  - {name: od, provider: sim, zones: [z1], instance_types: [sim.8x], gpu_model: A100,"
    "     gpus_per_node: 8, capacity_type: on_demand, min_nodes: 0, max_nodes: 2, idle_grace: 60s}\n"
    "  - {name: spot, provider: sim, zones: [z1], instance_types: [sim.8x], gpu_model: A100,"
    "     gpus_per_node: 8, capacity_type: spot, min_nodes: 0, max_nodes: 3, idle_grace: 60s,"
    "     spot_hazard: 4, spot_notice: 30s}\n";

#define NOW 1000000000
#define SPOT 1 /* pool index */

struct fixture {
    SNAP_FIXTURE_MEMBERS(16);
    SNAP_FIXTURE_PASS_MEMBERS;
    size_t nobserved;
};

static int setup(void **state)
{
    static struct fixture f;
    memset(&f, 0, sizeof(f));
    if (SNAP_FIXTURE_PASS_INIT(&f, config_yaml) < 0)
        return -1;
    f.nobserved = 1;
    *state = &f;
    return 0;
}

static int teardown(void **state)
{
    SNAP_FIXTURE_PASS_RELEASE((struct fixture *)*state);
    return 0;
}

/* A spot node and, when st is not -1, its instance as the cloud lists it. */
static struct tm_snap_node *spot_node(struct fixture *f, int64_t id, enum tm_node_state nst,
                                      int ist, int64_t notice_ms)
{
    struct tm_snap_node *n = &f->nodes[f->snap.nnodes++];
    *n = (struct tm_snap_node){.id = id, .pool = SPOT, .gpus = 8, .cpu_milli = 96000,
                               .memory_mib = 1000000, .state = nst, .requested_ms = NOW - 3600000,
                               .capacity = TM_CAPACITY_SPOT, .price_uusd_per_hour = 10000000};
    snprintf(n->token, sizeof(n->token), "tok-%lld", (long long)id);
    snprintf(n->instance_id, sizeof(n->instance_id), "i-%lld", (long long)id);
    snprintf(n->instance_type, sizeof(n->instance_type), "sim.8x");
    snprintf(n->zone, sizeof(n->zone), "z1");
    snprintf(n->gpu_model, sizeof(n->gpu_model), "A100");
    if (ist >= 0) {
        struct tm_instance *i = &f->inst[f->obs.n++];
        memset(i, 0, sizeof(*i));
        snprintf(i->id, sizeof(i->id), "i-%lld", (long long)id);
        snprintf(i->token, sizeof(i->token), "tok-%lld", (long long)id);
        snprintf(i->pool, sizeof(i->pool), "spot");
        i->capacity = TM_CAPACITY_SPOT;
        i->state = (enum tm_instance_state)ist;
        i->notice_ms = notice_ms;
    }
    return n;
}

static struct tm_snap_job *add_job(struct fixture *f, int64_t id, int gpus, bool checkpointable)
{
    struct tm_snap_job *j = &f->jobs[f->snap.njobs++];
    *j = (struct tm_snap_job){.id = id, .pool = -1, .gpus = gpus, .gpu_milli = 1000, .nodes = 1,
                              .preemptible = true, .checkpointable = checkpointable,
                              .state = TM_JOB_QUEUED, .submitted_ms = NOW - 7200000 + id};
    snprintf(j->team, sizeof(j->team), "t");
    return j;
}

/* Job j runs on node since started_ms, its attempts-th start. */
static void run_on(struct fixture *f, struct tm_snap_job *j, int64_t node, int64_t started_ms,
                   int attempts)
{
    j->state = TM_JOB_RUNNING;
    j->node_id = node;
    j->started_ms = started_ms;
    j->attempts = attempts;
    f->allocs[f->snap.nallocs++] = (struct tm_snap_alloc){
        .job_id = j->id, .node_id = node, .gpu_mask = (1u << j->gpus) - 1, .gpu_milli = 1000};
}

static void run(struct fixture *f)
{
    struct tm_reconcile_input in = {.cfg = &f->cfg, .snap = &f->snap, .observed = &f->obs,
                                    .nobserved = f->nobserved, .now_ms = NOW, .policy = TM_POLICY_FIFO};
    tm_rc_plan_release(&f->plan);
    assert_int_equal(tm_reconcile(&in, &f->plan), 0);
}

/* The i-th action of op about job (or node when job is 0), with its index
 * in the plan in *ret_at; NULL when there is none. */
static const cJSON *find(const struct fixture *f, const char *op, const char *key, double id, int *ret_at)
{
    const cJSON *a;
    int at = 0;
    cJSON_ArrayForEach(a, f->plan.actions) {
        const cJSON *o = cJSON_GetObjectItemCaseSensitive(a, "op");
        const cJSON *s = key ? cJSON_GetObjectItemCaseSensitive(a, key) : NULL;
        if (cJSON_IsString(o) && strcmp(o->valuestring, op) == 0 &&
            (!key || (cJSON_IsNumber(s) && s->valuedouble == id))) {
            if (ret_at)
                *ret_at = at;
            return a;
        }
        at++;
    }
    return NULL;
}

static int count(const struct fixture *f, const char *op)
{
    int n = 0;
    const cJSON *a;
    cJSON_ArrayForEach(a, f->plan.actions) {
        const cJSON *o = cJSON_GetObjectItemCaseSensitive(a, "op");
        n += cJSON_IsString(o) && strcmp(o->valuestring, op) == 0;
    }
    return n;
}

static double num(const cJSON *a, const char *key)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(a, key);
    if (!cJSON_IsNumber(v))
        fail_msg("no number \"%s\"", key);
    return v->valuedouble;
}

static double input(const cJSON *a, const char *key)
{
    return num(cJSON_GetObjectItemCaseSensitive(a, "inputs"), key);
}

static const char *reason(const cJSON *a)
{
    return cJSON_GetObjectItemCaseSensitive(a, "reason")->valuestring;
}

/* The cloud's notice on a busy node: one spot_notice (cordon, with the
 * notice time), a checkpoint of the checkpointable job with the 600 s it
 * ran kept as progress and nothing lost, the plain job left running, no new
 * work on the node, and no release while it is busy. */
static void test_notice_cordons_and_checkpoints(void **state)
{
    struct fixture *f = *state;
    spot_node(f, 1, TM_NODE_READY, TM_INSTANCE_RUNNING, NOW - 5000);
    run_on(f, add_job(f, 10, 2, true), 1, NOW - 600000, 1);
    run_on(f, add_job(f, 11, 1, false), 1, NOW - 300000, 2);
    add_job(f, 12, 1, false); /* queued, would fit on node 1's free GPUs */
    run(f);

    const cJSON *n = find(f, "spot_notice", "node", 1, NULL);
    assert_non_null(n);
    assert_int_equal((int64_t)num(n, "notice_ms"), NOW - 5000);
    assert_int_equal(input(n, "checkpointing"), 1);
    assert_int_equal(input(n, "running_on"), 1);
    assert_string_equal(reason(n), "interruption notice 5 s ago (in the cloud's listing): cordoned; "
                                   "1 checkpointable jobs checkpoint and requeue, 1 others run until "
                                   "the node goes");

    const cJSON *c = find(f, "checkpoint", "job", 10, NULL);
    assert_non_null(c);
    assert_int_equal(num(c, "node"), 1);
    assert_int_equal((int64_t)num(c, "started_ms"), NOW - 600000);
    assert_int_equal(input(c, "ran_ms"), 600000);
    assert_int_equal(input(c, "progress_ms"), 600000);
    assert_int_equal(input(c, "lost_gpu_ms"), 0);
    assert_int_equal(input(c, "attempt"), 1);
    assert_int_equal(input(c, "next_attempt"), 2);
    assert_string_equal(reason(c), "interruption notice on node 1: checkpointed after 600 s of "
                                   "attempt 1, 600 s of progress kept, nothing lost; requeued");

    assert_null(find(f, "checkpoint", "job", 11, NULL));
    assert_null(find(f, "requeue", NULL, 0, NULL));
    assert_null(find(f, "place", "job", 12, NULL));
    assert_null(find(f, "terminate", "node", 1, NULL));
    assert_int_equal(f->plan.noticed, 1);
    assert_int_equal(f->plan.checkpointed, 1);
    assert_int_equal(f->plan.requeued, 0);
}

/* Level-triggered repair: a notice already recorded is not recorded again,
 * but a checkpointable job still running there (the plan that moved it
 * never committed) is checkpointed again; its earlier progress adds up. */
static void test_recorded_notice_repeats_only_what_is_left(void **state)
{
    struct fixture *f = *state;
    struct tm_snap_node *n = spot_node(f, 1, TM_NODE_READY, TM_INSTANCE_RUNNING, NOW - 5000);
    n->notice_ms = NOW - 5000;
    n->notice_recorded = true;
    n->cordoned = true;
    struct tm_snap_job *j = add_job(f, 10, 2, true);
    j->progress_ms = 400000;
    run_on(f, j, 1, NOW - 200000, 3);
    run(f);
    assert_int_equal(count(f, "spot_notice"), 0);
    const cJSON *c = find(f, "checkpoint", "job", 10, NULL);
    assert_non_null(c);
    assert_int_equal(input(c, "ran_ms"), 200000);
    assert_int_equal(input(c, "progress_ms"), 600000);
    assert_int_equal(input(c, "attempt"), 3);

    /* Once it has left, the noticed node has nothing more to do. */
    f->snap.nallocs = 0;
    j->state = TM_JOB_QUEUED;
    j->node_id = 0;
    run(f);
    assert_int_equal(count(f, "spot_notice"), 0);
    assert_int_equal(count(f, "checkpoint"), 0);
}

/* The node goes: each job still on it is requeued before the node_gone
 * action, with the GPU time of its attempt lost (1 GPU x 300 s = 300000
 * GPU-ms; 2 GPUs x 600 s = 1200000 GPU-ms, its earlier checkpoints kept),
 * and the next start is attempt + 1. */
static void test_interrupted_node_requeues_with_lost_gpu_time(void **state)
{
    struct fixture *f = *state;
    spot_node(f, 1, TM_NODE_READY, TM_INSTANCE_TERMINATED, NOW - 40000);
    f->inst[0].interrupted = true;
    run_on(f, add_job(f, 11, 1, false), 1, NOW - 300000, 2);
    struct tm_snap_job *j = add_job(f, 10, 2, true);
    j->progress_ms = 120000;
    run_on(f, j, 1, NOW - 600000, 1);
    run(f);

    int at_plain = -1, at_ckpt = -1, at_gone = -1;
    const cJSON *plain = find(f, "requeue", "job", 11, &at_plain);
    const cJSON *ckpt = find(f, "requeue", "job", 10, &at_ckpt);
    const cJSON *gone = find(f, "node_gone", "node", 1, &at_gone);
    assert_non_null(plain);
    assert_non_null(ckpt);
    assert_non_null(gone);
    assert_true(at_plain < at_gone && at_ckpt < at_gone);
    assert_string_equal(cJSON_GetObjectItem(gone, "state")->valuestring, "interrupted");

    assert_string_equal(cJSON_GetObjectItem(plain, "cause")->valuestring, "interrupted");
    assert_int_equal((int64_t)num(plain, "started_ms"), NOW - 300000);
    assert_int_equal(input(plain, "attempt"), 2);
    assert_int_equal(input(plain, "next_attempt"), 3);
    assert_int_equal(input(plain, "ran_ms"), 300000);
    assert_int_equal(input(plain, "gpu_milli"), 1000);
    assert_int_equal(input(plain, "lost_gpu_ms"), 300000);
    assert_string_equal(reason(plain), "node 1 interrupted: attempt 2 lost after 300 s on 1 GPUs "
                                       "(0.083 GPU-hours); requeued for attempt 3");

    assert_int_equal(input(ckpt, "lost_gpu_ms"), 1200000);
    assert_int_equal(input(ckpt, "progress_ms"), 120000);
    assert_non_null(strstr(reason(ckpt), "(0.333 GPU-hours); 120 s from checkpoints kept; "
                                         "requeued for attempt 2"));
    assert_int_equal(count(f, "checkpoint"), 0); /* too late for that */
    assert_int_equal(f->plan.requeued, 2);
    assert_int_equal(f->plan.gone, 1);
}

/* A gang on two nodes loses one attempt when one of them goes: one requeue
 * (2 nodes x 8 GPUs x 100 s), not one per node. */
static void test_gang_requeued_once(void **state)
{
    struct fixture *f = *state;
    spot_node(f, 1, TM_NODE_READY, TM_INSTANCE_TERMINATED, 0)->capacity = TM_CAPACITY_SPOT;
    f->inst[0].interrupted = true;
    spot_node(f, 2, TM_NODE_READY, TM_INSTANCE_TERMINATED, 0);
    f->inst[1].interrupted = true;
    struct tm_snap_job *g = add_job(f, 10, 8, false);
    g->nodes = 2;
    run_on(f, g, 1, NOW - 100000, 1);
    f->allocs[f->snap.nallocs++] = (struct tm_snap_alloc){.job_id = 10, .node_id = 2,
                                                         .gpu_mask = 0xff, .gpu_milli = 1000};
    run(f);
    assert_int_equal(count(f, "requeue"), 1);
    assert_int_equal(count(f, "node_gone"), 2);
    const cJSON *r = find(f, "requeue", "job", 10, NULL);
    assert_int_equal(input(r, "gpu_milli"), 16000);
    assert_int_equal(input(r, "lost_gpu_ms"), 1600000);
}

/* A notice posted to the API (no listing this pass) is acted on too. */
static void test_notice_posted_to_api_without_listing(void **state)
{
    struct fixture *f = *state;
    struct tm_snap_node *n = spot_node(f, 1, TM_NODE_READY, -1, 0);
    n->cordoned = true;
    n->notice_ms = NOW - 1000;
    run_on(f, add_job(f, 10, 4, true), 1, NOW - 90000, 1);
    f->nobserved = 0;
    run(f);
    const cJSON *s = find(f, "spot_notice", "node", 1, NULL);
    assert_non_null(s);
    assert_non_null(strstr(reason(s), "(posted to the API)"));
    assert_int_equal((int64_t)num(s, "notice_ms"), NOW - 1000);
    assert_int_equal(input(find(f, "checkpoint", "job", 10, NULL), "progress_ms"), 90000);
}

/* An empty noticed node is released at once (the cloud takes it anyway),
 * whatever its idle grace; a queued job is not placed there. */
static void test_empty_noticed_node_released(void **state)
{
    struct fixture *f = *state;
    struct tm_snap_node *n = spot_node(f, 1, TM_NODE_READY, TM_INSTANCE_RUNNING, NOW - 1000);
    n->idle_since_ms = NOW - 1000; /* well within its 60 s grace */
    run(f);
    assert_non_null(find(f, "spot_notice", "node", 1, NULL));
    const cJSON *t = find(f, "terminate", "node", 1, NULL);
    assert_non_null(t);
    assert_non_null(strstr(reason(t), "empty after an interruption notice"));
    assert_int_equal(f->plan.nterminates, 1);
    assert_string_equal(f->plan.terminates[0].instance_id, "i-1");
}

/* A booting node with a notice never takes work: a queued job it would
 * have taken asks for another node instead of waiting for it. */
static void test_noticed_booting_node_is_not_pending_capacity(void **state)
{
    struct fixture *f = *state;
    spot_node(f, 1, TM_NODE_BOOTING, TM_INSTANCE_PENDING, NOW - 1000);
    add_job(f, 10, 8, false)->preemptible = true;
    run(f);
    assert_non_null(find(f, "spot_notice", "node", 1, NULL));
    assert_int_equal(count(f, "request_node"), 1);
    /* Nor is it paid for any longer than it takes to say so. */
    const cJSON *t = find(f, "terminate", "node", 1, NULL);
    assert_non_null(t);
    assert_string_equal(reason(t), "booting after an interruption notice: released before the cloud takes it");

    /* Without the notice the booting node is the capacity it waits for. */
    f->inst[0].notice_ms = 0;
    run(f);
    assert_int_equal(count(f, "spot_notice"), 0);
    assert_int_equal(count(f, "request_node"), 0);
    assert_int_equal(count(f, "terminate"), 0);
}

/* A job resumed from a checkpoint is scheduled for what is left: an
 * estimate of 3600 s with 3000 s of progress kept is a 600 s job. */
static void test_resumed_job_estimate_is_what_is_left(void **state)
{
    struct fixture *f = *state;
    spot_node(f, 1, TM_NODE_READY, TM_INSTANCE_RUNNING, 0);
    struct tm_snap_job *j = add_job(f, 10, 4, true);
    j->estimate_ms = 3600000;
    j->progress_ms = 3000000;
    j->attempts = 1;
    run(f);
    const cJSON *p = find(f, "place", "job", 10, NULL);
    assert_non_null(p);
    assert_int_equal(input(p, "estimate_s"), 600);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_notice_cordons_and_checkpoints, setup, teardown),
        cmocka_unit_test_setup_teardown(test_recorded_notice_repeats_only_what_is_left, setup, teardown),
        cmocka_unit_test_setup_teardown(test_interrupted_node_requeues_with_lost_gpu_time, setup, teardown),
        cmocka_unit_test_setup_teardown(test_gang_requeued_once, setup, teardown),
        cmocka_unit_test_setup_teardown(test_notice_posted_to_api_without_listing, setup, teardown),
        cmocka_unit_test_setup_teardown(test_empty_noticed_node_released, setup, teardown),
        cmocka_unit_test_setup_teardown(test_noticed_booting_node_is_not_pending_capacity, setup, teardown),
        cmocka_unit_test_setup_teardown(test_resumed_job_estimate_is_what_is_left, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
