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
#include "providers/gcp/gce.h"
#include "providers/provider.h"

#define TM_GCP_SHORT_MAX 64

struct tm_gcp_shortage {
    char type[TM_ID_MAX];
    char zone[TM_ID_MAX];
    enum tm_capacity_type capacity;
    uint64_t until;
};

struct tm_gcp_pool {
    char *name;
    char **zones;
    size_t nzones;
    char **types;
    size_t ntypes;
    char *gpu_model;
    int gpus;
    bool spot;                    /* spot or spot_then_on_demand */
};

struct tm_gcp_provider {
    struct tm_provider base;
    uv_loop_t *loop;
    struct tm_gce *gce;
    char name[TM_ID_MAX];
    char cluster[TM_ID_MAX];
    char *image;
    int page_size;
    unsigned max_relaunch;
    uint64_t shortage_ttl_ms;
    struct tm_gcp_pool *pools;
    size_t npools;
    struct tm_config_instance_type *types;
    size_t ntypes;
    char **spot_zones;            /* zones whose preemptions the listing reads */
    size_t nspot_zones;
    struct tm_gcp_shortage shorts[TM_GCP_SHORT_MAX];
    bool closing;
    void (*close_done)(void *data);
    void *close_data;
};

const struct tm_gcp_pool *tm_gcp_pool_find(const struct tm_gcp_provider *gp, const char *name);
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
