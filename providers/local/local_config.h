/*
 * providers/local/local_config.h: kind local's block of the configuration
 * (local_config.c fills it from a provider's keys; core holds it at
 * p->kind_block without knowing what is in it).
 */
#ifndef TM_LOCAL_CONFIG_H
#define TM_LOCAL_CONFIG_H

#include "core/config.h"

struct tm_config_local {
    char *state_dir;              /* per-node folders, required */
    /* The agents' notice source: its own (default "local"), a cloud's (a
     * fake at metadata_url) or none. */
    char *metadata;
    char *metadata_url;           /* the metadata fake's root for aws|gcp|azure */
    double gpu_util_percent;      /* the fake GPUs' utilisation, default 0 */
    /* A fake GPU's utilisation while a job holds it; 0 (default):
     * gpu_util_percent, busy or not. */
    double gpu_busy_util_percent;
    char *agent_args;             /* extra `tarmac agent` flags ($TARMAC_AGENT_ARGS) */
};

/* The block of p, a provider of kind local (never NULL once loaded). */
static inline const struct tm_config_local *tm_local_config(const struct tm_config_provider *p)
{
    return (const struct tm_config_local *)p->kind_block;
}

#endif
