/* providers/common/pools.c: a provider's copy of its pools and instance
 * types (see pools.h). */
#include "providers/common/pools.h"

#include <stdlib.h>
#include <string.h>

#include "core/err.h"

static void strv_free(char **v, size_t n)
{
    for (size_t i = 0; v && i < n; i++)
        free(v[i]);
    free(v);
}

static char **strv_dup(char *const *v, size_t n)
{
    char **out = calloc(n ? n : 1, sizeof(*out));

    for (size_t i = 0; out && i < n; i++)
        if (!(out[i] = strdup(v[i]))) {
            strv_free(out, i);
            return NULL;
        }
    return out;
}

void tm_provider_pools_free(struct tm_provider_pool *pools, size_t n)
{
    for (size_t i = 0; pools && i < n; i++) {
        strv_free(pools[i].zones, pools[i].nzones);
        strv_free(pools[i].types, pools[i].ntypes);
        free(pools[i].name);
        free(pools[i].gpu_model);
    }
    free(pools);
}

int tm_provider_pools_copy(const struct tm_config *cfg, const char *provider,
                           struct tm_provider_pool **ret, size_t *ret_n)
{
    struct tm_provider_pool *pools;
    size_t n = 0;

    for (size_t i = 0; i < cfg->npools; i++)
        if (cfg->pools[i].provider && strcmp(cfg->pools[i].provider, provider) == 0)
            n++;
    *ret_n = 0;
    *ret = pools = calloc(n ? n : 1, sizeof(*pools));
    if (!pools)
        return TM_ENOMEM;
    for (size_t i = 0; i < cfg->npools; i++) {
        const struct tm_config_pool *src = &cfg->pools[i];
        struct tm_provider_pool *dst;

        if (!src->provider || strcmp(src->provider, provider) != 0)
            continue;
        dst = &pools[(*ret_n)++];
        dst->index = i;
        dst->name = strdup(src->name);
        dst->gpu_model = strdup(src->gpu_model ? src->gpu_model : "");
        dst->gpus = src->gpus_per_node;
        dst->spot = src->capacity_type && strcmp(src->capacity_type, "on_demand") != 0;
        dst->reserved_only = src->nreservations > 0 && !src->reservation_fallback;
        dst->zones = strv_dup(src->zones, src->nzones);
        dst->nzones = dst->zones ? src->nzones : 0;
        dst->types = strv_dup(src->instance_types, src->ninstance_types);
        dst->ntypes = dst->types ? src->ninstance_types : 0;
        if (!dst->name || !dst->gpu_model || !dst->zones || !dst->types)
            return TM_ENOMEM;
    }
    return 0;
}

const struct tm_provider_pool *tm_provider_pool_find(const struct tm_provider_pool *pools, size_t n,
                                                     const char *name)
{
    for (size_t i = 0; name && i < n; i++)
        if (strcmp(pools[i].name, name) == 0)
            return &pools[i];
    return NULL;
}

void tm_provider_types_free(struct tm_config_instance_type *types, size_t n)
{
    for (size_t i = 0; types && i < n; i++) {
        free(types[i].name);
        free(types[i].gpu_model);
    }
    free(types);
}

int tm_provider_types_copy(const struct tm_config_provider *prov,
                           struct tm_config_instance_type **ret, size_t *ret_n)
{
    struct tm_config_instance_type *types = calloc(prov->ntypes ? prov->ntypes : 1, sizeof(*types));

    *ret = types;
    *ret_n = 0;
    if (!types)
        return TM_ENOMEM;
    for (size_t i = 0; i < prov->ntypes; i++) {
        types[i] = prov->types[i];
        types[i].name = strdup(prov->types[i].name);
        types[i].gpu_model = strdup(prov->types[i].gpu_model ? prov->types[i].gpu_model : "");
        (*ret_n)++;
        if (!types[i].name || !types[i].gpu_model)
            return TM_ENOMEM;
    }
    return 0;
}

int tm_provider_types_price(const struct tm_config_instance_type *types, size_t n,
                            const char *type, enum tm_capacity_type capacity, int64_t *ret)
{
    for (size_t i = 0; type && i < n; i++) {
        const struct tm_config_instance_type *t = &types[i];
        int64_t uusd = capacity == TM_CAPACITY_ON_DEMAND ? t->on_demand_uusd_per_hour
                       : capacity == TM_CAPACITY_SPOT    ? t->spot_uusd_per_hour
                                                         : 0;

        if (strcmp(t->name, type) == 0 && uusd > 0) {
            *ret = uusd;
            return 0;
        }
    }
    return TM_ENOTFOUND;
}
