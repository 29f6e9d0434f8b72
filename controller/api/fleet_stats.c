/*
 * controller/api/fleet_stats.c: see fleet_stats.h.
 */
#include "controller/api/fleet_stats.h"

#include <errno.h>
#include <stdlib.h>

#include "core/err.h"

/* A tick is a listing per provider, a snapshot, a pass and a plan: a few
 * milliseconds on a small fleet (the sim cloud, a handful of nodes), a
 * second or more on 100k jobs or a slow cloud. */
const double tm_fleet_tick_bounds_s[TM_FLEET_TICK_BUCKETS] = {
    0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30,
};

int tm_fleet_stats_init(struct tm_fleet_stats *s, const char *const *names, size_t n)
{
    *s = (struct tm_fleet_stats){0};
    s->providers = calloc(n + 1, sizeof(*s->providers));
    if (!s->providers)
        return TM_ENOMEM;
    for (size_t i = 0; i < n; i++)
        s->providers[i].name = names[i];
    s->nproviders = n;
    return 0;
}

void tm_fleet_stats_release(struct tm_fleet_stats *s)
{
    free(s->providers);
    *s = (struct tm_fleet_stats){0};
}

void tm_fleet_stats_tick_done(struct tm_fleet_stats *s, double seconds)
{
    size_t b = 0;

    if (!(seconds >= 0))
        seconds = 0;
    while (b < TM_FLEET_TICK_BUCKETS && seconds > tm_fleet_tick_bounds_s[b])
        b++;
    s->tick_buckets[b]++;
    s->tick_count++;
    s->tick_seconds_sum += seconds;
}

void tm_fleet_stats_call(struct tm_fleet_stats *s, size_t p, enum tm_fleet_op op, int err)
{
    if (p >= s->nproviders || op >= TM_FLEET_OP_MAX || err == TM_ECANCELED)
        return;
    s->providers[p].calls[op]++;
    if (err < 0)
        s->providers[p].errors[op][tm_fleet_err_kind_of(err)]++;
}

enum tm_fleet_err_kind tm_fleet_err_kind_of(int err)
{
    switch (err) {
    case TM_EAUTH: return TM_FLEET_ERR_AUTH;
    case TM_ETHROTTLED: return TM_FLEET_ERR_THROTTLED;
    case TM_EQUOTA: return TM_FLEET_ERR_QUOTA;
    case TM_EUNAVAIL: return TM_FLEET_ERR_UNAVAILABLE;
    case -ETIMEDOUT: return TM_FLEET_ERR_TIMEOUT;
    case -ECONNREFUSED:
    case -ECONNRESET: return TM_FLEET_ERR_CONNECTION;
    case TM_EBADREPLY: return TM_FLEET_ERR_BAD_REPLY;
    case TM_EINVAL: return TM_FLEET_ERR_INVALID;
    default: return TM_FLEET_ERR_OTHER;
    }
}

const char *tm_fleet_op_name(enum tm_fleet_op op)
{
    static const char *const names[TM_FLEET_OP_MAX] = {"list", "launch", "terminate"};
    return op < TM_FLEET_OP_MAX ? names[op] : "unknown";
}

const char *tm_fleet_err_kind_name(enum tm_fleet_err_kind kind)
{
    static const char *const names[TM_FLEET_ERR_MAX] = {
        "auth", "throttled", "quota", "unavailable", "timeout",
        "connection", "bad_reply", "invalid", "other",
    };
    return kind < TM_FLEET_ERR_MAX ? names[kind] : "other";
}
