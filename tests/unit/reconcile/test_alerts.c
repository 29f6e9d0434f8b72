/*
 * tests/unit/reconcile/test_alerts.c: alert conditions as known answers, a table of
 * (configuration, snapshot, provider statuses, previous state, now) ->
 * the set holding now: the utilisation window (below for less than the
 * period: nothing; for the period: fires), clearing and coming back, soft
 * against hard caps, provider auth, and each switch that turns one off.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "controller/reconcile/alerts.h"
#include "core/config.h"
#include "core/err.h"
#include "tests/lib/snap_fixture.h"

static const char config_yaml[] =
    SNAP_FIXTURE_YAML_HEAD("unit")
    "alerts:\n"
    "  pool_utilisation_below_percent: 50\n"
    "  pool_utilisation_for: 10m\n"
    "  queue_age_above: 2s\n"
    "providers:\n"
    SNAP_FIXTURE_YAML_SIM("sim", "r1")
    SNAP_FIXTURE_YAML_SIM("other", "r2")
    "pools:\n"
    "  - {name: od, provider: sim, zones: [z1], instance_types: [sim.8x], gpu_model: A100,"
    "     gpus_per_node: 8, capacity_type: on_demand, min_nodes: 0, max_nodes: 4, idle_grace: 60s}\n"
    "  - {name: spot, provider: sim, zones: [z1], instance_types: [sim.8x], gpu_model: A100,"
    "     gpus_per_node: 8, capacity_type: spot, min_nodes: 0, max_nodes: 4, idle_grace: 60s}\n";

/* 2025-11-29T07:06:40Z: the ledger's period is "2025-11". */
#define NOW INT64_C(1764400000000)
#define MIN (60 * 1000)

struct fixture {
    SNAP_FIXTURE_MEMBERS(8);
    struct tm_snap_budget budgets[4];
    struct tm_snap_spend spend[8];
    int provider_status[2];
    struct tm_alert_state state;   /* carried between evaluations */
    struct tm_alert_set set;       /* the last evaluation's answer */
};

static int setup(void **state)
{
    static struct fixture f;
    memset(&f, 0, sizeof(f));
    if (SNAP_FIXTURE_INIT(&f, config_yaml) < 0)
        return -1;
    f.snap.budgets = f.budgets;
    f.snap.spend = f.spend;
    *state = &f;
    return 0;
}

static int teardown(void **state)
{
    struct fixture *f = *state;
    tm_alert_set_release(&f->set);
    tm_alert_state_release(&f->state);
    tm_config_release(&f->cfg);
    return 0;
}

/* Nodes are added in id order (the snapshot's order). */
static void add_node(struct fixture *f, int64_t id, int pool, enum tm_node_state st, bool billed)
{
    f->nodes[f->snap.nnodes++] = (struct tm_snap_node){
        .id = id, .pool = pool, .gpus = 8, .state = st, .billed = billed,
        .requested_ms = NOW - 3600000, .price_uusd_per_hour = 32000000,
    };
}

/* gpus whole GPUs (or a share of one when milli < 1000) on a node. */
static void add_alloc(struct fixture *f, int64_t job, int64_t node, int gpus, int milli)
{
    f->allocs[f->snap.nallocs++] = (struct tm_snap_alloc){
        .job_id = job, .node_id = node, .gpu_mask = (1u << gpus) - 1, .gpu_milli = milli,
    };
}

static struct tm_snap_job *add_job(struct fixture *f, int64_t id, enum tm_job_class klass,
                                   enum tm_job_state st, int64_t submitted_ms)
{
    struct tm_snap_job *j = &f->jobs[f->snap.njobs++];
    *j = (struct tm_snap_job){.id = id, .pool = -1, .gpus = 1, .gpu_milli = 1000, .nodes = 1,
                              .klass = klass, .state = st, .submitted_ms = submitted_ms};
    snprintf(j->team, sizeof(j->team), "a");
    return j;
}

static void add_budget(struct fixture *f, bool org, const char *scope, int64_t cap, bool hard, int warn)
{
    struct tm_snap_budget *b = &f->budgets[f->snap.nbudgets++];
    *b = (struct tm_snap_budget){.org = org, .cap_cents = cap, .hard = hard, .warn_percent = warn};
    snprintf(b->scope, sizeof(b->scope), "%s", scope);
}

static void add_spend(struct fixture *f, const char *period, const char *team, int64_t cents)
{
    struct tm_snap_spend *x = &f->spend[f->snap.nspend++];
    *x = (struct tm_snap_spend){.cents = cents};
    snprintf(x->period, sizeof(x->period), "%s", period);
    snprintf(x->team, sizeof(x->team), "%s", team);
}

/* Evaluate at now, carrying the state from the previous call; returns how
 * many alerts hold. */
static size_t eval_at(struct fixture *f, int64_t now)
{
    struct tm_alert_input in = {.cfg = &f->cfg, .snap = &f->snap, .provider_status = f->provider_status,
                                .now_ms = now};
    struct tm_alert_state next;
    tm_alert_set_release(&f->set);
    assert_int_equal(tm_alerts_evaluate(&in, &f->state, &f->set, &next), 0);
    tm_alert_state_release(&f->state);
    f->state = next;
    return f->set.n;
}

static const struct tm_alert *find(const struct fixture *f, const char *key)
{
    for (size_t i = 0; i < f->set.n; i++)
        if (strcmp(f->set.items[i].key, key) == 0)
            return &f->set.items[i];
    return NULL;
}

static double detail(const struct tm_alert *a, const char *name)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(a->details, name);
    assert_true(cJSON_IsNumber(v));
    return v->valuedouble;
}

/* ---- pool_idle ------------------------------------------------------------- */

/* One paid 8-GPU node with 2 GPUs allocated: 25%, below 50%.  Below for
 * 9m59s: nothing; for 10m: fires, with the numbers; still below: still
 * holds (same key, so the alerter sends nothing new). */
static void test_pool_idle_fires_after_the_window(void **state)
{
    struct fixture *f = *state;
    f->cfg.alerts.queue_age_above_ms = 0;
    add_node(f, 1, 0, TM_NODE_READY, true);
    add_alloc(f, 10, 1, 2, 1000);

    assert_int_equal(eval_at(f, NOW), 0);
    assert_int_equal(eval_at(f, NOW + 5 * MIN), 0);
    assert_int_equal(eval_at(f, NOW + 10 * MIN - 1000), 0);
    assert_int_equal(eval_at(f, NOW + 10 * MIN), 1);
    const struct tm_alert *a = find(f, "pool_idle:od");
    assert_non_null(a);
    assert_int_equal(a->kind, TM_ALERT_POOL_IDLE);
    assert_string_equal(a->subject, "od");
    assert_string_equal(a->decision_subject_kind, "pool");
    assert_string_equal(a->decision_subject_id, "od");
    assert_true(detail(a, "utilisation_percent") == 25.0);
    assert_true(detail(a, "paid_gpus") == 8.0);
    assert_true(detail(a, "allocated_gpus") == 2.0);
    assert_true(detail(a, "below_since_ms") == (double)NOW);
    assert_non_null(strstr(a->message, "25.0% of its 8.0 paid GPUs"));
    assert_non_null(strstr(a->message, "for 10m00s"));
    assert_int_equal(eval_at(f, NOW + 60 * MIN), 1);
    assert_non_null(find(f, "pool_idle:od"));
}

/* Used again (75%): cleared and the window forgotten; idle again: the
 * window starts over, so it fires again only a full period later. */
static void test_pool_idle_clears_and_fires_again(void **state)
{
    struct fixture *f = *state;
    f->cfg.alerts.queue_age_above_ms = 0;
    add_node(f, 1, 0, TM_NODE_READY, true);
    add_alloc(f, 10, 1, 2, 1000);
    assert_int_equal(eval_at(f, NOW), 0);
    assert_int_equal(eval_at(f, NOW + 10 * MIN), 1);

    f->allocs[0].gpu_mask = 0x3f; /* 6 of 8 */
    assert_int_equal(eval_at(f, NOW + 11 * MIN), 0);
    assert_int_equal(f->state.pool_below_since_ms[0], 0);

    f->allocs[0].gpu_mask = 0x3; /* 2 of 8 again */
    assert_int_equal(eval_at(f, NOW + 12 * MIN), 0);
    assert_int_equal(eval_at(f, NOW + 21 * MIN), 0);
    assert_int_equal(eval_at(f, NOW + 22 * MIN), 1);
    assert_true(detail(find(f, "pool_idle:od"), "below_since_ms") == (double)(NOW + 12 * MIN));
}

/* Only what is paid counts: a requested node (not billed) is not waste, an
 * empty pool is not; a booting node is paid and holds nothing.  Exactly at
 * the threshold is not below it; fractional shares count by their milli. */
static void test_pool_idle_only_while_paid(void **state)
{
    struct fixture *f = *state;
    f->cfg.alerts.queue_age_above_ms = 0;
    f->cfg.alerts.pool_util_for_ms = 0;
    add_node(f, 1, 0, TM_NODE_REQUESTED, false);
    assert_int_equal(eval_at(f, NOW), 0);

    /* spot: a booting paid node (0%) and a ready one with 4 GPUs and a
     * 500-milli share: 4.5 of 16 = 28.1%. */
    add_node(f, 2, 1, TM_NODE_BOOTING, true);
    add_node(f, 3, 1, TM_NODE_READY, true);
    add_alloc(f, 20, 3, 4, 1000);
    add_alloc(f, 21, 3, 1, 500);
    assert_int_equal(eval_at(f, NOW), 1);
    const struct tm_alert *a = find(f, "pool_idle:spot");
    assert_non_null(a);
    assert_true(detail(a, "paid_gpus") == 16.0);
    assert_true(detail(a, "allocated_gpus") == 4.5);

    /* 8 of 16 = 50%: at the threshold, not below. */
    f->allocs[0].gpu_mask = 0xff;
    f->snap.nallocs = 1;
    assert_int_equal(eval_at(f, NOW), 0);

    /* Off: threshold 0. */
    f->allocs[0].gpu_mask = 0x1;
    assert_int_equal(eval_at(f, NOW), 1);
    f->cfg.alerts.pool_util_below_percent = 0;
    assert_int_equal(eval_at(f, NOW), 0);
}

/* ---- queue_age ------------------------------------------------------------- */

/* The oldest queued job of each class against queue_age_above (2 s):
 * exactly 2 s is not above it; running jobs do not count; the decision
 * goes to the oldest job. */
static void test_queue_age_per_class(void **state)
{
    struct fixture *f = *state;
    add_job(f, 1, TM_CLASS_TRAIN, TM_JOB_RUNNING, NOW - 3600000);
    add_job(f, 2, TM_CLASS_TRAIN, TM_JOB_QUEUED, NOW - 2000);
    add_job(f, 3, TM_CLASS_EVAL, TM_JOB_QUEUED, NOW - 1000);
    assert_int_equal(eval_at(f, NOW), 0);

    add_job(f, 4, TM_CLASS_TRAIN, TM_JOB_QUEUED, NOW - 2001);
    assert_int_equal(eval_at(f, NOW), 1);
    const struct tm_alert *a = find(f, "queue_age:train");
    assert_non_null(a);
    assert_string_equal(a->subject, "train");
    assert_string_equal(a->decision_subject_kind, "job");
    assert_string_equal(a->decision_subject_id, "4");
    assert_true(detail(a, "age_ms") == 2001.0);
    assert_true(detail(a, "threshold_ms") == 2000.0);
    assert_non_null(strstr(a->message, "job (4, team a) has waited 2s, over 2s"));

    /* Later, the eval job is old too: two keys. */
    assert_int_equal(eval_at(f, NOW + 5000), 2);
    assert_non_null(find(f, "queue_age:eval"));

    /* The old train jobs leave the queue: train clears, eval holds. */
    f->jobs[1].state = TM_JOB_RUNNING;
    f->jobs[3].state = TM_JOB_RUNNING;
    assert_int_equal(eval_at(f, NOW + 5000), 1);
    assert_null(find(f, "queue_age:train"));

    f->cfg.alerts.queue_age_above_ms = 0;
    assert_int_equal(eval_at(f, NOW + 5000), 0);
}

/* ---- soft_cap -------------------------------------------------------------- */

/* A soft team cap of $10.00 warning at 80%: $7.99 nothing, $8.00 fires.  A
 * hard cap far past its threshold never alerts (it is enforced).  Spend of
 * another month does not count.  The org cap counts every team and idle. */
static void test_soft_cap_past_warning_only(void **state)
{
    struct fixture *f = *state;
    f->cfg.alerts.queue_age_above_ms = 0;
    add_budget(f, false, "a", 1000, false, 80);
    add_budget(f, false, "b", 1000, true, 50);
    add_spend(f, "2025-11", "a", 799);
    add_spend(f, "2025-11", "b", 5000);
    add_spend(f, "2025-10", "a", 100000);
    assert_int_equal(eval_at(f, NOW), 0);

    f->spend[0].cents = 800;
    assert_int_equal(eval_at(f, NOW), 1);
    const struct tm_alert *a = find(f, "soft_cap:team:a");
    assert_non_null(a);
    assert_string_equal(a->decision_subject_kind, "budget");
    assert_string_equal(a->decision_subject_id, "team:a");
    assert_true(detail(a, "spent_cents") == 800.0);
    assert_true(detail(a, "cap_cents") == 1000.0);
    assert_non_null(strstr(a->message, "team a spent $8.00 in 2025-11, 80% of its soft cap of $10.00"));

    /* Org-wide soft cap of $60.00 at 100%: 800 + 5000 + 200 idle = 6000. */
    add_budget(f, true, "acme", 6000, false, 100);
    add_spend(f, "2025-11", "", 199);
    assert_int_equal(eval_at(f, NOW), 1);
    f->spend[3].cents = 200;
    assert_int_equal(eval_at(f, NOW), 2);
    assert_true(detail(find(f, "soft_cap:org:acme"), "spent_cents") == 6000.0);

    f->cfg.alerts.soft_cap = false;
    assert_int_equal(eval_at(f, NOW), 0);
}

/* A cap of 0 warns on the first cent, not before. */
static void test_soft_cap_of_zero(void **state)
{
    struct fixture *f = *state;
    f->cfg.alerts.queue_age_above_ms = 0;
    add_budget(f, false, "a", 0, false, 80);
    assert_int_equal(eval_at(f, NOW), 0);
    add_spend(f, "2025-11", "a", 1);
    assert_int_equal(eval_at(f, NOW), 1);
    assert_non_null(find(f, "soft_cap:team:a"));
}

/* ---- provider_auth --------------------------------------------------------- */

static void test_provider_auth(void **state)
{
    struct fixture *f = *state;
    f->cfg.alerts.queue_age_above_ms = 0;
    assert_int_equal(eval_at(f, NOW), 0);

    /* Unreachable is not refused credentials. */
    f->provider_status[0] = TM_EUNAVAIL;
    assert_int_equal(eval_at(f, NOW), 0);

    f->provider_status[1] = TM_EAUTH;
    assert_int_equal(eval_at(f, NOW), 1);
    const struct tm_alert *a = find(f, "provider_auth:other");
    assert_non_null(a);
    assert_string_equal(a->decision_subject_kind, "provider");
    assert_string_equal(a->decision_subject_id, "other");
    assert_non_null(strstr(a->message, "refused our credentials"));

    /* Its next call works: cleared. */
    f->provider_status[1] = 0;
    assert_int_equal(eval_at(f, NOW + 1000), 0);

    f->provider_status[1] = TM_EAUTH;
    f->cfg.alerts.provider_auth = false;
    assert_int_equal(eval_at(f, NOW), 0);
}

/* ---- the set as tarmac_alerts' input --------------------------------------- */

static void test_set_to_json(void **state)
{
    struct fixture *f = *state;
    add_job(f, 7, TM_CLASS_BATCH, TM_JOB_QUEUED, NOW - 60000);
    f->provider_status[0] = TM_EAUTH;
    assert_int_equal(eval_at(f, NOW), 2);

    cJSON *arr = tm_alert_set_to_json(&f->set);
    assert_non_null(arr);
    assert_int_equal(cJSON_GetArraySize(arr), 2);
    const cJSON *o;
    int seen = 0;
    cJSON_ArrayForEach(o, arr) {
        const char *key = cJSON_GetObjectItemCaseSensitive(o, "key")->valuestring;
        const char *kind = cJSON_GetObjectItemCaseSensitive(o, "kind")->valuestring;
        assert_true(cJSON_IsObject(cJSON_GetObjectItemCaseSensitive(o, "details")));
        assert_true(cJSON_IsString(cJSON_GetObjectItemCaseSensitive(o, "message")));
        if (strcmp(key, "queue_age:batch") == 0) {
            assert_string_equal(kind, "queue_age");
            assert_string_equal(cJSON_GetObjectItemCaseSensitive(o, "decision_subject_id")->valuestring, "7");
            seen |= 1;
        } else if (strcmp(key, "provider_auth:sim") == 0) {
            assert_string_equal(kind, "provider_auth");
            assert_string_equal(cJSON_GetObjectItemCaseSensitive(o, "subject")->valuestring, "sim");
            seen |= 2;
        }
    }
    assert_int_equal(seen, 3);
    cJSON_Delete(arr);
}

/* The state is only the windows: a first evaluation without one works,
 * and names are stable. */
static void test_no_previous_state_and_names(void **state)
{
    struct fixture *f = *state;
    struct tm_alert_input in = {.cfg = &f->cfg, .snap = &f->snap, .now_ms = NOW};
    struct tm_alert_set set;
    struct tm_alert_state next;
    assert_int_equal(tm_alerts_evaluate(&in, NULL, &set, &next), 0);
    assert_int_equal(set.n, 0);
    assert_int_equal(next.npools, 2);
    tm_alert_set_release(&set);
    tm_alert_state_release(&next);
    assert_string_equal(tm_alert_kind_name(TM_ALERT_POOL_IDLE), "pool_idle");
    assert_string_equal(tm_alert_kind_name(TM_ALERT_QUEUE_AGE), "queue_age");
    assert_string_equal(tm_alert_kind_name(TM_ALERT_SOFT_CAP), "soft_cap");
    assert_string_equal(tm_alert_kind_name(TM_ALERT_PROVIDER_AUTH), "provider_auth");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_pool_idle_fires_after_the_window, setup, teardown),
        cmocka_unit_test_setup_teardown(test_pool_idle_clears_and_fires_again, setup, teardown),
        cmocka_unit_test_setup_teardown(test_pool_idle_only_while_paid, setup, teardown),
        cmocka_unit_test_setup_teardown(test_queue_age_per_class, setup, teardown),
        cmocka_unit_test_setup_teardown(test_soft_cap_past_warning_only, setup, teardown),
        cmocka_unit_test_setup_teardown(test_soft_cap_of_zero, setup, teardown),
        cmocka_unit_test_setup_teardown(test_provider_auth, setup, teardown),
        cmocka_unit_test_setup_teardown(test_set_to_json, setup, teardown),
        cmocka_unit_test_setup_teardown(test_no_previous_state_and_names, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
