/* tests/unit/fleet/test_prices.c: the price table loader. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <cmocka.h>

#include "controller/fleet/prices.h"
#include "core/err.h"
#include "core/units.h"

static int parse(const char *text, struct tm_price_table *t, char *err, size_t n)
{
    return tm_prices_parse("p.yaml", text, strlen(text), t, err, n);
}

static void test_usd(void **state)
{
    int64_t v;
    (void)state;
    assert_int_equal(tm_price_parse("4.00", &v), 0);
    assert_int_equal(v, 4000000);
    assert_int_equal(tm_price_parse("32.7726", &v), 0);
    assert_int_equal(v, 32772600);
    assert_int_equal(tm_price_parse("0.000001", &v), 0);
    assert_int_equal(v, 1);
    assert_int_equal(tm_price_parse("7", &v), 0);
    assert_int_equal(v, 7000000);
    assert_int_equal(tm_price_parse("-1", &v), TM_EINVAL);
    assert_int_equal(tm_price_parse("1.0000001", &v), TM_EINVAL);
    assert_int_equal(tm_price_parse("1e3", &v), TM_EINVAL);
    assert_int_equal(tm_price_parse("", &v), TM_EINVAL);
    assert_int_equal(tm_price_parse(".", &v), TM_EINVAL);
}

static void test_shipped_tables(void **state)
{
    struct tm_price_table t;
    char err[256], path[1024];
    const char *files[] = {"bench/prices/uniform-8gpu.yaml", "bench/prices/uniform-sizes.yaml",
                           "config/prices-aws-gpu.yaml", "config/prices-azure-gpu.yaml"};
    (void)state;
    for (size_t i = 0; i < sizeof(files) / sizeof(files[0]); i++) {
        snprintf(path, sizeof(path), "%s/%s", TM_SOURCE_DIR, files[i]);
        assert_int_equal(tm_prices_load(path, &t, err, sizeof(err)), 0);
        assert_true(t.ntypes >= 1);
    }
    snprintf(path, sizeof(path), "%s/bench/prices/uniform-sizes.yaml", TM_SOURCE_DIR);
    assert_int_equal(tm_prices_load(path, &t, err, sizeof(err)), 0);
    assert_int_equal(t.ntypes, 4);
    for (size_t i = 0; i < 4; i++) {
        assert_int_equal(tm_price_type_per_gpu(&t.types[i], false), 4000000);
        assert_int_equal(tm_price_type_per_gpu(&t.types[i], true), 1400000);
    }
}

static void test_budget(void **state)
{
    struct tm_price_table t;
    char err[256];
    (void)state;
    assert_int_equal(parse("types:\n  - {name: a, gpus: 1, on_demand_per_hour: 1}\n"
                           "budgets:\n  - {scope: org, name: acme, cap_cents: 5000, hard: false, warn_at: 0.5}\n",
                           &t, err, sizeof(err)), 0);
    assert_int_equal(t.nbudgets, 1);
    assert_int_equal(t.budgets[0].cap_cents, 5000);
    assert_false(t.budgets[0].hard);
}

/* Bad input is refused with the file, the line and the reason. */
static void test_bad(void **state)
{
    struct tm_price_table t;
    char err[256];
    (void)state;
    assert_int_equal(parse("types:\n  - gpus: 8\n    on_demand_per_hour: 32\n", &t, err, sizeof(err)),
                     TM_EINVAL);
    assert_string_equal(err, "p.yaml:2: instance type without \"name\"");
    assert_int_equal(parse("types: []\n", &t, err, sizeof(err)), TM_EINVAL);
    assert_non_null(strstr(err, "no instance types"));
    assert_int_equal(parse("currency: USD\ntypes:\n  - name: a\n    gpus: 8\n"
                           "    on_demand_per_hour: -3.00\n", &t, err, sizeof(err)), TM_EINVAL);
    assert_string_equal(err, "p.yaml:5: negative price \"-3.00\" for \"on_demand_per_hour\"");
    assert_int_equal(parse("types:\n  - {name: a, gpus: 1, on_demand_per_hour: 1}\n"
                           "budgets:\n  - scope: team\n    name: ml\n    cap_cents: 100\n"
                           "    currency: EUR\n", &t, err, sizeof(err)), TM_EINVAL);
    assert_string_equal(err, "p.yaml:7: budget currency \"EUR\" is not supported (only USD)");
    assert_int_equal(parse("currency: GBP\ntypes:\n  - {name: a, gpus: 1, on_demand_per_hour: 1}\n",
                           &t, err, sizeof(err)), TM_EINVAL);
    assert_string_equal(err, "p.yaml:1: price table currency \"GBP\" is not supported (only USD)");
    assert_int_equal(parse("types:\n  - {name: a, gpus: 1, on_demand_per_hour: 1, colour: red}\n",
                           &t, err, sizeof(err)), TM_EINVAL);
    assert_string_equal(err, "p.yaml:2: unrecognized key \"colour\" in an instance type");
    assert_int_equal(parse("types:\n  - {name: a, gpus: 1, on_demand_per_hour: 1}\n"
                           "  - {name: a, gpus: 2, on_demand_per_hour: 2}\n", &t, err, sizeof(err)),
                     TM_EINVAL);
    assert_string_equal(err, "p.yaml:3: instance type \"a\" repeats");
    assert_int_equal(parse("types:\n  - {name: a, gpus: 1}\n", &t, err, sizeof(err)), TM_EINVAL);
    assert_non_null(strstr(err, "without \"on_demand_per_hour\""));
    assert_int_equal(parse("types: [\n", &t, err, sizeof(err)), TM_EINVAL);
    assert_non_null(strstr(err, "p.yaml:"));
    assert_true(tm_prices_load("/nonexistent/x.yaml", &t, err, sizeof(err)) < 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_usd),
        cmocka_unit_test(test_shipped_tables),
        cmocka_unit_test(test_budget),
        cmocka_unit_test(test_bad),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
