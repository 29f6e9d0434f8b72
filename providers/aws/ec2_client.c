/*
 * providers/aws/ec2_client.c: EC2 calls on the libuv loop.
 *
 * A call goes through these states (set_state() logs each change at debug):
 *
 *   CRED     waiting for credentials from the cached credential provider
 *   HTTP     a signed request is in flight in tm_http
 *   BACKOFF  sleeping on the call's own timer before the next attempt
 *   DONE     the callback has fired; the timer is closing, then it is freed
 *
 * Every attempt is signed anew (fresh X-Amz-Date, possibly refreshed
 * credentials).  Throttling, 5xx and transport failures are retried with
 * full jitter: sleep uniform [0, min(cap, base * 2^(n-1))], as long as both
 * the attempt budget and the total-delay budget allow; a sleep that would
 * pass the delay budget is cut to what is left, and when nothing is left
 * the last error is returned.  So the budget is a hard ceiling (the
 * budget and the jitter are every cloud client's: providers/common/retry.h).
 *
 * The auth gate: an authentication failure closes it for auth_cooldown_ms.
 * While closed, calls fail with TM_EAUTH without a request, unless the
 * credentials have changed since (fingerprint of key id, secret and token),
 * which opens it.  When the cool-down ends one call goes through as a probe
 * (the gate re-arms for the others), so a fixed key is retried rarely.
 */
#include "providers/aws/ec2.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <openssl/crypto.h>
#include <openssl/evp.h>

#include "controller/io/http_uv.h"
#include "core/err.h"
#include "core/log.h"
#include "core/sigv4.h"
#include "providers/common/retry.h"

enum call_state {
    CALL_CRED,
    CALL_HTTP,
    CALL_BACKOFF,
    CALL_DONE,
    CALL_STATE_MAX,
};

static const char *const state_names[CALL_STATE_MAX] = {"cred", "http", "backoff", "done"};

struct ec2_call {
    uv_timer_t timer;             /* first: the handle's memory is the call's */
    struct ec2_call *next, **pprev; /* in ec2->calls while not DONE */
    struct tm_ec2 *ec2;
    enum tm_ec2_action action;
    enum call_state state;
    unsigned flags;
    char *body;
    size_t body_len;
    tm_ec2_cb cb;
    void *data;
    unsigned attempts;
    uint64_t delay_ms;            /* backoff slept so far */
    struct tm_ec2_reply last;     /* the last failure, for the callback */
    int last_status;
    int fail_status;              /* set: the backoff timer delivers it */
    unsigned char fp[32];         /* fingerprint of the credentials signed with */
};

struct tm_ec2 {
    uv_loop_t *loop;
    struct tm_http *http;
    struct tm_aws_credential_provider *creds;
    char *endpoint;
    char *region;
    struct tm_ec2_retry retry;
    long timeout_ms;
    bool corrupt_signature;
    uint64_t rng;
    struct ec2_call *calls;
    struct tm_ec2_stats stats;
    /* the auth gate */
    struct tm_auth_gate gate;     /* on uv_now() */
    unsigned char blocked_fp[32]; /* fingerprint of the refused credentials */
    /* closing */
    bool closing;
    uv_timer_t close_timer;
    bool creds_closed, http_closed;
    void (*close_done)(void *data);
    void *close_data;
};

static void set_state(struct ec2_call *c, enum call_state s)
{
    tm_log_debug("ec2 call state", "action=%s attempt=%u from=%s to=%s",
                 tm_ec2_action_name(c->action), c->attempts, state_names[c->state],
                 state_names[s]);
    c->state = s;
}

static void on_call_timer_closed(uv_handle_t *h)
{
    struct ec2_call *c = (struct ec2_call *)h;

    /* A RunInstances body carries the node's user data, which holds its
     * enrollment secret. */
    if (c->body)
        OPENSSL_cleanse(c->body, strlen(c->body));
    free(c->body);
    tm_ec2_reply_release(&c->last);
    free(c);
}

static void call_unlink(struct ec2_call *c)
{
    if (!c->pprev)
        return;
    *c->pprev = c->next;
    if (c->next)
        c->next->pprev = c->pprev;
    c->next = NULL;
    c->pprev = NULL;
}

/* Fire the callback once and retire the call. */
static void deliver(struct ec2_call *c, int status, struct tm_ec2_reply *reply)
{
    struct tm_ec2_reply empty = {0};

    if (c->state == CALL_DONE)
        return;
    set_state(c, CALL_DONE);
    call_unlink(c);
    if (!reply)
        reply = status < 0 ? &c->last : &empty;
    reply->action = c->action;
    reply->attempts = c->attempts;
    c->cb(status, reply, c->data);
    if (reply != &c->last)
        tm_ec2_reply_release(reply);
    uv_timer_stop(&c->timer);
    uv_close((uv_handle_t *)&c->timer, on_call_timer_closed);
}

static void fingerprint(const struct tm_aws_credentials *cred, unsigned char out[32])
{
    EVP_MD_CTX *ctx = EVP_MD_CTX_new();
    unsigned int n = 0;

    memset(out, 0, 32);
    if (!ctx)
        return;
    if (EVP_DigestInit_ex(ctx, EVP_sha256(), NULL) == 1 &&
        EVP_DigestUpdate(ctx, cred->access_key, strnlen(cred->access_key, sizeof(cred->access_key))) == 1 &&
        EVP_DigestUpdate(ctx, "\n", 1) == 1 &&
        EVP_DigestUpdate(ctx, cred->secret_key, strnlen(cred->secret_key, sizeof(cred->secret_key))) == 1 &&
        EVP_DigestUpdate(ctx, "\n", 1) == 1 &&
        EVP_DigestUpdate(ctx, cred->session_token,
                         strnlen(cred->session_token, sizeof(cred->session_token))) == 1)
        EVP_DigestFinal_ex(ctx, out, &n);
    EVP_MD_CTX_free(ctx);
}

static void start_attempt(struct ec2_call *c);

static void on_backoff(uv_timer_t *t)
{
    struct ec2_call *c = (struct ec2_call *)t;

    if (c->fail_status < 0)
        deliver(c, c->fail_status, NULL);
    else
        start_attempt(c);
}

uint64_t tm_ec2_backoff_ms(const struct tm_ec2_retry *retry, unsigned n, uint64_t *state)
{
    return tm_retry_backoff_ms(retry->base_delay_ms ? retry->base_delay_ms : 100,
                               retry->max_delay_ms ? retry->max_delay_ms : 5000, n, state);
}

/*
 * After a failed attempt: sleep and try again if the budget allows,
 * otherwise hand the failure to the caller.
 */
static void retry_or_deliver(struct ec2_call *c, int status)
{
    struct tm_ec2 *ec2 = c->ec2;
    struct tm_retry_budget b = {
        .max_attempts = ec2->retry.max_attempts ? ec2->retry.max_attempts : 5,
        .max_total_delay_ms = ec2->retry.max_total_delay_ms ? ec2->retry.max_total_delay_ms : 20000,
    };
    uint64_t wait;

    c->last_status = status;
    if (ec2->closing ||
        !tm_retry_next(&b, c->attempts, c->delay_ms, 0,
                       tm_ec2_backoff_ms(&ec2->retry, c->attempts, &ec2->rng), &wait)) {
        tm_log_warn("ec2 call failed, retry budget spent",
                    "action=%s attempts=%u delay_ms=%llu code=%s err=%s",
                    tm_ec2_action_name(c->action), c->attempts, (unsigned long long)c->delay_ms,
                    c->last.error_code[0] ? c->last.error_code : "-", tm_err_name(status));
        deliver(c, ec2->closing ? TM_ECANCELED : status, NULL);
        return;
    }
    c->delay_ms += wait;
    ec2->stats.delay_ms += wait;
    tm_log_info("ec2 call will be retried",
                "action=%s attempt=%u code=%s err=%s wait_ms=%llu", tm_ec2_action_name(c->action),
                c->attempts, c->last.error_code[0] ? c->last.error_code : "-", tm_err_name(status),
                (unsigned long long)wait);
    set_state(c, CALL_BACKOFF);
    uv_timer_start(&c->timer, on_backoff, wait, 0);
}

static bool retryable(int status)
{
    return status == TM_ETHROTTLED || status == TM_EUNAVAIL;
}

static bool transport_retryable(int status)
{
    return status == -ETIMEDOUT || status == -ECONNRESET || status == -ECONNREFUSED ||
           status == TM_EUNAVAIL;
}

static void close_gate(struct tm_ec2 *ec2, const unsigned char fp[32], const char *code)
{
    bool was_open = tm_auth_gate_close(&ec2->gate, uv_now(ec2->loop));

    memcpy(ec2->blocked_fp, fp, 32);
    if (was_open)
        tm_log_error("aws refused our credentials: no more aws calls until the credentials "
                     "change or the cool-down ends; the rest of the controller keeps running",
                     "provider=aws region=%s code=%s cooldown_s=%llu", ec2->region, code,
                     (unsigned long long)(ec2->gate.cooldown_ms / 1000));
}

static void on_http(const struct tm_http_response *resp, void *data)
{
    struct ec2_call *c = data;
    struct tm_ec2 *ec2 = c->ec2;
    struct tm_ec2_reply reply;
    char err[256];
    int status;

    if (c->state != CALL_HTTP)
        return;
    tm_ec2_reply_release(&c->last);
    c->last.http_status = resp->http_status;
    if (resp->status == TM_ECANCELED || ec2->closing) {
        deliver(c, TM_ECANCELED, NULL);
        return;
    }
    if (resp->status < 0) {
        snprintf(c->last.error_message, sizeof(c->last.error_message), "%s",
                 resp->error ? resp->error : tm_strerror(resp->status));
        /* The request may have been carried out: retry only where doing it
         * twice is harmless. */
        if (transport_retryable(resp->status) && (c->flags & TM_EC2_RETRY_AMBIGUOUS))
            retry_or_deliver(c, resp->status);
        else
            deliver(c, resp->status, NULL);
        return;
    }
    if (resp->http_status == 200) {
        status = tm_ec2_parse_reply(c->action, resp->body, resp->body_len, &reply, err,
                                    sizeof(err));
        if (status < 0) {
            tm_log_error("could not read ec2 answer", "action=%s request_id=%s error=\"%s\"",
                         tm_ec2_action_name(c->action),
                         resp->request_id ? resp->request_id : "-", err);
            snprintf(c->last.error_message, sizeof(c->last.error_message), "%s", err);
            deliver(c, status, NULL);
            return;
        }
        tm_auth_gate_open(&ec2->gate);
        deliver(c, 0, &reply);
        return;
    }
    if (tm_ec2_parse_error(resp->body, resp->body_len, &c->last) < 0)
        snprintf(c->last.error_message, sizeof(c->last.error_message),
                 "HTTP %ld without an EC2 error document", resp->http_status);
    status = tm_ec2_error_map(c->last.error_code, resp->http_status);
    if (status == TM_EAUTH) {
        /* The gate keys on what was refused, so that new credentials open it. */
        close_gate(ec2, c->fp, c->last.error_code[0] ? c->last.error_code : "-");
        deliver(c, TM_EAUTH, NULL);
        return;
    }
    if (retryable(status)) {
        retry_or_deliver(c, status);
        return;
    }
    if (status != TM_ENOTFOUND && status != TM_ECONFLICT)
        tm_log_warn("ec2 call refused", "action=%s http=%ld code=%s message=\"%s\"",
                    tm_ec2_action_name(c->action), resp->http_status, c->last.error_code,
                    c->last.error_message);
    deliver(c, status, NULL);
}

static void corrupt(char **headers)
{
    for (char **h = headers; h && *h; h++) {
        if (strncmp(*h, "Authorization:", 14) == 0) {
            size_t n = strlen(*h);

            if (n > 0)
                (*h)[n - 1] = (*h)[n - 1] == '0' ? '1' : '0';
        }
    }
}

static void on_creds(int status, const struct tm_aws_credentials *cred, const char *error,
                     void *data)
{
    struct ec2_call *c = data;
    struct tm_ec2 *ec2 = c->ec2;
    struct tm_http_request req = {0};
    char amz_date[17];
    char **headers = NULL;
    int r;

    if (c->state != CALL_CRED)
        return;
    if (status == TM_ECANCELED || ec2->closing) {
        deliver(c, TM_ECANCELED, NULL);
        return;
    }
    if (status < 0) {
        snprintf(c->last.error_message, sizeof(c->last.error_message), "%s",
                 error ? error : tm_strerror(status));
        tm_log_error("could not get aws credentials", "action=%s error=\"%s\"",
                     tm_ec2_action_name(c->action), c->last.error_message);
        /* No usable credentials is the controller's "stop calling" too;
         * an unreachable IMDS is worth another try. */
        if (status == TM_EUNAVAIL || status == -ETIMEDOUT || status == -ECONNREFUSED)
            retry_or_deliver(c, status);
        else
            deliver(c, TM_EAUTH, NULL);
        return;
    }
    if (cred->expires_ms > 0 && cred->expires_ms <= (int64_t)time(NULL) * 1000) {
        snprintf(c->last.error_code, sizeof(c->last.error_code), "ExpiredToken");
        snprintf(c->last.error_message, sizeof(c->last.error_message),
                 "the %s credentials have expired", cred->source);
        deliver(c, TM_EAUTH, NULL);
        return;
    }
    fingerprint(cred, c->fp);
    if (ec2->gate.closed) {
        if (memcmp(c->fp, ec2->blocked_fp, sizeof(c->fp)) != 0) {
            tm_auth_gate_open(&ec2->gate);
            tm_log_info("aws credentials changed, calling aws again", "provider=aws source=%s",
                        cred->source);
        } else if (!tm_auth_gate_pass(&ec2->gate, uv_now(ec2->loop))) {
            ec2->stats.auth_refusals++;
            snprintf(c->last.error_code, sizeof(c->last.error_code), "AuthFailure");
            snprintf(c->last.error_message, sizeof(c->last.error_message),
                     "not calling aws: credentials were refused and have not changed");
            deliver(c, TM_EAUTH, NULL);
            return;
        }
        /* else the cool-down is over: this call probes, the others wait */
    }
    tm_sigv4_format_date((int64_t)time(NULL) * 1000, amz_date);
    r = tm_sigv4_sign_ec2_post(ec2->endpoint, ec2->region, c->body, c->body_len, amz_date, cred,
                               &headers);
    if (r < 0) {
        snprintf(c->last.error_message, sizeof(c->last.error_message),
                 "could not sign the request: %s", tm_strerror(r));
        deliver(c, r, NULL);
        return;
    }
    if (ec2->corrupt_signature)
        corrupt(headers);
    req.method = "POST";
    req.url = ec2->endpoint;
    req.headers = (const char *const *)headers;
    req.body = c->body;
    req.body_len = c->body_len;
    req.timeout_ms = ec2->timeout_ms;
    c->attempts++;
    ec2->stats.requests++;
    if (c->attempts > 1)
        ec2->stats.retries++;
    set_state(c, CALL_HTTP);
    r = tm_http_request(ec2->http, &req, on_http, c);
    tm_sigv4_headers_free(headers);
    if (r < 0) {
        set_state(c, CALL_CRED);
        deliver(c, r, NULL);
    }
}

static void start_attempt(struct ec2_call *c)
{
    int r;

    set_state(c, CALL_CRED);
    r = tm_aws_credential_provider_get(c->ec2->creds, on_creds, c);
    if (r < 0) {
        snprintf(c->last.error_message, sizeof(c->last.error_message),
                 "could not ask for credentials: %s", tm_strerror(r));
        /* Never inside tm_ec2_call(): the first attempt starts from there,
         * so report through the timer. */
        c->fail_status = r;
        set_state(c, CALL_BACKOFF);
        uv_timer_start(&c->timer, on_backoff, 0, 0);
    }
}

int tm_ec2_call(struct tm_ec2 *ec2, enum tm_ec2_action action, char *body, unsigned flags,
                tm_ec2_cb cb, void *data)
{
    struct ec2_call *c;

    if (!ec2 || !cb || !body || (unsigned)action >= TM_EC2_ACTION_MAX) {
        free(body);
        return TM_EINVAL;
    }
    if (ec2->closing) {
        free(body);
        return TM_ECANCELED;
    }
    c = calloc(1, sizeof(*c));
    if (!c) {
        free(body);
        return TM_ENOMEM;
    }
    uv_timer_init(ec2->loop, &c->timer);
    c->ec2 = ec2;
    c->action = action;
    c->flags = flags;
    c->body = body;
    c->body_len = strlen(body);
    c->cb = cb;
    c->data = data;
    c->state = CALL_CRED;
    c->next = ec2->calls;
    c->pprev = &ec2->calls;
    if (ec2->calls)
        ec2->calls->pprev = &c->next;
    ec2->calls = c;
    ec2->stats.calls++;
    start_attempt(c);
    return 0;
}

void tm_ec2_get_stats(const struct tm_ec2 *ec2, struct tm_ec2_stats *ret_stats)
{
    *ret_stats = ec2->stats;
}

bool tm_ec2_auth_blocked(const struct tm_ec2 *ec2)
{
    return ec2->gate.closed;
}

int tm_ec2_create(uv_loop_t *loop, const struct tm_ec2_options *opts, struct tm_ec2 **ret_ec2)
{
    struct tm_ec2 *ec2;
    int r;

    if (!loop || !opts || !opts->endpoint || !opts->region || !ret_ec2)
        return TM_EINVAL;
    ec2 = calloc(1, sizeof(*ec2));
    if (!ec2)
        return TM_ENOMEM;
    ec2->loop = loop;
    ec2->endpoint = strdup(opts->endpoint);
    ec2->region = strdup(opts->region);
    if (!ec2->endpoint || !ec2->region) {
        r = TM_ENOMEM;
        goto fail;
    }
    ec2->retry = opts->retry;
    ec2->timeout_ms = opts->timeout_ms ? opts->timeout_ms : 30000;
    ec2->gate.cooldown_ms = opts->auth_cooldown_ms ? opts->auth_cooldown_ms : 5 * 60 * 1000;
    ec2->corrupt_signature = opts->test_corrupt_signature;
    ec2->rng = opts->seed ? opts->seed : uv_hrtime() | 1;
    r = tm_http_create(loop, &ec2->http);
    if (r < 0)
        goto fail;
    r = tm_aws_credential_provider_create(loop, ec2->http, &opts->cred, &ec2->creds);
    if (r < 0) {
        tm_http_close(ec2->http, NULL, NULL);
        goto fail;
    }
    uv_timer_init(loop, &ec2->close_timer);
    *ret_ec2 = ec2;
    return 0;
fail:
    free(ec2->endpoint);
    free(ec2->region);
    free(ec2);
    return r;
}

/* ---- closing ------------------------------------------------------------ */

static void on_close_timer_closed(uv_handle_t *h)
{
    struct tm_ec2 *ec2 = h->data;
    void (*done)(void *data) = ec2->close_done;
    void *data = ec2->close_data;

    free(ec2->endpoint);
    free(ec2->region);
    free(ec2);
    if (done)
        done(data);
}

static void maybe_finish(struct tm_ec2 *ec2)
{
    if (!ec2->creds_closed || !ec2->http_closed)
        return;
    ec2->close_timer.data = ec2;
    uv_close((uv_handle_t *)&ec2->close_timer, on_close_timer_closed);
}

static void on_http_closed(void *data)
{
    struct tm_ec2 *ec2 = data;

    ec2->http_closed = true;
    maybe_finish(ec2);
}

static void on_creds_closed(void *data)
{
    struct tm_ec2 *ec2 = data;

    ec2->creds_closed = true;
    /* The credential provider is done with tm_http: close it now. */
    tm_http_close(ec2->http, on_http_closed, ec2);
}

/* From the loop: cancel sleeping calls; the credential provider and tm_http
 * cancel the ones waiting on them, through our callbacks. */
static void on_close_timer(uv_timer_t *t)
{
    struct tm_ec2 *ec2 = t->data;
    struct ec2_call *c = ec2->calls;

    while (c) {
        struct ec2_call *next = c->next;

        if (c->state == CALL_BACKOFF)
            deliver(c, TM_ECANCELED, NULL);
        c = next;
    }
    tm_aws_credential_provider_close(ec2->creds, on_creds_closed, ec2);
}

void tm_ec2_close(struct tm_ec2 *ec2, void (*done)(void *data), void *data)
{
    if (!ec2 || ec2->closing)
        return;
    ec2->closing = true;
    ec2->close_done = done;
    ec2->close_data = data;
    ec2->close_timer.data = ec2;
    uv_timer_start(&ec2->close_timer, on_close_timer, 0, 0);
}
