/* tests/unit/fleet/test_planner.c: the fleet planner's known answers. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <cmocka.h>

#include "controller/fleet/planner.h"
#include "core/err.h"

#define S 1000LL
#define H (3600 * S)

/* Types g1, g2, g4, g8 at $4/GPU-h on demand, $1.40 spot; zones a, b. */
static void sizes(struct tm_price_table *t, bool only8)
{
    static const int g[] = {1, 2, 4, 8};
    memset(t, 0, sizeof(*t));
    for (int i = only8 ? 3 : 0; i < 4; i++) {
        struct tm_price_type *ty = &t->types[t->ntypes++];
        snprintf(ty->name, sizeof(ty->name), "g%d", g[i]);
        ty->gpus = g[i];
        ty->cpu_milli = 12000LL * g[i];
        ty->memory_mib = 98304LL * g[i];
        ty->on_demand_uusd_per_hour = 4000000LL * g[i];
        ty->spot_uusd_per_hour = 1400000LL * g[i];
    }
    snprintf(t->zones[0], sizeof(t->zones[0]), "a");
    snprintf(t->zones[1], sizeof(t->zones[1]), "b");
    t->nzones = 2;
}

static void base_input(struct tm_planner_input *in, const struct tm_price_table *t, int64_t now)
{
    memset(in, 0, sizeof(*in));
    in->now_ms = now;
    in->prices = t;
    in->forecast_gpus[0] = in->forecast_gpus[1] = -1;
    in->keep_gpus[0] = in->keep_gpus[1] = -1;
    in->params.boot_ms = 180 * S;
    in->params.tick_ms = 30 * S;
    in->params.idle_grace_ms = 30 * S;
    in->params.max_nodes[0] = in->params.max_nodes[1] = 100;
    in->params.disruption_nodes = 100;
    in->params.spot = true;
    in->params.od_fallback = true;
    in->params.od_room_for_preemptible = true;
    in->params.move_cost_ms = 60 * S;
    in->params.launch_use_ms = 600 * S;
}

static size_t count(const struct tm_planner_result *r, enum tm_planner_kind k)
{
    size_t n = 0;
    for (size_t i = 0; i < r->nactions; i++)
        n += r->actions[i].kind == k;
    return n;
}

static const struct tm_planner_action *first(const struct tm_planner_result *r, enum tm_planner_kind k)
{
    for (size_t i = 0; i < r->nactions; i++)
        if (r->actions[i].kind == k)
            return &r->actions[i];
    return NULL;
}

static struct tm_planner_node node(int type, bool spot, int32_t used, int64_t idle_since)
{
    return (struct tm_planner_node){.type = type, .spot = spot, .ready = true, .used_milli = used,
                                 .free_whole = 0, .jobs = used > 0 ? 1 : 0,
                                 .idle_since_ms = idle_since, .busy_until_ms = 0};
}

/* A ramp in demand launches before any job waits: the forecast says 12
 * GPUs one boot ahead, the fleet holds 8 and nothing is queued. */
static void test_ramp_launches_ahead(void **state)
{
    struct tm_price_table t;
    struct tm_planner_input in;
    struct tm_planner_result r = {0};
    struct tm_planner_node n = node(0, false, 8000, 0);
    const struct tm_planner_action *a;
    (void)state;
    sizes(&t, false);
    n.type = 3; /* g8, full */
    base_input(&in, &t, 10 * H);
    in.nodes = &n;
    in.nnodes = 1;
    in.forecast_gpus[0] = 12;
    assert_int_equal(tm_planner_run(&in, &r), 0);
    assert_int_equal(count(&r, TM_PLANNER_LAUNCH), 1);
    a = first(&r, TM_PLANNER_LAUNCH);
    assert_string_equal(t.types[a->type].name, "g4"); /* 4 GPUs short: a 4-GPU node */
    assert_false(a->spot);
    assert_non_null(strstr(a->reason, "ahead of forecast"));
    tm_planner_result_release(&r);
    /* the same forecast with the fleet already big enough: nothing */
    in.forecast_gpus[0] = 8;
    assert_int_equal(tm_planner_run(&in, &r), 0);
    assert_int_equal(count(&r, TM_PLANNER_LAUNCH), 0);
    tm_planner_result_release(&r);
}

/* Sizing: a 1-GPU job gets a 1-GPU instance, not an idle share of 8. */
static void test_sizing(void **state)
{
    struct tm_price_table t;
    struct tm_planner_input in;
    struct tm_planner_result r = {0};
    struct tm_planner_job j = {.gpus = 1, .milli = 1000, .remaining_ms = H, .node = -1};
    (void)state;
    sizes(&t, false);
    base_input(&in, &t, 0);
    in.jobs = &j;
    in.njobs = 1;
    assert_int_equal(tm_planner_run(&in, &r), 0);
    assert_int_equal(count(&r, TM_PLANNER_LAUNCH), 1);
    assert_string_equal(t.types[first(&r, TM_PLANNER_LAUNCH)->type].name, "g1");
    tm_planner_result_release(&r);
    /* five 1-GPU jobs and one of 2 (7 GPUs): no idle GPU is bought at the
     * same price per GPU: 4 + 2 + 1, not an 8-GPU node with one idle */
    {
        struct tm_planner_job js[8];
        for (int k = 0; k < 8; k++)
            js[k] = j;
        js[5] = (struct tm_planner_job){.gpus = 2, .milli = 2000, .remaining_ms = H, .node = -1};
        in.jobs = js;
        in.njobs = 6;
        assert_int_equal(tm_planner_run(&in, &r), 0);
        assert_int_equal(count(&r, TM_PLANNER_LAUNCH), 3);
        assert_string_equal(t.types[r.actions[0].type].name, "g4");
        assert_string_equal(t.types[r.actions[1].type].name, "g2");
        assert_string_equal(t.types[r.actions[2].type].name, "g1");
        tm_planner_result_release(&r);
        /* eight GPUs of work: one 8-GPU node (ties go to the larger) */
        js[5] = j;
        in.njobs = 8;
        assert_int_equal(tm_planner_run(&in, &r), 0);
        assert_int_equal(count(&r, TM_PLANNER_LAUNCH), 1);
        assert_string_equal(t.types[first(&r, TM_PLANNER_LAUNCH)->type].name, "g8");
        tm_planner_result_release(&r);
        /* an 8-GPU node at a discount beats a 1-GPU node for one job */
        t.types[3].on_demand_uusd_per_hour = 3000000;
        in.njobs = 1;
        assert_int_equal(tm_planner_run(&in, &r), 0);
        assert_string_equal(t.types[first(&r, TM_PLANNER_LAUNCH)->type].name, "g8");
        tm_planner_result_release(&r);
    }
}

static int oscillate(bool hysteresis, int *ret_launches)
{
    struct tm_price_table t;
    struct tm_planner_node nodes[32];
    int64_t ready_at[32];
    size_t nn = 0;
    int terms = 0, launches = 0;

    sizes(&t, true);
    for (int64_t now = 0; now < 6 * H; now += 30 * S) {
        struct tm_planner_input in;
        struct tm_planner_result r = {0};
        int32_t demand = (now / (10 * 60 * S)) % 2 ? 12000 : 4000, left = demand;
        struct tm_planner_job q = {.gpus = 1, .milli = 0, .remaining_ms = H, .node = -1};
        for (size_t i = 0; i < nn; i++) {
            nodes[i].ready = now >= ready_at[i];
            if (!nodes[i].ready || nodes[i].leaving)
                continue;
            {
                int32_t take = left > 8000 ? 8000 : left;
                if (take == 0 && nodes[i].used_milli > 0)
                    nodes[i].idle_since_ms = now;
                nodes[i].used_milli = take;
                nodes[i].jobs = take > 0;
                nodes[i].free_whole = (8000 - take) / 1000;
                left -= take;
            }
        }
        base_input(&in, &t, now);
        in.nodes = nodes;
        in.nnodes = nn;
        if (left > 0) {
            q.milli = left;
            q.gpus = 0;
            in.jobs = &q;
            in.njobs = 1;
        }
        in.params.spot = false;
        in.forecast_gpus[0] = 8;   /* the mean */
        if (hysteresis)
            in.keep_gpus[0] = 12;  /* the upper quantile */
        assert_int_equal(tm_planner_run(&in, &r), 0);
        for (size_t k = 0; k < r.nactions; k++) {
            if (r.actions[k].kind == TM_PLANNER_LAUNCH && nn < 32) {
                nodes[nn] = (struct tm_planner_node){.type = 0, .idle_since_ms = now + 180 * S};
                ready_at[nn++] = now + 180 * S;
                launches++;
            } else if (r.actions[k].kind == TM_PLANNER_TERMINATE) {
                nodes[r.actions[k].node].leaving = true;
                if (now >= H)
                    terms++;
            }
        }
        tm_planner_result_release(&r);
    }
    *ret_launches = launches;
    return terms;
}

static void test_oscillation_does_not_flap(void **state)
{
    int launches, terms;
    (void)state;
    terms = oscillate(true, &launches);
    assert_int_equal(terms, 0);
    assert_int_equal(launches, 2);      /* two 8-GPU nodes for 12 GPUs, once */
    /* without the upper quantile the same grace flaps: the test bites */
    terms = oscillate(false, &launches);
    assert_true(terms >= 10);
}

/* The hard cap refuses exactly the launch that would overshoot, and says
 * why with the numbers. */
static void test_hard_cap(void **state)
{
    struct tm_price_table t;
    struct tm_planner_input in;
    struct tm_planner_result r = {0};
    struct tm_planner_job js[3];
    const struct tm_planner_action *a;
    (void)state;
    sizes(&t, true);
    base_input(&in, &t, 0);
    for (int k = 0; k < 3; k++)
        js[k] = (struct tm_planner_job){.gpus = 8, .milli = 8000, .remaining_ms = H, .node = -1};
    in.jobs = js;
    in.njobs = 3;
    in.params.spot = false;
    /* each launch: $32/h x (180 s + 1 h) = $33.60 */
    in.budget = (struct tm_planner_budget){.active = true, .hard = true, .cap_uusd = 200000000,
                                        .spent_uusd = 100000000, .committed_uusd = 30000000};
    /* 100 + 30 + 33.6 + 33.6 = 197.2 <= 200; the third would be 230.8 */
    assert_int_equal(tm_planner_run(&in, &r), 0);
    assert_int_equal(count(&r, TM_PLANNER_LAUNCH), 2);
    assert_int_equal(count(&r, TM_PLANNER_REFUSE), 1);
    a = first(&r, TM_PLANNER_REFUSE);
    assert_int_equal(a->cost_uusd, 33600000);
    assert_non_null(strstr(a->reason, "hard cap"));
    assert_non_null(strstr(a->reason, "spent 100.00 + committed 30.00 + launches 67.20"));
    assert_non_null(strstr(a->reason, "= 230.80 > cap 200.00 USD"));
    assert_int_equal(r.actions[r.nactions - 1].kind, TM_PLANNER_REFUSE);
    tm_planner_result_release(&r);
    /* exactly at the cap is allowed */
    in.budget.cap_uusd = 100000000 + 30000000 + 3 * 33600000;
    assert_int_equal(tm_planner_run(&in, &r), 0);
    assert_int_equal(count(&r, TM_PLANNER_LAUNCH), 3);
    assert_int_equal(count(&r, TM_PLANNER_REFUSE), 0);
    tm_planner_result_release(&r);
    /* a soft cap launches all three and warns once */
    in.budget.hard = false;
    in.budget.cap_uusd = 200000000;
    in.budget.warn_at = 0.8;
    assert_int_equal(tm_planner_run(&in, &r), 0);
    assert_int_equal(count(&r, TM_PLANNER_LAUNCH), 3);
    assert_int_equal(count(&r, TM_PLANNER_WARN), 1);
    tm_planner_result_release(&r);
    in.budget.warned = true;
    assert_int_equal(tm_planner_run(&in, &r), 0);
    assert_int_equal(count(&r, TM_PLANNER_WARN), 0);
    tm_planner_result_release(&r);
}

/* With per-zone spot hazards (the elastic replay's --hazards), a spot
 * launch goes to the zone of lowest hazard; a shortage there falls back to
 * the next; on-demand launches keep table order. */
static void test_zone_by_hazard(void **state)
{
    struct tm_price_table t;
    struct tm_planner_input in;
    struct tm_planner_result r = {0};
    struct tm_planner_job j = {.gpus = 4, .milli = 4000, .preemptible = true, .remaining_ms = H, .node = -1};
    struct tm_planner_shortage sh[1];
    double hz[4 * 2];
    const struct tm_planner_action *a;
    (void)state;
    sizes(&t, false);
    for (int k = 0; k < 8; k++)
        hz[k] = k % 2 == 0 ? 0.7 : 0.3; /* zone a 0.7/h, zone b 0.3/h */
    base_input(&in, &t, 100 * S);
    in.jobs = &j;
    in.njobs = 1;
    in.shortages = sh;
    in.spot_zone_hazard = hz;
    assert_int_equal(tm_planner_run(&in, &r), 0);
    a = first(&r, TM_PLANNER_LAUNCH);
    assert_non_null(a);
    assert_true(a->spot);
    assert_int_equal(a->zone, 1);
    assert_null(strstr(a->reason, "other zone"));
    tm_planner_result_release(&r);
    /* b short: a, as a fallback */
    sh[0] = (struct tm_planner_shortage){2, 1, true, 200 * S};
    in.nshortages = 1;
    assert_int_equal(tm_planner_run(&in, &r), 0);
    a = first(&r, TM_PLANNER_LAUNCH);
    assert_int_equal(a->zone, 0);
    assert_non_null(strstr(a->reason, "other zone"));
    tm_planner_result_release(&r);
    /* on-demand work: table order, hazards do not apply */
    in.nshortages = 0;
    j.preemptible = false;
    assert_int_equal(tm_planner_run(&in, &r), 0);
    a = first(&r, TM_PLANNER_LAUNCH);
    assert_false(a->spot);
    assert_int_equal(a->zone, 0);
    tm_planner_result_release(&r);
}

/* Capacity shortage falls back in the documented order: other zone, other
 * type, then on-demand for preemptible work if the pool allows. */
static void test_fallback_order(void **state)
{
    struct tm_price_table t;
    struct tm_planner_input in;
    struct tm_planner_result r = {0};
    struct tm_planner_job j = {.gpus = 4, .milli = 4000, .preemptible = true, .remaining_ms = H, .node = -1};
    struct tm_planner_shortage sh[8];
    const struct tm_planner_action *a;
    (void)state;
    sizes(&t, false);
    base_input(&in, &t, 100 * S);
    in.jobs = &j;
    in.njobs = 1;
    in.shortages = sh;
    /* nothing short: g4 spot in zone a */
    assert_int_equal(tm_planner_run(&in, &r), 0);
    a = first(&r, TM_PLANNER_LAUNCH);
    assert_non_null(a);
    assert_string_equal(t.types[a->type].name, "g4");
    assert_true(a->spot);
    assert_int_equal(a->zone, 0);
    tm_planner_result_release(&r);
    /* g4 spot short in a: zone b */
    sh[0] = (struct tm_planner_shortage){3 - 1, 0, true, 200 * S};
    in.nshortages = 1;
    assert_int_equal(tm_planner_run(&in, &r), 0);
    a = first(&r, TM_PLANNER_LAUNCH);
    assert_string_equal(t.types[a->type].name, "g4");
    assert_int_equal(a->zone, 1);
    assert_non_null(strstr(a->reason, "other zone"));
    tm_planner_result_release(&r);
    /* g4 spot short in both: another type (g8 holds 4 GPUs) */
    sh[1] = (struct tm_planner_shortage){2, 1, true, 200 * S};
    in.nshortages = 2;
    assert_int_equal(tm_planner_run(&in, &r), 0);
    a = first(&r, TM_PLANNER_LAUNCH);
    assert_string_equal(t.types[a->type].name, "g8");
    assert_true(a->spot);
    assert_false(a->od_fallback);
    assert_non_null(strstr(a->reason, "other type"));
    tm_planner_result_release(&r);
    /* every spot type that fits short everywhere: on-demand */
    sh[2] = (struct tm_planner_shortage){3, 0, true, 200 * S};
    sh[3] = (struct tm_planner_shortage){3, 1, true, 200 * S};
    in.nshortages = 4;
    assert_int_equal(tm_planner_run(&in, &r), 0);
    a = first(&r, TM_PLANNER_LAUNCH);
    assert_string_equal(t.types[a->type].name, "g4");
    assert_false(a->spot);
    assert_true(a->od_fallback);
    assert_non_null(strstr(a->reason, "fallback: on-demand"));
    tm_planner_result_release(&r);
    /* ... only if the pool allows it */
    in.params.od_fallback = false;
    assert_int_equal(tm_planner_run(&in, &r), 0);
    assert_int_equal(count(&r, TM_PLANNER_LAUNCH), 0);
    assert_int_equal(count(&r, TM_PLANNER_REFUSE), 1);
    tm_planner_result_release(&r);
    /* shortages are remembered only for a while */
    in.params.od_fallback = true;
    in.now_ms = 200 * S;
    assert_int_equal(tm_planner_run(&in, &r), 0);
    a = first(&r, TM_PLANNER_LAUNCH);
    assert_string_equal(t.types[a->type].name, "g4");
    assert_true(a->spot);
    assert_int_equal(a->zone, 0);
    tm_planner_result_release(&r);
    /* non-preemptible work never goes to spot */
    j.preemptible = false;
    assert_int_equal(tm_planner_run(&in, &r), 0);
    assert_false(first(&r, TM_PLANNER_LAUNCH)->spot);
    tm_planner_result_release(&r);
}

/* Substitution happens only when it pays. */
static void test_substitution_pays(void **state)
{
    struct tm_price_table t;
    struct tm_planner_input in;
    struct tm_planner_result r = {0};
    struct tm_planner_node n;
    struct tm_planner_job j = {.gpus = 8, .milli = 8000, .preemptible = true, .running = true,
                            .node = 0, .remaining_ms = 10 * H};
    (void)state;
    sizes(&t, true);
    base_input(&in, &t, 0);
    n = node(0, false, 8000, 0);
    n.only_preemptible = true;
    n.movable = true;
    n.busy_until_ms = 10 * H;
    in.nodes = &n;
    in.nnodes = 1;
    in.jobs = &j;
    in.njobs = 1;
    /* 10 h left: saving (32 - 11.2) x ~9.9 h >> moving */
    assert_int_equal(tm_planner_run(&in, &r), 0);
    assert_int_equal(count(&r, TM_PLANNER_SUBSTITUTE), 1);
    assert_true(first(&r, TM_PLANNER_SUBSTITUTE)->spot);
    tm_planner_result_release(&r);
    /* 5 minutes left: the move costs more than it saves */
    n.busy_until_ms = 5 * 60 * S;
    assert_int_equal(tm_planner_run(&in, &r), 0);
    assert_int_equal(count(&r, TM_PLANNER_SUBSTITUTE), 0);
    tm_planner_result_release(&r);
    /* break-even: saving (20.8 $/h) x (left - 240 s) vs spot boot (0.56 $)
     * + checkpoint of 8 GPUs for 60 s (0.533 $): pays from about 429 s */
    n.busy_until_ms = 420 * S;
    assert_int_equal(tm_planner_run(&in, &r), 0);
    assert_int_equal(count(&r, TM_PLANNER_SUBSTITUTE), 0);
    tm_planner_result_release(&r);
    n.busy_until_ms = 440 * S;
    assert_int_equal(tm_planner_run(&in, &r), 0);
    assert_int_equal(count(&r, TM_PLANNER_SUBSTITUTE), 1);
    tm_planner_result_release(&r);
    /* non-preemptible work on it, or work that cannot checkpoint: never */
    n.busy_until_ms = 10 * H;
    n.only_preemptible = false;
    assert_int_equal(tm_planner_run(&in, &r), 0);
    assert_int_equal(count(&r, TM_PLANNER_SUBSTITUTE), 0);
    tm_planner_result_release(&r);
    n.only_preemptible = true;
    n.movable = false;
    assert_int_equal(tm_planner_run(&in, &r), 0);
    assert_int_equal(count(&r, TM_PLANNER_SUBSTITUTE), 0);
    tm_planner_result_release(&r);
    /* spot off: never */
    n.movable = true;
    in.params.spot = false;
    assert_int_equal(tm_planner_run(&in, &r), 0);
    assert_int_equal(count(&r, TM_PLANNER_SUBSTITUTE), 0);
    tm_planner_result_release(&r);
}

/* A deadline job waits for spot and switches to on-demand at the latest
 * safe tick, and then meets its deadline. */
static void test_deadline_latest_safe_switch(void **state)
{
    struct tm_price_table t;
    struct tm_planner_input in;
    const int64_t deadline = 10 * H, work = 8 * H + 17 * S;
    const int64_t sw = tm_planner_deadline_switch_ms(deadline, work, 180 * S, 30 * S);
    int64_t switched = -1;
    struct tm_planner_shortage sh[2] = {{0, 0, true, 100 * H}, {0, 1, true, 100 * H}};
    (void)state;
    sizes(&t, true);
    for (int64_t now = 0; now < deadline && switched < 0; now += 30 * S) {
        struct tm_planner_job j = {.gpus = 8, .milli = 8000, .preemptible = true, .node = -1,
                                .remaining_ms = work, .deadline_ms = deadline};
        struct tm_planner_result r = {0};
        base_input(&in, &t, now);
        in.jobs = &j;
        in.njobs = 1;
        in.shortages = sh;   /* spot is short all along */
        in.nshortages = 2;
        in.params.od_fallback = false;
        assert_int_equal(tm_planner_run(&in, &r), 0);
        if (count(&r, TM_PLANNER_DEADLINE_OD)) {
            const struct tm_planner_action *a = first(&r, TM_PLANNER_LAUNCH);
            switched = now;
            assert_non_null(a);
            assert_false(a->spot);   /* the on-demand node for it */
            assert_non_null(strstr(first(&r, TM_PLANNER_DEADLINE_OD)->reason, "would miss"));
        } else {
            assert_int_equal(count(&r, TM_PLANNER_LAUNCH), 0); /* waits for spot */
        }
        tm_planner_result_release(&r);
    }
    assert_true(switched >= 0);
    assert_true(switched <= sw);          /* safe */
    assert_true(switched + 30 * S > sw);  /* and the latest tick that is */
    assert_true(switched + 180 * S + 30 * S + work <= deadline);
}

/* Idle nodes go after their grace, within the disruption budget and the
 * pool minimum. */
static void test_release_limits(void **state)
{
    struct tm_price_table t;
    struct tm_planner_input in;
    struct tm_planner_result r = {0};
    struct tm_planner_node n[10];
    (void)state;
    sizes(&t, true);
    base_input(&in, &t, H);
    for (int k = 0; k < 10; k++)
        n[k] = node(0, false, 0, H - 60 * S);
    n[9].idle_since_ms = H - 10 * S; /* still within its grace */
    in.nodes = n;
    in.nnodes = 10;
    assert_int_equal(tm_planner_run(&in, &r), 0);
    assert_int_equal(count(&r, TM_PLANNER_TERMINATE), 9);
    tm_planner_result_release(&r);
    in.params.min_nodes[0] = 4;
    assert_int_equal(tm_planner_run(&in, &r), 0);
    assert_int_equal(count(&r, TM_PLANNER_TERMINATE), 6);
    tm_planner_result_release(&r);
    /* Below the minimum with no work: launches flagged as the minimum's,
     * so a caller that keeps minimums per pool itself can skip them. */
    in.nnodes = 2;
    assert_int_equal(tm_planner_run(&in, &r), 0);
    assert_int_equal(count(&r, TM_PLANNER_LAUNCH), 2);
    for (size_t k = 0; k < r.nactions; k++)
        if (r.actions[k].kind == TM_PLANNER_LAUNCH)
            assert_true(r.actions[k].pool_minimum && !r.actions[k].od_fallback);
    tm_planner_result_release(&r);
    in.nnodes = 10;
    in.params.min_nodes[0] = 0;
    in.params.disruption_nodes = 1;
    in.params.disruption_pct = 0.2;   /* 20% of 10 = 2 per interval */
    assert_int_equal(tm_planner_run(&in, &r), 0);
    assert_int_equal(count(&r, TM_PLANNER_TERMINATE), 2);
    tm_planner_result_release(&r);
    in.params.recent_terminations = 2;
    assert_int_equal(tm_planner_run(&in, &r), 0);
    assert_int_equal(count(&r, TM_PLANNER_TERMINATE), 0);
    tm_planner_result_release(&r);
}

/* Consolidation: a node whose checkpointable jobs fit elsewhere is emptied. */
static void test_consolidate(void **state)
{
    struct tm_price_table t;
    struct tm_planner_input in;
    struct tm_planner_result r = {0};
    struct tm_planner_node n[2];
    struct tm_planner_job j[2];
    (void)state;
    sizes(&t, true);
    base_input(&in, &t, H);
    n[0] = node(0, false, 6000, 0);
    n[0].free_whole = 2;
    n[0].busy_until_ms = 5 * H;
    n[1] = node(0, false, 1000, 0);
    n[1].free_whole = 7;
    n[1].movable = true;
    n[1].only_preemptible = true;
    n[1].busy_until_ms = 5 * H;
    j[0] = (struct tm_planner_job){.gpus = 6, .milli = 6000, .running = true, .node = 0, .remaining_ms = 4 * H};
    j[1] = (struct tm_planner_job){.gpus = 1, .milli = 1000, .preemptible = true, .running = true,
                                .node = 1, .remaining_ms = 4 * H};
    in.nodes = n;
    in.nnodes = 2;
    in.jobs = j;
    in.njobs = 2;
    in.params.spot = false;
    in.params.idle_grace_ms = 600 * S;
    assert_int_equal(tm_planner_run(&in, &r), 0);
    assert_int_equal(count(&r, TM_PLANNER_MOVE), 1);
    assert_int_equal(first(&r, TM_PLANNER_MOVE)->node, 1);
    tm_planner_result_release(&r);
    /* no room elsewhere: no move */
    n[0].used_milli = 8000;
    n[0].free_whole = 0;
    assert_int_equal(tm_planner_run(&in, &r), 0);
    assert_int_equal(count(&r, TM_PLANNER_MOVE), 0);
    tm_planner_result_release(&r);
}

/* CPU and memory count: a 1-GPU job asking 12 CPUs does not fit on an
 * 8-GPU node with 7 GPUs free but only 6 CPUs left, so it gets its own
 * node (the scheduler could not place it there); asking no CPU it fits;
 * asking 20 CPUs it gets the smallest type with that many (2 GPUs). */
static void test_cpu_memory_room(void **state)
{
    struct tm_price_table t;
    struct tm_planner_input in;
    struct tm_planner_result r = {0};
    struct tm_planner_node n = node(3, false, 1000, 0);
    struct tm_planner_job j = {.gpus = 1, .milli = 1000, .remaining_ms = H, .node = -1,
                            .cpu_milli = 12000, .memory_mib = 16384};
    (void)state;
    sizes(&t, false);
    base_input(&in, &t, H);
    n.free_whole = 7;
    n.used_cpu_milli = 90000; /* of 96000 */
    n.used_memory_mib = 16384;
    in.nodes = &n;
    in.nnodes = 1;
    in.jobs = &j;
    in.njobs = 1;
    assert_int_equal(tm_planner_run(&in, &r), 0);
    assert_int_equal(count(&r, TM_PLANNER_LAUNCH), 1);
    assert_string_equal(t.types[first(&r, TM_PLANNER_LAUNCH)->type].name, "g1");
    tm_planner_result_release(&r);
    j.cpu_milli = 0;
    assert_int_equal(tm_planner_run(&in, &r), 0);
    assert_int_equal(count(&r, TM_PLANNER_LAUNCH), 0);
    tm_planner_result_release(&r);
    j.cpu_milli = 20000;
    assert_int_equal(tm_planner_run(&in, &r), 0);
    assert_int_equal(count(&r, TM_PLANNER_LAUNCH), 1);
    assert_string_equal(t.types[first(&r, TM_PLANNER_LAUNCH)->type].name, "g2");
    tm_planner_result_release(&r);
    /* more CPU than any type has: refused with the reason, nothing launched */
    j.cpu_milli = 200000;
    assert_int_equal(tm_planner_run(&in, &r), 0);
    assert_int_equal(count(&r, TM_PLANNER_LAUNCH), 0);
    assert_int_equal(count(&r, TM_PLANNER_REFUSE), 1);
    assert_non_null(strstr(first(&r, TM_PLANNER_REFUSE)->reason, "CPU or memory"));
    tm_planner_result_release(&r);
}

/* drain_oversized: an 8-GPU node running one 1-GPU job is drained (its
 * work fits a 1-GPU type, an eighth of it); one running 5 GPUs is not;
 * one whose job asks 20 CPUs is not (that needs a 2-GPU type); with
 * 8-GPU nodes only nothing is oversized; off, nothing is drained. */
static void test_drain_oversized(void **state)
{
    struct tm_price_table t;
    struct tm_planner_input in;
    struct tm_planner_result r = {0};
    struct tm_planner_node n[2];
    (void)state;
    sizes(&t, false);
    base_input(&in, &t, H);
    n[0] = node(3, false, 1000, 0);
    n[0].free_whole = 7;
    n[0].used_cpu_milli = 12000;
    n[1] = node(3, false, 5000, 0);
    n[1].free_whole = 3;
    n[1].jobs = 3;
    in.nodes = n;
    in.nnodes = 2;
    in.params.drain_oversized = true;
    assert_int_equal(tm_planner_run(&in, &r), 0);
    assert_int_equal(count(&r, TM_PLANNER_DRAIN), 1);
    assert_int_equal(first(&r, TM_PLANNER_DRAIN)->node, 0);
    assert_non_null(strstr(first(&r, TM_PLANNER_DRAIN)->reason, "1-GPU type"));
    assert_int_equal(count(&r, TM_PLANNER_TERMINATE), 0); /* its job still runs */
    tm_planner_result_release(&r);
    n[0].used_cpu_milli = 20000;
    assert_int_equal(tm_planner_run(&in, &r), 0);
    assert_int_equal(count(&r, TM_PLANNER_DRAIN), 0);
    tm_planner_result_release(&r);
    n[0].used_cpu_milli = 12000;
    in.params.drain_oversized = false;
    assert_int_equal(tm_planner_run(&in, &r), 0);
    assert_int_equal(count(&r, TM_PLANNER_DRAIN), 0);
    tm_planner_result_release(&r);
    sizes(&t, true);
    n[0].type = n[1].type = 0;
    in.params.drain_oversized = true;
    assert_int_equal(tm_planner_run(&in, &r), 0);
    assert_int_equal(count(&r, TM_PLANNER_DRAIN), 0);
    tm_planner_result_release(&r);
}

/* drain_oversized keeps the forecast in small nodes: past the grace an
 * idle 8-GPU node goes even though the forecast wants 16 GPUs, an idle
 * 1-GPU node stays for it; without the option both stay. */
static void test_idle_large_released(void **state)
{
    struct tm_price_table t;
    struct tm_planner_input in;
    struct tm_planner_result r = {0};
    struct tm_planner_node n[2];
    (void)state;
    sizes(&t, false);
    base_input(&in, &t, H);
    n[0] = node(3, false, 0, 0);
    n[0].free_whole = 8;
    n[1] = node(0, false, 0, 0);
    n[1].free_whole = 1;
    in.nodes = n;
    in.nnodes = 2;
    in.keep_gpus[0] = 16;
    in.params.drain_oversized = true;
    assert_int_equal(tm_planner_run(&in, &r), 0);
    assert_int_equal(count(&r, TM_PLANNER_TERMINATE), 1);
    assert_int_equal(first(&r, TM_PLANNER_TERMINATE)->node, 0);
    assert_non_null(strstr(first(&r, TM_PLANNER_TERMINATE)->reason, "smallest type"));
    tm_planner_result_release(&r);
    in.params.drain_oversized = false;
    assert_int_equal(tm_planner_run(&in, &r), 0);
    assert_int_equal(count(&r, TM_PLANNER_TERMINATE), 0);
    tm_planner_result_release(&r);
}

/* A drained node: its room takes no queued work (a launch instead), and
 * once empty it goes at once, whatever the grace and the forecast. */
static void test_cordoned_node(void **state)
{
    struct tm_price_table t;
    struct tm_planner_input in;
    struct tm_planner_result r = {0};
    struct tm_planner_node n = node(0, false, 1000, 0);
    struct tm_planner_job j = {.gpus = 1, .milli = 1000, .remaining_ms = H, .node = -1};
    (void)state;
    sizes(&t, true);
    base_input(&in, &t, H);
    n.free_whole = 7;
    n.cordoned = true;
    in.nodes = &n;
    in.nnodes = 1;
    in.jobs = &j;
    in.njobs = 1;
    assert_int_equal(tm_planner_run(&in, &r), 0);
    assert_int_equal(count(&r, TM_PLANNER_LAUNCH), 1);
    tm_planner_result_release(&r);
    n.cordoned = false;
    assert_int_equal(tm_planner_run(&in, &r), 0);
    assert_int_equal(count(&r, TM_PLANNER_LAUNCH), 0);
    tm_planner_result_release(&r);
    /* empty and drained a moment ago, forecast wants 16 GPUs: released */
    n = node(0, false, 0, H);
    n.free_whole = 8;
    n.cordoned = true;
    in.njobs = 0;
    in.keep_gpus[0] = 16;
    assert_int_equal(tm_planner_run(&in, &r), 0);
    assert_int_equal(count(&r, TM_PLANNER_TERMINATE), 1);
    assert_string_equal(first(&r, TM_PLANNER_TERMINATE)->reason, "drained and empty");
    tm_planner_result_release(&r);
    /* not drained: the grace and the forecast keep it */
    n.cordoned = false;
    assert_int_equal(tm_planner_run(&in, &r), 0);
    assert_int_equal(count(&r, TM_PLANNER_TERMINATE), 0);
    tm_planner_result_release(&r);
}

/* keep_max_ms: the forecast keeps an idle node for at most that long.  An
 * 8-GPU node idle for 170 s with a forecast of 8 GPUs is kept (grace 30 s
 * is past); idle 180 s with keep_max_ms 180 s it goes, saying why; with
 * keep_max_ms 0 (as before) the forecast keeps it for ever. */
static void test_keep_max(void **state)
{
    struct tm_price_table t;
    struct tm_planner_input in;
    struct tm_planner_result r = {0};
    struct tm_planner_node n = node(0, false, 0, 0);
    (void)state;
    sizes(&t, true);
    n.free_whole = 8;
    base_input(&in, &t, 170 * S);
    in.params.spot = false;
    in.params.keep_max_ms = 180 * S;
    in.keep_gpus[0] = 8;
    in.nodes = &n;
    in.nnodes = 1;
    assert_int_equal(tm_planner_run(&in, &r), 0);
    assert_int_equal(count(&r, TM_PLANNER_TERMINATE), 0);
    tm_planner_result_release(&r);
    in.now_ms = 180 * S;
    assert_int_equal(tm_planner_run(&in, &r), 0);
    assert_int_equal(count(&r, TM_PLANNER_TERMINATE), 1);
    assert_non_null(strstr(first(&r, TM_PLANNER_TERMINATE)->reason, "kept for the forecast (8.0 GPUs)"));
    tm_planner_result_release(&r);
    /* the pool minimum still holds it */
    in.params.min_nodes[0] = 1;
    assert_int_equal(tm_planner_run(&in, &r), 0);
    assert_int_equal(count(&r, TM_PLANNER_TERMINATE), 0);
    tm_planner_result_release(&r);
    in.params.min_nodes[0] = 0;
    in.params.keep_max_ms = 0;
    in.now_ms = 100 * H;
    assert_int_equal(tm_planner_run(&in, &r), 0);
    assert_int_equal(count(&r, TM_PLANNER_TERMINATE), 0);
    tm_planner_result_release(&r);
}

/* A share fits a node on one GPU only.  A 2-GPU node holds two 0.5 shares,
 * one per GPU: 1000 milli free in total, 500 on each GPU.  A queued 0.6
 * share fits neither GPU: with share_room_known the planner launches for
 * it; without (the old model, total free milli) it sees room and does not,
 * and the job would wait for a share to end. */
static void test_share_room(void **state)
{
    struct tm_price_table t;
    struct tm_planner_input in;
    struct tm_planner_result r = {0};
    struct tm_planner_node n = node(1, false, 1000, 0);
    struct tm_planner_job j = {.gpus = 0, .milli = 600, .remaining_ms = H, .node = -1};
    (void)state;
    sizes(&t, false);
    base_input(&in, &t, H);
    in.params.spot = false;
    n.jobs = 2;
    n.free_whole = 0;
    n.share_free_milli = 500;
    n.share_room_known = true;
    in.nodes = &n;
    in.nnodes = 1;
    in.jobs = &j;
    in.njobs = 1;
    assert_int_equal(tm_planner_run(&in, &r), 0);
    assert_int_equal(count(&r, TM_PLANNER_LAUNCH), 1);
    assert_string_equal(t.types[first(&r, TM_PLANNER_LAUNCH)->type].name, "g1");
    tm_planner_result_release(&r);
    /* 0.5 fits the room left on one GPU: no launch */
    j.milli = 500;
    assert_int_equal(tm_planner_run(&in, &r), 0);
    assert_int_equal(count(&r, TM_PLANNER_LAUNCH), 0);
    tm_planner_result_release(&r);
    /* the old model where the caller does not say */
    j.milli = 600;
    n.share_room_known = false;
    assert_int_equal(tm_planner_run(&in, &r), 0);
    assert_int_equal(count(&r, TM_PLANNER_LAUNCH), 0);
    tm_planner_result_release(&r);
}

/* wait_for_ends: a queued 4-GPU job, an 8-GPU node whose one job (8 GPUs)
 * is expected to end in 60 s, within a boot (180 s): the job waits for
 * that room instead of a launch.  A job ending in 10 minutes, a deadline,
 * or the option off: the launch. */
static void test_wait_for_ends(void **state)
{
    struct tm_price_table t;
    struct tm_planner_input in;
    struct tm_planner_result r = {0};
    struct tm_planner_node n = node(0, false, 8000, 0);
    struct tm_planner_job j[2] = {
        {.id = 1, .gpus = 8, .milli = 8000, .running = true, .node = 0, .remaining_ms = 60 * S},
        {.id = 2, .gpus = 4, .milli = 4000, .node = -1, .remaining_ms = H},
    };
    (void)state;
    sizes(&t, true);
    base_input(&in, &t, H);
    in.params.spot = false;
    in.nodes = &n;
    in.nnodes = 1;
    in.jobs = j;
    in.njobs = 2;
    assert_int_equal(tm_planner_run(&in, &r), 0);
    assert_int_equal(count(&r, TM_PLANNER_LAUNCH), 1);
    tm_planner_result_release(&r);
    in.params.wait_for_ends = true;
    assert_int_equal(tm_planner_run(&in, &r), 0);
    assert_int_equal(count(&r, TM_PLANNER_LAUNCH), 0);
    tm_planner_result_release(&r);
    /* the room is counted once: a second queued job launches */
    {
        struct tm_planner_job j3[3] = {j[0], j[1], j[1]};
        j3[2].id = 3;
        in.jobs = j3;
        in.njobs = 3;
        assert_int_equal(tm_planner_run(&in, &r), 0);
        assert_int_equal(count(&r, TM_PLANNER_LAUNCH), 0); /* 4 + 4 fit the 8 freed */
        tm_planner_result_release(&r);
        j3[2].gpus = 5;
        j3[2].milli = 5000;
        assert_int_equal(tm_planner_run(&in, &r), 0);
        assert_int_equal(count(&r, TM_PLANNER_LAUNCH), 1);
        tm_planner_result_release(&r);
        in.jobs = j;
        in.njobs = 2;
    }
    j[0].remaining_ms = 600 * S;
    assert_int_equal(tm_planner_run(&in, &r), 0);
    assert_int_equal(count(&r, TM_PLANNER_LAUNCH), 1);
    tm_planner_result_release(&r);
    j[0].remaining_ms = 60 * S;
    j[1].deadline_ms = 3 * H;
    assert_int_equal(tm_planner_run(&in, &r), 0);
    assert_int_equal(count(&r, TM_PLANNER_LAUNCH), 1);
    tm_planner_result_release(&r);
}

/* An idle node past its grace that queued work fits is not released
 * under that work (with no grace the planner may see a node empty before
 * the scheduler has placed what fits it); without the work it goes. */
static void test_idle_kept_for_queued(void **state)
{
    struct tm_price_table t;
    struct tm_planner_input in;
    struct tm_planner_result r = {0};
    struct tm_planner_node n = node(0, false, 0, H - 60 * S);
    struct tm_planner_job j = {.id = 1, .gpus = 2, .milli = 2000, .node = -1, .remaining_ms = H};
    (void)state;
    sizes(&t, true);
    n.free_whole = 8;
    base_input(&in, &t, H);
    in.params.spot = false;
    in.params.idle_grace_ms = 0;
    in.nodes = &n;
    in.nnodes = 1;
    in.jobs = &j;
    in.njobs = 1;
    assert_int_equal(tm_planner_run(&in, &r), 0);
    assert_int_equal(count(&r, TM_PLANNER_TERMINATE), 0);
    assert_int_equal(count(&r, TM_PLANNER_LAUNCH), 0);
    tm_planner_result_release(&r);
    in.njobs = 0;
    assert_int_equal(tm_planner_run(&in, &r), 0);
    assert_int_equal(count(&r, TM_PLANNER_TERMINATE), 1);
    tm_planner_result_release(&r);
}

/* Spot short in every zone: queued preemptible work falls back to
 * on-demand, the forecast's spot headroom alone does not. */
static void test_headroom_no_od_fallback(void **state)
{
    struct tm_price_table t;
    struct tm_planner_input in;
    struct tm_planner_result r = {0};
    struct tm_planner_shortage sh[2] = {{0, 0, true, 10 * H}, {0, 1, true, 10 * H}};
    struct tm_planner_job j = {.id = 1, .gpus = 1, .milli = 1000, .preemptible = true, .node = -1,
                               .remaining_ms = H};
    (void)state;
    sizes(&t, true);
    base_input(&in, &t, H);
    in.shortages = sh;
    in.nshortages = 2;
    in.forecast_gpus[1] = 8;
    assert_int_equal(tm_planner_run(&in, &r), 0);
    assert_int_equal(count(&r, TM_PLANNER_LAUNCH), 0);
    tm_planner_result_release(&r);
    in.jobs = &j;
    in.njobs = 1;
    assert_int_equal(tm_planner_run(&in, &r), 0);
    assert_int_equal(count(&r, TM_PLANNER_LAUNCH), 1);
    assert_false(first(&r, TM_PLANNER_LAUNCH)->spot);
    assert_true(first(&r, TM_PLANNER_LAUNCH)->od_fallback);
    tm_planner_result_release(&r);
}

static void test_bad_input(void **state)
{
    struct tm_price_table t;
    struct tm_planner_input in;
    struct tm_planner_result r = {0};
    struct tm_planner_node n = node(7, false, 0, 0);
    (void)state;
    sizes(&t, true);
    base_input(&in, &t, 0);
    in.nodes = &n;
    in.nnodes = 1;
    assert_int_equal(tm_planner_run(&in, &r), TM_EINVAL);
    t.ntypes = 0;
    in.nnodes = 0;
    assert_int_equal(tm_planner_run(&in, &r), TM_EINVAL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_ramp_launches_ahead),
        cmocka_unit_test(test_sizing),
        cmocka_unit_test(test_oscillation_does_not_flap),
        cmocka_unit_test(test_hard_cap),
        cmocka_unit_test(test_fallback_order),
        cmocka_unit_test(test_zone_by_hazard),
        cmocka_unit_test(test_substitution_pays),
        cmocka_unit_test(test_deadline_latest_safe_switch),
        cmocka_unit_test(test_release_limits),
        cmocka_unit_test(test_consolidate),
        cmocka_unit_test(test_cpu_memory_room),
        cmocka_unit_test(test_drain_oversized),
        cmocka_unit_test(test_cordoned_node),
        cmocka_unit_test(test_idle_large_released),
        cmocka_unit_test(test_keep_max),
        cmocka_unit_test(test_share_room),
        cmocka_unit_test(test_wait_for_ends),
        cmocka_unit_test(test_idle_kept_for_queued),
        cmocka_unit_test(test_headroom_no_od_fallback),
        cmocka_unit_test(test_bad_input),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
