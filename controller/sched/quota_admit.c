/*
 * controller/sched/quota_admit.c: may a queued job start now, within its
 * team's quota, on others' idle quota (and whose), or not yet (and why);
 * and what each team lends now, in the same order of lenders.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/err.h"
#include "controller/sched/quota_internal.h"

const char *tm_quota_verdict_name(enum tm_quota_verdict v)
{
    switch (v) {
    case TM_QUOTA_WITHIN: return "within quota";
    case TM_QUOTA_BORROW: return "borrows";
    case TM_QUOTA_RECLAIM: return "reclaims";
    case TM_QUOTA_WAIT: return "waits on quota";
    }
    return "unknown";
}

static int offer_cmp(const void *a, const void *b)
{
    const struct offer_row *x = a, *y = b;

    if (x->gpus != y->gpus)
        return x->gpus > y->gpus ? -1 : 1;
    return x->node < y->node ? -1 : x->node > y->node;
}

static void add_lender(struct tm_quota_answer *ans, int32_t node, int64_t gpus)
{
    if (gpus <= 0)
        return;
    if (ans->nlenders == TM_QUOTA_LENDERS_MAX) {
        ans->lenders[TM_QUOTA_LENDERS_MAX - 1].gpus += gpus;
        return;
    }
    ans->lenders[ans->nlenders].node = node;
    ans->lenders[ans->nlenders].gpus = gpus;
    ans->nlenders++;
}

/* Who lends: the flows, the flavor, rows to sort the offers in (the
 * second half for an org's), and where what each lends goes: the answer's
 * lenders, or a sum per node (acc). */
struct lend_ctx {
    const struct tm_quota *q;
    const struct quota_flow *fl;
    int32_t flavor;
    struct offer_row *rows;
    struct tm_quota_answer *ans;
    int64_t *acc;
};

static void lends(const struct lend_ctx *lc, int32_t node, int64_t gpus)
{
    if (lc->ans)
        add_lender(lc->ans, node, gpus);
    else if (node >= 0 && gpus > 0)
        lc->acc[node] += gpus;
}

static int64_t take_offers(const struct lend_ctx *lc, struct offer_row *rows, size_t n,
                           int64_t consumed, int64_t need, bool expand);

/* The rows of one level: the base (an org's own quota, or the free pool
 * for org -1) then the offers of its members but `skip_node`; *demand:
 * what its members borrow. */
static size_t level_rows(const struct lend_ctx *lc, int32_t org, int32_t skip_node,
                         struct offer_row *rows, int64_t *demand)
{
    const struct tm_quota *q = lc->q;
    size_t n = 0;

    rows[n++] = (struct offer_row){org, org >= 0 ? q->own[quota_at(q, org, lc->flavor)]
                                                 : q->free_pool[lc->flavor]};
    *demand = 0;
    for (size_t c = 0; c < q->nnodes; c++)
        if (q->parent[c] == org) {
            *demand += lc->fl->over[c];
            if ((int32_t)c != skip_node)
                rows[n++] = (struct offer_row){(int32_t)c, lc->fl->spare[c]};
        }
    return n;
}

/* An org's offer, g GPUs of it after `skip` taken by others, named by
 * whose quota it is: the org's own first, then its teams' idle quota, the
 * part its teams borrow from each other skipped. */
static void lend_from_org(const struct lend_ctx *lc, int32_t org, int64_t skip, int64_t g)
{
    struct offer_row *rows = lc->rows + lc->q->nnodes + 1;
    int64_t demand;
    size_t n = level_rows(lc, org, -1, rows, &demand);

    /* What the teams' rows do not cover stays the org's. */
    lends(lc, org, take_offers(lc, rows, n, demand + skip, g, false));
}

/* The offers of one level, largest first, the base (org's own quota or
 * the free pool) before them: the borrowing already there takes them in
 * that order, then `need`.  expand: an org's offer is named by its teams
 * (lend_from_org()).  Returns what is left of need. */
static int64_t take_offers(const struct lend_ctx *lc, struct offer_row *rows, size_t n,
                           int64_t consumed, int64_t need, bool expand)
{
    if (n > 1)
        qsort(rows + 1, n - 1, sizeof(*rows), offer_cmp);
    for (size_t i = 0; i < n && need > 0; i++) {
        int64_t g = rows[i].gpus;
        int64_t skip = consumed < g ? consumed : g;

        consumed -= skip;
        g -= skip;
        if (g > need)
            g = need;
        if (expand && rows[i].node >= 0 && lc->q->is_org[rows[i].node])
            lend_from_org(lc, rows[i].node, skip, g);
        else
            lends(lc, rows[i].node, g);
        need -= g;
    }
    return need;
}

/* Name who lends the job's `need` GPUs: inside its org first, then the
 * fleet.  fl: the lend-mode flows before the job. */
static void attribute(const struct tm_quota_usage *u, const struct quota_flow *fl, int32_t team,
                      int32_t flavor, int64_t need, struct tm_quota_answer *ans)
{
    const struct tm_quota *q = u->q;
    struct lend_ctx lc = {q, fl, flavor, u->rows, ans, NULL};
    int32_t org = q->parent[team], top = org >= 0 ? org : team;
    int64_t demand;
    size_t n;

    if (org >= 0) {
        n = level_rows(&lc, org, team, lc.rows, &demand);
        need = take_offers(&lc, lc.rows, n, demand, need, false);
    }
    n = level_rows(&lc, -1, top, lc.rows, &demand);
    take_offers(&lc, lc.rows, n, demand, need, true);
}

int64_t tm_quota_lent(const struct tm_quota_usage *u, int32_t node, int32_t flavor)
{
    const struct tm_quota *q = u->q;
    struct quota_flow fl = {.over = u->over, .spare = u->spare};
    struct lend_ctx lc = {q, &fl, flavor, u->rows, NULL, u->acc};
    int64_t demand;
    size_t n;

    quota_flow(u, flavor, -1, 0, false, &fl);
    memset(u->acc, 0, q->nnodes * sizeof(*u->acc));
    /* The borrowing there is now, level by level, taken from the offers
     * in the order a new borrower's is (attribute()). */
    for (int32_t o = 0; (size_t)o < q->nnodes; o++)
        if (q->is_org[o]) {
            n = level_rows(&lc, o, -1, lc.rows, &demand);
            take_offers(&lc, lc.rows, n, 0, demand, false);
        }
    n = level_rows(&lc, -1, -1, lc.rows, &demand);
    if (q->is_org[node]) {
        /* An org lends outside what the fleet's level takes of its offer. */
        if (n > 1)
            qsort(lc.rows + 1, n - 1, sizeof(*lc.rows), offer_cmp);
        for (size_t i = 0; i < n && demand > 0; i++) {
            int64_t g = lc.rows[i].gpus < demand ? lc.rows[i].gpus : demand;

            if (lc.rows[i].node == node)
                return g;
            demand -= g;
        }
        return 0;
    }
    take_offers(&lc, lc.rows, n, 0, demand, true);
    return u->acc[node];
}

static void say_lenders(const struct tm_quota *q, const struct tm_quota_job *job,
                        struct tm_quota_answer *ans)
{
    size_t len;

    snprintf(ans->why, sizeof(ans->why), "borrows %lld GPUs of %s above team %s's quota of %lld:",
             (long long)ans->borrowed_gpus, q->flavor_names[job->flavor], q->names[job->team],
             (long long)q->subtree[quota_at(q, job->team, job->flavor)]);
    for (size_t i = 0; i < ans->nlenders; i++) {
        len = strlen(ans->why);
        if (ans->lenders[i].node < 0)
            snprintf(ans->why + len, sizeof(ans->why) - len, "%s %lld from the free pool",
                     i ? "," : "", (long long)ans->lenders[i].gpus);
        else
            snprintf(ans->why + len, sizeof(ans->why) - len, "%s %lld from %s %s", i ? "," : "",
                     (long long)ans->lenders[i].gpus, q->is_org[ans->lenders[i].node] ? "org" : "team",
                     q->names[ans->lenders[i].node]);
    }
}

/* Entirely within its team's quota: start it, unless the quota it takes
 * back is lent out now (a reclaim). */
static void admit_within(const struct tm_quota *q, const struct tm_quota_usage *u,
                         const struct tm_quota_job *job, struct tm_quota_answer *ans)
{
    struct quota_flow fl = {.over = u->over, .spare = u->spare};
    size_t c = quota_at(q, job->team, job->flavor);
    int64_t before, after;

    quota_flow(u, job->flavor, job->team, 0, false, &fl);
    before = quota_excess(q, job->flavor, job->team, &fl);
    quota_flow(u, job->flavor, job->team, job->gpus, false, &fl);
    after = quota_excess(q, job->flavor, job->team, &fl);
    if (after <= before) {
        ans->verdict = TM_QUOTA_WITHIN;
        snprintf(ans->why, sizeof(ans->why), "within team %s's quota of %s: %lld of %lld GPUs",
                 q->names[job->team], q->flavor_names[job->flavor],
                 (long long)(u->used[c] + job->gpus), (long long)q->subtree[c]);
        return;
    }
    ans->verdict = TM_QUOTA_RECLAIM;
    snprintf(ans->why, sizeof(ans->why),
             "waits on quota: team %s uses %lld of its %lld GPUs of %s; the rest is lent: reclaim",
             q->names[job->team], (long long)u->used[c], (long long)q->subtree[c],
             q->flavor_names[job->flavor]);
}

/* Some or all of it above its team's quota: borrow within the limits, from
 * idle quota its owners do not want. */
static int admit_borrow(const struct tm_quota *q, const struct tm_quota_usage *u,
                        const struct tm_quota_job *job, struct tm_quota_answer *ans)
{
    struct quota_flow fl = {.over = u->over, .spare = u->spare};
    int32_t t = job->team, f = job->flavor, org = q->parent[t];
    size_t c = quota_at(q, t, f);
    const char *fn = q->flavor_names[f];
    int n = snprintf(ans->why, sizeof(ans->why), "waits on quota: team %s uses %lld of its %lld GPUs of %s; ",
                     q->names[t], (long long)u->used[c], (long long)q->subtree[c], fn);
    char *tail = ans->why + n;
    size_t room = sizeof(ans->why) - (size_t)n;

    ans->verdict = TM_QUOTA_WAIT;
    if (!job->preemptible && !job->checkpointable && !q->np_borrow[f]) {
        snprintf(tail, room, "work neither preemptible nor checkpointable may not borrow %s", fn);
        return 0;
    }
    if (u->used[c] + job->gpus - q->subtree[c] > q->borrow_limit[c]) {
        snprintf(tail, room, "borrowing limit %lld reached", (long long)q->borrow_limit[c]);
        return 0;
    }
    quota_flow(u, f, t, job->gpus, true, &fl);
    if (org >= 0 && fl.over[org] > q->borrow_limit[quota_at(q, org, f)]) {
        snprintf(tail, room, "org %s's borrowing limit %lld reached", q->names[org],
                 (long long)q->borrow_limit[quota_at(q, org, f)]);
        return 0;
    }
    if (fl.shortfall > 0) {
        snprintf(tail, room, "no idle quota of %s to borrow", fn);
        return 0;
    }
    quota_flow(u, f, t, 0, true, &fl);
    ans->verdict = TM_QUOTA_BORROW;
    attribute(u, &fl, t, f, ans->borrowed_gpus, ans);
    say_lenders(q, job, ans);
    return 0;
}

int tm_quota_admit(const struct tm_quota *q, const struct tm_quota_usage *u,
                   const struct tm_quota_job *job, struct tm_quota_answer *ans)
{
    int64_t over_before, over_after, s, used;

    if (job->team < 0 || (size_t)job->team >= q->nnodes || q->is_org[job->team] ||
        job->flavor < 0 || (size_t)job->flavor >= q->nflavors || job->gpus < 0)
        return TM_EINVAL;
    memset(ans, 0, sizeof(*ans));
    s = q->subtree[quota_at(q, job->team, job->flavor)];
    used = u->used[quota_at(q, job->team, job->flavor)];
    over_before = used > s ? used - s : 0;
    over_after = used + job->gpus > s ? used + job->gpus - s : 0;
    ans->borrowed_gpus = over_after - over_before;
    if (ans->borrowed_gpus == 0) {
        admit_within(q, u, job, ans);
        return 0;
    }
    return admit_borrow(q, u, job, ans);
}

void tm_quota_take(const struct tm_quota *q, struct tm_quota_usage *u,
                   const struct tm_quota_job *job, const struct tm_quota_answer *ans)
{
    size_t c = quota_at(q, job->team, job->flavor);

    (void)ans;
    u->used[c] += job->gpus;
    if (q->parent[job->team] >= 0)
        u->used[quota_at(q, q->parent[job->team], job->flavor)] += job->gpus;
    u->queued[c] -= job->gpus < u->queued[c] ? job->gpus : u->queued[c];
}
