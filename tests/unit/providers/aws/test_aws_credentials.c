/*
 * tests/unit/providers/aws/test_aws_credentials.c: the AWS credential chain, region and
 * endpoint resolution.
 *
 * Run with "unit" (the default) for the environment, shared-file, region
 * and endpoint tests, which touch only temporary files; run with "imds"
 * for the instance-role tests, each of which starts tests/lib/imds_fixture.py
 * (a fake IMDSv2 on a free loopback port) as a child.  Every test begins
 * with no AWS_* variable set and HOME in a fresh temporary directory, so
 * the developer's own ~/.aws never leaks in.  Loop tests end by asserting
 * uv_loop_close() == 0.
 */
#include <errno.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <netinet/in.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>
#include <uv.h>

#include "controller/io/http_uv.h"
#include "core/config.h"
#include "core/err.h"
#include "core/log.h"
#include "controller/io/aws_credentials.h"

extern char **environ;

static char tmpdir[256];

static void clear_aws_env(void)
{
    /* Collect first: unsetenv while walking environ skips entries. */
    char names[128][128];
    size_t n = 0;

    for (char **e = environ; *e && n < 128; e++) {
        if (strncmp(*e, "AWS_", 4) == 0) {
            size_t len = strcspn(*e, "=");

            if (len < sizeof(names[0])) {
                memcpy(names[n], *e, len);
                names[n++][len] = '\0';
            }
        }
    }
    for (size_t i = 0; i < n; i++)
        unsetenv(names[i]);
}

static void write_file(const char *name, const char *text)
{
    char path[512];
    FILE *f;

    snprintf(path, sizeof(path), "%s/%s", tmpdir, name);
    f = fopen(path, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
}

static const char *tmp_path(const char *name)
{
    static char path[4][512];
    static int i;

    i = (i + 1) % 4;
    snprintf(path[i], sizeof(path[i]), "%s/%s", tmpdir, name);
    return path[i];
}

static int setup(void **state)
{
    const char *base = getenv("TM_TEST_STATE");
    char home[300];

    clear_aws_env();
    if (!base || mkdir(base, 0700) < 0) {
        if (!base || errno != EEXIST)
            base = "/tmp";
    }
    snprintf(tmpdir, sizeof(tmpdir), "%s/awscredXXXXXX", base);
    if (!mkdtemp(tmpdir))
        return -1;
    snprintf(home, sizeof(home), "%s/.aws", tmpdir);
    mkdir(home, 0700);
    setenv("HOME", tmpdir, 1);
    return 0;
}

static int teardown(void **state)
{
    char cmd[600];

    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", tmpdir);
    if (system(cmd) != 0)
        return -1;
    clear_aws_env();
    return 0;
}

/* ---- environment ---- */

static void test_env(void **state)
{
    struct tm_aws_credentials c;
    char err[256];

    assert_int_equal(tm_aws_credentials_from_env(&c, err, sizeof(err)), TM_ENOTFOUND);
    setenv("AWS_ACCESS_KEY_ID", "AKIAENV", 1);
    assert_int_equal(tm_aws_credentials_from_env(&c, err, sizeof(err)), TM_EINVAL);
    assert_non_null(strstr(err, "AWS_SECRET_ACCESS_KEY"));
    setenv("AWS_SECRET_ACCESS_KEY", "env-secret-value", 1);
    assert_int_equal(tm_aws_credentials_from_env(&c, err, sizeof(err)), 0);
    assert_string_equal(c.access_key, "AKIAENV");
    assert_string_equal(c.secret_key, "env-secret-value");
    assert_string_equal(c.session_token, "");
    assert_string_equal(c.source, "env");
    assert_int_equal(c.expires_ms, 0);
    setenv("AWS_SESSION_TOKEN", "env-token-value", 1);
    assert_int_equal(tm_aws_credentials_from_env(&c, err, sizeof(err)), 0);
    assert_string_equal(c.session_token, "env-token-value");
    /* A secret with a line break would bend a header: refused, unquoted. */
    setenv("AWS_SECRET_ACCESS_KEY", "bad secret\nvalue", 1);
    assert_int_equal(tm_aws_credentials_from_env(&c, err, sizeof(err)), TM_EINVAL);
    assert_null(strstr(err, "bad secret"));
    assert_non_null(strstr(err, "AWS_SECRET_ACCESS_KEY"));
    unsetenv("AWS_ACCESS_KEY_ID");
    setenv("AWS_SECRET_ACCESS_KEY", "env-secret-value", 1);
    assert_int_equal(tm_aws_credentials_from_env(&c, err, sizeof(err)), TM_EINVAL);
    assert_null(strstr(err, "env-secret-value"));
    tm_aws_credentials_clear(&c);
}

/* ---- shared files ---- */

static void test_files_profiles(void **state)
{
    struct tm_aws_credential_options o = {0};
    struct tm_aws_credentials c;
    char err[512];

    /* No files at all: absent, not broken. */
    assert_int_equal(tm_aws_credentials_from_files(&o, &c, err, sizeof(err)), TM_ENOTFOUND);
    write_file(".aws/credentials",
               "# comment\n"
               "[default]\n"
               "aws_access_key_id = AKIADEFAULT\n"
               "aws_secret_access_key = default-secret\n"
               "\n"
               "[both]\r\n"
               "aws_access_key_id=AKIABOTHCREDS\r\n"
               "aws_secret_access_key=both-secret-creds\r\n"
               "aws_session_token = both-token\r\n");
    write_file(".aws/config",
               "[default]\n"
               "region = eu-west-3\n"
               "[profile dev]\n"
               "region: us-west-2\n"
               "aws_access_key_id = AKIADEV\n"
               "aws_secret_access_key = dev-secret\n"
               "s3 =\n"
               "  max_concurrent_requests = 20\n"
               "[profile both]\n"
               "aws_access_key_id = AKIABOTHCONFIG\n"
               "aws_secret_access_key = both-secret-config\n"
               "[dev]\n"
               "aws_access_key_id = AKIAWRONGSECTION\n"
               "aws_secret_access_key = wrong\n");
    assert_int_equal(tm_aws_credentials_from_files(&o, &c, err, sizeof(err)), 0);
    assert_string_equal(c.access_key, "AKIADEFAULT");
    assert_string_equal(c.source, "file");
    /* AWS_PROFILE picks a config-file profile ("[profile dev]", not "[dev]"). */
    setenv("AWS_PROFILE", "dev", 1);
    assert_int_equal(tm_aws_credentials_from_files(&o, &c, err, sizeof(err)), 0);
    assert_string_equal(c.access_key, "AKIADEV");
    assert_string_equal(c.secret_key, "dev-secret");
    /* The configured profile beats AWS_PROFILE; the credentials file beats
     * the config file for the same profile. */
    o.profile = "both";
    assert_int_equal(tm_aws_credentials_from_files(&o, &c, err, sizeof(err)), 0);
    assert_string_equal(c.access_key, "AKIABOTHCREDS");
    assert_string_equal(c.session_token, "both-token");
    o.profile = "nosuch";
    assert_int_equal(tm_aws_credentials_from_files(&o, &c, err, sizeof(err)), TM_ENOTFOUND);
    assert_non_null(strstr(err, "\"nosuch\""));
    /* Variables name other files; an explicit file beats them. */
    write_file("other-creds", "[nosuch]\naws_access_key_id=AKIAOTHER\naws_secret_access_key=o\n");
    setenv("AWS_SHARED_CREDENTIALS_FILE", tmp_path("other-creds"), 1);
    assert_int_equal(tm_aws_credentials_from_files(&o, &c, err, sizeof(err)), 0);
    assert_string_equal(c.access_key, "AKIAOTHER");
    write_file("explicit", "[nosuch]\naws_access_key_id=AKIAEXPLICIT\naws_secret_access_key=e\n");
    o.credentials_file = tmp_path("explicit");
    assert_int_equal(tm_aws_credentials_from_files(&o, &c, err, sizeof(err)), 0);
    assert_string_equal(c.access_key, "AKIAEXPLICIT");
    /* An explicit file that is missing is a configuration error. */
    o.credentials_file = tmp_path("missing");
    assert_int_equal(tm_aws_credentials_from_files(&o, &c, err, sizeof(err)), TM_EINVAL);
    assert_non_null(strstr(err, "missing"));
    /* AWS_CONFIG_FILE moves the config file. */
    o = (struct tm_aws_credential_options){.profile = "cfgonly"};
    write_file("cfg2", "[profile cfgonly]\naws_access_key_id=AKIACFG2\naws_secret_access_key=c\n");
    setenv("AWS_CONFIG_FILE", tmp_path("cfg2"), 1);
    assert_int_equal(tm_aws_credentials_from_files(&o, &c, err, sizeof(err)), 0);
    assert_string_equal(c.access_key, "AKIACFG2");
    tm_aws_credentials_clear(&c);
}

static void expect_malformed(const char *text, const char *where, const char *secret)
{
    struct tm_aws_credential_options o = {.credentials_file = tmp_path("bad")};
    struct tm_aws_credentials c;
    char err[512] = "";
    char want[600];

    write_file("bad", text);
    assert_int_equal(tm_aws_credentials_from_files(&o, &c, err, sizeof(err)), TM_EINVAL);
    snprintf(want, sizeof(want), "%s%s", tmp_path("bad"), where);
    if (!strstr(err, want))
        fail_msg("error \"%s\" does not name \"%s\"", err, want);
    if (secret && strstr(err, secret))
        fail_msg("error \"%s\" shows the secret", err);
}

static void test_files_malformed(void **state)
{
    char *big;

    expect_malformed("[default]\naws_access_key_id = AKIA1\nwJalrXUtnFEMI-SECRET-NO-EQUALS\n", ":3:",
                     "wJalrXUtnFEMI");
    expect_malformed("aws_secret_access_key = top-secret-outside\n[default]\n", ":1:",
                     "top-secret-outside");
    expect_malformed("[default\naws_access_key_id = AKIA1\n", ":1:", NULL);
    expect_malformed("[default]\naws_access_key_id = AKIA1\naws_access_key_id = AKIA2\n", ":3:", NULL);
    expect_malformed("[default]\n[x]\n[default]\n", ":3:", NULL);
    expect_malformed("[default]\n  indented = secret-indented\n", ":2:", "secret-indented");
    expect_malformed("[default]\naws_secret_access_key = only-the-secret\n", ":2:", "only-the-secret");
    expect_malformed("[default]\naws_access_key_id = AKIA1\naws_secret_access_key = sp ace-secret\n",
                     ":3", "ace-secret");
    expect_malformed("[default]\naws_access_key_id = AKIA-1/x\naws_secret_access_key = s\n", ":2", NULL);
    expect_malformed("[default]\nse{cret-key-name = v\n", ":2:", "se{cret");
    /* Bounded: a file over 64 KiB is refused before it is parsed. */
    big = malloc(70 * 1024 + 1);
    assert_non_null(big);
    memset(big, '#', 70 * 1024);
    big[70 * 1024] = '\0';
    expect_malformed(big, " is larger than", NULL);
    free(big);
}

/* A loaded secret is redacted from every log line afterwards. */
static void test_secrets_redacted(void **state)
{
    char buf[1024] = {0};
    FILE *f = fmemopen(buf, sizeof(buf) - 1, "w");
    struct tm_aws_credentials c;

    assert_non_null(f);
    setenv("AWS_ACCESS_KEY_ID", "AKIAREDACT", 1);
    setenv("AWS_SECRET_ACCESS_KEY", "redact-me-secret-key", 1);
    setenv("AWS_SESSION_TOKEN", "redact-me-session-token", 1);
    assert_int_equal(tm_aws_credentials_from_env(&c, NULL, 0), 0);
    tm_log_set_stream(f);
    tm_log_info("oops", "secret=%s token=%s", c.secret_key, c.session_token);
    fflush(f);
    tm_log_set_stream(stderr);
    fclose(f);
    assert_null(strstr(buf, "redact-me"));
    assert_non_null(strstr(buf, "[redacted]"));
    tm_aws_credentials_clear(&c);
}

static void test_source_parse(void **state)
{
    enum tm_aws_cred_source s;
    struct tm_config_credentials cc = {.source = "file", .file = "/x", .profile = "p"};
    struct tm_aws_credential_options o;

    assert_int_equal(tm_aws_cred_source_parse(NULL, &s), 0);
    assert_int_equal(s, TM_AWS_CRED_CHAIN);
    assert_int_equal(tm_aws_cred_source_parse("none", &s), 0);
    assert_int_equal(s, TM_AWS_CRED_CHAIN);
    assert_int_equal(tm_aws_cred_source_parse("instance_role", &s), 0);
    assert_int_equal(s, TM_AWS_CRED_INSTANCE_ROLE);
    assert_int_equal(tm_aws_cred_source_parse("sso", &s), TM_EINVAL);
    assert_int_equal(tm_aws_credential_options_from_config(&cc, &o), 0);
    assert_int_equal(o.source, TM_AWS_CRED_FILE);
    assert_string_equal(o.credentials_file, "/x");
    assert_string_equal(o.profile, "p");
    assert_int_equal(tm_aws_credential_options_from_config(NULL, &o), 0);
    assert_int_equal(o.source, TM_AWS_CRED_CHAIN);
}

/* ---- region and endpoint ---- */

static void test_region(void **state)
{
    struct tm_aws_credential_options o = {0};
    char region[64], err[512];

    assert_int_equal(tm_aws_region_resolve(NULL, &o, region, sizeof(region), err, sizeof(err)),
                     TM_ENOTFOUND);
    write_file(".aws/config", "[default]\nregion = eu-west-3\n[profile dev]\nregion = us-west-2\n");
    assert_int_equal(tm_aws_region_resolve(NULL, &o, region, sizeof(region), err, sizeof(err)), 0);
    assert_string_equal(region, "eu-west-3");
    o.profile = "dev";
    assert_int_equal(tm_aws_region_resolve(NULL, &o, region, sizeof(region), err, sizeof(err)), 0);
    assert_string_equal(region, "us-west-2");
    setenv("AWS_DEFAULT_REGION", "ap-south-1", 1);
    assert_int_equal(tm_aws_region_resolve(NULL, &o, region, sizeof(region), err, sizeof(err)), 0);
    assert_string_equal(region, "ap-south-1");
    setenv("AWS_REGION", "ca-central-1", 1);
    assert_int_equal(tm_aws_region_resolve(NULL, &o, region, sizeof(region), err, sizeof(err)), 0);
    assert_string_equal(region, "ca-central-1");
    assert_int_equal(tm_aws_region_resolve("us-east-2", &o, region, sizeof(region), err, sizeof(err)), 0);
    assert_string_equal(region, "us-east-2");
    assert_int_equal(tm_aws_region_resolve("us-east-1/../x", &o, region, sizeof(region), err,
                                           sizeof(err)), TM_EINVAL);
    assert_int_equal(tm_aws_region_resolve("us-east-2", &o, region, 4, err, sizeof(err)), TM_EINVAL);
}

static void test_endpoint(void **state)
{
    char ep[256];

    assert_int_equal(tm_aws_endpoint_resolve(NULL, "us-east-1", ep, sizeof(ep)), 0);
    assert_string_equal(ep, "https://ec2.us-east-1.amazonaws.com");
    setenv("AWS_ENDPOINT_URL", "http://127.0.0.1:4566/", 1);
    assert_int_equal(tm_aws_endpoint_resolve(NULL, "us-east-1", ep, sizeof(ep)), 0);
    assert_string_equal(ep, "http://127.0.0.1:4566");
    setenv("AWS_ENDPOINT_URL_EC2", "http://127.0.0.1:5000", 1);
    assert_int_equal(tm_aws_endpoint_resolve(NULL, "us-east-1", ep, sizeof(ep)), 0);
    assert_string_equal(ep, "http://127.0.0.1:5000");
    assert_int_equal(tm_aws_endpoint_resolve("https://vpce.example//", NULL, ep, sizeof(ep)), 0);
    assert_string_equal(ep, "https://vpce.example");
    assert_int_equal(tm_aws_endpoint_resolve("ftp://x", "us-east-1", ep, sizeof(ep)), TM_EINVAL);
    assert_int_equal(tm_aws_endpoint_resolve("http://a b", "us-east-1", ep, sizeof(ep)), TM_EINVAL);
    clear_aws_env();
    assert_int_equal(tm_aws_endpoint_resolve(NULL, NULL, ep, sizeof(ep)), TM_EINVAL);
    assert_int_equal(tm_aws_endpoint_resolve(NULL, "us-east-1", ep, 10), TM_EINVAL);
}

/* ---- the provider on a loop ---- */

struct got {
    int calls;
    int status;
    struct tm_aws_credentials cred;
    char error[600];
    int in_api;
};

static void on_cred(int status, const struct tm_aws_credentials *cred, const char *error, void *data)
{
    struct got *g = data;

    assert_int_equal(g->in_api, 0);  /* never from inside the call */
    g->calls++;
    g->status = status;
    if (cred)
        g->cred = *cred;
    else
        memset(&g->cred, 0, sizeof(g->cred));
    snprintf(g->error, sizeof(g->error), "%s", error ? error : "");
}

struct waitfor {
    uv_timer_t timer;
    int (*cond)(void *);
    void *arg;
    uint64_t deadline;
    int met;
};

static void on_poll(uv_timer_t *t)
{
    struct waitfor *w = t->data;

    if (w->cond(w->arg) || uv_now(t->loop) >= w->deadline) {
        w->met = w->cond(w->arg);
        uv_stop(t->loop);
    }
}

static void on_wait_closed(uv_handle_t *h)
{
}

/* Run the loop until cond holds or timeout_ms passes: a polling timer
 * keeps the loop alive and stops it, so no stray handle can stall us. */
static int run_until(uv_loop_t *loop, int (*cond)(void *), void *arg, uint64_t timeout_ms)
{
    struct waitfor w = {.cond = cond, .arg = arg};

    uv_update_time(loop);
    w.deadline = uv_now(loop) + timeout_ms;
    uv_timer_init(loop, &w.timer);
    w.timer.data = &w;
    uv_timer_start(&w.timer, on_poll, 10, 10);
    uv_run(loop, UV_RUN_DEFAULT);
    uv_close((uv_handle_t *)&w.timer, on_wait_closed);
    uv_run(loop, UV_RUN_NOWAIT);
    return w.met;
}

static int got_called(void *arg)
{
    return ((struct got *)arg)->calls > 0;
}

static int flag_set(void *arg)
{
    return *(int *)arg != 0;
}

static void on_flag(void *data)
{
    (*(int *)data)++;
}

static void get(struct tm_aws_credential_provider *p, struct got *g)
{
    memset(g, 0, sizeof(*g));
    g->in_api = 1;
    assert_int_equal(tm_aws_credential_provider_get(p, on_cred, g), 0);
    g->in_api = 0;
}

static void close_all(uv_loop_t *loop, struct tm_aws_credential_provider *p, struct tm_http *http)
{
    int pclosed = 0, hclosed = 0;

    if (p)
        tm_aws_credential_provider_close(p, on_flag, &pclosed);
    if (http)
        tm_http_close(http, on_flag, &hclosed);
    if (p)
        assert_true(run_until(loop, flag_set, &pclosed, 5000));
    if (http)
        assert_true(run_until(loop, flag_set, &hclosed, 5000));
    uv_run(loop, UV_RUN_DEFAULT);
    assert_int_equal(uv_loop_close(loop), 0);
}

/* Precedence through the provider: env beats files; source restricts. */
static void test_chain_precedence(void **state)
{
    uv_loop_t loop;
    struct tm_aws_credential_provider *p;
    struct tm_aws_credential_options o = {0};
    struct got g;

    assert_int_equal(uv_loop_init(&loop), 0);
    write_file(".aws/credentials", "[default]\naws_access_key_id=AKIAFILE\naws_secret_access_key=file-s\n");
    setenv("AWS_ACCESS_KEY_ID", "AKIAENV", 1);
    setenv("AWS_SECRET_ACCESS_KEY", "env-s", 1);

    assert_int_equal(tm_aws_credential_provider_create(&loop, NULL, &o, &p), 0);
    get(p, &g);
    assert_true(run_until(&loop, got_called, &g, 2000));
    assert_int_equal(g.status, 0);
    assert_string_equal(g.cred.access_key, "AKIAENV");
    /* Cached: a second get answers without a new fetch, still later. */
    get(p, &g);
    assert_true(run_until(&loop, got_called, &g, 2000));
    assert_int_equal(tm_aws_credential_provider_fetches(p), 1);
    tm_aws_credential_provider_close(p, NULL, NULL);

    o.source = TM_AWS_CRED_FILE;
    assert_int_equal(tm_aws_credential_provider_create(&loop, NULL, &o, &p), 0);
    get(p, &g);
    assert_true(run_until(&loop, got_called, &g, 2000));
    assert_int_equal(g.status, 0);
    assert_string_equal(g.cred.access_key, "AKIAFILE");
    tm_aws_credential_provider_close(p, NULL, NULL);

    /* A broken file stops the chain even when IMDS could answer. */
    unsetenv("AWS_ACCESS_KEY_ID");
    unsetenv("AWS_SECRET_ACCESS_KEY");
    write_file(".aws/credentials", "[default]\naws_access_key_id=AKIAFILE\n");
    o.source = TM_AWS_CRED_CHAIN;
    assert_int_equal(tm_aws_credential_provider_create(&loop, NULL, &o, &p), 0);
    get(p, &g);
    assert_true(run_until(&loop, got_called, &g, 2000));
    assert_int_equal(g.status, TM_EINVAL);
    assert_non_null(strstr(g.error, "/.aws/credentials:2:"));

    /* Env only, nothing set: not found, with the reason. */
    tm_aws_credential_provider_close(p, NULL, NULL);
    o.source = TM_AWS_CRED_ENV;
    assert_int_equal(tm_aws_credential_provider_create(&loop, NULL, &o, &p), 0);
    get(p, &g);
    assert_true(run_until(&loop, got_called, &g, 2000));
    assert_int_equal(g.status, TM_ENOTFOUND);
    assert_non_null(strstr(g.error, "AWS_ACCESS_KEY_ID"));
    close_all(&loop, p, NULL);
}

/* One-shot resolve, and a get pending at close answers TM_ECANCELED. */
static void test_resolve_and_close(void **state)
{
    uv_loop_t loop;
    struct tm_aws_credential_provider *p;
    struct got g = {0}, g2;
    int r;

    assert_int_equal(uv_loop_init(&loop), 0);
    setenv("AWS_ACCESS_KEY_ID", "AKIAONESHOT", 1);
    setenv("AWS_SECRET_ACCESS_KEY", "oneshot-s", 1);
    g.in_api = 1;
    r = tm_aws_credentials_resolve(&loop, NULL, NULL, on_cred, &g);
    g.in_api = 0;
    assert_int_equal(r, 0);
    assert_true(run_until(&loop, got_called, &g, 2000));
    assert_int_equal(g.status, 0);
    assert_string_equal(g.cred.access_key, "AKIAONESHOT");

    assert_int_equal(tm_aws_credential_provider_create(&loop, NULL, NULL, &p), 0);
    get(p, &g2);
    close_all(&loop, p, NULL);
    assert_int_equal(g2.calls, 1);
    assert_int_equal(g2.status, TM_ECANCELED);
}

/* ---- IMDSv2 against the fixture ---- */

static pid_t fx_pid = -1;
static int fx_stdin = -1;
static int fx_port;

static void fixture_start(const char *const *args)
{
    const char *src = getenv("TM_SOURCE_DIR");
    char script[1024], line[256];
    const char *argv[12];
    int in[2], out[2];
    size_t n = 0;
    FILE *f;

    if (!src)
        src = TM_SOURCE_DIR;
    snprintf(script, sizeof(script), "%s/tests/lib/imds_fixture.py", src);
    argv[n++] = "python3";
    argv[n++] = script;
    for (; args && *args && n < 11; args++)
        argv[n++] = *args;
    argv[n] = NULL;
    assert_int_equal(pipe(in), 0);
    assert_int_equal(pipe(out), 0);
    fx_pid = fork();
    assert_true(fx_pid >= 0);
    if (fx_pid == 0) {
        dup2(in[0], 0);
        dup2(out[1], 1);
        close(in[1]);
        close(out[0]);
        execvp("python3", (char *const *)argv);
        _exit(127);
    }
    close(in[0]);
    close(out[1]);
    fx_stdin = in[1];
    fx_port = 0;
    f = fdopen(out[0], "r");
    assert_non_null(f);
    while (fgets(line, sizeof(line), f)) {
        if (sscanf(line, "tm-imds-fixture port=%d", &fx_port) == 1)
            break;
        fprintf(stderr, "imds_fixture: %s", line);
    }
    fclose(f);
    assert_true(fx_port > 0);
}

static void fixture_stop(void)
{
    if (fx_stdin >= 0)
        close(fx_stdin);
    fx_stdin = -1;
    if (fx_pid > 0) {
        kill(fx_pid, SIGTERM);
        waitpid(fx_pid, NULL, 0);
    }
    fx_pid = -1;
}

static int imds_teardown(void **state)
{
    fixture_stop();
    return teardown(state);
}

static const char *fx_url(void)
{
    static char url[64];

    snprintf(url, sizeof(url), "http://127.0.0.1:%d", fx_port);
    return url;
}

static struct tm_aws_credential_provider *imds_provider(uv_loop_t *loop, struct tm_http **http,
                                                        int64_t margin_ms)
{
    struct tm_aws_credential_options o = {
        .source = TM_AWS_CRED_INSTANCE_ROLE,
        .imds_endpoint = fx_url(),
        .refresh_margin_ms = margin_ms,
        .imds_timeout_ms = 5000,
    };
    struct tm_aws_credential_provider *p;

    assert_int_equal(uv_loop_init(loop), 0);
    assert_int_equal(tm_http_create(loop, http), 0);
    assert_int_equal(tm_aws_credential_provider_create(loop, *http, &o, &p), 0);
    return p;
}

static int64_t now_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void test_imds_basic(void **state)
{
    static const char *const args[] = {"--ttl", "3600", NULL};
    uv_loop_t loop;
    struct tm_http *http;
    struct tm_aws_credential_provider *p;
    struct got g;
    char buf[2048] = {0};
    FILE *f = fmemopen(buf, sizeof(buf) - 1, "w");

    fixture_start(args);
    p = imds_provider(&loop, &http, 0);
    tm_log_set_stream(f);
    get(p, &g);
    assert_true(run_until(&loop, got_called, &g, 10000));
    tm_log_info("leak check", "secret=%s", g.cred.secret_key);
    fflush(f);
    tm_log_set_stream(stderr);
    fclose(f);
    assert_int_equal(g.status, 0);
    assert_string_equal(g.cred.access_key, "ASIAFIXTURE0001");
    assert_string_equal(g.cred.secret_key, "fixture-secret-1-wJalrXUtnFEMIK7MDENG");
    assert_string_equal(g.cred.session_token, "fixture-token-1-IQoJb3JpZ2luX2VjEND//////////wEaCXVz");
    assert_string_equal(g.cred.source, "instance_role");
    assert_true(g.cred.expires_ms > now_ms() + 3590 * 1000LL);
    assert_true(g.cred.expires_ms < now_ms() + 3610 * 1000LL);
    assert_null(strstr(buf, "fixture-secret"));
    assert_non_null(strstr(buf, "aws credentials loaded"));
    close_all(&loop, p, http);
}

struct http_got {
    int calls;
    long http_status;
};

static void on_http(const struct tm_http_response *resp, void *data)
{
    struct http_got *h = data;

    h->calls++;
    h->http_status = resp->http_status;
}

static int http_called(void *arg)
{
    return ((struct http_got *)arg)->calls > 0;
}

/* The fixture behaves as IMDSv2: no token, no answer. */
static void test_imds_token_required(void **state)
{
    uv_loop_t loop;
    struct tm_http *http;
    struct http_got h = {0};
    char url[128];
    struct tm_http_request req = {.method = "GET", .url = url};

    fixture_start(NULL);
    assert_int_equal(uv_loop_init(&loop), 0);
    assert_int_equal(tm_http_create(&loop, &http), 0);
    snprintf(url, sizeof(url), "%s/latest/meta-data/iam/security-credentials/", fx_url());
    assert_int_equal(tm_http_request(http, &req, on_http, &h), 0);
    assert_true(run_until(&loop, http_called, &h, 5000));
    assert_int_equal(h.http_status, 401);
    {
        const char *hdrs[] = {"X-aws-ec2-metadata-token: made-up", NULL};

        req.headers = hdrs;
        h.calls = 0;
        assert_int_equal(tm_http_request(http, &req, on_http, &h), 0);
        assert_true(run_until(&loop, http_called, &h, 5000));
        assert_int_equal(h.http_status, 401);
    }
    snprintf(url, sizeof(url), "%s/latest/api/token", fx_url());
    req.method = "PUT";
    req.headers = NULL;
    h.calls = 0;
    assert_int_equal(tm_http_request(http, &req, on_http, &h), 0);
    assert_true(run_until(&loop, http_called, &h, 5000));
    assert_int_equal(h.http_status, 400);
    close_all(&loop, NULL, http);
}

struct refresh_watch {
    struct tm_aws_credential_provider *p;
    unsigned want;
};

static int fetched_enough(void *arg)
{
    struct refresh_watch *w = arg;

    return tm_aws_credential_provider_fetches(w->p) >= w->want;
}

/*
 * Short-lived credentials (Expiration 4 s ahead) with a 2.5 s margin: the
 * provider must fetch again by itself before they expire, and a get after
 * that sees the new set.
 */
static void test_imds_refresh(void **state)
{
    static const char *const args[] = {"--ttl", "4", NULL};
    uv_loop_t loop;
    struct tm_http *http;
    struct tm_aws_credential_provider *p;
    struct refresh_watch w;
    struct got g;

    fixture_start(args);
    p = imds_provider(&loop, &http, 2500);
    get(p, &g);
    assert_true(run_until(&loop, got_called, &g, 10000));
    assert_int_equal(g.status, 0);
    assert_string_equal(g.cred.access_key, "ASIAFIXTURE0001");
    w = (struct refresh_watch){.p = p, .want = 3};
    /* Each set lives 3-4 s and is refreshed 2.5 s early: about every 1 s. */
    assert_true(run_until(&loop, fetched_enough, &w, 10000));
    get(p, &g);
    assert_true(run_until(&loop, got_called, &g, 10000));
    assert_int_equal(g.status, 0);
    assert_true(strcmp(g.cred.access_key, "ASIAFIXTURE0003") >= 0);
    assert_true(g.cred.expires_ms > now_ms());
    close_all(&loop, p, http);
}

/* IMDS goes away: the cached set is served until it expires, then errors. */
static void test_imds_stale_then_expired(void **state)
{
    static const char *const args[] = {"--ttl", "5", NULL};
    uv_loop_t loop;
    struct tm_http *http;
    struct tm_aws_credential_provider *p;
    struct got g;
    int64_t expires;

    fixture_start(args);
    p = imds_provider(&loop, &http, 4000);
    get(p, &g);
    assert_true(run_until(&loop, got_called, &g, 10000));
    assert_int_equal(g.status, 0);
    expires = g.cred.expires_ms;
    fixture_stop();
    /* Inside the margin but not expired: a refresh is tried, fails, and
     * the cached set is still given. */
    get(p, &g);
    assert_true(run_until(&loop, got_called, &g, 10000));
    if (now_ms() < expires) {
        assert_int_equal(g.status, 0);
        assert_string_equal(g.cred.access_key, "ASIAFIXTURE0001");
    }
    while (now_ms() < expires + 100) {
        int never = 0;

        run_until(&loop, flag_set, &never, 200);
    }
    get(p, &g);
    assert_true(run_until(&loop, got_called, &g, 10000));
    assert_int_equal(g.status, -ECONNREFUSED);
    assert_non_null(strstr(g.error, "IMDS"));
    close_all(&loop, p, http);
}

static void expect_imds_error(const char *mode, int want, const char *want_text)
{
    const char *args[] = {"--mode", mode, NULL};
    uv_loop_t loop;
    struct tm_http *http;
    struct tm_aws_credential_provider *p;
    struct got g;

    fixture_start(args);
    p = imds_provider(&loop, &http, 0);
    get(p, &g);
    assert_true(run_until(&loop, got_called, &g, 10000));
    if (g.status != want || !strstr(g.error, want_text))
        fail_msg("mode %s: status %d (%s), want %d and \"%s\"", mode, g.status, g.error, want,
                 want_text);
    assert_null(strstr(g.error, "fixture-secret"));
    assert_null(strstr(g.error, "fixture-token"));
    close_all(&loop, p, http);
    fixture_stop();
}

static void test_imds_errors(void **state)
{
    expect_imds_error("norole", TM_ENOTFOUND, "no role attached");
    expect_imds_error("badjson", TM_EBADREPLY, "not a JSON object");
    expect_imds_error("wrongtypes", TM_EBADREPLY, "must all be strings");
    expect_imds_error("failcode", TM_EAUTH, "AssumeRoleUnauthorizedAccess");
}

static int closed_port(void)
{
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof(sa);
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    int port;

    assert_true(fd >= 0);
    assert_int_equal(bind(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
    assert_int_equal(getsockname(fd, (struct sockaddr *)&sa, &len), 0);
    port = ntohs(sa.sin_port);
    close(fd);
    return port;
}

/* The full chain reaches IMDS when env and files have nothing; the
 * endpoint comes from AWS_EC2_METADATA_SERVICE_ENDPOINT. */
static void test_chain_to_imds(void **state)
{
    uv_loop_t loop;
    struct tm_http *http;
    struct tm_aws_credential_provider *p;
    struct got g;
    char url[64];

    fixture_start(NULL);
    setenv("AWS_EC2_METADATA_SERVICE_ENDPOINT", fx_url(), 1);
    assert_int_equal(uv_loop_init(&loop), 0);
    assert_int_equal(tm_http_create(&loop, &http), 0);
    g.in_api = 1;
    assert_int_equal(tm_aws_credentials_resolve(&loop, http, NULL, on_cred, &g), 0);
    g.in_api = 0;
    g.calls = 0;
    assert_true(run_until(&loop, got_called, &g, 10000));
    assert_int_equal(g.status, 0);
    assert_string_equal(g.cred.source, "instance_role");

    /* Nothing anywhere: the IMDS error, with the chain's story. */
    snprintf(url, sizeof(url), "http://127.0.0.1:%d", closed_port());
    setenv("AWS_EC2_METADATA_SERVICE_ENDPOINT", url, 1);
    assert_int_equal(tm_aws_credential_provider_create(&loop, http, NULL, &p), 0);
    get(p, &g);
    assert_true(run_until(&loop, got_called, &g, 10000));
    assert_int_equal(g.status, -ECONNREFUSED);
    assert_non_null(strstr(g.error, "AWS_ACCESS_KEY_ID"));
    assert_non_null(strstr(g.error, "IMDS"));
    tm_aws_credential_provider_close(p, NULL, NULL);

    /* AWS_EC2_METADATA_DISABLED keeps the chain off IMDS. */
    setenv("AWS_EC2_METADATA_DISABLED", "true", 1);
    assert_int_equal(tm_aws_credential_provider_create(&loop, http, NULL, &p), 0);
    get(p, &g);
    assert_true(run_until(&loop, got_called, &g, 10000));
    assert_int_equal(g.status, TM_ENOTFOUND);
    close_all(&loop, p, http);
}

/* Close while an IMDS request is in flight: the get is cancelled, the
 * provider is freed once tm_http gives the request back. */
static void test_imds_close_in_flight(void **state)
{
    static const char *const args[] = {"--mode", "slow", NULL};
    uv_loop_t loop;
    struct tm_http *http;
    struct tm_aws_credential_provider *p;
    struct got g;

    fixture_start(args);
    p = imds_provider(&loop, &http, 0);
    get(p, &g);
    run_until(&loop, got_called, &g, 300);  /* token and role done, creds pending */
    assert_int_equal(g.calls, 0);
    close_all(&loop, p, http);
    assert_int_equal(g.calls, 1);
    assert_int_equal(g.status, TM_ECANCELED);
}

int main(int argc, char **argv)
{
    const struct CMUnitTest unit[] = {
        cmocka_unit_test_setup_teardown(test_env, setup, teardown),
        cmocka_unit_test_setup_teardown(test_files_profiles, setup, teardown),
        cmocka_unit_test_setup_teardown(test_files_malformed, setup, teardown),
        cmocka_unit_test_setup_teardown(test_secrets_redacted, setup, teardown),
        cmocka_unit_test_setup_teardown(test_source_parse, setup, teardown),
        cmocka_unit_test_setup_teardown(test_region, setup, teardown),
        cmocka_unit_test_setup_teardown(test_endpoint, setup, teardown),
        cmocka_unit_test_setup_teardown(test_chain_precedence, setup, teardown),
        cmocka_unit_test_setup_teardown(test_resolve_and_close, setup, teardown),
    };
    const struct CMUnitTest imds[] = {
        cmocka_unit_test_setup_teardown(test_imds_basic, setup, imds_teardown),
        cmocka_unit_test_setup_teardown(test_imds_token_required, setup, imds_teardown),
        cmocka_unit_test_setup_teardown(test_imds_refresh, setup, imds_teardown),
        cmocka_unit_test_setup_teardown(test_imds_stale_then_expired, setup, imds_teardown),
        cmocka_unit_test_setup_teardown(test_imds_errors, setup, imds_teardown),
        cmocka_unit_test_setup_teardown(test_chain_to_imds, setup, imds_teardown),
        cmocka_unit_test_setup_teardown(test_imds_close_in_flight, setup, imds_teardown),
    };

    signal(SIGPIPE, SIG_IGN);
    if (argc > 1 && strcmp(argv[1], "imds") == 0)
        return cmocka_run_group_tests_name("aws_credentials_imds", imds, NULL, NULL);
    return cmocka_run_group_tests_name("aws_credentials", unit, NULL, NULL);
}
