/*
 * controller/replay/replay_backfill.c: the time replay's EASY backfill
 * pass, incremental (see replay_internal.h): each pass is handed only the
 * part of the queue that can change its decisions (the prefix up to the
 * first blocked job and, per request shape, the first jobs that could fit
 * the free capacity or the reservation's gaps), and a pass proven to
 * decide nothing is skipped (bf_unchanged()).  test_replay_incremental
 * compares it with the whole-queue pass, decision for decision.
 */
#include "controller/replay/replay_internal.h"

#include <stdlib.h>
#include <string.h>

#include "core/err.h"

/* How many jobs of shape sh node i's free capacity could hold at once:
 * an upper bound on how many a pass can start there (a share counts per
 * GPU, whole GPUs per wholly free GPU, CPU and memory per node). */
static int32_t shape_fit(const struct sim *s, size_t i, const struct shape *sh)
{
    const struct tm_sched_node *n = &s->nodes[i];
    const int16_t *used = &s->gpu_used[i * TM_NODE_GPUS_MAX];
    int64_t k = 0;

    if (n->gpus <= 0 || (sh->mask && !(sh->mask >> n->model & 1)))
        return 0;
    for (int g = 0; g < n->gpus; g++) {
        int32_t f = MILLI - used[g];
        if (sh->gpus > 0)
            k += f == MILLI;
        else if (f > 0)
            k += f / sh->milli;
    }
    if (sh->gpus > 0)
        k /= sh->gpus;
    if (sh->cpu > 0 && s->node_cpu_free[i] / sh->cpu < k)
        k = s->node_cpu_free[i] / sh->cpu;
    if (sh->mem > 0 && s->node_mem_free[i] / sh->mem < k)
        k = s->node_mem_free[i] / sh->mem;
    return k > 0 ? (int32_t)k : 0;
}

static void ufit_node(struct sim *s, size_t i)
{
    for (size_t sh = 0; sh < s->nshapes; sh++) {
        int32_t *u = &s->ufit[sh * s->nnodes + i];
        int32_t v = shape_fit(s, i, &s->shapes[sh]);
        s->ucap[sh] += v - *u;
        *u = v;
    }
}

static void ufit_refresh(struct sim *s)
{
    for (size_t k = 0; k < s->nudirty; k++) {
        ufit_node(s, (size_t)s->udlist[k]);
        s->udirty[s->udlist[k]] = 0;
    }
    s->nudirty = 0;
}

/* Above this many (shape, node) counts the index is not kept and backfill
 * passes the whole queue. */
#define BF_UFIT_MAX (64u << 20)

/* The indexes replay_pass_backfill() reads; after replay_shapes_build() and arr.
 * Returns 0 or TM_ENOMEM; leaves s->bf false when not used. */
int replay_bf_init(struct sim *s, const size_t *arr)
{
    const struct tm_replay_config *cfg = s->cfg;
    int32_t *g;
    int r;

    if (cfg->policy != TM_POLICY_BACKFILL || cfg->full_pass || cfg->params.align_ends ||
        s->nshapes * s->nnodes > BF_UFIT_MAX)
        return 0;
    s->rank = malloc((s->njobs + 1) * sizeof(*s->rank));
    g = calloc(s->njobs + 1, sizeof(*g));
    s->ufit = calloc(s->nshapes * s->nnodes + 1, sizeof(*s->ufit));
    s->ucap = calloc(s->nshapes + 1, sizeof(*s->ucap));
    s->udirty = calloc(s->nnodes + 1, sizeof(*s->udirty));
    s->udlist = malloc((s->nnodes + 1) * sizeof(*s->udlist));
    s->bf_mark = calloc(s->njobs + 1, sizeof(*s->bf_mark));
    if (!s->rank || !g || !s->ufit || !s->ucap || !s->udirty || !s->udlist || !s->bf_mark) {
        free(g);
        return TM_ENOMEM;
    }
    r = 0;
    for (size_t k = 0; k < s->njobs; k++) {
        const struct rjob *rj = &s->jobs[arr[k]];
        s->rank[arr[k]] = (int32_t)k;
        g[k] = rj->shape * 2 + (rj->tj->preemptible ? 1 : 0);
    }
    if (r == 0)
        r = tm_seqindex_init(&s->qgrp, g, s->njobs, s->nshapes * 2);
    if (r == 0)
        r = replay_rl_init(&s->lall, s->njobs, 1);
    if (r == 0)
        r = replay_rl_init(&s->lgrp, s->njobs, s->nshapes * 2);
    free(g);
    if (r < 0)
        return r;
    for (size_t i = 0; i < s->nnodes; i++)
        ufit_node(s, i);
    s->bf_gjob = -1;
    s->bf = true;
    return 0;
}

void replay_bf_release(struct sim *s)
{
    free(s->rank);
    free(s->ufit);
    free(s->ucap);
    free(s->udirty);
    free(s->udlist);
    free(s->bf_mark);
    free(s->bq);
    free(s->bqpos);
    replay_rl_release(&s->lall);
    replay_rl_release(&s->lgrp);
    tm_seqindex_release(&s->qgrp);
}

/* Append the queued job at arrival rank p to the pass's input. */
static int bq_add(struct sim *s, size_t *n, size_t p)
{
    const struct rjob *rj = &s->jobs[s->arr[p]];

    if (replay_bq_room(s, *n) < 0)
        return TM_ENOMEM;
    s->bq[*n] = s->q[rj->qpos];
    s->bqpos[(*n)++] = rj->qpos;
    return 0;
}

/*
 * backfill (EASY), incremental: the same placements as a pass over the
 * whole queue, from a pass over a few of its jobs.
 *
 * EASY runs in submit order: first fit until the first blocked job, which
 * gets the one reservation (on node R, at `start`); after it every job is
 * placed if it fits without delaying the reservation, and one that is not
 * placed changes nothing.  So a pass over the prefix up to the reserved
 * job and a subset of the jobs after it that holds every job the full pass
 * would place decides the same, placement for placement.  The subset, per
 * request shape X and preemptibility (a group), from the free capacity
 * before the pass, which only shrinks during it:
 *
 *  - at most U = sum over nodes of ufit[X] jobs of X can start, so the
 *    ones that start before the group's first failure are among its
 *    first U;
 *  - after a job of X fails, no node but R has room for X, and room on R
 *    is left for X only to a gap filler (estimate <= start - now), so
 *    only the first ufit[X][R] gap fillers of the group after it can
 *    still start: those after the first U are the first ufit[X][R] gap
 *    fillers after them.  (A preemptible reservation does not hold
 *    non-preemptible work off R: for such a group a failure ends it.)
 *
 * The prefix is found by a first pass over the first FIFO_PREFIX queued
 * jobs (doubling until one is blocked and reserved for), which also gives
 * R and start; the second pass, over prefix and subset, is applied.  Each
 * event costs two passes over O(prefix + shapes + jobs started) jobs plus
 * the nodes and running jobs, instead of one over the queue.
 */
/* The subset (above) after the prefix ending at arrival rank `last`, for
 * a reservation on `node` at `start` (rpre: for a preemptible job),
 * appended to the pass's input. */
static int bf_subset(struct sim *s, size_t *n, size_t last, int64_t now, int32_t node, int64_t start,
                     bool rpre)
{
    int64_t gap = start - now;
    int rc;

    if (gap > TM_SEQ_MAX - 1)
        gap = TM_SEQ_MAX - 1;
    for (size_t g = 0; g < s->qgrp.ngroups; g++) {
        size_t sh = g / 2;
        int64_t u = s->ucap[sh];
        /* A preemptible reservation never holds non-preemptible work off
         * R: that group's first failure means no room on R either. */
        int32_t ur = rpre && !(g & 1) ? 0 : s->ufit[sh * s->nnodes + (size_t)node];
        int32_t k = -1, p = s->lgrp.head[g];
        if (u == 0 && ur == 0)
            continue;
        /* The first u queued after the prefix: the group's list past the
         * prefix's few members of it. */
        while (p >= 0 && (size_t)p <= last)
            p = s->lgrp.next[p];
        for (int64_t c = 0; p >= 0 && c < u; c++) {
            rc = bq_add(s, n, (size_t)p);
            if (rc < 0)
                return rc;
            p = s->lgrp.next[p];
        }
        /* The gap fillers from there on (none if the list ended), by
         * estimate: the min-tree, walked by slot within the group (a
         * search per step was a tenth of the replay at 250,000 jobs). */
        if (p >= 0)
            k = s->qgrp.slot[p];
        for (int32_t c = 0; k >= 0 && c < ur; c++) {
            k = tm_seqindex_next_slot(&s->qgrp, g, k, gap);
            if (k < 0)
                break;
            rc = bq_add(s, n, (size_t)tm_seqindex_pos(&s->qgrp, g, k++));
            if (rc < 0)
                return rc;
        }
    }
    return 0;
}

/* The first `want` queued jobs in arrival order as the pass's input
 * (*n); *last: the rank of the last, *more: some queued job is left out. */
static int bf_prefix(struct sim *s, size_t want, size_t *n, size_t *last, bool *more)
{
    int rc;

    *n = 0;
    *more = false;
    for (int32_t p = s->lall.head[0]; p >= 0; p = s->lall.next[p]) {
        if (*n == want) {
            *more = true;
            break;
        }
        rc = bq_add(s, n, (size_t)p);
        if (rc < 0)
            return rc;
        *last = (size_t)p;
    }
    return 0;
}

/* Whether pass result r holds its reservation for a job of the prefix
 * (bq[0..nprefix)): then it is EASY's one reservation, made before any
 * job of the subset was looked at. */
static bool bf_reserved_in_prefix(const struct tm_sched_result *r, size_t nprefix)
{
    return r->nreservations > 0 && (size_t)r->reservations[0].job < nprefix;
}

/* Whether bq[nr..n) (a subset just computed) lies within bq[nprefix..nr)
 * (the one a pass was run over); then bq[nr..n) is dropped. */
static bool bf_covered(struct sim *s, size_t nprefix, size_t nr, size_t n)
{
    bool all = true;

    s->bf_gen++;
    for (size_t k = nprefix; k < nr; k++)
        s->bf_mark[s->rank[s->qjob[s->bqpos[k]]]] = s->bf_gen;
    for (size_t k = nr; k < n && all; k++)
        all = s->bf_mark[s->rank[s->qjob[s->bqpos[k]]]] == s->bf_gen;
    return all;
}

/*
 * Whether a pass now would decide nothing, proven without running it: no
 * job ended since the last pass run (at t0), which reserved for job g on
 * node R at S; every job that arrived since fits no node's free capacity
 * now (ucap, kept for the subset); what R releases by S at t0 it still
 * releases by S; and t0's pass started on R nothing that ends by S (nor
 * anything at all if g is preemptible).  Then a full pass now places
 * nothing and reserves the same:
 *
 *  - the free capacity is what t0's pass left, which is at most what any
 *    job saw at its turn then; expected ends only grow with time
 *    (tm_estimate_remaining(): max(start + estimate, 2 now - start,
 *    now + 1 s)), except a job t0 started without an estimate (bf_unknown:
 *    the pass saw it end never), so every node's earliest start for g is
 *    no earlier than at t0, and R's is still S with the same releases: g
 *    is reserved on R at S again;
 *  - a job before g in submit order was placed at t0, or fits nowhere
 *    (it did not then), or found no start (it still finds none); a job
 *    after it that t0's pass left fitted at most on R and was refused
 *    there: R's free room plus what it releases by S is no larger now
 *    (what t0 started there holds past S, the others release as then),
 *    and a gap must now end by S from a later now;
 *  - the arrivals fit nowhere.
 *
 * Skipping them is a good part of a saturated backfill replay's time;
 * test_replay_incremental holds
 * them to the full pass (and fails without the test on R, or without
 * the test on what t0 started there: its soak found both).
 */
static bool bf_unchanged(struct sim *s, int64_t now, size_t narrived)
{
    int32_t r = s->bf_gnode;
    bool pre;

    if (s->bf_ended || s->bf_unknown || s->bf_gjob < 0 || s->jobs[s->bf_gjob].qpos < 0)
        return false;
    for (; s->bf_seen < narrived; s->bf_seen++)
        if (s->ucap[s->jobs[s->arr[s->bf_seen]].shape] > 0)
            return false;
    pre = s->jobs[s->bf_gjob].tj->preemptible;
    /* What t0's pass started on R: a job that leaves the reservation
     * intact was counted as held at S, and one of them that ends by S
     * adds room by S now (R may take more); and a preemptible reservation
     * holds nothing against non-preemptible work (sched_reservation_
     * permits()), so what was started on R may hold past S what S was
     * counted on (R's start moves). */
    for (int32_t a = s->alloc_head[r]; a >= 0; a = s->alloc_next[a])
        if (s->alloc_start[a] == s->bf_t0 &&
            (pre || s->alloc_start[a] + s->alloc_est[a] <= s->bf_gstart))
            return false;
    if (s->cfg->exact_estimates)
        return true; /* ends never move */
    for (int32_t a = s->alloc_head[r]; a >= 0; a = s->alloc_next[a]) {
        int64_t b = s->alloc_start[a], e = s->alloc_est[a], t0 = s->bf_t0;
        /* its end as t0's pass saw it: a job it started by its estimate */
        int64_t e0 = b == t0 ? b + e : t0 + tm_estimate_remaining(e, t0 - b);
        if (e0 <= s->bf_gstart && now + tm_estimate_remaining(e, now - b) > s->bf_gstart)
            return false;
    }
    return true;
}

int replay_pass_backfill(struct sim *s, int64_t now, struct tm_replay_stats *st, size_t narrived)
{
    struct tm_sched_result r = {0};
    size_t want = FIFO_PREFIX, n, nprefix, nr, last = 0;
    struct tm_sched_reservation rv;
    bool blocked, more;
    int rc;

    ufit_refresh(s);
    if (bf_unchanged(s, now, narrived))
        return 0;
    s->bf_ended = false;
    s->bf_unknown = false;
    s->bf_seen = narrived;
    s->bf_t0 = now;
    /* The last pass's reservation, if its job still waits, is most often
     * this pass's too: one pass over the prefix and the subset it gives,
     * kept if the pass reserves the same. */
    if (s->bf_gjob >= 0 && s->jobs[s->bf_gjob].qpos >= 0) {
        rc = bf_prefix(s, want, &n, &last, &more);
        if (rc < 0)
            return rc;
        nprefix = n;
        if (more) {
            rc = bf_subset(s, &n, last, now, s->bf_gnode, s->bf_gstart,
                           s->jobs[s->bf_gjob].tj->preemptible);
            if (rc == 0)
                rc = replay_sched_once(s, now, s->bq, n, &r);
            if (rc < 0)
                return rc;
            if (bf_reserved_in_prefix(&r, nprefix)) {
                rv = r.reservations[0];
                if (s->qjob[s->bqpos[rv.job]] == s->bf_gjob && rv.node == s->bf_gnode &&
                    rv.start_ms == s->bf_gstart)
                    return replay_pass_apply(s, now, st, s->bq, n, s->bqpos, &r, &blocked);
                /* r, over a superset of the prefix, holds the reservation
                 * the prefix alone makes. */
                nr = n;
                goto subset;
            }
            tm_sched_result_release(&r);
        }
    }
    for (;;) {
        rc = bf_prefix(s, want, &n, &last, &more);
        if (rc < 0)
            return rc;
        if (n == 0)
            return 0;
        rc = replay_sched_once(s, now, s->bq, n, &r);
        if (rc < 0)
            return rc;
        if (!more || r.nreservations > 0)
            break;
        tm_sched_result_release(&r);
        want *= 2;
    }
    if (!more) {
        s->bf_gjob = -1;
        return replay_pass_apply(s, now, st, s->bq, n, s->bqpos, &r, &blocked);
    }
    nprefix = n;
    nr = n;
    rv = r.reservations[0];
subset:
    s->bf_gjob = s->qjob[s->bqpos[rv.job]];
    s->bf_gnode = rv.node;
    s->bf_gstart = rv.start_ms;
    rc = bf_subset(s, &n, last, now, rv.node, rv.start_ms, s->bq[rv.job].preemptible);
    if (rc < 0) {
        tm_sched_result_release(&r);
        return rc;
    }
    if (nr > nprefix && bf_covered(s, nprefix, nr, n)) {
        /* r's input held the subset: the jobs beyond it change nothing. */
        n = nr;
    } else if (n > nprefix || nr > nprefix) {
        /* The new subset alone after the prefix. */
        if (nr > nprefix) {
            memmove(s->bq + nprefix, s->bq + nr, (n - nr) * sizeof(*s->bq));
            memmove(s->bqpos + nprefix, s->bqpos + nr, (n - nr) * sizeof(*s->bqpos));
            n -= nr - nprefix;
        }
        tm_sched_result_release(&r);
        rc = replay_sched_once(s, now, s->bq, n, &r);
        if (rc < 0)
            return rc;
    }
    return replay_pass_apply(s, now, st, s->bq, n, s->bqpos, &r, &blocked);
}
