/*
 * tests/fuzz/fuzz_log_chunks.c: libFuzzer target for the reader of the
 * agent's batches of output (controller/spec/log_chunks.c).  A batch that
 * parses is walked whole and checked against what the reader promises:
 * 1 to TM_LOG_BATCH_MAX chunks, each of 1 to max_chunk bytes, its bytes
 * the decoding of its base64 (encoded again, the text as sent); a refusal
 * names a field.
 *
 * Built as the fuzz target (TM_FUZZ=ON, clang) and, with TM_FUZZ_REPLAY,
 * as a plain program that ctest runs over tests/fuzz/corpus/log_chunks.
 */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "controller/spec/log_chunks.h"
#include "core/err.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check(int ok, const char *what)
{
    if (!ok) {
        fprintf(stderr, "fuzz_log_chunks: broken promise: %s\n", what);
        abort();
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    /* A small limit as well as the default, so the size check is reached. */
    static const size_t limits[] = {16, 65536};

    for (size_t l = 0; l < 2; l++) {
        struct tm_log_batch b = {0};
        struct tm_spec_error err = {0};
        bool too_large = false;
        int r = tm_log_batch_parse((const char *)data, size, limits[l], &b, &too_large, &err);

        if (r < 0) {
            check(r == TM_EINVAL || r == TM_ENOMEM, "error code");
            check(r == TM_ENOMEM || (err.field[0] && err.message[0]), "a refusal names its field");
            check(!too_large || strstr(err.field, ".data") != NULL, "too large names the data");
            check(b.n == 0 && b.chunks == NULL, "nothing handed over on failure");
            continue;
        }
        check(b.n >= 1 && b.n <= TM_LOG_BATCH_MAX, "chunk count");
        if (tm_log_batch_decode(&b) < 0) {
            tm_log_batch_release(&b);
            continue;
        }
        for (size_t i = 0; i < b.n; i++) {
            const struct tm_log_chunk_in *c = &b.chunks[i];
            char *again;
            check(c->len >= 1 && c->len <= limits[l], "chunk size");
            check(c->job >= 1 && c->attempt >= 1 && c->rank >= 0 && c->offset >= 0, "numbers");
            again = tm_log_b64_encode(c->data, c->len);
            check(again && strlen(again) == c->b64_len && memcmp(again, c->b64, c->b64_len) == 0,
                  "the bytes are the base64's");
            free(again);
        }
        tm_log_batch_release(&b);
    }
    return 0;
}

#ifdef TM_FUZZ_REPLAY
#include "tests/fuzz/replay_main.h"
#endif
