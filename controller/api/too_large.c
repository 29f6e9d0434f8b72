/*
 * controller/api/too_large.c: one answer for a body too large, whatever its size.
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
#include "controller/spec/token.h"
#include "core/err.h"
#include "core/log.h"

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
    tm_api_count_status(f->api, 400);
    f->api->stats.requests++;
    slot = &o->super.next;
    h2o_setup_next_ostream(req, slot);
}

void tm_api_add_too_large_filter(h2o_pathconf_t *path, struct tm_api *api)
{
    struct too_large_filter *f = (struct too_large_filter *)h2o_create_filter(path, sizeof(*f));
    f->super.on_setup_ostream = too_large_setup;
    f->api = api;
}
