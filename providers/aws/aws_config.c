/*
 * providers/aws/aws_config.c: kind aws's keys in the configuration file
 * (core/config_kind.h).  EC2 offers types the file need not describe.
 */
#include "providers/aws/aws_config.h"

#include <ctype.h>
#include <string.h>
#include <time.h>

#include "core/config_kind.h"

static const struct cfg_field aws_fields[] = {
    /* The machine image (AMI) launches use; may be left out. */
    {.key = "image_id", .type = CFG_STR, .offset = CFG_OFF(tm_config_aws, image_id)},
};
static const struct cfg_section aws_block = {
    .fields = aws_fields, .nfields = CFG_NFIELDS(aws_fields), .size = sizeof(struct tm_config_aws)};

/* EC2's capacity reservation ids (Capacity Blocks' too): "cr-" and 17
 * lower-case hex digits. */
static bool aws_reservation_id(const char *id)
{
    if (strncmp(id, "cr-", 3) != 0 || strlen(id) != 20)
        return false;
    for (const char *p = id + 3; *p; p++)
        if (!isxdigit((unsigned char)*p) || isupper((unsigned char)*p))
            return false;
    return true;
}

/* A pool's reservations: ids EC2 could have issued, and no block the file
 * itself says is over (EC2's word on the rest is heard at start). */
static int aws_check_pools(struct cfg_ctx *c, const struct tm_config *cfg, size_t i)
{
    const char *name = cfg->providers[i].name;
    int64_t now = (int64_t)time(NULL) * 1000;

    for (size_t p = 0; p < cfg->npools; p++) {
        const struct tm_config_pool *pool = &cfg->pools[p];

        if (strcmp(pool->provider, name) != 0)
            continue;
        for (size_t k = 0; k < pool->nreservations; k++) {
            const struct tm_config_reservation *r = &pool->reservations[k];

            if (!aws_reservation_id(r->id)) {
                tm_cfg_path_set(c, "pools[%zu].reservations[%zu].id", p, k);
                return tm_cfg_fail_at(c, "\"%s\" is not an EC2 capacity reservation id "
                                      "(cr- and 17 hex digits)", r->id);
            }
            if (r->end && r->end_ms <= now) {
                tm_cfg_path_set(c, "pools[%zu].reservations[%zu].end", p, k);
                return tm_cfg_fail_at(c, "the %s ended at %s", r->block ? "block" : "reservation",
                                      r->end);
            }
        }
    }
    return 0;
}

const struct tm_config_kind tm_config_kind_aws = {
    .name = "aws",
    .block = &aws_block,
    .check_pools = aws_check_pools,
    .reservations = true,
};
