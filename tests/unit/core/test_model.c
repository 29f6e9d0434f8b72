/* tests/unit/core/test_model.c: state names, durations, error codes, log redaction. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "core/model.h"
#include "core/err.h"
#include "core/log.h"
#include "core/units.h"

static void test_names_round_trip(void **state)
{
    (void)state;
    for (int s = 0; s < TM_JOB_STATE_MAX; s++)
        assert_int_equal(tm_job_state_parse(tm_job_state_name(s)), s);
    for (int s = 0; s < TM_NODE_STATE_MAX; s++)
        assert_int_equal(tm_node_state_parse(tm_node_state_name(s)), s);
    for (int c = 0; c < TM_CLASS_MAX; c++)
        assert_int_equal(tm_job_class_parse(tm_job_class_name(c)), c);
    assert_int_equal(tm_job_state_parse("Queued"), -1);
    assert_int_equal(tm_node_state_parse(NULL), -1);
}

static void test_durations(void **state)
{
    int64_t ms = -1;
    (void)state;
    assert_int_equal(tm_duration_parse("90", &ms), 0);
    assert_int_equal(ms, 90000);
    assert_int_equal(tm_duration_parse("15m", &ms), 0);
    assert_int_equal(ms, 900000);
    assert_int_equal(tm_duration_parse("500ms", &ms), 0);
    assert_int_equal(ms, 500);
    assert_int_equal(tm_duration_parse("1d", &ms), 0);
    assert_int_equal(ms, 86400000);
    assert_int_equal(tm_duration_parse("-5s", &ms), TM_EINVAL);
    assert_int_equal(tm_duration_parse("5 s", &ms), TM_EINVAL);
    assert_int_equal(tm_duration_parse("5w", &ms), TM_EINVAL);
    assert_int_equal(tm_duration_parse("", &ms), TM_EINVAL);
    assert_int_equal(tm_duration_parse("99999999999999999999d", &ms), TM_EINVAL);
}

static void test_errors(void **state)
{
    (void)state;
    assert_string_equal(tm_err_name(TM_EQUOTA), "TM_EQUOTA");
    assert_true(tm_err_retryable(TM_ETHROTTLED));
    assert_false(tm_err_retryable(TM_EAUTH));
    assert_string_equal(tm_strerror(TM_EAUTH), "authentication failed");
}

static void test_log_redacts_secrets(void **state)
{
    char buf[4096];
    FILE *f = fmemopen(buf, sizeof(buf), "w");
    (void)state;
    assert_non_null(f);
    tm_log_set_stream(f);
    tm_log_add_secret("wJalrXUtnFEMI/K7MDENG");
    tm_log_add_secret("acted"); /* occurs inside the mark itself: must not loop */
    tm_log_info("calling", "key=%s again=%s", "wJalrXUtnFEMI/K7MDENG", "redacted-acted");
    fflush(f);
    fclose(f);
    tm_log_set_stream(NULL);
    tm_log_clear_secrets();
    assert_null(strstr(buf, "wJalrXUtnFEMI"));
    assert_non_null(strstr(buf, "key=[redacted]"));
    assert_non_null(strstr(buf, "msg=\"calling\""));
}

static void test_log_secret_limit_keeps_newest(void **state)
{
    char buf[4096], secret[32];
    FILE *f;
    (void)state;
    for (int i = 0; i < 300; i++) {
        snprintf(secret, sizeof(secret), "rotated-secret-%04d", i);
        tm_log_add_secret(secret);
    }
    f = fmemopen(buf, sizeof(buf), "w");
    assert_non_null(f);
    tm_log_set_stream(f);
    tm_log_info("rotation", "newest=%s", "rotated-secret-0299");
    tm_log_remove_secret("rotated-secret-0298");
    tm_log_info("rotation", "removed=%s", "rotated-secret-0298");
    fclose(f);
    tm_log_set_stream(NULL);
    tm_log_clear_secrets();
    assert_null(strstr(buf, "newest=rotated-secret-0299"));
    assert_non_null(strstr(buf, "removed=rotated-secret-0298"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_names_round_trip),
        cmocka_unit_test(test_durations),
        cmocka_unit_test(test_errors),
        cmocka_unit_test(test_log_redacts_secrets),
        cmocka_unit_test(test_log_secret_limit_keeps_newest),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
