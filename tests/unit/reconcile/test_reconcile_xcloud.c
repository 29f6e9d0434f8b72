/*
 * tests/unit/reconcile/test_reconcile_xcloud.c: a pool group on three
 * clouds through tm_reconcile, with known answers: the work of the group
 * is bought where it is cheapest, a remembered shortage on that cloud
 * sends it to the next one in the same pass, and the request_node
 * decision names the cloud chosen and the offers passed over with their
 * prices.  Also the configuration's group checks (the field named), and
 * config/example-three-clouds.yaml loading.
 *
 * Three sim providers stand for the clouds (named aws, gcp, azure), each
 * with its list prices for an 8-GPU A100 type (config/prices-*-gpu.yaml).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "controller/reconcile/reconcile.h"
#include "core/config.h"
#include "core/err.h"
#include "tests/lib/snap_fixture.h"

#define CLOUD(name, type, od, spot)                                                         \
    "  - name: " name "\n"                                                                  \
    "    kind: sim\n"                                                                       \
    "    region: r-" name "\n"                                                              \
    "    instance_types:\n"                                                                 \
    "      - {name: " type ", gpus: 8, gpu_model: A100, cpu_milli: 96000, memory_mib: 900000," \
    "         on_demand_price: \"" od "\", spot_price: \"" spot "\"}\n"

#define POOL(name, provider, type, zone, cap)                                               \
    "  - {name: " name ", provider: " provider ", zones: [" zone "], instance_types: [" type "]," \
    "     capacity_type: " cap ", group: a100, max_nodes: 4, idle_grace: 60s}\n"

static const char config_yaml[] =
    SNAP_FIXTURE_YAML_HEAD("unit")
    "providers:\n"
    CLOUD("aws", "p4d.24xlarge", "21.957642", "5.0933")
    CLOUD("gcp", "a2-highgpu-8g", "29.38708", "15.42416")
    CLOUD("azure", "Standard_ND96asr_v4", "27.197", "2.99167")
    "pools:\n"
    POOL("aws-spot", "aws", "p4d.24xlarge", "us-east-1a", "spot_then_on_demand")
    POOL("gcp-spot", "gcp", "a2-highgpu-8g", "us-central1-a", "spot_then_on_demand")
    POOL("azure-spot", "azure", "Standard_ND96asr_v4", "\"1\"", "spot_then_on_demand")
    POOL("aws-od", "aws", "p4d.24xlarge", "us-east-1a", "on_demand")
    POOL("gcp-od", "gcp", "a2-highgpu-8g", "us-central1-a", "on_demand")
    POOL("azure-od", "azure", "Standard_ND96asr_v4", "\"1\"", "on_demand");

#define NOW 1000000000

struct fixture {
    SNAP_FIXTURE_MEMBERS(8);
    SNAP_FIXTURE_PASS_MEMBERS;
    struct tm_live_shortage shortages[8];
    size_t nshortages;
};

static int setup(void **state)
{
    static struct fixture f;
    memset(&f, 0, sizeof(f));
    if (SNAP_FIXTURE_PASS_INIT(&f, config_yaml) < 0)
        return -1;
    *state = &f;
    return 0;
}

static int teardown(void **state)
{
    SNAP_FIXTURE_PASS_RELEASE((struct fixture *)*state);
    return 0;
}

static void add_job(struct fixture *f, int64_t id, bool preemptible)
{
    struct tm_snap_job *j = &f->jobs[f->snap.njobs++];
    *j = (struct tm_snap_job){.id = id, .pool = -1, .gpus = 8, .gpu_milli = 1000, .nodes = 1,
                              .preemptible = preemptible, .state = TM_JOB_QUEUED,
                              .estimate_ms = 3600000, .submitted_ms = NOW - 1000 * id};
    snprintf(j->team, sizeof(j->team), "t");
}

static void add_shortage(struct fixture *f, const char *provider, const char *type, const char *zone)
{
    struct tm_live_shortage *s = &f->shortages[f->nshortages++];
    snprintf(s->provider, sizeof(s->provider), "%s", provider);
    snprintf(s->instance_type, sizeof(s->instance_type), "%s", type);
    snprintf(s->zone, sizeof(s->zone), "%s", zone);
    s->spot = true;
    s->until_ms = NOW + 600000;
}

static void run(struct fixture *f)
{
    struct tm_reconcile_input in = {.cfg = &f->cfg, .snap = &f->snap, .observed = &f->obs,
                                    .nobserved = 1, .now_ms = NOW, .policy = TM_POLICY_FIFO,
                                    .shortages = f->shortages, .nshortages = f->nshortages};
    tm_rc_plan_release(&f->plan);
    assert_int_equal(tm_reconcile(&in, &f->plan), 0);
}

static const char *str(const cJSON *a, const char *key)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(a, key);
    if (!cJSON_IsString(v))
        fail_msg("no string %s", key);
    return v->valuestring;
}

static const cJSON *request(const struct fixture *f, int k)
{
    const cJSON *a = snap_fixture_nth_op(f->plan.actions, "request_node", k);
    if (!a)
        fail_msg("no request_node %d in the plan", k);
    return a;
}

static void test_cheapest_cloud_then_next_on_shortage(void **state)
{
    struct fixture *f = *state;
    add_job(f, 1, true);
    run(f);
    assert_int_equal(snap_fixture_count_op(f->plan.actions, "request_node"), 1);
    const cJSON *a = request(f, 0);
    /* spot for preemptible work, azure's the cheapest (2.99 USD/h) */
    assert_string_equal(str(a, "pool"), "azure-spot");
    assert_string_equal(str(a, "zone"), "1");
    assert_string_equal(str(a, "capacity_type"), "spot");
    const cJSON *ins = cJSON_GetObjectItemCaseSensitive(a, "inputs");
    assert_string_equal(str(ins, "provider"), "azure");
    assert_string_equal(str(ins, "pool_group"), "a100");
    assert_non_null(strstr(str(a, "reason"), "cloud azure: Standard_ND96asr_v4 spot 2.99 USD/h"));
    assert_non_null(strstr(str(a, "reason"), "passed over: aws p4d.24xlarge spot 5.09 USD/h (dearer)"));

    /* azure's spot short in zone 1 (remembered): aws in the same pass */
    add_shortage(f, "azure", "Standard_ND96asr_v4", "1");
    run(f);
    assert_int_equal(snap_fixture_count_op(f->plan.actions, "request_node"), 1);
    a = request(f, 0);
    assert_string_equal(str(a, "pool"), "aws-spot");
    assert_string_equal(str(a, "zone"), "us-east-1a");
    assert_string_equal(str(a, "instance_type"), "p4d.24xlarge");
    const char *why = str(a, "reason");
    assert_non_null(strstr(why, "cloud aws: p4d.24xlarge spot 5.09 USD/h"));
    assert_non_null(strstr(why, "passed over: azure Standard_ND96asr_v4 spot 2.99 USD/h (short)"));
    assert_non_null(strstr(why, "gcp a2-highgpu-8g spot 15.42 USD/h (dearer)"));
    ins = cJSON_GetObjectItemCaseSensitive(a, "inputs");
    assert_string_equal(str(ins, "provider"), "aws");
    assert_string_equal(str(ins, "provider_kind"), "sim");
    const cJSON *offers = cJSON_GetObjectItemCaseSensitive(ins, "offers");
    assert_int_equal(cJSON_GetArraySize(offers), 3);
    const cJSON *o0 = cJSON_GetArrayItem(offers, 0);
    assert_string_equal(str(o0, "provider"), "azure");
    assert_string_equal(str(o0, "status"), "short");
    assert_int_equal((int64_t)cJSON_GetObjectItemCaseSensitive(o0, "price_uusd_per_hour")->valuedouble,
                     2991670);
    assert_string_equal(cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(o0, "short_zones"), 0)->valuestring,
                        "1");
    assert_string_equal(str(cJSON_GetArrayItem(offers, 1), "status"), "chosen");
    assert_string_equal(str(cJSON_GetArrayItem(offers, 1), "provider"), "aws");
    assert_string_equal(str(cJSON_GetArrayItem(offers, 2), "provider"), "gcp");

    /* A shortage of azure's type name on another cloud does not hold for
     * azure: the cloud is part of the shortage. */
    f->nshortages = 0;
    add_shortage(f, "gcp", "Standard_ND96asr_v4", "1");
    run(f);
    assert_string_equal(str(request(f, 0), "pool"), "azure-spot");
    f->nshortages = 0;
    f->snap.njobs = 0;
}

static void test_on_demand_work_goes_to_cheapest_on_demand_cloud(void **state)
{
    struct fixture *f = *state;
    add_job(f, 1, false);
    run(f);
    const cJSON *a = request(f, 0);
    assert_string_equal(str(a, "pool"), "aws-od");
    assert_string_equal(str(a, "capacity_type"), "on_demand");
    assert_non_null(strstr(str(a, "reason"), "cloud aws: p4d.24xlarge on-demand 21.96 USD/h"));
    f->snap.njobs = 0;
}

/* The org's hard cap and this month's ledger are the cluster's, whatever
 * cloud spent it: spend run up on one cloud refuses a launch on another. */
static void test_budget_holds_across_clouds(void **state)
{
    struct fixture *f = *state;
    /* An aws spot launch: 5.09 USD/h for boot + 1 h of work, about 5.2 USD. */
    struct tm_snap_budget cap = {.org = true, .cap_cents = 1000, .hard = true, .warn_percent = 80};
    struct tm_snap_spend spent = {.cents = 900};
    snprintf(cap.scope, sizeof(cap.scope), "acme");
    snprintf(spent.period, sizeof(spent.period), "1970-01");
    snprintf(spent.team, sizeof(spent.team), "t");
    add_job(f, 1, true);
    add_shortage(f, "azure", "Standard_ND96asr_v4", "1");
    f->snap.budgets = &cap;
    f->snap.nbudgets = 1;
    run(f);
    /* under a $10 cap with nothing spent: bought on aws */
    assert_int_equal(snap_fixture_count_op(f->plan.actions, "request_node"), 1);
    assert_string_equal(str(request(f, 0), "pool"), "aws-spot");
    /* $9 already spent this month (on any cloud): refused, with the figures */
    f->snap.spend = &spent;
    f->snap.nspend = 1;
    run(f);
    assert_int_equal(snap_fixture_count_op(f->plan.actions, "request_node"), 0);
    const cJSON *b = snap_fixture_nth_op(f->plan.actions, "budget", 0);
    assert_non_null(b);
    assert_string_equal(str(b, "kind"), "budget_refuse");
    assert_string_equal(str(b, "scope"), "org:acme");
    f->snap.budgets = NULL;
    f->snap.nbudgets = 0;
    f->snap.spend = NULL;
    f->snap.nspend = 0;
    f->nshortages = 0;
    f->snap.njobs = 0;
}

static void expect_refused(const char *yaml, const char *want)
{
    struct tm_config cfg;
    char err[512];
    assert_int_equal(tm_config_load_string(yaml, strlen(yaml), "unit.yaml", &cfg, err, sizeof(err)),
                     TM_EINVAL);
    if (!strstr(err, want))
        fail_msg("error \"%s\" lacks \"%s\"", err, want);
}

static void test_group_members_must_agree(void **state)
{
    (void)state;
    /* GPU models that differ across the members: the later one's group named */
    expect_refused(SNAP_FIXTURE_YAML_HEAD("unit")
                   "providers:\n"
                   CLOUD("aws", "p4d.24xlarge", "21.957642", "5.0933")
                   "  - name: gcp\n    kind: sim\n    region: r\n    instance_types:\n"
                   "      - {name: a3-highgpu-8g, gpus: 8, gpu_model: H100, cpu_milli: 208000,"
                   "         memory_mib: 1900000, on_demand_price: \"88.49\"}\n"
                   "pools:\n"
                   POOL("a", "aws", "p4d.24xlarge", "z", "on_demand")
                   POOL("b", "gcp", "a3-highgpu-8g", "z", "on_demand"),
                   "pools[1].group");
    expect_refused(SNAP_FIXTURE_YAML_HEAD("unit")
                   "providers:\n"
                   CLOUD("aws", "p4d.24xlarge", "21.957642", "5.0933")
                   "  - name: gcp\n    kind: sim\n    region: r\n    instance_types:\n"
                   "      - {name: a3-highgpu-8g, gpus: 8, gpu_model: H100, cpu_milli: 208000,"
                   "         memory_mib: 1900000, on_demand_price: \"88.49\"}\n"
                   "pools:\n"
                   POOL("a", "aws", "p4d.24xlarge", "z", "on_demand")
                   POOL("b", "gcp", "a3-highgpu-8g", "z", "on_demand"),
                   "mixes GPU models: \"H100\" here, \"A100\" in pools[0] (a)");
    /* A member on a cloud the file does not define */
    expect_refused(SNAP_FIXTURE_YAML_HEAD("unit")
                   "providers:\n"
                   CLOUD("aws", "p4d.24xlarge", "21.957642", "5.0933")
                   "pools:\n"
                   POOL("a", "aws", "p4d.24xlarge", "z", "on_demand")
                   POOL("b", "oci", "p4d.24xlarge", "z", "on_demand"),
                   "pools[1].provider");
}

static void test_example_three_clouds_loads(void **state)
{
    struct tm_config cfg;
    char err[512];
    (void)state;
    if (tm_config_load(TM_SOURCE_DIR "/config/example-three-clouds.yaml", &cfg, err, sizeof(err)) != 0)
        fail_msg("config/example-three-clouds.yaml: %s", err);
    int kinds = 0;
    for (size_t i = 0; i < cfg.nproviders; i++)
        kinds |= strcmp(cfg.providers[i].kind, "aws") == 0 ? 1
                 : strcmp(cfg.providers[i].kind, "gcp") == 0 ? 2
                 : strcmp(cfg.providers[i].kind, "azure") == 0 ? 4 : 0;
    assert_int_equal(kinds, 7);
    for (size_t i = 0; i < cfg.npools; i++) {
        assert_non_null(cfg.pools[i].group);
        assert_string_equal(cfg.pools[i].gpu_model, "A100");
    }
    tm_config_release(&cfg);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_cheapest_cloud_then_next_on_shortage),
        cmocka_unit_test(test_on_demand_work_goes_to_cheapest_on_demand_cloud),
        cmocka_unit_test(test_budget_holds_across_clouds),
        cmocka_unit_test(test_group_members_must_agree),
        cmocka_unit_test(test_example_three_clouds_loads),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
