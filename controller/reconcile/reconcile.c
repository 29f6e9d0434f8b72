/*
 * controller/reconcile/reconcile.c: see reconcile.h.  No I/O, no clock, no globals.
 *
 * A pass runs in this order, and the order of the actions in the plan is
 * the order tarmac_apply applies them:
 *   1. observe: match each live node to what its provider lists (by instance
 *      id, else by launch token), mark nodes ready, adopted or gone (their
 *      jobs requeued, the attempt's GPU time lost), act on interruption
 *      notices (cordon, checkpoint), and find instances nobody owns;
 *   2. schedule: the queued jobs onto ready nodes (controller/sched/scheduler.c);
 *   3. grow: request nodes for queued work no ready node can take, up to
 *      each pool's max, and up to its min;
 *   4. shrink: release nodes idle past their pool's grace, down to its min,
 *      and noticed nodes once empty.
 */
#include "controller/reconcile/reconcile.h"
#include "controller/reconcile/internal.h"

#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "controller/sched/estimate.h"
#include "controller/fleet/planner.h"
#include "controller/fleet/prices.h"
#include "core/clock.h"
#include "core/err.h"


static int cmp_id_index(const void *a, const void *b)
{
    int64_t x = ((const struct id_index *)a)->id, y = ((const struct id_index *)b)->id;
    return x < y ? -1 : x > y;
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

/* Instances of one listing sorted by a key (id or token) for bsearch. */
struct inst_index {
    const char *key;
    int32_t index;
};

static int cmp_inst_index(const void *a, const void *b)
{
    return strcmp(((const struct inst_index *)a)->key, ((const struct inst_index *)b)->key);
}

static int inst_index_find(const struct inst_index *ix, size_t n, const char *key)
{
    struct inst_index k = {.key = key};
    const struct inst_index *hit;
    if (!key[0])
        return -1;
    hit = bsearch(&k, ix, n, sizeof(*ix), cmp_inst_index);
    return hit ? hit->index : -1;
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

bool tm_gpu_model_accepts(const char *job_models, const char *node_model)
{
    size_t nlen = strlen(node_model);
    const char *p = job_models;

    if (!p || !*p)
        return true;
    while (*p) {
        const char *bar = strchr(p, '|');
        size_t len = bar ? (size_t)(bar - p) : strlen(p);
        if (len == nlen && strncmp(p, node_model, len) == 0)
            return true;
        if (!bar)
            break;
        p = bar + 1;
    }
    return false;
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
    struct tm_plan_terminate *t;

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

static void add_launch(struct pass *p, int64_t node_id, const char *token, int pool,
                       const char *type, const char *zone, enum tm_capacity_type cap)
{
    struct tm_plan_launch *l;

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
}

static int provider_index(const struct tm_config *cfg, const char *name)
{
    for (size_t i = 0; i < cfg->nproviders; i++)
        if (strcmp(cfg->providers[i].name, name) == 0)
            return (int)i;
    return -1;
}

static const struct tm_observed *observed_for(struct pass *p, int provider)
{
    if (provider < 0 || (size_t)provider >= p->in->nobserved)
        return NULL;
    return &p->in->observed[provider];
}

static void requeue_jobs_of_gone_node(struct pass *p, size_t ni, const char *state);
static void spot_notice(struct pass *p, size_t ni, int64_t notice_ms, const char *source);

static void node_gone(struct pass *p, size_t ni, const char *state, const char *reason)
{
    const struct tm_snap_node *n = &p->in->snap->nodes[ni];
    /* Its jobs first, each with the numbers of the attempt it loses. */
    requeue_jobs_of_gone_node(p, ni, state);
    cJSON *a = tm_rc_action(p, "node_gone", reason);
    tm_rc_put_num(p, a, "node", (double)n->id);
    tm_rc_put_str(p, a, "state", state);
    cJSON *in = tm_rc_inputs(p, a);
    tm_rc_put_str(p, in, "instance_id", p->node_instance[ni]);
    tm_rc_put_str(p, in, "was", tm_node_state_name(n->state));
    p->node_gone[ni] = true;
    p->plan.gone++;
}

/* Step 1: compare each live node with its provider's listing. */
static void observe(struct pass *p, bool **ret_matched)
{
    const struct tm_snapshot *s = p->in->snap;
    char why[256];

    size_t nobs = p->in->nobserved;
    struct inst_index **by_id = calloc(nobs + 1, sizeof(*by_id));
    struct inst_index **by_token = calloc(nobs + 1, sizeof(*by_token));

    if (!by_id || !by_token) {
        p->err = TM_ENOMEM;
        goto out;
    }
    for (size_t o = 0; o < nobs; o++) {
        const struct tm_observed *obs = &p->in->observed[o];
        ret_matched[o] = calloc(obs->n + 1, sizeof(bool));
        by_id[o] = malloc((obs->n + 1) * sizeof(**by_id));
        by_token[o] = malloc((obs->n + 1) * sizeof(**by_token));
        if (!ret_matched[o] || !by_id[o] || !by_token[o]) {
            p->err = TM_ENOMEM;
            goto out;
        }
        for (size_t i = 0; i < obs->n; i++) {
            by_id[o][i] = (struct inst_index){.key = obs->instances[i].id, .index = (int32_t)i};
            by_token[o][i] = (struct inst_index){.key = obs->instances[i].token, .index = (int32_t)i};
        }
        qsort(by_id[o], obs->n, sizeof(**by_id), cmp_inst_index);
        qsort(by_token[o], obs->n, sizeof(**by_token), cmp_inst_index);
    }

    for (size_t ni = 0; ni < s->nnodes; ni++) {
        const struct tm_snap_node *n = &s->nodes[ni];
        int prov = n->pool >= 0 ? p->pool_provider[n->pool] : -1;
        const struct tm_observed *obs = observed_for(p, prov);
        const struct tm_instance *inst = NULL;

        snprintf(p->node_instance[ni], TM_ID_MAX, "%s", n->instance_id);
        if (n->pool >= 0 && n->state != TM_NODE_TERMINATING)
            p->live[n->pool]++;
        if (!obs) {
            /* Provider not observed this pass: change nothing, but act on
             * a notice the node posted to the API. */
            if (n->notice_ms > 0 && n->state != TM_NODE_TERMINATING)
                spot_notice(p, ni, n->notice_ms, "posted to the API");
            continue;
        }
        /* By the instance id we recorded, else by the launch token tag. */
        int hit = inst_index_find(by_id[prov], obs->n, n->instance_id);
        if (hit < 0)
            hit = inst_index_find(by_token[prov], obs->n, n->token);
        if (hit >= 0) {
            inst = &obs->instances[hit];
            ret_matched[prov][hit] = true;
        }
        if (inst)
            snprintf(p->node_instance[ni], TM_ID_MAX, "%s", inst->id);

        bool dead = inst && (inst->state == TM_INSTANCE_TERMINATED ||
                             inst->state == TM_INSTANCE_STOPPED ||
                             inst->state == TM_INSTANCE_STOPPING);
        bool absent = !inst && obs->complete;
        const char *gone_state = inst && inst->interrupted ? "interrupted" : "terminated";
        /* The earliest notice known: the cloud's, or one posted to the API. */
        int64_t notice = n->notice_ms;
        const char *notice_from = "posted to the API";
        if (inst && !dead && inst->notice_ms > 0 && (notice == 0 || inst->notice_ms < notice)) {
            notice = inst->notice_ms;
            notice_from = "in the cloud's listing";
        }

        switch (n->state) {
        case TM_NODE_REQUESTED:
        case TM_NODE_BOOTING:
            if (inst && inst->state == TM_INSTANCE_RUNNING) {
                cJSON *a = tm_rc_action(p, "node_ready", "the cloud lists the instance running");
                tm_rc_put_num(p, a, "node", (double)n->id);
                tm_rc_put_str(p, a, "instance_id", inst->id);
                tm_rc_put_str(p, tm_rc_inputs(p, a), "zone", inst->zone);
                p->node_ready[ni] = !n->cordoned;
                p->plan.ready++;
            } else if (inst && dead) {
                snprintf(why, sizeof(why), "instance %s is %s before it became ready%s", inst->id,
                         tm_instance_state_name(inst->state),
                         inst->interrupted ? " (reclaimed by the cloud)" : "");
                node_gone(p, ni, gone_state, why);
            } else if (inst && n->state == TM_NODE_REQUESTED) {
                /* Launched by a pass that died before recording the id. */
                cJSON *a = tm_rc_action(p, "adopt", "instance found by its launch token");
                tm_rc_put_num(p, a, "node", (double)n->id);
                tm_rc_put_str(p, a, "instance_id", inst->id);
            } else if (!inst && n->state == TM_NODE_REQUESTED) {
                /* Intent recorded, no instance seen: (re)launch with the same
                 * token; the provider never makes a second instance for it. */
                int pool = n->pool;
                add_launch(p, n->id, n->token, pool, n->instance_type, n->zone, n->capacity);
            } else if (absent && n->state == TM_NODE_BOOTING) {
                node_gone(p, ni, "terminated", "the cloud no longer lists the instance");
            }
            /* A noticed node will never take work: not pending capacity. */
            if (!p->node_gone[ni] && n->pool >= 0 && !p->node_ready[ni] && notice == 0)
                p->pending_milli[n->pool] += (int64_t)n->gpus * 1000;
            break;
        case TM_NODE_READY:
        case TM_NODE_DRAINING:
            if (dead || absent) {
                snprintf(why, sizeof(why), "instance %s %s%s", p->node_instance[ni],
                         inst ? tm_instance_state_name(inst->state) : "is no longer listed",
                         inst && inst->interrupted ? " (reclaimed by the cloud)" : "");
                node_gone(p, ni, absent ? "terminated" : gone_state, why);
            } else if (n->state == TM_NODE_READY && !n->cordoned) {
                p->node_ready[ni] = true;
            }
            break;
        case TM_NODE_TERMINATING:
            if (dead && inst->state == TM_INSTANCE_TERMINATED) {
                node_gone(p, ni, gone_state, "terminated as asked");
            } else if (absent) {
                node_gone(p, ni, "terminated", "terminated as asked (no longer listed)");
            } else if (!dead || inst->state == TM_INSTANCE_STOPPED) {
                tm_rc_add_terminate(p, prov, n->id, p->node_instance[ni]);
            }
            break;
        default:
            break;
        }
        if (notice > 0 && !p->node_gone[ni] && n->state != TM_NODE_TERMINATING)
            spot_notice(p, ni, notice, notice_from);
    }

    /* Instances with our cluster tag and no live node: terminate them, but
     * only once a complete listing has shown it (never on a partial view). */
    for (size_t o = 0; o < p->in->nobserved; o++) {
        const struct tm_observed *obs = &p->in->observed[o];
        if (!obs->complete)
            continue;
        for (size_t i = 0; i < obs->n; i++) {
            const struct tm_instance *c = &obs->instances[i];
            if (ret_matched[o][i] || c->state == TM_INSTANCE_TERMINATED ||
                c->state == TM_INSTANCE_STOPPING)
                continue;
            snprintf(why, sizeof(why),
                     "instance carries cluster tag but no live node owns it (token \"%s\", node %" PRId64 ")",
                     c->token, c->node_id);
            cJSON *a = tm_rc_action(p, "orphan", why);
            tm_rc_put_str(p, a, "instance_id", c->id);
            cJSON *in = tm_rc_inputs(p, a);
            tm_rc_put_str(p, in, "provider", obs->provider);
            tm_rc_put_str(p, in, "pool", c->pool);
            tm_rc_add_terminate(p, (int)o, 0, c->id);
            p->plan.orphans++;
        }
    }
out:
    for (size_t o = 0; by_id && by_token && o < nobs; o++) {
        free(by_id[o]);
        free(by_token[o]);
    }
    free(by_id);
    free(by_token);
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
static bool pool_accepts(const struct tm_config_pool *pool, int pool_index,
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
    /* Switched to on-demand for its deadline (TM_PLAN_DEADLINE_OD): from
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

/* ---- spot interruptions -------------------------------------------------- */

static int cmp_id_then_index(const void *a, const void *b)
{
    const struct id_index *x = a, *y = b;
    if (x->id != y->id)
        return x->id < y->id ? -1 : 1;
    return x->index < y->index ? -1 : x->index > y->index;
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

/* A node that is gone takes the attempts of its jobs with it: each is
 * requeued (tarmac_apply's "requeue", before the node's own action) and the
 * GPU time it ran since it last started is lost, progress from earlier
 * checkpoints excepted.  The next start is attempt attempts + 1. */
static void requeue_jobs_of_gone_node(struct pass *p, size_t ni, const char *state)
{
    const struct tm_snapshot *s = p->in->snap;
    const struct tm_snap_node *n = &s->nodes[ni];
    size_t lo, hi;
    char why[256], kept[64] = "";

    tm_rc_allocs_on_node(p, n->id, &lo, &hi);
    for (size_t k = lo; k < hi; k++) {
        int ji = tm_rc_running_job_at(p, k);
        if (ji < 0)
            continue;
        const struct tm_snap_job *j = &s->jobs[ji];
        int64_t ran = tm_rc_ran_ms(p, j), milli = tm_rc_job_gpu_milli(j), lost = ran * milli / 1000;
        if (j->progress_ms > 0)
            snprintf(kept, sizeof(kept), "; %" PRId64 " s from checkpoints kept", j->progress_ms / 1000);
        else
            kept[0] = '\0';
        snprintf(why, sizeof(why),
                 "node %" PRId64 " %s: attempt %d lost after %" PRId64 " s on %g GPUs "
                 "(%.3f GPU-hours)%s; requeued for attempt %d",
                 n->id, state, j->attempts, ran / 1000, (double)milli / 1000.0, (double)lost / 3.6e6,
                 kept, j->attempts + 1);
        cJSON *a = tm_rc_action(p, "requeue", why);
        tm_rc_put_num(p, a, "job", (double)j->id);
        tm_rc_put_num(p, a, "node", (double)n->id);
        tm_rc_put_num(p, a, "started_ms", (double)j->started_ms);
        tm_rc_put_str(p, a, "cause", state);
        cJSON *in = tm_rc_inputs(p, a);
        tm_rc_put_num(p, in, "attempt", j->attempts);
        tm_rc_put_num(p, in, "next_attempt", j->attempts + 1);
        tm_rc_put_num(p, in, "ran_ms", (double)ran);
        tm_rc_put_num(p, in, "gpu_milli", (double)milli);
        tm_rc_put_num(p, in, "lost_gpu_ms", (double)lost);
        tm_rc_put_num(p, in, "lost_gpu_hours", (double)lost / 3.6e6);
        tm_rc_put_num(p, in, "progress_ms", (double)j->progress_ms);
        if (in && !cJSON_AddBoolToObject(in, "checkpointable", j->checkpointable))
            p->err = TM_ENOMEM;
        p->job_leaving[ji] = true;
        p->plan.requeued++;
    }
}

/* A node with an interruption notice takes no new work.  Its checkpointable
 * jobs checkpoint now and requeue with the runtime done so far kept, so
 * they lose nothing; the others run on, since they may finish before the
 * cloud takes the node, and are requeued when it goes.  Level-triggered:
 * the notice is recorded once ("spot_notice"), and a checkpoint is planned
 * while a checkpointable job still runs there; tarmac_apply guards each. */
static void spot_notice(struct pass *p, size_t ni, int64_t notice_ms, const char *source)
{
    const struct tm_snapshot *s = p->in->snap;
    const struct tm_snap_node *n = &s->nodes[ni];
    size_t lo, hi;
    int nckpt = 0, nrun = 0;
    char why[256];

    p->node_ready[ni] = false;
    p->node_noticed[ni] = true;
    tm_rc_allocs_on_node(p, n->id, &lo, &hi);
    for (size_t k = lo; k < hi; k++) {
        int ji = tm_rc_running_job_at(p, k);
        if (ji >= 0 && s->jobs[ji].checkpointable)
            nckpt++;
        else if (ji >= 0)
            nrun++;
    }
    if (!n->notice_recorded) {
        snprintf(why, sizeof(why),
                 "interruption notice %" PRId64 " s ago (%s): cordoned; %d checkpointable jobs "
                 "checkpoint and requeue, %d others run until the node goes",
                 (p->in->now_ms - notice_ms) / 1000, source, nckpt, nrun);
        cJSON *a = tm_rc_action(p, "spot_notice", why);
        tm_rc_put_num(p, a, "node", (double)n->id);
        tm_rc_put_num(p, a, "notice_ms", (double)notice_ms);
        cJSON *in = tm_rc_inputs(p, a);
        tm_rc_put_str(p, in, "source", source);
        tm_rc_put_str(p, in, "instance_id", p->node_instance[ni]);
        tm_rc_put_num(p, in, "checkpointing", nckpt);
        tm_rc_put_num(p, in, "running_on", nrun);
        p->plan.noticed++;
    }
    for (size_t k = lo; k < hi; k++) {
        int ji = tm_rc_running_job_at(p, k);
        if (ji < 0 || !s->jobs[ji].checkpointable)
            continue;
        const struct tm_snap_job *j = &s->jobs[ji];
        int64_t ran = tm_rc_ran_ms(p, j);
        snprintf(why, sizeof(why),
                 "interruption notice on node %" PRId64 ": checkpointed after %" PRId64
                 " s of attempt %d, %" PRId64 " s of progress kept, nothing lost; requeued",
                 n->id, ran / 1000, j->attempts, (j->progress_ms + ran) / 1000);
        cJSON *a = tm_rc_action(p, "checkpoint", why);
        tm_rc_put_num(p, a, "job", (double)j->id);
        tm_rc_put_num(p, a, "node", (double)n->id);
        tm_rc_put_num(p, a, "started_ms", (double)j->started_ms);
        cJSON *in = tm_rc_inputs(p, a);
        tm_rc_put_num(p, in, "notice_ms", (double)notice_ms);
        tm_rc_put_num(p, in, "attempt", j->attempts);
        tm_rc_put_num(p, in, "next_attempt", j->attempts + 1);
        tm_rc_put_num(p, in, "ran_ms", (double)ran);
        tm_rc_put_num(p, in, "progress_ms", (double)(j->progress_ms + ran));
        tm_rc_put_num(p, in, "lost_gpu_ms", 0);
        p->job_leaving[ji] = true;
        p->plan.checkpointed++;
    }
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

/* Step 2: run the scheduler over the ready nodes. */
static int64_t pool_boot_ms(const struct tm_config *cfg, const struct tm_config_pool *pool);

/* A queued preemptible job with a deadline whose on-demand start cannot
 * wait another tick.  The planner switches such a job (TM_PLAN_DEADLINE_OD)
 * only when it is still unplaced after scheduling; seen here first, it is
 * offered on-demand pools alone in the same pass instead of starting on
 * spot and being taken off it one pass later.  Same rule and inputs as the
 * planner's: its estimate (or the default use), the slowest boot of the
 * on-demand pools it may use, one tick. */
static bool deadline_due(const struct pass *p, const struct tm_snap_job *j)
{
    int64_t boot = 0, e;
    if (!j->deadline_ms || !j->preemptible || j->on_demand_from_ms > 0)
        return false;
    for (size_t pi = 0; pi < p->cfg->npools; pi++) {
        const struct tm_config_pool *pool = &p->cfg->pools[pi];
        if (strcmp(pool->capacity_type, "on_demand") == 0 && pool_accepts(pool, (int)pi, j) &&
            pool_boot_ms(p->cfg, pool) > boot)
            boot = pool_boot_ms(p->cfg, pool);
    }
    e = tm_rc_job_estimate(p->est, j);
    return p->in->now_ms + p->cfg->tick_interval_ms >
           tm_plan_deadline_switch_ms(j->deadline_ms, e > 0 ? e : TM_RC_DEFAULT_USE_MS, boot,
                                      p->cfg->tick_interval_ms);
}

/* Nodes a spot substitute is on its way to replace (linked, not gone).
 * Such a node takes no new work meanwhile: its jobs move to the
 * substitute once that is ready, and one started in between (perhaps one
 * that cannot checkpoint) would keep the on-demand node paid for to its
 * end.  Marks subbed[node index]. */
static void mark_substituted(const struct pass *p, bool *subbed)
{
    const struct tm_snapshot *s = p->in->snap;
    for (size_t ri = 0; ri < s->nnodes; ri++) {
        const struct tm_snap_node *r = &s->nodes[ri];
        int oi = r->replaces_node_id ? tm_rc_node_index(p, r->replaces_node_id) : -1;
        if (oi >= 0 && !p->node_gone[ri] && r->state != TM_NODE_TERMINATING)
            subbed[oi] = true;
    }
}

static void schedule(struct pass *p, bool *job_placed)
{
    const struct tm_snapshot *s = p->in->snap;
    struct tm_sched_job *jobs = NULL;
    struct tm_sched_node *nodes = NULL;
    struct tm_sched_alloc *allocs = NULL;
    int32_t *node_of = NULL;   /* sched node index -> snapshot node index */
    int32_t *job_of = NULL;    /* sched job index -> snapshot job index */
    int32_t *sched_node = NULL;/* snapshot node index -> sched node index */
    int32_t *alloc_of = NULL;  /* sched alloc index -> snapshot alloc index */
    bool *subbed = NULL;       /* snapshot node index -> a spot substitute is coming */
    const char **why_of = NULL;/* sched job index -> its note's reason */
    size_t *first = NULL;      /* sched job index -> its first entry in by_job */
    size_t *by_job = NULL;     /* placement indices grouped by job, in order */
    struct tm_sched_result res = {0};
    const struct tm_estimator *est = p->est;
    size_t nj = 0, nn = 0, na = 0;
    char why[256];

    jobs = calloc(s->njobs + 1, sizeof(*jobs));
    job_of = calloc(s->njobs + 1, sizeof(*job_of));
    nodes = calloc(s->nnodes + 1, sizeof(*nodes));
    node_of = calloc(s->nnodes + 1, sizeof(*node_of));
    sched_node = calloc(s->nnodes + 1, sizeof(*sched_node));
    subbed = calloc(s->nnodes + 1, sizeof(*subbed));
    allocs = calloc(s->nallocs + 1, sizeof(*allocs));
    alloc_of = calloc(s->nallocs + 1, sizeof(*alloc_of));
    if (!jobs || !job_of || !nodes || !node_of || !sched_node || !allocs || !alloc_of || !subbed) {
        p->err = TM_ENOMEM;
        goto out;
    }
    mark_substituted(p, subbed);

    /* The scheduler's "model" is the pool: a pool has one GPU model and one
     * capacity type, so a job's mask says which pools it may use. */
    for (size_t ni = 0; ni < s->nnodes; ni++) {
        const struct tm_snap_node *n = &s->nodes[ni];
        sched_node[ni] = -1;
        if (!p->node_ready[ni] || p->node_gone[ni] || n->pool < 0 || n->pool >= 63)
            continue;
        /* The elastic placement's preference: the smallest nodes, then
         * the oldest (ids grow with launches), as the elastic replay. */
        nodes[nn] = (struct tm_sched_node){
            .id = n->id, .cpu_milli = n->cpu_milli, .memory_mib = n->memory_mib,
            .gpus = n->gpus, .model = n->pool, .spot = n->capacity == TM_CAPACITY_SPOT,
            .schedulable = !subbed[ni], .rank = ((int64_t)n->gpus << 40) + (n->id & ((1LL << 40) - 1)),
        };
        node_of[nn] = (int32_t)ni;
        sched_node[ni] = (int32_t)nn++;
    }
    for (size_t a = 0; a < s->nallocs; a++) {
        const struct tm_snap_alloc *al = &s->allocs[a];
        int ni = tm_rc_node_index(p, al->node_id);
        int32_t sn = ni >= 0 ? sched_node[ni] : -1;
        if (ni >= 0)
            p->node_busy[ni] = true;
        if (sn < 0)
            continue;
        int ji = tm_rc_job_index(p, al->job_id);
        int64_t end = p->in->now_ms + 3600000;
        bool pre = false;
        if (ji >= 0) {
            const struct tm_snap_job *j = &s->jobs[ji];
            bool known;
            int64_t e = tm_rc_job_estimate_known(est, j, &known);
            pre = j->preemptible;
            if (e > 0)
                end = p->in->now_ms + tm_estimate_left(e, p->in->now_ms - j->started_ms, known);
        }
        alloc_of[na] = (int32_t)a;
        allocs[na++] = (struct tm_sched_alloc){
            .job_id = al->job_id, .node = sn, .gpu_mask = al->gpu_mask,
            .gpu_milli = al->gpu_milli, .cpu_milli = al->cpu_milli,
            .memory_mib = al->memory_mib, .end_ms = end, .preemptible = pre,
            .loaned = al->loaned,
        };
    }
    for (size_t ji = 0; ji < s->njobs; ji++) {
        const struct tm_snap_job *j = &s->jobs[ji];
        uint64_t mask = 0;
        if (j->state != TM_JOB_QUEUED || p->job_held[ji])
            continue;
        bool od_only = deadline_due(p, j);
        for (size_t pi = 0; pi < p->cfg->npools && pi < 63; pi++)
            if (pool_accepts(&p->cfg->pools[pi], (int)pi, j) &&
                (!od_only || strcmp(p->cfg->pools[pi].capacity_type, "on_demand") == 0))
                mask |= 1ull << pi;
        if (!mask)
            mask = 1ull << 63; /* no pool can take it: a model no node has */
        /* A held node that is gone or no longer schedulable: no hold. */
        int hn = j->hold_node_id ? tm_rc_node_index(p, j->hold_node_id) : -1;
        int32_t hold = hn >= 0 && sched_node[hn] >= 0 ? sched_node[hn] + 1 : 0;
        bool known;
        int64_t e = tm_rc_job_estimate_known(est, j, &known);
        jobs[nj] = (struct tm_sched_job){
            .id = j->id, .submit_ms = j->submitted_ms, .estimate_ms = e, .estimate_known = known,
            .cpu_milli = j->cpu_milli, .memory_mib = j->memory_mib, .model_mask = mask,
            .gpus = j->gpus, .gpu_milli = j->gpus > 0 ? 1000 : j->gpu_milli, .nodes = j->nodes,
            .priority = j->priority, .klass = j->klass, .preemptible = j->preemptible,
            .hold_node = hold, .hold_start_ms = hold ? j->hold_start_ms : 0,
        };
        job_of[nj++] = (int32_t)ji;
    }

    struct tm_sched_input in = {
        .jobs = jobs, .njobs = nj, .nodes = nodes, .nnodes = nn, .allocs = allocs,
        .nallocs = na, .now_ms = p->in->now_ms, .policy = p->in->policy,
        .params = {.starvation_ms = p->cfg->starvation_ms, .short_ms = 30 * 60000, .align_ends = true,
                   .elastic = true},
    };
    int r = tm_sched_run(&in, &res);
    if (r < 0) {
        p->err = r;
        goto out;
    }

    /* Each job's note and placements, found in O(1): a pass places up to
     * thousands of jobs, so no scan of every note or placement per job. */
    why_of = calloc(nj + 1, sizeof(*why_of));
    first = calloc(nj + 2, sizeof(*first));
    by_job = calloc(res.nplacements + 1, sizeof(*by_job));
    if (!why_of || !first || !by_job) {
        p->err = TM_ENOMEM;
        goto out;
    }
    for (size_t q = 0; q < res.nnotes; q++)
        if (res.notes[q].why)
            why_of[res.notes[q].job] = res.notes[q].why;
    for (size_t k = 0; k < res.nplacements; k++)
        first[res.placements[k].job + 1]++;
    for (size_t jx = 0; jx < nj; jx++)
        first[jx + 1] += first[jx];
    /* Counting sort: first[j] ends at job j's end, then shifts back to its start. */
    for (size_t k = 0; k < res.nplacements; k++)
        by_job[first[res.placements[k].job]++] = k;
    for (size_t jx = nj; jx > 0; jx--)
        first[jx] = first[jx - 1];
    first[0] = 0;

    /* One "place" action per job, with every node of a gang inside it, so
     * tarmac_apply places all of it or none. */
    for (size_t k = 0; k < res.nplacements; k++) {
        const struct tm_sched_placement *pl = &res.placements[k];
        if (job_placed[job_of[pl->job]])
            continue;
        const struct tm_snap_job *j = &s->jobs[job_of[pl->job]];
        const char *why_text = why_of[pl->job] ? why_of[pl->job] : "placed";
        snprintf(why, sizeof(why), "%s: %s", tm_sched_policy_name(p->in->policy), why_text);
        cJSON *a = tm_rc_action(p, "place", why);
        tm_rc_put_num(p, a, "job", (double)j->id);
        cJSON *arr = a ? cJSON_AddArrayToObject(a, "allocs") : NULL;
        if (a && !arr)
            p->err = TM_ENOMEM;
        cJSON *in_o = tm_rc_inputs(p, a);
        tm_rc_put_num(p, in_o, "gpus", j->gpus);
        tm_rc_put_num(p, in_o, "gpu_milli", j->gpu_milli);
        tm_rc_put_num(p, in_o, "waited_ms", (double)(p->in->now_ms - j->submitted_ms));
        tm_rc_put_num(p, in_o, "estimate_s", (double)(jobs[pl->job].estimate_ms / 1000));
        if (j->estimate_ms <= 0 && jobs[pl->job].estimate_ms > 0)
            tm_rc_put_str(p, in_o, "estimate_from",
                          jobs[pl->job].estimate_known ? "earlier runs of this job" : "history of similar jobs");
        for (size_t m = first[pl->job]; m < first[pl->job + 1] && arr; m++) {
            const struct tm_sched_placement *q = &res.placements[by_job[m]];
            const struct tm_snap_node *n = &s->nodes[node_of[q->node]];
            cJSON *o = cJSON_CreateObject();
            if (!o) {
                p->err = TM_ENOMEM;
                break;
            }
            cJSON_AddItemToArray(arr, o);
            tm_rc_put_num(p, o, "node", (double)n->id);
            tm_rc_put_num(p, o, "gpu_mask", q->gpu_mask);
            tm_rc_put_num(p, o, "gpu_milli", q->gpu_milli);
            tm_rc_put_num(p, o, "cpu_milli", (double)j->cpu_milli);
            tm_rc_put_num(p, o, "memory_mib", (double)j->memory_mib);
            if (q->loaned && !cJSON_AddTrueToObject(o, "loaned"))
                p->err = TM_ENOMEM;
            p->node_busy[node_of[q->node]] = true;
            p->node_placed[node_of[q->node]] = true;
        }
        job_placed[job_of[pl->job]] = true;
        p->plan.placed++;
    }
    /* Evictions first in the plan's order after placements is fine: the
     * apply guards each on the state it was computed from. */
    for (size_t k = 0; k < res.npreemptions; k++) {
        const struct tm_sched_preemption *pe = &res.preemptions[k];
        const struct tm_snap_alloc *al = &s->allocs[alloc_of[pe->alloc]];
        const struct tm_snap_job *owner = &s->jobs[job_of[pe->job]];
        snprintf(why, sizeof(why), "loaned capacity returned to job %" PRId64 " it was reserved for",
                 owner->id);
        cJSON *a = tm_rc_action(p, "preempt", why);
        tm_rc_put_num(p, a, "job", (double)al->job_id);
        cJSON *in_o = tm_rc_inputs(p, a);
        tm_rc_put_num(p, in_o, "node", (double)al->node_id);
        tm_rc_put_num(p, in_o, "for_job", (double)owner->id);
        p->plan.preempted++;
    }
    for (size_t k = 0; k < res.nreservations; k++) {
        const struct tm_sched_reservation *rv = &res.reservations[k];
        const struct tm_snap_job *j = &s->jobs[job_of[rv->job]];
        const struct tm_snap_node *n = &s->nodes[node_of[rv->node]];
        if (job_placed[job_of[rv->job]] || j->hold_node_id == n->id)
            continue;
        snprintf(why, sizeof(why), "reserved node %" PRId64 " from %" PRId64 " s from now", n->id,
                 (rv->start_ms - p->in->now_ms) / 1000);
        cJSON *a = tm_rc_action(p, "reserve", why);
        tm_rc_put_num(p, a, "job", (double)j->id);
        tm_rc_put_num(p, a, "node", (double)n->id);
        tm_rc_put_num(p, a, "start_ms", (double)rv->start_ms);
        p->plan.reserved++;
    }
    for (size_t q = 0; q < res.nnotes; q++) {
        const struct tm_sched_note *note = &res.notes[q];
        if (note->verdict == TM_SCHED_PLACED || job_placed[job_of[note->job]])
            continue;
        const struct tm_snap_job *j = &s->jobs[job_of[note->job]];
        snprintf(why, sizeof(why), "%s: %s", tm_sched_verdict_name(note->verdict),
                 note->why ? note->why : "");
        p->plan.waiting++;
        /* A reason is recorded when it changes, not every pass: a queue of
         * 100k jobs must not rewrite 100k rows per tick. */
        if (strcmp(why, j->reason) == 0)
            continue;
        cJSON *a = tm_rc_action(p, "wait", why);
        tm_rc_put_num(p, a, "job", (double)j->id);
        cJSON *in_o = tm_rc_inputs(p, a);
        tm_rc_put_str(p, in_o, "policy", tm_sched_policy_name(p->in->policy));
        if (note->start_ms > 0)
            tm_rc_put_num(p, in_o, "reserved_start_ms", (double)note->start_ms);
    }
out:
    tm_sched_result_release(&res);
    free(jobs);
    free(job_of);
    free(nodes);
    free(node_of);
    free(sched_node);
    free(subbed);
    free(allocs);
    free(alloc_of);
    free(why_of);
    free(first);
    free(by_job);
}

/* The cheapest type of a pool for a capacity type, by price per GPU-hour. */
static const struct tm_config_instance_type *pool_type(const struct tm_config *cfg,
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

/* ---- budgets ------------------------------------------------------------ */

#define UUSD_PER_CENT 10000
#define DEFAULT_USE_MS TM_RC_DEFAULT_USE_MS

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

static struct team_budget *team_budget(struct pass *p, const char *team)
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
        if (!pool_accepts(pool, (int)pi, j))
            continue;
        enum tm_capacity_type cap = strcmp(pool->capacity_type, "on_demand") == 0
                                        ? TM_CAPACITY_ON_DEMAND : TM_CAPACITY_SPOT;
        const struct tm_config_instance_type *t = pool_type(p->cfg, pool, cap);
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
static void budget_warn(struct pass *p, const struct team_budget *tb)
{
    if (!tb->b->hard && tb->projected_uusd * 100 >= tb->cap_uusd * tb->b->warn_percent)
        budget_note(p, "budget_warn", tb, 0, NULL);
}

/* Spent and committed spend against every cap, then admit queued jobs of
 * capped teams in submit order while their projection stays under a hard
 * cap; the others wait this pass (p->job_held), with the numbers. */
static void budgets(struct pass *p)
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
        int64_t use = n->state == TM_NODE_READY || n->state == TM_NODE_DRAINING ? 0 : DEFAULT_USE_MS;
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
        int64_t left = e > 0 ? tm_estimate_remaining(e, p->in->now_ms - j->started_ms) : DEFAULT_USE_MS;
        int64_t share = n->price_uusd_per_hour * tm_rc_job_gpu_milli(j) / ((int64_t)n->gpus * 1000);
        struct team_budget *tb = team_budget(p, j->team);
        if (tb && !tb->b->org)
            tb->projected_uusd += cost_uusd(p, share, left);
        if (p->org) /* a busy node runs until its last job ends, then its grace */
            p->org->projected_uusd += cost_uusd(p, share, left);
    }

    /* Admission of queued work against team hard caps, oldest first. */
    for (size_t ji = 0; ji < s->njobs; ji++) {
        const struct tm_snap_job *j = &s->jobs[ji];
        struct team_budget *tb;
        if (j->state != TM_JOB_QUEUED || !(tb = team_budget(p, j->team)) || tb->b->org)
            continue;
        int64_t e = tm_rc_job_estimate(p->est, j);
        int64_t cost = cost_uusd(p, job_uusd_per_gpu_hour(p, j) * tm_rc_job_gpu_milli(j) / 1000,
                                 e > 0 ? e : DEFAULT_USE_MS);
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
            }
            continue;
        }
        tb->projected_uusd += cost;
    }
    for (size_t i = 0; i < p->nteams; i++)
        budget_warn(p, &p->teams[i]);
}

/* ---- growth and release: the planner ------------------------------------ */

/* Launches and releases come from tm_plan_run (controller/fleet/planner.c), the
 * function the elastic replay runs, once per GPU model: its on-demand side
 * is the model's on_demand pools, its spot side the spot and
 * spot_then_on_demand pools (the latter allow on-demand fallback).  Each
 * launch is mapped back to a config pool of that capacity type listing the
 * chosen instance type; pool max and min, idle grace and the org's hard
 * cap are checked here per config pool. */

bool tm_rc_pool_is_od(const struct tm_config_pool *pool)
{
    return strcmp(pool->capacity_type, "on_demand") == 0;
}

/* The pool a queued job's new capacity comes from: preemptible work
 * prefers spot, then spot-then-on-demand, then on-demand; other work only
 * on-demand (pool_accepts).  -1 when no pool takes it. */
static int job_route(const struct tm_config *cfg, const struct tm_snap_job *j)
{
    int best = -1, best_rank = 99;
    for (size_t pi = 0; pi < cfg->npools; pi++) {
        const struct tm_config_pool *pool = &cfg->pools[pi];
        if (!pool_accepts(pool, (int)pi, j))
            continue;
        int rank = strcmp(pool->capacity_type, "spot") == 0 ? 0
                   : strcmp(pool->capacity_type, "spot_then_on_demand") == 0 ? 1 : 2;
        if (!j->preemptible)
            rank = 0;
        if (rank < best_rank) {
            best_rank = rank;
            best = (int)pi;
        }
    }
    return best;
}

/* GPUs a queued job asks of pool pi, in milli-GPU: a whole node per gang
 * member or full-node job, else its GPUs or share. */
static int64_t job_ask_milli(const struct tm_config_pool *pool, const struct tm_snap_job *j)
{
    if (j->nodes > 1 || j->gpus == pool->gpus_per_node)
        return (int64_t)j->nodes * pool->gpus_per_node * 1000;
    return j->gpus > 0 ? (int64_t)j->gpus * 1000 : j->gpu_milli;
}

int tm_reconcile_job_pool(const struct tm_config *cfg, const struct tm_snap_job *j)
{
    return job_route(cfg, j);
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
            pi = job_route(cfg, j);
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

/* Boot time the planner assumes for a pool: the sim provider's, else 3 min. */
static int64_t pool_boot_ms(const struct tm_config *cfg, const struct tm_config_pool *pool)
{
    const struct tm_config_provider *prov = tm_config_provider_find(cfg, pool->provider);
    return prov && strcmp(prov->kind, "sim") == 0 ? prov->boot_delay_ms : 180000;
}

static bool pool_lists_type(const struct tm_config_pool *pool, const char *type)
{
    for (size_t i = 0; i < pool->ninstance_types; i++)
        if (strcmp(pool->instance_types[i], type) == 0)
            return true;
    return false;
}

static bool pool_lists_zone(const struct tm_config_pool *pool, const char *zone)
{
    for (size_t i = 0; i < pool->nzones; i++)
        if (strcmp(pool->zones[i], zone) == 0)
            return true;
    return false;
}

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

static int type_index(struct tm_price_table *pr, const struct tm_config_instance_type *t)
{
    int i = tm_prices_find(pr, t->name);
    if (i >= 0 || pr->ntypes == TM_PRICES_TYPES_MAX)
        return i;
    struct tm_price_type *x = &pr->types[pr->ntypes];
    snprintf(x->name, sizeof(x->name), "%s", t->name);
    snprintf(x->gpu_model, sizeof(x->gpu_model), "%s", t->gpu_model);
    x->gpus = t->gpus;
    x->cpu_milli = t->cpu_milli;
    x->memory_mib = t->memory_mib;
    x->on_demand_uusd_per_hour = t->on_demand_uusd_per_hour;
    x->spot_uusd_per_hour = t->spot_uusd_per_hour;
    return (int)pr->ntypes++;
}


/* A launch the planner chose, on a config pool of its model: one listing
 * the type with that capacity type and room under max_nodes, preferring
 * one listing the zone.  -1 when every such pool is full. */
int tm_rc_launch_pool(struct pass *p, const bool *in_model, const char *type, const char *zone,
                       bool spot, bool fallback_od)
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
            if (spot ? od : (pass == 0 && fallback_od ? !fallback : !od))
                continue;
            if (pool_lists_zone(pool, zone))
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
    const struct tm_config *cfg = p->cfg;
    const struct tm_config_pool *pool = &cfg->pools[pi];
    char token[TM_ID_MAX];
    int64_t price = cap == TM_CAPACITY_SPOT ? t->spot_uusd_per_hour : t->on_demand_uusd_per_hour;

    tm_launch_token(cfg->cluster, pool->name, p->in->now_ms, (*seq)++, token);
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
    add_launch(p, 0, token, pi, t->name, zone, cap);
    p->live[pi]++;
    p->plan.requested++;
    return a;
}

/* The org's hard cap: a launch is priced for its boot, the longest work it
 * is for and its idle grace, this month.  false (and a refusal recorded)
 * when it would pass the cap. */
bool tm_rc_launch_admitted(struct pass *p, int pi, const struct tm_config_instance_type *t,
                            enum tm_capacity_type cap)
{
    const struct tm_config_pool *pool = &p->cfg->pools[pi];
    int64_t price = cap == TM_CAPACITY_SPOT ? t->spot_uusd_per_hour : t->on_demand_uusd_per_hour;
    int64_t use = p->pool_use_ms[pi] > 0 ? p->pool_use_ms[pi] : DEFAULT_USE_MS;
    int64_t launch = cost_uusd(p, price, pool_boot_ms(p->cfg, pool) + use + pool->idle_grace_ms);
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

/* The planner's spot hazard per (type, zone) of one model, from the
 * tables the configuration loaded (tm_config_spot_hazard: a fitted cell,
 * else its pool's spot_hazard).  Only when some spot pool of the model
 * has a table: without one the planner gets none and zones take turns, as
 * before.  A cell no spot pool offers is HUGE_VAL, so the planner never
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
            int ti = tm_prices_find(&f->pr, pool->instance_types[k]);
            for (size_t z = 0; ti >= 0 && z < pool->nzones; z++) {
                int zi = zone_index(&f->pr, pool->zones[z], false);
                double *cell = zi >= 0 ? &f->spot_zone_hazard[(size_t)ti * nz + (size_t)zi] : NULL;
                if (cell && *cell == HUGE_VAL)
                    *cell = tm_config_spot_hazard(cfg, pool, pool->instance_types[k], pool->zones[z], NULL);
            }
        }
    }
}

/* Build the planner's view of one GPU model's pools. */
static void fleet_build(struct pass *p, const bool *in_model, const bool *job_placed,
                        struct fleet *f, struct tm_plan_input *in)
{
    const struct tm_snapshot *s = p->in->snap;
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
        int side = tm_rc_pool_is_od(pool) ? TM_PLAN_POOL_OD : TM_PLAN_POOL_SPOT;
        if (!in_model[pi])
            continue;
        for (size_t k = 0; k < pool->ninstance_types && prov; k++) {
            const struct tm_config_instance_type *t = tm_config_type_find(prov, pool->instance_types[k]);
            if (t)
                type_index(&f->pr, t);
        }
        for (size_t z = 0; z < pool->nzones; z++)
            zone_index(&f->pr, pool->zones[z], true);
        if (side == TM_PLAN_POOL_SPOT)
            in->params.spot = true;
        if (strcmp(pool->capacity_type, "spot_then_on_demand") == 0)
            in->params.od_fallback = true;
        in->params.min_nodes[side] += pool->min_nodes;
        in->params.max_nodes[side] += pool->max_nodes;
        if (pool_boot_ms(cfg, pool) > in->params.boot_ms)
            in->params.boot_ms = pool_boot_ms(cfg, pool);
        if (pool->idle_grace_ms > grace_max)
            grace_max = pool->idle_grace_ms;
        if (pool->drain_oversized)
            in->params.drain_oversized = true;
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
    in->params.tick_ms = cfg->tick_interval_ms;
    in->params.idle_grace_ms = grace_max;
    in->params.disruption_nodes = all_limited ? (int32_t)(disrupt_nodes < INT32_MAX / 2 ? disrupt_nodes
                                                                                        : INT32_MAX / 2)
                                              : INT32_MAX / 2;
    in->params.recent_terminations = all_limited ? (int32_t)disrupt_recent : 0;
    /* Checkpoint plus restore of a move, as the elastic replay assumes:
     * moves and substitutions pay for themselves only past it. */
    in->params.move_cost_ms = TM_RC_MOVE_COST_MS;
    in->params.launch_use_ms = DEFAULT_USE_MS;

    /* Nodes: every live node of the model's pools. */
    for (size_t ni = 0; ni < s->nnodes; ni++) {
        const struct tm_snap_node *n = &s->nodes[ni];
        if (n->pool < 0 || !in_model[n->pool] || p->node_gone[ni] || n->state == TM_NODE_TERMINATING)
            continue;
        const struct tm_config_pool *pool = &cfg->pools[n->pool];
        const struct tm_config_provider *prov = tm_config_provider_find(cfg, pool->provider);
        const struct tm_config_instance_type *t = prov ? tm_config_type_find(prov, n->instance_type) : NULL;
        int ti = t ? type_index(&f->pr, t) : -1;
        int zi = zone_index(&f->pr, n->zone, true);
        if (ti < 0)
            continue;
        f->plan_of[ni] = (int32_t)f->nnodes;
        bool ready = n->state == TM_NODE_READY;
        struct tm_plan_node *x = &f->nodes[f->nnodes];
        *x = (struct tm_plan_node){
            .id = n->id, .type = ti, .zone = zi < 0 ? 0 : zi,
            .spot = n->capacity == TM_CAPACITY_SPOT, .ready = ready,
            /* A node a spot substitute will replace stays in: it still
             * holds its work, and counting it out would launch on-demand
             * capacity for that work ahead of the forecast.  The mapping
             * keeps it from a second substitution or a move. */
            .leaving = p->node_noticed[ni] || n->state == TM_NODE_DRAINING || n->cordoned,
            .free_whole = t->gpus, .only_preemptible = true,
            /* Work placed this pass is not known here: not movable. */
            .movable = !p->node_placed[ni], .cordoned = n->cordoned,
            .busy_until_ms = p->in->now_ms,
        };
        /* One grace per planner pass: shift each node's idle start so
         * that it passes the planner's grace when it passes its pool's. */
        x->idle_since_ms = (n->idle_since_ms > 0 ? n->idle_since_ms : p->in->now_ms) -
                           (grace_max - pool->idle_grace_ms);
        if (p->node_busy[ni] && !ready)
            x->jobs = 1;
        f->node_of[f->nnodes++] = (int32_t)ni;
    }
    /* Running jobs (allocations) and what this pass placed hold the nodes. */
    for (size_t a = 0; a < s->nallocs; a++) {
        const struct tm_snap_alloc *al = &s->allocs[a];
        int ni = tm_rc_node_index(p, al->node_id);
        int ji = tm_rc_job_index(p, al->job_id);
        if (ni < 0 || f->plan_of[ni] < 0)
            continue;
        size_t k = (size_t)f->plan_of[ni];
        struct tm_plan_node *x = &f->nodes[k];
        int32_t whole = __builtin_popcount(al->gpu_mask);
        int32_t milli = whole > 0 ? whole * 1000 : al->gpu_milli;
        const struct tm_snap_job *j = ji >= 0 ? &s->jobs[ji] : NULL;
        int64_t e = j ? tm_rc_job_estimate(p->est, j) : 0;
        int64_t left = j && e > 0 ? tm_estimate_remaining(e, p->in->now_ms - j->started_ms) : DEFAULT_USE_MS;
        x->used_milli += milli;
        x->free_whole -= whole > 0 ? whole : 0;
        x->jobs++;
        x->used_cpu_milli += al->cpu_milli;
        x->used_memory_mib += al->memory_mib;
        if (!j || !j->preemptible)
            x->only_preemptible = false;
        /* Movable: every job can checkpoint and resume elsewhere.  A gang
         * spans nodes, and moving it would stop the others too: never. */
        if (!j || !j->preemptible || !j->checkpointable || j->nodes > 1)
            x->movable = false;
        if (j && !j->checkpointable)
            x->lost_if_moved_milli_ms += (int64_t)milli * tm_rc_ran_ms(p, j);
        if (p->in->now_ms + left > x->busy_until_ms)
            x->busy_until_ms = p->in->now_ms + left;
        f->jobs[f->njobs++] = (struct tm_plan_job){
            .id = al->job_id, .gpus = whole, .milli = milli, .preemptible = j && j->preemptible,
            .on_spot = x->spot, .running = true, .node = (int32_t)k, .remaining_ms = left,
            .deadline_ms = j ? j->deadline_ms : 0, .cpu_milli = al->cpu_milli,
            .memory_mib = al->memory_mib};
    }
    for (size_t k = 0; k < f->nnodes; k++) {
        struct tm_plan_node *x = &f->nodes[k];
        int32_t g = f->pr.types[x->type].gpus;
        int32_t w = g - (x->used_milli + 999) / 1000;
        if (x->free_whole > w)
            x->free_whole = w;
        if (x->free_whole < 0)
            x->free_whole = 0;
        /* placed this pass, not yet an allocation: not idle */
        if (x->jobs == 0 && p->node_busy[f->node_of[k]])
            x->jobs = 1;
    }
    /* Queued work no node took this pass, routed to this model's pools. */
    for (size_t ji = 0; ji < s->njobs; ji++) {
        const struct tm_snap_job *j = &s->jobs[ji];
        if (j->state != TM_JOB_QUEUED || job_placed[ji] || p->job_held[ji])
            continue;
        int pi = job_route(cfg, j);
        if (pi < 0 || !in_model[pi])
            continue;
        const struct tm_config_pool *pool = &cfg->pools[pi];
        int64_t e = tm_rc_job_estimate(p->est, j);
        int32_t gpus = j->nodes > 1 || j->gpus == pool->gpus_per_node ? pool->gpus_per_node : j->gpus;
        for (int m = 0; m < (j->nodes > 1 ? j->nodes : 1); m++)
            f->jobs[f->njobs++] = (struct tm_plan_job){
                .id = j->id, .gpus = gpus, .milli = gpus > 0 ? gpus * 1000 : j->gpu_milli,
                .preemptible = j->preemptible && !tm_rc_pool_is_od(pool), .running = false, .node = -1,
                .remaining_ms = e > 0 ? e : DEFAULT_USE_MS, .deadline_ms = j->deadline_ms,
                .cpu_milli = j->cpu_milli, .memory_mib = j->memory_mib};
    }
    /* Shortages the caller remembers, by the table's indices. */
    for (size_t k = 0; k < p->in->nshortages; k++) {
        const struct tm_live_shortage *sh = &p->in->shortages[k];
        int ti = tm_prices_find(&f->pr, sh->instance_type);
        int zi = zone_index(&f->pr, sh->zone, false);
        if (ti < 0 || zi < 0 || sh->until_ms <= p->in->now_ms)
            continue;
        f->shortages[f->nshortages++] = (struct tm_plan_shortage){ti, zi, sh->spot, sh->until_ms};
        f->any_shortage = true;
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

/* One planner pass for the pools of one GPU model, its actions mapped to
 * plan ops. */
static void plan_model(struct pass *p, const bool *in_model, const bool *job_placed, unsigned *seq)
{
    const struct tm_snapshot *s = p->in->snap;
    const struct tm_config *cfg = p->cfg;
    struct fleet *f = calloc(1, sizeof(*f));
    struct tm_plan_input in;
    struct tm_plan_result res = {0};
    size_t maxjobs = s->nallocs + 1;
    char why[512];
    bool refused = false;

    for (size_t ji = 0; ji < s->njobs; ji++)
        maxjobs += s->jobs[ji].nodes > 1 ? (size_t)s->jobs[ji].nodes : 1;
    if (f) {
        f->nodes = calloc(s->nnodes + 1, sizeof(*f->nodes));
        f->node_of = calloc(s->nnodes + 1, sizeof(*f->node_of));
        f->plan_of = malloc((s->nnodes + 1) * sizeof(*f->plan_of));
        f->jobs = calloc(maxjobs, sizeof(*f->jobs));
        f->shortages = calloc(p->in->nshortages + 1, sizeof(*f->shortages));
    }
    if (!f || !f->nodes || !f->node_of || !f->plan_of || !f->jobs || !f->shortages) {
        p->err = TM_ENOMEM;
        goto out;
    }
    for (size_t ni = 0; ni < s->nnodes; ni++)
        f->plan_of[ni] = -1;
    fleet_build(p, in_model, job_placed, f, &in);
    if (f->pr.ntypes == 0)
        goto out;
    int r = tm_plan_run(&in, &res);
    if (r < 0) {
        p->err = r;
        goto out;
    }
    for (size_t k = 0; k < res.nactions && !p->err; k++) {
        const struct tm_plan_action *x = &res.actions[k];
        if (x->kind == TM_PLAN_LAUNCH) {
            /* Pool minimums are kept per config pool below; once the org's
             * hard cap refused one launch, none after it. */
            if (refused || x->pool_minimum)
                continue;
            const char *type = f->pr.types[x->type].name;
            const char *zone = f->pr.nzones ? f->pr.zones[x->zone] : "";
            int pi = tm_rc_launch_pool(p, in_model, type, zone, x->spot, x->od_fallback);
            if (pi < 0) {
                /* every pool of that kind is at its max */
                snprintf(why, sizeof(why), "every %s pool that lists %s is at its max_nodes; not "
                         "launched: %s", x->spot ? "spot" : "on-demand", type, x->reason);
                tm_rc_refuse(p, in_model, x->spot, "max_nodes", why);
                continue;
            }
            const struct tm_config_pool *pool = &cfg->pools[pi];
            const struct tm_config_provider *prov = tm_config_provider_find(cfg, pool->provider);
            const struct tm_config_instance_type *t = prov ? tm_config_type_find(prov, type) : NULL;
            enum tm_capacity_type cap = x->spot ? TM_CAPACITY_SPOT : TM_CAPACITY_ON_DEMAND;
            if (!t)
                continue;
            /* The planner's zone is its choice when a shortage ruled
             * zones out, or for spot when the table fits this pool's type
             * (the zone of lowest hazard with capacity).  Otherwise it is
             * only the first: the pool's zones take turns, as before. */
            bool by_hazard = x->spot && f->zone_hazards && pool_lists_zone(pool, zone) &&
                             tm_config_spot_cells_fitted(cfg, pool, type) > 0;
            if (!(f->any_shortage || by_hazard) || !pool_lists_zone(pool, zone))
                zone = pool->zones[(size_t)p->live[pi] % pool->nzones];
            if (!tm_rc_launch_admitted(p, pi, t, cap)) {
                refused = true;
                continue;
            }
            bool fitted = false;
            double hazard = by_hazard ? tm_config_spot_hazard(cfg, pool, type, zone, &fitted) : 0;
            snprintf(why, sizeof(why), "%s; pool %s has %d of max %d nodes", x->reason, pool->name,
                     p->live[pi], pool->max_nodes);
            if (by_hazard)
                snprintf(why + strlen(why), sizeof(why) - strlen(why),
                         "; zone %s: lowest spot hazard with capacity (%.4g per node-hour, %s)", zone,
                         hazard, fitted ? "fitted" : "the pool's");
            cJSON *a = tm_rc_request_node(p, pi, t, zone, cap, why, in.forecast_gpus[x->spot], seq);
            if (by_hazard) {
                /* "Every decision is explained": the figure behind the zone. */
                cJSON *ins = a ? cJSON_GetObjectItemCaseSensitive(a, "inputs") : NULL;
                tm_rc_put_num(p, ins, "spot_hazard_per_hour", hazard);
                tm_rc_put_str(p, ins, "spot_hazard_from", fitted ? "spot_hazards" : "pool");
            }
        } else if (x->kind == TM_PLAN_TERMINATE) {
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
        } else if (x->kind != TM_PLAN_WARN) {
            /* drain, move, substitute, deadline switch, refusal
             * (reconcile/moves.c); WARN: the org's soft cap is
             * budget_warn's, from the ledger */
            tm_rc_plan_other(p, in_model, f, &in, x, seq);
        }
    }
out:
    tm_plan_result_release(&res);
    if (f) {
        free(f->nodes);
        free(f->node_of);
        free(f->plan_of);
        free(f->jobs);
        free(f->shortages);
    }
    free(f);
}

/* Step 3: launches and releases from the planner, per GPU model, then
 * pool minimums and drained nodes. */
static void fleet(struct pass *p, const bool *job_placed)
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
    /* Unplaced work per pool: decisions' inputs and the hold on releases. */
    for (size_t ji = 0; ji < s->njobs; ji++) {
        const struct tm_snap_job *j = &s->jobs[ji];
        if (j->state != TM_JOB_QUEUED || job_placed[ji] || p->job_held[ji])
            continue;
        int pi = job_route(cfg, j);
        if (pi < 0)
            continue;
        int64_t e = tm_rc_job_estimate(p->est, j);
        if ((e > 0 ? e : DEFAULT_USE_MS) > p->pool_use_ms[pi])
            p->pool_use_ms[pi] = e > 0 ? e : DEFAULT_USE_MS;
        p->demand_milli[pi] += job_ask_milli(&cfg->pools[pi], j);
    }
    /* Substitutes first: the nodes they replace are leaving for the planner. */
    tm_rc_substitutes(p);
    for (size_t pi = 0; pi < np && !p->err; pi++) {
        if (done[pi])
            continue;
        for (size_t k = 0; k < np; k++)
            in_model[k] = !done[k] && strcmp(cfg->pools[k].gpu_model, cfg->pools[pi].gpu_model) == 0;
        for (size_t k = 0; k < np; k++)
            done[k] = done[k] || in_model[k];
        plan_model(p, in_model, job_placed, &seq);
    }
    /* Each pool's min_nodes, with the cheapest type of its capacity. */
    for (size_t pi = 0; pi < np && !p->err; pi++) {
        const struct tm_config_pool *pool = &cfg->pools[pi];
        enum tm_capacity_type cap = tm_rc_pool_is_od(pool) ? TM_CAPACITY_ON_DEMAND : TM_CAPACITY_SPOT;
        const struct tm_config_instance_type *t = pool_type(cfg, pool, cap);
        while (t && p->live[pi] < pool->min_nodes && !p->err) {
            if (!tm_rc_launch_admitted(p, (int)pi, t, cap))
                break;
            snprintf(why, sizeof(why), "pool %s is below min_nodes %d", pool->name, pool->min_nodes);
            tm_rc_request_node(p, (int)pi, t, pool->zones[(size_t)p->live[pi] % pool->nzones], cap, why,
                         -1, &seq);
        }
    }
    if (p->org)
        budget_warn(p, p->org);

    /* Drained and noticed nodes go once empty, whatever the planner says
     * (it sees them as leaving). */
    for (size_t ni = 0; ni < s->nnodes && !p->err; ni++) {
        const struct tm_snap_node *n = &s->nodes[ni];
        if (n->pool < 0 || p->node_gone[ni] || p->node_busy[ni])
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

int tm_reconcile(const struct tm_reconcile_input *in, struct tm_plan *ret)
{
    struct pass p = {.in = in, .cfg = in->cfg};
    const struct tm_snapshot *s = in->snap;
    size_t np = in->cfg->npools;
    bool **matched = NULL;
    bool *job_placed = NULL;
    int r;

    p.plan.actions = cJSON_CreateArray();
    p.pool_provider = calloc(np + 1, sizeof(int));
    p.live = calloc(np + 1, sizeof(int));
    p.pending_milli = calloc(np + 1, sizeof(int64_t));
    p.demand_milli = calloc(np + 1, sizeof(int64_t));
    p.node_gone = calloc(s->nnodes + 1, sizeof(bool));
    p.node_ready = calloc(s->nnodes + 1, sizeof(bool));
    p.node_busy = calloc(s->nnodes + 1, sizeof(bool));
    p.node_noticed = calloc(s->nnodes + 1, sizeof(bool));
    p.job_leaving = calloc(s->njobs + 1, sizeof(bool));
    p.alloc_nodes = malloc((s->nallocs + 1) * sizeof(*p.alloc_nodes));
    p.node_instance = calloc(s->nnodes + 1, TM_ID_MAX);
    matched = calloc(in->nobserved + 1, sizeof(bool *));
    job_placed = calloc(s->njobs + 1, sizeof(bool));
    if (!p.plan.actions || !p.pool_provider || !p.live || !p.pending_milli || !p.demand_milli ||
        !p.node_gone || !p.node_ready || !p.node_busy || !p.node_instance || !matched ||
        !job_placed || !p.node_noticed || !p.job_leaving || !p.alloc_nodes) {
        p.err = TM_ENOMEM;
        goto out;
    }
    for (size_t i = 0; i < np; i++)
        p.pool_provider[i] = provider_index(in->cfg, in->cfg->pools[i].provider);
    for (size_t a = 0; a < s->nallocs; a++)
        p.alloc_nodes[a] = (struct id_index){.id = s->allocs[a].node_id, .index = (int32_t)a};
    qsort(p.alloc_nodes, s->nallocs, sizeof(*p.alloc_nodes), cmp_id_then_index);
    p.node_ids = id_index_build(s->nnodes, node_id_at, s->nodes);
    p.job_ids = id_index_build(s->njobs, job_id_at, s->jobs);
    p.job_held = calloc(s->njobs + 1, sizeof(bool));
    p.pool_use_ms = calloc(np + 1, sizeof(int64_t));
    p.node_placed = calloc(s->nnodes + 1, sizeof(bool));
    p.node_replaced = calloc(s->nnodes + 1, sizeof(bool));
    p.job_switched = calloc(s->njobs + 1, sizeof(bool));
    p.disrupt_left = calloc(np + 1, sizeof(int));
    p.disrupt_recent = calloc(np + 1, sizeof(int));
    if (!p.node_ids || !p.job_ids || !p.job_held || !p.pool_use_ms || !p.node_placed ||
        !p.node_replaced || !p.job_switched || !p.disrupt_left || !p.disrupt_recent) {
        p.err = TM_ENOMEM;
        goto out;
    }
    /* History in, estimates out: rebuilt each pass from the snapshot, so
     * the pass stays a pure function of it. */
    if (s->nhistory > 0 && tm_estimator_new(&p.est) == 0) {
        for (size_t h = 0; h < s->nhistory; h++) {
            const struct tm_snap_history *hj = &s->history[h];
            struct tm_estimate_key k = {.team = hj->team, .name = hj->name, .klass = hj->klass,
                                        .gpu_milli = hj->gpu_milli};
            if (tm_estimator_observe(p.est, &k, hj->runtime_ms) < 0)
                break;
        }
    }

    observe(&p, matched);
    if (!p.err)
        tm_rc_disruption_init(&p);
    if (!p.err)
        budgets(&p);
    if (!p.err)
        schedule(&p, job_placed);
    if (!p.err)
        fleet(&p, job_placed);
out:
    r = p.err;
    if (matched)
        for (size_t o = 0; o < in->nobserved; o++)
            free(matched[o]);
    free(matched);
    free(job_placed);
    free(p.pool_provider);
    free(p.live);
    free(p.pending_milli);
    free(p.demand_milli);
    free(p.node_gone);
    free(p.node_ready);
    free(p.node_busy);
    free(p.node_noticed);
    free(p.job_leaving);
    free(p.node_placed);
    free(p.node_replaced);
    free(p.job_switched);
    free(p.disrupt_left);
    free(p.disrupt_recent);
    free(p.alloc_nodes);
    free(p.node_instance);
    free(p.node_ids);
    free(p.job_ids);
    free(p.job_held);
    free(p.pool_use_ms);
    free(p.teams);
    tm_estimator_free(p.est);
    if (r < 0) {
        tm_plan_release(&p.plan);
        return r;
    }
    *ret = p.plan;
    return 0;
}

void tm_plan_release(struct tm_plan *plan)
{
    cJSON_Delete(plan->actions);
    free(plan->launches);
    free(plan->terminates);
    memset(plan, 0, sizeof(*plan));
}
