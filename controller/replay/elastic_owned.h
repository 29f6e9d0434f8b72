/*
 * controller/replay/elastic_owned.h: the elastic replay with an owned fleet:
 * a team's own 8-GPU nodes, always present, never bought or released, and
 * one cloud type bought for the overflow, each job's choice between them
 * made by the burst rule (controller/fleet/burst.h) at every tick.
 *
 * Policies (the burst rule each stands for):
 *   owned-only     never: every job waits for owned capacity
 *   zero-wait      after 0: a job that cannot start now on owned capacity
 *                  goes to the cloud at once
 *   constant-wait  after burst_wait_ms
 *   tarmac         cost (burst.h), the value of waiting wait_value
 *
 * The model.  Owned capacity is owned_gpus / 8 nodes of 8 GPUs.  Jobs are
 * gangs of `nodes` nodes of `gpus` GPUs each (one node for most), placed
 * whole.  The owned scheduler is EASY backfill in submit order (the first
 * job that does not fit holds a reservation on the nodes that free up for
 * it soonest, from the running jobs' expected ends; later jobs start now if
 * they fit and leave the reservation alone), looking at most 500 queued
 * jobs deep, as batch schedulers bound their backfill.  The runtime
 * estimates are the scheduler's (controller/sched/estimate.h), learnt from
 * the jobs that end.  The projected owned start the burst rule reads is the
 * queue in submit order run forward over the owned GPUs as one pool
 * (running jobs ending at their expected ends, each queued job starting
 * when enough GPUs are free and holding them for its estimate); a job
 * ahead that bursts frees its share for those behind it in the same pass.
 * A burst job goes to bought nodes of the one cloud type (spot for
 * preemptible work when spot is on): to nodes with room, ready or booting,
 * best fit, else to new ones, which are ready after boot_ms.  A cloud node
 * with no job for idle_grace_ms is released (checked every tick).  Spot
 * interruptions are not modelled here.  Jobs do not move between owned and
 * cloud nodes once started.
 *
 * Figures: cloud_usd, what the bought nodes cost from launch to release;
 * owned_usd, owned_gpus x owned_cost x the span (first submission to the
 * last job's end), whether used or not; owned_utilisation, the GPU-hours
 * jobs ran on owned nodes over owned_gpus x the span; jct and wait from
 * submission (a burst job's wait includes the boot); starved, jobs that
 * waited past starvation_ms or never ran.
 */
#ifndef TM_ELASTIC_OWNED_H
#define TM_ELASTIC_OWNED_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "controller/fleet/prices.h"
#include "controller/replay/trace.h"

#define TM_OWNED_NODE_GPUS 8

enum tm_owned_policy {
    TM_OWNED_ONLY,
    TM_OWNED_ZERO_WAIT,
    TM_OWNED_CONSTANT_WAIT,
    TM_OWNED_TARMAC,
    TM_OWNED_POLICY_MAX,
};

const char *tm_owned_policy_name(enum tm_owned_policy p);
int tm_owned_policy_parse(const char *name);

struct tm_owned_config {
    enum tm_owned_policy policy;
    const struct tm_price_table *prices;
    int cloud_type;                 /* index into prices->types: the type bought */
    int32_t owned_gpus;             /* a multiple of TM_OWNED_NODE_GPUS, >= 8 */
    double owned_usd_per_gpu_hour;  /* charged whether used or not */
    int64_t burst_wait_ms;          /* constant-wait's wait */
    double wait_value_per_hour;     /* tarmac's cost rule (burst.h); <= 0: its default */
    int64_t starvation_ms;          /* the bound; <= 0: the scheduler's default */
    int64_t boot_ms, tick_ms, idle_grace_ms;
    bool spot;
    int64_t since_ms;               /* < 0: none */
    int64_t max_runtime_ms;         /* < 0: none */
    FILE *log;                      /* one line per burst; NULL: none */
};

struct tm_owned_stats {
    size_t jobs, dropped, unfinished;
    size_t burst_jobs, spot_bursts, starved, launches;
    double cloud_usd, owned_usd, owned_utilisation;
    double jct_mean_s, jct_p95_s, wait_mean_s;
    double owned_gpu_hours, cloud_gpu_hours, cloud_paid_gpu_hours;
    double gang_gpu_hours_share;    /* of the jobs' GPU-hours, gangs' (nodes > 1) */
    double span_h;
    double wall_s;
};

void tm_owned_config_default(struct tm_owned_config *c);

/* One replay of t's jobs; 0, TM_EINVAL (nothing to replay, a bad config:
 * no owned GPUs, a cloud type not of 8 GPUs) or TM_ENOMEM. */
int tm_owned_run(const struct tm_trace *t, const struct tm_owned_config *c, struct tm_owned_stats *ret);

#endif
