/*
 * tests/unit/replay/test_replay_incremental.c: the time replay's
 * incremental passes against the reference (tm_replay_config.full_pass: one
 * tm_sched_run() over the whole queue at every instant), decision for
 * decision, on random inventories and queues: every placement (time, job,
 * node) the same, and every figure; fifo and backfill, and tarmac and
 * multifactor, whose passes read the queue whole but take the running
 * jobs' footprint from the replay (struct tm_sched_footprint) instead of
 * summing the allocs.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "controller/replay/replay.h"

static uint64_t rnd(uint64_t *x)
{
    *x ^= *x << 13;
    *x ^= *x >> 7;
    *x ^= *x << 17;
    return *x;
}

/* 3-10 nodes of 1-8 GPUs over two models, CPU and memory tight enough to
 * matter; 200-900 jobs: shares, whole GPUs, some tied to a model, some
 * asking much CPU, a few fitting no node (dropped by the replay).  With
 * batch_pct, that percentage of the jobs arrive at the same instant as
 * the one before (array jobs, a sweep submitted at once): ties in the
 * orders, which the incremental passes break as the full pass does. */
static void random_trace_batched(struct tm_trace *t, uint64_t seed, unsigned batch_pct, size_t min_nodes)
{
    uint64_t x = seed * 0x9e3779b97f4a7c15ull + 1;
    size_t nn = min_nodes + rnd(&x) % 8, nj = 200 + rnd(&x) % 700;
    int64_t clock = 0;

    memset(t, 0, sizeof(*t));
    snprintf(t->models[0], sizeof(t->models[0]), "A");
    snprintf(t->models[1], sizeof(t->models[1]), "B");
    t->nmodels = 2;
    t->nodes = calloc(nn, sizeof(*t->nodes));
    t->jobs = calloc(nj, sizeof(*t->jobs));
    assert_non_null(t->nodes);
    assert_non_null(t->jobs);
    t->nnodes = nn;
    t->njobs = nj;
    for (size_t i = 0; i < nn; i++) {
        struct tm_trace_node *n = &t->nodes[i];
        snprintf(n->name, sizeof(n->name), "n%zu", i);
        n->gpus = 1 + (int32_t)(rnd(&x) % 8);
        n->model = (int32_t)(rnd(&x) % 2);
        n->cpu_milli = 8000 * (1 + (int64_t)(rnd(&x) % 8));
        n->memory_mib = 32768 * (1 + (int64_t)(rnd(&x) % 8));
    }
    for (size_t j = 0; j < nj; j++) {
        struct tm_trace_job *jb = &t->jobs[j];
        uint64_t u = rnd(&x) % 100;
        snprintf(jb->name, sizeof(jb->name), "j%zu", j);
        if (batch_pct == 0 || rnd(&x) % 100 >= batch_pct)
            clock += (int64_t)(rnd(&x) % 600000);
        jb->submit_ms = clock;
        jb->start_ms = clock;
        jb->end_ms = clock + 1000 + (int64_t)(rnd(&x) % (u < 80 ? 1800000 : 14400000));
        if (u < 40) {
            jb->gpus = 0;
            jb->gpu_milli = 100 + 50 * (int32_t)(rnd(&x) % 18);
        } else {
            jb->gpus = u < 80 ? 1 : u < 92 ? 2 : u < 97 ? 4 : 8;
            jb->gpu_milli = 1000;
        }
        jb->cpu_milli = 1000 * (1 + (int64_t)(rnd(&x) % (u % 7 == 0 ? 48 : 8)));
        jb->memory_mib = 4096 * (1 + (int64_t)(rnd(&x) % 16));
        jb->model_mask = rnd(&x) % 4 == 0 ? 1ull << (rnd(&x) % 2) : 0;
        jb->preemptible = rnd(&x) % 3 == 0;
        jb->qos = jb->preemptible ? TM_QOS_BE : TM_QOS_LS;
        jb->klass = (enum tm_job_class)(rnd(&x) % 4);
    }
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The log's placement lines, sorted (within an instant a pass notes its
 * jobs in input order, which the two modes do not share). */
static char **placed_lines(char *log, size_t *ret_n)
{
    size_t n = 0, cap = 64;
    char **v = malloc(cap * sizeof(*v));
    char *save = NULL;

    assert_non_null(v);
    for (char *l = strtok_r(log, "\n", &save); l; l = strtok_r(NULL, "\n", &save)) {
        if (!strstr(l, " verdict=placed"))
            continue;
        if (n == cap) {
            cap *= 2;
            v = realloc(v, cap * sizeof(*v));
            assert_non_null(v);
        }
        /* drop the note's why=: its wording names the pass's view */
        char *w = strstr(l, " why=");
        if (w)
            *w = '\0';
        v[n++] = l;
    }
    qsort(v, n, sizeof(*v), cmp_str);
    *ret_n = n;
    return v;
}

static void replay_logged(const struct tm_trace *t, struct tm_replay_config *cfg,
                          struct tm_replay_stats *st, char **ret_log)
{
    size_t len = 0;
    FILE *f = open_memstream(ret_log, &len);

    assert_non_null(f);
    cfg->log = f;
    assert_int_equal(tm_replay_time(t, cfg, st), 0);
    fclose(f);
    cfg->log = NULL;
}

static void same(const struct tm_replay_stats *a, const struct tm_replay_stats *b)
{
    assert_int_equal(a->jobs, b->jobs);
    assert_int_equal(a->unfinished, b->unfinished);
    assert_int_equal(a->starved, b->starved);
    assert_int_equal(a->events, b->events);
    assert_true(a->utilisation == b->utilisation);
    assert_true(a->utilisation_arrival == b->utilisation_arrival);
    assert_true(a->wait_mean_s == b->wait_mean_s);
    assert_true(a->wait_p95_s == b->wait_p95_s);
    assert_true(a->wait_max_s == b->wait_max_s);
    assert_true(a->jct_mean_s == b->jct_mean_s);
    assert_true(a->idle_while_waiting_gpu_hours == b->idle_while_waiting_gpu_hours);
    assert_true(a->idle_while_waiting_model_gpu_hours == b->idle_while_waiting_model_gpu_hours);
    assert_true(a->idle_while_waiting_accepts_gpu_hours == b->idle_while_waiting_accepts_gpu_hours);
    assert_int_equal(a->reserved_jobs, b->reserved_jobs);
    assert_int_equal(a->preemptions, b->preemptions);
}

/* The full and the incremental replay of t under cfg, compared; the full
 * pass's log is returned in *ret_log when asked (the caller frees it). */
static void compare_trace(const struct tm_trace *t, struct tm_replay_config cfg, char **ret_log)
{
    struct tm_replay_stats full, inc;
    char *lf = NULL, *li = NULL;
    char **vf, **vi;
    size_t nf, ni;

    cfg.full_pass = true;
    replay_logged(t, &cfg, &full, &lf);
    cfg.full_pass = false;
    replay_logged(t, &cfg, &inc, &li);
    same(&full, &inc);
    if (ret_log)
        *ret_log = strdup(lf);
    vf = placed_lines(lf, &nf);
    vi = placed_lines(li, &ni);
    assert_int_equal(nf, ni);
    assert_true(nf >= full.jobs - full.unfinished);
    for (size_t k = 0; k < nf; k++)
        assert_string_equal(vf[k], vi[k]);
    free(vf);
    free(vi);
    free(lf);
    free(li);
}

/* TM_INCREMENTAL_SOAK=k runs k times the cases, on other seeds past the
 * default ones (docs/benchmarks.md: the soak commands); unset, the default set. */
static int soak_factor(void)
{
    const char *v = getenv("TM_INCREMENTAL_SOAK");
    int k = v ? atoi(v) : 1;

    return k > 1 ? k : 1;
}

static struct tm_replay_config case_config(enum tm_sched_policy p, int c)
{
    return (struct tm_replay_config){.policy = p, .since_ms = -1, .max_runtime_ms = -1,
                                     .seed = (uint64_t)c, .load = 0.8 + 0.1 * (c % 7),
                                     .exact_estimates = c % 3 == 0};
}

static void compare_case(enum tm_sched_policy p, int c, unsigned batch_pct)
{
    struct tm_trace t;

    /* A soak names each case, so a failure's is the last line before it. */
    if (soak_factor() > 1)
        fprintf(stderr, "case %d of policy %d\n", c, (int)p);
    random_trace_batched(&t, (uint64_t)c + 1000u * (uint64_t)p, batch_pct, 3);
    compare_trace(&t, case_config(p, c), NULL);
    tm_trace_release(&t);
}

static void compare_policy(enum tm_sched_policy p, int cases)
{
    /* the soak's odd cases have batches */
    for (int c = 1; c <= cases * soak_factor(); c++)
        compare_case(p, c, c > cases && c % 2 ? 40 : 0);
}

static void test_fifo_incremental(void **state)
{
    (void)state;
    compare_policy(TM_POLICY_FIFO, 40);
}

/* EASY's incremental pass (pass_backfill(): the prefix to the reserved
 * job and, per shape, the jobs that could still start) against the full
 * pass. */
static void test_backfill_incremental(void **state)
{
    (void)state;
    compare_policy(TM_POLICY_BACKFILL, 40);
    /* Found by the soak, where bf_unchanged() had skipped a pass that
     * places: 48, a preemptible job's reservation moved by non-preemptible
     * work its own pass started on its node; 720, a job started on the
     * reserved node as leaving the reservation intact that ends before it
     * (room there by the reserved start grew by its end). */
    compare_case(TM_POLICY_BACKFILL, 48, 0);
    compare_case(TM_POLICY_BACKFILL, 720, 0);
}

/* tarmac: loans, evictions and several reservations, all from the
 * replay's footprint; the pass handed a head of the queue and probes for
 * the rest at the default head length (most of these queues are
 * shorter: the whole queue). */
static void test_tarmac_footprint(void **state)
{
    (void)state;
    compare_policy(TM_POLICY_TARMAC, 40);
}

/* tarmac's incremental pass (replay_tarmac.c) with heads of 2-16 jobs,
 * so that these queues of tens to hundreds of jobs take it at almost
 * every pass: the head grows, groups reach past it and probes stand for
 * the rest; bounds of 2, 4 and 8 h as well as 48 h, so that jobs age past
 * half the bound and the aged tiers and the reservation cap are crossed. */
/* tarmac's incremental pass against the full one on random trace c
 * (seed base + c), batch_pct of its jobs in batches. */
static void tarmac_case_nodes(int c, uint64_t base, unsigned batch_pct, size_t min_nodes)
{
    static const int64_t bound_h[] = {48, 4, 8, 2};
    struct tm_trace t;
    struct tm_replay_config cfg = case_config(TM_POLICY_TARMAC, c);

    if (soak_factor() > 1)
        fprintf(stderr, "case %d of the tarmac heads from seed %llu\n", c, (unsigned long long)base);
    cfg.tarmac_head = (size_t)2 << (c % 4);
    cfg.params.starvation_ms = bound_h[c % 4] * 3600 * 1000;
    random_trace_batched(&t, (uint64_t)c + base, batch_pct, min_nodes);
    compare_trace(&t, cfg, NULL);
    tm_trace_release(&t);
}

static void tarmac_case(int c, uint64_t base, unsigned batch_pct)
{
    tarmac_case_nodes(c, base, batch_pct, 3);
}

static void tarmac_heads(int cases, uint64_t base, unsigned batch_pct)
{
    for (int c = 1; c <= cases * soak_factor(); c++)
        tarmac_case(c, base, batch_pct);
}

static void test_tarmac_incremental(void **state)
{
    (void)state;
    tarmac_heads(80, 7000, 0);
}

/* The same with two jobs in five arriving with the one before: equal
 * keys, so the probes' places among other groups' jobs left out (the
 * same key, an earlier tier) and the first blocked job's are crossed. */
static void test_tarmac_incremental_batches(void **state)
{
    (void)state;
    tarmac_heads(40, 9000, 40);
    /* Found by the soak: this case fails without tq_proved()'s test
     * that the first blocked job is one of the head's. */
    tarmac_case(353, 9000, 40);
}

/* The same on 40-47 nodes (about 200 GPUs), where tarmac holds two or
 * three flexible reservations at a time (tm_sched_tarmac_flexible_limit())
 * and tq_aged_quiet() counts them.  A group's probe stands for its aged
 * jobs left out and reserves where they would, so these cases pass even
 * with tq_aged_quiet() counting one (checked by hand): the count is a
 * second guard, the probes the first. */
static void test_tarmac_incremental_wide(void **state)
{
    (void)state;
    for (int c = 1; c <= 24 * soak_factor(); c++)
        tarmac_case_nodes(c, 11000, c % 2 ? 40 : 0, 40);
}

static void test_multifactor_footprint(void **state)
{
    (void)state;
    compare_policy(TM_POLICY_MULTIFACTOR, 20);
}

/* Random trace c with gang_pct of its whole-GPU jobs turned into gangs
 * of 2-4 nodes of 1-4 GPUs each (a few larger than the nodes that could
 * hold them: dropped as fitting no node). */
static void random_trace_gangs(struct tm_trace *t, uint64_t seed, unsigned batch_pct, unsigned gang_pct,
                               size_t min_nodes)
{
    uint64_t x = seed * 0x2545f4914f6cdd1dull + 7;

    random_trace_batched(t, seed, batch_pct, min_nodes);
    for (size_t j = 0; j < t->njobs; j++) {
        struct tm_trace_job *jb = &t->jobs[j];
        if (jb->gpus == 0 || rnd(&x) % 100 >= gang_pct)
            continue;
        jb->nodes = 2 + (int32_t)(rnd(&x) % 3);
        jb->gpus = 1 + (int32_t)(rnd(&x) % 4);
    }
}

/* Every gang placed in the log is placed on as many distinct nodes as it
 * has, in the one line of its start (nodes=): never in part. */
static void gangs_whole(const struct tm_trace *t, const char *log)
{
    size_t placed = 0;

    for (size_t j = 0; j < t->njobs; j++) {
        const struct tm_trace_job *jb = &t->jobs[j];
        char key[64];
        const char *p = log;
        if (jb->nodes <= 1)
            continue;
        snprintf(key, sizeof(key), " job=%s verdict=placed", jb->name);
        while ((p = strstr(p, key)) != NULL) {
            const char *eol = strchr(p, '\n'), *n = strstr(p, " nodes=");
            int seen[64] = {0}, count = 0;
            assert_non_null(n);
            assert_true(!eol || n < eol);
            n += strlen(" nodes=");
            for (;;) {
                int v = (int)strtol(n, (char **)&n, 10);
                assert_true(v >= 0 && v < 64 && !seen[v]);
                seen[v] = 1;
                count++;
                if (*n != ',')
                    break;
                n++;
            }
            assert_int_equal(count, jb->nodes);
            placed++;
            p++;
        }
    }
    assert_true(placed > 0);
}

/* Gangs in every time-mode policy: the incremental passes (fifo's
 * prefix, tarmac's head and probes with heads of 2-16 jobs and bounds of
 * 4 and 48 h; backfill hands a trace with gangs to the whole-queue pass,
 * on the replay's footprint) against the full pass, decision for
 * decision, and every gang placed whole.  3-10 nodes, or 40-47 where
 * tarmac holds several flexible reservations. */
static void gang_cases_nodes(enum tm_sched_policy p, int cases, uint64_t base, size_t min_nodes)
{
    for (int c = 1; c <= cases * soak_factor(); c++) {
        struct tm_trace t;
        struct tm_replay_config cfg = case_config(p, c);
        char *log = NULL;
        if (soak_factor() > 1)
            fprintf(stderr, "gang case %d of policy %d\n", c, (int)p);
        if (p == TM_POLICY_TARMAC) {
            cfg.tarmac_head = (size_t)2 << (c % 4);
            cfg.params.starvation_ms = (c % 2 ? 48 : 4) * 3600LL * 1000;
        }
        random_trace_gangs(&t, (uint64_t)c + base + 100u * (uint64_t)p, c % 3 == 0 ? 40 : 0, 15 + 10 * (c % 2),
                           min_nodes);
        compare_trace(&t, cfg, &log);
        gangs_whole(&t, log);
        free(log);
        tm_trace_release(&t);
    }
}

static void gang_cases(enum tm_sched_policy p, int cases, uint64_t base)
{
    gang_cases_nodes(p, cases, base, 3);
}

static void test_gangs_incremental(void **state)
{
    (void)state;
    gang_cases(TM_POLICY_FIFO, 20, 13000);
    gang_cases(TM_POLICY_BACKFILL, 20, 14000);
    gang_cases(TM_POLICY_TARMAC, 20, 15000);
    gang_cases(TM_POLICY_MULTIFACTOR, 10, 16000);
    gang_cases_nodes(TM_POLICY_TARMAC, 12, 17000, 40);
}

static void put_job(struct tm_trace *t, const char *name, int64_t submit_s, int64_t run_s, int32_t gpus)
{
    struct tm_trace_job *jb = &t->jobs[t->njobs++];

    snprintf(jb->name, sizeof(jb->name), "%s", name);
    jb->submit_ms = submit_s * 1000;
    jb->start_ms = jb->submit_ms;
    jb->end_ms = jb->submit_ms + run_s * 1000;
    jb->gpus = gpus;
    jb->gpu_milli = 1000;
    jb->cpu_milli = 1000;
    jb->memory_mib = 1024;
    jb->qos = TM_QOS_LS;
    jb->klass = TM_CLASS_TRAIN;
}

/* A gap filler deep in the queue (known answer).  One node of 2 GPUs:
 * "long0" (1 GPU, 10,000 s) runs, "big" (2 GPUs) is reserved for at
 * 10,000 s, then 40 one-GPU jobs of 20,000 s would each delay it and
 * wait; "short" (1 GPU, 50 s) arrives behind them all and fills the free
 * GPU at once, as does "edge" (50 s at 9,950 s: it ends at the reserved
 * start exactly).  Their shape's first job already fails, so only the gap
 * rule of pass_backfill() finds them behind the 40. */
static void test_backfill_gap_deep_queue(void **state)
{
    struct tm_trace t;
    struct tm_replay_config cfg = {.policy = TM_POLICY_BACKFILL, .since_ms = -1,
                                   .max_runtime_ms = -1, .seed = 1, .exact_estimates = true};
    char *log = NULL, name[32];

    (void)state;
    memset(&t, 0, sizeof(t));
    snprintf(t.models[0], sizeof(t.models[0]), "A");
    t.nmodels = 1;
    t.nodes = calloc(1, sizeof(*t.nodes));
    t.jobs = calloc(64, sizeof(*t.jobs));
    assert_non_null(t.nodes);
    assert_non_null(t.jobs);
    t.nnodes = 1;
    snprintf(t.nodes[0].name, sizeof(t.nodes[0].name), "n0");
    t.nodes[0].gpus = 2;
    t.nodes[0].cpu_milli = 64000;
    t.nodes[0].memory_mib = 262144;
    put_job(&t, "long0", 0, 10000, 1);
    put_job(&t, "big", 1, 100, 2);
    for (int k = 1; k <= 40; k++) {
        snprintf(name, sizeof(name), "long%d", k);
        put_job(&t, name, 1 + k, 20000, 1);
    }
    put_job(&t, "short", 100, 50, 1);
    put_job(&t, "edge", 9950, 50, 1);
    compare_trace(&t, cfg, &log);
    assert_non_null(strstr(log, "t=100.000 policy=backfill job=short verdict=placed"));
    assert_non_null(strstr(log, "t=9950.000 policy=backfill job=edge verdict=placed"));
    free(log);
    tm_trace_release(&t);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fifo_incremental),
        cmocka_unit_test(test_backfill_incremental),
        cmocka_unit_test(test_backfill_gap_deep_queue),
        cmocka_unit_test(test_tarmac_footprint),
        cmocka_unit_test(test_tarmac_incremental),
        cmocka_unit_test(test_tarmac_incremental_batches),
        cmocka_unit_test(test_tarmac_incremental_wide),
        cmocka_unit_test(test_multifactor_footprint),
        cmocka_unit_test(test_gangs_incremental),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
