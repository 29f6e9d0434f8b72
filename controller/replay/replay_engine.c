/*
 * controller/replay/replay_engine.c: the time replay's engine (see
 * replay.h and replay_engine.h).
 *
 * Virtual time only: the clock jumps from event to event.  Between two
 * events the engine integrates what the figures need (GPU milli allocated,
 * free GPU milli of each model while some queued job could use it).  After
 * the events of an instant it runs its pass object (struct replay_pass),
 * which hands tm_sched_run(), the pass the live controller runs, some or
 * all of the queue; what the pass decides is applied here
 * (replay_pass_apply()): the starts, the evictions, the reservations.
 *
 * Estimates: with --estimates exact, the scheduler sees each job's true
 * runtime (an upper bound for backfill); by default it sees the predictor's
 * answer (controller/sched/estimate.h) from the runtimes of jobs finished earlier
 * in the replay, nothing from the future.  A running job that passes its
 * estimate gets tm_estimate_overrun() before the next pass.
 */
#include "controller/replay/replay_engine.h"

#include <stdlib.h>
#include <stdio.h>
#include <string.h>

#include "core/err.h"

/* ---------- heap of completions ---------- */

static bool heap_less(const struct heapent *a, const struct heapent *b)
{
    return a->t < b->t || (a->t == b->t && a->job < b->job);
}

static void heap_push(struct replay_engine *s, int64_t t, int32_t job, uint32_t gen)
{
    size_t i = s->nheap++;

    s->heap[i] = (struct heapent){t, job, gen};
    while (i > 0) {
        size_t p = (i - 1) / 2;
        if (!heap_less(&s->heap[i], &s->heap[p]))
            break;
        struct heapent tmp = s->heap[p];
        s->heap[p] = s->heap[i];
        s->heap[i] = tmp;
        i = p;
    }
}

static struct heapent heap_pop(struct replay_engine *s)
{
    struct heapent top = s->heap[0];
    size_t i = 0;

    s->heap[0] = s->heap[--s->nheap];
    for (;;) {
        size_t l = 2 * i + 1, r = l + 1, m = i;
        if (l < s->nheap && heap_less(&s->heap[l], &s->heap[m]))
            m = l;
        if (r < s->nheap && heap_less(&s->heap[r], &s->heap[m]))
            m = r;
        if (m == i)
            break;
        struct heapent tmp = s->heap[m];
        s->heap[m] = s->heap[i];
        s->heap[i] = tmp;
        i = m;
    }
    return top;
}

/* ---------- the replay ---------- */

static int32_t gang_size(const struct tm_trace_job *j)
{
    return j->nodes > 1 ? j->nodes : 1;
}

/* On all its nodes: a gang's GPU-seconds are nodes x GPUs x runtime. */
static int32_t milli_total(const struct tm_trace_job *j)
{
    return (j->gpus > 0 ? j->gpus * MILLI : j->gpu_milli) * gang_size(j);
}

/* The trace models (bits) with a node that could hold the job when empty:
 * model accepted, enough GPUs, CPU and memory (a gang: one of its
 * members, the gang's nodes being free to mix models).  0: none, or a
 * gang larger than the nodes that could hold a member (or than
 * REPLAY_GANG_MAX): the job is dropped.  This is what "could have used
 * that GPU model" means in the idle-while-waiting figure: a 120-core
 * 8-GPU task cannot use a model whose nodes have 64 cores and 2 GPUs. */
static uint64_t models_holding(const struct tm_sched_node *nodes, size_t nn, const struct tm_trace_job *j)
{
    uint64_t m = 0;
    size_t holders = 0;

    for (size_t i = 0; i < nn; i++) {
        const struct tm_sched_node *n = &nodes[i];
        if (n->gpus == 0 || (j->model_mask && !(j->model_mask >> n->model & 1)))
            continue;
        if (n->cpu_milli >= j->cpu_milli && n->memory_mib >= j->memory_mib &&
            n->gpus >= (j->gpus > 0 ? j->gpus : 1)) {
            m |= 1ull << n->model;
            holders++;
        }
    }
    return holders >= (size_t)gang_size(j) && gang_size(j) <= REPLAY_GANG_MAX ? m : 0;
}

static void node_touch(struct replay_engine *s, int32_t i)
{
    if (s->ncache)
        tm_sched_node_cache_touch(s->ncache, (size_t)i);
    if (s->pass->node_touched)
        s->pass->node_touched(s->ps, i);
    if (!s->node_dirty[i]) {
        s->node_dirty[i] = 1;
        s->dirty[s->ndirty++] = i;
    }
}

/* Close the queue's holes, keeping its order.  Every entry of q is a
 * distinct job between two compactions (a pass's evictions requeue jobs
 * that ran, its placements only leave holes, arrivals are new), so q
 * never needs more than njobs entries. */
static void q_compact(struct replay_engine *s)
{
    size_t w = 0;

    if (s->qlen == s->nq)
        return;
    for (size_t r = 0; r < s->qlen; r++) {
        if (s->qjob[r] < 0)
            continue;
        if (w != r) {
            s->q[w] = s->q[r];
            s->qjob[w] = s->qjob[r];
            s->jobs[s->qjob[w]].qpos = (int32_t)w;
        }
        w++;
    }
    s->qlen = w;
}

static void enqueue(struct replay_engine *s, int32_t j)
{
    struct rjob *rj = &s->jobs[j];
    const struct tm_trace_job *tj = rj->tj;

    if (s->qlen == s->njobs)
        q_compact(s); /* unreached (above); never inside replay_pass_apply() */
    s->q[s->qlen] = (struct tm_sched_job){
        .id = 2 * (int64_t)j, .submit_ms = rj->submit, .estimate_ms = rj->estimate, .cpu_milli = tj->cpu_milli,
        .memory_mib = tj->memory_mib, .model_mask = tj->model_mask, .gpus = tj->gpus,
        .gpu_milli = tj->gpus > 0 ? MILLI : tj->gpu_milli, .nodes = rj->nodes, .priority = 0,
        .klass = tj->klass, .preemptible = tj->preemptible};
    s->qjob[s->qlen] = j;
    rj->qpos = (int32_t)s->qlen++;
    s->nq++;
    if (s->pass->queued)
        s->pass->queued(s->ps, j);
    replay_waiting_add(s, rj, 1);
    replay_shape_count(s, rj->shape, 1);
}

static void dequeue(struct replay_engine *s, int32_t j)
{
    struct rjob *rj = &s->jobs[j];
    s->qjob[rj->qpos] = -1;
    s->nq--;
    rj->qpos = -1;
    if (s->pass->dequeued)
        s->pass->dequeued(s->ps, j);
    replay_waiting_add(s, rj, -1);
    replay_shape_count(s, rj->shape, -1);
}

/* Account a change of `d` milli used on the GPUs of `mask` on a node. */
/* Node i's GPU summary for the footprint (gpus_full, gpu_free_max,
 * gpu_free_sum) from gpu_used, after each change: a placement or a
 * removal here instead of a sweep of every node in every pass. */
static void gpu_summary(struct replay_engine *s, int32_t i)
{
    const int16_t *used = &s->gpu_used[i * TM_NODE_GPUS_MAX];
    int full = 0, mx = 0, sum = 0;

    for (int g = 0; g < s->nodes[i].gpus; g++) {
        int f = used[g] > MILLI ? 0 : MILLI - used[g];
        full += f == MILLI;
        mx = f > mx ? f : mx;
        sum += f;
    }
    s->gpus_full[i] = (int8_t)full;
    s->gpu_free_max[i] = (int16_t)mx;
    s->gpu_free_sum[i] = sum;
}

static void gpu_use(struct replay_engine *s, int32_t node, uint32_t mask, int32_t d)
{
    int model = s->nodes[node].model;

    node_touch(s, node);
    for (int g = 0; g < TM_NODE_GPUS_MAX; g++) {
        int16_t *u = &s->gpu_used[node * TM_NODE_GPUS_MAX + g];
        if (!(mask >> g & 1))
            continue;
        if (*u > 0 && *u < MILLI)
            s->sliver_milli[model] -= MILLI - *u;
        *u = (int16_t)(*u + d);
        if (*u > 0 && *u < MILLI)
            s->sliver_milli[model] += MILLI - *u;
    }
    gpu_summary(s, node);
}

static bool alloc_kept(const struct tm_sched_alloc *al)
{
    return !(al->loaned && al->preemptible);
}

static void node_ends_add(struct node_ends *e, const struct tm_sched_alloc *al, int64_t est, int64_t start)
{
    if (al->gpu_milli <= 0 || !al->gpu_mask)
        return;
    if (e->n++ == 0 || start + est > e->fix)
        e->fix = start + est;
    if (e->n == 1 || start < e->first)
        e->first = start;
    if (!alloc_kept(al))
        return;
    if (e->n_kept++ == 0 || start + est > e->fix_kept)
        e->fix_kept = start + est;
    if (e->n_kept == 1 || start < e->first_kept)
        e->first_kept = start;
}

/* Node n's ends from its list (after a removal: a node runs a few). */
static void node_ends_redo(struct replay_engine *s, int32_t n)
{
    struct node_ends *e = &s->nends[n];

    *e = (struct node_ends){0};
    for (int32_t a = s->alloc_head[n]; a >= 0; a = s->alloc_next[a])
        node_ends_add(e, &s->allocs[a], s->alloc_est[a], s->alloc_start[a]);
}

/* The per-node lists of allocs (sim.fp): alloc p put on its node's list,
 * taken off it, and the entry at `from` moved to `to` (the swap of a
 * removal), before allocs[] itself moves. */
static void alloc_link(struct replay_engine *s, int32_t p)
{
    int32_t n = s->allocs[p].node;

    s->alloc_prev[p] = -1;
    s->alloc_next[p] = s->alloc_head[n];
    if (s->alloc_head[n] >= 0)
        s->alloc_prev[s->alloc_head[n]] = p;
    s->alloc_head[n] = p;
    s->node_nallocs[n]++;
    node_ends_add(&s->nends[n], &s->allocs[p], s->alloc_est[p], s->alloc_start[p]);
}

static void alloc_unlink(struct replay_engine *s, int32_t p)
{
    int32_t n = s->allocs[p].node;

    if (s->alloc_prev[p] >= 0)
        s->alloc_next[s->alloc_prev[p]] = s->alloc_next[p];
    else
        s->alloc_head[n] = s->alloc_next[p];
    if (s->alloc_next[p] >= 0)
        s->alloc_prev[s->alloc_next[p]] = s->alloc_prev[p];
    s->node_nallocs[n]--;
    node_ends_redo(s, n);
}

static void alloc_move(struct replay_engine *s, int32_t from, int32_t to)
{
    int32_t n = s->allocs[from].node;

    s->alloc_next[to] = s->alloc_next[from];
    s->alloc_prev[to] = s->alloc_prev[from];
    if (s->alloc_prev[to] >= 0)
        s->alloc_next[s->alloc_prev[to]] = to;
    else
        s->alloc_head[n] = to;
    if (s->alloc_next[to] >= 0)
        s->alloc_prev[s->alloc_next[to]] = to;
}

/* The alloc at `to` in its job's ring where `from` was (the swap of a
 * removal), before allocs[] itself moves. */
static void sib_move(struct replay_engine *s, int32_t from, int32_t to)
{
    int32_t nx = s->alloc_sib_next[from], pv = s->alloc_sib_prev[from];

    if (nx == from) {
        s->alloc_sib_next[to] = s->alloc_sib_prev[to] = to;
        return;
    }
    s->alloc_sib_next[to] = nx;
    s->alloc_sib_prev[to] = pv;
    s->alloc_sib_prev[nx] = to;
    s->alloc_sib_next[pv] = to;
}

/* One alloc of job j off the running jobs, its capacity given back;
 * rj->alloc moves to another of its members, -1 after the last. */
static void alloc_remove_one(struct replay_engine *s, int32_t j)
{
    struct rjob *rj = &s->jobs[j];
    size_t p = (size_t)rj->alloc, last = s->nallocs - 1;
    const struct tm_sched_alloc *a = &s->allocs[p];
    int model = s->nodes[a->node].model;
    int32_t sib = s->alloc_sib_next[p];

    s->free_milli[model] += (int64_t)__builtin_popcount(a->gpu_mask) * a->gpu_milli;
    gpu_use(s, a->node, a->gpu_mask, -a->gpu_milli);
    s->alloc_milli -= (int64_t)__builtin_popcount(a->gpu_mask) * a->gpu_milli;
    s->node_cpu_free[a->node] += a->cpu_milli;
    s->node_mem_free[a->node] += a->memory_mib;
    if (s->pass->node_freed)
        s->pass->node_freed(s->ps, a->node);
    alloc_unlink(s, (int32_t)p);
    /* off its job's ring */
    if (sib != (int32_t)p) {
        s->alloc_sib_next[s->alloc_sib_prev[p]] = sib;
        s->alloc_sib_prev[sib] = s->alloc_sib_prev[p];
    }
    rj->alloc = sib != (int32_t)p ? sib : -1;
    if (p != last) {
        alloc_move(s, (int32_t)last, (int32_t)p);
        sib_move(s, (int32_t)last, (int32_t)p);
        s->allocs[p] = s->allocs[last];
        s->alloc_job[p] = s->alloc_job[last];
        s->alloc_est[p] = s->alloc_est[last];
        s->alloc_start[p] = s->alloc_start[last];
        if (s->jobs[s->alloc_job[p]].alloc == (int32_t)last)
            s->jobs[s->alloc_job[p]].alloc = (int32_t)p;
    }
    s->nallocs--;
}

/* Job j off the running jobs: every node of a gang at once. */
static void alloc_remove(struct replay_engine *s, int32_t j)
{
    while (s->jobs[j].alloc >= 0)
        alloc_remove_one(s, j);
}

/* (submit, index) pairs: arrival order, ties by trace order. */
static int cmp_pair(const void *a, const void *b)
{
    const int64_t *x = a, *y = b;

    if (x[0] != y[0])
        return x[0] < y[0] ? -1 : 1;
    return x[1] < y[1] ? -1 : x[1] > y[1];
}

/* A gang's nodes, placed or reserved: one placement or reservation per
 * node, each naming the job by its index in the pass. */
static void log_gang_nodes(FILE *f, const struct tm_sched_note *nt, const struct tm_sched_result *r)
{
    const char *sep = " nodes=";

    if (nt->verdict == TM_SCHED_PLACED) {
        for (size_t k = 0; k < r->nplacements; k++)
            if (r->placements[k].job == nt->job) {
                fprintf(f, "%s%d", sep, (int)r->placements[k].node);
                sep = ",";
            }
    } else if (nt->verdict == TM_SCHED_RESERVED) {
        for (size_t k = 0; k < r->nreservations; k++)
            if (r->reservations[k].job == nt->job) {
                fprintf(f, "%s%d", sep, (int)r->reservations[k].node);
                sep = ",";
            }
    }
}

static void log_note(const struct replay_engine *s, int64_t now, const struct rjob *rj,
                     const struct tm_sched_note *nt, const struct tm_sched_result *r)
{
    if (!s->cfg->log)
        return;
    fprintf(s->cfg->log, "t=%.3f policy=%s job=%s verdict=%s", (double)now / 1000.0,
            tm_sched_policy_name(s->cfg->policy), rj->tj->name, tm_sched_verdict_name(nt->verdict));
    fprintf(s->cfg->log, " sub=%.3f est=%.0f", (double)rj->submit / 1000.0,
            (double)rj->estimate / 1000.0);
    if (nt->node >= 0)
        fprintf(s->cfg->log, " node=%d", (int)nt->node);
    if (rj->nodes > 1)
        log_gang_nodes(s->cfg->log, nt, r);
    if (nt->verdict == TM_SCHED_RESERVED)
        fprintf(s->cfg->log, " start=%.3f", (double)nt->start_ms / 1000.0);
    fprintf(s->cfg->log, " why=\"%s\"\n", nt->why);
}

int replay_sched_once(const struct replay_engine *s, int64_t now, const struct tm_sched_job *jobs, size_t nj,
                      struct tm_sched_result *r)
{
    struct tm_sched_input in = {0};
    int err = 0;

    in.quota = replay_quota_view(s, now, jobs, nj, &err);
    if (err < 0)
        return err;
    in.jobs = jobs;
    in.njobs = nj;
    in.nodes = s->nodes;
    in.nnodes = s->nnodes;
    in.allocs = s->allocs;
    in.nallocs = s->nallocs;
    in.now_ms = now;
    in.policy = s->cfg->policy;
    in.params = s->cfg->params;
    in.footprint = s->use_fp ? &s->fp : NULL;
    return tm_sched_run(&in, r);
}

/* One tm_sched_run() over jobs[0..nj), which are the queued jobs at
 * s->q positions qmap[k] (NULL: jobs is s->q itself), and what it decided
 * applied.  *ret_blocked: some job was neither placed nor found to fit no
 * node (fifo: the head is blocked). */
int replay_pass_once(struct replay_engine *s, int64_t now, struct tm_replay_stats *st,
                     const struct tm_sched_job *jobs, size_t nj, const int32_t *qmap, bool *ret_blocked)
{
    struct tm_sched_result r = {0};
    int rc = replay_sched_once(s, now, jobs, nj, &r);

    if (rc < 0)
        return rc;
    return replay_pass_apply(s, now, st, jobs, nj, qmap, &r, ret_blocked);
}

/* Job j's alloc of one placement; the first of its placements in a pass
 * (the job still queued) starts it: dequeued, its completion pushed.  A
 * gang's placements all come from the one pass that placed it, all or
 * nothing, so the job's members join it at the same instant and end
 * together (alloc_remove()).  0 or TM_ENOMEM. */
static int place_member(struct replay_engine *s, int64_t now, struct tm_replay_stats *st,
                        const struct tm_sched_placement *pl, int32_t j)
{
    struct rjob *rj = &s->jobs[j];
    struct tm_sched_alloc *a;
    int model = s->nodes[pl->node].model;
    int64_t held = (int64_t)__builtin_popcount(pl->gpu_mask) * pl->gpu_milli;
    int32_t p = (int32_t)s->nallocs;
    bool first = rj->qpos >= 0;

    if (first) {
        dequeue(s, j);
        if (rj->start < 0 || rj->first_start < 0)
            rj->first_start = now;
        rj->start = now;
    }
    a = &s->allocs[p];
    *a = (struct tm_sched_alloc){
        .job_id = j, .node = pl->node, .gpu_mask = pl->gpu_mask, .gpu_milli = pl->gpu_milli,
        .cpu_milli = rj->tj->cpu_milli, .memory_mib = rj->tj->memory_mib,
        .end_ms = now + (rj->estimate > 0 ? rj->estimate : TM_SCHED_DEFAULT_ESTIMATE_MS),
        .preemptible = rj->tj->preemptible, .loaned = pl->loaned};
    s->alloc_job[p] = j;
    s->alloc_est[p] = rj->estimate > 0 ? rj->estimate : TM_SCHED_DEFAULT_ESTIMATE_MS;
    s->alloc_start[p] = now;
    s->nallocs++;
    if (first) {
        s->alloc_sib_next[p] = s->alloc_sib_prev[p] = p;
        rj->alloc = p;
        if (s->pass->started)
            s->pass->started(s->ps, j);
    } else {
        int32_t h = rj->alloc, t = s->alloc_sib_prev[h];
        s->alloc_sib_next[p] = h;
        s->alloc_sib_prev[p] = t;
        s->alloc_sib_next[t] = p;
        s->alloc_sib_prev[h] = p;
    }
    alloc_link(s, p);
    s->free_milli[model] -= held;
    gpu_use(s, pl->node, pl->gpu_mask, pl->gpu_milli);
    s->alloc_milli += held;
    s->node_cpu_free[pl->node] -= a->cpu_milli;
    s->node_mem_free[pl->node] -= a->memory_mib;
    if (!first)
        return 0;
    if (s->nheap == s->heapcap) {
        struct heapent *nh = realloc(s->heap, 2 * s->heapcap * sizeof(*nh));
        if (!nh)
            return TM_ENOMEM;
        s->heap = nh;
        s->heapcap *= 2;
    }
    heap_push(s, now + rj->runtime, j, rj->gen);
    if (rj->first_start == now && rj->promise > 0 && now > rj->promise + 1000) {
        double d = (double)(now - rj->promise) / 1000.0;
        s->slips[st->reservation_slips++] = now - rj->promise;
        st->slip_mean_s += d;
        if (d > st->slip_max_s)
            st->slip_max_s = d;
    }
    return 0;
}

/* The borrowed jobs a pass reclaimed for a team's quota, stopped and
 * requeued: a checkpointed one keeps its progress (its runtime left is
 * what remains), a restarted one redoes its GPU-time. */
static void apply_reclaims(struct replay_engine *s, int64_t now, struct tm_replay_stats *st,
                           const struct tm_sched_result *r)
{
    for (size_t k = 0; k < r->nreclaims; k++) {
        int32_t j = replay_quota_victim(s, &r->reclaims[k]);
        struct rjob *rj = &s->jobs[j];
        if (rj->alloc < 0)
            continue;
        st->reclaims++;
        if (r->reclaims[k].victim.checkpoint)
            rj->runtime -= now - rj->start;
        else
            st->redone_gpu_hours += (double)rj->milli_total * (double)(now - rj->start) / 3.6e9;
        alloc_remove(s, j);
        rj->gen++; /* its completion event is now stale */
        enqueue(s, j);
        replay_quota_requeued(s, j, now);
    }
}

/* What replay_pass_once()'s tm_sched_run() decided (*rp, released here), applied
 * to the queue and the running jobs. */
int replay_pass_apply(struct replay_engine *s, int64_t now, struct tm_replay_stats *st,
                      const struct tm_sched_job *jobs, size_t nj, const int32_t *qmap,
                      struct tm_sched_result *rp, bool *ret_blocked)
{
    struct tm_sched_result r = *rp;

#define QPOS(k) ((size_t)(qmap ? qmap[k] : (int32_t)(k)))
    (void)jobs;
    *rp = (struct tm_sched_result){0};
    *ret_blocked = false;
    for (size_t k = 0; k < r.nnotes; k++)
        if (r.notes[k].verdict != TM_SCHED_PLACED && r.notes[k].verdict != TM_SCHED_NO_MATCH)
            *ret_blocked = true;
    /* Reservations stick to their node from one pass to the next. */
    for (size_t k = 0; k < nj; k++)
        s->q[QPOS(k)].hold_node = 0;
    if (r.nreservations > s->heldcap) {
        int32_t *h = realloc(s->held, r.nreservations * sizeof(*h));
        if (!h) {
            tm_sched_result_release(&r);
            return TM_ENOMEM;
        }
        s->held = h;
        s->heldcap = r.nreservations;
    }
    s->nheld = 0;
    for (size_t k = 0; k < r.nreservations; k++) {
        struct tm_sched_job *qj = &s->q[QPOS(r.reservations[k].job)];
        qj->hold_node = r.reservations[k].node + 1;
        if (qj->hold_start_ms == 0)
            qj->hold_start_ms = r.reservations[k].start_ms;
        s->held[s->nheld++] = s->qjob[QPOS(r.reservations[k].job)];
    }
    /* Notes first: the queue is reordered by the starts below. */
    for (size_t k = 0; k < r.nnotes; k++) {
        const struct tm_sched_note *nt = &r.notes[k];
        struct rjob *rj;
        /* Without a log only a reservation's promise is kept: a pass over
         * the whole queue (tarmac) notes every queued job. */
        if (!s->cfg->log && nt->verdict != TM_SCHED_RESERVED)
            continue;
        rj = &s->jobs[s->qjob[QPOS(nt->job)]];
        if (nt->verdict == TM_SCHED_RESERVED && rj->promise == 0) {
            rj->promise = nt->start_ms > 0 ? nt->start_ms : 1;
            st->reserved_jobs++;
        }
        if (rj->verdict != (int8_t)nt->verdict || nt->verdict == TM_SCHED_PLACED)
            log_note(s, now, rj, nt, &r);
        rj->verdict = (int8_t)nt->verdict;
    }
    /* The allocs change below: the latest ends are stale until the next
     * refresh (a pass without them reads the allocs). */
    s->fp.gpu_end = s->fp.gpu_end_kept = NULL;
    /* Evictions first: the placements below use the room they free. */
    if (r.npreemptions) {
        int32_t *vj = malloc(r.npreemptions * sizeof(*vj));
        if (!vj) {
            tm_sched_result_release(&r);
            return TM_ENOMEM;
        }
        for (size_t k = 0; k < r.npreemptions; k++)
            vj[k] = s->alloc_job[r.preemptions[k].alloc];
        for (size_t k = 0; k < r.npreemptions; k++) {
            struct rjob *rj = &s->jobs[vj[k]];
            /* A gang evicted from one node stops on all: its other
             * allocs, if evicted too, are gone already. */
            if (rj->alloc < 0)
                continue;
            st->preemptions++;
            st->preempted_gpu_hours += (double)rj->milli_total * (double)(now - rj->start) / 3.6e9;
            alloc_remove(s, vj[k]);
            rj->gen++; /* its completion event is now stale */
            enqueue(s, vj[k]);
        }
        free(vj);
    }
    if (r.nreclaims)
        apply_reclaims(s, now, st, &r);
    {
        /* Map placements to trace jobs before the queue moves. */
        int32_t *pj = malloc((r.nplacements + 1) * sizeof(*pj));
        if (!pj) {
            tm_sched_result_release(&r);
            return TM_ENOMEM;
        }
        for (size_t k = 0; k < r.nplacements; k++)
            pj[k] = s->qjob[QPOS(r.placements[k].job)];
        for (size_t k = 0; k < r.nplacements; k++) {
            int rc = place_member(s, now, st, &r.placements[k], pj[k]);
            if (rc < 0) {
                free(pj);
                tm_sched_result_release(&r);
                return rc;
            }
        }
        free(pj);
    }
    tm_sched_result_release(&r);
    return 0;
#undef QPOS
}


/* Expected ends of running jobs, from what the scheduler may know:
 * with exact estimates the true end; otherwise the estimate, corrected
 * by tm_estimate_remaining() as the job ages (never in the past). */
void replay_ends_refresh(struct replay_engine *s, int64_t now)
{
    if (!s->cfg->exact_estimates && !s->use_fp)
        for (size_t a = 0; a < s->nallocs; a++)
            s->allocs[a].end_ms = now + tm_estimate_remaining(s->alloc_est[a], now - s->alloc_start[a]);
    if (s->use_fp) {
        /* The same ends, worked out by the pass for the allocs it reads
         * (with exact estimates end_ms is the true end, never changed). */
        bool rule = !s->cfg->exact_estimates;
        s->fp.alloc_estimate = rule ? s->alloc_est : NULL;
        s->fp.alloc_start = s->alloc_start;
        for (size_t i = 0; i < s->nnodes; i++) {
            const struct node_ends *e = &s->nends[i];
            s->gpu_end[i] = s->gpu_end_kept[i] = INT64_MIN;
            if (e->n > 0)
                s->gpu_end[i] = rule ? max3(e->fix, 2 * now - e->first, now + 1000) : e->fix;
            if (e->n_kept > 0)
                s->gpu_end_kept[i] =
                    rule ? max3(e->fix_kept, 2 * now - e->first_kept, now + 1000) : e->fix_kept;
        }
        s->fp.gpu_end = s->gpu_end;
        s->fp.gpu_end_kept = s->gpu_end_kept;
    }
}

int replay_pass_whole(struct replay_engine *s, int64_t now, struct tm_replay_stats *st)
{
    bool blocked;

    q_compact(s);
    return replay_pass_once(s, now, st, s->q, s->nq, NULL, &blocked);
}

/* ---------- setup ---------- */

/* The inventory: fixed, sampled to --gpus if asked. */
static int setup_nodes(struct replay_engine *s, const struct tm_trace *t, struct tm_replay_stats *st)
{
    const struct tm_replay_config *cfg = s->cfg;
    struct tm_trace_node *inv = NULL;
    size_t ninv = 0;
    int r = TM_ENOMEM;

    if (cfg->gpus > 0) {
        r = tm_replay_sample_nodes(t, cfg->gpus, cfg->seed, &inv, &ninv);
        if (r < 0)
            return r;
    } else {
        inv = malloc((t->nnodes + 1) * sizeof(*inv));
        if (!inv)
            return TM_ENOMEM;
        for (size_t i = 0; i < t->nnodes; i++)
            if (t->nodes[i].gpus > 0)
                inv[ninv++] = t->nodes[i];
    }
    r = TM_ENOMEM;
    s->nodes = calloc(ninv + 1, sizeof(*s->nodes));
    if (!s->nodes)
        goto out;
    for (size_t i = 0; i < ninv; i++) {
        s->nodes[i] = (struct tm_sched_node){.id = (int64_t)i, .cpu_milli = inv[i].cpu_milli,
                                             .memory_mib = inv[i].memory_mib, .gpus = inv[i].gpus,
                                             .model = inv[i].model, .schedulable = true};
        s->free_milli[inv[i].model] += (int64_t)inv[i].gpus * MILLI;
        s->cap_milli += (int64_t)inv[i].gpus * MILLI;
        st->gpus += inv[i].gpus;
    }
    s->nnodes = ninv;
    st->nodes = ninv;
    s->gpu_used = calloc((ninv + 1) * TM_NODE_GPUS_MAX, sizeof(*s->gpu_used));
    s->node_cpu_free = calloc(ninv + 1, sizeof(*s->node_cpu_free));
    s->node_mem_free = calloc(ninv + 1, sizeof(*s->node_mem_free));
    s->node_fit = calloc(ninv + 1, sizeof(*s->node_fit));
    s->node_dirty = calloc(ninv + 1, sizeof(*s->node_dirty));
    s->dirty = calloc(ninv + 1, sizeof(*s->dirty));
    s->shapes_changed = true;
    if (!s->gpu_used || !s->node_cpu_free || !s->node_mem_free || !s->node_fit || !s->node_dirty || !s->dirty)
        goto out;
    for (size_t i = 0; i < ninv; i++) {
        s->node_cpu_free[i] = inv[i].cpu_milli;
        s->node_mem_free[i] = inv[i].memory_mib;
    }
    r = 0;
out:
    free(inv);
    return r;
}

/* The trace's jobs the replay keeps (*st counts the others). */
static int setup_jobs(struct replay_engine *s, const struct tm_trace *t, struct tm_replay_stats *st)
{
    const struct tm_replay_config *cfg = s->cfg;

    s->jobs = calloc(t->njobs + 1, sizeof(*s->jobs));
    if (!s->jobs)
        return TM_ENOMEM;
    for (size_t j = 0; j < t->njobs; j++) {
        const struct tm_trace_job *tj = &t->jobs[j];
        struct rjob *rj;
        uint64_t usable;
        if (tj->start_ms < 0) {
            st->dropped_unscheduled++;
            continue;
        }
        if (cfg->since_ms >= 0 && tj->submit_ms < cfg->since_ms) {
            st->dropped_since++;
            continue;
        }
        if (cfg->max_runtime_ms >= 0 && tj->end_ms - tj->start_ms > cfg->max_runtime_ms) {
            st->dropped_runtime++;
            continue;
        }
        if (tj->gpus == 0 && tj->gpu_milli == 0) {
            st->dropped_cpu_only++;
            continue;
        }
        usable = models_holding(s->nodes, s->nnodes, tj);
        if (!usable) {
            st->dropped_no_node++;
            continue;
        }
        rj = &s->jobs[s->njobs++];
        rj->usable = usable;
        rj->tj = tj;
        rj->submit = tj->submit_ms;
        rj->runtime = tj->end_ms - tj->start_ms;
        rj->milli_total = milli_total(tj);
        rj->nodes = gang_size(tj);
        s->alloccap += (size_t)rj->nodes;
        s->has_gangs |= rj->nodes > 1;
        rj->start = -1;
        rj->first_start = -1;
        rj->alloc = -1;
        rj->qpos = -1;
        rj->verdict = -1;
    }
    return 0;
}

/* The arrival window, and arrivals scaled to cfg->load if asked. */
static void setup_load(struct replay_engine *s, struct tm_replay_stats *st)
{
    const struct tm_replay_config *cfg = s->cfg;
    double work = 0, cap = (double)s->cap_milli;
    int64_t first = INT64_MAX, last = INT64_MIN;

    for (size_t j = 0; j < s->njobs; j++) {
        work += (double)s->jobs[j].milli_total * (double)s->jobs[j].runtime;
        if (s->jobs[j].submit < first)
            first = s->jobs[j].submit;
        if (s->jobs[j].submit > last)
            last = s->jobs[j].submit;
    }
    st->native_load = last > first ? work / (cap * (double)(last - first)) : 0;
    st->factor = 1;
    if (cfg->load > 0 && st->native_load > 0) {
        st->factor = st->native_load / cfg->load;
        for (size_t j = 0; j < s->njobs; j++)
            s->jobs[j].submit = first + (int64_t)((double)(s->jobs[j].submit - first) * st->factor);
        last = first + (int64_t)((double)(last - first) * st->factor);
    }
    st->load = last > first ? work / (cap * (double)(last - first)) : 0;
    s->first = first;
    s->last = last;
    s->window_lo = first;
    s->window_hi = last;
}

/* The running jobs' arrays and the footprint handed to the passes. */
static int setup_running(struct replay_engine *s)
{
    /* one alloc per node of each running job */
    size_t na = s->alloccap + 1;

    s->allocs = malloc(na * sizeof(*s->allocs));
    s->alloc_job = malloc(na * sizeof(*s->alloc_job));
    s->alloc_est = malloc(na * sizeof(*s->alloc_est));
    s->alloc_start = malloc(na * sizeof(*s->alloc_start));
    s->alloc_sib_next = malloc(na * sizeof(*s->alloc_sib_next));
    s->alloc_sib_prev = malloc(na * sizeof(*s->alloc_sib_prev));
    s->heapcap = s->njobs;
    s->heap = malloc(s->njobs * sizeof(*s->heap));
    s->q = malloc(s->njobs * sizeof(*s->q));
    s->qjob = malloc(s->njobs * sizeof(*s->qjob));
    s->use_fp = !s->cfg->full_pass;
    s->node_nallocs = calloc(s->nnodes + 1, sizeof(*s->node_nallocs));
    s->alloc_head = malloc((s->nnodes + 1) * sizeof(*s->alloc_head));
    s->gpu_end = malloc((s->nnodes + 1) * sizeof(*s->gpu_end));
    s->gpu_end_kept = malloc((s->nnodes + 1) * sizeof(*s->gpu_end_kept));
    s->alloc_next = malloc(na * sizeof(*s->alloc_next));
    s->alloc_prev = malloc(na * sizeof(*s->alloc_prev));
    s->nends = calloc(s->nnodes + 1, sizeof(*s->nends));
    s->gpus_full = malloc((s->nnodes + 1) * sizeof(*s->gpus_full));
    s->gpu_free_max = malloc((s->nnodes + 1) * sizeof(*s->gpu_free_max));
    s->gpu_free_sum = malloc((s->nnodes + 1) * sizeof(*s->gpu_free_sum));
    s->slips = malloc((s->njobs + 1) * sizeof(*s->slips));
    if (!s->node_nallocs || !s->alloc_head || !s->gpu_end || !s->gpu_end_kept || !s->alloc_next ||
        !s->alloc_prev || !s->nends || !s->gpus_full || !s->gpu_free_max || !s->gpu_free_sum || !s->slips ||
        !s->allocs || !s->alloc_job || !s->alloc_est || !s->alloc_start || !s->alloc_sib_next ||
        !s->alloc_sib_prev || !s->heap || !s->q || !s->qjob)
        return TM_ENOMEM;
    for (size_t i = 0; i < s->nnodes; i++)
        gpu_summary(s, (int32_t)i);
    memset(s->alloc_head, 0xff, (s->nnodes + 1) * sizeof(*s->alloc_head));
    s->fp = (struct tm_sched_footprint){.cpu_free = s->node_cpu_free, .mem_free = s->node_mem_free,
                                        .gpu_used = s->gpu_used, .node_nallocs = s->node_nallocs,
                                        .alloc_head = s->alloc_head, .alloc_next = s->alloc_next,
                                        .gpus_full = s->gpus_full, .gpu_free_max = s->gpu_free_max,
                                        .gpu_free_sum = s->gpu_free_sum};
    if (tm_sched_node_cache_new(s->nnodes, &s->ncache) < 0)
        return TM_ENOMEM;
    s->fp.cache = s->ncache;
    return 0;
}

/* Arrival order: by submit time, ties by trace order. */
static int setup_arrivals(struct replay_engine *s)
{
    int64_t *keys = malloc(s->njobs * 2 * sizeof(*keys));

    s->arr = malloc(s->njobs * sizeof(*s->arr));
    if (!keys || !s->arr) {
        free(keys);
        return TM_ENOMEM;
    }
    for (size_t j = 0; j < s->njobs; j++) {
        keys[2 * j] = s->jobs[j].submit;
        keys[2 * j + 1] = (int64_t)j;
    }
    qsort(keys, s->njobs, 2 * sizeof(*keys), cmp_pair);
    for (size_t j = 0; j < s->njobs; j++)
        s->arr[j] = (size_t)keys[2 * j + 1];
    free(keys);
    return 0;
}

int replay_engine_setup(struct replay_engine *s, const struct tm_trace *t, const struct tm_replay_config *cfg,
                        struct tm_replay_stats *st)
{
    int r;

    s->cfg = cfg;
    s->trace = t;
    s->nmodels = t->nmodels;
    r = setup_nodes(s, t, st);
    if (r == 0)
        r = setup_jobs(s, t, st);
    if (r < 0)
        return r;
    if (s->njobs == 0 || s->cap_milli == 0)
        return TM_EINVAL;
    if (replay_shapes_build(s) < 0)
        return TM_ENOMEM;
    setup_load(s, st);
    st->jobs = s->njobs;
    st->starvation_ms = tm_sched_starvation_ms(&cfg->params);
    r = setup_running(s);
    if (r == 0)
        r = setup_arrivals(s);
    if (r == 0 && !cfg->exact_estimates) {
        r = tm_estimator_new(&s->est);
        if (r == 0 && cfg->estimate_fallback > 0)
            tm_estimator_set_fallback(s->est, cfg->estimate_fallback);
    }
    if (r == 0)
        r = replay_quota_setup(s);
    return r;
}

/* ---------- the event loop ---------- */

/* The completions at `now`: each running job's end gives its capacity
 * back and its runtime to the predictor. */
static int end_jobs(struct replay_engine *s, int64_t now, struct tm_replay_stats *st, bool *changed)
{
    while (s->nheap && s->heap[0].t == now) {
        struct heapent e = heap_pop(s);
        struct rjob *rj = &s->jobs[e.job];
        if (e.gen != rj->gen)
            continue; /* the job was evicted and requeued */
        char kb[64];
        struct tm_estimate_key k = tm_trace_estimate_key(rj->tj, kb, sizeof(kb));
        alloc_remove(s, e.job);
        if (s->pass->ended)
            s->pass->ended(s->ps);
        s->jct += (double)(now - rj->submit);
        replay_quota_ended(s, e.job, now);
        s->end_all = now;
        st->events++;
        *changed = true;
        if (s->est) {
            int r = tm_estimator_observe(s->est, &k, rj->runtime);
            if (r < 0)
                return r;
        }
    }
    return 0;
}

/* The arrivals at `now` from arr[*ai] on, queued with their estimates
 * (scored at arrival). */
static void arrive_jobs(struct replay_engine *s, int64_t now, struct tm_replay_stats *st, size_t *ai,
                        bool *changed)
{
    while (*ai < s->njobs && s->jobs[s->arr[*ai]].submit == now) {
        struct rjob *rj = &s->jobs[s->arr[*ai]];
        if (s->cfg->exact_estimates) {
            rj->estimate = rj->runtime > 0 ? rj->runtime : 1;
        } else {
            char kb[64];
            struct tm_estimate_key k = tm_trace_estimate_key(rj->tj, kb, sizeof(kb));
            int lvl;
            rj->estimate = tm_estimate_level(s->est, &k, &lvl);
            replay_score_estimate(st, s->est, &k, rj, lvl);
        }
        enqueue(s, (int32_t)s->arr[*ai]);
        (*ai)++;
        st->events++;
        *changed = true;
    }
}

int replay_engine_run(struct replay_engine *s, struct tm_replay_stats *st)
{
    size_t ai = 0;
    int64_t tcur = s->jobs[s->arr[0]].submit;
    int r;

    for (;;) {
        int64_t tnext = INT64_MAX;
        bool changed = false;
        if (ai < s->njobs)
            tnext = s->jobs[s->arr[ai]].submit;
        if (s->nheap && s->heap[0].t < tnext)
            tnext = s->heap[0].t;
        if (tnext == INT64_MAX)
            break;
        replay_integrate(s, tcur, tnext);
        tcur = tnext;
        r = end_jobs(s, tcur, st, &changed);
        if (r < 0)
            return r;
        arrive_jobs(s, tcur, st, &ai, &changed);
        if (changed && s->nq) {
            size_t reclaims = st->reclaims;
            replay_quota_prepare(s, tcur);
            st->passes++;
            r = s->pass->run(s->ps, tcur, st, ai);
            /* The reclaimed jobs stopped at once: their owner's jobs are
             * placed on the GPUs they freed by a second pass now. */
            if (r >= 0 && st->reclaims != reclaims && s->nq) {
                st->passes++;
                r = s->pass->run(s->ps, tcur, st, ai);
            }
            if (r < 0)
                return r;
            replay_quota_observe(s, tcur);
        }
        if (changed)
            replay_fit_recompute(s);
    }
    st->unfinished = s->nq;
    return 0;
}

void replay_engine_release(struct replay_engine *s)
{
    if (s->pass && s->pass->release)
        s->pass->release(s->ps);
    free(s->arr);
    free(s->nodes);
    free(s->gpu_used);
    free(s->node_cpu_free);
    free(s->node_mem_free);
    free(s->shapes);
    free(s->active);
    free(s->jobs);
    free(s->allocs);
    free(s->alloc_job);
    free(s->alloc_est);
    free(s->alloc_start);
    free(s->alloc_sib_next);
    free(s->alloc_sib_prev);
    free(s->gang_fits);
    free(s->heap);
    free(s->q);
    free(s->qjob);
    free(s->node_fit);
    free(s->node_dirty);
    free(s->node_nallocs);
    free(s->alloc_head);
    free(s->alloc_next);
    free(s->alloc_prev);
    free(s->gpu_end);
    free(s->gpu_end_kept);
    free(s->nends);
    tm_sched_node_cache_free(s->ncache);
    free(s->gpus_full);
    free(s->gpu_free_max);
    free(s->gpu_free_sum);
    free(s->dirty);
    free(s->held);
    tm_estimator_free(s->est);
    free(s->slips);
    replay_quota_release(s);
}
