/*
 * controller/api/call.c: the calls of the server core (server_core.h): a
 * request answered later (struct api_call, its lifetime tied to h2o's
 * request as server.c says), its answers and errors, its statements, and
 * what a route reads from it (internal.h).  The server's lifecycle is
 * server.c's: a call freed while the server drains tells it through
 * api->on_call_freed, so that no file here calls back into server.c.
 */
#include "controller/api/internal.h"
#include "controller/api/server_core.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/crypto.h>

#include "core/err.h"
#include "core/log.h"

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

void tm_api_count_status(struct tm_api *api, int status)
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
    tm_api_count_status(api, status);
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
    if (status == 503) /* the database away, or shutting down: docs/ha.md */
        h2o_add_header(&req->pool, &req->res.headers, H2O_TOKEN_RETRY_AFTER, NULL, H2O_STRLIT("2"));
    h2o_send_inline(req, body, len); /* copies the body into the request's pool */
}

static void send_json(struct tm_api *api, h2o_req_t *req, int status, const char *body, size_t len)
{
    send_raw(api, req, status, "application/json", body, len);
}

void tm_api_send_error(struct tm_api *api, h2o_req_t *req, int status, const char *field,
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

struct api_call *tm_api_call_new(struct tm_api *api, h2o_req_t *req, const struct api_route *route)
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
    c->deadline = uv_now(api->loop) + (api->limits.request_timeout_ms ? api->limits.request_timeout_ms : 5000);
    api->ncalls++;
    return c;
}

void tm_api_call_free(struct api_call *c)
{
    struct tm_api *api = c->api;

    /* Still linked to a live request: cut the link first. */
    if (c->req && c->ref)
        c->ref->call = NULL;
    OPENSSL_cleanse(c->hash, sizeof(c->hash));
    OPENSSL_cleanse(c->secret, sizeof(c->secret));
    free(c);
    api->ncalls--;
    if (api->on_call_freed)
        api->on_call_freed(api);
}

void tm_api_reply(struct api_call *c, int status, const char *json, size_t len)
{
    if (c->req)
        send_json(c->api, c->req, status, json, len);
    tm_api_call_free(c);
}

void tm_api_reply_text(struct api_call *c, int status, const char *ctype, const char *text,
                       size_t len)
{
    if (c->req)
        send_raw(c->api, c->req, status, ctype, text, len);
    tm_api_call_free(c);
}

void tm_api_fail(struct api_call *c, int status, const char *field, const char *message)
{
    if (c->req)
        tm_api_send_error(c->api, c->req, status, field, message);
    tm_api_call_free(c);
}

void tm_api_fail_spec(struct api_call *c, const struct tm_spec_error *err)
{
    if (err->nomem) {
        tm_api_fail(c, 503, NULL, "out of memory; try again");
        return;
    }
    tm_api_fail(c, 400, err->field[0] ? err->field : NULL, err->message);
}

bool tm_api_reply_ok(struct api_call *c, const struct tm_pg_reply *reply)
{
    if (!c->req) {
        tm_api_call_free(c); /* the client went away: nobody to answer */
        return false;
    }
    if (reply->status < 0) {
        tm_api_fail_db(c, reply);
        return false;
    }
    return true;
}

void tm_api_fail_db(struct api_call *c, const struct tm_pg_reply *reply)
{
    int status = 500;
    const char *msg = "the database refused the request";

    if (reply->status == -ETIMEDOUT) {
        status = 503;
        msg = "the database did not answer within api.request_timeout; retry later";
    } else if (reply->status == -ECONNRESET || reply->status == TM_ECANCELED ||
               reply->status == TM_EUNAVAIL ||
               (reply->sqlstate && strcmp(reply->sqlstate, "25006") == 0)) {
        /* 25006: a standby answered (a failover under way). */
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
    tm_api_fail(c, status, NULL, msg);
}

int tm_api_query(struct api_call *c, const char *sql, int nparams, const char *const *params,
                 tm_pg_cb cb)
{
    uint64_t left = tm_api_time_left(c);
    int r;

    /* The pool knows the database is gone (every connection failed since
     * it was last up): waiting for api.request_timeout would only hold the
     * client longer for the same 503.  Not logged per request: the pool
     * logs its own connect failures. */
    if (tm_pg_pool_down(c->api->pool)) {
        tm_api_fail(c, 503, NULL, "database unavailable");
        return TM_EUNAVAIL;
    }
    r = left == 0 ? -ETIMEDOUT
                  : tm_pg_pool_query_until(c->api->pool, sql, nparams, params, left, cb, c);
    if (r == -ETIMEDOUT) {
        tm_log_warn("api request past its deadline", "route=\"%s\"", c->route->pattern);
        tm_api_fail(c, 503, NULL, "the database did not answer within api.request_timeout; retry later");
        return r;
    }
    if (r < 0) {
        tm_log_warn("api could not queue a statement", "route=\"%s\" error=\"%s\"",
                    c->route->pattern, tm_strerror(r));
        tm_api_fail(c, 503, NULL, "database unavailable");
    }
    return r;
}

uint64_t tm_api_time_left(const struct api_call *c)
{
    uint64_t now = uv_now(c->api->loop);

    return c->deadline > now ? c->deadline - now : 0;
}

const struct tm_config *tm_api_config(const struct api_call *c)
{
    return c->api->cfg;
}

uv_loop_t *tm_api_loop(const struct api_call *c)
{
    return c->api->loop;
}

void tm_api_hold(struct api_call *c, uint64_t ms)
{
    c->deadline = uv_now(c->api->loop) + ms;
}

void tm_api_reply_bytes(struct api_call *c, int status, const char *ctype, const char *body, size_t len,
                        const char *const *headers, size_t nheaders)
{
    h2o_req_t *req = c->req;

    if (req) {
        /* h2o keeps header pointers: names and values go into the
         * request's pool. */
        for (size_t i = 0; i + 1 < nheaders * 2; i += 2) {
            h2o_iovec_t name = h2o_strdup(&req->pool, headers[i], SIZE_MAX);
            h2o_iovec_t value = h2o_strdup(&req->pool, headers[i + 1], SIZE_MAX);
            h2o_add_header_by_str(&req->pool, &req->res.headers, name.base, name.len, 1, NULL,
                                  value.base, value.len);
        }
        send_raw(c->api, req, status, ctype, body, len);
    }
    tm_api_call_free(c);
}

int64_t tm_api_now_ms(const struct api_call *c)
{
    return tm_clock_now_ms(c->api->clock);
}

unsigned tm_api_max_list(const struct api_call *c)
{
    return c->api->limits.max_list;
}

struct tm_pg_pool *tm_api_pool(const struct api_call *c)
{
    return c->api->pool;
}

int tm_api_group_add(struct api_call *c, struct tm_gc **slot, const struct tm_gc_kind *kind,
                     const char *const *values, tm_gc_cb cb)
{
    if (!*slot) {
        if (!(*slot = tm_gc_new(c->api->loop, c->api->pool, kind)))
            return TM_ENOMEM;
        tm_gc_set_gate(*slot, c->api->gc_gate); /* held only when kind yields */
    }
    return tm_gc_add(*slot, values, c->deadline, cb, c);
}

const struct tm_api_stats *tm_api_get_stats(const struct api_call *c)
{
    return &c->api->stats;
}

bool tm_api_body(const struct api_call *c, const char **ret, size_t *ret_len)
{
    if (!c->req)
        return false;
    *ret = c->req->entity.base;
    *ret_len = c->req->entity.base ? c->req->entity.len : 0;
    return true;
}

bool tm_api_query_string(const struct api_call *c, const char **ret, size_t *ret_len)
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
