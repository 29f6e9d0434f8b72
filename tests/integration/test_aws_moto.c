/*
 * tests/integration/test_aws_moto.c: the EC2 client and the AWS provider
 * against moto 5.2.1 with SigV4 checking on.
 *
 * One moto for the whole binary (tests/lib/moto_fixture.sh: a free port,
 * an IAM user with an ec2:* policy and a key made with moto's 3 unchecked
 * requests; every later request must be correctly signed with that key),
 * and tests/lib/fault_proxy.py in front of it for throttling, 5xx, resets
 * and truncated answers on a schedule.  moto's state is shared, so each test
 * uses its own cluster name and only looks at instances tagged with it.
 * Each test runs its own loop and ends with uv_loop_close() == 0.
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
#include "providers/aws/ec2.h"

static char state_dir[1024];
static int moto_port, proxy_port;
static pid_t proxy_pid = -1;
static char access_key[512], secret_key[512];
static char moto_url[128], proxy_url[128];
static int in_call;             /* set while a provider call runs: callbacks must not */

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

    snprintf(state_dir, sizeof(state_dir), "%s/aws-moto-%d", st ? st : "/tmp", (int)getpid());
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
    snprintf(moto_url, sizeof(moto_url), "http://127.0.0.1:%d", moto_port);
    return 0;
}

static int proxy_start(void)
{
    char script[1024], port[16], line[256];
    int out[2];
    FILE *p;

    snprintf(script, sizeof(script), "%s/tests/lib/fault_proxy.py", src_dir());
    snprintf(port, sizeof(port), "%d", moto_port);
    if (pipe(out) < 0)
        return -1;
    proxy_pid = fork();
    if (proxy_pid < 0)
        return -1;
    if (proxy_pid == 0) {
        dup2(out[1], 1);
        close(out[0]);
        execlp("python3", "python3", script, port, (char *)NULL);
        _exit(127);
    }
    close(out[1]);
    p = fdopen(out[0], "r");
    if (!p)
        return -1;
    while (fgets(line, sizeof(line), p)) {
        if (sscanf(line, "FAULT_PROXY_PORT=%d", &proxy_port) == 1)
            continue;
        if (strncmp(line, "FAULT_PROXY_READY", 17) == 0)
            break;
    }
    fclose(p);
    if (proxy_port <= 0)
        return -1;
    snprintf(proxy_url, sizeof(proxy_url), "http://127.0.0.1:%d", proxy_port);
    return 0;
}

static void env_credentials(const char *secret)
{
    setenv("AWS_ACCESS_KEY_ID", access_key, 1);
    setenv("AWS_SECRET_ACCESS_KEY", secret, 1);
    unsetenv("AWS_SESSION_TOKEN");
}

static int group_setup(void **state)
{
    (void)state;
    if (moto_start() < 0 || proxy_start() < 0) {
        fprintf(stderr, "could not start moto or the fault proxy\n");
        return -1;
    }
    env_credentials(secret_key);
    setenv("AWS_REGION", "us-east-1", 1);
    setenv("AWS_SHARED_CREDENTIALS_FILE", "/nonexistent/tarmac-test", 1);
    setenv("AWS_CONFIG_FILE", "/nonexistent/tarmac-test", 1);
    unsetenv("AWS_PROFILE");
    unsetenv("AWS_ENDPOINT_URL");
    unsetenv("AWS_ENDPOINT_URL_EC2");
    setenv("TARMAC_AWS_IMAGE_ID", "ami-12c6146b", 1);
    /* Last line of defence: any log line with the secret shows as redacted. */
    tm_log_add_secret(secret_key);
    return 0;
}

static int group_teardown(void **state)
{
    char cmd[2048];

    (void)state;
    if (proxy_pid > 0) {
        kill(proxy_pid, SIGTERM);
        waitpid(proxy_pid, NULL, 0);
    }
    snprintf(cmd, sizeof(cmd), "%s/tests/lib/moto_fixture.sh stop '%s'", src_dir(), state_dir);
    if (system(cmd) != 0)
        fprintf(stderr, "could not stop moto\n");
    return 0;
}

/* ---- fault proxy control ------------------------------------------------ */

static void proxy_ctl(const char *what, const char *body)
{
    char cmd[1024];

    snprintf(cmd, sizeof(cmd), "curl -s -o /dev/null -X POST --data '%s' %s/__proxy/%s",
             body ? body : "", proxy_url, what);
    assert_int_equal(system(cmd), 0);
}

/* requests the proxy saw since the last reset; actions into buf */
static int proxy_requests(char *actions, size_t size)
{
    char cmd[512], line[4096];
    int n = -1;
    FILE *p;

    snprintf(cmd, sizeof(cmd), "curl -s %s/__proxy/stats", proxy_url);
    p = popen(cmd, "r");
    assert_non_null(p);
    if (fgets(line, sizeof(line), p)) {
        char *a = strstr(line, "actions=");

        sscanf(line, "requests=%d", &n);
        if (actions && a)
            snprintf(actions, size, "%s", a + 8);
        if (actions)
            actions[strcspn(actions, "\n")] = '\0';
    }
    pclose(p);
    return n;
}

/* ---- loop helpers ------------------------------------------------------- */

struct ctx {
    uv_loop_t loop;
    uv_timer_t watchdog;
    bool expired;
    struct tm_config cfg;
    struct tm_provider *p;
    int count;                    /* callbacks so far */
};

struct result {
    int status;
    struct tm_instance inst;
    struct tm_instance *list;
    size_t n;
    char reason[512];
    struct tm_ec2_reply reply;    /* copied scalars of a raw ec2 reply */
    char ids[4][TM_ID_MAX];
    size_t nids;
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
    assert_int_equal(in_call, 0);
    c->count++;
    uv_stop(&c->loop);
}

/* Run the loop until count reaches want (callbacks call uv_stop). */
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
    "  - name: od\n    provider: aws1\n    zones: [us-east-1a, us-east-1b]\n"
    "    instance_types: [p4d.24xlarge]\n    gpu_model: A100\n    gpus_per_node: 8\n"
    "    capacity_type: on_demand\n    min_nodes: 0\n    max_nodes: 100\n"
    "  - name: spot\n    provider: aws1\n    zones: [us-east-1a, us-east-1b, us-east-1c]\n"
    "    instance_types: [p4d.24xlarge]\n    gpu_model: A100\n    gpus_per_node: 8\n"
    "    capacity_type: spot\n    min_nodes: 0\n    max_nodes: 100\n"
    "%s";

static void ctx_open(struct ctx *c, const char *cluster, const char *endpoint,
                     const char *extra_pools, const struct tm_aws_provider_options *opts)
{
    char yaml[4096], err[512] = "";

    memset(c, 0, sizeof(*c));
    assert_int_equal(uv_loop_init(&c->loop), 0);
    uv_timer_init(&c->loop, &c->watchdog);
    c->watchdog.data = c;
    snprintf(yaml, sizeof(yaml), yaml_fmt, cluster, endpoint, extra_pools ? extra_pools : "");
    if (tm_config_load_string(yaml, strlen(yaml), "test.yaml", &c->cfg, err, sizeof(err)) != 0)
        fail_msg("config: %s", err);
    in_call = 1;
    assert_int_equal(tm_aws_provider_create_ex(&c->loop, &c->cfg, &c->cfg.providers[0], opts,
                                               &c->p), 0);
    in_call = 0;
}

static void on_closed(void *data) { wake(data); }

static void ctx_close(struct ctx *c)
{
    int want = c->count + 1;

    in_call = 1;
    c->p->ops->close(c->p, on_closed, c);
    in_call = 0;
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
    if (status == 0) {
        assert_non_null(inst);
        r->inst = *inst;
    }
    wake(r->c);
}

static void on_done(int status, void *data)
{
    struct result *r = data;

    r->status = status;
    wake(r->c);
}

static void on_list(int status, const struct tm_instance *list, size_t n, void *data)
{
    struct result *r = data;

    r->status = status;
    free(r->list);
    r->list = NULL;
    r->n = 0;
    if (status == 0 && n > 0) {
        r->list = malloc(n * sizeof(*list));
        assert_non_null(r->list);
        memcpy(r->list, list, n * sizeof(*list));
        r->n = n;
    }
    wake(r->c);
}

static void on_validate(int status, const char *reason, void *data)
{
    struct result *r = data;

    r->status = status;
    snprintf(r->reason, sizeof(r->reason), "%s", reason ? reason : "");
    wake(r->c);
}

static void on_ec2(int status, const struct tm_ec2_reply *reply, void *data)
{
    struct result *r = data;

    r->status = status;
    memset(&r->reply, 0, sizeof(r->reply));
    r->reply.ntypes = reply->ntypes;
    r->reply.nprices = reply->nprices;
    r->reply.nstatuses = reply->nstatuses;
    r->reply.ninstances = reply->ninstances;
    r->reply.nfleet_instances = reply->nfleet_instances;
    r->reply.attempts = reply->attempts;
    r->reply.returned_true = reply->returned_true;
    r->reply.http_status = reply->http_status;
    snprintf(r->reply.error_code, sizeof(r->reply.error_code), "%s", reply->error_code);
    snprintf(r->reply.error_message, sizeof(r->reply.error_message), "%s",
             reply->error_message);
    r->nids = 0;
    for (size_t i = 0; i < reply->nfleet_instances && r->nids < 4; i++)
        snprintf(r->ids[r->nids++], TM_ID_MAX, "%s", reply->fleet_instances[i].id);
    for (size_t i = 0; i < reply->ninstances && r->nids < 4; i++)
        snprintf(r->ids[r->nids++], TM_ID_MAX, "%s", reply->instances[i].inst.id);
    if (reply->ntypes > 0) {
        r->inst.node_id = reply->types[0].gpus;
        snprintf(r->inst.pool, sizeof(r->inst.pool), "%s", reply->types[0].gpu_model);
        snprintf(r->inst.instance_type, sizeof(r->inst.instance_type), "%s",
                 reply->types[0].name);
    }
    wake(r->c);
}

static struct tm_launch_request lreq(const char *cluster, const char *pool, int64_t node,
                                     const char *token, const char *zone,
                                     enum tm_capacity_type cap)
{
    struct tm_launch_request r = {
        .cluster = cluster, .pool = pool, .node_id = node, .token = token,
        .instance_type = "p4d.24xlarge", .zone = zone, .capacity = cap,
    };
    return r;
}

static int launch_wait(struct ctx *c, const struct tm_launch_request *rq, struct result *r)
{
    int want = c->count + 1;
    int s;

    r->c = c;
    in_call = 1;
    s = c->p->ops->launch(c->p, rq, on_launch, r);
    in_call = 0;
    assert_int_equal(s, 0);
    wait_for(c, want);
    return r->status;
}

static int list_wait(struct ctx *c, const char *cluster, struct result *r)
{
    int want = c->count + 1;
    int s;

    r->c = c;
    in_call = 1;
    s = c->p->ops->list(c->p, cluster, on_list, r);
    in_call = 0;
    assert_int_equal(s, 0);
    wait_for(c, want);
    return r->status;
}

static int terminate_wait(struct ctx *c, const char *id, struct result *r)
{
    int want = c->count + 1;
    int s;

    r->c = c;
    in_call = 1;
    s = c->p->ops->terminate(c->p, id, on_done, r);
    in_call = 0;
    assert_int_equal(s, 0);
    wait_for(c, want);
    return r->status;
}

static int ec2_wait(struct ctx *c, enum tm_ec2_action a, char *body, unsigned flags,
                    struct result *r)
{
    int want = c->count + 1;
    int s;

    r->c = c;
    in_call = 1;
    s = tm_ec2_call(tm_aws_provider_ec2(c->p), a, body, flags, on_ec2, r);
    in_call = 0;
    assert_int_equal(s, 0);
    wait_for(c, want);
    return r->status;
}

static size_t count_token(const struct result *r, const char *token)
{
    size_t n = 0;

    for (size_t i = 0; i < r->n; i++)
        if (strcmp(r->list[i].token, token) == 0)
            n++;
    return n;
}

static const struct tm_instance *find_id(const struct result *r, const char *id)
{
    for (size_t i = 0; i < r->n; i++)
        if (strcmp(r->list[i].id, id) == 0)
            return &r->list[i];
    return NULL;
}

/* ---- tests -------------------------------------------------------------- */

/* A correctly signed request is accepted; a corrupted signature is refused
 * with AuthFailure, surfaced as TM_EAUTH, and then the gate keeps further
 * calls from reaching AWS at all. */
static void test_signature(void **state)
{
    struct tm_aws_provider_options bad = {.test_corrupt_signature = true,
                                          .no_price_refresh = true, .auth_cooldown_ms = 400};
    struct tm_ec2_stats st;
    struct result r = {0};
    struct ctx c;

    (void)state;
    ctx_open(&c, "t-sig-ok", moto_url, NULL, NULL);
    assert_int_equal(list_wait(&c, "t-sig-ok", &r), 0);
    assert_int_equal(r.n, 0);
    ctx_close(&c);

    ctx_open(&c, "t-sig-bad", moto_url, NULL, &bad);
    assert_int_equal(list_wait(&c, "t-sig-bad", &r), TM_EAUTH);
    assert_true(tm_ec2_auth_blocked(tm_aws_provider_ec2(c.p)));
    assert_int_equal(list_wait(&c, "t-sig-bad", &r), TM_EAUTH);
    tm_ec2_get_stats(tm_aws_provider_ec2(c.p), &st);
    assert_int_equal(st.requests, 1); /* the second call never left */
    assert_int_equal(st.auth_refusals, 1);
    /* After the cool-down one call probes AWS again (and is refused again). */
    usleep(500 * 1000);
    uv_update_time(&c.loop);
    assert_int_equal(list_wait(&c, "t-sig-bad", &r), TM_EAUTH);
    assert_int_equal(list_wait(&c, "t-sig-bad", &r), TM_EAUTH);
    tm_ec2_get_stats(tm_aws_provider_ec2(c.p), &st);
    assert_int_equal(st.requests, 2);
    assert_int_equal(st.auth_refusals, 2);
    ctx_close(&c);

    /* A wrong secret: the same answer, and raw AuthFailure through ec2. */
    env_credentials("wrong-secret-wrong-secret");
    ctx_open(&c, "t-sig-wrong", moto_url, NULL, NULL);
    {
        char *body = NULL;

        assert_int_equal(tm_ec2_build_describe_instances(NULL, 0, NULL, 0, 0, NULL, &body), 0);
        assert_int_equal(ec2_wait(&c, TM_EC2_DESCRIBE_INSTANCES, body, 0, &r), TM_EAUTH);
        assert_string_equal(r.reply.error_code, "AuthFailure");
        assert_int_equal(r.reply.http_status, 401);
    }
    ctx_close(&c);
    env_credentials(secret_key);
    free(r.list);
}

static void test_launch_list_terminate(void **state)
{
    const char *cl = "t-launch";
    struct result od = {0}, sp = {0}, fl = {0}, l = {0}, t = {0};
    struct tm_launch_request rq;
    const struct tm_instance *x;
    struct ctx c;

    (void)state;
    ctx_open(&c, cl, moto_url, NULL, NULL);
    rq = lreq(cl, "od", 11, "tok-od-11", "us-east-1b", TM_CAPACITY_ON_DEMAND);
    assert_int_equal(launch_wait(&c, &rq, &od), 0);
    assert_string_equal(od.inst.instance_type, "p4d.24xlarge");
    assert_string_equal(od.inst.zone, "us-east-1b");
    assert_int_equal(od.inst.capacity, TM_CAPACITY_ON_DEMAND);
    assert_string_equal(od.inst.token, "tok-od-11");
    assert_string_equal(od.inst.pool, "od");
    assert_int_equal(od.inst.node_id, 11);

    /* spot in one zone: RunInstances with the spot market */
    rq = lreq(cl, "spot", 12, "tok-spot-12", "us-east-1a", TM_CAPACITY_SPOT);
    assert_int_equal(launch_wait(&c, &rq, &sp), 0);
    assert_int_equal(sp.inst.capacity, TM_CAPACITY_SPOT);
    assert_string_equal(sp.inst.zone, "us-east-1a");

    /* spot, any zone of the pool: CreateFleet instant across its 3 zones */
    rq = lreq(cl, "spot", 13, "tok-spot-13", "", TM_CAPACITY_SPOT);
    assert_int_equal(launch_wait(&c, &rq, &fl), 0);
    assert_int_equal(fl.inst.capacity, TM_CAPACITY_SPOT);
    assert_string_equal(fl.inst.token, "tok-spot-13");
    assert_int_equal(fl.inst.node_id, 13);

    assert_int_equal(list_wait(&c, cl, &l), 0);
    assert_int_equal(l.n, 3);
    x = find_id(&l, sp.inst.id);
    assert_non_null(x);
    assert_int_equal(x->capacity, TM_CAPACITY_SPOT);
    assert_string_equal(x->pool, "spot");
    assert_string_equal(x->token, "tok-spot-12");
    x = find_id(&l, fl.inst.id);
    assert_non_null(x);
    assert_int_equal(x->capacity, TM_CAPACITY_SPOT);
    x = find_id(&l, od.inst.id);
    assert_non_null(x);
    assert_int_equal(x->capacity, TM_CAPACITY_ON_DEMAND);
    assert_false(x->interrupted);

    assert_int_equal(terminate_wait(&c, od.inst.id, &t), 0);
    assert_int_equal(list_wait(&c, cl, &l), 0);
    x = find_id(&l, od.inst.id);
    assert_non_null(x);
    assert_true(x->state == TM_INSTANCE_STOPPING || x->state == TM_INSTANCE_TERMINATED);
    assert_int_equal(terminate_wait(&c, "i-0123456789abcdef0", &t), TM_ENOTFOUND);
    ctx_close(&c);
    free(l.list);
}

/* More than one page: moto pages by reservation, each launch is one. */
static void test_list_paging(void **state)
{
    const char *cl = "t-paging";
    struct tm_aws_provider_options o = {.list_page_size = 5};
    struct result r = {0}, l = {0};
    struct tm_ec2_stats before, after;
    struct ctx c;
    char token[32];

    (void)state;
    ctx_open(&c, cl, moto_url, NULL, &o);
    for (int i = 0; i < 12; i++) {
        struct tm_launch_request rq;

        snprintf(token, sizeof(token), "tok-page-%d", i);
        rq = lreq(cl, "od", 100 + i, token, "us-east-1a", TM_CAPACITY_ON_DEMAND);
        assert_int_equal(launch_wait(&c, &rq, &r), 0);
    }
    tm_ec2_get_stats(tm_aws_provider_ec2(c.p), &before);
    assert_int_equal(list_wait(&c, cl, &l), 0);
    tm_ec2_get_stats(tm_aws_provider_ec2(c.p), &after);
    assert_int_equal(l.n, 12);
    for (int i = 0; i < 12; i++) {
        snprintf(token, sizeof(token), "tok-page-%d", i);
        assert_int_equal(count_token(&l, token), 1);
    }
    /* 3 pages of DescribeInstances (+1 background spot price refresh) */
    assert_true(after.requests - before.requests >= 3);
    assert_true(after.requests - before.requests <= 4);
    printf("paging: 12 instances, page size 5, %llu requests\n",
           (unsigned long long)(after.requests - before.requests));
    ctx_close(&c);
    free(l.list);
}

/* moto ignores ClientToken: the tag check still makes one instance. */
static void test_idempotent(void **state)
{
    const char *cl = "t-idem";
    struct result a = {0}, b = {0}, l = {0};
    struct tm_launch_request rq;
    struct ctx c;

    (void)state;
    ctx_open(&c, cl, moto_url, NULL, NULL);
    rq = lreq(cl, "od", 7, "tok-idem-7", "us-east-1a", TM_CAPACITY_ON_DEMAND);
    assert_int_equal(launch_wait(&c, &rq, &a), 0);
    assert_int_equal(launch_wait(&c, &rq, &b), 0);
    assert_string_equal(a.inst.id, b.inst.id);
    /* the same through CreateFleet */
    rq = lreq(cl, "spot", 8, "tok-idem-8", "", TM_CAPACITY_SPOT);
    assert_int_equal(launch_wait(&c, &rq, &a), 0);
    assert_int_equal(launch_wait(&c, &rq, &b), 0);
    assert_string_equal(a.inst.id, b.inst.id);
    assert_int_equal(list_wait(&c, cl, &l), 0);
    assert_int_equal(l.n, 2);
    assert_int_equal(count_token(&l, "tok-idem-7"), 1);
    assert_int_equal(count_token(&l, "tok-idem-8"), 1);
    ctx_close(&c);
    free(l.list);
}

static void test_instance_types_and_pools(void **state)
{
    static const char bad_model[] =
        "  - name: h100\n    provider: aws1\n    zones: [us-east-1a]\n"
        "    instance_types: [p4d.24xlarge]\n    gpu_model: H100\n    gpus_per_node: 8\n"
        "    capacity_type: on_demand\n    min_nodes: 0\n    max_nodes: 1\n";
    static const char bad_type[] =
        "  - name: bogus\n    provider: aws1\n    zones: [us-east-1a]\n"
        "    instance_types: [p99.bogus]\n    gpu_model: A100\n    gpus_per_node: 8\n"
        "    capacity_type: on_demand\n    min_nodes: 0\n    max_nodes: 1\n";
    static const char good[] =
        "  - name: h100\n    provider: aws1\n    zones: [us-east-1a]\n"
        "    instance_types: [p5.48xlarge]\n    gpu_model: h100\n    gpus_per_node: 8\n"
        "    capacity_type: on_demand\n    min_nodes: 0\n    max_nodes: 1\n";
    const char *types[] = {"p4d.24xlarge"};
    struct result r = {0};
    struct ctx c;
    char *body = NULL;
    int want;

    (void)state;
    ctx_open(&c, "t-types", moto_url, good, NULL);
    assert_int_equal(tm_ec2_build_describe_instance_types(types, 1, 0, NULL, &body), 0);
    assert_int_equal(ec2_wait(&c, TM_EC2_DESCRIBE_INSTANCE_TYPES, body, 0, &r), 0);
    assert_int_equal(r.reply.ntypes, 1);
    assert_int_equal(r.inst.node_id, 8);          /* gpus */
    assert_string_equal(r.inst.pool, "A100");     /* model */
    want = c.count + 1;
    assert_int_equal(tm_aws_validate_pools(c.p, on_validate, &r), 0);
    r.c = &c;
    wait_for(&c, want);
    assert_int_equal(r.status, 0);
    ctx_close(&c);

    ctx_open(&c, "t-types", moto_url, bad_model, NULL);
    want = c.count + 1;
    r.c = &c;
    assert_int_equal(tm_aws_validate_pools(c.p, on_validate, &r), 0);
    wait_for(&c, want);
    assert_int_equal(r.status, TM_EINVAL);
    assert_non_null(strstr(r.reason, "pool \"h100\""));
    assert_non_null(strstr(r.reason, "A100"));
    printf("refused: %s\n", r.reason);
    ctx_close(&c);

    ctx_open(&c, "t-types", moto_url, bad_type, NULL);
    want = c.count + 1;
    r.c = &c;
    assert_int_equal(tm_aws_validate_pools(c.p, on_validate, &r), 0);
    wait_for(&c, want);
    assert_int_equal(r.status, TM_EINVAL);
    assert_non_null(strstr(r.reason, "pool \"bogus\""));
    assert_non_null(strstr(r.reason, "p99.bogus"));
    printf("refused: %s\n", r.reason);
    ctx_close(&c);
}

/* The remaining actions, raw, against moto. */
static void test_other_actions(void **state)
{
    const char *types[] = {"p4d.24xlarge", "p5.48xlarge"};
    const struct tm_ec2_fleet_override ov[] = {{"p4d.24xlarge", "us-east-1a"},
                                               {"p5.48xlarge", "us-east-1b"}};
    const struct tm_ec2_tag tags[] = {{TM_EC2_TAG_CLUSTER, "t-raw"}};
    struct tm_ec2_fleet_params fp = {
        .launch_template = "tarmac-t-raw-direct", .client_token = "fleet-raw-1", .spot = true,
        .target = 1, .overrides = ov, .noverrides = 2, .tags = tags, .ntags = 1,
    };
    struct result r = {0};
    struct ctx c;
    char *body = NULL;
    char id[TM_ID_MAX];
    const char *ids[1] = {id};

    (void)state;
    ctx_open(&c, "t-raw", moto_url, NULL, NULL);
    assert_int_equal(tm_ec2_build_create_launch_template(fp.launch_template, "ami-12c6146b",
                                                         &body), 0);
    assert_int_equal(ec2_wait(&c, TM_EC2_CREATE_LAUNCH_TEMPLATE, body, 0, &r), 0);
    assert_int_equal(tm_ec2_build_create_fleet(&fp, &body), 0);
    assert_int_equal(ec2_wait(&c, TM_EC2_CREATE_FLEET, body, 0, &r), 0);
    assert_int_equal(r.reply.nfleet_instances, 1);
    snprintf(id, sizeof(id), "%s", r.ids[0]);

    assert_int_equal(tm_ec2_build_create_tags(ids, 1, tags, 1, &body), 0);
    assert_int_equal(ec2_wait(&c, TM_EC2_CREATE_TAGS, body, 0, &r), 0);
    assert_true(r.reply.returned_true);

    assert_int_equal(tm_ec2_build_describe_instance_status(ids, 1, true, 0, NULL, &body), 0);
    assert_int_equal(ec2_wait(&c, TM_EC2_DESCRIBE_INSTANCE_STATUS, body, 0, &r), 0);
    assert_int_equal(r.reply.nstatuses, 1);

    assert_int_equal(tm_ec2_build_describe_spot_price_history(types, 2, NULL, "Linux/UNIX", 0,
                                                              NULL, &body), 0);
    assert_int_equal(ec2_wait(&c, TM_EC2_DESCRIBE_SPOT_PRICE_HISTORY, body, 0, &r), 0);
    assert_true(r.reply.nprices >= 2);

    assert_int_equal(tm_ec2_build_terminate_instances(ids, 1, &body), 0);
    assert_int_equal(ec2_wait(&c, TM_EC2_TERMINATE_INSTANCES, body, 0, &r), 0);
    ctx_close(&c);
}

static uint64_t now_ms(void) { return uv_hrtime() / 1000000; }

/* Throttling and 5xx through the proxy: retried, then success; and the
 * budget is a ceiling on both attempts and total backoff. */
static void test_retry_budget(void **state)
{
    struct tm_aws_provider_options o = {
        .retry = {.max_attempts = 4, .max_total_delay_ms = 1500, .base_delay_ms = 50,
                  .max_delay_ms = 1000},
        .seed = 7, .no_price_refresh = true,
    };
    struct tm_aws_provider_options tight = {
        .retry = {.max_attempts = 50, .max_total_delay_ms = 300, .base_delay_ms = 100,
                  .max_delay_ms = 1000},
        .seed = 7, .no_price_refresh = true,
    };
    struct tm_ec2_stats st;
    struct result r = {0};
    struct ctx c;
    char actions[4096];
    uint64_t t0, el;
    int n;

    (void)state;
    ctx_open(&c, "t-retry", proxy_url, NULL, &o);
    proxy_ctl("reset", NULL);
    proxy_ctl("schedule", "throttle,503,500html");
    assert_int_equal(list_wait(&c, "t-retry", &r), 0);
    n = proxy_requests(actions, sizeof(actions));
    /* 3 faults + 1 success */
    assert_int_equal(n, 4);
    printf("retry: throttle,503,500html then ok: %d requests (%s)\n", n, actions);

    /* A reset on a read is retried too. */
    proxy_ctl("reset", NULL);
    proxy_ctl("schedule", "reset");
    assert_int_equal(list_wait(&c, "t-retry", &r), 0);
    assert_int_equal(proxy_requests(NULL, 0), 2);

    /* Endless throttling: exactly max_attempts requests, then TM_ETHROTTLED. */
    proxy_ctl("reset", NULL);
    proxy_ctl("schedule", "throttle,throttle,throttle,throttle,throttle,throttle,throttle,"
                          "throttle,throttle,throttle");
    tm_ec2_get_stats(tm_aws_provider_ec2(c.p), &st);
    t0 = now_ms();
    assert_int_equal(list_wait(&c, "t-retry", &r), TM_ETHROTTLED);
    el = now_ms() - t0;
    n = proxy_requests(NULL, 0);
    assert_int_equal(n, 4);
    printf("retry budget 4 attempts/1500 ms: %d requests, %llu ms\n", n,
           (unsigned long long)el);
    assert_true(el < 1500 + 1000);

    /* A truncated answer is a bad reply naming the action, not retried. */
    proxy_ctl("reset", NULL);
    proxy_ctl("schedule", "truncate");
    assert_int_equal(list_wait(&c, "t-retry", &r), TM_EBADREPLY);
    assert_int_equal(proxy_requests(NULL, 0), 1);
    ctx_close(&c);

    /* The delay budget binds before the attempt budget. */
    ctx_open(&c, "t-retry", proxy_url, NULL, &tight);
    proxy_ctl("reset", NULL);
    {
        char sched[2048] = "";

        for (int i = 0; i < 60; i++)
            strcat(sched, i ? ",503" : "503");
        proxy_ctl("schedule", sched);
    }
    t0 = now_ms();
    assert_int_equal(list_wait(&c, "t-retry", &r), TM_EUNAVAIL);
    el = now_ms() - t0;
    tm_ec2_get_stats(tm_aws_provider_ec2(c.p), &st);
    n = proxy_requests(NULL, 0);
    printf("retry budget 50 attempts/300 ms: %d requests, backoff %llu ms, elapsed %llu ms\n", n,
           (unsigned long long)st.delay_ms, (unsigned long long)el);
    assert_true(st.delay_ms <= 300);
    assert_true(n >= 2 && n <= 50);
    assert_true(el < 300 + 1500);
    proxy_ctl("reset", NULL);
    ctx_close(&c);
}

/* RunInstances carried out but its answer lost: the provider finds the
 * instance by tag instead of launching a second one. */
static void test_launch_reply_lost(void **state)
{
    struct tm_aws_provider_options o = {.seed = 3, .no_price_refresh = true};
    const char *cl = "t-lost";
    struct result r = {0}, l = {0};
    struct tm_launch_request rq;
    char actions[4096];
    struct ctx c;

    (void)state;
    ctx_open(&c, cl, proxy_url, NULL, &o);
    proxy_ctl("reset", NULL);
    proxy_ctl("schedule", "pass,reset_after");
    rq = lreq(cl, "od", 21, "tok-lost-21", "us-east-1a", TM_CAPACITY_ON_DEMAND);
    assert_int_equal(launch_wait(&c, &rq, &r), 0);
    proxy_requests(actions, sizeof(actions));
    printf("reply lost: %s\n", actions);
    assert_non_null(strstr(actions, "DescribeInstances,RunInstances,DescribeInstances"));
    assert_null(strstr(actions, "RunInstances,DescribeInstances,RunInstances"));
    assert_int_equal(list_wait(&c, cl, &l), 0);
    assert_int_equal(count_token(&l, "tok-lost-21"), 1);
    assert_string_equal(l.list[0].id, r.inst.id);

    /* The same, with the request never reaching moto: launched once. */
    proxy_ctl("reset", NULL);
    proxy_ctl("schedule", "pass,reset");
    rq = lreq(cl, "od", 22, "tok-lost-22", "us-east-1a", TM_CAPACITY_ON_DEMAND);
    assert_int_equal(launch_wait(&c, &rq, &r), 0);
    assert_int_equal(list_wait(&c, cl, &l), 0);
    assert_int_equal(count_token(&l, "tok-lost-22"), 1);
    proxy_ctl("reset", NULL);
    ctx_close(&c);
    free(l.list);
}

/* InsufficientInstanceCapacity: remembered, next zone tried, later
 * launches skip the short zone. */
static void test_capacity_fallback(void **state)
{
    const char *cl = "t-cap";
    struct tm_aws_provider_options o = {.no_price_refresh = true};
    struct result r = {0};
    struct tm_launch_request rq;
    char actions[4096];
    struct ctx c;

    (void)state;
    ctx_open(&c, cl, proxy_url, NULL, &o);
    proxy_ctl("reset", NULL);
    proxy_ctl("schedule", "pass,capacity");
    rq = lreq(cl, "od", 31, "tok-cap-31", "", TM_CAPACITY_ON_DEMAND);
    assert_int_equal(launch_wait(&c, &rq, &r), 0);
    assert_string_equal(r.inst.zone, "us-east-1b");
    assert_true(tm_aws_provider_is_short(c.p, "p4d.24xlarge", "us-east-1a",
                                         TM_CAPACITY_ON_DEMAND));
    assert_false(tm_aws_provider_is_short(c.p, "p4d.24xlarge", "us-east-1a", TM_CAPACITY_SPOT));
    proxy_requests(actions, sizeof(actions));
    assert_string_equal(actions, "DescribeInstances,RunInstances,RunInstances");

    /* Next launch goes straight to the zone that has capacity. */
    proxy_ctl("reset", NULL);
    rq = lreq(cl, "od", 32, "tok-cap-32", "", TM_CAPACITY_ON_DEMAND);
    assert_int_equal(launch_wait(&c, &rq, &r), 0);
    assert_string_equal(r.inst.zone, "us-east-1b");
    proxy_requests(actions, sizeof(actions));
    assert_string_equal(actions, "DescribeInstances,RunInstances");

    /* Both zones short: TM_EQUOTA without calling RunInstances. */
    tm_aws_provider_note_short(c.p, "p4d.24xlarge", "us-east-1b", TM_CAPACITY_ON_DEMAND);
    proxy_ctl("reset", NULL);
    rq = lreq(cl, "od", 33, "tok-cap-33", "", TM_CAPACITY_ON_DEMAND);
    assert_int_equal(launch_wait(&c, &rq, &r), TM_EQUOTA);
    proxy_requests(actions, sizeof(actions));
    assert_string_equal(actions, "DescribeInstances");

    /* spot_then_on_demand: spot in us-east-1c is short, so on-demand there. */
    proxy_ctl("reset", NULL);
    proxy_ctl("schedule", "pass,capacity");
    rq = lreq(cl, "spot", 34, "tok-cap-34", "us-east-1c", TM_CAPACITY_SPOT_THEN_ON_DEMAND);
    assert_int_equal(launch_wait(&c, &rq, &r), 0);
    assert_int_equal(r.inst.capacity, TM_CAPACITY_ON_DEMAND);
    assert_true(tm_aws_provider_is_short(c.p, "p4d.24xlarge", "us-east-1c", TM_CAPACITY_SPOT));
    proxy_ctl("reset", NULL);
    ctx_close(&c);
}

/* Closing with calls in flight: each gets TM_ECANCELED, from the loop. */
static void test_close_cancels(void **state)
{
    struct result r = {0};
    struct ctx c;
    int want;

    (void)state;
    ctx_open(&c, "t-close", moto_url, NULL, NULL);
    r.c = &c;
    in_call = 1;
    assert_int_equal(c.p->ops->list(c.p, "t-close", on_list, &r), 0);
    in_call = 0;
    want = c.count + 2; /* the list and the close */
    in_call = 1;
    c.p->ops->close(c.p, on_closed, &c);
    in_call = 0;
    wait_for(&c, want);
    assert_int_equal(r.status, TM_ECANCELED);
    uv_close((uv_handle_t *)&c.watchdog, NULL);
    uv_run(&c.loop, UV_RUN_DEFAULT);
    assert_int_equal(uv_loop_close(&c.loop), 0);
    tm_config_release(&c.cfg);
}

/* `tarmac check aws`: 0 on success, 3 when authentication fails, 1 else. */
static void test_check_main(void **state)
{
    char *ok[] = {"check", "aws", "--region", "us-east-1", "--instance-types",
                  "p4d.24xlarge,g5.xlarge", "--endpoint", moto_url, NULL};
    char *unknown[] = {"check", "aws", "--instance-types", "p99.bogus", NULL};
    char *bad_usage[] = {"check", "aws", "--bogus", NULL};

    (void)state;
    assert_int_equal(tm_aws_check_main(8, ok), 0);
    /* the endpoint from the environment, as the AWS tools do */
    setenv("AWS_ENDPOINT_URL_EC2", moto_url, 1);
    assert_int_equal(tm_aws_check_main(4, unknown), 1);
    env_credentials("wrong-secret-wrong-secret");
    assert_int_equal(tm_aws_check_main(8, ok), 3);
    env_credentials(secret_key);
    unsetenv("AWS_ENDPOINT_URL_EC2");
    assert_int_equal(tm_aws_check_main(3, bad_usage), 2);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_signature),
        cmocka_unit_test(test_launch_list_terminate),
        cmocka_unit_test(test_list_paging),
        cmocka_unit_test(test_idempotent),
        cmocka_unit_test(test_instance_types_and_pools),
        cmocka_unit_test(test_other_actions),
        cmocka_unit_test(test_retry_budget),
        cmocka_unit_test(test_launch_reply_lost),
        cmocka_unit_test(test_capacity_fallback),
        cmocka_unit_test(test_close_cancels),
        cmocka_unit_test(test_check_main),
    };

    signal(SIGPIPE, SIG_IGN);
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
