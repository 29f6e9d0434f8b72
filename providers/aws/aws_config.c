/*
 * providers/aws/aws_config.c: kind aws's keys in the configuration file
 * (core/config_kind.h).  EC2 offers types the file need not describe.
 */
#include "core/config_kind.h"

static const struct cfg_field aws_keys[] = {
    /* The machine image (AMI) launches use; may be left out. */
    {.key = "image_id", .type = CFG_STR, .offset = CFG_OFF(tm_config_provider, image_id)},
};

const struct tm_config_kind tm_config_kind_aws = {
    .name = "aws",
    .keys = aws_keys,
    .nkeys = CFG_NFIELDS(aws_keys),
};
