/* tests/unit/core/test_units.c: the duration and price grammars of core/units.h. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "core/err.h"
#include "core/units.h"

#define REFUSED (-1)

static const int64_t S = 1000, M = 60 * 1000, H = 3600 * 1000, D = 86400 * 1000;

static void test_durations(void **state)
{
    static const struct {
        const char *text;
        int64_t ms; /* REFUSED, or the value */
    } cases[] = {
        /* Bare integers are seconds. */
        {"0", 0},
        {"90", 90 * S},
        {"007", 7 * S},
        {"3155760000", 3155760000LL * S}, /* exactly a century */
        {"3155760001", REFUSED},
        /* One group. */
        {"500ms", 500},
        {"0ms", 0},
        {"90s", 90 * S},
        {"15m", 15 * M},
        {"2h", 2 * H},
        {"1d", D},
        {"36525d", 36525 * D},
        {"36526d", REFUSED},
        {"3155760000000ms", 36525 * D},
        {"3155760000001ms", REFUSED},
        /* Several groups add up, in any order, repeated or not. */
        {"1h30m", H + 30 * M},
        {"30m1h", H + 30 * M},
        {"1m1m", 2 * M},
        {"1d2h3m4s5ms", D + 2 * H + 3 * M + 4 * S + 5},
        {"5m30s", 5 * M + 30 * S},
        {"36524d24h", 36525 * D},
        {"36525d1ms", REFUSED},
        /* Outside the grammar. */
        {"", REFUSED},
        {"1h30", REFUSED},
        {"1.5h", REFUSED},
        {"1.5s", REFUSED},
        {".5s", REFUSED},
        {"-5s", REFUSED},
        {"-5", REFUSED},
        {"+5", REFUSED},
        {"+5s", REFUSED},
        {" 5s", REFUSED},
        {"5s ", REFUSED},
        {"5 s", REFUSED},
        {"1h 30m", REFUSED},
        {"s", REFUSED},
        {"h1", REFUSED},
        {"5w", REFUSED},
        {"5S", REFUSED},
        {"5sec", REFUSED},
        {"5mss", REFUSED},
        {"1e3", REFUSED},
        {"0x10", REFUSED},
        /* Overflow of one number and of the sum. */
        {"99999999999999999999", REFUSED},
        {"99999999999999999999d", REFUSED},
        {"99999999999d", REFUSED},
        {"9223372036854775807ms", REFUSED},
        {"36525d36525d", REFUSED},
    };

    (void)state;
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        int64_t v = -7;
        int r = tm_duration_parse(cases[i].text, &v);

        if (cases[i].ms == REFUSED) {
            if (r != TM_EINVAL || v != -7)
                fail_msg("\"%s\": want refused, got r=%d v=%lld", cases[i].text, r, (long long)v);
        } else if (r != 0 || v != cases[i].ms) {
            fail_msg("\"%s\": want %lld, got r=%d v=%lld", cases[i].text, (long long)cases[i].ms,
                     r, (long long)v);
        }
    }
    assert_int_equal(tm_duration_parse(NULL, &(int64_t){0}), TM_EINVAL);
}

static void test_prices(void **state)
{
    static const struct {
        const char *text;
        int64_t uusd;    /* REFUSED, or the value */
        const char *why; /* tm_price_problem's phrase when refused */
    } cases[] = {
        {"0", 0, NULL},
        {"7", 7000000, NULL},
        {"4.00", 4000000, NULL},
        {"4.10", 4100000, NULL},
        {"32.77", 32770000, NULL},
        {"32.7726", 32772600, NULL},
        {"0.000001", 1, NULL},
        {"0.1", 100000, NULL},
        {"000.5", 500000, NULL},
        {"9999999.999999", 9999999999999LL, NULL},
        {"0000007", 7000000, NULL},
        {"", REFUSED, "expected decimal dollars per hour such as 32.77"},
        {".", REFUSED, "expected decimal dollars per hour such as 32.77"},
        {".5", REFUSED, "expected decimal dollars per hour such as 32.77"},
        {"32.", REFUSED, "expected decimal dollars per hour such as 32.77"},
        {"-1", REFUSED, "must not be negative"},
        {"-0.5", REFUSED, "must not be negative"},
        {"+1", REFUSED, "expected decimal dollars per hour such as 32.77"},
        {"1.0000001", REFUSED, "has more than 6 decimal places"},
        {"1.1234567", REFUSED, "has more than 6 decimal places"},
        {"10000000", REFUSED, "is too large"},
        {"00000001", REFUSED, "is too large"},
        {"99999999999999999999", REFUSED, "is too large"},
        {"1e3", REFUSED, "expected decimal dollars per hour such as 32.77"},
        {"0x10", REFUSED, "expected decimal dollars per hour such as 32.77"},
        {"1,5", REFUSED, "expected decimal dollars per hour such as 32.77"},
        {"1.5 ", REFUSED, "expected decimal dollars per hour such as 32.77"},
        {" 1.5", REFUSED, "expected decimal dollars per hour such as 32.77"},
        {"1..5", REFUSED, "expected decimal dollars per hour such as 32.77"},
        {"nan", REFUSED, "expected decimal dollars per hour such as 32.77"},
        {"$1", REFUSED, "expected decimal dollars per hour such as 32.77"},
    };

    (void)state;
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        int64_t v = -7, w = -7;
        int r = tm_price_parse(cases[i].text, &v);
        const char *why = tm_price_problem(cases[i].text, &w);

        if (cases[i].uusd == REFUSED) {
            if (r != TM_EINVAL || v != -7 || w != -7 || !why || strcmp(why, cases[i].why) != 0)
                fail_msg("\"%s\": want refused (%s), got r=%d v=%lld why=%s", cases[i].text,
                         cases[i].why, r, (long long)v, why ? why : "(null)");
        } else if (r != 0 || v != cases[i].uusd || why || w != cases[i].uusd) {
            fail_msg("\"%s\": want %lld, got r=%d v=%lld", cases[i].text,
                     (long long)cases[i].uusd, r, (long long)v);
        }
    }
    assert_int_equal(tm_price_parse(NULL, &(int64_t){0}), TM_EINVAL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_durations),
        cmocka_unit_test(test_prices),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
