/*
 * providers/common/launch.c: the launch engine (see launch.h).
 *
 * A launch is find, then offers one at a time until one is made or none is
 * left; a lost answer goes back to find.  The engine never calls back from
 * inside tm_launch_start(): its first step is the cloud's find (or, for a
 * cloud without one, its first create), whose answer comes from the loop;
 * a step that could not start is returned, not delivered.
 */
#include "providers/common/launch.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <openssl/crypto.h>

#include "core/err.h"
#include "core/log.h"

#define RELAUNCH_DEFAULT 5

static void launch_free(struct tm_launch *l)
{
    if (l->be->cleanup)
        l->be->cleanup(l);
    if (l->prev_launch) {
        *l->prev_launch = l->next_launch;
        if (l->next_launch)
            l->next_launch->prev_launch = l->prev_launch;
    }
    if (l->bootstrap) {
        OPENSSL_cleanse(l->bootstrap, l->bootstrap_len);
        free(l->bootstrap);
    }
    free(l->priv);
    free(l);
}

static void deliver(struct tm_launch *l, int status, const struct tm_instance *inst)
{
    l->cb(status, status == 0 ? inst : NULL, l->data);
    launch_free(l);
}

static bool closing(const struct tm_launch *l)
{
    return l->env->closing && *l->env->closing;
}

bool tm_launch_is_short(const struct tm_launch_env *env, const char *type, const char *zone,
                        enum tm_capacity_type capacity)
{
    return env->shorts &&
           tm_shortages_has(env->shorts, env->now_ms(env->clock), type, zone, capacity);
}

void tm_launch_note_short(struct tm_launch_env *env, const char *type, const char *zone,
                          enum tm_capacity_type capacity, const char *code)
{
    if (env->shorts)
        tm_shortages_note(env->shorts, env->now_ms(env->clock), type, zone, capacity, code);
}

bool tm_launch_set_valid(const struct tm_launch_set *set, const char *cluster, size_t max)
{
    const struct tm_launch_request *r0;

    if (!set || !set->reqs || set->n == 0 || set->n > max || !tm_id_fits(set->set_token) ||
        !set->set_token[0] || (set->placement_group && !tm_id_fits(set->placement_group)))
        return false;
    r0 = &set->reqs[0];
    for (size_t i = 0; i < set->n; i++) {
        const struct tm_launch_request *q = &set->reqs[i];

        if (!tm_id_fits(q->token) || !q->token[0] || !tm_id_fits(q->pool) ||
            !tm_id_fits(q->instance_type) || !q->instance_type[0] ||
            strcmp(q->instance_type, r0->instance_type) != 0 || strcmp(q->pool, r0->pool) != 0 ||
            !tm_id_fits(q->zone ? q->zone : "") ||
            (q->cluster && cluster && strcmp(q->cluster, cluster) != 0))
            return false;
    }
    return true;
}

bool tm_launch_env_close(struct tm_launch_env *env, void (*done)(void *data), void *data)
{
    if (*env->closing)
        return false;
    *env->closing = true;
    env->close_done = done;
    env->close_data = data;
    return true;
}

void tm_launch_env_closed(void *data)
{
    struct tm_launch_env *env = data;
    void (*done)(void *data) = env->close_done;
    void *done_data = env->close_data;

    env->free_provider(env->provider);
    if (done)
        done(done_data);
}

/* ---- offers ------------------------------------------------------------- */

static int64_t wall_now(const struct tm_launch_env *env)
{
    struct timespec ts;

    if (env->wall_ms)
        return env->wall_ms(env->clock);
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Whether offer o may still be tried: a reservation while it is usable,
 * any other while the shortage memory does not hold its cell. */
static bool offer_open(const struct tm_launch_env *env, const struct tm_launch_offer *o)
{
    const struct tm_reservation *r;

    if (!o->reservation[0])
        return !tm_launch_is_short(env, o->type, o->zone, o->capacity);
    r = env->reservations ? tm_reservations_find(env->reservations, o->reservation) : NULL;
    return r && tm_reservation_usable(r, o->type, o->zone, wall_now(env), env->now_ms(env->clock));
}

/* Whether the pool buys nothing past its reservations: its copy says so,
 * or (a cloud that keeps no pools) its reservations' rows do. */
static bool reserved_only(const struct tm_launch_env *env, const struct tm_provider_pool *p,
                          const char *pool)
{
    const struct tm_reservations *rs = env->reservations;

    if (p)
        return p->reserved_only;
    for (size_t i = 0; rs && i < rs->n; i++)
        if (strcmp(rs->v[i].pool, pool) == 0 && rs->v[i].only)
            return true;
    return false;
}

/* The pool's reservations that can take a launch of type now. */
static size_t add_reserved(const struct tm_launch_env *env, const char *pool, const char *type,
                           const char *zone, tm_launch_zone_fits zone_fits, const void *ctx,
                           struct tm_launch_offer *out, size_t n, size_t max)
{
    const struct tm_reservations *rs = env->reservations;
    int64_t wall = wall_now(env);
    uint64_t now = env->now_ms(env->clock);

    for (size_t i = 0; rs && i < rs->n && n < max; i++) {
        const struct tm_reservation *r = &rs->v[i];
        const char *z = zone[0] ? zone : r->zone;

        if (strcmp(r->pool, pool) != 0 || !tm_reservation_usable(r, type, zone, wall, now) ||
            (z[0] && zone_fits && !zone_fits(ctx, z)))
            continue;
        memset(&out[n], 0, sizeof(out[n]));
        tm_id_copy(out[n].type, type);
        tm_id_copy(out[n].zone, z);
        tm_id_copy(out[n].reservation, r->id);
        out[n].capacity = TM_CAPACITY_ON_DEMAND;
        out[n].block = r->block;
        n++;
    }
    return n;
}

static size_t add_offers(const struct tm_launch_env *env, const struct tm_provider_pool *pool,
                         const char *type, const char *zone, enum tm_capacity_type capacity,
                         bool zone_required, bool skip_short, tm_launch_zone_fits zone_fits,
                         const void *ctx, struct tm_launch_offer *out, size_t n, size_t max)
{
    size_t nz = zone[0] ? 1 : pool ? pool->nzones : 0;
    bool any = nz == 0 && !zone_required; /* no zone known: the cloud picks */

    if (any)
        nz = 1;
    for (size_t i = 0; i < nz && n < max; i++) {
        const char *z = zone[0] ? zone : any ? "" : pool->zones[i];

        if (!tm_id_fits(z) || (zone_fits && !zone_fits(ctx, z)))
            continue;
        if (skip_short && tm_launch_is_short(env, type, z, capacity)) {
            tm_log_debug("offering skipped, short", "cloud=%s type=%s zone=%s market=%s",
                         env->shorts->cloud, type, z, tm_capacity_type_name(capacity));
            continue;
        }
        memset(&out[n], 0, sizeof(out[n]));
        tm_id_copy(out[n].type, type);
        tm_id_copy(out[n].zone, z);
        out[n].capacity = capacity;
        n++;
    }
    return n;
}

size_t tm_launch_plan_offers(const struct tm_launch_env *env, const char *pool, const char *type,
                             const char *zone, enum tm_capacity_type capacity, bool zone_required,
                             bool skip_short, tm_launch_zone_fits zone_fits, const void *ctx,
                             struct tm_launch_offer *out, size_t max)
{
    const struct tm_provider_pool *p = tm_provider_pool_find(env->pools, env->npools, pool);
    size_t n = 0;

    zone = zone ? zone : "";
    n = add_reserved(env, pool, type, zone, zone_fits, ctx, out, n, max);
    if (reserved_only(env, p, pool))
        return n;
    if (capacity != TM_CAPACITY_ON_DEMAND)
        n = add_offers(env, p, type, zone, TM_CAPACITY_SPOT, zone_required, skip_short, zone_fits,
                       ctx, out, n, max);
    if (capacity != TM_CAPACITY_SPOT)
        n = add_offers(env, p, type, zone, TM_CAPACITY_ON_DEMAND, zone_required, skip_short,
                       zone_fits, ctx, out, n, max);
    return n;
}

/* ---- the walk ----------------------------------------------------------- */

/* Plan the offers anew (after a lost answer too: the shortage memory keeps
 * what was really short). */
static void plan(struct tm_launch *l)
{
    l->noffers = tm_launch_plan_offers(l->env, l->pool, l->type, l->zone, l->capacity,
                                       l->be->zone_required, true, l->be->zone_fits, l,
                                       l->offers, TM_LAUNCH_OFFER_MAX);
    l->cur = 0;
}

/* Create the next untried offer not remembered short: what create
 * returned, or 1 when none is left (logged, status the reason). */
static int try_next(struct tm_launch *l, int status)
{
    size_t i;

    for (i = 0; i < l->noffers; i++)
        if (!l->offers[i].tried && offer_open(l->env, &l->offers[i]))
            break;
    if (i == l->noffers) {
        tm_log_warn("could not launch: no offering left",
                    "cloud=%s provider=%s pool=%s node=%lld type=%s err=%s", l->be->cloud,
                    l->env->name, l->pool, (long long)l->node_id, l->type, tm_err_name(status));
        return 1;
    }
    l->offers[i].tried = true;
    l->cur = i;
    return l->be->create(l, i);
}

/* The next offer, or fail with status. */
static void next_or_fail(struct tm_launch *l, int status)
{
    int r = try_next(l, status);

    if (r != 0)
        deliver(l, r > 0 ? status : r, NULL);
}

void tm_launch_found(struct tm_launch *l, int status, const struct tm_instance *inst)
{
    if (status == TM_ECANCELED || closing(l)) {
        deliver(l, TM_ECANCELED, NULL);
        return;
    }
    if (status < 0) {
        deliver(l, status, NULL);
        return;
    }
    if (inst) {
        char msg[96];

        snprintf(msg, sizeof(msg), "%s launch found by %s, not launching again", l->be->cloud,
                 l->be->found_by ? l->be->found_by : "token");
        tm_log_info(msg, "provider=%s token=%s instance=%s state=%s", l->env->name, l->token,
                    inst->id, tm_instance_state_name(inst->state));
        deliver(l, 0, inst);
        return;
    }
    plan(l);
    next_or_fail(l, TM_EQUOTA);
}

void tm_launch_made(struct tm_launch *l, enum tm_launch_answer answer, int status,
                    const struct tm_instance *inst, const char *code)
{
    unsigned max = l->env->max_relaunch ? l->env->max_relaunch : RELAUNCH_DEFAULT;
    int r;

    if (status == TM_ECANCELED || closing(l)) {
        deliver(l, TM_ECANCELED, NULL);
        return;
    }
    switch (answer) {
    case TM_LAUNCH_OK:
        if (!inst) {
            deliver(l, TM_EBADREPLY, NULL);
            return;
        }
        deliver(l, 0, inst);
        return;
    case TM_LAUNCH_SHORT: {
        const struct tm_launch_offer *o = &l->offers[l->cur];

        /* A full reservation says nothing of the market beside it. */
        if (o->reservation[0] && l->env->reservations) {
            tm_log_info("reservation full, trying the next offer",
                        "cloud=%s provider=%s pool=%s reservation=%s code=%s", l->be->cloud,
                        l->env->name, l->pool, o->reservation, code ? code : "-");
            tm_reservations_note_full(l->env->reservations, o->reservation,
                                      l->env->now_ms(l->env->clock));
        } else {
            tm_launch_note_short(l->env, o->type, o->zone, o->capacity, code);
        }
        next_or_fail(l, status < 0 ? status : TM_EQUOTA);
        return;
    }
    case TM_LAUNCH_NEXT:
        next_or_fail(l, status < 0 ? status : TM_EQUOTA);
        return;
    case TM_LAUNCH_AMBIGUOUS:
        if (++l->relaunches >= max) {
            deliver(l, status < 0 ? status : TM_EUNAVAIL, NULL);
            return;
        }
        tm_log_info("launch interrupted, looking by token before trying again",
                    "cloud=%s provider=%s token=%s err=%s", l->be->cloud, l->env->name, l->token,
                    tm_err_name(status));
        if (!l->be->find) {
            /* The cloud's create finds what the token made: the same again. */
            plan(l);
            next_or_fail(l, TM_EQUOTA);
            return;
        }
        r = l->be->find(l);
        if (r < 0)
            deliver(l, r, NULL);
        return;
    case TM_LAUNCH_FATAL:
        break;
    }
    deliver(l, status < 0 ? status : TM_EBADREPLY, NULL);
}

int tm_launch_start(struct tm_launch_env *env, const struct tm_launch_backend *be,
                    const struct tm_launch_request *req, tm_launch_cb cb, void *data)
{
    struct tm_launch *l;
    int r;

    if (!env || !be || !req || !cb || !tm_id_fits(req->token) || !req->token[0] ||
        !tm_id_fits(req->pool) || !tm_id_fits(req->instance_type) || !req->instance_type[0] ||
        !tm_id_fits(req->zone ? req->zone : "") ||
        (req->cluster && env->cluster && strcmp(req->cluster, env->cluster) != 0))
        return TM_EINVAL;
    if (env->closing && *env->closing)
        return TM_ECANCELED;
    l = calloc(1, sizeof(*l));
    if (!l)
        return TM_ENOMEM;
    l->env = env;
    l->be = be;
    l->cb = cb;
    l->data = data;
    if (be->priv_size) {
        l->priv = calloc(1, be->priv_size);
        if (!l->priv) {
            free(l);
            return TM_ENOMEM;
        }
    }
    tm_id_copy(l->token, req->token);
    tm_id_copy(l->pool, req->pool);
    tm_id_copy(l->type, req->instance_type);
    tm_id_copy(l->zone, req->zone);
    snprintf(l->node, sizeof(l->node), "%lld", (long long)req->node_id);
    l->node_id = req->node_id;
    l->capacity = req->capacity;
    if (req->bootstrap && req->bootstrap_len > 0) {
        l->bootstrap = malloc(req->bootstrap_len + 1);
        if (!l->bootstrap) {
            launch_free(l);
            return TM_ENOMEM;
        }
        memcpy(l->bootstrap, req->bootstrap, req->bootstrap_len);
        l->bootstrap[req->bootstrap_len] = '\0';
        l->bootstrap_len = req->bootstrap_len;
    }
    r = be->prepare ? be->prepare(l, req) : 0;
    if (r < 0) {
        launch_free(l);
        return r;
    }
    l->next_launch = env->launching;
    if (env->launching)
        env->launching->prev_launch = &l->next_launch;
    env->launching = l;
    l->prev_launch = &env->launching;
    if (be->find) {
        r = be->find(l);
    } else {
        plan(l);
        r = try_next(l, TM_EQUOTA);
        r = r > 0 ? TM_EQUOTA : r;
    }
    if (r < 0) {
        launch_free(l);
        return r;
    }
    return 0;
}
