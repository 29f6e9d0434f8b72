/*
 * tests/unit/replay/test_replay_gang.c: gangs (jobs of several nodes) in
 * the time replay, known answers on hand-built traces: a gang starts only
 * when all its nodes are free, on all at once, and ends on all together;
 * its GPU-seconds count nodes x GPUs; fifo's head-of-line gang blocks
 * what is behind it; EASY backfill fills around a reserved gang without
 * delaying it, and its reservation covers every node it needs.  Each
 * case runs with the incremental passes and the full pass (the
 * reference).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "controller/replay/replay.h"

/* n identical nodes of 8 GPUs, model "A", room for any job's CPU and
 * memory; jobs are added with put_job(). */
static void gang_trace(struct tm_trace *t, size_t nnodes, size_t maxjobs)
{
    memset(t, 0, sizeof(*t));
    snprintf(t->models[0], sizeof(t->models[0]), "A");
    t->nmodels = 1;
    t->nodes = calloc(nnodes, sizeof(*t->nodes));
    t->jobs = calloc(maxjobs, sizeof(*t->jobs));
    assert_non_null(t->nodes);
    assert_non_null(t->jobs);
    t->nnodes = nnodes;
    for (size_t i = 0; i < nnodes; i++) {
        snprintf(t->nodes[i].name, sizeof(t->nodes[i].name), "n%zu", i);
        t->nodes[i].gpus = 8;
        t->nodes[i].cpu_milli = 64000;
        t->nodes[i].memory_mib = 262144;
    }
}

/* A job of `nodes` nodes (1: an ordinary job) of `gpus` GPUs each,
 * submitted at submit_s, running run_s. */
static void put_job(struct tm_trace *t, const char *name, int64_t submit_s, int64_t run_s, int32_t gpus,
                    int32_t nodes)
{
    struct tm_trace_job *jb = &t->jobs[t->njobs++];

    snprintf(jb->name, sizeof(jb->name), "%s", name);
    jb->submit_ms = submit_s * 1000;
    jb->start_ms = jb->submit_ms;
    jb->end_ms = jb->submit_ms + run_s * 1000;
    jb->gpus = gpus;
    jb->gpu_milli = 1000;
    jb->nodes = nodes;
    jb->cpu_milli = 1000;
    jb->memory_mib = 1024;
    jb->qos = TM_QOS_LS;
    jb->klass = TM_CLASS_TRAIN;
}

static char *replay_log(const struct tm_trace *t, struct tm_replay_config cfg, struct tm_replay_stats *st)
{
    char *log = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&log, &len);

    assert_non_null(f);
    cfg.log = f;
    assert_int_equal(tm_replay_time(t, &cfg, st), 0);
    fclose(f);
    return log;
}

/* The job's one placement line: its start in s (and its nodes= in
 * nodes[64], *nn of them, for a gang).  Fails unless it was placed once. */
static double start_of(const char *log, const char *name, int *nodes, int *nn)
{
    char key[64];
    const char *p, *line, *n, *eol;
    double t;

    snprintf(key, sizeof(key), " job=%s verdict=placed", name);
    p = strstr(log, key);
    assert_non_null(p);
    assert_null(strstr(p + 1, key));
    line = p;
    while (line > log && line[-1] != '\n')
        line--;
    assert_int_equal(sscanf(line, "t=%lf", &t), 1);
    *nn = 0;
    eol = strchr(p, '\n');
    n = strstr(p, " nodes=");
    if (n && (!eol || n < eol)) {
        n += strlen(" nodes=");
        for (;;) {
            assert_true(*nn < 64);
            nodes[(*nn)++] = (int)strtol(n, (char **)&n, 10);
            if (*n != ',')
                break;
            n++;
        }
    }
    return t;
}

static const enum tm_sched_policy all_policies[] = {TM_POLICY_FIFO, TM_POLICY_BACKFILL, TM_POLICY_TARMAC,
                                                    TM_POLICY_MULTIFACTOR};
#define NPOLICIES (sizeof(all_policies) / sizeof(all_policies[0]))

static struct tm_replay_config config(enum tm_sched_policy p, bool full)
{
    return (struct tm_replay_config){.policy = p, .since_ms = -1, .max_runtime_ms = -1, .seed = 1,
                                     .exact_estimates = true, .full_pass = full};
}

/* Three 8-GPU nodes: a, b, c (one node each, all 8 GPUs) end at 100,
 * 200 and 300 s; the gang g (2 nodes x 8 GPUs, 50 s) arrives at 1 s.
 * From 100 s one node is free, not two: g waits (never starts on the one
 * free node) until b ends at 200 s, then starts on both free nodes at
 * once and ends at 250 s.  Every policy, incremental and full.  Its
 * GPU-seconds count 2 x 8 x 50: utilisation over the 300 s makespan is
 * (800 + 1600 + 2400 + 800) / (24 x 300).  While it waits one node is
 * free that it cannot use alone: nothing to count as fit-aware idle,
 * while the model reading counts the 8 free GPUs for 100 s. */
static void test_gang_waits_for_all_nodes(void **state)
{
    struct tm_trace t;

    (void)state;
    gang_trace(&t, 3, 8);
    put_job(&t, "a", 0, 100, 8, 1);
    put_job(&t, "b", 0, 200, 8, 1);
    put_job(&t, "c", 0, 300, 8, 1);
    put_job(&t, "g", 1, 50, 8, 2);
    for (size_t k = 0; k < 2 * NPOLICIES; k++) {
        struct tm_replay_stats st;
        char *log = replay_log(&t, config(all_policies[k / 2], k % 2), &st);
        int nodes[64], nn;
        assert_true(start_of(log, "a", nodes, &nn) == 0.0);
        assert_true(start_of(log, "g", nodes, &nn) == 200.0);
        assert_int_equal(nn, 2);
        assert_true(nodes[0] != nodes[1]);
        assert_int_equal(st.unfinished, 0);
        assert_int_equal(st.jobs, 4);
        assert_int_equal(st.dropped_no_node, 0);
        assert_true(st.makespan_s == 300.0);
        assert_true(st.utilisation > 5600.0 / 7200.0 - 1e-9 && st.utilisation < 5600.0 / 7200.0 + 1e-9);
        assert_true(st.wait_max_s == 199.0);
        assert_true(st.idle_while_waiting_gpu_hours == 0);
        assert_true(st.idle_while_waiting_model_gpu_hours > 800.0 / 3600 - 1e-9 &&
                    st.idle_while_waiting_model_gpu_hours < 800.0 / 3600 + 1e-9);
        free(log);
    }
    tm_trace_release(&t);
}

/* A gang larger than the inventory fits no node (dropped, counted so);
 * one as large as it waits for every node.  A gang over the 64 nodes
 * tm_sched_run() takes fits no node either, though the nodes are there. */
static void test_gang_too_large(void **state)
{
    struct tm_trace t;
    struct tm_replay_stats st;
    char *log;
    int nodes[64], nn;

    (void)state;
    gang_trace(&t, 2, 4);
    put_job(&t, "a", 0, 100, 1, 1);
    put_job(&t, "huge", 1, 10, 8, 3);
    put_job(&t, "all", 2, 10, 8, 2);
    log = replay_log(&t, config(TM_POLICY_FIFO, false), &st);
    assert_int_equal(st.dropped_no_node, 1);
    assert_int_equal(st.jobs, 2);
    assert_true(start_of(log, "all", nodes, &nn) == 100.0);
    assert_int_equal(nn, 2);
    free(log);
    tm_trace_release(&t);
    gang_trace(&t, 66, 3);
    put_job(&t, "a", 0, 100, 1, 1);
    put_job(&t, "wide", 1, 10, 1, 65);
    put_job(&t, "most", 2, 10, 1, 64);
    log = replay_log(&t, config(TM_POLICY_BACKFILL, false), &st);
    assert_int_equal(st.dropped_no_node, 1);
    assert_true(start_of(log, "most", nodes, &nn) == 2.0);
    assert_int_equal(nn, 64);
    free(log);
    tm_trace_release(&t);
}

/* fifo's head-of-line gang.  Two 8-GPU nodes: a holds one until 1,000 s;
 * the gang g (2 x 8 GPUs, 100 s) heads the queue at 1 s; s (1 GPU, 10 s)
 * arrives at 2 s.  fifo keeps s behind g though the other node is free:
 * g starts at 1,000 s, s at 1,100 s.  Backfill (EASY, exact estimates)
 * runs s in the hole at once, g still at 1,000 s. */
static void test_fifo_gang_blocks_head(void **state)
{
    struct tm_trace t;

    (void)state;
    gang_trace(&t, 2, 4);
    put_job(&t, "a", 0, 1000, 8, 1);
    put_job(&t, "g", 1, 100, 8, 2);
    put_job(&t, "s", 2, 10, 1, 1);
    for (int full = 0; full <= 1; full++) {
        struct tm_replay_stats st;
        int nodes[64], nn;
        char *log = replay_log(&t, config(TM_POLICY_FIFO, full), &st);
        assert_true(start_of(log, "g", nodes, &nn) == 1000.0);
        assert_int_equal(nn, 2);
        assert_true(start_of(log, "s", nodes, &nn) == 1100.0);
        free(log);
        log = replay_log(&t, config(TM_POLICY_BACKFILL, full), &st);
        assert_true(start_of(log, "g", nodes, &nn) == 1000.0);
        assert_int_equal(nn, 2);
        assert_true(start_of(log, "s", nodes, &nn) == 2.0);
        free(log);
    }
    tm_trace_release(&t);
}

/* EASY backfill does not delay a reserved gang.  Two 8-GPU nodes: a
 * holds one until 1,000 s; the gang g (2 x 8 GPUs) is blocked at 1 s and
 * reserved at 1,000 s on both nodes (one reservation per node); long
 * (8 GPUs, 5,000 s, at 2 s) fits the free node now but would hold it past
 * 1,000 s: it waits until g ends at 1,100 s; short (4 GPUs, 100 s, at 3 s)
 * ends before 1,000 s: it fills the free node at once.  Backfill and
 * multifactor (EASY in another order), incremental and full. */
static void test_backfill_keeps_gang_reservation(void **state)
{
    static const enum tm_sched_policy easy[] = {TM_POLICY_BACKFILL, TM_POLICY_MULTIFACTOR};
    struct tm_trace t;

    (void)state;
    gang_trace(&t, 2, 4);
    put_job(&t, "a", 0, 1000, 8, 1);
    put_job(&t, "g", 1, 100, 8, 2);
    put_job(&t, "long", 2, 5000, 8, 1);
    put_job(&t, "short", 3, 100, 4, 1);
    for (size_t k = 0; k < 4; k++) {
        struct tm_replay_stats st;
        int nodes[64], nn;
        char *log = replay_log(&t, config(easy[k / 2], k % 2), &st);
        const char *res = strstr(log, " job=g verdict=reserved");
        char line[512];
        assert_non_null(res);
        assert_int_equal(sscanf(res, "%511[^\n]", line), 1);
        assert_true(strstr(line, " nodes=0,1") || strstr(line, " nodes=1,0"));
        assert_true(start_of(log, "g", nodes, &nn) == 1000.0);
        assert_int_equal(nn, 2);
        assert_true(start_of(log, "short", nodes, &nn) == 3.0);
        assert_true(start_of(log, "long", nodes, &nn) == 1100.0);
        assert_int_equal(st.reservation_slips, 0);
        free(log);
    }
    tm_trace_release(&t);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_gang_waits_for_all_nodes),
        cmocka_unit_test(test_gang_too_large),
        cmocka_unit_test(test_fifo_gang_blocks_head),
        cmocka_unit_test(test_backfill_keeps_gang_reservation),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
