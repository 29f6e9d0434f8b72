/*
 * tests/unit/sched/test_scheduler.c: hand-built scenarios with known answers, and
 * properties on random inputs, for controller/sched/scheduler.c.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "controller/sched/scheduler.h"
#include "controller/sched/internal.h"
#include "core/config.h"
#include "core/err.h"

#define H (3600LL * 1000)

static struct tm_sched_node node8(int64_t id, int32_t model)
{
    return (struct tm_sched_node){.id = id, .cpu_milli = 96000, .memory_mib = 393216, .gpus = 8,
                                  .model = model, .schedulable = true};
}

/* One GPU of model 0 and 16 cores, like openb's small P100 nodes. */
static struct tm_sched_node p100_like(int64_t id)
{
    return (struct tm_sched_node){.id = id, .cpu_milli = 16000, .memory_mib = 65536, .gpus = 1,
                                  .model = 0, .schedulable = true};
}

static struct tm_sched_job job(int64_t id, int64_t submit, int32_t gpus, int64_t est)
{
    return (struct tm_sched_job){.id = id, .submit_ms = submit, .estimate_ms = est, .cpu_milli = 1000,
                                 .memory_mib = 1024, .gpus = gpus, .gpu_milli = 1000, .nodes = 1};
}

static struct tm_sched_alloc hold(int32_t node, uint32_t mask, int64_t end)
{
    return (struct tm_sched_alloc){.job_id = 999, .node = node, .gpu_mask = mask, .gpu_milli = 1000,
                                   .cpu_milli = 1000, .memory_mib = 1024, .end_ms = end};
}

static int run(enum tm_sched_policy p, const struct tm_sched_job *jobs, size_t nj,
               const struct tm_sched_node *nodes, size_t nn, const struct tm_sched_alloc *al, size_t na,
               int64_t now, struct tm_sched_result *r)
{
    struct tm_sched_input in = {.jobs = jobs, .njobs = nj, .nodes = nodes, .nnodes = nn,
                                .allocs = al, .nallocs = na, .now_ms = now, .policy = p};
    return tm_sched_run(&in, r);
}

static int placed_node(const struct tm_sched_result *r, int32_t job)
{
    for (size_t i = 0; i < r->nplacements; i++)
        if (r->placements[i].job == job)
            return r->placements[i].node;
    return -1;
}

static void test_names(void **state)
{
    (void)state;
    assert_int_equal(tm_sched_policy_parse("fifo"), TM_POLICY_FIFO);
    assert_int_equal(tm_sched_policy_parse("backfill"), TM_POLICY_BACKFILL);
    assert_int_equal(tm_sched_policy_parse("tarmac"), TM_POLICY_TARMAC);
    assert_int_equal(tm_sched_policy_parse("sjf"), -1);
    assert_int_equal(tm_sched_policy_parse(NULL), -1);
    assert_int_equal(tm_sched_policy_parse("multifactor"), TM_POLICY_MULTIFACTOR);
    assert_string_equal(tm_sched_policy_list(), "fifo, backfill, tarmac, multifactor");
    assert_string_equal(tm_sched_policy_name(TM_POLICY_TARMAC), "tarmac");
    assert_string_equal(tm_sched_verdict_name(TM_SCHED_RESERVED), "reserved");
}

/* The policy table is the one list of names: every row parses back to
 * itself and the list is the rows in order.  core/config.c, which may not
 * include sched/, checks scheduler.policy against a list of its own; it
 * must accept exactly the table's names and print the table's list. */
#define CFG_HEAD "database: {url: \"postgresql:///t\"}\ncluster: c1\n"
#define CFG_TAIL                                                                                  \
    "providers:\n  - name: sim\n    kind: sim\n    region: r1\n    instance_types:\n"            \
    "      - {name: t8, gpus: 8, gpu_model: A100, cpu_milli: 1000, memory_mib: 1000, "            \
    "on_demand_price: \"1.5\"}\n"                                                                \
    "pools:\n  - name: p1\n    provider: sim\n    zones: [z1]\n    instance_types: [t8]\n"       \
    "    max_nodes: 2\n"

static int load_policy(const char *name, char *err, size_t errsize)
{
    struct tm_config cfg = {0};
    char text[1024];
    int r;

    snprintf(text, sizeof(text), CFG_HEAD "scheduler: {policy: %s}\n" CFG_TAIL, name);
    r = tm_config_load_string(text, strlen(text), "t.yaml", &cfg, err, errsize);
    if (r == 0) {
        assert_string_equal(cfg.scheduler_policy, name);
        tm_config_release(&cfg);
    }
    return r;
}

static void test_policy_table(void **state)
{
    char list[256] = "", err[512], want[512];
    size_t used = 0;

    (void)state;
    for (int p = 0; p < TM_POLICY_MAX; p++) {
        const char *name = tm_sched_policy_name((enum tm_sched_policy)p);
        assert_int_equal(tm_sched_policy_parse(name), p);
        used += (size_t)snprintf(list + used, sizeof(list) - used, "%s%s", p ? ", " : "", name);
        assert_true(used < sizeof(list));
        assert_int_equal(load_policy(name, err, sizeof(err)), 0);
        /* Each row fills the hooks the pass calls unconditionally. */
        const struct sched_policy *pol = sched_policy_of((enum tm_sched_policy)p);
        assert_non_null(pol);
        assert_non_null(pol->prepare);
        assert_non_null(pol->order);
        assert_non_null(pol->place);
        assert_non_null(pol->why_placed);
        assert_true(!pol->may_reserve || pol->why_reserved);
    }
    assert_null(sched_policy_of(TM_POLICY_MAX));
    assert_string_equal(tm_sched_policy_list(), list);
    assert_string_equal(tm_sched_policy_name(TM_POLICY_MAX), "unknown");
    assert_int_equal(load_policy("sjf", err, sizeof(err)), TM_EINVAL);
    snprintf(want, sizeof(want),
             "t.yaml:3: key \"scheduler.policy\": unrecognized value \"sjf\", expected one of: %s",
             tm_sched_policy_list());
    assert_string_equal(err, want);
}

/* An 8-GPU job at the head, 4 GPUs busy until t=100 s, a short 2-GPU job
 * behind it: fifo leaves 4 GPUs idle, backfill runs the short job. */
static void test_head_of_line_backfill(void **state)
{
    struct tm_sched_node n[1] = {node8(1, 0)};
    struct tm_sched_alloc a[1] = {hold(0, 0x0f, 100000)};
    struct tm_sched_job j[2] = {job(10, 1, 8, 3600000), job(11, 2, 2, 50000)};
    struct tm_sched_result r = {0};

    (void)state;
    assert_int_equal(run(TM_POLICY_FIFO, j, 2, n, 1, a, 1, 10, &r), 0);
    assert_int_equal(r.nplacements, 0);
    assert_int_equal(r.notes[0].verdict, TM_SCHED_WAIT_CAPACITY);
    assert_int_equal(r.notes[1].verdict, TM_SCHED_WAIT_ORDER);
    tm_sched_result_release(&r);

    assert_int_equal(run(TM_POLICY_BACKFILL, j, 2, n, 1, a, 1, 10, &r), 0);
    assert_int_equal(r.nplacements, 1);
    assert_int_equal(r.placements[0].job, 1);
    assert_int_equal(r.notes[0].verdict, TM_SCHED_RESERVED);
    assert_int_equal(r.notes[0].start_ms, 100000);
    assert_int_equal(r.nreservations, 1);
    assert_int_equal(r.notes[1].verdict, TM_SCHED_PLACED);
    assert_non_null(strstr(r.notes[1].why, "ends before"));
    tm_sched_result_release(&r);

    /* tarmac, big job fresh: the cluster is full, not fragmented, so no
     * node is drained for it yet; the short job runs */
    assert_int_equal(run(TM_POLICY_TARMAC, j, 2, n, 1, a, 1, 10, &r), 0);
    assert_int_equal(placed_node(&r, 1), 0);
    assert_int_equal(r.notes[0].verdict, TM_SCHED_WAIT_CAPACITY);
    tm_sched_result_release(&r);
    /* tarmac, big job aged past half the bound (48 h by default): reserved,
     * and its hole is closed to non-preemptible fillers, since an overrun
     * would push it past the bound; preemptible work goes there on loan */
    j[0].submit_ms = 0;
    j[1].submit_ms = 30 * H - 5;
    a[0].end_ms = 30 * H + 100000;
    assert_int_equal(run(TM_POLICY_TARMAC, j, 2, n, 1, a, 1, 30 * H, &r), 0);
    assert_int_equal(r.notes[0].verdict, TM_SCHED_RESERVED);
    assert_int_equal(r.notes[0].start_ms, 30 * H + 100000);
    assert_int_equal(r.notes[1].verdict, TM_SCHED_WAIT_RESERVATION);
    tm_sched_result_release(&r);
    j[1].preemptible = true;
    assert_int_equal(run(TM_POLICY_TARMAC, j, 2, n, 1, a, 1, 30 * H, &r), 0);
    assert_int_equal(placed_node(&r, 1), 0);
    assert_true(r.placements[0].loaned);
    tm_sched_result_release(&r);
}

/* The same, but the 2-GPU job runs past the reservation (or has no
 * estimate): starting it would delay the head, so it must wait. */
static void test_backfill_must_not_delay(void **state)
{
    struct tm_sched_node n[1] = {node8(1, 0)};
    struct tm_sched_alloc a[1] = {hold(0, 0x0f, 100000)};
    struct tm_sched_job j[2] = {job(10, 1, 8, 3600000), job(11, 2, 2, 200000)};
    struct tm_sched_result r = {0};

    (void)state;
    for (int k = 0; k < 2; k++) {
        if (k == 1)
            j[1].estimate_ms = 0; /* unknown */
        for (int p = TM_POLICY_BACKFILL; p <= TM_POLICY_TARMAC; p++) {
            int64_t now = p == TM_POLICY_TARMAC ? 30 * H : 10;
            j[0].submit_ms = p == TM_POLICY_TARMAC ? 0 : 1;
            j[1].submit_ms = p == TM_POLICY_TARMAC ? now - 5 : 2;
            a[0].end_ms = now + 100000;
            assert_int_equal(run(p, j, 2, n, 1, a, 1, now, &r), 0);
            assert_int_equal(r.nplacements, 0);
            assert_int_equal(r.notes[0].verdict, TM_SCHED_RESERVED);
            assert_int_equal(r.notes[1].verdict, TM_SCHED_WAIT_RESERVATION);
            tm_sched_result_release(&r);
        }
    }
    /* A long job that leaves room for the reservation may run: two nodes,
     * the reserved one and a free one.  */
    {
        struct tm_sched_node n2[2] = {node8(1, 0), node8(2, 0)};
        struct tm_sched_alloc a2[2] = {hold(0, 0x0f, 100000), hold(1, 0x0f, 200000)};
        j[1].estimate_ms = 500000;
        assert_int_equal(run(TM_POLICY_BACKFILL, j, 2, n2, 2, a2, 2, 10, &r), 0);
        assert_int_equal(r.notes[0].verdict, TM_SCHED_RESERVED);
        assert_int_equal(r.notes[0].node, 0);
        assert_int_equal(placed_node(&r, 1), 1);
        tm_sched_result_release(&r);
    }
}

/* A 1-GPU job should go to the node already 6/8 busy, keeping the other
 * node whole for the 8-GPU job that follows. */
static void test_fragmentation_keeps_node_whole(void **state)
{
    struct tm_sched_node n[2] = {node8(1, 0), node8(2, 0)};
    struct tm_sched_alloc a[1] = {hold(1, 0x3f, 10 * H)};
    struct tm_sched_job j[2] = {job(10, 1, 1, H), job(11, 2, 8, H)};
    struct tm_sched_result r = {0};

    (void)state;
    assert_int_equal(run(TM_POLICY_TARMAC, j, 2, n, 2, a, 1, 10, &r), 0);
    assert_int_equal(placed_node(&r, 0), 1);
    assert_int_equal(placed_node(&r, 1), 0);
    tm_sched_result_release(&r);
    /* first-fit breaks node 0 and the 8-GPU job cannot start */
    assert_int_equal(run(TM_POLICY_FIFO, j, 2, n, 2, a, 1, 10, &r), 0);
    assert_int_equal(placed_node(&r, 0), 0);
    assert_int_equal(placed_node(&r, 1), -1);
    tm_sched_result_release(&r);
}

/* Shares pack onto one GPU up to 1000 milli, never beyond. */
static void test_fractional_share(void **state)
{
    struct tm_sched_node n[1] = {{.id = 1, .cpu_milli = 64000, .memory_mib = 65536, .gpus = 2,
                                  .model = 0, .schedulable = true}};
    struct tm_sched_alloc a[1] = {{.job_id = 5, .node = 0, .gpu_mask = 0x1, .gpu_milli = 500,
                                   .cpu_milli = 1000, .memory_mib = 1, .end_ms = H}};
    struct tm_sched_job j[4];
    struct tm_sched_result r = {0};
    int32_t per_gpu[2] = {500, 0};

    (void)state;
    for (int i = 0; i < 4; i++) {
        j[i] = job(20 + i, i, 0, H);
        j[i].gpu_milli = 450;
    }
    for (int p = 0; p < TM_POLICY_MAX; p++) {
        per_gpu[0] = 500;
        per_gpu[1] = 0;
        assert_int_equal(run(p, j, 4, n, 1, a, 1, 10, &r), 0);
        for (size_t i = 0; i < r.nplacements; i++) {
            for (int g = 0; g < 2; g++)
                if (r.placements[i].gpu_mask >> g & 1)
                    per_gpu[g] += r.placements[i].gpu_milli;
            assert_int_equal(__builtin_popcount(r.placements[i].gpu_mask), 1);
        }
        assert_true(per_gpu[0] <= 1000);
        assert_true(per_gpu[1] <= 1000);
        /* 500 + 450 on GPU 0, 450 + 450 on GPU 1; the fourth waits */
        assert_int_equal(r.nplacements, 3);
        assert_int_equal(per_gpu[0], 950);
        assert_int_equal(per_gpu[1], 900);
        tm_sched_result_release(&r);
    }
}

/* tarmac's ties between equal GPUs: the lowest node first, except that a
 * node changed earlier in the pass comes before the others (the order of
 * the best-fit buckets, buckets.c; the replays' results rest on it).
 * Three one-GPU nodes, each GPU half used; node 2 has one core free.
 * Shares of 300 milli: the first two ask 4 cores, so node 2 is out: node
 * 0 (the lowest), then node 1 (node 0 has 200 left).  The third asks 1
 * core: node 2, the one with 500 left.  A fourth of 150 milli: nodes 0
 * and 1 have 200 left, both changed in the pass, node 1 last: node 1. */
static void test_share_ties(void **state)
{
    struct tm_sched_node n[3];
    struct tm_sched_alloc a[3];
    struct tm_sched_job j[4];
    struct tm_sched_result r = {0};

    (void)state;
    for (int i = 0; i < 3; i++) {
        n[i] = (struct tm_sched_node){.id = 10 + i, .cpu_milli = 16000, .memory_mib = 65536, .gpus = 1,
                                      .model = 0, .schedulable = true};
        a[i] = (struct tm_sched_alloc){.job_id = 100 + i, .node = i, .gpu_mask = 0x1, .gpu_milli = 500,
                                       .cpu_milli = i == 2 ? 15000 : 1000, .memory_mib = 1, .end_ms = 10 * H};
    }
    for (int k = 0; k < 4; k++) {
        j[k] = job(20 + k, k, 0, H);
        j[k].gpu_milli = k < 3 ? 300 : 150;
        j[k].cpu_milli = k < 2 ? 4000 : 1000;
    }
    assert_int_equal(run(TM_POLICY_TARMAC, j, 4, n, 3, a, 3, 10, &r), 0);
    assert_int_equal(r.nplacements, 4);
    assert_int_equal(placed_node(&r, 0), 0);
    assert_int_equal(placed_node(&r, 1), 1);
    assert_int_equal(placed_node(&r, 2), 2);
    assert_int_equal(placed_node(&r, 3), 1);
    tm_sched_result_release(&r);
}

/* Gang: two members of 4 GPUs on distinct nodes, or nothing. */
static void test_gang_all_or_nothing(void **state)
{
    struct tm_sched_node n[2] = {node8(1, 0), node8(2, 0)};
    struct tm_sched_alloc a[2] = {hold(0, 0x0f, H), hold(1, 0x1f, H)};
    struct tm_sched_job j[1] = {job(30, 1, 4, H)};
    struct tm_sched_result r = {0};

    (void)state;
    j[0].nodes = 2;
    for (int p = 0; p < TM_POLICY_MAX; p++) {
        assert_int_equal(run(p, j, 1, n, 2, a, 2, 10, &r), 0);
        assert_int_equal(r.nplacements, 0);
        assert_int_not_equal(r.notes[0].verdict, TM_SCHED_PLACED);
        tm_sched_result_release(&r);
        assert_int_equal(run(p, j, 1, n, 2, a, 1, 10, &r), 0);
        assert_int_equal(r.nplacements, 2);
        assert_int_not_equal(r.placements[0].node, r.placements[1].node);
        tm_sched_result_release(&r);
    }
}

/* A job that asks for model 1 never lands on model 0, and a job no node can
 * ever hold is reported as such without blocking fifo. */
static void test_model_constraint(void **state)
{
    struct tm_sched_node n[2] = {node8(1, 0), node8(2, 1)};
    struct tm_sched_alloc a[1] = {hold(1, 0xff, H)};
    struct tm_sched_job j[3] = {job(40, 1, 1, H), job(41, 2, 16, H), job(42, 3, 1, H)};
    struct tm_sched_result r = {0};

    (void)state;
    j[0].model_mask = 1u << 1;
    j[1].model_mask = 1u << 0;
    for (int p = 0; p < TM_POLICY_MAX; p++) {
        assert_int_equal(run(p, j, 3, n, 2, a, 1, 10, &r), 0);
        assert_int_equal(placed_node(&r, 0), -1);
        assert_int_equal(r.notes[1].verdict, TM_SCHED_NO_MATCH);
        if (p != TM_POLICY_FIFO)
            assert_int_equal(placed_node(&r, 2), 0);
        tm_sched_result_release(&r);
        assert_int_equal(run(p, j, 1, n, 2, NULL, 0, 10, &r), 0);
        assert_int_equal(placed_node(&r, 0), 1);
        tm_sched_result_release(&r);
    }
}

/* A stream of small short jobs on one 8-GPU node: tarmac's shortest-work
 * order would pass over the 8-GPU job forever; aging must start it within
 * the starvation bound.  A tiny discrete loop drives the passes. */
static void test_starvation_bound(void **state)
{
    enum { MAXJ = 4000 };
    struct tm_sched_node n[1] = {node8(1, 0)};
    struct tm_sched_job *q = calloc(MAXJ, sizeof(*q));
    struct tm_sched_alloc *run_a = calloc(MAXJ, sizeof(*run_a));
    int64_t *run_end = calloc(MAXJ, sizeof(*run_end));
    size_t nq = 0, nr = 0;
    int64_t bound = 2 * H, big_start = -1, next_id = 1;

    (void)state;
    assert_non_null(q);
    assert_non_null(run_a);
    assert_non_null(run_end);
    q[nq++] = job(0, 0, 8, H);
    for (int64_t t = 0; t < 6 * H && big_start < 0; t += 60000) {
        struct tm_sched_input in = {0};
        struct tm_sched_result r = {0};
        size_t w = 0;
        /* finish */
        for (size_t i = 0; i < nr; i++)
            if (run_end[i] > t) {
                run_a[w] = run_a[i];
                run_end[w++] = run_end[i];
            }
        nr = w;
        /* two small 10-minute jobs arrive every minute: enough to keep the
         * node busy with no gap of 8 GPUs ever opening by itself */
        for (int k = 0; k < 2 && nq + 2 < MAXJ; k++)
            q[nq++] = job(next_id++, t, 1, 600000);
        in = (struct tm_sched_input){.jobs = q, .njobs = nq, .nodes = n, .nnodes = 1,
                                     .allocs = run_a, .nallocs = nr, .now_ms = t,
                                     .policy = TM_POLICY_TARMAC,
                                     .params = {.starvation_ms = bound}};
        assert_int_equal(tm_sched_run(&in, &r), 0);
        {
            bool *gone = calloc(nq + 1, sizeof(*gone));
            assert_non_null(gone);
            for (size_t p = 0; p < r.nplacements; p++) {
                const struct tm_sched_job *jb = &q[r.placements[p].job];
                if (jb->id == 0)
                    big_start = t;
                assert_true(nr < MAXJ);
                run_a[nr] = (struct tm_sched_alloc){.job_id = jb->id, .node = 0,
                                                    .gpu_mask = r.placements[p].gpu_mask,
                                                    .gpu_milli = 1000, .cpu_milli = jb->cpu_milli,
                                                    .memory_mib = jb->memory_mib,
                                                    .end_ms = t + jb->estimate_ms};
                run_end[nr++] = t + jb->estimate_ms;
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
    assert_true(big_start >= 0);
    assert_true(big_start <= bound);
    free(q);
    free(run_a);
    free(run_end);
}

/* tarmac: a preemptible job may fill a reserved hole whatever its
 * estimate, marked as a loan; when the reserved job can start, the loan is
 * evicted in the same pass.  A non-preemptible job of the same length may
 * not go there, and EASY backfill never lends. */
static void test_loans_and_eviction(void **state)
{
    struct tm_sched_node n[1] = {node8(1, 0)};
    struct tm_sched_alloc a[2] = {hold(0, 0x0f, 30 * H + 3600000), {0}};
    struct tm_sched_job j[3] = {job(10, 0, 8, H), job(11, 30 * H - 5, 2, 10 * H),
                                job(12, 30 * H - 4, 2, 10 * H)};
    struct tm_sched_result r = {0};

    (void)state;
    j[1].preemptible = true;
    assert_int_equal(run(TM_POLICY_TARMAC, j, 3, n, 1, a, 1, 30 * H, &r), 0);
    assert_int_equal(r.notes[0].verdict, TM_SCHED_RESERVED);
    assert_int_equal(placed_node(&r, 1), 0);
    assert_true(r.placements[0].loaned);
    assert_int_equal(r.notes[2].verdict, TM_SCHED_WAIT_RESERVATION);
    tm_sched_result_release(&r);
    assert_int_equal(run(TM_POLICY_BACKFILL, j, 3, n, 1, a, 1, 30 * H, &r), 0);
    assert_int_equal(placed_node(&r, 1), -1);
    tm_sched_result_release(&r);

    /* an hour later the 4 GPUs are free, the loan holds 2: evict it */
    a[0] = (struct tm_sched_alloc){.job_id = 11, .node = 0, .gpu_mask = 0x30, .gpu_milli = 1000,
                                   .cpu_milli = 1000, .memory_mib = 1024, .end_ms = 40 * H,
                                   .preemptible = true, .loaned = true};
    assert_int_equal(run(TM_POLICY_TARMAC, j, 1, n, 1, a, 1, 31 * H, &r), 0);
    assert_int_equal(r.npreemptions, 1);
    assert_int_equal(r.preemptions[0].alloc, 0);
    assert_int_equal(r.preemptions[0].job, 0);
    assert_int_equal(placed_node(&r, 0), 0);
    assert_int_equal(r.placements[0].gpu_mask, 0xff);
    tm_sched_result_release(&r);
    /* not a loan: nothing is evicted, the job keeps its reservation */
    a[0].loaned = false;
    assert_int_equal(run(TM_POLICY_TARMAC, j, 1, n, 1, a, 1, 31 * H, &r), 0);
    assert_int_equal(r.npreemptions, 0);
    assert_int_equal(r.notes[0].verdict, TM_SCHED_RESERVED);
    tm_sched_result_release(&r);
}

/* tarmac: a held reservation stays on its node, and gap fillers must end
 * (twice their estimate) by the first promised start even when the start
 * computed now is later. */
static void test_sticky_reservation(void **state)
{
    struct tm_sched_node n[3] = {node8(1, 0), node8(2, 0), node8(3, 0)};
    struct tm_sched_alloc a[3] = {hold(0, 0x0f, 31 * H), hold(1, 0x0f, 32 * H), hold(2, 0xff, 40 * H)};
    struct tm_sched_job j[2] = {job(10, 0, 8, H), job(11, 30 * H - 5, 1, H)};
    struct tm_sched_result r = {0};

    (void)state;
    /* aged: reserved on the earliest node, 0 */
    assert_int_equal(run(TM_POLICY_TARMAC, j, 1, n, 3, a, 3, 30 * H, &r), 0);
    assert_int_equal(r.notes[0].verdict, TM_SCHED_RESERVED);
    assert_int_equal(r.notes[0].node, 0);
    tm_sched_result_release(&r);
    /* held on node 1 before: it stays there */
    j[0].hold_node = 2;
    assert_int_equal(run(TM_POLICY_TARMAC, j, 1, n, 3, a, 3, 30 * H, &r), 0);
    assert_int_equal(r.notes[0].node, 1);
    assert_int_equal(r.notes[0].start_ms, 32 * H);
    tm_sched_result_release(&r);
    /* a fresh job that held node 1 keeps it too (hold), and its hole is
     * open: a 1-hour filler fits twice in the 2 hours to the start ... */
    j[0].submit_ms = 30 * H - 10;
    a[0].gpu_mask = 0xff; /* only node 1 has room */
    assert_int_equal(run(TM_POLICY_TARMAC, j, 2, n, 3, a, 3, 30 * H, &r), 0);
    assert_int_equal(r.notes[0].verdict, TM_SCHED_RESERVED);
    assert_int_equal(r.notes[0].node, 1);
    assert_int_equal(placed_node(&r, 1), 1);
    assert_non_null(strstr(r.notes[1].why, "gap"));
    tm_sched_result_release(&r);
    /* ... but not if the start first promised was 1 hour away */
    j[0].hold_start_ms = 31 * H;
    assert_int_equal(run(TM_POLICY_TARMAC, j, 2, n, 3, a, 3, 30 * H, &r), 0);
    assert_int_equal(r.notes[0].verdict, TM_SCHED_RESERVED);
    assert_int_equal(r.notes[1].verdict, TM_SCHED_WAIT_RESERVATION);
    tm_sched_result_release(&r);
}

/* tarmac reserves for a fresh blocked job only when the free GPUs would
 * hold it but are spread over nodes (they idle while it waits); when the
 * cluster is simply full it leaves the nodes to the queue until the job
 * ages.  EASY reserves either way. */
static void test_reserve_when_fragmented(void **state)
{
    struct tm_sched_node n[2] = {node8(1, 0), node8(2, 0)};
    struct tm_sched_alloc a[2] = {hold(0, 0x0f, 2 * H), hold(1, 0xf0, 3 * H)};
    struct tm_sched_job j[1] = {job(10, 0, 8, H)};
    struct tm_sched_result r = {0};

    (void)state;
    assert_int_equal(run(TM_POLICY_TARMAC, j, 1, n, 2, a, 2, 10, &r), 0);
    assert_int_equal(r.notes[0].verdict, TM_SCHED_RESERVED);
    assert_int_equal(r.notes[0].node, 0);
    tm_sched_result_release(&r);
    a[0].gpu_mask = 0xff;
    a[1].gpu_mask = 0xff;
    assert_int_equal(run(TM_POLICY_TARMAC, j, 1, n, 2, a, 2, 10, &r), 0);
    assert_int_equal(r.notes[0].verdict, TM_SCHED_WAIT_CAPACITY);
    tm_sched_result_release(&r);
    assert_int_equal(run(TM_POLICY_BACKFILL, j, 1, n, 2, a, 2, 10, &r), 0);
    assert_int_equal(r.notes[0].verdict, TM_SCHED_RESERVED);
    tm_sched_result_release(&r);
    /* aged past half the bound: tarmac reserves too */
    assert_int_equal(run(TM_POLICY_TARMAC, j, 1, n, 2, a, 2, 30 * H, &r), 0);
    assert_int_equal(r.notes[0].verdict, TM_SCHED_RESERVED);
    tm_sched_result_release(&r);
}

/* ---------- properties on random inputs ---------- */

static uint64_t rng_next(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static void random_case(uint64_t seed, struct tm_sched_job **ret_j, size_t *nj,
                        struct tm_sched_node **ret_n, size_t *nn, struct tm_sched_alloc **ret_a,
                        size_t *na)
{
    uint64_t s = seed;
    size_t J = 1 + rng_next(&s) % 200, N = 1 + rng_next(&s) % 40, A = 0;
    struct tm_sched_job *j = calloc(J, sizeof(*j));
    struct tm_sched_node *n = calloc(N, sizeof(*n));
    struct tm_sched_alloc *a = calloc(N * 8, sizeof(*a));
    static const int sizes[4] = {1, 2, 4, 8};

    assert_true(j && n && a);
    for (size_t i = 0; i < N; i++) {
        n[i] = (struct tm_sched_node){.id = (int64_t)i, .cpu_milli = 8000 + (int64_t)(rng_next(&s) % 64) * 1000,
                                      .memory_mib = 65536, .gpus = sizes[rng_next(&s) % 4],
                                      .model = (int32_t)(rng_next(&s) % 3),
                                      .schedulable = rng_next(&s) % 10 != 0};
        /* a few running jobs: one whole GPU each, or a share on GPU 0 */
        if (rng_next(&s) % 2) {
            a[A++] = (struct tm_sched_alloc){.job_id = 1000 + (int64_t)A, .node = (int32_t)i,
                                             .gpu_mask = 1, .gpu_milli = 100 + (int32_t)(rng_next(&s) % 900),
                                             .cpu_milli = 1000, .memory_mib = 1024,
                                             .end_ms = (int64_t)(rng_next(&s) % (4 * H))};
            a[A - 1].preemptible = rng_next(&s) % 2;
            a[A - 1].loaned = a[A - 1].preemptible && rng_next(&s) % 2;
        }
    }
    for (size_t i = 0; i < J; i++) {
        uint64_t kind = rng_next(&s) % 4;
        j[i] = job((int64_t)i, (int64_t)(rng_next(&s) % H), 0, (int64_t)(rng_next(&s) % (3 * H)));
        j[i].cpu_milli = (int64_t)(rng_next(&s) % 16) * 1000;
        j[i].memory_mib = (int64_t)(rng_next(&s) % 32768);
        j[i].priority = (int32_t)(rng_next(&s) % 3);
        j[i].preemptible = rng_next(&s) % 3 == 0;
        j[i].klass = (enum tm_job_class)(rng_next(&s) % TM_CLASS_MAX);
        if (kind == 0) {
            j[i].gpus = 0;
            j[i].gpu_milli = 1 + (int32_t)(rng_next(&s) % 999);
        } else {
            j[i].gpus = sizes[rng_next(&s) % 4];
            j[i].gpu_milli = 1000;
            if (kind == 3)
                j[i].nodes = 1 + (int32_t)(rng_next(&s) % 3);
        }
        if (rng_next(&s) % 3 == 0)
            j[i].model_mask = 1u << (rng_next(&s) % 3);
        if (rng_next(&s) % 4 == 0) {
            j[i].hold_node = 1 + (int32_t)(rng_next(&s) % N);
            j[i].hold_start_ms = (int64_t)(rng_next(&s) % (3 * H));
        }
        /* some aged past half the default bound, to get reservations */
        if (rng_next(&s) % 4 == 0)
            j[i].submit_ms -= 30 * H;
    }
    *ret_j = j;
    *nj = J;
    *ret_n = n;
    *nn = N;
    *ret_a = a;
    *na = A;
}

/* A job tied by its model_mask to a model holding at most a quarter of the
 * GPUs is reserved as soon as it is blocked, not at half the bound: here
 * the only model-0 node (1 GPU of 9) is half used for another hour, and a
 * flexible 2-hour share would otherwise take the rest and push it out.
 * Without the mask the same job waits and the share runs. */
static void test_narrow_reserved_at_once(void **state)
{
    int64_t now = 100 * H;
    struct tm_sched_node n[2] = {p100_like(1), node8(2, 1)};
    struct tm_sched_alloc a[2] = {{.job_id = 900, .node = 0, .gpu_mask = 1, .gpu_milli = 500, .cpu_milli = 4000,
                                   .memory_mib = 1024, .end_ms = now + H},
                                  hold(1, 0xff, now + 10 * H)};
    struct tm_sched_job j[2] = {job(1, now - H / 6, 1, H), job(2, now - H / 12, 0, 2 * H)};
    struct tm_sched_result r = {0};

    (void)state;
    j[0].cpu_milli = 12000;
    j[0].model_mask = 1u << 0;
    j[1].gpu_milli = 300;
    assert_int_equal(run(TM_POLICY_TARMAC, j, 2, n, 2, a, 2, now, &r), 0);
    assert_int_equal(r.notes[0].verdict, TM_SCHED_RESERVED);
    assert_int_equal(r.notes[0].node, 0);
    assert_int_equal(r.notes[0].start_ms, now + H);
    assert_int_equal(r.notes[1].verdict, TM_SCHED_WAIT_RESERVATION);
    assert_int_equal(r.nplacements, 0);
    tm_sched_result_release(&r);
    j[0].model_mask = 0;
    assert_int_equal(run(TM_POLICY_TARMAC, j, 2, n, 2, a, 2, now, &r), 0);
    assert_int_equal(r.notes[0].verdict, TM_SCHED_WAIT_CAPACITY);
    assert_int_equal(placed_node(&r, 1), 0);
    tm_sched_result_release(&r);
}

/* A job that is not narrow, when it must drain a node, leaves the nodes a
 * narrow job needs unless they start it 6 h earlier. */
static void test_reserve_avoids_narrow_nodes(void **state)
{
    int64_t now = 100 * H;
    struct tm_sched_node n[4] = {node8(1, 0), node8(2, 1), node8(3, 1), node8(4, 1)};
    struct tm_sched_alloc a[4] = {hold(0, 0xff, now + H), hold(1, 0xff, now + 3 * H), hold(2, 0xff, now + 20 * H),
                                  hold(3, 0xff, now + 20 * H)};
    /* narrow: model 0 only (8 of 32 GPUs); aged: any model, 30 h old */
    struct tm_sched_job j[2] = {job(1, now - H, 8, H), job(2, now - 30 * H, 8, H)};
    struct tm_sched_result r = {0};

    (void)state;
    j[0].model_mask = 1u << 0;
    assert_int_equal(run(TM_POLICY_TARMAC, j, 2, n, 4, a, 4, now, &r), 0);
    assert_int_equal(r.notes[1].verdict, TM_SCHED_RESERVED);
    assert_int_equal(r.notes[1].node, 1); /* 3 h on model 1, not 1 h on model 0 */
    assert_int_equal(r.notes[0].verdict, TM_SCHED_RESERVED);
    assert_int_equal(r.notes[0].node, 0);
    tm_sched_result_release(&r);
    /* with model 1 draining in 20 h at best, model 0 is 19 h earlier */
    a[1].end_ms = now + 20 * H;
    assert_int_equal(run(TM_POLICY_TARMAC, j, 2, n, 4, a, 4, now, &r), 0);
    assert_int_equal(r.notes[1].verdict, TM_SCHED_RESERVED);
    assert_int_equal(r.notes[1].node, 0);
    tm_sched_result_release(&r);
}

/* Sixteen 8-GPU nodes, node i's `mask` GPUs held until now + (i + 1) h,
 * and three jobs of `gpus` GPUs aged 30, 29 and 28 h. */
static void aged_trio(struct tm_sched_node n[16], struct tm_sched_alloc a[16], uint32_t mask,
                      struct tm_sched_job j[3], int32_t gpus, int64_t now)
{
    for (int i = 0; i < 16; i++) {
        n[i] = node8(i + 1, 0);
        a[i] = hold(i, mask, now + (i + 1) * H);
    }
    for (int x = 0; x < 3; x++)
        j[x] = job(x + 1, now - (30 - x) * H, gpus, H);
}

/* Heavy jobs (4+ whole GPUs, not narrow) drain at most an eighth of the
 * GPUs at a time, the first always, and jobs that many nodes can hold get
 * one reservation per 64 GPUs (test_flexible_limit): three aged 8-GPU
 * jobs get one reservation on 16 GPUs and two on 128; fifo and backfill
 * are unchanged. */
static void test_drain_cap(void **state)
{
    int64_t now = 100 * H;
    struct tm_sched_node n[16];
    struct tm_sched_alloc a[16];
    struct tm_sched_job j[3];
    struct tm_sched_result r = {0};
    size_t sizes[2] = {2, 16};
    int want[2] = {1, 2};

    (void)state;
    aged_trio(n, a, 0x0f, j, 8, now);
    for (int k = 0; k < 2; k++) {
        int reserved = 0;
        assert_int_equal(run(TM_POLICY_TARMAC, j, 3, n, sizes[k], a, sizes[k], now, &r), 0);
        assert_int_equal(r.nplacements, 0);
        for (int x = 0; x < 3; x++)
            reserved += r.notes[x].verdict == TM_SCHED_RESERVED;
        assert_int_equal(reserved, want[k]);
        assert_int_equal(r.notes[0].verdict, TM_SCHED_RESERVED); /* the oldest first */
        assert_int_equal(r.notes[0].node, 0);                    /* the earliest drain */
        tm_sched_result_release(&r);
    }
    assert_int_equal(run(TM_POLICY_BACKFILL, j, 3, n, 2, a, 2, now, &r), 0);
    assert_int_equal(r.nreservations, 1);
    tm_sched_result_release(&r);
    /* A drain under way (job 2 held node 1 in the last pass) keeps going
     * past the cap: two reservations on 16 GPUs. */
    j[1].hold_node = 2;
    assert_int_equal(run(TM_POLICY_TARMAC, j, 3, n, 2, a, 2, now, &r), 0);
    assert_int_equal(r.notes[0].verdict, TM_SCHED_RESERVED);
    assert_int_equal(r.notes[0].node, 0);
    assert_int_equal(r.notes[1].verdict, TM_SCHED_RESERVED);
    assert_int_equal(r.notes[1].node, 1);
    assert_int_not_equal(r.notes[2].verdict, TM_SCHED_RESERVED);
    tm_sched_result_release(&r);
}

/* Aged heavy jobs that many nodes can hold get one reservation per 64
 * GPUs at a time (drains under way count, jobs at risk aside); lighter
 * flexible jobs one on any fleet.  4-GPU jobs, two drains on 64 GPUs
 * under the drain cap, get one there and two on 128; 2-GPU jobs one on
 * both; the third waits. */
static void test_flexible_limit(void **state)
{
    int64_t now = 100 * H;
    struct tm_sched_node n[16];
    struct tm_sched_alloc a[16];
    struct tm_sched_job j[3];
    struct tm_sched_result r = {0};
    size_t sizes[2] = {8, 16};
    int want[2][2] = {{1, 2}, {1, 1}}; /* [4-GPU, 2-GPU][64, 128 GPUs] */

    (void)state;
    assert_int_equal(tm_sched_tarmac_flexible_limit(0), 1);
    assert_int_equal(tm_sched_tarmac_flexible_limit(64), 1);
    assert_int_equal(tm_sched_tarmac_flexible_limit(127), 1);
    assert_int_equal(tm_sched_tarmac_flexible_limit(128), 2);
    assert_int_equal(tm_sched_tarmac_flexible_limit(4096), 64);
    aged_trio(n, a, 0xff, j, 4, now);
    for (int g = 0; g < 2; g++) {
        for (int x = 0; x < 3; x++)
            j[x].gpus = g == 0 ? 4 : 2;
        for (int k = 0; k < 2; k++) {
            int reserved = 0;
            assert_int_equal(run(TM_POLICY_TARMAC, j, 3, n, sizes[k], a, sizes[k], now, &r), 0);
            for (int x = 0; x < 3; x++)
                reserved += r.notes[x].verdict == TM_SCHED_RESERVED;
            assert_int_equal(reserved, want[g][k]);
            assert_int_equal(r.notes[0].verdict, TM_SCHED_RESERVED); /* the oldest first */
            assert_int_not_equal(r.notes[2].verdict, TM_SCHED_RESERVED);
            tm_sched_result_release(&r);
        }
    }
    /* A drain under way counts: 4-GPU job 2 held node 1; on 64 GPUs it
     * keeps it and job 3 still waits; job 1, older, reserves as before. */
    for (int x = 0; x < 3; x++)
        j[x].gpus = 4;
    j[1].hold_node = 2;
    assert_int_equal(run(TM_POLICY_TARMAC, j, 3, n, 8, a, 8, now, &r), 0);
    assert_int_equal(r.notes[0].verdict, TM_SCHED_RESERVED);
    assert_int_equal(r.notes[1].verdict, TM_SCHED_RESERVED);
    assert_int_equal(r.notes[1].node, 1);
    assert_int_not_equal(r.notes[2].verdict, TM_SCHED_RESERVED);
    tm_sched_result_release(&r);
}

/* Aged jobs: a narrow one before a flexible one submitted earlier, when
 * both want the narrow job's only node; among aged narrow jobs the shorter
 * estimate first (submit + 4x estimate), but the shift is capped at 12 h. */
static void test_aged_narrow_order(void **state)
{
    int64_t now = 100 * H;
    struct tm_sched_node n[2] = {p100_like(1), node8(2, 1)};
    struct tm_sched_alloc a[1] = {hold(1, 0xff, now + 10 * H)};
    struct tm_sched_job j[2] = {job(1, now - 30 * H, 1, H), job(2, now - 25 * H, 1, H)};
    struct tm_sched_result r = {0};

    (void)state;
    /* Both need 12 of the P100-like node's 16 cores: one at a time. */
    j[0].cpu_milli = j[1].cpu_milli = 12000;
    j[1].model_mask = 1u << 0;
    assert_int_equal(run(TM_POLICY_TARMAC, j, 2, n, 2, a, 1, now, &r), 0);
    assert_int_equal(placed_node(&r, 1), 0); /* the narrow job, though submitted later */
    assert_int_equal(placed_node(&r, 0), -1);
    tm_sched_result_release(&r);
    /* fifo still takes submit order */
    assert_int_equal(run(TM_POLICY_FIFO, j, 2, n, 2, a, 1, now, &r), 0);
    assert_int_equal(placed_node(&r, 0), 0);
    assert_int_equal(placed_node(&r, 1), -1);
    tm_sched_result_release(&r);

    /* Two narrow jobs: 30 h old estimated 10 h (moved 12 h, the cap) and
     * 28 h old estimated 5 min (moved 20 min): the short one first. */
    j[0] = job(1, now - 30 * H, 1, 10 * H);
    j[1] = job(2, now - 28 * H, 1, H / 12);
    for (int k = 0; k < 2; k++) {
        j[k].cpu_milli = 12000;
        j[k].model_mask = 1u << 0;
    }
    assert_int_equal(run(TM_POLICY_TARMAC, j, 2, n, 2, a, 1, now, &r), 0);
    assert_int_equal(placed_node(&r, 1), 0);
    assert_int_equal(placed_node(&r, 0), -1);
    tm_sched_result_release(&r);
    /* 42 h old: even moved by the 12 h cap it is 2 h ahead of the short one */
    j[0].submit_ms = now - 42 * H;
    assert_int_equal(run(TM_POLICY_TARMAC, j, 2, n, 2, a, 1, now, &r), 0);
    assert_int_equal(placed_node(&r, 0), 0);
    assert_int_equal(placed_node(&r, 1), -1);
    tm_sched_result_release(&r);
}

/* Aged narrow jobs that one node serves one at a time, bound 48 h: A
 * (47.5 h old, 20 h) can still start now, but B and C (36 and 35 h old,
 * 2 h each) would then both start past the bound; in submit order moved
 * by estimate A is first (moved by the 12 h cap, B and C by 8 h).
 * Moore-Hodgson (late.c) marks A late anyway: B first, then C, and A at
 * 4 h: one job past the bound instead of two. */
static void test_aged_late_anyway(void **state)
{
    int64_t now = 100 * H;
    struct tm_sched_node n[2] = {p100_like(1), node8(2, 1)};
    struct tm_sched_alloc a[1] = {hold(1, 0xff, now + 10 * H)};
    struct tm_sched_job j[3] = {job(1, now - 47 * H - H / 2, 1, 20 * H), job(2, now - 36 * H, 1, 2 * H),
                                job(3, now - 35 * H, 1, 2 * H)};
    struct tm_sched_result r = {0};

    (void)state;
    for (int k = 0; k < 3; k++) {
        j[k].cpu_milli = 12000;
        j[k].model_mask = 1u << 0;
    }
    assert_int_equal(run(TM_POLICY_TARMAC, j, 3, n, 2, a, 1, now, &r), 0);
    assert_int_equal(placed_node(&r, 1), 0);
    assert_int_equal(placed_node(&r, 0), -1);
    assert_int_equal(placed_node(&r, 2), -1);
    /* the decision says why the oldest job is not first */
    assert_non_null(strstr(r.notes[0].why, "past the bound whatever the order"));
    assert_null(strstr(r.notes[2].why, "whatever the order"));
    tm_sched_result_release(&r);
    /* With only a younger job (26 h old, due to start by 22 h) nobody
     * passes the bound with A first: A is not marked, and goes first. */
    j[1] = j[2];
    j[1].submit_ms = now - 26 * H;
    assert_int_equal(run(TM_POLICY_TARMAC, j, 2, n, 2, a, 1, now, &r), 0);
    assert_int_equal(placed_node(&r, 0), 0);
    assert_int_equal(placed_node(&r, 1), -1);
    tm_sched_result_release(&r);
}

/* Aged jobs tied to few nodes by size alone (no model_mask: 120 cores fit
 * only the 128-core node, 8 of 40 GPUs) go before aged flexible ones. */
static void test_aged_tied_order(void **state)
{
    int64_t now = 100 * H;
    struct tm_sched_node n[5];
    struct tm_sched_alloc a[4];
    struct tm_sched_job j[2] = {job(1, now - 30 * H, 8, H), job(2, now - 25 * H, 8, H)};
    struct tm_sched_result r = {0};

    (void)state;
    n[0] = node8(1, 0);
    n[0].cpu_milli = 128000;
    for (int i = 1; i < 5; i++) {
        n[i] = node8(i + 1, 1);
        a[i - 1] = hold(i, 0xff, now + 10 * H);
    }
    j[0].cpu_milli = 64000;  /* fits either model */
    j[1].cpu_milli = 120000; /* fits the 128-core node only */
    assert_int_equal(run(TM_POLICY_TARMAC, j, 2, n, 5, a, 4, now, &r), 0);
    assert_int_equal(placed_node(&r, 1), 0);
    assert_int_equal(placed_node(&r, 0), -1);
    tm_sched_result_release(&r);
}

/* align_ends: three nodes whose work ends at 10 h, 2 h and 6 h (node 0
 * first in first-fit order).  A job whose own runs are known goes to the
 * node that outlives it and frees soonest after it; one that outlives
 * every node goes to the node ending latest; a job without a known
 * estimate, or with align_ends off, keeps first fit.  Work placed earlier
 * in the same pass moves a node's end (the 12 h job makes node 0 end at
 * 12 h, so the 7 h and 8 h jobs find only node 0 outliving them). */
static void test_align_ends(void **state)
{
    struct tm_sched_node n[3] = {node8(1, 0), node8(2, 0), node8(3, 0)};
    struct tm_sched_alloc a[3] = {hold(0, 0x01, 10 * H), hold(1, 0x01, 2 * H), hold(2, 0x01, 6 * H)};
    struct tm_sched_job j[6] = {job(10, 1, 1, 1 * H), job(11, 2, 1, 5 * H), job(12, 3, 1, 12 * H),
                                job(13, 4, 1, 1 * H), job(14, 5, 1, 7 * H), job(15, 6, 1, 8 * H)};
    struct tm_sched_input in = {.jobs = j, .njobs = 6, .nodes = n, .nnodes = 3, .allocs = a,
                                .nallocs = 3, .now_ms = 0, .policy = TM_POLICY_BACKFILL};
    struct tm_sched_result r = {0};

    (void)state;
    for (int k = 0; k < 6; k++)
        j[k].estimate_known = k != 3;
    assert_int_equal(tm_sched_run(&in, &r), 0);
    for (int k = 0; k < 6; k++)
        assert_int_equal(placed_node(&r, k), 0); /* first fit: all on node 0 */
    tm_sched_result_release(&r);

    in.params.align_ends = true;
    assert_int_equal(tm_sched_run(&in, &r), 0);
    assert_int_equal(placed_node(&r, 0), 1); /* 1 h: node 1 (2 h) outlives it, frees first */
    assert_int_equal(placed_node(&r, 1), 2); /* 5 h: node 2 (6 h) */
    assert_int_equal(placed_node(&r, 2), 0); /* 12 h: none outlives it; node 0 ends latest, now 12 h */
    assert_int_equal(placed_node(&r, 3), 0); /* estimate not known: first fit */
    assert_int_equal(placed_node(&r, 4), 0); /* 7 h: node 0 (12 h now) is the only one after 7 h */
    assert_int_equal(placed_node(&r, 5), 0); /* 8 h: the same */
    tm_sched_result_release(&r);

    /* tarmac's best fit: nothing strands, so the known ends decide before
     * the tightness of the fit, the same way. */
    in.policy = TM_POLICY_TARMAC;
    assert_int_equal(tm_sched_run(&in, &r), 0);
    assert_int_equal(placed_node(&r, 0), 1);
    assert_int_equal(placed_node(&r, 1), 2);
    assert_int_equal(placed_node(&r, 2), 0);
    assert_int_equal(placed_node(&r, 4), 0);
    assert_int_equal(placed_node(&r, 5), 0);
    tm_sched_result_release(&r);
    in.params.align_ends = false;
    assert_int_equal(tm_sched_run(&in, &r), 0);
    assert_int_not_equal(placed_node(&r, 0), 1); /* without: best fit packs them together */
    tm_sched_result_release(&r);
    in.params.align_ends = true;
    in.policy = TM_POLICY_BACKFILL;

    /* the rule only chooses among nodes that fit: no node here has 8 free GPUs */
    j[0] = job(20, 1, 8, 1 * H);
    j[0].estimate_known = true;
    in.njobs = 1;
    assert_int_equal(tm_sched_run(&in, &r), 0);
    assert_int_equal(r.nplacements, 0);
    tm_sched_result_release(&r);
}

/* params.elastic (tarmac): among placements that strand alike, the node
 * the caller ranks first (its oldest) before the tightest fit.  Node 0
 * (rank 1) has 6 GPUs free, node 1 (rank 5) has 4: best fit alone puts a
 * 1-GPU job on node 1, the elastic preference on node 0, so node 1's
 * work is left to end and the node to go. */
static void test_elastic_prefers_rank(void **state)
{
    struct tm_sched_node n[2] = {node8(1, 0), node8(2, 0)};
    struct tm_sched_alloc a[2] = {hold(0, 0x03, 2 * H), hold(1, 0x0f, 2 * H)};
    struct tm_sched_job j[1] = {job(10, 1, 1, H)};
    struct tm_sched_input in = {.jobs = j, .njobs = 1, .nodes = n, .nnodes = 2, .allocs = a,
                                .nallocs = 2, .now_ms = 0, .policy = TM_POLICY_TARMAC};
    struct tm_sched_result r = {0};

    (void)state;
    n[0].rank = 1;
    n[1].rank = 5;
    assert_int_equal(tm_sched_run(&in, &r), 0);
    assert_int_equal(placed_node(&r, 0), 1); /* best fit */
    tm_sched_result_release(&r);
    in.params.elastic = true;
    assert_int_equal(tm_sched_run(&in, &r), 0);
    assert_int_equal(placed_node(&r, 0), 0); /* the lower rank */
    tm_sched_result_release(&r);
    n[0].rank = 9; /* ranks, not positions, decide */
    assert_int_equal(tm_sched_run(&in, &r), 0);
    assert_int_equal(placed_node(&r, 0), 1);
    tm_sched_result_release(&r);
}

static void test_random_properties(void **state)
{
    (void)state;
    for (uint64_t seed = 1; seed <= 300; seed++) {
        struct tm_sched_job *j;
        struct tm_sched_node *n;
        struct tm_sched_alloc *a;
        size_t nj, nn, na;
        random_case(seed, &j, &nj, &n, &nn, &a, &na);
        for (size_t k = 0; k < nj; k++)
            j[k].estimate_known = (seed + k) % 3 != 0;
        for (size_t k = 0; k < nn; k++)
            n[k].rank = (int64_t)((seed * 31 + k * 17) % 7);
        /* the policies, then each with align_ends, then with elastic too */
        for (int v = 0; v < 3 * TM_POLICY_MAX; v++) {
            int p = v % TM_POLICY_MAX;
            struct tm_sched_input in = {.jobs = j, .njobs = nj, .nodes = n, .nnodes = nn,
                                        .allocs = a, .nallocs = na, .now_ms = H, .policy = p,
                                        .params = {.align_ends = v >= TM_POLICY_MAX,
                                                   .elastic = v >= 2 * TM_POLICY_MAX}};
            struct tm_sched_result r1 = {0}, r2 = {0};
            int32_t *gpu = calloc(nn * 16, sizeof(*gpu));
            int64_t *cpu = calloc(nn, sizeof(*cpu));
            int64_t *mem = calloc(nn, sizeof(*mem));
            int *members = calloc(nj, sizeof(*members));
            assert_true(gpu && cpu && mem && members);
            assert_int_equal(tm_sched_run(&in, &r1), 0);
            assert_int_equal(tm_sched_run(&in, &r2), 0);
            /* same input, same output */
            assert_int_equal(r1.nplacements, r2.nplacements);
            for (size_t k = 0; k < r1.nplacements; k++) {
                assert_int_equal(r1.placements[k].job, r2.placements[k].job);
                assert_int_equal(r1.placements[k].node, r2.placements[k].node);
                assert_int_equal(r1.placements[k].gpu_mask, r2.placements[k].gpu_mask);
                assert_int_equal(r1.placements[k].gpu_milli, r2.placements[k].gpu_milli);
                assert_int_equal(r1.placements[k].loaned, r2.placements[k].loaned);
            }
            assert_int_equal(r1.npreemptions, r2.npreemptions);
            assert_int_equal(r1.nnotes, nj);
            for (size_t k = 0; k < nj; k++) {
                assert_int_equal(r1.notes[k].verdict, r2.notes[k].verdict);
                assert_non_null(r1.notes[k].why);
            }
            for (size_t k = 0; k < r1.npreemptions; k++) {
                const struct tm_sched_alloc *ev = &a[r1.preemptions[k].alloc];
                assert_true(p == TM_POLICY_TARMAC && ev->loaned && ev->preemptible);
                assert_false(j[r1.preemptions[k].job].preemptible);
            }
            for (size_t k = 0; k < na; k++) {
                bool gone = false;
                for (size_t e = 0; e < r1.npreemptions; e++)
                    gone |= r1.preemptions[e].alloc == (int32_t)k;
                if (gone)
                    continue;
                for (int g = 0; g < 16; g++)
                    if (a[k].gpu_mask >> g & 1)
                        gpu[a[k].node * 16 + g] += a[k].gpu_milli;
                cpu[a[k].node] += a[k].cpu_milli;
                mem[a[k].node] += a[k].memory_mib;
            }
            for (size_t k = 0; k < r1.nplacements; k++) {
                const struct tm_sched_placement *pl = &r1.placements[k];
                const struct tm_sched_job *jb = &j[pl->job];
                const struct tm_sched_node *nd = &n[pl->node];
                assert_true(nd->schedulable);
                /* never the wrong model */
                if (jb->model_mask)
                    assert_true(jb->model_mask >> nd->model & 1);
                assert_int_equal(__builtin_popcount(pl->gpu_mask),
                                 jb->gpus > 0 ? jb->gpus : 1);
                assert_int_equal(pl->gpu_mask >> nd->gpus, 0);
                for (int g = 0; g < 16; g++)
                    if (pl->gpu_mask >> g & 1)
                        gpu[pl->node * 16 + g] += pl->gpu_milli;
                cpu[pl->node] += jb->cpu_milli;
                mem[pl->node] += jb->memory_mib;
                members[pl->job]++;
                assert_int_equal(r1.notes[pl->job].verdict, TM_SCHED_PLACED);
            }
            /* never over-allocate: GPUs, CPU and memory */
            for (size_t k = 0; k < nn; k++) {
                for (int g = 0; g < 16; g++)
                    assert_true(gpu[k * 16 + g] <= 1000);
                assert_true(cpu[k] <= n[k].cpu_milli);
                assert_true(mem[k] <= n[k].memory_mib);
            }
            /* gangs whole or absent */
            for (size_t k = 0; k < nj; k++)
                assert_true(members[k] == 0 || members[k] == j[k].nodes);
            free(gpu);
            free(cpu);
            free(mem);
            free(members);
            tm_sched_result_release(&r1);
            tm_sched_result_release(&r2);
        }
        free(j);
        free(n);
        free(a);
    }
}

/* multifactor: EASY backfill in Slurm's multifactor order.  One 8-GPU
 * node with 4 GPUs busy for 1 h.  B (1 GPU for 2 h, preemptible, queued 3 h)
 * is older than A (8 GPUs, non-preemptible, queued 2 h).  backfill (submit
 * order) places B and reserves A behind it; multifactor puts A first
 * (age 2/24 x 10000 + size 8/8 x 1000 + QOS 1000 = 2833 against B's
 * 1250 + 125 + 0), reserves it at 1 h, and B would delay it: B waits. */
static void test_multifactor_order(void **state)
{
    struct tm_sched_node n = node8(1, 0);
    struct tm_sched_alloc al = hold(0, 0x0f, 10 * H);
    struct tm_sched_job jobs[2] = {job(1, 7 * H, 8, 1 * H), job(2, 6 * H, 1, 2 * H)};
    struct tm_sched_result r;

    (void)state;
    jobs[1].preemptible = true;
    assert_int_equal(run(TM_POLICY_BACKFILL, jobs, 2, &n, 1, &al, 1, 9 * H, &r), 0);
    assert_int_equal(placed_node(&r, 1), 0);
    assert_int_equal(r.notes[0].verdict, TM_SCHED_RESERVED);
    tm_sched_result_release(&r);
    assert_int_equal(run(TM_POLICY_MULTIFACTOR, jobs, 2, &n, 1, &al, 1, 9 * H, &r), 0);
    assert_int_equal(r.nplacements, 0);
    assert_int_equal(r.notes[0].verdict, TM_SCHED_RESERVED);
    assert_int_equal(r.notes[0].start_ms, 10 * H);
    assert_int_equal(r.notes[1].verdict, TM_SCHED_WAIT_RESERVATION);
    tm_sched_result_release(&r);
}

/* The age factor saturates at PriorityMaxAge (1 day).  Two 8-GPU jobs on
 * the same busy node; the first in order holds the one reservation.  A is
 * preemptible and queued 48 h, B non-preemptible and queued 26 h: both
 * ages are full, so B's QOS factor puts it first (12000 against 11000);
 * without the cap A's age (20000) would.  backfill reserves A, the older. */
static void test_multifactor_age_cap(void **state)
{
    struct tm_sched_node n = node8(1, 0);
    struct tm_sched_alloc al = hold(0, 0x0f, 51 * H);
    struct tm_sched_job jobs[2] = {job(1, 2 * H, 8, 1 * H), job(2, 24 * H, 8, 1 * H)};
    struct tm_sched_result r;

    (void)state;
    jobs[0].preemptible = true;
    assert_int_equal(run(TM_POLICY_MULTIFACTOR, jobs, 2, &n, 1, &al, 1, 50 * H, &r), 0);
    assert_int_equal(r.notes[1].verdict, TM_SCHED_RESERVED);
    assert_int_not_equal(r.notes[0].verdict, TM_SCHED_RESERVED);
    tm_sched_result_release(&r);
    assert_int_equal(run(TM_POLICY_BACKFILL, jobs, 2, &n, 1, &al, 1, 50 * H, &r), 0);
    assert_int_equal(r.notes[0].verdict, TM_SCHED_RESERVED);
    tm_sched_result_release(&r);
}

static void test_bad_input(void **state)
{
    struct tm_sched_node n[1] = {node8(1, 0)};
    struct tm_sched_job j[1] = {job(1, 0, 17, H)};
    struct tm_sched_alloc a[1] = {hold(3, 1, H)};
    struct tm_sched_result r = {0};

    (void)state;
    assert_int_equal(run(TM_POLICY_TARMAC, j, 1, n, 1, NULL, 0, 0, &r), TM_EINVAL);
    j[0].gpus = 1;
    assert_int_equal(run(TM_POLICY_TARMAC, j, 1, n, 1, a, 1, 0, &r), TM_EINVAL);
    assert_null(r.placements);
    assert_int_equal(run((enum tm_sched_policy)7, j, 1, n, 1, NULL, 0, 0, &r), TM_EINVAL);
    /* empty input is fine */
    assert_int_equal(run(TM_POLICY_TARMAC, NULL, 0, NULL, 0, NULL, 0, 0, &r), 0);
    tm_sched_result_release(&r);
    tm_sched_result_release(&r);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_names),
        cmocka_unit_test(test_policy_table),
        cmocka_unit_test(test_head_of_line_backfill),
        cmocka_unit_test(test_backfill_must_not_delay),
        cmocka_unit_test(test_fragmentation_keeps_node_whole),
        cmocka_unit_test(test_fractional_share),
        cmocka_unit_test(test_share_ties),
        cmocka_unit_test(test_gang_all_or_nothing),
        cmocka_unit_test(test_model_constraint),
        cmocka_unit_test(test_starvation_bound),
        cmocka_unit_test(test_loans_and_eviction),
        cmocka_unit_test(test_sticky_reservation),
        cmocka_unit_test(test_reserve_when_fragmented),
        cmocka_unit_test(test_narrow_reserved_at_once),
        cmocka_unit_test(test_reserve_avoids_narrow_nodes),
        cmocka_unit_test(test_drain_cap),
        cmocka_unit_test(test_flexible_limit),
        cmocka_unit_test(test_aged_narrow_order),
        cmocka_unit_test(test_aged_late_anyway),
        cmocka_unit_test(test_aged_tied_order),
        cmocka_unit_test(test_align_ends),
        cmocka_unit_test(test_elastic_prefers_rank),
        cmocka_unit_test(test_random_properties),
        cmocka_unit_test(test_multifactor_order),
        cmocka_unit_test(test_multifactor_age_cap),
        cmocka_unit_test(test_bad_input),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
