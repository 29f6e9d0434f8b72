/*
 * controller/api/log_store.c: the table of log stores and what they share
 * (log_store.h).  A store is added by one row here and one file of its
 * own; nothing else names a store.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <libpq-fe.h>

#include "controller/api/log_store.h"
#include "controller/io/pg_uv.h"
#include "core/err.h"
#include "core/log.h"

static const struct tm_log_store_kind *const log_stores[] = {
    &tm_log_store_postgres,
    &tm_log_store_s3,
    NULL,
};

int tm_log_store_open(uv_loop_t *loop, struct tm_pg_pool *pool, const struct tm_config *cfg,
                      struct tm_log_store **ret)
{
    const char *name = cfg && cfg->logs.store ? cfg->logs.store : "postgres";

    for (size_t i = 0; log_stores[i]; i++)
        if (strcmp(log_stores[i]->name, name) == 0)
            return log_stores[i]->open(loop, pool, cfg, ret);
    tm_log_error("could not open the log store", "logs.store=%s err=\"not in this build\"", name);
    return TM_EINVAL;
}

void tm_log_store_free(struct tm_log_store *s)
{
    if (s)
        s->ops->free(s);
}

/* ---- retention -------------------------------------------------------------- */

struct prune {
    struct tm_log_store *s;
    tm_log_done_cb done;
    void *data;
    struct tm_log_key *keys;
    size_t n;
};

static void on_prune_forgotten(int status, const char *message, void *data)
{
    struct prune *p = data;

    p->done(status, message, p->data);
    free(p->keys);
    free(p);
}

static void on_pruned(const struct tm_pg_reply *reply, void *data)
{
    struct prune *p = data;
    PGresult *res = reply->status == 0 && reply->nresults ? reply->results[0] : NULL;
    int rows = res ? PQntuples(res) : 0;

    if (reply->status < 0 || !res) {
        p->done(reply->status < 0 ? reply->status : TM_EDB, reply->error, p->data);
        free(p);
        return;
    }
    /* Rows only for chunks whose bytes an object store holds. */
    if (rows > 0 && p->s->ops->forget) {
        p->keys = calloc((size_t)(unsigned)rows, sizeof(*p->keys));
        for (int r = 0; p->keys && r < rows; r++)
            p->keys[p->n++] = (struct tm_log_key){strtoll(PQgetvalue(res, r, 0), NULL, 10),
                                                  (int32_t)strtol(PQgetvalue(res, r, 1), NULL, 10),
                                                  (int32_t)strtol(PQgetvalue(res, r, 2), NULL, 10),
                                                  strtoll(PQgetvalue(res, r, 3), NULL, 10)};
        if (p->keys && p->s->ops->forget(p->s, p->keys, p->n, on_prune_forgotten, p) == 0)
            return;
        free(p->keys);
    }
    p->done(0, NULL, p->data);
    free(p);
}

int tm_log_store_prune(struct tm_log_store *s, int64_t before_ms, int batch, tm_log_done_cb done, void *data)
{
    struct prune *p = calloc(1, sizeof(*p));
    char before[24], n[16];
    int r;

    if (!p)
        return TM_ENOMEM;
    *p = (struct prune){.s = s, .done = done, .data = data};
    snprintf(before, sizeof(before), "%" PRId64, before_ms);
    snprintf(n, sizeof(n), "%d", batch);
    const char *params[] = {before, n};
    r = tm_pg_pool_query(s->pool, "SELECT job_id, attempt, rank, off FROM tarmac_prune_logs($1, $2::int)", 2,
                         params, on_pruned, p);
    if (r < 0)
        free(p);
    return r;
}
