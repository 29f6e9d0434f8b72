/*
 * tests/fuzz/fuzz_api_body.c: libFuzzer target for the API's request body
 * handling: every input goes through each body parser (a job, a
 * heartbeat, a retag, a verb) as the server would receive it.
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

#include "controller/api_body.h"
#include "controller/job_spec.h"
#include "controller/model.h"
#include "core/err.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Every refusal names a field and a reason. */
static void check_err(int r, const struct tm_spec_error *err)
{
    if (r == 0)
        return;
    if (r != TM_EINVAL && r != TM_ENOMEM)
        abort();
    if (err->field[0] == '\0' || err->message[0] == '\0')
        abort();
}

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
    } else if (root) {
        abort();
    }
    cJSON_Delete(root);

    memset(&err, 0, sizeof(err));
    r = tm_api_parse_heartbeat(body, size, &hb, &err);
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
    if (r == 0 && (strlen(reason) > TM_API_REASON_MAX || in_s < -1 || in_s > 86400))
        abort();
    return 0;
}

#ifdef TM_FUZZ_REPLAY
#include <dirent.h>
#include <sys/stat.h>

static int replay_file(const char *path)
{
    FILE *f = fopen(path, "rb");
    char *buf = NULL;
    size_t len = 0, cap = 0;
    int r = 0;

    if (!f) {
        fprintf(stderr, "%s: could not open\n", path);
        return -1;
    }
    for (;;) {
        if (len == cap) {
            char *nb;
            cap = cap ? cap * 2 : 4096;
            nb = realloc(buf, cap);
            if (!nb) {
                r = -1;
                goto out;
            }
            buf = nb;
        }
        size_t n = fread(buf + len, 1, cap - len, f);
        if (n == 0)
            break;
        len += n;
    }
    if (ferror(f)) {
        fprintf(stderr, "%s: could not read\n", path);
        r = -1;
        goto out;
    }
    LLVMFuzzerTestOneInput((const uint8_t *)buf, len);
out:
    free(buf);
    fclose(f);
    return r;
}

/* Arguments are files or directories (not recursed into subdirectories). */
int main(int argc, char **argv)
{
    size_t count = 0;
    int failed = 0;

    for (int i = 1; i < argc; i++) {
        struct stat st;
        DIR *d;
        struct dirent *e;

        if (stat(argv[i], &st) != 0) {
            fprintf(stderr, "%s: not found\n", argv[i]);
            return 1;
        }
        if (!S_ISDIR(st.st_mode)) {
            failed |= replay_file(argv[i]) != 0;
            count++;
            continue;
        }
        d = opendir(argv[i]);
        if (!d)
            return 1;
        while ((e = readdir(d)) != NULL) {
            char path[4096];
            if (e->d_name[0] == '.')
                continue;
            snprintf(path, sizeof(path), "%s/%s", argv[i], e->d_name);
            if (stat(path, &st) != 0 || !S_ISREG(st.st_mode))
                continue;
            failed |= replay_file(path) != 0;
            count++;
        }
        closedir(d);
    }
    printf("replayed %zu inputs\n", count);
    if (count == 0) {
        fprintf(stderr, "no inputs found\n");
        return 1;
    }
    return failed ? 1 : 0;
}
#endif
