/*
 * controller/api/quotas.h: team GPU quotas over the API (PUT, DELETE and
 * GET /v1/quotas, docs/quotas.md) and their /metrics gauges.
 *
 * A set of quotas is valid or not as a whole (an org that contains itself
 * through another row, a team in two orgs), and the rule is the
 * scheduler's quota model (controller/sched/quota.h), which this layer may
 * not include (docs/architecture.md).  So the daemon, which may, hands the
 * API the check at start (tm_api_quotas_set_check): one copy of the rule,
 * run on the whole set as it would be after the write, before anything is
 * written.  Without a check (an API started alone, by a test or a tool)
 * quota writes answer 503.
 *
 * What each team uses, borrows and lends is known to the tick, not the
 * database: the daemon publishes each pass's view (tm_api_quotas_publish),
 * which GET /v1/quotas and /metrics show with its time.  A replica that
 * does not tick shows the quotas without usage.
 */
#ifndef TM_API_QUOTAS_H
#define TM_API_QUOTAS_H

#include <stddef.h>

#include "core/config.h"

struct tm_api_quota_row {
    const char *team;
    const char *org;          /* "" or NULL: none */
    const char *flavor;
    double gpus;
    double borrowing_limit;   /* NAN: unlimited */
    double lending_limit;     /* NAN: all of the idle quota */
    double weight;            /* NAN: 1 */
};

/* 0, or TM_EINVAL with err "quotas[i].field: reason" (i indexes rows), or
 * TM_ENOMEM. */
typedef int (*tm_api_quota_check_fn)(const struct tm_config *cfg, const struct tm_api_quota_row *rows,
                                     size_t n, char *err, size_t errlen);

/* The flavor config pool pi is under (a quota's flavor names pools). */
typedef const char *(*tm_api_pool_flavor_fn)(const struct tm_config *cfg, size_t pi);

/* Set once, before the API serves (the daemon's). */
void tm_api_quotas_set_check(tm_api_quota_check_fn check, tm_api_pool_flavor_fn pool_flavor);

/* The latest pass's view (JSON: {"computed_ms", "overcommit", "items":
 * [{"team", "flavor", "org", "is_org", "quota", "used", "borrowed",
 * "lent"}]}), copied; NULL forgets it.  On the loop thread. */
void tm_api_quotas_publish(const char *view_json);
/* The view published last, or NULL (for /metrics). */
const char *tm_api_quotas_view(void);

#endif
