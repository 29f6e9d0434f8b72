/*
 * controller/demand_history.c: past demand per pool, from the jobs table.
 */
#include "controller/demand_history.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "controller/reconcile.h"
#include "core/err.h"

/* Live jobs (jobs_active) and those that finished inside the window
 * (jobs_finished, 0005): never a scan of all history.  Demand is counted
 * the way tm_reconcile_pool_demand() counts it on a tick. */
static const char history_sql[] =
    "SELECT j.submitted_ms, coalesce(j.finished_ms, -1), coalesce(n.pool, ''),"
    " coalesce(j.pool, ''), coalesce(j.gpu_model, ''), j.gpus, j.gpu_milli, j.nodes, j.preemptible,"
    " CASE WHEN j.gpus > 0 THEN j.gpus * 1000 * j.nodes ELSE j.gpu_milli END"
    " FROM jobs j LEFT JOIN nodes n ON n.id = j.node_id"
    " WHERE j.state IN ('queued', 'running')"
    "    OR (j.finished_ms IS NOT NULL AND j.finished_ms >= $1::bigint)";

struct history_req {
    const struct tm_config *cfg;
    tm_demand_history_cb cb;
    void *data;
};

static int pool_index(const struct tm_config *cfg, const char *name)
{
    for (size_t i = 0; i < cfg->npools; i++)
        if (strcmp(cfg->pools[i].name, name) == 0)
            return (int)i;
    return -1;
}

static int64_t col_i64(const PGresult *r, int row, int col)
{
    return strtoll(PQgetvalue(r, row, col), NULL, 10);
}

static void on_history(const struct tm_pg_reply *reply, void *data)
{
    struct history_req *req = data;
    const struct tm_config *cfg = req->cfg;
    struct tm_demand_span *spans = NULL;
    size_t n = 0;
    int r = reply->status;

    if (r == 0 && reply->nresults > 0) {
        const PGresult *res = reply->results[reply->nresults - 1];
        int rows = PQntuples(res);
        spans = malloc(((size_t)rows + 1) * sizeof(*spans));
        if (!spans)
            r = TM_ENOMEM;
        for (int i = 0; spans && i < rows; i++) {
            int pool = pool_index(cfg, PQgetvalue(res, i, 2));
            if (pool < 0) {
                /* Never ran (or its node's pool left the config): where
                 * the planner would send it now. */
                struct tm_snap_job j = {.pool = pool_index(cfg, PQgetvalue(res, i, 3)),
                                        .gpus = (int)col_i64(res, i, 5),
                                        .gpu_milli = (int)col_i64(res, i, 6),
                                        .nodes = (int)col_i64(res, i, 7),
                                        .preemptible = PQgetvalue(res, i, 8)[0] == 't'};
                snprintf(j.gpu_model, sizeof(j.gpu_model), "%s", PQgetvalue(res, i, 4));
                if (PQgetvalue(res, i, 3)[0] && j.pool < 0)
                    continue; /* pinned to a pool that is gone */
                pool = tm_reconcile_job_pool(cfg, &j);
            }
            if (pool >= 0)
                spans[n++] = (struct tm_demand_span){.pool = pool, .from_ms = col_i64(res, i, 0),
                                                     .to_ms = col_i64(res, i, 1),
                                                     .milli = col_i64(res, i, 9)};
        }
    }
    req->cb(r, reply->error ? reply->error : (r < 0 ? tm_strerror(r) : NULL), spans, n, req->data);
    free(spans);
    free(req);
}

int tm_demand_history_read(struct tm_pg_pool *pool, const struct tm_config *cfg, int64_t since_ms,
                           tm_demand_history_cb cb, void *data)
{
    struct history_req *req = malloc(sizeof(*req));
    char since[24];
    const char *params[1] = {since};
    int r;

    if (!req)
        return TM_ENOMEM;
    *req = (struct history_req){.cfg = cfg, .cb = cb, .data = data};
    snprintf(since, sizeof(since), "%" PRId64, since_ms);
    r = tm_pg_pool_query(pool, history_sql, 1, params, on_history, req);
    if (r < 0)
        free(req);
    return r;
}
