/*
 * controller/live_forecast.c: per-pool demand forecasters for the live tick.
 */
#include "controller/live_forecast.h"

#include <stdlib.h>
#include <string.h>

#include "controller/forecast.h"
#include "core/err.h"

#define PROVISIONING_QUANTILE 0.9
#define DEFAULT_BOOT_MS 180000

struct tm_live_forecast {
    const struct tm_config *cfg;
    struct tm_forecast **fc;       /* one per pool */
    double *demand;                /* scratch: GPUs wanted per pool */
    struct tm_pool_forecast *out;  /* what the last update predicted */
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
    const struct tm_config_provider *prov = tm_config_provider_find(cfg, pool->provider);
    int64_t boot = prov && strcmp(prov->kind, "sim") == 0 ? prov->boot_delay_ms : DEFAULT_BOOT_MS;
    return boot + cfg->tick_interval_ms;
}

const struct tm_pool_forecast *tm_live_forecast_update(struct tm_live_forecast *lf,
                                                       const struct tm_snapshot *snap,
                                                       int64_t now_ms)
{
    tm_reconcile_pool_demand(lf->cfg, snap, lf->demand);
    for (size_t i = 0; i < lf->cfg->npools; i++) {
        double mean, upper;
        /* A time before the open step (a clock set back) changes nothing. */
        (void)tm_forecast_observe(lf->fc[i], now_ms, lf->demand[i]);
        if (tm_forecast_predict(lf->fc[i], horizon_ms(lf->cfg, &lf->cfg->pools[i]),
                                PROVISIONING_QUANTILE, &mean, &upper) == 0)
            lf->out[i] = (struct tm_pool_forecast){mean, upper};
    }
    return lf->out;
}
