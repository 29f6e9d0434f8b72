/* tests/unit/providers/common/test_shortage.c: the shortage memory every
 * cloud provider keeps (providers/common/shortage.c): what is remembered,
 * for how long, what gives way when the table is full, and what is not
 * remembered at all. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <cmocka.h>

#include "providers/common/shortage.h"

static struct tm_shortages m;

static int setup(void **state)
{
    (void)state;
    tm_shortages_init(&m, "aws", "type", "aws-main", 60000);
    return 0;
}

static void remembered_until_ttl(void **state)
{
    (void)state;
    assert_false(tm_shortages_has(&m, 1000, "p4d.24xlarge", "us-east-1a", TM_CAPACITY_SPOT));
    tm_shortages_note(&m, 1000, "p4d.24xlarge", "us-east-1a", TM_CAPACITY_SPOT, "InsufficientInstanceCapacity");
    assert_true(tm_shortages_has(&m, 1000, "p4d.24xlarge", "us-east-1a", TM_CAPACITY_SPOT));
    assert_true(tm_shortages_has(&m, 60999, "p4d.24xlarge", "us-east-1a", TM_CAPACITY_SPOT));
    assert_false(tm_shortages_has(&m, 61000, "p4d.24xlarge", "us-east-1a", TM_CAPACITY_SPOT));
}

/* The key is all three: the same type on demand, or in another zone, is
 * another offering the cloud has not refused. */
static void key_is_type_zone_market(void **state)
{
    (void)state;
    tm_shortages_note(&m, 0, "p4d.24xlarge", "us-east-1a", TM_CAPACITY_SPOT, NULL);
    assert_false(tm_shortages_has(&m, 0, "p4d.24xlarge", "us-east-1a", TM_CAPACITY_ON_DEMAND));
    assert_false(tm_shortages_has(&m, 0, "p4d.24xlarge", "us-east-1b", TM_CAPACITY_SPOT));
    assert_false(tm_shortages_has(&m, 0, "p5.48xlarge", "us-east-1a", TM_CAPACITY_SPOT));
}

/* NULL and "" are the same zone: an offering without one. */
static void no_zone(void **state)
{
    (void)state;
    tm_shortages_note(&m, 0, "Standard_NC24ads_A100_v4", NULL, TM_CAPACITY_ON_DEMAND, "");
    assert_true(tm_shortages_has(&m, 0, "Standard_NC24ads_A100_v4", "", TM_CAPACITY_ON_DEMAND));
    assert_true(tm_shortages_has(&m, 0, "Standard_NC24ads_A100_v4", NULL, TM_CAPACITY_ON_DEMAND));
    assert_false(tm_shortages_has(&m, 0, NULL, NULL, TM_CAPACITY_ON_DEMAND));
}

/* A second note extends the first instead of taking a second slot. */
static void note_again_extends(void **state)
{
    (void)state;
    tm_shortages_note(&m, 0, "a2-highgpu-8g", "us-central1-a", TM_CAPACITY_SPOT, NULL);
    tm_shortages_note(&m, 50000, "a2-highgpu-8g", "us-central1-a", TM_CAPACITY_SPOT, NULL);
    assert_true(tm_shortages_has(&m, 100000, "a2-highgpu-8g", "us-central1-a", TM_CAPACITY_SPOT));
    size_t used = 0;
    for (size_t i = 0; i < TM_SHORTAGE_MAX; i++)
        used += m.e[i].until > 0;
    assert_int_equal(used, 1);
}

/* Full: an expired entry gives way first, else the one that expires
 * soonest; the newest is always kept. */
static void full_table_gives_way(void **state)
{
    char type[32];

    (void)state;
    for (int i = 0; i < TM_SHORTAGE_MAX; i++) {
        snprintf(type, sizeof(type), "t%d", i);
        tm_shortages_note(&m, (uint64_t)i, type, "z", TM_CAPACITY_SPOT, NULL);
    }
    tm_shortages_note(&m, 100, "newest", "z", TM_CAPACITY_SPOT, NULL);
    assert_true(tm_shortages_has(&m, 100, "newest", "z", TM_CAPACITY_SPOT));
    assert_false(tm_shortages_has(&m, 100, "t0", "z", TM_CAPACITY_SPOT)); /* expired first */
    for (int i = 1; i < TM_SHORTAGE_MAX; i++) {
        snprintf(type, sizeof(type), "t%d", i);
        assert_true(tm_shortages_has(&m, 100, type, "z", TM_CAPACITY_SPOT));
    }
    /* Past t1's expiry (60001), t1's slot is the expired one that gives way. */
    tm_shortages_note(&m, 60001, "later", "z", TM_CAPACITY_SPOT, NULL);
    assert_true(tm_shortages_has(&m, 60001, "later", "z", TM_CAPACITY_SPOT));
    assert_true(tm_shortages_has(&m, 60001, "newest", "z", TM_CAPACITY_SPOT));
}

/* A name the table cannot hold whole is not remembered: cut short, it
 * could match another offering's. */
static void too_long_not_remembered(void **state)
{
    char lng[TM_ID_MAX + 8];

    (void)state;
    memset(lng, 'x', sizeof(lng) - 1);
    lng[sizeof(lng) - 1] = '\0';
    tm_shortages_note(&m, 0, lng, "z", TM_CAPACITY_SPOT, NULL);
    tm_shortages_note(&m, 0, "ok", lng, TM_CAPACITY_SPOT, NULL);
    lng[TM_ID_MAX - 1] = '\0';
    assert_false(tm_shortages_has(&m, 0, lng, "z", TM_CAPACITY_SPOT));
    assert_false(tm_shortages_has(&m, 0, "ok", lng, TM_CAPACITY_SPOT));
}

static void default_ttl(void **state)
{
    (void)state;
    tm_shortages_init(&m, "gcp", "type", "gcp-main", 0);
    assert_int_equal(m.ttl_ms, 10 * 60 * 1000);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup(remembered_until_ttl, setup),
        cmocka_unit_test_setup(key_is_type_zone_market, setup),
        cmocka_unit_test_setup(no_zone, setup),
        cmocka_unit_test_setup(note_again_extends, setup),
        cmocka_unit_test_setup(full_table_gives_way, setup),
        cmocka_unit_test_setup(too_long_not_remembered, setup),
        cmocka_unit_test_setup(default_ttl, setup),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
