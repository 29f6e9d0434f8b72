/*
 * controller/fleet/plan_input.c: the planner's nodes and jobs from a view of
 * the caller's world (see plan_input.h for the rules and why they are here).
 */
#include "controller/fleet/plan_input.h"

#include <stdlib.h>

#include "core/err.h"

#define GPUS_MAX 32 /* bits of a GPU mask */

static bool is_running(const struct tm_plan_view *v, const struct tm_plan_view_job *j)
{
    return j->node >= 0 && (size_t)j->node < v->nnodes;
}

size_t tm_plan_input_jobs_max(const struct tm_plan_view *v)
{
    size_t n = 0;

    for (size_t k = 0; k < v->njobs; k++) {
        const struct tm_plan_view_job *j = &v->jobs[k];
        n += !is_running(v, j) && j->nodes > 1 ? (size_t)j->nodes : 1;
    }
    return n;
}

/* The milli-GPU a hold takes: every GPU of its mask, whole or its share
 * of each. */
static int32_t hold_milli(const struct tm_plan_view_job *j)
{
    return __builtin_popcount(j->gpu_mask) * j->gpu_milli;
}

static bool hold_whole(const struct tm_plan_view_job *j)
{
    return j->gpu_milli >= 1000;
}

/* The largest free room on one partly used GPU of node i: every hold on
 * it summed per GPU.  by_node lists the running jobs of each node
 * (first[i] .. first[i + 1]). */
static int32_t share_room(const struct tm_plan_view *v, const size_t *by_node, const size_t *first,
                          size_t i)
{
    int32_t on[GPUS_MAX] = {0};
    int32_t best = 0;

    for (size_t k = first[i]; k < first[i + 1]; k++) {
        const struct tm_plan_view_job *j = &v->jobs[by_node[k]];
        for (int b = 0; b < GPUS_MAX; b++)
            if (j->gpu_mask >> b & 1)
                on[b] += j->gpu_milli;
    }
    for (int b = 0; b < GPUS_MAX; b++)
        if (on[b] > 0 && on[b] < 1000 && 1000 - on[b] > best)
            best = 1000 - on[b];
    return best;
}

int tm_plan_input_build(const struct tm_plan_view *v, struct tm_planner_node *nodes,
                        struct tm_planner_job *jobs, size_t *ret_njobs, size_t *job_of)
{
    const int64_t now = v->now_ms;
    uint32_t *held = calloc(v->nnodes + 1, sizeof(*held)); /* GPUs with any hold on them */
    bool *shared = calloc(v->nnodes + 1, sizeof(*shared)); /* a share runs there */
    size_t *first = calloc(v->nnodes + 2, sizeof(*first));
    size_t *by_node = calloc(v->njobs + 1, sizeof(*by_node));
    size_t nj = 0;
    int rc = 0;

    if (!held || !shared || !first || !by_node) {
        rc = TM_ENOMEM;
        goto out;
    }
    for (size_t i = 0; i < v->nnodes; i++) {
        const struct tm_plan_view_node *n = &v->nodes[i];
        if (n->type < 0 || (size_t)n->type >= v->prices->ntypes) {
            rc = TM_EINVAL;
            goto out;
        }
        nodes[i] = (struct tm_planner_node){
            .id = n->id, .type = n->type, .zone = n->zone, .spot = n->spot, .ready = n->ready,
            .leaving = n->leaving, .cordoned = n->cordoned, .idle_since_ms = n->idle_since_ms,
            .busy_until_ms = now, .only_preemptible = true,
            /* movable once a hold is seen and every hold allows it */
            .movable = false, .no_restart = !n->restart_allowed || n->placed,
            .share_room_known = true,
        };
    }
    for (size_t k = 0; k < v->njobs; k++) {
        const struct tm_plan_view_job *j = &v->jobs[k];
        if (j->node >= 0 && !is_running(v, j)) {
            rc = TM_EINVAL;
            goto out;
        }
        if (!is_running(v, j))
            continue;
        struct tm_planner_node *x = &nodes[j->node];
        int32_t milli = hold_milli(j);
        int32_t whole = hold_whole(j) ? __builtin_popcount(j->gpu_mask) : 0;
        bool gang = j->nodes > 1;
        first[j->node + 1]++;
        if (x->jobs == 0)
            x->movable = !v->nodes[j->node].placed;
        x->jobs++;
        x->used_milli += milli;
        x->used_cpu_milli += j->cpu_milli;
        x->used_memory_mib += j->memory_mib;
        held[j->node] |= j->gpu_mask;
        shared[j->node] = shared[j->node] || !hold_whole(j);
        if (!j->preemptible)
            x->only_preemptible = false;
        /* Movable: every job can checkpoint and resume elsewhere.  A gang
         * member cannot: moving it stops the others too. */
        if (!j->preemptible || !j->checkpointable || gang)
            x->movable = false;
        /* Restartable: every job may be stopped, and alone (a gang
         * restarts whole or not at all, never by one node's restart). */
        if (!j->preemptible || gang)
            x->no_restart = true;
        if (!j->checkpointable)
            x->lost_if_moved_milli_ms += (int64_t)milli * j->ran_ms;
        if (now + j->remaining_ms > x->busy_until_ms)
            x->busy_until_ms = now + j->remaining_ms;
        if (job_of)
            job_of[nj] = k;
        jobs[nj++] = (struct tm_planner_job){
            .id = j->id, .gpus = whole, .milli = milli, .preemptible = j->preemptible,
            .on_spot = x->spot, .running = true, .node = j->node, .remaining_ms = j->remaining_ms,
            .deadline_ms = j->deadline_ms, .cpu_milli = j->cpu_milli, .memory_mib = j->memory_mib,
            .checkpointable = j->checkpointable, .attempts = j->attempts, .ran_ms = j->ran_ms};
    }
    /* by_node: each node's holds, node i's at first[i] .. first[i + 1]
     * (counted above; placed here by moving first[i] to its end, then
     * shifted back). */
    for (size_t i = 0; i < v->nnodes; i++)
        first[i + 1] += first[i];
    for (size_t k = 0; k < v->njobs; k++)
        if (is_running(v, &v->jobs[k]))
            by_node[first[v->jobs[k].node]++] = k;
    for (size_t i = v->nnodes; i > 0; i--)
        first[i] = first[i - 1];
    first[0] = 0;
    for (size_t i = 0; i < v->nnodes; i++) {
        struct tm_planner_node *x = &nodes[i];
        int32_t free_whole = v->prices->types[x->type].gpus - __builtin_popcount(held[i]);
        x->free_whole = free_whole < 0 ? 0 : free_whole;
        if (shared[i])
            x->share_free_milli = share_room(v, by_node, first, i);
        /* work placed this pass, not yet a hold: not idle */
        if (x->jobs == 0 && v->nodes[i].placed)
            x->jobs = 1;
    }
    for (size_t k = 0; k < v->njobs; k++) {
        const struct tm_plan_view_job *j = &v->jobs[k];
        if (is_running(v, j))
            continue;
        /* a gang is one entry per node, each with the gang's size */
        for (int32_t m = 0; m < (j->nodes > 1 ? j->nodes : 1); m++) {
            if (job_of)
                job_of[nj] = k;
            jobs[nj++] = (struct tm_planner_job){
                .id = j->id, .gpus = j->gpus, .milli = j->gpus > 0 ? j->gpus * 1000 : j->gpu_milli,
                .preemptible = j->preemptible, .running = false, .node = -1,
                .remaining_ms = j->remaining_ms, .deadline_ms = j->deadline_ms,
                .cpu_milli = j->cpu_milli, .memory_mib = j->memory_mib,
                .gang = j->nodes > 1 ? j->nodes : 0};
        }
    }
    *ret_njobs = nj;
out:
    free(held);
    free(shared);
    free(first);
    free(by_node);
    return rc;
}
