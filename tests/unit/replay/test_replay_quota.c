/*
 * tests/unit/replay/test_replay_quota.c: teams in the time replay, known
 * answers on hand-built traces of two nodes of 8 GPUs and two or three
 * teams of 8 GPUs of quota each: strict quotas never borrow; tarmac's
 * quotas lend a team's idle quota and reclaim it when its owner submits
 * (a checkpointed borrower resumes with nothing redone, a preemptible one
 * is restarted and its GPU-time counted as redone); fair share reorders
 * the queue by decayed usage; the guarantee is measured.
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "controller/replay/quota_file.h"
#include "controller/replay/replay.h"

static void two_nodes(struct tm_trace *t, size_t maxjobs)
{
    memset(t, 0, sizeof(*t));
    snprintf(t->models[0], sizeof(t->models[0]), "A");
    t->nmodels = 1;
    t->nodes = calloc(2, sizeof(*t->nodes));
    t->jobs = calloc(maxjobs, sizeof(*t->jobs));
    assert_non_null(t->nodes);
    assert_non_null(t->jobs);
    t->nnodes = 2;
    for (size_t i = 0; i < 2; i++) {
        snprintf(t->nodes[i].name, sizeof(t->nodes[i].name), "n%zu", i);
        t->nodes[i].gpus = 8;
        t->nodes[i].cpu_milli = 64000;
        t->nodes[i].memory_mib = 262144;
    }
}

static void put_job(struct tm_trace *t, const char *team, int64_t submit_s, int64_t run_s, int32_t gpus)
{
    struct tm_trace_job *jb = &t->jobs[t->njobs];

    snprintf(jb->name, sizeof(jb->name), "%s-%zu", team, t->njobs);
    snprintf(jb->team, sizeof(jb->team), "%s", team);
    t->njobs++;
    jb->submit_ms = submit_s * 1000;
    jb->start_ms = jb->submit_ms;
    jb->end_ms = jb->submit_ms + run_s * 1000;
    jb->gpus = gpus;
    jb->gpu_milli = 1000;
    jb->nodes = 1;
    jb->cpu_milli = 1000;
    jb->memory_mib = 1024;
    jb->qos = TM_QOS_LS;
    jb->klass = TM_CLASS_TRAIN;
}

/* Teams a, b (and c) of 8 GPUs each, borrowing_limit 0 when strict. */
static struct tm_quota *quotas(int nteams, bool strict)
{
    static const char *const names[] = {"a", "b", "c"};
    struct tm_quota_row rows[3];
    struct tm_quota_flavor fl = {.name = TM_REPLAY_QUOTA_FLAVOR, .fleet_gpus = 16};
    struct tm_quota *q = NULL;
    char err[200];

    for (int i = 0; i < nteams; i++)
        rows[i] = (struct tm_quota_row){.team = names[i], .flavor = TM_REPLAY_QUOTA_FLAVOR, .gpus = 8,
                                        .borrowing_limit = strict ? 0 : NAN, .lending_limit = NAN,
                                        .weight = NAN};
    assert_int_equal(tm_quota_build(&fl, 1, rows, (size_t)nteams, &q, err, sizeof(err)), 0);
    return q;
}

static void run(const struct tm_trace *t, const struct tm_quota *q, enum tm_replay_team_rule rule,
                enum tm_replay_borrowers b, struct tm_replay_team_out *out, struct tm_replay_stats *st)
{
    struct tm_replay_quota tq = {.quota = q, .rule = rule, .borrowers = b,
                                 .half_life_ms = 7LL * 86400 * 1000, .bound_ms = 300000, .out = out};
    struct tm_replay_config cfg = {.policy = rule == TM_REPLAY_TEAMS_FAIR ? TM_POLICY_MULTIFACTOR
                                                                         : TM_POLICY_TARMAC,
                                   .exact_estimates = true, .since_ms = -1, .max_runtime_ms = -1,
                                   .teams = &tq};

    assert_int_equal(tm_replay_time(t, &cfg, st), 0);
}

/* b runs two 8-GPU jobs while a is idle: strict quotas keep b's second job
 * waiting for b's own quota; tarmac lends a's idle quota, and with nobody
 * to reclaim for, nothing is stopped. */
static void test_strict_never_borrows(void **state)
{
    struct tm_trace t;
    struct tm_replay_team_out out[4];
    struct tm_replay_stats st;
    struct tm_quota *qs = quotas(2, true), *qt = quotas(2, false);

    (void)state;
    two_nodes(&t, 4);
    put_job(&t, "b", 0, 100, 8);
    put_job(&t, "b", 0, 100, 8);
    run(&t, qs, TM_REPLAY_TEAMS_QUOTA, TM_REPLAY_BORROW_CHECKPOINT, out, &st);
    assert_int_equal(out[1].jobs, 2);
    assert_true(fabs(out[1].jct_sum_s - 300.0) < 1e-6); /* 100 + 200 */
    assert_int_equal(st.reclaims, 0);
    run(&t, qt, TM_REPLAY_TEAMS_QUOTA, TM_REPLAY_BORROW_CHECKPOINT, out, &st);
    assert_true(fabs(out[1].jct_sum_s - 200.0) < 1e-6); /* both at once */
    assert_int_equal(st.reclaims, 0);
    assert_true(fabs(st.redone_gpu_hours) < 1e-9);
    tm_quota_free(qs);
    tm_quota_free(qt);
    tm_trace_release(&t);
}

/* b borrows a's idle quota; a submits at 100 s: b's borrowed job is
 * reclaimed at once and a's job starts at 100 s.  Checkpointed, b's job
 * resumes when a's ends (200 s) with 900 s left; restarted, with 1000 s
 * and 8 GPUs x 100 s redone. */
static void test_lend_and_reclaim(void **state)
{
    struct tm_trace t;
    struct tm_replay_team_out out[4];
    struct tm_replay_stats st;
    struct tm_quota *q = quotas(2, false);

    (void)state;
    two_nodes(&t, 4);
    put_job(&t, "b", 0, 1000, 8);
    put_job(&t, "b", 0, 1000, 8);
    put_job(&t, "a", 100, 100, 8);
    run(&t, q, TM_REPLAY_TEAMS_QUOTA, TM_REPLAY_BORROW_CHECKPOINT, out, &st);
    assert_int_equal(st.reclaims, 1);
    assert_int_equal(out[0].jobs, 1);
    assert_true(fabs(out[0].jct_sum_s - 100.0) < 1e-6);
    assert_true(fabs(out[1].jct_sum_s - (1000.0 + 1100.0)) < 1e-6);
    assert_true(fabs(st.redone_gpu_hours) < 1e-9);
    assert_true(st.guarantee_met > 0.999);
    run(&t, q, TM_REPLAY_TEAMS_QUOTA, TM_REPLAY_BORROW_PREEMPT, out, &st);
    assert_int_equal(st.reclaims, 1);
    assert_true(fabs(out[1].jct_sum_s - (1000.0 + 1200.0)) < 1e-6);
    assert_true(fabs(st.redone_gpu_hours - 8 * 100 / 3600.0) < 1e-9);
    /* One queue without quotas: a waits for b's first job to end. */
    run(&t, q, TM_REPLAY_TEAMS_MEASURE, TM_REPLAY_BORROW_CHECKPOINT, out, &st);
    assert_int_equal(st.reclaims, 0);
    assert_true(fabs(out[0].jct_sum_s - 1000.0) < 1e-6);
    /* a's within-quota demand waited 900 s, past the 300 s bound for
     * 600 of them. */
    assert_true(fabs(out[0].demand_s - 900.0) < 1e-6);
    assert_true(fabs(out[0].met_s - 300.0) < 1e-6);
    tm_quota_free(q);
    tm_trace_release(&t);
}

/* Three teams: c borrows a's and b's idle quota, then a and b submit in
 * turn; each reclaim stops one of c's borrowed jobs for its owner, and no
 * job is reclaimed twice (no cycle). */
static void test_three_no_cycle(void **state)
{
    struct tm_trace t;
    struct tm_replay_team_out out[4];
    struct tm_replay_stats st;
    struct tm_quota_row rows[3];
    struct tm_quota_flavor fl = {.name = TM_REPLAY_QUOTA_FLAVOR, .fleet_gpus = 16};
    struct tm_quota *q = NULL;
    char err[200];

    (void)state;
    for (int i = 0; i < 3; i++)
        rows[i] = (struct tm_quota_row){.team = (const char *[]){"a", "b", "c"}[i],
                                        .flavor = TM_REPLAY_QUOTA_FLAVOR, .gpus = i == 2 ? 0 : 8,
                                        .borrowing_limit = NAN, .lending_limit = NAN, .weight = NAN};
    assert_int_equal(tm_quota_build(&fl, 1, rows, 3, &q, err, sizeof(err)), 0);
    two_nodes(&t, 4);
    put_job(&t, "c", 0, 1000, 8);
    put_job(&t, "c", 0, 1000, 8);
    put_job(&t, "a", 100, 100, 8);
    put_job(&t, "b", 150, 100, 8);
    run(&t, q, TM_REPLAY_TEAMS_QUOTA, TM_REPLAY_BORROW_CHECKPOINT, out, &st);
    assert_int_equal(st.reclaims, 2);
    assert_true(fabs(out[0].jct_sum_s - 100.0) < 1e-6);
    assert_true(fabs(out[1].jct_sum_s - 100.0) < 1e-6);
    assert_int_equal(out[2].jobs, 2);
    assert_int_equal(st.unfinished, 0);
    tm_quota_free(q);
    tm_trace_release(&t);
}

/* Fair share: a has run for a long time and b not at all; when one node
 * frees, b's job goes first though a's was submitted earlier. */
static void test_fair_share_order(void **state)
{
    struct tm_trace t;
    struct tm_replay_team_out out[4];
    struct tm_replay_stats st;
    struct tm_quota *q = quotas(2, false);

    (void)state;
    two_nodes(&t, 6);
    put_job(&t, "a", 0, 36000, 8);
    put_job(&t, "a", 0, 18000, 8);
    put_job(&t, "a", 10, 100, 8);
    put_job(&t, "b", 20, 100, 8);
    run(&t, q, TM_REPLAY_TEAMS_FAIR, TM_REPLAY_BORROW_CHECKPOINT, out, &st);
    /* b starts at 18000 s, a's third job after it. */
    assert_true(fabs(out[1].jct_sum_s - (18100.0 - 20.0)) < 1e-6);
    tm_quota_free(q);
    tm_trace_release(&t);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_strict_never_borrows),
        cmocka_unit_test(test_lend_and_reclaim),
        cmocka_unit_test(test_three_no_cycle),
        cmocka_unit_test(test_fair_share_order),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
