/*
 * controller/sched/scheduler.c: one scheduling pass (see scheduler.h).
 *
 * The pass works on a private copy of the free capacity of every node and
 * keeps one index over it, whichever the policy needs.  The files:
 *
 *  - capacity.c: free capacity, the first-fit tree, the best-fit buckets;
 *  - reserve.c: timelines of expected ends, earliest starts, reservations
 *    and loans;
 *  - place.c: first fit, and best fit with its score;
 *  - order.c: the order keys;
 *  - scheduler.c (this file): names, validation and the pass.
 *
 * They share struct ctx and the rest of internal.h.
 *
 * The policies:
 *  - fifo: submit order, first fit, the first job that does not fit blocks
 *    all behind it (a job no node could ever hold is skipped, not waited on).
 *  - backfill: EASY.  Submit order, first fit; the first blocked job gets a
 *    reservation at its earliest expected start; later jobs run if they do
 *    not delay it, judged on their estimates as given.
 *  - tarmac:
 *    order: priority classes, each lifted one level per quarter of the
 *           starvation bound waited; within a level submit order, short
 *           eval/preprocess/inference work and jobs tied to few models
 *           moved up by at most short_ms; jobs aged past half the bound
 *           first of all: narrow ones (narrow()) first, by submit time
 *           plus 4x their estimate capped at 12 h, then those tied to few
 *           nodes by size (tied()), then the rest, in submit order.
 *    place: best fit on free whole GPUs (so big nodes stay whole) or on
 *           the tightest partly used GPU for a share; among candidates,
 *           first avoid models that model-constrained queued jobs need,
 *           then strand the least (GPU milli left that no queued job
 *           could use: too little CPU/memory left, or slivers below the
 *           smallest share asked), then the tightest fit, then CPU.  A job
 *           too big for every node of a model counts as constrained away
 *           from it.
 *    reserve: for jobs aged past half the bound, jobs that held one in
 *           the previous pass (hold_node) and narrow jobs (a model_mask
 *           whose nodes hold at most a quarter of the GPUs: narrow()) as
 *           soon as they are blocked, up to max_reservations; a flexible
 *           job's reservation avoids nodes of models that narrow jobs
 *           wait for unless they start it 6 h earlier; heavy jobs (4+
 *           whole GPUs per node, not narrow) hold reservations on at most
 *           an eighth of the GPUs at a time, the first and the drains
 *           already under way always (drains for 8-GPU jobs run one after
 *           another on a small fleet instead of emptying several nodes at
 *           once: heavy_capped()); and,
 *           when none was made, after everything that fits is placed, for
 *           the first blocked job if its models' free GPUs would hold it in
 *           total but no single node does (see fragmented()).  A
 *           reservation sticks to the node it held, so a drain, once
 *           begun, completes.
 *    fill:  a non-preemptible job may use a reserved node before the start
 *           only if twice its estimate ends by the start first promised
 *           (hold_start_ms), and never for an aged owner: with runtimes up
 *           to a day and the default 48 h bound, an aged job's drain then
 *           ends within the bound.  Preemptible work may use any reserved
 *           node on loan whatever its estimate and is evicted
 *           (tm_sched_preemption) the moment the reserved job can start, so
 *           it never holds capacity reserved for non-preemptible work.
 *    gangs: all members on distinct nodes or none, in every policy.
 *
 * Nothing here does I/O, reads a clock or keeps state between calls.
 */
#include "controller/sched/scheduler.h"

#include <stdlib.h>
#include <string.h>

#include "controller/sched/internal.h"
#include "core/err.h"

static const char *const policy_names[TM_POLICY_MAX] = {"fifo", "backfill", "tarmac"};
static const char *const verdict_names[TM_SCHED_VERDICT_MAX] = {
    "placed", "reserved", "wait_capacity", "wait_order", "wait_reservation", "no_match",
};

const char *tm_sched_policy_name(enum tm_sched_policy p)
{
    return (unsigned)p < TM_POLICY_MAX ? policy_names[p] : "unknown";
}

int tm_sched_policy_parse(const char *name)
{
    if (!name)
        return -1;
    for (int i = 0; i < TM_POLICY_MAX; i++)
        if (strcmp(policy_names[i], name) == 0)
            return i;
    return -1;
}

const char *tm_sched_policy_list(void)
{
    return "fifo, backfill, tarmac";
}

const char *tm_sched_verdict_name(enum tm_sched_verdict v)
{
    return (unsigned)v < TM_SCHED_VERDICT_MAX ? verdict_names[v] : "unknown";
}

/* ---------- notes ---------- */

static void note(struct ctx *c, int32_t j, enum tm_sched_verdict v, int32_t node, int64_t start,
                 const char *why)
{
    struct tm_sched_note *n = &c->r.notes[j];

    n->job = j;
    n->verdict = v;
    n->node = node;
    n->start_ms = start;
    n->why = why;
}

/* Whether no node of an acceptable model is large enough, ever. */
static bool no_match(const struct ctx *c, const struct need *nd)
{
    if (nd->nomatch)
        return true;
    if (nd->gpus == 0 && nd->milli == 0)
        return nd->cpu > c->any_maxcpu || nd->mem > c->any_maxmem;
    for (int s = 0; s < c->nslots; s++) {
        if (!(nd->slots >> s & 1))
            continue;
        if (c->slot_maxg[s] >= (nd->gpus > 0 ? nd->gpus : 1) && c->slot_maxcpu[s] >= nd->cpu &&
            c->slot_maxmem[s] >= nd->mem)
            return false;
    }
    return true;
}

/* ---------- the pass ---------- */

static int validate_and_load(struct ctx *c)
{
    const struct tm_sched_input *in = c->in;

    if (in->nnodes > INT32_MAX / TM_NODE_GPUS_MAX || in->njobs > INT32_MAX / 2)
        return TM_EINVAL;
    c->nn = in->nnodes;
    c->ns = calloc(c->nn + 1, sizeof(*c->ns));
    c->needs = calloc(in->njobs + 1, sizeof(*c->needs));
    c->mark = calloc(c->nn + 1, sizeof(*c->mark));
    if (!c->ns || !c->needs || !c->mark)
        return TM_ENOMEM;
    for (int m = 0; m < TM_GPU_MODELS_MAX; m++)
        c->model_slot[m] = NO_SLOT;
    for (size_t i = 0; i < c->nn; i++) {
        const struct tm_sched_node *n = &in->nodes[i];
        struct nst *s = &c->ns[i];
        if (n->gpus < 0 || n->gpus > TM_NODE_GPUS_MAX || n->cpu_milli < 0 || n->memory_mib < 0)
            return TM_EINVAL;
        if (n->gpus > 0 && (n->model < 0 || n->model >= TM_GPU_MODELS_MAX))
            return TM_EINVAL;
        s->cpu = n->cpu_milli;
        s->mem = n->memory_mib;
        s->gpus = (int8_t)n->gpus;
        s->ok = n->schedulable;
        s->res = NO_SLOT;
        s->mslot = NO_SLOT;
        for (int g = 0; g < n->gpus; g++)
            s->free[g] = MILLI;
        if (n->gpus > 0) {
            if (c->model_slot[n->model] == NO_SLOT)
                c->model_slot[n->model] = c->nslots++;
            s->mslot = c->model_slot[n->model];
        }
    }
    for (size_t a = 0; a < in->nallocs; a++) {
        const struct tm_sched_alloc *al = &in->allocs[a];
        struct nst *s;
        if (al->node < 0 || (size_t)al->node >= c->nn || al->gpu_milli < 0 || al->gpu_milli > MILLI)
            return TM_EINVAL;
        s = &c->ns[al->node];
        if (al->gpu_mask >> s->gpus)
            return TM_EINVAL;
        for (int g = 0; g < s->gpus; g++)
            if (al->gpu_mask >> g & 1)
                s->free[g] = (int16_t)(s->free[g] - al->gpu_milli);
        s->cpu -= al->cpu_milli;
        s->mem -= al->memory_mib;
    }
    for (size_t i = 0; i < c->nn; i++) {
        struct nst *s = &c->ns[i];
        /* Over-committed input (a node shrank under its jobs) is not ours
         * to fix: clamp so nothing more goes there. */
        for (int g = 0; g < s->gpus; g++)
            if (s->free[g] < 0)
                s->free[g] = 0;
        sched_nst_refresh(s);
        if (s->ok && s->mslot >= 0) {
            const struct tm_sched_node *n = &in->nodes[i];
            int sl = s->mslot;
            c->slot_free[sl] += sched_nst_free_milli(s);
            c->slot_gpus[sl] += n->gpus;
            c->all_gpus += n->gpus;
            if (n->gpus > c->slot_maxg[sl])
                c->slot_maxg[sl] = n->gpus;
            if (n->cpu_milli > c->slot_maxcpu[sl])
                c->slot_maxcpu[sl] = n->cpu_milli;
            if (n->memory_mib > c->slot_maxmem[sl])
                c->slot_maxmem[sl] = n->memory_mib;
        }
        if (s->ok) {
            if (in->nodes[i].cpu_milli > c->any_maxcpu)
                c->any_maxcpu = in->nodes[i].cpu_milli;
            if (in->nodes[i].memory_mib > c->any_maxmem)
                c->any_maxmem = in->nodes[i].memory_mib;
        }
    }
    c->all_slots = c->nslots >= 64 ? ~0ull : (1ull << c->nslots) - 1;
    for (size_t j = 0; j < in->njobs; j++) {
        const struct tm_sched_job *jb = &in->jobs[j];
        struct need *nd = &c->needs[j];
        if (jb->gpus < 0 || jb->gpus > TM_NODE_GPUS_MAX || jb->gpu_milli < 0 ||
            jb->gpu_milli > MILLI || jb->nodes < 1 || jb->nodes > 64 || jb->cpu_milli < 0 ||
            jb->memory_mib < 0)
            return TM_EINVAL;
        nd->cpu = jb->cpu_milli;
        nd->mem = jb->memory_mib;
        nd->nodes = jb->nodes;
        nd->gpus = jb->gpus;
        nd->milli = jb->gpus > 0 ? MILLI : jb->gpu_milli;
        if (jb->gpus == 0 && jb->gpu_milli == MILLI) {
            nd->gpus = 1; /* a whole GPU asked as a share */
        }
        if (nd->gpus > 0)
            nd->milli = 0;
        nd->slots = 0;
        if (jb->model_mask == 0) {
            nd->slots = c->all_slots;
        } else {
            for (int m = 0; m < TM_GPU_MODELS_MAX; m++)
                if ((jb->model_mask >> m & 1) && c->model_slot[m] != NO_SLOT)
                    nd->slots |= 1ull << c->model_slot[m];
        }
        /* A job too big for every node of a model cannot use that model
         * either: a 120-core 8-GPU task is tied to the one model whose
         * nodes have 128 cores as surely as by a gpu_spec.  Knowing it
         * lets tarmac keep those nodes for it. */
        for (int sl = 0; sl < c->nslots; sl++)
            if ((nd->slots >> sl & 1) &&
                (c->slot_maxg[sl] < (nd->gpus > 0 ? nd->gpus : 1) || c->slot_maxcpu[sl] < nd->cpu ||
                 c->slot_maxmem[sl] < nd->mem))
                nd->slots &= ~(1ull << sl);
        if (nd->slots == 0 && (nd->gpus > 0 || nd->milli > 0))
            nd->nomatch = true;
    }
    return 0;
}

/* Queue-derived inputs of tarmac's score: which models constrained jobs
 * wait for, and the smallest CPU, memory and share a GPU job asks. */
static void tarmac_prepare(struct ctx *c)
{
    const struct tm_sched_input *in = c->in;
    bool any = false;

    c->strand_cpu = INT64_MAX;
    c->strand_mem = INT64_MAX;
    c->strand_share = MILLI;
    for (size_t j = 0; j < in->njobs; j++) {
        const struct need *nd = &c->needs[j];
        if (nd->gpus == 0 && nd->milli == 0)
            continue;
        any = true;
        if (nd->cpu < c->strand_cpu)
            c->strand_cpu = nd->cpu;
        if (nd->mem < c->strand_mem)
            c->strand_mem = nd->mem;
        if (nd->gpus == 0 && nd->milli < c->strand_share)
            c->strand_share = nd->milli;
        if (sched_narrow(c, (int32_t)j))
            for (int sl = 0; sl < c->nslots; sl++)
                if (nd->slots >> sl & 1)
                    c->narrow_wants[sl] = c->any_narrow = true;
        if (popcount64(nd->slots) == 1)
            c->pressure[__builtin_ctzll(nd->slots)] +=
                (int64_t)(nd->gpus > 0 ? nd->gpus * MILLI : nd->milli) * nd->nodes;
    }
    if (!any) {
        c->strand_cpu = 0;
        c->strand_mem = 0;
    }
}

static int run_pass(struct ctx *c, const struct okey *keys)
{
    const struct tm_sched_input *in = c->in;
    enum tm_sched_policy pol = in->policy;
    int32_t max_res = pol == TM_POLICY_BACKFILL ? 1
                      : in->params.max_reservations > 0 ? in->params.max_reservations
                                                        : TM_SCHED_MAX_RESERVATIONS_DEFAULT;
    int32_t nreserved = 0, first_blocked = -1;
    int64_t drain_gpus = 0; /* tarmac: GPUs reserved for heavy jobs */
    bool blocked_head = false;
    size_t linked = 0;
    int r;

    for (size_t o = 0; o < in->njobs; o++) {
        int32_t j = keys[o].idx;
        const struct need *nd = &c->needs[j];
        bool gap = false, resblocked = false;
        int placed;

        if (no_match(c, nd)) {
            note(c, j, TM_SCHED_NO_MATCH, -1, 0, "no node of an acceptable model and size exists");
            continue;
        }
        if (pol == TM_POLICY_FIFO && blocked_head) {
            if (sched_fits_anywhere(c, j))
                note(c, j, TM_SCHED_WAIT_ORDER, -1, 0, "room exists but fifo waits for the queue head");
            else
                note(c, j, TM_SCHED_WAIT_CAPACITY, -1, 0, "no room now, and behind the queue head");
            continue;
        }
        if (pol == TM_POLICY_TARMAC)
            placed = sched_place_best(c, j, nreserved > 0, &gap, &resblocked);
        else
            placed = sched_place_firstfit(c, j, nreserved > 0, &gap, &resblocked);
        if (placed < 0)
            return placed;
        if (placed) {
            const char *why;
            int32_t node = c->r.placements[c->r.nplacements - 1].node;
            if (pol == TM_POLICY_FIFO)
                why = "first fit, in submit order";
            else if (pol == TM_POLICY_BACKFILL)
                why = nreserved == 0 ? "first fit, in submit order"
                      : gap         ? "backfilled: ends before the reservation"
                                    : "backfilled: leaves the reservation intact";
            else if (gap)
                why = "gap fill: ends before a reserved job needs the GPUs";
            else if (nd->nodes > 1)
                why = "gang placed whole, best fit on each node";
            else if (nd->gpus == 0 && nd->milli > 0)
                why = "share on the tightest GPU that fits";
            else
                why = "best fit: fewest free GPUs left, least stranded";
            if (pol == TM_POLICY_TARMAC && sched_is_urgent(c, j))
                why = "aged past half the starvation bound, placed first";
            note(c, j, TM_SCHED_PLACED, node, in->now_ms, why);
            continue;
        }
        if (pol == TM_POLICY_FIFO) {
            blocked_head = true;
            note(c, j, TM_SCHED_WAIT_CAPACITY, -1, 0, "queue head: no room now, blocks the queue");
            continue;
        }
        /* EASY reserves for the queue head.  tarmac reserves for aged jobs
         * and keeps the ones it made; a fresh blocked job gets one only at
         * the end of the pass, if the capacity it needs is merely
         * fragmented: a reservation drains a node, and draining for every
         * blocked head when the cluster is full costs the many small jobs
         * more than it gives the few big ones (measured on openb). */
        if (nreserved < max_res &&
            (pol == TM_POLICY_BACKFILL ||
             (!sched_heavy_capped(c, j, drain_gpus) &&
              (sched_is_urgent(c, j) || in->jobs[j].hold_node > 0 || sched_narrow(c, j))))) {
            size_t before = c->r.nreservations;
            r = sched_reserve(c, j, &linked);
            if (r < 0)
                return r;
            if (r == 2) {
                note(c, j, TM_SCHED_PLACED, c->r.placements[c->r.nplacements - 1].node, in->now_ms,
                     "placed now by evicting preemptible work on loan");
                continue;
            }
            if (r == 1) {
                nreserved++;
                if (pol == TM_POLICY_TARMAC && sched_heavy(c, j))
                    drain_gpus += (int64_t)nd->gpus * nd->nodes;
                note(c, j, TM_SCHED_RESERVED, c->r.reservations[before].node,
                     c->r.reservations[before].start_ms,
                     pol == TM_POLICY_BACKFILL ? "queue head: reserved at the earliest expected start"
                     : sched_is_urgent(c, j)         ? "aged: reserved at the earliest expected start"
                                               : "first blocked: reserved at the earliest expected start");
                continue;
            }
        }
        if (resblocked)
            note(c, j, TM_SCHED_WAIT_RESERVATION, -1, 0, "would delay a reserved job");
        else if (sched_fits_anywhere(c, j))
            note(c, j, TM_SCHED_WAIT_RESERVATION, -1, 0, "room only where a reservation needs it");
        else
            note(c, j, TM_SCHED_WAIT_CAPACITY, -1, 0, "no room now on an acceptable node");
        if (first_blocked < 0 && pol == TM_POLICY_TARMAC)
            first_blocked = j;
    }
    /* After everything that fits has been placed, GPUs of the first
     * blocked job's models still free in total but on no single node
     * idle while it waits: only then is draining one node for it free. */
    if (first_blocked >= 0 && nreserved == 0 && sched_fragmented(c, &c->needs[first_blocked])) {
        size_t before = c->r.nreservations;
        r = sched_reserve(c, first_blocked, &linked);
        if (r < 0)
            return r;
        if (r == 2)
            note(c, first_blocked, TM_SCHED_PLACED, c->r.placements[c->r.nplacements - 1].node,
                 in->now_ms, "placed now by evicting preemptible work on loan");
        else if (r == 1)
            note(c, first_blocked, TM_SCHED_RESERVED, c->r.reservations[before].node,
                 c->r.reservations[before].start_ms,
                 "reserved: free GPUs of its models are fragmented and would idle");
    }
    return 0;
}

static void ctx_release(struct ctx *c)
{
    free(c->ns);
    free(c->needs);
    free(c->mark);
    free(c->tfull);
    free(c->tmax);
    free(c->tcpu);
    free(c->tmem);
    free(c->tmod);
    free(c->whead);
    free(c->wnext);
    free(c->wprev);
    free(c->phead);
    free(c->pnext);
    free(c->pprev);
    free(c->pbits);
    free(c->astart);
    free(c->aorder);
    free(c->plhead);
    free(c->plnext);
    free(c->rn);
    free(c->evicted);
    free(c->node_end);
}

int tm_sched_run(const struct tm_sched_input *in, struct tm_sched_result *ret)
{
    struct ctx c = {0};
    struct okey *keys = NULL;
    int r = TM_EINVAL;

    if (!in || !ret || (unsigned)in->policy >= TM_POLICY_MAX || (in->njobs && !in->jobs) ||
        (in->nnodes && !in->nodes) || (in->nallocs && !in->allocs))
        return TM_EINVAL;
    c.in = in;
    r = validate_and_load(&c);
    if (r < 0)
        goto out;
    r = TM_ENOMEM;
    c.r.notes = calloc(in->njobs + 1, sizeof(*c.r.notes));
    keys = malloc((in->njobs + 1) * sizeof(*keys));
    if (!c.r.notes || !keys)
        goto out;
    c.r.nnotes = in->njobs;
    if (in->policy == TM_POLICY_TARMAC) {
        c.loans = true;
        c.evicted = calloc(in->nallocs + 1, sizeof(*c.evicted));
        if (!c.evicted)
            goto out;
        tarmac_prepare(&c);
        r = sched_buckets_init(&c);
    } else {
        r = sched_tree_init(&c);
    }
    if (r >= 0 && in->params.align_ends)
        r = sched_node_end_init(&c);
    if (r < 0)
        goto out;
    sched_order(&c, keys);
    r = run_pass(&c, keys);
    if (r < 0)
        goto out;
    *ret = c.r;
    c.r = (struct tm_sched_result){0};
out:
    tm_sched_result_release(&c.r);
    ctx_release(&c);
    free(keys);
    return r;
}

void tm_sched_result_release(struct tm_sched_result *r)
{
    if (!r)
        return;
    free(r->placements);
    free(r->notes);
    free(r->reservations);
    free(r->preemptions);
    *r = (struct tm_sched_result){0};
}
