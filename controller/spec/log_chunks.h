/*
 * controller/spec/log_chunks.h: the body of POST /v1/nodes/{id}/logs, the
 * chunks of job output an agent ships (docs/logs.md), read by the API and
 * built by the agent.  Pure: no I/O, no clock.
 *
 *   {"chunks": [{"job": 7, "attempt": 1, "rank": 0, "offset": 0,
 *                "data": "<base64 of the bytes>"}, ...]}
 *
 * The bytes are base64 (RFC 4648, with padding) because output need not
 * be UTF-8 and JSON strings must be.  Every field is required; a chunk
 * holds 1 to max_chunk bytes; a batch holds 1 to TM_LOG_BATCH_MAX chunks.
 */
#ifndef TM_SPEC_LOG_CHUNKS_H
#define TM_SPEC_LOG_CHUNKS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "controller/spec/job_spec.h"

#define TM_LOG_BATCH_MAX 256

struct tm_log_chunk_in {
    int64_t job;
    int64_t attempt;
    int64_t rank;
    int64_t offset;
    unsigned char *data;   /* decoded (tm_log_batch_decode), into the batch's bytes; else NULL */
    size_t len;
    const char *b64;       /* the base64 as sent, into the batch's tree */
    size_t b64_len;
};

struct tm_log_batch {
    struct tm_log_chunk_in *chunks;
    size_t n;
    void *root;            /* the parsed body (cJSON), which b64 points into */
    unsigned char *bytes;  /* tm_log_batch_decode: every chunk's bytes, one after another */
    size_t nbytes;
};

/* Read a batch.  0 and *ret (release with tm_log_batch_release); TM_EINVAL
 * with err naming the field ("chunks[3].offset"), and *ret_too_large set
 * when that is a chunk over max_chunk bytes ("chunks[3].data"); TM_ENOMEM.  *ret is untouched on failure. */
int tm_log_batch_parse(const char *body, size_t len, size_t max_chunk, struct tm_log_batch *ret,
                       bool *ret_too_large, struct tm_spec_error *err);
/* Decode every chunk's base64 into bytes, once: the chunks' bytes one
 * after another in b->bytes (b->nbytes, the sum of their lengths), each
 * chunk's data pointing at its own.  The parse only checks the base64, so
 * that a batch refused on its fields costs no decoding.  0 or TM_ENOMEM. */
int tm_log_batch_decode(struct tm_log_batch *b);
void tm_log_batch_release(struct tm_log_batch *b);

/* The base64 text of n bytes (NUL-terminated, malloc'd), or NULL. */
char *tm_log_b64_encode(const unsigned char *data, size_t n);

#endif
