/*
 * bench/bench_reconcile.c: one live reconcile pass at fleet scale.
 *
 * A snapshot of N ready nodes (8 GPUs each, half of them half busy) with
 * every instance in the provider's listing, and J queued jobs of mixed
 * shapes, through tm_reconcile() (observe, schedule, grow, shrink, and the
 * plan built as JSON).  Reports the median of 5 passes in milliseconds for
 * J x N and each doubling: cold (no job has a recorded wait reason, so every
 * one gets a "wait" action) and steady (the reasons the first pass gave are
 * recorded, as the database would have them, so only changes are written),
 * beside the same pass with an empty queue as the baseline.
 *
 *   build/bench/bench_reconcile [JOBS] [NODES]     (default 100000 10000)
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "controller/reconcile/reconcile.h"
#include "core/config.h"
#include "tests/lib/snap_fixture.h"

static const char config_yaml[] =
    SNAP_FIXTURE_YAML_HEAD("bench")
    "scheduler: {policy: tarmac}\n"
    "providers:\n"
    SNAP_FIXTURE_YAML_SIM("sim", "r1")
    "pools:\n"
    "  - {name: od, provider: sim, zones: [z1, z2], instance_types: [sim.8x], gpu_model: A100,"
    "     gpus_per_node: 8, capacity_type: on_demand, min_nodes: 0, max_nodes: 10000}\n"
    "  - {name: spot, provider: sim, zones: [z1], instance_types: [sim.8x], gpu_model: A100,"
    "     gpus_per_node: 8, capacity_type: spot, min_nodes: 0, max_nodes: 10000}\n";

#define NOW 2000000000000LL

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

struct world {
    struct tm_snapshot snap;
    struct tm_instance *inst;
    size_t ninst;
};

static void build(struct world *w, size_t jobs, size_t nodes, unsigned seed)
{
    memset(w, 0, sizeof(*w));
    w->snap.epoch = 1;
    w->snap.nodes = calloc(nodes, sizeof(*w->snap.nodes));
    w->snap.jobs = calloc(jobs + nodes / 2, sizeof(*w->snap.jobs));
    w->snap.allocs = calloc(nodes / 2, sizeof(*w->snap.allocs));
    w->inst = calloc(nodes, sizeof(*w->inst));
    if (!w->snap.nodes || !w->snap.jobs || !w->snap.allocs || !w->inst) {
        fprintf(stderr, "out of memory\n");
        exit(1);
    }
    srand(seed);
    for (size_t i = 0; i < nodes; i++) {
        struct tm_snap_node *n = &w->snap.nodes[i];
        *n = (struct tm_snap_node){.id = (int64_t)i + 1, .pool = (int)(i % 2), .gpus = 8,
                                   .cpu_milli = 96000, .memory_mib = 1000000,
                                   .capacity = i % 2 ? TM_CAPACITY_SPOT : TM_CAPACITY_ON_DEMAND,
                                   .state = TM_NODE_READY, .requested_ms = NOW - 3600000,
                                   .idle_since_ms = i % 2 ? 0 : NOW - 1000};
        snprintf(n->token, sizeof(n->token), "tok-%zu", i);
        snprintf(n->instance_id, sizeof(n->instance_id), "i-%08zx", i);
        snprintf(n->instance_type, sizeof(n->instance_type), "sim.8x");
        snprintf(n->zone, sizeof(n->zone), "z1");
        snprintf(n->gpu_model, sizeof(n->gpu_model), "A100");
        struct tm_instance *in = &w->inst[w->ninst++];
        snprintf(in->id, sizeof(in->id), "%s", n->instance_id);
        snprintf(in->token, sizeof(in->token), "%s", n->token);
        in->state = TM_INSTANCE_RUNNING;
    }
    /* Half the nodes run a 4-GPU job. */
    for (size_t i = 0; i < nodes / 2; i++) {
        struct tm_snap_job *j = &w->snap.jobs[w->snap.njobs++];
        *j = (struct tm_snap_job){.id = (int64_t)(jobs + i + 1), .pool = -1, .gpus = 4,
                                  .gpu_milli = 1000, .nodes = 1, .state = TM_JOB_RUNNING,
                                  .preemptible = (i * 2) % 2 == 1, .submitted_ms = NOW - 7200000,
                                  .started_ms = NOW - 3600000, .estimate_ms = 7200000,
                                  .node_id = (int64_t)(i * 2) + 1};
        snprintf(j->team, sizeof(j->team), "t%zu", i % 17);
        w->snap.allocs[w->snap.nallocs++] = (struct tm_snap_alloc){
            .job_id = j->id, .node_id = j->node_id, .gpu_mask = 0x0f, .gpu_milli = 1000};
    }
    static const int shapes[] = {1, 1, 1, 2, 4, 8, 0, 0};
    for (size_t i = 0; i < jobs; i++) {
        struct tm_snap_job *j = &w->snap.jobs[w->snap.njobs++];
        int g = shapes[rand() % 8];
        *j = (struct tm_snap_job){.id = (int64_t)i + 1, .pool = -1, .gpus = g,
                                  .gpu_milli = g ? 1000 : 100 + rand() % 800, .nodes = 1,
                                  .state = TM_JOB_QUEUED, .preemptible = rand() % 3 == 0,
                                  .priority = rand() % 3, .klass = (enum tm_job_class)(rand() % 5),
                                  .submitted_ms = NOW - (int64_t)(jobs - i) * 1000,
                                  .estimate_ms = 60000 * (1 + rand() % 600)};
        snprintf(j->team, sizeof(j->team), "t%zu", i % 17);
    }
}

static void release(struct world *w)
{
    free(w->snap.nodes);
    free(w->snap.jobs);
    free(w->snap.allocs);
    free(w->inst);
}

/* Record the first pass's wait reasons in the snapshot, as tarmac_apply
 * would have in the database. */
static void record_reasons(struct world *w, const struct tm_rc_plan *plan)
{
    const cJSON *a;
    cJSON_ArrayForEach(a, plan->actions) {
        const cJSON *op = cJSON_GetObjectItem(a, "op");
        const cJSON *job = cJSON_GetObjectItem(a, "job");
        const cJSON *why = cJSON_GetObjectItem(a, "reason");
        if (!cJSON_IsString(op) || strcmp(op->valuestring, "wait") != 0 || !cJSON_IsNumber(job))
            continue;
        for (size_t j = 0; j < w->snap.njobs; j++)
            if (w->snap.jobs[j].id == (int64_t)job->valuedouble) {
                snprintf(w->snap.jobs[j].reason, sizeof(w->snap.jobs[j].reason), "%s", why->valuestring);
                break;
            }
    }
}

static void first_pass(const struct tm_config *cfg, struct world *w)
{
    struct tm_observed obs = {.provider = "sim", .complete = true, .instances = w->inst, .n = w->ninst};
    struct tm_reconcile_input in = {.cfg = cfg, .snap = &w->snap, .observed = &obs, .nobserved = 1,
                                    .now_ms = NOW, .policy = TM_POLICY_TARMAC};
    struct tm_rc_plan plan = {0};
    if (tm_reconcile(&in, &plan) < 0)
        exit(1);
    record_reasons(w, &plan);
    tm_rc_plan_release(&plan);
}

static double median_pass(const struct tm_config *cfg, struct world *w)
{
    double t[5];
    struct tm_observed obs = {.provider = "sim", .complete = true, .instances = w->inst, .n = w->ninst};
    for (int r = 0; r < 5; r++) {
        struct tm_reconcile_input in = {.cfg = cfg, .snap = &w->snap, .observed = &obs, .nobserved = 1,
                                        .now_ms = NOW, .policy = TM_POLICY_TARMAC};
        struct tm_rc_plan plan = {0};
        double t0 = now_ms();
        if (tm_reconcile(&in, &plan) < 0) {
            fprintf(stderr, "reconcile failed\n");
            exit(1);
        }
        t[r] = now_ms() - t0;
        tm_rc_plan_release(&plan);
    }
    qsort(t, 5, sizeof(t[0]), cmp_double);
    return t[2];
}

int main(int argc, char **argv)
{
    size_t jobs = argc > 1 ? strtoul(argv[1], NULL, 10) : 100000;
    size_t nodes = argc > 2 ? strtoul(argv[2], NULL, 10) : 10000;
    struct tm_config cfg;
    char err[256];
    const struct {
        size_t j, n;
    } grid[] = {{jobs, nodes}, {2 * jobs, nodes}, {jobs, 2 * nodes}};

    if (tm_config_load_string(config_yaml, strlen(config_yaml), "bench.yaml", &cfg, err, sizeof(err)) < 0) {
        fprintf(stderr, "%s\n", err);
        return 1;
    }
    printf("one reconcile pass (tarmac policy), median of 5\n\n");
    printf("| queued jobs | nodes | cold pass ms | steady pass ms | empty-queue pass ms |\n");
    printf("|---:|---:|---:|---:|---:|\n");
    for (size_t g = 0; g < sizeof(grid) / sizeof(grid[0]); g++) {
        struct world w;
        build(&w, grid[g].j, grid[g].n, 7);
        double cold = median_pass(&cfg, &w);
        first_pass(&cfg, &w);
        double steady = median_pass(&cfg, &w);
        release(&w);
        build(&w, 0, grid[g].n, 7);
        double empty = median_pass(&cfg, &w);
        release(&w);
        printf("| %zu | %zu | %.1f | %.1f | %.1f |\n", grid[g].j, grid[g].n, cold, steady, empty);
    }
    tm_config_release(&cfg);
    return 0;
}
