/*
 * controller/daemon/controller.c: see controller.h.  The tick is a chain of
 * callbacks; struct tm_controller is the only mutable state, one per
 * process, and only the loop thread touches it.
 */
#include "controller/daemon/controller.h"

#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "controller/api/fleet_stats.h"
#include "controller/api/routes.h"
#include "controller/api/server.h"
#include "controller/daemon/alert_webhook.h"
#include "controller/daemon/plan_log.h"
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
#define TM_SIM_DEFAULT_RUNTIME_MS (30 * 60 * 1000)

struct observed_list {
    struct tm_instance *items;
    size_t n;
    bool complete;
};

#define SHORTAGES_MAX 64
#define SHORTAGE_MEMORY_MS (30 * 60 * 1000) /* as the elastic replay remembers them */

struct tm_controller {
    uv_loop_t loop;
    const struct tm_config *cfg;
    struct tm_controller_options opts;
    struct tm_controller_stats stats;
    struct tm_fleet_stats fleet;    /* /metrics' in-process counters (the API reads them) */
    struct tm_clock clock;
    struct tm_plan_log plan_log;    /* standing actions of the last pass, logged once */
    enum tm_sched_policy policy;
    char holder[128];

    struct tm_pg_pool *pool;
    struct tm_pg *leader_conn;
    struct tm_api *api;             /* every replica serves the API */
    struct tm_alerter *alerter;     /* the leader records and sends alerts */
    struct tm_provider **providers; /* one per cfg->providers, NULL if not built */
    uv_timer_t tick_timer;
    uv_timer_t stop_timer;
    uv_signal_t sigint, sigterm;

    bool leader;
    int64_t epoch;
    bool stopping;
    bool closing;
    bool tick_running;
    int64_t tick_started_real;
    uint64_t tick_started_ns;       /* uv_hrtime() at the tick's start */
    bool pass_begun;                /* this tick led: its duration is observed */
    uint64_t started_real;
    unsigned calls_inflight;        /* cloud calls and their store writes */
    unsigned validations_pending;   /* provider checks before the first tick */
    int exit_status;                /* < 0: a start-up check refused to run */
    bool sim_agent_everywhere;      /* TARMAC_SIM_AGENT=1: stand in on cloud nodes too */
    char exit_reason[512];

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
     * back; launch callbacks add to `shortages` while a pass may run, so
     * the pass reads its own copy. */
    struct tm_live_shortage shortages[SHORTAGES_MAX];
    size_t nshortages;
    struct tm_live_shortage pass_shortages[SHORTAGES_MAX];
    size_t npass_shortages;
    struct tm_rc_plan plan;
    uv_work_t work;                 /* the pass runs off the loop thread */
    int work_status;

    /* Cloud calls in flight, so a tick does not repeat them. */
    int64_t *launching;
    size_t nlaunching, launching_cap;
    char (*terminating)[TM_ID_MAX];
    size_t nterminating, terminating_cap;
};

struct call {
    struct tm_controller *ctl;
    int64_t node_id;
    int provider;
    char instance_id[TM_ID_MAX];
    char token[TM_ID_MAX];
    char instance_type[TM_ID_MAX]; /* launches: what was asked, remembered if short */
    char zone[TM_ID_MAX];
    bool spot;
};

static void end_pass(struct tm_controller *ctl);

/* Fault injection for the crash tests: TARMAC_CRASH_POINT=NAME kills the
 * process with SIGKILL (as kill -9 would) when it reaches that point:
 *   after_apply   the plan (node rows, tokens) committed, no cloud call yet
 *   after_launch  the cloud made the instance, its id not yet recorded
 * Unset in production: getenv is the whole cost. */
static void crash_point(const char *name)
{
    const char *want = getenv("TARMAC_CRASH_POINT");
    if (want && strcmp(want, name) == 0) {
        tm_log_warn("crash point reached: killing myself", "point=%s", name);
        raise(SIGKILL);
    }
}
static void maybe_finish_stop(struct tm_controller *ctl);
static void begin_stop(struct tm_controller *ctl, const char *why);

static int64_t clock_now(void *data)
{
    return tm_clock_now_ms(data);
}

/* ---- in-flight sets ---------------------------------------------------- */

static bool launching_has(struct tm_controller *ctl, int64_t node)
{
    for (size_t i = 0; i < ctl->nlaunching; i++)
        if (ctl->launching[i] == node)
            return true;
    return false;
}

static int launching_add(struct tm_controller *ctl, int64_t node)
{
    if (ctl->nlaunching == ctl->launching_cap) {
        size_t cap = ctl->launching_cap ? 2 * ctl->launching_cap : 16;
        void *m = realloc(ctl->launching, cap * sizeof(*ctl->launching));
        if (!m)
            return TM_ENOMEM;
        ctl->launching = m;
        ctl->launching_cap = cap;
    }
    ctl->launching[ctl->nlaunching++] = node;
    return 0;
}

static void launching_del(struct tm_controller *ctl, int64_t node)
{
    for (size_t i = 0; i < ctl->nlaunching; i++)
        if (ctl->launching[i] == node) {
            ctl->launching[i] = ctl->launching[--ctl->nlaunching];
            return;
        }
}

static bool terminating_has(struct tm_controller *ctl, const char *id)
{
    for (size_t i = 0; i < ctl->nterminating; i++)
        if (strcmp(ctl->terminating[i], id) == 0)
            return true;
    return false;
}

static int terminating_add(struct tm_controller *ctl, const char *id)
{
    if (ctl->nterminating == ctl->terminating_cap) {
        size_t cap = ctl->terminating_cap ? 2 * ctl->terminating_cap : 16;
        void *m = realloc(ctl->terminating, cap * TM_ID_MAX);
        if (!m)
            return TM_ENOMEM;
        ctl->terminating = m;
        ctl->terminating_cap = cap;
    }
    snprintf(ctl->terminating[ctl->nterminating++], TM_ID_MAX, "%s", id);
    return 0;
}

static void terminating_del(struct tm_controller *ctl, const char *id)
{
    for (size_t i = 0; i < ctl->nterminating; i++)
        if (strcmp(ctl->terminating[i], id) == 0) {
            memcpy(ctl->terminating[i], ctl->terminating[--ctl->nterminating], TM_ID_MAX);
            return;
        }
}

static void call_done(struct call *c)
{
    struct tm_controller *ctl = c->ctl;
    ctl->calls_inflight--;
    free(c);
    maybe_finish_stop(ctl);
}

/* ---- cloud calls after the plan committed ------------------------------ */

static void on_launch_recorded(int status, const char *err, void *data)
{
    struct call *c = data;
    if (status < 0 && status != TM_ECANCELED)
        tm_log_warn("could not record launched instance, the next tick adopts it by token",
                    "node=%" PRId64 " instance=%s error=\"%s\"", c->node_id, c->instance_id,
                    err ? err : tm_strerror(status));
    call_done(c);
}

static void on_launch_failed_recorded(int status, const cJSON *result, const char *err,
                                      const char *sqlstate, void *data)
{
    struct call *c = data;
    if (status < 0 && status != TM_ECANCELED)
        tm_log_warn("could not record failed launch", "node=%" PRId64 " error=\"%s\"", c->node_id,
                    err ? err : tm_strerror(status));
    call_done(c);
}

/* Remember (type, zone, capacity) as short until SHORTAGE_MEMORY_MS from
 * now; a full list forgets its soonest-expiring entry. */
static void shortage_remember(struct tm_controller *ctl, const struct call *c, int64_t now_ms)
{
    size_t k = ctl->nshortages;
    for (size_t i = 0; i < ctl->nshortages; i++) {
        const struct tm_live_shortage *x = &ctl->shortages[i];
        if (x->spot == c->spot && strcmp(x->instance_type, c->instance_type) == 0 &&
            strcmp(x->zone, c->zone) == 0)
            k = i;
    }
    if (k == SHORTAGES_MAX) {
        k = 0;
        for (size_t i = 1; i < ctl->nshortages; i++)
            if (ctl->shortages[i].until_ms < ctl->shortages[k].until_ms)
                k = i;
    }
    if (k == ctl->nshortages)
        ctl->nshortages++;
    struct tm_live_shortage *x = &ctl->shortages[k];
    snprintf(x->instance_type, sizeof(x->instance_type), "%s", c->instance_type);
    snprintf(x->zone, sizeof(x->zone), "%s", c->zone);
    x->spot = c->spot;
    x->until_ms = now_ms + SHORTAGE_MEMORY_MS;
}

static void on_launch(int status, const struct tm_instance *inst, void *data)
{
    struct call *c = data;
    struct tm_controller *ctl = c->ctl;
    const char *pname = ctl->cfg->providers[c->provider].name;

    launching_del(ctl, c->node_id);
    tm_fleet_stats_call(&ctl->fleet, (size_t)c->provider, TM_FLEET_OP_LAUNCH, status);
    if (status == 0 && !ctl->closing) {
        crash_point("after_launch");
        snprintf(c->instance_id, sizeof(c->instance_id), "%s", inst->id);
        tm_log_info("instance launched", "node=%" PRId64 " instance=%s provider=%s type=%s zone=%s",
                    c->node_id, inst->id, pname, inst->instance_type, inst->zone);
        ctl->stats.launches++;
        if (tm_store_node_launched(ctl->pool, c->node_id, inst->id, tm_clock_now_ms(&ctl->clock),
                                   on_launch_recorded, c) == 0)
            return;
    } else if (status == TM_EQUOTA && !ctl->closing) {
        /* Capacity short: give the node row up with its reason, so the next
         * pass may request elsewhere; the token is never reused. */
        char why[160];
        snprintf(why, sizeof(why), "provider %s has no capacity: %s", pname, tm_strerror(status));
        tm_log_warn("launch refused for capacity", "node=%" PRId64 " provider=%s type=%s zone=%s",
                    c->node_id, pname, c->instance_type, c->zone);
        ctl->stats.launch_errors++;
        shortage_remember(ctl, c, tm_clock_now_ms(&ctl->clock));
        cJSON *actions = cJSON_CreateArray();
        cJSON *a = cJSON_CreateObject();
        if (actions && a) {
            cJSON_AddItemToArray(actions, a);
            cJSON_AddStringToObject(a, "op", "launch_failed");
            cJSON_AddNumberToObject(a, "node", (double)c->node_id);
            cJSON_AddStringToObject(a, "reason", why);
            int r = tm_store_apply(ctl->pool, ctl->epoch, tm_clock_now_ms(&ctl->clock), actions,
                                   on_launch_failed_recorded, c);
            cJSON_Delete(actions);
            if (r == 0)
                return;
        } else {
            cJSON_Delete(actions);
            cJSON_Delete(a);
        }
    } else if (status < 0 && status != TM_ECANCELED) {
        ctl->stats.launch_errors++;
        tm_log(status == TM_EAUTH ? TM_LOG_ERROR : TM_LOG_WARN,
               "could not launch instance, will retry next tick",
               "node=%" PRId64 " provider=%s error=%s", c->node_id, pname, tm_err_name(status));
    }
    call_done(c);
}

static void on_terminate(int status, void *data)
{
    struct call *c = data;
    struct tm_controller *ctl = c->ctl;

    terminating_del(ctl, c->instance_id);
    /* An instance already gone is what we asked for. */
    tm_fleet_stats_call(&ctl->fleet, (size_t)c->provider, TM_FLEET_OP_TERMINATE,
                        status == TM_ENOTFOUND ? 0 : status);
    if (status == 0) {
        ctl->stats.terminates++;
        tm_log_info("instance terminate requested", "node=%" PRId64 " instance=%s", c->node_id,
                    c->instance_id);
    } else if (status != TM_ECANCELED && status != TM_ENOTFOUND) {
        tm_log_warn("could not terminate instance, will retry next tick",
                    "node=%" PRId64 " instance=%s error=%s", c->node_id, c->instance_id,
                    tm_err_name(status));
    }
    call_done(c);
}

static struct call *new_call(struct tm_controller *ctl, int provider, int64_t node)
{
    struct call *c = calloc(1, sizeof(*c));
    if (!c)
        return NULL;
    c->ctl = ctl;
    c->provider = provider;
    c->node_id = node;
    ctl->calls_inflight++;
    return c;
}

/* Whether tarmac_apply's "kept" list (0008) names node_id: a terminate op
 * its guards did not apply. */
static bool node_kept(const cJSON *kept, int64_t node_id)
{
    const cJSON *id;
    if (node_id <= 0 || !cJSON_IsArray(kept))
        return false;
    cJSON_ArrayForEach(id, kept)
        if (cJSON_IsNumber(id) && (int64_t)id->valuedouble == node_id)
            return true;
    return false;
}

static void start_calls(struct tm_controller *ctl, const cJSON *applied)
{
    const struct tm_config *cfg = ctl->cfg;
    const cJSON *new_nodes = applied ? cJSON_GetObjectItemCaseSensitive(applied, "nodes") : NULL;

    for (size_t i = 0; i < ctl->plan.nlaunches; i++) {
        struct tm_rc_plan_launch *l = &ctl->plan.launches[i];
        const struct tm_config_pool *pool = &cfg->pools[l->pool];
        int prov = -1;
        for (size_t p = 0; p < cfg->nproviders; p++)
            if (strcmp(cfg->providers[p].name, pool->provider) == 0)
                prov = (int)p;
        if (l->node_id == 0) {
            /* A node this plan requested: its id comes back from the apply. */
            const cJSON *n;
            cJSON_ArrayForEach(n, new_nodes) {
                const cJSON *tok = cJSON_GetObjectItemCaseSensitive(n, "token");
                const cJSON *id = cJSON_GetObjectItemCaseSensitive(n, "id");
                if (cJSON_IsString(tok) && cJSON_IsNumber(id) && strcmp(tok->valuestring, l->token) == 0)
                    l->node_id = (int64_t)id->valuedouble;
            }
            if (l->node_id == 0)
                continue; /* not inserted (token clash): nothing to launch */
        }
        if (prov < 0 || !ctl->providers[prov] || launching_has(ctl, l->node_id))
            continue;
        struct call *c = new_call(ctl, prov, l->node_id);
        if (!c || launching_add(ctl, l->node_id) < 0) {
            if (c)
                call_done(c);
            continue;
        }
        snprintf(c->token, sizeof(c->token), "%s", l->token);
        snprintf(c->instance_type, sizeof(c->instance_type), "%s", l->instance_type);
        snprintf(c->zone, sizeof(c->zone), "%s", l->zone);
        c->spot = l->capacity == TM_CAPACITY_SPOT;
        struct tm_launch_request req = {
            .cluster = cfg->cluster, .pool = pool->name, .node_id = l->node_id, .token = l->token,
            .instance_type = l->instance_type, .zone = l->zone, .capacity = l->capacity,
        };
        struct tm_provider *p = ctl->providers[prov];
        int r = p->ops->launch(p, &req, on_launch, c);
        if (r < 0) {
            tm_fleet_stats_call(&ctl->fleet, (size_t)prov, TM_FLEET_OP_LAUNCH, r);
            launching_del(ctl, l->node_id);
            tm_log_warn("could not start launch", "node=%" PRId64 " error=%s", l->node_id, tm_err_name(r));
            call_done(c);
        }
    }
    const cJSON *kept = applied ? cJSON_GetObjectItemCaseSensitive(applied, "kept") : NULL;
    for (size_t i = 0; i < ctl->plan.nterminates; i++) {
        struct tm_rc_plan_terminate *t = &ctl->plan.terminates[i];
        struct tm_provider *p = ctl->providers[t->provider];
        if (!p || terminating_has(ctl, t->instance_id))
            continue;
        if (node_kept(kept, t->node_id)) {
            /* The database refused the release (a job landed on the node
             * since the snapshot): terminating it in the cloud would kill
             * that job.  The next pass sees the node as it is now. */
            tm_log_info("release not applied, instance kept", "node=%" PRId64 " instance=%s",
                        t->node_id, t->instance_id);
            continue;
        }
        struct call *c = new_call(ctl, t->provider, t->node_id);
        if (!c || terminating_add(ctl, t->instance_id) < 0) {
            if (c)
                call_done(c);
            continue;
        }
        snprintf(c->instance_id, sizeof(c->instance_id), "%s", t->instance_id);
        int r = p->ops->terminate(p, t->instance_id, on_terminate, c);
        if (r < 0) {
            tm_fleet_stats_call(&ctl->fleet, t->provider, TM_FLEET_OP_TERMINATE, r);
            terminating_del(ctl, t->instance_id);
            call_done(c);
        }
    }
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
    tm_plan_log_write(&ctl->plan_log, ctl->plan.actions);
    if (ctl->plan.nlaunches > 0)
        crash_point("after_apply");
    ctl->stats.passes++;
    ctl->stats.placed += ctl->plan.placed;
    ctl->stats.requested += ctl->plan.requested;
    ctl->stats.ready += ctl->plan.ready;
    ctl->stats.released += ctl->plan.released;
    ctl->stats.gone += ctl->plan.gone;
    ctl->stats.orphans += ctl->plan.orphans;
    if (!ctl->closing)
        start_calls(ctl, result);
    end_pass(ctl);
}

static void on_agent_report(int status, const char *err, void *data)
{
    struct call *c = data;
    if (status < 0 && status != TM_ECANCELED)
        tm_log_warn("could not record a node report", "node=%" PRId64 " error=\"%s\"", c->node_id,
                    err ? err : tm_strerror(status));
    call_done(c);
}

static void on_accrued(int status, const char *err, void *data)
{
    struct call *c = data;
    if (status < 0 && status != TM_ECANCELED)
        tm_log_warn("could not accrue spend, the next tick catches up", "error=\"%s\"",
                    err ? err : tm_strerror(status));
    call_done(c);
}

/* The spend ledger: what billed nodes cost since the last pass, attributed
 * to teams by GPU share.  Exact over any number of passes (see 0003). */
static void accrue(struct tm_controller *ctl)
{
    struct call *c = new_call(ctl, -1, 0);
    if (c && tm_store_accrue(ctl->pool, ctl->epoch, ctl->now_ms, on_accrued, c) < 0)
        call_done(c);
}

static bool pool_is_sim(const struct tm_config *cfg, int pool)
{
    if (pool < 0)
        return false;
    const struct tm_config_provider *p = tm_config_provider_find(cfg, cfg->pools[pool].provider);
    const struct tm_provider_kind *kind = p ? tm_provider_kind_find(p->kind) : NULL;
    return kind && kind->simulated;
}

static int cmp_node_id(const void *key, const void *elem)
{
    int64_t id = *(const int64_t *)key, other = ((const struct tm_snap_node *)elem)->id;
    return id < other ? -1 : id > other;
}

/* How long a simulated node runs this attempt of a job: its given runtime,
 * else its estimate, else TM_SIM_DEFAULT_RUNTIME_MS, less the progress its
 * checkpoints kept (a job resumed after a spot notice runs the rest). */
static int64_t sim_runtime_ms(const struct tm_snap_job *job)
{
    int64_t total = job->sim_runtime_ms > 0 ? job->sim_runtime_ms
                    : job->estimate_ms > 0  ? job->estimate_ms
                                            : TM_SIM_DEFAULT_RUNTIME_MS;
    return total > job->progress_ms ? total - job->progress_ms : 0;
}

struct due_job {
    int32_t node;   /* snapshot node index */
    int32_t job;    /* snapshot job index */
};

static int cmp_due(const void *a, const void *b)
{
    const struct due_job *x = a, *y = b;
    if (x->node != y->node)
        return x->node < y->node ? -1 : 1;
    return x->job < y->job ? -1 : x->job > y->job;
}

static void sim_agent_report(struct tm_controller *ctl, const struct tm_snap_node *n,
                             const struct due_job *due, size_t ndue)
{
    const struct tm_snapshot *s = ctl->snap;
    cJSON *report = cJSON_CreateObject();
    cJSON *jobs = report ? cJSON_AddArrayToObject(report, "jobs") : NULL;

    for (size_t k = 0; jobs && k < ndue; k++) {
        const struct tm_snap_job *job = &s->jobs[due[k].job];
        int64_t runtime = sim_runtime_ms(job);
        cJSON *o = cJSON_CreateObject();
        char why[96];
        if (!o)
            break;
        snprintf(why, sizeof(why), "sim agent: ran its %" PRId64 " s", runtime / 1000);
        cJSON_AddNumberToObject(o, "id", (double)job->id);
        cJSON_AddStringToObject(o, "state", "succeeded");
        cJSON_AddStringToObject(o, "reason", why);
        cJSON_AddItemToArray(jobs, o);
        ctl->stats.finished++;
        tm_log_info("job finished", "job=%" PRId64 " node=%" PRId64 " runtime_s=%" PRId64, job->id,
                    n->id, runtime / 1000);
    }
    if (jobs) {
        struct call *c = new_call(ctl, -1, n->id);
        if (c && tm_store_agent_report(ctl->pool, n->id, ctl->now_ms, report, on_agent_report, c) < 0)
            call_done(c);
    }
    cJSON_Delete(report);
}

/* The sim agent: stands in for the software on simulated nodes.  A job runs
 * for its simulated runtime, then its node reports it finished through the
 * same path a real node agent uses (tarmac_agent_report), one report per
 * node.  Until the node agent exists, TARMAC_SIM_AGENT=1 lets it stand in on
 * cloud nodes as well, so a controller driving an emulated cloud (moto) runs
 * its jobs to the end.  O(J log N): one pass over the jobs. */
static void sim_agent(struct tm_controller *ctl)
{
    const struct tm_snapshot *s = ctl->snap;
    struct due_job *due = malloc((s->njobs + 1) * sizeof(*due));
    size_t ndue = 0;

    if (!due)
        return;
    for (size_t j = 0; j < s->njobs; j++) {
        const struct tm_snap_job *job = &s->jobs[j];
        if (job->state != TM_JOB_RUNNING)
            continue;
        int64_t runtime = sim_runtime_ms(job);
        if (job->started_ms + runtime > ctl->now_ms)
            continue;
        const struct tm_snap_node *n = bsearch(&job->node_id, s->nodes, s->nnodes, sizeof(*s->nodes),
                                               cmp_node_id);
        if (!n || n->state != TM_NODE_READY ||
            !(ctl->sim_agent_everywhere || pool_is_sim(ctl->cfg, n->pool)))
            continue;
        due[ndue++] = (struct due_job){.node = (int32_t)(n - s->nodes), .job = (int32_t)j};
    }
    qsort(due, ndue, sizeof(*due), cmp_due);
    for (size_t k = 0; k < ndue;) {
        size_t end = k;
        while (end < ndue && due[end].node == due[k].node)
            end++;
        sim_agent_report(ctl, &s->nodes[due[k].node], due + k, end - k);
        k = end;
    }
    free(due);
}

static void reconcile_work(uv_work_t *w)
{
    struct tm_controller *ctl = w->data;
    struct tm_reconcile_input in = {
        .cfg = ctl->cfg, .snap = ctl->snap, .observed = ctl->observed,
        .nobserved = ctl->cfg->nproviders, .now_ms = ctl->now_ms, .policy = ctl->policy,
        .forecast = ctl->pool_forecast,
        .shortages = ctl->pass_shortages, .nshortages = ctl->npass_shortages,
    };
    ctl->work_status = tm_reconcile(&in, &ctl->plan);
}

static void reconcile_done(uv_work_t *w, int status)
{
    struct tm_controller *ctl = w->data;
    int r = status < 0 ? status : ctl->work_status;

    free(ctl->observed);
    ctl->observed = NULL;
    if (r < 0 || ctl->closing) {
        if (r < 0 && r != UV_ECANCELED)
            tm_log_error("reconcile failed", "error=%s", tm_err_name(r));
        end_pass(ctl);
        return;
    }
    if (cJSON_GetArraySize(ctl->plan.actions) == 0) {
        start_calls(ctl, NULL);
        end_pass(ctl);
        return;
    }
    r = tm_store_apply(ctl->pool, ctl->epoch, ctl->now_ms, ctl->plan.actions, on_applied, ctl);
    if (r < 0) {
        tm_log_error("could not send plan", "error=%s", tm_err_name(r));
        end_pass(ctl);
    }
}

static void on_snapshot(int status, struct tm_snapshot *snap, const char *err, void *data)
{
    struct tm_controller *ctl = data;

    if (status < 0) {
        if (status != TM_ECANCELED)
            tm_log_error("could not read snapshot, will retry next tick", "error=\"%s\"",
                         err ? err : tm_strerror(status));
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
    /* Idle: no queued or running job and no live node (a restart may find
     * only nodes to release, or nothing at all).  The ledger is still
     * brought up to date first: stopping waits for that call. */
    bool idle = ctl->opts.exit_when_idle && snap->njobs == 0 && snap->nnodes == 0 &&
                ctl->calls_inflight == 0;
    if (!ctl->closing) {
        sim_agent(ctl);
        accrue(ctl);
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
    ctl->npass_shortages = 0;
    for (size_t i = 0; i < ctl->nshortages; i++)
        if (ctl->shortages[i].until_ms > ctl->now_ms)
            ctl->pass_shortages[ctl->npass_shortages++] = ctl->shortages[i];
    ctl->nshortages = ctl->npass_shortages;
    memcpy(ctl->shortages, ctl->pass_shortages, ctl->npass_shortages * sizeof(*ctl->shortages));
    /* The pass is a pure function of what this tick owns (snapshot,
     * listings, config): a queue of 100k jobs takes ~100 ms, which must not
     * stall the loop (API, database, cloud calls), so it runs on libuv's
     * thread pool and nothing touches its inputs until it returns. */
    ctl->work.data = ctl;
    if (uv_queue_work(&ctl->loop, &ctl->work, reconcile_work, reconcile_done) < 0) {
        tm_log_error("could not queue the reconcile pass", "error=%s", "uv_queue_work");
        end_pass(ctl);
    }
}

static void take_snapshot(struct tm_controller *ctl)
{
    int r = tm_store_snapshot(ctl->pool, ctl->cfg, on_snapshot, ctl);
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
        struct list_ctx *lc = p ? malloc(sizeof(*lc)) : NULL;
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
    struct call *call;              /* keeps a stop waiting for us */
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
    struct tm_controller *ctl = wm->call->ctl;

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
    call_done(wm->call);
    free(wm->spans);
    free(wm);
}

static void on_demand_history(int status, const char *err, const struct tm_demand_span *spans,
                              size_t n, void *data)
{
    struct warm *wm = data;
    struct tm_controller *ctl = wm->call->ctl;
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
    call_done(wm->call);
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
    if (!wm || !(wm->call = new_call(ctl, -1, 0))) {
        free(wm);
        return;
    }
    wm->from_ms = tm_clock_now_ms(&ctl->clock) - history;
    ctl->warming = true;
    if (tm_store_demand_history(ctl->pool, ctl->cfg, wm->from_ms, on_demand_history, wm) < 0) {
        ctl->warming = false;
        call_done(wm->call);
        free(wm);
    }
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
        end_pass(ctl); /* another replica leads: stand by */
        return;
    }
    ctl->leader = true;
    ctl->epoch = epoch;
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

static void on_tick(uv_timer_t *t)
{
    struct tm_controller *ctl = t->data;

    if (ctl->tick_running || ctl->stopping || ctl->validations_pending > 0)
        return;
    if (ctl->opts.max_wall_ms > 0 &&
        uv_now(&ctl->loop) - ctl->started_real >= (uint64_t)ctl->opts.max_wall_ms) {
        begin_stop(ctl, "wall-clock limit reached");
        return;
    }
    ctl->tick_running = true;
    ctl->stats.ticks++;
    ctl->fleet.ticks++;
    ctl->tick_started_ns = uv_hrtime();
    ctl->now_ms = tm_clock_now_ms(&ctl->clock);
    ctl->tick_started_real = (int64_t)uv_now(&ctl->loop);
    if (!ctl->leader) {
        int r = tm_store_try_lead(ctl->leader_conn, ctl->holder, ctl->now_ms, on_lead, ctl);
        if (r < 0)
            end_pass(ctl);
        return;
    }
    begin_pass(ctl);
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
    if (ctl->tick_running && ctl->pass_begun)
        tm_fleet_stats_tick_done(&ctl->fleet, (double)(uv_hrtime() - ctl->tick_started_ns) / 1e9);
    ctl->pass_begun = false;
    ctl->fleet.leader = ctl->leader;
    if (ctl->tick_running) {
        int64_t took = (int64_t)uv_now(&ctl->loop) - ctl->tick_started_real;
        tm_log_debug("tick done", "took_ms=%" PRId64 " leader=%d in_flight_calls=%u", took,
                     ctl->leader, ctl->calls_inflight);
    }
    ctl->tick_running = false;
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
    tm_log_info("closing", "in_flight_calls=%u", ctl->calls_inflight);
    /* A start-up failure may come before the providers exist. */
    for (size_t i = 0; ctl->providers && i < ctl->cfg->nproviders; i++) {
        if (ctl->providers[i]) {
            ctl->providers[i]->ops->close(ctl->providers[i], NULL, NULL);
            ctl->providers[i] = NULL;
        }
    }
    tm_alerter_close(ctl->alerter); /* before the pool: it writes through it */
    ctl->alerter = NULL;
    if (ctl->api) {
        tm_api_close(ctl->api, on_api_closed, ctl);
        ctl->api = NULL;
    } else if (ctl->pool) {
        tm_pg_pool_close(ctl->pool, NULL, NULL);
        ctl->pool = NULL;
    }
    if (ctl->leader_conn) {
        tm_pg_close(ctl->leader_conn, NULL, NULL);
        ctl->leader_conn = NULL;
    }
    uv_handle_t *handles[] = {(uv_handle_t *)&ctl->tick_timer, (uv_handle_t *)&ctl->stop_timer,
                              (uv_handle_t *)&ctl->sigint, (uv_handle_t *)&ctl->sigterm};
    for (size_t i = 0; i < sizeof(handles) / sizeof(handles[0]); i++) {
        if (!uv_is_closing(handles[i]))
            uv_close(handles[i], NULL);
    }
}

static void maybe_finish_stop(struct tm_controller *ctl)
{
    if (!ctl->stopping || ctl->closing)
        return;
    if (ctl->tick_running || ctl->calls_inflight > 0)
        return; /* let them finish: on_stop_deadline abandons them */
    close_all(ctl);
}

static void on_stop_deadline(uv_timer_t *t)
{
    struct tm_controller *ctl = t->data;
    tm_log_warn("stop deadline passed: abandoning work in flight, the next leader repairs it",
                "in_flight_calls=%u", ctl->calls_inflight);
    close_all(ctl);
}

static void begin_stop(struct tm_controller *ctl, const char *why)
{
    if (ctl->stopping)
        return;
    tm_log_info("stopping", "reason=%s", why);
    ctl->stopping = true;
    uv_timer_stop(&ctl->tick_timer);
    uv_timer_start(&ctl->stop_timer, on_stop_deadline, TM_STOP_DEADLINE_MS, 0);
    maybe_finish_stop(ctl);
}

static void on_signal(uv_signal_t *s, int signum)
{
    begin_stop(s->data, signum == SIGINT ? "SIGINT" : "SIGTERM");
}

static void on_pool_state(int status, const char *error, void *data)
{
    if (status < 0)
        tm_log_warn("database connection lost or refused, retrying with backoff", "error=\"%s\"",
                    error ? error : tm_strerror(status));
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
    tm_clock_init(&ctl->clock, cfg->time_scale);
    gethostname(host, sizeof(host) - 1);
    snprintf(ctl->holder, sizeof(ctl->holder), "%s:%d", host, (int)getpid());

    warn_unfitted_spot_pools(cfg);
    r = init_fleet_stats(ctl);
    if (r == 0)
        r = uv_loop_init(&ctl->loop);
    if (r < 0) {
        tm_fleet_stats_release(&ctl->fleet);
        free(ctl);
        return r;
    }
    ctl->started_real = uv_now(&ctl->loop);
    uv_timer_init(&ctl->loop, &ctl->tick_timer);
    uv_timer_init(&ctl->loop, &ctl->stop_timer);
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
        r = tm_api_start(&ctl->loop, ctl->pool, &tm_api_v1_routes, cfg, &ctl->api);
        if (r < 0)
            snprintf(err, errsize, "could not serve the API on %s: %s%s", cfg->listen, tm_strerror(r),
                     /* api/tls.c logged which file and why, never the key */
                     cfg->api.tls_cert_file && r == TM_EINVAL
                         ? " (api.tls_cert_file or tls_key_file refused: see the log line above)"
                         : "");
        else
            tm_api_set_clock(ctl->api, &ctl->clock);
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
    free(ctl->launching);
    free(ctl->terminating);
    tm_plan_log_release(&ctl->plan_log);
    free(ctl);
    return r;
}
