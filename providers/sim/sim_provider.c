/*
 * providers/sim/sim_provider.c: the simulated cloud behind the provider ops.
 *
 * Each call becomes a struct sim_op.  In memory mode the op waits in a FIFO
 * until a zero timer runs it against the struct tm_simcloud, on a later loop
 * iteration, so no callback ever fires inside the call.  In pg mode the op
 * is sent at once as one parameterised statement on the provider's own
 * connection (pg_uv never calls back from inside tm_pg_query either); errors
 * known before anything is sent (unknown type, spot not offered) go through
 * the same FIFO so they are delivered later too.
 *
 * Closing runs from the timer: queued and in-flight ops get TM_ECANCELED
 * there (not inside close()), then the connection closes; pg_uv then answers
 * the abandoned requests (we only free our ops: their callbacks already
 * fired), and last our timer closes, after which done fires and the
 * provider is freed.  outstanding counts requests pg_uv still holds, so the
 * provider never goes while pg_uv may still call into it.
 */
#include "providers/sim/sim_provider.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "controller/io/pg_uv.h"
#include "core/config.h"
#include "core/err.h"
#include "core/log.h"
#include "core/spot_hazards.h"
#include "providers/common/launch.h"
#include "providers/sim/sim_config.h"

enum sim_op_kind {
    SIM_OP_LAUNCH,
    SIM_OP_TERMINATE,
    SIM_OP_LIST,
    SIM_OP_LAUNCH_SET,        /* memory mode only (pg mode launches one by one) */
    SIM_OP_KIND_MAX,
};

static const char *const op_names[SIM_OP_KIND_MAX] = {"launch", "terminate", "list", "launch_set"};

struct sim_provider;

struct sim_op {
    struct sim_op *next;      /* in the FIFO or in the in-flight list */
    struct sim_op **pprev;    /* in the in-flight list */
    struct sim_provider *sp;
    enum sim_op_kind kind;
    union {
        tm_launch_cb launch;
        tm_done_cb done;
        tm_list_cb list;
        tm_launch_set_cb launch_set;
    } cb;
    void *data;
    int preset;               /* an error to deliver from the FIFO, or 0 */
    bool delivered;           /* the user callback has fired */
    /* Copies of the arguments (memory mode runs the op later). */
    struct tm_sim_instance args; /* id, token, cluster, pool, node_id, type, zone, capacity */
    struct tm_sim_instance *set; /* launch_set: one per member (args' fields) */
    size_t nset;
};

struct sim_provider {
    struct tm_provider base;  /* base.impl points back here */
    uv_loop_t *loop;
    struct tm_simcloud *sc;   /* the cloud (memory) or just its params (pg) */
    const struct tm_simcloud_params *params;
    tm_sim_clock_fn now_ms;
    void *clock;
    uv_timer_t timer;         /* runs the FIFO, and the close sequence */
    struct sim_op *fifo_head, **fifo_tail;
    struct sim_op *inflight;  /* pg mode: ops pg_uv holds */
    /* pg mode */
    struct tm_pg *pg;
    bool memory;
    bool schema_ok;           /* the setup script succeeded once */
    bool schema_sent;         /* a setup script is queued or in flight */
    unsigned outstanding;     /* requests pg_uv still holds (setup included) */
    /* closing */
    bool closing, close_started, pg_closed, timer_closing;
    struct tm_launch_env launch;  /* the engine's view: launches in flight, close */
    struct tm_reservations resv;  /* params' reservations, as the engine offers them */
};

static const struct tm_provider_ops sim_ops;

/* ---- the SQL of the fake cloud (schema "simcloud") -------------------- */

/*
 * Created on first use by the provider itself: this is the fake cloud's
 * data, not tarmac's, so it is not in migrations/.  One implicit
 * transaction (no BEGIN/COMMIT: a failure then leaves no aborted block
 * behind), serialised by an advisory lock because concurrent CREATE ... IF
 * NOT EXISTS of the same object can still collide on the catalogs.
 *
 * simcloud.launch() runs the whole launch in one statement.  ON CONFLICT
 * has no target because the id, derived from the token, is unique too: a
 * concurrent insert of the same token collides on both.  A plpgsql
 * function takes a fresh snapshot for each statement inside it, so the
 * count below sees every launch committed before the type lock was
 * granted; a plain INSERT ... SELECT would count from a snapshot taken
 * before waiting on the lock and let two launchers both pass the cap.
 */
static const char setup_sql[] =
    "SELECT pg_advisory_xact_lock(hashtext('simcloud.setup'));\n"
    "CREATE SCHEMA IF NOT EXISTS simcloud;\n"
    "CREATE TABLE IF NOT EXISTS simcloud.instances (\n"
    "    id text PRIMARY KEY,\n"
    "    token text NOT NULL UNIQUE,\n"
    "    cluster text NOT NULL,\n"
    "    pool text NOT NULL,\n"
    "    node_id bigint NOT NULL,\n"
    "    instance_type text NOT NULL,\n"
    "    zone text NOT NULL,\n"
    "    capacity text NOT NULL CHECK (capacity IN ('on_demand', 'spot')),\n"
    "    launched_ms bigint NOT NULL,\n"
    "    ready_ms bigint NOT NULL,\n"
    "    terminate_requested_ms bigint,\n"
    "    interrupt_ms bigint,\n"
    "    notice_ms bigint\n"
    ");\n"
    /* Reserved capacity: the reservation an instance runs in (NULL none). */
    "ALTER TABLE simcloud.instances ADD COLUMN IF NOT EXISTS reservation text;\n"
    "CREATE INDEX IF NOT EXISTS instances_cluster ON simcloud.instances (cluster);\n"
    "CREATE INDEX IF NOT EXISTS instances_type ON simcloud.instances (instance_type);\n"
    /* Injected faults, for the chaos soak (scripts/soak.sh): while a row
     * names an operation, that share of its calls is refused before the
     * cloud does anything, as a throttled (429, RequestLimitExceeded) or
     * unavailable (5xx) cloud API would refuse it. */
    "CREATE TABLE IF NOT EXISTS simcloud.faults (\n"
    "    op text PRIMARY KEY CHECK (op IN ('launch', 'terminate', 'list')),\n"
    "    kind text NOT NULL CHECK (kind IN ('throttle', 'unavailable')),\n"
    "    rate double precision NOT NULL CHECK (rate >= 0 AND rate <= 1)\n"
    ");\n"
    "CREATE OR REPLACE FUNCTION simcloud.fault(p_op text) RETURNS boolean\n"
    "LANGUAGE plpgsql VOLATILE AS $fn$\n"
    "DECLARE f simcloud.faults;\n"
    "BEGIN\n"
    "    SELECT * INTO f FROM simcloud.faults WHERE op = p_op;\n"
    "    IF FOUND AND random() < f.rate THEN\n"
    "        RAISE EXCEPTION 'injected fault: % %', p_op, f.kind\n"
    "            USING ERRCODE = CASE f.kind WHEN 'throttle' THEN 'TMT01' ELSE 'TMU01' END;\n"
    "    END IF;\n"
    "    RETURN true;\n"
    "END\n"
    "$fn$;\n"
    "CREATE OR REPLACE FUNCTION simcloud.launch(\n"
    "    p_id text, p_token text, p_cluster text, p_pool text, p_node_id bigint,\n"
    "    p_type text, p_zone text, p_capacity text, p_launched bigint, p_ready bigint,\n"
    "    p_terminate bigint, p_interrupt bigint, p_notice bigint, p_reservation text,\n"
    "    p_cap integer, p_now bigint, p_shutdown bigint)\n"
    "RETURNS SETOF simcloud.instances LANGUAGE plpgsql AS $fn$\n"
    "BEGIN\n"
    "    PERFORM simcloud.fault('launch');\n"
    "    PERFORM pg_advisory_xact_lock(hashtext('simcloud.type'), hashtext(p_type));\n"
    "    RETURN QUERY SELECT * FROM simcloud.instances i WHERE i.token = p_token;\n"
    "    IF FOUND THEN\n"
    "        RETURN;\n"
    "    END IF;\n"
    /* p_cap is the reservation's count for a launch into one (its
     * instances run on capacity held for it), else the type's. */
    "    IF p_cap > 0 AND (SELECT count(*) FROM simcloud.instances i\n"
    "                      WHERE i.instance_type = p_type\n"
    "                        AND i.reservation IS NOT DISTINCT FROM p_reservation\n"
    "                        AND coalesce(LEAST(i.terminate_requested_ms + p_shutdown,\n"
    "                                           i.interrupt_ms) > p_now, true)) >= p_cap THEN\n"
    "        RAISE EXCEPTION 'capacity of instance type \"%\" used up', p_type\n"
    "            USING ERRCODE = 'TMQ01';\n"
    "    END IF;\n"
    "    INSERT INTO simcloud.instances (" TM_SIM_ROW_COLUMNS ")\n"
    "    VALUES (p_id, p_token, p_cluster, p_pool, p_node_id, p_type, p_zone, p_capacity,\n"
    "            p_launched, p_ready, p_terminate, p_interrupt, p_notice, p_reservation)\n"
    "    ON CONFLICT DO NOTHING;\n"
    "    RETURN QUERY SELECT * FROM simcloud.instances i WHERE i.token = p_token;\n"
    "    IF NOT FOUND THEN\n"
    "        RAISE EXCEPTION 'instance id \"%\" taken by another token', p_id\n"
    "            USING ERRCODE = 'unique_violation';\n"
    "    END IF;\n"
    "END\n"
    "$fn$;\n";

/* The SQLSTATE simcloud.launch() raises when the type is full. */
#define SQLSTATE_QUOTA "TMQ01"
/* simcloud.fault()'s: a throttled call, an unavailable cloud. */
#define SQLSTATE_THROTTLED "TMT01"
#define SQLSTATE_UNAVAILABLE "TMU01"

static const char launch_sql[] =
    "SELECT " TM_SIM_ROW_COLUMNS " FROM simcloud.launch($1, $2, $3, $4, $5, $6, $7, $8,"
    " $9, $10, $11, $12, $13, $14, $15, $16, $17)";

static const char terminate_sql[] =
    "UPDATE simcloud.instances"
    " SET terminate_requested_ms = coalesce(terminate_requested_ms, $2::bigint)"
    " WHERE id = $1 AND (SELECT simcloud.fault('terminate')) RETURNING " TM_SIM_ROW_COLUMNS;

static const char list_sql[] =
    "SELECT " TM_SIM_ROW_COLUMNS " FROM simcloud.instances"
    " WHERE (SELECT simcloud.fault('list')) AND cluster = $1 ORDER BY launched_ms, id";
static const char list_own_sql[] =
    "SELECT " TM_SIM_ROW_COLUMNS " FROM simcloud.instances"
    " WHERE (SELECT simcloud.fault('list')) AND cluster = $1"
    " AND pool = ANY($2::text[]) ORDER BY launched_ms, id";

/* The provider's pool names as a text[] literal, each element quoted. */
static int pools_literal(const struct tm_simcloud_params *p, char *buf, size_t size)
{
    size_t n = 0;

    if (size < 3)
        return TM_EINVAL;
    buf[n++] = '{';
    for (size_t i = 0; i < p->npools; i++) {
        if (n + 2 >= size)
            return TM_EINVAL;
        if (i > 0)
            buf[n++] = ',';
        buf[n++] = '"';
        for (const char *c = p->pools[i].pool; *c; c++) {
            if (n + 4 >= size)
                return TM_EINVAL;
            if (*c == '"' || *c == '\\')
                buf[n++] = '\\';
            buf[n++] = *c;
        }
        buf[n++] = '"';
    }
    if (n + 2 > size)
        return TM_EINVAL;
    buf[n++] = '}';
    buf[n] = '\0';
    return 0;
}

/* ---- ops --------------------------------------------------------------- */

static struct sim_provider *impl(struct tm_provider *p) { return p->impl; }

static int64_t now(const struct sim_provider *sp) { return sp->now_ms(sp->clock); }

static uint64_t launch_now(void *clock) { return (uint64_t)now(clock); }


static void on_timer(uv_timer_t *timer);

static void fifo_push(struct sim_provider *sp, struct sim_op *op)
{
    op->next = NULL;
    *sp->fifo_tail = op;
    sp->fifo_tail = &op->next;
    /* A zero timer fires on the next loop iteration: never inside the call. */
    if (!uv_is_active((uv_handle_t *)&sp->timer))
        uv_timer_start(&sp->timer, on_timer, 0, 0);
}

static void inflight_add(struct sim_provider *sp, struct sim_op *op)
{
    op->next = sp->inflight;
    op->pprev = &sp->inflight;
    if (sp->inflight)
        sp->inflight->pprev = &op->next;
    sp->inflight = op;
}

static void inflight_remove(struct sim_op *op)
{
    *op->pprev = op->next;
    if (op->next)
        op->next->pprev = op->pprev;
    op->next = NULL;
    op->pprev = NULL;
}

/* Fire the user callback of op, once. */
static void deliver(struct sim_op *op, int status, const struct tm_instance *inst,
                    const struct tm_instance *list, size_t n)
{
    if (op->delivered)
        return;
    op->delivered = true;
    switch (op->kind) {
    case SIM_OP_LAUNCH:
        op->cb.launch(status, status == 0 ? inst : NULL, op->data);
        break;
    case SIM_OP_TERMINATE:
        op->cb.done(status, op->data);
        break;
    case SIM_OP_LAUNCH_SET:
        op->cb.launch_set(status, status == 0 ? list : NULL, status == 0 ? n : 0, op->data);
        break;
    default:
        op->cb.list(status, status == 0 ? list : NULL, status == 0 ? n : 0, op->data);
        break;
    }
}

static struct sim_op *op_new(struct sim_provider *sp, enum sim_op_kind kind, void *data)
{
    struct sim_op *op = calloc(1, sizeof(*op));

    if (!op)
        return NULL;
    op->sp = sp;
    op->kind = kind;
    op->data = data;
    return op;
}

/* The request an op's copied arguments name, and the copy of a request. */
static struct tm_launch_request req_of(const struct tm_sim_instance *a)
{
    return (struct tm_launch_request){
        .cluster = a->cluster, .pool = a->pool, .node_id = a->node_id, .token = a->token,
        .instance_type = a->instance_type, .zone = a->zone, .capacity = a->capacity,
    };
}

static void args_of(const struct tm_launch_request *req, const char *zone,
                    struct tm_sim_instance *a)
{
    tm_id_copy(a->token, req->token);
    tm_id_copy(a->cluster, req->cluster);
    tm_id_copy(a->pool, req->pool);
    tm_id_copy(a->instance_type, req->instance_type);
    tm_id_copy(a->zone, zone);
    a->node_id = req->node_id;
    a->capacity = req->capacity;
}

/* A gang's set against the in-memory cloud, all or none: refused whole
 * (TM_EQUOTA) when the type has no room for every member, and a member
 * refused after others were made (spot capacity) takes them back at once,
 * so nothing is billed past the attempt. */
static void run_memory_set(struct sim_provider *sp, struct sim_op *op)
{
    const struct tm_sim_type *type = op->nset ? tm_sim_type_find(sp->params, op->set[0].instance_type) : NULL;
    struct tm_instance *made = calloc(op->nset + 1, sizeof(*made));
    int64_t t = now(sp);
    size_t n = 0;
    int r = made ? 0 : TM_ENOMEM;

    if (r == 0 && type && type->capacity &&
        tm_simcloud_count_alive(sp->sc, type->name, t) + op->nset > type->capacity)
        r = TM_EQUOTA;
    for (; r == 0 && n < op->nset; n++) {
        const struct tm_sim_instance *a = &op->set[n];
        struct tm_launch_request req = req_of(a);
        r = tm_simcloud_launch(sp->sc, &req, t, &made[n]);
        if (r < 0)
            break;
    }
    if (r < 0)
        for (size_t k = 0; k < n; k++)
            tm_simcloud_terminate(sp->sc, made[k].id, t);
    deliver(op, r, NULL, made, r == 0 ? op->nset : 0);
    free(made);
}

/* Run one op against the in-memory cloud and deliver its result. */
static void run_memory(struct sim_provider *sp, struct sim_op *op)
{
    const struct tm_sim_instance *a = &op->args;
    struct tm_instance inst, *list = NULL;
    size_t n = 0;
    int r;

    switch (op->kind) {
    case SIM_OP_LAUNCH_SET:
        run_memory_set(sp, op);
        break;
    case SIM_OP_LAUNCH: {
        struct tm_launch_request req = req_of(a);

        r = a->reservation[0] ? tm_simcloud_launch_reserved(sp->sc, &req, a->reservation, now(sp), &inst)
                              : tm_simcloud_launch(sp->sc, &req, now(sp), &inst);
        deliver(op, r, &inst, NULL, 0);
        break;
    }
    case SIM_OP_TERMINATE:
        deliver(op, tm_simcloud_terminate(sp->sc, a->id, now(sp)), NULL, NULL, 0);
        break;
    default:
        r = tm_simcloud_list(sp->sc, a->cluster, now(sp), &list, &n);
        deliver(op, r, NULL, list, n);
        free(list);
        break;
    }
}

static void start_close(struct sim_provider *sp);

static void on_timer(uv_timer_t *timer)
{
    struct sim_provider *sp = timer->data;
    struct sim_op *batch = sp->fifo_head, *op;

    /* Take the whole FIFO first: ops queued by the callbacks below wait
     * for the next iteration. */
    sp->fifo_head = NULL;
    sp->fifo_tail = &sp->fifo_head;
    while (batch) {
        op = batch;
        batch = op->next;
        if (sp->closing)
            deliver(op, TM_ECANCELED, NULL, NULL, 0);
        else if (op->preset)
            deliver(op, op->preset, NULL, NULL, 0);
        else
            run_memory(sp, op);
        free(op->set);
        free(op);
    }
    if (sp->closing && !sp->close_started)
        start_close(sp);
}

/* ---- pg mode ------------------------------------------------------------ */

/* Map a pg_uv reply status to what the provider's callers act on. */
static int map_pg_status(const struct sim_op *op, const struct tm_pg_reply *reply)
{
    if (reply->status == 0)
        return 0;
    if (reply->status == TM_EDB && reply->sqlstate && strcmp(reply->sqlstate, SQLSTATE_QUOTA) == 0)
        return TM_EQUOTA;
    if (reply->status == TM_EDB && reply->sqlstate && strcmp(reply->sqlstate, SQLSTATE_THROTTLED) == 0)
        return TM_ETHROTTLED;
    if (reply->status == TM_EDB && reply->sqlstate && strcmp(reply->sqlstate, SQLSTATE_UNAVAILABLE) == 0)
        return TM_EUNAVAIL;
    if (reply->status == TM_ECANCELED || reply->status == -ETIMEDOUT)
        return reply->status;
    /* pg_uv has logged a lost connection already; a refused statement
     * (a bug in the fake cloud's SQL) is logged here, where its detail
     * is still known. */
    if (reply->status != TM_EDB)
        return TM_EUNAVAIL;
    tm_log_warn("simulated cloud database refused a statement", "op=%s error=\"%s\" status=%s",
                op ? op_names[op->kind] : "setup", reply->error ? reply->error : "",
                tm_err_name(reply->status));
    return TM_EUNAVAIL;
}

static void maybe_finish_close(struct sim_provider *sp);

static void on_setup_reply(const struct tm_pg_reply *reply, void *data)
{
    struct sim_provider *sp = data;

    sp->outstanding--;
    sp->schema_sent = false;
    if (reply->status == 0)
        sp->schema_ok = true;
    else if (reply->status != TM_ECANCELED)
        map_pg_status(NULL, reply); /* logs; the next op sends it again */
    if (sp->closing)
        maybe_finish_close(sp);
}

/* Make sure the schema exists before the next request: pg_uv sends in
 * FIFO order on one connection, so queueing the setup first is enough. */
static int ensure_schema(struct sim_provider *sp)
{
    int r;

    if (sp->schema_ok || sp->schema_sent)
        return 0;
    r = tm_pg_exec(sp->pg, setup_sql, on_setup_reply, sp);
    if (r < 0)
        return r;
    sp->schema_sent = true;
    sp->outstanding++;
    return 0;
}

/* Parse the rows of res into rows[]; TM_EBADREPLY on any surprise. */
static int parse_row(const PGresult *res, int i, struct tm_sim_instance *ret)
{
    const char *fields[TM_SIM_ROW_NFIELDS];

    if (PQnfields(res) != TM_SIM_ROW_NFIELDS)
        return TM_EBADREPLY;
    for (int f = 0; f < TM_SIM_ROW_NFIELDS; f++)
        fields[f] = PQgetisnull(res, i, f) ? NULL : PQgetvalue(res, i, f);
    return tm_sim_instance_from_row(fields, ret);
}

static void on_pg_reply(const struct tm_pg_reply *reply, void *data)
{
    struct sim_op *op = data;
    struct sim_provider *sp = op->sp;
    const PGresult *res = reply->nresults ? reply->results[0] : NULL;
    struct tm_sim_instance row;
    struct tm_instance inst, *list = NULL;
    size_t n = 0;
    int r;

    sp->outstanding--;
    inflight_remove(op);
    if (op->delivered) /* cancelled by close: only the memory is left */
        goto out;
    r = map_pg_status(op, reply);
    if (r < 0) {
        deliver(op, r, NULL, NULL, 0);
        goto out;
    }
    if (!res) {
        deliver(op, TM_EBADREPLY, NULL, NULL, 0);
        goto out;
    }
    switch (op->kind) {
    case SIM_OP_LAUNCH:
        r = PQntuples(res) == 1 ? parse_row(res, 0, &row) : TM_EBADREPLY;
        /* An old token may name an instance gone from listings: it is
         * still that (terminated) instance, as in memory mode. */
        if (r == 0)
            tm_sim_instance_view(sp->params, &row, now(sp), &inst);
        deliver(op, r, &inst, NULL, 0);
        break;
    case SIM_OP_TERMINATE:
        r = PQntuples(res) == 1 ? parse_row(res, 0, &row) : TM_ENOTFOUND;
        /* Gone from listings means unknown, as in memory mode. */
        if (r == 0 && !tm_sim_instance_view(sp->params, &row, now(sp), &inst))
            r = TM_ENOTFOUND;
        deliver(op, r, NULL, NULL, 0);
        break;
    default: {
        int rows = PQntuples(res);
        int64_t t = now(sp);

        r = 0;
        if (rows > 0) {
            list = calloc((size_t)rows, sizeof(*list));
            if (!list)
                r = TM_ENOMEM;
        }
        for (int i = 0; r == 0 && i < rows; i++) {
            r = parse_row(res, i, &row);
            if (r == 0 && tm_sim_instance_view(sp->params, &row, t, &list[n]))
                n++;
        }
        deliver(op, r, NULL, list, n);
        free(list);
        break;
    }
    }
out:
    free(op);
    if (sp->closing)
        maybe_finish_close(sp);
}

/* Send op's statement; on failure the op is not sent and the caller owns it. */
static int send_pg(struct sim_provider *sp, struct sim_op *op, const char *sql, int nparams,
                   const char *const *params)
{
    int r = ensure_schema(sp);

    if (r < 0)
        return r;
    r = tm_pg_query(sp->pg, sql, nparams, params, on_pg_reply, op);
    if (r < 0)
        return r;
    sp->outstanding++;
    inflight_add(sp, op);
    return 0;
}

static int launch_pg(struct sim_provider *sp, struct sim_op *op, const struct tm_launch_request *req)
{
    const struct tm_sim_type *type;
    struct tm_sim_instance row;
    struct tm_sim_row_text text;
    char cap[32], nowbuf[32], shutdown[32];
    const char *params[TM_SIM_ROW_NFIELDS + 3];
    int64_t t = now(sp);
    int r;

    r = op->args.reservation[0]
            ? tm_sim_reservation_plan(sp->params, req, op->args.reservation, t, &row)
            : tm_sim_instance_plan(sp->params, req, t, &row);
    if (r < 0) {
        /* The cloud's answer, not a failure to start: deliver it later. */
        op->preset = r;
        fifo_push(sp, op);
        return 0;
    }
    type = tm_sim_type_find(sp->params, row.instance_type);
    tm_sim_instance_to_row(&row, &text);
    memcpy(params, text.fields, sizeof(text.fields));
    snprintf(cap, sizeof(cap), "%u",
             row.reservation[0] ? tm_sim_reservation_find(sp->params, row.reservation)->count
                                : type->capacity);
    snprintf(nowbuf, sizeof(nowbuf), "%lld", (long long)t);
    snprintf(shutdown, sizeof(shutdown), "%lld",
             (long long)(sp->params->shutdown_ms > 0 ? sp->params->shutdown_ms : 0));
    params[TM_SIM_ROW_NFIELDS] = cap;
    params[TM_SIM_ROW_NFIELDS + 1] = nowbuf;
    params[TM_SIM_ROW_NFIELDS + 2] = shutdown;
    return send_pg(sp, op, launch_sql, TM_SIM_ROW_NFIELDS + 3, params);
}

/* ---- the provider ops ----------------------------------------------------- */

/* The engine's primitives.  The sim's create finds what the token made
 * (tm_simcloud_launch, simcloud.launch() under its type lock), so it has no
 * find of its own; it has one offer (no pools: the request's zone, "" lets
 * the simulated cloud pick) and no shortage memory, and its answers go back
 * as they are: a refusal is the launch's result. */
struct sim_launch {
    char cluster[TM_ID_MAX];
};

static void on_launch_answer(int status, const struct tm_instance *inst, void *data)
{
    struct tm_launch *l = data;
    /* A reservation that cannot take it (full, outside its term) is
     * passed over for the next offer; any other refusal is the launch's. */
    bool pass = l->offers[l->cur].reservation[0] &&
                (status == TM_EQUOTA || status == TM_EINVAL || status == TM_ENOTFOUND);

    tm_launch_made(l, status == 0 ? TM_LAUNCH_OK : pass ? TM_LAUNCH_SHORT : TM_LAUNCH_FATAL, status,
                   inst, pass ? tm_err_name(status) : NULL);
}

static int sim_launch_prepare(struct tm_launch *l, const struct tm_launch_request *req)
{
    struct sim_launch *sl = l->priv;

    tm_id_copy(sl->cluster, req->cluster);
    return 0;
}

static int sim_launch_create(struct tm_launch *l, size_t i)
{
    struct sim_provider *sp = l->env->provider;
    const struct sim_launch *sl = l->priv;
    const struct tm_launch_offer *o = &l->offers[i];
    const struct tm_launch_request req = {
        .cluster = sl->cluster, .pool = l->pool, .node_id = l->node_id, .token = l->token,
        .instance_type = o->type, .zone = o->zone, .capacity = o->capacity,
    };
    struct sim_op *op = op_new(sp, SIM_OP_LAUNCH, l);
    int r;

    if (!op)
        return TM_ENOMEM;
    op->cb.launch = on_launch_answer;
    args_of(&req, req.zone, &op->args);
    tm_id_copy(op->args.reservation, o->reservation);
    if (sp->memory) {
        fifo_push(sp, op);
        return 0;
    }
    r = launch_pg(sp, op, &req);
    if (r < 0)
        free(op);
    return r;
}

static const struct tm_launch_backend sim_launch_backend = {
    .cloud = "sim",
    .priv_size = sizeof(struct sim_launch),
    .prepare = sim_launch_prepare,
    .create = sim_launch_create,
};

static int sim_launch(struct tm_provider *p, const struct tm_launch_request *req,
                      tm_launch_cb cb, void *data)
{
    struct tm_launch_request q;

    /* The sim names the cluster in each request and takes one market. */
    if (!req || !tm_id_fits(req->cluster) || (req->pool && !tm_id_fits(req->pool)) ||
        (req->capacity != TM_CAPACITY_SPOT && req->capacity != TM_CAPACITY_ON_DEMAND))
        return TM_EINVAL;
    q = *req;
    q.pool = req->pool ? req->pool : "";
    return tm_launch_start(&impl(p)->launch, &sim_launch_backend, &q, cb, data);
}

/* A gang's set: in memory mode one op, run all or none on a later loop
 * iteration; in pg mode one by one, released whole if one fails. */
static int sim_launch_set(struct tm_provider *p, const struct tm_launch_set *set,
                          tm_launch_set_cb cb, void *data)
{
    struct sim_provider *sp = impl(p);
    struct sim_op *op;

    if (!set || !cb || !set->reqs || set->n == 0)
        return TM_EINVAL;
    if (!sp->memory)
        return tm_provider_launch_set_each(p, set, cb, data);
    for (size_t i = 0; i < set->n; i++) {
        const struct tm_launch_request *req = &set->reqs[i];
        if (!req->token || !req->token[0] || !tm_id_fits(req->token) || !tm_id_fits(req->cluster) ||
            !tm_id_fits(req->instance_type) || (req->pool && !tm_id_fits(req->pool)) ||
            (req->zone && !tm_id_fits(req->zone)) ||
            (req->capacity != TM_CAPACITY_SPOT && req->capacity != TM_CAPACITY_ON_DEMAND))
            return TM_EINVAL;
    }
    if (sp->closing)
        return TM_ECANCELED;
    op = op_new(sp, SIM_OP_LAUNCH_SET, data);
    if (!op)
        return TM_ENOMEM;
    op->set = calloc(set->n, sizeof(*op->set));
    if (!op->set) {
        free(op);
        return TM_ENOMEM;
    }
    op->cb.launch_set = cb;
    op->nset = set->n;
    /* one zone for the set: the first member's */
    for (size_t i = 0; i < set->n; i++)
        args_of(&set->reqs[i], set->reqs[0].zone, &op->set[i]);
    fifo_push(sp, op);
    return 0;
}

static int sim_terminate(struct tm_provider *p, const char *instance_id, tm_done_cb cb, void *data)
{
    struct sim_provider *sp = impl(p);
    struct sim_op *op;
    char nowbuf[32];
    const char *params[2];
    int r;

    if (!cb || !tm_id_fits(instance_id))
        return TM_EINVAL;
    if (sp->closing)
        return TM_ECANCELED;
    op = op_new(sp, SIM_OP_TERMINATE, data);
    if (!op)
        return TM_ENOMEM;
    op->cb.done = cb;
    snprintf(op->args.id, TM_ID_MAX, "%s", instance_id);
    if (sp->memory) {
        fifo_push(sp, op);
        return 0;
    }
    snprintf(nowbuf, sizeof(nowbuf), "%lld", (long long)now(sp));
    params[0] = op->args.id;
    params[1] = nowbuf;
    r = send_pg(sp, op, terminate_sql, 2, params);
    if (r < 0)
        free(op);
    return r;
}

static int sim_list(struct tm_provider *p, const char *cluster, tm_list_cb cb, void *data)
{
    struct sim_provider *sp = impl(p);
    struct sim_op *op;
    const char *params[2];
    int r;

    if (!cb || !tm_id_fits(cluster))
        return TM_EINVAL;
    if (sp->closing)
        return TM_ECANCELED;
    op = op_new(sp, SIM_OP_LIST, data);
    if (!op)
        return TM_ENOMEM;
    op->cb.list = cb;
    snprintf(op->args.cluster, TM_ID_MAX, "%s", cluster);
    if (sp->memory) {
        fifo_push(sp, op);
        return 0;
    }
    params[0] = op->args.cluster;
    if (sp->params->own_pools_only) {
        char pools[TM_SIM_POOLS_MAX * (TM_ID_MAX * 2 + 3) + 3];
        r = pools_literal(sp->params, pools, sizeof(pools));
        if (r == 0) {
            /* pg_uv copies the parameters before send_pg returns */
            params[1] = pools;
            r = send_pg(sp, op, list_own_sql, 2, params);
        }
    } else {
        r = send_pg(sp, op, list_sql, 1, params);
    }
    if (r < 0)
        free(op);
    return r;
}

static int sim_price(struct tm_provider *p, const char *instance_type, const char *zone,
                     enum tm_capacity_type capacity, int64_t *ret_uusd_per_hour)
{
    return tm_simcloud_price(impl(p)->params, instance_type, zone, capacity, ret_uusd_per_hour);
}

/* ---- closing --------------------------------------------------------------- */

static void provider_free(void *provider)
{
    struct sim_provider *sp = provider;

    tm_simcloud_free(sp->sc);
    tm_reservations_free(&sp->resv);
    free(sp);
}

static void on_timer_closed(uv_handle_t *handle)
{
    struct sim_provider *sp = handle->data;

    tm_launch_env_closed(&sp->launch);
}

/* The last step: once pg_uv holds nothing of ours, close the timer. */
static void maybe_finish_close(struct sim_provider *sp)
{
    if (!sp->close_started || sp->timer_closing || sp->outstanding > 0)
        return;
    if (sp->pg && !sp->pg_closed)
        return;
    sp->timer_closing = true;
    uv_close((uv_handle_t *)&sp->timer, on_timer_closed);
}

static void on_pg_closed(void *data)
{
    struct sim_provider *sp = data;

    sp->pg_closed = true;
    maybe_finish_close(sp);
}

/* From the timer: cancel what waits, close the connection, then the timer. */
static void start_close(struct sim_provider *sp)
{
    struct sim_op *op;

    sp->close_started = true;
    uv_timer_stop(&sp->timer);
    while ((op = sp->fifo_head) != NULL) {
        sp->fifo_head = op->next;
        deliver(op, TM_ECANCELED, NULL, NULL, 0);
        free(op->set);
        free(op);
    }
    sp->fifo_tail = &sp->fifo_head;
    /* In-flight ops stay allocated until pg_uv answers them. */
    for (op = sp->inflight; op; op = op->next)
        deliver(op, TM_ECANCELED, NULL, NULL, 0);
    if (sp->pg) {
        tm_pg_close(sp->pg, on_pg_closed, sp);
        return;
    }
    maybe_finish_close(sp);
}

static void sim_close(struct tm_provider *p, void (*done)(void *data), void *data)
{
    struct sim_provider *sp = impl(p);

    /* The cancellations and done fire from the loop, not inside close(). */
    if (tm_launch_env_close(&sp->launch, done, data))
        uv_timer_start(&sp->timer, on_timer, 0, 0);
}

static const struct tm_provider_ops sim_ops = {
    .name = "sim",
    .launch = sim_launch,
    .terminate = sim_terminate,
    .list = sim_list,
    .price = sim_price,
    .close = sim_close,
    .launch_set = sim_launch_set,
};

/* ---- creation --------------------------------------------------------------- */

static int64_t sim_wall(void *clock) { return now(clock); }

/* The engine's rows of the params' reservations: the sim says nothing
 * more of them than the file did, and its own clock is their wall clock. */
static int copy_reservations(struct sim_provider *sp)
{
    const struct tm_simcloud_params *p = sp->params;

    if (p->nreservations == 0)
        return 0;
    sp->resv.v = calloc(p->nreservations, sizeof(*sp->resv.v));
    if (!sp->resv.v)
        return TM_ENOMEM;
    for (size_t i = 0; i < p->nreservations; i++) {
        const struct tm_sim_reservation *s = &p->reservations[i];
        struct tm_reservation *r = &sp->resv.v[i];

        tm_id_copy(r->id, s->id);
        tm_id_copy(r->pool, s->pool);
        tm_id_copy(r->type, s->instance_type);
        tm_id_copy(r->zone, s->zone);
        r->total = (int)s->count;
        r->available = -1;
        r->start_ms = s->start_ms;
        r->end_ms = s->end_ms;
        r->block = s->block;
        r->only = s->only;
    }
    sp->resv.n = p->nreservations;
    sp->launch.reservations = &sp->resv;
    sp->launch.wall_ms = sim_wall;
    return 0;
}

static int provider_new(uv_loop_t *loop, const struct tm_simcloud_params *params,
                        tm_sim_clock_fn now_ms, void *clock, struct sim_provider **ret)
{
    struct sim_provider *sp;
    int r;

    if (!loop || !params || !now_ms || !ret)
        return TM_EINVAL;
    sp = calloc(1, sizeof(*sp));
    if (!sp)
        return TM_ENOMEM;
    r = tm_simcloud_create(params, &sp->sc);
    if (r < 0) {
        free(sp);
        return r;
    }
    sp->params = tm_simcloud_params(sp->sc);
    sp->base.ops = &sim_ops;
    sp->base.impl = sp;
    sp->loop = loop;
    sp->now_ms = now_ms;
    sp->clock = clock;
    sp->fifo_tail = &sp->fifo_head;
    sp->launch = (struct tm_launch_env){
        .now_ms = launch_now, .clock = sp, .name = "sim", .closing = &sp->closing,
        .free_provider = provider_free, .provider = sp,
    };
    r = copy_reservations(sp);
    if (r == 0)
        r = uv_timer_init(loop, &sp->timer);
    if (r < 0) {
        provider_free(sp);
        return r;
    }
    sp->timer.data = sp;
    *ret = sp;
    return 0;
}

int tm_sim_provider_create_memory(uv_loop_t *loop, const struct tm_simcloud_params *params,
                                  tm_sim_clock_fn now_ms, void *clock,
                                  struct tm_provider **ret)
{
    struct sim_provider *sp;
    int r = provider_new(loop, params, now_ms, clock, &sp);

    if (r < 0)
        return r;
    sp->memory = true;
    *ret = &sp->base;
    return 0;
}

static void on_abort_closed(uv_handle_t *handle)
{
    provider_free(handle->data);
}

int tm_sim_provider_create_pg(uv_loop_t *loop, const struct tm_simcloud_params *params,
                              const char *conninfo, tm_sim_clock_fn now_ms, void *clock,
                              struct tm_provider **ret)
{
    struct sim_provider *sp;
    int r;

    if (!conninfo)
        return TM_EINVAL;
    r = provider_new(loop, params, now_ms, clock, &sp);
    if (r < 0)
        return r;
    /* pg_uv logs connection losses and reconnects by itself. */
    r = tm_pg_create(loop, conninfo, NULL, NULL, &sp->pg);
    if (r == 0)
        r = ensure_schema(sp);
    if (r < 0) {
        if (sp->pg) {
            /* Nothing of ours is queued (the setup failed to queue), so a
             * plain close sequence suffices. */
            sp->closing = true;
            sp->close_started = true;
            tm_pg_close(sp->pg, on_pg_closed, sp);
            return r;
        }
        sp->timer_closing = true;
        uv_close((uv_handle_t *)&sp->timer, on_abort_closed);
        return r;
    }
    *ret = &sp->base;
    return 0;
}

struct tm_simcloud *tm_sim_provider_cloud(struct tm_provider *p)
{
    struct sim_provider *sp;

    if (!p || p->ops != &sim_ops)
        return NULL;
    sp = impl(p);
    return sp->memory ? sp->sc : NULL;
}

/* ---- configuration ---------------------------------------------------------- */

static int copy_name(char dst[TM_ID_MAX], const char *src)
{
    if (!src || !tm_id_fits(src))
        return TM_EINVAL;
    snprintf(dst, TM_ID_MAX, "%s", src);
    return 0;
}

int tm_sim_params_from_config(const struct tm_config *cfg, const struct tm_config_provider *prov,
                              struct tm_simcloud_params *ret)
{
    struct tm_simcloud_params p;
    const struct tm_config_sim *sc = prov ? tm_sim_config(prov) : NULL;

    if (!sc || !ret)
        return TM_EINVAL;
    tm_simcloud_params_init(&p);
    p.boot_delay_ms = sc->boot_delay_ms;
    p.spot_hazard_per_hour = prov->spot_hazard_per_hour;
    p.spot_notice_ms = prov->spot_notice_ms;
    p.shutdown_ms = sc->shutdown_delay_ms;
    p.seed = sc->seed;
    if (prov->ntypes > TM_SIM_TYPES_MAX)
        return TM_EINVAL;
    for (size_t i = 0; i < prov->ntypes; i++) {
        const struct tm_config_instance_type *ct = &prov->types[i];
        struct tm_sim_type *t = &p.types[i];

        if (copy_name(t->name, ct->name) < 0 || copy_name(t->gpu_model, ct->gpu_model) < 0 ||
            ct->capacity < 0)
            return TM_EINVAL;
        t->gpus = ct->gpus;
        t->cpu_milli = ct->cpu_milli;
        t->memory_mib = ct->memory_mib;
        t->on_demand_uusd_per_hour = ct->on_demand_uusd_per_hour;
        t->spot_uusd_per_hour = ct->spot_uusd_per_hour;
        t->capacity = (unsigned)ct->capacity;
    }
    p.ntypes = prov->ntypes;
    for (size_t i = 0, sims = 0; cfg && i < cfg->nproviders; i++)
        if (strcmp(cfg->providers[i].kind, "sim") == 0 && ++sims > 1)
            p.own_pools_only = true;
    for (size_t i = 0; cfg && i < cfg->npools; i++) {
        const struct tm_config_pool *pool = &cfg->pools[i];

        if (!pool->provider || !prov->name || strcmp(pool->provider, prov->name) != 0)
            continue;
        /* The pool's own hazard and notice (the config fills them from the
         * provider's when the pool sets none). */
        if (p.npools == TM_SIM_POOLS_MAX || copy_name(p.pools[p.npools].pool, pool->name) < 0)
            return TM_EINVAL;
        p.pools[p.npools].hazard_per_hour = pool->spot_hazard_per_hour;
        p.pools[p.npools].notice_ms = pool->spot_notice_ms;
        p.npools++;
        for (size_t k = 0; k < pool->nreservations; k++) {
            const struct tm_config_reservation *cr = &pool->reservations[k];
            struct tm_sim_reservation *sr = &p.reservations[p.nreservations];

            if (p.nreservations == TM_SIM_RESERVATIONS_MAX || copy_name(sr->id, cr->id) < 0 ||
                copy_name(sr->pool, pool->name) < 0 || copy_name(sr->instance_type, cr->instance_type) < 0 ||
                copy_name(sr->zone, cr->zone) < 0 || cr->count <= 0)
                return TM_EINVAL;
            sr->count = (unsigned)cr->count;
            sr->start_ms = cr->start_ms;
            sr->end_ms = cr->end_ms;
            sr->block = cr->block;
            sr->only = !pool->reservation_fallback;
            p.nreservations++;
        }
        for (size_t z = 0; z < pool->nzones; z++) {
            bool seen = false;

            for (size_t k = 0; k < p.nzones; k++)
                seen = seen || strcmp(p.zones[k], pool->zones[z]) == 0;
            if (seen)
                continue;
            if (p.nzones == TM_SIM_ZONES_MAX || copy_name(p.zones[p.nzones], pool->zones[z]) < 0)
                return TM_EINVAL;
            p.nzones++;
        }
    }
    /* The provider's fitted table (config spot_hazards) sets the hazard
     * of each (type, zone) it fits, for every pool launching there, so
     * the simulated cloud interrupts as the traces did; the cells it
     * lacks keep the pool's. */
    for (size_t t = 0; t < p.ntypes; t++)
        for (size_t z = 0; z < p.nzones; z++) {
            double h;
            if (tm_spot_hazards_fitted(prov->spot_hazards, p.types[t].name, p.zones[z], &h))
                p.cells[t][z] = (struct tm_sim_cell_spot){.set = true, .hazard_per_hour = h};
        }
    *ret = p;
    return 0;
}
