/*
 * controller/daemon/quotas.c: the API's quota check and view (quotas.h).
 */
#include "controller/daemon/quotas.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "controller/api/quotas.h"
#include "controller/reconcile/reconcile.h"
#include "core/err.h"
#include "core/log.h"

/* The API's rows as the model's: the same fields, one layer down. */
static int check(const struct tm_config *cfg, const struct tm_api_quota_row *rows, size_t n, char *err,
                 size_t errlen)
{
    struct tm_quota_row *q;
    int r;

    if (!cfg) {
        snprintf(err, errlen, "quotas: the server has no configuration to check flavors against");
        return TM_EINVAL;
    }
    q = calloc(n + 1, sizeof(*q));
    if (!q)
        return TM_ENOMEM;
    for (size_t i = 0; i < n; i++)
        q[i] = (struct tm_quota_row){
            .team = rows[i].team, .org = rows[i].org, .flavor = rows[i].flavor, .gpus = rows[i].gpus,
            .borrowing_limit = rows[i].borrowing_limit, .lending_limit = rows[i].lending_limit,
            .weight = rows[i].weight,
        };
    r = tm_reconcile_quota_check(cfg, q, n, err, errlen);
    free(q);
    return r;
}

void tm_daemon_quotas_start(void)
{
    tm_api_quotas_set_check(check, tm_reconcile_pool_flavor);
}

/* The overcommit and the refusal said last, so that each is said once
 * when it appears or changes, not every pass. */
static char said[256], said_error[256];

void tm_daemon_quotas_publish(const char *view_json)
{
    cJSON *view = view_json ? cJSON_Parse(view_json) : NULL;
    const char *over = cJSON_GetStringValue(cJSON_GetObjectItem(view, "overcommit"));
    const char *error = cJSON_GetStringValue(cJSON_GetObjectItem(view, "error"));

    tm_api_quotas_publish(view_json);
    if (!over)
        over = "";
    if (strncmp(said, over, sizeof(said) - 1) != 0) {
        if (over[0])
            tm_log_warn("quota overcommit", "detail=\"%s\"", over);
        snprintf(said, sizeof(said), "%s", over);
    }
    if (!error)
        error = "";
    if (strncmp(said_error, error, sizeof(said_error) - 1) != 0) {
        if (error[0])
            tm_log_error("stored quotas refused; scheduling without quotas", "detail=\"%s\"", error);
        snprintf(said_error, sizeof(said_error), "%s", error);
    }
    cJSON_Delete(view);
}
