/*
 * providers/sim/sim_config.c: kind sim's keys in the configuration file
 * (core/config_kind.h).  The simulated cloud knows only the instance types
 * the file describes, and its boot time is its own key.
 */
#include "providers/sim/sim_config.h"

#include <string.h>

#include "core/config_kind.h"

static const struct cfg_field sim_fields[] = {
    {.key = "boot_delay", .type = CFG_DURATION, .offset = CFG_OFF(tm_config_sim, boot_delay_ms),
     .def = "90s", .min = 0, .max = CFG_DAY},
    {.key = "shutdown_delay", .type = CFG_DURATION,
     .offset = CFG_OFF(tm_config_sim, shutdown_delay_ms), .def = "30s", .min = 0, .max = CFG_HOUR},
    {.key = "seed", .type = CFG_U64, .offset = CFG_OFF(tm_config_sim, seed), .def = "1"},
};
static const struct cfg_section sim_block = {
    .fields = sim_fields, .nfields = CFG_NFIELDS(sim_fields), .size = sizeof(struct tm_config_sim)};

static int64_t sim_boot_ms(const struct tm_config_provider *p)
{
    return tm_sim_config(p)->boot_delay_ms;
}

/* The simulated cloud says nothing of a reservation: the file says it
 * all, or the sim would have nothing to hold it to.  Its clock may be a
 * replay's, so a term in the past is not refused here. */
static int sim_check_pools(struct cfg_ctx *c, const struct tm_config *cfg, size_t i)
{
    static const char *const need[] = {"instance_type", "zone", "count", "start", "end"};

    for (size_t p = 0; p < cfg->npools; p++) {
        const struct tm_config_pool *pool = &cfg->pools[p];

        if (strcmp(pool->provider, cfg->providers[i].name) != 0)
            continue;
        for (size_t k = 0; k < pool->nreservations; k++) {
            const struct tm_config_reservation *r = &pool->reservations[k];
            const bool have[] = {r->instance_type, r->zone, r->count > 0, r->start, r->end};

            for (size_t f = 0; f < sizeof(need) / sizeof(need[0]); f++)
                if (!have[f]) {
                    tm_cfg_path_set(c, "pools[%zu].reservations[%zu].%s", p, k, need[f]);
                    return tm_cfg_fail_at(c, "required for a sim reservation (the simulated "
                                          "cloud says nothing of it)");
                }
        }
    }
    return 0;
}

const struct tm_config_kind tm_config_kind_sim = {
    .name = "sim",
    .block = &sim_block,
    .types_closed = true,
    .check_pools = sim_check_pools,
    .boot_ms = sim_boot_ms,
    .reservations = true,
};
