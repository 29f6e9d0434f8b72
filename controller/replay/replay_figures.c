/*
 * controller/replay/replay_figures.c: what the time replay's figures
 * integrate between events (GPU milli allocated, free milli while some
 * queued job could use it, the fit-aware idle over the distinct queued
 * requests), the estimates scored at arrival, and the figures read at
 * the end (replay.h, docs/measuring.md).  The engine (replay_engine.c)
 * calls these; they only read and write its accounting.
 */
#include "controller/replay/replay_engine.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/err.h"

void replay_integrate(struct replay_engine *s, int64_t from, int64_t to)
{
    double dt = (double)(to - from);
    int64_t lo = from > s->window_lo ? from : s->window_lo;
    int64_t hi = to < s->window_hi ? to : s->window_hi;

    if (to <= from)
        return;
    double dw = hi > lo ? (double)(hi - lo) : 0;

    s->busy += (double)s->alloc_milli * dt;
    s->busy_window += (double)s->alloc_milli * dw;
    for (int m = 0; m < s->nmodels; m++) {
        if (s->waiting[m] > 0) {
            s->idle_wait += (double)s->free_milli[m] * dt;
            s->idle_sliver += (double)s->sliver_milli[m] * dt;
            s->win_waitfree += (double)s->free_milli[m] * dw;
            s->win_sliver += (double)s->sliver_milli[m] * dw;
        } else {
            s->win_nowait += (double)s->free_milli[m] * dw;
        }
        if (s->waiting_accepts[m] > 0)
            s->idle_accepts += (double)s->free_milli[m] * dt;
    }
    s->idle_fit += (double)s->fit_milli * dt;
    s->win_fit += (double)s->fit_milli * dw;
}


/* Idle-while-waiting as docs/measuring.md defines it (the fit-aware reading): a
 * GPU's free milli counts only while some queued job could be placed on
 * it now, i.e. a share that fits the GPU's free milli, or whole GPUs that
 * fit the node's wholly free GPUs (this GPU among them), on an accepted
 * model, with the node's free CPU and memory enough.  A 190-milli sliver
 * no queued share fits is packing loss, not counted here; the model
 * reading (idle_while_waiting_model_gpu_hours) counts it.  Recomputed
 * after each instant's events and pass: O(nodes x distinct queued
 * requests).  A gang's request fits a node only while enough nodes, this
 * one among them, could each hold one of its members (gang_fits): it
 * starts on all of them at once or not at all. */
static int64_t node_fit_milli(const struct replay_engine *s, size_t i)
{
    const struct tm_sched_node *n = &s->nodes[i];
    const int16_t *used = &s->gpu_used[i * TM_NODE_GPUS_MAX];
    int32_t full = 0, maxfree = 0, share = MILLI + 1;
    int64_t t = 0;
    bool whole = false;

    if (n->gpus <= 0 || !s->nactive)
        return 0;
    for (int g = 0; g < n->gpus; g++) {
        int32_t f = MILLI - used[g];
        if (f == MILLI)
            full++;
        if (f > maxfree)
            maxfree = f;
    }
    if (maxfree == 0)
        return 0;
    for (size_t k = 0; k < s->nactive; k++) {
        const struct shape *sh = &s->shapes[s->active[k]];
        if (sh->nodes > 1 && !s->gang_fits[s->active[k]])
            continue;
        if (sh->mask && !(sh->mask >> n->model & 1))
            continue;
        if (sh->cpu > s->node_cpu_free[i] || sh->mem > s->node_mem_free[i])
            continue;
        if (sh->gpus > 0) {
            if (sh->gpus <= full)
                whole = true;
        } else if (sh->milli < share) {
            share = sh->milli;
        }
    }
    for (int g = 0; g < n->gpus; g++) {
        int32_t f = MILLI - used[g];
        if (f > 0 && (share <= f || (f == MILLI && whole)))
            t += f;
    }
    return t;
}


/* Whether node i could hold one member of a gang of request sh now. */
static bool member_fits(const struct replay_engine *s, size_t i, const struct shape *sh)
{
    const struct tm_sched_node *n = &s->nodes[i];

    if (sh->mask && !(sh->mask >> n->model & 1))
        return false;
    return sh->cpu <= s->node_cpu_free[i] && sh->mem <= s->node_mem_free[i] && sh->gpus <= s->gpus_full[i];
}

/* gang_fits of the queued gangs' requests again: whether as many nodes as
 * each gang has could each hold a member now.  Any change moves every
 * node's fit (shapes_changed).  O(nodes) per queued gang request. */
static void gang_fits_recompute(struct replay_engine *s)
{
    for (size_t k = 0; k < s->nactive; k++) {
        const struct shape *sh = &s->shapes[s->active[k]];
        int32_t holders = 0;
        uint8_t fits;
        if (sh->nodes <= 1)
            continue;
        for (size_t i = 0; i < s->nnodes && holders < sh->nodes; i++)
            holders += member_fits(s, i, sh);
        fits = holders >= sh->nodes;
        if (fits != s->gang_fits[s->active[k]]) {
            s->gang_fits[s->active[k]] = fits;
            s->shapes_changed = true;
        }
    }
}

/* The same sum as recomputing every node, from the nodes that changed. */
void replay_fit_recompute(struct replay_engine *s)
{
    if (s->has_gangs)
        gang_fits_recompute(s);
    if (s->shapes_changed) {
        int64_t t = 0;
        for (size_t i = 0; i < s->nnodes; i++) {
            s->node_fit[i] = node_fit_milli(s, i);
            t += s->node_fit[i];
        }
        s->fit_milli = t;
    } else {
        for (size_t k = 0; k < s->ndirty; k++) {
            int32_t i = s->dirty[k];
            int64_t v = node_fit_milli(s, (size_t)i);
            s->fit_milli += v - s->node_fit[i];
            s->node_fit[i] = v;
        }
    }
    for (size_t k = 0; k < s->ndirty; k++)
        s->node_dirty[s->dirty[k]] = 0;
    s->ndirty = 0;
    s->shapes_changed = false;
}

void replay_shape_count(struct replay_engine *s, int32_t sh, int d)
{
    struct shape *p = &s->shapes[sh];

    p->count += d;
    if (p->count > 0 && p->apos < 0) {
        s->shapes_changed = true;
        p->apos = (int32_t)s->nactive;
        s->active[s->nactive++] = sh;
    } else if (p->count == 0 && p->apos >= 0) {
        s->shapes_changed = true;
        int32_t last = s->active[--s->nactive];
        s->active[p->apos] = last;
        s->shapes[last].apos = p->apos;
        p->apos = -1;
    }
}

static uint64_t shape_hash(const struct shape *p)
{
    uint64_t h = 1469598103934665603ull;
    uint64_t v[5] = {(uint64_t)p->cpu, (uint64_t)p->mem, p->mask, (uint64_t)p->gpus, (uint64_t)p->milli};

    for (int i = 0; i < 5; i++) {
        h ^= v[i];
        h *= 1099511628211ull;
        h ^= h >> 29;
    }
    return h;
}

/* One shape per distinct request; fills rjob.shape.  0 or TM_ENOMEM. */
int replay_shapes_build(struct replay_engine *s)
{
    size_t cap = 16;
    int32_t *tab;

    while (cap < 2 * s->njobs + 2)
        cap *= 2;
    tab = malloc(cap * sizeof(*tab));
    s->shapes = malloc((s->njobs + 1) * sizeof(*s->shapes));
    s->active = malloc((s->njobs + 1) * sizeof(*s->active));
    s->gang_fits = calloc(s->njobs + 1, sizeof(*s->gang_fits));
    if (!tab || !s->shapes || !s->active || !s->gang_fits) {
        free(tab);
        return TM_ENOMEM;
    }
    memset(tab, 0xff, cap * sizeof(*tab));
    for (size_t j = 0; j < s->njobs; j++) {
        const struct tm_trace_job *tj = s->jobs[j].tj;
        bool whole = tj->gpus > 0 || tj->gpu_milli >= MILLI;
        struct shape key = {.cpu = tj->cpu_milli, .mem = tj->memory_mib, .mask = tj->model_mask,
                            .gpus = whole ? (tj->gpus > 0 ? tj->gpus : 1) : 0,
                            .milli = whole ? 0 : tj->gpu_milli, .nodes = s->jobs[j].nodes, .apos = -1};
        size_t h = (size_t)shape_hash(&key) & (cap - 1);
        for (;;) {
            const struct shape *p;
            if (tab[h] < 0) {
                tab[h] = (int32_t)s->nshapes;
                s->shapes[s->nshapes++] = key;
                break;
            }
            p = &s->shapes[tab[h]];
            if (p->cpu == key.cpu && p->mem == key.mem && p->mask == key.mask && p->gpus == key.gpus &&
                p->milli == key.milli && p->nodes == key.nodes)
                break;
            h = (h + 1) & (cap - 1);
        }
        s->jobs[j].shape = tab[h];
    }
    free(tab);
    return 0;
}

void replay_waiting_add(struct replay_engine *s, const struct rjob *rj, int d)
{
    const struct tm_trace_job *j = rj->tj;

    for (int m = 0; m < s->nmodels; m++) {
        if (rj->usable >> m & 1)
            s->waiting[m] += d;
        if (!j->model_mask || (j->model_mask >> m & 1))
            s->waiting_accepts[m] += d;
    }
}


static int cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return x < y ? -1 : x > y;
}


static double pct(const int64_t *v, size_t n, double p)
{
    size_t k;

    if (!n)
        return 0;
    k = (size_t)(p * (double)(n - 1) + 0.5);
    return (double)v[k < n ? k : n - 1] / 1000.0;
}


/* Estimate quality at arrival (replay.h, est_*): by the level the keys
 * alone reach, so the predictor with and without its fallback model is
 * scored on the same jobs. */
void replay_score_estimate(struct tm_replay_stats *st, const struct tm_estimator *est,
                          const struct tm_estimate_key *k, const struct rjob *rj, int lvl)
{
    int keys;
    double e = (double)(rj->estimate > 0 ? rj->estimate : TM_SCHED_DEFAULT_ESTIMATE_MS);
    double y = (double)rj->runtime;

    (void)tm_estimate_keys(est, k, &keys);
    if (keys < 0 || keys > 4)
        keys = 0;
    e = e < 1000 ? 1000 : e;
    y = y < 1000 ? 1000 : y;
    st->est_jobs[keys]++;
    st->est_abslog_sum[keys] += fabs(log(e / y));
    st->est_model_jobs += lvl == TM_ESTIMATE_LEVEL_MODEL;
    e = (double)tm_estimate_model(est, k);
    if (e > 0) {
        st->est_model_scored[keys]++;
        st->est_model_abslog_sum[keys] += fabs(log(e / y));
    }
}


/* ---------- the figures ---------- */

/* Waits from arrival to first start, and completion times. */
static int figures_waits(const struct replay_engine *s, struct tm_replay_stats *st)
{
    int64_t *waits = malloc((s->njobs + 1) * sizeof(*waits));
    size_t nw = 0;
    double sum = 0;

    if (!waits)
        return TM_ENOMEM;
    for (size_t j = 0; j < s->njobs; j++) {
        if (s->jobs[j].first_start < 0)
            continue;
        waits[nw] = s->jobs[j].first_start - s->jobs[j].submit;
        sum += (double)waits[nw];
        if (waits[nw] > st->starvation_ms)
            st->starved++;
        nw++;
    }
    qsort(waits, nw, sizeof(*waits), cmp_i64);
    st->wait_mean_s = nw ? sum / (double)nw / 1000.0 : 0;
    st->wait_p50_s = pct(waits, nw, 0.50);
    st->wait_p95_s = pct(waits, nw, 0.95);
    st->wait_p99_s = pct(waits, nw, 0.99);
    st->wait_max_s = nw ? (double)waits[nw - 1] / 1000.0 : 0;
    st->jct_mean_s = nw ? s->jct / (double)nw / 1000.0 : 0;
    free(waits);
    return 0;
}

int replay_engine_figures(struct replay_engine *s, struct tm_replay_stats *st)
{
    int64_t first = s->first, last = s->last, end_all = s->end_all;
    double cap = (double)s->cap_milli;
    int r = figures_waits(s, st);

    if (r < 0)
        return r;
    replay_quota_figures(s, st);
    st->makespan_s = (double)(end_all - first) / 1000.0;
    st->arrival_window_s = (double)(last - first) / 1000.0;
    st->utilisation = end_all > first ? s->busy / (cap * (double)(end_all - first)) : 0;
    st->utilisation_arrival = last > first ? s->busy_window / (cap * (double)(last - first)) : 0;
    st->idle_while_waiting_model_gpu_hours = s->idle_wait / 1000.0 / 3600000.0;
    st->idle_sliver_gpu_hours = s->idle_sliver / 1000.0 / 3600000.0;
    st->idle_while_waiting_accepts_gpu_hours = s->idle_accepts / 1000.0 / 3600000.0;
    st->idle_while_waiting_fit_gpu_hours = s->idle_fit / 1000.0 / 3600000.0;
    st->idle_while_waiting_gpu_hours = st->idle_while_waiting_fit_gpu_hours;
    st->window_idle_nothing_waits_gpu_hours = s->win_nowait / 1000.0 / 3600000.0;
    st->window_idle_fit_gpu_hours = s->win_fit / 1000.0 / 3600000.0;
    st->window_idle_packing_gpu_hours = (s->win_waitfree - s->win_fit) / 1000.0 / 3600000.0;
    st->window_idle_sliver_gpu_hours = s->win_sliver / 1000.0 / 3600000.0;
    if (st->reservation_slips)
        st->slip_mean_s /= (double)st->reservation_slips;
    qsort(s->slips, st->reservation_slips, sizeof(*s->slips), cmp_i64);
    st->slip_p50_s = pct(s->slips, st->reservation_slips, 0.50);
    st->slip_p95_s = pct(s->slips, st->reservation_slips, 0.95);
    return 0;
}
