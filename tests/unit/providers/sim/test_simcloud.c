/*
 * tests/unit/providers/sim/test_simcloud.c: the pure simulated cloud (providers/sim/simcloud.h).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "core/err.h"
#include "providers/sim/simcloud.h"

#define HOUR_MS 3600000LL

static void params_default(struct tm_simcloud_params *p)
{
    tm_simcloud_params_init(p);
    p->ntypes = 2;
    snprintf(p->types[0].name, TM_ID_MAX, "sim.8x-a100");
    p->types[0].gpus = 8;
    snprintf(p->types[0].gpu_model, TM_ID_MAX, "A100");
    p->types[0].cpu_milli = 96000;
    p->types[0].memory_mib = 1152000;
    p->types[0].on_demand_uusd_per_hour = 32770000;
    p->types[0].spot_uusd_per_hour = 9830000;
    p->types[0].capacity = 2;
    snprintf(p->types[1].name, TM_ID_MAX, "sim.1x-t4");
    p->types[1].gpus = 1;
    snprintf(p->types[1].gpu_model, TM_ID_MAX, "T4");
    p->types[1].cpu_milli = 4000;
    p->types[1].memory_mib = 16000;
    p->types[1].on_demand_uusd_per_hour = 526000;
    p->types[1].spot_uusd_per_hour = 0; /* no spot */
    p->nzones = 2;
    snprintf(p->zones[0], TM_ID_MAX, "sim-a");
    snprintf(p->zones[1], TM_ID_MAX, "sim-b");
    p->boot_delay_ms = 90000;
    p->spot_hazard_per_hour = 0.5;
    p->spot_notice_ms = 120000;
    p->seed = 42;
}

static struct tm_launch_request req(const char *token, const char *type, enum tm_capacity_type cap)
{
    struct tm_launch_request r = {
        .cluster = "c1", .pool = "gpu", .node_id = 7, .token = token,
        .instance_type = type, .zone = "", .capacity = cap,
    };
    return r;
}

static struct tm_simcloud *cloud(const struct tm_simcloud_params *p)
{
    struct tm_simcloud *sc = NULL;

    assert_int_equal(tm_simcloud_create(p, &sc), 0);
    assert_non_null(sc);
    return sc;
}

static size_t count_listed(struct tm_simcloud *sc, const char *cluster, int64_t now)
{
    struct tm_instance *list = NULL;
    size_t n = 99;

    assert_int_equal(tm_simcloud_list(sc, cluster, now, &list, &n), 0);
    free(list);
    return n;
}

static void test_boot_delay(void **state)
{
    struct tm_simcloud_params p;
    struct tm_simcloud *sc;
    struct tm_instance in;
    struct tm_launch_request r = req("tok-boot", "sim.1x-t4", TM_CAPACITY_ON_DEMAND);
    struct tm_instance *list = NULL;
    size_t n;

    params_default(&p);
    sc = cloud(&p);
    assert_int_equal(tm_simcloud_launch(sc, &r, 1000, &in), 0);
    assert_int_equal(in.state, TM_INSTANCE_PENDING);
    assert_int_equal(in.launched_ms, 1000);
    assert_string_equal(in.token, "tok-boot");
    assert_string_equal(in.pool, "gpu");
    assert_int_equal(in.node_id, 7);
    assert_int_equal(strncmp(in.id, "sim-", 4), 0);

    assert_int_equal(tm_simcloud_list(sc, "c1", 1000 + 90000 - 1, &list, &n), 0);
    assert_int_equal(n, 1);
    assert_int_equal(list[0].state, TM_INSTANCE_PENDING);
    free(list);
    assert_int_equal(tm_simcloud_list(sc, "c1", 1000 + 90000, &list, &n), 0);
    assert_int_equal(n, 1);
    assert_int_equal(list[0].state, TM_INSTANCE_RUNNING);
    assert_false(list[0].interrupted);
    assert_int_equal(list[0].notice_ms, 0);
    free(list);
    tm_simcloud_free(sc);
}

static void test_idempotent_token(void **state)
{
    struct tm_simcloud_params p;
    struct tm_simcloud *sc;
    struct tm_instance a, b;
    struct tm_launch_request r = req("tok-same", "sim.8x-a100", TM_CAPACITY_ON_DEMAND);

    params_default(&p);
    sc = cloud(&p);
    assert_int_equal(tm_simcloud_launch(sc, &r, 0, &a), 0);
    /* Later, with another zone asked: still the same instance. */
    r.zone = "sim-b";
    assert_int_equal(tm_simcloud_launch(sc, &r, 5000, &b), 0);
    assert_string_equal(a.id, b.id);
    assert_string_equal(a.zone, b.zone);
    assert_int_equal(b.launched_ms, 0);
    assert_int_equal(count_listed(sc, "c1", 6000), 1);
    assert_int_equal(tm_simcloud_count_alive(sc, "sim.8x-a100", 6000), 1);
    tm_simcloud_free(sc);
}

static void test_capacity(void **state)
{
    struct tm_simcloud_params p;
    struct tm_simcloud *sc;
    struct tm_instance a, b, c;
    struct tm_launch_request r1 = req("cap-1", "sim.8x-a100", TM_CAPACITY_ON_DEMAND);
    struct tm_launch_request r2 = req("cap-2", "sim.8x-a100", TM_CAPACITY_ON_DEMAND);
    struct tm_launch_request r3 = req("cap-3", "sim.8x-a100", TM_CAPACITY_ON_DEMAND);
    int64_t t = 0;

    params_default(&p);
    sc = cloud(&p);
    assert_int_equal(tm_simcloud_launch(sc, &r1, t, &a), 0);
    assert_int_equal(tm_simcloud_launch(sc, &r2, t, &b), 0);
    assert_int_equal(tm_simcloud_launch(sc, &r3, t, &c), TM_EQUOTA);
    /* A repeat of a launched token is never refused for capacity. */
    assert_int_equal(tm_simcloud_launch(sc, &r2, t, &c), 0);
    assert_string_equal(c.id, b.id);

    t = 100000;
    assert_int_equal(tm_simcloud_terminate(sc, a.id, t), 0);
    assert_int_equal(tm_simcloud_terminate(sc, a.id, t + 10000), 0); /* idempotent */
    assert_int_equal(tm_simcloud_terminate(sc, "sim-nope", t), TM_ENOTFOUND);
    /* Still stopping: capacity not yet free. */
    assert_int_equal(tm_simcloud_launch(sc, &r3, t + p.shutdown_ms - 1, &c), TM_EQUOTA);
    {
        struct tm_instance *list = NULL;
        size_t n;

        assert_int_equal(tm_simcloud_list(sc, "c1", t + p.shutdown_ms - 1, &list, &n), 0);
        assert_int_equal(n, 2);
        assert_int_equal(list[0].state, TM_INSTANCE_STOPPING);
        free(list);
        assert_int_equal(tm_simcloud_list(sc, "c1", t + p.shutdown_ms, &list, &n), 0);
        assert_int_equal(n, 2);
        assert_int_equal(list[0].state, TM_INSTANCE_TERMINATED);
        assert_false(list[0].interrupted);
        free(list);
    }
    /* The first request time is kept, so the shutdown ended on time. */
    assert_int_equal(tm_simcloud_launch(sc, &r3, t + p.shutdown_ms, &c), 0);
    assert_int_equal(c.state, TM_INSTANCE_PENDING);

    /* Terminated instances stay listed for the retention, then vanish. */
    assert_int_equal(count_listed(sc, "c1", t + p.shutdown_ms + p.retention_ms - 1), 3);
    assert_int_equal(count_listed(sc, "c1", t + p.shutdown_ms + p.retention_ms), 2);
    assert_int_equal(tm_simcloud_terminate(sc, a.id, t + p.shutdown_ms + p.retention_ms),
                     TM_ENOTFOUND);
    /* Its token still names it. */
    assert_int_equal(tm_simcloud_launch(sc, &r1, t + p.shutdown_ms + p.retention_ms, &c), 0);
    assert_string_equal(c.id, a.id);
    assert_int_equal(c.state, TM_INSTANCE_TERMINATED);
    tm_simcloud_free(sc);
}

static void test_errors(void **state)
{
    struct tm_simcloud_params p;
    struct tm_simcloud *sc;
    struct tm_instance in;
    struct tm_launch_request r = req("e1", "sim.nope", TM_CAPACITY_ON_DEMAND);
    int64_t price = 0;

    params_default(&p);
    sc = cloud(&p);
    assert_int_equal(tm_simcloud_launch(sc, &r, 0, &in), TM_ENOTFOUND);
    r = req("e2", "sim.1x-t4", TM_CAPACITY_SPOT);
    assert_int_equal(tm_simcloud_launch(sc, &r, 0, &in), TM_EQUOTA);
    r = req("e3", "sim.1x-t4", TM_CAPACITY_ON_DEMAND);
    r.zone = "mars-1";
    assert_int_equal(tm_simcloud_launch(sc, &r, 0, &in), TM_ENOTFOUND);
    r = req("", "sim.1x-t4", TM_CAPACITY_ON_DEMAND);
    assert_int_equal(tm_simcloud_launch(sc, &r, 0, &in), TM_EINVAL);
    assert_int_equal(count_listed(sc, "c1", 0), 0);

    assert_int_equal(tm_simcloud_price(&p, "sim.8x-a100", "sim-a", TM_CAPACITY_SPOT, &price), 0);
    assert_int_equal(price, 9830000);
    assert_int_equal(tm_simcloud_price(&p, "sim.8x-a100", NULL, TM_CAPACITY_ON_DEMAND, &price), 0);
    assert_int_equal(price, 32770000);
    assert_int_equal(tm_simcloud_price(&p, "sim.1x-t4", "", TM_CAPACITY_SPOT, &price), TM_ENOTFOUND);
    assert_int_equal(tm_simcloud_price(&p, "sim.1x-t4", "mars-1", TM_CAPACITY_ON_DEMAND, &price),
                     TM_ENOTFOUND);
    assert_int_equal(tm_simcloud_price(&p, "x", "", TM_CAPACITY_ON_DEMAND, &price), TM_ENOTFOUND);
    tm_simcloud_free(sc);

    /* Duplicate type names are refused. */
    snprintf(p.types[1].name, TM_ID_MAX, "sim.8x-a100");
    sc = NULL;
    assert_int_equal(tm_simcloud_create(&p, &sc), TM_EINVAL);
    assert_null(sc);
}

static void test_spot_deterministic(void **state)
{
    struct tm_simcloud_params p;
    struct tm_simcloud *a, *b;
    struct tm_launch_request r = req("spot-1", "sim.8x-a100", TM_CAPACITY_SPOT);
    const struct tm_sim_instance *ra, *rb;
    struct tm_sim_instance plan;

    params_default(&p);
    p.types[0].capacity = 0;
    a = cloud(&p);
    b = cloud(&p);
    assert_int_equal(tm_simcloud_launch(a, &r, 1000, NULL), 0);
    assert_int_equal(tm_simcloud_launch(b, &r, 1000, NULL), 0);
    ra = tm_simcloud_find_token(a, "spot-1");
    rb = tm_simcloud_find_token(b, "spot-1");
    assert_non_null(ra);
    assert_non_null(rb);
    assert_true(ra->interrupt_ms != TM_SIM_NEVER);
    assert_int_equal(ra->interrupt_ms, rb->interrupt_ms);
    assert_string_equal(ra->id, rb->id);
    /* Same fate relative to launch time, whenever it is launched. */
    assert_int_equal(tm_sim_instance_plan(&p, &r, 5000, &plan), 0);
    assert_int_equal(plan.interrupt_ms - 5000, ra->interrupt_ms - 1000);
    /* Another seed, another fate. */
    p.seed = 43;
    assert_int_equal(tm_sim_instance_plan(&p, &r, 1000, &plan), 0);
    assert_true(plan.interrupt_ms != ra->interrupt_ms);
    /* On-demand never gets interrupted. */
    r.capacity = TM_CAPACITY_ON_DEMAND;
    assert_int_equal(tm_sim_instance_plan(&p, &r, 1000, &plan), 0);
    assert_int_equal(plan.interrupt_ms, TM_SIM_NEVER);
    assert_int_equal(plan.notice_ms, TM_SIM_NEVER);
    tm_simcloud_free(a);
    tm_simcloud_free(b);
}

static void test_spot_hazard_statistics(void **state)
{
    struct tm_simcloud_params p;
    struct tm_sim_instance plan;
    char token[32];
    double sum = 0, mean, expect;
    int n = 2000, within_hour = 0;

    params_default(&p);
    p.spot_hazard_per_hour = 0.25; /* mean lifetime 4 h */
    for (int i = 0; i < n; i++) {
        struct tm_launch_request r;

        snprintf(token, sizeof(token), "node-%d", i);
        r = req(token, "sim.8x-a100", TM_CAPACITY_SPOT);
        assert_int_equal(tm_sim_instance_plan(&p, &r, 0, &plan), 0);
        assert_true(plan.interrupt_ms > 0 && plan.interrupt_ms != TM_SIM_NEVER);
        sum += (double)plan.interrupt_ms;
        if (plan.interrupt_ms < HOUR_MS)
            within_hour++;
    }
    mean = sum / n;
    expect = HOUR_MS / p.spot_hazard_per_hour;
    assert_true(mean > 0.9 * expect && mean < 1.1 * expect);
    /* P(T < 1 h) = 1 - exp(-0.25) = 0.221; binomial sd over 2000 ~ 0.009. */
    assert_true(within_hour > 0.18 * n && within_hour < 0.26 * n);
}

/* A hazard set for (type, zone) in params.cells (a fitted table) comes
 * before the pool's for launches there, whatever the pool; the notice
 * stays the pool's.  Known answer: one token's lifetime is -ln(u)/hazard
 * for a u that depends on the token only, so at a third of the pool's
 * hazard it lives three times as long, and at 0 it is never taken. */
static void test_spot_per_type_and_zone(void **state)
{
    struct tm_simcloud_params p;
    struct tm_sim_instance in_pool, in_cell;
    struct tm_launch_request r;
    double hazard;
    int64_t notice;

    params_default(&p);
    p.npools = 1;
    snprintf(p.pools[0].pool, TM_ID_MAX, "gpu");
    p.pools[0].hazard_per_hour = 6.0;
    p.pools[0].notice_ms = 30000;
    p.cells[0][1] = (struct tm_sim_cell_spot){.set = true, .hazard_per_hour = 2.0}; /* 8x in sim-b */

    tm_sim_spot_for_launch(&p, "gpu", "sim.8x-a100", "sim-b", &hazard, &notice);
    assert_true(hazard == 2.0);
    assert_int_equal(notice, 30000);
    tm_sim_spot_for_launch(&p, "gpu", "sim.8x-a100", "sim-a", &hazard, &notice);
    assert_true(hazard == 6.0);
    tm_sim_spot_for_launch(&p, "other", "sim.8x-a100", "sim-b", &hazard, &notice);
    assert_true(hazard == 2.0); /* the cell's, whatever the pool */
    assert_int_equal(notice, 120000);
    tm_sim_spot_for_launch(&p, "gpu", "nope", "sim-b", &hazard, &notice);
    assert_true(hazard == 6.0);

    r = req("node-1", "sim.8x-a100", TM_CAPACITY_SPOT);
    r.zone = "sim-a";
    assert_int_equal(tm_sim_instance_plan(&p, &r, 0, &in_pool), 0);
    r.zone = "sim-b";
    assert_int_equal(tm_sim_instance_plan(&p, &r, 0, &in_cell), 0);
    assert_true(in_pool.interrupt_ms > 0 && in_pool.interrupt_ms != TM_SIM_NEVER);
    assert_true(llabs(in_cell.interrupt_ms - 3 * in_pool.interrupt_ms) <= 2);

    p.cells[0][1].hazard_per_hour = 0;
    assert_int_equal(tm_sim_instance_plan(&p, &r, 0, &in_cell), 0);
    assert_int_equal(in_cell.interrupt_ms, TM_SIM_NEVER);
    assert_int_equal(in_cell.notice_ms, TM_SIM_NEVER);
}

/* Per-pool spot behaviour: a launch naming a pool in params.pools gets that
 * pool's hazard and notice; other pools (and none) get the cloud-wide ones. */
static void test_spot_per_pool(void **state)
{
    struct tm_simcloud_params p;
    struct tm_sim_instance plan;
    struct tm_launch_request r;
    char token[32];
    double sum = 0, hazard;
    int64_t notice;
    int n = 2000;

    params_default(&p);
    p.npools = 2;
    snprintf(p.pools[0].pool, TM_ID_MAX, "hot");
    p.pools[0].hazard_per_hour = 4.0; /* mean lifetime 15 min */
    p.pools[0].notice_ms = 30000;     /* GCP and Azure give 30 s */
    snprintf(p.pools[1].pool, TM_ID_MAX, "calm");
    p.pools[1].hazard_per_hour = 0;   /* never interrupted */
    p.pools[1].notice_ms = 30000;

    tm_sim_spot_for_pool(&p, "hot", &hazard, &notice);
    assert_true(hazard == 4.0);
    assert_int_equal(notice, 30000);
    tm_sim_spot_for_pool(&p, "elsewhere", &hazard, &notice);
    assert_true(hazard == 0.5);
    assert_int_equal(notice, 120000);
    tm_sim_spot_for_pool(&p, NULL, &hazard, &notice);
    assert_true(hazard == 0.5);

    for (int i = 0; i < n; i++) {
        snprintf(token, sizeof(token), "hot-%d", i);
        r = req(token, "sim.8x-a100", TM_CAPACITY_SPOT);
        r.pool = "hot";
        assert_int_equal(tm_sim_instance_plan(&p, &r, 0, &plan), 0);
        assert_true(plan.interrupt_ms != TM_SIM_NEVER);
        /* The pool's notice, cut short only by the launch itself. */
        if (plan.interrupt_ms >= 30000)
            assert_int_equal(plan.interrupt_ms - plan.notice_ms, 30000);
        else
            assert_int_equal(plan.notice_ms, 0);
        sum += (double)plan.interrupt_ms;
    }
    /* Mean of 2000 exponential draws: within 10% of 15 min (sd ~2.2%). */
    assert_true(sum / n > 0.9 * HOUR_MS / 4 && sum / n < 1.1 * HOUR_MS / 4);

    r = req("calm-1", "sim.8x-a100", TM_CAPACITY_SPOT);
    r.pool = "calm";
    assert_int_equal(tm_sim_instance_plan(&p, &r, 0, &plan), 0);
    assert_int_equal(plan.interrupt_ms, TM_SIM_NEVER);
    assert_int_equal(plan.notice_ms, TM_SIM_NEVER);

    /* Same token, other pool: same draw, scaled by the other hazard
     * (lifetime = -ln(u) / hazard), with the cloud-wide notice. */
    r = req("hot-0", "sim.8x-a100", TM_CAPACITY_SPOT);
    r.pool = "hot";
    assert_int_equal(tm_sim_instance_plan(&p, &r, 0, &plan), 0);
    int64_t hot = plan.interrupt_ms;
    r.pool = "gpu";
    assert_int_equal(tm_sim_instance_plan(&p, &r, 0, &plan), 0);
    assert_true(llabs(plan.interrupt_ms - hot * 8) <= 8);
    if (plan.interrupt_ms >= 120000)
        assert_int_equal(plan.interrupt_ms - plan.notice_ms, 120000);

    /* More pools than fit: refused. */
    p.npools = TM_SIM_POOLS_MAX + 1;
    struct tm_simcloud *sc = NULL;
    assert_int_equal(tm_simcloud_create(&p, &sc), TM_EINVAL);
}

/* The listing of cluster c1 at t, as seen for one id (state -1: absent). */
static struct tm_instance seen_at(struct tm_simcloud *sc, const char *id, int64_t t)
{
    struct tm_instance *list = NULL, out = {.state = (enum tm_instance_state)-1};
    size_t n = 0;

    assert_int_equal(tm_simcloud_list(sc, "c1", t, &list, &n), 0);
    for (size_t k = 0; k < n; k++)
        if (strcmp(list[k].id, id) == 0)
            out = list[k];
    free(list);
    return out;
}

static void test_notice_and_interruption(void **state)
{
    struct tm_simcloud_params p;
    struct tm_simcloud *sc;
    const struct tm_sim_instance *row = NULL;
    struct tm_instance in;
    char token[32], id[TM_ID_MAX];
    int64_t notice, interrupt;

    params_default(&p);
    p.types[0].capacity = 0;
    sc = cloud(&p);
    /* Find a token whose lifetime is longer than boot plus notice. */
    for (int i = 0; !row; i++) {
        struct tm_launch_request r;

        snprintf(token, sizeof(token), "spot-%d", i);
        r = req(token, "sim.8x-a100", TM_CAPACITY_SPOT);
        assert_int_equal(tm_simcloud_launch(sc, &r, 0, NULL), 0);
        row = tm_simcloud_find_token(sc, token);
        if (row->interrupt_ms < p.boot_delay_ms + p.spot_notice_ms + 1000)
            row = NULL;
    }
    assert_int_equal(row->interrupt_ms - row->notice_ms, p.spot_notice_ms);
    notice = row->notice_ms;
    interrupt = row->interrupt_ms;
    snprintf(id, sizeof(id), "%s", row->id);

    in = seen_at(sc, id, notice - 1);
    assert_int_equal(in.state, TM_INSTANCE_RUNNING);
    assert_int_equal(in.notice_ms, 0);
    in = seen_at(sc, id, notice);
    assert_int_equal(in.state, TM_INSTANCE_RUNNING);
    assert_int_equal(in.notice_ms, notice);
    assert_false(in.interrupted);
    in = seen_at(sc, id, interrupt - 1);
    assert_int_equal(in.state, TM_INSTANCE_RUNNING);
    assert_false(in.interrupted);
    in = seen_at(sc, id, interrupt);
    assert_int_equal(in.state, TM_INSTANCE_TERMINATED);
    assert_true(in.interrupted);
    assert_int_equal(in.notice_ms, notice);
    /* Interruption frees its capacity. */
    assert_int_equal(tm_simcloud_count_alive(sc, "sim.8x-a100", interrupt - 1),
                     tm_simcloud_count_alive(sc, "sim.8x-a100", interrupt) + 1);
    /* A terminate after the interruption changes nothing. */
    assert_int_equal(tm_simcloud_terminate(sc, id, interrupt + 1), 0);
    in = seen_at(sc, id, interrupt + 2);
    assert_true(in.interrupted);
    tm_simcloud_free(sc);
}

static void test_terminate_before_interrupt(void **state)
{
    struct tm_simcloud_params p;
    struct tm_simcloud *sc;
    struct tm_launch_request r = req("spot-t", "sim.8x-a100", TM_CAPACITY_SPOT);
    const struct tm_sim_instance *row;
    struct tm_instance *list = NULL;
    size_t n;

    params_default(&p);
    p.spot_hazard_per_hour = 0.001; /* practically never within the test */
    sc = cloud(&p);
    assert_int_equal(tm_simcloud_launch(sc, &r, 0, NULL), 0);
    row = tm_simcloud_find_token(sc, "spot-t");
    assert_true(row->interrupt_ms > 10 * HOUR_MS);
    assert_int_equal(tm_simcloud_terminate(sc, row->id, HOUR_MS), 0);
    assert_int_equal(tm_simcloud_list(sc, "c1", HOUR_MS + p.shutdown_ms, &list, &n), 0);
    assert_int_equal(n, 1);
    assert_int_equal(list[0].state, TM_INSTANCE_TERMINATED);
    assert_false(list[0].interrupted);
    assert_int_equal(list[0].notice_ms, 0);
    free(list);
    assert_int_equal(tm_simcloud_list(sc, "c1", row->interrupt_ms, &list, &n), 0);
    /* Ended by request long ago, past its retention by the interrupt time. */
    assert_int_equal(n, 0);
    free(list);
    tm_simcloud_free(sc);
}

static void test_cluster_filter(void **state)
{
    struct tm_simcloud_params p;
    struct tm_simcloud *sc;
    struct tm_launch_request r1 = req("f-1", "sim.1x-t4", TM_CAPACITY_ON_DEMAND);
    struct tm_launch_request r2 = req("f-2", "sim.1x-t4", TM_CAPACITY_ON_DEMAND);
    struct tm_launch_request r3 = req("f-3", "sim.1x-t4", TM_CAPACITY_ON_DEMAND);
    struct tm_instance *list = NULL;
    size_t n;

    params_default(&p);
    sc = cloud(&p);
    r2.cluster = "c2";
    assert_int_equal(tm_simcloud_launch(sc, &r1, 0, NULL), 0);
    assert_int_equal(tm_simcloud_launch(sc, &r2, 0, NULL), 0);
    assert_int_equal(tm_simcloud_launch(sc, &r3, 10, NULL), 0);
    assert_int_equal(tm_simcloud_list(sc, "c1", 20, &list, &n), 0);
    assert_int_equal(n, 2);
    assert_string_equal(list[0].token, "f-1");
    assert_string_equal(list[1].token, "f-3");
    free(list);
    assert_int_equal(tm_simcloud_list(sc, "c2", 20, &list, &n), 0);
    assert_int_equal(n, 1);
    assert_string_equal(list[0].token, "f-2");
    free(list);
    assert_int_equal(tm_simcloud_list(sc, "c", 20, &list, &n), 0);
    assert_int_equal(n, 0);
    assert_null(list);
    tm_simcloud_free(sc);
}

static void test_next_event(void **state)
{
    struct tm_simcloud_params p;
    struct tm_simcloud *sc;
    struct tm_launch_request od = req("n-od", "sim.1x-t4", TM_CAPACITY_ON_DEMAND);
    struct tm_launch_request sp = req("n-sp", "sim.8x-a100", TM_CAPACITY_SPOT);
    const struct tm_sim_instance *row;
    int64_t t, seen = 0;
    int steps = 0;

    params_default(&p);
    sc = cloud(&p);
    assert_int_equal(tm_simcloud_next_event_ms(sc, 0), TM_SIM_NEVER);
    assert_int_equal(tm_simcloud_launch(sc, &od, 0, NULL), 0);
    assert_int_equal(tm_simcloud_next_event_ms(sc, 0), p.boot_delay_ms);
    assert_int_equal(tm_simcloud_next_event_ms(sc, p.boot_delay_ms), TM_SIM_NEVER);
    assert_int_equal(tm_simcloud_launch(sc, &sp, 1000, NULL), 0);
    row = tm_simcloud_find_token(sc, "n-sp");
    assert_int_equal(tm_simcloud_next_event_ms(sc, 0), p.boot_delay_ms);
    assert_int_equal(tm_simcloud_next_event_ms(sc, p.boot_delay_ms), 1000 + p.boot_delay_ms);
    /* Walking the events visits the notice, then the interruption. */
    for (t = 1000 + p.boot_delay_ms; t != TM_SIM_NEVER; t = tm_simcloud_next_event_ms(sc, t)) {
        if (t == row->notice_ms || t == row->interrupt_ms)
            seen++;
        steps++;
        assert_true(steps < 10);
    }
    assert_int_equal(seen, row->notice_ms > 1000 + p.boot_delay_ms ? 2 : 1);

    /* A terminate request adds its shutdown end. */
    struct tm_simcloud *sc2 = cloud(&p);
    struct tm_instance in;

    assert_int_equal(tm_simcloud_launch(sc2, &od, 0, &in), 0);
    assert_int_equal(tm_simcloud_terminate(sc2, in.id, 200000), 0);
    assert_int_equal(tm_simcloud_next_event_ms(sc2, 200000), 200000 + p.shutdown_ms);
    assert_int_equal(tm_simcloud_next_event_ms(sc2, 200000 + p.shutdown_ms), TM_SIM_NEVER);
    tm_simcloud_free(sc2);
    tm_simcloud_free(sc);
}

static void test_row_roundtrip(void **state)
{
    struct tm_simcloud_params p;
    struct tm_launch_request r = req("row-1", "sim.8x-a100", TM_CAPACITY_SPOT);
    struct tm_sim_instance a, b;
    struct tm_sim_row_text text;
    const char *bad[TM_SIM_ROW_NFIELDS];

    params_default(&p);
    assert_int_equal(tm_sim_instance_plan(&p, &r, 12345, &a), 0);
    tm_sim_instance_to_row(&a, &text);
    assert_null(text.fields[10]); /* no terminate request: NULL */
    assert_string_equal(text.fields[7], "spot");
    assert_int_equal(tm_sim_instance_from_row(text.fields, &b), 0);
    assert_memory_equal(&a, &b, sizeof(a));

    memcpy(bad, text.fields, sizeof(bad));
    bad[8] = "12x";
    assert_int_equal(tm_sim_instance_from_row(bad, &b), TM_EBADREPLY);
    memcpy(bad, text.fields, sizeof(bad));
    bad[7] = "spot_then_on_demand";
    assert_int_equal(tm_sim_instance_from_row(bad, &b), TM_EBADREPLY);
    memcpy(bad, text.fields, sizeof(bad));
    bad[0] = NULL;
    assert_int_equal(tm_sim_instance_from_row(bad, &b), TM_EBADREPLY);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_boot_delay),
        cmocka_unit_test(test_idempotent_token),
        cmocka_unit_test(test_capacity),
        cmocka_unit_test(test_errors),
        cmocka_unit_test(test_spot_deterministic),
        cmocka_unit_test(test_spot_hazard_statistics),
        cmocka_unit_test(test_spot_per_pool),
        cmocka_unit_test(test_spot_per_type_and_zone),
        cmocka_unit_test(test_notice_and_interruption),
        cmocka_unit_test(test_terminate_before_interrupt),
        cmocka_unit_test(test_cluster_filter),
        cmocka_unit_test(test_next_event),
        cmocka_unit_test(test_row_roundtrip),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
