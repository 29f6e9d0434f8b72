/*
 * core/units.c: the duration and price parsers (grammar in units.h).
 *
 * Both scan by hand rather than with strtoll/strtod: those skip leading
 * spaces, take signs, "inf" and hex, and depend on the locale, and none of
 * that belongs in a configuration value or a command-line flag.
 */
#include "core/units.h"

#include <stdbool.h>
#include <stddef.h>
#include <string.h>

#include "core/err.h"

#define UNITS_SEC 1000LL
#define UNITS_UUSD 1000000LL
/* Seven integer digits of dollars: no real instance costs more per hour. */
#define UNITS_PRICE_INT_DIGITS 7
#define UNITS_PRICE_FRAC_DIGITS 6

static bool is_digit(char ch)
{
    return ch >= '0' && ch <= '9';
}

int tm_duration_parse(const char *text, int64_t *ret_ms)
{
    /* "ms" is listed before "m", so "5ms" is not read as minutes. */
    static const struct {
        const char *unit;
        int64_t ms;
    } units[] = {
        {"ms", 1}, {"s", UNITS_SEC}, {"m", 60 * UNITS_SEC}, {"h", 3600 * UNITS_SEC},
        {"d", 86400 * UNITS_SEC},
    };
    int64_t total = 0;
    const char *p = text;

    if (!text || !*text)
        return TM_EINVAL;
    while (*p) {
        const char *start = p;
        int64_t n = 0;
        size_t u, len = 0;

        if (!is_digit(*p))
            return TM_EINVAL;
        /* No count of any unit may pass the cap, so n cannot overflow. */
        for (; is_digit(*p); p++) {
            n = n * 10 + (*p - '0');
            if (n > TM_DURATION_MAX_MS)
                return TM_EINVAL;
        }
        if (*p == '\0' && start == text) {
            /* The whole text is one bare integer: seconds. */
            if (n > TM_DURATION_MAX_MS / UNITS_SEC)
                return TM_EINVAL;
            *ret_ms = n * UNITS_SEC;
            return 0;
        }
        for (u = 0; u < sizeof(units) / sizeof(units[0]); u++) {
            len = strlen(units[u].unit);
            if (strncmp(p, units[u].unit, len) == 0)
                break;
        }
        if (u == sizeof(units) / sizeof(units[0]))
            return TM_EINVAL;
        p += len;
        if (n > (TM_DURATION_MAX_MS - total) / units[u].ms)
            return TM_EINVAL;
        total += n * units[u].ms;
    }
    *ret_ms = total;
    return 0;
}

const char *tm_price_problem(const char *text, int64_t *ret_uusd)
{
    int64_t whole = 0, frac = 0;
    int idigits = 0, fdigits = 0;
    const char *p = text;

    if (*p == '-')
        return "must not be negative";
    for (; is_digit(*p); p++) {
        if (++idigits > UNITS_PRICE_INT_DIGITS)
            return "is too large";
        whole = whole * 10 + (*p - '0');
    }
    if (idigits == 0)
        return "expected decimal dollars per hour such as 32.77";
    if (*p == '.') {
        for (p++; is_digit(*p); p++) {
            if (++fdigits > UNITS_PRICE_FRAC_DIGITS)
                return "has more than 6 decimal places";
            frac = frac * 10 + (*p - '0');
        }
        if (fdigits == 0)
            return "expected decimal dollars per hour such as 32.77";
    }
    if (*p != '\0')
        return "expected decimal dollars per hour such as 32.77";
    for (; fdigits < UNITS_PRICE_FRAC_DIGITS; fdigits++)
        frac *= 10;
    *ret_uusd = whole * UNITS_UUSD + frac;
    return NULL;
}

int tm_price_parse(const char *text, int64_t *ret_uusd)
{
    int64_t v;

    if (!text || tm_price_problem(text, &v))
        return TM_EINVAL;
    *ret_uusd = v;
    return 0;
}

/* Days since 1970-01-01 of a proleptic Gregorian date (H. Hinnant's
 * days_from_civil). */
static int64_t days_from_civil(int64_t y, int64_t m, int64_t d)
{
    int64_t era, yoe, doy, doe;

    y -= m <= 2;
    era = (y >= 0 ? y : y - 399) / 400;
    yoe = y - era * 400;
    doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
    doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    return era * 146097 + doe - 719468;
}

static bool digits(const char *s, int n, int64_t *ret)
{
    int64_t v = 0;

    for (int i = 0; i < n; i++) {
        if (s[i] < '0' || s[i] > '9')
            return false;
        v = v * 10 + (s[i] - '0');
    }
    *ret = v;
    return true;
}

bool tm_utc_datetime_parse(const char *s, int64_t *ret_ms)
{
    static const int mdays[] = {31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
    int64_t y, mo, d, h, mi, se;

    if (strlen(s) != 19 || s[4] != '-' || s[7] != '-' || (s[10] != ' ' && s[10] != 'T') ||
        s[13] != ':' || s[16] != ':')
        return false;
    if (!digits(s, 4, &y) || !digits(s + 5, 2, &mo) || !digits(s + 8, 2, &d) ||
        !digits(s + 11, 2, &h) || !digits(s + 14, 2, &mi) || !digits(s + 17, 2, &se))
        return false;
    if (mo < 1 || mo > 12 || d < 1 || d > mdays[mo - 1] || h > 23 || mi > 59 || se > 60)
        return false;
    *ret_ms = ((days_from_civil(y, mo, d) * 24 + h) * 60 + mi) * 60000 + se * 1000;
    return true;
}
