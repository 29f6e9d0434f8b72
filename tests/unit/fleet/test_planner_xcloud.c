/*
 * tests/unit/fleet/test_planner_xcloud.c: the fleet planner over one table
 * that joins three clouds' A100 types (a pool group), with known answers:
 * the cheapest offer first (spot for preemptible work, on-demand
 * otherwise), a shortage on the cheapest falls to the next cloud in the
 * same pass, and the offers behind the launch (controller/fleet/offers.c)
 * name each cloud's price and why it was passed over.
 *
 * Prices are the A100-40GB 8-GPU list prices of config/prices-*-gpu.yaml:
 * spot azure 2.99 < aws 5.09 < gcp 15.42; on-demand aws 21.96 < azure
 * 27.20 < gcp 29.39.  Each type is offered in its own cloud's zone only.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "controller/fleet/offers.h"
#include "controller/fleet/planner.h"

#define NOW 1000000000LL

enum { AWS, GCP, AZURE, NCLOUDS };

struct xfix {
    struct tm_price_table pr;
    struct tm_planner_shortage sh[64];
    size_t nsh, nunoffered;
    struct tm_planner_job jobs[8];
    size_t njobs;
    struct tm_planner_input in;
    struct tm_planner_result res;
};

static void add_type(struct xfix *f, const char *provider, const char *name, int64_t od, int64_t spot)
{
    struct tm_price_type *t = &f->pr.types[f->pr.ntypes++];
    snprintf(t->name, sizeof(t->name), "%s", name);
    snprintf(t->provider, sizeof(t->provider), "%s", provider);
    snprintf(t->gpu_model, sizeof(t->gpu_model), "A100");
    t->gpus = 8;
    t->cpu_milli = 96000;
    t->memory_mib = 921600;
    t->on_demand_uusd_per_hour = od;
    t->spot_uusd_per_hour = spot;
}

static void setup_fix(struct xfix *f)
{
    memset(f, 0, sizeof(*f));
    add_type(f, "aws", "p4d.24xlarge", 21957642, 5093300);
    add_type(f, "gcp", "a2-highgpu-8g", 29387080, 15424160);
    add_type(f, "azure", "Standard_ND96asr_v4", 27197000, 2991670);
    snprintf(f->pr.zones[0], TM_PRICES_NAME_MAX, "us-east-1a");
    snprintf(f->pr.zones[1], TM_PRICES_NAME_MAX, "us-central1-a");
    snprintf(f->pr.zones[2], TM_PRICES_NAME_MAX, "1");
    f->pr.nzones = 3;
    /* Type t is offered in zone t only: the other cells never are. */
    for (int spot = 0; spot < 2; spot++)
        for (int t = 0; t < NCLOUDS; t++)
            for (int z = 0; z < NCLOUDS; z++)
                if (t != z)
                    f->sh[f->nsh++] = (struct tm_planner_shortage){t, z, spot == 1, INT64_MAX};
    f->nunoffered = f->nsh;
}

static void add_job(struct xfix *f, bool preemptible)
{
    f->jobs[f->njobs] = (struct tm_planner_job){
        .id = (int64_t)f->njobs + 1, .gpus = 8, .milli = 8000, .preemptible = preemptible,
        .node = -1, .remaining_ms = 3600000};
    f->njobs++;
}

static void short_at(struct xfix *f, int type, int zone, bool spot)
{
    f->sh[f->nsh++] = (struct tm_planner_shortage){type, zone, spot, NOW + 600000};
}

static void run(struct xfix *f)
{
    f->in = (struct tm_planner_input){
        .now_ms = NOW, .prices = &f->pr, .jobs = f->jobs, .njobs = f->njobs,
        .forecast_gpus = {-1, -1}, .keep_gpus = {-1, -1},
        .shortages = f->sh, .nshortages = f->nsh, .nunoffered = f->nunoffered,
        .params = {.boot_ms = 180000, .tick_ms = 10000, .idle_grace_ms = 600000,
                   .max_nodes = {4, 4}, .spot = true, .od_fallback = true,
                   .launch_use_ms = 3600000},
    };
    tm_planner_result_release(&f->res);
    assert_int_equal(tm_planner_run(&f->in, &f->res), 0);
}

static const struct tm_planner_action *launch(const struct xfix *f, int k)
{
    for (size_t i = 0; i < f->res.nactions; i++)
        if (f->res.actions[i].kind == TM_PLANNER_LAUNCH && k-- == 0)
            return &f->res.actions[i];
    fail_msg("no launch %d", k);
    return NULL;
}

static size_t nlaunches(const struct xfix *f)
{
    size_t n = 0;
    for (size_t i = 0; i < f->res.nactions; i++)
        n += f->res.actions[i].kind == TM_PLANNER_LAUNCH;
    return n;
}

static void test_cheapest_cloud_first(void **state)
{
    struct xfix *f = *state;
    setup_fix(f);
    add_job(f, true);
    add_job(f, false);
    run(f);
    assert_int_equal(nlaunches(f), 2);
    /* preemptible: azure's spot (2.99) in its own zone, not the table's first */
    const struct tm_planner_action *s = launch(f, 0);
    const struct tm_planner_action *o = launch(f, 1);
    if (!s->spot) {
        const struct tm_planner_action *x = s;
        s = o;
        o = x;
    }
    assert_true(s->spot);
    assert_string_equal(f->pr.types[s->type].provider, "azure");
    assert_int_equal(s->zone, 2);
    /* cells no pool offers are not shortages: no "fallback" in the reason */
    assert_null(strstr(s->reason, "fallback"));
    /* non-preemptible: on-demand, where aws is cheapest (21.96) */
    assert_false(o->spot);
    assert_string_equal(f->pr.types[o->type].provider, "aws");
    assert_int_equal(o->zone, 0);
    tm_planner_result_release(&f->res);
}

static void test_shortage_on_cheapest_falls_to_next_cloud_same_pass(void **state)
{
    struct xfix *f = *state;
    setup_fix(f);
    add_job(f, true);
    short_at(f, AZURE, 2, true);     /* azure's spot is exhausted in zone 1 */
    run(f);
    assert_int_equal(nlaunches(f), 1);
    const struct tm_planner_action *x = launch(f, 0);
    assert_true(x->spot);
    assert_string_equal(f->pr.types[x->type].provider, "aws");
    assert_int_equal(x->zone, 0);
    assert_non_null(strstr(x->reason, "fallback: other type (short)"));

    /* The offers behind it: azure short at 2.99, aws chosen at 5.09, gcp
     * dearer at 15.42, cheapest first. */
    struct tm_planner_offer o[8];
    size_t n = tm_planner_offers(&f->in, x, o, 8);
    assert_int_equal(n, 3);
    assert_int_equal(o[0].type, AZURE);
    assert_int_equal(o[0].status, TM_OFFER_SHORT);
    assert_int_equal(o[0].uusd_per_hour, 2991670);
    assert_int_equal(o[0].short_zones, 1u << 2);
    assert_int_equal(o[1].type, AWS);
    assert_int_equal(o[1].status, TM_OFFER_CHOSEN);
    assert_int_equal(o[1].uusd_per_hour, 5093300);
    assert_int_equal(o[2].type, GCP);
    assert_int_equal(o[2].status, TM_OFFER_DEARER);
    assert_int_equal(o[2].uusd_per_hour, 15424160);
    assert_string_equal(tm_offer_status_name(o[0].status), "short");

    /* aws short too: gcp, the last cloud with spot, in the same pass */
    short_at(f, AWS, 0, true);
    run(f);
    x = launch(f, 0);
    assert_true(x->spot);
    assert_string_equal(f->pr.types[x->type].provider, "gcp");
    /* every cloud's spot short: on-demand fallback, aws cheapest there */
    short_at(f, GCP, 1, true);
    run(f);
    x = launch(f, 0);
    assert_false(x->spot);
    assert_true(x->od_fallback);
    assert_string_equal(f->pr.types[x->type].provider, "aws");
    n = tm_planner_offers(&f->in, x, o, 8);
    /* three on-demand offers and the three spot ones it passed over */
    assert_int_equal(n, 6);
    size_t shorts = 0;
    for (size_t k = 0; k < n; k++)
        shorts += o[k].spot && o[k].status == TM_OFFER_SHORT;
    assert_int_equal(shorts, 3);
    tm_planner_result_release(&f->res);
}

static void test_two_nodes_one_pass_spread_after_shortage(void **state)
{
    struct xfix *f = *state;
    setup_fix(f);
    add_job(f, true);
    add_job(f, true);
    short_at(f, AZURE, 2, true);
    run(f);
    /* both 8-GPU jobs go to aws spot in one pass: the next offer */
    assert_int_equal(nlaunches(f), 2);
    assert_string_equal(f->pr.types[launch(f, 0)->type].provider, "aws");
    assert_string_equal(f->pr.types[launch(f, 1)->type].provider, "aws");
    tm_planner_result_release(&f->res);
}

int main(void)
{
    static struct xfix fix;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_prestate(test_cheapest_cloud_first, &fix),
        cmocka_unit_test_prestate(test_shortage_on_cheapest_falls_to_next_cloud_same_pass, &fix),
        cmocka_unit_test_prestate(test_two_nodes_one_pass_spread_after_shortage, &fix),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
