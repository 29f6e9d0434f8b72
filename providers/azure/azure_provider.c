/*
 * providers/azure/azure_provider.c: struct tm_provider_ops on ARM (see the header).
 *
 * Each provider call is a struct az_op with exactly one ARM call
 * outstanding until it delivers; the ARM client calls back exactly once,
 * even when closed (TM_ECANCELED), and never from inside tm_arm_call(), so
 * no op callback fires inside a provider call.
 */
#include "providers/azure/azure_provider.h"

#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include <openssl/crypto.h>

#include "core/err.h"
#include "core/log.h"
#include "providers/azure/azure_config.h"
#include "providers/common/jwt.h"
#include "providers/common/launch.h"
#include "providers/common/pools.h"
#include "providers/common/settings.h"
#include "providers/common/shortage.h"

#define SEEN_MAX 1024
#define LIST_MAX_PAGES 1000
#define GONE_KEEP_MS (10 * 60 * 1000)

/* A spot VM the last listing showed, or one tarmac asked to delete. */
struct seen {
    struct tm_instance inst;
    bool deleting_by_us;
    bool gone;                    /* vanished without our DELETE: evicted */
    uint64_t at;                  /* uv_now() of the last sighting / of the DELETE */
};

struct az_provider {
    struct tm_provider base;
    uv_loop_t *loop;
    struct tm_arm *arm;
    char name[TM_ID_MAX];
    char cluster[TM_ID_MAX];
    char location[TM_ID_MAX];
    char vms_path[512];
    char *subnet_id, *image, *admin_username, *ssh_public_key;
    struct tm_provider_pool *pools;
    size_t npools;
    struct tm_config_instance_type *types;
    size_t ntypes;
    struct tm_shortages shorts;
    struct seen seen[SEEN_MAX];
    size_t nseen;
    struct tm_launch_env launch;  /* the launch engine's view, and the
                                   * launches in flight (their VM names) */
    bool closing;
};

static const struct tm_provider_ops azure_ops;

enum op_kind { OP_TERMINATE, OP_LIST };
enum launch_step { STEP_FIND, STEP_CLEAN, STEP_PUT, STEP_UNDO };

struct az_op {
    struct az_provider *ap;
    enum op_kind kind;
    union {
        tm_done_cb done;
        tm_list_cb list;
    } cb;
    void *data;
    char vm[TM_ID_MAX];           /* terminate */
    /* list */
    struct tm_instance *list;
    size_t nlist, caplist;
    unsigned pages;
};

static struct az_provider *impl(struct tm_provider *p) { return p->impl; }

static void op_free(struct az_op *op)
{
    free(op->list);
    free(op);
}

struct tm_arm *tm_azure_provider_arm(struct tm_provider *p) { return impl(p)->arm; }

/* ---- shortage memory ---------------------------------------------------- */

bool tm_azure_provider_is_short(struct tm_provider *p, const char *vm_size, const char *zone,
                                enum tm_capacity_type capacity)
{
    return tm_launch_is_short(&impl(p)->launch, vm_size, zone, capacity);
}

/* ---- what tarmac deleted, what the cloud took --------------------------- */

static struct seen *seen_find(struct az_provider *ap, const char *id)
{
    for (size_t i = 0; i < ap->nseen; i++)
        if (strcmp(ap->seen[i].inst.id, id) == 0)
            return &ap->seen[i];
    return NULL;
}

static struct seen *seen_add(struct az_provider *ap, const struct tm_instance *inst)
{
    struct seen *s = seen_find(ap, inst->id);

    if (s)
        return s;
    if (ap->nseen == SEEN_MAX) {
        /* Forget the oldest entry. */
        size_t old = 0;

        for (size_t i = 1; i < ap->nseen; i++)
            if (ap->seen[i].at < ap->seen[old].at)
                old = i;
        ap->seen[old] = ap->seen[--ap->nseen];
    }
    s = &ap->seen[ap->nseen++];
    memset(s, 0, sizeof(*s));
    s->inst = *inst;
    return s;
}

static void seen_mark_deleting(struct az_provider *ap, const char *id)
{
    struct tm_instance inst = {0};
    struct seen *s;

    snprintf(inst.id, sizeof(inst.id), "%s", id);
    s = seen_add(ap, &inst);
    s->deleting_by_us = true;
    s->at = uv_now(ap->loop);
}

static uint64_t loop_now(void *loop) { return uv_now(loop); }

/* ---- launch: the engine's primitives on ARM ----------------------------- */

/*
 * The engine (providers/common/launch.c) walks the offers.  On ARM the VM's
 * name is the node's, so the find is a GET by name; a VM found Failed (or
 * being deleted) holds the name and is deleted before the offers are
 * walked.  An offer is one PUT; a VM that exists but could not be placed
 * (provisioning Failed) is a shortage like a refused PUT, and is deleted
 * before the next offer, so nothing is left and the next PUT may change its
 * zone or market.
 */
struct az_launch {
    enum launch_step step;
    char vm[TM_ID_MAX];
};

static struct az_provider *launch_ap(const struct tm_launch *l)
{
    return (struct az_provider *)(void *)((char *)l->env - offsetof(struct az_provider, launch));
}

static char *vm_path(struct az_provider *ap, const char *vm, const char *extra)
{
    size_t n = strlen(ap->vms_path) + strlen(vm) + 64 + strlen(extra);
    char *p = malloc(n);

    if (p)
        snprintf(p, n, "%s/%s?api-version=%s%s", ap->vms_path, vm, TM_ARM_API_VERSION, extra);
    return p;
}

static int vm_call(struct az_provider *ap, const char *vm, enum tm_arm_call call,
                   const char *method, const char *body, unsigned flags, tm_arm_cb cb, void *data)
{
    char *path = vm_path(ap, vm, "");
    int r;

    /* Whatever tarmac deletes (a node's VM, a failed attempt) is no eviction. */
    if (strcmp(method, "DELETE") == 0)
        seen_mark_deleting(ap, vm);
    if (!path)
        return TM_ENOMEM;
    r = tm_arm_call(ap->arm, call, method, path, body, flags, cb, data);
    free(path);
    return r;
}

static void on_launch_step(int status, const struct tm_arm_reply *reply, void *data);

static int launch_call(struct tm_launch *l, enum launch_step step, enum tm_arm_call call,
                       const char *method, const char *body)
{
    struct az_launch *al = l->priv;

    al->step = step;
    return vm_call(launch_ap(l), al->vm, call, method, body,
                   TM_ARM_RETRY_AMBIGUOUS | TM_ARM_FOLLOW_ASYNC, on_launch_step, l);
}

static int azure_launch_find(struct tm_launch *l)
{
    struct az_launch *al = l->priv;

    al->step = STEP_FIND;
    return vm_call(launch_ap(l), al->vm, TM_ARM_GET_VM, "GET", NULL, TM_ARM_RETRY_AMBIGUOUS,
                   on_launch_step, l);
}

static int azure_launch_create(struct tm_launch *l, size_t i)
{
    struct az_provider *ap = launch_ap(l);
    struct az_launch *al = l->priv;
    const struct tm_launch_offer *c = &l->offers[i];
    struct tm_arm_vm_params vp = {
        .name = al->vm, .location = ap->location, .zone = c->zone, .vm_size = l->type,
        .spot = c->capacity == TM_CAPACITY_SPOT, .subnet_id = ap->subnet_id,
        .image = ap->image, .admin_username = ap->admin_username,
        .ssh_public_key = ap->ssh_public_key, .custom_data = l->bootstrap,
        .custom_data_len = l->bootstrap_len, .cluster = ap->cluster, .pool = l->pool,
        .node = l->node, .token = l->token,
    };
    char *body = NULL;
    int r = tm_arm_build_vm(&vp, &body);

    if (r < 0)
        return r;
    tm_log_info("azure launch", "provider=%s pool=%s node=%lld token=%s vm=%s size=%s zone=%s "
                "market=%s", ap->name, l->pool, (long long)l->node_id, l->token, al->vm,
                l->type, c->zone[0] ? c->zone : "-", tm_capacity_type_name(c->capacity));
    r = launch_call(l, STEP_PUT, TM_ARM_PUT_VM, "PUT", body);
    OPENSSL_cleanse(body, strlen(body));
    free(body);
    return r;
}

static int parse_vm_reply(struct az_provider *ap, const struct tm_arm_reply *reply,
                          struct tm_arm_vm *vm)
{
    char err[256];
    int r = tm_arm_parse_vm(reply->body, reply->body_len, vm, err, sizeof(err));

    if (r < 0)
        tm_log_warn("azure answer unreadable", "provider=%s call=%s error=\"%s\"", ap->name,
                    tm_arm_call_name(reply->call), err);
    return r;
}

/* A VM found by name: kept unless a failed attempt holds the name. */
static void on_found(struct tm_launch *l, const struct tm_arm_reply *reply)
{
    struct tm_arm_vm vm;
    int r;

    if (parse_vm_reply(launch_ap(l), reply, &vm) < 0) {
        tm_launch_found(l, TM_EBADREPLY, NULL);
        return;
    }
    if (strcasecmp(vm.provisioning_state, "Failed") != 0 &&
        strcasecmp(vm.provisioning_state, "Deleting") != 0) {
        tm_launch_found(l, 0, &vm.inst);
        return;
    }
    r = launch_call(l, STEP_CLEAN, TM_ARM_DELETE_VM, "DELETE", NULL);
    if (r < 0)
        tm_launch_found(l, r, NULL);
}

static void on_put(struct tm_launch *l, int status, const struct tm_arm_reply *reply)
{
    struct az_provider *ap = launch_ap(l);
    const struct tm_launch_offer *c = &l->offers[l->cur];
    const char *code = reply->error_code;
    struct tm_arm_vm vm;
    int r;

    if (status == 0) {
        if (parse_vm_reply(ap, reply, &vm) < 0) {
            tm_launch_made(l, TM_LAUNCH_FATAL, TM_EBADREPLY, NULL, NULL);
            return;
        }
        if (strcasecmp(vm.provisioning_state, "Failed") != 0) {
            tm_launch_made(l, TM_LAUNCH_OK, 0, &vm.inst, NULL);
            return;
        }
        status = TM_EQUOTA; /* the VM exists but could not be placed */
        if (!code[0])
            code = "ProvisioningFailed";
    }
    if (status != TM_EQUOTA) {
        tm_log_warn("azure launch failed", "provider=%s vm=%s err=%s code=%s http=%ld", ap->name,
                    ((struct az_launch *)l->priv)->vm, tm_err_name(status),
                    reply->error_code[0] ? reply->error_code : "-", reply->http_status);
        tm_launch_made(l, TM_LAUNCH_FATAL, status, NULL, NULL);
        return;
    }
    tm_launch_note_short(l->env, c->type, c->zone, c->capacity, code[0] ? code : NULL);
    /* An asynchronous allocation failure leaves a Failed VM behind that
     * holds the name and the zone: delete it before the next offering. */
    r = launch_call(l, STEP_UNDO, TM_ARM_DELETE_VM, "DELETE", NULL);
    if (r < 0)
        tm_launch_made(l, TM_LAUNCH_FATAL, r, NULL, NULL);
}

static void on_launch_step(int status, const struct tm_arm_reply *reply, void *data)
{
    struct tm_launch *l = data;
    struct az_launch *al = l->priv;
    bool finding = al->step == STEP_FIND || al->step == STEP_CLEAN;

    if (status == TM_ECANCELED || launch_ap(l)->closing) {
        if (finding)
            tm_launch_found(l, TM_ECANCELED, NULL);
        else
            tm_launch_made(l, TM_LAUNCH_FATAL, TM_ECANCELED, NULL, NULL);
        return;
    }
    switch (al->step) {
    case STEP_FIND:
        if (status == TM_ENOTFOUND)
            tm_launch_found(l, 0, NULL);
        else if (status < 0)
            tm_launch_found(l, status, NULL);
        else
            on_found(l, reply);
        return;
    case STEP_CLEAN:
        tm_launch_found(l, status < 0 && status != TM_ENOTFOUND ? status : 0, NULL);
        return;
    case STEP_PUT:
        on_put(l, status, reply);
        return;
    case STEP_UNDO:
        if (status < 0 && status != TM_ENOTFOUND)
            tm_launch_made(l, TM_LAUNCH_FATAL, status, NULL, NULL);
        else
            tm_launch_made(l, TM_LAUNCH_NEXT, TM_EQUOTA, NULL, NULL);
        return;
    }
}

static int azure_launch_prepare(struct tm_launch *l, const struct tm_launch_request *req)
{
    struct az_launch *al = l->priv;

    if (req->node_id <= 0)
        return TM_EINVAL;
    return tm_arm_vm_name(launch_ap(l)->cluster, req->node_id, al->vm, sizeof(al->vm)) < 0
               ? TM_EINVAL : 0;
}

static const struct tm_launch_backend azure_launch_backend = {
    .cloud = "azure",
    .priv_size = sizeof(struct az_launch),
    .found_by = "name",
    .prepare = azure_launch_prepare,
    .find = azure_launch_find,
    .create = azure_launch_create,
};

static int azure_launch(struct tm_provider *p, const struct tm_launch_request *req,
                        tm_launch_cb cb, void *data)
{
    return tm_launch_start(&impl(p)->launch, &azure_launch_backend, req, cb, data);
}

/* ---- terminate ---------------------------------------------------------- */

static void on_terminate(int status, const struct tm_arm_reply *reply, void *data)
{
    struct az_op *op = data;

    (void)reply;
    if (status == TM_ENOTFOUND)
        status = 0; /* already gone: nothing billing */
    if (status == 0)
        tm_log_info("azure vm deleted", "provider=%s vm=%s", op->ap->name, op->vm);
    op->cb.done(status, op->data);
    op_free(op);
}

static int azure_terminate(struct tm_provider *p, const char *instance_id, tm_done_cb cb,
                           void *data)
{
    struct az_provider *ap = impl(p);
    struct az_op *op;
    int r;

    if (!cb || !tm_id_fits(instance_id) || !instance_id[0] || strchr(instance_id, '/') ||
        strchr(instance_id, '?'))
        return TM_EINVAL;
    if (ap->closing)
        return TM_ECANCELED;
    op = calloc(1, sizeof(*op));
    if (!op)
        return TM_ENOMEM;
    op->ap = ap;
    op->kind = OP_TERMINATE;
    op->cb.done = cb;
    op->data = data;
    snprintf(op->vm, sizeof(op->vm), "%s", instance_id);
    r = vm_call(ap, op->vm, TM_ARM_DELETE_VM, "DELETE", NULL,
                TM_ARM_RETRY_AMBIGUOUS | TM_ARM_FOLLOW_ASYNC, on_terminate, op);
    if (r < 0)
        op_free(op);
    return r;
}

/* ---- list --------------------------------------------------------------- */

static int list_push(struct az_op *op, const struct tm_instance *inst)
{
    if (op->nlist == op->caplist) {
        size_t cap = op->caplist ? op->caplist * 2 : 64;
        struct tm_instance *n = realloc(op->list, cap * sizeof(*n));

        if (!n)
            return TM_ENOMEM;
        op->list = n;
        op->caplist = cap;
    }
    op->list[op->nlist++] = *inst;
    return 0;
}

static void list_deliver(struct az_op *op, int status)
{
    op->cb.list(status, status == 0 ? op->list : NULL, status == 0 ? op->nlist : 0, op->data);
    op_free(op);
}

/* After the last page: spot VMs that vanished without a DELETE of ours
 * were evicted; report them (terminated, interrupted) for a while. */
static int list_finish(struct az_op *op)
{
    struct az_provider *ap = op->ap;
    uint64_t now = uv_now(ap->loop);

    for (size_t i = 0; i < ap->nseen;) {
        struct seen *s = &ap->seen[i];
        bool listed = false;

        for (size_t j = 0; j < op->nlist && !listed; j++)
            listed = strcmp(op->list[j].id, s->inst.id) == 0;
        if (!listed && !s->deleting_by_us && !s->gone && s->inst.capacity == TM_CAPACITY_SPOT) {
            s->gone = true;
            s->at = now;
            s->inst.state = TM_INSTANCE_TERMINATED;
            s->inst.interrupted = true;
            tm_log_info("azure spot vm evicted", "provider=%s vm=%s pool=%s node=%lld", ap->name,
                        s->inst.id, s->inst.pool, (long long)s->inst.node_id);
        }
        if (!listed && (now - s->at > GONE_KEEP_MS || (!s->gone && !s->deleting_by_us))) {
            ap->seen[i] = ap->seen[--ap->nseen];
            continue;
        }
        if (!listed && s->gone && list_push(op, &s->inst) < 0)
            return TM_ENOMEM;
        i++;
    }
    return 0;
}

static int list_page(struct az_op *op, const char *next);

static void on_list(int status, const struct tm_arm_reply *reply, void *data)
{
    struct az_op *op = data;
    struct az_provider *ap = op->ap;
    struct tm_arm_vm *vms = NULL;
    size_t n = 0;
    char *next = NULL;
    char err[256] = "";
    int r;

    if (status == TM_ECANCELED || ap->closing) {
        list_deliver(op, TM_ECANCELED);
        return;
    }
    if (status < 0) {
        tm_log_warn("could not list azure vms", "provider=%s err=%s code=%s", ap->name,
                    tm_err_name(status), reply->error_code[0] ? reply->error_code : "-");
        list_deliver(op, status);
        return;
    }
    r = tm_arm_parse_vm_list(reply->body, reply->body_len, &vms, &n, &next, err, sizeof(err));
    if (r < 0) {
        tm_log_warn("azure answer unreadable", "provider=%s error=\"%s\"", ap->name, err);
        list_deliver(op, r);
        return;
    }
    for (size_t i = 0; i < n && r == 0; i++) {
        struct tm_arm_vm *vm = &vms[i];
        struct seen *s;

        if (strcmp(vm->cluster, ap->cluster) != 0)
            continue;
        /* A failed attempt a launch in flight is clearing and retrying in
         * another zone or market is still that launch: pending, not dead. */
        for (const struct tm_launch *l = ap->launch.launching; l; l = l->next_launch) {
            const struct az_launch *al = l->priv;

            if (strcmp(al->vm, vm->inst.id) == 0 && (vm->inst.state == TM_INSTANCE_TERMINATED ||
                                                      vm->inst.state == TM_INSTANCE_STOPPING))
                vm->inst.state = TM_INSTANCE_PENDING;
        }
        s = seen_find(ap, vm->inst.id);
        /* Azure deleting a spot VM tarmac did not ask to delete: eviction. */
        if (vm->spot && vm->inst.state == TM_INSTANCE_STOPPING && !(s && s->deleting_by_us))
            vm->inst.interrupted = true;
        if (vm->spot && !(s && s->deleting_by_us)) {
            s = seen_add(ap, &vm->inst);
            s->inst = vm->inst;
            s->gone = false;
            s->at = uv_now(ap->loop);
        } else if (s) {
            s->at = uv_now(ap->loop);
        }
        r = list_push(op, &vm->inst);
    }
    free(vms);
    if (r == 0 && next) {
        if (++op->pages >= LIST_MAX_PAGES) {
            tm_log_warn("azure vm list has too many pages", "provider=%s", ap->name);
            r = TM_EBADREPLY;
        } else {
            r = list_page(op, next);
            free(next);
            if (r == 0)
                return;
            next = NULL;
        }
    }
    free(next);
    if (r == 0)
        r = list_finish(op);
    list_deliver(op, r);
}

static int list_page(struct az_op *op, const char *next)
{
    char path[600];

    if (next)
        return tm_arm_call(op->ap->arm, TM_ARM_LIST_VMS, "GET", next, NULL,
                           TM_ARM_RETRY_AMBIGUOUS, on_list, op);
    snprintf(path, sizeof(path), "%s?api-version=%s", op->ap->vms_path, TM_ARM_API_VERSION);
    return tm_arm_call(op->ap->arm, TM_ARM_LIST_VMS, "GET", path, NULL, TM_ARM_RETRY_AMBIGUOUS,
                       on_list, op);
}

static int azure_list(struct tm_provider *p, const char *cluster, tm_list_cb cb, void *data)
{
    struct az_provider *ap = impl(p);
    struct az_op *op;
    int r;

    if (!cb || (cluster && strcmp(cluster, ap->cluster) != 0))
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
    if (r < 0)
        op_free(op);
    return r;
}

/* ---- price -------------------------------------------------------------- */

static int azure_price(struct tm_provider *p, const char *instance_type, const char *zone,
                       enum tm_capacity_type capacity, int64_t *ret_uusd_per_hour)
{
    struct az_provider *ap = impl(p);

    (void)zone;
    if (!instance_type || !ret_uusd_per_hour)
        return TM_EINVAL;
    return tm_provider_types_price(ap->types, ap->ntypes, instance_type, capacity,
                                   ret_uusd_per_hour);
}

/* ---- create / close ----------------------------------------------------- */

static void provider_free(void *provider)
{
    struct az_provider *ap = provider;

    tm_provider_pools_free(ap->pools, ap->npools);
    tm_provider_types_free(ap->types, ap->ntypes);
    free(ap->subnet_id);
    free(ap->image);
    free(ap->admin_username);
    free(ap->ssh_public_key);
    free(ap);
}

static int copy_config(struct az_provider *ap, const struct tm_config *cfg,
                       const struct tm_config_provider *prov)
{
    int r = tm_provider_pools_copy(cfg, prov->name, &ap->pools, &ap->npools);

    return r < 0 ? r : tm_provider_types_copy(prov, &ap->types, &ap->ntypes);
}

int tm_azure_read_secret(const struct tm_config_credentials *creds, char **ret, char *why,
                         size_t whysize)
{
    const char *src = creds && creds->source ? creds->source : "env";

    *ret = NULL;
    if (strcmp(src, "instance_role") == 0)
        return 0;
    if (strcmp(src, "env") == 0 || strcmp(src, "none") == 0) {
        const char *s = getenv("AZURE_CLIENT_SECRET");

        if (!s || !*s) {
            snprintf(why, whysize, "no client secret: AZURE_CLIENT_SECRET is not set "
                     "(credentials.source is %s)", src);
            return TM_EAUTH;
        }
        *ret = strdup(s);
        return *ret ? 0 : TM_ENOMEM;
    }
    if (strcmp(src, "file") == 0 && creds->file) {
        FILE *f = fopen(creds->file, "r");
        char buf[1024];
        size_t n;

        if (!f) {
            snprintf(why, whysize, "cannot read credentials.file %s: %s", creds->file,
                     strerror(errno));
            return TM_EAUTH;
        }
        n = fread(buf, 1, sizeof(buf) - 1, f);
        fclose(f);
        buf[n] = '\0';
        buf[strcspn(buf, "\r\n")] = '\0';
        if (!buf[0]) {
            snprintf(why, whysize, "credentials.file %s is empty", creds->file);
            return TM_EAUTH;
        }
        *ret = strdup(buf);
        OPENSSL_cleanse(buf, sizeof(buf));
        return *ret ? 0 : TM_ENOMEM;
    }
    snprintf(why, whysize, "credentials.source %s is not usable for azure", src);
    return TM_EAUTH;
}

/* Which certificate, and a warning when Azure will refuse it for its age
 * (the file is not refused: a clock may be wrong, a renewal under way). */
static void log_certificate(const char *provider, const struct tm_client_cert *cert)
{
    char *x5t = tm_jwt_b64url(cert->sha1, sizeof(cert->sha1));
    int64_t now = (int64_t)time(NULL);

    tm_log_info("azure client certificate loaded",
                "provider=%s subject=\"%s\" x5t=%s not_after=%lld", provider, cert->subject, x5t ? x5t : "-", (long long)cert->not_after);
    if (cert->not_after && cert->not_after < now)
        tm_log_warn("azure client certificate has expired; the identity platform will refuse it",
                    "provider=%s subject=\"%s\"", provider, cert->subject);
    else if (cert->not_after && cert->not_after < now + 14 * 86400)
        tm_log_warn("azure client certificate expires within 14 days",
                    "provider=%s subject=\"%s\" days_left=%lld", provider, cert->subject, (long long)((cert->not_after - now) / 86400));
    free(x5t);
}

int tm_azure_credential_read(const struct tm_config_provider *prov,
                             struct tm_azure_credential *ret, char *why, size_t whysize)
{
    const char *path = tm_azure_config(prov)->client_certificate;
    int r;

    memset(ret, 0, sizeof(*ret));
    if (path && *path) {
        char err[512];

        r = tm_client_cert_load(path, &ret->cert, err, sizeof(err));
        if (r < 0) {
            snprintf(why, whysize, "azure.client_certificate: %s", err);
            return r == TM_ENOMEM ? r : TM_EAUTH;
        }
        ret->auth = TM_ARM_AUTH_CERTIFICATE;
        return 0;
    }
    r = tm_azure_read_secret(&prov->credentials, &ret->secret, why, whysize);
    if (r < 0)
        return r;
    ret->auth = ret->secret ? TM_ARM_AUTH_SECRET : TM_ARM_AUTH_MANAGED_IDENTITY;
    return 0;
}

void tm_azure_credential_release(struct tm_azure_credential *cred)
{
    if (!cred)
        return;
    if (cred->secret) {
        OPENSSL_cleanse(cred->secret, strlen(cred->secret));
        free(cred->secret);
    }
    tm_client_cert_release(&cred->cert);
    memset(cred, 0, sizeof(*cred));
}

int tm_azure_provider_create_ex(uv_loop_t *loop, const struct tm_config *cfg,
                                const struct tm_config_provider *prov,
                                const struct tm_azure_provider_options *opts,
                                struct tm_provider **ret)
{
    struct tm_azure_provider_options dflt = {0};
    const struct tm_config_azure *az;
    struct tm_arm_options ao = {0};
    struct az_provider *ap;
    struct tm_azure_credential cred = {0};
    char why[600] = "";
    const char *endpoint;
    int r;

    if (!loop || !cfg || !prov || !ret || !prov->kind || strcmp(prov->kind, "azure") != 0 ||
        !tm_id_fits(prov->name) || !cfg->cluster || !tm_id_fits(cfg->cluster) ||
        !tm_id_fits(prov->region))
        return TM_EINVAL;
    az = tm_azure_config(prov);
    if (!az->subscription_id || !az->resource_group || !az->subnet_id || !az->image ||
        !az->ssh_public_key) {
        tm_log_error("could not create azure provider: azure section incomplete",
                     "provider=%s", prov->name);
        return TM_EINVAL;
    }
    if (!opts) {
        dflt.retry.max_attempts = (unsigned)tm_provider_env_u64("TARMAC_AZURE_MAX_ATTEMPTS", 0);
        dflt.retry.max_total_delay_ms = tm_provider_env_u64("TARMAC_AZURE_MAX_RETRY_DELAY_MS", 0);
        dflt.timeout_ms = (long)tm_provider_env_u64("TARMAC_AZURE_TIMEOUT_MS", 0);
        dflt.poll_ms = tm_provider_env_u64("TARMAC_AZURE_POLL_MS", 0);
        opts = &dflt;
    }
    r = tm_azure_credential_read(prov, &cred, why, sizeof(why));
    if (r < 0) {
        tm_log_error("could not create azure provider", "provider=%s reason=\"%s\"", prov->name,
                     why);
        return r;
    }
    ap = calloc(1, sizeof(*ap));
    if (!ap) {
        tm_azure_credential_release(&cred);
        return TM_ENOMEM;
    }
    ap->base.ops = &azure_ops;
    ap->base.impl = ap;
    ap->loop = loop;
    snprintf(ap->name, sizeof(ap->name), "%s", prov->name);
    snprintf(ap->cluster, sizeof(ap->cluster), "%s", cfg->cluster);
    snprintf(ap->location, sizeof(ap->location), "%s", prov->region);
    tm_shortages_init(&ap->shorts, "azure", "size", ap->name, opts->shortage_ttl_ms);
    ap->subnet_id = strdup(az->subnet_id);
    ap->image = strdup(az->image);
    ap->admin_username = strdup(az->admin_username ? az->admin_username : "tarmac");
    ap->ssh_public_key = strdup(az->ssh_public_key);
    r = tm_arm_vms_path(az->subscription_id, az->resource_group, ap->vms_path,
                        sizeof(ap->vms_path));
    if (r == 0 && (!ap->subnet_id || !ap->image || !ap->admin_username || !ap->ssh_public_key))
        r = TM_ENOMEM;
    if (r == 0)
        r = copy_config(ap, cfg, prov);
    if (r < 0)
        goto fail;
    ap->launch = (struct tm_launch_env){
        .now_ms = loop_now, .clock = loop, .name = ap->name, .cluster = ap->cluster,
        .shorts = &ap->shorts, .pools = ap->pools, .npools = ap->npools,
        .closing = &ap->closing, .free_provider = provider_free, .provider = ap,
    };
    endpoint = prov->endpoint ? prov->endpoint : getenv("TARMAC_AZURE_ENDPOINT");
    ao.endpoint = endpoint;
    ao.authority = az->authority;
    ao.imds = az->imds_endpoint;
    ao.tenant = az->tenant_id;
    ao.client_id = az->client_id ? az->client_id : getenv("AZURE_CLIENT_ID");
    ao.client_secret = cred.secret;
    ao.client_cert = cred.auth == TM_ARM_AUTH_CERTIFICATE ? &cred.cert : NULL;
    ao.auth = cred.auth;
    ao.ca_file = az->ca_file;
    ao.retry = opts->retry;
    ao.timeout_ms = opts->timeout_ms;
    ao.auth_cooldown_ms = opts->auth_cooldown_ms;
    ao.poll_ms = opts->poll_ms;
    ao.seed = opts->seed;
    if (ao.auth != TM_ARM_AUTH_MANAGED_IDENTITY && (!ao.client_id || !*ao.client_id)) {
        tm_log_error("could not create azure provider: no client id",
                     "provider=%s hint=\"set azure.client_id or AZURE_CLIENT_ID\"", prov->name);
        r = TM_EINVAL;
        goto fail;
    }
    r = tm_arm_create(loop, &ao, &ap->arm);
    if (r < 0)
        goto fail;
    if (cred.auth == TM_ARM_AUTH_CERTIFICATE)
        log_certificate(ap->name, &cred.cert);
    tm_azure_credential_release(&cred);
    tm_log_info("azure provider ready", "provider=%s location=%s endpoint=%s auth=%s pools=%zu",
                ap->name, ap->location, tm_arm_endpoint(ap->arm), tm_arm_auth_name(ao.auth),
                ap->npools);
    *ret = &ap->base;
    return 0;
fail:
    tm_azure_credential_release(&cred);
    provider_free(ap);
    return r;
}

int tm_azure_provider_create(uv_loop_t *loop, const struct tm_config *cfg,
                             const struct tm_config_provider *prov, struct tm_provider **ret)
{
    return tm_azure_provider_create_ex(loop, cfg, prov, NULL, ret);
}

static void azure_close(struct tm_provider *p, void (*done)(void *data), void *data)
{
    struct az_provider *ap = impl(p);

    /* Calls in flight come back with TM_ECANCELED, from the loop. */
    if (tm_launch_env_close(&ap->launch, done, data))
        tm_arm_close(ap->arm, tm_launch_env_closed, &ap->launch);
}

static const struct tm_provider_ops azure_ops = {
    .name = "azure",
    .launch = azure_launch,
    .terminate = azure_terminate,
    .list = azure_list,
    .price = azure_price,
    .close = azure_close,
    /* No all-or-nothing call for single VMs: each VM is PUT in turn (in
     * the first one's zone) and the set deleted whole if one fails. */
    .launch_set = tm_provider_launch_set_each,
};
