/*
 * tests/fuzz/fuzz_api_body.c: libFuzzer target for the API's request body
 * handling: every input goes through each body parser (a job, a
 * heartbeat, a retag, a verb, an owned machine's join) as the server
 * would receive it.
 *
 * Built two ways from this one file: with -fsanitize=fuzzer as the fuzz
 * target (TM_FUZZ=ON, clang), and with TM_FUZZ_REPLAY defined as a plain
 * program that feeds every file of a corpus directory through the same
 * entry point, so ctest replays the corpus with any compiler on every run.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "controller/spec/api_body.h"
#include "controller/spec/job_spec.h"
#include "controller/spec/join_body.h"
#include "controller/spec/json_body.h"
#include "core/model.h"
#include "core/err.h"
#include "tests/fuzz/spec_checks.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *body = (const char *)data;
    struct tm_spec_error err;
    struct tm_job_spec spec;
    struct tm_api_heartbeat hb = {0};
    cJSON *root = NULL;
    char reason[TM_API_REASON_MAX + 1];
    int64_t in_s;
    bool pre;
    int r;

    memset(&err, 0, sizeof(err));
    r = tm_job_spec_parse_json(body, size, &spec, &root, &err);
    check_err(r, &err);
    if (r == 0) {
        /* What passes must fit the jobs table's CHECK constraints. */
        bool whole = spec.gpus >= 1 && spec.gpus <= 16 && spec.gpu_milli == 1000;
        bool share = spec.gpus == 0 && spec.gpu_milli >= 1 && spec.gpu_milli < 1000 &&
                     spec.nodes == 1;
        if (!root || !spec.team || !tm_job_spec_name_ok(spec.team) || !(whole || share) ||
            spec.nodes < 1 || spec.nodes > 1024 || spec.priority < -1000 || spec.priority > 1000 ||
            spec.cpu_milli < 0 || spec.memory_mib < 0 || spec.runtime_estimate_ms < 0 ||
            spec.deadline_ms < 0 || tm_job_class_parse(spec.klass) < 0)
            abort();
        /* Nothing the database would refuse, nothing cut: every string
         * accepted is whole UTF-8 without NUL or stray control bytes. */
        if (!text_ok(spec.team) || !text_ok(spec.name) || !text_ok(spec.command) ||
            !text_ok(spec.gpu_model) || !text_ok(spec.pool) || !text_ok(spec.klass))
            abort();
    } else if (root) {
        abort();
    }
    cJSON_Delete(root);

    memset(&err, 0, sizeof(err));
    r = tm_api_parse_heartbeat(body, size, NULL, &hb, &err);
    check_err(r, &err);
    if (r == 0) {
        cJSON *a = cJSON_Parse(hb.report), *b = cJSON_Parse(hb.samples);
        if (!a || !b || !cJSON_IsArray(cJSON_GetObjectItemCaseSensitive(a, "jobs")) ||
            !cJSON_IsArray(b) || (size_t)cJSON_GetArraySize(b) != hb.nsamples)
            abort();
        cJSON_Delete(a);
        cJSON_Delete(b);
    }
    tm_api_heartbeat_release(&hb);

    memset(&err, 0, sizeof(err));
    check_err(tm_api_parse_retag(body, size, &pre, &err), &err);
    memset(&err, 0, sizeof(err));
    r = tm_api_parse_verb(body, size, size % 2 == 0, reason, sizeof(reason), &in_s, &err);
    check_err(r, &err);
    if (r == 0 && (strlen(reason) > TM_API_REASON_MAX || in_s < -1 || in_s > 86400 || !text_ok(reason)))
        abort();

    /* A join: what passes is a pool name, a key of 32-256 bytes and a
     * hardware report within its bounds (the shape check comes after). */
    struct tm_join_body jb;
    memset(&err, 0, sizeof(err));
    root = NULL;
    r = tm_join_parse(body, size, &jb, &root, &err);
    check_err(r, &err);
    if (r == 0 && (!root || !jb.pool || !tm_job_spec_name_ok(jb.pool) || !jb.node_key ||
                   strlen(jb.node_key) < 32 || strlen(jb.node_key) > 256 || jb.hw.gpus < 0 ||
                   jb.hw.cpus < 1 || jb.hw.memory_mib < 1 || !text_ok(jb.node_key) ||
                   (jb.join_token && !text_ok(jb.join_token))))
        abort();
    if (r != 0 && root)
        abort();
    cJSON_Delete(root);
    return 0;
}

#ifdef TM_FUZZ_REPLAY
#include "tests/fuzz/replay_main.h"
#endif
