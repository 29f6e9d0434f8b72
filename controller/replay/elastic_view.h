/*
 * controller/replay/elastic_view.h: the elastic replay's mapper into the
 * planner's input (controller/fleet/plan_input.h), the counterpart of the
 * live tick's in reconcile/fleet.c.
 *
 * elastic.c hands what its simulation holds of each live node and each
 * running or queued job at a planning instant; tm_elastic_view() turns it
 * into the builder's view, deciding what only the replay knows: a node a
 * spot substitute replaces is leaving, each node's pool allows restarts
 * (the policy's consolidate_restart decides), how many attempts a job has
 * started, a queued job's estimate, and where it is preemptible.
 */
#ifndef TM_ELASTIC_VIEW_H
#define TM_ELASTIC_VIEW_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "controller/fleet/plan_input.h"

struct tm_elastic_view_node {
    int64_t id;
    int32_t type, zone;
    bool spot, ready;
    bool leaving;            /* noticed: the cloud takes it */
    bool replaced;           /* a spot substitute for it is live */
    bool cordoned;           /* drained by the planner */
    int64_t idle_since_ms;
};

struct tm_elastic_view_job {
    int64_t id;
    int32_t node;            /* running: index into the view's nodes; queued: -1 */
    uint32_t mask;           /* running: the GPUs it holds */
    int32_t amilli;          /* running: milli-GPU of each (1000 whole) */
    int32_t gpus, gpu_milli; /* its ask: whole GPUs, or 0 and the share */
    int64_t cpu_milli, memory_mib;
    bool preemptible, checkpointable;
    bool spot_ok;            /* queued: its model mask lets it run on spot */
    int32_t nodes;           /* nodes it spans (the traces replayed have none above 1) */
    int32_t stops;           /* attempts it ended before this one */
    int64_t start_ms;        /* running: when this attempt started */
    int64_t left_ms;         /* running: expected time left (the scheduler's reading) */
    int64_t estimate_ms;     /* queued: its estimate; <= 0: none */
    int64_t deadline_ms;
};

/* Map n nodes and m jobs at now into the builder's view (vn: n entries,
 * vj: m entries, in the same order). */
void tm_elastic_view(int64_t now, const struct tm_elastic_view_node *nodes, size_t n,
                     const struct tm_elastic_view_job *jobs, size_t m,
                     struct tm_plan_view_node *vn, struct tm_plan_view_job *vj);

#endif
