/*
 * controller/agent/metadata_address.c: the node's address from the cloud's metadata
 * service (address.h).
 */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "controller/agent/address.h"
#include "controller/io/http_uv.h"
#include "core/address.h"
#include "core/err.h"
#include "core/log.h"

#define ADDR_BASE_MAX 320
#define ADDR_TIMEOUT_MS 5000

struct lookup {
    struct tm_http *http;
    char kind[8];
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

static void on_aws_token(const struct tm_http_response *resp, void *data)
{
    struct lookup *l = data;
    char url[ADDR_BASE_MAX + 64], header[400];

    if (resp->status != 0 || resp->http_status != 200 || !resp->body || resp->body_len == 0 ||
        resp->body_len > 256 || strpbrk(resp->body, "\r\n")) {
        finish(l, NULL);
        return;
    }
    snprintf(url, sizeof(url), "%s/latest/meta-data/local-ipv4", l->base);
    snprintf(header, sizeof(header), "X-aws-ec2-metadata-token: %s", resp->body);
    if (get(l, url, header) < 0)
        finish(l, NULL);
}

int tm_agent_address_lookup(struct tm_http *http, const char *kind, const char *base_url,
                            void (*done)(void *data, const char *address), void *data)
{
    const char *def;
    char url[ADDR_BASE_MAX + 128];
    struct lookup *l;
    size_t n;
    int r;

    if (strcmp(kind, "aws") == 0 || strcmp(kind, "azure") == 0)
        def = "http://169.254.169.254";
    else if (strcmp(kind, "gcp") == 0)
        def = "http://metadata.google.internal";
    else
        return TM_EINVAL;
    if (!base_url || !base_url[0])
        base_url = def;
    if (strlen(base_url) >= ADDR_BASE_MAX)
        return TM_EINVAL;
    l = calloc(1, sizeof(*l));
    if (!l)
        return TM_ENOMEM;
    l->http = http;
    l->done = done;
    l->data = data;
    snprintf(l->kind, sizeof(l->kind), "%s", kind);
    snprintf(l->base, sizeof(l->base), "%s", base_url);
    n = strlen(l->base);
    while (n && l->base[n - 1] == '/')
        l->base[--n] = '\0';
    if (strcmp(kind, "aws") == 0) {
        const char *headers[2] = {"X-aws-ec2-metadata-token-ttl-seconds: 300", NULL};
        struct tm_http_request req = {
            .method = "PUT", .url = url, .headers = headers, .body = "", .body_len = 0,
            .timeout_ms = ADDR_TIMEOUT_MS, .max_body = 4096,
        };
        snprintf(url, sizeof(url), "%s/latest/api/token", l->base);
        r = tm_http_request(http, &req, on_aws_token, l);
    } else if (strcmp(kind, "gcp") == 0) {
        snprintf(url, sizeof(url), "%s/computeMetadata/v1/instance/network-interfaces/0/ip", l->base);
        r = get(l, url, "Metadata-Flavor: Google");
    } else {
        snprintf(url, sizeof(url),
                 "%s/metadata/instance/network/interface/0/ipv4/ipAddress/0/privateIpAddress"
                 "?api-version=2021-02-01&format=text",
                 l->base);
        r = get(l, url, "Metadata: true");
    }
    if (r < 0)
        free(l);
    return r;
}
