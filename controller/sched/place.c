/*
 * controller/sched/place.c: placing one job, all members or none.
 *
 * First fit (fifo, backfill) takes the first node of the tree scan;
 * best fit (tarmac) scores the candidates of the buckets (struct score:
 * model pressure, stranding, end alignment, rank, tightness, CPU).  Both
 * respect the reservations when asked and note the gaps they fill.
 */
#include "controller/sched/scheduler.h"

#include <stdlib.h>

#include "controller/sched/internal.h"
#include "core/err.h"

/* ---------- first-fit placement (fifo, backfill) ---------- */

int sched_node_end_init(struct ctx *c)
{
    c->node_end = malloc((c->nn + 1) * sizeof(*c->node_end));
    if (!c->node_end)
        return TM_ENOMEM;
    for (size_t i = 0; i < c->nn; i++)
        c->node_end[i] = c->in->now_ms;
    for (size_t a = 0; a < c->in->nallocs; a++) {
        const struct tm_sched_alloc *al = &c->in->allocs[a];
        int64_t e = sched_alloc_end_given(c, (int32_t)a);
        if (al->node >= 0 && (size_t)al->node < c->nn && e > c->node_end[al->node])
            c->node_end[al->node] = e;
    }
    return 0;
}

/* align_ends: job j placed on node i moves the end of i's work. */
static void node_end_note(struct ctx *c, int32_t j, int32_t i)
{
    int64_t e = c->in->jobs[j].estimate_ms > 0 ? c->in->jobs[j].estimate_ms : TM_SCHED_DEFAULT_ESTIMATE_MS;

    if (c->node_end && c->in->now_ms + e > c->node_end[i])
        c->node_end[i] = c->in->now_ms + e;
}

/* align_ends applies to job j: its estimate is its own runs'. */
static bool aligns(const struct ctx *c, int32_t j)
{
    return c->node_end && c->in->jobs[j].estimate_known && c->in->jobs[j].estimate_ms > 0;
}

/* align_ends: is a node whose work ends at e (the job ending at end) a
 * better home than the best so far (be)?  Nodes that outlive the job come
 * first, the soonest-ending of them (the job extends no node's life and
 * uses the node that frees soonest after it); then the latest-ending of
 * the rest (the job extends that node's life the least). */
static bool end_better(int64_t e, int64_t be, int64_t end)
{
    bool after = e >= end, bafter = be >= end;

    if (after != bafter)
        return after;
    return after ? e < be : e > be;
}

/* The first node of the tree scan from `from` that fits job j (reservations
 * respected when asked); with align_ends and a known estimate, the best by
 * end_better() of the first SCAN_MAX that fit (a bound on the pass at
 * fleet scale).  -1 when none. */
static int64_t find_node(struct ctx *c, int32_t j, size_t from, bool respect, bool *ret_blocked)
{
    const struct need *nd = &c->needs[j];
    bool align = aligns(c, j);
    int64_t end = align ? sched_job_end(c, j) : 0, best = -1;

    for (int seen = 0; seen < SCAN_MAX;) {
        int64_t i = sched_tree_find(c, from, nd);
        bool gap, loan;
        if (i < 0)
            return best;
        from = (size_t)i + 1;
        if (respect && !sched_reservation_permits(c, j, (int32_t)i, sched_pick_gpus(&c->ns[i], nd, false),
                                            nd->gpus ? MILLI : nd->milli, &gap, &loan)) {
            *ret_blocked = true;
            continue;
        }
        if (!align)
            return i;
        if (best < 0 || end_better(c->node_end[i], c->node_end[best], end))
            best = i;
        seen++;
    }
    return best;
}

/* Place job j first-fit on distinct nodes, all or nothing.  With
 * reservations on, nodes whose reservation would be delayed are skipped.
 * Returns 1 placed, 0 not, < 0 error.  *ret_gap: some member used a gap. */
int sched_place_firstfit(struct ctx *c, int32_t j, bool respect, bool *ret_gap, bool *ret_blocked)
{
    const struct need *nd = &c->needs[j];
    int32_t chosen[64];
    uint32_t masks[64];
    int32_t k = 0;
    size_t from = 0;
    int r = 0;

    *ret_gap = false;
    *ret_blocked = false;
    if (nd->nodes > 64)
        return 0;
    c->gen++;
    while (k < nd->nodes) {
        int64_t i = find_node(c, j, from, respect, ret_blocked);
        uint32_t mask;
        bool gap = false, loan = false;
        if (i < 0)
            break;
        mask = sched_pick_gpus(&c->ns[i], nd, false);
        if (respect)
            (void)sched_reservation_permits(c, j, (int32_t)i, mask, nd->gpus ? MILLI : nd->milli, &gap, &loan);
        chosen[k] = (int32_t)i;
        masks[k] = mask;
        if (gap) {
            *ret_gap = true;
            sched_reservation_note_gap(c, (int32_t)i, mask, nd->gpus ? MILLI : nd->milli, nd);
        }
        c->mark[i] = c->gen;
        sched_node_take(c, (int32_t)i, mask, nd->gpus ? MILLI : nd->milli, nd);
        k++;
        from = 0;
    }
    if (k < nd->nodes) {
        /* All or nothing: give back what the partial gang took.  A gap
         * note already added is harmless: it only makes the reservation's
         * arithmetic more generous by a job that is not there, so undo it. */
        for (int32_t x = 0; x < k; x++) {
            sched_node_give(c, chosen[x], masks[x], nd->gpus ? MILLI : nd->milli, nd);
            if (*ret_gap && c->ns[chosen[x]].res != NO_SLOT) {
                struct rnode *rv = &c->rn[c->ns[chosen[x]].res];
                if (sched_job_end_safe(c, j) <= rv->deadline && rv->job != j) {
                    for (int g = 0; g < c->ns[chosen[x]].gpus; g++)
                        if (masks[x] >> g & 1)
                            rv->rel[g] -= nd->gpus ? MILLI : nd->milli;
                    rv->rel_cpu -= nd->cpu;
                    rv->rel_mem -= nd->mem;
                }
            }
        }
        return 0;
    }
    for (int32_t x = 0; x < k; x++) {
        r = sched_add_placement(c, j, chosen[x], masks[x], nd->gpus ? MILLI : nd->milli, false);
        if (r < 0)
            return r;
        node_end_note(c, j, chosen[x]);
    }
    return 1;
}

/* ---------- best-fit placement (tarmac) ---------- */

struct score {
    int64_t pressure; /* capacity wanted by model-constrained jobs */
    int64_t strand;   /* GPU milli this placement strands */
    int64_t fit;      /* free left where placed: GPUs*1000 or share */
    int64_t cpu_left; /* best fit on CPU last */
    bool share_fit;   /* a share: tightest fit before stranding */
    /* align_ends, a job whose estimate is known: 0 when the node's work
     * outlives the job, else 1; then that end (outliving nodes, soonest
     * first) or minus it (the rest, latest first).  Both 0 otherwise. */
    int8_t end_rank;
    int64_t end_key;
    int64_t rank;     /* params.elastic: the node's rank, else 0 */
};

static int score_cmp(const struct score *a, const struct score *b)
{
    if (a->pressure != b->pressure)
        return a->pressure < b->pressure ? -1 : 1;
    /* A share goes on the tightest GPU first: filling a partly used GPU
     * to the brim may leave a sliver nobody asks for, but starting a fresh
     * GPU leaves the partly used one idle as well, and more of it. */
    if (a->share_fit && a->fit != b->fit)
        return a->fit < b->fit ? -1 : 1;
    if (a->strand != b->strand)
        return a->strand < b->strand ? -1 : 1;
    /* A recurring job's end is known: a node it does not outlive beats
     * a tighter fit (the node empties on time, as it would without the
     * job), after stranding nothing; among those, the soonest to end. */
    if (a->end_rank != b->end_rank)
        return a->end_rank < b->end_rank ? -1 : 1;
    if (a->end_key != b->end_key)
        return a->end_key < b->end_key ? -1 : 1;
    if (a->rank != b->rank)
        return a->rank < b->rank ? -1 : 1;
    if (a->fit != b->fit)
        return a->fit < b->fit ? -1 : 1;
    if (a->cpu_left != b->cpu_left)
        return a->cpu_left < b->cpu_left ? -1 : 1;
    return 0;
}

/* GPU milli on a node that no queued job could use: all of it when the
 * CPU or memory left is below the smallest GPU job's, else the slivers
 * smaller than the smallest share anyone asks for.  This is the
 * fragmentation measure in the spirit of FGD, with the queue as the
 * workload. */
static int64_t stranded(const struct ctx *c, const struct nst *s)
{
    int64_t t = 0;

    if (s->cpu < c->strand_cpu || s->mem < c->strand_mem)
        return sched_nst_free_milli(s);
    for (int g = 0; g < s->gpus; g++)
        if (s->free[g] > 0 && s->free[g] < c->strand_share)
            t += s->free[g];
    return t;
}

static void score_of(const struct ctx *c, int32_t j, int32_t i, uint32_t mask, int32_t milli,
                     struct score *ret)
{
    const struct need *nd = &c->needs[j];
    const struct nst *s = &c->ns[i];
    struct nst after = *s;

    for (int g = 0; g < after.gpus; g++)
        if (mask >> g & 1)
            after.free[g] = (int16_t)(after.free[g] - milli);
    after.cpu -= nd->cpu;
    after.mem -= nd->mem;
    sched_nst_refresh(&after);
    /* A job that can run on several models avoids the ones constrained
     * jobs are queued for: otherwise they starve (gpuspec traces). */
    ret->pressure = (popcount64(nd->slots) > 1 && s->mslot >= 0) ? c->pressure[s->mslot] > 0 : 0;
    ret->strand = stranded(c, &after) - stranded(c, s);
    if (nd->gpus > 0)
        ret->fit = (int64_t)after.full * MILLI;
    else if (nd->milli > 0)
        ret->fit = s->free[__builtin_ctz(mask)] - milli;
    else
        ret->fit = sched_nst_free_milli(&after);
    ret->cpu_left = after.cpu;
    ret->share_fit = nd->gpus == 0 && nd->milli > 0;
    ret->end_rank = 0;
    ret->end_key = 0;
    ret->rank = c->in->params.elastic ? c->in->nodes[i].rank : 0;
    if (aligns(c, j)) {
        int64_t e = c->node_end[i], end = sched_job_end(c, j);
        ret->end_rank = e >= end ? 0 : 1;
        ret->end_key = e >= end ? e : -e;
    }
}

/* The best node for one member of job j among nodes not yet used by this
 * gang and whose reservation allows it.  Returns node or -1; fills mask. */
static int32_t best_node(struct ctx *c, int32_t j, bool respect, uint32_t *ret_mask, bool *ret_blocked)
{
    const struct need *nd = &c->needs[j];
    struct score best = {0}, sc;
    int32_t bnode = -1;
    uint32_t bmask = 0;

    *ret_blocked = false;
    if (nd->gpus == 0 && nd->milli == 0) {
        /* CPU-only work: first the node with the fewest free GPUs, so it
         * does not eat the CPU that GPU jobs need. */
        for (size_t i = 0; i < c->nn; i++) {
            bool gap, loan;
            if (!sched_nst_fits(&c->ns[i], nd) || c->mark[i] == c->gen)
                continue;
            if (respect && !sched_reservation_permits(c, j, (int32_t)i, 0, 0, &gap, &loan)) {
                *ret_blocked = true;
                continue;
            }
            score_of(c, j, (int32_t)i, 0, 0, &sc);
            if (bnode < 0 || score_cmp(&sc, &best) < 0) {
                best = sc;
                bnode = (int32_t)i;
            }
        }
        *ret_mask = 0;
        return bnode;
    }
    for (int s = 0; s < c->t.nslots; s++) {
        int found_levels = 0;
        if (!(nd->slots >> s & 1))
            continue;
        if (nd->gpus == 0) {
            /* A share: the tightest partially used GPU first. */
            int scanned = 0;
            bool got = false;
            int f;
            for (f = sched_pbits_next(c, s, nd->milli); f > 0 && !got && scanned < SCAN_MAX;
                 f = sched_pbits_next(c, s, f + 1)) {
                struct sched_biter it;
                for (int32_t id = sched_piter_first(c, s, f, &it); id >= 0 && scanned < SCAN_MAX;
                     id = sched_biter_next(&it)) {
                    int32_t i = id / TM_NODE_GPUS_MAX;
                    uint32_t mask = 1u << (id % TM_NODE_GPUS_MAX);
                    bool gap, loan;
                    scanned++;
                    if (c->mark[i] == c->gen || c->ns[i].cpu < nd->cpu || c->ns[i].mem < nd->mem)
                        continue;
                    if (respect && !sched_reservation_permits(c, j, i, mask, nd->milli, &gap, &loan)) {
                        *ret_blocked = true;
                        continue;
                    }
                    score_of(c, j, i, mask, nd->milli, &sc);
                    if (bnode < 0 || score_cmp(&sc, &best) < 0) {
                        best = sc;
                        bnode = i;
                        bmask = mask;
                    }
                    got = true;
                    break;
                }
            }
            if (!got && f > 0 && scanned >= SCAN_MAX)
                c->scan_cut = true;
        }
        /* Whole GPUs (or a share on a whole free GPU): the node with the
         * fewest free GPUs that still fits, so big nodes stay whole. */
        for (uint32_t kb = c->wbits[s] & (~0u << (nd->gpus > 0 ? nd->gpus : 1)); kb && found_levels < 2;
             kb &= kb - 1) {
            int k = __builtin_ctz(kb), scanned = 0, took = 0;
            struct sched_biter it;
            int32_t i;
            for (i = sched_witer_first(c, s, k, &it); i >= 0 && scanned < SCAN_MAX && took < CAND_PER_BUCKET;
                 i = sched_biter_next(&it)) {
                uint32_t mask;
                bool gap, loan;
                scanned++;
                if (c->mark[i] == c->gen || c->ns[i].cpu < nd->cpu || c->ns[i].mem < nd->mem)
                    continue;
                mask = sched_pick_gpus(&c->ns[i], nd, true);
                if (!mask)
                    continue;
                if (respect &&
                    !sched_reservation_permits(c, j, i, mask, nd->gpus ? MILLI : nd->milli, &gap, &loan)) {
                    *ret_blocked = true;
                    continue;
                }
                took++;
                score_of(c, j, i, mask, nd->gpus ? MILLI : nd->milli, &sc);
                if (bnode < 0 || score_cmp(&sc, &best) < 0) {
                    best = sc;
                    bnode = i;
                    bmask = mask;
                }
            }
            if (i >= 0 && scanned >= SCAN_MAX && took < CAND_PER_BUCKET)
                c->scan_cut = true;
            if (took)
                found_levels++;
        }
    }
    *ret_mask = bmask;
    return bnode;
}

int sched_place_best(struct ctx *c, int32_t j, bool respect, bool *ret_gap, bool *ret_blocked)
{
    const struct need *nd = &c->needs[j];
    int32_t chosen[64];
    uint32_t masks[64];
    bool loans[64];
    int32_t k = 0, milli = nd->gpus ? MILLI : nd->milli;
    int r;

    *ret_gap = false;
    *ret_blocked = false;
    if (nd->nodes > 64)
        return 0;
    c->gen++;
    while (k < nd->nodes) {
        uint32_t mask;
        bool blocked, gap = false, loan = false;
        int32_t i = best_node(c, j, respect, &mask, &blocked);
        if (blocked)
            *ret_blocked = true;
        if (i < 0)
            break;
        if (respect)
            (void)sched_reservation_permits(c, j, i, mask, milli, &gap, &loan);
        loans[k] = loan;
        if (gap) {
            *ret_gap = true;
            sched_reservation_note_gap(c, i, mask, milli, nd);
        }
        chosen[k] = i;
        masks[k] = mask;
        c->mark[i] = c->gen;
        sched_node_take(c, i, mask, milli, nd);
        k++;
    }
    if (k < nd->nodes) {
        for (int32_t x = 0; x < k; x++) {
            sched_node_give(c, chosen[x], masks[x], milli, nd);
            if (*ret_gap && c->ns[chosen[x]].res != NO_SLOT) {
                struct rnode *rv = &c->rn[c->ns[chosen[x]].res];
                if (sched_job_end_safe(c, j) <= rv->deadline && rv->job != j) {
                    for (int g = 0; g < c->ns[chosen[x]].gpus; g++)
                        if (masks[x] >> g & 1)
                            rv->rel[g] -= milli;
                    rv->rel_cpu -= nd->cpu;
                    rv->rel_mem -= nd->mem;
                }
            }
        }
        return 0;
    }
    for (int32_t x = 0; x < k; x++) {
        r = sched_add_placement(c, j, chosen[x], masks[x], milli, loans[x]);
        if (r < 0)
            return r;
        node_end_note(c, j, chosen[x]);
    }
    return 1;
}

/* Whether the job fits somewhere now, reservations aside (for notes). */
bool sched_fits_anywhere(struct ctx *c, int32_t j)
{
    uint32_t mask;
    bool blocked;

    c->gen++;
    if (c->buckets)
        return best_node(c, j, false, &mask, &blocked) >= 0;
    return sched_tree_find(c, 0, &c->needs[j]) >= 0;
}
