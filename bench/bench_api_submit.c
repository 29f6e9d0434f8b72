/*
 * bench/bench_api_submit.c: a closed-loop load generator for POST /v1/jobs
 * on bench/load_driver.c (libcurl multi, HTTP/1.1 keep-alive), loopback
 * only.  Run it through bench/run-api.sh.
 *
 *   bench_api_submit --url http://127.0.0.1:PORT --tokens FILE
 *                    [--conns 64] [--duration 20] [--max-requests 2000000]
 *                    [--team bench] [--gpus 1] [--warmup 1]
 *
 * Requests rotate over the tokens in FILE (one a line): the API limits each
 * token to its own rate, so a fleet of clients is many tokens.  Each request
 * submits a job with a fresh name; an answer counts as success when it is
 * 201.  The rest (warm-up, latency, the printed summary and RESULT line) is
 * load_driver.h's.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "load_driver.h"

struct submit {
    const char *team;
    int gpus;
};

static int submit_option(void *ctx, const char *name, const char *value)
{
    struct submit *s = ctx;

    if (strcmp(name, "--team") == 0)
        s->team = value;
    else if (strcmp(name, "--gpus") == 0)
        s->gpus = atoi(value) > 0 ? atoi(value) : 1;
    else
        return 0;
    return 1;
}

static bool submit_check(void *ctx)
{
    const struct submit *s = ctx;

    return strlen(s->team) <= 60;
}

/* One job a request, named after the request's sequence number. */
static int submit_prepare(void *ctx, struct load_request *r)
{
    const struct submit *s = ctx;

    snprintf(r->url, r->url_cap, "%s/v1/jobs", r->base_url);
    return snprintf(r->body, r->body_cap, "{\"team\":\"%s\",\"name\":\"b%" PRIu64 "\",\"gpus\":%d}",
                    s->team, r->seq, s->gpus);
}

int main(int argc, char **argv)
{
    struct submit s = {.team = "bench", .gpus = 1};
    const struct load_hooks hooks = {
        .name = "bench_api_submit",
        .usage_extra = " [--team T] [--gpus G]",
        .endpoint = "/v1/jobs",
        .ok_status = 201,
        .rate_label = "jobs/s (201)",
        .ctx = &s,
        .option = submit_option,
        .check = submit_check,
        .prepare = submit_prepare,
    };

    return load_driver_main(&hooks, argc, argv);
}
