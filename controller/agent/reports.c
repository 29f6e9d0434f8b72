/*
 * controller/agent/reports.c: what the agent must not lose: the state file
 * (the jobs it runs, the exits not yet reported, the attempts it finished)
 * and the exit reports, sent one at a time once the job's output is
 * shipped (log_ship.c), kept across a restart until the controller took
 * them.  jobs.c adds to them; agent.c reads them at start.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "controller/agent/internal.h"
#include "core/err.h"
#include "core/log.h"

#include "controller/agent/body.h"

/* ---- state file ------------------------------------------------------- */

void tm_agent_save_state(struct tm_agent *ag)
{
    struct tm_agent_state st = {0};
    size_t n = 0;
    int r;

    for (struct tm_agent_job *j = ag->jobs; j; j = j->next)
        n++;
    st.jobs = n ? calloc(n, sizeof(*st.jobs)) : NULL;
    if (n && !st.jobs) {
        tm_log_error("could not write the state file", "path=%s err=out-of-memory", ag->state_path);
        return;
    }
    for (struct tm_agent_job *j = ag->jobs; j; j = j->next) {
        struct tm_agent_state_job *s;
        if (j->exited || j->pid <= 0)
            continue;
        s = &st.jobs[st.njobs++];
        s->job_id = j->job_id;
        s->attempt = j->attempt;
        s->pid = j->pid;
        s->start_time = j->start_time;
        s->checkpointable = j->checkpointable;
        s->start_reported = j->start_reported;
        snprintf(s->stopping, sizeof(s->stopping), "%s", j->stopping);
        s->log_dropped = j->log_dropped;
    }
    st.reports = ag->reports;
    st.nreports = ag->nreports;
    st.done = ag->done;
    st.ndone = ag->ndone;
    r = tm_agent_state_write(ag->state_path, &st);
    if (r < 0)
        tm_log_error("could not write the state file", "path=%s err=%s", ag->state_path, tm_strerror(r));
    free(st.jobs);
}

void tm_agent_remember_done(struct tm_agent *ag, int64_t job_id, int64_t attempt)
{
    ag->done[ag->done_next] = (struct tm_agent_state_done){job_id, attempt};
    ag->done_next = (ag->done_next + 1) % TM_AGENT_DONE_CAP;
    if (ag->ndone < TM_AGENT_DONE_CAP)
        ag->ndone++;
}

bool tm_agent_is_done(const struct tm_agent *ag, int64_t job_id, int64_t attempt)
{
    for (size_t i = 0; i < ag->ndone; i++)
        if (ag->done[i].job_id == job_id && ag->done[i].attempt == attempt)
            return true;
    for (size_t i = 0; i < ag->nreports; i++)
        if (ag->reports[i].job_id == job_id && ag->reports[i].attempt == attempt)
            return true;
    return false;
}

/* ---- exit reports ------------------------------------------------------ */

void tm_agent_add_report(struct tm_agent *ag, const struct tm_agent_report *r)
{
    if (ag->nreports == ag->reports_cap) {
        size_t cap = ag->reports_cap ? ag->reports_cap * 2 : 8;
        struct tm_agent_report *nr = realloc(ag->reports, cap * sizeof(*nr));
        if (!nr) {
            tm_log_error("could not keep an exit report", "job=%lld err=out-of-memory", (long long)r->job_id);
            return;
        }
        ag->reports = nr;
        ag->reports_cap = cap;
    }
    ag->reports[ag->nreports++] = *r;
    tm_agent_send_reports(ag);
}

static void drop_first_report(struct tm_agent *ag)
{
    memmove(ag->reports, ag->reports + 1, (ag->nreports - 1) * sizeof(*ag->reports));
    ag->nreports--;
    tm_agent_save_state(ag);
}

static void on_report(const struct tm_http_response *resp, void *data)
{
    struct tm_agent *ag = data;
    const struct tm_agent_report *r = ag->nreports ? &ag->reports[0] : NULL;

    ag->report_inflight = false;
    if (!r || ag->shutting_down)
        return;
    if (resp->status == 0 && resp->http_status >= 200 && resp->http_status < 300) {
        tm_log_info("exit reported", "job=%lld attempt=%lld reason=%s", (long long)r->job_id,
                    (long long)r->attempt, r->reason);
        ag->report_backoff_ms = 0;
        drop_first_report(ag);
    } else if (resp->status == 0 && (resp->http_status == 409 || resp->http_status == 404)) {
        /* a stale attempt: the controller has moved on, drop it quietly */
        tm_log_debug("exit report for a stale attempt dropped", "job=%lld attempt=%lld http=%ld",
                     (long long)r->job_id, (long long)r->attempt, resp->http_status);
        drop_first_report(ag);
    } else if (resp->status == 0 && resp->http_status >= 400 && resp->http_status < 500 &&
               resp->http_status != 401 && resp->http_status != 403 && resp->http_status != 429) {
        tm_log_error("exit report refused, dropping it", "job=%lld http=%ld body=\"%.200s\"",
                     (long long)r->job_id, resp->http_status, resp->body ? resp->body : "");
        drop_first_report(ag);
    } else {
        ag->report_backoff_ms = tm_agent_next_backoff(ag, ag->report_backoff_ms);
        ag->report_next_ms = uv_now(ag->loop) + (uint64_t)ag->report_backoff_ms;
        return;
    }
    tm_agent_send_reports(ag);
}

void tm_agent_send_reports(struct tm_agent *ag)
{
    char url[1024];
    char *body;

    if (ag->report_inflight || ag->nreports == 0 || !ag->started || ag->shutting_down ||
        uv_now(ag->loop) < ag->report_next_ms)
        return;
    /* An exit goes once the job's output is shipped (log_ship.c). */
    if (tm_agent_ship_pending(ag, ag->reports[0].job_id, ag->reports[0].attempt))
        return;
    body = tm_agent_body_exit(&ag->reports[0]);
    if (!body)
        return;
    tm_agent_url(ag, url, sizeof(url), "/v1/nodes/%lld/jobs/%lld/exit", (long long)ag->o.node_id,
            (long long)ag->reports[0].job_id);
    if (tm_agent_post(ag, url, body, on_report, ag) == 0)
        ag->report_inflight = true;
    free(body);
}
