/*
 * controller/reconcile/budgets.c: spend against the teams' and the org's
 * caps this month: what is spent and committed, which queued jobs a hard
 * cap holds back, whether the org's cap admits a launch, and the budget
 * notes that explain each.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "controller/reconcile/internal.h"
#include "core/clock.h"
#include "core/err.h"


#define UUSD_PER_CENT 10000

/* The first millisecond of the next calendar month (UTC). */
static int64_t month_end_ms(int64_t ms)
{
    time_t t = (time_t)(ms / 1000);
    struct tm tm;
    gmtime_r(&t, &tm);
    tm.tm_mday = 1;
    tm.tm_hour = tm.tm_min = tm.tm_sec = 0;
    tm.tm_mon += 1;
    return (int64_t)timegm(&tm) * 1000;
}

/* What uusd_per_hour costs over ms, the part that falls in this month. */
static int64_t cost_uusd(const struct pass *p, int64_t uusd_per_hour, int64_t ms)
{
    int64_t left = month_end_ms(p->in->now_ms) - p->in->now_ms;
    if (ms > left)
        ms = left;
    return ms > 0 ? (int64_t)((double)uusd_per_hour * (double)ms / 3600000.0) : 0;
}

static struct team_budget *find_team_budget(struct pass *p, const char *team)
{
    for (size_t i = 0; i < p->nteams; i++)
        if (strcmp(p->teams[i].b->scope, team) == 0)
            return &p->teams[i];
    return NULL;
}

/* The dearest price per GPU-hour among the pools a job may use: what the
 * job costs its team at most (conservative, so a cap is never passed). */
static int64_t job_uusd_per_gpu_hour(const struct pass *p, const struct tm_snap_job *j)
{
    int64_t worst = 0;
    for (size_t pi = 0; pi < p->cfg->npools; pi++) {
        const struct tm_config_pool *pool = &p->cfg->pools[pi];
        if (!tm_rc_pool_accepts(pool, (int)pi, j))
            continue;
        enum tm_capacity_type cap = strcmp(pool->capacity_type, "on_demand") == 0
                                        ? TM_CAPACITY_ON_DEMAND : TM_CAPACITY_SPOT;
        const struct tm_config_instance_type *t = tm_rc_pool_type(p->cfg, pool, cap);
        if (t && t->gpus > 0) {
            int64_t price = cap == TM_CAPACITY_SPOT ? t->spot_uusd_per_hour : t->on_demand_uusd_per_hour;
            if (price / t->gpus > worst)
                worst = price / t->gpus;
        }
    }
    return worst;
}

static void budget_note(struct pass *p, const char *kind, const struct team_budget *tb,
                        int64_t add_uusd, const char *what)
{
    char why[256], period[16];
    tm_clock_period(p->in->now_ms, period);
    snprintf(why, sizeof(why), "%s %s \"%s\" cap $%.2f: spent $%.2f, projected $%.2f%s%s",
             tb->b->hard ? "hard" : "soft", tb->b->org ? "org" : "team", tb->b->scope,
             (double)tb->cap_uusd / 1e6, (double)tb->spent_uusd / 1e6,
             (double)(tb->projected_uusd + add_uusd) / 1e6, what ? "; refused: " : "",
             what ? what : "");
    /* The decision's subject names the cap as the API files its budget_set
     * ("team:vision", "org:acme"), so one filter finds a cap's whole story. */
    char subject[96];
    snprintf(subject, sizeof(subject), "%s:%s", tb->b->org ? "org" : "team", tb->b->scope);
    cJSON *a = tm_rc_action(p, "budget", why);
    tm_rc_put_str(p, a, "kind", kind);
    tm_rc_put_str(p, a, "scope", subject);
    cJSON *in = tm_rc_inputs(p, a);
    tm_rc_put_str(p, in, "period", period);
    tm_rc_put_num(p, in, "cap_cents", (double)tb->b->cap_cents);
    tm_rc_put_num(p, in, "spent_cents", (double)(tb->spent_uusd / UUSD_PER_CENT));
    tm_rc_put_num(p, in, "projected_cents", (double)((tb->projected_uusd + add_uusd) / UUSD_PER_CENT));
    tm_rc_put_num(p, in, "request_cents", (double)(add_uusd / UUSD_PER_CENT));
}

/* A soft cap warns once its projection passes warn_percent (tarmac_apply
 * records one warning per scope and month). */
void tm_rc_budget_warn(struct pass *p, const struct team_budget *tb)
{
    if (!tb->b->hard && tb->projected_uusd * 100 >= tb->cap_uusd * tb->b->warn_percent)
        budget_note(p, "budget_warn", tb, 0, NULL);
}

/* Spent and committed spend against every cap, then admit queued jobs of
 * capped teams in submit order while their projection stays under a hard
 * cap; the others wait this pass (p->job_held), with the numbers. */
void tm_rc_budgets(struct pass *p)
{
    const struct tm_snapshot *s = p->in->snap;
    char period[16];
    size_t nteam = 0;

    tm_clock_period(p->in->now_ms, period);
    p->teams = calloc(s->nbudgets + 1, sizeof(*p->teams));
    if (!p->teams) {
        p->err = TM_ENOMEM;
        return;
    }
    for (size_t i = 0; i < s->nbudgets; i++) {
        struct team_budget *tb = &p->teams[nteam++];
        tb->b = &s->budgets[i];
        tb->cap_uusd = s->budgets[i].cap_cents * UUSD_PER_CENT;
        for (size_t k = 0; k < s->nspend; k++) {
            const struct tm_snap_spend *x = &s->spend[k];
            if (strcmp(x->period, period) != 0)
                continue; /* the ledger's newest month is not this one yet */
            if (tb->b->org || strcmp(x->team, tb->b->scope) == 0)
                tb->spent_uusd += x->cents * UUSD_PER_CENT;
        }
        tb->projected_uusd = tb->spent_uusd;
        if (tb->b->org)
            p->org = tb;
    }
    p->nteams = nteam;

    /* Committed: live nodes to the end of their expected use (the org pays
     * them whatever runs on them); running jobs to their expected end (their
     * team pays its GPU share). */
    for (size_t ni = 0; ni < s->nnodes && p->org; ni++) {
        const struct tm_snap_node *n = &s->nodes[ni];
        if (p->node_gone[ni] || n->state == TM_NODE_TERMINATING || n->pool < 0)
            continue;
        int64_t grace = p->cfg->pools[n->pool].idle_grace_ms;
        int64_t use = n->state == TM_NODE_READY || n->state == TM_NODE_DRAINING ? 0 : TM_RC_DEFAULT_USE_MS;
        if (n->idle_since_ms > 0)
            use = grace - (p->in->now_ms - n->idle_since_ms);
        p->org->projected_uusd += cost_uusd(p, n->price_uusd_per_hour, use > 0 ? use : 0);
    }
    for (size_t ji = 0; ji < s->njobs; ji++) {
        const struct tm_snap_job *j = &s->jobs[ji];
        if (j->state != TM_JOB_RUNNING)
            continue;
        int ni = tm_rc_node_index(p, j->node_id);
        if (ni < 0)
            continue;
        const struct tm_snap_node *n = &s->nodes[ni];
        int64_t e = tm_rc_job_estimate(p->est, j);
        int64_t left = e > 0 ? tm_estimate_remaining(e, p->in->now_ms - j->started_ms) : TM_RC_DEFAULT_USE_MS;
        int64_t share = n->price_uusd_per_hour * tm_rc_job_gpu_milli(j) / ((int64_t)n->gpus * 1000);
        struct team_budget *tb = find_team_budget(p, j->team);
        if (tb && !tb->b->org)
            tb->projected_uusd += cost_uusd(p, share, left);
        if (p->org) /* a busy node runs until its last job ends, then its grace */
            p->org->projected_uusd += cost_uusd(p, share, left);
    }

    /* Admission of queued work against team hard caps, oldest first. */
    for (size_t ji = 0; ji < s->njobs; ji++) {
        const struct tm_snap_job *j = &s->jobs[ji];
        struct team_budget *tb;
        if (j->state != TM_JOB_QUEUED || !(tb = find_team_budget(p, j->team)) || tb->b->org)
            continue;
        int64_t e = tm_rc_job_estimate(p->est, j);
        int64_t cost = cost_uusd(p, job_uusd_per_gpu_hour(p, j) * tm_rc_job_gpu_milli(j) / 1000,
                                 e > 0 ? e : TM_RC_DEFAULT_USE_MS);
        if (tb->b->hard && tb->projected_uusd + cost > tb->cap_uusd) {
            char what[96];
            snprintf(what, sizeof(what), "job %" PRId64 " (about $%.2f) waits", j->id, (double)cost / 1e6);
            budget_note(p, "budget_refuse", tb, cost, what);
            p->job_held[ji] = true;
            p->plan.budget_refused++;
            char why[256];
            snprintf(why, sizeof(why), "budget: team %s would pass its hard cap of $%.2f (projected $%.2f)",
                     j->team, (double)tb->cap_uusd / 1e6, (double)(tb->projected_uusd + cost) / 1e6);
            if (strcmp(why, j->reason) != 0) {
                cJSON *a = tm_rc_action(p, "wait", why);
                tm_rc_put_num(p, a, "job", (double)j->id);
                /* Checked before the quotas: a job its cap holds waits on
                 * the budget whatever its quota says (docs/quotas.md). */
                tm_rc_put_str(p, tm_rc_inputs(p, a), "held_by", "budget");
            }
            continue;
        }
        tb->projected_uusd += cost;
    }
    for (size_t i = 0; i < p->nteams; i++)
        tm_rc_budget_warn(p, &p->teams[i]);
}

/* The org's hard cap: a launch is priced for its boot, the longest work it
 * is for and its idle grace, this month.  false (and a refusal recorded)
 * when it would pass the cap. */
bool tm_rc_launch_admitted(struct pass *p, int pi, const struct tm_config_instance_type *t,
                            enum tm_capacity_type cap)
{
    const struct tm_config_pool *pool = &p->cfg->pools[pi];
    int64_t price = cap == TM_CAPACITY_SPOT ? t->spot_uusd_per_hour : t->on_demand_uusd_per_hour;
    int64_t use = p->pool_use_ms[pi] > 0 ? p->pool_use_ms[pi] : TM_RC_DEFAULT_USE_MS;
    int64_t launch = cost_uusd(p, price, tm_rc_pool_boot_ms(p->cfg, pool) + use + pool->idle_grace_ms);
    if (p->org && p->org->b->hard && p->org->projected_uusd + launch > p->org->cap_uusd) {
        char what[96];
        snprintf(what, sizeof(what), "a %s node for pool %s (about $%.2f)", t->name, pool->name,
                 (double)launch / 1e6);
        budget_note(p, "budget_refuse", p->org, launch, what);
        p->plan.budget_refused++;
        return false;
    }
    if (p->org)
        p->org->projected_uusd += launch;
    return true;
}
