/*
 * controller/daemon/calls.h: the work the daemon has in flight beside its
 * tick: the cloud calls a committed plan asks for (launch, terminate) and
 * the store writes nobody waits on (agent reports, spend accrual, the
 * forecast warm-up).  A stop waits until none is left; the owner learns
 * that through the on_none_left callback it gives.
 *
 * The sets of launches and terminates in flight keep a tick from asking a
 * cloud twice for the same node; the capacity a cloud refused lately
 * (TM_EQUOTA) is remembered here, because the launch callbacks add to it
 * while a pass may run.  Loop thread only.
 */
#ifndef TM_DAEMON_CALLS_H
#define TM_DAEMON_CALLS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <cjson/cJSON.h>

#include "controller/api/fleet_stats.h"
#include "controller/daemon/controller.h"
#include "controller/io/pg_uv.h"
#include "controller/reconcile/reconcile.h"
#include "core/clock.h"
#include "core/config.h"
#include "providers/provider.h"

#define TM_CALLS_SHORTAGES_MAX 64

struct tm_calls;

/* One call in flight; calls.c allocates and frees it (tm_calls_new,
 * tm_call_done).  The store writes' callbacks read node_id. */
struct tm_call {
    struct tm_calls *calls;
    int64_t node_id;
    int provider;                  /* index in cfg->providers, -1 for a store write */
    char instance_id[TM_ID_MAX];
    char token[TM_ID_MAX];
    char instance_type[TM_ID_MAX]; /* launches: what was asked, remembered if short */
    char zone[TM_ID_MAX];
    bool spot;
    /* A launch waiting for its enrollment secret's row: the request, and
     * the filled bootstrap it carries (a secret: wiped and freed by
     * tm_call_done). */
    struct tm_provider *launch_via;
    struct tm_launch_request req;
    char *bootstrap;
    size_t bootstrap_len;
    /* A member of a gang's launch set (calls.c's struct set_call): it goes
     * to the cloud with the others once every member is prepared. */
    struct set_call *set;
};

struct tm_calls {
    /* Given by the owner before the first call.  pool, epoch and closing
     * point at the owner's own fields and are read when a call ends, so
     * they follow leadership and shutdown. */
    const struct tm_config *cfg;
    struct tm_pg_pool *const *pool;
    const int64_t *epoch;
    const bool *closing;
    struct tm_clock *clock;
    struct tm_fleet_stats *fleet;
    struct tm_controller_stats *stats;  /* launches, launch_errors, terminates */
    void (*on_none_left)(void *data);   /* the last call in flight ended */
    /* A launch came back short (TM_EQUOTA), the shortage is remembered
     * and its node row given up: a pass now may buy elsewhere (the next
     * zone, type or cloud) instead of a tick later.  May be NULL. */
    void (*on_shortage)(void *data);
    void *data;

    /* Owned by calls.c: read through the functions below. */
    unsigned inflight;
    struct tm_launching {
        int64_t node;
        bool settled; /* outcome recorded, not yet in a snapshot */
    } *launching;
    size_t nlaunching, launching_cap;
    char (*terminating)[TM_ID_MAX];
    size_t nterminating, terminating_cap;
    struct tm_live_shortage shortages[TM_CALLS_SHORTAGES_MAX];
    size_t nshortages;
};

/* Free the sets; calls still in flight are the owner's to have waited for. */
void tm_calls_release(struct tm_calls *calls);

/* A new call counted in flight (provider -1 and node 0 for a store write
 * not about one node), or NULL when out of memory.  End it exactly once
 * with tm_call_done(), which frees it and may call on_none_left. */
struct tm_call *tm_calls_new(struct tm_calls *calls, int provider, int64_t node);
void tm_call_done(struct tm_call *c);

/* How many calls are in flight. */
unsigned tm_calls_inflight(const struct tm_calls *calls);

/* The pass is about to read its snapshot: launches whose outcome is
 * recorded by now are in it, so they stop counting as in flight.  Until
 * then a pass whose snapshot was read before the record still sees the
 * node requested, and tm_calls_start() must not launch it again. */
void tm_calls_snapshot_taken(struct tm_calls *calls);

/* Start the launches and terminates of plan, which the database applied
 * (applied: tarmac_apply's result with the new nodes' ids and the
 * releases it kept; NULL when the plan had no actions).  providers[i] is
 * cfg->providers[i]'s, NULL when not built. */
void tm_calls_start(struct tm_calls *calls, struct tm_rc_plan *plan, struct tm_provider **providers,
                    const cJSON *applied);

/* Record what provider p learned of its cloud on its own (ops->notices: a
 * reservation that ended) as decisions about its pools, one store write
 * counted in flight; nothing when it has none. */
void tm_calls_notices(struct tm_calls *calls, struct tm_provider *p);
/* Forget the shortages expired at now_ms and copy the rest into out
 * (TM_CALLS_SHORTAGES_MAX entries); returns how many. */
size_t tm_calls_shortages(struct tm_calls *calls, int64_t now_ms, struct tm_live_shortage *out);

/* Fault injection for the crash tests: TARMAC_CRASH_POINT=NAME kills the
 * process with SIGKILL (as kill -9 would) when it reaches that point:
 *   after_apply   the plan (node rows, tokens) committed, no cloud call yet
 *   after_launch  the cloud made the instance, its id not yet recorded
 * Unset in production: getenv is the whole cost. */
void tm_crash_point(const char *name);
/* The same for a stall: TARMAC_STALL_POINT=NAME blocks the loop thread
 * TARMAC_STALL_MS milliseconds there, once (a SIGSTOP at a chosen place):
 *   apply_reply   the plan committed and its reply read, nothing done yet */
void tm_stall_point(const char *name);

#endif
