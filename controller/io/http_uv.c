/*
 * controller/io/http_uv.c: libcurl's multi interface on the libuv loop.
 *
 * The shape is curl's docs/examples/multi-uv.c: curl tells us which sockets
 * to watch (socket callback) and when to call it back (timer callback); we
 * run curl_multi_socket_action() from the uv callbacks only, never from
 * inside a curl callback, and drain curl_multi_info_read() after each call.
 *
 * Errors known while tm_http_request() runs (bad arguments, no memory, a
 * closing client) are returned by it; every answer and every transport
 * failure reaches the callback later, from the loop.  Transfers abandoned
 * by tm_http_close() get TM_ECANCELED once every handle has closed, just
 * before done, so no callback runs inside tm_http_close() either.
 *
 * User callbacks may call tm_http_request() and tm_http_close(); after each
 * callback the drain loop checks whether the client is closing before it
 * touches the multi handle again.  struct tm_http lives until the close
 * callback of its last uv handle, which is what makes that check safe.
 */
#include "controller/io/http_uv.h"

#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <curl/curl.h>

#include "core/err.h"
#include "core/log.h"

#define HTTP_DEFAULT_TIMEOUT_MS 30000L
#define HTTP_CONNECT_TIMEOUT_MS 5000L
#define HTTP_DEFAULT_MAX_BODY (8u << 20)
#define HTTP_HEADER_VALUE_MAX 128
#define HTTP_URL_HEADER_MAX 2048

struct http_sock {
    uv_poll_t poll; /* first member: the close callback frees the whole */
    struct tm_http *http;
    curl_socket_t fd;
    bool closing;
    struct http_sock *prev;
    struct http_sock *next;
};

struct http_xfer {
    struct tm_http *http;
    CURL *easy;
    struct curl_slist *headers;
    char *req_body; /* our copy: curl reads it during the transfer */
    char *body;     /* the answer, NUL-terminated, at most max_body bytes */
    size_t body_len;
    size_t body_cap;
    size_t max_body;
    bool too_big;
    bool oom;
    char retry_after[HTTP_HEADER_VALUE_MAX];
    char request_id[HTTP_HEADER_VALUE_MAX];
    /* Azure's long-running operations: where to poll (URLs, so longer). */
    char async_operation[HTTP_URL_HEADER_MAX];
    char location[HTTP_URL_HEADER_MAX];
    char errbuf[CURL_ERROR_SIZE];
    tm_http_cb cb;
    void *data;
    struct http_xfer *prev;
    struct http_xfer *next;
};

struct tm_http {
    uv_loop_t *loop;
    CURLM *multi;
    uv_timer_t timer;
    unsigned open_handles; /* uv handles whose close callback has not run */
    unsigned inflight;
    bool closing;
    struct http_sock *socks;    /* watched sockets, closing ones excluded */
    struct http_xfer *xfers;    /* transfers in flight */
    struct http_xfer *canceled; /* abandoned by tm_http_close() */
    void (*done)(void *data);
    void *done_data;
};

/* ---- global init ------------------------------------------------------- */

static pthread_once_t http_once = PTHREAD_ONCE_INIT;
static CURLcode http_global_result = CURLE_FAILED_INIT;

static void http_global_init_once(void)
{
    http_global_result = curl_global_init(CURL_GLOBAL_DEFAULT);
}

int tm_http_global_init(void)
{
    /* curl_global_init() is not thread-safe and must run once per process;
     * pthread_once makes repeated and concurrent calls harmless. */
    pthread_once(&http_once, http_global_init_once);
    return http_global_result == CURLE_OK ? 0 : TM_EUNAVAIL;
}

/* ---- lists ------------------------------------------------------------- */

static void sock_link(struct tm_http *http, struct http_sock *s)
{
    s->prev = NULL;
    s->next = http->socks;
    if (http->socks)
        http->socks->prev = s;
    http->socks = s;
}

static void sock_unlink(struct tm_http *http, struct http_sock *s)
{
    if (s->prev)
        s->prev->next = s->next;
    else
        http->socks = s->next;
    if (s->next)
        s->next->prev = s->prev;
    s->prev = s->next = NULL;
}

static void xfer_link(struct http_xfer **head, struct http_xfer *x)
{
    x->prev = NULL;
    x->next = *head;
    if (*head)
        (*head)->prev = x;
    *head = x;
}

static void xfer_unlink(struct http_xfer **head, struct http_xfer *x)
{
    if (x->prev)
        x->prev->next = x->next;
    else
        *head = x->next;
    if (x->next)
        x->next->prev = x->prev;
    x->prev = x->next = NULL;
}

/* ---- handles ----------------------------------------------------------- */

static void http_release_handle(struct tm_http *http)
{
    struct http_xfer *x;

    if (--http->open_handles > 0 || !http->closing)
        return;
    /* Every handle is closed: run the cancellations, then done, then free. */
    while ((x = http->canceled) != NULL) {
        struct tm_http_response resp = {.status = TM_ECANCELED, .body = "", .error = "client closed"};

        xfer_unlink(&http->canceled, x);
        x->cb(&resp, x->data);
        free(x);
    }
    if (http->done)
        http->done(http->done_data);
    free(http);
}

static void http_sock_closed(uv_handle_t *handle)
{
    struct http_sock *s = (struct http_sock *)handle;
    struct tm_http *http = s->http;

    free(s);
    http_release_handle(http);
}

static void http_timer_closed(uv_handle_t *handle)
{
    http_release_handle(handle->data);
}

static void http_sock_close(struct tm_http *http, struct http_sock *s)
{
    if (s->closing)
        return;
    s->closing = true;
    sock_unlink(http, s);
    /* uv_close() stops the poll at once, before curl closes the fd. */
    uv_close((uv_handle_t *)&s->poll, http_sock_closed);
}

/* ---- transfers --------------------------------------------------------- */

static void xfer_free(struct http_xfer *x)
{
    if (x->easy)
        curl_easy_cleanup(x->easy);
    curl_slist_free_all(x->headers);
    free(x->req_body);
    free(x->body);
    x->easy = NULL;
    x->headers = NULL;
    x->req_body = NULL;
    x->body = NULL;
}

static int http_map_error(const struct http_xfer *x, CURLcode code)
{
    if (x->too_big)
        return TM_EBADREPLY;
    if (x->oom)
        return TM_ENOMEM;
    switch (code) {
    case CURLE_OK:
        return 0;
    case CURLE_OPERATION_TIMEDOUT:
        return -ETIMEDOUT;
    case CURLE_COULDNT_CONNECT:
        return -ECONNREFUSED;
    case CURLE_RECV_ERROR:
    case CURLE_SEND_ERROR:
    case CURLE_GOT_NOTHING:
        return -ECONNRESET;
    default:
        return TM_EUNAVAIL;
    }
}

static void http_finish(struct tm_http *http, CURL *easy, CURLcode code)
{
    struct http_xfer *x = NULL;
    struct tm_http_response resp = {0};

    curl_easy_getinfo(easy, CURLINFO_PRIVATE, (char **)&x);
    curl_multi_remove_handle(http->multi, easy);
    xfer_unlink(&http->xfers, x);
    http->inflight--;

    resp.status = http_map_error(x, code);
    curl_easy_getinfo(easy, CURLINFO_RESPONSE_CODE, &resp.http_status);
    resp.body = x->body ? x->body : "";
    resp.body_len = x->body_len;
    if (resp.status < 0) {
        if (x->too_big)
            resp.error = "response body too large";
        else if (x->oom)
            resp.error = "out of memory";
        else
            resp.error = x->errbuf[0] ? x->errbuf : curl_easy_strerror(code);
    }
    resp.retry_after = x->retry_after[0] ? x->retry_after : NULL;
    resp.request_id = x->request_id[0] ? x->request_id : NULL;
    resp.async_operation = x->async_operation[0] ? x->async_operation : NULL;
    resp.location = x->location[0] ? x->location : NULL;
    x->cb(&resp, x->data);
    xfer_free(x);
    free(x);
}

/* Hand finished transfers to their callbacks.  Message pointers die with
 * curl_multi_remove_handle(), so each is copied out first. */
static void http_drain(struct tm_http *http)
{
    CURLMsg *msg;
    int pending;

    while (!http->closing && (msg = curl_multi_info_read(http->multi, &pending)) != NULL) {
        CURL *easy = msg->easy_handle;
        CURLcode code = msg->data.result;

        if (msg->msg != CURLMSG_DONE)
            continue;
        http_finish(http, easy, code);
    }
}

static void http_action(struct tm_http *http, curl_socket_t fd, int flags)
{
    int running;
    CURLMcode mc = curl_multi_socket_action(http->multi, fd, flags, &running);

    if (mc != CURLM_OK)
        tm_log_error("could not drive http transfers", "error=\"%s\"", curl_multi_strerror(mc));
    http_drain(http);
}

static void http_on_poll(uv_poll_t *handle, int status, int events)
{
    struct http_sock *s = (struct http_sock *)handle;
    struct tm_http *http = s->http;
    int flags = 0;

    if (http->closing)
        return;
    if (status < 0) {
        flags = CURL_CSELECT_ERR;
    } else {
        if (events & UV_READABLE)
            flags |= CURL_CSELECT_IN;
        if (events & UV_WRITABLE)
            flags |= CURL_CSELECT_OUT;
    }
    http_action(http, s->fd, flags);
}

static void http_on_timer(uv_timer_t *timer)
{
    struct tm_http *http = timer->data;

    if (!http->closing)
        http_action(http, CURL_SOCKET_TIMEOUT, 0);
}

/* CURLMOPT_TIMERFUNCTION: only (re)arm our timer; curl is driven later,
 * from the loop, never from inside its own callback. */
static int http_curl_timer(CURLM *multi, long timeout_ms, void *userp)
{
    struct tm_http *http = userp;

    if (http->closing)
        return 0;
    if (timeout_ms < 0) {
        uv_timer_stop(&http->timer);
        return 0;
    }
    /* 0 means "now"; 1 ms defers it to the loop. */
    if (timeout_ms == 0)
        timeout_ms = 1;
    return uv_timer_start(&http->timer, http_on_timer, (uint64_t)timeout_ms, 0) == 0 ? 0 : -1;
}

/* CURLMOPT_SOCKETFUNCTION: one uv_poll_t per socket, remembered by curl. */
static int http_curl_socket(CURL *easy, curl_socket_t fd, int what, void *userp, void *socketp)
{
    struct tm_http *http = userp;
    struct http_sock *s = socketp;
    int events = 0;

    if (what == CURL_POLL_REMOVE) {
        if (s) {
            uv_poll_stop(&s->poll);
            http_sock_close(http, s);
            if (!http->closing)
                curl_multi_assign(http->multi, fd, NULL);
        }
        return 0;
    }
    if (http->closing)
        return 0;
    if (!s) {
        s = calloc(1, sizeof(*s));
        if (!s)
            return -1;
        if (uv_poll_init_socket(http->loop, &s->poll, fd) < 0) {
            free(s);
            return -1;
        }
        s->http = http;
        s->fd = fd;
        http->open_handles++;
        sock_link(http, s);
        curl_multi_assign(http->multi, fd, s);
    }
    if (what == CURL_POLL_IN || what == CURL_POLL_INOUT)
        events |= UV_READABLE;
    if (what == CURL_POLL_OUT || what == CURL_POLL_INOUT)
        events |= UV_WRITABLE;
    return uv_poll_start(&s->poll, events, http_on_poll) == 0 ? 0 : -1;
}

static size_t http_on_body(char *ptr, size_t size, size_t nmemb, void *userp)
{
    struct http_xfer *x = userp;
    size_t n = size * nmemb;

    if (n > x->max_body - x->body_len) {
        /* Returning short aborts the transfer (CURLE_WRITE_ERROR). */
        x->too_big = true;
        return 0;
    }
    if (x->body_len + n + 1 > x->body_cap) {
        size_t cap = x->body_cap ? x->body_cap : 4096;
        char *grown;

        while (cap < x->body_len + n + 1)
            cap *= 2;
        if (cap > x->max_body + 1)
            cap = x->max_body + 1;
        grown = realloc(x->body, cap);
        if (!grown) {
            x->oom = true;
            return 0;
        }
        x->body = grown;
        x->body_cap = cap;
    }
    memcpy(x->body + x->body_len, ptr, n);
    x->body_len += n;
    x->body[x->body_len] = '\0';
    return n;
}

/* Copy a header's value, trimmed, if its name matches. */
static bool header_value(const char *line, size_t n, const char *name, char *out, size_t size)
{
    size_t name_len = strlen(name);
    size_t start;
    size_t end = n;

    if (n <= name_len || line[name_len] != ':' || strncasecmp(line, name, name_len) != 0)
        return false;
    start = name_len + 1;
    while (start < end && (line[start] == ' ' || line[start] == '\t'))
        start++;
    while (end > start && (line[end - 1] == '\r' || line[end - 1] == '\n' ||
                           line[end - 1] == ' ' || line[end - 1] == '\t'))
        end--;
    if (end - start >= size)
        end = start + size - 1;
    memcpy(out, line + start, end - start);
    out[end - start] = '\0';
    return true;
}

static size_t http_on_header(char *ptr, size_t size, size_t nmemb, void *userp)
{
    struct http_xfer *x = userp;
    size_t n = size * nmemb;

    /* A new status line (after 100 Continue, say) starts a new header set. */
    if (n >= 5 && strncmp(ptr, "HTTP/", 5) == 0) {
        x->retry_after[0] = '\0';
        x->request_id[0] = '\0';
        x->async_operation[0] = '\0';
        x->location[0] = '\0';
        return n;
    }
    if (header_value(ptr, n, "retry-after", x->retry_after, sizeof(x->retry_after)))
        return n;
    if (header_value(ptr, n, "azure-asyncoperation", x->async_operation,
                     sizeof(x->async_operation)) ||
        header_value(ptr, n, "location", x->location, sizeof(x->location)))
        return n;
    if (!header_value(ptr, n, "x-amzn-requestid", x->request_id, sizeof(x->request_id)))
        header_value(ptr, n, "x-request-id", x->request_id, sizeof(x->request_id));
    return n;
}

static int xfer_setup(struct http_xfer *x, const struct tm_http_request *req)
{
    static const char empty[] = "";
    CURL *e = x->easy;
    CURLcode c = CURLE_OK;
    long timeout = req->timeout_ms > 0 ? req->timeout_ms : HTTP_DEFAULT_TIMEOUT_MS;

    if (req->headers) {
        for (const char *const *h = req->headers; *h; h++) {
            struct curl_slist *l = curl_slist_append(x->headers, *h);

            if (!l)
                return TM_ENOMEM;
            x->headers = l;
        }
    }
    if (req->body_len > 0) {
        /* Answering "100 Continue" costs a round trip, or a one-second stall
         * against servers that ignore it; APIs never need it. */
        struct curl_slist *l = curl_slist_append(x->headers, "Expect:");

        if (!l)
            return TM_ENOMEM;
        x->headers = l;
        x->req_body = malloc(req->body_len);
        if (!x->req_body)
            return TM_ENOMEM;
        memcpy(x->req_body, req->body, req->body_len);
    }

    c |= curl_easy_setopt(e, CURLOPT_URL, req->url);
    c |= curl_easy_setopt(e, CURLOPT_PRIVATE, x);
    c |= curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
    c |= curl_easy_setopt(e, CURLOPT_TIMEOUT_MS, timeout);
    c |= curl_easy_setopt(e, CURLOPT_CONNECTTIMEOUT_MS,
                          timeout < HTTP_CONNECT_TIMEOUT_MS ? timeout : HTTP_CONNECT_TIMEOUT_MS);
    c |= curl_easy_setopt(e, CURLOPT_ERRORBUFFER, x->errbuf);
    c |= curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, http_on_body);
    c |= curl_easy_setopt(e, CURLOPT_WRITEDATA, x);
    c |= curl_easy_setopt(e, CURLOPT_HEADERFUNCTION, http_on_header);
    c |= curl_easy_setopt(e, CURLOPT_HEADERDATA, x);
    c |= curl_easy_setopt(e, CURLOPT_PROTOCOLS_STR, "http,https");
    if (x->headers)
        c |= curl_easy_setopt(e, CURLOPT_HTTPHEADER, x->headers);
    if (req->ca_file)
        c |= curl_easy_setopt(e, CURLOPT_CAINFO, req->ca_file); /* curl copies it */

    if (strcmp(req->method, "GET") == 0) {
        c |= curl_easy_setopt(e, CURLOPT_HTTPGET, 1L);
    } else if (strcmp(req->method, "HEAD") == 0) {
        c |= curl_easy_setopt(e, CURLOPT_NOBODY, 1L);
    } else {
        /* POST, PUT, PATCH, DELETE...: the body (maybe empty) goes as is. */
        c |= curl_easy_setopt(e, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)req->body_len);
        c |= curl_easy_setopt(e, CURLOPT_POSTFIELDS, x->req_body ? x->req_body : empty);
        if (strcmp(req->method, "POST") != 0)
            c |= curl_easy_setopt(e, CURLOPT_CUSTOMREQUEST, req->method);
    }
    return c == CURLE_OK ? 0 : TM_EINVAL;
}

int tm_http_request(struct tm_http *http, const struct tm_http_request *req, tm_http_cb cb,
                    void *data)
{
    struct http_xfer *x = NULL;
    int r = TM_EINVAL;

    if (!http || !req || !req->method || !req->url || !cb || (req->body_len > 0 && !req->body))
        goto out;
    r = TM_ECANCELED;
    if (http->closing)
        goto out;
    r = TM_ENOMEM;
    x = calloc(1, sizeof(*x));
    if (!x)
        goto out;
    x->easy = curl_easy_init();
    if (!x->easy)
        goto out;
    x->http = http;
    x->cb = cb;
    x->data = data;
    x->max_body = req->max_body > 0 ? req->max_body : HTTP_DEFAULT_MAX_BODY;
    r = xfer_setup(x, req);
    if (r < 0)
        goto out;
    /* Adding only arms our timer (CURLMOPT_TIMERFUNCTION): the transfer
     * starts from the loop. */
    if (curl_multi_add_handle(http->multi, x->easy) != CURLM_OK) {
        r = TM_ENOMEM;
        goto out;
    }
    xfer_link(&http->xfers, x);
    http->inflight++;
    x = NULL;
    r = 0;
out:
    if (x) {
        xfer_free(x);
        free(x);
    }
    return r;
}

unsigned tm_http_inflight(const struct tm_http *http)
{
    return http ? http->inflight : 0;
}

int tm_http_create(uv_loop_t *loop, struct tm_http **ret_http)
{
    struct tm_http *http;
    int r;

    if (!loop || !ret_http)
        return TM_EINVAL;
    r = tm_http_global_init();
    if (r < 0)
        return r;
    http = calloc(1, sizeof(*http));
    if (!http)
        return TM_ENOMEM;
    http->multi = curl_multi_init();
    if (!http->multi) {
        free(http);
        return TM_ENOMEM;
    }
    http->loop = loop;
    curl_multi_setopt(http->multi, CURLMOPT_SOCKETFUNCTION, http_curl_socket);
    curl_multi_setopt(http->multi, CURLMOPT_SOCKETDATA, http);
    curl_multi_setopt(http->multi, CURLMOPT_TIMERFUNCTION, http_curl_timer);
    curl_multi_setopt(http->multi, CURLMOPT_TIMERDATA, http);
    uv_timer_init(loop, &http->timer);
    http->timer.data = http;
    http->open_handles = 1;
    *ret_http = http;
    return 0;
}

void tm_http_close(struct tm_http *http, void (*done)(void *data), void *data)
{
    struct http_xfer *x;

    if (!http || http->closing)
        return;
    http->closing = true;
    http->done = done;
    http->done_data = data;
    /* Removing a handle may close its sockets (CURL_POLL_REMOVE), which
     * closes their watchers; their callbacks wait for the close callbacks. */
    while ((x = http->xfers) != NULL) {
        xfer_unlink(&http->xfers, x);
        curl_multi_remove_handle(http->multi, x->easy);
        xfer_free(x);
        xfer_link(&http->canceled, x);
    }
    http->inflight = 0;
    /* Cleanup closes pooled connections, maybe reporting more removals. */
    curl_multi_cleanup(http->multi);
    http->multi = NULL;
    while (http->socks)
        http_sock_close(http, http->socks);
    uv_close((uv_handle_t *)&http->timer, http_timer_closed);
}
