/*
 * providers/gcp/gcp_auth.c: key files, RS256 JWTs and the token cache
 * (see gcp_auth.h).
 */
#include "providers/gcp/gcp_auth.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include <cjson/cJSON.h>
#include <openssl/crypto.h>

#include "controller/io/http_uv.h"
#include "core/err.h"
#include "core/file.h"
#include "core/log.h"
#include "providers/common/jwt.h"

#define KEY_FILE_MAX (64 * 1024)

static void wipe_free(char *s)
{
    if (s) {
        OPENSSL_cleanse(s, strlen(s));
        free(s);
    }
}

void tm_gcp_key_release(struct tm_gcp_key *key)
{
    if (!key)
        return;
    free(key->client_email);
    wipe_free(key->private_key);
    free(key->private_key_id);
    free(key->project_id);
    memset(key, 0, sizeof(*key));
}

/* A string member, or NULL; *bad when present but not a non-empty string. */
static const char *member(const cJSON *root, const char *name, bool *bad)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(root, name);

    *bad = false;
    if (!v)
        return NULL;
    if (!cJSON_IsString(v) || !v->valuestring || !v->valuestring[0]) {
        *bad = true;
        return NULL;
    }
    return v->valuestring;
}

int tm_gcp_key_parse(const char *json, size_t len, struct tm_gcp_key *ret, char *err,
                     size_t errsize)
{
    cJSON *root;
    const char *type, *email, *pem, *kid, *project;
    bool bad;
    int r = TM_EINVAL;

    memset(ret, 0, sizeof(*ret));
    root = json ? cJSON_ParseWithLength(json, len) : NULL;
    if (!root || !cJSON_IsObject(root)) {
        snprintf(err, errsize, "not a JSON object (malformed or truncated key file)");
        cJSON_Delete(root);
        return TM_EINVAL;
    }
    type = member(root, "type", &bad);
    if (bad || !type) {
        snprintf(err, errsize, "\"type\": %s", bad ? "not a string" : "missing");
        goto out;
    }
    if (strcmp(type, "service_account") != 0) {
        snprintf(err, errsize, "\"type\" is \"%.40s\": only service_account keys are supported%s",
                 type, strcmp(type, "external_account") == 0
                           ? " (workload identity federation is not)" : "");
        goto out;
    }
    email = member(root, "client_email", &bad);
    if (!email) {
        snprintf(err, errsize, "\"client_email\": %s", bad ? "not a string" : "missing");
        goto out;
    }
    pem = member(root, "private_key", &bad);
    if (!pem) {
        snprintf(err, errsize, "\"private_key\": %s", bad ? "not a string" : "missing");
        goto out;
    }
    if (!tm_jwt_rs256_key_ok(pem)) {
        snprintf(err, errsize, "\"private_key\": not a PEM RSA private key (truncated?)");
        goto out;
    }
    kid = member(root, "private_key_id", &bad);
    project = member(root, "project_id", &bad);
    ret->client_email = strdup(email);
    ret->private_key = strdup(pem);
    ret->private_key_id = kid ? strdup(kid) : NULL;
    ret->project_id = project ? strdup(project) : NULL;
    if (!ret->client_email || !ret->private_key || (kid && !ret->private_key_id) ||
        (project && !ret->project_id)) {
        tm_gcp_key_release(ret);
        r = TM_ENOMEM;
        goto out;
    }
    tm_log_add_secret(ret->private_key);
    r = 0;
out:
    /* The parse tree holds a copy of the key: wipe it before freeing. */
    {
        cJSON *pk_item = cJSON_GetObjectItemCaseSensitive(root, "private_key");

        if (cJSON_IsString(pk_item) && pk_item->valuestring)
            OPENSSL_cleanse(pk_item->valuestring, strlen(pk_item->valuestring));
    }
    cJSON_Delete(root);
    return r;
}

static int key_parse_any(const char *buf, size_t len, void *ret, char *why, size_t whylen)
{
    return tm_gcp_key_parse(buf, len, ret, why, whylen);
}

int tm_gcp_key_load(const char *path, struct tm_gcp_key *ret, char *err, size_t errsize)
{
    return tm_file_parse_secret(path, KEY_FILE_MAX, key_parse_any, ret, err, errsize);
}

int tm_gcp_jwt_sign(const char *pem, const char *iss, const char *scope, const char *aud,
                    int64_t iat, char **ret_jwt)
{
    /* google-auth-library's header: no "typ". */
    static const char header[] = "{\"alg\":\"RS256\"}";
    cJSON *claims;
    char *payload = NULL;
    int r = TM_ENOMEM;

    if (!pem || !iss || !scope || !aud)
        return TM_EINVAL;
    claims = cJSON_CreateObject();
    if (!claims)
        return TM_ENOMEM;
    /* Key order and number formatting as JSON.stringify writes them. */
    if (cJSON_AddStringToObject(claims, "iss", iss) &&
        cJSON_AddStringToObject(claims, "scope", scope) &&
        cJSON_AddStringToObject(claims, "aud", aud) &&
        cJSON_AddNumberToObject(claims, "exp", (double)(iat + 3600)) &&
        cJSON_AddNumberToObject(claims, "iat", (double)iat))
        payload = cJSON_PrintUnformatted(claims);
    if (payload)
        r = tm_jwt_sign_rs256(pem, header, payload, ret_jwt);
    cJSON_Delete(claims);
    free(payload);
    return r;
}

int tm_gcp_token_parse(const char *body, size_t len, char *tok, size_t toksize,
                       int64_t *ret_expires_in, char *err, size_t errsize)
{
    cJSON *root = body ? cJSON_ParseWithLength(body, len) : NULL;
    const cJSON *at, *ex, *tt;
    int r = TM_EBADREPLY;

    if (!root || !cJSON_IsObject(root)) {
        snprintf(err, errsize, "token answer: not a JSON object");
        goto out;
    }
    at = cJSON_GetObjectItemCaseSensitive(root, "access_token");
    ex = cJSON_GetObjectItemCaseSensitive(root, "expires_in");
    tt = cJSON_GetObjectItemCaseSensitive(root, "token_type");
    if (!cJSON_IsString(at) || !at->valuestring[0] || strlen(at->valuestring) >= toksize) {
        snprintf(err, errsize, "token answer: \"access_token\" missing, empty or too long");
        goto out;
    }
    if (!cJSON_IsNumber(ex) || ex->valuedouble < 1 || ex->valuedouble > 86400 * 30) {
        snprintf(err, errsize, "token answer: \"expires_in\" missing or out of range");
        goto out;
    }
    if (tt && (!cJSON_IsString(tt) || strcasecmp(tt->valuestring, "Bearer") != 0)) {
        snprintf(err, errsize, "token answer: \"token_type\" is not Bearer");
        goto out;
    }
    snprintf(tok, toksize, "%s", at->valuestring);
    *ret_expires_in = (int64_t)ex->valuedouble;
    r = 0;
out:
    if (root) {
        at = cJSON_GetObjectItemCaseSensitive(root, "access_token");
        if (cJSON_IsString(at) && at->valuestring)
            OPENSSL_cleanse(at->valuestring, strlen(at->valuestring));
    }
    cJSON_Delete(root);
    return r;
}

/* ---- the cache on the loop ----------------------------------------------- */

struct waiter {
    struct waiter *next;
    tm_gcp_token_cb cb;
    void *data;
};

struct tm_gcp_tokens {
    uv_loop_t *loop;
    struct tm_http *http;
    enum tm_gcp_token_source source;
    struct tm_gcp_key key;
    char *token_url, *audience, *metadata_url, *scope;
    long timeout_ms;
    int64_t margin_ms;
    char token[TM_GCP_TOKEN_MAX];
    uint64_t expires_at;          /* uv_now() ms; 0 = none cached */
    bool fetching;
    unsigned fetches;
    struct waiter *waiting;       /* for the fetch in flight */
    struct waiter *ready;         /* answered from the cache on the next turn */
    uv_timer_t ready_timer;       /* fires the ready list */
    uv_timer_t refresh_timer;     /* background refresh before expiry */
    int closing;                  /* handles still to close */
    void (*close_done)(void *data);
    void *close_data;
};

unsigned tm_gcp_tokens_fetches(const struct tm_gcp_tokens *t)
{
    return t->fetches;
}

static bool fresh(const struct tm_gcp_tokens *t)
{
    return t->expires_at && uv_now(t->loop) + (uint64_t)t->margin_ms < t->expires_at;
}

static void forget(struct tm_gcp_tokens *t)
{
    if (t->token[0])
        tm_log_remove_secret(t->token);
    OPENSSL_cleanse(t->token, sizeof(t->token));
    t->expires_at = 0;
}

void tm_gcp_tokens_invalidate(struct tm_gcp_tokens *t)
{
    if (t)
        forget(t);
}

static void answer(struct waiter *list, int status, const char *token, const char *error)
{
    while (list) {
        struct waiter *next = list->next;

        list->cb(status, status == 0 ? token : NULL, error, list->data);
        free(list);
        list = next;
    }
}

static void start_fetch(struct tm_gcp_tokens *t);

static void on_refresh_timer(uv_timer_t *h)
{
    struct tm_gcp_tokens *t = h->data;

    if (!t->fetching && !t->closing)
        start_fetch(t);
}

static void on_fetch(const struct tm_http_response *resp, void *data)
{
    struct tm_gcp_tokens *t = data;
    struct waiter *list = t->waiting;
    char err[256] = "";
    int64_t expires_in = 0;
    int status = resp->status;

    t->fetching = false;
    t->waiting = NULL;
    if (t->closing || status == TM_ECANCELED) {
        answer(list, TM_ECANCELED, NULL, "closed");
        return;
    }
    if (status < 0) {
        snprintf(err, sizeof(err), "%s unreachable: %s",
                 t->source == TM_GCP_TOKEN_KEY ? "token endpoint" : "metadata server",
                 tm_strerror(status));
    } else if (resp->http_status == 400 || resp->http_status == 401 ||
               resp->http_status == 403 || resp->http_status == 404) {
        /* invalid_grant and friends: the key is refused, asking again will not help. */
        status = TM_EAUTH;
        snprintf(err, sizeof(err), "%s refused the credentials (HTTP %ld)",
                 t->source == TM_GCP_TOKEN_KEY ? "token endpoint" : "metadata server",
                 resp->http_status);
    } else if (resp->http_status != 200) {
        status = resp->http_status == 429 ? TM_ETHROTTLED : TM_EUNAVAIL;
        snprintf(err, sizeof(err), "token endpoint answered HTTP %ld", resp->http_status);
    } else {
        forget(t);
        status = tm_gcp_token_parse(resp->body, resp->body_len, t->token, sizeof(t->token),
                                    &expires_in, err, sizeof(err));
    }
    if (status < 0) {
        tm_log_warn("could not get a gcp access token", "error=\"%s\"", err);
        /* A cached token that has not expired still serves. */
        if (t->expires_at > uv_now(t->loop)) {
            answer(list, 0, t->token, NULL);
            return;
        }
        answer(list, status, NULL, err);
        return;
    }
    tm_log_add_secret(t->token);
    t->fetches++;
    t->expires_at = uv_now(t->loop) + (uint64_t)expires_in * 1000;
    if ((uint64_t)expires_in * 1000 > (uint64_t)t->margin_ms)
        uv_timer_start(&t->refresh_timer, on_refresh_timer,
                       (uint64_t)expires_in * 1000 - (uint64_t)t->margin_ms, 0);
    tm_log_debug("gcp access token fetched", "expires_in_s=%lld fetches=%u",
                 (long long)expires_in, t->fetches);
    answer(list, 0, t->token, NULL);
}

static char *form_escape(const char *s)
{
    static const char hex[] = "0123456789ABCDEF";
    size_t n = strlen(s);
    char *out = malloc(3 * n + 1), *o = out;

    if (!out)
        return NULL;
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;

        if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
            c == '-' || c == '.' || c == '_' || c == '~') {
            *o++ = (char)c;
        } else {
            *o++ = '%';
            *o++ = hex[c >> 4];
            *o++ = hex[c & 15];
        }
    }
    *o = '\0';
    return out;
}

static void start_fetch(struct tm_gcp_tokens *t)
{
    struct tm_http_request req = {0};
    char url[1024];
    char *jwt = NULL, *body = NULL;
    int r;

    t->fetching = true;
    if (t->source == TM_GCP_TOKEN_METADATA) {
        static const char *const hdrs[] = {"Metadata-Flavor: Google", NULL};

        snprintf(url, sizeof(url),
                 "%s/computeMetadata/v1/instance/service-accounts/default/token",
                 t->metadata_url);
        req.method = "GET";
        req.url = url;
        req.headers = hdrs;
    } else {
        static const char *const hdrs[] = {
            "Content-Type: application/x-www-form-urlencoded", NULL};
        static const char grant[] =
            "grant_type=urn%3Aietf%3Aparams%3Aoauth%3Agrant-type%3Ajwt-bearer&assertion=";
        char *esc;

        r = tm_gcp_jwt_sign(t->key.private_key, t->key.client_email, t->scope, t->audience,
                            (int64_t)time(NULL), &jwt);
        esc = r == 0 ? form_escape(jwt) : NULL;
        size_t blen = esc ? sizeof(grant) + strlen(esc) : 0;
        body = esc ? malloc(blen) : NULL;
        if (body)
            snprintf(body, blen, "%s%s", grant, esc);
        wipe_free(esc);
        if (!body) {
            struct tm_http_response fake = {.status = r < 0 ? r : TM_ENOMEM};

            wipe_free(jwt);
            /* Never call back from inside a get: the ready timer path is
             * for cache hits, so report through the refresh timer. */
            t->fetching = false;
            tm_log_error("could not sign the gcp token request", "error=%s",
                         tm_err_name(fake.status));
            answer(t->waiting, TM_EAUTH, NULL, "could not sign the token request");
            t->waiting = NULL;
            return;
        }
        req.method = "POST";
        req.url = t->token_url;
        req.headers = hdrs;
        req.body = body;
        req.body_len = strlen(body);
    }
    req.timeout_ms = t->timeout_ms;
    r = tm_http_request(t->http, &req, on_fetch, t);
    wipe_free(jwt);
    wipe_free(body);
    if (r < 0) {
        struct waiter *list = t->waiting;

        t->fetching = false;
        t->waiting = NULL;
        answer(list, r, NULL, "could not start the token request");
    }
}

static void on_ready(uv_timer_t *h)
{
    struct tm_gcp_tokens *t = h->data;
    struct waiter *list = t->ready;

    t->ready = NULL;
    if (t->closing) {
        answer(list, TM_ECANCELED, NULL, "closed");
        return;
    }
    if (fresh(t)) {
        answer(list, 0, t->token, NULL);
        return;
    }
    /* Went stale between get and now: join a fetch. */
    while (list) {
        struct waiter *next = list->next;

        list->next = t->waiting;
        t->waiting = list;
        list = next;
    }
    if (!t->fetching)
        start_fetch(t);
}

int tm_gcp_tokens_get(struct tm_gcp_tokens *t, tm_gcp_token_cb cb, void *data)
{
    struct waiter *w;

    if (!t || !cb)
        return TM_EINVAL;
    if (t->closing)
        return TM_ECANCELED;
    w = calloc(1, sizeof(*w));
    if (!w)
        return TM_ENOMEM;
    w->cb = cb;
    w->data = data;
    /* Always through the ready timer, so cb never fires inside this call
     * (a fetch that fails to start would answer at once). */
    w->next = t->ready;
    t->ready = w;
    uv_timer_start(&t->ready_timer, on_ready, 0, 0);
    return 0;
}

static char *dup_or(const char *s, const char *dflt)
{
    return strdup(s && *s ? s : dflt);
}

int tm_gcp_tokens_create(uv_loop_t *loop, struct tm_http *http,
                         const struct tm_gcp_token_options *opts, struct tm_gcp_tokens **ret)
{
    struct tm_gcp_tokens *t;

    if (!loop || !http || !opts || !ret ||
        (opts->source == TM_GCP_TOKEN_KEY && (!opts->key || !opts->key->private_key)))
        return TM_EINVAL;
    t = calloc(1, sizeof(*t));
    if (!t)
        return TM_ENOMEM;
    t->loop = loop;
    t->http = http;
    t->source = opts->source;
    if (opts->source == TM_GCP_TOKEN_KEY) {
        t->key.client_email = strdup(opts->key->client_email);
        t->key.private_key = strdup(opts->key->private_key);
    }
    t->token_url = dup_or(opts->token_url, TM_GCP_TOKEN_URL);
    t->audience = dup_or(opts->audience, TM_GCP_TOKEN_URL);
    t->metadata_url = dup_or(opts->metadata_url, TM_GCP_METADATA_URL);
    t->scope = dup_or(opts->scope, TM_GCP_SCOPE);
    if (!t->token_url || !t->audience || !t->metadata_url || !t->scope ||
        (opts->source == TM_GCP_TOKEN_KEY && (!t->key.client_email || !t->key.private_key))) {
        tm_gcp_key_release(&t->key);
        free(t->token_url);
        free(t->audience);
        free(t->metadata_url);
        free(t->scope);
        free(t);
        return TM_ENOMEM;
    }
    t->timeout_ms = opts->timeout_ms ? opts->timeout_ms : 10000;
    t->margin_ms = opts->refresh_margin_ms ? opts->refresh_margin_ms : 5 * 60 * 1000;
    uv_timer_init(loop, &t->ready_timer);
    uv_timer_init(loop, &t->refresh_timer);
    t->ready_timer.data = t;
    t->refresh_timer.data = t;
    /* The background refresh must not keep a loop alive on its own. */
    uv_unref((uv_handle_t *)&t->refresh_timer);
    *ret = t;
    return 0;
}

static void on_handle_closed(uv_handle_t *h)
{
    struct tm_gcp_tokens *t = h->data;

    if (--t->closing > 0)
        return;
    forget(t);
    tm_gcp_key_release(&t->key);
    free(t->token_url);
    free(t->audience);
    free(t->metadata_url);
    free(t->scope);
    if (t->close_done)
        t->close_done(t->close_data);
    free(t);
}

void tm_gcp_tokens_close(struct tm_gcp_tokens *t, void (*done)(void *data), void *data)
{
    struct waiter *a, *b;

    if (!t || t->closing)
        return;
    t->closing = 2;
    t->close_done = done;
    t->close_data = data;
    a = t->ready;
    b = t->waiting;
    t->ready = t->waiting = NULL;
    answer(a, TM_ECANCELED, NULL, "closed");
    answer(b, TM_ECANCELED, NULL, "closed");
    uv_close((uv_handle_t *)&t->ready_timer, on_handle_closed);
    uv_close((uv_handle_t *)&t->refresh_timer, on_handle_closed);
}
