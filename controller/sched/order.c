/*
 * controller/sched/order.c: the order in which the pass considers the
 * queued jobs: the order hooks of the policies (submit order for fifo and
 * backfill; tarmac's aging levels, bonuses and aged tiers) and the sort.
 */
#include "controller/sched/scheduler.h"

#include <stdlib.h>
#include <string.h>

#include "controller/sched/internal.h"

/* ---------- ordering ---------- */

static int cmp_okey(const void *a, const void *b)
{
    const struct okey *x = a, *y = b;

    for (int i = 0; i < 5; i++)
        if (x->k[i] != y->k[i])
            return x->k[i] < y->k[i] ? -1 : 1;
    return x->idx < y->idx ? -1 : x->idx > y->idx;
}

/* How far an aged narrow job moves back in the order for its estimate:
 * TM_SCHED_NARROW_SJF_MUL times it, at most TM_SCHED_NARROW_SJF_CAP_MS.
 * Narrow jobs queue for the same few nodes, often one at a time (a
 * P100-only task needing 12 of the one P100 node's 16 cores): shortest
 * first there passes fewer of them over the bound, and the cap keeps
 * a long one from being passed for ever when estimates are wrong.  On
 * gpuspec33 a small multiplier with a long cap passed the fewest jobs over
 * the bound: a large multiplier with a short cap flattens every estimate
 * past a few minutes, and submit order passes the most. */
static int64_t narrow_shift(int64_t est)
{
    if (est <= 0)
        return 0;
    if (est >= TM_SCHED_NARROW_SJF_CAP_MS / TM_SCHED_NARROW_SJF_MUL)
        return TM_SCHED_NARROW_SJF_CAP_MS;
    return est * TM_SCHED_NARROW_SJF_MUL;
}

/* fifo, backfill: submit order. */
void sched_order_submit(const struct ctx *c, int32_t j, struct okey *k)
{
    const struct tm_sched_job *jb = &c->in->jobs[j];

    k->k[0] = jb->submit_ms;
    k->k[1] = jb->id;
}

/* tarmac, a job aged past half the bound: ahead of all.  Jobs tied to
 * few nodes (sched_tied(): by a model_mask or by their size alone) first:
 * they have a few nodes, a flexible job has many, and on gpuspec33 an
 * aged 8-GPU flexible job placed first on the one G3 node (21 h,
 * estimated 7 min) pushed the G3-only jobs behind it past the bound.
 * Among them, those that can still start within the bound before those
 * that cannot (c->late, late.c: Moore-Hodgson over the jobs that queue
 * for the same nodes), and within each, submit order moved by their
 * estimate (narrow_shift()), so a long one does not hold their node while
 * short ones pass the bound.
 * Those tied by size and those tied by a model_mask are one tier: they
 * queue for the same nodes, and with the model_mask ones ahead, G3-only
 * jobs submitted later passed a 120-core 8-GPU job on gpuspec33 seed 2
 * (64 GPUs, load 1.1: started at 53.6 h).  Then the rest, in submit
 * order. */
static void order_aged(const struct ctx *c, int32_t j, int64_t dflt, struct okey *k)
{
    const struct tm_sched_job *jb = &c->in->jobs[j];
    bool few = sched_tied(c, j);
    int64_t est = jb->estimate_ms > 0 ? jb->estimate_ms : dflt;

    k->k[0] = 0;
    k->k[1] = few ? 0 : 1;
    k->k[2] = sched_late(c, j);
    k->k[3] = jb->submit_ms + (few ? narrow_shift(est) : 0);
    k->k[4] = jb->id;
}

/* tarmac: aged jobs first (order_aged()), then priority classes, each
 * lifted one level per quarter of the starvation bound waited; within a
 * level submit order, short eval/preprocess/inference work and jobs tied
 * to few models moved up (tm_sched_tarmac_lead_ms()); less work first
 * last. */
void sched_order_tarmac(const struct ctx *c, int32_t j, struct okey *k)
{
    const struct tm_sched_input *in = c->in;
    const struct tm_sched_job *jb = &in->jobs[j];
    const struct need *nd = &c->needs[j];
    int64_t dflt = sched_default_estimate_ms(&in->params);

    if (sched_is_urgent(c, j)) {
        order_aged(c, j, dflt, k);
        return;
    }
    int64_t est = jb->estimate_ms > 0 ? jb->estimate_ms : dflt;
    int64_t gpu_milli = (int64_t)(nd->gpus > 0 ? nd->gpus * MILLI : nd->milli) * nd->nodes;
    /* Work in GPU-seconds, at least a tenth of a GPU so CPU-heavy
     * shares are not free: the last tie-break, less work first. */
    if (gpu_milli < 100)
        gpu_milli = 100;
    int64_t age = in->now_ms - jb->submit_ms;
    int64_t level = age > 0 ? age / tm_sched_tarmac_level_ms(&in->params) : 0;
    k->k[0] = 1;
    k->k[1] = -((int64_t)jb->priority + level);
    k->k[2] = jb->submit_ms - tm_sched_tarmac_lead_ms(&in->params, jb, sched_constrained(c, j));
    k->k[3] = (est / 1000) * gpu_milli;
    k->k[4] = jb->id;
}

/* cmp_okey() < 0, inline for the sort below. */
static inline bool okey_less(const struct okey *x, const struct okey *y)
{
    for (int i = 0; i < 5; i++)
        if (x->k[i] != y->k[i])
            return x->k[i] < y->k[i];
    return x->idx < y->idx;
}

/* Merge sort of v[0..n) by okey_less() with tmp[0..n) as scratch;
 * insertion sort below 16.  The keys are a total order (idx breaks every
 * tie), so the result is qsort()'s; with the comparison inline it is
 * about twice as fast, and tarmac sorts its whole queue at every pass
 * (a fifth of a deep-queue replay, perf, 125,000 synthetic jobs). */
static void okey_sort(struct okey *v, struct okey *tmp, size_t n)
{
    size_t h, i, a, b;

    if (n < 16) {
        for (i = 1; i < n; i++) {
            struct okey key = v[i];
            size_t y = i;
            while (y > 0 && okey_less(&key, &v[y - 1])) {
                v[y] = v[y - 1];
                y--;
            }
            v[y] = key;
        }
        return;
    }
    h = n / 2;
    okey_sort(v, tmp, h);
    okey_sort(v + h, tmp, n - h);
    if (!okey_less(&v[h], &v[h - 1]))
        return; /* already in order: most of the queue from pass to pass */
    memcpy(tmp, v, h * sizeof(*v));
    for (i = 0, a = 0, b = h; a < h; i++) {
        if (b < n && okey_less(&v[b], &tmp[a]))
            v[i] = v[b++];
        else
            v[i] = tmp[a++];
    }
}

void sched_order(const struct ctx *c, struct okey *keys)
{
    size_t n = c->in->njobs;
    struct okey *tmp;

    for (size_t j = 0; j < n; j++) {
        memset(&keys[j], 0, sizeof(keys[j]));
        keys[j].idx = (int32_t)j;
        c->pol->order(c, (int32_t)j, &keys[j]);
    }
    if (n < 2)
        return;
    tmp = malloc((n / 2 + 1) * sizeof(*tmp));
    if (!tmp) {
        qsort(keys, n, sizeof(*keys), cmp_okey);
        return;
    }
    okey_sort(keys, tmp, n);
    free(tmp);
}
