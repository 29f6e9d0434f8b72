/*
 * controller/api/nodes.c: pools and nodes: lists, one of each, and the node verbs
 * (drain, cordon, heartbeat, interruption).
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>
#include <libpq-fe.h>

#include "controller/api/internal.h"
#include "controller/api/request.h"
#include "controller/api/resources.h"
#include "controller/api/rows.h"
#include "controller/spec/api_body.h"
#include "controller/spec/json_body.h"
#include "core/config.h"
#include "core/err.h"
#include "core/log.h"
#include "core/model.h"

/* agent.clock_skew and agent.sample_max_age when the server was started
 * without a configuration (the unit tests). */
#define SAMPLE_SKEW_DEFAULT_MS (2 * 60 * 1000)
#define SAMPLE_MAX_AGE_DEFAULT_MS (6 * 3600 * 1000)

/* ---- pools and nodes ------------------------------------------------------ */

void tm_api_pools_list(struct api_call *c)
{
    struct api_qp qp[] = {{.name = "limit"}, {.name = "cursor"}};
    struct tm_spec_error err = {0};
    int r = tm_api_parse_query(c, qp, 2, &err);
    char limit[16], offset[24], cursor[24];

    if (r == TM_ECANCELED) {
        tm_api_call_free(c);
        return;
    }
    if (r == 0)
        r = tm_api_page_params(c, &qp[0], &qp[1], cursor, sizeof(cursor), &err);
    if (r < 0) {
        tm_api_fail_spec(c, &err);
        return;
    }
    /* Pools have names, not ids: the cursor is a position. */
    snprintf(limit, sizeof(limit), "%u", c->limit + 1);
    snprintf(offset, sizeof(offset), "%s", cursor[0] ? cursor : "0");
    const char *params[] = {limit, offset};
    tm_api_query(c,
                 "SELECT $2::bigint + row_number() OVER (ORDER BY p.name), " POOL_JSON
                 " FROM pools p ORDER BY p.name LIMIT $1 OFFSET $2",
                 2, params, tm_api_on_page);
}

void tm_api_pools_get(struct api_call *c)
{
    const char *params[] = {c->name};
    c->flag = true;
    tm_api_query(c, "SELECT " POOL_JSON " FROM pools p WHERE p.name = $1", 1, params,
                 tm_api_on_one);
}

void tm_api_nodes_list(struct api_call *c)
{
    struct api_qp qp[] = {{.name = "pool"}, {.name = "state"}, {.name = "limit"}, {.name = "cursor"}};
    struct tm_spec_error err = {0};
    char cursor[24], limit[16];
    int r = tm_api_parse_query(c, qp, 4, &err);

    if (r == TM_ECANCELED) {
        tm_api_call_free(c);
        return;
    }
    if (r == 0 && qp[0].set && !tm_job_spec_name_ok(qp[0].value))
        r = tm_spec_fail(&err, "pool", "must be a pool name");
    if (r == 0 && qp[1].set && tm_node_state_parse(qp[1].value) < 0)
        r = tm_spec_fail(&err, "state",
                         "must be requested, booting, ready, draining, terminating, terminated or interrupted");
    if (r == 0)
        r = tm_api_page_params(c, &qp[2], &qp[3], cursor, sizeof(cursor), &err);
    if (r < 0) {
        tm_api_fail_spec(c, &err);
        return;
    }
    snprintf(limit, sizeof(limit), "%u", c->limit + 1);
    const char *params[] = {qp[0].set ? qp[0].value : NULL, qp[1].set ? qp[1].value : NULL,
                            cursor[0] ? cursor : NULL, limit};
    tm_api_query(c,
                 "SELECT n.id, " NODE_JSON " FROM nodes n"
                 " WHERE ($1::text IS NULL OR n.pool = $1) AND ($2::text IS NULL OR n.state = $2)"
                 " AND ($3::bigint IS NULL OR n.id < $3) ORDER BY n.id DESC LIMIT $4",
                 4, params, tm_api_on_page);
}

void tm_api_nodes_get(struct api_call *c)
{
    char id[24];

    fmt_i64(id, sizeof(id), c->id);
    const char *params[] = {id};
    tm_api_query(c, "SELECT " NODE_JSON " FROM nodes n WHERE n.id = $1", 1, params, tm_api_on_one);
}

/* Drain, cordon and interruption notices: (state before, changed row). */
static void on_node_change(const struct tm_pg_reply *reply, void *data)
{
    struct api_call *c = data;
    PGresult *res;
    char msg[96];

    if (!tm_api_reply_ok(c, reply))
        return;
    res = reply->results[0];
    if (PQntuples(res) != 1 || PQgetisnull(res, 0, 0)) {
        tm_api_fail(c, 404, NULL, "no such node");
        return;
    }
    if (PQgetisnull(res, 0, 1)) {
        snprintf(msg, sizeof(msg), "node is %s: nothing to change", PQgetvalue(res, 0, 0));
        tm_api_fail(c, 409, NULL, msg);
        return;
    }
    tm_api_reply(c, 200, PQgetvalue(res, 0, 1), (size_t)PQgetlength(res, 0, 1));
}

static const char drain_sql[] =
    "WITH b AS (SELECT id, state FROM nodes WHERE id = $1 FOR UPDATE),"
    " u AS (UPDATE nodes SET cordoned = true,"
    "   state = CASE WHEN $5::boolean AND state = 'ready' THEN 'draining' ELSE state END,"
    "   state_reason = $3"
    "   WHERE id = $1 AND state IN ('requested', 'booting', 'ready', 'draining') RETURNING *),"
    " dec AS (SELECT tarmac_decide($2, CASE WHEN $5::boolean THEN 'drain' ELSE 'cordon' END,"
    "   'node', u.id::text, $3, jsonb_build_object('by', $4::text)) FROM u)"
    " SELECT (SELECT state FROM b), (SELECT " NODE_JSON " FROM u n), (SELECT count(*) FROM dec)";

/* Uncordon: new work may come to the node again; a draining one is ready
 * again; a hardware report its owned machine made since it joined
 * (nodes.hardware_reported, migrations/0028) is accepted, its GPUs, CPUs
 * and memory with it.  Not for a node under an interruption notice: it
 * is leaving whatever anyone says. */
static const char uncordon_sql[] =
    "WITH b AS (SELECT id, state FROM nodes WHERE id = $1 FOR UPDATE),"
    " u AS (UPDATE nodes SET cordoned = false,"
    "   state = CASE WHEN state = 'draining' THEN 'ready' ELSE state END, state_reason = $3,"
    "   hardware = coalesce(hardware_reported, hardware),"
    "   gpus = CASE WHEN (hardware_reported ->> 'gpus')::int BETWEEN 1 AND 16"
    "     THEN (hardware_reported ->> 'gpus')::int ELSE gpus END,"
    "   cpu_milli = CASE WHEN (hardware_reported ->> 'cpus')::bigint >= 1"
    "     THEN (hardware_reported ->> 'cpus')::bigint * 1000 ELSE cpu_milli END,"
    "   memory_mib = CASE WHEN (hardware_reported ->> 'memory_mib')::bigint >= 1"
    "     THEN (hardware_reported ->> 'memory_mib')::bigint ELSE memory_mib END,"
    "   hardware_reported = NULL"
    "   WHERE id = $1 AND state IN ('requested', 'booting', 'ready', 'draining') AND notice_ms IS NULL"
    "   RETURNING *),"
    " dec AS (SELECT tarmac_decide($2, 'uncordon', 'node', u.id::text, $3,"
    "   jsonb_build_object('by', $4::text, 'hardware', u.hardware)) FROM u)"
    " SELECT (SELECT state FROM b), (SELECT " NODE_JSON " FROM u n), (SELECT count(*) FROM dec)";

enum node_verb { VERB_CORDON, VERB_DRAIN, VERB_UNCORDON };

static void node_verb(struct api_call *c, enum node_verb verb)
{
    static const char *const done[] = {"cordoned", "drained", "uncordoned"};
    bool drain = verb == VERB_DRAIN;
    struct tm_spec_error err = {0};
    char reason[TM_API_REASON_MAX + 128], why[TM_API_REASON_MAX + 1], id[24], now[24];
    const char *body;
    size_t len;

    if (!tm_api_body(c, &body, &len)) {
        tm_api_call_free(c);
        return;
    }
    if (tm_api_parse_verb(body, len, false, why, sizeof(why), NULL, &err) < 0) {
        tm_api_fail_spec(c, &err);
        return;
    }
    snprintf(reason, sizeof(reason), "%s by %s%s%s", done[verb], c->token_name, why[0] ? ": " : "",
             why);
    fmt_i64(id, sizeof(id), c->id);
    fmt_i64(now, sizeof(now), tm_api_now_ms(c));
    const char *params[] = {id, now, reason, c->token_name, drain ? "true" : "false"};
    if (verb == VERB_UNCORDON)
        tm_api_query(c, uncordon_sql, 4, params, on_node_change);
    else
        tm_api_query(c, drain_sql, 5, params, on_node_change);
}

void tm_api_nodes_drain(struct api_call *c)
{
    node_verb(c, VERB_DRAIN);
}

void tm_api_nodes_uncordon(struct api_call *c)
{
    node_verb(c, VERB_UNCORDON);
}

void tm_api_nodes_cordon(struct api_call *c)
{
    node_verb(c, VERB_CORDON);
}

/* $6: the notice's deadline (0: none given).  A notice naming the
 * deadline already recorded (within 2 s: in_s counts whole seconds) is
 * the same notice repeated: the node's reason is refreshed, no second
 * decision is written (0018). */
static const char interruption_sql[] =
    "WITH b AS (SELECT id, state, notice_deadline_ms FROM nodes WHERE id = $1 FOR UPDATE),"
    " u AS (UPDATE nodes SET cordoned = true, state_reason = $3, notice_deadline_ms = $6"
    "   WHERE id = $1 AND state NOT IN ('terminated', 'interrupted') RETURNING *),"
    " dec AS (SELECT tarmac_decide($2, 'interruption_notice', 'node', u.id::text, $3,"
    "   jsonb_build_object('by', $4::text, 'in_s', $5::bigint,"
    "     'deadline_ms', nullif($6::bigint, 0))) FROM u, b"
    "   WHERE b.notice_deadline_ms IS NULL OR abs(b.notice_deadline_ms - $6::bigint) > 2000)"
    " SELECT (SELECT state FROM b), (SELECT " NODE_JSON " FROM u n), (SELECT count(*) FROM dec)";

void tm_api_nodes_interruption(struct api_call *c)
{
    struct tm_spec_error err = {0};
    const struct tm_config *cfg = tm_api_config(c);
    char reason[TM_API_REASON_MAX + 128], why[TM_API_REASON_MAX + 1], id[24], now[24], in[24];
    char deadline_s[24];
    const char *body;
    size_t len;
    int64_t in_s = -1, deadline = 0;
    int64_t skew = cfg && cfg->agent.clock_skew_ms > 0 ? cfg->agent.clock_skew_ms : SAMPLE_SKEW_DEFAULT_MS;

    if (!tm_api_body(c, &body, &len)) {
        tm_api_call_free(c);
        return;
    }
    if (tm_api_parse_notice(body, len, tm_api_now_ms(c), skew, why, sizeof(why), &in_s, &deadline,
                            &err) < 0) {
        tm_api_fail_spec(c, &err);
        return;
    }
    snprintf(reason, sizeof(reason), "interruption notice%s%s", why[0] ? ": " : "", why);
    fmt_i64(id, sizeof(id), c->id);
    fmt_i64(now, sizeof(now), tm_api_now_ms(c));
    fmt_i64(in, sizeof(in), in_s);
    fmt_i64(deadline_s, sizeof(deadline_s), deadline);
    const char *params[] = {id, now, reason, c->token_name, in_s >= 0 ? in : NULL, deadline_s};
    tm_api_query(c, interruption_sql, 6, params, on_node_change);
}

/* The node agent path: tarmac_agent_report() (the same function the sim
 * agent calls), with the GPU samples in the same statement.  A node that is
 * terminated or interrupted reports nothing more: its heartbeat changes no
 * row (a late report must not finish jobs already requeued elsewhere) and
 * answers 409, counted in tarmac_http_requests_total{code="409"}.  A sample
 * or GPU whose index the node does not have changes nothing either: the
 * first one is named (column 2).  Columns: the node's state (NULL: no such
 * node), the bad field, the node's GPUs, then the answer when it was live:
 * the node and its assignments (every job placed on it now, with its
 * current attempt and its rendezvous, migrations/0020: $8 and $9 are
 * agent.rendezvous_port_min and _max; jobs this very report ended are left
 * out), and the common stop times of the gangs it still runs a member of
 * (migrations/0026: the report carries the agent's running jobs). */
static const char heartbeat_sql[] =
    "WITH n AS (SELECT id, state, gpus, cordoned, pool FROM nodes WHERE id = $1),"
    " bad AS (SELECT x ->> 'f' AS f FROM (SELECT x, i FROM jsonb_array_elements($4::jsonb)"
    "   WITH ORDINALITY t(x, i) UNION ALL SELECT x, i + 100000 FROM jsonb_array_elements($5::jsonb)"
    "   WITH ORDINALITY t(x, i)) v, n WHERE (x ->> 'gpu_index')::int >= n.gpus ORDER BY i LIMIT 1),"
    /* A cached token's proof ($6 its hash, $7 its role); both NULL now:
     * only the normal path, which authenticated already, sends this
     * statement (the fast path's batch checks the token itself, 0012). */
    " tok AS (SELECT 1 AS ok WHERE $6::text IS NULL UNION ALL SELECT 1 FROM api_tokens t"
    "   WHERE t.hash = $6 AND NOT t.revoked AND t.role = $7"
    "     AND (t.role <> 'agent' OR t.node_id = $1)),"
    " live AS (SELECT 1 FROM n WHERE state NOT IN ('terminated', 'interrupted')"
    "   AND NOT EXISTS (SELECT 1 FROM bad) AND EXISTS (SELECT 1 FROM tok)),"
    " s AS (INSERT INTO gpu_samples (node_id, gpu_index, at_ms, util_percent, memory_used_mib,"
    "   uuid, memory_total_mib, temperature_c, power_w, processes)"
    "  SELECT $1, (x ->> 'gpu_index')::int, coalesce((x ->> 'at_ms')::bigint, $2),"
    "   (x ->> 'util_percent')::real, (x ->> 'memory_used_mib')::bigint, x ->> 'uuid',"
    "   (x ->> 'memory_total_mib')::bigint, (x ->> 'temperature_c')::real, (x ->> 'power_w')::real,"
    "   x -> 'processes'"
    "  FROM jsonb_array_elements($4::jsonb) x WHERE EXISTS (SELECT 1 FROM live)"
    "  ON CONFLICT DO NOTHING RETURNING 1),"
    " rep AS (SELECT tarmac_agent_report($1, $2, $3::jsonb) AS finished FROM live)"
    " SELECT (SELECT state FROM n), (SELECT f FROM bad), (SELECT gpus FROM n),"
    " CASE WHEN EXISTS (SELECT 1 FROM live) THEN json_build_object("
    "  'node', (SELECT json_build_object('id', n.id, 'state', n.state,"
    "    'draining', n.state = 'draining' OR n.cordoned) FROM n),"
    "  'finished', (SELECT finished FROM rep), 'samples', (SELECT count(*) FROM s),"
    "  'assignments', (SELECT coalesce(json_agg(json_build_object('job_id', j.id,"
    "    'attempt', j.attempts, 'command', j.command, 'env', j.env, 'image', j.image,"
    "    'gpu_indices', (SELECT coalesce(json_agg(b ORDER BY b), '[]'::json)"
    "      FROM generate_series(0, 15) b WHERE a.gpu_mask & (1 << b) <> 0),"
    "    'gpu_milli', a.gpu_milli, 'cpu_milli', a.cpu_milli, 'memory_mib', a.memory_mib,"
    "    'checkpointable', j.checkpointable,"
    "    'checkpoint_dir', CASE WHEN j.checkpointable AND p.checkpoint_dir IS NOT NULL"
    "      THEN p.checkpoint_dir || '/job-' || j.id END,"
    "    'rendezvous', tarmac_rendezvous(j.id, j.attempts, $1, $2, $8::int, $9::int))"
    "    ORDER BY j.id), '[]'::json)"
    "   FROM job_allocations a JOIN jobs j ON j.id = a.job_id AND j.state = 'running'"
    "   JOIN n ON true LEFT JOIN pools p ON p.name = n.pool"
    "   WHERE a.node_id = $1 AND (SELECT finished FROM rep) IS NOT NULL"
    "     AND j.id NOT IN (SELECT (x ->> 'id')::bigint"
    "       FROM jsonb_array_elements($3::jsonb -> 'jobs') x)),"
    "  'stops', tarmac_gang_stops($1, $2, $3::jsonb))::text END,"
    " EXISTS (SELECT 1 FROM tok)";

static void on_heartbeat(const struct tm_pg_reply *reply, void *data)
{
    struct api_call *c = data;
    PGresult *res;

    if (!c->req) {
        tm_api_call_free(c);
        return;
    }
    if (reply->status < 0) {
        tm_api_samples_give_back(c);
        if (reply->sqlstate && strcmp(reply->sqlstate, "TM003") == 0)
            tm_api_fail(c, 404, NULL, "no such node");
        else
            tm_api_fail_db(c, reply);
        return;
    }
    res = reply->results[0];
    if (PQntuples(res) < 1) {
        tm_api_fail(c, 404, NULL, "no such node");
        return;
    }
#define COL(k) (PQgetisnull(res, 0, (k)) ? NULL : PQgetvalue(res, 0, (k)))
    tm_api_heartbeat_answer(c, strcmp(PQgetvalue(res, 0, 4), "t") == 0, COL(0), COL(1), COL(2), COL(3),
                            (size_t)PQgetlength(res, 0, 3));
#undef COL
}

/* The sample times a heartbeat may carry: agent.sample_max_age before the
 * API's clock (an agent's backlog after an outage) to agent.clock_skew
 * after it (a node's clock a little ahead).  Rows dated outside would
 * escape pruning by age or skew every window that reads them. */

static void sample_window(const struct api_call *c, struct tm_api_sample_window *win)
{
    const struct tm_config *cfg = tm_api_config(c);
    int64_t now = tm_api_now_ms(c);
    int64_t skew = cfg && cfg->agent.clock_skew_ms > 0 ? cfg->agent.clock_skew_ms : SAMPLE_SKEW_DEFAULT_MS;
    int64_t age = cfg && cfg->agent.sample_max_age_ms > 0 ? cfg->agent.sample_max_age_ms
                                                          : SAMPLE_MAX_AGE_DEFAULT_MS;

    win->min_ms = now - age;
    win->max_ms = now + skew;
}

/* The normal path (authenticated by the lookup statement): one statement;
 * $6 and $7 NULL, the token was checked already. */
void tm_api_nodes_heartbeat(struct api_call *c)
{
    struct tm_spec_error err = {0};
    struct tm_api_heartbeat hb = {0};
    struct tm_api_sample_window win;
    const char *body;
    size_t len;
    char id[24], now[24], lo[16], hi[16];

    if (!tm_api_body(c, &body, &len)) {
        tm_api_call_free(c);
        return;
    }
    sample_window(c, &win);
    if (tm_api_parse_heartbeat(body, len, &win, &hb, &err) < 0) {
        tm_api_samples_give_back(c);
        tm_api_fail_spec(c, &err);
        return;
    }
    if (!tm_api_samples_take(c, hb.nsamples)) {
        char msg[160];
        snprintf(msg, sizeof(msg),
                 "node %" PRId64 " sent more GPU samples than its budget (one per GPU per"
                 " agent.min_sample_period, beyond a backlog); retry later", c->id);
        tm_api_heartbeat_release(&hb);
        tm_api_fail(c, 429, "samples", msg);
        return;
    }
    fmt_i64(id, sizeof(id), c->id);
    fmt_i64(now, sizeof(now), tm_api_now_ms(c));
    tm_api_rendezvous_ports(c, lo, sizeof(lo), hi, sizeof(hi));
    const char *params[] = {id, now, hb.report, hb.samples, hb.gpus, NULL, NULL, lo, hi};
    if (tm_api_query(c, heartbeat_sql, 9, params, on_heartbeat) < 0)
        tm_api_samples_give_back(c);
    tm_api_heartbeat_release(&hb);
}

/* The hot path of a fleet's agents: a token authenticated within the
 * cache's life skips the separate lookup and its heartbeat joins the
 * batch (heartbeat_batch.c), whose statement checks the token again
 * (known, not revoked, same role, an agent's own node); a check that fails
 * hands the call to the normal path. */
void tm_api_nodes_heartbeat_fast(struct api_call *c)
{
    struct tm_spec_error err = {0};
    struct tm_api_heartbeat hb = {0};
    struct tm_api_sample_window win;
    const char *body;
    size_t len;

    if ((c->role == TM_ROLE_AGENT && c->id != c->token_node) || !tm_api_rate_take(c)) {
        tm_api_authenticate(c);
        return;
    }
    if (!tm_api_body(c, &body, &len)) {
        tm_api_call_free(c);
        return;
    }
    sample_window(c, &win);
    /* Errors, and a budget exceeded, answer after authentication, as always. */
    if (tm_api_parse_heartbeat(body, len, &win, &hb, &err) < 0 ||
        !tm_api_samples_take(c, hb.nsamples)) {
        tm_api_heartbeat_release(&hb);
        tm_api_authenticate(c);
        return;
    }
    tm_api_heartbeat_batch_add(c, tm_api_now_ms(c), hb.report, hb.samples, hb.gpus);
    tm_api_heartbeat_release(&hb);
}
