/*
 * controller/daemon/calls.c: see calls.h.
 */
#include "controller/daemon/calls.h"

#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/crypto.h>

#include "controller/spec/token.h"
#include "controller/store/store.h"
#include "core/bootstrap.h"
#include "core/err.h"
#include "core/log.h"

#define SHORTAGE_MEMORY_MS (30 * 60 * 1000) /* as long as the elastic replay remembers them */

void tm_crash_point(const char *name)
{
    const char *want = getenv("TARMAC_CRASH_POINT");
    if (want && strcmp(want, name) == 0) {
        tm_log_warn("crash point reached: killing myself", "point=%s", name);
        raise(SIGKILL);
    }
}

void tm_stall_point(const char *name)
{
    const char *want = getenv("TARMAC_STALL_POINT"), *ms = getenv("TARMAC_STALL_MS");
    if (want && strcmp(want, name) == 0) {
        long n = ms ? strtol(ms, NULL, 10) : 0;
        tm_log_warn("stall point reached: sleeping", "point=%s ms=%ld", name, n);
        unsetenv("TARMAC_STALL_POINT"); /* once */
        if (n > 0)
            uv_sleep((unsigned)n);
    }
}

/* ---- in-flight sets ---------------------------------------------------- */

static bool launching_has(struct tm_calls *calls, int64_t node)
{
    for (size_t i = 0; i < calls->nlaunching; i++)
        if (calls->launching[i].node == node)
            return true;
    return false;
}

static int launching_add(struct tm_calls *calls, int64_t node)
{
    if (calls->nlaunching == calls->launching_cap) {
        size_t cap = calls->launching_cap ? 2 * calls->launching_cap : 16;
        void *m = realloc(calls->launching, cap * sizeof(*calls->launching));
        if (!m)
            return TM_ENOMEM;
        calls->launching = m;
        calls->launching_cap = cap;
    }
    calls->launching[calls->nlaunching++] = (struct tm_launching){.node = node};
    return 0;
}

/* Nothing was asked of the cloud: the row stays requested and the next
 * pass may launch it. */
static void launching_del(struct tm_calls *calls, int64_t node)
{
    for (size_t i = 0; i < calls->nlaunching; i++)
        if (calls->launching[i].node == node) {
            calls->launching[i] = calls->launching[--calls->nlaunching];
            return;
        }
}

/* The cloud answered: in flight until the next snapshot is read. */
static void launching_settle(struct tm_calls *calls, int64_t node)
{
    for (size_t i = 0; i < calls->nlaunching; i++)
        if (calls->launching[i].node == node) {
            calls->launching[i].settled = true;
            return;
        }
}

void tm_calls_snapshot_taken(struct tm_calls *calls)
{
    for (size_t i = 0; i < calls->nlaunching;)
        if (calls->launching[i].settled)
            calls->launching[i] = calls->launching[--calls->nlaunching];
        else
            i++;
}

static bool terminating_has(struct tm_calls *calls, const char *id)
{
    for (size_t i = 0; i < calls->nterminating; i++)
        if (strcmp(calls->terminating[i], id) == 0)
            return true;
    return false;
}

static int terminating_add(struct tm_calls *calls, const char *id)
{
    if (calls->nterminating == calls->terminating_cap) {
        size_t cap = calls->terminating_cap ? 2 * calls->terminating_cap : 16;
        void *m = realloc(calls->terminating, cap * TM_ID_MAX);
        if (!m)
            return TM_ENOMEM;
        calls->terminating = m;
        calls->terminating_cap = cap;
    }
    snprintf(calls->terminating[calls->nterminating++], TM_ID_MAX, "%s", id);
    return 0;
}

static void terminating_del(struct tm_calls *calls, const char *id)
{
    for (size_t i = 0; i < calls->nterminating; i++)
        if (strcmp(calls->terminating[i], id) == 0) {
            memcpy(calls->terminating[i], calls->terminating[--calls->nterminating], TM_ID_MAX);
            return;
        }
}

void tm_call_done(struct tm_call *c)
{
    struct tm_calls *calls = c->calls;

    calls->inflight--;
    if (c->bootstrap) {
        OPENSSL_cleanse(c->bootstrap, c->bootstrap_len);
        free(c->bootstrap);
    }
    free(c);
    if (calls->inflight == 0 && calls->on_none_left)
        calls->on_none_left(calls->data);
}

unsigned tm_calls_inflight(const struct tm_calls *calls)
{
    return calls->inflight;
}

/* ---- cloud calls after the plan committed ------------------------------ */

/* A node the cloud was asked to launch stays in flight past the answer,
 * until a snapshot read after the call ended (and after its outcome, if
 * any, was recorded: tm_calls_snapshot_taken()).  A pass whose snapshot
 * came before the record still reads the row requested and would send the
 * same launch again: idempotent by its token, but a refusal then counted
 * twice (itest_metrics: three quota errors for two failed rows) and a
 * launch wrote a second enrollment (itest_agent_bootstrap), both in the
 * ASan pass on a loaded machine. */
static void launch_end(struct tm_call *c)
{
    launching_settle(c->calls, c->node_id);
    tm_call_done(c);
}

static void on_launch_recorded(int status, const char *err, void *data)
{
    struct tm_call *c = data;
    if (status < 0 && status != TM_ECANCELED)
        tm_log_warn("could not record launched instance, the next tick adopts it by token",
                    "node=%" PRId64 " instance=%s error=\"%s\"", c->node_id, c->instance_id,
                    err ? err : tm_strerror(status));
    launch_end(c);
}

static void on_launch_failed_recorded(int status, const cJSON *result, const char *err,
                                      const char *sqlstate, void *data)
{
    struct tm_call *c = data;
    launching_settle(c->calls, c->node_id);
    if (status < 0 && status != TM_ECANCELED)
        tm_log_warn("could not record failed launch", "node=%" PRId64 " error=\"%s\"", c->node_id,
                    err ? err : tm_strerror(status));
    else if (status == 0 && c->calls->on_shortage && !*c->calls->closing)
        c->calls->on_shortage(c->calls->data);
    tm_call_done(c);
}

/* Remember (type, zone, capacity) as short until SHORTAGE_MEMORY_MS from
 * now; a full list forgets its soonest-expiring entry. */
static void shortage_remember(struct tm_calls *calls, const struct tm_call *c, int64_t now_ms)
{
    size_t k = calls->nshortages;
    for (size_t i = 0; i < calls->nshortages; i++) {
        const struct tm_live_shortage *x = &calls->shortages[i];
        if (x->spot == c->spot && strcmp(x->instance_type, c->instance_type) == 0 &&
            strcmp(x->zone, c->zone) == 0 &&
            strcmp(x->provider, calls->cfg->providers[c->provider].name) == 0)
            k = i;
    }
    if (k == TM_CALLS_SHORTAGES_MAX) {
        k = 0;
        for (size_t i = 1; i < calls->nshortages; i++)
            if (calls->shortages[i].until_ms < calls->shortages[k].until_ms)
                k = i;
    }
    if (k == calls->nshortages)
        calls->nshortages++;
    struct tm_live_shortage *x = &calls->shortages[k];
    snprintf(x->provider, sizeof(x->provider), "%s", calls->cfg->providers[c->provider].name);
    snprintf(x->instance_type, sizeof(x->instance_type), "%s", c->instance_type);
    snprintf(x->zone, sizeof(x->zone), "%s", c->zone);
    x->spot = c->spot;
    x->until_ms = now_ms + SHORTAGE_MEMORY_MS;
}

static void on_launch(int status, const struct tm_instance *inst, void *data)
{
    struct tm_call *c = data;
    struct tm_calls *calls = c->calls;
    const char *pname = calls->cfg->providers[c->provider].name;

    tm_fleet_stats_call(calls->fleet, (size_t)c->provider, TM_FLEET_OP_LAUNCH, status);
    if (status == 0 && !*calls->closing) {
        tm_crash_point("after_launch");
        snprintf(c->instance_id, sizeof(c->instance_id), "%s", inst->id);
        tm_log_info("instance launched", "node=%" PRId64 " instance=%s provider=%s type=%s zone=%s",
                    c->node_id, inst->id, pname, inst->instance_type, inst->zone);
        calls->stats->launches++;
        if (tm_store_node_launched(*calls->pool, c->node_id, inst->id, tm_clock_now_ms(calls->clock),
                                   on_launch_recorded, c) == 0)
            return;
    } else if (status == TM_EQUOTA && !*calls->closing) {
        /* Capacity short: give the node row up with its reason, so the next
         * pass may request elsewhere; the token is never reused. */
        char why[160];
        snprintf(why, sizeof(why), "provider %s has no capacity: %s", pname, tm_strerror(status));
        tm_log_warn("launch refused for capacity", "node=%" PRId64 " provider=%s type=%s zone=%s",
                    c->node_id, pname, c->instance_type, c->zone);
        calls->stats->launch_errors++;
        shortage_remember(calls, c, tm_clock_now_ms(calls->clock));
        cJSON *actions = cJSON_CreateArray();
        cJSON *a = cJSON_CreateObject();
        if (actions && a) {
            cJSON_AddItemToArray(actions, a);
            cJSON_AddStringToObject(a, "op", "launch_failed");
            cJSON_AddNumberToObject(a, "node", (double)c->node_id);
            cJSON_AddStringToObject(a, "reason", why);
            int r = tm_store_apply(*calls->pool, *calls->epoch, tm_clock_now_ms(calls->clock), actions,
                                   on_launch_failed_recorded, c);
            cJSON_Delete(actions);
            if (r == 0)
                return;
        } else {
            cJSON_Delete(actions);
            cJSON_Delete(a);
        }
    } else if (status < 0 && status != TM_ECANCELED) {
        calls->stats->launch_errors++;
        tm_log(status == TM_EAUTH ? TM_LOG_ERROR : TM_LOG_WARN,
               "could not launch instance, will retry next tick",
               "node=%" PRId64 " provider=%s error=%s", c->node_id, pname, tm_err_name(status));
    }
    launch_end(c);
}

static void on_terminate(int status, void *data)
{
    struct tm_call *c = data;
    struct tm_calls *calls = c->calls;

    terminating_del(calls, c->instance_id);
    /* An instance already gone is what we asked for. */
    tm_fleet_stats_call(calls->fleet, (size_t)c->provider, TM_FLEET_OP_TERMINATE,
                        status == TM_ENOTFOUND ? 0 : status);
    if (status == 0) {
        calls->stats->terminates++;
        tm_log_info("instance terminate requested", "node=%" PRId64 " instance=%s", c->node_id,
                    c->instance_id);
    } else if (status != TM_ECANCELED && status != TM_ENOTFOUND) {
        tm_log_warn("could not terminate instance, will retry next tick",
                    "node=%" PRId64 " instance=%s error=%s", c->node_id, c->instance_id,
                    tm_err_name(status));
    }
    tm_call_done(c);
}

struct tm_call *tm_calls_new(struct tm_calls *calls, int provider, int64_t node)
{
    struct tm_call *c = calloc(1, sizeof(*c));
    if (!c)
        return NULL;
    c->calls = calls;
    c->provider = provider;
    c->node_id = node;
    calls->inflight++;
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

/* The cloud call itself, with whatever bootstrap c carries; the provider
 * copies the request before it returns, so the secret goes right after. */
static void launch_now(struct tm_call *c)
{
    struct tm_provider *p = c->launch_via;
    int r;

    c->req.bootstrap = c->bootstrap;
    c->req.bootstrap_len = c->bootstrap_len;
    r = p->ops->launch(p, &c->req, on_launch, c);
    if (c->bootstrap) {
        OPENSSL_cleanse(c->bootstrap, c->bootstrap_len);
        free(c->bootstrap);
        c->bootstrap = NULL;
        c->req.bootstrap = NULL;
    }
    if (r < 0) {
        tm_fleet_stats_call(c->calls->fleet, (size_t)c->provider, TM_FLEET_OP_LAUNCH, r);
        launching_del(c->calls, c->node_id);
        tm_log_warn("could not start launch", "node=%" PRId64 " error=%s", c->node_id, tm_err_name(r));
        tm_call_done(c);
    }
}

static void set_member_prepared(struct tm_call *c, bool ok);

static void on_enrollment_stored(int status, const char *err, void *data)
{
    struct tm_call *c = data;

    if (c->set) {
        if (status < 0 && status != TM_ECANCELED)
            tm_log_warn("could not store the enrollment secret, launch set deferred",
                        "node=%" PRId64 " error=\"%s\"", c->node_id, err ? err : tm_strerror(status));
        set_member_prepared(c, status == 0 && !*c->calls->closing);
        return;
    }
    if (status < 0 || *c->calls->closing) {
        /* No row, no launch: an agent could never enroll.  The node stays
         * requested and the next pass asks again with a fresh secret. */
        if (status < 0 && status != TM_ECANCELED)
            tm_log_warn("could not store the enrollment secret, launch deferred",
                        "node=%" PRId64 " error=\"%s\"", c->node_id, err ? err : tm_strerror(status));
        launching_del(c->calls, c->node_id);
        tm_call_done(c);
        return;
    }
    launch_now(c);
}

/* A pool with a bootstrap template: a fresh secret for this launch
 * attempt, its hash stored with its expiry before the cloud call, the
 * template filled with it. */
static void enroll_then_launch(struct tm_call *c, const struct tm_config_pool *pool)
{
    const struct tm_config *cfg = c->calls->cfg;
    char secret[TM_TOKEN_LEN + 1], hash[TM_TOKEN_HASH_LEN + 1], node[24];
    int64_t now = tm_clock_now_ms(c->calls->clock);
    int r;

    snprintf(node, sizeof(node), "%" PRId64, c->node_id);
    r = tm_enroll_secret_generate(secret);
    if (r == 0)
        r = tm_token_hash(secret, TM_TOKEN_LEN, hash);
    if (r == 0) {
        const struct tm_bootstrap_values v = {
            .controller_url = cfg->agent.controller_url, .ca_pem = cfg->agent.ca_pem,
            .enroll_secret = secret, .node_id = node, .pool = pool->name,
        };
        r = tm_bootstrap_fill(pool->bootstrap, pool->bootstrap_len, &v, &c->bootstrap,
                              &c->bootstrap_len);
    }
    OPENSSL_cleanse(secret, sizeof(secret));
    if (r == 0)
        r = tm_store_enrollment_add(*c->calls->pool, c->node_id, hash, now,
                                    now + cfg->agent.enroll_ttl_ms, on_enrollment_stored, c);
    OPENSSL_cleanse(hash, sizeof(hash));
    if (r < 0) {
        tm_log_warn("could not prepare the node's bootstrap, launch deferred", "node=%" PRId64 " error=%s",
                    c->node_id, tm_err_name(r));
        if (c->set) {
            set_member_prepared(c, false);
            return;
        }
        launching_del(c->calls, c->node_id);
        tm_call_done(c);
    }
}

/* ---- a gang's launch set ------------------------------------------------ */

/* The members of one set: each a launch call in flight of its own (so the
 * in-flight sets and the stop wait see every node), sent to the cloud in
 * one all-or-nothing call once every member's enrollment is stored. */
struct set_call {
    struct tm_calls *calls;
    struct tm_provider *via;
    int provider;
    size_t n, preparing;           /* members, those not yet prepared */
    bool failed;                   /* a member could not be prepared */
    struct tm_call **m;
    char key[TM_ID_MAX];
};

static void set_free(struct set_call *sc)
{
    free(sc->m);
    free(sc);
}

/* End every member's call: asked of the cloud (settled, as launch_end()),
 * or not (the rows stay requested for the next pass). */
static void set_end(struct set_call *sc, bool asked)
{
    for (size_t k = 0; k < sc->n; k++) {
        if (asked)
            launching_settle(sc->calls, sc->m[k]->node_id);
        else
            launching_del(sc->calls, sc->m[k]->node_id);
        tm_call_done(sc->m[k]);
    }
    set_free(sc);
}

static void on_set_failed_recorded(int status, const cJSON *result, const char *err,
                                   const char *sqlstate, void *data)
{
    struct set_call *sc = data;
    (void)result;
    (void)sqlstate;
    if (status < 0 && status != TM_ECANCELED)
        tm_log_warn("could not record failed launch set", "set=%s error=\"%s\"", sc->key,
                    err ? err : tm_strerror(status));
    set_end(sc, true);
}

/* The cloud refused the set for capacity and released what it made: every
 * member's row is given up in one transaction, the shortage remembered
 * once, so the next pass asks for the whole set elsewhere. */
static void set_short(struct set_call *sc, int status)
{
    struct tm_calls *calls = sc->calls;
    const char *pname = calls->cfg->providers[sc->provider].name;
    char why[256];
    cJSON *actions = cJSON_CreateArray();
    cJSON *a = cJSON_CreateObject();
    cJSON *in = a ? cJSON_AddObjectToObject(a, "inputs") : NULL;
    cJSON *nodes = a ? cJSON_AddArrayToObject(a, "nodes") : NULL;
    bool ok = actions && a && in && nodes;

    snprintf(why, sizeof(why), "provider %s has no capacity for the gang's %zu nodes at once (%s): "
             "none kept, the set is asked for again elsewhere", pname, sc->n, tm_strerror(status));
    tm_log_warn("launch set refused for capacity", "set=%s nodes=%zu provider=%s type=%s zone=%s",
                sc->key, sc->n, pname, sc->m[0]->instance_type, sc->m[0]->zone);
    calls->stats->launch_errors++;
    shortage_remember(calls, sc->m[0], tm_clock_now_ms(calls->clock));
    /* One action, one decision for the set (migrations/0014_launch_set.sql). */
    ok = ok && cJSON_AddStringToObject(a, "op", "launch_set_failed") &&
         cJSON_AddStringToObject(a, "set", sc->key) && cJSON_AddStringToObject(a, "reason", why) &&
         cJSON_AddStringToObject(a, "pool", sc->m[0]->req.pool) &&
         cJSON_AddStringToObject(in, "provider", pname) &&
         cJSON_AddStringToObject(in, "instance_type", sc->m[0]->instance_type) &&
         cJSON_AddStringToObject(in, "zone", sc->m[0]->zone) &&
         cJSON_AddBoolToObject(in, "spot", sc->m[0]->spot) &&
         cJSON_AddNumberToObject(in, "set_size", (double)sc->n) &&
         cJSON_AddNumberToObject(in, "kept", 0);
    for (size_t k = 0; k < sc->n && ok; k++) {
        cJSON *id = cJSON_CreateNumber((double)sc->m[k]->node_id);
        ok = id != NULL;
        if (id)
            cJSON_AddItemToArray(nodes, id);
    }
    if (actions && a)
        cJSON_AddItemToArray(actions, a);
    else
        cJSON_Delete(a);
    if (ok && tm_store_apply(*calls->pool, *calls->epoch, tm_clock_now_ms(calls->clock), actions,
                             on_set_failed_recorded, sc) == 0) {
        cJSON_Delete(actions);
        return;
    }
    cJSON_Delete(actions);
    set_end(sc, true);
}

static void on_set(int status, const struct tm_instance *insts, size_t n, void *data)
{
    struct set_call *sc = data;
    struct tm_calls *calls = sc->calls;
    const char *pname = calls->cfg->providers[sc->provider].name;

    tm_fleet_stats_call(calls->fleet, (size_t)sc->provider, TM_FLEET_OP_LAUNCH, status);
    if (status == 0 && n == sc->n && !*calls->closing) {
        tm_crash_point("after_launch");
        for (size_t k = 0; k < sc->n; k++) {
            struct tm_call *c = sc->m[k];
            snprintf(c->instance_id, sizeof(c->instance_id), "%s", insts[k].id);
            tm_log_info("instance launched", "node=%" PRId64 " instance=%s provider=%s type=%s zone=%s "
                        "set=%s", c->node_id, insts[k].id, pname, insts[k].instance_type, insts[k].zone,
                        sc->key);
            calls->stats->launches++;
            c->set = NULL; /* on its own from here: the set goes below */
            if (tm_store_node_launched(*calls->pool, c->node_id, insts[k].id,
                                       tm_clock_now_ms(calls->clock), on_launch_recorded, c) < 0)
                launch_end(c);
        }
        set_free(sc);
        return;
    }
    if (status == TM_EQUOTA && !*calls->closing) {
        set_short(sc, status);
        return;
    }
    if (status < 0 && status != TM_ECANCELED) {
        calls->stats->launch_errors++;
        tm_log(status == TM_EAUTH ? TM_LOG_ERROR : TM_LOG_WARN,
               "could not launch set, will retry next tick", "set=%s nodes=%zu provider=%s error=%s",
               sc->key, sc->n, pname, tm_err_name(status));
    }
    set_end(sc, true);
}

/* Every member prepared: one call for the whole set (the provider's own
 * all-or-nothing call, else one by one released whole on a failure). */
static void set_go(struct set_call *sc)
{
    struct tm_launch_request *reqs = NULL;
    int r = TM_ENOMEM;

    if (sc->failed || *sc->calls->closing) {
        /* nothing asked of the cloud; the rows stay requested for the next pass */
        set_end(sc, false);
        return;
    }
    reqs = calloc(sc->n, sizeof(*reqs));
    if (reqs) {
        for (size_t k = 0; k < sc->n; k++) {
            reqs[k] = sc->m[k]->req;
            reqs[k].bootstrap = sc->m[k]->bootstrap;
            reqs[k].bootstrap_len = sc->m[k]->bootstrap_len;
        }
        const struct tm_config_pool *pool = NULL;
        for (size_t pi = 0; pi < sc->calls->cfg->npools; pi++)
            if (strcmp(sc->calls->cfg->pools[pi].name, sc->m[0]->req.pool) == 0)
                pool = &sc->calls->cfg->pools[pi];
        struct tm_launch_set set = {.reqs = reqs, .n = sc->n, .set_token = sc->key,
                                    .placement_group = pool ? pool->placement_group : NULL};
        tm_log_info("launch set", "set=%s nodes=%zu type=%s zone=%s", sc->key, sc->n,
                    sc->m[0]->instance_type, sc->m[0]->zone[0] ? sc->m[0]->zone : "-");
        r = sc->via->ops->launch_set ? sc->via->ops->launch_set(sc->via, &set, on_set, sc)
                                     : tm_provider_launch_set_each(sc->via, &set, on_set, sc);
    }
    free(reqs);
    /* The provider copied the requests: the secrets go now. */
    for (size_t k = 0; k < sc->n; k++)
        if (sc->m[k]->bootstrap) {
            OPENSSL_cleanse(sc->m[k]->bootstrap, sc->m[k]->bootstrap_len);
            free(sc->m[k]->bootstrap);
            sc->m[k]->bootstrap = NULL;
            sc->m[k]->req.bootstrap = NULL;
        }
    if (r < 0) {
        tm_log_warn("could not start launch set", "set=%s error=%s", sc->key, tm_err_name(r));
        tm_fleet_stats_call(sc->calls->fleet, (size_t)sc->provider, TM_FLEET_OP_LAUNCH, r);
        set_end(sc, false);
    }
}

static void set_member_prepared(struct tm_call *c, bool ok)
{
    struct set_call *sc = c->set;
    if (!ok)
        sc->failed = true;
    if (--sc->preparing == 0)
        set_go(sc);
}

/* The id of a launch's node: its own, or the one the apply gave a node
 * this plan requested; 0 when not inserted (a token clash). */
static int64_t launch_node_id(const struct tm_rc_plan_launch *l, const cJSON *new_nodes)
{
    const cJSON *n;
    if (l->node_id)
        return l->node_id;
    cJSON_ArrayForEach(n, new_nodes) {
        const cJSON *tok = cJSON_GetObjectItemCaseSensitive(n, "token");
        const cJSON *id = cJSON_GetObjectItemCaseSensitive(n, "id");
        if (cJSON_IsString(tok) && cJSON_IsNumber(id) && strcmp(tok->valuestring, l->token) == 0)
            return (int64_t)id->valuedouble;
    }
    return 0;
}

/* Launch i is a set's: start the whole set if i is its first member in the
 * plan and no member is in flight already. */
static void set_start(struct tm_calls *calls, struct tm_rc_plan *plan, size_t i,
                      struct tm_provider **providers, const cJSON *new_nodes)
{
    const struct tm_config *cfg = calls->cfg;
    const struct tm_rc_plan_launch *l = &plan->launches[i];
    const struct tm_config_pool *pool = &cfg->pools[l->pool];
    struct set_call *sc;
    size_t n = 0;
    int prov = -1;

    for (size_t k = 0; k < i; k++)
        if (strcmp(plan->launches[k].set, l->set) == 0)
            return; /* started with its first member */
    for (size_t p = 0; p < cfg->nproviders; p++)
        if (strcmp(cfg->providers[p].name, pool->provider) == 0)
            prov = (int)p;
    if (prov < 0 || !providers[prov])
        return;
    for (size_t k = i; k < plan->nlaunches; k++) {
        struct tm_rc_plan_launch *x = &plan->launches[k];
        if (strcmp(x->set, l->set) != 0)
            continue;
        x->node_id = launch_node_id(x, new_nodes);
        if (x->node_id == 0 || launching_has(calls, x->node_id))
            return; /* a member not inserted or in flight: the next pass sees */
        n++;
    }
    sc = calloc(1, sizeof(*sc));
    if (sc)
        sc->m = calloc(n, sizeof(*sc->m));
    if (!sc || !sc->m) {
        free(sc);
        return;
    }
    sc->calls = calls;
    sc->via = providers[prov];
    sc->provider = prov;
    snprintf(sc->key, sizeof(sc->key), "%s", l->set);
    for (size_t k = i; k < plan->nlaunches && sc->n < n; k++) {
        struct tm_rc_plan_launch *x = &plan->launches[k];
        struct tm_call *c;
        if (strcmp(x->set, l->set) != 0)
            continue;
        c = tm_calls_new(calls, prov, x->node_id);
        if (!c || launching_add(calls, x->node_id) < 0) {
            if (c)
                tm_call_done(c);
            sc->failed = true;
            break;
        }
        snprintf(c->token, sizeof(c->token), "%s", x->token);
        snprintf(c->instance_type, sizeof(c->instance_type), "%s", x->instance_type);
        snprintf(c->zone, sizeof(c->zone), "%s", x->zone);
        c->spot = x->capacity == TM_CAPACITY_SPOT;
        c->req = (struct tm_launch_request){
            .cluster = cfg->cluster, .pool = pool->name, .node_id = x->node_id, .token = c->token,
            .instance_type = c->instance_type, .zone = c->zone, .capacity = x->capacity,
        };
        c->launch_via = providers[prov];
        c->set = sc;
        sc->m[sc->n++] = c;
    }
    if (sc->failed || !pool->bootstrap) {
        set_go(sc);
        return;
    }
    /* Each member's enrollment secret stored before the cloud call. */
    sc->preparing = sc->n;
    for (size_t k = 0; k < sc->n; k++)
        enroll_then_launch(sc->m[k], pool);
}

void tm_calls_start(struct tm_calls *calls, struct tm_rc_plan *plan, struct tm_provider **providers,
                    const cJSON *applied)
{
    const struct tm_config *cfg = calls->cfg;
    const cJSON *new_nodes = applied ? cJSON_GetObjectItemCaseSensitive(applied, "nodes") : NULL;

    for (size_t i = 0; i < plan->nlaunches; i++) {
        struct tm_rc_plan_launch *l = &plan->launches[i];
        const struct tm_config_pool *pool = &cfg->pools[l->pool];
        int prov = -1;
        if (l->set[0]) {
            /* a gang's nodes: all of the set at once, with its first member */
            set_start(calls, plan, i, providers, new_nodes);
            continue;
        }
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
        if (prov < 0 || !providers[prov] || launching_has(calls, l->node_id))
            continue;
        struct tm_call *c = tm_calls_new(calls, prov, l->node_id);
        if (!c || launching_add(calls, l->node_id) < 0) {
            if (c)
                tm_call_done(c);
            continue;
        }
        snprintf(c->token, sizeof(c->token), "%s", l->token);
        snprintf(c->instance_type, sizeof(c->instance_type), "%s", l->instance_type);
        snprintf(c->zone, sizeof(c->zone), "%s", l->zone);
        c->spot = l->capacity == TM_CAPACITY_SPOT;
        c->req = (struct tm_launch_request){
            .cluster = cfg->cluster, .pool = pool->name, .node_id = l->node_id, .token = c->token,
            .instance_type = c->instance_type, .zone = c->zone, .capacity = l->capacity,
        };
        c->launch_via = providers[prov];
        if (pool->bootstrap)
            enroll_then_launch(c, pool);
        else
            launch_now(c);
    }
    const cJSON *kept = applied ? cJSON_GetObjectItemCaseSensitive(applied, "kept") : NULL;
    for (size_t i = 0; i < plan->nterminates; i++) {
        struct tm_rc_plan_terminate *t = &plan->terminates[i];
        struct tm_provider *p = providers[t->provider];
        if (!p || terminating_has(calls, t->instance_id))
            continue;
        if (node_kept(kept, t->node_id)) {
            /* The database refused the release (a job landed on the node
             * since the snapshot): terminating it in the cloud would kill
             * that job.  The next pass sees the node as it is now. */
            tm_log_info("release not applied, instance kept", "node=%" PRId64 " instance=%s",
                        t->node_id, t->instance_id);
            continue;
        }
        struct tm_call *c = tm_calls_new(calls, t->provider, t->node_id);
        if (!c || terminating_add(calls, t->instance_id) < 0) {
            if (c)
                tm_call_done(c);
            continue;
        }
        snprintf(c->instance_id, sizeof(c->instance_id), "%s", t->instance_id);
        int r = p->ops->terminate(p, t->instance_id, on_terminate, c);
        if (r < 0) {
            tm_fleet_stats_call(calls->fleet, t->provider, TM_FLEET_OP_TERMINATE, r);
            terminating_del(calls, t->instance_id);
            tm_call_done(c);
        }
    }
}

size_t tm_calls_shortages(struct tm_calls *calls, int64_t now_ms, struct tm_live_shortage *out)
{
    size_t n = 0;

    for (size_t i = 0; i < calls->nshortages; i++)
        if (calls->shortages[i].until_ms > now_ms)
            out[n++] = calls->shortages[i];
    calls->nshortages = n;
    memcpy(calls->shortages, out, n * sizeof(*calls->shortages));
    return n;
}

void tm_calls_release(struct tm_calls *calls)
{
    free(calls->launching);
    free(calls->terminating);
    calls->launching = NULL;
    calls->terminating = NULL;
    calls->nlaunching = calls->launching_cap = 0;
    calls->nterminating = calls->terminating_cap = 0;
}

/* ---- what a provider learned on its own ---------------------------------- */

static void on_notices_recorded(int status, const cJSON *result, const char *err,
                                const char *sqlstate, void *data)
{
    struct tm_call *c = data;

    (void)result;
    (void)sqlstate;
    if (status < 0 && status != TM_ECANCELED)
        tm_log_warn("could not record the provider's notices", "error=\"%s\"",
                    err ? err : tm_strerror(status));
    tm_call_done(c);
}

void tm_calls_notices(struct tm_calls *calls, struct tm_provider *p)
{
    struct tm_provider_notice n[16];
    size_t k = p && p->ops->notices ? p->ops->notices(p, n, sizeof(n) / sizeof(n[0])) : 0;
    cJSON *actions;
    struct tm_call *c;

    if (k == 0)
        return;
    actions = cJSON_CreateArray();
    for (size_t i = 0; actions && i < k; i++) {
        cJSON *a = cJSON_CreateObject();
        cJSON *in = a ? cJSON_AddObjectToObject(a, "inputs") : NULL;

        if (!in || !cJSON_AddStringToObject(a, "op", n[i].kind) ||
            !cJSON_AddStringToObject(a, "pool", n[i].pool) ||
            !cJSON_AddStringToObject(a, "reason", n[i].reason) ||
            !cJSON_AddStringToObject(in, "subject", n[i].subject) ||
            !cJSON_AddStringToObject(in, "state", n[i].state) || !cJSON_AddItemToArray(actions, a)) {
            cJSON_Delete(a);
            cJSON_Delete(actions);
            actions = NULL;
        }
    }
    c = actions ? tm_calls_new(calls, -1, 0) : NULL;
    if (!c || tm_store_apply(*calls->pool, *calls->epoch, tm_clock_now_ms(calls->clock), actions,
                             on_notices_recorded, c) < 0) {
        tm_log_warn("could not record the provider's notices", "notices=%zu", k);
        if (c)
            tm_call_done(c);
    }
    cJSON_Delete(actions);
}
