/*
 * controller/sched/reserve.c: reservations and loans.
 *
 * Reservations (backfill, tarmac) are computed from the expected ends of
 * the running jobs, node by node (the timelines), and recorded per node
 * with what will have been released on that node by the reserved start.
 * A later job may use a reserved node if the reserved job still fits at
 * the start with the later job still running, or if it ends by the start
 * (gap filling).  With loans (tarmac), preemptible work may use reserved
 * room whatever its estimate and is evicted (tm_sched_preemption) the
 * moment the reserved job can start.  Also here: the predicates that
 * decide whom tarmac reserves for (narrow, tied, heavy, fragmented).
 */
#include "controller/sched/scheduler.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "controller/sched/estimate.h"
#include "controller/sched/internal.h"
#include "core/err.h"

/* ---------- reservations ---------- */

bool sched_is_urgent(const struct ctx *c, int32_t j)
{
    const struct tm_sched_input *in = c->in;

    return in->now_ms - in->jobs[j].submit_ms >= tm_sched_tarmac_urgent_ms(&in->params);
}

/* A job's estimate as an end time for reservations; unknown is never. */
int64_t sched_job_end(const struct ctx *c, int32_t j)
{
    int64_t e = c->in->jobs[j].estimate_ms;

    if (e <= 0 || c->in->now_ms > INF_MS - e)
        return INF_MS;
    return c->in->now_ms + e;
}

/* The end a gap filler must meet.  Estimates from history are often short
 * (half of them on the openb trace, some by an order of magnitude): tarmac asks a
 * gap filler to fit TM_SCHED_GAP_SAFETY times over, so an overrun rarely
 * delays the reservation; EASY backfill takes the estimate as it is. */
int64_t sched_job_end_safe(const struct ctx *c, int32_t j)
{
    int64_t e = c->in->jobs[j].estimate_ms;

    if (!c->loans)
        return sched_job_end(c, j);
    if (e <= 0 || e > (INF_MS - c->in->now_ms) / TM_SCHED_GAP_SAFETY)
        return INF_MS;
    return c->in->now_ms + e * TM_SCHED_GAP_SAFETY;
}

/* Alloc a's expected end as given: its end_ms, or by the footprint's
 * estimate rule. */
int64_t sched_alloc_end_given(const struct ctx *c, int32_t a)
{
    const struct tm_sched_footprint *fp = c->in->footprint;
    int64_t now = c->in->now_ms;

    if (fp && fp->alloc_estimate)
        return now + tm_estimate_remaining(fp->alloc_estimate[a], now - fp->alloc_start[a]);
    return c->in->allocs[a].end_ms;
}

static int64_t alloc_end(const struct ctx *c, int32_t a)
{
    int64_t e = sched_alloc_end_given(c, a);

    /* An overdue job is expected to end any moment: the caller corrects
     * its estimate, we only refuse to plan in the past. */
    return e < c->in->now_ms ? c->in->now_ms : e;
}

/* Alloc al, ending at e, in its node's latest ends (gend, gkept). */
static void gend_add(struct ctx *c, const struct tm_sched_alloc *al, int64_t e)
{
    if (al->gpu_milli > 0 && al->gpu_mask) {
        if (e > c->gend[al->node])
            c->gend[al->node] = e;
        if (!(al->loaned && al->preemptible) && e > c->gkept[al->node])
            c->gkept[al->node] = e;
    }
}

/* With a footprint: node i's jobs from its list into its segment of
 * aorder, with their ends (and, without the caller's latest ends, the
 * node's); the first time only. */
static void timeline_node(struct ctx *c, int32_t i)
{
    const struct tm_sched_footprint *fp = c->in->footprint;
    int32_t k = c->astart[i];

    if (!c->aloaded || c->aloaded[i])
        return;
    for (int32_t a = fp->alloc_head[i]; a >= 0 && k < c->astart[i + 1]; a = fp->alloc_next[a]) {
        c->aorder[k++] = a;
        c->aend[a] = alloc_end(c, a);
        if (!fp->gpu_end)
            gend_add(c, &c->in->allocs[a], c->aend[a]);
    }
    c->aloaded[i] = 1;
}

/* The nodes whose GPUs hold nothing past now but loans: the only ones
 * where a job needing a whole node could start now (reserve_cands()). */
static void note_freenow(struct ctx *c)
{
    c->nfreenow = 0;
    for (size_t i = 0; i < c->nn; i++)
        if (c->gkept[i] <= c->in->now_ms)
            c->freenow[c->nfreenow++] = (int32_t)i;
}

/* The running jobs by node, in input order within a node (a stable
 * counting sort), and each one's expected end.  node_earliest() sorts a
 * node's releases itself, and only for the nodes whose releases by the
 * cutoff could make room: sorting every node's jobs by end up front was
 * half of a saturated backfill replay's reservations (perf, 125,000
 * synthetic jobs on 4,096 GPUs).  evict_for() sorts the one node it
 * reads (node_sort()).
 *
 * With the caller's footprint (struct tm_sched_footprint) a node's jobs
 * are read from its list only when the node is replayed (timeline_node()),
 * in list order: every reader of a node's jobs is indifferent to their
 * order (node_earliest() applies equal ends together, node_sort() sorts
 * to a total order).  This grouping and the ends were a fifth of the
 * same replay at 500,000 jobs, for nodes most of which the whole-node
 * test (gend) then skips unread. */
static int timeline_init(struct ctx *c)
{
    const struct tm_sched_input *in = c->in;
    const struct tm_sched_footprint *fp = in->footprint;
    size_t na = in->nallocs;

    c->astart = calloc(c->nn + 1, sizeof(*c->astart));
    c->aorder = malloc((na + 1) * sizeof(*c->aorder));
    c->aend = malloc((na + 1) * sizeof(*c->aend));
    c->asorted = calloc(c->nn + 1, sizeof(*c->asorted));
    c->gend = malloc((c->nn + 1) * sizeof(*c->gend));
    c->gkept = malloc((c->nn + 1) * sizeof(*c->gkept));
    c->plhead = malloc((c->nn + 1) * sizeof(*c->plhead));
    c->freenow = malloc((c->nn + 1) * sizeof(*c->freenow));
    if (!c->astart || !c->aorder || !c->aend || !c->asorted || !c->gend || !c->gkept ||
        !c->plhead || !c->freenow)
        return TM_ENOMEM;
    memset(c->plhead, 0xff, (c->nn + 1) * sizeof(*c->plhead));
    for (size_t i = 0; i < c->nn; i++)
        c->gend[i] = c->gkept[i] = INT64_MIN;
    if (fp) {
        c->aloaded = calloc(c->nn + 1, sizeof(*c->aloaded));
        if (!c->aloaded)
            return TM_ENOMEM;
        for (size_t i = 0; i < c->nn; i++)
            c->astart[i + 1] = c->astart[i] + fp->node_nallocs[i];
        c->timeline = true;
        for (size_t i = 0; i < c->nn; i++) {
            if (fp->gpu_end) {
                /* max over allocs of max(end, now) = max(max end, now) */
                if (fp->gpu_end[i] != INT64_MIN)
                    c->gend[i] = fp->gpu_end[i] < in->now_ms ? in->now_ms : fp->gpu_end[i];
                if (fp->gpu_end_kept[i] != INT64_MIN)
                    c->gkept[i] = fp->gpu_end_kept[i] < in->now_ms ? in->now_ms : fp->gpu_end_kept[i];
            } else {
                timeline_node(c, (int32_t)i);
            }
        }
        note_freenow(c);
        return 0;
    }
    for (size_t a = 0; a < na; a++) {
        const struct tm_sched_alloc *al = &in->allocs[a];
        c->astart[al->node + 1]++;
        c->aend[a] = alloc_end(c, (int32_t)a);
        gend_add(c, al, c->aend[a]);
    }
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
    c->timeline = true;
    note_freenow(c);
    return 0;
}

/* Node i's running jobs in order of expected end, then input index (a
 * total order): insertion sort, a node runs a few to a few dozen. */
static void node_sort(struct ctx *c, int32_t i)
{
    int32_t *v = c->aorder + c->astart[i];
    int32_t n = c->astart[i + 1] - c->astart[i];

    if (c->asorted[i])
        return;
    timeline_node(c, i);
    for (int32_t x = 1; x < n; x++) {
        int32_t key = v[x], y = x;
        int64_t ek = c->aend[key];
        while (y > 0 && (c->aend[v[y - 1]] > ek || (c->aend[v[y - 1]] == ek && v[y - 1] > key))) {
            v[y] = v[y - 1];
            y--;
        }
        v[y] = key;
    }
    c->asorted[i] = 1;
}

/* Link the placements made so far in this pass into per-node lists, so a
 * reservation sees them release too.  Called lazily. */
static int timeline_sync(struct ctx *c, size_t *linked)
{
    int r = sched_grow((void **)&c->plnext, &c->plcap_links, c->r.nplacements + 1, sizeof(*c->plnext));

    if (r < 0)
        return r;
    for (size_t p = *linked; p < c->r.nplacements; p++) {
        const struct tm_sched_placement *pl = &c->r.placements[p];
        int32_t n = pl->node;
        c->plnext[p] = c->plhead[n];
        c->plhead[n] = (int32_t)p;
        if (pl->gpu_milli > 0 && pl->gpu_mask) {
            int64_t e = sched_job_end(c, pl->job);
            if (e > c->gend[n])
                c->gend[n] = e;
            if (e > c->gkept[n])
                c->gkept[n] = e;
        }
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
 * released by that time.  INF_MS if never (by known estimates), or if
 * not by `cutoff` (the caller needs no later time): then, when the node
 * cannot hold the job even once all that ends by the cutoff has ended
 * (room only grows as jobs end), the releases are neither sorted nor
 * replayed, which is most nodes once the cutoff is low. */
static int64_t node_earliest(struct ctx *c, int32_t i, const struct need *nd, bool evict,
                             int64_t cutoff, struct release **buf, size_t *cap,
                             struct rnode *ret_rel)
{
    const struct tm_sched_input *in = c->in;
    struct nst s = c->ns[i];
    size_t k = 0;
    int64_t t = INF_MS;
    uint64_t late = 0; /* GPUs some job holds past the cutoff */

    memset(ret_rel->rel, 0, sizeof(ret_rel->rel));
    ret_rel->rel_cpu = 0;
    ret_rel->rel_mem = 0;
    if (sched_nst_fits(&s, nd))
        return in->now_ms;
    /* The whole node: some GPU is held past the cutoff when the node's
     * last GPU holder ends after it, known without reading the node's
     * jobs.  Loans count as released now for a job that evicts them (the
     * cutoff is never before now), so then the last holder that is not a
     * loan; otherwise only while nothing is evicted in this pass. */
    if (nd->gpus >= s.gpus && (evict || c->r.npreemptions == 0)) {
        int64_t last = evict ? c->gkept[i] : c->gend[i];
        if (last > cutoff || last == INF_MS)
            return INF_MS;
    }
    timeline_node(c, i);
    if (sched_grow((void **)buf, cap, (size_t)(c->astart[i + 1] - c->astart[i]) + 1, sizeof(**buf)) < 0)
        return -1;
    for (int32_t a = c->astart[i]; a < c->astart[i + 1]; a++) {
        int32_t ai = c->aorder[a];
        const struct tm_sched_alloc *al = &in->allocs[ai];
        if (c->evicted && c->evicted[ai])
            continue; /* already given back in this pass */
        /* Loans are evicted for a non-preemptible owner: they count as
         * released now. */
        (*buf)[k++] = (struct release){evict && al->loaned && al->preemptible ? in->now_ms : c->aend[ai],
                                       al->gpu_mask, al->gpu_milli, al->cpu_milli, al->memory_mib};
        if ((*buf)[k - 1].end > cutoff && al->gpu_milli > 0)
            late |= al->gpu_mask;
    }
    for (int32_t p = c->plhead[i]; p >= 0; p = c->plnext[p]) {
        const struct tm_sched_placement *pl = &c->r.placements[p];
        const struct need *pn = &c->needs[pl->job];
        if (sched_grow((void **)buf, cap, k + 1, sizeof(**buf)) < 0)
            return -1;
        (*buf)[k++] = (struct release){sched_job_end(c, pl->job), pl->gpu_mask, pl->gpu_milli,
                                       pn->cpu, pn->mem};
        if ((*buf)[k - 1].end > cutoff && pl->gpu_milli > 0)
            late |= pl->gpu_mask;
    }
    /* Whole GPUs: a GPU still held at the cutoff is not free by then. */
    if (nd->gpus > 0 && s.gpus - popcount64(late & ((1ull << s.gpus) - 1)) < nd->gpus)
        return INF_MS;
    if (cutoff < INF_MS) {
        struct nst all = s;
        for (size_t x = 0; x < k; x++) {
            const struct release *rl = &(*buf)[x];
            if (rl->end > cutoff)
                continue;
            for (int g = 0; g < all.gpus; g++)
                if (rl->mask >> g & 1)
                    all.free[g] = (int16_t)(all.free[g] + rl->milli);
            all.cpu += rl->cpu;
            all.mem += rl->mem;
        }
        sched_nst_refresh(&all);
        if (!sched_nst_fits(&all, nd))
            return INF_MS;
    }
    /* Insertion sort: a node's releases are few.  Equal ends may come in
     * any order: they are applied together below. */
    for (size_t x = 1; x < k; x++) {
        struct release key = (*buf)[x];
        size_t y = x;
        while (y > 0 && cmp_release(&(*buf)[y - 1], &key) > 0) {
            (*buf)[y] = (*buf)[y - 1];
            y--;
        }
        (*buf)[y] = key;
    }
    for (size_t x = 0; x < k; x++) {
        const struct release *rl = &(*buf)[x];
        if (rl->end == INF_MS || rl->end > cutoff)
            break;
        /* s.full and s.maxfree kept as sched_nst_refresh() would have them
         * (s is a copy of a refreshed node): releases only add, so the
         * largest free GPU is the old one or a GPU just released.  A full
         * refresh at every step was a tenth of a saturated tarmac replay
         * (perf, 1,000,000 synthetic jobs on 4,096 GPUs). */
        for (int g = 0; g < s.gpus; g++)
            if (rl->mask >> g & 1) {
                bool was = s.free[g] == MILLI;
                s.free[g] = (int16_t)(s.free[g] + rl->milli);
                s.full = (int8_t)(s.full + (s.free[g] == MILLI) - was);
                if (s.free[g] > s.maxfree)
                    s.maxfree = s.free[g];
                ret_rel->rel[g] += rl->milli;
            }
        s.cpu += rl->cpu;
        s.mem += rl->mem;
        ret_rel->rel_cpu += rl->cpu;
        ret_rel->rel_mem += rl->mem;
        /* Releases at the same instant go together. */
        if (x + 1 < k && (*buf)[x + 1].end == rl->end)
            continue;
        if (sched_nst_fits(&s, nd)) {
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
    sched_nst_refresh(&s);
    return sched_nst_fits(&s, &rv->need);
}

/* May job j take (mask, milli) on node i now without delaying a
 * reservation there?  *ret_gap tells whether it ends before the start. */
bool sched_reservation_permits(const struct ctx *c, int32_t j, int32_t i, uint32_t mask,
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
    if (!rv->closed && sched_job_end_safe(c, j) <= rv->deadline) {
        *ret_gap = true;
        return true;
    }
    return false;
}

/* A job placed in a gap releases before the reserved start: count what it
 * holds as released by then, so the reservation's arithmetic stays exact. */
void sched_reservation_note_gap(struct ctx *c, int32_t i, uint32_t mask, int32_t milli,
                                 const struct need *nd)
{
    struct rnode *rv = &c->rn[c->ns[i].res];

    c->version++;
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

/* Only the first `m` candidates are read (a gang's nodes; a single job's
 * sticky node is searched among all, wherever it lies): put the m
 * smallest first in cmp_cand() order, a total order, so the same as a
 * full sort there.  A scan per member instead of qsort over every node:
 * the sort was a tenth of a saturated backfill replay (perf, 60,000
 * synthetic jobs on 4,096 GPUs). */
static void cands_order(struct cand *cands, size_t n, size_t m)
{
    if (m > n)
        m = n;
    if (m * 8 > n) {
        qsort(cands, n, sizeof(*cands), cmp_cand);
        return;
    }
    for (size_t k = 0; k < m; k++) {
        size_t best = k;
        for (size_t x = k + 1; x < n; x++)
            if (cmp_cand(&cands[x], &cands[best]) < 0)
                best = x;
        if (best != k) {
            struct cand tmp = cands[k];
            cands[k] = cands[best];
            cands[best] = tmp;
        }
    }
}

static int add_preemption(struct ctx *c, int32_t a, int32_t j)
{
    int r = sched_grow((void **)&c->r.preemptions, &c->capprm, c->r.npreemptions + 1,
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
        node_sort(c, i);
        while (!sched_nst_fits(&c->ns[i], nd)) {
            int32_t pick = -1;
            for (int32_t a = c->astart[i]; a < c->astart[i + 1]; a++) {
                int32_t ai = c->aorder[a];
                const struct tm_sched_alloc *al = &in->allocs[ai];
                if (c->evicted[ai] || !al->loaned || !al->preemptible)
                    continue;
                if (pick < 0 || sched_alloc_end_given(c, ai) > sched_alloc_end_given(c, pick))
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
                sched_node_give(c, i, in->allocs[pick].gpu_mask, in->allocs[pick].gpu_milli, &an);
            }
        }
        masks[k] = sched_pick_gpus(&c->ns[i], nd, true);
        sched_node_take(c, i, masks[k], milli, nd);
    }
    for (k = 0; k < nd->nodes; k++) {
        r = sched_add_placement(c, j, cands[k].node, masks[k], milli, false);
        if (r < 0)
            return r;
    }
    return 1;
undo:
    /* Give back in reverse: the members placed, then the evictions. */
    while (k-- > 0)
        sched_node_give(c, cands[k].node, masks[k], milli, nd);
    while (c->r.npreemptions > p0) {
        const struct tm_sched_preemption *pr = &c->r.preemptions[--c->r.npreemptions];
        const struct tm_sched_alloc *al = &in->allocs[pr->alloc];
        struct need an = alloc_need(al);
        c->evicted[pr->alloc] = false;
        sched_node_take(c, al->node, al->gpu_mask, al->gpu_milli, &an);
    }
    return r < 0 ? r : 0;
}

/* Whether the models with a node big enough for the job (its model_mask,
 * or its size alone: a 120-core 8-GPU task fits only 128-core nodes) hold
 * at most 1/TM_SCHED_NARROW_DIV of the GPUs. */
bool sched_tied(const struct ctx *c, int32_t j)
{
    const struct need *nd = &c->needs[j];
    int64_t have = 0;

    if (nd->gpus == 0 && nd->milli == 0)
        return false;
    for (int s = 0; s < c->t.nslots; s++)
        if (nd->slots >> s & 1)
            have += c->t.slot_gpus[s];
    return have * TM_SCHED_NARROW_DIV <= c->t.all_gpus;
}

/* Whether the job asks for GPU models (model_mask) and those models' nodes
 * big enough for it hold at most 1/TM_SCHED_NARROW_DIV of the GPUs.  Such
 * a job competes for a few nodes with every flexible job that lands there;
 * waiting for the aging bound before reserving starved it on gpuspec33
 * (64 GPUs: a P100-only task needing 12 of the one big P100 node's 16
 * cores waited behind every small job that took 4 cores there).  Jobs
 * narrowed by size alone (a 120-core 8-GPU task fits only G3 nodes) are
 * left to the aging rule and to sched_at_risk(): reserving them at once
 * drained the G3 nodes on openb default and cost the many small jobs more
 * than it gave (bench/run-sched-targets.sh shows it in the p95 waits). */
bool sched_narrow(const struct ctx *c, int32_t j)
{
    return c->in->jobs[j].model_mask != 0 && sched_tied(c, j);
}

/* Whether the job accepts fewer models than the nodes have. */
bool sched_constrained(const struct ctx *c, int32_t j)
{
    return popcount64(c->needs[j].slots) < popcount64(c->t.all_slots);
}

/* Whether job j needs all the GPUs of any node it accepts: then the
 * whole-node test of reserve_cands_read() comes first, on the ends alone,
 * and most nodes are passed without reading their state (in a saturated
 * replay of 8-GPU jobs nearly every node is). */
static bool needs_whole_nodes(const struct ctx *c, const struct need *nd)
{
    int32_t most = 0;

    if (c->r.npreemptions != 0 || nd->gpus <= 0)
        return false;
    for (int sl = 0; sl < c->t.nslots; sl++)
        if ((nd->slots >> sl & 1) && c->t.slot_maxg[sl] > most)
            most = c->t.slot_maxg[sl];
    return nd->gpus >= most;
}

/* The first nodes of cands (ncand of them, at least job j's count) in
 * the order a reservation takes them; returns when the gang could start
 * there. */
static int64_t cands_take(const struct ctx *c, int32_t j, struct cand *cands, size_t ncand)
{
    const struct need *nd = &c->needs[j];
    int64_t last;

    if (ncand > 1)
        cands_order(cands, ncand, (size_t)nd->nodes);
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
    /* Sorted by key, not t: the gang starts when its last member can. */
    last = cands[0].t;
    for (int32_t k = 1; k < nd->nodes; k++)
        if (cands[k].t > last)
            last = cands[k].t;
    return last;
}

/* The candidate nodes of job j, those without a reservation, each with
 * its earliest start, the first nd->nodes of them in the order a
 * reservation takes (earliest, then off narrow jobs' nodes, then the node
 * it held), and when the gang could start there (*ret_start).  *ret_cands
 * is the caller's to free.  Returns the count (fewer than nd->nodes: no
 * start known), or < 0 on error. */
static int64_t reserve_cands_read(struct ctx *c, int32_t j, size_t *linked, struct cand **ret_cands,
                                  int64_t *ret_start, bool may_skip, bool *ret_skipped)
{
    const struct need *nd = &c->needs[j];
    bool evict = c->loans && !c->in->jobs[j].preemptible;
    struct release *buf = NULL;
    size_t bcap = 0, ncand = 0, ccap = 0;
    struct cand *cands = NULL;
    /* A single job takes the node of the smallest key (cmp_cand(): key,
     * then t, then the node; key >= t), or with loans the node it held
     * (the sticky rule below), so a node other than that one whose start
     * would come after the smallest key found so far needs no replay past
     * it: ties are still replayed, and the held node is replayed whole. */
    bool prune = nd->nodes == 1;
    bool flexible = popcount64(nd->slots) > 1;
    int32_t keep = c->loans ? c->in->jobs[j].hold_node - 1 : -1;
    int64_t cutoff = INF_MS;
    bool whole;
    int r;

    if (!c->timeline) {
        r = timeline_init(c);
        if (r < 0)
            return r;
    }
    r = timeline_sync(c, linked);
    if (r < 0)
        return r;
    whole = needs_whole_nodes(c, nd);
    /* A single job's held node goes first: its key is then the cutoff
     * for all the others from the start, instead of only once the walk
     * reaches a node as early.  Held drains are re-reserved at every
     * pass of a saturated replay, so this walk is the hot one. */
    size_t lead = prune && keep >= 0 && (size_t)keep < c->nn ? 1 : 0;
    /* Such a job, needing whole nodes, where no node's key carries the
     * narrow penalty (key = t): by the sticky rule below it keeps its
     * node unless another can take it now, and only a node with no GPU
     * work past now but loans can (c->freenow).  So once its node is a
     * candidate, only those are read: the same choice, without a walk of
     * every node at every pass for every held drain. */
    bool fast = may_skip && lead && whole && !c->any_narrow;
    for (size_t x = 0; x < c->nn + lead; x++) {
        size_t i;
        const struct nst *s;
        struct cand cd;
        if (fast && x == 1 && ncand == 0)
            fast = false; /* its node cannot hold it: walk them all */
        if (fast && x > 0) {
            if (x - 1 >= c->nfreenow)
                break;
            i = (size_t)c->freenow[x - 1];
        } else {
            i = lead ? (x == 0 ? (size_t)keep : x - 1) : x;
        }
        if (lead && x > 0 && i == (size_t)keep)
            continue;
        if (whole && (evict ? c->gkept : c->gend)[i] > cutoff && (int32_t)i != keep)
            continue;
        s = &c->ns[i];
        if (!s->ok || s->res != NO_SLOT)
            continue;
        if (nd->gpus > 0 || nd->milli > 0) {
            if (s->mslot < 0 || !(nd->slots >> s->mslot & 1))
                continue;
            if (nd->gpus > s->gpus)
                continue;
        }
        /* node_earliest()'s whole-node test, ahead of its set-up: a node
         * whose last GPU holder ends past the cutoff cannot hold a job
         * that needs all its GPUs by then, nor now (the holder is there).
         * Nearly every call ends there in a saturated tarmac replay.
         * Not once this pass has
         * evicted: then the ends count what was given back. */
        if (nd->gpus >= s->gpus && c->r.npreemptions == 0) {
            int64_t last = evict ? c->gkept[i] : c->gend[i];
            if (last == INF_MS || ((int32_t)i != keep && last > cutoff))
                continue;
        }
        cd.node = (int32_t)i;
        cd.t = node_earliest(c, (int32_t)i, nd, evict, (int32_t)i == keep ? INF_MS : cutoff, &buf,
                             &bcap, &cd.rel);
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
        if (c->loans && c->any_narrow && !sched_narrow(c, j) && s->mslot >= 0 &&
            (c->narrow_wants[s->mslot] || (flexible && c->pressure[s->mslot] > 0)) &&
            cd.t < INF_MS - TM_SCHED_PRESSURE_PENALTY_MS)
            cd.key = cd.t + TM_SCHED_PRESSURE_PENALTY_MS;
        r = sched_grow((void **)&cands, &ccap, ncand + 1, sizeof(*cands));
        if (r < 0)
            goto out;
        cands[ncand++] = cd;
        if (prune && cd.key < cutoff)
            cutoff = cd.key;
    }
    r = 0;
    *ret_skipped = fast;
    if (ncand < (size_t)nd->nodes)
        goto out;
    *ret_start = cands_take(c, j, cands, ncand);
out:
    free(buf);
    if (r < 0) {
        free(cands);
        return r;
    }
    *ret_cands = cands;
    return (int64_t)ncand;
}

static int64_t reserve_cands(struct ctx *c, int32_t j, size_t *linked, struct cand **ret_cands,
                             int64_t *ret_start)
{
    bool skipped = false;
    int64_t n = reserve_cands_read(c, j, linked, ret_cands, ret_start, true, &skipped);

#ifndef NDEBUG
    /* The nodes left unread must not have changed the choice: debug
     * builds read them all as well and compare. */
    if (n >= 0 && skipped) {
        struct cand *all = NULL;
        int64_t start = INF_MS, m = reserve_cands_read(c, j, linked, &all, &start, false, &skipped);
        bool some = n >= c->needs[j].nodes, some_all = m >= c->needs[j].nodes;
        if (m >= 0 && (some != some_all || (some && (start != *ret_start || all[0].node != (*ret_cands)[0].node ||
                                                     all[0].t != (*ret_cands)[0].t)))) {
            fprintf(stderr, "reserve_cands: the nodes skipped changed the choice\n");
            abort();
        }
        free(all);
    }
#endif
    return n;
}

/* Reserve the earliest start for job j on nodes without a reservation.
 * With loans (tarmac) and a non-preemptible job, loans count as free now,
 * and when that makes the start now, they are evicted and the job placed.
 * Returns 2 placed, 1 reserved, 0 no start known, < 0 on error. */
int sched_reserve(struct ctx *c, int32_t j, size_t *linked)
{
    const struct need *nd = &c->needs[j];
    bool evict = c->loans && !c->in->jobs[j].preemptible;
    struct cand *cands = NULL;
    int64_t gang_start = INF_MS, n = reserve_cands(c, j, linked, &cands, &gang_start);
    int r;

    if (n < 0)
        return (int)n;
    r = 0;
    if (n < nd->nodes)
        goto out;
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
            rv.closed = c->loans && sched_is_urgent(c, j);
            if (c->loans && c->in->jobs[j].hold_start_ms > 0 &&
                c->in->jobs[j].hold_start_ms < start)
                rv.deadline = c->in->jobs[j].hold_start_ms;
            rv.preemptible = c->in->jobs[j].preemptible;
            rv.need = *nd;
            r = sched_grow((void **)&c->rn, &c->caprn, c->nrn + 1, sizeof(*c->rn));
            if (r < 0)
                goto out;
            r = sched_grow((void **)&c->r.reservations, &c->capres, c->r.nreservations + 1,
                     sizeof(*c->r.reservations));
            if (r < 0)
                goto out;
            c->rn[c->nrn] = rv;
            sched_node_save(c, cands[k].node);
            c->ns[cands[k].node].res = (int32_t)c->nrn++;
            c->version++;
            res = &c->r.reservations[c->r.nreservations++];
            res->job = j;
            res->node = cands[k].node;
            res->start_ms = start;
        }
        r = 1;
    }
out:
    free(cands);
    return r;
}

static bool need_same(const struct need *a, const struct need *b)
{
    return a->cpu == b->cpu && a->mem == b->mem && a->slots == b->slots && a->gpus == b->gpus &&
           a->milli == b->milli && a->nodes == b->nodes && a->nomatch == b->nomatch;
}

/* When job j could start if it reserved now (sched_reserve()'s start,
 * nothing taken); INF_MS if no start is known, < 0 on error.  What it
 * reads of j is its request, model_mask (narrow or not), hold_node and
 * preemptibility: jobs alike in those get the answer of the first until
 * the state changes (c->version).  A deep queue of aged jobs asks it for
 * each blocked one (sched_at_risk()), a walk of every node each; keeping
 * the answers roughly halves a replay under a short bound and a deep
 * queue, with the same decisions. */
int64_t sched_projected_start(struct ctx *c, int32_t j, size_t *linked)
{
    const struct tm_sched_job *jb = &c->in->jobs[j];
    const struct need *nd = &c->needs[j];
    struct cand *cands = NULL;
    struct proj *pc;
    int64_t start = INF_MS, n;

    for (int k = 0; k < PROJ_CACHE; k++) {
        pc = &c->proj[k];
        if (pc->version == c->version + 1 && pc->model_mask == jb->model_mask &&
            pc->hold_node == jb->hold_node && pc->preemptible == jb->preemptible && need_same(&pc->nd, nd))
            return pc->start;
    }
    n = reserve_cands(c, j, linked, &cands, &start);
    free(cands);
    if (n < 0)
        return n;
    if (n < nd->nodes)
        start = INF_MS;
    pc = &c->proj[c->proj_next];
    c->proj_next = (c->proj_next + 1) % PROJ_CACHE;
    *pc = (struct proj){.version = c->version + 1, .nd = *nd, .model_mask = jb->model_mask,
                        .hold_node = jb->hold_node, .preemptible = jb->preemptible, .start = start};
    return start;
}


/* Whether the free GPUs of the job's models would hold it in total but no
 * node holds it: the capacity is there, only fragmented, and idles while
 * the job waits.  Then draining one node for it costs nothing that anyone
 * else would have used; when the cluster is simply full, it does. */
bool sched_fragmented(const struct ctx *c, const struct need *nd)
{
    int64_t want = (int64_t)(nd->gpus > 0 ? nd->gpus * MILLI : nd->milli) * nd->nodes, have = 0;

    if (want == 0)
        return false;
    for (int s = 0; s < c->t.nslots; s++)
        if (nd->slots >> s & 1)
            have += c->t.slot_free[s];
    return have >= want;
}

/* A heavy job asks for at least TM_SCHED_HEAVY_GPUS whole GPUs on a node
 * and is not narrow: reserving for it drains most of a node. */
bool sched_heavy(const struct ctx *c, int32_t j)
{
    return c->needs[j].gpus >= TM_SCHED_HEAVY_GPUS && !sched_narrow(c, j);
}

/* Whether tarmac must not reserve for job j now: it is heavy and the heavy
 * reservations already made in this pass drain 1/TM_SCHED_DRAIN_DIV of
 * the GPUs (the first one always goes through).  Each drain holds GPUs
 * that the many small jobs could use; on openb default at 64 GPUs, up to
 * eight concurrent drains for aged 8-GPU jobs doubled the p95 wait of
 * everyone else, while one at a time still served every 8-GPU job within
 * the bound (they are mostly short: 28 of 39 under 30 minutes).  Aged jobs
 * come first in the order, so the oldest heavy job gets the drain. */
bool sched_heavy_capped(const struct ctx *c, int32_t j, int64_t drain_gpus)
{
    /* A drain already under way (the job held a reservation in the last
     * pass) goes on whatever the cap: dropping it when an aged job earlier
     * in the order took the budget restarted it later on another node, and
     * the job passed the bound (gpuspec33, 64 GPUs, load 1.1: reserved at
     * 24 h of age, dropped twice, started at 48.5 h). */
    if (!sched_heavy(c, j) || drain_gpus == 0 || c->in->jobs[j].hold_node > 0)
        return false;
    return (drain_gpus + (int64_t)c->needs[j].gpus * c->needs[j].nodes) * TM_SCHED_DRAIN_DIV > c->t.all_gpus;
}

int64_t tm_sched_tarmac_risk_deadline(const struct tm_sched_params *p, int64_t submit_ms)
{
    int64_t bound = tm_sched_starvation_ms(p);

    return submit_ms + bound - bound / TM_SCHED_RISK_MARGIN_DIV;
}

/* Whether job j, if it reserved now, would start within a margin of the
 * bound (later than submit + bound - bound/TM_SCHED_RISK_MARGIN_DIV): the
 * start is computed from expected ends that are often short, so a job
 * that waits for its turn to reserve until then passes the bound when
 * they overrun.  1 at risk, 0 not (or no start known: it cannot reserve
 * anyway), < 0 on error. */
int sched_at_risk(struct ctx *c, int32_t j, size_t *linked)
{
    const struct tm_sched_input *in = c->in;
    int64_t deadline = tm_sched_tarmac_risk_deadline(&in->params, in->jobs[j].submit_ms);
    int64_t start = sched_projected_start(c, j, linked);

    if (start < 0)
        return (int)start;
    return start != INF_MS && start > deadline;
}
