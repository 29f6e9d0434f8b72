/*
 * controller/agent/metadata_internal.h: what metadata.c (the watch: the
 * services' table, the timer) and metadata_poll.c (requests in flight,
 * notices already reported, log-once state) share with the one file per
 * service (metadata_KIND.c, one per cloud, listed once in TM_MD_CLOUDS
 * below).  Nothing outside those files includes it.
 */
#ifndef TM_AGENT_METADATA_INTERNAL_H
#define TM_AGENT_METADATA_INTERNAL_H

#include <stdbool.h>
#include <stdint.h>

#include <uv.h>

#include "controller/agent/metadata.h"
#include "controller/io/http_uv.h"

#define MD_URL_MAX 512
#define MD_BASE_MAX 320        /* base URL; leaves room for the longest path */
#define MD_SEEN_MAX 64          /* notices remembered, oldest forgotten first */
#define MD_SLOTS 4              /* independent polls of one service */
#define MD_DEFAULT_PERIOD_MS 1000

struct md_req;

/* Where a cloud's metadata service tells the node its address
 * (metadata_address.c, address.h): GET base + path with header; with
 * token_path, first PUT base + token_path with token_ask and send the
 * token it answers as token_header followed by the token.  fixed: no
 * request, this address. */
struct md_address {
    const char *fixed;
    const char *path;
    const char *header;
    const char *token_path, *token_ask, *token_header;
};

/* One service: how to start a poll round and how to acknowledge. */
struct md_service {
    const char *kind;
    const char *default_base;   /* NULL: base_url is required */
    bool no_http;               /* it reads a file: no requests to send */
    struct md_address address;  /* all NULL: no address from it */
    /* Called by the timer every period: start whatever polls are idle. */
    void (*poll)(struct tm_md_watch *w);
    /* NULL: nothing to send (the ack is a no-op). */
    int (*ack)(struct tm_md_watch *w, const struct tm_md_notice *n);
};

typedef void (*md_answer_cb)(struct tm_md_watch *w, int slot, const struct tm_http_response *resp,
                             uint64_t started_ms);

struct tm_md_watch {
    uv_timer_t timer;           /* first member: the close callback frees the watch */
    uv_loop_t *loop;
    struct tm_http *http;
    const struct md_service *svc;
    char base[MD_BASE_MAX];     /* no trailing slash */
    tm_md_notice_cb cb;
    void *data;
    uint64_t period_ms;
    bool stopped;               /* tm_md_watch_stop() ran; the timer is closing */
    struct md_req *reqs;        /* requests in flight; detached at stop */
    bool busy[MD_SLOTS];        /* a request of this slot is in flight */
    bool bad_logged[MD_SLOTS];  /* a bad answer was logged; reset by a sound one */
    bool down_logged;           /* the service was unreachable; reset by any answer */
    struct tm_md_notice seen[MD_SEEN_MAX];
    unsigned nseen, seen_next;
    /* aws */
    char token[256];
    uint64_t token_ms;          /* uv_now() when it was issued */
    /* gcp */
    bool waited[MD_SLOTS];      /* a first plain read of this slot came back */
    bool active[MD_SLOTS];      /* the item announces an event now */
    unsigned gen[MD_SLOTS];     /* events of the item so far: part of event_id */
};

/* metadata_poll.c: */

/* Send one request for slot; the answer goes to on_answer on the loop
 * unless the watch stops first.  Marks the slot busy until then. */
int md_send(struct tm_md_watch *w, int slot, const char *method, const char *url,
            const char *const *headers, const char *body, long timeout_ms, md_answer_cb on_answer);

/* Report n unless its event_id was reported already. */
void md_notice(struct tm_md_watch *w, const struct tm_md_notice *n);

/* A notice reported earlier, by id, or NULL. */
const struct tm_md_notice *md_seen(const struct tm_md_watch *w, const char *event_id);

/* Log a malformed answer of slot once (what, the field), until md_sound(). */
void md_bad(struct tm_md_watch *w, int slot, const char *what, const char *field);
void md_sound(struct tm_md_watch *w, int slot);
/* Log a failed request once, until any answer comes. */
void md_down(struct tm_md_watch *w, const char *what, const struct tm_http_response *resp);
void md_up(struct tm_md_watch *w);

/* Let go of the requests in flight: their answers, when they come, are
 * dropped (tm_md_watch_stop). */
void md_detach(struct tm_md_watch *w);


/* The services, one per cloud, each defined as tm_md_KIND in
 * metadata_KIND.c (metadata.cmake builds every metadata_*.c): a new
 * cloud's reader is that file and its name here. */
#define TM_MD_CLOUDS(X) X(aws) X(gcp) X(azure) X(local)
#define TM_MD_DECLARE(kind) extern const struct md_service tm_md_##kind;
TM_MD_CLOUDS(TM_MD_DECLARE)
#undef TM_MD_DECLARE

/* The service of kind, or NULL. */
const struct md_service *md_service_find(const char *kind);

#endif
