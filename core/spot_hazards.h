/*
 * core/spot_hazards.h: a table of spot interruption hazards and
 * launch availabilities per (instance type, zone), for the elastic replay
 * (`tarmac replay --elastic --hazards FILE`) and the live controller (a
 * provider's `spot_hazards: FILE`, loaded with the configuration,
 * core/config.h).  `tarmac spot-fit --yaml` writes this format from the
 * real traces (config/spot-hazards-aws.yaml).
 *
 * The file is YAML:
 *
 *   hazards:
 *     - type: p3.2xlarge          # required: an instance type name
 *       zone: us-east-1c          # required: a zone name
 *       nodes: 1                  # optional, default 1: instances requested
 *                                 #   at once in the trace; the replay reads
 *                                 #   only rows of 1 (it launches one at a time)
 *       hazard_per_hour: 0.7353   # interruptions per instance-hour, >= 0
 *       availability: 0.467       # probability a spot launch gets capacity, 0..1
 *       # at least one of the two; the rest is what spot-fit reports, read
 *       # and kept for reference only:
 *       provider: aws
 *       events: 41
 *       up_hours: 55.76
 *       hazard_low95: 0.53
 *       hazard_high95: 1.0
 *       availability_hours: 1092
 *       sources: [preemption/1-node/aws-04-22-2023/us-east-1c_v100_1.json]
 *
 * Type and zone are matched by exact name against the price table's (or,
 * live, a pool's instance types and zones); a row naming a pair twice
 * (same nodes) is an error, as are unknown keys.
 * Errors name the file, the line and the reason: "FILE:LINE: reason".
 */
#ifndef TM_SPOT_HAZARDS_H
#define TM_SPOT_HAZARDS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define TM_SPOT_HAZARDS_MAX 256
#define TM_SPOT_HAZARD_NAME_MAX 64

struct tm_spot_hazard {
    char type[TM_SPOT_HAZARD_NAME_MAX];
    char zone[TM_SPOT_HAZARD_NAME_MAX];
    int32_t nodes;
    bool has_hazard;
    double hazard_per_hour;
    bool has_availability;
    double availability;
};

struct tm_spot_hazards {
    struct tm_spot_hazard rows[TM_SPOT_HAZARDS_MAX];
    size_t n;
};

/* Load from path.  0; TM_EINVAL with err filled ("FILE:LINE: reason");
 * -errno when the file cannot be read. */
int tm_spot_hazards_load(const char *path, struct tm_spot_hazards *ret, char *err, size_t errlen);

/* The same from a buffer; name is used in messages. */
int tm_spot_hazards_parse(const char *name, const char *text, size_t len,
                          struct tm_spot_hazards *ret, char *err, size_t errlen);

/* The 1-instance row for (type, zone), or NULL. */
const struct tm_spot_hazard *tm_spot_hazards_find(const struct tm_spot_hazards *h, const char *type,
                                                  const char *zone);

/* Whether h (may be NULL) gives (type, zone) a hazard, as a 1-instance row
 * with hazard_per_hour (a row with an availability only does not); the
 * hazard goes to *ret_hazard_per_hour (may be NULL). */
bool tm_spot_hazards_fitted(const struct tm_spot_hazards *h, const char *type, const char *zone,
                            double *ret_hazard_per_hour);

#endif
