/*
 * controller/demand_history.h: the demand each pool saw lately, read back
 * from the jobs table, so that a new leader's forecasters start with their
 * daily and weekly seasons learned (tm_live_forecast_warm()) instead of
 * empty.  A job wanted its GPUs from submission until it finished: in the
 * pool of the node it ran on last, or, never started, in the pool the
 * planner routes it to.
 */
#ifndef TM_DEMAND_HISTORY_H
#define TM_DEMAND_HISTORY_H

#include <stddef.h>
#include <stdint.h>

#include "controller/live_forecast.h"
#include "controller/pg_uv.h"
#include "core/config.h"

/* status 0: spans[0..n) (valid only during the call); < 0: err says why. */
typedef void (*tm_demand_history_cb)(int status, const char *err,
                                     const struct tm_demand_span *spans, size_t n, void *data);

/* Ask for the spans of every job live now or finished at or after
 * since_ms.  0 (cb runs later, on the loop thread) or < 0 (cb never runs). */
int tm_demand_history_read(struct tm_pg_pool *pool, const struct tm_config *cfg, int64_t since_ms,
                           tm_demand_history_cb cb, void *data);

#endif
