#include "controller/store/store.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "controller/store/migrate.h"
#include "core/err.h"
#include "core/log.h"

/* Finished jobs read per snapshot for runtime estimates. */
#define TM_STORE_HISTORY_MAX "5000"
/* Nodes per pool in its current run of launches that never enrolled. */
#define TM_STORE_NO_SHOW_MAX "64"

/* The leader lock's key, x'746d6c656164' ("tmlead"), shared by every
 * replica of every cluster in this database, lives in tarmac_lead and
 * tarmac_lease_break (migrations/0011_lease.sql). */

static const char snapshot_sql[] =
    "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY;"
    "SELECT epoch FROM leader WHERE id = 1;"
    "SELECT id, pool, launch_token, coalesce(instance_id, ''), zone, instance_type, gpu_model,"
    " gpus, cpu_milli, memory_mib, capacity_type, state, cordoned, requested_ms,"
    " coalesce(idle_since_ms, 0), price_uusd_per_hour, billed_from_ms IS NOT NULL,"
    /* An interruption notice: recorded (0006), else one posted to the API
     * (which cordons the node, so only cordoned nodes are looked up). */
    " coalesce(notice_ms, CASE WHEN cordoned THEN (SELECT min(d.at_ms) FROM decisions d"
    "   WHERE d.subject_kind = 'node' AND d.subject_id = nodes.id::text"
    "     AND d.kind = 'interruption_notice') END, 0), notice_ms IS NOT NULL,"
    " coalesce(replaces_node_id, 0), coalesce(last_heartbeat_ms, 0), coalesce(unreachable_ms, 0),"
    " power, coalesce(power_since_ms, 0)"
    " FROM nodes WHERE state NOT IN ('terminated', 'interrupted') ORDER BY id;"
    "SELECT id, team, name, coalesce(gpu_model, ''), coalesce(pool, ''), gpus, gpu_milli, nodes,"
    " cpu_milli, memory_mib, class, priority, preemptible, coalesce(runtime_estimate_ms, 0),"
    " coalesce(sim_runtime_ms, 0), state, submitted_ms, coalesce(started_ms, 0),"
    " coalesce(hold_node_id, 0), coalesce(hold_start_ms, 0), coalesce(node_id, 0),"
    " left(state_reason, 255), checkpointable, attempts, progress_ms, coalesce(deadline_ms, 0),"
    " coalesce(on_demand_from_ms, 0)"
    " FROM jobs WHERE state IN ('queued', 'running') ORDER BY submitted_ms, id;"
    /* With each member's claim of its job's current attempt (0021), for
     * the start barrier's timeout (controller/reconcile/gang_start.c). */
    "SELECT a.job_id, a.node_id, a.gpu_mask, a.gpu_milli, a.cpu_milli, a.memory_mib, a.loaned,"
    " coalesce((SELECT m.claimed_ms FROM jobs j JOIN job_members m ON m.job_id = j.id"
    "   AND m.attempt = j.attempts AND m.node_id = a.node_id WHERE j.id = a.job_id), 0)"
    " FROM job_allocations a;"
    /* History for runtime estimates: the newest finished jobs, oldest first
     * (the estimator keeps the last runs of each kind). */
    "SELECT team, name, class, CASE WHEN gpus > 0 THEN gpus * 1000 * nodes ELSE gpu_milli END,"
    " finished_ms - started_ms + progress_ms FROM (SELECT * FROM jobs WHERE state = 'succeeded'"
    " ORDER BY finished_ms DESC LIMIT " TM_STORE_HISTORY_MAX ") h ORDER BY finished_ms;"
    "SELECT scope_kind, scope, cap_cents, hard, warn_percent FROM budgets WHERE period = 'month';"
    /* This month's ledger, per team ('' = idle) with its period: the
     * newest period holding spend. */
    "SELECT period, coalesce(team, ''), sum(cents) FROM spend"
    " WHERE period = (SELECT max(period) FROM spend) GROUP BY 1, 2;"
    /* Voluntary disruptions (0007) of the last day before the newest
     * decision (no clock in the database: the controller's may run fast);
     * a pool's disruption_interval is at most a day (core/config.c). */
    "SELECT coalesce(inputs ->> 'pool', ''), at_ms FROM decisions WHERE inputs ? 'disruption'"
    " AND at_ms > (SELECT coalesce(max(at_ms), 0) FROM decisions) - 86400000;";

/* GPU use over the idle window (idle_gpu.window, formatted in): per GPU of
 * a live node, the window ending at the newest sample (gpu_samples_at). */
static const char gpu_use_sql[] =
    "WITH e AS (SELECT coalesce(max(at_ms), 0) AS end_ms FROM gpu_samples)"
    " SELECT s.node_id, s.gpu_index,"
    " coalesce(max(s.util_percent) FILTER (WHERE s.at_ms > e.end_ms - %lld), 0),"
    " coalesce(avg(s.util_percent) FILTER (WHERE s.at_ms > e.end_ms - %lld), 0),"
    " min(s.at_ms), count(*) FILTER (WHERE s.at_ms > e.end_ms - %lld), e.end_ms"
    " FROM gpu_samples s JOIN nodes n ON n.id = s.node_id AND n.state IN ('ready', 'draining'), e"
    " WHERE s.at_ms > e.end_ms - 2 * %lld::bigint GROUP BY 1, 2, e.end_ms ORDER BY 1, 2;"
    /* Launches that never enrolled (controller/reconcile/no_show.c): per
     * pool, the nodes given up on without a heartbeat that are newer than
     * its newest node with one, newest first, at most TM_STORE_NO_SHOW_MAX
     * (the backoff reaches its cap long before); indexes in
     * migrations/0019_no_show.sql. */
    "SELECT pool, id, requested_ms, unreachable_ms FROM (SELECT n.pool, n.id, n.requested_ms,"
    " n.unreachable_ms, row_number() OVER (PARTITION BY n.pool ORDER BY n.id DESC) AS k FROM nodes n"
    " WHERE n.unreachable_ms IS NOT NULL AND n.last_heartbeat_ms IS NULL"
    " AND n.id > coalesce((SELECT max(e.id) FROM nodes e WHERE e.pool = n.pool"
    " AND e.last_heartbeat_ms IS NOT NULL), 0)) x"
    " WHERE k <= " TM_STORE_NO_SHOW_MAX " ORDER BY pool, id DESC;"
    /* Team quotas (0029), in key order: the model numbers teams in the
     * order their names first appear. */
    "SELECT team, coalesce(org, ''), flavor, gpus, coalesce(borrowing_limit, -1),"
    " coalesce(lending_limit, -1), weight FROM quotas ORDER BY team, flavor;"
    "COMMIT";

static int64_t col_i64(const PGresult *r, int row, int col)
{
    return strtoll(PQgetvalue(r, row, col), NULL, 10);
}

static void col_str(const PGresult *r, int row, int col, char *out, size_t size)
{
    snprintf(out, size, "%s", PQgetvalue(r, row, col));
}

static bool col_bool(const PGresult *r, int row, int col)
{
    return PQgetvalue(r, row, col)[0] == 't';
}

static int pool_index(const struct tm_config *cfg, const char *name)
{
    for (size_t i = 0; i < cfg->npools; i++)
        if (strcmp(cfg->pools[i].name, name) == 0)
            return (int)i;
    return -1;
}

void tm_snapshot_release(struct tm_snapshot *snap)
{
    if (!snap)
        return;
    free(snap->nodes);
    free(snap->jobs);
    free(snap->allocs);
    free(snap->history);
    free(snap->budgets);
    free(snap->quotas);
    free(snap->spend);
    free(snap->disruptions);
    free(snap->gpu_use);
    free(snap->no_shows);
    free(snap);
}

/* The nodes result (result 2) into s->nodes. */
static void parse_nodes(struct tm_snapshot *s, const PGresult *nr, const struct tm_config *cfg)
{
    for (int i = 0; i < (int)s->nnodes; i++) {
        struct tm_snap_node *n = &s->nodes[i];
        n->id = col_i64(nr, i, 0);
        n->pool = pool_index(cfg, PQgetvalue(nr, i, 1));
        col_str(nr, i, 2, n->token, sizeof(n->token));
        col_str(nr, i, 3, n->instance_id, sizeof(n->instance_id));
        col_str(nr, i, 4, n->zone, sizeof(n->zone));
        col_str(nr, i, 5, n->instance_type, sizeof(n->instance_type));
        col_str(nr, i, 6, n->gpu_model, sizeof(n->gpu_model));
        n->gpus = (int)col_i64(nr, i, 7);
        n->cpu_milli = col_i64(nr, i, 8);
        n->memory_mib = col_i64(nr, i, 9);
        n->capacity = (enum tm_capacity_type)tm_capacity_type_parse(PQgetvalue(nr, i, 10));
        n->state = (enum tm_node_state)tm_node_state_parse(PQgetvalue(nr, i, 11));
        n->cordoned = col_bool(nr, i, 12);
        n->requested_ms = col_i64(nr, i, 13);
        n->idle_since_ms = col_i64(nr, i, 14);
        n->price_uusd_per_hour = col_i64(nr, i, 15);
        n->billed = col_bool(nr, i, 16);
        n->notice_ms = col_i64(nr, i, 17);
        n->notice_recorded = col_bool(nr, i, 18);
        n->replaces_node_id = col_i64(nr, i, 19);
        n->last_heartbeat_ms = col_i64(nr, i, 20);
        n->unreachable_ms = col_i64(nr, i, 21);
        int power = tm_node_power_parse(PQgetvalue(nr, i, 22));
        n->power = power < 0 ? TM_POWER_ON : (enum tm_node_power)power;
        n->power_since_ms = col_i64(nr, i, 23);
    }
}

/* The jobs result (result 3) into s->jobs; a job pinned to a pool no
 * longer configured is never placed. */
static void parse_jobs(struct tm_snapshot *s, const PGresult *jr, const struct tm_config *cfg)
{
    char buf[TM_ID_MAX];

    for (int i = 0; i < (int)s->njobs; i++) {
        struct tm_snap_job *j = &s->jobs[i];
        j->id = col_i64(jr, i, 0);
        col_str(jr, i, 1, j->team, sizeof(j->team));
        col_str(jr, i, 2, j->name, sizeof(j->name));
        col_str(jr, i, 3, j->gpu_model, sizeof(j->gpu_model));
        col_str(jr, i, 4, buf, sizeof(buf));
        j->pool = buf[0] ? pool_index(cfg, buf) : -1;
        if (buf[0] && j->pool < 0)
            j->pool = INT32_MAX >> 1; /* pinned to a pool no longer configured: never placed */
        j->gpus = (int)col_i64(jr, i, 5);
        j->gpu_milli = (int)col_i64(jr, i, 6);
        j->nodes = (int)col_i64(jr, i, 7);
        j->cpu_milli = col_i64(jr, i, 8);
        j->memory_mib = col_i64(jr, i, 9);
        j->klass = (enum tm_job_class)tm_job_class_parse(PQgetvalue(jr, i, 10));
        j->priority = (int)col_i64(jr, i, 11);
        j->preemptible = col_bool(jr, i, 12);
        j->estimate_ms = col_i64(jr, i, 13);
        j->sim_runtime_ms = col_i64(jr, i, 14);
        j->state = (enum tm_job_state)tm_job_state_parse(PQgetvalue(jr, i, 15));
        j->submitted_ms = col_i64(jr, i, 16);
        j->started_ms = col_i64(jr, i, 17);
        j->hold_node_id = col_i64(jr, i, 18);
        j->hold_start_ms = col_i64(jr, i, 19);
        j->node_id = col_i64(jr, i, 20);
        col_str(jr, i, 21, j->reason, sizeof(j->reason));
        j->checkpointable = col_bool(jr, i, 22);
        j->attempts = (int)col_i64(jr, i, 23);
        j->progress_ms = col_i64(jr, i, 24);
        j->deadline_ms = col_i64(jr, i, 25);
        j->on_demand_from_ms = col_i64(jr, i, 26);
    }
}

/* The allocations (result 4) into s->allocs. */
static void parse_allocs(struct tm_snapshot *s, const PGresult *ar)
{
    for (int i = 0; i < (int)s->nallocs; i++) {
        struct tm_snap_alloc *a = &s->allocs[i];
        a->job_id = col_i64(ar, i, 0);
        a->node_id = col_i64(ar, i, 1);
        a->gpu_mask = (uint32_t)col_i64(ar, i, 2);
        a->gpu_milli = (int)col_i64(ar, i, 3);
        a->cpu_milli = col_i64(ar, i, 4);
        a->memory_mib = col_i64(ar, i, 5);
        a->loaned = col_bool(ar, i, 6);
        a->claimed_ms = col_i64(ar, i, 7);
    }
}

/* The finished jobs' history (result 5) into s->history. */
static void parse_history(struct tm_snapshot *s, const PGresult *hr)
{
    for (int i = 0; i < (int)s->nhistory; i++) {
        struct tm_snap_history *h = &s->history[i];
        col_str(hr, i, 0, h->team, sizeof(h->team));
        col_str(hr, i, 1, h->name, sizeof(h->name));
        h->klass = (enum tm_job_class)tm_job_class_parse(PQgetvalue(hr, i, 2));
        h->gpu_milli = (int32_t)col_i64(hr, i, 3);
        h->runtime_ms = col_i64(hr, i, 4);
    }
}

/* The budgets (result 6) and this period's spend (result 7). */
static void parse_budgets(struct tm_snapshot *s, const PGresult *br, const PGresult *sr)
{
    for (int i = 0; i < (int)s->nbudgets; i++) {
        struct tm_snap_budget *b = &s->budgets[i];
        b->org = strcmp(PQgetvalue(br, i, 0), "org") == 0;
        col_str(br, i, 1, b->scope, sizeof(b->scope));
        b->cap_cents = col_i64(br, i, 2);
        b->hard = col_bool(br, i, 3);
        b->warn_percent = (int)col_i64(br, i, 4);
    }
    for (int i = 0; i < (int)s->nspend; i++) {
        struct tm_snap_spend *x = &s->spend[i];
        col_str(sr, i, 0, x->period, sizeof(x->period));
        col_str(sr, i, 1, x->team, sizeof(x->team));
        x->cents = col_i64(sr, i, 2);
    }
}

/* The recent disruptions (result 8) and the launches that never
 * enrolled (result 10), each by pool. */
static void parse_disruptions(struct tm_snapshot *s, const PGresult *dr, const PGresult *xr, const struct tm_config *cfg)
{
    for (int i = 0; i < (int)s->ndisruptions; i++) {
        s->disruptions[i].pool = pool_index(cfg, PQgetvalue(dr, i, 0));
        s->disruptions[i].at_ms = col_i64(dr, i, 1);
    }
    for (int i = 0; i < (int)s->nno_shows; i++) {
        struct tm_snap_no_show *x = &s->no_shows[i];
        x->pool = pool_index(cfg, PQgetvalue(xr, i, 0));
        x->node_id = col_i64(xr, i, 1);
        x->requested_ms = col_i64(xr, i, 2);
        x->given_up_ms = col_i64(xr, i, 3);
    }
}

/* The team quotas (result 11). */
static void parse_quotas(struct tm_snapshot *s, const PGresult *qr)
{
    for (int i = 0; i < (int)s->nquotas; i++) {
        struct tm_snap_quota *q = &s->quotas[i];
        col_str(qr, i, 0, q->team, sizeof(q->team));
        col_str(qr, i, 1, q->org, sizeof(q->org));
        col_str(qr, i, 2, q->flavor, sizeof(q->flavor));
        q->gpus = col_i64(qr, i, 3);
        q->borrowing_limit = col_i64(qr, i, 4);
        q->lending_limit = col_i64(qr, i, 5);
        q->weight = strtod(PQgetvalue(qr, i, 6), NULL);
    }
}

/* GPU use over the idle window (result 9) into s->gpu_use. */
static void parse_gpu_use(struct tm_snapshot *s, const PGresult *gr)
{
    for (int i = 0; i < (int)s->ngpu_use; i++) {
        struct tm_snap_gpu_use *g = &s->gpu_use[i];
        g->node_id = col_i64(gr, i, 0);
        g->gpu_index = (int)col_i64(gr, i, 1);
        g->max_util = strtod(PQgetvalue(gr, i, 2), NULL);
        g->mean_util = strtod(PQgetvalue(gr, i, 3), NULL);
        g->first_ms = col_i64(gr, i, 4);
        g->nsamples = col_i64(gr, i, 5);
        s->samples_end_ms = col_i64(gr, i, 6);
    }
}

/* The snapshot's arrays, one per result, sized to its rows (one more, so
 * that none is a zero-size allocation): 0 or TM_ENOMEM. */
static int alloc_snapshot(struct tm_snapshot *s, const struct tm_pg_reply *reply)
{
    const PGresult *nr = reply->results[2], *jr = reply->results[3], *ar = reply->results[4];
    const PGresult *hr = reply->results[5], *br = reply->results[6], *sr = reply->results[7];
    const PGresult *dr = reply->results[8], *gr = reply->results[9], *xr = reply->results[10];
    const PGresult *qr = reply->results[11];

    s->nnodes = (size_t)PQntuples(nr);
    s->njobs = (size_t)PQntuples(jr);
    s->nallocs = (size_t)PQntuples(ar);
    s->nodes = calloc(s->nnodes + 1, sizeof(*s->nodes));
    s->jobs = calloc(s->njobs + 1, sizeof(*s->jobs));
    s->allocs = calloc(s->nallocs + 1, sizeof(*s->allocs));
    s->nhistory = (size_t)PQntuples(hr);
    s->history = calloc(s->nhistory + 1, sizeof(*s->history));
    s->nbudgets = (size_t)PQntuples(br);
    s->budgets = calloc(s->nbudgets + 1, sizeof(*s->budgets));
    s->nspend = (size_t)PQntuples(sr);
    s->spend = calloc(s->nspend + 1, sizeof(*s->spend));
    s->ndisruptions = (size_t)PQntuples(dr);
    s->disruptions = calloc(s->ndisruptions + 1, sizeof(*s->disruptions));
    s->ngpu_use = (size_t)PQntuples(gr);
    s->gpu_use = calloc(s->ngpu_use + 1, sizeof(*s->gpu_use));
    s->nno_shows = (size_t)PQntuples(xr);
    s->no_shows = calloc(s->nno_shows + 1, sizeof(*s->no_shows));
    s->nquotas = (size_t)PQntuples(qr);
    s->quotas = calloc(s->nquotas + 1, sizeof(*s->quotas));
    if (!s->nodes || !s->jobs || !s->allocs || !s->history || !s->budgets || !s->spend ||
        !s->disruptions || !s->gpu_use || !s->no_shows || !s->quotas)
        return TM_ENOMEM;
    return 0;
}

static int parse_snapshot(const struct tm_pg_reply *reply, const struct tm_config *cfg,
                          struct tm_snapshot **ret)
{
    const PGresult *lr;
    struct tm_snapshot *s;

    if (reply->nresults != 13)
        return TM_EBADREPLY;
    lr = reply->results[1];
    s = calloc(1, sizeof(*s));
    if (!s)
        return TM_ENOMEM;
    s->epoch = PQntuples(lr) == 1 ? col_i64(lr, 0, 0) : 0;
    if (alloc_snapshot(s, reply) < 0) {
        tm_snapshot_release(s);
        return TM_ENOMEM;
    }
    parse_gpu_use(s, reply->results[9]);
    parse_nodes(s, reply->results[2], cfg);
    parse_jobs(s, reply->results[3], cfg);
    parse_allocs(s, reply->results[4]);
    parse_history(s, reply->results[5]);
    parse_budgets(s, reply->results[6], reply->results[7]);
    parse_disruptions(s, reply->results[8], reply->results[10], cfg);
    parse_quotas(s, reply->results[11]);
    *ret = s;
    return 0;
}

struct snapshot_req {
    char *sql;
    const struct tm_config *cfg;
    tm_store_snapshot_cb cb;
    void *data;
};

static void on_snapshot(const struct tm_pg_reply *reply, void *data)
{
    struct snapshot_req *req = data;
    struct tm_snapshot *snap = NULL;
    int r = reply->status;

    if (r == 0)
        r = parse_snapshot(reply, req->cfg, &snap);
    req->cb(r, snap, reply->error ? reply->error : (r < 0 ? tm_strerror(r) : NULL), req->data);
    free(req->sql);
    free(req);
}

int tm_store_snapshot(struct tm_pg_pool *pool, const struct tm_config *cfg,
                      tm_store_snapshot_cb cb, void *data)
{
    struct snapshot_req *req = malloc(sizeof(*req));
    int r;

    if (!req)
        return TM_ENOMEM;
    *req = (struct snapshot_req){.cfg = cfg, .cb = cb, .data = data};
    long long w = cfg->idle_gpu.window_ms > 0 ? (long long)cfg->idle_gpu.window_ms : 1800000LL;
    size_t n = sizeof(snapshot_sql) + sizeof(gpu_use_sql) + 4 * 24;
    req->sql = malloc(n);
    if (!req->sql) {
        free(req);
        return TM_ENOMEM;
    }
    int k = snprintf(req->sql, n, "%s", snapshot_sql);
    snprintf(req->sql + k, n - (size_t)k, gpu_use_sql, w, w, w, w);
    r = tm_pg_pool_exec(pool, req->sql, on_snapshot, req);
    if (r < 0) {
        free(req->sql);
        free(req);
    }
    return r;
}

struct apply_req {
    tm_store_apply_cb cb;
    void *data;
};

static void on_apply(const struct tm_pg_reply *reply, void *data)
{
    struct apply_req *req = data;
    cJSON *result = NULL;
    int r = reply->status;

    if (r == 0 && reply->nresults == 1 && PQntuples(reply->results[0]) == 1) {
        result = cJSON_Parse(PQgetvalue(reply->results[0], 0, 0));
        if (!result)
            r = TM_EBADREPLY;
    }
    req->cb(r, result, reply->error, reply->sqlstate, req->data);
    cJSON_Delete(result);
    free(req);
}

int tm_store_apply(struct tm_pg_pool *pool, int64_t epoch, int64_t now_ms, const cJSON *actions,
                   tm_store_apply_cb cb, void *data)
{
    return tm_store_apply_renew(pool, epoch, now_ms, 0, actions, cb, data);
}

/* The lease renewal is a second function of the same statement, so it
 * commits with the plan or not at all (0011_lease.sql). */
int tm_store_apply_renew(struct tm_pg_pool *pool, int64_t epoch, int64_t now_ms, int64_t lease_ms,
                         const cJSON *actions, tm_store_apply_cb cb, void *data)
{
    char epoch_s[24], now_s[24], lease_s[24];
    cJSON *plan = cJSON_CreateObject();
    char *json = NULL;
    struct apply_req *req = NULL;
    int r = TM_ENOMEM;

    if (!plan || !cJSON_AddItemReferenceToObject(plan, "actions", (cJSON *)actions))
        goto out;
    json = cJSON_PrintUnformatted(plan);
    req = malloc(sizeof(*req));
    if (!json || !req)
        goto out;
    *req = (struct apply_req){.cb = cb, .data = data};
    snprintf(epoch_s, sizeof(epoch_s), "%" PRId64, epoch);
    snprintf(now_s, sizeof(now_s), "%" PRId64, now_ms);
    snprintf(lease_s, sizeof(lease_s), "%" PRId64, lease_ms);
    const char *params[4] = {epoch_s, now_s, json, lease_s};
    r = tm_pg_pool_query(pool,
                         "SELECT tarmac_apply($1, $2, $3::jsonb)"
                         " FROM (SELECT tarmac_lease_renew($1, $4::int)) renewed",
                         4, params, on_apply, req);
    if (r == 0)
        req = NULL;
out:
    free(req);
    free(json);
    cJSON_Delete(plan);
    return r;
}

struct done_req {
    tm_store_done_cb cb;
    void *data;
};

static void on_done(const struct tm_pg_reply *reply, void *data)
{
    struct done_req *req = data;
    if (req->cb)
        req->cb(reply->status, reply->error, req->data);
    free(req);
}

static int query_done(struct tm_pg_pool *pool, const char *sql, int n, const char *const *params,
                      tm_store_done_cb cb, void *data)
{
    struct done_req *req = malloc(sizeof(*req));
    int r;

    if (!req)
        return TM_ENOMEM;
    *req = (struct done_req){.cb = cb, .data = data};
    r = tm_pg_pool_query(pool, sql, n, params, on_done, req);
    if (r < 0)
        free(req);
    return r;
}

int tm_store_agent_report(struct tm_pg_pool *pool, int64_t node_id, int64_t now_ms,
                          const cJSON *report, tm_store_done_cb cb, void *data)
{
    char node_s[24], now_s[24];
    char *json = cJSON_PrintUnformatted(report);
    int r;

    if (!json)
        return TM_ENOMEM;
    snprintf(node_s, sizeof(node_s), "%" PRId64, node_id);
    snprintf(now_s, sizeof(now_s), "%" PRId64, now_ms);
    const char *params[3] = {node_s, now_s, json};
    r = query_done(pool, "SELECT tarmac_agent_report($1, $2, $3::jsonb)", 3, params, cb, data);
    free(json);
    return r;
}

int tm_store_enrollment_add(struct tm_pg_pool *pool, int64_t node_id, const char *hash,
                            int64_t now_ms, int64_t expires_ms, tm_store_done_cb cb, void *data)
{
    char node_s[24], now_s[24], exp_s[24];

    snprintf(node_s, sizeof(node_s), "%" PRId64, node_id);
    snprintf(now_s, sizeof(now_s), "%" PRId64, now_ms);
    snprintf(exp_s, sizeof(exp_s), "%" PRId64, expires_ms);
    const char *params[4] = {node_s, hash, now_s, exp_s};
    return query_done(pool,
                      "INSERT INTO agent_enrollments (node_id, hash, created_ms, expires_ms)"
                      " VALUES ($1, $2, $3, $4)",
                      4, params, cb, data);
}

int tm_store_prune_samples(struct tm_pg_pool *pool, int64_t before_ms, int64_t after_ms, int batch,
                           tm_store_done_cb cb, void *data)
{
    char before_s[24], after_s[24], batch_s[16];

    snprintf(before_s, sizeof(before_s), "%" PRId64, before_ms);
    snprintf(after_s, sizeof(after_s), "%" PRId64, after_ms);
    snprintf(batch_s, sizeof(batch_s), "%d", batch);
    const char *params[3] = {before_s, batch_s, after_s};
    return query_done(pool, "SELECT tarmac_prune_samples($1, $2::int, $3)", 3, params, cb, data);
}

int tm_store_accrue(struct tm_pg_pool *pool, int64_t epoch, int64_t now_ms, tm_store_done_cb cb,
                    void *data)
{
    return tm_store_accrue_renew(pool, epoch, now_ms, 0, cb, data);
}

int tm_store_accrue_renew(struct tm_pg_pool *pool, int64_t epoch, int64_t now_ms, int64_t lease_ms,
                          tm_store_done_cb cb, void *data)
{
    char epoch_s[24], now_s[24], lease_s[24];

    snprintf(epoch_s, sizeof(epoch_s), "%" PRId64, epoch);
    snprintf(now_s, sizeof(now_s), "%" PRId64, now_ms);
    snprintf(lease_s, sizeof(lease_s), "%" PRId64, lease_ms);
    const char *params[3] = {epoch_s, now_s, lease_s};
    return query_done(pool,
                      "SELECT tarmac_accrue($1, $2) FROM (SELECT tarmac_lease_renew($1, $3::int)) renewed",
                      3, params, cb, data);
}

int tm_store_node_launched(struct tm_pg_pool *pool, int64_t node_id, const char *instance_id,
                           int64_t now_ms, tm_store_done_cb cb, void *data)
{
    char node_s[24], now_s[24];

    snprintf(node_s, sizeof(node_s), "%" PRId64, node_id);
    snprintf(now_s, sizeof(now_s), "%" PRId64, now_ms);
    const char *params[3] = {node_s, instance_id, now_s};
    return query_done(pool,
                      "UPDATE nodes SET instance_id = $2, state = 'booting',"
                      " billed_from_ms = coalesce(billed_from_ms, $3)"
                      " WHERE id = $1 AND state = 'requested'",
                      3, params, cb, data);
}

struct lead_req {
    tm_store_leader_cb cb;
    void *data;
};

static void on_lead(const struct tm_pg_reply *reply, void *data)
{
    struct lead_req *req = data;
    int64_t epoch = 0, latest = 0;

    if (reply->status == 0 && reply->nresults == 1 && PQntuples(reply->results[0]) == 1) {
        epoch = col_i64(reply->results[0], 0, 0);
        latest = col_i64(reply->results[0], 0, 1);
    }
    req->cb(reply->status, epoch, latest, reply->error, req->data);
    free(req);
}

/* Lock, epoch bump and lease in one statement (tarmac_lead, 0011): the
 * lock is ours for as long as this session lives and we renew the lease;
 * the new epoch fences off any plan a previous leader still has in
 * flight. */
int tm_store_try_lead(struct tm_pg *conn, const char *holder, int64_t now_ms, int64_t lease_ms,
                      tm_store_leader_cb cb, void *data)
{
    struct lead_req *req = calloc(1, sizeof(*req));
    char now_s[24], lease_s[24];
    int r;

    if (!req)
        return TM_ENOMEM;
    req->cb = cb;
    req->data = data;
    snprintf(now_s, sizeof(now_s), "%" PRId64, now_ms);
    snprintf(lease_s, sizeof(lease_s), "%" PRId64, lease_ms);
    const char *params[3] = {holder, now_s, lease_s};
    r = tm_pg_query(conn, "SELECT epoch, acquired_ms FROM tarmac_lead($1, $2::bigint, $3::int)", 3,
                    params, on_lead, req);
    if (r < 0)
        free(req);
    return r;
}

struct break_req {
    tm_store_break_cb cb;
    void *data;
};

static void on_break(const struct tm_pg_reply *reply, void *data)
{
    struct break_req *req = data;
    int ended = 0;

    if (reply->status == 0 && reply->nresults == 1 && PQntuples(reply->results[0]) == 1)
        ended = (int)col_i64(reply->results[0], 0, 0);
    req->cb(reply->status, ended, reply->error, req->data);
    free(req);
}

int tm_store_break_lease(struct tm_pg *conn, tm_store_break_cb cb, void *data)
{
    struct break_req *req = calloc(1, sizeof(*req));
    int r;

    if (!req)
        return TM_ENOMEM;
    req->cb = cb;
    req->data = data;
    r = tm_pg_query(conn, "SELECT tarmac_lease_break()", 0, NULL, on_break, req);
    if (r < 0)
        free(req);
    return r;
}

PGconn *tm_store_connect_blocking(const char *url, char *err, size_t errsize)
{
    /* Defaults before dbname, so the URL's own settings win: each host
     * gets connect_timeout, and only a primary is taken (a standby would
     * refuse migrate's and the db forms' writes). */
    const char *keys[] = {"connect_timeout", "target_session_attrs", "dbname", "application_name", NULL};
    const char *vals[] = {"10", "read-write", url, "tarmac", NULL};
    PGconn *conn = PQconnectdbParams(keys, vals, 1);
    char safe[512];
    PQconninfoOption *opts = PQconninfoParse(url, NULL);
    bool several = false;

    for (PQconninfoOption *o = opts; o && o->keyword; o++)
        if (strcmp(o->keyword, "host") == 0 && o->val && strchr(o->val, ','))
            several = true;
    PQconninfoFree(opts);
    /* Several hosts: a failover may be under way (the standby not yet
     * promoted): try again for up to ~30 s, with backoff, saying so. */
    for (unsigned wait_ms = 500, waited = 0; several && conn && PQstatus(conn) != CONNECTION_OK &&
                                              waited < 30000;
         waited += wait_ms, wait_ms = wait_ms < 4000 ? wait_ms * 2 : 4000) {
        char msg[256];
        snprintf(msg, sizeof(msg), "%s", PQerrorMessage(conn));
        msg[strcspn(msg, "\n")] = '\0';
        tm_log_redact(msg, sizeof(msg));
        tm_log_warn("no primary among the database hosts yet, retrying", "error=\"%s\" retry_ms=%u", msg,
                    wait_ms);
        PQfinish(conn);
        struct timespec ts = {.tv_sec = wait_ms / 1000, .tv_nsec = (long)(wait_ms % 1000) * 1000000};
        nanosleep(&ts, NULL);
        conn = PQconnectdbParams(keys, vals, 1);
    }
    if (conn && PQstatus(conn) == CONNECTION_OK)
        return conn;
    tm_pg_conninfo_redact(url, safe, sizeof(safe));
    snprintf(err, errsize, "could not connect to the database at \"%s\": %s", safe,
             conn ? PQerrorMessage(conn) : "out of memory");
    err[strcspn(err, "\n")] = '\0';
    tm_log_redact(err, errsize);
    PQfinish(conn);
    return NULL;
}

int tm_store_check_schema(PGconn *conn, char *err, size_t errsize)
{
    int v = tm_migrate_current(conn, err, errsize);

    if (v < 0)
        return v;
    if (v < tm_migrate_latest()) {
        snprintf(err, errsize, "database schema is at version %d, this tarmac needs %d: run \"tarmac migrate\"",
                 v, tm_migrate_latest());
        return TM_ESCHEMA;
    }
    if (v > tm_migrate_latest()) {
        snprintf(err, errsize, "database schema is at version %d, newer than this tarmac knows (%d)",
                 v, tm_migrate_latest());
        return TM_ESCHEMA;
    }
    return 0;
}

static void text_array(char *out, size_t size, char *const *items, size_t n)
{
    /* A PostgreSQL array literal; names are validated by the config
     * ([A-Za-z0-9._-]), so quoting each element is enough. */
    size_t used = 0;
    used += (size_t)snprintf(out + used, size - used, "{");
    for (size_t i = 0; i < n && used < size; i++)
        used += (size_t)snprintf(out + used, size - used, "%s\"%s\"", i ? "," : "", items[i]);
    if (used < size)
        snprintf(out + used, size - used, "}");
}

int tm_store_sync_pools(PGconn *conn, const struct tm_config *cfg, int64_t now_ms, char *err,
                        size_t errsize)
{
    for (size_t i = 0; i < cfg->npools; i++) {
        const struct tm_config_pool *p = &cfg->pools[i];
        const struct tm_config_provider *prov = tm_config_provider_find(cfg, p->provider);
        char zones[1024], types[1024], gpus[16], minn[16], maxn[16], grace[24], now_s[24];
        PGresult *res;

        text_array(zones, sizeof(zones), p->zones, p->nzones);
        text_array(types, sizeof(types), p->instance_types, p->ninstance_types);
        snprintf(gpus, sizeof(gpus), "%d", p->gpus_per_node);
        snprintf(minn, sizeof(minn), "%d", p->min_nodes);
        snprintf(maxn, sizeof(maxn), "%d", p->max_nodes);
        snprintf(grace, sizeof(grace), "%" PRId64, p->idle_grace_ms);
        snprintf(now_s, sizeof(now_s), "%" PRId64, now_ms);
        const char *params[] = {p->name, p->provider, prov ? prov->kind : "",
                                prov && prov->region ? prov->region : "", zones, types,
                                p->gpu_model, gpus, p->capacity_type, minn, maxn, grace, now_s,
                                p->checkpoint_dir};
        res = PQexecParams(conn,
                           "INSERT INTO pools (name, provider, provider_kind, region, zones,"
                           " instance_types, gpu_model, gpus_per_node, capacity_type, min_nodes,"
                           " max_nodes, idle_grace_ms, updated_ms, checkpoint_dir)"
                           " VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14)"
                           " ON CONFLICT (name) DO UPDATE SET provider = EXCLUDED.provider,"
                           " provider_kind = EXCLUDED.provider_kind, region = EXCLUDED.region,"
                           " zones = EXCLUDED.zones, instance_types = EXCLUDED.instance_types,"
                           " gpu_model = EXCLUDED.gpu_model, gpus_per_node = EXCLUDED.gpus_per_node,"
                           " capacity_type = EXCLUDED.capacity_type, min_nodes = EXCLUDED.min_nodes,"
                           " max_nodes = EXCLUDED.max_nodes, idle_grace_ms = EXCLUDED.idle_grace_ms,"
                           " updated_ms = EXCLUDED.updated_ms, checkpoint_dir = EXCLUDED.checkpoint_dir",
                           14, NULL, params, NULL, NULL, 0);
        if (PQresultStatus(res) != PGRES_COMMAND_OK) {
            snprintf(err, errsize, "could not record pool \"%s\": %s", p->name,
                     PQresultErrorField(res, PG_DIAG_MESSAGE_PRIMARY));
            PQclear(res);
            return TM_EDB;
        }
        PQclear(res);
    }
    return 0;
}

/* ---- demand history (the live forecasters' warm start) ---------------- */

/* Live jobs (jobs_active) and those that finished inside the window
 * (jobs_finished, 0005): never a scan of all history.  Demand is counted
 * the way tm_reconcile_pool_demand() counts it on a tick. */
static const char demand_history_sql[] =
    "SELECT j.submitted_ms, coalesce(j.finished_ms, -1), coalesce(n.pool, ''),"
    " coalesce(j.pool, ''), coalesce(j.gpu_model, ''), j.gpus, j.gpu_milli, j.nodes, j.preemptible,"
    " CASE WHEN j.gpus > 0 THEN j.gpus * 1000 * j.nodes ELSE j.gpu_milli END"
    " FROM jobs j LEFT JOIN nodes n ON n.id = j.node_id"
    " WHERE j.state IN ('queued', 'running')"
    "    OR (j.finished_ms IS NOT NULL AND j.finished_ms >= $1::bigint)";

struct demand_history_req {
    const struct tm_config *cfg;
    tm_store_demand_history_cb cb;
    void *data;
};

static void on_demand_history(const struct tm_pg_reply *reply, void *data)
{
    struct demand_history_req *req = data;
    const struct tm_config *cfg = req->cfg;
    struct tm_demand_span *spans = NULL;
    size_t n = 0;
    int r = reply->status;

    if (r == 0 && reply->nresults > 0) {
        const PGresult *res = reply->results[reply->nresults - 1];
        int rows = PQntuples(res);
        spans = malloc(((size_t)rows + 1) * sizeof(*spans));
        if (!spans)
            r = TM_ENOMEM;
        for (int i = 0; spans && i < rows; i++) {
            int pool = pool_index(cfg, PQgetvalue(res, i, 2));
            if (pool < 0) {
                /* Never ran (or its node's pool left the config): where
                 * the planner would send it now. */
                struct tm_snap_job j = {.pool = pool_index(cfg, PQgetvalue(res, i, 3)),
                                        .gpus = (int)col_i64(res, i, 5),
                                        .gpu_milli = (int)col_i64(res, i, 6),
                                        .nodes = (int)col_i64(res, i, 7),
                                        .preemptible = col_bool(res, i, 8)};
                snprintf(j.gpu_model, sizeof(j.gpu_model), "%s", PQgetvalue(res, i, 4));
                if (PQgetvalue(res, i, 3)[0] && j.pool < 0)
                    continue; /* pinned to a pool that is gone */
                pool = tm_reconcile_job_pool(cfg, &j);
            }
            if (pool >= 0)
                spans[n++] = (struct tm_demand_span){.pool = pool, .from_ms = col_i64(res, i, 0),
                                                     .to_ms = col_i64(res, i, 1),
                                                     .milli = col_i64(res, i, 9)};
        }
    }
    req->cb(r, reply->error ? reply->error : (r < 0 ? tm_strerror(r) : NULL), spans, n, req->data);
    free(spans);
    free(req);
}

int tm_store_demand_history(struct tm_pg_pool *pool, const struct tm_config *cfg, int64_t since_ms,
                            tm_store_demand_history_cb cb, void *data)
{
    struct demand_history_req *req = malloc(sizeof(*req));
    char since[24];
    const char *params[1] = {since};
    int r;

    if (!req)
        return TM_ENOMEM;
    *req = (struct demand_history_req){.cfg = cfg, .cb = cb, .data = data};
    snprintf(since, sizeof(since), "%" PRId64, since_ms);
    r = tm_pg_pool_query(pool, demand_history_sql, 1, params, on_demand_history, req);
    if (r < 0)
        free(req);
    return r;
}
