/*
 * providers/aws/aws_config.h: kind aws's block of the configuration
 * (aws_config.c fills it from a provider's keys; core holds it at
 * p->kind_block without knowing what is in it).
 */
#ifndef TM_AWS_CONFIG_H
#define TM_AWS_CONFIG_H

#include "core/config.h"

struct tm_config_aws {
    char *image_id;               /* machine image (AMI) for launches, may be NULL */
};

/* The block of p, a provider of kind aws (never NULL once loaded). */
static inline const struct tm_config_aws *tm_aws_config(const struct tm_config_provider *p)
{
    return (const struct tm_config_aws *)p->kind_block;
}

#endif
