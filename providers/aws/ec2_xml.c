/*
 * providers/aws/ec2_xml.c: EC2 answers, read with expat.
 *
 * expat streams; EC2 answers nest the same element names at several
 * depths (an instance <item> holds groupSet/<item>, tagSet/<item>,
 * blockDeviceMapping/<item> ...), so matching on element names while
 * streaming is fragile.  We first build a small tree (flat array of nodes,
 * text in one buffer), then walk it by exact paths.  The tree has limits
 * (depth, nodes, text) so that a hostile answer costs bounded memory, and
 * any DOCTYPE is refused outright: AWS never sends one and it is the door
 * to entity expansion.
 *
 * The tree and its accessors are in xml_tree.c; this file walks it, one
 * reader per action.
 */
#include "providers/aws/ec2.h"
#include "controller/io/xml_tree.h"

#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <expat.h>

#include "core/config.h"
#include "core/err.h"
#include "core/units.h"

static const char *const action_names[TM_EC2_ACTION_MAX] = {
    "RunInstances",
    "TerminateInstances",
    "DescribeInstances",
    "DescribeInstanceStatus",
    "CreateTags",
    "DescribeSpotPriceHistory",
    "DescribeInstanceTypes",
    "CreateFleet",
    "CreateLaunchTemplate",
    "DescribeCapacityReservations",
};

const char *tm_ec2_action_name(enum tm_ec2_action a)
{
    return (unsigned)a < TM_EC2_ACTION_MAX ? action_names[a] : "unknown";
}

/* ---- values -------------------------------------------------------------- */

/* A non-negative decimal integer that fits; anything else is a bad reply. */
static int parse_i64(const char *s, int64_t *ret)
{
    int64_t v = 0;

    if (!*s)
        return TM_EBADREPLY;
    for (; *s; s++) {
        if (!isdigit((unsigned char)*s) || v > (INT64_MAX - 9) / 10)
            return TM_EBADREPLY;
        v = v * 10 + (*s - '0');
    }
    *ret = v;
    return 0;
}

static int parse_int(const char *s, int *ret)
{
    int64_t v;
    int r = parse_i64(s, &v);

    if (r < 0 || v > INT32_MAX)
        return TM_EBADREPLY;
    *ret = (int)v;
    return 0;
}

/* An optional integer: absent/empty leaves *ret at 0. */
static int opt_i64(const struct tm_xdoc *d, int parent, const char *path, int64_t *ret)
{
    const char *s = tm_xdoc_get(d, parent, path);

    *ret = 0;
    return *s ? parse_i64(s, ret) : 0;
}

static int opt_int(const struct tm_xdoc *d, int parent, const char *path, int *ret)
{
    const char *s = tm_xdoc_get(d, parent, path);

    *ret = 0;
    return *s ? parse_int(s, ret) : 0;
}

/* "2026-11-29T17:38:12.000Z" (fraction optional) to epoch milliseconds. */
static int parse_time(const char *s, int64_t *ret_ms)
{
    struct tm tm = {0};
    int y, mo, da, h, mi, se, used = 0;
    int64_t frac = 0, scale = 1000;
    time_t t;

    if (sscanf(s, "%4d-%2d-%2dT%2d:%2d:%2d%n", &y, &mo, &da, &h, &mi, &se, &used) != 6)
        return TM_EBADREPLY;
    s += used;
    if (*s == '.') {
        s++;
        if (!isdigit((unsigned char)*s))
            return TM_EBADREPLY;
        for (; isdigit((unsigned char)*s); s++) {
            if (scale > 1) {
                scale /= 10;
                frac += (*s - '0') * scale;
            }
        }
    }
    if (strcmp(s, "Z") != 0 && strcmp(s, "+00:00") != 0)
        return TM_EBADREPLY;
    if (y < 1970 || y > 9999 || mo < 1 || mo > 12 || da < 1 || da > 31 || h > 23 || mi > 59 ||
        se > 60)
        return TM_EBADREPLY;
    tm.tm_year = y - 1900;
    tm.tm_mon = mo - 1;
    tm.tm_mday = da;
    tm.tm_hour = h;
    tm.tm_min = mi;
    tm.tm_sec = se;
    t = timegm(&tm);
    if (t == (time_t)-1)
        return TM_EBADREPLY;
    *ret_ms = (int64_t)t * 1000 + frac;
    return 0;
}

static int opt_time(const struct tm_xdoc *d, int parent, const char *path, int64_t *ret)
{
    const char *s = tm_xdoc_get(d, parent, path);

    *ret = 0;
    return *s ? parse_time(s, ret) : 0;
}

static enum tm_instance_state state_from_name(const char *name)
{
    if (strcmp(name, "running") == 0)
        return TM_INSTANCE_RUNNING;
    if (strcmp(name, "shutting-down") == 0 || strcmp(name, "stopping") == 0)
        return TM_INSTANCE_STOPPING;
    if (strcmp(name, "stopped") == 0)
        return TM_INSTANCE_STOPPED;
    if (strcmp(name, "terminated") == 0)
        return TM_INSTANCE_TERMINATED;
    return TM_INSTANCE_PENDING;
}

/* ---- per action ---------------------------------------------------------- */

/* One element of instancesSet (RunInstances, DescribeInstances). */
static int parse_instance(const struct tm_xdoc *d, int item, struct tm_ec2_instance *out)
{
    struct tm_instance *in = &out->inst;
    int tags;
    int r = 0;

    memset(out, 0, sizeof(*out));
    r = tm_xdoc_copy(d, item, "instanceId", in->id, sizeof(in->id));
    if (r == 0 && !in->id[0])
        r = TM_EBADREPLY;
    if (r == 0)
        r = tm_xdoc_copy(d, item, "instanceType", in->instance_type, sizeof(in->instance_type));
    if (r == 0)
        r = tm_xdoc_copy(d, item, "placement/availabilityZone", in->zone, sizeof(in->zone));
    if (r == 0)
        r = tm_xdoc_copy(d, item, "instanceState/name", out->state_name, sizeof(out->state_name));
    if (r == 0)
        r = tm_xdoc_copy(d, item, "stateReason/code", out->state_reason, sizeof(out->state_reason));
    if (r == 0)
        r = tm_xdoc_copy(d, item, "clientToken", out->client_token, sizeof(out->client_token));
    if (r == 0)
        r = opt_time(d, item, "launchTime", &in->launched_ms);
    if (r < 0)
        return r;
    in->state = state_from_name(out->state_name);
    in->capacity = strcmp(tm_xdoc_get(d, item, "instanceLifecycle"), "spot") == 0 ? TM_CAPACITY_SPOT
                                                                          : TM_CAPACITY_ON_DEMAND;
    /* The cloud took a spot instance back: Server.SpotInstanceTermination or
     * Server.SpotInstanceShutdown, whatever state it is in now. */
    in->interrupted = in->capacity == TM_CAPACITY_SPOT &&
                      strncmp(out->state_reason, "Server.SpotInstance", 19) == 0;

    tags = tm_xdoc_child(d, item, "tagSet");
    for (int t = tm_xdoc_first_item(d, tags); t >= 0; t = tm_xdoc_next_item(d, t)) {
        const char *key = tm_xdoc_get(d, t, "key");
        const char *value = tm_xdoc_get(d, t, "value");
        char *dst = NULL;
        size_t size = 0;

        if (strcmp(key, TM_EC2_TAG_CLUSTER) == 0) {
            dst = out->cluster;
            size = sizeof(out->cluster);
        } else if (strcmp(key, TM_EC2_TAG_POOL) == 0) {
            dst = in->pool;
            size = sizeof(in->pool);
        } else if (strcmp(key, TM_EC2_TAG_TOKEN) == 0) {
            dst = in->token;
            size = sizeof(in->token);
        } else if (strcmp(key, TM_EC2_TAG_NODE) == 0) {
            /* Someone else's odd value is not our bad reply: ignore it. */
            if (parse_i64(value, &in->node_id) < 0)
                in->node_id = 0;
            continue;
        } else {
            continue;
        }
        /* Tags are written by anyone with access: a value too long for us
         * is not ours, so it is dropped rather than failing the listing. */
        if (strlen(value) < size)
            snprintf(dst, size, "%s", value);
    }
    return 0;
}

static int grow(void **arr, size_t n, size_t size)
{
    void *p;

    if (n == 0)
        return 0;
    p = calloc(n, size);
    if (!p)
        return TM_ENOMEM;
    *arr = p;
    return 0;
}

static int parse_instances_set(const struct tm_xdoc *d, int set, struct tm_ec2_reply *ret)
{
    size_t n = tm_xdoc_count_items(d, set);
    size_t base = ret->ninstances;
    struct tm_ec2_instance *p;
    int r;

    if (n == 0)
        return 0;
    p = realloc(ret->instances, (base + n) * sizeof(*p));
    if (!p)
        return TM_ENOMEM;
    ret->instances = p;
    for (int it = tm_xdoc_first_item(d, set); it >= 0; it = tm_xdoc_next_item(d, it)) {
        r = parse_instance(d, it, &ret->instances[ret->ninstances]);
        if (r < 0)
            return r;
        ret->ninstances++;
    }
    return 0;
}

static int parse_run(const struct tm_xdoc *d, int root, struct tm_ec2_reply *ret)
{
    int set = tm_xdoc_child(d, root, "instancesSet");

    if (set < 0)
        return TM_EBADREPLY;
    return parse_instances_set(d, set, ret);
}

static int parse_describe_instances(const struct tm_xdoc *d, int root, struct tm_ec2_reply *ret)
{
    int rset = tm_xdoc_child(d, root, "reservationSet");

    if (rset < 0)
        return TM_EBADREPLY;
    for (int res = tm_xdoc_first_item(d, rset); res >= 0; res = tm_xdoc_next_item(d, res)) {
        int r = parse_instances_set(d, tm_xdoc_child(d, res, "instancesSet"), ret);

        if (r < 0)
            return r;
    }
    return 0;
}

static int parse_terminate(const struct tm_xdoc *d, int root, struct tm_ec2_reply *ret)
{
    int set = tm_xdoc_child(d, root, "instancesSet");
    size_t i = 0;
    int r;

    if (set < 0)
        return TM_EBADREPLY;
    r = grow((void **)&ret->instances, tm_xdoc_count_items(d, set), sizeof(*ret->instances));
    if (r < 0)
        return r;
    for (int it = tm_xdoc_first_item(d, set); it >= 0; it = tm_xdoc_next_item(d, it), i++) {
        struct tm_ec2_instance *x = &ret->instances[i];

        r = tm_xdoc_copy(d, it, "instanceId", x->inst.id, sizeof(x->inst.id));
        if (r == 0 && !x->inst.id[0])
            r = TM_EBADREPLY;
        if (r == 0)
            r = tm_xdoc_copy(d, it, "currentState/name", x->state_name, sizeof(x->state_name));
        if (r < 0)
            return r;
        x->inst.state = state_from_name(x->state_name);
        ret->ninstances = i + 1;
    }
    return 0;
}

static int parse_status(const struct tm_xdoc *d, int root, struct tm_ec2_reply *ret)
{
    int set = tm_xdoc_child(d, root, "instanceStatusSet");
    size_t i = 0;
    int r;

    if (set < 0)
        return TM_EBADREPLY;
    r = grow((void **)&ret->statuses, tm_xdoc_count_items(d, set), sizeof(*ret->statuses));
    if (r < 0)
        return r;
    for (int it = tm_xdoc_first_item(d, set); it >= 0; it = tm_xdoc_next_item(d, it), i++) {
        struct tm_ec2_status *s = &ret->statuses[i];
        int ev = tm_xdoc_first_item(d, tm_xdoc_child(d, it, "eventsSet"));

        r = tm_xdoc_copy(d, it, "instanceId", s->id, sizeof(s->id));
        if (r == 0 && !s->id[0])
            r = TM_EBADREPLY;
        if (r == 0)
            r = tm_xdoc_copy(d, it, "availabilityZone", s->zone, sizeof(s->zone));
        if (r == 0)
            r = tm_xdoc_copy(d, it, "instanceState/name", s->state_name, sizeof(s->state_name));
        if (r == 0)
            r = tm_xdoc_copy(d, it, "systemStatus/status", s->system_status, sizeof(s->system_status));
        if (r == 0)
            r = tm_xdoc_copy(d, it, "instanceStatus/status", s->instance_status,
                      sizeof(s->instance_status));
        if (r == 0 && ev >= 0)
            r = tm_xdoc_copy(d, ev, "code", s->event_code, sizeof(s->event_code));
        if (r < 0)
            return r;
        ret->nstatuses = i + 1;
    }
    return 0;
}

static int parse_create_tags(const struct tm_xdoc *d, int root, struct tm_ec2_reply *ret)
{
    const char *v = tm_xdoc_get(d, root, "return");

    /* AWS says <return>true</return>; moto sends nothing, and a 200 is
     * success either way. */
    if (tm_xdoc_child(d, root, "return") < 0) {
        ret->returned_true = true;
        return 0;
    }
    if (strcmp(v, "true") != 0 && strcmp(v, "false") != 0)
        return TM_EBADREPLY;
    ret->returned_true = strcmp(v, "true") == 0;
    return 0;
}

static int parse_spot_prices(const struct tm_xdoc *d, int root, struct tm_ec2_reply *ret)
{
    int set = tm_xdoc_child(d, root, "spotPriceHistorySet");
    size_t i = 0;
    int r;

    if (set < 0)
        return TM_EBADREPLY;
    r = grow((void **)&ret->prices, tm_xdoc_count_items(d, set), sizeof(*ret->prices));
    if (r < 0)
        return r;
    for (int it = tm_xdoc_first_item(d, set); it >= 0; it = tm_xdoc_next_item(d, it), i++) {
        struct tm_ec2_spot_price *p = &ret->prices[i];

        r = tm_xdoc_copy(d, it, "instanceType", p->instance_type, sizeof(p->instance_type));
        if (r == 0)
            r = tm_xdoc_copy(d, it, "availabilityZone", p->zone, sizeof(p->zone));
        if (r == 0)
            r = tm_xdoc_copy(d, it, "productDescription", p->product, sizeof(p->product));
        /* Decimal dollars, at most 6 places, converted without floats. */
        if (r == 0 && tm_price_parse(tm_xdoc_get(d, it, "spotPrice"), &p->uusd_per_hour) < 0)
            r = TM_EBADREPLY;
        if (r == 0)
            r = opt_time(d, it, "timestamp", &p->timestamp_ms);
        if (r < 0)
            return r;
        ret->nprices = i + 1;
    }
    return 0;
}

static int parse_types(const struct tm_xdoc *d, int root, struct tm_ec2_reply *ret)
{
    int set = tm_xdoc_child(d, root, "instanceTypeSet");
    size_t i = 0;
    int r;

    if (set < 0)
        return TM_EBADREPLY;
    r = grow((void **)&ret->types, tm_xdoc_count_items(d, set), sizeof(*ret->types));
    if (r < 0)
        return r;
    for (int it = tm_xdoc_first_item(d, set); it >= 0; it = tm_xdoc_next_item(d, it), i++) {
        struct tm_ec2_type_info *t = &ret->types[i];
        int gpu = tm_xdoc_first_item(d, tm_xdoc_path(d, it, "gpuInfo/gpus"));

        r = tm_xdoc_copy(d, it, "instanceType", t->name, sizeof(t->name));
        if (r == 0 && !t->name[0])
            r = TM_EBADREPLY;
        if (r == 0)
            r = opt_int(d, it, "vCpuInfo/defaultVCpus", &t->vcpus);
        if (r == 0)
            r = opt_i64(d, it, "memoryInfo/sizeInMiB", &t->memory_mib);
        /* Types with two kinds of GPU do not exist today; the first entry
         * names the model and the counts add up. */
        for (int g = gpu; r == 0 && g >= 0; g = tm_xdoc_next_item(d, g)) {
            int count;

            r = opt_int(d, g, "count", &count);
            if (r == 0 && count > INT32_MAX - t->gpus)
                r = TM_EBADREPLY;
            if (r < 0)
                break;
            t->gpus += count;
            if (g == gpu) {
                r = tm_xdoc_copy(d, g, "name", t->gpu_model, sizeof(t->gpu_model));
                if (r == 0)
                    r = tm_xdoc_copy(d, g, "manufacturer", t->gpu_manufacturer,
                              sizeof(t->gpu_manufacturer));
                if (r == 0)
                    r = opt_i64(d, g, "memoryInfo/sizeInMiB", &t->gpu_memory_mib);
            }
        }
        if (r < 0)
            return r;
        ret->ntypes = i + 1;
    }
    return 0;
}

static int parse_overrides(const struct tm_xdoc *d, int node, char *type, char *zone)
{
    int ov = tm_xdoc_path(d, node, "launchTemplateAndOverrides/overrides");
    int r = tm_xdoc_copy(d, ov, "instanceType", type, TM_ID_MAX);

    if (r == 0)
        r = tm_xdoc_copy(d, ov, "availabilityZone", zone, TM_ID_MAX);
    return r;
}

static int parse_fleet(const struct tm_xdoc *d, int root, struct tm_ec2_reply *ret)
{
    int iset = tm_xdoc_child(d, root, "fleetInstanceSet");
    int eset = tm_xdoc_child(d, root, "errorSet");
    size_t n = 0;
    int r;

    r = tm_xdoc_copy(d, root, "fleetId", ret->fleet_id, sizeof(ret->fleet_id));
    if (r < 0)
        return r;
    if (!ret->fleet_id[0])
        return TM_EBADREPLY;
    /* One fleet item may hold several instance ids. */
    for (int it = tm_xdoc_first_item(d, iset); it >= 0; it = tm_xdoc_next_item(d, it))
        n += tm_xdoc_count_items(d, tm_xdoc_child(d, it, "instanceIds"));
    r = grow((void **)&ret->fleet_instances, n, sizeof(*ret->fleet_instances));
    if (r < 0)
        return r;
    for (int it = tm_xdoc_first_item(d, iset); it >= 0; it = tm_xdoc_next_item(d, it)) {
        char type[TM_ID_MAX], ozone[TM_ID_MAX], otype[TM_ID_MAX];
        bool spot = strcmp(tm_xdoc_get(d, it, "lifecycle"), "spot") == 0;
        int ids = tm_xdoc_child(d, it, "instanceIds");

        r = tm_xdoc_copy(d, it, "instanceType", type, sizeof(type));
        if (r == 0)
            r = parse_overrides(d, it, otype, ozone);
        if (r < 0)
            return r;
        for (int id = tm_xdoc_first_item(d, ids); id >= 0; id = tm_xdoc_next_item(d, id)) {
            struct tm_ec2_fleet_instance *fi = &ret->fleet_instances[ret->nfleet_instances];

            if (strlen(tm_xdoc_text(d, id)) >= sizeof(fi->id) || !*tm_xdoc_text(d, id))
                return TM_EBADREPLY;
            snprintf(fi->id, sizeof(fi->id), "%s", tm_xdoc_text(d, id));
            snprintf(fi->instance_type, sizeof(fi->instance_type), "%s", type[0] ? type : otype);
            snprintf(fi->zone, sizeof(fi->zone), "%s", ozone);
            fi->spot = spot;
            ret->nfleet_instances++;
        }
    }
    r = grow((void **)&ret->fleet_errors, tm_xdoc_count_items(d, eset), sizeof(*ret->fleet_errors));
    if (r < 0)
        return r;
    for (int it = tm_xdoc_first_item(d, eset); it >= 0; it = tm_xdoc_next_item(d, it)) {
        struct tm_ec2_fleet_error *fe = &ret->fleet_errors[ret->nfleet_errors];

        r = parse_overrides(d, it, fe->instance_type, fe->zone);
        if (r == 0)
            r = tm_xdoc_copy(d, it, "errorCode", fe->code, sizeof(fe->code));
        if (r < 0)
            return r;
        tm_xdoc_copy_cut(d, it, "errorMessage", fe->message, sizeof(fe->message));
        fe->spot = strcmp(tm_xdoc_get(d, it, "lifecycle"), "spot") == 0;
        ret->nfleet_errors++;
    }
    return 0;
}

static int parse_launch_template(const struct tm_xdoc *d, int root, struct tm_ec2_reply *ret)
{
    int r = tm_xdoc_copy(d, root, "launchTemplate/launchTemplateId", ret->launch_template_id,
                  sizeof(ret->launch_template_id));

    if (r == 0 && !ret->launch_template_id[0])
        r = TM_EBADREPLY;
    return r;
}

/* An optional count: absent leaves -1 (the reservation's row keeps what
 * the file said). */
static int opt_count(const struct tm_xdoc *d, int parent, const char *path, int *ret)
{
    const char *s = tm_xdoc_get(d, parent, path);

    *ret = -1;
    return *s ? parse_int(s, ret) : 0;
}

static int parse_capacity_reservations(const struct tm_xdoc *d, int root, struct tm_ec2_reply *ret)
{
    int set = tm_xdoc_child(d, root, "capacityReservationSet");
    size_t i = 0;
    int r;

    if (set < 0)
        return TM_EBADREPLY;
    r = grow((void **)&ret->reservations, tm_xdoc_count_items(d, set), sizeof(*ret->reservations));
    if (r < 0)
        return r;
    for (int it = tm_xdoc_first_item(d, set); it >= 0; it = tm_xdoc_next_item(d, it), i++) {
        struct tm_ec2_capacity_reservation *c = &ret->reservations[i];

        r = tm_xdoc_copy(d, it, "capacityReservationId", c->id, sizeof(c->id));
        if (r == 0 && !c->id[0])
            r = TM_EBADREPLY;
        if (r == 0)
            r = tm_xdoc_copy(d, it, "instanceType", c->instance_type, sizeof(c->instance_type));
        if (r == 0)
            r = tm_xdoc_copy(d, it, "availabilityZone", c->zone, sizeof(c->zone));
        if (r == 0)
            r = tm_xdoc_copy(d, it, "state", c->state, sizeof(c->state));
        if (r == 0)
            r = opt_count(d, it, "totalInstanceCount", &c->total);
        if (r == 0)
            r = opt_count(d, it, "availableInstanceCount", &c->available);
        if (r == 0)
            r = opt_time(d, it, "startDate", &c->start_ms);
        if (r == 0)
            r = opt_time(d, it, "endDate", &c->end_ms);
        if (r < 0)
            return r;
        c->block = strcmp(tm_xdoc_get(d, it, "reservationType"), "capacity-block") == 0;
        ret->nreservations = i + 1;
    }
    return 0;
}

typedef int (*action_parser)(const struct tm_xdoc *d, int root, struct tm_ec2_reply *ret);

static const action_parser parsers[TM_EC2_ACTION_MAX] = {
    [TM_EC2_RUN_INSTANCES] = parse_run,
    [TM_EC2_TERMINATE_INSTANCES] = parse_terminate,
    [TM_EC2_DESCRIBE_INSTANCES] = parse_describe_instances,
    [TM_EC2_DESCRIBE_INSTANCE_STATUS] = parse_status,
    [TM_EC2_CREATE_TAGS] = parse_create_tags,
    [TM_EC2_DESCRIBE_SPOT_PRICE_HISTORY] = parse_spot_prices,
    [TM_EC2_DESCRIBE_INSTANCE_TYPES] = parse_types,
    [TM_EC2_CREATE_FLEET] = parse_fleet,
    [TM_EC2_CREATE_LAUNCH_TEMPLATE] = parse_launch_template,
    [TM_EC2_DESCRIBE_CAPACITY_RESERVATIONS] = parse_capacity_reservations,
};

void tm_ec2_reply_release(struct tm_ec2_reply *reply)
{
    if (!reply)
        return;
    free(reply->next_token);
    free(reply->instances);
    free(reply->types);
    free(reply->prices);
    free(reply->statuses);
    free(reply->fleet_instances);
    free(reply->fleet_errors);
    free(reply->reservations);
    memset(reply, 0, sizeof(*reply));
}

int tm_ec2_parse_reply(enum tm_ec2_action action, const char *body, size_t len,
                       struct tm_ec2_reply *ret, char *err, size_t errsize)
{
    struct tm_ec2_reply reply = {0};
    struct tm_xdoc d;
    char why[160] = "";
    char expect[64];
    const char *name = tm_ec2_action_name(action);
    const char *token;
    int r;

    if ((unsigned)action >= TM_EC2_ACTION_MAX || !ret) {
        snprintf(err, errsize, "could not parse reply: unknown action");
        return TM_EINVAL;
    }
    memset(ret, 0, sizeof(*ret));
    reply.action = action;
    r = tm_xdoc_parse(&d, body, len, why, sizeof(why));
    if (r < 0)
        goto out;
    snprintf(expect, sizeof(expect), "%sResponse", name);
    if (strcmp(tm_xdoc_name(&d, 0), expect) != 0) {
        snprintf(why, sizeof(why), "unexpected root element <%.64s>", tm_xdoc_name(&d, 0));
        r = TM_EBADREPLY;
        goto out;
    }
    if (tm_xdoc_copy(&d, 0, "requestId", reply.request_id, sizeof(reply.request_id)) < 0)
        reply.request_id[0] = '\0';
    r = parsers[action](&d, 0, &reply);
    if (r == TM_EBADREPLY)
        snprintf(why, sizeof(why), "missing or malformed field");
    if (r < 0)
        goto out;
    token = tm_xdoc_get(&d, 0, "nextToken");
    if (*token) {
        reply.next_token = strdup(token);
        if (!reply.next_token) {
            r = TM_ENOMEM;
            goto out;
        }
    }
    *ret = reply;                 /* hand over only on success */
    memset(&reply, 0, sizeof(reply));
out:
    if (r < 0)
        snprintf(err, errsize, "could not parse %s reply: %s", name,
                 r == TM_ENOMEM ? "out of memory" : why);
    tm_ec2_reply_release(&reply);
    tm_xdoc_release(&d);
    return r;
}

int tm_ec2_parse_error(const char *body, size_t len, struct tm_ec2_reply *ret)
{
    struct tm_xdoc d;
    char why[160];
    int err;
    int r;

    r = tm_xdoc_parse(&d, body, len, why, sizeof(why));
    if (r < 0)
        return TM_EBADREPLY;
    /* EC2: <Response><Errors><Error>..</Error></Errors><RequestID>;
     * moto sometimes: <ErrorResponse><Errors><Error>..; other Query
     * services: <ErrorResponse><Error>..</Error><RequestId>. */
    err = tm_xdoc_path(&d, 0, "Errors/Error");
    if (err < 0)
        err = tm_xdoc_child(&d, 0, "Error");
    if (err < 0 || !*tm_xdoc_get(&d, err, "Code") ||
        (strcmp(tm_xdoc_name(&d, 0), "Response") != 0 && strcmp(tm_xdoc_name(&d, 0), "ErrorResponse") != 0)) {
        tm_xdoc_release(&d);
        return TM_EBADREPLY;
    }
    tm_xdoc_copy_cut(&d, err, "Code", ret->error_code, sizeof(ret->error_code));
    tm_xdoc_copy_cut(&d, err, "Message", ret->error_message, sizeof(ret->error_message));
    if (*tm_xdoc_get(&d, 0, "RequestID"))
        tm_xdoc_copy_cut(&d, 0, "RequestID", ret->request_id, sizeof(ret->request_id));
    else
        tm_xdoc_copy_cut(&d, 0, "RequestId", ret->request_id, sizeof(ret->request_id));
    tm_xdoc_release(&d);
    return 0;
}

static bool ends_with(const char *s, const char *suffix)
{
    size_t n = strlen(s), m = strlen(suffix);

    return n >= m && strcmp(s + n - m, suffix) == 0;
}

int tm_ec2_error_map(const char *code, long http_status)
{
    static const char *const quota[] = {
        "InsufficientInstanceCapacity", "ReservationCapacityExceeded", "InstanceLimitExceeded",
        "MaxSpotInstanceCountExceeded",
        "Unsupported", "SpotMaxPriceTooLow", "VcpuLimitExceeded", "InsufficientHostCapacity",
        "InsufficientReservedInstanceCapacity", "InsufficientCapacity",
        "MaxSpotFleetRequestCountExceeded", "MaxFleetCountExceeded", NULL,
    };
    static const char *const throttled[] = {
        "RequestLimitExceeded", "Throttling", "ThrottlingException", "SlowDown",
        "EC2ThrottledException", NULL,
    };
    static const char *const unavail[] = {
        "InternalError", "InternalFailure", "ServiceUnavailable", "Unavailable",
        "InsufficientAddressCapacity", NULL,
    };
    static const char *const auth[] = {
        "AuthFailure", "SignatureDoesNotMatch", "UnauthorizedOperation", "RequestExpired",
        "ExpiredToken", "ExpiredTokenException", "InvalidClientTokenId", "IncompleteSignature",
        "MissingAuthenticationToken", "InvalidAccessKeyId", "AccessDenied", "OptInRequired",
        "Blocked", "PendingVerification", NULL,
    };
    static const struct {
        const char *const *codes;
        int err;
    } table[] = {
        {quota, TM_EQUOTA}, {throttled, TM_ETHROTTLED}, {unavail, TM_EUNAVAIL}, {auth, TM_EAUTH},
    };

    if (code && *code) {
        for (size_t t = 0; t < sizeof(table) / sizeof(table[0]); t++)
            for (size_t i = 0; table[t].codes[i]; i++)
                if (strcmp(code, table[t].codes[i]) == 0)
                    return table[t].err;
        if (ends_with(code, ".NotFound") || ends_with(code, ".NotFoundException"))
            return TM_ENOTFOUND;
        if (ends_with(code, ".AlreadyExistsException") ||
            strcmp(code, "IdempotentParameterMismatch") == 0)
            return TM_ECONFLICT;
    }
    if (http_status >= 500)
        return TM_EUNAVAIL;
    if (http_status == 429)
        return TM_ETHROTTLED;
    if (http_status == 401 || http_status == 403)
        return TM_EAUTH;
    return TM_EINVAL;
}
