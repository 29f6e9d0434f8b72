/*
 * core/sigv4.h: AWS Signature Version 4, our own canonicaliser.
 *
 * The canonical request is built here; the hashing and HMAC are OpenSSL's
 * (EVP_Digest SHA-256, HMAC()).  Every stage is exposed on its own so that a
 * test can compare it byte for byte with AWS's published suite
 * (../shared/specs/aws-sigv4-test-suite): canonical request, string to
 * sign, Authorization value.  Nothing here touches the clock, the network or
 * the loop: the date is an input, so signatures are reproducible.
 *
 * Secrets: the secret key and the session token are only read from struct
 * tm_aws_credentials; intermediate keys are wiped with OPENSSL_cleanse()
 * before return, and no error path writes a secret anywhere.
 *
 * Returns: 0, TM_EINVAL (malformed input: a header without ':', a bad date,
 * a bad %XX escape in the path or query, a NULL required field) or
 * TM_ENOMEM.  Strings handed back through ret_* are malloc'd, NUL-terminated,
 * and belong to the caller (free()); on failure ret_* is not written.
 */
#ifndef TM_CORE_SIGV4_H
#define TM_CORE_SIGV4_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/*
 * One set of credentials.  Fixed-size so it can be copied and wiped as a
 * whole; tm_aws_credentials_clear() wipes it.  Empty session_token means
 * long-term keys.  expires_ms is wall-clock epoch milliseconds, 0 = never.
 * source says where the set came from ("env", "file", "instance_role"),
 * for logs and `check aws`; it is not secret.
 */
struct tm_aws_credentials {
    char access_key[128];
    char secret_key[128];
    char session_token[4096];
    int64_t expires_ms;
    char source[16];
};

/* Wipe every field (OPENSSL_cleanse); safe on NULL. */
void tm_aws_credentials_clear(struct tm_aws_credentials *cred);

/*
 * A request to sign.  Only method, path, region, service and amz_date are
 * required; the rest may be NULL/0.
 *
 * headers: raw "Name:value" lines as they appear on the wire (the name is
 * case-insensitive, spaces around the value are trimmed and runs of spaces
 * collapse to one).  A name may repeat: the values are joined with ',' in
 * the order given.  An entry that starts with a space or a tab is a folded
 * continuation of the previous entry and is joined to it with ',' (what
 * the AWS suite's get-header-value-multiline expects).  EVERY header listed
 * is signed, so list exactly what will be sent (Host included).
 *
 * path: the raw (wire) path; it is normalised (".", "..", empty segments
 * removed, a trailing '/' kept) and URI-encoded once more, '/' kept: the
 * "encode twice" rule of every service but S3 (a wire "%20" signs as
 * "%2520"), as the generic vectors and botocore do.  With s3 set, the path
 * is signed as sent (S3 neither normalises nor encodes twice, as botocore's
 * S3SigV4Auth); it must then hold only unreserved characters, '/' and %XX
 * escapes, which is what tm_sigv4_uri_encode() makes of an object key.
 * EC2's Query API always signs "/", where all of this is a no-op.
 *
 * query: the raw query without '?'; parameters are percent-decoded,
 * re-encoded (RFC 3986, %XX upper case) and sorted by name then value.
 */
struct tm_sigv4_request {
    const char *method;          /* "POST" */
    const char *path;            /* e.g. "/" */
    const char *query;           /* may be NULL */
    const char *const *headers;  /* NULL-terminated; may be NULL */
    const void *payload;         /* may be NULL when payload_len is 0 */
    size_t payload_len;
    const char *region;          /* "us-east-1" */
    const char *service;         /* "ec2" */
    const char *amz_date;        /* "20150830T123600Z": must match X-Amz-Date if sent */
    bool s3;                     /* S3's path rule (above) */
    /* The payload's hash as X-Amz-Content-Sha256 carries it (64 lower-case
     * hex, or "UNSIGNED-PAYLOAD"), so that a large body is hashed once;
     * NULL: hash payload here. */
    const char *payload_hash;
};

/* Stage 1: the canonical request (no trailing newline). */
int tm_sigv4_canonical_request(const struct tm_sigv4_request *req, char **ret_creq);

/* Stage 2: the string to sign for a canonical request from stage 1. */
int tm_sigv4_string_to_sign(const struct tm_sigv4_request *req, const char *canonical_request,
                            char **ret_sts);

/* Stage 3: the whole Authorization header VALUE:
 * "AWS4-HMAC-SHA256 Credential=AK/DATE/REGION/SERVICE/aws4_request,
 *  SignedHeaders=a;b, Signature=<64 hex>" (one line, ", " separators). */
int tm_sigv4_authorization(const struct tm_sigv4_request *req,
                           const struct tm_aws_credentials *cred, char **ret_authz);

/*
 * Sign an EC2 Query API call: POST of a form body to endpoint_url
 * ("https://ec2.us-east-1.amazonaws.com" or "http://127.0.0.1:5000"; a path
 * in the URL is signed, default "/").  Returns a NULL-terminated array of
 * "Name: value" lines, ready for struct tm_http_request.headers:
 *   Content-Type: application/x-www-form-urlencoded; charset=utf-8
 *   Host: HOST[:PORT]     (port only when not the scheme's default, as curl sends it)
 *   X-Amz-Date: amz_date
 *   X-Amz-Security-Token: ...   (only with a session token; signed)
 *   Authorization: AWS4-HMAC-SHA256 ...
 * Send all of them and no other Content-Type/Host.  The array and its
 * strings are one allocation set: free with tm_sigv4_headers_free(), which
 * wipes them (they hold the session token).
 */
int tm_sigv4_sign_ec2_post(const char *endpoint_url, const char *region, const void *body,
                           size_t body_len, const char *amz_date,
                           const struct tm_aws_credentials *cred, char ***ret_headers);

/*
 * Sign an S3 request, path-style (http://host:port/BUCKET/KEY, what MinIO,
 * moto and S3 itself all take).  endpoint_url is scheme://host[:port] with
 * no path; path is the wire path ("/bucket/logs/1/0" from
 * tm_sigv4_uri_encode()), query the wire query without '?' (may be NULL).
 * extra: "Name:value" lines the caller also sends (Content-Type, Range,
 * Content-MD5); all are signed.  payload_hash: tm_sigv4_sha256_hex() of the
 * body.  Returns the lines to send, as tm_sigv4_sign_ec2_post() does:
 *   Host, X-Amz-Date, X-Amz-Content-Sha256, X-Amz-Security-Token (with a
 *   session token), each extra line, Authorization.
 */
struct tm_sigv4_s3_request {
    const char *method;
    const char *endpoint_url;
    const char *path;
    const char *query;
    const char *const *extra;    /* NULL-terminated; may be NULL */
    const char *payload_hash;
    const char *region;
    const char *amz_date;
};

int tm_sigv4_sign_s3(const struct tm_sigv4_s3_request *req, const struct tm_aws_credentials *cred,
                     char ***ret_headers);

/* Lower-case hex SHA-256 of n bytes (data may be NULL when n is 0). */
int tm_sigv4_sha256_hex(const void *data, size_t n, char out[65]);

/* RFC 3986 encoding as SigV4 wants it (unreserved kept, %XX upper case),
 * '/' kept when keep_slash: an object key becomes its wire path.  *ret is
 * malloc'd.  Returns 0, TM_EINVAL or TM_ENOMEM. */
int tm_sigv4_uri_encode(const char *s, bool keep_slash, char **ret);

/* Wipe and free what tm_sigv4_sign_ec2_post() or tm_sigv4_sign_s3()
 * returned; safe on NULL. */
void tm_sigv4_headers_free(char **headers);

/* Format epoch milliseconds (wall clock, UTC) as "YYYYMMDDTHHMMSSZ". */
void tm_sigv4_format_date(int64_t epoch_ms, char out[17]);

/*
 * Append "key=value" to a form body, with '&' first when *len > 0.  Both
 * are percent-encoded as AWS expects (RFC 3986): A-Z a-z 0-9 - _ . ~ kept,
 * every other byte %XX upper case, space as %20 (never '+').  *buf grows by
 * realloc (start with NULL/0/0); *buf is always NUL-terminated afterwards.
 * The caller frees *buf.  Returns 0, TM_EINVAL (NULL key/value) or
 * TM_ENOMEM (the buffer is left as it was).
 */
int tm_aws_form_append(char **buf, size_t *len, size_t *cap, const char *key, const char *value);

/* Like tm_aws_form_append() for an integer value ("MinCount=1"). */
int tm_aws_form_append_int(char **buf, size_t *len, size_t *cap, const char *key, long long value);

#endif
