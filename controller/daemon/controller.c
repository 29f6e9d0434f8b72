/*
 * controller/daemon/controller.c: see controller.h.  The tick is a chain of
 * callbacks; struct tm_controller is the only mutable state, one per
 * process, and only the loop thread touches it.  The calls in flight
 * (calls.c) and the sim agent (sim_agent.c) are given what they need.
 */
#include "controller/daemon/controller.h"

#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "controller/api/fleet_stats.h"
#include "controller/api/log_store.h"
#include "controller/api/routes.h"
#include "controller/api/server.h"
#include "controller/daemon/calls.h"
#include "controller/daemon/power.h"
#include "controller/daemon/alert_webhook.h"
#include "controller/daemon/decision_log.h"
#include "controller/daemon/quotas.h"
#include "controller/daemon/sim_agent.h"
#include "controller/io/group_commit.h"
#include "controller/io/pg_uv.h"
#include "controller/reconcile/live_forecast.h"
#include "controller/reconcile/reconcile.h"
#include "controller/sched/scheduler.h"
#include "controller/store/store.h"
#include "core/clock.h"
#include "core/err.h"
#include "core/log.h"
#include "providers/provider.h"
#include "providers/registry.h"

#define TM_STOP_DEADLINE_MS 10000
/* Each follow-up pass answers a shortage with another offer, and every
 * shortage rules out at least one (type, zone) cell, so a handful
 * suffices; the bound keeps a cloud that refuses everything from turning
 * the tick into a loop. */
#define TM_FOLLOWUPS_MAX 8

/* Tick first: log ingest (the group commit's yielding kinds) sends no new
 * batch while a pass runs, so that on a small machine the database's CPU
 * goes to the pass's statements rather than to output that can wait.
 * The gate is raised a lead before a tick is due, so that the ingest
 * batches already in flight (not recalled) have finished when the pass's
 * first statement goes, and lowered when the pass ends.  The lead is the
 * longest any of the last TM_TICK_FIRST_DRAINS raises took to see no
 * ingest batch in flight, plus a margin, within [MIN_LEAD, MAX_LEAD];
 * ingest is never held longer than TM_TICK_FIRST_MAX_HOLD_MS a pass,
 * however long the pass takes. */
#define TM_TICK_FIRST_MIN_LEAD_MS 20
#define TM_TICK_FIRST_MAX_LEAD_MS 150
#define TM_TICK_FIRST_MARGIN_MS 10
#define TM_TICK_FIRST_MAX_HOLD_MS 250
#define TM_TICK_FIRST_DRAINS 8

struct observed_list {
    struct tm_instance *items;
    size_t n;
    bool complete;
};

struct tm_controller {
    uv_loop_t loop;
    const struct tm_config *cfg;
    struct tm_log_store *logs;      /* the leader's, for retention (opened on first use) */
    struct tm_controller_options opts;
    struct tm_controller_stats stats;
    struct tm_fleet_stats fleet;    /* /metrics' in-process counters (the API reads them) */
    struct tm_clock clock;
    struct tm_decision_log decision_log;    /* standing actions of the last pass, logged once */
    enum tm_sched_policy policy;
    char holder[128];

    struct tm_pg_pool *pool;
    struct tm_pg *leader_conn;
    struct tm_api *api;             /* every replica serves the API */
    struct tm_alerter *alerter;     /* the leader records and sends alerts */
    struct tm_provider **providers; /* one per cfg->providers, NULL if not built */
    uv_timer_t tick_timer;
    uv_timer_t stop_timer;
    /* A launch short of capacity asks for a follow-up pass in the same
     * tick (calls.c on_shortage), so the next zone, type or cloud is
     * bought at once; at most TM_FOLLOWUPS_MAX per tick. */
    uv_timer_t replan_timer;
    struct tm_gc_gate *gc_gate;     /* tick first (TM_TICK_FIRST_*); NULL: nothing held */
    uv_timer_t gate_timer;          /* raises the gate ahead of the next tick */
    uint64_t gate_drains[TM_TICK_FIRST_DRAINS]; /* the last passes' drain times, a ring */
    unsigned gate_ndrains;
    uint64_t gate_lead_ms;          /* how far ahead */
    unsigned ingest_inflight;       /* ingest batches in flight as this pass began */
    bool replan_pending;            /* asked while a pass ran: start when it ends */
    unsigned followups;             /* follow-up passes in this tick */
    /* The pass running is a follow-up: not a tick of its own, so neither
     * tarmac_ticks_total nor tarmac_tick_duration_seconds counts it (their
     * counts stay equal); "follow-up pass" log lines count them. */
    bool followup_pass;
    uv_signal_t sigint, sigterm;

    bool leader;
    int64_t epoch;
    int64_t lease_ms;               /* renewed by each leader tick (docs/ha.md) */
    bool lease_broken;              /* this tick ended an expired leader's session */
    bool stopping;
    bool closing;
    bool tick_running;
    int64_t tick_started_real;
    uint64_t tick_started_ns;       /* uv_hrtime() at the tick's start */
    uint64_t apply_sent_ns;         /* uv_hrtime() when the plan's write was sent */
    bool pass_begun;                /* this tick led: its duration is observed */
    uint64_t started_real;
    unsigned validations_pending;   /* provider checks before the first tick */
    int exit_status;                /* < 0: a start-up check refused to run */
    bool sim_agent_everywhere;      /* TARMAC_SIM_AGENT=1: stand in on cloud nodes too */
    /* Per config pool: its nodes run a real node agent (a provider kind
     * that is not simulated, without TARMAC_SIM_AGENT=1), so silence makes
     * them stale (reconcile/staleness.c). */
    bool *pool_real_agent;
    char exit_reason[512];

    /* Since when this leader could hear heartbeats without a break (the
     * pure pass counts no silence from before it): set by the first
     * snapshot read of a leadership, and by the first read after the
     * controller was deaf: a database connection lost, a snapshot read
     * failed, or the loop stalled (the tick timer fired more than
     * TM_HEARING_GAP_TICKS intervals late), during which heartbeats could
     * not be stored (the API shares this process and the database).  A
     * slow tick is not deafness: the API goes on storing heartbeats. */
    int64_t hearing_since_ms;
    bool deaf;
    int64_t last_timer_real;        /* uv_now at the tick timer's last firing */

    /* The pass in progress. */
    int64_t now_ms;
    struct observed_list *obs;
    unsigned lists_pending;
    struct tm_snapshot *snap;
    struct tm_observed *observed;   /* views of obs for the pure pass */
    struct tm_live_forecast *forecast; /* demand per pool, across ticks (loop thread) */
    const struct tm_pool_forecast *pool_forecast; /* this pass's, read by the pure pass */
    /* Forecasters warmed from the demand history at leadership, taken over
     * at the start of the next pass (the current one may be reading the
     * old ones' predictions on the thread pool). */
    struct tm_live_forecast *forecast_warm;
    bool warming;                   /* a history read or warm-up in flight */
    /* Capacity the cloud refused lately (TM_EQUOTA), so the planner falls
     * back: the pass reads its own copy of the calls' list, to which
     * launch callbacks add while it runs. */
    struct tm_live_shortage pass_shortages[TM_CALLS_SHORTAGES_MAX];
    size_t npass_shortages;
    struct tm_rc_plan plan;
    uv_work_t work;                 /* the pass runs off the loop thread */
    int work_status;

    /* Cloud calls and store writes in flight (calls.c). */
    struct tm_calls calls;
    /* Power saving's commands (power.h) and the holds the pass reads. */
    struct tm_power power;
    const struct tm_power_hold *power_holds;
    size_t npower_holds;
};

static void end_pass(struct tm_controller *ctl);
static void maybe_finish_stop(struct tm_controller *ctl);
static void begin_stop(struct tm_controller *ctl, const char *why);

static int64_t clock_now(void *data)
{
    return tm_clock_now_ms(data);
}

/* ---- the pass ------------------------------------------------------------ */

static void on_applied(int status, const cJSON *result, const char *err, const char *sqlstate,
                       void *data)
{
    struct tm_controller *ctl = data;

    if (status < 0) {
        if (sqlstate && strcmp(sqlstate, "TM001") == 0) {
            /* Another controller took over: our plan was fenced off. */
            tm_log_warn("leadership lost: plan refused by epoch fence", "epoch=%" PRId64, ctl->epoch);
            ctl->leader = false;
        } else if (status != TM_ECANCELED) {
            tm_log_error("could not apply plan, will retry next tick", "error=\"%s\"",
                         err ? err : tm_strerror(status));
        }
        end_pass(ctl);
        return;
    }
    /* The database commits a plan whether or not the process that sent it
     * is still running: a leader stopped (SIGSTOP, a stall) between the
     * write and its reply reads the reply after its lease ran out, when a
     * standby may lead and carry out the same rows.  Past half the lease
     * since the write was sent, the lease may have lapsed by now: the
     * committed plan is left to the next pass, ours if we still lead, as
     * after a crash at after_apply (its launch tokens are in the rows). */
    tm_stall_point("apply_reply");
    uint64_t waited_ms = (uv_hrtime() - ctl->apply_sent_ns) / 1000000u;
    if ((int64_t)waited_ms >= ctl->lease_ms / 2) {
        tm_log_warn("plan committed, its reply came late: carried out by the next pass",
                    "waited_ms=%" PRIu64 " lease_ms=%" PRId64, waited_ms, ctl->lease_ms);
        end_pass(ctl);
        return;
    }
    tm_decision_log_write(&ctl->decision_log, ctl->plan.actions);
    if (ctl->plan.nlaunches > 0)
        tm_crash_point("after_apply");
    ctl->stats.passes++;
    ctl->stats.placed += ctl->plan.placed;
    ctl->stats.requested += ctl->plan.requested;
    ctl->stats.ready += ctl->plan.ready;
    ctl->stats.released += ctl->plan.released;
    ctl->stats.gone += ctl->plan.gone;
    ctl->stats.orphans += ctl->plan.orphans;
    if (!ctl->closing)
        tm_calls_start(&ctl->calls, &ctl->plan, ctl->providers, result);
    if (!ctl->closing)
        tm_power_start(&ctl->power, &ctl->plan);
    end_pass(ctl);
}

static void on_accrued(int status, const char *err, void *data)
{
    struct tm_call *c = data;
    if (status < 0 && status != TM_ECANCELED)
        tm_log_warn("could not accrue spend, the next tick catches up", "error=\"%s\"",
                    err ? err : tm_strerror(status));
    tm_call_done(c);
}

/* The spend ledger: what billed nodes cost since the last pass, attributed
 * to teams by GPU share.  Exact over any number of passes (see 0003). */
static void accrue(struct tm_controller *ctl)
{
    struct tm_call *c = tm_calls_new(&ctl->calls, -1, 0);
    if (c && tm_store_accrue_renew(ctl->pool, ctl->epoch, ctl->now_ms, ctl->lease_ms, on_accrued, c) < 0)
        tm_call_done(c);
}

static void on_pruned(int status, const char *err, void *data)
{
    struct tm_call *c = data;
    if (status < 0 && status != TM_ECANCELED)
        tm_log_warn("could not prune gpu samples, will retry next tick", "error=\"%s\"",
                    err ? err : tm_strerror(status));
    tm_call_done(c);
}

/* gpu_samples stay bounded: each leader tick deletes one batch of rows
 * older than agent.sample_retention (oldest first) and one of rows dated
 * past agent.clock_skew ahead (never stored today, but a table may hold
 * them from before the API refused them), so a backlog drains over a few
 * ticks without one long delete. */
#define TM_PRUNE_BATCH 10000
static void prune_samples(struct tm_controller *ctl)
{
    struct tm_call *c = tm_calls_new(&ctl->calls, -1, 0);
    if (c && tm_store_prune_samples(ctl->pool, ctl->now_ms - ctl->cfg->agent.sample_retention_ms,
                                    ctl->now_ms + (ctl->cfg->agent.clock_skew_ms > 0
                                                       ? ctl->cfg->agent.clock_skew_ms : 120000),
                                    TM_PRUNE_BATCH,
                                    on_pruned, c) < 0)
        tm_call_done(c);
}

/* A job's output past logs.retention (controller/api/log_store.h): one
 * batch of streams per leader tick, bytes and index alike. */
#define TM_PRUNE_LOG_STREAMS 50
static void on_logs_pruned(int status, const char *err, void *data)
{
    struct tm_call *c = data;
    if (status < 0 && status != TM_ECANCELED)
        tm_log_warn("could not prune job output, will retry next tick", "error=\"%s\"",
                    err ? err : tm_strerror(status));
    tm_call_done(c);
}

static void prune_logs(struct tm_controller *ctl)
{
    struct tm_call *c;

    if (!ctl->logs && tm_log_store_open(&ctl->loop, ctl->pool, ctl->cfg, &ctl->logs) < 0) {
        ctl->logs = NULL;
        return;
    }
    c = tm_calls_new(&ctl->calls, -1, 0);
    if (c && tm_log_store_prune(ctl->logs, ctl->now_ms - ctl->cfg->logs.retention_ms, TM_PRUNE_LOG_STREAMS,
                                on_logs_pruned, c) < 0)
        tm_call_done(c);
}

/* The tick timer firing this many intervals after its previous firing
 * means the loop stood still (a stopped or starved process): nothing was
 * heard meanwhile. */
#define TM_HEARING_GAP_TICKS 3

/* A snapshot was read as leader: silence counts from now if the controller
 * was deaf until now.  Now is when the snapshot arrived, not when the pass
 * began: a pass begun before or during an outage (its leadership check or
 * its read queued until the database came back) carries a time from
 * before the outage, which would count the whole outage as silence. */
static void note_hearing(struct tm_controller *ctl)
{
    if (!ctl->deaf)
        return;
    int64_t now = tm_clock_now_ms(&ctl->clock);
    if (now < ctl->now_ms)
        now = ctl->now_ms;
    if (ctl->hearing_since_ms > 0)
        tm_log_info("hearing heartbeats again: node silence counted from now", "now_ms=%" PRId64, now);
    ctl->hearing_since_ms = now;
    ctl->deaf = false;
}

static void reconcile_work(uv_work_t *w)
{
    struct tm_controller *ctl = w->data;
    struct tm_reconcile_input in = {
        .cfg = ctl->cfg, .snap = ctl->snap, .observed = ctl->observed,
        .nobserved = ctl->cfg->nproviders, .now_ms = ctl->now_ms, .policy = ctl->policy,
        .forecast = ctl->pool_forecast,
        .shortages = ctl->pass_shortages, .nshortages = ctl->npass_shortages,
        .pool_real_agent = ctl->pool_real_agent, .hearing_since_ms = ctl->hearing_since_ms,
        .power_holds = ctl->power_holds, .npower_holds = ctl->npower_holds,
    };
    ctl->work_status = tm_reconcile(&in, &ctl->plan);
}

static void reconcile_done(uv_work_t *w, int status)
{
    struct tm_controller *ctl = w->data;
    int r = status < 0 ? status : ctl->work_status;

    free(ctl->observed);
    ctl->observed = NULL;
    if (r >= 0)
        tm_daemon_quotas_publish(ctl->plan.quota_view);
    if (r < 0 || ctl->closing) {
        if (r < 0 && r != UV_ECANCELED)
            tm_log_error("reconcile failed", "error=%s", tm_err_name(r));
        end_pass(ctl);
        return;
    }
    if (cJSON_GetArraySize(ctl->plan.actions) == 0) {
        tm_calls_start(&ctl->calls, &ctl->plan, ctl->providers, NULL);
        tm_power_start(&ctl->power, &ctl->plan);
        end_pass(ctl);
        return;
    }
    ctl->apply_sent_ns = uv_hrtime();
    r = tm_store_apply_renew(ctl->pool, ctl->epoch, ctl->now_ms, ctl->lease_ms, ctl->plan.actions,
                             on_applied, ctl);
    if (r < 0) {
        tm_log_error("could not send plan", "error=%s", tm_err_name(r));
        end_pass(ctl);
    }
}

static void on_snapshot(int status, struct tm_snapshot *snap, const char *err, void *data)
{
    struct tm_controller *ctl = data;

    if (status < 0) {
        if (status != TM_ECANCELED) {
            ctl->deaf = true;
            tm_log_error("could not read snapshot, will retry next tick", "error=\"%s\"",
                         err ? err : tm_strerror(status));
        }
        end_pass(ctl);
        return;
    }
    ctl->snap = snap;
    if (snap->epoch != ctl->epoch) {
        tm_log_warn("leadership lost: epoch moved on", "ours=%" PRId64 " now=%" PRId64, ctl->epoch,
                    snap->epoch);
        ctl->leader = false;
        end_pass(ctl);
        return;
    }
    note_hearing(ctl);
    /* Idle: no queued or running job and no live node (a restart may find
     * only nodes to release, or nothing at all).  The ledger is still
     * brought up to date first: stopping waits for that call. */
    bool idle = ctl->opts.exit_when_idle && snap->njobs == 0 && snap->nnodes == 0 &&
                tm_calls_inflight(&ctl->calls) == 0;
    if (!ctl->closing) {
        const struct tm_sim_agent agent = {
            .snap = snap, .now_ms = ctl->now_ms, .cfg = ctl->cfg,
            .everywhere = ctl->sim_agent_everywhere, .pool = ctl->pool, .calls = &ctl->calls,
            .finished = &ctl->stats.finished,
        };
        tm_sim_agent_run(&agent);
        accrue(ctl);
        prune_samples(ctl);
        prune_logs(ctl);
        tm_alerter_silence(ctl->alerter, ctl->pool_real_agent, ctl->hearing_since_ms);
        tm_alerter_tick(ctl->alerter, snap, ctl->epoch, ctl->now_ms);
    }
    if (idle) {
        end_pass(ctl);
        begin_stop(ctl, "no work left and no node live");
        return;
    }

    struct tm_observed *obs = calloc(ctl->cfg->nproviders + 1, sizeof(*obs));
    if (!obs) {
        end_pass(ctl);
        return;
    }
    for (size_t i = 0; i < ctl->cfg->nproviders; i++)
        obs[i] = (struct tm_observed){
            .provider = ctl->cfg->providers[i].name, .complete = ctl->obs[i].complete,
            .instances = ctl->obs[i].items, .n = ctl->obs[i].n,
        };
    ctl->observed = obs;
    /* Demand forecasts move on here, on the loop thread; the pure pass only
     * reads this tick's.  Kept in memory; a new leader warms a fresh set
     * from the demand history and takes it over here. */
    ctl->pool_forecast = NULL;
    if (ctl->forecast_warm) {
        tm_live_forecast_free(ctl->forecast);
        ctl->forecast = ctl->forecast_warm;
        ctl->forecast_warm = NULL;
    }
    if (!ctl->forecast && tm_live_forecast_new(ctl->cfg, &ctl->forecast) < 0)
        tm_log_warn("no demand forecast this tick", "error=%s", tm_err_name(TM_ENOMEM));
    if (ctl->forecast)
        ctl->pool_forecast = tm_live_forecast_update(ctl->forecast, snap, ctl->now_ms);
    ctl->npass_shortages = tm_calls_shortages(&ctl->calls, ctl->now_ms, ctl->pass_shortages);
    /* The pass is a pure function of what this tick owns (snapshot,
     * listings, config): a queue of 100k jobs takes ~100 ms, which must not
     * stall the loop (API, database, cloud calls), so it runs on libuv's
     * thread pool and nothing touches its inputs until it returns. */
    ctl->npower_holds = tm_power_holds(&ctl->power, &ctl->power_holds);
    ctl->work.data = ctl;
    if (uv_queue_work(&ctl->loop, &ctl->work, reconcile_work, reconcile_done) < 0) {
        tm_log_error("could not queue the reconcile pass", "error=%s", "uv_queue_work");
        end_pass(ctl);
    }
}

static void take_snapshot(struct tm_controller *ctl)
{
    int r;

    /* Launches recorded by now are in this snapshot (calls.h). */
    tm_calls_snapshot_taken(&ctl->calls);
    r = tm_store_snapshot(ctl->pool, ctl->cfg, on_snapshot, ctl);
    if (r < 0) {
        tm_log_error("could not ask for snapshot", "error=%s", tm_err_name(r));
        end_pass(ctl);
    }
}

struct list_ctx {
    struct tm_controller *ctl;
    size_t provider;
};

static void on_list(int status, const struct tm_instance *list, size_t n, void *data)
{
    struct list_ctx *lc = data;
    struct tm_controller *ctl = lc->ctl;
    struct observed_list *o = &ctl->obs[lc->provider];

    tm_fleet_stats_call(&ctl->fleet, lc->provider, TM_FLEET_OP_LIST, status);
    if (status == 0) {
        o->items = malloc((n + 1) * sizeof(*list));
        if (o->items) {
            if (n > 0)
                memcpy(o->items, list, n * sizeof(*list));
            o->n = n;
            o->complete = true;
        }
        /* What the cloud said on its own (a reservation ended): decisions. */
        tm_calls_notices(&ctl->calls, ctl->providers[lc->provider]);
    } else if (status != TM_ECANCELED) {
        tm_log(status == TM_EAUTH ? TM_LOG_ERROR : TM_LOG_WARN,
               "could not list instances, acting on the database alone this tick",
               "provider=%s error=%s", ctl->cfg->providers[lc->provider].name, tm_err_name(status));
    }
    tm_alerter_provider_status(ctl->alerter, lc->provider, status);
    free(lc);
    if (--ctl->lists_pending == 0) {
        if (ctl->closing)
            end_pass(ctl);
        else
            take_snapshot(ctl);
    }
}

static void begin_pass(struct tm_controller *ctl)
{
    size_t np = ctl->cfg->nproviders;

    ctl->pass_begun = true;
    ctl->obs = calloc(np + 1, sizeof(*ctl->obs));
    if (!ctl->obs) {
        end_pass(ctl);
        return;
    }
    /* Observe the clouds BEFORE reading the database: every instance we
     * launched then has its node row in the snapshot, so nothing of ours is
     * ever mistaken for an orphan. */
    ctl->lists_pending = 1; /* held until every list call is started */
    for (size_t i = 0; i < np; i++) {
        struct tm_provider *p = ctl->providers[i];
        /* A provider without a listing (owned machines) is seen as an
         * incomplete one: nothing is absent from it, and its nodes live
         * by their heartbeats (reconcile/staleness.c). */
        struct list_ctx *lc = p && p->ops->list ? malloc(sizeof(*lc)) : NULL;
        if (!lc)
            continue;
        *lc = (struct list_ctx){.ctl = ctl, .provider = i};
        ctl->lists_pending++;
        int r = p->ops->list(p, ctl->cfg->cluster, on_list, lc);
        if (r < 0) {
            tm_fleet_stats_call(&ctl->fleet, i, TM_FLEET_OP_LIST, r);
            ctl->lists_pending--;
            free(lc);
        }
    }
    if (--ctl->lists_pending == 0)
        take_snapshot(ctl);
}

/* ---- forecast warm start ------------------------------------------------ */

struct warm {
    struct tm_controller *ctl;
    struct tm_call *call;           /* keeps a stop waiting for us */
    uv_work_t work;
    struct tm_live_forecast *lf;
    struct tm_demand_span *spans;
    size_t n;
    int64_t from_ms, to_ms;
    long steps;
    uint64_t started_ns;
};

static void warm_work(uv_work_t *w)
{
    struct warm *wm = w->data;
    wm->steps = tm_live_forecast_warm(wm->lf, wm->spans, wm->n, wm->from_ms, wm->to_ms);
}

static void warm_done(uv_work_t *w, int status)
{
    struct warm *wm = w->data;
    struct tm_controller *ctl = wm->ctl;

    if (status < 0 || wm->steps < 0 || ctl->closing) {
        if (status >= 0 && wm->steps < 0)
            tm_log_warn("could not warm the demand forecast, it starts empty", "error=%s",
                        tm_err_name((int)wm->steps));
        tm_live_forecast_free(wm->lf);
    } else {
        tm_log_info("demand forecast warmed from history",
                    "pools=%zu jobs=%zu steps=%ld took_ms=%" PRIu64, ctl->cfg->npools, wm->n,
                    wm->steps, (uv_hrtime() - wm->started_ns) / 1000000);
        tm_live_forecast_free(ctl->forecast_warm);
        ctl->forecast_warm = wm->lf;
    }
    ctl->warming = false;
    tm_call_done(wm->call);
    free(wm->spans);
    free(wm);
}

static void on_demand_history(int status, const char *err, const struct tm_demand_span *spans,
                              size_t n, void *data)
{
    struct warm *wm = data;
    struct tm_controller *ctl = wm->ctl;
    int r = status;

    if (r == 0 && !ctl->closing) {
        wm->spans = malloc((n + 1) * sizeof(*spans));
        r = wm->spans ? tm_live_forecast_new(ctl->cfg, &wm->lf) : TM_ENOMEM;
    }
    if (r == 0 && !ctl->closing) {
        memcpy(wm->spans, spans, n * sizeof(*spans));
        wm->n = n;
        /* Up to now: the next pass's update (a later step, or this one's
         * value) carries on from there. */
        wm->to_ms = tm_clock_now_ms(&ctl->clock);
        wm->work.data = wm;
        wm->started_ns = uv_hrtime();
        /* Thousands of steps per pool: off the loop thread, like a pass. */
        if (uv_queue_work(&ctl->loop, &wm->work, warm_work, warm_done) == 0)
            return;
        r = TM_ENOMEM;
    }
    if (r < 0 && r != TM_ECANCELED)
        tm_log_warn("could not read the demand history, the forecast starts empty", "error=\"%s\"",
                    err ? err : tm_strerror(r));
    tm_live_forecast_free(wm->lf);
    ctl->warming = false;
    tm_call_done(wm->call);
    free(wm->spans);
    free(wm);
}

/* A new leader reads forecast.history of demand back, so that it does not
 * plan from the queue alone while its seasons fill (a week for the
 * weekly one). */
static void warm_forecast(struct tm_controller *ctl)
{
    int64_t history = ctl->cfg->forecast.history_ms;
    struct warm *wm;

    if (history <= 0 || ctl->warming || ctl->closing)
        return;
    wm = calloc(1, sizeof(*wm));
    if (!wm || !(wm->call = tm_calls_new(&ctl->calls, -1, 0))) {
        free(wm);
        return;
    }
    wm->ctl = ctl;
    wm->from_ms = tm_clock_now_ms(&ctl->clock) - history;
    ctl->warming = true;
    if (tm_store_demand_history(ctl->pool, ctl->cfg, wm->from_ms, on_demand_history, wm) < 0) {
        ctl->warming = false;
        tm_call_done(wm->call);
        free(wm);
    }
}

static void on_lead(int status, int64_t epoch, int64_t latest_ms, const char *err, void *data);

/* The leader's lease had expired and its session is gone (or the lease was
 * live: ended 0): try the lock again at once, once per tick. */
static void on_lease_break(int status, int ended, const char *err, void *data)
{
    struct tm_controller *ctl = data;

    if (status < 0 || ended == 0 || ctl->closing) {
        if (status < 0 && status != TM_ECANCELED)
            tm_log_warn("could not check the leader lease, will retry next tick", "error=\"%s\"",
                        err ? err : tm_strerror(status));
        end_pass(ctl);
        return;
    }
    tm_log_warn("leader lease expired: ended the silent leader's session", "sessions=%d lease_ms=%" PRId64,
                ended, ctl->lease_ms);
    ctl->lease_broken = true;
    if (tm_store_try_lead(ctl->leader_conn, ctl->holder, ctl->now_ms, ctl->lease_ms, on_lead, ctl) < 0)
        end_pass(ctl);
}

static void on_lead(int status, int64_t epoch, int64_t latest_ms, const char *err, void *data)
{
    struct tm_controller *ctl = data;

    if (status < 0) {
        if (status != TM_ECANCELED)
            tm_log_warn("could not check leadership, will retry next tick", "error=\"%s\"",
                        err ? err : tm_strerror(status));
        end_pass(ctl);
        return;
    }
    if (epoch == 0) {
        /* Another replica holds the lock: stand by, unless its lease ran
         * out (a stopped or stuck leader), which ends its session. */
        if (!ctl->lease_broken && !ctl->closing &&
            tm_store_break_lease(ctl->leader_conn, on_lease_break, ctl) == 0)
            return;
        end_pass(ctl);
        return;
    }
    ctl->leader = true;
    ctl->epoch = epoch;
    ctl->deaf = true; /* silence counts from this leadership's first read */
    ctl->hearing_since_ms = 0;
    if (tm_clock_advance_to(&ctl->clock, latest_ms + 1)) {
        tm_log_info("clock moved up to the latest time stored", "behind_ms=%" PRId64,
                    latest_ms + 1 - ctl->now_ms);
        ctl->now_ms = tm_clock_now_ms(&ctl->clock);
    }
    ctl->stats.was_leader = true;
    tm_log_info("became leader", "holder=%s epoch=%" PRId64, ctl->holder, epoch);
    warm_forecast(ctl);
    if (ctl->closing)
        end_pass(ctl);
    else
        begin_pass(ctl);
}

static void start_pass(struct tm_controller *ctl, bool followup);

static void on_tick(uv_timer_t *t)
{
    struct tm_controller *ctl = t->data;
    int64_t real = (int64_t)uv_now(&ctl->loop);

    if (ctl->last_timer_real > 0 && real - ctl->last_timer_real > TM_HEARING_GAP_TICKS * ctl->cfg->tick_interval_ms) {
        tm_log_warn("the loop stood still: node silence counted again from the next read",
                    "stalled_ms=%" PRId64, real - ctl->last_timer_real);
        ctl->deaf = true;
    }
    ctl->last_timer_real = real;

    if (ctl->tick_running || ctl->stopping || ctl->validations_pending > 0)
        return;
    ctl->followups = 0;
    ctl->replan_pending = false;
    start_pass(ctl, false);
}

/* A follow-up pass of the current tick, for a shortage (on_shortage). */
static void on_replan(uv_timer_t *t)
{
    struct tm_controller *ctl = t->data;

    if (ctl->stopping || ctl->validations_pending > 0 || !ctl->leader)
        return;
    if (ctl->tick_running) {
        ctl->replan_pending = true;
        return;
    }
    ctl->followups++;
    tm_log_info("follow-up pass for a capacity shortage", "followup=%u", ctl->followups);
    start_pass(ctl, true);
}

static void on_shortage(void *data)
{
    struct tm_controller *ctl = data;

    if (ctl->stopping || ctl->closing || !ctl->leader || ctl->followups >= TM_FOLLOWUPS_MAX)
        return;
    if (ctl->tick_running)
        ctl->replan_pending = true;
    else
        uv_timer_start(&ctl->replan_timer, on_replan, 0, 0);
}

static void start_pass(struct tm_controller *ctl, bool followup)
{
    if (ctl->opts.max_wall_ms > 0 &&
        uv_now(&ctl->loop) - ctl->started_real >= (uint64_t)ctl->opts.max_wall_ms) {
        begin_stop(ctl, "wall-clock limit reached");
        return;
    }
    ctl->tick_running = true;
    tm_gc_gate_raise(ctl->gc_gate);
    ctl->ingest_inflight = tm_gc_gate_inflight(ctl->gc_gate);
    ctl->followup_pass = followup;
    if (!followup) {
        ctl->stats.ticks++;
        ctl->fleet.ticks++;
    }
    ctl->tick_started_ns = uv_hrtime();
    ctl->now_ms = tm_clock_now_ms(&ctl->clock);
    ctl->tick_started_real = (int64_t)uv_now(&ctl->loop);
    if (!ctl->leader) {
        ctl->lease_broken = false;
        int r = tm_store_try_lead(ctl->leader_conn, ctl->holder, ctl->now_ms, ctl->lease_ms, on_lead,
                                  ctl);
        if (r < 0)
            end_pass(ctl);
        return;
    }
    begin_pass(ctl);
}

static void on_gate_ahead(uv_timer_t *t)
{
    struct tm_controller *ctl = t->data;

    if (!ctl->stopping && !ctl->closing && !ctl->tick_running)
        tm_gc_gate_raise(ctl->gc_gate);
}

/* Lower the gate as a pass ends, and raise it again ahead of the next
 * tick, if this replica leads: by the longest drain of the last
 * TM_TICK_FIRST_DRAINS passes (one quick drain is no trend). */
static void lower_gate(struct tm_controller *ctl)
{
    uint64_t lead = 0, due;

    ctl->gate_drains[ctl->gate_ndrains++ % TM_TICK_FIRST_DRAINS] = tm_gc_gate_drain_ms(ctl->gc_gate);
    tm_gc_gate_lower(ctl->gc_gate);
    if (!ctl->gc_gate || !ctl->leader || ctl->stopping || ctl->closing)
        return;
    for (unsigned i = 0; i < TM_TICK_FIRST_DRAINS; i++)
        if (lead < ctl->gate_drains[i] + TM_TICK_FIRST_MARGIN_MS)
            lead = ctl->gate_drains[i] + TM_TICK_FIRST_MARGIN_MS;
    if (lead < TM_TICK_FIRST_MIN_LEAD_MS)
        lead = TM_TICK_FIRST_MIN_LEAD_MS;
    if (lead > TM_TICK_FIRST_MAX_LEAD_MS)
        lead = TM_TICK_FIRST_MAX_LEAD_MS;
    ctl->gate_lead_ms = lead;
    due = uv_timer_get_due_in(&ctl->tick_timer);
    if (due > lead)
        uv_timer_start(&ctl->gate_timer, on_gate_ahead, due - lead, 0);
}

static void end_pass(struct tm_controller *ctl)
{
    if (ctl->obs) {
        for (size_t i = 0; i < ctl->cfg->nproviders; i++)
            free(ctl->obs[i].items);
        free(ctl->obs);
        ctl->obs = NULL;
    }
    tm_snapshot_release(ctl->snap);
    ctl->snap = NULL;
    tm_rc_plan_release(&ctl->plan);
    if (ctl->tick_running && ctl->pass_begun && !ctl->followup_pass)
        tm_fleet_stats_tick_done(&ctl->fleet, (double)(uv_hrtime() - ctl->tick_started_ns) / 1e9);
    ctl->pass_begun = false;
    ctl->fleet.leader = ctl->leader;
    if (ctl->tick_running) {
        /* To the microsecond (bench/run-logs.sh compares ticks' p99). */
        double took = (double)(uv_hrtime() - ctl->tick_started_ns) / 1e6;
        tm_log_debug("tick done", "took_ms=%.3f leader=%d in_flight_calls=%u ingest_in_flight=%u drain_ms=%" PRIu64
                     " lead_ms=%" PRIu64, took, ctl->leader, tm_calls_inflight(&ctl->calls), ctl->ingest_inflight,
                     tm_gc_gate_drain_ms(ctl->gc_gate), ctl->gate_lead_ms);
    }
    ctl->tick_running = false;
    lower_gate(ctl);
    if (ctl->replan_pending && !ctl->stopping && !ctl->closing && ctl->followups < TM_FOLLOWUPS_MAX) {
        ctl->replan_pending = false;
        uv_timer_start(&ctl->replan_timer, on_replan, 0, 0);
    }
    maybe_finish_stop(ctl);
}

/* ---- start and stop ---------------------------------------------------- */

/* The API answers its requests in flight from the pool, so the pool
 * closes only once the API has.  Nothing else waits on a close: uv_run
 * returns once every handle is closed. */
static void on_api_closed(void *data)
{
    struct tm_controller *ctl = data;
    if (ctl->pool) {
        tm_pg_pool_close(ctl->pool, NULL, NULL);
        ctl->pool = NULL;
    }
}

static void close_all(struct tm_controller *ctl)
{
    if (ctl->closing)
        return;
    ctl->closing = true;
    tm_log_info("closing", "in_flight_calls=%u", tm_calls_inflight(&ctl->calls));
    /* A start-up failure may come before the providers exist. */
    for (size_t i = 0; ctl->providers && i < ctl->cfg->nproviders; i++) {
        if (ctl->providers[i]) {
            ctl->providers[i]->ops->close(ctl->providers[i], NULL, NULL);
            ctl->providers[i] = NULL;
        }
    }
    tm_power_close(&ctl->power);
    tm_alerter_close(ctl->alerter); /* before the pool: it writes through it */
    ctl->alerter = NULL;
    if (ctl->api) {
        tm_api_close(ctl->api, on_api_closed, ctl);
        ctl->api = NULL;
    } else if (ctl->pool) {
        tm_pg_pool_close(ctl->pool, NULL, NULL);
        ctl->pool = NULL;
    }
    /* Lowered for good: what ingest held goes, and the API's group
     * commits, freed as it closes, no longer wait on the gate. */
    tm_gc_gate_close(ctl->gc_gate);
    ctl->gc_gate = NULL;
    if (ctl->leader_conn) {
        tm_pg_close(ctl->leader_conn, NULL, NULL);
        ctl->leader_conn = NULL;
    }
    uv_handle_t *handles[] = {(uv_handle_t *)&ctl->tick_timer, (uv_handle_t *)&ctl->stop_timer,
                              (uv_handle_t *)&ctl->replan_timer, (uv_handle_t *)&ctl->gate_timer,
                              (uv_handle_t *)&ctl->sigint, (uv_handle_t *)&ctl->sigterm};
    for (size_t i = 0; i < sizeof(handles) / sizeof(handles[0]); i++) {
        if (!uv_is_closing(handles[i]))
            uv_close(handles[i], NULL);
    }
}

static void on_no_calls_left(void *data)
{
    maybe_finish_stop(data);
}

static void maybe_finish_stop(struct tm_controller *ctl)
{
    if (!ctl->stopping || ctl->closing)
        return;
    if (ctl->tick_running || tm_calls_inflight(&ctl->calls) > 0)
        return; /* let them finish: on_stop_deadline abandons them */
    close_all(ctl);
}

static void on_stop_deadline(uv_timer_t *t)
{
    struct tm_controller *ctl = t->data;
    tm_log_warn("stop deadline passed: abandoning work in flight, the next leader repairs it",
                "in_flight_calls=%u", tm_calls_inflight(&ctl->calls));
    close_all(ctl);
}

static void begin_stop(struct tm_controller *ctl, const char *why)
{
    if (ctl->stopping)
        return;
    tm_log_info("stopping", "reason=%s", why);
    ctl->stopping = true;
    uv_timer_stop(&ctl->tick_timer);
    uv_timer_stop(&ctl->replan_timer);
    uv_timer_start(&ctl->stop_timer, on_stop_deadline, TM_STOP_DEADLINE_MS, 0);
    maybe_finish_stop(ctl);
}

static void on_signal(uv_signal_t *s, int signum)
{
    begin_stop(s->data, signum == SIGINT ? "SIGINT" : "SIGTERM");
}

static void on_pool_state(int status, const char *error, void *data)
{
    struct tm_controller *ctl = data;

    if (status < 0) {
        ctl->deaf = true; /* heartbeats cannot be stored: silence counts again from the next read */
        tm_log_warn("database connection lost or refused, retrying with backoff", "error=\"%s\"",
                    error ? error : tm_strerror(status));
    }
}

static void on_leader_conn_state(int status, const char *error, void *data)
{
    struct tm_controller *ctl = data;
    if (status < 0 && ctl->leader) {
        /* The session held the advisory lock: it is gone with it. */
        tm_log_warn("leadership lost with the leader connection", "error=\"%s\"",
                    error ? error : tm_strerror(status));
        ctl->leader = false;
        ctl->fleet.leader = false;
    }
}

/* A provider checked its pools against the cloud (e.g. DescribeInstanceTypes):
 * a pool the cloud cannot serve is a configuration error, refused at start;
 * a cloud that could not be asked is retried by the ticks. */
static void on_validated(int status, const char *reason, void *data)
{
    struct tm_controller *ctl = data;

    ctl->validations_pending--;
    if (status == TM_EINVAL) {
        tm_log_error("configuration refused by the cloud", "reason=\"%s\"", reason ? reason : "");
        snprintf(ctl->exit_reason, sizeof(ctl->exit_reason), "invalid pool: %s", reason ? reason : "");
        ctl->exit_status = TM_EINVAL;
        begin_stop(ctl, "invalid pool definition");
    } else if (status < 0 && status != TM_ECANCELED) {
        tm_log_warn("could not check pools against the cloud, starting anyway", "error=%s reason=\"%s\"",
                    tm_err_name(status), reason ? reason : "");
    }
}

static int create_providers(struct tm_controller *ctl, const char *db_url, char *err, size_t errsize)
{
    const struct tm_config *cfg = ctl->cfg;

    ctl->providers = calloc(cfg->nproviders + 1, sizeof(*ctl->providers));
    if (!ctl->providers)
        return TM_ENOMEM;
    const struct tm_provider_env env = {
        .loop = &ctl->loop, .cfg = cfg, .db_url = db_url, .now_ms = clock_now, .clock = &ctl->clock,
    };
    for (size_t i = 0; i < cfg->nproviders; i++) {
        const struct tm_config_provider *p = &cfg->providers[i];
        const struct tm_provider_kind *kind = tm_provider_kind_find(p->kind);
        int r;

        if (!kind) {
            char names[128];

            tm_provider_kind_names(names, sizeof(names), false);
            snprintf(err, errsize, "provider \"%s\": kind \"%s\" is not available in this build (%s are)",
                     p->name, p->kind, names);
            return TM_EINVAL;
        }
        r = kind->create(&env, p, &ctl->providers[i]);
        if (r == 0 && kind->validate)
            r = kind->validate(ctl->providers[i], on_validated, ctl);
        if (r < 0) {
            snprintf(err, errsize, "could not start provider \"%s\": %s", p->name, tm_strerror(r));
            return r;
        }
        if (kind->validate)
            ctl->validations_pending++;
    }
    return 0;
}

/* Counters for /metrics, one set per configured provider. */
static int init_fleet_stats(struct tm_controller *ctl)
{
    const struct tm_config *cfg = ctl->cfg;
    const char **names = calloc(cfg->nproviders + 1, sizeof(*names));
    int r;

    if (!names)
        return TM_ENOMEM;
    for (size_t i = 0; i < cfg->nproviders; i++)
        names[i] = cfg->providers[i].name;
    r = tm_fleet_stats_init(&ctl->fleet, names, cfg->nproviders);
    free(names);
    return r;
}

/* A provider's spot hazard table that fits none of a spot pool's cells is
 * almost always a naming mismatch (AZ IDs against zone names, another
 * region's table): the pool then takes its zones in turn, which is legal
 * but not what whoever named the table meant. */
static void warn_unfitted_spot_pools(const struct tm_config *cfg)
{
    for (size_t i = 0; i < cfg->npools; i++) {
        const struct tm_config_pool *pool = &cfg->pools[i];
        const struct tm_config_provider *p = tm_config_provider_find(cfg, pool->provider);
        if (strcmp(pool->capacity_type, "on_demand") == 0 || !p || !p->spot_hazards)
            continue;
        if (tm_config_spot_cells_fitted(cfg, pool, NULL) == 0)
            tm_log_warn("spot hazard table fits none of the pool's (type, zone) cells: its zones take turns",
                        "pool=%s provider=%s spot_hazards=\"%s\"", pool->name, p->name,
                        p->spot_hazards_file);
    }
}

/* consolidate_restart set on a pool that preemptible work is not routed
 * to: accepted, and it does nothing there; said once, at start. */
static void note_inert_consolidate_restart(const struct tm_config *cfg)
{
    for (size_t i = 0; i < cfg->npools; i++)
        if (cfg->pools[i].consolidate_restart_set && !tm_reconcile_pool_gets_preemptible(cfg, i))
            tm_log_info("consolidate_restart does nothing on this pool: preemptible work of its GPU "
                        "model goes to its spot pools", "pool=%s consolidate_restart=%s",
                        cfg->pools[i].name, cfg->pools[i].consolidate_restart ? "true" : "false");
}

int tm_controller_run(const struct tm_config *cfg, const struct tm_controller_options *opts,
                      struct tm_controller_stats *ret_stats, char *err, size_t errsize)
{
    struct tm_controller *ctl = calloc(1, sizeof(*ctl));
    char host[64] = "host";
    int r;

    if (!ctl)
        return TM_ENOMEM;
    ctl->cfg = cfg;
    ctl->opts = *opts;
    ctl->policy = (enum tm_sched_policy)tm_sched_policy_parse(cfg->scheduler_policy);
    ctl->sim_agent_everywhere = getenv("TARMAC_SIM_AGENT") && strcmp(getenv("TARMAC_SIM_AGENT"), "1") == 0;
    ctl->pool_real_agent = calloc(cfg->npools + 1, sizeof(bool));
    if (!ctl->pool_real_agent) {
        free(ctl);
        return TM_ENOMEM;
    }
    for (size_t i = 0; i < cfg->npools && !ctl->sim_agent_everywhere; i++) {
        const struct tm_config_provider *p = tm_config_provider_find(cfg, cfg->pools[i].provider);
        const struct tm_provider_kind *kind = p ? tm_provider_kind_find(p->kind) : NULL;
        ctl->pool_real_agent[i] = kind && !kind->simulated;
    }
    tm_clock_init(&ctl->clock, cfg->time_scale);
    ctl->calls = (struct tm_calls){
        .cfg = cfg, .pool = &ctl->pool, .epoch = &ctl->epoch, .closing = &ctl->closing,
        .clock = &ctl->clock, .fleet = &ctl->fleet, .stats = &ctl->stats,
        .on_none_left = on_no_calls_left, .on_shortage = on_shortage, .data = ctl,
    };
    /* A lease shorter than two ticks would lapse between renewals. */
    ctl->lease_ms = cfg->database_leader_lease_ms > 0 ? cfg->database_leader_lease_ms : 15000;
    if (ctl->lease_ms < 2 * cfg->tick_interval_ms) {
        tm_log_warn("database.leader_lease is shorter than two ticks: using two ticks",
                    "leader_lease_ms=%" PRId64 " tick_ms=%" PRId64, ctl->lease_ms,
                    (int64_t)cfg->tick_interval_ms);
        ctl->lease_ms = 2 * cfg->tick_interval_ms;
    }
    gethostname(host, sizeof(host) - 1);
    snprintf(ctl->holder, sizeof(ctl->holder), "%s:%d", host, (int)getpid());

    warn_unfitted_spot_pools(cfg);
    note_inert_consolidate_restart(cfg);
    r = init_fleet_stats(ctl);
    if (r == 0)
        r = uv_loop_init(&ctl->loop);
    if (r < 0) {
        tm_fleet_stats_release(&ctl->fleet);
        free(ctl->pool_real_agent);
        free(ctl);
        return r;
    }
    ctl->started_real = uv_now(&ctl->loop);
    ctl->power = (struct tm_power){.loop = &ctl->loop, .calls = &ctl->calls};
    uv_timer_init(&ctl->loop, &ctl->tick_timer);
    uv_timer_init(&ctl->loop, &ctl->stop_timer);
    uv_timer_init(&ctl->loop, &ctl->replan_timer);
    ctl->replan_timer.data = ctl;
    uv_timer_init(&ctl->loop, &ctl->gate_timer);
    ctl->gate_timer.data = ctl;
    uv_signal_init(&ctl->loop, &ctl->sigint);
    uv_signal_init(&ctl->loop, &ctl->sigterm);
    ctl->tick_timer.data = ctl->stop_timer.data = ctl->sigint.data = ctl->sigterm.data = ctl;
    uv_signal_start(&ctl->sigint, on_signal, SIGINT);
    uv_signal_start(&ctl->sigterm, on_signal, SIGTERM);

    r = tm_pg_pool_create(&ctl->loop, cfg->database_url, cfg->database_pool_size, on_pool_state,
                          ctl, &ctl->pool);
    if (r == 0)
        r = tm_pg_create(&ctl->loop, cfg->database_url, on_leader_conn_state, ctl, &ctl->leader_conn);
    if (r < 0)
        snprintf(err, errsize, "could not start database connections: %s", tm_strerror(r));
    if (r == 0)
        r = create_providers(ctl, cfg->database_url, err, errsize);
    if (r == 0) {
        tm_daemon_quotas_start();
        r = tm_api_start(&ctl->loop, ctl->pool, &tm_api_v1_routes, cfg, &ctl->api);
        if (r < 0)
            snprintf(err, errsize, "could not serve the API on %s: %s%s", cfg->listen, tm_strerror(r),
                     /* api/tls.c logged which file and why, never the key */
                     cfg->api.tls_cert_file && r == TM_EINVAL
                         ? " (api.tls_cert_file or tls_key_file refused: see the log line above)"
                         : "");
        else
            tm_api_set_clock(ctl->api, &ctl->clock);
        /* Without memory for it ingest is simply never held. */
        ctl->gc_gate = tm_gc_gate_new(&ctl->loop, TM_TICK_FIRST_MAX_HOLD_MS);
        tm_api_set_gc_gate(ctl->api, ctl->gc_gate);
        tm_api_set_fleet_stats(ctl->api, &ctl->fleet);
    }
    if (r == 0) {
        r = tm_alerter_create(&ctl->loop, ctl->pool, cfg, clock_now, &ctl->clock, &ctl->alerter);
        if (r < 0)
            snprintf(err, errsize, "could not start the alerter: %s", tm_strerror(r));
    }

    if (r == 0) {
        /* The tick interval is real time: an accelerated clock (the demo)
         * covers more controller time per tick, not more ticks. */
        uint64_t every = (uint64_t)cfg->tick_interval_ms;
        tm_log_info("serving", "cluster=%s holder=%s tick_ms=%" PRIu64 " policy=%s time_scale=%g api_port=%d",
                    cfg->cluster, ctl->holder, every, tm_sched_policy_name(ctl->policy), cfg->time_scale,
                    tm_api_port(ctl->api));
        uv_timer_start(&ctl->tick_timer, on_tick, 10, every);
    } else {
        ctl->stopping = true;
        close_all(ctl);
    }

    uv_run(&ctl->loop, UV_RUN_DEFAULT);
    if (r == 0 && ctl->exit_status < 0) {
        r = ctl->exit_status;
        snprintf(err, errsize, "%s", ctl->exit_reason);
    }
    int rc = uv_loop_close(&ctl->loop);
    if (rc != 0) {
        tm_log_error("event loop did not close cleanly", "error=%s", uv_strerror(rc));
        if (r == 0)
            r = rc;
    }
    if (ret_stats)
        *ret_stats = ctl->stats;
    free(ctl->providers);
    tm_live_forecast_free(ctl->forecast);
    tm_live_forecast_free(ctl->forecast_warm);
    tm_fleet_stats_release(&ctl->fleet);
    tm_calls_release(&ctl->calls);
    tm_power_release(&ctl->power);
    tm_decision_log_release(&ctl->decision_log);
    free(ctl->pool_real_agent);
    tm_log_store_free(ctl->logs);
    free(ctl);
    return r;
}
