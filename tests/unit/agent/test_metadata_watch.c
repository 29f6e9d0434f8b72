/*
 * tests/unit/agent/test_metadata_watch.c: each watch (controller/agent/
 * metadata*.c) against its loopback fake (tests/lib/metadata_fixture.py),
 * on a real loop.  For each cloud: a quiet service gives no notice and the
 * requests carry the headers the real service insists on (the fake counts
 * refusals); a malformed answer is logged once, naming the field, and
 * gives no notice; a raised notice is reported once with the documented
 * action and deadline; Azure's ack reaches the service as StartRequests.
 * The local watch reads its notice file.  The node's address (address.h):
 * each cloud's private IPv4 from its fake, none for an answer that is not
 * an IP address or a service that is not there.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <signal.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "controller/agent/address.h"
#include "controller/agent/metadata.h"
#include "controller/io/http_uv.h"
#include "core/err.h"
#include "core/log.h"

#define PERIOD_MS 200

struct ctx {
    uv_loop_t loop;
    struct tm_http *http;
    struct tm_md_watch *w;
    struct tm_md_notice last;
    int notices;
    FILE *log;
};

static pid_t fx_pid = -1;
static int fx_stdin = -1;
static int fx_port;

static void fixture_start(const char *cloud)
{
    const char *src = getenv("TM_SOURCE_DIR");
    char script[1024], line[256];
    int in[2], out[2];
    FILE *f;

    if (!src)
        src = TM_SOURCE_DIR;
    snprintf(script, sizeof(script), "%s/tests/lib/metadata_fixture.py", src);
    assert_int_equal(pipe(in), 0);
    assert_int_equal(pipe(out), 0);
    fx_pid = fork();
    assert_true(fx_pid >= 0);
    if (fx_pid == 0) {
        dup2(in[0], 0);
        dup2(out[1], 1);
        close(in[1]);
        close(out[0]);
        execlp("python3", "python3", script, "--cloud", cloud, (char *)NULL);
        _exit(127);
    }
    close(in[0]);
    close(out[1]);
    fx_stdin = in[1];
    fx_port = 0;
    f = fdopen(out[0], "r");
    assert_non_null(f);
    while (fgets(line, sizeof(line), f))
        if (sscanf(line, "tm-metadata-fixture port=%d", &fx_port) == 1)
            break;
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

/* A control call or a state read on the fake; the answer into out. */
static void control(const char *what, char *out, size_t size)
{
    char cmd[1024];
    FILE *p;
    size_t n = 0;

    snprintf(cmd, sizeof(cmd), "curl -sf %s 'http://127.0.0.1:%d/_fixture/%s'",
             strncmp(what, "state", 5) == 0 ? "" : "-XPOST", fx_port, what);
    p = popen(cmd, "r");
    assert_non_null(p);
    if (out)
        n = fread(out, 1, size - 1, p);
    else
        while (fgetc(p) != EOF)
            ;
    if (out)
        out[n] = '\0';
    assert_int_equal(pclose(p), 0);
}

static void on_notice(const struct tm_md_notice *n, void *data)
{
    struct ctx *c = data;

    c->last = *n;
    c->notices++;
}

static void on_tick(uv_timer_t *t)
{
    (void)t;
}

/* Run the loop for ms, or until the notice count passes want. */
static void run_for(struct ctx *c, int ms, int want)
{
    uv_timer_t t;
    uint64_t end = uv_now(&c->loop) + (uint64_t)ms;

    uv_timer_init(&c->loop, &t);
    uv_timer_start(&t, on_tick, 20, 20);
    while (uv_now(&c->loop) < end && (want < 0 || c->notices < want))
        uv_run(&c->loop, UV_RUN_ONCE);
    uv_close((uv_handle_t *)&t, NULL);
    uv_run(&c->loop, UV_RUN_NOWAIT);
}

static int count_lines(FILE *log, const char *needle)
{
    char line[1024];
    int n = 0;

    fflush(log);
    rewind(log);
    while (fgets(line, sizeof(line), log))
        n += strstr(line, needle) != NULL;
    fseek(log, 0, SEEK_END);
    return n;
}

static void ctx_open(struct ctx *c, const char *kind, const char *base)
{
    memset(c, 0, sizeof(*c));
    assert_int_equal(uv_loop_init(&c->loop), 0);
    assert_int_equal(tm_http_create(&c->loop, &c->http), 0);
    c->log = tmpfile();
    assert_non_null(c->log);
    tm_log_set_stream(c->log);
    assert_int_equal(tm_md_watch_start(&c->loop, c->http, kind, base, on_notice, c, &c->w), 0);
    tm_md_watch_set_period(c->w, PERIOD_MS);
}

static void ctx_close(struct ctx *c)
{
    tm_md_watch_stop(c->w);
    tm_http_close(c->http, NULL, NULL);
    uv_run(&c->loop, UV_RUN_DEFAULT);
    assert_int_equal(uv_loop_close(&c->loop), 0);
    tm_log_set_stream(stderr);
    fclose(c->log);
}

/* The wall clock the fakes and the readers stamp deadlines with. */
static int64_t wall_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void base_url(char *buf, size_t size)
{
    snprintf(buf, size, "http://127.0.0.1:%d/n/7/", fx_port);
}

/* The part every cloud shares: quiet, garbage, notice, dedup. */
static void common_sequence(struct ctx *c, const char *garbage, const char *field_kv)
{
    char state[512], what[512];

    run_for(c, 4 * PERIOD_MS, -1);
    assert_int_equal(c->notices, 0);
    control("state?node=7", state, sizeof(state));
    assert_non_null(strstr(state, "\"bad_headers\": 0"));
    assert_null(strstr(state, "\"requests\": 0,"));

    snprintf(what, sizeof(what), "garbage?node=7&body=%s", garbage);
    control(what, NULL, 0);
    run_for(c, 8 * PERIOD_MS, -1);
    assert_int_equal(c->notices, 0);
    assert_int_equal(count_lines(c->log, "malformed answer"), 1);
    assert_int_equal(count_lines(c->log, field_kv), 1);
    control("clear?node=7", NULL, 0);
}

static void test_aws(void **state)
{
    struct ctx c;
    char base[128];
    int64_t before, after;

    fixture_start("aws");
    base_url(base, sizeof(base));
    ctx_open(&c, "aws", base);
    common_sequence(&c, "%7B%22action%22%3A%22terminate%22", "field=instance-action");
    before = wall_ms();
    control("interrupt?node=7&in=120", NULL, 0);
    run_for(&c, 5000, 1);
    after = wall_ms();
    assert_int_equal(c.notices, 1);
    assert_string_equal(c.last.cloud, "aws");
    assert_string_equal(c.last.action, "terminate");
    /* the fake's deadline is 120 s from its interrupt, in whole seconds */
    assert_true(c.last.deadline_ms >= before + 119000 && c.last.deadline_ms <= after + 121000);
    run_for(&c, 4 * PERIOD_MS, -1);
    assert_int_equal(c.notices, 1); /* still announced, reported once */
    assert_int_equal(tm_md_watch_ack(c.w, c.last.event_id), 0); /* nothing to send */
    assert_int_equal(tm_md_watch_ack(c.w, "nope"), TM_ENOTFOUND);

    control("interrupt?node=7&action=rebalance", NULL, 0);
    run_for(&c, 5000, 2);
    assert_int_equal(c.notices, 2);
    assert_string_equal(c.last.action, "rebalance");
    ctx_close(&c);
    fixture_stop();
}

static void test_gcp(void **state)
{
    struct ctx c;
    char base[128], st[512];
    int64_t before, after;

    fixture_start("gcp");
    base_url(base, sizeof(base));
    ctx_open(&c, "gcp", base);
    common_sequence(&c, "MAYBE", "field=preempted");
    before = wall_ms();
    control("interrupt?node=7", NULL, 0);
    /* The long poll answers at once on a change. */
    run_for(&c, 3000, 1);
    after = wall_ms();
    assert_int_equal(c.notices, 1);
    assert_string_equal(c.last.cloud, "gcp");
    assert_string_equal(c.last.action, "preempt");
    /* GCP gives no deadline: the reader assumes its 30 s from the notice */
    assert_true(c.last.deadline_ms >= before + 29000 && c.last.deadline_ms <= after + 31000);
    run_for(&c, 1500, -1);
    assert_int_equal(c.notices, 1);
    control("interrupt?node=7&action=maintenance", NULL, 0);
    run_for(&c, 3000, 2);
    assert_int_equal(c.notices, 2);
    assert_string_equal(c.last.action, "maintenance-terminate");
    control("state?node=7", st, sizeof(st));
    assert_non_null(strstr(st, "\"bad_headers\": 0"));
    ctx_close(&c);
    fixture_stop();
}

static void test_azure(void **state)
{
    struct ctx c;
    char base[128], st[512];
    int64_t before, after;

    fixture_start("azure");
    base_url(base, sizeof(base));
    ctx_open(&c, "azure", base);
    common_sequence(&c,
                    "%7B%22DocumentIncarnation%22%3A1%2C%22Events%22%3A%5B%7B%22EventId%22%3A%22x%22%7D%5D%7D",
                    "field=Events[0].EventType");
    before = wall_ms();
    control("interrupt?node=7&in=30", NULL, 0);
    run_for(&c, 5000, 1);
    after = wall_ms();
    assert_int_equal(c.notices, 1);
    assert_string_equal(c.last.cloud, "azure");
    assert_string_equal(c.last.action, "preempt");
    /* NotBefore is 30 s from the fake's interrupt, in whole seconds */
    assert_true(c.last.deadline_ms >= before + 29000 && c.last.deadline_ms <= after + 31000);
    assert_int_equal(strlen(c.last.event_id), 36);
    run_for(&c, 4 * PERIOD_MS, -1);
    assert_int_equal(c.notices, 1);
    assert_int_equal(tm_md_watch_ack(c.w, c.last.event_id), 0);
    run_for(&c, 4 * PERIOD_MS, -1);
    control("state?node=7", st, sizeof(st));
    assert_non_null(strstr(st, c.last.event_id));
    assert_non_null(strstr(st, "\"bad_headers\": 0"));
    ctx_close(&c);
    fixture_stop();
}

static void test_unreachable_logged_once(void **state)
{
    struct ctx c;

    /* A port nobody listens on: reserved by the fixture, then freed. */
    fixture_start("aws");
    fixture_stop();
    {
        char base[128];
        base_url(base, sizeof(base));
        ctx_open(&c, "aws", base);
    }
    run_for(&c, 6 * PERIOD_MS, -1);
    assert_int_equal(c.notices, 0);
    assert_int_equal(count_lines(c.log, "could not reach the metadata service"), 1);
    ctx_close(&c);
}

static void test_local(void **state)
{
    char dir[] = "/tmp/tm-md-local-XXXXXX", path[128], ack[160], buf[64] = "";
    struct ctx c;
    FILE *f;

    assert_non_null(mkdtemp(dir));
    snprintf(path, sizeof(path), "file://%s/notice.json", dir);
    ctx_open(&c, "local", path);
    run_for(&c, 3 * PERIOD_MS, -1);
    assert_int_equal(c.notices, 0);
    assert_int_equal(count_lines(c.log, "could not"), 0); /* absent is normal */

    f = fopen(path + 7, "w");
    fputs("{\"action\":", f);
    fclose(f);
    run_for(&c, 4 * PERIOD_MS, -1);
    assert_int_equal(c.notices, 0);
    assert_int_equal(count_lines(c.log, "field=notice"), 1);

    f = fopen(path + 7, "w");
    fputs("{\"action\":\"terminate\",\"deadline_ms\":1795969320000,\"event_id\":\"local:7:1\"}", f);
    fclose(f);
    run_for(&c, 3000, 1);
    assert_int_equal(c.notices, 1);
    assert_string_equal(c.last.event_id, "local:7:1");
    assert_int_equal(tm_md_watch_ack(c.w, "local:7:1"), 0);
    snprintf(ack, sizeof(ack), "%s/ack", dir);
    f = fopen(ack, "r");
    assert_non_null(f);
    assert_non_null(fgets(buf, sizeof(buf), f));
    fclose(f);
    assert_string_equal(buf, "local:7:1");
    ctx_close(&c);
    unlink(ack);
    unlink(path + 7);
    rmdir(dir);
}

/* ---- the node's address (address.h) ---------------------------------- */

struct addr_ctx {
    int calls;
    char address[64];
};

static void on_address(void *data, const char *address)
{
    struct addr_ctx *a = data;

    a->calls++;
    snprintf(a->address, sizeof(a->address), "%s", address ? address : "(none)");
}

/* Look the address up on the running fake; what came back. */
static void lookup(const char *kind, struct addr_ctx *a)
{
    uv_loop_t loop;
    struct tm_http *http;
    char base[128];
    FILE *log = tmpfile();

    assert_non_null(log);
    tm_log_set_stream(log);
    memset(a, 0, sizeof(*a));
    base_url(base, sizeof(base));
    assert_int_equal(uv_loop_init(&loop), 0);
    assert_int_equal(tm_http_create(&loop, &http), 0);
    assert_int_equal(tm_agent_address_lookup(http, kind, base, on_address, a), 0);
    while (a->calls == 0)
        uv_run(&loop, UV_RUN_ONCE);
    tm_http_close(http, NULL, NULL);
    uv_run(&loop, UV_RUN_DEFAULT);
    assert_int_equal(uv_loop_close(&loop), 0);
    tm_log_set_stream(stderr);
    fclose(log);
    assert_int_equal(a->calls, 1);
}

/* Each cloud's private IPv4 with the headers its service insists on; an
 * answer that is not an IP address gives none. */
static void test_address(void **state)
{
    static const char *const clouds[] = {"aws", "gcp", "azure"};
    static const char *const want[] = {"172.31.5.17", "10.128.0.7", "10.0.0.4"};
    struct addr_ctx a;
    char st[512];

    (void)state;
    for (int i = 0; i < 3; i++) {
        fixture_start(clouds[i]);
        lookup(clouds[i], &a);
        assert_string_equal(a.address, want[i]);
        control("state?node=7", st, sizeof(st));
        assert_non_null(strstr(st, "\"bad_headers\": 0"));
        control("address?node=7&body=ip-10-0-0-1.internal", NULL, 0);
        lookup(clouds[i], &a);
        assert_string_equal(a.address, "(none)");
        fixture_stop();
    }
    /* no service there */
    fixture_start("gcp");
    fixture_stop();
    lookup("gcp", &a);
    assert_string_equal(a.address, "(none)");
    assert_int_equal(tm_agent_address_lookup(NULL, "local", NULL, on_address, &a), TM_EINVAL);
}

static void test_address_parse(void **state)
{
    char out[64];

    (void)state;
    assert_int_equal(tm_agent_address_parse(" 10.1.2.3\n", 10, out, sizeof(out)), 0);
    assert_string_equal(out, "10.1.2.3");
    assert_int_equal(tm_agent_address_parse("fd00::1", 7, out, sizeof(out)), 0);
    assert_string_equal(out, "fd00::1");
    assert_int_equal(tm_agent_address_parse("", 0, out, sizeof(out)), TM_EBADREPLY);
    assert_int_equal(tm_agent_address_parse("10.1.2", 6, out, sizeof(out)), TM_EBADREPLY);
    assert_int_equal(tm_agent_address_parse("10.1.2.3 x", 10, out, sizeof(out)), TM_EBADREPLY);
    assert_int_equal(tm_agent_address_parse("<html>", 6, out, sizeof(out)), TM_EBADREPLY);
    assert_int_equal(tm_agent_address_parse("10.1\0.2.3", 9, out, sizeof(out)), TM_EBADREPLY);
    assert_int_equal(tm_agent_address_parse(NULL, 0, out, sizeof(out)), TM_EBADREPLY);
}

static void test_bad_kind(void **state)
{
    uv_loop_t loop;
    struct tm_md_watch *w = NULL;

    uv_loop_init(&loop);
    assert_int_equal(tm_md_watch_start(&loop, NULL, "oracle", NULL, on_notice, NULL, &w), TM_EINVAL);
    assert_int_equal(tm_md_watch_start(&loop, NULL, "local", NULL, on_notice, NULL, &w), TM_EINVAL);
    assert_null(w);
    assert_int_equal(uv_loop_close(&loop), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_aws),   cmocka_unit_test(test_gcp),
        cmocka_unit_test(test_azure), cmocka_unit_test(test_unreachable_logged_once),
        cmocka_unit_test(test_local), cmocka_unit_test(test_bad_kind),
        cmocka_unit_test(test_address), cmocka_unit_test(test_address_parse),
    };
    signal(SIGPIPE, SIG_IGN);
    return cmocka_run_group_tests(tests, NULL, NULL);
}
