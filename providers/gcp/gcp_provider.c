/*
 * providers/gcp/gcp_provider.c: struct tm_provider_ops on Compute Engine
 * (see the header).
 *
 * Each provider call is a struct gcp_op with exactly one GCE call
 * outstanding until it delivers; the GCE client calls back exactly once,
 * even when closed (TM_ECANCELED), and never from inside tm_gce_call(), so
 * no op callback fires inside a provider call.
 */
#include "providers/gcp/gcp_provider.h"

#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "core/err.h"
#include "core/log.h"
#include "providers/common/launch.h"
#include "providers/common/settings.h"
#include "providers/gcp/gcp_config.h"
#include "providers/gcp/gcp_internal.h"

#define LIST_MAX_PAGES 10000
#define DEFAULT_IMAGE "projects/debian-cloud/global/images/family/debian-12"
#define PREEMPTED_FILTER "operationType = \"compute.instances.preempted\""

static const struct tm_provider_ops gcp_ops;

enum launch_step { STEP_FIND, STEP_INSERT };

struct check_item {               /* validate: one zone or one machine type */
    size_t pool;
    const char *zone;
    const char *type;             /* NULL: check the zone */
};

struct gcp_op {
    struct tm_gcp_provider *gp;
    union {
        tm_done_cb done;
        tm_list_cb list;
        tm_gcp_validate_cb validate;
    } cb;
    void *data;
    char name[TM_ID_MAX];         /* terminate: the instance */
    /* list */
    struct tm_instance *list;
    size_t nlist;
    unsigned pages;
    char *prev_token;
    size_t zone_i;                /* preempted-operations pass */
    /* validate */
    struct check_item *checks;
    size_t nchecks, check_i;
};

static struct tm_gcp_provider *impl(struct tm_provider *p) { return p->impl; }

static void op_free(struct gcp_op *op)
{
    free(op->list);
    free(op->prev_token);
    free(op->checks);
    free(op);
}

const char *tm_gcp_gpu_model(const char *acc)
{
    static const struct { const char *acc, *model; } map[] = {
        {"nvidia-tesla-a100", "A100"}, {"nvidia-a100-80gb", "A100"},
        {"nvidia-h100-80gb", "H100"},  {"nvidia-h100-mega-80gb", "H100"},
        {"nvidia-h200-141gb", "H200"}, {"nvidia-b200", "B200"},
        {"nvidia-l4", "L4"},           {"nvidia-tesla-t4", "T4"},
        {"nvidia-tesla-v100", "V100"}, {"nvidia-tesla-p100", "P100"},
        {"nvidia-tesla-p4", "P4"},     {"nvidia-tesla-k80", "K80"},
    };

    for (size_t i = 0; acc && i < sizeof(map) / sizeof(map[0]); i++)
        if (strcmp(map[i].acc, acc) == 0)
            return map[i].model;
    return "";
}

/* ---- shortage memory ---------------------------------------------------- */

bool tm_gcp_provider_is_short(struct tm_provider *p, const char *type, const char *zone,
                              enum tm_capacity_type capacity)
{
    return tm_launch_is_short(&impl(p)->launch, type, zone, capacity);
}

struct tm_gce *tm_gcp_provider_gce(struct tm_provider *p)
{
    return impl(p)->gce;
}

static uint64_t loop_now(void *loop) { return uv_now(loop); }

/* ---- launch: the engine's primitives on Compute Engine ------------------ */

/*
 * The engine (providers/common/launch.c) walks the offers; an offer is one
 * instances.insert named after the token, with a requestId made of the
 * token and the offer, so a repeated insert is the same insert and an
 * alreadyExists is our own instance, made by an attempt whose answer was
 * lost.  The instance's id is "zone/name": a zone is an offer only where
 * that fits TM_ID_MAX.
 */
struct gcp_launch {
    enum launch_step step;
    char name[TM_ID_MAX];
};

static struct tm_gcp_provider *launch_gp(const struct tm_launch *l)
{
    return (struct tm_gcp_provider *)(void *)((char *)l->env -
                                              offsetof(struct tm_gcp_provider, launch));
}

static bool launch_zone_fits(const void *launch, const char *zone)
{
    const struct gcp_launch *gl = ((const struct tm_launch *)launch)->priv;
    size_t n = strlen(gl->name);

    return tm_gcp_zone_fits_name(&n, zone);
}

static void on_launch_step(int status, const struct tm_gce_reply *reply, void *data);

static int gcp_launch_find(struct tm_launch *l)
{
    struct tm_gcp_provider *gp = launch_gp(l);
    struct gcp_launch *gl = l->priv;
    const struct tm_gce_kv terms[] = {{TM_GCE_LABEL_CLUSTER, gp->cluster, 0},
                                      {TM_GCE_LABEL_TOKEN, l->token, 0}};
    char filter[512];
    char *url;

    if (tm_gce_label_filter(terms, 2, filter, sizeof(filter)) < 0)
        return TM_EINVAL;
    url = tm_gce_url_aggregated_list(tm_gce_endpoint(gp->gce), tm_gce_project(gp->gce), filter,
                                     0, NULL);
    if (!url)
        return TM_ENOMEM;
    gl->step = STEP_FIND;
    return tm_gce_call(gp->gce, TM_GCE_AGGREGATED_LIST, "GET", url, NULL,
                       TM_GCE_RETRY_AMBIGUOUS, on_launch_step, l);
}

static int gcp_launch_create(struct tm_launch *l, size_t i)
{
    struct tm_gcp_provider *gp = launch_gp(l);
    struct gcp_launch *gl = l->priv;
    const struct tm_provider_pool *pool = tm_gcp_pool_find(gp, l->pool);
    const struct tm_launch_offer *c = &l->offers[i];
    char cl[64], pl[64], tk[64], rid[37];
    struct tm_gce_kv labels[4], meta[4];
    size_t nmeta = 0;
    char *body = NULL, *url;
    int r;

    if (tm_gce_label_encode(gp->cluster, cl, sizeof(cl)) < 0 ||
        tm_gce_label_encode(l->pool, pl, sizeof(pl)) < 0 ||
        tm_gce_label_encode(l->token, tk, sizeof(tk)) < 0)
        return TM_EINVAL;
    labels[0] = (struct tm_gce_kv){TM_GCE_LABEL_CLUSTER, cl, 0};
    labels[1] = (struct tm_gce_kv){TM_GCE_LABEL_POOL, pl, 0};
    labels[2] = (struct tm_gce_kv){TM_GCE_LABEL_NODE, l->node, 0};
    labels[3] = (struct tm_gce_kv){TM_GCE_LABEL_TOKEN, tk, 0};
    meta[nmeta++] = (struct tm_gce_kv){TM_GCE_META_CLUSTER, gp->cluster, 0};
    meta[nmeta++] = (struct tm_gce_kv){TM_GCE_META_POOL, l->pool, 0};
    meta[nmeta++] = (struct tm_gce_kv){TM_GCE_META_TOKEN, l->token, 0};
    if (l->bootstrap)
        meta[nmeta++] = (struct tm_gce_kv){"startup-script", l->bootstrap, l->bootstrap_len};
    {
        struct tm_gce_insert_params ip = {
            .name = gl->name, .zone = c->zone, .machine_type = l->type,
            .source_image = gp->image, .spot = c->capacity == TM_CAPACITY_SPOT,
            .labels = labels, .nlabels = 4, .metadata = meta, .nmetadata = nmeta,
        };

        if (!tm_gce_accelerator_optimized(l->type) && pool && pool->gpus > 0) {
            ip.accelerator_type = tm_gce_accelerator_for_model(pool->gpu_model);
            ip.accelerator_count = pool->gpus;
        }
        r = tm_gce_build_insert(&ip, &body);
        if (r < 0)
            return r;
    }
    tm_gce_request_id(l->token, c->zone, l->type, c->capacity == TM_CAPACITY_SPOT, rid);
    url = tm_gce_url_insert(tm_gce_endpoint(gp->gce), tm_gce_project(gp->gce), c->zone, rid);
    if (!url) {
        free(body);
        return TM_ENOMEM;
    }
    tm_log_info("gcp launch", "provider=%s pool=%s node=%lld token=%s type=%s zone=%s market=%s "
                "name=%s", gp->name, l->pool, (long long)l->node_id, l->token, l->type,
                c->zone, tm_capacity_type_name(c->capacity), gl->name);
    gl->step = STEP_INSERT;
    /* requestId makes a repeated insert the same insert: resets are retried. */
    return tm_gce_call(gp->gce, TM_GCE_INSERT, "POST", url, body,
                       TM_GCE_RETRY_AMBIGUOUS | TM_GCE_FOLLOW, on_launch_step, l);
}

/* The instance an insert made (its answer is an operation, not the
 * instance). */
static void made(const struct tm_launch *l, struct tm_instance *inst)
{
    const struct gcp_launch *gl = l->priv;
    const struct tm_launch_offer *c = &l->offers[l->cur];
    char id[2 * TM_ID_MAX + 2];

    memset(inst, 0, sizeof(*inst));
    /* The offers kept only zones for which zone/name fits. */
    snprintf(id, sizeof(id), "%s/%s", c->zone, gl->name);
    memcpy(inst->id, id, strnlen(id, TM_ID_MAX - 1));
    tm_id_copy(inst->token, l->token);
    tm_id_copy(inst->pool, l->pool);
    tm_id_copy(inst->instance_type, l->type);
    tm_id_copy(inst->zone, c->zone);
    inst->node_id = l->node_id;
    inst->capacity = c->capacity;
    inst->state = TM_INSTANCE_PENDING;
    inst->launched_ms = (int64_t)time(NULL) * 1000;
}

static const struct tm_instance *pick_found(const struct tm_gce_reply *reply)
{
    const struct tm_instance *best = NULL;

    for (size_t i = 0; i < reply->ninstances; i++) {
        const struct tm_instance *x = &reply->instances[i].inst;

        if (!x->token[0])
            continue;
        if (!best || (best->state == TM_INSTANCE_TERMINATED && x->state != TM_INSTANCE_TERMINATED))
            best = x;
    }
    return best;
}

static void on_launch_step(int status, const struct tm_gce_reply *reply, void *data)
{
    struct tm_launch *l = data;
    const struct gcp_launch *gl = l->priv;
    struct tm_instance inst;

    if (gl->step == STEP_FIND) {
        tm_launch_found(l, status, status < 0 ? NULL : pick_found(reply));
    } else if (status == 0 || status == TM_ECONFLICT) {
        /* alreadyExists: the name is the token's, so the instance is ours. */
        made(l, &inst);
        tm_launch_made(l, TM_LAUNCH_OK, 0, &inst, NULL);
    } else if (status == TM_EQUOTA) {
        tm_launch_made(l, TM_LAUNCH_SHORT, status, NULL, reply->error_code);
    } else if (reply->http_status == 0 && status != TM_EAUTH && status != TM_ENOMEM) {
        /* Unreachable past the client's budget: look by token before
         * trying again. */
        tm_launch_made(l, TM_LAUNCH_AMBIGUOUS, status, NULL, NULL);
    } else {
        tm_launch_made(l, TM_LAUNCH_FATAL, status, NULL, NULL);
    }
}

static int gcp_launch_prepare(struct tm_launch *l, const struct tm_launch_request *req)
{
    struct gcp_launch *gl = l->priv;
    char probe[64];

    if (tm_gce_label_encode(l->token, probe, sizeof(probe)) < 0 ||
        tm_gce_label_encode(l->pool, probe, sizeof(probe)) < 0) {
        tm_log_error("could not launch: token or pool does not fit a gcp label value",
                     "provider=%s pool=%s", launch_gp(l)->name, l->pool);
        return TM_EINVAL;
    }
    tm_gce_instance_name(req->node_id, req->token, gl->name);
    return 0;
}

static const struct tm_launch_backend gcp_launch_backend = {
    .cloud = "gcp",
    .priv_size = sizeof(struct gcp_launch),
    .zone_required = true,
    .found_by = "token",
    .prepare = gcp_launch_prepare,
    .zone_fits = launch_zone_fits,
    .find = gcp_launch_find,
    .create = gcp_launch_create,
};

static int gcp_launch(struct tm_provider *p, const struct tm_launch_request *req,
                      tm_launch_cb cb, void *data)
{
    return tm_launch_start(&impl(p)->launch, &gcp_launch_backend, req, cb, data);
}

/* ---- terminate ---------------------------------------------------------- */

static void on_terminate(int status, const struct tm_gce_reply *reply, void *data)
{
    struct gcp_op *op = data;

    (void)reply;
    if (status == 0)
        tm_log_info("gcp instance deleted", "provider=%s instance=%s", op->gp->name, op->name);
    op->cb.done(status, op->data);
    op_free(op);
}

static int gcp_terminate(struct tm_provider *p, const char *instance_id, tm_done_cb cb,
                         void *data)
{
    struct tm_gcp_provider *gp = impl(p);
    const char *slash = instance_id ? strchr(instance_id, '/') : NULL;
    char zone[TM_ID_MAX];
    struct gcp_op *op;
    char *url;
    int r;

    if (!cb || !tm_id_fits(instance_id) || !slash || slash == instance_id || !slash[1])
        return TM_EINVAL;
    if (gp->closing)
        return TM_ECANCELED;
    snprintf(zone, sizeof(zone), "%.*s", (int)(slash - instance_id), instance_id);
    url = tm_gce_url_delete(tm_gce_endpoint(gp->gce), tm_gce_project(gp->gce), zone, slash + 1);
    if (!url)
        return TM_EINVAL;
    op = calloc(1, sizeof(*op));
    if (!op) {
        free(url);
        return TM_ENOMEM;
    }
    op->gp = gp;
    op->cb.done = cb;
    op->data = data;
    snprintf(op->name, sizeof(op->name), "%s", instance_id);
    /* Deleting twice is harmless: retry resets too. */
    r = tm_gce_call(gp->gce, TM_GCE_DELETE, "DELETE", url, NULL,
                    TM_GCE_RETRY_AMBIGUOUS | TM_GCE_FOLLOW, on_terminate, op);
    if (r < 0)
        op_free(op);
    return r;
}

/* ---- list --------------------------------------------------------------- */

static int list_page(struct gcp_op *op, const char *page_token);
static int preempted_next(struct gcp_op *op, const char *page_token);

static void list_deliver(struct gcp_op *op, int status)
{
    if (status < 0)
        op->cb.list(status, NULL, 0, op->data);
    else
        op->cb.list(0, op->list, op->nlist, op->data);
    op_free(op);
}

static int list_add(struct gcp_op *op, const struct tm_instance *inst)
{
    struct tm_instance *g = realloc(op->list, (op->nlist + 1) * sizeof(*g));

    if (!g)
        return TM_ENOMEM;
    op->list = g;
    op->list[op->nlist++] = *inst;
    return 0;
}

static bool paging_stuck(struct gcp_op *op, const char *next)
{
    return ++op->pages >= LIST_MAX_PAGES || (op->prev_token && strcmp(op->prev_token, next) == 0);
}

static int remember_token(struct gcp_op *op, const char *next)
{
    char *copy = strdup(next);

    if (!copy)
        return TM_ENOMEM;
    free(op->prev_token);
    op->prev_token = copy;
    return 0;
}

static void on_preempted(int status, const struct tm_gce_reply *reply, void *data)
{
    struct gcp_op *op = data;
    int r;

    if (status < 0) {
        list_deliver(op, status);
        return;
    }
    for (size_t i = 0; i < reply->nops; i++) {
        const struct tm_gce_operation *o = &reply->ops[i];
        const char *name = strchr(o->target, '/');
        bool seen = false;
        struct tm_instance inst = {0};

        if (strcmp(o->type, "compute.instances.preempted") != 0 || !name ||
            strncmp(name + 1, "tm-", 3) != 0)
            continue;
        for (size_t j = 0; j < op->nlist && !seen; j++)
            if (strcmp(op->list[j].id, o->target) == 0) {
                op->list[j].interrupted = true; /* still listed, stopping */
                if (!op->list[j].notice_ms)
                    op->list[j].notice_ms = o->insert_ms;
                seen = true;
            }
        if (seen)
            continue;
        /* Preempted and already deleted (instanceTerminationAction DELETE). */
        snprintf(inst.id, sizeof(inst.id), "%s", o->target);
        snprintf(inst.zone, sizeof(inst.zone), "%.*s", (int)(name - o->target), o->target);
        inst.capacity = TM_CAPACITY_SPOT;
        inst.state = TM_INSTANCE_TERMINATED;
        inst.interrupted = true;
        inst.notice_ms = o->insert_ms;
        if (list_add(op, &inst) < 0) {
            list_deliver(op, TM_ENOMEM);
            return;
        }
    }
    if (reply->next_page_token) {
        if (paging_stuck(op, reply->next_page_token)) {
            list_deliver(op, TM_EBADREPLY);
            return;
        }
        r = remember_token(op, reply->next_page_token);
        if (r == 0)
            r = preempted_next(op, reply->next_page_token);
    } else {
        op->zone_i++;
        free(op->prev_token);
        op->prev_token = NULL;
        r = preempted_next(op, NULL);
    }
    if (r == 1)
        list_deliver(op, 0);
    else if (r < 0)
        list_deliver(op, r);
}

/* 1 when every spot zone has been read. */
static int preempted_next(struct gcp_op *op, const char *page_token)
{
    struct tm_gcp_provider *gp = op->gp;
    char *url;

    if (op->zone_i >= gp->nspot_zones)
        return 1;
    url = tm_gce_url_operations_list(tm_gce_endpoint(gp->gce), tm_gce_project(gp->gce),
                                     gp->spot_zones[op->zone_i], PREEMPTED_FILTER, page_token);
    if (!url)
        return TM_ENOMEM;
    return tm_gce_call(gp->gce, TM_GCE_OPERATIONS_LIST, "GET", url, NULL, TM_GCE_RETRY_AMBIGUOUS,
                       on_preempted, op);
}

static void on_list(int status, const struct tm_gce_reply *reply, void *data)
{
    struct gcp_op *op = data;
    int r;

    if (status < 0) {
        list_deliver(op, status);
        return;
    }
    for (size_t i = 0; i < reply->ninstances; i++) {
        /* The filter is the cluster's; a label that decodes to another
         * cluster (or none) is not ours. */
        if (strcmp(reply->instances[i].cluster, op->gp->cluster) != 0)
            continue;
        if (list_add(op, &reply->instances[i].inst) < 0) {
            list_deliver(op, TM_ENOMEM);
            return;
        }
    }
    if (reply->next_page_token) {
        if (paging_stuck(op, reply->next_page_token)) {
            tm_log_error("could not list gcp instances: paging does not end",
                         "provider=%s pages=%u", op->gp->name, op->pages);
            list_deliver(op, TM_EBADREPLY);
            return;
        }
        r = remember_token(op, reply->next_page_token);
        if (r == 0)
            r = list_page(op, reply->next_page_token);
        if (r < 0)
            list_deliver(op, r);
        return;
    }
    free(op->prev_token);
    op->prev_token = NULL;
    op->pages = 0;
    r = preempted_next(op, NULL);
    if (r == 1)
        list_deliver(op, 0);
    else if (r < 0)
        list_deliver(op, r);
}

static int list_page(struct gcp_op *op, const char *page_token)
{
    struct tm_gcp_provider *gp = op->gp;
    const struct tm_gce_kv terms[] = {{TM_GCE_LABEL_CLUSTER, gp->cluster, 0}};
    char filter[256];
    char *url;

    if (tm_gce_label_filter(terms, 1, filter, sizeof(filter)) < 0)
        return TM_EINVAL;
    url = tm_gce_url_aggregated_list(tm_gce_endpoint(gp->gce), tm_gce_project(gp->gce), filter,
                                     gp->page_size, page_token);
    if (!url)
        return TM_ENOMEM;
    return tm_gce_call(gp->gce, TM_GCE_AGGREGATED_LIST, "GET", url, NULL, TM_GCE_RETRY_AMBIGUOUS,
                       on_list, op);
}

static int gcp_list(struct tm_provider *p, const char *cluster, tm_list_cb cb, void *data)
{
    struct tm_gcp_provider *gp = impl(p);
    struct gcp_op *op;
    int r;

    if (!cb || !cluster || strcmp(cluster, gp->cluster) != 0)
        return TM_EINVAL;
    if (gp->closing)
        return TM_ECANCELED;
    op = calloc(1, sizeof(*op));
    if (!op)
        return TM_ENOMEM;
    op->gp = gp;
    op->cb.list = cb;
    op->data = data;
    r = list_page(op, NULL);
    if (r < 0)
        op_free(op);
    return r;
}

/* ---- prices ------------------------------------------------------------- */

static int gcp_price(struct tm_provider *p, const char *instance_type, const char *zone,
                     enum tm_capacity_type capacity, int64_t *ret)
{
    struct tm_gcp_provider *gp = impl(p);

    (void)zone;
    if (!instance_type || !ret)
        return TM_EINVAL;
    return tm_provider_types_price(gp->types, gp->ntypes, instance_type, capacity, ret);
}

/* ---- validate ----------------------------------------------------------- */

static int validate_next(struct gcp_op *op);

static void validate_deliver(struct gcp_op *op, int status, const char *reason)
{
    if (status == TM_EINVAL)
        tm_log_error("gcp pool refused", "provider=%s reason=\"%s\"", op->gp->name, reason);
    op->cb.validate(status, reason, op->data);
    op_free(op);
}

static void on_validate(int status, const struct tm_gce_reply *reply, void *data)
{
    struct gcp_op *op = data;
    const struct check_item *ck = &op->checks[op->check_i];
    const struct tm_provider_pool *pool = &op->gp->pools[ck->pool];
    char reason[512];
    int r;

    if (status == TM_ENOTFOUND) {
        if (ck->type)
            snprintf(reason, sizeof(reason), "pool \"%s\": machine type \"%s\" is unknown to gcp "
                     "in zone %s", pool->name, ck->type, ck->zone);
        else
            snprintf(reason, sizeof(reason), "pool \"%s\": zone \"%s\" is unknown to gcp",
                     pool->name, ck->zone);
        validate_deliver(op, TM_EINVAL, reason);
        return;
    }
    if (status < 0) {
        snprintf(reason, sizeof(reason), "could not check pool \"%s\" with gcp: %s%s%s",
                 pool->name, tm_strerror(status), reply->error_code[0] ? ": " : "",
                 reply->error_code);
        validate_deliver(op, status, reason);
        return;
    }
    if (ck->type) {
        const struct tm_gce_machine_type *mt = &reply->machine_type;
        const char *model = mt->gpus ? tm_gcp_gpu_model(mt->accelerator) : "";

        if (mt->gpus == 0 && !tm_gce_accelerator_for_model(pool->gpu_model)) {
            snprintf(reason, sizeof(reason), "pool \"%s\": machine type \"%s\" has no GPU and "
                     "GPU model \"%s\" has no accelerator type to attach", pool->name, ck->type,
                     pool->gpu_model);
            validate_deliver(op, TM_EINVAL, reason);
            return;
        }
        if (mt->gpus > 0 && (strcasecmp(model, pool->gpu_model) != 0 || mt->gpus != pool->gpus)) {
            snprintf(reason, sizeof(reason), "pool \"%s\": machine type \"%s\" has %d x %s, not "
                     "%d x %s", pool->name, ck->type, mt->gpus, mt->accelerator, pool->gpus,
                     pool->gpu_model);
            validate_deliver(op, TM_EINVAL, reason);
            return;
        }
    }
    op->check_i++;
    r = validate_next(op);
    if (r == 1)
        validate_deliver(op, 0, NULL);
    else if (r < 0)
        validate_deliver(op, r, "could not check pools with gcp");
}

static int validate_next(struct gcp_op *op)
{
    struct tm_gce *gce = op->gp->gce;
    const struct check_item *ck;
    char *url;

    if (op->check_i >= op->nchecks)
        return 1;
    ck = &op->checks[op->check_i];
    url = ck->type ? tm_gce_url_machine_type(tm_gce_endpoint(gce), tm_gce_project(gce), ck->zone,
                                             ck->type)
                   : tm_gce_url_zone(tm_gce_endpoint(gce), tm_gce_project(gce), ck->zone);
    if (!url)
        return TM_EINVAL;
    return tm_gce_call(gce, ck->type ? TM_GCE_MACHINE_TYPE_GET : TM_GCE_ZONE_GET, "GET", url, NULL,
                       TM_GCE_RETRY_AMBIGUOUS, on_validate, op);
}

int tm_gcp_validate_pools(struct tm_provider *p, tm_gcp_validate_cb cb, void *data)
{
    struct tm_gcp_provider *gp;
    struct gcp_op *op;
    size_t n = 0;
    int r;

    if (!p || p->ops != &gcp_ops || !cb)
        return TM_EINVAL;
    gp = impl(p);
    if (gp->closing)
        return TM_ECANCELED;
    for (size_t i = 0; i < gp->npools; i++)
        n += gp->pools[i].nzones + (gp->pools[i].nzones ? gp->pools[i].ntypes : 0);
    if (n == 0)
        return TM_EINVAL; /* a gcp provider without pools: nothing to check */
    op = calloc(1, sizeof(*op));
    if (op)
        op->checks = calloc(n, sizeof(*op->checks));
    if (!op || !op->checks) {
        free(op);
        return TM_ENOMEM;
    }
    op->gp = gp;
    op->cb.validate = cb;
    op->data = data;
    for (size_t i = 0; i < gp->npools; i++) {
        const struct tm_provider_pool *pl = &gp->pools[i];

        for (size_t z = 0; z < pl->nzones; z++)
            op->checks[op->nchecks++] = (struct check_item){i, pl->zones[z], NULL};
        for (size_t t = 0; pl->nzones && t < pl->ntypes; t++)
            op->checks[op->nchecks++] = (struct check_item){i, pl->zones[0], pl->types[t]};
    }
    r = validate_next(op);
    if (r != 0) {
        op_free(op);
        return r < 0 ? r : TM_EINVAL;
    }
    return 0;
}

/* ---- create / close ----------------------------------------------------- */

static void strv_free(char **v, size_t n)
{
    for (size_t i = 0; v && i < n; i++)
        free(v[i]);
    free(v);
}

static void provider_free(void *provider)
{
    struct tm_gcp_provider *gp = provider;

    tm_provider_pools_free(gp->pools, gp->npools);
    tm_provider_types_free(gp->types, gp->ntypes);
    strv_free(gp->spot_zones, gp->nspot_zones);
    free(gp->image);
    free(gp);
}

/* A GCE resource name: [a-z]([-a-z0-9]{0,61}[a-z0-9])?. */
static bool resource_name_ok(const char *s)
{
    size_t n = strlen(s);

    if (n == 0 || n > 63 || s[0] < 'a' || s[0] > 'z' || s[n - 1] == '-')
        return false;
    for (size_t i = 0; i < n; i++)
        if (!((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= '0' && s[i] <= '9') || s[i] == '-'))
            return false;
    return true;
}

static int copy_config(struct tm_gcp_provider *gp, const struct tm_config *cfg,
                       const struct tm_config_provider *prov)
{
    size_t nz = 0;
    int r = tm_provider_pools_copy(cfg, prov->name, &gp->pools, &gp->npools);

    if (r < 0 || (r = tm_provider_types_copy(prov, &gp->types, &gp->ntypes)) < 0)
        return r;
    for (size_t i = 0; i < gp->npools; i++) {
        const struct tm_config_pool *src = &cfg->pools[gp->pools[i].index];

        /* On GCP placement_group names a compact resource policy
         * (groupPlacementPolicy COLLOCATED) in the region, which a gang's
         * bulkInsert lists in resourcePolicies by name.  Whether it exists
         * only the cloud can say (at the first set); its form is checked
         * here. */
        if (src->placement_group && *src->placement_group &&
            !resource_name_ok(src->placement_group)) {
            tm_log_error("could not create gcp provider: pools[].placement_group is not a "
                         "resource policy name ([a-z]([-a-z0-9]{0,61}[a-z0-9])?)",
                         "provider=%s field=pools[%zu].placement_group", prov->name,
                         gp->pools[i].index);
            return TM_EINVAL;
        }
        nz += gp->pools[i].nzones;
    }
    /* The zones whose preemptions the listing reads: every spot pool's. */
    gp->spot_zones = calloc(nz ? nz : 1, sizeof(*gp->spot_zones));
    if (!gp->spot_zones)
        return TM_ENOMEM;
    for (size_t i = 0; i < gp->npools; i++) {
        const struct tm_provider_pool *pl = &gp->pools[i];

        for (size_t z = 0; pl->spot && z < pl->nzones; z++) {
            bool have = false;

            for (size_t k = 0; k < gp->nspot_zones; k++)
                have = have || strcmp(gp->spot_zones[k], pl->zones[z]) == 0;
            if (!have && !(gp->spot_zones[gp->nspot_zones++] = strdup(pl->zones[z])))
                return TM_ENOMEM;
        }
    }
    return 0;
}

int tm_gcp_resolve_auth(const struct tm_config_provider *prov, size_t index,
                        struct tm_gcp_key *key, struct tm_gcp_token_options *o, char *err,
                        size_t errsize)
{
    const struct tm_config_gcp *gc = tm_gcp_config(prov);
    const char *source = prov->credentials.source ? prov->credentials.source : "none";
    const char *env = getenv("GOOGLE_APPLICATION_CREDENTIALS");
    const char *path = NULL, *field = "credentials.file";
    char why[384];
    int r;

    memset(o, 0, sizeof(*o));
    memset(key, 0, sizeof(*key));
    if (gc) {
        o->token_url = gc->token_url;
        o->audience = gc->token_audience;
        o->metadata_url = gc->metadata_url;
    }
    if (strcmp(source, "file") == 0) {
        path = prov->credentials.file;
    } else if (strcmp(source, "env") == 0 || (strcmp(source, "none") == 0 && env && *env)) {
        path = env;
        field = "credentials (GOOGLE_APPLICATION_CREDENTIALS)";
        if (!path || !*path) {
            snprintf(err, errsize, "providers[%zu].credentials.source is \"env\" but "
                     "GOOGLE_APPLICATION_CREDENTIALS is not set", index);
            return TM_EINVAL;
        }
    } else if (strcmp(source, "instance_role") != 0 && strcmp(source, "none") != 0) {
        snprintf(err, errsize, "providers[%zu].credentials.source: \"%s\" is not a gcp source",
                 index, source);
        return TM_EINVAL;
    }
    if (!path) {
        o->source = TM_GCP_TOKEN_METADATA;
        return 0;
    }
    r = tm_gcp_key_load(path, key, why, sizeof(why));
    if (r < 0) {
        snprintf(err, errsize, "providers[%zu].%s: %s", index, field, why);
        return r;
    }
    o->source = TM_GCP_TOKEN_KEY;
    o->key = key;
    return 0;
}

int tm_gcp_provider_create_ex(uv_loop_t *loop, const struct tm_config *cfg,
                              const struct tm_config_provider *prov,
                              const struct tm_gcp_provider_options *opts, struct tm_provider **ret)
{
    struct tm_gcp_provider_options dflt = {0};
    struct tm_gce_options go = {0};
    struct tm_gcp_key key;
    struct tm_gcp_provider *gp;
    size_t index = 0;
    char err[512] = "";
    const char *image;
    const struct tm_config_gcp *gc;
    int r;

    if (!loop || !cfg || !prov || !ret || !prov->kind || strcmp(prov->kind, "gcp") != 0 ||
        !tm_id_fits(prov->name) || !cfg->cluster || !tm_id_fits(cfg->cluster))
        return TM_EINVAL;
    for (size_t i = 0; i < cfg->nproviders; i++)
        if (&cfg->providers[i] == prov)
            index = i;
    gc = tm_gcp_config(prov);
    if (!gc || !gc->project || !*gc->project) {
        tm_log_error("could not create gcp provider: providers[].project: missing",
                     "provider=%s field=providers[%zu].project", prov->name, index);
        return TM_EINVAL;
    }
    if (!opts) {
        dflt.retry.max_attempts = (unsigned)tm_provider_env_u64("TARMAC_GCP_MAX_ATTEMPTS", 0);
        dflt.retry.max_total_delay_ms = tm_provider_env_u64("TARMAC_GCP_MAX_RETRY_DELAY_MS", 0);
        dflt.retry.base_delay_ms = tm_provider_env_u64("TARMAC_GCP_BASE_DELAY_MS", 0);
        dflt.timeout_ms = (long)tm_provider_env_u64("TARMAC_GCP_TIMEOUT_MS", 0);
        dflt.list_page_size = (int)tm_provider_env_u64("TARMAC_GCP_PAGE_SIZE", 0);
        opts = &dflt;
    }
    r = tm_gcp_resolve_auth(prov, index, &key, &go.auth, err, sizeof(err));
    if (r < 0) {
        tm_log_error("could not create gcp provider: bad credentials", "provider=%s error=\"%s\"",
                     prov->name, err);
        return r;
    }
    gp = calloc(1, sizeof(*gp));
    if (!gp) {
        tm_gcp_key_release(&key);
        return TM_ENOMEM;
    }
    gp->base.ops = &gcp_ops;
    gp->base.impl = gp;
    gp->loop = loop;
    snprintf(gp->name, sizeof(gp->name), "%s", prov->name);
    snprintf(gp->cluster, sizeof(gp->cluster), "%s", cfg->cluster);
    gp->page_size = opts->list_page_size > 0 ? opts->list_page_size : 500;
    tm_shortages_init(&gp->shorts, "gcp", "type", gp->name, opts->shortage_ttl_ms);
    image = opts->image ? opts->image : gc->image_id ? gc->image_id : getenv("TARMAC_GCP_IMAGE");
    gp->image = strdup(image && *image ? image : DEFAULT_IMAGE);
    r = gp->image ? copy_config(gp, cfg, prov) : TM_ENOMEM;
    if (r < 0)
        goto fail;
    gp->launch = (struct tm_launch_env){
        .now_ms = loop_now, .clock = loop, .name = gp->name, .cluster = gp->cluster,
        .shorts = &gp->shorts, .pools = gp->pools, .npools = gp->npools, .max_relaunch = 3,
        .closing = &gp->closing, .free_provider = provider_free, .provider = gp,
    };
    go.endpoint = prov->endpoint;
    go.project = gc->project;
    go.retry = opts->retry;
    go.timeout_ms = opts->timeout_ms;
    go.auth_cooldown_ms = opts->auth_cooldown_ms;
    go.seed = opts->seed;
    r = tm_gce_create(loop, &go, &gp->gce);
    if (r < 0)
        goto fail;
    tm_gcp_key_release(&key);
    tm_log_info("gcp provider ready", "provider=%s project=%s endpoint=%s auth=%s pools=%zu",
                gp->name, gc->project, tm_gce_endpoint(gp->gce),
                go.auth.source == TM_GCP_TOKEN_KEY ? "service_account_key" : "metadata_server",
                gp->npools);
    *ret = &gp->base;
    return 0;
fail:
    tm_gcp_key_release(&key);
    provider_free(gp);
    return r;
}

int tm_gcp_provider_create(uv_loop_t *loop, const struct tm_config *cfg,
                           const struct tm_config_provider *prov, struct tm_provider **ret)
{
    return tm_gcp_provider_create_ex(loop, cfg, prov, NULL, ret);
}

static void gcp_close(struct tm_provider *p, void (*done)(void *data), void *data)
{
    struct tm_gcp_provider *gp = impl(p);

    /* Calls in flight come back with TM_ECANCELED, from the loop. */
    if (tm_launch_env_close(&gp->launch, done, data))
        tm_gce_close(gp->gce, tm_launch_env_closed, &gp->launch);
}

static const struct tm_provider_ops gcp_ops = {
    .name = "gcp",
    .launch = gcp_launch,
    .terminate = gcp_terminate,
    .list = gcp_list,
    .price = gcp_price,
    .close = gcp_close,
    /* instances.bulkInsert with minCount = count (gcp_launch_set.c). */
    .launch_set = tm_gcp_launch_set,
};
