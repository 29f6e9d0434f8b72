/*
 * providers/azure/arm_client.c: ARM calls on the libuv loop (see arm.h).
 *
 * A call goes through these states:
 *
 *   TOKEN    waiting for a bearer token (one fetch serves every waiter)
 *   HTTP     a request is in flight
 *   WAIT     sleeping on the call's timer: a backoff, a Retry-After, or the
 *            interval between two polls of an async operation
 *   DONE     the callback fired; the timer closes, then the call is freed
 *
 * Tokens: client credentials against the identity platform (the token
 * endpoint discovered from {authority}/{tenant}/v2.0/.well-known/
 * openid-configuration, once), proven by the client secret or by a client
 * assertion signed with the certificate's key (a new one, with a new jti,
 * for each fetch: its aud is the discovered token endpoint), or the
 * managed identity endpoint of the instance metadata service.  The token
 * is cached and fetched again when less than min(5 min, half its
 * lifetime) is left, so a call never carries one that expires in flight.
 * Every token and the client secret are registered with
 * tm_log_add_secret(), so no log line can show them; so is the client's
 * copy of the certificate's private key.
 *
 * The auth gate: a 401 is retried once with a fresh token; a second 401, a
 * 403, or a token endpoint refusing the client closes the gate for
 * auth_cooldown_ms, and calls fail with TM_EAUTH without a request.
 */
#include "providers/azure/arm.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include <openssl/crypto.h>

#include "controller/io/http_uv.h"
#include "core/client_cert.h"
#include "core/err.h"
#include "core/log.h"
#include "providers/common/retry.h"

enum call_state { CALL_TOKEN, CALL_HTTP, CALL_WAIT, CALL_DONE };
enum call_phase { PHASE_MAIN, PHASE_POLL, PHASE_FINAL_GET };

struct arm_call {
    uv_timer_t timer;             /* first: the handle's memory is the call's */
    struct arm_call *next, **pprev;
    struct tm_arm *arm;
    enum tm_arm_call call;
    enum call_state state;
    enum call_phase phase;
    char method[8];
    char *url;
    char *body;
    unsigned flags;
    tm_arm_cb cb;
    void *data;
    unsigned attempts;
    unsigned auth_retries;
    uint64_t delay_ms;
    uint64_t poll_started;
    bool poll_location;           /* polling Location (202 until done), not AsyncOperation */
    char *poll_url;
    int fail_status;
    struct tm_arm_reply last;
    char *last_body;
};

enum token_state { TOKEN_NONE, TOKEN_DISCOVERY, TOKEN_FETCH };

struct tm_arm {
    uv_loop_t *loop;
    struct tm_http *http;
    char *endpoint, *authority, *imds, *tenant, *client_id, *client_secret, *ca_file;
    char *cert_key_pem;           /* TM_ARM_AUTH_CERTIFICATE: a log secret */
    unsigned char cert_sha1[20], cert_sha256[32];
    enum tm_arm_auth_mode auth;
    struct tm_arm_retry retry;
    long timeout_ms;
    uint64_t poll_ms, poll_budget_ms;
    uint64_t rng;
    struct arm_call *calls;
    struct tm_arm_stats stats;
    /* the token */
    char token_endpoint[TM_ARM_URL_MAX];
    char *token;
    uint64_t token_got, token_expires; /* uv_now() ms */
    enum token_state token_state;
    /* the auth gate */
    struct tm_auth_gate gate;     /* on uv_now() */
    bool closing;
    void (*close_done)(void *data);
    void *close_data;
};

static void call_send(struct arm_call *c);
static void token_need(struct tm_arm *arm);

/* ---- helpers ------------------------------------------------------------ */

uint64_t tm_arm_backoff_ms(const struct tm_arm_retry *retry, unsigned n, uint64_t *state)
{
    return tm_retry_backoff_ms(retry->base_delay_ms ? retry->base_delay_ms : 200,
                               retry->max_delay_ms ? retry->max_delay_ms : 5000, n, state);
}

uint64_t tm_arm_retry_after_ms(const char *value, int64_t now_s)
{
    return tm_retry_after_ms(value, now_s);
}

/* Refresh when less than min(5 min, half the lifetime) is left. */
static bool token_fresh(const struct tm_arm *arm, uint64_t now)
{
    uint64_t life, margin;

    if (!arm->token || now >= arm->token_expires)
        return false;
    life = arm->token_expires - arm->token_got;
    margin = life / 2 < 300000 ? life / 2 : 300000;
    return arm->token_expires - now > margin;
}

int tm_arm_vms_path(const char *subscription, const char *group, char *buf, size_t size)
{
    int n = snprintf(buf, size,
                     "/subscriptions/%s/resourceGroups/%s/providers/Microsoft.Compute/"
                     "virtualMachines", subscription, group);

    return n < 0 || (size_t)n >= size ? TM_EINVAL : 0;
}

void tm_arm_get_stats(const struct tm_arm *arm, struct tm_arm_stats *ret) { *ret = arm->stats; }

bool tm_arm_auth_blocked(const struct tm_arm *arm)
{
    return tm_auth_gate_holds(&arm->gate, uv_now(arm->loop));
}

const char *tm_arm_endpoint(const struct tm_arm *arm) { return arm->endpoint; }

static void gate_close(struct tm_arm *arm, const char *why)
{
    if (!tm_arm_auth_blocked(arm))
        tm_log_error("azure refused our credentials; no more calls until the cool-down ends",
                     "reason=\"%s\" cooldown_s=%llu", why,
                     (unsigned long long)(arm->gate.cooldown_ms / 1000));
    tm_auth_gate_close(&arm->gate, uv_now(arm->loop));
}

/* ---- delivering --------------------------------------------------------- */

static void on_timer_closed(uv_handle_t *h)
{
    struct arm_call *c = (struct arm_call *)h;

    free(c->url);
    free(c->body);
    free(c->poll_url);
    free(c->last_body);
    free(c);
}

static void call_unlink(struct arm_call *c)
{
    if (!c->pprev)
        return;
    *c->pprev = c->next;
    if (c->next)
        c->next->pprev = c->pprev;
    c->next = NULL;
    c->pprev = NULL;
}

static void deliver(struct arm_call *c, int status, long http_status, const char *body,
                    size_t len)
{
    struct tm_arm_reply reply = c->last;

    c->state = CALL_DONE;
    call_unlink(c);
    uv_timer_stop(&c->timer);
    reply.call = c->call;
    reply.attempts = c->attempts;
    reply.http_status = http_status;
    reply.body = status == 0 ? body : NULL;
    reply.body_len = status == 0 ? len : 0;
    if (status == 0) {
        reply.error_code[0] = '\0';
        reply.error_message[0] = '\0';
    }
    c->cb(status, &reply, c->data);
    uv_close((uv_handle_t *)&c->timer, on_timer_closed);
}

static void on_wait_done(uv_timer_t *t)
{
    struct arm_call *c = (struct arm_call *)t;

    if (c->fail_status) {
        deliver(c, c->fail_status, 0, NULL, 0);
        return;
    }
    call_send(c);
}

static void wait_then(struct arm_call *c, uint64_t ms)
{
    c->state = CALL_WAIT;
    uv_timer_start(&c->timer, on_wait_done, ms, 0);
}

/* A failed attempt: sleep and try again while the budget allows, else
 * deliver status.  after_ms: the server's Retry-After (0: our backoff). */
static void retry_or_fail(struct arm_call *c, int status, long http_status, uint64_t after_ms)
{
    struct tm_arm *arm = c->arm;
    struct tm_retry_budget b = {
        .max_attempts = arm->retry.max_attempts ? arm->retry.max_attempts : 5,
        .max_total_delay_ms = arm->retry.max_total_delay_ms ? arm->retry.max_total_delay_ms : 30000,
    };
    uint64_t d;

    if (!tm_retry_next(&b, c->attempts, c->delay_ms, after_ms,
                       after_ms ? 0 : tm_arm_backoff_ms(&arm->retry, c->attempts, &arm->rng), &d)) {
        deliver(c, status, http_status, NULL, 0);
        return;
    }
    c->delay_ms += d;
    arm->stats.retries++;
    arm->stats.delay_ms += d;
    tm_log_debug("azure call retried", "call=%s attempt=%u status=%ld err=%s delay_ms=%llu",
                 tm_arm_call_name(c->call), c->attempts, http_status, tm_err_name(status),
                 (unsigned long long)d);
    wait_then(c, d);
}

/* ---- tokens ------------------------------------------------------------- */

/* Every call waiting for the token goes on, or fails with status; code and
 * msg (may be NULL) are the identity platform's error ("invalid_client",
 * "AADSTS700027: ..."), which names no secret, so the caller can say why. */
static void token_waiters_why(struct tm_arm *arm, int status, const char *code, const char *msg)
{
    struct arm_call *c = arm->calls, *next;

    for (; c; c = next) {
        next = c->next;
        if (c->state != CALL_TOKEN)
            continue;
        if (status < 0) {
            snprintf(c->last.error_code, sizeof(c->last.error_code), "%s", code ? code : "");
            snprintf(c->last.error_message, sizeof(c->last.error_message), "%s", msg ? msg : "");
            tm_log_redact(c->last.error_message, sizeof(c->last.error_message));
            deliver(c, status, 0, NULL, 0);
        } else {
            call_send(c);
        }
    }
}

static void token_waiters(struct tm_arm *arm, int status)
{
    token_waiters_why(arm, status, NULL, NULL);
}

static void token_failed(struct tm_arm *arm, const struct tm_http_response *resp, int status,
                         const char *what)
{
    char code[TM_ID_MAX] = "", msg[256] = "";

    arm->token_state = TOKEN_NONE;
    if (resp && resp->http_status) {
        tm_arm_parse_error(resp->body, resp->body_len, code, sizeof(code), msg, sizeof(msg));
        status = resp->http_status >= 500 ? TM_EUNAVAIL
                 : resp->http_status == 429 ? TM_ETHROTTLED
                                            : TM_EAUTH;
        if (status == TM_EAUTH) {
            char why[160];

            snprintf(why, sizeof(why), "%s answered %ld %s", what, resp->http_status,
                     code[0] ? code : "");
            gate_close(arm, why);
        }
    }
    tm_log_warn("could not get an azure token",
                "step=\"%s\" http=%ld err=%s code=%s detail=\"%.160s\"", what, resp ? resp->http_status : 0L, tm_err_name(status), code[0] ? code : "-",
                msg);
    token_waiters_why(arm, status, code, msg);
}

static void on_token(const struct tm_http_response *resp, void *data)
{
    struct tm_arm *arm = data;
    char err[256] = "";
    char *tok = NULL;
    int64_t exp = 0;
    int r;

    if (resp->status == TM_ECANCELED || arm->closing) {
        arm->token_state = TOKEN_NONE;
        token_waiters(arm, TM_ECANCELED);
        return;
    }
    if (resp->status < 0) {
        token_failed(arm, NULL, resp->status, "token request");
        return;
    }
    if (resp->http_status != 200) {
        token_failed(arm, resp, TM_EAUTH, "token endpoint");
        return;
    }
    r = tm_arm_parse_token(resp->body, resp->body_len, &tok, &exp, err, sizeof(err));
    if (r < 0) {
        tm_log_warn("azure token answer unreadable", "error=\"%s\"", err);
        token_failed(arm, NULL, r, "token answer");
        return;
    }
    if (arm->token) {
        tm_log_remove_secret(arm->token);
        OPENSSL_cleanse(arm->token, strlen(arm->token));
        free(arm->token);
    }
    arm->token = tok;
    tm_log_add_secret(tok);
    arm->token_got = uv_now(arm->loop);
    arm->token_expires = arm->token_got + (uint64_t)exp * 1000;
    arm->token_state = TOKEN_NONE;
    arm->stats.tokens_fetched++;
    tm_log_info("azure token obtained", "via=%s expires_in_s=%lld", tm_arm_auth_name(arm->auth),
                (long long)exp);
    token_waiters(arm, 0);
}

/* A fresh assertion for this fetch, its audience the token endpoint the
 * form is posted to, and the form around it. */
static int assertion_form(struct tm_arm *arm, char **ret_body)
{
    char jti[37];
    char *jwt = NULL;
    struct tm_arm_assertion a = {
        .client_id = arm->client_id, .audience = arm->token_endpoint, .jti = jti,
        .now = (int64_t)time(NULL), .sha1 = arm->cert_sha1, .sha256 = arm->cert_sha256,
        .key_pem = arm->cert_key_pem,
    };
    int r = tm_arm_new_jti(jti);

    if (r == 0)
        r = tm_arm_build_assertion(&a, &jwt);
    if (r == 0) {
        r = tm_arm_build_assertion_form(arm->client_id, jwt, TM_ARM_SCOPE, ret_body);
        OPENSSL_clear_free(jwt, strlen(jwt));
    }
    if (r < 0)
        tm_log_error("could not sign the azure client assertion", "err=%s", tm_err_name(r));
    return r;
}

static void token_fetch(struct tm_arm *arm)
{
    struct tm_http_request req = {0};
    char url[TM_ARM_URL_MAX];
    const char *form_headers[] = {"Content-Type: application/x-www-form-urlencoded",
                                  "Accept: application/json", NULL};
    const char *imds_headers[] = {"Metadata: true", NULL};
    char *body = NULL;
    int r;

    arm->token_state = TOKEN_FETCH;
    req.timeout_ms = arm->timeout_ms;
    req.ca_file = arm->ca_file;
    if (arm->auth == TM_ARM_AUTH_MANAGED_IDENTITY) {
        char cid[TM_ID_MAX + 16] = "";

        if (arm->client_id && *arm->client_id)
            snprintf(cid, sizeof(cid), "&client_id=%s", arm->client_id);
        snprintf(url, sizeof(url), "%s/metadata/identity/oauth2/token?api-version=2018-02-01"
                 "&resource=https%%3A%%2F%%2Fmanagement.azure.com%%2F%s", arm->imds, cid);
        req.method = "GET";
        req.url = url;
        req.headers = imds_headers;
    } else {
        r = arm->auth == TM_ARM_AUTH_CERTIFICATE
                ? assertion_form(arm, &body)
                : tm_arm_build_token_form(arm->client_id, arm->client_secret, TM_ARM_SCOPE, &body);
        if (r < 0) {
            arm->token_state = TOKEN_NONE;
            token_waiters(arm, r == TM_EINVAL ? TM_EAUTH : r);
            return;
        }
        req.method = "POST";
        req.url = arm->token_endpoint;
        req.headers = form_headers;
        req.body = body;
        req.body_len = strlen(body);
    }
    r = tm_http_request(arm->http, &req, on_token, arm);
    if (body) {
        OPENSSL_cleanse(body, strlen(body));
        free(body);
    }
    if (r < 0) {
        arm->token_state = TOKEN_NONE;
        token_waiters(arm, r);
    }
}

static void on_discovery(const struct tm_http_response *resp, void *data)
{
    struct tm_arm *arm = data;
    char err[256] = "";

    if (resp->status == TM_ECANCELED || arm->closing) {
        arm->token_state = TOKEN_NONE;
        token_waiters(arm, TM_ECANCELED);
        return;
    }
    if (resp->status < 0 || resp->http_status != 200) {
        /* An unknown tenant is a 400 here: credentials, not a transient. */
        if (resp->status < 0)
            token_failed(arm, NULL, resp->status, "OpenID discovery");
        else
            token_failed(arm, resp, TM_EAUTH, "OpenID discovery");
        return;
    }
    if (tm_arm_parse_openid(resp->body, resp->body_len, arm->token_endpoint,
                            sizeof(arm->token_endpoint), err, sizeof(err)) < 0) {
        tm_log_warn("azure OpenID configuration unreadable", "error=\"%s\"", err);
        token_failed(arm, NULL, TM_EBADREPLY, "OpenID discovery");
        return;
    }
    token_fetch(arm);
}

static void token_need(struct tm_arm *arm)
{
    struct tm_http_request req = {0};
    char url[TM_ARM_URL_MAX];
    int r;

    if (arm->token_state != TOKEN_NONE)
        return;
    if (arm->auth == TM_ARM_AUTH_MANAGED_IDENTITY || arm->token_endpoint[0]) {
        token_fetch(arm);
        return;
    }
    snprintf(url, sizeof(url), "%s/%s/v2.0/.well-known/openid-configuration", arm->authority,
             arm->tenant);
    req.method = "GET";
    req.url = url;
    req.timeout_ms = arm->timeout_ms;
    req.ca_file = arm->ca_file;
    arm->token_state = TOKEN_DISCOVERY;
    r = tm_http_request(arm->http, &req, on_discovery, arm);
    if (r < 0) {
        arm->token_state = TOKEN_NONE;
        token_waiters(arm, r);
    }
}

/* ---- requests ----------------------------------------------------------- */

static bool under_endpoint(const struct tm_arm *arm, const char *url)
{
    size_t n = strlen(arm->endpoint);

    return strncmp(url, arm->endpoint, n) == 0 && (url[n] == '/' || url[n] == '\0');
}

static void remember_error(struct arm_call *c, const struct tm_http_response *resp)
{
    c->last.error_code[0] = '\0';
    c->last.error_message[0] = '\0';
    if (resp->body && resp->body_len)
        tm_arm_parse_error(resp->body, resp->body_len, c->last.error_code,
                           sizeof(c->last.error_code), c->last.error_message,
                           sizeof(c->last.error_message));
}

static void start_poll(struct arm_call *c, const struct tm_http_response *resp)
{
    const char *url = resp->async_operation ? resp->async_operation : resp->location;
    uint64_t after = tm_arm_retry_after_ms(resp->retry_after, (int64_t)time(NULL));

    free(c->poll_url);
    c->poll_url = strdup(url);
    if (!c->poll_url) {
        deliver(c, TM_ENOMEM, 0, NULL, 0);
        return;
    }
    c->poll_location = resp->async_operation == NULL;
    c->phase = PHASE_POLL;
    c->poll_started = uv_now(c->arm->loop);
    c->attempts = 0;
    c->delay_ms = 0;
    wait_then(c, after ? after : c->arm->poll_ms);
}

static void on_response(const struct tm_http_response *resp, void *data)
{
    struct arm_call *c = data;
    struct tm_arm *arm = c->arm;
    long hs = resp->http_status;
    int status;

    if (resp->status == TM_ECANCELED || arm->closing) {
        deliver(c, TM_ECANCELED, 0, NULL, 0);
        return;
    }
    if (resp->status < 0) {
        /* Reset, timeout, refused: the request may have been carried out;
         * every ARM call tarmac makes is idempotent when flagged so. */
        if (c->phase != PHASE_MAIN || (c->flags & TM_ARM_RETRY_AMBIGUOUS))
            retry_or_fail(c, resp->status, 0, 0);
        else
            deliver(c, resp->status, 0, NULL, 0);
        return;
    }
    if (hs == 401 && c->auth_retries == 0) {
        /* The token may have been revoked or expired early: one fresh try. */
        c->auth_retries++;
        if (arm->token) {
            tm_log_remove_secret(arm->token);
            free(arm->token);
            arm->token = NULL;
        }
        call_send(c);
        return;
    }
    if (hs == 401 || hs == 403) {
        char why[160];

        remember_error(c, resp);
        snprintf(why, sizeof(why), "%s answered %ld %s", tm_arm_call_name(c->call), hs,
                 c->last.error_code);
        gate_close(arm, why);
        deliver(c, TM_EAUTH, hs, NULL, 0);
        return;
    }
    if (hs == 429 || hs >= 500) {
        remember_error(c, resp);
        status = tm_arm_error_map(c->last.error_code, hs);
        if (status == TM_EQUOTA || status == TM_EINVAL) /* a 5xx that names a reason */
            status = hs == 429 ? TM_ETHROTTLED : TM_EUNAVAIL;
        retry_or_fail(c, status, hs,
                      hs == 429 ? tm_arm_retry_after_ms(resp->retry_after, (int64_t)time(NULL))
                                : 0);
        return;
    }
    if (c->phase == PHASE_POLL) {
        enum tm_arm_op_status st = TM_ARM_OP_IN_PROGRESS;
        char err[256] = "";
        uint64_t after = tm_arm_retry_after_ms(resp->retry_after, (int64_t)time(NULL));

        arm->stats.polls++;
        if (c->poll_location) {
            /* Location: 202 while running; 200/204 when done. */
            if (hs == 202) {
                st = TM_ARM_OP_IN_PROGRESS;
            } else if (hs >= 200 && hs < 300) {
                st = TM_ARM_OP_SUCCEEDED;
            } else {
                remember_error(c, resp);
                deliver(c, tm_arm_error_map(c->last.error_code, hs), hs, NULL, 0);
                return;
            }
        } else if (hs != 200 || tm_arm_parse_operation(resp->body, resp->body_len, &st,
                                                       c->last.error_code,
                                                       sizeof(c->last.error_code),
                                                       c->last.error_message,
                                                       sizeof(c->last.error_message), err,
                                                       sizeof(err)) < 0) {
            if (hs != 200)
                remember_error(c, resp);
            else
                tm_log_warn("azure operation status unreadable", "call=%s error=\"%s\"",
                            tm_arm_call_name(c->call), err);
            deliver(c, hs != 200 ? tm_arm_error_map(c->last.error_code, hs) : TM_EBADREPLY,
                    hs, NULL, 0);
            return;
        }
        if (st == TM_ARM_OP_IN_PROGRESS) {
            if (uv_now(arm->loop) - c->poll_started > arm->poll_budget_ms) {
                deliver(c, -ETIMEDOUT, hs, NULL, 0);
                return;
            }
            c->attempts = 0;
            wait_then(c, after ? after : arm->poll_ms);
            return;
        }
        if (st != TM_ARM_OP_SUCCEEDED) {
            status = tm_arm_error_map(c->last.error_code, 0);
            /* A failed operation without a known reason is the cloud's failure. */
            deliver(c, status == TM_EINVAL && !c->last.error_code[0] ? TM_EUNAVAIL : status,
                    hs, NULL, 0);
            return;
        }
        if (strcmp(c->method, "DELETE") == 0) {
            deliver(c, 0, hs, "", 0);
            return;
        }
        /* PUT: read the resource as it is now. */
        c->phase = PHASE_FINAL_GET;
        c->attempts = 0;
        c->delay_ms = 0;
        call_send(c);
        return;
    }
    if (hs < 200 || hs >= 300) {
        remember_error(c, resp);
        deliver(c, tm_arm_error_map(c->last.error_code, hs), hs, NULL, 0);
        return;
    }
    if (c->phase == PHASE_MAIN && (c->flags & TM_ARM_FOLLOW_ASYNC) && (hs == 201 || hs == 202) &&
        (resp->async_operation || resp->location)) {
        const char *u = resp->async_operation ? resp->async_operation : resp->location;

        if (!under_endpoint(arm, u)) {
            /* Never send our token anywhere but the configured endpoint. */
            tm_log_warn("azure operation URL outside the endpoint, not followed",
                        "call=%s", tm_arm_call_name(c->call));
            deliver(c, TM_EBADREPLY, hs, NULL, 0);
            return;
        }
        start_poll(c, resp);
        return;
    }
    deliver(c, 0, hs, resp->body ? resp->body : "", resp->body_len);
}

static void call_send(struct arm_call *c)
{
    struct tm_arm *arm = c->arm;
    struct tm_http_request req = {0};
    char auth[16400];
    const char *headers[4];
    int r;

    if (tm_arm_auth_blocked(arm)) {
        arm->stats.auth_refusals++;
        deliver(c, TM_EAUTH, 0, NULL, 0);
        return;
    }
    if (!token_fresh(arm, uv_now(arm->loop))) {
        c->state = CALL_TOKEN;
        token_need(arm);
        return;
    }
    snprintf(auth, sizeof(auth), "Authorization: Bearer %s", arm->token);
    headers[0] = auth;
    headers[1] = "Accept: application/json";
    headers[2] = "Content-Type: application/json";
    headers[3] = NULL;
    req.headers = headers;
    req.timeout_ms = arm->timeout_ms;
    req.ca_file = arm->ca_file;
    if (c->phase == PHASE_POLL) {
        req.method = "GET";
        req.url = c->poll_url;
    } else if (c->phase == PHASE_FINAL_GET) {
        req.method = "GET";
        req.url = c->url;
    } else {
        req.method = c->method;
        req.url = c->url;
        req.body = c->body;
        req.body_len = c->body ? strlen(c->body) : 0;
    }
    c->attempts++;
    arm->stats.requests++;
    c->state = CALL_HTTP;
    r = tm_http_request(arm->http, &req, on_response, c);
    OPENSSL_cleanse(auth, sizeof(auth));
    if (r < 0) {
        /* Never call back from inside tm_arm_call(): let the timer do it. */
        c->fail_status = r;
        wait_then(c, 0);
    }
}

int tm_arm_call(struct tm_arm *arm, enum tm_arm_call call, const char *method, const char *path,
                const char *body, unsigned flags, tm_arm_cb cb, void *data)
{
    struct arm_call *c;
    size_t n;

    if (!arm || !method || !path || !cb || strlen(method) >= 8)
        return TM_EINVAL;
    if (arm->closing)
        return TM_ECANCELED;
    if (strncmp(path, "http://", 7) == 0 || strncmp(path, "https://", 8) == 0) {
        if (!under_endpoint(arm, path))
            return TM_EINVAL; /* a nextLink elsewhere: never send the token there */
    }
    c = calloc(1, sizeof(*c));
    if (!c)
        return TM_ENOMEM;
    n = strlen(arm->endpoint) + strlen(path) + 1;
    c->url = malloc(n);
    c->body = body ? strdup(body) : NULL;
    if (!c->url || (body && !c->body)) {
        free(c->url);
        free(c->body);
        free(c);
        return TM_ENOMEM;
    }
    if (path[0] == '/')
        snprintf(c->url, n, "%s%s", arm->endpoint, path);
    else
        snprintf(c->url, n, "%s", path);
    snprintf(c->method, sizeof(c->method), "%s", method);
    c->arm = arm;
    c->call = call;
    c->flags = flags;
    c->cb = cb;
    c->data = data;
    uv_timer_init(arm->loop, &c->timer);
    c->next = arm->calls;
    if (arm->calls)
        arm->calls->pprev = &c->next;
    arm->calls = c;
    c->pprev = &arm->calls;
    arm->stats.calls++;
    /* Start from the loop, so the callback can never fire inside this call. */
    wait_then(c, 0);
    return 0;
}

/* ---- create / close ----------------------------------------------------- */

static char *dup_or(const char *s, const char *dflt)
{
    const char *v = s && *s ? s : dflt;
    char *d;
    size_t n;

    if (!v)
        return NULL;
    d = strdup(v);
    /* No trailing slash: paths are appended with their own. */
    n = d ? strlen(d) : 0;
    while (n > 1 && d[n - 1] == '/')
        d[--n] = '\0';
    return d;
}

static void arm_free(struct tm_arm *arm)
{
    if (arm->client_secret) {
        tm_log_remove_secret(arm->client_secret);
        OPENSSL_cleanse(arm->client_secret, strlen(arm->client_secret));
    }
    if (arm->token) {
        tm_log_remove_secret(arm->token);
        OPENSSL_cleanse(arm->token, strlen(arm->token));
    }
    if (arm->cert_key_pem) {
        tm_log_remove_secret(arm->cert_key_pem);
        OPENSSL_clear_free(arm->cert_key_pem, strlen(arm->cert_key_pem));
    }
    free(arm->token);
    free(arm->endpoint);
    free(arm->authority);
    free(arm->imds);
    free(arm->tenant);
    free(arm->client_id);
    free(arm->client_secret);
    free(arm->ca_file);
    free(arm);
}

int tm_arm_create(uv_loop_t *loop, const struct tm_arm_options *opts, struct tm_arm **ret)
{
    struct tm_arm *arm;
    int r;

    if (!loop || !opts || !ret)
        return TM_EINVAL;
    if (opts->auth != TM_ARM_AUTH_MANAGED_IDENTITY &&
        (!opts->tenant || !*opts->tenant || !opts->client_id || !*opts->client_id))
        return TM_EINVAL;
    if (opts->auth == TM_ARM_AUTH_CERTIFICATE &&
        (!opts->client_cert || !opts->client_cert->key_pem))
        return TM_EINVAL;
    arm = calloc(1, sizeof(*arm));
    if (!arm)
        return TM_ENOMEM;
    arm->loop = loop;
    arm->auth = opts->auth;
    arm->endpoint = dup_or(opts->endpoint, TM_ARM_DEFAULT_ENDPOINT);
    arm->authority = dup_or(opts->authority, TM_ARM_DEFAULT_AUTHORITY);
    arm->imds = dup_or(opts->imds, TM_ARM_DEFAULT_IMDS);
    arm->tenant = dup_or(opts->tenant, "");
    arm->client_id = dup_or(opts->client_id, "");
    arm->client_secret = dup_or(opts->client_secret, "");
    arm->ca_file = opts->ca_file && *opts->ca_file ? strdup(opts->ca_file) : NULL;
    if (!arm->endpoint || !arm->authority || !arm->imds || !arm->tenant || !arm->client_id ||
        !arm->client_secret || (opts->ca_file && *opts->ca_file && !arm->ca_file)) {
        arm_free(arm);
        return TM_ENOMEM;
    }
    if (*arm->client_secret)
        tm_log_add_secret(arm->client_secret);
    if (arm->auth == TM_ARM_AUTH_CERTIFICATE) {
        arm->cert_key_pem = strdup(opts->client_cert->key_pem);
        if (!arm->cert_key_pem) {
            arm_free(arm);
            return TM_ENOMEM;
        }
        tm_log_add_secret(arm->cert_key_pem);
        memcpy(arm->cert_sha1, opts->client_cert->sha1, sizeof(arm->cert_sha1));
        memcpy(arm->cert_sha256, opts->client_cert->sha256, sizeof(arm->cert_sha256));
    }
    arm->retry = opts->retry;
    arm->timeout_ms = opts->timeout_ms ? opts->timeout_ms : 30000;
    arm->gate.cooldown_ms = opts->auth_cooldown_ms ? opts->auth_cooldown_ms : 5 * 60 * 1000;
    arm->poll_ms = opts->poll_ms ? opts->poll_ms : 2000;
    arm->poll_budget_ms = opts->poll_budget_ms ? opts->poll_budget_ms : 15 * 60 * 1000;
    arm->rng = opts->seed ? opts->seed : (uint64_t)time(NULL) ^ (uint64_t)(uintptr_t)arm;
    r = tm_http_create(loop, &arm->http);
    if (r < 0) {
        arm_free(arm);
        return r;
    }
    *ret = arm;
    return 0;
}

static void on_http_closed(void *data)
{
    struct tm_arm *arm = data;
    void (*done)(void *) = arm->close_done;
    void *dd = arm->close_data;

    arm_free(arm);
    if (done)
        done(dd);
}

void tm_arm_close(struct tm_arm *arm, void (*done)(void *data), void *data)
{
    struct arm_call *c, *next;

    if (!arm || arm->closing)
        return;
    arm->closing = true;
    arm->close_done = done;
    arm->close_data = data;
    /* Calls sleeping or waiting for a token end now; those in HTTP end when
     * tm_http_close() cancels their transfer (TM_ECANCELED). */
    for (c = arm->calls; c; c = next) {
        next = c->next;
        if (c->state == CALL_WAIT || c->state == CALL_TOKEN)
            deliver(c, TM_ECANCELED, 0, NULL, 0);
    }
    tm_http_close(arm->http, on_http_closed, arm);
}
