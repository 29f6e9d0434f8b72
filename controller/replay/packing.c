/*
 * controller/replay/packing.c: the packing mode (see replay.h), done the way the
 * FGD artifact (hkust-adsl/kubernetes-scheduler-simulator) runs its
 * experiments, so that our random and best-fit land on its figures and
 * tarmac's placement can be compared with FGD on the same footing.
 *
 *  - Task pool: every pod row, then uniform draws with replacement from the
 *    rows until the arrived GPU demand reaches tune x GPU capacity; the
 *    pool is shuffled.  Nothing departs.
 *  - A node fits a task when its free CPU and memory cover the request and
 *    its GPUs do: `gpus` GPUs with all 1000 milli free, or one GPU with at
 *    least the share free; the GPU model must be acceptable.
 *  - random: a uniformly random node among those that fit.
 *  - firstfit: the lowest-numbered node that fits.
 *  - bestfit: the artifact's score, 0.5 (cpu_free - cpu_req) / 128 cores +
 *    0.5 (gpu_free - gpu_req) / 8 GPUs, lowest wins, scaled to an integer
 *    0..100 as Kubernetes scores are, ties broken at random as the
 *    Kubernetes scheduler does.
 *  - fgd: the artifact's FGD: the increase of expected fragmentation (for
 *    each typical task, weighted by its share of the rows, the free GPU
 *    milli the node cannot give it) as an integer logistic score, ties at
 *    random.  Kept to show that this mode reproduces FGD's figure.
 *  - tarmac: the same fragmentation score, ties to the artifact's best fit
 *    (then the lowest node) instead of a coin: see fgd_score().
 *  Shares go on the tightest GPU that holds them (the artifact does the same
 *  for its baselines); whole GPUs on the lowest-numbered free ones.
 *
 * Speed: a node's fragmentation depends only on its state, so it is cached
 * per node and recomputed when the node changes; the fragmentation after a
 * hypothetical placement is cached per (node version, task shape).
 */
#include "controller/replay/replay.h"

#include <stdlib.h>
#include <string.h>
#include <math.h>
#include <time.h>

#include "core/err.h"

#define MILLI 1000
#define MAX_SPEC_CPU 128000.0
#define MAX_SPEC_GPU 8000.0

static const char *const pack_names[TM_PACK_MAX] = {"random", "firstfit", "bestfit", "fgd", "tarmac"};

const char *tm_pack_policy_name(enum tm_pack_policy p)
{
    return (unsigned)p < TM_PACK_MAX ? pack_names[p] : "unknown";
}

int tm_pack_policy_parse(const char *name)
{
    if (!name)
        return -1;
    for (int i = 0; i < TM_PACK_MAX; i++)
        if (strcmp(pack_names[i], name) == 0)
            return i;
    return -1;
}

const char *tm_pack_policy_list(void)
{
    return "random, firstfit, bestfit, fgd, tarmac";
}

struct pnode {
    int64_t cpu, mem;
    int16_t free[TM_NODE_GPUS_MAX];
    int32_t gpus;
    int32_t model;
    uint32_t version;
    double frag;        /* expected fragmentation now */
};

/* A task shape; tasks of one shape share cache entries. */
struct shape {
    int64_t cpu, mem;
    uint64_t mask;
    int32_t gpus, milli;
    double p;           /* share of the pool's rows (typical task weight) */
};

struct centry {
    uint32_t version;   /* node version + 1; 0 = empty */
    int16_t gpu;        /* chosen GPU for a share, -1 otherwise */
    double delta;
};

struct pack {
    struct pnode *n;
    size_t nn;
    struct shape *sh;
    size_t nsh;
    struct centry *cache; /* nn x nsh */
    uint64_t rng;
};

static uint64_t prng(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static uint64_t below(uint64_t *s, uint64_t n)
{
    return n ? prng(s) % n : 0;
}

static bool model_ok(const struct pnode *n, uint64_t mask)
{
    return mask == 0 || (n->model >= 0 && (mask >> n->model & 1));
}

static int full_count(const struct pnode *n)
{
    int k = 0;
    for (int g = 0; g < n->gpus; g++)
        k += n->free[g] == MILLI;
    return k;
}

static bool fits(const struct pnode *n, const struct shape *s)
{
    if (n->cpu < s->cpu || n->mem < s->mem)
        return false;
    if (s->gpus > 0)
        return model_ok(n, s->mask) && full_count(n) >= s->gpus;
    if (s->milli > 0) {
        if (!model_ok(n, s->mask))
            return false;
        for (int g = 0; g < n->gpus; g++)
            if (n->free[g] >= s->milli)
                return true;
        return false;
    }
    return true;
}

/* FGD's fragmentation of a node against the typical tasks: for each task
 * the node cannot host, all its free GPU milli; for each it can host, the
 * milli on GPUs too small for it. */
static double frag_of(const struct pack *pk, const struct pnode *n)
{
    int64_t total = 0;
    double f = 0;
    int full = 0;
    int16_t mx = 0;

    for (int g = 0; g < n->gpus; g++) {
        total += n->free[g];
        full += n->free[g] == MILLI;
        if (n->free[g] > mx)
            mx = n->free[g];
    }
    if (total == 0)
        return 0;
    for (size_t i = 0; i < pk->nsh; i++) {
        const struct shape *s = &pk->sh[i];
        int64_t fr = total;
        if (s->gpus == 0 && s->milli == 0) {
            fr = total; /* CPU-only work leaves every idle GPU idle */
        } else if (n->cpu < s->cpu || n->mem < s->mem || !model_ok(n, s->mask)) {
            fr = total;
        } else if (s->gpus > 0) {
            if (full >= s->gpus)
                fr = total - (int64_t)full * MILLI;
        } else if (mx >= s->milli) {
            fr = 0;
            for (int g = 0; g < n->gpus; g++)
                if (n->free[g] < s->milli)
                    fr += n->free[g];
        }
        f += s->p * (double)fr;
    }
    return f;
}

static void take(struct pnode *n, const struct shape *s, int gpu)
{
    n->cpu -= s->cpu;
    n->mem -= s->mem;
    if (s->gpus > 0) {
        int left = s->gpus;
        for (int g = 0; g < n->gpus && left > 0; g++)
            if (n->free[g] == MILLI) {
                n->free[g] = 0;
                left--;
            }
    } else if (s->milli > 0) {
        n->free[gpu] = (int16_t)(n->free[gpu] - s->milli);
    }
}

static int tightest_gpu(const struct pnode *n, int32_t milli)
{
    int best = -1;

    for (int g = 0; g < n->gpus; g++)
        if (n->free[g] >= milli && (best < 0 || n->free[g] < n->free[best]))
            best = g;
    return best;
}

/* The change of fragmentation if shape s went on node i (cached). */
static double delta_of(struct pack *pk, size_t i, size_t si, int *ret_gpu)
{
    struct centry *ce = &pk->cache[i * pk->nsh + si];
    const struct pnode *n = &pk->n[i];
    const struct shape *s = &pk->sh[si];

    if (ce->version == n->version + 1) {
        *ret_gpu = ce->gpu;
        return ce->delta;
    }
    ce->version = n->version + 1;
    ce->gpu = -1;
    if (s->gpus == 0 && s->milli > 0) {
        /* Try each distinct free value: GPUs with equal free milli give
         * the same result. */
        int16_t seen[TM_NODE_GPUS_MAX];
        int nseen = 0;
        double best = 0;
        for (int g = 0; g < n->gpus; g++) {
            struct pnode after = *n;
            bool dup = false;
            double d;
            if (n->free[g] < s->milli)
                continue;
            for (int k = 0; k < nseen; k++)
                dup |= seen[k] == n->free[g];
            if (dup)
                continue;
            seen[nseen++] = n->free[g];
            take(&after, s, g);
            d = frag_of(pk, &after) - n->frag;
            /* Equal fragmentation: the tighter GPU, so whole GPUs stay. */
            if (ce->gpu < 0 || d < best || (d == best && n->free[g] < n->free[ce->gpu])) {
                best = d;
                ce->gpu = (int16_t)g;
            }
        }
        ce->delta = best;
    } else {
        struct pnode after = *n;
        take(&after, s, 0);
        ce->delta = frag_of(pk, &after) - n->frag;
    }
    *ret_gpu = ce->gpu;
    return ce->delta;
}

static double bestfit_raw(const struct pnode *n, const struct shape *s)
{
    int64_t gfree = 0, greq = s->gpus > 0 ? (int64_t)s->gpus * MILLI : s->milli;

    for (int g = 0; g < n->gpus; g++)
        gfree += n->free[g];
    return 0.5 * (double)(n->cpu - s->cpu) / MAX_SPEC_CPU + 0.5 * (double)(gfree - greq) / MAX_SPEC_GPU;
}

static int64_t bestfit_score(const struct pnode *n, const struct shape *s)
{
    /* Kubernetes scores are integers 0..100, higher better. */
    return (int64_t)((1.0 - bestfit_raw(n, s)) * 100.0);
}

/* FGD's node score: the fragmentation change on a logistic scale, in the
 * integer points Kubernetes scores use, higher better.  The scale is
 * steep near zero (about 40 milli per point) and flat far out, so all
 * placements that cut (or add) a lot of fragmentation are equals and the
 * tie-break decides among them.  On openb default this scale packs more
 * than the exact change, and best-fit ties (tarmac) more than random ties
 * (the published FGD's). */
static int64_t fgd_score(double delta)
{
    return (int64_t)(100.0 / (1.0 + exp(delta / 1000.0)));
}

static int cmp_shape(const struct shape *a, const struct shape *b)
{
    if (a->cpu != b->cpu)
        return a->cpu < b->cpu ? -1 : 1;
    if (a->mem != b->mem)
        return a->mem < b->mem ? -1 : 1;
    if (a->gpus != b->gpus)
        return a->gpus < b->gpus ? -1 : 1;
    if (a->milli != b->milli)
        return a->milli < b->milli ? -1 : 1;
    if (a->mask != b->mask)
        return a->mask < b->mask ? -1 : 1;
    return 0;
}

static int cmp_shape_q(const void *a, const void *b)
{
    return cmp_shape(a, b);
}

static size_t shape_find(const struct pack *pk, const struct shape *s)
{
    size_t lo = 0, hi = pk->nsh;

    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        int c = cmp_shape(&pk->sh[mid], s);
        if (c == 0)
            return mid;
        if (c < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return (size_t)-1;
}

static struct shape shape_of(const struct tm_trace_job *j)
{
    return (struct shape){.cpu = j->cpu_milli, .mem = j->memory_mib, .mask = j->model_mask,
                          .gpus = j->gpus, .milli = j->gpus > 0 ? 0 : j->gpu_milli};
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* The nodes, empty; their GPU capacity in milli (0: none). */
static int64_t pack_nodes(struct pack *pk, const struct tm_trace *t)
{
    int64_t cap_milli = 0;

    for (size_t i = 0; i < pk->nn; i++) {
        const struct tm_trace_node *tn = &t->nodes[i];
        pk->n[i].cpu = tn->cpu_milli;
        pk->n[i].mem = tn->memory_mib;
        pk->n[i].gpus = tn->gpus > TM_NODE_GPUS_MAX ? TM_NODE_GPUS_MAX : tn->gpus;
        pk->n[i].model = tn->model;
        for (int g = 0; g < pk->n[i].gpus; g++)
            pk->n[i].free[g] = MILLI;
        cap_milli += (int64_t)pk->n[i].gpus * MILLI;
    }
    return cap_milli;
}

/* Typical tasks: the distinct shapes of the rows, weighted by count; and
 * for the fragmentation-aware policies each node's fragmentation.  0 or
 * TM_ENOMEM. */
static int pack_shapes(struct pack *pk, const struct tm_trace *t, enum tm_pack_policy policy)
{
    for (size_t j = 0; j < t->njobs; j++)
        pk->sh[j] = shape_of(&t->jobs[j]);
    qsort(pk->sh, t->njobs, sizeof(*pk->sh), cmp_shape_q);
    for (size_t j = 0; j < t->njobs; j++) {
        if (pk->nsh && cmp_shape(&pk->sh[pk->nsh - 1], &pk->sh[j]) == 0) {
            pk->sh[pk->nsh - 1].p += 1;
            continue;
        }
        pk->sh[pk->nsh] = pk->sh[j];
        pk->sh[pk->nsh++].p = 1;
    }
    for (size_t i = 0; i < pk->nsh; i++)
        pk->sh[i].p /= (double)t->njobs;
    if (policy == TM_PACK_TARMAC || policy == TM_PACK_FGD) {
        pk->cache = calloc(pk->nn * pk->nsh, sizeof(*pk->cache));
        if (!pk->cache)
            return TM_ENOMEM;
        for (size_t i = 0; i < pk->nn; i++)
            pk->n[i].frag = frag_of(pk, &pk->n[i]);
    }
    return 0;
}

/* The pool: every row, then draws until arrived GPU demand = tune x the
 * capacity, shuffled (*ret_pool, *ret_n; *ret_arrived: its GPU milli).
 * 0 or TM_ENOMEM. */
static int pack_pool(struct pack *pk, const struct tm_trace *t, double tune, int64_t cap_milli,
                     size_t **ret_pool, size_t *ret_n, int64_t *ret_arrived)
{
    size_t cappool = t->njobs * 2 + 16, npool = 0;
    size_t *pool = malloc(cappool * sizeof(*pool));
    int64_t arrived = 0;

    if (!pool)
        return TM_ENOMEM;
    for (size_t j = 0; j < t->njobs; j++) {
        const struct tm_trace_job *jb = &t->jobs[j];
        pool[npool++] = j;
        arrived += jb->gpus > 0 ? (int64_t)jb->gpus * MILLI : jb->gpu_milli;
    }
    while ((double)arrived < tune * (double)cap_milli) {
        size_t j = (size_t)below(&pk->rng, t->njobs);
        const struct tm_trace_job *jb = &t->jobs[j];
        if (npool == cappool) {
            size_t *np = realloc(pool, cappool * 2 * sizeof(*pool));
            if (!np) {
                free(pool);
                return TM_ENOMEM;
            }
            pool = np;
            cappool *= 2;
        }
        pool[npool++] = j;
        arrived += jb->gpus > 0 ? (int64_t)jb->gpus * MILLI : jb->gpu_milli;
    }
    for (size_t i = npool; i > 1; i--) {
        size_t k = (size_t)below(&pk->rng, i);
        size_t tmp = pool[i - 1];
        pool[i - 1] = pool[k];
        pool[k] = tmp;
    }
    *ret_pool = pool;
    *ret_n = npool;
    *ret_arrived = arrived;
    return 0;
}

/* The node the policy picks for shape s (index si) among the nc
 * candidates that fit it. */
static size_t pack_pick(struct pack *pk, enum tm_pack_policy policy, const struct shape *s, size_t si,
                        const size_t *cand, size_t nc)
{
    size_t pick = (size_t)-1;

    switch (policy) {
    case TM_PACK_RANDOM:
        pick = cand[below(&pk->rng, nc)];
        break;
    case TM_PACK_FIRSTFIT:
        pick = cand[0];
        break;
    case TM_PACK_BESTFIT: {
        int64_t best = INT64_MIN;
        size_t ties = 0;
        for (size_t c = 0; c < nc; c++) {
            int64_t sc = bestfit_score(&pk->n[cand[c]], s);
            if (sc > best) {
                best = sc;
                ties = 1;
                pick = cand[c];
            } else if (sc == best && below(&pk->rng, ++ties) == 0) {
                pick = cand[c]; /* reservoir: uniform among ties */
            }
        }
        break;
    }
    case TM_PACK_FGD:
    case TM_PACK_TARMAC: {
        int64_t best = INT64_MIN;
        double bf = 0;
        size_t ties = 0;
        for (size_t c = 0; c < nc; c++) {
            int g;
            int64_t sc = fgd_score(delta_of(pk, cand[c], si, &g));
            double b = bestfit_raw(&pk->n[cand[c]], s);
            if (pick == (size_t)-1 || sc > best) {
                best = sc;
                bf = b;
                ties = 1;
                pick = cand[c];
            } else if (sc == best) {
                /* FGD as published breaks ties at random; tarmac
                 * takes the best fit among them. */
                if (policy == TM_PACK_FGD ? below(&pk->rng, ++ties) == 0 : b < bf) {
                    bf = b;
                    pick = cand[c];
                }
            }
        }
        break;
    }
    default:
        break;
    }
    return pick;
}

int tm_replay_packing(const struct tm_trace *t, enum tm_pack_policy policy, uint64_t seed,
                      double tune, struct tm_pack_stats *ret)
{
    struct pack pk = {0};
    size_t *pool = NULL, npool = 0, *cand = NULL;
    int64_t cap_milli = 0, arrived = 0, alloc = 0;
    struct tm_pack_stats st = {0};
    double t0 = now_s();
    int r = TM_EINVAL;

    if (!t->njobs || !t->nnodes || (unsigned)policy >= TM_PACK_MAX || tune <= 0)
        return TM_EINVAL;
    pk.rng = seed * 0x2545f4914f6cdd1dull + 1;
    pk.nn = t->nnodes;
    pk.n = calloc(pk.nn, sizeof(*pk.n));
    pk.sh = calloc(t->njobs, sizeof(*pk.sh));
    cand = malloc(pk.nn * sizeof(*cand));
    r = TM_ENOMEM;
    if (!pk.n || !pk.sh || !cand)
        goto out;
    cap_milli = pack_nodes(&pk, t);
    if (cap_milli == 0) {
        r = TM_EINVAL;
        goto out;
    }
    r = pack_shapes(&pk, t, policy);
    if (r == 0)
        r = pack_pool(&pk, t, tune, cap_milli, &pool, &npool, &arrived);
    if (r < 0)
        goto out;
    for (size_t q = 0; q < npool; q++) {
        struct shape s = shape_of(&t->jobs[pool[q]]);
        size_t si = shape_find(&pk, &s), nc = 0, pick;
        int gpu = -1;

        if (si == (size_t)-1) {
            r = TM_EINVAL; /* cannot happen: every pool entry is a row */
            goto out;
        }
        for (size_t i = 0; i < pk.nn; i++)
            if (fits(&pk.n[i], &s))
                cand[nc++] = i;
        if (nc == 0) {
            st.failed++;
            continue;
        }
        pick = pack_pick(&pk, policy, &s, si, cand, nc);
        if (s.gpus == 0 && s.milli > 0) {
            if (policy == TM_PACK_TARMAC || policy == TM_PACK_FGD)
                (void)delta_of(&pk, pick, si, &gpu);
            else
                gpu = tightest_gpu(&pk.n[pick], s.milli);
        }
        take(&pk.n[pick], &s, gpu);
        pk.n[pick].version++;
        if (policy == TM_PACK_TARMAC || policy == TM_PACK_FGD)
            pk.n[pick].frag = frag_of(&pk, &pk.n[pick]);
        alloc += s.gpus > 0 ? (int64_t)s.gpus * MILLI : s.milli;
        st.placed++;
    }
    st.tasks = npool;
    st.allocation = (double)alloc / (double)cap_milli;
    st.arrived_gpu = (double)arrived / (double)cap_milli;
    st.wall_s = now_s() - t0;
    *ret = st;
    r = 0;
out:
    free(pk.n);
    free(pk.sh);
    free(pk.cache);
    free(pool);
    free(cand);
    return r;
}
