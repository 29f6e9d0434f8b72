/*
 * controller/fleet/forecast.h: online demand forecasting, one series at a time.
 *
 * A series is the number of GPUs wanted (running plus queued jobs) in one
 * pool for one GPU model; the controller keeps one struct tm_forecast per
 * (pool, GPU model) and feeds it every sample.  The forecaster answers "how
 * many GPUs will be wanted `horizon` from now", as a mean and as an upper
 * quantile that the fleet planner provisions for.  The horizon that matters
 * is an instance's boot time plus one tick.
 *
 * Three kinds share one API, so they are scored the same way:
 *
 *   TM_FORECAST_TARMAC   double-seasonal additive Holt-Winters (a level, a
 *                        damped trend, a daily and a weekly season) in the
 *                        error-correction form of Taylor (2003).  A bank of
 *                        smoothing-parameter sets runs side by side and the
 *                        one with the lowest recent one-step absolute error
 *                        (the errors Holt-Winters parameters are fitted on)
 *                        gives the mean at every horizon (parameters fitted
 *                        online).
 *                        The upper quantile is the mean plus a quantile of
 *                        the model's own recent horizon-step errors made
 *                        in the same volatility band (below), so the bound
 *                        is tight in quiet hours and wide in busy ones
 *                        while staying calibrated; or of all its recent
 *                        errors, whichever of the two has had the lower
 *                        running pinball loss at p->quantile.
 *   TM_FORECAST_NAIVE    the last value.
 *   TM_FORECAST_SEASONAL_NAIVE
 *                        the value one day before the target step (one
 *                        definition, whatever the series length): the last
 *                        value seen at or before that step (so one day
 *                        back also works when the step does not divide a
 *                        day, or samples are sparser than the step); the
 *                        last value while there is none (the first day).
 * The baselines' upper quantile is their point forecast plus the empirical
 * quantile of their own raw horizon-step errors over the same window, so
 * each model is judged with its own error distribution.
 *
 * Time.  Observations are resampled onto a fixed step (default one minute):
 * a step's value is the last observation inside it.  A step is learned from
 * when the first observation of a later step arrives; tm_forecast_predict()
 * already accounts for the open step's value exactly (level, trend, season
 * and parameter choice), while the error quantiles include errors up to the
 * last closed step.  Steps with no observation are missing: the model lets
 * its state run on without learning (the standard Holt-Winters treatment),
 * and no error is recorded for them.  Observations must not go back in
 * time (an earlier step than the open one is refused with TM_EINVAL).
 *
 * Short series.  The daily season is switched on once one day of steps
 * has passed since the first observation, starting from the first day's
 * bucket means (classical Holt-Winters initialisation), and the weekly
 * one once a week has, from the first week's: before that the model is
 * level plus trend, then level, trend and daily season.  Seasons are kept
 * at a coarse resolution (15-minute buckets for the daily season, hourly
 * for the weekly one, never finer than the step) and read by linear
 * interpolation, because a month of minutes is far too little to estimate
 * 10,080 separate weekly values.
 *
 * Error quantiles are conditional: the tarmac model keeps its errors per
 * volatility band (the rank of a fast EWMA of step-to-step changes among
 * its recent values), because GPU demand is flat most minutes and jumps in
 * busy stretches, and one distribution for all minutes would put the
 * upper bound at the mean in busy minutes too.
 *
 * Memory is O(season buckets x parameter sets + horizon x bands x window),
 * fixed at creation: about 1.3 MB with the defaults, at most about 115 MB
 * (horizon x window <= TM_FORECAST_CELLS_MAX).  Everything is
 * deterministic: no clock, no randomness, no globals, no I/O.
 */
#ifndef TM_FORECAST_H
#define TM_FORECAST_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define TM_FORECAST_HORIZON_MAX 240 /* steps */
#define TM_FORECAST_WINDOW_MAX 100000
#define TM_FORECAST_CELLS_MAX 1000000 /* horizon_steps x window */

enum tm_forecast_kind {
    TM_FORECAST_TARMAC,
    TM_FORECAST_NAIVE,
    TM_FORECAST_SEASONAL_NAIVE,
    TM_FORECAST_KIND_MAX,
};

struct tm_forecast_params {
    int64_t step_ms;       /* resampling step; 1 s .. 1 day */
    int32_t horizon_steps; /* longest horizon whose errors are tracked */
    int32_t window;        /* errors kept per horizon for the quantile */
    bool nonnegative;      /* clamp forecasts at 0 (demand cannot be negative) */
    double quantile;       /* the provisioning quantile: chooses between
                            * banded and pooled errors (see forecast.c) */
};

/* Defaults: one-minute step, 4 steps (180 s boot + 60 s tick), a window of
 * two days of errors, nonnegative, quantile 0.9. */
void tm_forecast_params_default(struct tm_forecast_params *p);

/* "tarmac", "naive", "seasonal-naive"; NULL for an unknown kind. */
const char *tm_forecast_kind_name(enum tm_forecast_kind kind);

struct tm_forecast;

/* Create a forecaster; the caller frees it with tm_forecast_free().
 * Returns 0, TM_EINVAL for parameters out of range (including horizon_steps
 * x window above TM_FORECAST_CELLS_MAX), or TM_ENOMEM; *ret is
 * written only on success. */
int tm_forecast_new(enum tm_forecast_kind kind, const struct tm_forecast_params *p,
                    struct tm_forecast **ret);

/* Free a forecaster; accepts NULL. */
void tm_forecast_free(struct tm_forecast *f);

/* Feed one observation at t_ms (any epoch; only differences matter, but
 * seasons are aligned on multiples of a day and a week from t = 0).
 * Returns 0, or TM_EINVAL for a non-finite value or a time before the open
 * step (nothing changes then). */
int tm_forecast_observe(struct tm_forecast *f, int64_t t_ms, double value);

/* Forecast the value at the step horizon_ms after the latest observation's
 * step (rounded up to whole steps, at least one, at most horizon_steps):
 * the mean and the `quantile` (0 < q < 1) upper bound.  Returns 0, or
 * TM_EINVAL before any observation or for a bad quantile; outputs are
 * written only on success. */
int tm_forecast_predict(const struct tm_forecast *f, int64_t horizon_ms, double quantile,
                        double *ret_mean, double *ret_upper);

/* Rolling-origin evaluation of one kind on a series, sorted by time.  Each
 * observation is fed in turn; after the last observation of each step the
 * model forecasts the step `horizon_ms` ahead, and that forecast is scored
 * against the target step's value (its last observation) if the target
 * step has one and lies at least warmup_ms after the first observation.
 *
 *   pinball   mean pinball loss of the upper forecast at `quantile`:
 *             q (y - u) if y >= u, else (1 - q) (u - y)
 *   mape      mean |y - mean| / |y|, in percent, over scored steps whose
 *             actual is not zero (zeros are skipped and counted)
 *   coverage  share of scored steps with y <= upper
 *
 * p->horizon_steps is raised to cover horizon_ms if needed, and
 * p->quantile is set to `quantile`.  Returns 0,
 * TM_EINVAL (bad arguments, unsorted times, nothing to score), or
 * TM_ENOMEM. */
struct tm_forecast_score {
    double pinball;
    double mape;
    double coverage;
    size_t scored;
    size_t mape_skipped;
};

int tm_forecast_evaluate(enum tm_forecast_kind kind, const struct tm_forecast_params *p,
                         const int64_t *t_ms, const double *values, size_t n,
                         int64_t horizon_ms, double quantile, int64_t warmup_ms,
                         struct tm_forecast_score *ret);

/*
 * Series files (controller/fleet/forecast_series.c; these read files).
 */

/* A time series: n samples sorted by time.  Release with
 * tm_forecast_series_release(). */
struct tm_forecast_series {
    int64_t *t_ms;
    double *v;
    size_t n, cap;
};

void tm_forecast_series_release(struct tm_forecast_series *s);

/* Read a CSV file with a header row: the time column holds seconds
 * (decimal) or "YYYY-MM-DD HH:MM:SS" (UTC assumed), and the value of a row
 * is the sum of the comma-separated value columns.  The reader is strict:
 * RFC 4180 quoting, every record as wide as the header, no empty values,
 * times never decreasing, records at most 64 KiB.  Returns 0, TM_EINVAL
 * with err = "FILE:LINE:COLUMN: what" (LINE from 1 = the header, COLUMN the
 * 1-based field number; column 0 when no field is at fault), -errno when
 * the file cannot be read, or TM_ENOMEM.  *ret is written only on success. */
int tm_forecast_load_csv(const char *path, const char *time_column, const char *value_columns,
                         struct tm_forecast_series *ret, char *err, size_t errlen);

/* Derive a demand series from an openb pod list: at each step start T, the
 * GPUs wanted by pods with creation_time <= T < deletion_time (running or
 * pending), a pod wanting num_gpu GPUs, or gpu_milli/1000 when num_gpu is 1.
 * The series runs from since_s (a negative value means the earliest
 * deletion_time: the file holds the pods alive in a window that starts
 * there, so earlier demand is undercounted) to the last deletion_time.
 * Errors as for tm_forecast_load_csv(). */
int tm_forecast_load_pods(const char *path, int64_t step_ms, int64_t since_s,
                          struct tm_forecast_series *ret, char *err, size_t errlen);

#endif
