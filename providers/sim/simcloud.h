/*
 * providers/sim/simcloud.h: a pure model of a cloud over time.
 *
 * No I/O, no clock, no globals: every function takes the time `now` (int64_t
 * milliseconds, virtual in replay, the controller's clock live) and the state
 * of an instance at `now` is a pure function of the timestamps stored in its
 * row (struct tm_sim_instance):
 *
 *   launched_ms <= now < ready_ms             pending
 *   ready_ms <= now                           running
 *   terminate_requested_ms <= now < end       stopping (shutdown_ms long)
 *   end <= now                                terminated
 *   end + retention_ms <= now                 gone: no longer listed
 *
 * where end = min(terminate_requested_ms + shutdown_ms, interrupt_ms).  A spot
 * instance whose interrupt_ms comes before any terminate request is
 * terminated with interrupted = true; its notice (notice_ms = interrupt_ms -
 * spot_notice_ms, never before launched_ms) is visible in struct
 * tm_instance.notice_ms from notice_ms on, 0 before.
 *
 * A spot instance's interrupt_ms is drawn at launch from an exponential
 * distribution with rate spot_hazard_per_hour, using a PRNG seeded by
 * (params.seed, token) only: the same launch always meets the same fate, in
 * memory and in the PostgreSQL-backed provider alike.  The hazard and the
 * notice are those of the launch's pool when params.pools names it (spot
 * capacity differs by instance type and zone, so operators set it per
 * pool), else the cloud-wide ones; a hazard set for the launch's (instance
 * type, zone) in params.cells (a fitted table: config spot_hazards) comes
 * before either.  Both are fixed into the row at launch:
 * changing them later does not change the fate of running instances.
 * A pool may also refuse spot launches (launch_failure): a draw from
 * (params.seed, token, now), independent of the lifetime draw, so a
 * retry of the same token later draws again.  The instance id is
 * derived from the token too ("sim-" and 16 hex digits), so both modes name
 * an instance the same way.
 *
 * struct tm_simcloud is an in-memory store of such rows (used by replay, the
 * in-memory provider and tests).  The row functions (tm_sim_*) are exposed
 * separately so that providers/sim/sim_provider.c can keep rows in
 * PostgreSQL and still compute states with exactly the same code.
 *
 * Times must not go backwards between calls on one struct tm_simcloud: rows
 * gone from listings are dropped from its active set (their tokens are kept
 * forever, so a relaunch with an old token still returns the old instance).
 */
#ifndef TM_SIMCLOUD_H
#define TM_SIMCLOUD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/model.h"
#include "providers/provider.h"

#define TM_SIM_TYPES_MAX 32
#define TM_SIM_ZONES_MAX 16
#define TM_SIM_POOLS_MAX 64
#define TM_SIM_RESERVATIONS_MAX 64
/* A block's instances are taken back this long before its end, as EC2
 * begins to take a Capacity Block's back 30 minutes before it ends. */
#define TM_SIM_BLOCK_END_MS (30LL * 60 * 1000)

/* "Never" for the optional timestamps of a row (no terminate request, no
 * interruption).  Stored as NULL in PostgreSQL. */
#define TM_SIM_NEVER INT64_MAX

/* One instance type on offer. */
struct tm_sim_type {
    char name[TM_ID_MAX];
    int gpus;
    char gpu_model[TM_ID_MAX];
    int64_t cpu_milli;
    int64_t memory_mib;
    int64_t on_demand_uusd_per_hour;
    int64_t spot_uusd_per_hour;    /* 0 = spot not offered for this type */
    unsigned capacity;             /* max non-terminated instances, 0 = unlimited */
};

/* The spot behaviour of one pool, for launches whose request names it. */
struct tm_sim_pool_spot {
    char pool[TM_ID_MAX];
    double hazard_per_hour;        /* interruptions per spot instance-hour; 0 = never */
    int64_t notice_ms;             /* notice before an interruption */
    /* Probability that a spot launch in this pool finds no capacity
     * (TM_EQUOTA), drawn per launch from (seed, token, now); 0 = always
     * obtainable.  Real spot capacity comes and goes by zone
     * (controller/fleet/spot_fit.h fits the share of probes that got it). */
    double launch_failure;
};

/* The spot hazard of one (instance type, zone), for launches there
 * whatever their pool.  Zeroed: not set. */
struct tm_sim_cell_spot {
    bool set;
    double hazard_per_hour;        /* interruptions per spot instance-hour; 0 = never */
};

/* Capacity bought ahead (a pool's `reservations:`): count instances of
 * one type in one zone, from start to end, for launches that name it.
 * Its instances are on demand and never count against the type's open
 * capacity; a block's are taken back TM_SIM_BLOCK_END_MS before its end
 * (interrupted, with the pool's notice). */
struct tm_sim_reservation {
    char id[TM_ID_MAX];
    char pool[TM_ID_MAX];
    char instance_type[TM_ID_MAX];
    char zone[TM_ID_MAX];
    unsigned count;
    int64_t start_ms, end_ms;      /* on the cloud's clock */
    bool block;
    bool only;                     /* its pool buys nothing past its reservations */
};

struct tm_simcloud_params {
    struct tm_sim_type types[TM_SIM_TYPES_MAX];
    size_t ntypes;
    char zones[TM_SIM_ZONES_MAX][TM_ID_MAX];
    size_t nzones;                 /* 0: one zone named "sim-a" */
    int64_t boot_delay_ms;         /* launch to running */
    double spot_hazard_per_hour;   /* interruptions per spot instance-hour; 0 = never */
    int64_t spot_notice_ms;        /* notice before an interruption */
    struct tm_sim_pool_spot pools[TM_SIM_POOLS_MAX]; /* per-pool overrides of the two above */
    size_t npools;
    /* pg mode: list only the instances of pools[] (the provider's own).
     * Set when one configuration has several sim providers (say, three
     * stand-in clouds of a pool group): they share one table, and each
     * would take the others' instances for orphans. */
    bool own_pools_only;
    /* Per (types[t], zones[z]) overrides of the hazard, a pool's included
     * (the notice stays the pool's). */
    struct tm_sim_cell_spot cells[TM_SIM_TYPES_MAX][TM_SIM_ZONES_MAX];
    struct tm_sim_reservation reservations[TM_SIM_RESERVATIONS_MAX];
    size_t nreservations;
    int64_t shutdown_ms;           /* terminate request to terminated */
    int64_t retention_ms;          /* terminated instances stay listed this long */
    uint64_t seed;
};

/* One instance as the simulated cloud stores it. */
struct tm_sim_instance {
    char id[TM_ID_MAX];
    char token[TM_ID_MAX];
    char cluster[TM_ID_MAX];
    char pool[TM_ID_MAX];
    int64_t node_id;
    char instance_type[TM_ID_MAX];
    char zone[TM_ID_MAX];
    enum tm_capacity_type capacity; /* TM_CAPACITY_SPOT or TM_CAPACITY_ON_DEMAND */
    int64_t launched_ms;
    int64_t ready_ms;               /* launched_ms + boot_delay_ms */
    int64_t terminate_requested_ms; /* TM_SIM_NEVER until terminate is asked */
    int64_t interrupt_ms;           /* TM_SIM_NEVER for on-demand (or hazard 0) */
    int64_t notice_ms;              /* TM_SIM_NEVER when interrupt_ms is */
    char reservation[TM_ID_MAX];    /* the reservation it runs in, "" none */
};

struct tm_simcloud;

/* Defaults: no types, no zones (one zone "sim-a"), boot 90 s, hazard 0,
 * notice 120 s, shutdown 30 s, retention 1 h, seed 1. */
void tm_simcloud_params_init(struct tm_simcloud_params *p);

/* The hazard and notice a spot launch in pool gets: the pool's entry in
 * p->pools, else the cloud-wide values (pool may be NULL or ""). */
void tm_sim_spot_for_pool(const struct tm_simcloud_params *p, const char *pool,
                          double *ret_hazard_per_hour, int64_t *ret_notice_ms);

/* The hazard and notice a spot launch of type in zone, in pool, gets: the
 * hazard of p->cells for (type, zone) when set, else the pool's as
 * tm_sim_spot_for_pool() gives it; the notice always as that gives it. */
void tm_sim_spot_for_launch(const struct tm_simcloud_params *p, const char *pool, const char *type,
                            const char *zone, double *ret_hazard_per_hour, int64_t *ret_notice_ms);

/* The type named name, or NULL. */
const struct tm_sim_type *tm_sim_type_find(const struct tm_simcloud_params *p, const char *name);

/*
 * The row a first launch of req at now would create, or an error:
 * TM_EINVAL (missing token/cluster/type, a string of TM_ID_MAX bytes or
 * more, capacity neither spot nor on_demand), TM_ENOTFOUND (unknown type or
 * zone), TM_EQUOTA (spot asked and the type offers none, or the pool's
 * launch_failure draw found no spot capacity at now).  Pure: does not
 * look at capacity or existing instances.  An empty or NULL zone picks one of
 * the zones from the token.
 */
int tm_sim_instance_plan(const struct tm_simcloud_params *p, const struct tm_launch_request *req,
                         int64_t now_ms, struct tm_sim_instance *ret);

/* The reservation id, or NULL. */
const struct tm_sim_reservation *tm_sim_reservation_find(const struct tm_simcloud_params *p,
                                                         const char *id);

/*
 * The row a first launch of req into reservation id at now would create
 * (on demand, in the reservation's zone, ending with a block), or an error:
 * those of tm_sim_instance_plan(), TM_ENOTFOUND (no such reservation),
 * TM_EINVAL (another type, or a zone the request names and the reservation
 * is not in), TM_EQUOTA (now is outside its term, or in a block's last
 * TM_SIM_BLOCK_END_MS).  Pure: does not count the reservation's instances.
 */
int tm_sim_reservation_plan(const struct tm_simcloud_params *p, const struct tm_launch_request *req,
                            const char *id, int64_t now_ms, struct tm_sim_instance *ret);

/* When the instance is (or will be) terminated; TM_SIM_NEVER if not yet. */
int64_t tm_sim_instance_end_ms(const struct tm_simcloud_params *p, const struct tm_sim_instance *row);

/* Whether it counts against its type's capacity at now (not terminated). */
bool tm_sim_instance_alive(const struct tm_simcloud_params *p, const struct tm_sim_instance *row,
                           int64_t now_ms);

/* The instance as the cloud sees it at now, in *ret.  Returns false once it
 * is gone from listings (retention_ms after it ended; ret then shows it
 * terminated). */
bool tm_sim_instance_view(const struct tm_simcloud_params *p, const struct tm_sim_instance *row,
                          int64_t now_ms, struct tm_instance *ret);

/* The first boot completion, notice, interruption or end of a shutdown of
 * this row strictly after now; TM_SIM_NEVER if none. */
int64_t tm_sim_instance_next_event_ms(const struct tm_simcloud_params *p,
                                      const struct tm_sim_instance *row, int64_t now_ms);

/*
 * Rows as text, for storage.  The fields, in this order, are the columns of
 * TM_SIM_ROW_COLUMNS; integers are decimal, capacity is the model.h name,
 * TM_SIM_NEVER is a NULL field.  to_row points ret->fields into ret->buf.
 * from_row returns TM_EBADREPLY for a missing, malformed or too long field.
 */
#define TM_SIM_ROW_NFIELDS 14
#define TM_SIM_ROW_COLUMNS                                                         \
    "id, token, cluster, pool, node_id, instance_type, zone, capacity, "           \
    "launched_ms, ready_ms, terminate_requested_ms, interrupt_ms, notice_ms, "     \
    "reservation"

struct tm_sim_row_text {
    char buf[TM_SIM_ROW_NFIELDS][TM_ID_MAX];
    const char *fields[TM_SIM_ROW_NFIELDS];
};

void tm_sim_instance_to_row(const struct tm_sim_instance *row, struct tm_sim_row_text *ret);
int tm_sim_instance_from_row(const char *const fields[TM_SIM_ROW_NFIELDS],
                             struct tm_sim_instance *ret);

/* The in-memory cloud.  params are copied.  TM_EINVAL when a type has no
 * name or a name repeats, or there are more types, zones or pools than
 * fit; TM_ENOMEM. */
int tm_simcloud_create(const struct tm_simcloud_params *params, struct tm_simcloud **ret_sc);
/* Accepts NULL; returns NULL. */
struct tm_simcloud *tm_simcloud_free(struct tm_simcloud *sc);
const struct tm_simcloud_params *tm_simcloud_params(const struct tm_simcloud *sc);

/*
 * Launch at now.  A launch with a token seen before returns that same
 * instance (as it is at now, whatever its state) and never creates a second
 * one, even when capacity is now short.  Otherwise the errors of
 * tm_sim_instance_plan(), or TM_EQUOTA when the type's capacity is used up by
 * non-terminated instances; TM_ENOMEM.  ret may be NULL.
 */
int tm_simcloud_launch(struct tm_simcloud *sc, const struct tm_launch_request *req,
                       int64_t now_ms, struct tm_instance *ret);
/* The same into reservation id (tm_sim_reservation_plan), TM_EQUOTA when
 * its count is taken by instances alive at now. */
int tm_simcloud_launch_reserved(struct tm_simcloud *sc, const struct tm_launch_request *req,
                                const char *id, int64_t now_ms, struct tm_instance *ret);

/* Ask for termination at now.  Idempotent (the first request time is
 * kept); TM_ENOTFOUND for an id never launched or already gone from
 * listings. */
int tm_simcloud_terminate(struct tm_simcloud *sc, const char *id, int64_t now_ms);

/* Every listed instance whose cluster equals cluster, in launch order.
 * *ret_list is malloc'ed (caller frees with free(); NULL when *ret_n is 0).
 * TM_ENOMEM. */
int tm_simcloud_list(struct tm_simcloud *sc, const char *cluster, int64_t now_ms,
                     struct tm_instance **ret_list, size_t *ret_n);

/* The stored row of an id or token (NULL when unknown).  Valid until the
 * next launch. */
const struct tm_sim_instance *tm_simcloud_find(const struct tm_simcloud *sc, const char *id);
const struct tm_sim_instance *tm_simcloud_find_token(const struct tm_simcloud *sc, const char *token);

/* Number of non-terminated instances of a type at now. */
unsigned tm_simcloud_count_alive(struct tm_simcloud *sc, const char *instance_type, int64_t now_ms);

/* Hourly price in micro-dollars.  zone may be NULL or "" (any zone).
 * TM_ENOTFOUND for an unknown type or zone, or spot where none is offered. */
int tm_simcloud_price(const struct tm_simcloud_params *p, const char *instance_type,
                      const char *zone, enum tm_capacity_type capacity, int64_t *ret_uusd_per_hour);

/* The next boot completion, notice, interruption or shutdown end strictly
 * after now over all instances, for a discrete-event replay; TM_SIM_NEVER
 * when nothing is due. */
int64_t tm_simcloud_next_event_ms(struct tm_simcloud *sc, int64_t now_ms);

#endif
