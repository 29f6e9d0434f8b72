/*
 * controller/io/pg_uv.h: PostgreSQL on the libuv loop, never blocking.
 *
 * struct tm_pg is one connection driven by libpq's non-blocking API
 * (PQconnectStart/PQconnectPoll, PQsendQuery*, PQflush, PQconsumeInput)
 * with its socket watched by one uv_poll_t.  It reconnects by itself with
 * capped exponential backoff and jitter (100 ms doubling to 5 s) and reports
 * every connect and every loss through its state callback: a connection that
 * holds a session-level advisory lock (leadership) must learn at once that
 * the lock is gone.
 *
 * struct tm_pg_pool is a few such connections; each request goes to an idle
 * connected one, or waits in a bounded FIFO queue (TM_PG_QUEUE_MAX).
 *
 * Requests.  tm_pg_query*() sends one statement with parameters in text
 * format (PQsendQueryParams: SQL is never built from strings), or some in
 * binary (tm_pg_pool_query_prepared_bin_until).  tm_pg_exec*()
 * sends a parameterless script of several statements in one round trip
 * (PQsendQuery), e.g. "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY;
 * SELECT ...; SELECT ...; COMMIT" for a consistent snapshot.  The callback
 * fires exactly once, on the loop, never from inside the call:
 *   - status 0: every statement succeeded; results[i] is the i-th
 *     statement's result (BEGIN and COMMIT included);
 *   - status TM_EDB: the server refused a statement; error and sqlstate say
 *     why (the transaction, if any, was rolled back by the server);
 *   - status -ECONNRESET: the connection broke while the request was in
 *     flight (the request is NOT retried: it may or may not have committed);
 *   - status -ETIMEDOUT: not sent within TM_PG_WAIT_MS of being queued
 *     because no connection was available, or past the caller's deadline
 *     (tm_pg_pool_query_until);
 *   - status TM_ECANCELED: the pool or connection was closed first.
 * The results and strings belong to pg_uv and are valid only during the
 * callback.
 */
#ifndef TM_PG_UV_H
#define TM_PG_UV_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <libpq-fe.h>
#include <uv.h>

#define TM_PG_QUEUE_MAX 4096
#define TM_PG_WAIT_MS 30000

struct tm_pg_reply {
    int status;
    PGresult *const *results;
    size_t nresults;
    const char *error;    /* primary message, NULL on success */
    const char *sqlstate; /* five characters, NULL when not from the server */
};

typedef void (*tm_pg_cb)(const struct tm_pg_reply *reply, void *data);

/* status 0: (re)connected; < 0: a connect attempt failed or an established
 * connection was lost (error says why, with no password in it). */
typedef void (*tm_pg_state_cb)(int status, const char *error, void *data);

struct tm_pg;
struct tm_pg_pool;

/* Start one connection; the state callback (may be NULL) reports progress.
 * conninfo is a libpq URL or key=value string; it is copied, and its
 * password never appears in errors or logs. */
int tm_pg_create(uv_loop_t *loop, const char *conninfo, tm_pg_state_cb on_state,
                 void *data, struct tm_pg **ret_pg);
int tm_pg_query(struct tm_pg *pg, const char *sql, int nparams, const char *const *params,
                tm_pg_cb cb, void *data);
int tm_pg_exec(struct tm_pg *pg, const char *script, tm_pg_cb cb, void *data);
/* Whether the connection is up now. */
int tm_pg_connected(const struct tm_pg *pg);
/* Abandon queued and in-flight requests (TM_ECANCELED), close the socket
 * watcher and the connection; done (may be NULL) fires after every handle
 * is closed, and pg is freed then. */
void tm_pg_close(struct tm_pg *pg, void (*done)(void *data), void *data);

int tm_pg_pool_create(uv_loop_t *loop, const char *conninfo, unsigned size,
                      tm_pg_state_cb on_state, void *data, struct tm_pg_pool **ret_pool);
int tm_pg_pool_query(struct tm_pg_pool *pool, const char *sql, int nparams,
                     const char *const *params, tm_pg_cb cb, void *data);
int tm_pg_pool_exec(struct tm_pg_pool *pool, const char *script, tm_pg_cb cb, void *data);
/* tm_pg_pool_query with the caller's deadline, timeout_ms from now (an API
 * request's): not sent by then, it fails -ETIMEDOUT and is never sent; in
 * flight then, it fails -ETIMEDOUT and its connection is reset (the pool
 * reconnects it), so nothing of it reaches the server later. */
int tm_pg_pool_query_until(struct tm_pg_pool *pool, const char *sql, int nparams,
                           const char *const *params, uint64_t timeout_ms, tm_pg_cb cb, void *data);
/* tm_pg_pool_query_until for a statement sent over and over (a group
 * commit's): each connection prepares sql under name the first time it
 * runs it (PQsendPrepare, in the same turn as the execution) and from then
 * on only binds and executes it (PQsendQueryPrepared), so the server
 * parses and plans it once per session.  One name, one sql, for the
 * pool's life; name is at most 63 bytes.  A connection that has prepared
 * 16 statements sends further ones unprepared. */
int tm_pg_pool_query_prepared_until(struct tm_pg_pool *pool, const char *name, const char *sql,
                                    int nparams, const char *const *params, uint64_t timeout_ms,
                                    tm_pg_cb cb, void *data);
/* tm_pg_pool_query_prepared_until with parameters in binary format where
 * formats[i] is 1: params[i] is then lengths[i] bytes (NUL allowed) in
 * the type's binary form (bytea: the bytes themselves), copied like text
 * ones; formats[i] 0 is a text parameter (lengths[i] ignored).  Large
 * bytes then reach the server as they are, with no text encoding to make
 * here and parse there. */
int tm_pg_pool_query_prepared_bin_until(struct tm_pg_pool *pool, const char *name, const char *sql,
                                        int nparams, const char *const *params, const int *lengths,
                                        const int *formats, uint64_t timeout_ms, tm_pg_cb cb,
                                        void *data);
/* Number of connections up now. */
unsigned tm_pg_pool_connected(const struct tm_pg_pool *pool);
/* Whether the pool knows the database is gone: no member is connected and
 * each has failed to connect (or lost its connection) since it was last
 * up.  A pool that has not yet tried is not down. */
bool tm_pg_pool_down(const struct tm_pg_pool *pool);
void tm_pg_pool_close(struct tm_pg_pool *pool, void (*done)(void *data), void *data);

/* Copy conninfo into buf with any password replaced by "***", for messages. */
void tm_pg_conninfo_redact(const char *conninfo, char *buf, size_t size);

#endif
