/*
 * providers/sim/sim_provider.h: the simulated cloud behind the provider ops
 * (providers/provider.h), on the controller's libuv loop.
 *
 * Two modes, with the same states, ids and interruption fates (both compute
 * them with providers/sim/simcloud.h from the same timestamps):
 *
 *  - memory: the instances live in a struct tm_simcloud inside the process.
 *    For replay (virtual clock), tests and a throwaway demo.  Each operation
 *    runs on a later loop iteration (a zero timer), never inside the call.
 *
 *  - pg: the instances live OUTSIDE the controller, in the PostgreSQL schema
 *    "simcloud" of the database at conninfo (its own connection, created on
 *    first use with CREATE ... IF NOT EXISTS: a fake cloud's data, not
 *    tarmac's, so not in migrations/).  A controller killed with -9 finds on
 *    restart exactly what it had launched.  Launch is one statement calling
 *    a server-side function that takes a per-type advisory lock, returns the
 *    existing row for a known token, checks the type's capacity and inserts
 *    with ON CONFLICT (token) DO NOTHING: idempotent under concurrency and
 *    crashes, and capacity is never exceeded by concurrent launchers.
 *
 * Both modes read time only from now_ms(clock), the controller's clock (the
 * demo accelerates it; replay makes it virtual); every stored timestamp
 * comes from it.
 *
 * Calls: launch, terminate and list return 0 and call back exactly once,
 * later; or return TM_EINVAL (NULL or over-long arguments) or TM_ECANCELED
 * (closing) and never call back.  Callback statuses: 0, TM_EQUOTA (capacity
 * used, or spot not offered for the type), TM_ENOTFOUND (unknown type or
 * zone; terminate of an unknown id), TM_ECANCELED (closed first), and in pg
 * mode TM_EUNAVAIL (the database refused or the connection broke: the
 * launch may or may not have happened; retry with the same token), or
 * -ETIMEDOUT (no connection in time).
 *
 * close(): calls in flight get TM_ECANCELED (on a later iteration, not
 * inside close), the connection and timers are closed, then done fires and
 * the provider is freed; uv_loop_close() then returns 0.
 */
#ifndef TM_SIM_PROVIDER_H
#define TM_SIM_PROVIDER_H

#include <stdint.h>

#include <uv.h>

#include "providers/provider.h"
#include "providers/sim/simcloud.h"

struct tm_config;
struct tm_config_provider;

typedef int64_t (*tm_sim_clock_fn)(void *clock);

/* In-memory mode.  params are copied.  TM_EINVAL, TM_ENOMEM or a libuv code. */
int tm_sim_provider_create_memory(uv_loop_t *loop, const struct tm_simcloud_params *params,
                                  tm_sim_clock_fn now_ms, void *clock,
                                  struct tm_provider **ret);

/* PostgreSQL-backed mode.  params and conninfo are copied; the connection
 * starts at once and the schema is created before the first operation. */
int tm_sim_provider_create_pg(uv_loop_t *loop, const struct tm_simcloud_params *params,
                              const char *conninfo, tm_sim_clock_fn now_ms, void *clock,
                              struct tm_provider **ret);

/* The in-memory cloud behind a memory-mode provider (NULL in pg mode), for
 * replay and tests to inspect (tm_simcloud_next_event_ms() and friends). */
struct tm_simcloud *tm_sim_provider_cloud(struct tm_provider *p);

/*
 * Simulation parameters from a configured provider of kind "sim": its types,
 * boot delay, hazard, notice and seed; the zones are the union of the zones
 * of cfg's pools that use this provider, each such pool's spot hazard
 * and notice go into params.pools (cfg may be NULL: no zones, i.e. the
 * single default zone, and no pools), and each (type, zone) the
 * provider's spot_hazards table gives a hazard for goes into
 * params.cells.  Other fields keep
 * tm_simcloud_params_init()'s defaults.  TM_EINVAL when there are more
 * types, zones or pools than fit or a name is too long.
 */
int tm_sim_params_from_config(const struct tm_config *cfg, const struct tm_config_provider *prov,
                              struct tm_simcloud_params *ret);

#endif
