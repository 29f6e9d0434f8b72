/*
 * controller/api/log_store_pg.c: logs.store: postgres, the default.  The
 * bytes of each chunk go in its index row (job_log_chunks.data), written
 * by the ingest transaction itself and deleted with the row, so this
 * store has no operation of its own: it exists to be named.
 */
#include <stdlib.h>

#include "controller/api/log_store.h"
#include "core/err.h"

static void pg_store_free(struct tm_log_store *s)
{
    free(s);
}

static const struct tm_log_store_ops pg_store_ops = {
    .name = "postgres",
    .inline_bytes = true,
    .free = pg_store_free,
};

static int pg_store_open(uv_loop_t *loop, struct tm_pg_pool *pool, const struct tm_config *cfg,
                         struct tm_log_store **ret)
{
    struct tm_log_store *s = calloc(1, sizeof(*s));

    (void)cfg;
    if (!s)
        return TM_ENOMEM;
    s->ops = &pg_store_ops;
    s->loop = loop;
    s->pool = pool;
    *ret = s;
    return 0;
}

const struct tm_log_store_kind tm_log_store_postgres = {"postgres", pg_store_open};
