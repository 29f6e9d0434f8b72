/*
 * tests/unit/reconcile/test_reconcile_planner.c: the live tick's launches and releases
 * come from the planner (controller/fleet/planner.c) through tm_reconcile, with
 * known answers: launch ahead of a ramp, no flapping, the shortage fallback
 * order, spot and on-demand routing, each pool's min and max, and the zone
 * of lowest fitted spot hazard (a provider's spot_hazards table).
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

/* Two sizes (one pool each per capacity type) at the same $4 per GPU-hour
 * on demand; spot is cheaper per GPU
 * on the small one ($1.50) than on the large one ($1.25 a GPU, but $10 for
 * a 1-GPU job).  The spot side may fall back to on-demand. */
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
    "  - {name: od1, provider: sim, zones: [z1, z2], instance_types: [sim.1x], gpu_model: A100,"
    "     gpus_per_node: 1, capacity_type: on_demand, min_nodes: 0, max_nodes: 3, idle_grace: 60s}\n"
    "  - {name: od8, provider: sim, zones: [z1, z2], instance_types: [sim.8x], gpu_model: A100,"
    "     gpus_per_node: 8, capacity_type: on_demand, min_nodes: 0, max_nodes: 3, idle_grace: 60s}\n"
    "  - {name: spot1, provider: sim, zones: [z1, z2], instance_types: [sim.1x], gpu_model: A100,"
    "     gpus_per_node: 1, capacity_type: spot_then_on_demand, min_nodes: 0, max_nodes: 3,"
    "     idle_grace: 60s}\n"
    "  - {name: spot8, provider: sim, zones: [z1, z2], instance_types: [sim.8x], gpu_model: A100,"
    "     gpus_per_node: 8, capacity_type: spot_then_on_demand, min_nodes: 0, max_nodes: 3,"
    "     idle_grace: 60s}\n";

#define NOW 1000000000

struct fixture {
    SNAP_FIXTURE_MEMBERS(8);
    SNAP_FIXTURE_PASS_MEMBERS;
    struct tm_pool_forecast forecast[4];
    bool with_forecast;
    struct tm_live_shortage shortages[8];
    size_t nshortages;
};

static int setup(void **state)
{
    static struct fixture f;
    memset(&f, 0, sizeof(f));
    if (SNAP_FIXTURE_PASS_INIT(&f, config_yaml) < 0)
        return -1;
    for (int i = 0; i < 4; i++)
        f.forecast[i] = (struct tm_pool_forecast){-1, -1};
    *state = &f;
    return 0;
}

static int teardown(void **state)
{
    SNAP_FIXTURE_PASS_RELEASE((struct fixture *)*state);
    return 0;
}

/* A ready 8-GPU node of pool od8 (on demand), listed running. */
static struct tm_snap_node *add_ready_node(struct fixture *f, int64_t id)
{
    struct tm_snap_node *n = &f->nodes[f->snap.nnodes++];
    *n = (struct tm_snap_node){.id = id, .pool = 1, .gpus = 8, .cpu_milli = 96000,
                               .memory_mib = 1000000, .state = TM_NODE_READY,
                               .requested_ms = NOW - 3600000, .capacity = TM_CAPACITY_ON_DEMAND};
    snprintf(n->token, sizeof(n->token), "tok-%" PRId64, id);
    snprintf(n->instance_id, sizeof(n->instance_id), "i-%" PRId64, id);
    snprintf(n->instance_type, sizeof(n->instance_type), "sim.8x");
    snprintf(n->zone, sizeof(n->zone), "z1");
    snprintf(n->gpu_model, sizeof(n->gpu_model), "A100");
    struct tm_instance *i = &f->inst[f->obs.n++];
    memset(i, 0, sizeof(*i));
    snprintf(i->id, sizeof(i->id), "i-%" PRId64, id);
    snprintf(i->token, sizeof(i->token), "tok-%" PRId64, id);
    snprintf(i->pool, sizeof(i->pool), "od8");
    i->state = TM_INSTANCE_RUNNING;
    return n;
}

static struct tm_snap_job *add_job(struct fixture *f, int64_t id, int gpus, bool preemptible)
{
    struct tm_snap_job *j = &f->jobs[f->snap.njobs++];
    *j = (struct tm_snap_job){.id = id, .pool = -1, .gpus = gpus, .gpu_milli = 1000, .nodes = 1,
                              .preemptible = preemptible, .state = TM_JOB_QUEUED,
                              .estimate_ms = 3600000, .submitted_ms = NOW - 1000 * id};
    snprintf(j->team, sizeof(j->team), "t");
    return j;
}

/* A running job holding all 8 GPUs of node id. */
static void fill_node(struct fixture *f, int64_t job, int64_t node)
{
    struct tm_snap_job *j = add_job(f, job, 8, false);
    j->state = TM_JOB_RUNNING;
    j->node_id = node;
    j->started_ms = NOW - 600000;
    f->allocs[f->snap.nallocs++] = (struct tm_snap_alloc){.job_id = job, .node_id = node,
                                                          .gpu_mask = 0xff, .gpu_milli = 1000};
}

static void run(struct fixture *f)
{
    struct tm_reconcile_input in = {.cfg = &f->cfg, .snap = &f->snap, .observed = &f->obs,
                                    .nobserved = 1, .now_ms = NOW, .policy = TM_POLICY_FIFO,
                                    .forecast = f->with_forecast ? f->forecast : NULL,
                                    .shortages = f->shortages, .nshortages = f->nshortages};
    tm_rc_plan_release(&f->plan);
    assert_int_equal(tm_reconcile(&in, &f->plan), 0);
}

static int count_op(const struct fixture *f, const char *op)
{
    return snap_fixture_count_op(f->plan.actions, op);
}

static const cJSON *nth_op(const struct fixture *f, const char *op, int k)
{
    const cJSON *a = snap_fixture_nth_op(f->plan.actions, op, k);
    if (!a)
        fail_msg("no %s action in the plan", op);
    return a;
}

static const char *str(const cJSON *a, const char *key)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(a, key);
    assert_true(cJSON_IsString(v));
    return v->valuestring;
}

static void test_ramp_launches_before_the_queue_forms(void **state)
{
    struct fixture *f = *state;
    add_ready_node(f, 1);
    fill_node(f, 100, 1);
    /* No queue: without a forecast nothing is asked. */
    run(f);
    assert_int_equal(count_op(f, "request_node"), 0);
    /* Demand rising to 16 GPUs one boot ahead: one more 8-GPU node now. */
    f->with_forecast = true;
    f->forecast[1] = (struct tm_pool_forecast){16, 18};
    run(f);
    assert_int_equal(count_op(f, "request_node"), 1);
    const cJSON *a = nth_op(f, "request_node", 0);
    assert_string_equal(str(a, "pool"), "od8");
    assert_string_equal(str(a, "instance_type"), "sim.8x");
    assert_string_equal(str(a, "capacity_type"), "on_demand");
    assert_non_null(strstr(str(a, "reason"), "ahead of forecast"));
}

static void test_oscillating_demand_does_not_flap(void **state)
{
    struct fixture *f = *state;
    struct tm_snap_node *n = add_ready_node(f, 1);
    add_ready_node(f, 2);
    fill_node(f, 100, 2);
    f->with_forecast = true;
    /* Demand alternating between 8 and 16 GPUs: the mean near 12, the
     * upper quantile 16.  Node 1 idle past its grace is kept, and nothing
     * is launched, whichever way the last tick went. */
    for (int tick = 0; tick < 6; tick++) {
        n->idle_since_ms = NOW - 120000;
        f->forecast[1] = (struct tm_pool_forecast){tick % 2 ? 8 : 16, 16};
        run(f);
        assert_int_equal(count_op(f, "request_node"), 0);
        assert_int_equal(count_op(f, "terminate"), 0);
    }
    /* Once the upper quantile falls to what node 2 holds, node 1 goes. */
    f->forecast[1] = (struct tm_pool_forecast){6, 8};
    run(f);
    assert_int_equal(count_op(f, "terminate"), 1);
    assert_int_equal(f->plan.nterminates, 1);
    assert_string_equal(f->plan.terminates[0].instance_id, "i-1");
}

static void add_shortage(struct fixture *f, const char *type, const char *zone, bool spot)
{
    struct tm_live_shortage *s = &f->shortages[f->nshortages++];
    snprintf(s->instance_type, sizeof(s->instance_type), "%s", type);
    snprintf(s->zone, sizeof(s->zone), "%s", zone);
    s->spot = spot;
    s->until_ms = NOW + 600000;
}

static void test_shortage_falls_back_zone_then_type_then_on_demand(void **state)
{
    struct fixture *f = *state;
    add_job(f, 10, 1, true);
    run(f);
    const cJSON *a = nth_op(f, "request_node", 0);
    assert_string_equal(str(a, "pool"), "spot1");
    assert_string_equal(str(a, "instance_type"), "sim.1x");
    assert_string_equal(str(a, "capacity_type"), "spot");

    add_shortage(f, "sim.1x", "z1", true); /* other zone */
    run(f);
    a = nth_op(f, "request_node", 0);
    assert_string_equal(str(a, "instance_type"), "sim.1x");
    assert_string_equal(str(a, "zone"), "z2");
    assert_string_equal(str(a, "capacity_type"), "spot");

    add_shortage(f, "sim.1x", "z2", true); /* other type */
    run(f);
    a = nth_op(f, "request_node", 0);
    assert_string_equal(str(a, "pool"), "spot8");
    assert_string_equal(str(a, "instance_type"), "sim.8x");
    assert_string_equal(str(a, "zone"), "z1");
    assert_string_equal(str(a, "capacity_type"), "spot");

    add_shortage(f, "sim.8x", "z1", true);
    add_shortage(f, "sim.8x", "z2", true); /* spot short everywhere: on demand */
    run(f);
    assert_int_equal(count_op(f, "request_node"), 1);
    a = nth_op(f, "request_node", 0);
    assert_string_equal(str(a, "pool"), "spot1");
    assert_string_equal(str(a, "instance_type"), "sim.1x");
    assert_string_equal(str(a, "capacity_type"), "on_demand");
    assert_non_null(strstr(str(a, "reason"), "fallback: on-demand"));
}

static void test_no_on_demand_fallback_unless_the_pool_allows_it(void **state)
{
    struct fixture *f = *state;
    for (int i = 2; i < 4; i++) {
        free(f->cfg.pools[i].capacity_type);
        f->cfg.pools[i].capacity_type = strdup("spot");
    }
    add_job(f, 10, 1, true);
    add_shortage(f, "sim.1x", "z1", true);
    add_shortage(f, "sim.1x", "z2", true);
    add_shortage(f, "sim.8x", "z1", true);
    add_shortage(f, "sim.8x", "z2", true);
    run(f);
    assert_int_equal(count_op(f, "request_node"), 0);
}

static void test_preemptible_to_spot_other_to_on_demand_sized_to_the_job(void **state)
{
    struct fixture *f = *state;
    add_job(f, 10, 1, true);
    add_job(f, 11, 1, false);
    run(f);
    assert_int_equal(count_op(f, "request_node"), 2);
    for (int k = 0; k < 2; k++) {
        const cJSON *a = nth_op(f, "request_node", k);
        bool spot = strcmp(str(a, "pool"), "spot1") == 0;
        /* A 1-GPU instance for a 1-GPU job: cheaper than an idle 8-GPU one. */
        assert_string_equal(str(a, "instance_type"), "sim.1x");
        assert_string_equal(str(a, "capacity_type"), spot ? "spot" : "on_demand");
        if (!spot)
            assert_string_equal(str(a, "pool"), "od1");
    }
    assert_int_not_equal(strcmp(str(nth_op(f, "request_node", 0), "pool"),
                                str(nth_op(f, "request_node", 1), "pool")), 0);
}

static void test_pool_max_and_min_respected(void **state)
{
    struct fixture *f = *state;
    for (int i = 0; i < 5; i++)
        add_job(f, 10 + i, 8, false); /* five whole nodes wanted, od max is 3 */
    run(f);
    assert_int_equal(count_op(f, "request_node"), 3);
    for (int k = 0; k < 3; k++)
        assert_string_equal(str(nth_op(f, "request_node", k), "pool"), "od8");

    /* No work, min 2 on the spot pool: two nodes, nothing else. */
    f->snap.njobs = 0;
    f->cfg.pools[3].min_nodes = 2;
    run(f);
    assert_int_equal(count_op(f, "request_node"), 2);
    for (int k = 0; k < 2; k++) {
        const cJSON *a = nth_op(f, "request_node", k);
        assert_string_equal(str(a, "pool"), "spot8");
        assert_non_null(strstr(str(a, "reason"), "below min_nodes"));
    }

    /* An idle node past grace is kept when its pool is at its min. */
    f->cfg.pools[3].min_nodes = 0;
    f->cfg.pools[1].min_nodes = 1;
    struct tm_snap_node *n = add_ready_node(f, 1);
    n->idle_since_ms = NOW - 120000;
    run(f);
    assert_int_equal(count_op(f, "terminate"), 0);
    f->cfg.pools[1].min_nodes = 0;
    run(f);
    assert_int_equal(count_op(f, "terminate"), 1);
}

static void test_refused_launch_does_not_stop_releases(void **state)
{
    struct fixture *f = *state;
    struct tm_snap_budget org = {.org = true, .cap_cents = 100, .hard = true, .warn_percent = 80};
    snprintf(org.scope, sizeof(org.scope), "acme");
    f->snap.budgets = &org;
    f->snap.nbudgets = 1;
    struct tm_snap_node *n = add_ready_node(f, 1);
    n->idle_since_ms = NOW - 120000;
    struct tm_snap_job *j = add_job(f, 10, 8, true);
    j->pool = 3; /* pinned to spot8: node 1 cannot take it */
    run(f);
    assert_int_equal(count_op(f, "request_node"), 0);
    assert_int_equal(f->plan.budget_refused, 1);
    assert_int_equal(count_op(f, "terminate"), 1);
    assert_string_equal(f->plan.terminates[0].instance_id, "i-1");
    f->snap.budgets = NULL;
    f->snap.nbudgets = 0;
}

/* ---- fitted spot hazards per zone (a provider's spot_hazards) ------------ */

/* One spot pool over zones z1 and z2 (its own spot_hazard 0.05) and an
 * on-demand one, on a provider whose spot_hazards is the file at %s. */
static const char hazards_yaml_fmt[] =
    SNAP_FIXTURE_YAML_HEAD("unit")
    "providers:\n"
    "  - name: sim\n"
    "    kind: sim\n"
    "    region: r1\n"
    "    spot_hazards: \"%s\"\n"
    "    instance_types:\n"
    "      - {name: sim.1x, gpus: 1, gpu_model: A100, cpu_milli: 12000, memory_mib: 120000,"
    "         on_demand_price: \"4.00\", spot_price: \"1.50\"}\n"
    "pools:\n"
    "  - {name: od1, provider: sim, zones: [z1, z2], instance_types: [sim.1x],"
    "     capacity_type: on_demand, max_nodes: 3, idle_grace: 60s}\n"
    "  - {name: spot1, provider: sim, zones: [z1, z2], instance_types: [sim.1x],"
    "     capacity_type: spot, max_nodes: 3, idle_grace: 60s, spot_hazard: 0.05}\n";

struct hazard_fixture {
    struct fixture f;
    char dir[32];
    char table[128];
};

/* cmocka setup: *state holds the table's rows (the test's prestate); it
 * becomes the fixture over hazards_yaml_fmt with that table. */
static int hazard_setup(void **state)
{
    static struct hazard_fixture h;
    const char *rows = *state;
    char yaml[4096];
    FILE *out;

    memset(&h, 0, sizeof(h));
    snprintf(h.dir, sizeof(h.dir), "/tmp/tm-zones-XXXXXX");
    if (!mkdtemp(h.dir))
        return -1;
    snprintf(h.table, sizeof(h.table), "%s/hazards.yaml", h.dir);
    out = fopen(h.table, "w");
    if (out) {
        fprintf(out, "hazards:\n%s", rows);
        if (fclose(out) == 0) {
            snprintf(yaml, sizeof(yaml), hazards_yaml_fmt, h.table);
            if (SNAP_FIXTURE_PASS_INIT(&h.f, yaml) == 0) {
                *state = &h;
                return 0;
            }
        }
    }
    /* cmocka runs no teardown after a failed setup */
    unlink(h.table);
    rmdir(h.dir);
    return -1;
}

/* Runs after a failed test too: no table is left behind in /tmp. */
static int hazard_teardown(void **state)
{
    struct hazard_fixture *h = *state;
    SNAP_FIXTURE_PASS_RELEASE(&h->f);
    unlink(h->table);
    rmdir(h->dir);
    return 0;
}

static double num(const cJSON *a, const char *key)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(a, key);
    assert_true(cJSON_IsNumber(v));
    return v->valuedouble;
}

static const char rows_z1_high[] = "  - {type: sim.1x, zone: z1, hazard_per_hour: 0.9}\n"
                                   "  - {type: sim.1x, zone: z2, hazard_per_hour: 0.1}\n";

/* The table gives z1 the higher hazard: spot launches go to z2, every
 * one of them (not in turn), and to z1 only while z2 is short. */
static void test_spot_launches_go_to_the_zone_of_lowest_fitted_hazard(void **state)
{
    struct fixture *f = &((struct hazard_fixture *)*state)->f;
    add_job(f, 10, 1, true);
    add_job(f, 11, 1, true);
    run(f);
    assert_int_equal(count_op(f, "request_node"), 2);
    for (int k = 0; k < 2; k++) {
        const cJSON *a = nth_op(f, "request_node", k);
        assert_string_equal(str(a, "pool"), "spot1");
        assert_string_equal(str(a, "capacity_type"), "spot");
        assert_string_equal(str(a, "zone"), "z2");
        assert_non_null(strstr(str(a, "reason"), "zone z2: lowest spot hazard"));
        const cJSON *in = cJSON_GetObjectItemCaseSensitive(a, "inputs");
        assert_true(num(in, "spot_hazard_per_hour") == 0.1);
        assert_string_equal(str(in, "spot_hazard_from"), "spot_hazards");
    }

    /* z2 short: the fallback order is unchanged, the next zone, z1. */
    f->snap.njobs = 1;
    add_shortage(f, "sim.1x", "z2", true);
    run(f);
    assert_int_equal(count_op(f, "request_node"), 1);
    const cJSON *a = nth_op(f, "request_node", 0);
    assert_string_equal(str(a, "pool"), "spot1");
    assert_string_equal(str(a, "capacity_type"), "spot");
    assert_string_equal(str(a, "zone"), "z1");
}

static const char rows_z1_only[] = "  - {type: sim.1x, zone: z1, hazard_per_hour: 0.9}\n";

/* A cell the table lacks takes the pool's spot_hazard: z1 fitted at 0.9
 * loses to z2 at the pool's 0.05, and wins once the pool's is 2, or once
 * the pool's is 0 (unknown). */

static void test_unfitted_zone_takes_the_pools_hazard(void **state)
{
    struct fixture *f = &((struct hazard_fixture *)*state)->f;
    add_job(f, 10, 1, true);
    run(f);
    const cJSON *a = nth_op(f, "request_node", 0);
    assert_string_equal(str(a, "zone"), "z2");
    const cJSON *in = cJSON_GetObjectItemCaseSensitive(a, "inputs");
    assert_true(num(in, "spot_hazard_per_hour") == 0.05);
    assert_string_equal(str(in, "spot_hazard_from"), "pool");

    f->cfg.pools[1].spot_hazard_per_hour = 2.0;
    run(f);
    a = nth_op(f, "request_node", 0);
    assert_string_equal(str(a, "zone"), "z1");
    assert_true(num(cJSON_GetObjectItemCaseSensitive(a, "inputs"), "spot_hazard_per_hour") == 0.9);

    /* The pool's hazard unset (0: unknown): z2 counts as no safer than
     * z1's fitted 0.9, so the zone the table knows is not passed over for
     * the one it does not (a tie keeps the pool's order). */
    f->cfg.pools[1].spot_hazard_per_hour = 0;
    run(f);
    a = nth_op(f, "request_node", 0);
    assert_string_equal(str(a, "zone"), "z1");
    assert_string_equal(str(cJSON_GetObjectItemCaseSensitive(a, "inputs"), "spot_hazard_from"), "spot_hazards");
}

static const char rows_other_type[] = "  - {type: sim.8x, zone: z1, hazard_per_hour: 0.9}\n";

/* A table that fits none of the pool's cells (another type here) changes
 * nothing: the pool's zones take turns, as without the key. */

static void test_table_without_the_pools_cells_keeps_zones_in_turn(void **state)
{
    struct fixture *f = &((struct hazard_fixture *)*state)->f;
    add_job(f, 10, 1, true);
    add_job(f, 11, 1, true);
    run(f);
    assert_int_equal(count_op(f, "request_node"), 2);
    assert_string_equal(str(nth_op(f, "request_node", 0), "zone"), "z1");
    assert_string_equal(str(nth_op(f, "request_node", 1), "zone"), "z2");
    assert_null(cJSON_GetObjectItemCaseSensitive(
        cJSON_GetObjectItemCaseSensitive(nth_op(f, "request_node", 0), "inputs"),
        "spot_hazard_per_hour"));
}

/* Without the key (config_yaml), spot launches take the zones in turn. */
static void test_spot_zones_take_turns_without_a_table(void **state)
{
    struct fixture *f = *state;
    add_job(f, 10, 1, true);
    add_job(f, 11, 1, true);
    run(f);
    assert_int_equal(count_op(f, "request_node"), 2);
    assert_string_equal(str(nth_op(f, "request_node", 0), "pool"), "spot1");
    assert_string_equal(str(nth_op(f, "request_node", 0), "zone"), "z1");
    assert_string_equal(str(nth_op(f, "request_node", 1), "zone"), "z2");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_ramp_launches_before_the_queue_forms, setup, teardown),
        cmocka_unit_test_setup_teardown(test_oscillating_demand_does_not_flap, setup, teardown),
        cmocka_unit_test_setup_teardown(test_shortage_falls_back_zone_then_type_then_on_demand, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_no_on_demand_fallback_unless_the_pool_allows_it, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_preemptible_to_spot_other_to_on_demand_sized_to_the_job,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(test_pool_max_and_min_respected, setup, teardown),
        cmocka_unit_test_setup_teardown(test_refused_launch_does_not_stop_releases, setup, teardown),
        cmocka_unit_test_prestate_setup_teardown(test_spot_launches_go_to_the_zone_of_lowest_fitted_hazard,
                                                 hazard_setup, hazard_teardown, (void *)rows_z1_high),
        cmocka_unit_test_prestate_setup_teardown(test_unfitted_zone_takes_the_pools_hazard, hazard_setup,
                                                 hazard_teardown, (void *)rows_z1_only),
        cmocka_unit_test_prestate_setup_teardown(test_table_without_the_pools_cells_keeps_zones_in_turn,
                                                 hazard_setup, hazard_teardown, (void *)rows_other_type),
        cmocka_unit_test_setup_teardown(test_spot_zones_take_turns_without_a_table, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
