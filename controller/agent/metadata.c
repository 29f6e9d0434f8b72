/*
 * controller/agent/metadata.c: the watch itself, whatever the service: the
 * table of services (TM_MD_CLOUDS) and a timer that asks the service's
 * file to poll.  See metadata.h.  The requests in flight, the notices
 * already reported and the log-once state the services' files use are
 * metadata_poll.c's, so calls run one way: this file to the services'
 * files, both to metadata_poll.c.
 *
 * Lifetime: tm_md_watch_stop() detaches the requests in flight (md_detach)
 * and closes the timer; the watch itself goes in the timer's close
 * callback, as libuv wants of handle memory.
 */
#include "controller/agent/metadata_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/err.h"
#include "core/log.h"

#define TM_MD_ROW(kind) &tm_md_##kind,
static const struct md_service *const services[] = {TM_MD_CLOUDS(TM_MD_ROW)};
#undef TM_MD_ROW
#define NSERVICES (sizeof(services) / sizeof(services[0]))

const struct md_service *md_service_find(const char *kind)
{
    for (size_t i = 0; kind && i < NSERVICES; i++)
        if (strcmp(services[i]->kind, kind) == 0)
            return services[i];
    return NULL;
}

bool tm_md_kind_known(const char *kind)
{
    return md_service_find(kind) != NULL;
}

void tm_md_kind_names(char *buf, size_t size)
{
    size_t len = 0;

    if (size)
        buf[0] = '\0';
    for (size_t i = 0; i < NSERVICES; i++) {
        int w = snprintf(buf + len, size > len ? size - len : 0, "%s%s", i ? "|" : "",
                         services[i]->kind);
        if (w > 0)
            len += (size_t)w;
    }
}

static void on_timer(uv_timer_t *t)
{
    struct tm_md_watch *w = (struct tm_md_watch *)t;

    w->svc->poll(w);
    if (!w->stopped) /* the callback may have stopped the watch */
        uv_timer_start(&w->timer, on_timer, w->period_ms, 0);
}

int tm_md_watch_start(uv_loop_t *loop, struct tm_http *http, const char *kind,
                      const char *base_url, tm_md_notice_cb cb, void *data,
                      struct tm_md_watch **ret)
{
    const struct md_service *svc = md_service_find(kind);
    struct tm_md_watch *w;
    const char *base;
    size_t n;
    int r;

    if (!loop || !cb || !ret || !svc) {
        char names[128];

        tm_md_kind_names(names, sizeof(names));
        tm_log_error("cannot watch the metadata service", "kind=\"%s\" error=\"kind must be one of %s\"",
                     kind ? kind : "", names);
        return TM_EINVAL;
    }
    if (!http && !svc->no_http)
        return TM_EINVAL;
    base = base_url && *base_url ? base_url : svc->default_base;
    if (!base) {
        tm_log_error("cannot watch the metadata service", "kind=%s error=\"%s\"", svc->kind,
                     "metadata URL required");
        return TM_EINVAL;
    }
    n = strlen(base);
    while (n > 1 && base[n - 1] == '/')
        n--;
    if (n >= MD_BASE_MAX) {
        tm_log_error("cannot watch the metadata service", "kind=%s error=\"%s\"", svc->kind,
                     "metadata URL too long");
        return TM_EINVAL;
    }
    w = calloc(1, sizeof(*w));
    if (!w)
        return TM_ENOMEM;
    memcpy(w->base, base, n);
    w->loop = loop;
    w->http = http;
    w->svc = svc;
    w->cb = cb;
    w->data = data;
    w->period_ms = MD_DEFAULT_PERIOD_MS;
    r = uv_timer_init(loop, &w->timer);
    if (r < 0) {
        free(w);
        return r;
    }
    /* The first poll from the loop, never inside this call. */
    uv_timer_start(&w->timer, on_timer, 0, 0);
    tm_log_info("watching the metadata service for interruption notices", "kind=%s",
                svc->kind);
    *ret = w;
    return 0;
}

void tm_md_watch_set_period(struct tm_md_watch *w, uint64_t period_ms)
{
    if (w)
        w->period_ms = period_ms < 100 ? 100 : period_ms;
}

int tm_md_watch_ack(struct tm_md_watch *w, const char *event_id)
{
    const struct tm_md_notice *n;

    if (!w || !event_id)
        return TM_EINVAL;
    n = md_seen(w, event_id);
    if (!n)
        return TM_ENOTFOUND;
    return w->svc->ack ? w->svc->ack(w, n) : 0;
}

static void on_closed(uv_handle_t *h)
{
    free(h); /* the timer is the watch's first member */
}

void tm_md_watch_stop(struct tm_md_watch *w)
{
    if (!w || w->stopped)
        return;
    w->stopped = true;
    md_detach(w);
    uv_close((uv_handle_t *)&w->timer, on_closed);
}
