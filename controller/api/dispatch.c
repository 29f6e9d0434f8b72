/*
 * controller/api/dispatch.c: routing: a request's path and method to its route in
 * the table the daemon gave (the server names no route), then the checks
 * made before any statement (body size and type, the scrape token, the
 * bearer token, the cached authentication of a fast path).
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <openssl/crypto.h>

#include "controller/api/internal.h"
#include "controller/api/server_core.h"
#include "controller/spec/request.h"
#include "controller/spec/token.h"
#include "core/err.h"
#include "core/log.h"

/* ---- routing ------------------------------------------------------------ */

/* Whether a request's Content-Type is JSON (spec/request.c's rule). */
static bool content_type_json(const h2o_req_t *req)
{
    ssize_t i = h2o_find_header(&req->headers, H2O_TOKEN_CONTENT_TYPE, -1);

    return i >= 0 && tm_request_json_type(req->headers.entries[i].value.base,
                                          req->headers.entries[i].value.len);
}

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

int tm_api_on_req(h2o_handler_t *self, h2o_req_t *req)
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
        tm_api_send_error(api, req, 503, NULL, "shutting down");
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
            tm_api_send_error(api, req, 405, NULL, "method not allowed on this path");
        } else if (bad_param) {
            tm_api_send_error(api, req, 400, bad_param,
                       strcmp(bad_param, "id") == 0
                           ? "must be a positive whole number"
                           : "must be 1-63 letters, digits, '.', '_' or '-'");
        } else {
            tm_api_send_error(api, req, 404, NULL, "no such endpoint");
        }
        return 0;
    }
    if (req->entity.base && req->entity.len > api->limits.max_body_bytes) {
        char msg[96];
        snprintf(msg, sizeof(msg), "request body larger than %zu bytes", api->limits.max_body_bytes);
        tm_api_send_error(api, req, 400, "body", msg);
        return 0;
    }
    /* A body is JSON and says so: text/plain or a form is not read as
     * JSON by accident (a request without a body needs no type). */
    if (req->entity.base && req->entity.len > 0 && !content_type_json(req)) {
        tm_api_send_error(api, req, 415, "Content-Type", "a request body must be application/json");
        return 0;
    }
    if (route->roles & API_PUBLIC) {
        if ((route->roles & API_SCRAPE) && !tm_api_metrics_authorized(api, req)) {
            tm_api_send_error(api, req, 401, "Authorization",
                       "this endpoint needs the bearer token of api.metrics_token_file");
            return 0;
        }
        c = tm_api_call_new(api, req, route);
        if (!c) {
            tm_api_send_error(api, req, 500, NULL, "out of memory");
            return 0;
        }
        c->id = id;
        route->fn(c);
        return 0;
    }
    tok = tm_api_bearer(req, &toklen);
    if (!tok) {
        tm_api_send_error(api, req, 401, "Authorization", "a bearer token is required");
        return 0;
    }
    if (tm_token_hash(tok, toklen, hash) < 0) {
        tm_api_send_error(api, req, 500, NULL, "could not hash the token");
        return 0;
    }
    c = tm_api_call_new(api, req, route);
    if (!c) {
        tm_api_send_error(api, req, 500, NULL, "out of memory");
        return 0;
    }
    c->id = id;
    memcpy(c->name, name, sizeof(c->name));
    memcpy(c->hash, hash, sizeof(c->hash));
    OPENSSL_cleanse(hash, sizeof(hash));
    if (route->fast && tm_api_auth_cache_get(api, c) && (route->roles & (1u << c->role))) {
        route->fast(c);
        return 0;
    }
    tm_api_authenticate(c);
    return 0;
}
