/*
 * tests/unit/core/test_reservation_config.c: a pool's `reservations:` in
 * the configuration file.  Good files load with the dates parsed; each bad
 * one is refused with a message naming its key (and nothing is returned).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "core/config.h"
#include "core/err.h"

static const char head[] =
    "database:\n  url: \"postgresql://x@localhost/x\"\n"
    "cluster: r\n"
    "providers:\n"
    "  - name: aws1\n    kind: aws\n    region: us-east-1\n"
    "  - name: sim1\n    kind: sim\n    region: sim\n"
    "    instance_types:\n"
    "      - {name: sim.8x-a100, gpus: 8, gpu_model: A100, cpu_milli: 96000, memory_mib: 1000000,"
    " on_demand_price: \"32.77\"}\n"
    "  - name: gcp1\n    kind: gcp\n    region: us-central1\n    project: p\n"
    "pools:\n"
    "  - name: a\n    provider: %s\n    zones: [%s]\n    instance_types: [%s]\n"
    "    gpu_model: A100\n    gpus_per_node: 8\n    max_nodes: 4\n"
    "    reservations:\n%s";

static int load(const char *provider, const char *resv, struct tm_config *cfg, char *err,
                size_t size)
{
    char yaml[4096];
    const char *zone = strcmp(provider, "aws1") == 0 ? "us-east-1a, us-east-1b"
                       : strcmp(provider, "gcp1") == 0 ? "us-central1-a" : "sim-a";
    const char *type = strcmp(provider, "sim1") == 0 ? "sim.8x-a100" : "p4d.24xlarge";

    snprintf(yaml, sizeof(yaml), head, provider, zone, type, resv);
    err[0] = '\0';
    return tm_config_load_string(yaml, strlen(yaml), "r.yaml", cfg, err, size);
}

/* resv under provider is refused, the message holding want. */
static void refused(const char *provider, const char *resv, const char *want)
{
    struct tm_config cfg;
    char err[512];

    memset(&cfg, 0, sizeof(cfg));
    assert_int_equal(load(provider, resv, &cfg, err, sizeof(err)), TM_EINVAL);
    if (!strstr(err, want))
        fail_msg("error \"%s\" lacks \"%s\"", err, want);
}

static void test_aws_good(void **state)
{
    struct tm_config cfg;
    char err[512];
    const struct tm_config_reservation *r;

    (void)state;
    assert_int_equal(load("aws1",
                          "      - id: cr-0123456789abcdef0\n"
                          "      - id: cr-0123456789abcdef1\n        block: true\n"
                          "        instance_type: p4d.24xlarge\n        zone: us-east-1b\n"
                          "        count: 4\n        start: \"2090-01-01T00:00:00Z\"\n"
                          "        end: \"2090-01-03 00:00:00\"\n",
                          &cfg, err, sizeof(err)),
                     0);
    assert_int_equal(cfg.pools[0].nreservations, 2);
    assert_true(cfg.pools[0].reservation_fallback);
    r = &cfg.pools[0].reservations[1];
    assert_true(r->block);
    assert_int_equal(r->count, 4);
    assert_int_equal(r->end_ms - r->start_ms, 2 * 86400000LL);
    assert_int_equal(cfg.pools[0].reservations[0].start_ms, 0);
    tm_config_release(&cfg);
}

static void test_aws_bad_id(void **state)
{
    (void)state;
    refused("aws1", "      - id: cr-123\n", "pools[0].reservations[0].id");
    refused("aws1", "      - id: cr-0123456789ABCDEF0\n", "not an EC2 capacity reservation id");
    refused("aws1", "      - id: cb-0123456789abcdef0\n", "pools[0].reservations[0].id");
}

static void test_other_type_or_zone(void **state)
{
    (void)state;
    refused("aws1", "      - id: cr-0123456789abcdef0\n        instance_type: p5.48xlarge\n",
            "pools[0].reservations[0].instance_type");
    refused("aws1", "      - id: cr-0123456789abcdef0\n        zone: us-east-1c\n",
            "pools[0].reservations[0].zone");
}

static void test_dates(void **state)
{
    (void)state;
    refused("aws1",
            "      - id: cr-0123456789abcdef0\n        start: \"2090-01-02 00:00:00\"\n"
            "        end: \"2090-01-01 00:00:00\"\n",
            "pools[0].reservations[0].end");
    refused("aws1", "      - id: cr-0123456789abcdef0\n        start: tomorrow\n",
            "pools[0].reservations[0].start");
    /* A block the file itself says is over. */
    refused("aws1",
            "      - id: cr-0123456789abcdef0\n        block: true\n"
            "        start: \"2020-01-01 00:00:00\"\n        end: \"2020-01-02 00:00:00\"\n",
            "the block ended");
}

static void test_overlap_and_twice(void **state)
{
    (void)state;
    refused("aws1",
            "      - id: cr-0123456789abcdef0\n        block: true\n"
            "        start: \"2090-01-01 00:00:00\"\n        end: \"2090-01-03 00:00:00\"\n"
            "      - id: cr-0123456789abcdef1\n        block: true\n"
            "        start: \"2090-01-02 00:00:00\"\n        end: \"2090-01-04 00:00:00\"\n",
            "overlaps pools[0].reservations[0]");
    refused("aws1", "      - id: cr-0123456789abcdef0\n      - id: cr-0123456789abcdef0\n",
            "already named by pools[0].reservations[0]");
}

static void test_kinds(void **state)
{
    struct tm_config cfg;
    char err[512];

    (void)state;
    refused("gcp1", "      - id: r1\n", "cannot launch into reservations");
    /* The sim says nothing of its reservations: the file says it all. */
    refused("sim1", "      - id: r1\n        count: 2\n", "pools[0].reservations[0]");
    assert_int_equal(load("sim1",
                          "      - id: r1\n        count: 2\n        instance_type: sim.8x-a100\n"
                          "        zone: sim-a\n        start: \"2026-01-01 00:00:00\"\n"
                          "        end: \"2026-01-02 00:00:00\"\n",
                          &cfg, err, sizeof(err)),
                     0);
    tm_config_release(&cfg);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_aws_good),
        cmocka_unit_test(test_aws_bad_id),
        cmocka_unit_test(test_other_type_or_zone),
        cmocka_unit_test(test_dates),
        cmocka_unit_test(test_overlap_and_twice),
        cmocka_unit_test(test_kinds),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
