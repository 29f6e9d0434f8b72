/*
 * controller/replay/elastic_view.c: the elastic replay's planning instant as
 * the planner's input builder reads it (see elastic_view.h).
 */
#include "controller/replay/elastic_view.h"

#include "controller/sched/scheduler.h"

void tm_elastic_view(int64_t now, const struct tm_elastic_view_node *nodes, size_t n,
                     const struct tm_elastic_view_job *jobs, size_t m,
                     struct tm_plan_view_node *vn, struct tm_plan_view_job *vj)
{
    for (size_t i = 0; i < n; i++) {
        const struct tm_elastic_view_node *x = &nodes[i];
        vn[i] = (struct tm_plan_view_node){
            .id = x->id, .type = x->type, .zone = x->zone, .spot = x->spot, .ready = x->ready,
            /* the substitute takes its work: the node is on its way out */
            .leaving = x->leaving || x->replaced, .cordoned = x->cordoned,
            /* the policy's consolidate_restart decides for every node */
            .restart_allowed = true, .idle_since_ms = x->idle_since_ms};
    }
    for (size_t k = 0; k < m; k++) {
        const struct tm_elastic_view_job *j = &jobs[k];
        int64_t est = j->estimate_ms > 0 ? j->estimate_ms : TM_SCHED_DEFAULT_ESTIMATE_MS;
        bool running = j->node >= 0;
        vj[k] = (struct tm_plan_view_job){
            .id = j->id, .node = j->node, .gpus = j->gpus,
            .cpu_milli = j->cpu_milli, .memory_mib = j->memory_mib,
            .checkpointable = j->checkpointable, .nodes = j->nodes > 1 ? j->nodes : 1,
            .deadline_ms = j->deadline_ms};
        if (running) {
            vj[k].gpu_mask = j->mask;
            vj[k].gpu_milli = j->amilli;
            vj[k].preemptible = j->preemptible;
            /* the attempts it ended, and this one */
            vj[k].attempts = j->stops + 1;
            vj[k].ran_ms = now - j->start_ms;
            vj[k].remaining_ms = j->left_ms;
        } else {
            vj[k].gpu_milli = j->gpus > 0 ? 1000 : j->gpu_milli;
            /* preemptible where it may run on spot, or with a deadline
             * (the planner's deadline rule reads it) */
            vj[k].preemptible = j->preemptible && (j->spot_ok || j->deadline_ms);
            vj[k].remaining_ms = est;
        }
    }
}
