/*
 * tests/unit/agent/test_join.c: a join's pure parts with known answers:
 * the body POST /v1/agent/join reads (controller/spec/join_body.c; bad
 * fields refused by name), the shape rule and its message, the hardware
 * as the node keeps it, and the GPU model the agent reads from a GPU's
 * name (controller/agent/join.c).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "controller/agent/internal.h"
#include "controller/spec/join_body.h"
#include "core/config.h"
#include "core/err.h"

#define HW "{\"gpus\":8,\"gpu_model\":\"H100\",\"gpu_memory_mib\":81559,\"cpus\":64,\"memory_mib\":1000}"

static void parse_ok(const char *body, struct tm_join_body *b)
{
    struct tm_spec_error err = {0};
    cJSON *root = NULL;

    if (tm_join_parse(body, strlen(body), b, &root, &err) != 0)
        fail_msg("refused %s: %s %s", body, err.field, err.message);
    cJSON_Delete(root);
}

static void parse_refused(const char *body, const char *field)
{
    struct tm_spec_error err = {0};
    struct tm_join_body b;
    cJSON *root = NULL;

    assert_int_equal(tm_join_parse(body, strlen(body), &b, &root, &err), TM_EINVAL);
    assert_null(root);
    if (strcmp(err.field, field) != 0)
        fail_msg("%s: want field %s, got %s (%s)", body, field, err.field, err.message);
}

static void test_parse(void **state)
{
    struct tm_join_body b;
    (void)state;

    parse_ok("{\"pool\":\"dgx\",\"node_key\":\"0123456789abcdef0123456789abcdef\",\"join_token\":\"t\","
             "\"address\":\"10.0.0.5\",\"hardware\":" HW "}", &b);
    assert_int_equal(b.hw.gpus, 8);
    assert_string_equal(b.hw.gpu_model, "H100");
    assert_int_equal(b.hw.gpu_memory_mib, 81559);
    parse_ok("{\"pool\":\"dgx\",\"node_key\":\"0123456789abcdef0123456789abcdef\",\"hardware\":"
             "{\"gpus\":0,\"gpu_memory_mib\":0,\"cpus\":1,\"memory_mib\":1}}", &b);
    assert_null(b.join_token);

    parse_refused("[]", "body");
    parse_refused("{\"node_key\":\"0123456789abcdef0123456789abcdef\",\"hardware\":" HW "}", "pool");
    parse_refused("{\"pool\":\"a b\",\"node_key\":\"0123456789abcdef0123456789abcdef\",\"hardware\":" HW "}", "pool");
    parse_refused("{\"pool\":\"dgx\",\"node_key\":\"short\",\"hardware\":" HW "}", "node_key");
    parse_refused("{\"pool\":\"dgx\",\"node_key\":\"0123456789abcdef0123456789abcdef\"}", "hardware");
    parse_refused("{\"pool\":\"dgx\",\"node_key\":\"0123456789abcdef0123456789abcdef\",\"hardware\":"
                  "{\"gpus\":8}}", "hardware.gpu_model");
    parse_refused("{\"pool\":\"dgx\",\"node_key\":\"0123456789abcdef0123456789abcdef\",\"hardware\":"
                  "{\"gpus\":1.5,\"gpu_model\":\"H100\",\"gpu_memory_mib\":1,\"cpus\":1,\"memory_mib\":1}}",
                  "hardware.gpus");
    parse_refused("{\"pool\":\"dgx\",\"node_key\":\"0123456789abcdef0123456789abcdef\",\"hardware\":" HW
                  ",\"hardware\":" HW "}", "hardware");
    parse_refused("{\"pool\":\"dgx\",\"node_key\":\"0123456789abcdef0123456789abcdef\",\"hardware\":" HW
                  ",\"extra\":1}", "extra");
    parse_refused("{\"pool\":\"dgx\",\"node_key\":\"0123456789abcdef0123456789abcdef\",\"address\":"
                  "\"host.example\",\"hardware\":" HW "}", "address");
}

static void test_shape(void **state)
{
    struct tm_config_pool pool = {.name = "dgx", .gpu_model = "H100", .gpus_per_node = 8};
    struct tm_join_hardware hw = {.gpus = 8, .gpu_model = "H100", .cpus = 1, .memory_mib = 1};
    char why[160];
    (void)state;

    assert_true(tm_join_shape_ok(&pool, &hw, why, sizeof(why)));
    hw.gpus = 4;
    snprintf(hw.gpu_model, sizeof(hw.gpu_model), "A100");
    assert_false(tm_join_shape_ok(&pool, &hw, why, sizeof(why)));
    assert_string_equal(why, "pool dgx wants 8 x H100, machine has 4 x A100");
    snprintf(hw.gpu_model, sizeof(hw.gpu_model), "H100");
    assert_false(tm_join_shape_ok(&pool, &hw, why, sizeof(why)));
    /* mixed shapes: fewer GPUs of the model, never more, never another model */
    pool.mixed_shapes = true;
    assert_true(tm_join_shape_ok(&pool, &hw, why, sizeof(why)));
    hw.gpus = 9;
    assert_false(tm_join_shape_ok(&pool, &hw, why, sizeof(why)));
    assert_string_equal(why, "pool dgx wants 1 to 8 x H100, machine has 9 x H100");
    hw.gpus = 0;
    assert_false(tm_join_shape_ok(&pool, &hw, why, sizeof(why)));
    assert_string_equal(why, "pool dgx wants 1 to 8 x H100, machine has 0 x no GPU");
}

static void test_hardware_json(void **state)
{
    struct tm_join_hardware hw = {.gpus = 2, .gpu_model = "A100", .gpu_memory_mib = 81920, .cpus = 8,
                                  .memory_mib = 16384};
    char buf[256];
    (void)state;

    assert_true(tm_join_hardware_json(&hw, buf, sizeof(buf)));
    assert_string_equal(buf, "{\"cpus\": 8, \"gpu_memory_mib\": 81920, \"gpu_model\": \"A100\", "
                             "\"gpus\": 2, \"memory_mib\": 16384}");
    assert_false(tm_join_hardware_json(&hw, buf, 16));
}

static void test_gpu_model(void **state)
{
    static const char *const cases[][2] = {
        {"NVIDIA H100 80GB HBM3", "H100"},   {"NVIDIA A100-SXM4-80GB", "A100"},
        {"Tesla V100-SXM2-16GB", "V100"},    {"NVIDIA GeForce RTX 4090", "RTX"},
        {"NVIDIA L40S", "L40S"},             {"", "unknown"},
        {"Fake GPU", "Fake"},                {"NVIDIA", "unknown"},
    };
    char out[64];
    (void)state;

    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        tm_agent_gpu_model(cases[i][0], out, sizeof(out));
        if (strcmp(out, cases[i][1]) != 0)
            fail_msg("\"%s\": want %s, got %s", cases[i][0], cases[i][1], out);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_parse),
        cmocka_unit_test(test_shape),
        cmocka_unit_test(test_hardware_json),
        cmocka_unit_test(test_gpu_model),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
