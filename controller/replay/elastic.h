/*
 * controller/replay/elastic.h: elastic replay: the openb jobs through a simulated
 * cloud (providers/sim/simcloud.h, virtual time) whose fleet is grown and
 * shrunk by one of four policies, with every dollar counted.
 *
 *   static    enough of the largest type for the trace's peak demand,
 *             launched before the first job, always on (on-demand)
 *   reactive  what common cluster autoscalers do: the planner with no
 *             forecast, no substitution and no consolidation: it launches
 *             the cheapest type that fits the waiting work (spot for
 *             preemptible work when spot is on) and releases a node after
 *             an idle grace (600 s)
 *   oracle    tarmac, told every job's true runtime at its arrival (the
 *             estimate is the runtime, and known: the oracle of docs/measuring.md)
 *   tarmac    the planner (controller/fleet/planner.h) with the forecaster
 *             (controller/fleet/forecast.h) one boot ahead, spot routing by
 *             expected loss, substitution and consolidation (moves of
 *             checkpointable work, and restarts of preemptible work that
 *             cannot checkpoint when the saving exceeds the work redone),
 *             draining of oversized nodes (drain_oversized), smallest
 *             nodes first
 *
 * Both elastic policies plan at every tick and also at once when a job
 * joins the queue (a submission or a requeue), as the controller does when
 * a submission's NOTIFY enqueues its pool: a job that needs a new node
 * waits one boot, not a boot plus the rest of a tick.  The planner sees
 * each job's CPU and memory as well as its GPUs, as the scheduler does.
 *
 * Jobs are placed by tm_sched_run(): tarmac with the live tick's policy
 * and parameters (tarmac's best fit, params.elastic with nodes ranked
 * smallest type first, then launch order, and align_ends for tasks whose
 * estimates come from their own earlier runs), acting on its evictions of
 * loaned preemptible work; static and reactive with EASY backfill's first
 * fit in launch order, as common schedulers do.  Node GPU model 0 is
 * on-demand capacity, 1 spot; a job's model mask says where it may run.
 *
 * Definitions (docs/measuring.md: CPU and memory count):
 *   lower bound  every job billed only for its own runtime x its dominant
 *                share (largest of its GPU, CPU and memory shares) of the
 *                cheapest type of the table that holds it, spot for
 *                preemptible work when spot is on, on-demand otherwise
 *                (tm_elastic_job_bound_usd())
 *   floor        at every instant of the no-wait demand (each job running
 *                from its submission for its runtime), the cheapest set of
 *                nodes of the table's sizes holding the moment's GPUs, CPU
 *                and memory, preemptible demand on spot when spot is on
 *                (tm_elastic_floor_rate_usd())
 * A month for budgets is 30 days from the trace's time 0.
 *
 * Spot hazards per (type, zone) (`hazards`, core/spot_hazards.h):
 * each spot launch of a type in a zone named by the table gets that row's
 * interruption hazard, and fails for want of capacity with probability
 * 1 - its availability (the simulated cloud's per-pool launch_failure,
 * drawn from the seed, the launch token and the time); the failure is
 * remembered as a planner shortage for 30 minutes, so the planner falls
 * back to the next zone, then to on-demand (planner.h).  Cells the table
 * does not name keep hazard_per_hour and always get capacity.  Types and
 * zones are matched by the price table's own names: the mapping from a
 * synthetic table to real traces is written in the hazards file (see
 * bench/prices/spot-hazards-8gpu-v100.yaml).  tarmac's planner launches
 * spot in the zone of lowest hazard with capacity; its rule that keeps
 * long non-checkpointable jobs off spot uses the mean hazard over the
 * spot cells.
 */
#ifndef TM_ELASTIC_H
#define TM_ELASTIC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "controller/fleet/prices.h"
#include "core/spot_hazards.h"
#include "controller/replay/trace.h"

enum tm_elastic_policy {
    TM_ELASTIC_STATIC,
    TM_ELASTIC_REACTIVE,
    TM_ELASTIC_TARMAC,
    /* tarmac told every job's true runtime at its arrival (the
     * oracle): the distance to it is what runtime prediction costs */
    TM_ELASTIC_ORACLE,
    TM_ELASTIC_POLICY_MAX,
};

const char *tm_elastic_policy_name(enum tm_elastic_policy p);
int tm_elastic_policy_parse(const char *name);

enum tm_elastic_ckpt {
    TM_CKPT_NONE,   /* no job can checkpoint (the trace does not say) */
    TM_CKPT_BE,     /* preemptible jobs can */
    TM_CKPT_ALL,
};

struct tm_elastic_config {
    enum tm_elastic_policy policy;
    const struct tm_price_table *prices;
    int64_t since_ms;         /* < 0: none */
    int64_t max_runtime_ms;   /* < 0: none */
    int64_t boot_ms;
    bool spot;
    double hazard_per_hour;
    const struct tm_spot_hazards *hazards; /* per (type, zone); NULL: hazard_per_hour everywhere */
    int64_t notice_ms;
    int copies;               /* >= 1 */
    int64_t tick_ms;
    int64_t idle_grace_ms;    /* reactive's grace; tarmac's is its own */
    enum tm_elastic_ckpt ckpt;
    double deadline_slack;    /* > 0: preemptible jobs get deadline submit + slack x runtime */
    bool consolidate_restart; /* tarmac, oracle: consolidation by restart (default true) */
    uint64_t seed;
    FILE *log;                /* decisions, one line each; NULL: none */
};

void tm_elastic_config_default(struct tm_elastic_config *c);

struct tm_elastic_stats {
    size_t jobs, dropped, unfinished;
    double cost_usd, lower_bound_usd, floor_usd;
    double useful_gpu_hours, paid_gpu_hours;
    double wait_mean_s, wait_p99_s, waited_longer_than_boot_share;
    size_t interruptions, launches, terminations, substitutions, moves, refusals;
    size_t drains;            /* nodes drained (no new work) by the planner */
    /* Consolidation by restart (TM_PLANNER_RESTART): nodes emptied, jobs
     * started over elsewhere, and the GPU-hours those jobs redo (their
     * attempt's work, counted here and not in lost_gpu_hours). */
    size_t restarts, restarted_jobs;
    double redone_gpu_hours;
    double lost_gpu_hours, be_gpu_hours;
    size_t deadlines, deadlines_missed;
    double budget_overshoot_cents;
    size_t peak_nodes;
    /* arrivals whose runtime estimate came from the same task's own
     * earlier runs (a task of the trace submitted again, as --copies
     * does), the estimates tarmac places by expected end */
    size_t known_estimates;
    /* running preemptible jobs evicted from a reserved hole they had on
     * loan, when its owner started (tarmac's scheduler policy) */
    size_t evictions;
    /* spot launches that found no capacity (hazards' availability), and
     * spot launches and interruptions per zone of the price table */
    size_t spot_shortages;
    size_t spot_launches_by_zone[TM_PRICES_ZONES_MAX];
    size_t interruptions_by_zone[TM_PRICES_ZONES_MAX];
    /* Where paid GPU-hours that did no work went: nodes booting, nodes
     * with no job (idle past a job's end, or waiting for a placement), and
     * free GPU room on nodes running jobs (packing). */
    double booting_gpu_hours, empty_gpu_hours, free_on_busy_gpu_hours;
    double wall_s;
};

/* The lower bound of one job (docs/measuring.md), dollars: its
 * runtime at its dominant share (the largest of its GPU, CPU and memory
 * shares) of the cheapest type of pr that holds it, on spot when `spot`.
 * 0 when no type holds it. */
double tm_elastic_job_bound_usd(const struct tm_price_table *pr, bool spot, int32_t gpu_milli,
                                int64_t cpu_milli, int64_t memory_mib, int64_t runtime_ms);

/* The floor's rate for one instant's demand in one pool, dollars per
 * hour: the cheapest set of pr's nodes (any number of each type) holding
 * the GPUs, the CPU and the memory, taken as the largest of the cheapest
 * sets for each resource alone (exact when one resource binds; never
 * above the cheapest set holding all three).  < 0 out of memory. */
double tm_elastic_floor_rate_usd(const struct tm_price_table *pr, bool spot, int32_t gpu_milli,
                                 int64_t cpu_milli, int64_t memory_mib);

/* One elastic replay of t's jobs.  0, TM_EINVAL (nothing to replay, bad
 * config) or TM_ENOMEM. */
int tm_elastic_run(const struct tm_trace *t, const struct tm_elastic_config *cfg,
                   struct tm_elastic_stats *ret);

#endif
