/*
 * providers/gcp/gce_json.c: Compute Engine answers (pure; see gce.h).
 *
 * Every answer is read with cJSON.  A member of the wrong type, a string
 * that does not fit, or a document that is not the resource asked for is
 * TM_EBADREPLY with a message naming the call; unknown members are
 * ignored (the API adds fields).
 */
#include "providers/gcp/gce.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include <cjson/cJSON.h>

#include "core/err.h"

#define BAD(...)                                                                     \
    do {                                                                             \
        snprintf(why, sizeof(why), __VA_ARGS__);                                     \
        goto bad;                                                                    \
    } while (0)

void tm_gce_reply_release(struct tm_gce_reply *reply)
{
    if (!reply)
        return;
    free(reply->next_page_token);
    free(reply->instances);
    free(reply->ops);
    memset(reply, 0, sizeof(*reply));
}

static const cJSON *get(const cJSON *o, const char *name)
{
    return cJSON_GetObjectItemCaseSensitive(o, name);
}

/* Copy an optional string member: 0, or -1 when present and not a string
 * or too long. */
static int str_member(const cJSON *o, const char *name, char *out, size_t size)
{
    const cJSON *v = get(o, name);

    out[0] = '\0';
    if (!v || cJSON_IsNull(v))
        return 0;
    if (!cJSON_IsString(v) || strlen(v->valuestring) >= size)
        return -1;
    memcpy(out, v->valuestring, strlen(v->valuestring) + 1);
    return 0;
}

/* The last path segment of a URL or a bare name. */
static int last_segment(const char *s, char *out, size_t size)
{
    const char *slash = strrchr(s, '/');
    const char *seg = slash ? slash + 1 : s;

    if (strlen(seg) >= size)
        return -1;
    memcpy(out, seg, strlen(seg) + 1);
    return 0;
}

/* RFC 3339 ("2026-12-02T00:01:02.345-08:00") to Unix ms; 0 when unreadable. */
static int64_t rfc3339_ms(const char *s)
{
    struct tm tm = {0};
    int y, mo, d, h, mi, sec, n = 0, ms = 0;
    const char *p;
    int64_t t;

    if (!s || sscanf(s, "%4d-%2d-%2dT%2d:%2d:%2d%n", &y, &mo, &d, &h, &mi, &sec, &n) != 6)
        return 0;
    p = s + n;
    if (*p == '.') {
        int digits = 0;

        for (p++; *p >= '0' && *p <= '9'; p++, digits++)
            if (digits < 3)
                ms = ms * 10 + (*p - '0');
        for (; digits < 3; digits++)
            ms *= 10;
    }
    tm.tm_year = y - 1900;
    tm.tm_mon = mo - 1;
    tm.tm_mday = d;
    tm.tm_hour = h;
    tm.tm_min = mi;
    tm.tm_sec = sec;
    t = (int64_t)timegm(&tm);
    if (*p == '+' || *p == '-') {
        int oh = 0, om = 0;

        if (sscanf(p + 1, "%2d:%2d", &oh, &om) != 2)
            return 0;
        t -= (*p == '+' ? 1 : -1) * (oh * 3600 + om * 60);
    } else if (*p != 'Z' && *p != 'z') {
        return 0;
    }
    return t * 1000 + ms;
}

static enum tm_instance_state map_status(const char *s)
{
    if (strcmp(s, "RUNNING") == 0 || strcmp(s, "REPAIRING") == 0)
        return TM_INSTANCE_RUNNING;
    if (strcmp(s, "STOPPING") == 0 || strcmp(s, "SUSPENDING") == 0)
        return TM_INSTANCE_STOPPING;
    if (strcmp(s, "SUSPENDED") == 0 || strcmp(s, "STOPPED") == 0)
        return TM_INSTANCE_STOPPED;
    if (strcmp(s, "TERMINATED") == 0)
        return TM_INSTANCE_TERMINATED;
    return TM_INSTANCE_PENDING; /* PROVISIONING, STAGING, unknown */
}

/* One Instance resource; -1 with why filled. */
static int parse_instance(const cJSON *o, struct tm_gce_instance *out, char *why, size_t wsize)
{
    const cJSON *labels, *meta, *items, *sched, *v;
    char zone[TM_ID_MAX] = "", buf[TM_ID_MAX], model[16] = "";

    memset(out, 0, sizeof(*out));
    if (!cJSON_IsObject(o)) {
        snprintf(why, wsize, "an instance is not an object");
        return -1;
    }
    if (str_member(o, "name", out->name, sizeof(out->name)) < 0 || !out->name[0]) {
        snprintf(why, wsize, "an instance has no usable \"name\"");
        return -1;
    }
    if (str_member(o, "status", out->status, sizeof(out->status)) < 0) {
        snprintf(why, wsize, "instance %s: \"status\" is not a short string", out->name);
        return -1;
    }
    v = get(o, "zone");
    if (v && (!cJSON_IsString(v) || last_segment(v->valuestring, zone, sizeof(zone)) < 0)) {
        snprintf(why, wsize, "instance %s: bad \"zone\"", out->name);
        return -1;
    }
    snprintf(out->inst.zone, sizeof(out->inst.zone), "%s", zone);
    if ((size_t)snprintf(out->inst.id, sizeof(out->inst.id), "%s/%s", zone, out->name) >=
        sizeof(out->inst.id)) {
        snprintf(why, wsize, "instance %s: zone and name do not fit an id", out->name);
        return -1;
    }
    v = get(o, "machineType");
    if (v && (!cJSON_IsString(v) ||
              last_segment(v->valuestring, out->inst.instance_type,
                           sizeof(out->inst.instance_type)) < 0)) {
        snprintf(why, wsize, "instance %s: bad \"machineType\"", out->name);
        return -1;
    }
    labels = get(o, "labels");
    if (labels && !cJSON_IsObject(labels)) {
        snprintf(why, wsize, "instance %s: \"labels\" is not an object", out->name);
        return -1;
    }
    if (labels) {
        if (str_member(labels, TM_GCE_LABEL_CLUSTER, buf, sizeof(buf)) == 0 && buf[0])
            (void)tm_gce_label_decode(buf, out->cluster, sizeof(out->cluster));
        if (str_member(labels, TM_GCE_LABEL_POOL, buf, sizeof(buf)) == 0 && buf[0])
            (void)tm_gce_label_decode(buf, out->inst.pool, sizeof(out->inst.pool));
        if (str_member(labels, TM_GCE_LABEL_TOKEN, buf, sizeof(buf)) == 0 && buf[0] &&
            tm_gce_label_decode(buf, out->label_token, sizeof(out->label_token)) == 0)
            memcpy(out->inst.token, out->label_token, sizeof(out->inst.token));
        if (str_member(labels, TM_GCE_LABEL_SET, buf, sizeof(buf)) == 0 && buf[0])
            (void)tm_gce_label_decode(buf, out->set_key, sizeof(out->set_key));
        if (str_member(labels, TM_GCE_LABEL_NODE, buf, sizeof(buf)) == 0 && buf[0])
            out->inst.node_id = strtoll(buf, NULL, 10);
    }
    if (str_member(o, "labelFingerprint", out->label_fingerprint,
                   sizeof(out->label_fingerprint)) < 0) {
        snprintf(why, wsize, "instance %s: bad \"labelFingerprint\"", out->name);
        return -1;
    }
    /* The verbatim names, where present, win over the label encodings. */
    meta = get(o, "metadata");
    if (meta && !cJSON_IsObject(meta)) {
        snprintf(why, wsize, "instance %s: \"metadata\" is not an object", out->name);
        return -1;
    }
    if (meta && str_member(meta, "fingerprint", out->metadata_fingerprint,
                           sizeof(out->metadata_fingerprint)) < 0) {
        snprintf(why, wsize, "instance %s: bad \"metadata.fingerprint\"", out->name);
        return -1;
    }
    items = cJSON_IsObject(meta) ? get(meta, "items") : NULL;
    if (items && !cJSON_IsArray(items)) {
        snprintf(why, wsize, "instance %s: \"metadata.items\" is not an array", out->name);
        return -1;
    }
    for (const cJSON *it = items ? items->child : NULL; it; it = it->next) {
        const cJSON *k = get(it, "key"), *val = get(it, "value");
        char *dst = NULL;
        size_t dsize = 0;

        if (!cJSON_IsString(k) || !cJSON_IsString(val))
            continue;
        if (strcmp(k->valuestring, TM_GCE_META_TOKEN) == 0)
            dst = out->inst.token, dsize = sizeof(out->inst.token);
        else if (strcmp(k->valuestring, TM_GCE_META_POOL) == 0)
            dst = out->inst.pool, dsize = sizeof(out->inst.pool);
        else if (strcmp(k->valuestring, TM_GCE_META_CLUSTER) == 0)
            dst = out->cluster, dsize = sizeof(out->cluster);
        if (dst && strlen(val->valuestring) < dsize)
            memcpy(dst, val->valuestring, strlen(val->valuestring) + 1);
    }
    sched = get(o, "scheduling");
    if (sched && !cJSON_IsObject(sched)) {
        snprintf(why, wsize, "instance %s: \"scheduling\" is not an object", out->name);
        return -1;
    }
    if (sched && str_member(sched, "provisioningModel", model, sizeof(model)) < 0) {
        snprintf(why, wsize, "instance %s: bad \"scheduling.provisioningModel\"", out->name);
        return -1;
    }
    out->inst.capacity = strcmp(model, "SPOT") == 0 ? TM_CAPACITY_SPOT : TM_CAPACITY_ON_DEMAND;
    out->inst.state = map_status(out->status);
    /* tarmac never stops its instances: a spot VM stopping or stopped was
     * preempted (with instanceTerminationAction DELETE it then goes away,
     * and the preempted operation stands for it). */
    out->inst.interrupted = out->inst.capacity == TM_CAPACITY_SPOT &&
                            (out->inst.state == TM_INSTANCE_STOPPING ||
                             out->inst.state == TM_INSTANCE_STOPPED ||
                             out->inst.state == TM_INSTANCE_TERMINATED);
    v = get(o, "creationTimestamp");
    if (cJSON_IsString(v))
        out->inst.launched_ms = rfc3339_ms(v->valuestring);
    if (out->inst.interrupted) {
        v = get(o, "lastStopTimestamp");
        if (cJSON_IsString(v))
            out->inst.notice_ms = rfc3339_ms(v->valuestring);
    }
    return 0;
}

static int parse_operation(const cJSON *o, struct tm_gce_operation *op, char *why, size_t wsize)
{
    const cJSON *v, *err, *errs;
    char zone[TM_ID_MAX] = "";

    memset(op, 0, sizeof(*op));
    if (!cJSON_IsObject(o)) {
        snprintf(why, wsize, "an operation is not an object");
        return -1;
    }
    if (str_member(o, "name", op->name, sizeof(op->name)) < 0 || !op->name[0] ||
        str_member(o, "status", op->status, sizeof(op->status)) < 0 || !op->status[0]) {
        snprintf(why, wsize, "an operation lacks a usable \"name\" or \"status\"");
        return -1;
    }
    if (strcmp(op->status, "PENDING") != 0 && strcmp(op->status, "RUNNING") != 0 &&
        strcmp(op->status, "DONE") != 0) {
        snprintf(why, wsize, "operation %s: unknown status \"%s\"", op->name, op->status);
        return -1;
    }
    op->done = strcmp(op->status, "DONE") == 0;
    if (str_member(o, "operationType", op->type, sizeof(op->type)) < 0) {
        snprintf(why, wsize, "operation %s: bad \"operationType\"", op->name);
        return -1;
    }
    v = get(o, "zone");
    if (cJSON_IsString(v) && last_segment(v->valuestring, zone, sizeof(zone)) == 0)
        snprintf(op->zone, sizeof(op->zone), "%s", zone);
    v = get(o, "targetLink");
    if (cJSON_IsString(v)) {
        const char *z = strstr(v->valuestring, "/zones/");
        const char *i = z ? strstr(z + 7, "/instances/") : NULL;

        if (z && i && (size_t)(i - (z + 7)) < TM_ID_MAX) {
            int w = snprintf(op->target, sizeof(op->target), "%.*s/%s", (int)(i - (z + 7)), z + 7,
                             i + 11);

            if (w < 0 || (size_t)w >= sizeof(op->target) || strchr(i + 11, '/'))
                op->target[0] = '\0';
        }
    }
    v = get(o, "insertTime");
    if (cJSON_IsString(v))
        op->insert_ms = rfc3339_ms(v->valuestring);
    err = get(o, "error");
    if (err && !cJSON_IsObject(err)) {
        snprintf(why, wsize, "operation %s: \"error\" is not an object", op->name);
        return -1;
    }
    errs = err ? get(err, "errors") : NULL;
    if (err && (!cJSON_IsArray(errs) || !errs->child || !cJSON_IsObject(errs->child))) {
        snprintf(why, wsize, "operation %s: \"error\" without \"errors\"", op->name);
        return -1;
    }
    if (errs) {
        const cJSON *c = get(errs->child, "code"), *m = get(errs->child, "message");

        snprintf(op->error_code, sizeof(op->error_code), "%s",
                 cJSON_IsString(c) && c->valuestring[0] ? c->valuestring : "UNKNOWN");
        snprintf(op->error_message, sizeof(op->error_message), "%s",
                 cJSON_IsString(m) ? m->valuestring : "");
    }
    return 0;
}

static int page_token(const cJSON *root, struct tm_gce_reply *ret)
{
    const cJSON *t = get(root, "nextPageToken");

    if (!t || cJSON_IsNull(t) || (cJSON_IsString(t) && !t->valuestring[0]))
        return 0;
    if (!cJSON_IsString(t) || strlen(t->valuestring) > 4096)
        return -1;
    ret->next_page_token = strdup(t->valuestring);
    return ret->next_page_token ? 0 : -2;
}

static int grow(struct tm_gce_reply *ret, size_t *cap)
{
    struct tm_gce_instance *g;

    if (ret->ninstances < *cap)
        return 0;
    *cap = *cap ? 2 * *cap : 16;
    g = realloc(ret->instances, *cap * sizeof(*g));
    if (!g)
        return -1;
    ret->instances = g;
    return 0;
}

int tm_gce_parse_reply(enum tm_gce_call call, const char *body, size_t len,
                       struct tm_gce_reply *ret, char *err, size_t errsize)
{
    cJSON *root = NULL;
    const cJSON *items, *v;
    char why[200] = "";
    size_t cap = 0;
    int r = TM_EBADREPLY;

    memset(ret, 0, sizeof(*ret));
    ret->call = call;
    if ((unsigned)call >= TM_GCE_CALL_MAX)
        BAD("unknown call");
    root = body ? cJSON_ParseWithLength(body, len) : NULL;
    if (!root || !cJSON_IsObject(root))
        BAD("not a JSON object (malformed or truncated)");
    switch (call) {
    case TM_GCE_INSERT:
    case TM_GCE_BULK_INSERT:
    case TM_GCE_SET_LABELS:
    case TM_GCE_SET_METADATA:
    case TM_GCE_DELETE:
    case TM_GCE_OPERATION_WAIT:
    case TM_GCE_OPERATION_GET:
        if (parse_operation(root, &ret->op, why, sizeof(why)) < 0)
            goto bad;
        break;
    case TM_GCE_OPERATIONS_LIST:
        items = get(root, "items");
        if (items && !cJSON_IsArray(items))
            BAD("\"items\" is not an array");
        ret->nops = (size_t)(items ? cJSON_GetArraySize(items) : 0);
        if (ret->nops) {
            size_t i = 0;

            ret->ops = calloc(ret->nops, sizeof(*ret->ops));
            if (!ret->ops) {
                r = TM_ENOMEM;
                BAD("out of memory");
            }
            for (const cJSON *it = items->child; it; it = it->next, i++)
                if (parse_operation(it, &ret->ops[i], why, sizeof(why)) < 0)
                    goto bad;
        }
        if (page_token(root, ret) < 0)
            BAD("bad \"nextPageToken\"");
        break;
    case TM_GCE_AGGREGATED_LIST:
        items = get(root, "items");
        if (items && !cJSON_IsObject(items))
            BAD("\"items\" is not an object");
        v = get(root, "unreachables");
        if (v && (!cJSON_IsArray(v) || cJSON_GetArraySize(v) > 0))
            BAD("some zones were unreachable: the listing is not complete");
        for (const cJSON *scope = items ? items->child : NULL; scope; scope = scope->next) {
            const cJSON *list;

            if (!cJSON_IsObject(scope))
                BAD("scope \"%.60s\" is not an object", scope->string ? scope->string : "?");
            list = get(scope, "instances");
            if (!list)
                continue; /* a scope with only a warning: no instances there */
            if (!cJSON_IsArray(list))
                BAD("\"%.60s.instances\" is not an array", scope->string ? scope->string : "?");
            for (const cJSON *it = list->child; it; it = it->next) {
                if (grow(ret, &cap) < 0) {
                    r = TM_ENOMEM;
                    BAD("out of memory");
                }
                if (parse_instance(it, &ret->instances[ret->ninstances], why, sizeof(why)) < 0)
                    goto bad;
                ret->ninstances++;
            }
        }
        if (page_token(root, ret) < 0)
            BAD("bad \"nextPageToken\"");
        break;
    case TM_GCE_MACHINE_TYPE_GET: {
        struct tm_gce_machine_type *mt = &ret->machine_type;
        const cJSON *acc;

        if (str_member(root, "name", mt->name, sizeof(mt->name)) < 0 || !mt->name[0])
            BAD("no usable \"name\"");
        v = get(root, "guestCpus");
        mt->vcpus = cJSON_IsNumber(v) ? v->valueint : 0;
        v = get(root, "memoryMb");
        mt->memory_mib = cJSON_IsNumber(v) ? (int64_t)v->valuedouble : 0;
        acc = get(root, "accelerators");
        if (acc && !cJSON_IsArray(acc))
            BAD("\"accelerators\" is not an array");
        if (acc && acc->child) {
            const cJSON *c = get(acc->child, "guestAcceleratorCount");

            if (!cJSON_IsObject(acc->child) ||
                str_member(acc->child, "guestAcceleratorType", mt->accelerator,
                           sizeof(mt->accelerator)) < 0 ||
                !cJSON_IsNumber(c) || c->valuedouble < 0 || c->valuedouble > 64)
                BAD("bad \"accelerators[0]\"");
            mt->gpus = (int)c->valuedouble;
        }
        break;
    }
    case TM_GCE_GET:
        ret->instances = calloc(1, sizeof(*ret->instances));
        if (!ret->instances) {
            r = TM_ENOMEM;
            BAD("out of memory");
        }
        if (parse_instance(root, &ret->instances[0], why, sizeof(why)) < 0)
            goto bad;
        ret->ninstances = 1;
        break;
    case TM_GCE_ZONE_GET:
        if (str_member(root, "status", ret->zone_status, sizeof(ret->zone_status)) < 0)
            BAD("bad \"status\"");
        break;
    default:
        BAD("unknown call");
    }
    cJSON_Delete(root);
    return 0;
bad:
    cJSON_Delete(root);
    tm_gce_reply_release(ret);
    ret->call = call;
    if (err && errsize)
        snprintf(err, errsize, "could not parse %s answer: %s", tm_gce_call_name(call), why);
    return r;
}

int tm_gce_parse_error(const char *body, size_t len, struct tm_gce_reply *ret)
{
    cJSON *root = body ? cJSON_ParseWithLength(body, len) : NULL;
    const cJSON *e = root ? get(root, "error") : NULL, *errs, *v;
    int r = TM_EBADREPLY;

    if (!cJSON_IsObject(e))
        goto out;
    errs = get(e, "errors");
    v = cJSON_IsArray(errs) && cJSON_IsObject(errs->child) ? get(errs->child, "reason") : NULL;
    if (!cJSON_IsString(v) || !v->valuestring[0])
        v = get(e, "status");
    snprintf(ret->error_code, sizeof(ret->error_code), "%s",
             cJSON_IsString(v) ? v->valuestring : "");
    v = get(e, "message");
    snprintf(ret->error_message, sizeof(ret->error_message), "%s",
             cJSON_IsString(v) ? v->valuestring : "");
    r = 0;
out:
    cJSON_Delete(root);
    return r;
}

int tm_gce_error_map(const char *code, long http)
{
    static const char *const quota[] = {
        "ZONE_RESOURCE_POOL_EXHAUSTED", "ZONE_RESOURCE_POOL_EXHAUSTED_WITH_DETAILS",
        "QUOTA_EXCEEDED", "quotaExceeded", "RESOURCE_POOL_EXHAUSTED",
        "REGION_RESOURCE_POOL_EXHAUSTED", "RESOURCE_EXHAUSTED_STOCKOUT", NULL};
    static const char *const throttle[] = {"rateLimitExceeded", "userRateLimitExceeded",
                                           "RATE_LIMIT_EXCEEDED", NULL};
    static const char *const unavail[] = {"backendError", "internalError", "INTERNAL_ERROR",
                                          "SERVICE_UNAVAILABLE", NULL};

    code = code ? code : "";
    for (const char *const *q = quota; *q; q++)
        if (strcmp(code, *q) == 0)
            return TM_EQUOTA;
    for (const char *const *q = throttle; *q; q++)
        if (strcmp(code, *q) == 0)
            return TM_ETHROTTLED;
    if (http == 429)
        return TM_ETHROTTLED;
    for (const char *const *q = unavail; *q; q++)
        if (strcmp(code, *q) == 0)
            return TM_EUNAVAIL;
    if (http >= 500)
        return TM_EUNAVAIL;
    if (http == 401 || http == 403)
        return TM_EAUTH;
    if (http == 404 || strcmp(code, "notFound") == 0 || strcmp(code, "RESOURCE_NOT_FOUND") == 0)
        return TM_ENOTFOUND;
    if (http == 409 || strcmp(code, "alreadyExists") == 0 ||
        strcmp(code, "RESOURCE_ALREADY_EXISTS") == 0)
        return TM_ECONFLICT;
    return TM_EINVAL;
}
