/*
 * controller/reconcile/reconcile.c: see reconcile.h.  No I/O, no clock, no globals.
 *
 * tm_reconcile alone: it sets up one struct pass (internal.h) and runs the
 * steps, each in its own file.  The order of the actions in the plan is
 * the order tarmac_apply applies them:
 *   1. observe (observe.c): match each live node to what its provider
 *      lists (by instance id, else by launch token), mark nodes ready,
 *      adopted or gone (their jobs requeued, the attempt's GPU time lost),
 *      act on interruption notices (cordon, checkpoint), and find
 *      instances nobody owns;
 *   2. budgets (budgets.c): spend against each cap, and the queued jobs a
 *      hard cap holds back;
 *   3. schedule (schedule.c): the queued jobs onto ready nodes
 *      (controller/sched/scheduler.c);
 *   4. plan the fleet (fleet.c, with route.c and moves.c): request nodes
 *      for queued work no ready node can take, up to each pool's max, and
 *      up to its min; release nodes idle past their pool's grace, down to
 *      its min, and noticed nodes once empty.
 * Calls run one way: this file -> the steps -> pass.c.
 */
#include "controller/reconcile/reconcile.h"
#include "controller/reconcile/internal.h"

#include <stdlib.h>
#include <string.h>

#include "controller/sched/estimate.h"
#include "core/err.h"

static int provider_index(const struct tm_config *cfg, const char *name)
{
    for (size_t i = 0; i < cfg->nproviders; i++)
        if (strcmp(cfg->providers[i].name, name) == 0)
            return (int)i;
    return -1;
}

int tm_reconcile(const struct tm_reconcile_input *in, struct tm_rc_plan *ret)
{
    struct pass p = {.in = in, .cfg = in->cfg};
    const struct tm_snapshot *s = in->snap;
    size_t np = in->cfg->npools;
    bool **matched = NULL;
    bool *job_placed = NULL;
    int r;

    p.plan.actions = cJSON_CreateArray();
    p.pool_provider = calloc(np + 1, sizeof(int));
    p.live = calloc(np + 1, sizeof(int));
    p.pending_milli = calloc(np + 1, sizeof(int64_t));
    p.demand_milli = calloc(np + 1, sizeof(int64_t));
    p.node_gone = calloc(s->nnodes + 1, sizeof(bool));
    p.node_ready = calloc(s->nnodes + 1, sizeof(bool));
    p.node_busy = calloc(s->nnodes + 1, sizeof(bool));
    p.node_noticed = calloc(s->nnodes + 1, sizeof(bool));
    p.job_leaving = calloc(s->njobs + 1, sizeof(bool));
    p.alloc_nodes = malloc((s->nallocs + 1) * sizeof(*p.alloc_nodes));
    p.node_instance = calloc(s->nnodes + 1, TM_ID_MAX);
    matched = calloc(in->nobserved + 1, sizeof(bool *));
    job_placed = calloc(s->njobs + 1, sizeof(bool));
    if (!p.plan.actions || !p.pool_provider || !p.live || !p.pending_milli || !p.demand_milli ||
        !p.node_gone || !p.node_ready || !p.node_busy || !p.node_instance || !matched ||
        !job_placed || !p.node_noticed || !p.job_leaving || !p.alloc_nodes) {
        p.err = TM_ENOMEM;
        goto out;
    }
    for (size_t i = 0; i < np; i++)
        p.pool_provider[i] = provider_index(in->cfg, in->cfg->pools[i].provider);
    tm_rc_index_build(&p);
    p.job_held = calloc(s->njobs + 1, sizeof(bool));
    p.pool_use_ms = calloc(np + 1, sizeof(int64_t));
    p.node_placed = calloc(s->nnodes + 1, sizeof(bool));
    p.node_replaced = calloc(s->nnodes + 1, sizeof(bool));
    p.job_switched = calloc(s->njobs + 1, sizeof(bool));
    p.disrupt_left = calloc(np + 1, sizeof(int));
    p.disrupt_recent = calloc(np + 1, sizeof(int));
    p.node_fenced = calloc(s->nnodes + 1, sizeof(bool));
    p.node_unfenced = calloc(s->nnodes + 1, sizeof(bool));
    p.job_owned_start = calloc(s->njobs + 1, sizeof(int64_t));
    p.job_burst = calloc(s->njobs + 1, sizeof(uint8_t));
    if (!p.node_ids || !p.job_ids || !p.job_held || !p.pool_use_ms || !p.node_placed ||
        !p.node_replaced || !p.job_switched || !p.disrupt_left || !p.disrupt_recent ||
        !p.node_fenced || !p.node_unfenced || !p.job_owned_start || !p.job_burst) {
        p.err = TM_ENOMEM;
        goto out;
    }
    /* History in, estimates out: rebuilt each pass from the snapshot, so
     * the pass stays a pure function of it. */
    if (s->nhistory > 0 && tm_estimator_new(&p.est) == 0) {
        for (size_t h = 0; h < s->nhistory; h++) {
            const struct tm_snap_history *hj = &s->history[h];
            struct tm_estimate_key k = {.team = hj->team, .name = hj->name, .klass = hj->klass,
                                        .gpu_milli = hj->gpu_milli};
            if (tm_estimator_observe(p.est, &k, hj->runtime_ms) < 0)
                break;
        }
    }

    tm_rc_observe(&p, matched);
    if (!p.err)
        tm_rc_staleness(&p);
    if (!p.err)
        tm_rc_gang_start(&p);
    if (!p.err)
        tm_rc_drain_checkpoints(&p);
    if (!p.err)
        tm_rc_idle_gpus(&p);
    if (!p.err)
        tm_rc_disruption_init(&p);
    if (!p.err)
        tm_rc_budgets(&p);
    if (!p.err)
        tm_rc_no_show_init(&p);
    if (!p.err)
        tm_rc_schedule(&p, job_placed);
    if (!p.err)
        tm_rc_run_planner(&p, job_placed);
    if (!p.err)
        tm_rc_power(&p, job_placed);
out:
    r = p.err;
    if (matched)
        for (size_t o = 0; o < in->nobserved; o++)
            free(matched[o]);
    free(matched);
    free(job_placed);
    free(p.pool_provider);
    free(p.live);
    free(p.pending_milli);
    free(p.demand_milli);
    free(p.node_gone);
    free(p.node_ready);
    free(p.node_busy);
    free(p.node_noticed);
    free(p.job_leaving);
    free(p.node_placed);
    free(p.node_replaced);
    free(p.job_switched);
    free(p.disrupt_left);
    free(p.disrupt_recent);
    free(p.node_fenced);
    free(p.node_unfenced);
    free(p.job_owned_start);
    free(p.job_burst);
    free(p.alloc_nodes);
    free(p.node_instance);
    free(p.node_ids);
    free(p.job_ids);
    free(p.job_held);
    free(p.pool_use_ms);
    free(p.teams);
    free(p.no_show);
    free(p.no_show_said);
    tm_estimator_free(p.est);
    if (r < 0) {
        tm_rc_plan_release(&p.plan);
        return r;
    }
    *ret = p.plan;
    return 0;
}

void tm_rc_plan_release(struct tm_rc_plan *plan)
{
    cJSON_Delete(plan->actions);
    free(plan->quota_view);
    free(plan->launches);
    free(plan->terminates);
    free(plan->power);
    memset(plan, 0, sizeof(*plan));
}
