/*
 * providers/aws/aws_config.c: kind aws's keys in the configuration file
 * (core/config_kind.h).  EC2 offers types the file need not describe.
 */
#include "providers/aws/aws_config.h"

#include "core/config_kind.h"

static const struct cfg_field aws_fields[] = {
    /* The machine image (AMI) launches use; may be left out. */
    {.key = "image_id", .type = CFG_STR, .offset = CFG_OFF(tm_config_aws, image_id)},
};
static const struct cfg_section aws_block = {
    .fields = aws_fields, .nfields = CFG_NFIELDS(aws_fields), .size = sizeof(struct tm_config_aws)};

const struct tm_config_kind tm_config_kind_aws = {
    .name = "aws",
    .block = &aws_block,
};
