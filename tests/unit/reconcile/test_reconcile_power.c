/*
 * tests/unit/reconcile/test_reconcile_power.c: power saving's choice
 * (controller/reconcile/power.c) with known answers: which idle owned
 * nodes are suspended (longest idle first, never one a waiting job fits,
 * never more changing at once than power_changes_max, commands still
 * running counted), which suspended node is resumed for a waiting job
 * (none when an idle powered node or one already resuming fits it), when
 * a resuming node is on again or given up on, and through tm_reconcile:
 * a suspended node takes no work and its silence marks nothing
 * unreachable.  Also the configuration's power keys (the field named).
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
    "  - {name: dgx, provider: site, gpu_model: A100, gpus_per_node: 8, max_nodes: 8,"
    "     cost_per_node_hour: \"20.00\", suspended_cost_per_node_hour: \"2.00\","
    "     suspend_command: [/bin/true, off], resume_command: [/bin/true, on],"
    "     suspend_after: 10m, power_changes_max: 2, resume_timeout: 5m, command_timeout: 30s}\n";

#define NOW 1000000000
#define MIN 60000
#define DGX 0

struct fixture {
    SNAP_FIXTURE_MEMBERS(8);
    SNAP_FIXTURE_PASS_MEMBERS;
    struct tm_observed observed[2];
    bool real_agent[1];
    struct tm_power_op *ops;
    size_t nops;
};

static int setup(void **state)
{
    static struct fixture f;
    memset(&f, 0, sizeof(f));
    if (SNAP_FIXTURE_PASS_INIT(&f, config_yaml) < 0)
        return -1;
    f.observed[0] = f.obs;
    f.observed[1] = (struct tm_observed){.provider = "site", .complete = false};
    f.real_agent[DGX] = true;
    *state = &f;
    return 0;
}

static int teardown(void **state)
{
    struct fixture *f = *state;
    free(f->ops);
    SNAP_FIXTURE_PASS_RELEASE(f);
    return 0;
}

/* A ready owned node, idle since idle_since (0: busy), heard now. */
static struct tm_snap_node *add_node(struct fixture *f, int64_t id, int64_t idle_since, enum tm_node_power power)
{
    struct tm_snap_node *n = &f->nodes[f->snap.nnodes++];
    *n = (struct tm_snap_node){.id = id, .pool = DGX, .gpus = 8, .cpu_milli = 96000,
                               .memory_mib = 1000000, .capacity = TM_CAPACITY_ON_DEMAND,
                               .state = TM_NODE_READY, .requested_ms = NOW - 3600000,
                               .idle_since_ms = idle_since, .billed = true,
                               .last_heartbeat_ms = power == TM_POWER_ON ? NOW : NOW - 3600000,
                               .power = power, .power_since_ms = power == TM_POWER_ON ? 0 : NOW - MIN};
    snprintf(n->gpu_model, sizeof(n->gpu_model), "A100");
    snprintf(n->token, sizeof(n->token), "join-%lld", (long long)id);
    snprintf(n->instance_type, sizeof(n->instance_type), "owned");
    snprintf(n->zone, sizeof(n->zone), "owned");
    return n;
}

static void add_job(struct fixture *f, int64_t id, int gpus)
{
    struct tm_snap_job *j = &f->jobs[f->snap.njobs++];
    *j = (struct tm_snap_job){.id = id, .pool = -1, .gpus = gpus, .gpu_milli = 1000, .nodes = 1,
                              .state = TM_JOB_QUEUED, .estimate_ms = 3600000,
                              .submitted_ms = NOW - 1000 * id};
    snprintf(j->team, sizeof(j->team), "t");
    snprintf(j->gpu_model, sizeof(j->gpu_model), "A100");
}

static void busy(struct fixture *f, int64_t node_id, int64_t job_id)
{
    f->allocs[f->snap.nallocs++] = (struct tm_snap_alloc){.job_id = job_id, .node_id = node_id,
                                                          .gpu_mask = 0xff, .gpu_milli = 1000};
}

static void choose(struct fixture *f, const struct tm_power_hold *holds, size_t nholds)
{
    free(f->ops);
    assert_int_equal(tm_reconcile_power(&f->cfg, &f->snap, NULL, NULL, holds, nholds, NOW, &f->ops, &f->nops), 0);
}

/* The op about node id, or NULL. */
static const struct tm_power_op *op_on(const struct fixture *f, int64_t id)
{
    for (size_t i = 0; i < f->nops; i++)
        if (f->ops[i].node_id == id)
            return &f->ops[i];
    return NULL;
}

static size_t count_kind(const struct fixture *f, enum tm_power_op_kind kind)
{
    size_t n = 0;
    for (size_t i = 0; i < f->nops; i++)
        n += f->ops[i].kind == kind;
    return n;
}

static void test_config(void **state)
{
    struct fixture *f = *state;
    const struct tm_config_pool *p = &f->cfg.pools[DGX];

    assert_int_equal(p->nsuspend_command, 2);
    assert_string_equal(p->resume_command[1], "on");
    assert_int_equal(p->suspend_after_ms, 10 * MIN);
    assert_int_equal(p->power_changes_max, 2);
    assert_int_equal(p->resume_timeout_ms, 5 * MIN);
    assert_int_equal(p->command_timeout_ms, 30000);
    assert_int_equal(p->suspended_cost_uusd_per_node_hour, 2000000);
}

/* Idle 30, 20, 15 and 5 minutes, and one busy: the two idle longest past
 * suspend_after go (the limit is 2), the one idle 5 minutes and the busy
 * one stay on. */
static void test_suspend_longest_idle_within_limit(void **state)
{
    struct fixture *f = *state;

    add_node(f, 1, NOW - 15 * MIN, TM_POWER_ON);
    add_node(f, 2, NOW - 30 * MIN, TM_POWER_ON);
    add_node(f, 3, NOW - 20 * MIN, TM_POWER_ON);
    add_node(f, 4, NOW - 5 * MIN, TM_POWER_ON);
    add_node(f, 5, 0, TM_POWER_ON);
    busy(f, 5, 99);
    choose(f, NULL, 0);
    assert_int_equal(f->nops, 2);
    assert_int_equal(count_kind(f, TM_POWER_OP_SUSPEND), 2);
    assert_non_null(op_on(f, 2));
    assert_non_null(op_on(f, 3));
    assert_non_null(strstr(op_on(f, 2)->reason, "suspend_after"));

    /* One already suspending and one whose command the daemon still runs
     * fill the limit: nothing more. */
    f->nodes[1].power = TM_POWER_SUSPENDING;
    f->nodes[1].power_since_ms = NOW - 1000;
    struct tm_power_hold h = {.node_id = 3, .running = true};
    choose(f, &h, 1);
    assert_int_equal(f->nops, 0);

    /* A node whose command failed lately backs off; the next one goes. */
    f->nodes[1].power = TM_POWER_SUSPENDED;
    h = (struct tm_power_hold){.node_id = 3, .until_ms = NOW + MIN};
    choose(f, &h, 1);
    assert_int_equal(f->nops, 1);
    assert_non_null(op_on(f, 1));
    assert_int_equal(op_on(f, 1)->kind, TM_POWER_OP_SUSPEND);

    /* Cordoned or unreachable: left alone. */
    f->nodes[0].cordoned = true;
    f->nodes[2].unreachable_ms = NOW - MIN;
    choose(f, NULL, 0);
    assert_int_equal(f->nops, 0);
}

/* A waiting job that fits an idle node keeps it on; one that fits no
 * powered node resumes one suspended node, once. */
static void test_resume_for_waiting_job(void **state)
{
    struct fixture *f = *state;

    add_node(f, 1, NOW - 30 * MIN, TM_POWER_ON);
    add_node(f, 2, NOW - 60 * MIN, TM_POWER_SUSPENDED);
    add_node(f, 3, NOW - 60 * MIN, TM_POWER_SUSPENDED);
    add_job(f, 10, 8);
    choose(f, NULL, 0);
    assert_int_equal(f->nops, 0); /* it waits for its turn, not for power */

    busy(f, 1, 50);
    f->nodes[0].idle_since_ms = 0;
    choose(f, NULL, 0);
    assert_int_equal(f->nops, 1);
    assert_int_equal(f->ops[0].kind, TM_POWER_OP_RESUME);
    assert_int_equal(f->ops[0].node_id, 2);
    assert_int_equal(f->ops[0].job_id, 10);

    /* Node 2 resuming covers it: no second resume. */
    f->nodes[1].power = TM_POWER_RESUMING;
    f->nodes[1].power_since_ms = NOW - MIN;
    choose(f, NULL, 0);
    assert_int_equal(f->nops, 0);

    /* A job too big for any node resumes nothing. */
    f->snap.njobs = 0;
    add_job(f, 11, 16);
    f->nodes[1].power = TM_POWER_SUSPENDED;
    choose(f, NULL, 0);
    assert_int_equal(f->nops, 0);

    /* Three waiting jobs, limit 2: two resumes. */
    f->snap.njobs = 0;
    add_job(f, 12, 8);
    add_job(f, 13, 8);
    add_job(f, 14, 8);
    add_node(f, 4, NOW - 60 * MIN, TM_POWER_SUSPENDED);
    choose(f, NULL, 0);
    assert_int_equal(count_kind(f, TM_POWER_OP_RESUME), 2);
}

/* A resuming node that heartbeat is on; one silent past resume_timeout
 * is given up; a node suspending with no command left is on again. */
static void test_settle(void **state)
{
    struct fixture *f = *state;
    struct tm_snap_node *a = add_node(f, 1, NOW - 60 * MIN, TM_POWER_RESUMING);
    struct tm_snap_node *b = add_node(f, 2, NOW - 60 * MIN, TM_POWER_RESUMING);
    struct tm_snap_node *c = add_node(f, 3, NOW - 60 * MIN, TM_POWER_SUSPENDING);
    struct tm_snap_node *d = add_node(f, 4, NOW - 60 * MIN, TM_POWER_RESUMING);

    a->power_since_ms = NOW - 2 * MIN;
    a->last_heartbeat_ms = NOW - 1000;
    b->power_since_ms = NOW - 6 * MIN;
    c->power_since_ms = NOW - 2 * MIN;
    d->power_since_ms = NOW - 2 * MIN;
    choose(f, NULL, 0);
    assert_int_equal(f->nops, 3);
    assert_int_equal(op_on(f, 1)->kind, TM_POWER_OP_AWAKE);
    assert_int_equal(op_on(f, 2)->kind, TM_POWER_OP_TIMEOUT);
    assert_non_null(strstr(op_on(f, 2)->reason, "resume_timeout"));
    assert_int_equal(op_on(f, 3)->kind, TM_POWER_OP_STUCK);
    assert_null(op_on(f, 4)); /* still within resume_timeout */

    /* A waiting job: the node on again this pass covers it (no resume);
     * the one given up on does not, so a suspended node is resumed. */
    add_node(f, 5, NOW - 60 * MIN, TM_POWER_SUSPENDED);
    add_job(f, 10, 8);
    choose(f, NULL, 0);
    assert_int_equal(count_kind(f, TM_POWER_OP_RESUME), 0);
    a->last_heartbeat_ms = 0;
    a->power_since_ms = d->power_since_ms = NOW - 6 * MIN;
    choose(f, NULL, 0);
    assert_int_equal(count_kind(f, TM_POWER_OP_TIMEOUT), 3);
    assert_int_equal(count_kind(f, TM_POWER_OP_RESUME), 1);
    assert_int_equal(op_on(f, 5)->kind, TM_POWER_OP_RESUME);
    f->snap.njobs = 0;

    /* Its command still running: not stuck. */
    struct tm_power_hold h = {.node_id = 3, .running = true};
    choose(f, &h, 1);
    assert_null(op_on(f, 3));
}

/* Through the whole pass: a suspended node takes no work, its silence
 * marks nothing unreachable, and the plan carries its resume. */
static void test_pass(void **state)
{
    struct fixture *f = *state;

    add_node(f, 1, NOW - 60 * MIN, TM_POWER_SUSPENDED);
    add_job(f, 10, 8);
    struct tm_reconcile_input in = {.cfg = &f->cfg, .snap = &f->snap, .observed = f->observed,
                                    .nobserved = 2, .now_ms = NOW, .policy = TM_POLICY_FIFO,
                                    .pool_real_agent = f->real_agent};
    assert_int_equal(tm_reconcile(&in, &f->plan), 0);
    assert_int_equal(snap_fixture_count_op(f->plan.actions, "place"), 0);
    assert_int_equal(snap_fixture_count_op(f->plan.actions, "node_unreachable"), 0);
    assert_int_equal(f->plan.npower, 1);
    assert_int_equal(f->plan.power[0].kind, TM_POWER_OP_RESUME);

    /* Back on: placed there, nothing to change. */
    f->nodes[0].power = TM_POWER_ON;
    f->nodes[0].last_heartbeat_ms = NOW;
    tm_rc_plan_release(&f->plan);
    assert_int_equal(tm_reconcile(&in, &f->plan), 0);
    assert_int_equal(snap_fixture_count_op(f->plan.actions, "place"), 1);
    assert_int_equal(f->plan.npower, 0);
}

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
            " suspend_command: [/bin/true]}\n",
            "pools[0].suspend_command\": only used by pools of an owned provider");
    refused("  - {name: c, provider: sim, zones: [z], instance_types: [sim.8x], max_nodes: 1,"
            " resume_timeout: 5m}\n",
            "pools[0].resume_timeout\": only used by pools of an owned provider");
    refused("  - {name: d, provider: site, gpu_model: A100, gpus_per_node: 8, max_nodes: 1,"
            " cost_per_node_hour: \"1\", suspend_command: [/bin/true]}\n",
            "pools[0].resume_command\": missing required key");
    refused("  - {name: d, provider: site, gpu_model: A100, gpus_per_node: 8, max_nodes: 1,"
            " cost_per_node_hour: \"1\", power_changes_max: 0}\n",
            "pools[0].power_changes_max\"");
    refused("  - {name: d, provider: site, gpu_model: A100, gpus_per_node: 8, max_nodes: 1,"
            " cost_per_node_hour: \"1\", command_timeout: soon}\n",
            "pools[0].command_timeout\"");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_config, setup, teardown),
        cmocka_unit_test_setup_teardown(test_suspend_longest_idle_within_limit, setup, teardown),
        cmocka_unit_test_setup_teardown(test_resume_for_waiting_job, setup, teardown),
        cmocka_unit_test_setup_teardown(test_settle, setup, teardown),
        cmocka_unit_test_setup_teardown(test_pass, setup, teardown),
        cmocka_unit_test(test_config_rules),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
