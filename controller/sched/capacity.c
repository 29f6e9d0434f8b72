/*
 * controller/sched/capacity.c: the pass's free capacity and its two indexes.
 *
 * Every node's free capacity is a struct nst, changed only by
 * sched_node_take() and sched_node_give(), which keep the index of the
 * policy in step:
 *
 *  - first fit (fifo, backfill) finds the lowest-numbered node that fits.
 *    A max-segment-tree over the nodes (largest free whole-GPU count,
 *    largest free share, CPU, memory, OR of model bits per subtree) finds
 *    that node in O(log N) in the common case: a subtree whose maxima
 *    cannot hold the job is skipped whole.
 *  - best fit (tarmac) keeps nodes by (GPU model, free whole GPUs), and
 *    GPUs with a partial share free by (model, free milli) with a bitmap
 *    of the non-empty ones, so the tightest fit is a few word scans away
 *    (buckets.c).
 */
#include "controller/sched/scheduler.h"

#include <stdlib.h>
#include <string.h>

#include "controller/sched/internal.h"
#include "core/err.h"

/* ---------- small helpers ---------- */

int sched_grow(void **p, size_t *cap, size_t need, size_t size)
{
    size_t n;
    void *q;

    if (need <= *cap)
        return 0;
    n = *cap ? *cap * 2 : 64;
    while (n < need)
        n *= 2;
    q = realloc(*p, n * size);
    if (!q)
        return TM_ENOMEM;
    *p = q;
    *cap = n;
    return 0;
}

void sched_nst_refresh(struct nst *s)
{
    int full = 0, mx = 0;

    for (int g = 0; g < s->gpus; g++) {
        if (s->free[g] == MILLI)
            full++;
        if (s->free[g] > mx)
            mx = s->free[g];
    }
    s->full = (int8_t)full;
    s->maxfree = (int16_t)mx;
}

int64_t sched_nst_free_milli(const struct nst *s)
{
    int64_t t = 0;

    for (int g = 0; g < s->gpus; g++)
        t += s->free[g];
    return t;
}

/* Whether a node has room for one member of the job now, ignoring
 * reservations. */
bool sched_nst_fits(const struct nst *s, const struct need *nd)
{
    if (!s->ok || s->cpu < nd->cpu || s->mem < nd->mem)
        return false;
    if (nd->gpus > 0)
        return s->mslot >= 0 && (nd->slots >> s->mslot & 1) && s->full >= nd->gpus;
    if (nd->milli > 0)
        return s->mslot >= 0 && (nd->slots >> s->mslot & 1) && s->maxfree >= nd->milli;
    return true;
}

/* Choose GPUs on a node that fits: whole GPUs lowest index first; a share
 * first-fit (fifo, backfill) or tightest-fit (tarmac). */
uint32_t sched_pick_gpus(const struct nst *s, const struct need *nd, bool tight)
{
    uint32_t mask = 0;
    int best = -1;

    if (nd->gpus > 0) {
        int left = nd->gpus;
        for (int g = 0; g < s->gpus && left > 0; g++)
            if (s->free[g] == MILLI) {
                mask |= 1u << g;
                left--;
            }
        return left == 0 ? mask : 0;
    }
    if (nd->milli == 0)
        return 0;
    for (int g = 0; g < s->gpus; g++) {
        if (s->free[g] < nd->milli)
            continue;
        if (!tight) {
            best = g;
            break;
        }
        if (best < 0 || s->free[g] < s->free[best])
            best = g;
    }
    return best < 0 ? 0 : 1u << best;
}

/* ---------- first-fit tree ---------- */

static void tree_leaf(struct ctx *c, size_t i)
{
    size_t t = c->tsize + i;
    const struct nst *s = &c->ns[i];

    if (!s->ok) {
        c->tfull[t] = -1;
        c->tmax[t] = -1;
        c->tcpu[t] = -1;
        c->tmem[t] = -1;
        c->tmod[t] = 0;
        return;
    }
    c->tfull[t] = s->full;
    c->tmax[t] = s->maxfree;
    c->tcpu[t] = s->cpu;
    c->tmem[t] = s->mem;
    /* Bit 63 stands for "any node" so CPU-only jobs are not pruned. */
    c->tmod[t] = (s->mslot >= 0 ? 1ull << s->mslot : 0) | (1ull << 63);
}

static void tree_pull(struct ctx *c, size_t t)
{
    size_t l = 2 * t, r = l + 1;

    c->tfull[t] = c->tfull[l] > c->tfull[r] ? c->tfull[l] : c->tfull[r];
    c->tmax[t] = c->tmax[l] > c->tmax[r] ? c->tmax[l] : c->tmax[r];
    c->tcpu[t] = c->tcpu[l] > c->tcpu[r] ? c->tcpu[l] : c->tcpu[r];
    c->tmem[t] = c->tmem[l] > c->tmem[r] ? c->tmem[l] : c->tmem[r];
    c->tmod[t] = c->tmod[l] | c->tmod[r];
}

static void tree_update(struct ctx *c, size_t i)
{
    tree_leaf(c, i);
    for (size_t t = (c->tsize + i) / 2; t >= 1; t /= 2)
        tree_pull(c, t);
}

int sched_tree_init(struct ctx *c)
{
    size_t n = 1;

    while (n < c->nn)
        n *= 2;
    c->tsize = n;
    c->tfull = malloc(2 * n * sizeof(*c->tfull));
    c->tmax = malloc(2 * n * sizeof(*c->tmax));
    c->tcpu = malloc(2 * n * sizeof(*c->tcpu));
    c->tmem = malloc(2 * n * sizeof(*c->tmem));
    c->tmod = malloc(2 * n * sizeof(*c->tmod));
    if (!c->tfull || !c->tmax || !c->tcpu || !c->tmem || !c->tmod)
        return TM_ENOMEM;
    for (size_t i = 0; i < n; i++) {
        if (i < c->nn) {
            tree_leaf(c, i);
        } else {
            size_t t = n + i;
            c->tfull[t] = -1;
            c->tmax[t] = -1;
            c->tcpu[t] = -1;
            c->tmem[t] = -1;
            c->tmod[t] = 0;
        }
    }
    for (size_t t = n - 1; t >= 1; t--)
        tree_pull(c, t);
    return 0;
}

static bool tree_may(const struct ctx *c, size_t t, const struct need *nd, uint64_t mods)
{
    if (!(c->tmod[t] & mods) || c->tcpu[t] < nd->cpu || c->tmem[t] < nd->mem)
        return false;
    if (nd->gpus > 0)
        return c->tfull[t] >= nd->gpus;
    if (nd->milli > 0)
        return c->tmax[t] >= nd->milli;
    return true;
}

static int64_t tree_find_rec(const struct ctx *c, size_t t, size_t lo, size_t hi, size_t from,
                             const struct need *nd, uint64_t mods)
{
    int64_t i;

    if (hi <= from || !tree_may(c, t, nd, mods))
        return -1;
    if (hi - lo == 1)
        return sched_nst_fits(&c->ns[lo], nd) && c->mark[lo] != c->gen ? (int64_t)lo : -1;
    i = tree_find_rec(c, 2 * t, lo, lo + (hi - lo) / 2, from, nd, mods);
    if (i >= 0)
        return i;
    return tree_find_rec(c, 2 * t + 1, lo + (hi - lo) / 2, hi, from, nd, mods);
}

/* Leftmost node >= from that fits, skipping nodes taken by the gang being
 * placed; -1 if none.  A subtree whose maxima cannot hold the job is
 * skipped whole, so a full cluster answers at the root. */
int64_t sched_tree_find(const struct ctx *c, size_t from, const struct need *nd)
{
    uint64_t mods = (nd->gpus > 0 || nd->milli > 0) ? nd->slots : (1ull << 63);

    if (from >= c->nn)
        return -1;
    return tree_find_rec(c, 1, 0, c->tsize, from, nd, mods);
}

/* ---------- the policy's index ---------- */

/* The index of the policy in step with node i's state (best-fit buckets:
 * buckets.c; else the first-fit tree, once changed). */
static void index_del(struct ctx *c, int32_t i)
{
    if (c->buckets)
        sched_buckets_del(c, i);
}

static void index_add(struct ctx *c, int32_t i)
{
    if (c->buckets)
        sched_buckets_add(c, i);
    else
        tree_update(c, (size_t)i);
}

/* ---------- applying placements ---------- */

void sched_node_take(struct ctx *c, int32_t i, uint32_t mask, int32_t milli, const struct need *nd)
{
    struct nst *s = &c->ns[i];

    sched_node_save(c, i);
    c->version++;
    index_del(c, i);
    for (int g = 0; g < s->gpus; g++)
        if (mask >> g & 1) {
            s->free[g] = (int16_t)(s->free[g] - milli);
            if (s->ok && s->mslot >= 0)
                c->t.slot_free[s->mslot] -= milli;
        }
    s->cpu -= nd->cpu;
    s->mem -= nd->mem;
    sched_nst_refresh(s);
    index_add(c, i);
}

void sched_node_give(struct ctx *c, int32_t i, uint32_t mask, int32_t milli, const struct need *nd)
{
    struct nst *s = &c->ns[i];

    sched_node_save(c, i);
    c->version++;
    index_del(c, i);
    for (int g = 0; g < s->gpus; g++)
        if (mask >> g & 1) {
            s->free[g] = (int16_t)(s->free[g] + milli);
            if (s->ok && s->mslot >= 0)
                c->t.slot_free[s->mslot] += milli;
        }
    s->cpu += nd->cpu;
    s->mem += nd->mem;
    sched_nst_refresh(s);
    index_add(c, i);
}

int sched_add_placement(struct ctx *c, int32_t job, int32_t node, uint32_t mask, int32_t milli,
                         bool loaned)
{
    struct tm_sched_placement *p;
    int r = sched_grow((void **)&c->r.placements, &c->capplace, c->r.nplacements + 1,
                 sizeof(*c->r.placements));

    if (r < 0)
        return r;
    c->version++;
    p = &c->r.placements[c->r.nplacements++];
    memset(p, 0, sizeof(*p)); /* padding too: callers may compare bytes */
    p->job = job;
    p->node = node;
    p->gpu_mask = mask;
    p->gpu_milli = milli;
    p->loaned = loaned;
    return 0;
}
