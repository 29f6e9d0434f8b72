/*
 * controller/agent/metadata_poll.c: what a watch's service files
 * (metadata_KIND.c) call while they poll: the requests in flight, the
 * notices already reported, the log-once state and the wall clock
 * (metadata_internal.h).  It calls nothing of theirs nor of metadata.c,
 * so the calls between these files run one way.
 *
 * Lifetime: each request carries a small struct md_req that points back at
 * the watch.  md_detach() (at tm_md_watch_stop) sets them to w = NULL; an
 * answer that comes later finds no watch, frees its md_req and is dropped.
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

void md_detach(struct tm_md_watch *w)
{
    for (struct md_req *q = w->reqs; q; q = q->next)
        q->w = NULL;
    w->reqs = NULL;
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
