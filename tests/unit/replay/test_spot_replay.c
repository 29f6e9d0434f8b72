/* tests/unit/replay/test_spot_replay.c: the elastic replay with a hazard table
 * (`replay --elastic --hazards FILE`): each spot (type, zone) gets its
 * own interruption hazard and launch availability; a zone that cannot
 * launch sends the planner to the next zone (its shortage memory). */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "controller/cli/cli.h"
#include "controller/replay/elastic.h"
#include "core/spot_hazards.h"
#include "core/err.h"

#define S 1000LL
#define H (3600 * S)

/* One 8-GPU type with spot, two zones. */
static void table(struct tm_price_table *t)
{
    memset(t, 0, sizeof(*t));
    t->ntypes = 1;
    snprintf(t->types[0].name, sizeof(t->types[0].name), "g8");
    t->types[0].gpus = 8;
    t->types[0].cpu_milli = 96000;
    t->types[0].memory_mib = 786432;
    t->types[0].on_demand_uusd_per_hour = 32000000;
    t->types[0].spot_uusd_per_hour = 11200000;
    t->nzones = 2;
    snprintf(t->zones[0], sizeof(t->zones[0]), "sim-a");
    snprintf(t->zones[1], sizeof(t->zones[1]), "sim-b");
}

/* n preemptible 1- and 4-GPU jobs of 10 to 70 minutes over `span`. */
static void synth(struct tm_trace *t, size_t n, int64_t span)
{
    uint64_t x = 88172645463325252ULL;
    memset(t, 0, sizeof(*t));
    t->jobs = calloc(n, sizeof(*t->jobs));
    assert_non_null(t->jobs);
    t->njobs = n;
    for (size_t i = 0; i < n; i++) {
        struct tm_trace_job *j = &t->jobs[i];
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        snprintf(j->name, sizeof(j->name), "j%zu", i);
        j->submit_ms = (int64_t)(i * (uint64_t)span / n);
        j->start_ms = j->submit_ms;
        j->end_ms = j->submit_ms + (int64_t)(600 + x % 3600) * S;
        j->cpu_milli = 4000;
        j->memory_mib = 16384;
        j->gpus = (x >> 20) % 4 == 0 ? 4 : 1;
        j->gpu_milli = 1000;
        j->preemptible = true;
        j->qos = TM_QOS_BE;
        j->klass = TM_CLASS_BATCH;
    }
}

static void hazards(struct tm_spot_hazards *h, const char *yaml)
{
    char err[256];
    assert_int_equal(tm_spot_hazards_parse("test", yaml, strlen(yaml), h, err, sizeof(err)), 0);
}

static void replay(const struct tm_trace *t, const struct tm_price_table *pr,
                   const struct tm_spot_hazards *h, enum tm_elastic_policy p, uint64_t seed,
                   struct tm_elastic_stats *st)
{
    struct tm_elastic_config c;
    tm_elastic_config_default(&c);
    c.prices = pr;
    c.policy = p;
    c.spot = true;
    c.hazard_per_hour = 0; /* cells the table does not name */
    c.hazards = h;
    c.seed = seed;
    assert_int_equal(tm_elastic_run(t, &c, st), 0);
    assert_int_equal(st->unfinished, 0);
}

/* The planner launches in sim-a: with hazard 0 there, no interruption;
 * with hazard 5 there, many, all in sim-a.  Same seed, same numbers.
 * tarmac, told the pool's mean hazard is 2.5 per hour, keeps this work
 * off spot altogether (its expected-loss rule, elastic.c job_mask). */
static void test_zone_hazard(void **state)
{
    struct tm_price_table pr;
    struct tm_trace t;
    struct tm_spot_hazards *safe = malloc(sizeof(*safe)), *risky = malloc(sizeof(*risky));
    struct tm_elastic_stats a, b, again;
    (void)state;
    table(&pr);
    synth(&t, 300, 24 * H);
    hazards(safe, "hazards:\n  - {type: g8, zone: sim-a, hazard_per_hour: 0}\n"
                  "  - {type: g8, zone: sim-b, hazard_per_hour: 5}\n");
    hazards(risky, "hazards:\n  - {type: g8, zone: sim-a, hazard_per_hour: 5}\n"
                   "  - {type: g8, zone: sim-b, hazard_per_hour: 0}\n");
    replay(&t, &pr, safe, TM_ELASTIC_REACTIVE, 1, &a);
    replay(&t, &pr, risky, TM_ELASTIC_REACTIVE, 1, &b);
    print_message("reactive: safe sim-a %zu interruptions (%zu spot launches), risky sim-a %zu (%zu)\n",
                  a.interruptions, a.spot_launches_by_zone[0], b.interruptions,
                  b.spot_launches_by_zone[0]);
    assert_true(a.spot_launches_by_zone[0] > 0);
    assert_int_equal(a.spot_launches_by_zone[1], 0);
    assert_int_equal(a.interruptions, 0);
    assert_int_equal(a.spot_shortages, 0);
    assert_true(b.interruptions > 0);
    assert_int_equal(b.interruptions_by_zone[0], b.interruptions);
    assert_true(b.lost_gpu_hours > 0);
    replay(&t, &pr, risky, TM_ELASTIC_REACTIVE, 1, &again);
    assert_true(again.cost_usd == b.cost_usd);
    assert_int_equal(again.interruptions, b.interruptions);
    assert_true(again.wait_mean_s == b.wait_mean_s);
    replay(&t, &pr, risky, TM_ELASTIC_TARMAC, 1, &b);
    assert_int_equal(b.spot_launches_by_zone[0] + b.spot_launches_by_zone[1], 0);
    assert_int_equal(b.interruptions, 0);
    /* Hazards low enough for spot: tarmac launches spot in the zone of
     * lower hazard (sim-b), reactive in table order (sim-a). */
    struct tm_spot_hazards *mild = malloc(sizeof(*mild));
    hazards(mild, "hazards:\n  - {type: g8, zone: sim-a, hazard_per_hour: 0.3}\n"
                  "  - {type: g8, zone: sim-b, hazard_per_hour: 0.01}\n");
    replay(&t, &pr, mild, TM_ELASTIC_TARMAC, 1, &b);
    print_message("tarmac, mild: spot launches sim-a %zu, sim-b %zu\n", b.spot_launches_by_zone[0],
                  b.spot_launches_by_zone[1]);
    assert_true(b.spot_launches_by_zone[1] > 0);
    assert_int_equal(b.spot_launches_by_zone[0], 0);
    replay(&t, &pr, mild, TM_ELASTIC_REACTIVE, 1, &a);
    assert_true(a.spot_launches_by_zone[0] > 0);
    assert_int_equal(a.spot_launches_by_zone[1], 0);
    free(mild);
    free(safe);
    free(risky);
    tm_trace_release(&t);
}

/* sim-a never has spot capacity: every spot launch there fails, is
 * remembered as a shortage, and the planner launches in sim-b (hazard 0:
 * no interruptions although sim-a's is 5). */
static void test_zone_availability_fallback(void **state)
{
    struct tm_price_table pr;
    struct tm_trace t;
    struct tm_spot_hazards *h = malloc(sizeof(*h));
    struct tm_elastic_stats st;
    (void)state;
    table(&pr);
    synth(&t, 300, 24 * H);
    hazards(h, "hazards:\n  - {type: g8, zone: sim-a, hazard_per_hour: 5, availability: 0}\n"
               "  - {type: g8, zone: sim-b, hazard_per_hour: 0, availability: 1}\n");
    replay(&t, &pr, h, TM_ELASTIC_REACTIVE, 1, &st);
    print_message("shortages %zu, spot launches sim-a %zu sim-b %zu, interruptions %zu\n",
                  st.spot_shortages, st.spot_launches_by_zone[0], st.spot_launches_by_zone[1],
                  st.interruptions);
    assert_true(st.spot_shortages > 0);
    assert_int_equal(st.spot_launches_by_zone[0], 0);
    assert_true(st.spot_launches_by_zone[1] > 0);
    assert_int_equal(st.interruptions, 0);
    /* half the launches in sim-a fail: some land there, some move on */
    hazards(h, "hazards:\n  - {type: g8, zone: sim-a, hazard_per_hour: 0, availability: 0.5}\n");
    replay(&t, &pr, h, TM_ELASTIC_REACTIVE, 1, &st);
    print_message("availability 0.5: shortages %zu, spot launches sim-a %zu sim-b %zu\n",
                  st.spot_shortages, st.spot_launches_by_zone[0], st.spot_launches_by_zone[1]);
    assert_true(st.spot_shortages > 0);
    assert_true(st.spot_launches_by_zone[0] > 0);
    assert_true(st.spot_launches_by_zone[1] > 0);
    free(h);
    tm_trace_release(&t);
}

/* A table that names no cell of the price table changes nothing: the
 * lifetimes are drawn from (seed, token) whatever the pool is called. */
static void test_unnamed_cells_keep_hazard(void **state)
{
    struct tm_price_table pr;
    struct tm_trace t;
    struct tm_spot_hazards *h = malloc(sizeof(*h));
    struct tm_elastic_stats with, without;
    struct tm_elastic_config c;
    (void)state;
    table(&pr);
    synth(&t, 300, 24 * H);
    hazards(h, "hazards:\n  - {type: other, zone: sim-a, hazard_per_hour: 0}\n");
    tm_elastic_config_default(&c);
    c.prices = &pr;
    c.policy = TM_ELASTIC_REACTIVE;
    c.spot = true;
    c.hazard_per_hour = 0.5;
    assert_int_equal(tm_elastic_run(&t, &c, &without), 0);
    c.hazards = h;
    assert_int_equal(tm_elastic_run(&t, &c, &with), 0);
    assert_true(without.interruptions > 0);
    assert_int_equal(with.interruptions, without.interruptions);
    assert_true(with.cost_usd == without.cost_usd);
    assert_true(with.wait_mean_s == without.wait_mean_s);
    free(h);
    tm_trace_release(&t);
}

/* The command line: a table naming nothing of the price table, or a bad
 * one, is refused (exit 2). */
static void test_cli_hazards(void **state)
{
    char prices[] = "/tmp/tm-prices-XXXXXX", hz[] = "/tmp/tm-hazards-XXXXXX";
    int fp = mkstemp(prices), fh = mkstemp(hz);
    FILE *f;
    char *argv[] = {"replay", "--elastic", "--pods", "/dev/null", "--prices", prices,
                    "--spot", "on", "--hazards", hz, NULL};
    (void)state;
    assert_true(fp >= 0 && fh >= 0);
    f = fdopen(fp, "w");
    fputs("zones: [sim-a]\ntypes:\n  - name: g8\n    gpus: 8\n    on_demand_per_hour: 32\n"
          "    spot_per_hour: 11.2\n", f);
    fclose(f);
    f = fdopen(fh, "w");
    fputs("hazards:\n  - {type: p3.2xlarge, zone: us-east-1c, hazard_per_hour: 0.7}\n", f);
    fclose(f);
    assert_int_equal(tm_elastic_main(10, argv), 2);
    f = fopen(hz, "w");
    fputs("hazards:\n  - {type: g8, zone: sim-a, hazard_per_hour: -1}\n", f);
    fclose(f);
    assert_int_equal(tm_elastic_main(10, argv), 2);
    unlink(prices);
    unlink(hz);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_zone_hazard),
        cmocka_unit_test(test_zone_availability_fallback),
        cmocka_unit_test(test_unnamed_cells_keep_hazard),
        cmocka_unit_test(test_cli_hazards),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
