/*
 * tests/unit/agent/test_checkpoint.c: each attempt's checkpoint folder and
 * the newest complete checkpoint of an earlier attempt
 * (controller/agent/checkpoint.h), on a real folder: incomplete folders,
 * later attempts, the attempt's own folder and names that only look like
 * attempts are passed over; the variables and the {resume_dir}
 * placeholder a job is given.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "controller/agent/answer.h"
#include "controller/agent/checkpoint.h"
#include "controller/agent/job_env.h"
#include "core/err.h"

static char root[256];

static void put(const char *rel, bool complete)
{
    char p[512];
    snprintf(p, sizeof(p), "%s/%s", root, rel);
    assert_int_equal(mkdir(p, 0700), 0);
    if (complete) {
        snprintf(p, sizeof(p), "%s/%s/" TM_CHECKPOINT_COMPLETE, root, rel);
        FILE *f = fopen(p, "w");
        assert_non_null(f);
        fclose(f);
    }
}

static int setup(void **state)
{
    snprintf(root, sizeof(root), "%s/tm-ckpt-XXXXXX", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
    return mkdtemp(root) ? 0 : -1;
}

static int teardown(void **state)
{
    char cmd[300];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", root);
    return system(cmd) == 0 ? 0 : -1;
}

static void test_attempt_dir(void **state)
{
    char out[64], tiny[8];
    assert_int_equal(tm_agent_attempt_dir("/ck/job-7", 3, out, sizeof(out)), 0);
    assert_string_equal(out, "/ck/job-7/attempt-3");
    assert_int_equal(tm_agent_attempt_dir("/ck/job-7", 3, tiny, sizeof(tiny)), TM_EINVAL);
}

static void test_newest_complete(void **state)
{
    char out[512], want[512];

    /* No job folder yet (a first attempt): nothing. */
    assert_int_equal(tm_agent_resume_dir(root, 1, out, sizeof(out)), 0);
    put("attempt-1", true);
    put("attempt-2", true);
    put("attempt-3", false);   /* died mid-checkpoint: no marker */
    put("attempt-5", true);    /* this attempt's own, and a later one */
    put("attempt-6", true);
    put("attempt-02", true);   /* not an attempt folder */
    put("attempt-x", true);
    put("other", true);

    assert_int_equal(tm_agent_resume_dir(root, 1, out, sizeof(out)), 0);
    assert_int_equal(tm_agent_resume_dir(root, 2, out, sizeof(out)), 1);
    snprintf(want, sizeof(want), "%s/attempt-1", root);
    assert_string_equal(out, want);
    /* Attempt 4: 3 is incomplete, so 2. */
    assert_int_equal(tm_agent_resume_dir(root, 4, out, sizeof(out)), 1);
    snprintf(want, sizeof(want), "%s/attempt-2", root);
    assert_string_equal(out, want);
    /* Attempt 5 never resumes from itself or from 6. */
    assert_int_equal(tm_agent_resume_dir(root, 5, out, sizeof(out)), 1);
    assert_string_equal(out, want);
    assert_int_equal(tm_agent_resume_dir(root, 7, out, sizeof(out)), 1);
    snprintf(want, sizeof(want), "%s/attempt-6", root);
    assert_string_equal(out, want);
    /* A marker that is a folder does not count. */
    put("attempt-9", false);
    put("attempt-9/" TM_CHECKPOINT_COMPLETE, false);
    assert_int_equal(tm_agent_resume_dir(root, 10, out, sizeof(out)), 1);
    assert_string_equal(out, want);
}

static const char *env_get(char **env, const char *name)
{
    size_t n = strlen(name);
    for (char **p = env; *p; p++)
        if (strncmp(*p, name, n) == 0 && (*p)[n] == '=')
            return *p + n + 1;
    return NULL;
}

static void test_env_and_template(void **state)
{
    struct tm_agent_assignment a = {.job_id = 7, .attempt = 3, .command = "x", .image = "img",
                                    .checkpoint_dir = "/ck/job-7/attempt-3",
                                    .resume_dir = "/ck/job-7/attempt-2"};
    const char *base[] = {"PATH=/usr/bin", NULL};
    char **env = NULL, *cmd = NULL, *text = NULL;
    size_t len = 0;

    assert_int_equal(tm_agent_job_env(base, &a, NULL, 0, &env), 0);
    assert_string_equal(env_get(env, "TARMAC_CHECKPOINT_DIR"), "/ck/job-7/attempt-3");
    assert_string_equal(env_get(env, "TARMAC_RESUME_DIR"), "/ck/job-7/attempt-2");
    tm_strv_free(env);
    assert_int_equal(tm_agent_container_env_file(&a, NULL, 0, &text, &len), 0);
    assert_non_null(strstr(text, "TARMAC_RESUME_DIR=/ck/job-7/attempt-2\n"));
    free(text);
    assert_int_equal(tm_agent_container_command("run {env} -v {resume_dir}:/r:ro {image}", &a, NULL, 0,
                                                "/e/7-3.env", &cmd), 0);
    assert_non_null(strstr(cmd, "--env-file '/e/7-3.env'"));
    assert_non_null(strstr(cmd, "-v '/ck/job-7/attempt-2':/r:ro"));
    free(cmd);

    /* No earlier complete checkpoint: no variable, an empty placeholder. */
    a.resume_dir = NULL;
    assert_int_equal(tm_agent_job_env(base, &a, NULL, 0, &env), 0);
    assert_null(env_get(env, "TARMAC_RESUME_DIR"));
    tm_strv_free(env);
    assert_int_equal(tm_agent_container_env_file(&a, NULL, 0, &text, &len), 0);
    assert_null(strstr(text, "TARMAC_RESUME_DIR"));
    free(text);
    assert_int_equal(tm_agent_container_command("run {env} [{resume_dir}] {image}", &a, NULL, 0, NULL, &cmd), 0);
    assert_non_null(strstr(cmd, "[]"));
    free(cmd);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_attempt_dir),
        cmocka_unit_test_setup_teardown(test_newest_complete, setup, teardown),
        cmocka_unit_test(test_env_and_template),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
