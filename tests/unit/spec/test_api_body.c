/*
 * tests/unit/spec/test_api_body.c: the request body rules (controller/spec/job_spec.c,
 * controller/spec/api_body.c) without a server: what passes, what is refused,
 * and which field each refusal names.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "controller/spec/api_body.h"
#include "controller/spec/job_fit.h"
#include "controller/spec/job_spec.h"
#include "controller/spec/json_body.h"
#include "core/err.h"

static int parse(const char *body, struct tm_job_spec *spec, struct tm_spec_error *err)
{
    cJSON *root = NULL;
    int r = tm_job_spec_parse_json(body, strlen(body), spec, &root, err);

    if (r == 0)
        assert_non_null(root);
    else
        assert_null(root);
    cJSON_Delete(root);
    return r;
}

static void test_job_ok(void **state)
{
    struct tm_job_spec s;
    struct tm_spec_error err;
    (void)state;

    assert_int_equal(parse("{\"team\":\"vision\",\"gpus\":4,\"nodes\":2,\"preemptible\":true,"
                           "\"runtime_estimate_s\":90,\"deadline\":\"2h\",\"gpu_model\":null}",
                           &s, &err), 0);
    assert_int_equal(s.gpus, 4);
    assert_int_equal(s.gpu_milli, 1000);
    assert_int_equal(s.nodes, 2);
    assert_true(s.preemptible);
    assert_int_equal(s.runtime_estimate_ms, 90000);
    assert_int_equal(s.deadline_ms, 7200000);
    assert_null(s.gpu_model);
    assert_string_equal(s.klass, "train");

    assert_int_equal(parse("{\"team\":\"a\",\"gpu_milli\":1}", &s, &err), 0);
    assert_int_equal(s.gpus, 0);
    assert_int_equal(s.gpu_milli, 1);
}

static void test_job_refused(void **state)
{
    static const struct { const char *body, *field; } cases[] = {
        {"nope", "body"},
        {"1", "body"},
        {"{}", "team"},
        {"{\"team\":\"x\"}", "gpus"},
        {"{\"team\":\"x\",\"gpus\":0}", "gpus"},
        {"{\"team\":\"x\",\"gpus\":true}", "gpus"},
        {"{\"team\":\"x\",\"gpus\":2,\"gpu_milli\":5}", "gpu_milli"},
        /* one, not both: even the pair a job read back shows */
        {"{\"team\":\"x\",\"gpus\":1,\"gpu_milli\":1000}", "gpu_milli"},
        /* strict JSON (controller/json_body.c) */
        {"{\"team\":\"fro\\u0000zen\",\"gpus\":1}", "team"},
        {"{\"team\":\"x\",\"gpus\":1,\"name\":\"a\\u0001b\"}", "name"},
        {"{\"team\":\"x\",\"gpus\":01}", "body"},
        {"{\"team\":\"x\",\"gpus\":1,\"name\":\"a\tb\"}", "body"},
        {"{\"team\":\"x\",\"gpus\":1,\"name\":\"a\nb\"}", "body"},
        {"\xef\xbb\xbf{\"team\":\"x\",\"gpus\":1}", "body"},
        {"{\"team\":\"fro\xffzen\",\"gpus\":1}", "body"},
        {"{\"team\":\"fro\xc0\xafzen\",\"gpus\":1}", "body"},
        {"{\"team\":\"x\",\"gpus\":1}garbage", "body"},
        {"{\"team\":\"x\",\"gpus\":1e400}", "body"},
        {"{\"team\":\"x\",\"gpus\":99999999999999999999}", "gpus"},
        {"{\"team\":\"x\",\"gpu_milli\":1000}", "gpu_milli"},
        {"{\"team\":\"x\",\"gpu_milli\":0}", "gpu_milli"},
        {"{\"team\":\"x\",\"gpu_milli\":5,\"nodes\":3}", "nodes"},
        {"{\"team\":\"x\",\"gpus\":1,\"nodes\":1025}", "nodes"},
        {"{\"team\":\".x\",\"gpus\":1}", "team"},
        {"{\"team\":\"x\",\"gpus\":1,\"priority\":-1001}", "priority"},
        {"{\"team\":\"x\",\"gpus\":1,\"name\":null}", "name"},
        {"{\"team\":\"x\",\"gpus\":1,\"deadline\":0}", "deadline"},
        {"{\"team\":\"x\",\"gpus\":1,\"deadline\":\"-5m\"}", "deadline"},
        {"{\"team\":\"x\",\"gpus\":1,\"memory_mib\":1073741825}", "memory_mib"},
        {"{\"team\":\"x\",\"gpus\":1,\"gpu_model\":\"|A100\"}", "gpu_model"},
        {"{\"team\":\"x\",\"gpus\":1,\"pool\":\"\"}", "pool"},
        {"{\"team\":\"x\",\"gpus\":1,\"Team\":\"y\"}", "Team"},
        {"{\"team\":\"x\",\"gpus\":1,\"team\":\"x\"}", "team"},
    };
    struct tm_job_spec s;
    struct tm_spec_error err;
    (void)state;

    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        memset(&err, 0, sizeof(err));
        if (parse(cases[i].body, &s, &err) != TM_EINVAL || strcmp(err.field, cases[i].field) != 0)
            fail_msg("%s: field \"%s\" (%s), expected \"%s\"", cases[i].body, err.field,
                     err.message, cases[i].field);
        assert_true(err.message[0] != '\0');
    }
}

/* A raw NUL byte, which no C string literal test above can carry, and the
 * text rule for path segments and query values. */
static void test_strict_bytes(void **state)
{
    static const char raw[] = "{\"team\":\"fro\0zen\",\"gpus\":1}";
    struct tm_job_spec s;
    struct tm_spec_error err;
    cJSON *root = NULL;
    (void)state;

    assert_int_equal(tm_job_spec_parse_json(raw, sizeof(raw) - 1, &s, &root, &err), TM_EINVAL);
    assert_null(root);
    assert_string_equal(err.field, "body");
    assert_true(tm_json_text_ok("caf\xc3\xa9", 5));
    assert_true(tm_json_text_ok("a\tb", 3));
    assert_false(tm_json_text_ok("fro\0zen", 8));
    assert_false(tm_json_text_ok("\xff", 1));
    assert_false(tm_json_text_ok("\xc0\xaf", 2));          /* overlong '/' */
    assert_false(tm_json_text_ok("\xed\xa0\x80", 3));      /* a surrogate */
    assert_false(tm_json_text_ok("\xf4\x90\x80\x80", 4)); /* past U+10FFFF */
    assert_false(tm_json_text_ok("\xe2\x82", 2));          /* cut short */
    assert_false(tm_json_text_ok("a\x1b[31m", 6));
}

/* A job no pool could ever hold (controller/job_fit.c). */
static void test_job_fit(void **state)
{
    static const char cfg_text[] =
        "database: {url: \"postgresql:///x\"}\ncluster: fit\n"
        "providers:\n"
        "  - name: sim\n    kind: sim\n    region: r\n"
        "    instance_types:\n"
        "      - {name: s8, gpus: 8, gpu_model: A100, cpu_milli: 96000, memory_mib: 1000000,"
        " on_demand_price: \"1\"}\n"
        "pools:\n"
        "  - {name: od, provider: sim, zones: [a], instance_types: [s8], gpu_model: A100,"
        " gpus_per_node: 8, capacity_type: on_demand, max_nodes: 4}\n";
    static const struct { const char *body, *field; } cases[] = {
        {"{\"team\":\"x\",\"gpus\":8,\"nodes\":4}", NULL},
        {"{\"team\":\"x\",\"gpu_milli\":500,\"gpu_model\":\"H100|A100\"}", NULL},
        {"{\"team\":\"x\",\"gpus\":9}", "gpus"},
        {"{\"team\":\"x\",\"gpus\":8,\"nodes\":5}", "nodes"},
        {"{\"team\":\"x\",\"gpus\":1,\"cpu_milli\":96001}", "cpu_milli"},
        {"{\"team\":\"x\",\"gpus\":1,\"memory_mib\":1000001}", "memory_mib"},
        {"{\"team\":\"x\",\"gpus\":1,\"gpu_model\":\"H100\"}", "gpu_model"},
        {"{\"team\":\"x\",\"gpus\":1,\"pool\":\"spot\"}", "pool"},
    };
    struct tm_config cfg;
    char msg[512];
    (void)state;

    if (tm_config_load_string(cfg_text, sizeof(cfg_text) - 1, "fit.yaml", &cfg, msg, sizeof(msg)) < 0)
        fail_msg("config: %s", msg);
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        struct tm_job_spec s;
        struct tm_spec_error err = {0};
        assert_int_equal(parse(cases[i].body, &s, &err), 0);
        cJSON *root = NULL;
        assert_int_equal(tm_job_spec_parse_json(cases[i].body, strlen(cases[i].body), &s, &root, &err), 0);
        int r = tm_job_fit_check(&cfg, &s, &err);
        if (!cases[i].field && r != 0)
            fail_msg("%s: refused (%s: %s)", cases[i].body, err.field, err.message);
        if (cases[i].field && (r != TM_EINVAL || strcmp(err.field, cases[i].field) != 0))
            fail_msg("%s: field \"%s\", expected \"%s\"", cases[i].body, err.field, cases[i].field);
        cJSON_Delete(root);
    }
    assert_int_equal(tm_job_fit_check(NULL, NULL, NULL), 0);
    tm_config_release(&cfg);
}

/* The command-line path: the same rules and messages. */
static void test_job_text(void **state)
{
    struct tm_job_spec s;
    struct tm_spec_error err;
    (void)state;

    tm_job_spec_init(&s);
    assert_int_equal(tm_job_spec_set_text(&s, "gpus", "17", &err), TM_EINVAL);
    assert_string_equal(err.field, "gpus");
    assert_string_equal(err.message, "must be a whole number from 1 to 16");
    assert_int_equal(tm_job_spec_set_text(&s, "class", "party", &err), TM_EINVAL);
    assert_int_equal(tm_job_spec_set_text(&s, "runtime_estimate_s", "2h", &err), 0);
    assert_int_equal(s.runtime_estimate_ms, 7200000);
    assert_int_equal(tm_job_spec_set_text(&s, "deadline", "0s", &err), TM_EINVAL);
    assert_int_equal(tm_job_spec_finish(&s, &err), TM_EINVAL);
    assert_string_equal(err.field, "team");
    assert_int_equal(tm_job_spec_set_text(&s, "team", "vision", &err), 0);
    assert_int_equal(tm_job_spec_finish(&s, &err), TM_EINVAL);
    assert_string_equal(err.field, "gpus");
    assert_int_equal(tm_job_spec_set_text(&s, "gpu_milli", "300", &err), 0);
    assert_int_equal(tm_job_spec_finish(&s, &err), 0);
    assert_int_equal(s.gpus, 0);
    assert_int_equal(s.gpu_milli, 300);
}

static void test_heartbeat(void **state)
{
    struct tm_api_heartbeat hb;
    struct tm_spec_error err;
    const char *ok = "{\"jobs\":[{\"id\":7,\"state\":\"failed\",\"reason\":\"oom\"}],"
                     "\"gpus\":[{\"index\":3,\"util_percent\":12.5,\"memory_used_mib\":10}]}";
    (void)state;

    assert_int_equal(tm_api_parse_heartbeat(ok, strlen(ok), NULL, &hb, &err), 0);
    assert_int_equal(hb.njobs, 1);
    assert_int_equal(hb.nsamples, 1);
    assert_string_equal(hb.report, "{\"jobs\":[{\"id\":7,\"state\":\"failed\",\"reason\":\"oom\"}],\"running\":[]}");
    tm_api_heartbeat_release(&hb);
    assert_int_equal(tm_api_parse_heartbeat(NULL, 0, NULL, &hb, &err), 0);
    assert_string_equal(hb.report, "{\"jobs\":[],\"running\":[]}");
    assert_string_equal(hb.samples, "[]");
    tm_api_heartbeat_release(&hb);
    /* The running jobs and the period go on to the answer's gang stops. */
    const char *run = "{\"running\":[{\"job_id\":7,\"attempt\":2,\"pid\":42},{\"job_id\":8}],"
                      "\"heartbeat_ms\":3000}";
    assert_int_equal(tm_api_parse_heartbeat(run, strlen(run), NULL, &hb, &err), 0);
    assert_string_equal(hb.report, "{\"jobs\":[],\"running\":[{\"job_id\":7,\"attempt\":2},{\"job_id\":8}],"
                                   "\"heartbeat_ms\":3000}");
    tm_api_heartbeat_release(&hb);

    static const struct { const char *body, *field; } bad[] = {
        {"{\"jobs\":[{\"id\":0,\"state\":\"failed\"}]}", "jobs[0].id"},
        {"{\"jobs\":[{\"state\":\"failed\"}]}", "jobs[0].id"},
        {"{\"jobs\":[{\"id\":1}]}", "jobs[0].state"},
        {"{\"jobs\":[{\"id\":1,\"state\":\"failed\",\"x\":1}]}", "jobs[0].x"},
        {"{\"jobs\":[5]}", "jobs[0]"},
        {"{\"gpus\":[{\"index\":0,\"util_percent\":-1,\"memory_used_mib\":0}]}", "gpus[0].util_percent"},
        {"{\"gpus\":[{\"index\":0,\"util_percent\":1}]}", "gpus[0].memory_used_mib"},
        {"{\"gpus\":[{\"index\":0,\"util_percent\":1,\"memory_used_mib\":0,\"at_ms\":-1}]}", "gpus[0].at_ms"},
        {"{\"gpus\":\"all\"}", "gpus"},
        {"{\"cpu\":[]}", "cpu"},
        {"{\"heartbeat_ms\":0}", "heartbeat_ms"},
        {"{\"heartbeat_ms\":\"10s\"}", "heartbeat_ms"},
        {"{\"gpus\":[],\"gpus\":[]}", "gpus"},
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        memset(&err, 0, sizeof(err));
        if (tm_api_parse_heartbeat(bad[i].body, strlen(bad[i].body), NULL, &hb, &err) != TM_EINVAL ||
            strcmp(err.field, bad[i].field) != 0)
            fail_msg("%s: field \"%s\", expected \"%s\"", bad[i].body, err.field, bad[i].field);
    }
}

/* The agent's samples: times within the window, floats a real can hold,
 * nested fields named in full. */
static void test_heartbeat_bounds(void **state)
{
    const struct tm_api_sample_window win = {.min_ms = 1000000, .max_ms = 2000000};
    struct tm_api_heartbeat hb;
    struct tm_spec_error err;
    const char *tiny = "{\"samples\":[{\"gpu_index\":0,\"at_ms\":1500000,\"util_percent\":1e-320,"
                       "\"memory_used_mib\":1,\"temperature_c\":1e-50,\"power_w\":1e-39}]}";
    (void)state;

    assert_int_equal(tm_api_parse_heartbeat(tiny, strlen(tiny), &win, &hb, &err), 0);
    assert_non_null(strstr(hb.samples, "\"util_percent\":0,"));
    assert_non_null(strstr(hb.samples, "\"temperature_c\":0,"));
    assert_non_null(strstr(hb.samples, "\"power_w\":0,"));
    tm_api_heartbeat_release(&hb);

    static const struct { const char *body, *field; } bad[] = {
        {"{\"samples\":[{\"gpu_index\":0,\"at_ms\":1500000,\"util_percent\":1,\"memory_used_mib\":1},"
         "{\"gpu_index\":0,\"at_ms\":2000001,\"util_percent\":1,\"memory_used_mib\":1}]}", "samples[1].at_ms"},
        {"{\"samples\":[{\"gpu_index\":0,\"at_ms\":999999,\"util_percent\":1,\"memory_used_mib\":1}]}",
         "samples[0].at_ms"},
        {"{\"gpus\":[{\"index\":0,\"at_ms\":253402300799000,\"util_percent\":1,\"memory_used_mib\":1}]}",
         "gpus[0].at_ms"},
        {"{\"samples\":[{\"gpu_index\":0,\"util_percent\":1,\"memory_used_mib\":1,"
         "\"processes\":[{\"pid\":1},{\"pid\":\"x\"}]}]}", "samples[0].processes[1].pid"},
        {"{\"samples\":[{\"gpu_index\":0,\"util_percent\":1,\"memory_used_mib\":1,"
         "\"processes\":[{\"who\":1}]}]}", "samples[0].processes[0].who"},
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        memset(&err, 0, sizeof(err));
        if (tm_api_parse_heartbeat(bad[i].body, strlen(bad[i].body), &win, &hb, &err) != TM_EINVAL ||
            strcmp(err.field, bad[i].field) != 0)
            fail_msg("%s: field \"%s\", expected \"%s\"", bad[i].body, err.field, bad[i].field);
    }
}

/* An interruption notice: a deadline past the skew refused, the deadline
 * handed back to the second so that a repeat names the same one. */
static void test_notice(void **state)
{
    struct tm_spec_error err;
    char reason[64];
    int64_t in_s, deadline;
    const char *ok = "{\"deadline_ms\":1120400}", *late = "{\"deadline_ms\":1000}";
    const char *skewed = "{\"deadline_ms\":970000}", *rel = "{\"in_s\":30}";
    (void)state;

    assert_int_equal(tm_api_parse_notice(ok, strlen(ok), 1000000, 60000, reason, sizeof(reason), &in_s,
                                         &deadline, &err), 0);
    assert_int_equal(in_s, 120);
    assert_int_equal(deadline, 1120000);
    /* A node clock a little behind ours: taken, with nothing left. */
    assert_int_equal(tm_api_parse_notice(skewed, strlen(skewed), 1000000, 60000, reason, sizeof(reason),
                                         &in_s, &deadline, &err), 0);
    assert_int_equal(in_s, 0);
    memset(&err, 0, sizeof(err));
    assert_int_equal(tm_api_parse_notice(late, strlen(late), 1000000, 60000, reason, sizeof(reason), &in_s,
                                         &deadline, &err), TM_EINVAL);
    assert_string_equal(err.field, "deadline_ms");
    assert_int_equal(tm_api_parse_notice(rel, strlen(rel), 1000400, 60000, reason, sizeof(reason), &in_s,
                                         &deadline, &err), 0);
    assert_int_equal(deadline, 1030000);
    assert_int_equal(tm_api_parse_notice("", 0, 1000000, 60000, reason, sizeof(reason), &in_s, &deadline,
                                         &err), 0);
    assert_int_equal(deadline, 0);
}

static void test_retag_verb(void **state)
{
    struct tm_spec_error err;
    char reason[64];
    int64_t in_s;
    bool pre = false;
    (void)state;

    assert_int_equal(tm_api_parse_retag("{\"preemptible\":true}", 20, &pre, &err), 0);
    assert_true(pre);
    assert_int_equal(tm_api_parse_retag("{\"preemptible\":null}", 20, &pre, &err), TM_EINVAL);
    assert_int_equal(tm_api_parse_retag("", 0, &pre, &err), TM_EINVAL);
    assert_string_equal(err.field, "body");
    assert_int_equal(tm_api_parse_verb("", 0, false, reason, sizeof(reason), &in_s, &err), 0);
    assert_string_equal(reason, "");
    assert_int_equal(in_s, -1);
    assert_int_equal(tm_api_parse_verb("{\"reason\":\"x\",\"in_s\":5}", 23, true, reason,
                                       sizeof(reason), &in_s, &err), 0);
    assert_int_equal(in_s, 5);
    assert_int_equal(tm_api_parse_verb("{\"in_s\":5}", 10, false, reason, sizeof(reason), &in_s,
                                       &err), TM_EINVAL);
    assert_string_equal(err.field, "in_s");
}

static void test_budget(void **state)
{
    static const struct { const char *body, *field; } bad[] = {
        {"", "body"},
        {"[]", "body"},
        {"{}", "cap_cents"},
        {"{\"cap_cents\":-1,\"period\":\"month\",\"hard\":true,\"warn_percent\":80}", "cap_cents"},
        {"{\"cap_cents\":1.5,\"period\":\"month\",\"hard\":true,\"warn_percent\":80}", "cap_cents"},
        {"{\"cap_cents\":\"5\",\"period\":\"month\",\"hard\":true,\"warn_percent\":80}", "cap_cents"},
        {"{\"cap_cents\":1e300,\"period\":\"month\",\"hard\":true,\"warn_percent\":80}", "cap_cents"},
        {"{\"cap_cents\":5,\"period\":\"week\",\"hard\":true,\"warn_percent\":80}", "period"},
        {"{\"cap_cents\":5,\"hard\":true,\"warn_percent\":80}", "period"},
        {"{\"cap_cents\":5,\"period\":\"month\",\"warn_percent\":80}", "hard"},
        {"{\"cap_cents\":5,\"period\":\"month\",\"hard\":1,\"warn_percent\":80}", "hard"},
        {"{\"cap_cents\":5,\"period\":\"month\",\"hard\":true}", "warn_percent"},
        {"{\"cap_cents\":5,\"period\":\"month\",\"hard\":true,\"warn_percent\":0}", "warn_percent"},
        {"{\"cap_cents\":5,\"period\":\"month\",\"hard\":true,\"warn_percent\":101}", "warn_percent"},
        {"{\"cap_cents\":5,\"period\":\"month\",\"hard\":true,\"warn_percent\":80,\"currency\":\"EUR\"}", "currency"},
        {"{\"cap_cents\":5,\"period\":\"month\",\"hard\":true,\"warn_percent\":80,\"currency\":null}", "currency"},
        {"{\"cap_cents\":5,\"period\":\"month\",\"hard\":true,\"warn_percent\":80,\"scope_kind\":\"pool\"}", "scope_kind"},
        {"{\"cap_cents\":5,\"period\":\"month\",\"hard\":true,\"warn_percent\":80,\"extra\":1}", "extra"},
        {"{\"cap_cents\":5,\"cap_cents\":6,\"period\":\"month\",\"hard\":true,\"warn_percent\":80}", "cap_cents"},
    };
    struct tm_api_budget b;
    struct tm_spec_error err;
    (void)state;

    assert_int_equal(tm_api_parse_budget("{\"cap_cents\":500000,\"period\":\"month\",\"hard\":true,"
                                         "\"warn_percent\":80}", 67, &b, &err), 0);
    assert_int_equal(b.cap_cents, 500000);
    assert_int_equal(b.warn_percent, 80);
    assert_true(b.hard);
    assert_false(b.org);
    const char *org = "{\"cap_cents\":0,\"period\":\"month\",\"hard\":false,\"warn_percent\":100,"
                      "\"scope_kind\":\"org\",\"currency\":\"USD\"}";
    assert_int_equal(tm_api_parse_budget(org, strlen(org), &b, &err), 0);
    assert_int_equal(b.cap_cents, 0);
    assert_false(b.hard);
    assert_true(b.org);
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        memset(&err, 0, sizeof(err));
        if (tm_api_parse_budget(bad[i].body, strlen(bad[i].body), &b, &err) != TM_EINVAL)
            fail_msg("accepted %s", bad[i].body);
        if (strcmp(err.field, bad[i].field) != 0)
            fail_msg("%s: field %s, expected %s", bad[i].body, err.field, bad[i].field);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_job_ok),
        cmocka_unit_test(test_job_refused),
        cmocka_unit_test(test_strict_bytes),
        cmocka_unit_test(test_job_fit),
        cmocka_unit_test(test_job_text),
        cmocka_unit_test(test_heartbeat),
        cmocka_unit_test(test_heartbeat_bounds),
        cmocka_unit_test(test_notice),
        cmocka_unit_test(test_retag_verb),
        cmocka_unit_test(test_budget),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
