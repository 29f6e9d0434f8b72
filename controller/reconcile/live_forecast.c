/*
 * controller/reconcile/live_forecast.c: per-pool demand forecasters for the live tick.
 */
#include "controller/reconcile/live_forecast.h"

#include <stdlib.h>
#include <string.h>

#include "controller/fleet/forecast.h"
#include "controller/reconcile/internal.h"
#include "core/err.h"

struct tm_live_forecast {
    const struct tm_config *cfg;
    struct tm_forecast **fc;       /* one per pool */
    double *demand;                /* scratch: GPUs wanted per pool */
    struct tm_pool_forecast *out;  /* what the last update predicted */
    int64_t step_ms;               /* the forecasters' step */
    double quantile;               /* the provisioning quantile they were made for */
    bool fed;                      /* warmed or updated: warming again would go back in time */
};

void tm_live_forecast_free(struct tm_live_forecast *lf)
{
    if (!lf)
        return;
    for (size_t i = 0; lf->fc && i < lf->cfg->npools; i++)
        tm_forecast_free(lf->fc[i]);
    free(lf->fc);
    free(lf->demand);
    free(lf->out);
    free(lf);
}

int tm_live_forecast_new(const struct tm_config *cfg, struct tm_live_forecast **ret)
{
    struct tm_live_forecast *lf = calloc(1, sizeof(*lf));
    struct tm_forecast_params fp;

    if (!lf)
        return TM_ENOMEM;
    lf->cfg = cfg;
    lf->fc = calloc(cfg->npools + 1, sizeof(*lf->fc));
    lf->demand = calloc(cfg->npools + 1, sizeof(*lf->demand));
    lf->out = calloc(cfg->npools + 1, sizeof(*lf->out));
    if (!lf->fc || !lf->demand || !lf->out) {
        tm_live_forecast_free(lf);
        return TM_ENOMEM;
    }
    tm_forecast_params_default(&fp);
    /* A config built by hand (tests) may leave it 0: the default. */
    if (cfg->forecast.quantile > 0)
        fp.quantile = cfg->forecast.quantile;
    lf->quantile = fp.quantile;
    lf->step_ms = fp.step_ms;
    for (size_t i = 0; i < cfg->npools; i++) {
        lf->out[i] = (struct tm_pool_forecast){-1, -1};
        if (tm_forecast_new(TM_FORECAST_TARMAC, &fp, &lf->fc[i]) < 0) {
            tm_live_forecast_free(lf);
            return TM_ENOMEM;
        }
    }
    *ret = lf;
    return 0;
}

/* One boot plus one tick: the soonest a node asked now can take work. */
static int64_t horizon_ms(const struct tm_config *cfg, const struct tm_config_pool *pool)
{
    return tm_rc_pool_boot_ms(cfg, pool) + cfg->tick_interval_ms;
}

const struct tm_pool_forecast *tm_live_forecast_update(struct tm_live_forecast *lf,
                                                       const struct tm_snapshot *snap,
                                                       int64_t now_ms)
{
    lf->fed = true;
    tm_reconcile_pool_demand(lf->cfg, snap, lf->demand);
    for (size_t i = 0; i < lf->cfg->npools; i++) {
        double mean, upper;
        /* A time before the open step (a clock set back) changes nothing. */
        (void)tm_forecast_observe(lf->fc[i], now_ms, lf->demand[i]);
        if (tm_forecast_predict(lf->fc[i], horizon_ms(lf->cfg, &lf->cfg->pools[i]),
                                lf->quantile, &mean, &upper) == 0)
            lf->out[i] = (struct tm_pool_forecast){mean, upper};
    }
    return lf->out;
}

/* A change of one pool's demand at t_ms. */
struct demand_event {
    int64_t t_ms;
    int pool;
    int64_t milli;
};

static int cmp_event(const void *a, const void *b)
{
    const struct demand_event *x = a, *y = b;
    if (x->t_ms != y->t_ms)
        return x->t_ms < y->t_ms ? -1 : 1;
    return x->pool < y->pool ? -1 : x->pool > y->pool;
}

/* Floor division: steps are aligned on multiples of step_ms from t = 0,
 * as the forecaster aligns them, whatever the sign. */
static int64_t step_floor(int64_t t, int64_t step)
{
    int64_t q = t / step;
    return (t % step != 0 && t < 0 ? q - 1 : q) * step;
}

long tm_live_forecast_warm(struct tm_live_forecast *lf, const struct tm_demand_span *spans,
                           size_t n, int64_t from_ms, int64_t to_ms)
{
    size_t np = lf->cfg->npools, ne = 0, k = 0;
    struct demand_event *ev;
    int64_t *milli;
    long steps = 0;

    if (to_ms < from_ms || lf->fed)
        return TM_EINVAL;
    ev = malloc((2 * n + 1) * sizeof(*ev));
    milli = calloc(np + 1, sizeof(*milli));
    if (!ev || !milli) {
        free(ev);
        free(milli);
        return TM_ENOMEM;
    }
    for (size_t i = 0; i < n; i++) {
        const struct tm_demand_span *sp = &spans[i];
        if (sp->pool < 0 || (size_t)sp->pool >= np || sp->milli <= 0 ||
            (sp->to_ms >= 0 && sp->to_ms <= sp->from_ms))
            continue;
        ev[ne++] = (struct demand_event){sp->from_ms, sp->pool, sp->milli};
        if (sp->to_ms >= 0)
            ev[ne++] = (struct demand_event){sp->to_ms, sp->pool, -sp->milli};
    }
    qsort(ev, ne, sizeof(*ev), cmp_event);
    /* Demand is known from the first job on: before it lies no evidence of
     * an idle pool, only a database that did not exist yet, and weeks of
     * made-up zeros would teach the forecasters that any burst is news
     * (they then hold capacity for an hour after one).  No job, no
     * warm-up. */
    if (ne == 0 || ev[0].t_ms > from_ms)
        from_ms = ne == 0 ? to_ms : ev[0].t_ms;
    /* A tick samples the demand of its instant; each step gets the demand
     * at its start, the last step being the one before to_ms's (which the
     * first update fills).  Integer milli-GPUs, so that a day of starts and
     * ends sums back to exactly zero. */
    for (int64_t t = step_floor(from_ms, lf->step_ms); t < step_floor(to_ms, lf->step_ms);
         t += lf->step_ms) {
        for (; k < ne && ev[k].t_ms <= t; k++)
            milli[ev[k].pool] += ev[k].milli;
        for (size_t i = 0; i < np; i++)
            (void)tm_forecast_observe(lf->fc[i], t, (double)milli[i] / 1000.0);
        steps++;
    }
    free(ev);
    free(milli);
    lf->fed = steps > 0;
    return steps;
}
