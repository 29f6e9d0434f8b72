/*
 * providers/common/shortage.h: the shortage memory every cloud provider
 * keeps.  When a launch meets "no capacity" (EC2's
 * InsufficientInstanceCapacity, GCE's ZONE_RESOURCE_POOL_EXHAUSTED, ARM's
 * ZonalAllocationFailed, a set made short) the (type, zone, market) is
 * remembered for a while, so the next launches go to other offerings first
 * instead of asking again where the cloud just said no.  A fixed table: the
 * oldest entry gives way when it is full, so the memory costs nothing to
 * keep and never grows.
 *
 * Pure: the caller passes uv_now() as now, so it is tested without a loop.
 */
#ifndef TM_PROVIDER_SHORTAGE_H
#define TM_PROVIDER_SHORTAGE_H

#include <stdbool.h>
#include <stdint.h>

#include "providers/provider.h"

#define TM_SHORTAGE_MAX 64

struct tm_shortage {
    char type[TM_ID_MAX];         /* instance type, machine type, VM size */
    char zone[TM_ID_MAX];         /* "" when the offering has no zone */
    enum tm_capacity_type capacity;
    uint64_t until;               /* ms on the caller's clock */
};

struct tm_shortages {
    const char *cloud;            /* "aws": the log line reads "aws capacity short, ..." */
    const char *type_key;         /* the log key of the type: "type", or "size" on Azure */
    const char *provider;         /* the provider's name, owned by the provider */
    uint64_t ttl_ms;
    struct tm_shortage e[TM_SHORTAGE_MAX];
};

/* An empty memory; ttl_ms 0 takes the default, 10 minutes. */
void tm_shortages_init(struct tm_shortages *m, const char *cloud, const char *type_key,
                       const char *provider, uint64_t ttl_ms);

/* Whether (type, zone, capacity) is remembered short at now.  zone may be
 * NULL (no zone). */
bool tm_shortages_has(const struct tm_shortages *m, uint64_t now, const char *type,
                      const char *zone, enum tm_capacity_type capacity);

/* Remember (type, zone, capacity) short from now for ttl_ms, logged with
 * the cloud's code (may be NULL).  A name too long for the table is not
 * remembered: truncated, it could match another offering. */
void tm_shortages_note(struct tm_shortages *m, uint64_t now, const char *type, const char *zone,
                       enum tm_capacity_type capacity, const char *code);

#endif
