/*
 * controller/api/fleet_stats.h: what `tarmac serve` counts in process for
 * /metrics: ticks and how long they took, whether this replica leads, and
 * the cloud calls it made with their errors by provider, operation and
 * kind.  Figures that every replica must agree on (launches, terminations,
 * interruptions, spend) come from the database instead.
 *
 * One struct per process, owned by the controller (struct tm_controller
 * embeds it).  Only the functions below write it, and only on the loop
 * thread; the API reads it on the same thread (tm_api_set_fleet_stats),
 * so a scrape takes no lock and never waits.  The counters start at zero
 * with the process; Prometheus's rate() reads a restart as a counter reset.
 */
#ifndef TM_FLEET_STATS_H
#define TM_FLEET_STATS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The provider operations counted (struct tm_provider_ops). */
enum tm_fleet_op {
    TM_FLEET_OP_LIST,
    TM_FLEET_OP_LAUNCH,
    TM_FLEET_OP_TERMINATE,
    TM_FLEET_OP_MAX,
};

/* A failed call's kind: what an operator acts on, from its tm_err code
 * (core/err.h).  A fixed set, so every series can be shown at 0. */
enum tm_fleet_err_kind {
    TM_FLEET_ERR_AUTH,        /* TM_EAUTH: credentials refused */
    TM_FLEET_ERR_THROTTLED,   /* TM_ETHROTTLED */
    TM_FLEET_ERR_QUOTA,       /* TM_EQUOTA: no capacity or quota left */
    TM_FLEET_ERR_UNAVAILABLE, /* TM_EUNAVAIL: unreachable, 5xx */
    TM_FLEET_ERR_TIMEOUT,     /* -ETIMEDOUT */
    TM_FLEET_ERR_CONNECTION,  /* -ECONNREFUSED, -ECONNRESET */
    TM_FLEET_ERR_BAD_REPLY,   /* TM_EBADREPLY */
    TM_FLEET_ERR_INVALID,     /* TM_EINVAL: the cloud refused our request */
    TM_FLEET_ERR_OTHER,       /* anything else */
    TM_FLEET_ERR_MAX,
};

/* Upper bounds (seconds) of the tick duration histogram's buckets; a last
 * bucket, +Inf, holds the rest. */
#define TM_FLEET_TICK_BUCKETS 14
extern const double tm_fleet_tick_bounds_s[TM_FLEET_TICK_BUCKETS];

struct tm_fleet_provider {
    const char *name;                                  /* borrowed (the configuration's) */
    uint64_t calls[TM_FLEET_OP_MAX];                   /* answered, failed or not */
    uint64_t errors[TM_FLEET_OP_MAX][TM_FLEET_ERR_MAX];
};

struct tm_fleet_stats {
    uint64_t ticks;        /* ticks started, leading or standing by */
    bool leader;           /* this replica holds the leader lock now */
    /* Leader ticks ended: a count per bucket (not cumulative; index
     * TM_FLEET_TICK_BUCKETS is past the last bound), their number and
     * their sum in seconds. */
    uint64_t tick_buckets[TM_FLEET_TICK_BUCKETS + 1];
    uint64_t tick_count;
    double tick_seconds_sum;
    struct tm_fleet_provider *providers;               /* one per configured provider */
    size_t nproviders;
};

/* Zeroed counters for the n providers names[] (borrowed: they must outlive
 * the stats).  0, or TM_ENOMEM with *s left empty. */
int tm_fleet_stats_init(struct tm_fleet_stats *s, const char *const *names, size_t n);

/* Free what init allocated; s is then empty.  Safe on an empty struct. */
void tm_fleet_stats_release(struct tm_fleet_stats *s);

/* A leader tick that took seconds (real time) ended. */
void tm_fleet_stats_tick_done(struct tm_fleet_stats *s, double seconds);

/* Provider p answered op with err (0: success).  TM_ECANCELED (abandoned at
 * shutdown) is not counted at all; a p out of range is ignored. */
void tm_fleet_stats_call(struct tm_fleet_stats *s, size_t p, enum tm_fleet_op op, int err);

/* The kind of a failed call's code. */
enum tm_fleet_err_kind tm_fleet_err_kind_of(int err);

/* Label values: "list", "launch", "terminate"; "auth", "throttled",
 * "quota", "unavailable", "timeout", "connection", "bad_reply",
 * "invalid", "other". */
const char *tm_fleet_op_name(enum tm_fleet_op op);
const char *tm_fleet_err_kind_name(enum tm_fleet_err_kind kind);

#endif
