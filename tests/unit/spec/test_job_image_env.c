/*
 * tests/unit/spec/test_job_image_env.c: `image` and `env` as the CLI and the
 * API check them (controller/spec/image_ref.c, job_spec.c): image
 * references by the OCI distribution grammar, runtime options and
 * non-ASCII names refused naming `image`; the names that steer the host's
 * container runtime or the agent's GPU share refused naming env.NAME; a
 * container job's values without line breaks.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "controller/spec/image_ref.h"
#include "controller/spec/job_spec.h"

static int parse(const char *body, struct tm_spec_error *err)
{
    struct tm_job_spec s;
    cJSON *root = NULL;
    int r;

    tm_job_spec_init(&s);
    memset(err, 0, sizeof(*err));
    r = tm_job_spec_parse_json(body, strlen(body), &s, &root, err);
    tm_job_spec_release(&s);
    cJSON_Delete(root);
    return r;
}

static void test_image_refs(void **state)
{
    static const char *const good[] = {
        "ubuntu",
        "ubuntu:22.04",
        "library/ubuntu:latest",
        "nvcr.io/nvidia/pytorch:24.01-py3",
        "localhost:5000/team/img",
        "registry.example:5000/a/b/c:tag_1.2-x",
        "[::1]:5000/img:1",
        "Registry.Example/img",
        "img@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef",
        "reg.io/a__b/c-d--e.f:t@sha256:0123456789abcdef0123456789abcdef",
    };
    static const char *const bad[] = {
        "",
        "--privileged",
        "-v/:/host",
        "--entrypoint=/bin/sh",
        "-",
        "Ubuntu",               /* upper case in the path */
        "ubuntu:",              /* empty tag */
        ":tag",
        "a b",
        "img'quote",
        "img;rm",
        "im\xc3\xa1ge",          /* not ASCII */
        "ima\xd0\xb5",          /* a Cyrillic e */
        "img:-tag",             /* a tag starts with a word character */
        "img@sha256:abc",       /* a digest has 32 hex digits or more */
        "/img",
        "img/",
        "a//b",
        "img..x",
        "_img",
    };
    char longname[300];
    (void)state;

    for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++)
        if (tm_image_ref_check(good[i]) != 1)
            fail_msg("refused a good reference: %s", good[i]);
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
        if (tm_image_ref_check(bad[i]) != 0)
            fail_msg("accepted a bad reference: %s", bad[i]);
    /* the name at most 255 bytes, the tag not counted */
    memset(longname, 'a', 255);
    strcpy(longname + 255, ":t");
    assert_int_equal(tm_image_ref_check(longname), 1);
    longname[255] = 'a';
    longname[256] = '\0';
    assert_int_equal(tm_image_ref_check(longname), 0);
}

static void test_refused_fields(void **state)
{
    static const struct {
        const char *body, *field;
    } cases[] = {
        {"{\"team\":\"x\",\"gpus\":1,\"image\":\"--privileged\"}", "image"},
        {"{\"team\":\"x\",\"gpus\":1,\"image\":\"-v/:/host\"}", "image"},
        {"{\"team\":\"x\",\"gpus\":1,\"image\":\"--entrypoint=/bin/sh\"}", "image"},
        {"{\"team\":\"x\",\"gpus\":1,\"image\":\"\\u00e9cole/img\"}", "image"},
        {"{\"team\":\"x\",\"gpus\":1,\"env\":{\"NVIDIA_VISIBLE_DEVICES\":\"all\"}}", "env.NVIDIA_VISIBLE_DEVICES"},
        {"{\"team\":\"x\",\"gpus\":1,\"env\":{\"NVIDIA_DRIVER_CAPABILITIES\":\"all\"}}",
         "env.NVIDIA_DRIVER_CAPABILITIES"},
        {"{\"team\":\"x\",\"gpus\":1,\"env\":{\"CUDA_MPS_ACTIVE_THREAD_PERCENTAGE\":\"100\"}}",
         "env.CUDA_MPS_ACTIVE_THREAD_PERCENTAGE"},
        {"{\"team\":\"x\",\"gpus\":1,\"env\":{\"CUDA_VISIBLE_DEVICES\":\"0\"}}", "env.CUDA_VISIBLE_DEVICES"},
        {"{\"team\":\"x\",\"gpus\":1,\"env\":{\"TARMAC_JOB_ID\":\"1\"}}", "env.TARMAC_JOB_ID"},
        {"{\"team\":\"x\",\"gpus\":1,\"image\":\"img\",\"env\":{\"K\":\"a\\nb\"}}", "env.K"},
    };
    struct tm_spec_error err;
    (void)state;

    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        if (parse(cases[i].body, &err) == 0)
            fail_msg("accepted %s", cases[i].body);
        if (strcmp(err.field, cases[i].field) != 0)
            fail_msg("%s: field %s, expected %s", cases[i].body, err.field, cases[i].field);
    }
}

/* The CLI's path (--image, --env NAME=VALUE) refuses the same. */
static void test_cli_text(void **state)
{
    struct tm_job_spec s;
    struct tm_spec_error err;
    (void)state;

    tm_job_spec_init(&s);
    assert_int_not_equal(tm_job_spec_set_text(&s, "image", "--privileged", &err), 0);
    assert_string_equal(err.field, "image");
    assert_int_not_equal(tm_job_spec_set_text(&s, "image", "-v/:/host", &err), 0);
    assert_string_equal(err.field, "image");
    assert_int_equal(tm_job_spec_set_text(&s, "image", "reg.io/team/img:1", &err), 0);
    assert_int_not_equal(tm_job_spec_set_text(&s, "env", "NVIDIA_VISIBLE_DEVICES=all", &err), 0);
    assert_string_equal(err.field, "env.NVIDIA_VISIBLE_DEVICES");
    assert_int_equal(tm_job_spec_set_text(&s, "env", "LD_PRELOAD=/x.so", &err), 0);
    tm_job_spec_release(&s);
}

/* Names that steer a shell, a loader or a runtime client reach only the
 * job's own processes (the agent confines them), so they are accepted,
 * and a host job's value may hold a line break. */
static void test_confined_names(void **state)
{
    struct tm_spec_error err;
    (void)state;

    assert_int_equal(parse("{\"team\":\"x\",\"gpus\":1,\"image\":\"reg.io/a/b:1\",\"env\":{\"PATH\":\"/x\","
                           "\"LD_PRELOAD\":\"/x.so\",\"LD_LIBRARY_PATH\":\"/l\",\"DOCKER_HOST\":\"tcp://x\","
                           "\"CUDA_LAUNCH_BLOCKING\":\"1\"}}",
                           &err),
                     0);
    assert_int_equal(parse("{\"team\":\"x\",\"gpus\":1,\"env\":{\"K\":\"a\\nb\"}}", &err), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_image_refs),
        cmocka_unit_test(test_refused_fields),
        cmocka_unit_test(test_confined_names),
        cmocka_unit_test(test_cli_text),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
