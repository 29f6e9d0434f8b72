/* tests/unit/fleet/test_spot_fit.c: the spot hazard and availability fits
 * (controller/fleet/spot_fit.c), the trace reader (spot_traces.c) and the hazard
 * table (spot_hazards.c): known answers on small trace files written here,
 * bad input, and the real traces in ../shared/traces/spot when present. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <cmocka.h>

#include "controller/fleet/spot_fit.h"
#include "core/spot_hazards.h"
#include "controller/fleet/spot_traces.h"
#include "core/err.h"

#define NEAR(a, b) assert_true(fabs((a) - (b)) < 1e-9)

/* A throwaway traces folder: DIR/skypilot-spot-traces/... */
struct tree {
    char root[64];
};

static void mkdirs(const char *path)
{
    char buf[512];
    snprintf(buf, sizeof(buf), "%s", path);
    for (char *p = buf + 1; *p; p++)
        if (*p == '/') {
            *p = '\0';
            mkdir(buf, 0700);
            *p = '/';
        }
}

static void put(struct tree *t, const char *rel, const char *text)
{
    char path[512];
    FILE *f;
    snprintf(path, sizeof(path), "%s/skypilot-spot-traces/%s", t->root, rel);
    mkdirs(path);
    f = fopen(path, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
}

static void tree_new(struct tree *t)
{
    snprintf(t->root, sizeof(t->root), "/tmp/tm-spot-XXXXXX");
    assert_non_null(mkdtemp(t->root));
}

static void tree_free(struct tree *t)
{
    char cmd[128];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", t->root);
    assert_int_equal(system(cmd), 0);
}

static void test_type_names(void **state)
{
    struct tm_spot_key k;
    char err[256];
    (void)state;
    assert_string_equal(tm_spot_type_of_code("aws", "v100_1"), "p3.2xlarge");
    assert_string_equal(tm_spot_type_of_code("aws", "v100_8"), "p3.16xlarge");
    assert_string_equal(tm_spot_type_of_code("aws", "k80_1"), "p2.xlarge");
    assert_string_equal(tm_spot_type_of_code("aws", "k80_8"), "p2.8xlarge");
    assert_string_equal(tm_spot_type_of_code("aws", "intel_64"), "r5.16xlarge");
    assert_string_equal(tm_spot_type_of_code("gcp", "c3-88"), "c3-highcpu-88");
    assert_null(tm_spot_type_of_code("aws", "a100_8"));
    assert_int_equal(tm_spot_key_from_path("preemption/4-node/aws-08-03-2023/us-east-2a_v100_1.json",
                                           &k, err, sizeof(err)), 0);
    assert_int_equal(k.kind, TM_SPOT_PREEMPTION);
    assert_int_equal(k.nodes, 4);
    assert_string_equal(k.provider, "aws");
    assert_string_equal(k.zone, "us-east-2a");
    assert_string_equal(k.type, "p3.2xlarge");
    assert_int_equal(tm_spot_key_from_path("availability/1-node/gcp-04-30-2023/us-central1-a_c3-88.json",
                                           &k, err, sizeof(err)), 0);
    assert_string_equal(k.zone, "us-central1-a");
    assert_string_equal(k.type, "c3-highcpu-88");
    assert_int_equal(tm_spot_key_from_path("preemption/x/aws-1/a_v100_1.json", &k, err, sizeof(err)),
                     TM_EINVAL);
    assert_int_equal(tm_spot_key_from_path("preemption/1-node/aws-1/a_h100_8.json", &k, err,
                                           sizeof(err)), TM_EINVAL);
    assert_non_null(strstr(err, "h100_8"));
}

/* [1,1,1,0,1,1,0] every hour: two losses over five hours up. */
static void test_known_hazard(void **state)
{
    const double v[] = {1, 1, 1, 0, 1, 1, 0};
    struct tm_spot_file_fit f = {0};
    double lo, hi;
    char err[256];
    (void)state;
    assert_int_equal(tm_spot_fit_series(v, 7, 3600, 1, &f, err, sizeof(err)), 0);
    NEAR(f.events, 2);
    NEAR(f.up_hours, 5);
    NEAR(f.events / f.up_hours, 0.4);
    NEAR(f.share, 5.0 / 7);
    NEAR(f.hours, 7);
    /* Garwood: k = 2 -> [0.2422, 7.2247] */
    tm_spot_poisson_interval(2, 5, &lo, &hi);
    assert_true(fabs(lo * 5 - 0.2422) < 1e-3);
    assert_true(fabs(hi * 5 - 7.2247) < 1e-3);
    tm_spot_poisson_interval(0, 10, &lo, &hi);
    NEAR(lo, 0);
    assert_true(fabs(hi * 10 - 3.6889) < 1e-3);
}

/* The fit through files: a 1-node preemption file, a 4-node one (losses
 * counted in instances), and availability 1-node (0/1 probes) and
 * 16-node (a share of 16), pooled per key. */
static void test_files_and_pooling(void **state)
{
    struct tree t;
    struct tm_spot_file_fit *files = NULL;
    struct tm_spot_fit *rows = NULL;
    size_t nf = 0, nr = 0;
    char err[512];
    (void)state;
    tree_new(&t);
    put(&t, "preemption/1-node/aws-01-01-2023/zz-1a_v100_1.json",
        "{\"metadata\": {\"gap_seconds\": 3600}, \"data\": [1, 1, 1, 0, 1, 1, 0]}");
    /* 4 up for 2 h, 1 lost, 3 up 1 h, 2 lost at once, 1 up 1 h: 3 events over 4+4+3+1 = 12 h */
    put(&t, "preemption/4-node/aws-01-01-2023/zz-1a_v100_1.json",
        "{\"metadata\": {\"gap_seconds\": 1800}, \"data\": [4, 4, 4, 4, 3, 3, 1, 1]}");
    put(&t, "availability/1-node/aws-01-01-2023/zz-1a_v100_1.json",
        "{\"metadata\": {\"gap_seconds\": 600}, \"data\": [0, 1, 1, 0, 1, 0, 0, 1]}");
    /* a second run of the same key, twice as long (weighted by hours) */
    put(&t, "availability/1-node/aws-02-01-2023/zz-1a_v100_1.json",
        "{\"metadata\": {\"gap_seconds\": 1200}, \"data\": [1, 1, 1, 1, 1, 1, 1, 1]}");
    put(&t, "availability/16-node/aws-01-01-2023/zz-1b_v100_1.json",
        "{\"metadata\": {\"gap_seconds\": 300}, \"data\": [16, 8, 0, 8]}");
    assert_int_equal(tm_spot_traces_fit(t.root, &files, &nf, err, sizeof(err)), 0);
    assert_int_equal(nf, 5);
    assert_int_equal(tm_spot_fit_merge(files, nf, &rows, &nr), 0);
    assert_int_equal(nr, 3);
    /* sorted by (provider, type, zone, nodes) */
    assert_string_equal(rows[0].zone, "zz-1a");
    assert_int_equal(rows[0].nodes, 1);
    assert_true(rows[0].has_hazard && rows[0].has_availability);
    NEAR(rows[0].hazard_per_hour, 0.4);
    NEAR(rows[0].events, 2);
    NEAR(rows[0].up_hours, 5);
    /* (0.5 x 80 min + 1 x 160 min) / 240 min */
    NEAR(rows[0].availability, (0.5 * 80 + 160) / 240.0);
    assert_int_equal(rows[0].preemption_files, 1);
    assert_int_equal(rows[0].availability_files, 2);
    assert_int_equal(rows[1].nodes, 4);
    NEAR(rows[1].events, 3);
    NEAR(rows[1].up_hours, (4 * 4 + 3 * 2 + 1 * 2) * 0.5);
    NEAR(rows[1].hazard_per_hour, 3 / 12.0);
    assert_false(rows[1].has_availability);
    assert_string_equal(rows[2].zone, "zz-1b");
    assert_int_equal(rows[2].nodes, 16);
    assert_false(rows[2].has_hazard);
    NEAR(rows[2].availability, 0.5);
    free(rows);
    free(files);
    tree_free(&t);
}

/* Bad input: an error naming the file and the problem, nothing fitted. */
static void expect_error(const char *rel, const char *text, const char *what)
{
    struct tree t;
    struct tm_spot_file_fit *files = NULL;
    size_t nf = 0;
    char err[512] = "";
    tree_new(&t);
    put(&t, "preemption/1-node/aws-01-01-2023/zz-1a_v100_1.json",
        "{\"metadata\": {\"gap_seconds\": 60}, \"data\": [1, 0]}");
    if (text)
        put(&t, rel, text);
    assert_int_equal(tm_spot_traces_fit(t.root, &files, &nf, err, sizeof(err)), TM_EINVAL);
    assert_null(files);
    print_message("error: %s\n", err);
    assert_non_null(strstr(err, what));
    if (text)
        assert_non_null(strstr(err, strrchr(rel, '/') + 1));
    tree_free(&t);
}

static void test_bad_input(void **state)
{
    const char *rel = "availability/1-node/aws-01-01-2023/zz-1c_v100_1.json";
    (void)state;
    expect_error(rel, "{\"metadata\": {\"gap_seconds\": 60},\n \"data\": [1, 0,, 1]}",
                 ":2:16: malformed JSON");
    expect_error(rel, "tick,timestamp,fail\n0,2022-10-26,1\n", ":1:1: malformed JSON");
    expect_error(rel, "{\"metadata\": {}, \"data\": [1]}", "no number \"metadata.gap_seconds\"");
    expect_error(rel, "{\"metadata\": {\"gap_seconds\": 0}, \"data\": [1]}", "not positive");
    expect_error(rel, "{\"metadata\": {\"gap_seconds\": 60}, \"data\": [1, -1, 1]}",
                 "item 1 is negative");
    expect_error(rel, "{\"metadata\": {\"gap_seconds\": 60}, \"data\": []}", "\"data\" is empty");
    expect_error(rel, "{\"metadata\": {\"gap_seconds\": 60}, \"data\": [1, \"x\"]}",
                 "item 1 is not a number");
    expect_error(rel, "{\"metadata\": {\"gap_seconds\": 60}, \"data\": [1, 2]}",
                 "value 2 at index 1 is not a whole number of instances in 0..1");
    expect_error(rel, "{\"metadata\": {\"gap_seconds\": 60}, \"data\": [1, 0.5]}", "index 1");
    expect_error("preemption/1-node/aws-01-01-2023/zz-1c_h100_8.json",
                 "{\"metadata\": {\"gap_seconds\": 60}, \"data\": [1]}", "unrecognized instance code");
    {
        struct tm_spot_file_fit *files = NULL;
        size_t nf = 0;
        char err[512];
        double gap, *v = NULL;
        size_t n;
        assert_int_equal(tm_spot_traces_fit("/nonexistent/spot", &files, &nf, err, sizeof(err)),
                         TM_EINVAL);
        assert_non_null(strstr(err, "/nonexistent/spot"));
        assert_int_equal(tm_spot_trace_read("/nonexistent/x.json", &gap, &v, &n, err, sizeof(err)),
                         TM_EINVAL);
        assert_non_null(strstr(err, "/nonexistent/x.json: could not open"));
    }
}

/* spot-fit --yaml writes what the replay's hazard table reads. */
static void test_hazards_file(void **state)
{
    struct tm_spot_hazards h;
    const struct tm_spot_hazard *e;
    char err[256];
    const char *ok = "# comment\n"
                     "hazards:\n"
                     "  - type: g8\n    zone: sim-a\n    hazard_per_hour: 0\n    availability: 1\n"
                     "  - type: g8\n    zone: sim-b\n    hazard_per_hour: 2.5\n    events: 3\n"
                     "    sources: [\"a/b.json\"]\n    provider: aws\n"
                     "  - type: g8\n    zone: sim-b\n    nodes: 4\n    hazard_per_hour: 0.1\n"
                     "  - type: g8\n    zone: sim-c\n    availability: 0.25\n";
    (void)state;
    assert_int_equal(tm_spot_hazards_parse("h.yaml", ok, strlen(ok), &h, err, sizeof(err)), 0);
    assert_int_equal(h.n, 4);
    e = tm_spot_hazards_find(&h, "g8", "sim-b");
    assert_non_null(e);
    assert_int_equal(e->nodes, 1);
    NEAR(e->hazard_per_hour, 2.5);
    assert_false(e->has_availability);
    e = tm_spot_hazards_find(&h, "g8", "sim-c");
    assert_false(e->has_hazard);
    NEAR(e->availability, 0.25);
    assert_null(tm_spot_hazards_find(&h, "g8", "sim-d"));
    {
        /* a hazard only from a 1-node row that has one */
        double x = -1;
        assert_true(tm_spot_hazards_fitted(&h, "g8", "sim-b", &x));
        NEAR(x, 2.5);
        assert_true(tm_spot_hazards_fitted(&h, "g8", "sim-a", NULL));
        assert_false(tm_spot_hazards_fitted(&h, "g8", "sim-c", &x)); /* availability only */
        assert_false(tm_spot_hazards_fitted(&h, "g8", "sim-d", &x));
        assert_false(tm_spot_hazards_fitted(NULL, "g8", "sim-b", &x));
        NEAR(x, 2.5); /* left as it was */
    }
#define BAD(text, what)                                                                            \
    do {                                                                                           \
        assert_int_equal(tm_spot_hazards_parse("h.yaml", text, strlen(text), &h, err, sizeof(err)), \
                         TM_EINVAL);                                                               \
        print_message("error: %s\n", err);                                                         \
        assert_non_null(strstr(err, what));                                                        \
    } while (0)
    BAD("hazards:\n  - type: g8\n    zone: a\n    hazard_per_hour: -1\n", "h.yaml:4: \"hazard_per_hour\" is -1");
    BAD("hazards:\n  - type: g8\n    zone: a\n    availability: 1.5\n", "outside 0..1");
    BAD("hazards:\n  - type: g8\n    zone: a\n", "needs \"hazard_per_hour\" or \"availability\"");
    BAD("hazards:\n  - type: g8\n    zone: a\n    hazard: 1\n", "h.yaml:4: unrecognized key \"hazard\"");
    BAD("hazards:\n  - {type: g8, zone: a, hazard_per_hour: 1}\n  - {type: g8, zone: a, availability: 1}\n",
        "named twice");
    BAD("hazard:\n  - {type: g8}\n", "unrecognized key");
    BAD("hazards: [\n", "h.yaml:");
#undef BAD
}

static const char *spot_dir(char *buf, size_t n)
{
    const char *src = getenv("TM_SOURCE_DIR");
    if (!src)
        src = TM_SOURCE_DIR;
    snprintf(buf, n, "%s/../shared/traces/spot", src);
    return buf;
}

/* The real traces: the README's measured table (section 1, and the crude
 * rates of "How to model", 2). */
static void test_real_traces(void **state)
{
    char dir[1024], path[1200], err[512];
    struct tm_spot_file_fit *files = NULL;
    struct tm_spot_fit *rows = NULL;
    size_t nf = 0, nr = 0;
    bool seen_1c = false, seen_4node = false;
    (void)state;
    spot_dir(dir, sizeof(dir));
    snprintf(path, sizeof(path), "%s/skypilot-spot-traces/preemption/1-node/aws-04-22-2023/"
                                 "us-east-1c_v100_1.json", dir);
    if (access(path, R_OK) != 0) {
        print_message("skipped: %s not readable\n", path);
        skip();
    }
    assert_int_equal(tm_spot_traces_fit(dir, &files, &nf, err, sizeof(err)), 0);
    assert_int_equal(nf, 34); /* "all 34 JSON files of the repository" */
    for (size_t i = 0; i < nf; i++) {
        const struct tm_spot_file_fit *f = &files[i];
        if (strcmp(f->path, "preemption/1-node/aws-04-22-2023/us-east-1c_v100_1.json") == 0) {
            /* gap 32 s, 19961 ticks, avail 0.314, 41 drops, 55.8 h up */
            assert_true(f->gap_s == 32);
            assert_int_equal(f->ticks, 19961);
            assert_true(fabs(f->share - 0.314) < 0.0005);
            NEAR(f->events, 41);
            assert_true(fabs(f->up_hours - 55.8) < 0.05);
            seen_1c = true;
        }
        if (strcmp(f->path, "preemption/4-node/aws-08-03-2023/us-west-2c_v100_1.json") == 0) {
            /* 330 instances lost over 1395.8 instance-hours */
            NEAR(f->events, 330);
            assert_true(fabs(f->up_hours - 1395.8) < 0.05);
            seen_4node = true;
        }
        if (strcmp(f->path, "availability/16-node/aws-08-27-2023/us-east-2b_v100_1.json") == 0)
            assert_true(fabs(f->share - 0.547) < 0.0005);
        if (strcmp(f->path, "availability/1-node/aws-02-15-2023/us-east-1a_v100_1.json") == 0)
            assert_true(fabs(f->share - 0.167) < 0.0005);
    }
    assert_true(seen_1c && seen_4node);
    assert_int_equal(tm_spot_fit_merge(files, nf, &rows, &nr), 0);
    for (size_t i = 0; i < nr; i++) {
        const struct tm_spot_fit *r = &rows[i];
        if (strcmp(r->type, "p3.2xlarge") == 0 && strcmp(r->zone, "us-east-1c") == 0 && r->nodes == 1) {
            assert_true(fabs(r->hazard_per_hour - 0.735) < 0.001);
            assert_true(r->hazard_lo95 < 0.735 && r->hazard_hi95 > 0.735);
            assert_true(fabs(r->availability - 0.467) < 0.0005); /* availability/ 2023-02 file */
        }
        if (strcmp(r->type, "r5.16xlarge") == 0 && strcmp(r->zone, "us-east-1c") == 0)
            assert_true(fabs(r->hazard_per_hour - 1.317) < 0.001);
    }
    free(rows);
    free(files);
}

/* The committed table loads, and says what the traces say today. */
static void test_committed_table(void **state)
{
    char path[1024], err[512];
    struct tm_spot_hazards h;
    const struct tm_spot_hazard *e;
    const char *src = getenv("TM_SOURCE_DIR");
    (void)state;
    snprintf(path, sizeof(path), "%s/config/spot-hazards-aws.yaml", src ? src : TM_SOURCE_DIR);
    assert_int_equal(tm_spot_hazards_load(path, &h, err, sizeof(err)), 0);
    e = tm_spot_hazards_find(&h, "p3.2xlarge", "us-east-1c");
    assert_non_null(e);
    assert_true(fabs(e->hazard_per_hour - 0.7352) < 1e-9);
    assert_true(fabs(e->availability - 0.4665) < 1e-9);
}

/* The bench's mapping (bench/prices/spot-hazards-8gpu-v100.yaml) copies
 * rows of the committed table: the copies must match. */
static void test_bench_mapping_matches(void **state)
{
    static const struct {
        const char *bench_zone, *real_zone;
    } map[] = {{"sim-a", "us-east-1c"}, {"sim-b", "us-west-2b"}};
    char path[1024], err[512];
    struct tm_spot_hazards *fit = malloc(sizeof(*fit)), *bench = malloc(sizeof(*bench));
    const char *src = getenv("TM_SOURCE_DIR");
    (void)state;
    snprintf(path, sizeof(path), "%s/config/spot-hazards-aws.yaml", src ? src : TM_SOURCE_DIR);
    assert_int_equal(tm_spot_hazards_load(path, fit, err, sizeof(err)), 0);
    snprintf(path, sizeof(path), "%s/bench/prices/spot-hazards-8gpu-v100.yaml", src ? src : TM_SOURCE_DIR);
    assert_int_equal(tm_spot_hazards_load(path, bench, err, sizeof(err)), 0);
    assert_int_equal(bench->n, 2);
    for (size_t i = 0; i < 2; i++) {
        const struct tm_spot_hazard *b = tm_spot_hazards_find(bench, "gpu-8x", map[i].bench_zone);
        const struct tm_spot_hazard *f = tm_spot_hazards_find(fit, "p3.2xlarge", map[i].real_zone);
        assert_non_null(b);
        assert_non_null(f);
        assert_true(b->hazard_per_hour == f->hazard_per_hour);
        assert_true(b->availability == f->availability);
    }
    free(fit);
    free(bench);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_type_names),
        cmocka_unit_test(test_known_hazard),
        cmocka_unit_test(test_files_and_pooling),
        cmocka_unit_test(test_bad_input),
        cmocka_unit_test(test_hazards_file),
        cmocka_unit_test(test_real_traces),
        cmocka_unit_test(test_committed_table),
        cmocka_unit_test(test_bench_mapping_matches),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
