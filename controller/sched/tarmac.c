/*
 * controller/sched/tarmac.c: the tarmac policy, the product.
 *
 *  order:   priority classes, each lifted one level per quarter of the
 *           starvation bound waited; within a level submit order, short
 *           eval/preprocess/inference work and jobs tied to few models
 *           moved up by at most short_ms; jobs aged past half the bound
 *           first of all: those tied to few nodes (tied(): by a model_mask
 *           or by size) first, those that can still start within the
 *           bound ahead of those that cannot (late.c: Moore-Hodgson per
 *           set of nodes), each by submit time plus 4x their estimate
 *           capped at 12 h, then the rest, in submit order.
 *  place:   best fit on free whole GPUs (so big nodes stay whole) or on
 *           the tightest partly used GPU for a share; among candidates,
 *           first avoid models that model-constrained queued jobs need,
 *           then strand the least (GPU milli left that no queued job
 *           could use: too little CPU/memory left, or slivers below the
 *           smallest share asked), then the tightest fit, then CPU.  A job
 *           too big for every node of a model counts as constrained away
 *           from it.
 *  reserve: for jobs aged past half the bound (among those that many
 *           nodes can hold, one at a time, for heavy ones one per 64 GPUs,
 *           drains under way included, jobs at risk aside), jobs that held one in
 *           the previous pass (hold_node) and narrow jobs (a model_mask
 *           whose nodes hold at most a quarter of the GPUs: narrow()) as
 *           soon as they are blocked, up to max_reservations; a flexible
 *           job's reservation avoids nodes of models that narrow jobs
 *           wait for unless they start it 6 h earlier; heavy jobs (4+
 *           whole GPUs per node, not narrow) hold reservations on at most
 *           an eighth of the GPUs at a time, the first and the drains
 *           already under way always (drains for 8-GPU jobs run one after
 *           another on a small fleet instead of emptying several nodes at
 *           once: heavy_capped()), except a job at risk: one that,
 *           reserving now, would start within bound/16 of the bound
 *           (at_risk(); also for a job tied to few nodes by its size, not
 *           yet aged: it then reserves ahead instead of at half the
 *           bound); and,
 *           when none was made, after everything that fits is placed, for
 *           the first blocked job if its models' free GPUs would hold it in
 *           total but no single node does (see fragmented()).  A
 *           reservation sticks to the node it held, so a drain, once
 *           begun, completes.
 *  fill:    a non-preemptible job may use a reserved node before the start
 *           only if twice its estimate ends by the start first promised
 *           (hold_start_ms), and never for an aged owner: with runtimes up
 *           to a day and the default 48 h bound, an aged job's drain then
 *           ends within the bound.  Preemptible work may use any reserved
 *           node on loan whatever its estimate and is evicted
 *           (tm_sched_preemption) the moment the reserved job can start, so
 *           it never holds capacity reserved for non-preemptible work.
 *
 * The order is sched_order_tarmac() (order.c), the placement
 * sched_place_best() (place.c), reservations and loans are in reserve.c;
 * this file says when each applies and what the notes say.
 */
#include "controller/sched/scheduler.h"

#include <stdlib.h>

#include "controller/sched/internal.h"
#include "core/err.h"

/* Queue-derived inputs of tarmac's score: which models constrained jobs
 * wait for, and the smallest CPU, memory and share a GPU job asks. */
static void tarmac_queue_inputs(struct ctx *c)
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
            for (int sl = 0; sl < c->t.nslots; sl++)
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

/* Loans on (preemptible work may borrow reserved room, gap fillers fit
 * TM_SCHED_GAP_SAFETY times over, reservations stick to their node), the
 * queue's inputs to the score, and the best-fit buckets. */
static int tarmac_prepare(struct ctx *c)
{
    c->loans = true;
    c->evicted = calloc(c->in->nallocs + 1, sizeof(*c->evicted));
    if (!c->evicted)
        return TM_ENOMEM;
    tarmac_queue_inputs(c);
    if (sched_late_init(c) < 0)
        return TM_ENOMEM;
    return sched_buckets_init(c);
}

/* tarmac reserves for aged jobs and keeps the ones it made; a fresh
 * blocked job gets one only at the end of the pass (tarmac_finish()), if
 * the capacity it needs is merely fragmented: a reservation drains a
 * node, and draining for every blocked head when the cluster is full
 * costs the many small jobs more than it gives the few big ones (measured
 * on openb).  Narrow jobs reserve as soon as they are blocked; a job at
 * risk of the bound (sched_at_risk()) goes past the drain cap, and a job
 * tied to few nodes by size reserves as soon as it is at risk: on
 * gpuspec33 a job only one model's big nodes could hold otherwise spent
 * its aged half behind drains on other models under the cap and started
 * past the bound. */
static bool tarmac_may_reserve(struct ctx *c, int32_t j, struct sched_pass *ps)
{
    bool wants = sched_is_urgent(c, j) || c->in->jobs[j].hold_node > 0 || sched_narrow(c, j);
    bool capped = sched_heavy_capped(c, j, ps->drain_gpus);
    bool flexible = !sched_tied(c, j);
    int r;

    /* A job that many nodes can hold starts on the first room that opens
     * in any of them, and aged it is first in the order: it needs a
     * reservation only against later jobs that fit where it does not.
     * One such reservation at a time (the drains under way count), as EASY
     * backfill holds, plus jobs at risk: on openb default under load,
     * aged flexible jobs holding several closed drains at once cost
     * the small jobs more in mean and p95 wait than one at a time.
     * For a heavy job, one per 64 GPUs
     * (tm_sched_tarmac_flexible_limit()): small jobs take every GPU that
     * frees, so under load an aged 8-GPU job starts only through a drain,
     * and on a larger fleet they come faster than one drain at a time
     * serves.  One on any fleet starved 8-GPU jobs under a sustained
     * overload (synthetic traces at load 1.1: 183 at 256 GPUs, 615 at 512
     * with 100,000 jobs, 3,616 with 200,000; none with the limit), and the
     * openb grid and held-out traces are the same to the job
     * (scheduler-targets-2026-12-04.md). */
    if (flexible && c->in->jobs[j].hold_node == 0 && ps->nflexible >= sched_flexible_limit(c, j)) {
        if (!wants)
            return false;
        r = sched_at_risk(c, j, &ps->linked);
        return r != 0;
    }
    if (wants && !capped)
        return true;
    /* A job tied to few nodes, or a heavy one whose turn under the drain
     * cap would come too late, reserves as soon as waiting for it would
     * take it to the margin of the bound (sched_at_risk()).  An error
     * answers yes: sched_reserve() then meets it again and returns it. */
    if (!wants && flexible)
        return false;
    r = sched_at_risk(c, j, &ps->linked);
    return r != 0;
}

int32_t tm_sched_tarmac_flexible_limit(int64_t gpus)
{
    return gpus >= 2 * TM_SCHED_FLEXIBLE_GPUS ? (int32_t)(gpus / TM_SCHED_FLEXIBLE_GPUS) : 1;
}

/* One, and for a heavy job one per 64 GPUs (tarmac_may_reserve()). */
int32_t sched_flexible_limit(const struct ctx *c, int32_t j)
{
    return sched_heavy(c, j) ? tm_sched_tarmac_flexible_limit(c->t.all_gpus) : 1;
}

static void tarmac_on_reserved(const struct ctx *c, int32_t j, struct sched_pass *ps)
{
    const struct need *nd = &c->needs[j];

    if (sched_heavy(c, j))
        ps->drain_gpus += (int64_t)nd->gpus * nd->nodes;
    if (!sched_tied(c, j))
        ps->nflexible++;
}

static const char *tarmac_why_placed(const struct ctx *c, int32_t j, const struct sched_pass *ps, bool gap)
{
    const struct need *nd = &c->needs[j];

    (void)ps;
    if (sched_late(c, j))
        return "aged, past the bound whatever the order: placed after the jobs of its nodes that can still make it";
    if (sched_is_urgent(c, j))
        return "aged past half the starvation bound, placed first";
    if (gap)
        return "gap fill: ends before a reserved job needs the GPUs";
    if (nd->nodes > 1)
        return "gang placed whole, best fit on each node";
    if (nd->gpus == 0 && nd->milli > 0)
        return "share on the tightest GPU that fits";
    return "best fit: fewest free GPUs left, least stranded";
}

static const char *tarmac_why_reserved(const struct ctx *c, int32_t j)
{
    if (sched_late(c, j))
        return "aged, past the bound whatever the order: reserved after the jobs of its nodes that can "
               "still make it";
    return sched_is_urgent(c, j) ? "aged: reserved at the earliest expected start"
                                 : "first blocked: reserved at the earliest expected start";
}

/* After everything that fits has been placed, GPUs of the first blocked
 * job's models still free in total but on no single node idle while it
 * waits: only then is draining one node for it free. */
static int tarmac_finish(struct ctx *c, struct sched_pass *ps)
{
    int32_t j = ps->first_blocked;
    int r;

    if (j < 0 || ps->nreserved > 0 || !sched_fragmented(c, &c->needs[j]))
        return 0;
    r = sched_reserve_noted(c, j, ps, "reserved: free GPUs of its models are fragmented and would idle");
    return r < 0 ? r : 0;
}

const struct sched_policy sched_tarmac = {
    .prepare = tarmac_prepare,
    .order = sched_order_tarmac,
    .place = sched_place_best,
    .may_reserve = tarmac_may_reserve,
    .on_reserved = tarmac_on_reserved,
    .why_placed = tarmac_why_placed,
    .why_reserved = tarmac_why_reserved,
    .finish = tarmac_finish,
};
