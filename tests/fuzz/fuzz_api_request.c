/*
 * tests/fuzz/fuzz_api_request.c: libFuzzer target for the API's request
 * path end to end, without a socket: the checks the server chains before
 * and inside a route, in its order.  An input is
 *
 *     METHOD SP PATH LF CONTENT-TYPE LF BODY
 *
 * (the path as h2o hands it over, decoded, so it may hold any byte).  The
 * path is matched against every route of tarmac's table (api/routes.c),
 * the Content-Type judged, the body read by the strict reader and then by
 * every body parser, a job also checked against a fixed pool
 * configuration.  Properties: a matched path's {id} is positive and its
 * {name} a whole valid name (never one cut at a NUL); a refusal names a
 * field and a reason; whatever a parser accepts is text the database
 * takes (UTF-8, no NUL, no stray control bytes) and fits its CHECKs.
 *
 * Built like fuzz_api_body.c: as a libFuzzer target (TM_FUZZ=ON, clang),
 * and with TM_FUZZ_REPLAY as a plain program ctest runs over the corpus.
 */
#include <math.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "controller/api/internal.h"
#include "controller/api/routes.h"
#include "controller/spec/quota_body.h"
#include "controller/spec/api_body.h"
#include "controller/spec/job_fit.h"
#include "controller/spec/job_spec.h"
#include "controller/spec/json_body.h"
#include "controller/spec/request.h"
#include "core/config.h"
#include "core/err.h"
#include "tests/fuzz/spec_checks.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const char pools_yaml[] =
    "database: {url: \"postgresql:///fuzz\"}\n"
    "cluster: fuzz\n"
    "providers:\n"
    "  - name: sim\n    kind: sim\n    region: r\n"
    "    instance_types:\n"
    "      - {name: s8, gpus: 8, gpu_model: A100, cpu_milli: 96000, memory_mib: 1000000,"
    " on_demand_price: \"1\"}\n"
    "pools:\n"
    "  - {name: od, provider: sim, zones: [a], instance_types: [s8], gpu_model: A100,"
    " gpus_per_node: 8, capacity_type: on_demand, max_nodes: 4}\n";

static void check_path(const char *path, size_t len)
{
    for (const struct api_route *r = tm_api_v1_routes.table; r->method; r++) {
        int64_t id = 0;
        char name[64] = "";
        const char *param = NULL;
        int m = tm_request_path_match(r->pattern, path, len, &id, name, sizeof(name), &param);
        if (m < -1 || m > 1)
            abort();
        if (m == -1 && (!param || (strcmp(param, "id") != 0 && strcmp(param, "name") != 0)))
            abort();
        if (m != 1)
            continue;
        if (strstr(r->pattern, "{id}") && id <= 0)
            abort();
        if (strstr(r->pattern, "{name}") && !tm_job_spec_name_ok(name))
            abort();
        /* A match takes every byte: none may be a NUL the match stopped at. */
        if (memchr(path, '\0', len))
            abort();
    }
}

static void check_body(const struct tm_config *cfg, const char *body, size_t size)
{
    struct tm_spec_error err;
    struct tm_job_spec spec;
    struct tm_api_heartbeat hb = {0};
    struct tm_api_budget budget;
    cJSON *root = NULL;
    char reason[TM_API_REASON_MAX + 1];
    int64_t in_s;
    bool pre;
    int r;

    memset(&err, 0, sizeof(err));
    r = tm_job_spec_parse_json(body, size, &spec, &root, &err);
    check_err(r, &err);
    if (r == 0) {
        bool whole = spec.gpus >= 1 && spec.gpus <= 16 && spec.gpu_milli == 1000;
        bool share = spec.gpus == 0 && spec.gpu_milli >= 1 && spec.gpu_milli < 1000 && spec.nodes == 1;
        if (!(whole || share) || !text_ok(spec.team) || !text_ok(spec.name) || !text_ok(spec.command) ||
            !text_ok(spec.gpu_model) || !text_ok(spec.pool))
            abort();
        memset(&err, 0, sizeof(err));
        check_err(tm_job_fit_check(cfg, &spec, &err), &err);
    }
    cJSON_Delete(root);
    memset(&err, 0, sizeof(err));
    r = tm_api_parse_heartbeat(body, size, NULL, &hb, &err);
    check_err(r, &err);
    if (r == 0 && (!text_ok(hb.report) || !text_ok(hb.samples)))
        abort();
    tm_api_heartbeat_release(&hb);
    memset(&err, 0, sizeof(err));
    check_err(tm_api_parse_retag(body, size, &pre, &err), &err);
    memset(&err, 0, sizeof(err));
    r = tm_api_parse_verb(body, size, true, reason, sizeof(reason), &in_s, &err);
    check_err(r, &err);
    if (r == 0 && !text_ok(reason))
        abort();
    memset(&err, 0, sizeof(err));
    r = tm_api_parse_budget(body, size, &budget, &err);
    check_err(r, &err);
    if (r == 0 && (budget.cap_cents < 0 || budget.warn_percent < 1 || budget.warn_percent > 100))
        abort();
    memset(&err, 0, sizeof(err));
    struct tm_api_quota_body quota;
    r = tm_api_parse_quota(body, size, &quota, &err);
    check_err(r, &err);
    if (r == 0 && (!text_ok(quota.flavor) || !text_ok(quota.org) || !isfinite(quota.gpus)))
        abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static struct tm_config cfg;
    static bool loaded;
    const char *in = (const char *)data, *end = in + size;
    const char *sp, *lf1, *lf2;

    if (!loaded) {
        char msg[256];
        if (tm_config_load_string(pools_yaml, sizeof(pools_yaml) - 1, "fuzz.yaml", &cfg, msg,
                                  sizeof(msg)) < 0)
            abort();
        loaded = true;
    }
    sp = memchr(in, ' ', size);
    lf1 = sp ? memchr(sp, '\n', (size_t)(end - sp)) : NULL;
    lf2 = lf1 ? memchr(lf1 + 1, '\n', (size_t)(end - lf1 - 1)) : NULL;
    if (!lf2)
        return 0;
    check_path(sp + 1, (size_t)(lf1 - sp - 1));
    /* The server reads a body only under a JSON Content-Type. */
    if (!tm_request_json_type(lf1 + 1, (size_t)(lf2 - lf1 - 1)))
        return 0;
    check_body(&cfg, lf2 + 1, (size_t)(end - lf2 - 1));
    return 0;
}

#ifdef TM_FUZZ_REPLAY
#include "tests/fuzz/replay_main.h"
#endif
