/*
 * controller/replay/replay.h: discrete-event trace replay through the scheduler,
 * and the packing mode comparable with the FGD study.
 *
 * Time mode: virtual time, no sleeping.  Arrivals and completions are
 * events in a binary heap (O(log n) each); after the events of an instant
 * the queue, the fixed inventory and the running jobs go through
 * tm_sched_run(), the same pass the live controller runs, and its
 * placements start jobs.  The inventory is fixed (no launches, no
 * terminations): the trace's node list, or a sample of it.
 *
 * Packing mode: the FGD artifact's experiment.  Every pod row (CPU-only and
 * never-scheduled ones included) plus random draws until arrived GPU demand
 * reaches 130% of GPU capacity, shuffled, placed one by one with CPU, memory
 * and GPUs enforced, nothing departs, a task that fits nowhere is dropped.
 * Reported: allocated GPU share of capacity at the end.
 */
#ifndef TM_REPLAY_H
#define TM_REPLAY_H

#include <stdio.h>

#include "controller/sched/quota.h"
#include "controller/sched/scheduler.h"
#include "controller/replay/trace.h"

enum tm_pack_policy {
    TM_PACK_RANDOM,   /* a random node that fits */
    TM_PACK_FIRSTFIT, /* the lowest-numbered node that fits */
    TM_PACK_BESTFIT,  /* the artifact's best fit: least CPU+GPU left */
    TM_PACK_FGD,      /* the artifact's FGD: fragmentation score, random ties */
    TM_PACK_TARMAC,   /* fragmentation score (FGD), best fit on ties */
    TM_PACK_MAX,
};

const char *tm_pack_policy_name(enum tm_pack_policy p);
int tm_pack_policy_parse(const char *name);
const char *tm_pack_policy_list(void);

/* The time replay's policies: the scheduler's rows (TM_SCHED_POLICIES),
 * then the oracle, the "how far from perfect" baseline of docs/measuring.md: tarmac's
 * own policy told every job's true runtime at its arrival (exact
 * estimates, and running jobs' true ends), whatever --estimates says. */
#define TM_REPLAY_ORACLE ((int)TM_POLICY_MAX)
#define TM_REPLAY_POLICY_MAX (TM_REPLAY_ORACLE + 1)

/* "fifo", ..., "oracle"; "unknown" out of range. */
const char *tm_replay_policy_name(int p);
/* The policy or -1. */
int tm_replay_policy_parse(const char *name);
/* "fifo, backfill, tarmac, multifactor, oracle": help and errors. */
const char *tm_replay_policy_list(void);

struct tm_replay_config {
    enum tm_sched_policy policy;  /* time mode */
    struct tm_sched_params params;
    bool exact_estimates;         /* backfill sees true runtimes */
    int64_t since_ms;             /* drop jobs submitted before; < 0: none */
    int64_t max_runtime_ms;       /* drop jobs that ran longer; < 0: none */
    int32_t gpus;                 /* sample the inventory to this; 0: all */
    double load;                  /* scale arrivals to this offered load; 0: as is */
    uint64_t seed;                /* inventory sampling and packing draws */
    FILE *log;                    /* replay log: placements and verdict changes, one line
                                   * each: t= policy= job= verdict= sub= (submit time, so a
                                   * line gives the wait) est= [node=] [nodes=, a gang's
                                   * every node placed or reserved] [start=] why= */
    /* The reference: one tm_sched_run() over the whole queue after every
     * instant's events.  Off, fifo passes the head and a few behind it
     * (see pass_fifo() in replay.c), backfill and tarmac the part of the
     * queue that can act (replay_backfill.c, replay_tarmac.c): the same
     * placements, decision for decision (test_replay_incremental); the log
     * then notes only the jobs a pass looked at. */
    bool full_pass;
    /* tarmac without full_pass: the queue's head handed to a pass at
     * first, 0 for 128 (tests take a short one, so that small queues
     * exercise the incremental pass). */
    size_t tarmac_head;
    /* Where the predictor's fallback model stands in:
     * 0 or -1 never (the keys alone, the default), 3 or 4 the first key
     * level it replaces (TM_ESTIMATE_FALLBACK_FROM is 4). */
    int estimate_fallback;
    /* Teams (optional, NULL: none): each job's team is its trace team
     * (tm_quota_team(), a team of no quota TM_QUOTA_NO_TEAM), its flavor
     * the model's only flavor.  See struct tm_replay_quota. */
    const struct tm_replay_quota *teams;
};

/* How the time replay treats teams (replay_quota.c).  The figures per team
 * go to out, which the caller sizes to tm_quota_nnodes(quota). */
enum tm_replay_team_rule {
    TM_REPLAY_TEAMS_MEASURE,  /* one queue: quotas only measured (guarantee_met) */
    TM_REPLAY_TEAMS_FAIR,     /* one queue, each team's jobs' priority from its
                               * decayed usage (a fair-share factor); measured */
    TM_REPLAY_TEAMS_QUOTA,    /* quotas enforced (tm_sched_quota): lend, reclaim;
                               * borrowers ordered by fair share */
};

enum tm_replay_borrowers {
    TM_REPLAY_BORROW_CHECKPOINT,  /* every job checkpointable: checkpointed
                                   * when reclaimed, resumes, nothing redone */
    TM_REPLAY_BORROW_PREEMPT,     /* every job preemptible, not checkpointable:
                                   * restarted, its GPU-time redone */
};

struct tm_replay_team_out {
    size_t jobs;              /* completed */
    double jct_sum_s;
    double demand_s;          /* time within-quota demand existed */
    double met_s;             /* of it, met within the reclaim bound */
};

struct tm_replay_quota {
    const struct tm_quota *quota;
    enum tm_replay_team_rule rule;
    enum tm_replay_borrowers borrowers;
    int64_t half_life_ms;     /* fair share's decay, > 0 */
    int64_t bound_ms;         /* the reclaim bound guarantee_met is judged by */
    struct tm_replay_team_out *out;
};

struct tm_replay_stats {
    /* input */
    size_t jobs;                  /* replayed */
    /* dropped_no_node: no node could hold the job, or a gang has more
     * nodes than could each hold one of its members */
    size_t dropped_since, dropped_runtime, dropped_unscheduled, dropped_cpu_only, dropped_no_node;
    int32_t gpus;
    size_t nodes;
    double native_load;           /* offered load before scaling */
    double load;                  /* after */
    double factor;                /* inter-arrival multiplier */
    int64_t starvation_ms;
    /* results */
    double utilisation;           /* over the makespan */
    double utilisation_arrival;   /* over first..last submission */
    /* docs/measuring.md's definition: the fit-aware
     * reading.  Free milli of a GPU counts only while some queued job
     * could be placed on it then: a share that fits its free milli, or
     * whole GPUs that fit the node's wholly free GPUs (this one among
     * them), on an accepted model, with the node's free CPU and memory
     * enough.  Slivers no queued share fits, and nodes out of CPU or
     * memory, are packing loss, not counted here. */
    double idle_while_waiting_gpu_hours;
    /* The same figure under its older key (older reports). */
    double idle_while_waiting_fit_gpu_hours;
    /* The "could have used the model" reading, the older headline
     * figure: free milli of a model (slivers included) while a queued
     * job accepts the model and fits, empty, some node of it.  Always >=
     * the fit-aware figure. */
    double idle_while_waiting_model_gpu_hours;
    /* The loosest reading, the upper bound of docs/measuring.md: free milli of a model
     * while a queued job accepts the model, whatever the size of its
     * nodes.  Always >= the model reading. */
    double idle_while_waiting_accepts_gpu_hours;
    double idle_sliver_gpu_hours; /* of the model reading, the part on partly used GPUs */
    /* The arrival window's free GPU-hours (what utilisation_arrival leaves
     * out), in parts that sum to it: on models that no queued job could
     * use (nothing waits for them), placeable now by a queued job (the
     * fit-aware idle, drains included), and the rest on models queued jobs
     * wait for (packing loss: slivers, nodes out of CPU or memory, too few
     * whole GPUs on one node), with the part of it and of the fit-aware
     * idle on partly used GPUs beside. */
    double window_idle_nothing_waits_gpu_hours;
    double window_idle_fit_gpu_hours;
    double window_idle_packing_gpu_hours;
    double window_idle_sliver_gpu_hours;
    double wait_mean_s, wait_p50_s, wait_p95_s, wait_p99_s, wait_max_s;
    double jct_mean_s;
    double makespan_s;
    double arrival_window_s;
    size_t starved;               /* waited past the starvation bound */
    size_t unfinished;            /* still queued when no event was left */
    size_t reserved_jobs;         /* jobs that were given a reservation */
    size_t reservation_slips;     /* of those, started after the first promise */
    double slip_mean_s, slip_max_s;
    /* Reservation slips in detail: median and p95 of
     * (first start - first promise) over the jobs that slipped. */
    double slip_p50_s, slip_p95_s;
    /* Estimate quality at arrival, by the level the keys alone could
     * answer from (0 none, 1..4 as estimate.h; "keys could not answer" is
     * 0, 3 and 4: nothing from the job's own name or team): jobs, and the
     * sum of |ln(estimate / runtime)| with an unknown estimate read as
     * TM_SCHED_DEFAULT_ESTIMATE_MS and both at least 1 s.  Predicted
     * estimates only; all zero with exact ones. */
    size_t est_jobs[5];
    double est_abslog_sum[5];
    size_t est_model_jobs;        /* of all, answered by the fallback model */
    /* The model's own answer scored on every job, by key level as above,
     * whoever answered (jobs where it had one): how it compares with the
     * keys where they do answer. */
    size_t est_model_scored[5];
    double est_model_abslog_sum[5];
    /* With teams: reclaims (borrowed jobs stopped for a team's quota),
     * the GPU-hours they redo, the share of the time within-quota demand
     * existed that it was met within the bound (1 when it never existed). */
    size_t reclaims;
    double redone_gpu_hours;
    double guarantee_met;
    size_t preemptions;           /* loans evicted (tarmac) */
    double preempted_gpu_hours;   /* work lost to them */
    size_t events, passes;
    double wall_s, events_per_s;
};

/* Replay the trace in time mode.  0, TM_EINVAL (nothing left to replay, or
 * a bad config) or TM_ENOMEM. */
int tm_replay_time(const struct tm_trace *t, const struct tm_replay_config *cfg,
                   struct tm_replay_stats *ret);

struct tm_pack_stats {
    double allocation;            /* GPU milli allocated / capacity */
    size_t tasks, placed, failed;
    double arrived_gpu;           /* arrived GPU demand / capacity */
    double wall_s;
};

/* One packing run with one seed.  0, TM_EINVAL or TM_ENOMEM. */
int tm_replay_packing(const struct tm_trace *t, enum tm_pack_policy policy, uint64_t seed,
                      double tune, struct tm_pack_stats *ret);

/* Sample the trace's node list to about `gpus` GPUs keeping the GPU-model
 * mix (largest remainders, then filling with whatever fits, models not yet
 * present first).  Caller frees *ret.  0, TM_EINVAL or TM_ENOMEM. */
int tm_replay_sample_nodes(const struct tm_trace *t, int32_t gpus, uint64_t seed,
                           struct tm_trace_node **ret, size_t *ret_n);

#endif
