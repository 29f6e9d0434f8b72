/*
 * controller/reconcile/alerts.c: see alerts.h.  One pass over nodes, allocations,
 * jobs, budgets and providers; each condition adds its alert with the
 * numbers that made it hold.
 */
#include "controller/reconcile/alerts.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/clock.h"
#include "core/err.h"

static const char *const kind_names[TM_ALERT_KIND_MAX] = {
    "pool_idle", "queue_age", "soft_cap", "provider_auth", "gpu_idle", "pool_no_show", "mass_silence",
};

const char *tm_alert_kind_name(enum tm_alert_kind kind)
{
    return kind < TM_ALERT_KIND_MAX ? kind_names[kind] : "unknown";
}

void tm_alert_set_release(struct tm_alert_set *set)
{
    if (!set)
        return;
    for (size_t i = 0; i < set->n; i++)
        cJSON_Delete(set->items[i].details);
    free(set->items);
    set->items = NULL;
    set->n = 0;
}

void tm_alert_state_release(struct tm_alert_state *state)
{
    if (!state)
        return;
    free(state->pool_below_since_ms);
    state->pool_below_since_ms = NULL;
    state->npools = 0;
}

/* "45s", "12m30s", "3h05m": for messages people read. */
static void fmt_duration(int64_t ms, char *out, size_t size)
{
    int64_t s = ms / 1000;
    if (s < 60)
        snprintf(out, size, "%" PRId64 "s", s);
    else if (s < 3600)
        snprintf(out, size, "%" PRId64 "m%02" PRId64 "s", s / 60, s % 60);
    else
        snprintf(out, size, "%" PRId64 "h%02" PRId64 "m", s / 3600, (s % 3600) / 60);
}

struct eval {
    const struct tm_alert_input *in;
    struct tm_alert_set set;
    size_t cap;
    int err;
};

/* A new alert at the end of the set, its details object created; NULL (and
 * e->err set) when out of memory. */
static struct tm_alert *add(struct eval *e, enum tm_alert_kind kind, const char *subject,
                            const char *decision_kind, const char *decision_id)
{
    if (e->err)
        return NULL;
    if (e->set.n == e->cap) {
        size_t cap = e->cap ? 2 * e->cap : 8;
        void *m = realloc(e->set.items, cap * sizeof(*e->set.items));
        if (!m) {
            e->err = TM_ENOMEM;
            return NULL;
        }
        e->set.items = m;
        e->cap = cap;
    }
    struct tm_alert *a = &e->set.items[e->set.n];
    memset(a, 0, sizeof(*a));
    a->details = cJSON_CreateObject();
    if (!a->details) {
        e->err = TM_ENOMEM;
        return NULL;
    }
    e->set.n++;
    a->kind = kind;
    snprintf(a->subject, sizeof(a->subject), "%s", subject);
    snprintf(a->key, sizeof(a->key), "%s:%s", tm_alert_kind_name(kind), subject);
    a->decision_subject_kind = decision_kind;
    snprintf(a->decision_subject_id, sizeof(a->decision_subject_id), "%s", decision_id);
    return a;
}

static void num(struct eval *e, struct tm_alert *a, const char *name, double v)
{
    if (!cJSON_AddNumberToObject(a->details, name, v))
        e->err = TM_ENOMEM;
}

static void str(struct eval *e, struct tm_alert *a, const char *name, const char *v)
{
    if (!cJSON_AddStringToObject(a->details, name, v))
        e->err = TM_ENOMEM;
}

static int cmp_node_id(const void *key, const void *elem)
{
    int64_t id = *(const int64_t *)key, other = ((const struct tm_snap_node *)elem)->id;
    return id < other ? -1 : id > other;
}

static int popcount16(uint32_t mask)
{
    int n = 0;
    for (; mask; mask &= mask - 1)
        n++;
    return n;
}

/* pool_idle: paid GPU milli and allocated GPU milli per pool, from the
 * billed nodes and the allocations on them; the window from prev. */
static void pool_idle(struct eval *e, const struct tm_alert_state *prev, int64_t *below_since)
{
    const struct tm_config *cfg = e->in->cfg;
    const struct tm_snapshot *s = e->in->snap;
    double below = cfg->alerts.pool_util_below_percent;
    int64_t now = e->in->now_ms;

    if (below <= 0)
        return;
    int64_t *paid = calloc(cfg->npools + 1, sizeof(*paid));
    int64_t *used = calloc(cfg->npools + 1, sizeof(*used));
    if (!paid || !used) {
        e->err = TM_ENOMEM;
        goto out;
    }
    for (size_t i = 0; i < s->nnodes; i++) {
        const struct tm_snap_node *n = &s->nodes[i];
        /* A suspended owned node is switched off on purpose: not idle capacity. */
        if (n->billed && n->power != TM_POWER_SUSPENDED && n->pool >= 0 && (size_t)n->pool < cfg->npools)
            paid[n->pool] += (int64_t)n->gpus * 1000;
    }
    for (size_t i = 0; i < s->nallocs; i++) {
        const struct tm_snap_alloc *al = &s->allocs[i];
        const struct tm_snap_node *n = bsearch(&al->node_id, s->nodes, s->nnodes, sizeof(*s->nodes),
                                               cmp_node_id);
        if (n && n->billed && n->pool >= 0 && (size_t)n->pool < cfg->npools)
            used[n->pool] += (int64_t)popcount16(al->gpu_mask) * al->gpu_milli;
    }
    for (size_t p = 0; p < cfg->npools; p++) {
        if (paid[p] == 0)
            continue; /* nothing paid for: nothing wasted */
        double util = 100.0 * (double)used[p] / (double)paid[p];
        if (util >= below)
            continue;
        int64_t since = prev && p < prev->npools && prev->pool_below_since_ms[p] > 0
                            ? prev->pool_below_since_ms[p] : now;
        below_since[p] = since;
        if (now - since < cfg->alerts.pool_util_for_ms)
            continue;
        const char *name = cfg->pools[p].name;
        struct tm_alert *a = add(e, TM_ALERT_POOL_IDLE, name, "pool", name);
        if (!a)
            goto out;
        char for_s[32];
        fmt_duration(now - since, for_s, sizeof(for_s));
        snprintf(a->message, sizeof(a->message),
                 "pool %s: %.1f%% of its %.1f paid GPUs in use, below %.1f%% for %s", name, util,
                 (double)paid[p] / 1000.0, below, for_s);
        str(e, a, "pool", name);
        num(e, a, "utilisation_percent", util);
        num(e, a, "threshold_percent", below);
        num(e, a, "paid_gpus", (double)paid[p] / 1000.0);
        num(e, a, "allocated_gpus", (double)used[p] / 1000.0);
        num(e, a, "below_since_ms", (double)since);
        num(e, a, "for_ms", (double)cfg->alerts.pool_util_for_ms);
    }
out:
    free(paid);
    free(used);
}

/* queue_age: the oldest queued job of each class. */
static void queue_age(struct eval *e)
{
    const struct tm_snapshot *s = e->in->snap;
    int64_t limit = e->in->cfg->alerts.queue_age_above_ms;
    const struct tm_snap_job *oldest[TM_CLASS_MAX] = {0};

    if (limit <= 0)
        return;
    for (size_t i = 0; i < s->njobs; i++) {
        const struct tm_snap_job *j = &s->jobs[i];
        if (j->state != TM_JOB_QUEUED || (unsigned)j->klass >= TM_CLASS_MAX)
            continue;
        const struct tm_snap_job *o = oldest[j->klass];
        if (!o || j->submitted_ms < o->submitted_ms || (j->submitted_ms == o->submitted_ms && j->id < o->id))
            oldest[j->klass] = j;
    }
    for (int c = 0; c < TM_CLASS_MAX; c++) {
        const struct tm_snap_job *j = oldest[c];
        int64_t age = j ? e->in->now_ms - j->submitted_ms : 0;
        if (!j || age <= limit)
            continue;
        const char *klass = tm_job_class_name((enum tm_job_class)c);
        char id[24], age_s[32], limit_s[32];
        snprintf(id, sizeof(id), "%" PRId64, j->id);
        struct tm_alert *a = add(e, TM_ALERT_QUEUE_AGE, klass, "job", id);
        if (!a)
            return;
        fmt_duration(age, age_s, sizeof(age_s));
        fmt_duration(limit, limit_s, sizeof(limit_s));
        snprintf(a->message, sizeof(a->message),
                 "the oldest queued %s job (%" PRId64 ", team %s) has waited %s, over %s", klass,
                 j->id, j->team, age_s, limit_s);
        str(e, a, "class", klass);
        num(e, a, "job", (double)j->id);
        str(e, a, "team", j->team);
        num(e, a, "age_ms", (double)age);
        num(e, a, "threshold_ms", (double)limit);
    }
}

/* soft_cap: this month's ledger against each soft cap's warning share. */
static void soft_cap(struct eval *e)
{
    const struct tm_snapshot *s = e->in->snap;
    char period[16];

    if (!e->in->cfg->alerts.soft_cap)
        return;
    tm_clock_period(e->in->now_ms, period);
    for (size_t i = 0; i < s->nbudgets; i++) {
        const struct tm_snap_budget *b = &s->budgets[i];
        int64_t spent = 0;
        if (b->hard)
            continue; /* a hard cap is enforced, not warned about */
        for (size_t k = 0; k < s->nspend; k++) {
            const struct tm_snap_spend *x = &s->spend[k];
            if (strcmp(x->period, period) != 0)
                continue; /* the ledger's newest month is not this one yet */
            if (b->org || strcmp(x->team, b->scope) == 0)
                spent += x->cents;
        }
        /* spent >= cap x warn%; a cap of 0 warns on the first cent. */
        if (spent <= 0 || spent * 100 < b->cap_cents * (int64_t)b->warn_percent)
            continue;
        char subject[TM_ID_MAX + 8];
        snprintf(subject, sizeof(subject), "%s:%s", b->org ? "org" : "team", b->scope);
        struct tm_alert *a = add(e, TM_ALERT_SOFT_CAP, subject, "budget", subject);
        if (!a)
            return;
        double pct = b->cap_cents > 0 ? 100.0 * (double)spent / (double)b->cap_cents : 100.0;
        snprintf(a->message, sizeof(a->message),
                 "%s %s spent $%.2f in %s, %.0f%% of its soft cap of $%.2f (warning at %d%%)",
                 b->org ? "org" : "team", b->scope, (double)spent / 100.0, period, pct,
                 (double)b->cap_cents / 100.0, b->warn_percent);
        str(e, a, "scope", subject);
        str(e, a, "period", period);
        num(e, a, "spent_cents", (double)spent);
        num(e, a, "cap_cents", (double)b->cap_cents);
        num(e, a, "warn_percent", b->warn_percent);
    }
}

/* provider_auth: the last list call was refused for our credentials. */
static void provider_auth(struct eval *e)
{
    const struct tm_config *cfg = e->in->cfg;

    if (!cfg->alerts.provider_auth || !e->in->provider_status)
        return;
    for (size_t i = 0; i < cfg->nproviders; i++) {
        if (e->in->provider_status[i] != TM_EAUTH)
            continue;
        const char *name = cfg->providers[i].name;
        struct tm_alert *a = add(e, TM_ALERT_PROVIDER_AUTH, name, "provider", name);
        if (!a)
            return;
        snprintf(a->message, sizeof(a->message),
                 "provider %s (%s) refused our credentials on its last call", name,
                 cfg->providers[i].kind);
        str(e, a, "provider", name);
        str(e, a, "error", tm_err_name(TM_EAUTH));
    }
}

/* gpu_idle: the same idle jobs the pass files gpu_idle decisions for. */
static void gpu_idle(struct eval *e)
{
    const struct tm_snapshot *s = e->in->snap;
    struct tm_idle_job *idle = malloc((s->njobs + 1) * sizeof(*idle));
    size_t n;

    if (!idle) {
        e->err = TM_ENOMEM;
        return;
    }
    n = tm_reconcile_idle_jobs(e->in->cfg, s, idle, s->njobs);
    for (size_t i = 0; i < n; i++) {
        char job[32];
        snprintf(job, sizeof(job), "%lld", (long long)idle[i].job_id);
        struct tm_alert *a = add(e, TM_ALERT_GPU_IDLE, job, "job", job);
        if (!a)
            break;
        snprintf(a->message, sizeof(a->message),
                 "job %s holds %d GPUs on node %lld below %g%% for %lld s (highest %.1f%%)", job,
                 idle[i].ngpus, (long long)idle[i].node_id, e->in->cfg->idle_gpu.threshold_percent,
                 (long long)(idle[i].window_ms / 1000), idle[i].max_util);
        num(e, a, "node", (double)idle[i].node_id);
        num(e, a, "gpus", idle[i].ngpus);
        num(e, a, "max_util_percent", idle[i].max_util);
        num(e, a, "mean_util_percent", idle[i].mean_util);
        num(e, a, "window_ms", (double)idle[i].window_ms);
    }
    free(idle);
}

/* pool_no_show: the pool's run of launches that never enrolled (no_show.c). */
static void pool_no_show(struct eval *e)
{
    const struct tm_config *cfg = e->in->cfg;
    int after = cfg->agent.no_show_alert_after;

    if (after <= 0 || e->in->snap->nno_shows == 0)
        return;
    for (size_t p = 0; p < cfg->npools; p++) {
        struct tm_no_show_hold h;
        tm_reconcile_no_show(cfg, e->in->snap, (int)p, &h);
        if (h.streak < after)
            continue;
        const char *name = cfg->pools[p].name;
        struct tm_alert *a = add(e, TM_ALERT_POOL_NO_SHOW, name, "pool", name);
        if (!a)
            return;
        char backoff[32];
        fmt_duration(h.delay_ms, backoff, sizeof(backoff));
        snprintf(a->message, sizeof(a->message),
                 "pool %s: %d nodes launched in a row never enrolled (no heartbeat before the boot "
                 "allowance ran out; newest node %lld); launches back off (now %s). Check "
                 "agent.controller_url, the firewall between nodes and the controller, and the "
                 "pool's bootstrap", name, h.streak, (long long)h.last_node_id, backoff);
        str(e, a, "pool", name);
        num(e, a, "no_shows", h.streak);
        num(e, a, "alert_after", after);
        num(e, a, "last_node", (double)h.last_node_id);
        num(e, a, "last_given_up_ms", (double)h.last_given_up_ms);
        num(e, a, "backoff_ms", (double)h.delay_ms);
        num(e, a, "held_until_ms", (double)h.until_ms);
    }
}

/* mass_silence: the providers whose silent nodes the pass holds back. */
static void mass_silence(struct eval *e)
{
    const struct tm_config *cfg = e->in->cfg;
    struct tm_mass_silence *ms;

    if (!e->in->pool_real_agent || e->err)
        return;
    ms = calloc(cfg->nproviders + 1, sizeof(*ms));
    if (!ms) {
        e->err = TM_ENOMEM;
        return;
    }
    tm_reconcile_mass_silence(cfg, e->in->snap, e->in->pool_real_agent, NULL, e->in->hearing_since_ms,
                              e->in->now_ms, ms);
    for (size_t i = 0; i < cfg->nproviders; i++) {
        if (!ms[i].held)
            continue;
        const char *name = cfg->providers[i].name;
        struct tm_alert *a = add(e, TM_ALERT_MASS_SILENCE, name, "provider", name);
        if (!a)
            break;
        snprintf(a->message, sizeof(a->message),
                 "%d of the %d nodes of provider %s that have spoken are silent at once: held back "
                 "(none marked unreachable, requeued or terminated); check the network and the API",
                 ms[i].silent, ms[i].heard, name);
        num(e, a, "silent_nodes", ms[i].silent);
        num(e, a, "watched_nodes", ms[i].heard);
        num(e, a, "since_ms", (double)ms[i].since_ms);
    }
    free(ms);
}

int tm_alerts_evaluate(const struct tm_alert_input *in, const struct tm_alert_state *prev,
                       struct tm_alert_set *ret_set, struct tm_alert_state *ret_next)
{
    struct eval e = {.in = in};
    struct tm_alert_state next = {
        .pool_below_since_ms = calloc(in->cfg->npools + 1, sizeof(int64_t)),
        .npools = in->cfg->npools,
    };

    if (!next.pool_below_since_ms)
        return TM_ENOMEM;
    pool_idle(&e, prev, next.pool_below_since_ms);
    queue_age(&e);
    soft_cap(&e);
    provider_auth(&e);
    gpu_idle(&e);
    pool_no_show(&e);
    mass_silence(&e);
    if (e.err) {
        tm_alert_set_release(&e.set);
        tm_alert_state_release(&next);
        return e.err;
    }
    *ret_set = e.set;
    *ret_next = next;
    return 0;
}

cJSON *tm_alert_set_to_json(const struct tm_alert_set *set)
{
    cJSON *arr = cJSON_CreateArray();

    for (size_t i = 0; arr && i < set->n; i++) {
        const struct tm_alert *a = &set->items[i];
        cJSON *o = cJSON_CreateObject();
        cJSON *details = cJSON_Duplicate(a->details, true);
        if (!o || !details || !cJSON_AddItemToArray(arr, o)) {
            cJSON_Delete(o);
            cJSON_Delete(details);
            cJSON_Delete(arr);
            return NULL;
        }
        if (!cJSON_AddItemToObject(o, "details", details)) {
            cJSON_Delete(details);
            cJSON_Delete(arr);
            return NULL;
        }
        if (!cJSON_AddStringToObject(o, "key", a->key) ||
            !cJSON_AddStringToObject(o, "kind", tm_alert_kind_name(a->kind)) ||
            !cJSON_AddStringToObject(o, "subject", a->subject) ||
            !cJSON_AddStringToObject(o, "decision_subject_kind", a->decision_subject_kind) ||
            !cJSON_AddStringToObject(o, "decision_subject_id", a->decision_subject_id) ||
            !cJSON_AddStringToObject(o, "message", a->message)) {
            cJSON_Delete(arr);
            return NULL;
        }
    }
    return arr;
}
