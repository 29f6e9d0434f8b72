/*
 * controller/sched/fifo.c: the fifo policy, a baseline.  Submit order,
 * first fit; the first job that does not fit blocks all behind it (a job
 * no node could ever hold is skipped, not waited on).  It never reserves.
 */
#include "controller/sched/scheduler.h"

#include "controller/sched/internal.h"

/* Behind a blocked head every job waits, whether it would fit or not. */
static bool fifo_holds_back(struct ctx *c, int32_t j, const struct sched_pass *ps)
{
    if (!ps->blocked_head)
        return false;
    if (sched_fits_anywhere(c, j))
        sched_note(c, j, TM_SCHED_WAIT_ORDER, -1, 0, "room exists but fifo waits for the queue head");
    else
        sched_note(c, j, TM_SCHED_WAIT_CAPACITY, -1, 0, "no room now, and behind the queue head");
    return true;
}

static bool fifo_on_blocked(struct ctx *c, int32_t j, struct sched_pass *ps)
{
    ps->blocked_head = true;
    sched_note(c, j, TM_SCHED_WAIT_CAPACITY, -1, 0, "queue head: no room now, blocks the queue");
    return true;
}

static const char *fifo_why_placed(const struct ctx *c, int32_t j, const struct sched_pass *ps, bool gap)
{
    (void)c;
    (void)j;
    (void)ps;
    (void)gap;
    return "first fit, in submit order";
}

const struct sched_policy sched_fifo = {
    .prepare = sched_tree_init,
    .order = sched_order_submit,
    .place = sched_place_firstfit,
    .holds_back = fifo_holds_back,
    .on_blocked = fifo_on_blocked,
    .why_placed = fifo_why_placed,
};
