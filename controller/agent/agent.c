/*
 * controller/agent/agent.c: the agent's loop and its talk with the
 * controller (agent.h): enrollment, heartbeats and their answers, GPU
 * samples, notices, shutdown.  jobs.c owns the processes, reports.c the
 * state file and the exit reports, link.c the requests, cgroup.c the
 * limits; they call no function here (jobs.c's word that a job ended
 * comes through ag->job_gone).
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <openssl/crypto.h>

#include "controller/agent/address.h"
#include "controller/agent/body.h"
#include "controller/agent/internal.h"
#include "controller/agent/job_env.h"
#include "controller/agent/metadata.h"
#include "controller/io/http_uv.h"
#include "core/clock.h"
#include "core/err.h"
#include "core/log.h"


extern char **environ;

static void heartbeat(struct tm_agent *ag);
static void agent_shutdown(struct tm_agent *ag, int code);

/* ---- GPU samples ---------------------------------------------------------- */

static void on_sample(uv_timer_t *t)
{
    struct tm_agent *ag = t->data;
    struct tm_gpu_reading r;
    char err[256];
    uint32_t busy = 0;
    int rc;

    /* Sample times are wall clock: the controller compares nodes. */
    rc = tm_gpu_source_read(ag->gpu, tm_wall_ms(), &r, err, sizeof(err));

    if (rc < 0) {
        if (!ag->gpu_error_said)
            tm_log_warn("could not read the GPUs, no samples this time", "err=\"%s\"", err);
        ag->gpu_error_said = true;
        return;
    }
    ag->gpu_error_said = false;
    /* A fake GPU that a running job holds reports as busy (gpu.h). */
    for (const struct tm_agent_job *j = ag->jobs; j; j = j->next)
        if (!j->exited)
            busy |= j->gpu_mask;
    tm_gpu_reading_mark_busy(&r, busy);
    ag->last = r;
    for (int i = 0; i < r.count; i++) {
        if (ag->ring_tail - ag->ring_head == TM_AGENT_SAMPLE_CAP) {
            if (ag->samples_dropped++ == 0)
                tm_log_warn("controller away: oldest GPU samples dropped", "kept=%d", TM_AGENT_SAMPLE_CAP);
            ag->ring_head++;
        }
        ag->ring[ag->ring_tail % TM_AGENT_SAMPLE_CAP] = r.sample[i];
        ag->ring_tail++;
    }
}

/* ---- heartbeat -------------------------------------------------------------- */

static void on_hb_timer(uv_timer_t *t)
{
    heartbeat(t->data);
}

static void hb_again(struct tm_agent *ag, int64_t ms)
{
    uv_timer_stop(&ag->hb_timer);
    if (!ag->shutting_down && !ag->terminated)
        uv_timer_start(&ag->hb_timer, on_hb_timer, (uint64_t)ms, 0);
}

static void node_terminated(struct tm_agent *ag, const char *body)
{
    if (ag->terminated)
        return;
    ag->terminated = true;
    tm_log_warn("the controller says this node is terminated or interrupted: stopping every job and exiting",
                "node=%lld answer=\"%.200s\"", (long long)ag->o.node_id, body ? body : "");
    for (struct tm_agent_job *j = ag->jobs; j; j = j->next)
        tm_agent_job_stop(j, j->checkpointable ? ag->o.checkpoint_signal : SIGTERM, "stopped");
    uv_timer_stop(&ag->hb_timer);
    tm_agent_job_gone(ag);
}

static void job_gone(struct tm_agent *ag)
{
    if (ag->terminated && tm_agent_jobs_running(ag) == 0 && !ag->shutting_down) {
        /* exit reports would hear 409 too: keep them in the state file */
        agent_shutdown(ag, 0);
        return;
    }
    if (ag->notice_active && !ag->notice_acked && ag->md_watch && ag->notice_event[0]) {
        bool any = false;
        for (struct tm_agent_job *j = ag->jobs; j; j = j->next)
            any |= !j->exited;
        if (!any) {
            ag->notice_acked = true;
            tm_md_watch_ack(ag->md_watch, ag->notice_event);
            tm_log_info("interruption acknowledged: no job runs", "event=%s", ag->notice_event);
        }
    }
}

/* ---- a gang's common stop ---------------------------------------------------- */

/* A member of a gang whose attempt stopped is signalled at the time the
 * controller gave every member (migrations/0026), on this agent's own
 * timer: the controller may be away by then. */
static void arm_stop_timer(struct tm_agent *ag);

static void on_stop_timer(uv_timer_t *t)
{
    struct tm_agent *ag = t->data;
    uint64_t now = uv_now(ag->loop);

    for (struct tm_agent_job *j = ag->jobs; j; j = j->next) {
        if (!j->stop_due || j->stop_due > now)
            continue;
        j->stop_due = 0;
        if (j->exited || j->stopping[0])
            continue;
        tm_log_info("the gang's common stop time: stopping its member here", "job=%lld attempt=%lld",
                    (long long)j->job_id, (long long)j->attempt);
        tm_agent_job_stop(j, j->checkpointable ? ag->o.checkpoint_signal : SIGTERM, "stopped");
    }
    arm_stop_timer(ag);
}

static void arm_stop_timer(struct tm_agent *ag)
{
    uint64_t soonest = 0, now = uv_now(ag->loop);

    for (struct tm_agent_job *j = ag->jobs; j; j = j->next)
        if (j->stop_due && !j->exited && !j->stopping[0] && (!soonest || j->stop_due < soonest))
            soonest = j->stop_due;
    uv_timer_stop(&ag->stop_timer);
    if (soonest && !ag->shutting_down)
        uv_timer_start(&ag->stop_timer, on_stop_timer, soonest > now ? soonest - now : 0, 0);
}

/* returning: the first answer since this agent started (jobs re-adopted
 * from state.json) or since the controller was away.  What such an answer
 * no longer lists may have been placed again elsewhere while this node was
 * silent (controller/agent/README.md, "Fencing"): it is killed at once, no
 * checkpoint signal and no grace, and nothing new starts here until every
 * such job is gone. */
/* Returns when to ask again for a job held at its gang's start barrier:
 * the soonest common start an answer gave, else TM_AGENT_BARRIER_POLL_MS;
 * 0 when no job waits there. */
static int64_t apply_answer(struct tm_agent *ag, const struct tm_agent_answer *a, bool returning)
{
    bool fencing = false;
    int64_t barrier = 0;
    const struct tm_agent_stop *st;

    /* Stop what is no longer placed here (another attempt counts as not). */
    for (struct tm_agent_job *j = ag->jobs; j; j = j->next) {
        long at = j->exited ? -1 : tm_agent_answer_find(a, j->job_id, j->attempt);
        if (at >= 0) {
            j->gpu_mask = tm_agent_gpu_mask(&a->assignments[at]); /* a re-adopted job's too */
            j->stop_due = 0;
        }
        if (j->exited || at >= 0)
            continue;
        if (returning && !j->fenced) {
            tm_log_warn("stale job from before this node fell silent, killing it before anything else",
                        "job=%lld attempt=%lld pid=%d", (long long)j->job_id, (long long)j->attempt, j->pid);
            j->fenced = true;
            tm_agent_job_stop(j, SIGKILL, "stopped");
            continue;
        }
        if (j->stopping[0])
            continue;
        /* A gang's member waits for the stop time common to its gang,
         * which each answer restates from its own moment. */
        st = tm_agent_answer_stop(a, j->job_id, j->attempt);
        if (st && st->stop_in_ms > 0) {
            if (!j->stop_due)
                tm_log_info("the job's gang stops: stopping it here with the other members",
                            "job=%lld attempt=%lld in_ms=%lld", (long long)j->job_id, (long long)j->attempt,
                            (long long)st->stop_in_ms);
            j->stop_due = uv_now(ag->loop) + (uint64_t)st->stop_in_ms;
            continue;
        }
        j->stop_due = 0;
        tm_log_info("job no longer assigned here, stopping it", "job=%lld attempt=%lld",
                    (long long)j->job_id, (long long)j->attempt);
        tm_agent_job_stop(j, j->checkpointable ? ag->o.checkpoint_signal : SIGTERM, "stopped");
    }
    arm_stop_timer(ag);
    for (struct tm_agent_job *j = ag->jobs; j; j = j->next)
        fencing |= j->fenced && !j->exited;
    if (fencing)
        return 0; /* the next answer starts the new work */
    /* Start what does not run, once: never an attempt that ran here
     * already, never while an older attempt of the same job still lives. */
    for (size_t i = 0; i < a->count; i++) {
        const struct tm_agent_assignment *as = &a->assignments[i];
        bool busy = false;
        int r;

        if (tm_agent_job_find(ag, as->job_id, as->attempt) || tm_agent_is_done(ag, as->job_id, as->attempt))
            continue;
        for (struct tm_agent_job *j = ag->jobs; j; j = j->next)
            busy |= j->job_id == as->job_id && !j->exited;
        if (busy || ag->terminated)
            continue;
        /* A member of a job whose rendezvous is not ready (no port free on
         * rank 0's node, an address unknown) waits: the controller said
         * why, as a decision on the job (tarmac why). */
        if (as->rdv.given && as->rdv.wait) {
            tm_log_debug("job waits for its rendezvous", "job=%lld reason=\"%s\"", (long long)as->job_id,
                         as->rdv.wait);
            if (as->rdv.barrier) {
                int64_t in = as->rdv.start_in_ms > 0 ? as->rdv.start_in_ms : TM_AGENT_BARRIER_POLL_MS;
                if (!barrier || in < barrier)
                    barrier = in;
            }
            continue;
        }
        r = tm_agent_job_start(ag, as);
        if (r < 0)
            tm_log_error("could not start job", "job=%lld err=%s", (long long)as->job_id, tm_strerror(r));
    }
    return barrier;
}

static void on_heartbeat(const struct tm_http_response *resp, void *data)
{
    struct tm_agent *ag = data;
    struct tm_agent_answer ans;
    char err[256];
    int64_t barrier = 0;
    int r;

    ag->hb_inflight = false;
    if (ag->shutting_down)
        return;
    if (resp->status < 0 || resp->http_status >= 500 || resp->http_status == 429) {
        ag->backoff_ms = tm_agent_next_backoff(ag, ag->backoff_ms);
        if (!ag->away_said)
            tm_log_warn("controller unreachable, retrying with backoff", "err=\"%s\" http=%ld retry_ms=%lld",
                        resp->status < 0 ? tm_strerror(resp->status) : "server error", resp->http_status,
                        (long long)ag->backoff_ms);
        ag->away_said = true;
        hb_again(ag, ag->backoff_ms);
        return;
    }
    if (ag->away_said)
        tm_log_info("controller reachable again", "http=%ld", resp->http_status);
    if (ag->away_said)
        ag->returning = true;
    ag->away_said = false;
    ag->backoff_ms = 0;
    if (resp->http_status == 409) {
        node_terminated(ag, resp->body);
        return;
    }
    if (resp->http_status == 401 || resp->http_status == 403) {
        if (!ag->auth_said)
            tm_log_error("the controller refused the agent token", "http=%ld", resp->http_status);
        ag->auth_said = true;
        ag->backoff_ms = 30000;
        hb_again(ag, ag->backoff_ms);
        return;
    }
    ag->auth_said = false;
    /* 200 or 400: the samples sent are done with (a 400 would refuse them again) */
    if (ag->hb_sent_to > ag->ring_head)
        ag->ring_head = ag->hb_sent_to;
    if (resp->http_status == 400 && resp->body && strstr(resp->body, ".at_ms\"")) {
        /* A clock off by more than the controller allows: every sample
         * would be refused, and with it the heartbeat.  Drop them and
         * send a bare heartbeat now, so that the node is not taken for
         * silent; each later one tries samples again. */
        if (!ag->clock_said)
            tm_log_error("the controller refused the GPU samples' times: is this node's clock off?",
                         "body=\"%.300s\"", resp->body);
        ag->clock_said = true;
        ag->ring_head = ag->ring_tail;
        ag->hb_bare = true;
        hb_again(ag, 200);
        return;
    }
    if (resp->http_status != 200) {
        tm_log_error("heartbeat refused", "http=%ld body=\"%.300s\"", resp->http_status,
                     resp->body ? resp->body : "");
        hb_again(ag, ag->o.heartbeat_ms);
        return;
    }
    r = tm_agent_answer_parse(resp->body, resp->body_len, &ans, err, sizeof(err));
    if (r < 0) {
        if (!ag->answer_said)
            tm_log_error("could not read the heartbeat answer, keeping jobs as they are", "err=\"%s\"",
                         r == TM_ENOMEM ? "out of memory" : err);
        ag->answer_said = true;
    } else {
        ag->answer_said = false;
        barrier = apply_answer(ag, &ans, ag->returning || !ag->answered);
        ag->answered = true;
        ag->returning = false;
        tm_agent_answer_release(&ans);
    }
    /* A backlog from an outage drains in quick batches, not one per period.
     * A member held at its gang's start barrier asks again soon: the go
     * comes with the last member's claim, and the members should start
     * together, not a heartbeat period apart; once all have claimed, it
     * asks again at the gang's common start. */
    if (barrier > 0 && barrier < ag->o.heartbeat_ms)
        hb_again(ag, barrier);
    else
        hb_again(ag, ag->ring_tail - ag->ring_head > TM_AGENT_BATCH_MAX / 2 ? 200 : ag->o.heartbeat_ms);
}

static void heartbeat(struct tm_agent *ag)
{
    struct tm_gpu_sample *batch = NULL;
    struct tm_agent_running *run = NULL;
    size_t nb = (size_t)(ag->ring_tail - ag->ring_head), nr = 0;

    if (nb > TM_AGENT_BATCH_MAX)
        nb = TM_AGENT_BATCH_MAX; /* the oldest first; the rest follow at once */
    char url[1024];
    char *body;

    if (ag->hb_inflight || ag->shutting_down || ag->terminated)
        return;
    if (ag->hb_bare) {
        nb = 0;
        ag->hb_bare = false;
    } else {
        /* The oldest of a long outage's backlog are past what the
         * controller stores: dropped here, not refused there. */
        int64_t now = tm_wall_ms();
        while (ag->ring_head < ag->ring_tail &&
               ag->ring[ag->ring_head % TM_AGENT_SAMPLE_CAP].at_ms < now - TM_AGENT_SAMPLE_MAX_AGE_MS)
            ag->ring_head++;
        nb = (size_t)(ag->ring_tail - ag->ring_head);
        if (nb > TM_AGENT_BATCH_MAX)
            nb = TM_AGENT_BATCH_MAX;
    }
    for (struct tm_agent_job *j = ag->jobs; j; j = j->next)
        nr++;
    batch = nb ? malloc(nb * sizeof(*batch)) : NULL;
    run = nr ? malloc(nr * sizeof(*run)) : NULL;
    if ((nb && !batch) || (nr && !run)) {
        free(batch);
        free(run);
        hb_again(ag, 1000);
        return;
    }
    for (size_t i = 0; i < nb; i++)
        batch[i] = ag->ring[(ag->ring_head + i) % TM_AGENT_SAMPLE_CAP];
    nr = 0;
    for (struct tm_agent_job *j = ag->jobs; j; j = j->next)
        if (!j->exited)
            run[nr++] = (struct tm_agent_running){j->job_id, j->attempt, j->pid};
    body = tm_agent_body_heartbeat(ag->last.info, ag->last.count, batch, nb, run, nr, ag->o.heartbeat_ms);
    free(batch);
    free(run);
    if (!body) {
        hb_again(ag, 1000);
        return;
    }
    tm_agent_url(ag, url, sizeof(url), "/v1/nodes/%lld/heartbeat", (long long)ag->o.node_id);
    if (tm_agent_post_as(ag, url, body, true, on_heartbeat, ag) == 0) {
        ag->hb_inflight = true;
        ag->hb_sent_to = ag->ring_head + nb;
    } else {
        hb_again(ag, 1000);
    }
    free(body);
}

/* ---- the one-second tick ------------------------------------------------------ */

static void on_tick(uv_timer_t *t)
{
    struct tm_agent *ag = t->data;

    tm_agent_jobs_tick(ag);
    for (struct tm_agent_job *j = ag->jobs; j; j = j->next)
        tm_agent_report_start(ag, j);
    tm_agent_send_reports(ag);
}

/* ---- interruption notices ------------------------------------------------------ */

static void on_interruption_posted(const struct tm_http_response *resp, void *data)
{
    struct tm_agent *ag = data;

    if (resp->status == 0 && resp->http_status >= 200 && resp->http_status < 300)
        tm_log_info("interruption notice forwarded", "node=%lld", (long long)ag->o.node_id);
    else
        tm_log_warn("could not forward the interruption notice", "http=%ld err=%s", resp->http_status,
                    resp->status < 0 ? tm_strerror(resp->status) : "refused");
}

static void on_notice(const struct tm_md_notice *n, void *data)
{
    struct tm_agent *ag = data;
    char url[1024], reason[96];
    char *body;

    if (ag->shutting_down)
        return;
    if (ag->notice_active && strcmp(ag->notice_event, n->event_id) == 0)
        return; /* the same notice seen again */
    ag->notice_active = true;
    ag->notice_acked = false;
    snprintf(ag->notice_event, sizeof(ag->notice_event), "%s", n->event_id);
    snprintf(reason, sizeof(reason), "%.8s %.32s", n->cloud, n->action);
    body = tm_agent_body_interruption(reason, n->deadline_ms);
    if (body) {
        tm_agent_url(ag, url, sizeof(url), "/v1/nodes/%lld/interruption", (long long)ag->o.node_id);
        tm_agent_post_as(ag, url, body, true, on_interruption_posted, ag);
        free(body);
    }
    for (struct tm_agent_job *j = ag->jobs; j; j = j->next)
        if (j->checkpointable && !j->exited && !j->stopping[0])
            tm_agent_job_stop(j, ag->o.checkpoint_signal, "stopped");
    tm_agent_job_gone(ag);
}

static void start_metadata(struct tm_agent *ag)
{
    const char *kind = ag->o.metadata_kind;

    if (!kind || strcmp(kind, "none") == 0)
        return;
    {
        struct tm_md_watch *w = NULL;
        int r = tm_md_watch_start(ag->loop, ag->http, kind, ag->o.metadata_url, on_notice, ag, &w);
        if (r < 0)
            tm_log_error("could not watch the metadata service", "kind=%s err=%s", kind, tm_strerror(r));
        else
            ag->md_watch = w;
    }
}

/* ---- start, enrollment, shutdown --------------------------------------------------- */

static void on_signal(uv_signal_t *s, int signum)
{
    struct tm_agent *ag = s->data;

    tm_log_info("agent stopping; jobs keep running for the next agent", "signal=%d", signum);
    agent_shutdown(ag, 0);
}

static void begin(struct tm_agent *ag)
{
    struct tm_agent_state st;
    char err[256];
    int r;

    snprintf(ag->auth, sizeof(ag->auth), "Authorization: Bearer %s", ag->token);
    r = tm_agent_state_read(ag->state_path, &st, err, sizeof(err));
    if (r < 0) {
        /* A state file that cannot be read must not make the agent start
         * jobs twice: refuse to go on, keep the file for a person to see. */
        tm_log_error("could not read the state file", "path=%s err=\"%s\"", ag->state_path,
                     r == TM_EINVAL ? err : tm_strerror(r));
        agent_shutdown(ag, 1);
        return;
    }
    ag->started = true;
    for (size_t i = 0; i < st.ndone && i < TM_AGENT_DONE_CAP; i++)
        tm_agent_remember_done(ag, st.done[i].job_id, st.done[i].attempt);
    tm_agent_ship_start(ag);
    for (size_t i = 0; i < st.nreports; i++)
        tm_agent_add_report(ag, &st.reports[i]);
    r = tm_agent_jobs_adopt(ag, &st);
    tm_agent_state_release(&st);
    if (r < 0) {
        agent_shutdown(ag, 1);
        return;
    }
    tm_agent_save_state(ag);
    on_sample(&ag->sample_timer);
    uv_timer_start(&ag->sample_timer, on_sample, (uint64_t)ag->o.sample_ms, (uint64_t)ag->o.sample_ms);
    uv_timer_start(&ag->tick_timer, on_tick, 1000, 1000);
    start_metadata(ag);
    tm_agent_send_reports(ag);
    heartbeat(ag);
}

static void enroll(struct tm_agent *ag);
static int save_token(struct tm_agent *ag, const char *token);

static void on_enroll_timer(uv_timer_t *t)
{
    enroll(t->data);
}

void tm_agent_on_enroll_timer(uv_timer_t *t)
{
    enroll(t->data);
}

void tm_agent_begin(struct tm_agent *ag)
{
    begin(ag);
}

void tm_agent_stop(struct tm_agent *ag, int code)
{
    agent_shutdown(ag, code);
}

int tm_agent_save_token(struct tm_agent *ag, const char *token)
{
    return save_token(ag, token);
}

static int save_token(struct tm_agent *ag, const char *token)
{
    char path[PATH_MAX + 16], tmp[PATH_MAX + 32];
    size_t len = strlen(token), off = 0;
    int fd, r = 0;

    snprintf(path, sizeof(path), "%s/token", ag->o.work_dir);
    snprintf(tmp, sizeof(tmp), "%s/token.tmp", ag->o.work_dir);
    fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0)
        return -errno;
    while (off < len) {
        ssize_t w = write(fd, token + off, len - off);
        if (w < 0) {
            r = -errno;
            break;
        }
        off += (size_t)w;
    }
    if (r == 0 && fsync(fd) != 0)
        r = -errno;
    close(fd);
    if (r == 0 && rename(tmp, path) != 0)
        r = -errno;
    return r;
}

static void on_enroll(const struct tm_http_response *resp, void *data)
{
    struct tm_agent *ag = data;
    char err[256];
    char *token = NULL;
    int r;

    if (ag->shutting_down)
        return;
    if (resp->status == 0 && (resp->http_status == 200 || resp->http_status == 201)) {
        r = tm_agent_enroll_parse(resp->body, resp->body_len, ag->o.node_id, &token, err, sizeof(err));
        if (r < 0) {
            tm_log_error("could not read the enrollment answer", "err=\"%s\"", err);
            agent_shutdown(ag, 1);
            return;
        }
        tm_log_add_secret(token);
        r = save_token(ag, token);
        if (r < 0) {
            tm_log_error("could not store the agent token", "dir=%s err=%s", ag->o.work_dir, tm_strerror(r));
            OPENSSL_cleanse(token, strlen(token));
            free(token);
            agent_shutdown(ag, 1);
            return;
        }
        ag->token = token;
        tm_log_info("enrolled", "node=%lld", (long long)ag->o.node_id);
        begin(ag);
        return;
    }
    if (resp->status == 0 && resp->http_status >= 400 && resp->http_status < 500 && resp->http_status != 429) {
        tm_log_error("the controller refused the enrollment secret (bad, used or expired)",
                     "node=%lld http=%ld", (long long)ag->o.node_id, resp->http_status);
        agent_shutdown(ag, 1);
        return;
    }
    ag->backoff_ms = tm_agent_next_backoff(ag, ag->backoff_ms);
    tm_log(ag->backoff_ms == 1000 ? TM_LOG_WARN : TM_LOG_DEBUG, "could not enroll, retrying with backoff",
           "err=\"%s\" http=%ld retry_ms=%lld",
                resp->status < 0 ? tm_strerror(resp->status) : "server error", resp->http_status,
                (long long)ag->backoff_ms);
    uv_timer_start(&ag->enroll_timer, on_enroll_timer, (uint64_t)ag->backoff_ms, 0);
}

static void on_address(void *data, const char *address)
{
    struct tm_agent *ag = data;

    if (address)
        snprintf(ag->address, sizeof(ag->address), "%s", address);
    if (ag->address[0])
        tm_log_info("this node's address for its jobs' peers", "address=%s", ag->address);
    if (!ag->shutting_down)
        enroll(ag);
}

/* The node's address first (address.h), then the enrollment that carries it. */
static void enroll_with_address(struct tm_agent *ag)
{
    const char *kind = ag->o.metadata_kind ? ag->o.metadata_kind : "none";

    /* A reader without an address (none) enrolls without one. */
    if (ag->o.advertise_addr)
        on_address(ag, ag->o.advertise_addr);
    else if (tm_agent_address_fixed(kind))
        on_address(ag, tm_agent_address_fixed(kind));
    else if (tm_agent_address_lookup(ag->http, kind, ag->o.metadata_url, on_address, ag) < 0)
        on_address(ag, NULL);
}

static void enroll(struct tm_agent *ag)
{
    char url[1024];

    if (ag->o.join_pool) {
        tm_agent_join_send(ag);
        return;
    }
    char *body = tm_agent_body_enroll(ag->o.node_id, ag->o.enroll_secret, ag->address[0] ? ag->address : NULL);

    if (!body) {
        agent_shutdown(ag, 1);
        return;
    }
    tm_agent_url(ag, url, sizeof(url), "/v1/agent/enroll");
    if (tm_agent_post_as(ag, url, body, false, on_enroll, ag) < 0)
        uv_timer_start(&ag->enroll_timer, on_enroll_timer, 1000, 0);
    OPENSSL_cleanse(body, strlen(body));
    free(body);
}

static void agent_shutdown(struct tm_agent *ag, int code)
{
    if (ag->shutting_down)
        return;
    ag->shutting_down = true;
    ag->exit_code = code;
    if (ag->started)
        tm_agent_save_state(ag);
    if (ag->md_watch)
        tm_md_watch_stop(ag->md_watch);
    ag->md_watch = NULL;
    uv_timer_stop(&ag->hb_timer);
    uv_timer_stop(&ag->sample_timer);
    uv_timer_stop(&ag->tick_timer);
    uv_timer_stop(&ag->enroll_timer);
    uv_timer_stop(&ag->stop_timer);
    tm_agent_ship_stop(ag);
    uv_signal_stop(&ag->sigterm);
    uv_signal_stop(&ag->sigint);
    uv_stop(ag->loop);
}

static int read_token(struct tm_agent *ag)
{
    char path[PATH_MAX + 16], buf[600];
    ssize_t n;
    int fd;

    snprintf(path, sizeof(path), "%s/token", ag->o.work_dir);
    fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return errno == ENOENT ? 0 : -errno;
    n = read(fd, buf, sizeof(buf) - 1);
    close(fd);
    if (n <= 0)
        return TM_EINVAL;
    buf[n] = '\0';
    buf[strcspn(buf, "\r\n")] = '\0';
    if (!buf[0])
        return TM_EINVAL;
    ag->token = strdup(buf);
    OPENSSL_cleanse(buf, sizeof(buf));
    if (!ag->token)
        return TM_ENOMEM;
    tm_log_add_secret(ag->token);
    return 1;
}

static void on_http_closed(void *data)
{
    (void)data;
}

static void close_walk(uv_handle_t *h, void *arg)
{
    (void)arg;
    if (!uv_is_closing(h))
        uv_close(h, NULL);
}

/* DIR and DIR/jobs 0711 (a job's user passes through to its own folder
 * and can list neither), DIR/env 0700; modes set again on every start, as
 * an older agent made them 0700 and a bootstrap may have made DIR. */
static int work_dirs(struct tm_agent *ag)
{
    const char *dirs[] = {ag->o.work_dir, ag->jobs_dir, ag->env_dir};
    const mode_t modes[] = {0711, 0711, 0700};

    for (size_t i = 0; i < 3; i++)
        if ((mkdir(dirs[i], modes[i]) != 0 && errno != EEXIST) || chmod(dirs[i], modes[i]) != 0)
            return -1;
    return 0;
}

int tm_agent_run(const struct tm_agent_options *o)
{
    struct tm_agent *ag = calloc(1, sizeof(*ag));
    uv_loop_t loop;
    char why[256];
    enum tm_gpu_kind kind;
    int r, code;

    if (!ag)
        return 1;
    ag->o = *o;
    ag->ring = calloc(TM_AGENT_SAMPLE_CAP, sizeof(*ag->ring));
    if (!ag->ring || uv_loop_init(&loop) != 0) {
        free(ag->ring);
        free(ag);
        return 1;
    }
    ag->loop = &loop;
    ag->job_gone = job_gone;
    ag->base_env = environ;
    snprintf(ag->state_path, sizeof(ag->state_path), "%s/state.json", o->work_dir);
    snprintf(ag->jobs_dir, sizeof(ag->jobs_dir), "%s/jobs", o->work_dir);
    snprintf(ag->env_dir, sizeof(ag->env_dir), "%s/env", o->work_dir);
    if (work_dirs(ag) != 0) {
        tm_log_error("could not create the work directory", "dir=%s err=%s", o->work_dir, strerror(errno));
        code = 1;
        goto out_loop;
    }
    if (tm_agent_job_user_init(ag) < 0) {
        code = 1;
        goto out_loop;
    }
    signal(SIGPIPE, SIG_IGN);
    r = tm_http_create(&loop, &ag->http);
    if (r < 0) {
        tm_log_error("could not start the HTTP client", "err=%s", tm_strerror(r));
        code = 1;
        goto out_loop;
    }
    r = tm_gpu_source_open(o->gpu_fake, &ag->gpu, &kind, why, sizeof(why));
    if (r < 0) {
        code = 1;
        goto out_http;
    }
    if (kind == TM_GPU_NONE)
        tm_log_warn("no GPU telemetry: no NVML and no --gpu-fake; heartbeats carry no samples",
                    "why=\"%s\"", why);
    else
        tm_log_info("GPU telemetry", "source=%s", kind == TM_GPU_FAKE ? "fake" : "nvml");
    tm_agent_cgroup_init(ag);
    if (tm_agent_ship_init(ag) < 0) {
        tm_log_error("could not start shipping job output", "err=out-of-memory");
        code = 1;
        goto out_http;
    }
    uv_timer_init(&loop, &ag->hb_timer);
    uv_timer_init(&loop, &ag->sample_timer);
    uv_timer_init(&loop, &ag->tick_timer);
    uv_timer_init(&loop, &ag->enroll_timer);
    uv_timer_init(&loop, &ag->stop_timer);
    ag->hb_timer.data = ag->sample_timer.data = ag->tick_timer.data = ag->enroll_timer.data = ag;
    ag->stop_timer.data = ag;
    uv_signal_init(&loop, &ag->sigterm);
    uv_signal_init(&loop, &ag->sigint);
    ag->sigterm.data = ag->sigint.data = ag;
    uv_signal_start(&ag->sigterm, on_signal, SIGTERM);
    uv_signal_start(&ag->sigint, on_signal, SIGINT);

    /* A joined machine proves its node key at every start (join.c). */
    r = o->join_pool ? tm_agent_join_prepare(ag) : read_token(ag);
    if (o->join_pool && r == 0) {
        enroll_with_address(ag);
    } else if (o->join_pool) {
        agent_shutdown(ag, 1);
    } else if (r < 0) {
        tm_log_error("could not read the agent token", "dir=%s err=%s", o->work_dir, tm_strerror(r));
        agent_shutdown(ag, 1);
    } else if (r == 1) {
        begin(ag);
    } else if (!o->enroll_secret) {
        tm_log_error("no agent token and no enrollment secret", "dir=%s hint=\"--enroll-secret-file or TARMAC_ENROLL_SECRET\"",
                     o->work_dir);
        agent_shutdown(ag, 1);
    } else {
        enroll_with_address(ag);
    }
    if (!ag->shutting_down)
        uv_run(&loop, UV_RUN_DEFAULT);
    code = ag->exit_code;

    /* Close everything: jobs keep running, their handles go.  Our own
     * handles first, then the HTTP client, whose close completes on the
     * loop; a last walk catches what is left (nothing, normally). */
    tm_agent_jobs_close(ag);
    uv_close((uv_handle_t *)&ag->hb_timer, NULL);
    uv_close((uv_handle_t *)&ag->sample_timer, NULL);
    uv_close((uv_handle_t *)&ag->tick_timer, NULL);
    uv_close((uv_handle_t *)&ag->enroll_timer, NULL);
    uv_close((uv_handle_t *)&ag->stop_timer, NULL);
    tm_agent_ship_close(ag);
    uv_close((uv_handle_t *)&ag->sigterm, NULL);
    uv_close((uv_handle_t *)&ag->sigint, NULL);
out_http:
    tm_http_close(ag->http, on_http_closed, NULL);
    uv_run(&loop, UV_RUN_DEFAULT);
    uv_walk(&loop, close_walk, NULL);
    uv_run(&loop, UV_RUN_DEFAULT);
    tm_gpu_source_close(ag->gpu);
    tm_agent_ship_free(ag);
out_loop:
    if (uv_loop_close(&loop) != 0)
        tm_log_warn("loop closed with handles open", "where=agent");
    if (ag->token) {
        OPENSSL_cleanse(ag->token, strlen(ag->token));
        free(ag->token);
    }
    OPENSSL_cleanse(ag->node_key, sizeof(ag->node_key));
    OPENSSL_cleanse(ag->auth, sizeof(ag->auth));
    free(ag->reports);
    free(ag->ring);
    free(ag);
    return code;
}
