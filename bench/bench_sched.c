/*
 * bench/bench_sched.c: time one scheduling pass over a large synthetic
 * snapshot, per policy, and how the time grows when jobs or nodes double.
 *
 *   bench_sched [--jobs J] [--nodes N] [--reps R]
 *
 * The snapshot resembles the openb trace: 70% 8-GPU nodes, the rest 2- and
 * 4-GPU nodes, three GPU models; half the GPUs busy with running jobs; the
 * queue is 45% shares of one GPU, 50% one GPU, 5% 2/4/8 GPUs, a third tied
 * to one model.  Reported: median milliseconds of R passes, on one core.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "controller/sched/scheduler.h"

static uint64_t rng(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

struct snap {
    struct tm_sched_job *jobs;
    struct tm_sched_node *nodes;
    struct tm_sched_alloc *allocs;
    size_t nj, nn, na;
};

static int make_snap(size_t J, size_t N, struct snap *s)
{
    uint64_t seed = 42;
    size_t cap = N * 8;

    memset(s, 0, sizeof(*s));
    s->jobs = calloc(J, sizeof(*s->jobs));
    s->nodes = calloc(N, sizeof(*s->nodes));
    s->allocs = calloc(cap, sizeof(*s->allocs));
    if (!s->jobs || !s->nodes || !s->allocs)
        return -1;
    for (size_t i = 0; i < N; i++) {
        uint64_t k = rng(&seed) % 10;
        int g = k < 7 ? 8 : k < 9 ? 2 : 4;
        s->nodes[i] = (struct tm_sched_node){.id = (int64_t)i, .cpu_milli = 96000, .memory_mib = 393216,
                                             .gpus = g, .model = (int32_t)(rng(&seed) % 3),
                                             .schedulable = true};
        /* half the GPUs busy: whole GPUs from index 0 */
        for (int x = 0; x < g / 2; x++)
            s->allocs[s->na++] = (struct tm_sched_alloc){
                .job_id = (int64_t)s->na, .node = (int32_t)i, .gpu_mask = 1u << x, .gpu_milli = 1000,
                .cpu_milli = 8000, .memory_mib = 32768,
                .end_ms = (int64_t)(rng(&seed) % (24ull * 3600 * 1000))};
    }
    s->nn = N;
    for (size_t j = 0; j < J; j++) {
        uint64_t k = rng(&seed) % 100;
        struct tm_sched_job *jb = &s->jobs[j];
        *jb = (struct tm_sched_job){.id = (int64_t)j, .submit_ms = (int64_t)j * 10,
                                    .estimate_ms = 60000 + (int64_t)(rng(&seed) % (8ull * 3600 * 1000)),
                                    .cpu_milli = 4000, .memory_mib = 16384, .nodes = 1,
                                    .gpu_milli = 1000};
        if (k < 45) {
            jb->gpus = 0;
            jb->gpu_milli = 100 + (int32_t)(rng(&seed) % 800);
        } else if (k < 95) {
            jb->gpus = 1;
        } else {
            static const int big[3] = {2, 4, 8};
            jb->gpus = big[rng(&seed) % 3];
        }
        if (rng(&seed) % 3 == 0)
            jb->model_mask = 1u << (rng(&seed) % 3);
        jb->klass = (enum tm_job_class)(rng(&seed) % TM_CLASS_MAX);
    }
    s->nj = J;
    return 0;
}

static void free_snap(struct snap *s)
{
    free(s->jobs);
    free(s->nodes);
    free(s->allocs);
}

static double time_pass(const struct snap *s, enum tm_sched_policy p, int reps, size_t *ret_placed)
{
    double t[64];
    if (reps > 64)
        reps = 64;
    for (int r = 0; r < reps; r++) {
        struct tm_sched_input in = {.jobs = s->jobs, .njobs = s->nj, .nodes = s->nodes, .nnodes = s->nn,
                                    .allocs = s->allocs, .nallocs = s->na,
                                    .now_ms = 3600 * 1000, .policy = p};
        struct tm_sched_result res = {0};
        double t0 = now_ms();
        if (tm_sched_run(&in, &res) < 0) {
            fprintf(stderr, "bench_sched: pass failed\n");
            exit(1);
        }
        t[r] = now_ms() - t0;
        *ret_placed = res.nplacements;
        tm_sched_result_release(&res);
    }
    qsort(t, (size_t)reps, sizeof(double), cmp_double);
    return t[reps / 2];
}

int main(int argc, char **argv)
{
    size_t J = 100000, N = 10000;
    int reps = 5;

    for (int i = 1; i + 1 < argc; i += 2) {
        if (strcmp(argv[i], "--jobs") == 0)
            J = strtoull(argv[i + 1], NULL, 10);
        else if (strcmp(argv[i], "--nodes") == 0)
            N = strtoull(argv[i + 1], NULL, 10);
        else if (strcmp(argv[i], "--reps") == 0)
            reps = atoi(argv[i + 1]);
        else {
            fprintf(stderr, "usage: bench_sched [--jobs J] [--nodes N] [--reps R]\n");
            return 2;
        }
    }
    if (J == 0 || N == 0 || reps < 1) {
        fprintf(stderr, "bench_sched: jobs, nodes and reps must be positive\n");
        return 2;
    }
    printf("| policy | jobs | nodes | GPUs | placed | pass ms (median of %d) |\n", reps);
    printf("|---|---:|---:|---:|---:|---:|\n");
    for (int p = 0; p < TM_POLICY_MAX; p++) {
        const size_t sizes[3][2] = {{J, N}, {2 * J, N}, {J, 2 * N}};
        for (int k = 0; k < 3; k++) {
            struct snap s;
            size_t placed = 0, gpus = 0;
            double ms;
            if (make_snap(sizes[k][0], sizes[k][1], &s) < 0) {
                fprintf(stderr, "bench_sched: out of memory\n");
                return 1;
            }
            for (size_t i = 0; i < s.nn; i++)
                gpus += (size_t)s.nodes[i].gpus;
            ms = time_pass(&s, p, reps, &placed);
            printf("| %s | %zu | %zu | %zu | %zu | %.1f |\n", tm_sched_policy_name(p), s.nj, s.nn, gpus,
                   placed, ms);
            free_snap(&s);
        }
    }
    return 0;
}
