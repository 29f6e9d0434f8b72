/*
 * tests/unit/reconcile/test_reconcile_moves.c: the planner's drain, move, spot
 * substitution, deadline switch, refusal and disruption budget in the live
 * tick (controller/reconcile/moves.c), with known answers on hand-built
 * snapshots: which ops the pure pass writes for tarmac_apply (0007).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "controller/reconcile/reconcile.h"
#include "core/config.h"
#include "tests/lib/snap_fixture.h"

/* One model, A100: an on-demand and a spot pool of 8-GPU nodes ($32 and
 * $10 an hour), and an on-demand pool of 1-GPU nodes.  Pool indices: od8 0,
 * spot8 1, od1 2.  `extra` is pasted into od8's entry. */
#define CONFIG(extra)                                                                   \
    SNAP_FIXTURE_YAML_HEAD("unit")                                                      \
    "providers:\n"                                                                      \
    "  - name: sim\n"                                                                   \
    "    kind: sim\n"                                                                   \
    "    region: r1\n"                                                                  \
    "    boot_delay: 90s\n"                                                             \
    "    instance_types:\n"                                                             \
    "      - {name: sim.1x, gpus: 1, gpu_model: A100, cpu_milli: 12000, memory_mib: 120000," \
    "         on_demand_price: \"4.00\", spot_price: \"1.50\"}\n"                       \
    SNAP_FIXTURE_YAML_SIM_8X                                                            \
    "pools:\n"                                                                          \
    "  - {name: od8, provider: sim, zones: [z1], instance_types: [sim.8x], gpu_model: A100," \
    "     gpus_per_node: 8, capacity_type: on_demand, min_nodes: 0, max_nodes: 4,"      \
    "     idle_grace: 60s" extra "}\n"                                                  \
    "  - {name: spot8, provider: sim, zones: [z1], instance_types: [sim.8x], gpu_model: A100," \
    "     gpus_per_node: 8, capacity_type: spot, min_nodes: 0, max_nodes: 4, idle_grace: 60s}\n" \
    "  - {name: od1, provider: sim, zones: [z1], instance_types: [sim.1x], gpu_model: A100," \
    "     gpus_per_node: 1, capacity_type: on_demand, min_nodes: 0, max_nodes: 4, idle_grace: 60s}\n"

static const char config_plain[] = CONFIG("");
static const char config_drain[] = CONFIG(", drain_oversized: true");
static const char config_budget[] = CONFIG(", disruption_nodes: 1, disruption_interval: 10m");

#define NOW 1000000000
#define OD8 0
#define SPOT8 1

struct fixture {
    SNAP_FIXTURE_MEMBERS(16);
    SNAP_FIXTURE_PASS_MEMBERS;
    struct tm_snap_disruption disruptions[4];
};

static int setup_with(void **state, const char *yaml)
{
    static struct fixture f;
    memset(&f, 0, sizeof(f));
    if (SNAP_FIXTURE_PASS_INIT(&f, yaml) < 0)
        return -1;
    f.snap.disruptions = f.disruptions;
    *state = &f;
    return 0;
}

static int setup(void **state)
{
    return setup_with(state, config_plain);
}

static int setup_drain(void **state)
{
    return setup_with(state, config_drain);
}

static int setup_budget(void **state)
{
    return setup_with(state, config_budget);
}

static int teardown(void **state)
{
    SNAP_FIXTURE_PASS_RELEASE((struct fixture *)*state);
    return 0;
}

static const char *const pool_names[] = {"od8", "spot8", "od1"};

/* A ready 8-GPU node of pool `pool` (OD8 or SPOT8), listed running. */
static struct tm_snap_node *add_node(struct fixture *f, int64_t id, int pool)
{
    struct tm_snap_node *n = &f->nodes[f->snap.nnodes++];
    *n = (struct tm_snap_node){.id = id, .pool = pool, .gpus = 8, .cpu_milli = 96000,
                               .memory_mib = 1000000, .state = TM_NODE_READY,
                               .requested_ms = NOW - 3600000,
                               .capacity = pool == SPOT8 ? TM_CAPACITY_SPOT : TM_CAPACITY_ON_DEMAND,
                               .price_uusd_per_hour = pool == SPOT8 ? 10000000 : 32000000,
                               .billed = true};
    snprintf(n->token, sizeof(n->token), "tok-%" PRId64, id);
    snprintf(n->instance_id, sizeof(n->instance_id), "i-%" PRId64, id);
    snprintf(n->instance_type, sizeof(n->instance_type), "sim.8x");
    snprintf(n->zone, sizeof(n->zone), "z1");
    snprintf(n->gpu_model, sizeof(n->gpu_model), "A100");
    struct tm_instance *i = &f->inst[f->obs.n++];
    memset(i, 0, sizeof(*i));
    snprintf(i->id, sizeof(i->id), "i-%" PRId64, id);
    snprintf(i->token, sizeof(i->token), "tok-%" PRId64, id);
    snprintf(i->pool, sizeof(i->pool), "%s", pool_names[pool]);
    snprintf(i->zone, sizeof(i->zone), "z1");
    i->state = TM_INSTANCE_RUNNING;
    return n;
}

static struct tm_snap_job *add_job(struct fixture *f, int64_t id, int gpus, bool preemptible,
                                   bool checkpointable)
{
    struct tm_snap_job *j = &f->jobs[f->snap.njobs++];
    *j = (struct tm_snap_job){.id = id, .pool = -1, .gpus = gpus, .gpu_milli = 1000, .nodes = 1,
                              .preemptible = preemptible, .checkpointable = checkpointable,
                              .state = TM_JOB_QUEUED, .estimate_ms = 10 * 3600000LL,
                              .submitted_ms = NOW - 7200000 + id, .attempts = 0};
    snprintf(j->team, sizeof(j->team), "t");
    return j;
}

/* A job running on node since 10 minutes ago, on GPUs `mask`. */
static struct tm_snap_job *run_job(struct fixture *f, int64_t id, int64_t node, uint32_t mask,
                                   bool preemptible, bool checkpointable)
{
    struct tm_snap_job *j = add_job(f, id, __builtin_popcount(mask), preemptible, checkpointable);
    j->state = TM_JOB_RUNNING;
    j->node_id = node;
    j->started_ms = NOW - 600000;
    j->attempts = 1;
    f->allocs[f->snap.nallocs++] = (struct tm_snap_alloc){.job_id = id, .node_id = node,
                                                          .gpu_mask = mask, .gpu_milli = 1000};
    return j;
}

static void run(struct fixture *f)
{
    struct tm_reconcile_input in = {.cfg = &f->cfg, .snap = &f->snap, .observed = &f->obs,
                                    .nobserved = 1, .now_ms = NOW, .policy = TM_POLICY_FIFO};
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

static double num(const cJSON *a, const char *key)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(a, key);
    assert_true(cJSON_IsNumber(v));
    return v->valuedouble;
}

static const char *str(const cJSON *a, const char *key)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(a, key);
    assert_true(cJSON_IsString(v));
    return v->valuestring;
}

static const cJSON *obj(const cJSON *a, const char *key)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(a, key);
    assert_non_null(v);
    return v;
}

/* DRAIN: an 8-GPU node holding one 1-GPU job is oversized (a 1-GPU type
 * holds its work): a drain op that names the reason; no job moves. */
static void test_drain_becomes_a_cordon_with_its_reason(void **state)
{
    struct fixture *f = *state;
    add_node(f, 1, OD8);
    run_job(f, 100, 1, 0x1, false, false);
    run(f);
    assert_int_equal(count_op(f, "drain"), 1);
    const cJSON *a = nth_op(f, "drain", 0);
    assert_int_equal((int)num(a, "node"), 1);
    assert_non_null(strstr(str(a, "reason"), "oversized"));
    assert_string_equal(str(obj(a, "inputs"), "pool"), "od8");
    assert_int_equal(count_op(f, "move"), 0);
    assert_int_equal(count_op(f, "checkpoint"), 0);
    assert_int_equal(count_op(f, "terminate"), 0);
    /* Drained (the next snapshot) and empty: released at once, whatever
     * the grace. */
    f->nodes[0].state = TM_NODE_DRAINING;
    f->nodes[0].cordoned = true;
    f->nodes[0].idle_since_ms = NOW - 1000;
    f->snap.nallocs = 0;
    f->jobs[0].state = TM_JOB_QUEUED;
    f->jobs[0].pool = 2; /* pinned to od1: no launch in pool od8 */
    run(f);
    assert_int_equal(count_op(f, "drain"), 0);
    assert_int_equal(count_op(f, "terminate"), 1);
    assert_int_equal((int)num(nth_op(f, "terminate", 0), "node"), 1);
    assert_int_equal((int)f->plan.nterminates, 1);
}

/* Without drain_oversized nothing is drained. */
static void test_no_drain_unless_the_pool_asks(void **state)
{
    struct fixture *f = *state;
    add_node(f, 1, OD8);
    run_job(f, 100, 1, 0x1, false, false);
    run(f);
    assert_int_equal(count_op(f, "drain"), 0);
}

/* Two spot nodes: node 1 holds two checkpointable preemptible 1-GPU jobs,
 * node 2 a plain job on 4 GPUs and room for both.  The planner empties
 * node 1: one move op with both jobs to checkpoint. */
static void setup_consolidation(struct fixture *f, bool second_checkpointable)
{
    add_node(f, 1, SPOT8);
    add_node(f, 2, SPOT8);
    run_job(f, 100, 1, 0x1, true, true);
    run_job(f, 101, 1, 0x2, true, second_checkpointable);
    run_job(f, 102, 2, 0xf, true, false);
}

static void test_move_checkpoints_every_job_of_the_node(void **state)
{
    struct fixture *f = *state;
    setup_consolidation(f, true);
    run(f);
    assert_int_equal(count_op(f, "move"), 1);
    const cJSON *a = nth_op(f, "move", 0);
    assert_int_equal((int)num(a, "node"), 1);
    const cJSON *jobs = obj(a, "jobs");
    assert_int_equal(cJSON_GetArraySize(jobs), 2);
    assert_int_equal((int)num(cJSON_GetArrayItem(jobs, 0), "job"), 100);
    assert_int_equal((int)num(cJSON_GetArrayItem(jobs, 1), "job"), 101);
    assert_int_equal((int64_t)num(cJSON_GetArrayItem(jobs, 0), "started_ms"), NOW - 600000);
    assert_string_equal(str(obj(a, "inputs"), "disruption"), "move");
    assert_string_equal(str(obj(a, "inputs"), "pool"), "spot8");
    assert_int_equal(f->plan.moved, 1);
    assert_int_equal(f->plan.checkpointed, 2);
    /* nothing is released in the same pass: the node goes once empty */
    assert_int_equal(count_op(f, "terminate"), 0);
}

static void test_node_with_a_job_that_cannot_checkpoint_is_never_moved(void **state)
{
    struct fixture *f = *state;
    setup_consolidation(f, false);
    run(f);
    assert_int_equal(count_op(f, "move"), 0);
    assert_int_equal(count_op(f, "checkpoint"), 0);
    /* It is emptied by consolidation by restart instead (the job that
     * cannot checkpoint starts over; test_reconcile_restart.c), in which
     * its checkpointable job checkpoints. */
    assert_int_equal(count_op(f, "restart"), 1);
    assert_int_equal((int)num(nth_op(f, "restart", 0), "node"), 1);
    assert_int_equal(f->plan.checkpointed, 1);
    /* a gang member is not movable either */
    f->jobs[1].checkpointable = true;
    f->jobs[1].nodes = 2;
    run(f);
    assert_int_equal(count_op(f, "move"), 0);
}

/* An on-demand node running only checkpointable preemptible work for 10
 * hours more: one spot node requested to replace it, linked by token. */
static void test_substitute_launches_then_moves_then_releases(void **state)
{
    struct fixture *f = *state;
    add_node(f, 1, OD8);
    run_job(f, 100, 1, 0x1, true, true);
    run_job(f, 101, 1, 0x2, true, true);
    run(f);
    assert_int_equal(count_op(f, "request_node"), 1);
    const cJSON *req = nth_op(f, "request_node", 0);
    assert_string_equal(str(req, "pool"), "spot8");
    assert_string_equal(str(req, "capacity_type"), "spot");
    assert_int_equal((int)num(obj(req, "inputs"), "replaces_node"), 1);
    assert_int_equal(count_op(f, "substitute"), 1);
    const cJSON *sub = nth_op(f, "substitute", 0);
    assert_int_equal((int)num(sub, "node"), 1);
    assert_string_equal(str(sub, "token"), str(req, "token"));
    assert_string_equal(str(obj(sub, "inputs"), "disruption"), "substitute");
    /* the launch goes out after the commit, with the same token */
    assert_int_equal((int)f->plan.nlaunches, 1);
    assert_string_equal(f->plan.launches[0].token, str(req, "token"));
    assert_int_equal(count_op(f, "move"), 0);

    /* Next pass: the spot node (2) is booting.  Nothing moves, and no
     * second substitute is asked for. */
    struct tm_snap_node *r = add_node(f, 2, SPOT8);
    r->replaces_node_id = 1;
    r->state = TM_NODE_BOOTING;
    f->inst[1].state = TM_INSTANCE_PENDING;
    run(f);
    assert_int_equal(count_op(f, "move"), 0);
    assert_int_equal(count_op(f, "substitute"), 0);
    assert_int_equal(count_op(f, "request_node"), 0);

    /* The spot node is ready: node 1's two jobs checkpoint and move. */
    r->state = TM_NODE_READY;
    r->idle_since_ms = NOW;
    f->inst[1].state = TM_INSTANCE_RUNNING;
    run(f);
    assert_int_equal(count_op(f, "move"), 1);
    const cJSON *mv = nth_op(f, "move", 0);
    assert_int_equal((int)num(mv, "node"), 1);
    assert_int_equal(cJSON_GetArraySize(obj(mv, "jobs")), 2);
    assert_int_equal((int)num(obj(mv, "inputs"), "substitute_node"), 2);
    /* counted once, as the substitution */
    assert_null(cJSON_GetObjectItemCaseSensitive(obj(mv, "inputs"), "disruption"));

    /* Then node 1 is drained and empty: released. */
    f->nodes[0].state = TM_NODE_DRAINING;
    f->nodes[0].cordoned = true;
    f->nodes[0].idle_since_ms = NOW;
    f->snap.nallocs = 0;
    f->jobs[0].state = f->jobs[1].state = TM_JOB_QUEUED;
    run(f);
    assert_int_equal(count_op(f, "move"), 0);
    assert_int_equal(count_op(f, "terminate"), 1);
    assert_int_equal((int)num(nth_op(f, "terminate", 0), "node"), 1);
}

/* While its spot substitute boots, the on-demand node takes no new work:
 * a job started there now (this one cannot even checkpoint) would keep
 * it paid for to its end.  Without the substitute it would take it. */
static void test_node_being_substituted_takes_no_new_work(void **state)
{
    struct fixture *f = *state;
    add_node(f, 1, OD8);
    run_job(f, 100, 1, 0x1, true, true);
    struct tm_snap_node *r = add_node(f, 2, SPOT8);
    r->replaces_node_id = 1;
    r->state = TM_NODE_BOOTING;
    f->inst[1].state = TM_INSTANCE_PENDING;
    add_job(f, 102, 1, false, false);
    run(f);
    assert_int_equal(count_op(f, "place"), 0);

    r->replaces_node_id = 0;
    run(f);
    assert_int_equal(count_op(f, "place"), 1);
    const cJSON *allocs = cJSON_GetObjectItemCaseSensitive(nth_op(f, "place", 0), "allocs");
    assert_int_equal((int)num(cJSON_GetArrayItem(allocs, 0), "node"), 1);
}

/* The spot node is reclaimed before it was ready: the on-demand node keeps
 * its jobs, nothing is moved. */
static void test_failed_substitute_leaves_the_old_node_running(void **state)
{
    struct fixture *f = *state;
    add_node(f, 1, OD8);
    run_job(f, 100, 1, 0x1, true, true);
    struct tm_snap_node *r = add_node(f, 2, SPOT8);
    r->replaces_node_id = 1;
    r->state = TM_NODE_BOOTING;
    f->inst[1].state = TM_INSTANCE_TERMINATED;
    f->inst[1].interrupted = true;
    run(f);
    assert_int_equal(count_op(f, "node_gone"), 1);
    assert_int_equal(count_op(f, "move"), 0);
    assert_int_equal(count_op(f, "checkpoint"), 0);
    assert_int_equal(count_op(f, "terminate"), 0);
}

/* A queued preemptible job whose deadline leaves just its runtime plus an
 * on-demand boot: switched now, and from then on routed to on-demand. */
static void test_deadline_switch_routes_the_job_to_on_demand(void **state)
{
    struct fixture *f = *state;
    struct tm_snap_job *j = add_job(f, 100, 8, true, false);
    j->estimate_ms = 3600000;
    /* no slack left: deadline = now + runtime + boot + 1 s, under a tick */
    j->deadline_ms = NOW + 3600000 + 90000 + 1000;
    run(f);
    assert_int_equal(count_op(f, "deadline_od"), 1);
    const cJSON *a = nth_op(f, "deadline_od", 0);
    assert_int_equal((int)num(a, "job"), 100);
    assert_null(cJSON_GetObjectItemCaseSensitive(a, "node"));
    const cJSON *in = obj(a, "inputs");
    assert_int_equal((int64_t)num(in, "deadline_ms"), j->deadline_ms);
    assert_int_equal((int64_t)num(in, "remaining_ms"), 3600000);
    assert_int_equal((int64_t)num(in, "boot_ms"), 90000);
    /* this pass's launch for it is on-demand already */
    assert_int_equal(count_op(f, "request_node"), 1);
    assert_string_equal(str(nth_op(f, "request_node", 0), "capacity_type"), "on_demand");

    /* The next snapshot has the switch: no second switch, and its node is
     * on-demand even with the deadline far off again. */
    j->on_demand_from_ms = NOW;
    j->deadline_ms = NOW + 100 * 3600000LL;
    run(f);
    assert_int_equal(count_op(f, "deadline_od"), 0);
    assert_int_equal(count_op(f, "request_node"), 1);
    assert_string_equal(str(nth_op(f, "request_node", 0), "pool"), "od8");
    /* without the switch the same job goes to spot */
    j->on_demand_from_ms = 0;
    run(f);
    assert_string_equal(str(nth_op(f, "request_node", 0), "pool"), "spot8");
}

/* Due for on-demand while still queued, with room on a spot node and an
 * on-demand node: placed on the on-demand node in the same pass (not on
 * spot, to be switched off it one pass later).  With its deadline far
 * off, the same job takes the spot node. */
static void test_deadline_due_job_is_placed_on_demand(void **state)
{
    struct fixture *f = *state;
    add_node(f, 1, SPOT8);
    add_node(f, 2, OD8);
    struct tm_snap_job *j = add_job(f, 100, 8, true, false);
    j->estimate_ms = 3600000;
    j->deadline_ms = NOW + 3600000 + 90000 + 1000;
    run(f);
    assert_int_equal(count_op(f, "place"), 1);
    const cJSON *allocs = cJSON_GetObjectItemCaseSensitive(nth_op(f, "place", 0), "allocs");
    assert_int_equal((int)num(cJSON_GetArrayItem(allocs, 0), "node"), 2);
    assert_int_equal(count_op(f, "deadline_od"), 0);

    j->deadline_ms = NOW + 100 * 3600000LL;
    run(f);
    allocs = cJSON_GetObjectItemCaseSensitive(nth_op(f, "place", 0), "allocs");
    assert_int_equal((int)num(cJSON_GetArrayItem(allocs, 0), "node"), 1);
}

/* Running on spot when the switch comes: it leaves the node (checkpointed
 * here), guarded on its attempt. */
static void test_deadline_switch_takes_the_job_off_spot(void **state)
{
    struct fixture *f = *state;
    add_node(f, 1, SPOT8);
    struct tm_snap_job *j = run_job(f, 100, 1, 0xff, true, true);
    j->estimate_ms = 3600000;
    j->deadline_ms = NOW + 60000; /* well inside its remaining runtime */
    run(f);
    assert_int_equal(count_op(f, "deadline_od"), 1);
    const cJSON *a = nth_op(f, "deadline_od", 0);
    assert_int_equal((int)num(a, "node"), 1);
    assert_int_equal((int64_t)num(a, "started_ms"), NOW - 600000);
    assert_non_null(strstr(str(a, "leave_reason"), "checkpointed"));
    assert_int_equal(f->plan.switched, 1);
}

/* Three od8 nodes idle past their grace, a budget of one a 10-minute
 * interval: one release; none when one happened 5 minutes ago; one again
 * when it was 11 minutes ago. */
static void test_disruption_budget_stops_the_next_termination(void **state)
{
    struct fixture *f = *state;
    for (int64_t id = 1; id <= 3; id++)
        add_node(f, id, OD8)->idle_since_ms = NOW - 600000;
    run(f);
    assert_int_equal(count_op(f, "terminate"), 1);
    const cJSON *in = obj(nth_op(f, "terminate", 0), "inputs");
    assert_string_equal(str(in, "disruption"), "idle_release");
    assert_string_equal(str(in, "pool"), "od8");

    f->disruptions[0] = (struct tm_snap_disruption){.pool = OD8, .at_ms = NOW - 300000};
    f->snap.ndisruptions = 1;
    run(f);
    assert_int_equal(count_op(f, "terminate"), 0);

    f->disruptions[0].at_ms = NOW - 660000;
    run(f);
    assert_int_equal(count_op(f, "terminate"), 1);
    /* another pool's disruption is not this pool's */
    f->disruptions[0] = (struct tm_snap_disruption){.pool = SPOT8, .at_ms = NOW - 1000};
    run(f);
    assert_int_equal(count_op(f, "terminate"), 1);
}

/* Without a budget the three go at once, as before. */
static void test_no_budget_releases_all(void **state)
{
    struct fixture *f = *state;
    for (int64_t id = 1; id <= 3; id++)
        add_node(f, id, OD8)->idle_since_ms = NOW - 600000;
    run(f);
    assert_int_equal(count_op(f, "terminate"), 3);
}

/* Both 8-GPU pools at their max with queued work: each pass writes the same
 * refusal (subject and kind), which tarmac_apply records once; one per
 * subject per pass. */
static void test_refusal_is_stable_across_passes(void **state)
{
    struct fixture *f = *state;
    for (int64_t id = 1; id <= 4; id++) {
        add_node(f, id, OD8);
        run_job(f, 100 + id, id, 0xff, false, false);
    }
    add_job(f, 200, 8, false, false);
    run(f);
    assert_int_equal(count_op(f, "request_node"), 0);
    assert_int_equal(count_op(f, "launch_refused"), 1);
    const cJSON *a = nth_op(f, "launch_refused", 0);
    char subject[64], key[32];
    snprintf(subject, sizeof(subject), "%s", str(a, "subject"));
    snprintf(key, sizeof(key), "%s", str(a, "key"));
    assert_string_equal(key, "max_nodes");
    assert_non_null(strstr(subject, "od8"));
    assert_true(num(a, "quiet_ms") > 0);
    run(f);
    assert_int_equal(count_op(f, "launch_refused"), 1);
    assert_string_equal(str(nth_op(f, "launch_refused", 0), "subject"), subject);
    assert_string_equal(str(nth_op(f, "launch_refused", 0), "key"), key);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_drain_becomes_a_cordon_with_its_reason, setup_drain,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_no_drain_unless_the_pool_asks, setup, teardown),
        cmocka_unit_test_setup_teardown(test_move_checkpoints_every_job_of_the_node, setup, teardown),
        cmocka_unit_test_setup_teardown(test_node_with_a_job_that_cannot_checkpoint_is_never_moved,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(test_substitute_launches_then_moves_then_releases, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_failed_substitute_leaves_the_old_node_running, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_deadline_switch_routes_the_job_to_on_demand, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_deadline_switch_takes_the_job_off_spot, setup, teardown),
        cmocka_unit_test_setup_teardown(test_deadline_due_job_is_placed_on_demand, setup, teardown),
        cmocka_unit_test_setup_teardown(test_node_being_substituted_takes_no_new_work, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_disruption_budget_stops_the_next_termination,
                                        setup_budget, teardown),
        cmocka_unit_test_setup_teardown(test_no_budget_releases_all, setup, teardown),
        cmocka_unit_test_setup_teardown(test_refusal_is_stable_across_passes, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
