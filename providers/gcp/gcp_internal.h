/*
 * providers/gcp/gcp_internal.h: what gcp_provider.c shares with
 * gcp_launch_set.c and nothing else includes.  gcp_provider.c owns these
 * structs (it creates, fills and frees them); gcp_launch_set.c only reads
 * the provider's configuration and notes shortages through the functions
 * below.
 */
#ifndef TM_GCP_INTERNAL_H
#define TM_GCP_INTERNAL_H

#include <stdbool.h>
#include <stdint.h>

#include <uv.h>

#include "core/config.h"
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
    unsigned max_relaunch;
    struct tm_provider_pool *pools;
    size_t npools;
    struct tm_config_instance_type *types;
    size_t ntypes;
    char **spot_zones;            /* zones whose preemptions the listing reads */
    size_t nspot_zones;
    struct tm_shortages shorts;
    bool closing;
    void (*close_done)(void *data);
    void *close_data;
};

const struct tm_provider_pool *tm_gcp_pool_find(const struct tm_gcp_provider *gp, const char *name);

#define TM_GCP_OFFER_MAX 64

/* A zone and market a launch may try. */
struct tm_gcp_offer {
    char zone[TM_ID_MAX];
    enum tm_capacity_type capacity;
    bool tried;
};

/* The offers of a launch into pool, or into zone alone when zone is not
 * empty: every zone on spot first, as capacity allows, then every zone on
 * demand.  A zone is left out when "zone/name" would not fit TM_ID_MAX
 * (name_len: the longest instance name the launch makes), since the
 * instance's URL path names it.  Zones remembered short stay in: the
 * launch skips them when it comes to them, so a shortage that expires in
 * between is tried.  Returns how many, at most TM_GCP_OFFER_MAX. */
size_t tm_gcp_plan_offers(const struct tm_gcp_provider *gp, const char *pool, const char *zone,
                          enum tm_capacity_type capacity, size_t name_len,
                          struct tm_gcp_offer out[TM_GCP_OFFER_MAX]);
/* Whether (type, zone, capacity) is remembered short now. */
bool tm_gcp_short_has(struct tm_gcp_provider *gp, const char *type, const char *zone,
                      enum tm_capacity_type capacity);
/* Remember it short for shortage_ttl_ms (logged once per note). */
void tm_gcp_short_note(struct tm_gcp_provider *gp, const char *type, const char *zone,
                       enum tm_capacity_type capacity, const char *code);

/* ops->launch_set: a gang through instances.bulkInsert (gcp_launch_set.c). */
int tm_gcp_launch_set(struct tm_provider *p, const struct tm_launch_set *set,
                      tm_launch_set_cb cb, void *data);

#endif
