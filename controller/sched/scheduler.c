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
 *  - order.c: the order keys; bounds.c: the time bounds from the parameters;
 *  - note.c: the notes the pass and the policies leave per job;
 *  - scheduler.c (this file): verdict names, validation and the pass.
 *
 * They share struct ctx and the rest of internal.h.
 *
 * The policies fill the hooks of struct sched_policy (internal.h), one
 * file each: fifo.c, backfill.c, tarmac.c; policy.c is their table.  The
 * pass below asks the hooks and names no policy.  In every policy a gang
 * has all its members on distinct nodes or none.
 *
 * Nothing here does I/O, reads a clock or keeps state between calls.
 */
#include "controller/sched/scheduler.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "controller/sched/internal.h"
#include "core/err.h"

static const char *const verdict_names[TM_SCHED_VERDICT_MAX] = {
    "placed", "reserved", "wait_capacity", "wait_order", "wait_reservation", "no_match",
    "wait_quota",
};

const char *tm_sched_verdict_name(enum tm_sched_verdict v)
{
    return (unsigned)v < TM_SCHED_VERDICT_MAX ? verdict_names[v] : "unknown";
}

/* Whether no node of an acceptable model is large enough, ever. */
static bool no_match(const struct ctx *c, const struct need *nd)
{
    if (nd->nomatch)
        return true;
    if (nd->gpus == 0 && nd->milli == 0)
        return nd->cpu > c->t.any_maxcpu || nd->mem > c->t.any_maxmem;
    for (int s = 0; s < c->t.nslots; s++) {
        if (!(nd->slots >> s & 1))
            continue;
        if (c->t.slot_maxg[s] >= (nd->gpus > 0 ? nd->gpus : 1) && c->t.slot_maxcpu[s] >= nd->cpu &&
            c->t.slot_maxmem[s] >= nd->mem)
            return false;
    }
    return true;
}

/* ---------- the pass ---------- */

/* Node i's part of the per-model totals and maxima; free: its free GPU
 * milli. */
static void node_totals(struct ctx *c, size_t i, int64_t free)
{
    const struct tm_sched_node *n = &c->in->nodes[i];
    const struct nst *s = &c->ns[i];

    if (!s->ok)
        return;
    if (s->mslot >= 0) {
        int sl = s->mslot;
        c->t.slot_free[sl] += free;
        c->t.slot_gpus[sl] += n->gpus;
        c->t.all_gpus += n->gpus;
        if (n->gpus > c->t.slot_maxg[sl])
            c->t.slot_maxg[sl] = n->gpus;
        if (n->cpu_milli > c->t.slot_maxcpu[sl])
            c->t.slot_maxcpu[sl] = n->cpu_milli;
        if (n->memory_mib > c->t.slot_maxmem[sl])
            c->t.slot_maxmem[sl] = n->memory_mib;
    }
    if (n->cpu_milli > c->t.any_maxcpu)
        c->t.any_maxcpu = n->cpu_milli;
    if (n->memory_mib > c->t.any_maxmem)
        c->t.any_maxmem = n->memory_mib;
}

/* The nodes into c->ns and c->t, from the footprint if given, else from
 * the allocs.  0 or TM_EINVAL. */
static int load_nodes(struct ctx *c)
{
    const struct tm_sched_input *in = c->in;
    bool fast = in->footprint && in->footprint->gpus_full;

    for (int m = 0; m < TM_GPU_MODELS_MAX; m++)
        c->t.model_slot[m] = NO_SLOT;
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
        if (!in->footprint)
            for (int g = 0; g < n->gpus; g++)
                s->free[g] = MILLI;
        if (n->gpus > 0) {
            if (c->t.model_slot[n->model] == NO_SLOT)
                c->t.model_slot[n->model] = c->t.nslots++;
            s->mslot = c->t.model_slot[n->model];
        }
        /* The caller's sums (struct tm_sched_footprint), trusted; with
         * its GPU summaries the node is done in this one visit. */
        if (in->footprint)
            sched_nst_from_footprint(s, in->footprint, i);
        if (fast)
            node_totals(c, i, in->footprint->gpu_free_sum[i]);
    }
    if (!in->footprint) {
        for (size_t a = 0; a < in->nallocs; a++) {
            const struct tm_sched_alloc *al = &in->allocs[a];
            struct nst *s;
            if (al->node < 0 || (size_t)al->node >= c->nn || al->gpu_milli < 0 ||
                al->gpu_milli > MILLI)
                return TM_EINVAL;
            s = &c->ns[al->node];
            if (al->gpu_mask >> s->gpus)
                return TM_EINVAL;
            for (uint32_t m = al->gpu_mask; m; m &= m - 1) {
                int g = __builtin_ctz(m);
                s->free[g] = (int16_t)(s->free[g] - al->gpu_milli);
            }
            s->cpu -= al->cpu_milli;
            s->mem -= al->memory_mib;
        }
    }
    for (size_t i = 0; !fast && i < c->nn; i++) {
        struct nst *s = &c->ns[i];
        /* Over-committed input (a node shrank under its jobs) is not ours
         * to fix: clamp so nothing more goes there. */
        for (int g = 0; g < s->gpus; g++)
            if (s->free[g] < 0)
                s->free[g] = 0;
        sched_nst_refresh(s);
        node_totals(c, i, sched_nst_free_milli(s));
    }
    c->t.all_slots = c->t.nslots >= 64 ? ~0ull : (1ull << c->t.nslots) - 1;
    return 0;
}

#ifndef NDEBUG
/* Debug builds: a load from the cache must be what a fresh load gives. */
static void check_cached(const struct ctx *c)
{
    struct ctx f = {.in = c->in, .nn = c->nn};

    f.ns = calloc(c->nn + 1, sizeof(*f.ns));
    if (!f.ns)
        return;
    if (load_nodes(&f) != 0 || memcmp(f.ns, c->ns, c->nn * sizeof(*c->ns)) != 0 ||
        memcmp(&f.t, &c->t, sizeof(c->t)) != 0) {
        fprintf(stderr, "tm_sched_run: the node cache differs from the footprint (a touch missed)\n");
        abort();
    }
    free(f.ns);
}
#endif

static int validate_and_load(struct ctx *c)
{
    const struct tm_sched_input *in = c->in;
    int r;

    if (in->nnodes > INT32_MAX / TM_NODE_GPUS_MAX || in->njobs > INT32_MAX / 2)
        return TM_EINVAL;
    c->nn = in->nnodes;
    c->needs = calloc(in->njobs + 1, sizeof(*c->needs));
    c->mark = calloc(c->nn + 1, sizeof(*c->mark));
    if (!c->needs || !c->mark)
        return TM_ENOMEM;
    if (sched_node_cache_restore(c)) {
#ifndef NDEBUG
        check_cached(c);
#endif
    } else {
        c->ns = calloc(c->nn + 1, sizeof(*c->ns));
        if (!c->ns)
            return TM_ENOMEM;
        r = load_nodes(c);
        if (r < 0)
            return r;
        sched_node_cache_store(c);
    }
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
            nd->slots = c->t.all_slots;
        } else {
            for (int m = 0; m < TM_GPU_MODELS_MAX; m++)
                if ((jb->model_mask >> m & 1) && c->t.model_slot[m] != NO_SLOT)
                    nd->slots |= 1ull << c->t.model_slot[m];
        }
        /* A job too big for every node of a model cannot use that model
         * either: a 120-core 8-GPU task is tied to the one model whose
         * nodes have 128 cores as surely as by a gpu_spec.  Knowing it
         * lets tarmac keep those nodes for it. */
        for (int sl = 0; sl < c->t.nslots; sl++)
            if ((nd->slots >> sl & 1) &&
                (c->t.slot_maxg[sl] < (nd->gpus > 0 ? nd->gpus : 1) || c->t.slot_maxcpu[sl] < nd->cpu ||
                 c->t.slot_maxmem[sl] < nd->mem))
                nd->slots &= ~(1ull << sl);
        if (nd->slots == 0 && (nd->gpus > 0 || nd->milli > 0))
            nd->nomatch = true;
    }
    return 0;
}

/* Job j could not be placed: a reservation if the policy gives it one,
 * else a note saying what it waits for.  Returns 0 or < 0 on error. */
static int blocked(struct ctx *c, int32_t j, struct sched_pass *ps, bool resblocked)
{
    const struct sched_policy *pol = c->pol;
    bool tried = false;
    int r;

    if (pol->on_blocked && pol->on_blocked(c, j, ps))
        return 0;
    if (pol->may_reserve && ps->nreserved < ps->max_reservations && pol->may_reserve(c, j, ps)) {
        tried = true;
        r = sched_reserve_noted(c, j, ps, pol->why_reserved(c, j));
        if (r < 0)
            return r;
        if (r == 1 && pol->on_reserved)
            pol->on_reserved(c, j, ps);
        if (r > 0)
            return 0;
    }
    /* A single job that place() found no node for, no reservation
     * refusing one, fits nowhere: the same scan without the reservations
     * would find nothing either (unless sched_reserve() moved the
     * capacity indexes since).  Most of a deep queue ends here. */
    {
        enum tm_sched_verdict v = TM_SCHED_WAIT_CAPACITY;
        const char *why = "no room now on an acceptable node";
        if (resblocked) {
            v = TM_SCHED_WAIT_RESERVATION;
            why = "would delay a reserved job";
        } else if ((c->needs[j].nodes > 1 || tried) && sched_fits_anywhere(c, j)) {
            v = TM_SCHED_WAIT_RESERVATION;
            why = "room only where a reservation needs it";
        }
        if (sched_late(c, j)) /* tarmac (late.c): say why an aged job is not first */
            why = "aged, past the bound whatever the order: waits behind the jobs of its nodes that can "
                  "still make it";
        sched_note(c, j, v, -1, 0, why);
    }
    if (ps->first_blocked < 0)
        ps->first_blocked = j;
    return 0;
}

int32_t tm_sched_max_reservations(const struct tm_sched_input *in)
{
    const struct sched_policy *pol = sched_policy_of(in->policy);

    return pol && pol->max_reservations > 0 ? pol->max_reservations
           : in->params.max_reservations > 0 ? in->params.max_reservations
                                              : TM_SCHED_MAX_RESERVATIONS_DEFAULT;
}

static int run_pass(struct ctx *c, const struct okey *keys)
{
    const struct tm_sched_input *in = c->in;
    const struct sched_policy *pol = c->pol;
    struct sched_pass ps = {.first_blocked = -1};
    int r;

    ps.max_reservations = tm_sched_max_reservations(in);
    for (size_t o = 0; o < in->njobs; o++) {
        int32_t j = keys[o].idx;
        bool gap = false, resblocked = false, partial;
        int placed;

        if (no_match(c, &c->needs[j])) {
            sched_note(c, j, TM_SCHED_NO_MATCH, -1, 0, "no node of an acceptable model and size exists");
            continue;
        }
        if (in->quota && (r = sched_quota_admit(c, j)) != 0) {
            if (r < 0)
                return r;
            continue;
        }
        if (pol->holds_back && pol->holds_back(c, j, &ps))
            continue;
        c->scan_cut = false;
        placed = pol->place(c, j, ps.nreserved > 0, &gap, &resblocked);
        partial = c->scan_cut;
        if (placed < 0)
            return placed;
        if (placed) {
            if (in->quota)
                sched_quota_placed(c, j);
            sched_note(c, j, TM_SCHED_PLACED, c->r.placements[c->r.nplacements - 1].node, in->now_ms,
                       pol->why_placed(c, j, &ps, gap));
            continue;
        }
        if (in->quota && (r = sched_quota_reclaim(c, j)) != 0) {
            if (r < 0)
                return r;
            continue;
        }
        r = blocked(c, j, &ps, resblocked);
        if (r < 0)
            return r;
        if (in->quota && c->r.notes[j].verdict == TM_SCHED_PLACED) /* by an eviction */
            sched_quota_placed(c, j);
        c->r.notes[j].partial = partial && c->r.notes[j].verdict != TM_SCHED_PLACED;
    }
    c->r.first_blocked = ps.first_blocked;
    return pol->finish ? pol->finish(c, &ps) : 0;
}

static void ctx_release(struct ctx *c)
{
    if (c->ns_cache)
        sched_node_cache_return(c);
    free(c->ns);
    free(c->needs);
    free(c->mark);
    free(c->tfull);
    free(c->tmax);
    free(c->tcpu);
    free(c->tmem);
    free(c->tmod);
    sched_buckets_release(c);
    free(c->astart);
    free(c->aorder);
    free(c->aend);
    free(c->asorted);
    free(c->aloaded);
    free(c->gend);
    free(c->gkept);
    free(c->freenow);
    free(c->plhead);
    free(c->plnext);
    free(c->rn);
    free(c->evicted);
    free(c->node_end);
    free(c->late);
}

int tm_sched_run(const struct tm_sched_input *in, struct tm_sched_result *ret)
{
    struct ctx c = {0};
    struct okey *keys = NULL;
    int r = TM_EINVAL;

    if (!in || !ret || !sched_policy_of(in->policy) || (in->njobs && !in->jobs) ||
        (in->nnodes && !in->nodes) || (in->nallocs && !in->allocs))
        return TM_EINVAL;
    c.in = in;
    c.pol = sched_policy_of(in->policy);
    r = validate_and_load(&c);
    if (r < 0)
        goto out;
    r = TM_ENOMEM;
    c.r.notes = calloc(in->njobs + 1, sizeof(*c.r.notes));
    keys = malloc((in->njobs + 1) * sizeof(*keys));
    if (!c.r.notes || !keys)
        goto out;
    c.r.nnotes = in->njobs;
    if (in->quota && (r = sched_quota_init(&c)) < 0)
        goto out;
    r = c.pol->prepare(&c);
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

int tm_sched_job_traits(const struct tm_sched_input *in, struct tm_sched_traits *out)
{
    struct tm_sched_input own;
    struct ctx c = {0};
    int r;

    if (!in || !out || (in->njobs && !in->jobs) || (in->nnodes && !in->nodes))
        return TM_EINVAL;
    /* The nodes' sizes alone: no allocs, no footprint. */
    own = *in;
    own.allocs = NULL;
    own.nallocs = 0;
    own.footprint = NULL;
    c.in = &own;
    r = validate_and_load(&c);
    for (size_t j = 0; r == 0 && j < in->njobs; j++) {
        out[j].tied = sched_tied(&c, (int32_t)j);
        out[j].constrained = sched_constrained(&c, (int32_t)j);
        out[j].flexible_limit = sched_flexible_limit(&c, (int32_t)j);
    }
    ctx_release(&c);
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
    free(r->reclaims);
    *r = (struct tm_sched_result){0};
}
