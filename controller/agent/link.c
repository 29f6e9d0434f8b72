/*
 * controller/agent/link.c: the agent's requests to the controller: the URL
 * of a path, a POST of a JSON body (with the node's token, or without for
 * enrollment), the backoff after a failure, and whether a URL stays on
 * this host.  Every file that talks to the controller calls here.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "controller/agent/internal.h"
#include "core/err.h"
#include "core/log.h"

#include "controller/agent/agent.h"

bool tm_agent_url_is_loopback(const char *url)
{
    const char *h = strstr(url, "://");
    char host[256];
    size_t n;

    if (!h)
        return false;
    h += 3;
    if (*h == '[') {
        h++;
        n = strcspn(h, "]");
    } else {
        n = strcspn(h, ":/");
    }
    if (n == 0 || n >= sizeof(host))
        return false;
    memcpy(host, h, n);
    host[n] = '\0';
    return strcmp(host, "localhost") == 0 || strncmp(host, "127.", 4) == 0 || strcmp(host, "::1") == 0;
}

int tm_agent_post_as(struct tm_agent *ag, const char *url, const char *body, bool auth, tm_http_cb cb,
                     void *data)
{
    const char *headers[3] = {"Content-Type: application/json", auth ? ag->auth : NULL, NULL};
    struct tm_http_request req = {
        .method = "POST",
        .url = url,
        .headers = headers,
        .body = body,
        .body_len = strlen(body),
        .timeout_ms = 15000,
        .max_body = 16 << 20,
        .ca_file = ag->o.ca_file,
    };

    return tm_http_request(ag->http, &req, cb, data);
}

void tm_agent_url(const struct tm_agent *ag, char *out, size_t outlen, const char *fmt, ...)
{
    va_list ap;
    size_t n = (size_t)snprintf(out, outlen, "%s", ag->o.controller_url);

    while (n > 0 && out[n - 1] == '/')
        out[--n] = '\0';
    va_start(ap, fmt);
    vsnprintf(out + n, outlen - n, fmt, ap);
    va_end(ap);
}

int tm_agent_post(struct tm_agent *ag, const char *url, const char *body, tm_http_cb cb, void *data)
{
    return tm_agent_post_as(ag, url, body, true, cb, data);
}

int64_t tm_agent_next_backoff(const struct tm_agent *ag, int64_t cur)
{
    int64_t cap = ag->o.retry_max_ms > 0 ? ag->o.retry_max_ms : 60000;

    return cur <= 0 ? 1000 : (cur * 2 > cap ? cap : cur * 2);
}
