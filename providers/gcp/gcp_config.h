/*
 * providers/gcp/gcp_config.h: kind gcp's block of the configuration
 * (gcp_config.c fills it from a provider's keys; core holds it at
 * p->kind_block without knowing what is in it).  providers/gcp/README.md
 * says what each key is for.
 */
#ifndef TM_GCP_CONFIG_H
#define TM_GCP_CONFIG_H

#include "core/config.h"

struct tm_config_gcp {
    char *project;                /* project id, required */
    /* Token endpoint, JWT audience and metadata server: NULL for Google's
     * (tests point them at a loopback fake). */
    char *token_url;
    char *token_audience;
    char *metadata_url;
    char *image_id;               /* the boot disk's image, may be NULL */
};

/* The block of p, a provider of kind gcp (never NULL once loaded). */
static inline const struct tm_config_gcp *tm_gcp_config(const struct tm_config_provider *p)
{
    return (const struct tm_config_gcp *)p->kind_block;
}

#endif
