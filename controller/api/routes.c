/*
 * controller/api/routes.c: tarmac's HTTP API as the route table the daemon
 * hands to tm_api_start() (see docs/openapi.yaml), plus the two health
 * routes.  Each resource's work is in its own file (submit.c, jobs.c,
 * nodes.c, decisions.c, money.c; resources.h), request parsing in
 * request.c, the JSON row templates in rows.h.  Every statement is
 * parameterised; JSON answers are built by PostgreSQL (json_build_object),
 * so a row has one spelling everywhere.  Writes are single statements
 * (data-modifying CTEs or the functions of migrations/0002_apply.sql), so
 * each is one transaction and writes its decision with it.
 */
#include <stddef.h>
#include <stdlib.h>

#include "controller/api/dashboard.h"
#include "controller/api/internal.h"
#include "controller/api/metrics.h"
#include "controller/api/resources.h"
#include "controller/api/routes.h"

/* ---- health and readiness (/metrics: api/metrics.c) --------------------- */

static void r_healthz(struct api_call *c)
{
    static const char ok[] = "{\"status\":\"ok\"}";
    tm_api_reply(c, 200, ok, sizeof(ok) - 1);
}

/* A real round trip, bounded well below a probe's usual timeout: a
 * database that accepts connections but answers nothing (hung, stopped,
 * its disk full) must read as not ready, which a count of open
 * connections cannot tell.  A busy pool whose queue holds the probe past
 * the bound reads not ready too: this replica cannot answer in time. */
#define READYZ_TIMEOUT_MS 1000

static void on_readyz(const struct tm_pg_reply *reply, void *data)
{
    static const char ready[] = "{\"status\":\"ready\"}";
    struct api_call *c = data;

    if (!c->req)
        tm_api_call_free(c);
    else if (reply->status < 0)
        tm_api_fail(c, 503, NULL, "database unavailable");
    else
        tm_api_reply(c, 200, ready, sizeof(ready) - 1);
}

static void r_readyz(struct api_call *c)
{
    uint64_t left = tm_api_time_left(c);

    if (tm_api_closing(c)) {
        tm_api_fail(c, 503, NULL, "shutting down");
        return;
    }
    if (tm_api_pool_connected(c) == 0 || left == 0) {
        tm_api_fail(c, 503, NULL, "database unavailable");
        return;
    }
    if (tm_pg_pool_query_until(tm_api_pool(c), "SELECT 1", 0, NULL,
                               left < READYZ_TIMEOUT_MS ? left : READYZ_TIMEOUT_MS, on_readyz, c) < 0)
        tm_api_fail(c, 503, NULL, "database unavailable");
}

/* ---- the table ------------------------------------------------------------ */

/* Who may do what; docs/openapi.yaml says the same under x-tarmac-roles and
 * the tests hold the two together. */
static const struct api_route api_routes[] = {
    {"GET", "/healthz", API_PUBLIC, r_healthz, NULL},
    {"GET", "/readyz", API_PUBLIC, r_readyz, NULL},
    {"GET", "/metrics", API_PUBLIC | API_SCRAPE, tm_api_metrics, NULL},
    {"POST", "/v1/jobs", API_ADMIN | API_ENGINEER, tm_api_jobs_submit, tm_api_jobs_submit_fast},
    {"GET", "/v1/jobs", API_READERS, tm_api_jobs_list, NULL},
    {"GET", "/v1/jobs/{id}", API_READERS, tm_api_jobs_get, NULL},
    {"PATCH", "/v1/jobs/{id}", API_ADMIN | API_ENGINEER, tm_api_jobs_retag, NULL},
    {"POST", "/v1/jobs/{id}/cancel", API_ADMIN | API_ENGINEER, tm_api_jobs_cancel, NULL},
    {"GET", "/v1/jobs/{id}/logs", API_READERS, tm_api_logs_read, NULL},
    {"GET", "/v1/pools", API_READERS, tm_api_pools_list, NULL},
    {"GET", "/v1/pools/{name}", API_READERS, tm_api_pools_get, NULL},
    {"GET", "/v1/nodes", API_READERS, tm_api_nodes_list, NULL},
    {"GET", "/v1/nodes/{id}", API_READERS, tm_api_nodes_get, NULL},
    {"POST", "/v1/nodes/{id}/drain", API_ADMIN, tm_api_nodes_drain, NULL},
    {"POST", "/v1/nodes/{id}/cordon", API_ADMIN, tm_api_nodes_cordon, NULL},
    {"POST", "/v1/nodes/{id}/uncordon", API_ADMIN, tm_api_nodes_uncordon, NULL},
    {"POST", "/v1/nodes/{id}/heartbeat", API_ADMIN | API_AGENT, tm_api_nodes_heartbeat,
     tm_api_nodes_heartbeat_fast},
    {"POST", "/v1/nodes/{id}/interruption", API_ADMIN | API_AGENT, tm_api_nodes_interruption, NULL},
    {"POST", "/v1/nodes/{id}/jobs/{job}/start", API_ADMIN | API_AGENT, tm_api_agent_job_start, NULL},
    {"POST", "/v1/nodes/{id}/jobs/{job}/exit", API_ADMIN | API_AGENT, tm_api_agent_job_exit, NULL},
    {"POST", "/v1/nodes/{id}/logs", API_ADMIN | API_AGENT, tm_api_logs_ingest, NULL},
    {"POST", "/v1/agent/enroll", API_PUBLIC, tm_api_agent_enroll, NULL},
    {"POST", "/v1/agent/join", API_PUBLIC, tm_api_agent_join, NULL},
    {"GET", "/v1/decisions", API_READERS, tm_api_decisions_list, NULL},
    {"PUT", "/v1/budgets/{name}", API_ADMIN | API_FINANCE, tm_api_budgets_put, NULL},
    {"GET", "/v1/budgets", API_READERS, tm_api_budgets_list, NULL},
    {"PUT", "/v1/quotas/{name}", API_ADMIN | API_FINANCE, tm_api_quotas_put, NULL},
    {"DELETE", "/v1/quotas/{name}", API_ADMIN | API_FINANCE, tm_api_quotas_delete, NULL},
    {"GET", "/v1/quotas", API_READERS, tm_api_quotas_list, NULL},
    {"GET", "/v1/spend", API_READERS, tm_api_spend, NULL},
    {"GET", "/v1/timeseries", API_READERS, tm_api_timeseries, NULL},
    {"GET", "/", API_PUBLIC, tm_api_dashboard_page, NULL},
    {"GET", "/dashboard.js", API_PUBLIC, tm_api_dashboard_js, NULL},
    {"GET", "/dashboard.css", API_PUBLIC, tm_api_dashboard_css, NULL},
    {NULL, NULL, 0, NULL, NULL},
};

static void routes_state_free(void *state)
{
    struct tm_api_route_states *s = state;

    if (!s)
        return;
    tm_api_submit_state_free(s->submit);
    tm_api_heartbeat_state_free(s->heartbeat);
    tm_api_sample_budget_free(s->samples);
    tm_api_logs_state_free(s->logs);
    free(s);
}

/* Each group-commit user's state (submit.c, heartbeat_batch.c) and the sample
 * budget (sample_budget.c), all or none. */
static void *routes_state_new(void)
{
    struct tm_api_route_states *s = calloc(1, sizeof(*s));

    if (!s)
        return NULL;
    s->submit = tm_api_submit_state_new();
    s->heartbeat = tm_api_heartbeat_state_new();
    s->samples = tm_api_sample_budget_new();
    if (!s->submit || !s->heartbeat || !s->samples) {
        routes_state_free(s);
        return NULL;
    }
    return s;
}

const struct tm_api_routes tm_api_v1_routes = {
    .table = api_routes,
    .state_new = routes_state_new,
    .state_free = routes_state_free,
};
