/*
 * controller/fleet/planner.h: the fleet planner, a pure function of a snapshot.
 *
 * tm_planner_run() takes the nodes (booting and ready), the queued work, the
 * demand forecast, the price table, the pool limits, the shortages seen
 * recently and the budget, all at one instant, and returns actions, each
 * with a reason: launch (type, zone, capacity), terminate, substitute (an
 * on-demand node that runs only preemptible work, by spot), move
 * (checkpoint the preemptible, checkpointable jobs of a node so that it
 * empties), switch a deadline job to on-demand, refuse a launch (hard
 * budget cap), warn (soft threshold) or restart (consolidation by
 * restart, below).  No I/O, no clock, no state kept
 * between calls: the replay (controller/replay/elastic.c) and the live tick call
 * the same function.
 *
 * Two pools: on-demand (pool 0) and spot (pool 1).  Non-preemptible work
 * runs on on-demand nodes only; preemptible work goes to spot, falling back
 * to on-demand only when the spot pool allows it (od_fallback).
 *
 * Launch.  The queued jobs that do not fit on the free room of the nodes
 * (booting nodes count as free; GPUs, and CPU and memory where the job
 * and the type state them) form the backlog; the forecast's upper
 * quantile of GPUs wanted one boot ahead, minus the GPUs the fleet holds,
 * adds headroom (scale up ahead of the queue).  The backlog is packed into
 * new nodes, largest first; each new node is the type whose price per
 * GPU-hour of the work it would hold is lowest (so a 1-GPU job gets a
 * 1-GPU instance when that is cheaper than an idle share of an 8-GPU one).
 * Fallback when capacity is short (tm_planner_shortage entries, remembered by
 * the caller for shortage_memory_ms): the same type in another zone, then
 * another type, then, for queued preemptible work only and only if
 * od_fallback, on-demand (never for the forecast's headroom alone: a node
 * bought ahead of spot demand would idle on on-demand while spot stays
 * short).  With wait_for_ends, a queued job (no deadline, no gang) that
 * fits the room running work is expected to free within boot_ms (the
 * jobs' remaining_ms) waits for it instead: a new node would not start it
 * sooner.  That room is counted once, and the job counts as held for the
 * headroom.
 *
 * Drain (drain_oversized).  A node whose work would fit a type of at most
 * an eighth of its GPUs gets TM_PLANNER_DRAIN: no new work, released as soon
 * as it is empty; idle nodes larger than the smallest type are released
 * past their grace whatever the forecast.  A large node launched for a
 * large job then goes when that job ends instead of living on for a
 * stream of small ones.
 *
 * Terminate.  A node empty for idle_grace_ms is released unless queued
 * work the backlog step fitted into its room is waiting for it, or the
 * forecast's upper quantile still needs its GPUs (hysteresis: a node is
 * launched for the upper quantile and released only below it, so demand
 * oscillating within a grace period never flaps), and never below the
 * pool's min_nodes.  With keep_max_ms, the forecast keeps an idle node
 * for at most that long (demand that the upper quantile promised within a
 * boot and that has not come by then is not waited for).  Terminations
 * (of every reason) are limited by the disruption budget: at most
 * max(disruption_nodes, disruption_pct x nodes) per
 * disruption_interval_ms, counted with recent_terminations.
 *
 * Budget.  Projected spend = spent + what the running nodes cost to the
 * end of their expected use (committed) + each accepted launch priced for
 * boot plus the expected runtime of the work it is for.  A launch that
 * would take the projection past a hard cap is refused (TM_PLANNER_REFUSE,
 * the numbers in the reason); a soft cap emits one TM_PLANNER_WARN when the
 * projection first passes warn_at x cap (the caller keeps `warned`).
 *
 * Gangs.  A queued job on several nodes needs them all at once, in one
 * zone: its members that fit no node's free room are launched as one set
 * (one TM_PLANNER_LAUNCH with count > 1) of the cheapest type holding a
 * member, in the first zone where that type is not short; a set the pool's
 * max or the budget cannot take whole is refused whole.  Never packed
 * with other work: nodes bought for a gang and shared out would leave it
 * short.
 *
 * Deadlines ("uniform progress", Wu et al., NSDI '24, as the anchor): a
 * preemptible job with a deadline stays on spot (or waits for spot) while
 * its slack (deadline - now - remaining work) exceeds the time an
 * on-demand start takes (boot + one tick); at the latest tick where that
 * would no longer hold it gets TM_PLANNER_DEADLINE_OD: run on on-demand now.
 *
 * Consolidation by restart (params.consolidate_restart: a
 * preemptible job is one tarmac may restart).  A node whose jobs are all
 * preemptible but not all checkpointable (so no move) is emptied with
 * TM_PLANNER_RESTART when the money saved exceeds the work redone:
 *   saved    the node's price x its expected use left (busy_until_ms - now,
 *            the end of its work by the runtime estimates), less what the
 *            nodes that take its jobs cost for running longer than their
 *            own expected use (each job placed where that is least, then
 *            first fit; new end = now + its redo + its remaining work)
 *   redone   the GPU-time of this attempt of each job that cannot
 *            checkpoint (ran_ms x its GPUs), plus move_cost_ms x GPUs for
 *            those that can, priced at the node's price per GPU
 * restart when saved > redone.  Its jobs must fit the free room of other
 * ready nodes, none may have reached params.restart_attempts_max attempts,
 * the node must allow it (no_restart false), and it takes one from the
 * disruption budget.  The node that saves most net of the work redone
 * goes first, then the next on the room and ends that leaves, while the
 * budget lasts (at most 4 a pass, each the best of at most 64 candidates
 * fitted, taken by their most possible saving); none in a pass that moved
 * a node.
 */
#ifndef TM_PLANNER_H
#define TM_PLANNER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "controller/fleet/prices.h"

enum tm_planner_pool {
    TM_PLANNER_POOL_OD,
    TM_PLANNER_POOL_SPOT,
    TM_PLANNER_POOL_MAX,
};

struct tm_planner_node {
    int64_t id;
    int32_t type;            /* index into prices->types */
    int32_t zone;            /* index into prices->zones (0 when none) */
    bool spot;
    bool ready;              /* booted; false while booting */
    bool leaving;            /* noticed, draining or terminating: no new work */
    int32_t used_milli;      /* milli-GPU held by running jobs */
    int32_t free_whole;      /* whole GPUs entirely free */
    int32_t jobs;            /* running jobs */
    bool only_preemptible;   /* every running job is preemptible */
    bool movable;            /* every running job is preemptible and checkpointable */
    int64_t idle_since_ms;   /* when it last became empty; ignored when jobs > 0 */
    int64_t busy_until_ms;   /* expected end of its work (estimates) */
    int64_t lost_if_moved_milli_ms; /* work lost by moving its jobs (not checkpointed) */
    /* What packing checks beside GPUs: */
    int64_t used_cpu_milli;  /* CPU held by running jobs (0 with cpu_milli 0 jobs) */
    int64_t used_memory_mib; /* memory held by running jobs */
    bool cordoned;           /* drained (TM_PLANNER_DRAIN): no new work, released once empty */
    /* The largest free room on one partly used GPU, in milli-GPU, when
     * share_room_known.  A share fits a node on one GPU only: three 0.5
     * shares spread over two GPUs leave 500 free on each, and a 0.6 share
     * fits neither.  share_room_known false (a caller that does not track
     * GPUs one by one): a share fits when the node's total free milli-GPU
     * holds it. */
    int32_t share_free_milli;
    bool share_room_known;
    /* Consolidation by restart is not for this node: its pool forbids it
     * (consolidate_restart: false) or a job on it cannot be restarted
     * alone (a gang spanning nodes). */
    bool no_restart;
};

struct tm_planner_job {
    int64_t id;
    int32_t gpus;            /* whole GPUs; 0 for a share */
    int32_t milli;           /* total milli-GPU (gpus x 1000, or the share) */
    bool preemptible;
    bool on_spot;            /* running on a spot node (deadline check) */
    bool running;
    int32_t node;            /* running: index into nodes; else -1 */
    int64_t remaining_ms;    /* expected work left (estimate) */
    int64_t deadline_ms;     /* 0: none */
    int64_t cpu_milli;       /* CPU it asks; 0: not checked */
    int64_t memory_mib;      /* memory it asks; 0: not checked */
    /* Running jobs, for consolidation by restart: */
    bool checkpointable;     /* resumes from a checkpoint (else starts over) */
    int32_t attempts;        /* attempts started, this one included */
    int64_t ran_ms;          /* run time of this attempt (redone on a restart) */
    /* Gang size: a queued job on several nodes is one entry per node,
     * every entry with the same id and gang; 0 or 1: a single node.  The
     * members that fit no node's free room are launched as one set
     * (TM_PLANNER_LAUNCH with count = the members left): one type, one
     * zone, all or none. */
    int32_t gang;
};

struct tm_planner_shortage {
    int32_t type, zone;
    bool spot;
    int64_t until_ms;        /* remembered until then */
};

struct tm_planner_budget {
    bool active;             /* false: no cap */
    bool hard;
    int64_t cap_uusd;
    double warn_at;
    bool warned;             /* the soft warning was already given */
    int64_t spent_uusd;      /* accrued this month */
    int64_t committed_uusd;  /* running nodes to the end of their expected use */
};

struct tm_planner_params {
    int64_t boot_ms;
    int64_t tick_ms;
    int64_t idle_grace_ms;
    int32_t min_nodes[TM_PLANNER_POOL_MAX];
    int32_t max_nodes[TM_PLANNER_POOL_MAX];
    int32_t disruption_nodes;        /* at least this many per interval */
    double disruption_pct;           /* or this share of the nodes */
    int32_t recent_terminations;     /* already done in the current interval */
    bool spot;                       /* spot pool enabled */
    bool od_fallback;                /* preemptible work may fall back to on-demand */
    bool od_room_for_preemptible;    /* preemptible work may fill free room on
                                      * on-demand nodes already paid for */
    int64_t move_cost_ms;            /* checkpoint + restore time of a move */
    int64_t launch_use_ms;           /* expected use of a launch with no estimate */
    /* A node whose work would fit a type of at most an eighth of its GPUs
     * is drained (TM_PLANNER_DRAIN: no new work, released once empty), and
     * idle nodes larger than the smallest type are released past their
     * grace whatever the forecast (it is kept in small nodes).  false:
     * nodes are never drained for their size, and idle ones go by the
     * forecast alone. */
    bool drain_oversized;
    /* > 0: an idle node kept only for the
     * forecast's upper quantile (keep_gpus) is released once it has been
     * idle this long, whatever the forecast (ski rental: keeping a node
     * idle longer than a relaunch costs buys nothing the relaunch would
     * not; the replay uses the boot time).  0: kept as long as the
     * forecast wants it. */
    int64_t keep_max_ms;
    /* Consolidation by restart (the header's rule); false: never. */
    bool consolidate_restart;
    /* A job that has started this many attempts is not restarted again
     * (0: TM_PLANNER_RESTART_ATTEMPTS_MAX), so nothing restarts forever. */
    int32_t restart_attempts_max;
    /* A queued job (without a deadline) that fits the room running work
     * is expected to free within boot_ms waits for it instead of a
     * launch: a new node would not start it sooner. */
    bool wait_for_ends;
};

#define TM_PLANNER_RESTART_ATTEMPTS_MAX 3

struct tm_planner_input {
    int64_t now_ms;
    const struct tm_price_table *prices;
    const struct tm_planner_node *nodes;
    size_t nnodes;
    const struct tm_planner_job *jobs;  /* queued and running jobs */
    size_t njobs;
    double forecast_gpus[TM_PLANNER_POOL_MAX]; /* GPUs wanted one boot ahead, launched
                                             * for ahead of the queue; < 0: none */
    double keep_gpus[TM_PLANNER_POOL_MAX];     /* GPUs idle nodes are kept for (the
                                             * upper quantile: hysteresis); < 0: none */
    const struct tm_planner_shortage *shortages;
    size_t nshortages;
    /* The first nunoffered shortages (until_ms INT64_MAX) are cells no
     * pool offers at all: when one table joins several clouds' types
     * (a pool group), a type exists only in its own cloud's zones.  They
     * rule those cells out like a shortage, but a launch that avoids
     * them is not called a fallback in its reason. */
    size_t nunoffered;
    struct tm_planner_budget budget;
    struct tm_planner_params params;
    /* Interruptions per node-hour of spot type t in zone z at
     * [t x nzones + z] (nzones at least 1), or NULL.  Given, a spot
     * launch goes to the zone of lowest hazard among those not short
     * (ties in table order); NULL: the first zone not short. */
    const double *spot_zone_hazard;
};

enum tm_planner_kind {
    TM_PLANNER_LAUNCH,
    TM_PLANNER_TERMINATE,
    TM_PLANNER_SUBSTITUTE,      /* launch `type` on spot to replace `node` */
    TM_PLANNER_MOVE,            /* checkpoint and move `node`'s jobs, then release it */
    TM_PLANNER_DEADLINE_OD,     /* job `job` must run on on-demand from now */
    TM_PLANNER_REFUSE,          /* a launch refused by a hard budget cap */
    TM_PLANNER_WARN,            /* a soft budget threshold passed */
    TM_PLANNER_DRAIN,           /* no new work on `node`; it is released once empty */
    TM_PLANNER_RESTART,         /* stop `node`'s jobs (checkpointed when they can, else
                                 * started over elsewhere), then release it */
    TM_PLANNER_KIND_MAX,
};

const char *tm_planner_kind_name(enum tm_planner_kind k);

#define TM_PLANNER_REASON_MAX 192

struct tm_planner_action {
    enum tm_planner_kind kind;
    int32_t node;            /* index into nodes; -1 when none */
    int32_t job;             /* index into jobs; -1 when none */
    int32_t type;            /* launches: index into prices->types */
    int32_t zone;
    bool spot;
    bool od_fallback;        /* launches: on-demand for preemptible work, spot short */
    bool pool_minimum;       /* launches: only to keep the pool at its min_nodes */
    int64_t cost_uusd;       /* launches: projected cost (of every node of a set); restart: the work redone */
    int64_t saving_uusd;     /* restart: the money saved */
    int64_t redone_milli_ms; /* restart: milli-GPU x ms redone */
    int32_t restarted;       /* restart: jobs started over (not checkpointable) */
    /* Launches: nodes launched together, all or none (a gang's set, in one
     * zone); 1 for a single node.  job: the gang's first member. */
    int32_t count;
    char reason[TM_PLANNER_REASON_MAX];
};

struct tm_planner_result {
    struct tm_planner_action *actions;
    size_t nactions;
};

/* One planning pass.  0, TM_EINVAL (bad indices, no prices) or TM_ENOMEM;
 * *ret is filled only on success; release with tm_planner_result_release(). */
int tm_planner_run(const struct tm_planner_input *in, struct tm_planner_result *ret);
void tm_planner_result_release(struct tm_planner_result *r);

/* The type for one new node holding (part of) `milli` milli-GPU of work
 * whose largest job needs `largest_gpus` whole GPUs: the lowest price per
 * GPU of the work it would hold (min(its GPUs, the work)) among the types
 * that hold the largest job; the larger type on ties.  Types short at now
 * in every zone are skipped.  Returns the type index or -1; *ret_zone gets
 * the first zone without shortage. */
int tm_planner_choose_type(const struct tm_price_table *prices, const double *spot_zone_hazard,
                           bool spot, int32_t milli,
                           int32_t largest_gpus, const struct tm_planner_shortage *sh, size_t nsh,
                           int64_t now_ms, int32_t *ret_zone);

/* Whether (type, zone, spot) is remembered as short at now. */
bool tm_planner_short(const struct tm_planner_shortage *sh, size_t nsh, int32_t type, int32_t zone,
                      bool spot, int64_t now_ms);

/* The latest moment a job with `remaining_ms` of work and a deadline may
 * still start on on-demand and finish in time, given boot_ms and tick_ms:
 * deadline - remaining - boot - tick. */
int64_t tm_planner_deadline_switch_ms(int64_t deadline_ms, int64_t remaining_ms, int64_t boot_ms,
                                      int64_t tick_ms);

#endif
