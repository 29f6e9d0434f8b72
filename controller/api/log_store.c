/*
 * controller/api/log_store.c: the table of log stores and what they share
 * (log_store.h).  A store is added by one row here and one file of its
 * own; nothing else names a store.
 */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "controller/api/log_store.h"
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

int tm_log_object_name(char *buf, size_t size, const char *prefix, const struct tm_log_key *key)
{
    return snprintf(buf, size, "%s%" PRId64 "-%" PRId32 "-%" PRId32 "-%020" PRId64, prefix ? prefix : "",
                    key->job, key->attempt, key->rank, key->offset);
}
