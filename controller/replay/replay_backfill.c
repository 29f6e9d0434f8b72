/*
 * controller/replay/replay_backfill.c: the time replay's EASY backfill
 * pass, incremental (a struct replay_pass, replay_engine.h): each pass is handed only the
 * part of the queue that can change its decisions (the prefix up to the
 * first blocked job and, per request shape, the first jobs that could fit
 * the free capacity or the reservation's gaps), and a pass proven to
 * decide nothing is skipped (bf_unchanged()).  test_replay_incremental
 * compares it with the whole-queue pass, decision for decision.
 */
#include "controller/replay/replay_pass.h"

#include <stdlib.h>
#include <string.h>

#include "core/err.h"

/* Jobs the first try hands the pass: the head and a few behind it. */
#define BF_PREFIX 32

/* The queue indexed by arrival rank, all of it (queued) and by group
 * (shape x 2 + preemptible), valued by estimate; per shape and node how
 * many jobs of the shape the node's free capacity could hold (ufit,
 * refreshed for the nodes touched since: udirty), and their sum (ucap). */
struct bf_pass {
    struct replay_engine *e;
    int32_t *rank;                             /* per job: index in arr */
    struct tm_seqindex qgrp;
    /* The same queue as lists by arrival rank, all of it (lall) and per
     * group (lgrp): the first jobs of each walked without a search; the
     * min-trees' walks and searches over a million-job order were a sixth
     * of the replay at 500,000 jobs (cache misses, growing with the
     * trace). */
    struct ranklist lall, lgrp;
    int32_t *ufit;                             /* nshapes x nnodes */
    int64_t *ucap;                             /* per shape */
    uint8_t *udirty;
    int32_t *udlist;
    size_t nudirty;
    uint32_t *mark, gen;                       /* per rank: in the subset of pass gen */
    /* The last reservation: job, its nodes (a gang's one per node, in the
     * pass's order), start. */
    int32_t gjob, gnodes[REPLAY_GANG_MAX];
    int32_t gnn;
    int64_t gstart;
    /* Since the last pass run (bf_unchanged()): some job ended; arrivals
     * before arr[seen] fit no node; that pass started a job of unknown
     * estimate. */
    bool ended, unknown;
    size_t seen;
    int64_t t0;
    struct replay_input in;                    /* the jobs handed to the pass */
};

/* How many jobs of shape sh node i's free capacity could hold at once:
 * an upper bound on how many a pass can start there (a share counts per
 * GPU, whole GPUs per wholly free GPU, CPU and memory per node). */
static int32_t shape_fit(const struct replay_engine *s, size_t i, const struct shape *sh)
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

static void ufit_node(struct bf_pass *b, size_t i)
{
    const struct replay_engine *s = b->e;

    for (size_t sh = 0; sh < s->nshapes; sh++) {
        int32_t *u = &b->ufit[sh * s->nnodes + i];
        int32_t v = shape_fit(s, i, &s->shapes[sh]);
        b->ucap[sh] += v - *u;
        *u = v;
    }
}

static void ufit_refresh(struct bf_pass *b)
{
    for (size_t k = 0; k < b->nudirty; k++) {
        ufit_node(b, (size_t)b->udlist[k]);
        b->udirty[b->udlist[k]] = 0;
    }
    b->nudirty = 0;
}

/* Above this many (shape, node) counts the index is not kept and backfill
 * passes the whole queue. */
#define BF_UFIT_MAX (64u << 20)

static void bf_release(void *state)
{
    struct bf_pass *b = state;

    if (!b)
        return;
    free(b->rank);
    free(b->ufit);
    free(b->ucap);
    free(b->udirty);
    free(b->udlist);
    free(b->mark);
    replay_input_release(&b->in);
    replay_rl_release(&b->lall);
    replay_rl_release(&b->lgrp);
    tm_seqindex_release(&b->qgrp);
    free(b);
}

/* The indexes bf_run() reads, for EASY backfill unless the reference is
 * asked (full_pass), align_ends reads estimates in placement as well, or
 * the counts would be too many. */
static int bf_init(struct replay_engine *s, void **state)
{
    const struct tm_replay_config *cfg = s->cfg;
    struct bf_pass *b;
    int r;

    if (cfg->policy != TM_POLICY_BACKFILL || cfg->full_pass || cfg->params.align_ends ||
        s->nshapes * s->nnodes > BF_UFIT_MAX)
        return 0;
    b = calloc(1, sizeof(*b));
    if (!b)
        return TM_ENOMEM;
    b->e = s;
    b->rank = malloc((s->njobs + 1) * sizeof(*b->rank));
    b->ufit = calloc(s->nshapes * s->nnodes + 1, sizeof(*b->ufit));
    b->ucap = calloc(s->nshapes + 1, sizeof(*b->ucap));
    b->udirty = calloc(s->nnodes + 1, sizeof(*b->udirty));
    b->udlist = malloc((s->nnodes + 1) * sizeof(*b->udlist));
    b->mark = calloc(s->njobs + 1, sizeof(*b->mark));
    r = TM_ENOMEM;
    if (b->rank && b->ufit && b->ucap && b->udirty && b->udlist && b->mark)
        r = replay_rank_index(s, b->rank, &b->qgrp);
    if (r == 0)
        r = replay_rl_init(&b->lall, s->njobs, 1);
    if (r == 0)
        r = replay_rl_init(&b->lgrp, s->njobs, s->nshapes * 2);
    if (r < 0) {
        bf_release(b);
        return r;
    }
    for (size_t i = 0; i < s->nnodes; i++)
        ufit_node(b, i);
    b->gjob = -1;
    *state = b;
    return 1;
}

static void bf_queued(void *state, int32_t j)
{
    struct bf_pass *b = state;
    const struct rjob *rj = &b->e->jobs[j];
    int64_t v = rj->estimate > 0 ? rj->estimate : TM_SEQ_MAX;

    tm_seqindex_set(&b->qgrp, (size_t)b->rank[j], v);
    replay_rl_insert(&b->lall, 0, b->rank[j]);
    replay_rl_insert(&b->lgrp, b->qgrp.group[b->rank[j]], b->rank[j]);
}

static void bf_dequeued(void *state, int32_t j)
{
    struct bf_pass *b = state;

    tm_seqindex_set(&b->qgrp, (size_t)b->rank[j], TM_SEQ_ABSENT);
    replay_rl_remove(&b->lall, 0, b->rank[j]);
    replay_rl_remove(&b->lgrp, b->qgrp.group[b->rank[j]], b->rank[j]);
}

static void bf_node_touched(void *state, int32_t i)
{
    struct bf_pass *b = state;

    if (!b->udirty[i]) {
        b->udirty[i] = 1;
        b->udlist[b->nudirty++] = i;
    }
}

static void bf_ended(void *state)
{
    struct bf_pass *b = state;

    b->ended = true;
}

static void bf_started(void *state, int32_t j)
{
    struct bf_pass *b = state;

    if (b->e->jobs[j].estimate <= 0)
        b->unknown = true;
}

/* Append the queued job at arrival rank p to the pass's input. */
static int bq_add(struct bf_pass *b, size_t *n, size_t p)
{
    return replay_input_add(b->e, &b->in, n, (int32_t)b->e->arr[p]);
}

/*
 * backfill (EASY), incremental: the same placements as a pass over the
 * whole queue, from a pass over a few of its jobs.
 *
 * EASY runs in submit order: first fit until the first blocked job, which
 * gets the one reservation (on node R, at `start`; a gang's on nodes
 * R_1..R_m, one per member, all at `start`); after it every job is
 * placed if it fits without delaying the reservation, and one that is not
 * placed changes nothing.  So a pass over the prefix up to the reserved
 * job and a subset of the jobs after it that holds every job the full pass
 * would place decides the same, placement for placement.  The subset, per
 * request shape X and preemptibility (a group), from the free capacity
 * before the pass, which only shrinks during it:
 *
 *  - at most U = sum over nodes of ufit[X] jobs of X can start, so the
 *    ones that start before the group's first failure are among its
 *    first U (a gang of X takes ufit[X] on each of its nodes: fewer);
 *  - after a job of X fails, no node but the R_k has room for X, and
 *    room on R_k is left for X only to a gap filler (estimate <=
 *    start - now), so only the first sum over k of ufit[X][R_k] gap
 *    fillers of the group after it can still start: those after the
 *    first U are the first that many gap fillers after them.  For a gang
 *    X: fewer nodes than its size have room for a member off the R_k (or
 *    it had started), so each gang of X that starts later takes at least
 *    one member's room on some R_k as a gap filler.  (A preemptible
 *    reservation does not hold non-preemptible work off R_k: for such a
 *    group a failure ends it.)
 *
 * The prefix is found by a first pass over the first BF_PREFIX queued
 * jobs (doubling until one is blocked and reserved for), which also gives
 * R and start; the second pass, over prefix and subset, is applied.  Each
 * event costs two passes over O(prefix + shapes + jobs started) jobs plus
 * the nodes and running jobs, instead of one over the queue.
 */
/* The subset (above) after the prefix ending at arrival rank `last`, for
 * a reservation on nodes[0..nn) at `start` (rpre: for a preemptible job),
 * appended to the pass's input. */
static int bf_subset(struct bf_pass *b, size_t *n, size_t last, int64_t now, const int32_t *nodes, int32_t nn,
                     int64_t start, bool rpre)
{
    const struct replay_engine *s = b->e;
    int64_t gap = start - now;
    int rc;

    if (gap > TM_SEQ_MAX - 1)
        gap = TM_SEQ_MAX - 1;
    for (size_t g = 0; g < b->qgrp.ngroups; g++) {
        size_t sh = g / 2;
        int64_t u = b->ucap[sh];
        /* A preemptible reservation never holds non-preemptible work off
         * R: that group's first failure means no room on R either. */
        int32_t ur = 0;
        int32_t k = -1, p = b->lgrp.head[g];
        for (int32_t x = 0; x < nn && !(rpre && !(g & 1)); x++)
            ur += b->ufit[sh * s->nnodes + (size_t)nodes[x]];
        if (u == 0 && ur == 0)
            continue;
        /* The first u queued after the prefix: the group's list past the
         * prefix's few members of it. */
        while (p >= 0 && (size_t)p <= last)
            p = b->lgrp.next[p];
        for (int64_t c = 0; p >= 0 && c < u; c++) {
            rc = bq_add(b, n, (size_t)p);
            if (rc < 0)
                return rc;
            p = b->lgrp.next[p];
        }
        /* The gap fillers from there on (none if the list ended), by
         * estimate: the min-tree, walked by slot within the group (a
         * search per step was a tenth of the replay at 250,000 jobs). */
        if (p >= 0)
            k = b->qgrp.slot[p];
        for (int32_t c = 0; k >= 0 && c < ur; c++) {
            k = tm_seqindex_next_slot(&b->qgrp, g, k, gap);
            if (k < 0)
                break;
            rc = bq_add(b, n, (size_t)tm_seqindex_pos(&b->qgrp, g, k++));
            if (rc < 0)
                return rc;
        }
    }
    return 0;
}

/* The first `want` queued jobs in arrival order as the pass's input
 * (*n); *last: the rank of the last, *more: some queued job is left out. */
static int bf_prefix(struct bf_pass *b, size_t want, size_t *n, size_t *last, bool *more)
{
    int rc;

    *n = 0;
    *more = false;
    for (int32_t p = b->lall.head[0]; p >= 0; p = b->lall.next[p]) {
        if (*n == want) {
            *more = true;
            break;
        }
        rc = bq_add(b, n, (size_t)p);
        if (rc < 0)
            return rc;
        *last = (size_t)p;
    }
    return 0;
}

/* The nodes of r's first reservation (a gang's, one after another) as
 * the last reservation, for job gjob. */
static void bf_keep(struct bf_pass *b, const struct tm_sched_result *r, int32_t gjob)
{
    b->gjob = gjob;
    b->gstart = r->reservations[0].start_ms;
    b->gnn = 0;
    for (size_t k = 0; k < r->nreservations && b->gnn < REPLAY_GANG_MAX; k++) {
        if (r->reservations[k].job != r->reservations[0].job)
            break;
        b->gnodes[b->gnn++] = r->reservations[k].node;
    }
}

/* Whether r's first reservation is the last one kept: the same job,
 * nodes and start. */
static bool bf_same(const struct bf_pass *b, const struct tm_sched_result *r, int32_t job)
{
    int32_t k = 0;

    if (job != b->gjob || r->reservations[0].start_ms != b->gstart)
        return false;
    for (; (size_t)k < r->nreservations && r->reservations[k].job == r->reservations[0].job; k++)
        if (k >= b->gnn || r->reservations[k].node != b->gnodes[k])
            return false;
    return k == b->gnn;
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
static bool bf_covered(struct bf_pass *b, size_t nprefix, size_t nr, size_t n)
{
    const struct replay_engine *s = b->e;
    bool all = true;

    b->gen++;
    for (size_t k = nprefix; k < nr; k++)
        b->mark[b->rank[s->qjob[b->in.pos[k]]]] = b->gen;
    for (size_t k = nr; k < n && all; k++)
        all = b->mark[b->rank[s->qjob[b->in.pos[k]]]] == b->gen;
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
static bool bf_unchanged(struct bf_pass *b, int64_t now, size_t narrived)
{
    const struct replay_engine *s = b->e;
    int32_t r = b->gnodes[0];
    bool pre;

    /* A gang's reservation spans several nodes: not argued, passed. */
    if (b->ended || b->unknown || b->gjob < 0 || s->jobs[b->gjob].qpos < 0 || b->gnn != 1)
        return false;
    for (; b->seen < narrived; b->seen++)
        if (b->ucap[s->jobs[s->arr[b->seen]].shape] > 0)
            return false;
    pre = s->jobs[b->gjob].tj->preemptible;
    /* What t0's pass started on R: a job that leaves the reservation
     * intact was counted as held at S, and one of them that ends by S
     * adds room by S now (R may take more); and a preemptible reservation
     * holds nothing against non-preemptible work (sched_reservation_
     * permits()), so what was started on R may hold past S what S was
     * counted on (R's start moves). */
    for (int32_t a = s->alloc_head[r]; a >= 0; a = s->alloc_next[a])
        if (s->alloc_start[a] == b->t0 &&
            (pre || s->alloc_start[a] + s->alloc_est[a] <= b->gstart))
            return false;
    if (s->cfg->exact_estimates)
        return true; /* ends never move */
    for (int32_t a = s->alloc_head[r]; a >= 0; a = s->alloc_next[a]) {
        int64_t from = s->alloc_start[a], e = s->alloc_est[a], t0 = b->t0;
        /* its end as t0's pass saw it: a job it started by its estimate */
        int64_t e0 = from == t0 ? from + e : t0 + tm_estimate_remaining(e, t0 - from);
        if (e0 <= b->gstart && now + tm_estimate_remaining(e, now - from) > b->gstart)
            return false;
    }
    return true;
}

static int bf_run(void *state, int64_t now, struct tm_replay_stats *st, size_t narrived)
{
    struct bf_pass *b = state;
    struct replay_engine *s = b->e;
    struct tm_sched_result r = {0};
    size_t want = BF_PREFIX, n, nprefix, nr, last = 0;
    struct tm_sched_reservation rv;
    bool blocked, more;
    int rc;

    replay_ends_refresh(s, now);
    ufit_refresh(b);
    if (bf_unchanged(b, now, narrived))
        return 0;
    b->ended = false;
    b->unknown = false;
    b->seen = narrived;
    b->t0 = now;
    /* The last pass's reservation, if its job still waits, is most often
     * this pass's too: one pass over the prefix and the subset it gives,
     * kept if the pass reserves the same. */
    if (b->gjob >= 0 && s->jobs[b->gjob].qpos >= 0) {
        rc = bf_prefix(b, want, &n, &last, &more);
        if (rc < 0)
            return rc;
        nprefix = n;
        if (more) {
            rc = bf_subset(b, &n, last, now, b->gnodes, b->gnn, b->gstart,
                           s->jobs[b->gjob].tj->preemptible);
            if (rc == 0)
                rc = replay_sched_once(s, now, b->in.jobs, n, &r);
            if (rc < 0)
                return rc;
            if (bf_reserved_in_prefix(&r, nprefix)) {
                rv = r.reservations[0];
                if (bf_same(b, &r, s->qjob[b->in.pos[rv.job]]))
                    return replay_pass_apply(s, now, st, b->in.jobs, n, b->in.pos, &r, &blocked);
                /* r, over a superset of the prefix, holds the reservation
                 * the prefix alone makes. */
                nr = n;
                goto subset;
            }
            tm_sched_result_release(&r);
        }
    }
    for (;;) {
        rc = bf_prefix(b, want, &n, &last, &more);
        if (rc < 0)
            return rc;
        if (n == 0)
            return 0;
        rc = replay_sched_once(s, now, b->in.jobs, n, &r);
        if (rc < 0)
            return rc;
        if (!more || r.nreservations > 0)
            break;
        tm_sched_result_release(&r);
        want *= 2;
    }
    if (!more) {
        b->gjob = -1;
        return replay_pass_apply(s, now, st, b->in.jobs, n, b->in.pos, &r, &blocked);
    }
    nprefix = n;
    nr = n;
    rv = r.reservations[0];
subset:
    bf_keep(b, &r, s->qjob[b->in.pos[rv.job]]);
    rc = bf_subset(b, &n, last, now, b->gnodes, b->gnn, rv.start_ms, b->in.jobs[rv.job].preemptible);
    if (rc < 0) {
        tm_sched_result_release(&r);
        return rc;
    }
    if (nr > nprefix && bf_covered(b, nprefix, nr, n)) {
        /* r's input held the subset: the jobs beyond it change nothing. */
        n = nr;
    } else if (n > nprefix || nr > nprefix) {
        /* The new subset alone after the prefix. */
        if (nr > nprefix) {
            memmove(b->in.jobs + nprefix, b->in.jobs + nr, (n - nr) * sizeof(*b->in.jobs));
            memmove(b->in.pos + nprefix, b->in.pos + nr, (n - nr) * sizeof(*b->in.pos));
            n -= nr - nprefix;
        }
        tm_sched_result_release(&r);
        rc = replay_sched_once(s, now, b->in.jobs, n, &r);
        if (rc < 0)
            return rc;
    }
    return replay_pass_apply(s, now, st, b->in.jobs, n, b->in.pos, &r, &blocked);
}

const struct replay_pass replay_pass_backfill = {
    .name = "backfill",
    .init = bf_init,
    .release = bf_release,
    .queued = bf_queued,
    .dequeued = bf_dequeued,
    .node_touched = bf_node_touched,
    .ended = bf_ended,
    .started = bf_started,
    .run = bf_run,
};
