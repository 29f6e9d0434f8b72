/*
 * controller/api/agent.c: the node agent's routes (the contract in
 * docs/openapi.yaml, tag agent): enrollment, which trades a node's
 * single-use enrollment secret for an agent token bound to that node, and
 * the start and exit reports of a job's attempt.  The heartbeat and the
 * interruption notice are in nodes.c.  An agent token reaches these routes
 * for its own node only (auth.c).
 *
 * Attempt fencing: a start or exit for an attempt that is not the job's
 * current one on this node answers 409 naming "attempt" and changes
 * nothing (the agent then kills or drops that process).  The exit goes
 * through tarmac_agent_report(), the sim agent's path.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>
#include <libpq-fe.h>
#include <openssl/crypto.h>

#include "controller/api/internal.h"
#include "controller/api/request.h"
#include "controller/api/resources.h"
#include "controller/spec/api_body.h"
#include "controller/spec/token.h"
#include "core/err.h"
#include "core/log.h"

/* ---- enrollment ----------------------------------------------------------- */

/* One statement: the secret is used (unused, unexpired, its node live) and
 * the token stored, with the node's address when the agent gave one ($5),
 * or none of it. */
static const char enroll_sql[] =
    "WITH e AS (UPDATE agent_enrollments SET used_ms = $3"
    "   WHERE node_id = $1 AND hash = $2 AND used_ms IS NULL AND expires_ms > $3"
    "     AND EXISTS (SELECT 1 FROM nodes n WHERE n.id = $1"
    "                  AND n.state NOT IN ('terminated', 'interrupted'))"
    "   RETURNING id, node_id),"
    " t AS (INSERT INTO api_tokens (name, role, hash, created_ms, node_id)"
    "   SELECT 'agent-' || node_id || '-' || id, 'agent', $4, $3, node_id FROM e RETURNING node_id),"
    " a AS (UPDATE nodes SET address = $5 FROM t WHERE nodes.id = t.node_id AND $5::text IS NOT NULL"
    "   RETURNING 1),"
    " d AS (SELECT tarmac_decide($3, 'agent_enrolled', 'node', node_id::text,"
    "   'the node agent enrolled', '{}'::jsonb) FROM t)"
    " SELECT (SELECT node_id FROM t), (SELECT count(*) FROM d), (SELECT count(*) FROM a)";

static void on_enroll(const struct tm_pg_reply *reply, void *data)
{
    struct api_call *c = data;
    PGresult *res;

    if (!tm_api_reply_ok(c, reply))
        return;
    res = reply->results[0];
    if (PQntuples(res) != 1 || PQgetisnull(res, 0, 0)) {
        /* One message for a bad, used or expired secret: nothing to learn. */
        tm_api_enroll_failed(c, c->id);
        tm_api_fail(c, 401, "secret", "invalid, used or expired enrollment secret");
        return;
    }
    tm_api_reply(c, 201, c->secret, strlen(c->secret));
}

void tm_api_agent_enroll(struct api_call *c)
{
    struct tm_spec_error err = {0};
    const char *body, *secret = NULL, *address = NULL;
    char addr[64];
    size_t len;
    cJSON *root = NULL;
    int64_t node = 0;
    char hash[TM_TOKEN_HASH_LEN + 1], token_hash[TM_TOKEN_HASH_LEN + 1];
    char token[TM_TOKEN_LEN + 1], id[24], now[24];
    int r;

    if (!tm_api_body(c, &body, &len)) {
        tm_api_call_free(c);
        return;
    }
    /* No token yet to limit by: each client address has its own bucket,
     * before the body is even read. */
    if (!tm_api_enroll_take(c)) {
        tm_api_fail(c, 429, NULL, "too many enrollment attempts from this address; retry later");
        return;
    }
    if (tm_api_parse_enroll(body, len, &node, &secret, &address, &root, &err) < 0) {
        tm_api_fail_spec(c, &err);
        return;
    }
    snprintf(addr, sizeof(addr), "%s", address ? address : "");
    /* The secret is the caller's proof: only its hash goes further. */
    r = tm_token_hash(secret, strlen(secret), hash);
    OPENSSL_cleanse((char *)secret, strlen(secret));
    cJSON_Delete(root);
    if (r < 0 || tm_token_generate(token) < 0 || tm_token_hash(token, TM_TOKEN_LEN, token_hash) < 0) {
        OPENSSL_cleanse(token, sizeof(token));
        tm_api_fail(c, 500, NULL, "could not make a token");
        return;
    }
    c->id = node; /* for the log line of a refused secret */
    fmt_i64(id, sizeof(id), node);
    fmt_i64(now, sizeof(now), tm_api_now_ms(c));
    snprintf(c->secret, sizeof(c->secret), "{\"node_id\":%s,\"token\":\"%s\"}", id, token);
    OPENSSL_cleanse(token, sizeof(token));
    const char *params[] = {id, hash, now, token_hash, addr[0] ? addr : NULL};
    tm_api_query(c, enroll_sql, 5, params, on_enroll);
    OPENSSL_cleanse(hash, sizeof(hash));
}

/* ---- a job's attempt: start and exit -------------------------------------- */

/* {job} of the path: a positive integer, else 400 (c answered). */
static bool job_param(struct api_call *c, int64_t *ret)
{
    if (!tm_api_parse_pos(c->name, INT64_C(999999999999999999), ret)) {
        tm_api_fail(c, 400, "job", "must be a positive whole number");
        return false;
    }
    return true;
}

/* Columns: the node's state (NULL: no such node), whether the attempt is
 * current, and the route's answer when it was. */
static void on_attempt(const struct tm_pg_reply *reply, void *data)
{
    struct api_call *c = data;
    PGresult *res;

    if (!tm_api_reply_ok(c, reply))
        return;
    res = reply->results[0];
    if (PQntuples(res) != 1 || PQgetisnull(res, 0, 0)) {
        tm_api_fail(c, 404, NULL, "no such node");
        return;
    }
    if (strcmp(PQgetvalue(res, 0, 1), "t") != 0) {
        tm_api_fail(c, 409, "attempt",
                    "not the job's current attempt on this node (requeued, finished or cancelled): "
                    "stop that process");
        return;
    }
    tm_api_reply(c, 200, PQgetvalue(res, 0, 2), (size_t)PQgetlength(res, 0, 2));
}

static const char start_sql[] =
    "WITH cur AS (SELECT tarmac_agent_attempt_current($1, $2, $3::int) AS ok),"
    " u AS (UPDATE jobs SET pid = $4::int, agent_started_ms = $5"
    "   WHERE id = $2 AND (SELECT ok FROM cur) RETURNING id),"
    /* each member of a gang keeps its own start (migrations/0021) */
    " m AS (UPDATE job_members SET started_ms = $5 WHERE job_id = $2 AND attempt = $3::int"
    "   AND node_id = $1 AND (SELECT ok FROM cur))"
    " SELECT (SELECT state FROM nodes WHERE id = $1), (SELECT ok FROM cur),"
    " json_build_object('job_id', $2::bigint, 'attempt', $3::int, 'started', (SELECT count(*) FROM u) = 1)::text";

void tm_api_agent_job_start(struct api_call *c)
{
    struct tm_spec_error err = {0};
    const char *body;
    size_t len;
    int64_t job = 0, attempt = 0, pid = -1;
    char node_s[24], job_s[24], attempt_s[24], pid_s[24], now[24];

    if (!tm_api_body(c, &body, &len)) {
        tm_api_call_free(c);
        return;
    }
    if (!job_param(c, &job))
        return;
    if (tm_api_parse_job_start(body, len, &attempt, &pid, &err) < 0) {
        tm_api_fail_spec(c, &err);
        return;
    }
    fmt_i64(node_s, sizeof(node_s), c->id);
    fmt_i64(job_s, sizeof(job_s), job);
    fmt_i64(attempt_s, sizeof(attempt_s), attempt);
    fmt_i64(pid_s, sizeof(pid_s), pid);
    fmt_i64(now, sizeof(now), tm_api_now_ms(c));
    const char *params[] = {node_s, job_s, attempt_s, pid >= 0 ? pid_s : NULL, now};
    tm_api_query(c, start_sql, 5, params, on_attempt);
}

/* The report runs only for the current attempt; a stale one changes
 * nothing (not even the node's heartbeat time). */
static const char exit_sql[] =
    "WITH cur AS (SELECT tarmac_agent_attempt_current($1, $2, $3::int) AS ok)"
    " SELECT (SELECT state FROM nodes WHERE id = $1), (SELECT ok FROM cur),"
    " CASE WHEN (SELECT ok FROM cur) THEN json_build_object('job_id', $2::bigint,"
    "   'attempt', $3::int, 'recorded', tarmac_agent_report($1, $4, $5::jsonb) = 1)::text END";

void tm_api_agent_job_exit(struct api_call *c)
{
    struct tm_spec_error err = {0};
    const char *body;
    size_t len;
    int64_t job = 0;
    char *report = NULL;
    char node_s[24], job_s[24], attempt_s[24], now[24];
    const cJSON *attempt;
    cJSON *doc;

    if (!tm_api_body(c, &body, &len)) {
        tm_api_call_free(c);
        return;
    }
    if (!job_param(c, &job))
        return;
    if (tm_api_parse_job_exit(body, len, job, &report, &err) < 0) {
        tm_api_fail_spec(c, &err);
        return;
    }
    doc = cJSON_Parse(report);
    attempt = doc ? cJSON_GetObjectItemCaseSensitive(
                        cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(doc, "jobs"), 0), "attempt")
                  : NULL;
    if (!cJSON_IsNumber(attempt)) {
        cJSON_Delete(doc);
        free(report);
        tm_api_fail(c, 500, NULL, "out of memory");
        return;
    }
    fmt_i64(node_s, sizeof(node_s), c->id);
    fmt_i64(job_s, sizeof(job_s), job);
    fmt_i64(attempt_s, sizeof(attempt_s), (int64_t)attempt->valuedouble);
    fmt_i64(now, sizeof(now), tm_api_now_ms(c));
    cJSON_Delete(doc);
    const char *params[] = {node_s, job_s, attempt_s, now, report};
    tm_api_query(c, exit_sql, 5, params, on_attempt);
    free(report);
}
