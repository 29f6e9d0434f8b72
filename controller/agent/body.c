/*
 * controller/agent/body.c: request bodies (body.h).
 */
#include <stdlib.h>

#include <cjson/cJSON.h>

#include "controller/agent/body.h"

static char *finish(cJSON *root, int ok)
{
    char *s = ok ? cJSON_PrintUnformatted(root) : NULL;

    cJSON_Delete(root);
    return s;
}

static cJSON *sample_json(const struct tm_gpu_sample *s)
{
    cJSON *o = cJSON_CreateObject(), *procs;
    int ok = o != NULL;

    ok = ok && cJSON_AddNumberToObject(o, "gpu_index", s->gpu_index);
    ok = ok && cJSON_AddNumberToObject(o, "at_ms", (double)s->at_ms);
    ok = ok && cJSON_AddNumberToObject(o, "util_percent", s->util_percent);
    ok = ok && cJSON_AddNumberToObject(o, "memory_used_mib", (double)s->memory_used_mib);
    ok = ok && cJSON_AddNumberToObject(o, "memory_total_mib", (double)s->memory_total_mib);
    ok = ok && cJSON_AddNumberToObject(o, "temperature_c", s->temperature_c);
    ok = ok && cJSON_AddNumberToObject(o, "power_w", s->power_w);
    procs = ok ? cJSON_AddArrayToObject(o, "processes") : NULL;
    ok = ok && procs;
    for (int i = 0; ok && i < s->nprocs; i++) {
        cJSON *p = cJSON_CreateObject();
        ok = p && cJSON_AddItemToArray(procs, p);
        ok = ok && cJSON_AddNumberToObject(p, "pid", s->procs[i].pid);
        ok = ok && cJSON_AddNumberToObject(p, "used_memory_mib", (double)s->procs[i].used_memory_mib);
    }
    if (!ok) {
        cJSON_Delete(o);
        return NULL;
    }
    return o;
}

char *tm_agent_body_heartbeat(const struct tm_gpu_info *gpus, int ngpus,
                              const struct tm_gpu_sample *samples, size_t nsamples,
                              const struct tm_agent_running *running, size_t nrunning,
                              int64_t heartbeat_ms)
{
    cJSON *root = cJSON_CreateObject(), *g, *s, *r;
    int ok = root != NULL;

    g = ok ? cJSON_AddArrayToObject(root, "gpus") : NULL;
    s = ok ? cJSON_AddArrayToObject(root, "samples") : NULL;
    r = ok ? cJSON_AddArrayToObject(root, "running") : NULL;
    ok = ok && g && s && r;
    for (int i = 0; ok && i < ngpus; i++) {
        cJSON *o = cJSON_CreateObject();
        ok = o && cJSON_AddItemToArray(g, o);
        ok = ok && cJSON_AddNumberToObject(o, "index", gpus[i].index);
        ok = ok && cJSON_AddStringToObject(o, "uuid", gpus[i].uuid);
        ok = ok && cJSON_AddStringToObject(o, "name", gpus[i].name);
        ok = ok && cJSON_AddNumberToObject(o, "memory_total_mib", (double)gpus[i].memory_total_mib);
    }
    for (size_t i = 0; ok && i < nsamples; i++) {
        cJSON *o = sample_json(&samples[i]);
        ok = o && cJSON_AddItemToArray(s, o);
        if (!o)
            ok = 0;
    }
    for (size_t i = 0; ok && i < nrunning; i++) {
        cJSON *o = cJSON_CreateObject();
        ok = o && cJSON_AddItemToArray(r, o);
        ok = ok && cJSON_AddNumberToObject(o, "job_id", (double)running[i].job_id);
        ok = ok && cJSON_AddNumberToObject(o, "attempt", (double)running[i].attempt);
        ok = ok && cJSON_AddNumberToObject(o, "pid", running[i].pid);
    }
    ok = ok && (heartbeat_ms <= 0 || cJSON_AddNumberToObject(root, "heartbeat_ms", (double)heartbeat_ms));
    return finish(root, ok);
}

char *tm_agent_body_enroll(int64_t node_id, const char *secret, const char *address)
{
    cJSON *root = cJSON_CreateObject();
    int ok = root && cJSON_AddNumberToObject(root, "node_id", (double)node_id) &&
             cJSON_AddStringToObject(root, "secret", secret) &&
             (!address || cJSON_AddStringToObject(root, "address", address));

    return finish(root, ok);
}

char *tm_agent_body_start(int64_t attempt, int pid)
{
    cJSON *root = cJSON_CreateObject();
    int ok = root && cJSON_AddNumberToObject(root, "attempt", (double)attempt) &&
             cJSON_AddNumberToObject(root, "pid", pid);

    return finish(root, ok);
}

char *tm_agent_body_exit(const struct tm_agent_report *rep)
{
    cJSON *root = cJSON_CreateObject();
    int ok = root && cJSON_AddNumberToObject(root, "attempt", (double)rep->attempt);

    if (ok)
        ok = rep->has_code ? cJSON_AddNumberToObject(root, "exit_code", rep->exit_code) != NULL
                           : cJSON_AddNullToObject(root, "exit_code") != NULL;
    if (ok)
        ok = rep->signal ? cJSON_AddNumberToObject(root, "signal", rep->signal) != NULL
                         : cJSON_AddNullToObject(root, "signal") != NULL;
    ok = ok && cJSON_AddStringToObject(root, "output_tail", rep->tail);
    ok = ok && cJSON_AddStringToObject(root, "reason", rep->reason);
    return finish(root, ok);
}

char *tm_agent_body_interruption(const char *reason, int64_t deadline_ms)
{
    cJSON *root = cJSON_CreateObject();
    int ok = root && cJSON_AddStringToObject(root, "reason", reason);

    if (ok && deadline_ms > 0)
        ok = cJSON_AddNumberToObject(root, "deadline_ms", (double)deadline_ms) != NULL;
    return finish(root, ok);
}
