/*
 * core/sigv4.c: AWS Signature Version 4 (see sigv4.h).
 *
 * The canonicaliser is ours; SHA-256 and HMAC are OpenSSL's.  Every string
 * is built in a bounded growable buffer (struct sbuf), so hostile input
 * (the fuzz target feeds this file) can cost memory only up to SBUF_MAX.
 * Buffers that may hold a session token or key material are wiped before
 * they are freed.
 *
 * One file on purpose: it is one algorithm (canonical request, string to
 * sign, signature) over one buffer type, read against the AWS
 * specification from top to bottom, and the fuzz target and the botocore
 * cross-check compile it alone.
 */
#include "core/sigv4.h"

#include <ctype.h>
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>

#include "core/err.h"

/* No canonical request we produce for a real call comes near this; it only
 * bounds what hostile or buggy input can make us allocate. */
#define SBUF_MAX (8u << 20)
#define SIGV4_ALGORITHM "AWS4-HMAC-SHA256"
/* Bounds the header count so the sort index stays small. */
#define MAX_HEADERS 512

struct sbuf {
    char *p;
    size_t len, cap;
};

static void sbuf_wipe_free(struct sbuf *b)
{
    if (b->p) {
        OPENSSL_cleanse(b->p, b->cap);
        free(b->p);
    }
    *b = (struct sbuf){0};
}

static int sbuf_reserve(struct sbuf *b, size_t more)
{
    size_t need, ncap;
    char *np;

    if (more > SBUF_MAX || b->len + more + 1 > SBUF_MAX)
        return TM_EINVAL;
    need = b->len + more + 1;
    if (need <= b->cap)
        return 0;
    ncap = b->cap ? b->cap : 256;
    while (ncap < need)
        ncap *= 2;
    /* Not realloc: the old block may hold a token and must be wiped. */
    np = malloc(ncap);
    if (!np)
        return TM_ENOMEM;
    if (b->p) {
        memcpy(np, b->p, b->len);
        OPENSSL_cleanse(b->p, b->cap);
        free(b->p);
    }
    b->p = np;
    b->cap = ncap;
    b->p[b->len] = '\0';
    return 0;
}

static int sbuf_add(struct sbuf *b, const char *s, size_t n)
{
    int r = sbuf_reserve(b, n);

    if (r < 0)
        return r;
    if (n)
        memcpy(b->p + b->len, s, n);
    b->len += n;
    b->p[b->len] = '\0';
    return 0;
}

static int sbuf_adds(struct sbuf *b, const char *s)
{
    return sbuf_add(b, s, strlen(s));
}

static int sbuf_addc(struct sbuf *b, char c)
{
    return sbuf_add(b, &c, 1);
}

/* Hand the string to the caller: the buffer no longer owns it. */
static char *sbuf_take(struct sbuf *b)
{
    char *p = b->p;

    if (!p) {
        p = calloc(1, 1);
    }
    *b = (struct sbuf){0};
    return p;
}

static bool is_unreserved(unsigned char c)
{
    return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
           c == '-' || c == '_' || c == '.' || c == '~';
}

/* RFC 3986 encoding as SigV4 defines it; keep_slash for paths. */
static int uri_encode(struct sbuf *b, const char *s, size_t n, bool keep_slash)
{
    static const char hex[] = "0123456789ABCDEF";
    int r = 0;

    for (size_t i = 0; i < n && r == 0; i++) {
        unsigned char c = (unsigned char)s[i];

        if (is_unreserved(c) || (keep_slash && c == '/')) {
            r = sbuf_addc(b, (char)c);
        } else {
            char e[3] = {'%', hex[c >> 4], hex[c & 15]};

            r = sbuf_add(b, e, 3);
        }
    }
    return r;
}

/* Decode %XX escapes ('+' stays '+': AWS does not read it as a space). */
static int uri_decode(struct sbuf *b, const char *s, size_t n)
{
    int r = 0;

    for (size_t i = 0; i < n && r == 0; i++) {
        if (s[i] == '%') {
            int hi, lo;

            if (i + 2 >= n)
                return TM_EINVAL;
            hi = OPENSSL_hexchar2int((unsigned char)s[i + 1]);
            lo = OPENSSL_hexchar2int((unsigned char)s[i + 2]);
            if (hi < 0 || lo < 0)
                return TM_EINVAL;
            r = sbuf_addc(b, (char)(hi * 16 + lo));
            i += 2;
        } else {
            r = sbuf_addc(b, s[i]);
        }
    }
    return r;
}

static void hex_encode(const unsigned char *in, size_t n, char *out)
{
    static const char hex[] = "0123456789abcdef";

    for (size_t i = 0; i < n; i++) {
        out[2 * i] = hex[in[i] >> 4];
        out[2 * i + 1] = hex[in[i] & 15];
    }
    out[2 * n] = '\0';
}

static int sha256_hex(const void *data, size_t n, char out[65])
{
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned int mdlen = 0;

    if (!EVP_Digest(n ? data : "", n, md, &mdlen, EVP_sha256(), NULL) || mdlen != 32)
        return TM_ENOMEM;
    hex_encode(md, 32, out);
    return 0;
}

static int hmac_sha256(const void *key, size_t keylen, const void *msg, size_t msglen,
                       unsigned char out[32])
{
    unsigned int outlen = 0;

    if (!HMAC(EVP_sha256(), key, (int)keylen, msg, msglen, out, &outlen) || outlen != 32)
        return TM_ENOMEM;
    return 0;
}

static bool valid_amz_date(const char *d)
{
    if (!d || strlen(d) != 16 || d[8] != 'T' || d[15] != 'Z')
        return false;
    for (int i = 0; i < 15; i++) {
        if (i != 8 && !isdigit((unsigned char)d[i]))
            return false;
    }
    return true;
}

/* Region and service go into the credential scope between '/': refuse
 * anything that could forge another scope or break the header. */
static bool valid_scope_part(const char *s)
{
    if (!s || !*s || strlen(s) > 64)
        return false;
    for (; *s; s++) {
        if (!isalnum((unsigned char)*s) && *s != '-' && *s != '_')
            return false;
    }
    return true;
}

static bool valid_request(const struct tm_sigv4_request *req)
{
    if (!req || !req->method || !*req->method || !req->path || !valid_amz_date(req->amz_date) ||
        !valid_scope_part(req->region) || !valid_scope_part(req->service))
        return false;
    if (req->payload_len && !req->payload)
        return false;
    if (req->payload_hash && strcmp(req->payload_hash, "UNSIGNED-PAYLOAD") != 0) {
        if (strlen(req->payload_hash) != 64)
            return false;
        for (const char *h = req->payload_hash; *h; h++) {
            if (!isdigit((unsigned char)*h) && (*h < 'a' || *h > 'f'))
                return false;
        }
    }
    for (const char *m = req->method; *m; m++) {
        if (!isupper((unsigned char)*m) && !isdigit((unsigned char)*m) && *m != '-' && *m != '_')
            return false;
    }
    return true;
}

/*
 * Canonical URI.  Dot segments and empty segments are removed (the generic
 * vectors in normalize-path/ want "//example//" -> "/example/"), a trailing
 * '/' is kept, and the wire path is URI-encoded once more: that is the
 * "encode twice" rule for services other than S3 (a raw space becomes %20,
 * a wire "%20" becomes %2520), the same as botocore.  S3 wants neither the
 * normalisation nor the second encoding: canonical_uri_s3() below.
 */
static int canonical_uri(struct sbuf *out, const char *path)
{
    size_t n = strlen(path);
    const char **seg = NULL;
    size_t *seglen = NULL;
    size_t nseg = 0, maxseg = 1;
    bool trailing;
    int r = 0;

    /* Only the path: a query or fragment here is the caller's mistake. */
    if (n == 0 || path[0] != '/')
        return TM_EINVAL;
    for (size_t i = 0; i < n; i++) {
        if (path[i] == '/')
            maxseg++;
    }
    seg = calloc(maxseg, sizeof(*seg));
    seglen = calloc(maxseg, sizeof(*seglen));
    if (!seg || !seglen) {
        r = TM_ENOMEM;
        goto out;
    }
    for (size_t i = 0; i < n;) {
        size_t j = i;

        while (j < n && path[j] != '/')
            j++;
        if (j - i == 0 || (j - i == 1 && path[i] == '.')) {
            /* Empty or ".": nothing. */
        } else if (j - i == 2 && path[i] == '.' && path[i + 1] == '.') {
            if (nseg > 0)
                nseg--;
        } else {
            seg[nseg] = path + i;
            seglen[nseg] = j - i;
            nseg++;
        }
        i = j + 1;
    }
    trailing = path[n - 1] == '/';
    r = sbuf_addc(out, '/');
    for (size_t k = 0; k < nseg && r == 0; k++) {
        r = uri_encode(out, seg[k], seglen[k], false);
        if (r == 0 && (k + 1 < nseg || trailing))
            r = sbuf_addc(out, '/');
    }
out:
    free(seg);
    free(seglen);
    return r;
}

/*
 * S3's canonical URI: the wire path as sent, no normalisation and no second
 * encoding.  Only what an encoder makes is taken (unreserved, '/', %XX with
 * upper-case hex), so that what we sign is exactly what curl sends.
 */
static int canonical_uri_s3(struct sbuf *out, const char *path)
{
    size_t n = strlen(path);

    if (n == 0 || path[0] != '/')
        return TM_EINVAL;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)path[i];

        if (c == '%') {
            if (i + 2 >= n || !isxdigit((unsigned char)path[i + 1]) ||
                !isxdigit((unsigned char)path[i + 2]) || islower((unsigned char)path[i + 1]) ||
                islower((unsigned char)path[i + 2]))
                return TM_EINVAL;
            i += 2;
        } else if (!is_unreserved(c) && c != '/') {
            return TM_EINVAL;
        }
    }
    return sbuf_add(out, path, n);
}

struct qparam {
    char *key;   /* encoded */
    char *value; /* encoded */
};

static int qparam_cmp(const void *a, const void *b)
{
    const struct qparam *x = a, *y = b;
    int c = strcmp(x->key, y->key);

    return c ? c : strcmp(x->value, y->value);
}

/* Decode then encode one query component, so that "%41", "A" and a raw
 * byte all end up in the one form the server computes. */
static int requote(const char *s, size_t n, char **ret)
{
    struct sbuf dec = {0}, enc = {0};
    int r;

    r = uri_decode(&dec, s, n);
    if (r == 0)
        r = uri_encode(&enc, dec.p ? dec.p : "", dec.len, false);
    if (r == 0)
        *ret = sbuf_take(&enc);
    if (r == 0 && !*ret)
        r = TM_ENOMEM;
    sbuf_wipe_free(&dec);
    sbuf_wipe_free(&enc);
    return r;
}

static int canonical_query(struct sbuf *out, const char *query)
{
    struct qparam *params = NULL;
    size_t np = 0, maxp = 1, n;
    int r = 0;

    if (!query || !*query)
        return 0;
    n = strlen(query);
    for (size_t i = 0; i < n; i++) {
        if (query[i] == '&')
            maxp++;
    }
    params = calloc(maxp, sizeof(*params));
    if (!params)
        return TM_ENOMEM;
    for (size_t i = 0; i < n && r == 0;) {
        size_t j = i, eq;

        while (j < n && query[j] != '&')
            j++;
        if (j > i) {
            eq = i;
            while (eq < j && query[eq] != '=')
                eq++;
            r = requote(query + i, eq - i, &params[np].key);
            if (r == 0)
                r = requote(query + eq + (eq < j), j - eq - (eq < j), &params[np].value);
            np++;
        }
        i = j + 1;
    }
    if (r < 0)
        goto out;
    qsort(params, np, sizeof(*params), qparam_cmp);
    for (size_t k = 0; k < np && r == 0; k++) {
        if (k > 0)
            r = sbuf_addc(out, '&');
        if (r == 0)
            r = sbuf_adds(out, params[k].key);
        if (r == 0)
            r = sbuf_addc(out, '=');
        if (r == 0)
            r = sbuf_adds(out, params[k].value);
    }
out:
    for (size_t k = 0; k < maxp; k++) {
        free(params[k].key);
        free(params[k].value);
    }
    free(params);
    return r;
}

struct hdr {
    char *name;        /* lower case */
    struct sbuf value; /* trimmed, spaces collapsed, duplicates joined with ',' */
    size_t order;      /* first appearance, for a stable sort */
};

static int hdr_cmp(const void *a, const void *b)
{
    const struct hdr *x = a, *y = b;
    int c = strcmp(x->name, y->name);

    if (c)
        return c;
    return x->order < y->order ? -1 : x->order > y->order;
}

static bool is_sp(char c)
{
    return c == ' ' || c == '\t';
}

/* Append a value trimmed, with each run of spaces or tabs as one space. */
static int add_trimmed(struct sbuf *b, const char *s, size_t n)
{
    size_t i = 0;
    bool space = false;
    int r = 0;

    while (n > 0 && (is_sp(s[n - 1]) || s[n - 1] == '\r' || s[n - 1] == '\n'))
        n--;
    while (i < n && is_sp(s[i]))
        i++;
    for (; i < n && r == 0; i++) {
        if (is_sp(s[i])) {
            space = true;
            continue;
        }
        if (space)
            r = sbuf_addc(b, ' ');
        space = false;
        if (r == 0)
            r = sbuf_addc(b, s[i]);
    }
    return r;
}

static void hdrs_free(struct hdr *h, size_t n)
{
    for (size_t i = 0; h && i < n; i++) {
        free(h[i].name);
        sbuf_wipe_free(&h[i].value);
    }
    free(h);
}

/*
 * Collect the headers: names lower-cased, repeated names merged in order,
 * folded continuation lines (leading space or tab) joined with ','.  The
 * result is sorted by name.  Values may hold a session token: wiped later.
 */
static int collect_headers(const char *const *lines, struct hdr **ret, size_t *ret_n)
{
    struct hdr *h = NULL;
    size_t nh = 0, nlines = 0;
    struct hdr *last = NULL;
    int r = 0;

    for (; lines && lines[nlines]; nlines++) {
        if (nlines >= MAX_HEADERS)
            return TM_EINVAL;
    }
    h = calloc(nlines ? nlines : 1, sizeof(*h));
    if (!h)
        return TM_ENOMEM;
    for (size_t i = 0; i < nlines && r == 0; i++) {
        const char *line = lines[i];
        const char *colon, *nb, *ne;
        size_t k;

        if (is_sp(line[0])) {
            if (!last) {
                r = TM_EINVAL;
                break;
            }
            r = sbuf_addc(&last->value, ',');
            if (r == 0)
                r = add_trimmed(&last->value, line, strlen(line));
            continue;
        }
        colon = strchr(line, ':');
        if (!colon) {
            r = TM_EINVAL;
            break;
        }
        nb = line;
        ne = colon;
        while (ne > nb && is_sp(ne[-1]))
            ne--;
        if (ne == nb) {
            r = TM_EINVAL;
            break;
        }
        for (const char *c = nb; c < ne; c++) {
            /* A token (RFC 9110): no controls, separators or spaces. */
            if ((unsigned char)*c <= ' ' || (unsigned char)*c >= 127 || strchr("\"(),/:;<=>?@[\\]{}", *c)) {
                r = TM_EINVAL;
                break;
            }
        }
        if (r < 0)
            break;
        for (k = 0; k < nh; k++) {
            if (strlen(h[k].name) == (size_t)(ne - nb) && strncasecmp(h[k].name, nb, (size_t)(ne - nb)) == 0)
                break;
        }
        if (k == nh) {
            h[nh].name = strndup(nb, (size_t)(ne - nb));
            if (!h[nh].name) {
                r = TM_ENOMEM;
                break;
            }
            for (char *c = h[nh].name; *c; c++)
                *c = (char)tolower((unsigned char)*c);
            h[nh].order = nh;
            r = sbuf_reserve(&h[nh].value, 0);
            nh++;
        } else {
            r = sbuf_addc(&h[k].value, ',');
        }
        if (r == 0)
            r = add_trimmed(&h[k].value, colon + 1, strlen(colon + 1));
        last = &h[k];
    }
    if (r < 0) {
        hdrs_free(h, nh);
        return r;
    }
    qsort(h, nh, sizeof(*h), hdr_cmp);
    *ret = h;
    *ret_n = nh;
    return 0;
}

/* The signed-headers list and the canonical request in one pass. */
static int build_canonical(const struct tm_sigv4_request *req, struct sbuf *creq,
                           struct sbuf *signed_headers)
{
    struct hdr *h = NULL;
    size_t nh = 0;
    char payload_hash[65];
    int r;

    if (!valid_request(req))
        return TM_EINVAL;
    r = collect_headers(req->headers, &h, &nh);
    if (r < 0)
        return r;
    r = sbuf_adds(creq, req->method);
    if (r == 0)
        r = sbuf_addc(creq, '\n');
    if (r == 0)
        r = req->s3 ? canonical_uri_s3(creq, req->path) : canonical_uri(creq, req->path);
    if (r == 0)
        r = sbuf_addc(creq, '\n');
    if (r == 0)
        r = canonical_query(creq, req->query);
    if (r == 0)
        r = sbuf_addc(creq, '\n');
    for (size_t i = 0; i < nh && r == 0; i++) {
        r = sbuf_adds(creq, h[i].name);
        if (r == 0)
            r = sbuf_addc(creq, ':');
        if (r == 0)
            r = sbuf_add(creq, h[i].value.p ? h[i].value.p : "", h[i].value.len);
        if (r == 0)
            r = sbuf_addc(creq, '\n');
        if (r == 0 && i > 0)
            r = sbuf_addc(signed_headers, ';');
        if (r == 0)
            r = sbuf_adds(signed_headers, h[i].name);
    }
    if (r == 0)
        r = sbuf_reserve(signed_headers, 0);
    if (r == 0)
        r = sbuf_addc(creq, '\n');
    if (r == 0)
        r = sbuf_add(creq, signed_headers->p, signed_headers->len);
    if (r == 0)
        r = sbuf_addc(creq, '\n');
    if (r == 0 && req->payload_hash) {
        r = sbuf_adds(creq, req->payload_hash);
    } else {
        if (r == 0)
            r = sha256_hex(req->payload, req->payload_len, payload_hash);
        if (r == 0)
            r = sbuf_add(creq, payload_hash, 64);
    }
    hdrs_free(h, nh);
    return r;
}

int tm_sigv4_canonical_request(const struct tm_sigv4_request *req, char **ret_creq)
{
    struct sbuf creq = {0}, sh = {0};
    int r;

    if (!ret_creq)
        return TM_EINVAL;
    r = build_canonical(req, &creq, &sh);
    if (r == 0) {
        *ret_creq = sbuf_take(&creq);
        if (!*ret_creq)
            r = TM_ENOMEM;
    }
    sbuf_wipe_free(&creq);
    sbuf_wipe_free(&sh);
    return r;
}

static int build_sts(const struct tm_sigv4_request *req, const char *creq, struct sbuf *sts)
{
    char hash[65];
    int r;

    r = sha256_hex(creq, strlen(creq), hash);
    if (r == 0)
        r = sbuf_adds(sts, SIGV4_ALGORITHM "\n");
    if (r == 0)
        r = sbuf_adds(sts, req->amz_date);
    if (r == 0)
        r = sbuf_addc(sts, '\n');
    if (r == 0)
        r = sbuf_add(sts, req->amz_date, 8);
    if (r == 0)
        r = sbuf_addc(sts, '/');
    if (r == 0)
        r = sbuf_adds(sts, req->region);
    if (r == 0)
        r = sbuf_addc(sts, '/');
    if (r == 0)
        r = sbuf_adds(sts, req->service);
    if (r == 0)
        r = sbuf_adds(sts, "/aws4_request\n");
    if (r == 0)
        r = sbuf_add(sts, hash, 64);
    return r;
}

int tm_sigv4_string_to_sign(const struct tm_sigv4_request *req, const char *canonical_request,
                            char **ret_sts)
{
    struct sbuf sts = {0};
    int r;

    if (!valid_request(req) || !canonical_request || !ret_sts)
        return TM_EINVAL;
    r = build_sts(req, canonical_request, &sts);
    if (r == 0) {
        *ret_sts = sbuf_take(&sts);
        if (!*ret_sts)
            r = TM_ENOMEM;
    }
    sbuf_wipe_free(&sts);
    return r;
}

/* The derived key chain: kSecret -> kDate -> kRegion -> kService -> kSigning. */
static int signature_hex(const struct tm_sigv4_request *req, const char *secret, const char *sts,
                         char out[65])
{
    unsigned char kbuf[4 + sizeof(((struct tm_aws_credentials *)0)->secret_key)];
    unsigned char k1[32], k2[32];
    size_t slen = strlen(secret);
    int r;

    memcpy(kbuf, "AWS4", 4);
    memcpy(kbuf + 4, secret, slen);
    r = hmac_sha256(kbuf, 4 + slen, req->amz_date, 8, k1);
    if (r == 0)
        r = hmac_sha256(k1, 32, req->region, strlen(req->region), k2);
    if (r == 0)
        r = hmac_sha256(k2, 32, req->service, strlen(req->service), k1);
    if (r == 0)
        r = hmac_sha256(k1, 32, "aws4_request", 12, k2);
    if (r == 0)
        r = hmac_sha256(k2, 32, sts, strlen(sts), k1);
    if (r == 0)
        hex_encode(k1, 32, out);
    OPENSSL_cleanse(kbuf, sizeof(kbuf));
    OPENSSL_cleanse(k1, sizeof(k1));
    OPENSSL_cleanse(k2, sizeof(k2));
    return r;
}

static bool valid_credentials(const struct tm_aws_credentials *cred)
{
    size_t ak, sk;

    if (!cred)
        return false;
    ak = strnlen(cred->access_key, sizeof(cred->access_key));
    sk = strnlen(cred->secret_key, sizeof(cred->secret_key));
    if (ak == 0 || ak == sizeof(cred->access_key) || sk == 0 || sk == sizeof(cred->secret_key))
        return false;
    if (strnlen(cred->session_token, sizeof(cred->session_token)) == sizeof(cred->session_token))
        return false;
    /* Both end up in header lines: nothing that could split or bend one. */
    for (const char *c = cred->secret_key; *c; c++) {
        if ((unsigned char)*c <= ' ' || (unsigned char)*c >= 127)
            return false;
    }
    for (const char *c = cred->session_token; *c; c++) {
        if ((unsigned char)*c <= ' ' || (unsigned char)*c >= 127)
            return false;
    }
    /* The access key goes into the header verbatim. */
    for (const char *c = cred->access_key; *c; c++) {
        if (!isalnum((unsigned char)*c))
            return false;
    }
    return true;
}

int tm_sigv4_authorization(const struct tm_sigv4_request *req,
                           const struct tm_aws_credentials *cred, char **ret_authz)
{
    struct sbuf creq = {0}, sh = {0}, sts = {0}, out = {0};
    char sig[65];
    int r;

    if (!ret_authz || !valid_credentials(cred))
        return TM_EINVAL;
    r = build_canonical(req, &creq, &sh);
    if (r == 0)
        r = build_sts(req, creq.p, &sts);
    if (r == 0)
        r = signature_hex(req, cred->secret_key, sts.p, sig);
    if (r == 0)
        r = sbuf_adds(&out, SIGV4_ALGORITHM " Credential=");
    if (r == 0)
        r = sbuf_adds(&out, cred->access_key);
    if (r == 0)
        r = sbuf_addc(&out, '/');
    if (r == 0)
        r = sbuf_add(&out, req->amz_date, 8);
    if (r == 0)
        r = sbuf_addc(&out, '/');
    if (r == 0)
        r = sbuf_adds(&out, req->region);
    if (r == 0)
        r = sbuf_addc(&out, '/');
    if (r == 0)
        r = sbuf_adds(&out, req->service);
    if (r == 0)
        r = sbuf_adds(&out, "/aws4_request, SignedHeaders=");
    if (r == 0)
        r = sbuf_add(&out, sh.p, sh.len);
    if (r == 0)
        r = sbuf_adds(&out, ", Signature=");
    if (r == 0)
        r = sbuf_add(&out, sig, 64);
    if (r == 0) {
        *ret_authz = sbuf_take(&out);
        if (!*ret_authz)
            r = TM_ENOMEM;
    }
    sbuf_wipe_free(&creq);
    sbuf_wipe_free(&sh);
    sbuf_wipe_free(&sts);
    sbuf_wipe_free(&out);
    return r;
}

void tm_sigv4_headers_free(char **headers)
{
    if (!headers)
        return;
    for (char **h = headers; *h; h++) {
        OPENSSL_cleanse(*h, strlen(*h));
        free(*h);
    }
    free(headers);
}

static char *join_header(const char *name, const char *value)
{
    size_t n = strlen(name) + 2 + strlen(value) + 1;
    char *s = malloc(n);

    if (s)
        snprintf(s, n, "%s: %s", name, value);
    return s;
}

/*
 * Split "scheme://host[:port][/path][?query]" into the Host header value
 * as curl sends it (default port dropped), the path and the query.
 */
/* Hand the k header lines of out (calloc'd with room for a NULL after
 * them) to *ret, or, when one of them could not be made, free them all
 * and out: TM_ENOMEM. */
static int headers_hand_over(char **out, size_t k, char ***ret)
{
    size_t w = 0;

    for (size_t i = 0; i < k; i++)
        if (out[i])
            out[w++] = out[i];
    out[w] = NULL;
    if (w < k) {
        tm_sigv4_headers_free(out);
        return TM_ENOMEM;
    }
    *ret = out;
    return 0;
}

static int parse_endpoint(const char *url, char *host, size_t hostsize, char *path,
                          size_t pathsize, const char **ret_query)
{
    const char *p, *hs, *he, *ps;
    bool https;
    size_t hl;

    if (!strncmp(url, "https://", 8)) {
        https = true;
        hs = url + 8;
    } else if (!strncmp(url, "http://", 7)) {
        https = false;
        hs = url + 7;
    } else {
        return TM_EINVAL;
    }
    he = hs;
    while (*he && *he != '/' && *he != '?' && *he != '#')
        he++;
    if (he == hs)
        return TM_EINVAL;
    for (p = hs; p < he; p++) {
        if (*p == '@' || (unsigned char)*p <= ' ' || (unsigned char)*p >= 127)
            return TM_EINVAL;  /* no userinfo, no spaces: a host only */
    }
    hl = (size_t)(he - hs);
    /* The default port is not part of the Host header curl sends. */
    if (https && hl > 4 && !strncmp(he - 4, ":443", 4) && he[-5] != ':')
        hl -= 4;
    else if (!https && hl > 3 && !strncmp(he - 3, ":80", 3) && he[-4] != ':')
        hl -= 3;
    if (hl + 1 > hostsize)
        return TM_EINVAL;
    memcpy(host, hs, hl);
    host[hl] = '\0';
    for (size_t i = 0; i < hl; i++)
        host[i] = (char)tolower((unsigned char)host[i]);
    ps = he;
    *ret_query = NULL;
    if (*ps == '#')
        return TM_EINVAL;
    p = ps;
    while (*p && *p != '?' && *p != '#')
        p++;
    if (*p == '#')
        return TM_EINVAL;
    if (p == ps) {
        if (pathsize < 2)
            return TM_EINVAL;
        memcpy(path, "/", 2);
    } else {
        if ((size_t)(p - ps) + 1 > pathsize)
            return TM_EINVAL;
        memcpy(path, ps, (size_t)(p - ps));
        path[p - ps] = '\0';
    }
    if (*p == '?') {
        if (strchr(p, '#'))
            return TM_EINVAL;
        *ret_query = p + 1;
    }
    return 0;
}

int tm_sigv4_sign_ec2_post(const char *endpoint_url, const char *region, const void *body,
                           size_t body_len, const char *amz_date,
                           const struct tm_aws_credentials *cred, char ***ret_headers)
{
    static const char content_type[] = "application/x-www-form-urlencoded; charset=utf-8";
    char host[256], path[1024];
    const char *query = NULL;
    char hostline[300], dateline[40];
    const char *lines[6] = {0};
    char *authz = NULL;
    char **out = NULL;
    size_t n = 0, k = 0;
    struct sbuf tok = {0};
    bool has_token;
    int r;

    if (!endpoint_url || !ret_headers || !valid_credentials(cred) || !valid_amz_date(amz_date))
        return TM_EINVAL;
    r = parse_endpoint(endpoint_url, host, sizeof(host), path, sizeof(path), &query);
    if (r < 0)
        return r;
    has_token = cred->session_token[0] != '\0';
    snprintf(hostline, sizeof(hostline), "Host:%s", host);
    snprintf(dateline, sizeof(dateline), "X-Amz-Date:%s", amz_date);
    lines[n++] = "Content-Type:application/x-www-form-urlencoded; charset=utf-8";
    lines[n++] = hostline;
    lines[n++] = dateline;
    if (has_token) {
        r = sbuf_adds(&tok, "X-Amz-Security-Token:");
        if (r == 0)
            r = sbuf_adds(&tok, cred->session_token);
        if (r < 0)
            goto out;
        lines[n++] = tok.p;
    }
    {
        struct tm_sigv4_request req = {
            .method = "POST",
            .path = path,
            .query = query,
            .headers = lines,
            .payload = body,
            .payload_len = body_len,
            .region = region,
            .service = "ec2",
            .amz_date = amz_date,
        };

        r = tm_sigv4_authorization(&req, cred, &authz);
        if (r < 0)
            goto out;
    }
    out = calloc(6, sizeof(*out));
    if (!out) {
        r = TM_ENOMEM;
        goto out;
    }
    out[k++] = join_header("Content-Type", content_type);
    out[k++] = join_header("Host", host);
    out[k++] = join_header("X-Amz-Date", amz_date);
    if (has_token)
        out[k++] = join_header("X-Amz-Security-Token", cred->session_token);
    out[k++] = join_header("Authorization", authz);
    r = headers_hand_over(out, k, ret_headers);
    out = NULL;
out:
    free(out);
    free(authz);
    sbuf_wipe_free(&tok);
    return r;
}

int tm_sigv4_sign_s3(const struct tm_sigv4_s3_request *req, const struct tm_aws_credentials *cred,
                     char ***ret_headers)
{
    char host[256], base[1024];
    const char *base_query = NULL;
    char hostline[300], dateline[40], hashline[100];
    const char **lines = NULL;
    char *authz = NULL;
    char **out = NULL;
    size_t nextra = 0, n = 0, k = 0;
    struct sbuf tok = {0};
    bool has_token;
    int r;

    if (!req || !req->method || !req->endpoint_url || !req->path || !req->payload_hash ||
        !ret_headers || !valid_credentials(cred) || !valid_amz_date(req->amz_date))
        return TM_EINVAL;
    r = parse_endpoint(req->endpoint_url, host, sizeof(host), base, sizeof(base), &base_query);
    if (r < 0)
        return r;
    /* Path-style: the bucket is the first segment, so the endpoint has no
     * path or query of its own. */
    if (strcmp(base, "/") != 0 || base_query)
        return TM_EINVAL;
    for (; req->extra && req->extra[nextra]; nextra++) {
        if (nextra >= 16)
            return TM_EINVAL;
    }
    has_token = cred->session_token[0] != '\0';
    lines = calloc(nextra + 5, sizeof(*lines));
    out = calloc(nextra + 6, sizeof(*out));
    if (!lines || !out) {
        r = TM_ENOMEM;
        goto out;
    }
    snprintf(hostline, sizeof(hostline), "Host:%s", host);
    snprintf(dateline, sizeof(dateline), "X-Amz-Date:%s", req->amz_date);
    snprintf(hashline, sizeof(hashline), "X-Amz-Content-Sha256:%s", req->payload_hash);
    lines[n++] = hostline;
    lines[n++] = dateline;
    lines[n++] = hashline;
    if (has_token) {
        r = sbuf_adds(&tok, "X-Amz-Security-Token:");
        if (r == 0)
            r = sbuf_adds(&tok, cred->session_token);
        if (r < 0)
            goto out;
        lines[n++] = tok.p;
    }
    for (size_t i = 0; i < nextra; i++)
        lines[n++] = req->extra[i];
    {
        struct tm_sigv4_request sreq = {
            .method = req->method,
            .path = req->path,
            .query = req->query,
            .headers = lines,
            .region = req->region,
            .service = "s3",
            .amz_date = req->amz_date,
            .s3 = true,
            .payload_hash = req->payload_hash,
        };

        r = tm_sigv4_authorization(&sreq, cred, &authz);
        if (r < 0)
            goto out;
    }
    out[k++] = join_header("Host", host);
    out[k++] = join_header("X-Amz-Date", req->amz_date);
    out[k++] = join_header("X-Amz-Content-Sha256", req->payload_hash);
    if (has_token)
        out[k++] = join_header("X-Amz-Security-Token", cred->session_token);
    for (size_t i = 0; i < nextra; i++) {
        /* The line as curl wants it: "Name: value". */
        const char *colon = strchr(req->extra[i], ':');
        const char *v = colon + 1;
        size_t nl = (size_t)(colon - req->extra[i]);
        char *line;

        while (*v == ' ' || *v == '\t')
            v++;
        line = malloc(nl + 2 + strlen(v) + 1);
        if (line)
            snprintf(line, nl + 2 + strlen(v) + 1, "%.*s: %s", (int)nl, req->extra[i], v);
        out[k++] = line;
    }
    out[k++] = join_header("Authorization", authz);
    r = headers_hand_over(out, k, ret_headers);
    out = NULL;
out:
    free(out);
    free(lines);
    free(authz);
    sbuf_wipe_free(&tok);
    return r;
}

int tm_sigv4_sha256_hex(const void *data, size_t n, char out[65])
{
    if (!out || (n && !data))
        return TM_EINVAL;
    return sha256_hex(data, n, out);
}

int tm_sigv4_uri_encode(const char *s, bool keep_slash, char **ret)
{
    struct sbuf b = {0};
    int r;

    if (!s || !ret)
        return TM_EINVAL;
    r = uri_encode(&b, s, strlen(s), keep_slash);
    if (r == 0) {
        *ret = sbuf_take(&b);
        if (!*ret)
            r = TM_ENOMEM;
    }
    sbuf_wipe_free(&b);
    return r;
}

void tm_sigv4_format_date(int64_t epoch_ms, char out[17])
{
    int64_t secs = epoch_ms / 1000;
    struct tm tm;
    time_t t;

    if (epoch_ms < 0 && epoch_ms % 1000)
        secs--;
    t = (time_t)secs;
    if (!gmtime_r(&t, &tm) || tm.tm_year + 1900 < 1000 || tm.tm_year + 1900 > 9999) {
        /* Out of range: a fixed valid date rather than a truncated one. */
        memcpy(out, "19700101T000000Z", 17);
        return;
    }
    /* The year is checked above, so the result is always 16 characters. */
    if (strftime(out, 17, "%Y%m%dT%H%M%SZ", &tm) != 16)
        memcpy(out, "19700101T000000Z", 17);
}

void tm_aws_credentials_clear(struct tm_aws_credentials *cred)
{
    if (cred)
        OPENSSL_cleanse(cred, sizeof(*cred));
}

int tm_aws_form_append(char **buf, size_t *len, size_t *cap, const char *key, const char *value)
{
    struct sbuf b;
    size_t old_len;
    int r;

    if (!buf || !len || !cap || !key || !value || (*buf == NULL && (*len || *cap)) ||
        (*buf && *len >= *cap))
        return TM_EINVAL;
    b = (struct sbuf){.p = *buf, .len = *len, .cap = *cap};
    old_len = b.len;
    r = 0;
    if (b.len > 0)
        r = sbuf_addc(&b, '&');
    if (r == 0)
        r = uri_encode(&b, key, strlen(key), false);
    if (r == 0)
        r = sbuf_addc(&b, '=');
    if (r == 0)
        r = uri_encode(&b, value, strlen(value), false);
    if (r < 0) {
        /* Leave the buffer as it was: same contents, maybe a larger block. */
        b.len = old_len;
        if (b.p)
            b.p[b.len] = '\0';
    }
    *buf = b.p;
    *len = b.len;
    *cap = b.cap;
    return r;
}

int tm_aws_form_append_int(char **buf, size_t *len, size_t *cap, const char *key, long long value)
{
    char num[24];

    snprintf(num, sizeof(num), "%lld", value);
    return tm_aws_form_append(buf, len, cap, key, num);
}
