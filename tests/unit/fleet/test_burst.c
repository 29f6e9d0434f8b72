/* tests/unit/fleet/test_burst.c: the burst rule's known answers
 * (controller/fleet/burst.c): a short wait is waited, a long one bursts,
 * a job whose projected start misses its deadline or the starvation
 * bound bursts, preemptible work bursts to spot, and the constant-wait
 * and never rules. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include "controller/fleet/burst.h"

#define MIN (60LL * 1000)
#define HOUR (60 * MIN)

/* p4d-like: $21.96 an 8-GPU hour on demand, $5.09 on spot, 3 min boot */
static const struct tm_burst_offer offer = {.on_demand_per_gpu_hour = 21.96 / 8,
                                            .spot_per_gpu_hour = 5.09 / 8,
                                            .boot_ms = 3 * MIN};

static struct tm_burst_decision decide(const struct tm_burst_params *p, const struct tm_burst_job *j,
                                       int64_t now, int64_t start)
{
    struct tm_burst_decision d;
    tm_burst_decide(p, j, now, start, &offer, &d);
    return d;
}

/* A 2-hour job of one GPU: 20 minutes to its owned start is within its
 * budget of about 2 h (estimate + boot at the default value); 6 hours is
 * not. */
static void cost_short_wait_waits_long_wait_bursts(void **state)
{
    struct tm_burst_params p;
    struct tm_burst_job j = {.gpus = 1, .submit_ms = 0, .estimate_ms = 2 * HOUR};
    struct tm_burst_decision d;

    (void)state;
    tm_burst_params_default(&p);
    d = decide(&p, &j, 0, 20 * MIN);
    assert_int_equal(d.choice, TM_BURST_WAIT);
    assert_int_equal(d.owned_start_ms, 20 * MIN);
    assert_true(d.price_per_hour == 0);
    assert_non_null(strstr(d.reason, "projected owned start in 1200 s"));
    d = decide(&p, &j, 0, 6 * HOUR);
    assert_int_equal(d.choice, TM_BURST_ON_DEMAND);
    assert_true(d.price_per_hour > 2.74 && d.price_per_hour < 2.75);
    assert_non_null(strstr(d.reason, "projected owned start in 21600 s"));
    assert_non_null(strstr(d.reason, "$2.75/h"));
    /* the same job on 8 GPUs costs 8 times as much to burst: its budget
     * is 8 times as long, and 6 hours is within it; 20 hours is not */
    j.gpus = 8;
    assert_int_equal(decide(&p, &j, 0, 6 * HOUR).choice, TM_BURST_WAIT);
    d = decide(&p, &j, 0, 20 * HOUR);
    assert_int_equal(d.choice, TM_BURST_ON_DEMAND);
    assert_non_null(strstr(d.reason, "$21.96/h"));
}

/* The same projected wait of 1 hour: a 10-minute job bursts (its budget
 * is 13 min), a 10-hour one waits (its budget is 10 h 3 min). */
static void cost_budget_grows_with_runtime(void **state)
{
    struct tm_burst_params p;
    struct tm_burst_job shortj = {.gpus = 1, .submit_ms = 0, .estimate_ms = 10 * MIN};
    struct tm_burst_job longj = {.gpus = 1, .submit_ms = 0, .estimate_ms = 10 * HOUR};

    (void)state;
    tm_burst_params_default(&p);
    assert_int_equal(decide(&p, &shortj, 0, HOUR).choice, TM_BURST_ON_DEMAND);
    assert_int_equal(decide(&p, &longj, 0, HOUR).choice, TM_BURST_WAIT);
    /* time already waited counts: the long job that has waited 9.5 h
     * with 1 h still to go passes its budget */
    assert_int_equal(decide(&p, &longj, 19 * HOUR / 2, 21 * HOUR / 2).choice, TM_BURST_ON_DEMAND);
    /* a higher value of waiting shortens the budget: at 4x the price a
     * 10-hour job waits at most about 2.5 h */
    p.wait_value_per_hour = 4 * offer.on_demand_per_gpu_hour;
    assert_int_equal(decide(&p, &longj, 0, 2 * HOUR).choice, TM_BURST_WAIT);
    assert_int_equal(decide(&p, &longj, 0, 3 * HOUR).choice, TM_BURST_ON_DEMAND);
}

/* A job whose projected owned start misses its deadline bursts, however
 * large its budget; the same job with no deadline waits. */
static void cost_deadline_bursts(void **state)
{
    struct tm_burst_params p;
    struct tm_burst_job j = {.gpus = 4, .submit_ms = 0, .estimate_ms = 10 * HOUR,
                             .deadline_ms = 11 * HOUR};
    struct tm_burst_decision d;

    (void)state;
    tm_burst_params_default(&p);
    d = decide(&p, &j, 0, 2 * HOUR);
    assert_int_equal(d.choice, TM_BURST_ON_DEMAND);
    assert_non_null(strstr(d.reason, "deadline"));
    assert_int_equal(decide(&p, &j, 0, 30 * MIN).choice, TM_BURST_WAIT);
    j.deadline_ms = 0;
    assert_int_equal(decide(&p, &j, 0, 2 * HOUR).choice, TM_BURST_WAIT);
}

/* Past the starvation bound: bursts, whatever the budget. */
static void cost_starvation_bursts(void **state)
{
    struct tm_burst_params p;
    struct tm_burst_job j = {.gpus = 8, .submit_ms = 0, .estimate_ms = 100 * HOUR};
    struct tm_burst_decision d;

    (void)state;
    tm_burst_params_default(&p);
    assert_int_equal(decide(&p, &j, 0, 40 * HOUR).choice, TM_BURST_WAIT);
    d = decide(&p, &j, 0, 49 * HOUR);
    assert_int_equal(d.choice, TM_BURST_ON_DEMAND);
    assert_non_null(strstr(d.reason, "starvation"));
    /* no projection at all (owned cannot hold it) bursts too */
    d = decide(&p, &j, 0, TM_BURST_NO_START);
    assert_int_equal(d.choice, TM_BURST_ON_DEMAND);
    assert_non_null(strstr(d.reason, "projected owned start none (owned capacity gives it no start)"));
}

/* Preemptible work bursts to spot, at the spot price, and sooner: its
 * budget shrinks by the spot discount (2 h 3 min x 5.09 / 21.96: 28 min,
 * so a 1-hour wait bursts).  Without a spot offer, on demand, with the
 * on-demand budget (2 h 3 min). */
static void cost_preemptible_bursts_to_spot(void **state)
{
    struct tm_burst_params p;
    struct tm_burst_job j = {.gpus = 1, .submit_ms = 0, .estimate_ms = 2 * HOUR, .preemptible = true};
    struct tm_burst_offer od_only = offer;
    struct tm_burst_decision d;

    (void)state;
    tm_burst_params_default(&p);
    d = decide(&p, &j, 0, HOUR);
    assert_int_equal(d.choice, TM_BURST_SPOT);
    assert_true(d.price_per_hour > 0.63 && d.price_per_hour < 0.64);
    assert_non_null(strstr(d.reason, "burst spot"));
    od_only.spot_per_gpu_hour = 0;
    tm_burst_decide(&p, &j, 0, HOUR, &od_only, &d);
    assert_int_equal(d.choice, TM_BURST_WAIT);
    tm_burst_decide(&p, &j, 0, 3 * HOUR, &od_only, &d);
    assert_int_equal(d.choice, TM_BURST_ON_DEMAND);
}

/* Never bursts before a boot would: the cloud cannot start it sooner. */
static void cost_within_a_boot_waits(void **state)
{
    struct tm_burst_params p;
    struct tm_burst_job j = {.gpus = 1, .submit_ms = 0, .estimate_ms = 1000};

    (void)state;
    tm_burst_params_default(&p);
    assert_int_equal(decide(&p, &j, 0, 2 * MIN).choice, TM_BURST_WAIT);
    assert_int_equal(decide(&p, &j, 0, 0).choice, TM_BURST_WAIT);
    assert_int_equal(decide(&p, &j, 0, 10 * MIN).choice, TM_BURST_ON_DEMAND);
}

/* after: D bursts once the job has waited D; 0 at once; never never. */
static void after_and_never(void **state)
{
    struct tm_burst_params p;
    struct tm_burst_job j = {.gpus = 1, .submit_ms = 0, .estimate_ms = 10 * HOUR};
    struct tm_burst_decision d;

    (void)state;
    tm_burst_params_default(&p);
    p.rule = TM_BURST_AFTER;
    p.after_ms = 30 * MIN;
    assert_int_equal(decide(&p, &j, 10 * MIN, 5 * HOUR).choice, TM_BURST_WAIT);
    assert_int_equal(decide(&p, &j, 30 * MIN, 5 * HOUR).choice, TM_BURST_ON_DEMAND);
    /* it starts now on owned capacity: no burst */
    assert_int_equal(decide(&p, &j, 30 * MIN, 30 * MIN).choice, TM_BURST_WAIT);
    p.after_ms = 0;
    assert_int_equal(decide(&p, &j, 0, 1000).choice, TM_BURST_ON_DEMAND);
    p.rule = TM_BURST_NEVER;
    d = decide(&p, &j, 100 * HOUR, TM_BURST_NO_START);
    assert_int_equal(d.choice, TM_BURST_WAIT);
    assert_non_null(strstr(d.reason, "never"));
    assert_string_equal(tm_burst_rule_name(TM_BURST_COST), "cost");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(cost_short_wait_waits_long_wait_bursts),
        cmocka_unit_test(cost_budget_grows_with_runtime),
        cmocka_unit_test(cost_deadline_bursts),
        cmocka_unit_test(cost_starvation_bursts),
        cmocka_unit_test(cost_preemptible_bursts_to_spot),
        cmocka_unit_test(cost_within_a_boot_waits),
        cmocka_unit_test(after_and_never),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
