/*
 * providers/common/pools.h: the copy of the configuration a cloud provider
 * keeps: the pools that name it and its instance types.  The provider
 * outlives a reload of the config it was made from, so it owns copies;
 * every cloud needs the same few fields of them.
 */
#ifndef TM_PROVIDER_POOLS_H
#define TM_PROVIDER_POOLS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/config.h"
#include "core/model.h"

/* A config pool that names this provider. */
struct tm_provider_pool {
    char *name;
    char **zones;
    size_t nzones;
    char **types;                 /* instance types, in the config's order */
    size_t ntypes;
    char *gpu_model;              /* "" when the pool names none */
    int gpus;                     /* per node */
    bool spot;                    /* capacity_type spot or spot_then_on_demand */
    /* It names reservations and may not buy past them
     * (reservation_fallback false): no spot or on-demand offer. */
    bool reserved_only;
    size_t index;                 /* its index in the config's pools (error fields) */
};

/* The pools of cfg whose provider is provider, copied: *ret (free with
 * tm_provider_pools_free(), also on failure) and *ret_n.  0 or TM_ENOMEM. */
int tm_provider_pools_copy(const struct tm_config *cfg, const char *provider,
                           struct tm_provider_pool **ret, size_t *ret_n);
void tm_provider_pools_free(struct tm_provider_pool *pools, size_t n);

/* The pool named name, or NULL. */
const struct tm_provider_pool *tm_provider_pool_find(const struct tm_provider_pool *pools, size_t n,
                                                     const char *name);

/* prov's instance types, copied (gpu_model "" when it names none): *ret
 * (free with tm_provider_types_free(), also on failure) and *ret_n. */
int tm_provider_types_copy(const struct tm_config_provider *prov,
                           struct tm_config_instance_type **ret, size_t *ret_n);
void tm_provider_types_free(struct tm_config_instance_type *types, size_t n);

/* The configured price of type on demand or on spot, in micro-dollars per
 * hour: 0 and *ret, or TM_ENOTFOUND when the type is not configured, has no
 * price on that market, or capacity is neither (spot_then_on_demand has
 * two prices). */
int tm_provider_types_price(const struct tm_config_instance_type *types, size_t n,
                            const char *type, enum tm_capacity_type capacity, int64_t *ret);

#endif
