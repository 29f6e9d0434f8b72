/*
 * tests/unit/fleet/test_plan_input.c: the planner's input built from one
 * snapshot two ways, through the live tick's mapper (tm_reconcile, whose
 * planner call is caught by the linker's --wrap) and through the elastic
 * replay's (tm_elastic_view), is the same field for field: a gang running
 * on two nodes, shares and whole GPUs on one node, jobs on their second and
 * third attempt, a deadline, and a queued gang and share.
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

#include "controller/fleet/plan_input.h"
#include "controller/fleet/planner.h"
#include "controller/reconcile/reconcile.h"
#include "controller/replay/elastic_view.h"
#include "controller/sched/estimate.h"
#include "core/config.h"
#include "tests/lib/snap_fixture.h"

/* One 8-GPU type, an on-demand pool and a spot pool of it: one planner
 * pass (one GPU model), with the same grace so that no idle start is
 * shifted. */
static const char config_yaml[] =
    SNAP_FIXTURE_YAML_HEAD("unit")
    "providers:\n"
    SNAP_FIXTURE_YAML_SIM("sim", "r1")
    "pools:\n"
    "  - {name: od8, provider: sim, zones: [z1], instance_types: [sim.8x], gpu_model: A100,"
    "     gpus_per_node: 8, capacity_type: on_demand, min_nodes: 0, max_nodes: 4, idle_grace: 60s}\n"
    "  - {name: spot8, provider: sim, zones: [z1], instance_types: [sim.8x], gpu_model: A100,"
    "     gpus_per_node: 8, capacity_type: spot, min_nodes: 0, max_nodes: 4, idle_grace: 60s}\n";

#define NOW 1000000000LL
#define HOUR 3600000LL

/* What the wrapped planner saw on its first call. */
static struct {
    int calls;
    struct tm_price_table prices;
    struct tm_planner_node nodes[8];
    size_t nnodes;
    struct tm_planner_job jobs[32];
    size_t njobs;
} seen;

int __real_tm_planner_run(const struct tm_planner_input *in, struct tm_planner_result *ret);
int __wrap_tm_planner_run(const struct tm_planner_input *in, struct tm_planner_result *ret);

int __wrap_tm_planner_run(const struct tm_planner_input *in, struct tm_planner_result *ret)
{
    if (seen.calls++ == 0) {
        seen.prices = *in->prices;
        seen.nnodes = in->nnodes < 8 ? in->nnodes : 8;
        memcpy(seen.nodes, in->nodes, seen.nnodes * sizeof(*in->nodes));
        seen.njobs = in->njobs < 32 ? in->njobs : 32;
        memcpy(seen.jobs, in->jobs, seen.njobs * sizeof(*in->jobs));
    }
    return __real_tm_planner_run(in, ret);
}

struct fixture {
    SNAP_FIXTURE_MEMBERS(8);
    SNAP_FIXTURE_PASS_MEMBERS;
};

/* One snapshot, as the replay's mapper reads it beside the live one. */
struct world {
    struct tm_elastic_view_node nodes[8];
    size_t nnodes;
    struct tm_elastic_view_job jobs[16];
    size_t njobs;
};

static void add_node(struct fixture *f, struct world *w, int64_t id, bool spot)
{
    struct tm_snap_node *n = &f->nodes[f->snap.nnodes++];
    *n = (struct tm_snap_node){.id = id, .pool = spot ? 1 : 0, .gpus = 8, .cpu_milli = 96000,
                               .memory_mib = 1000000, .state = TM_NODE_READY,
                               .requested_ms = NOW - HOUR, .idle_since_ms = NOW - 2 * HOUR,
                               .capacity = spot ? TM_CAPACITY_SPOT : TM_CAPACITY_ON_DEMAND};
    snprintf(n->token, sizeof(n->token), "tok-%" PRId64, id);
    snprintf(n->instance_id, sizeof(n->instance_id), "i-%" PRId64, id);
    snprintf(n->instance_type, sizeof(n->instance_type), "sim.8x");
    snprintf(n->zone, sizeof(n->zone), "z1");
    snprintf(n->gpu_model, sizeof(n->gpu_model), "A100");
    struct tm_instance *i = &f->inst[f->obs.n++];
    memset(i, 0, sizeof(*i));
    snprintf(i->id, sizeof(i->id), "i-%" PRId64, id);
    snprintf(i->token, sizeof(i->token), "tok-%" PRId64, id);
    snprintf(i->pool, sizeof(i->pool), spot ? "spot8" : "od8");
    i->state = TM_INSTANCE_RUNNING;
    w->nodes[w->nnodes++] = (struct tm_elastic_view_node){
        .id = id, .type = 0, .zone = 0, .spot = spot, .ready = true, .idle_since_ms = NOW - 2 * HOUR};
}

struct job_spec {
    int64_t id;
    int32_t gpus, gpu_milli, nodes, attempts;
    bool preemptible, ckpt;
    int64_t estimate_ms, ran_ms, deadline_ms;
};

static struct tm_snap_job *add_job(struct fixture *f, const struct job_spec *js, enum tm_job_state state)
{
    struct tm_snap_job *j = &f->jobs[f->snap.njobs++];
    *j = (struct tm_snap_job){.id = js->id, .pool = -1, .gpus = js->gpus, .gpu_milli = js->gpu_milli,
                              .nodes = js->nodes, .preemptible = js->preemptible,
                              .checkpointable = js->ckpt, .state = state, .attempts = js->attempts,
                              .estimate_ms = js->estimate_ms, .deadline_ms = js->deadline_ms,
                              .cpu_milli = 4000, .memory_mib = 16000,
                              .submitted_ms = NOW - js->ran_ms - 1000 * js->id};
    snprintf(j->team, sizeof(j->team), "t");
    snprintf(j->name, sizeof(j->name), "job-%" PRId64, js->id);
    if (state == TM_JOB_RUNNING)
        j->started_ms = NOW - js->ran_ms;
    return j;
}

/* A running job's hold on node index ni of both worlds (one snapshot job
 * per id: the members of a gang add holds only). */
static void hold(struct fixture *f, struct world *w, const struct job_spec *js, size_t ni, uint32_t mask,
                 bool first)
{
    const struct tm_snap_node *n = &f->nodes[ni];
    int32_t amilli = js->gpus > 0 ? 1000 : js->gpu_milli;
    if (first) {
        struct tm_snap_job *j = add_job(f, js, TM_JOB_RUNNING);
        j->node_id = n->id;
    }
    f->allocs[f->snap.nallocs++] = (struct tm_snap_alloc){
        .job_id = js->id, .node_id = n->id, .gpu_mask = mask, .gpu_milli = amilli, .cpu_milli = 4000,
        .memory_mib = 16000, .claimed_ms = NOW - js->ran_ms};
    w->jobs[w->njobs++] = (struct tm_elastic_view_job){
        .id = js->id, .node = (int32_t)ni, .mask = mask, .amilli = amilli, .gpus = js->gpus,
        .gpu_milli = js->gpu_milli, .cpu_milli = 4000, .memory_mib = 16000,
        .preemptible = js->preemptible, .checkpointable = js->ckpt, .nodes = js->nodes,
        /* the replay counts the attempts a job ended; the store those started */
        .stops = js->attempts - 1, .start_ms = NOW - js->ran_ms,
        /* the replay's scheduler reads time left as the live tick does for
         * an estimate not from the job's own runs */
        .left_ms = tm_estimate_remaining(js->estimate_ms, js->ran_ms), .estimate_ms = js->estimate_ms,
        .deadline_ms = js->deadline_ms};
}

static void queue(struct fixture *f, struct world *w, const struct job_spec *js, bool spot_ok)
{
    add_job(f, js, TM_JOB_QUEUED);
    w->jobs[w->njobs++] = (struct tm_elastic_view_job){
        .id = js->id, .node = -1, .gpus = js->gpus, .gpu_milli = js->gpu_milli, .cpu_milli = 4000,
        .memory_mib = 16000, .preemptible = js->preemptible, .checkpointable = js->ckpt,
        .nodes = js->nodes, .spot_ok = spot_ok, .estimate_ms = js->estimate_ms,
        .deadline_ms = js->deadline_ms};
}

static void same_node(const struct tm_planner_node *a, const struct tm_planner_node *b)
{
    assert_int_equal(a->id, b->id);
    assert_int_equal(a->type, b->type);
    assert_int_equal(a->zone, b->zone);
    assert_int_equal(a->spot, b->spot);
    assert_int_equal(a->ready, b->ready);
    assert_int_equal(a->leaving, b->leaving);
    assert_int_equal(a->used_milli, b->used_milli);
    assert_int_equal(a->free_whole, b->free_whole);
    assert_int_equal(a->jobs, b->jobs);
    assert_int_equal(a->only_preemptible, b->only_preemptible);
    assert_int_equal(a->movable, b->movable);
    assert_int_equal(a->idle_since_ms, b->idle_since_ms);
    assert_int_equal(a->busy_until_ms, b->busy_until_ms);
    assert_int_equal(a->lost_if_moved_milli_ms, b->lost_if_moved_milli_ms);
    assert_int_equal(a->used_cpu_milli, b->used_cpu_milli);
    assert_int_equal(a->used_memory_mib, b->used_memory_mib);
    assert_int_equal(a->cordoned, b->cordoned);
    assert_int_equal(a->share_free_milli, b->share_free_milli);
    assert_int_equal(a->share_room_known, b->share_room_known);
    assert_int_equal(a->no_restart, b->no_restart);
}

static void same_job(const struct tm_planner_job *a, const struct tm_planner_job *b)
{
    assert_int_equal(a->id, b->id);
    assert_int_equal(a->gpus, b->gpus);
    assert_int_equal(a->milli, b->milli);
    assert_int_equal(a->preemptible, b->preemptible);
    assert_int_equal(a->on_spot, b->on_spot);
    assert_int_equal(a->running, b->running);
    assert_int_equal(a->node, b->node);
    assert_int_equal(a->remaining_ms, b->remaining_ms);
    assert_int_equal(a->deadline_ms, b->deadline_ms);
    assert_int_equal(a->cpu_milli, b->cpu_milli);
    assert_int_equal(a->memory_mib, b->memory_mib);
    assert_int_equal(a->checkpointable, b->checkpointable);
    assert_int_equal(a->attempts, b->attempts);
    assert_int_equal(a->ran_ms, b->ran_ms);
    assert_int_equal(a->gang, b->gang);
}

static void test_live_and_replay_agree(void **state)
{
    static struct fixture f;
    static struct world w;
    struct tm_plan_view_node vn[8];
    struct tm_plan_view_job vj[16];
    struct tm_planner_node pn[8];
    struct tm_planner_job pj[32];
    size_t npj = 0;
    (void)state;

    memset(&f, 0, sizeof(f));
    memset(&w, 0, sizeof(w));
    memset(&seen, 0, sizeof(seen));
    assert_int_equal(SNAP_FIXTURE_PASS_INIT(&f, config_yaml), 0);

    add_node(&f, &w, 1, false);
    add_node(&f, &w, 2, false);
    add_node(&f, &w, 3, true);
    /* a gang of two whole nodes, preemptible and checkpointable: still
     * neither movable nor restartable by one node */
    struct job_spec gang = {.id = 10, .gpus = 8, .gpu_milli = 1000, .nodes = 2, .attempts = 1,
                            .preemptible = true, .ckpt = true, .estimate_ms = 4 * HOUR, .ran_ms = HOUR};
    hold(&f, &w, &gang, 0, 0xff, true);
    hold(&f, &w, &gang, 1, 0xff, false);
    /* on the spot node: two shares on GPU 0 (800 of it), one on GPU 1, a
     * job on its third attempt that cannot checkpoint, one resumed from a
     * checkpoint (second attempt) with a deadline, and whole GPUs 4-7 */
    struct job_spec s1 = {.id = 11, .gpu_milli = 500, .nodes = 1, .attempts = 1, .preemptible = true,
                          .estimate_ms = HOUR, .ran_ms = 600000};
    struct job_spec s2 = {.id = 12, .gpu_milli = 300, .nodes = 1, .attempts = 1, .preemptible = true,
                          .ckpt = true, .estimate_ms = 2 * HOUR, .ran_ms = 60000};
    struct job_spec s3 = {.id = 13, .gpu_milli = 600, .nodes = 1, .attempts = 3, .preemptible = true,
                          .estimate_ms = 3 * HOUR, .ran_ms = 1200000};
    struct job_spec w2 = {.id = 14, .gpus = 2, .gpu_milli = 1000, .nodes = 1, .attempts = 2,
                          .preemptible = true, .ckpt = true, .estimate_ms = 5 * HOUR, .ran_ms = 300000,
                          .deadline_ms = NOW + 10 * HOUR};
    struct job_spec w4 = {.id = 15, .gpus = 4, .gpu_milli = 1000, .nodes = 1, .attempts = 1,
                          .preemptible = true, .estimate_ms = HOUR / 2, .ran_ms = HOUR};
    hold(&f, &w, &s1, 2, 0x1, true);
    hold(&f, &w, &s2, 2, 0x1, true);
    hold(&f, &w, &s3, 2, 0x2, true);
    hold(&f, &w, &w2, 2, 0xc, true);
    hold(&f, &w, &w4, 2, 0xf0, true);
    /* queued: a gang of two whole nodes (on demand) and a share no GPU
     * holds, preemptible (routed to spot) */
    struct job_spec qg = {.id = 20, .gpus = 8, .gpu_milli = 1000, .nodes = 2, .estimate_ms = 2 * HOUR};
    struct job_spec qs = {.id = 21, .gpu_milli = 700, .nodes = 1, .preemptible = true,
                          .estimate_ms = HOUR};
    queue(&f, &w, &qg, false);
    queue(&f, &w, &qs, true);

    /* the live way */
    struct tm_reconcile_input in = {.cfg = &f.cfg, .snap = &f.snap, .observed = &f.obs, .nobserved = 1,
                                    .now_ms = NOW, .policy = TM_POLICY_FIFO};
    assert_int_equal(tm_reconcile(&in, &f.plan), 0);
    assert_true(seen.calls >= 1);

    /* the replay's way, over the live table's types */
    tm_elastic_view(NOW, w.nodes, w.nnodes, w.jobs, w.njobs, vn, vj);
    struct tm_plan_view v = {.now_ms = NOW, .prices = &seen.prices, .nodes = vn, .nnodes = w.nnodes,
                             .jobs = vj, .njobs = w.njobs};
    assert_true(tm_plan_input_jobs_max(&v) <= 32);
    assert_int_equal(tm_plan_input_build(&v, pn, pj, &npj, NULL), 0);

    assert_int_equal(seen.nnodes, w.nnodes);
    for (size_t i = 0; i < w.nnodes; i++)
        same_node(&seen.nodes[i], &pn[i]);
    assert_int_equal(seen.njobs, npj);
    for (size_t k = 0; k < npj; k++)
        same_job(&seen.jobs[k], &pj[k]);

    /* and what the rules say */
    for (int i = 0; i < 2; i++) {
        assert_false(pn[i].movable);     /* a gang member */
        assert_true(pn[i].no_restart);
        assert_int_equal(pn[i].free_whole, 0);
    }
    assert_int_equal(pn[2].used_milli, 500 + 300 + 600 + 2000 + 4000);
    assert_int_equal(pn[2].free_whole, 0);         /* GPUs 0-1 hold shares */
    assert_int_equal(pn[2].share_free_milli, 400); /* GPU 1: 600 of 1000 */
    assert_true(pn[2].share_room_known);
    assert_false(pn[2].no_restart);
    assert_int_equal(pj[4].id, 13);
    assert_int_equal(pj[4].attempts, 3);
    assert_int_equal(pj[5].attempts, 2);
    assert_int_equal(npj, 7 + 2 + 1);              /* the queued gang: one per node */
    assert_int_equal(pj[7].gang, 2);
    assert_int_equal(pj[8].gang, 2);
    assert_int_equal(pj[9].milli, 700);

    snap_fixture_pass_release(&f.plan, &f.cfg);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_live_and_replay_agree),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
