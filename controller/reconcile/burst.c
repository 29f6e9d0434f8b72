/*
 * controller/reconcile/burst.c: owned first, the clouds for the overflow.
 * Between the scheduler and the cloud planner, each queued job the
 * scheduler did not place, of a pool group holding owned and cloud pools,
 * whose shape an owned pool of the group takes, is put to the group's
 * burst rule (controller/fleet/burst.h, the function the elastic replay
 * runs): a job the rule keeps waiting is left out of the cloud planner's
 * backlog and its wait reason says so; a job it bursts goes to the
 * planner as before (preemptible work to spot, tm_rc_job_route), and the
 * launch names the burst.
 *
 * The projected owned start is the scheduler's own estimate when it gives
 * one: the start of the reservation it made for the job on an owned node
 * (schedule.c records it).  A job it reserved nothing for gets the earliest
 * time enough owned nodes of the group have room for it as their running
 * jobs reach their expected ends (the estimator's remaining time).  That
 * fallback counts neither work placed this pass nor the queued work ahead
 * of the job, so it is early: it errs towards waiting, which the
 * starvation bound and a deadline still cap (the rule bursts past them).
 * A group with no owned node joined gives no start, and the cost rule
 * bursts.
 *
 * The offer is the group's cloud pools that take the job, from the
 * instance types the configuration describes (the table the planner's is
 * built from): the cheapest on-demand and spot price per GPU-hour of a
 * type holding the job's GPUs per node, and the longest boot.  Shortages
 * the planner knows of are not weighed here.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "controller/reconcile/internal.h"
#include "core/err.h"

/* Most allocations read on one node for the fallback estimate. */
#define BURST_NODE_ALLOCS 64

/* The job's pool group when it holds owned and cloud pools and one of its
 * owned pools takes the job; NULL otherwise (the rule does not apply). */
static const char *burst_group(const struct tm_config *cfg, const struct tm_snap_job *j, int route)
{
    const char *g = route >= 0 ? cfg->pools[route].group : NULL;
    bool owned = false, cloud = false;

    if (!g)
        return NULL;
    for (size_t pi = 0; pi < cfg->npools; pi++) {
        const struct tm_config_pool *pool = &cfg->pools[pi];
        if (!pool->group || strcmp(pool->group, g) != 0)
            continue;
        if (pool->owned)
            owned = owned || tm_rc_pool_accepts(pool, (int)pi, j);
        else
            cloud = true;
    }
    return owned && cloud ? g : NULL;
}

/* The group's cloud offer for job j. */
static void burst_offer(const struct tm_config *cfg, const char *g, const struct tm_snap_job *j,
                        struct tm_burst_offer *o)
{
    memset(o, 0, sizeof(*o));
    for (size_t pi = 0; pi < cfg->npools; pi++) {
        const struct tm_config_pool *pool = &cfg->pools[pi];
        const struct tm_config_provider *prov = tm_config_provider_find(cfg, pool->provider);
        bool od = tm_rc_pool_is_od(pool) || strcmp(pool->capacity_type, "spot_then_on_demand") == 0;
        bool spot = !tm_rc_pool_is_od(pool);
        if (pool->owned || !pool->group || strcmp(pool->group, g) != 0 || !prov ||
            !tm_rc_pool_accepts(pool, (int)pi, j))
            continue;
        if (tm_rc_pool_boot_ms(cfg, pool) > o->boot_ms)
            o->boot_ms = tm_rc_pool_boot_ms(cfg, pool);
        for (size_t k = 0; k < pool->ninstance_types; k++) {
            const struct tm_config_instance_type *t = tm_config_type_find(prov, pool->instance_types[k]);
            if (!t || t->gpus <= 0 || t->gpus < j->gpus)
                continue;
            double odp = (double)t->on_demand_uusd_per_hour / 1e6 / t->gpus;
            double sp = (double)t->spot_uusd_per_hour / 1e6 / t->gpus;
            if (od && odp > 0 && (o->on_demand_per_gpu_hour <= 0 || odp < o->on_demand_per_gpu_hour))
                o->on_demand_per_gpu_hour = odp;
            if (spot && sp > 0 && (o->spot_per_gpu_hour <= 0 || sp < o->spot_per_gpu_hour))
                o->spot_per_gpu_hour = sp;
        }
    }
}

/* When owned node ni has need_milli free, from its running jobs' expected
 * ends; TM_BURST_NO_START when it never will (too small). */
static int64_t burst_node_start(const struct pass *p, size_t ni, int64_t need_milli)
{
    const struct tm_snapshot *s = p->in->snap;
    const struct tm_snap_node *n = &s->nodes[ni];
    int64_t end[BURST_NODE_ALLOCS], milli[BURST_NODE_ALLOCS], free_milli = (int64_t)n->gpus * 1000;
    size_t lo, hi, na = 0;

    if (free_milli < need_milli)
        return TM_BURST_NO_START;
    tm_rc_allocs_on_node(p, n->id, &lo, &hi);
    for (size_t k = lo; k < hi && na < BURST_NODE_ALLOCS; k++) {
        const struct tm_snap_alloc *al = &s->allocs[p->alloc_nodes[k].index];
        int ji = tm_rc_job_index(p, al->job_id);
        const struct tm_snap_job *j = ji >= 0 ? &s->jobs[ji] : NULL;
        int64_t e = j ? tm_rc_job_estimate(p->est, j) : 0;
        int64_t m = al->gpu_mask ? (int64_t)__builtin_popcount(al->gpu_mask) * 1000 : al->gpu_milli;
        int64_t left = j && e > 0 ? tm_estimate_remaining(e, p->in->now_ms - j->started_ms)
                                  : TM_RC_DEFAULT_USE_MS;
        size_t at = na++;
        /* insertion by end: a node holds a handful of jobs */
        while (at > 0 && end[at - 1] > p->in->now_ms + left) {
            end[at] = end[at - 1];
            milli[at] = milli[at - 1];
            at--;
        }
        end[at] = p->in->now_ms + left;
        milli[at] = m;
        free_milli -= m;
    }
    if (free_milli >= need_milli)
        return p->in->now_ms;
    for (size_t k = 0; k < na; k++) {
        free_milli += milli[k];
        if (free_milli >= need_milli)
            return end[k];
    }
    return TM_BURST_NO_START;
}

/* The fallback projection depends on the group and the job's shape
 * only: a queue of many jobs of few shapes reads the owned nodes once per
 * shape.  (A job pinned to a pool, or of a model named differently, is
 * its own shape.) */
#define BURST_CACHE 16
struct burst_cache {
    struct {
        const char *group;
        int64_t need_milli;
        int32_t nodes, pool;
        const char *gpu_model;
        int64_t start;
    } e[BURST_CACHE];
    size_t n;
};

static int64_t *burst_cache_find(struct burst_cache *c, const char *g, const struct tm_snap_job *j,
                                 int64_t need)
{
    for (size_t k = 0; c && k < c->n; k++)
        if (c->e[k].group == g && c->e[k].need_milli == need && c->e[k].nodes == j->nodes &&
            c->e[k].pool == j->pool && strcmp(c->e[k].gpu_model, j->gpu_model) == 0)
            return &c->e[k].start;
    return NULL;
}

static void burst_cache_add(struct burst_cache *c, const char *g, const struct tm_snap_job *j,
                            int64_t need, int64_t start)
{
    if (!c || c->n == BURST_CACHE)
        return;
    c->e[c->n].group = g;
    c->e[c->n].need_milli = need;
    c->e[c->n].nodes = j->nodes;
    c->e[c->n].pool = j->pool;
    c->e[c->n].gpu_model = j->gpu_model;
    c->e[c->n++].start = start;
}

/* The fallback projection of job j of group g (see the top). */
static int64_t burst_owned_fallback(const struct pass *p, const struct tm_snap_job *j, const char *g,
                                    int64_t need)
{
    const struct tm_snapshot *s = p->in->snap;
    int64_t starts[64];
    size_t ns = 0;
    int32_t want = j->nodes > 1 ? j->nodes : 1;

    for (size_t ni = 0; ni < s->nnodes; ni++) {
        const struct tm_snap_node *n = &s->nodes[ni];
        if (n->pool < 0 || p->node_gone[ni] || n->state != TM_NODE_READY || n->cordoned)
            continue;
        const struct tm_config_pool *pool = &p->cfg->pools[n->pool];
        if (!pool->owned || !pool->group || strcmp(pool->group, g) != 0 ||
            !tm_rc_pool_accepts(pool, n->pool, j))
            continue;
        int64_t st = burst_node_start(p, ni, need);
        if (st == TM_BURST_NO_START)
            continue;
        /* keep the `want` earliest, sorted */
        size_t at = ns < (size_t)want && ns < 64 ? ns++ : ns;
        if (at == ns && (ns == 0 || st >= starts[ns - 1]))
            continue;
        if (at == ns)
            at = ns - 1;
        while (at > 0 && starts[at - 1] > st) {
            starts[at] = starts[at - 1];
            at--;
        }
        starts[at] = st;
    }
    return ns >= (size_t)want && want <= 64 ? starts[want - 1] : TM_BURST_NO_START;
}

/* The projected owned start of job ji of group g: the scheduler's
 * reservation, else the fallback (cached per shape in c, NULL: none). */
static int64_t burst_owned_start(const struct pass *p, size_t ji, const char *g, struct burst_cache *c)
{
    const struct tm_snap_job *j = &p->in->snap->jobs[ji];
    int64_t need = j->gpus > 0 ? (int64_t)j->gpus * 1000 : j->gpu_milli;

    if (p->job_owned_start[ji] > 0)
        return p->job_owned_start[ji];
    int64_t *hit = burst_cache_find(c, g, j, need);
    if (hit)
        return *hit;
    int64_t start = burst_owned_fallback(p, j, g, need);
    burst_cache_add(c, g, j, need, start);
    return start;
}

/* Decide for job ji; false when the rule does not apply to it. */
static bool burst_decide(const struct pass *p, size_t ji, struct burst_cache *c,
                         struct tm_burst_decision *d)
{
    const struct tm_config *cfg = p->cfg;
    const struct tm_snap_job *j = &p->in->snap->jobs[ji];
    const char *g = burst_group(cfg, j, tm_rc_job_route(cfg, j));
    const struct tm_config_pool_group *pg = tm_config_pool_group_find(cfg, g);
    struct tm_burst_params bp;
    struct tm_burst_offer o;

    if (!g)
        return false;
    tm_burst_params_default(&bp);
    if (pg) {
        bp.rule = pg->burst_rule == TM_CONFIG_BURST_NEVER ? TM_BURST_NEVER
                  : pg->burst_rule == TM_CONFIG_BURST_AFTER ? TM_BURST_AFTER : TM_BURST_COST;
        bp.after_ms = pg->burst_after_ms;
        bp.wait_value_per_hour = (double)pg->wait_value_uusd_per_hour / 1e6;
    }
    bp.starvation_ms = cfg->starvation_ms;
    burst_offer(cfg, g, j, &o);
    /* No price for any fitting type (on_demand_price: "0"): nothing to
     * weigh the wait against, and burst.h would keep the job waiting for
     * good; it goes to the clouds as without a rule, unless the rule is
     * never. */
    if (o.on_demand_per_gpu_hour <= 0 && o.spot_per_gpu_hour <= 0 && bp.rule != TM_BURST_NEVER)
        return false;
    int64_t e = tm_rc_job_estimate(p->est, j);
    struct tm_burst_job bj = {
        .gpus = (j->gpus > 0 ? j->gpus : 1) * (j->nodes > 1 ? j->nodes : 1),
        .submit_ms = j->submitted_ms, .estimate_ms = e > 0 ? e : TM_RC_DEFAULT_USE_MS,
        .deadline_ms = j->deadline_ms, .preemptible = j->preemptible};
    tm_burst_decide(&bp, &bj, p->in->now_ms, burst_owned_start(p, ji, g, c), &o, d);
    return true;
}

/* Later in the pass (the wait reason, the launch) the decision is made
 * again from the projection tm_rc_burst kept in p->job_owned_start: the
 * same answer, without reading the nodes again. */
bool tm_rc_burst_explain(const struct pass *p, size_t ji, struct tm_burst_decision *d)
{
    return burst_decide(p, ji, NULL, d);
}

void tm_rc_burst(struct pass *p, const bool *job_placed)
{
    const struct tm_snapshot *s = p->in->snap;
    struct tm_burst_decision d;
    struct burst_cache cache = {.n = 0};

    for (size_t ji = 0; ji < s->njobs && !p->err; ji++) {
        const struct tm_snap_job *j = &s->jobs[ji];
        if (j->state != TM_JOB_QUEUED || job_placed[ji] || p->job_held[ji])
            continue;
        if (!burst_decide(p, ji, &cache, &d))
            continue;
        p->job_burst[ji] = (uint8_t)(1 + d.choice);
        /* no start is kept as INT64_MAX (TM_BURST_NO_START), which is > 0 */
        p->job_owned_start[ji] = d.owned_start_ms;
    }
}

bool tm_rc_burst_waits(const struct pass *p, size_t ji)
{
    return p->job_burst[ji] == 1 + TM_BURST_WAIT;
}

/* The wait reason of a job the rule keeps waiting: the projected start as
 * a date (not "in N s"), so that the reason, recorded when it changes,
 * stays the same from tick to tick while the projection does. */
int64_t tm_rc_burst_wait_why(const struct pass *p, size_t ji, char *why, size_t size)
{
    struct tm_burst_decision d;
    char when[32] = "none";

    if (!tm_rc_burst_explain(p, ji, &d))
        return TM_BURST_NO_START;
    if (d.owned_start_ms != TM_BURST_NO_START) {
        time_t t = (time_t)(d.owned_start_ms / 1000);
        struct tm tmv;
        if (gmtime_r(&t, &tmv))
            strftime(when, sizeof(when), "%Y-%m-%dT%H:%M:%SZ", &tmv);
    }
    const char *rest = strstr(d.reason, "; ");
    snprintf(why, size, "waiting for owned capacity: projected owned start %s%s", when,
             rest ? rest : "");
    return d.owned_start_ms;
}

/* The jobs the rule sent to the clouds, of one planner pass's pools:
 * counted once per pass, not once per launch. */
void tm_rc_burst_model(const struct pass *p, const bool *in_model, struct rc_burst_model *bm)
{
    const struct tm_snapshot *s = p->in->snap;

    bm->first = -1;
    bm->n = 0;
    for (size_t k = 0; k < s->njobs; k++) {
        int route;
        if (p->job_burst[k] <= 1 + TM_BURST_WAIT)
            continue;
        route = tm_rc_job_route(p->cfg, &s->jobs[k]);
        if (route < 0 || !in_model[route])
            continue;
        bm->n++;
        if (bm->first < 0)
            bm->first = (int)k;
    }
}

/* Append the burst of the job behind a launch (snapshot job index ji, or
 * -1: the first bursting job of the pass's pools) to why; returns the job
 * named, -1 when none. */
int tm_rc_burst_launch_why(const struct pass *p, const struct rc_burst_model *bm, int ji, char *why,
                           size_t size)
{
    struct tm_burst_decision d;

    if (bm->n == 0)
        return -1;
    if (ji < 0 || p->job_burst[ji] <= 1 + TM_BURST_WAIT)
        ji = bm->first;
    if (ji < 0 || !tm_rc_burst_explain(p, (size_t)ji, &d))
        return -1;
    size_t len = strlen(why);
    if (len < size)
        snprintf(why + len, size - len, "; job %" PRId64 ": %s%s", p->in->snap->jobs[ji].id, d.reason,
                 bm->n > 1 ? " (and more bursting jobs of the group)" : "");
    return ji;
}

/* The launch's inputs: the burst's job, reason, price and projection. */
void tm_rc_burst_launch_inputs(struct pass *p, int ji, cJSON *a)
{
    struct tm_burst_decision d;
    cJSON *ins = a ? cJSON_GetObjectItemCaseSensitive(a, "inputs") : NULL;

    if (ji < 0 || !ins || !tm_rc_burst_explain(p, (size_t)ji, &d))
        return;
    tm_rc_put_num(p, ins, "burst_job", (double)p->in->snap->jobs[ji].id);
    tm_rc_put_str(p, ins, "burst_reason", d.reason);
    tm_rc_put_num(p, ins, "burst_price_per_hour", d.price_per_hour);
    if (d.owned_start_ms != TM_BURST_NO_START)
        tm_rc_put_num(p, ins, "projected_owned_start_ms", (double)d.owned_start_ms);
}
