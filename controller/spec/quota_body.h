/*
 * controller/spec/quota_body.h: the body of PUT /v1/quotas/{team}, read and
 * checked for its shape before anything touches the database.  Pure.
 *
 *   {"flavor": "H100", "gpus": 8, "borrowing_limit": 4, "lending_limit": 8,
 *    "org": "research", "weight": 2}
 *
 * gpus is required; flavor may be left out when the fleet has one (the
 * API fills it in, flavor[0] is then ""); the limits may be null (unlimited; all of
 * the idle quota), org null (none), weight defaults to 1.  Only the shape
 * is checked here (a number where a number goes, a name where a name
 * goes, no unknown or repeated field): the values (whole, not negative, a
 * flavor the fleet has, an org that does not contain itself) are checked
 * with the whole set by the scheduler's quota model, one copy of the rule
 * (controller/sched/quota.h, tm_quota_build).
 */
#ifndef TM_SPEC_QUOTA_BODY_H
#define TM_SPEC_QUOTA_BODY_H

#include <stdbool.h>
#include <stddef.h>

#include "controller/spec/spec_error.h"

struct tm_api_quota_body {
    char flavor[64];         /* "": not given */
    char org[64];            /* "": none */
    double gpus;
    double borrowing_limit;  /* NAN: unlimited */
    double lending_limit;    /* NAN: all of the idle quota */
    double weight;           /* NAN: 1 */
};

/* 0, or TM_EINVAL with err naming the field. */
int tm_api_parse_quota(const char *body, size_t len, struct tm_api_quota_body *ret,
                       struct tm_spec_error *err);

#endif
