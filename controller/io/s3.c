/*
 * controller/io/s3.c: the S3 object client (see s3.h).
 *
 * Every call becomes one struct s3_op: it copies its inputs, waits for
 * credentials (the getter may go to IMDS), signs with the wall clock as the
 * EC2 client does, and sends through tm_http.  The answer is read here: a
 * 2xx with its body, or S3's <Error> document turned into a code and a
 * message.  The client lives until it is closed and its last op is back,
 * so an op never outlives what it points at.
 */
#include "controller/io/s3.h"

#include <ctype.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <openssl/crypto.h>
#include <openssl/evp.h>

#include "controller/io/http_uv.h"
#include "controller/io/xml_tree.h"
#include "core/err.h"

#define S3_DEFAULT_TIMEOUT_MS 60000L
#define S3_DEFAULT_MAX_INFLIGHT 32u
#define S3_DEFAULT_MAX_GET (64u << 20)
#define S3_MAX_KEY 1024
#define S3_MAX_DELETE 1000
#define S3_ERR_MAX 512
#define S3_ERROR_BODY_MAX (64u << 10)

enum s3_kind { S3_PUT, S3_GET, S3_LIST, S3_DELETE, S3_MKBUCKET };

struct tm_s3 {
    uv_loop_t *loop;
    struct tm_http *http;
    char *endpoint, *region, *bucket, *ca_file;
    long timeout_ms;
    tm_s3_cred_get get;
    void *source;
    struct tm_aws_credentials fixed;
    bool have_fixed;
    bool closing;
    unsigned inflight;     /* ops not yet called back, waiting ones included */
    unsigned active;       /* ops past the wait: signing or on the wire */
    unsigned max_active;
    struct s3_op *wait_head, *wait_tail;
};

struct s3_op {
    struct tm_s3 *s3;
    struct s3_op *next;  /* waiting for a slot */
    bool launched;
    enum s3_kind kind;
    const char *method;
    char *path;     /* wire path: /bucket[/key] */
    char *query;    /* wire query or NULL */
    char *what;     /* "put logs/1/0/0" for messages: the key, never a secret */
    char *body;
    size_t body_len;
    char range[64]; /* "Range:bytes=..." or "" */
    char md5[48];   /* "Content-MD5:..." or "" */
    const char *content_type;
    size_t max_body;
    tm_s3_cb cb;
    void *data;
};

static void s3_free(struct tm_s3 *s3)
{
    tm_aws_credentials_clear(&s3->fixed);
    free(s3->endpoint);
    free(s3->region);
    free(s3->bucket);
    free(s3->ca_file);
    free(s3);
}

static void op_free(struct s3_op *op)
{
    free(op->path);
    free(op->query);
    free(op->what);
    free(op->body);
    free(op);
}

static void op_launch(struct s3_op *op);

/* Report and release; the next waiting op takes the slot; the client goes
 * with its last op once closed. */
static void op_finish(struct s3_op *op, const struct tm_s3_result *res)
{
    struct tm_s3 *s3 = op->s3;

    if (op->launched)
        s3->active--;
    op->cb(res, op->data);
    op_free(op);
    s3->inflight--;
    while (s3->wait_head && s3->active < s3->max_active) {
        struct s3_op *next = s3->wait_head;

        s3->wait_head = next->next;
        if (!s3->wait_head)
            s3->wait_tail = NULL;
        next->next = NULL;
        op_launch(next);
    }
    if (s3->closing && s3->inflight == 0)
        s3_free(s3);
}

static void op_fail(struct s3_op *op, int status, long http_status, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static void op_fail(struct s3_op *op, int status, long http_status, const char *fmt, ...)
{
    char msg[S3_ERR_MAX];
    struct tm_s3_result res = {.status = status, .http_status = http_status, .error = msg};
    va_list ap;
    int n;

    n = snprintf(msg, sizeof(msg), "s3 %s: ", op->what);
    if (n < 0 || (size_t)n >= sizeof(msg))
        n = 0;
    va_start(ap, fmt);
    vsnprintf(msg + n, sizeof(msg) - (size_t)n, fmt, ap);
    va_end(ap);
    op_finish(op, &res);
}

static bool valid_bucket(const char *b)
{
    size_t n = b ? strlen(b) : 0;

    if (n < 3 || n > 63 || !isalnum((unsigned char)b[0]) || !isalnum((unsigned char)b[n - 1]))
        return false;
    for (size_t i = 0; i < n; i++) {
        if (!islower((unsigned char)b[i]) && !isdigit((unsigned char)b[i]) && b[i] != '-' &&
            b[i] != '.')
            return false;
    }
    return true;
}

int tm_s3_create(uv_loop_t *loop, struct tm_http *http, const struct tm_s3_options *opts,
                 struct tm_s3 **ret_s3, char *err, size_t errsize)
{
    struct tm_s3 *s3;
    const char *ep;
    size_t n;

    if (!loop || !http || !opts || !ret_s3)
        return TM_EINVAL;
    ep = opts->endpoint;
    if (!ep || (strncmp(ep, "http://", 7) != 0 && strncmp(ep, "https://", 8) != 0)) {
        snprintf(err, errsize, "endpoint: wants http:// or https://");
        return TM_EINVAL;
    }
    n = strlen(ep);
    while (n > 0 && ep[n - 1] == '/')
        n--;
    if (memchr(ep + 8, '/', n > 8 ? n - 8 : 0) || strpbrk(ep, "?#@ ")) {
        snprintf(err, errsize, "endpoint: scheme://host[:port] only (the bucket goes in the path)");
        return TM_EINVAL;
    }
    if (!opts->region || !*opts->region || strlen(opts->region) > 64 ||
        strspn(opts->region, "abcdefghijklmnopqrstuvwxyz0123456789-") != strlen(opts->region)) {
        snprintf(err, errsize, "region: wants a name such as us-east-1");
        return TM_EINVAL;
    }
    if (!valid_bucket(opts->bucket)) {
        snprintf(err, errsize, "bucket: 3 to 63 of a-z 0-9 . -, starting and ending alphanumeric");
        return TM_EINVAL;
    }
    s3 = calloc(1, sizeof(*s3));
    if (!s3)
        return TM_ENOMEM;
    s3->loop = loop;
    s3->http = http;
    s3->endpoint = strndup(ep, n);
    s3->region = strdup(opts->region);
    s3->bucket = strdup(opts->bucket);
    s3->ca_file = opts->ca_file ? strdup(opts->ca_file) : NULL;
    s3->timeout_ms = opts->timeout_ms > 0 ? opts->timeout_ms : S3_DEFAULT_TIMEOUT_MS;
    s3->max_active = opts->max_inflight > 0 ? opts->max_inflight : S3_DEFAULT_MAX_INFLIGHT;
    if (!s3->endpoint || !s3->region || !s3->bucket || (opts->ca_file && !s3->ca_file)) {
        s3_free(s3);
        return TM_ENOMEM;
    }
    *ret_s3 = s3;
    return 0;
}

void tm_s3_set_credential_source(struct tm_s3 *s3, tm_s3_cred_get get, void *source)
{
    s3->get = get;
    s3->source = source;
}

int tm_s3_set_credentials(struct tm_s3 *s3, const struct tm_aws_credentials *cred)
{
    if (!s3 || !cred || !cred->access_key[0] || !cred->secret_key[0])
        return TM_EINVAL;
    s3->fixed = *cred;
    s3->have_fixed = true;
    return 0;
}

unsigned tm_s3_inflight(const struct tm_s3 *s3)
{
    return s3->inflight;
}

void tm_s3_close(struct tm_s3 *s3)
{
    if (!s3)
        return;
    s3->closing = true;
    if (s3->inflight == 0)
        s3_free(s3);
}

/* S3's error document: <Error><Code>NoSuchKey</Code><Message>...</Message>. */
static void fail_from_answer(struct s3_op *op, const struct tm_http_response *resp)
{
    struct tm_xdoc d;
    char code[64] = "", message[200] = "", xerr[128];
    int status;

    if (resp->body_len > 0 && tm_xdoc_parse(&d, resp->body, resp->body_len, xerr, sizeof(xerr)) == 0) {
        tm_xdoc_copy_cut(&d, 0, "Code", code, sizeof(code));
        tm_xdoc_copy_cut(&d, 0, "Message", message, sizeof(message));
        tm_xdoc_release(&d);
    }
    if (resp->http_status == 404)
        status = TM_ENOTFOUND;
    else if (resp->http_status == 401 || resp->http_status == 403)
        status = TM_EAUTH;
    else if (resp->http_status == 503 && strcmp(code, "SlowDown") == 0)
        status = TM_ETHROTTLED;
    else if (resp->http_status >= 500)
        status = TM_EUNAVAIL;
    else if (resp->http_status >= 400)
        status = TM_EINVAL;
    else
        status = TM_EBADREPLY;
    op_fail(op, status, resp->http_status, "HTTP %ld %s%s%s", resp->http_status,
            code[0] ? code : "(no code)", message[0] ? ": " : "", message);
}

/* ListObjectsV2: <ListBucketResult><Contents><Key/><Size/></Contents>...
 * <NextContinuationToken/>; each key and size is copied out of the tree. */
static void answer_list(struct s3_op *op, const struct tm_http_response *resp)
{
    struct tm_xdoc d;
    struct tm_s3_result res = {.http_status = resp->http_status};
    const char **keys = NULL;
    int64_t *sizes = NULL;
    size_t n = 0, cap = 0;
    char xerr[128];
    const char *truncated, *token;
    int r;

    r = tm_xdoc_parse(&d, resp->body, resp->body_len, xerr, sizeof(xerr));
    if (r < 0) {
        op_fail(op, r, resp->http_status, "listing: %s", xerr);
        return;
    }
    if (strcmp(tm_xdoc_name(&d, 0), "ListBucketResult") != 0) {
        tm_xdoc_release(&d);
        op_fail(op, TM_EBADREPLY, resp->http_status, "listing: root is not ListBucketResult");
        return;
    }
    for (int c = d.nodes[0].first; c >= 0; c = d.nodes[c].next) {
        if (strcmp(tm_xdoc_name(&d, c), "Contents") != 0)
            continue;
        if (n == cap) {
            size_t ncap = cap ? cap * 2 : 64;
            const char **nk = realloc(keys, ncap * sizeof(*keys));
            int64_t *ns = nk ? realloc(sizes, ncap * sizeof(*sizes)) : NULL;

            if (nk)
                keys = nk;
            if (ns)
                sizes = ns;
            if (!nk || !ns) {
                r = TM_ENOMEM;
                break;
            }
            cap = ncap;
        }
        keys[n] = tm_xdoc_get(&d, c, "Key");
        sizes[n] = strtoll(tm_xdoc_get(&d, c, "Size"), NULL, 10);
        n++;
    }
    truncated = tm_xdoc_get(&d, 0, "IsTruncated");
    token = tm_xdoc_get(&d, 0, "NextContinuationToken");
    if (r == 0 && strcmp(truncated, "true") == 0 && !*token)
        r = TM_EBADREPLY;
    if (r < 0) {
        free(keys);
        free(sizes);
        tm_xdoc_release(&d);
        op_fail(op, r, resp->http_status, "listing: %s",
                r == TM_ENOMEM ? "out of memory" : "truncated without a continuation token");
        return;
    }
    res.keys = keys;
    res.sizes = sizes;
    res.nkeys = n;
    res.next_token = strcmp(truncated, "true") == 0 ? token : NULL;
    op_finish(op, &res);
    free(keys);
    free(sizes);
    tm_xdoc_release(&d);
}

/* DeleteObjects in quiet mode answers only the keys it could not delete. */
static void answer_delete(struct s3_op *op, const struct tm_http_response *resp)
{
    struct tm_xdoc d;
    struct tm_s3_result res = {.http_status = resp->http_status};
    char xerr[128];
    int r;

    r = tm_xdoc_parse(&d, resp->body, resp->body_len, xerr, sizeof(xerr));
    if (r < 0) {
        op_fail(op, r, resp->http_status, "delete answer: %s", xerr);
        return;
    }
    for (int c = d.nodes[0].first; c >= 0; c = d.nodes[c].next) {
        char key[160], code[64];

        if (strcmp(tm_xdoc_name(&d, c), "Error") != 0)
            continue;
        tm_xdoc_copy_cut(&d, c, "Key", key, sizeof(key));
        tm_xdoc_copy_cut(&d, c, "Code", code, sizeof(code));
        tm_xdoc_release(&d);
        op_fail(op, strcmp(code, "AccessDenied") == 0 ? TM_EAUTH : TM_EUNAVAIL, resp->http_status,
                "key %s not deleted: %s", key, code);
        return;
    }
    tm_xdoc_release(&d);
    op_finish(op, &res);
}

static void on_answer(const struct tm_http_response *resp, void *data)
{
    struct s3_op *op = data;
    struct tm_s3_result res = {.http_status = resp->http_status};

    if (resp->status < 0) {
        op_fail(op, resp->status, 0, "%s", resp->error ? resp->error : tm_strerror(resp->status));
        return;
    }
    /* A range that starts at the end of the object: nothing to read. */
    if (op->kind == S3_GET && resp->http_status == 416) {
        res.body = "";
        op_finish(op, &res);
        return;
    }
    if (op->kind == S3_MKBUCKET && resp->http_status == 409 && resp->body &&
        strstr(resp->body, "BucketAlreadyOwnedByYou")) {
        op_finish(op, &res);
        return;
    }
    if (resp->http_status < 200 || resp->http_status > 299) {
        fail_from_answer(op, resp);
        return;
    }
    switch (op->kind) {
    case S3_LIST:
        answer_list(op, resp);
        return;
    case S3_DELETE:
        answer_delete(op, resp);
        return;
    case S3_GET:
        if (resp->body_len > op->max_body) {
            op_fail(op, TM_EBADREPLY, resp->http_status, "answer of %zu bytes, more than the %zu asked for",
                    resp->body_len, op->max_body);
            return;
        }
        res.body = resp->body;
        res.body_len = resp->body_len;
        break;
    default:
        break;
    }
    op_finish(op, &res);
}

static void on_credentials(int status, const struct tm_aws_credentials *cred, const char *error,
                           void *data)
{
    struct s3_op *op = data;
    struct tm_s3 *s3 = op->s3;
    char amz_date[17], hash[65];
    const char *extra[4] = {0};
    char ctype[96];
    size_t ne = 0;
    char **headers = NULL;
    char *url = NULL;
    size_t ulen;
    int r;

    if (status < 0) {
        op_fail(op, status, 0, "no credentials: %s", error ? error : tm_strerror(status));
        return;
    }
    if (op->content_type) {
        snprintf(ctype, sizeof(ctype), "Content-Type:%s", op->content_type);
        extra[ne++] = ctype;
    }
    if (op->range[0])
        extra[ne++] = op->range;
    if (op->md5[0])
        extra[ne++] = op->md5;
    r = tm_sigv4_sha256_hex(op->body, op->body_len, hash);
    tm_sigv4_format_date((int64_t)time(NULL) * 1000, amz_date);
    if (r == 0) {
        struct tm_sigv4_s3_request req = {
            .method = op->method,
            .endpoint_url = s3->endpoint,
            .path = op->path,
            .query = op->query,
            .extra = extra,
            .payload_hash = hash,
            .region = s3->region,
            .amz_date = amz_date,
        };

        r = tm_sigv4_sign_s3(&req, cred, &headers);
    }
    if (r < 0) {
        op_fail(op, r, 0, "could not sign the request (%s)", tm_strerror(r));
        return;
    }
    ulen = strlen(s3->endpoint) + strlen(op->path) + (op->query ? strlen(op->query) + 1 : 0) + 1;
    url = malloc(ulen);
    if (!url) {
        tm_sigv4_headers_free(headers);
        op_fail(op, TM_ENOMEM, 0, "out of memory");
        return;
    }
    snprintf(url, ulen, "%s%s%s%s", s3->endpoint, op->path, op->query ? "?" : "",
             op->query ? op->query : "");
    {
        struct tm_http_request hreq = {
            .method = op->method,
            .url = url,
            .headers = (const char *const *)headers,
            .body = op->body,
            .body_len = op->body_len,
            .timeout_ms = s3->timeout_ms,
            /* Room for S3's error document whatever the caller allows;
             * the caller's bound is checked on a 2xx below. */
            .max_body = op->max_body > S3_ERROR_BODY_MAX ? op->max_body : S3_ERROR_BODY_MAX,
            .ca_file = s3->ca_file,
        };

        r = tm_http_request(s3->http, &hreq, on_answer, op);
    }
    tm_sigv4_headers_free(headers);
    free(url);
    /* tm_http copied the body: ours can go now. */
    free(op->body);
    op->body = NULL;
    if (r < 0)
        op_fail(op, r, 0, "could not send (%s)", tm_strerror(r));
}

/* The fixed keys are handed over from a zero-delay timer, so that the
 * callback never runs inside the call that asked. */
struct fixed_wait {
    uv_timer_t timer;
    tm_s3_cred_cb cb;
    void *data;
    struct tm_s3 *s3;
};

static void fixed_closed(uv_handle_t *h)
{
    free(h);
}

static void fixed_fire(uv_timer_t *t)
{
    struct fixed_wait *w = (struct fixed_wait *)t;

    w->cb(0, &w->s3->fixed, NULL, w->data);
    uv_close((uv_handle_t *)t, fixed_closed);
}

static int fixed_get(void *source, tm_s3_cred_cb cb, void *data)
{
    struct tm_s3 *s3 = source;
    struct fixed_wait *w = calloc(1, sizeof(*w));

    if (!w)
        return TM_ENOMEM;
    w->cb = cb;
    w->data = data;
    w->s3 = s3;
    uv_timer_init(s3->loop, &w->timer);
    uv_timer_start(&w->timer, fixed_fire, 0, 0);
    return 0;
}

static int op_get_credentials(struct s3_op *op)
{
    struct tm_s3 *s3 = op->s3;

    if (s3->get)
        return s3->get(s3->source, on_credentials, op);
    return fixed_get(s3, on_credentials, op);
}

/* Build an op for bucket-relative key (NULL: the bucket itself) and start
 * it, or queue it while max_inflight ops are out: credentials first, then
 * the signed request (signed when it leaves, so its date is fresh). */
static int op_start(struct tm_s3 *s3, struct s3_op *op, const char *key)
{
    char *enc = NULL;
    size_t n;
    int r;

    op->s3 = s3;
    if (key) {
        r = tm_sigv4_uri_encode(key, true, &enc);
        if (r < 0)
            return r;
    }
    n = 1 + strlen(s3->bucket) + (enc ? 1 + strlen(enc) : 0) + 1;
    op->path = malloc(n);
    if (!op->path) {
        free(enc);
        return TM_ENOMEM;
    }
    snprintf(op->path, n, "/%s%s%s", s3->bucket, enc ? "/" : "", enc ? enc : "");
    free(enc);
    if (!s3->get && !s3->have_fixed)
        return TM_EAUTH;
    if (s3->active >= s3->max_active) {
        if (s3->wait_tail)
            s3->wait_tail->next = op;
        else
            s3->wait_head = op;
        s3->wait_tail = op;
        s3->inflight++;
        return 0;
    }
    r = op_get_credentials(op);
    if (r == 0) {
        op->launched = true;
        s3->active++;
        s3->inflight++;
    }
    return r;
}

/* A waiting op's turn (from op_finish: a failure is reported at once). */
static void op_launch(struct s3_op *op)
{
    int r;

    op->launched = true;
    op->s3->active++;
    r = op_get_credentials(op);
    if (r < 0)
        op_fail(op, r, 0, "no credentials (%s)", tm_strerror(r));
}

static bool valid_key(const char *key)
{
    size_t n = key ? strlen(key) : 0;

    if (n == 0 || n > S3_MAX_KEY || key[0] == '/')
        return false;
    for (size_t i = 0; i < n; i++) {
        if ((unsigned char)key[i] < ' ' || key[i] == 127)
            return false;
    }
    return true;
}

static struct s3_op *op_new(enum s3_kind kind, const char *method, const char *verb,
                            const char *key, tm_s3_cb cb, void *data)
{
    struct s3_op *op = calloc(1, sizeof(*op));
    size_t n;

    if (!op)
        return NULL;
    op->kind = kind;
    op->method = method;
    op->cb = cb;
    op->data = data;
    n = strlen(verb) + 1 + (key ? strlen(key) : 0) + 1;
    op->what = malloc(n);
    if (!op->what) {
        free(op);
        return NULL;
    }
    snprintf(op->what, n, "%s%s%s", verb, key ? " " : "", key ? key : "");
    return op;
}

static int op_go(struct tm_s3 *s3, struct s3_op *op, const char *key)
{
    int r = op_start(s3, op, key);

    if (r < 0)
        op_free(op);
    return r;
}

int tm_s3_put(struct tm_s3 *s3, const char *key, const void *body, size_t len, tm_s3_cb cb,
              void *data)
{
    struct s3_op *op;

    if (!s3 || !cb || !valid_key(key) || (len && !body))
        return TM_EINVAL;
    if (s3->closing)
        return TM_ECANCELED;
    op = op_new(S3_PUT, "PUT", "put", key, cb, data);
    if (!op)
        return TM_ENOMEM;
    op->content_type = "application/octet-stream";
    if (len) {
        op->body = malloc(len);
        if (!op->body) {
            op_free(op);
            return TM_ENOMEM;
        }
        memcpy(op->body, body, len);
        op->body_len = len;
    }
    return op_go(s3, op, key);
}

int tm_s3_get(struct tm_s3 *s3, const char *key, uint64_t offset, uint64_t length,
              size_t max_body, tm_s3_cb cb, void *data)
{
    struct s3_op *op;

    if (!s3 || !cb || !valid_key(key) || (length && offset + length < offset))
        return TM_EINVAL;
    if (s3->closing)
        return TM_ECANCELED;
    op = op_new(S3_GET, "GET", "get", key, cb, data);
    if (!op)
        return TM_ENOMEM;
    op->max_body = max_body ? max_body : S3_DEFAULT_MAX_GET;
    if (length)
        snprintf(op->range, sizeof(op->range), "Range:bytes=%llu-%llu",
                 (unsigned long long)offset, (unsigned long long)(offset + length - 1));
    else if (offset)
        snprintf(op->range, sizeof(op->range), "Range:bytes=%llu-", (unsigned long long)offset);
    return op_go(s3, op, key);
}

int tm_s3_list(struct tm_s3 *s3, const char *prefix, const char *token, unsigned max_keys,
               tm_s3_cb cb, void *data)
{
    char *ep = NULL, *et = NULL;
    struct s3_op *op;
    size_t n;
    int r;

    if (!s3 || !cb || !prefix || strlen(prefix) > S3_MAX_KEY || (token && strlen(token) > 4096))
        return TM_EINVAL;
    if (s3->closing)
        return TM_ECANCELED;
    op = op_new(S3_LIST, "GET", "list", prefix, cb, data);
    if (!op)
        return TM_ENOMEM;
    op->max_body = 16u << 20;
    r = tm_sigv4_uri_encode(prefix, false, &ep);
    if (r == 0 && token)
        r = tm_sigv4_uri_encode(token, false, &et);
    if (r == 0) {
        n = strlen(ep) + (et ? strlen(et) : 0) + 80;
        op->query = malloc(n);
        if (!op->query)
            r = TM_ENOMEM;
        else
            snprintf(op->query, n, "list-type=2&max-keys=%u&prefix=%s%s%s",
                     max_keys && max_keys <= 1000 ? max_keys : 1000, ep,
                     et ? "&continuation-token=" : "", et ? et : "");
    }
    free(ep);
    free(et);
    if (r < 0) {
        op_free(op);
        return r;
    }
    return op_go(s3, op, NULL);
}

/* Append s to a growable buffer, with XML's five special characters
 * escaped when escape is set (a key may hold any of them). */
static int buf_add(char **buf, size_t *len, size_t *cap, const char *s, bool escape)
{
    for (; *s; s++) {
        char one[2] = {*s, '\0'};
        const char *e = one;
        size_t n;

        if (escape) {
            switch (*s) {
            case '&': e = "&amp;"; break;
            case '<': e = "&lt;"; break;
            case '>': e = "&gt;"; break;
            case '"': e = "&quot;"; break;
            case '\'': e = "&apos;"; break;
            default: break;
            }
        }
        n = strlen(e);
        if (*len + n + 1 > *cap) {
            size_t ncap = *cap ? *cap * 2 : 4096;
            char *nb;

            while (ncap < *len + n + 1)
                ncap *= 2;
            nb = realloc(*buf, ncap);
            if (!nb)
                return TM_ENOMEM;
            *buf = nb;
            *cap = ncap;
        }
        memcpy(*buf + *len, e, n + 1);
        *len += n;
    }
    return 0;
}

/* Content-MD5 (base64 of the body's MD5): DeleteObjects requires it. */
static int content_md5(const char *body, size_t len, char *out, size_t size)
{
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned int mdlen = 0;
    unsigned char b64[32];

    if (!EVP_Digest(body, len, md, &mdlen, EVP_md5(), NULL) || mdlen != 16)
        return TM_ENOMEM;
    if (EVP_EncodeBlock(b64, md, 16) != 24)
        return TM_ENOMEM;
    snprintf(out, size, "Content-MD5:%s", (const char *)b64);
    return 0;
}

int tm_s3_delete(struct tm_s3 *s3, const char *const *keys, size_t nkeys, tm_s3_cb cb, void *data)
{
    struct s3_op *op;
    char *buf = NULL;
    size_t len = 0, cap = 0;
    char verb[48];
    int r = 0;

    if (!s3 || !cb || !keys || nkeys == 0 || nkeys > S3_MAX_DELETE)
        return TM_EINVAL;
    for (size_t i = 0; i < nkeys; i++) {
        if (!valid_key(keys[i]))
            return TM_EINVAL;
    }
    if (s3->closing)
        return TM_ECANCELED;
    snprintf(verb, sizeof(verb), "delete %zu keys from", nkeys);
    op = op_new(S3_DELETE, "POST", verb, keys[0], cb, data);
    if (!op)
        return TM_ENOMEM;
    r = buf_add(&buf, &len, &cap, "<Delete><Quiet>true</Quiet>", false);
    for (size_t i = 0; i < nkeys && r == 0; i++) {
        r = buf_add(&buf, &len, &cap, "<Object><Key>", false);
        if (r == 0)
            r = buf_add(&buf, &len, &cap, keys[i], true);
        if (r == 0)
            r = buf_add(&buf, &len, &cap, "</Key></Object>", false);
    }
    if (r == 0)
        r = buf_add(&buf, &len, &cap, "</Delete>", false);
    if (r == 0)
        r = content_md5(buf, len, op->md5, sizeof(op->md5));
    op->query = r == 0 ? strdup("delete=") : NULL;
    if (r == 0 && !op->query)
        r = TM_ENOMEM;
    if (r < 0) {
        free(buf);
        op_free(op);
        return r;
    }
    op->body = buf;
    op->body_len = len;
    op->content_type = "application/xml";
    op->max_body = 16u << 20;
    return op_go(s3, op, NULL);
}

int tm_s3_create_bucket(struct tm_s3 *s3, tm_s3_cb cb, void *data)
{
    struct s3_op *op;
    char *body = NULL;
    int n;

    if (!s3 || !cb)
        return TM_EINVAL;
    if (s3->closing)
        return TM_ECANCELED;
    op = op_new(S3_MKBUCKET, "PUT", "create bucket", s3->bucket, cb, data);
    if (!op)
        return TM_ENOMEM;
    /* us-east-1 is the one region that takes no location constraint. */
    if (strcmp(s3->region, "us-east-1") != 0) {
        n = asprintf(&body,
                     "<CreateBucketConfiguration xmlns=\"http://s3.amazonaws.com/doc/2006-03-01/\">"
                     "<LocationConstraint>%s</LocationConstraint></CreateBucketConfiguration>",
                     s3->region);
        if (n < 0) {
            op_free(op);
            return TM_ENOMEM;
        }
        op->body = body;
        op->body_len = (size_t)n;
        op->content_type = "application/xml";
    }
    return op_go(s3, op, NULL);
}
