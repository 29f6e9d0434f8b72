/*
 * controller/replay/replay_engine.h: the time replay's engine (struct
 * replay_engine: the jobs, the nodes, the running jobs, the queue, the
 * event heap and the figures' integrals), what it offers the passes, and
 * the table of hooks (struct replay_pass) through which it runs one.
 *
 * The engine (replay_engine.c, its accounting for the figures in
 * replay_figures.c) knows a pass only by its table: each pass
 * (replay_fifo.c, replay_backfill.c, replay_tarmac.c, replay_whole.c)
 * keeps its own indexes private to its file and is told of the changes
 * it follows through the hooks (what they share: replay_ranks.c);
 * replay.c picks the pass.  Not for other folders.
 */
#ifndef TM_REPLAY_ENGINE_H
#define TM_REPLAY_ENGINE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "controller/replay/replay.h"
#include "controller/replay/seqindex.h"
#include "controller/sched/estimate.h"
#include "controller/sched/scheduler.h"

#define MILLI 1000
/* The largest gang tm_sched_run() takes (scheduler.c refuses the pass
 * otherwise): larger ones fit no node here. */
#define REPLAY_GANG_MAX 64

struct rjob {
    const struct tm_trace_job *tj;
    int64_t submit;
    int64_t runtime;
    int64_t estimate;   /* what the scheduler sees; 0 unknown */
    int64_t start;      /* -1 until started; the latest start */
    int64_t first_start;/* -1 until started; waits count to here */
    uint32_t gen;       /* starts so far, to spot stale completions */
    int64_t promise;    /* first reservation start; 0 none */
    int32_t milli_total;/* on all its nodes */
    int32_t nodes;      /* gang size: one alloc per node while running */
    int32_t alloc;      /* an index in allocs while running (its members
                         * on a ring through alloc_sib), else -1 */
    int32_t qpos;       /* index in the queue while queued, else -1 */
    int32_t shape;      /* index into replay_engine.shapes */
    uint64_t usable;    /* trace models with a node that could ever hold it */
    int8_t verdict;     /* last verdict logged, -1 none */
};

/* A distinct request (CPU, memory, models, GPUs or share) and how many
 * queued jobs ask it: the fit-aware idle measure asks, per node, whether
 * any queued request fits, and openb has about a hundred distinct requests
 * among thousands of jobs. */
struct shape {
    int64_t cpu;
    int64_t mem;
    uint64_t mask;      /* trace model bits; 0 any */
    int32_t gpus;       /* whole GPUs; 0 for a share */
    int32_t milli;      /* the share when gpus == 0 */
    int32_t nodes;      /* gang size; the rest is per node */
    int32_t count;      /* queued jobs with this request */
    int32_t apos;       /* index in replay_engine.active while count > 0, else -1 */
};

struct heapent {
    int64_t t;
    int32_t job;
    uint32_t gen;       /* the job's start it ends; older ones are stale */
};

struct replay_engine {
    const struct tm_replay_config *cfg;
    struct rjob *jobs;
    size_t njobs;
    struct tm_sched_node *nodes;
    size_t nnodes;
    int nmodels;
    const struct tm_trace *trace;
    /* running */
    struct tm_sched_alloc *allocs;
    int32_t *alloc_job;
    /* per alloc: the next and previous alloc of its job, a ring (a gang
     * holds one alloc per node; a job of one node is a ring of one) */
    int32_t *alloc_sib_next, *alloc_sib_prev;
    size_t alloccap;    /* sum of the kept jobs' gang sizes */
    bool has_gangs;     /* some kept job spans several nodes */
    /* per alloc, beside it: the job's estimate (0 unknown) and start, so
     * that the expected ends are refreshed without touching the jobs */
    int64_t *alloc_est, *alloc_start;
    size_t nallocs;
    /* What the running jobs hold, node by node, handed to each pass
     * (struct tm_sched_footprint; not with full_pass, the reference):
     * per node its allocs (a list through alloc_next/alloc_prev) and,
     * refreshed before a pass with the ends, the latest end of its GPU
     * holders (gpu_end; gpu_end_kept without preemptible loans). */
    bool use_fp;
    struct tm_sched_footprint fp;
    struct tm_sched_node_cache *ncache; /* fp.cache: touched by node_touch() */
    int32_t *node_nallocs, *alloc_head, *alloc_next, *alloc_prev;
    int8_t *gpus_full;                         /* per node, see the footprint */
    int16_t *gpu_free_max;
    int32_t *gpu_free_sum;
    int64_t *gpu_end, *gpu_end_kept;
    /* Per node, over its allocs holding GPU milli (and the same without
     * preemptible loans, _kept): how many, the latest start + estimate
     * and the earliest start.  An alloc's expected end is
     * max(start + estimate, 2 now - start, now + 1 s)
     * (tm_estimate_remaining()), so the node's latest is
     * max(latest start + estimate, 2 now - earliest start, now + 1 s):
     * O(nodes) a pass instead of every running job. */
    struct node_ends {
        int32_t n, n_kept;
        int64_t fix, fix_kept, first, first_kept;
    } *nends;
    struct heapent *heap;
    size_t nheap, heapcap;
    /* queue */
    /* In arrival order (requeued jobs at the end), with holes where jobs
     * left (qjob -1) until q_compact(): q[0..qlen), nq of them queued.
     * tarmac sorts its whole queue at every pass, and a queue that comes
     * nearly in order sorts in about linear time (okey_sort() skips
     * merging runs already in order): a swap-removed queue's sort was a
     * quarter of a tarmac replay at 125,000 jobs. */
    struct tm_sched_job *q;
    int32_t *qjob;
    size_t nq, qlen;
    /* accounting */
    int64_t free_milli[TM_TRACE_MODELS_MAX];
    int64_t sliver_milli[TM_TRACE_MODELS_MAX]; /* free milli on partly used GPUs */
    int16_t *gpu_used;                         /* per node x TM_NODE_GPUS_MAX */
    /* Queued jobs that could have used each model (docs/measuring.md): the model
     * is accepted and some node of it could ever hold the job. */
    int64_t waiting[TM_TRACE_MODELS_MAX];
    /* Queued jobs that accept each model, whatever its node sizes. */
    int64_t waiting_accepts[TM_TRACE_MODELS_MAX];
    int64_t alloc_milli;
    double busy, busy_window, idle_wait, idle_sliver, idle_accepts; /* milli x ms */
    /* fit-aware idle: free milli on GPUs some queued request fits now */
    struct shape *shapes;
    size_t nshapes;
    int32_t *active;                           /* shapes with count > 0 */
    size_t nactive;
    int64_t *node_cpu_free, *node_mem_free;
    int64_t fit_milli;
    /* Per shape of several nodes: whether enough nodes could each hold one
     * of its members when the fit was last worked out (only with
     * has_gangs); a change there moves the fit of every node. */
    uint8_t *gang_fits;
    double idle_fit;                           /* milli x ms */
    /* Where the arrival window's free capacity went (milli x ms, inside
     * [window_lo, window_hi] only, as busy_window): on models no queued
     * job could use, placeable by a queued job (fit-aware), and the rest
     * of the models some queued job could use (packing loss), of which
     * the part on partly used GPUs. */
    double win_nowait, win_fit, win_waitfree, win_sliver;
    /* fit_milli per node, and the nodes whose capacity changed since it
     * was computed: only they are recomputed, unless the set of queued
     * requests changed (then every node is). */
    int64_t *node_fit;
    uint8_t *node_dirty;
    int32_t *dirty;
    size_t ndirty;
    bool shapes_changed;
    /* The jobs by arrival (ties by trace order). */
    size_t *arr;
    int64_t window_lo, window_hi;
    struct tm_estimator *est;
    int64_t *slips;                            /* ms, one per job that slipped */
    /* The jobs the last pass applied reserved for (hold_node > 0 while
     * they wait). */
    int32_t *held;
    size_t nheld, heldcap;
    /* The span the figures divide by: arrivals from first to last, the
     * last completion, the capacity; and the sum of completion times. */
    int64_t first, last, end_all, cap_milli;
    double jct;
    /* The pass run after each instant's events and its private state. */
    const struct replay_pass *pass;
    void *ps;
    /* Teams (cfg->teams), NULL without: replay_quota.c. */
    struct replay_quota *rq;
};

static inline int64_t max3(int64_t a, int64_t b, int64_t c)
{
    int64_t m = a > b ? a : b;
    return m > c ? m : c;
}

/*
 * A pass object: how the engine runs one scheduling pass after an
 * instant's events, and what it tells the pass in between so that the
 * pass's own indexes follow the queue and the nodes.  Every hook but init
 * and run may be NULL.  The hooks change only the pass's state, in the
 * order the engine calls them (its decisions go through
 * replay_pass_apply()).
 */
struct replay_pass {
    const char *name;
    /* The pass's state for this replay, after the engine's setup (jobs,
     * shapes, arr): 1 and *state (may be NULL) when the pass runs this
     * configuration, 0 when it does not, or TM_ENOMEM. */
    int (*init)(struct replay_engine *s, void **state);
    void (*release)(void *state);
    /* Job j joined the queue (s->q[qpos] filled) or left it. */
    void (*queued)(void *state, int32_t j);
    void (*dequeued)(void *state, int32_t j);
    /* Node i's free capacity changed; node i lost a running job (an end
     * or an eviction), after its capacity was given back. */
    void (*node_touched)(void *state, int32_t i);
    void (*node_freed)(void *state, int32_t i);
    /* A running job completed; a pass started job j. */
    void (*ended)(void *state);
    void (*started)(void *state, int32_t j);
    /* One pass at `now`, applied; narrived: the jobs arr[0..narrived)
     * have arrived. */
    int (*run)(void *state, int64_t now, struct tm_replay_stats *st, size_t narrived);
};

/* Lists of arrival ranks, one per group, each in rank order. */
struct ranklist { int32_t *next, *prev, *head, *tail; };

/* What a pass hands tm_sched_run(): jobs copied from the queue and their
 * queue positions (the qmap of replay_pass_apply()). */
struct replay_input {
    struct tm_sched_job *jobs;
    int32_t *pos;
    size_t cap;
};

/* replay_engine.c: setup, the event loop, the figures */

/* The nodes (sampled to cfg->gpus if asked), the jobs kept and their
 * arrival order, the figures' counts of jobs dropped (*st).  0,
 * TM_EINVAL (no job or no GPU left) or TM_ENOMEM; release either way. */
int replay_engine_setup(struct replay_engine *s, const struct tm_trace *t, const struct tm_replay_config *cfg,
                        struct tm_replay_stats *st);
/* The events in time order, s->pass run after each instant's. */
int replay_engine_run(struct replay_engine *s, struct tm_replay_stats *st);
/* The waits, the utilisations, the idle figures and the slips
 * (replay_figures.c). */
int replay_engine_figures(struct replay_engine *s, struct tm_replay_stats *st);
void replay_engine_release(struct replay_engine *s);

/* replay_figures.c: the accounting the engine keeps for the figures */

/* The integrals over [from, to), the state unchanged in between. */
void replay_integrate(struct replay_engine *s, int64_t from, int64_t to);
/* The fit-aware free milli again, from the nodes touched since. */
void replay_fit_recompute(struct replay_engine *s);
/* Queued jobs of request sh, d more (+1 a job joins the queue, -1 leaves). */
void replay_shape_count(struct replay_engine *s, int32_t sh, int d);
/* The distinct requests of the jobs (struct shape), rjob.shape filled.
 * 0 or TM_ENOMEM. */
int replay_shapes_build(struct replay_engine *s);
/* Queued jobs that could use, or accept, each model: d more. */
void replay_waiting_add(struct replay_engine *s, const struct rjob *rj, int d);
/* Job rj's estimate scored at arrival (lvl: the predictor's level). */
void replay_score_estimate(struct tm_replay_stats *st, const struct tm_estimator *est,
                           const struct tm_estimate_key *k, const struct rjob *rj, int lvl);

/* replay_engine.c: what the passes use */

/* tm_sched_run() over jobs[0..nj) and what runs now. */
int replay_sched_once(const struct replay_engine *s, int64_t now, const struct tm_sched_job *jobs, size_t nj,
                      struct tm_sched_result *r);
/* What replay_sched_once() decided (*rp, released here), applied to the
 * queue and the running jobs: jobs[k] is the queued job at s->q position
 * qmap[k] (qmap NULL: jobs is s->q itself).  *ret_blocked: some job was
 * neither placed nor found to fit no node (fifo: the head is blocked). */
int replay_pass_apply(struct replay_engine *s, int64_t now, struct tm_replay_stats *st,
                      const struct tm_sched_job *jobs, size_t nj, const int32_t *qmap,
                      struct tm_sched_result *rp, bool *ret_blocked);
/* Both: jobs[0..nj) passed and what the pass decided applied. */
int replay_pass_once(struct replay_engine *s, int64_t now, struct tm_replay_stats *st,
                     const struct tm_sched_job *jobs, size_t nj, const int32_t *qmap, bool *ret_blocked);
/* The running jobs' expected ends as of `now`, for a pass that reads
 * them (reservations, align_ends). */
void replay_ends_refresh(struct replay_engine *s, int64_t now);
/* One pass over the whole queue, applied. */
int replay_pass_whole(struct replay_engine *s, int64_t now, struct tm_replay_stats *st);

/* replay_quota.c: teams (tm_replay_config.teams); each is a no-op without */

/* Each job's team and the state of the figures per team.  0, TM_EINVAL
 * or TM_ENOMEM (release either way). */
int replay_quota_setup(struct replay_engine *s);
void replay_quota_release(struct replay_engine *s);
/* Before a pass at `now`: the figures' time counted, fair share advanced,
 * the queued jobs' priorities set; after it, what the guarantee waits on. */
void replay_quota_prepare(struct replay_engine *s, int64_t now);
void replay_quota_observe(struct replay_engine *s, int64_t now);
/* The quota view for a pass over jobs (the whole queue, s->q), NULL when
 * quotas are not enforced or on an error (*err < 0). */
const struct tm_sched_quota *replay_quota_view(const struct replay_engine *s, int64_t now,
                                               const struct tm_sched_job *jobs, size_t nj, int *err);
/* The job a reclaim of the last view stops. */
int32_t replay_quota_victim(const struct replay_engine *s, const struct tm_sched_reclaim *rc);
/* Job j was put back in the queue at `now`; job j completed at `now`. */
void replay_quota_requeued(struct replay_engine *s, int32_t j, int64_t now);
void replay_quota_ended(struct replay_engine *s, int32_t j, int64_t now);
/* guarantee_met over the whole replay. */
void replay_quota_figures(const struct replay_engine *s, struct tm_replay_stats *st);

/* replay_ranks.c */

/* Per job its arrival rank (index in s->arr), and the group index over
 * the queue by rank and estimate that backfill and tarmac keep (group:
 * shape x 2 + preemptible).  0 or TM_ENOMEM. */
int replay_rank_index(const struct replay_engine *s, int32_t *rank, struct tm_seqindex *qgrp);
/* Lists by arrival rank: n ranks, ngroups heads. */
int replay_rl_init(struct ranklist *l, size_t n, size_t ngroups);
void replay_rl_release(struct ranklist *l);
void replay_rl_insert(struct ranklist *l, int32_t g, int32_t r);
void replay_rl_remove(struct ranklist *l, int32_t g, int32_t r);
/* Room in `in` for an (n + 1)-th job.  0 or TM_ENOMEM. */
int replay_input_room(struct replay_input *in, size_t n);
void replay_input_release(struct replay_input *in);
/* Append the queued job j to `in` as its n-th (*n grows).  0 or TM_ENOMEM. */
int replay_input_add(const struct replay_engine *s, struct replay_input *in, size_t *n, int32_t j);

#endif
