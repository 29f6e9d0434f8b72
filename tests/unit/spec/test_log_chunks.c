/*
 * tests/unit/spec/test_log_chunks.c: the agent's batch of output chunks
 * (controller/spec/log_chunks.c) without a server: what passes, the bytes
 * it yields, and which field each refusal names.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "controller/spec/log_chunks.h"
#include "core/err.h"

static int parse(const char *body, size_t max, struct tm_log_batch *b, bool *too_large,
                 struct tm_spec_error *err)
{
    memset(err, 0, sizeof(*err));
    *too_large = false;
    int r = tm_log_batch_parse(body, strlen(body), max, b, too_large, err);

    if (r == 0)
        assert_int_equal(tm_log_batch_decode(b), 0);
    return r;
}

static void test_batch_ok(void **state)
{
    struct tm_log_batch b = {0};
    struct tm_spec_error err;
    bool big;
    (void)state;

    assert_int_equal(parse("{\"chunks\":[{\"job\":7,\"attempt\":2,\"rank\":1,\"offset\":0,\"data\":\"aGVsbG8K\"},"
                           "{\"job\":7,\"attempt\":2,\"rank\":1,\"offset\":6,\"data\":\"AP8A/w==\"}]}",
                           65536, &b, &big, &err),
                     0);
    assert_int_equal(b.n, 2);
    assert_int_equal(b.chunks[0].job, 7);
    assert_int_equal(b.chunks[0].attempt, 2);
    assert_int_equal(b.chunks[0].rank, 1);
    assert_int_equal(b.chunks[0].len, 6);
    assert_memory_equal(b.chunks[0].data, "hello\n", 6);
    /* Bytes that are not UTF-8, NUL included, come through as they were. */
    assert_int_equal(b.chunks[1].offset, 6);
    assert_int_equal(b.chunks[1].len, 4);
    assert_memory_equal(b.chunks[1].data, "\x00\xff\x00\xff", 4);
    tm_log_batch_release(&b);
}

static void refused(const char *body, size_t max, const char *field, bool want_big)
{
    struct tm_log_batch b = {0};
    struct tm_spec_error err;
    bool big;

    assert_int_equal(parse(body, max, &b, &big, &err), TM_EINVAL);
    assert_string_equal(err.field, field);
    assert_true(err.message[0] != '\0');
    assert_int_equal(big, want_big);
    assert_int_equal(b.n, 0);
}

static void test_batch_refused(void **state)
{
    (void)state;
    refused("", 65536, "body", false);
    refused("[]", 65536, "body", false);
    refused("{\"chunks\":[]}", 65536, "chunks", false);
    refused("{\"chunks\":[],\"more\":1}", 65536, "more", false);
    refused("{\"chunks\":[7]}", 65536, "chunks[0]", false);
    refused("{\"chunks\":[{\"job\":0,\"attempt\":1,\"rank\":0,\"offset\":0,\"data\":\"YQ==\"}]}", 65536,
            "chunks[0].job", false);
    refused("{\"chunks\":[{\"job\":1,\"attempt\":1,\"rank\":0,\"offset\":0,\"data\":\"YQ==\"},"
            "{\"job\":1,\"attempt\":0,\"rank\":0,\"offset\":1,\"data\":\"YQ==\"}]}", 65536, "chunks[1].attempt", false);
    refused("{\"chunks\":[{\"job\":1,\"attempt\":1,\"rank\":-1,\"offset\":0,\"data\":\"YQ==\"}]}", 65536,
            "chunks[0].rank", false);
    refused("{\"chunks\":[{\"job\":1,\"attempt\":1,\"rank\":0,\"offset\":1.5,\"data\":\"YQ==\"}]}", 65536,
            "chunks[0].offset", false);
    refused("{\"chunks\":[{\"job\":1,\"attempt\":1,\"rank\":0,\"offset\":0}]}", 65536, "chunks[0].data", false);
    refused("{\"chunks\":[{\"job\":1,\"attempt\":1,\"rank\":0,\"offset\":0,\"data\":\"\"}]}", 65536,
            "chunks[0].data", false);
    refused("{\"chunks\":[{\"job\":1,\"attempt\":1,\"rank\":0,\"offset\":0,\"data\":\"YQ\"}]}", 65536,
            "chunks[0].data", false);
    refused("{\"chunks\":[{\"job\":1,\"attempt\":1,\"rank\":0,\"offset\":0,\"data\":\"Y=Q=\"}]}", 65536,
            "chunks[0].data", false);
    refused("{\"chunks\":[{\"job\":1,\"attempt\":1,\"rank\":0,\"offset\":0,\"data\":\"YQ==\",\"data\":\"YQ==\"}]}",
            65536, "chunks[0].data", false);
    refused("{\"chunks\":[{\"job\":1,\"attempt\":1,\"rank\":0,\"offset\":0,\"data\":\"YQ==\",\"x\":1}]}", 65536,
            "chunks[0].x", false);
    /* Over the size limit: the data is named, and it is told apart. */
    refused("{\"chunks\":[{\"job\":1,\"attempt\":1,\"rank\":0,\"offset\":0,\"data\":\"aGVsbG8K\"}]}", 5,
            "chunks[0].data", true);
}

static void test_b64_round_trip(void **state)
{
    unsigned char all[256];
    char *text, body[1024];
    struct tm_log_batch b = {0};
    struct tm_spec_error err;
    bool big;
    (void)state;

    for (int i = 0; i < 256; i++)
        all[i] = (unsigned char)i;
    for (size_t n = 1; n <= 256; n += 37) {
        text = tm_log_b64_encode(all, n);
        assert_non_null(text);
        snprintf(body, sizeof(body), "{\"chunks\":[{\"job\":1,\"attempt\":1,\"rank\":0,\"offset\":0,\"data\":\"%s\"}]}",
                 text);
        free(text);
        assert_int_equal(parse(body, 65536, &b, &big, &err), 0);
        assert_int_equal(b.chunks[0].len, n);
        assert_memory_equal(b.chunks[0].data, all, n);
        tm_log_batch_release(&b);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_batch_ok),
        cmocka_unit_test(test_batch_refused),
        cmocka_unit_test(test_b64_round_trip),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
