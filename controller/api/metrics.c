/*
 * controller/api/metrics.c: GET /metrics (see api/metrics.h), the
 * Prometheus text exposition, format 0.0.4.
 *
 * Two sources.  What every replica must agree on, and what must survive a
 * restart, comes from the database: one parameterised statement per
 * scrape, so every family sees one snapshot, with "now" the controller's
 * clock (the API's, tm_api_set_clock), as GET /v1/spend and /v1/budgets
 * use, so the month and the ages agree with them.  Each row is (family,
 * label values..., value); label values are escaped here, never in SQL.
 * What only this process knows (HTTP answers, its ticks, its cloud calls)
 * comes from the API's and the controller's in-process counters
 * (tm_api_set_fleet_stats), read on the loop thread without waiting.
 *
 * Names follow Prometheus conventions: the unit in the name (seconds,
 * cents, ratio), _total on counters, base units.  Every label combination
 * that can exist is shown, at 0 when it has nothing (every pool, class,
 * state, capacity type, cause, provider, operation and error kind), so a
 * series never appears out of nowhere.  tests/lib/prom_parse.py is the
 * strict parser the tests read it with.
 */
#include "controller/api/metrics.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>
#include <libpq-fe.h>

#include "controller/api/internal.h"
#include "controller/api/fleet_stats.h"
#include "controller/api/quotas.h"
#include "core/err.h"
#include "core/log.h"

/* The window GPU utilisation is averaged over, on the controller's clock. */
#define UTIL_WINDOW_MS 300000
#define UTIL_WINDOW_TEXT "5 minutes"
#define STR_(x) #x
#define STR(x) STR_(x)

#define BILLED "('booting', 'ready', 'draining', 'terminating')"

/* $1: now, ms on the controller's clock.  Columns: family (the index in
 * db_families plus one), three label values (NULL past the family's
 * labels), the value.  Rows sorted by family, then labels. */
static const char metrics_sql[] =
    "WITH per AS (SELECT to_char(to_timestamp($1::bigint / 1000.0) AT TIME ZONE 'UTC', 'YYYY-MM') AS p),"
    /* GPUs per pool and model: provisioned = on billed nodes, allocated =
     * the share of them held by allocations (a 250-milli share is 0.25),
     * idle = the rest. */
    " b AS (SELECT id, pool, gpu_model, gpus FROM nodes WHERE state IN " BILLED "),"
    " a AS (SELECT node_id, sum(length(replace(gpu_mask::bit(16)::text, '0', ''))"
    "   * gpu_milli) / 1000.0 AS used FROM job_allocations GROUP BY node_id),"
    " g AS (SELECT p.name AS pool, coalesce(b.gpu_model, p.gpu_model) AS model,"
    "   coalesce(sum(b.gpus), 0)::float8 AS prov, coalesce(sum(a.used), 0)::float8 AS alloc"
    "   FROM pools p LEFT JOIN b ON b.pool = p.name LEFT JOIN a ON a.node_id = b.id GROUP BY 1, 2),"
    /* The queue per class: jobs, and the age of the oldest. */
    " q AS (SELECT c.class, count(j.id)::float8 AS n,"
    "   (greatest(coalesce(max($1::bigint - j.submitted_ms), 0), 0) / 1000.0)::float8 AS age"
    "   FROM (VALUES ('train'), ('eval'), ('preprocess'), ('inference'), ('batch')) c (class)"
    "   LEFT JOIN jobs j ON j.class = c.class AND j.state = 'queued' GROUP BY c.class),"
    /* This month's ledger per team (NULL: idle), read once; each cap and
     * the spend against it, attributed as the budget check and GET
     * /v1/budgets do: a team's job spend, an org's everything, idle time
     * included. */
    " st AS (SELECT sp.team, sum(sp.cents) AS cents FROM spend sp, per WHERE sp.period = per.p"
    "   GROUP BY 1),"
    " bs AS (SELECT bu.scope_kind, bu.scope, bu.cap_cents::float8 AS cap,"
    "   coalesce(CASE WHEN bu.scope_kind = 'org' THEN (SELECT sum(cents) FROM st)"
    "   ELSE (SELECT cents FROM st WHERE st.team = bu.scope) END, 0)::float8 AS spent FROM budgets bu),"
    /* Heartbeat samples in the window, per pool and model: summed per
     * node first, which halves the time on a big fleet (10k nodes of 8
     * GPUs sampled every 10 s: 2.4M samples in the window). */
    " u AS (SELECT n.pool, n.gpu_model AS model, (sum(x.total) / sum(x.n) / 100)::float8 AS ratio,"
    "   sum(x.n)::float8 AS samples FROM (SELECT node_id, sum(util_percent::float8) AS total,"
    "   count(*) AS n FROM gpu_samples WHERE at_ms > $1::bigint - " STR(UTIL_WINDOW_MS)
    "   AND at_ms <= $1::bigint GROUP BY node_id) x JOIN nodes n ON n.id = x.node_id GROUP BY 1, 2),"
    " pm AS (SELECT pool, model FROM g UNION SELECT pool, model FROM u),"
    /* Node history per pool: the rows are never deleted, so these are
     * counters every replica agrees on. */
    " nc AS (SELECT p.name AS pool,"
    "   count(n.id) FILTER (WHERE n.capacity_type = 'on_demand')::float8 AS od,"
    "   count(n.id) FILTER (WHERE n.capacity_type = 'spot')::float8 AS spot,"
    "   count(n.id) FILTER (WHERE n.instance_id IS NULL"
    "     AND n.state IN ('terminated', 'interrupted'))::float8 AS failed,"
    "   count(n.id) FILTER (WHERE n.instance_id IS NOT NULL AND n.state = 'terminated')::float8 AS term,"
    "   count(n.id) FILTER (WHERE n.state = 'interrupted')::float8 AS intr,"
    "   count(n.id) FILTER (WHERE n.notice_ms IS NOT NULL)::float8 AS notices,"
    "   (coalesce(sum(n.price_uusd_per_hour) FILTER (WHERE n.state IN " BILLED "), 0)"
    "     / 10000.0)::float8 AS rate"
    "   FROM pools p LEFT JOIN nodes n ON n.pool = p.name GROUP BY 1),"
    /* Jobs moved off their node before they finished, by the node's pool. */
    " ji AS (SELECT p.name AS pool, c.cause, count(x.id)::float8 AS n,"
    "   (coalesce(sum(x.lost_gpu_ms), 0) / 1000.0)::float8 AS lost"
    "   FROM pools p CROSS JOIN (VALUES ('checkpoint'), ('interrupted'), ('terminated')) c (cause)"
    "   LEFT JOIN (SELECT i.id, i.cause, i.lost_gpu_ms, n.pool FROM job_interruptions i"
    "     JOIN nodes n ON n.id = i.node_id) x ON x.pool = p.name AND x.cause = c.cause GROUP BY 1, 2)"
    " SELECT 1 AS f, g.pool AS l1, g.model AS l2, s.state AS l3, CASE s.state"
    "   WHEN 'provisioned' THEN g.prov WHEN 'allocated' THEN g.alloc"
    "   ELSE greatest(g.prov - g.alloc, 0) END AS v"
    "   FROM g CROSS JOIN (VALUES ('provisioned'), ('allocated'), ('idle')) s (state)"
    " UNION ALL SELECT 2, class, NULL, NULL, n FROM q"
    " UNION ALL SELECT 3, class, NULL, NULL, age FROM q"
    " UNION ALL SELECT 4, p.name, s.state, NULL, count(n.id)::float8 FROM pools p"
    "   CROSS JOIN (VALUES ('requested'), ('booting'), ('ready'), ('draining'), ('terminating'),"
    "   ('terminated'), ('interrupted')) s (state)"
    "   LEFT JOIN nodes n ON n.pool = p.name AND n.state = s.state GROUP BY 2, 3"
    /* Idle spend as team "_idle", a name no team can have. */
    " UNION ALL SELECT 5, coalesce(team, '_idle'), NULL, NULL, cents::float8 FROM st"
    " UNION ALL SELECT 6, scope_kind, scope, NULL, cap FROM bs"
    " UNION ALL SELECT 7, scope_kind, scope, NULL, spent FROM bs"
    " UNION ALL SELECT 8, scope_kind, scope, NULL, CASE WHEN cap > 0 THEN spent / cap"
    "   WHEN spent > 0 THEN 'Infinity'::float8 ELSE 0 END FROM bs"
    " UNION ALL SELECT 9, k.kind, NULL, NULL, count(al.id)::float8 FROM (VALUES ('pool_idle'),"
    "   ('queue_age'), ('soft_cap'), ('provider_auth'), ('gpu_idle'), ('pool_no_show'),"
    "   ('mass_silence')) k (kind)"
    "   LEFT JOIN alerts al ON al.kind = k.kind AND al.resolved_ms IS NULL GROUP BY 2"
    " UNION ALL SELECT 10, pm.pool, pm.model, NULL, coalesce(u.ratio, 'NaN'::float8)"
    "   FROM pm LEFT JOIN u ON u.pool = pm.pool AND u.model = pm.model"
    " UNION ALL SELECT 11, pm.pool, pm.model, NULL, coalesce(u.samples, 0)"
    "   FROM pm LEFT JOIN u ON u.pool = pm.pool AND u.model = pm.model"
    " UNION ALL SELECT 12, pool, NULL, NULL, rate FROM nc"
    " UNION ALL SELECT 13, pool, 'on_demand', NULL, od FROM nc"
    " UNION ALL SELECT 13, pool, 'spot', NULL, spot FROM nc"
    " UNION ALL SELECT 14, pool, NULL, NULL, failed FROM nc"
    " UNION ALL SELECT 15, pool, NULL, NULL, term FROM nc"
    " UNION ALL SELECT 16, pool, NULL, NULL, notices FROM nc"
    " UNION ALL SELECT 17, pool, NULL, NULL, intr FROM nc"
    " UNION ALL SELECT 18, pool, cause, NULL, n FROM ji"
    " UNION ALL SELECT 19, pool, NULL, NULL, sum(lost) FROM ji GROUP BY 2"
    /* The node agents' figures: utilisation per pool from the samples (as
     * family 10, models together, in percent), nodes marked unreachable. */
    " UNION ALL SELECT 20, p.name, NULL, NULL, coalesce((SELECT sum(u.ratio * u.samples) / sum(u.samples)"
    "   * 100 FROM u WHERE u.pool = p.name), 'NaN'::float8) FROM pools p"
    " UNION ALL SELECT 21, p.name, NULL, NULL, count(n.id)::float8 FROM pools p"
    "   LEFT JOIN nodes n ON n.pool = p.name AND n.unreachable_ms IS NOT NULL"
    "   AND n.state NOT IN ('terminated', 'interrupted') GROUP BY 2"
    " ORDER BY 1, 2, 3, 4";

struct metric_family {
    const char *name, *type, *help;
    const char *labels[3];
};

/* In the order of metrics_sql's family numbers (index + 1). */
static const struct metric_family db_families[] = {
    {"tarmac_gpus", "gauge",
     "GPUs on billed nodes (booting, ready, draining, terminating): provisioned, allocated to jobs, idle.",
     {"pool", "model", "state"}},
    {"tarmac_queue_jobs", "gauge", "Queued jobs.", {"class"}},
    {"tarmac_queue_oldest_age_seconds", "gauge",
     "Age of the oldest queued job in seconds on the controller's clock, 0 when none waits.", {"class"}},
    {"tarmac_nodes", "gauge", "Nodes by pool and state.", {"pool", "state"}},
    {"tarmac_spend_cents_total", "counter",
     "Spend this calendar month (UTC) in US cents from the ledger; idle time is team \"_idle\"; resets each month.",
     {"team"}},
    {"tarmac_budget_cap_cents", "gauge", "Monthly budget caps in US cents.", {"scope_kind", "scope"}},
    {"tarmac_budget_spent_cents", "gauge",
     "Spend this calendar month (UTC) against each cap in US cents: a team's job spend, an org's whole spend with idle time.",
     {"scope_kind", "scope"}},
    {"tarmac_budget_spent_ratio", "gauge",
     "tarmac_budget_spent_cents over tarmac_budget_cap_cents (1 = the cap reached; +Inf for a zero cap with spend).",
     {"scope_kind", "scope"}},
    {"tarmac_alerts_firing", "gauge", "Alerts firing now (recorded and not resolved) by kind.", {"kind"}},
    {"tarmac_gpu_utilisation_ratio", "gauge",
     "Mean GPU utilisation (0-1) of the heartbeat samples of the last " UTIL_WINDOW_TEXT
     " on the controller's clock, by pool and model; NaN when there are none.",
     {"pool", "model"}},
    {"tarmac_gpu_utilisation_samples", "gauge",
     "Heartbeat GPU samples behind tarmac_gpu_utilisation_ratio (the last " UTIL_WINDOW_TEXT ").",
     {"pool", "model"}},
    {"tarmac_spend_rate_cents_per_hour", "gauge",
     "What the billed nodes (booting, ready, draining, terminating) cost now, US cents per hour.",
     {"pool"}},
    {"tarmac_node_launches_total", "counter",
     "Nodes requested (each a launch with its own token), by pool and capacity type.",
     {"pool", "capacity_type"}},
    {"tarmac_node_launch_failures_total", "counter",
     "Nodes that ended without ever getting an instance (the cloud refused the launch).", {"pool"}},
    {"tarmac_node_terminations_total", "counter",
     "Nodes whose instance was terminated (released or gone), not counting spot interruptions.",
     {"pool"}},
    {"tarmac_spot_notices_total", "counter", "Nodes that got an interruption notice.", {"pool"}},
    {"tarmac_spot_interruptions_total", "counter", "Nodes whose instance the cloud interrupted.",
     {"pool"}},
    {"tarmac_job_interruptions_total", "counter",
     "Jobs moved off a node before they finished: checkpointed at a notice, or requeued when the node was interrupted or terminated.",
     {"pool", "cause"}},
    {"tarmac_job_lost_gpu_seconds_total", "counter",
     "GPU-seconds of work lost when jobs were requeued off their node (a share counts as its fraction).",
     {"pool"}},
    {"tarmac_gpu_utilisation", "gauge",
     "Mean GPU utilisation in percent of the node agents' samples of the last " UTIL_WINDOW_TEXT
     " by pool; NaN when there are none.",
     {"pool"}},
    {"tarmac_nodes_unreachable", "gauge",
     "Live nodes whose agent stopped sending heartbeats (past agent.unreachable_after).", {"pool"}},
};

#define METRICS_MAX_BYTES (16u << 20)

struct mbuf {
    char *p;
    size_t len, cap;
    bool failed;
};

static void mbuf_add(struct mbuf *b, const char *s, size_t n)
{
    if (b->failed)
        return;
    if (b->len + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 4096;
        char *p;
        while (cap < b->len + n + 1)
            cap *= 2;
        if (cap > METRICS_MAX_BYTES) {
            b->failed = true;
            return;
        }
        p = realloc(b->p, cap);
        if (!p) {
            b->failed = true;
            return;
        }
        b->p = p;
        b->cap = cap;
    }
    memcpy(b->p + b->len, s, n);
    b->len += n;
    b->p[b->len] = '\0';
}

static void mbuf_str(struct mbuf *b, const char *s)
{
    mbuf_add(b, s, strlen(s));
}

static void mbuf_fmt(struct mbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void mbuf_fmt(struct mbuf *b, const char *fmt, ...)
{
    char line[256];
    va_list ap;
    int n;

    va_start(ap, fmt);
    n = vsnprintf(line, sizeof(line), fmt, ap);
    va_end(ap);
    if (n < 0 || (size_t)n >= sizeof(line)) {
        b->failed = true;
        return;
    }
    mbuf_add(b, line, (size_t)n);
}

/* A label value as the text format wants it: \\, \" and \n escaped. */
static void mbuf_label_value(struct mbuf *b, const char *s)
{
    for (; *s; s++) {
        if (*s == '\\')
            mbuf_add(b, "\\\\", 2);
        else if (*s == '"')
            mbuf_add(b, "\\\"", 2);
        else if (*s == '\n')
            mbuf_add(b, "\\n", 2);
        else
            mbuf_add(b, s, 1);
    }
}

static void mbuf_label(struct mbuf *b, bool first, const char *name, const char *value)
{
    mbuf_str(b, first ? "{" : ",");
    mbuf_str(b, name);
    mbuf_str(b, "=\"");
    mbuf_label_value(b, value);
    mbuf_str(b, "\"");
}

static void mbuf_head(struct mbuf *b, const char *name, const char *type, const char *help)
{
    mbuf_fmt(b, "# HELP %s ", name);
    mbuf_str(b, help);
    mbuf_fmt(b, "\n# TYPE %s %s\n", name, type);
}

/* PostgreSQL spells infinities "Infinity"; the text format "+Inf". */
static void mbuf_pg_value(struct mbuf *b, const char *v)
{
    if (strcmp(v, "Infinity") == 0)
        v = "+Inf";
    else if (strcmp(v, "-Infinity") == 0)
        v = "-Inf";
    mbuf_str(b, v);
    mbuf_str(b, "\n");
}

static void db_metrics(struct mbuf *b, const PGresult *res)
{
    int n = PQntuples(res), row = 0;

    for (size_t i = 0; i < sizeof(db_families) / sizeof(db_families[0]); i++) {
        const struct metric_family *f = &db_families[i];
        long id = (long)i + 1;

        mbuf_head(b, f->name, f->type, f->help);
        for (; row < n && strtol(PQgetvalue(res, row, 0), NULL, 10) == id; row++) {
            mbuf_str(b, f->name);
            for (int k = 0; k < 3 && f->labels[k]; k++)
                mbuf_label(b, k == 0, f->labels[k], PQgetvalue(res, row, 1 + k));
            mbuf_str(b, f->labels[0] ? "} " : " ");
            mbuf_pg_value(b, PQgetvalue(res, row, 4));
        }
    }
}

static void api_counters(struct mbuf *b, const struct tm_api_stats *s, uint64_t connected)
{
    mbuf_head(b, "tarmac_http_requests_total", "counter", "HTTP requests answered, by status code.");
    for (int code = API_CODE_MIN; code <= API_CODE_MAX; code++) {
        uint64_t n = s->by_code[code - API_CODE_MIN];
        if (n)
            mbuf_fmt(b, "tarmac_http_requests_total{code=\"%d\"} %" PRIu64 "\n", code, n);
    }
    mbuf_head(b, "tarmac_api_requests_total", "counter", "HTTP requests received.");
    mbuf_fmt(b, "tarmac_api_requests_total %" PRIu64 "\n", s->requests);
    mbuf_head(b, "tarmac_api_db_connections", "gauge", "Database connections up.");
    mbuf_fmt(b, "tarmac_api_db_connections %" PRIu64 "\n", connected);
}

/* The controller's own counters: this replica's ticks and cloud calls. */
static void fleet_counters(struct mbuf *b, const struct tm_fleet_stats *s)
{
    uint64_t cumulative = 0;

    mbuf_head(b, "tarmac_leader", "gauge", "1 when this replica holds the leader lock, else 0.");
    mbuf_fmt(b, "tarmac_leader %d\n", s->leader ? 1 : 0);
    mbuf_head(b, "tarmac_ticks_total", "counter",
              "Ticks this replica started, leading or standing by (a standby tick only tries the lock).");
    mbuf_fmt(b, "tarmac_ticks_total %" PRIu64 "\n", s->ticks);
    mbuf_head(b, "tarmac_tick_duration_seconds", "histogram",
              "Real time a leader tick took: listing, snapshot, reconcile and apply (cloud calls it starts finish later).");
    for (size_t i = 0; i <= TM_FLEET_TICK_BUCKETS; i++) {
        cumulative += s->tick_buckets[i];
        if (i < TM_FLEET_TICK_BUCKETS)
            mbuf_fmt(b, "tarmac_tick_duration_seconds_bucket{le=\"%g\"} %" PRIu64 "\n",
                     tm_fleet_tick_bounds_s[i], cumulative);
        else
            mbuf_fmt(b, "tarmac_tick_duration_seconds_bucket{le=\"+Inf\"} %" PRIu64 "\n", cumulative);
    }
    mbuf_fmt(b, "tarmac_tick_duration_seconds_sum %.9g\n", s->tick_seconds_sum);
    mbuf_fmt(b, "tarmac_tick_duration_seconds_count %" PRIu64 "\n", s->tick_count);

    mbuf_head(b, "tarmac_provider_calls_total", "counter",
              "Cloud calls this replica made and got an answer to, failed or not, by provider and operation.");
    for (size_t p = 0; p < s->nproviders; p++) {
        for (int op = 0; op < TM_FLEET_OP_MAX; op++) {
            mbuf_str(b, "tarmac_provider_calls_total");
            mbuf_label(b, true, "provider", s->providers[p].name);
            mbuf_label(b, false, "op", tm_fleet_op_name((enum tm_fleet_op)op));
            mbuf_fmt(b, "} %" PRIu64 "\n", s->providers[p].calls[op]);
        }
    }
    mbuf_head(b, "tarmac_provider_errors_total", "counter",
              "Cloud calls this replica made that failed, by provider, operation and kind of error.");
    for (size_t p = 0; p < s->nproviders; p++) {
        for (int op = 0; op < TM_FLEET_OP_MAX; op++) {
            for (int k = 0; k < TM_FLEET_ERR_MAX; k++) {
                mbuf_str(b, "tarmac_provider_errors_total");
                mbuf_label(b, true, "provider", s->providers[p].name);
                mbuf_label(b, false, "op", tm_fleet_op_name((enum tm_fleet_op)op));
                mbuf_label(b, false, "kind", tm_fleet_err_kind_name((enum tm_fleet_err_kind)k));
                mbuf_fmt(b, "} %" PRIu64 "\n", s->providers[p].errors[op][k]);
            }
        }
    }
}

/* Team quotas by the latest pass's view (api/quotas.h): what each team
 * (and org) is guaranteed, runs, borrows and lends, per flavor.  Only the
 * replica that ticks has the view; the others show the families empty. */
static void quota_gauges(struct mbuf *b)
{
    static const struct {
        const char *name, *key, *help;
    } fams[] = {
        {"tarmac_quota_gpus", "quota", "GPUs guaranteed to the team (or org) of the flavor, its own quota."},
        {"tarmac_quota_used_gpus", "used", "GPUs of the flavor the team (or org, its teams together) runs on."},
        {"tarmac_quota_borrowed_gpus", "borrowed", "GPUs of the flavor the team runs above its quota, on others' idle quota."},
        {"tarmac_quota_lent_gpus", "lent", "GPUs of the team's idle quota of the flavor that others run on."},
    };
    const char *text = tm_api_quotas_view();
    cJSON *view = text ? cJSON_Parse(text) : NULL;
    const cJSON *items = cJSON_GetObjectItem(view, "items"), *x;

    for (size_t f = 0; f < sizeof(fams) / sizeof(fams[0]); f++) {
        mbuf_head(b, fams[f].name, "gauge", fams[f].help);
        cJSON_ArrayForEach(x, items)
        {
            const char *team = cJSON_GetStringValue(cJSON_GetObjectItem(x, "team"));
            const char *flavor = cJSON_GetStringValue(cJSON_GetObjectItem(x, "flavor"));
            if (!team || !flavor)
                continue;
            mbuf_str(b, fams[f].name);
            mbuf_label(b, true, "team", team);
            mbuf_label(b, false, "flavor", flavor);
            mbuf_fmt(b, "} %.0f\n", cJSON_GetNumberValue(cJSON_GetObjectItem(x, fams[f].key)));
        }
    }
    cJSON_Delete(view);
}

static void on_metrics(const struct tm_pg_reply *reply, void *data)
{
    struct api_call *c = data;
    const struct tm_fleet_stats *fleet;
    struct mbuf b = {0};

    if (!tm_api_reply_ok(c, reply))
        return;
    if (reply->nresults != 1 || PQnfields(reply->results[0]) != 5) {
        tm_api_fail(c, 500, NULL, "unexpected answer from the database");
        return;
    }
    db_metrics(&b, reply->results[0]);
    api_counters(&b, tm_api_get_stats(c), tm_api_pool_connected(c));
    fleet = tm_api_fleet_stats(c);
    if (fleet)
        fleet_counters(&b, fleet);
    quota_gauges(&b);
    if (b.failed) {
        free(b.p);
        tm_api_fail(c, 500, NULL, "out of memory");
        return;
    }
    tm_api_reply_text(c, 200, "text/plain; version=0.0.4; charset=utf-8", b.p, b.len);
    free(b.p);
}

void tm_api_metrics(struct api_call *c)
{
    char now[24];

    snprintf(now, sizeof(now), "%" PRId64, tm_api_now_ms(c));
    const char *params[] = {now};
    tm_api_query(c, metrics_sql, 1, params, on_metrics);
}
