/*
 * controller/sched/quota_usage.c: one pass's usage of the quotas and the
 * flows of lending and borrowing it implies, level by level.
 */
#include <stdlib.h>

#include "core/err.h"
#include "controller/sched/quota_internal.h"

static bool job_ok(const struct tm_quota *q, const struct tm_quota_job *j)
{
    return j->team >= 0 && (size_t)j->team < q->nnodes && !q->is_org[j->team] &&
           j->flavor >= 0 && (size_t)j->flavor < q->nflavors && j->gpus >= 0;
}

void tm_quota_usage_free(struct tm_quota_usage *u)
{
    if (!u)
        return;
    free(u->used);
    free(u->queued);
    free(u->reclaimed);
    free(u->stopped);
    free(u->over);
    free(u->spare);
    free(u->acc);
    free(u->rows);
    free(u);
}

/* Add gpus to the team's and its org's usage. */
static void add_used(struct tm_quota_usage *u, int32_t team, int32_t flavor, int64_t gpus)
{
    const struct tm_quota *q = u->q;

    u->used[quota_at(q, team, flavor)] += gpus;
    if (q->parent[team] >= 0)
        u->used[quota_at(q, q->parent[team], flavor)] += gpus;
}

int tm_quota_usage_new(const struct tm_quota *q, const struct tm_quota_job *running,
                       size_t nrunning, const struct tm_quota_job *queued, size_t nqueued,
                       struct tm_quota_usage **ret)
{
    size_t cells = q->nnodes * q->nflavors + 1;
    struct tm_quota_usage *u = calloc(1, sizeof(*u));

    if (!u)
        return TM_ENOMEM;
    u->q = q;
    u->nrunning = nrunning;
    u->used = calloc(cells, sizeof(*u->used));
    u->queued = calloc(cells, sizeof(*u->queued));
    u->reclaimed = calloc(cells, sizeof(*u->reclaimed));
    u->stopped = calloc(nrunning + 1, sizeof(*u->stopped));
    u->over = calloc(q->nnodes, sizeof(*u->over));
    u->spare = calloc(q->nnodes, sizeof(*u->spare));
    u->acc = calloc(q->nnodes, sizeof(*u->acc));
    u->rows = calloc(2 * (q->nnodes + 1), sizeof(*u->rows));
    if (!u->used || !u->queued || !u->reclaimed || !u->stopped || !u->over || !u->spare ||
        !u->acc || !u->rows) {
        tm_quota_usage_free(u);
        return TM_ENOMEM;
    }
    for (size_t i = 0; i < nrunning; i++) {
        if (!job_ok(q, &running[i])) {
            tm_quota_usage_free(u);
            return TM_EINVAL;
        }
        add_used(u, running[i].team, running[i].flavor, running[i].gpus);
    }
    for (size_t i = 0; i < nqueued; i++) {
        if (!job_ok(q, &queued[i])) {
            tm_quota_usage_free(u);
            return TM_EINVAL;
        }
        u->queued[quota_at(q, queued[i].team, queued[i].flavor)] += queued[i].gpus;
    }
    *ret = u;
    return 0;
}

int64_t tm_quota_used(const struct tm_quota_usage *u, int32_t node, int32_t flavor)
{
    return u->used[quota_at(u->q, node, flavor)];
}

int64_t tm_quota_borrowing(const struct tm_quota_usage *u, int32_t node, int32_t flavor)
{
    size_t c = quota_at(u->q, node, flavor);
    int64_t d = u->used[c] - u->q->subtree[c];

    return d > 0 ? d : 0;
}

/* A node's idle quota offered to the level above. */
static int64_t offer(const struct tm_quota_usage *u, size_t c, int64_t delta, bool lend)
{
    const struct tm_quota *q = u->q;
    int64_t idle = q->subtree[c] - u->used[c] - delta;

    if (lend) {
        if (u->reclaimed[c])
            return 0;
        idle -= u->queued[c];
    }
    if (idle <= 0)
        return 0;
    return idle < q->lend_limit[c] ? idle : q->lend_limit[c];
}

void quota_flow(const struct tm_quota_usage *u, int32_t flavor, int32_t team, int64_t delta,
                bool lend, struct quota_flow *fl)
{
    const struct tm_quota *q = u->q;
    size_t nf = q->nflavors;
    int64_t demand = 0, supply = q->free_pool[flavor];

    for (size_t n = 0; n < q->nnodes; n++) {
        fl->over[n] = 0;
        fl->spare[n] = 0;
    }
    /* Teams first: over their quota, or idle to offer; the tentative job
     * counts in its team.  An org sums its teams' in its own two slots. */
    for (size_t n = 0; n < q->nnodes; n++) {
        size_t c = n * nf + (size_t)flavor;
        int64_t add = (int32_t)n == team ? delta : 0;
        int64_t d = u->used[c] + add - q->subtree[c];
        int64_t over, spare;

        if (q->is_org[n])
            continue;
        over = d > 0 ? d : 0;
        spare = offer(u, c, add, lend);
        if (q->parent[n] >= 0) {
            fl->over[q->parent[n]] += over;
            fl->spare[q->parent[n]] += spare;
        }
        fl->over[n] += over;
        fl->spare[n] += spare;
    }
    /* Orgs: their teams borrow from the org's own quota and each other
     * first; the rest is the org's borrowing, or its offer upwards. */
    for (size_t o = 0; o < q->nnodes; o++) {
        if (!q->is_org[o])
            continue;
        size_t c = o * nf + (size_t)flavor;
        int64_t in_demand = fl->over[o], in_supply = q->own[c] + fl->spare[o];

        fl->over[o] = 0;
        fl->spare[o] = 0;
        if (in_demand > in_supply) {
            fl->over[o] = in_demand - in_supply;
        } else {
            int64_t s = in_supply - in_demand;
            int64_t lim = q->lend_limit[c];

            if (lend && u->reclaimed[c])
                s = 0;
            fl->spare[o] = s < lim ? s : lim;
        }
    }
    for (size_t n = 0; n < q->nnodes; n++)
        if (q->parent[n] < 0) {
            demand += fl->over[n];
            supply += fl->spare[n];
        }
    fl->shortfall = demand > supply ? demand - supply : 0;
}

int64_t quota_excess(const struct tm_quota *q, int32_t flavor, int32_t team,
                     const struct quota_flow *fl)
{
    int64_t x = fl->shortfall;

    for (int32_t n = team; n >= 0; n = q->parent[n]) {
        int64_t lim = q->borrow_limit[quota_at(q, n, flavor)];

        if (fl->over[n] > lim)
            x += fl->over[n] - lim;
    }
    return x;
}
