/*
 * tests/unit/sched/test_few_nodes.c: known answers for jobs that only a few
 * nodes can hold: they start within the starvation bound
 * against a stream of other work for the same nodes, and a job at risk of
 * the bound reserves past tarmac's drain cap.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <cmocka.h>

#include "controller/sched/scheduler.h"

#define H (3600LL * 1000)
#define MIN (60LL * 1000)

static struct tm_sched_node node(int64_t id, int32_t model, int64_t cpu)
{
    return (struct tm_sched_node){.id = id, .cpu_milli = cpu, .memory_mib = 786432, .gpus = 8,
                                  .model = model, .schedulable = true};
}

static struct tm_sched_job job(int64_t id, int64_t submit, int32_t gpus, int64_t est)
{
    return (struct tm_sched_job){.id = id, .submit_ms = submit, .estimate_ms = est, .cpu_milli = 1000,
                                 .memory_mib = 1024, .gpus = gpus, .gpu_milli = 1000, .nodes = 1};
}

/* One rare node (model 1, 128 cores) among three common ones (model 0, 96
 * cores); job 1000 asks 8 GPUs and 120 cores, so only the rare node can
 * ever hold it (tied by its size, no model_mask).  The rare node is busy
 * for 5 h, and from time 0 a 1-GPU hour-long job asking for model 1
 * (narrow) arrives every 10 minutes: more than the node serves, so aged
 * narrow jobs keep queueing for it.  With the bound at 8 h the big job,
 * submitted at 0, must start by 8 h (it starts at 6 h, after the one
 * narrow job submitted before it in the aged order); ordered behind every
 * aged narrow job, as the older order did, it had not started at 24 h.
 * Runtimes equal estimates: the loop lets the passes decide. */
static void test_rare_node_within_bound(void **state)
{
    enum { MAXJ = 512 };
    struct tm_sched_node n[4] = {node(1, 1, 128000), node(2, 0, 96000), node(3, 0, 96000),
                                 node(4, 0, 96000)};
    struct tm_sched_job *q = calloc(MAXJ, sizeof(*q));
    struct tm_sched_alloc *ra = calloc(MAXJ, sizeof(*ra));
    size_t nq = 0, nr = 0;
    int64_t bound = 8 * H, big_start = -1, next_id = 1;

    (void)state;
    assert_non_null(q);
    assert_non_null(ra);
    ra[nr++] = (struct tm_sched_alloc){.job_id = 999, .node = 0, .gpu_mask = 0xff, .gpu_milli = 1000,
                                       .cpu_milli = 1000, .memory_mib = 1024, .end_ms = 5 * H};
    q[nq] = job(1000, 0, 8, H);
    q[nq++].cpu_milli = 120000;
    for (int64_t t = 0; t < 24 * H && big_start < 0; t += 10 * MIN) {
        struct tm_sched_input in;
        struct tm_sched_result r = {0};
        size_t w = 0;

        for (size_t i = 0; i < nr; i++)
            if (ra[i].end_ms > t)
                ra[w++] = ra[i];
        nr = w;
        assert_true(nq < MAXJ);
        q[nq] = job(next_id++, t, 1, H);
        q[nq++].model_mask = 1u << 1;
        in = (struct tm_sched_input){.jobs = q, .njobs = nq, .nodes = n, .nnodes = 4, .allocs = ra,
                                     .nallocs = nr, .now_ms = t, .policy = TM_POLICY_TARMAC,
                                     .params = {.starvation_ms = bound}};
        assert_int_equal(tm_sched_run(&in, &r), 0);
        {
            bool *gone = calloc(nq + 1, sizeof(*gone));
            assert_non_null(gone);
            for (size_t p = 0; p < r.nplacements; p++) {
                const struct tm_sched_job *jb = &q[r.placements[p].job];
                if (jb->id == 1000)
                    big_start = t;
                assert_true(nr < MAXJ);
                ra[nr++] = (struct tm_sched_alloc){.job_id = jb->id, .node = r.placements[p].node,
                                                   .gpu_mask = r.placements[p].gpu_mask,
                                                   .gpu_milli = 1000, .cpu_milli = jb->cpu_milli,
                                                   .memory_mib = jb->memory_mib,
                                                   .end_ms = t + jb->estimate_ms};
                gone[r.placements[p].job] = true;
            }
            w = 0;
            for (size_t i = 0; i < nq; i++)
                if (!gone[i])
                    q[w++] = q[i];
            nq = w;
            free(gone);
        }
        tm_sched_result_release(&r);
    }
    assert_true(big_start >= 5 * H); /* the node was busy until then */
    assert_true(big_start <= bound);
    free(q);
    free(ra);
}

/* 64 GPUs: tarmac's drain cap lets heavy jobs (8 GPUs) reserve on an
 * eighth of them at a time, here one node.  Job 1, tied to the rare node
 * by its 120 cores, takes the drain first; job 2, flexible, could start in
 * 2 h on any common node.  44 h old, a start 2 h away is within bound/16
 * (3 h) of the 48 h bound: it reserves past the cap.  40 h old it is not
 * at risk and waits its turn under the cap. */
static void test_at_risk_passes_drain_cap(void **state)
{
    int64_t now = 100 * H;
    struct tm_sched_node n[8];
    struct tm_sched_alloc a[8];
    struct tm_sched_job j[2] = {job(1, now - 30 * H, 8, H), job(2, now - 44 * H, 8, H)};
    struct tm_sched_input in = {.jobs = j, .njobs = 2, .nodes = n, .nnodes = 8, .allocs = a,
                                .nallocs = 8, .now_ms = now, .policy = TM_POLICY_TARMAC};
    struct tm_sched_result r = {0};

    (void)state;
    n[0] = node(1, 1, 128000);
    for (int i = 1; i < 8; i++)
        n[i] = node(i + 1, 0, 96000);
    for (int i = 0; i < 8; i++)
        a[i] = (struct tm_sched_alloc){.job_id = 900 + i, .node = i, .gpu_mask = 1, .gpu_milli = 1000,
                                       .cpu_milli = 1000, .memory_mib = 1024, .end_ms = now + 2 * H};
    j[0].cpu_milli = 120000;
    assert_int_equal(tm_sched_run(&in, &r), 0);
    assert_int_equal(r.nplacements, 0);
    assert_int_equal(r.notes[0].verdict, TM_SCHED_RESERVED);
    assert_int_equal(r.notes[0].node, 0);
    assert_int_equal(r.notes[1].verdict, TM_SCHED_RESERVED);
    assert_int_equal(r.notes[1].start_ms, now + 2 * H);
    tm_sched_result_release(&r);

    j[1].submit_ms = now - 40 * H;
    assert_int_equal(tm_sched_run(&in, &r), 0);
    assert_int_equal(r.notes[0].verdict, TM_SCHED_RESERVED);
    assert_int_not_equal(r.notes[1].verdict, TM_SCHED_RESERVED);
    tm_sched_result_release(&r);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_rare_node_within_bound),
        cmocka_unit_test(test_at_risk_passes_drain_cap),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
