/*
 * tests/integration/test_gcp_launch_set.c: the GCP provider's launch_set
 * (providers/gcp/gcp_launch_set.c) on a real loop against the loopback
 * fake (tests/lib/gcp_fake.py), which this binary starts and stops:
 *
 *   - a zone with fewer free slots than the set: TM_EQUOTA, nothing made,
 *     the shortage remembered;
 *   - a set made in the next zone by one bulkInsert, insts[i] for
 *     reqs[i], each instance labelled with its own node id and token, the
 *     compact placement policy on the request;
 *   - the same set asked again: found by its label, the same instances,
 *     no second bulkInsert;
 *   - a cloud that makes fewer than minCount, and a member whose setLabels
 *     is refused: the set fails and nothing of it is left;
 *   - a placement policy the region does not have: refused, nothing made;
 *   - requests that do not describe one set are refused before any call.
 * The provider lists two instances a page, so a set's listing pages.
 * Every request is checked by the fake against the discovery document.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <unistd.h>

#include <cmocka.h>
#include <uv.h>

#include "core/config.h"
#include "core/err.h"
#include "providers/gcp/gcp_provider.h"
#include "providers/provider.h"
#include "tests/lib/gcp_fake_proc.h"

#define TYPE "a2-highgpu-8g"

static void sh(const char *cmd)
{
    if (system(cmd) != 0)
        fail_msg("command failed: %s", cmd);
}

static void control(const char *json)
{
    char cmd[1024];

    snprintf(cmd, sizeof(cmd), "curl -s -o /dev/null -X POST --data '%s' "
             "http://127.0.0.1:%d/__fake/control", json, gcp_fake.port);
    sh(cmd);
}

/* A number computed by python from the fake's state `d`. */
static long fake_value(const char *expr)
{
    char cmd[2048], line[64] = "";
    FILE *f;

    snprintf(cmd, sizeof(cmd), "curl -s http://127.0.0.1:%d/__fake/state | python3 -c '"
             "import json, sys; d = json.load(sys.stdin); print(int(%s))'", gcp_fake.port, expr);
    f = popen(cmd, "r");
    assert_non_null(f);
    if (!fgets(line, sizeof(line), f))
        line[0] = '\0';
    pclose(f);
    if (!line[0])
        fail_msg("could not read the fake's state: %s", expr);
    return strtol(line, NULL, 10);
}

static int setup(void **state)
{
    (void)state;
    return gcp_fake_start("gcpset", "--op-delay-ms 50");
}

static int teardown(void **state)
{
    (void)state;
    gcp_fake_stop();
    return 0;
}

static void run_until(uv_loop_t *loop, bool *flag)
{
    for (int i = 0; i < 20000 && !*flag; i++)
        uv_run(loop, UV_RUN_ONCE);
}

static void on_closed(void *data) { *(bool *)data = true; }

struct set_result {
    bool done;
    int status;
    size_t n;
    struct tm_instance insts[8];
};

static void on_set(int status, const struct tm_instance *insts, size_t n, void *data)
{
    struct set_result *r = data;

    r->done = true;
    r->status = status;
    r->n = n;
    for (size_t i = 0; i < n && i < 8; i++)
        r->insts[i] = insts[i];
}

struct done_result {
    bool done;
    int status;
};

static void on_done(int status, void *data)
{
    struct done_result *d = data;

    d->done = true;
    d->status = status;
}

struct env {
    uv_loop_t loop;
    struct tm_config cfg;
    struct tm_provider *p;
};

static void env_open(struct env *e, const char *placement)
{
    char yaml[4096], err[512] = "";
    /* two instances a page: a set of three is listed in pages */
    struct tm_gcp_provider_options opts = {.retry = {.max_attempts = 3, .base_delay_ms = 10,
                                                     .max_total_delay_ms = 500},
                                           .list_page_size = 2};
    int n;

    n = snprintf(yaml, sizeof(yaml),
        "database: {url: \"postgresql://x@h/db\"}\ncluster: ls\n"
        "providers:\n"
        "  - name: g\n    kind: gcp\n    region: us-central1\n    project: tarmac-test\n"
        "    endpoint: \"http://127.0.0.1:%d/compute/v1\"\n"
        "    token_url: \"http://127.0.0.1:%d/token\"\n"
        "    credentials: {source: file, file: \"%s\"}\n"
        "pools:\n"
        "  - {name: od, provider: g, zones: [us-central1-a, us-central1-b],"
        " instance_types: [" TYPE "], gpu_model: A100, gpus_per_node: 8,"
        " capacity_type: on_demand, max_nodes: 8, placement_group: %s}\n",
        gcp_fake.port, gcp_fake.port, gcp_fake.key_path, placement);
    assert_true(n > 0 && (size_t)n < sizeof(yaml));
    assert_int_equal(uv_loop_init(&e->loop), 0);
    if (tm_config_load_string(yaml, strlen(yaml), "set.yaml", &e->cfg, err, sizeof(err)) != 0)
        fail_msg("config: %s", err);
    assert_int_equal(tm_gcp_provider_create_ex(&e->loop, &e->cfg, &e->cfg.providers[0], &opts,
                                               &e->p), 0);
}

static void env_close(struct env *e)
{
    bool closed = false;

    e->p->ops->close(e->p, on_closed, &closed);
    run_until(&e->loop, &closed);
    uv_run(&e->loop, UV_RUN_DEFAULT);
    assert_int_equal(uv_loop_close(&e->loop), 0);
    tm_config_release(&e->cfg);
}

/* Launch a set of n members named after stem, node ids first_node.. */
static void launch(struct env *e, const char *stem, size_t n, int64_t first_node,
                   const char *zone, struct set_result *r)
{
    struct tm_launch_request reqs[8];
    char tokens[8][TM_ID_MAX];
    const char boot[] = "#!/bin/sh\necho node\n# TARMAC_ENROLL_SECRET=tme_unit\n";
    struct tm_launch_set set = {.reqs = reqs, .n = n, .set_token = stem};

    assert_true(n <= 8);
    memset(r, 0, sizeof(*r));
    for (size_t k = 0; k < n; k++) {
        tm_launch_member_token(stem, (unsigned)k, tokens[k]);
        reqs[k] = (struct tm_launch_request){
            .cluster = "ls", .pool = "od", .node_id = first_node + (int64_t)k,
            .token = tokens[k], .instance_type = TYPE, .zone = zone,
            .capacity = TM_CAPACITY_ON_DEMAND, .bootstrap = boot, .bootstrap_len = strlen(boot)};
    }
    set.placement_group = e->cfg.pools[0].placement_group;
    assert_int_equal(e->p->ops->launch_set(e->p, &set, on_set, r), 0);
    assert_false(r->done); /* never from inside the call */
    run_until(&e->loop, &r->done);
    assert_true(r->done);
}

static long set_instances(const char *stem)
{
    char expr[512];

    snprintf(expr, sizeof(expr), "sum(1 for i in d[\"instances\"] if i[\"labels\"].get("
             "\"tarmac-launch-set\") == \"%s\" and i[\"status\"] != \"STOPPING\")", stem);
    return fake_value(expr);
}

static void test_short_then_made(void **state)
{
    struct env e;
    struct set_result r, again;
    char tok[TM_ID_MAX], expr[512];
    long bulks;

    (void)state;
    control("{\"capacity\": {\"us-central1-a\": 2}, \"resource_policies\": [\"tarmac-compact\"]}");
    env_open(&e, "tarmac-compact");
    /* three members, two free slots: all or nothing means nothing */
    launch(&e, "ls-100-1", 3, 100, "us-central1-a", &r);
    assert_int_equal(r.status, TM_EQUOTA);
    assert_int_equal(r.n, 0);
    assert_int_equal(set_instances("ls-100-1"), 0);
    assert_int_equal(fake_value("d[\"created_in\"].get(\"us-central1-a\", 0)"), 0);
    assert_true(tm_gcp_provider_is_short(e.p, TYPE, "us-central1-a", TM_CAPACITY_ON_DEMAND));

    /* the provider chooses: us-central1-a is remembered short */
    launch(&e, "ls-200-1", 3, 200, "", &r);
    assert_int_equal(r.status, 0);
    assert_int_equal(r.n, 3);
    for (size_t k = 0; k < 3; k++) {
        tm_launch_member_token("ls-200-1", (unsigned)k, tok);
        assert_string_equal(r.insts[k].token, tok);
        assert_int_equal(r.insts[k].node_id, 200 + (int64_t)k);
        assert_string_equal(r.insts[k].zone, "us-central1-b");
        assert_string_equal(r.insts[k].pool, "od");
        assert_int_equal(strncmp(r.insts[k].id, "us-central1-b/tm-", 17), 0);
        snprintf(expr, sizeof(expr), "[i for i in d[\"instances\"] if i[\"zone\"] + \"/\" + "
                 "i[\"name\"] == \"%s\"][0][\"labels\"][\"tarmac-node-id\"]", r.insts[k].id);
        assert_int_equal(fake_value(expr), 200 + (long)k);
        snprintf(expr, sizeof(expr), "[i for i in d[\"instances\"] if i[\"zone\"] + \"/\" + "
                 "i[\"name\"] == \"%s\"][0][\"metadata\"][\"tarmac-launch-token\"] == \"%s\"",
                 r.insts[k].id, tok);
        assert_int_equal(fake_value(expr), 1);
        snprintf(expr, sizeof(expr), "[i for i in d[\"instances\"] if i[\"zone\"] + \"/\" + "
                 "i[\"name\"] == \"%s\"][0][\"bootstrap_len\"]", r.insts[k].id);
        assert_true(fake_value(expr) > 0);
    }
    assert_int_equal(fake_value("d[\"bulk_calls\"][-1][\"resourcePolicies\"] == "
                                "[\"tarmac-compact\"]"), 1);
    assert_int_equal(fake_value("d[\"counts\"][\"inserts\"]"), 0);

    /* asked again (a restart that did not hear the answer): found, not made twice */
    bulks = fake_value("len(d[\"bulk_calls\"])");
    launch(&e, "ls-200-1", 3, 200, "", &again);
    assert_int_equal(again.status, 0);
    assert_int_equal(again.n, 3);
    for (size_t k = 0; k < 3; k++)
        assert_string_equal(again.insts[k].id, r.insts[k].id);
    assert_int_equal(fake_value("len(d[\"bulk_calls\"])"), bulks);
    assert_int_equal(set_instances("ls-200-1"), 3);
    /* terminate releases each member as for a single launch */
    for (size_t k = 0; k < 3; k++) {
        struct done_result d = {0};

        assert_int_equal(e.p->ops->terminate(e.p, r.insts[k].id, on_done, &d), 0);
        run_until(&e.loop, &d.done);
        assert_int_equal(d.status, 0);
    }
    assert_int_equal(set_instances("ls-200-1"), 0);
    env_close(&e);
    assert_int_equal(fake_value("len(d[\"violations\"])"), 0);
}

static void test_failures_leave_nothing(void **state)
{
    struct env e;
    struct set_result r;

    (void)state;
    control("{\"capacity\": {}, \"resource_policies\": [\"tarmac-compact\"]}");
    env_open(&e, "tarmac-compact");
    /* a cloud that breaks minCount: fewer made than asked, deleted, short */
    control("{\"bulk_make_fewer\": 1}");
    launch(&e, "ls-300-1", 2, 300, "us-central1-b", &r);
    assert_int_equal(r.status, TM_EQUOTA);
    assert_int_equal(set_instances("ls-300-1"), 0);
    assert_true(tm_gcp_provider_is_short(e.p, TYPE, "us-central1-b", TM_CAPACITY_ON_DEMAND));
    /* one member's setLabels refused: the whole set is deleted */
    control("{\"refuse_set_labels\": 1}");
    launch(&e, "ls-400-1", 2, 400, "us-central1-a", &r);
    assert_int_equal(r.status, TM_EINVAL);
    assert_int_equal(set_instances("ls-400-1"), 0);
    env_close(&e);

    /* a placement policy the region lacks: refused, nothing made */
    env_open(&e, "tarmac-missing");
    launch(&e, "ls-500-1", 2, 500, "us-central1-a", &r);
    assert_int_equal(r.status, TM_EINVAL);
    assert_int_equal(set_instances("ls-500-1"), 0);
    env_close(&e);
    assert_int_equal(fake_value("len(d[\"violations\"])"), 0);
}

static void test_refused_before_any_call(void **state)
{
    struct env e;
    struct set_result r = {0};
    struct tm_launch_request reqs[2] = {
        {.cluster = "ls", .pool = "od", .node_id = 1, .token = "ls-9-1g000", .instance_type = TYPE,
         .zone = "", .capacity = TM_CAPACITY_ON_DEMAND},
        {.cluster = "ls", .pool = "od", .node_id = 2, .token = "ls-9-1g001",
         .instance_type = "n1-standard-8", .zone = "", .capacity = TM_CAPACITY_ON_DEMAND},
    };
    struct tm_launch_set set = {.reqs = reqs, .n = 2, .set_token = "ls-9-1"};
    long requests;

    (void)state;
    env_open(&e, "tarmac-compact");
    requests = fake_value("d[\"counts\"][\"requests\"]");
    /* two types are two sets */
    assert_int_equal(e.p->ops->launch_set(e.p, &set, on_set, &r), TM_EINVAL);
    reqs[1].instance_type = TYPE;
    /* one token twice: one instance name for two nodes */
    reqs[1].token = "ls-9-1g000";
    assert_int_equal(e.p->ops->launch_set(e.p, &set, on_set, &r), TM_EINVAL);
    reqs[1].token = "ls-9-1g001";
    /* a placement given as a path, not a name */
    set.placement_group = "projects/p/regions/us-central1/resourcePolicies/x";
    assert_int_equal(e.p->ops->launch_set(e.p, &set, on_set, &r), TM_EINVAL);
    set.placement_group = NULL;
    reqs[1].cluster = "other";
    assert_int_equal(e.p->ops->launch_set(e.p, &set, on_set, &r), TM_EINVAL);
    assert_false(r.done);
    assert_int_equal(fake_value("d[\"counts\"][\"requests\"]"), requests);
    env_close(&e);
}

static void test_placement_checked_at_load(void **state)
{
    struct tm_config cfg = {0};
    struct tm_provider *p = NULL;
    char yaml[2048], err[512] = "";
    uv_loop_t loop;

    (void)state;
    snprintf(yaml, sizeof(yaml),
        "database: {url: \"postgresql://x@h/db\"}\ncluster: ls\n"
        "providers:\n"
        "  - name: g\n    kind: gcp\n    region: us-central1\n    project: tarmac-test\n"
        "    endpoint: \"http://127.0.0.1:%d/compute/v1\"\n"
        "    credentials: {source: file, file: \"%s\"}\n"
        "pools:\n"
        "  - {name: od, provider: g, zones: [us-central1-a], instance_types: [" TYPE "],"
        " gpu_model: A100, gpus_per_node: 8, max_nodes: 2, placement_group: Compact_1}\n",
        gcp_fake.port, gcp_fake.key_path);
    assert_int_equal(uv_loop_init(&loop), 0);
    assert_int_equal(tm_config_load_string(yaml, strlen(yaml), "bad.yaml", &cfg, err, sizeof(err)),
                     0);
    /* not a resource policy name: the provider is not created */
    assert_int_equal(tm_gcp_provider_create(&loop, &cfg, &cfg.providers[0], &p), TM_EINVAL);
    assert_null(p);
    tm_config_release(&cfg);
    assert_int_equal(uv_loop_close(&loop), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_short_then_made),
        cmocka_unit_test(test_failures_leave_nothing),
        cmocka_unit_test(test_refused_before_any_call),
        cmocka_unit_test(test_placement_checked_at_load),
    };

    return cmocka_run_group_tests(tests, setup, teardown);
}
