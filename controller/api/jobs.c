/*
 * controller/api/jobs.c: GET, list, PATCH (retag) and cancel of jobs.
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
#include "core/err.h"
#include "core/log.h"
#include "core/model.h"


void tm_api_jobs_get(struct api_call *c)
{
    char id[24];

    fmt_i64(id, sizeof(id), c->id);
    /* An engineer sees its own team's jobs only; another team's job is
     * answered 404 like a missing one, so its existence does not leak. */
    const char *params[] = {id, tm_api_engineer_team(c)};
    tm_api_query(c, "SELECT " JOB_JSON " FROM jobs j WHERE j.id = $1"
                 " AND ($2::text IS NULL OR j.team = $2)", 2, params, tm_api_on_one);
}

void tm_api_jobs_list(struct api_call *c)
{
    struct api_qp qp[] = {{.name = "state"}, {.name = "team"}, {.name = "class"}, {.name = "preemptible"}, {.name = "limit"}, {.name = "cursor"}};
    struct tm_spec_error err = {0};
    char cursor[24], limit[16];
    int r = tm_api_parse_query(c, qp, 6, &err);

    if (r == TM_ECANCELED) {
        tm_api_call_free(c);
        return;
    }
    if (r == 0 && qp[0].set && tm_job_state_parse(qp[0].value) < 0)
        r = tm_spec_fail(&err, "state",
                         "must be queued, running, succeeded, failed, preempted or cancelled");
    if (r == 0 && qp[1].set && !tm_job_spec_name_ok(qp[1].value))
        r = tm_spec_fail(&err, "team", "must be 1-63 letters, digits, '.', '_' or '-'");
    if (r == 0 && qp[2].set && tm_job_class_parse(qp[2].value) < 0)
        r = tm_spec_fail(&err, "class", "must be train, eval, preprocess, inference or batch");
    if (r == 0 && qp[3].set && strcmp(qp[3].value, "true") != 0 && strcmp(qp[3].value, "false") != 0)
        r = tm_spec_fail(&err, "preemptible", "must be true or false");
    if (r == 0)
        r = tm_api_page_params(c, &qp[4], &qp[5], cursor, sizeof(cursor), &err);
    if (r < 0) {
        tm_api_fail_spec(c, &err);
        return;
    }
    snprintf(limit, sizeof(limit), "%u", c->limit + 1);
    const char *params[] = {qp[0].set ? qp[0].value : NULL, qp[1].set ? qp[1].value : NULL,
                            qp[2].set ? qp[2].value : NULL, qp[3].set ? qp[3].value : NULL,
                            cursor[0] ? cursor : NULL, limit, tm_api_engineer_team(c)};
    tm_api_query(c,
                 "SELECT j.id, " JOB_JSON " FROM jobs j"
                 " WHERE ($1::text IS NULL OR j.state = $1) AND ($2::text IS NULL OR j.team = $2)"
                 " AND ($3::text IS NULL OR j.class = $3) AND ($4::boolean IS NULL OR j.preemptible = $4)"
                 " AND ($5::bigint IS NULL OR j.id < $5) AND ($7::text IS NULL OR j.team = $7)"
                 " ORDER BY j.id DESC LIMIT $6",
                 7, params, tm_api_on_page);
}

/* Cancel and retag answer the same way: the job's team and state before,
 * and the changed row when the change applied. */
static void on_job_change(const struct tm_pg_reply *reply, void *data)
{
    struct api_call *c = data;
    PGresult *res;
    char msg[128];

    if (!tm_api_reply_ok(c, reply))
        return;
    res = reply->results[0];
    if (PQntuples(res) != 1 || PQgetisnull(res, 0, 0)) {
        tm_api_fail(c, 404, NULL, "no such job");
        return;
    }
    /* Another team's job is, to an engineer, no job at all. */
    if (c->role == TM_ROLE_ENGINEER && strcmp(PQgetvalue(res, 0, 0), c->team) != 0) {
        tm_api_fail(c, 404, NULL, "no such job");
        return;
    }
    if (PQgetisnull(res, 0, 2)) {
        snprintf(msg, sizeof(msg), "job is %s: %s", PQgetvalue(res, 0, 1),
                 c->flag ? "only a queued job can be retagged"
                         : "only a queued or running job can be cancelled");
        tm_api_fail(c, 409, NULL, msg);
        return;
    }
    tm_api_reply(c, 200, PQgetvalue(res, 0, 2), (size_t)PQgetlength(res, 0, 2));
}

static const char cancel_sql[] =
    "WITH b AS (SELECT id, team, state FROM jobs WHERE id = $1 FOR UPDATE),"
    " u AS (UPDATE jobs SET state = 'cancelled', finished_ms = $2, state_reason = $3"
    "   WHERE id = $1 AND ($4::text IS NULL OR team = $4) AND state IN ('queued', 'running')"
    "   RETURNING *),"
    " d AS (DELETE FROM job_allocations WHERE job_id IN (SELECT id FROM u) RETURNING node_id),"
    " n AS (UPDATE nodes SET idle_since_ms = $2 WHERE idle_since_ms IS NULL"
    "   AND state IN ('ready', 'draining') AND id IN (SELECT node_id FROM d)"
    "   AND NOT EXISTS (SELECT 1 FROM job_allocations a WHERE a.node_id = nodes.id AND a.job_id <> $1)"
    "   RETURNING id),"
    " dec AS (SELECT tarmac_decide($2, 'cancel', 'job', u.id::text, $3,"
    "   jsonb_build_object('by', $5::text, 'was', (SELECT state FROM b))) FROM u)"
    " SELECT (SELECT team FROM b), (SELECT state FROM b), (SELECT " JOB_JSON " FROM u j),"
    " (SELECT count(*) FROM dec), (SELECT count(*) FROM n)";

void tm_api_jobs_cancel(struct api_call *c)
{
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
    snprintf(reason, sizeof(reason), "cancelled by %s%s%s", c->token_name, why[0] ? ": " : "", why);
    fmt_i64(id, sizeof(id), c->id);
    fmt_i64(now, sizeof(now), tm_api_now_ms(c));
    const char *params[] = {id, now, reason, c->role == TM_ROLE_ENGINEER ? c->team : NULL,
                            c->token_name};
    c->flag = false;
    tm_api_query(c, cancel_sql, 5, params, on_job_change);
}

static const char retag_sql[] =
    "WITH b AS (SELECT id, team, state FROM jobs WHERE id = $1 FOR UPDATE),"
    " u AS (UPDATE jobs SET preemptible = $2::boolean"
    "   WHERE id = $1 AND ($3::text IS NULL OR team = $3) AND state = 'queued' RETURNING *),"
    " dec AS (SELECT tarmac_decide($4, 'retag', 'job', u.id::text,"
    "   'preemptible set to ' || $2::boolean::text || ' by ' || $5::text,"
    "   jsonb_build_object('by', $5::text, 'preemptible', $2::boolean)) FROM u)"
    " SELECT (SELECT team FROM b), (SELECT state FROM b), (SELECT " JOB_JSON " FROM u j),"
    " (SELECT count(*) FROM dec)";

void tm_api_jobs_retag(struct api_call *c)
{
    struct tm_spec_error err = {0};
    const char *body;
    size_t len;
    bool pre = false;
    char id[24], now[24];

    if (!tm_api_body(c, &body, &len)) {
        tm_api_call_free(c);
        return;
    }
    if (tm_api_parse_retag(body, len, &pre, &err) < 0) {
        tm_api_fail_spec(c, &err);
        return;
    }
    fmt_i64(id, sizeof(id), c->id);
    fmt_i64(now, sizeof(now), tm_api_now_ms(c));
    const char *params[] = {id, pre ? "true" : "false",
                            c->role == TM_ROLE_ENGINEER ? c->team : NULL, now, c->token_name};
    c->flag = true;
    tm_api_query(c, retag_sql, 5, params, on_job_change);
}
