/*
 * controller/replay/replay_internal.h: the time replay's state (struct sim)
 * and what its two files share: replay.c (the events, the accounting, the
 * fifo and whole-queue passes, the figures) and replay_backfill.c (the
 * incremental EASY backfill pass).  Not for other folders.
 */
#ifndef TM_REPLAY_INTERNAL_H
#define TM_REPLAY_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "controller/replay/replay.h"
#include "controller/replay/seqindex.h"
#include "controller/sched/estimate.h"
#include "controller/sched/scheduler.h"

#define MILLI 1000
/* Order groups the incremental tarmac pass keeps apart: tied or not by
 * each lead tarmac gives (two or four values); more turn it off. */
#define TQ_GROUPS 16
/* Distinct leads (tm_sched_tarmac_lead_ms(): 0, half short_ms, short_ms,
 * one and a half). */
#define TQ_LEADS 4
/* The most reservations a pass may make for tq_aged_quiet() to reason
 * about them (tarmac's default is 8). */
#define TQ_RES_MAX 64

struct rjob {
    const struct tm_trace_job *tj;
    int64_t submit;
    int64_t runtime;
    int64_t estimate;   /* what the scheduler sees; 0 unknown */
    int64_t start;      /* -1 until started; the latest start */
    int64_t first_start;/* -1 until started; waits count to here */
    uint32_t gen;       /* starts so far, to spot stale completions */
    int64_t promise;    /* first reservation start; 0 none */
    int32_t milli_total;
    int32_t alloc;      /* index in allocs while running, else -1 */
    int32_t qpos;       /* index in the queue while queued, else -1 */
    int32_t shape;      /* index into sim.shapes */
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
    int32_t count;      /* queued jobs with this request */
    int32_t apos;       /* index in sim.active while count > 0, else -1 */
};

struct heapent {
    int64_t t;
    int32_t job;
    uint32_t gen;       /* the job's start it ends; older ones are stale */
};

struct sim {
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
    /* fifo, incremental: the queue in arrival order from fhead on (fifo
     * starts jobs in that order), and whether the last pass left the head
     * blocked with nothing ended since (then an arrival changes nothing). */
    const size_t *arr;
    size_t fhead;
    bool fifo_blocked;
    struct tm_sched_job *pq;                   /* the prefix handed to the pass */
    int32_t *pqpos;                            /* its queue positions */
    int64_t window_lo, window_hi;
    struct tm_estimator *est;
    int64_t *slips;                            /* ms, one per job that slipped */
    /* backfill, incremental (pass_backfill()): the queue indexed by
     * arrival rank, all of it (queued) and by group (shape x 2 +
     * preemptible), valued by estimate; per shape and node how many jobs
     * of the shape the node's free capacity could hold (ufit, refreshed
     * for the nodes touched since: udirty), and their sum (ucap). */
    bool bf;
    int32_t *rank;                             /* per job: index in arr */
    struct tm_seqindex qgrp;
    /* The same queue as lists by arrival rank, all of it (lall) and per
     * group (lgrp): the first jobs of each walked without a search; the
     * min-trees' walks and searches over a million-job order were a sixth
     * of the replay at 500,000 jobs (cache misses, growing with the
     * trace). */
    struct ranklist { int32_t *next, *prev, *head, *tail; } lall, lgrp;
    int32_t *ufit;                             /* nshapes x nnodes */
    int64_t *ucap;                             /* per shape */
    uint8_t *udirty;
    int32_t *udlist;
    size_t nudirty;
    uint32_t *bf_mark, bf_gen;                 /* per rank: in the subset of pass bf_gen */
    int32_t bf_gjob, bf_gnode;                 /* the last reservation: job, node, start */
    int64_t bf_gstart;
    /* Since the last pass run (bf_unchanged()): some job ended; arrivals
     * before arr[bf_seen] fit no node; that pass started a job of unknown
     * estimate. */
    bool bf_ended, bf_unknown;
    size_t bf_seen;
    int64_t bf_t0;
    struct tm_sched_job *bq;                   /* the jobs handed to the pass */
    int32_t *bqpos;
    size_t bqcap;
    /* The jobs the last pass applied reserved for (hold_node > 0 while
     * they wait). */
    int32_t *held;
    size_t nheld, heldcap;
    /* tarmac, incremental (replay_tarmac.c): the queue as lists by
     * arrival rank, one per order group (tied or not, lead), with per
     * list the first job not aged past half the bound (tq_cu) and the
     * first below level 1 (tq_cl); rank and qgrp as for backfill; per
     * group of qgrp its queued jobs. */
    bool tq, tq_off;
    struct tm_sched_traits *tq_traits;         /* per shape */
    int32_t *tq_og;                            /* per job: order group, -1 none */
    struct ranklist tq_lists;
    int tq_ngroups;
    bool tq_tied[TQ_GROUPS];
    int64_t tq_lead[TQ_GROUPS];
    int32_t tq_cu[TQ_GROUPS], tq_cl[TQ_GROUPS];
    int32_t *tq_count;                         /* per qgrp group */
    size_t tq_ntied;                           /* queued tied jobs */
    uint32_t *tq_mark, tq_gen;                 /* per job: in the pass of tq_gen */
    int32_t *tq_gin;                           /* per qgrp group: in the pass */
    uint32_t *tq_ggen;
    int64_t tq_maxlead;
    /* per qgrp group, in pass tq_pass (tq_rgen): how far in the order its
     * part of the pass's input reaches */
    uint32_t tq_pass, *tq_rgen;
    struct tq_pos { int tier; int64_t key; } *tq_reach;
    int32_t *tq_e;                             /* per qgrp group: jobs reached for */
    int32_t *tq_new;                           /* jobs queued since the last pass */
    size_t tq_nnew;
    /* qgrp's groups split by lead: list g * TQ_LEADS + l holds group g's
     * queued jobs of lead l by arrival, which within it is tarmac's order;
     * per list, in the pass's try tq_lfgen, a rank no later than its
     * first job left out (tq_lf) */
    int tq_nleads;
    int64_t tq_leads[TQ_LEADS];
    int tq_lidx[TQ_GROUPS];                    /* per order group: its lead's index */
    struct ranklist tq_gl;
    bool tq_glinit;
    int32_t *tq_lf;
    uint32_t *tq_lfgen;
    size_t tq_nnarrow;                         /* queued narrow jobs (tied, a model_mask) */
    int64_t *tq_soon;                          /* per node x 2: when it empties (tq_aged_quiet()) */
    /* Nodes where a job ended or was evicted since the last pass, once
     * each (tq_freed_at: the pass that listed them) */
    int32_t *tq_freed;
    uint32_t *tq_freed_at;
    size_t tq_nfreed;
};

/* Jobs fifo hands one pass at a time: the head and a few behind it. */
#define FIFO_PREFIX 32

static inline int64_t max3(int64_t a, int64_t b, int64_t c)
{
    int64_t m = a > b ? a : b;
    return m > c ? m : c;
}

/* replay.c */

/* tm_sched_run() over jobs[0..nj) and what runs now. */
int replay_sched_once(const struct sim *s, int64_t now, const struct tm_sched_job *jobs, size_t nj,
                      struct tm_sched_result *r);
/* What replay_sched_once() decided (*rp, released here), applied to the
 * queue and the running jobs: jobs[k] is the queued job at s->q position
 * qmap[k] (qmap NULL: jobs is s->q itself).  *ret_blocked: some job was
 * neither placed nor found to fit no node (fifo: the head is blocked). */
int replay_pass_apply(struct sim *s, int64_t now, struct tm_replay_stats *st,
                      const struct tm_sched_job *jobs, size_t nj, const int32_t *qmap,
                      struct tm_sched_result *rp, bool *ret_blocked);
/* The distinct requests of the trace's jobs (struct shape). */
int replay_shapes_build(struct sim *s);
/* Lists by arrival rank: n ranks, ngroups heads. */
int replay_rl_init(struct ranklist *l, size_t n, size_t ngroups);
void replay_rl_release(struct ranklist *l);

void replay_rl_insert(struct ranklist *l, int32_t g, int32_t r);
void replay_rl_remove(struct ranklist *l, int32_t g, int32_t r);
/* Room in s->bq (and s->bqpos) for an (n + 1)-th job handed to a pass.
 * 0 or TM_ENOMEM. */
int replay_bq_room(struct sim *s, size_t n);
/* One pass over the whole queue, applied. */
int replay_pass_whole(struct sim *s, int64_t now, struct tm_replay_stats *st);

/* replay_tarmac.c */

/* The incremental tarmac pass's indexes; after replay_shapes_build() and
 * arr.  0 or TM_ENOMEM; leaves s->tq false when not used. */
int replay_tq_init(struct sim *s, const size_t *arr);
void replay_tq_release(struct sim *s);
/* A job joins or leaves the queue (s->q[qpos] already filled on join). */
void replay_tq_add(struct sim *s, int32_t j);
void replay_tq_remove(struct sim *s, int32_t j);
/* Node i lost a running job (an end or an eviction). */
void replay_tq_freed(struct sim *s, int32_t i);
/* One tarmac pass on the part of the queue that can act, applied. */
int replay_pass_tarmac(struct sim *s, int64_t now, struct tm_replay_stats *st);

/* replay_backfill.c */

/* The incremental backfill's indexes over arr (jobs by arrival); 0 or
 * TM_ENOMEM.  Does nothing unless s->bf. */
int replay_bf_init(struct sim *s, const size_t *arr);
void replay_bf_release(struct sim *s);
/* One backfill pass on the part of the queue it can act on. */
int replay_pass_backfill(struct sim *s, int64_t now, struct tm_replay_stats *st, size_t narrived);

#endif
