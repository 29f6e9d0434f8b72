/*
 * controller/io/http_uv.h: libcurl's multi interface on the libuv loop.
 *
 * One struct tm_http per loop owns a CURLM handle.  Sockets curl asks for
 * are watched with one uv_poll_t each (curl_multi_assign keeps the pointer),
 * curl's timeout drives one uv_timer_t, and finished transfers are drained
 * with curl_multi_info_read after every action.  No call blocks.
 *
 * A request is a method, URL, headers and body; the answer (status, headers
 * we keep, body up to max_body bytes) comes to the callback exactly once,
 * on the loop, never from inside tm_http_request().  Transport failures come
 * as negative codes: -ETIMEDOUT, -ECONNREFUSED, -ECONNRESET, TM_EUNAVAIL for
 * other curl errors, TM_EBADREPLY when the body passes max_body, and
 * TM_ECANCELED when tm_http_close() runs first.  HTTP error statuses are not
 * errors here: status 0 with http_status 503 is a normal answer.
 */
#ifndef TM_HTTP_UV_H
#define TM_HTTP_UV_H

#include <stddef.h>
#include <stdint.h>

#include <uv.h>

struct tm_http;

struct tm_http_request {
    const char *method;              /* "GET", "POST", ... */
    const char *url;
    const char *const *headers;      /* "Name: value" strings, NULL-terminated; may be NULL */
    const char *body;                /* may be NULL */
    size_t body_len;
    long timeout_ms;                 /* whole transfer; 0 means 30 s */
    size_t max_body;                 /* 0 means 8 MiB */
    const char *ca_file;             /* extra CA bundle for loopback TLS fakes; may be NULL */
};

struct tm_http_response {
    int status;               /* 0 or a negative code (see above) */
    long http_status;         /* e.g. 200; 0 when no answer came */
    const char *body;         /* NUL-terminated, valid only during the callback */
    size_t body_len;
    const char *error;        /* curl's message on failure, else NULL */
    const char *retry_after;  /* Retry-After header if any, else NULL */
    const char *request_id;   /* x-amzn-RequestId / x-request-id if any */
    const char *async_operation; /* Azure-AsyncOperation header if any */
    const char *location;     /* Location header if any */
};

typedef void (*tm_http_cb)(const struct tm_http_response *resp, void *data);

int tm_http_create(uv_loop_t *loop, struct tm_http **ret_http);
/* Start a request; everything in req is copied, so it may be freed at once. */
int tm_http_request(struct tm_http *http, const struct tm_http_request *req, tm_http_cb cb,
                    void *data);
/* Requests in flight now. */
unsigned tm_http_inflight(const struct tm_http *http);
/* Abandon transfers in flight (TM_ECANCELED), close every handle; done
 * (may be NULL) fires when all are closed, and http is freed then. */
void tm_http_close(struct tm_http *http, void (*done)(void *data), void *data);

/* Initialise libcurl for the process (curl_global_init) exactly once; safe
 * to call again and from several threads.  tm_http_create() calls it, so
 * call it first only to learn of a failure early.  Returns 0 or TM_EUNAVAIL. */
int tm_http_global_init(void);

#endif
