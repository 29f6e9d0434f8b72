/*
 * controller/replay/replay_fifo.c: the time replay's fifo pass,
 * incremental (a struct replay_pass, replay_engine.h).
 *
 * fifo starts jobs in arrival order and nothing behind a blocked head, so
 * a pass over the first FIFO_PREFIX queued jobs decides what a pass over
 * the whole queue would (the jobs behind them cannot change a decision
 * before them); when all are placed, the next ones go through a pass at
 * the same instant with the room left.  A pass after arrivals alone, the
 * head blocked, places nothing: skipped.  The same placements as a full
 * pass at every event (test_replay_incremental), in O(FIFO_PREFIX + nodes
 * + running jobs) instead of O(queue).
 */
#include "controller/replay/replay_pass.h"

#include <stdlib.h>

#include "core/err.h"

/* Jobs fifo hands one pass at a time: the head and a few behind it. */
#define FIFO_PREFIX 32

struct fifo_pass {
    struct replay_engine *e;
    /* The queue in arrival order from head on (e->arr; fifo starts jobs
     * in that order), and whether the last pass left the head blocked
     * with nothing ended since (then an arrival changes nothing). */
    size_t head;
    bool blocked;
    struct tm_sched_job *pq;                   /* the prefix handed to the pass */
    int32_t *pqpos;                            /* its queue positions */
};

static void fifo_release(void *state)
{
    struct fifo_pass *f = state;

    if (!f)
        return;
    free(f->pq);
    free(f->pqpos);
    free(f);
}

/* fifo reads no expected end (no reservations, no align_ends). */
static int fifo_init(struct replay_engine *e, void **state)
{
    const struct tm_replay_config *cfg = e->cfg;
    struct fifo_pass *f;

    if (cfg->policy != TM_POLICY_FIFO || cfg->full_pass || cfg->params.align_ends)
        return 0;
    f = calloc(1, sizeof(*f));
    if (!f)
        return TM_ENOMEM;
    f->e = e;
    f->pq = malloc(FIFO_PREFIX * sizeof(*f->pq));
    f->pqpos = malloc(FIFO_PREFIX * sizeof(*f->pqpos));
    if (!f->pq || !f->pqpos) {
        fifo_release(f);
        return TM_ENOMEM;
    }
    *state = f;
    return 1;
}

/* Room freed: the head may fit. */
static void fifo_ended(void *state)
{
    struct fifo_pass *f = state;

    f->blocked = false;
}

static int fifo_run(void *state, int64_t now, struct tm_replay_stats *st, size_t narrived)
{
    struct fifo_pass *f = state;
    struct replay_engine *e = f->e;
    size_t c;

    if (f->blocked)
        return 0;
    while (f->head < narrived && e->jobs[e->arr[f->head]].qpos < 0)
        f->head++;
    c = f->head;
    for (;;) {
        size_t n = 0;
        bool blocked;
        int rc;
        for (; c < narrived && n < FIFO_PREFIX; c++) {
            const struct rjob *rj = &e->jobs[e->arr[c]];
            if (rj->qpos < 0)
                continue;
            f->pq[n] = e->q[rj->qpos];
            f->pqpos[n++] = rj->qpos;
        }
        if (n == 0)
            return 0;
        rc = replay_pass_once(e, now, st, f->pq, n, f->pqpos, &blocked);
        if (rc < 0)
            return rc;
        if (blocked) {
            f->blocked = true;
            return 0;
        }
    }
}

const struct replay_pass replay_pass_fifo = {
    .name = "fifo",
    .init = fifo_init,
    .release = fifo_release,
    .ended = fifo_ended,
    .run = fifo_run,
};
