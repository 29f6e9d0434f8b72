/*
 * tests/unit/replay/test_trace.c: the openb loaders (good files, every kind of bad
 * row with its file:line:column), Philly's job file, the synthetic
 * generator, and the real openb and Philly files when ../shared/traces is
 * there.
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

#include "controller/replay/trace.h"
#include "core/err.h"

static char tmpdir[256];

static const char *write_file(const char *name, const char *text)
{
    static char path[512];
    FILE *f;

    snprintf(path, sizeof(path), "%s/%s", tmpdir, name);
    f = fopen(path, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
    return path;
}

static const char *trace_dir(const char *name)
{
    static char dir[512];
    const char *src = getenv("TM_SOURCE_DIR");

    snprintf(dir, sizeof(dir), "%s/../shared/traces/%s", src ? src : TM_SOURCE_DIR, name);
    return access(dir, R_OK) == 0 ? dir : NULL;
}

static const char *traces_dir(void)
{
    return trace_dir("alibaba-gpu-v2023-openb");
}

#define NODES_OK                                                                                     \
    "sn,cpu_milli,memory_mib,gpu,model\n"                                                            \
    "n0,96000,393216,8,G2\n"                                                                         \
    "n1,32000,262144,0,\n"                                                                           \
    "n2,104000,524288,2,T4\n"

#define POD_HEADER                                                                                   \
    "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,deletion_time," \
    "scheduled_time\n"

static void test_load_good(void **state)
{
    struct tm_trace t = {0};
    char err[256] = "";
    const char *np, *pp;

    (void)state;
    np = write_file("nodes.csv", NODES_OK);
    assert_int_equal(tm_trace_load_nodes(&t, np, err, sizeof(err)), 0);
    assert_int_equal(t.nnodes, 3);
    assert_int_equal(t.nmodels, 2);
    assert_string_equal(t.models[t.nodes[0].model], "G2");
    assert_int_equal(t.nodes[1].model, -1);
    assert_int_equal(t.nodes[2].gpus, 2);
    pp = write_file("pods.csv", POD_HEADER
                    "p0,12000,16384,1,1000,,LS,Running,0,100,10\r\n"
                    "p1,6000,12288,1,460,T4|V100M16,BE,Failed,5,50,6\n"
                    "p2,8000,0,0,0,,Burstable,Succeeded,1,2,1\n"
                    "p3,8000,100,8,1000,,Guaranteed,Pending,3,9,\n");
    assert_int_equal(tm_trace_load_pods(&t, pp, err, sizeof(err)), 0);
    assert_int_equal(t.njobs, 4);
    assert_int_equal(t.jobs[0].gpus, 1);
    assert_int_equal(t.jobs[0].start_ms, 10000);
    assert_int_equal(t.jobs[0].end_ms, 100000);
    assert_int_equal(t.jobs[1].gpus, 0);
    assert_int_equal(t.jobs[1].gpu_milli, 460);
    assert_true(t.jobs[1].preemptible);
    assert_int_equal(t.jobs[1].klass, TM_CLASS_BATCH);
    /* T4 was known, V100M16 joins the model table */
    assert_int_equal(t.nmodels, 3);
    assert_true(t.jobs[1].model_mask & (1ull << t.nodes[2].model));
    assert_int_equal(t.jobs[2].gpus, 0);
    assert_int_equal(t.jobs[2].gpu_milli, 0);
    assert_int_equal(t.jobs[3].start_ms, -1);
    assert_int_equal(t.jobs[3].gpus, 8);
    tm_trace_release(&t);
    tm_trace_release(&t);
}

struct bad {
    const char *body;
    const char *where; /* expected "file:line:col" suffix */
    const char *what;
};

static void test_load_bad(void **state)
{
    static const struct bad pods[] = {
        {"name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,pod_phase,creation_time,deletion_time,"
         "scheduled_time\n",
         ":1:11:", "missing column \"qos\""},
        {POD_HEADER "p0,12x00,16384,1,1000,,LS,Running,0,100,10\n", ":2:2:", "bad number \"12x00\""},
        {POD_HEADER "p0,1,2,1,1000,,LS,Running,0,100,10\np1,1,2,1,1000,,LS,Running,50,40,45\n", ":3:10:",
         "negative duration"},
        {POD_HEADER "p0,1,2,1,1000,,LS,Running,0,100,200\n", ":2:10:", "negative duration"},
        {POD_HEADER "p0,1,2,1,1000,,LS,Running,0\n", ":2:10:", "missing field"},
        {POD_HEADER "p0,1,2,1,1000,,XX,Running,0,1,0\n", ":2:7:", "unrecognized qos"},
        {POD_HEADER "p0,1,2,1,1200,,LS,Running,0,1,0\n", ":2:5:", "gpu_milli"},
        {POD_HEADER "p0,-1,2,1,1000,,LS,Running,0,1,0\n", ":2:2:", "bad number"},
        {POD_HEADER "\"p0\",1,2,1,1000,,LS,Running,0,1,0\n", ":2:1:", "quoted"},
        {"", ":1:1:", "empty"},
    };
    static const struct bad nodes[] = {
        {"sn,cpu_milli,gpu,model\n", ":1:5:", "missing column \"memory_mib\""},
        {"sn,cpu_milli,memory_mib,gpu,model\nn0,1,2,99,G2\n", ":2:4:", "GPU count"},
        {"sn,cpu_milli,memory_mib,gpu,model\nn0,1,2,8,\n", ":2:5:", "without a model"},
        {"sn,cpu_milli,memory_mib,gpu,model\nn0,1,abc,8,G2\n", ":2:3:", "bad number"},
        /* the row reader both loaders share */
        {"sn,cpu_milli,memory_mib,gpu,model\nn0,1,2\n", ":2:4:", "missing field \"gpu\""},
        {"sn,cpu_milli,memory_mib,gpu,model\n\"n0\",1,2,8,G2\n", ":2:1:", "quoted"},
        {"", ":1:1:", "empty"},
    };
    char err[512];

    (void)state;
    for (size_t i = 0; i < sizeof(pods) / sizeof(pods[0]); i++) {
        struct tm_trace t = {0};
        const char *pp = write_file("bad_pods.csv", pods[i].body);
        err[0] = '\0';
        assert_int_equal(tm_trace_load_pods(&t, pp, err, sizeof(err)), TM_EINVAL);
        if (!strstr(err, pods[i].where) || !strstr(err, pods[i].what) || !strstr(err, "bad_pods.csv"))
            fail_msg("case %zu: got \"%s\", want %s and %s", i, err, pods[i].where, pods[i].what);
        assert_int_equal(t.njobs, 0);
        assert_null(t.jobs);
    }
    for (size_t i = 0; i < sizeof(nodes) / sizeof(nodes[0]); i++) {
        struct tm_trace t = {0};
        const char *np = write_file("bad_nodes.csv", nodes[i].body);
        err[0] = '\0';
        assert_int_equal(tm_trace_load_nodes(&t, np, err, sizeof(err)), TM_EINVAL);
        if (!strstr(err, nodes[i].where) || !strstr(err, nodes[i].what))
            fail_msg("node case %zu: got \"%s\"", i, err);
        assert_int_equal(t.nnodes, 0);
        assert_int_equal(t.nmodels, 0);
    }
    {
        struct tm_trace t = {0};
        assert_true(tm_trace_load_pods(&t, "/nonexistent/x.csv", err, sizeof(err)) < 0);
        assert_non_null(strstr(err, "/nonexistent/x.csv"));
    }
}

#define PHILLY_HEADER "timestamp,duration,num_gpus,gpu_time,cluster\n"

/* Rows out of order, teams, gangs spread evenly, the times from the
 * earliest submit. */
static void test_philly_good(void **state)
{
    struct tm_trace t = {0};
    char err[256] = "", buf[64];
    const char *pp;

    (void)state;
    pp = write_file("philly.csv", PHILLY_HEADER
                    "2017-10-09 07:01:55,66.0,1,66.0,11cb48\n"
                    "2017-10-09 06:13:03,2951.5,16,47224.0,6214e9\r\n"
                    "2017-10-09 07:01:55,10,12,120,6214e9\n"
                    "2017-10-08 23:59:59,0.4,8,3.2,b436b2\n");
    assert_int_equal(tm_trace_load_pods(&t, pp, err, sizeof(err)), 0);
    assert_int_equal(t.njobs, 4);
    /* sorted by submit; ties in file order */
    assert_string_equal(t.jobs[0].team, "b436b2");
    assert_int_equal(t.jobs[0].submit_ms, 0);
    assert_int_equal(t.jobs[0].start_ms, 0);
    assert_int_equal(t.jobs[0].end_ms, 400);
    assert_int_equal(t.jobs[0].gpus, 8);
    assert_int_equal(t.jobs[0].nodes, 1);
    assert_string_equal(t.jobs[1].team, "6214e9");
    assert_int_equal(t.jobs[1].submit_ms, (6 * 3600 + 13 * 60 + 4) * 1000LL);
    assert_int_equal(t.jobs[1].end_ms - t.jobs[1].start_ms, 2951500);
    assert_int_equal(t.jobs[1].nodes, 2);
    assert_int_equal(t.jobs[1].gpus, 8);
    assert_string_equal(t.jobs[2].team, "11cb48");
    assert_int_equal(t.jobs[2].nodes, 1);
    assert_int_equal(t.jobs[2].gpus, 1);
    assert_int_equal(t.jobs[2].gpu_milli, 1000);
    assert_int_equal(t.jobs[3].nodes, 2);
    assert_int_equal(t.jobs[3].gpus, 6);
    assert_int_equal(t.jobs[3].cpu_milli, 0);
    assert_int_equal(t.jobs[3].model_mask, 0);
    assert_false(t.jobs[3].preemptible);
    /* the team is the runtime predictor's team level */
    assert_string_equal(tm_trace_estimate_key(&t.jobs[3], buf, sizeof(buf)).team, "6214e9");
    assert_int_equal(tm_trace_uniform_nodes(&t, 3, 8, "philly8"), 0);
    assert_int_equal(t.nnodes, 3);
    assert_int_equal(t.nodes[2].gpus, 8);
    assert_string_equal(t.models[t.nodes[2].model], "philly8");
    tm_trace_release(&t);
}

static void test_philly_bad(void **state)
{
    static const struct bad rows[] = {
        {PHILLY_HEADER "2017-10-09 7:01:55,66,1,66,a\n", ":2:1:", "bad timestamp"},
        {PHILLY_HEADER "2017-02-30 07:01:55,66,1,66,a\n", ":2:1:", "bad timestamp"},
        {PHILLY_HEADER "2017-10-09 07:01:55,0,1,0,a\n", ":2:2:", "bad duration"},
        {PHILLY_HEADER "2017-10-09 07:01:55,abc,1,66,a\n", ":2:2:", "bad duration"},
        {PHILLY_HEADER "2017-10-09 07:01:55,66,0,0,a\n", ":2:3:", "bad num_gpus"},
        {PHILLY_HEADER "2017-10-09 07:01:55,66,9,594,a\n", ":2:3:", "spread evenly"},
        {PHILLY_HEADER "2017-10-09 07:01:55,66,2,66,a\n", ":2:4:", "gpu_time"},
        {PHILLY_HEADER "2017-10-09 07:01:55,66,1,66,\n", ":2:5:", "cluster"},
        {PHILLY_HEADER "2017-10-09 07:01:55,66,1,66\n", ":2:5:", "missing field \"cluster\""},
        {PHILLY_HEADER, ":1:1:", "no jobs"},
    };
    char err[512];

    (void)state;
    for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
        struct tm_trace t = {0};
        const char *pp = write_file("bad_philly.csv", rows[i].body);
        err[0] = '\0';
        assert_int_equal(tm_trace_load_pods(&t, pp, err, sizeof(err)), TM_EINVAL);
        if (!strstr(err, rows[i].where) || !strstr(err, rows[i].what) || !strstr(err, "bad_philly.csv"))
            fail_msg("case %zu: got \"%s\", want %s and %s", i, err, rows[i].where, rows[i].what);
        assert_int_equal(t.njobs, 0);
        assert_null(t.jobs);
    }
}

static void test_synthetic(void **state)
{
    struct tm_trace a = {0}, b = {0};
    struct tm_trace_synth p = {.seed = 7, .jobs = 2000, .jobs_per_hour = 100, .gpus = 64};
    size_t shares = 0, big = 0;

    (void)state;
    assert_int_equal(tm_trace_synthesize(&a, &p), 0);
    assert_int_equal(tm_trace_synthesize(&b, &p), 0);
    assert_int_equal(a.njobs, 2000);
    assert_int_equal(a.nnodes, 8);
    for (size_t i = 0; i < a.njobs; i++) {
        assert_string_equal(a.jobs[i].name, b.jobs[i].name);
        assert_int_equal(a.jobs[i].submit_ms, b.jobs[i].submit_ms);
        assert_int_equal(a.jobs[i].end_ms, b.jobs[i].end_ms);
        assert_true(a.jobs[i].end_ms > a.jobs[i].start_ms);
        assert_true(a.jobs[i].end_ms - a.jobs[i].start_ms <= 86400000);
        if (i)
            assert_true(a.jobs[i].submit_ms >= a.jobs[i - 1].submit_ms);
        shares += a.jobs[i].gpus == 0;
        big += a.jobs[i].gpus == 8;
    }
    /* 45% shares, 2% eight-GPU jobs, give or take */
    assert_true(shares > 800 && shares < 1000);
    assert_true(big > 15 && big < 70);
    p.jobs = 0;
    assert_int_equal(tm_trace_synthesize(&a, &p), TM_EINVAL);
    tm_trace_release(&a);
    tm_trace_release(&b);
}

/* The predictor's key for a trace task: its own name first, the CPU and
 * memory request standing in for the team (openb has none). */
static void test_estimate_key(void **state)
{
    struct tm_trace_job j = {.cpu_milli = 6000, .memory_mib = 12288, .gpus = 0, .gpu_milli = 460,
                             .klass = TM_CLASS_INFERENCE};
    struct tm_estimate_key k;
    char buf[64];

    (void)state;
    snprintf(j.name, sizeof(j.name), "openb-pod-0001");
    k = tm_trace_estimate_key(&j, buf, sizeof(buf));
    assert_string_equal(k.name, "openb-pod-0001");
    assert_string_equal(k.team, "c6000-m12288");
    assert_int_equal(k.gpu_milli, 460);
    assert_int_equal(k.klass, TM_CLASS_INFERENCE);
    j.gpus = 4;
    j.name[0] = '\0';
    k = tm_trace_estimate_key(&j, buf, sizeof(buf));
    assert_null(k.name); /* no name: no task level */
    assert_int_equal(k.gpu_milli, 4000);
}

static void test_real_openb(void **state)
{
    const char *dir = traces_dir();
    struct tm_trace t = {0};
    char path[768], err[512];
    size_t cpu_only = 0, pending = 0, spec = 0;
    int64_t gpus = 0;

    (void)state;
    if (!dir) {
        skip();
        return;
    }
    snprintf(path, sizeof(path), "%s/openb_node_list_gpu_node.csv", dir);
    assert_int_equal(tm_trace_load_nodes(&t, path, err, sizeof(err)), 0);
    for (size_t i = 0; i < t.nnodes; i++)
        gpus += t.nodes[i].gpus;
    assert_int_equal(t.nnodes, 1213);
    assert_int_equal(gpus, 6212);
    assert_int_equal(t.nmodels, 7);
    snprintf(path, sizeof(path), "%s/openb_pod_list_default.csv", dir);
    assert_int_equal(tm_trace_load_pods(&t, path, err, sizeof(err)), 0);
    assert_int_equal(t.njobs, 8152);
    for (size_t i = 0; i < t.njobs; i++) {
        cpu_only += t.jobs[i].gpus == 0 && t.jobs[i].gpu_milli == 0;
        pending += t.jobs[i].start_ms < 0;
    }
    /* the README's counts */
    assert_int_equal(cpu_only, 1088);
    assert_int_equal(pending, 897);
    snprintf(path, sizeof(path), "%s/openb_pod_list_gpuspec33.csv", dir);
    assert_int_equal(tm_trace_load_pods(&t, path, err, sizeof(err)), 0);
    for (size_t i = 0; i < t.njobs; i++)
        spec += t.jobs[i].model_mask != 0;
    assert_int_equal(spec, 2388);
    tm_trace_release(&t);
}

/* The folder README's counts. */
static void test_real_philly(void **state)
{
    const char *dir = trace_dir("philly-pollux");
    struct tm_trace t = {0};
    char path[768], err[512], teams[16][TM_TRACE_NAME_MAX];
    size_t nteams = 0, gangs = 0, one = 0;
    double gpu_s = 0;

    (void)state;
    if (!dir) {
        skip();
        return;
    }
    snprintf(path, sizeof(path), "%s/philly.csv", dir);
    if (tm_trace_load_pods(&t, path, err, sizeof(err)) != 0)
        fail_msg("%s", err);
    assert_int_equal(t.njobs, 82247);
    for (size_t i = 0; i < t.njobs; i++) {
        const struct tm_trace_job *j = &t.jobs[i];
        size_t k;
        if (i > 0)
            assert_true(j->submit_ms >= t.jobs[i - 1].submit_ms);
        for (k = 0; k < nteams && strcmp(teams[k], j->team) != 0; k++)
            ;
        if (k == nteams) {
            assert_true(nteams < 16);
            snprintf(teams[nteams++], TM_TRACE_NAME_MAX, "%s", j->team);
        }
        gangs += j->nodes > 1;
        one += j->nodes == 1 && j->gpus == 1;
        gpu_s += (double)j->gpus * (j->nodes > 1 ? j->nodes : 1) * (double)(j->end_ms - j->start_ms) / 1000;
    }
    assert_int_equal(nteams, 15);
    assert_int_equal(one, 76627);
    /* 16, 32, 64 and 128 GPUs, and the 7 jobs of 12 and 7 of 24 */
    assert_int_equal(gangs, 199 + 67 + 6 + 3 + 14);
    assert_true(gpu_s / 3600 > 970000 && gpu_s / 3600 < 990000);
    /* submitted 2017-09-04 10:30 to 2017-12-22 08:02 */
    assert_true(t.jobs[t.njobs - 1].submit_ms / 86400000 == 108);
    tm_trace_release(&t);
}

static int setup(void **state)
{
    (void)state;
    snprintf(tmpdir, sizeof(tmpdir), "/tmp/tm_test_trace.XXXXXX");
    return mkdtemp(tmpdir) ? 0 : -1;
}

static int teardown(void **state)
{
    char cmd[512];

    (void)state;
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", tmpdir);
    return system(cmd) == 0 ? 0 : -1;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_load_good),
        cmocka_unit_test(test_load_bad),
        cmocka_unit_test(test_synthetic),
        cmocka_unit_test(test_estimate_key),
        cmocka_unit_test(test_real_openb),
        cmocka_unit_test(test_philly_good),
        cmocka_unit_test(test_philly_bad),
        cmocka_unit_test(test_real_philly),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
