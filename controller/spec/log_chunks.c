/*
 * controller/spec/log_chunks.c: the agent's batch of output chunks
 * (log_chunks.h).  JSON through cJSON alone, base64 through OpenSSL's
 * decoder, checked first for the alphabet and padding OpenSSL would
 * otherwise skip or accept.
 *
 * The strict reader (json_body.h) that other bodies go through reads only
 * what is left of this one with the base64 taken out (strict_rest): its
 * jansson pass costs several times cJSON's per byte, and a body here is
 * almost all base64, which is checked byte by byte against the alphabet
 * instead.  NUL (which would cut a C string short) and raw control bytes
 * are looked for first, in the whole body.
 */
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>
#include <openssl/evp.h>

#include "controller/spec/json_body.h"
#include "controller/spec/log_chunks.h"
#include "core/err.h"

static bool whole(const cJSON *item, int64_t min, int64_t max, int64_t *ret)
{
    double d;

    if (!cJSON_IsNumber(item))
        return false;
    d = item->valuedouble;
    if (!isfinite(d) || d != floor(d) || d < (double)min || d > (double)max || fabs(d) > 9007199254740992.0)
        return false;
    *ret = (int64_t)d;
    return true;
}

/* The base64 alphabet as a table: the check runs over every byte of a
 * body, and a lookup is several times cheaper than the comparisons. */
static const unsigned char b64_alphabet[256] = {
    ['A'] = 1, ['B'] = 1, ['C'] = 1, ['D'] = 1, ['E'] = 1, ['F'] = 1, ['G'] = 1, ['H'] = 1, ['I'] = 1,
    ['J'] = 1, ['K'] = 1, ['L'] = 1, ['M'] = 1, ['N'] = 1, ['O'] = 1, ['P'] = 1, ['Q'] = 1, ['R'] = 1,
    ['S'] = 1, ['T'] = 1, ['U'] = 1, ['V'] = 1, ['W'] = 1, ['X'] = 1, ['Y'] = 1, ['Z'] = 1, ['a'] = 1,
    ['b'] = 1, ['c'] = 1, ['d'] = 1, ['e'] = 1, ['f'] = 1, ['g'] = 1, ['h'] = 1, ['i'] = 1, ['j'] = 1,
    ['k'] = 1, ['l'] = 1, ['m'] = 1, ['n'] = 1, ['o'] = 1, ['p'] = 1, ['q'] = 1, ['r'] = 1, ['s'] = 1,
    ['t'] = 1, ['u'] = 1, ['v'] = 1, ['w'] = 1, ['x'] = 1, ['y'] = 1, ['z'] = 1, ['0'] = 1, ['1'] = 1,
    ['2'] = 1, ['3'] = 1, ['4'] = 1, ['5'] = 1, ['6'] = 1, ['7'] = 1, ['8'] = 1, ['9'] = 1, ['+'] = 1,
    ['/'] = 1,
};

/* Strict base64: a multiple of 4, the alphabet, '=' only as the last one
 * or two.  Returns the decoded length, or -1. */
static long b64_len(const char *s, size_t n)
{
    const unsigned char *u = (const unsigned char *)s;
    size_t pad = 0;
    unsigned ok = 1;

    if (n == 0 || n % 4 != 0)
        return -1;
    if (s[n - 1] == '=')
        pad++;
    if (s[n - 2] == '=')
        pad++;
    if (pad == 1 && s[n - 2] == '=')
        return -1;
    /* No early exit: the loop then runs without a branch per byte. */
    for (size_t i = 0; i < n - pad; i++)
        ok &= b64_alphabet[u[i]];
    return ok ? (long)(n / 4 * 3 - pad) : -1;
}

static int read_chunk(const cJSON *o, size_t i, size_t max_chunk, struct tm_log_chunk_in *ret,
                      bool *too_large, struct tm_spec_error *err)
{
    static const char *const names[] = {"job", "attempt", "rank", "offset", "data"};
    const cJSON *m[5] = {0};
    char field[64];
    struct tm_log_chunk_in c = {0};
    long n;

    if (!cJSON_IsObject(o)) {
        snprintf(field, sizeof(field), "chunks[%zu]", i);
        return tm_spec_fail(err, field, "must be an object");
    }
    for (const cJSON *a = o->child; a; a = a->next) {
        size_t k = 0;
        while (k < 5 && strcmp(a->string, names[k]) != 0)
            k++;
        if (k == 5) {
            char prefix[32];
            snprintf(prefix, sizeof(prefix), "chunks[%zu].", i);
            tm_spec_field_name(field, sizeof(field), prefix, a->string);
            return tm_spec_fail(err, field, "unrecognized field");
        }
        if (m[k]) {
            snprintf(field, sizeof(field), "chunks[%zu].%s", i, names[k]);
            return tm_spec_fail(err, field, "given more than once");
        }
        m[k] = a;
    }
    for (size_t k = 0; k < 5; k++)
        if (!m[k]) {
            snprintf(field, sizeof(field), "chunks[%zu].%s", i, names[k]);
            return tm_spec_fail(err, field, "required");
        }
    snprintf(field, sizeof(field), "chunks[%zu].job", i);
    if (!whole(m[0], 1, INT64_C(999999999999999999), &c.job))
        return tm_spec_fail(err, field, "must be a positive whole number");
    snprintf(field, sizeof(field), "chunks[%zu].attempt", i);
    if (!whole(m[1], 1, INT32_MAX, &c.attempt))
        return tm_spec_fail(err, field, "must be a positive whole number");
    snprintf(field, sizeof(field), "chunks[%zu].rank", i);
    if (!whole(m[2], 0, 1023, &c.rank))
        return tm_spec_fail(err, field, "must be a whole number from 0 to 1023");
    snprintf(field, sizeof(field), "chunks[%zu].offset", i);
    if (!whole(m[3], 0, INT64_C(1) << 50, &c.offset))
        return tm_spec_fail(err, field, "must be a whole number from 0 to 2^50");
    snprintf(field, sizeof(field), "chunks[%zu].data", i);
    if (!cJSON_IsString(m[4]))
        return tm_spec_fail(err, field, "must be a base64 string");
    c.b64 = m[4]->valuestring;
    c.b64_len = strlen(c.b64);
    n = b64_len(c.b64, c.b64_len);
    if (n < 0)
        return tm_spec_fail(err, field, "must be base64 (RFC 4648, padded) of 1 byte or more");
    if ((size_t)n > max_chunk) {
        *too_large = true;
        return tm_spec_fail(err, field, "holds %ld bytes, over the limit of %zu (logs.max_chunk)", n,
                            max_chunk);
    }
    c.len = (size_t)n;
    *ret = c;
    return 0;
}

/* C0 but JSON's whitespace (tab, LF, CR), and DEL. */
static const unsigned char control_byte[256] = {
    1, 1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 1, 1, 0, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, [0x7f] = 1,
};

/* The body as cJSON's tree: no NUL or control byte anywhere (tab, LF and
 * CR are JSON's whitespace), one JSON value, nothing after it. */
static int parse_json(const char *body, size_t len, cJSON **ret, struct tm_spec_error *err)
{
    const unsigned char *p = (const unsigned char *)body;
    const char *end = NULL;
    cJSON *root;

    /* A pass without a branch per byte first; the byte is looked for only
     * if one is there. */
    unsigned bad = 0;
    for (size_t i = 0; i < len; i++)
        bad |= control_byte[p[i]];
    for (size_t i = 0; bad && i < len; i++)
        if (control_byte[p[i]])
            return tm_spec_fail(err, "body", p[i] ? "must not contain control characters (byte %zu)"
                                                  : "must not contain a NUL character (byte %zu)", i);
    /* A NUL escaped would cut the C string cJSON makes of a key or of the
     * base64, hiding what follows it from the checks. */
    for (const unsigned char *q = memchr(p, '\\', len); q; q = memchr(q + 1, '\\', len - (size_t)(q + 1 - p))) {
        if ((size_t)(p + len - q) >= 6 && memcmp(q + 1, "u0000", 5) == 0)
            return tm_spec_fail(err, "body", "must not contain a NUL character (byte %zu)", (size_t)(q - p));
        if ((size_t)(q + 1 - p) >= len)
            break;
    }
    root = cJSON_ParseWithLengthOpts(body, len, &end, 0);
    if (!root) {
        /* cJSON says where it stopped; NULL or the end: out of memory. */
        if (!end || end < body || (size_t)(end - body) > len)
            return tm_spec_fail_nomem(err);
        return tm_spec_fail(err, "body", "malformed JSON at byte %zu", (size_t)(end - body));
    }
    while (end && (size_t)(end - body) < len && (*end == ' ' || *end == '\t' || *end == '\n' || *end == '\r'))
        end++;
    if (!end || (size_t)(end - body) != len) {
        size_t at = end ? (size_t)(end - body) : 0;
        cJSON_Delete(root);
        return tm_spec_fail(err, "body", "malformed JSON at byte %zu: more after the object", at);
    }
    *ret = root;
    return 0;
}

/* Where the "data" string of chunk c lies in the body, from *at on: its
 * opening quote, or NULL.  The base64 holds no character JSON escapes, so
 * a body that sent it plainly holds it byte for byte between quotes. */
static const char *find_data(const char *body, size_t len, size_t at, const struct tm_log_chunk_in *c)
{
    const char *p = body + at, *end = body + len;

    while ((size_t)(end - p) >= c->b64_len + 2 && (p = memchr(p, '"', (size_t)(end - p) - c->b64_len - 1))) {
        if (p[c->b64_len + 1] == '"' && memcmp(p + 1, c->b64, c->b64_len) == 0)
            return p;
        p++;
    }
    return NULL;
}

/* Everything but the base64 through the strict reader (json_body.h), as
 * every other body: the body with each chunk's "data" string emptied,
 * a few hundred bytes.  cJSON alone would take a byte-order mark or a
 * number with a leading zero; the base64 was checked byte by byte. */
static int strict_rest(const char *body, size_t len, const struct tm_log_batch *b, struct tm_spec_error *err)
{
    char *rest = malloc(len + 1);
    size_t at = 0, n = 0;
    cJSON *root = NULL;
    int r;

    if (!rest)
        return tm_spec_fail_nomem(err);
    for (size_t i = 0; i < b->n; i++) {
        const char *q = find_data(body, len, at, &b->chunks[i]);
        if (!q) {
            char field[64];
            free(rest);
            snprintf(field, sizeof(field), "chunks[%zu].data", i);
            return tm_spec_fail(err, field, "must be base64 sent as it is, with no escapes");
        }
        memcpy(rest + n, body + at, (size_t)(q - body) + 1 - at);
        n += (size_t)(q - body) + 1 - at;
        at = (size_t)(q - body) + 1 + b->chunks[i].b64_len;
    }
    memcpy(rest + n, body + at, len - at);
    n += len - at;
    r = tm_json_body_parse(rest, n, &root, err);
    cJSON_Delete(root);
    free(rest);
    return r;
}

int tm_log_batch_parse(const char *body, size_t len, size_t max_chunk, struct tm_log_batch *ret,
                       bool *ret_too_large, struct tm_spec_error *err)
{
    struct tm_log_batch b = {0};
    cJSON *root = NULL;
    const cJSON *chunks = NULL;
    bool too_large = false;
    size_t n;
    int r;

    if (!body || len == 0)
        return tm_spec_fail(err, "body", "a JSON object is required");
    r = parse_json(body, len, &root, err);
    if (r < 0)
        return r;
    if (!cJSON_IsObject(root)) {
        cJSON_Delete(root);
        return tm_spec_fail(err, "body", "must be a JSON object");
    }
    for (const cJSON *a = root->child; a; a = a->next) {
        char field[64];
        if (strcmp(a->string, "chunks") != 0) {
            tm_spec_field_name(field, sizeof(field), "", a->string);
            cJSON_Delete(root);
            return tm_spec_fail(err, field, "unrecognized field");
        }
        if (chunks) {
            cJSON_Delete(root);
            return tm_spec_fail(err, "chunks", "given more than once");
        }
        chunks = a;
    }
    n = cJSON_IsArray(chunks) ? (size_t)cJSON_GetArraySize(chunks) : 0;
    if (!cJSON_IsArray(chunks) || n == 0 || n > TM_LOG_BATCH_MAX) {
        cJSON_Delete(root);
        return tm_spec_fail(err, "chunks", "must be an array of 1 to %d chunks", TM_LOG_BATCH_MAX);
    }
    b.root = root;
    b.chunks = calloc(n, sizeof(*b.chunks));
    if (!b.chunks) {
        tm_log_batch_release(&b);
        return tm_spec_fail_nomem(err);
    }
    r = 0;
    for (const cJSON *o = chunks->child; r == 0 && o; o = o->next) {
        r = read_chunk(o, b.n, max_chunk, &b.chunks[b.n], &too_large, err);
        if (r == 0)
            b.n++;
    }
    if (r == 0)
        r = strict_rest(body, len, &b, err);
    if (r < 0) {
        tm_log_batch_release(&b);
        if (ret_too_large)
            *ret_too_large = too_large;
        return r;
    }
    *ret = b;
    return 0;
}

int tm_log_batch_decode(struct tm_log_batch *b)
{
    size_t total = 0, pos = 0;

    if (b->bytes)
        return 0;
    for (size_t i = 0; i < b->n; i++)
        total += b->chunks[i].len;
    /* EVP_DecodeBlock writes whole groups of 3, padding included: up to 2
     * bytes past a chunk, which the next chunk then writes over. */
    b->bytes = malloc(total + 3);
    if (!b->bytes)
        return TM_ENOMEM;
    for (size_t i = 0; i < b->n; i++) {
        struct tm_log_chunk_in *c = &b->chunks[i];
        if (EVP_DecodeBlock(b->bytes + pos, (const unsigned char *)c->b64, (int)c->b64_len) < 0) {
            free(b->bytes);
            b->bytes = NULL;
            return TM_EINVAL; /* cannot happen: the text was checked */
        }
        c->data = b->bytes + pos;
        pos += c->len;
    }
    b->nbytes = total;
    return 0;
}

void tm_log_batch_release(struct tm_log_batch *b)
{
    free(b->bytes);
    free(b->chunks);
    cJSON_Delete(b->root);
    *b = (struct tm_log_batch){0};
}

char *tm_log_b64_encode(const unsigned char *data, size_t n)
{
    size_t out = (n + 2) / 3 * 4;
    char *s = malloc(out + 1);

    if (!s)
        return NULL;
    EVP_EncodeBlock((unsigned char *)s, data, (int)n);
    s[out] = '\0';
    return s;
}
