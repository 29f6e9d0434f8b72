/*
 * providers/common/launch.h: the launch engine every cloud runs.
 *
 * One launch, the same on every cloud: look for an instance carrying the
 * launch's token (a controller that died mid-launch adopts what it made
 * instead of buying a second one), then walk the offers, zone by zone, spot
 * before on demand as the request allows, skipping the (type, zone, market)
 * cells the shortage memory holds; an offer refused for capacity is
 * remembered and the next one tried; a launch whose answer was lost (reset,
 * timeout) looks by token again before it tries anything, within a budget;
 * anything else fails the launch.  The engine owns that walk, the request's
 * copy (the bootstrap wiped when done), the delivery (exactly once, never
 * inside the call that started the launch) and the launches in flight.
 *
 * A cloud brings a table of primitives (struct tm_launch_backend), the way
 * curl drives its TLS backends from one vtls.c: find by token, create one
 * offer, and its own classification of each answer into ok / short / next /
 * ambiguous / fatal, with the instance read from the answer.  Each primitive
 * starts one call on the loop and answers later, exactly once, through
 * tm_launch_found() or tm_launch_made(); a primitive that needs several
 * calls (a failed VM to clear first, a fleet's instance to read back) makes
 * them itself before it answers.  The retry of one call (backoff, Retry-After,
 * the auth gate) stays in each cloud's client, on the policy of
 * providers/common/retry.h.
 */
#ifndef TM_PROVIDER_LAUNCH_H
#define TM_PROVIDER_LAUNCH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "providers/common/pools.h"
#include "providers/common/reservations.h"
#include "providers/common/shortage.h"
#include "providers/provider.h"

#define TM_LAUNCH_OFFER_MAX 64

/* One (type, zone, market) cell a launch may try. */
struct tm_launch_offer {
    char type[TM_ID_MAX];
    char zone[TM_ID_MAX];          /* "" lets the cloud choose */
    enum tm_capacity_type capacity; /* spot or on_demand */
    bool tried;
    /* Into this reservation (reservations.h), "" none: on_demand capacity,
     * the cloud's own way of naming it; block, a capacity block's market. */
    char reservation[TM_ID_MAX];
    bool block;
};

/* How a cloud reads the answer to a create. */
enum tm_launch_answer {
    TM_LAUNCH_OK,        /* made: inst */
    TM_LAUNCH_SHORT,     /* no capacity on the offer tried: remember it, try the next */
    TM_LAUNCH_NEXT,      /* try the next offer; the cloud noted what was short itself */
    TM_LAUNCH_AMBIGUOUS, /* no answer: the cloud may have made it, look by token first */
    TM_LAUNCH_FATAL,     /* fail the launch with the status */
};

struct tm_launch;

/* Whether zone can be an offer (a limit on names); ctx is the caller's. */
typedef bool (*tm_launch_zone_fits)(const void *ctx, const char *zone);

/* A cloud's primitives.  Every call starts one request on the loop and
 * returns 0 (its answer comes later, once) or a negative code (it never
 * answers). */
struct tm_launch_backend {
    const char *cloud;             /* "aws": the log lines' prefix */
    size_t priv_size;              /* the cloud's per-launch state, zeroed: l->priv */
    /* No zone in the request and none in the pool: false lets the cloud
     * choose (one offer with zone ""), true leaves no offer. */
    bool zone_required;
    /* The log line of an instance found again: "found by token". */
    const char *found_by;
    /* Optional: the cloud's own checks and preparation, after the request
     * is copied into l and before the find.  < 0 refuses the launch. */
    int (*prepare)(struct tm_launch *l, const struct tm_launch_request *req);
    /* Optional: whether zone can be an offer of the launch (ctx). */
    tm_launch_zone_fits zone_fits;
    /* Look for an instance carrying l->token: tm_launch_found().  NULL for
     * a cloud whose create itself answers the instance a token already
     * made (the sim's one-statement launch, which finds and inserts under
     * one lock): the engine goes straight to the offers, and a lost answer
     * tries the same offers again. */
    int (*find)(struct tm_launch *l);
    /* Make l->offers[i] (marked tried, l->cur == i): tm_launch_made(). */
    int (*create)(struct tm_launch *l, size_t i);
    /* Optional: free what prepare put in l->priv. */
    void (*cleanup)(struct tm_launch *l);
};

/* What the engine needs from the provider that runs it; the provider
 * embeds it and fills it once, at create. */
struct tm_launch_env {
    uint64_t (*now_ms)(void *clock); /* the provider's clock (uv_now of its loop) */
    void *clock;
    const char *name;              /* the provider's name */
    const char *cluster;           /* NULL: each request names its own */
    struct tm_shortages *shorts;   /* NULL: no shortage memory (sim, local) */
    const struct tm_provider_pool *pools; /* none: one offer, the request's zone */
    size_t npools;
    unsigned max_relaunch;         /* finds after lost answers, 0: 5 */
    /* Reserved capacity, offered before anything else (NULL: none), and
     * the wall clock its terms are read on (NULL: the system's). */
    struct tm_reservations *reservations;
    int64_t (*wall_ms)(void *clock);
    bool *closing;                 /* the provider is closing: deliver TM_ECANCELED */
    struct tm_launch *launching;   /* launches in flight */
    /* The provider, freed by tm_launch_env_closed() once its client is. */
    void (*free_provider)(void *provider);
    void *provider;
    void (*close_done)(void *data);
    void *close_data;
};

/* A launch in flight; the cloud reads it, and writes only offers[].tried
 * (a create that tries several offers at once). */
struct tm_launch {
    struct tm_launch_env *env;
    const struct tm_launch_backend *be;
    tm_launch_cb cb;
    void *data;
    char token[TM_ID_MAX], pool[TM_ID_MAX], type[TM_ID_MAX], zone[TM_ID_MAX];
    char node[24];                 /* node_id in decimal, for tags */
    int64_t node_id;
    enum tm_capacity_type capacity;
    char *bootstrap;               /* NUL-terminated copy, NULL if none; wiped */
    size_t bootstrap_len;
    struct tm_launch_offer offers[TM_LAUNCH_OFFER_MAX];
    size_t noffers, cur;
    unsigned relaunches;
    struct tm_launch *next_launch, **prev_launch;
    void *priv;
};

/* Start a launch of req on the cloud be: 0 (cb fires later, once) or a
 * negative code (it never fires): TM_EINVAL for a request that does not
 * fit, TM_ECANCELED when the provider is closing, or what prepare or find
 * returned. */
int tm_launch_start(struct tm_launch_env *env, const struct tm_launch_backend *be,
                    const struct tm_launch_request *req, tm_launch_cb cb, void *data);

/* The find's answer: status < 0 fails the launch; inst (non-NULL) is
 * delivered as found; NULL plans the offers anew and tries the first. */
void tm_launch_found(struct tm_launch *l, int status, const struct tm_instance *inst);

/* A create's answer, as the cloud classified it; code is the cloud's error
 * code for the shortage memory (may be NULL). */
void tm_launch_made(struct tm_launch *l, enum tm_launch_answer answer, int status,
                    const struct tm_instance *inst, const char *code);

/* Whether a gang's set is one a cloud may launch (struct tm_launch_set):
 * 1 to max members; the set token set and fitting, the placement group
 * fitting; each member's token set and fitting, its pool and instance type
 * the first member's, its zone fitting, its cluster (when named) this
 * cluster.  A cloud adds its own rules after. */
bool tm_launch_set_valid(const struct tm_launch_set *set, const char *cluster, size_t max);

/* ops->close, the same on every cloud: mark the provider closing (launches
 * in flight end with TM_ECANCELED as their calls come back) and remember
 * done.  True when the caller should now close its client, with
 * tm_launch_env_closed(env) as the client's done; false when it was closing
 * already. */
bool tm_launch_env_close(struct tm_launch_env *env, void (*done)(void *data), void *data);
/* The client is closed: free the provider (env with it), then call done. */
void tm_launch_env_closed(void *env);

/* The shortage memory, on the provider's clock. */
bool tm_launch_is_short(const struct tm_launch_env *env, const char *type, const char *zone,
                        enum tm_capacity_type capacity);
void tm_launch_note_short(struct tm_launch_env *env, const char *type, const char *zone,
                          enum tm_capacity_type capacity, const char *code);

/* The offers of a launch of type into pool (or into zone alone when it is
 * not empty): the pool's usable reservations first (whatever capacity the
 * request names: they are paid for already), then, unless the pool is
 * reserved_only, every zone on spot, as capacity allows, then every zone
 * on demand.  Zones remembered short are left out when skip_short, and
 * zones zone_fits refuses always (it may be NULL; ctx is passed to it).
 * With no zone at all, one offer with zone "" unless zone_required.
 * Returns how many, at most max. */
size_t tm_launch_plan_offers(const struct tm_launch_env *env, const char *pool, const char *type,
                             const char *zone, enum tm_capacity_type capacity, bool zone_required,
                             bool skip_short, tm_launch_zone_fits zone_fits, const void *ctx,
                             struct tm_launch_offer *out, size_t max);

#endif
