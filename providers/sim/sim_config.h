/*
 * providers/sim/sim_config.h: kind sim's block of the configuration
 * (sim_config.c fills it from a provider's keys; core holds it at
 * p->kind_block without knowing what is in it).
 */
#ifndef TM_SIM_CONFIG_H
#define TM_SIM_CONFIG_H

#include <stdint.h>

#include "core/config.h"

struct tm_config_sim {
    int64_t boot_delay_ms;        /* launch to running, default 90 s */
    int64_t shutdown_delay_ms;    /* terminate request to terminated, default 30 s */
    uint64_t seed;                /* random seed, default 1 */
};

/* The block of p, a provider of kind sim (never NULL once loaded). */
static inline const struct tm_config_sim *tm_sim_config(const struct tm_config_provider *p)
{
    return (const struct tm_config_sim *)p->kind_block;
}

#endif
