/*
 * providers/sim/sim_config.c: kind sim's keys in the configuration file
 * (core/config_kind.h).  The simulated cloud knows only the instance types
 * the file describes, and its boot time is its own key.
 */
#include "providers/sim/sim_config.h"

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

const struct tm_config_kind tm_config_kind_sim = {
    .name = "sim",
    .block = &sim_block,
    .types_closed = true,
    .boot_ms = sim_boot_ms,
};
