/*
 * controller/io/s3.h: an S3 object client on the loop, for the log store.
 *
 * Path-style addressing (ENDPOINT/BUCKET/KEY), which S3, MinIO and moto all
 * answer, signed with SigV4 (core/sigv4.h) as the EC2 client signs, over
 * tm_http.  Five calls: PutObject, GetObject with a byte range,
 * ListObjectsV2 under a prefix, DeleteObjects (up to 1000 keys) and
 * CreateBucket (for tests and first runs).  Answers in XML (errors,
 * listings) are read with controller/io/xml_tree.h.
 *
 * Credentials: this folder may not reach the aws provider's credential
 * chain, so the owner hands a getter (the daemon wires the provider's
 * tm_aws_credential_provider_get(), with its refresh of instance-role keys)
 * or fixed keys (tm_s3_set_credentials()).  The secret is used only to sign:
 * it is never in a URL, a log line or an error message, and every copy held
 * here is wiped when dropped.
 *
 * Each call copies what it is given; its callback fires exactly once, on
 * the loop, never inside the call.  Result codes: 0; TM_ENOTFOUND (no such
 * key or bucket); TM_EAUTH (403: a wrong key or signature, access denied);
 * TM_ETHROTTLED (503 SlowDown); TM_EUNAVAIL and -errno (transport, 5xx:
 * retry); TM_EBADREPLY (an answer we cannot read); TM_EINVAL (our request
 * was refused, 400); TM_ECANCELED (closed first).  error, when set, names
 * the operation, the key and S3's code and message, never a secret.
 */
#ifndef TM_IO_S3_H
#define TM_IO_S3_H

#include <stddef.h>
#include <stdint.h>

#include <uv.h>

#include "core/sigv4.h"

struct tm_http;
struct tm_s3;

struct tm_s3_options {
    const char *endpoint;  /* "https://s3.us-east-1.amazonaws.com", "http://127.0.0.1:9000" */
    const char *region;    /* "us-east-1" */
    const char *bucket;    /* a DNS-style bucket name: [a-z0-9.-], 3..63 */
    long timeout_ms;       /* per request, from when it leaves; 0 means 60 s */
    unsigned max_inflight; /* requests on the wire at once, the rest wait in
                            * order; 0 means 32 */
    const char *ca_file;   /* may be NULL */
};

/* The shape of tm_aws_credentials_cb, so the provider's getter fits. */
typedef void (*tm_s3_cred_cb)(int status, const struct tm_aws_credentials *cred,
                              const char *error, void *data);
/* Ask for credentials; cb fires later on the loop, exactly once. */
typedef int (*tm_s3_cred_get)(void *source, tm_s3_cred_cb cb, void *data);

struct tm_s3_result {
    int status;               /* 0 or a code above */
    long http_status;         /* 0 when no answer came */
    const char *error;        /* NULL on success */
    const char *body;         /* get: the bytes (NUL-terminated) */
    size_t body_len;
    const char *const *keys;  /* list: the keys of this page */
    const int64_t *sizes;     /* list: their sizes */
    size_t nkeys;
    const char *next_token;   /* list: the continuation token, NULL on the last page */
};

/* res and everything it points at are valid only during the callback. */
typedef void (*tm_s3_cb)(const struct tm_s3_result *res, void *data);

/* Check opts (a message naming the bad field goes to err) and make a client
 * on http.  Returns 0 or TM_EINVAL / TM_ENOMEM. */
int tm_s3_create(uv_loop_t *loop, struct tm_http *http, const struct tm_s3_options *opts,
                 struct tm_s3 **ret_s3, char *err, size_t errsize);

/* Where signing keys come from: a getter, or fixed keys (copied; the copy
 * is wiped at close).  One of the two must be set before the first call. */
void tm_s3_set_credential_source(struct tm_s3 *s3, tm_s3_cred_get get, void *source);
int tm_s3_set_credentials(struct tm_s3 *s3, const struct tm_aws_credentials *cred);

int tm_s3_put(struct tm_s3 *s3, const char *key, const void *body, size_t len, tm_s3_cb cb,
              void *data);
/* Bytes [offset, offset + length) of key; length 0 reads to the end.  An
 * offset at or past the end gives 0 bytes, not an error.  At most max_body
 * bytes come back (0: 64 MiB). */
int tm_s3_get(struct tm_s3 *s3, const char *key, uint64_t offset, uint64_t length,
              size_t max_body, tm_s3_cb cb, void *data);
/* One page (up to max_keys, 0 or over 1000: 1000) under prefix, after token
 * (NULL: the first page). */
int tm_s3_list(struct tm_s3 *s3, const char *prefix, const char *token, unsigned max_keys,
               tm_s3_cb cb, void *data);
/* Delete up to 1000 keys in one request; a key that is already gone is not
 * an error. */
int tm_s3_delete(struct tm_s3 *s3, const char *const *keys, size_t nkeys, tm_s3_cb cb, void *data);
/* Create the bucket (in region); an existing bucket of ours is not an error. */
int tm_s3_create_bucket(struct tm_s3 *s3, tm_s3_cb cb, void *data);

/* Requests of this client in flight. */
unsigned tm_s3_inflight(const struct tm_s3 *s3);

/* Refuse new calls (TM_ECANCELED) and free the client, its keys wiped, once
 * the last request in flight has called back (closing the tm_http ends them
 * at once). */
void tm_s3_close(struct tm_s3 *s3);

#endif
