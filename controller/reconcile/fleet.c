/*
 * controller/reconcile/fleet.c: step 3 of the pass, the adapter to
 * controller/fleet/planner.c: per GPU model, the planner's input built
 * from the snapshot, its launches and releases mapped to config pools and
 * plan ops (its other actions go to moves.c), then pool minimums and the
 * release of drained, noticed and idle cordoned nodes.
 */
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "controller/reconcile/internal.h"
#include "controller/fleet/offers.h"
#include "controller/fleet/planner.h"
#include "controller/fleet/prices.h"
#include "core/err.h"

/* ---- growth and release: the planner ------------------------------------ */

/* Launches and releases come from tm_planner_run (controller/fleet/planner.c), the
 * function the elastic replay runs, once per GPU model: its on-demand side
 * is the model's on_demand pools, its spot side the spot and
 * spot_then_on_demand pools (the latter allow on-demand fallback).  Each
 * launch is mapped back to a config pool of that capacity type listing the
 * chosen instance type; pool max and min, idle grace and the org's hard
 * cap are checked here per config pool. */

static int zone_index(struct tm_price_table *pr, const char *zone, bool add)
{
    for (size_t z = 0; z < pr->nzones; z++)
        if (strcmp(pr->zones[z], zone) == 0)
            return (int)z;
    if (!add || pr->nzones == TM_PRICES_ZONES_MAX)
        return -1;
    snprintf(pr->zones[pr->nzones], TM_PRICES_NAME_MAX, "%s", zone);
    return (int)pr->nzones++;
}

/* A type is one cloud's: in a pool group two clouds may sell a type of
 * the same name, at different prices. */
static int type_find(const struct tm_price_table *pr, const char *provider, const char *name)
{
    for (size_t i = 0; i < pr->ntypes; i++)
        if (strcmp(pr->types[i].name, name) == 0 && strcmp(pr->types[i].provider, provider) == 0)
            return (int)i;
    return -1;
}

static int type_index(struct tm_price_table *pr, const char *provider,
                      const struct tm_config_instance_type *t)
{
    int i = type_find(pr, provider, t->name);
    if (i >= 0 || pr->ntypes == TM_PRICES_TYPES_MAX)
        return i;
    struct tm_price_type *x = &pr->types[pr->ntypes];
    snprintf(x->name, sizeof(x->name), "%s", t->name);
    snprintf(x->provider, sizeof(x->provider), "%s", provider);
    snprintf(x->gpu_model, sizeof(x->gpu_model), "%s", t->gpu_model);
    x->gpus = t->gpus;
    x->cpu_milli = t->cpu_milli;
    x->memory_mib = t->memory_mib;
    x->on_demand_uusd_per_hour = t->on_demand_uusd_per_hour;
    x->spot_uusd_per_hour = t->spot_uusd_per_hour;
    return (int)pr->ntypes++;
}

/* The planner's spot hazard per (type, zone) of one model, from the
 * tables the configuration loaded (tm_config_spot_hazard: a fitted cell,
 * else its pool's spot_hazard).  Only when some spot pool of the model
 * has a table: without one the planner gets none and zones take turns
 * (nothing says one is better).  A cell no spot pool offers is HUGE_VAL, so the planner never
 * prefers it to a zone a pool lists; a cell two pools offer takes the
 * first's, as tm_rc_launch_pool prefers the first. */
static void fleet_zone_hazards(struct pass *p, const bool *in_model, struct fleet *f)
{
    const struct tm_config *cfg = p->cfg;
    size_t nz = f->pr.nzones ? f->pr.nzones : 1;

    f->zone_hazards = false;
    for (size_t pi = 0; pi < cfg->npools; pi++) {
        const struct tm_config_provider *prov = tm_config_provider_find(cfg, cfg->pools[pi].provider);
        if (in_model[pi] && !tm_rc_pool_is_od(&cfg->pools[pi]) && prov && prov->spot_hazards)
            f->zone_hazards = true;
    }
    if (!f->zone_hazards)
        return;
    for (size_t k = 0; k < f->pr.ntypes * nz; k++)
        f->spot_zone_hazard[k] = HUGE_VAL;
    for (size_t pi = 0; pi < cfg->npools; pi++) {
        const struct tm_config_pool *pool = &cfg->pools[pi];
        if (!in_model[pi] || tm_rc_pool_is_od(pool))
            continue;
        for (size_t k = 0; k < pool->ninstance_types; k++) {
            int ti = type_find(&f->pr, pool->provider, pool->instance_types[k]);
            for (size_t z = 0; ti >= 0 && z < pool->nzones; z++) {
                int zi = zone_index(&f->pr, pool->zones[z], false);
                double *cell = zi >= 0 ? &f->spot_zone_hazard[(size_t)ti * nz + (size_t)zi] : NULL;
                if (cell && *cell == HUGE_VAL)
                    *cell = tm_config_spot_hazard(cfg, pool, pool->instance_types[k], pool->zones[z], NULL);
            }
        }
    }
}

/* The (type, zone, capacity) cells no pool of the model offers, as
 * shortages that never end: the table joins every pool's types and
 * zones, and without these a type of one cloud (or one pool) could be
 * planned in another's zone, where its launch would be sent to the
 * pool's own zones and meet the same shortage again.  Spot cells come
 * from spot and spot_then_on_demand pools, on-demand cells from
 * on_demand and spot_then_on_demand pools. */
static void fleet_unoffered(struct pass *p, const bool *in_model, struct fleet *f)
{
    const struct tm_config *cfg = p->cfg;
    size_t nz = f->pr.nzones ? f->pr.nzones : 1;
    bool offered[2][TM_PRICES_TYPES_MAX * TM_PRICES_ZONES_MAX];

    memset(offered, 0, sizeof(offered));
    for (size_t pi = 0; pi < cfg->npools; pi++) {
        const struct tm_config_pool *pool = &cfg->pools[pi];
        bool od = tm_rc_pool_is_od(pool);
        bool both = strcmp(pool->capacity_type, "spot_then_on_demand") == 0;
        if (!in_model[pi])
            continue;
        for (size_t k = 0; k < pool->ninstance_types; k++) {
            int ti = type_find(&f->pr, pool->provider, pool->instance_types[k]);
            for (size_t z = 0; ti >= 0 && z < pool->nzones; z++) {
                int zi = f->pr.nzones ? zone_index(&f->pr, pool->zones[z], false) : 0;
                if (zi < 0)
                    continue;
                if (!od)
                    offered[1][(size_t)ti * nz + (size_t)zi] = true;
                if (od || both)
                    offered[0][(size_t)ti * nz + (size_t)zi] = true;
            }
        }
    }
    for (int spot = 0; spot < 2; spot++)
        for (size_t ti = 0; ti < f->pr.ntypes; ti++)
            for (size_t z = 0; z < nz; z++)
                if (!offered[spot][ti * nz + z])
                    f->shortages[f->nshortages++] = (struct tm_planner_shortage){
                        (int32_t)ti, (int32_t)z, spot == 1, INT64_MAX};
}

/* The live mapper: every live node of the model's pools, each allocation
 * on one as a hold, and the queued work no node took this pass routed to
 * the model's pools as an ask.  What only the live world knows is decided
 * here: which nodes are leaving, each node's grace, the pool's word on
 * restarts, the estimates and a queued job's shape in its pool. */
static void fleet_view(struct pass *p, const bool *in_model, const bool *job_placed, struct fleet *f,
                       int64_t grace_max)
{
    const struct tm_snapshot *s = p->in->snap;
    const struct tm_config *cfg = p->cfg;

    for (size_t ni = 0; ni < s->nnodes; ni++) {
        const struct tm_snap_node *n = &s->nodes[ni];
        if (n->pool < 0 || !in_model[n->pool] || p->node_gone[ni] || n->state == TM_NODE_TERMINATING)
            continue;
        const struct tm_config_pool *pool = &cfg->pools[n->pool];
        const struct tm_config_provider *prov = tm_config_provider_find(cfg, pool->provider);
        const struct tm_config_instance_type *t = prov ? tm_config_type_find(prov, n->instance_type) : NULL;
        int ti = t ? type_index(&f->pr, pool->provider, t) : -1;
        int zi = zone_index(&f->pr, n->zone, true);
        if (ti < 0)
            continue;
        f->plan_of[ni] = (int32_t)f->nnodes;
        f->vnodes[f->nnodes] = (struct tm_plan_view_node){
            .id = n->id, .type = ti, .zone = zi < 0 ? 0 : zi,
            .spot = n->capacity == TM_CAPACITY_SPOT, .ready = n->state == TM_NODE_READY,
            /* A node a spot substitute will replace stays in: it still
             * holds its work, and counting it out would launch on-demand
             * capacity for that work ahead of the forecast.  The mapping
             * keeps it from a second substitution or a move.  A cordoned
             * node is released by tm_rc_run_planner past its grace, not
             * by the planner. */
            .leaving = p->node_noticed[ni] || n->state == TM_NODE_DRAINING || n->cordoned,
            .cordoned = n->cordoned, .restart_allowed = pool->consolidate_restart,
            /* work placed this pass is not known here (schedule.c) */
            .placed = p->node_placed[ni],
            /* One grace per planner pass: shift each node's idle start so
             * that it passes the planner's grace when it passes its pool's. */
            .idle_since_ms = (n->idle_since_ms > 0 ? n->idle_since_ms : p->in->now_ms) -
                             (grace_max - pool->idle_grace_ms),
        };
        f->node_of[f->nnodes++] = (int32_t)ni;
    }
    /* Running jobs (allocations) hold the nodes.  A job the snapshot does
     * not describe is held as one that may not be stopped. */
    for (size_t a = 0; a < s->nallocs; a++) {
        const struct tm_snap_alloc *al = &s->allocs[a];
        int ni = tm_rc_node_index(p, al->node_id);
        int ji = tm_rc_job_index(p, al->job_id);
        if (ni < 0 || f->plan_of[ni] < 0)
            continue;
        const struct tm_snap_job *j = ji >= 0 ? &s->jobs[ji] : NULL;
        int64_t e = j ? tm_rc_job_estimate(p->est, j) : 0;
        f->vjobs[f->nvjobs++] = (struct tm_plan_view_job){
            .id = al->job_id, .node = f->plan_of[ni], .gpu_mask = al->gpu_mask,
            .gpu_milli = al->gpu_milli, .cpu_milli = al->cpu_milli, .memory_mib = al->memory_mib,
            .preemptible = j && j->preemptible, .checkpointable = j && j->checkpointable,
            .nodes = j ? j->nodes : 1, .attempts = j ? j->attempts : 0,
            .ran_ms = j ? tm_rc_ran_ms(p, j) : 0,
            .remaining_ms = j && e > 0 ? tm_estimate_remaining(e, p->in->now_ms - j->started_ms)
                                       : TM_RC_DEFAULT_USE_MS,
            .deadline_ms = j ? j->deadline_ms : 0};
    }
    /* Queued work no node took this pass, routed to this model's pools: a
     * gang member or a job asking the pool's node size takes a whole node
     * of it; preemptible only where the pool may take it back. */
    for (size_t ji = 0; ji < s->njobs; ji++) {
        const struct tm_snap_job *j = &s->jobs[ji];
        if (j->state != TM_JOB_QUEUED || job_placed[ji] || p->job_held[ji] || tm_rc_burst_waits(p, ji))
            continue;
        int pi = tm_rc_job_route(cfg, j);
        if (pi < 0 || !in_model[pi])
            continue;
        const struct tm_config_pool *pool = &cfg->pools[pi];
        int64_t e = tm_rc_job_estimate(p->est, j);
        int32_t gpus = j->nodes > 1 || j->gpus == pool->gpus_per_node ? pool->gpus_per_node : j->gpus;
        f->vjobs[f->nvjobs++] = (struct tm_plan_view_job){
            .id = j->id, .node = -1, .gpus = gpus, .gpu_milli = gpus > 0 ? 1000 : j->gpu_milli,
            .cpu_milli = j->cpu_milli, .memory_mib = j->memory_mib,
            .preemptible = j->preemptible && !tm_rc_pool_is_od(pool),
            .checkpointable = j->checkpointable, .nodes = j->nodes,
            .remaining_ms = e > 0 ? e : TM_RC_DEFAULT_USE_MS, .deadline_ms = j->deadline_ms};
    }
}

/* Whether an owned pool shares a pool group with the model's pools. */
static bool fleet_owned_group(const struct tm_config *cfg, const bool *in_model)
{
    for (size_t pi = 0; pi < cfg->npools; pi++) {
        if (!in_model[pi] || !cfg->pools[pi].group)
            continue;
        for (size_t k = 0; k < cfg->npools; k++)
            if (cfg->pools[k].owned && cfg->pools[k].group &&
                strcmp(cfg->pools[k].group, cfg->pools[pi].group) == 0)
                return true;
    }
    return false;
}

/* Build the planner's view of one GPU model's pools. */
static void fleet_build(struct pass *p, const bool *in_model, const bool *job_placed,
                        struct fleet *f, struct tm_planner_input *in)
{
    const struct tm_config *cfg = p->cfg;
    int64_t grace_max = 0;
    bool all_limited = true;
    int64_t disrupt_nodes = 0, disrupt_recent = 0;

    memset(in, 0, sizeof(*in));
    in->forecast_gpus[0] = in->forecast_gpus[1] = -1;
    in->keep_gpus[0] = in->keep_gpus[1] = -1;
    for (size_t pi = 0; pi < cfg->npools; pi++) {
        const struct tm_config_pool *pool = &cfg->pools[pi];
        const struct tm_config_provider *prov = tm_config_provider_find(cfg, pool->provider);
        int side = tm_rc_pool_is_od(pool) ? TM_PLANNER_POOL_OD : TM_PLANNER_POOL_SPOT;
        if (!in_model[pi])
            continue;
        for (size_t k = 0; k < pool->ninstance_types && prov; k++) {
            const struct tm_config_instance_type *t = tm_config_type_find(prov, pool->instance_types[k]);
            if (t)
                type_index(&f->pr, pool->provider, t);
        }
        for (size_t z = 0; z < pool->nzones; z++)
            zone_index(&f->pr, pool->zones[z], true);
        if (side == TM_PLANNER_POOL_SPOT)
            in->params.spot = true;
        if (strcmp(pool->capacity_type, "spot_then_on_demand") == 0)
            in->params.od_fallback = true;
        in->params.min_nodes[side] += pool->min_nodes;
        in->params.max_nodes[side] += pool->max_nodes;
        if (tm_rc_pool_boot_ms(cfg, pool) > in->params.boot_ms)
            in->params.boot_ms = tm_rc_pool_boot_ms(cfg, pool);
        if (pool->idle_grace_ms > grace_max)
            grace_max = pool->idle_grace_ms;
        if (pool->drain_oversized)
            in->params.drain_oversized = true;
        /* consolidation by restart: on for the model when a pool allows
         * it; each node then follows its own pool (no_restart below) */
        if (pool->consolidate_restart)
            in->params.consolidate_restart = true;
        /* The planner sees one budget per model: the sum of its pools'
         * when each has one (each pool's own is enforced again when the
         * actions are mapped, tm_rc_disruption_take). */
        if (p->disrupt_left[pi] == INT_MAX) {
            all_limited = false;
        } else {
            disrupt_nodes += p->disrupt_left[pi] + p->disrupt_recent[pi];
            disrupt_recent += p->disrupt_recent[pi];
        }
        if (p->in->forecast && p->in->forecast[pi].expected_gpus >= 0) {
            const struct tm_pool_forecast *fc = &p->in->forecast[pi];
            in->forecast_gpus[side] = (in->forecast_gpus[side] < 0 ? 0 : in->forecast_gpus[side]) +
                                      fc->expected_gpus;
            in->keep_gpus[side] = (in->keep_gpus[side] < 0 ? 0 : in->keep_gpus[side]) +
                                  (fc->upper_gpus > fc->expected_gpus ? fc->upper_gpus : fc->expected_gpus);
        }
    }
    /* A group that holds owned pools buys nothing ahead of its queue: its
     * owned nodes are the headroom, and a job reaches the clouds only
     * when its group's burst rule sends it (burst.c).  The forecast
     * (which counts the group's queued work as the cloud pool's) would
     * buy ahead of that rule. */
    if (fleet_owned_group(cfg, in_model)) {
        in->forecast_gpus[0] = in->forecast_gpus[1] = -1;
        in->keep_gpus[0] = in->keep_gpus[1] = -1;
    }
    in->params.tick_ms = cfg->tick_interval_ms;
    in->params.idle_grace_ms = grace_max;
    in->params.disruption_nodes = all_limited ? (int32_t)(disrupt_nodes < INT32_MAX / 2 ? disrupt_nodes
                                                                                        : INT32_MAX / 2)
                                              : INT32_MAX / 2;
    in->params.recent_terminations = all_limited ? (int32_t)disrupt_recent : 0;
    /* Checkpoint plus restore of a move, as the elastic replay assumes:
     * moves and substitutions pay for themselves only past it. */
    in->params.move_cost_ms = TM_RC_MOVE_COST_MS;
    in->params.launch_use_ms = TM_RC_DEFAULT_USE_MS;
    /* As the elastic replay's tarmac: queued work waits for room running
     * work frees within a boot instead of a launch (planner.h). */
    in->params.wait_for_ends = true;

    /* The snapshot as the builder's view (fleet/plan_input.h), which
     * derives the planner's nodes and jobs from it as the replay's does. */
    fleet_view(p, in_model, job_placed, f, grace_max);
    struct tm_plan_view v = {.now_ms = p->in->now_ms, .prices = &f->pr, .nodes = f->vnodes,
                             .nnodes = f->nnodes, .jobs = f->vjobs, .njobs = f->nvjobs};
    int r = tm_plan_input_build(&v, f->nodes, f->jobs, &f->njobs, NULL);
    if (r < 0)
        p->err = r;
    /* Cells no pool offers first (the planner's nunoffered), then the
     * shortages the caller remembers, by the table's indices. */
    fleet_unoffered(p, in_model, f);
    in->nunoffered = f->nshortages;
    for (size_t k = 0; k < p->in->nshortages; k++) {
        const struct tm_live_shortage *sh = &p->in->shortages[k];
        int zi = zone_index(&f->pr, sh->zone, false);
        if (zi < 0 || sh->until_ms <= p->in->now_ms)
            continue;
        /* A shortage names its cloud; one from an older caller (no
         * provider) holds for every cloud's type of that name. */
        for (size_t ti = 0; ti < f->pr.ntypes; ti++) {
            if (strcmp(f->pr.types[ti].name, sh->instance_type) != 0 ||
                (sh->provider[0] && strcmp(f->pr.types[ti].provider, sh->provider) != 0))
                continue;
            f->shortages[f->nshortages++] =
                (struct tm_planner_shortage){(int32_t)ti, zi, sh->spot, sh->until_ms};
            f->any_shortage = true;
        }
    }
    /* After the nodes: their zones are in the table too. */
    fleet_zone_hazards(p, in_model, f);
    in->spot_zone_hazard = f->zone_hazards ? f->spot_zone_hazard : NULL;
    in->now_ms = p->in->now_ms;
    in->prices = &f->pr;
    in->nodes = f->nodes;
    in->nnodes = f->nnodes;
    in->jobs = f->jobs;
    in->njobs = f->njobs;
    in->shortages = f->shortages;
    in->nshortages = f->nshortages;
}

/* ---- the cloud chosen and the offers passed over ------------------------ */

/* Whether the model's table joins more than one cloud's types. */
static bool fleet_clouds(const struct fleet *f)
{
    for (size_t t = 1; t < f->pr.ntypes; t++)
        if (strcmp(f->pr.types[t].provider, f->pr.types[0].provider) != 0)
            return true;
    return false;
}

/* Append to why, when the table joins several clouds (or the launch fell
 * back past a cheaper offer): the cloud chosen, then the offers passed
 * over that were cheaper (short) and the next dearer one, each with its
 * price, e.g. "; cloud gcp: a2-highgpu-8g spot 15.42 USD/h; passed over:
 * azure Standard_ND96asr_v4 spot 2.99 USD/h (short in 1), ...". */
static void fleet_offers_why(const struct fleet *f, const struct tm_planner_input *in,
                             const struct tm_planner_action *x, char *why, size_t size)
{
    struct tm_planner_offer o[2 * TM_PRICES_TYPES_MAX];
    size_t n = tm_planner_offers(in, x, o, 2 * TM_PRICES_TYPES_MAX), len = strlen(why), listed = 0;
    bool passed_short = false, after = false;

    for (size_t k = 0; k < n; k++)
        passed_short = passed_short || o[k].status == TM_OFFER_SHORT;
    if (n == 0 || (!fleet_clouds(f) && !passed_short) || len >= size)
        return;
    const struct tm_price_type *c = &f->pr.types[x->type];
    snprintf(why + len, size - len, "; cloud %s: %s %s %.2f USD/h", c->provider[0] ? c->provider : "-",
             c->name, x->spot ? "spot" : "on-demand", (double)(x->spot ? c->spot_uusd_per_hour
                                                                       : c->on_demand_uusd_per_hour) / 1e6);
    for (size_t k = 0; k < n && listed < 4; k++) {
        const struct tm_price_type *t = &f->pr.types[o[k].type];
        /* the cheaper ones passed over, and the next one after the choice */
        if (o[k].status == TM_OFFER_CHOSEN) {
            after = true;
            continue;
        }
        len = strlen(why);
        if (len >= size)
            return;
        snprintf(why + len, size - len, "%s %s %s %s %.2f USD/h (%s)", listed ? "," : "; passed over:",
                 t->provider[0] ? t->provider : "-", t->name, o[k].spot ? "spot" : "on-demand",
                 (double)o[k].uusd_per_hour / 1e6, tm_offer_status_name(o[k].status));
        listed++;
        if (after)
            break;
    }
}

/* The launch decision's inputs: the cloud chosen (provider, its kind) and
 * every offer ranked, each with its price and status and the zones
 * remembered short. */
static void fleet_offers_inputs(struct pass *p, const struct fleet *f, const struct tm_planner_input *in,
                                const struct tm_planner_action *x, const struct tm_config_pool *pool,
                                cJSON *a)
{
    struct tm_planner_offer o[2 * TM_PRICES_TYPES_MAX];
    size_t n = tm_planner_offers(in, x, o, 2 * TM_PRICES_TYPES_MAX);
    const struct tm_config_provider *prov = tm_config_provider_find(p->cfg, pool->provider);
    cJSON *ins = a ? cJSON_GetObjectItemCaseSensitive(a, "inputs") : NULL;
    cJSON *list;

    if (!ins || p->err)
        return;
    tm_rc_put_str(p, ins, "provider", pool->provider);
    if (prov)
        tm_rc_put_str(p, ins, "provider_kind", prov->kind);
    if (pool->group)
        tm_rc_put_str(p, ins, "pool_group", pool->group);
    list = cJSON_AddArrayToObject(ins, "offers");
    if (!list) {
        p->err = TM_ENOMEM;
        return;
    }
    for (size_t k = 0; k < n; k++) {
        const struct tm_price_type *t = &f->pr.types[o[k].type];
        cJSON *e = cJSON_CreateObject();
        cJSON *zs = e ? cJSON_AddArrayToObject(e, "short_zones") : NULL;
        if (!e || !zs || !cJSON_AddItemToArray(list, e)) {
            cJSON_Delete(e);
            p->err = TM_ENOMEM;
            return;
        }
        tm_rc_put_str(p, e, "provider", t->provider);
        tm_rc_put_str(p, e, "instance_type", t->name);
        tm_rc_put_str(p, e, "capacity_type", o[k].spot ? "spot" : "on_demand");
        tm_rc_put_num(p, e, "price_uusd_per_hour", (double)o[k].uusd_per_hour);
        tm_rc_put_str(p, e, "status", tm_offer_status_name(o[k].status));
        for (size_t z = 0; z < f->pr.nzones && z < 32; z++)
            if (o[k].short_zones & (1u << z)) {
                cJSON *zn = cJSON_CreateString(f->pr.zones[z]);
                if (!zn || !cJSON_AddItemToArray(zs, zn)) {
                    cJSON_Delete(zn);
                    p->err = TM_ENOMEM;
                    return;
                }
            }
    }
}

/* One planner pass for the pools of one GPU model, its actions mapped to
 * plan ops. */
static void plan_model(struct pass *p, const bool *in_model, const bool *job_placed, unsigned *seq)
{
    const struct tm_snapshot *s = p->in->snap;
    const struct tm_config *cfg = p->cfg;
    struct fleet *f = calloc(1, sizeof(*f));
    struct tm_planner_input in;
    struct tm_planner_result res = {0};
    size_t maxjobs = s->nallocs + 1;
    char why[1024];
    bool refused = false;

    for (size_t ji = 0; ji < s->njobs; ji++)
        maxjobs += s->jobs[ji].nodes > 1 ? (size_t)s->jobs[ji].nodes : 1;
    if (f) {
        f->nodes = calloc(s->nnodes + 1, sizeof(*f->nodes));
        f->node_of = calloc(s->nnodes + 1, sizeof(*f->node_of));
        f->plan_of = malloc((s->nnodes + 1) * sizeof(*f->plan_of));
        f->jobs = calloc(maxjobs, sizeof(*f->jobs));
        f->vnodes = calloc(s->nnodes + 1, sizeof(*f->vnodes));
        f->vjobs = calloc(s->nallocs + s->njobs + 1, sizeof(*f->vjobs));
        /* the remembered shortages (one per cloud selling the type, at
         * most), and the cells no pool offers (fleet_unoffered) */
        f->shortages = calloc(p->in->nshortages * TM_PRICES_TYPES_MAX +
                                  2 * TM_PRICES_TYPES_MAX * TM_PRICES_ZONES_MAX + 1,
                              sizeof(*f->shortages));
    }
    if (!f || !f->nodes || !f->node_of || !f->plan_of || !f->jobs || !f->vnodes || !f->vjobs ||
        !f->shortages) {
        p->err = TM_ENOMEM;
        goto out;
    }
    for (size_t ni = 0; ni < s->nnodes; ni++)
        f->plan_of[ni] = -1;
    fleet_build(p, in_model, job_placed, f, &in);
    if (p->err || f->pr.ntypes == 0)
        goto out;
    int r = tm_planner_run(&in, &res);
    if (r < 0) {
        p->err = r;
        goto out;
    }
    struct rc_burst_model bm;
    tm_rc_burst_model(p, in_model, &bm);
    for (size_t k = 0; k < res.nactions && !p->err; k++) {
        const struct tm_planner_action *x = &res.actions[k];
        if (x->kind == TM_PLANNER_LAUNCH) {
            /* Pool minimums are kept per config pool below; once the org's
             * hard cap refused one launch, none after it. */
            if (refused || x->pool_minimum)
                continue;
            const char *type = f->pr.types[x->type].name;
            const char *zone = f->pr.nzones ? f->pr.zones[x->zone] : "";
            if (x->count > 1) {
                /* a gang's nodes, bought whole (reconcile/gang.c) */
                tm_rc_request_gang(p, in_model, f->pr.types[x->type].provider, type, zone, x->spot,
                                   x->od_fallback, x->count, x->reason, in.forecast_gpus[x->spot], seq);
                continue;
            }
            int pi = tm_rc_launch_pool_on(p, in_model, f->pr.types[x->type].provider, type, zone,
                                          x->spot, x->od_fallback);
            if (pi < 0) {
                /* every pool of that kind is at its max */
                snprintf(why, sizeof(why), "every %s pool that lists %s is at its max_nodes; not "
                         "launched: %s", x->spot ? "spot" : "on-demand", type, x->reason);
                tm_rc_refuse(p, in_model, x->spot, "max_nodes", why);
                continue;
            }
            if (tm_rc_launch_held(p, pi))
                continue; /* the pool's nodes never enrolled: backing off (no_show.c) */
            const struct tm_config_pool *pool = &cfg->pools[pi];
            const struct tm_config_provider *prov = tm_config_provider_find(cfg, pool->provider);
            const struct tm_config_instance_type *t = prov ? tm_config_type_find(prov, type) : NULL;
            enum tm_capacity_type cap = x->spot ? TM_CAPACITY_SPOT : TM_CAPACITY_ON_DEMAND;
            if (!t)
                continue;
            /* The planner's zone is its choice when a shortage ruled
             * zones out, or for spot when the table fits this pool's type
             * (the zone of lowest hazard with capacity).  Otherwise it is
             * only the first: the pool's zones take turns, which spreads
             * its nodes when nothing says one zone is better. */
            bool by_hazard = x->spot && f->zone_hazards && tm_rc_pool_lists_zone(pool, zone) &&
                             tm_config_spot_cells_fitted(cfg, pool, type) > 0;
            if (!(f->any_shortage || by_hazard) || !tm_rc_pool_lists_zone(pool, zone))
                zone = pool->zones[(size_t)p->live[pi] % pool->nzones];
            if (!tm_rc_launch_admitted(p, pi, t, cap)) {
                refused = true;
                continue;
            }
            bool fitted = false;
            double hazard = by_hazard ? tm_config_spot_hazard(cfg, pool, type, zone, &fitted) : 0;
            snprintf(why, sizeof(why), "%s; pool %s has %d of max %d nodes", x->reason, pool->name,
                     p->live[pi], pool->max_nodes);
            /* work its group's burst rule sent to the clouds: the
             * projected owned start and the price paid instead */
            int bj = tm_rc_burst_launch_why(p, &bm, x->job >= 0 ? tm_rc_job_index(p, f->jobs[x->job].id)
                                                                : -1, why, sizeof(why));
            if (by_hazard)
                snprintf(why + strlen(why), sizeof(why) - strlen(why),
                         "; zone %s: lowest spot hazard with capacity (%.4g per node-hour, %s)", zone,
                         hazard, fitted ? "fitted" : "the pool's");
            fleet_offers_why(f, &in, x, why, sizeof(why));
            cJSON *a = tm_rc_request_node(p, pi, t, zone, cap, why, in.forecast_gpus[x->spot], seq);
            fleet_offers_inputs(p, f, &in, x, pool, a);
            tm_rc_burst_launch_inputs(p, bj, a);
            if (by_hazard) {
                /* "Every decision is explained": the figure behind the zone. */
                cJSON *ins = a ? cJSON_GetObjectItemCaseSensitive(a, "inputs") : NULL;
                tm_rc_put_num(p, ins, "spot_hazard_per_hour", hazard);
                tm_rc_put_str(p, ins, "spot_hazard_from", fitted ? "spot_hazards" : "pool");
            }
        } else if (x->kind == TM_PLANNER_TERMINATE) {
            size_t ni = (size_t)f->node_of[x->node];
            const struct tm_snap_node *n = &s->nodes[ni];
            const struct tm_config_pool *pool = &cfg->pools[n->pool];
            /* Hold idle nodes while their pool still has unplaced work, and
             * never go below the pool's own min. */
            if (p->demand_milli[n->pool] > 0 || p->live[n->pool] <= pool->min_nodes)
                continue;
            /* the pool's disruption budget (the planner saw the model's) */
            if (!tm_rc_disruption_take(p, n->pool))
                continue;
            snprintf(why, sizeof(why), "idle for %" PRId64 " s, past the pool's grace of %" PRId64
                     " s (planner: %s)", (p->in->now_ms - n->idle_since_ms) / 1000,
                     pool->idle_grace_ms / 1000, x->reason);
            cJSON *a = tm_rc_action(p, "terminate", why);
            tm_rc_put_num(p, a, "node", (double)n->id);
            cJSON *ins = tm_rc_inputs(p, a);
            tm_rc_put_str(p, ins, "instance_id", p->node_instance[ni]);
            tm_rc_put_num(p, ins, "idle_since_ms", (double)n->idle_since_ms);
            tm_rc_put_str(p, ins, "pool", pool->name);
            tm_rc_put_str(p, ins, "disruption", "idle_release");
            if (in.keep_gpus[n->capacity == TM_CAPACITY_SPOT] >= 0)
                tm_rc_put_num(p, ins, "forecast_upper_gpus", in.keep_gpus[n->capacity == TM_CAPACITY_SPOT]);
            tm_rc_add_terminate(p, p->pool_provider[n->pool], n->id, p->node_instance[ni]);
            p->live[n->pool]--;
            p->plan.released++;
        } else if (x->kind != TM_PLANNER_WARN) {
            /* drain, move, substitute, deadline switch, refusal
             * (reconcile/moves.c); WARN: the org's soft cap is
             * tm_rc_budget_warn's, from the ledger */
            tm_rc_plan_other(p, in_model, f, &in, x, seq);
        }
    }
out:
    tm_planner_result_release(&res);
    if (f) {
        free(f->nodes);
        free(f->node_of);
        free(f->plan_of);
        free(f->jobs);
        free(f->vnodes);
        free(f->vjobs);
        free(f->shortages);
    }
    free(f);
}

/* Whether two pools' work is one planner pass: the same pool group, or
 * both ungrouped with the same GPU model. */
static bool fleet_same_queue(const struct tm_config_pool *a, const struct tm_config_pool *b)
{
    if (a->group || b->group)
        return a->group && b->group && strcmp(a->group, b->group) == 0;
    return strcmp(a->gpu_model, b->gpu_model) == 0;
}

/* Step 3: launches and releases from the planner, per GPU model, then
 * pool minimums and drained nodes. */
void tm_rc_run_planner(struct pass *p, const bool *job_placed)
{
    const struct tm_snapshot *s = p->in->snap;
    const struct tm_config *cfg = p->cfg;
    size_t np = cfg->npools;
    bool *done = calloc(np + 1, sizeof(bool));
    bool *in_model = calloc(np + 1, sizeof(bool));
    unsigned seq = 0;
    char why[256];

    if (!done || !in_model) {
        p->err = TM_ENOMEM;
        goto out;
    }
    /* Unplaced work per pool: decisions' inputs and the hold on releases.
     * Work its group's burst rule keeps waiting for owned capacity is no
     * cloud demand: idle cloud nodes go after their grace as before. */
    for (size_t ji = 0; ji < s->njobs; ji++) {
        const struct tm_snap_job *j = &s->jobs[ji];
        if (j->state != TM_JOB_QUEUED || job_placed[ji] || p->job_held[ji] || tm_rc_burst_waits(p, ji))
            continue;
        int pi = tm_rc_job_route(cfg, j);
        if (pi < 0)
            continue;
        int64_t e = tm_rc_job_estimate(p->est, j);
        if ((e > 0 ? e : TM_RC_DEFAULT_USE_MS) > p->pool_use_ms[pi])
            p->pool_use_ms[pi] = e > 0 ? e : TM_RC_DEFAULT_USE_MS;
        p->demand_milli[pi] += tm_rc_job_ask_milli(&cfg->pools[pi], j);
    }
    /* Substitutes first: the nodes they replace are leaving for the planner. */
    tm_rc_substitutes(p);
    /* Owned pools are never planned: their capacity is not for sale and
     * their nodes are not the planner's to release.  The scheduler still
     * places work on them (schedule.c). */
    for (size_t pi = 0; pi < np; pi++)
        done[pi] = cfg->pools[pi].owned;
    for (size_t pi = 0; pi < np && !p->err; pi++) {
        if (done[pi])
            continue;
        for (size_t k = 0; k < np; k++)
            in_model[k] = !done[k] && fleet_same_queue(&cfg->pools[k], &cfg->pools[pi]);
        for (size_t k = 0; k < np; k++)
            done[k] = done[k] || in_model[k];
        plan_model(p, in_model, job_placed, &seq);
    }
    /* Each pool's min_nodes, with the cheapest type of its capacity. */
    for (size_t pi = 0; pi < np && !p->err; pi++) {
        const struct tm_config_pool *pool = &cfg->pools[pi];
        enum tm_capacity_type cap = tm_rc_pool_is_od(pool) ? TM_CAPACITY_ON_DEMAND : TM_CAPACITY_SPOT;
        const struct tm_config_instance_type *t = pool->owned ? NULL : tm_rc_pool_type(cfg, pool, cap);
        while (t && p->live[pi] < pool->min_nodes && !p->err) {
            if (tm_rc_launch_held(p, (int)pi) || !tm_rc_launch_admitted(p, (int)pi, t, cap))
                break;
            snprintf(why, sizeof(why), "pool %s is below min_nodes %d", pool->name, pool->min_nodes);
            tm_rc_request_node(p, (int)pi, t, pool->zones[(size_t)p->live[pi] % pool->nzones], cap, why,
                         -1, &seq);
        }
    }
    if (p->org)
        tm_rc_budget_warn(p, p->org);

    /* Drained and noticed nodes go once empty, whatever the planner says
     * (it sees them as leaving). */
    for (size_t ni = 0; ni < s->nnodes && !p->err; ni++) {
        const struct tm_snap_node *n = &s->nodes[ni];
        /* An owned node is never terminated: drained, it stays empty. */
        if (n->pool < 0 || p->node_gone[ni] || p->node_busy[ni] || cfg->pools[n->pool].owned)
            continue;
        /* A noticed node is leaving anyway: once empty, stop paying for it
         * (one still booting too: it would never take work). */
        bool noticed = p->node_noticed[ni] && (n->state == TM_NODE_READY ||
                                               (n->state == TM_NODE_BOOTING && p->node_instance[ni][0]));
        /* A cordoned node the planner leaves alone (no work can come to
         * it) goes past its grace like any idle one. */
        bool cordoned_idle = n->state == TM_NODE_READY && n->cordoned && n->idle_since_ms > 0 &&
                             p->in->now_ms - n->idle_since_ms >= p->cfg->pools[n->pool].idle_grace_ms &&
                             p->demand_milli[n->pool] == 0 &&
                             p->live[n->pool] > p->cfg->pools[n->pool].min_nodes;
        if (n->state != TM_NODE_DRAINING && !noticed && !cordoned_idle)
            continue;
        if (noticed)
            snprintf(why, sizeof(why), "%s after an interruption notice: released before the cloud takes it",
                     n->state == TM_NODE_BOOTING ? "booting" : "empty");
        else if (cordoned_idle)
            snprintf(why, sizeof(why), "cordoned, idle for %" PRId64 " s, past the pool's grace of %" PRId64 " s",
                     (p->in->now_ms - n->idle_since_ms) / 1000, p->cfg->pools[n->pool].idle_grace_ms / 1000);
        else
            snprintf(why, sizeof(why), "drained and empty");
        cJSON *a = tm_rc_action(p, "terminate", why);
        tm_rc_put_num(p, a, "node", (double)n->id);
        cJSON *in = tm_rc_inputs(p, a);
        tm_rc_put_str(p, in, "instance_id", p->node_instance[ni]);
        tm_rc_put_num(p, in, "idle_since_ms", (double)n->idle_since_ms);
        tm_rc_add_terminate(p, p->pool_provider[n->pool], n->id, p->node_instance[ni]);
        p->live[n->pool]--;
        p->plan.released++;
    }
out:
    free(done);
    free(in_model);
}
