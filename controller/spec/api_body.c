/*
 * controller/spec/api_body.c: see api_body.h.
 *
 * Every body is parsed with cJSON, every member type-checked, and what goes
 * to the database is rebuilt from the checked values, never passed through:
 * a field the schema does not know cannot ride along into SQL.
 */
#include "controller/spec/api_body.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "controller/spec/json_body.h"
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

static int check_sample(const cJSON *s, size_t i, cJSON *out, struct tm_spec_error *err)
{
    char field[64], prefix[32];
    int64_t index = -1, mem = -1, at = 0;
    double util = -1;
    bool have_util = false;
    cJSON *o;
    int r;

    snprintf(prefix, sizeof(prefix), "gpus[%zu].", i);
    if (!cJSON_IsObject(s)) {
        snprintf(field, sizeof(field), "gpus[%zu]", i);
        return tm_spec_fail(err, field, "must be an object");
    }
    r = no_repeats(s, prefix, err);
    if (r < 0)
        return r;
    for (const cJSON *m = s->child; m; m = m->next) {
        tm_spec_field_name(field, sizeof(field), prefix, m->string);
        if (strcmp(m->string, "index") == 0) {
            if (!json_int(m, 0, 15, &index))
                return tm_spec_fail(err, field, "must be a GPU index from 0 to 15");
        } else if (strcmp(m->string, "util_percent") == 0) {
            if (!cJSON_IsNumber(m) || !isfinite(m->valuedouble) || m->valuedouble < 0 ||
                m->valuedouble > 100)
                return tm_spec_fail(err, field, "must be a number from 0 to 100");
            util = m->valuedouble;
            have_util = true;
        } else if (strcmp(m->string, "memory_used_mib") == 0) {
            if (!json_int(m, 0, TM_JOB_MEMORY_MIB_MAX, &mem))
                return tm_spec_fail(err, field, "must be a non-negative integer up to 1073741824");
        } else if (strcmp(m->string, "at_ms") == 0) {
            if (!json_int(m, 1, INT64_C(9007199254740991), &at))
                return tm_spec_fail(err, field, "must be a positive integer (ms since the epoch)");
        } else {
            return tm_spec_fail(err, field, "unrecognized field");
        }
    }
    if (index < 0 || !have_util || mem < 0) {
        snprintf(field, sizeof(field), "%s%s", prefix,
                 index < 0 ? "index" : !have_util ? "util_percent" : "memory_used_mib");
        return tm_spec_fail(err, field, "required");
    }
    o = cJSON_CreateObject();
    if (!o || !cJSON_AddItemToArray(out, o) || !cJSON_AddNumberToObject(o, "index", (double)index) ||
        !cJSON_AddNumberToObject(o, "util_percent", util) ||
        !cJSON_AddNumberToObject(o, "memory_used_mib", (double)mem) ||
        (at > 0 && !cJSON_AddNumberToObject(o, "at_ms", (double)at)))
        return TM_ENOMEM;
    return 0;
}

int tm_api_parse_heartbeat(const char *body, size_t len, struct tm_api_heartbeat *ret,
                           struct tm_spec_error *err)
{
    struct tm_api_heartbeat hb = {0};
    cJSON *root = NULL, *report = NULL, *jobs = NULL, *samples = NULL;
    size_t i;
    int r;

    r = parse_object(body, len, true, &root, err);
    if (r < 0)
        goto out;
    r = TM_ENOMEM;
    report = cJSON_CreateObject();
    jobs = cJSON_AddArrayToObject(report, "jobs");
    samples = cJSON_CreateArray();
    if (!report || !jobs || !samples)
        goto out;
    if (root) {
        r = no_repeats(root, "", err);
        if (r < 0)
            goto out;
        for (const cJSON *m = root->child; m; m = m->next) {
            const cJSON *e;
            bool is_jobs = strcmp(m->string, "jobs") == 0;
            if (!is_jobs && strcmp(m->string, "gpus") != 0) {
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
                if (i >= (is_jobs ? TM_API_REPORT_JOBS_MAX : TM_API_SAMPLES_MAX)) {
                    r = tm_spec_fail(err, m->string, "at most %d entries",
                                     is_jobs ? TM_API_REPORT_JOBS_MAX : TM_API_SAMPLES_MAX);
                    goto out;
                }
                r = is_jobs ? check_report_job(e, i, jobs, err) : check_sample(e, i, samples, err);
                if (r < 0)
                    goto out;
                i++;
            }
            if (is_jobs)
                hb.njobs = i;
            else
                hb.nsamples = i;
        }
    }
    r = TM_ENOMEM;
    hb.report = cJSON_PrintUnformatted(report);
    hb.samples = cJSON_PrintUnformatted(samples);
    if (!hb.report || !hb.samples)
        goto out;
    *ret = hb;
    hb = (struct tm_api_heartbeat){0};
    r = 0;
out:
    if (r == TM_ENOMEM && err)
        tm_spec_fail(err, "body", "out of memory");
    tm_api_heartbeat_release(&hb);
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

int tm_api_parse_verb(const char *body, size_t len, bool allow_in, char *reason, size_t size,
                      int64_t *ret_in_s, struct tm_spec_error *err)
{
    cJSON *root = NULL;
    int64_t in_s = -1;
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
