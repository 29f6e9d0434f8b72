/*
 * tests/unit/providers/local/test_local_provider.c: the local provider
 * (providers/local/) on a real loop with real processes, the bootstrap
 * being a small shell script instead of the agent: launch writes the
 * folder and starts the script with the documented environment (and none
 * of the controller's secrets), a second launch with the same token starts
 * nothing, listings come from the state folder (a new provider on the same
 * folder lists the same nodes), terminate stops the script and its
 * children, an on-demand interruption is listed with its notice and ends
 * as interrupted at its deadline; bad requests are refused with the
 * documented codes.  Also the config keys of kind local, each error naming
 * its key.
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
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "core/config.h"
#include "core/err.h"
#include "core/file.h"
#include "providers/local/local_config.h"
#include "providers/local/local_provider.h"
#include "providers/local/local_state.h"

static int64_t fake_now = 1700000000000;

static int64_t clock_now(void *c)
{
    (void)c;
    return fake_now;
}

static int64_t wall(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

struct result {
    int calls;
    int status;
    struct tm_instance inst;
    struct tm_instance list[8];
    size_t n;
};

static void on_launch(int status, const struct tm_instance *inst, void *data)
{
    struct result *r = data;
    r->calls++;
    r->status = status;
    if (inst)
        r->inst = *inst;
}

static void on_done(int status, void *data)
{
    struct result *r = data;
    r->calls++;
    r->status = status;
}

static void on_list(int status, const struct tm_instance *list, size_t n, void *data)
{
    struct result *r = data;
    r->calls++;
    r->status = status;
    r->n = n < 8 ? n : 8;
    for (size_t i = 0; i < r->n; i++)
        r->list[i] = list[i];
}

static void on_closed(void *data)
{
    *(int *)data = 1;
}

static char state_dir[64];
static struct tm_config_instance_type types[2] = {
    {.name = "local.2x", .gpus = 2, .gpu_model = "A100", .cpu_milli = 4000, .memory_mib = 8192,
     .on_demand_uusd_per_hour = 2000000, .spot_uusd_per_hour = 600000},
    {.name = "local.od", .gpus = 1, .gpu_model = "A100", .cpu_milli = 2000, .memory_mib = 4096,
     .on_demand_uusd_per_hour = 1000000, .spot_uusd_per_hour = 0, .capacity = 1},
};

static struct tm_config_provider prov(void)
{
    static struct tm_config_local block = {
        .state_dir = state_dir, .metadata = "local", .gpu_util_percent = 37, .gpu_busy_util_percent = 88,
        .agent_args = "--heartbeat-period 1s",
    };
    struct tm_config_provider p = {
        .name = "local", .kind = "local", .region = "here",
        .kind_block = &block, .types = types, .ntypes = 2,
    };
    return p;
}

/* A bootstrap that records its environment, leaves a child in its
 * session, and waits. */
static const char script[] =
    "echo started\n"
    "env > env.txt\n"
    "sleep 300 &\n"
    "exec sleep 301\n";

static void on_tick(uv_timer_t *t)
{
    (void)t;
}

/* Run the loop until r has seen calls callbacks; a ticking timer keeps
 * UV_RUN_ONCE from blocking on the agents' process handles. */
static void run_until(uv_loop_t *loop, struct result *r, int calls)
{
    uv_timer_t tick;

    uv_timer_init(loop, &tick);
    uv_timer_start(&tick, on_tick, 10, 10);
    for (int i = 0; i < 500 && r->calls < calls; i++)
        uv_run(loop, UV_RUN_ONCE);
    uv_close((uv_handle_t *)&tick, NULL);
    uv_run(loop, UV_RUN_NOWAIT);
    assert_int_equal(r->calls, calls);
}

static struct result launch(uv_loop_t *loop, struct tm_provider *p, int64_t node, const char *token,
                            const char *type, enum tm_capacity_type cap, const char *boot)
{
    struct tm_launch_request req = {
        .cluster = "c1", .pool = "p1", .node_id = node, .token = token, .instance_type = type,
        .zone = "", .capacity = cap, .bootstrap = boot, .bootstrap_len = boot ? strlen(boot) : 0,
    };
    struct result r = {0};

    assert_int_equal(p->ops->launch(p, &req, on_launch, &r), 0);
    assert_int_equal(r.calls, 0); /* never inside the call */
    run_until(loop, &r, 1);
    return r;
}

static struct result list(uv_loop_t *loop, struct tm_provider *p, const char *cluster)
{
    struct result r = {0};

    assert_int_equal(p->ops->list(p, cluster, on_list, &r), 0);
    run_until(loop, &r, 1);
    assert_int_equal(r.status, 0);
    return r;
}

static void close_provider(uv_loop_t *loop, struct tm_provider *p)
{
    int closed = 0;

    p->ops->close(p, on_closed, &closed);
    uv_run(loop, UV_RUN_DEFAULT);
    assert_int_equal(closed, 1);
}

static int count_in(const char *path, const char *needle)
{
    char *text = NULL;
    size_t len;
    int n = 0;

    if (tm_file_read(path, 1 << 20, &text, &len, NULL, 0) < 0)
        return -1;
    for (const char *s = text; (s = strstr(s, needle)); s++)
        n++;
    free(text);
    return n;
}

static void node_dir(const char *id, const char *name, char *buf, size_t size)
{
    assert_int_equal(tm_local_path(state_dir, id, name, buf, size), 0);
}

static void wait_gone(const char *id)
{
    char dir[TM_LOCAL_DIR_MAX];

    node_dir(id, NULL, dir, sizeof(dir));
    for (int i = 0; i < 100 && tm_local_signal_node(dir, 0) > 0; i++)
        usleep(50000);
    assert_int_equal(tm_local_signal_node(dir, 0), 0);
}

static void test_lifecycle(void **state)
{
    uv_loop_t loop;
    struct tm_config_provider cp = prov();
    struct tm_provider *p = NULL;
    struct result r, l;
    char path[TM_LOCAL_PATH_MAX], dir[TM_LOCAL_DIR_MAX], id[TM_ID_MAX];
    struct stat st;
    int64_t price = 0;

    setenv("TARMAC_DATABASE_URL", "postgresql://u:hunter2secret@db/tarmac", 1);
    assert_int_equal(uv_loop_init(&loop), 0);
    assert_int_equal(tm_local_provider_create(&loop, &cp, clock_now, NULL, &p), 0);

    assert_int_equal(p->ops->price(p, "local.2x", "z", TM_CAPACITY_SPOT, &price), 0);
    assert_int_equal(price, 600000);
    assert_int_equal(p->ops->price(p, "local.od", "z", TM_CAPACITY_SPOT, &price), TM_ENOTFOUND);
    assert_int_equal(p->ops->price(p, "nope", "z", TM_CAPACITY_ON_DEMAND, &price), TM_ENOTFOUND);

    r = launch(&loop, p, 7, "tok-7", "local.2x", TM_CAPACITY_SPOT, script);
    assert_int_equal(r.status, 0);
    tm_local_instance_id(7, "tok-7", id, sizeof(id));
    assert_string_equal(r.inst.id, id);
    assert_int_equal(r.inst.node_id, 7);
    assert_int_equal(r.inst.state, TM_INSTANCE_RUNNING);
    assert_int_equal(r.inst.launched_ms, fake_now);

    /* The files, the mode of the secret-bearing bootstrap, the fake GPUs. */
    node_dir(id, "bootstrap.sh", path, sizeof(path));
    assert_int_equal(stat(path, &st), 0);
    assert_int_equal(st.st_mode & 0777, 0600);
    node_dir(id, "gpus.json", path, sizeof(path));
    assert_int_equal(count_in(path, "\"uuid\":\"GPU-local-7-"), 2);
    assert_int_equal(count_in(path, "\"util_percent\":37"), 2);
    assert_int_equal(count_in(path, "\"busy_util_percent\":88"), 2);
    node_dir(id, "env.txt", path, sizeof(path));
    for (int i = 0; i < 250 && count_in(path, "TARMAC_NODE_ID=7") != 1; i++)
        usleep(20000);
    node_dir(id, NULL, dir, sizeof(dir));
    assert_int_equal(count_in(path, "TARMAC_BIN=/"), 1);
    assert_int_equal(count_in(path, "TARMAC_GPU_FAKE="), 1);
    assert_int_equal(count_in(path, "/gpus.json"), 1);
    assert_int_equal(count_in(path, "TARMAC_AGENT_WORK_DIR="), 1);
    assert_int_equal(count_in(path, "TARMAC_METADATA=local"), 1);
    assert_int_equal(count_in(path, "TARMAC_METADATA_URL=file://"), 1);
    assert_int_equal(count_in(path, "TARMAC_AGENT_ARGS=--heartbeat-period 1s"), 1);
    assert_int_equal(count_in(path, "hunter2secret"), 0); /* the controller's secrets stay */
    for (int i = 0; i < 250 && tm_local_signal_node(dir, 0) < 2; i++)
        usleep(20000);
    assert_int_equal(tm_local_signal_node(dir, 0), 2);   /* the shell (now sleep) and its child */

    /* The same token: the same node, nothing started again. */
    r = launch(&loop, p, 7, "tok-7", "local.2x", TM_CAPACITY_SPOT, script);
    assert_int_equal(r.status, 0);
    assert_string_equal(r.inst.id, id);
    node_dir(id, "agent.log", path, sizeof(path));
    assert_int_equal(count_in(path, "started"), 1);

    l = list(&loop, p, "c1");
    assert_int_equal(l.n, 1);
    assert_string_equal(l.list[0].id, id);
    assert_string_equal(l.list[0].token, "tok-7");
    assert_string_equal(l.list[0].pool, "p1");
    assert_int_equal(l.list[0].capacity, TM_CAPACITY_SPOT);
    assert_int_equal(l.list[0].state, TM_INSTANCE_RUNNING);
    assert_int_equal(list(&loop, p, "other").n, 0);

    /* A restarted controller lists the same node. */
    close_provider(&loop, p);
    assert_int_equal(tm_local_provider_create(&loop, &cp, clock_now, NULL, &p), 0);
    l = list(&loop, p, "c1");
    assert_int_equal(l.n, 1);
    assert_string_equal(l.list[0].id, id);

    /* Interrupted on demand: the notice first, then gone at the deadline. */
    {
        char err[256];
        assert_int_equal(tm_local_interrupt(state_dir, 9, wall(), wall() + 400, err, sizeof(err)),
                         TM_ENOTFOUND);
        assert_non_null(strstr(err, "node 9"));
        assert_int_equal(tm_local_interrupt(state_dir, 7, wall(), wall() + 400, err, sizeof(err)),
                         0);
    }
    l = list(&loop, p, "c1");
    assert_int_equal(l.list[0].state, TM_INSTANCE_RUNNING);
    assert_int_equal(l.list[0].notice_ms, fake_now);
    usleep(500000);
    l = list(&loop, p, "c1");
    assert_true(l.list[0].interrupted);
    assert_true(l.list[0].state == TM_INSTANCE_STOPPING || l.list[0].state == TM_INSTANCE_TERMINATED);
    wait_gone(id);
    l = list(&loop, p, "c1");
    assert_int_equal(l.list[0].state, TM_INSTANCE_TERMINATED);
    assert_true(l.list[0].interrupted);

    /* Terminate: SIGTERM to the node's processes, then terminated. */
    r = launch(&loop, p, 8, "tok-8", "local.od", TM_CAPACITY_ON_DEMAND, script);
    assert_int_equal(r.status, 0);
    {
        struct result t = {0};
        char id8[TM_ID_MAX];

        snprintf(id8, sizeof(id8), "%s", r.inst.id);
        node_dir(id8, NULL, dir, sizeof(dir));
        /* The count moves while the script forks and execs (a process
         * mid-exec has no readable environment): wait for both. */
        int seen = 0;
        for (int i = 0; i < 250 && (seen = tm_local_signal_node(dir, 0)) != 2; i++)
            usleep(20000);
        assert_int_equal(seen, 2);
        /* local.od has capacity 1: a second node of it waits. */
        assert_int_equal(launch(&loop, p, 10, "tok-10", "local.od", TM_CAPACITY_ON_DEMAND, script)
                             .status,
                         TM_EQUOTA);
        assert_int_equal(p->ops->terminate(p, id8, on_done, &t), 0);
        run_until(&loop, &t, 1);
        assert_int_equal(t.status, 0);
        wait_gone(id8);
        fake_now += 1000;
        l = list(&loop, p, "c1");
        assert_int_equal(l.n, 2);
        assert_string_equal(l.list[1].id, id8);
        assert_int_equal(l.list[1].state, TM_INSTANCE_TERMINATED);
        assert_false(l.list[1].interrupted);
    }

    /* Refusals. */
    assert_int_equal(launch(&loop, p, 11, "tok-11", "nope", TM_CAPACITY_ON_DEMAND, script).status,
                     TM_ENOTFOUND);
    assert_int_equal(launch(&loop, p, 11, "tok-11", "local.od", TM_CAPACITY_SPOT, script).status,
                     TM_EQUOTA);
    assert_int_equal(launch(&loop, p, 11, "tok-11", "local.2x", TM_CAPACITY_ON_DEMAND, NULL).status,
                     TM_EINVAL);
    {
        struct result t = {0};
        assert_int_equal(p->ops->terminate(p, "local-99-00000000", on_done, &t), 0);
        run_until(&loop, &t, 1);
        assert_int_equal(t.status, TM_ENOTFOUND);
        assert_int_equal(p->ops->terminate(p, "../x", on_done, &t), TM_EINVAL);
    }

    close_provider(&loop, p);
    assert_int_equal(uv_loop_close(&loop), 0);
    unsetenv("TARMAC_DATABASE_URL");
}

/* ---- config ---------------------------------------------------------------- */

#define LHEAD                                                                  \
    "database: {url: \"postgresql:///t\"}\n"                                   \
    "cluster: c1\n"                                                            \
    "providers:\n"                                                             \
    "  - name: here\n"                                                         \
    "    region: r1\n"                                                         \
    "    instance_types:\n"                                                    \
    "      - {name: t1, gpus: 1, gpu_model: A100, cpu_milli: 1000, memory_mib: 1000, " \
    "on_demand_price: \"1\"}\n"
#define LPOOL                                                                  \
    "pools:\n"                                                                 \
    "  - {name: p1, provider: here, zones: [z1], instance_types: [t1], max_nodes: 2}\n"

static void expect_config(const char *text, const char *want)
{
    struct tm_config cfg = {0};
    char err[512] = "";
    int r = tm_config_load_string(text, strlen(text), "t.yaml", &cfg, err, sizeof(err));

    if (!want) {
        if (r != 0)
            fprintf(stderr, "unexpected error: %s\n", err);
        assert_int_equal(r, 0);
        tm_config_release(&cfg);
        return;
    }
    assert_int_equal(r, TM_EINVAL);
    if (!strstr(err, want))
        fprintf(stderr, "error \"%s\" lacks \"%s\"\n", err, want);
    assert_non_null(strstr(err, want));
}

static void test_config(void **state)
{
    struct tm_config cfg = {0};
    const char *ok = LHEAD "    kind: local\n    state_dir: /tmp/x\n" LPOOL;
    char err[256];

    assert_int_equal(tm_config_load_string(ok, strlen(ok), "t.yaml", &cfg, err, sizeof(err)), 0);
    assert_string_equal(cfg.providers[0].kind, "local");
    assert_string_equal(tm_local_config(&cfg.providers[0])->metadata, "local");
    assert_true(tm_local_config(&cfg.providers[0])->gpu_util_percent == 0);
    assert_true(tm_local_config(&cfg.providers[0])->gpu_busy_util_percent == 0);
    tm_config_release(&cfg);

    expect_config(LHEAD "    kind: local\n" LPOOL, "\"providers[0].state_dir\": missing required key");
    expect_config(LHEAD "    kind: local\n    state_dir: /tmp/x\n    metadata: aws\n" LPOOL,
                  "\"providers[0].metadata_url\": an http(s) URL is required");
    expect_config(LHEAD "    kind: local\n    state_dir: /tmp/x\n    metadata: aws\n"
                        "    metadata_url: \"http://127.0.0.1:9\"\n" LPOOL,
                  NULL);
    expect_config(LHEAD "    kind: local\n    state_dir: /tmp/x\n    metadata_url: \"http://x\"\n" LPOOL,
                  "\"providers[0].metadata_url\": only used when metadata is aws, gcp or azure");
    expect_config(LHEAD "    kind: local\n    state_dir: /tmp/x\n    metadata: oracle\n" LPOOL,
                  "providers[0].metadata");
    expect_config(LHEAD "    kind: local\n    state_dir: /tmp/x\n    gpu_util_percent: 101\n" LPOOL,
                  "providers[0].gpu_util_percent");
    expect_config(LHEAD "    kind: local\n    state_dir: /tmp/x\n    gpu_busy_util_percent: 101\n" LPOOL,
                  "providers[0].gpu_busy_util_percent");
    expect_config(LHEAD "    kind: local\n    state_dir: /tmp/x\n    agent_args: \"--x $(id)\"\n" LPOOL,
                  "\"providers[0].agent_args\": plain flags only");
    expect_config(LHEAD "    kind: sim\n    state_dir: /tmp/x\n" LPOOL,
                  "\"providers[0].state_dir\": only used by kind \"local\", not \"sim\"");
    expect_config(LHEAD "    kind: local\n    state_dir: /tmp/x\n"
                        "pools:\n  - {name: p1, provider: here, zones: [z1], instance_types: [t9], "
                        "max_nodes: 2}\n",
                  "unknown instance type \"t9\"");
}

static int setup(void **state)
{
    snprintf(state_dir, sizeof(state_dir), "/tmp/tm-local-XXXXXX");
    assert_non_null(mkdtemp(state_dir));
    return 0;
}

static int teardown(void **state)
{
    char cmd[128];

    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", state_dir);
    return system(cmd) == 0 ? 0 : -1;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_lifecycle, setup, teardown),
        cmocka_unit_test(test_config),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
