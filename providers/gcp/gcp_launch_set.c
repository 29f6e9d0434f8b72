/*
 * providers/gcp/gcp_launch_set.c: a gang bought whole with
 * instances.bulkInsert (ops->launch_set, see provider.h).
 *
 * bulkInsert with minCount = count makes every instance or none, but the
 * instances share one instanceProperties: only the name can differ per
 * instance.  So the set is bought in two stages, and each stage leaves
 * something the next pass can recognise after a crash:
 *
 *   1. find     instances.aggregatedList filtered by the cluster and the
 *               set label (tarmac-launch-set = the set key): what an
 *               earlier call, or a call still in flight, already made.
 *   2. insert   instances.bulkInsert in one zone: count = minCount = N,
 *               perInstanceProperties keyed by the members' names (the
 *               name a single launch would give the node:
 *               tm_gce_instance_name(node id, member token), so each
 *               instance maps back to its node row by name), the shared
 *               labels cluster, pool, set key and, as the launch token,
 *               the set key itself; the shared startup-script is
 *               tm_gce_bulk_startup_script(), which waits for the node's
 *               own bootstrap.  requestId from (set key, zone, type,
 *               market): a call repeated after a crash gets the first
 *               one's operation.  Followed to DONE; ZONE_RESOURCE_POOL_
 *               EXHAUSTED and the like are TM_EQUOTA, remembered, and the
 *               next offering (zone x market) is tried.
 *   3. list     the set label again: all N must be there in that zone, or
 *               what is there is deleted and the set fails TM_EQUOTA.
 *   4. tag      per member, at once: instances.get (the two
 *               fingerprints), instances.setMetadata (its own launch
 *               token and its bootstrap as tarmac-bootstrap, with the
 *               shared items kept), then instances.setLabels (its node id
 *               and token), each with its fingerprint and a requestId
 *               from (token, fingerprint).  Only then is the set reported.
 *
 * Until step 4 has run, a member is listed with the set key as its launch
 * token: the reconciler treats such an instance as its set's (not an
 * orphan) while the set's rows are requested (observe.c set_pending), as
 * it does for EC2 CreateFleet.  A member already tagged with its own
 * token is not tagged again.
 *
 * Any failure after a bulkInsert went out ends in a release: the set
 * label is listed and everything found deleted before the caller hears
 * of the failure, so nothing is left billing (a member that cannot be
 * deleted now is found by the next pass by its cluster label).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/err.h"
#include "core/log.h"
#include "providers/gcp/gcp_internal.h"

#define SET_MAX 1000              /* bulkInsert's own limit on count */

enum set_step { SET_FIND, SET_INSERT, SET_LIST, SET_TAG, SET_RELEASE };

enum member_step { M_GET, M_METADATA, M_LABELS };

struct set_op;

struct member {
    struct set_op *op;
    char token[TM_ID_MAX];
    char name[TM_ID_MAX];
    int64_t node_id;
    char *bootstrap;
    size_t bootstrap_len;
    enum member_step step;
    char label_fp[64];            /* from instances.get (setMetadata keeps it) */
    struct tm_instance inst;      /* what the listing showed */
    bool found;
};

struct set_op {
    struct tm_gcp_provider *gp;
    tm_launch_set_cb cb;
    void *data;
    enum set_step step;
    char key[TM_ID_MAX], pool[TM_ID_MAX], type[TM_ID_MAX], zone[TM_ID_MAX];
    char policy[TM_ID_MAX];
    enum tm_capacity_type capacity;
    struct member *m;
    size_t n;
    struct tm_launch_offer cand[TM_LAUNCH_OFFER_MAX];
    size_t ncand, cur;
    bool inserted;                /* a bulkInsert went out: a failure releases */
    unsigned relaunches;
    size_t pending;               /* member calls or deletes in flight */
    int err;                      /* the failure reported once released */
    char set_zone[TM_ID_MAX];     /* where the set stands */
    enum tm_capacity_type set_capacity;
    bool zone_known;              /* set_zone read from the listing */
    unsigned pages;               /* of the listing under way */
    char *page;                   /* its last page token */
};

static void op_free(struct set_op *op)
{
    for (size_t i = 0; op->m && i < op->n; i++)
        if (op->m[i].bootstrap) {
            /* the bootstrap carries the node's enrollment secret */
            memset(op->m[i].bootstrap, 0, op->m[i].bootstrap_len);
            free(op->m[i].bootstrap);
        }
    free(op->m);
    free(op->page);
    free(op);
}

static void deliver_error(struct set_op *op, int status)
{
    op->cb(status, NULL, 0, op->data);
    op_free(op);
}

static void deliver_made(struct set_op *op)
{
    struct tm_instance *out = calloc(op->n, sizeof(*out));

    if (!out) {
        /* The instances stand, tagged: the next pass adopts them by token. */
        deliver_error(op, TM_ENOMEM);
        return;
    }
    for (size_t i = 0; i < op->n; i++) {
        struct tm_instance *x = &out[i];
        const struct member *mb = &op->m[i];
        char id[2 * TM_ID_MAX + 2];

        *x = mb->inst;
        /* zone/name fits: offers were kept only where it does, and a
         * listed instance's id was checked by the parser */
        snprintf(id, sizeof(id), "%s/%s", op->set_zone, mb->name);
        memcpy(x->id, id, strnlen(id, TM_ID_MAX - 1));
        x->id[strnlen(id, TM_ID_MAX - 1)] = '\0';
        snprintf(x->token, sizeof(x->token), "%s", mb->token);
        snprintf(x->pool, sizeof(x->pool), "%s", op->pool);
        snprintf(x->instance_type, sizeof(x->instance_type), "%s", op->type);
        snprintf(x->zone, sizeof(x->zone), "%s", op->set_zone);
        x->node_id = mb->node_id;
        x->capacity = op->set_capacity;
        if (!x->launched_ms)
            x->launched_ms = (int64_t)time(NULL) * 1000;
    }
    tm_log_info("gcp launch set made", "provider=%s pool=%s set=%s nodes=%zu type=%s zone=%s "
                "market=%s", op->gp->name, op->pool, op->key, op->n, op->type, op->set_zone,
                tm_capacity_type_name(op->set_capacity));
    op->cb(0, out, op->n, op->data);
    free(out);
    op_free(op);
}

/* ---- the set label listing ---------------------------------------------- */

static void on_step(int status, const struct tm_gce_reply *reply, void *data);

static int list_page(struct set_op *op, const char *page_token)
{
    struct tm_gcp_provider *gp = op->gp;
    const struct tm_gce_kv terms[] = {{TM_GCE_LABEL_CLUSTER, gp->cluster, 0},
                                      {TM_GCE_LABEL_SET, op->key, 0}};
    char filter[512];
    char *url;

    if (tm_gce_label_filter(terms, 2, filter, sizeof(filter)) < 0)
        return TM_EINVAL;
    url = tm_gce_url_aggregated_list(tm_gce_endpoint(gp->gce), tm_gce_project(gp->gce), filter,
                                     gp->page_size, page_token);
    if (!url)
        return TM_ENOMEM;
    return tm_gce_call(gp->gce, TM_GCE_AGGREGATED_LIST, "GET", url, NULL, TM_GCE_RETRY_AMBIGUOUS,
                       on_step, op);
}

/* A listing of the set label from its first page (every page is read). */
static int list_set(struct set_op *op)
{
    op->pages = 0;
    free(op->page);
    op->page = NULL;
    op->zone_known = false;
    for (size_t i = 0; i < op->n; i++)
        op->m[i].found = false;
    return list_page(op, NULL);
}

/* The next page when the reply has one: 1 when started, 0 when the
 * listing is complete, or a negative code (a repeated token is an error,
 * not a loop). */
static int list_more(struct set_op *op, const struct tm_gce_reply *reply)
{
    const char *next = reply->next_page_token;
    char *copy;
    int r;

    if (!next)
        return 0;
    if (++op->pages > 2 * SET_MAX || (op->page && strcmp(op->page, next) == 0))
        return TM_EBADREPLY;
    copy = strdup(next);
    if (!copy)
        return TM_ENOMEM;
    free(op->page);
    op->page = copy;
    r = list_page(op, next);
    return r < 0 ? r : 1;
}

static bool alive(const struct tm_instance *x)
{
    return x->state != TM_INSTANCE_TERMINATED && x->state != TM_INSTANCE_STOPPED &&
           x->state != TM_INSTANCE_STOPPING;
}

static bool ours(const struct set_op *op, const struct tm_gce_instance *g)
{
    return strcmp(g->cluster, op->gp->cluster) == 0 && strcmp(g->set_key, op->key) == 0;
}

/* Mark the members a page shows alive: in zone, or (zone NULL) in the zone
 * of the first one found, which becomes the set's. */
static void match_page(struct set_op *op, const struct tm_gce_reply *reply, const char *zone)
{
    for (size_t k = 0; k < reply->ninstances; k++) {
        const struct tm_gce_instance *g = &reply->instances[k];

        if (!ours(op, g) || !alive(&g->inst))
            continue;
        if (zone && strcmp(g->inst.zone, zone) != 0)
            continue;
        if (!zone && op->zone_known && strcmp(g->inst.zone, op->set_zone) != 0)
            continue;
        for (size_t i = 0; i < op->n; i++) {
            struct member *mb = &op->m[i];

            if (mb->found || strcmp(mb->name, g->name) != 0)
                continue;
            if (!zone && !op->zone_known) {
                snprintf(op->set_zone, sizeof(op->set_zone), "%s", g->inst.zone);
                op->set_capacity = g->inst.capacity;
                op->zone_known = true;
            }
            mb->inst = g->inst;
            mb->found = true;
            break;
        }
    }
}

static size_t members_found(const struct set_op *op)
{
    size_t n = 0;

    for (size_t i = 0; i < op->n; i++)
        n += op->m[i].found;
    return n;
}

/* ---- release: delete what the set label shows, then report err ---------- */

static void on_deleted(int status, void *data)
{
    struct set_op *op = data;

    if (status < 0 && status != TM_ENOTFOUND)
        tm_log_warn("could not delete a member of a failed gcp launch set, the next pass finds "
                    "it by its cluster label", "provider=%s set=%s error=%s", op->gp->name,
                    op->key, tm_err_name(status));
    if (--op->pending == 0)
        deliver_error(op, op->err);
}

static void release(struct set_op *op, int err)
{
    int r;

    op->err = err;
    if (!op->inserted || err == TM_ECANCELED || op->gp->closing) {
        deliver_error(op, err);
        return;
    }
    tm_log_warn("gcp launch set failed, deleting what it made", "provider=%s set=%s nodes=%zu "
                "error=%s", op->gp->name, op->key, op->n, tm_err_name(err));
    op->step = SET_RELEASE;
    op->pending = 1; /* held until the listing ends and every delete started */
    r = list_set(op);
    if (r < 0) {
        tm_log_warn("could not list a failed gcp launch set to delete it, the next pass finds it "
                    "by its cluster label", "provider=%s set=%s error=%s", op->gp->name, op->key,
                    tm_err_name(r));
        on_deleted(0, op);
    }
}

static void release_page(struct set_op *op, int status, const struct tm_gce_reply *reply)
{
    struct tm_provider *p = &op->gp->base;

    for (size_t k = 0; status == 0 && k < reply->ninstances; k++) {
        const struct tm_gce_instance *g = &reply->instances[k];

        if (!ours(op, g) || g->inst.state == TM_INSTANCE_TERMINATED ||
            g->inst.state == TM_INSTANCE_STOPPING)
            continue;
        op->pending++;
        if (p->ops->terminate(p, g->inst.id, on_deleted, op) < 0) {
            tm_log_warn("could not start deleting a member of a failed gcp launch set, the next "
                        "pass finds it by its cluster label", "provider=%s instance=%s",
                        op->gp->name, g->inst.id);
            op->pending--;
        }
    }
    if (status == 0)
        status = list_more(op, reply);
    if (status == 1)
        return;
    if (status < 0)
        tm_log_warn("could not list a failed gcp launch set to delete it, the next pass finds it "
                    "by its cluster label", "provider=%s set=%s error=%s", op->gp->name, op->key,
                    tm_err_name(status));
    on_deleted(0, op);
}

/* ---- insert ------------------------------------------------------------- */

/* The bulkInsert for offer c; 0 once sent. */
static int send_insert(struct set_op *op, const struct tm_launch_offer *c)
{
    struct tm_gcp_provider *gp = op->gp;
    const struct tm_provider_pool *pool = tm_gcp_pool_find(gp, op->pool);
    char cl[64], pl[64], sk[64], rid[37];
    const char **names;
    struct tm_gce_kv labels[4], meta[4];
    size_t nmeta = 0;
    bool bootstrap = false;
    char *body = NULL, *url;
    int r;

    for (size_t i = 0; i < op->n; i++)
        bootstrap = bootstrap || op->m[i].bootstrap;
    if (tm_gce_label_encode(gp->cluster, cl, sizeof(cl)) < 0 ||
        tm_gce_label_encode(op->pool, pl, sizeof(pl)) < 0 ||
        tm_gce_label_encode(op->key, sk, sizeof(sk)) < 0)
        return TM_EINVAL;
    labels[0] = (struct tm_gce_kv){TM_GCE_LABEL_CLUSTER, cl, 0};
    labels[1] = (struct tm_gce_kv){TM_GCE_LABEL_POOL, pl, 0};
    labels[2] = (struct tm_gce_kv){TM_GCE_LABEL_SET, sk, 0};
    /* The set key stands for every member's token until each is tagged. */
    labels[3] = (struct tm_gce_kv){TM_GCE_LABEL_TOKEN, sk, 0};
    meta[nmeta++] = (struct tm_gce_kv){TM_GCE_META_CLUSTER, gp->cluster, 0};
    meta[nmeta++] = (struct tm_gce_kv){TM_GCE_META_POOL, op->pool, 0};
    meta[nmeta++] = (struct tm_gce_kv){TM_GCE_META_TOKEN, op->key, 0};
    if (bootstrap)
        meta[nmeta++] = (struct tm_gce_kv){"startup-script", tm_gce_bulk_startup_script(), 0};
    names = calloc(op->n, sizeof(*names));
    if (!names)
        return TM_ENOMEM;
    for (size_t i = 0; i < op->n; i++)
        names[i] = op->m[i].name;
    {
        struct tm_gce_bulk_params bp = {
            .props = {.zone = c->zone, .machine_type = op->type, .source_image = gp->image,
                      .spot = c->capacity == TM_CAPACITY_SPOT, .labels = labels, .nlabels = 4,
                      .metadata = meta, .nmetadata = nmeta},
            .names = names, .nnames = op->n,
            .resource_policy = op->policy[0] ? op->policy : NULL,
        };

        if (!tm_gce_accelerator_optimized(op->type) && pool && pool->gpus > 0) {
            bp.props.accelerator_type = tm_gce_accelerator_for_model(pool->gpu_model);
            bp.props.accelerator_count = pool->gpus;
        }
        r = tm_gce_build_bulk_insert(&bp, &body);
    }
    free(names);
    if (r < 0)
        return r;
    tm_gce_bulk_request_id(op->key, c->zone, op->type, c->capacity == TM_CAPACITY_SPOT, rid);
    url = tm_gce_url_bulk_insert(tm_gce_endpoint(gp->gce), tm_gce_project(gp->gce), c->zone, rid);
    if (!url) {
        free(body);
        return TM_ENOMEM;
    }
    tm_log_info("gcp launch set", "provider=%s pool=%s set=%s nodes=%zu type=%s zone=%s "
                "market=%s placement=%s", gp->name, op->pool, op->key, op->n, op->type, c->zone,
                tm_capacity_type_name(c->capacity), op->policy[0] ? op->policy : "-");
    op->step = SET_INSERT;
    op->inserted = true;
    /* requestId makes a repeated bulkInsert the same one: resets are retried. */
    return tm_gce_call(gp->gce, TM_GCE_BULK_INSERT, "POST", url, body,
                       TM_GCE_RETRY_AMBIGUOUS | TM_GCE_FOLLOW, on_step, op);
}

/* The next offering not tried nor short; 1 when none is left. */
static int next_insert(struct set_op *op)
{
    for (size_t i = 0; i < op->ncand; i++) {
        struct tm_launch_offer *c = &op->cand[i];

        if (c->tried || tm_launch_is_short(&op->gp->launch, op->type, c->zone, c->capacity))
            continue;
        c->tried = true;
        op->cur = i;
        return send_insert(op, c);
    }
    return 1;
}

static void insert_or_fail(struct set_op *op, int status)
{
    int r = next_insert(op);

    if (r == 1) {
        tm_log_warn("could not launch gcp set: no offering left", "provider=%s pool=%s set=%s "
                    "nodes=%zu type=%s err=%s", op->gp->name, op->pool, op->key, op->n, op->type,
                    tm_err_name(status));
        release(op, status);
    } else if (r < 0) {
        release(op, r);
    }
}

/* ---- tag: each member's own token, node id and bootstrap ---------------- */

static void on_member(int status, const struct tm_gce_reply *reply, void *data);

static int member_get(struct member *mb)
{
    struct tm_gce *gce = mb->op->gp->gce;
    char *url = tm_gce_url_instance(tm_gce_endpoint(gce), tm_gce_project(gce), mb->op->set_zone,
                                    mb->name, NULL, NULL);

    if (!url)
        return TM_ENOMEM;
    mb->step = M_GET;
    return tm_gce_call(gce, TM_GCE_GET, "GET", url, NULL, TM_GCE_RETRY_AMBIGUOUS, on_member, mb);
}

static int member_set_metadata(struct member *mb, const char *fingerprint)
{
    struct set_op *op = mb->op;
    struct tm_gce *gce = op->gp->gce;
    struct tm_gce_kv items[5];
    size_t n = 0;
    char rid[37], *body = NULL, *url;
    int r;

    items[n++] = (struct tm_gce_kv){TM_GCE_META_CLUSTER, op->gp->cluster, 0};
    items[n++] = (struct tm_gce_kv){TM_GCE_META_POOL, op->pool, 0};
    items[n++] = (struct tm_gce_kv){TM_GCE_META_TOKEN, mb->token, 0};
    /* setMetadata replaces every item: the shared script stays. */
    if (mb->bootstrap) {
        items[n++] = (struct tm_gce_kv){"startup-script", tm_gce_bulk_startup_script(), 0};
        items[n++] = (struct tm_gce_kv){TM_GCE_META_BOOTSTRAP, mb->bootstrap, mb->bootstrap_len};
    }
    r = tm_gce_build_set_metadata(items, n, fingerprint, &body);
    if (r < 0)
        return r;
    tm_gce_update_request_id("setMetadata", mb->token, fingerprint, rid);
    url = tm_gce_url_instance(tm_gce_endpoint(gce), tm_gce_project(gce), op->set_zone, mb->name,
                              "setMetadata", rid);
    if (!url) {
        /* the body holds the bootstrap's secret */
        memset(body, 0, strlen(body));
        free(body);
        return TM_ENOMEM;
    }
    mb->step = M_METADATA;
    return tm_gce_call(gce, TM_GCE_SET_METADATA, "POST", url, body,
                       TM_GCE_RETRY_AMBIGUOUS | TM_GCE_FOLLOW, on_member, mb);
}

static int member_set_labels(struct member *mb, const char *fingerprint)
{
    struct set_op *op = mb->op;
    struct tm_gce *gce = op->gp->gce;
    char cl[64], pl[64], sk[64], tk[64], nd[24], rid[37];
    struct tm_gce_kv labels[5];
    char *body = NULL, *url;
    int r;

    if (tm_gce_label_encode(op->gp->cluster, cl, sizeof(cl)) < 0 ||
        tm_gce_label_encode(op->pool, pl, sizeof(pl)) < 0 ||
        tm_gce_label_encode(op->key, sk, sizeof(sk)) < 0 ||
        tm_gce_label_encode(mb->token, tk, sizeof(tk)) < 0)
        return TM_EINVAL;
    snprintf(nd, sizeof(nd), "%lld", (long long)mb->node_id);
    labels[0] = (struct tm_gce_kv){TM_GCE_LABEL_CLUSTER, cl, 0};
    labels[1] = (struct tm_gce_kv){TM_GCE_LABEL_POOL, pl, 0};
    labels[2] = (struct tm_gce_kv){TM_GCE_LABEL_SET, sk, 0};
    labels[3] = (struct tm_gce_kv){TM_GCE_LABEL_NODE, nd, 0};
    labels[4] = (struct tm_gce_kv){TM_GCE_LABEL_TOKEN, tk, 0};
    r = tm_gce_build_set_labels(labels, 5, fingerprint, &body);
    if (r < 0)
        return r;
    tm_gce_update_request_id("setLabels", mb->token, fingerprint, rid);
    url = tm_gce_url_instance(tm_gce_endpoint(gce), tm_gce_project(gce), op->set_zone, mb->name,
                              "setLabels", rid);
    if (!url) {
        free(body);
        return TM_ENOMEM;
    }
    mb->step = M_LABELS;
    return tm_gce_call(gce, TM_GCE_SET_LABELS, "POST", url, body,
                       TM_GCE_RETRY_AMBIGUOUS | TM_GCE_FOLLOW, on_member, mb);
}

static void member_done(struct member *mb, int status)
{
    struct set_op *op = mb->op;

    if (status < 0 && op->err == 0)
        op->err = status;
    if (--op->pending > 0)
        return;
    if (op->err < 0)
        release(op, op->err);
    else
        deliver_made(op);
}

static void on_member(int status, const struct tm_gce_reply *reply, void *data)
{
    struct member *mb = data;
    struct set_op *op = mb->op;
    const struct tm_gce_instance *g;
    int r = 0;

    if (status == TM_ECANCELED || op->gp->closing || op->err < 0) {
        member_done(mb, status < 0 ? status : op->err < 0 ? op->err : TM_ECANCELED);
        return;
    }
    if (status < 0) {
        tm_log_warn("could not tag a member of a gcp launch set", "provider=%s set=%s "
                    "instance=%s/%s call=%s error=%s code=%s", op->gp->name, op->key, op->set_zone,
                    mb->name, tm_gce_call_name(reply->call), tm_err_name(status),
                    reply->error_code[0] ? reply->error_code : "-");
        member_done(mb, status);
        return;
    }
    switch (mb->step) {
    case M_GET:
        g = reply->ninstances == 1 ? &reply->instances[0] : NULL;
        if (!g) {
            r = TM_EBADREPLY;
        } else if (strcmp(g->label_token, mb->token) == 0 &&
                   strcmp(g->inst.token, mb->token) == 0) {
            /* tagged by an earlier call (labels go last) */
            member_done(mb, 0);
            return;
        } else if (strcmp(g->inst.token, mb->token) == 0) {
            r = member_set_labels(mb, g->label_fingerprint);
        } else {
            snprintf(mb->label_fp, sizeof(mb->label_fp), "%s", g->label_fingerprint);
            r = member_set_metadata(mb, g->metadata_fingerprint);
        }
        break;
    case M_METADATA:
        /* setMetadata leaves the labels and their fingerprint as they were
         * (a 412 would fail the set, never tag it wrongly) */
        r = member_set_labels(mb, mb->label_fp);
        break;
    case M_LABELS:
        member_done(mb, 0);
        return;
    }
    if (r < 0)
        member_done(mb, r);
}

static void start_tag(struct set_op *op)
{
    op->step = SET_TAG;
    op->pending = 1; /* held until every member's first call is started */
    for (size_t i = 0; i < op->n; i++) {
        int r;

        op->pending++;
        r = member_get(&op->m[i]);
        if (r < 0)
            member_done(&op->m[i], r);
    }
    member_done(&op->m[0], 0);
}

/* ---- the steps ---------------------------------------------------------- */

/* The find's listing is complete. */
static void found(struct set_op *op)
{
    size_t have = members_found(op), longest = 0;
    int r;

    if (have == op->n) {
        tm_log_info("gcp launch set found by its label, not launching again",
                    "provider=%s set=%s nodes=%zu zone=%s", op->gp->name, op->key, op->n,
                    op->set_zone);
        start_tag(op);
        return;
    }
    if (have > 0) {
        /* Some members only: a bulkInsert still under way (a crash in the
         * middle of it), or one that ended short.  The same request in the
         * same zone joins its operation or gets its end; the listing after
         * it decides. */
        op->ncand = 1;
        snprintf(op->cand[0].zone, sizeof(op->cand[0].zone), "%s", op->set_zone);
        op->cand[0].capacity = op->set_capacity;
        op->cand[0].tried = true;
        op->cur = 0;
        r = send_insert(op, &op->cand[0]);
        if (r < 0)
            release(op, r);
        return;
    }
    for (size_t i = 0; i < op->n; i++)
        if (strlen(op->m[i].name) > longest)
            longest = strlen(op->m[i].name);
    /* Zones remembered short stay in: the walk skips them when it comes to
     * them, so a shortage that expires in between is tried. */
    op->ncand = tm_launch_plan_offers(&op->gp->launch, op->pool, op->type, op->zone, op->capacity,
                                      true, false, tm_gcp_zone_fits_name, &longest, op->cand,
                                      TM_LAUNCH_OFFER_MAX);
    insert_or_fail(op, TM_EQUOTA);
}

static void inserted(struct set_op *op, int status, const struct tm_gce_reply *reply)
{
    const struct tm_launch_offer *c = &op->cand[op->cur];
    int r;

    if (status == 0 || status == TM_ECONFLICT) {
        /* alreadyExists: the names are the members', made by an attempt
         * whose answer was lost; the listing counts them. */
        op->step = SET_LIST;
        r = list_set(op);
        if (r < 0)
            release(op, r);
    } else if (status == TM_EQUOTA) {
        tm_launch_note_short(&op->gp->launch, op->type, c->zone, c->capacity, reply->error_code);
        insert_or_fail(op, status);
    } else if (reply->http_status == 0 && status != TM_EAUTH && status != TM_ENOMEM &&
               status != TM_EBADREPLY && ++op->relaunches < op->gp->launch.max_relaunch) {
        /* Unreachable past the budget: look by the set label again. */
        op->step = SET_FIND;
        r = list_set(op);
        if (r < 0)
            release(op, r);
    } else {
        release(op, status);
    }
}

/* The listing after a bulkInsert is complete. */
static void listed(struct set_op *op)
{
    const struct tm_launch_offer *c = &op->cand[op->cur];
    size_t have = members_found(op);

    snprintf(op->set_zone, sizeof(op->set_zone), "%s", c->zone);
    op->set_capacity = c->capacity;
    if (have == op->n) {
        start_tag(op);
        return;
    }
    /* minCount = count should make this impossible; a member preempted or
     * deleted already is the likely cause.  Either way the set is not
     * whole there: short, and what stands is deleted. */
    tm_log_warn("gcp launch set short after bulkInsert", "provider=%s set=%s nodes=%zu "
                "listed=%zu zone=%s", op->gp->name, op->key, op->n, have, c->zone);
    tm_launch_note_short(&op->gp->launch, op->type, c->zone, c->capacity, "SET_INCOMPLETE");
    release(op, TM_EQUOTA);
}

static void on_step(int status, const struct tm_gce_reply *reply, void *data)
{
    struct set_op *op = data;

    if (op->step == SET_RELEASE) {
        release_page(op, status, reply);
        return;
    }
    if (status == TM_ECANCELED || op->gp->closing) {
        deliver_error(op, TM_ECANCELED);
        return;
    }
    if (op->step == SET_INSERT) {
        inserted(op, status, reply);
        return;
    }
    if (op->step != SET_FIND && op->step != SET_LIST) {
        deliver_error(op, TM_EINVAL);
        return;
    }
    /* a page of the set label's listing */
    if (status == 0) {
        match_page(op, reply, op->step == SET_LIST ? op->cand[op->cur].zone : NULL);
        status = list_more(op, reply);
        if (status == 1)
            return;
    }
    if (status < 0)
        release(op, status);
    else if (op->step == SET_FIND)
        found(op);
    else
        listed(op);
}

/* ---- entry -------------------------------------------------------------- */


/* Whether every request names the set's pool, type, capacity and zone,
 * tokens are distinct, and each token, pool and the set key fit a label
 * value. */
static int check_set(const struct tm_gcp_provider *gp, const struct tm_launch_set *set)
{
    const struct tm_launch_request *r0 = &set->reqs[0];
    char probe[64];

    if (!tm_launch_set_valid(set, gp->cluster, SET_MAX) ||
        tm_gce_label_encode(set->set_token, probe, sizeof(probe)) < 0)
        return TM_EINVAL;
    if (set->placement_group && strchr(set->placement_group, '/'))
        return TM_EINVAL;
    for (size_t i = 0; i < set->n; i++) {
        const struct tm_launch_request *r = &set->reqs[i];
        const char *z = r->zone ? r->zone : "", *z0 = r0->zone ? r0->zone : "";

        if (strcmp(z, z0) != 0 || r->capacity != r0->capacity)
            return TM_EINVAL;
        if (tm_gce_label_encode(r->token, probe, sizeof(probe)) < 0 ||
            tm_gce_label_encode(r->pool, probe, sizeof(probe)) < 0)
            return TM_EINVAL;
        /* one token, one node: the tags map instances back to rows */
        for (size_t k = 0; k < i; k++)
            if (strcmp(set->reqs[k].token, r->token) == 0)
                return TM_EINVAL;
    }
    return 0;
}

int tm_gcp_launch_set(struct tm_provider *p, const struct tm_launch_set *set,
                      tm_launch_set_cb cb, void *data)
{
    struct tm_gcp_provider *gp;
    struct set_op *op;
    int r;

    if (!p || !set || !cb || !set->reqs || set->n == 0 || set->n > SET_MAX)
        return TM_EINVAL;
    gp = p->impl;
    r = check_set(gp, set);
    if (r < 0) {
        tm_log_error("could not launch gcp set: a token, pool or placement does not fit",
                     "provider=%s pool=%s", gp->name, set->reqs[0].pool ? set->reqs[0].pool : "-");
        return r;
    }
    if (gp->closing)
        return TM_ECANCELED;
    op = calloc(1, sizeof(*op));
    if (op)
        op->m = calloc(set->n, sizeof(*op->m));
    if (!op || !op->m) {
        free(op);
        return TM_ENOMEM;
    }
    op->gp = gp;
    op->cb = cb;
    op->data = data;
    op->n = set->n;
    snprintf(op->key, sizeof(op->key), "%s", set->set_token);
    snprintf(op->pool, sizeof(op->pool), "%s", set->reqs[0].pool);
    snprintf(op->type, sizeof(op->type), "%s", set->reqs[0].instance_type);
    snprintf(op->zone, sizeof(op->zone), "%s", set->reqs[0].zone ? set->reqs[0].zone : "");
    snprintf(op->policy, sizeof(op->policy), "%s",
             set->placement_group ? set->placement_group : "");
    op->capacity = set->reqs[0].capacity;
    for (size_t i = 0; i < set->n; i++) {
        const struct tm_launch_request *rq = &set->reqs[i];
        struct member *mb = &op->m[i];

        mb->op = op;
        snprintf(mb->token, sizeof(mb->token), "%s", rq->token);
        mb->node_id = rq->node_id;
        tm_gce_instance_name(rq->node_id, rq->token, mb->name);
        for (size_t k = 0; k < i; k++)
            if (strcmp(op->m[k].name, mb->name) == 0) {
                op_free(op);
                return TM_EINVAL; /* two members, one token */
            }
        if (rq->bootstrap && rq->bootstrap_len) {
            mb->bootstrap = malloc(rq->bootstrap_len + 1);
            if (!mb->bootstrap) {
                op_free(op);
                return TM_ENOMEM;
            }
            memcpy(mb->bootstrap, rq->bootstrap, rq->bootstrap_len);
            mb->bootstrap[rq->bootstrap_len] = '\0';
            mb->bootstrap_len = rq->bootstrap_len;
        }
    }
    op->step = SET_FIND;
    r = list_set(op);
    if (r < 0)
        op_free(op);
    return r;
}
