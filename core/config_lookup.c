/*
 * core/config_lookup.c: the lookups of config.h on a loaded configuration
 * (pools, providers and instance types by name, spot hazards).  Apart from
 * config_load.c because the checks use them too: config_load.c calls
 * config_check.c, and both call these, so calls run one way.
 */
#include "core/config.h"

#include <stdbool.h>
#include <stddef.h>
#include <string.h>

#include "core/spot_hazards.h"

const struct tm_config_pool *tm_config_pool_find(const struct tm_config *cfg, const char *name)
{
    if (!cfg || !name)
        return NULL;
    for (size_t i = 0; i < cfg->npools; i++)
        if (cfg->pools[i].name && strcmp(cfg->pools[i].name, name) == 0)
            return &cfg->pools[i];
    return NULL;
}

const struct tm_config_provider *tm_config_provider_find(const struct tm_config *cfg,
                                                         const char *name)
{
    if (!cfg || !name)
        return NULL;
    for (size_t i = 0; i < cfg->nproviders; i++)
        if (cfg->providers[i].name && strcmp(cfg->providers[i].name, name) == 0)
            return &cfg->providers[i];
    return NULL;
}

const struct tm_config_pool_group *tm_config_pool_group_find(const struct tm_config *cfg,
                                                             const char *name)
{
    if (!cfg || !name)
        return NULL;
    for (size_t i = 0; i < cfg->npool_groups; i++)
        if (cfg->pool_groups[i].name && strcmp(cfg->pool_groups[i].name, name) == 0)
            return &cfg->pool_groups[i];
    return NULL;
}

const struct tm_config_instance_type *tm_config_type_find(const struct tm_config_provider *p,
                                                          const char *name)
{
    if (!p || !name)
        return NULL;
    for (size_t i = 0; i < p->ntypes; i++)
        if (p->types[i].name && strcmp(p->types[i].name, name) == 0)
            return &p->types[i];
    return NULL;
}

/* The cells of pool (its instance types, or `type` alone, by its zones)
 * that table gives a hazard for; the highest of those hazards goes to
 * *ret_worst (may be NULL; 0 when none). */
static size_t fitted_cells(const struct tm_spot_hazards *table, const struct tm_config_pool *pool,
                           const char *type, double *ret_worst)
{
    size_t n = 0, ntypes = type ? 1 : pool->ninstance_types;
    double worst = 0, h;

    for (size_t t = 0; t < ntypes; t++)
        for (size_t z = 0; z < pool->nzones; z++)
            if (tm_spot_hazards_fitted(table, type ? type : pool->instance_types[t], pool->zones[z], &h)) {
                n++;
                if (h > worst)
                    worst = h;
            }
    if (ret_worst)
        *ret_worst = worst;
    return n;
}

size_t tm_config_spot_cells_fitted(const struct tm_config *cfg, const struct tm_config_pool *pool,
                                   const char *type)
{
    const struct tm_config_provider *p = tm_config_provider_find(cfg, pool->provider);

    return p ? fitted_cells(p->spot_hazards, pool, type, NULL) : 0;
}

double tm_config_spot_hazard(const struct tm_config *cfg, const struct tm_config_pool *pool,
                             const char *type, const char *zone, bool *ret_fitted)
{
    const struct tm_config_provider *p = tm_config_provider_find(cfg, pool->provider);
    bool fitted = false;
    double h = 0;

    if (p && type && zone)
        fitted = tm_spot_hazards_fitted(p->spot_hazards, type, zone, &h);
    if (ret_fitted)
        *ret_fitted = fitted;
    if (fitted)
        return h;
    if (pool->spot_hazard_per_hour > 0 || !p || !type)
        return pool->spot_hazard_per_hour;
    /* A pool hazard of 0 (the default) says nothing is known: the zone is
     * taken to be no safer than the worst zone of the pool the table fits
     * for this type, so that the planner never prefers the zone it knows
     * least (availability-only rows are common in spot-fit's output). */
    fitted_cells(p->spot_hazards, pool, type, &h);
    return h;
}
