/*
 * controller/reconcile/pass.c: what every step of the pass shares: the
 * plan writers, the snapshot lookups by id, and the facts about a job and
 * a pool that observe, schedule, budgets, route, fleet and moves all ask.
 * It calls no other file of the pass, so calls run one way: reconcile.c
 * -> the steps -> pass.c.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "controller/reconcile/internal.h"
#include "core/err.h"

static int cmp_id_index(const void *a, const void *b)
{
    int64_t x = ((const struct id_index *)a)->id, y = ((const struct id_index *)b)->id;
    return x < y ? -1 : x > y;
}

static int cmp_id_then_index(const void *a, const void *b)
{
    const struct id_index *x = a, *y = b;
    if (x->id != y->id)
        return x->id < y->id ? -1 : 1;
    return x->index < y->index ? -1 : x->index > y->index;
}

static struct id_index *id_index_build(size_t n, int64_t (*id_of)(const void *base, size_t i),
                                       const void *base)
{
    struct id_index *ix = malloc((n + 1) * sizeof(*ix));
    if (!ix)
        return NULL;
    for (size_t i = 0; i < n; i++)
        ix[i] = (struct id_index){.id = id_of(base, i), .index = (int32_t)i};
    qsort(ix, n, sizeof(*ix), cmp_id_index);
    return ix;
}

static int id_index_find(const struct id_index *ix, size_t n, int64_t id)
{
    struct id_index key = {.id = id};
    const struct id_index *hit = ix ? bsearch(&key, ix, n, sizeof(*ix), cmp_id_index) : NULL;
    return hit ? hit->index : -1;
}

static int64_t node_id_at(const void *base, size_t i)
{
    return ((const struct tm_snap_node *)base)[i].id;
}

static int64_t job_id_at(const void *base, size_t i)
{
    return ((const struct tm_snap_job *)base)[i].id;
}

/* Sorts the allocations by node and builds the id lookups of nodes and
 * jobs: p->alloc_nodes is allocated (nallocs + 1 entries) by the caller,
 * p->node_ids and p->job_ids here (NULL when out of memory). */
void tm_rc_index_build(struct pass *p)
{
    const struct tm_snapshot *s = p->in->snap;

    for (size_t a = 0; a < s->nallocs; a++)
        p->alloc_nodes[a] = (struct id_index){.id = s->allocs[a].node_id, .index = (int32_t)a};
    qsort(p->alloc_nodes, s->nallocs, sizeof(*p->alloc_nodes), cmp_id_then_index);
    p->node_ids = id_index_build(s->nnodes, node_id_at, s->nodes);
    p->job_ids = id_index_build(s->njobs, job_id_at, s->jobs);
}

void tm_launch_token(const char *cluster, const char *pool, int64_t now_ms, unsigned i,
                     char out[TM_ID_MAX])
{
    /* Cluster and pool keep tokens unique across clusters sharing an
     * account; now and i across passes.  Truncation keeps the suffix. */
    char buf[256];
    int n = snprintf(buf, sizeof(buf), "%s-%s-%" PRId64 "-%u", cluster, pool, now_ms, i);
    size_t len = n > 0 ? (size_t)n : 0;
    if (len >= sizeof(buf))
        len = sizeof(buf) - 1;
    if (len >= TM_ID_MAX) {
        memcpy(out, buf + len - (TM_ID_MAX - 1), TM_ID_MAX - 1);
        len = TM_ID_MAX - 1;
    } else {
        memcpy(out, buf, len);
    }
    out[len] = '\0';
}

cJSON *tm_rc_action(struct pass *p, const char *op, const char *reason)
{
    cJSON *a;

    if (p->err)
        return NULL;
    a = cJSON_CreateObject();
    if (!a || !cJSON_AddStringToObject(a, "op", op) ||
        !cJSON_AddStringToObject(a, "reason", reason)) {
        cJSON_Delete(a);
        p->err = TM_ENOMEM;
        return NULL;
    }
    cJSON_AddItemToArray(p->plan.actions, a);
    return a;
}

/* cJSON numbers are doubles: exact for ids and millisecond times < 2^53. */
void tm_rc_put_num(struct pass *p, cJSON *obj, const char *key, double v)
{
    if (obj && !cJSON_AddNumberToObject(obj, key, v))
        p->err = TM_ENOMEM;
}

void tm_rc_put_str(struct pass *p, cJSON *obj, const char *key, const char *v)
{
    if (obj && !cJSON_AddStringToObject(obj, key, v))
        p->err = TM_ENOMEM;
}

cJSON *tm_rc_inputs(struct pass *p, cJSON *a)
{
    cJSON *o;
    if (!a)
        return NULL;
    o = cJSON_AddObjectToObject(a, "inputs");
    if (!o)
        p->err = TM_ENOMEM;
    return o;
}

void tm_rc_add_terminate(struct pass *p, int provider, int64_t node_id, const char *instance_id)
{
    struct tm_rc_plan_terminate *t;

    if (p->err || !instance_id[0])
        return;
    if (p->plan.nterminates == p->term_cap) {
        size_t cap = p->term_cap ? 2 * p->term_cap : 16;
        void *m = realloc(p->plan.terminates, cap * sizeof(*t));
        if (!m) {
            p->err = TM_ENOMEM;
            return;
        }
        p->plan.terminates = m;
        p->term_cap = cap;
    }
    t = &p->plan.terminates[p->plan.nterminates++];
    t->provider = provider;
    t->node_id = node_id;
    snprintf(t->instance_id, sizeof(t->instance_id), "%s", instance_id);
}

void tm_rc_add_launch(struct pass *p, int64_t node_id, const char *token, int pool,
                       const char *type, const char *zone, enum tm_capacity_type cap)
{
    struct tm_rc_plan_launch *l;

    if (p->err)
        return;
    if (p->plan.nlaunches == p->launch_cap) {
        size_t c = p->launch_cap ? 2 * p->launch_cap : 16;
        void *m = realloc(p->plan.launches, c * sizeof(*l));
        if (!m) {
            p->err = TM_ENOMEM;
            return;
        }
        p->plan.launches = m;
        p->launch_cap = c;
    }
    l = &p->plan.launches[p->plan.nlaunches++];
    l->node_id = node_id;
    snprintf(l->token, sizeof(l->token), "%s", token);
    l->pool = pool;
    snprintf(l->instance_type, sizeof(l->instance_type), "%s", type);
    snprintf(l->zone, sizeof(l->zone), "%s", zone);
    l->capacity = cap;
    tm_launch_set_key(token, l->set);
}

int tm_rc_node_index(const struct pass *p, int64_t id)
{
    return id_index_find(p->node_ids, p->in->snap->nnodes, id);
}

int tm_rc_job_index(const struct pass *p, int64_t id)
{
    return id_index_find(p->job_ids, p->in->snap->njobs, id);
}

/* Whether a job may use a pool at all: model, size, pool pin, and
 * non-preemptible work never on spot capacity. */
bool tm_rc_pool_accepts(const struct tm_config_pool *pool, int pool_index,
                         const struct tm_snap_job *j)
{
    if (j->pool >= 0 && j->pool != pool_index)
        return false;
    if (!tm_gpu_model_accepts(j->gpu_model, pool->gpu_model))
        return false;
    if (j->gpus > pool->gpus_per_node)
        return false;
    if (!j->preemptible && strcmp(pool->capacity_type, "on_demand") != 0)
        return false;
    /* Switched to on-demand for its deadline (TM_PLANNER_DEADLINE_OD): from
     * then on it runs as non-preemptible work would. */
    if (j->on_demand_from_ms > 0 && strcmp(pool->capacity_type, "on_demand") != 0)
        return false;
    return true;
}

/* GPUs a job holds in milli-GPU: whole GPUs on every node of a gang, or its
 * share of one GPU (the estimator's and the ledger's measure). */
int64_t tm_rc_job_gpu_milli(const struct tm_snap_job *j)
{
    return j->gpus > 0 ? (int64_t)j->gpus * 1000 * j->nodes : j->gpu_milli;
}


/* The allocations on node id: entries [*lo, *hi) of p->alloc_nodes. */
void tm_rc_allocs_on_node(const struct pass *p, int64_t id, size_t *lo, size_t *hi)
{
    size_t n = p->in->snap->nallocs, a = 0, b = n;

    while (a < b) {
        size_t m = a + (b - a) / 2;
        if (p->alloc_nodes[m].id < id)
            a = m + 1;
        else
            b = m;
    }
    *lo = a;
    while (a < n && p->alloc_nodes[a].id == id)
        a++;
    *hi = a;
}

/* The running job behind entry k of p->alloc_nodes, or -1 when it is not
 * running or already leaves this pass (a gang is moved once). */
int tm_rc_running_job_at(const struct pass *p, size_t k)
{
    const struct tm_snapshot *s = p->in->snap;
    int ji = tm_rc_job_index(p, s->allocs[p->alloc_nodes[k].index].job_id);
    if (ji < 0 || p->job_leaving[ji] || s->jobs[ji].state != TM_JOB_RUNNING)
        return -1;
    return ji;
}

int64_t tm_rc_ran_ms(const struct pass *p, const struct tm_snap_job *j)
{
    return p->in->now_ms > j->started_ms ? p->in->now_ms - j->started_ms : 0;
}

/* A job's runtime estimate: its own, else predicted from similar finished
 * jobs (controller/sched/estimate.c), else 0 (unknown); less its checkpointed
 * progress. */
int64_t tm_rc_job_estimate(const struct tm_estimator *est, const struct tm_snap_job *j)
{
    return tm_rc_job_estimate_known(est, j, NULL);
}

int64_t tm_rc_job_estimate_known(const struct tm_estimator *est, const struct tm_snap_job *j, bool *ret_known)
{
    int64_t e = j->estimate_ms;
    int level = 0;
    if (e <= 0 && est) {
        struct tm_estimate_key k = {
            .team = j->team, .name = j->name, .klass = j->klass,
            .gpu_milli = (int32_t)tm_rc_job_gpu_milli(j),
        };
        e = tm_estimate_level(est, &k, &level);
    }
    if (ret_known)
        *ret_known = level == 1;
    /* A job resumed from a checkpoint runs only what is left. */
    if (e > 0 && j->progress_ms > 0)
        e = e > j->progress_ms ? e - j->progress_ms : 1;
    return e;
}

/* The cheapest type of a pool for a capacity type, by price per GPU-hour. */
const struct tm_config_instance_type *tm_rc_pool_type(const struct tm_config *cfg,
                                                       const struct tm_config_pool *pool,
                                                       enum tm_capacity_type cap)
{
    const struct tm_config_provider *prov = tm_config_provider_find(cfg, pool->provider);
    const struct tm_config_instance_type *best = NULL;
    int64_t best_price = INT64_MAX;

    if (!prov)
        return NULL;
    for (size_t i = 0; i < pool->ninstance_types; i++) {
        const struct tm_config_instance_type *t = tm_config_type_find(prov, pool->instance_types[i]);
        if (!t)
            continue;
        int64_t price = cap == TM_CAPACITY_SPOT ? t->spot_uusd_per_hour : t->on_demand_uusd_per_hour;
        if (cap == TM_CAPACITY_SPOT && price == 0)
            continue;
        if (price / t->gpus < best_price) {
            best_price = price / t->gpus;
            best = t;
        }
    }
    return best;
}

bool tm_rc_pool_is_od(const struct tm_config_pool *pool)
{
    return strcmp(pool->capacity_type, "on_demand") == 0;
}

/* Boot time the planner assumes for a pool: its provider kind's
 * (core/config_kind.h), kept in the provider at load. */
int64_t tm_rc_pool_boot_ms(const struct tm_config *cfg, const struct tm_config_pool *pool)
{
    const struct tm_config_provider *prov = tm_config_provider_find(cfg, pool->provider);
    return prov ? prov->boot_ms : TM_CONFIG_BOOT_MS_DEFAULT;
}
