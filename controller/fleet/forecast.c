/*
 * controller/fleet/forecast.c: the online demand forecaster and its two
 * baselines (see forecast.h for the model and the scoring rules).
 *
 * Pure: no I/O, no clock, no globals.  All memory is allocated in
 * tm_forecast_new() and sized by the parameters.
 *
 * One file on purpose, although it is long: the seasons, the
 * parameter bank, the step update and the commit are one state machine
 * over struct tm_forecast, and splitting them would move that struct into
 * a shared header with several owners.  The two pieces that do not touch
 * it are small and serve only this file: the sorted error windows and
 * tm_forecast_evaluate() (which drives the public API
 * but shares the step arithmetic and the pinball loss with the model).
 */
#include "controller/fleet/forecast.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/err.h"

#define DAY_MS INT64_C(86400000)
#define WEEK_MS (7 * DAY_MS)
#define DAILY_BUCKET_MS (15 * INT64_C(60000))
#define WEEKLY_BUCKET_MS (60 * INT64_C(60000))

/*
 * Error quantiles are conditional on volatility: an EWMA of |y_t - y_t-1|
 * that forgets within minutes (VOL_RATE), ranked against its own recent
 * values.  On GPU demand most minutes change nothing and a few busy
 * stretches carry nearly all the error, so one error distribution for
 * every minute puts the upper bound at the mean in busy minutes as well as
 * quiet ones.  Each horizon keeps one error window per volatility band
 * (ranks below 50 %, 50-70, 70-80, 80-90, 90-95, above 95 %) and a pooled
 * one, used while a band holds fewer than BAND_MIN errors.
 */
#define VOL_RATE 0.3
#define NBAND 6
#define BAND_MIN 50
static const double band_edges[NBAND - 1] = {0.5, 0.7, 0.8, 0.9, 0.95};

/*
 * Whether the banded errors beat the pooled ones is itself checked online:
 * each horizon keeps an EWMA (half-life about six hours of minutes) of the
 * pinball loss, at the provisioning quantile, of the upper bound either
 * would have given, and predict() uses the lower.  Where banding buys
 * nothing (a series whose quiet and busy minutes err alike) the model
 * falls back to the pooled distribution rather than paying for thinner
 * samples.
 */
#define QSEL_RATE 0.002

/*
 * Parameter selection.  Each set keeps a running MAE of its one-step
 * errors: the error of its latest forecast of each step, made at the last
 * closed step (the innovation e of the error-correction form; after
 * missing steps, over the gap, up to the horizon).  The set with the lowest
 * gives the mean, at every horizon.  These are the errors parameters are
 * fitted on (Taylor 2003 minimises their squares), and they are the
 * first to tell a set that follows the series from one that lags it.
 *
 * Scoring the horizon-step errors would pick the wrong set on short
 * bursts.  A burst no longer than the horizon costs every set about the
 * same in H-step errors: no set saw it coming, and each pays its height
 * again when it ends.  Only the timing differs: the random walk pays the
 * end at once (H steps of the whole burst), a low-alpha set spreads it
 * over an hour while its level decays and keeps some in its season for
 * the next day.  A running MAE read in between favours whoever has not
 * paid yet, so 88 GPUs for 4 minutes after a quiet day make the
 * alpha = 0.05 set the choice, forecasting 18 GPUs a minute after the
 * burst, 9 after ten and 0.9 after an hour.  The one-step errors tell the
 * two apart while the burst lasts: the random walk is right from its
 * second minute, the smooth set wrong in every one.
 *
 * Weight of the newest error in the running MAE: a half-life of about six
 * hours of minutes, long enough not to flip on every burst of arrivals.
 */
#define MAE_RATE 0.002

/*
 * The parameter bank: (alpha, beta, gamma daily, gamma weekly, phi).  alpha
 * = 1 with no season is the random walk, so the bank can always fall back
 * to "the last value" on series that jump more than they drift; low alphas
 * let the seasons carry the forecast.  Damping phi = 0.98 per step makes a
 * trend fade within about an hour of minutes (a burst of arrivals is not a
 * trend); the undamped sets follow a real ramp exactly.  The gammas are
 * per season cycle: each step moves a bucket by gamma x (step / bucket
 * width), so a bucket learns at the same pace per day (per week) whatever
 * the step.
 */
static const double bank[][5] = {
    {1.00, 0.000, 0.00, 0.00, 0.98},
    {1.00, 0.020, 0.00, 0.00, 0.98},
    {1.00, 0.050, 0.00, 0.00, 1.00},
    {0.80, 0.000, 0.10, 0.10, 0.98},
    {0.50, 0.000, 0.20, 0.20, 0.98},
    {0.50, 0.010, 0.20, 0.20, 0.98},
    {0.50, 0.020, 0.20, 0.20, 1.00},
    {0.20, 0.000, 0.30, 0.30, 0.98},
    {0.20, 0.005, 0.30, 0.30, 0.98},
    {0.05, 0.000, 0.30, 0.30, 0.98},
    {0.05, 0.002, 0.30, 0.30, 0.98},
};
#define NCAND ((int)(sizeof(bank) / sizeof(bank[0])))

struct errwin {
    double *ring;   /* insertion order; slot head is the oldest when full */
    double *sorted; /* the same values, ascending */
    int32_t n, head;
};

struct cand {
    double level, trend;
    double *daily, *weekly;
    double mae;
};

/* What one step does to one parameter set: computed by step_compute(),
 * applied by commit() or only looked at by predict(). */
struct cand_next {
    double level, trend, e;
    int32_t di[2], wi[2];
    double dd[2], wd[2]; /* deltas to daily[di[k]], weekly[wi[k]] */
    double mae;
};

struct step_next {
    int64_t step;
    double y;
    double vol;
    int best;
    bool daily_on, weekly_on;
    struct cand_next c[NCAND];
};

struct tm_forecast {
    enum tm_forecast_kind kind;
    struct tm_forecast_params p;
    int32_t H, W;
    int64_t day_steps, week_steps;
    int32_t nbd, nbw;     /* season buckets */
    double bd_ms, bw_ms;  /* bucket widths */

    bool have_open, have_closed;
    int64_t first_step, open_step, last_step;
    double open_value, last_value;

    /* tarmac */
    struct cand cands[NCAND];
    double *seasons;      /* NCAND x (nbd + nbw) */
    double vol;
    struct errwin volwin; /* recent volatilities, to rank the current one */
    /* Seasons start from the first day's (week's) bucket means, as in
     * classical Holt-Winters initialisation, rather than from zero: with
     * gamma learning alone a weekly season would take months to appear. */
    bool daily_on, weekly_on;
    double *acc;          /* day sum, day count (nbd each), week sum, count per
                           * daily bucket (nbd each), per weekly bucket (nbw each) */
    double acc_sum7, acc_n7;

    /* seasonal-naive: the last day of values, slot step % day_steps */
    double *hist;
    int64_t *hist_step;

    /* Errors of the output, per horizon: forecasts made at origin for
     * origin + h, slot origin % (H + 1), with the volatility band at the
     * origin (-1: pooled only, the baselines). */
    double *out_mean;     /* (H + 1) x H */
    int32_t *out_band;    /* H + 1 */
    double *out_qb, *out_qp; /* (H + 1) x H: banded and pooled offsets at p.quantile */
    double *loss_b, *loss_p; /* H: their running pinball losses */
    int64_t *out_origin;  /* H + 1 */
    int32_t nwin;         /* windows per horizon: NBAND + 1 or 1; pooled last */
    struct errwin *win;   /* H x nwin */
};

static int64_t floordiv(int64_t a, int64_t b)
{
    int64_t q = a / b;

    if ((a % b != 0) && ((a < 0) != (b < 0)))
        q--;
    return q;
}

static int64_t floormod(int64_t a, int64_t b)
{
    return a - floordiv(a, b) * b;
}

void tm_forecast_params_default(struct tm_forecast_params *p)
{
    p->step_ms = 60000;
    p->horizon_steps = 4;
    p->window = 2880;
    p->nonnegative = true;
    p->quantile = 0.9;
}

const char *tm_forecast_kind_name(enum tm_forecast_kind kind)
{
    switch (kind) {
    case TM_FORECAST_TARMAC:
        return "tarmac";
    case TM_FORECAST_NAIVE:
        return "naive";
    case TM_FORECAST_SEASONAL_NAIVE:
        return "seasonal-naive";
    default:
        return NULL;
    }
}

/*
 * Error windows: a ring for age order and a sorted copy for quantiles.
 * Insert and evict are binary searches and a shift of the values between
 * the two positions: at most O(W) per step, tiny next to a minute of wall
 * time, and no shift at all when the new error equals the evicted one.
 */
static int32_t sorted_find(const double *a, int32_t n, double x)
{
    int32_t lo = 0, hi = n;

    while (lo < hi) {
        int32_t mid = lo + (hi - lo) / 2;
        if (a[mid] < x)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

static void win_push(struct errwin *w, int32_t cap, double x)
{
    int32_t i, p;

    if (w->n == cap) {
        /* Replace the oldest in place, moving only the values between its
         * slot and the new one's: on GPU demand most errors are equal (0),
         * so usually nothing moves at all. */
        double old = w->ring[w->head];
        w->ring[w->head] = x;
        w->head = (w->head + 1) % cap;
        i = sorted_find(w->sorted, w->n, old);
        p = sorted_find(w->sorted, w->n, x);
        if (p > i) {
            for (int32_t k = i; k < p - 1; k++)
                w->sorted[k] = w->sorted[k + 1];
            w->sorted[p - 1] = x;
        } else {
            for (int32_t k = i; k > p; k--)
                w->sorted[k] = w->sorted[k - 1];
            w->sorted[p] = x;
        }
        return;
    }
    w->ring[(w->head + w->n) % cap] = x;
    p = sorted_find(w->sorted, w->n, x);
    for (int32_t k = w->n; k > p; k--)
        w->sorted[k] = w->sorted[k - 1];
    w->sorted[p] = x;
    w->n++;
}

/* The empirical q-quantile (inverse of the empirical CDF), 0 if empty. */
static double win_quantile(const struct errwin *w, double q)
{
    int32_t k;

    if (w->n == 0)
        return 0.0;
    k = (int32_t)ceil(q * w->n) - 1;
    if (k < 0)
        k = 0;
    if (k >= w->n)
        k = w->n - 1;
    return w->sorted[k];
}

int tm_forecast_new(enum tm_forecast_kind kind, const struct tm_forecast_params *p,
                    struct tm_forecast **ret)
{
    struct tm_forecast *f = NULL;
    int r = TM_EINVAL;
    size_t H, W;

    if (kind < 0 || kind >= TM_FORECAST_KIND_MAX || !p || !ret)
        goto out;
    if (p->step_ms < 1000 || p->step_ms > DAY_MS || p->horizon_steps < 1 ||
        p->horizon_steps > TM_FORECAST_HORIZON_MAX || p->window < 1 ||
        p->window > TM_FORECAST_WINDOW_MAX || !(p->quantile > 0.0 && p->quantile < 1.0) ||
        (int64_t)p->horizon_steps * p->window > TM_FORECAST_CELLS_MAX)
        goto out;
    r = TM_ENOMEM;
    f = calloc(1, sizeof(*f));
    if (!f)
        goto out;
    f->kind = kind;
    f->p = *p;
    f->H = p->horizon_steps;
    f->W = p->window;
    H = (size_t)f->H;
    W = (size_t)f->W;
    f->day_steps = DAY_MS / p->step_ms;
    f->week_steps = WEEK_MS / p->step_ms;
    /* Buckets no finer than the step, and a whole number per season. */
    f->bd_ms = (double)(p->step_ms > DAILY_BUCKET_MS ? p->step_ms : DAILY_BUCKET_MS);
    f->nbd = (int32_t)(DAY_MS / (int64_t)f->bd_ms);
    f->bd_ms = (double)DAY_MS / f->nbd;
    f->bw_ms = (double)(p->step_ms > WEEKLY_BUCKET_MS ? p->step_ms : WEEKLY_BUCKET_MS);
    f->nbw = (int32_t)(WEEK_MS / (int64_t)f->bw_ms);
    f->bw_ms = (double)WEEK_MS / f->nbw;

    f->out_mean = calloc((H + 1) * H, sizeof(double));
    f->out_band = calloc(H + 1, sizeof(int32_t));
    f->out_qb = calloc((H + 1) * H, sizeof(double));
    f->out_qp = calloc((H + 1) * H, sizeof(double));
    f->loss_b = calloc(H, sizeof(double));
    f->loss_p = calloc(H, sizeof(double));
    f->out_origin = malloc((H + 1) * sizeof(int64_t));
    f->nwin = kind == TM_FORECAST_TARMAC ? NBAND + 1 : 1;
    f->win = calloc(H * (size_t)f->nwin, sizeof(*f->win));
    if (!f->out_mean || !f->out_band || !f->out_origin || !f->win || !f->out_qb || !f->out_qp ||
        !f->loss_b || !f->loss_p)
        goto out;
    for (size_t i = 0; i <= H; i++)
        f->out_origin[i] = INT64_MIN;
    for (size_t i = 0; i < H * (size_t)f->nwin; i++) {
        f->win[i].ring = malloc(W * sizeof(double));
        f->win[i].sorted = malloc(W * sizeof(double));
        if (!f->win[i].ring || !f->win[i].sorted)
            goto out;
    }
    if (kind == TM_FORECAST_TARMAC) {
        size_t per = (size_t)(f->nbd + f->nbw);
        f->seasons = calloc((size_t)NCAND * per, sizeof(double));
        f->acc = calloc(4 * (size_t)f->nbd + 2 * (size_t)f->nbw, sizeof(double));
        f->volwin.ring = malloc(W * sizeof(double));
        f->volwin.sorted = malloc(W * sizeof(double));
        if (!f->seasons || !f->volwin.ring || !f->volwin.sorted || !f->acc)
            goto out;
        for (int c = 0; c < NCAND; c++) {
            f->cands[c].daily = f->seasons + (size_t)c * per;
            f->cands[c].weekly = f->cands[c].daily + f->nbd;
        }
    } else if (kind == TM_FORECAST_SEASONAL_NAIVE) {
        f->hist = malloc((size_t)f->day_steps * sizeof(double));
        f->hist_step = malloc((size_t)f->day_steps * sizeof(int64_t));
        if (!f->hist || !f->hist_step)
            goto out;
        for (int64_t i = 0; i < f->day_steps; i++)
            f->hist_step[i] = INT64_MIN;
    }
    *ret = f;
    f = NULL;
    r = 0;
out:
    tm_forecast_free(f);
    return r;
}

void tm_forecast_free(struct tm_forecast *f)
{
    if (!f)
        return;
    if (f->win)
        for (size_t i = 0; i < (size_t)f->H * (size_t)f->nwin; i++) {
            free(f->win[i].ring);
            free(f->win[i].sorted);
        }
    free(f->win);
    free(f->acc);
    free(f->volwin.ring);
    free(f->volwin.sorted);
    free(f->out_mean);
    free(f->out_band);
    free(f->out_qb);
    free(f->out_qp);
    free(f->loss_b);
    free(f->loss_p);
    free(f->out_origin);
    free(f->seasons);
    free(f->hist);
    free(f->hist_step);
    free(f);
}

/* Interpolation in a season of nb buckets of width bms: the two buckets
 * around the step's start and the weight of the second. */
static void season_pos(int64_t step, int64_t step_ms, int64_t period_ms, double bms, int32_t nb,
                       int32_t ret_i[2], double *ret_frac)
{
    double x = (double)floormod(step * step_ms, period_ms) / bms - 0.5;
    double fl = floor(x);
    int32_t i0 = (int32_t)fl;

    *ret_frac = x - fl;
    i0 = (int32_t)(((i0 % nb) + nb) % nb);
    ret_i[0] = i0;
    ret_i[1] = (i0 + 1) % nb;
}

static double season_at(const struct tm_forecast *f, const double *s, int32_t nb, double bms,
                        int64_t period_ms, int64_t step, const int32_t di[2], const double dd[2])
{
    int32_t i[2];
    double fr, v[2];

    season_pos(step, f->p.step_ms, period_ms, bms, nb, i, &fr);
    for (int k = 0; k < 2; k++) {
        v[k] = s[i[k]];
        /* Pending deltas of the step being looked at (predict()). */
        if (di)
            for (int m = 0; m < 2; m++)
                if (di[m] == i[k])
                    v[k] += dd[m];
    }
    return (1.0 - fr) * v[0] + fr * v[1];
}

/* Sum of phi^i for i = 1..n. */
static double damp_sum(double phi, int64_t n)
{
    if (n <= 0)
        return 0.0;
    if (phi == 1.0)
        return (double)n;
    return phi * (1.0 - pow(phi, (double)n)) / (1.0 - phi);
}

/* Forecast of parameter set c for step `target`, made at `origin`: the
 * level and trend come from nx (the state after the step nx describes),
 * the seasons from f plus nx's pending deltas (zero once committed). */
static double cand_forecast(const struct tm_forecast *f, const struct step_next *nx, int c,
                            int64_t origin, int64_t target)
{
    const struct cand *cd = &f->cands[c];
    const struct cand_next *cn = &nx->c[c];
    double v = cn->level + cn->trend * damp_sum(bank[c][4], target - origin);

    if (nx->daily_on)
        v += season_at(f, cd->daily, f->nbd, f->bd_ms, DAY_MS, target, cn->di, cn->dd);
    if (nx->weekly_on)
        v += season_at(f, cd->weekly, f->nbw, f->bw_ms, WEEK_MS, target, cn->wi, cn->wd);
    return v;
}

/*
 * What committing value y at step j would do, written to nx and not to f.
 * Missing steps between the last closed step and j let the state run on
 * (level follows the damped trend, nothing is learned).
 */
static void step_compute(const struct tm_forecast *f, int64_t j, double y, struct step_next *nx)
{
    int64_t gap = f->have_closed ? j - f->last_step - 1 : 0;
    double best_mae = INFINITY;

    nx->step = j;
    nx->y = y;
    nx->best = 0;
    nx->vol = f->vol;
    if (f->kind != TM_FORECAST_TARMAC)
        return;
    if (f->have_closed)
        nx->vol += VOL_RATE * (fabs(y - f->last_value) - nx->vol);
    nx->daily_on = f->daily_on;
    nx->weekly_on = f->weekly_on;
    for (int c = 0; c < NCAND; c++) {
        const struct cand *cd = &f->cands[c];
        struct cand_next *cn = &nx->c[c];
        double alpha = bank[c][0], beta = bank[c][1];
        double gd = bank[c][2] * (double)f->p.step_ms / f->bd_ms;
        double gw = bank[c][3] * (double)f->p.step_ms / f->bw_ms;
        double phi = bank[c][4];
        double l0, b0, sd = 0.0, sw = 0.0, fr;

        memset(cn, 0, sizeof(*cn));
        cn->di[0] = cn->di[1] = cn->wi[0] = cn->wi[1] = -1;
        if (!f->have_closed) {
            /* First step: the level is the value. */
            cn->level = y;
            cn->mae = cd->mae;
            continue;
        }
        l0 = cd->level + cd->trend * damp_sum(phi, gap);
        b0 = cd->trend * pow(phi, (double)gap);
        if (nx->daily_on) {
            season_pos(j, f->p.step_ms, DAY_MS, f->bd_ms, f->nbd, cn->di, &fr);
            sd = (1.0 - fr) * cd->daily[cn->di[0]] + fr * cd->daily[cn->di[1]];
            cn->dd[0] = (1.0 - fr);
            cn->dd[1] = fr;
        }
        if (nx->weekly_on) {
            season_pos(j, f->p.step_ms, WEEK_MS, f->bw_ms, f->nbw, cn->wi, &fr);
            sw = (1.0 - fr) * cd->weekly[cn->wi[0]] + fr * cd->weekly[cn->wi[1]];
            cn->wd[0] = (1.0 - fr);
            cn->wd[1] = fr;
        }
        cn->e = y - (l0 + phi * b0 + sd + sw);
        cn->level = l0 + phi * b0 + alpha * cn->e;
        cn->trend = phi * b0 + beta * cn->e;
        for (int k = 0; k < 2; k++) {
            cn->dd[k] *= gd * cn->e;
            cn->wd[k] *= gw * cn->e;
        }
        /* e is the error of this set's forecast of j made at the last
         * closed step (see MAE_RATE); beyond the horizon it was never
         * made. */
        cn->mae = cd->mae;
        if (gap < f->H)
            cn->mae += MAE_RATE * (fabs(cn->e) - cn->mae);
        /* Strictly lower wins, so ties go to the earlier (simpler) set. */
        if (cn->mae < best_mae) {
            best_mae = cn->mae;
            nx->best = c;
        }
    }
}

/* The volatility band after nx: the rank of its volatility among the
 * recent ones (share strictly below it); -1 for the baselines. */
static int32_t next_band(const struct tm_forecast *f, const struct step_next *nx)
{
    int32_t b = 0;
    double rank;

    if (f->kind != TM_FORECAST_TARMAC)
        return -1;
    if (f->volwin.n == 0)
        return 0;
    rank = (double)sorted_find(f->volwin.sorted, f->volwin.n, nx->vol) / f->volwin.n;
    while (b < NBAND - 1 && rank >= band_edges[b])
        b++;
    return b;
}

/* The error window for horizon h and band b: the band's own once it has
 * BAND_MIN errors, else the pooled one. */
static const struct errwin *error_window(const struct tm_forecast *f, int32_t h, int32_t band)
{
    const struct errwin *w = &f->win[(size_t)(h - 1) * (size_t)f->nwin];

    if (band >= 0 && w[band].n >= BAND_MIN)
        return &w[band];
    return &w[f->nwin - 1];
}

/* The pooled error window for horizon h. */
static const struct errwin *pooled_window(const struct tm_forecast *f, int32_t h)
{
    return &f->win[(size_t)h * (size_t)f->nwin - 1];
}

static double pinball(double y, double u, double q)
{
    return y >= u ? q * (y - u) : (1.0 - q) * (u - y);
}

static double clamp_upper(const struct tm_forecast *f, double u)
{
    return f->p.nonnegative && u < 0.0 ? 0.0 : u;
}

/* The mean forecast for step j + h from the state after nx. */
static double next_mean(const struct tm_forecast *f, const struct step_next *nx, int32_t h)
{
    int64_t j = nx->step, target = j + h;
    double m = nx->y;

    switch (f->kind) {
    case TM_FORECAST_TARMAC:
        m = cand_forecast(f, nx, nx->best, j, target);
        break;
    case TM_FORECAST_NAIVE:
        break;
    case TM_FORECAST_SEASONAL_NAIVE: {
        int64_t lag = target - f->day_steps;
        if (lag < j) {
            int64_t slot = floormod(lag, f->day_steps);
            if (f->hist_step[slot] == lag)
                m = f->hist[slot];
        }
        break;
    }
    default:
        break;
    }
    if (f->p.nonnegative && m < 0.0)
        m = 0.0;
    return m;
}

/* The bucket holding step j's start (no interpolation). */
static int32_t bucket_of(const struct tm_forecast *f, int64_t j, int64_t period_ms, double bms)
{
    int32_t b = (int32_t)((double)floormod(j * f->p.step_ms, period_ms) / bms);
    int32_t nb = period_ms == DAY_MS ? f->nbd : f->nbw;

    return b < nb ? b : nb - 1;
}

/*
 * Accumulate step j for the initial seasons, and switch a season on once
 * a whole day (week) of steps has passed since the first: the daily
 * season from the first day's bucket means less their mean, the weekly
 * one from the first week's bucket means less the week's mean and the
 * week's daily profile at that time of day.  Each parameter set's level
 * gives up the season's value at j, which it had been carrying.
 */
static void seasons_learn_start(struct tm_forecast *f, int64_t j, double y)
{
    double *dsum = f->acc, *dcnt = dsum + f->nbd, *d7sum = dcnt + f->nbd, *d7cnt = d7sum + f->nbd;
    double *wsum = d7cnt + f->nbd, *wcnt = wsum + f->nbw;
    int64_t age = j - f->first_step + 1;
    int32_t di[2], wi[2];
    double fr;

    if (f->weekly_on)
        return;
    if (!f->daily_on) {
        int32_t b = bucket_of(f, j, DAY_MS, f->bd_ms);
        dsum[b] += y;
        dcnt[b] += 1.0;
    }
    {
        int32_t b = bucket_of(f, j, DAY_MS, f->bd_ms), w = bucket_of(f, j, WEEK_MS, f->bw_ms);
        d7sum[b] += y;
        d7cnt[b] += 1.0;
        wsum[w] += y;
        wcnt[w] += 1.0;
        f->acc_sum7 += y;
        f->acc_n7 += 1.0;
    }
    if (!f->daily_on && age >= f->day_steps) {
        double mean = 0.0, n = 0.0;
        for (int32_t b = 0; b < f->nbd; b++) {
            mean += dsum[b];
            n += dcnt[b];
        }
        mean /= n;
        season_pos(j, f->p.step_ms, DAY_MS, f->bd_ms, f->nbd, di, &fr);
        for (int c = 0; c < NCAND; c++) {
            struct cand *cd = &f->cands[c];
            if (bank[c][2] == 0.0)
                continue; /* this set has no daily season */
            for (int32_t b = 0; b < f->nbd; b++)
                cd->daily[b] = dcnt[b] > 0.0 ? dsum[b] / dcnt[b] - mean : 0.0;
            cd->level -= (1.0 - fr) * cd->daily[di[0]] + fr * cd->daily[di[1]];
        }
        f->daily_on = true;
    }
    if (age >= f->week_steps) {
        double mean7 = f->acc_sum7 / f->acc_n7;
        season_pos(j, f->p.step_ms, WEEK_MS, f->bw_ms, f->nbw, wi, &fr);
        for (int32_t w = 0; w < f->nbw; w++) {
            /* The week's daily profile over this bucket's hours. */
            double tod0 = fmod(w * f->bw_ms, (double)DAY_MS), prof = 0.0, n = 0.0, v = 0.0;
            for (int32_t b = 0; b < f->nbd; b++) {
                double center = (b + 0.5) * f->bd_ms;
                if (center >= tod0 && center < tod0 + f->bw_ms && d7cnt[b] > 0.0) {
                    prof += d7sum[b] / d7cnt[b] - mean7;
                    n += 1.0;
                }
            }
            if (n > 0.0)
                prof /= n;
            if (wcnt[w] > 0.0)
                v = wsum[w] / wcnt[w] - mean7 - prof;
            wsum[w] = v; /* reused as the profile; accumulation is over */
        }
        for (int c = 0; c < NCAND; c++) {
            struct cand *cd = &f->cands[c];
            if (bank[c][3] == 0.0)
                continue;
            memcpy(cd->weekly, wsum, (size_t)f->nbw * sizeof(double));
            cd->level -= (1.0 - fr) * cd->weekly[wi[0]] + fr * cd->weekly[wi[1]];
        }
        f->weekly_on = true;
    }
}

static void commit(struct tm_forecast *f, int64_t j, double y)
{
    struct step_next nx;
    size_t H = (size_t)f->H;
    int64_t oslot;
    int32_t band;

    step_compute(f, j, y, &nx);

    /* Errors of the forecasts made h steps ago for this step. */
    for (int32_t h = 1; h <= f->H; h++) {
        int64_t origin = j - h;
        size_t s = (size_t)floormod(origin, f->H + 1);
        if (f->out_origin[s] == origin) {
            struct errwin *w = &f->win[(size_t)(h - 1) * (size_t)f->nwin];
            size_t k = s * H + (size_t)(h - 1);
            double m = f->out_mean[k], e = y - m, q = f->p.quantile;
            if (f->kind == TM_FORECAST_TARMAC) {
                f->loss_b[h - 1] += QSEL_RATE * (pinball(y, clamp_upper(f, m + f->out_qb[k]), q) - f->loss_b[h - 1]);
                f->loss_p[h - 1] += QSEL_RATE * (pinball(y, clamp_upper(f, m + f->out_qp[k]), q) - f->loss_p[h - 1]);
            }
            win_push(&w[f->nwin - 1], f->W, e);
            if (f->out_band[s] >= 0)
                win_push(&w[f->out_band[s]], f->W, e);
        }
    }

    if (f->kind == TM_FORECAST_TARMAC) {
        for (int c = 0; c < NCAND; c++) {
            struct cand *cd = &f->cands[c];
            const struct cand_next *cn = &nx.c[c];
            cd->level = cn->level;
            cd->trend = cn->trend;
            cd->mae = cn->mae;
            for (int k = 0; k < 2; k++) {
                if (cn->di[k] >= 0)
                    cd->daily[cn->di[k]] += cn->dd[k];
                if (cn->wi[k] >= 0)
                    cd->weekly[cn->wi[k]] += cn->wd[k];
            }
        }
        if (!f->have_closed)
            f->first_step = j;
        seasons_learn_start(f, j, y);
        nx.daily_on = f->daily_on;
        nx.weekly_on = f->weekly_on;
        /* Forecasts are read from the state now, with no pending deltas. */
        for (int c = 0; c < NCAND; c++) {
            nx.c[c].level = f->cands[c].level;
            nx.c[c].dd[0] = nx.c[c].dd[1] = nx.c[c].wd[0] = nx.c[c].wd[1] = 0.0;
        }
    } else if (f->kind == TM_FORECAST_SEASONAL_NAIVE) {
        /* Missing steps hold the value seen last before them, so "one day
         * earlier" is the value the series had then, also when the step
         * does not divide a day or samples are sparser than the step. */
        int64_t from = f->have_closed ? f->last_step + 1 : j;
        if (j - from > f->day_steps)
            from = j - f->day_steps;
        for (int64_t m = from; m < j; m++) {
            int64_t s = floormod(m, f->day_steps);
            f->hist[s] = f->last_value;
            f->hist_step[s] = m;
        }
        f->hist[floormod(j, f->day_steps)] = y;
        f->hist_step[floormod(j, f->day_steps)] = j;
    }

    /* Record this step's forecasts for their errors later. */
    oslot = floormod(j, f->H + 1);
    band = next_band(f, &nx);
    for (int32_t h = 1; h <= f->H; h++) {
        size_t k = (size_t)oslot * H + (size_t)(h - 1);
        f->out_mean[k] = next_mean(f, &nx, h);
        if (f->kind == TM_FORECAST_TARMAC) {
            f->out_qb[k] = win_quantile(error_window(f, h, band), f->p.quantile);
            f->out_qp[k] = win_quantile(pooled_window(f, h), f->p.quantile);
        }
    }
    f->out_band[oslot] = band;
    f->out_origin[oslot] = j;
    if (f->kind == TM_FORECAST_TARMAC) {
        /* Ranked against the volatilities before it, in commit and predict alike. */
        win_push(&f->volwin, f->W, nx.vol);
        f->vol = nx.vol;
    }

    if (!f->have_closed)
        f->first_step = j;
    f->have_closed = true;
    f->last_step = j;
    f->last_value = y;
}

int tm_forecast_observe(struct tm_forecast *f, int64_t t_ms, double value)
{
    int64_t k;

    if (!f || !isfinite(value))
        return TM_EINVAL;
    k = floordiv(t_ms, f->p.step_ms);
    if (f->have_open && k < f->open_step)
        return TM_EINVAL;
    if (f->have_open && k > f->open_step)
        commit(f, f->open_step, f->open_value);
    f->have_open = true;
    f->open_step = k;
    f->open_value = value;
    return 0;
}

int tm_forecast_predict(const struct tm_forecast *f, int64_t horizon_ms, double quantile,
                        double *ret_mean, double *ret_upper)
{
    struct step_next nx;
    int64_t h64;
    int32_t h;
    double mean, upper;

    if (!f || !f->have_open || !(quantile > 0.0 && quantile < 1.0) || horizon_ms < 0)
        return TM_EINVAL;
    h64 = (horizon_ms + f->p.step_ms - 1) / f->p.step_ms;
    if (h64 < 1)
        h64 = 1;
    if (h64 > f->H)
        h64 = f->H;
    h = (int32_t)h64;
    step_compute(f, f->open_step, f->open_value, &nx);
    mean = next_mean(f, &nx, h);
    if (f->kind == TM_FORECAST_TARMAC && f->loss_b[h - 1] <= f->loss_p[h - 1])
        upper = mean + win_quantile(error_window(f, h, next_band(f, &nx)), quantile);
    else
        upper = mean + win_quantile(pooled_window(f, h), quantile);
    upper = clamp_upper(f, upper);
    if (ret_mean)
        *ret_mean = mean;
    if (ret_upper)
        *ret_upper = upper;
    return 0;
}

struct pending {
    int64_t target;
    double mean, upper;
};

int tm_forecast_evaluate(enum tm_forecast_kind kind, const struct tm_forecast_params *p,
                         const int64_t *t_ms, const double *values, size_t n,
                         int64_t horizon_ms, double quantile, int64_t warmup_ms,
                         struct tm_forecast_score *ret)
{
    struct tm_forecast_params pp;
    struct tm_forecast *f = NULL;
    struct pending *pend = NULL;
    struct tm_forecast_score sc = {0};
    double pin = 0.0, ape = 0.0;
    size_t covered = 0, nape = 0;
    int64_t hs, first_t;
    int r = TM_EINVAL;

    if (!p || !t_ms || !values || n == 0 || horizon_ms < 0 || warmup_ms < 0 ||
        !(quantile > 0.0 && quantile < 1.0) || !ret)
        goto out;
    pp = *p;
    if (pp.step_ms < 1000)
        goto out;
    hs = (horizon_ms + pp.step_ms - 1) / pp.step_ms;
    if (hs < 1)
        hs = 1;
    if (hs > TM_FORECAST_HORIZON_MAX)
        goto out;
    if (pp.horizon_steps < hs)
        pp.horizon_steps = (int32_t)hs;
    pp.quantile = quantile;
    r = tm_forecast_new(kind, &pp, &f);
    if (r < 0)
        goto out;
    r = TM_ENOMEM;
    pend = malloc((size_t)(hs + 1) * sizeof(*pend));
    if (!pend)
        goto out;
    for (int64_t i = 0; i <= hs; i++)
        pend[i].target = INT64_MIN;
    first_t = t_ms[0];
    for (size_t i = 0; i < n; i++) {
        int64_t k = floordiv(t_ms[i], pp.step_ms);
        struct pending *pe;

        r = TM_EINVAL;
        if (i > 0 && t_ms[i] < t_ms[i - 1])
            goto out;
        r = tm_forecast_observe(f, t_ms[i], values[i]);
        if (r < 0)
            goto out;
        if (i + 1 < n && floordiv(t_ms[i + 1], pp.step_ms) == k)
            continue; /* not the step's last observation yet */
        pe = &pend[floormod(k, hs + 1)];
        if (pe->target == k && k * pp.step_ms - first_t >= warmup_ms) {
            double y = values[i], u = pe->upper;
            pin += pinball(y, u, quantile);
            covered += y <= u;
            if (y != 0.0) {
                ape += fabs(y - pe->mean) / fabs(y);
                nape++;
            } else {
                sc.mape_skipped++;
            }
            sc.scored++;
        }
        pe = &pend[floormod(k + hs, hs + 1)];
        r = tm_forecast_predict(f, hs * pp.step_ms, quantile, &pe->mean, &pe->upper);
        if (r < 0)
            goto out;
        pe->target = k + hs;
    }
    r = TM_EINVAL;
    if (sc.scored == 0)
        goto out;
    sc.pinball = pin / (double)sc.scored;
    sc.coverage = (double)covered / (double)sc.scored;
    sc.mape = nape ? 100.0 * ape / (double)nape : NAN;
    *ret = sc;
    r = 0;
out:
    free(pend);
    tm_forecast_free(f);
    return r;
}
