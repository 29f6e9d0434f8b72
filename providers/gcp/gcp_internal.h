/*
 * providers/gcp/gcp_internal.h: what gcp_provider.c shares with
 * gcp_launch_set.c and nothing else includes.  gcp_provider.c owns these
 * structs (it creates, fills and frees them); gcp_launch_set.c only reads
 * the provider's configuration, plans its offers and notes shortages
 * through the launch engine's view of the provider (launch.h).
 */
#ifndef TM_GCP_INTERNAL_H
#define TM_GCP_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <uv.h>

#include "core/config.h"
#include "providers/common/launch.h"
#include "providers/common/pools.h"
#include "providers/common/shortage.h"
#include "providers/gcp/gce.h"
#include "providers/provider.h"

struct tm_gcp_provider {
    struct tm_provider base;
    uv_loop_t *loop;
    struct tm_gce *gce;
    char name[TM_ID_MAX];
    char cluster[TM_ID_MAX];
    char *image;
    int page_size;
    struct tm_provider_pool *pools;
    size_t npools;
    struct tm_config_instance_type *types;
    size_t ntypes;
    char **spot_zones;            /* zones whose preemptions the listing reads */
    size_t nspot_zones;
    struct tm_shortages shorts;
    struct tm_launch_env launch;  /* the launch engine's view; max_relaunch
                                   * bounds the set's finds too */
    bool closing;
};

/* The two helpers both files use are inline here, so that the one call
 * between the files runs one way: gcp_provider.c's ops table to
 * tm_gcp_launch_set. */
static inline const struct tm_provider_pool *tm_gcp_pool_find(const struct tm_gcp_provider *gp,
                                                              const char *name)
{
    return tm_provider_pool_find(gp->pools, gp->npools, name);
}

/* Whether "zone/name" fits TM_ID_MAX for a name of *name_len bytes (the
 * instance's id and URL path name both): a tm_launch_zone_fits over a
 * const size_t. */
static inline bool tm_gcp_zone_fits_name(const void *name_len, const char *zone)
{
    return strlen(zone) + 1 + *(const size_t *)name_len < TM_ID_MAX;
}

/* ops->launch_set: a gang through instances.bulkInsert (gcp_launch_set.c). */
int tm_gcp_launch_set(struct tm_provider *p, const struct tm_launch_set *set,
                      tm_launch_set_cb cb, void *data);

#endif
