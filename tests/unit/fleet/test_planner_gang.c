/* tests/unit/fleet/test_planner_gang.c: gangs bought whole by the fleet
 * planner (controller/fleet/planner.c, run_gang_launches): known answers. */
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

/* Types g4 and g8 at $4/GPU-h on demand, $1.40 spot; zones a, b. */
static void table(struct tm_price_table *t)
{
    static const int g[] = {4, 8};
    memset(t, 0, sizeof(*t));
    for (int i = 0; i < 2; i++) {
        struct tm_price_type *ty = &t->types[t->ntypes++];
        snprintf(ty->name, sizeof(ty->name), "g%d", g[i]);
        ty->gpus = g[i];
        ty->on_demand_uusd_per_hour = 4000000LL * g[i];
        ty->spot_uusd_per_hour = 1400000LL * g[i];
    }
    snprintf(t->zones[0], sizeof(t->zones[0]), "a");
    snprintf(t->zones[1], sizeof(t->zones[1]), "b");
    t->nzones = 2;
}

static void input(struct tm_planner_input *in, const struct tm_price_table *t)
{
    memset(in, 0, sizeof(*in));
    in->now_ms = 1000 * S;
    in->prices = t;
    in->forecast_gpus[0] = in->forecast_gpus[1] = -1;
    in->keep_gpus[0] = in->keep_gpus[1] = -1;
    in->params.boot_ms = 180 * S;
    in->params.tick_ms = 30 * S;
    in->params.idle_grace_ms = 30 * S;
    in->params.max_nodes[0] = in->params.max_nodes[1] = 100;
    in->params.disruption_nodes = 100;
    in->params.launch_use_ms = 600 * S;
}

/* A queued gang of `n` members of `gpus` GPUs each (job id 7) at jobs[at..at+n). */
static size_t gang(struct tm_planner_job *jobs, size_t at, int n, int gpus)
{
    for (int m = 0; m < n; m++)
        jobs[at + (size_t)m] = (struct tm_planner_job){
            .id = 7, .gpus = gpus, .milli = gpus * 1000, .node = -1, .remaining_ms = 3600 * S,
            .gang = n};
    return at + (size_t)n;
}

static size_t count_kind(const struct tm_planner_result *r, enum tm_planner_kind k)
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

/* A gang of 3 x 4 GPUs on an empty fleet: one launch of 3 g4 on-demand in
 * zone a, costed for all three; a single 4-GPU job beside it gets its own
 * launch of one node, not a share of the gang's. */
static void test_gang_is_one_set_launch(void **state)
{
    struct tm_price_table t;
    struct tm_planner_input in;
    struct tm_planner_job jobs[4];
    struct tm_planner_result r = {0};
    (void)state;

    table(&t);
    input(&in, &t);
    size_t n = gang(jobs, 0, 3, 4);
    jobs[n++] = (struct tm_planner_job){.id = 9, .gpus = 4, .milli = 4000, .node = -1,
                                        .remaining_ms = 3600 * S};
    in.jobs = jobs;
    in.njobs = n;
    assert_int_equal(tm_planner_run(&in, &r), 0);
    assert_int_equal(count_kind(&r, TM_PLANNER_LAUNCH), 2);
    const struct tm_planner_action *x = first(&r, TM_PLANNER_LAUNCH);
    assert_non_null(x);
    assert_int_equal(x->count, 3);
    assert_int_equal(x->type, 0);     /* g4 holds a member at the lowest price */
    assert_int_equal(x->zone, 0);
    assert_false(x->spot);
    assert_int_equal(x->job, 0);
    /* 3 nodes x $16/h x (180 s boot + 3600 s) = $50.40 */
    assert_int_equal(x->cost_uusd, 3 * 16000000LL * 3780 / 3600);
    assert_non_null(strstr(x->reason, "gang: job 7 needs 3 nodes at once"));
    assert_int_equal(r.actions[1].count, 1);
    tm_planner_result_release(&r);
}

/* Zone a short for g4: the whole set goes to zone b in the same pass. */
static void test_gang_shortage_moves_whole_set(void **state)
{
    struct tm_price_table t;
    struct tm_planner_input in;
    struct tm_planner_job jobs[2];
    struct tm_planner_shortage sh[] = {{0, 0, false, 2000 * S}};
    struct tm_planner_result r = {0};
    (void)state;

    table(&t);
    input(&in, &t);
    in.jobs = jobs;
    in.njobs = gang(jobs, 0, 2, 4);
    in.shortages = sh;
    in.nshortages = 1;
    assert_int_equal(tm_planner_run(&in, &r), 0);
    assert_int_equal(count_kind(&r, TM_PLANNER_LAUNCH), 1);
    const struct tm_planner_action *x = first(&r, TM_PLANNER_LAUNCH);
    assert_int_equal(x->count, 2);
    assert_int_equal(x->type, 0);
    assert_int_equal(x->zone, 1);
    assert_non_null(strstr(x->reason, "fallback: other zone (short)"));
    tm_planner_result_release(&r);

    /* g4 short in both zones: g8 holds a member, the set moves whole. */
    struct tm_planner_shortage both[] = {{0, 0, false, 2000 * S}, {0, 1, false, 2000 * S}};
    in.shortages = both;
    in.nshortages = 2;
    assert_int_equal(tm_planner_run(&in, &r), 0);
    x = first(&r, TM_PLANNER_LAUNCH);
    assert_non_null(x);
    assert_int_equal(x->count, 2);
    assert_int_equal(x->type, 1);
    tm_planner_result_release(&r);
}

/* A pool with room for 2 more nodes and a gang of 3: refused whole, no
 * part bought. */
static void test_gang_not_bought_in_part(void **state)
{
    struct tm_price_table t;
    struct tm_planner_input in;
    struct tm_planner_job jobs[3];
    struct tm_planner_result r = {0};
    (void)state;

    table(&t);
    input(&in, &t);
    in.params.max_nodes[0] = 2;
    in.jobs = jobs;
    in.njobs = gang(jobs, 0, 3, 4);
    assert_int_equal(tm_planner_run(&in, &r), 0);
    assert_int_equal(count_kind(&r, TM_PLANNER_LAUNCH), 0);
    const struct tm_planner_action *x = first(&r, TM_PLANNER_REFUSE);
    assert_non_null(x);
    assert_non_null(strstr(x->reason, "not bought in part"));
    tm_planner_result_release(&r);
}

/* Members that fit the free room of ready nodes take it; only the rest
 * is bought, still as one set. */
static void test_gang_members_use_free_room(void **state)
{
    struct tm_price_table t;
    struct tm_planner_input in;
    struct tm_planner_job jobs[3];
    struct tm_planner_node nodes[1] = {{.type = 0, .ready = true, .free_whole = 4,
                                        .idle_since_ms = 990 * S}};
    struct tm_planner_result r = {0};
    (void)state;

    table(&t);
    input(&in, &t);
    in.nodes = nodes;
    in.nnodes = 1;
    in.jobs = jobs;
    in.njobs = gang(jobs, 0, 3, 4);
    assert_int_equal(tm_planner_run(&in, &r), 0);
    assert_int_equal(count_kind(&r, TM_PLANNER_LAUNCH), 1);
    assert_int_equal(first(&r, TM_PLANNER_LAUNCH)->count, 2);
    tm_planner_result_release(&r);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_gang_is_one_set_launch),
        cmocka_unit_test(test_gang_shortage_moves_whole_set),
        cmocka_unit_test(test_gang_not_bought_in_part),
        cmocka_unit_test(test_gang_members_use_free_room),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
