/*
 * controller/io/aws_credentials.c: the AWS credential chain, region and
 * endpoint resolution (see aws_credentials.h); the shared files, region and
 * endpoint are read in credentials_files.c.
 *
 * Shape: a provider object owns a cache, a list of waiting callers, a
 * refresh timer and a "kick" timer.  Every answer goes out from the kick
 * timer's callback, so callers are never called back from inside their own
 * call.  The environment and file sources are synchronous and cheap; the
 * instance-role source is a three-step IMDSv2 exchange through tm_http,
 * driven by one state enum that only set_state() changes.
 */
#include "controller/io/aws_credentials.h"
#include "controller/io/aws_credentials_internal.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <cjson/cJSON.h>
#include <openssl/crypto.h>

#include "controller/io/http_uv.h"
#include "core/clock.h"
#include "core/config.h"
#include "core/err.h"
#include "core/log.h"

/* Shared files are a few hundred bytes; anything bigger is not one. */
#define DEFAULT_IMDS "http://169.254.169.254"
#define DEFAULT_MARGIN_MS (5 * 60 * 1000)
#define DEFAULT_IMDS_TIMEOUT_MS 2000
/* An IMDS answer is under 2 KiB; cap what we accept well above that. */
#define IMDS_MAX_BODY (64 * 1024)
#define IMDS_TOKEN_TTL "21600"
#define ERRMSG 512

int tm_aws_cred_source_parse(const char *name, enum tm_aws_cred_source *ret_source)
{
    enum tm_aws_cred_source s;

    if (!name || !*name || !strcmp(name, "none"))
        s = TM_AWS_CRED_CHAIN;
    else if (!strcmp(name, "env"))
        s = TM_AWS_CRED_ENV;
    else if (!strcmp(name, "file"))
        s = TM_AWS_CRED_FILE;
    else if (!strcmp(name, "instance_role"))
        s = TM_AWS_CRED_INSTANCE_ROLE;
    else
        return TM_EINVAL;
    *ret_source = s;
    return 0;
}

int tm_aws_credential_options_from_config(const struct tm_config_credentials *c,
                                          struct tm_aws_credential_options *ret_opts)
{
    struct tm_aws_credential_options o = {0};
    int r;

    if (c) {
        r = tm_aws_cred_source_parse(c->source, &o.source);
        if (r < 0)
            return r;
        o.credentials_file = c->file;
        o.profile = c->profile;
    }
    *ret_opts = o;
    return 0;
}

int tm_aws_credentials_from_env(struct tm_aws_credentials *ret_cred, char *err, size_t errsize)
{
    struct tm_aws_credentials cred = {0};
    const char *ak = env_get("AWS_ACCESS_KEY_ID");
    const char *sk = env_get("AWS_SECRET_ACCESS_KEY");
    const char *tok = env_get("AWS_SESSION_TOKEN");
    const char *tokname = "AWS_SESSION_TOKEN";
    int r;

    if (!tok) {
        /* The name older tools used; botocore still reads it. */
        tok = env_get("AWS_SECURITY_TOKEN");
        tokname = "AWS_SECURITY_TOKEN";
    }
    if (!ak && !sk) {
        set_err(err, errsize, "AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY are not set");
        return TM_ENOTFOUND;
    }
    if (!ak || !sk) {
        set_err(err, errsize, "%s is set but %s is not",
                ak ? "AWS_ACCESS_KEY_ID" : "AWS_SECRET_ACCESS_KEY",
                ak ? "AWS_SECRET_ACCESS_KEY" : "AWS_ACCESS_KEY_ID");
        return TM_EINVAL;
    }
    r = tm_aws_credentials_fill(&cred, ak, sk, tok, "env", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY",
                         tokname, err, errsize);
    if (r == 0)
        *ret_cred = cred;
    tm_aws_credentials_clear(&cred);
    return r;
}

/* ---- The provider: cache, waiters, IMDSv2. ---- */

enum fetch_state {
    FETCH_IDLE,
    FETCH_TOKEN,   /* PUT /latest/api/token */
    FETCH_ROLE,    /* GET .../iam/security-credentials/ */
    FETCH_CREDS,   /* GET .../iam/security-credentials/ROLE */
    FETCH_STATE_MAX,
};

static const char *const fetch_state_names[FETCH_STATE_MAX] = {"idle", "token", "role", "creds"};

struct waiter {
    tm_aws_credentials_cb cb;
    void *data;
    struct waiter *next;
};

struct tm_aws_credential_provider {
    uv_loop_t *loop;
    struct tm_http *http;
    uv_timer_t refresh;            /* background refresh before expiry */
    uv_timer_t kick;               /* answers waiters outside callers' frames */
    enum tm_aws_cred_source source;
    char *credentials_file, *config_file, *profile;
    char imds[512];
    int64_t margin_ms;
    long imds_timeout_ms;

    enum fetch_state state;
    bool fetching;                 /* a resolution is under way */
    bool inflight;                 /* a tm_http request has not called back */
    bool have;                     /* cached is valid */
    struct tm_aws_credentials cached;
    int last_status;
    char last_error[ERRMSG];
    char chain_note[ERRMSG];       /* why earlier sources of the chain had nothing */
    char imds_token[256];
    char role[128];
    unsigned fetches;

    struct waiter *waiters, **waiters_tail;
    bool closing;
    int open_handles;
    void (*done)(void *data);
    void *done_data;
};

static void set_state(struct tm_aws_credential_provider *p, enum fetch_state s)
{
    if (p->state != s)
        tm_log_debug("aws credentials fetch", "from=%s to=%s", fetch_state_names[p->state],
                     fetch_state_names[s]);
    p->state = s;
}

static void on_kick(uv_timer_t *t);

static void kick_soon(struct tm_aws_credential_provider *p)
{
    /* uv_timer_start cannot fail on an initialised, open timer. */
    if (!p->closing)
        (void)uv_timer_start(&p->kick, on_kick, 0, 0);
}

static void maybe_free(struct tm_aws_credential_provider *p)
{
    void (*done)(void *) = p->done;
    void *data = p->done_data;

    if (!p->closing || p->open_handles > 0 || p->inflight)
        return;
    tm_aws_credentials_clear(&p->cached);
    OPENSSL_cleanse(p->imds_token, sizeof(p->imds_token));
    free(p->credentials_file);
    free(p->config_file);
    free(p->profile);
    free(p);
    if (done)
        done(data);
}

static bool expired(const struct tm_aws_credentials *c, int64_t now)
{
    return c->expires_ms != 0 && now >= c->expires_ms;
}

static bool fresh(const struct tm_aws_credential_provider *p, int64_t now)
{
    return p->have && (p->cached.expires_ms == 0 || now < p->cached.expires_ms - p->margin_ms);
}

/* Answer everyone waiting: cached if still valid, else the last error. */
static void answer_waiters(struct tm_aws_credential_provider *p, int status_override)
{
    struct waiter *w = p->waiters;
    int64_t now = tm_wall_ms();
    struct tm_aws_credentials copy;
    char msg[ERRMSG];
    int status;

    /* Detach first: a callback may call get() or close() again. */
    p->waiters = NULL;
    p->waiters_tail = &p->waiters;
    if (status_override) {
        status = status_override;
        snprintf(msg, sizeof(msg), "aws credentials: closed before an answer");
    } else if (p->have && !expired(&p->cached, now)) {
        status = 0;
        msg[0] = '\0';
    } else {
        status = p->last_status ? p->last_status : TM_EAUTH;
        snprintf(msg, sizeof(msg), "%s", p->last_error[0] ? p->last_error : "aws credentials expired");
    }
    /* Each callback gets its own copy, wiped after: no caller may keep a
     * pointer into our cache across a refresh. */
    while (w) {
        struct waiter *next = w->next;

        copy = p->cached;
        w->cb(status, status == 0 ? &copy : NULL, status == 0 ? NULL : msg, w->data);
        tm_aws_credentials_clear(&copy);
        free(w);
        w = next;
    }
}

static void on_kick(uv_timer_t *t)
{
    struct tm_aws_credential_provider *p = t->data;

    if (p->fetching || p->closing)
        return;
    answer_waiters(p, 0);
}

static void start_resolve(struct tm_aws_credential_provider *p);

static void on_refresh_timer(uv_timer_t *t)
{
    struct tm_aws_credential_provider *p = t->data;

    if (!p->fetching && !p->closing)
        start_resolve(p);
}

/* A resolution ended: update the cache or the error, plan the next
 * refresh, and answer waiters from the kick timer. */
static void finish(struct tm_aws_credential_provider *p, int status,
                   const struct tm_aws_credentials *cred, const char *msg)
{
    int64_t now = tm_wall_ms();
    int64_t delay = 0;
    enum fetch_state was = p->state;  /* not IDLE: the error came from IMDS */

    set_state(p, FETCH_IDLE);
    p->fetching = false;
    OPENSSL_cleanse(p->imds_token, sizeof(p->imds_token));
    if (status == 0) {
        /* Rotated out: the logger need not keep redacting the old pair. */
        if (p->have && strcmp(p->cached.secret_key, cred->secret_key) != 0) {
            tm_log_remove_secret(p->cached.secret_key);
            if (p->cached.session_token[0])
                tm_log_remove_secret(p->cached.session_token);
        }
        tm_aws_credentials_clear(&p->cached);
        p->cached = *cred;
        p->have = true;
        p->fetches++;
        p->last_status = 0;
        p->last_error[0] = '\0';
        tm_log_info("aws credentials loaded", "source=%s expires_in_s=%lld", p->cached.source,
                    p->cached.expires_ms ? (long long)((p->cached.expires_ms - now) / 1000) : -1LL);
        if (p->cached.expires_ms) {
            delay = p->cached.expires_ms - p->margin_ms - now;
            /* Credentials that arrive inside the margin are used, and the
             * next try waits a second, so a short-lived answer cannot spin. */
            if (delay < 1000)
                delay = 1000;
        }
    } else {
        p->last_status = status;
        if (p->source == TM_AWS_CRED_CHAIN && p->chain_note[0] && was != FETCH_IDLE)
            snprintf(p->last_error, sizeof(p->last_error), "%.300s (and %.200s)",
                     msg ? msg : tm_strerror(status), p->chain_note);
        else
            snprintf(p->last_error, sizeof(p->last_error), "%s", msg ? msg : tm_strerror(status));
        /* Never let a secret out through a message built from a reply. */
        tm_log_redact(p->last_error, sizeof(p->last_error));
        if (p->have && p->cached.expires_ms) {
            tm_log_warn("could not refresh aws credentials, using the cached ones",
                        "source=%s expires_in_s=%lld error=\"%s\"", p->cached.source,
                        (long long)((p->cached.expires_ms - now) / 1000), p->last_error);
            /* Retry well before expiry, but do not hammer IMDS. */
            delay = p->margin_ms / 10;
            if (delay < 1000)
                delay = 1000;
            if (delay > 60000)
                delay = 60000;
        }
    }
    if (delay > 0 && !p->closing)
        uv_timer_start(&p->refresh, on_refresh_timer, (uint64_t)delay, 0);
    kick_soon(p);
}

/* ---- IMDSv2 ---- */

static void imds_request(struct tm_aws_credential_provider *p, const char *method,
                         const char *path, const char *header, const char *header_value);

static bool valid_role(const char *s, size_t n)
{
    if (n == 0 || n > 64)
        return false;
    for (size_t i = 0; i < n; i++) {
        if (!isalnum((unsigned char)s[i]) && !strchr("+=,.@_-", s[i]))
            return false;
    }
    return true;
}

/* "2026-11-29T18:00:00Z" (fractional seconds allowed) to epoch ms. */
static int parse_iso8601(const char *s, int64_t *ret_ms)
{
    struct tm tm = {0};
    int y, mo, d, h, mi, sec, n = 0;
    time_t t;

    if (sscanf(s, "%4d-%2d-%2dT%2d:%2d:%2d%n", &y, &mo, &d, &h, &mi, &sec, &n) != 6 || n != 19)
        return TM_EBADREPLY;
    s += n;
    if (*s == '.') {
        s++;
        while (isdigit((unsigned char)*s))
            s++;
    }
    if (strcmp(s, "Z") && strcmp(s, "+00:00"))
        return TM_EBADREPLY;
    if (mo < 1 || mo > 12 || d < 1 || d > 31 || h > 23 || mi > 59 || sec > 60 || y < 1970)
        return TM_EBADREPLY;
    tm.tm_year = y - 1900;
    tm.tm_mon = mo - 1;
    tm.tm_mday = d;
    tm.tm_hour = h;
    tm.tm_min = mi;
    tm.tm_sec = sec;
    t = timegm(&tm);
    if (t == (time_t)-1)
        return TM_EBADREPLY;
    *ret_ms = (int64_t)t * 1000;
    return 0;
}

/* The role document: every field checked for type before use. */
static int parse_role_json(const char *body, size_t len, struct tm_aws_credentials *cred,
                           char *err, size_t errsize)
{
    cJSON *root = cJSON_ParseWithLength(body, len);
    const cJSON *code, *ak, *sk, *tok, *exp;
    int64_t expires = 0;
    int r = TM_EBADREPLY;

    if (!cJSON_IsObject(root)) {
        set_err(err, errsize, "instance role: credentials are not a JSON object");
        goto out;
    }
    code = cJSON_GetObjectItemCaseSensitive(root, "Code");
    ak = cJSON_GetObjectItemCaseSensitive(root, "AccessKeyId");
    sk = cJSON_GetObjectItemCaseSensitive(root, "SecretAccessKey");
    tok = cJSON_GetObjectItemCaseSensitive(root, "Token");
    exp = cJSON_GetObjectItemCaseSensitive(root, "Expiration");
    if (code && (!cJSON_IsString(code) || strcmp(code->valuestring, "Success"))) {
        set_err(err, errsize, "instance role: IMDS answered Code \"%.40s\"",
                cJSON_IsString(code) ? code->valuestring : "(not a string)");
        r = TM_EAUTH;
        goto out;
    }
    if (!cJSON_IsString(ak) || !cJSON_IsString(sk) || !cJSON_IsString(tok) ||
        !cJSON_IsString(exp)) {
        set_err(err, errsize, "instance role: AccessKeyId, SecretAccessKey, Token and "
                "Expiration must all be strings");
        goto out;
    }
    if (parse_iso8601(exp->valuestring, &expires) < 0) {
        set_err(err, errsize, "instance role: Expiration \"%.40s\" is not an ISO 8601 UTC time",
                exp->valuestring);
        goto out;
    }
    r = tm_aws_credentials_fill(cred, ak->valuestring, sk->valuestring,
                         *tok->valuestring ? tok->valuestring : NULL, "instance_role",
                         "instance role AccessKeyId", "instance role SecretAccessKey",
                         "instance role Token", err, errsize);
    if (r < 0) {
        r = TM_EBADREPLY;
        goto out;
    }
    cred->expires_ms = expires;
out:
    if (root) {
        /* cJSON holds copies of the secrets: wipe them before the free. */
        const cJSON *it;

        cJSON_ArrayForEach(it, root) {
            if (cJSON_IsString(it) && it->valuestring)
                OPENSSL_cleanse(it->valuestring, strlen(it->valuestring));
        }
        cJSON_Delete(root);
    }
    return r;
}

static int http_status_error(long code)
{
    if (code == 401 || code == 403)
        return TM_EAUTH;
    if (code == 404)
        return TM_ENOTFOUND;
    if (code == 429)
        return TM_ETHROTTLED;
    if (code >= 500)
        return TM_EUNAVAIL;
    return TM_EBADREPLY;
}

static void on_imds(const struct tm_http_response *resp, void *data)
{
    struct tm_aws_credential_provider *p = data;
    char msg[ERRMSG];
    struct tm_aws_credentials cred = {0};
    const char *body = resp->body ? resp->body : "";
    size_t len = resp->body_len;
    int r;

    p->inflight = false;
    if (p->closing) {
        set_state(p, FETCH_IDLE);
        p->fetching = false;
        maybe_free(p);
        return;
    }
    if (resp->status < 0) {
        snprintf(msg, sizeof(msg), "instance role: could not reach IMDS at %.200s (%s step): %.200s",
                 p->imds, fetch_state_names[p->state],
                 resp->error ? resp->error : tm_strerror(resp->status));
        finish(p, resp->status, NULL, msg);
        return;
    }
    if (resp->http_status != 200) {
        r = http_status_error(resp->http_status);
        snprintf(msg, sizeof(msg), "instance role: IMDS answered HTTP %ld to the %s step%s",
                 resp->http_status, fetch_state_names[p->state],
                 p->state == FETCH_ROLE && r == TM_ENOTFOUND ? " (no role attached)" : "");
        finish(p, r, NULL, msg);
        return;
    }
    switch (p->state) {
    case FETCH_TOKEN:
        while (len > 0 && isspace((unsigned char)body[len - 1]))
            len--;
        if (len == 0 || len >= sizeof(p->imds_token) || memchr(body, '\n', len)) {
            finish(p, TM_EBADREPLY, NULL, "instance role: IMDS token has a bad length");
            return;
        }
        for (size_t i = 0; i < len; i++) {
            if ((unsigned char)body[i] <= ' ' || (unsigned char)body[i] >= 127) {
                finish(p, TM_EBADREPLY, NULL, "instance role: IMDS token is not printable");
                return;
            }
        }
        memcpy(p->imds_token, body, len);
        p->imds_token[len] = '\0';
        set_state(p, FETCH_ROLE);
        imds_request(p, "GET", "/latest/meta-data/iam/security-credentials/",
                     "X-aws-ec2-metadata-token", p->imds_token);
        return;
    case FETCH_ROLE: {
        /* One role per instance profile: the first line names it. */
        size_t n = strcspn(body, "\r\n");

        if (!valid_role(body, n)) {
            finish(p, TM_EBADREPLY, NULL, "instance role: IMDS role name is empty or not a role name");
            return;
        }
        memcpy(p->role, body, n);
        p->role[n] = '\0';
        set_state(p, FETCH_CREDS);
        {
            char path[256];

            snprintf(path, sizeof(path), "/latest/meta-data/iam/security-credentials/%s", p->role);
            imds_request(p, "GET", path, "X-aws-ec2-metadata-token", p->imds_token);
        }
        return;
    }
    case FETCH_CREDS:
        r = parse_role_json(body, len, &cred, msg, sizeof(msg));
        if (r == 0 && expired(&cred, tm_wall_ms())) {
            r = TM_EBADREPLY;
            snprintf(msg, sizeof(msg), "instance role: IMDS gave credentials that already expired");
        }
        finish(p, r, r == 0 ? &cred : NULL, msg);
        tm_aws_credentials_clear(&cred);
        return;
    default:
        finish(p, TM_EBADREPLY, NULL, "instance role: answer in an unexpected state");
        return;
    }
}

static void imds_request(struct tm_aws_credential_provider *p, const char *method,
                         const char *path, const char *header, const char *header_value)
{
    char url[1024];
    char hdr[400];
    const char *headers[2] = {hdr, NULL};
    struct tm_http_request req = {
        .method = method,
        .url = url,
        .headers = headers,
        .body = NULL,
        .body_len = 0,
        .timeout_ms = p->imds_timeout_ms,
        .max_body = IMDS_MAX_BODY,
    };
    int r;

    snprintf(url, sizeof(url), "%s%s", p->imds, path);
    snprintf(hdr, sizeof(hdr), "%s: %s", header, header_value);
    r = tm_http_request(p->http, &req, on_imds, p);
    OPENSSL_cleanse(hdr, sizeof(hdr));
    if (r < 0) {
        char msg[ERRMSG];

        snprintf(msg, sizeof(msg), "instance role: could not start the IMDS request: %s",
                 tm_strerror(r));
        finish(p, r, NULL, msg);
        return;
    }
    p->inflight = true;
}

static bool imds_disabled(void)
{
    const char *v = env_get("AWS_EC2_METADATA_DISABLED");

    return v && !strcasecmp(v, "true");
}

/*
 * Start one resolution.  The synchronous sources finish at once (answers
 * still go out from the kick timer); the instance role goes on in on_imds.
 */
static void start_resolve(struct tm_aws_credential_provider *p)
{
    struct tm_aws_credential_options opts = {
        .source = p->source,
        .credentials_file = p->credentials_file,
        .config_file = p->config_file,
        .profile = p->profile,
    };
    struct tm_aws_credentials cred = {0};
    char msg[ERRMSG], envmsg[ERRMSG / 2] = "", filemsg[ERRMSG / 2] = "";
    int r;

    p->fetching = true;
    p->chain_note[0] = '\0';
    if (p->source == TM_AWS_CRED_CHAIN || p->source == TM_AWS_CRED_ENV) {
        r = tm_aws_credentials_from_env(&cred, envmsg, sizeof(envmsg));
        if (r != TM_ENOTFOUND || p->source == TM_AWS_CRED_ENV) {
            snprintf(msg, sizeof(msg), "environment: %s", envmsg);
            finish(p, r, &cred, msg);
            goto out;
        }
    }
    if (p->source == TM_AWS_CRED_CHAIN || p->source == TM_AWS_CRED_FILE) {
        r = tm_aws_credentials_from_files(&opts, &cred, filemsg, sizeof(filemsg));
        if (r != TM_ENOTFOUND || p->source == TM_AWS_CRED_FILE) {
            snprintf(msg, sizeof(msg), "shared files: %s", filemsg);
            finish(p, r, &cred, msg);
            goto out;
        }
    }
    if (!p->http || (p->source == TM_AWS_CRED_CHAIN && imds_disabled())) {
        snprintf(msg, sizeof(msg), "no aws credentials: environment: %.180s; shared files: %.200s; "
                 "instance role: %s", envmsg, filemsg,
                 p->http ? "AWS_EC2_METADATA_DISABLED is true" : "not available here");
        finish(p, TM_ENOTFOUND, NULL, msg);
        goto out;
    }
    snprintf(p->chain_note, sizeof(p->chain_note), "environment: %.200s; shared files: %.200s", envmsg,
             filemsg);
    set_state(p, FETCH_TOKEN);
    imds_request(p, "PUT", "/latest/api/token", "X-aws-ec2-metadata-token-ttl-seconds",
                 IMDS_TOKEN_TTL);
out:
    tm_aws_credentials_clear(&cred);
}

static char *dup_opt(const char *s, bool *failed)
{
    char *d;

    if (!s)
        return NULL;
    d = strdup(s);
    if (!d)
        *failed = true;
    return d;
}

int tm_aws_credential_provider_create(uv_loop_t *loop, struct tm_http *http,
                                      const struct tm_aws_credential_options *opts,
                                      struct tm_aws_credential_provider **ret_provider)
{
    struct tm_aws_credential_provider *p;
    const char *imds;
    bool failed = false;
    size_t n;

    if (!loop || !ret_provider || (opts && (opts->source < 0 || opts->source >= TM_AWS_CRED_SOURCE_MAX)))
        return TM_EINVAL;
    if (opts && opts->source == TM_AWS_CRED_INSTANCE_ROLE && !http)
        return TM_EINVAL;
    imds = opts && opts->imds_endpoint ? opts->imds_endpoint : env_get("AWS_EC2_METADATA_SERVICE_ENDPOINT");
    if (!imds)
        imds = DEFAULT_IMDS;
    n = strlen(imds);
    while (n > 0 && imds[n - 1] == '/')
        n--;
    if (n >= sizeof(p->imds) || (strncmp(imds, "http://", 7) && strncmp(imds, "https://", 8)))
        return TM_EINVAL;
    p = calloc(1, sizeof(*p));
    if (!p)
        return TM_ENOMEM;
    memcpy(p->imds, imds, n);
    p->imds[n] = '\0';
    p->loop = loop;
    p->http = http;
    p->source = opts ? opts->source : TM_AWS_CRED_CHAIN;
    p->margin_ms = opts && opts->refresh_margin_ms > 0 ? opts->refresh_margin_ms : DEFAULT_MARGIN_MS;
    p->imds_timeout_ms = opts && opts->imds_timeout_ms > 0 ? opts->imds_timeout_ms
                                                           : DEFAULT_IMDS_TIMEOUT_MS;
    p->credentials_file = dup_opt(opts ? opts->credentials_file : NULL, &failed);
    p->config_file = dup_opt(opts ? opts->config_file : NULL, &failed);
    p->profile = dup_opt(opts ? opts->profile : NULL, &failed);
    if (failed) {
        free(p->credentials_file);
        free(p->config_file);
        free(p->profile);
        free(p);
        return TM_ENOMEM;
    }
    p->waiters_tail = &p->waiters;
    uv_timer_init(loop, &p->refresh);
    uv_timer_init(loop, &p->kick);
    p->refresh.data = p;
    p->kick.data = p;
    p->open_handles = 2;
    /* The timers must not keep a loop alive on their own. */
    uv_unref((uv_handle_t *)&p->refresh);
    *ret_provider = p;
    return 0;
}

int tm_aws_credential_provider_get(struct tm_aws_credential_provider *p,
                                   tm_aws_credentials_cb cb, void *data)
{
    struct waiter *w;

    if (!p || !cb)
        return TM_EINVAL;
    if (p->closing)
        return TM_ECANCELED;
    w = calloc(1, sizeof(*w));
    if (!w)
        return TM_ENOMEM;
    w->cb = cb;
    w->data = data;
    *p->waiters_tail = w;
    p->waiters_tail = &w->next;
    if (!p->fetching && !fresh(p, tm_wall_ms()))
        start_resolve(p);
    else
        kick_soon(p);
    return 0;
}

unsigned tm_aws_credential_provider_fetches(const struct tm_aws_credential_provider *p)
{
    return p ? p->fetches : 0;
}

static void on_handle_closed(uv_handle_t *h)
{
    struct tm_aws_credential_provider *p = h->data;

    p->open_handles--;
    if (p->open_handles == 0)
        answer_waiters(p, TM_ECANCELED);
    maybe_free(p);
}

void tm_aws_credential_provider_close(struct tm_aws_credential_provider *p,
                                      void (*done)(void *data), void *data)
{
    if (!p || p->closing)
        return;
    p->closing = true;
    p->done = done;
    p->done_data = data;
    tm_aws_credentials_clear(&p->cached);
    p->have = false;
    uv_close((uv_handle_t *)&p->refresh, on_handle_closed);
    uv_close((uv_handle_t *)&p->kick, on_handle_closed);
}

/* ---- One-shot resolution. ---- */

struct oneshot {
    tm_aws_credentials_cb cb;
    void *data;
    struct tm_aws_credential_provider *p;
};

static void oneshot_done(void *data)
{
    free(data);
}

static void on_oneshot(int status, const struct tm_aws_credentials *cred, const char *error,
                       void *data)
{
    struct oneshot *o = data;

    o->cb(status, cred, error, o->data);
    tm_aws_credential_provider_close(o->p, oneshot_done, o);
}

int tm_aws_credentials_resolve(uv_loop_t *loop, struct tm_http *http,
                               const struct tm_aws_credential_options *opts,
                               tm_aws_credentials_cb cb, void *data)
{
    struct oneshot *o;
    int r;

    if (!cb)
        return TM_EINVAL;
    o = calloc(1, sizeof(*o));
    if (!o)
        return TM_ENOMEM;
    o->cb = cb;
    o->data = data;
    r = tm_aws_credential_provider_create(loop, http, opts, &o->p);
    if (r == 0) {
        r = tm_aws_credential_provider_get(o->p, on_oneshot, o);
        if (r < 0) {
            tm_aws_credential_provider_close(o->p, oneshot_done, o);
            return r;
        }
    }
    if (r < 0)
        free(o);
    return r;
}
