/*
 * core/units.h: the one parser per unit that every layer shares.  The config
 * loader, the price tables, job specs and the CLI all read durations and
 * prices here, so "90s" or "32.77" means the same wherever it is written.
 *
 * Durations, in milliseconds:
 *
 *     duration = seconds | group { group }
 *     seconds  = digit { digit }            a bare integer counts seconds
 *     group    = digit { digit } unit
 *     unit     = "ms" | "s" | "m" | "h" | "d"
 *
 *   Groups add up and may come in any order or repeat: "1h30m" and "30m1h"
 *   are 5400000, "90s" is 90000, "90" is 90000, "500ms" is 500, "0" is 0.
 *   Refused: the empty string, any sign ("-5s", "+5"), spaces ("5 s"),
 *   fractions ("1.5s", "1.5h"), exponents, a trailing number without a unit
 *   after a group ("1h30"), a unit without a number ("s"), any other unit
 *   ("5w"), and any total above TM_DURATION_MAX_MS (36525 days, a century:
 *   anything longer is a typo, and the cap keeps now + duration far from
 *   int64 overflow), also when a single number overflows.
 *
 * Prices, decimal US dollars (per hour where the caller says so), in
 * micro-dollars exactly (integer arithmetic only: 0.1 has no exact binary
 * form, and money must add up):
 *
 *     price    = idigits [ "." fdigits ]
 *     idigits  = 1 to 7 digits              leading zeros count
 *     fdigits  = 1 to 6 digits
 *
 *   "32.77" is 32770000, "7" is 7000000, "0.000001" is 1, the largest is
 *   "9999999.999999".  Refused: the empty string, any sign ("-1", "+1"), a
 *   missing integer or fraction part (".5", "32."), more than 6 decimals
 *   ("1.0000001"), more than 7 integer digits ("10000000"), exponents
 *   ("1e3"), hex, separators ("1,5") and spaces.
 */
#ifndef TM_UNITS_H
#define TM_UNITS_H

#include <stdbool.h>
#include <stdint.h>

#define TM_DURATION_MAX_MS (36525LL * 24 * 3600 * 1000)
#define TM_PRICE_MAX_UUSD (9999999LL * 1000000 + 999999)

/* Parse a duration (grammar above) into *ret_ms.  Returns 0, or TM_EINVAL
 * with *ret_ms untouched (text NULL or outside the grammar). */
int tm_duration_parse(const char *text, int64_t *ret_ms);

/* Parse a price (grammar above) into *ret_uusd.  Returns 0, or TM_EINVAL
 * with *ret_uusd untouched (text NULL or outside the grammar). */
int tm_price_parse(const char *text, int64_t *ret_uusd);

/* The same as tm_price_parse, for callers that explain a refusal: NULL when
 * *ret_uusd was set, else why text is refused, as a static lower-case
 * phrase that completes "bad price \"...\": " ("must not be negative", "is
 * too large", "has more than 6 decimal places", or "expected decimal
 * dollars per hour such as 32.77").  text must not be NULL. */
const char *tm_price_problem(const char *text, int64_t *ret_uusd);

/* "YYYY-MM-DD HH:MM:SS" (or with a T between) as UTC: true and ms since
 * the epoch, false when s is not exactly that. */
bool tm_utc_datetime_parse(const char *s, int64_t *ret_ms);

#endif
