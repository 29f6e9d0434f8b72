/*
 * controller/reconcile/route.c: where new capacity comes from: the pool a
 * queued job's capacity is asked of, the GPUs it asks, the config pool a
 * launch the planner chose goes to, and the request_node op that records
 * the launch.
 */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "controller/reconcile/internal.h"
#include "core/err.h"

/* The pool a queued job's new capacity comes from: preemptible work
 * prefers spot, then spot-then-on-demand, then on-demand; other work only
 * on-demand (tm_rc_pool_accepts).  -1 when no pool takes it. */
int tm_rc_job_route(const struct tm_config *cfg, const struct tm_snap_job *j)
{
    int best = -1, best_rank = 99;
    for (size_t pi = 0; pi < cfg->npools; pi++) {
        const struct tm_config_pool *pool = &cfg->pools[pi];
        if (!tm_rc_pool_accepts(pool, (int)pi, j))
            continue;
        int rank = strcmp(pool->capacity_type, "spot") == 0 ? 0
                   : strcmp(pool->capacity_type, "spot_then_on_demand") == 0 ? 1 : 2;
        if (!j->preemptible)
            rank = 0;
        /* In a pool group of owned and cloud pools, new capacity is the
         * clouds' whatever the pools' order (an owned pool buys nothing);
         * the burst rule (burst.c) says whether the job waits instead. */
        bool cloud_over_owned = rank == best_rank && best >= 0 && cfg->pools[best].owned &&
                                !pool->owned && pool->group && cfg->pools[best].group &&
                                strcmp(pool->group, cfg->pools[best].group) == 0;
        if (rank < best_rank || cloud_over_owned) {
            best_rank = rank;
            best = (int)pi;
        }
    }
    return best;
}

bool tm_reconcile_pool_gets_preemptible(const struct tm_config *cfg, size_t pi)
{
    const struct tm_config_pool *pool = &cfg->pools[pi];

    if (!tm_rc_pool_is_od(pool))
        return true;
    for (size_t k = 0; k < cfg->npools; k++)
        if (k != pi && !tm_rc_pool_is_od(&cfg->pools[k]) &&
            strcmp(cfg->pools[k].gpu_model, pool->gpu_model) == 0)
            return false;
    return true;
}

/* GPUs a queued job asks of pool pi, in milli-GPU: a whole node per gang
 * member or full-node job, else its GPUs or share. */
int64_t tm_rc_job_ask_milli(const struct tm_config_pool *pool, const struct tm_snap_job *j)
{
    if (j->nodes > 1 || j->gpus == pool->gpus_per_node)
        return (int64_t)j->nodes * pool->gpus_per_node * 1000;
    return j->gpus > 0 ? (int64_t)j->gpus * 1000 : j->gpu_milli;
}

int tm_reconcile_job_pool(const struct tm_config *cfg, const struct tm_snap_job *j)
{
    return tm_rc_job_route(cfg, j);
}

void tm_reconcile_pool_demand(const struct tm_config *cfg, const struct tm_snapshot *snap,
                              double *out)
{
    for (size_t pi = 0; pi < cfg->npools; pi++)
        out[pi] = 0;
    for (size_t ji = 0; ji < snap->njobs; ji++) {
        const struct tm_snap_job *j = &snap->jobs[ji];
        int pi = -1;
        if (j->state == TM_JOB_QUEUED) {
            pi = tm_rc_job_route(cfg, j);
        } else if (j->state == TM_JOB_RUNNING) {
            /* nodes are sorted by id */
            size_t lo = 0, hi = snap->nnodes;
            while (lo < hi) {
                size_t mid = lo + (hi - lo) / 2;
                if (snap->nodes[mid].id < j->node_id)
                    lo = mid + 1;
                else
                    hi = mid;
            }
            if (lo < snap->nnodes && snap->nodes[lo].id == j->node_id)
                pi = snap->nodes[lo].pool;
        }
        if (pi >= 0 && (size_t)pi < cfg->npools)
            out[pi] += (double)tm_rc_job_gpu_milli(j) / 1000.0;
    }
}

static bool pool_lists_type(const struct tm_config_pool *pool, const char *type)
{
    for (size_t i = 0; i < pool->ninstance_types; i++)
        if (strcmp(pool->instance_types[i], type) == 0)
            return true;
    return false;
}

bool tm_rc_pool_lists_zone(const struct tm_config_pool *pool, const char *zone)
{
    for (size_t i = 0; i < pool->nzones; i++)
        if (strcmp(pool->zones[i], zone) == 0)
            return true;
    return false;
}

/* A launch the planner chose, on a config pool of its model: one listing
 * the type with that capacity type and room under max_nodes, preferring
 * one listing the zone.  -1 when every such pool is full. */
int tm_rc_launch_pool(struct pass *p, const bool *in_model, const char *type, const char *zone,
                       bool spot, bool fallback_od)
{
    return tm_rc_launch_pool_on(p, in_model, NULL, type, zone, spot, fallback_od);
}

/* The same, on pools of one cloud only (provider NULL or "": any): in a
 * pool group two clouds may both sell a type of that name. */
int tm_rc_launch_pool_on(struct pass *p, const bool *in_model, const char *provider, const char *type,
                         const char *zone, bool spot, bool fallback_od)
{
    int best = -1;
    for (int pass = 0; pass < 2 && best < 0; pass++) {
        /* on-demand launches go to on_demand pools only (non-preemptible
         * work never runs in a spot pool); the fallback of preemptible work
         * (spot short everywhere, named so in the planner's reason) goes to
         * spot_then_on_demand pools, then on_demand ones */
        for (size_t pi = 0; pi < p->cfg->npools; pi++) {
            const struct tm_config_pool *pool = &p->cfg->pools[pi];
            bool od = tm_rc_pool_is_od(pool);
            bool fallback = strcmp(pool->capacity_type, "spot_then_on_demand") == 0;
            if (!in_model[pi] || !pool_lists_type(pool, type) || p->live[pi] >= pool->max_nodes)
                continue;
            if (provider && provider[0] && strcmp(pool->provider, provider) != 0)
                continue;
            if (spot ? od : (pass == 0 && fallback_od ? !fallback : !od))
                continue;
            if (tm_rc_pool_lists_zone(pool, zone))
                return (int)pi;
            if (best < 0)
                best = (int)pi;
        }
        if (spot || !fallback_od)
            break;
    }
    return best;
}

cJSON *tm_rc_request_node(struct pass *p, int pi, const struct tm_config_instance_type *t,
                          const char *zone, enum tm_capacity_type cap, const char *why,
                          double forecast_gpus, unsigned *seq)
{
    char token[TM_ID_MAX];

    tm_launch_token(p->cfg->cluster, p->cfg->pools[pi].name, p->in->now_ms, (*seq)++, token);
    return tm_rc_request_node_token(p, pi, t, zone, cap, why, forecast_gpus, token);
}

cJSON *tm_rc_request_node_token(struct pass *p, int pi, const struct tm_config_instance_type *t,
                                const char *zone, enum tm_capacity_type cap, const char *why,
                                double forecast_gpus, const char *token)
{
    const struct tm_config *cfg = p->cfg;
    const struct tm_config_pool *pool = &cfg->pools[pi];
    int64_t price = cap == TM_CAPACITY_SPOT ? t->spot_uusd_per_hour : t->on_demand_uusd_per_hour;

    cJSON *a = tm_rc_action(p, "request_node", why);
    tm_rc_put_str(p, a, "pool", pool->name);
    tm_rc_put_str(p, a, "token", token);
    tm_rc_put_str(p, a, "zone", zone);
    tm_rc_put_str(p, a, "instance_type", t->name);
    tm_rc_put_num(p, a, "gpus", t->gpus);
    tm_rc_put_str(p, a, "gpu_model", t->gpu_model);
    tm_rc_put_num(p, a, "cpu_milli", (double)t->cpu_milli);
    tm_rc_put_num(p, a, "memory_mib", (double)t->memory_mib);
    tm_rc_put_str(p, a, "capacity_type", tm_capacity_type_name(cap));
    tm_rc_put_num(p, a, "price_uusd_per_hour", (double)price);
    cJSON *in = tm_rc_inputs(p, a);
    tm_rc_put_num(p, in, "demand_gpus", (double)p->demand_milli[pi] / 1000.0);
    tm_rc_put_num(p, in, "pending_gpus", (double)p->pending_milli[pi] / 1000.0);
    tm_rc_put_num(p, in, "live_nodes", p->live[pi]);
    tm_rc_put_num(p, in, "max_nodes", pool->max_nodes);
    if (forecast_gpus >= 0)
        tm_rc_put_num(p, in, "forecast_gpus", forecast_gpus);
    tm_rc_add_launch(p, 0, token, pi, t->name, zone, cap);
    p->live[pi]++;
    p->plan.requested++;
    return a;
}
