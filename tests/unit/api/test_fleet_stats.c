/*
 * tests/unit/api/test_fleet_stats.c: the controller's in-process counters for
 * /metrics: which bucket a tick lands in (a bucket holds durations up to
 * and including its bound, as Prometheus's "le" says), what each error
 * code counts as, what is not counted, and the label names /metrics
 * prints.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "controller/api/fleet_stats.h"
#include "core/err.h"

static void test_tick_buckets(void **state)
{
    struct tm_fleet_stats s;
    static const char *const names[] = {"a"};
    (void)state;

    assert_int_equal(tm_fleet_stats_init(&s, names, 1), 0);
    /* On a bound: that bucket; just past it: the next; past the last
     * bound: +Inf; a negative reading (cannot happen) counts as 0, in
     * the first bucket. */
    tm_fleet_stats_tick_done(&s, 0.005);
    tm_fleet_stats_tick_done(&s, 0.0051);
    tm_fleet_stats_tick_done(&s, 30);
    tm_fleet_stats_tick_done(&s, 30.5);
    tm_fleet_stats_tick_done(&s, -1);
    assert_true(tm_fleet_tick_bounds_s[2] == 0.005);
    assert_int_equal(s.tick_buckets[0], 1);
    assert_int_equal(s.tick_buckets[2], 1);
    assert_int_equal(s.tick_buckets[3], 1);
    assert_int_equal(s.tick_buckets[TM_FLEET_TICK_BUCKETS - 1], 1);
    assert_int_equal(s.tick_buckets[TM_FLEET_TICK_BUCKETS], 1);
    assert_int_equal(s.tick_count, 5);
    assert_true(s.tick_seconds_sum > 60.5101 - 1e-9 && s.tick_seconds_sum < 60.5101 + 1e-9);
    for (size_t i = 1; i < TM_FLEET_TICK_BUCKETS; i++)
        assert_true(tm_fleet_tick_bounds_s[i] > tm_fleet_tick_bounds_s[i - 1]);
    tm_fleet_stats_release(&s);
    assert_null(s.providers);
    assert_int_equal(s.tick_count, 0);
    tm_fleet_stats_release(&s); /* twice is harmless */
}

static void test_calls(void **state)
{
    struct tm_fleet_stats s;
    static const char *const names[] = {"sim", "aws-main"};
    (void)state;

    assert_int_equal(tm_fleet_stats_init(&s, names, 2), 0);
    assert_string_equal(s.providers[1].name, "aws-main");
    tm_fleet_stats_call(&s, 1, TM_FLEET_OP_LIST, 0);
    tm_fleet_stats_call(&s, 1, TM_FLEET_OP_LIST, TM_EAUTH);
    tm_fleet_stats_call(&s, 1, TM_FLEET_OP_LAUNCH, TM_EQUOTA);
    tm_fleet_stats_call(&s, 0, TM_FLEET_OP_TERMINATE, -ETIMEDOUT);
    /* Abandoned at shutdown, or a provider or operation we do not know:
     * nothing counted. */
    tm_fleet_stats_call(&s, 0, TM_FLEET_OP_LAUNCH, TM_ECANCELED);
    tm_fleet_stats_call(&s, 2, TM_FLEET_OP_LAUNCH, TM_EAUTH);
    tm_fleet_stats_call(&s, 0, TM_FLEET_OP_MAX, TM_EAUTH);
    assert_int_equal(s.providers[1].calls[TM_FLEET_OP_LIST], 2);
    assert_int_equal(s.providers[1].errors[TM_FLEET_OP_LIST][TM_FLEET_ERR_AUTH], 1);
    assert_int_equal(s.providers[1].errors[TM_FLEET_OP_LAUNCH][TM_FLEET_ERR_QUOTA], 1);
    assert_int_equal(s.providers[0].calls[TM_FLEET_OP_TERMINATE], 1);
    assert_int_equal(s.providers[0].errors[TM_FLEET_OP_TERMINATE][TM_FLEET_ERR_TIMEOUT], 1);
    assert_int_equal(s.providers[0].calls[TM_FLEET_OP_LAUNCH], 0);
    uint64_t errors = 0;
    for (size_t p = 0; p < 2; p++)
        for (int op = 0; op < TM_FLEET_OP_MAX; op++)
            for (int k = 0; k < TM_FLEET_ERR_MAX; k++)
                errors += s.providers[p].errors[op][k];
    assert_int_equal(errors, 3);
    tm_fleet_stats_release(&s);
}

static void test_kinds(void **state)
{
    static const struct { int err; const char *kind; } table[] = {
        {TM_EAUTH, "auth"},          {TM_ETHROTTLED, "throttled"}, {TM_EQUOTA, "quota"},
        {TM_EUNAVAIL, "unavailable"}, {-ETIMEDOUT, "timeout"},      {-ECONNREFUSED, "connection"},
        {-ECONNRESET, "connection"},  {TM_EBADREPLY, "bad_reply"},  {TM_EINVAL, "invalid"},
        {TM_ENOMEM, "other"},         {-EIO, "other"},              {TM_EDB, "other"},
    };
    (void)state;

    for (size_t i = 0; i < sizeof(table) / sizeof(table[0]); i++)
        assert_string_equal(tm_fleet_err_kind_name(tm_fleet_err_kind_of(table[i].err)), table[i].kind);
    /* Every kind and operation has a distinct label value. */
    for (int a = 0; a < TM_FLEET_ERR_MAX; a++)
        for (int b = a + 1; b < TM_FLEET_ERR_MAX; b++)
            assert_string_not_equal(tm_fleet_err_kind_name((enum tm_fleet_err_kind)a),
                                    tm_fleet_err_kind_name((enum tm_fleet_err_kind)b));
    assert_string_equal(tm_fleet_op_name(TM_FLEET_OP_LIST), "list");
    assert_string_equal(tm_fleet_op_name(TM_FLEET_OP_LAUNCH), "launch");
    assert_string_equal(tm_fleet_op_name(TM_FLEET_OP_TERMINATE), "terminate");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_tick_buckets),
        cmocka_unit_test(test_calls),
        cmocka_unit_test(test_kinds),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
