/* tests/unit/providers/common/test_pools.c: a provider's copy of the pools
 * that name it and of its instance types (providers/common/pools.c): only
 * its own pools, every field, independent of the config it came from. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "core/err.h"
#include "providers/common/pools.h"

static void copies_own_pools_only(void **state)
{
    char *za[] = {"us-east-1a", "us-east-1b"}, *zb[] = {"europe-west4-a"};
    char *ta[] = {"p4d.24xlarge"}, *tb[] = {"a2-highgpu-8g", "a2-ultragpu-8g"};
    struct tm_config_pool pools[3] = {
        {.name = "a100", .provider = "aws-main", .zones = za, .nzones = 2, .instance_types = ta,
         .ninstance_types = 1, .gpu_model = "A100", .gpus_per_node = 8, .capacity_type = "spot"},
        {.name = "gce", .provider = "gcp-main", .zones = zb, .nzones = 1, .instance_types = tb,
         .ninstance_types = 2, .gpu_model = "A100", .gpus_per_node = 8},
        {.name = "od", .provider = "aws-main", .zones = za, .nzones = 1, .instance_types = ta,
         .ninstance_types = 1, .gpus_per_node = 8, .capacity_type = "on_demand"},
    };
    struct tm_config cfg = {.pools = pools, .npools = 3};
    struct tm_provider_pool *out = NULL;
    size_t n = 0;
    const struct tm_provider_pool *p;

    (void)state;
    assert_int_equal(tm_provider_pools_copy(&cfg, "aws-main", &out, &n), 0);
    assert_int_equal(n, 2);
    assert_string_equal(out[0].name, "a100");
    assert_int_equal(out[0].index, 0);
    assert_int_equal(out[0].nzones, 2);
    assert_string_equal(out[0].zones[1], "us-east-1b");
    assert_ptr_not_equal(out[0].zones[1], za[1]); /* a copy, not the config's string */
    assert_int_equal(out[0].ntypes, 1);
    assert_string_equal(out[0].types[0], "p4d.24xlarge");
    assert_string_equal(out[0].gpu_model, "A100");
    assert_int_equal(out[0].gpus, 8);
    assert_true(out[0].spot);
    assert_string_equal(out[1].name, "od");
    assert_int_equal(out[1].index, 2);
    assert_string_equal(out[1].gpu_model, ""); /* none named */
    assert_false(out[1].spot);
    p = tm_provider_pool_find(out, n, "od");
    assert_ptr_equal(p, &out[1]);
    assert_null(tm_provider_pool_find(out, n, "gce"));
    assert_null(tm_provider_pool_find(out, n, NULL));
    tm_provider_pools_free(out, n);

    assert_int_equal(tm_provider_pools_copy(&cfg, "azure-main", &out, &n), 0);
    assert_int_equal(n, 0);
    tm_provider_pools_free(out, n);
}

static void copies_types(void **state)
{
    struct tm_config_instance_type types[2] = {
        {.name = "p4d.24xlarge", .gpus = 8, .gpu_model = "A100", .cpu_milli = 96000,
         .memory_mib = 1152 * 1024, .on_demand_uusd_per_hour = 32770000},
        {.name = "c6i.large", .cpu_milli = 2000, .memory_mib = 4096},
    };
    struct tm_config_provider prov = {.name = "aws-main", .types = types, .ntypes = 2};
    struct tm_config_instance_type *out = NULL;
    size_t n = 0;

    (void)state;
    assert_int_equal(tm_provider_types_copy(&prov, &out, &n), 0);
    assert_int_equal(n, 2);
    assert_string_equal(out[0].name, "p4d.24xlarge");
    assert_ptr_not_equal(out[0].name, types[0].name);
    assert_int_equal(out[0].on_demand_uusd_per_hour, 32770000);
    assert_int_equal(out[0].memory_mib, 1152 * 1024);
    assert_string_equal(out[1].gpu_model, "");

    int64_t uusd = 0;
    assert_int_equal(tm_provider_types_price(out, n, "p4d.24xlarge", TM_CAPACITY_ON_DEMAND, &uusd), 0);
    assert_int_equal(uusd, 32770000);
    /* No spot price configured, a type not configured, two markets. */
    assert_int_equal(tm_provider_types_price(out, n, "p4d.24xlarge", TM_CAPACITY_SPOT, &uusd),
                     TM_ENOTFOUND);
    assert_int_equal(tm_provider_types_price(out, n, "p5.48xlarge", TM_CAPACITY_ON_DEMAND, &uusd),
                     TM_ENOTFOUND);
    assert_int_equal(tm_provider_types_price(out, n, "p4d.24xlarge", TM_CAPACITY_SPOT_THEN_ON_DEMAND,
                                             &uusd), TM_ENOTFOUND);
    out[0].spot_uusd_per_hour = 9831000;
    assert_int_equal(tm_provider_types_price(out, n, "p4d.24xlarge", TM_CAPACITY_SPOT, &uusd), 0);
    assert_int_equal(uusd, 9831000);
    tm_provider_types_free(out, n);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(copies_own_pools_only),
        cmocka_unit_test(copies_types),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
