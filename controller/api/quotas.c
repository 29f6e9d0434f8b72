/*
 * controller/api/quotas.c: PUT, DELETE and GET /v1/quotas (quotas.h).
 *
 * A write is two statements: the set as it is and its version, then the
 * write guarded on that version (migrations/0029_quotas.sql).  Between them
 * the whole set as it would be is checked by the daemon's check (the
 * scheduler's quota model); a refused set writes nothing, a set changed
 * meanwhile answers 409.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>
#include <libpq-fe.h>

#include "controller/api/internal.h"
#include "controller/api/quotas.h"
#include "controller/api/request.h"
#include "controller/api/resources.h"
#include "controller/spec/quota_body.h"
#include "core/err.h"

static tm_api_quota_check_fn quota_check;
static tm_api_pool_flavor_fn pool_flavor;
static char *quota_view;

void tm_api_quotas_set_check(tm_api_quota_check_fn check, tm_api_pool_flavor_fn flavor_of)
{
    quota_check = check;
    pool_flavor = flavor_of;
}

/* A body without a flavor names the fleet's only one: false (and the call
 * answered) when the fleet has several, or none. */
static bool default_flavor(struct api_call *c, struct tm_api_quota_body *b)
{
    const struct tm_config *cfg = tm_api_config(c);
    char all[192] = "";
    size_t n = 0, at = 0;

    if (b->flavor[0])
        return true;
    for (size_t pi = 0; cfg && pi < cfg->npools; pi++) {
        const char *f = pool_flavor(cfg, pi);
        bool seen = false;
        for (size_t k = 0; k < pi && !seen; k++)
            seen = strcmp(pool_flavor(cfg, k), f) == 0;
        if (seen)
            continue;
        if (n++ == 0)
            snprintf(b->flavor, sizeof(b->flavor), "%s", f);
        int w = snprintf(all + at, sizeof(all) - at, "%s%s", at ? ", " : "", f);
        if (w > 0 && (size_t)w < sizeof(all) - at)
            at += (size_t)w;
    }
    if (n == 1)
        return true;
    char msg[256];
    snprintf(msg, sizeof(msg), "required: the fleet has %s flavors (%s)", n ? "several" : "no",
             n ? all : "no pool");
    tm_api_fail(c, 400, "flavor", msg);
    return false;
}

void tm_api_quotas_publish(const char *view_json)
{
    char *copy = view_json ? strdup(view_json) : NULL;

    if (view_json && !copy)
        return; /* keep the older view rather than none */
    free(quota_view);
    quota_view = copy;
}

const char *tm_api_quotas_view(void)
{
    return quota_view;
}

#define QUOTA_JSON                                                                                 \
    "json_build_object('team', q.team, 'flavor', q.flavor, 'gpus', q.gpus,"                       \
    " 'borrowing_limit', q.borrowing_limit, 'lending_limit', q.lending_limit, 'org', q.org,"      \
    " 'weight', q.weight, 'updated_ms', q.updated_ms, 'updated_by', q.updated_by)"

/* The set, its version, and whether a job, a token or a quota's org names
 * the team ($1): a quota for a team nobody has mentioned is a typo. */
static const char quota_read_sql[] =
    "SELECT (SELECT v FROM quota_version WHERE id = 1),"
    " EXISTS (SELECT 1 FROM jobs WHERE team = $1) OR EXISTS (SELECT 1 FROM api_tokens WHERE team = $1)"
    "   OR EXISTS (SELECT 1 FROM quotas WHERE org = $1),"
    " coalesce((SELECT json_agg(json_build_object('team', team, 'flavor', flavor, 'gpus', gpus,"
    "   'borrowing_limit', borrowing_limit, 'lending_limit', lending_limit, 'org', org,"
    "   'weight', weight) ORDER BY team, flavor) FROM quotas), '[]')::text";

/* The stored rows (the read's third column) as check rows after `first`
 * (the row being written, or none), leaving out the rows of team (and
 * flavor, when given) that the write replaces or removes.  Strings point
 * into *ret_doc. */
static int stored_rows(const char *json, const struct tm_api_quota_row *first, const char *team,
                       const char *flavor, cJSON **ret_doc, struct tm_api_quota_row **ret, size_t *ret_n)
{
    cJSON *doc = cJSON_Parse(json);
    size_t n = 0, cap = (size_t)cJSON_GetArraySize(doc) + 1;
    struct tm_api_quota_row *rows = doc ? calloc(cap, sizeof(*rows)) : NULL;
    const cJSON *x;

    if (!rows) {
        cJSON_Delete(doc);
        return TM_ENOMEM;
    }
    if (first)
        rows[n++] = *first;
    cJSON_ArrayForEach(x, doc)
    {
        const char *t = cJSON_GetStringValue(cJSON_GetObjectItem(x, "team"));
        const char *f = cJSON_GetStringValue(cJSON_GetObjectItem(x, "flavor"));
        const cJSON *bl = cJSON_GetObjectItem(x, "borrowing_limit");
        const cJSON *ll = cJSON_GetObjectItem(x, "lending_limit");
        if (!t || !f || (strcmp(t, team) == 0 && (!flavor || strcmp(f, flavor) == 0)))
            continue;
        rows[n++] = (struct tm_api_quota_row){
            .team = t, .flavor = f, .org = cJSON_GetStringValue(cJSON_GetObjectItem(x, "org")),
            .gpus = cJSON_GetNumberValue(cJSON_GetObjectItem(x, "gpus")),
            .borrowing_limit = cJSON_IsNumber(bl) ? bl->valuedouble : NAN,
            .lending_limit = cJSON_IsNumber(ll) ? ll->valuedouble : NAN,
            .weight = cJSON_GetNumberValue(cJSON_GetObjectItem(x, "weight")),
        };
    }
    *ret_doc = doc;
    *ret = rows;
    *ret_n = n;
    return 0;
}

/* The check's "quotas[i].field: reason" as the answer's field: the field
 * itself for the row written (row 0), else what the other row's fault
 * comes from in this one (its org, or the set as a whole). */
static void fail_check(struct api_call *c, const char *msg)
{
    char field[32] = "body";
    const char *dot = strchr(msg, '.'), *colon = strchr(msg, ':');

    if (strncmp(msg, "quotas[0].", 10) == 0 && colon && colon > dot && (size_t)(colon - dot) < sizeof(field))
        snprintf(field, sizeof(field), "%.*s", (int)(colon - dot - 1), dot + 1);
    else if (strstr(msg, ".org:"))
        snprintf(field, sizeof(field), "org");
    tm_api_fail(c, 400, field, msg);
}

/* Run the check over rows; false (and the call answered) when refused. */
static bool check_set(struct api_call *c, const struct tm_api_quota_row *rows, size_t n)
{
    char err[256] = "";
    int r = quota_check(tm_api_config(c), rows, n, err, sizeof(err));

    if (r == TM_EINVAL)
        fail_check(c, err);
    else if (r < 0)
        tm_api_fail(c, 503, NULL, "out of memory checking the quotas");
    return r == 0;
}

/* ---- PUT /v1/quotas/{name} ------------------------------------------------ */

static const char quota_put_sql[] =
    "WITH v AS (UPDATE quota_version SET v = v + 1 WHERE id = 1 AND v = $9::bigint RETURNING v),"
    " u AS (INSERT INTO quotas (team, flavor, gpus, borrowing_limit, lending_limit, org, weight,"
    "   updated_ms, updated_by)"
    "  SELECT $1, $2, $3::bigint, $4::bigint, $5::bigint, $6, coalesce($7::float8, 1), $8::bigint, $10"
    "  FROM v"
    "  ON CONFLICT (team, flavor) DO UPDATE SET gpus = EXCLUDED.gpus,"
    "   borrowing_limit = EXCLUDED.borrowing_limit, lending_limit = EXCLUDED.lending_limit,"
    "   org = EXCLUDED.org, weight = EXCLUDED.weight, updated_ms = EXCLUDED.updated_ms,"
    "   updated_by = EXCLUDED.updated_by RETURNING *),"
    " dec AS (SELECT tarmac_decide($8::bigint, 'quota_set', 'quota', u.team || ':' || u.flavor,"
    "   'quota set by ' || $10::text || ': ' || u.team || ' is guaranteed ' || u.gpus || ' GPUs of '"
    "   || u.flavor || coalesce(', borrows up to ' || u.borrowing_limit || ' more', '')"
    "   || coalesce(', lends up to ' || u.lending_limit, '') || coalesce(', in org ' || u.org, ''),"
    "   jsonb_build_object('by', $10::text, 'gpus', u.gpus, 'borrowing_limit', u.borrowing_limit,"
    "   'lending_limit', u.lending_limit, 'org', u.org, 'weight', u.weight)) FROM u)"
    " SELECT (SELECT count(*) FROM v), (SELECT " QUOTA_JSON "::text FROM u q), (SELECT count(*) FROM dec)";

static void on_quota_written(const struct tm_pg_reply *reply, void *data)
{
    struct api_call *c = data;
    PGresult *res;

    if (!tm_api_reply_ok(c, reply))
        return;
    res = reply->results[0];
    if (PQntuples(res) != 1 || strcmp(PQgetvalue(res, 0, 0), "1") != 0) {
        tm_api_fail(c, 409, NULL, "the quotas changed while this change was checked; try again");
        return;
    }
    if (PQgetisnull(res, 0, 1)) {
        tm_api_fail(c, 404, "flavor", "no such quota");
        return;
    }
    tm_api_reply(c, 200, PQgetvalue(res, 0, 1), (size_t)PQgetlength(res, 0, 1));
}

static void fmt_num(char *buf, size_t size, double v)
{
    snprintf(buf, size, "%.0f", v);
}

/* The set read: check it with the new row, then write it. */
static void on_quota_read_put(const struct tm_pg_reply *reply, void *data)
{
    struct api_call *c = data;
    struct tm_spec_error err = {0};
    struct tm_api_quota_body b;
    struct tm_api_quota_row row, *rows = NULL;
    cJSON *doc = NULL;
    const char *body;
    size_t len, n = 0;
    PGresult *res;

    if (!tm_api_reply_ok(c, reply))
        return;
    res = reply->results[0];
    if (!tm_api_body(c, &body, &len) || PQntuples(res) != 1) {
        tm_api_call_free(c);
        return;
    }
    if (tm_api_parse_quota(body, len, &b, &err) < 0) {
        tm_api_fail_spec(c, &err);
        return;
    }
    if (!default_flavor(c, &b))
        return;
    row = (struct tm_api_quota_row){.team = c->name, .org = b.org, .flavor = b.flavor, .gpus = b.gpus,
                                    .borrowing_limit = b.borrowing_limit,
                                    .lending_limit = b.lending_limit, .weight = b.weight};
    if (stored_rows(PQgetvalue(res, 0, 2), &row, c->name, b.flavor, &doc, &rows, &n) < 0) {
        tm_api_fail(c, 503, NULL, "out of memory reading the quotas");
        return;
    }
    if (strcmp(PQgetvalue(res, 0, 1), "t") != 0) {
        tm_api_fail(c, 400, "team", "unknown team: no job, token or quota's org names it");
    } else if (check_set(c, rows, n)) {
        char gpus[32], bl[32], ll[32], w[40], now[24];
        fmt_num(gpus, sizeof(gpus), b.gpus);
        fmt_num(bl, sizeof(bl), b.borrowing_limit);
        fmt_num(ll, sizeof(ll), b.lending_limit);
        snprintf(w, sizeof(w), "%.17g", b.weight);
        fmt_i64(now, sizeof(now), tm_api_now_ms(c));
        const char *params[] = {c->name, b.flavor, gpus, isnan(b.borrowing_limit) ? NULL : bl,
                                isnan(b.lending_limit) ? NULL : ll, b.org[0] ? b.org : NULL,
                                isnan(b.weight) ? NULL : w, now, PQgetvalue(res, 0, 0), c->token_name};
        tm_api_query(c, quota_put_sql, 10, params, on_quota_written);
    }
    free(rows);
    cJSON_Delete(doc);
}

void tm_api_quotas_put(struct api_call *c)
{
    struct tm_spec_error err = {0};
    struct tm_api_quota_body b;
    const char *body;
    size_t len;

    if (!tm_api_body(c, &body, &len)) {
        tm_api_call_free(c);
        return;
    }
    if (tm_api_parse_quota(body, len, &b, &err) < 0) {
        tm_api_fail_spec(c, &err);
        return;
    }
    if (!quota_check || !pool_flavor) {
        tm_api_fail(c, 503, NULL, "quotas cannot be checked by this server");
        return;
    }
    if (!default_flavor(c, &b))
        return;
    const char *params[] = {c->name};
    tm_api_query(c, quota_read_sql, 1, params, on_quota_read_put);
}

/* ---- DELETE /v1/quotas/{name}[?flavor=F] ---------------------------------- */

static const char quota_delete_sql[] =
    "WITH v AS (UPDATE quota_version SET v = v + 1 WHERE id = 1 AND v = $3::bigint RETURNING v),"
    " d AS (DELETE FROM quotas q USING v WHERE q.team = $1 AND ($2::text IS NULL OR q.flavor = $2)"
    "   RETURNING q.*),"
    " dec AS (SELECT tarmac_decide($4::bigint, 'quota_removed', 'quota', d.team || ':' || d.flavor,"
    "   'quota removed by ' || $5::text || ': ' || d.team || ' had ' || d.gpus || ' GPUs of ' || d.flavor,"
    "   jsonb_build_object('by', $5::text, 'gpus', d.gpus)) FROM d)"
    " SELECT (SELECT count(*) FROM v), (SELECT json_build_object('removed', count(*))::text FROM d),"
    " (SELECT count(*) FROM dec)";

static void on_quota_deleted(const struct tm_pg_reply *reply, void *data)
{
    struct api_call *c = data;
    PGresult *res;

    if (!tm_api_reply_ok(c, reply))
        return;
    res = reply->results[0];
    if (PQntuples(res) != 1 || strcmp(PQgetvalue(res, 0, 0), "1") != 0) {
        tm_api_fail(c, 409, NULL, "the quotas changed while this change was checked; try again");
        return;
    }
    tm_api_reply(c, 200, PQgetvalue(res, 0, 1), (size_t)PQgetlength(res, 0, 1));
}

/* GPUs the team borrows now (of flavor, or of any when NULL), by the last
 * view; 0 when there is none. */
static long long borrowing_now(const char *team, const char *flavor, char *which, size_t size)
{
    cJSON *view = quota_view ? cJSON_Parse(quota_view) : NULL;
    const cJSON *x;
    long long gpus = 0;

    cJSON_ArrayForEach(x, cJSON_GetObjectItem(view, "items"))
    {
        const char *t = cJSON_GetStringValue(cJSON_GetObjectItem(x, "team"));
        const char *f = cJSON_GetStringValue(cJSON_GetObjectItem(x, "flavor"));
        double b = cJSON_GetNumberValue(cJSON_GetObjectItem(x, "borrowed"));
        if (t && f && strcmp(t, team) == 0 && (!flavor || strcmp(f, flavor) == 0) && b > 0) {
            gpus = (long long)b;
            snprintf(which, size, "%s", f);
            break;
        }
    }
    cJSON_Delete(view);
    return gpus;
}

static void on_quota_read_delete(const struct tm_pg_reply *reply, void *data)
{
    struct api_call *c = data;
    struct api_qp qp[] = {{.name = "flavor"}};
    struct tm_spec_error err = {0};
    struct tm_api_quota_row *rows = NULL;
    cJSON *doc = NULL;
    size_t n = 0;
    PGresult *res;

    if (!tm_api_reply_ok(c, reply))
        return;
    res = reply->results[0];
    if (tm_api_parse_query(c, qp, 1, &err) < 0 || PQntuples(res) != 1) {
        tm_api_call_free(c);
        return;
    }
    const char *flavor = qp[0].set ? qp[0].value : NULL;
    if (stored_rows(PQgetvalue(res, 0, 2), NULL, c->name, flavor, &doc, &rows, &n) < 0) {
        tm_api_fail(c, 503, NULL, "out of memory reading the quotas");
        return;
    }
    if (check_set(c, rows, n)) {
        char now[24];
        fmt_i64(now, sizeof(now), tm_api_now_ms(c));
        const char *params[] = {c->name, flavor, PQgetvalue(res, 0, 0), now, c->token_name};
        tm_api_query(c, quota_delete_sql, 5, params, on_quota_deleted);
    }
    free(rows);
    cJSON_Delete(doc);
}

void tm_api_quotas_delete(struct api_call *c)
{
    struct api_qp qp[] = {{.name = "flavor"}};
    struct tm_spec_error err = {0};
    char which[64] = "", msg[384];
    long long b;
    int r = tm_api_parse_query(c, qp, 1, &err);

    if (r == TM_ECANCELED) {
        tm_api_call_free(c);
        return;
    }
    if (r < 0) {
        tm_api_fail_spec(c, &err);
        return;
    }
    if (!quota_check) {
        tm_api_fail(c, 503, NULL, "quotas cannot be checked by this server");
        return;
    }
    /* Removed while it borrows, its borrowed work would run on no team's
     * quota with nothing to say whose it was: refused until it ends. */
    b = borrowing_now(c->name, qp[0].set ? qp[0].value : NULL, which, sizeof(which));
    if (b > 0) {
        snprintf(msg, sizeof(msg), "team %s borrows %lld GPUs of %s now: remove its quota once that "
                 "work ends or is reclaimed", c->name, b, which);
        tm_api_fail(c, 409, "team", msg);
        return;
    }
    const char *params[] = {c->name};
    tm_api_query(c, quota_read_sql, 1, params, on_quota_read_delete);
}

/* ---- GET /v1/quotas --------------------------------------------------------- */

/* Every quota with what its team uses, borrows and lends by the latest
 * view ($1, NULL when this replica has none), the view's other lines
 * (orgs, teams without a quota that borrow), its time and the overcommit. */
static const char quotas_list_sql[] =
    "WITH w AS (SELECT $1::jsonb AS j),"
    " u AS (SELECT x FROM w, jsonb_array_elements(coalesce(w.j -> 'items', '[]')) x)"
    " SELECT json_build_object('items', coalesce((SELECT json_agg(" QUOTA_JSON "::jsonb"
    "   || jsonb_build_object('used', (u.x ->> 'used')::bigint, 'borrowed', (u.x ->> 'borrowed')::bigint,"
    "   'lent', (u.x ->> 'lent')::bigint) ORDER BY q.team, q.flavor) FROM quotas q LEFT JOIN u"
    "   ON u.x ->> 'team' = q.team AND u.x ->> 'flavor' = q.flavor), '[]'),"
    " 'usage', w.j -> 'items', 'usage_ms', (w.j ->> 'computed_ms')::bigint,"
    " 'overcommit', nullif(w.j ->> 'overcommit', ''), 'error', w.j ->> 'error')::text FROM w";

static void on_document(const struct tm_pg_reply *reply, void *data)
{
    struct api_call *c = data;

    if (!tm_api_reply_ok(c, reply))
        return;
    tm_api_reply_one(c, reply->results[0], 200, "document");
}

void tm_api_quotas_list(struct api_call *c)
{
    const char *params[] = {quota_view};
    tm_api_query(c, quotas_list_sql, 1, params, on_document);
}
