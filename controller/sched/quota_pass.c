/*
 * controller/sched/quota_pass.c: the team quotas of quota.h inside a
 * scheduling pass (struct tm_sched_quota): skip a job that waits on quota,
 * count what is placed, reclaim for a job within its quota that finds no
 * room.  The pass's order is kept: quotas only say no, or stop borrowers.
 */
#include <stdlib.h>
#include <string.h>

#include "controller/sched/scheduler.h"

#include "controller/sched/internal.h"
#include "core/err.h"

int sched_quota_init(struct ctx *c)
{
    const struct tm_sched_quota *qv = c->in->quota;

    if (!qv->quota || !qv->usage || !qv->answers || (c->in->njobs && !qv->jobs) ||
        (qv->nrunning && !qv->running) || qv->disruption_budget < 0)
        return TM_EINVAL;
    c->quota_budget = qv->disruption_budget;
    if (qv->disruption_budget > 0) {
        c->r.reclaims = calloc((size_t)qv->disruption_budget, sizeof(*c->r.reclaims));
        if (!c->r.reclaims)
            return TM_ENOMEM;
    }
    return 0;
}

static bool under_quota(const struct tm_sched_quota *qv, int32_t j)
{
    return qv->jobs[j].flavor >= 0;
}

int sched_quota_admit(struct ctx *c, int32_t j)
{
    const struct tm_sched_quota *qv = c->in->quota;
    struct tm_quota_answer *ans = &qv->answers[j];
    int r;

    if (!under_quota(qv, j)) {
        memset(ans, 0, sizeof(*ans));
        ans->verdict = TM_QUOTA_WITHIN;
        return 0;
    }
    r = tm_quota_admit(qv->quota, qv->usage, &qv->jobs[j], ans);
    if (r < 0)
        return r;
    if (ans->verdict != TM_QUOTA_WAIT)
        return 0;
    sched_note(c, j, TM_SCHED_WAIT_QUOTA, -1, 0, ans->why);
    return 1;
}

void sched_quota_placed(struct ctx *c, int32_t j)
{
    const struct tm_sched_quota *qv = c->in->quota;

    if (under_quota(qv, j))
        tm_quota_take(qv->quota, qv->usage, &qv->jobs[j], &qv->answers[j]);
}

int sched_quota_reclaim(struct ctx *c, int32_t j)
{
    const struct tm_sched_quota *qv = c->in->quota;
    struct tm_quota_answer *ans = &qv->answers[j];
    struct tm_quota_victim *v;
    bool complete = false;
    int n;

    if (!under_quota(qv, j) || ans->verdict != TM_QUOTA_RECLAIM)
        return 0;
    v = malloc(((size_t)c->quota_budget + 1) * sizeof(*v));
    if (!v)
        return TM_ENOMEM;
    n = tm_quota_reclaim(qv->quota, qv->usage, qv->running, qv->nrunning, &qv->jobs[j],
                         &c->quota_budget, v, &complete, ans->why, sizeof(ans->why));
    for (int i = 0; i < n; i++) {
        c->r.reclaims[c->r.nreclaims].job = j;
        c->r.reclaims[c->r.nreclaims++].victim = v[i];
    }
    free(v);
    if (n < 0)
        return n;
    /* The freed quota is held for this job until the victims' GPUs are
     * free; its queued demand holds it in the next passes. */
    if (n > 0 && complete)
        tm_quota_take(qv->quota, qv->usage, &qv->jobs[j], ans);
    sched_note(c, j, TM_SCHED_WAIT_QUOTA, -1, 0, ans->why);
    return 1;
}
