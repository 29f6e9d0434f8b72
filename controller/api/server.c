/*
 * controller/api/server.c: the HTTP server core: listening, h2o glue and
 * shutdown.  Beside it (server_core.h): the calls and their answers in
 * call.c, routing in dispatch.c, authentication and rate limits in auth.c,
 * the 413 -> 400 filter in too_large.c.  The routes' own work (statements and their
 * answers) is in the resource files, whose table (routes.c) the daemon
 * hands to tm_api_start(): the server names no route.  See server.h.
 *
 * Lifetimes.  h2o owns each request (h2o_req_t) and frees it with its
 * memory pool when the connection ends, possibly while our statement is in
 * flight.  So every request we answer later has a heap struct api_call,
 * and the request's pool holds a small shared ref whose dispose callback
 * clears call->req: a callback that finds req NULL drops its answer.  When
 * we answer first, we cut the ref (ref->call = NULL) before freeing the
 * call.
 *
 * Shutdown.  h2o 2.2 has no call that closes idle HTTP/1 connections; it
 * closes them when their request timeout fires.  tm_api_close() marks the
 * context shut down (no more keep-alive after each answer) and expires the
 * request timeouts at once, repeating every 100 ms until every connection
 * is gone.  Then h2o_context_dispose() closes h2o's own handles (embedded
 * in our struct), and we free the struct one loop iteration later, after
 * their close callbacks have run.
 *
 * The hot path.  POST /v1/jobs from a token authenticated in the last
 * AUTH_TTL_MS skips the separate lookup: the authentication cache gives
 * the role and team for the checks made before any statement, and the
 * route batches the job with others into one statement that checks each
 * row's token again, so revocation still takes effect on the next request
 * (submit.c, through io/group_commit.c).  Every other route, and a token not in
 * the cache, takes two statements: the lookup, then the work.
 */
#include "controller/api/server.h"
#include "controller/api/internal.h"
#include "controller/api/server_core.h"
#include "controller/api/tls.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/crypto.h>

#include "controller/spec/token.h"
#include "core/err.h"
#include "core/file.h"
#include "core/log.h"

void tm_api_limits_default(struct tm_api_limits *limits)
{
    *limits = (struct tm_api_limits){
        .max_body_bytes = 256 * 1024,
        .max_list = 1000,
        .rate_per_s = 100,
        .burst = 200,
        .request_timeout_ms = 5000,
        .enroll_rate_per_s = 2,
        .enroll_burst = 50,
    };
}

static void maybe_finish(struct tm_api *api);

/* ---- listening ---------------------------------------------------------- */

static void on_conn_closed(uv_handle_t *h)
{
    struct api_conn *conn = (struct api_conn *)h;
    struct tm_api *api = conn->api;

    free(conn);
    api->nconns--;
    maybe_finish(api);
}

static void on_conn_refused(uv_handle_t *h)
{
    free(h);
}

static void on_accept(uv_stream_t *listener, int status)
{
    struct tm_api *api = listener->data;
    struct api_conn *conn;
    h2o_socket_t *sock;

    if (status < 0) {
        tm_log_warn("api could not accept a connection", "error=\"%s\"", uv_strerror(status));
        return;
    }
    conn = calloc(1, sizeof(*conn));
    if (!conn)
        return;
    conn->api = api;
    if (uv_tcp_init(api->loop, &conn->tcp) < 0) {
        free(conn);
        return;
    }
    if (uv_accept(listener, (uv_stream_t *)&conn->tcp) < 0) {
        uv_close((uv_handle_t *)&conn->tcp, on_conn_refused);
        return;
    }
    api->nconns++;
    sock = h2o_uv_socket_create((uv_stream_t *)&conn->tcp, on_conn_closed);
    h2o_accept(&api->accept_ctx, sock);
}

/* "host:port" into a socket address; host an IP literal, "[v6]",
 * "localhost" or "*".  No name resolution: that would block. */
static int parse_listen(const char *listen, struct sockaddr_storage *ss)
{
    char host[128];
    const char *colon = strrchr(listen, ':');
    char *end;
    long port;
    size_t n;

    if (!colon)
        return TM_EINVAL;
    n = (size_t)(colon - listen);
    if (n >= sizeof(host))
        return TM_EINVAL;
    memcpy(host, listen, n);
    host[n] = '\0';
    errno = 0;
    port = strtol(colon + 1, &end, 10);
    if (errno || end == colon + 1 || *end || port < 0 || port > 65535)
        return TM_EINVAL;
    if (host[0] == '[') {
        if (n < 3 || host[n - 1] != ']')
            return TM_EINVAL;
        host[n - 1] = '\0';
        return uv_ip6_addr(host + 1, (int)port, (struct sockaddr_in6 *)ss) < 0 ? TM_EINVAL : 0;
    }
    if (strcmp(host, "localhost") == 0)
        snprintf(host, sizeof(host), "127.0.0.1");
    else if (strcmp(host, "*") == 0 || host[0] == '\0')
        snprintf(host, sizeof(host), "0.0.0.0");
    return uv_ip4_addr(host, (int)port, (struct sockaddr_in *)ss) < 0 ? TM_EINVAL : 0;
}

static void on_start_failed(uv_handle_t *h)
{
    struct tm_api *api = h->data;

    SSL_CTX_free(api->ssl_ctx);
    free(api);
}

static void free_route_state(struct tm_api *api)
{
    if (api->route_state && api->routes->state_free)
        api->routes->state_free(api->route_state);
    api->route_state = NULL;
}

/* Both start functions end here.  ssl_ctx (NULL for plain HTTP) is the
 * API's from here on, freed by this function on failure. */
static int api_start(uv_loop_t *loop, struct tm_pg_pool *pool, const struct tm_api_routes *routes,
                     const char *listen, const struct tm_api_limits *limits, SSL_CTX *ssl_ctx,
                     struct tm_api **ret_api)
{
    struct tm_api *api = NULL;
    struct sockaddr_storage ss;
    struct sockaddr_storage bound;
    int len = sizeof(bound);
    h2o_hostconf_t *host;
    h2o_pathconf_t *path;
    struct api_handler *handler;
    int r;

    if (!loop || !pool || !routes || !routes->table || !listen || !ret_api) {
        SSL_CTX_free(ssl_ctx);
        return TM_EINVAL;
    }
    memset(&ss, 0, sizeof(ss));
    if (parse_listen(listen, &ss) < 0) {
        tm_log_error("api cannot listen", "listen=\"%s\" error=\"%s\"", listen,
                     "not an IP address and port (host names other than localhost are not resolved)");
        SSL_CTX_free(ssl_ctx);
        return TM_EINVAL;
    }
    api = calloc(1, sizeof(*api));
    if (!api) {
        SSL_CTX_free(ssl_ctx);
        return TM_ENOMEM;
    }
    api->loop = loop;
    api->pool = pool;
    api->on_call_freed = maybe_finish;
    api->ssl_ctx = ssl_ctx;
    api->routes = routes;
    api->route_state = routes->state_new ? routes->state_new() : NULL;
    if (routes->state_new && !api->route_state) {
        SSL_CTX_free(ssl_ctx);
        free(api);
        return TM_ENOMEM;
    }
    if (limits)
        api->limits = *limits;
    else
        tm_api_limits_default(&api->limits);
    if (api->limits.max_list == 0)
        api->limits.max_list = 1;
    tm_clock_init(&api->own_clock, 1.0);
    api->clock = &api->own_clock;

    r = uv_tcp_init(loop, &api->listener);
    if (r < 0) {
        free_route_state(api);
        SSL_CTX_free(ssl_ctx);
        free(api);
        return r;
    }
    api->listener.data = api;
    r = uv_tcp_bind(&api->listener, (const struct sockaddr *)&ss, 0);
    if (r == 0)
        r = uv_listen((uv_stream_t *)&api->listener, 511, on_accept);
    if (r == 0)
        r = uv_tcp_getsockname(&api->listener, (struct sockaddr *)&bound, &len);
    if (r < 0) {
        tm_log_error("api could not listen", "listen=\"%s\" error=\"%s\"", listen, uv_strerror(r));
        /* Nothing else exists yet: free once the listener is closed. */
        free_route_state(api);
        uv_close((uv_handle_t *)&api->listener, on_start_failed);
        return r;
    }
    api->port = ntohs(bound.ss_family == AF_INET6 ? ((struct sockaddr_in6 *)&bound)->sin6_port
                                                   : ((struct sockaddr_in *)&bound)->sin_port);
    r = uv_timer_init(loop, &api->timer);
    if (r < 0) {
        free_route_state(api);
        uv_close((uv_handle_t *)&api->listener, on_start_failed);
        return r;
    }
    api->timer.data = api;

    h2o_config_init(&api->conf);
    api->conf.server_name = h2o_iovec_init(H2O_STRLIT("tarmac"));
    /* Between max_body_bytes and this we answer 400 naming the field; past
     * it h2o refuses the body itself with 413 before any handler runs, and
     * the too-large filter turns that answer into the same 400. */
    api->conf.max_request_entity_size = api->limits.max_body_bytes * 2 + 4096;
    api->conf.http1.upgrade_to_http2 = 0;
    host = h2o_config_register_host(&api->conf, h2o_iovec_init(H2O_STRLIT("default")), 65535);
    path = h2o_config_register_path(host, "/", 0);
    handler = (struct api_handler *)h2o_create_handler(path, sizeof(*handler));
    handler->super.on_req = tm_api_on_req;
    handler->api = api;
    /* Both: h2o binds a request refused while its body is read to the
     * host's fallback path, not to ours. */
    tm_api_add_too_large_filter(path, api);
    tm_api_add_too_large_filter(&host->fallback_path, api);
    h2o_context_init(&api->ctx, loop, &api->conf);
    api->accept_ctx.ctx = &api->ctx;
    api->accept_ctx.hosts = api->conf.hosts;
    /* With a context, h2o_accept() runs the TLS handshake first, then
     * HTTP/2 or HTTP/1.1 by ALPN (api/tls.c). */
    api->accept_ctx.ssl_ctx = api->ssl_ctx;

    tm_log_info("api listening",
                "listen=\"%s\" port=%d scheme=%s max_body_bytes=%zu max_list=%u"
                " rate_per_token=%g burst=%g",
                listen, api->port, api->ssl_ctx ? "https" : "http", api->limits.max_body_bytes,
                api->limits.max_list, api->limits.rate_per_s, api->limits.burst);
    *ret_api = api;
    return 0;
}

int tm_api_start_listen(uv_loop_t *loop, struct tm_pg_pool *pool, const struct tm_api_routes *routes,
                        const char *listen, const struct tm_api_limits *limits,
                        struct tm_api **ret_api)
{
    return api_start(loop, pool, routes, listen, limits, NULL, ret_api);
}

/* The config's limits; a zero (a config built in code, not parsed) keeps
 * the default, as the parser would have. */
static void limits_from_config(const struct tm_config_api *c, struct tm_api_limits *limits)
{
    tm_api_limits_default(limits);
    if (c->max_body_bytes > 0)
        limits->max_body_bytes = (size_t)c->max_body_bytes;
    if (c->max_list > 0)
        limits->max_list = c->max_list;
    if (c->rate_per_s > 0)
        limits->rate_per_s = c->rate_per_s;
    if (c->burst > 0)
        limits->burst = c->burst;
    if (c->request_timeout_ms > 0)
        limits->request_timeout_ms = (unsigned)c->request_timeout_ms;
    if (c->enroll_rate_per_s > 0)
        limits->enroll_rate_per_s = c->enroll_rate_per_s;
    if (c->enroll_burst > 0)
        limits->enroll_burst = c->enroll_burst;
}

int tm_api_start(uv_loop_t *loop, struct tm_pg_pool *pool, const struct tm_api_routes *routes,
                 const struct tm_config *cfg, struct tm_api **ret_api)
{
    struct tm_api_limits limits;
    SSL_CTX *ssl_ctx = NULL;
    char metrics_hash[TM_TOKEN_HASH_LEN + 1];
    int r;

    if (!cfg || !cfg->listen)
        return TM_EINVAL;
    limits_from_config(&cfg->api, &limits);
    /* Before binding: a bad certificate leaves nothing listening. */
    if (cfg->api.tls_cert_file || cfg->api.tls_key_file) {
        char err[512];

        r = tm_api_tls_load(cfg->api.tls_cert_file, cfg->api.tls_key_file, &ssl_ctx, err,
                            sizeof(err));
        if (r < 0) {
            tm_log_error("api cannot serve TLS", "error=\"%s\"", err);
            return r;
        }
    }
    if (cfg->api.metrics_token_file) {
        char err[512], *text = NULL;
        size_t n = 0;

        r = tm_file_read(cfg->api.metrics_token_file, 4096, &text, &n, err, sizeof(err));
        if (r < 0) {
            tm_log_error("api cannot read the metrics token", "error=\"%s\"", err);
            SSL_CTX_free(ssl_ctx);
            return r;
        }
        while (n && (text[n - 1] == '\n' || text[n - 1] == '\r' || text[n - 1] == ' '))
            n--;
        /* A token that no Authorization header could carry is a mistake. */
        bool usable = n > 0 && n <= 256;
        for (size_t i = 0; usable && i < n; i++)
            if ((unsigned char)text[i] <= ' ' || (unsigned char)text[i] >= 127)
                usable = false;
        if (!usable || tm_token_hash(text, n, metrics_hash) < 0) {
            OPENSSL_cleanse(text, n);
            free(text);
            tm_log_error("api cannot use the metrics token", "file=\"%s\" error=\"%s\"",
                         cfg->api.metrics_token_file,
                         "must hold one token of 1 to 256 printable characters without spaces");
            SSL_CTX_free(ssl_ctx);
            return TM_EINVAL;
        }
        OPENSSL_cleanse(text, n);
        free(text);
    }
    r = api_start(loop, pool, routes, cfg->listen, &limits, ssl_ctx, ret_api);
    if (r == 0)
        (*ret_api)->cfg = cfg;
    if (r == 0 && cfg->api.metrics_token_file) {
        (*ret_api)->metrics_token = true;
        memcpy((*ret_api)->metrics_hash, metrics_hash, sizeof(metrics_hash));
    }
    OPENSSL_cleanse(metrics_hash, sizeof(metrics_hash));
    if (r == 0 && cfg->time_scale > 1.0)
        tm_clock_init(&(*ret_api)->own_clock, cfg->time_scale);
    return r;
}

int tm_api_port(const struct tm_api *api)
{
    return api ? api->port : -1;
}

void tm_api_set_clock(struct tm_api *api, const struct tm_clock *clock)
{
    if (api && clock)
        api->clock = clock;
}

void tm_api_set_fleet_stats(struct tm_api *api, const struct tm_fleet_stats *stats)
{
    if (api)
        api->fleet = stats;
}

void tm_api_set_config(struct tm_api *api, const struct tm_config *cfg)
{
    if (api)
        api->cfg = cfg;
}

void tm_api_set_gc_gate(struct tm_api *api, struct tm_gc_gate *gate)
{
    if (api)
        api->gc_gate = gate;
}

struct tm_gc_gate *tm_api_gc_gate(const struct api_call *c)
{
    return c->api->gc_gate;
}

const struct tm_fleet_stats *tm_api_fleet_stats(const struct api_call *c)
{
    return c->api->fleet;
}

uint64_t tm_api_pool_connected(const struct api_call *c)
{
    return tm_pg_pool_connected(c->api->pool);
}

bool tm_api_closing(const struct api_call *c)
{
    return c->api->step != CLOSE_NONE;
}

/* ---- shutdown ----------------------------------------------------------- */

static void on_final_close(uv_handle_t *h)
{
    struct tm_api *api = h->data;
    void (*done)(void *) = api->done;
    void *data = api->done_data;

    free_route_state(api);
    OPENSSL_cleanse(api->auth, sizeof(api->auth));
    SSL_CTX_free(api->ssl_ctx); /* connections' SSL objects held references until they closed */
    free(api);
    if (done)
        done(data);
}

/* Idle keep-alive connections (HTTP/1), idle HTTP/2 connections and TLS
 * handshakes not yet finished sit on these timeouts; firing them now
 * closes those connections, and only those: a request being answered has
 * no entry there. */
static void expire_idle(struct tm_api *api)
{
    h2o_timeout_run(api->loop, &api->ctx.handshake_timeout, UINT64_MAX);
    h2o_timeout_run(api->loop, &api->ctx.http1.req_timeout, UINT64_MAX);
    h2o_timeout_run(api->loop, &api->ctx.http2.idle_timeout, UINT64_MAX);
}

static bool drained(const struct tm_api *api)
{
    return api->nconns == 0 && api->ncalls == 0 && api->listener_closed;
}

static void on_step(uv_timer_t *t)
{
    struct tm_api *api = t->data;

    switch (api->step) {
    case CLOSE_DRAINING:
        if (!drained(api)) {
            expire_idle(api);
            uv_timer_start(&api->timer, on_step, 100, 0);
            break;
        }
        /* Here, in a timer callback and not a close callback, h2o's
         * handles close in this iteration; the 1 ms timer fires in a later
         * one, after their close callbacks have run. */
        api->step = CLOSE_DISPOSED;
        /* h2o_context_request_shutdown() armed HTTP/2's GOAWAY resend on
         * the one-second timeout even with no HTTP/2 connection; dispose
         * asserts every timeout is empty. */
        if (h2o_timeout_is_linked(&api->ctx.http2._graceful_shutdown_timeout))
            h2o_timeout_unlink(&api->ctx.http2._graceful_shutdown_timeout);
        h2o_context_dispose(&api->ctx);
        h2o_config_dispose(&api->conf);
        uv_timer_start(&api->timer, on_step, 1, 0);
        break;
    case CLOSE_DISPOSED:
        api->step = CLOSE_FREEING;
        uv_close((uv_handle_t *)&api->timer, on_final_close);
        break;
    default:
        break;
    }
}

static void maybe_finish(struct tm_api *api)
{
    if (api->step == CLOSE_DRAINING && drained(api))
        uv_timer_start(&api->timer, on_step, 1, 0);
}

static void on_listener_closed(uv_handle_t *h)
{
    struct tm_api *api = h->data;

    api->listener_closed = true;
    maybe_finish(api);
}

void tm_api_close(struct tm_api *api, void (*done)(void *data), void *data)
{
    if (!api || api->step != CLOSE_NONE)
        return;
    api->done = done;
    api->done_data = data;
    api->step = CLOSE_DRAINING;
    uv_close((uv_handle_t *)&api->listener, on_listener_closed);
    h2o_context_request_shutdown(&api->ctx);
    expire_idle(api);
    uv_timer_start(&api->timer, on_step, 1, 0);
}
