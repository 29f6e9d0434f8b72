/*
 * tests/unit/replay/test_elastic_bounds.c: known answers for the elastic
 * replay's lower bound and floor under docs/measuring.md's definitions:
 * CPU and memory count, not GPUs alone.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <cmocka.h>

#include "controller/replay/elastic.h"

#define H (3600LL * 1000)

static void type(struct tm_price_table *t, const char *name, int32_t gpus, int64_t cores, int64_t gib,
                 double od, double spot)
{
    struct tm_price_type *ty = &t->types[t->ntypes++];

    snprintf(ty->name, sizeof(ty->name), "%s", name);
    ty->gpus = gpus;
    ty->cpu_milli = cores * 1000;
    ty->memory_mib = gib * 1024;
    ty->on_demand_uusd_per_hour = (int64_t)(od * 1e6);
    ty->spot_uusd_per_hour = (int64_t)(spot * 1e6);
}

/* g1: 1 GPU, 8 cores, 64 GiB, $1/h; g4: 4 GPUs, 40 cores, 256 GiB, $4/h
 * (spot at half).  A job of 1 GPU and 40 CPUs does not fit g1: its bound
 * is its dominant share of g4 (40/40 of the CPU) for an hour, $4, where
 * the GPU-only bound said $1 (the cheapest GPU-hour).  The floor for it
 * alone is one g4 ($4/h), not five g1 ($5/h: 40 cores) nor one g1 ($1/h). */
static void test_one_gpu_forty_cpus(void **state)
{
    struct tm_price_table t;

    (void)state;
    memset(&t, 0, sizeof(t));
    type(&t, "g1", 1, 8, 64, 1.0, 0.5);
    type(&t, "g4", 4, 40, 256, 4.0, 2.0);
    assert_float_equal(tm_elastic_job_bound_usd(&t, false, 1000, 40000, 1024, H), 4.0, 1e-9);
    assert_float_equal(tm_elastic_job_bound_usd(&t, true, 1000, 40000, 1024, H), 2.0, 1e-9);
    /* a small job still pays only its GPU share of the cheap type */
    assert_float_equal(tm_elastic_job_bound_usd(&t, false, 1000, 4000, 1024, H), 1.0, 1e-9);
    /* half an hour, 20 cores: g1 still cannot hold it, half of g4's CPU */
    assert_float_equal(tm_elastic_job_bound_usd(&t, false, 1000, 20000, 1024, H / 2), 1.0, 1e-9);
    assert_float_equal(tm_elastic_floor_rate_usd(&t, false, 1000, 40000, 1024), 4.0, 1e-9);
}

/* A mix that needs two sizes.  The same table; A (1 GPU, 40 cores) and B
 * (1 GPU, 4 cores) run together.  Bound: A $4 (all of g4's CPU) + B $1
 * (g1's GPU) = $5 per hour.  Floor: 2 GPUs and 44 cores: g4 + g1 (5 GPUs,
 * 48 cores) $5/h, cheaper than two g4 ($8) or six g1 ($6); the GPU-only
 * floor would have been two g1, $2/h. */
static void test_mix_two_sizes(void **state)
{
    struct tm_price_table t;
    double b;

    (void)state;
    memset(&t, 0, sizeof(t));
    type(&t, "g1", 1, 8, 64, 1.0, 0.5);
    type(&t, "g4", 4, 40, 256, 4.0, 2.0);
    b = tm_elastic_job_bound_usd(&t, false, 1000, 40000, 1024, H) +
        tm_elastic_job_bound_usd(&t, false, 1000, 4000, 1024, H);
    assert_float_equal(b, 5.0, 1e-9);
    assert_float_equal(tm_elastic_floor_rate_usd(&t, false, 2000, 44000, 2048), 5.0, 1e-9);
    /* memory binding instead: 2 GPUs, 300 GiB: g4 + g1 (320 GiB), $5 */
    assert_float_equal(tm_elastic_floor_rate_usd(&t, false, 2000, 8000, 300 * 1024), 5.0, 1e-9);
    /* GPUs alone: two g1 */
    assert_float_equal(tm_elastic_floor_rate_usd(&t, false, 2000, 8000, 2048), 2.0, 1e-9);
    /* spot: the same sets at spot prices */
    assert_float_equal(tm_elastic_floor_rate_usd(&t, true, 2000, 44000, 2048), 2.5, 1e-9);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_one_gpu_forty_cpus),
        cmocka_unit_test(test_mix_two_sizes),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
