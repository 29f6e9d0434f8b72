/*
 * controller/api/log_store.h: where the bytes of a job's output live
 * (logs.store), as a table of operations, one file per store.
 *
 * The index is always PostgreSQL (migrations/0022_logs.sql, ingest by
 * 0024_log_ingest_batch.sql): each chunk's row (job, attempt, rank,
 * offset, length) commits in the same transaction as the stream's offset
 * accounting, so a chunk is accepted once and only at the offset the
 * stream expects, whatever the store.  A store keeps only the bytes:
 *
 *   postgres (log_store_pg.c): the bytes go in the index row itself
 *     (job_log_chunks.data, bytea), in the ingest transaction, handed to
 *     PostgreSQL as a binary parameter; its put, get and forget have
 *     nothing to do (inline_bytes).
 *   s3: the bytes go to one object per chunk, written after the index has
 *     checked the chunks (the node's, the current attempt, the offset the
 *     stream expects) and before the index row commits (put), read back
 *     for rows whose data is NULL (get), and deleted when the cap or the
 *     retention drops the row (forget).  A chunk the checks refuse writes
 *     no object.  Only a put whose index rows then fail to commit (the
 *     database lost, or a resend of the same chunk that won the race)
 *     leaves an object behind: at that key the chunk accepted later
 *     overwrites it, and an unindexed one is never served.
 *
 * The flow of one batch (controller/api/logs.c), each statement through
 * the group commit (controller/io/group_commit.h):
 *
 *     parse and check the body (controller/spec/log_chunks.h)
 *     tarmac_log_ingest_batch(.., check)  -- object stores: the checks
 *     ops->put(store, chunks)             -- object stores: the bytes
 *     tarmac_log_ingest_batch(..)         -- index rows (+ bytes if inline)
 *     ops->forget(store, dropped keys)    -- chunks the cap dropped
 *
 * and of one read: the index rows of the range, with their bytes when
 * inline, then ops->get for each row without.  Every operation runs on
 * the API's loop and answers through its callback exactly once (never
 * from inside the call); the pointers passed in are the caller's until
 * the callback returns.
 */
#ifndef TM_API_LOG_STORE_H
#define TM_API_LOG_STORE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <uv.h>

#include "core/config.h"

struct tm_pg_pool;
struct tm_log_store;

/* One chunk's place in a job's output: a stream is (job, attempt, rank),
 * offset counts the bytes the process wrote before the chunk. */
struct tm_log_key {
    int64_t job;
    int32_t attempt;
    int32_t rank;
    int64_t offset;
};

/* A chunk with its bytes. */
struct tm_log_piece {
    struct tm_log_key key;
    const unsigned char *data;
    size_t len;
};

/* status 0 or a negative code (core/err.h); message says why on failure
 * (no secret in it), else NULL. */
typedef void (*tm_log_done_cb)(int status, const char *message, void *data);
/* The bytes of one chunk, valid during the callback only. */
typedef void (*tm_log_get_cb)(int status, const char *message, const unsigned char *bytes,
                              size_t len, void *data);

struct tm_log_store_ops {
    const char *name;      /* the logs.store value: "postgres", "s3" */
    /* The bytes go in the index rows (the ingest statement decodes them):
     * put, get and forget are then never called and may be NULL. */
    bool inline_bytes;
    /* Keep the bytes of n chunks before their index rows commit. */
    int (*put)(struct tm_log_store *s, const struct tm_log_piece *pieces, size_t n,
               tm_log_done_cb done, void *data);
    /* Read the bytes of one chunk of len bytes whose row holds none. */
    int (*get)(struct tm_log_store *s, const struct tm_log_key *key, size_t len, tm_log_get_cb cb,
               void *data);
    /* Delete the bytes of n chunks whose index rows are gone (the cap, the
     * retention); a key already gone is not an error. */
    int (*forget)(struct tm_log_store *s, const struct tm_log_key *keys, size_t n,
                  tm_log_done_cb done, void *data);
    /* Release the store (only once nothing is in flight). */
    void (*free)(struct tm_log_store *s);
};

/* Every store begins with this (as its first member). */
struct tm_log_store {
    const struct tm_log_store_ops *ops;
    uv_loop_t *loop;
    struct tm_pg_pool *pool;  /* the index's, borrowed */
};

/* The stores, one row each; tm_log_store_open() looks logs.store up here.
 * A store's open makes its instance from the configuration (its own keys
 * are its own: cfg->logs and beyond) or returns a negative code after
 * logging why. */
struct tm_log_store_kind {
    const char *name;
    int (*open)(uv_loop_t *loop, struct tm_pg_pool *pool, const struct tm_config *cfg,
                struct tm_log_store **ret);
};

/* log_store_pg.c */
extern const struct tm_log_store_kind tm_log_store_postgres;
/* log_store_s3.c */
extern const struct tm_log_store_kind tm_log_store_s3;

/* Open the store cfg->logs.store names (postgres when cfg is NULL or
 * names none); < 0 (TM_EINVAL: a store this build lacks) after logging. */
int tm_log_store_open(uv_loop_t *loop, struct tm_pg_pool *pool, const struct tm_config *cfg,
                      struct tm_log_store **ret);
/* NULL is a no-op. */
void tm_log_store_free(struct tm_log_store *s);

/* Retention (logs.retention): delete the output of at most batch streams
 * last written before before_ms, index and bytes (the leader's tick, as
 * for the GPU samples).  done(status) once; < 0 when nothing was queued. */
int tm_log_store_prune(struct tm_log_store *s, int64_t before_ms, int batch, tm_log_done_cb done, void *data);

/* The object name of a chunk: PREFIX (as configured, "" for none) then
 * JOB-ATTEMPT-RANK-OFFSET, OFFSET zero-padded to 20 digits so that a
 * listing sorts in output order.  A stream's objects share the prefix
 * PREFIX JOB-ATTEMPT-RANK- (the trailing '-' keeps job 12 from matching
 * job 123); no '/' after the configured prefix, because moto checks the
 * signature of a listing whose prefix holds one against the decoded query
 * and refuses it.  Returns what snprintf returns.  (log_store_s3.c) */
int tm_log_object_name(char *buf, size_t size, const char *prefix, const struct tm_log_key *key);

#endif
