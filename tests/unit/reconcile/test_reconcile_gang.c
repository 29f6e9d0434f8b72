/*
 * tests/unit/reconcile/test_reconcile_gang.c: a queued gang through
 * tm_reconcile: its nodes requested as one set (reconcile/gang.c): one
 * request_node per node, all in one zone, member tokens of one stem, plan
 * launches grouped by that stem; a set no pool can take whole is refused
 * whole; a restart relaunches the set's rows together.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "controller/reconcile/reconcile.h"
#include "core/config.h"
#include "tests/lib/snap_fixture.h"

static const char config_yaml[] =
    SNAP_FIXTURE_YAML_HEAD("unit")
    "providers:\n"
    "  - name: sim\n"
    "    kind: sim\n"
    "    region: r1\n"
    "    boot_delay: 90s\n"
    "    instance_types:\n"
    "      - {name: sim.1x, gpus: 1, gpu_model: A100, cpu_milli: 12000, memory_mib: 120000,"
    "         on_demand_price: \"4.00\", spot_price: \"1.50\"}\n"
    SNAP_FIXTURE_YAML_SIM_8X
    "pools:\n"
    "  - {name: od8, provider: sim, zones: [z1, z2], instance_types: [sim.8x], gpu_model: A100,"
    "     gpus_per_node: 8, capacity_type: on_demand, min_nodes: 0, max_nodes: 3, idle_grace: 60s}\n";

#define NOW 1000000000

struct fixture {
    SNAP_FIXTURE_MEMBERS(8);
    SNAP_FIXTURE_PASS_MEMBERS;
    struct tm_live_shortage shortages[4];
    size_t nshortages;
};

static int setup(void **state)
{
    static struct fixture f;
    memset(&f, 0, sizeof(f));
    if (SNAP_FIXTURE_PASS_INIT(&f, config_yaml) < 0)
        return -1;
    *state = &f;
    return 0;
}

static int teardown(void **state)
{
    SNAP_FIXTURE_PASS_RELEASE((struct fixture *)*state);
    return 0;
}

static void run(struct fixture *f)
{
    struct tm_reconcile_input in = {.cfg = &f->cfg, .snap = &f->snap, .observed = &f->obs,
                                    .nobserved = 1, .now_ms = NOW, .policy = TM_POLICY_FIFO,
                                    .shortages = f->shortages, .nshortages = f->nshortages};
    tm_rc_plan_release(&f->plan);
    assert_int_equal(tm_reconcile(&in, &f->plan), 0);
}

static const char *str(const cJSON *a, const char *key)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(a, key);
    assert_true(cJSON_IsString(v));
    return v->valuestring;
}

static void add_gang(struct fixture *f, int64_t id, int nodes)
{
    struct tm_snap_job *j = &f->jobs[f->snap.njobs++];
    *j = (struct tm_snap_job){.id = id, .pool = -1, .gpus = 8, .gpu_milli = 1000, .nodes = nodes,
                              .state = TM_JOB_QUEUED, .estimate_ms = 3600000,
                              .submitted_ms = NOW - 1000};
    snprintf(j->team, sizeof(j->team), "t");
}

/* A gang of 3 on an empty fleet: three request_node ops in one zone whose
 * tokens share one stem, and three plan launches naming that stem. */
static void test_gang_requested_as_one_set(void **state)
{
    struct fixture *f = *state;
    add_gang(f, 1, 3);
    run(f);
    assert_int_equal(snap_fixture_count_op(f->plan.actions, "request_node"), 3);
    assert_int_equal(f->plan.nlaunches, 3);
    const char *zone = f->plan.launches[0].zone;
    assert_true(f->plan.launches[0].set[0] != '\0');
    for (int k = 0; k < 3; k++) {
        const struct tm_rc_plan_launch *l = &f->plan.launches[k];
        char stem[TM_ID_MAX];
        assert_string_equal(l->set, f->plan.launches[0].set);
        assert_string_equal(l->zone, zone);
        tm_launch_set_key(l->token, stem);
        assert_string_equal(stem, l->set);
        const cJSON *a = snap_fixture_nth_op(f->plan.actions, "request_node", k);
        assert_non_null(a);
        assert_string_equal(str(a, "token"), l->token);
        assert_non_null(strstr(str(a, "reason"), "launched as one set"));
        const cJSON *in = cJSON_GetObjectItemCaseSensitive(a, "inputs");
        assert_string_equal(str(in, "launch_set"), l->set);
    }
    /* distinct tokens */
    assert_string_not_equal(f->plan.launches[0].token, f->plan.launches[1].token);
    assert_string_not_equal(f->plan.launches[1].token, f->plan.launches[2].token);
}

/* z1 remembered short: the whole set goes to z2. */
static void test_gang_shortage_moves_set(void **state)
{
    struct fixture *f = *state;
    add_gang(f, 1, 2);
    struct tm_live_shortage *s = &f->shortages[f->nshortages++];
    snprintf(s->instance_type, sizeof(s->instance_type), "sim.8x");
    snprintf(s->zone, sizeof(s->zone), "z1");
    s->until_ms = NOW + 60000;
    run(f);
    assert_int_equal(f->plan.nlaunches, 2);
    assert_string_equal(f->plan.launches[0].zone, "z2");
    assert_string_equal(f->plan.launches[1].zone, "z2");
}

/* A gang of 4 where the pool holds at most 3: nothing requested at all. */
static void test_gang_too_big_refused_whole(void **state)
{
    struct fixture *f = *state;
    add_gang(f, 1, 4);
    run(f);
    assert_int_equal(snap_fixture_count_op(f->plan.actions, "request_node"), 0);
    assert_int_equal(f->plan.nlaunches, 0);
}

/* A restart finds the set's rows requested, no instance: relaunched with
 * the same tokens, still one set; a single node's row is not in a set. */
static void test_set_relaunched_together(void **state)
{
    struct fixture *f = *state;
    for (int k = 0; k < 2; k++) {
        struct tm_snap_node *n = &f->nodes[f->snap.nnodes++];
        *n = (struct tm_snap_node){.id = 10 + k, .pool = 0, .gpus = 8, .state = TM_NODE_REQUESTED,
                                   .requested_ms = NOW - 5000, .capacity = TM_CAPACITY_ON_DEMAND};
        tm_launch_member_token("unit-od8-999000-0", (unsigned)k, n->token);
        snprintf(n->instance_type, sizeof(n->instance_type), "sim.8x");
        snprintf(n->zone, sizeof(n->zone), "z2");
        snprintf(n->gpu_model, sizeof(n->gpu_model), "A100");
    }
    struct tm_snap_node *n = &f->nodes[f->snap.nnodes++];
    *n = (struct tm_snap_node){.id = 12, .pool = 0, .gpus = 8, .state = TM_NODE_REQUESTED,
                               .requested_ms = NOW - 5000, .capacity = TM_CAPACITY_ON_DEMAND};
    snprintf(n->token, sizeof(n->token), "unit-od8-999000-1");
    snprintf(n->instance_type, sizeof(n->instance_type), "sim.8x");
    snprintf(n->zone, sizeof(n->zone), "z1");
    f->obs.complete = true;
    run(f);
    assert_int_equal(f->plan.nlaunches, 3);
    assert_string_equal(f->plan.launches[0].set, "unit-od8-999000-0");
    assert_string_equal(f->plan.launches[1].set, "unit-od8-999000-0");
    assert_string_equal(f->plan.launches[2].set, "");
}

/* One member of a requested set listed running, the other not (its set
 * still in flight, or a crash in the middle of it): the listed one is not
 * adopted or marked ready alone, not an orphan either; both are launched
 * again as one set (the provider finds the first by its token). */
static void test_partial_set_not_adopted(void **state)
{
    struct fixture *f = *state;
    for (int k = 0; k < 2; k++) {
        struct tm_snap_node *n = &f->nodes[f->snap.nnodes++];
        *n = (struct tm_snap_node){.id = 10 + k, .pool = 0, .gpus = 8, .state = TM_NODE_REQUESTED,
                                   .requested_ms = NOW - 5000, .capacity = TM_CAPACITY_ON_DEMAND};
        tm_launch_member_token("unit-od8-999000-0", (unsigned)k, n->token);
        snprintf(n->instance_type, sizeof(n->instance_type), "sim.8x");
        snprintf(n->zone, sizeof(n->zone), "z2");
    }
    struct tm_instance *i = &f->inst[f->obs.n++];
    memset(i, 0, sizeof(*i));
    snprintf(i->id, sizeof(i->id), "i-10");
    snprintf(i->token, sizeof(i->token), "%s", f->nodes[0].token);
    snprintf(i->pool, sizeof(i->pool), "od8");
    i->state = TM_INSTANCE_RUNNING;
    f->obs.complete = true;
    run(f);
    assert_int_equal(snap_fixture_count_op(f->plan.actions, "node_ready"), 0);
    assert_int_equal(snap_fixture_count_op(f->plan.actions, "adopt"), 0);
    assert_int_equal(snap_fixture_count_op(f->plan.actions, "orphan"), 0);
    assert_int_equal(f->plan.nlaunches, 2);
    assert_string_equal(f->plan.launches[0].set, f->plan.launches[1].set);
    /* an instance carrying only the set's stem (made by CreateFleet, not yet
     * tagged with its member's token) is the set's, not an orphan */
    struct tm_instance *stem = &f->inst[f->obs.n++];
    memset(stem, 0, sizeof(*stem));
    snprintf(stem->id, sizeof(stem->id), "i-99");
    snprintf(stem->token, sizeof(stem->token), "unit-od8-999000-0");
    stem->state = TM_INSTANCE_RUNNING;
    run(f);
    assert_int_equal(snap_fixture_count_op(f->plan.actions, "orphan"), 0);
    f->obs.n--;
    /* the whole set listed: adopted and ready as usual */
    i = &f->inst[f->obs.n++];
    memset(i, 0, sizeof(*i));
    snprintf(i->id, sizeof(i->id), "i-11");
    snprintf(i->token, sizeof(i->token), "%s", f->nodes[1].token);
    snprintf(i->pool, sizeof(i->pool), "od8");
    i->state = TM_INSTANCE_RUNNING;
    run(f);
    assert_int_equal(snap_fixture_count_op(f->plan.actions, "node_ready"), 2);
    assert_int_equal(f->plan.nlaunches, 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_gang_requested_as_one_set, setup, teardown),
        cmocka_unit_test_setup_teardown(test_gang_shortage_moves_set, setup, teardown),
        cmocka_unit_test_setup_teardown(test_gang_too_big_refused_whole, setup, teardown),
        cmocka_unit_test_setup_teardown(test_set_relaunched_together, setup, teardown),
        cmocka_unit_test_setup_teardown(test_partial_set_not_adopted, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
