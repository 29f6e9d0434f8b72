/*
 * tests/unit/replay/test_elastic_owned.c: known answers for the elastic
 * replay with an owned fleet (controller/replay/elastic_owned.c): two owned
 * 8-GPU nodes, one 8-GPU cloud type at $8/h, a 3-minute boot.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include <unistd.h>

#include "controller/cli/cli.h"
#include "controller/replay/elastic_owned.h"

#define S 1000LL
#define H (3600 * S)

static struct tm_price_table prices;

static void add_job(struct tm_trace *t, int64_t submit, int64_t runtime, int32_t gpus, int32_t nodes)
{
    struct tm_trace_job *j = &t->jobs[t->njobs];

    memset(j, 0, sizeof(*j));
    snprintf(j->name, sizeof(j->name), "job-%zu", t->njobs);
    j->submit_ms = submit;
    j->start_ms = submit;
    j->end_ms = submit + runtime;
    j->gpus = gpus;
    j->nodes = nodes;
    t->njobs++;
}

static struct tm_owned_stats run(const struct tm_trace *t, enum tm_owned_policy p)
{
    struct tm_owned_config c;
    struct tm_owned_stats st;

    tm_owned_config_default(&c);
    c.policy = p;
    c.prices = &prices;
    c.cloud_type = 0;
    c.owned_gpus = 16;
    c.owned_usd_per_gpu_hour = 0.5;
    c.burst_wait_ms = 1800 * S;
    c.log = getenv("TM_TEST_LOG") ? stderr : NULL;
    assert_int_equal(tm_owned_run(t, &c, &st), 0);
    return st;
}

static int setup(void **state)
{
    struct tm_price_type *ty = &prices.types[0];

    (void)state;
    memset(&prices, 0, sizeof(prices));
    snprintf(ty->name, sizeof(ty->name), "eight");
    ty->gpus = 8;
    ty->cpu_milli = 96000;
    ty->memory_mib = 1 << 20;
    ty->on_demand_uusd_per_hour = 8000000;
    prices.ntypes = 1;
    return 0;
}

/* A gang of two 8-GPU nodes takes both owned nodes at 0 for an hour; an
 * 8-GPU job of an hour arriving at 10 s: owned-only waits for the gang
 * (3590 s), zero-wait bursts it at once (a boot, 180 s), constant-wait
 * after its 1800 s, and tarmac waits: its projected owned start (the
 * gang's expected end, an hour) is within its budget (8 GPUs x (the
 * default estimate + boot)). */
static void test_gang_then_one_node(void **state)
{
    struct tm_trace_job jobs[4];
    struct tm_trace t = {.jobs = jobs};
    struct tm_owned_stats st;

    (void)state;
    add_job(&t, 0, H, 8, 2);
    add_job(&t, 10 * S, H, 8, 1);

    st = run(&t, TM_OWNED_ONLY);
    assert_int_equal(st.jobs, 2);
    assert_int_equal(st.burst_jobs, 0);
    assert_true(st.cloud_usd == 0);
    assert_true(st.wait_mean_s > 3589.0 / 2 && st.wait_mean_s < 3591.0 / 2);
    /* 24 GPU-hours on 16 GPUs over the span, 0 to 2 h */
    assert_true(st.owned_utilisation > 0.74 && st.owned_utilisation < 0.76);
    assert_true(st.owned_usd > 15.9 && st.owned_usd < 16.1);
    assert_true(st.gang_gpu_hours_share > 0.66 && st.gang_gpu_hours_share < 0.67);

    st = run(&t, TM_OWNED_ZERO_WAIT);
    assert_int_equal(st.burst_jobs, 1);
    assert_true(st.wait_mean_s > 89.9 && st.wait_mean_s < 90.1);
    /* one node from 10 s to its release, an hour and a boot later plus the
     * idle grace (600 s) and at most a tick: about $9.7 */
    assert_true(st.cloud_usd > 9.7 && st.cloud_usd < 9.8);

    st = run(&t, TM_OWNED_CONSTANT_WAIT);
    assert_int_equal(st.burst_jobs, 1);
    assert_true(st.wait_mean_s >= 990 && st.wait_mean_s < 1010);

    st = run(&t, TM_OWNED_TARMAC);
    assert_int_equal(st.burst_jobs, 0);
    assert_true(st.cloud_usd == 0);
    assert_int_equal(st.starved, 0);
}

/* A gang of three nodes is more than the owned fleet holds: every burst
 * policy sends it whole to three bought nodes at once; owned-only never
 * runs it (unfinished and starved). */
static void test_gang_larger_than_owned(void **state)
{
    struct tm_trace_job jobs[4];
    struct tm_trace t = {.jobs = jobs};
    struct tm_owned_stats st;

    (void)state;
    add_job(&t, 0, H, 8, 3);
    add_job(&t, 0, H, 1, 1);

    st = run(&t, TM_OWNED_TARMAC);
    assert_int_equal(st.burst_jobs, 1);
    assert_int_equal(st.launches, 3);
    assert_int_equal(st.unfinished, 0);

    st = run(&t, TM_OWNED_ONLY);
    assert_int_equal(st.unfinished, 1);
    assert_int_equal(st.starved, 1);
    assert_true(st.cloud_usd == 0);
}

/* A short 1-GPU job behind a full owned fleet bursts under tarmac: its
 * projected owned start (10 h) passes its budget (1 GPU x (runtime
 * estimate + boot)); the long 8-GPU jobs it waits behind never burst. */
static void test_short_job_bursts_behind_long_ones(void **state)
{
    struct tm_trace_job jobs[4];
    struct tm_trace t = {.jobs = jobs};
    struct tm_owned_stats st;

    (void)state;
    add_job(&t, 0, 10 * H, 8, 1);
    add_job(&t, 0, 10 * H, 8, 1);
    add_job(&t, 60 * S, 600 * S, 1, 1);

    st = run(&t, TM_OWNED_TARMAC);
    assert_int_equal(st.burst_jobs, 1);
    assert_int_equal(st.starved, 0);
    assert_true(st.owned_gpu_hours > 159.9 && st.owned_gpu_hours < 160.1);
}

/* The command line: a Philly file replayed with an owned fleet (exit 0),
 * and bad input refused with exit 2: owned GPUs not in 8-GPU nodes, a
 * cloud type that is not in the table or has not 8 GPUs, --owned-cost or
 * --cloud-type without --owned-gpus, a policy of the other mode. */
static void test_cli(void **state)
{
    char pfile[] = "/tmp/tm-prices-XXXXXX.yaml", pods[] = "/tmp/tm-philly-XXXXXX.csv";
    int fp = mkstemps(pfile, 5), fo = mkstemps(pods, 4);
    FILE *f, *devnull;
    int saved;

    (void)state;
    assert_true(fp >= 0 && fo >= 0);
    f = fdopen(fp, "w");
    fputs("types:\n  - name: g8\n    gpus: 8\n    on_demand_per_hour: 32\n"
          "  - name: g4\n    gpus: 4\n    on_demand_per_hour: 16\n", f);
    fclose(f);
    f = fdopen(fo, "w");
    fputs("timestamp,duration,num_gpus,gpu_time,cluster\n"
          "2017-10-09 07:01:55,3600.0,16,57600.0,vc1\n"
          "2017-10-09 07:02:55,600.0,1,600.0,vc2\n", f);
    fclose(f);
    {
        char *ok[] = {"replay", "--elastic", "--pods", pods, "--prices", pfile, "--owned-gpus", "16",
                      "--json", NULL};
        char *gpus[] = {"replay", "--elastic", "--pods", pods, "--prices", pfile, "--owned-gpus", "12", NULL};
        char *type[] = {"replay", "--elastic", "--pods", pods, "--prices", pfile, "--owned-gpus", "16",
                        "--cloud-type", "g4", NULL};
        char *none[] = {"replay", "--elastic", "--pods", pods, "--prices", pfile, "--owned-gpus", "16",
                        "--cloud-type", "p9", NULL};
        char *cost[] = {"replay", "--elastic", "--pods", pods, "--prices", pfile, "--owned-cost", "1", NULL};
        char *pol[] = {"replay", "--elastic", "--pods", pods, "--prices", pfile, "--owned-gpus", "16",
                       "--policy", "reactive", NULL};
        /* the JSON document goes to stdout: keep the test's output clean */
        fflush(stdout);
        saved = dup(1);
        devnull = fopen("/dev/null", "w");
        assert_non_null(devnull);
        dup2(fileno(devnull), 1);
        assert_int_equal(tm_elastic_main(9, ok), 0);
        fflush(stdout);
        dup2(saved, 1);
        close(saved);
        fclose(devnull);
        assert_int_equal(tm_elastic_main(8, gpus), 2);
        assert_int_equal(tm_elastic_main(10, type), 2);
        assert_int_equal(tm_elastic_main(10, none), 2);
        assert_int_equal(tm_elastic_main(8, cost), 2);
        assert_int_equal(tm_elastic_main(10, pol), 2);
    }
    unlink(pfile);
    unlink(pods);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_gang_then_one_node),
        cmocka_unit_test(test_gang_larger_than_owned),
        cmocka_unit_test(test_short_job_bursts_behind_long_ones),
        cmocka_unit_test(test_cli),
    };
    return cmocka_run_group_tests(tests, setup, NULL);
}
