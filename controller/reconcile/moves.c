/*
 * controller/reconcile/moves.c: the planner's actions beyond launch and
 * terminate, as plan ops of the live tick (migrations/0007_moves.sql).
 * Pure, like the rest of the pass: the snapshot in, ops out.
 *
 *   DRAIN        "drain": the node takes no new work ('draining', cordoned)
 *                and the tick's drained-node path releases it once empty.
 *   MOVE         "move": the same cordon, with each checkpointable job of
 *                the node checkpointed in the same op (progress kept); the
 *                next scheduling pass places them elsewhere and the node
 *                goes once empty.  Only nodes whose every job is
 *                preemptible and checkpointable are movable (fleet_build).
 *   SUBSTITUTE   a spot node requested through the normal path (its token
 *                written before any cloud call) plus "substitute", which
 *                links it to the on-demand node it replaces
 *                (nodes.replaces_node_id).  tm_rc_substitutes() then moves
 *                the old node's jobs once the spot node is ready; if the
 *                spot node fails or is interrupted first, the link goes with
 *                its row and the old node runs on.  All of it is in the
 *                database, so a restarted controller carries on.
 *   DEADLINE_OD  "deadline_od": the job is routed to on-demand from now
 *                (jobs.on_demand_from_ms, tm_rc_pool_accepts) and, if it runs on
 *                spot, leaves it: checkpointed when it can, else requeued.
 *   REFUSE       "launch_refused": recorded when the refusal changes, not
 *                each tick (0007's launch_refusals).
 *   RESTART      "restart" (0015): consolidation by restart; the same
 *                cordon, with the node's checkpointable jobs checkpointed
 *                and the others requeued to start over elsewhere (cause
 *                'consolidate'), the decision stating the money saved and
 *                the work redone.  Pools with consolidate_restart: false
 *                mark their nodes no_restart (fleet_build).
 *
 * Disruption budget: per pool, at most max(disruption_nodes,
 * disruption_pct % of its live nodes) voluntary disruptions (idle
 * releases, moves, substitutions) per disruption_interval, counted from
 * the decisions the snapshot read (so a restart forgets nothing).
 */
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "controller/reconcile/internal.h"
#include "core/err.h"

void tm_rc_disruption_init(struct pass *p)
{
    const struct tm_config *cfg = p->cfg;
    const struct tm_snapshot *s = p->in->snap;

    for (size_t k = 0; k < s->ndisruptions; k++) {
        const struct tm_snap_disruption *d = &s->disruptions[k];
        if (d->pool < 0 || (size_t)d->pool >= cfg->npools)
            continue;
        if (d->at_ms > p->in->now_ms - cfg->pools[d->pool].disruption_interval_ms)
            p->disrupt_recent[d->pool]++;
    }
    for (size_t pi = 0; pi < cfg->npools; pi++) {
        const struct tm_config_pool *pool = &cfg->pools[pi];
        if (!pool->disruption_limited) {
            p->disrupt_left[pi] = INT_MAX;
            continue;
        }
        int allowed = pool->disruption_nodes;
        int by_pct = (int)floor(pool->disruption_pct / 100.0 * (double)p->live[pi] + 1e-9);
        if (by_pct > allowed)
            allowed = by_pct;
        p->disrupt_left[pi] = allowed > p->disrupt_recent[pi] ? allowed - p->disrupt_recent[pi] : 0;
    }
}

bool tm_rc_disruption_take(struct pass *p, int pi)
{
    if (pi < 0 || (size_t)pi >= p->cfg->npools || p->disrupt_left[pi] == INT_MAX)
        return true;
    if (p->disrupt_left[pi] <= 0)
        return false;
    p->disrupt_left[pi]--;
    return true;
}

/* Cordon node ni and checkpoint its checkpointable jobs, in one "move" op.
 * `disruption` names the kind counted against the pool's budget, or NULL
 * when the disruption was counted already (a substitution's). */
static void move_node(struct pass *p, size_t ni, const char *why, const char *disruption,
                      int64_t by_node)
{
    const struct tm_snapshot *s = p->in->snap;
    const struct tm_snap_node *n = &s->nodes[ni];
    size_t lo, hi;
    int nckpt = 0, nrun = 0;
    char jwhy[256];

    cJSON *a = tm_rc_action(p, "move", why);
    tm_rc_put_num(p, a, "node", (double)n->id);
    cJSON *jobs = a ? cJSON_AddArrayToObject(a, "jobs") : NULL;
    if (a && !jobs)
        p->err = TM_ENOMEM;
    tm_rc_allocs_on_node(p, n->id, &lo, &hi);
    for (size_t k = lo; k < hi && jobs; k++) {
        int ji = tm_rc_running_job_at(p, k);
        if (ji < 0)
            continue;
        const struct tm_snap_job *j = &s->jobs[ji];
        if (!j->checkpointable) {
            nrun++; /* runs to its end; the node goes once empty */
            continue;
        }
        int64_t ran = tm_rc_ran_ms(p, j);
        snprintf(jwhy, sizeof(jwhy),
                 "moved off node %" PRId64 ": checkpointed after %" PRId64 " s of attempt %d, %" PRId64
                 " s of progress kept, nothing lost; requeued to run elsewhere",
                 n->id, ran / 1000, j->attempts, (j->progress_ms + ran) / 1000);
        cJSON *o = cJSON_CreateObject();
        if (!o) {
            p->err = TM_ENOMEM;
            break;
        }
        cJSON_AddItemToArray(jobs, o);
        tm_rc_put_num(p, o, "job", (double)j->id);
        tm_rc_put_num(p, o, "started_ms", (double)j->started_ms);
        tm_rc_put_str(p, o, "reason", jwhy);
        cJSON *in = tm_rc_inputs(p, o);
        tm_rc_put_str(p, in, "moved_by", "planner");
        tm_rc_put_num(p, in, "attempt", j->attempts);
        tm_rc_put_num(p, in, "next_attempt", j->attempts + 1);
        tm_rc_put_num(p, in, "ran_ms", (double)ran);
        tm_rc_put_num(p, in, "progress_ms", (double)(j->progress_ms + ran));
        tm_rc_put_num(p, in, "lost_gpu_ms", 0);
        p->job_leaving[ji] = true;
        p->plan.checkpointed++;
        nckpt++;
    }
    cJSON *in = tm_rc_inputs(p, a);
    tm_rc_put_str(p, in, "instance_id", p->node_instance[ni]);
    tm_rc_put_num(p, in, "checkpointing", nckpt);
    tm_rc_put_num(p, in, "running_on", nrun);
    if (n->pool >= 0)
        tm_rc_put_str(p, in, "pool", p->cfg->pools[n->pool].name);
    if (disruption)
        tm_rc_put_str(p, in, "disruption", disruption);
    if (by_node > 0)
        tm_rc_put_num(p, in, "substitute_node", (double)by_node);
    p->node_ready[ni] = false;
    p->plan.moved++;
}

void tm_rc_substitutes(struct pass *p)
{
    const struct tm_snapshot *s = p->in->snap;
    char why[256];

    for (size_t ri = 0; ri < s->nnodes && !p->err; ri++) {
        const struct tm_snap_node *r = &s->nodes[ri];
        if (!r->replaces_node_id || p->node_gone[ri] || r->state == TM_NODE_TERMINATING)
            continue;
        int oi = tm_rc_node_index(p, r->replaces_node_id);
        if (oi < 0)
            continue; /* the old node is gone already */
        const struct tm_snap_node *o = &s->nodes[oi];
        if (p->node_gone[oi] || o->state != TM_NODE_READY || o->cordoned || p->node_noticed[oi])
            continue; /* drained, moved or noticed meanwhile: nothing to hand over */
        p->node_replaced[oi] = true;
        /* Still booting, or noticed itself: the old node runs on. */
        if (!p->node_ready[ri] || p->node_noticed[ri])
            continue;
        snprintf(why, sizeof(why),
                 "substituted by spot node %" PRId64 ", now ready: its checkpointable jobs move "
                 "and it is released once empty", r->id);
        move_node(p, (size_t)oi, why, NULL, r->id);
    }
}

/* The config pools of the model on one side, named "a,b" (the subject of
 * a refusal). */
static void side_subject(const struct pass *p, const bool *in_model, bool spot, char *out,
                         size_t size)
{
    size_t len = 0;
    out[0] = '\0';
    for (size_t pi = 0; pi < p->cfg->npools; pi++) {
        const struct tm_config_pool *pool = &p->cfg->pools[pi];
        if (!in_model[pi] || tm_rc_pool_is_od(pool) == spot)
            continue;
        int n = snprintf(out + len, size - len, "%s%s", len ? "," : "", pool->name);
        if (n < 0 || (size_t)n >= size - len)
            break; /* truncated: the subject stays a prefix */
        len += (size_t)n;
    }
}

void tm_rc_refuse(struct pass *p, const bool *in_model, bool spot, const char *key, const char *reason)
{
    char subject[128];
    const cJSON *a;
    int live = 0, max = 0;

    side_subject(p, in_model, spot, subject, sizeof(subject));
    if (!subject[0])
        return;
    /* One refusal per subject a pass: alternating kinds within one pass
     * would each look like a change to the table. */
    cJSON_ArrayForEach(a, p->plan.actions) {
        const cJSON *op = cJSON_GetObjectItemCaseSensitive(a, "op");
        const cJSON *sub = cJSON_GetObjectItemCaseSensitive(a, "subject");
        if (cJSON_IsString(op) && strcmp(op->valuestring, "launch_refused") == 0 &&
            cJSON_IsString(sub) && strcmp(sub->valuestring, subject) == 0)
            return;
    }
    for (size_t pi = 0; pi < p->cfg->npools; pi++)
        if (in_model[pi] && tm_rc_pool_is_od(&p->cfg->pools[pi]) != spot) {
            live += p->live[pi];
            max += p->cfg->pools[pi].max_nodes;
        }
    /* The planner counts the launches of this very pass against the pools'
     * maximum ("at its max of 4" with 1 node live and 3 on their way): say
     * so in the inputs, or the reason reads as if it contradicted them. */
    int launching = 0;
    cJSON_ArrayForEach(a, p->plan.actions) {
        const cJSON *op = cJSON_GetObjectItemCaseSensitive(a, "op");
        const cJSON *pool = cJSON_GetObjectItemCaseSensitive(a, "pool");
        if (!cJSON_IsString(op) || strcmp(op->valuestring, "request_node") != 0 || !cJSON_IsString(pool))
            continue;
        for (size_t pi = 0; pi < p->cfg->npools; pi++)
            if (in_model[pi] && tm_rc_pool_is_od(&p->cfg->pools[pi]) != spot &&
                strcmp(p->cfg->pools[pi].name, pool->valuestring) == 0)
                launching++;
    }
    cJSON *x = tm_rc_action(p, "launch_refused", reason);
    tm_rc_put_str(p, x, "subject", subject);
    tm_rc_put_str(p, x, "key", key);
    /* A refusal seen again after three quiet ticks is news again.  Ticks in
     * controller time: an accelerated clock (time_scale) passes
     * tick_interval x time_scale between two passes, and a quiet spell
     * counted in wall time made every pass news. */
    double scale = p->cfg->time_scale > 1 ? p->cfg->time_scale : 1;
    tm_rc_put_num(p, x, "quiet_ms", 3.0 * (double)p->cfg->tick_interval_ms * scale);
    cJSON *in = tm_rc_inputs(p, x);
    tm_rc_put_str(p, in, "capacity", spot ? "spot" : "on_demand");
    tm_rc_put_num(p, in, "live_nodes", live);
    tm_rc_put_num(p, in, "launching", launching);
    tm_rc_put_num(p, in, "max_nodes", max);
    p->plan.refused++;
}

/* The planner's refusal reasons (planner.c) by kind. */
static const char *refusal_key(const char *reason)
{
    if (strncmp(reason, "hard cap", 8) == 0)
        return "budget";
    if (strstr(reason, "at its max"))
        return "max_nodes";
    if (strstr(reason, "capacity for"))
        return "no_capacity";
    if (strstr(reason, "type holds"))
        return "no_type";
    return "refused";
}

static void plan_drain(struct pass *p, const struct fleet *f, const struct tm_planner_action *x)
{
    size_t ni = (size_t)f->node_of[x->node];
    const struct tm_snap_node *n = &p->in->snap->nodes[ni];
    const struct tm_planner_node *pn = &f->nodes[x->node];
    char why[256];

    if (n->state != TM_NODE_READY || n->cordoned || p->node_gone[ni])
        return;
    snprintf(why, sizeof(why), "planner: %s", x->reason);
    cJSON *a = tm_rc_action(p, "drain", why);
    tm_rc_put_num(p, a, "node", (double)n->id);
    cJSON *in = tm_rc_inputs(p, a);
    tm_rc_put_str(p, in, "instance_id", p->node_instance[ni]);
    tm_rc_put_str(p, in, "pool", p->cfg->pools[n->pool].name);
    tm_rc_put_num(p, in, "gpus", n->gpus);
    tm_rc_put_num(p, in, "used_gpus", pn->used_milli / 1000.0);
    tm_rc_put_num(p, in, "jobs", pn->jobs);
    p->node_ready[ni] = false;
    p->plan.drained++;
}

static void plan_move(struct pass *p, const struct fleet *f, const struct tm_planner_action *x)
{
    size_t ni = (size_t)f->node_of[x->node];
    const struct tm_snap_node *n = &p->in->snap->nodes[ni];
    char why[256];

    /* The planner moves only movable nodes; checked again, since a node
     * whose jobs cannot all checkpoint must never be emptied this way. */
    if (!f->nodes[x->node].movable || n->state != TM_NODE_READY || n->cordoned || p->node_gone[ni] ||
        p->node_replaced[ni] || !tm_rc_disruption_take(p, n->pool))
        return;
    snprintf(why, sizeof(why), "planner: %s", x->reason);
    move_node(p, ni, why, "move", 0);
}

/* RESTART: the node's jobs leave it in one "restart" op (0015): the
 * checkpointable ones checkpoint, the others are requeued to start over
 * elsewhere (cause 'consolidate'; the next placement is their attempt + 1),
 * and the node, cordoned in the same statement, goes once empty.  Checked
 * again here: every job on it must be preemptible and run on it alone. */
static void plan_restart(struct pass *p, const struct fleet *f, const struct tm_planner_action *x)
{
    const struct tm_snapshot *s = p->in->snap;
    size_t ni = (size_t)f->node_of[x->node];
    const struct tm_snap_node *n = &s->nodes[ni];
    size_t lo, hi;
    int nckpt = 0, nrestart = 0;
    char why[512], jwhy[256];

    if (f->nodes[x->node].no_restart || n->state != TM_NODE_READY || n->cordoned || p->node_gone[ni] ||
        p->node_replaced[ni])
        return;
    tm_rc_allocs_on_node(p, n->id, &lo, &hi);
    for (size_t k = lo; k < hi; k++) {
        int ji = tm_rc_running_job_at(p, k);
        if (ji >= 0 && (!s->jobs[ji].preemptible || s->jobs[ji].nodes > 1 || p->job_leaving[ji]))
            return;
    }
    if (!tm_rc_disruption_take(p, n->pool))
        return;
    snprintf(why, sizeof(why), "planner: %s", x->reason);
    cJSON *a = tm_rc_action(p, "restart", why);
    tm_rc_put_num(p, a, "node", (double)n->id);
    cJSON *jobs = a ? cJSON_AddArrayToObject(a, "jobs") : NULL;
    if (a && !jobs)
        p->err = TM_ENOMEM;
    for (size_t k = lo; k < hi && jobs; k++) {
        int ji = tm_rc_running_job_at(p, k);
        if (ji < 0)
            continue;
        const struct tm_snap_job *j = &s->jobs[ji];
        int64_t ran = tm_rc_ran_ms(p, j);
        if (j->checkpointable)
            snprintf(jwhy, sizeof(jwhy),
                     "consolidated off node %" PRId64 ": checkpointed after %" PRId64 " s of attempt %d, "
                     "progress kept; requeued to run elsewhere", n->id, ran / 1000, j->attempts);
        else
            snprintf(jwhy, sizeof(jwhy),
                     "consolidated off node %" PRId64 " by restart: attempt %d stopped after %" PRId64
                     " s (cannot checkpoint, that work is redone); requeued for attempt %d elsewhere",
                     n->id, j->attempts, ran / 1000, j->attempts + 1);
        cJSON *o = cJSON_CreateObject();
        if (!o) {
            p->err = TM_ENOMEM;
            break;
        }
        cJSON_AddItemToArray(jobs, o);
        tm_rc_put_num(p, o, "job", (double)j->id);
        tm_rc_put_num(p, o, "started_ms", (double)j->started_ms);
        tm_rc_put_str(p, o, "cause", j->checkpointable ? "checkpoint" : "consolidate");
        tm_rc_put_str(p, o, "reason", jwhy);
        cJSON *in = tm_rc_inputs(p, o);
        tm_rc_put_str(p, in, "moved_by", "planner");
        tm_rc_put_str(p, in, "restart", j->checkpointable ? "checkpoint" : "from_start");
        tm_rc_put_num(p, in, "attempt", j->attempts);
        tm_rc_put_num(p, in, "next_attempt", j->attempts + 1);
        tm_rc_put_num(p, in, "ran_ms", (double)ran);
        p->job_leaving[ji] = true;
        if (j->checkpointable) {
            p->plan.checkpointed++;
            nckpt++;
        } else {
            p->plan.requeued++;
            nrestart++;
        }
    }
    cJSON *in = tm_rc_inputs(p, a);
    tm_rc_put_str(p, in, "instance_id", p->node_instance[ni]);
    if (n->pool >= 0)
        tm_rc_put_str(p, in, "pool", p->cfg->pools[n->pool].name);
    tm_rc_put_str(p, in, "disruption", "restart");
    tm_rc_put_num(p, in, "restarting", nrestart);
    tm_rc_put_num(p, in, "checkpointing", nckpt);
    tm_rc_put_num(p, in, "saving_usd", (double)x->saving_uusd / 1e6);
    tm_rc_put_num(p, in, "redone_usd", (double)x->cost_uusd / 1e6);
    tm_rc_put_num(p, in, "redone_gpu_hours", (double)x->redone_milli_ms / 1000.0 / 3.6e6);
    p->node_ready[ni] = false;
    p->plan.moved++;
}

static void plan_substitute(struct pass *p, const bool *in_model, const struct fleet *f,
                            const struct tm_planner_action *x, unsigned *seq)
{
    const struct tm_config *cfg = p->cfg;
    size_t oi = (size_t)f->node_of[x->node];
    const struct tm_snap_node *o = &p->in->snap->nodes[oi];
    const char *type = f->pr.types[x->type].name;
    const char *zone = f->pr.nzones ? f->pr.zones[x->zone] : "";
    char why[512];

    if (!f->nodes[x->node].movable || o->capacity != TM_CAPACITY_ON_DEMAND || o->state != TM_NODE_READY ||
        o->cordoned || p->node_gone[oi] || p->node_replaced[oi])
        return;
    int pi = tm_rc_launch_pool_on(p, in_model, f->pr.types[x->type].provider, type, zone, true, false);
    if (pi < 0) {
        snprintf(why, sizeof(why), "every spot pool that lists %s is at its max_nodes; no substitute "
                 "for node %" PRId64 ": %s", type, o->id, x->reason);
        tm_rc_refuse(p, in_model, true, "max_nodes", why);
        return;
    }
    if (tm_rc_launch_held(p, pi))
        return; /* the pool's nodes never enrolled: backing off (no_show.c) */
    const struct tm_config_pool *pool = &cfg->pools[pi];
    const struct tm_config_provider *prov = tm_config_provider_find(cfg, pool->provider);
    const struct tm_config_instance_type *t = prov ? tm_config_type_find(prov, type) : NULL;
    if (!t || !tm_rc_disruption_take(p, o->pool) || !tm_rc_launch_admitted(p, pi, t, TM_CAPACITY_SPOT))
        return;
    bool listed = false;
    for (size_t z = 0; z < pool->nzones; z++)
        listed = listed || strcmp(pool->zones[z], zone) == 0;
    if (!listed)
        zone = pool->zones[(size_t)p->live[pi] % pool->nzones];
    snprintf(why, sizeof(why), "substitute for on-demand node %" PRId64 " (planner: %s); pool %s has %d of "
             "max %d nodes", o->id, x->reason, pool->name, p->live[pi], pool->max_nodes);
    cJSON *req = tm_rc_request_node(p, pi, t, zone, TM_CAPACITY_SPOT, why, -1, seq);
    tm_rc_put_num(p, req ? cJSON_GetObjectItemCaseSensitive(req, "inputs") : NULL, "replaces_node",
                  (double)o->id);
    const cJSON *tok = req ? cJSON_GetObjectItemCaseSensitive(req, "token") : NULL;
    if (!cJSON_IsString(tok))
        return;
    snprintf(why, sizeof(why), "to be replaced by a spot %s in pool %s; its jobs move once that node is "
             "ready (planner: %s)", t->name, pool->name, x->reason);
    cJSON *a = tm_rc_action(p, "substitute", why);
    tm_rc_put_num(p, a, "node", (double)o->id);
    tm_rc_put_str(p, a, "token", tok->valuestring);
    cJSON *in = tm_rc_inputs(p, a);
    tm_rc_put_str(p, in, "pool", cfg->pools[o->pool].name);
    tm_rc_put_str(p, in, "disruption", "substitute");
    tm_rc_put_str(p, in, "spot_pool", pool->name);
    tm_rc_put_str(p, in, "instance_type", t->name);
    tm_rc_put_str(p, in, "zone", zone);
    tm_rc_put_num(p, in, "move_cost_usd", (double)x->cost_uusd / 1e6);
    p->node_replaced[oi] = true;
    p->plan.substituted++;
}

static void plan_deadline(struct pass *p, const struct fleet *f, const struct tm_planner_input *in_p,
                          const struct tm_planner_action *x)
{
    const struct tm_snapshot *s = p->in->snap;
    const struct tm_planner_job *pj = &f->jobs[x->job];
    int ji = tm_rc_job_index(p, pj->id);
    char why[256];

    if (ji < 0 || p->job_switched[ji] || p->job_leaving[ji])
        return;
    const struct tm_snap_job *j = &s->jobs[ji];
    int oi = pj->running && pj->on_spot ? f->node_of[pj->node] : -1;
    if (j->on_demand_from_ms > 0 && oi < 0)
        return; /* switched already and not on spot */
    p->job_switched[ji] = true;
    int64_t sw = tm_planner_deadline_switch_ms(pj->deadline_ms, pj->remaining_ms, in_p->params.boot_ms,
                                               in_p->params.tick_ms);
    snprintf(why, sizeof(why), "runs on on-demand from now: %s", x->reason);
    cJSON *a = tm_rc_action(p, "deadline_od", why);
    tm_rc_put_num(p, a, "job", (double)j->id);
    cJSON *in = tm_rc_inputs(p, a);
    tm_rc_put_num(p, in, "deadline_ms", (double)pj->deadline_ms);
    tm_rc_put_num(p, in, "remaining_ms", (double)pj->remaining_ms);
    tm_rc_put_num(p, in, "boot_ms", (double)in_p->params.boot_ms);
    tm_rc_put_num(p, in, "tick_ms", (double)in_p->params.tick_ms);
    tm_rc_put_num(p, in, "switch_by_ms", (double)sw);
    if (oi >= 0) {
        const struct tm_snap_node *n = &s->nodes[oi];
        char leave[256];
        snprintf(leave, sizeof(leave),
                 "deadline: off spot node %" PRId64 " after %" PRId64 " s of attempt %d (%s); restarts "
                 "on on-demand", n->id, tm_rc_ran_ms(p, j) / 1000, j->attempts,
                 j->checkpointable ? "checkpointed, progress kept" : "not checkpointable, attempt lost");
        tm_rc_put_num(p, a, "node", (double)n->id);
        tm_rc_put_num(p, a, "started_ms", (double)j->started_ms);
        tm_rc_put_str(p, a, "leave_reason", leave);
        tm_rc_put_num(p, in, "node", (double)n->id);
        p->job_leaving[ji] = true;
        if (j->checkpointable)
            p->plan.checkpointed++;
        else
            p->plan.requeued++;
    }
    p->plan.switched++;
}

void tm_rc_plan_other(struct pass *p, const bool *in_model, const struct fleet *f,
                      const struct tm_planner_input *in, const struct tm_planner_action *x, unsigned *seq)
{
    switch (x->kind) {
    case TM_PLANNER_DRAIN:
        plan_drain(p, f, x);
        break;
    case TM_PLANNER_MOVE:
        plan_move(p, f, x);
        break;
    case TM_PLANNER_SUBSTITUTE:
        plan_substitute(p, in_model, f, x, seq);
        break;
    case TM_PLANNER_RESTART:
        plan_restart(p, f, x);
        break;
    case TM_PLANNER_DEADLINE_OD:
        plan_deadline(p, f, in, x);
        break;
    case TM_PLANNER_REFUSE: {
        bool spot = x->spot || (strstr(x->reason, "spot") && !strstr(x->reason, "on-demand"));
        tm_rc_refuse(p, in_model, spot, refusal_key(x->reason), x->reason);
        break;
    }
    default:
        break;
    }
}
