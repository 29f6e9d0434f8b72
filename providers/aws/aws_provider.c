/*
 * providers/aws/aws_provider.c: struct tm_provider_ops on EC2 (see the header).
 *
 * Each provider call is a struct aws_op that always has exactly one EC2
 * call outstanding until it delivers: the EC2 client calls back exactly
 * once, even when closed (TM_ECANCELED), so closing the provider is just
 * closing the client and freeing once it is done.  No op callback fires
 * inside a provider call, because the first step of every op is an EC2
 * call and those never call back from inside tm_ec2_call().
 *
 * The launch itself (find by token, the walk over offers, the shortage
 * memory, next-or-fail) is the engine's (providers/common/launch.c); this
 * file gives it EC2's primitives.  The other ops (launch set, terminate,
 * list, prices, validate) are step chains over struct aws_op and struct
 * aws_provider, whose fields no other file should see.
 */
#include "providers/aws/aws_provider.h"

#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include <openssl/crypto.h>
#include <openssl/evp.h>

#include "core/bootstrap.h"
#include "core/err.h"
#include "core/log.h"
#include "controller/io/aws_credentials.h"
#include "providers/aws/aws_config.h"
#include "providers/aws/aws_reservations.h"
#include "providers/common/launch.h"
#include "providers/common/pools.h"
#include "providers/common/settings.h"
#include "providers/common/shortage.h"

#define CAND_MAX TM_LAUNCH_OFFER_MAX
#define PRICE_MAX 256
#define PRICE_REFRESH_MS (10 * 60 * 1000)
#define LIST_MAX_PAGES 10000

struct spot_price {
    char type[TM_ID_MAX];
    char zone[TM_ID_MAX];
    int64_t uusd;
    int64_t at_ms;
};

struct aws_provider {
    struct tm_provider base;      /* base.impl points back here */
    uv_loop_t *loop;
    struct tm_ec2 *ec2;
    char name[TM_ID_MAX];
    char region[TM_ID_MAX];
    char cluster[TM_ID_MAX];
    char template_name[2 * TM_ID_MAX];
    char *image_id;
    bool template_ready;
    int page_size;
    struct tm_provider_pool *pools;
    size_t npools;
    struct tm_config_instance_type *types; /* configured prices */
    size_t ntypes;
    struct tm_shortages shorts;
    struct tm_launch_env launch;  /* the engine's view of this provider */
    struct aws_reservations resv; /* the pools' reserved capacity */
    struct spot_price prices[PRICE_MAX];
    size_t nprices;
    uint64_t prices_at;           /* uv_now() of the last refresh start, 0 never */
    bool prices_inflight;
    bool no_price_refresh;
    bool closing;
};

static const struct tm_provider_ops aws_ops;

enum op_kind { OP_TERMINATE, OP_LIST, OP_VALIDATE, OP_PRICES };

enum launch_step { STEP_FIND, STEP_TEMPLATE, STEP_RUN, STEP_FLEET, STEP_DESCRIBE_NEW };

struct aws_op {
    struct aws_provider *ap;
    enum op_kind kind;
    union {
        tm_done_cb done;
        tm_list_cb list;
        tm_aws_validate_cb validate;
    } cb;
    void *data;
    char token[TM_ID_MAX];        /* terminate: the instance id */
    /* list */
    struct tm_instance *list;
    size_t nlist;
    unsigned pages;
    char *prev_token;
    /* validate */
    size_t pool_i;
};

static struct aws_provider *impl(struct tm_provider *p) { return p->impl; }

static void op_free(struct aws_op *op)
{
    free(op->list);
    free(op->prev_token);
    free(op);
}

/* ---- shortage memory ---------------------------------------------------- */

bool tm_aws_provider_is_short(struct tm_provider *p, const char *instance_type, const char *zone,
                              enum tm_capacity_type capacity)
{
    return tm_launch_is_short(&impl(p)->launch, instance_type, zone, capacity);
}

void tm_aws_provider_note_short(struct tm_provider *p, const char *instance_type,
                                const char *zone, enum tm_capacity_type capacity)
{
    tm_launch_note_short(&impl(p)->launch, instance_type, zone, capacity, "noted");
}

int tm_aws_provider_reservation(struct tm_provider *p, const char *id, struct tm_reservation *ret)
{
    const struct tm_reservation *r = tm_reservations_find(&impl(p)->resv.rs, id);

    if (!r)
        return TM_ENOTFOUND;
    *ret = *r;
    return 0;
}

struct tm_ec2 *tm_aws_provider_ec2(struct tm_provider *p)
{
    return impl(p)->ec2;
}

static uint64_t loop_now(void *loop) { return uv_now(loop); }

/* ---- launch: the engine's primitives on EC2 ----------------------------- */

/*
 * The engine (providers/common/launch.c) walks the offers; these are EC2's
 * steps for one offer.  Several spot offers still untried go to EC2 as one
 * CreateFleet of type instant, which picks among them (the shared launch
 * template made first, once per cluster); one offer, or a launch with user
 * data, goes through RunInstances.  The fleet's answer lacks the state and
 * the real zone, so the instance is read back before the engine hears.
 */
struct aws_launch {
    enum launch_step step;
    struct tm_instance fleet_inst; /* fallback when describing the new one fails */
    /* The node's bootstrap, base64 for RunInstances' UserData (it holds
     * the enrollment secret: wiped in cleanup, never logged).  A launch
     * with user data goes through RunInstances only: CreateFleet takes it
     * from the shared launch template, which has none per node. */
    char *user_data;
};

static struct aws_provider *launch_ap(const struct tm_launch *l)
{
    return (struct aws_provider *)(void *)((char *)l->env - offsetof(struct aws_provider, launch));
}

static const struct tm_provider_pool *pool_find(const struct aws_provider *ap, const char *name)
{
    return tm_provider_pool_find(ap->pools, ap->npools, name);
}

static void on_launch_step(int status, const struct tm_ec2_reply *reply, void *data);

static int launch_call(struct tm_launch *l, enum launch_step step, enum tm_ec2_action action,
                       char *body, unsigned flags)
{
    struct aws_launch *al = l->priv;

    al->step = step;
    return tm_ec2_call(launch_ap(l)->ec2, action, body, flags, on_launch_step, l);
}

static void make_tags(const struct tm_launch *l, struct tm_ec2_tag tags[4])
{
    tags[0] = (struct tm_ec2_tag){TM_EC2_TAG_CLUSTER, launch_ap(l)->cluster};
    tags[1] = (struct tm_ec2_tag){TM_EC2_TAG_POOL, l->pool};
    tags[2] = (struct tm_ec2_tag){TM_EC2_TAG_NODE, l->node};
    tags[3] = (struct tm_ec2_tag){TM_EC2_TAG_TOKEN, l->token};
}

static int aws_launch_find(struct tm_launch *l)
{
    const char *token[] = {l->token};
    const char *cluster[] = {launch_ap(l)->cluster};
    const struct tm_ec2_filter f[] = {
        {"tag:" TM_EC2_TAG_TOKEN, token, 1},
        {"tag:" TM_EC2_TAG_CLUSTER, cluster, 1},
    };
    char *body = NULL;
    int r = tm_ec2_build_describe_instances(NULL, 0, f, 2, 0, NULL, &body);

    return r < 0 ? r : launch_call(l, STEP_FIND, TM_EC2_DESCRIBE_INSTANCES, body,
                                   TM_EC2_RETRY_AMBIGUOUS);
}

/* The offer l->cur and every spot offer after it still untried, when it
 * is on spot: how many went into ov. */
static size_t fleet_offers(const struct tm_launch *l, struct tm_ec2_fleet_override *ov)
{
    size_t nov = 0;

    if (l->offers[l->cur].capacity != TM_CAPACITY_SPOT)
        return 1;
    for (size_t i = l->cur; i < l->noffers; i++)
        if ((i == l->cur || !l->offers[i].tried) && l->offers[i].capacity == TM_CAPACITY_SPOT)
            ov[nov++] = (struct tm_ec2_fleet_override){l->offers[i].type, l->offers[i].zone};
    return nov;
}

static int send_fleet(struct tm_launch *l, struct tm_ec2_fleet_override *ov, size_t nov)
{
    struct aws_provider *ap = launch_ap(l);
    struct tm_ec2_tag tags[4];
    struct tm_ec2_fleet_params fp = {
        .launch_template = ap->template_name, .client_token = l->token, .spot = true,
        .target = 1, .overrides = ov, .noverrides = nov, .tags = tags, .ntags = 4,
    };
    char *body = NULL;
    int r;

    make_tags(l, tags);
    r = tm_ec2_build_create_fleet(&fp, &body);
    if (r < 0)
        return r;
    tm_log_info("aws launch", "provider=%s pool=%s node=%lld token=%s type=%s zones=%zu "
                "market=spot via=CreateFleet", ap->name, l->pool, (long long)l->node_id,
                l->token, l->type, nov);
    return launch_call(l, STEP_FLEET, TM_EC2_CREATE_FLEET, body, 0);
}

static int aws_launch_create(struct tm_launch *l, size_t i)
{
    struct aws_provider *ap = launch_ap(l);
    struct aws_launch *al = l->priv;
    const struct tm_launch_offer *c = &l->offers[i];
    struct tm_ec2_fleet_override ov[TM_LAUNCH_OFFER_MAX];
    struct tm_ec2_tag tags[4];
    size_t nov = fleet_offers(l, ov);
    char *body = NULL;
    int r;

    /* Several spot offerings: let EC2 choose among them in one call. */
    if (nov > 1 && !al->user_data) {
        if (ap->template_ready)
            return send_fleet(l, ov, nov);
        r = tm_ec2_build_create_launch_template(ap->template_name, ap->image_id, &body);
        return r < 0 ? r : launch_call(l, STEP_TEMPLATE, TM_EC2_CREATE_LAUNCH_TEMPLATE, body,
                                       TM_EC2_RETRY_AMBIGUOUS);
    }
    make_tags(l, tags);
    struct tm_ec2_run_params rp = {
        .image_id = ap->image_id, .instance_type = c->type, .zone = c->zone,
        .client_token = l->token, .spot = c->capacity == TM_CAPACITY_SPOT,
        .tags = tags, .ntags = 4, .user_data = al->user_data,
        .capacity_reservation = c->reservation, .capacity_block = c->block,
    };
    r = tm_ec2_build_run_instances(&rp, &body);
    if (r < 0)
        return r;
    tm_log_info("aws launch", "provider=%s pool=%s node=%lld token=%s type=%s zone=%s "
                "market=%s reservation=%s via=RunInstances", ap->name, l->pool,
                (long long)l->node_id, l->token, c->type, c->zone[0] ? c->zone : "-",
                c->block ? "capacity-block" : tm_capacity_type_name(c->capacity),
                c->reservation[0] ? c->reservation : "-");
    return launch_call(l, STEP_RUN, TM_EC2_RUN_INSTANCES, body, 0);
}

/* A reset or timeout while launching: the cloud may have done it. */
static bool ambiguous(int status, const struct tm_ec2_reply *reply)
{
    return reply->http_status == 0 && (status == -ECONNRESET || status == -ETIMEDOUT ||
                                       status == TM_EUNAVAIL || status == -ECONNREFUSED);
}

static const struct tm_ec2_instance *pick_found(const struct tm_ec2_reply *reply)
{
    const struct tm_ec2_instance *best = NULL;

    for (size_t i = 0; i < reply->ninstances; i++) {
        const struct tm_ec2_instance *x = &reply->instances[i];

        if (strcmp(x->inst.token, "") == 0)
            continue;
        if (!best || (best->inst.state == TM_INSTANCE_TERMINATED &&
                      x->inst.state != TM_INSTANCE_TERMINATED))
            best = x;
    }
    return best;
}

static void note_spot_short(struct tm_launch *l, const char *code)
{
    for (size_t i = 0; i < l->noffers; i++)
        if (l->offers[i].capacity == TM_CAPACITY_SPOT)
            tm_launch_note_short(l->env, l->offers[i].type, l->offers[i].zone, TM_CAPACITY_SPOT,
                                 code);
}

static void on_fleet(struct tm_launch *l, int status, const struct tm_ec2_reply *reply)
{
    struct aws_launch *al = l->priv;
    struct tm_instance *fi = &al->fleet_inst;
    char *body = NULL;
    const char *id[1];
    int r;

    for (size_t i = 0; i < l->noffers; i++)
        if (l->offers[i].capacity == TM_CAPACITY_SPOT)
            l->offers[i].tried = true;
    if (status < 0) {
        if (ambiguous(status, reply)) {
            tm_launch_made(l, TM_LAUNCH_AMBIGUOUS, status, NULL, NULL);
        } else if (status == TM_EQUOTA) {
            note_spot_short(l, reply->error_code);
            tm_launch_made(l, TM_LAUNCH_NEXT, status, NULL, NULL);
        } else {
            tm_launch_made(l, TM_LAUNCH_FATAL, status, NULL, NULL);
        }
        return;
    }
    for (size_t i = 0; i < reply->nfleet_errors; i++) {
        const struct tm_ec2_fleet_error *e = &reply->fleet_errors[i];

        if (tm_ec2_error_map(e->code, 0) == TM_EQUOTA)
            tm_launch_note_short(l->env, e->instance_type[0] ? e->instance_type : l->type,
                                 e->zone, e->spot ? TM_CAPACITY_SPOT : TM_CAPACITY_ON_DEMAND,
                                 e->code);
    }
    if (reply->nfleet_instances == 0) {
        /* No instance and no reason: treat every spot offering as short. */
        if (reply->nfleet_errors == 0)
            note_spot_short(l, "EmptyFleet");
        tm_launch_made(l, TM_LAUNCH_NEXT, TM_EQUOTA, NULL, NULL);
        return;
    }
    memset(fi, 0, sizeof(*fi));
    tm_id_copy(fi->id, reply->fleet_instances[0].id);
    tm_id_copy(fi->token, l->token);
    tm_id_copy(fi->pool, l->pool);
    tm_id_copy(fi->instance_type, reply->fleet_instances[0].instance_type);
    tm_id_copy(fi->zone, reply->fleet_instances[0].zone);
    fi->node_id = l->node_id;
    fi->capacity = TM_CAPACITY_SPOT;
    fi->state = TM_INSTANCE_PENDING;
    fi->launched_ms = (int64_t)time(NULL) * 1000;
    /* The fleet answer lacks state and the real zone: read the instance. */
    id[0] = fi->id;
    r = tm_ec2_build_describe_instances(id, 1, NULL, 0, 0, NULL, &body);
    if (r == 0)
        r = launch_call(l, STEP_DESCRIBE_NEW, TM_EC2_DESCRIBE_INSTANCES, body,
                        TM_EC2_RETRY_AMBIGUOUS);
    if (r < 0)
        tm_launch_made(l, TM_LAUNCH_OK, 0, fi, NULL);
}

static void on_launch_step(int status, const struct tm_ec2_reply *reply, void *data)
{
    struct tm_launch *l = data;
    struct aws_launch *al = l->priv;
    const struct tm_ec2_instance *found;
    struct tm_ec2_fleet_override ov[TM_LAUNCH_OFFER_MAX];
    int r;

    if (al->step == STEP_FIND) {
        found = status < 0 ? NULL : pick_found(reply);
        tm_launch_found(l, status, found ? &found->inst : NULL);
        return;
    }
    if (status == TM_ECANCELED || launch_ap(l)->closing) {
        tm_launch_made(l, TM_LAUNCH_FATAL, TM_ECANCELED, NULL, NULL);
        return;
    }
    switch (al->step) {
    case STEP_FIND:
        return;
    case STEP_TEMPLATE:
        if (status < 0 && status != TM_ECONFLICT) {
            tm_launch_made(l, TM_LAUNCH_FATAL, status, NULL, NULL);
            return;
        }
        launch_ap(l)->template_ready = true;
        r = send_fleet(l, ov, fleet_offers(l, ov));
        if (r < 0)
            tm_launch_made(l, TM_LAUNCH_FATAL, r, NULL, NULL);
        return;
    case STEP_FLEET:
        on_fleet(l, status, reply);
        return;
    case STEP_RUN:
        if (status == 0 && reply->ninstances >= 1)
            tm_launch_made(l, TM_LAUNCH_OK, 0, &reply->instances[0].inst, NULL);
        else if (status == 0)
            tm_launch_made(l, TM_LAUNCH_FATAL, TM_EBADREPLY, NULL, NULL);
        else if (status == TM_EQUOTA ||
                 /* A reservation EC2 will not launch into (not active,
                  * gone): that reservation is out, not the launch; the
                  * refresh says why. */
                 (l->offers[l->cur].reservation[0] &&
                  (status == TM_EINVAL || status == TM_ENOTFOUND)))
            tm_launch_made(l, TM_LAUNCH_SHORT, status, NULL, reply->error_code);
        else if (ambiguous(status, reply))
            tm_launch_made(l, TM_LAUNCH_AMBIGUOUS, status, NULL, NULL);
        else
            tm_launch_made(l, TM_LAUNCH_FATAL, status, NULL, NULL);
        return;
    case STEP_DESCRIBE_NEW:
        tm_launch_made(l, TM_LAUNCH_OK, 0,
                       status == 0 && reply->ninstances >= 1 ? &reply->instances[0].inst
                                                             : &al->fleet_inst, NULL);
        return;
    }
}

static int aws_launch_prepare(struct tm_launch *l, const struct tm_launch_request *req)
{
    struct aws_provider *ap = launch_ap(l);
    struct aws_launch *al = l->priv;
    size_t n;

    (void)req;
    if (!ap->image_id) {
        tm_log_error("could not launch: no machine image configured for aws",
                     "provider=%s hint=\"set image_id in the provider's configuration\"", ap->name);
        return TM_EINVAL;
    }
    if (!l->bootstrap)
        return 0;
    n = tm_bootstrap_base64_len(l->bootstrap_len);
    if (n > TM_BOOTSTRAP_USERDATA_MAX) {
        tm_log_error("could not launch: the node's user data passes EC2's 16 KB",
                     "provider=%s pool=%s", ap->name, l->pool);
        return TM_EINVAL;
    }
    al->user_data = malloc(n + 1);
    if (!al->user_data)
        return TM_ENOMEM;
    EVP_EncodeBlock((unsigned char *)al->user_data, (const unsigned char *)l->bootstrap,
                    (int)l->bootstrap_len);
    return 0;
}

static void aws_launch_cleanup(struct tm_launch *l)
{
    struct aws_launch *al = l->priv;

    if (al && al->user_data) {
        OPENSSL_cleanse(al->user_data, strlen(al->user_data));
        free(al->user_data);
    }
}

static const struct tm_launch_backend aws_launch_backend = {
    .cloud = "aws",
    .priv_size = sizeof(struct aws_launch),
    .found_by = "token",
    .prepare = aws_launch_prepare,
    .find = aws_launch_find,
    .create = aws_launch_create,
    .cleanup = aws_launch_cleanup,
};

static int aws_launch(struct tm_provider *p, const struct tm_launch_request *req,
                      tm_launch_cb cb, void *data)
{
    aws_reservations_refresh(&impl(p)->resv);
    return tm_launch_start(&impl(p)->launch, &aws_launch_backend, req, cb, data);
}

/* ---- launch set (a gang, all or none) ----------------------------------- */

/*
 * One CreateFleet of type instant with TotalTargetCapacity =
 * MinTargetCapacity = n, SingleAvailabilityZone and SingleInstanceType:
 * EC2 launches all n in one zone or none.  The instances carry the set's
 * token (tarmac:launch-set, and as their launch token until tagged); then
 * each gets its own node id and launch token by CreateTags, one at a time,
 * before the caller hears of them.  A set found by its tag (a retry after a
 * reset, or a restart) is tagged and delivered instead of launched again;
 * ClientToken is the set's token too.  Fewer instances than asked (an
 * emulator that ignores the minimum, or a partial answer) are terminated
 * before TM_EQUOTA is reported: what the caller is told is what EC2 holds.
 * With a bootstrap (per-node user data, which the shared launch template
 * cannot carry) the set goes one by one through RunInstances instead
 * (tm_provider_launch_set_each).  Like every op, exactly one EC2 call is
 * outstanding until it delivers.
 */
#define TM_EC2_TAG_SET "tarmac:launch-set"

enum set_step { SET_FIND, SET_TEMPLATE, SET_FLEET, SET_TAG, SET_RELEASE };

struct aws_set {
    struct aws_provider *ap;
    tm_launch_set_cb cb;
    void *data;
    enum set_step step;
    size_t n, tagged, made;       /* members, tagged so far, instances made */
    unsigned finds;
    int err;                      /* SET_RELEASE: reported once released */
    char set[TM_ID_MAX], pool[TM_ID_MAX], type[TM_ID_MAX], zone[TM_ID_MAX], group[TM_ID_MAX];
    enum tm_capacity_type capacity;
    struct tm_instance *inst;     /* n, in member order */
    char (*tokens)[TM_ID_MAX];
    int64_t *nodes;
};

static void set_free(struct aws_set *s)
{
    free(s->inst);
    free(s->tokens);
    free(s->nodes);
    free(s);
}

static void set_deliver(struct aws_set *s, int status)
{
    s->cb(status, status == 0 ? s->inst : NULL, status == 0 ? s->n : 0, s->data);
    set_free(s);
}

static void on_set_step(int status, const struct tm_ec2_reply *reply, void *data);

static int set_call(struct aws_set *s, enum set_step step, enum tm_ec2_action action, char *body,
                    unsigned flags)
{
    s->step = step;
    return tm_ec2_call(s->ap->ec2, action, body, flags, on_set_step, s);
}

static int set_find(struct aws_set *s)
{
    const char *set[] = {s->set};
    const char *cluster[] = {s->ap->cluster};
    const struct tm_ec2_filter f[] = {
        {"tag:" TM_EC2_TAG_SET, set, 1},
        {"tag:" TM_EC2_TAG_CLUSTER, cluster, 1},
    };
    char *body = NULL;
    int r = tm_ec2_build_describe_instances(NULL, 0, f, 2, 0, NULL, &body);

    return r < 0 ? r : set_call(s, SET_FIND, TM_EC2_DESCRIBE_INSTANCES, body, TM_EC2_RETRY_AMBIGUOUS);
}

static int set_fleet(struct aws_set *s)
{
    struct aws_provider *ap = s->ap;
    const struct tm_provider_pool *pool = pool_find(ap, s->pool);
    struct tm_ec2_fleet_override ov[CAND_MAX];
    struct tm_ec2_tag tags[4] = {
        {TM_EC2_TAG_CLUSTER, ap->cluster}, {TM_EC2_TAG_POOL, s->pool},
        {TM_EC2_TAG_TOKEN, s->set}, {TM_EC2_TAG_SET, s->set},
    };
    size_t nov = 0;
    char *body = NULL;
    int r;

    if (!ap->template_ready) {
        r = tm_ec2_build_create_launch_template(ap->template_name, ap->image_id, &body);
        return r < 0 ? r : set_call(s, SET_TEMPLATE, TM_EC2_CREATE_LAUNCH_TEMPLATE, body,
                                    TM_EC2_RETRY_AMBIGUOUS);
    }
    /* The set's zone, else every zone of the pool not short: EC2 picks
     * one of them for the whole set. */
    if (s->zone[0]) {
        if (!tm_launch_is_short(&ap->launch, s->type, s->zone, s->capacity))
            ov[nov++] = (struct tm_ec2_fleet_override){s->type, s->zone};
    } else {
        for (size_t i = 0; pool && i < pool->nzones && nov < CAND_MAX; i++)
            if (tm_id_fits(pool->zones[i]) &&
                !tm_launch_is_short(&ap->launch, s->type, pool->zones[i], s->capacity))
                ov[nov++] = (struct tm_ec2_fleet_override){s->type, pool->zones[i]};
        if (!pool || pool->nzones == 0)
            ov[nov++] = (struct tm_ec2_fleet_override){s->type, ""};
    }
    if (nov == 0)
        return TM_EQUOTA; /* every zone remembered short: the caller falls back */
    struct tm_ec2_fleet_params fp = {
        .launch_template = ap->template_name, .client_token = s->set,
        .spot = s->capacity == TM_CAPACITY_SPOT, .target = (unsigned)s->n,
        .min_target = (unsigned)s->n, .overrides = ov, .noverrides = nov, .tags = tags, .ntags = 4,
        .placement_group = s->group,
    };
    r = tm_ec2_build_create_fleet(&fp, &body);
    if (r < 0)
        return r;
    tm_log_info("aws launch set", "provider=%s pool=%s set=%s nodes=%zu type=%s zones=%zu market=%s "
                "via=CreateFleet", ap->name, s->pool, s->set, s->n, s->type, nov,
                tm_capacity_type_name(s->capacity));
    return set_call(s, SET_FLEET, TM_EC2_CREATE_FLEET, body, 0);
}

/* Tag instance s->tagged with its node id and launch token. */
static int set_tag_next(struct aws_set *s)
{
    char node[24];
    const char *id[1] = {s->inst[s->tagged].id};
    struct tm_ec2_tag tags[2] = {{TM_EC2_TAG_NODE, node}, {TM_EC2_TAG_TOKEN, s->tokens[s->tagged]}};
    char *body = NULL;
    int r;

    snprintf(node, sizeof(node), "%lld", (long long)s->nodes[s->tagged]);
    r = tm_ec2_build_create_tags(id, 1, tags, 2, &body);
    return r < 0 ? r : set_call(s, SET_TAG, TM_EC2_CREATE_TAGS, body, TM_EC2_RETRY_AMBIGUOUS);
}

/* Terminate the instances made, then report err. */
static void set_release(struct aws_set *s, int err)
{
    const char *ids[CAND_MAX];
    size_t n = 0;
    char *body = NULL;
    int r;

    s->err = err;
    for (size_t i = 0; i < s->made && n < CAND_MAX; i++)
        if (s->inst[i].id[0])
            ids[n++] = s->inst[i].id;
    if (n == 0) {
        set_deliver(s, err);
        return;
    }
    tm_log_warn("aws launch set short, releasing it whole", "provider=%s set=%s asked=%zu made=%zu",
                s->ap->name, s->set, s->n, n);
    r = tm_ec2_build_terminate_instances(ids, n, &body);
    if (r == 0)
        r = set_call(s, SET_RELEASE, TM_EC2_TERMINATE_INSTANCES, body, TM_EC2_RETRY_AMBIGUOUS);
    if (r < 0)
        set_deliver(s, err); /* the next pass finds them by the cluster tag */
}

/* The instances of the set, by member: the one carrying a member's own
 * token goes to it, the others in order. */
static void set_assign(struct aws_set *s, const struct tm_instance *const *found, size_t nfound)
{
    bool *used = calloc(nfound + 1, sizeof(bool));
    bool *have = calloc(s->n + 1, sizeof(bool));

    if (!used || !have) {
        free(used);
        free(have);
        return;
    }
    for (size_t k = 0; k < s->n; k++)
        for (size_t i = 0; i < nfound && !have[k]; i++)
            if (!used[i] && strcmp(found[i]->token, s->tokens[k]) == 0) {
                s->inst[k] = *found[i];
                used[i] = have[k] = true;
            }
    for (size_t k = 0, i = 0; k < s->n; k++) {
        while (!have[k] && i < nfound) {
            if (!used[i]) {
                s->inst[k] = *found[i];
                used[i] = have[k] = true;
            }
            i++;
        }
    }
    for (size_t k = 0; k < s->n; k++) {
        snprintf(s->inst[k].token, sizeof(s->inst[k].token), "%s", s->tokens[k]);
        snprintf(s->inst[k].pool, sizeof(s->inst[k].pool), "%s", s->pool);
        s->inst[k].node_id = s->nodes[k];
    }
    s->made = nfound < s->n ? nfound : s->n;
    free(used);
    free(have);
}

static void set_on_found(struct aws_set *s, const struct tm_ec2_reply *reply)
{
    const struct tm_instance *found[CAND_MAX];
    size_t n = 0;
    int r;

    for (size_t i = 0; i < reply->ninstances && n < CAND_MAX; i++)
        if (reply->instances[i].inst.state != TM_INSTANCE_TERMINATED &&
            reply->instances[i].inst.state != TM_INSTANCE_STOPPING)
            found[n++] = &reply->instances[i].inst;
    if (n == 0) {
        r = set_fleet(s);
        if (r < 0)
            set_deliver(s, r);
        return;
    }
    set_assign(s, found, n);
    if (n < s->n) {
        /* part of a set: never kept (a gang cannot use it) */
        set_release(s, TM_EUNAVAIL);
        return;
    }
    tm_log_info("aws launch set found by its tag, not launching again", "provider=%s set=%s nodes=%zu",
                s->ap->name, s->set, s->n);
    s->tagged = 0;
    r = set_tag_next(s);
    if (r < 0)
        set_release(s, r);
}

static void set_on_fleet(struct aws_set *s, int status, const struct tm_ec2_reply *reply)
{
    struct aws_provider *ap = s->ap;
    const struct tm_instance *found[CAND_MAX];
    struct tm_instance made[CAND_MAX];
    size_t n = 0;
    int r;

    if (status < 0) {
        if (ambiguous(status, reply) && ++s->finds < ap->launch.max_relaunch) {
            r = set_find(s);
            if (r < 0)
                set_deliver(s, r);
            return;
        }
        if (status == TM_EQUOTA)
            tm_launch_note_short(&ap->launch, s->type, s->zone, s->capacity, reply->error_code);
        set_deliver(s, status);
        return;
    }
    for (size_t i = 0; i < reply->nfleet_errors; i++) {
        const struct tm_ec2_fleet_error *e = &reply->fleet_errors[i];
        if (tm_ec2_error_map(e->code, 0) == TM_EQUOTA)
            tm_launch_note_short(&ap->launch, e->instance_type[0] ? e->instance_type : s->type,
                                 e->zone, s->capacity,
                       e->code);
    }
    for (size_t i = 0; i < reply->nfleet_instances && n < CAND_MAX; i++) {
        const struct tm_ec2_fleet_instance *fi = &reply->fleet_instances[i];
        memset(&made[n], 0, sizeof(made[n]));
        snprintf(made[n].id, sizeof(made[n].id), "%s", fi->id);
        snprintf(made[n].instance_type, sizeof(made[n].instance_type), "%s", fi->instance_type);
        snprintf(made[n].zone, sizeof(made[n].zone), "%s", fi->zone);
        made[n].capacity = s->capacity == TM_CAPACITY_SPOT ? TM_CAPACITY_SPOT : TM_CAPACITY_ON_DEMAND;
        made[n].state = TM_INSTANCE_PENDING;
        made[n].launched_ms = (int64_t)time(NULL) * 1000;
        found[n] = &made[n];
        n++;
    }
    if (n == 0) {
        if (reply->nfleet_errors == 0)
            tm_launch_note_short(&ap->launch, s->type, s->zone, s->capacity, "EmptyFleet");
        set_deliver(s, TM_EQUOTA);
        return;
    }
    set_assign(s, found, n);
    if (n < s->n) {
        tm_launch_note_short(&ap->launch, s->type, s->inst[0].zone, s->capacity, "ShortFleet");
        set_release(s, TM_EQUOTA);
        return;
    }
    s->tagged = 0;
    r = set_tag_next(s);
    if (r < 0)
        set_release(s, r);
}

static void on_set_step(int status, const struct tm_ec2_reply *reply, void *data)
{
    struct aws_set *s = data;
    int r;

    if (status == TM_ECANCELED || s->ap->closing) {
        set_deliver(s, TM_ECANCELED);
        return;
    }
    switch (s->step) {
    case SET_FIND:
        if (status < 0)
            set_deliver(s, status);
        else
            set_on_found(s, reply);
        return;
    case SET_TEMPLATE:
        if (status < 0 && status != TM_ECONFLICT) {
            set_deliver(s, status);
            return;
        }
        s->ap->template_ready = true;
        r = set_fleet(s);
        if (r < 0)
            set_deliver(s, r);
        return;
    case SET_FLEET:
        set_on_fleet(s, status, reply);
        return;
    case SET_TAG:
        if (status < 0) {
            /* untagged instances could not be told apart: give them back */
            set_release(s, status);
            return;
        }
        if (++s->tagged == s->n) {
            set_deliver(s, 0);
            return;
        }
        r = set_tag_next(s);
        if (r < 0)
            set_release(s, r);
        return;
    case SET_RELEASE:
        if (status < 0)
            tm_log_warn("could not release a short aws launch set, the next pass finds it by its tags",
                        "provider=%s set=%s error=%s", s->ap->name, s->set, tm_err_name(status));
        set_deliver(s, s->err);
        return;
    }
}

static int aws_launch_set(struct tm_provider *p, const struct tm_launch_set *set,
                          tm_launch_set_cb cb, void *data)
{
    struct aws_provider *ap = impl(p);
    const struct tm_launch_request *r0;
    struct aws_set *s;
    int r;

    if (!cb || !tm_launch_set_valid(set, ap->cluster, CAND_MAX))
        return TM_EINVAL;
    r0 = &set->reqs[0];
    for (size_t i = 0; i < set->n; i++)
        if (set->reqs[i].bootstrap && set->reqs[i].bootstrap_len > 0)
            return tm_provider_launch_set_each(p, set, cb, data);
    /* A pool with reservations: member by member through the engine, each
     * into a reservation first (a fleet would buy the market), the set
     * still released whole if one fails. */
    for (size_t i = 0; i < ap->resv.rs.n; i++)
        if (strcmp(ap->resv.rs.v[i].pool, r0->pool) == 0)
            return tm_provider_launch_set_each(p, set, cb, data);
    if (ap->closing)
        return TM_ECANCELED;
    if (!ap->image_id) {
        tm_log_error("could not launch: no machine image configured for aws",
                     "provider=%s hint=\"set image_id in the provider's configuration\"", ap->name);
        return TM_EINVAL;
    }
    s = calloc(1, sizeof(*s));
    if (!s)
        return TM_ENOMEM;
    s->inst = calloc(set->n, sizeof(*s->inst));
    s->tokens = calloc(set->n, sizeof(*s->tokens));
    s->nodes = calloc(set->n, sizeof(*s->nodes));
    if (!s->inst || !s->tokens || !s->nodes) {
        set_free(s);
        return TM_ENOMEM;
    }
    s->ap = ap;
    s->cb = cb;
    s->data = data;
    s->n = set->n;
    snprintf(s->set, sizeof(s->set), "%s", set->set_token);
    snprintf(s->pool, sizeof(s->pool), "%s", r0->pool);
    snprintf(s->type, sizeof(s->type), "%s", r0->instance_type);
    snprintf(s->zone, sizeof(s->zone), "%s", r0->zone ? r0->zone : "");
    snprintf(s->group, sizeof(s->group), "%s", set->placement_group ? set->placement_group : "");
    /* spot_then_on_demand has no meaning for a set: the planner chose */
    s->capacity = r0->capacity == TM_CAPACITY_ON_DEMAND ? TM_CAPACITY_ON_DEMAND : TM_CAPACITY_SPOT;
    for (size_t i = 0; i < set->n; i++) {
        snprintf(s->tokens[i], TM_ID_MAX, "%s", set->reqs[i].token);
        s->nodes[i] = set->reqs[i].node_id;
    }
    r = set_find(s);
    if (r < 0)
        set_free(s);
    return r;
}

/* ---- terminate ---------------------------------------------------------- */

static void on_terminate(int status, const struct tm_ec2_reply *reply, void *data)
{
    struct aws_op *op = data;

    (void)reply;
    if (status == 0)
        tm_log_info("aws instance terminating", "provider=%s instance=%s", op->ap->name,
                    op->token);
    op->cb.done(status, op->data);
    op_free(op);
}

static int aws_terminate(struct tm_provider *p, const char *instance_id, tm_done_cb cb,
                         void *data)
{
    struct aws_provider *ap = impl(p);
    const char *ids[1] = {instance_id};
    struct aws_op *op;
    char *body = NULL;
    int r;

    if (!cb || !tm_id_fits(instance_id) || !instance_id[0])
        return TM_EINVAL;
    if (ap->closing)
        return TM_ECANCELED;
    r = tm_ec2_build_terminate_instances(ids, 1, &body);
    if (r < 0)
        return r;
    op = calloc(1, sizeof(*op));
    if (!op) {
        free(body);
        return TM_ENOMEM;
    }
    op->ap = ap;
    op->kind = OP_TERMINATE;
    op->cb.done = cb;
    op->data = data;
    snprintf(op->token, sizeof(op->token), "%s", instance_id);
    /* Terminating twice is harmless: retry resets too. */
    r = tm_ec2_call(ap->ec2, TM_EC2_TERMINATE_INSTANCES, body, TM_EC2_RETRY_AMBIGUOUS,
                    on_terminate, op);
    if (r < 0)
        op_free(op);
    return r;
}

/* ---- list --------------------------------------------------------------- */

static void refresh_prices(struct aws_provider *ap);

static int list_page(struct aws_op *op, const char *next_token);

static void on_list(int status, const struct tm_ec2_reply *reply, void *data)
{
    struct aws_op *op = data;
    struct tm_instance *grown;
    int r;

    if (status < 0) {
        op->cb.list(status, NULL, 0, op->data);
        op_free(op);
        return;
    }
    if (reply->ninstances > 0) {
        grown = realloc(op->list, (op->nlist + reply->ninstances) * sizeof(*grown));
        if (!grown) {
            op->cb.list(TM_ENOMEM, NULL, 0, op->data);
            op_free(op);
            return;
        }
        op->list = grown;
        for (size_t i = 0; i < reply->ninstances; i++)
            op->list[op->nlist++] = reply->instances[i].inst;
    }
    if (reply->next_token) {
        /* A token that repeats would page forever. */
        if (++op->pages >= LIST_MAX_PAGES ||
            (op->prev_token && strcmp(op->prev_token, reply->next_token) == 0)) {
            tm_log_error("could not list aws instances: paging does not end",
                         "provider=%s pages=%u", op->ap->name, op->pages);
            op->cb.list(TM_EBADREPLY, NULL, 0, op->data);
            op_free(op);
            return;
        }
        r = list_page(op, reply->next_token);
        if (r < 0) {
            op->cb.list(r, NULL, 0, op->data);
            op_free(op);
        }
        return;
    }
    op->cb.list(0, op->list, op->nlist, op->data);
    op_free(op);
}

static int list_page(struct aws_op *op, const char *next_token)
{
    struct aws_provider *ap = op->ap;
    const char *cluster[] = {ap->cluster};
    const struct tm_ec2_filter f[] = {{"tag:" TM_EC2_TAG_CLUSTER, cluster, 1}};
    char *body = NULL;
    int r;

    if (next_token) {
        char *copy = strdup(next_token);

        if (!copy)
            return TM_ENOMEM;
        free(op->prev_token);
        op->prev_token = copy;
    }
    r = tm_ec2_build_describe_instances(NULL, 0, f, 1, ap->page_size, next_token, &body);
    if (r < 0)
        return r;
    return tm_ec2_call(ap->ec2, TM_EC2_DESCRIBE_INSTANCES, body, TM_EC2_RETRY_AMBIGUOUS,
                       on_list, op);
}

static int aws_list(struct tm_provider *p, const char *cluster, tm_list_cb cb, void *data)
{
    struct aws_provider *ap = impl(p);
    struct aws_op *op;
    int r;

    if (!cb || !cluster || strcmp(cluster, ap->cluster) != 0)
        return TM_EINVAL;
    if (ap->closing)
        return TM_ECANCELED;
    op = calloc(1, sizeof(*op));
    if (!op)
        return TM_ENOMEM;
    op->ap = ap;
    op->kind = OP_LIST;
    op->cb.list = cb;
    op->data = data;
    r = list_page(op, NULL);
    if (r < 0) {
        op_free(op);
        return r;
    }
    /* Listing runs every tick: a cheap moment to keep spot prices and
     * reservations fresh. */
    refresh_prices(ap);
    aws_reservations_refresh(&ap->resv);
    return 0;
}

/* ---- prices ------------------------------------------------------------- */

static void on_prices(int status, const struct tm_ec2_reply *reply, void *data)
{
    struct aws_provider *ap = data;

    ap->prices_inflight = false;
    if (status < 0)
        return; /* the client logged it; prices stay as they were */
    ap->nprices = 0;
    for (size_t i = 0; i < reply->nprices && ap->nprices < PRICE_MAX; i++) {
        const struct tm_ec2_spot_price *sp = &reply->prices[i];
        struct spot_price *dst = NULL;

        /* Keep the newest price per (type, zone). */
        for (size_t j = 0; j < ap->nprices; j++)
            if (strcmp(ap->prices[j].type, sp->instance_type) == 0 &&
                strcmp(ap->prices[j].zone, sp->zone) == 0)
                dst = &ap->prices[j];
        if (dst && dst->at_ms >= sp->timestamp_ms)
            continue;
        if (!dst)
            dst = &ap->prices[ap->nprices++];
        snprintf(dst->type, sizeof(dst->type), "%s", sp->instance_type);
        snprintf(dst->zone, sizeof(dst->zone), "%s", sp->zone);
        dst->uusd = sp->uusd_per_hour;
        dst->at_ms = sp->timestamp_ms;
    }
}

static void refresh_prices(struct aws_provider *ap)
{
    const char *types[CAND_MAX];
    size_t n = 0;
    char *body = NULL;
    uint64_t now = uv_now(ap->loop);

    if (ap->prices_inflight || ap->closing || ap->npools == 0 || ap->no_price_refresh ||
        (ap->prices_at && now - ap->prices_at < PRICE_REFRESH_MS))
        return;
    for (size_t i = 0; i < ap->npools; i++)
        for (size_t j = 0; j < ap->pools[i].ntypes && n < CAND_MAX; j++)
            types[n++] = ap->pools[i].types[j];
    if (tm_ec2_build_describe_spot_price_history(types, n, NULL, "Linux/UNIX", 0, NULL, &body) <
        0)
        return;
    ap->prices_at = now ? now : 1;
    if (tm_ec2_call(ap->ec2, TM_EC2_DESCRIBE_SPOT_PRICE_HISTORY, body, TM_EC2_RETRY_AMBIGUOUS,
                    on_prices, ap) == 0)
        ap->prices_inflight = true;
}

static int aws_price(struct tm_provider *p, const char *instance_type, const char *zone,
                     enum tm_capacity_type capacity, int64_t *ret_uusd_per_hour)
{
    struct aws_provider *ap = impl(p);
    int64_t best = -1;

    if (!instance_type || !ret_uusd_per_hour)
        return TM_EINVAL;
    if (tm_provider_types_price(ap->types, ap->ntypes, instance_type, capacity,
                                ret_uusd_per_hour) == 0)
        return 0;
    /* No configured spot price: the latest spot price history read. */
    if (capacity != TM_CAPACITY_SPOT)
        return TM_ENOTFOUND;
    for (size_t i = 0; i < ap->nprices; i++) {
        const struct spot_price *sp = &ap->prices[i];

        if (strcmp(sp->type, instance_type) != 0)
            continue;
        if (zone && *zone && strcmp(sp->zone, zone) != 0)
            continue;
        if (best < 0 || sp->uusd < best)
            best = sp->uusd;
    }
    if (best < 0)
        return TM_ENOTFOUND;
    *ret_uusd_per_hour = best;
    return 0;
}

/* ---- validate pools ----------------------------------------------------- */

static int validate_next(struct aws_op *op);

static void validate_deliver(struct aws_op *op, int status, const char *reason)
{
    if (status == TM_EINVAL)
        tm_log_error("aws pool refused", "provider=%s reason=\"%s\"", op->ap->name, reason);
    op->cb.validate(status, reason, op->data);
    op_free(op);
}

/* The last step: every pool's reservations, as EC2 describes them. */
static void on_validate_reservations(int status, const char *reason, void *data)
{
    validate_deliver(data, status, reason);
}

static void on_validate(int status, const struct tm_ec2_reply *reply, void *data)
{
    struct aws_op *op = data;
    const struct tm_provider_pool *pool;
    char reason[512];
    int r;

    if (op->ap->npools == 0) {
        /* Nothing to check but that aws answers us. */
        validate_deliver(op, status, status < 0 ? "could not reach aws with these credentials"
                                                : NULL);
        return;
    }
    pool = &op->ap->pools[op->pool_i];
    if (status < 0) {
        if (strcmp(reply->error_code, "InvalidInstanceType") == 0) {
            snprintf(reason, sizeof(reason), "pool \"%s\": instance type unknown to aws in %s: "
                     "%s", pool->name, op->ap->region, reply->error_message);
            validate_deliver(op, TM_EINVAL, reason);
        } else {
            snprintf(reason, sizeof(reason), "could not check pool \"%s\" with aws: %s%s%s",
                     pool->name, tm_strerror(status), reply->error_code[0] ? ": " : "",
                     reply->error_code);
            validate_deliver(op, status, reason);
        }
        return;
    }
    for (size_t i = 0; i < pool->ntypes; i++) {
        const struct tm_ec2_type_info *t = NULL;

        for (size_t j = 0; j < reply->ntypes; j++)
            if (strcmp(reply->types[j].name, pool->types[i]) == 0)
                t = &reply->types[j];
        if (!t) {
            snprintf(reason, sizeof(reason), "pool \"%s\": instance type \"%s\" is unknown to "
                     "aws in %s", pool->name, pool->types[i], op->ap->region);
            validate_deliver(op, TM_EINVAL, reason);
            return;
        }
        if (t->gpus == 0) {
            snprintf(reason, sizeof(reason), "pool \"%s\": instance type \"%s\" has no GPU, "
                     "the pool says %d x %s", pool->name, t->name, pool->gpus, pool->gpu_model);
            validate_deliver(op, TM_EINVAL, reason);
            return;
        }
        if (strcasecmp(t->gpu_model, pool->gpu_model) != 0 || t->gpus != pool->gpus) {
            snprintf(reason, sizeof(reason), "pool \"%s\": instance type \"%s\" has %d x %s %s, "
                     "not %d x %s", pool->name, t->name, t->gpus, t->gpu_manufacturer,
                     t->gpu_model, pool->gpus, pool->gpu_model);
            validate_deliver(op, TM_EINVAL, reason);
            return;
        }
    }
    op->pool_i++;
    r = validate_next(op);
    if (r == 1)
        r = aws_reservations_check(&op->ap->resv, op->ap->pools, op->ap->npools,
                                   on_validate_reservations, op);
    if (r == 1)
        validate_deliver(op, 0, NULL);
    else if (r < 0)
        validate_deliver(op, r, "could not check pools with aws");
}

/* 1 when every pool has been checked. */
static int validate_next(struct aws_op *op)
{
    const struct tm_provider_pool *pool;
    char *body = NULL;
    int r;

    if (op->pool_i >= op->ap->npools)
        return 1;
    pool = &op->ap->pools[op->pool_i];
    r = tm_ec2_build_describe_instance_types((const char *const *)pool->types, pool->ntypes, 0,
                                             NULL, &body);
    if (r < 0)
        return r;
    return tm_ec2_call(op->ap->ec2, TM_EC2_DESCRIBE_INSTANCE_TYPES, body, TM_EC2_RETRY_AMBIGUOUS,
                       on_validate, op);
}

int tm_aws_validate_pools(struct tm_provider *p, tm_aws_validate_cb cb, void *data)
{
    struct aws_provider *ap;
    struct aws_op *op;
    int r;

    if (!p || p->ops != &aws_ops || !cb)
        return TM_EINVAL;
    ap = impl(p);
    if (ap->closing)
        return TM_ECANCELED;
    op = calloc(1, sizeof(*op));
    if (!op)
        return TM_ENOMEM;
    op->ap = ap;
    op->kind = OP_VALIDATE;
    op->cb.validate = cb;
    op->data = data;
    if (ap->npools == 0) {
        /* No pool to check; still never answer inside the call, and one
         * small DescribeInstanceTypes proves the credentials work. */
        char *body = NULL;
        const char *none[] = {"t3.micro"};

        r = tm_ec2_build_describe_instance_types(none, 1, 0, NULL, &body);
        if (r == 0)
            r = tm_ec2_call(ap->ec2, TM_EC2_DESCRIBE_INSTANCE_TYPES, body,
                            TM_EC2_RETRY_AMBIGUOUS, on_validate, op);
    } else {
        r = validate_next(op);
    }
    if (r != 0) {
        op_free(op);
        return r < 0 ? r : TM_EINVAL;
    }
    return 0;
}

/* ---- create / close ----------------------------------------------------- */

static void provider_free(void *provider)
{
    struct aws_provider *ap = provider;

    tm_provider_pools_free(ap->pools, ap->npools);
    tm_provider_types_free(ap->types, ap->ntypes);
    tm_reservations_free(&ap->resv.rs);
    free(ap->image_id);
    free(ap);
}

static int copy_config(struct aws_provider *ap, const struct tm_config *cfg,
                       const struct tm_config_provider *prov)
{
    int r = tm_provider_pools_copy(cfg, prov->name, &ap->pools, &ap->npools);

    if (r == 0)
        r = tm_reservations_copy(cfg, prov->name, &ap->resv.rs);
    return r < 0 ? r : tm_provider_types_copy(prov, &ap->types, &ap->ntypes);
}

int tm_aws_provider_create_ex(uv_loop_t *loop, const struct tm_config *cfg,
                              const struct tm_config_provider *prov,
                              const struct tm_aws_provider_options *opts,
                              struct tm_provider **ret)
{
    struct tm_aws_provider_options dflt = {0};
    struct tm_ec2_options eo = {0};
    struct aws_provider *ap;
    char endpoint[512];
    char err[256] = "";
    const char *image;
    const struct tm_config_aws *aws_cfg;
    int r;

    if (!loop || !cfg || !prov || !ret || !prov->kind || strcmp(prov->kind, "aws") != 0 ||
        !tm_id_fits(prov->name) || !cfg->cluster || !tm_id_fits(cfg->cluster))
        return TM_EINVAL;
    if (!opts) {
        dflt.retry.max_attempts = (unsigned)tm_provider_env_u64("TARMAC_AWS_MAX_ATTEMPTS", 0);
        dflt.retry.max_total_delay_ms = tm_provider_env_u64("TARMAC_AWS_MAX_RETRY_DELAY_MS", 0);
        dflt.timeout_ms = (long)tm_provider_env_u64("TARMAC_AWS_TIMEOUT_MS", 0);
        opts = &dflt;
    }
    ap = calloc(1, sizeof(*ap));
    if (!ap)
        return TM_ENOMEM;
    ap->base.ops = &aws_ops;
    ap->base.impl = ap;
    ap->loop = loop;
    snprintf(ap->name, sizeof(ap->name), "%s", prov->name);
    snprintf(ap->cluster, sizeof(ap->cluster), "%s", cfg->cluster);
    snprintf(ap->template_name, sizeof(ap->template_name), "tarmac-%s", cfg->cluster);
    ap->page_size = opts->list_page_size > 0 ? opts->list_page_size : 1000;
    tm_shortages_init(&ap->shorts, "aws", "type", ap->name, opts->shortage_ttl_ms);
    ap->launch = (struct tm_launch_env){
        .now_ms = loop_now, .clock = loop, .name = ap->name, .cluster = ap->cluster,
        .shorts = &ap->shorts, .closing = &ap->closing,
        .free_provider = provider_free, .provider = ap,
        .max_relaunch = opts->retry.max_attempts ? opts->retry.max_attempts : 5,
    };
    ap->no_price_refresh = opts->no_price_refresh;
    /* The config's image, else the environment (tests, one-off runs). */
    aws_cfg = tm_aws_config(prov);
    image = opts->image_id ? opts->image_id
            : aws_cfg && aws_cfg->image_id ? aws_cfg->image_id : getenv("TARMAC_AWS_IMAGE_ID");
    if (image && *image) {
        ap->image_id = strdup(image);
        if (!ap->image_id) {
            r = TM_ENOMEM;
            goto fail;
        }
    }
    r = copy_config(ap, cfg, prov);
    if (r < 0)
        goto fail;
    ap->launch.pools = ap->pools;
    ap->launch.npools = ap->npools;
    ap->launch.reservations = ap->resv.rs.n ? &ap->resv.rs : NULL;
    r = tm_aws_credential_options_from_config(&prov->credentials, &eo.cred);
    if (r < 0) {
        tm_log_error("could not create aws provider: unknown credentials source",
                     "provider=%s source=%s", prov->name,
                     prov->credentials.source ? prov->credentials.source : "-");
        goto fail;
    }
    r = tm_aws_region_resolve(prov->region, &eo.cred, ap->region, sizeof(ap->region), err,
                              sizeof(err));
    if (r < 0) {
        tm_log_error("could not create aws provider: no region", "provider=%s error=\"%s\"",
                     prov->name, err);
        r = TM_EINVAL;
        goto fail;
    }
    r = tm_aws_endpoint_resolve(prov->endpoint, ap->region, endpoint, sizeof(endpoint));
    if (r < 0) {
        tm_log_error("could not create aws provider: bad endpoint", "provider=%s", prov->name);
        goto fail;
    }
    eo.endpoint = endpoint;
    eo.region = ap->region;
    eo.retry = opts->retry;
    eo.timeout_ms = opts->timeout_ms;
    eo.auth_cooldown_ms = opts->auth_cooldown_ms;
    eo.seed = opts->seed;
    eo.test_corrupt_signature = opts->test_corrupt_signature;
    r = tm_ec2_create(loop, &eo, &ap->ec2);
    if (r < 0)
        goto fail;
    ap->resv.ec2 = ap->ec2;
    ap->resv.loop = loop;
    ap->resv.provider = ap->name;
    ap->resv.closing = &ap->closing;
    ap->resv.refresh_ms = opts->reservation_refresh_ms;
    if (!ap->resv.refresh_ms)
        ap->resv.refresh_ms = tm_provider_env_u64("TARMAC_AWS_RESERVATION_REFRESH_MS",
                                                  TM_AWS_RESERVATION_REFRESH_MS);
    tm_log_info("aws provider ready", "provider=%s region=%s endpoint=%s pools=%zu", ap->name,
                ap->region, endpoint, ap->npools);
    *ret = &ap->base;
    return 0;
fail:
    provider_free(ap);
    return r;
}

int tm_aws_provider_create(uv_loop_t *loop, const struct tm_config *cfg,
                           const struct tm_config_provider *prov, struct tm_provider **ret)
{
    return tm_aws_provider_create_ex(loop, cfg, prov, NULL, ret);
}

static void aws_close(struct tm_provider *p, void (*done)(void *data), void *data)
{
    struct aws_provider *ap = impl(p);

    /* Calls in flight come back with TM_ECANCELED, from the loop. */
    if (tm_launch_env_close(&ap->launch, done, data))
        tm_ec2_close(ap->ec2, tm_launch_env_closed, &ap->launch);
}

static size_t aws_notices(struct tm_provider *p, struct tm_provider_notice *out, size_t max)
{
    return aws_reservations_notices(&impl(p)->resv, out, max);
}

static const struct tm_provider_ops aws_ops = {
    .name = "aws",
    .notices = aws_notices,
    .launch = aws_launch,
    .terminate = aws_terminate,
    .list = aws_list,
    .price = aws_price,
    .close = aws_close,
    .launch_set = aws_launch_set,
};
