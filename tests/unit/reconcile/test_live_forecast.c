/*
 * tests/unit/reconcile/test_live_forecast.c: the warm start of the live demand
 * forecasters (controller/reconcile/live_forecast.c).  Warming from job spans must
 * feed each pool's forecaster exactly the series a controller ticking once
 * a step would have fed it: checked against forecasters fed that series by
 * hand, step by step, from an independent count of the spans.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "controller/fleet/forecast.h"
#include "controller/reconcile/live_forecast.h"
#include "core/config.h"
#include "core/err.h"

#define MIN 60000LL
#define DAY (1440 * MIN)

/* Two pools; boot 2 min and a 30 s tick: the horizon is 150 s. */
static const char config_yaml[] =
    "database: {url: \"postgresql:///t\"}\n"
    "cluster: unit\n"
    "tick_interval: 30s\n"
    "forecast: {quantile: 0.8}\n"
    "providers:\n"
    "  - name: sim\n"
    "    kind: sim\n"
    "    region: r1\n"
    "    boot_delay: 2m\n"
    "    instance_types:\n"
    "      - {name: t8, gpus: 8, gpu_model: A100, cpu_milli: 96000, memory_mib: 100000,"
    "         on_demand_price: \"32\", spot_price: \"10\"}\n"
    "pools:\n"
    "  - {name: a, provider: sim, zones: [z1], instance_types: [t8], max_nodes: 4}\n"
    "  - {name: b, provider: sim, zones: [z1], instance_types: [t8], max_nodes: 4,"
    "     capacity_type: spot}\n";

static struct tm_config cfg;

static int setup(void **state)
{
    char err[256];
    (void)state;
    if (tm_config_load_string(config_yaml, strlen(config_yaml), "t.yaml", &cfg, err, sizeof(err))) {
        fprintf(stderr, "%s\n", err);
        return -1;
    }
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    tm_config_release(&cfg);
    return 0;
}

static uint64_t rng = 42;
static int64_t draw(int64_t n)
{
    rng = rng * 6364136223846793005ULL + 1442695040888963407ULL;
    return (int64_t)((rng >> 33) % (uint64_t)n);
}

/* What a tick at t would have seen in pool p: every span live at t. */
static double demand_at(const struct tm_demand_span *sp, size_t n, int pool, int64_t t)
{
    int64_t milli = 0;
    for (size_t i = 0; i < n; i++)
        if (sp[i].pool == pool && sp[i].from_ms <= t && (sp[i].to_ms < 0 || t < sp[i].to_ms))
            milli += sp[i].milli;
    return (double)milli / 1000.0;
}

/* Three days of random jobs (shares and whole GPUs, some still live, some
 * from before the window, a few for a pool out of range): the warmed
 * forecasters predict exactly what hand-fed ones do. */
static void test_warm_equals_ticks(void **state)
{
    enum { N = 3000 };
    struct tm_demand_span *sp = calloc(N, sizeof(*sp));
    const int64_t base = 40 * DAY + 7 * MIN + 1234; /* not on a step */
    const int64_t from = base, to = base + 3 * DAY + 17 * MIN + 5000;
    struct tm_live_forecast *lf;
    struct tm_forecast *ref[2];
    struct tm_forecast_params fp;
    struct tm_snapshot snap = {0};
    long steps;

    (void)state;
    assert_non_null(sp);
    for (size_t i = 0; i < N; i++) {
        int64_t start = base - DAY / 2 + draw(3 * DAY + DAY / 2);
        int64_t len = 1000 + draw(draw(4) == 0 ? DAY : 2 * 3600000LL);
        sp[i] = (struct tm_demand_span){
            .pool = draw(50) == 0 ? 7 : (int)draw(2), .from_ms = start,
            .to_ms = draw(30) == 0 ? -1 : start + len,
            .milli = draw(3) == 0 ? 100 + draw(900) : 1000 * (1 + draw(8))};
    }
    assert_int_equal(tm_live_forecast_new(&cfg, &lf), 0);
    steps = tm_live_forecast_warm(lf, sp, N, from, to);
    /* One value per whole step from from's step to the one before to's. */
    assert_int_equal(steps, (to / MIN) - (from / MIN));

    tm_forecast_params_default(&fp);
    fp.quantile = 0.8;
    for (int p = 0; p < 2; p++) {
        assert_int_equal(tm_forecast_new(TM_FORECAST_TARMAC, &fp, &ref[p]), 0);
        for (int64_t t = from / MIN * MIN; t < to / MIN * MIN; t += MIN)
            assert_int_equal(tm_forecast_observe(ref[p], t, demand_at(sp, N, p, t)), 0);
        /* The first tick after the warm-up: nothing queued or running. */
        assert_int_equal(tm_forecast_observe(ref[p], to + 1000, 0), 0);
    }
    const struct tm_pool_forecast *out = tm_live_forecast_update(lf, &snap, to + 1000);
    for (int p = 0; p < 2; p++) {
        double mean, upper;
        assert_int_equal(tm_forecast_predict(ref[p], 150000, 0.8, &mean, &upper), 0);
        if (out[p].expected_gpus != mean || out[p].upper_gpus != upper)
            fail_msg("pool %d: warmed %.6f/%.6f, hand-fed %.6f/%.6f", p, out[p].expected_gpus,
                     out[p].upper_gpus, mean, upper);
        /* Three days of its own errors: the upper quantile the planner
         * keeps idle nodes for stands above the mean from the first tick
         * (a cold forecaster has none to go by: its upper is its mean). */
        if (!(upper > mean + 0.5))
            fail_msg("pool %d: upper %.3f, mean %.3f", p, upper, mean);
        tm_forecast_free(ref[p]);
    }
    {
        struct tm_live_forecast *cold;
        assert_int_equal(tm_live_forecast_new(&cfg, &cold), 0);
        const struct tm_pool_forecast *c = tm_live_forecast_update(cold, &snap, to + 1000);
        assert_true(c[0].upper_gpus == c[0].expected_gpus && c[1].upper_gpus == c[1].expected_gpus);
        tm_live_forecast_free(cold);
    }
    /* Warming again would feed steps before the ones seen: refused. */
    assert_int_equal(tm_live_forecast_warm(lf, sp, N, to, to + DAY), TM_EINVAL);
    tm_live_forecast_free(lf);
    free(sp);
}

static void test_warm_bad_window(void **state)
{
    struct tm_live_forecast *lf;
    (void)state;
    assert_int_equal(tm_live_forecast_new(&cfg, &lf), 0);
    assert_int_equal(tm_live_forecast_warm(lf, NULL, 0, 10 * MIN, 5 * MIN), TM_EINVAL);
    /* No job: nothing is known, nothing is fed (not ten minutes of
     * zeros); the forecasters stay as cold as without a warm-up. */
    assert_int_equal(tm_live_forecast_warm(lf, NULL, 0, 0, 10 * MIN), 0);
    tm_live_forecast_free(lf);
    /* Known from the first job on: 07:00 to 10:00 is three hours, not ten. */
    struct tm_demand_span one = {.pool = 1, .from_ms = 7 * 60 * MIN, .to_ms = 8 * 60 * MIN,
                                 .milli = 500};
    assert_int_equal(tm_live_forecast_new(&cfg, &lf), 0);
    assert_int_equal(tm_live_forecast_warm(lf, &one, 1, 0, 10 * 60 * MIN), 180);
    tm_live_forecast_free(lf);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_warm_equals_ticks),
        cmocka_unit_test(test_warm_bad_window),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
