/*
 * tests/unit/fleet/test_planner_restart.c: consolidation by restart in the
 * fleet planner (TM_PLANNER_RESTART, planner.h), with known answers.
 *
 * One type, 8 GPUs at $32 an hour on demand ($4 per GPU-hour), spot off.
 * Node 0 runs a non-preemptible 6-GPU job for 10 more hours (2 GPUs free);
 * node 1 runs one preemptible 1-GPU job that cannot checkpoint.
 */
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
#define NOW (100 * H)

struct world {
    struct tm_price_table t;
    struct tm_planner_input in;
    struct tm_planner_node n[3];
    struct tm_planner_job j[3];
    struct tm_planner_result r;
};

/* ran: node 1's job's run time so far; left: its expected work left. */
static void world(struct world *w, int64_t ran, int64_t left)
{
    memset(w, 0, sizeof(*w));
    struct tm_price_type *ty = &w->t.types[w->t.ntypes++];
    snprintf(ty->name, sizeof(ty->name), "g8");
    ty->gpus = 8;
    ty->cpu_milli = 96000;
    ty->memory_mib = 786432;
    ty->on_demand_uusd_per_hour = 32000000;
    snprintf(w->t.zones[0], sizeof(w->t.zones[0]), "a");
    w->t.nzones = 1;

    struct tm_planner_input *in = &w->in;
    in->now_ms = NOW;
    in->prices = &w->t;
    in->forecast_gpus[0] = in->forecast_gpus[1] = -1;
    in->keep_gpus[0] = in->keep_gpus[1] = -1;
    in->params.boot_ms = 180 * S;
    in->params.tick_ms = 30 * S;
    in->params.idle_grace_ms = 600 * S;
    in->params.max_nodes[0] = in->params.max_nodes[1] = 100;
    in->params.disruption_nodes = 100;
    in->params.move_cost_ms = 60 * S;
    in->params.launch_use_ms = 600 * S;
    in->params.consolidate_restart = true;

    w->n[0] = (struct tm_planner_node){.type = 0, .ready = true, .used_milli = 6000, .free_whole = 2,
                                       .jobs = 1, .busy_until_ms = NOW + 10 * H};
    w->n[1] = (struct tm_planner_node){.type = 0, .ready = true, .used_milli = 1000, .free_whole = 7,
                                       .jobs = 1, .only_preemptible = true, .busy_until_ms = NOW + left};
    w->j[0] = (struct tm_planner_job){.gpus = 6, .milli = 6000, .running = true, .node = 0,
                                      .remaining_ms = 10 * H, .attempts = 1, .ran_ms = H};
    w->j[1] = (struct tm_planner_job){.gpus = 1, .milli = 1000, .preemptible = true, .running = true,
                                      .node = 1, .remaining_ms = left, .attempts = 1, .ran_ms = ran};
    in->nodes = w->n;
    in->nnodes = 2;
    in->jobs = w->j;
    in->njobs = 2;
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

static size_t restarts(struct world *w)
{
    tm_planner_result_release(&w->r);
    assert_int_equal(tm_planner_run(&w->in, &w->r), 0);
    return count(&w->r, TM_PLANNER_RESTART);
}

/* Saving > redone: node 1 would run 4 more hours for one job that has run
 * 1 hour.  Restarted on node 0 it ends at now + 1 h + 4 h, inside node
 * 0's 10 hours, so nothing runs longer: saved 4 node-h x $32 = $128 >
 * redone 1 GPU-h x $4 = $4.  The decision states both sums. */
static void test_restart_when_saving_exceeds_redone(void **state)
{
    struct world w;
    (void)state;
    world(&w, H, 4 * H);
    assert_int_equal(restarts(&w), 1);
    const struct tm_planner_action *x = first(&w.r, TM_PLANNER_RESTART);
    assert_int_equal(x->node, 1);
    assert_int_equal(x->restarted, 1);
    assert_true(x->saving_uusd == 128000000);
    assert_true(x->cost_uusd == 4000000);
    assert_true(x->redone_milli_ms == 1000 * H);
    assert_non_null(strstr(x->reason, "saved 4.00 node-h x 32.00 - 0.00 elsewhere = 128.00 USD > "
                                      "redone 1.00 GPU-h x 4.00 = 4.00 USD"));
    /* the node that keeps running non-preemptible work is never a candidate */
    assert_int_equal(count(&w.r, TM_PLANNER_MOVE), 0);
    tm_planner_result_release(&w.r);
}

/* Saving < redone: a job that has run 40 hours with 1 hour left.  Saved
 * 1 node-h x $32 = $32 < redone 40 GPU-h x $4 = $160: kept. */
static void test_no_restart_when_redone_exceeds_saving(void **state)
{
    struct world w;
    (void)state;
    world(&w, 40 * H, H);
    w.n[0].busy_until_ms = NOW + 50 * H;
    assert_int_equal(restarts(&w), 0);
    /* 7 hours ran, 1 left: saved $32 > redone $28: restarted */
    w.j[1].ran_ms = 7 * H;
    assert_int_equal(restarts(&w), 1);
    /* 8 hours ran: $32 = $32, not strictly more: kept */
    w.j[1].ran_ms = 8 * H;
    assert_int_equal(restarts(&w), 0);
    tm_planner_result_release(&w.r);
}

/* What the nodes that take the work run longer counts against the saving:
 * node 0 ends in 2 hours, the restarted job in 5 (1 redone, 4 left), so
 * node 0 runs 3 hours longer: $128 - $96 = $32 saved > $4 redone, still
 * a restart; with node 0 ending now + 1 h: $128 - $128 = 0 < $4, none. */
static void test_target_running_longer_counts(void **state)
{
    struct world w;
    (void)state;
    world(&w, H, 4 * H);
    w.n[0].busy_until_ms = NOW + 2 * H;
    assert_int_equal(restarts(&w), 1);
    assert_true(first(&w.r, TM_PLANNER_RESTART)->saving_uusd == 32000000);
    w.n[0].busy_until_ms = NOW + H;
    assert_int_equal(restarts(&w), 0);
    tm_planner_result_release(&w.r);
}

/* consolidate_restart false (the pool forbids it, or the replay's
 * baselines), or a node marked no_restart: none. */
static void test_no_restart_when_forbidden(void **state)
{
    struct world w;
    (void)state;
    world(&w, H, 4 * H);
    w.in.params.consolidate_restart = false;
    assert_int_equal(restarts(&w), 0);
    w.in.params.consolidate_restart = true;
    w.n[1].no_restart = true;
    assert_int_equal(restarts(&w), 0);
    w.n[1].no_restart = false;
    /* no room elsewhere: none */
    w.n[0].used_milli = 8000;
    w.n[0].free_whole = 0;
    assert_int_equal(restarts(&w), 0);
    tm_planner_result_release(&w.r);
}

/* The disruption budget: none left in this interval, none restarted; with
 * one left, one node of two candidates (the one that saves more). */
static void test_disruption_budget(void **state)
{
    struct world w;
    (void)state;
    world(&w, H, 4 * H);
    w.in.params.disruption_nodes = 1;
    w.in.params.recent_terminations = 1;
    assert_int_equal(restarts(&w), 0);
    w.in.params.recent_terminations = 0;
    /* a second candidate, 2 hours left (saves $64 - $4) */
    w.n[2] = w.n[1];
    w.n[2].busy_until_ms = NOW + 2 * H;
    w.j[2] = w.j[1];
    w.j[2].node = 2;
    w.j[2].remaining_ms = 2 * H;
    w.in.nnodes = 3;
    w.in.njobs = 3;
    assert_int_equal(restarts(&w), 1);
    assert_int_equal(first(&w.r, TM_PLANNER_RESTART)->node, 1);
    /* two left: both, node 1 first, node 2's job on what node 1's left */
    w.in.params.disruption_nodes = 2;
    assert_int_equal(restarts(&w), 2);
    assert_int_equal(w.r.actions[0].node, 1);
    assert_int_equal(w.r.actions[1].node, 2);
    tm_planner_result_release(&w.r);
}

/* The attempt counter: a job at TM_PLANNER_RESTART_ATTEMPTS_MAX attempts
 * (or the caller's cap) is not restarted again. */
static void test_attempt_cap(void **state)
{
    struct world w;
    (void)state;
    world(&w, H, 4 * H);
    w.j[1].attempts = TM_PLANNER_RESTART_ATTEMPTS_MAX - 1;
    assert_int_equal(restarts(&w), 1);
    w.j[1].attempts = TM_PLANNER_RESTART_ATTEMPTS_MAX;
    assert_int_equal(restarts(&w), 0);
    w.in.params.restart_attempts_max = 5;
    assert_int_equal(restarts(&w), 1);
    tm_planner_result_release(&w.r);
}

/* A node with a checkpointable job beside the one that is not: both leave,
 * the checkpointable one redoing only its restore (move_cost_ms): redone
 * 1 GPU-h + 60 s on one GPU.  A node whose jobs all checkpoint is a move's
 * (TM_PLANNER_MOVE), not a restart. */
static void test_mixed_node(void **state)
{
    struct world w;
    (void)state;
    world(&w, H, 4 * H);
    w.n[1].jobs = 2;
    w.n[1].used_milli = 2000;
    w.n[1].free_whole = 6;
    w.j[2] = w.j[1];
    w.j[2].checkpointable = true;
    w.j[2].ran_ms = 3 * H;
    w.in.njobs = 3;
    assert_int_equal(restarts(&w), 1);
    const struct tm_planner_action *x = first(&w.r, TM_PLANNER_RESTART);
    assert_int_equal(x->restarted, 1);
    assert_true(x->redone_milli_ms == 1000 * H + 1000 * 60 * S);
    w.j[1].checkpointable = true;
    w.n[1].movable = true;
    assert_int_equal(restarts(&w), 0);
    assert_int_equal(count(&w.r, TM_PLANNER_MOVE), 1);
    tm_planner_result_release(&w.r);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_restart_when_saving_exceeds_redone),
        cmocka_unit_test(test_no_restart_when_redone_exceeds_saving),
        cmocka_unit_test(test_target_running_longer_counts),
        cmocka_unit_test(test_no_restart_when_forbidden),
        cmocka_unit_test(test_disruption_budget),
        cmocka_unit_test(test_attempt_cap),
        cmocka_unit_test(test_mixed_node),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
