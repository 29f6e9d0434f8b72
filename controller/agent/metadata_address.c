/*
 * controller/agent/metadata_address.c: the node's address from the cloud's metadata
 * service (address.h), asked where its reader's row says (struct md_address).
 */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "controller/agent/address.h"
#include "controller/agent/metadata_internal.h"
#include "controller/io/http_uv.h"
#include "core/address.h"
#include "core/err.h"
#include "core/log.h"

#define ADDR_BASE_MAX 320
#define ADDR_TIMEOUT_MS 5000

struct lookup {
    struct tm_http *http;
    const struct md_address *how;
    char kind[16];
    char base[ADDR_BASE_MAX];
    void (*done)(void *data, const char *address);
    void *data;
};

int tm_agent_address_parse(const char *body, size_t len, char *out, size_t outlen)
{
    char buf[64];

    if (!body)
        return TM_EBADREPLY;
    while (len && isspace((unsigned char)*body)) {
        body++;
        len--;
    }
    while (len && isspace((unsigned char)body[len - 1]))
        len--;
    if (len == 0 || len >= sizeof(buf) || len >= outlen || memchr(body, '\0', len))
        return TM_EBADREPLY;
    memcpy(buf, body, len);
    buf[len] = '\0';
    if (!tm_ip_address_ok(buf))
        return TM_EBADREPLY;
    memcpy(out, buf, len + 1);
    return 0;
}

static void finish(struct lookup *l, const char *address)
{
    if (!address)
        tm_log_warn("no address for this node from the metadata service; it enrolls without one "
                    "(jobs of several nodes wait; see --advertise-addr)",
                    "metadata=%s", l->kind);
    l->done(l->data, address);
    free(l);
}

static void on_address(const struct tm_http_response *resp, void *data)
{
    struct lookup *l = data;
    char addr[64];

    if (resp->status == 0 && resp->http_status == 200 &&
        tm_agent_address_parse(resp->body, resp->body_len, addr, sizeof(addr)) == 0) {
        finish(l, addr);
        return;
    }
    finish(l, NULL);
}

static int get(struct lookup *l, const char *url, const char *header)
{
    const char *headers[2] = {header, NULL};
    struct tm_http_request req = {
        .method = "GET", .url = url, .headers = headers, .timeout_ms = ADDR_TIMEOUT_MS, .max_body = 4096,
    };

    return tm_http_request(l->http, &req, on_address, l);
}

/* A session token came back: ask for the address with it. */
static void on_token(const struct tm_http_response *resp, void *data)
{
    struct lookup *l = data;
    char url[ADDR_BASE_MAX + 256], header[400];

    if (resp->status != 0 || resp->http_status != 200 || !resp->body || resp->body_len == 0 ||
        resp->body_len > 256 || strpbrk(resp->body, "\r\n")) {
        finish(l, NULL);
        return;
    }
    snprintf(url, sizeof(url), "%s%s", l->base, l->how->path);
    snprintf(header, sizeof(header), "%s%s", l->how->token_header, resp->body);
    if (get(l, url, header) < 0)
        finish(l, NULL);
}

const char *tm_agent_address_fixed(const char *kind)
{
    const struct md_service *svc = md_service_find(kind);

    return svc ? svc->address.fixed : NULL;
}

int tm_agent_address_lookup(struct tm_http *http, const char *kind, const char *base_url,
                            void (*done)(void *data, const char *address), void *data)
{
    const struct md_service *svc = md_service_find(kind);
    const struct md_address *how = svc ? &svc->address : NULL;
    char url[ADDR_BASE_MAX + 256];
    struct lookup *l;
    size_t n;
    int r;

    if (!how || !how->path)
        return TM_EINVAL;
    if (!base_url || !base_url[0])
        base_url = svc->default_base;
    if (!base_url || strlen(base_url) >= ADDR_BASE_MAX)
        return TM_EINVAL;
    l = calloc(1, sizeof(*l));
    if (!l)
        return TM_ENOMEM;
    l->http = http;
    l->how = how;
    l->done = done;
    l->data = data;
    snprintf(l->kind, sizeof(l->kind), "%s", kind);
    snprintf(l->base, sizeof(l->base), "%s", base_url);
    n = strlen(l->base);
    while (n && l->base[n - 1] == '/')
        l->base[--n] = '\0';
    if (how->token_path) {
        const char *headers[2] = {how->token_ask, NULL};
        struct tm_http_request req = {
            .method = "PUT", .url = url, .headers = headers, .body = "", .body_len = 0,
            .timeout_ms = ADDR_TIMEOUT_MS, .max_body = 4096,
        };
        snprintf(url, sizeof(url), "%s%s", l->base, how->token_path);
        r = tm_http_request(http, &req, on_token, l);
    } else {
        snprintf(url, sizeof(url), "%s%s", l->base, how->path);
        r = get(l, url, how->header);
    }
    if (r < 0)
        free(l);
    return r;
}
