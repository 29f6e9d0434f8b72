/*
 * controller/sched/scheduler.h: the scheduler, a pure function of a snapshot.
 *
 * tm_sched_run() takes the queued jobs, the nodes and the running jobs'
 * allocations at one instant and returns placements (which job goes on which
 * GPUs of which nodes now), reservations (when a blocked job is expected to
 * start) and one note per queued job explaining the verdict.  It does no I/O,
 * reads no clock and keeps no state between calls: the live reconcile tick and
 * trace replay call the same function, so every replay figure is a figure
 * about the controller.
 *
 * Capacity model.  A node has cpu_milli, memory_mib and up to
 * TM_NODE_GPUS_MAX GPUs of one model.  Each GPU has 1000 milli-GPU.  A job asks
 * either for whole GPUs (gpus >= 1, on each of `nodes` nodes: a gang, all or
 * nothing) or for a share of one GPU (gpus == 0, 1 <= gpu_milli <= 999).
 * Several shares may sit on one GPU up to 1000 milli.  Free capacity is node
 * totals minus the allocations passed in.
 */
#ifndef TM_SCHEDULER_H
#define TM_SCHEDULER_H

#include <stddef.h>
#include <stdint.h>

#include "controller/sched/quota.h"
#include "core/model.h"
#include "core/sched_policies.h"

#define TM_NODE_GPUS_MAX 16
#define TM_GPU_MODELS_MAX 64

/* The policies: one row each in core/sched_policies.h, which gives the
 * enum, the names and the table (policy.c). */
enum tm_sched_policy {
#define TM_SCHED_POLICY_ENUM(id, name) TM_POLICY_##id,
    TM_SCHED_POLICIES(TM_SCHED_POLICY_ENUM)
#undef TM_SCHED_POLICY_ENUM
    TM_POLICY_MAX,
};

/* The policy's name, "unknown" when p is out of range. */
const char *tm_sched_policy_name(enum tm_sched_policy p);
/* Returns the policy or -1; tm_sched_policy_list() gives the names in
 * table order, e.g. "fifo, backfill, tarmac". */
int tm_sched_policy_parse(const char *name);
const char *tm_sched_policy_list(void);

/* A job with gpus == 0 and gpu_milli == 0 asks for CPU and memory only
 * (the trace has such tasks; packing mode places them). */
struct tm_sched_job {
    int64_t id;          /* caller's id, echoed back through the index */
    int64_t submit_ms;
    int64_t estimate_ms; /* runtime estimate; <= 0 when nothing is known */
    int64_t cpu_milli;   /* per node */
    int64_t memory_mib;  /* per node */
    uint64_t model_mask; /* bit i: GPU model i acceptable; 0: any model */
    int32_t gpus;        /* whole GPUs per node; 0 for a fractional share */
    int32_t gpu_milli;   /* the share (1..999) when gpus == 0; else 1000 */
    int32_t nodes;       /* gang size, >= 1 */
    int32_t priority;    /* larger is more urgent */
    enum tm_job_class klass;
    bool preemptible;
    /* 1 + the node index this job was reserved on in
     * the previous pass (tm_sched_reservation.node + 1), 0 if none.  tarmac
     * keeps a reservation on its node, so that a drain, once begun, ends. */
    int32_t hold_node;
    /* The start first promised to this job by a
     * reservation (tm_sched_reservation.start_ms of the first pass that
     * reserved it), 0 if none.  tarmac lets non-preemptible work fill the
     * held node only if it ends by then, so a drain cannot be prolonged
     * forever by fillers whose estimates were short. */
    int64_t hold_start_ms;
    /* The estimate comes from this task's own earlier runs (a recurring
     * job), not from similar work: trusted by align_ends placement. */
    bool estimate_known;
};

struct tm_sched_node {
    int64_t id;
    int64_t cpu_milli;   /* allocatable totals */
    int64_t memory_mib;
    int32_t gpus;        /* 0..TM_NODE_GPUS_MAX */
    int32_t model;       /* index into the caller's GPU model table */
    bool spot;           /* preemptible capacity */
    bool schedulable;    /* ready and not cordoned or draining */
    /* params.elastic: the caller's preference among nodes, lower first
     * (the fleet's smallest types, then its oldest nodes). */
    int64_t rank;
};

/* A running job's hold on one node (a gang has one per node). */
struct tm_sched_alloc {
    int64_t job_id;
    int32_t node;        /* index into the nodes array */
    uint32_t gpu_mask;   /* GPUs held */
    int32_t gpu_milli;   /* held on each GPU of the mask: 1000 or the share */
    int64_t cpu_milli;
    int64_t memory_mib;
    int64_t end_ms;      /* expected end: start + estimate */
    bool preemptible;
    bool loaned;         /* the placement said loaned (copy it back); tarmac
                          * may evict it, see tm_sched_preemption */
};

struct tm_sched_params {
    int64_t starvation_ms; /* tarmac: no job waits past this (aging bound) */
    int64_t short_ms;      /* tarmac: jobs with estimates under this fill gaps */
    /* Zero means the default given in brackets. */
    int32_t max_reservations;    /* tarmac: blocked jobs holding reservations [8];
                                  * backfill always holds exactly one (EASY) */
    int64_t default_estimate_ms; /* ordering weight of a job without estimate [1 h] */
    /* A job with estimate_known goes to the fitting node whose work
     * (allocs' end_ms, and this pass's placements) ends soonest at or
     * after the job's own end, else to the one whose work ends latest, so
     * that work ending together shares nodes and a node is not kept alive
     * by one job after the rest of its work ended.  fifo and backfill:
     * instead of first fit, among every node that fits.  tarmac: among its
     * best-fit candidates, after model pressure and stranding and before
     * the tightness of the fit.  Other jobs place by the policy alone;
     * false: no job does this. */
    bool align_ends;
    /* tarmac: the fleet grows and shrinks.  Among placements that strand
     * equally (and align equally), the node of lowest rank comes before
     * the tightest fit, so work gathers on the oldest nodes and the newest
     * empty and are released; best fit alone spreads work over whichever
     * nodes are fullest, new ones included, and keeps more of them alive
     * (measured in the elastic replay, bench/results/elastic-2026-12-01-b.md). */
    bool elastic;
};

/* 48 h: a job can only be promised a node once that node's
 * non-preemptible work has ended, and GPU jobs run for up to a day; tarmac
 * reserves at half the bound, so the bound must exceed the longest
 * runtime it cannot preempt. */
#define TM_SCHED_STARVATION_DEFAULT_MS (48LL * 3600 * 1000)
#define TM_SCHED_SHORT_DEFAULT_MS (30LL * 60 * 1000)
#define TM_SCHED_MAX_RESERVATIONS_DEFAULT 8
#define TM_SCHED_DEFAULT_ESTIMATE_MS (3600LL * 1000)

/*
 * Optional: what the running jobs hold, node by node, kept by a caller
 * that changes it a job at a time between passes (the time replay).  It
 * must be what `allocs` adds up to; the pass then reads it instead of
 * summing and grouping the allocs itself, so the pass's load is
 * O(nodes) plus the nodes a reservation replays, not O(running jobs):
 * with thousands of running jobs the load was a large part of a
 * saturated backfill replay.
 * The allocs are not validated when it is given.  NULL (the live
 * controller): derived from allocs, the same values.
 */
struct tm_sched_footprint {
    const int64_t *cpu_free;     /* per node: cpu_milli less what its allocs hold */
    const int64_t *mem_free;     /* per node: memory_mib less the same */
    const int16_t *gpu_used;     /* per node x TM_NODE_GPUS_MAX: milli held on each GPU */
    const int32_t *node_nallocs; /* per node: allocs on it */
    const int32_t *alloc_head;   /* per node: an alloc on it, -1 none */
    const int32_t *alloc_next;   /* per alloc: the next on its node, -1 none */
    /* Optional (NULL: worked out from gpu_used): per node, over its GPUs
     * (one over-committed counts as none free), how many have all 1000
     * milli free, the most milli free on one, and the free milli in all. */
    const int8_t *gpus_full;
    const int16_t *gpu_free_max;
    const int32_t *gpu_free_sum;
    /* Optional (NULL: the allocs' end_ms): each alloc's expected end is
     * now + tm_estimate_remaining(alloc_estimate[a], now - alloc_start[a])
     * (estimate.h), worked out by the pass for the allocs it reads; the
     * replay refreshing every end_ms before each pass was a fifth of a
     * backfill replay once the pass's own load was gone. */
    const int64_t *alloc_estimate; /* > 0 */
    const int64_t *alloc_start;
    /* Optional (NULL: read from the allocs): per node, the latest
     * expected end (as above) of its allocs holding GPU milli, and the
     * same without preemptible allocs on loan; INT64_MIN for none. */
    const int64_t *gpu_end;
    const int64_t *gpu_end_kept;
    /* Optional (NULL: every node loaded each pass): the nodes as the
     * last pass loaded them, kept by the caller from pass to pass with
     * tm_sched_node_cache_touch() for each node whose line above changed;
     * the pass then loads only those.  Needs gpus_full and the same nodes
     * (array and contents) at every pass; other nodes load it afresh. */
    struct tm_sched_node_cache *cache;
};

/* The nodes of a footprint as loaded by a pass, kept between passes (the
 * time replay: loading all 512 nodes of 4,096 GPUs at each of its
 * millions of passes was a sixth of a tarmac replay, perf). */
struct tm_sched_node_cache;
int tm_sched_node_cache_new(size_t nnodes, struct tm_sched_node_cache **ret);
/* Node i's free capacity (the footprint's line) changed since the pass. */
void tm_sched_node_cache_touch(struct tm_sched_node_cache *nc, size_t i);
void tm_sched_node_cache_free(struct tm_sched_node_cache *nc);

/*
 * Optional: team quotas (quota.h).  Before a queued job is placed the pass
 * asks tm_quota_admit(); a job that waits on quota is skipped with the
 * verdict TM_SCHED_WAIT_QUOTA and the quota's why, holds no reservation
 * and does not hold back the jobs after it.  A job placed is counted in
 * the usage (tm_quota_take()).  A job within its team's quota that finds
 * no room while others borrow that quota reclaims them
 * (tm_quota_reclaim(), within the disruption budget): the victims are in
 * the result's reclaims, for the caller to checkpoint or stop and
 * requeue, and the job waits (TM_SCHED_WAIT_QUOTA) for their GPUs.
 */
struct tm_sched_quota {
    const struct tm_quota *quota;
    /* This pass's usage, from the running jobs and these queued ones
     * (tm_quota_usage_new()); the pass adds what it places. */
    struct tm_quota_usage *usage;
    /* Per queued job, in->jobs' order; flavor < 0: under no quota. */
    const struct tm_quota_job *jobs;
    const struct tm_quota_job *running; /* as given to tm_quota_usage_new() */
    size_t nrunning;
    int32_t disruption_budget;          /* reclaims this pass at most */
    /* Per queued job, written by the pass: the quota's answer (a job
     * placed as TM_QUOTA_BORROW runs borrowed: pass it so next time).
     * The notes of jobs that wait on quota point at its why. */
    struct tm_quota_answer *answers;
};

/* A running job to stop for a team's quota (tm_sched_quota). */
struct tm_sched_reclaim {
    int32_t job;                  /* index into input jobs: the job it makes room for */
    struct tm_quota_victim victim; /* victim.running: index into tm_sched_quota.running */
};

struct tm_sched_input {
    const struct tm_sched_job *jobs;     /* queued jobs, any order */
    size_t njobs;
    const struct tm_sched_node *nodes;
    size_t nnodes;
    const struct tm_sched_alloc *allocs; /* running jobs */
    size_t nallocs;
    int64_t now_ms;
    enum tm_sched_policy policy;
    struct tm_sched_params params;
    const struct tm_sched_footprint *footprint; /* optional, see above */
    const struct tm_sched_quota *quota;         /* optional, NULL: no quotas */
};

/* One job on one node; a gang yields one placement per node. */
struct tm_sched_placement {
    int32_t job;       /* index into input jobs */
    int32_t node;      /* index into input nodes */
    uint32_t gpu_mask; /* GPUs given */
    int32_t gpu_milli; /* on each GPU of the mask */
    bool loaned;       /* preemptible work on capacity
                        * reserved for non-preemptible work, beyond what its
                        * estimate covers; pass it back in tm_sched_alloc */
};

/* A running preemptible job on loan to evict now, so
 * that the reserved non-preemptible job `job` starts in this same pass
 * (its placement is in the result).  The caller stops and requeues it. */
struct tm_sched_preemption {
    int32_t alloc;     /* index into input allocs */
    int32_t job;       /* index into input jobs: the job that needs the room */
};

enum tm_sched_verdict {
    TM_SCHED_PLACED,
    TM_SCHED_RESERVED,        /* blocked; holds a reservation at start_ms */
    TM_SCHED_WAIT_CAPACITY,   /* no node has room now */
    TM_SCHED_WAIT_ORDER,      /* room exists but an earlier job comes first */
    TM_SCHED_WAIT_RESERVATION,/* would delay a reservation */
    TM_SCHED_NO_MATCH,        /* no node of an acceptable model/size exists */
    TM_SCHED_WAIT_QUOTA,      /* waits on its team's quota (tm_sched_quota) */
    TM_SCHED_VERDICT_MAX,
};

const char *tm_sched_verdict_name(enum tm_sched_verdict v);

/* Why a job got its verdict, one per queued job. */
struct tm_sched_note {
    int32_t job;
    enum tm_sched_verdict verdict;
    int32_t node;      /* node placed on or reserved, -1 if none */
    int64_t start_ms;  /* reservation start, 0 if none */
    const char *why;   /* static text, e.g. "best fit, strands 0 GPUs" */
    /* Not placed, and tarmac's search for a node stopped at its bound
     * with nodes unread: another node might have held it. */
    bool partial;
};

/* A blocked job's claim on one node from start_ms on (a gang has one per
 * node).  Later jobs may use the node before start_ms only if they end by
 * then or leave room for the reserved job. */
struct tm_sched_reservation {
    int32_t job;       /* index into input jobs */
    int32_t node;      /* index into input nodes */
    int64_t start_ms;  /* earliest start, from the running jobs' expected ends */
};

struct tm_sched_result {
    struct tm_sched_placement *placements;
    size_t nplacements;
    struct tm_sched_note *notes;
    size_t nnotes;
    struct tm_sched_reservation *reservations;
    size_t nreservations;
    struct tm_sched_preemption *preemptions;   /* tarmac only */
    size_t npreemptions;
    struct tm_sched_reclaim *reclaims;         /* with tm_sched_quota only */
    size_t nreclaims;
    /* The first job in the pass's order that was neither placed nor
     * reserved for nor matched no node, -1 none (tarmac may reserve for it
     * at the end: tarmac_finish()). */
    int32_t first_blocked;
};

/*
 * For a caller that keeps its queue in tarmac's order between passes and
 * hands a pass only the part of it that can act (the time replay,
 * controller/replay/replay_tarmac.c): what it needs to know of that order
 * without a copy of its rules.  tarmac considers first the jobs aged
 * tm_sched_tarmac_urgent_ms() or more (those tied to few nodes, then the
 * rest by submit time), then by level, age / tm_sched_tarmac_level_ms(),
 * highest first, and within a level by submit time less
 * tm_sched_tarmac_lead_ms() (order.c).
 */
struct tm_sched_traits {
    bool tied;        /* the models able to hold it have few of the GPUs */
    bool constrained; /* it accepts fewer models than the nodes have */
    int32_t flexible_limit; /* flexible reservations a pass holds before
                             * tarmac asks of it only whether it is at
                             * risk (tarmac_may_reserve()) */
};

/* Per job of in->jobs (nodes as in a pass; allocs unread).  0, or
 * TM_EINVAL / TM_ENOMEM as tm_sched_run(). */
int tm_sched_job_traits(const struct tm_sched_input *in, struct tm_sched_traits *out);
int64_t tm_sched_starvation_ms(const struct tm_sched_params *p);
int64_t tm_sched_tarmac_urgent_ms(const struct tm_sched_params *p);
int64_t tm_sched_tarmac_level_ms(const struct tm_sched_params *p);
int64_t tm_sched_tarmac_lead_ms(const struct tm_sched_params *p, const struct tm_sched_job *jb,
                                bool constrained);
/* Reservations for jobs not tied to few nodes that one tarmac pass holds
 * on a fleet of `gpus` schedulable GPUs before it asks of a heavy one (4+
 * whole GPUs a node) only whether it is at risk (tarmac_may_reserve()):
 * one per 64 GPUs, at least 1.  For the others the limit is 1. */
int32_t tm_sched_tarmac_flexible_limit(int64_t gpus);
/* tarmac reserves for a job past its turn when the start it would get
 * comes after this (sched_at_risk()). */
int64_t tm_sched_tarmac_risk_deadline(const struct tm_sched_params *p, int64_t submit_ms);
/* Blocked jobs one pass of in->policy may reserve for. */
int32_t tm_sched_max_reservations(const struct tm_sched_input *in);

/* Run one scheduling pass.  *ret is filled only on success (0); release it
 * with tm_sched_result_release().  Returns TM_EINVAL for malformed input
 * (a node index out of range, gpus above TM_NODE_GPUS_MAX) or TM_ENOMEM. */
int tm_sched_run(const struct tm_sched_input *in, struct tm_sched_result *ret);

/* Free what tm_sched_run() allocated; safe on a zeroed or released result. */
void tm_sched_result_release(struct tm_sched_result *r);

#endif
