/*
 * tests/unit/sched/test_quota.c: known answers for the team quotas
 * (controller/sched/quota.h): borrowing within limits, lending limits, the
 * org level, reclaim order and budget, a non-preemptible borrower never
 * reclaimed, three teams with no reclaim cycle over repeated passes, the
 * decay of usage and the fair-share order, and validation errors naming
 * the field.
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "core/err.h"
#include "controller/sched/quota.h"
#include "controller/sched/scheduler.h"

/* This cmocka has no assert_double_equal. */
#define assert_near(a, b, eps) near_((a), (b), (eps), __FILE__, __LINE__)
static void near_(double a, double b, double eps, const char *file, int line)
{
    if (!(fabs(a - b) <= eps))
        fail_msg("%s:%d: %.9g is not %.9g (within %g)", file, line, a, b, eps);
}

#define ROW(t, o, f, g) {(t), (o), (f), (g), NAN, NAN, NAN}

static struct tm_quota *build(int64_t h100, const struct tm_quota_row *rows, size_t n)
{
    const struct tm_quota_flavor flavors[] = {
        {"H100", h100, false},
        {"A100", 16, true},
    };
    struct tm_quota *q = NULL;
    char err[256] = "";
    int rc = tm_quota_build(flavors, 2, rows, n, &q, err, sizeof(err));

    if (rc)
        fail_msg("build: %s", err);
    return q;
}

static struct tm_quota_job job(const struct tm_quota *q, const char *team, int64_t gpus)
{
    return (struct tm_quota_job){
        .team = tm_quota_team(q, team), .flavor = 0, .gpus = gpus, .preemptible = true,
    };
}

static struct tm_quota_answer admit(const struct tm_quota *q, const struct tm_quota_usage *u,
                                    struct tm_quota_job j)
{
    struct tm_quota_answer a;

    assert_int_equal(tm_quota_admit(q, u, &j, &a), 0);
    return a;
}

/* Team a (16, may borrow 8) runs 16 of H100; the fleet has 16 GPUs under
 * no quota.  a borrows 8 from that free pool, then its borrowing limit
 * stops it; b, idle, starts within its quota. */
static void test_borrow_within_limits(void **state)
{
    struct tm_quota_row rows[] = {ROW("a", NULL, "H100", 16), ROW("b", NULL, "H100", 16),
                                  ROW("c", NULL, "H100", 16)};
    rows[0].borrowing_limit = 8;
    struct tm_quota *q = build(64, rows, 3);
    struct tm_quota_job run[] = {job(q, "a", 16)};
    struct tm_quota_usage *u;
    struct tm_quota_answer ans;
    (void)state;

    assert_int_equal(tm_quota_usage_new(q, run, 1, NULL, 0, &u), 0);
    ans = admit(q, u, job(q, "a", 8));
    assert_int_equal(ans.verdict, TM_QUOTA_BORROW);
    assert_int_equal(ans.borrowed_gpus, 8);
    assert_int_equal(ans.nlenders, 1);
    assert_int_equal(ans.lenders[0].node, -1);
    assert_int_equal(ans.lenders[0].gpus, 8);
    assert_string_equal(ans.why, "borrows 8 GPUs of H100 above team a's quota of 16: 8 from the free pool");
    struct tm_quota_job j = job(q, "a", 8);
    tm_quota_take(q, u, &j, &ans);
    assert_int_equal(tm_quota_used(u, 0, 0), 24);
    assert_int_equal(tm_quota_borrowing(u, 0, 0), 8);

    ans = admit(q, u, job(q, "a", 4));
    assert_int_equal(ans.verdict, TM_QUOTA_WAIT);
    assert_string_equal(ans.why,
                        "waits on quota: team a uses 24 of its 16 GPUs of H100; borrowing limit 8 reached");
    ans = admit(q, u, job(q, "b", 16));
    assert_int_equal(ans.verdict, TM_QUOTA_WITHIN);
    assert_string_equal(ans.why, "within team b's quota of H100: 16 of 16 GPUs");
    tm_quota_usage_free(u);

    /* No free pool: the idle quota of b, then c (the larger offer first,
     * then by order) is lent. */
    struct tm_quota *q2 = build(48, rows, 3);
    struct tm_quota_job run2[] = {job(q2, "a", 16), job(q2, "c", 4)};
    assert_int_equal(tm_quota_usage_new(q2, run2, 2, NULL, 0, &u), 0);
    ans = admit(q2, u, job(q2, "a", 8));
    assert_int_equal(ans.verdict, TM_QUOTA_BORROW);
    assert_int_equal(ans.nlenders, 1);
    assert_string_equal(tm_quota_name(q2, ans.lenders[0].node), "b");
    tm_quota_usage_free(u);
    tm_quota_free(q2);
    tm_quota_free(q);
}

/* a lends at most 4 of its 16 idle GPUs; b, at its quota, gets 4 and no
 * more.  Work neither preemptible nor checkpointable may not borrow H100
 * (its pool does not allow it) but may borrow A100. */
static void test_lending_limit(void **state)
{
    struct tm_quota_row rows[] = {ROW("a", NULL, "H100", 16), ROW("b", NULL, "H100", 8),
                                  ROW("a", NULL, "A100", 8), ROW("b", NULL, "A100", 8)};
    rows[0].lending_limit = 4;
    struct tm_quota *q = build(24, rows, 4);
    struct tm_quota_job run[] = {job(q, "b", 8)};
    struct tm_quota_usage *u;
    struct tm_quota_answer ans;
    (void)state;

    assert_int_equal(tm_quota_usage_new(q, run, 1, NULL, 0, &u), 0);
    ans = admit(q, u, job(q, "b", 8));
    assert_int_equal(ans.verdict, TM_QUOTA_WAIT);
    assert_string_equal(ans.why, "waits on quota: team b uses 8 of its 8 GPUs of H100; no idle quota of H100 to borrow");
    ans = admit(q, u, job(q, "b", 4));
    assert_int_equal(ans.verdict, TM_QUOTA_BORROW);
    assert_string_equal(ans.why, "borrows 4 GPUs of H100 above team b's quota of 8: 4 from team a");
    assert_int_equal(tm_quota_lent(u, 0, 0), 0);
    struct tm_quota_job j = job(q, "b", 4);
    tm_quota_take(q, u, &j, &ans);
    assert_int_equal(tm_quota_lent(u, 0, 0), 4);

    struct tm_quota_job np = job(q, "b", 4);
    np.preemptible = false;
    ans = admit(q, u, np);
    assert_int_equal(ans.verdict, TM_QUOTA_WAIT);
    assert_non_null(strstr(ans.why, "neither preemptible nor checkpointable may not borrow H100"));
    np.flavor = 1;
    np.gpus = 12;
    ans = admit(q, u, np);
    assert_int_equal(ans.verdict, TM_QUOTA_BORROW);
    tm_quota_usage_free(u);
    tm_quota_free(q);
}

/* Org x has 8 GPUs of its own and teams x1, x2 of 8 each; org y's team y1
 * has 16.  x1 borrows the org's own quota first, then its sibling's, then
 * the other org's; org x's borrowing limit bounds the last. */
static void test_org_level(void **state)
{
    struct tm_quota_row rows[] = {ROW("x1", "x", "H100", 8), ROW("x2", "x", "H100", 8),
                                  ROW("x", NULL, "H100", 8), ROW("y1", "y", "H100", 16)};
    struct tm_quota *q = build(40, rows, 4);
    struct tm_quota_job run[] = {job(q, "x1", 8)};
    struct tm_quota_usage *u;
    struct tm_quota_answer ans;
    struct tm_quota_job j = job(q, "x1", 8);
    int32_t x = tm_quota_parent(q, tm_quota_team(q, "x1"));
    (void)state;

    assert_string_equal(tm_quota_name(q, x), "x");
    assert_true(tm_quota_is_org(q, x));
    assert_int_equal(tm_quota_parent(q, tm_quota_team(q, "x2")), x);
    assert_int_equal(tm_quota_team(q, "x"), -1);
    assert_int_equal(tm_quota_subtree(q, x, 0), 24);
    assert_int_equal(tm_quota_guaranteed(q, x, 0), 8);
    assert_int_equal(tm_quota_overcommit(q, 0), 0);

    assert_int_equal(tm_quota_usage_new(q, run, 1, NULL, 0, &u), 0);
    ans = admit(q, u, j);
    assert_int_equal(ans.verdict, TM_QUOTA_BORROW);
    assert_string_equal(ans.why, "borrows 8 GPUs of H100 above team x1's quota of 8: 8 from org x");
    tm_quota_take(q, u, &j, &ans);
    ans = admit(q, u, j);
    assert_string_equal(ans.why, "borrows 8 GPUs of H100 above team x1's quota of 8: 8 from team x2");
    tm_quota_take(q, u, &j, &ans);
    ans = admit(q, u, j);
    assert_int_equal(ans.verdict, TM_QUOTA_BORROW);
    /* Org y's offer is named by whose quota it is: its team y1's. */
    assert_int_equal(ans.lenders[0].node, tm_quota_team(q, "y1"));
    assert_string_equal(ans.why, "borrows 8 GPUs of H100 above team x1's quota of 8: 8 from team y1");
    assert_int_equal(tm_quota_used(u, x, 0), 24);
    assert_int_equal(tm_quota_borrowing(u, x, 0), 0);
    assert_int_equal(tm_quota_lent(u, tm_quota_team(q, "x2"), 0), 8);
    assert_int_equal(tm_quota_lent(u, x, 0), 0);
    tm_quota_take(q, u, &j, &ans);
    int32_t y = tm_quota_parent(q, tm_quota_team(q, "y1"));
    assert_int_equal(tm_quota_borrowing(u, x, 0), 8);
    assert_int_equal(tm_quota_lent(u, y, 0), 8);
    assert_int_equal(tm_quota_lent(u, tm_quota_team(q, "y1"), 0), 8);
    assert_int_equal(tm_quota_lent(u, tm_quota_team(q, "x2"), 0), 8);

    /* x2 wants its quota back: y's idle quota still covers x1's
     * borrowing (8 of its 16 are lent), so x2 starts with nothing
     * stopped. */
    ans = admit(q, u, job(q, "x2", 8));
    assert_int_equal(ans.verdict, TM_QUOTA_WITHIN);
    tm_quota_usage_free(u);

    /* With y busy, x1's borrowed job is reclaimed for x2. */
    struct tm_quota_job busy[] = {job(q, "x1", 8), job(q, "x1", 8), job(q, "x1", 8),
                                  job(q, "y1", 16)};
    struct tm_quota_victim v[4];
    struct tm_quota_job want = job(q, "x2", 8);
    int32_t budget = 4;
    bool complete;
    char why[TM_QUOTA_WHY_MAX];
    busy[2].borrowed = true;
    assert_int_equal(tm_quota_usage_new(q, busy, 4, &want, 1, &u), 0);
    ans = admit(q, u, want);
    assert_int_equal(ans.verdict, TM_QUOTA_RECLAIM);
    assert_int_equal(tm_quota_lent(u, tm_quota_team(q, "x2"), 0), 8);
    assert_int_equal(tm_quota_reclaim(q, u, busy, 4, &want, &budget, v, &complete, why, sizeof(why)), 1);
    assert_true(complete);
    assert_int_equal(v[0].running, 2);
    assert_int_equal(v[0].for_team, tm_quota_team(q, "x2"));
    tm_quota_usage_free(u);
    tm_quota_free(q);

    /* Org y with 4 GPUs of its own lends them before its team's. */
    struct tm_quota_row rows3[] = {ROW("x1", "x", "H100", 8), ROW("y1", "y", "H100", 16),
                                   ROW("y", NULL, "H100", 4)};
    q = build(28, rows3, 3);
    struct tm_quota_job run3[] = {job(q, "x1", 8), job(q, "y1", 2)};
    assert_int_equal(tm_quota_usage_new(q, run3, 2, NULL, 0, &u), 0);
    ans = admit(q, u, job(q, "x1", 8));
    assert_string_equal(ans.why, "borrows 8 GPUs of H100 above team x1's quota of 8: 4 from org y, 4 from team y1");
    tm_quota_usage_free(u);
    tm_quota_free(q);

    /* The same with org x allowed to borrow 4 beyond its 24. */
    rows[2].borrowing_limit = 4;
    q = build(40, rows, 4);
    struct tm_quota_job run2[] = {job(q, "x1", 24)};
    assert_int_equal(tm_quota_usage_new(q, run2, 1, NULL, 0, &u), 0);
    ans = admit(q, u, job(q, "x1", 4));
    assert_int_equal(ans.verdict, TM_QUOTA_BORROW);
    ans = admit(q, u, job(q, "x1", 8));
    assert_int_equal(ans.verdict, TM_QUOTA_WAIT);
    assert_string_equal(ans.why,
                        "waits on quota: team x1 uses 24 of its 8 GPUs of H100; org x's borrowing limit 4 reached");
    tm_quota_usage_free(u);
    tm_quota_free(q);
}

/* b, with no quota, borrows all 16 of a's: four jobs of 4 GPUs, one of
 * them neither preemptible nor checkpointable (A100's pool would allow
 * it; here it is marked borrowed as if H100's had).  a asks 12: the
 * checkpointable job goes first, then the preemptible ones by least
 * GPU-time redone; the fourth is never touched. */
static void test_reclaim_order(void **state)
{
    struct tm_quota_row rows[] = {ROW("a", NULL, "H100", 16), ROW("b", NULL, "H100", 0)};
    struct tm_quota *q = build(16, rows, 2);
    struct tm_quota_job run[4];
    struct tm_quota_victim v[8];
    struct tm_quota_usage *u;
    struct tm_quota_answer ans;
    char why[TM_QUOTA_WHY_MAX];
    bool complete;
    int32_t budget = 10;
    (void)state;

    for (int i = 0; i < 4; i++) {
        run[i] = job(q, "b", 4);
        run[i].borrowed = true;
    }
    run[0].redo_gpu_ms = 100;
    run[1].checkpointable = true;
    run[1].preemptible = false;
    run[1].redo_gpu_ms = 500;
    run[2].redo_gpu_ms = 50;
    run[3].preemptible = false;
    struct tm_quota_job want = job(q, "a", 12);
    assert_int_equal(tm_quota_usage_new(q, run, 4, &want, 1, &u), 0);
    assert_int_equal(tm_quota_lent(u, 0, 0), 16);
    ans = admit(q, u, want);
    assert_int_equal(ans.verdict, TM_QUOTA_RECLAIM);
    assert_string_equal(ans.why, "waits on quota: team a uses 0 of its 16 GPUs of H100; the rest is lent: reclaim");
    assert_int_equal(tm_quota_reclaim(q, u, run, 4, &want, &budget, v, &complete, why, sizeof(why)), 3);
    assert_true(complete);
    assert_int_equal(budget, 7);
    assert_int_equal(v[0].running, 1);
    assert_true(v[0].checkpoint);
    assert_int_equal(v[0].redo_gpu_ms, 0);
    assert_int_equal(v[1].running, 2);
    assert_int_equal(v[1].redo_gpu_ms, 50);
    assert_int_equal(v[2].running, 0);
    assert_int_equal(v[2].redo_gpu_ms, 100);
    for (int i = 0; i < 3; i++)
        assert_int_equal(v[i].for_team, 0);
    assert_string_equal(why, "reclaims 3 borrowed jobs for team a's quota of H100");
    /* Now within: its quota is free. */
    ans = admit(q, u, want);
    assert_int_equal(ans.verdict, TM_QUOTA_WITHIN);
    /* A victim requeued is not placed back on a's quota in this pass. */
    ans = admit(q, u, run[0]);
    assert_int_equal(ans.verdict, TM_QUOTA_WAIT);
    tm_quota_usage_free(u);

    /* A budget of 2: two stop, the job's quota is freed over the next
     * passes, and its demand keeps what is freed from being lent. */
    budget = 2;
    assert_int_equal(tm_quota_usage_new(q, run, 4, &want, 1, &u), 0);
    assert_int_equal(tm_quota_reclaim(q, u, run, 4, &want, &budget, v, &complete, why, sizeof(why)), 2);
    assert_false(complete);
    assert_int_equal(budget, 0);
    assert_int_equal(v[0].running, 1);
    assert_int_equal(v[1].running, 2);
    assert_int_equal(tm_quota_reclaim(q, u, run, 4, &want, &budget, v, &complete, why, sizeof(why)), 0);
    assert_string_equal(why, "waits on quota: team a's quota of H100 is lent; the disruption budget of this pass is spent");
    tm_quota_usage_free(u);

    /* a asks all 16: the non-preemptible borrower keeps its 4, a waits. */
    budget = 10;
    want.gpus = 16;
    assert_int_equal(tm_quota_usage_new(q, run, 4, &want, 1, &u), 0);
    assert_int_equal(tm_quota_reclaim(q, u, run, 4, &want, &budget, v, &complete, why, sizeof(why)), 3);
    assert_false(complete);
    assert_int_equal(tm_quota_reclaim(q, u, run, 4, &want, &budget, v, &complete, why, sizeof(why)), 0);
    assert_string_equal(why, "waits on quota: team a's quota of H100 is lent to work that is never "
                             "reclaimed (4 GPUs neither preemptible nor checkpointable)");
    tm_quota_usage_free(u);
    tm_quota_free(q);
}

/*
 * Three teams of 8 GPUs on a fleet of 24; a starts alone and borrows all
 * of b's and c's quota in 4-GPU jobs, then b and c queue without end, and
 * so does a.  Each pass admits the queue round robin (a, b, c), reclaims
 * with a budget of 2, starts what fits, and requeues the victims to their
 * team.  The answer: 4 reclaims (a's borrowed 16 GPUs, 2 jobs for b and 2
 * for c), none after, every team at its 8, and never a job borrowing a
 * team's quota in the pass that reclaimed it.
 */
#define SIM_JOBS 64
static void test_three_teams_no_cycle(void **state)
{
    struct tm_quota_row rows[] = {ROW("a", NULL, "H100", 8), ROW("b", NULL, "H100", 8),
                                  ROW("c", NULL, "H100", 8)};
    struct tm_quota *q = build(24, rows, 3);
    struct tm_quota_job run[SIM_JOBS];
    size_t nrun = 0;
    int reclaims = 0, late_reclaims = 0;
    (void)state;

    for (int i = 0; i < 6; i++) {
        run[nrun] = job(q, "a", 4);
        run[nrun].borrowed = i >= 2;
        run[nrun].redo_gpu_ms = 1000 * (i + 1);
        nrun++;
    }
    for (int pass = 0; pass < 20; pass++) {
        struct tm_quota_job queue[9];
        struct tm_quota_victim v[4];
        struct tm_quota_usage *u;
        int32_t budget = 2;
        int64_t free_gpus = 24;
        bool stop[SIM_JOBS] = {false}, reclaimed_for[3] = {false};
        char why[TM_QUOTA_WHY_MAX];
        struct tm_quota_job started[9];
        size_t nstarted = 0;

        for (int k = 0; k < 9; k++)
            queue[k] = job(q, (const char *[]){"a", "b", "c"}[k % 3], 4);
        for (size_t i = 0; i < nrun; i++)
            free_gpus -= run[i].gpus;
        assert_int_equal(tm_quota_usage_new(q, run, nrun, queue, 9, &u), 0);
        for (int k = 0; k < 9; k++) {
            struct tm_quota_answer ans = admit(q, u, queue[k]);
            bool complete;

            if (ans.verdict == TM_QUOTA_BORROW)
                for (size_t l = 0; l < ans.nlenders; l++)
                    assert_true(ans.lenders[l].node < 0 || !reclaimed_for[ans.lenders[l].node]);
            if (ans.verdict == TM_QUOTA_RECLAIM) {
                int n = tm_quota_reclaim(q, u, run, nrun, &queue[k], &budget, v, &complete, why,
                                         sizeof(why));
                assert_true(n >= 0);
                for (int i = 0; i < n; i++) {
                    assert_int_not_equal(run[v[i].running].team, queue[k].team);
                    stop[v[i].running] = true;
                }
                reclaims += n;
                late_reclaims += pass >= 4 ? n : 0;
                if (n > 0)
                    reclaimed_for[queue[k].team] = true;
                /* Held for the job: its GPUs free when the victims stop. */
                if (complete)
                    tm_quota_take(q, u, &queue[k], &ans);
                continue;
            }
            if ((ans.verdict == TM_QUOTA_WITHIN || ans.verdict == TM_QUOTA_BORROW) &&
                free_gpus >= queue[k].gpus) {
                tm_quota_take(q, u, &queue[k], &ans);
                free_gpus -= queue[k].gpus;
                started[nstarted] = queue[k];
                started[nstarted++].borrowed = ans.verdict == TM_QUOTA_BORROW;
            }
        }
        tm_quota_usage_free(u);
        size_t w = 0;
        for (size_t i = 0; i < nrun; i++)
            if (!stop[i])
                run[w++] = run[i];
        nrun = w;
        for (size_t i = 0; i < nstarted; i++)
            run[nrun++] = started[i];
        assert_true(nrun < SIM_JOBS);
    }
    int64_t used[3] = {0};
    for (size_t i = 0; i < nrun; i++)
        used[run[i].team] += run[i].gpus;
    assert_int_equal(reclaims, 4);
    assert_int_equal(late_reclaims, 0);
    assert_int_equal(used[0], 8);
    assert_int_equal(used[1], 8);
    assert_int_equal(used[2], 8);
    tm_quota_free(q);
}

/* Half-life of one hour: 1000 GPU-ms halves in an hour, quarters in two;
 * one GPU run for an hour from nothing is h / (2 ln 2); advancing in two
 * steps equals one step. */
static void test_decay(void **state)
{
    struct tm_quota_row rows[] = {ROW("a", NULL, "H100", 16), ROW("b", NULL, "H100", 48)};
    struct tm_quota *q = build(64, rows, 2);
    const int64_t h = 3600 * 1000;
    double usage[3] = {1000.0, 0.0, 0.0}, two[3] = {1000.0, 0.0, 0.0};
    int64_t gpus[3] = {0, 1, 0};
    (void)state;

    assert_near(tm_quota_decay(1000.0, h, h), 500.0, 1e-9);
    assert_near(tm_quota_decay(1000.0, 2 * h, h), 250.0, 1e-9);
    assert_near(tm_quota_decay(1000.0, h, 0), 1000.0, 0);
    tm_quota_share_advance(q, usage, gpus, h, h);
    assert_near(usage[0], 500.0, 1e-9);
    assert_near(usage[1], (double)h / (2.0 * log(2.0)), 1e-3);
    assert_near(usage[1], 2596851.07, 0.01);
    tm_quota_share_advance(q, two, gpus, h / 3, h);
    tm_quota_share_advance(q, two, gpus, h - h / 3, h);
    assert_near(two[0], usage[0], 1e-9);
    assert_near(two[1], usage[1], 1e-6);
    /* Without decay: a plain sum. */
    double flat[3] = {0};
    tm_quota_share_advance(q, flat, gpus, h, 0);
    assert_near(flat[1], (double)h, 0);

    /* a holds a quarter of the quota, b three quarters: usage 100 and 200
     * give keys 400 and 266.7, b first; a weight of 2 for a turns it. */
    double use[3] = {100.0, 200.0, 5.0};
    assert_near(tm_quota_fair_key(q, use, 0), 400.0, 1e-9);
    assert_true(tm_quota_fair_cmp(q, use, 1, 0) < 0);
    /* The team of no quota comes after both whatever its usage. */
    assert_true(isinf(tm_quota_fair_key(q, use, 2)));
    assert_true(tm_quota_fair_cmp(q, use, 0, 2) < 0);
    tm_quota_free(q);

    /* Proportional quotas add up to the fleet. */
    int64_t out[3];
    tm_quota_proportional((const double[]){1, 1, 1}, 3, 8, out);
    assert_int_equal(out[0], 3);
    assert_int_equal(out[1], 3);
    assert_int_equal(out[2], 2);
    tm_quota_proportional((const double[]){0.5, 0.2, 0.3}, 3, 384, out);
    assert_int_equal(out[0], 192);
    assert_int_equal(out[1], 77);
    assert_int_equal(out[2], 115);
    tm_quota_proportional((const double[]){0, -1, 2}, 3, 7, out);
    assert_int_equal(out[0] + out[1], 0);
    assert_int_equal(out[2], 7);

    rows[0].weight = 2;
    q = build(64, rows, 2);
    assert_true(tm_quota_fair_cmp(q, use, 0, 1) < 0);
    tm_quota_free(q);
}

static void expect_refused(const struct tm_quota_row *rows, size_t n, const char *want)
{
    const struct tm_quota_flavor flavors[] = {{"H100", 64, false}};
    struct tm_quota *q = (struct tm_quota *)&q;
    char err[256] = "";

    assert_int_equal(tm_quota_build(flavors, 1, rows, n, &q, err, sizeof(err)), TM_EINVAL);
    assert_ptr_equal(q, (struct tm_quota *)&q);
    if (!strstr(err, want))
        fail_msg("error \"%s\" lacks \"%s\"", err, want);
}

static void test_validation(void **state)
{
    (void)state;
    struct tm_quota_row neg[] = {ROW("a", NULL, "H100", -1)};
    expect_refused(neg, 1, "quotas[0].gpus: -1 is negative");
    struct tm_quota_row frac[] = {ROW("a", NULL, "H100", 8), ROW("b", NULL, "H100", 1.5)};
    expect_refused(frac, 2, "quotas[1].gpus: 1.5 is not a whole number of GPUs");
    struct tm_quota_row bl[] = {ROW("a", NULL, "H100", 8)};
    bl[0].borrowing_limit = 2.5;
    expect_refused(bl, 1, "quotas[0].borrowing_limit: 2.5 is not a whole number");
    struct tm_quota_row ll[] = {ROW("a", NULL, "H100", 8)};
    ll[0].lending_limit = -4;
    expect_refused(ll, 1, "quotas[0].lending_limit: -4 is negative");
    struct tm_quota_row flavor[] = {ROW("a", NULL, "V100", 8)};
    expect_refused(flavor, 1, "quotas[0].flavor: unrecognized GPU model or pool group \"V100\"");
    struct tm_quota_row self[] = {ROW("ml", "ml", "H100", 8)};
    expect_refused(self, 1, "quotas[0].org: \"ml\" contains itself");
    struct tm_quota_row cycle[] = {ROW("a", "b", "H100", 8), ROW("b", "a", "H100", 8)};
    expect_refused(cycle, 2, "a cycle of orgs");
    struct tm_quota_row deep[] = {ROW("a", "b", "H100", 8), ROW("b", "c", "H100", 8)};
    expect_refused(deep, 2, "orgs nest two levels at most");
    struct tm_quota_row dup[] = {ROW("a", NULL, "H100", 8), ROW("a", NULL, "H100", 4)};
    expect_refused(dup, 2, "quotas[1]: \"a\" has a quota of H100 twice");
    struct tm_quota_row two[] = {ROW("a", "x", "H100", 8), ROW("a", "y", "H100", 4)};
    expect_refused(two, 2, "quotas[1].org: \"a\" is already in org \"x\" (quotas[0])");
    struct tm_quota_row w[] = {ROW("a", NULL, "H100", 8)};
    w[0].weight = 0;
    expect_refused(w, 1, "quotas[0].weight: 0 is not a positive number");
    struct tm_quota_row noname[] = {ROW("", NULL, "H100", 8)};
    expect_refused(noname, 1, "quotas[0].team: missing");
    struct tm_quota_row nogpus[] = {ROW("a", NULL, "H100", NAN)};
    expect_refused(nogpus, 1, "quotas[0].gpus: missing");

    /* Above the fleet: accepted, and said. */
    struct tm_quota_row over[] = {ROW("a", NULL, "H100", 48), ROW("b", NULL, "H100", 32)};
    struct tm_quota *q = build(64, over, 2);
    assert_int_equal(tm_quota_overcommit(q, 0), 16);
    assert_int_equal(tm_quota_overcommit(q, 1), 0);
    assert_int_equal(tm_quota_overcommit_total(q), 16);
    char line[128];
    tm_quota_overcommit_say(q, line, sizeof(line));
    assert_string_equal(line, "quotas exceed the fleet: H100 by 16 GPUs");
    assert_int_equal(tm_quota_team(q, "nobody"), (int32_t)tm_quota_nnodes(q) - 1);
    assert_string_equal(tm_quota_name(q, tm_quota_team(q, NULL)), TM_QUOTA_NO_TEAM);
    tm_quota_free(q);
}

static uint64_t rnd(uint64_t *x)
{
    *x ^= *x << 13;
    *x ^= *x >> 7;
    *x ^= *x << 17;
    return *x;
}

/*
 * Random fleets of teams (some in orgs, with limits) under a queue that
 * never empties, 30 passes each: every answer keeps its promises.  A
 * borrow names lenders that add up to what it borrows, never its own team
 * nor a team reclaimed for in the pass, and stays within its limit; a
 * victim was borrowed, preemptible or checkpointable, of another team; a
 * pass stops no more than its budget; and the last ten passes reclaim
 * nothing (no cycle once demand is steady).
 */
#define RJOBS 256
static void test_random_invariants(void **state)
{
    static const char *names[] = {"t0", "t1", "t2", "t3", "t4", "t5"};
    static const char *orgs[] = {NULL, "o0", "o1"};
    uint64_t seed = 0x9e3779b97f4a7c15ull;
    int borrows = 0, reclaims = 0;
    (void)state;

    for (int round = 0; round < 60; round++) {
        struct tm_quota_row rows[8];
        size_t nt = 3 + rnd(&seed) % 4, nrows = 0;
        int64_t fleet = 0;

        for (size_t t = 0; t < nt; t++) {
            rows[nrows] = (struct tm_quota_row)ROW(names[t], orgs[rnd(&seed) % 3], "H100",
                                                   (double)(4 * (rnd(&seed) % 5)));
            if (rnd(&seed) % 3 == 0)
                rows[nrows].borrowing_limit = (double)(4 * (rnd(&seed) % 3));
            if (rnd(&seed) % 3 == 0)
                rows[nrows].lending_limit = (double)(4 * (rnd(&seed) % 3));
            fleet += (int64_t)rows[nrows].gpus;
            nrows++;
        }
        if (rnd(&seed) % 2) {
            rows[nrows++] = (struct tm_quota_row)ROW("o0", NULL, "H100", 4);
            fleet += 4;
        }
        fleet += (int64_t)(4 * (rnd(&seed) % 3));
        struct tm_quota *q = build(fleet, rows, nrows);
        struct tm_quota_job run[RJOBS];
        size_t nrun = 0;
        int late = 0;

        for (int pass = 0; pass < 30; pass++) {
            struct tm_quota_job queue[24];
            size_t nq = 0;
            struct tm_quota_usage *u;
            struct tm_quota_victim v[8];
            bool stop[RJOBS] = {false}, reclaimed_for[8] = {false};
            int32_t budget = 3;
            int64_t free_gpus = fleet;
            char why[TM_QUOTA_WHY_MAX];

            for (int k = 0; k < 3; k++)
                for (size_t t = 0; t < nt; t++) {
                    queue[nq] = job(q, names[t], 4);
                    queue[nq].checkpointable = (t + (size_t)k) % 2 == 0;
                    nq++;
                }
            for (size_t i = 0; i < nrun; i++)
                free_gpus -= run[i].gpus;
            assert_int_equal(tm_quota_usage_new(q, run, nrun, queue, nq, &u), 0);
            size_t nrun0 = nrun;
            for (size_t k = 0; k < nq; k++) {
                struct tm_quota_answer ans = admit(q, u, queue[k]);
                bool complete;
                int64_t lent = 0;

                if (ans.verdict == TM_QUOTA_BORROW) {
                    for (size_t l = 0; l < ans.nlenders; l++) {
                        int32_t who = ans.lenders[l].node;
                        assert_int_not_equal(who, queue[k].team);
                        assert_true(who < 0 || !reclaimed_for[who]);
                        lent += ans.lenders[l].gpus;
                    }
                    assert_int_equal(lent, ans.borrowed_gpus);
                }
                if (ans.verdict == TM_QUOTA_RECLAIM) {
                    int32_t before = budget;
                    int n = tm_quota_reclaim(q, u, run, nrun0, &queue[k], &budget, v, &complete,
                                             why, sizeof(why));
                    assert_true(n >= 0 && n <= before);
                    assert_int_equal(budget, before - n);
                    for (int i = 0; i < n; i++) {
                        const struct tm_quota_job *r = &run[v[i].running];
                        assert_true(r->borrowed);
                        assert_true(r->preemptible || r->checkpointable);
                        assert_int_not_equal(r->team, queue[k].team);
                        assert_int_equal(v[i].for_team, queue[k].team);
                        assert_false(stop[v[i].running]);
                        stop[v[i].running] = true;
                    }
                    if (n > 0)
                        reclaimed_for[queue[k].team] = true;
                    late += pass >= 20 ? n : 0;
                    reclaims += n;
                    if (n > 0 && complete)
                        tm_quota_take(q, u, &queue[k], &ans);
                    continue;
                }
                if (ans.verdict != TM_QUOTA_WAIT && free_gpus >= queue[k].gpus && nrun < RJOBS) {
                    tm_quota_take(q, u, &queue[k], &ans);
                    free_gpus -= queue[k].gpus;
                    run[nrun] = queue[k];
                    run[nrun++].borrowed = ans.verdict == TM_QUOTA_BORROW;
                    /* names[t] is rows[t]'s team. */
                    double lim = rows[tm_quota_name(q, queue[k].team)[1] - '0'].borrowing_limit;
                    if (ans.verdict == TM_QUOTA_BORROW && !isnan(lim))
                        assert_true(tm_quota_borrowing(u, queue[k].team, 0) <= (int64_t)lim);
                    borrows += ans.verdict == TM_QUOTA_BORROW;
                }
            }
            /* What each team lends is its idle quota at most, and no more
             * is lent than borrowed. */
            int64_t lent = 0, borrowed = 0;
            for (int32_t n = 0; (size_t)n < tm_quota_nnodes(q); n++) {
                if (tm_quota_is_org(q, n))
                    continue;
                int64_t idle = tm_quota_subtree(q, n, 0) - tm_quota_used(u, n, 0);
                int64_t l = tm_quota_lent(u, n, 0);
                assert_true(l >= 0 && l <= (idle > 0 ? idle : 0));
                lent += l;
                borrowed += tm_quota_borrowing(u, n, 0);
            }
            assert_true(lent <= borrowed);
            tm_quota_usage_free(u);
            size_t w = 0;
            for (size_t i = 0; i < nrun; i++)
                if (i >= nrun0 || !stop[i])
                    run[w++] = run[i];
            nrun = w;
        }
        if (late)
            fail_msg("round %d: %d reclaims in the last ten passes", round, late);
        tm_quota_free(q);
    }
    /* The rounds borrow and reclaim, or they prove nothing. */
    print_message("random rounds: %d borrows, %d reclaims\n", borrows, reclaims);
    assert_true(borrows > 100);
    assert_true(reclaims > 20);
}

static struct tm_sched_job sjob(int64_t id, int32_t gpus)
{
    return (struct tm_sched_job){.id = id, .submit_ms = id, .estimate_ms = 3600000, .cpu_milli = 1000,
                                 .memory_mib = 1024, .gpus = gpus, .gpu_milli = 1000, .nodes = 1,
                                 .preemptible = true};
}

/*
 * The quotas in a scheduling pass, every policy.  Two nodes of 8 H100;
 * teams a and b have 8 each.  b runs 8 within its quota on node 0 and 8
 * borrowed (a's) on node 1.  Queued: b's 4 (would borrow: a wants its
 * quota, so it waits on quota), a's 8 (within its quota, no room: b's
 * borrowed job is reclaimed for it, and it waits for those GPUs), a job
 * under no quota asking 0 GPUs' worth of CPU (placed as without quotas).
 */
static void test_sched_pass(void **state)
{
    struct tm_quota_row rows[] = {ROW("a", NULL, "H100", 8), ROW("b", NULL, "H100", 8)};
    struct tm_quota *q = build(16, rows, 2);
    struct tm_sched_node nodes[2];
    struct tm_sched_alloc allocs[2];
    struct tm_sched_job jobs[3] = {sjob(10, 4), sjob(11, 8), sjob(12, 0)};
    struct tm_quota_job run[2] = {job(q, "b", 8), job(q, "b", 8)};
    struct tm_quota_job qj[3] = {job(q, "b", 4), job(q, "a", 8), {.flavor = -1}};
    struct tm_quota_answer answers[3];
    (void)state;

    jobs[2].gpu_milli = 0;
    run[1].borrowed = true;
    for (int i = 0; i < 2; i++) {
        nodes[i] = (struct tm_sched_node){.id = i + 1, .cpu_milli = 64000, .memory_mib = 512 * 1024,
                                          .gpus = 8, .model = 0, .schedulable = true};
        allocs[i] = (struct tm_sched_alloc){.job_id = 100 + i, .node = i, .gpu_mask = 0xff,
                                            .gpu_milli = 1000, .cpu_milli = 8000,
                                            .memory_mib = 1024, .end_ms = 7200000, .preemptible = true};
    }
    for (int p = 0; p < TM_POLICY_MAX; p++) {
        struct tm_quota_usage *u;
        struct tm_sched_result r;

        assert_int_equal(tm_quota_usage_new(q, run, 2, qj, 2, &u), 0);
        struct tm_sched_quota view = {.quota = q, .usage = u, .jobs = qj, .running = run,
                                      .nrunning = 2, .disruption_budget = 4, .answers = answers};
        struct tm_sched_input in = {.jobs = jobs, .njobs = 3, .nodes = nodes, .nnodes = 2,
                                    .allocs = allocs, .nallocs = 2, .now_ms = 1000,
                                    .policy = (enum tm_sched_policy)p, .quota = &view};
        assert_int_equal(tm_sched_run(&in, &r), 0);
        assert_int_equal(r.notes[0].verdict, TM_SCHED_WAIT_QUOTA);
        /* 16 or 8 in use, as the policy orders a's job before b's or not. */
        assert_non_null(strstr(r.notes[0].why, "of its 8 GPUs of H100; no idle quota of H100 to borrow"));
        assert_string_equal(tm_sched_verdict_name(r.notes[0].verdict), "wait_quota");
        assert_int_equal(r.notes[1].verdict, TM_SCHED_WAIT_QUOTA);
        assert_string_equal(r.notes[1].why, "reclaims 1 borrowed job for team a's quota of H100");
        assert_int_equal(r.nreclaims, 1);
        assert_int_equal(r.reclaims[0].job, 1);
        assert_int_equal(r.reclaims[0].victim.running, 1);
        assert_int_equal(r.reclaims[0].victim.for_team, tm_quota_team(q, "a"));
        assert_int_equal(r.notes[2].verdict, TM_SCHED_PLACED);
        tm_sched_result_release(&r);
        tm_quota_usage_free(u);

        /* The next pass, the victim gone: a's job starts within quota. */
        assert_int_equal(tm_quota_usage_new(q, run, 1, qj, 2, &u), 0);
        view.usage = u;
        view.nrunning = 1;
        in.nallocs = 1;
        assert_int_equal(tm_sched_run(&in, &r), 0);
        assert_int_equal(r.notes[1].verdict, TM_SCHED_PLACED);
        assert_int_equal(answers[1].verdict, TM_QUOTA_WITHIN);
        assert_int_equal(r.notes[0].verdict, TM_SCHED_WAIT_QUOTA);
        assert_int_equal(r.nreclaims, 0);
        tm_sched_result_release(&r);
        tm_quota_usage_free(u);
    }
    tm_quota_free(q);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_borrow_within_limits),
        cmocka_unit_test(test_lending_limit),
        cmocka_unit_test(test_org_level),
        cmocka_unit_test(test_reclaim_order),
        cmocka_unit_test(test_three_teams_no_cycle),
        cmocka_unit_test(test_decay),
        cmocka_unit_test(test_validation),
        cmocka_unit_test(test_sched_pass),
        cmocka_unit_test(test_random_invariants),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
