/*
 * controller/api/money.c: budgets (PUT, list) and spend.
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


/* ---- budgets and spend ---------------------------------------------------- */

/* The calendar month (UTC) of $1 (ms since the epoch): its 'YYYY-MM' as
 * the spend ledger spells it, and its first and last instant in ms. */
#define MONTH_CTE                                                                                  \
    "per AS (SELECT to_char(t, 'YYYY-MM') AS p,"                                                  \
    "   (extract(epoch FROM date_trunc('month', t)) * 1000)::bigint AS start_ms,"                 \
    "   (extract(epoch FROM date_trunc('month', t) + interval '1 month') * 1000)::bigint AS end_ms" \
    "  FROM (SELECT to_timestamp($1::bigint / 1000.0) AT TIME ZONE 'UTC' AS t) x)"

#define BUDGET_JSON                                                                                \
    "json_build_object('scope_kind', b.scope_kind, 'scope', b.scope, 'period', b.period,"         \
    " 'cap_cents', b.cap_cents, 'currency', b.currency, 'warn_percent', b.warn_percent,"          \
    " 'hard', b.hard, 'updated_ms', b.updated_ms)"

/* A team is known when a job or a token (revoked ones too) names it: a
 * budget for a team nobody has mentioned is a typo, refused.  An org scope
 * is any name. */
static const char budget_put_sql[] =
    "WITH k AS (SELECT $2::text = 'org' OR EXISTS (SELECT 1 FROM jobs WHERE team = $1)"
    "   OR EXISTS (SELECT 1 FROM api_tokens WHERE team = $1) AS ok),"
    " u AS (INSERT INTO budgets (scope_kind, scope, period, cap_cents, currency, warn_percent,"
    "   hard, updated_ms)"
    "  SELECT $2, $1, 'month', $3::bigint, 'USD', $4::int, $5::boolean, $6::bigint FROM k WHERE k.ok"
    "  ON CONFLICT (scope_kind, scope, period) DO UPDATE SET cap_cents = EXCLUDED.cap_cents,"
    "   currency = EXCLUDED.currency, warn_percent = EXCLUDED.warn_percent, hard = EXCLUDED.hard,"
    "   updated_ms = EXCLUDED.updated_ms RETURNING *),"
    " dec AS (SELECT tarmac_decide($6::bigint, 'budget_set', 'budget', u.scope_kind || ':' || u.scope,"
    "   'budget set by ' || $7::text || ': ' || u.cap_cents || ' cents a month, '"
    "   || CASE WHEN u.hard THEN 'hard' ELSE 'soft' END || ', warn at ' || u.warn_percent || '%',"
    "   jsonb_build_object('by', $7::text, 'cap_cents', u.cap_cents, 'hard', u.hard,"
    "   'warn_percent', u.warn_percent)) FROM u)"
    " SELECT (SELECT ok FROM k), (SELECT " BUDGET_JSON "::text FROM u b), (SELECT count(*) FROM dec)";

static void on_budget_put(const struct tm_pg_reply *reply, void *data)
{
    struct api_call *c = data;
    PGresult *res;

    if (!tm_api_reply_ok(c, reply))
        return;
    res = reply->results[0];
    if (PQntuples(res) != 1 || strcmp(PQgetvalue(res, 0, 0), "t") != 0) {
        tm_api_fail(c, 400, "team",
                    "unknown team: no job and no token names it (scope_kind \"org\" for an org)");
        return;
    }
    if (PQgetisnull(res, 0, 1)) {
        tm_api_fail(c, 500, NULL, "the budget was not written");
        return;
    }
    tm_api_reply(c, 200, PQgetvalue(res, 0, 1), (size_t)PQgetlength(res, 0, 1));
}

void tm_api_budgets_put(struct api_call *c)
{
    struct tm_spec_error err = {0};
    struct tm_api_budget b;
    const char *body;
    size_t len;
    char cap[24], warn[16], now[24];

    if (!tm_api_body(c, &body, &len)) {
        tm_api_call_free(c);
        return;
    }
    if (tm_api_parse_budget(body, len, &b, &err) < 0) {
        tm_api_fail_spec(c, &err);
        return;
    }
    fmt_i64(cap, sizeof(cap), b.cap_cents);
    snprintf(warn, sizeof(warn), "%d", b.warn_percent);
    fmt_i64(now, sizeof(now), tm_api_now_ms(c));
    const char *params[] = {c->name, b.org ? "org" : "team", cap, warn, b.hard ? "true" : "false",
                            now, c->token_name};
    tm_api_query(c, budget_put_sql, 7, params, on_budget_put);
}

/* The one-row, one-column answer built by PostgreSQL. */
static void on_document(const struct tm_pg_reply *reply, void *data)
{
    struct api_call *c = data;

    if (!tm_api_reply_ok(c, reply))
        return;
    tm_api_reply_one(c, reply->results[0], 200, "document");
}

/* Every budget (an engineer: its team's only) with what was spent against
 * it this month: a team's job spend, or for an org everything, idle too. */
static const char budgets_sql[] =
    "WITH " MONTH_CTE
    " SELECT json_build_object('period', per.p, 'items', coalesce((SELECT json_agg(x.doc"
    "   ORDER BY x.scope_kind, x.scope) FROM (SELECT b.scope_kind, b.scope,"
    "   (" BUDGET_JSON "::jsonb || jsonb_build_object('spent_cents', (SELECT coalesce(sum(s.cents), 0)"
    "    FROM spend s WHERE s.period = per.p AND (b.scope_kind = 'org' OR s.team = b.scope)))) AS doc"
    "   FROM budgets b WHERE $2::text IS NULL OR (b.scope_kind = 'team' AND b.scope = $2)) x),"
    "   '[]'::json))::text FROM per";

void tm_api_budgets_list(struct api_call *c)
{
    char now[24];

    fmt_i64(now, sizeof(now), tm_api_now_ms(c));
    const char *params[] = {now, tm_api_engineer_team(c)};
    tm_api_query(c, budgets_sql, 2, params, on_document);
}

/* Spend so far this calendar month from the ledger, per team, per pool
 * and per provider (the pool's cloud) with idle apart, and a projection to the month's end: spend so far plus
 * the current rate (the hourly prices of the billed nodes) times the hours
 * left.  1 cent = 10^4 micro-dollars.  An engineer sees its team's rows
 * only, and no fleet-wide idle, rate or projection. */
static const char spend_sql[] =
    "WITH " MONTH_CTE ","
    " s AS (SELECT sp.* FROM spend sp, per WHERE sp.period = per.p"
    "   AND ($2::text IS NULL OR sp.team = $2)),"
    " t AS (SELECT coalesce(sum(cents), 0) AS total FROM s),"
    " rate AS (SELECT coalesce(sum(price_uusd_per_hour), 0)::numeric AS uusd FROM nodes"
    "   WHERE state IN ('booting', 'ready', 'draining', 'terminating'))"
    " SELECT json_build_object('period', per.p, 'currency', 'USD', 'now_ms', $1::bigint,"
    " 'month_start_ms', per.start_ms, 'month_end_ms', per.end_ms,"
    " 'total_cents', t.total,"
    " 'job_cents', (SELECT coalesce(sum(cents), 0) FROM s WHERE kind = 'job'),"
    " 'idle_cents', CASE WHEN $2::text IS NULL THEN"
    "   (SELECT coalesce(sum(cents), 0) FROM s WHERE kind = 'idle') END,"
    " 'teams', coalesce((SELECT json_agg(json_build_object('team', q.team, 'cents', q.c)"
    "   ORDER BY q.team) FROM (SELECT team, sum(cents) AS c FROM s WHERE kind = 'job'"
    "   GROUP BY team) q), '[]'::json),"
    " 'pools', coalesce((SELECT json_agg(json_build_object('pool', q.pool, 'job_cents', q.jc,"
    "   'idle_cents', q.ic, 'cents', q.jc + q.ic) ORDER BY q.pool) FROM (SELECT pool,"
    "   coalesce(sum(cents) FILTER (WHERE kind = 'job'), 0) AS jc,"
    "   coalesce(sum(cents) FILTER (WHERE kind = 'idle'), 0) AS ic FROM s GROUP BY pool) q),"
    "   '[]'::json),"
    /* By cloud: a pool group's spend across its members' providers. */
    " 'providers', coalesce((SELECT json_agg(json_build_object('provider', q.provider,"
    "   'provider_kind', q.kind, 'job_cents', q.jc, 'idle_cents', q.ic, 'cents', q.jc + q.ic)"
    "   ORDER BY q.provider) FROM (SELECT pl.provider, min(pl.provider_kind) AS kind,"
    "   coalesce(sum(s.cents) FILTER (WHERE s.kind = 'job'), 0) AS jc,"
    "   coalesce(sum(s.cents) FILTER (WHERE s.kind = 'idle'), 0) AS ic"
    "   FROM s JOIN pools pl ON pl.name = s.pool GROUP BY pl.provider) q), '[]'::json),"
    " 'rate_uusd_per_hour', CASE WHEN $2::text IS NULL THEN rate.uusd END,"
    " 'hours_left', round((per.end_ms - $1::bigint)::numeric / 3600000, 6),"
    " 'projected_cents', CASE WHEN $2::text IS NULL THEN t.total"
    "   + round(rate.uusd * greatest(per.end_ms - $1::bigint, 0) / 36000000000) END)::text"
    " FROM per, t, rate";

void tm_api_spend(struct api_call *c)
{
    char now[24];

    fmt_i64(now, sizeof(now), tm_api_now_ms(c));
    const char *params[] = {now, tm_api_engineer_team(c)};
    tm_api_query(c, spend_sql, 2, params, on_document);
}
