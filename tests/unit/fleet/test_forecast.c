/*
 * tests/unit/fleet/test_forecast.c: controller/fleet/forecast.c on series with known
 * answers (constant, ramp, seasons, noise, gaps), the strict CSV reader's
 * errors, the openb demand derivation, and one real Helios series.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#ifdef TM_FORECAST_CLI_TESTS
#include "controller/cli/cli.h"
#endif
#include "controller/fleet/forecast.h"
#include "core/err.h"

#define MIN_MS INT64_C(60000)
#define DAY_MIN 1440

/* Deterministic noise: splitmix64 and Box-Muller. */
static uint64_t rng_state;

static double uniform01(void)
{
    uint64_t z = (rng_state += 0x9e3779b97f4a7c15ULL);

    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    z ^= z >> 31;
    return ((double)(z >> 11) + 0.5) / 9007199254740992.0;
}

static double normal(void)
{
    return sqrt(-2.0 * log(uniform01())) * cos(2.0 * M_PI * uniform01());
}

struct series {
    int64_t *t;
    double *v;
    size_t n;
};

static struct series series_alloc(size_t n)
{
    struct series s = {.t = calloc(n, sizeof(int64_t)), .v = calloc(n, sizeof(double)), .n = 0};

    assert_non_null(s.t);
    assert_non_null(s.v);
    return s;
}

static void series_free(struct series *s)
{
    free(s->t);
    free(s->v);
}

static struct tm_forecast_score eval(enum tm_forecast_kind k, const struct series *s, int64_t step_ms,
                                     int64_t horizon_ms, double q, int64_t warmup_ms)
{
    struct tm_forecast_params p;
    struct tm_forecast_score sc;

    tm_forecast_params_default(&p);
    p.step_ms = step_ms;
    assert_int_equal(tm_forecast_evaluate(k, &p, s->t, s->v, s->n, horizon_ms, q, warmup_ms, &sc), 0);
    return sc;
}

static void test_names(void **state)
{
    struct tm_forecast_params p;
    struct tm_forecast *f = NULL;
    double m, u;

    assert_string_equal(tm_forecast_kind_name(TM_FORECAST_TARMAC), "tarmac");
    assert_string_equal(tm_forecast_kind_name(TM_FORECAST_NAIVE), "naive");
    assert_string_equal(tm_forecast_kind_name(TM_FORECAST_SEASONAL_NAIVE), "seasonal-naive");
    assert_null(tm_forecast_kind_name(TM_FORECAST_KIND_MAX));
    tm_forecast_params_default(&p);
    assert_int_equal(p.step_ms, 60000);
    assert_int_equal(p.horizon_steps, 4); /* 180 s boot + 60 s tick */
    p.step_ms = 10;
    assert_int_equal(tm_forecast_new(TM_FORECAST_TARMAC, &p, &f), TM_EINVAL);
    assert_null(f);
    tm_forecast_params_default(&p);
    assert_int_equal(tm_forecast_new(TM_FORECAST_TARMAC, &p, &f), 0);
    assert_int_equal(tm_forecast_predict(f, 240000, 0.9, &m, &u), TM_EINVAL); /* nothing seen */
    assert_int_equal(tm_forecast_observe(f, 0, NAN), TM_EINVAL);
    assert_int_equal(tm_forecast_observe(f, 0, 3.0), 0);
    assert_int_equal(tm_forecast_predict(f, 240000, 1.0, &m, &u), TM_EINVAL);
    assert_int_equal(tm_forecast_predict(f, 240000, 0.9, &m, &u), 0);
    assert_true(m == 3.0);
    tm_forecast_free(f);
    tm_forecast_free(NULL);
}

/* A constant is forecast exactly by every model, upper bound included. */
static void test_constant(void **state)
{
    struct series s = series_alloc(3 * DAY_MIN);

    for (size_t i = 0; i < 3 * DAY_MIN; i++) {
        s.t[s.n] = (int64_t)i * MIN_MS;
        s.v[s.n++] = 42.0;
    }
    for (int k = 0; k < TM_FORECAST_KIND_MAX; k++) {
        struct tm_forecast_score sc = eval(k, &s, MIN_MS, 240000, 0.9, 86400000);
        assert_true(sc.pinball == 0.0);
        assert_true(sc.mape == 0.0);
        assert_true(sc.coverage == 1.0);
        assert_int_equal(sc.scored, 2 * DAY_MIN);
    }
    series_free(&s);
}

/*
 * Known daily and weekly seasons plus noise, at a 15-minute step and a
 * one-hour horizon, where the seasons move the value a lot within the
 * horizon: tarmac must beat both baselines clearly.
 */
static void test_seasonal(void **state)
{
    const int per_day = 96, days = 35;
    struct series s = series_alloc((size_t)per_day * days);
    struct tm_forecast_score sc[TM_FORECAST_KIND_MAX];

    rng_state = 1;
    for (int i = 0; i < per_day * days; i++) {
        double tod = (double)(i % per_day) / per_day;
        int dow = (i / per_day) % 7;
        s.t[s.n] = (int64_t)i * 15 * MIN_MS;
        s.v[s.n++] = 100.0 + 30.0 * sin(2.0 * M_PI * tod) + (dow >= 5 ? -25.0 : 0.0) + 3.0 * normal();
    }
    for (int k = 0; k < TM_FORECAST_KIND_MAX; k++) {
        sc[k] = eval(k, &s, 15 * MIN_MS, 3600000, 0.9, 7 * 86400000LL);
        print_message("seasonal %s: pinball %.3f mape %.2f coverage %.3f\n", tm_forecast_kind_name(k),
                      sc[k].pinball, sc[k].mape, sc[k].coverage);
    }
    assert_true(sc[TM_FORECAST_TARMAC].pinball < 0.75 * sc[TM_FORECAST_NAIVE].pinball);
    assert_true(sc[TM_FORECAST_TARMAC].pinball < 0.5 * sc[TM_FORECAST_SEASONAL_NAIVE].pinball);
    assert_true(sc[TM_FORECAST_TARMAC].mape < 0.75 * sc[TM_FORECAST_NAIVE].mape);
    /* Noise of sd 3 puts the best possible pinball at 3 x 0.1755 = 0.53. */
    assert_true(sc[TM_FORECAST_TARMAC].pinball < 0.8);
    series_free(&s);
}

/* Three days only: the daily season alone (no week yet) already beats
 * the last value. */
static void test_daily_only(void **state)
{
    const int per_day = 96, days = 3;
    struct series s = series_alloc((size_t)per_day * days);
    struct tm_forecast_score t, nv;

    rng_state = 2;
    for (int i = 0; i < per_day * days; i++) {
        s.t[s.n] = (int64_t)i * 15 * MIN_MS;
        s.v[s.n++] = 60.0 + 25.0 * sin(2.0 * M_PI * (i % per_day) / per_day) + 2.0 * normal();
    }
    t = eval(TM_FORECAST_TARMAC, &s, 15 * MIN_MS, 3600000, 0.9, 86400000);
    nv = eval(TM_FORECAST_NAIVE, &s, 15 * MIN_MS, 3600000, 0.9, 86400000);
    print_message("daily only: tarmac %.3f naive %.3f\n", t.pinball, nv.pinball);
    assert_true(t.pinball < 0.8 * nv.pinball);
    series_free(&s);
}

/* A ramp: the trend is followed; the last value is always `slope x h`
 * short (its error quantile makes up for it, so only the mean shows). */
static void test_trend(void **state)
{
    struct series s = series_alloc(2 * DAY_MIN);
    struct tm_forecast_params p;
    struct tm_forecast *f;
    struct tm_forecast_score t, nv;
    double m, u;

    for (int i = 0; i < 2 * DAY_MIN; i++) {
        s.t[s.n] = (int64_t)i * MIN_MS;
        s.v[s.n++] = 10.0 + 0.5 * i;
    }
    t = eval(TM_FORECAST_TARMAC, &s, MIN_MS, 240000, 0.9, 3600000);
    nv = eval(TM_FORECAST_NAIVE, &s, MIN_MS, 240000, 0.9, 3600000);
    assert_true(t.mape < 0.05 * nv.mape);
    assert_true(t.pinball < 0.02);

    tm_forecast_params_default(&p);
    assert_int_equal(tm_forecast_new(TM_FORECAST_TARMAC, &p, &f), 0);
    for (size_t i = 0; i < s.n; i++)
        assert_int_equal(tm_forecast_observe(f, s.t[i], s.v[i]), 0);
    assert_int_equal(tm_forecast_predict(f, 240000, 0.9, &m, &u), 0);
    assert_true(fabs(m - (s.v[s.n - 1] + 2.0)) < 0.05);
    assert_true(u >= m - 0.05);
    /* Three hours without data: the ramp is assumed to go on. */
    assert_int_equal(tm_forecast_observe(f, (int64_t)(s.n + 180) * MIN_MS, 10.0 + 0.5 * (double)(s.n + 180)), 0);
    assert_int_equal(tm_forecast_predict(f, 240000, 0.9, &m, &u), 0);
    assert_true(fabs(m - (10.0 + 0.5 * (double)(s.n + 184))) < 0.05);
    tm_forecast_free(f);
    series_free(&s);
}

/* Missing minutes: fewer scores, no errors invented, still far better
 * than seasonal-naive; resampling keeps a step's last value; time never
 * goes back. */
static void test_missing(void **state)
{
    struct series s = series_alloc(4 * DAY_MIN);
    struct tm_forecast_params p;
    struct tm_forecast *f;
    struct tm_forecast_score sc, sn;
    double m, u;
    size_t expect = 0;

    rng_state = 7;
    /* Every other minute, and nothing for three hours on day 3. */
    for (int i = 0; i < 4 * DAY_MIN; i += 2) {
        if (i >= 3 * DAY_MIN && i < 3 * DAY_MIN + 180)
            continue;
        s.t[s.n] = (int64_t)i * MIN_MS;
        s.v[s.n++] = 50.0 + 20.0 * sin(2.0 * M_PI * i / DAY_MIN) + normal();
    }
    /* A step is scored when it and the step 4 minutes before both exist. */
    for (size_t i = 0; i < s.n; i++) {
        int64_t k = s.t[i] / MIN_MS;
        bool origin = false;
        for (size_t j = 0; j < i; j++)
            origin |= s.t[j] / MIN_MS == k - 4;
        expect += origin && k >= DAY_MIN;
    }
    sc = eval(TM_FORECAST_TARMAC, &s, MIN_MS, 240000, 0.9, 86400000);
    sn = eval(TM_FORECAST_SEASONAL_NAIVE, &s, MIN_MS, 240000, 0.9, 86400000);
    assert_int_equal(sc.scored, expect);
    assert_int_equal(sn.scored, expect);
    assert_true(sc.pinball < sn.pinball);

    tm_forecast_params_default(&p);
    assert_int_equal(tm_forecast_new(TM_FORECAST_NAIVE, &p, &f), 0);
    assert_int_equal(tm_forecast_observe(f, 120000, 5.0), 0);
    assert_int_equal(tm_forecast_observe(f, 150000, 7.0), 0); /* same step: last wins */
    assert_int_equal(tm_forecast_predict(f, 60000, 0.9, &m, &u), 0);
    assert_true(m == 7.0);
    assert_int_equal(tm_forecast_observe(f, 60000, 1.0), TM_EINVAL); /* earlier step */
    assert_int_equal(tm_forecast_predict(f, 60000, 0.9, &m, &u), 0);
    assert_true(m == 7.0);
    tm_forecast_free(f);
    series_free(&s);
}

/* Under a day, and zero for long stretches: forecasts stay finite and
 * nonnegative, zero actuals are left out of the MAPE. */
static void test_short_and_zero(void **state)
{
    struct series s = series_alloc(DAY_MIN);
    struct tm_forecast_score sc;

    rng_state = 3;
    for (int i = 0; i < 8 * 60; i++) {
        double v = (i / 60) % 3 == 0 ? 0.0 : 8.0 + (uniform01() < 0.1 ? 8.0 : 0.0);
        s.t[s.n] = (int64_t)i * MIN_MS;
        s.v[s.n++] = v;
    }
    for (int k = 0; k < TM_FORECAST_KIND_MAX; k++) {
        sc = eval(k, &s, MIN_MS, 240000, 0.9, 3600000);
        assert_true(isfinite(sc.pinball) && isfinite(sc.mape));
        assert_true(sc.mape_skipped > 0);
        assert_true(sc.scored > sc.mape_skipped);
    }
    {
        struct tm_forecast_params p;
        struct tm_forecast *f;
        double m, u;

        tm_forecast_params_default(&p);
        assert_int_equal(tm_forecast_new(TM_FORECAST_TARMAC, &p, &f), 0);
        for (int i = 0; i < 600; i++) {
            assert_int_equal(tm_forecast_observe(f, (int64_t)i * MIN_MS, i < 300 ? 40.0 - i * 0.2 : 0.0), 0);
            assert_int_equal(tm_forecast_predict(f, 240000, 0.9, &m, &u), 0);
            assert_true(m >= 0.0 && u >= 0.0 && isfinite(m) && isfinite(u));
        }
        tm_forecast_free(f);
    }
    series_free(&s);
}

/* On stationary noise the upper quantile covers q of the outcomes. */
static void test_calibration(void **state)
{
    struct series s = series_alloc(6 * DAY_MIN);
    const double qs[] = {0.9, 0.8, 0.5};

    rng_state = 11;
    for (int i = 0; i < 6 * DAY_MIN; i++) {
        s.t[s.n] = (int64_t)i * MIN_MS;
        s.v[s.n++] = 100.0 + 5.0 * normal();
    }
    for (size_t i = 0; i < sizeof(qs) / sizeof(qs[0]); i++) {
        struct tm_forecast_score sc = eval(TM_FORECAST_TARMAC, &s, MIN_MS, 240000, qs[i], 86400000);
        print_message("calibration q %.2f: coverage %.4f\n", qs[i], sc.coverage);
        assert_true(fabs(sc.coverage - qs[i]) < 0.03);
    }
    series_free(&s);
}

/* Resampling: several observations in a step act as the last one alone,
 * so predict() on an open step agrees with what commit learns later. */
static void test_resampling(void **state)
{
    struct tm_forecast_params p;
    struct tm_forecast *a, *b;

    tm_forecast_params_default(&p);
    for (int k = 0; k < TM_FORECAST_KIND_MAX; k++) {
        rng_state = 9;
        assert_int_equal(tm_forecast_new(k, &p, &a), 0);
        assert_int_equal(tm_forecast_new(k, &p, &b), 0);
        for (int i = 0; i < 2 * DAY_MIN + 300; i++) {
            double v = 20.0 + 10.0 * sin(i / 300.0) + normal(), m1, u1, m2, u2;
            int64_t t = (int64_t)i * MIN_MS;
            if (i % 97 == 0)
                continue; /* a missing minute now and then */
            assert_int_equal(tm_forecast_observe(a, t, v + 5.0), 0);
            assert_int_equal(tm_forecast_predict(a, 240000, 0.9, &m1, &u1), 0);
            assert_int_equal(tm_forecast_observe(a, t + 20000, v - 3.0), 0);
            assert_int_equal(tm_forecast_observe(a, t + 59999, v), 0);
            assert_int_equal(tm_forecast_observe(b, t + 30000, v), 0);
            assert_int_equal(tm_forecast_predict(a, 240000, 0.9, &m1, &u1), 0);
            assert_int_equal(tm_forecast_predict(b, 240000, 0.9, &m2, &u2), 0);
            if (m1 != m2 || u1 != u2)
                fail_msg("%s step %d: %.17g/%.17g vs %.17g/%.17g", tm_forecast_kind_name(k), i, m1, u1,
                         m2, u2);
        }
        tm_forecast_free(a);
        tm_forecast_free(b);
    }
}

static void test_determinism(void **state)
{
    struct series s = series_alloc(3 * DAY_MIN);
    struct tm_forecast_params p;
    struct tm_forecast *a, *b;

    rng_state = 5;
    for (int i = 0; i < 3 * DAY_MIN; i++) {
        s.t[s.n] = (int64_t)i * MIN_MS;
        s.v[s.n++] = floor(30.0 + 10.0 * sin(i / 200.0) + 4.0 * normal());
    }
    for (int k = 0; k < TM_FORECAST_KIND_MAX; k++) {
        struct tm_forecast_score x = eval(k, &s, MIN_MS, 240000, 0.9, 86400000);
        struct tm_forecast_score y = eval(k, &s, MIN_MS, 240000, 0.9, 86400000);
        assert_memory_equal(&x, &y, sizeof(x));
    }
    tm_forecast_params_default(&p);
    assert_int_equal(tm_forecast_new(TM_FORECAST_TARMAC, &p, &a), 0);
    assert_int_equal(tm_forecast_new(TM_FORECAST_TARMAC, &p, &b), 0);
    for (size_t i = 0; i < s.n; i++) {
        double m1, u1, m2, u2;
        assert_int_equal(tm_forecast_observe(a, s.t[i], s.v[i]), 0);
        assert_int_equal(tm_forecast_observe(b, s.t[i], s.v[i]), 0);
        assert_int_equal(tm_forecast_predict(a, 180000, 0.9, &m1, &u1), 0);
        assert_int_equal(tm_forecast_predict(b, 180000, 0.9, &m2, &u2), 0);
        assert_true(m1 == m2 && u1 == u2);
    }
    tm_forecast_free(a);
    tm_forecast_free(b);
    series_free(&s);
}

/*
 * A 4-minute burst of 88 GPUs after a quiet day, then nothing: the
 * forecast the planner acts on (240 s ahead: boot plus tick) must come
 * back to what it was before the burst within minutes, not an hour.
 *
 * The bounds are what an operator pays for.  The planner launches
 * ceil(mean) GPUs "ahead of forecast" and keeps idle nodes while the pool
 * would fall below the upper quantile, so a visible fraction of a GPU in
 * either holds a whole node.  No forecaster can know that a burst is over
 * before it has seen quiet minutes, so one horizon after the end is left
 * free (4 minutes, which nodes launched during the burst spend booting
 * anyway).  From the fifth quiet minute on, the mean must be under 0.05
 * GPU.  The upper quantile is the mean plus a quantile of the model's own
 * errors in minutes as volatile as this one, so it may stay wider while the
 * volatility the burst left decays (that is what the bands are for), but by
 * no more than 3 GPUs, and from the twentieth minute it must be back
 * within 0.05 GPU of its value before the burst: 0 when the controller
 * started on the quiet day, the calm minutes' error quantile (about 2.6
 * GPUs) when busy days came before it.  Before the fix, the mean was 18.5
 * GPUs one minute after the burst, 9.1 after ten, 4.5 after twenty and
 * 0.9 after an hour (started on the quiet day), or 16.4 after five (busy
 * days before).
 */
static void burst_after_quiet(int busy_days)
{
    struct tm_forecast_params p;
    struct tm_forecast *f;
    double m, u, before;
    int64_t i = 0, end;

    tm_forecast_params_default(&p);
    assert_int_equal(tm_forecast_new(TM_FORECAST_TARMAC, &p, &f), 0);
    rng_state = 13;
    for (; i < (int64_t)busy_days * DAY_MIN; i++)
        assert_int_equal(tm_forecast_observe(f, i * MIN_MS,
                                             floor(40.0 + 15.0 * sin(2.0 * M_PI * (double)i / DAY_MIN) +
                                                   3.0 * normal())), 0);
    for (end = i + DAY_MIN; i < end; i++)
        assert_int_equal(tm_forecast_observe(f, i * MIN_MS, 0.0), 0);
    assert_int_equal(tm_forecast_predict(f, 240000, 0.9, &m, &before), 0);
    assert_true(m == 0.0);
    for (end = i + 4; i < end; i++) {
        assert_int_equal(tm_forecast_observe(f, i * MIN_MS, 88.0), 0);
        assert_int_equal(tm_forecast_predict(f, 240000, 0.9, &m, &u), 0);
    }
    /* Bursts are still followed while they last. */
    assert_true(m >= 44.0 && u >= m);
    for (int q = 1; q <= 180; q++, i++) {
        assert_int_equal(tm_forecast_observe(f, i * MIN_MS, 0.0), 0);
        assert_int_equal(tm_forecast_predict(f, 240000, 0.9, &m, &u), 0);
        if (q == 1 || q == 5 || q == 10 || q == 20 || q == 60)
            print_message("burst after %d busy days, %3d min after: mean %.3f upper %.3f (%.3f before)\n",
                          busy_days, q, m, u, before);
        if (q >= 5 && !(m < 0.05 && u < before + (q < 20 ? 3.0 : 0.05)))
            fail_msg("%d busy days, %d min after the burst: mean %.3f upper %.3f (%.3f before)", busy_days,
                     q, m, u, before);
    }
    tm_forecast_free(f);
}

static void test_burst_after_quiet(void **state)
{
    burst_after_quiet(0); /* a controller started on the quiet day */
    burst_after_quiet(2); /* two busy days, then the quiet one */
}

/* The CSV and pod-list readers (fleet/forecast_series.c) are checked beside
 * `tarmac forecast` (cli/forecast.c): these cases build only into
 * test_forecast_cli. */
#ifdef TM_FORECAST_CLI_TESTS
/* A temporary file holding `text`; the caller unlinks and frees it. */
static char *temp_file(const char *text)
{
    char *path = strdup("/tmp/tm_forecast_XXXXXX");
    int fd;
    FILE *f;

    assert_non_null(path);
    fd = mkstemp(path);
    assert_true(fd >= 0);
    f = fdopen(fd, "w");
    assert_non_null(f);
    assert_int_equal(fputs(text, f) >= 0, 1);
    assert_int_equal(fclose(f), 0);
    return path;
}

static void expect_csv_error(const char *text, const char *tcol, const char *vcols, const char *where,
                             const char *what)
{
    char *path = temp_file(text);
    char err[512], want[512];
    struct tm_forecast_series s = {0};
    char *argv[] = {"forecast", "--series", path, "--time-column", (char *)tcol, "--value-columns",
                    (char *)vcols, NULL};

    assert_int_equal(tm_forecast_load_csv(path, tcol, vcols, &s, err, sizeof(err)), TM_EINVAL);
    snprintf(want, sizeof(want), "%s:%s: ", path, where);
    if (strncmp(err, want, strlen(want)) != 0 || !strstr(err, what))
        fail_msg("got \"%s\", want \"%s%s...\"", err, want, what);
    assert_null(s.t_ms);
    assert_int_equal(tm_forecast_main(7, argv), 2);
    unlink(path);
    free(path);
}

static void test_csv_errors(void **state)
{
    expect_csv_error("time,a\n0,1\n", "time", "a,b", "1:0", "no column \"b\"");
    expect_csv_error("t,a\n0,1\n", "time", "a", "1:0", "no column \"time\"");
    expect_csv_error("time,a,b\n0,1,2\n60,1,x\n", "time", "a,b", "3:3", "bad number \"x\" in column \"b\"");
    expect_csv_error("time,a,b\n0,1,\n", "time", "a,b", "2:3", "bad number \"\"");
    expect_csv_error("time,a\n0,1,2\n", "time", "a", "2:3", "3 fields, the header has 2");
    expect_csv_error("time,a,b\n0,1\n", "time", "a", "2:2", "2 fields, the header has 3");
    expect_csv_error("time,a\n0,\"1\n", "time", "a", "2:2", "unterminated quoted field");
    expect_csv_error("time,a\n0,1\"2\n", "time", "a", "2:2", "quote inside an unquoted field");
    expect_csv_error("time,a\n0,\"1\"2\n", "time", "a", "2:2", "after a closing quote");
    expect_csv_error("time,a\n60,1\n0,1\n", "time", "a", "3:1", "time goes backwards");
    expect_csv_error("time,a\n2020-13-01 00:00:00,1\n", "time", "a", "2:1", "bad time");
    expect_csv_error("time,a\n2020-05-01 00:00,1\n", "time", "a", "2:1", "bad time");
    expect_csv_error("", "time", "a", "1:0", "empty file");
    expect_csv_error("time,a\n", "time", "a", "2:0", "no data rows");
}

/* Quoting per RFC 4180 (commas, doubled quotes, line breaks inside quotes,
 * CRLF), both time formats, and the sum of the value columns. */
static void test_csv_good(void **state)
{
    char *path = temp_file("\"time\",\"x,y\",\"c\"\"d\",e\r\n"
                           "\"2020-05-01 00:00:00\",\"1,5\",2,3.5\r\n"
                           "2020-05-01T00:01:00,\"multi\nline\",4,0.5\r\n");
    char *path2 = temp_file("ts,v\n0,1\n59.5,2\n60,3\n120,4\n");
    char err[512];
    struct tm_forecast_series s = {0};
    char *argv[] = {"forecast", "--series", path2, "--time-column", "ts", "--value-columns", "v",
                    "--warmup-s", "0", "--horizon-s", "60", "--json", NULL};

    assert_int_equal(tm_forecast_load_csv(path, "time", "c\"d,e", &s, err, sizeof(err)), 0);
    assert_int_equal(s.n, 2);
    assert_true(s.t_ms[0] == INT64_C(1588291200000));
    assert_true(s.t_ms[1] == INT64_C(1588291260000));
    assert_true(s.v[0] == 5.5 && s.v[1] == 4.5);
    tm_forecast_series_release(&s);
    assert_int_equal(tm_forecast_load_csv(path2, "ts", "v", &s, err, sizeof(err)), 0);
    assert_int_equal(s.n, 4);
    assert_true(s.t_ms[1] == 59500);
    tm_forecast_series_release(&s);
    assert_int_equal(tm_forecast_main(12, argv), 0);
    argv[2] = "/nonexistent/series.csv";
    assert_int_equal(tm_forecast_main(12, argv), 2);
    argv[1] = "--bogus";
    assert_int_equal(tm_forecast_main(12, argv), 2);
    unlink(path);
    unlink(path2);
    free(path);
    free(path2);
}

/* openb pods: GPUs wanted from creation to deletion, fractional shares in
 * milli-GPU, sampled at each step start. */
static void test_pods(void **state)
{
    char *path = temp_file("name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,"
                           "creation_time,deletion_time,scheduled_time\n"
                           "p0,1000,1024,2,1000,,LS,Running,0,300,0\n"
                           "p1,1000,1024,1,500,,BE,Pending,120,600,\n"
                           "p2,1000,1024,0,0,,LS,Running,0,600,0\n"
                           "p3,1000,1024,1,1000,,LS,Running,61,119,61\n");
    char *bad = temp_file("name,num_gpu,creation_time,deletion_time\np0,1,0,60\n");
    char *bad2 = temp_file("name,num_gpu,gpu_milli,creation_time,deletion_time\np0,1,1000,60,0\n");
    const double want[] = {2, 2, 2.5, 2.5, 2.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0};
    struct tm_forecast_series s = {0};
    char err[512];

    assert_int_equal(tm_forecast_load_pods(path, MIN_MS, 0, &s, err, sizeof(err)), 0);
    assert_int_equal(s.n, 11);
    for (size_t i = 0; i < s.n; i++) {
        assert_true(s.t_ms[i] == (int64_t)i * MIN_MS);
        if (fabs(s.v[i] - want[i]) > 1e-12)
            fail_msg("step %zu: %g GPUs, want %g", i, s.v[i], want[i]);
    }
    tm_forecast_series_release(&s);
    /* By default the series starts at the first deletion (119 s, so the
     * step at 120 s). */
    assert_int_equal(tm_forecast_load_pods(path, MIN_MS, -1, &s, err, sizeof(err)), 0);
    assert_true(s.n == 9 && s.t_ms[0] == 120000 && s.v[0] == 2.5);
    tm_forecast_series_release(&s);
    assert_int_equal(tm_forecast_load_pods(bad, MIN_MS, -1, &s, err, sizeof(err)), TM_EINVAL);
    assert_non_null(strstr(err, ":1:0: no column \"gpu_milli\""));
    assert_int_equal(tm_forecast_load_pods(bad2, MIN_MS, -1, &s, err, sizeof(err)), TM_EINVAL);
    assert_non_null(strstr(err, ":2:5: deletion before creation"));
    {
        char *argv[] = {"forecast", "--pods", path, "--since-s", "0", "--warmup-s", "0", "--horizon-s", "60",
                        NULL};
        assert_int_equal(tm_forecast_main(9, argv), 0);
        argv[2] = bad;
        assert_int_equal(tm_forecast_main(9, argv), 2);
    }
    unlink(path);
    unlink(bad);
    unlink(bad2);
    free(path);
    free(bad);
    free(bad2);
}

/* Garbage in: the reader says where and why, and never reads past a
 * buffer (ASan watches). */
static void test_csv_garbage(void **state)
{
    const char alphabet[] = "0123456789,\"\n\r.-e :Tab";
    char text[600], err[512];

    rng_state = 13;
    for (int round = 0; round < 300; round++) {
        size_t n = (size_t)(uniform01() * (sizeof(text) - 1));
        struct tm_forecast_series s = {0};
        char *path;
        int r;

        memcpy(text, "t,a\n", 4);
        for (size_t i = 4; i < n; i++)
            text[i] = alphabet[(size_t)(uniform01() * (sizeof(alphabet) - 1))];
        text[n > 4 ? n : 4] = '\0';
        path = temp_file(text);
        err[0] = '\0';
        r = tm_forecast_load_csv(path, "t", "a", &s, err, sizeof(err));
        if (r == 0)
            assert_true(s.n > 0);
        else
            assert_true(r == TM_EINVAL && strncmp(err, path, strlen(path)) == 0);
        tm_forecast_series_release(&s);
        unlink(path);
        free(path);
    }
}

/* The contract on real data: a Helios VC, running plus pending GPUs. */
static void test_helios(void **state)
{
    const char *src = getenv("TM_SOURCE_DIR");
    char path[1024], err[512];
    struct tm_forecast_series s = {0};
    struct tm_forecast_params p;
    struct tm_forecast_score sc[TM_FORECAST_KIND_MAX];

    if (!src)
        src = TM_SOURCE_DIR;
    snprintf(path, sizeof(path),
             "%s/../shared/traces/helios-sensetime/earth_vc_minute_sequences_2020-05/"
             "vc6YE_cluster_sequence_vc.csv", src);
    if (access(path, R_OK) != 0) {
        print_message("skipped: %s not readable\n", path);
        skip();
    }
    assert_int_equal(tm_forecast_load_csv(path, "time", "running_gpu_num,pending_gpu_num", &s, err,
                                          sizeof(err)), 0);
    assert_int_equal(s.n, 44640);
    tm_forecast_params_default(&p);
    for (int k = 0; k < TM_FORECAST_KIND_MAX; k++) {
        assert_int_equal(tm_forecast_evaluate(k, &p, s.t_ms, s.v, s.n, 240000, 0.9, 86400000, &sc[k]), 0);
        print_message("vc6YE %s: pinball %.4f mape %.2f%% coverage %.3f\n", tm_forecast_kind_name(k),
                      sc[k].pinball, sc[k].mape, sc[k].coverage);
    }
    assert_true(sc[TM_FORECAST_TARMAC].pinball < sc[TM_FORECAST_SEASONAL_NAIVE].pinball);
    assert_true(sc[TM_FORECAST_TARMAC].pinball < sc[TM_FORECAST_NAIVE].pinball);
    tm_forecast_series_release(&s);
}
#endif

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_names),
        cmocka_unit_test(test_constant),
        cmocka_unit_test(test_seasonal),
        cmocka_unit_test(test_daily_only),
        cmocka_unit_test(test_trend),
        cmocka_unit_test(test_missing),
        cmocka_unit_test(test_short_and_zero),
        cmocka_unit_test(test_calibration),
        cmocka_unit_test(test_resampling),
        cmocka_unit_test(test_determinism),
        cmocka_unit_test(test_burst_after_quiet),
#ifdef TM_FORECAST_CLI_TESTS
        cmocka_unit_test(test_csv_errors),
        cmocka_unit_test(test_csv_good),
        cmocka_unit_test(test_pods),
        cmocka_unit_test(test_csv_garbage),
        cmocka_unit_test(test_helios),
#endif
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
