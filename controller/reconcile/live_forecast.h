/*
 * controller/reconcile/live_forecast.h: the live tick's demand forecasts, one per
 * config pool, kept across ticks on the loop thread.
 *
 * Each tick feeds every pool's forecaster (controller/fleet/forecast.c) with the
 * GPUs its running and queued jobs want (tm_reconcile_pool_demand) and
 * predicts one boot plus one tick ahead: the mean, for which the planner
 * launches ahead of the queue, and the upper quantile, for which it keeps
 * idle nodes (hysteresis).  The quantile is the config's
 * forecast.quantile.
 *
 * State lives in memory.  So that a restarted or newly elected controller
 * does not plan from the queue alone for a week while its seasons fill, the
 * controller reads the last forecast.history of demand back from the jobs
 * table (tm_store_demand_history()) and replays it into a fresh set of
 * forecasters (tm_live_forecast_warm()), step by step, as the ticks of a
 * controller that had been running all along would have fed them.
 */
#ifndef TM_LIVE_FORECAST_H
#define TM_LIVE_FORECAST_H

#include <stdint.h>

#include "controller/reconcile/reconcile.h"
#include "core/config.h"

struct tm_live_forecast;

/* 0, or TM_ENOMEM; *ret written only on success. */
int tm_live_forecast_new(const struct tm_config *cfg, struct tm_live_forecast **ret);
void tm_live_forecast_free(struct tm_live_forecast *lf);

/* Observe the snapshot's demand at now_ms and predict; the result (one
 * entry per config pool, negative where no forecast exists yet) stays valid
 * until the next call or the free. */
/* A job's demand over time, for the warm start: milli-GPUs wanted in pool
 * from from_ms (submitted) until to_ms (finished; < 0: still queued or
 * running). */
struct tm_demand_span {
    int pool;                 /* index into cfg->pools */
    int64_t from_ms, to_ms;
    int64_t milli;
};

/* Feed a fresh lf (no update yet) the demand the spans add up to, one value
 * per forecast step from from_ms's step (or the first span's, when later:
 * nothing is known before the first job) up to, not including, to_ms's
 * step (the next update's).  Spans with a pool out of range are skipped.  Pure
 * and deterministic; safe off the loop thread while nothing else touches
 * lf.  Returns the number of steps fed, TM_EINVAL (to_ms < from_ms or lf
 * already updated) or TM_ENOMEM. */
long tm_live_forecast_warm(struct tm_live_forecast *lf, const struct tm_demand_span *spans,
                           size_t n, int64_t from_ms, int64_t to_ms);

const struct tm_pool_forecast *tm_live_forecast_update(struct tm_live_forecast *lf,
                                                       const struct tm_snapshot *snap,
                                                       int64_t now_ms);

#endif
