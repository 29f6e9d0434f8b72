/*
 * controller/sched/quota_reclaim.c: which borrowed jobs to stop so that a
 * team gets its quota back.
 *
 * The candidates are the running jobs admitted as borrowed whose team
 * still runs above its quota, of the job's flavor, of other teams, and
 * preemptible or checkpointable: work that is neither may borrow only
 * where its pool allows, and is then never stopped (the lender waits).
 * Checkpointable jobs go first (checkpointed, nothing is redone), then
 * the preemptible ones by least GPU-time redone, then the larger first
 * (fewer stops), then by index.  A candidate is taken only if it lessens
 * what blocks the job (quota_excess()), until nothing does or the pass's
 * disruption budget is spent.  The reclaimed team's idle quota is then
 * lent to nobody for the rest of the pass, and its queued demand keeps it
 * unlent in the next ones, so a job reclaimed for a team is not placed
 * back on that team's quota: no reclaim cycle.
 */
#include <stdio.h>
#include <stdlib.h>

#include "core/err.h"
#include "controller/sched/quota_internal.h"

struct cand {
    int32_t i;
    bool ckpt;
    int64_t redo;
    int64_t gpus;
};

static int cand_cmp(const void *a, const void *b)
{
    const struct cand *x = a, *y = b;

    if (x->ckpt != y->ckpt)
        return x->ckpt ? -1 : 1;
    if (x->redo != y->redo)
        return x->redo < y->redo ? -1 : 1;
    if (x->gpus != y->gpus)
        return x->gpus > y->gpus ? -1 : 1;
    return x->i < y->i ? -1 : x->i > y->i;
}

static void add_used(struct tm_quota_usage *u, int32_t team, int32_t flavor, int64_t gpus)
{
    const struct tm_quota *q = u->q;

    u->used[quota_at(q, team, flavor)] += gpus;
    if (q->parent[team] >= 0)
        u->used[quota_at(q, q->parent[team], flavor)] += gpus;
}

static int64_t excess_now(struct tm_quota_usage *u, const struct tm_quota_job *job)
{
    struct quota_flow fl = {.over = u->over, .spare = u->spare};

    quota_flow(u, job->flavor, job->team, job->gpus, false, &fl);
    return quota_excess(u->q, job->flavor, job->team, &fl);
}

/* Nothing to stop: say what holds the quota. */
static void say_none(const struct tm_quota *q, const struct tm_quota_usage *u,
                     const struct tm_quota_job *running, const struct tm_quota_job *job,
                     int32_t budget, char *why, size_t whylen)
{
    int64_t fixed = 0;

    for (size_t i = 0; i < u->nrunning; i++) {
        const struct tm_quota_job *r = &running[i];

        if (!u->stopped[i] && r->borrowed && r->flavor == job->flavor && r->team != job->team &&
            !r->preemptible && !r->checkpointable)
            fixed += r->gpus;
    }
    if (budget <= 0)
        snprintf(why, whylen, "waits on quota: team %s's quota of %s is lent; the disruption budget "
                 "of this pass is spent", q->names[job->team], q->flavor_names[job->flavor]);
    else if (fixed > 0)
        snprintf(why, whylen, "waits on quota: team %s's quota of %s is lent to work that is never "
                 "reclaimed (%lld GPUs neither preemptible nor checkpointable)", q->names[job->team],
                 q->flavor_names[job->flavor], (long long)fixed);
    else
        snprintf(why, whylen, "waits on quota: team %s's quota of %s is lent and no borrowed job "
                 "can be stopped for it", q->names[job->team], q->flavor_names[job->flavor]);
}

int tm_quota_reclaim(const struct tm_quota *q, struct tm_quota_usage *u,
                     const struct tm_quota_job *running, size_t nrunning,
                     const struct tm_quota_job *job, int32_t *budget,
                     struct tm_quota_victim *out, bool *complete, char *why, size_t whylen)
{
    struct cand *cands;
    size_t n = 0;
    int nout = 0;
    int64_t x;

    if (nrunning != u->nrunning || job->team < 0 || (size_t)job->team >= q->nnodes ||
        job->flavor < 0 || (size_t)job->flavor >= q->nflavors)
        return TM_EINVAL;
    *complete = false;
    if (why && whylen)
        why[0] = '\0';
    cands = malloc((nrunning + 1) * sizeof(*cands));
    if (!cands)
        return TM_ENOMEM;
    for (size_t i = 0; i < nrunning; i++) {
        const struct tm_quota_job *r = &running[i];

        if (u->stopped[i] || !r->borrowed || r->flavor != job->flavor || r->team == job->team ||
            (!r->preemptible && !r->checkpointable) || r->gpus <= 0)
            continue;
        cands[n++] = (struct cand){(int32_t)i, r->checkpointable, r->redo_gpu_ms, r->gpus};
    }
    qsort(cands, n, sizeof(*cands), cand_cmp);
    x = excess_now(u, job);
    for (size_t k = 0; k < n && x > 0 && *budget > 0; k++) {
        const struct tm_quota_job *r = &running[cands[k].i];
        int64_t y;

        /* Only a team still borrowing gives quota back. */
        if (tm_quota_borrowing(u, r->team, r->flavor) <= 0)
            continue;
        add_used(u, r->team, r->flavor, -r->gpus);
        y = excess_now(u, job);
        if (y >= x) {
            add_used(u, r->team, r->flavor, r->gpus);
            continue;
        }
        x = y;
        u->stopped[cands[k].i] = true;
        out[nout].running = cands[k].i;
        out[nout].for_team = job->team;
        out[nout].checkpoint = r->checkpointable;
        out[nout].redo_gpu_ms = r->checkpointable ? 0 : r->redo_gpu_ms;
        nout++;
        (*budget)--;
    }
    free(cands);
    *complete = x <= 0;
    if (nout > 0) {
        u->reclaimed[quota_at(q, job->team, job->flavor)] = true;
        if (why && whylen)
            snprintf(why, whylen, "reclaims %d borrowed job%s for team %s's quota of %s%s", nout,
                     nout == 1 ? "" : "s", q->names[job->team], q->flavor_names[job->flavor],
                     *complete ? "" : "; more at the next passes (disruption budget)");
    } else if (!*complete && why && whylen) {
        say_none(q, u, running, job, *budget, why, whylen);
    }
    return nout;
}
