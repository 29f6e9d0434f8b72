/*
 * controller/reconcile/reconcile.h: one reconcile pass, a pure function.
 *
 * Input: a snapshot of the database read in one transaction (pools, live
 * nodes, queued and running jobs, allocations), what each provider listed
 * (read BEFORE the snapshot, so every instance we launched already has its
 * node row in it), and now.  Output: a plan, i.e. the actions to write in one
 * transaction (tarmac_apply in migrations/0002_apply.sql, each with its
 * reason) and the cloud calls to make after that transaction commits.
 *
 * Spot interruptions: a node whose instance carries a notice (in the
 * listing, or posted to the API) is cordoned and its checkpointable jobs
 * checkpoint and requeue at once, keeping their progress ("spot_notice" and
 * "checkpoint" actions); its other jobs run on, since they may finish before
 * the cloud takes the node, and are requeued when it goes ("requeue", with
 * the GPU time of the lost attempt), as are the jobs of any node that goes.
 * An empty noticed node is released at once.
 *
 * Level-triggered: nothing here remembers an earlier pass.  A crash between
 * any two steps leaves rows and instances that the next pass of the next
 * process reads and repairs: a node row without an instance is launched
 * again with the same token; an instance with a token but no instance id in
 * its row is adopted; an instance nobody owns is terminated, and only after
 * a complete listing has been seen.
 */
#ifndef TM_RECONCILE_H
#define TM_RECONCILE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <cjson/cJSON.h>

#include "core/model.h"
#include "controller/sched/scheduler.h"
#include "core/config.h"
#include "providers/provider.h"

struct tm_snap_node {
    int64_t id;
    int pool;                 /* index into cfg->pools, -1 if the pool left the config */
    char token[TM_ID_MAX];
    char instance_id[TM_ID_MAX];
    char zone[TM_ID_MAX];
    char instance_type[TM_ID_MAX];
    char gpu_model[TM_ID_MAX];
    int gpus;
    int64_t cpu_milli, memory_mib;
    enum tm_capacity_type capacity;
    enum tm_node_state state;
    bool cordoned;
    int64_t requested_ms;
    int64_t idle_since_ms;    /* 0 when busy or unknown */
    int64_t price_uusd_per_hour;
    bool billed;              /* the cloud bills it (billed_from_ms set) */
    int64_t notice_ms;        /* interruption notice: recorded, or posted to the API; 0 if none */
    bool notice_recorded;     /* nodes.notice_ms is set (the notice was acted on) */
    int64_t replaces_node_id; /* a spot substitute: the on-demand node it replaces, else 0 */
    int64_t last_heartbeat_ms; /* its agent's last report, 0 if never */
    int64_t unreachable_ms;   /* marked unreachable at, 0 if not (cleared by a heartbeat) */
    enum tm_node_power power; /* owned pools' power saving (power.c); on elsewhere */
    int64_t power_since_ms;   /* its power changed at, 0 if never */
};

struct tm_snap_job {
    int64_t id;
    char team[TM_ID_MAX];
    char name[TM_ID_MAX];
    char gpu_model[TM_ID_MAX]; /* "" = any; "A|B" = either */
    int pool;                  /* index into cfg->pools or -1 */
    int gpus, gpu_milli, nodes;
    int64_t cpu_milli, memory_mib;
    enum tm_job_class klass;
    int priority;
    bool preemptible;
    int64_t estimate_ms;       /* 0 when unknown */
    int64_t sim_runtime_ms;    /* 0 for real work */
    enum tm_job_state state;   /* queued or running */
    int64_t submitted_ms, started_ms;
    int64_t hold_node_id;      /* node a reservation promised it, 0 if none */
    int64_t hold_start_ms;     /* the start first promised, 0 if none */
    int64_t node_id;           /* running: its (first) node, else 0 */
    char reason[256];          /* why it waits (state_reason), as last recorded */
    bool checkpointable;       /* can checkpoint on an interruption notice and resume */
    int attempts;              /* times it was started */
    int64_t progress_ms;       /* runtime saved by checkpoints: a resumed attempt runs the rest */
    int64_t deadline_ms;       /* 0: none */
    int64_t on_demand_from_ms; /* switched to on-demand for its deadline at, else 0 */
};

struct tm_snap_alloc {
    int64_t job_id, node_id;
    uint32_t gpu_mask;
    int gpu_milli;
    int64_t cpu_milli, memory_mib;
    bool loaned;               /* preemptible work on reserved capacity */
    int64_t claimed_ms;        /* its agent claimed the job's current attempt, 0 if not yet */
};

/* A finished job, for runtime estimates of similar ones. */
struct tm_snap_history {
    char team[TM_ID_MAX];
    char name[TM_ID_MAX];
    enum tm_job_class klass;
    int32_t gpu_milli;         /* GPUs x 1000 over all nodes, or the share */
    int64_t runtime_ms;
};

/* A monthly cap (budgets table). */
struct tm_snap_budget {
    bool org;                  /* org-wide, else one team's */
    char scope[TM_ID_MAX];
    int64_t cap_cents;
    bool hard;
    int warn_percent;
};

/* This month's ledger for one team ("" = idle time of the pools). */
struct tm_snap_spend {
    char period[8];            /* "YYYY-MM" */
    char team[TM_ID_MAX];
    int64_t cents;
};

/* A team's (or org's) GPU quota of one flavor (quotas table, 0029). */
struct tm_snap_quota {
    char team[TM_ID_MAX];
    char org[TM_ID_MAX];       /* "": none */
    char flavor[TM_ID_MAX];
    int64_t gpus;
    int64_t borrowing_limit;   /* -1: unlimited */
    int64_t lending_limit;     /* -1: all of the idle quota */
    double weight;
};

/* A voluntary disruption (idle release by the planner, move, substitution)
 * of a pool's node, from the decisions of about the last day: the pool's
 * disruption budget counts those within its disruption_interval. */
struct tm_snap_disruption {
    int pool;                  /* index into cfg->pools, -1 if it left the config */
    int64_t at_ms;
};

/* One GPU's samples over the idle window (agent.* / idle_gpu.*): the
 * newest sample overall is the window's end (snapshot.samples_end_ms). */
struct tm_snap_gpu_use {
    int64_t node_id;
    int gpu_index;
    double max_util;           /* highest utilisation in the window */
    double mean_util;
    int64_t first_ms;          /* oldest sample read (up to 2 windows back) */
    int64_t nsamples;          /* in the window */
};

/* A node of a pool that runs a real agent, given up on (marked
 * unreachable) without ever sending a heartbeat: a launch that never
 * enrolled.  The snapshot holds those newer than the newest node of their
 * pool that did heartbeat, live or ended, newest first per pool (a bounded
 * number per pool): the pool's current run of them (no_show.c). */
struct tm_snap_no_show {
    int pool;                  /* index into cfg->pools, -1 if it left the config */
    int64_t node_id;
    int64_t requested_ms;
    int64_t given_up_ms;       /* nodes.unreachable_ms */
};

struct tm_snapshot {
    int64_t epoch;
    struct tm_snap_node *nodes;      /* sorted by id */
    size_t nnodes;
    struct tm_snap_job *jobs;
    size_t njobs;
    struct tm_snap_alloc *allocs;
    size_t nallocs;
    struct tm_snap_history *history; /* oldest first */
    size_t nhistory;
    struct tm_snap_budget *budgets;
    size_t nbudgets;
    struct tm_snap_spend *spend;
    size_t nspend;
    struct tm_snap_disruption *disruptions;
    size_t ndisruptions;
    struct tm_snap_gpu_use *gpu_use;  /* sorted by (node_id, gpu_index) */
    size_t ngpu_use;
    int64_t samples_end_ms;           /* the newest GPU sample, 0 when none */
    struct tm_snap_no_show *no_shows; /* by pool, newest first */
    size_t nno_shows;
    struct tm_snap_quota *quotas;     /* by team, flavor */
    size_t nquotas;
};

/* What one provider listed this pass. */
struct tm_observed {
    const char *provider;      /* provider name as in the config */
    bool complete;             /* a full listing was seen (all pages, no error) */
    const struct tm_instance *instances;
    size_t n;
};

struct tm_rc_plan_launch {
    int64_t node_id;           /* 0 for a node requested by this very plan */
    char token[TM_ID_MAX];
    int pool;
    char instance_type[TM_ID_MAX];
    char zone[TM_ID_MAX];
    enum tm_capacity_type capacity;
    /* A gang's set: the stem its members' tokens share (tm_launch_set_key),
     * "" for a single node.  Launches with one stem go in one call. */
    char set[TM_ID_MAX];
};

struct tm_rc_plan_terminate {
    int provider;              /* index into cfg->providers */
    int64_t node_id;           /* 0 for an orphan */
    char instance_id[TM_ID_MAX];
};

/* Power saving of owned pools (power.c, docs/owned.md "Power saving"):
 * what the daemon does after the plan commits (controller/daemon/power.c). */
enum tm_power_op_kind {
    TM_POWER_OP_SUSPEND, /* on -> suspending, run suspend_command */
    TM_POWER_OP_RESUME,  /* suspended -> resuming, run resume_command */
    TM_POWER_OP_AWAKE,   /* resuming -> on: its agent heartbeat again */
    TM_POWER_OP_TIMEOUT, /* resuming -> on and unreachable: past resume_timeout */
    TM_POWER_OP_STUCK,   /* suspending -> on: no command runs for it any more */
};

struct tm_power_op {
    int64_t node_id;
    int pool;                  /* index into cfg->pools */
    enum tm_power_op_kind kind;
    int64_t job_id;            /* RESUME: the waiting job it is for */
    char reason[256];
};

/* A node whose power command the daemon runs now (running) or that failed
 * lately (no new command before until_ms). */
struct tm_power_hold {
    int64_t node_id;
    bool running;
    int64_t until_ms;
};

struct tm_rc_plan {
    cJSON *actions;            /* array for tarmac_apply's plan->'actions' */
    struct tm_rc_plan_launch *launches;
    size_t nlaunches;
    struct tm_rc_plan_terminate *terminates;
    size_t nterminates;
    /* Counters for the log line of each pass. */
    unsigned placed, waiting, reserved, preempted, requested, ready, released, gone, orphans;
    unsigned budget_refused;
    unsigned noticed, checkpointed, requeued; /* spot notices acted on, jobs moved off nodes */
    /* The planner's other actions (reconcile/moves.c). */
    unsigned drained, moved, substituted, switched, refused;
    unsigned unreachable, stale_requeued, stale_terminated; /* staleness.c */
    unsigned stale_fenced;                                  /* staleness.c: fence ops */
    unsigned silence_held;     /* silent nodes spared by the mass-silence guard (staleness.c) */
    unsigned gpu_idle;                                      /* idle.c */
    unsigned reclaimed;        /* borrowed jobs stopped for a team's quota (quotas.c) */
    /* Each quota with what its team uses, borrows and lends after this
     * pass's placements, and the overcommit line: the JSON document of
     * GET /v1/quotas's "usage" and /metrics (quotas.c); NULL when no
     * quota is set.  Freed with the plan. */
    char *quota_view;
    /* Power changes to make after the plan commits (power.c). */
    struct tm_power_op *power;
    size_t npower;
};

/* One config pool's demand forecast one boot ahead, in GPUs (controller/
 * forecast.c, kept by the controller across ticks).  The planner launches
 * ahead of the queue for `expected` and keeps idle nodes for `upper`
 * (hysteresis); negative: no forecast yet. */
struct tm_pool_forecast {
    double expected_gpus;
    double upper_gpus;
};

/* Capacity the cloud recently refused (type, zone and capacity type),
 * remembered by the caller until until_ms: the planner falls back to another
 * zone, then another type, then on-demand for preemptible work where the
 * pool allows it. */
struct tm_live_shortage {
    char provider[TM_ID_MAX];     /* config provider name; "": any cloud */
    char instance_type[TM_ID_MAX];
    char zone[TM_ID_MAX];
    bool spot;
    int64_t until_ms;
};

struct tm_reconcile_input {
    const struct tm_config *cfg;
    const struct tm_snapshot *snap;
    const struct tm_observed *observed; /* one per provider, same order as cfg */
    size_t nobserved;
    int64_t now_ms;
    enum tm_sched_policy policy;
    /* State the planner is given, kept outside the pure pass (all optional,
     * read only here). */
    const struct tm_pool_forecast *forecast;   /* cfg->npools entries, or NULL */
    const struct tm_live_shortage *shortages;
    size_t nshortages;
    /* Per config pool: its nodes run a real node agent (not the sim
     * agent), so a silent one goes stale (staleness.c).  NULL: none do. */
    const bool *pool_real_agent;
    /* Since when the leader could hear heartbeats without a break: the
     * latest of its leadership start and the end of its last spell of
     * deafness (database lost, a failed read, a stalled loop; the daemon
     * keeps it).  A node's silence is
     * counted from this at the earliest: silence the controller could
     * not hear is not held against the nodes.  0: always could. */
    int64_t hearing_since_ms;
    /* Power commands running or backing off (controller/daemon/power.c);
     * none: NULL, 0. */
    const struct tm_power_hold *power_holds;
    size_t npower_holds;
};

/* The config pool a queued job is routed to (as the planner routes it),
 * or -1 when none accepts it. */
int tm_reconcile_job_pool(const struct tm_config *cfg, const struct tm_snap_job *j);

/* Whether preemptible work is routed to config pool pi: a spot or
 * spot_then_on_demand pool, or an on_demand pool whose GPU model has
 * neither (tm_reconcile_job_pool sends preemptible work to those first).
 * consolidate_restart acts on preemptible jobs only, so on a pool where
 * this is false it does nothing (the daemon says so once at start). */
bool tm_reconcile_pool_gets_preemptible(const struct tm_config *cfg, size_t pi);

/* GPUs wanted per config pool now: running jobs on its nodes plus queued
 * jobs routed to it (as the planner routes them), in GPUs; out has
 * cfg->npools entries.  The controller feeds its forecasters with it. */
void tm_reconcile_pool_demand(const struct tm_config *cfg, const struct tm_snapshot *snap,
                              double *out);

/* Where a node's silence is counted from (tm_reconcile_silence). */
enum tm_silence_from {
    TM_SILENCE_FROM_HEARTBEAT,  /* its last heartbeat */
    TM_SILENCE_FROM_REQUEST,    /* never heard: its request plus agent.boot_allowance */
    TM_SILENCE_FROM_HEARING,    /* the controller could hear again (hearing_since_ms) */
};

/* How long node n's agent has been silent at now_ms, counting only while
 * the controller could hear: from the latest of its last heartbeat (or,
 * before the first, its request plus agent.boot_allowance) and
 * hearing_since_ms (0: no limit).  *ret_from and *ret_from_ms (either may
 * be NULL) say which and when (staleness.c). */
int64_t tm_reconcile_silence(const struct tm_config *cfg, const struct tm_snap_node *n,
                             int64_t hearing_since_ms, int64_t now_ms, enum tm_silence_from *ret_from,
                             int64_t *ret_from_ms);
int64_t tm_reconcile_silent_ms(const struct tm_config *cfg, const struct tm_snap_node *n,
                               int64_t hearing_since_ms, int64_t now_ms);

/* Many nodes of one provider silent at once (staleness.c): among its
 * watched nodes (pools with a real agent, booting, ready or draining) that
 * have sent a heartbeat, how many are past agent.unreachable_after, and
 * whether that is at least agent.mass_silence_min_nodes and
 * agent.mass_silence_share of them (held: none is marked unreachable,
 * requeued or terminated for silence). */
struct tm_mass_silence {
    int silent, heard;
    int64_t since_ms;          /* the earliest silence counted among the silent, 0 if none */
    bool held;
};
/* Fill out[0..cfg->nproviders).  skip (per snapshot node, may be NULL):
 * nodes leaving this pass, left out. */
void tm_reconcile_mass_silence(const struct tm_config *cfg, const struct tm_snapshot *snap,
                               const bool *pool_real_agent, const bool *skip, int64_t hearing_since_ms,
                               int64_t now_ms, struct tm_mass_silence *out);

/* A pool's run of launched nodes that never enrolled, and the backoff it
 * puts on the pool's next launch (no_show.c): after `streak` such nodes
 * in a row, no launch before the newest was given up on plus
 * agent.no_show_backoff x 2^(streak-1), at most agent.no_show_backoff_max.
 * A node of the pool that heartbeats ends the run. */
struct tm_no_show_hold {
    int streak;                /* 0: none, no hold */
    int64_t last_node_id;      /* the newest of them */
    int64_t last_given_up_ms;
    int64_t first_given_up_ms; /* the oldest of them the snapshot holds */
    int64_t delay_ms;          /* the backoff for this streak */
    int64_t until_ms;          /* no launch before this (0 when streak is 0) */
};
void tm_reconcile_no_show(const struct tm_config *cfg, const struct tm_snapshot *snap, int pool,
                          struct tm_no_show_hold *out);

/* A running job whose every allocated GPU stayed below
 * idle_gpu.threshold for the whole idle_gpu.window (the samples cover it
 * and the job ran through it), the window ending at the newest sample. */
struct tm_idle_job {
    int64_t job_id, node_id;   /* node: its first */
    int pool;                  /* config pool index of that node, -1 if none */
    int attempt;
    int64_t started_ms;
    int ngpus;
    double max_util, mean_util;
    int64_t window_ms;
};
/* Fill out[0..max) with the idle jobs; returns how many. */
size_t tm_reconcile_idle_jobs(const struct tm_config *cfg, const struct tm_snapshot *s,
                              struct tm_idle_job *out, size_t max);

/* Team quotas (quotas.c, docs/quotas.md).  A quota's flavor names config
 * pools: a pool's flavor is its pool group when it has one, else its GPU
 * model, so every pool is under exactly one flavor. */
const char *tm_reconcile_pool_flavor(const struct tm_config *cfg, size_t pi);
/* Check a whole set of quota rows against the configuration's flavors with
 * the scheduler's own rules (tm_quota_build): 0, or TM_EINVAL with err
 * naming the row and field ("quotas[0].gpus: ..."), or TM_ENOMEM. */
int tm_reconcile_quota_check(const struct tm_config *cfg, const struct tm_quota_row *rows, size_t n,
                             char *err, size_t errlen);

/* Power saving's choice (power.c): the ops for the owned pools with a
 * suspend_command, in *ret_ops (malloc'd, *ret_n of them; NULL, 0 when
 * none).  job_waits (per snapshot job, NULL: every queued job) says which
 * queued jobs still wait after this pass's placements; node_placed (per
 * snapshot node, may be NULL) which nodes got work this pass.  0 or
 * TM_ENOMEM. */
int tm_reconcile_power(const struct tm_config *cfg, const struct tm_snapshot *snap, const bool *job_waits,
                       const bool *node_placed, const struct tm_power_hold *holds, size_t nholds,
                       int64_t now_ms, struct tm_power_op **ret_ops, size_t *ret_n);

/* Compute the plan.  *ret is filled only on success; release it with
 * tm_rc_plan_release().  Returns 0, TM_ENOMEM or TM_EINVAL. */
int tm_reconcile(const struct tm_reconcile_input *in, struct tm_rc_plan *ret);
void tm_rc_plan_release(struct tm_rc_plan *plan);

/* The launch token for the i-th node a pass at now requests in a pool:
 * unique per cluster as long as passes are at least 1 ms apart. */
void tm_launch_token(const char *cluster, const char *pool, int64_t now_ms, unsigned i,
                     char out[TM_ID_MAX]);

#endif
