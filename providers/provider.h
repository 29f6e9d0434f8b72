/*
 * providers/provider.h: the interface every cloud implements.
 *
 * All operations are asynchronous on the controller's libuv loop: a call
 * returns 0 once the request is under way (the callback then fires exactly
 * once, later, never from inside the call) or a negative code when it could
 * not be started (the callback never fires).  Errors passed to callbacks are
 * core/err.h codes with the meaning the controller acts on:
 *   TM_EQUOTA      capacity or quota short: fall back, remember the shortage
 *   TM_ETHROTTLED, TM_EUNAVAIL, -ETIMEDOUT: retried inside the provider
 *                  up to its budget, then reported
 *   TM_EAUTH       credentials refused: stop calling this provider
 *   TM_ECANCELED   the provider was closed while the call was in flight
 *
 * Idempotency: launch carries a token derived from the node row and written
 * to the database before the call.  A provider must never create a second
 * instance for a token it has seen; where the cloud ignores tokens the
 * provider also tags the instance with it, and the controller matches tags.
 */
#ifndef TM_PROVIDER_H
#define TM_PROVIDER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "core/model.h"

#define TM_ID_MAX 64

/* Whether s is set and fits an id field (TM_ID_MAX with its NUL). */
static inline bool tm_id_fits(const char *s)
{
    return s && strlen(s) < TM_ID_MAX;
}

/* Copy src into an id field, cut to fit ("" for NULL). */
static inline void tm_id_copy(char dst[TM_ID_MAX], const char *src)
{
    snprintf(dst, TM_ID_MAX, "%s", src ? src : "");
}

enum tm_instance_state {
    TM_INSTANCE_PENDING,
    TM_INSTANCE_RUNNING,
    TM_INSTANCE_STOPPING,     /* shutting down */
    TM_INSTANCE_STOPPED,
    TM_INSTANCE_TERMINATED,
    TM_INSTANCE_STATE_MAX,
};

const char *tm_instance_state_name(enum tm_instance_state s);

/* One instance as the cloud lists it, with the tags tarmac put on it. */
struct tm_instance {
    char id[TM_ID_MAX];            /* the cloud's instance id */
    char token[TM_ID_MAX];         /* launch token tag ("" if untagged) */
    char pool[TM_ID_MAX];          /* pool tag */
    char instance_type[TM_ID_MAX];
    char zone[TM_ID_MAX];
    int64_t node_id;               /* node tag, 0 if absent */
    enum tm_capacity_type capacity;/* spot or on_demand */
    enum tm_instance_state state;
    bool interrupted;              /* the cloud reclaimed it (spot) */
    int64_t launched_ms;
    int64_t notice_ms;             /* interruption notice time, 0 if none */
};

struct tm_launch_request {
    const char *cluster;       /* cluster tag: what this controller owns */
    const char *pool;
    int64_t node_id;
    const char *token;         /* idempotency token */
    const char *instance_type;
    const char *zone;          /* "" lets the provider choose */
    enum tm_capacity_type capacity; /* spot or on_demand */
    /* The node's bootstrap (cloud-init or a shell script, already filled
     * with the controller URL, CA and enrollment secret), passed as EC2
     * UserData, GCP metadata startup-script or Azure osProfile.customData;
     * NULL when the pool has none.  It carries a secret: never log it. */
    const char *bootstrap;
    size_t bootstrap_len;
};

/* A gang's nodes, bought whole: every request names the same pool, cluster,
 * instance type, capacity and zone ("" lets the provider choose one zone
 * for all), and keeps its own node id and token, written to the database
 * before the call as for one launch.  set_token names the set (the tokens'
 * common stem, tm_launch_set_key); the provider may tag instances with it. */
struct tm_launch_set {
    const struct tm_launch_request *reqs;
    size_t n;                  /* >= 1 */
    const char *set_token;
    const char *placement_group; /* NULL or "": none (EC2 cluster placement
                                  * group, GCP compact resource policy) */
};

struct tm_price {
    const char *instance_type;
    const char *zone;
    enum tm_capacity_type capacity;
    int64_t uusd_per_hour;     /* micro-dollars per hour */
};

/* What a provider learned of the cloud on its own (a reservation EC2 now
 * calls cancelled) that the controller records as a decision about a
 * pool: kind is the decision's ("reservation_ended"), subject what it is
 * about (the reservation's id), reason one line. */
struct tm_provider_notice {
    char kind[32];
    char pool[TM_ID_MAX];
    char subject[TM_ID_MAX];
    char state[32];            /* the cloud's word, "" none */
    char reason[256];
};

struct tm_provider;

typedef void (*tm_launch_cb)(int status, const struct tm_instance *inst, void *data);
typedef void (*tm_done_cb)(int status, void *data);
/* All or nothing: status 0 with n instances, insts[i] for reqs[i]; an
 * error with n 0 and nothing left running (the provider released what
 * the cloud made before it failed). */
typedef void (*tm_launch_set_cb)(int status, const struct tm_instance *insts, size_t n, void *data);
/* list is valid only during the callback. */
typedef void (*tm_list_cb)(int status, const struct tm_instance *list, size_t n, void *data);

struct tm_provider_ops {
    const char *name;
    int (*launch)(struct tm_provider *p, const struct tm_launch_request *req,
                  tm_launch_cb cb, void *data);
    int (*terminate)(struct tm_provider *p, const char *instance_id, tm_done_cb cb, void *data);
    /* Every instance carrying the cluster tag, in every state the cloud
     * still reports; a complete listing (all pages) or an error. */
    int (*list)(struct tm_provider *p, const char *cluster, tm_list_cb cb, void *data);
    /* Synchronous: prices come from configuration or a cache the provider
     * refreshes itself.  TM_ENOTFOUND when the type/zone/capacity is unknown. */
    int (*price)(struct tm_provider *p, const char *instance_type, const char *zone,
                 enum tm_capacity_type capacity, int64_t *ret_uusd_per_hour);
    /* Abandon calls in flight (their callbacks fire with TM_ECANCELED), then
     * call done once every handle is closed; the provider is freed after. */
    void (*close)(struct tm_provider *p, void (*done)(void *data), void *data);
    /* Launch a gang's nodes, all of them in one zone or none
     * (struct tm_launch_set).  Where the cloud has an all-or-nothing call
     * (EC2 CreateFleet instant with MinTargetCapacity, GCP bulkInsert with
     * minCount) it is used; otherwise tm_provider_launch_set_each()
     * launches one by one and releases the set whole if one fails.  NULL:
     * the caller uses tm_provider_launch_set_each() itself. */
    int (*launch_set)(struct tm_provider *p, const struct tm_launch_set *set,
                      tm_launch_set_cb cb, void *data);
    /* Optional, synchronous: hand over up to max notices not handed over
     * before (oldest first); returns how many.  NULL: none ever. */
    size_t (*notices)(struct tm_provider *p, struct tm_provider_notice *out, size_t max);
};

struct tm_provider {
    const struct tm_provider_ops *ops;
    void *impl;
};

/* A set launched through p->ops->launch one node at a time, in the zone
 * of the first instance the cloud made (later members are asked for that
 * zone).  If any member fails, every member already made is terminated
 * before cb reports that member's error (TM_EQUOTA first when several
 * fail), so nothing is left billing.  Same contract as ops->launch_set;
 * the requests are copied before it returns. */
int tm_provider_launch_set_each(struct tm_provider *p, const struct tm_launch_set *set,
                                tm_launch_set_cb cb, void *data);

/* Member k's launch token of a set whose stem is `set` ("<set>g007"),
 * and the stem back from a member's token ("" for a token of a single
 * launch).  The suffix survives truncation to TM_ID_MAX as
 * tm_launch_token's does. */
void tm_launch_member_token(const char *set, unsigned k, char out[TM_ID_MAX]);
void tm_launch_set_key(const char *token, char out[TM_ID_MAX]);

#endif
