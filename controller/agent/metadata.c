/*
 * controller/agent/metadata.c: the watch itself, whatever the service: a
 * timer that asks the service's file to poll, the requests in flight, the
 * notices already reported and the log-once state.  See metadata.h.
 *
 * Lifetime: each request carries a small struct md_req that points back at
 * the watch.  tm_md_watch_stop() detaches them (w = NULL) and closes the
 * timer; an answer that comes later finds no watch, frees its md_req and
 * is dropped.  The watch itself goes in the timer's close callback, as
 * libuv wants of handle memory.
 */
#include "controller/agent/metadata_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/err.h"
#include "core/log.h"

struct md_req {
    struct md_req *next, **pprev;
    struct tm_md_watch *w;       /* NULL once the watch stopped */
    int slot;
    uint64_t started_ms;
    md_answer_cb on_answer;
};

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

int64_t md_wall_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
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
    for (struct md_req *q = w->reqs; q; q = q->next)
        q->w = NULL;
    w->reqs = NULL;
    uv_close((uv_handle_t *)&w->timer, on_closed);
}

/* ---- requests ----------------------------------------------------------- */

static void on_http(const struct tm_http_response *resp, void *data)
{
    struct md_req *q = data;
    struct tm_md_watch *w = q->w;

    if (w) {
        *q->pprev = q->next;
        if (q->next)
            q->next->pprev = q->pprev;
        w->busy[q->slot] = false;
        if (resp->status != TM_ECANCELED)
            q->on_answer(w, q->slot, resp, q->started_ms);
    }
    free(q);
}

int md_send(struct tm_md_watch *w, int slot, const char *method, const char *url,
            const char *const *headers, const char *body, long timeout_ms, md_answer_cb on_answer)
{
    struct tm_http_request req = {
        .method = method, .url = url, .headers = headers, .body = body,
        .body_len = body ? strlen(body) : 0, .timeout_ms = timeout_ms,
        .max_body = 64 * 1024, /* a notice is a few hundred bytes */
    };
    struct md_req *q = calloc(1, sizeof(*q));
    int r;

    if (w->stopped) {
        free(q);
        return TM_ECANCELED;
    }
    if (!q)
        return TM_ENOMEM;
    q->w = w;
    q->slot = slot;
    q->on_answer = on_answer;
    q->started_ms = uv_now(w->loop);
    r = tm_http_request(w->http, &req, on_http, q);
    if (r < 0) {
        free(q);
        return r;
    }
    q->next = w->reqs;
    q->pprev = &w->reqs;
    if (w->reqs)
        w->reqs->pprev = &q->next;
    w->reqs = q;
    w->busy[slot] = true;
    return 0;
}

/* ---- notices and logging ------------------------------------------------ */

const struct tm_md_notice *md_seen(const struct tm_md_watch *w, const char *event_id)
{
    for (unsigned i = 0; i < w->nseen; i++)
        if (strcmp(w->seen[i].event_id, event_id) == 0)
            return &w->seen[i];
    return NULL;
}

void md_notice(struct tm_md_watch *w, const struct tm_md_notice *n)
{
    if (w->stopped || md_seen(w, n->event_id))
        return;
    w->seen[w->seen_next] = *n;
    w->seen_next = (w->seen_next + 1) % MD_SEEN_MAX;
    if (w->nseen < MD_SEEN_MAX)
        w->nseen++;
    tm_log_warn("interruption notice from the metadata service",
                "kind=%s action=%s deadline_ms=%lld event=\"%s\"", n->cloud, n->action,
                (long long)n->deadline_ms, n->event_id);
    w->cb(n, w->data);
}

void md_bad(struct tm_md_watch *w, int slot, const char *what, const char *field)
{
    if (w->bad_logged[slot])
        return;
    w->bad_logged[slot] = true;
    tm_log_warn("malformed answer from the metadata service, ignoring",
                "kind=%s item=%s field=%s", w->svc->kind, what, field ? field : "body");
}

void md_sound(struct tm_md_watch *w, int slot)
{
    w->bad_logged[slot] = false;
}

void md_down(struct tm_md_watch *w, const char *what, const struct tm_http_response *resp)
{
    if (w->down_logged)
        return;
    w->down_logged = true;
    if (resp->status < 0)
        tm_log_warn("could not reach the metadata service, will keep trying",
                    "kind=%s item=%s error=\"%s\"", w->svc->kind, what,
                    resp->error ? resp->error : tm_strerror(resp->status));
    else
        tm_log_warn("metadata service refused a request, will keep trying",
                    "kind=%s item=%s http_status=%ld", w->svc->kind, what, resp->http_status);
}

void md_up(struct tm_md_watch *w)
{
    w->down_logged = false;
}
