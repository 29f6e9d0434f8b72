/*
 * controller/reconcile/quotas.c: team GPU quotas in the live pass, the
 * adapter between the snapshot and controller/sched/quota.h.  The rules
 * (who is within quota, who borrows, whom a reclaim stops) are the quota
 * module's; this file says which flavor a pool, a running job and a
 * queued job are under, which running work counts as borrowed, and turns
 * the scheduler's reclaims into checkpoint or preempt ops.
 *
 * Level-triggered like the rest of the pass: nothing is remembered between
 * passes.  Which running jobs are borrowed is therefore recomputed each
 * pass (tm_quota_mark_borrowed(), the rule the replay uses too).
 */
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "controller/reconcile/internal.h"
#include "core/err.h"

const char *tm_reconcile_pool_flavor(const struct tm_config *cfg, size_t pi)
{
    const struct tm_config_pool *pool = &cfg->pools[pi];

    return pool->group && pool->group[0] ? pool->group : pool->gpu_model;
}

/* The configuration's flavors, each once, in pool order, with the GPUs
 * the fleet may hold of each: its pools' max_nodes x gpus_per_node.  The
 * fleet grows and shrinks with the queue, so a quota is measured against
 * what it can hold, not against the nodes up this minute; an overcommit
 * is then a fact of the configuration and is said once, not each time a
 * node comes or goes.  Names point into cfg. */
static int fleet_flavors(const struct tm_config *cfg, struct tm_quota_flavor **ret, size_t *ret_n)
{
    struct tm_quota_flavor *fl = calloc(cfg->npools + 1, sizeof(*fl));
    size_t n = 0;

    if (!fl)
        return TM_ENOMEM;
    for (size_t pi = 0; pi < cfg->npools; pi++) {
        const char *name = tm_reconcile_pool_flavor(cfg, pi);
        size_t f = 0;
        while (f < n && strcmp(fl[f].name, name) != 0)
            f++;
        if (f == n)
            fl[n++] = (struct tm_quota_flavor){.name = name};
        fl[f].fleet_gpus += (int64_t)cfg->pools[pi].max_nodes * cfg->pools[pi].gpus_per_node;
    }
    *ret = fl;
    *ret_n = n;
    return 0;
}

int tm_reconcile_quota_check(const struct tm_config *cfg, const struct tm_quota_row *rows, size_t n,
                             char *err, size_t errlen)
{
    struct tm_quota_flavor *fl = NULL;
    struct tm_quota *q = NULL;
    size_t nfl = 0;
    int r = fleet_flavors(cfg, &fl, &nfl);

    if (r == 0)
        r = tm_quota_build(fl, nfl, rows, n, &q, err, errlen);
    tm_quota_free(q);
    free(fl);
    return r;
}

/* The model from the snapshot's rows: 0 and *ret (NULL when no quota is
 * set), or the build's error in err (a set the API checked against
 * another configuration: a pool group since removed, say). */
static int build_model(struct pass *p, struct tm_quota **ret, char *err, size_t errlen)
{
    const struct tm_snapshot *s = p->in->snap;
    struct tm_quota_row *rows;
    struct tm_quota_flavor *fl = NULL;
    size_t nfl = 0;
    int r;

    *ret = NULL;
    if (s->nquotas == 0)
        return 0;
    rows = calloc(s->nquotas, sizeof(*rows));
    if (!rows || (r = fleet_flavors(p->cfg, &fl, &nfl)) < 0) {
        free(rows);
        return TM_ENOMEM;
    }
    for (size_t i = 0; i < s->nquotas; i++) {
        const struct tm_snap_quota *x = &s->quotas[i];
        rows[i] = (struct tm_quota_row){
            .team = x->team, .org = x->org, .flavor = x->flavor, .gpus = (double)x->gpus,
            .borrowing_limit = x->borrowing_limit < 0 ? NAN : (double)x->borrowing_limit,
            .lending_limit = x->lending_limit < 0 ? NAN : (double)x->lending_limit,
            .weight = x->weight,
        };
    }
    r = tm_quota_build(fl, nfl, rows, s->nquotas, ret, err, errlen);
    free(rows);
    free(fl);
    return r;
}

/* Whether some quota names flavor f: only those flavors are the quotas'
 * business; work on the others is scheduled as before. */
static bool flavor_named(const struct tm_snapshot *s, const struct tm_quota *q, int32_t f)
{
    for (size_t i = 0; i < s->nquotas; i++)
        if (strcmp(s->quotas[i].flavor, tm_quota_flavor_name(q, f)) == 0)
            return true;
    return false;
}

static int32_t quota_team(const struct tm_quota *q, const char *team)
{
    int32_t t = tm_quota_team(q, team);

    /* A job filed under an org's name runs on no team's quota. */
    return t >= 0 ? t : (int32_t)tm_quota_nnodes(q) - 1;
}

/* Whole GPUs a job holds or asks for over all its nodes (a share of a GPU
 * counts as the GPU). */
static int64_t job_gpus(const struct tm_snap_job *j)
{
    if (j->gpus > 0)
        return (int64_t)j->gpus * (j->nodes > 0 ? j->nodes : 1);
    return (j->gpu_milli + 999) / 1000;
}

static int32_t pool_flavor(const struct rc_quota *rq, int pool)
{
    return pool >= 0 && (size_t)pool < rq->npools ? rq->pool_flavor[pool] : -1;
}

/* Mark as borrowed the running jobs past their team's own quota (the
 * quota module's rule).  0 or TM_ENOMEM. */
static int mark_borrowed(struct rc_quota *rq)
{
    int64_t *started = malloc((rq->nrunning + 1) * sizeof(*started));
    int64_t *ids = malloc((rq->nrunning + 1) * sizeof(*ids));
    int r = TM_ENOMEM;

    if (started && ids) {
        for (size_t i = 0; i < rq->nrunning; i++) {
            started[i] = rq->run_snap[i]->started_ms;
            ids[i] = rq->run_snap[i]->id;
        }
        r = tm_quota_mark_borrowed(rq->q, rq->running, rq->nrunning, started, ids);
    }
    free(started);
    free(ids);
    return r;
}

/* The running jobs under a quota'd flavor. */
static int collect_running(struct pass *p, struct rc_quota *rq)
{
    const struct tm_snapshot *s = p->in->snap;

    rq->running = calloc(s->njobs + 1, sizeof(*rq->running));
    rq->run_snap = calloc(s->njobs + 1, sizeof(*rq->run_snap));
    if (!rq->running || !rq->run_snap)
        return TM_ENOMEM;
    for (size_t ji = 0; ji < s->njobs; ji++) {
        const struct tm_snap_job *j = &s->jobs[ji];
        int ni = j->state == TM_JOB_RUNNING && !p->job_leaving[ji] ? tm_rc_node_index(p, j->node_id) : -1;
        int32_t f = ni >= 0 ? pool_flavor(rq, s->nodes[ni].pool) : -1;
        if (f < 0)
            continue;
        int64_t ran = p->in->now_ms - j->started_ms;
        rq->run_snap[rq->nrunning] = j;
        rq->running[rq->nrunning++] = (struct tm_quota_job){
            .team = quota_team(rq->q, j->team), .flavor = f, .gpus = job_gpus(j),
            .preemptible = j->preemptible, .checkpointable = j->checkpointable,
            .redo_gpu_ms = ran > 0 ? ran * job_gpus(j) : 0,
        };
    }
    return mark_borrowed(rq);
}

/* The disruption budget the pass may spend on reclaims: what the pools'
 * budgets still allow, all of it when one of them has none.  Each victim
 * is taken from its own pool's budget again when it is written. */
static int32_t reclaim_budget(const struct pass *p, size_t nrunning)
{
    int64_t left = 0;

    for (size_t pi = 0; pi < p->cfg->npools; pi++) {
        if (p->disrupt_left[pi] == INT_MAX)
            return nrunning > INT32_MAX ? INT32_MAX : (int32_t)nrunning;
        left += p->disrupt_left[pi] > 0 ? p->disrupt_left[pi] : 0;
    }
    return left > INT32_MAX ? INT32_MAX : (int32_t)left;
}

int tm_rc_quota_begin(struct pass *p, struct rc_quota *rq, struct tm_sched_job *jobs,
                      const int32_t *job_of, size_t nj)
{
    const struct tm_snapshot *s = p->in->snap;
    char err[TM_QUOTA_WHY_MAX];
    struct tm_quota_job *want = NULL;
    size_t nwant = 0;
    int r;

    memset(rq, 0, sizeof(*rq));
    err[0] = '\0';
    r = build_model(p, &rq->q, err, sizeof(err));
    if (r == TM_ENOMEM)
        return r;
    if (r < 0) {
        /* A stored set the model refuses (its flavor left the
         * configuration): scheduled without quotas, and said in the view. */
        snprintf(rq->error, sizeof(rq->error), "%s", err);
        return 0;
    }
    if (!rq->q)
        return 0;
    rq->npools = p->cfg->npools;
    rq->pool_flavor = calloc(rq->npools + 1, sizeof(*rq->pool_flavor));
    rq->jobs = calloc(nj + 1, sizeof(*rq->jobs));
    rq->answers = calloc(nj + 1, sizeof(*rq->answers));
    want = calloc(nj + 1, sizeof(*want));
    if (!rq->pool_flavor || !rq->jobs || !rq->answers || !want)
        goto nomem;
    for (size_t pi = 0; pi < rq->npools; pi++) {
        int32_t f = tm_quota_flavor(rq->q, tm_reconcile_pool_flavor(p->cfg, pi));
        rq->pool_flavor[pi] = f >= 0 && flavor_named(s, rq->q, f) ? f : -1;
    }
    if (collect_running(p, rq) < 0)
        goto nomem;
    for (size_t k = 0; k < nj; k++) {
        const struct tm_snap_job *j = &s->jobs[job_of[k]];
        int32_t f = pool_flavor(rq, tm_reconcile_job_pool(p->cfg, j));
        rq->jobs[k] = (struct tm_quota_job){
            .team = quota_team(rq->q, j->team), .flavor = f, .gpus = job_gpus(j),
            .preemptible = j->preemptible, .checkpointable = j->checkpointable,
        };
        if (f < 0)
            continue;
        /* Under a flavor's quota, the job runs on that flavor's pools only:
         * a quota of H100s is not spent on another model's nodes. */
        for (size_t pi = 0; pi < rq->npools && pi < 63; pi++)
            if (rq->pool_flavor[pi] != f)
                jobs[k].model_mask &= ~(1ull << pi);
        if (!jobs[k].model_mask)
            jobs[k].model_mask = 1ull << 63;
        want[nwant++] = rq->jobs[k];
    }
    r = tm_quota_usage_new(rq->q, rq->running, rq->nrunning, want, nwant, &rq->usage);
    free(want);
    if (r < 0)
        return r;
    rq->view = (struct tm_sched_quota){
        .quota = rq->q, .usage = rq->usage, .jobs = rq->jobs, .running = rq->running,
        .nrunning = rq->nrunning, .disruption_budget = reclaim_budget(p, rq->nrunning),
        .answers = rq->answers,
    };
    rq->on = true;
    return 0;
nomem:
    free(want);
    return TM_ENOMEM;
}

/* One reclaim: the borrowed job checkpointed (progress kept) or stopped and
 * requeued, naming the job, for whom and the GPU-time redone. */
static void emit_reclaim(struct pass *p, struct rc_quota *rq, const struct tm_sched_reclaim *rc,
                         const struct tm_snap_job *owner)
{
    const struct tm_snap_job *j = rq->run_snap[rc->victim.running];
    const struct tm_quota_job *qj = &rq->running[rc->victim.running];
    const char *for_team = tm_quota_name(rq->q, rc->victim.for_team);
    const char *flavor = tm_quota_flavor_name(rq->q, qj->flavor);
    int ni = tm_rc_node_index(p, j->node_id), ji = tm_rc_job_index(p, j->id);
    int pool = ni >= 0 ? p->in->snap->nodes[ni].pool : -1;
    bool ckpt = rc->victim.checkpoint && j->checkpointable;
    double redo_h = ckpt ? 0 : (double)rc->victim.redo_gpu_ms / 3.6e6;
    char why[256];

    if (ji < 0 || p->job_leaving[ji] || !tm_rc_disruption_take(p, pool))
        return;
    if (ckpt)
        snprintf(why, sizeof(why), "quota reclaim: job %" PRId64 " of team %s borrowed team %s's quota "
                 "of %s; checkpointed for job %" PRId64 ", nothing redone; requeued", j->id, j->team,
                 for_team, flavor, owner->id);
    else
        snprintf(why, sizeof(why), "quota reclaim: job %" PRId64 " of team %s borrowed team %s's quota "
                 "of %s; stopped for job %" PRId64 ", %.3f GPU-hours redone; requeued", j->id, j->team,
                 for_team, flavor, owner->id, redo_h);
    cJSON *a = tm_rc_action(p, ckpt ? "checkpoint" : "preempt", why);
    tm_rc_put_num(p, a, "job", (double)j->id);
    if (ckpt) {
        tm_rc_put_num(p, a, "node", (double)j->node_id);
        tm_rc_put_num(p, a, "started_ms", (double)j->started_ms);
    }
    cJSON *in = tm_rc_inputs(p, a);
    tm_rc_put_str(p, in, "quota_reclaim", ckpt ? "checkpoint" : "requeue");
    tm_rc_put_str(p, in, "for_team", for_team);
    tm_rc_put_num(p, in, "for_job", (double)owner->id);
    tm_rc_put_str(p, in, "team", j->team);
    tm_rc_put_str(p, in, "flavor", flavor);
    tm_rc_put_num(p, in, "gpus", (double)qj->gpus);
    tm_rc_put_num(p, in, "redone_gpu_ms", ckpt ? 0 : (double)rc->victim.redo_gpu_ms);
    /* Counted against the pool's disruption budget, as a move is. */
    tm_rc_put_str(p, in, "disruption", "quota_reclaim");
    if (pool >= 0)
        tm_rc_put_str(p, in, "pool", p->cfg->pools[pool].name);
    p->job_leaving[ji] = true;
    p->plan.reclaimed++;
    if (ckpt)
        p->plan.checkpointed++;
    else
        p->plan.preempted++;
}

void tm_rc_quota_reclaims(struct pass *p, struct rc_quota *rq, const struct tm_sched_result *res,
                          const int32_t *job_of)
{
    for (size_t k = 0; rq->on && k < res->nreclaims && !p->err; k++)
        emit_reclaim(p, rq, &res->reclaims[k], &p->in->snap->jobs[job_of[res->reclaims[k].job]]);
}

/* One node and flavor of the view. */
static cJSON *view_item(const struct rc_quota *rq, int32_t n, int32_t f)
{
    const struct tm_quota *q = rq->q;
    cJSON *o = cJSON_CreateObject();
    int32_t parent = tm_quota_parent(q, n);

    if (!o)
        return NULL;
    cJSON_AddStringToObject(o, "team", tm_quota_name(q, n));
    cJSON_AddStringToObject(o, "flavor", tm_quota_flavor_name(q, f));
    if (parent >= 0)
        cJSON_AddStringToObject(o, "org", tm_quota_name(q, parent));
    cJSON_AddBoolToObject(o, "is_org", tm_quota_is_org(q, n));
    cJSON_AddNumberToObject(o, "quota", (double)tm_quota_guaranteed(q, n, f));
    cJSON_AddNumberToObject(o, "used", (double)tm_quota_used(rq->usage, n, f));
    cJSON_AddNumberToObject(o, "borrowed", (double)tm_quota_borrowing(rq->usage, n, f));
    cJSON_AddNumberToObject(o, "lent", (double)tm_quota_lent(rq->usage, n, f));
    return o;
}

/* The view: per node and flavor that has a quota or runs work. */
static char *view_json(const struct pass *p, const struct rc_quota *rq)
{
    cJSON *root = cJSON_CreateObject(), *items;
    char over[256] = "";
    char *out = NULL;

    if (!root)
        return NULL;
    cJSON_AddNumberToObject(root, "computed_ms", (double)p->in->now_ms);
    if (rq->error[0])
        cJSON_AddStringToObject(root, "error", rq->error);
    if (rq->on)
        tm_quota_overcommit_say(rq->q, over, sizeof(over));
    cJSON_AddStringToObject(root, "overcommit", over);
    items = cJSON_AddArrayToObject(root, "items");
    for (size_t n = 0; rq->on && items && n < tm_quota_nnodes(rq->q); n++)
        for (size_t f = 0; f < tm_quota_nflavors(rq->q); f++) {
            if (!flavor_named(p->in->snap, rq->q, (int32_t)f) ||
                (tm_quota_subtree(rq->q, (int32_t)n, (int32_t)f) == 0 &&
                 tm_quota_used(rq->usage, (int32_t)n, (int32_t)f) == 0))
                continue;
            cJSON *o = view_item(rq, (int32_t)n, (int32_t)f);
            if (o)
                cJSON_AddItemToArray(items, o);
        }
    out = cJSON_PrintUnformatted(root);
    cJSON_Delete(root);
    return out;
}

void tm_rc_quota_end(struct pass *p, struct rc_quota *rq)
{
    if ((rq->on || rq->error[0]) && !p->err) {
        p->plan.quota_view = view_json(p, rq);
        if (!p->plan.quota_view)
            p->err = TM_ENOMEM;
    }
    tm_quota_usage_free(rq->usage);
    tm_quota_free(rq->q);
    free(rq->pool_flavor);
    free(rq->jobs);
    free(rq->answers);
    free(rq->running);
    free(rq->run_snap);
    memset(rq, 0, sizeof(*rq));
}
