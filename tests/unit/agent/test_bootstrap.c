/*
 * tests/unit/agent/test_bootstrap.c: filling a node's bootstrap template,
 * and the bound config load checks it against (EC2's 16 KB of base64).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "core/bootstrap.h"

static void test_fill(void **state)
{
    (void)state;
    static const char tmpl[] = "U={{controller_url}} S={{enroll_secret}} N={{node_id}} P={{pool}}\n"
                               "{{ca_pem}}{{unknown}} {{node_id}}";
    const struct tm_bootstrap_values v = {.controller_url = "https://c:8443", .ca_pem = "PEM\n",
                                          .enroll_secret = "tme_abc", .node_id = "42", .pool = "od"};
    char *out = NULL;
    size_t n = 0;

    assert_int_equal(tm_bootstrap_fill(tmpl, strlen(tmpl), &v, &out, &n), 0);
    assert_string_equal(out, "U=https://c:8443 S=tme_abc N=42 P=od\nPEM\n{{unknown}} 42");
    assert_int_equal(n, strlen(out));
    free(out);
}

static void test_bound(void **state)
{
    (void)state;
    static const char tmpl[] = "a{{enroll_secret}}b{{ca_pem}}";
    /* 2 bytes, one placeholder at its longest, the CA at its size. */
    assert_int_equal(tm_bootstrap_max_filled(tmpl, strlen(tmpl), 1000), 2 + TM_BOOTSTRAP_VALUE_MAX + 1000);
    assert_int_equal(tm_bootstrap_base64_len(0), 0);
    assert_int_equal(tm_bootstrap_base64_len(1), 4);
    assert_int_equal(tm_bootstrap_base64_len(12288), 16384);
    assert_int_equal(tm_bootstrap_base64_len(12289), 16388);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fill),
        cmocka_unit_test(test_bound),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
