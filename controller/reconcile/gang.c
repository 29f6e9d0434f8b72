/*
 * controller/reconcile/gang.c: a gang's nodes requested as one set (see
 * tm_rc_request_gang in internal.h).
 *
 * The set is all of its node rows in one plan, in one zone, with member
 * tokens that share a stem: the daemon groups the launches by that stem
 * (tm_launch_set_key) and buys them in one all-or-nothing call, and a
 * restart that finds the rows without instances relaunches them together
 * the same way.  The rows are written before any cloud call, as for a
 * single node, so a crash mid-call is repaired by the token tags.
 */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "controller/reconcile/internal.h"
#include "core/err.h"

void tm_rc_request_gang(struct pass *p, const bool *in_model, const char *provider, const char *type,
                        const char *zone,
                        bool spot, bool od_fallback, int32_t count, const char *planner_why,
                        double forecast_gpus, unsigned *seq)
{
    const struct tm_config *cfg = p->cfg;
    char set[TM_ID_MAX], token[TM_ID_MAX], why[512];
    enum tm_capacity_type cap = spot ? TM_CAPACITY_SPOT : TM_CAPACITY_ON_DEMAND;
    int pi = tm_rc_launch_pool_on(p, in_model, provider, type, zone, spot, od_fallback);

    if (pi < 0 || p->live[pi] + count > cfg->pools[pi].max_nodes) {
        snprintf(why, sizeof(why), "no %s pool that lists %s has room for a gang's %d nodes at once; "
                 "not launched in part: %s", spot ? "spot" : "on-demand", type, count, planner_why);
        tm_rc_refuse(p, in_model, spot, "max_nodes", why);
        return;
    }
    if (tm_rc_launch_held(p, pi))
        return; /* the pool's nodes never enrolled: backing off (no_show.c) */
    const struct tm_config_pool *pool = &cfg->pools[pi];
    const struct tm_config_provider *prov = tm_config_provider_find(cfg, pool->provider);
    const struct tm_config_instance_type *t = prov ? tm_config_type_find(prov, type) : NULL;
    if (!t)
        return;
    /* One zone for the whole set: the planner's when the pool lists it,
     * else the pool's next in turn. */
    if (!tm_rc_pool_lists_zone(pool, zone))
        zone = pool->zones[(size_t)p->live[pi] % pool->nzones];
    /* The org's hard cap sees every node of the set before any is asked
     * for: a set it cannot take whole is refused whole. */
    for (int32_t k = 0; k < count; k++)
        if (!tm_rc_launch_admitted(p, pi, t, cap))
            return;
    tm_launch_token(cfg->cluster, pool->name, p->in->now_ms, (*seq)++, set);
    for (int32_t k = 0; k < count && !p->err; k++) {
        tm_launch_member_token(set, (unsigned)k, token);
        snprintf(why, sizeof(why), "%s; member %d of %d, launched as one set; pool %s has %d of max %d "
                 "nodes", planner_why, k + 1, count, pool->name, p->live[pi], pool->max_nodes);
        cJSON *a = tm_rc_request_node_token(p, pi, t, zone, cap, why, forecast_gpus, token);
        cJSON *ins = a ? cJSON_GetObjectItemCaseSensitive(a, "inputs") : NULL;
        tm_rc_put_str(p, ins, "launch_set", set);
        tm_rc_put_num(p, ins, "set_size", count);
        tm_rc_put_num(p, ins, "set_member", k);
    }
}
