/*
 * providers/gcp/gce_client.c: Compute Engine calls on the libuv loop.
 *
 * A call goes TOKEN (waiting for an access token) -> HTTP -> DONE, with
 * BACKOFF (its own timer) between failed attempts.  Throttling (429,
 * rateLimitExceeded), 5xx and, with TM_GCE_RETRY_AMBIGUOUS, resets and
 * timeouts are retried with full jitter, sleep uniform in
 * [0, min(cap, base * 2^(n-1))], as long as the attempt budget and the
 * total-delay budget allow (a hard ceiling: the last sleep is cut to what
 * is left).  With TM_GCE_FOLLOW an Operation answer that is not DONE is
 * followed with zoneOperations.wait (same token path, same retry budget
 * for failures) until DONE or max_waits; a DONE operation with
 * error.errors[] fails the call with the first error's code.
 *
 * A 401 first drops the cached token and tries once more with a new one
 * (tokens expire and are revoked).  The auth gate: a 401 after that, a
 * 403 (other than a rate-limit or quota reason), or a refused key closes it
 * for auth_cooldown_ms and drops the cached token; while closed, calls fail
 * with TM_EAUTH without a request.  When the cool-down ends one call goes
 * through as a probe.  Nothing here logs a token or the Authorization
 * header; the token is registered as a secret by gcp_auth.c anyway.
 */
#include "providers/gcp/gce.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/crypto.h>

#include "controller/io/http_uv.h"
#include "core/err.h"
#include "core/log.h"
#include "providers/common/retry.h"

enum call_state { CALL_TOKEN, CALL_HTTP, CALL_BACKOFF, CALL_DONE };

struct gce_call {
    uv_timer_t timer;             /* first: the handle's memory is the call's */
    struct gce_call *next, **pprev;
    struct tm_gce *gce;
    enum tm_gce_call call;        /* what the caller asked for */
    enum tm_gce_call sent;        /* what is in flight (wait while following) */
    enum call_state state;
    unsigned flags;
    char *method;
    char *url;
    char *body;
    tm_gce_cb cb;
    void *data;
    unsigned attempts;            /* requests sent */
    unsigned failures;            /* failed attempts (the retry budget) */
    unsigned waits;
    bool reauthed;                /* a 401 already made us fetch a new token */
    uint64_t delay_ms;
    struct tm_gce_reply last;     /* the last failure, for the callback */
    int fail_status;              /* set: the backoff timer delivers it */
};

struct tm_gce {
    uv_loop_t *loop;
    struct tm_http *http;
    struct tm_gcp_tokens *tokens;
    char *endpoint;
    char *project;
    struct tm_gce_retry retry;
    long timeout_ms;
    unsigned max_waits;
    uint64_t rng;
    struct gce_call *calls;
    struct tm_gce_stats stats;
    struct tm_auth_gate gate;     /* on uv_now() */
    bool closing;
    uv_timer_t close_timer;
    void (*close_done)(void *data);
    void *close_data;
};

uint64_t tm_gce_backoff_ms(const struct tm_gce_retry *retry, unsigned n, uint64_t *state)
{
    return tm_retry_backoff_ms(retry->base_delay_ms ? retry->base_delay_ms : 100,
                               retry->max_delay_ms ? retry->max_delay_ms : 5000, n, state);
}

const char *tm_gce_endpoint(const struct tm_gce *gce) { return gce->endpoint; }
const char *tm_gce_project(const struct tm_gce *gce) { return gce->project; }
struct tm_gcp_tokens *tm_gce_tokens(struct tm_gce *gce) { return gce->tokens; }
bool tm_gce_auth_blocked(const struct tm_gce *gce) { return gce->gate.closed; }

void tm_gce_get_stats(const struct tm_gce *gce, struct tm_gce_stats *ret)
{
    *ret = gce->stats;
}

/* A request body may hold a node's bootstrap and its enrollment secret
 * (an insert's or a setMetadata's startup items): wiped before it goes. */
static void body_free(char *body)
{
    if (body) {
        OPENSSL_cleanse(body, strlen(body));
        free(body);
    }
}

static void on_call_closed(uv_handle_t *h)
{
    struct gce_call *c = (struct gce_call *)h;

    free(c->method);
    free(c->url);
    body_free(c->body);
    tm_gce_reply_release(&c->last);
    free(c);
}

static void deliver(struct gce_call *c, int status, struct tm_gce_reply *reply)
{
    struct tm_gce_reply empty = {0};

    if (c->state == CALL_DONE)
        return;
    c->state = CALL_DONE;
    if (c->pprev) {
        *c->pprev = c->next;
        if (c->next)
            c->next->pprev = c->pprev;
        c->pprev = NULL;
    }
    if (!reply)
        reply = status < 0 ? &c->last : &empty;
    reply->call = c->call;
    reply->attempts = c->attempts;
    c->cb(status, reply, c->data);
    if (reply != &c->last)
        tm_gce_reply_release(reply);
    uv_timer_stop(&c->timer);
    uv_close((uv_handle_t *)&c->timer, on_call_closed);
}

static void start_attempt(struct gce_call *c);

static void on_backoff(uv_timer_t *t)
{
    struct gce_call *c = (struct gce_call *)t;

    if (c->fail_status < 0)
        deliver(c, c->fail_status, NULL);
    else
        start_attempt(c);
}

static void retry_or_deliver(struct gce_call *c, int status)
{
    struct tm_gce *gce = c->gce;
    struct tm_retry_budget b = {
        .max_attempts = gce->retry.max_attempts ? gce->retry.max_attempts : 5,
        .max_total_delay_ms = gce->retry.max_total_delay_ms ? gce->retry.max_total_delay_ms : 20000,
    };
    uint64_t wait;

    c->failures++;
    if (gce->closing ||
        !tm_retry_next(&b, c->failures, c->delay_ms, 0,
                       tm_gce_backoff_ms(&gce->retry, c->failures, &gce->rng), &wait)) {
        tm_log_warn("gce call failed, retry budget spent",
                    "call=%s attempts=%u delay_ms=%llu code=%s err=%s",
                    tm_gce_call_name(c->sent), c->attempts, (unsigned long long)c->delay_ms,
                    c->last.error_code[0] ? c->last.error_code : "-", tm_err_name(status));
        deliver(c, gce->closing ? TM_ECANCELED : status, NULL);
        return;
    }
    c->delay_ms += wait;
    gce->stats.delay_ms += wait;
    tm_log_info("gce call will be retried", "call=%s attempt=%u http=%ld code=%s err=%s wait_ms=%llu",
                tm_gce_call_name(c->sent), c->attempts, c->last.http_status,
                c->last.error_code[0] ? c->last.error_code : "-", tm_err_name(status),
                (unsigned long long)wait);
    c->state = CALL_BACKOFF;
    uv_timer_start(&c->timer, on_backoff, wait, 0);
}

static void close_gate(struct tm_gce *gce, long http, const char *code)
{
    bool was_open = tm_auth_gate_close(&gce->gate, uv_now(gce->loop));

    tm_gcp_tokens_invalidate(gce->tokens);
    if (was_open)
        tm_log_error("gcp refused our credentials: no more gcp calls until the cool-down ends; "
                     "the rest of the controller keeps running",
                     "provider=gcp project=%s http=%ld code=%s cooldown_s=%llu", gce->project,
                     http, code && *code ? code : "-",
                     (unsigned long long)(gce->gate.cooldown_ms / 1000));
}

/* Switch an operation-returning call to waiting on its operation. */
static int follow(struct gce_call *c, const struct tm_gce_operation *op)
{
    char *url = tm_gce_url_operation(c->gce->endpoint, c->gce->project, op->zone, op->name, true);
    char *method = strdup("POST");

    if (!url || !method) {
        free(url);
        free(method);
        return TM_ENOMEM;
    }
    free(c->url);
    free(c->method);
    body_free(c->body);
    c->url = url;
    c->method = method;
    c->body = NULL;
    c->sent = TM_GCE_OPERATION_WAIT;
    c->waits++;
    c->gce->stats.waits++;
    return 0;
}

static void on_http(const struct tm_http_response *resp, void *data)
{
    struct gce_call *c = data;
    struct tm_gce *gce = c->gce;
    struct tm_gce_reply reply;
    char err[256];
    int status;

    if (c->state != CALL_HTTP)
        return;
    tm_gce_reply_release(&c->last);
    c->last.http_status = resp->http_status;
    if (resp->status == TM_ECANCELED || gce->closing) {
        deliver(c, TM_ECANCELED, NULL);
        return;
    }
    if (resp->status < 0) {
        snprintf(c->last.error_message, sizeof(c->last.error_message), "%s",
                 resp->error ? resp->error : tm_strerror(resp->status));
        if ((c->flags & TM_GCE_RETRY_AMBIGUOUS) || c->sent == TM_GCE_OPERATION_WAIT ||
            resp->status == -ECONNREFUSED)
            retry_or_deliver(c, resp->status == -ECONNREFUSED ? TM_EUNAVAIL : resp->status);
        else
            deliver(c, resp->status, NULL);
        return;
    }
    if (resp->http_status == 200) {
        status = tm_gce_parse_reply(c->sent, resp->body, resp->body_len, &reply, err, sizeof(err));
        if (status < 0) {
            tm_log_error("could not read gce answer", "call=%s error=\"%s\"",
                         tm_gce_call_name(c->sent), err);
            snprintf(c->last.error_message, sizeof(c->last.error_message), "%s", err);
            deliver(c, status, NULL);
            return;
        }
        tm_auth_gate_open(&gce->gate);
        if ((c->flags & TM_GCE_FOLLOW) && !reply.op.done) {
            unsigned max = gce->max_waits ? gce->max_waits : 60;

            if (c->waits >= max || !reply.op.zone[0]) {
                snprintf(c->last.error_message, sizeof(c->last.error_message),
                         "operation %s not DONE after %u waits", reply.op.name, c->waits);
                c->last.op = reply.op;
                tm_gce_reply_release(&reply);
                deliver(c, -ETIMEDOUT, NULL);
                return;
            }
            status = follow(c, &reply.op);
            tm_gce_reply_release(&reply);
            if (status < 0) {
                deliver(c, status, NULL);
                return;
            }
            /* wait returns at once on a fake; do not spin. */
            c->state = CALL_BACKOFF;
            uv_timer_start(&c->timer, on_backoff, c->waits < 10 ? 20u * c->waits : 500u, 0);
            return;
        }
        if ((c->flags & TM_GCE_FOLLOW) && reply.op.error_code[0]) {
            c->last.op = reply.op;
            snprintf(c->last.error_code, sizeof(c->last.error_code), "%s", reply.op.error_code);
            snprintf(c->last.error_message, sizeof(c->last.error_message), "%s",
                     reply.op.error_message);
            tm_gce_reply_release(&reply);
            status = tm_gce_error_map(c->last.error_code, 0);
            if (status != TM_EQUOTA && status != TM_ENOTFOUND && status != TM_ECONFLICT)
                tm_log_warn("gce operation failed", "call=%s code=%s message=\"%s\"",
                            tm_gce_call_name(c->call), c->last.error_code,
                            c->last.error_message);
            deliver(c, status, NULL);
            return;
        }
        deliver(c, 0, &reply);
        return;
    }
    if (tm_gce_parse_error(resp->body, resp->body_len, &c->last) < 0)
        snprintf(c->last.error_message, sizeof(c->last.error_message),
                 "HTTP %ld without an error document", resp->http_status);
    status = tm_gce_error_map(c->last.error_code, resp->http_status);
    if (status == TM_EAUTH && resp->http_status == 401 && !c->reauthed) {
        /* The token may have expired or been revoked under us: one fresh
         * token before concluding the credentials are refused. */
        c->reauthed = true;
        tm_gcp_tokens_invalidate(gce->tokens);
        tm_log_info("gce answered 401, fetching a new token once", "call=%s",
                    tm_gce_call_name(c->sent));
        start_attempt(c);
        return;
    }
    if (status == TM_EAUTH) {
        close_gate(gce, resp->http_status, c->last.error_code);
        deliver(c, TM_EAUTH, NULL);
        return;
    }
    if (status == TM_ETHROTTLED || status == TM_EUNAVAIL) {
        retry_or_deliver(c, status);
        return;
    }
    if (status != TM_ENOTFOUND && status != TM_ECONFLICT && status != TM_EQUOTA)
        tm_log_warn("gce call refused", "call=%s http=%ld code=%s message=\"%s\"",
                    tm_gce_call_name(c->sent), resp->http_status, c->last.error_code,
                    c->last.error_message);
    deliver(c, status, NULL);
}

static void on_token(int status, const char *token, const char *error, void *data)
{
    struct gce_call *c = data;
    struct tm_gce *gce = c->gce;
    struct tm_http_request req = {0};
    const char *headers[4];
    char *auth;
    size_t n = 0;
    int r;

    if (c->state != CALL_TOKEN)
        return;
    if (status == TM_ECANCELED || gce->closing) {
        deliver(c, TM_ECANCELED, NULL);
        return;
    }
    if (status < 0) {
        snprintf(c->last.error_message, sizeof(c->last.error_message), "%s",
                 error ? error : tm_strerror(status));
        if (status == TM_EAUTH) {
            snprintf(c->last.error_code, sizeof(c->last.error_code), "invalid_grant");
            close_gate(gce, 0, "token refused");
            deliver(c, TM_EAUTH, NULL);
        } else {
            retry_or_deliver(c, status == TM_EBADREPLY ? TM_EUNAVAIL : status);
        }
        return;
    }
    if (gce->gate.closed) {
        if (!tm_auth_gate_pass(&gce->gate, uv_now(gce->loop))) {
            gce->stats.auth_refusals++;
            snprintf(c->last.error_code, sizeof(c->last.error_code), "authRefused");
            snprintf(c->last.error_message, sizeof(c->last.error_message),
                     "not calling gcp: credentials were refused (cool-down)");
            deliver(c, TM_EAUTH, NULL);
            return;
        }
        /* else the cool-down is over: this call probes, the others wait */
    }
    n = strlen(token) + 32;
    auth = malloc(n);
    if (!auth) {
        deliver(c, TM_ENOMEM, NULL);
        return;
    }
    snprintf(auth, n, "Authorization: Bearer %s", token);
    headers[0] = auth;
    headers[1] = c->body ? "Content-Type: application/json" : "Accept: application/json";
    headers[2] = NULL;
    req.method = c->method;
    req.url = c->url;
    req.headers = headers;
    req.body = c->body;
    req.body_len = c->body ? strlen(c->body) : 0;
    req.timeout_ms = gce->timeout_ms;
    c->attempts++;
    gce->stats.requests++;
    if (c->failures > 0)
        gce->stats.retries++;
    c->state = CALL_HTTP;
    r = tm_http_request(gce->http, &req, on_http, c);
    OPENSSL_cleanse(auth, strlen(auth));
    free(auth);
    if (r < 0) {
        c->state = CALL_TOKEN;
        deliver(c, r, NULL);
    }
}

static void start_attempt(struct gce_call *c)
{
    int r;

    c->state = CALL_TOKEN;
    r = tm_gcp_tokens_get(c->gce->tokens, on_token, c);
    if (r < 0) {
        c->fail_status = r;
        c->state = CALL_BACKOFF;
        uv_timer_start(&c->timer, on_backoff, 0, 0);
    }
}

int tm_gce_call(struct tm_gce *gce, enum tm_gce_call call, const char *method, char *url,
                char *body, unsigned flags, tm_gce_cb cb, void *data)
{
    struct gce_call *c;

    if (!gce || !cb || !url || !method || (unsigned)call >= TM_GCE_CALL_MAX) {
        free(url);
        free(body);
        return TM_EINVAL;
    }
    if (gce->closing) {
        free(url);
        free(body);
        return TM_ECANCELED;
    }
    c = calloc(1, sizeof(*c));
    if (!c || !(c->method = strdup(method))) {
        free(c);
        free(url);
        free(body);
        return TM_ENOMEM;
    }
    uv_timer_init(gce->loop, &c->timer);
    c->gce = gce;
    c->call = c->sent = call;
    c->flags = flags;
    c->url = url;
    c->body = body;
    c->cb = cb;
    c->data = data;
    c->next = gce->calls;
    c->pprev = &gce->calls;
    if (gce->calls)
        gce->calls->pprev = &c->next;
    gce->calls = c;
    gce->stats.calls++;
    start_attempt(c);
    return 0;
}

int tm_gce_create(uv_loop_t *loop, const struct tm_gce_options *opts, struct tm_gce **ret)
{
    struct tm_gce *gce;
    int r;

    if (!loop || !opts || !opts->project || !*opts->project || !ret)
        return TM_EINVAL;
    gce = calloc(1, sizeof(*gce));
    if (!gce)
        return TM_ENOMEM;
    gce->loop = loop;
    gce->endpoint = strdup(opts->endpoint && *opts->endpoint ? opts->endpoint : TM_GCE_ENDPOINT);
    gce->project = strdup(opts->project);
    if (!gce->endpoint || !gce->project) {
        r = TM_ENOMEM;
        goto fail;
    }
    for (size_t n = strlen(gce->endpoint); n > 0 && gce->endpoint[n - 1] == '/'; n--)
        gce->endpoint[n - 1] = '\0';
    gce->retry = opts->retry;
    gce->timeout_ms = opts->timeout_ms ? opts->timeout_ms : 30000;
    gce->gate.cooldown_ms = opts->auth_cooldown_ms ? opts->auth_cooldown_ms : 5 * 60 * 1000;
    gce->max_waits = opts->max_waits;
    gce->rng = opts->seed ? opts->seed : uv_hrtime() | 1;
    r = tm_http_create(loop, &gce->http);
    if (r < 0)
        goto fail;
    r = tm_gcp_tokens_create(loop, gce->http, &opts->auth, &gce->tokens);
    if (r < 0) {
        tm_http_close(gce->http, NULL, NULL);
        goto fail;
    }
    uv_timer_init(loop, &gce->close_timer);
    gce->close_timer.data = gce;
    *ret = gce;
    return 0;
fail:
    free(gce->endpoint);
    free(gce->project);
    free(gce);
    return r;
}

static void on_close_timer_closed(uv_handle_t *h)
{
    struct tm_gce *gce = h->data;
    void (*done)(void *data) = gce->close_done;
    void *data = gce->close_data;

    free(gce->endpoint);
    free(gce->project);
    free(gce);
    if (done)
        done(data);
}

static void on_tokens_closed(void *data)
{
    struct tm_gce *gce = data;

    uv_close((uv_handle_t *)&gce->close_timer, on_close_timer_closed);
}

static void on_http_closed(void *data)
{
    struct tm_gce *gce = data;

    /* No fetch can be in flight now: the token cache may go. */
    tm_gcp_tokens_close(gce->tokens, on_tokens_closed, gce);
}

static void on_close_timer(uv_timer_t *t)
{
    struct tm_gce *gce = t->data;
    struct gce_call *c = gce->calls;

    while (c) {
        struct gce_call *next = c->next;

        if (c->state == CALL_BACKOFF)
            deliver(c, TM_ECANCELED, NULL);
        c = next;
    }
    /* HTTP calls come back TM_ECANCELED from tm_http; calls waiting on a
     * token get TM_ECANCELED when the cache closes. */
    tm_http_close(gce->http, on_http_closed, gce);
}

void tm_gce_close(struct tm_gce *gce, void (*done)(void *data), void *data)
{
    if (!gce || gce->closing)
        return;
    gce->closing = true;
    gce->close_done = done;
    gce->close_data = data;
    uv_timer_start(&gce->close_timer, on_close_timer, 0, 0);
}
