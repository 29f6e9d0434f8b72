/*
 * providers/aws/check.c: `tarmac check aws`, a first conversation with EC2.
 *
 * It resolves region, endpoint and credentials exactly as the provider
 * does, asks DescribeInstanceTypes, and prints what the controller would
 * need to know about each type.  It runs its own loop: the command is
 * short-lived and has nothing else to do.
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

#define CHECK_MAX_TYPES 64
#define CHECK_MAX_PAGES 100

struct check {
    struct tm_ec2 *ec2;
    const char *const *types;
    size_t ntypes;
    int status;
    bool done, closed;
    unsigned pages;
    size_t printed;
    char code[TM_ID_MAX];
    char message[256];
};

static void usage(void)
{
    fprintf(stderr, "usage: tarmac check aws [--region R] [--instance-types T1,T2,...] "
                    "[--endpoint URL] [--profile P]\n");
}

static void on_closed(void *data)
{
    struct check *ck = data;

    ck->closed = true;
}

static void finish(struct check *ck, int status, const struct tm_ec2_reply *reply)
{
    ck->status = status;
    ck->done = true;
    if (reply) {
        snprintf(ck->code, sizeof(ck->code), "%s", reply->error_code);
        snprintf(ck->message, sizeof(ck->message), "%s", reply->error_message);
    }
    tm_ec2_close(ck->ec2, on_closed, ck);
}

static int ask(struct check *ck, const char *next_token);

static void on_types(int status, const struct tm_ec2_reply *reply, void *data)
{
    struct check *ck = data;
    int r;

    if (status < 0) {
        finish(ck, status, reply);
        return;
    }
    for (size_t i = 0; i < reply->ntypes; i++) {
        const struct tm_ec2_type_info *t = &reply->types[i];

        /* Listing everything: only GPU types matter to tarmac. */
        if (ck->ntypes == 0 && t->gpus == 0)
            continue;
        if (t->gpus > 0)
            printf("%s gpus=%d model=%s manufacturer=%s gpu_memory_mib=%lld vcpus=%d "
                   "memory_mib=%lld\n", t->name, t->gpus, t->gpu_model, t->gpu_manufacturer,
                   (long long)t->gpu_memory_mib, t->vcpus, (long long)t->memory_mib);
        else
            printf("%s gpus=0 vcpus=%d memory_mib=%lld\n", t->name, t->vcpus,
                   (long long)t->memory_mib);
        ck->printed++;
    }
    if (reply->next_token && ++ck->pages < CHECK_MAX_PAGES) {
        r = ask(ck, reply->next_token);
        if (r < 0)
            finish(ck, r, NULL);
        return;
    }
    finish(ck, 0, NULL);
}

static int ask(struct check *ck, const char *next_token)
{
    char *body = NULL;
    int r = tm_ec2_build_describe_instance_types(ck->types, ck->ntypes, 100, next_token, &body);

    if (r < 0)
        return r;
    return tm_ec2_call(ck->ec2, TM_EC2_DESCRIBE_INSTANCE_TYPES, body, TM_EC2_RETRY_AMBIGUOUS,
                       on_types, ck);
}

int tm_aws_check_main(int argc, char **argv)
{
    struct tm_ec2_options eo = {0};
    struct check ck = {0};
    const char *region_arg = NULL, *endpoint_arg = NULL, *types_arg = NULL;
    const char *types[CHECK_MAX_TYPES];
    char *types_copy = NULL;
    char region[TM_ID_MAX], endpoint[512], err[256] = "";
    uv_loop_t loop;
    int rc = 1;
    int r;

    if (argc < 2 || strcmp(argv[0], "check") != 0 || strcmp(argv[1], "aws") != 0) {
        usage();
        return 2;
    }
    eo.cred.source = TM_AWS_CRED_CHAIN;
    for (int i = 2; i < argc; i++) {
        const char **dst = NULL;

        if (strcmp(argv[i], "--region") == 0)
            dst = &region_arg;
        else if (strcmp(argv[i], "--instance-types") == 0)
            dst = &types_arg;
        else if (strcmp(argv[i], "--endpoint") == 0)
            dst = &endpoint_arg;
        else if (strcmp(argv[i], "--profile") == 0)
            dst = &eo.cred.profile;
        if (!dst || i + 1 >= argc) {
            usage();
            return 2;
        }
        *dst = argv[++i];
    }
    if (types_arg) {
        char *save = NULL;

        types_copy = strdup(types_arg);
        if (!types_copy) {
            fprintf(stderr, "aws check: out of memory\n");
            return 1;
        }
        for (char *t = strtok_r(types_copy, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
            if (ck.ntypes == CHECK_MAX_TYPES) {
                fprintf(stderr, "aws check: at most %d instance types\n", CHECK_MAX_TYPES);
                free(types_copy);
                return 2;
            }
            types[ck.ntypes++] = t;
        }
        ck.types = types;
    }
    r = tm_aws_region_resolve(region_arg, &eo.cred, region, sizeof(region), err, sizeof(err));
    if (r < 0) {
        fprintf(stderr, "aws check: no region: %s (use --region or AWS_REGION)\n",
                err[0] ? err : tm_strerror(r));
        free(types_copy);
        return 1;
    }
    r = tm_aws_endpoint_resolve(endpoint_arg, region, endpoint, sizeof(endpoint));
    if (r < 0) {
        fprintf(stderr, "aws check: bad endpoint\n");
        free(types_copy);
        return 1;
    }
    eo.endpoint = endpoint;
    eo.region = region;
    /* An interactive check should answer quickly, not after a long backoff. */
    eo.retry.max_attempts = 3;
    eo.retry.max_total_delay_ms = 3000;
    eo.timeout_ms = 15000;
    if (uv_loop_init(&loop) != 0) {
        free(types_copy);
        return 1;
    }
    r = tm_ec2_create(&loop, &eo, &ck.ec2);
    if (r == 0) {
        r = ask(&ck, NULL);
        if (r < 0)
            finish(&ck, r, NULL);
        uv_run(&loop, UV_RUN_DEFAULT);
    }
    if (r < 0 && !ck.done) {
        fprintf(stderr, "aws check: could not start: %s\n", tm_strerror(r));
    } else if (ck.status == 0) {
        fprintf(stderr, "aws check: ok, region %s, endpoint %s, %zu instance types\n", region,
                endpoint, ck.printed);
        rc = 0;
    } else if (ck.status == TM_EAUTH) {
        /* The code and AWS's message never carry the secret. */
        fprintf(stderr, "aws check: authentication failed%s%s%s: %s\n", ck.code[0] ? " (" : "",
                ck.code, ck.code[0] ? ")" : "",
                ck.message[0] ? ck.message : "credentials refused");
        rc = 3;
    } else {
        fprintf(stderr, "aws check: could not describe instance types: %s%s%s%s%s\n",
                tm_strerror(ck.status), ck.code[0] ? ": " : "", ck.code,
                ck.message[0] ? ": " : "", ck.message);
        rc = 1;
    }
    if (uv_loop_close(&loop) != 0)
        rc = rc ? rc : 1;
    free(types_copy);
    return rc;
}
