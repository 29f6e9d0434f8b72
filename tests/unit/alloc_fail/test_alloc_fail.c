/*
 * tests/unit/alloc_fail/test_alloc_fail.c: every allocation of the config
 * loader, the API body parsers, the EC2 answer parser and a scheduler pass
 * is made to fail in turn (alloc_fail.h).  Each run must end in success or
 * in TM_ENOMEM with a message, never a crash, never another error (an
 * allocation failure reported as "malformed JSON" would send a client
 * away with a lie); under ASan (the CI's second build) a leak on any of
 * these paths fails the test at exit.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <cjson/cJSON.h>
#include <jansson.h>

#include "controller/sched/scheduler.h"
#include "controller/spec/api_body.h"
#include "controller/spec/job_spec.h"
#include "controller/spec/json_body.h"
#include "core/config.h"
#include "core/err.h"
#include "core/file.h"
#include "core/log.h"
#include "providers/aws/ec2.h"
#include "tests/unit/alloc_fail/alloc_fail.h"

void *__real_malloc(size_t size);

/* One operation under test: 0 or a tm error, everything it made released. */
typedef int (*step_fn)(void *ctx, char *err, size_t errsize);

/* Run fn once to count its allocations, then once per allocation with that
 * one failing.  Returns how many runs reported TM_ENOMEM. */
static size_t sweep(const char *what, step_fn fn, void *ctx)
{
    char err[1024];
    size_t total, enomem = 0, survived = 0;

    tm_alloc_fail_at(0);
    err[0] = '\0';
    int r = fn(ctx, err, sizeof(err));
    total = tm_alloc_count();
    if (r != 0)
        fail_msg("%s: fails without injection: %d %s", what, r, err);
    assert_true(total > 0);

    for (size_t n = 1; n <= total; n++) {
        err[0] = '\0';
        tm_alloc_fail_at(n);
        r = fn(ctx, err, sizeof(err));
        int hit = tm_alloc_failed();
        tm_alloc_fail_at(0);
        if (!hit)
            fail_msg("%s: allocation %zu of %zu did not happen on the second run", what, n, total);
        if (r == 0) {
            survived++;
            continue;
        }
        if (r != TM_ENOMEM)
            fail_msg("%s: allocation %zu of %zu failed and the call said %s (%d): \"%s\"", what,
                     n, total, tm_strerror(r), r, err);
        if (err[0] == '\0')
            fail_msg("%s: allocation %zu of %zu failed with no message", what, n, total);
        enomem++;
    }
    print_message("%-28s %5zu allocations: %zu out-of-memory errors, %zu absorbed\n", what, total,
                  enomem, survived);
    return enomem;
}

/* ---- the config loader ---------------------------------------------------- */

struct config_ctx {
    char *text;
    size_t len;
    const char *name;
};

static int config_step(void *data, char *err, size_t errsize)
{
    struct config_ctx *c = data;
    struct tm_config cfg = {0};
    int r = tm_config_load_string(c->text, c->len, c->name, &cfg, err, errsize);
    if (r == 0)
        tm_config_release(&cfg);
    tm_log_clear_secrets();
    return r;
}

static void config_sweep(const char *file)
{
    char path[1024], err[256];
    struct config_ctx c = {0};
    snprintf(path, sizeof(path), "%s/%s", TM_SOURCE_DIR, file);
    assert_int_equal(tm_file_read(path, 1 << 20, &c.text, &c.len, err, sizeof(err)), 0);
    c.name = path;
    assert_true(sweep(file, config_step, &c) > 0);
    free(c.text);
}

static void test_config_loader(void **state)
{
    (void)state;
    config_sweep("config/tarmac.example.yaml");
    config_sweep("config/demo.yaml");
}

/* ---- the API body parsers ------------------------------------------------- */

static int job_body_step(void *data, char *err, size_t errsize)
{
    const char *body = data;
    struct tm_job_spec spec;
    struct tm_spec_error e;
    cJSON *root = NULL;
    memset(&e, 0, sizeof(e));
    int r = tm_job_spec_parse_json(body, strlen(body), &spec, &root, &e);
    cJSON_Delete(root);
    if (r != 0)
        snprintf(err, errsize, "%s: %s", e.field, e.message);
    return r;
}

static int heartbeat_step(void *data, char *err, size_t errsize)
{
    const char *body = data;
    struct tm_api_heartbeat hb = {0};
    struct tm_spec_error e;
    memset(&e, 0, sizeof(e));
    int r = tm_api_parse_heartbeat(body, strlen(body), NULL, &hb, &e);
    tm_api_heartbeat_release(&hb);
    if (r != 0)
        snprintf(err, errsize, "%s: %s", e.field, e.message);
    return r;
}

static void test_api_bodies(void **state)
{
    (void)state;
    /* spec/json_body.c stops the process when jansson's allocations fail
     * (jansson cannot recover from it, akheron/jansson#362): after one
     * parse has installed that hook, jansson allocates uncounted here, and
     * the sweep covers cJSON and tarmac's own code. */
    struct tm_spec_error e;
    cJSON *root = NULL;
    assert_int_equal(tm_json_body_parse("{}", 2, &root, &e), 0);
    cJSON_Delete(root);
    json_set_alloc_funcs(__real_malloc, free);
    static const char job[] =
        "{\"team\": \"vision\", \"name\": \"resnet-sweep-7\", \"command\": \"python train.py\","
        " \"gpus\": 4, \"nodes\": 2, \"cpu_milli\": 16000, \"memory_mib\": 65536,"
        " \"gpu_model\": \"a100\", \"class\": \"train\", \"priority\": 10,"
        " \"preemptible\": true, \"checkpointable\": true, \"runtime_estimate_s\": 7200,"
        " \"deadline\": \"12h\"}";
    static const char heartbeat[] =
        "{\"jobs\": [{\"id\": 7, \"state\": \"succeeded\", \"reason\": \"exit 0\"},"
        " {\"id\": 8, \"state\": \"failed\", \"reason\": \"exit 3\"}],"
        " \"gpus\": [{\"index\": 0, \"util_percent\": 93.5, \"memory_used_mib\": 61000,"
        " \"at_ms\": 1764400000000}, {\"index\": 1, \"util_percent\": 2,"
        " \"memory_used_mib\": 10, \"at_ms\": 1764400000000}]}";
    assert_true(sweep("job submission body", job_body_step, (void *)job) > 0);
    assert_true(sweep("heartbeat body", heartbeat_step, (void *)heartbeat) > 0);
}

/* ---- the EC2 answer parser ------------------------------------------------ */

struct ec2_ctx {
    char *text;
    size_t len;
};

static int ec2_step(void *data, char *err, size_t errsize)
{
    struct ec2_ctx *c = data;
    struct tm_ec2_reply reply;
    int r = tm_ec2_parse_reply(TM_EC2_DESCRIBE_INSTANCES, c->text, c->len, &reply, err, errsize);
    if (r == 0)
        tm_ec2_reply_release(&reply);
    return r;
}

static void test_ec2_parser(void **state)
{
    (void)state;
    const char *files[] = {"moto-di1.xml", "aws-describe-interrupted.xml"};
    for (size_t i = 0; i < sizeof(files) / sizeof(files[0]); i++) {
        char path[1024], err[256];
        struct ec2_ctx c = {0};
        snprintf(path, sizeof(path), "%s/tests/fuzz/corpus/ec2_xml/%s", TM_SOURCE_DIR, files[i]);
        assert_int_equal(tm_file_read(path, 1 << 20, &c.text, &c.len, err, sizeof(err)), 0);
        assert_true(sweep(files[i], ec2_step, &c) > 0);
        free(c.text);
    }
}

/* ---- a scheduler pass ----------------------------------------------------- */

#define SCHED_NODES 12
#define SCHED_JOBS 40
#define SCHED_ALLOCS 8

struct sched_ctx {
    struct tm_sched_input in;
};

static int sched_step(void *data, char *err, size_t errsize)
{
    struct sched_ctx *c = data;
    struct tm_sched_result res;
    int r = tm_sched_run(&c->in, &res);
    if (r == 0)
        tm_sched_result_release(&res);
    else
        snprintf(err, errsize, "scheduler pass: %s", tm_strerror(r));
    return r;
}

static void test_scheduler_pass(void **state)
{
    (void)state;
    struct tm_sched_node nodes[SCHED_NODES];
    struct tm_sched_job jobs[SCHED_JOBS];
    struct tm_sched_alloc allocs[SCHED_ALLOCS];
    uint64_t x = 0x9e3779b97f4a7c15ULL;
#define NEXT() (x ^= x << 13, x ^= x >> 7, x ^= x << 17, x)

    memset(nodes, 0, sizeof(nodes));
    memset(jobs, 0, sizeof(jobs));
    memset(allocs, 0, sizeof(allocs));
    for (int i = 0; i < SCHED_NODES; i++) {
        nodes[i] = (struct tm_sched_node){.id = i + 1, .cpu_milli = 96000, .memory_mib = 1 << 20,
                                          .gpus = (i % 3 == 0) ? 4 : 8, .model = i % 2,
                                          .spot = i % 4 == 0, .schedulable = true, .rank = i};
    }
    for (int i = 0; i < SCHED_ALLOCS; i++) {
        allocs[i] = (struct tm_sched_alloc){.job_id = 1000 + i, .node = i, .gpu_mask = 0x3,
                                            .gpu_milli = 1000, .cpu_milli = 8000,
                                            .memory_mib = 32768, .end_ms = 3600000 * (i + 1),
                                            .preemptible = i % 2 == 0};
    }
    for (int i = 0; i < SCHED_JOBS; i++) {
        uint64_t v = NEXT();
        bool share = v % 7 == 0;
        jobs[i] = (struct tm_sched_job){
            .id = i + 1,
            .submit_ms = -(int64_t)(v % 86400000),
            .estimate_ms = (v >> 8) % 3 ? (int64_t)((v >> 16) % 36000000) + 60000 : 0,
            .cpu_milli = (int64_t)((v >> 24) % 32) * 1000,
            .memory_mib = (int64_t)((v >> 28) % 128) * 1024,
            .model_mask = (v >> 32) % 3 ? 0 : 1u << ((v >> 34) % 2),
            .gpus = share ? 0 : 1 << ((v >> 36) % 4),
            .gpu_milli = share ? 250 : 1000,
            .nodes = share ? 1 : 1 + (int32_t)((v >> 40) % 4 == 0),
            .priority = (int32_t)((v >> 44) % 5),
            .klass = TM_CLASS_TRAIN,
            .preemptible = (v >> 48) % 2,
            .estimate_known = (v >> 50) % 4 == 0,
        };
    }
    for (int p = 0; p < TM_POLICY_MAX; p++) {
        struct sched_ctx c = {.in = {.jobs = jobs, .njobs = SCHED_JOBS, .nodes = nodes,
                                     .nnodes = SCHED_NODES, .allocs = allocs,
                                     .nallocs = SCHED_ALLOCS, .now_ms = 0,
                                     .policy = (enum tm_sched_policy)p,
                                     .params = {.starvation_ms = TM_SCHED_STARVATION_DEFAULT_MS,
                                                .short_ms = TM_SCHED_SHORT_DEFAULT_MS,
                                                .align_ends = p % 2 == 0,
                                                .elastic = p % 2 == 1}}};
        char what[64];
        snprintf(what, sizeof(what), "scheduler pass (%s)", tm_sched_policy_name(p));
        assert_true(sweep(what, sched_step, &c) > 0);
    }
#undef NEXT
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_config_loader),
        cmocka_unit_test(test_api_bodies),
        cmocka_unit_test(test_ec2_parser),
        cmocka_unit_test(test_scheduler_pass),
    };
    tm_log_set_level(TM_LOG_LEVEL_MAX);
    tm_alloc_hook_libraries();
    return cmocka_run_group_tests(tests, NULL, NULL);
}
