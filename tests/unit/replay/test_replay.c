/*
 * tests/unit/replay/test_replay.c: the runtime predictor, time replay on hand-built
 * and real traces, the packing mode against the FGD artifact's figures, and
 * the `tarmac replay` command line.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "controller/cli/cli.h"
#include "controller/sched/estimate.h"
#include "controller/replay/replay.h"
#include "core/err.h"

static const char *traces_dir(void)
{
    static char dir[512];
    const char *src = getenv("TM_SOURCE_DIR");

    snprintf(dir, sizeof(dir), "%s/../shared/traces/alibaba-gpu-v2023-openb", src ? src : TM_SOURCE_DIR);
    return access(dir, R_OK) == 0 ? dir : NULL;
}

static void test_estimator(void **state)
{
    struct tm_estimator *e = NULL;
    struct tm_estimate_key k = {.team = "vision", .name = "resnet", .klass = TM_CLASS_TRAIN,
                                .gpu_milli = 8000};
    struct tm_estimate_key other = {.team = "nlp", .name = "bert", .klass = TM_CLASS_TRAIN,
                                    .gpu_milli = 8000};
    struct tm_estimate_key eval = {.klass = TM_CLASS_EVAL, .gpu_milli = 500};

    (void)state;
    assert_int_equal(tm_estimator_new(&e), 0);
    assert_int_equal(tm_estimate(e, &k), 0); /* nothing known */
    assert_int_equal(tm_estimator_observe(e, &k, 1000), 0);
    assert_int_equal(tm_estimator_observe(e, &k, 5000), 0);
    assert_int_equal(tm_estimate(e, &k), 0); /* fewer than 3 samples */
    assert_int_equal(tm_estimator_observe(e, &k, 3000), 0);
    assert_int_equal(tm_estimate(e, &k), 3000); /* median */
    /* another team's same-shaped job falls back to (class, GPUs) */
    assert_int_equal(tm_estimate(e, &other), 3000);
    for (int i = 0; i < 5; i++)
        assert_int_equal(tm_estimator_observe(e, &other, 100000), 0);
    assert_int_equal(tm_estimate(e, &other), 100000);
    assert_int_equal(tm_estimate(e, &k), 3000); /* its own history wins */
    assert_int_equal(tm_estimate(e, &eval), 0);
    {
        int lvl = -1;
        struct tm_estimate_key k_other_name = k;
        k_other_name.name = "vit";
        assert_int_equal(tm_estimate_level(e, &k, &lvl), 3000);
        assert_int_equal(lvl, 1); /* its own runs */
        assert_int_equal(tm_estimate_level(e, &k_other_name, &lvl), 3000);
        assert_int_equal(lvl, 2); /* the team's work of that shape */
        assert_int_equal(tm_estimate_level(e, &eval, &lvl), 0);
        assert_int_equal(lvl, 0);
        /* an empty name is no name: three unnamed runs are not "its own" */
        struct tm_estimate_key unnamed = {.team = "ops", .name = "", .klass = TM_CLASS_BATCH,
                                          .gpu_milli = 1000};
        for (int i = 0; i < 3; i++)
            assert_int_equal(tm_estimator_observe(e, &unnamed, 5000), 0);
        assert_int_equal(tm_estimate_level(e, &unnamed, &lvl), 5000);
        assert_int_equal(lvl, 2);
    }
    /* the window follows drift: 32 new runs replace the old */
    for (int i = 0; i < TM_ESTIMATE_WINDOW; i++)
        assert_int_equal(tm_estimator_observe(e, &k, 7000), 0);
    assert_int_equal(tm_estimate(e, &k), 7000);
    /* many keys: the table grows */
    for (int i = 0; i < 2000; i++) {
        char name[32];
        struct tm_estimate_key x = {.team = "t", .name = name, .klass = TM_CLASS_BATCH, .gpu_milli = i};
        snprintf(name, sizeof(name), "job-%d", i);
        assert_int_equal(tm_estimator_observe(e, &x, i + 1), 0);
    }
    assert_int_equal(tm_estimate(e, &k), 7000);
    /* overrun and remaining time */
    assert_int_equal(tm_estimate_overrun(3600000), 7200000);
    assert_int_equal(tm_estimate_overrun(0), 1000);
    assert_int_equal(tm_estimate_remaining(3600000, 600000), 3000000);
    assert_int_equal(tm_estimate_remaining(3600000, 7200000), 7200000);
    assert_int_equal(tm_estimate_remaining(0, 0), 1000);
    tm_estimator_free(e);
    tm_estimator_free(NULL);
}

/* Head-of-line blocking by hand: one 8-GPU node, a long 4-GPU job, then an
 * 8-GPU job, then short 1-GPU jobs.  fifo idles 4 GPUs behind the 8-GPU
 * job; backfill and tarmac run the short jobs in the hole. */
static void test_replay_hand(void **state)
{
    struct tm_trace t = {0};
    struct tm_replay_stats st[TM_POLICY_MAX];
    struct tm_trace_job jobs[12];
    struct tm_trace_node node = {.name = "n0", .cpu_milli = 96000, .memory_mib = 393216, .gpus = 8,
                                 .model = 0};

    (void)state;
    memset(jobs, 0, sizeof(jobs));
    snprintf(t.models[0], sizeof(t.models[0]), "G2");
    t.nmodels = 1;
    t.nodes = &node;
    t.nnodes = 1;
    for (int i = 0; i < 12; i++) {
        struct tm_trace_job *j = &jobs[i];
        snprintf(j->name, sizeof(j->name), "j%d", i);
        j->cpu_milli = 1000;
        j->memory_mib = 1024;
        j->gpu_milli = 1000;
        j->qos = TM_QOS_LS;
        j->klass = TM_CLASS_INFERENCE;
        j->gpus = 1;
        j->submit_ms = 1000 + i;
        j->start_ms = j->submit_ms;
        j->end_ms = j->start_ms + 600000; /* 10 minutes */
    }
    jobs[0].gpus = 4;
    jobs[0].submit_ms = 0;
    jobs[0].start_ms = 0;
    jobs[0].end_ms = 7200000; /* 2 hours */
    jobs[1].gpus = 8;
    jobs[1].end_ms = jobs[1].start_ms + 600000;
    t.jobs = jobs;
    t.njobs = 12;
    for (int p = 0; p < TM_POLICY_MAX; p++) {
        struct tm_replay_config cfg = {.policy = (enum tm_sched_policy)p, .exact_estimates = true,
                                       .since_ms = -1, .max_runtime_ms = -1, .seed = 1};
        assert_int_equal(tm_replay_time(&t, &cfg, &st[p]), 0);
        assert_int_equal(st[p].jobs, 12);
        assert_int_equal(st[p].unfinished, 0);
        assert_int_equal(st[p].gpus, 8);
    }
    /* fifo: 4 GPUs idle for 2 hours while everything waits = 8 GPU-hours;
     * the others run the ten 10-minute jobs in the hole (1.67 GPU-hours
     * less idle; the rest waits for the 8-GPU job, unavoidably) */
    assert_true(st[TM_POLICY_FIFO].idle_while_waiting_gpu_hours > 7.9);
    assert_true(st[TM_POLICY_FIFO].wait_p50_s > 7000);
    for (int p = TM_POLICY_BACKFILL; p < TM_POLICY_MAX; p++) {
        assert_true(st[p].idle_while_waiting_gpu_hours < st[TM_POLICY_FIFO].idle_while_waiting_gpu_hours - 1.6);
        assert_true(st[p].wait_p50_s < 1300);
    }
    assert_int_equal(st[TM_POLICY_BACKFILL].reservation_slips, 0); /* exact estimates */
    t.nodes = NULL;
    t.jobs = NULL;
}

/* A trace of one G2 node and n small inference jobs named j0..: 1 core,
 * 1 GiB each, the rest (GPUs, times) left to the test. */
static void one_node_trace(struct tm_trace *t, struct tm_trace_node *node, struct tm_trace_job *jobs,
                           int n)
{
    memset(jobs, 0, (size_t)n * sizeof(*jobs));
    snprintf(t->models[0], sizeof(t->models[0]), "G2");
    t->nmodels = 1;
    t->nodes = node;
    t->nnodes = 1;
    for (int i = 0; i < n; i++) {
        struct tm_trace_job *j = &jobs[i];
        snprintf(j->name, sizeof(j->name), "j%d", i);
        j->cpu_milli = 1000;
        j->memory_mib = 1024;
        j->qos = TM_QOS_LS;
        j->klass = TM_CLASS_INFERENCE;
    }
    t->jobs = jobs;
    t->njobs = (size_t)n;
}

/* The two readings of idle-while-waiting.  One 2-GPU node.  A runs 2 h on
 * one GPU as an 810-milli share; B (two whole GPUs) and C (an 810-milli
 * share) then wait for it under fifo (B heads the queue).  The model
 * reading (the older headline) counts the free GPU and the 190-milli sliver while they wait;
 * the fit-aware one, docs/measuring.md's, counts the free GPU only (C fits it; nothing queued
 * fits the sliver). */
static void test_replay_idle_fit(void **state)
{
    struct tm_trace t = {0};
    struct tm_replay_stats st;
    struct tm_trace_job jobs[3];
    struct tm_trace_node node = {.name = "n0", .cpu_milli = 16000, .memory_mib = 65536, .gpus = 2,
                                 .model = 0};
    struct tm_replay_config cfg = {.policy = TM_POLICY_FIFO, .exact_estimates = true,
                                   .since_ms = -1, .max_runtime_ms = -1, .seed = 1};

    (void)state;
    one_node_trace(&t, &node, jobs, 3);
    for (int i = 0; i < 3; i++) {
        struct tm_trace_job *j = &jobs[i];
        j->submit_ms = i * 1000;
        j->start_ms = j->submit_ms;
        j->end_ms = j->start_ms + 600000;
    }
    jobs[0].gpu_milli = 810;
    jobs[0].end_ms = 7200000;
    jobs[1].gpus = 2;
    jobs[1].gpu_milli = 1000;
    jobs[2].gpu_milli = 810;
    assert_int_equal(tm_replay_time(&t, &cfg, &st), 0);
    assert_int_equal(st.unfinished, 0);
    /* model reading: 1.19 GPUs free for ~2 h while B waits */
    assert_true(st.idle_while_waiting_model_gpu_hours > 2.3 && st.idle_while_waiting_model_gpu_hours < 2.4);
    assert_true(st.idle_sliver_gpu_hours > 0.37 && st.idle_sliver_gpu_hours < 0.39);
    /* fit (docs/measuring.md, the headline key): the whole free GPU while C
     * waits (~2 h), not the sliver */
    assert_true(st.idle_while_waiting_gpu_hours > 1.99 && st.idle_while_waiting_gpu_hours < 2.01);
    assert_true(st.idle_while_waiting_fit_gpu_hours == st.idle_while_waiting_gpu_hours);
    /* backfill places C at once: nothing queued then fits what is free */
    cfg.policy = TM_POLICY_BACKFILL;
    assert_int_equal(tm_replay_time(&t, &cfg, &st), 0);
    assert_true(st.idle_while_waiting_gpu_hours < 0.01);
    assert_true(st.idle_while_waiting_model_gpu_hours > st.idle_while_waiting_gpu_hours + 0.3);
    t.nodes = NULL;
    t.jobs = NULL;
}

/* Where the arrival window's free capacity goes: the parts sum to what
 * utilisation_arrival leaves out.  One 2-GPU node, window [0, 3 h]: A
 * holds an 810-milli share on one GPU from 0 to 4 h; B (two whole GPUs,
 * at 1 s) heads fifo's queue all window; C (a 500-milli share, at 1 h)
 * waits behind it; D (at 3 h) closes the window.  Under fifo: from 1 h
 * the free GPU is placeable by C (fit-aware idle, 2 GPU-h) and the
 * 190-milli sliver is not (packing); before C, B fits nothing (packing:
 * 1.19 GPUs for 1 h).  Backfill places C at 1 h: no fit-aware idle. */
static void test_replay_window_idle(void **state)
{
    struct tm_trace t = {0};
    struct tm_replay_stats st;
    struct tm_trace_job jobs[4];
    struct tm_trace_node node = {.name = "n0", .cpu_milli = 16000, .memory_mib = 65536, .gpus = 2,
                                 .model = 0};
    struct tm_replay_config cfg = {.policy = TM_POLICY_FIFO, .exact_estimates = true,
                                   .since_ms = -1, .max_runtime_ms = -1, .seed = 1};
    const int64_t h = 3600000;

    (void)state;
    one_node_trace(&t, &node, jobs, 4);
    for (int i = 0; i < 4; i++)
        jobs[i].gpu_milli = 100;
    jobs[0].gpu_milli = 810;
    jobs[0].end_ms = 4 * h;
    jobs[1].submit_ms = 1000;
    jobs[1].gpus = 2;
    jobs[1].gpu_milli = 1000;
    jobs[2].submit_ms = h;
    jobs[2].gpu_milli = 500;
    jobs[3].submit_ms = 3 * h;
    for (int i = 0; i < 4; i++) {
        jobs[i].start_ms = jobs[i].submit_ms;
        if (i > 0)
            jobs[i].end_ms = jobs[i].start_ms + h / 6;
    }
    for (int p = 0; p < 2; p++) {
        double idle, sum;
        cfg.policy = p == 0 ? TM_POLICY_FIFO : TM_POLICY_BACKFILL;
        assert_int_equal(tm_replay_time(&t, &cfg, &st), 0);
        assert_int_equal(st.unfinished, 0);
        assert_true(st.arrival_window_s > 10799.9 && st.arrival_window_s < 10800.1);
        idle = (1 - st.utilisation_arrival) * 2 * 3;
        sum = st.window_idle_nothing_waits_gpu_hours + st.window_idle_fit_gpu_hours +
              st.window_idle_packing_gpu_hours;
        assert_true(sum > idle - 1e-6 && sum < idle + 1e-6);
        assert_true(st.window_idle_nothing_waits_gpu_hours < 0.001); /* B waits from 1 s */
        if (p == 0) {
            /* the 190-milli sliver from 1 s to 3 h */
            assert_true(st.window_idle_sliver_gpu_hours > 0.569 && st.window_idle_sliver_gpu_hours < 0.571);
            assert_true(st.window_idle_fit_gpu_hours > 1.999 && st.window_idle_fit_gpu_hours < 2.001);
            assert_true(st.window_idle_packing_gpu_hours > 1.568 && st.window_idle_packing_gpu_hours < 1.571);
        } else {
            assert_true(st.window_idle_fit_gpu_hours < 0.001);
            /* and C's 500 milli left free for its 10 minutes */
            assert_true(st.window_idle_sliver_gpu_hours > 0.652 && st.window_idle_sliver_gpu_hours < 0.655);
            /* C's 10 minutes on the free GPU are the only busy time besides A */
            assert_true(idle > 3.57 - 0.5 / 6 - 0.001 && idle < 3.57 - 0.5 / 6 + 0.001);
        }
    }
    t.nodes = NULL;
    t.jobs = NULL;
}

/* "Could have used that GPU model" (docs/measuring.md): a queued 8-GPU job could
 * not have used a model whose only node has 2 GPUs.  A holds the 8-GPU
 * node for 2 h; B (8 GPUs, any model) waits for it while the 2-GPU node
 * is free: the fit-aware and model readings count nothing, the looser "accepts the
 * model" reading counts the 2 free GPUs for the 2 h. */
static void test_replay_idle_could_use(void **state)
{
    struct tm_trace t = {0};
    struct tm_replay_stats st;
    struct tm_trace_job jobs[2];
    struct tm_trace_node nodes[2] = {
        {.name = "small", .cpu_milli = 16000, .memory_mib = 65536, .gpus = 2, .model = 0},
        {.name = "big", .cpu_milli = 96000, .memory_mib = 393216, .gpus = 8, .model = 1}};
    struct tm_replay_config cfg = {.policy = TM_POLICY_FIFO, .exact_estimates = true,
                                   .since_ms = -1, .max_runtime_ms = -1, .seed = 1};

    (void)state;
    memset(jobs, 0, sizeof(jobs));
    snprintf(t.models[0], sizeof(t.models[0]), "P100");
    snprintf(t.models[1], sizeof(t.models[1]), "G2");
    t.nmodels = 2;
    t.nodes = nodes;
    t.nnodes = 2;
    for (int i = 0; i < 2; i++) {
        struct tm_trace_job *j = &jobs[i];
        snprintf(j->name, sizeof(j->name), "j%d", i);
        j->cpu_milli = 1000;
        j->memory_mib = 1024;
        j->qos = TM_QOS_LS;
        j->klass = TM_CLASS_TRAIN;
        j->gpus = 8;
        j->gpu_milli = 1000;
        j->submit_ms = i * 1000;
        j->start_ms = j->submit_ms;
        j->end_ms = j->start_ms + 600000;
    }
    jobs[0].end_ms = 7200000;
    t.jobs = jobs;
    t.njobs = 2;
    for (int p = 0; p < TM_POLICY_MAX; p++) {
        cfg.policy = (enum tm_sched_policy)p;
        assert_int_equal(tm_replay_time(&t, &cfg, &st), 0);
        assert_int_equal(st.unfinished, 0);
        assert_true(st.idle_while_waiting_gpu_hours < 0.001);
        assert_true(st.idle_while_waiting_accepts_gpu_hours > 3.99 &&
                    st.idle_while_waiting_accepts_gpu_hours < 4.0);
    }
    t.nodes = NULL;
    t.jobs = NULL;
}

/* A slice of the dense part of openb default on 64 GPUs at load 1.1:
 * tarmac leaves far less idle-while-waiting than fifo and no more than
 * EASY backfill, and nobody waits past the bound. */
static void test_replay_openb_slice(void **state)
{
    const char *dir = traces_dir();
    struct tm_trace t = {0};
    struct tm_replay_stats st[TM_POLICY_MAX];
    char path[768], err[512];
    size_t w = 0;

    (void)state;
    if (!dir) {
        skip();
        return;
    }
    snprintf(path, sizeof(path), "%s/openb_node_list_gpu_node.csv", dir);
    assert_int_equal(tm_trace_load_nodes(&t, path, err, sizeof(err)), 0);
    snprintf(path, sizeof(path), "%s/openb_pod_list_default.csv", dir);
    assert_int_equal(tm_trace_load_pods(&t, path, err, sizeof(err)), 0);
    /* the first ten days of the dense part */
    for (size_t i = 0; i < t.njobs; i++)
        if (t.jobs[i].submit_ms >= 9964972000LL && t.jobs[i].submit_ms < 9964972000LL + 864000000LL)
            t.jobs[w++] = t.jobs[i];
    t.njobs = w;
    assert_true(w > 1000);
    for (int p = 0; p < TM_POLICY_MAX; p++) {
        struct tm_replay_config cfg = {.policy = (enum tm_sched_policy)p, .since_ms = -1,
                                       .max_runtime_ms = 86400000, .gpus = 64, .load = 1.1, .seed = 1};
        assert_int_equal(tm_replay_time(&t, &cfg, &st[p]), 0);
        assert_int_equal(st[p].gpus, 64);
        assert_true(st[p].load > 1.09 && st[p].load < 1.11);
        assert_int_equal(st[p].unfinished, 0);
        /* the fit-aware reading counts a subset of what the model reading counts */
        assert_true(st[p].idle_while_waiting_gpu_hours <= st[p].idle_while_waiting_model_gpu_hours + 1e-9);
        print_message("%s: idle %.1f GPU-h (fit %.1f), util(arrival) %.3f, p95 %.0f s, max %.0f s, starved %zu\n",
                      tm_sched_policy_name(p), st[p].idle_while_waiting_gpu_hours,
                      st[p].idle_while_waiting_fit_gpu_hours,
                      st[p].utilisation_arrival, st[p].wait_p95_s, st[p].wait_max_s, st[p].starved);
    }
    assert_true(st[TM_POLICY_TARMAC].idle_while_waiting_model_gpu_hours <
                0.5 * st[TM_POLICY_FIFO].idle_while_waiting_model_gpu_hours);
    assert_true(st[TM_POLICY_TARMAC].idle_while_waiting_model_gpu_hours <=
                st[TM_POLICY_BACKFILL].idle_while_waiting_model_gpu_hours);
    assert_true(st[TM_POLICY_TARMAC].utilisation_arrival > st[TM_POLICY_FIFO].utilisation_arrival + 0.05);
    assert_int_equal(st[TM_POLICY_TARMAC].starved, 0);
    assert_true(st[TM_POLICY_TARMAC].idle_while_waiting_fit_gpu_hours <
                0.05 * st[TM_POLICY_FIFO].idle_while_waiting_fit_gpu_hours);
    tm_trace_release(&t);
}

/* Packing mode against the FGD artifact on openb default: random and
 * best fit within one point of 87.47% and 93.08% (10 seeds, as published),
 * tarmac at least 95.4% (5 seeds, for time). */
static void test_packing_openb(void **state)
{
    const char *dir = traces_dir();
    struct tm_trace t = {0};
    char path[768], err[512];
    double mean[TM_PACK_MAX] = {0};
    const int seeds[TM_PACK_MAX] = {[TM_PACK_RANDOM] = 10, [TM_PACK_BESTFIT] = 10, [TM_PACK_TARMAC] = 5};

    (void)state;
    if (!dir) {
        skip();
        return;
    }
    snprintf(path, sizeof(path), "%s/openb_node_list_gpu_node.csv", dir);
    assert_int_equal(tm_trace_load_nodes(&t, path, err, sizeof(err)), 0);
    snprintf(path, sizeof(path), "%s/openb_pod_list_default.csv", dir);
    assert_int_equal(tm_trace_load_pods(&t, path, err, sizeof(err)), 0);
    for (int p = 0; p < TM_PACK_MAX; p++) {
        for (int s = 1; s <= seeds[p]; s++) {
            struct tm_pack_stats st;
            assert_int_equal(tm_replay_packing(&t, (enum tm_pack_policy)p, (uint64_t)s, 1.3, &st), 0);
            assert_true(st.arrived_gpu >= 1.3 && st.arrived_gpu < 1.31);
            assert_true(st.tasks > t.njobs);
            mean[p] += st.allocation / seeds[p];
        }
        if (seeds[p])
            print_message("%s: %.2f%%\n", tm_pack_policy_name(p), 100 * mean[p]);
    }
    assert_true(mean[TM_PACK_RANDOM] > 0.8647 && mean[TM_PACK_RANDOM] < 0.8847);
    assert_true(mean[TM_PACK_BESTFIT] > 0.9208 && mean[TM_PACK_BESTFIT] < 0.9408);
    assert_true(mean[TM_PACK_TARMAC] >= 0.954);
    tm_trace_release(&t);
}

static int cli(const char *args)
{
    char buf[4096], *argv[32];
    int argc = 0;

    if (snprintf(buf, sizeof(buf), "replay %s", args) >= (int)sizeof(buf))
        return -1;
    for (char *p = buf; *p && argc < 31;) {
        char *sp = strchr(p, ' ');
        argv[argc++] = p;
        if (!sp)
            break;
        *sp = '\0';
        p = sp + 1;
    }
    argv[argc] = NULL;
    return tm_replay_main(argc, argv);
}

static void test_cli(void **state)
{
    char args[2048];
    const char *dir = traces_dir();
    FILE *devnull = fopen("/dev/null", "w");
    int saved = dup(1);

    (void)state;
    assert_non_null(devnull);
    /* quiet stdout while the command prints its tables */
    fflush(stdout);
    dup2(fileno(devnull), 1);
    assert_int_equal(cli("--policy sjf --synthetic 10"), 2);
    assert_int_equal(cli("--mode packing --policy fifo --synthetic 10"), 2);
    assert_int_equal(cli("--pods x.csv"), 2);
    assert_int_equal(cli("--mode sideways --synthetic 10"), 2);
    assert_int_equal(cli("--load -1 --synthetic 10"), 2);
    assert_int_equal(cli("--since yesterday --synthetic 10"), 2);
    assert_int_equal(cli("--bogus 1 --synthetic 10"), 2);
    assert_int_equal(cli("--pods /nonexistent.csv --nodes /nonexistent.csv"), 2);
    assert_int_equal(cli("--synthetic 300 --gpus 16 --json"), 0);
    assert_int_equal(cli("--synthetic 300 --gpus 16 --load 0.9,1.2 --policy tarmac,fifo"), 0);
    if (dir) {
        (void)snprintf(args, sizeof(args),
                 "--pods %s/openb_pod_list_gpuspec33.csv --nodes %s/openb_node_list_gpu_node.csv "
                 "--since 12000000 --max-runtime 1d --gpus 64 --load 1.0 --json",
                 dir, dir);
        assert_int_equal(cli(args), 0);
    }
    fflush(stdout);
    dup2(saved, 1);
    close(saved);
    fclose(devnull);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_estimator),
        cmocka_unit_test(test_replay_hand),
        cmocka_unit_test(test_replay_idle_fit),
        cmocka_unit_test(test_replay_window_idle),
        cmocka_unit_test(test_replay_idle_could_use),
        cmocka_unit_test(test_replay_openb_slice),
        cmocka_unit_test(test_packing_openb),
        cmocka_unit_test(test_cli),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
