/*
 * providers/aws/check.c: `tarmac check aws`, a first conversation with EC2.
 *
 * It resolves region, endpoint and credentials exactly as the provider
 * does, asks DescribeInstanceTypes, and prints what the controller would
 * need to know about each type.  The loop, the options and the exit
 * codes are the runner's (providers/common/check.c).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <uv.h>

#include "core/err.h"
#include "core/log.h"
#include "providers/aws/aws_provider.h"
#include "controller/io/aws_credentials.h"
#include "providers/aws/ec2.h"
#include "providers/common/check.h"

#define CHECK_MAX_TYPES 64
#define CHECK_MAX_PAGES 100

struct check {
    struct tm_check *ck;
    struct tm_ec2 *ec2;
    struct tm_ec2_options eo;
    const char *const *types;
    size_t ntypes;
    unsigned pages;
    size_t printed;
    char region[TM_ID_MAX], endpoint[512];
};

static void finish(struct check *c, int status, const struct tm_ec2_reply *reply)
{
    tm_check_finish(c->ck, status, reply ? reply->error_code : NULL,
                    reply ? reply->error_message : NULL);
    if (status < 0 && status != TM_EAUTH)
        snprintf(c->ck->what, sizeof(c->ck->what), "could not describe instance types");
    tm_ec2_close(c->ec2, NULL, NULL);
}

static int ask(struct check *c, const char *next_token);

static void on_types(int status, const struct tm_ec2_reply *reply, void *data)
{
    struct check *c = data;
    int r;

    if (status < 0) {
        finish(c, status, reply);
        return;
    }
    for (size_t i = 0; i < reply->ntypes; i++) {
        const struct tm_ec2_type_info *t = &reply->types[i];

        /* Listing everything: only GPU types matter to tarmac. */
        if (c->ntypes == 0 && t->gpus == 0)
            continue;
        if (t->gpus > 0)
            printf("%s gpus=%d model=%s manufacturer=%s gpu_memory_mib=%lld vcpus=%d "
                   "memory_mib=%lld\n", t->name, t->gpus, t->gpu_model, t->gpu_manufacturer,
                   (long long)t->gpu_memory_mib, t->vcpus, (long long)t->memory_mib);
        else
            printf("%s gpus=0 vcpus=%d memory_mib=%lld\n", t->name, t->vcpus,
                   (long long)t->memory_mib);
        c->printed++;
    }
    if (reply->next_token && ++c->pages < CHECK_MAX_PAGES) {
        r = ask(c, reply->next_token);
        if (r < 0)
            finish(c, r, NULL);
        return;
    }
    finish(c, 0, NULL);
}

static int ask(struct check *c, const char *next_token)
{
    char *body = NULL;
    int r = tm_ec2_build_describe_instance_types(c->types, c->ntypes, 100, next_token, &body);

    if (r < 0)
        return r;
    return tm_ec2_call(c->ec2, TM_EC2_DESCRIBE_INSTANCE_TYPES, body, TM_EC2_RETRY_AMBIGUOUS,
                       on_types, c);
}

static int start(struct tm_check *ck, uv_loop_t *loop, void *ctx)
{
    struct check *c = ctx;
    int r = tm_ec2_create(loop, &c->eo, &c->ec2);

    if (r < 0)
        return r;
    c->ck = ck;
    r = ask(c, NULL);
    if (r < 0)
        finish(c, r, NULL);
    return 0;
}

static void ok_line(const struct tm_check *ck, void *ctx, FILE *out)
{
    const struct check *c = ctx;

    (void)ck;
    fprintf(out, "region %s, endpoint %s, %zu instance types", c->region, c->endpoint,
            c->printed);
}

static const struct tm_check_backend aws_check = {
    .cloud = "aws",
    .usage = "[--region R] [--instance-types T1,T2,...] [--endpoint URL] [--profile P]",
    .start = start,
    .ok_line = ok_line,
};

int tm_aws_check_main(int argc, char **argv)
{
    struct check c = {0};
    const char *region_arg = NULL, *endpoint_arg = NULL, *types_arg = NULL;
    const struct tm_check_option opts[] = {
        {"--region", &region_arg}, {"--instance-types", &types_arg},
        {"--endpoint", &endpoint_arg}, {"--profile", &c.eo.cred.profile},
    };
    const char *types[CHECK_MAX_TYPES];
    char *types_copy = NULL;
    char err[256] = "";
    int rc, r;

    c.eo.cred.source = TM_AWS_CRED_CHAIN;
    rc = tm_check_parse(&aws_check, argc, argv, opts, sizeof(opts) / sizeof(opts[0]));
    if (rc >= 0)
        return rc;
    if (types_arg) {
        char *save = NULL;

        types_copy = strdup(types_arg);
        if (!types_copy) {
            fprintf(stderr, "aws check: out of memory\n");
            return TM_CHECK_FAILED;
        }
        for (char *t = strtok_r(types_copy, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
            if (c.ntypes == CHECK_MAX_TYPES) {
                fprintf(stderr, "aws check: at most %d instance types\n", CHECK_MAX_TYPES);
                free(types_copy);
                return TM_CHECK_USAGE;
            }
            types[c.ntypes++] = t;
        }
        c.types = types;
    }
    r = tm_aws_region_resolve(region_arg, &c.eo.cred, c.region, sizeof(c.region), err,
                              sizeof(err));
    if (r < 0) {
        fprintf(stderr, "aws check: no region: %s (use --region or AWS_REGION)\n",
                err[0] ? err : tm_strerror(r));
        free(types_copy);
        return TM_CHECK_FAILED;
    }
    r = tm_aws_endpoint_resolve(endpoint_arg, c.region, c.endpoint, sizeof(c.endpoint));
    if (r < 0) {
        fprintf(stderr, "aws check: bad endpoint\n");
        free(types_copy);
        return TM_CHECK_FAILED;
    }
    c.eo.endpoint = c.endpoint;
    c.eo.region = c.region;
    /* An interactive check should answer quickly, not after a long backoff. */
    c.eo.retry.max_attempts = 3;
    c.eo.retry.max_total_delay_ms = 3000;
    c.eo.timeout_ms = 15000;
    rc = tm_check_run(&aws_check, &c);
    free(types_copy);
    return rc;
}
