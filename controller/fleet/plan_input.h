/*
 * controller/fleet/plan_input.h: the planner's nodes and jobs, built one way
 * for the live tick (reconcile/fleet.c) and the elastic replay
 * (replay/elastic.c).
 *
 * Each caller maps its world into a small view: the nodes it plans for and,
 * per job, either its hold on one node (running: which GPUs, how much of
 * each) or its ask (queued).  What the world alone knows stays with the
 * caller: which nodes are leaving, a job's estimate and routing, the pool's
 * word on restarts.  Everything the planner derives from those facts is
 * derived here, once, so that the replay measures the rules the live
 * controller runs:
 *
 *   free whole GPUs   the node's GPUs that no job holds any of: a GPU with a
 *                     share on it is not whole-free, and counting
 *                     ceil(used milli / 1000) instead, three 0.6 shares on
 *                     three GPUs of an 8-GPU node left "6 free" where 5
 *                     were, and a 6-GPU job seen fitting waited without a
 *                     launch; the live tick took a share for a whole GPU
 *   share room        the largest free room on one partly used GPU (a share
 *                     fits on one GPU, never across two); known on every node
 *   gangs             a running member of a job spanning several nodes
 *                     cannot be moved or restarted alone: its node is neither
 *                     movable nor restartable; a queued gang is one planner
 *                     job per node, each with the gang's size
 *   attempts          attempts started, this one included, as the store counts
 *                     them (jobs.attempts grows at each start): the planner's
 *                     cap on restarts reads it
 *   placed            a node that got work this pass not yet an allocation
 *                     counts as busy, and is neither movable nor restartable
 *                     (the work is not known here)
 */
#ifndef TM_PLAN_INPUT_H
#define TM_PLAN_INPUT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "controller/fleet/planner.h"
#include "controller/fleet/prices.h"

struct tm_plan_view_node {
    int64_t id;
    int32_t type;            /* index into the price table's types */
    int32_t zone;            /* index into its zones (0 when none) */
    bool spot;
    bool ready;              /* booted; false while booting */
    bool leaving;            /* the caller releases it whatever the planner says */
    bool cordoned;           /* drained: no new work, released once empty */
    bool restart_allowed;    /* its pool allows consolidation by restart */
    bool placed;             /* got work this pass that no job below shows */
    int64_t idle_since_ms;   /* when it last emptied, as the planner's grace reads it */
};

struct tm_plan_view_job {
    int64_t id;
    /* Running: its hold on one node.  node indexes the view's nodes;
     * gpu_mask the GPUs it holds, gpu_milli what it holds of each (1000
     * for whole GPUs, the share otherwise).  Queued: node -1, gpus whole
     * GPUs per node or 0 with gpu_milli the share. */
    int32_t node;
    uint32_t gpu_mask;
    int32_t gpus;
    int32_t gpu_milli;
    int64_t cpu_milli, memory_mib;
    bool preemptible;        /* queued: preemptible where the caller routes it */
    bool checkpointable;
    int32_t nodes;           /* nodes the job spans (a gang when > 1) */
    int32_t attempts;        /* running: attempts started, this one included */
    int64_t ran_ms;          /* running: this attempt's run time so far */
    int64_t remaining_ms;    /* expected work left (the caller's estimate) */
    int64_t deadline_ms;     /* 0: none */
};

/* One instant of the caller's world: running holds first, then the queue
 * (the planner's job order is the view's). */
struct tm_plan_view {
    int64_t now_ms;
    const struct tm_price_table *prices;
    const struct tm_plan_view_node *nodes;
    size_t nnodes;
    const struct tm_plan_view_job *jobs;
    size_t njobs;
};

/* How many planner jobs the view becomes (a queued gang is one per node). */
size_t tm_plan_input_jobs_max(const struct tm_plan_view *v);

/* Fill nodes (v->nnodes entries, in the view's order) and jobs (at most
 * tm_plan_input_jobs_max entries) and set *ret_njobs; job_of, when not
 * NULL, gets for each planner job the index of its view job.  TM_EINVAL
 * when a running job names no node of the view or a node no type of the
 * table; then nothing is promised of the arrays. */
int tm_plan_input_build(const struct tm_plan_view *v, struct tm_planner_node *nodes,
                        struct tm_planner_job *jobs, size_t *ret_njobs, size_t *job_of);

#endif
