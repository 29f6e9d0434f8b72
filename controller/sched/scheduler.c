/*
 * controller/sched/scheduler.c: one scheduling pass (see scheduler.h).
 *
 * The pass works on a private copy of the free capacity of every node
 * (struct nst) and keeps two indexes over it, whichever the policy needs:
 *
 *  - fifo and backfill place first-fit, i.e. on the lowest-numbered node that
 *    fits.  A max-segment-tree over the nodes (largest free whole-GPU count,
 *    largest free share, CPU, memory, OR of model bits per subtree) finds that
 *    node in O(log N) in the common case: a subtree whose maxima cannot hold
 *    the job is skipped whole.
 *  - tarmac places best-fit with a fragmentation score.  Nodes sit in
 *    intrusive lists by (GPU model, free whole GPUs), and GPUs with a partial
 *    share free sit in lists by (model, free milli) with a bitmap of the
 *    non-empty ones, so the tightest fit is a few word scans away.
 *
 * Reservations (backfill, tarmac) are computed from the expected ends of the
 * running jobs, node by node, and recorded per node with what will have been
 * released on that node by the reserved start.  A later job may use a
 * reserved node if the reserved job still fits at the start with the later
 * job still running, or if it ends by the start (gap filling).
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

#include "core/err.h"

#define MILLI 1000
#define NO_SLOT (-1)
#define INF_MS INT64_MAX
/* How many entries of one bucket tarmac inspects before giving up on it:
 * bounds the pass when many nodes have GPUs but no CPU or memory left. */
#define SCAN_MAX 256
/* Candidates tarmac scores per (model, free-GPU) bucket. */
#define CAND_PER_BUCKET 4
#define TM_SCHED_GAP_SAFETY 2
/* A job whose models hold at most this fraction (1/N) of the GPUs is
 * narrow: tarmac reserves for it as soon as it is blocked. */
#define TM_SCHED_NARROW_DIV 4
/* How much later a reservation may start to stay off a node that jobs
 * tied to its model wait for. */
#define TM_SCHED_PRESSURE_PENALTY_MS (6LL * 3600 * 1000)
/* Aged narrow jobs: ordered by submit + MUL x estimate, capped (see
 * narrow_shift()). */
#define TM_SCHED_NARROW_SJF_MUL 4
#define TM_SCHED_NARROW_SJF_CAP_MS (12LL * 3600 * 1000)
/* Heavy jobs (whole GPUs >= TM_SCHED_HEAVY_GPUS per node) drain at most
 * 1/TM_SCHED_DRAIN_DIV of the GPUs at a time (at least one job). */
#define TM_SCHED_HEAVY_GPUS 4
#define TM_SCHED_DRAIN_DIV 8

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

/* Free capacity of one node during the pass. */
struct nst {
    int64_t cpu;
    int64_t mem;
    int16_t free[TM_NODE_GPUS_MAX]; /* milli free per GPU */
    int8_t gpus;
    int8_t full;      /* GPUs with all 1000 milli free */
    int16_t maxfree;  /* largest free[] */
    int32_t mslot;    /* compact model slot */
    int32_t res;      /* reservation record, NO_SLOT if none */
    bool ok;          /* schedulable */
};

/* What a job needs on each of its nodes. */
struct need {
    int64_t cpu;
    int64_t mem;
    uint64_t slots;   /* acceptable model slots (bit per slot) */
    int32_t gpus;     /* whole GPUs */
    int32_t milli;    /* share when gpus == 0; 0 for CPU-only */
    int32_t nodes;
    bool nomatch;     /* no model has a node big enough */
};

/* A reservation as seen on one node. */
struct rnode {
    int32_t job;
    int64_t start;
    int64_t deadline;  /* gap fillers end by this: min(start, first promise) */
    bool closed;       /* tarmac, owner aged: no non-preemptible fillers */
    bool preemptible;
    struct need need;
    int32_t rel[TM_NODE_GPUS_MAX]; /* milli released on this node by start */
    int64_t rel_cpu;
    int64_t rel_mem;
};

struct ctx {
    const struct tm_sched_input *in;
    size_t nn;
    struct nst *ns;
    struct need *needs;
    uint64_t all_slots;
    int nslots;
    int32_t model_slot[TM_GPU_MODELS_MAX];
    /* per model slot: the largest node, for the no-match test */
    int32_t slot_maxg[TM_GPU_MODELS_MAX];
    int64_t slot_gpus[TM_GPU_MODELS_MAX]; /* GPUs on schedulable nodes */
    int64_t all_gpus;
    int64_t slot_maxcpu[TM_GPU_MODELS_MAX];
    int64_t slot_maxmem[TM_GPU_MODELS_MAX];
    int64_t any_maxcpu, any_maxmem;
    int64_t slot_free[TM_GPU_MODELS_MAX]; /* free GPU milli per model, kept current */

    /* first-fit tree (fifo, backfill) */
    size_t tsize;
    int8_t *tfull;
    int16_t *tmax;
    int64_t *tcpu;
    int64_t *tmem;
    uint64_t *tmod;

    /* best-fit buckets (tarmac) */
    bool buckets;
    int32_t *whead; /* nslots * (TM_NODE_GPUS_MAX + 1) */
    int32_t *wnext, *wprev;
    int32_t *phead; /* nslots * MILLI */
    int32_t *pnext, *pprev; /* per node * TM_NODE_GPUS_MAX */
    uint64_t *pbits; /* nslots * 16 words */
    int64_t pressure[TM_GPU_MODELS_MAX]; /* constrained queued demand, milli */
    bool narrow_wants[TM_GPU_MODELS_MAX]; /* a narrow job (narrow()) accepts it */
    bool any_narrow;                      /* some queued job is narrow */
    int64_t strand_cpu, strand_mem;      /* smallest CPU/memory a GPU job asks */
    int32_t strand_share;                /* smallest share a queued job asks */

    /* gang bookkeeping: nodes used by the gang being placed */
    uint32_t *mark;
    uint32_t gen;

    /* reservation timelines: running allocs by node, sorted by end */
    bool timeline;
    int32_t *astart;   /* nn + 1 */
    int32_t *aorder;
    int32_t *plhead;   /* per node: placements made in this pass */
    int32_t *plnext;   /* per placement */
    size_t plcap_links;
    struct rnode *rn;
    size_t nrn, caprn;

    struct tm_sched_result r;
    size_t capplace, capres, capprm;
    int64_t *node_end; /* align_ends: latest expected end of each node's work */
    bool loans;        /* tarmac: preemptible work may borrow reserved room */
    bool *evicted;     /* per input alloc, once preempted in this pass */
};

/* ---------- small helpers ---------- */

static int grow(void **p, size_t *cap, size_t need, size_t size)
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

static int popcount64(uint64_t v)
{
    return __builtin_popcountll(v);
}

static void nst_refresh(struct nst *s)
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

static int64_t nst_free_milli(const struct nst *s)
{
    int64_t t = 0;

    for (int g = 0; g < s->gpus; g++)
        t += s->free[g];
    return t;
}

/* Whether a node has room for one member of the job now, ignoring
 * reservations. */
static bool nst_fits(const struct nst *s, const struct need *nd)
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
static uint32_t pick_gpus(const struct nst *s, const struct need *nd, bool tight)
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

static int tree_init(struct ctx *c)
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
        return nst_fits(&c->ns[lo], nd) && c->mark[lo] != c->gen ? (int64_t)lo : -1;
    i = tree_find_rec(c, 2 * t, lo, lo + (hi - lo) / 2, from, nd, mods);
    if (i >= 0)
        return i;
    return tree_find_rec(c, 2 * t + 1, lo + (hi - lo) / 2, hi, from, nd, mods);
}

/* Leftmost node >= from that fits, skipping nodes taken by the gang being
 * placed; -1 if none.  A subtree whose maxima cannot hold the job is
 * skipped whole, so a full cluster answers at the root. */
static int64_t tree_find(const struct ctx *c, size_t from, const struct need *nd)
{
    uint64_t mods = (nd->gpus > 0 || nd->milli > 0) ? nd->slots : (1ull << 63);

    if (from >= c->nn)
        return -1;
    return tree_find_rec(c, 1, 0, c->tsize, from, nd, mods);
}

/* ---------- best-fit buckets ---------- */

static void wlist_add(struct ctx *c, int32_t i)
{
    const struct nst *s = &c->ns[i];
    int32_t *head;

    if (!s->ok || s->mslot < 0)
        return;
    head = &c->whead[s->mslot * (TM_NODE_GPUS_MAX + 1) + s->full];
    c->wprev[i] = -1;
    c->wnext[i] = *head;
    if (*head >= 0)
        c->wprev[*head] = i;
    *head = i;
}

static void wlist_del(struct ctx *c, int32_t i)
{
    const struct nst *s = &c->ns[i];

    if (!s->ok || s->mslot < 0)
        return;
    if (c->wprev[i] >= 0)
        c->wnext[c->wprev[i]] = c->wnext[i];
    else
        c->whead[s->mslot * (TM_NODE_GPUS_MAX + 1) + s->full] = c->wnext[i];
    if (c->wnext[i] >= 0)
        c->wprev[c->wnext[i]] = c->wprev[i];
}

static void plist_add(struct ctx *c, int32_t i, int g)
{
    const struct nst *s = &c->ns[i];
    int32_t id = i * TM_NODE_GPUS_MAX + g;
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
    int32_t id = i * TM_NODE_GPUS_MAX + g;
    int f = s->free[g];
    int32_t *head;

    if (!s->ok || s->mslot < 0 || f <= 0 || f >= MILLI)
        return;
    head = &c->phead[s->mslot * MILLI + f];
    if (c->pprev[id] >= 0)
        c->pnext[c->pprev[id]] = c->pnext[id];
    else
        *head = c->pnext[id];
    if (c->pnext[id] >= 0)
        c->pprev[c->pnext[id]] = c->pprev[id];
    if (*head < 0)
        c->pbits[s->mslot * 16 + f / 64] &= ~(1ull << (f % 64));
}

static void index_del(struct ctx *c, int32_t i)
{
    if (!c->buckets)
        return;
    wlist_del(c, i);
    for (int g = 0; g < c->ns[i].gpus; g++)
        plist_del(c, i, g);
}

static void index_add(struct ctx *c, int32_t i)
{
    if (c->buckets) {
        wlist_add(c, i);
        for (int g = 0; g < c->ns[i].gpus; g++)
            plist_add(c, i, g);
    } else {
        tree_update(c, (size_t)i);
    }
}

static int buckets_init(struct ctx *c)
{
    size_t ns = (size_t)(c->nslots > 0 ? c->nslots : 1);

    c->whead = malloc(ns * (TM_NODE_GPUS_MAX + 1) * sizeof(*c->whead));
    c->phead = malloc(ns * MILLI * sizeof(*c->phead));
    c->pbits = calloc(ns * 16, sizeof(*c->pbits));
    c->wnext = malloc((c->nn + 1) * sizeof(*c->wnext));
    c->wprev = malloc((c->nn + 1) * sizeof(*c->wprev));
    c->pnext = malloc((c->nn + 1) * TM_NODE_GPUS_MAX * sizeof(*c->pnext));
    c->pprev = malloc((c->nn + 1) * TM_NODE_GPUS_MAX * sizeof(*c->pprev));
    if (!c->whead || !c->phead || !c->pbits || !c->wnext || !c->wprev || !c->pnext || !c->pprev)
        return TM_ENOMEM;
    memset(c->whead, 0xff, ns * (TM_NODE_GPUS_MAX + 1) * sizeof(*c->whead));
    memset(c->phead, 0xff, ns * MILLI * sizeof(*c->phead));
    c->buckets = true;
    /* Insert in reverse so that each list starts with the lowest index:
     * ties then go to the lowest node, which keeps the pass deterministic
     * and easy to read in a test. */
    for (size_t i = c->nn; i-- > 0;)
        index_add(c, (int32_t)i);
    return 0;
}

/* First set bit at or above `from` in a model slot's 1000-bit map, or -1. */
static int pbits_next(const struct ctx *c, int slot, int from)
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

/* ---------- applying placements ---------- */

static void node_take(struct ctx *c, int32_t i, uint32_t mask, int32_t milli, const struct need *nd)
{
    struct nst *s = &c->ns[i];

    index_del(c, i);
    for (int g = 0; g < s->gpus; g++)
        if (mask >> g & 1) {
            s->free[g] = (int16_t)(s->free[g] - milli);
            if (s->ok && s->mslot >= 0)
                c->slot_free[s->mslot] -= milli;
        }
    s->cpu -= nd->cpu;
    s->mem -= nd->mem;
    nst_refresh(s);
    index_add(c, i);
}

static void node_give(struct ctx *c, int32_t i, uint32_t mask, int32_t milli, const struct need *nd)
{
    struct nst *s = &c->ns[i];

    index_del(c, i);
    for (int g = 0; g < s->gpus; g++)
        if (mask >> g & 1) {
            s->free[g] = (int16_t)(s->free[g] + milli);
            if (s->ok && s->mslot >= 0)
                c->slot_free[s->mslot] += milli;
        }
    s->cpu += nd->cpu;
    s->mem += nd->mem;
    nst_refresh(s);
    index_add(c, i);
}

static int add_placement(struct ctx *c, int32_t job, int32_t node, uint32_t mask, int32_t milli,
                         bool loaned)
{
    struct tm_sched_placement *p;
    int r = grow((void **)&c->r.placements, &c->capplace, c->r.nplacements + 1,
                 sizeof(*c->r.placements));

    if (r < 0)
        return r;
    p = &c->r.placements[c->r.nplacements++];
    memset(p, 0, sizeof(*p)); /* padding too: callers may compare bytes */
    p->job = job;
    p->node = node;
    p->gpu_mask = mask;
    p->gpu_milli = milli;
    p->loaned = loaned;
    return 0;
}

/* ---------- reservations ---------- */

static bool is_urgent(const struct ctx *c, int32_t j)
{
    const struct tm_sched_input *in = c->in;
    int64_t bound = in->params.starvation_ms > 0 ? in->params.starvation_ms
                                                 : TM_SCHED_STARVATION_DEFAULT_MS;

    /* Half the bound: a job promoted then still has the other half to get
     * through its reservation, which covers the longest estimate we trust. */
    return in->now_ms - in->jobs[j].submit_ms >= bound / 2;
}

/* A job's estimate as an end time for reservations; unknown is never. */
static int64_t job_end(const struct ctx *c, int32_t j)
{
    int64_t e = c->in->jobs[j].estimate_ms;

    if (e <= 0 || c->in->now_ms > INF_MS - e)
        return INF_MS;
    return c->in->now_ms + e;
}

/* The end a gap filler must meet.  Estimates from history are often short
 * (half of them, on the openb trace, by up to 10x at p95): tarmac asks a
 * gap filler to fit TM_SCHED_GAP_SAFETY times over, so an overrun rarely
 * delays the reservation; EASY backfill takes the estimate as it is. */
static int64_t job_end_safe(const struct ctx *c, int32_t j)
{
    int64_t e = c->in->jobs[j].estimate_ms;

    if (!c->loans)
        return job_end(c, j);
    if (e <= 0 || e > (INF_MS - c->in->now_ms) / TM_SCHED_GAP_SAFETY)
        return INF_MS;
    return c->in->now_ms + e * TM_SCHED_GAP_SAFETY;
}

static int64_t alloc_end(const struct ctx *c, int32_t a)
{
    int64_t e = c->in->allocs[a].end_ms;

    /* An overdue job is expected to end any moment: the caller corrects
     * its estimate, we only refuse to plan in the past. */
    return e < c->in->now_ms ? c->in->now_ms : e;
}

static int cmp_alloc_end(const void *a, const void *b, void *arg)
{
    const struct ctx *c = arg;
    int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    int64_t ex = alloc_end(c, x), ey = alloc_end(c, y);

    if (ex != ey)
        return ex < ey ? -1 : 1;
    return x < y ? -1 : x > y;
}

static int timeline_init(struct ctx *c)
{
    const struct tm_sched_input *in = c->in;
    size_t na = in->nallocs;

    c->astart = calloc(c->nn + 1, sizeof(*c->astart));
    c->aorder = malloc((na + 1) * sizeof(*c->aorder));
    c->plhead = malloc((c->nn + 1) * sizeof(*c->plhead));
    if (!c->astart || !c->aorder || !c->plhead)
        return TM_ENOMEM;
    memset(c->plhead, 0xff, (c->nn + 1) * sizeof(*c->plhead));
    for (size_t a = 0; a < na; a++)
        c->astart[in->allocs[a].node + 1]++;
    for (size_t i = 0; i < c->nn; i++)
        c->astart[i + 1] += c->astart[i];
    {
        int32_t *pos = malloc((c->nn + 1) * sizeof(*pos));
        if (!pos)
            return TM_ENOMEM;
        memcpy(pos, c->astart, (c->nn + 1) * sizeof(*pos));
        for (size_t a = 0; a < na; a++)
            c->aorder[pos[in->allocs[a].node]++] = (int32_t)a;
        free(pos);
    }
    for (size_t i = 0; i < c->nn; i++)
        if (c->astart[i + 1] - c->astart[i] > 1)
            qsort_r(c->aorder + c->astart[i], (size_t)(c->astart[i + 1] - c->astart[i]),
                sizeof(*c->aorder), cmp_alloc_end, c);
    c->timeline = true;
    return 0;
}

/* Link the placements made so far in this pass into per-node lists, so a
 * reservation sees them release too.  Called lazily. */
static int timeline_sync(struct ctx *c, size_t *linked)
{
    int r = grow((void **)&c->plnext, &c->plcap_links, c->r.nplacements + 1, sizeof(*c->plnext));

    if (r < 0)
        return r;
    for (size_t p = *linked; p < c->r.nplacements; p++) {
        int32_t n = c->r.placements[p].node;
        c->plnext[p] = c->plhead[n];
        c->plhead[n] = (int32_t)p;
    }
    *linked = c->r.nplacements;
    return 0;
}

struct release {
    int64_t end;
    uint32_t mask;
    int32_t milli;
    int64_t cpu;
    int64_t mem;
};

static int cmp_release(const void *a, const void *b)
{
    const struct release *x = a, *y = b;

    if (x->end != y->end)
        return x->end < y->end ? -1 : 1;
    return 0;
}

/* Earliest time node i could hold one member of the job, replaying the
 * expected ends of what runs there.  Fills *ret_rel with what has been
 * released by that time.  INF_MS if never (by known estimates). */
static int64_t node_earliest(struct ctx *c, int32_t i, const struct need *nd, bool evict,
                             struct release **buf, size_t *cap, struct rnode *ret_rel)
{
    const struct tm_sched_input *in = c->in;
    struct nst s = c->ns[i];
    size_t k = 0;
    int64_t t = INF_MS;

    memset(ret_rel->rel, 0, sizeof(ret_rel->rel));
    ret_rel->rel_cpu = 0;
    ret_rel->rel_mem = 0;
    if (nst_fits(&s, nd))
        return in->now_ms;
    for (int32_t a = c->astart[i]; a < c->astart[i + 1]; a++) {
        const struct tm_sched_alloc *al = &in->allocs[c->aorder[a]];
        if (grow((void **)buf, cap, k + 1, sizeof(**buf)) < 0)
            return -1;
        if (c->evicted && c->evicted[c->aorder[a]])
            continue; /* already given back in this pass */
        /* Loans are evicted for a non-preemptible owner: they count as
         * released now. */
        (*buf)[k++] = (struct release){evict && al->loaned && al->preemptible ? in->now_ms
                                                                              : alloc_end(c, c->aorder[a]),
                                       al->gpu_mask, al->gpu_milli, al->cpu_milli, al->memory_mib};
    }
    for (int32_t p = c->plhead[i]; p >= 0; p = c->plnext[p]) {
        const struct tm_sched_placement *pl = &c->r.placements[p];
        const struct need *pn = &c->needs[pl->job];
        if (grow((void **)buf, cap, k + 1, sizeof(**buf)) < 0)
            return -1;
        (*buf)[k++] = (struct release){job_end(c, pl->job), pl->gpu_mask, pl->gpu_milli,
                                       pn->cpu, pn->mem};
    }
    if (k > 1)
        qsort(*buf, k, sizeof(**buf), cmp_release);
    for (size_t x = 0; x < k; x++) {
        const struct release *rl = &(*buf)[x];
        if (rl->end == INF_MS)
            break;
        for (int g = 0; g < s.gpus; g++)
            if (rl->mask >> g & 1) {
                s.free[g] = (int16_t)(s.free[g] + rl->milli);
                ret_rel->rel[g] += rl->milli;
            }
        s.cpu += rl->cpu;
        s.mem += rl->mem;
        ret_rel->rel_cpu += rl->cpu;
        ret_rel->rel_mem += rl->mem;
        /* Releases at the same instant go together. */
        if (x + 1 < k && (*buf)[x + 1].end == rl->end)
            continue;
        nst_refresh(&s);
        if (nst_fits(&s, nd)) {
            t = rl->end;
            break;
        }
    }
    return t;
}

/* Whether node i could hold the reservation it carries if `extra` (mask,
 * milli, cpu, mem) were taken now and still held at the reserved start. */
static bool reservation_survives(const struct ctx *c, int32_t i, uint32_t mask, int32_t milli,
                                 const struct need *nd)
{
    const struct rnode *rv = &c->rn[c->ns[i].res];
    struct nst s = c->ns[i];

    for (int g = 0; g < s.gpus; g++) {
        int v = s.free[g] + rv->rel[g] - ((mask >> g & 1) ? milli : 0);
        s.free[g] = (int16_t)(v > MILLI ? MILLI : v);
    }
    s.cpu += rv->rel_cpu - nd->cpu;
    s.mem += rv->rel_mem - nd->mem;
    nst_refresh(&s);
    return nst_fits(&s, &rv->need);
}

/* May job j take (mask, milli) on node i now without delaying a
 * reservation there?  *ret_gap tells whether it ends before the start. */
static bool reservation_permits(const struct ctx *c, int32_t j, int32_t i, uint32_t mask,
                                int32_t milli, bool *ret_gap, bool *ret_loan)
{
    const struct rnode *rv;

    *ret_gap = false;
    *ret_loan = false;
    if (c->ns[i].res == NO_SLOT)
        return true;
    rv = &c->rn[c->ns[i].res];
    if (rv->job == j)
        return true;
    /* Preemptible work never holds capacity against non-preemptible work:
     * a preemptible reservation does not stop non-preemptible jobs... */
    if (rv->preemptible && !c->in->jobs[j].preemptible)
        return true;
    if (reservation_survives(c, i, mask, milli, &c->needs[j]))
        return true;
    /* ...and preemptible work may fill a reserved hole whatever its
     * estimate, on loan: it is evicted the moment the owner can start. */
    if (c->loans && c->in->jobs[j].preemptible && !rv->preemptible) {
        *ret_loan = true;
        return true;
    }
    /* Fillers for a job already aged past half the bound are refused:
     * one that overran would push it past the bound, and estimates are
     * often short; loans (above) still use the hole. */
    if (!rv->closed && job_end_safe(c, j) <= rv->deadline) {
        *ret_gap = true;
        return true;
    }
    return false;
}

/* A job placed in a gap releases before the reserved start: count what it
 * holds as released by then, so the reservation's arithmetic stays exact. */
static void reservation_note_gap(struct ctx *c, int32_t i, uint32_t mask, int32_t milli,
                                 const struct need *nd)
{
    struct rnode *rv = &c->rn[c->ns[i].res];

    for (int g = 0; g < c->ns[i].gpus; g++)
        if (mask >> g & 1)
            rv->rel[g] += milli;
    rv->rel_cpu += nd->cpu;
    rv->rel_mem += nd->mem;
}

struct cand {
    int32_t node;
    int64_t t;
    int64_t key;       /* t, or later on a node narrow jobs need (tarmac) */
    struct rnode rel;
};

static int cmp_cand(const void *a, const void *b)
{
    const struct cand *x = a, *y = b;

    if (x->key != y->key)
        return x->key < y->key ? -1 : 1;
    if (x->t != y->t)
        return x->t < y->t ? -1 : 1;
    return x->node < y->node ? -1 : x->node > y->node;
}

static int add_preemption(struct ctx *c, int32_t a, int32_t j)
{
    int r = grow((void **)&c->r.preemptions, &c->capprm, c->r.npreemptions + 1,
                 sizeof(*c->r.preemptions));

    if (r < 0)
        return r;
    c->r.preemptions[c->r.npreemptions++] = (struct tm_sched_preemption){a, j};
    return 0;
}

static struct need alloc_need(const struct tm_sched_alloc *al)
{
    return (struct need){.cpu = al->cpu_milli, .mem = al->memory_mib};
}

/* The reserved job j can start now on cands[0..nodes) once the loans there
 * are evicted: evict the fewest (those with the most time left first) and
 * place it.  All or nothing.  Returns 1 placed, 0 not, < 0 error. */
static int evict_for(struct ctx *c, int32_t j, const struct cand *cands)
{
    const struct tm_sched_input *in = c->in;
    const struct need *nd = &c->needs[j];
    int32_t milli = nd->gpus ? MILLI : nd->milli, k;
    size_t p0 = c->r.npreemptions;
    uint32_t masks[64];
    int r = 0;

    for (k = 0; k < nd->nodes; k++) {
        int32_t i = cands[k].node;
        while (!nst_fits(&c->ns[i], nd)) {
            int32_t pick = -1;
            for (int32_t a = c->astart[i]; a < c->astart[i + 1]; a++) {
                int32_t ai = c->aorder[a];
                const struct tm_sched_alloc *al = &in->allocs[ai];
                if (c->evicted[ai] || !al->loaned || !al->preemptible)
                    continue;
                if (pick < 0 || al->end_ms > in->allocs[pick].end_ms)
                    pick = ai;
            }
            if (pick < 0)
                goto undo;
            {
                struct need an = alloc_need(&in->allocs[pick]);
                r = add_preemption(c, pick, j);
                if (r < 0)
                    goto undo;
                c->evicted[pick] = true;
                node_give(c, i, in->allocs[pick].gpu_mask, in->allocs[pick].gpu_milli, &an);
            }
        }
        masks[k] = pick_gpus(&c->ns[i], nd, true);
        node_take(c, i, masks[k], milli, nd);
    }
    for (k = 0; k < nd->nodes; k++) {
        r = add_placement(c, j, cands[k].node, masks[k], milli, false);
        if (r < 0)
            return r;
    }
    return 1;
undo:
    /* Give back in reverse: the members placed, then the evictions. */
    while (k-- > 0)
        node_give(c, cands[k].node, masks[k], milli, nd);
    while (c->r.npreemptions > p0) {
        const struct tm_sched_preemption *pr = &c->r.preemptions[--c->r.npreemptions];
        const struct tm_sched_alloc *al = &in->allocs[pr->alloc];
        struct need an = alloc_need(al);
        c->evicted[pr->alloc] = false;
        node_take(c, al->node, al->gpu_mask, al->gpu_milli, &an);
    }
    return r < 0 ? r : 0;
}

/* Whether the models with a node big enough for the job (its model_mask,
 * or its size alone: a 120-core 8-GPU task fits only 128-core nodes) hold
 * at most 1/TM_SCHED_NARROW_DIV of the GPUs. */
static bool tied(const struct ctx *c, int32_t j)
{
    const struct need *nd = &c->needs[j];
    int64_t have = 0;

    if (nd->gpus == 0 && nd->milli == 0)
        return false;
    for (int s = 0; s < c->nslots; s++)
        if (nd->slots >> s & 1)
            have += c->slot_gpus[s];
    return have * TM_SCHED_NARROW_DIV <= c->all_gpus;
}

/* Whether the job asks for GPU models (model_mask) and those models' nodes
 * big enough for it hold at most 1/TM_SCHED_NARROW_DIV of the GPUs.  Such
 * a job competes for a few nodes with every flexible job that lands there;
 * waiting for the aging bound before reserving starved it on gpuspec33
 * (64 GPUs: a P100-only task needing 12 of the one big P100 node's 16
 * cores waited behind every small job that took 4 cores there).  Jobs
 * narrowed by size alone (a 120-core 8-GPU task fits only G3 nodes) are
 * left to the aging rule: reserving them at once drained the G3 nodes on
 * openb default and cost the many small jobs more than it gave (measured:
 * p95 wait +45% at 128 GPUs, load 1.1). */
static bool narrow(const struct ctx *c, int32_t j)
{
    return c->in->jobs[j].model_mask != 0 && tied(c, j);
}

/* Reserve the earliest start for job j on nodes without a reservation.
 * With loans (tarmac) and a non-preemptible job, loans count as free now,
 * and when that makes the start now, they are evicted and the job placed.
 * Returns 2 placed, 1 reserved, 0 no start known, < 0 on error. */
static int reserve(struct ctx *c, int32_t j, size_t *linked)
{
    const struct need *nd = &c->needs[j];
    bool evict = c->loans && !c->in->jobs[j].preemptible;
    struct release *buf = NULL;
    size_t bcap = 0, ncand = 0, ccap = 0;
    struct cand *cands = NULL;
    int64_t gang_start;
    int r;

    if (!c->timeline) {
        r = timeline_init(c);
        if (r < 0)
            return r;
    }
    r = timeline_sync(c, linked);
    if (r < 0)
        return r;
    for (size_t i = 0; i < c->nn; i++) {
        const struct nst *s = &c->ns[i];
        struct cand cd;
        if (!s->ok || s->res != NO_SLOT)
            continue;
        if (nd->gpus > 0 || nd->milli > 0) {
            if (s->mslot < 0 || !(nd->slots >> s->mslot & 1))
                continue;
            if (nd->gpus > s->gpus)
                continue;
        }
        cd.node = (int32_t)i;
        cd.t = node_earliest(c, (int32_t)i, nd, evict, &buf, &bcap, &cd.rel);
        if (cd.t < 0) {
            r = TM_ENOMEM;
            goto out;
        }
        if (cd.t == INF_MS)
            continue;
        /* A job that is not narrow leaves the nodes of models that narrow
         * jobs wait for, unless those start it much earlier: otherwise an
         * aged flexible job drains the one node a narrow job can use. */
        cd.key = cd.t;
        if (c->loans && c->any_narrow && !narrow(c, j) && s->mslot >= 0 &&
            (c->narrow_wants[s->mslot] || (popcount64(nd->slots) > 1 && c->pressure[s->mslot] > 0)) &&
            cd.t < INF_MS - TM_SCHED_PRESSURE_PENALTY_MS)
            cd.key = cd.t + TM_SCHED_PRESSURE_PENALTY_MS;
        r = grow((void **)&cands, &ccap, ncand + 1, sizeof(*cands));
        if (r < 0)
            goto out;
        cands[ncand++] = cd;
    }
    r = 0;
    if (ncand < (size_t)nd->nodes)
        goto out;
    if (ncand > 1)
        qsort(cands, ncand, sizeof(*cands), cmp_cand);
    /* Sticky: a job that held a node keeps it, unless it can start now
     * elsewhere.  Moving a reservation to whichever node looks earliest
     * under wrong estimates restarts the drain each time and never ends. */
    if (c->loans && nd->nodes == 1 && cands[0].t > c->in->now_ms) {
        int32_t hold = c->in->jobs[j].hold_node - 1;
        for (size_t k = 1; hold >= 0 && k < ncand; k++)
            if (cands[k].node == hold) {
                struct cand tmp = cands[k];
                cands[k] = cands[0];
                cands[0] = tmp;
                break;
            }
    }
    {
        /* Sorted by key, not t: the gang starts when its last member can. */
        int64_t last = cands[0].t;
        for (int32_t k = 1; k < nd->nodes; k++)
            if (cands[k].t > last)
                last = cands[k].t;
        gang_start = last;
    }
    if (evict && gang_start <= c->in->now_ms) {
        r = evict_for(c, j, cands);
        if (r != 0) {
            r = r > 0 ? 2 : r;
            goto out;
        }
    }
    {
        int64_t start = gang_start;
        for (int32_t k = 0; k < nd->nodes; k++) {
            struct rnode rv = cands[k].rel;
            struct tm_sched_reservation *res;
            /* Members that could start earlier wait for the last one;
             * what is released on their node by then is theirs too, but
             * counting only up to their own earliest time is safe. */
            rv.job = j;
            rv.start = start;
            rv.deadline = start;
            rv.closed = c->loans && is_urgent(c, j);
            if (c->loans && c->in->jobs[j].hold_start_ms > 0 &&
                c->in->jobs[j].hold_start_ms < start)
                rv.deadline = c->in->jobs[j].hold_start_ms;
            rv.preemptible = c->in->jobs[j].preemptible;
            rv.need = *nd;
            r = grow((void **)&c->rn, &c->caprn, c->nrn + 1, sizeof(*c->rn));
            if (r < 0)
                goto out;
            r = grow((void **)&c->r.reservations, &c->capres, c->r.nreservations + 1,
                     sizeof(*c->r.reservations));
            if (r < 0)
                goto out;
            c->rn[c->nrn] = rv;
            c->ns[cands[k].node].res = (int32_t)c->nrn++;
            res = &c->r.reservations[c->r.nreservations++];
            res->job = j;
            res->node = cands[k].node;
            res->start_ms = start;
        }
        r = 1;
    }
out:
    free(buf);
    free(cands);
    return r;
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

/* ---------- first-fit placement (fifo, backfill) ---------- */

static int node_end_init(struct ctx *c)
{
    c->node_end = malloc((c->nn + 1) * sizeof(*c->node_end));
    if (!c->node_end)
        return TM_ENOMEM;
    for (size_t i = 0; i < c->nn; i++)
        c->node_end[i] = c->in->now_ms;
    for (size_t a = 0; a < c->in->nallocs; a++) {
        const struct tm_sched_alloc *al = &c->in->allocs[a];
        if (al->node >= 0 && (size_t)al->node < c->nn && al->end_ms > c->node_end[al->node])
            c->node_end[al->node] = al->end_ms;
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
    int64_t end = align ? job_end(c, j) : 0, best = -1;

    for (int seen = 0; seen < SCAN_MAX;) {
        int64_t i = tree_find(c, from, nd);
        bool gap, loan;
        if (i < 0)
            return best;
        from = (size_t)i + 1;
        if (respect && !reservation_permits(c, j, (int32_t)i, pick_gpus(&c->ns[i], nd, false),
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
static int place_firstfit(struct ctx *c, int32_t j, bool respect, bool *ret_gap, bool *ret_blocked)
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
        mask = pick_gpus(&c->ns[i], nd, false);
        if (respect)
            (void)reservation_permits(c, j, (int32_t)i, mask, nd->gpus ? MILLI : nd->milli, &gap, &loan);
        chosen[k] = (int32_t)i;
        masks[k] = mask;
        if (gap) {
            *ret_gap = true;
            reservation_note_gap(c, (int32_t)i, mask, nd->gpus ? MILLI : nd->milli, nd);
        }
        c->mark[i] = c->gen;
        node_take(c, (int32_t)i, mask, nd->gpus ? MILLI : nd->milli, nd);
        k++;
        from = 0;
    }
    if (k < nd->nodes) {
        /* All or nothing: give back what the partial gang took.  A gap
         * note already added is harmless: it only makes the reservation's
         * arithmetic more generous by a job that is not there, so undo it. */
        for (int32_t x = 0; x < k; x++) {
            node_give(c, chosen[x], masks[x], nd->gpus ? MILLI : nd->milli, nd);
            if (*ret_gap && c->ns[chosen[x]].res != NO_SLOT) {
                struct rnode *rv = &c->rn[c->ns[chosen[x]].res];
                if (job_end_safe(c, j) <= rv->deadline && rv->job != j) {
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
        r = add_placement(c, j, chosen[x], masks[x], nd->gpus ? MILLI : nd->milli, false);
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
        return nst_free_milli(s);
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
    nst_refresh(&after);
    /* A job that can run on several models avoids the ones constrained
     * jobs are queued for: otherwise they starve (gpuspec traces). */
    ret->pressure = (popcount64(nd->slots) > 1 && s->mslot >= 0) ? c->pressure[s->mslot] > 0 : 0;
    ret->strand = stranded(c, &after) - stranded(c, s);
    if (nd->gpus > 0)
        ret->fit = (int64_t)after.full * MILLI;
    else if (nd->milli > 0)
        ret->fit = s->free[__builtin_ctz(mask)] - milli;
    else
        ret->fit = nst_free_milli(&after);
    ret->cpu_left = after.cpu;
    ret->share_fit = nd->gpus == 0 && nd->milli > 0;
    ret->end_rank = 0;
    ret->end_key = 0;
    ret->rank = c->in->params.elastic ? c->in->nodes[i].rank : 0;
    if (aligns(c, j)) {
        int64_t e = c->node_end[i], end = job_end(c, j);
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
            if (!nst_fits(&c->ns[i], nd) || c->mark[i] == c->gen)
                continue;
            if (respect && !reservation_permits(c, j, (int32_t)i, 0, 0, &gap, &loan)) {
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
    for (int s = 0; s < c->nslots; s++) {
        int found_levels = 0;
        if (!(nd->slots >> s & 1))
            continue;
        if (nd->gpus == 0) {
            /* A share: the tightest partially used GPU first. */
            int scanned = 0;
            bool got = false;
            for (int f = pbits_next(c, s, nd->milli); f > 0 && !got && scanned < SCAN_MAX;
                 f = pbits_next(c, s, f + 1)) {
                for (int32_t id = c->phead[s * MILLI + f]; id >= 0 && scanned < SCAN_MAX;
                     id = c->pnext[id]) {
                    int32_t i = id / TM_NODE_GPUS_MAX;
                    uint32_t mask = 1u << (id % TM_NODE_GPUS_MAX);
                    bool gap, loan;
                    scanned++;
                    if (c->mark[i] == c->gen || c->ns[i].cpu < nd->cpu || c->ns[i].mem < nd->mem)
                        continue;
                    if (respect && !reservation_permits(c, j, i, mask, nd->milli, &gap, &loan)) {
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
        }
        /* Whole GPUs (or a share on a whole free GPU): the node with the
         * fewest free GPUs that still fits, so big nodes stay whole. */
        for (int k = nd->gpus > 0 ? nd->gpus : 1; k <= TM_NODE_GPUS_MAX && found_levels < 2; k++) {
            int scanned = 0, took = 0;
            for (int32_t i = c->whead[s * (TM_NODE_GPUS_MAX + 1) + k];
                 i >= 0 && scanned < SCAN_MAX && took < CAND_PER_BUCKET; i = c->wnext[i]) {
                uint32_t mask;
                bool gap, loan;
                scanned++;
                if (c->mark[i] == c->gen || c->ns[i].cpu < nd->cpu || c->ns[i].mem < nd->mem)
                    continue;
                mask = pick_gpus(&c->ns[i], nd, true);
                if (!mask)
                    continue;
                if (respect &&
                    !reservation_permits(c, j, i, mask, nd->gpus ? MILLI : nd->milli, &gap, &loan)) {
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
            if (took)
                found_levels++;
        }
    }
    *ret_mask = bmask;
    return bnode;
}

static int place_best(struct ctx *c, int32_t j, bool respect, bool *ret_gap, bool *ret_blocked)
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
            (void)reservation_permits(c, j, i, mask, milli, &gap, &loan);
        loans[k] = loan;
        if (gap) {
            *ret_gap = true;
            reservation_note_gap(c, i, mask, milli, nd);
        }
        chosen[k] = i;
        masks[k] = mask;
        c->mark[i] = c->gen;
        node_take(c, i, mask, milli, nd);
        k++;
    }
    if (k < nd->nodes) {
        for (int32_t x = 0; x < k; x++) {
            node_give(c, chosen[x], masks[x], milli, nd);
            if (*ret_gap && c->ns[chosen[x]].res != NO_SLOT) {
                struct rnode *rv = &c->rn[c->ns[chosen[x]].res];
                if (job_end_safe(c, j) <= rv->deadline && rv->job != j) {
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
        r = add_placement(c, j, chosen[x], masks[x], milli, loans[x]);
        if (r < 0)
            return r;
        node_end_note(c, j, chosen[x]);
    }
    return 1;
}

/* Whether the job fits somewhere now, reservations aside (for notes). */
static bool fits_anywhere(struct ctx *c, int32_t j)
{
    uint32_t mask;
    bool blocked;

    c->gen++;
    if (c->buckets)
        return best_node(c, j, false, &mask, &blocked) >= 0;
    return tree_find(c, 0, &c->needs[j]) >= 0;
}

/* ---------- ordering ---------- */

struct okey {
    int64_t k[5];
    int32_t idx;
};

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
 * a long one from being passed for ever when estimates are wrong.  Measured
 * on gpuspec33 (64 and 128 GPUs, loads 0.9-1.3, two inventory seeds):
 * 23 jobs past the bound in submit order, 12 with 24x capped at 6 h (the
 * cap then flattens every estimate over 15 min), 6 with 4x capped at 12 h. */
static int64_t narrow_shift(int64_t est)
{
    if (est <= 0)
        return 0;
    if (est >= TM_SCHED_NARROW_SJF_CAP_MS / TM_SCHED_NARROW_SJF_MUL)
        return TM_SCHED_NARROW_SJF_CAP_MS;
    return est * TM_SCHED_NARROW_SJF_MUL;
}

static void order_keys(const struct ctx *c, struct okey *keys)
{
    const struct tm_sched_input *in = c->in;
    int64_t short_ms = in->params.short_ms > 0 ? in->params.short_ms : TM_SCHED_SHORT_DEFAULT_MS;
    int64_t dflt = in->params.default_estimate_ms > 0 ? in->params.default_estimate_ms
                                                      : TM_SCHED_DEFAULT_ESTIMATE_MS;

    for (size_t j = 0; j < in->njobs; j++) {
        const struct tm_sched_job *jb = &in->jobs[j];
        struct okey *k = &keys[j];
        memset(k, 0, sizeof(*k));
        k->idx = (int32_t)j;
        if (in->policy != TM_POLICY_TARMAC) {
            k->k[0] = jb->submit_ms;
            k->k[1] = jb->id;
            continue;
        }
        if (is_urgent(c, (int32_t)j)) {
            /* Aged past half the bound: ahead of all.  Narrow jobs first:
             * they have a few nodes, a flexible job has many, and on
             * gpuspec33 an aged 8-GPU flexible job placed first on the one
             * G3 node (21 h, estimated 7 min) pushed the G3-only jobs
             * behind it past the bound.  Among narrow jobs, submit order
             * moved by their estimate (narrow_shift()), so a long one does
             * not hold their node while short ones pass the bound.  Then
             * jobs tied to few nodes by their size (tied()), then the
             * rest: gpuspec33 at 64 GPUs, 12 cells over 2 seeds, 6 jobs
             * past the bound with two tiers, 4 with three; counting the
             * size-tied ones as narrow (shift included) gave 8. */
            bool nw = narrow(c, (int32_t)j);
            int64_t est = jb->estimate_ms > 0 ? jb->estimate_ms : dflt;
            k->k[0] = 0;
            k->k[1] = nw ? 0 : tied(c, (int32_t)j) ? 1 : 2;
            k->k[2] = jb->submit_ms + (nw ? narrow_shift(est) : 0);
            k->k[3] = jb->id;
            continue;
        }
        {
            const struct need *nd = &c->needs[j];
            int64_t est = jb->estimate_ms > 0 ? jb->estimate_ms : dflt;
            int64_t gpu_milli = (int64_t)(nd->gpus > 0 ? nd->gpus * MILLI : nd->milli) * nd->nodes;
            bool gapfill = est < short_ms &&
                           (jb->klass == TM_CLASS_EVAL || jb->klass == TM_CLASS_PREPROCESS ||
                            jb->klass == TM_CLASS_INFERENCE);
            bool constrained = popcount64(nd->slots) < popcount64(c->all_slots);
            /* Work in GPU-seconds, at least a tenth of a GPU so CPU-heavy
             * shares are not free: the last tie-break, less work first. */
            if (gpu_milli < 100)
                gpu_milli = 100;
            int64_t bound = in->params.starvation_ms > 0 ? in->params.starvation_ms
                                                         : TM_SCHED_STARVATION_DEFAULT_MS;
            int64_t age = in->now_ms - jb->submit_ms;
            int64_t level = age > 0 ? age / (bound / 4 > 0 ? bound / 4 : 1) : 0;
            /* Short gap-filling work and jobs tied to few models move up
             * by at most short_ms: enough to go first among jobs of about
             * the same age, never enough to pass a job by hours. */
            int64_t bonus = (gapfill ? short_ms : 0) + (constrained ? short_ms / 2 : 0);
            k->k[0] = 1;
            k->k[1] = -((int64_t)jb->priority + level);
            k->k[2] = jb->submit_ms - bonus;
            k->k[3] = (est / 1000) * gpu_milli;
            k->k[4] = jb->id;
        }
    }
}

/* Whether the free GPUs of the job's models would hold it in total but no
 * node holds it: the capacity is there, only fragmented, and idles while
 * the job waits.  Then draining one node for it costs nothing that anyone
 * else would have used; when the cluster is simply full, it does. */
static bool fragmented(const struct ctx *c, const struct need *nd)
{
    int64_t want = (int64_t)(nd->gpus > 0 ? nd->gpus * MILLI : nd->milli) * nd->nodes, have = 0;

    if (want == 0)
        return false;
    for (int s = 0; s < c->nslots; s++)
        if (nd->slots >> s & 1)
            have += c->slot_free[s];
    return have >= want;
}

/* A heavy job asks for at least TM_SCHED_HEAVY_GPUS whole GPUs on a node
 * and is not narrow: reserving for it drains most of a node. */
static bool heavy(const struct ctx *c, int32_t j)
{
    return c->needs[j].gpus >= TM_SCHED_HEAVY_GPUS && !narrow(c, j);
}

/* Whether tarmac must not reserve for job j now: it is heavy and the heavy
 * reservations already made in this pass drain 1/TM_SCHED_DRAIN_DIV of
 * the GPUs (the first one always goes through).  Each drain holds GPUs
 * that the many small jobs could use; on openb default at 64 GPUs, up to
 * eight concurrent drains for aged 8-GPU jobs doubled the p95 wait of
 * everyone else, while one at a time still served every 8-GPU job within
 * the bound (they are mostly short: 28 of 39 under 30 minutes).  Aged jobs
 * come first in the order, so the oldest heavy job gets the drain. */
static bool heavy_capped(const struct ctx *c, int32_t j, int64_t drain_gpus)
{
    /* A drain already under way (the job held a reservation in the last
     * pass) goes on whatever the cap: dropping it when an aged job earlier
     * in the order took the budget restarted it later on another node, and
     * the job passed the bound (gpuspec33, 64 GPUs, load 1.1: reserved at
     * 24 h of age, dropped twice, started at 48.5 h). */
    if (!heavy(c, j) || drain_gpus == 0 || c->in->jobs[j].hold_node > 0)
        return false;
    return (drain_gpus + (int64_t)c->needs[j].gpus * c->needs[j].nodes) * TM_SCHED_DRAIN_DIV > c->all_gpus;
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
        nst_refresh(s);
        if (s->ok && s->mslot >= 0) {
            const struct tm_sched_node *n = &in->nodes[i];
            int sl = s->mslot;
            c->slot_free[sl] += nst_free_milli(s);
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
        if (narrow(c, (int32_t)j))
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
            if (fits_anywhere(c, j))
                note(c, j, TM_SCHED_WAIT_ORDER, -1, 0, "room exists but fifo waits for the queue head");
            else
                note(c, j, TM_SCHED_WAIT_CAPACITY, -1, 0, "no room now, and behind the queue head");
            continue;
        }
        if (pol == TM_POLICY_TARMAC)
            placed = place_best(c, j, nreserved > 0, &gap, &resblocked);
        else
            placed = place_firstfit(c, j, nreserved > 0, &gap, &resblocked);
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
            if (pol == TM_POLICY_TARMAC && is_urgent(c, j))
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
             (!heavy_capped(c, j, drain_gpus) &&
              (is_urgent(c, j) || in->jobs[j].hold_node > 0 || narrow(c, j))))) {
            size_t before = c->r.nreservations;
            r = reserve(c, j, &linked);
            if (r < 0)
                return r;
            if (r == 2) {
                note(c, j, TM_SCHED_PLACED, c->r.placements[c->r.nplacements - 1].node, in->now_ms,
                     "placed now by evicting preemptible work on loan");
                continue;
            }
            if (r == 1) {
                nreserved++;
                if (pol == TM_POLICY_TARMAC && heavy(c, j))
                    drain_gpus += (int64_t)nd->gpus * nd->nodes;
                note(c, j, TM_SCHED_RESERVED, c->r.reservations[before].node,
                     c->r.reservations[before].start_ms,
                     pol == TM_POLICY_BACKFILL ? "queue head: reserved at the earliest expected start"
                     : is_urgent(c, j)         ? "aged: reserved at the earliest expected start"
                                               : "first blocked: reserved at the earliest expected start");
                continue;
            }
        }
        if (resblocked)
            note(c, j, TM_SCHED_WAIT_RESERVATION, -1, 0, "would delay a reserved job");
        else if (fits_anywhere(c, j))
            note(c, j, TM_SCHED_WAIT_RESERVATION, -1, 0, "room only where a reservation needs it");
        else
            note(c, j, TM_SCHED_WAIT_CAPACITY, -1, 0, "no room now on an acceptable node");
        if (first_blocked < 0 && pol == TM_POLICY_TARMAC)
            first_blocked = j;
    }
    /* After everything that fits has been placed, GPUs of the first
     * blocked job's models still free in total but on no single node
     * idle while it waits: only then is draining one node for it free. */
    if (first_blocked >= 0 && nreserved == 0 && fragmented(c, &c->needs[first_blocked])) {
        size_t before = c->r.nreservations;
        r = reserve(c, first_blocked, &linked);
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
        r = buckets_init(&c);
    } else {
        r = tree_init(&c);
    }
    if (r >= 0 && in->params.align_ends)
        r = node_end_init(&c);
    if (r < 0)
        goto out;
    order_keys(&c, keys);
    if (in->njobs > 1)
        qsort(keys, in->njobs, sizeof(*keys), cmp_okey);
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
