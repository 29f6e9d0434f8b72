/*
 * controller/sched/buckets.c: tarmac's best-fit index.
 *
 * Nodes by (GPU model slot, whole GPUs free), and GPUs with a share free
 * by (slot, milli free), each bucket read in one order: first the nodes
 * the pass has changed, the last changed first (pass-local intrusive
 * lists, whead/phead), then the others in ascending order (a sorted vector
 * per bucket, struct sched_buckets).  Within a node, partly used GPUs read
 * from the highest index down: the order the lists had when every pass
 * rebuilt them by pushing each node's GPUs in turn, so that every decision
 * stays what it was.
 *
 * The vectors describe the nodes as loaded, before the pass changes them,
 * and live in the node cache (node_cache.c) beside the cached nodes: a
 * node the caller touched moves between vectors when it is loaded again,
 * and a node the pass changed leaves its vectors at its first change and
 * goes back when the cache puts its state back.  Without a node cache
 * (the live tick, the elastic replay) there are no vectors: every node is
 * pushed into the lists at the start of the pass, from the last, which
 * gives the same order.  Rebuilding the index of every node at every
 * pass was a visible share of a long tarmac replay (index_add() in perf;
 * bench/results/replay-scale-2026-12-04-b.md), and a pass changes a few nodes.
 */
#include "controller/sched/scheduler.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "controller/sched/internal.h"
#include "core/err.h"

#define WB (TM_NODE_GPUS_MAX + 1)
#define G TM_NODE_GPUS_MAX

struct bvec {
    int32_t *v;
    int32_t n, cap;
};

struct sched_buckets {
    int nslots;
    size_t nn;
    struct bvec *w;  /* nslots * WB: nodes, ascending */
    struct bvec *p;  /* nslots * MILLI: node * G + (G - 1 - gpu), ascending */
    uint32_t *wbits; /* nslots: bit k while w[slot][k] is not empty */
    uint64_t *pbits; /* nslots * 16 words, the same for p */
    bool failed;     /* an allocation failed: not usable, rebuild */
};

void sched_buckets_free(struct sched_buckets *b)
{
    if (!b)
        return;
    if (b->w)
        for (size_t k = 0; k < (size_t)b->nslots * WB; k++)
            free(b->w[k].v);
    if (b->p)
        for (size_t k = 0; k < (size_t)b->nslots * MILLI; k++)
            free(b->p[k].v);
    free(b->w);
    free(b->p);
    free(b->wbits);
    free(b->pbits);
    free(b);
}

/* The position of x in v (sorted), or where it would go. */
static int32_t bvec_find(const struct bvec *b, int32_t x)
{
    int32_t lo = 0, hi = b->n;

    while (lo < hi) {
        int32_t mid = lo + (hi - lo) / 2;
        if (b->v[mid] < x)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

static int bvec_insert(struct bvec *b, int32_t x)
{
    int32_t at;

    if (b->n == b->cap) {
        int32_t ncap = b->cap ? b->cap * 2 : 4;
        int32_t *nv = realloc(b->v, (size_t)ncap * sizeof(*nv));
        if (!nv)
            return TM_ENOMEM;
        b->v = nv;
        b->cap = ncap;
    }
    at = b->n > 0 && b->v[b->n - 1] < x ? b->n : bvec_find(b, x);
    memmove(b->v + at + 1, b->v + at, (size_t)(b->n - at) * sizeof(*b->v));
    b->v[at] = x;
    b->n++;
    return 0;
}

static void bvec_remove(struct bvec *b, int32_t x)
{
    int32_t at = bvec_find(b, x);

    if (at < b->n && b->v[at] == x) {
        memmove(b->v + at, b->v + at + 1, (size_t)(b->n - at - 1) * sizeof(*b->v));
        b->n--;
    }
}

static void wbit_set(struct sched_buckets *b, int slot, int k)
{
    if (b->w[slot * WB + k].n > 0)
        b->wbits[slot] |= 1u << k;
    else
        b->wbits[slot] &= ~(1u << k);
}

static void pbit_set(struct sched_buckets *b, int slot, int f)
{
    if (b->p[slot * MILLI + f].n > 0)
        b->pbits[slot * 16 + f / 64] |= 1ull << (f % 64);
    else
        b->pbits[slot * 16 + f / 64] &= ~(1ull << (f % 64));
}

/* Whether node i has a GPU partly used (only those are in the share
 * lists): not when none is free or all are. */
static bool has_partial(const struct nst *s)
{
    return s->maxfree > 0 && s->full < s->gpus;
}

/* Node i, in state s, into its vectors (add) or out of them. */
static void vec_node(struct sched_buckets *b, const struct nst *s, int32_t i, bool add)
{
    if (!s->ok || s->mslot < 0 || s->mslot >= b->nslots)
        return;
    if (s->full > 0) {
        struct bvec *v = &b->w[s->mslot * WB + s->full];
        if (!add)
            bvec_remove(v, i);
        else if (bvec_insert(v, i) < 0)
            b->failed = true;
        wbit_set(b, s->mslot, s->full);
    }
    if (!has_partial(s))
        return;
    for (int g = 0; g < s->gpus; g++) {
        int f = s->free[g];
        struct bvec *v;
        if (f <= 0 || f >= MILLI)
            continue;
        v = &b->p[s->mslot * MILLI + f];
        if (!add)
            bvec_remove(v, i * G + (G - 1 - g));
        else if (bvec_insert(v, i * G + (G - 1 - g)) < 0)
            b->failed = true;
        pbit_set(b, s->mslot, f);
    }
}

void sched_buckets_node_out(struct sched_buckets *b, const struct nst *s, int32_t i)
{
    if (b)
        vec_node(b, s, i, false);
}

void sched_buckets_node_in(struct sched_buckets *b, const struct nst *s, int32_t i)
{
    if (b)
        vec_node(b, s, i, true);
}

/* The vectors of nodes ns[0..nn), built in ascending order (appends). */
static int buckets_build(const struct nst *ns, size_t nn, int nslots, struct sched_buckets **ret)
{
    struct sched_buckets *b = calloc(1, sizeof(*b));
    size_t n = (size_t)(nslots > 0 ? nslots : 1);

    *ret = NULL;
    if (!b)
        return TM_ENOMEM;
    b->nslots = (int)n;
    b->nn = nn;
    b->w = calloc(n * WB, sizeof(*b->w));
    b->p = calloc(n * MILLI, sizeof(*b->p));
    b->wbits = calloc(n, sizeof(*b->wbits));
    b->pbits = calloc(n * 16, sizeof(*b->pbits));
    if (!b->w || !b->p || !b->wbits || !b->pbits) {
        sched_buckets_free(b);
        return TM_ENOMEM;
    }
    for (size_t i = 0; i < nn; i++)
        vec_node(b, &ns[i], (int32_t)i, true);
    if (b->failed) {
        sched_buckets_free(b);
        return TM_ENOMEM;
    }
    *ret = b;
    return 0;
}

#ifndef NDEBUG
static bool bvec_has(const struct bvec *b, int32_t x)
{
    int32_t at = bvec_find(b, x);

    return at < b->n && b->v[at] == x;
}

/* Whether the buckets hold exactly the nodes ns[0..nn) in order, with
 * their bits right (debug builds check the cache's at every pass): every
 * entry the nodes call for is in its vector, each vector is strictly
 * ascending, and there are no more entries than called for. */
static bool buckets_equal(const struct sched_buckets *a, const struct nst *ns, size_t nn)
{
    size_t want = 0, have = 0;

    for (size_t i = 0; i < nn; i++) {
        const struct nst *s = &ns[i];
        if (!s->ok || s->mslot < 0 || s->mslot >= a->nslots)
            continue;
        if (s->full > 0) {
            want++;
            if (!bvec_has(&a->w[s->mslot * WB + s->full], (int32_t)i))
                return false;
        }
        for (int g = 0; g < s->gpus && has_partial(s); g++)
            if (s->free[g] > 0 && s->free[g] < MILLI) {
                want++;
                if (!bvec_has(&a->p[s->mslot * MILLI + s->free[g]], (int32_t)i * G + (G - 1 - g)))
                    return false;
            }
    }
    for (int sl = 0; sl < a->nslots; sl++) {
        for (int k = 0; k < WB; k++) {
            const struct bvec *v = &a->w[sl * WB + k];
            for (int32_t x = 1; x < v->n; x++)
                if (v->v[x - 1] >= v->v[x])
                    return false;
            if (!(a->wbits[sl] >> k & 1) != !v->n)
                return false;
            have += (size_t)v->n;
        }
        for (int f = 0; f < MILLI; f++) {
            const struct bvec *v = &a->p[sl * MILLI + f];
            for (int32_t x = 1; x < v->n; x++)
                if (v->v[x - 1] >= v->v[x])
                    return false;
            if (!(a->pbits[sl * 16 + f / 64] >> (f % 64) & 1) != !v->n)
                return false;
            have += (size_t)v->n;
        }
    }
    return want == have;
}
#endif

/* ---------- the pass's front lists ---------- */

/* Bucket 0 (no whole GPU free) is never read (best_node() starts at one
 * free GPU): a node there is in no list.  The pass's wbits and pbits say
 * which buckets have a node in either part. */
static void wsync(struct ctx *c, int slot, int k)
{
    if (c->whead[slot * WB + k] >= 0 || (c->bk && c->bk->w[slot * WB + k].n > 0))
        c->wbits[slot] |= 1u << k;
    else
        c->wbits[slot] &= ~(1u << k);
}

static void psync(struct ctx *c, int slot, int f)
{
    if (c->phead[slot * MILLI + f] >= 0 || (c->bk && c->bk->p[slot * MILLI + f].n > 0))
        c->pbits[slot * 16 + f / 64] |= 1ull << (f % 64);
    else
        c->pbits[slot * 16 + f / 64] &= ~(1ull << (f % 64));
}

static void wlist_add(struct ctx *c, int32_t i)
{
    const struct nst *s = &c->ns[i];
    int32_t *head;

    if (!s->ok || s->mslot < 0 || s->full == 0)
        return;
    head = &c->whead[s->mslot * WB + s->full];
    c->wprev[i] = -1;
    c->wnext[i] = *head;
    if (*head >= 0)
        c->wprev[*head] = i;
    *head = i;
    c->wbits[s->mslot] |= 1u << s->full;
}

static void wlist_del(struct ctx *c, int32_t i)
{
    const struct nst *s = &c->ns[i];

    if (!s->ok || s->mslot < 0 || s->full == 0)
        return;
    if (c->wprev[i] >= 0)
        c->wnext[c->wprev[i]] = c->wnext[i];
    else
        c->whead[s->mslot * WB + s->full] = c->wnext[i];
    if (c->wnext[i] >= 0)
        c->wprev[c->wnext[i]] = c->wprev[i];
    wsync(c, s->mslot, s->full);
}

static void plist_add(struct ctx *c, int32_t i, int g)
{
    const struct nst *s = &c->ns[i];
    int32_t id = i * G + g;
    int f = s->free[g];
    int32_t *head;

    if (!s->ok || s->mslot < 0 || f <= 0 || f >= MILLI)
        return;
    head = &c->phead[s->mslot * MILLI + f];
    c->pprev[id] = -1;
    c->pnext[id] = *head;
    if (*head >= 0)
        c->pprev[*head] = id;
    *head = id;
    c->pbits[s->mslot * 16 + f / 64] |= 1ull << (f % 64);
}

static void plist_del(struct ctx *c, int32_t i, int g)
{
    const struct nst *s = &c->ns[i];
    int32_t id = i * G + g;
    int f = s->free[g];

    if (!s->ok || s->mslot < 0 || f <= 0 || f >= MILLI)
        return;
    if (c->pprev[id] >= 0)
        c->pnext[c->pprev[id]] = c->pnext[id];
    else
        c->phead[s->mslot * MILLI + f] = c->pnext[id];
    if (c->pnext[id] >= 0)
        c->pprev[c->pnext[id]] = c->pprev[id];
    psync(c, s->mslot, f);
}

/* Before node i changes: out of its vectors at its first change in the
 * pass (the cache puts it back with its state), else out of its lists. */
void sched_buckets_del(struct ctx *c, int32_t i)
{
    const struct nst *s = &c->ns[i];

    if (c->bk && !c->fronted[i]) {
        c->fronted[i] = 1;
        c->front[c->nfront++] = i;
        vec_node(c->bk, s, i, false);
        if (s->ok && s->mslot >= 0 && s->mslot < c->bk->nslots) {
            if (s->full > 0)
                wsync(c, s->mslot, s->full);
            for (int g = 0; g < s->gpus; g++)
                if (s->free[g] > 0 && s->free[g] < MILLI)
                    psync(c, s->mslot, s->free[g]);
        }
        return;
    }
    wlist_del(c, i);
    if (has_partial(s))
        for (int g = 0; g < s->gpus; g++)
            plist_del(c, i, g);
}

/* After node i changed: at the front of its lists. */
void sched_buckets_add(struct ctx *c, int32_t i)
{
    wlist_add(c, i);
    if (has_partial(&c->ns[i]))
        for (int g = 0; g < c->ns[i].gpus; g++)
            plist_add(c, i, g);
}

int sched_buckets_init(struct ctx *c)
{
    size_t ns = (size_t)(c->t.nslots > 0 ? c->t.nslots : 1);
    struct sched_buckets **kept = c->kept_buckets;
    int r;

    if (kept && *kept && ((*kept)->failed || (size_t)(*kept)->nslots != ns || (*kept)->nn != c->nn)) {
        sched_buckets_free(*kept);
        *kept = NULL;
    }
    c->whead = malloc(ns * WB * sizeof(*c->whead));
    c->wbits = calloc(ns, sizeof(*c->wbits));
    c->phead = malloc(ns * MILLI * sizeof(*c->phead));
    c->pbits = calloc(ns * 16, sizeof(*c->pbits));
    c->wnext = malloc((c->nn + 1) * sizeof(*c->wnext));
    c->wprev = malloc((c->nn + 1) * sizeof(*c->wprev));
    c->pnext = malloc((c->nn + 1) * G * sizeof(*c->pnext));
    c->pprev = malloc((c->nn + 1) * G * sizeof(*c->pprev));
    if (!c->whead || !c->wbits || !c->phead || !c->pbits || !c->wnext || !c->wprev || !c->pnext ||
        !c->pprev)
        return TM_ENOMEM;
    memset(c->whead, 0xff, ns * WB * sizeof(*c->whead));
    memset(c->phead, 0xff, ns * MILLI * sizeof(*c->phead));
    c->buckets = true;
    if (!kept) {
        /* No cache: every node in the front lists, pushed from the last
         * so that each list starts with the lowest index. */
        for (size_t i = c->nn; i-- > 0;)
            sched_buckets_add(c, (int32_t)i);
        return 0;
    }
    if (*kept) {
#ifndef NDEBUG
        /* A touch missed, or a change the pass did not put back, would
         * leave the kept buckets unlike the nodes: fail the tests. */
        if (!buckets_equal(*kept, c->ns, c->nn)) {
            fprintf(stderr, "tm_sched_run: the kept buckets differ from the nodes\n");
            abort();
        }
#endif
    } else {
        r = buckets_build(c->ns, c->nn, (int)ns, kept);
        if (r < 0)
            return r;
    }
    c->fronted = calloc(c->nn + 1, sizeof(*c->fronted));
    c->front = malloc((c->nn + 1) * sizeof(*c->front));
    if (!c->fronted || !c->front)
        return TM_ENOMEM;
    c->bk = *kept;
    memcpy(c->wbits, c->bk->wbits, ns * sizeof(*c->wbits));
    memcpy(c->pbits, c->bk->pbits, ns * 16 * sizeof(*c->pbits));
    return 0;
}

/* The end of a pass on the cache's nodes, once their states are back:
 * the nodes it changed back into their vectors. */
void sched_buckets_return(struct ctx *c)
{
    if (!c->bk)
        return;
    for (size_t k = 0; k < c->nfront; k++)
        vec_node(c->bk, &c->ns[c->front[k]], c->front[k], true);
    c->nfront = 0;
}

void sched_buckets_release(struct ctx *c)
{
    c->bk = NULL; /* the cache's */
    free(c->whead);
    free(c->wbits);
    free(c->wnext);
    free(c->wprev);
    free(c->phead);
    free(c->pnext);
    free(c->pprev);
    free(c->pbits);
    free(c->fronted);
    free(c->front);
}

/* ---------- reading a bucket in order ---------- */

static int32_t iter_start(const struct ctx *c, int32_t head, const struct bvec *vec, bool gpus,
                          struct sched_biter *it)
{
    *it = (struct sched_biter){.c = c, .vec = vec, .cur = head, .front = true, .gpus = gpus};
    return head >= 0 ? head : sched_biter_next(it);
}

int32_t sched_witer_first(const struct ctx *c, int slot, int k, struct sched_biter *it)
{
    return iter_start(c, c->whead[slot * WB + k], c->bk ? &c->bk->w[slot * WB + k] : NULL, false, it);
}

int32_t sched_piter_first(const struct ctx *c, int slot, int f, struct sched_biter *it)
{
    return iter_start(c, c->phead[slot * MILLI + f], c->bk ? &c->bk->p[slot * MILLI + f] : NULL, true, it);
}

/* The next node (whole buckets) or GPU id, node * G + GPU (shares), -1
 * at the end. */
int32_t sched_biter_next(struct sched_biter *it)
{
    if (it->front && it->cur >= 0) {
        it->cur = it->gpus ? it->c->pnext[it->cur] : it->c->wnext[it->cur];
        if (it->cur >= 0)
            return it->cur;
    }
    it->front = false;
    if (!it->vec || it->at >= it->vec->n)
        return it->cur = -1;
    it->cur = it->vec->v[it->at++];
    if (it->gpus)
        it->cur = (it->cur / G) * G + (G - 1 - it->cur % G);
    return it->cur;
}

int sched_pbits_next(const struct ctx *c, int slot, int from)
{
    const uint64_t *b = &c->pbits[slot * 16];

    if (from < 1)
        from = 1;
    for (int w = from / 64; w < 16; w++) {
        uint64_t v = b[w];
        if (w == from / 64)
            v &= ~0ull << (from % 64);
        if (v) {
            int f = w * 64 + __builtin_ctzll(v);
            return f < MILLI ? f : -1;
        }
    }
    return -1;
}
