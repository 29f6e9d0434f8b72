/*
 * controller/agent/gpu_fake.c: the fake GPU file (gpu.h) and the source
 * that picks fake, NVML or none.
 */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "controller/agent/gpu.h"
#include "core/err.h"
#include "core/file.h"

static int bad(char *err, size_t errlen, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

static int bad(char *err, size_t errlen, const char *fmt, ...)
{
    va_list ap;

    if (err && errlen) {
        va_start(ap, fmt);
        vsnprintf(err, errlen, fmt, ap);
        va_end(ap);
    }
    return TM_EINVAL;
}

static int num(const cJSON *g, const char *key, int i, double lo, double hi, double dflt, double *ret,
               char *err, size_t errlen)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(g, key);

    if (!v) {
        *ret = dflt;
        return 0;
    }
    if (!cJSON_IsNumber(v) || !isfinite(v->valuedouble) || v->valuedouble < lo || v->valuedouble > hi)
        return bad(err, errlen, "gpus[%d].%s: must be a number %.0f..%.0f", i, key, lo, hi);
    *ret = v->valuedouble;
    return 0;
}

static int str(const cJSON *g, const char *key, int i, char *out, size_t outlen, const char *dflt,
               char *err, size_t errlen)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(g, key);

    if (!v) {
        snprintf(out, outlen, "%s", dflt);
        return 0;
    }
    if (!cJSON_IsString(v) || !v->valuestring || !v->valuestring[0] || strlen(v->valuestring) >= outlen ||
        strpbrk(v->valuestring, ", \t\r\n"))
        return bad(err, errlen, "gpus[%d].%s: must be a short string without spaces or commas", i, key);
    snprintf(out, outlen, "%s", v->valuestring);
    return 0;
}

int tm_gpu_fake_parse(const char *body, size_t len, int64_t now_ms, struct tm_gpu_reading *r,
                      char *err, size_t errlen)
{
    cJSON *root = cJSON_ParseWithLength(body, len);
    const cJSON *gpus, *g;
    int i = 0, rc = 0;

    memset(r, 0, sizeof(*r));
    if (!root || !cJSON_IsObject(root)) {
        rc = bad(err, errlen, "not a JSON object");
        goto out;
    }
    gpus = cJSON_GetObjectItemCaseSensitive(root, "gpus");
    if (!cJSON_IsArray(gpus) || cJSON_GetArraySize(gpus) > TM_GPU_MAX) {
        rc = bad(err, errlen, "gpus: must be an array of at most %d GPUs", TM_GPU_MAX);
        goto out;
    }
    cJSON_ArrayForEach(g, gpus)
    {
        struct tm_gpu_info *in = &r->info[i];
        struct tm_gpu_sample *s = &r->sample[i];
        double util = 0, used = 0, total = 0, temp = 0, power = 0;
        char dflt[32];

        if (!cJSON_IsObject(g)) {
            rc = bad(err, errlen, "gpus[%d]: must be an object", i);
            goto out;
        }
        snprintf(dflt, sizeof(dflt), "GPU-fake-%d", i);
        rc = str(g, "uuid", i, in->uuid, sizeof(in->uuid), dflt, err, errlen);
        if (rc == 0) {
            /* a name may hold spaces: read it apart from the uuid rule */
            const cJSON *v = cJSON_GetObjectItemCaseSensitive(g, "name");
            if (v && (!cJSON_IsString(v) || !v->valuestring || strlen(v->valuestring) >= sizeof(in->name)))
                rc = bad(err, errlen, "gpus[%d].name: must be a string under %zu bytes", i,
                         sizeof(in->name));
            else
                snprintf(in->name, sizeof(in->name), "%s", v ? v->valuestring : "Fake GPU");
        }
        if (rc == 0)
            rc = num(g, "util_percent", i, 0, 100, 0, &util, err, errlen);
        if (rc == 0)
            rc = num(g, "memory_total_mib", i, 0, 1e9, 81920, &total, err, errlen);
        if (rc == 0)
            rc = num(g, "memory_used_mib", i, 0, total, 0, &used, err, errlen);
        if (rc == 0)
            rc = num(g, "temperature_c", i, -50, 200, 30, &temp, err, errlen);
        if (rc == 0)
            rc = num(g, "power_w", i, 0, 1e5, 60, &power, err, errlen);
        if (rc == 0 && cJSON_GetObjectItemCaseSensitive(g, "busy_util_percent")) {
            r->busy_given[i] = true;
            rc = num(g, "busy_util_percent", i, 0, 100, 0, &r->busy_util_percent[i], err, errlen);
        }
        if (rc < 0)
            goto out;
        for (int j = 0; j < i; j++)
            if (strcmp(r->info[j].uuid, in->uuid) == 0) {
                rc = bad(err, errlen, "gpus[%d].uuid: repeated", i);
                goto out;
            }
        in->index = i;
        in->memory_total_mib = (int64_t)total;
        s->gpu_index = i;
        s->at_ms = now_ms;
        s->util_percent = util;
        s->memory_used_mib = (int64_t)used;
        s->memory_total_mib = (int64_t)total;
        s->temperature_c = temp;
        s->power_w = power;
        i++;
    }
    r->count = i;
out:
    if (rc < 0)
        memset(r, 0, sizeof(*r));
    cJSON_Delete(root);
    return rc;
}

void tm_gpu_reading_mark_busy(struct tm_gpu_reading *r, uint32_t busy_mask)
{
    for (int i = 0; i < r->count; i++) {
        struct tm_gpu_sample *s = &r->sample[i];
        double u = r->busy_util_percent[i];

        if (!r->busy_given[i] || s->gpu_index < 0 || s->gpu_index >= 32 ||
            !(busy_mask & (UINT32_C(1) << s->gpu_index)))
            continue;
        /* a loaded GPU's memory, heat and power, in the fake's own scale */
        s->util_percent = u;
        if (s->memory_used_mib < s->memory_total_mib / 4)
            s->memory_used_mib = s->memory_total_mib / 4;
        s->temperature_c = 30 + u / 2;
        s->power_w = 60 + u * 3;
    }
}

struct tm_gpu_source {
    enum tm_gpu_kind kind;
    char *fake_path;
    struct tm_nvml *nvml;
};

int tm_gpu_source_open(const char *fake_path, struct tm_gpu_source **ret, enum tm_gpu_kind *ret_kind,
                       char *why, size_t whylen)
{
    struct tm_gpu_source *s = calloc(1, sizeof(*s));

    if (!s)
        return TM_ENOMEM;
    if (why && whylen)
        why[0] = '\0';
    if (fake_path) {
        s->fake_path = strdup(fake_path);
        if (!s->fake_path) {
            free(s);
            return TM_ENOMEM;
        }
        s->kind = TM_GPU_FAKE;
    } else if (tm_nvml_open(&s->nvml, why, whylen) == 0) {
        s->kind = TM_GPU_NVML;
    } else {
        s->kind = TM_GPU_NONE;
    }
    *ret_kind = s->kind;
    *ret = s;
    return 0;
}

int tm_gpu_source_read(struct tm_gpu_source *s, int64_t now_ms, struct tm_gpu_reading *r, char *err,
                       size_t errlen)
{
    char *body = NULL;
    size_t len = 0;
    int rc;

    memset(r, 0, sizeof(*r));
    switch (s->kind) {
    case TM_GPU_FAKE:
        rc = tm_file_read(s->fake_path, 1 << 20, &body, &len, err, errlen);
        if (rc == 0)
            rc = tm_gpu_fake_parse(body, len, now_ms, r, err, errlen);
        free(body);
        return rc;
    case TM_GPU_NVML:
        return tm_nvml_read(s->nvml, now_ms, r, err, errlen);
    default:
        return 0;
    }
}

void tm_gpu_source_close(struct tm_gpu_source *s)
{
    if (!s)
        return;
    tm_nvml_close(s->nvml);
    free(s->fake_path);
    free(s);
}
