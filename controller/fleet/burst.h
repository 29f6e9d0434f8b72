/*
 * controller/fleet/burst.h: the burst rule: whether a queued job that owned
 * capacity can hold waits for it or goes to a cloud now.
 *
 * A pure function of one job, the scheduler's projected start for it on
 * owned capacity, and the cloud's offer for a type that fits it; the live
 * planner and the elastic replay (replay/elastic_owned.c) call the same
 * function.  It reads no clock: the caller passes `now`.
 *
 * Rules (a pool group's `burst:` setting):
 *   never     owned capacity only, however long the wait
 *   after D   the constant-wait baseline: burst once the job has waited D
 *             (D = 0: every job that cannot start now bursts at once)
 *   cost      tarmac's: waiting costs its owner, buying costs dollars.
 *
 * The cost rule's principle.  Owned capacity is already paid for; a cloud
 * node is not.  Bursting buys the job's GPUs for its runtime and the boot:
 * gpus x (estimate + boot) x price per GPU-hour.  Waiting costs the job's
 * owner the delay: an hour of any job's waiting is worth `wait_value`
 * dollars (a parameter, the same for every job: a mean completion time
 * counts every job's wait alike; by default the on-demand price of one
 * GPU-hour).  Spending the waiting where it saves the most dollars per hour
 * waited (a knapsack's greedy order) gives each job a waiting budget
 *     budget = gpus x (estimate + boot) x price / wait_value,
 * its cloud bill in hours of waiting: the job waits while its projected
 * owned start, counted from its submission, stays within the budget, and
 * bursts now when it would not.  A job's budget grows with its size and
 * its runtime: large, long jobs are the ones whose cloud bill is large,
 * and a wait is a small part of their completion time; small, short jobs
 * burst as soon as owned capacity cannot take them.  At the default value
 * a 1-GPU job waits at most about its own runtime (a slowdown of 2), an
 * 8-GPU job eight times that.  A cheaper spot offer (preemptible work)
 * shortens the budget by the spot discount.  Two bounds override the
 * budget, whatever the prices: a projected owned start past the job's
 * deadline (start + estimate > deadline), or one that would leave it
 * waiting past the starvation bound (submit + starvation, less a boot so
 * that the burst still starts within it), bursts the job now.  A
 * projected start no later than a boot from now always waits: the cloud
 * cannot start it sooner.
 *
 * Preemptible work goes to spot when the cloud offers spot; everything
 * else to on-demand.
 */
#ifndef TM_BURST_H
#define TM_BURST_H

#include <stdbool.h>
#include <stdint.h>

/* owned_start_ms when owned capacity gives no projection (it cannot hold
 * the job, or the scheduler has no estimate) */
#define TM_BURST_NO_START INT64_MAX

enum tm_burst_rule {
    TM_BURST_NEVER,
    TM_BURST_AFTER,
    TM_BURST_COST,
};

enum tm_burst_choice {
    TM_BURST_WAIT,
    TM_BURST_SPOT,
    TM_BURST_ON_DEMAND,
};

struct tm_burst_params {
    enum tm_burst_rule rule;
    int64_t after_ms;      /* TM_BURST_AFTER: the constant wait, >= 0 */
    int64_t starvation_ms; /* no job waits past submit + this; <= 0: no bound */
    /* dollars an hour of one job's waiting is worth, whatever its size;
     * <= 0: the offer's on-demand price of one GPU-hour */
    double wait_value_per_hour;
};

struct tm_burst_job {
    int32_t gpus;          /* all its GPUs (per node x nodes), >= 1 */
    int64_t submit_ms;
    int64_t estimate_ms;   /* runtime estimate, > 0 */
    int64_t deadline_ms;   /* 0: none */
    bool preemptible;
};

/* The cloud's offer for a type that fits the job. */
struct tm_burst_offer {
    double on_demand_per_gpu_hour; /* dollars; <= 0: not offered */
    double spot_per_gpu_hour;      /* dollars; <= 0: not offered */
    int64_t boot_ms;               /* launch to ready */
};

struct tm_burst_decision {
    enum tm_burst_choice choice;
    int64_t owned_start_ms;        /* the projection it was decided on */
    double price_per_hour;         /* bursts: dollars an hour for all its GPUs; waits: 0 */
    /* e.g. "burst on-demand at $175.66/h: projected owned start in
     * 7200 s passes the waiting budget (3960 s from submission)" */
    char reason[384];
};

/* rule "cost", starvation 48 h (the scheduler's default bound), the
 * on-demand price as the value of waiting */
void tm_burst_params_default(struct tm_burst_params *p);

const char *tm_burst_rule_name(enum tm_burst_rule r);
const char *tm_burst_choice_name(enum tm_burst_choice c);

/* Decide for job j at now, given its projected start on owned capacity
 * (TM_BURST_NO_START: none) and the cloud's offer.  Always fills *d. */
void tm_burst_decide(const struct tm_burst_params *p, const struct tm_burst_job *j, int64_t now_ms,
                     int64_t owned_start_ms, const struct tm_burst_offer *o,
                     struct tm_burst_decision *d);

#endif
