/*
 * controller/sched/backfill.c: the backfill policy, a baseline: EASY.
 * Submit order, first fit; the first blocked job gets a reservation at its
 * earliest expected start; later jobs run if they do not delay it, judged
 * on their estimates as given.
 */
#include "controller/sched/scheduler.h"

#include "controller/sched/internal.h"

/* EASY reserves for the queue head, the only one (max_reservations). */
static bool backfill_may_reserve(struct ctx *c, int32_t j, struct sched_pass *ps)
{
    (void)c;
    (void)j;
    (void)ps;
    return true;
}

static const char *backfill_why_placed(const struct ctx *c, int32_t j, const struct sched_pass *ps,
                                       bool gap)
{
    (void)c;
    (void)j;
    if (ps->nreserved == 0)
        return "first fit, in submit order";
    return gap ? "backfilled: ends before the reservation" : "backfilled: leaves the reservation intact";
}

static const char *backfill_why_reserved(const struct ctx *c, int32_t j)
{
    (void)c;
    (void)j;
    return "queue head: reserved at the earliest expected start";
}

const struct sched_policy sched_backfill = {
    .max_reservations = 1,
    .prepare = sched_tree_init,
    .order = sched_order_submit,
    .place = sched_place_firstfit,
    .may_reserve = backfill_may_reserve,
    .why_placed = backfill_why_placed,
    .why_reserved = backfill_why_reserved,
};
