/*
 * controller/api/dashboard.c: the dashboard at / and GET /v1/timeseries.
 *
 * The page, its script and its style sheet are the files of web/, carried by the binary
 * (cmake/embed_web.cmake), served public like /healthz: they hold no data.
 * The script reads the API with a token the operator gives in the URL
 * fragment (never sent to a server, so never in a log).  The Content
 * Security Policy lets the page load and call nothing but this server.
 *
 * /v1/timeseries rebuilds the fleet's recent history from the rows
 * PostgreSQL already holds (no table of its own): a node is provisioned
 * from billed_from_ms to terminated_ms, a job holds its GPUs from
 * started_ms to finished_ms and waits from submitted_ms to its start.
 * Each point is the average over its step (GPU-seconds / seconds), the
 * definition of utilisation in docs/measuring.md.  A job that was requeued keeps
 * only its latest attempt's start, so its earlier runs count as waiting;
 * the figures are exact for jobs that ran once.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <libpq-fe.h>

#include "controller/api/dashboard.h"
#include "controller/api/internal.h"
#include "core/err.h"

/* ---- the page and its assets --------------------------------------------- */

const struct tm_web_asset *tm_web_asset_find(const char *name)
{
    for (const struct tm_web_asset *a = tm_web_assets; a->name; a++)
        if (strcmp(a->name, name) == 0)
            return a;
    return NULL;
}

/* h2o keeps header values by reference: literals only. */
static void serve_asset(struct api_call *c, const char *name, const char *ctype)
{
    const struct tm_web_asset *a = tm_web_asset_find(name);
    h2o_req_t *req = c->req;

    if (!a) {
        tm_api_fail(c, 500, NULL, "the dashboard was not built into this binary");
        return;
    }
    if (req) {
        /* Nothing from elsewhere: scripts, styles, images and fetches from
         * this origin only, no inline script, not framed. */
        h2o_add_header_by_str(&req->pool, &req->res.headers, H2O_STRLIT("content-security-policy"),
                              0, NULL,
                              H2O_STRLIT("default-src 'self'; base-uri 'none'; form-action 'none';"
                                         " frame-ancestors 'none'"));
        h2o_add_header_by_str(&req->pool, &req->res.headers, H2O_STRLIT("x-content-type-options"),
                              0, NULL, H2O_STRLIT("nosniff"));
        h2o_add_header_by_str(&req->pool, &req->res.headers, H2O_STRLIT("referrer-policy"), 0,
                              NULL, H2O_STRLIT("no-referrer"));
        /* The page changes with the binary: revalidate rather than keep an
         * old script after an upgrade. */
        h2o_add_header(&req->pool, &req->res.headers, H2O_TOKEN_CACHE_CONTROL, NULL,
                       H2O_STRLIT("no-cache"));
    }
    tm_api_reply_text(c, 200, ctype, a->data, a->len);
}

void tm_api_dashboard_page(struct api_call *c)
{
    serve_asset(c, "dashboard.html", "text/html; charset=utf-8");
}

void tm_api_dashboard_js(struct api_call *c)
{
    serve_asset(c, "dashboard.js", "text/javascript; charset=utf-8");
}

void tm_api_dashboard_css(struct api_call *c)
{
    serve_asset(c, "dashboard.css", "text/css; charset=utf-8");
}

/* ---- /v1/timeseries ------------------------------------------------------ */

#define TS_DEFAULT_STEP_S 60
#define TS_DEFAULT_POINTS 60
#define TS_MAX_STEP_S 86400
/* A day at one point a minute; more would only be drawn thinner than a
 * pixel. */
#define TS_MAX_POINTS 1440

/* $1 now, $2 since, $3 step (ms), $4 points.  The rows that matter are
 * the live ones and those that ended after since: each set has an index
 * (jobs_active and jobs_finished, nodes_live and nodes_terminated; 0005),
 * so a read costs the window's rows, not the whole history.  Every
 * interval is clipped to [since, now) and weighed in thousandths (a GPU is
 * 1000, a 250-milli share 250, a job 1000) so the sums stay integers and
 * exact; each step's figure is its weighted ms / 1000 / its length.  With
 * 1 M finished jobs (33 k a day): 20 ms for an hour in 60 steps, 0.3 s for
 * a day, 1.7 s for a week, on the loaded 2-core dev machine.  "now" gives the same
 * figures at this instant, as /metrics counts them (billed nodes: booting,
 * ready, draining, terminating; allocations on them, a GPU share as its
 * fraction). */
static const char timeseries_sql[] =
    "WITH p AS (SELECT $1::bigint AS now, $2::bigint AS since, $3::bigint AS step, $4::int AS n),"
    " nd AS (SELECT gpus, state, billed_from_ms, terminated_ms FROM nodes"
    "   WHERE state NOT IN ('terminated', 'interrupted')"
    "  UNION ALL SELECT gpus, state, billed_from_ms, terminated_ms FROM nodes"
    "   WHERE terminated_ms > $2::bigint AND state IN ('terminated', 'interrupted')),"
    " jb AS (SELECT gpus, nodes, gpu_milli, state, submitted_ms, started_ms, finished_ms FROM jobs"
    "   WHERE state IN ('queued', 'running')"
    "  UNION ALL SELECT gpus, nodes, gpu_milli, state, submitted_ms, started_ms, finished_ms FROM jobs"
    "   WHERE finished_ms > $2::bigint AND state NOT IN ('queued', 'running')),"
    " iv AS ("
    "  SELECT 'prov' AS what, n.gpus * 1000::bigint AS w, greatest(n.billed_from_ms, p.since) AS s,"
    "   least(CASE WHEN n.state IN ('terminated', 'interrupted')"
    "     THEN coalesce(n.terminated_ms, n.billed_from_ms) ELSE p.now END, p.now) AS e"
    "  FROM nd n, p WHERE n.billed_from_ms IS NOT NULL AND n.state <> 'requested'"
    "  UNION ALL"
    "  SELECT x.what, CASE WHEN x.what = 'run' THEN 1000 WHEN j.gpus > 0 THEN j.gpus * j.nodes * 1000"
    "   ELSE j.gpu_milli END::bigint, greatest(j.started_ms, p.since),"
    "   least(CASE WHEN j.state = 'running' THEN p.now"
    "     ELSE coalesce(j.finished_ms, j.started_ms) END, p.now)"
    "  FROM jb j, p, (VALUES ('alloc'), ('run')) x (what) WHERE j.started_ms IS NOT NULL"
    "  UNION ALL"
    "  SELECT 'queue', 1000::bigint, greatest(j.submitted_ms, p.since),"
    "   least(CASE WHEN j.state = 'queued' THEN p.now"
    "     ELSE coalesce(j.started_ms, j.finished_ms) END, p.now)"
    "  FROM jb j, p),"
    /* Each interval as at most four events on the steps: its first and
     * last step get their partial GPU-ms; the full steps between get the
     * weight through a running sum (+w after the first, -w at the last).
     * Linear in the rows, whatever the steps they span. */
    " b AS (SELECT k, p.since + k * p.step AS s, least(p.since + (k + 1) * p.step, p.now) AS e"
    "  FROM p, generate_series(0, p.n - 1) k),"
    " iv2 AS (SELECT iv.*, ((iv.s - p.since) / p.step)::int AS ks,"
    "   ((iv.e - 1 - p.since) / p.step)::int AS ke FROM iv, p WHERE iv.e > iv.s),"
    " ev AS (SELECT what, ks AS k, w * (least(e, p.since + (ks + 1) * p.step) - s) AS part,"
    "   0::bigint AS delta FROM iv2, p"
    "  UNION ALL SELECT what, ke, w * (e - (p.since + ke * p.step)), 0 FROM iv2, p WHERE ke > ks"
    "  UNION ALL SELECT what, ks + 1, 0, w FROM iv2 WHERE ke > ks + 1"
    "  UNION ALL SELECT what, ke, 0, -w FROM iv2 WHERE ke > ks + 1),"
    " per AS (SELECT what, k, sum(part) AS part, sum(delta) AS delta FROM ev GROUP BY 1, 2),"
    " acc AS (SELECT x.what, b.k, coalesce(per.part, 0) + p.step * sum(coalesce(per.delta, 0))"
    "   OVER (PARTITION BY x.what ORDER BY b.k) AS ws"
    "  FROM p, b CROSS JOIN (VALUES ('prov'), ('alloc'), ('queue'), ('run')) x (what)"
    "  LEFT JOIN per ON per.what = x.what AND per.k = b.k),"
    " u AS (SELECT ((g.at_ms - p.since) / p.step)::int AS k, avg(g.util_percent)::numeric AS util"
    "  FROM gpu_samples g, p WHERE g.at_ms >= $2::bigint AND g.at_ms < $1::bigint GROUP BY 1),"
    " pts AS (SELECT b.k, b.s, b.e,"
    "   coalesce(sum(acc.ws) FILTER (WHERE acc.what = 'prov'), 0) / (1000.0 * (b.e - b.s)) AS prov,"
    "   coalesce(sum(acc.ws) FILTER (WHERE acc.what = 'alloc'), 0) / (1000.0 * (b.e - b.s)) AS alloc,"
    "   coalesce(sum(acc.ws) FILTER (WHERE acc.what = 'queue'), 0) / (1000.0 * (b.e - b.s)) AS queue,"
    "   coalesce(sum(acc.ws) FILTER (WHERE acc.what = 'run'), 0) / (1000.0 * (b.e - b.s)) AS run"
    "  FROM b LEFT JOIN acc ON acc.k = b.k GROUP BY b.k, b.s, b.e),"
    " billed AS (SELECT id, gpus FROM nodes"
    "   WHERE state IN ('booting', 'ready', 'draining', 'terminating')),"
    " cur AS (SELECT (SELECT coalesce(sum(gpus), 0) FROM billed)::numeric AS prov,"
    "   (SELECT coalesce(sum(length(replace(a.gpu_mask::bit(16)::text, '0', '')) * a.gpu_milli), 0)"
    "     / 1000.0 FROM job_allocations a JOIN billed ON billed.id = a.node_id) AS alloc)"
    " SELECT json_build_object('now_ms', p.now, 'since_ms', p.since, 'step_s', p.step / 1000,"
    " 'points', coalesce((SELECT json_agg(json_build_object('start_ms', pts.s, 'end_ms', pts.e,"
    "   'gpus_provisioned', round(pts.prov, 3), 'gpus_allocated', round(pts.alloc, 3),"
    "   'gpus_idle', round(greatest(pts.prov - pts.alloc, 0), 3),"
    "   'queued_jobs', round(pts.queue, 3), 'running_jobs', round(pts.run, 3),"
    "   'util_percent', round(u.util, 1)) ORDER BY pts.k)"
    "   FROM pts LEFT JOIN u ON u.k = pts.k), '[]'::json),"
    " 'now', json_build_object('gpus_provisioned', cur.prov, 'gpus_allocated', round(cur.alloc, 3),"
    "   'gpus_idle', round(greatest(cur.prov - cur.alloc, 0), 3),"
    "   'queued_jobs', (SELECT count(*) FROM jobs WHERE state = 'queued'),"
    "   'running_jobs', (SELECT count(*) FROM jobs WHERE state = 'running')))::text"
    " FROM p, cur";

static void on_timeseries(const struct tm_pg_reply *reply, void *data)
{
    struct api_call *c = data;
    PGresult *res;

    if (!tm_api_reply_ok(c, reply))
        return;
    res = reply->results[0];
    if (PQntuples(res) != 1 || PQgetisnull(res, 0, 0)) {
        tm_api_fail(c, 500, NULL, "unexpected answer from the database");
        return;
    }
    tm_api_reply(c, 200, PQgetvalue(res, 0, 0), (size_t)PQgetlength(res, 0, 0));
}

void tm_api_timeseries(struct api_call *c)
{
    struct api_qp qp[] = {{.name = "since_ms"}, {.name = "step_s"}};
    struct tm_spec_error err = {0};
    int64_t now = tm_api_now_ms(c), points, since_ms = 0, step = TS_DEFAULT_STEP_S;
    char now_s[24], since_s[24], step_s[24], n_s[24];
    int r = tm_api_parse_query(c, qp, 2, &err);

    if (r == TM_ECANCELED) {
        tm_api_call_free(c);
        return;
    }
    if (r == 0 && qp[0].set && !tm_api_parse_pos(qp[0].value, INT64_MAX / 2, &since_ms))
        r = tm_spec_fail(&err, "since_ms", "must be a positive integer (ms since the epoch)");
    if (r == 0 && qp[1].set && !tm_api_parse_pos(qp[1].value, TS_MAX_STEP_S, &step))
        r = tm_spec_fail(&err, "step_s", "must be a whole number of seconds from 1 to %d",
                         TS_MAX_STEP_S);
    if (r < 0) {
        tm_api_fail_spec(c, &err);
        return;
    }
    if (!qp[0].set)
        since_ms = now - step * 1000 * TS_DEFAULT_POINTS;
    if (since_ms >= now) {
        tm_api_fail(c, 400, "since_ms", "must be before now");
        return;
    }
    points = (now - since_ms + step * 1000 - 1) / (step * 1000);
    if (points > TS_MAX_POINTS) {
        char msg[128];
        snprintf(msg, sizeof(msg), "%" PRId64 " steps from since_ms to now, more than %d: a larger"
                 " step_s or a later since_ms", points, TS_MAX_POINTS);
        tm_api_fail(c, 400, qp[1].set ? "step_s" : "since_ms", msg);
        return;
    }
    snprintf(now_s, sizeof(now_s), "%" PRId64, now);
    snprintf(since_s, sizeof(since_s), "%" PRId64, since_ms);
    snprintf(step_s, sizeof(step_s), "%" PRId64, step * 1000);
    snprintf(n_s, sizeof(n_s), "%" PRId64, points);
    const char *params[] = {now_s, since_s, step_s, n_s};
    tm_api_query(c, timeseries_sql, 4, params, on_timeseries);
}
