/*
 * controller/api/server.c: the HTTP server core: listening, h2o glue, routing,
 * authentication, rate limits, answers and shutdown.  The routes' own work
 * (statements and their answers) is in routes.c, whose table the daemon
 * hands to tm_api_start(): this file names no route.  See server.h.
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
 * (routes.c, "group commit").  Every other route, and a token not in
 * the cache, takes two statements: the lookup, then the work.
 */
#include "controller/api/server.h"
#include "controller/api/internal.h"
#include "controller/api/tls.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/crypto.h>
#include <openssl/evp.h>

#include "controller/spec/request.h"
#include "controller/spec/token.h"
#include "core/err.h"
#include "core/file.h"
#include "core/log.h"

#define RATE_SLOTS 1024
#define RATE_PROBE 8
/* Recently authenticated tokens (see auth_cache_get). */
#define AUTH_SLOTS 512
#define AUTH_TTL_MS 60000

struct api_conn {
    uv_tcp_t tcp; /* first: h2o hands back this pointer on close */
    struct tm_api *api;
};

struct api_handler {
    h2o_handler_t super;
    struct tm_api *api;
};

struct rate_slot {
    char key[17];
    double tokens;
    uint64_t last_ms;
};

struct auth_slot {
    char hash[TM_TOKEN_HASH_LEN + 1]; /* "" when empty */
    enum tm_role role;
    char team[64];
    char token_name[64];
    uint64_t until_ms;
};

enum close_step { CLOSE_NONE, CLOSE_DRAINING, CLOSE_DISPOSED, CLOSE_FREEING };

struct tm_api {
    uv_loop_t *loop;
    struct tm_pg_pool *pool;
    struct tm_api_limits limits;
    struct tm_clock own_clock;
    const struct tm_clock *clock;
    h2o_globalconf_t conf;
    h2o_context_t ctx;
    h2o_accept_ctx_t accept_ctx;
    SSL_CTX *ssl_ctx;   /* owned; NULL for plain HTTP */
    /* api.metrics_token_file: /metrics then needs this bearer token.  Only
     * its SHA-256 is kept, compared in constant time. */
    bool metrics_token;
    unsigned char metrics_digest[32];
    const struct tm_config *cfg; /* borrowed from the daemon; NULL when started without one */
    uv_tcp_t listener;
    uv_timer_t timer;   /* shutdown steps */
    int port;
    unsigned nconns, ncalls;
    bool listener_closed;
    enum close_step step;
    void (*done)(void *data);
    void *done_data;
    struct tm_api_stats stats;
    const struct tm_fleet_stats *fleet; /* the controller's, borrowed; NULL when none */
    struct rate_slot rate[RATE_SLOTS];
    struct auth_slot auth[AUTH_SLOTS];
    const struct tm_api_routes *routes;   /* the daemon's: the server names no route */
    void *route_state;                    /* routes->state_new()'s, one per server */
};

void tm_api_limits_default(struct tm_api_limits *limits)
{
    *limits = (struct tm_api_limits){
        .max_body_bytes = 256 * 1024,
        .max_list = 1000,
        .rate_per_s = 100,
        .burst = 200,
    };
}

/* ---- answers ------------------------------------------------------------ */

static const char *status_reason(int status)
{
    switch (status) {
    case 200: return "OK";
    case 201: return "Created";
    case 400: return "Bad Request";
    case 401: return "Unauthorized";
    case 403: return "Forbidden";
    case 404: return "Not Found";
    case 405: return "Method Not Allowed";
    case 409: return "Conflict";
    case 413: return "Content Too Large";
    case 415: return "Unsupported Media Type";
    case 429: return "Too Many Requests";
    case 500: return "Internal Server Error";
    case 503: return "Service Unavailable";
    default: return "OK";
    }
}

static void count_status(struct tm_api *api, int status)
{
    if (status >= API_CODE_MIN && status <= API_CODE_MAX)
        api->stats.by_code[status - API_CODE_MIN]++;
    if (status < 300)
        api->stats.ok++;
    else if (status < 500)
        api->stats.client_errors++;
    else
        api->stats.server_errors++;
    if (status == 401 || status == 403)
        api->stats.denied++;
    if (status == 429)
        api->stats.throttled++;
}

/* Header values are not copied by h2o: only literals go here. */
static void send_raw(struct tm_api *api, h2o_req_t *req, int status, const char *ctype,
                     const char *body, size_t len)
{
    count_status(api, status);
    req->res.status = status;
    req->res.reason = status_reason(status);
    req->res.content_length = len;
    h2o_add_header(&req->pool, &req->res.headers, H2O_TOKEN_CONTENT_TYPE, NULL, ctype,
                   strlen(ctype));
    if (status == 401)
        h2o_add_header(&req->pool, &req->res.headers, H2O_TOKEN_WWW_AUTHENTICATE, NULL,
                       H2O_STRLIT("Bearer"));
    if (status == 429)
        h2o_add_header(&req->pool, &req->res.headers, H2O_TOKEN_RETRY_AFTER, NULL, H2O_STRLIT("1"));
    h2o_send_inline(req, body, len); /* copies the body into the request's pool */
}

static void send_json(struct tm_api *api, h2o_req_t *req, int status, const char *body, size_t len)
{
    send_raw(api, req, status, "application/json", body, len);
}

static void send_error(struct tm_api *api, h2o_req_t *req, int status, const char *field,
                       const char *message)
{
    cJSON *o = cJSON_CreateObject();
    char *text = NULL;

    if (o && cJSON_AddStringToObject(o, "error", message) &&
        (field ? cJSON_AddStringToObject(o, "field", field) != NULL
               : cJSON_AddNullToObject(o, "field") != NULL))
        text = cJSON_PrintUnformatted(o);
    if (text)
        send_json(api, req, status, text, strlen(text));
    else
        send_json(api, req, status, "{\"error\":\"out of memory\",\"field\":null}", 38);
    free(text);
    cJSON_Delete(o);
}

/* ---- calls -------------------------------------------------------------- */

struct call_ref {
    struct api_call *call;
};

static void on_req_dispose(void *p)
{
    struct call_ref *ref = p;

    if (ref->call)
        ref->call->req = NULL;
}

static struct api_call *call_new(struct tm_api *api, h2o_req_t *req, const struct api_route *route)
{
    struct api_call *c = calloc(1, sizeof(*c));
    struct call_ref *ref;

    if (!c)
        return NULL;
    ref = h2o_mem_alloc_shared(&req->pool, sizeof(*ref), on_req_dispose);
    ref->call = c;
    c->ref = ref;
    c->api = api;
    c->req = req;
    c->route = route;
    api->ncalls++;
    return c;
}

static void maybe_finish(struct tm_api *api);

void api_call_free(struct api_call *c)
{
    struct tm_api *api = c->api;

    /* Still linked to a live request: cut the link first. */
    if (c->req && c->ref)
        c->ref->call = NULL;
    OPENSSL_cleanse(c->hash, sizeof(c->hash));
    free(c);
    api->ncalls--;
    maybe_finish(api);
}

void api_reply(struct api_call *c, int status, const char *json, size_t len)
{
    if (c->req)
        send_json(c->api, c->req, status, json, len);
    api_call_free(c);
}

void api_reply_text(struct api_call *c, int status, const char *ctype, const char *text, size_t len)
{
    if (c->req)
        send_raw(c->api, c->req, status, ctype, text, len);
    api_call_free(c);
}

void api_fail(struct api_call *c, int status, const char *field, const char *message)
{
    if (c->req)
        send_error(c->api, c->req, status, field, message);
    api_call_free(c);
}

void api_fail_spec(struct api_call *c, const struct tm_spec_error *err)
{
    api_fail(c, 400, err->field[0] ? err->field : NULL, err->message);
}

bool api_reply_ok(struct api_call *c, const struct tm_pg_reply *reply)
{
    if (!c->req) {
        api_call_free(c); /* the client went away: nobody to answer */
        return false;
    }
    if (reply->status < 0) {
        api_fail_db(c, reply);
        return false;
    }
    return true;
}

void api_fail_db(struct api_call *c, const struct tm_pg_reply *reply)
{
    int status = 500;
    const char *msg = "the database refused the request";

    if (reply->status == -ECONNRESET || reply->status == -ETIMEDOUT ||
        reply->status == TM_ECANCELED || reply->status == TM_EUNAVAIL) {
        status = 503;
        msg = "database unavailable";
    } else if (reply->sqlstate && strncmp(reply->sqlstate, "23", 2) == 0) {
        /* A constraint the checks above should have caught first. */
        status = 400;
        msg = "rejected by the database's constraints";
    }
    tm_log_warn("api request failed", "route=\"%s\" status=%d error=\"%s\" sqlstate=%s",
                c->route ? c->route->pattern : "?", status,
                reply->error ? reply->error : tm_strerror(reply->status),
                reply->sqlstate ? reply->sqlstate : "-");
    api_fail(c, status, NULL, msg);
}

int api_query(struct api_call *c, const char *sql, int nparams, const char *const *params,
              tm_pg_cb cb)
{
    int r = tm_pg_pool_query(c->api->pool, sql, nparams, params, cb, c);

    if (r < 0) {
        tm_log_warn("api could not queue a statement", "route=\"%s\" error=\"%s\"",
                    c->route->pattern, tm_strerror(r));
        api_fail(c, 503, NULL, "database unavailable");
    }
    return r;
}

const struct tm_config *api_config(const struct api_call *c)
{
    return c->api->cfg;
}

int64_t api_now_ms(const struct api_call *c)
{
    return tm_clock_now_ms(c->api->clock);
}

unsigned api_max_list(const struct api_call *c)
{
    return c->api->limits.max_list;
}

struct tm_pg_pool *api_pool(const struct api_call *c)
{
    return c->api->pool;
}

const struct tm_api_stats *api_stats(const struct api_call *c)
{
    return &c->api->stats;
}

bool api_body(const struct api_call *c, const char **ret, size_t *ret_len)
{
    if (!c->req)
        return false;
    *ret = c->req->entity.base;
    *ret_len = c->req->entity.base ? c->req->entity.len : 0;
    return true;
}

bool api_query_string(const struct api_call *c, const char **ret, size_t *ret_len)
{
    const h2o_req_t *req = c->req;

    if (!req)
        return false;
    if (req->query_at == SIZE_MAX || req->query_at >= req->path.len) {
        *ret = "";
        *ret_len = 0;
    } else {
        *ret = req->path.base + req->query_at + 1;
        *ret_len = req->path.len - req->query_at - 1;
    }
    return true;
}

/* ---- rate limit --------------------------------------------------------- */

/* A token bucket per token, keyed by 64 bits of its hash, in a fixed table:
 * a full probe window forgets its least recently used entry, which can only
 * make a limit more generous, never block a good client. */
static bool rate_take(struct tm_api *api, const char *hash)
{
    uint64_t now = uv_now(api->loop), h = 1469598103934665603ull;
    struct rate_slot *slot = NULL, *oldest = NULL;
    unsigned start;

    for (int i = 0; i < 16; i++)
        h = (h ^ (unsigned char)hash[i]) * 1099511628211ull;
    start = (unsigned)(h % RATE_SLOTS);
    for (unsigned i = 0; i < RATE_PROBE; i++) {
        struct rate_slot *s = &api->rate[(start + i) % RATE_SLOTS];
        if (strncmp(s->key, hash, 16) == 0) {
            slot = s;
            break;
        }
        if (!oldest || s->last_ms < oldest->last_ms || s->key[0] == '\0')
            oldest = s;
    }
    if (!slot) {
        slot = oldest;
        memcpy(slot->key, hash, 16);
        slot->key[16] = '\0';
        slot->tokens = api->limits.burst;
        slot->last_ms = now;
    }
    slot->tokens += (double)(now - slot->last_ms) * api->limits.rate_per_s / 1000.0;
    if (slot->tokens > api->limits.burst)
        slot->tokens = api->limits.burst;
    slot->last_ms = now;
    if (slot->tokens < 1.0)
        return false;
    slot->tokens -= 1.0;
    return true;
}

/* ---- authentication ----------------------------------------------------- */

/*
 * The authentication cache.  A route with a fast path (POST /v1/jobs) skips
 * the separate lookup for a token authenticated within AUTH_TTL_MS: its
 * role, team and name come from here for the checks made before the
 * statement (role, rate, an engineer's team), and the route's one statement
 * checks the token again (hash known, not revoked, same role and team), so
 * a revoked token is still refused by the next request, as before; the
 * cache is never the proof.  Direct-mapped by the hash; a collision just
 * evicts.  The hashes are SHA-256 of the tokens, as in api_tokens.
 */
static unsigned auth_index(const char *hash)
{
    uint64_t h = 1469598103934665603ull;

    for (int i = 0; i < 16; i++)
        h = (h ^ (unsigned char)hash[i]) * 1099511628211ull;
    return (unsigned)(h % AUTH_SLOTS);
}

static bool auth_cache_get(struct tm_api *api, struct api_call *c)
{
    struct auth_slot *s = &api->auth[auth_index(c->hash)];

    if (s->hash[0] == '\0' || uv_now(api->loop) >= s->until_ms ||
        !tm_token_hash_equal(s->hash, c->hash))
        return false;
    c->role = s->role;
    memcpy(c->team, s->team, sizeof(c->team));
    memcpy(c->token_name, s->token_name, sizeof(c->token_name));
    return true;
}

static void auth_cache_put(struct tm_api *api, const struct api_call *c)
{
    struct auth_slot *s = &api->auth[auth_index(c->hash)];

    memcpy(s->hash, c->hash, sizeof(s->hash));
    s->role = c->role;
    memcpy(s->team, c->team, sizeof(s->team));
    memcpy(s->token_name, c->token_name, sizeof(s->token_name));
    s->until_ms = uv_now(api->loop) + AUTH_TTL_MS;
}

void api_auth_forget(struct api_call *c)
{
    struct auth_slot *s = &c->api->auth[auth_index(c->hash)];

    if (s->hash[0] != '\0' && tm_token_hash_equal(s->hash, c->hash))
        OPENSSL_cleanse(s, sizeof(*s));
}

bool api_rate_take(struct api_call *c)
{
    return rate_take(c->api, c->hash);
}

void *api_route_state(const struct api_call *c)
{
    return c->api->route_state;
}

static const char auth_sql[] =
    "SELECT name, role, coalesce(team, ''), hash FROM api_tokens WHERE hash = $1 AND NOT revoked";

static void on_auth(const struct tm_pg_reply *reply, void *data)
{
    struct api_call *c = data;
    PGresult *res;
    int role;

    if (!api_reply_ok(c, reply))
        return;
    res = reply->results[0];
    if (PQntuples(res) != 1 || !tm_token_hash_equal(PQgetvalue(res, 0, 3), c->hash)) {
        api_auth_forget(c);
        api_fail(c, 401, "Authorization", "unknown or revoked token");
        return;
    }
    role = tm_role_parse(PQgetvalue(res, 0, 1));
    if (role < 0) {
        api_auth_forget(c);
        api_fail(c, 401, "Authorization", "unknown or revoked token");
        return;
    }
    c->role = (enum tm_role)role;
    snprintf(c->token_name, sizeof(c->token_name), "%s", PQgetvalue(res, 0, 0));
    snprintf(c->team, sizeof(c->team), "%s", PQgetvalue(res, 0, 2));
    auth_cache_put(c->api, c);
    if (!(c->route->roles & (1u << c->role))) {
        char msg[128];
        snprintf(msg, sizeof(msg), "the %s role may not %s %s", tm_role_name(c->role),
                 c->route->method, c->route->pattern);
        api_fail(c, 403, NULL, msg);
        return;
    }
    if (!rate_take(c->api, c->hash)) {
        api_fail(c, 429, "Authorization", "rate limit exceeded for this token");
        return;
    }
    c->route->fn(c);
}

/* "Bearer <token>": the token, or NULL. */
static const char *bearer(const h2o_req_t *req, size_t *ret_len)
{
    ssize_t i = h2o_find_header(&req->headers, H2O_TOKEN_AUTHORIZATION, -1);
    const char *v;
    size_t n;

    if (i < 0)
        return NULL;
    v = req->headers.entries[i].value.base;
    n = req->headers.entries[i].value.len;
    if (n < 8 || strncasecmp(v, "Bearer ", 7) != 0)
        return NULL;
    v += 7;
    n -= 7;
    while (n && *v == ' ') {
        v++;
        n--;
    }
    while (n && v[n - 1] == ' ')
        n--;
    if (n == 0 || n > 256)
        return NULL;
    *ret_len = n;
    return v;
}

/* ---- routing ------------------------------------------------------------ */

/* Whether a request's Content-Type is JSON (spec/request.c's rule). */
static bool content_type_json(const h2o_req_t *req)
{
    ssize_t i = h2o_find_header(&req->headers, H2O_TOKEN_CONTENT_TYPE, -1);

    return i >= 0 && tm_request_json_type(req->headers.entries[i].value.base,
                                          req->headers.entries[i].value.len);
}

/* ---- one answer for a body too large, whatever its size ------------------- */

/* h2o answers a body larger than max_request_entity_size itself, with 413
 * in text/plain, before any handler sees the request (it must: reading
 * such a body to answer it would be the attack).  Its answer still passes
 * through the path's filters, so this one rewrites it into the API's own
 * answer for a large body: 400, field "body", JSON.  The connection is
 * closed all the same, as h2o decided. */
struct too_large_filter {
    h2o_filter_t super;
    struct tm_api *api;
};

struct too_large_ostream {
    h2o_ostream_t super;
    bool sent;
    size_t len;
    char body[160];
};

static void too_large_send(h2o_ostream_t *self, h2o_req_t *req, h2o_iovec_t *in, size_t nin,
                           h2o_send_state_t state)
{
    struct too_large_ostream *o = (struct too_large_ostream *)self;
    h2o_iovec_t buf = h2o_iovec_init(o->body, o->len);

    (void)in;
    (void)nin;
    h2o_ostream_send_next(&o->super, req, &buf, o->sent ? 0 : 1, state);
    o->sent = true;
}

static void too_large_setup(h2o_filter_t *self, h2o_req_t *req, h2o_ostream_t **slot)
{
    struct too_large_filter *f = (struct too_large_filter *)self;
    struct too_large_ostream *o;
    int n;

    if (req->res.status != 413) {
        h2o_setup_next_ostream(req, slot);
        return;
    }
    o = (struct too_large_ostream *)h2o_add_ostream(req, sizeof(*o), slot);
    n = snprintf(o->body, sizeof(o->body),
                 "{\"error\":\"request body larger than %zu bytes\",\"field\":\"body\"}",
                 f->api->limits.max_body_bytes);
    o->len = n > 0 && (size_t)n < sizeof(o->body) ? (size_t)n : 0;
    o->sent = false;
    o->super.do_send = too_large_send;
    req->res.status = 400;
    req->res.reason = "Bad Request";
    req->res.content_length = o->len;
    h2o_set_header(&req->pool, &req->res.headers, H2O_TOKEN_CONTENT_TYPE, H2O_STRLIT("application/json"),
                   1);
    count_status(f->api, 400);
    f->api->stats.requests++;
    slot = &o->super.next;
    h2o_setup_next_ostream(req, slot);
}

static void add_too_large_filter(h2o_pathconf_t *path, struct tm_api *api)
{
    struct too_large_filter *f = (struct too_large_filter *)h2o_create_filter(path, sizeof(*f));
    f->super.on_setup_ostream = too_large_setup;
    f->api = api;
}

static bool sha256(const char *s, size_t n, unsigned char out[32])
{
    unsigned int len = 0;
    return EVP_Digest(s, n, out, &len, EVP_sha256(), NULL) == 1 && len == 32;
}

/* The scrape token, when api.metrics_token_file set one. */
static bool metrics_authorized(const struct tm_api *api, const h2o_req_t *req)
{
    unsigned char d[32];
    size_t n = 0;
    const char *tok = bearer(req, &n);
    bool ok;

    if (!api->metrics_token)
        return true;
    if (!tok || !sha256(tok, n, d))
        return false;
    ok = CRYPTO_memcmp(d, api->metrics_digest, sizeof(d)) == 0;
    OPENSSL_cleanse(d, sizeof(d));
    return ok;
}

/* "GET, HEAD, POST": each method once, HEAD with GET. */
static void allow_add(char *allow, size_t size, const char *method)
{
    const char *add[2] = {method, strcmp(method, "GET") == 0 ? "HEAD" : NULL};

    for (int i = 0; i < 2 && add[i]; i++) {
        size_t n = strlen(allow), m = strlen(add[i]);
        bool have = false;
        for (const char *p = allow; (p = strstr(p, add[i])) != NULL; p += m)
            if ((p == allow || p[-1] == ' ') && (p[m] == ',' || p[m] == '\0'))
                have = true;
        if (!have && n + m + 3 < size)
            snprintf(allow + n, size - n, "%s%s", n ? ", " : "", add[i]);
    }
}

static int on_req(h2o_handler_t *self, h2o_req_t *req)
{
    struct tm_api *api = ((struct api_handler *)self)->api;
    const struct api_route *route = NULL;
    bool path_known = false;
    int64_t id = 0;
    char name[64] = "";
    const char *tok;
    size_t toklen = 0;
    struct api_call *c;
    char hash[TM_TOKEN_HASH_LEN + 1];
    char allow[64] = "";
    const char *bad_param = NULL;

    api->stats.requests++;
    if (api->step != CLOSE_NONE) {
        send_error(api, req, 503, NULL, "shutting down");
        return 0;
    }
    for (const struct api_route *r = api->routes->table; r->method; r++) {
        int64_t rid = 0;
        char rname[64] = "";
        const char *param = NULL;
        int m = tm_request_path_match(r->pattern, req->path_normalized.base, req->path_normalized.len, &rid,
                           rname, sizeof(rname), &param);
        if (m < 0 && !bad_param)
            bad_param = param;
        if (m <= 0)
            continue;
        path_known = true;
        allow_add(allow, sizeof(allow), r->method);
        if (h2o_memis(req->method.base, req->method.len, r->method, strlen(r->method)) ||
            (strcmp(r->method, "GET") == 0 && h2o_memis(req->method.base, req->method.len,
                                                        H2O_STRLIT("HEAD")))) {
            route = r;
            id = rid;
            memcpy(name, rname, sizeof(name));
            break;
        }
    }
    if (!route) {
        if (path_known) {
            /* RFC 9110: a 405 lists the methods the path takes. */
            h2o_add_header(&req->pool, &req->res.headers, H2O_TOKEN_ALLOW, NULL,
                           h2o_strdup(&req->pool, allow, SIZE_MAX).base, strlen(allow));
            send_error(api, req, 405, NULL, "method not allowed on this path");
        } else if (bad_param) {
            send_error(api, req, 400, bad_param,
                       strcmp(bad_param, "id") == 0
                           ? "must be a positive whole number"
                           : "must be 1-63 letters, digits, '.', '_' or '-'");
        } else {
            send_error(api, req, 404, NULL, "no such endpoint");
        }
        return 0;
    }
    if (req->entity.base && req->entity.len > api->limits.max_body_bytes) {
        char msg[96];
        snprintf(msg, sizeof(msg), "request body larger than %zu bytes", api->limits.max_body_bytes);
        send_error(api, req, 400, "body", msg);
        return 0;
    }
    /* A body is JSON and says so: text/plain or a form is not read as
     * JSON by accident (a request without a body needs no type). */
    if (req->entity.base && req->entity.len > 0 && !content_type_json(req)) {
        send_error(api, req, 415, "Content-Type", "a request body must be application/json");
        return 0;
    }
    if (route->roles & API_PUBLIC) {
        if ((route->roles & API_SCRAPE) && !metrics_authorized(api, req)) {
            send_error(api, req, 401, "Authorization",
                       "this endpoint needs the bearer token of api.metrics_token_file");
            return 0;
        }
        c = call_new(api, req, route);
        if (!c) {
            send_error(api, req, 500, NULL, "out of memory");
            return 0;
        }
        c->id = id;
        route->fn(c);
        return 0;
    }
    tok = bearer(req, &toklen);
    if (!tok) {
        send_error(api, req, 401, "Authorization", "a bearer token is required");
        return 0;
    }
    if (tm_token_hash(tok, toklen, hash) < 0) {
        send_error(api, req, 500, NULL, "could not hash the token");
        return 0;
    }
    c = call_new(api, req, route);
    if (!c) {
        send_error(api, req, 500, NULL, "out of memory");
        return 0;
    }
    c->id = id;
    memcpy(c->name, name, sizeof(c->name));
    memcpy(c->hash, hash, sizeof(c->hash));
    OPENSSL_cleanse(hash, sizeof(hash));
    if (route->fast && auth_cache_get(api, c) && (route->roles & (1u << c->role))) {
        route->fast(c);
        return 0;
    }
    api_authenticate(c);
    return 0;
}

void api_authenticate(struct api_call *c)
{
    const char *params[] = {c->hash};

    api_query(c, auth_sql, 1, params, on_auth);
}

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
    handler->super.on_req = on_req;
    handler->api = api;
    /* Both: h2o binds a request refused while its body is read to the
     * host's fallback path, not to ours. */
    add_too_large_filter(path, api);
    add_too_large_filter(&host->fallback_path, api);
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
}

int tm_api_start(uv_loop_t *loop, struct tm_pg_pool *pool, const struct tm_api_routes *routes,
                 const struct tm_config *cfg, struct tm_api **ret_api)
{
    struct tm_api_limits limits;
    SSL_CTX *ssl_ctx = NULL;
    unsigned char metrics_digest[32];
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
        if (!usable || !sha256(text, n, metrics_digest)) {
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
        memcpy((*ret_api)->metrics_digest, metrics_digest, sizeof(metrics_digest));
    }
    OPENSSL_cleanse(metrics_digest, sizeof(metrics_digest));
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

const struct tm_fleet_stats *api_fleet_stats(const struct api_call *c)
{
    return c->api->fleet;
}

uint64_t api_pool_connected(const struct api_call *c)
{
    return tm_pg_pool_connected(c->api->pool);
}

bool api_closing(const struct api_call *c)
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
