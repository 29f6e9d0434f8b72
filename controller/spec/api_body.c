/*
 * controller/spec/api_body.c: see api_body.h.
 *
 * Every body is parsed with cJSON, every member type-checked, and what goes
 * to the database is rebuilt from the checked values, never passed through:
 * a field the schema does not know cannot ride along into SQL.
 */
#include "controller/spec/api_body.h"

#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "controller/spec/json_body.h"
#include "core/address.h"
#include "core/err.h"

static bool json_int(const cJSON *item, int64_t min, int64_t max, int64_t *ret)
{
    double d;

    if (!cJSON_IsNumber(item))
        return false;
    d = item->valuedouble;
    if (!isfinite(d) || d != floor(d) || d < (double)min || d > (double)max ||
        fabs(d) > 9007199254740992.0)
        return false;
    *ret = (int64_t)d;
    return true;
}

/* An object body, or NULL for an empty one (allowed when empty_ok). */
static int parse_object(const char *body, size_t len, bool empty_ok, cJSON **ret,
                        struct tm_spec_error *err)
{
    cJSON *root;

    *ret = NULL;
    if (!body || len == 0) {
        if (empty_ok)
            return 0;
        return tm_spec_fail(err, "body", "a JSON object is required");
    }
    int r = tm_json_body_parse(body, len, &root, err);
    if (r < 0)
        return r;
    if (!cJSON_IsObject(root)) {
        cJSON_Delete(root);
        return tm_spec_fail(err, "body", "must be a JSON object");
    }
    *ret = root;
    return 0;
}

/* Refuse repeated keys among an object's members. */
static int no_repeats(const cJSON *obj, const char *prefix, struct tm_spec_error *err)
{
    char field[64];

    for (const cJSON *a = obj->child; a; a = a->next)
        for (const cJSON *b = a->next; b; b = b->next)
            if (a->string && b->string && strcmp(a->string, b->string) == 0) {
                tm_spec_field_name(field, sizeof(field), prefix, a->string);
                return tm_spec_fail(err, field, "given more than once");
            }
    return 0;
}

static int check_report_job(const cJSON *j, size_t i, cJSON *out, struct tm_spec_error *err)
{
    char field[64], prefix[32];
    int64_t id = 0;
    const char *state = NULL, *reason = NULL;
    cJSON *o;
    int r;

    snprintf(prefix, sizeof(prefix), "jobs[%zu].", i);
    if (!cJSON_IsObject(j)) {
        snprintf(field, sizeof(field), "jobs[%zu]", i);
        return tm_spec_fail(err, field, "must be an object");
    }
    r = no_repeats(j, prefix, err);
    if (r < 0)
        return r;
    for (const cJSON *m = j->child; m; m = m->next) {
        tm_spec_field_name(field, sizeof(field), prefix, m->string);
        if (strcmp(m->string, "id") == 0) {
            if (!json_int(m, 1, INT64_C(9007199254740991), &id))
                return tm_spec_fail(err, field, "must be a positive integer");
        } else if (strcmp(m->string, "state") == 0) {
            if (!cJSON_IsString(m) || (strcmp(m->valuestring, "succeeded") != 0 &&
                                       strcmp(m->valuestring, "failed") != 0))
                return tm_spec_fail(err, field, "must be succeeded or failed");
            state = m->valuestring;
        } else if (strcmp(m->string, "reason") == 0) {
            if (!cJSON_IsString(m) || strlen(m->valuestring) > TM_API_REASON_MAX)
                return tm_spec_fail(err, field, "must be a string of at most %d bytes",
                                    TM_API_REASON_MAX);
            reason = m->valuestring;
        } else {
            return tm_spec_fail(err, field, "unrecognized field");
        }
    }
    if (id == 0) {
        snprintf(field, sizeof(field), "%sid", prefix);
        return tm_spec_fail(err, field, "required");
    }
    if (!state) {
        snprintf(field, sizeof(field), "%sstate", prefix);
        return tm_spec_fail(err, field, "required");
    }
    o = cJSON_CreateObject();
    if (!o || !cJSON_AddItemToArray(out, o) || !cJSON_AddNumberToObject(o, "id", (double)id) ||
        !cJSON_AddStringToObject(o, "state", state) ||
        (reason && !cJSON_AddStringToObject(o, "reason", reason)))
        return TM_ENOMEM;
    return 0;
}

/* A number in [min, max] (any finite, fraction allowed). */
static bool json_num(const cJSON *m, double min, double max, double *ret)
{
    if (!cJSON_IsNumber(m) || !isfinite(m->valuedouble) || m->valuedouble < min ||
        m->valuedouble > max)
        return false;
    *ret = m->valuedouble;
    return true;
}

/* A value for a PostgreSQL real column (4 bytes): one closer to zero than
 * the smallest normal float (1e-320, 1e-50) would underflow there and
 * fail the whole statement; it reads as 0, which it is to a float. */
static double as_real(double v)
{
    return fabs(v) < FLT_MIN ? 0.0 : v;
}

/* The processes on one GPU: [{"pid": 123, "used_memory_mib": 900}]. */
static int check_processes(const cJSON *list, const char *prefix, cJSON **ret,
                           struct tm_spec_error *err)
{
    char field[96];
    size_t i = 0;
    const cJSON *e;
    cJSON *out;

    snprintf(field, sizeof(field), "%sprocesses", prefix);
    if (!cJSON_IsArray(list))
        return tm_spec_fail(err, field, "must be an array");
    out = cJSON_CreateArray();
    if (!out)
        return TM_ENOMEM;
    cJSON_ArrayForEach(e, list) {
        int64_t pid = -1, mem = -1;
        cJSON *o;
        snprintf(field, sizeof(field), "%sprocesses[%zu]", prefix, i);
        if (i >= 256 || !cJSON_IsObject(e)) {
            cJSON_Delete(out);
            return tm_spec_fail(err, field, i >= 256 ? "at most 256 processes" : "must be an object");
        }
        for (const cJSON *m = e->child; m; m = m->next) {
            char f[128], at[104];
            /* Two buffers: the prefix must not be the output it is copied into. */
            snprintf(at, sizeof(at), "%s.", field);
            tm_spec_field_name(f, sizeof(f), at, m->string);
            if (strcmp(m->string, "pid") == 0 && json_int(m, 0, INT32_MAX, &pid))
                continue;
            if (strcmp(m->string, "used_memory_mib") == 0 && json_int(m, 0, TM_JOB_MEMORY_MIB_MAX, &mem))
                continue;
            cJSON_Delete(out);
            return tm_spec_fail(err, f,
                                strcmp(m->string, "pid") == 0 || strcmp(m->string, "used_memory_mib") == 0
                                    ? "must be a non-negative integer"
                                    : "unrecognized field");
        }
        o = cJSON_CreateObject();
        if (!o || !cJSON_AddItemToArray(out, o) ||
            (pid >= 0 && !cJSON_AddNumberToObject(o, "pid", (double)pid)) ||
            (mem >= 0 && !cJSON_AddNumberToObject(o, "used_memory_mib", (double)mem))) {
            cJSON_Delete(out);
            return TM_ENOMEM;
        }
        i++;
    }
    *ret = out;
    return 0;
}

/* One GPU sample.  Two spellings: the agent's samples[i] ({"gpu_index",
 * "at_ms", "util_percent", "memory_used_mib", "memory_total_mib",
 * "temperature_c", "power_w", "processes"}) and the older gpus[i]
 * ({"index", "util_percent", "memory_used_mib", "at_ms"}).  The checked
 * sample goes to out with "f", the field its index came from, so that the
 * statement that knows the node's GPU count can name it. */
static int check_sample(const cJSON *s, const char *list, size_t i,
                        const struct tm_api_sample_window *win, cJSON *out, struct tm_spec_error *err)
{
    char field[96], prefix[48], index_field[64];
    bool legacy = strcmp(list, "gpus") == 0;
    const char *index_key = legacy ? "index" : "gpu_index";
    int64_t index = -1, mem = -1, total = -1, at = 0;
    double util = -1, temp = 0, power = 0;
    bool have_util = false, have_temp = false, have_power = false;
    cJSON *procs = NULL, *o;
    int r;

    snprintf(prefix, sizeof(prefix), "%s[%zu].", list, i);
    if (!cJSON_IsObject(s)) {
        snprintf(field, sizeof(field), "%s[%zu]", list, i);
        return tm_spec_fail(err, field, "must be an object");
    }
    r = no_repeats(s, prefix, err);
    if (r < 0)
        return r;
    for (const cJSON *m = s->child; m; m = m->next) {
        tm_spec_field_name(field, sizeof(field), prefix, m->string);
        if (strcmp(m->string, index_key) == 0) {
            if (!json_int(m, 0, 15, &index))
                r = tm_spec_fail(err, field, "must be a GPU index from 0 to 15");
        } else if (strcmp(m->string, "util_percent") == 0) {
            if (!json_num(m, 0, 100, &util))
                r = tm_spec_fail(err, field, "must be a number from 0 to 100");
            have_util = true;
        } else if (strcmp(m->string, "memory_used_mib") == 0) {
            if (!json_int(m, 0, TM_JOB_MEMORY_MIB_MAX, &mem))
                r = tm_spec_fail(err, field, "must be a non-negative integer up to 1073741824");
        } else if (strcmp(m->string, "at_ms") == 0) {
            if (!json_int(m, 1, INT64_C(9007199254740991), &at))
                r = tm_spec_fail(err, field, "must be a positive integer (ms since the epoch)");
            else if (win && at > win->max_ms)
                r = tm_spec_fail(err, field,
                                 "is in the future (more than agent.clock_skew after the controller's clock)");
            else if (win && at < win->min_ms)
                r = tm_spec_fail(err, field,
                                 "is too old (more than agent.sample_max_age before the controller's clock)");
        } else if (!legacy && strcmp(m->string, "memory_total_mib") == 0) {
            if (!json_int(m, 0, TM_JOB_MEMORY_MIB_MAX, &total))
                r = tm_spec_fail(err, field, "must be a non-negative integer up to 1073741824");
        } else if (!legacy && strcmp(m->string, "temperature_c") == 0) {
            if (!json_num(m, -100, 300, &temp))
                r = tm_spec_fail(err, field, "must be a number from -100 to 300");
            have_temp = true;
        } else if (!legacy && strcmp(m->string, "power_w") == 0) {
            if (!json_num(m, 0, 100000, &power))
                r = tm_spec_fail(err, field, "must be a number from 0 to 100000");
            have_power = true;
        } else if (!legacy && strcmp(m->string, "processes") == 0) {
            if (!procs)
                r = check_processes(m, prefix, &procs, err);
        } else {
            r = tm_spec_fail(err, field, "unrecognized field");
        }
        if (r < 0) {
            cJSON_Delete(procs);
            return r;
        }
    }
    if (index < 0 || !have_util || mem < 0) {
        snprintf(field, sizeof(field), "%s%s", prefix,
                 index < 0 ? index_key : !have_util ? "util_percent" : "memory_used_mib");
        cJSON_Delete(procs);
        return tm_spec_fail(err, field, "required");
    }
    snprintf(index_field, sizeof(index_field), "%s%s", prefix, index_key);
    o = cJSON_CreateObject();
    if (!o || !cJSON_AddItemToArray(out, o)) {
        cJSON_Delete(o);
        cJSON_Delete(procs);
        return TM_ENOMEM;
    }
    if (procs)
        cJSON_AddItemToObject(o, "processes", procs);
    if (!cJSON_AddNumberToObject(o, "gpu_index", (double)index) ||
        !cJSON_AddStringToObject(o, "f", index_field) ||
        !cJSON_AddNumberToObject(o, "util_percent", as_real(util)) ||
        !cJSON_AddNumberToObject(o, "memory_used_mib", (double)mem) ||
        (total >= 0 && !cJSON_AddNumberToObject(o, "memory_total_mib", (double)total)) ||
        (have_temp && !cJSON_AddNumberToObject(o, "temperature_c", as_real(temp))) ||
        (have_power && !cJSON_AddNumberToObject(o, "power_w", as_real(power))) ||
        (at > 0 && !cJSON_AddNumberToObject(o, "at_ms", (double)at)))
        return TM_ENOMEM;
    return 0;
}

/* One GPU of the node's inventory: {"index", "uuid", "name",
 * "memory_total_mib"}; index required.  Checked into out with "f". */
static int check_gpu(const cJSON *g, size_t i, cJSON *out, struct tm_spec_error *err)
{
    char field[96], prefix[32], index_field[48];
    int64_t index = -1, total = -1;
    const char *uuid = NULL, *name = NULL;
    cJSON *o;
    int r;

    snprintf(prefix, sizeof(prefix), "gpus[%zu].", i);
    r = no_repeats(g, prefix, err);
    if (r < 0)
        return r;
    for (const cJSON *m = g->child; m; m = m->next) {
        tm_spec_field_name(field, sizeof(field), prefix, m->string);
        if (strcmp(m->string, "index") == 0) {
            if (!json_int(m, 0, 15, &index))
                return tm_spec_fail(err, field, "must be a GPU index from 0 to 15");
        } else if (strcmp(m->string, "uuid") == 0 || strcmp(m->string, "name") == 0) {
            if (!cJSON_IsString(m) || strlen(m->valuestring) > 128)
                return tm_spec_fail(err, field, "must be a string of at most 128 bytes");
            if (m->string[0] == 'u')
                uuid = m->valuestring;
            else
                name = m->valuestring;
        } else if (strcmp(m->string, "memory_total_mib") == 0) {
            if (!json_int(m, 0, TM_JOB_MEMORY_MIB_MAX, &total))
                return tm_spec_fail(err, field, "must be a non-negative integer up to 1073741824");
        } else {
            return tm_spec_fail(err, field, "unrecognized field");
        }
    }
    if (index < 0) {
        snprintf(field, sizeof(field), "%sindex", prefix);
        return tm_spec_fail(err, field, "required");
    }
    snprintf(index_field, sizeof(index_field), "%sindex", prefix);
    o = cJSON_CreateObject();
    if (!o || !cJSON_AddItemToArray(out, o) || !cJSON_AddNumberToObject(o, "gpu_index", (double)index) ||
        !cJSON_AddStringToObject(o, "f", index_field) ||
        (uuid && !cJSON_AddStringToObject(o, "uuid", uuid)) ||
        (name && !cJSON_AddStringToObject(o, "name", name)) ||
        (total >= 0 && !cJSON_AddNumberToObject(o, "memory_total_mib", (double)total)))
        return TM_ENOMEM;
    return 0;
}

/* One of the agent's running processes: {"job_id", "attempt", "pid"};
 * its job and attempt go on in out (the report's "running", which the
 * answer's gang stops read, migrations/0026). */
static int check_running(const cJSON *e, size_t i, cJSON *out, struct tm_spec_error *err)
{
    char field[96], prefix[32];
    int64_t v, job_id = 0, attempt = -1;
    bool job = false;
    cJSON *o;
    int r;

    snprintf(prefix, sizeof(prefix), "running[%zu].", i);
    if (!cJSON_IsObject(e)) {
        snprintf(field, sizeof(field), "running[%zu]", i);
        return tm_spec_fail(err, field, "must be an object");
    }
    r = no_repeats(e, prefix, err);
    if (r < 0)
        return r;
    for (const cJSON *m = e->child; m; m = m->next) {
        tm_spec_field_name(field, sizeof(field), prefix, m->string);
        if (strcmp(m->string, "job_id") == 0 || strcmp(m->string, "attempt") == 0 ||
            strcmp(m->string, "pid") == 0) {
            if (!json_int(m, m->string[0] == 'p' ? 0 : 1, INT64_C(9007199254740991), &v))
                return tm_spec_fail(err, field, "must be a positive integer");
            job = job || m->string[0] == 'j';
            if (m->string[0] == 'j')
                job_id = v;
            else if (m->string[0] == 'a')
                attempt = v;
        } else {
            return tm_spec_fail(err, field, "unrecognized field");
        }
    }
    if (!job) {
        snprintf(field, sizeof(field), "%sjob_id", prefix);
        return tm_spec_fail(err, field, "required");
    }
    o = cJSON_CreateObject();
    if (!o)
        return TM_ENOMEM;
    if (!cJSON_AddItemToArray(out, o)) {
        cJSON_Delete(o);
        return TM_ENOMEM;
    }
    if (!cJSON_AddNumberToObject(o, "job_id", (double)job_id) ||
        (attempt >= 0 && !cJSON_AddNumberToObject(o, "attempt", (double)attempt)))
        return TM_ENOMEM;
    return 0;
}

int tm_api_parse_heartbeat(const char *body, size_t len, const struct tm_api_sample_window *win,
                           struct tm_api_heartbeat *ret, struct tm_spec_error *err)
{
    struct tm_api_heartbeat hb = {0};
    cJSON *root = NULL, *report = NULL, *jobs = NULL, *running = NULL, *samples = NULL, *gpus = NULL;
    size_t i;
    int r;

    r = parse_object(body, len, true, &root, err);
    if (r < 0)
        goto out;
    r = TM_ENOMEM;
    report = cJSON_CreateObject();
    jobs = cJSON_AddArrayToObject(report, "jobs");
    running = cJSON_AddArrayToObject(report, "running");
    samples = cJSON_CreateArray();
    gpus = cJSON_CreateArray();
    if (!report || !jobs || !running || !samples || !gpus)
        goto out;
    if (root) {
        r = no_repeats(root, "", err);
        if (r < 0)
            goto out;
        for (const cJSON *m = root->child; m; m = m->next) {
            const cJSON *e;
            bool is_jobs = strcmp(m->string, "jobs") == 0;
            bool is_gpus = strcmp(m->string, "gpus") == 0;
            bool is_samples = strcmp(m->string, "samples") == 0;
            bool is_running = strcmp(m->string, "running") == 0;
            size_t max = is_jobs ? TM_API_REPORT_JOBS_MAX : TM_API_SAMPLES_MAX;
            if (strcmp(m->string, "heartbeat_ms") == 0) {
                /* The agent's period: how soon the controller hears it
                 * again (a gang's common stop time, migrations/0026). */
                int64_t hb_ms;
                if (!json_int(m, 1, 86400000, &hb_ms)) {
                    r = tm_spec_fail(err, m->string, "must be an integer from 1 to 86400000 (ms)");
                    goto out;
                }
                if (!cJSON_AddNumberToObject(report, "heartbeat_ms", (double)hb_ms)) {
                    r = TM_ENOMEM;
                    goto out;
                }
                continue;
            }
            if (!is_jobs && !is_gpus && !is_samples && !is_running) {
                char field[64];
                tm_spec_field_name(field, sizeof(field), "", m->string);
                r = tm_spec_fail(err, field, "unrecognized field");
                goto out;
            }
            if (!cJSON_IsArray(m)) {
                r = tm_spec_fail(err, m->string, "must be an array");
                goto out;
            }
            i = 0;
            cJSON_ArrayForEach(e, m) {
                if (i >= max) {
                    r = tm_spec_fail(err, m->string, "at most %zu entries", max);
                    goto out;
                }
                if (is_jobs)
                    r = check_report_job(e, i, jobs, err);
                else if (is_running)
                    r = check_running(e, i, running, err);
                else if (is_samples)
                    r = check_sample(e, "samples", i, win, samples, err);
                else if (cJSON_IsObject(e) && cJSON_GetObjectItemCaseSensitive(e, "util_percent"))
                    r = check_sample(e, "gpus", i, win, samples, err); /* the older spelling */
                else if (cJSON_IsObject(e))
                    r = check_gpu(e, i, gpus, err);
                else
                    r = check_sample(e, "gpus", i, win, samples, err); /* names the bad entry */
                if (r < 0)
                    goto out;
                i++;
            }
            if (is_jobs)
                hb.njobs = i;
            else if (!is_running)
                hb.nsamples = (size_t)cJSON_GetArraySize(samples);
        }
    }
    /* A sample takes the UUID its GPU was listed with. */
    const cJSON *smp;
    cJSON_ArrayForEach(smp, samples) {
        const cJSON *g;
        double idx = cJSON_GetObjectItemCaseSensitive(smp, "gpu_index")->valuedouble;
        cJSON_ArrayForEach(g, gpus) {
            const cJSON *u = cJSON_GetObjectItemCaseSensitive(g, "uuid");
            if (cJSON_GetObjectItemCaseSensitive(g, "gpu_index")->valuedouble == idx && cJSON_IsString(u)) {
                if (!cJSON_AddStringToObject((cJSON *)smp, "uuid", u->valuestring)) {
                    r = TM_ENOMEM;
                    goto out;
                }
                break;
            }
        }
    }
    r = TM_ENOMEM;
    hb.report = cJSON_PrintUnformatted(report);
    hb.samples = cJSON_PrintUnformatted(samples);
    hb.gpus = cJSON_PrintUnformatted(gpus);
    if (!hb.report || !hb.samples || !hb.gpus)
        goto out;
    *ret = hb;
    hb = (struct tm_api_heartbeat){0};
    r = 0;
out:
    if (r == TM_ENOMEM && err)
        tm_spec_fail(err, "body", "out of memory");
    tm_api_heartbeat_release(&hb);
    cJSON_Delete(gpus);
    cJSON_Delete(samples);
    cJSON_Delete(report);
    cJSON_Delete(root);
    return r;
}

void tm_api_heartbeat_release(struct tm_api_heartbeat *hb)
{
    if (!hb)
        return;
    free(hb->report);
    free(hb->samples);
    free(hb->gpus);
    *hb = (struct tm_api_heartbeat){0};
}

int tm_api_parse_retag(const char *body, size_t len, bool *ret_preemptible,
                       struct tm_spec_error *err)
{
    cJSON *root = NULL;
    int have = -1;
    int r;

    r = parse_object(body, len, false, &root, err);
    if (r < 0)
        goto out;
    r = no_repeats(root, "", err);
    if (r < 0)
        goto out;
    for (const cJSON *m = root->child; m; m = m->next) {
        if (strcmp(m->string, "preemptible") != 0) {
            char field[64];
            tm_spec_field_name(field, sizeof(field), "", m->string);
            r = tm_spec_fail(err, field, "unrecognized field (only preemptible can change)");
            goto out;
        }
        if (!cJSON_IsBool(m)) {
            r = tm_spec_fail(err, "preemptible", "must be true or false");
            goto out;
        }
        have = cJSON_IsTrue(m);
    }
    if (have < 0) {
        r = tm_spec_fail(err, "preemptible", "required");
        goto out;
    }
    *ret_preemptible = have == 1;
    r = 0;
out:
    cJSON_Delete(root);
    return r;
}

static int parse_verb(const char *body, size_t len, bool allow_in, int64_t now_ms, int64_t skew_ms,
                      char *reason, size_t size, int64_t *ret_in_s, int64_t *ret_deadline_ms,
                      struct tm_spec_error *err);

int tm_api_parse_verb(const char *body, size_t len, bool allow_in, char *reason, size_t size,
                      int64_t *ret_in_s, struct tm_spec_error *err)
{
    return parse_verb(body, len, allow_in, -1, 0, reason, size, ret_in_s, NULL, err);
}

int tm_api_parse_notice(const char *body, size_t len, int64_t now_ms, int64_t skew_ms, char *reason,
                        size_t size, int64_t *ret_in_s, int64_t *ret_deadline_ms,
                        struct tm_spec_error *err)
{
    return parse_verb(body, len, true, now_ms < 0 ? 0 : now_ms, skew_ms, reason, size, ret_in_s,
                      ret_deadline_ms, err);
}

static int parse_verb(const char *body, size_t len, bool allow_in, int64_t now_ms, int64_t skew_ms,
                      char *reason, size_t size, int64_t *ret_in_s, int64_t *ret_deadline_ms,
                      struct tm_spec_error *err)
{
    cJSON *root = NULL;
    int64_t in_s = -1, deadline = 0;
    int r;

    if (size)
        reason[0] = '\0';
    r = parse_object(body, len, true, &root, err);
    if (r < 0 || !root)
        goto out;
    r = no_repeats(root, "", err);
    if (r < 0)
        goto out;
    for (const cJSON *m = root->child; m; m = m->next) {
        if (strcmp(m->string, "reason") == 0) {
            if (!cJSON_IsString(m) || strlen(m->valuestring) > TM_API_REASON_MAX ||
                strlen(m->valuestring) >= size) {
                r = tm_spec_fail(err, "reason", "must be a string of at most %d bytes",
                                 TM_API_REASON_MAX);
                goto out;
            }
            snprintf(reason, size, "%s", m->valuestring);
        } else if (allow_in && strcmp(m->string, "in_s") == 0) {
            if (!json_int(m, 0, 86400, &in_s)) {
                r = tm_spec_fail(err, "in_s", "must be a whole number of seconds from 0 to 86400");
                goto out;
            }
            if (now_ms >= 0)
                deadline = (now_ms + in_s * 1000 + 500) / 1000 * 1000;
        } else if (now_ms >= 0 && strcmp(m->string, "deadline_ms") == 0) {
            int64_t at;
            if (!json_int(m, 1, INT64_C(9007199254740991), &at)) {
                r = tm_spec_fail(err, "deadline_ms", "must be a positive integer (ms since the epoch)");
                goto out;
            }
            /* Past beyond what clocks may differ by: no notice, a replay
             * or a broken clock, and it would take the node at once. */
            if (at < now_ms - skew_ms) {
                r = tm_spec_fail(err, "deadline_ms",
                                 "is in the past (more than agent.clock_skew before the controller's clock)");
                goto out;
            }
            /* The node's clock, not ours: only what is left counts. */
            in_s = at <= now_ms ? 0 : (at - now_ms) / 1000 > 86400 ? 86400 : (at - now_ms) / 1000;
            deadline = (at + 500) / 1000 * 1000;
        } else {
            char field[64];
            tm_spec_field_name(field, sizeof(field), "", m->string);
            r = tm_spec_fail(err, field, "unrecognized field");
            goto out;
        }
    }
    r = 0;
out:
    if (r == 0 && ret_in_s)
        *ret_in_s = in_s;
    if (r == 0 && ret_deadline_ms)
        *ret_deadline_ms = deadline;
    cJSON_Delete(root);
    return r;
}

int tm_api_parse_budget(const char *body, size_t len, struct tm_api_budget *ret,
                        struct tm_spec_error *err)
{
    struct tm_api_budget b = {.cap_cents = -1, .warn_percent = -1};
    bool have_period = false, have_hard = false;
    cJSON *root = NULL;
    int r;

    r = parse_object(body, len, false, &root, err);
    if (r < 0)
        goto out;
    r = no_repeats(root, "", err);
    if (r < 0)
        goto out;
    r = TM_EINVAL;
    for (const cJSON *m = root->child; m; m = m->next) {
        int64_t v;

        if (strcmp(m->string, "cap_cents") == 0) {
            if (!json_int(m, 0, TM_API_CAP_CENTS_MAX, &v)) {
                tm_spec_fail(err, "cap_cents", "must be a whole number of cents from 0 to %lld",
                             (long long)TM_API_CAP_CENTS_MAX);
                goto out;
            }
            b.cap_cents = v;
        } else if (strcmp(m->string, "warn_percent") == 0) {
            if (!json_int(m, 1, 100, &v)) {
                tm_spec_fail(err, "warn_percent", "must be a whole number from 1 to 100");
                goto out;
            }
            b.warn_percent = (int)v;
        } else if (strcmp(m->string, "hard") == 0) {
            if (!cJSON_IsBool(m)) {
                tm_spec_fail(err, "hard", "must be true or false");
                goto out;
            }
            b.hard = cJSON_IsTrue(m);
            have_hard = true;
        } else if (strcmp(m->string, "period") == 0) {
            if (!cJSON_IsString(m) || strcmp(m->valuestring, "month") != 0) {
                tm_spec_fail(err, "period", "must be \"month\" (the only period)");
                goto out;
            }
            have_period = true;
        } else if (strcmp(m->string, "scope_kind") == 0) {
            if (!cJSON_IsString(m) ||
                (strcmp(m->valuestring, "team") != 0 && strcmp(m->valuestring, "org") != 0)) {
                tm_spec_fail(err, "scope_kind", "must be \"team\" or \"org\"");
                goto out;
            }
            b.org = strcmp(m->valuestring, "org") == 0;
        } else if (strcmp(m->string, "currency") == 0) {
            if (!cJSON_IsString(m) || strcmp(m->valuestring, "USD") != 0) {
                tm_spec_fail(err, "currency", "must be \"USD\" (the only currency)");
                goto out;
            }
        } else {
            char field[64];
            tm_spec_field_name(field, sizeof(field), "", m->string);
            tm_spec_fail(err, field, "unrecognized field");
            goto out;
        }
    }
    if (b.cap_cents < 0) {
        tm_spec_fail(err, "cap_cents", "required");
        goto out;
    }
    if (!have_period) {
        tm_spec_fail(err, "period", "required");
        goto out;
    }
    if (!have_hard) {
        tm_spec_fail(err, "hard", "required");
        goto out;
    }
    if (b.warn_percent < 0) {
        tm_spec_fail(err, "warn_percent", "required");
        goto out;
    }
    *ret = b;
    r = 0;
out:
    cJSON_Delete(root);
    return r;
}

/* ---- the node agent's bodies ------------------------------------------ */

int tm_api_parse_enroll(const char *body, size_t len, int64_t *ret_node, const char **ret_secret,
                        const char **ret_address, cJSON **ret_root, struct tm_spec_error *err)
{
    cJSON *root = NULL;
    int64_t node = 0;
    const char *secret = NULL, *address = NULL;
    int r;

    *ret_root = NULL;
    r = parse_object(body, len, false, &root, err);
    if (r < 0)
        return r;
    r = no_repeats(root, "", err);
    for (const cJSON *m = root->child; r == 0 && m; m = m->next) {
        char field[64];
        tm_spec_field_name(field, sizeof(field), "", m->string);
        if (strcmp(m->string, "node_id") == 0) {
            if (!json_int(m, 1, INT64_C(9007199254740991), &node))
                r = tm_spec_fail(err, "node_id", "must be a positive integer");
        } else if (strcmp(m->string, "secret") == 0) {
            /* Never echoed, whatever it holds. */
            if (!cJSON_IsString(m) || strlen(m->valuestring) == 0 || strlen(m->valuestring) > 256)
                r = tm_spec_fail(err, "secret", "must be a string of 1-256 bytes");
            else
                secret = m->valuestring;
        } else if (strcmp(m->string, "address") == 0) {
            if (!cJSON_IsString(m) || !tm_ip_address_ok(m->valuestring))
                r = tm_spec_fail(err, "address", "must be an IPv4 or IPv6 address, not a host name");
            else
                address = m->valuestring;
        } else {
            r = tm_spec_fail(err, field, "unrecognized field");
        }
    }
    if (r == 0 && node == 0)
        r = tm_spec_fail(err, "node_id", "required");
    if (r == 0 && !secret)
        r = tm_spec_fail(err, "secret", "required");
    if (r < 0) {
        cJSON_Delete(root);
        return r;
    }
    *ret_node = node;
    *ret_secret = secret;
    *ret_address = address;
    *ret_root = root;
    return 0;
}

int tm_api_parse_job_start(const char *body, size_t len, int64_t *ret_attempt, int64_t *ret_pid,
                           struct tm_spec_error *err)
{
    cJSON *root = NULL;
    int64_t attempt = 0, pid = -1;
    int r;

    r = parse_object(body, len, false, &root, err);
    if (r < 0)
        return r;
    r = no_repeats(root, "", err);
    for (const cJSON *m = root->child; r == 0 && m; m = m->next) {
        char field[64];
        tm_spec_field_name(field, sizeof(field), "", m->string);
        if (strcmp(m->string, "attempt") == 0) {
            if (!json_int(m, 1, INT32_MAX, &attempt))
                r = tm_spec_fail(err, "attempt", "must be a positive integer");
        } else if (strcmp(m->string, "pid") == 0) {
            if (!cJSON_IsNull(m) && !json_int(m, 1, INT32_MAX, &pid))
                r = tm_spec_fail(err, "pid", "must be a positive integer");
        } else {
            r = tm_spec_fail(err, field, "unrecognized field");
        }
    }
    if (r == 0 && attempt == 0)
        r = tm_spec_fail(err, "attempt", "required");
    cJSON_Delete(root);
    if (r < 0)
        return r;
    *ret_attempt = attempt;
    *ret_pid = pid;
    return 0;
}

int tm_api_parse_job_exit(const char *body, size_t len, int64_t job, char **ret_report,
                          struct tm_spec_error *err)
{
    cJSON *root = NULL, *report = NULL, *jobs, *o;
    int64_t attempt = 0, code = -1, sig = -1;
    const char *tail = NULL, *reason = NULL;
    char why[96];
    int r;

    *ret_report = NULL;
    r = parse_object(body, len, false, &root, err);
    if (r < 0)
        return r;
    r = no_repeats(root, "", err);
    for (const cJSON *m = root->child; r == 0 && m; m = m->next) {
        char field[64];
        tm_spec_field_name(field, sizeof(field), "", m->string);
        if (strcmp(m->string, "attempt") == 0) {
            if (!json_int(m, 1, INT32_MAX, &attempt))
                r = tm_spec_fail(err, "attempt", "must be a positive integer");
        } else if (strcmp(m->string, "exit_code") == 0) {
            if (!cJSON_IsNull(m) && !json_int(m, 0, 255, &code))
                r = tm_spec_fail(err, "exit_code", "must be an integer from 0 to 255 or null");
        } else if (strcmp(m->string, "signal") == 0) {
            if (!cJSON_IsNull(m) && !json_int(m, 1, 128, &sig))
                r = tm_spec_fail(err, "signal", "must be a signal number from 1 to 128 or null");
        } else if (strcmp(m->string, "output_tail") == 0) {
            if (!cJSON_IsNull(m) && (!cJSON_IsString(m) || strlen(m->valuestring) > TM_API_OUTPUT_TAIL_MAX))
                r = tm_spec_fail(err, "output_tail", "must be a string of at most %d bytes or null",
                                 TM_API_OUTPUT_TAIL_MAX);
            else if (cJSON_IsString(m))
                tail = m->valuestring;
        } else if (strcmp(m->string, "reason") == 0) {
            if (!cJSON_IsString(m) || (strcmp(m->valuestring, "exited") != 0 &&
                                       strcmp(m->valuestring, "stopped") != 0 &&
                                       strcmp(m->valuestring, "lost") != 0))
                r = tm_spec_fail(err, "reason", "must be exited, stopped or lost");
            else
                reason = m->valuestring;
        } else {
            r = tm_spec_fail(err, field, "unrecognized field");
        }
    }
    if (r == 0 && attempt == 0)
        r = tm_spec_fail(err, "attempt", "required");
    if (r == 0 && !reason)
        r = tm_spec_fail(err, "reason", "required");
    if (r == 0 && strcmp(reason, "exited") == 0 && code < 0 && sig < 0)
        r = tm_spec_fail(err, "exit_code", "an exited job needs exit_code or signal");
    if (r == 0 && code >= 0 && sig >= 0)
        r = tm_spec_fail(err, "signal", "give exit_code or signal, not both");
    if (r < 0)
        goto out;
    if (strcmp(reason, "lost") == 0)
        snprintf(why, sizeof(why), "the node agent lost attempt %lld", (long long)attempt);
    else if (strcmp(reason, "stopped") == 0)
        snprintf(why, sizeof(why), "stopped by the node agent (attempt %lld)", (long long)attempt);
    else if (sig >= 0)
        snprintf(why, sizeof(why), "killed by signal %lld", (long long)sig);
    else
        snprintf(why, sizeof(why), "exited with code %lld", (long long)code);
    r = TM_ENOMEM;
    report = cJSON_CreateObject();
    jobs = report ? cJSON_AddArrayToObject(report, "jobs") : NULL;
    o = jobs ? cJSON_CreateObject() : NULL;
    if (!o || !cJSON_AddItemToArray(jobs, o))
        goto out;
    if (!cJSON_AddNumberToObject(o, "id", (double)job) ||
        !cJSON_AddStringToObject(o, "state", strcmp(reason, "lost") == 0      ? "lost"
                                             : strcmp(reason, "stopped") == 0 ? "stopped"
                                             : code == 0                       ? "succeeded"
                                                                               : "failed") ||
        !cJSON_AddNumberToObject(o, "attempt", (double)attempt) ||
        !cJSON_AddStringToObject(o, "reason", why) ||
        (code >= 0 && !cJSON_AddNumberToObject(o, "exit_code", (double)code)) ||
        (sig >= 0 && !cJSON_AddNumberToObject(o, "signal", (double)sig)) ||
        (tail && !cJSON_AddStringToObject(o, "output_tail", tail)))
        goto out;
    *ret_report = cJSON_PrintUnformatted(report);
    r = *ret_report ? 0 : TM_ENOMEM;
out:
    if (r == TM_ENOMEM)
        tm_spec_fail(err, "body", "out of memory");
    cJSON_Delete(report);
    cJSON_Delete(root);
    return r;
}
