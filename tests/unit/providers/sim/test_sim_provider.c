/*
 * tests/unit/providers/sim/test_sim_provider.c: the simulated cloud behind the provider
 * ops, in memory and backed by PostgreSQL (needs the ctest fixture "pg").
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <libpq-fe.h>
#include <uv.h>

#include "core/config.h"
#include "core/err.h"
#include "core/spot_hazards.h"
#include "providers/sim/sim_config.h"
#include "providers/sim/sim_provider.h"
#include "tests/lib/tm_test.h"

/* A virtual clock the test moves by hand. */
struct clock {
    int64_t ms;
};

static int64_t clock_now(void *c) { return ((struct clock *)c)->ms; }

/* Set around every provider call: a callback that sees it fired inside. */
static int in_call;

struct result {
    int calls;
    int status;
    struct tm_instance inst;
    struct tm_instance list[16];
    size_t n;
};

static void on_launch(int status, const struct tm_instance *inst, void *data)
{
    struct result *r = data;

    assert_int_equal(in_call, 0);
    r->calls++;
    r->status = status;
    if (status == 0) {
        assert_non_null(inst);
        r->inst = *inst;
    } else {
        assert_null(inst);
    }
}

static void on_done(int status, void *data)
{
    struct result *r = data;

    assert_int_equal(in_call, 0);
    r->calls++;
    r->status = status;
}

static void on_list(int status, const struct tm_instance *list, size_t n, void *data)
{
    struct result *r = data;

    assert_int_equal(in_call, 0);
    r->calls++;
    r->status = status;
    assert_true(n <= 16);
    r->n = n;
    if (n)
        memcpy(r->list, list, n * sizeof(*list));
}

static void on_closed(void *data) { (*(int *)data)++; }

static void params_default(struct tm_simcloud_params *p)
{
    tm_simcloud_params_init(p);
    p->ntypes = 2;
    snprintf(p->types[0].name, TM_ID_MAX, "sim.8x-a100");
    p->types[0].gpus = 8;
    snprintf(p->types[0].gpu_model, TM_ID_MAX, "A100");
    p->types[0].on_demand_uusd_per_hour = 32770000;
    p->types[0].spot_uusd_per_hour = 9830000;
    p->types[0].capacity = 2;
    snprintf(p->types[1].name, TM_ID_MAX, "sim.1x-t4");
    p->types[1].gpus = 1;
    snprintf(p->types[1].gpu_model, TM_ID_MAX, "T4");
    p->types[1].on_demand_uusd_per_hour = 526000;
    p->nzones = 1;
    snprintf(p->zones[0], TM_ID_MAX, "sim-a");
    p->boot_delay_ms = 90000;
    p->spot_hazard_per_hour = 0.5;
    p->seed = 7;
}

static struct tm_launch_request req(const char *token, const char *type, enum tm_capacity_type cap)
{
    struct tm_launch_request r = {
        .cluster = "c1", .pool = "gpu", .node_id = 11, .token = token,
        .instance_type = type, .zone = "", .capacity = cap,
    };
    return r;
}

/* Run the loop until *calls reaches want (each result counts its calls).
 * A timer due now fires at the start of an iteration, which then still
 * blocks in poll until the next timer (pg_uv's 30 s expiry): so each round
 * first runs without waiting and blocks only when nothing came. */
static void wait_for(uv_loop_t *loop, const int *calls, int want)
{
    while (*calls < want) {
        uv_run(loop, UV_RUN_NOWAIT);
        if (*calls >= want)
            break;
        assert_true(uv_run(loop, UV_RUN_ONCE) != 0 || *calls >= want);
    }
}

static int launch(struct tm_provider *p, const struct tm_launch_request *rq, struct result *r)
{
    int rc;

    in_call = 1;
    rc = p->ops->launch(p, rq, on_launch, r);
    in_call = 0;
    return rc;
}

static int terminate(struct tm_provider *p, const char *id, struct result *r)
{
    int rc;

    in_call = 1;
    rc = p->ops->terminate(p, id, on_done, r);
    in_call = 0;
    return rc;
}

static int list(struct tm_provider *p, const char *cluster, struct result *r)
{
    int rc;

    in_call = 1;
    rc = p->ops->list(p, cluster, on_list, r);
    in_call = 0;
    return rc;
}

static void close_provider(uv_loop_t *loop, struct tm_provider *p)
{
    int closed = 0;

    in_call = 1;
    p->ops->close(p, on_closed, &closed);
    in_call = 0;
    assert_int_equal(closed, 0); /* done fires from the loop */
    wait_for(loop, &closed, 1);
    assert_int_equal(uv_run(loop, UV_RUN_DEFAULT), 0);
    assert_int_equal(closed, 1);
}

/* Launch and wait; returns the callback's status. */
static int launch_wait(uv_loop_t *loop, struct tm_provider *p, const struct tm_launch_request *rq,
                       struct result *r)
{
    memset(r, 0, sizeof(*r));
    assert_int_equal(launch(p, rq, r), 0);
    assert_int_equal(r->calls, 0);
    wait_for(loop, &r->calls, 1);
    return r->status;
}

static int list_wait(uv_loop_t *loop, struct tm_provider *p, const char *cluster, struct result *r)
{
    memset(r, 0, sizeof(*r));
    assert_int_equal(list(p, cluster, r), 0);
    assert_int_equal(r->calls, 0);
    wait_for(loop, &r->calls, 1);
    return r->status;
}

static int terminate_wait(uv_loop_t *loop, struct tm_provider *p, const char *id, struct result *r)
{
    memset(r, 0, sizeof(*r));
    assert_int_equal(terminate(p, id, r), 0);
    assert_int_equal(r->calls, 0);
    wait_for(loop, &r->calls, 1);
    return r->status;
}

/* What both modes must do alike, on one provider. */
static void exercise(uv_loop_t *loop, struct tm_provider *p, struct clock *clk)
{
    struct tm_simcloud_params params;
    struct tm_launch_request rq = req("tok-1", "sim.8x-a100", TM_CAPACITY_ON_DEMAND);
    struct result a, b;
    int64_t price = 0;
    char id[TM_ID_MAX];

    params_default(&params);
    clk->ms = 1000000;
    assert_int_equal(launch_wait(loop, p, &rq, &a), 0);
    assert_int_equal(a.inst.state, TM_INSTANCE_PENDING);
    assert_string_equal(a.inst.token, "tok-1");
    assert_string_equal(a.inst.pool, "gpu");
    assert_int_equal(a.inst.node_id, 11);
    assert_string_equal(a.inst.zone, "sim-a");
    assert_int_equal(a.inst.launched_ms, 1000000);
    snprintf(id, sizeof(id), "%s", a.inst.id);

    /* Idempotent: the same token later is the same instance. */
    clk->ms += 1000;
    assert_int_equal(launch_wait(loop, p, &rq, &b), 0);
    assert_string_equal(b.inst.id, id);
    assert_int_equal(b.inst.launched_ms, 1000000);

    assert_int_equal(list_wait(loop, p, "c1", &a), 0);
    assert_int_equal(a.n, 1);
    assert_int_equal(a.list[0].state, TM_INSTANCE_PENDING);
    clk->ms = 1000000 + params.boot_delay_ms;
    assert_int_equal(list_wait(loop, p, "c1", &a), 0);
    assert_int_equal(a.n, 1);
    assert_int_equal(a.list[0].state, TM_INSTANCE_RUNNING);
    assert_int_equal(list_wait(loop, p, "other", &a), 0);
    assert_int_equal(a.n, 0);

    /* Errors are the cloud's answers: delivered later, not returned. */
    rq = req("tok-x", "sim.nope", TM_CAPACITY_ON_DEMAND);
    assert_int_equal(launch_wait(loop, p, &rq, &a), TM_ENOTFOUND);
    rq = req("tok-y", "sim.1x-t4", TM_CAPACITY_SPOT);
    assert_int_equal(launch_wait(loop, p, &rq, &a), TM_EQUOTA);
    rq = req("tok-z", "sim.1x-t4", TM_CAPACITY_SPOT_THEN_ON_DEMAND);
    assert_int_equal(launch(p, &rq, &a), TM_EINVAL);
    assert_int_equal(terminate_wait(loop, p, "sim-unknown", &a), TM_ENOTFOUND);

    assert_int_equal(p->ops->price(p, "sim.8x-a100", "sim-a", TM_CAPACITY_SPOT, &price), 0);
    assert_int_equal(price, 9830000);
    assert_int_equal(p->ops->price(p, "sim.1x-t4", "", TM_CAPACITY_SPOT, &price), TM_ENOTFOUND);

    /* Capacity 2: a second fits, a third does not until one has stopped. */
    rq = req("tok-2", "sim.8x-a100", TM_CAPACITY_ON_DEMAND);
    assert_int_equal(launch_wait(loop, p, &rq, &a), 0);
    rq = req("tok-3", "sim.8x-a100", TM_CAPACITY_ON_DEMAND);
    assert_int_equal(launch_wait(loop, p, &rq, &a), TM_EQUOTA);
    assert_int_equal(terminate_wait(loop, p, id, &a), 0);
    assert_int_equal(terminate_wait(loop, p, id, &a), 0); /* idempotent */
    assert_int_equal(list_wait(loop, p, "c1", &a), 0);
    assert_int_equal(a.n, 2);
    assert_string_equal(a.list[0].id, id);
    assert_int_equal(a.list[0].state, TM_INSTANCE_STOPPING);
    assert_int_equal(launch_wait(loop, p, &rq, &a), TM_EQUOTA);
    clk->ms += params.shutdown_ms;
    assert_int_equal(list_wait(loop, p, "c1", &a), 0);
    assert_int_equal(a.list[0].state, TM_INSTANCE_TERMINATED);
    assert_int_equal(launch_wait(loop, p, &rq, &a), 0);
    assert_int_equal(a.inst.state, TM_INSTANCE_PENDING);
}

static void test_memory(void **state)
{
    uv_loop_t loop;
    struct tm_simcloud_params params;
    struct tm_provider *p = NULL;
    struct clock clk = {0};

    params_default(&params);
    assert_int_equal(uv_loop_init(&loop), 0);
    assert_int_equal(tm_sim_provider_create_memory(&loop, &params, clock_now, &clk, &p), 0);
    assert_non_null(tm_sim_provider_cloud(p));
    exercise(&loop, p, &clk);
    assert_true(tm_simcloud_next_event_ms(tm_sim_provider_cloud(p), clk.ms) != TM_SIM_NEVER);
    close_provider(&loop, p);
    assert_int_equal(uv_loop_close(&loop), 0);
}

/* Close with calls queued or in flight: each gets TM_ECANCELED, later. */
static void cancel_on_close(uv_loop_t *loop, struct tm_provider *p)
{
    struct tm_launch_request rq = req("tok-c", "sim.1x-t4", TM_CAPACITY_ON_DEMAND);
    struct result a = {0}, b = {0}, c = {0}, d = {0};
    int closed = 0;

    assert_int_equal(launch(p, &rq, &a), 0);
    assert_int_equal(list(p, "c1", &b), 0);
    assert_int_equal(terminate(p, "sim-x", &c), 0);
    rq.instance_type = "sim.nope"; /* an answer already known, still queued */
    assert_int_equal(launch(p, &rq, &d), 0);
    in_call = 1;
    p->ops->close(p, on_closed, &closed);
    in_call = 0;
    assert_int_equal(a.calls + b.calls + c.calls + d.calls + closed, 0);
    assert_int_equal(launch(p, &rq, &a), TM_ECANCELED);
    assert_int_equal(uv_run(loop, UV_RUN_DEFAULT), 0);
    assert_int_equal(closed, 1);
    assert_int_equal(a.calls, 1);
    assert_int_equal(a.status, TM_ECANCELED);
    assert_int_equal(b.calls, 1);
    assert_int_equal(b.status, TM_ECANCELED);
    assert_int_equal(c.calls, 1);
    assert_int_equal(c.status, TM_ECANCELED);
    assert_int_equal(d.calls, 1);
    assert_int_equal(d.status, TM_ECANCELED);
}

static void test_memory_close_cancels(void **state)
{
    uv_loop_t loop;
    struct tm_simcloud_params params;
    struct tm_provider *p = NULL;
    struct clock clk = {0};

    params_default(&params);
    assert_int_equal(uv_loop_init(&loop), 0);
    assert_int_equal(tm_sim_provider_create_memory(&loop, &params, clock_now, &clk, &p), 0);
    cancel_on_close(&loop, p);
    assert_int_equal(uv_loop_close(&loop), 0);
}

static const char *db_url(const char *name)
{
    const char *url = tm_test_db_url(name);

    if (!url)
        fail_msg("no test database: run through ctest (fixture pg)");
    return url;
}

static void test_pg(void **state)
{
    uv_loop_t loop;
    struct tm_simcloud_params params;
    struct tm_provider *p = NULL;
    struct clock clk = {0};
    const char *url = db_url("test_sim_provider_pg");

    params_default(&params);
    assert_int_equal(uv_loop_init(&loop), 0);
    assert_int_equal(tm_sim_provider_create_pg(&loop, &params, url, clock_now, &clk, &p), 0);
    assert_null(tm_sim_provider_cloud(p));
    exercise(&loop, p, &clk);
    close_provider(&loop, p);
    assert_int_equal(uv_loop_close(&loop), 0);
}

static void exec_ok(PGconn *c, const char *sql)
{
    PGresult *r = PQexec(c, sql);

    if (PQresultStatus(r) != PGRES_COMMAND_OK)
        fail_msg("%s: %s", sql, PQerrorMessage(c));
    PQclear(r);
}

/* Injected faults (simcloud.faults, driven by the chaos soak): a call of a
 * faulted operation is refused as throttled or unavailable before the
 * cloud does anything; other operations go on; removing the row ends it. */
static void test_pg_faults(void **state)
{
    uv_loop_t loop;
    struct tm_simcloud_params params;
    struct tm_provider *p = NULL;
    struct clock clk = {.ms = 1000000};
    struct tm_launch_request rq = req("tok-f", "sim.8x-a100", TM_CAPACITY_ON_DEMAND);
    struct result a;
    const char *url = db_url("test_sim_provider_faults");
    PGconn *c = PQconnectdb(url);
    char id[TM_ID_MAX];

    (void)state;
    assert_int_equal(PQstatus(c), CONNECTION_OK);
    params_default(&params);
    assert_int_equal(uv_loop_init(&loop), 0);
    assert_int_equal(tm_sim_provider_create_pg(&loop, &params, url, clock_now, &clk, &p), 0);
    assert_int_equal(list_wait(&loop, p, "c1", &a), 0); /* the schema exists now */
    exec_ok(c, "INSERT INTO simcloud.faults VALUES ('launch', 'throttle', 1)");
    assert_int_equal(launch_wait(&loop, p, &rq, &a), TM_ETHROTTLED);
    assert_int_equal(list_wait(&loop, p, "c1", &a), 0);
    assert_int_equal(a.n, 0); /* refused before anything was made */
    exec_ok(c, "UPDATE simcloud.faults SET kind = 'unavailable'");
    assert_int_equal(launch_wait(&loop, p, &rq, &a), TM_EUNAVAIL);
    exec_ok(c, "DELETE FROM simcloud.faults");
    assert_int_equal(launch_wait(&loop, p, &rq, &a), 0);
    snprintf(id, sizeof(id), "%s", a.inst.id);
    exec_ok(c, "INSERT INTO simcloud.faults VALUES ('terminate', 'throttle', 1), ('list', 'unavailable', 1)");
    assert_int_equal(terminate_wait(&loop, p, id, &a), TM_ETHROTTLED);
    assert_int_equal(list_wait(&loop, p, "c1", &a), TM_EUNAVAIL);
    assert_int_equal(list_wait(&loop, p, "nobody", &a), TM_EUNAVAIL); /* once a call, rows or none */
    assert_int_equal(launch_wait(&loop, p, &rq, &a), 0);               /* same token, same instance */
    assert_string_equal(a.inst.id, id);
    exec_ok(c, "DELETE FROM simcloud.faults");
    assert_int_equal(list_wait(&loop, p, "c1", &a), 0);
    assert_int_equal(a.n, 1);
    assert_int_equal(a.list[0].state, TM_INSTANCE_PENDING); /* the throttled terminate did nothing */
    close_provider(&loop, p);
    assert_int_equal(uv_loop_close(&loop), 0);
    PQfinish(c);
}

static void test_pg_close_cancels(void **state)
{
    uv_loop_t loop;
    struct tm_simcloud_params params;
    struct tm_provider *p = NULL;
    struct clock clk = {0};
    const char *url = db_url("test_sim_provider_cancel");

    params_default(&params);
    assert_int_equal(uv_loop_init(&loop), 0);
    assert_int_equal(tm_sim_provider_create_pg(&loop, &params, url, clock_now, &clk, &p), 0);
    cancel_on_close(&loop, p);
    assert_int_equal(uv_loop_close(&loop), 0);
}

/* The kill -9 story: what one process launched, the next one lists. */
static void test_pg_survives_restart(void **state)
{
    uv_loop_t loop;
    struct tm_simcloud_params params;
    struct tm_provider *p = NULL;
    struct clock clk = {.ms = 5000};
    struct tm_launch_request rq = req("node-42-launch-1", "sim.8x-a100", TM_CAPACITY_SPOT);
    struct tm_sim_instance plan;
    struct tm_instance first;
    struct result a;
    const char *url = db_url("test_sim_provider_restart");
    char conninfo[512];

    snprintf(conninfo, sizeof(conninfo), "%s", url);
    params_default(&params);
    assert_int_equal(uv_loop_init(&loop), 0);
    assert_int_equal(tm_sim_provider_create_pg(&loop, &params, conninfo, clock_now, &clk, &p), 0);
    assert_int_equal(launch_wait(&loop, p, &rq, &a), 0);
    first = a.inst;
    close_provider(&loop, p);
    assert_int_equal(uv_loop_close(&loop), 0);

    /* A new process: new loop, new provider, same database. */
    clk.ms = 6000;
    assert_int_equal(uv_loop_init(&loop), 0);
    assert_int_equal(tm_sim_provider_create_pg(&loop, &params, conninfo, clock_now, &clk, &p), 0);
    assert_int_equal(list_wait(&loop, p, "c1", &a), 0);
    assert_int_equal(a.n, 1);
    assert_string_equal(a.list[0].id, first.id);
    assert_string_equal(a.list[0].token, "node-42-launch-1");
    assert_string_equal(a.list[0].pool, "gpu");
    assert_int_equal(a.list[0].node_id, 11);
    assert_int_equal(a.list[0].capacity, TM_CAPACITY_SPOT);
    assert_int_equal(a.list[0].launched_ms, 5000);
    assert_int_equal(a.list[0].state, TM_INSTANCE_PENDING);
    /* The stored fate is the one the pure model draws for this launch. */
    assert_int_equal(tm_sim_instance_plan(&params, &rq, 5000, &plan), 0);
    assert_string_equal(plan.id, first.id);
    if (plan.notice_ms != TM_SIM_NEVER) {
        clk.ms = plan.interrupt_ms;
        assert_int_equal(list_wait(&loop, p, "c1", &a), 0);
        assert_int_equal(a.n, 1);
        assert_int_equal(a.list[0].state, TM_INSTANCE_TERMINATED);
        assert_true(a.list[0].interrupted);
        assert_int_equal(a.list[0].notice_ms, plan.notice_ms);
    }
    close_provider(&loop, p);
    assert_int_equal(uv_loop_close(&loop), 0);
}

/*
 * Launches from several controllers at once (one provider, hence one
 * connection, each).  To make them truly concurrent, a plain libpq session
 * (blocking is fine in a test) holds a lock that makes every INSERT into
 * simcloud.instances wait, until every launch statement is waiting on a
 * lock; then it lets go.  Without simcloud.launch()'s per-type lock every
 * launcher would count the instances before any inserted.
 */
#define RACERS 6

static void race(uv_loop_t *loop, const char *url, struct tm_provider *const *ps,
                 const struct tm_launch_request *reqs, struct result *res)
{
    PGconn *blocker = PQconnectdb(url), *watcher = PQconnectdb(url);
    PGresult *pr;
    int waiting = 0;

    assert_int_equal(PQstatus(blocker), CONNECTION_OK);
    assert_int_equal(PQstatus(watcher), CONNECTION_OK);
    pr = PQexec(blocker, "BEGIN; LOCK TABLE simcloud.instances IN SHARE ROW EXCLUSIVE MODE");
    assert_int_equal(PQresultStatus(pr), PGRES_COMMAND_OK);
    PQclear(pr);
    memset(res, 0, RACERS * sizeof(*res));
    for (int i = 0; i < RACERS; i++)
        assert_int_equal(launch(ps[i], &reqs[i], &res[i]), 0);
    for (int tries = 0; tries < 2000 && waiting < RACERS; tries++) {
        uv_run(loop, UV_RUN_NOWAIT);
        pr = PQexec(watcher, "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock'"
                             " AND query LIKE '%simcloud.launch%'");
        assert_int_equal(PQresultStatus(pr), PGRES_TUPLES_OK);
        waiting = atoi(PQgetvalue(pr, 0, 0));
        PQclear(pr);
        if (waiting < RACERS)
            uv_sleep(5);
    }
    assert_int_equal(waiting, RACERS);
    for (int i = 0; i < RACERS; i++)
        assert_int_equal(res[i].calls, 0);
    pr = PQexec(blocker, "COMMIT");
    assert_int_equal(PQresultStatus(pr), PGRES_COMMAND_OK);
    PQclear(pr);
    PQfinish(blocker);
    PQfinish(watcher);
    for (int i = 0; i < RACERS; i++)
        wait_for(loop, &res[i].calls, 1);
}

static void test_pg_concurrent(void **state)
{
    uv_loop_t loop;
    struct tm_simcloud_params params;
    struct tm_provider *ps[RACERS];
    struct clock clk = {.ms = 1000};
    struct tm_launch_request reqs[RACERS];
    struct result res[RACERS];
    char tokens[RACERS][16];
    int closed = 0, ok = 0, quota = 0;
    const char *url = db_url("test_sim_provider_concurrent");
    char conninfo[512];

    snprintf(conninfo, sizeof(conninfo), "%s", url);
    params_default(&params);
    params.types[0].capacity = 2;
    assert_int_equal(uv_loop_init(&loop), 0);
    for (int i = 0; i < RACERS; i++) {
        assert_int_equal(tm_sim_provider_create_pg(&loop, &params, conninfo, clock_now, &clk, &ps[i]),
                         0);
        /* Connected, schema in place. */
        assert_int_equal(list_wait(&loop, ps[i], "c1", &res[0]), 0);
    }

    /* The same token from every controller at once: exactly one instance. */
    for (int i = 0; i < RACERS; i++)
        reqs[i] = req("same-token", "sim.1x-t4", TM_CAPACITY_ON_DEMAND);
    race(&loop, conninfo, ps, reqs, res);
    for (int i = 0; i < RACERS; i++) {
        assert_int_equal(res[i].status, 0);
        assert_string_equal(res[i].inst.id, res[0].inst.id);
    }
    assert_int_equal(list_wait(&loop, ps[1], "c1", &res[0]), 0);
    assert_int_equal(res[0].n, 1);

    /* Distinct tokens for a type with capacity 2: two get it. */
    for (int i = 0; i < RACERS; i++) {
        snprintf(tokens[i], sizeof(tokens[i]), "cap-%d", i);
        reqs[i] = req(tokens[i], "sim.8x-a100", TM_CAPACITY_ON_DEMAND);
    }
    race(&loop, conninfo, ps, reqs, res);
    for (int i = 0; i < RACERS; i++) {
        ok += res[i].status == 0;
        quota += res[i].status == TM_EQUOTA;
    }
    assert_int_equal(ok, 2);
    assert_int_equal(quota, RACERS - 2);
    assert_int_equal(list_wait(&loop, ps[0], "c1", &res[0]), 0);
    assert_int_equal(res[0].n, 3);

    for (int i = 0; i < RACERS; i++)
        ps[i]->ops->close(ps[i], on_closed, &closed);
    assert_int_equal(uv_run(&loop, UV_RUN_DEFAULT), 0);
    assert_int_equal(closed, RACERS);
    assert_int_equal(uv_loop_close(&loop), 0);
}

static void test_params_from_config(void **state)
{
    struct tm_config_instance_type types[1] = {{
        .name = "sim.4x-h100", .gpus = 4, .gpu_model = "H100", .cpu_milli = 48000,
        .memory_mib = 512000, .on_demand_uusd_per_hour = 12000000,
        .spot_uusd_per_hour = 4000000, .capacity = 3,
    }};
    struct tm_config_sim block = {.boot_delay_ms = 1000, .shutdown_delay_ms = 5000, .seed = 99};
    struct tm_config_provider provs[2] = {
        {.name = "simcloud", .kind = "sim", .kind_block = &block, .spot_hazard_per_hour = 0.1,
         .spot_notice_ms = 2000, .types = types, .ntypes = 1},
        {.name = "aws", .kind = "aws"},
    };
    char *z1[] = {"sim-a", "sim-b"}, *z2[] = {"sim-b", "sim-c"}, *z3[] = {"us-east-1a"};
    struct tm_config_pool pools[3] = {
        {.name = "p1", .provider = "simcloud", .zones = z1, .nzones = 2,
         .spot_hazard_per_hour = 0.1, .spot_notice_ms = 2000},
        {.name = "p2", .provider = "simcloud", .zones = z2, .nzones = 2,
         .spot_hazard_per_hour = 6.0, .spot_notice_ms = 30000},
        {.name = "p3", .provider = "aws", .zones = z3, .nzones = 1},
    };
    struct tm_config cfg = {.providers = provs, .nproviders = 2, .pools = pools, .npools = 3};
    struct tm_simcloud_params p;

    assert_int_equal(tm_sim_params_from_config(&cfg, &provs[0], &p), 0);
    assert_int_equal(p.ntypes, 1);
    assert_string_equal(p.types[0].name, "sim.4x-h100");
    assert_string_equal(p.types[0].gpu_model, "H100");
    assert_int_equal(p.types[0].gpus, 4);
    assert_int_equal(p.types[0].capacity, 3);
    assert_int_equal(p.types[0].spot_uusd_per_hour, 4000000);
    assert_int_equal(p.boot_delay_ms, 1000);
    assert_int_equal(p.spot_notice_ms, 2000);
    assert_int_equal(p.seed, 99);
    assert_true(p.spot_hazard_per_hour == 0.1);
    assert_int_equal(p.nzones, 3);
    assert_string_equal(p.zones[0], "sim-a");
    assert_string_equal(p.zones[1], "sim-b");
    assert_string_equal(p.zones[2], "sim-c");
    assert_int_equal(p.shutdown_ms, 5000);
    assert_int_equal(p.retention_ms, 3600000); /* defaults kept */
    /* Each pool of this provider with its own hazard and notice; p3 is aws. */
    assert_int_equal(p.npools, 2);
    assert_string_equal(p.pools[0].pool, "p1");
    assert_true(p.pools[0].hazard_per_hour == 0.1);
    assert_int_equal(p.pools[0].notice_ms, 2000);
    assert_string_equal(p.pools[1].pool, "p2");
    assert_true(p.pools[1].hazard_per_hour == 6.0);
    assert_int_equal(p.pools[1].notice_ms, 30000);

    /* Without spot_hazards no (type, zone) has a hazard of its own. */
    for (size_t z = 0; z < p.nzones; z++)
        assert_false(p.cells[0][z].set);

    types[0].name = "a-name-far-too-long-for-an-instance-type-the-cloud-would-ever-offer";
    assert_int_equal(tm_sim_params_from_config(&cfg, &provs[0], &p), TM_EINVAL);
}

/* A provider's fitted table (config spot_hazards) sets the hazard of each
 * (type, zone) it gives one for: sim-b here; sim-a has an availability
 * only, sim-c no row, and a zone of another provider's pool is not the
 * sim's. */
static void test_params_from_config_spot_hazards(void **state)
{
    static const char table[] = "hazards:\n"
                                "  - {type: sim.4x-h100, zone: sim-a, availability: 0.5}\n"
                                "  - {type: sim.4x-h100, zone: sim-b, hazard_per_hour: 0.7353}\n"
                                "  - {type: sim.4x-h100, zone: us-east-1a, hazard_per_hour: 9}\n";
    struct tm_spot_hazards *h = calloc(1, sizeof(*h));
    struct tm_config_instance_type types[1] = {{
        .name = "sim.4x-h100", .gpus = 4, .gpu_model = "H100", .cpu_milli = 48000,
        .memory_mib = 512000, .on_demand_uusd_per_hour = 12000000, .spot_uusd_per_hour = 4000000,
    }};
    struct tm_config_sim block = {0};
    struct tm_config_provider prov = {.name = "simcloud", .kind = "sim", .kind_block = &block,
                                      .spot_hazard_per_hour = 0.1, .types = types, .ntypes = 1,
                                      .spot_hazards = h};
    char *zones[] = {"sim-a", "sim-b", "sim-c"};
    struct tm_config_pool pool = {.name = "p1", .provider = "simcloud", .zones = zones, .nzones = 3,
                                  .spot_hazard_per_hour = 6.0, .spot_notice_ms = 30000};
    struct tm_config cfg = {.providers = &prov, .nproviders = 1, .pools = &pool, .npools = 1};
    struct tm_simcloud_params p;
    char err[256];
    double hazard;
    int64_t notice;

    (void)state;
    assert_non_null(h);
    assert_int_equal(tm_spot_hazards_parse("h.yaml", table, strlen(table), h, err, sizeof(err)), 0);
    assert_int_equal(tm_sim_params_from_config(&cfg, &prov, &p), 0);
    assert_int_equal(p.nzones, 3);
    assert_false(p.cells[0][0].set);
    assert_true(p.cells[0][1].set);
    assert_true(p.cells[0][1].hazard_per_hour == 0.7353);
    assert_false(p.cells[0][2].set);
    tm_sim_spot_for_launch(&p, "p1", "sim.4x-h100", "sim-b", &hazard, &notice);
    assert_true(hazard == 0.7353);
    assert_int_equal(notice, 30000);
    tm_sim_spot_for_launch(&p, "p1", "sim.4x-h100", "sim-a", &hazard, &notice);
    assert_true(hazard == 6.0);
    free(h);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_memory),
        cmocka_unit_test(test_memory_close_cancels),
        cmocka_unit_test(test_pg),
        cmocka_unit_test(test_pg_faults),
        cmocka_unit_test(test_pg_close_cancels),
        cmocka_unit_test(test_pg_survives_restart),
        cmocka_unit_test(test_pg_concurrent),
        cmocka_unit_test(test_params_from_config),
        cmocka_unit_test(test_params_from_config_spot_hazards),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
