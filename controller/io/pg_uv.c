/*
 * controller/io/pg_uv.c: libpq's non-blocking API driven by the libuv loop.
 *
 * One struct tm_pg owns one PGconn, the uv_poll_t watching its socket (heap
 * allocated, one per socket, freed in its close callback) and three timers:
 *
 *   retry   the backoff before the next connect attempt, and while a connect
 *           is in progress the deadline that abandons it;
 *   kick    a 0 ms timer that sends the next queued request from a loop
 *           callback, so no user callback ever fires inside tm_pg_query();
 *   expiry  fails queued requests that were not sent within TM_PG_WAIT_MS.
 *
 * Errors found while a call is still running (bad arguments, a full queue,
 * no memory, a closing connection) are returned by that call; everything
 * else reaches the request's callback later, from the loop.
 *
 * User callbacks may call anything here, tm_pg_close() included, so after
 * each one the code checks whether the connection is closing before it
 * touches the PGconn again.  Memory stays valid until the last handle's
 * close callback, which is what makes that check safe.
 *
 * A pool is a set of such connections sharing one FIFO queue: a connection
 * with nothing in flight takes the next request from its own queue, then
 * from the pool's.  Requests therefore leave the pool in order and each
 * connection answers in order.
 *
 * Host names in conninfo are resolved by libpq with getaddrinfo(), which
 * blocks; configurations that care use hostaddr= or an IP address.
 *
 * One file on purpose: the connection's state machine (connect, send,
 * flush, read, reconnect) and the pool that feeds it share struct tm_pg
 * and its queues at every step (a connection with nothing in flight
 * pulls from the pool inside its own send path), and the order of those
 * steps is the contract of STYLE.md's libpq sequence; splitting it would
 * expose struct tm_pg to a second file to save no reader anything.
 */
#include "controller/io/pg_uv.h"

#include <ctype.h>
#include <errno.h>
#include <stdbool.h>
#include <sys/socket.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <openssl/crypto.h>

#include "core/err.h"
#include "core/log.h"

#define PG_BACKOFF_MIN_MS 100
#define PG_BACKOFF_MAX_MS 5000
#define PG_BACKOFF_MAX_HOSTS_MS 1000
#define PG_CONNECT_TIMEOUT_MS 10000
/* With several hosts, each gets this long before the next is tried (libpq
 * ignores connect_timeout under PQconnectPoll: the deadline is ours). */
#define PG_HOST_TIMEOUT_MS 3000
#define PG_HOSTS_MAX 16
#define PG_POOL_MAX 256
#define PG_ERR_SIZE 512
#define PG_PREPARED_MAX 16
#define PG_PREPARED_NAME 64

/* Passed as the "options" connection parameter: the server then applies it
 * to the session before the first query, with no extra round trip.  An
 * explicit options= in the conninfo replaces it (the operator decides).
 * jit=off: the daemon's statements are short and planned afresh; LLVM
 * compiling them cost seconds whenever row estimates crossed the JIT
 * threshold (seen on /metrics and /v1/timeseries scrapes: most of their time). */
#define PG_SESSION_OPTIONS "-c statement_timeout=60000 -c jit=off"

struct pg_req {
    struct pg_req *next;
    struct tm_pg_pool *pool; /* set while the request belongs to a pool */
    tm_pg_cb cb;
    void *data;
    uint64_t deadline; /* uv_now() after which an unsent request expires */
    /* The caller's deadline (tm_pg_pool_query_until): past it, unsent the
     * request expires, and in flight its connection is dropped. */
    bool hard;
    bool script;
    int nparams;
    const char *sql;
    const char *name; /* a prepared statement's (tm_pg_pool_query_prepared_until), else NULL */
    const char **params;
    /* Binary parameters (tm_pg_pool_query_prepared_bin_until): each one's
     * length and format, else both NULL (every parameter text). */
    int *lengths;
    int *formats;
    /* The params array, the lengths and formats, then sql and the
     * parameter values, follow in the same allocation, so one free()
     * releases a request. */
};

struct pg_queue {
    struct pg_req *head;
    struct pg_req *tail;
    size_t len;
};

struct pg_watch {
    uv_poll_t poll; /* first member: the close callback frees the whole */
    struct tm_pg *pg;
    int fd;
};

enum pg_state {
    PG_WAITING,    /* no connection: the retry timer starts the next attempt */
    PG_CONNECTING, /* PQconnectPoll() in progress */
    PG_READY,      /* connected: at most one request in flight */
    PG_CLOSING,    /* tm_pg_close() ran: waiting for the handles to close */
    PG_STATE_MAX,
};

static const char *const pg_state_names[PG_STATE_MAX] = {
    [PG_WAITING] = "waiting",
    [PG_CONNECTING] = "connecting",
    [PG_READY] = "ready",
    [PG_CLOSING] = "closing",
};

struct tm_pg {
    uv_loop_t *loop;
    char *conninfo; /* holds the password: wiped before it is freed */
    char *redacted; /* safe for messages */
    tm_pg_state_cb on_state;
    void *data;
    struct tm_pg_pool *pool; /* NULL unless a pool member */

    enum pg_state state;
    PGconn *conn;
    struct pg_watch *watch;
    uv_timer_t retry;
    uv_timer_t kick;
    uv_timer_t expiry;
    uv_timer_t overdue;    /* the in-flight request's hard deadline */
    unsigned open_handles; /* handles whose close callback has not run */

    struct pg_queue queue;
    struct pg_req *inflight;
    bool flushing; /* PQflush() returned 1: output still pending */
    bool rolling_back; /* our ROLLBACK after a failed script is in flight */
    bool preparing;    /* the in-flight request's PQsendPrepare() runs first */
    /* Statements this connection has prepared (names; gone with it). */
    char prepared[PG_PREPARED_MAX][PG_PREPARED_NAME];
    unsigned nprepared;
    PGresult **results;
    size_t nresults;
    size_t results_cap;
    bool results_oom;

    unsigned attempt; /* connect failures since the last success */
    uint64_t rng;

    /* Several hosts (host=a,b or postgresql://a,b/db): tried one at a time,
     * each with its own deadline, until one is the primary
     * (target_session_attrs=read-write, our default); all refused, the
     * backoff, then the round again.  nhosts 0: libpq picks. */
    char *hosts[PG_HOSTS_MAX];
    char *ports[PG_HOSTS_MAX];
    unsigned nhosts;
    unsigned host_next;      /* the host of the next attempt */
    unsigned round_left;     /* hosts still to try before backing off */

    struct pg_queue canceled; /* handed their callbacks once closed */
    void (*done)(void *data);
    void *done_data;
};

struct tm_pg_pool {
    uv_loop_t *loop;
    tm_pg_state_cb on_state;
    void *data;
    struct tm_pg **conns;
    unsigned size;
    unsigned created;
    struct pg_queue queue;
    uv_timer_t expiry;
    bool up; /* a member was connected at the last report */
    bool closing;
    unsigned open; /* members and handles not yet closed */
    struct pg_queue canceled;
    void (*done)(void *data);
    void *done_data;
};

static void pg_dispatch(struct tm_pg *pg);
static void pg_on_poll(uv_poll_t *handle, int status, int events);
static void pg_on_retry(uv_timer_t *timer);
static void pool_member_state(struct tm_pg_pool *pool, struct tm_pg *pg, int status,
                              const char *error);

/* ---- queues ------------------------------------------------------------ */

static void queue_push(struct pg_queue *q, struct pg_req *req)
{
    req->next = NULL;
    if (q->tail)
        q->tail->next = req;
    else
        q->head = req;
    q->tail = req;
    q->len++;
}

static void queue_push_front(struct pg_queue *q, struct pg_req *req)
{
    req->next = q->head;
    q->head = req;
    if (!q->tail)
        q->tail = req;
    q->len++;
}

static struct pg_req *queue_pop(struct pg_queue *q)
{
    struct pg_req *req = q->head;

    if (!req)
        return NULL;
    q->head = req->next;
    if (!q->head)
        q->tail = NULL;
    q->len--;
    req->next = NULL;
    return req;
}

/* Move every request of src to the end of dst. */
static void queue_splice(struct pg_queue *dst, struct pg_queue *src)
{
    struct pg_req *req;

    while ((req = queue_pop(src)) != NULL)
        queue_push(dst, req);
}

static struct pg_req *req_new(const char *sql, const char *name, bool script, int nparams,
                              const char *const *params, const int *lengths, const int *formats,
                              tm_pg_cb cb, void *data)
{
    size_t sql_len = strlen(sql) + 1, name_len = name ? strlen(name) + 1 : 0;
    size_t size = sizeof(struct pg_req) + (size_t)nparams * sizeof(char *) + sql_len + name_len;
    struct pg_req *req;
    char *p;

    if (formats)
        size += 2 * (size_t)nparams * sizeof(int);
    for (int i = 0; i < nparams; i++)
        if (params[i])
            size += (formats && formats[i] ? (size_t)lengths[i] : strlen(params[i])) + 1;
    req = calloc(1, size);
    if (!req)
        return NULL;
    req->cb = cb;
    req->data = data;
    req->script = script;
    req->nparams = nparams;
    req->params = (const char **)(req + 1);
    p = (char *)(req->params + nparams);
    if (formats) {
        req->lengths = (int *)p;
        req->formats = req->lengths + nparams;
        p = (char *)(req->formats + nparams);
    }
    memcpy(p, sql, sql_len);
    req->sql = p;
    p += sql_len;
    if (name) {
        memcpy(p, name, name_len);
        req->name = p;
        p += name_len;
    }
    for (int i = 0; i < nparams; i++) {
        size_t n;
        if (!params[i]) {
            req->params[i] = NULL; /* SQL NULL */
            continue;
        }
        n = formats && formats[i] ? (size_t)lengths[i] : strlen(params[i]);
        memcpy(p, params[i], n);
        p[n] = '\0';
        req->params[i] = p;
        if (formats) {
            req->lengths[i] = (int)n;
            req->formats[i] = formats[i] ? 1 : 0;
        }
        p += n + 1;
    }
    return req;
}

static void req_fail(struct pg_req *req, int status, const char *error)
{
    struct tm_pg_reply reply = {.status = status, .error = error};

    req->cb(&reply, req->data);
    free(req);
}

/* Arm timer for the earliest deadline in q (requests with a caller's
 * deadline may expire before older ones), unless it is armed earlier. */
static void expiry_arm(uv_timer_t *timer, const struct pg_queue *q, uv_timer_cb cb)
{
    uint64_t now = uv_now(timer->loop);
    uint64_t first = UINT64_MAX;

    for (const struct pg_req *r = q->head; r; r = r->next)
        if (r->deadline < first)
            first = r->deadline;
    if (first == UINT64_MAX)
        return;
    if (uv_is_active((const uv_handle_t *)timer) && uv_timer_get_due_in(timer) <= (first > now ? first - now : 0))
        return;
    uv_timer_start(timer, cb, first > now ? first - now : 0, 0);
}

/* Take the first request of q whose deadline passed, or NULL. */
static struct pg_req *queue_take_expired(struct pg_queue *q, uint64_t now)
{
    struct pg_req *prev = NULL;

    for (struct pg_req *r = q->head; r; prev = r, r = r->next) {
        if (r->deadline > now)
            continue;
        if (prev)
            prev->next = r->next;
        else
            q->head = r->next;
        if (q->tail == r)
            q->tail = prev;
        q->len--;
        r->next = NULL;
        return r;
    }
    return NULL;
}

/* ---- small helpers ----------------------------------------------------- */

static void pg_set_state(struct tm_pg *pg, enum pg_state state)
{
    if (pg->state == state)
        return;
    tm_log_debug("database connection state", "db=\"%s\" from=%s to=%s", pg->redacted,
                 pg_state_names[pg->state], pg_state_names[state]);
    pg->state = state;
}

/* libpq messages end in newlines and may hold several lines (one per host
 * tried); make them one line, and pass them through the log redactor as a
 * last defence. */
static void pg_copy_error(char *buf, size_t size, const char *msg)
{
    size_t n;
    size_t out = 0;
    bool space = false;

    snprintf(buf, size, "%s", msg && *msg ? msg : "unknown error");
    n = strlen(buf);
    /* Runs of newlines and tabs become one space; double quotes become
     * single ones, so the text sits inside a quoted key=value log field. */
    for (size_t i = 0; i < n; i++) {
        char c = buf[i];

        if (c == '\n' || c == '\t' || c == '\r' || c == ' ') {
            space = true;
            continue;
        }
        if (space && out > 0)
            buf[out++] = ' ';
        space = false;
        buf[out++] = c == '"' ? '\'' : c;
    }
    buf[out] = '\0';
    tm_log_redact(buf, size);
}

static uint64_t pg_random(struct tm_pg *pg)
{
    /* xorshift64*: jitter needs spread, not strength, and a per-connection
     * state keeps rand()'s global out of it. */
    pg->rng ^= pg->rng >> 12;
    pg->rng ^= pg->rng << 25;
    pg->rng ^= pg->rng >> 27;
    return pg->rng * 2685821657736338717ULL;
}

/* Next delay: 100 ms doubling to 5 s, then a random point in its upper half
 * so that many controllers restarted together do not reconnect in step. */
static unsigned pg_backoff(struct tm_pg *pg)
{
    unsigned shift = pg->attempt < 6 ? pg->attempt : 6;
    unsigned base = PG_BACKOFF_MIN_MS << shift;
    /* With several hosts a failover is the likely cause: the standby is
     * promoted within seconds, so each round waits at most a second. */
    unsigned max = pg->nhosts > 1 ? PG_BACKOFF_MAX_HOSTS_MS : PG_BACKOFF_MAX_MS;

    if (base > max)
        base = max;
    pg->attempt++;
    return base / 2 + (unsigned)(pg_random(pg) % (base / 2 + 1));
}

static void pg_notify(struct tm_pg *pg, int status, const char *error)
{
    if (pg->pool)
        pool_member_state(pg->pool, pg, status, error);
    else if (pg->on_state)
        pg->on_state(status, error, pg->data);
}

static void pg_clear_results(struct tm_pg *pg)
{
    for (size_t i = 0; i < pg->nresults; i++)
        PQclear(pg->results[i]);
    pg->nresults = 0;
    pg->results_oom = false;
}

/* ---- the socket watcher ------------------------------------------------ */

static void pg_release_handle(struct tm_pg *pg);

static void pg_watch_closed(uv_handle_t *handle)
{
    struct pg_watch *w = (struct pg_watch *)handle;
    struct tm_pg *pg = w->pg;

    free(w);
    pg_release_handle(pg);
}

static void pg_watch_close(struct tm_pg *pg)
{
    if (!pg->watch)
        return;
    /* uv_close() stops the poll at once (the fd leaves epoll now), so the
     * PQfinish() or socket change that follows never closes a polled fd. */
    uv_close((uv_handle_t *)&pg->watch->poll, pg_watch_closed);
    pg->watch = NULL;
}

/* Watch libpq's current socket for events, replacing the watcher if libpq
 * moved to another socket (next host, SSL retry). */
static int pg_watch(struct tm_pg *pg, int events)
{
    int fd = PQsocket(pg->conn);
    int r;

    if (fd < 0)
        return -EBADF;
    if (pg->watch && pg->watch->fd != fd)
        pg_watch_close(pg);
    if (!pg->watch) {
        struct pg_watch *w = calloc(1, sizeof(*w));

        if (!w)
            return TM_ENOMEM;
        r = uv_poll_init_socket(pg->loop, &w->poll, fd);
        if (r < 0) {
            free(w);
            return r;
        }
        w->pg = pg;
        w->fd = fd;
        w->poll.data = w;
        pg->watch = w;
        pg->open_handles++;
    }
    return uv_poll_start(&pg->watch->poll, events, pg_on_poll);
}

/* What to say when pg_watch() fails.  libpq closes its socket when it
 * finds the connection gone (PQsocket() is -1 then): its own message says
 * why, where "bad file descriptor" would send a reader the wrong way. */
static const char *pg_watch_error(const struct tm_pg *pg, int r)
{
    const char *msg = pg->conn ? PQerrorMessage(pg->conn) : NULL;

    if (r == -EBADF)
        return msg && *msg ? msg : "the server closed the connection";
    return uv_strerror(r);
}

/* Close the watcher, then the connection: in that order, see above. */
static void pg_drop_conn(struct tm_pg *pg)
{
    uv_timer_stop(&pg->overdue);
    pg_watch_close(pg);
    if (pg->conn) {
        PQfinish(pg->conn);
        pg->conn = NULL;
    }
    pg->flushing = false;
    pg->preparing = false;
    pg->nprepared = 0; /* a new session prepares afresh */
}

/* ---- connecting -------------------------------------------------------- */

static void pg_schedule_retry(struct tm_pg *pg, unsigned delay)
{
    pg_set_state(pg, PG_WAITING);
    uv_timer_stop(&pg->retry);
    uv_timer_start(&pg->retry, pg_on_retry, delay, 0);
}

static void pg_connect_failed(struct tm_pg *pg, int status, const char *msg)
{
    char error[PG_ERR_SIZE];
    unsigned delay;

    pg_copy_error(error, sizeof(error), msg); /* msg may live in the PGconn */
    pg_drop_conn(pg);
    if (pg->nhosts > 1 && pg->round_left > 1) {
        /* The next host at once: a failover moved the primary, or this
         * one is down or a standby. */
        unsigned tried = (pg->host_next + pg->nhosts - 1) % pg->nhosts;
        pg->round_left--;
        pg_schedule_retry(pg, 0);
        tm_log_warn("could not connect to database host, trying the next", "db=\"%s\" host=%s error=\"%s\"",
                    pg->redacted, pg->hosts[tried], error);
        return;
    }
    pg->round_left = pg->nhosts;
    delay = pg_backoff(pg);
    pg_schedule_retry(pg, delay);
    tm_log_warn("could not connect to database", "db=\"%s\" error=\"%s\" attempt=%u retry_ms=%u",
                pg->redacted, error, pg->attempt, delay);
    pg_notify(pg, status, error);
}

/* The connection broke (or must be dropped): the request in flight fails
 * with status, the state callback hears of it first (a leader must learn at
 * once that its lock is gone), and a reconnect is scheduled. */
static void pg_fail_conn(struct tm_pg *pg, int status, const char *msg)
{
    char error[PG_ERR_SIZE];
    struct pg_req *req = pg->inflight;
    unsigned delay;

    pg_copy_error(error, sizeof(error), msg);
    pg->inflight = NULL;
    pg->rolling_back = false;
    pg_clear_results(pg);
    pg_drop_conn(pg);
    pg->attempt = 0;
    delay = pg_backoff(pg);
    pg_schedule_retry(pg, delay);
    tm_log_warn("lost database connection", "db=\"%s\" error=\"%s\" retry_ms=%u", pg->redacted,
                error, delay);
    pg_notify(pg, -ECONNRESET, error);
    if (req) {
        if (pg->state == PG_CLOSING)
            queue_push_front(&pg->canceled, req); /* closed by the state callback */
        else
            req_fail(req, status, error);
    }
}

static void pg_lost(struct tm_pg *pg, const char *msg)
{
    pg_fail_conn(pg, -ECONNRESET, msg);
}

/* The request in flight passed its caller's deadline: its answer no longer
 * matters to anyone, and nothing it sends may reach the server later.  The
 * socket is reset (SO_LINGER 0: output not yet sent is discarded, not
 * delivered once a partition heals) and the request fails -ETIMEDOUT; a
 * statement the server already runs is the caller's to bound (the submit
 * statement checks its deadline on the server's clock). */
static void pg_on_overdue(uv_timer_t *timer)
{
    struct tm_pg *pg = timer->data;
    struct linger lg = {.l_onoff = 1, .l_linger = 0};
    int fd;

    if (pg->state != PG_READY || !pg->inflight)
        return;
    fd = PQsocket(pg->conn);
    if (fd >= 0)
        (void)setsockopt(fd, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg));
    pg_fail_conn(pg, -ETIMEDOUT, "the database did not answer before the request's deadline");
}

static void pg_on_notice(void *arg, const PGresult *res)
{
    struct tm_pg *pg = arg;
    char msg[PG_ERR_SIZE];

    /* libpq would print notices on stderr; they belong in the log. */
    pg_copy_error(msg, sizeof(msg), PQresultErrorField(res, PG_DIAG_MESSAGE_PRIMARY));
    tm_log_debug("database notice", "db=\"%s\" notice=\"%s\"", pg->redacted, msg);
}

static void pg_connected(struct tm_pg *pg)
{
    int r;

    uv_timer_stop(&pg->retry); /* the connect deadline */
    if (PQsetnonblocking(pg->conn, 1) != 0) {
        pg_connect_failed(pg, TM_EUNAVAIL, PQerrorMessage(pg->conn));
        return;
    }
    PQsetNoticeReceiver(pg->conn, pg_on_notice, pg);
    /* Idle, the socket is still watched: that is how a server-side close
     * (pg_terminate_backend, a restart) is noticed before the next query. */
    r = pg_watch(pg, UV_READABLE);
    if (r < 0) {
        pg_connect_failed(pg, r, pg_watch_error(pg, r));
        return;
    }
    pg->attempt = 0;
    pg->round_left = pg->nhosts;
    if (pg->nhosts > 1) /* the primary now: the first to try next time */
        pg->host_next = (pg->host_next + pg->nhosts - 1) % pg->nhosts;
    pg_set_state(pg, PG_READY);
    tm_log_info("connected to database", "db=\"%s\"", pg->redacted);
    pg_notify(pg, 0, NULL);
    if (pg->state == PG_READY)
        pg_dispatch(pg);
}

static void pg_connect_step(struct tm_pg *pg)
{
    int r;

    switch (PQconnectPoll(pg->conn)) {
    case PGRES_POLLING_READING:
        r = pg_watch(pg, UV_READABLE);
        break;
    case PGRES_POLLING_WRITING:
        r = pg_watch(pg, UV_WRITABLE);
        break;
    case PGRES_POLLING_OK:
        pg_connected(pg);
        return;
    default:
        pg_connect_failed(pg, PQconnectionNeedsPassword(pg->conn) ? TM_EAUTH : TM_EUNAVAIL,
                          PQerrorMessage(pg->conn));
        return;
    }
    if (r < 0)
        pg_connect_failed(pg, r, pg_watch_error(pg, r));
}

static void pg_on_connect_timeout(uv_timer_t *timer)
{
    struct tm_pg *pg = timer->data;

    pg_connect_failed(pg, -ETIMEDOUT, "connection attempt timed out");
}

static void pg_on_retry(uv_timer_t *timer)
{
    static const char *const keys[] = {"fallback_application_name", "options",
                                       "target_session_attrs", "dbname", "host", "port", NULL};
    struct tm_pg *pg = timer->data;
    const char *values[] = {"tarmac", PG_SESSION_OPTIONS, "read-write", pg->conninfo, NULL, NULL, NULL};
    int r;

    /* Our defaults come before dbname, which expands the conninfo, so that
     * anything the operator wrote there wins; with several hosts, the one
     * of this attempt comes after it, overriding the list. */
    if (pg->nhosts > 1) {
        unsigned i = pg->host_next;
        values[4] = pg->hosts[i];
        values[5] = pg->ports[i];
        pg->host_next = (i + 1) % pg->nhosts;
    }
    pg->conn = PQconnectStartParams(keys, values, 1);
    if (!pg->conn) {
        pg_connect_failed(pg, TM_ENOMEM, "out of memory");
        return;
    }
    if (PQstatus(pg->conn) == CONNECTION_BAD) {
        pg_connect_failed(pg, TM_EUNAVAIL, PQerrorMessage(pg->conn));
        return;
    }
    pg_set_state(pg, PG_CONNECTING);
    uv_timer_start(&pg->retry, pg_on_connect_timeout,
                   pg->nhosts > 1 ? PG_HOST_TIMEOUT_MS : PG_CONNECT_TIMEOUT_MS, 0);
    r = pg_watch(pg, UV_WRITABLE);
    if (r < 0)
        pg_connect_failed(pg, r, pg_watch_error(pg, r));
}

/* ---- requests ---------------------------------------------------------- */

static struct pg_req *pg_next_request(struct tm_pg *pg)
{
    struct pg_req *req = queue_pop(&pg->queue);

    if (!req && pg->pool && !pg->pool->closing)
        req = queue_pop(&pg->pool->queue);
    return req;
}

/* Push output; returns 0 when the caller may go on, < 0 when the connection
 * was dropped. */
static int pg_flush(struct tm_pg *pg)
{
    int r = PQflush(pg->conn);

    if (r < 0) {
        pg_lost(pg, PQerrorMessage(pg->conn));
        return -ECONNRESET;
    }
    /* While output is pending, watch both ways: the server may stop reading
     * until we read what it sent, so input is consumed on readable too. */
    pg->flushing = r == 1;
    r = pg_watch(pg, pg->flushing ? UV_READABLE | UV_WRITABLE : UV_READABLE);
    if (r < 0) {
        pg_lost(pg, pg_watch_error(pg, r));
        return r;
    }
    return 0;
}

static bool pg_prepared(const struct tm_pg *pg, const char *name)
{
    for (unsigned i = 0; i < pg->nprepared; i++)
        if (strcmp(pg->prepared[i], name) == 0)
            return true;
    return false;
}

/* The in-flight request's statement is prepared now: remember it, and
 * execute it on the same turn. */
static int pg_prepared_run(struct tm_pg *pg)
{
    struct pg_req *req = pg->inflight;

    pg->preparing = false;
    snprintf(pg->prepared[pg->nprepared++], PG_PREPARED_NAME, "%s", req->name);
    if (!PQsendQueryPrepared(pg->conn, req->name, req->nparams, req->params, req->lengths, req->formats, 0)) {
        pg_lost(pg, PQerrorMessage(pg->conn));
        return -ECONNRESET;
    }
    return pg_flush(pg);
}

static void pg_dispatch(struct tm_pg *pg)
{
    while (pg->state == PG_READY && !pg->inflight) {
        struct pg_req *req = pg_next_request(pg);
        int ok;

        if (!req)
            return;
        if (req->script)
            ok = PQsendQuery(pg->conn, req->sql);
        else if (req->name && pg_prepared(pg, req->name))
            ok = PQsendQueryPrepared(pg->conn, req->name, req->nparams, req->params, req->lengths, req->formats, 0);
        else if (req->name && pg->nprepared < PG_PREPARED_MAX)
            ok = pg->preparing = PQsendPrepare(pg->conn, req->name, req->sql, req->nparams, NULL);
        else
            ok = PQsendQueryParams(pg->conn, req->sql, req->nparams, NULL, req->params, req->lengths,
                                   req->formats, 0);
        if (!ok && PQstatus(pg->conn) == CONNECTION_BAD) {
            /* Never sent: it keeps its place for the next connection. */
            if (req->pool)
                queue_push_front(&req->pool->queue, req);
            else
                queue_push_front(&pg->queue, req);
            pg_lost(pg, PQerrorMessage(pg->conn));
            return;
        }
        if (!ok) {
            /* libpq refused the request itself (too many parameters, no
             * memory): the connection is fine, the request is not. */
            char error[PG_ERR_SIZE];

            pg_copy_error(error, sizeof(error), PQerrorMessage(pg->conn));
            req_fail(req, TM_EINVAL, error);
            continue;
        }
        pg->inflight = req;
        if (req->hard) {
            uint64_t now = uv_now(pg->loop);
            uv_timer_start(&pg->overdue, pg_on_overdue, req->deadline > now ? req->deadline - now : 0, 0);
        }
        pg_flush(pg);
        return;
    }
}

static void pg_on_kick(uv_timer_t *timer)
{
    pg_dispatch(timer->data);
}

static void pg_kick(struct tm_pg *pg)
{
    if (pg->state == PG_READY && !pg->inflight && !uv_is_active((uv_handle_t *)&pg->kick))
        uv_timer_start(&pg->kick, pg_on_kick, 0, 0);
}

/* All results are in: hand them over, release them, send the next one. */
static void pg_complete(struct tm_pg *pg)
{
    struct pg_req *req = pg->inflight;
    struct tm_pg_reply reply = {0};
    PGresult **results;
    size_t nresults;
    size_t cap;

    if (PQstatus(pg->conn) == CONNECTION_BAD) {
        pg_lost(pg, PQerrorMessage(pg->conn));
        return;
    }
    reply.results = pg->results;
    reply.nresults = pg->nresults;
    for (size_t i = 0; i < pg->nresults; i++) {
        ExecStatusType st = PQresultStatus(pg->results[i]);

        if (st == PGRES_FATAL_ERROR || st == PGRES_BAD_RESPONSE) {
            reply.status = TM_EDB;
            reply.error = PQresultErrorField(pg->results[i], PG_DIAG_MESSAGE_PRIMARY);
            if (!reply.error)
                reply.error = PQresultErrorMessage(pg->results[i]);
            reply.sqlstate = PQresultErrorField(pg->results[i], PG_DIAG_SQLSTATE);
            break;
        }
    }
    if (reply.status == 0 && pg->results_oom) {
        reply.status = TM_ENOMEM;
        reply.error = "out of memory collecting results";
    }
    /* Detach the results, so a callback that closes pg cannot free them
     * while it still reads them. */
    results = pg->results;
    nresults = pg->nresults;
    cap = pg->results_cap;
    pg->results = NULL;
    pg->nresults = 0;
    pg->results_cap = 0;
    pg->results_oom = false;
    pg->inflight = NULL;
    uv_timer_stop(&pg->overdue);
    /* 25006 (read_only_sql_transaction): this server became a standby, or
     * was made read-only, under us.  The request fails as refused (nothing
     * of it applied: each write is one transaction); the connection goes,
     * so the next finds the primary (target_session_attrs=read-write). */
    bool read_only = reply.sqlstate && strcmp(reply.sqlstate, "25006") == 0;
    req->cb(&reply, req->data);
    free(req);
    for (size_t i = 0; i < nresults; i++)
        PQclear(results[i]);
    if (pg->state == PG_CLOSING || pg->results) {
        free(results);
        return;
    }
    pg->results = results; /* reused by the next request */
    pg->results_cap = cap;
    if (read_only && pg->state == PG_READY) {
        pg_fail_conn(pg, -ECONNRESET, "the database is read-only now (a standby?): reconnecting to the primary");
        return;
    }
    pg_dispatch(pg);
}

static void pg_collect(struct tm_pg *pg)
{
    while (!PQisBusy(pg->conn)) {
        PGresult *res = PQgetResult(pg->conn);
        ExecStatusType st;

        if (!res) {
            if (!pg->rolling_back && PQtransactionStatus(pg->conn) == PQTRANS_INERROR) {
                /* A script that opened a transaction and failed leaves the
                 * session in an aborted block, refusing every statement
                 * until ROLLBACK.  Roll it back before the callback runs,
                 * so the next request finds a clean session, as the header
                 * promises. */
                if (!PQsendQuery(pg->conn, "ROLLBACK")) {
                    pg_lost(pg, PQerrorMessage(pg->conn));
                    return;
                }
                pg->rolling_back = true;
                if (pg_flush(pg) < 0 || pg->flushing)
                    return;
                continue;
            }
            pg->rolling_back = false;
            if (pg->preparing && pg->nresults == 0) {
                if (pg_prepared_run(pg) < 0 || pg->flushing)
                    return;
                continue;
            }
            pg->preparing = false;
            pg_complete(pg);
            return;
        }
        if (pg->rolling_back || (pg->preparing && PQresultStatus(res) == PGRES_COMMAND_OK)) {
            PQclear(res); /* the caller asked for none of these */
            continue;
        }
        st = PQresultStatus(res);
        if (st == PGRES_COPY_IN || st == PGRES_COPY_OUT || st == PGRES_COPY_BOTH) {
            /* COPY needs a data stream this API has no place for; the
             * protocol state cannot be recovered cheaply, so reconnect. */
            PQclear(res);
            pg_fail_conn(pg, TM_EINVAL, "COPY is not supported on this connection");
            return;
        }
        if (pg->nresults == pg->results_cap) {
            size_t cap = pg->results_cap ? pg->results_cap * 2 : 4;
            PGresult **grown = realloc(pg->results, cap * sizeof(*grown));

            if (!grown) {
                /* Keep reading so the connection stays in step; the request
                 * fails once its results are all in. */
                PQclear(res);
                pg->results_oom = true;
                continue;
            }
            pg->results = grown;
            pg->results_cap = cap;
        }
        pg->results[pg->nresults++] = res;
    }
}

static void pg_on_poll(uv_poll_t *handle, int status, int events)
{
    struct pg_watch *w = handle->data;
    struct tm_pg *pg = w->pg;

    if (pg->state == PG_CONNECTING) {
        /* Stop first: PQconnectPoll() may close this socket and open
         * another, and a stopped watcher is never left on a closed fd. */
        uv_poll_stop(handle);
        pg_connect_step(pg);
        return;
    }
    if (pg->state != PG_READY)
        return;
    if (status < 0) {
        pg_lost(pg, uv_strerror(status));
        return;
    }
    if (events & UV_READABLE) {
        PGnotify *n;

        if (!PQconsumeInput(pg->conn)) {
            pg_lost(pg, PQerrorMessage(pg->conn));
            return;
        }
        /* Nobody here listens; drop notifications so they do not pile up. */
        while ((n = PQnotifies(pg->conn)) != NULL)
            PQfreemem(n);
    }
    if (PQstatus(pg->conn) == CONNECTION_BAD) {
        pg_lost(pg, PQerrorMessage(pg->conn));
        return;
    }
    if (!pg->inflight)
        return;
    if (pg->flushing) {
        if (pg_flush(pg) < 0 || pg->flushing)
            return;
    }
    pg_collect(pg);
}

static void pg_on_expiry(uv_timer_t *timer)
{
    struct tm_pg *pg = timer->data;
    uint64_t now = uv_now(pg->loop);

    struct pg_req *req;

    while (pg->state != PG_CLOSING && (req = queue_take_expired(&pg->queue, now)) != NULL)
        req_fail(req, -ETIMEDOUT, req->hard ? "no database connection before the request's deadline"
                                            : "no database connection within the wait limit");
    if (pg->state != PG_CLOSING)
        expiry_arm(&pg->expiry, &pg->queue, pg_on_expiry);
}

static int pg_enqueue(struct tm_pg *pg, const char *sql, bool script, int nparams,
                      const char *const *params, tm_pg_cb cb, void *data)
{
    struct pg_req *req;

    if (!pg || !sql || !cb || nparams < 0 || (nparams > 0 && !params))
        return TM_EINVAL;
    if (pg->state == PG_CLOSING)
        return TM_ECANCELED;
    if (pg->queue.len >= TM_PG_QUEUE_MAX)
        return -EAGAIN;
    req = req_new(sql, NULL, script, nparams, params, NULL, NULL, cb, data);
    if (!req)
        return TM_ENOMEM;
    req->deadline = uv_now(pg->loop) + TM_PG_WAIT_MS;
    queue_push(&pg->queue, req);
    expiry_arm(&pg->expiry, &pg->queue, pg_on_expiry);
    pg_kick(pg);
    return 0;
}

int tm_pg_query(struct tm_pg *pg, const char *sql, int nparams, const char *const *params,
                tm_pg_cb cb, void *data)
{
    return pg_enqueue(pg, sql, false, nparams, params, cb, data);
}

int tm_pg_exec(struct tm_pg *pg, const char *script, tm_pg_cb cb, void *data)
{
    return pg_enqueue(pg, script, true, 0, NULL, cb, data);
}

int tm_pg_connected(const struct tm_pg *pg)
{
    return pg && pg->state == PG_READY;
}

/* ---- lifetime ---------------------------------------------------------- */

static void pg_free(struct tm_pg *pg)
{
    if (pg->conninfo) {
        OPENSSL_cleanse(pg->conninfo, strlen(pg->conninfo));
        free(pg->conninfo);
    }
    free(pg->redacted);
    free(pg->results);
    for (unsigned i = 0; i < pg->nhosts; i++) {
        free(pg->hosts[i]);
        free(pg->ports[i]);
    }
    free(pg);
}

/* One handle of pg finished closing; the last one, once pg is closing,
 * delivers the cancellations and frees pg. */
static void pg_release_handle(struct tm_pg *pg)
{
    struct pg_req *req;

    if (--pg->open_handles > 0 || pg->state != PG_CLOSING)
        return;
    /* Every handle is closed: now the callbacks may run, and pg goes. */
    while ((req = queue_pop(&pg->canceled)) != NULL)
        req_fail(req, TM_ECANCELED, "database connection closed");
    if (pg->done)
        pg->done(pg->done_data);
    pg_free(pg);
}

static void pg_handle_closed(uv_handle_t *handle)
{
    pg_release_handle(handle->data);
}

/* One comma-separated item of list (the i-th), or NULL past its end. */
static char *list_item(const char *list, unsigned i)
{
    const char *p = list;

    for (unsigned k = 0; k < i; k++) {
        p = strchr(p, ',');
        if (!p)
            return NULL;
        p++;
    }
    return strndup(p, strcspn(p, ","));
}

/* The host list of a conninfo, when it has several hosts and no hostaddr
 * (which libpq pairs with host: then libpq goes through the list itself,
 * bounded by our one deadline).  A single port applies to every host. */
static int pg_split_hosts(struct tm_pg *pg, const PQconninfoOption *opts)
{
    const char *host = NULL, *port = NULL, *hostaddr = NULL;
    unsigned n = 1;

    for (const PQconninfoOption *o = opts; o->keyword; o++) {
        if (strcmp(o->keyword, "host") == 0)
            host = o->val;
        else if (strcmp(o->keyword, "port") == 0)
            port = o->val;
        else if (strcmp(o->keyword, "hostaddr") == 0)
            hostaddr = o->val;
    }
    if (!host || (hostaddr && *hostaddr))
        return 0;
    for (const char *p = host; *p; p++)
        n += *p == ',';
    if (n < 2 || n > PG_HOSTS_MAX)
        return 0;
    bool one_port = !port || !strchr(port, ',');
    for (unsigned i = 0; i < n; i++) {
        pg->hosts[i] = list_item(host, i);
        pg->ports[i] = port && *port ? list_item(port, one_port ? 0 : i) : NULL;
        if (!pg->hosts[i] || (port && *port && !pg->ports[i]))
            return TM_ENOMEM;
        pg->nhosts = i + 1;
    }
    pg->round_left = n;
    return 0;
}

static int pg_new(uv_loop_t *loop, const char *conninfo, tm_pg_state_cb on_state, void *data,
                  struct tm_pg_pool *pool, struct tm_pg **ret_pg)
{
    struct tm_pg *pg = NULL;
    PQconninfoOption *opts = NULL;
    char *errmsg = NULL;
    size_t redacted_size;
    int r = TM_EINVAL;

    if (!loop || !conninfo || !ret_pg)
        goto out;
    /* A conninfo libpq cannot parse never gets better by retrying: say so
     * now.  libpq's message may quote the password, so it is not shown. */
    opts = PQconninfoParse(conninfo, &errmsg);
    if (!opts)
        goto out;
    r = TM_ENOMEM;
    pg = calloc(1, sizeof(*pg));
    if (!pg)
        goto out;
    pg->conninfo = strdup(conninfo);
    redacted_size = 2 * strlen(conninfo) + 16; /* "***" may be longer than a password */
    pg->redacted = malloc(redacted_size);
    if (!pg->conninfo || !pg->redacted)
        goto out;
    tm_pg_conninfo_redact(conninfo, pg->redacted, redacted_size);
    if (pg_split_hosts(pg, opts) < 0)
        goto out;
    pg->loop = loop;
    pg->on_state = on_state;
    pg->data = data;
    pg->pool = pool;
    pg->rng = (uv_hrtime() ^ (uint64_t)(uintptr_t)pg) | 1;
    pg->state = PG_WAITING;
    uv_timer_init(loop, &pg->retry);
    uv_timer_init(loop, &pg->kick);
    uv_timer_init(loop, &pg->expiry);
    uv_timer_init(loop, &pg->overdue);
    pg->retry.data = pg;
    pg->kick.data = pg;
    pg->expiry.data = pg;
    pg->overdue.data = pg;
    pg->open_handles = 4;
    /* The first attempt starts from the loop, so its state callback never
     * fires inside this call. */
    uv_timer_start(&pg->retry, pg_on_retry, 0, 0);
    *ret_pg = pg;
    pg = NULL;
    r = 0;
out:
    if (r == TM_EINVAL && conninfo) {
        char shown[256];

        tm_pg_conninfo_redact(conninfo, shown, sizeof(shown));
        tm_log_error("invalid database connection string", "db=\"%s\"", shown);
    }
    if (pg)
        pg_free(pg);
    if (errmsg)
        PQfreemem(errmsg);
    if (opts)
        PQconninfoFree(opts);
    return r;
}

int tm_pg_create(uv_loop_t *loop, const char *conninfo, tm_pg_state_cb on_state, void *data,
                 struct tm_pg **ret_pg)
{
    return pg_new(loop, conninfo, on_state, data, NULL, ret_pg);
}

void tm_pg_close(struct tm_pg *pg, void (*done)(void *data), void *data)
{
    if (!pg || pg->state == PG_CLOSING)
        return;
    pg_set_state(pg, PG_CLOSING);
    pg->done = done;
    pg->done_data = data;
    if (pg->inflight) {
        queue_push(&pg->canceled, pg->inflight);
        pg->inflight = NULL;
    }
    queue_splice(&pg->canceled, &pg->queue);
    pg_clear_results(pg);
    pg->rolling_back = false;
    pg_drop_conn(pg);
    uv_close((uv_handle_t *)&pg->retry, pg_handle_closed);
    uv_close((uv_handle_t *)&pg->kick, pg_handle_closed);
    uv_close((uv_handle_t *)&pg->expiry, pg_handle_closed);
    uv_close((uv_handle_t *)&pg->overdue, pg_handle_closed);
}

/* ---- pool -------------------------------------------------------------- */

/* The pool reports status 0 when it goes from no connection up to at least
 * one (the first connect, and recovery after an outage), and every failed
 * attempt or loss of a member, so `tarmac serve` can give up when the
 * database is unreachable at start. */
static void pool_member_state(struct tm_pg_pool *pool, struct tm_pg *pg, int status,
                              const char *error)
{
    if (pool->closing)
        return;
    if (status == 0) {
        if (!pool->up) {
            pool->up = true;
            if (pool->on_state)
                pool->on_state(0, NULL, pool->data);
        }
        return;
    }
    if (tm_pg_pool_connected(pool) == 0)
        pool->up = false;
    if (pool->on_state)
        pool->on_state(status, error, pool->data);
}

static void pool_kick(struct tm_pg_pool *pool)
{
    for (unsigned i = 0; i < pool->created; i++)
        pg_kick(pool->conns[i]);
}

static void pool_on_expiry(uv_timer_t *timer)
{
    struct tm_pg_pool *pool = timer->data;
    uint64_t now = uv_now(pool->loop);

    struct pg_req *req;

    while (!pool->closing && (req = queue_take_expired(&pool->queue, now)) != NULL)
        req_fail(req, -ETIMEDOUT, req->hard ? "no database connection before the request's deadline"
                                            : "no database connection within the wait limit");
    if (!pool->closing)
        expiry_arm(&pool->expiry, &pool->queue, pool_on_expiry);
}

static void pool_closed_one(struct tm_pg_pool *pool)
{
    struct pg_req *req;

    if (--pool->open > 0)
        return;
    while ((req = queue_pop(&pool->canceled)) != NULL)
        req_fail(req, TM_ECANCELED, "database pool closed");
    if (pool->done)
        pool->done(pool->done_data);
    free(pool->conns);
    free(pool);
}

static void pool_member_closed(void *data)
{
    pool_closed_one(data);
}

static void pool_timer_closed(uv_handle_t *handle)
{
    pool_closed_one(handle->data);
}

int tm_pg_pool_create(uv_loop_t *loop, const char *conninfo, unsigned size,
                      tm_pg_state_cb on_state, void *data, struct tm_pg_pool **ret_pool)
{
    struct tm_pg_pool *pool;
    int r;

    if (!loop || !conninfo || !ret_pool || size == 0 || size > PG_POOL_MAX)
        return TM_EINVAL;
    pool = calloc(1, sizeof(*pool));
    if (!pool)
        return TM_ENOMEM;
    pool->conns = calloc(size, sizeof(*pool->conns));
    if (!pool->conns) {
        free(pool);
        return TM_ENOMEM;
    }
    pool->loop = loop;
    pool->on_state = on_state;
    pool->data = data;
    pool->size = size;
    uv_timer_init(loop, &pool->expiry);
    pool->expiry.data = pool;
    for (unsigned i = 0; i < size; i++) {
        r = pg_new(loop, conninfo, NULL, NULL, pool, &pool->conns[i]);
        if (r < 0) {
            /* Members already started own handles: close them the normal
             * way, which frees the pool later, from the loop. */
            tm_pg_pool_close(pool, NULL, NULL);
            return r;
        }
        pool->created++;
    }
    *ret_pool = pool;
    return 0;
}

static int pool_enqueue(struct tm_pg_pool *pool, const char *sql, const char *name, bool script,
                        int nparams, const char *const *params, const int *lengths, const int *formats,
                        uint64_t timeout_ms, tm_pg_cb cb, void *data)
{
    struct pg_req *req;

    if (!pool || !sql || !cb || nparams < 0 || (nparams > 0 && !params))
        return TM_EINVAL;
    if (pool->closing)
        return TM_ECANCELED;
    if (pool->queue.len >= TM_PG_QUEUE_MAX)
        return -EAGAIN;
    req = req_new(sql, name, script, nparams, params, lengths, formats, cb, data);
    if (!req)
        return TM_ENOMEM;
    req->pool = pool;
    req->deadline = uv_now(pool->loop) + TM_PG_WAIT_MS;
    if (timeout_ms > 0 && timeout_ms < TM_PG_WAIT_MS) {
        req->deadline = uv_now(pool->loop) + timeout_ms;
        req->hard = true;
    }
    queue_push(&pool->queue, req);
    expiry_arm(&pool->expiry, &pool->queue, pool_on_expiry);
    pool_kick(pool);
    return 0;
}

int tm_pg_pool_query(struct tm_pg_pool *pool, const char *sql, int nparams,
                     const char *const *params, tm_pg_cb cb, void *data)
{
    return pool_enqueue(pool, sql, NULL, false, nparams, params, NULL, NULL, 0, cb, data);
}

int tm_pg_pool_query_prepared_until(struct tm_pg_pool *pool, const char *name, const char *sql,
                                    int nparams, const char *const *params, uint64_t timeout_ms,
                                    tm_pg_cb cb, void *data)
{
    if (!name || !*name || strlen(name) >= PG_PREPARED_NAME)
        return TM_EINVAL;
    return pool_enqueue(pool, sql, name, false, nparams, params, NULL, NULL, timeout_ms ? timeout_ms : 1,
                        cb, data);
}

int tm_pg_pool_query_prepared_bin_until(struct tm_pg_pool *pool, const char *name, const char *sql,
                                        int nparams, const char *const *params, const int *lengths,
                                        const int *formats, uint64_t timeout_ms, tm_pg_cb cb,
                                        void *data)
{
    if (!name || !*name || strlen(name) >= PG_PREPARED_NAME || !lengths || !formats)
        return TM_EINVAL;
    for (int i = 0; i < nparams; i++)
        if (formats[i] && params && params[i] && lengths[i] < 0)
            return TM_EINVAL;
    return pool_enqueue(pool, sql, name, false, nparams, params, lengths, formats,
                        timeout_ms ? timeout_ms : 1, cb, data);
}

int tm_pg_pool_query_until(struct tm_pg_pool *pool, const char *sql, int nparams,
                           const char *const *params, uint64_t timeout_ms, tm_pg_cb cb, void *data)
{
    return pool_enqueue(pool, sql, NULL, false, nparams, params, NULL, NULL, timeout_ms ? timeout_ms : 1, cb,
                        data);
}

int tm_pg_pool_exec(struct tm_pg_pool *pool, const char *script, tm_pg_cb cb, void *data)
{
    return pool_enqueue(pool, script, NULL, true, 0, NULL, NULL, NULL, 0, cb, data);
}

bool tm_pg_pool_down(const struct tm_pg_pool *pool)
{
    if (!pool || pool->created == 0)
        return false;
    /* attempt counts connects that failed since the member's last success
     * (a lost connection counts as one): every member at zero is a pool
     * still starting, not one that found the database gone. */
    for (unsigned i = 0; i < pool->created; i++)
        if (tm_pg_connected(pool->conns[i]) || pool->conns[i]->attempt == 0)
            return false;
    return true;
}

unsigned tm_pg_pool_connected(const struct tm_pg_pool *pool)
{
    unsigned n = 0;

    if (!pool)
        return 0;
    for (unsigned i = 0; i < pool->created; i++)
        n += tm_pg_connected(pool->conns[i]) ? 1 : 0;
    return n;
}

void tm_pg_pool_close(struct tm_pg_pool *pool, void (*done)(void *data), void *data)
{
    if (!pool || pool->closing)
        return;
    pool->closing = true;
    pool->done = done;
    pool->done_data = data;
    queue_splice(&pool->canceled, &pool->queue);
    pool->open = pool->created + 1;
    uv_close((uv_handle_t *)&pool->expiry, pool_timer_closed);
    for (unsigned i = 0; i < pool->created; i++)
        tm_pg_close(pool->conns[i], pool_member_closed, pool);
}

/* ---- redaction --------------------------------------------------------- */

struct redact_out {
    char *buf;
    size_t size;
    size_t pos;
};

static void out_put(struct redact_out *o, const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        if (o->pos + 1 < o->size)
            o->buf[o->pos] = s[i];
        o->pos++;
    }
}

/* Whether a URI query key, percent-decoded as libpq decodes it, is
 * "password". */
static bool uri_key_is_password(const char *s, size_t n)
{
    char key[16];
    size_t k = 0;

    for (size_t i = 0; i < n; i++) {
        int c = (unsigned char)s[i], hi, lo;

        if (c == '%' && i + 2 < n && (hi = OPENSSL_hexchar2int((unsigned char)s[i + 1])) >= 0 &&
            (lo = OPENSSL_hexchar2int((unsigned char)s[i + 2])) >= 0) {
            c = hi * 16 + lo;
            i += 2;
        }
        if (k + 1 >= sizeof(key))
            return false;
        key[k++] = (char)c;
    }
    key[k] = '\0';
    return strcasecmp(key, "password") == 0;
}

static bool is_uri(const char *s, size_t n)
{
    return (n >= 13 && strncmp(s, "postgresql://", 13) == 0) ||
           (n >= 11 && strncmp(s, "postgres://", 11) == 0);
}

/* postgresql://user:secret@host,host2/db?password=secret&sslmode=require */
static void redact_uri(struct redact_out *o, const char *s, size_t n)
{
    const char *end = s + n;
    const char *p = (const char *)memchr(s, ':', n) + 3; /* past "://" */
    const char *q = p;
    const char *query;

    out_put(o, s, (size_t)(p - s));
    /* libpq ends the user info at the first '@' or '/'. */
    while (q < end && *q != '@' && *q != '/')
        q++;
    if (q < end && *q == '@') {
        const char *colon = memchr(p, ':', (size_t)(q - p));

        if (colon) {
            out_put(o, p, (size_t)(colon + 1 - p));
            out_put(o, "***", 3);
            p = q;
        }
    }
    query = memchr(p, '?', (size_t)(end - p));
    if (!query) {
        out_put(o, p, (size_t)(end - p));
        return;
    }
    out_put(o, p, (size_t)(query + 1 - p));
    p = query + 1;
    while (p < end) {
        const char *amp = memchr(p, '&', (size_t)(end - p));
        const char *item_end = amp ? amp : end;
        const char *eq = memchr(p, '=', (size_t)(item_end - p));

        if (eq && uri_key_is_password(p, (size_t)(eq - p))) {
            out_put(o, p, (size_t)(eq + 1 - p));
            out_put(o, "***", 3);
        } else {
            out_put(o, p, (size_t)(item_end - p));
        }
        p = item_end;
        if (amp) {
            out_put(o, "&", 1);
            p++;
        }
    }
}

/* host=db password = 'it''s \' secret' dbname=x */
static void redact_keyvalue(struct redact_out *o, const char *s)
{
    const char *p = s;

    while (*p) {
        const char *key = p;
        const char *value;
        size_t key_len;
        bool quoted;

        if (isspace((unsigned char)*p)) {
            out_put(o, p++, 1);
            continue;
        }
        while (*p && *p != '=' && !isspace((unsigned char)*p))
            p++;
        key_len = (size_t)(p - key);
        out_put(o, key, key_len);
        while (isspace((unsigned char)*p))
            out_put(o, p++, 1);
        if (*p != '=')
            continue; /* malformed; libpq refuses it anyway */
        out_put(o, p++, 1);
        while (isspace((unsigned char)*p))
            out_put(o, p++, 1);
        value = p;
        quoted = *p == '\'';
        if (quoted) {
            p++;
            while (*p && *p != '\'') {
                if (*p == '\\' && p[1])
                    p++;
                p++;
            }
            if (*p == '\'')
                p++;
        } else {
            while (*p && !isspace((unsigned char)*p)) {
                if (*p == '\\' && p[1])
                    p++;
                p++;
            }
        }
        if (key_len == 8 && strncasecmp(key, "password", 8) == 0)
            out_put(o, "***", 3);
        else if (key_len == 6 && strncasecmp(key, "dbname", 6) == 0 && !quoted &&
                 is_uri(value, (size_t)(p - value)))
            redact_uri(o, value, (size_t)(p - value)); /* dbname may hold a whole URI */
        else
            out_put(o, value, (size_t)(p - value));
    }
}

void tm_pg_conninfo_redact(const char *conninfo, char *buf, size_t size)
{
    struct redact_out o = {.buf = buf, .size = size};

    if (!buf || size == 0)
        return;
    if (!conninfo)
        conninfo = "";
    if (is_uri(conninfo, strlen(conninfo)))
        redact_uri(&o, conninfo, strlen(conninfo));
    else
        redact_keyvalue(&o, conninfo);
    buf[o.pos < size ? o.pos : size - 1] = '\0';
}
