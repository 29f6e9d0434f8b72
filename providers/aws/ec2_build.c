/*
 * providers/aws/ec2_build.c: EC2 Query API form bodies.
 *
 * Member names follow botocore's ec2 model (service-2.json, 2016-11-15):
 * a list member is flattened under its locationName with the first letter
 * upper-cased (TagSpecifications -> TagSpecification.N, Tags inside a
 * TagSpecification -> Tag.N, Filters -> Filter.N, Values -> Value.N,
 * InstanceIds -> InstanceId.N, Resources -> ResourceId.N), and a member
 * without one keeps its own name (CreateFleet's LaunchTemplateConfigs.N,
 * Overrides.N).  The order of parameters does not matter to EC2; we keep
 * a fixed one so tests can compare bodies byte for byte.
 */
#include "providers/aws/ec2.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

#include "core/err.h"
#include "core/sigv4.h"

struct form {
    char *buf;
    size_t len, cap;
    int err;                      /* first failure; later appends do nothing */
};

static void add(struct form *f, const char *key, const char *value)
{
    if (f->err)
        return;
    f->err = tm_aws_form_append(&f->buf, &f->len, &f->cap, key, value);
}

static void add_int(struct form *f, const char *key, long long value)
{
    if (f->err)
        return;
    f->err = tm_aws_form_append_int(&f->buf, &f->len, &f->cap, key, value);
}

/* Keys such as "Filter.2.Value.1": formatted, then appended. */
static void addf(struct form *f, const char *value, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void addf(struct form *f, const char *value, const char *fmt, ...)
{
    char key[256];
    va_list ap;
    int n;

    va_start(ap, fmt);
    n = vsnprintf(key, sizeof(key), fmt, ap);
    va_end(ap);
    if (n < 0 || (size_t)n >= sizeof(key)) {
        if (!f->err)
            f->err = TM_EINVAL;
        return;
    }
    add(f, key, value);
}

static void begin(struct form *f, enum tm_ec2_action action)
{
    add(f, "Action", tm_ec2_action_name(action));
    add(f, "Version", TM_EC2_API_VERSION);
}

static bool has(const char *s) { return s && *s; }

static int finish(struct form *f, char **ret_body)
{
    if (f->err) {
        free(f->buf);
        return f->err;
    }
    *ret_body = f->buf;
    return 0;
}

/* prefix is e.g. "TagSpecification.1." or "" */
static void add_tags(struct form *f, const char *prefix, const struct tm_ec2_tag *tags,
                     size_t ntags)
{
    for (size_t i = 0; i < ntags; i++) {
        if (!tags[i].key || !tags[i].value) {
            if (!f->err)
                f->err = TM_EINVAL;
            return;
        }
        addf(f, tags[i].key, "%sTag.%zu.Key", prefix, i + 1);
        addf(f, tags[i].value, "%sTag.%zu.Value", prefix, i + 1);
    }
}

static void add_list(struct form *f, const char *name, const char *const *v, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        if (!v[i]) {
            if (!f->err)
                f->err = TM_EINVAL;
            return;
        }
        addf(f, v[i], "%s.%zu", name, i + 1);
    }
}

static void add_filters(struct form *f, const struct tm_ec2_filter *filters, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        if (!filters[i].name) {
            if (!f->err)
                f->err = TM_EINVAL;
            return;
        }
        addf(f, filters[i].name, "Filter.%zu.Name", i + 1);
        for (size_t j = 0; j < filters[i].nvalues; j++)
            addf(f, filters[i].values[j], "Filter.%zu.Value.%zu", i + 1, j + 1);
    }
}

static void add_paging(struct form *f, int max_results, const char *next_token)
{
    if (max_results > 0)
        add_int(f, "MaxResults", max_results);
    if (has(next_token))
        add(f, "NextToken", next_token);
}

int tm_ec2_build_run_instances(const struct tm_ec2_run_params *p, char **ret_body)
{
    struct form f = {0};

    if (!p || !has(p->image_id) || !has(p->instance_type))
        return TM_EINVAL;
    begin(&f, TM_EC2_RUN_INSTANCES);
    add(&f, "ImageId", p->image_id);
    add(&f, "InstanceType", p->instance_type);
    add_int(&f, "MinCount", 1);
    add_int(&f, "MaxCount", 1);
    if (has(p->client_token))
        add(&f, "ClientToken", p->client_token);
    if (has(p->zone))
        add(&f, "Placement.AvailabilityZone", p->zone);
    if (has(p->user_data))
        add(&f, "UserData", p->user_data);
    if (has(p->capacity_reservation))
        add(&f, "CapacityReservationSpecification.CapacityReservationTarget.CapacityReservationId",
            p->capacity_reservation);
    if (has(p->capacity_reservation) && p->capacity_block) {
        add(&f, "InstanceMarketOptions.MarketType", "capacity-block");
    } else if (p->spot) {
        add(&f, "InstanceMarketOptions.MarketType", "spot");
        /* A one-time request that terminates on interruption: the
         * controller replaces reclaimed capacity itself. */
        add(&f, "InstanceMarketOptions.SpotOptions.SpotInstanceType", "one-time");
        add(&f, "InstanceMarketOptions.SpotOptions.InstanceInterruptionBehavior", "terminate");
    }
    if (p->ntags > 0) {
        add(&f, "TagSpecification.1.ResourceType", "instance");
        add_tags(&f, "TagSpecification.1.", p->tags, p->ntags);
    }
    return finish(&f, ret_body);
}

int tm_ec2_build_describe_capacity_reservations(const char *const *ids, size_t nids,
                                                int max_results, const char *next_token,
                                                char **ret_body)
{
    struct form f = {0};

    begin(&f, TM_EC2_DESCRIBE_CAPACITY_RESERVATIONS);
    add_list(&f, "CapacityReservationId", ids, nids);
    add_paging(&f, max_results, next_token);
    return finish(&f, ret_body);
}

int tm_ec2_build_terminate_instances(const char *const *ids, size_t nids, char **ret_body)
{
    struct form f = {0};

    if (nids == 0)
        return TM_EINVAL;
    begin(&f, TM_EC2_TERMINATE_INSTANCES);
    add_list(&f, "InstanceId", ids, nids);
    return finish(&f, ret_body);
}

int tm_ec2_build_describe_instances(const char *const *ids, size_t nids,
                                    const struct tm_ec2_filter *filters, size_t nfilters,
                                    int max_results, const char *next_token, char **ret_body)
{
    struct form f = {0};

    begin(&f, TM_EC2_DESCRIBE_INSTANCES);
    add_list(&f, "InstanceId", ids, nids);
    add_filters(&f, filters, nfilters);
    /* EC2 refuses MaxResults together with InstanceIds. */
    add_paging(&f, nids > 0 ? 0 : max_results, next_token);
    return finish(&f, ret_body);
}

int tm_ec2_build_describe_instance_status(const char *const *ids, size_t nids,
                                          bool include_all, int max_results,
                                          const char *next_token, char **ret_body)
{
    struct form f = {0};

    begin(&f, TM_EC2_DESCRIBE_INSTANCE_STATUS);
    add_list(&f, "InstanceId", ids, nids);
    if (include_all)
        add(&f, "IncludeAllInstances", "true");
    add_paging(&f, nids > 0 ? 0 : max_results, next_token);
    return finish(&f, ret_body);
}

int tm_ec2_build_create_tags(const char *const *ids, size_t nids, const struct tm_ec2_tag *tags,
                             size_t ntags, char **ret_body)
{
    struct form f = {0};

    if (nids == 0 || ntags == 0)
        return TM_EINVAL;
    begin(&f, TM_EC2_CREATE_TAGS);
    add_list(&f, "ResourceId", ids, nids);
    add_tags(&f, "", tags, ntags);
    return finish(&f, ret_body);
}

int tm_ec2_build_describe_spot_price_history(const char *const *types, size_t ntypes,
                                             const char *zone, const char *product,
                                             int max_results, const char *next_token,
                                             char **ret_body)
{
    struct form f = {0};

    begin(&f, TM_EC2_DESCRIBE_SPOT_PRICE_HISTORY);
    add_list(&f, "InstanceType", types, ntypes);
    if (has(product))
        add(&f, "ProductDescription.1", product);
    if (has(zone))
        add(&f, "AvailabilityZone", zone);
    add_paging(&f, max_results, next_token);
    return finish(&f, ret_body);
}

int tm_ec2_build_describe_instance_types(const char *const *types, size_t ntypes,
                                         int max_results, const char *next_token,
                                         char **ret_body)
{
    struct form f = {0};

    begin(&f, TM_EC2_DESCRIBE_INSTANCE_TYPES);
    add_list(&f, "InstanceType", types, ntypes);
    add_paging(&f, ntypes > 0 ? 0 : max_results, next_token);
    return finish(&f, ret_body);
}

int tm_ec2_build_create_fleet(const struct tm_ec2_fleet_params *p, char **ret_body)
{
    struct form f = {0};
    const char *market;

    if (!p || !has(p->launch_template) || p->noverrides == 0 || p->target == 0)
        return TM_EINVAL;
    market = p->spot ? "spot" : "on-demand";
    begin(&f, TM_EC2_CREATE_FLEET);
    /* instant: one synchronous attempt that returns instances and errors;
     * nothing keeps running in the cloud afterwards. */
    add(&f, "Type", "instant");
    if (has(p->client_token))
        add(&f, "ClientToken", p->client_token);
    if (p->spot)
        add(&f, "SpotOptions.AllocationStrategy", "price-capacity-optimized");
    else
        add(&f, "OnDemandOptions.AllocationStrategy", "lowest-price");
    if (p->min_target > 0) {
        /* all or none, one zone, one type (a gang's set) */
        const char *o = p->spot ? "SpotOptions." : "OnDemandOptions.";
        if (p->min_target > p->target && !f.err)
            f.err = TM_EINVAL;
        addf(&f, "true", "%sSingleAvailabilityZone", o);
        addf(&f, "true", "%sSingleInstanceType", o);
        char v[16];
        snprintf(v, sizeof(v), "%u", p->min_target);
        addf(&f, v, "%sMinTargetCapacity", o);
    }
    add_int(&f, "TargetCapacitySpecification.TotalTargetCapacity", p->target);
    add(&f, "TargetCapacitySpecification.DefaultTargetCapacityType", market);
    add(&f, "LaunchTemplateConfigs.1.LaunchTemplateSpecification.LaunchTemplateName",
        p->launch_template);
    add(&f, "LaunchTemplateConfigs.1.LaunchTemplateSpecification.Version", "$Latest");
    for (size_t i = 0; i < p->noverrides; i++) {
        if (!has(p->overrides[i].instance_type)) {
            if (!f.err)
                f.err = TM_EINVAL;
            break;
        }
        addf(&f, p->overrides[i].instance_type,
             "LaunchTemplateConfigs.1.Overrides.%zu.InstanceType", i + 1);
        if (has(p->overrides[i].zone))
            addf(&f, p->overrides[i].zone,
                 "LaunchTemplateConfigs.1.Overrides.%zu.AvailabilityZone", i + 1);
        if (has(p->placement_group))
            addf(&f, p->placement_group,
                 "LaunchTemplateConfigs.1.Overrides.%zu.Placement.GroupName", i + 1);
    }
    if (p->ntags > 0) {
        add(&f, "TagSpecification.1.ResourceType", "instance");
        add_tags(&f, "TagSpecification.1.", p->tags, p->ntags);
    }
    return finish(&f, ret_body);
}

int tm_ec2_build_create_launch_template(const char *name, const char *image_id,
                                        char **ret_body)
{
    struct form f = {0};

    if (!has(name) || !has(image_id))
        return TM_EINVAL;
    begin(&f, TM_EC2_CREATE_LAUNCH_TEMPLATE);
    add(&f, "LaunchTemplateName", name);
    add(&f, "LaunchTemplateData.ImageId", image_id);
    return finish(&f, ret_body);
}
