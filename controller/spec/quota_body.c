/*
 * controller/spec/quota_body.c: PUT /v1/quotas/{team}'s body (quota_body.h).
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "controller/spec/job_spec.h"
#include "controller/spec/json_body.h"
#include "controller/spec/quota_body.h"
#include "core/err.h"

/* A name (flavor, org): the job spec's rule for team and pool names. */
static int take_name(const cJSON *m, bool nullable, char *out, size_t size, struct tm_spec_error *err)
{
    if (nullable && cJSON_IsNull(m)) {
        out[0] = '\0';
        return 0;
    }
    if (!cJSON_IsString(m) || !tm_job_spec_name_ok(m->valuestring))
        return tm_spec_fail(err, m->string, "must be a name: 1-63 letters, digits, '.', '_', '-'%s",
                            nullable ? ", or null" : "");
    snprintf(out, size, "%s", m->valuestring);
    return 0;
}

/* A number as given (the model says whether it is whole and >= 0). */
static int take_number(const cJSON *m, bool nullable, double *out, struct tm_spec_error *err)
{
    if (nullable && cJSON_IsNull(m)) {
        *out = NAN;
        return 0;
    }
    if (!cJSON_IsNumber(m) || !isfinite(m->valuedouble))
        return tm_spec_fail(err, m->string, "must be a number%s", nullable ? " or null" : "");
    *out = m->valuedouble;
    return 0;
}

static int take_member(const cJSON *m, struct tm_api_quota_body *q, bool *have_flavor,
                       bool *have_gpus, struct tm_spec_error *err)
{
    if (strcmp(m->string, "flavor") == 0) {
        *have_flavor = true;
        return take_name(m, false, q->flavor, sizeof(q->flavor), err);
    }
    if (strcmp(m->string, "org") == 0)
        return take_name(m, true, q->org, sizeof(q->org), err);
    if (strcmp(m->string, "gpus") == 0) {
        *have_gpus = true;
        return take_number(m, false, &q->gpus, err);
    }
    if (strcmp(m->string, "borrowing_limit") == 0)
        return take_number(m, true, &q->borrowing_limit, err);
    if (strcmp(m->string, "lending_limit") == 0)
        return take_number(m, true, &q->lending_limit, err);
    if (strcmp(m->string, "weight") == 0)
        return take_number(m, true, &q->weight, err);
    char field[64];
    tm_spec_field_name(field, sizeof(field), "", m->string);
    return tm_spec_fail(err, field, "unrecognized field");
}

int tm_api_parse_quota(const char *body, size_t len, struct tm_api_quota_body *ret,
                       struct tm_spec_error *err)
{
    struct tm_api_quota_body q = {.gpus = NAN, .borrowing_limit = NAN, .lending_limit = NAN,
                                  .weight = NAN};
    bool have_flavor = false, have_gpus = false;
    cJSON *root = NULL;
    int r = tm_json_body_parse(body, len, &root, err);

    if (r < 0)
        return r;
    r = TM_EINVAL;
    if (!cJSON_IsObject(root)) {
        tm_spec_fail(err, "body", "must be a JSON object");
        goto out;
    }
    for (const cJSON *m = root->child; m; m = m->next) {
        for (const cJSON *k = root->child; k != m; k = k->next)
            if (strcmp(k->string, m->string) == 0) {
                char field[64];
                tm_spec_field_name(field, sizeof(field), "", m->string);
                tm_spec_fail(err, field, "given twice");
                goto out;
            }
        if (take_member(m, &q, &have_flavor, &have_gpus, err) < 0)
            goto out;
    }
    if (!have_gpus) {
        tm_spec_fail(err, "gpus", "required: the guaranteed GPUs");
        goto out;
    }
    *ret = q;
    r = 0;
out:
    cJSON_Delete(root);
    return r;
}
