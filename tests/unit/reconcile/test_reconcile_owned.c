/*
 * tests/unit/reconcile/test_reconcile_owned.c: owned pools through
 * tm_reconcile, with known answers.  An owned pool shares a pool group with
 * a sim cloud's pool; its nodes are never released (idle past their grace,
 * cordoned and idle, drained and empty, silent past agent.terminate_after),
 * the planner never buys into it, and work routed to it is placed on its
 * nodes.  Also the configuration's rules for owned pools (the field named).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "controller/reconcile/reconcile.h"
#include "core/config.h"
#include "core/err.h"
#include "tests/lib/snap_fixture.h"

#define OWNED_PROVIDER                                                                       \
    "  - name: site\n"                                                                       \
    "    kind: owned\n"                                                                      \
    "    region: lab\n"

static const char config_yaml[] =
    SNAP_FIXTURE_YAML_HEAD("unit")
    "providers:\n"
    SNAP_FIXTURE_YAML_SIM("sim", "r")
    OWNED_PROVIDER
    "pools:\n"
    "  - {name: cloud, provider: sim, zones: [z], instance_types: [sim.8x], group: a100,"
    "     max_nodes: 4, idle_grace: 60s}\n"
    "  - {name: dgx, provider: site, gpu_model: A100, gpus_per_node: 8, group: a100,"
    "     max_nodes: 4, min_nodes: 2, idle_grace: 60s, cost_per_node_hour: \"20.00\"}\n";

#define NOW 1000000000
#define CLOUD 0
#define DGX 1

struct fixture {
    SNAP_FIXTURE_MEMBERS(8);
    SNAP_FIXTURE_PASS_MEMBERS;
    struct tm_observed observed[2];
    bool real_agent[2];
};

static int setup(void **state)
{
    static struct fixture f;
    memset(&f, 0, sizeof(f));
    if (SNAP_FIXTURE_PASS_INIT(&f, config_yaml) < 0)
        return -1;
    /* As the daemon: the cloud listed, the owned provider not (no list). */
    f.observed[0] = f.obs;
    f.observed[1] = (struct tm_observed){.provider = "site", .complete = false};
    f.real_agent[CLOUD] = f.real_agent[DGX] = true;
    *state = &f;
    return 0;
}

static int teardown(void **state)
{
    SNAP_FIXTURE_PASS_RELEASE((struct fixture *)*state);
    return 0;
}

/* A ready node of pool, idle since idle_since (0: busy), heard now. */
static struct tm_snap_node *add_node(struct fixture *f, int64_t id, int pool, int64_t idle_since)
{
    struct tm_snap_node *n = &f->nodes[f->snap.nnodes++];
    *n = (struct tm_snap_node){.id = id, .pool = pool, .gpus = 8, .cpu_milli = 96000,
                               .memory_mib = 1000000, .capacity = TM_CAPACITY_ON_DEMAND,
                               .state = TM_NODE_READY, .requested_ms = NOW - 3600000,
                               .idle_since_ms = idle_since, .billed = true,
                               .last_heartbeat_ms = NOW};
    snprintf(n->gpu_model, sizeof(n->gpu_model), "A100");
    if (pool == CLOUD) {
        snprintf(n->instance_id, sizeof(n->instance_id), "i-%lld", (long long)id);
        snprintf(n->token, sizeof(n->token), "tok-%lld", (long long)id);
        snprintf(n->instance_type, sizeof(n->instance_type), "sim.8x");
        snprintf(n->zone, sizeof(n->zone), "z");
        struct tm_instance *in = &f->inst[f->obs.n++];
        *in = (struct tm_instance){.state = TM_INSTANCE_RUNNING, .node_id = id,
                                   .capacity = TM_CAPACITY_ON_DEMAND, .launched_ms = NOW - 3600000};
        snprintf(in->id, sizeof(in->id), "i-%lld", (long long)id);
        snprintf(in->token, sizeof(in->token), "tok-%lld", (long long)id);
        snprintf(in->instance_type, sizeof(in->instance_type), "sim.8x");
        snprintf(in->zone, sizeof(in->zone), "z");
        f->observed[0] = f->obs;
    } else {
        snprintf(n->token, sizeof(n->token), "join-%lld", (long long)id);
        snprintf(n->instance_type, sizeof(n->instance_type), "owned");
        snprintf(n->zone, sizeof(n->zone), "owned");
    }
    return n;
}

static void add_job(struct fixture *f, int64_t id, int pool)
{
    struct tm_snap_job *j = &f->jobs[f->snap.njobs++];
    *j = (struct tm_snap_job){.id = id, .pool = pool, .gpus = 8, .gpu_milli = 1000, .nodes = 1,
                              .state = TM_JOB_QUEUED, .estimate_ms = 3600000,
                              .submitted_ms = NOW - 1000 * id};
    snprintf(j->team, sizeof(j->team), "t");
}

static void run(struct fixture *f)
{
    struct tm_reconcile_input in = {.cfg = &f->cfg, .snap = &f->snap, .observed = f->observed,
                                    .nobserved = 2, .now_ms = NOW, .policy = TM_POLICY_FIFO,
                                    .pool_real_agent = f->real_agent};
    tm_rc_plan_release(&f->plan);
    assert_int_equal(tm_reconcile(&in, &f->plan), 0);
}

/* Whether the plan has an action op about node id. */
static bool acts_on(const struct fixture *f, const char *op, int64_t id)
{
    const cJSON *a;
    for (int k = 0; (a = snap_fixture_nth_op(f->plan.actions, op, k)); k++) {
        const cJSON *n = cJSON_GetObjectItemCaseSensitive(a, "node");
        if (cJSON_IsNumber(n) && (int64_t)n->valuedouble == id)
            return true;
    }
    return false;
}

static void test_loaded(void **state)
{
    struct fixture *f = *state;
    const struct tm_config_pool *dgx = &f->cfg.pools[DGX];

    assert_true(dgx->owned);
    assert_false(f->cfg.pools[CLOUD].owned);
    assert_int_equal(dgx->cost_uusd_per_node_hour, 20000000);
    assert_false(dgx->mixed_shapes);
    assert_int_equal(dgx->nzones, 1);
    assert_string_equal(dgx->zones[0], "owned");
    assert_string_equal(dgx->instance_types[0], "owned");
    assert_false(tm_config_provider_find(&f->cfg, "site")->fence);
}

/* Idle past the grace: the cloud node goes, the owned one stays; the
 * owned pool's min_nodes (2, one live) buys nothing. */
static void test_idle_release_spares_owned(void **state)
{
    struct fixture *f = *state;
    add_node(f, 1, CLOUD, NOW - 3600000);
    add_node(f, 2, DGX, NOW - 3600000);
    run(f);
    assert_true(acts_on(f, "terminate", 1));
    assert_false(acts_on(f, "terminate", 2));
    assert_int_equal(snap_fixture_count_op(f->plan.actions, "request_node"), 0);
}

/* Cordoned and idle, drained and empty, silent past terminate_after:
 * each would release a cloud node; an owned one is never terminated. */
static void test_never_terminated(void **state)
{
    struct fixture *f = *state;
    add_node(f, 2, DGX, NOW - 3600000)->cordoned = true;
    add_node(f, 3, DGX, NOW - 3600000)->state = TM_NODE_DRAINING;
    add_node(f, 4, DGX, NOW - 3600000)->last_heartbeat_ms = NOW - 24 * 3600000LL;
    run(f);
    assert_int_equal(snap_fixture_count_op(f->plan.actions, "terminate"), 0);
    assert_int_equal(snap_fixture_count_op(f->plan.actions, "request_node"), 0);
}

/* Work routed to the owned pool with no room there: nothing is bought
 * for it (owned capacity is not for sale); with an idle owned node, the
 * job is placed on it. */
static void test_owned_work_not_bought(void **state)
{
    struct fixture *f = *state;
    add_job(f, 1, DGX);
    run(f);
    assert_int_equal(snap_fixture_count_op(f->plan.actions, "request_node"), 0);
    add_node(f, 2, DGX, NOW - 1000);
    run(f);
    assert_int_equal(snap_fixture_count_op(f->plan.actions, "request_node"), 0);
    assert_int_equal(snap_fixture_count_op(f->plan.actions, "place"), 1);
    const cJSON *allocs = cJSON_GetObjectItemCaseSensitive(
        snap_fixture_nth_op(f->plan.actions, "place", 0), "allocs");
    const cJSON *node = cJSON_GetObjectItemCaseSensitive(cJSON_GetArrayItem(allocs, 0), "node");
    assert_true(cJSON_IsNumber(node) && node->valuedouble == 2);
}

/* load yaml; expect a refusal naming want. */
static void refused(const char *pools, const char *want)
{
    char yaml[2048], err[512];
    struct tm_config cfg;

    snprintf(yaml, sizeof(yaml), "%sproviders:\n%s%spools:\n%s", SNAP_FIXTURE_YAML_HEAD("unit"),
             SNAP_FIXTURE_YAML_SIM("sim", "r"), OWNED_PROVIDER, pools);
    err[0] = '\0';
    if (tm_config_load_string(yaml, strlen(yaml), "unit.yaml", &cfg, err, sizeof(err)) == 0) {
        tm_config_release(&cfg);
        fail_msg("loaded: %s", pools);
    }
    if (!strstr(err, want))
        fail_msg("want \"%s\" in: %s", want, err);
}

static void test_config_rules(void **state)
{
    (void)state;
    refused("  - {name: c, provider: sim, zones: [z], instance_types: [sim.8x], max_nodes: 1,"
            " cost_per_node_hour: \"1\"}\n",
            "pools[0].cost_per_node_hour\": only used by pools of an owned provider");
    refused("  - {name: c, provider: sim, zones: [z], instance_types: [sim.8x], max_nodes: 1,"
            " mixed_shapes: true}\n",
            "pools[0].mixed_shapes\"");
    refused("  - {name: d, provider: site, gpu_model: A100, gpus_per_node: 8, max_nodes: 1}\n",
            "pools[0].cost_per_node_hour\": missing required key");
    refused("  - {name: d, provider: site, zones: [z], gpu_model: A100, gpus_per_node: 8,"
            " max_nodes: 1, cost_per_node_hour: \"1\"}\n",
            "pools[0].zones\": an owned pool buys nothing");
    refused("  - {name: d, provider: site, gpus_per_node: 8, max_nodes: 1,"
            " cost_per_node_hour: \"1\"}\n",
            "pools[0].gpu_model\"");
    refused("  - {name: d, provider: site, gpu_model: A100, gpus_per_node: 8, max_nodes: 1,"
            " cost_per_node_hour: \"1\", capacity_type: spot}\n",
            "pools[0].capacity_type\"");
    refused("  - {name: c, provider: sim, instance_types: [sim.8x], max_nodes: 1}\n",
            "pools[0].zones\": missing required key");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_loaded, setup, teardown),
        cmocka_unit_test_setup_teardown(test_idle_release_spares_owned, setup, teardown),
        cmocka_unit_test_setup_teardown(test_never_terminated, setup, teardown),
        cmocka_unit_test_setup_teardown(test_owned_work_not_bought, setup, teardown),
        cmocka_unit_test(test_config_rules),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
