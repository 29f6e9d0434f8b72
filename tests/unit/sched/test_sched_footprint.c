/*
 * tests/unit/sched/test_sched_footprint.c: a pass handed the running
 * jobs' footprint (struct tm_sched_footprint) decides what the same pass
 * decides from the allocs alone, on random snapshots, for every policy:
 * the same placements, reservations, evictions and notes.  Each optional
 * part of the footprint (the latest GPU ends, the estimate rule for the
 * ends, the per-node GPU summaries) is left out in some cases, so the
 * pass's fallback for it is compared too.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "controller/sched/estimate.h"
#include "controller/sched/scheduler.h"

#define NODES_MAX 12
#define ALLOCS_MAX 96
#define JOBS_MAX 60

static uint64_t rnd(uint64_t *x)
{
    *x ^= *x << 13;
    *x ^= *x >> 7;
    *x ^= *x << 17;
    return *x;
}

struct snap {
    struct tm_sched_node nodes[NODES_MAX];
    struct tm_sched_alloc allocs[ALLOCS_MAX];
    struct tm_sched_job jobs[JOBS_MAX];
    size_t nn, na, nj;
    int64_t now;
    /* the footprint's arrays */
    int64_t cpu_free[NODES_MAX], mem_free[NODES_MAX];
    int16_t used[NODES_MAX * TM_NODE_GPUS_MAX];
    int32_t nallocs[NODES_MAX], head[NODES_MAX], next[ALLOCS_MAX];
    int8_t full[NODES_MAX];
    int16_t maxfree[NODES_MAX];
    int32_t freesum[NODES_MAX];
    int64_t est[ALLOCS_MAX], start[ALLOCS_MAX];
    int64_t gend[NODES_MAX], gkept[NODES_MAX];
};

static void derive(struct snap *s);

/* Nodes of 1-8 GPUs over two models; running jobs placed into their free
 * room (shares and whole GPUs, some preemptible on loan); queued jobs of
 * every kind, some held on a node from an earlier pass. */
static void random_snap(struct snap *s, uint64_t seed)
{
    uint64_t x = seed * 0x9e3779b97f4a7c15ull + 7;

    memset(s, 0, sizeof(*s));
    s->now = 10000000 + (int64_t)(rnd(&x) % 1000000);
    s->nn = 2 + rnd(&x) % (NODES_MAX - 1);
    for (size_t i = 0; i < s->nn; i++) {
        struct tm_sched_node *n = &s->nodes[i];
        n->id = (int64_t)i;
        n->gpus = 1 + (int32_t)(rnd(&x) % 8);
        n->model = (int32_t)(rnd(&x) % 2);
        n->cpu_milli = 8000 * (1 + (int64_t)(rnd(&x) % 8));
        n->memory_mib = 32768 * (1 + (int64_t)(rnd(&x) % 8));
        n->schedulable = rnd(&x) % 10 != 0;
        s->cpu_free[i] = n->cpu_milli;
        s->mem_free[i] = n->memory_mib;
        s->head[i] = -1;
    }
    for (int tries = 0; tries < 400 && s->na < ALLOCS_MAX; tries++) {
        int32_t i = (int32_t)(rnd(&x) % s->nn);
        const struct tm_sched_node *n = &s->nodes[i];
        int16_t *u = &s->used[i * TM_NODE_GPUS_MAX];
        int64_t cpu = 1000 * (1 + (int64_t)(rnd(&x) % 6)), mem = 4096 * (1 + (int64_t)(rnd(&x) % 8));
        int32_t milli = rnd(&x) % 2 ? 1000 : 100 + 100 * (int32_t)(rnd(&x) % 9);
        uint32_t mask = 0;
        struct tm_sched_alloc *a = &s->allocs[s->na];
        if (cpu > s->cpu_free[i] || mem > s->mem_free[i])
            continue;
        for (int g = 0; g < n->gpus && !mask; g++)
            if (1000 - u[g] >= milli && (milli < 1000 || u[g] == 0))
                mask = 1u << g;
        if (!mask)
            continue;
        u[__builtin_ctz(mask)] = (int16_t)(u[__builtin_ctz(mask)] + milli);
        s->cpu_free[i] -= cpu;
        s->mem_free[i] -= mem;
        s->start[s->na] = s->now - (int64_t)(rnd(&x) % 7200000);
        s->est[s->na] = 60000 + (int64_t)(rnd(&x) % 7200000);
        *a = (struct tm_sched_alloc){.job_id = 1000 + (int64_t)s->na, .node = i, .gpu_mask = mask,
                                     .gpu_milli = milli, .cpu_milli = cpu, .memory_mib = mem,
                                     .preemptible = rnd(&x) % 3 == 0};
        a->loaned = a->preemptible && rnd(&x) % 2;
        a->end_ms = s->now + tm_estimate_remaining(s->est[s->na], s->now - s->start[s->na]);
        s->na++;
    }
    s->nj = 5 + rnd(&x) % (JOBS_MAX - 5);
    for (size_t j = 0; j < s->nj; j++) {
        struct tm_sched_job *jb = &s->jobs[j];
        uint64_t k = rnd(&x) % 100;
        jb->id = (int64_t)j;
        jb->submit_ms = s->now - (int64_t)(rnd(&x) % (60LL * 3600 * 1000));
        jb->estimate_ms = rnd(&x) % 5 == 0 ? 0 : 60000 + (int64_t)(rnd(&x) % 14400000);
        jb->cpu_milli = 1000 * (1 + (int64_t)(rnd(&x) % 8));
        jb->memory_mib = 4096 * (1 + (int64_t)(rnd(&x) % 8));
        jb->model_mask = rnd(&x) % 4 == 0 ? 1ull << (rnd(&x) % 2) : 0;
        jb->gpus = k < 40 ? 0 : k < 80 ? 1 : k < 92 ? 2 : k < 97 ? 4 : 8;
        jb->gpu_milli = jb->gpus ? 1000 : 100 + 50 * (int32_t)(rnd(&x) % 18);
        jb->nodes = rnd(&x) % 10 == 0 ? 2 : 1;
        jb->klass = (enum tm_job_class)(rnd(&x) % 4);
        jb->preemptible = rnd(&x) % 3 == 0;
        jb->hold_node = rnd(&x) % 8 == 0 ? 1 + (int32_t)(rnd(&x) % s->nn) : 0;
        jb->hold_start_ms = jb->hold_node ? s->now + (int64_t)(rnd(&x) % 3600000) : 0;
    }
    derive(s);
}

/* The footprint's arrays from the nodes and allocs. */
static void derive(struct snap *s)
{
    memset(s->used, 0, sizeof(s->used));
    memset(s->nallocs, 0, sizeof(s->nallocs));
    memset(s->full, 0, sizeof(s->full));
    memset(s->maxfree, 0, sizeof(s->maxfree));
    memset(s->freesum, 0, sizeof(s->freesum));
    for (size_t i = 0; i < s->nn; i++) {
        s->cpu_free[i] = s->nodes[i].cpu_milli;
        s->mem_free[i] = s->nodes[i].memory_mib;
        s->head[i] = -1;
    }
    for (size_t a = 0; a < s->na; a++) {
        const struct tm_sched_alloc *al = &s->allocs[a];
        int16_t *u = &s->used[al->node * TM_NODE_GPUS_MAX];
        for (int g = 0; g < TM_NODE_GPUS_MAX; g++)
            if (al->gpu_mask >> g & 1)
                u[g] = (int16_t)(u[g] + al->gpu_milli);
        s->cpu_free[al->node] -= al->cpu_milli;
        s->mem_free[al->node] -= al->memory_mib;
    }
    /* The lists in an order of their own (the pass must not care). */
    for (size_t a = 0; a < s->na; a++) {
        int32_t i = s->allocs[a].node;
        s->next[a] = s->head[i];
        s->head[i] = (int32_t)a;
        s->nallocs[i]++;
    }
    for (size_t i = 0; i < s->nn; i++) {
        const int16_t *u = &s->used[i * TM_NODE_GPUS_MAX];
        s->gend[i] = s->gkept[i] = INT64_MIN;
        for (int g = 0; g < s->nodes[i].gpus; g++) {
            int f = 1000 - u[g];
            s->full[i] = (int8_t)(s->full[i] + (f == 1000));
            s->maxfree[i] = (int16_t)(f > s->maxfree[i] ? f : s->maxfree[i]);
            s->freesum[i] += f;
        }
    }
    for (size_t a = 0; a < s->na; a++) {
        const struct tm_sched_alloc *al = &s->allocs[a];
        if (al->end_ms > s->gend[al->node])
            s->gend[al->node] = al->end_ms;
        if (!(al->loaned && al->preemptible) && al->end_ms > s->gkept[al->node])
            s->gkept[al->node] = al->end_ms;
    }
}

static void same_result(const struct tm_sched_result *a, const struct tm_sched_result *b)
{
    assert_int_equal(a->nplacements, b->nplacements);
    for (size_t k = 0; k < a->nplacements; k++) {
        assert_int_equal(a->placements[k].job, b->placements[k].job);
        assert_int_equal(a->placements[k].node, b->placements[k].node);
        assert_int_equal(a->placements[k].gpu_mask, b->placements[k].gpu_mask);
        assert_int_equal(a->placements[k].gpu_milli, b->placements[k].gpu_milli);
        assert_int_equal(a->placements[k].loaned, b->placements[k].loaned);
    }
    assert_int_equal(a->nreservations, b->nreservations);
    for (size_t k = 0; k < a->nreservations; k++) {
        assert_int_equal(a->reservations[k].job, b->reservations[k].job);
        assert_int_equal(a->reservations[k].node, b->reservations[k].node);
        assert_int_equal(a->reservations[k].start_ms, b->reservations[k].start_ms);
    }
    assert_int_equal(a->npreemptions, b->npreemptions);
    for (size_t k = 0; k < a->npreemptions; k++) {
        assert_int_equal(a->preemptions[k].alloc, b->preemptions[k].alloc);
        assert_int_equal(a->preemptions[k].job, b->preemptions[k].job);
    }
    assert_int_equal(a->nnotes, b->nnotes);
    for (size_t k = 0; k < a->nnotes; k++) {
        assert_int_equal(a->notes[k].verdict, b->notes[k].verdict);
        assert_int_equal(a->notes[k].node, b->notes[k].node);
        assert_int_equal(a->notes[k].start_ms, b->notes[k].start_ms);
    }
}

static void compare(enum tm_sched_policy p, int cases)
{
    static struct snap s;
    int reserved = 0;

    for (int c = 1; c <= cases; c++) {
        struct tm_sched_input in;
        struct tm_sched_footprint fp;
        struct tm_sched_result ref, got;
        random_snap(&s, (uint64_t)c + 7919u * (uint64_t)p);
        in = (struct tm_sched_input){.jobs = s.jobs, .njobs = s.nj, .nodes = s.nodes, .nnodes = s.nn,
                                     .allocs = s.allocs, .nallocs = s.na, .now_ms = s.now,
                                     .policy = p};
        in.params.align_ends = c % 5 == 0;
        assert_int_equal(tm_sched_run(&in, &ref), 0);
        fp = (struct tm_sched_footprint){.cpu_free = s.cpu_free, .mem_free = s.mem_free,
                                         .gpu_used = s.used, .node_nallocs = s.nallocs,
                                         .alloc_head = s.head, .alloc_next = s.next};
        if (c % 2) {
            fp.gpus_full = s.full;
            fp.gpu_free_max = s.maxfree;
            fp.gpu_free_sum = s.freesum;
        }
        if (c % 3) {
            fp.gpu_end = s.gend;
            fp.gpu_end_kept = s.gkept;
        }
        if (c % 4) {
            /* the ends by the rule; end_ms no longer read */
            fp.alloc_estimate = s.est;
            fp.alloc_start = s.start;
            for (size_t a = 0; a < s.na; a++)
                s.allocs[a].end_ms = 0;
        }
        in.footprint = &fp;
        assert_int_equal(tm_sched_run(&in, &got), 0);
        same_result(&ref, &got);
        reserved += ref.nreservations > 0;
        tm_sched_result_release(&ref);
        tm_sched_result_release(&got);
    }
    /* The cases reach the timelines, not only first fit. */
    if (p != TM_POLICY_FIFO)
        assert_true(reserved > 0);
}

/* The node cache (struct tm_sched_footprint.cache) over a run of passes,
 * as the time replay uses it: after each pass its placements start, some
 * running jobs end and the clock moves; the nodes that changed are
 * touched.  Every pass decides what a pass without the footprint decides
 * (debug builds also check the cached nodes and tarmac's kept buckets
 * against fresh ones at every pass). */
static void cache_over_passes(enum tm_sched_policy p, int cases, int passes)
{
    static struct snap s;

    for (int c = 1; c <= cases; c++) {
        struct tm_sched_node_cache *nc;
        uint64_t x = (uint64_t)c * 2654435761u + (uint64_t)p;
        random_snap(&s, (uint64_t)c + 104729u * (uint64_t)p);
        assert_int_equal(tm_sched_node_cache_new(s.nn, &nc), 0);
        for (int pass = 0; pass < passes; pass++) {
            struct tm_sched_input in = {.jobs = s.jobs, .njobs = s.nj, .nodes = s.nodes, .nnodes = s.nn,
                                        .allocs = s.allocs, .nallocs = s.na, .now_ms = s.now, .policy = p};
            struct tm_sched_footprint fp = {.cpu_free = s.cpu_free, .mem_free = s.mem_free,
                                            .gpu_used = s.used, .node_nallocs = s.nallocs,
                                            .alloc_head = s.head, .alloc_next = s.next,
                                            .gpus_full = s.full, .gpu_free_max = s.maxfree,
                                            .gpu_free_sum = s.freesum, .gpu_end = s.gend,
                                            .gpu_end_kept = s.gkept, .cache = nc};
            struct tm_sched_result ref, got;
            bool gone[JOBS_MAX] = {0};
            size_t nj = 0;
            assert_int_equal(tm_sched_run(&in, &ref), 0);
            in.footprint = &fp;
            assert_int_equal(tm_sched_run(&in, &got), 0);
            same_result(&ref, &got);
            /* The evicted and some others end (from the last: moving the
             * last alloc into a freed place leaves those before it), then
             * the placements start. */
            bool ends[ALLOCS_MAX] = {0};
            for (size_t k = 0; k < ref.npreemptions; k++)
                ends[ref.preemptions[k].alloc] = true;
            for (size_t a = s.na; a-- > 0;)
                if (ends[a] || rnd(&x) % 6 == 0) {
                    tm_sched_node_cache_touch(nc, (size_t)s.allocs[a].node);
                    s.allocs[a] = s.allocs[--s.na];
                    s.est[a] = s.est[s.na];
                    s.start[a] = s.start[s.na];
                }
            for (size_t k = 0; k < ref.nplacements && s.na < ALLOCS_MAX; k++) {
                const struct tm_sched_placement *pl = &ref.placements[k];
                const struct tm_sched_job *jb = &s.jobs[pl->job];
                s.allocs[s.na] = (struct tm_sched_alloc){
                    .job_id = 5000 + (int64_t)pass * 100 + (int64_t)k, .node = pl->node,
                    .gpu_mask = pl->gpu_mask, .gpu_milli = pl->gpu_milli, .cpu_milli = jb->cpu_milli,
                    .memory_mib = jb->memory_mib, .preemptible = jb->preemptible, .loaned = pl->loaned,
                    .end_ms = s.now + (jb->estimate_ms > 0 ? jb->estimate_ms : 3600000)};
                s.est[s.na] = jb->estimate_ms > 0 ? jb->estimate_ms : 3600000;
                s.start[s.na] = s.now;
                s.na++;
                gone[pl->job] = true;
                tm_sched_node_cache_touch(nc, (size_t)pl->node);
            }
            for (size_t j = 0; j < s.nj; j++)
                if (!gone[j])
                    s.jobs[nj++] = s.jobs[j];
            s.nj = nj;
            s.now += 60000 + (int64_t)(rnd(&x) % 600000);
            for (size_t a = 0; a < s.na; a++)
                s.allocs[a].end_ms = s.now + tm_estimate_remaining(s.est[a], s.now - s.start[a]);
            derive(&s);
            tm_sched_result_release(&ref);
            tm_sched_result_release(&got);
            if (s.nj == 0)
                break;
        }
        tm_sched_node_cache_free(nc);
    }
}

static void test_cache_tarmac(void **state)
{
    (void)state;
    cache_over_passes(TM_POLICY_TARMAC, 60, 25);
}

static void test_cache_backfill(void **state)
{
    (void)state;
    cache_over_passes(TM_POLICY_BACKFILL, 30, 25);
}

static void test_fifo(void **state)
{
    (void)state;
    compare(TM_POLICY_FIFO, 200);
}

static void test_backfill(void **state)
{
    (void)state;
    compare(TM_POLICY_BACKFILL, 200);
}

static void test_tarmac(void **state)
{
    (void)state;
    compare(TM_POLICY_TARMAC, 200);
}

static void test_multifactor(void **state)
{
    (void)state;
    compare(TM_POLICY_MULTIFACTOR, 200);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fifo),
        cmocka_unit_test(test_backfill),
        cmocka_unit_test(test_tarmac),
        cmocka_unit_test(test_multifactor),
        cmocka_unit_test(test_cache_tarmac),
        cmocka_unit_test(test_cache_backfill),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
