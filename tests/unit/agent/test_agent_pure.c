/*
 * tests/unit/agent/test_agent_pure.c: the agent's pure parts with known
 * answers: the heartbeat answer parser, the job environment (UUID mapping,
 * fractional shares, the secret kept out), the container template, the log
 * tail and cap, the state file round trip, /proc/PID/stat and the
 * re-adoption decision.  Linked with tarmac_agent_pure alone: no loop.
 */
#include <errno.h>
#include <fcntl.h>
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
#include "controller/agent/body.h"
#include "controller/agent/gpu.h"
#include "controller/agent/job_env.h"
#include "controller/agent/logtail.h"
#include "controller/agent/state.h"
#include "core/err.h"

#define S(x) x, strlen(x)

static const char full_answer[] =
    "{\"node\":{\"id\":3,\"state\":\"ready\",\"draining\":true},"
    "\"assignments\":[{\"job_id\":7,\"attempt\":2,\"command\":\"python train.py\","
    "\"env\":{\"LR\":\"0.1\",\"EPOCHS\":\"3\"},\"image\":null,\"gpu_indices\":[0,1],"
    "\"gpu_milli\":2000,\"cpu_milli\":4000,\"memory_mib\":16384,\"checkpointable\":true,"
    "\"checkpoint_dir\":\"/ck/7\",\"future_key\":{\"x\":1}},"
    "{\"job_id\":8,\"attempt\":1,\"command\":\"true\",\"image\":\"pytorch:2\",\"gpu_indices\":[3],"
    "\"gpu_milli\":250}]}";

static void test_answer_full(void **state)
{
    struct tm_agent_answer a;
    char err[256];

    assert_int_equal(tm_agent_answer_parse(S(full_answer), &a, err, sizeof(err)), 0);
    assert_true(a.has_node);
    assert_int_equal(a.node_id, 3);
    assert_string_equal(a.node_state, "ready");
    assert_true(a.draining);
    assert_int_equal(a.count, 2);
    assert_int_equal(a.assignments[0].job_id, 7);
    assert_int_equal(a.assignments[0].attempt, 2);
    assert_string_equal(a.assignments[0].command, "python train.py");
    assert_int_equal(a.assignments[0].env_count, 2);
    assert_string_equal(a.assignments[0].env_names[0], "LR");
    assert_string_equal(a.assignments[0].env_values[0], "0.1");
    assert_null(a.assignments[0].image);
    assert_int_equal(a.assignments[0].gpu_count, 2);
    assert_int_equal(a.assignments[0].gpu_indices[1], 1);
    assert_int_equal(a.assignments[0].gpu_milli, 2000);
    assert_int_equal(a.assignments[0].cpu_milli, 4000);
    assert_int_equal(a.assignments[0].memory_mib, 16384);
    assert_true(a.assignments[0].checkpointable);
    assert_string_equal(a.assignments[0].checkpoint_dir, "/ck/7");
    assert_string_equal(a.assignments[1].image, "pytorch:2");
    assert_false(a.assignments[1].checkpointable);
    assert_null(a.assignments[1].checkpoint_dir);
    assert_int_equal(tm_agent_answer_find(&a, 8, 1), 1);
    assert_int_equal(tm_agent_answer_find(&a, 8, 2), -1);
    tm_agent_answer_release(&a);

    assert_int_equal(tm_agent_answer_parse(S("{}"), &a, err, sizeof(err)), 0);
    assert_int_equal(a.count, 0);
    assert_false(a.has_node);
    tm_agent_answer_release(&a);
}

static void expect_bad(const char *body, const char *field)
{
    struct tm_agent_answer a;
    char err[256];

    memset(&a, 0x5a, sizeof(a));
    assert_int_equal(tm_agent_answer_parse(body, strlen(body), &a, err, sizeof(err)), TM_EBADREPLY);
    if (!strstr(err, field))
        fail_msg("\"%s\": error \"%s\" does not name \"%s\"", body, err, field);
    /* untouched on failure */
    assert_int_equal(((unsigned char *)&a)[0], 0x5a);
}

static void test_answer_bad(void **state)
{
    expect_bad("", "answer");
    expect_bad("{\"assignments\":[{\"job_id\":7,\"attempt\":2,\"comm", "answer"); /* truncated */
    expect_bad("[]", "answer");
    expect_bad("{\"assignments\":{}}", "assignments");
    expect_bad("{\"node\":[]}", "node");
    expect_bad("{\"node\":{\"draining\":\"no\"}}", "node.draining");
    expect_bad("{\"assignments\":[1]}", "assignments[0]");
    expect_bad("{\"assignments\":[{\"attempt\":1,\"command\":\"x\"}]}", "assignments[0].job_id");
    expect_bad("{\"assignments\":[{\"job_id\":1.5,\"attempt\":1,\"command\":\"x\"}]}", "job_id");
    expect_bad("{\"assignments\":[{\"job_id\":1,\"attempt\":-1,\"command\":\"x\"}]}", "attempt");
    expect_bad("{\"assignments\":[{\"job_id\":1,\"attempt\":1,\"command\":\"\"}]}", "command");
    expect_bad("{\"assignments\":[{\"job_id\":1,\"attempt\":1,\"command\":\"x\",\"gpu_indices\":[0,64]}]}",
               "assignments[0].gpu_indices[1]");
    expect_bad("{\"assignments\":[{\"job_id\":1,\"attempt\":1,\"command\":\"x\",\"gpu_indices\":[2,2]}]}",
               "gpu_indices[1]");
    expect_bad("{\"assignments\":[{\"job_id\":1,\"attempt\":1,\"command\":\"x\",\"env\":{\"A\":1}}]}",
               "env.A");
    expect_bad("{\"assignments\":[{\"job_id\":1,\"attempt\":1,\"command\":\"x\",\"env\":{\"1A\":\"v\"}}]}",
               "env");
    expect_bad("{\"assignments\":[{\"job_id\":1,\"attempt\":1,\"command\":\"x\","
               "\"env\":{\"TARMAC_JOB_ID\":\"9\"}}]}",
               "reserved");
    expect_bad("{\"assignments\":[{\"job_id\":1,\"attempt\":1,\"command\":\"x\",\"image\":5}]}", "image");
    expect_bad("{\"assignments\":[{\"job_id\":1,\"attempt\":1,\"command\":\"x\",\"checkpointable\":1}]}",
               "checkpointable");
    expect_bad("{\"assignments\":[{\"job_id\":1,\"attempt\":1,\"command\":\"x\"},"
               "{\"job_id\":1,\"attempt\":2,\"command\":\"y\"}]}",
               "assignments[1].job_id");
}

static void test_enroll_answer(void **state)
{
    char err[256];
    char *tok = NULL;

    assert_int_equal(tm_agent_enroll_parse(S("{\"node_id\":4,\"token\":\"tm_abc\"}"), 4, &tok, err,
                                           sizeof(err)),
                     0);
    assert_string_equal(tok, "tm_abc");
    free(tok);
    assert_int_equal(tm_agent_enroll_parse(S("{\"node_id\":5,\"token\":\"tm_abc\"}"), 4, &tok, err,
                                           sizeof(err)),
                     TM_EBADREPLY);
    assert_non_null(strstr(err, "node_id"));
    assert_int_equal(tm_agent_enroll_parse(S("{\"token\":\"a\\nb\"}"), 4, &tok, err, sizeof(err)),
                     TM_EBADREPLY);
    assert_null(strstr(err, "a\nb")); /* never echoes the token */
}

static const char *env_get(char **env, const char *name)
{
    size_t n = strlen(name);

    for (char **p = env; *p; p++)
        if (strncmp(*p, name, n) == 0 && (*p)[n] == '=')
            return *p + n + 1;
    return NULL;
}

static void fake_gpus(struct tm_gpu_reading *r)
{
    static const char fake[] = "{\"gpus\":[{\"uuid\":\"GPU-aaa\"},{\"uuid\":\"GPU-bbb\"},"
                               "{\"uuid\":\"GPU-ccc\",\"name\":\"Fake H100\",\"util_percent\":37.5,"
                               "\"memory_used_mib\":100,\"memory_total_mib\":1000}]}";
    char err[128];

    assert_int_equal(tm_gpu_fake_parse(S(fake), 42, r, err, sizeof(err)), 0);
}

static void test_env(void **state)
{
    const char *base[] = {"PATH=/usr/bin", "HOME=/root", "TARMAC_ENROLL_SECRET=s3cret",
                          "CUDA_VISIBLE_DEVICES=0,1,2", "LR=base", NULL};
    struct tm_gpu_reading g;
    struct tm_agent_answer a;
    char err[256];
    char **env = NULL;

    fake_gpus(&g);
    assert_int_equal(g.count, 3);
    assert_int_equal(tm_agent_answer_parse(S("{\"assignments\":[{\"job_id\":7,\"attempt\":2,"
                                             "\"command\":\"x\",\"env\":{\"LR\":\"0.1\"},"
                                             "\"gpu_indices\":[2,0],\"checkpoint_dir\":\"/ck\"},"
                                             "{\"job_id\":8,\"attempt\":1,\"command\":\"y\","
                                             "\"gpu_indices\":[1],\"gpu_milli\":250},"
                                             "{\"job_id\":9,\"attempt\":1,\"command\":\"z\","
                                             "\"gpu_indices\":[5]}]}"),
                                           &a, err, sizeof(err)),
                     0);

    assert_int_equal(tm_agent_job_env(base, &a.assignments[0], g.info, g.count, &env), 0);
    assert_string_equal(env_get(env, "PATH"), "/usr/bin");
    assert_null(env_get(env, "TARMAC_ENROLL_SECRET"));
    assert_string_equal(env_get(env, "CUDA_VISIBLE_DEVICES"), "GPU-ccc,GPU-aaa");
    assert_string_equal(env_get(env, "LR"), "0.1"); /* the job's value, once */
    assert_string_equal(env_get(env, "TARMAC_JOB_ID"), "7");
    assert_string_equal(env_get(env, "TARMAC_ATTEMPT"), "2");
    assert_string_equal(env_get(env, "TARMAC_CHECKPOINT_DIR"), "/ck");
    assert_null(env_get(env, "TARMAC_GPU_MILLI"));
    assert_null(env_get(env, "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE"));
    {
        int lr = 0;
        for (char **p = env; *p; p++)
            lr += strncmp(*p, "LR=", 3) == 0;
        assert_int_equal(lr, 1);
    }
    tm_strv_free(env);

    assert_int_equal(tm_agent_job_env(base, &a.assignments[1], g.info, g.count, &env), 0);
    assert_string_equal(env_get(env, "CUDA_VISIBLE_DEVICES"), "GPU-bbb");
    assert_string_equal(env_get(env, "TARMAC_GPU_MILLI"), "250");
    assert_string_equal(env_get(env, "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE"), "25");
    assert_null(env_get(env, "TARMAC_CHECKPOINT_DIR"));
    tm_strv_free(env);

    /* an index the node does not report: its number */
    assert_int_equal(tm_agent_job_env(base, &a.assignments[2], g.info, g.count, &env), 0);
    assert_string_equal(env_get(env, "CUDA_VISIBLE_DEVICES"), "5");
    tm_strv_free(env);
    tm_agent_answer_release(&a);
}

static void test_container(void **state)
{
    struct tm_gpu_reading g;
    struct tm_agent_answer a;
    char err[256];
    char *cmd = NULL;

    fake_gpus(&g);
    assert_int_equal(tm_agent_answer_parse(S("{\"assignments\":[{\"job_id\":7,\"attempt\":2,"
                                             "\"command\":\"echo 'hi'\",\"image\":\"reg/img:1\","
                                             "\"env\":{\"LR\":\"0.1\"},\"gpu_indices\":[0,2]}]}"),
                                           &a, err, sizeof(err)),
                     0);
    assert_int_equal(tm_agent_container_command(TM_AGENT_CONTAINER_DEFAULT, &a.assignments[0], g.info,
                                                g.count, "/w/env/7-2.env", &cmd),
                     0);
    /* the job's variables go through the env file only; "--" ends the
     * runtime's options before the image */
    assert_string_equal(cmd, "docker run --rm --name tarmac-7-2 --gpus '\"device=GPU-aaa,GPU-ccc\"' "
                             "--env-file '/w/env/7-2.env' -- "
                             "'reg/img:1' /bin/sh -c 'echo '\\''hi'\\'''");
    free(cmd);
    assert_int_equal(tm_agent_container_command("podman run {cdi_gpus} {env} {image}", &a.assignments[0],
                                                g.info, g.count, NULL, &cmd),
                     0);
    assert_string_equal(cmd, "podman run --device nvidia.com/gpu=GPU-aaa --device nvidia.com/gpu=GPU-ccc "
                             " 'reg/img:1'");
    free(cmd);
    assert_int_equal(tm_agent_container_command("docker {nope}", &a.assignments[0], g.info, g.count, NULL,
                                                &cmd),
                     TM_EINVAL);
    assert_int_equal(tm_agent_container_command("docker {image", &a.assignments[0], g.info, g.count, NULL,
                                                &cmd),
                     TM_EINVAL);
    tm_agent_answer_release(&a);
}

/* A container job's variables: the env file holds the job's and the
 * agent's, nothing of the agent's own environment; the host side gets the
 * agent's environment and none of the job's. */
static void test_container_env(void **state)
{
    const char *base[] = {"PATH=/usr/bin", "TARMAC_ENROLL_SECRET=s3cret", "LANG=C", NULL};
    struct tm_gpu_reading g;
    struct tm_agent_answer a;
    char err[256];
    char *text = NULL;
    char **env = NULL;
    size_t len = 0;
    (void)state;

    fake_gpus(&g);
    assert_int_equal(tm_agent_answer_parse(S("{\"assignments\":[{\"job_id\":7,\"attempt\":2,"
                                             "\"command\":\"x\",\"image\":\"reg/img:1\","
                                             "\"env\":{\"PATH\":\"/evil\",\"LD_PRELOAD\":\"/evil.so\","
                                             "\"DOCKER_HOST\":\"tcp://x\",\"K\":\"a b=c 'q'\"},"
                                             "\"gpu_indices\":[1]},"
                                             "{\"job_id\":8,\"attempt\":1,\"command\":\"y\",\"image\":\"i\","
                                             "\"env\":{\"BAD\":\"two\\nlines\"}}]}"),
                                           &a, err, sizeof(err)),
                     0);
    assert_int_equal(tm_agent_container_env_file(&a.assignments[0], g.info, g.count, &text, &len), 0);
    assert_string_equal(text, "PATH=/evil\nLD_PRELOAD=/evil.so\nDOCKER_HOST=tcp://x\nK=a b=c 'q'\n"
                              "CUDA_VISIBLE_DEVICES=GPU-bbb\nTARMAC_JOB_ID=7\nTARMAC_ATTEMPT=2\n");
    assert_int_equal(len, strlen(text));
    free(text);
    assert_int_equal(tm_agent_container_env_file(&a.assignments[1], g.info, g.count, &text, &len),
                     TM_EINVAL);

    assert_int_equal(tm_agent_host_env(base, &env), 0);
    assert_string_equal(env_get(env, "PATH"), "/usr/bin");
    assert_string_equal(env_get(env, "LANG"), "C");
    assert_null(env_get(env, "LD_PRELOAD"));
    assert_null(env_get(env, "DOCKER_HOST"));
    assert_null(env_get(env, "TARMAC_ENROLL_SECRET"));
    assert_int_equal(tm_strv_set(&env, "HOME", "/w/jobs/7-2"), 0);
    assert_int_equal(tm_strv_set(&env, "PATH", "/bin"), 0);
    assert_string_equal(env_get(env, "HOME"), "/w/jobs/7-2");
    assert_string_equal(env_get(env, "PATH"), "/bin");
    tm_strv_free(env);
    tm_agent_answer_release(&a);
}

static void test_fake_gpus(void **state)
{
    struct tm_gpu_reading r;
    char err[128];

    fake_gpus(&r);
    assert_string_equal(r.info[2].name, "Fake H100");
    assert_int_equal(r.info[2].memory_total_mib, 1000);
    assert_true(r.sample[2].util_percent == 37.5);
    assert_int_equal(r.sample[2].at_ms, 42);
    assert_int_equal(r.sample[1].memory_total_mib, 81920); /* the default */
    assert_int_equal(tm_gpu_fake_parse(S("{\"gpus\":[{\"util_percent\":101}]}"), 0, &r, err, sizeof(err)),
                     TM_EINVAL);
    assert_non_null(strstr(err, "gpus[0].util_percent"));
    assert_int_equal(tm_gpu_fake_parse(S("{\"gpus\":[{\"uuid\":\"a\"},{\"uuid\":\"a\"}]}"), 0, &r, err,
                                       sizeof(err)),
                     TM_EINVAL);
    assert_non_null(strstr(err, "gpus[1].uuid"));
    assert_int_equal(r.count, 0);
}

/* A fake GPU with busy_util_percent reports it while a job holds it (the
 * job's GPU indices as a mask), its idle figures otherwise; one without
 * keeps its util_percent either way. */
static void test_fake_gpus_busy(void **state)
{
    struct tm_gpu_reading r;
    struct tm_agent_answer a;
    char err[128];

    (void)state;
    assert_int_equal(tm_gpu_fake_parse(S("{\"gpus\":[{\"util_percent\":0,\"busy_util_percent\":90},"
                                         "{\"util_percent\":0,\"busy_util_percent\":90},"
                                         "{\"util_percent\":20}]}"),
                                       0, &r, err, sizeof(err)),
                     0);
    assert_int_equal(tm_agent_answer_parse(S("{\"assignments\":[{\"job_id\":7,\"attempt\":1,"
                                             "\"command\":\"x\",\"gpu_indices\":[1,2]}]}"),
                                           &a, err, sizeof(err)),
                     0);
    assert_int_equal(tm_agent_gpu_mask(&a.assignments[0]), 6);
    tm_gpu_reading_mark_busy(&r, tm_agent_gpu_mask(&a.assignments[0]));
    assert_true(r.sample[0].util_percent == 0);
    assert_true(r.sample[1].util_percent == 90);
    assert_true(r.sample[1].memory_used_mib > 0 && r.sample[1].power_w > 60);
    assert_true(r.sample[2].util_percent == 20);
    tm_agent_answer_release(&a);

    assert_int_equal(tm_gpu_fake_parse(S("{\"gpus\":[{\"busy_util_percent\":-1}]}"), 0, &r, err,
                                       sizeof(err)),
                     TM_EINVAL);
    assert_non_null(strstr(err, "gpus[0].busy_util_percent"));
}

static void test_tail(void **state)
{
    char big[10000], out[TM_AGENT_TAIL_MAX + 1];
    size_t n;

    for (size_t i = 0; i < sizeof(big); i++)
        big[i] = (char)('a' + i % 26);
    n = tm_agent_tail_format(big, sizeof(big), 0, out, sizeof(out));
    assert_int_equal(n, TM_AGENT_TAIL_MAX);
    assert_memory_equal(out, big + sizeof(big) - TM_AGENT_TAIL_MAX, TM_AGENT_TAIL_MAX);

    n = tm_agent_tail_format("short\n", 6, 0, out, sizeof(out));
    assert_int_equal(n, 6);
    assert_string_equal(out, "short\n");

    /* dropped output: the note, then what fits of the end */
    n = tm_agent_tail_format(big, sizeof(big), 123456, out, sizeof(out));
    assert_int_equal(n, TM_AGENT_TAIL_MAX);
    assert_non_null(strstr(out, "123456 bytes dropped"));
    assert_int_equal(out[n - 1], big[sizeof(big) - 1]);

    /* invalid UTF-8 and NUL become '?'; a cut character is skipped */
    n = tm_agent_tail_format("a\xff" "b\0c\xc3\xa9", 7, 0, out, sizeof(out));
    assert_int_equal(n, 7);
    assert_memory_equal(out, "a?b?c\xc3\xa9", 7);
    {
        char cut[TM_AGENT_TAIL_MAX + 1];
        memset(cut, 'x', sizeof(cut));
        cut[0] = '\xc3';
        cut[1] = '\xa9'; /* the cut falls after 0xc3: 0xa9 must go */
        n = tm_agent_tail_format(cut, sizeof(cut), 0, out, sizeof(out));
        assert_int_equal(n, TM_AGENT_TAIL_MAX - 1);
        assert_int_equal(out[0], 'x');
    }
}

static void test_log_cap(void **state)
{
    char path[] = "/tmp/tm_agent_log_XXXXXX";
    char buf[300000], out[TM_AGENT_TAIL_MAX + 1];
    int64_t dropped = 0;
    struct stat st;
    int fd = mkstemp(path);

    assert_true(fd >= 0);
    memset(buf, 'y', sizeof(buf));
    memcpy(buf + sizeof(buf) - 4, "END\n", 4);
    assert_int_equal(write(fd, buf, 1000), 1000);
    assert_int_equal(tm_agent_log_cap(path, 100000, &dropped), 0); /* within the cap */
    assert_int_equal(write(fd, buf, sizeof(buf)), (ssize_t)sizeof(buf));
    assert_int_equal(tm_agent_log_cap(path, 100000, &dropped), 1);
    assert_int_equal(stat(path, &st), 0);
    assert_true(st.st_size <= 100000);
    assert_true(st.st_size >= TM_AGENT_LOG_KEEP / 2);
    assert_int_equal(dropped, 1000 + (int64_t)sizeof(buf) - 50000);
    tm_agent_log_tail(path, dropped, out, sizeof(out));
    assert_non_null(strstr(out, "bytes dropped"));
    assert_int_equal(strcmp(out + strlen(out) - 4, "END\n"), 0);
    /* the file keeps a line saying so */
    {
        char head[200] = {0};
        int rfd = open(path, O_RDONLY);
        assert_true(read(rfd, head, sizeof(head) - 1) > 0);
        close(rfd);
        assert_non_null(strstr(head, "log passed its cap"));
    }
    close(fd);
    unlink(path);
    assert_int_equal(tm_agent_log_cap("/tmp/tm-no-such-log", 10, &dropped), 0);
}

static void test_state_round_trip(void **state)
{
    char dir[] = "/tmp/tm_agent_state_XXXXXX";
    char path[256];
    struct tm_agent_state_job jobs[2] = {
        {.job_id = 7, .attempt = 2, .pid = 4242, .start_time = 123456789, .checkpointable = true,
         .start_reported = true},
        {.job_id = 9, .attempt = 1, .pid = 77, .start_time = 5, .stopping = "stopped", .log_dropped = 99},
    };
    struct tm_agent_report rep = {.job_id = 6, .attempt = 1, .has_code = true, .exit_code = 3,
                                  .reason = "exited", .tail = "boom \"quoted\"\n"};
    struct tm_agent_state_done done[2] = {{6, 1}, {5, 3}};
    struct tm_agent_state st = {.njobs = 2, .jobs = jobs, .nreports = 1, .reports = &rep,
                                .ndone = 2, .done = done}, back;
    char err[256];

    assert_non_null(mkdtemp(dir));
    snprintf(path, sizeof(path), "%s/state.json", dir);
    assert_int_equal(tm_agent_state_read(path, &back, err, sizeof(err)), 0); /* absent: empty */
    assert_int_equal(back.njobs, 0);
    assert_int_equal(tm_agent_state_write(path, &st), 0);
    assert_int_equal(tm_agent_state_read(path, &back, err, sizeof(err)), 0);
    assert_int_equal(back.njobs, 2);
    assert_int_equal(back.jobs[0].job_id, 7);
    assert_int_equal(back.jobs[0].attempt, 2);
    assert_int_equal(back.jobs[0].pid, 4242);
    assert_int_equal(back.jobs[0].start_time, 123456789);
    assert_true(back.jobs[0].checkpointable);
    assert_true(back.jobs[0].start_reported);
    assert_false(back.jobs[1].start_reported);
    assert_string_equal(back.jobs[0].stopping, "");
    assert_string_equal(back.jobs[1].stopping, "stopped");
    assert_int_equal(back.jobs[1].log_dropped, 99);
    assert_int_equal(back.nreports, 1);
    assert_true(back.reports[0].has_code);
    assert_int_equal(back.reports[0].exit_code, 3);
    assert_int_equal(back.reports[0].signal, 0);
    assert_string_equal(back.reports[0].tail, "boom \"quoted\"\n");
    assert_int_equal(back.ndone, 2);
    assert_int_equal(back.done[1].job_id, 5);
    assert_int_equal(back.done[1].attempt, 3);
    tm_agent_state_release(&back);
    {
        char tmp[300];
        snprintf(tmp, sizeof(tmp), "%s.tmp", path);
        assert_int_equal(access(tmp, F_OK), -1); /* renamed away */
    }
    assert_int_equal(tm_agent_state_parse(S("{\"jobs\":[{\"job_id\":7}]}"), &back, err, sizeof(err)),
                     TM_EINVAL);
    assert_non_null(strstr(err, "jobs[0]"));
    assert_int_equal(tm_agent_state_parse(S("{\"jobs\":[{\"job_id\":7,\"attempt\":1,\"pid\":5}"), &back,
                                          err, sizeof(err)),
                     TM_EINVAL);
    unlink(path);
    rmdir(dir);
}

static void test_proc_and_adopt(void **state)
{
    struct tm_agent_state_job j = {.job_id = 1, .attempt = 1, .pid = 100, .start_time = 5000};
    uint64_t st = 0, st2 = 0;

    assert_int_equal(tm_proc_stat_start_time("100 (sh) S 1 100 100 0 -1 4194560 1 0 0 0 0 0 0 0 20 0 1 "
                                             "0 5000 2400000 200 ...",
                                             &st),
                     0);
    assert_int_equal(st, 5000);
    /* a command name with spaces and parentheses */
    assert_int_equal(tm_proc_stat_start_time("100 (a) b (c) R 1 100 100 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 "
                                             "777 1 1",
                                             &st),
                     0);
    assert_int_equal(st, 777);
    assert_int_equal(tm_proc_stat_start_time("100 (z) Z 1 1 1 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 9 0 0", &st),
                     -ESRCH);
    assert_int_equal(tm_proc_stat_start_time("garbage", &st), TM_EBADREPLY);
    assert_int_equal(tm_proc_stat_start_time("1 (x) S 1 2", &st), TM_EBADREPLY);

    assert_int_equal(tm_proc_start_time(getpid(), &st), 0);
    assert_int_equal(tm_proc_start_time(getpid(), &st2), 0);
    assert_int_equal(st, st2);
    assert_int_equal(tm_proc_start_time(4194304 + 7, &st), -ESRCH);

    assert_int_equal(tm_agent_adopt_decide(&j, true, 5000), TM_ADOPT_KEEP);
    assert_int_equal(tm_agent_adopt_decide(&j, true, 5001), TM_ADOPT_LOST); /* pid reused */
    assert_int_equal(tm_agent_adopt_decide(&j, false, 0), TM_ADOPT_LOST);
}

static void test_bodies(void **state)
{
    struct tm_gpu_reading g;
    struct tm_agent_running run = {7, 2, 4242};
    struct tm_agent_report rep = {.job_id = 7, .attempt = 2, .signal = 9, .reason = "stopped", .tail = "t"};
    char *b;

    fake_gpus(&g);
    g.sample[0].nprocs = 1;
    g.sample[0].procs[0].pid = 123;
    g.sample[0].procs[0].used_memory_mib = 900;
    b = tm_agent_body_heartbeat(g.info, g.count, g.sample, 1, &run, 1, 3000);
    assert_non_null(b);
    assert_non_null(strstr(b, "\"gpus\":[{\"index\":0,\"uuid\":\"GPU-aaa\""));
    assert_non_null(strstr(b, "\"processes\":[{\"pid\":123,\"used_memory_mib\":900}]"));
    assert_non_null(strstr(b, "\"running\":[{\"job_id\":7,\"attempt\":2,\"pid\":4242}]"));
    assert_non_null(strstr(b, "\"heartbeat_ms\":3000"));
    free(b);
    b = tm_agent_body_exit(&rep);
    assert_string_equal(b, "{\"attempt\":2,\"exit_code\":null,\"signal\":9,\"output_tail\":\"t\","
                           "\"reason\":\"stopped\"}");
    free(b);
    b = tm_agent_body_start(2, 4242);
    assert_string_equal(b, "{\"attempt\":2,\"pid\":4242}");
    free(b);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_answer_full),  cmocka_unit_test(test_answer_bad),
        cmocka_unit_test(test_enroll_answer), cmocka_unit_test(test_env),
        cmocka_unit_test(test_container),
        cmocka_unit_test(test_container_env),    cmocka_unit_test(test_fake_gpus),
        cmocka_unit_test(test_fake_gpus_busy),
        cmocka_unit_test(test_tail),         cmocka_unit_test(test_log_cap),
        cmocka_unit_test(test_state_round_trip), cmocka_unit_test(test_proc_and_adopt),
        cmocka_unit_test(test_bodies),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
