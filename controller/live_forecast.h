/*
 * controller/live_forecast.h: the live tick's demand forecasts, one per
 * config pool, kept across ticks on the loop thread.
 *
 * Each tick feeds every pool's forecaster (controller/forecast.c) with the
 * GPUs its running and queued jobs want (tm_reconcile_pool_demand) and
 * predicts one boot plus one tick ahead: the mean, for which the planner
 * launches ahead of the queue, and the upper quantile, for which it keeps
 * idle nodes (hysteresis).  State lives in memory only: a restarted or
 * newly elected controller starts with empty forecasters and plans from the
 * queue alone until they have seen a step.
 */
#ifndef TM_LIVE_FORECAST_H
#define TM_LIVE_FORECAST_H

#include <stdint.h>

#include "controller/reconcile.h"
#include "core/config.h"

struct tm_live_forecast;

/* 0, or TM_ENOMEM; *ret written only on success. */
int tm_live_forecast_new(const struct tm_config *cfg, struct tm_live_forecast **ret);
void tm_live_forecast_free(struct tm_live_forecast *lf);

/* Observe the snapshot's demand at now_ms and predict; the result (one
 * entry per config pool, negative where no forecast exists yet) stays valid
 * until the next call or the free. */
const struct tm_pool_forecast *tm_live_forecast_update(struct tm_live_forecast *lf,
                                                       const struct tm_snapshot *snap,
                                                       int64_t now_ms);

#endif
