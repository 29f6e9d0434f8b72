/*
 * tests/integration/test_aws_reservation.c: the AWS provider's reserved
 * capacity against tests/lib/ec2_reservation_fake.py in front of moto
 * 5.2.1 (SigV4 checked by both; every request, and every answer the fake
 * writes, checked against botocore's EC2 model; the fake counts what it
 * found wrong and each test ends by asserting it found nothing).
 *
 * One moto and one fake for the binary; each test names its own cluster
 * and its own reservations, so moto's shared state does not leak between
 * them.  Each test runs its own loop and ends with uv_loop_close() == 0.
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
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>
#include <uv.h>

#include "core/config.h"
#include "core/err.h"
#include "core/log.h"
#include "providers/aws/aws_provider.h"
#include "providers/common/reservations.h"

static char state_dir[1024];
static int moto_port, fake_port;
static pid_t fake_pid = -1;
static char access_key[512], secret_key[512];
static char fake_url[128];

/* ---- fixtures ------------------------------------------------------------ */

static const char *src_dir(void)
{
    const char *s = getenv("TM_SOURCE_DIR");

    return s ? s : TM_SOURCE_DIR;
}

static int moto_start(void)
{
    char cmd[2048], line[512];
    const char *st = getenv("TM_TEST_STATE");
    FILE *p;

    snprintf(state_dir, sizeof(state_dir), "%s/aws-resv-%d", st ? st : "/tmp", (int)getpid());
    snprintf(cmd, sizeof(cmd), "%s/tests/lib/moto_fixture.sh start '%s'", src_dir(), state_dir);
    p = popen(cmd, "r");
    if (!p)
        return -1;
    while (fgets(line, sizeof(line), p)) {
        line[strcspn(line, "\n")] = '\0';
        if (sscanf(line, "MOTO_PORT=%d", &moto_port) == 1)
            continue;
        if (strncmp(line, "MOTO_ACCESS_KEY_ID=", 19) == 0)
            snprintf(access_key, sizeof(access_key), "%s", line + 19);
        else if (strncmp(line, "MOTO_SECRET_ACCESS_KEY=", 23) == 0)
            snprintf(secret_key, sizeof(secret_key), "%s", line + 23);
    }
    if (pclose(p) != 0 || moto_port <= 0 || !access_key[0] || !secret_key[0])
        return -1;
    return 0;
}

static int fake_start(void)
{
    char script[1024], port[16], line[256];
    int out[2];
    FILE *p;

    snprintf(script, sizeof(script), "%s/tests/lib/ec2_reservation_fake.py", src_dir());
    snprintf(port, sizeof(port), "%d", moto_port);
    if (pipe(out) < 0)
        return -1;
    fake_pid = fork();
    if (fake_pid < 0)
        return -1;
    if (fake_pid == 0) {
        dup2(out[1], 1);
        close(out[0]);
        /* The key moto checks, by the environment only. */
        setenv("EC2_FAKE_ACCESS_KEY_ID", access_key, 1);
        setenv("EC2_FAKE_SECRET_ACCESS_KEY", secret_key, 1);
        execlp("python3", "python3", script, port, (char *)NULL);
        _exit(127);
    }
    close(out[1]);
    p = fdopen(out[0], "r");
    if (!p)
        return -1;
    while (fgets(line, sizeof(line), p)) {
        if (sscanf(line, "EC2_RESV_FAKE_PORT=%d", &fake_port) == 1)
            continue;
        if (strncmp(line, "EC2_RESV_FAKE_READY", 19) == 0)
            break;
    }
    fclose(p);
    if (fake_port <= 0)
        return -1;
    snprintf(fake_url, sizeof(fake_url), "http://127.0.0.1:%d", fake_port);
    return 0;
}

static int group_setup(void **state)
{
    (void)state;
    if (moto_start() < 0 || fake_start() < 0) {
        fprintf(stderr, "could not start moto or the reservation fake\n");
        return -1;
    }
    setenv("AWS_ACCESS_KEY_ID", access_key, 1);
    setenv("AWS_SECRET_ACCESS_KEY", secret_key, 1);
    unsetenv("AWS_SESSION_TOKEN");
    setenv("AWS_REGION", "us-east-1", 1);
    setenv("AWS_SHARED_CREDENTIALS_FILE", "/nonexistent/tarmac-test", 1);
    setenv("AWS_CONFIG_FILE", "/nonexistent/tarmac-test", 1);
    unsetenv("AWS_PROFILE");
    unsetenv("AWS_ENDPOINT_URL");
    unsetenv("AWS_ENDPOINT_URL_EC2");
    setenv("TARMAC_AWS_IMAGE_ID", "ami-12c6146b", 1);
    tm_log_add_secret(secret_key);
    return 0;
}

static int group_teardown(void **state)
{
    char cmd[2048];

    (void)state;
    if (fake_pid > 0) {
        kill(fake_pid, SIGTERM);
        waitpid(fake_pid, NULL, 0);
    }
    snprintf(cmd, sizeof(cmd), "%s/tests/lib/moto_fixture.sh stop '%s'", src_dir(), state_dir);
    if (system(cmd) != 0)
        fprintf(stderr, "could not stop moto\n");
    return 0;
}

/* ---- the fake's control --------------------------------------------------- */

__attribute__((format(printf, 2, 3)))
static void fake_ctl(const char *what, const char *fmt, ...)
{
    char body[1024], cmd[1536];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(body, sizeof(body), fmt, ap);
    va_end(ap);
    snprintf(cmd, sizeof(cmd), "curl -sf -o /dev/null -X POST --data '%s' %s/__fake/%s", body,
             fake_url, what);
    assert_int_equal(system(cmd), 0);
}

/* A reservation in the fake: total slots, type, zone, state, kind. */
static void fake_reservation(const char *id, const char *type, const char *zone, int total,
                             const char *state, bool block)
{
    fake_ctl("reservation",
             "{\"id\": \"%s\", \"instance_type\": \"%s\", \"zone\": \"%s\", \"total\": %d, "
             "\"state\": \"%s\", \"type\": \"%s\", \"start\": \"2026-01-01T00:00:00Z\", "
             "\"end\": \"2099-01-01T00:00:00Z\"}",
             id, type, zone, total, state, block ? "capacity-block" : "default");
}

/* One value of the fake's stats, by a python expression over them
 * (`s`), printed: its first line into out. */
static void fake_stat(const char *expr, char *out, size_t size)
{
    char cmd[1024];
    FILE *p;

    snprintf(cmd, sizeof(cmd),
             "curl -sf %s/__fake/stats | python3 -c 'import json,sys; s=json.load(sys.stdin); "
             "print(%s)'", fake_url, expr);
    p = popen(cmd, "r");
    assert_non_null(p);
    out[0] = '\0';
    if (!fgets(out, (int)size, p))
        out[0] = '\0';
    out[strcspn(out, "\n")] = '\0';
    pclose(p);
}

static int run_into(const char *id)
{
    char expr[128], out[64];

    snprintf(expr, sizeof(expr), "s[\"run_into\"].get(\"%s\", 0)", id);
    fake_stat(expr, out, sizeof(out));
    return atoi(out);
}

static void assert_no_violation(void)
{
    char out[4096];

    fake_stat("len(s[\"violations\"]) and s[\"violations\"] or 0", out, sizeof(out));
    if (strcmp(out, "0") != 0)
        fail_msg("the fake found requests or answers off botocore's model: %s", out);
}

/* ---- loop helpers ------------------------------------------------------- */

struct ctx {
    uv_loop_t loop;
    uv_timer_t watchdog;
    bool expired;
    struct tm_config cfg;
    struct tm_provider *p;
    int count;
};

struct result {
    int status;
    struct tm_instance inst;
    char reason[512];
    struct ctx *c;
};

static void on_watchdog(uv_timer_t *t)
{
    struct ctx *c = t->data;

    c->expired = true;
    uv_stop(&c->loop);
}

static void wake(struct ctx *c)
{
    c->count++;
    uv_stop(&c->loop);
}

static void wait_for(struct ctx *c, int want)
{
    uv_timer_start(&c->watchdog, on_watchdog, 90000, 0);
    while (c->count < want && !c->expired)
        uv_run(&c->loop, UV_RUN_DEFAULT);
    uv_timer_stop(&c->watchdog);
    assert_false(c->expired);
}

static const char yaml_fmt[] =
    "database:\n  url: \"postgresql://x@localhost/x\"\n"
    "cluster: \"%s\"\n"
    "providers:\n"
    "  - name: aws1\n    kind: aws\n    region: us-east-1\n    endpoint: \"%s\"\n"
    "    credentials:\n      source: env\n"
    "pools:\n"
    "  - name: res\n    provider: aws1\n    zones: [us-east-1a, us-east-1b]\n"
    "    instance_types: [p4d.24xlarge]\n    gpu_model: A100\n    gpus_per_node: 8\n"
    "    capacity_type: %s\n    min_nodes: 0\n    max_nodes: 100\n"
    "    reservation_fallback: %s\n"
    "    reservations:\n      - id: %s\n%s";

/* A provider whose pool "res" names reservation id (block: a block);
 * refresh_ms 1 refreshes at every listing. */
static void ctx_open(struct ctx *c, const char *cluster, const char *id, bool block,
                     const char *capacity, bool fallback)
{
    char yaml[4096], err[512] = "";
    struct tm_aws_provider_options o = {.no_price_refresh = true, .reservation_refresh_ms = 1};

    memset(c, 0, sizeof(*c));
    assert_int_equal(uv_loop_init(&c->loop), 0);
    uv_timer_init(&c->loop, &c->watchdog);
    c->watchdog.data = c;
    snprintf(yaml, sizeof(yaml), yaml_fmt, cluster, fake_url, capacity,
             fallback ? "true" : "false", id, block ? "        block: true\n" : "");
    if (tm_config_load_string(yaml, strlen(yaml), "test.yaml", &c->cfg, err, sizeof(err)) != 0)
        fail_msg("config: %s", err);
    assert_int_equal(tm_aws_provider_create_ex(&c->loop, &c->cfg, &c->cfg.providers[0], &o, &c->p),
                     0);
}

static void on_closed(void *data) { wake(data); }

static void ctx_close(struct ctx *c)
{
    int want = c->count + 1;

    c->p->ops->close(c->p, on_closed, c);
    wait_for(c, want);
    uv_close((uv_handle_t *)&c->watchdog, NULL);
    uv_run(&c->loop, UV_RUN_DEFAULT);
    assert_int_equal(uv_loop_close(&c->loop), 0);
    tm_config_release(&c->cfg);
}

static void on_launch(int status, const struct tm_instance *inst, void *data)
{
    struct result *r = data;

    r->status = status;
    if (status == 0)
        r->inst = *inst;
    wake(r->c);
}

static void on_list(int status, const struct tm_instance *list, size_t n, void *data)
{
    struct result *r = data;

    (void)list;
    (void)n;
    r->status = status;
    wake(r->c);
}

static void on_validate(int status, const char *reason, void *data)
{
    struct result *r = data;

    r->status = status;
    snprintf(r->reason, sizeof(r->reason), "%s", reason ? reason : "");
    wake(r->c);
}

/* A launch as the controller asks it: on demand, or spot for
 * preemptible work (a spot pool's); a reservation comes first either way. */
static int launch_as(struct ctx *c, const char *cluster, int64_t node, const char *token,
                     enum tm_capacity_type capacity, struct result *r)
{
    struct tm_launch_request rq = {
        .cluster = cluster, .pool = "res", .node_id = node, .token = token,
        .instance_type = "p4d.24xlarge", .zone = "", .capacity = capacity,
    };
    int want = c->count + 1;

    r->c = c;
    assert_int_equal(c->p->ops->launch(c->p, &rq, on_launch, r), 0);
    wait_for(c, want);
    return r->status;
}

static int launch_wait(struct ctx *c, const char *cluster, int64_t node, const char *token,
                       struct result *r)
{
    return launch_as(c, cluster, node, token, TM_CAPACITY_ON_DEMAND, r);
}

static void list_wait(struct ctx *c, const char *cluster)
{
    struct result r = {.c = c};
    int want = c->count + 1;

    assert_int_equal(c->p->ops->list(c->p, cluster, on_list, &r), 0);
    wait_for(c, want);
    assert_int_equal(r.status, 0);
}

static int validate_wait(struct ctx *c, struct result *r)
{
    int want = c->count + 1;

    r->c = c;
    assert_int_equal(tm_aws_validate_pools(c->p, on_validate, r), 0);
    wait_for(c, want);
    return r->status;
}

/* List until the provider's row of id has heard EC2 say state. */
static void wait_state(struct ctx *c, const char *cluster, const char *id, const char *state)
{
    struct tm_reservation row;

    for (int i = 0; i < 200; i++) {
        list_wait(c, cluster);
        assert_int_equal(tm_aws_provider_reservation(c->p, id, &row), 0);
        if (strcmp(row.state, state) == 0)
            return;
        usleep(20000);
    }
    fail_msg("reservation %s never became %s (last %s)", id, state, row.state);
}

/* ---- tests ------------------------------------------------------------------- */

/* A launch of the pool goes into its reservation, in the reservation's
 * zone, and a second launch with the same token is the same instance. */
static void test_launch_into_reservation(void **state)
{
    const char *id = "cr-0a0000000000000a1";
    struct ctx c;
    struct result r = {0}, again = {0};
    struct tm_reservation row;

    (void)state;
    fake_reservation(id, "p4d.24xlarge", "us-east-1b", 2, "active", false);
    ctx_open(&c, "resv-into", id, false, "on_demand", true);
    assert_int_equal(validate_wait(&c, &r), 0);
    assert_int_equal(tm_aws_provider_reservation(c.p, id, &row), 0);
    assert_string_equal(row.state, "active");
    assert_int_equal(row.total, 2);
    assert_string_equal(row.zone, "us-east-1b");
    assert_int_equal(launch_wait(&c, "resv-into", 1, "resv-into-1", &r), 0);
    assert_string_equal(r.inst.zone, "us-east-1b");
    assert_int_equal(r.inst.capacity, TM_CAPACITY_ON_DEMAND);
    assert_int_equal(run_into(id), 1);
    assert_int_equal(launch_wait(&c, "resv-into", 1, "resv-into-1", &again), 0);
    assert_string_equal(again.inst.id, r.inst.id);
    assert_int_equal(run_into(id), 1);
    ctx_close(&c);
    assert_no_violation();
}

/* A Capacity Block is launched with its market type (the fake refuses a
 * block's launch without it). */
static void test_launch_into_block(void **state)
{
    const char *id = "cr-0b0000000000000b1";
    struct ctx c;
    struct result r = {0};

    (void)state;
    fake_reservation(id, "p4d.24xlarge", "us-east-1a", 1, "active", true);
    ctx_open(&c, "resv-block", id, true, "on_demand", true);
    assert_int_equal(validate_wait(&c, &r), 0);
    assert_int_equal(launch_wait(&c, "resv-block", 1, "resv-block-1", &r), 0);
    assert_int_equal(run_into(id), 1);
    assert_string_equal(r.inst.zone, "us-east-1a");
    ctx_close(&c);
    assert_no_violation();
}

/* A full reservation (the cloud's ReservationCapacityExceeded) falls over
 * to the pool's capacity_type; with reservation_fallback false the launch
 * fails for capacity instead. */
static void test_full_falls_over(void **state)
{
    const char *id = "cr-0c0000000000000c1", *id2 = "cr-0c0000000000000c2";
    struct ctx c;
    struct result r = {0};

    (void)state;
    fake_reservation(id, "p4d.24xlarge", "us-east-1a", 1, "active", false);
    ctx_open(&c, "resv-full", id, false, "spot_then_on_demand", true);
    assert_int_equal(validate_wait(&c, &r), 0);
    fake_ctl("full", "{\"id\": \"%s\"}", id);
    assert_int_equal(launch_as(&c, "resv-full", 1, "resv-full-1", TM_CAPACITY_SPOT, &r), 0);
    assert_int_equal(run_into(id), 0);
    assert_int_equal(r.inst.capacity, TM_CAPACITY_SPOT);
    ctx_close(&c);

    fake_reservation(id2, "p4d.24xlarge", "us-east-1a", 1, "active", false);
    ctx_open(&c, "resv-only", id2, false, "on_demand", false);
    assert_int_equal(validate_wait(&c, &r), 0);
    assert_int_equal(launch_wait(&c, "resv-only", 1, "resv-only-1", &r), 0);
    assert_int_equal(run_into(id2), 1);
    assert_int_equal(launch_wait(&c, "resv-only", 2, "resv-only-2", &r), TM_EQUOTA);
    assert_int_equal(run_into(id2), 1);
    ctx_close(&c);
    assert_no_violation();
}

/* A reservation cancelled in the cloud is noticed at a refresh and the
 * pool stops launching into it (it buys on demand instead). */
static void test_cancelled_noticed(void **state)
{
    const char *id = "cr-0d0000000000000d1";
    struct ctx c;
    struct result r = {0};
    struct tm_reservation row;

    (void)state;
    fake_reservation(id, "p4d.24xlarge", "us-east-1a", 4, "active", false);
    ctx_open(&c, "resv-cancel", id, false, "on_demand", true);
    assert_int_equal(validate_wait(&c, &r), 0);
    assert_int_equal(launch_wait(&c, "resv-cancel", 1, "resv-cancel-1", &r), 0);
    assert_int_equal(run_into(id), 1);
    fake_ctl("state", "{\"id\": \"%s\", \"state\": \"cancelled\"}", id);
    wait_state(&c, "resv-cancel", id, "cancelled");
    assert_int_equal(tm_aws_provider_reservation(c.p, id, &row), 0);
    assert_true(row.ended);
    {
        struct tm_provider_notice n[4];

        assert_int_equal(c.p->ops->notices(c.p, n, 4), 1);
        assert_string_equal(n[0].kind, "reservation_ended");
        assert_string_equal(n[0].pool, "res");
        assert_string_equal(n[0].subject, id);
        assert_string_equal(n[0].state, "cancelled");
        assert_int_equal(c.p->ops->notices(c.p, n, 4), 0);
    }
    assert_int_equal(launch_wait(&c, "resv-cancel", 2, "resv-cancel-2", &r), 0);
    assert_int_equal(run_into(id), 1);
    assert_int_equal(r.inst.capacity, TM_CAPACITY_ON_DEMAND);
    ctx_close(&c);
    assert_no_violation();
}

static void on_set(int status, const struct tm_instance *insts, size_t n, void *data)
{
    struct result *r = data;

    r->status = status;
    if (status == 0 && n > 0)
        r->inst = insts[n - 1];
    wake(r->c);
}

/* A gang of a pool with reservations goes member by member into them,
 * not by a fleet that would buy the market. */
static void test_gang_into_reservation(void **state)
{
    const char *id = "cr-0f0000000000000f1";
    struct ctx c;
    struct result r = {0};
    struct tm_launch_request reqs[2];
    struct tm_launch_set set = {.reqs = reqs, .n = 2, .set_token = "resv-gang-s"};
    char tok[2][TM_ID_MAX];

    (void)state;
    fake_reservation(id, "p4d.24xlarge", "us-east-1b", 3, "active", false);
    ctx_open(&c, "resv-gang", id, false, "on_demand", true);
    assert_int_equal(validate_wait(&c, &r), 0);
    for (unsigned k = 0; k < 2; k++) {
        tm_launch_member_token("resv-gang-s", k, tok[k]);
        reqs[k] = (struct tm_launch_request){
            .cluster = "resv-gang", .pool = "res", .node_id = 10 + k, .token = tok[k],
            .instance_type = "p4d.24xlarge", .zone = "", .capacity = TM_CAPACITY_ON_DEMAND,
        };
    }
    r.c = &c;
    {
        int want = c.count + 1;

        assert_int_equal(c.p->ops->launch_set(c.p, &set, on_set, &r), 0);
        wait_for(&c, want);
    }
    assert_int_equal(r.status, 0);
    assert_string_equal(r.inst.zone, "us-east-1b");
    assert_int_equal(run_into(id), 2);
    ctx_close(&c);
    assert_no_violation();
}

/* At start: a reservation of another instance type or zone than its
 * pool's, an expired block and an id EC2 does not know are refused with
 * EC2's answer. */
static void test_validate_refuses(void **state)
{
    static const struct {
        const char *id, *type, *zone, *state;
        bool block;
        const char *want;
    } cases[] = {
        {"cr-0e0000000000000e1", "p5.48xlarge", "us-east-1a", "active", false,
         "is for instance type \"p5.48xlarge\""},
        {"cr-0e0000000000000e2", "p4d.24xlarge", "us-east-1c", "active", false,
         "is in zone \"us-east-1c\""},
        {"cr-0e0000000000000e3", "p4d.24xlarge", "us-east-1a", "expired", true,
         "is expired (aws says): the block is over"},
        {"cr-0e0000000000000e4", NULL, NULL, NULL, false, "InvalidCapacityReservationId.NotFound"},
    };

    (void)state;
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        struct ctx c;
        struct result r = {0};

        if (cases[i].type)
            fake_reservation(cases[i].id, cases[i].type, cases[i].zone, 1, cases[i].state,
                             cases[i].block);
        ctx_open(&c, "resv-check", cases[i].id, cases[i].block, "on_demand", true);
        assert_int_equal(validate_wait(&c, &r), TM_EINVAL);
        if (!strstr(r.reason, cases[i].want))
            fail_msg("case %zu: reason \"%s\" lacks \"%s\"", i, r.reason, cases[i].want);
        ctx_close(&c);
    }
    assert_no_violation();
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_launch_into_reservation),
        cmocka_unit_test(test_launch_into_block),
        cmocka_unit_test(test_full_falls_over),
        cmocka_unit_test(test_cancelled_noticed),
        cmocka_unit_test(test_gang_into_reservation),
        cmocka_unit_test(test_validate_refuses),
    };

    signal(SIGPIPE, SIG_IGN);
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
