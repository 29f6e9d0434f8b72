/*
 * controller/agent/answer.c: parsing the controller's answers (answer.h).
 * Pure: cJSON and core/ only.  Every cJSON read is type-checked.
 */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "controller/agent/answer.h"
#include "core/address.h"
#include "core/err.h"

static int fail(char *err, size_t errlen, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

static int fail(char *err, size_t errlen, const char *fmt, ...)
{
    va_list ap;

    if (err && errlen) {
        va_start(ap, fmt);
        vsnprintf(err, errlen, fmt, ap);
        va_end(ap);
    }
    return TM_EBADREPLY;
}

/* An integral JSON number within [lo, hi]. */
static bool int_in(const cJSON *v, double lo, double hi, int64_t *ret)
{
    double d;

    if (!cJSON_IsNumber(v))
        return false;
    d = v->valuedouble;
    if (!isfinite(d) || d != floor(d) || d < lo || d > hi)
        return false;
    *ret = (int64_t)d;
    return true;
}

static char *dup_str(const char *s)
{
    size_t n = strlen(s);
    char *p = malloc(n + 1);

    if (p)
        memcpy(p, s, n + 1);
    return p;
}

static bool env_name_ok(const char *s)
{
    if (!((*s >= 'A' && *s <= 'Z') || (*s >= 'a' && *s <= 'z') || *s == '_'))
        return false;
    for (s++; *s; s++)
        if (!((*s >= 'A' && *s <= 'Z') || (*s >= 'a' && *s <= 'z') || (*s >= '0' && *s <= '9') ||
              *s == '_'))
            return false;
    return true;
}

static void assignment_release(struct tm_agent_assignment *a)
{
    free(a->command);
    for (size_t i = 0; i < a->env_count; i++) {
        free(a->env_names[i]);
        free(a->env_values[i]);
    }
    free(a->env_names);
    free(a->env_values);
    free(a->image);
    free(a->checkpoint_dir);
    free(a->rdv.addrs);
    free(a->rdv.wait);
    memset(a, 0, sizeof(*a));
}

/* An optional string or null; *ret stays NULL for null or absent. */
static int opt_string(const cJSON *obj, const char *key, size_t i, char **ret, char *err,
                      size_t errlen)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);

    if (!v || cJSON_IsNull(v))
        return 0;
    if (!cJSON_IsString(v) || !v->valuestring)
        return fail(err, errlen, "assignments[%zu].%s: must be a string or null", i, key);
    if (strlen(v->valuestring) > 4096)
        return fail(err, errlen, "assignments[%zu].%s: longer than 4096 bytes", i, key);
    *ret = dup_str(v->valuestring);
    return *ret ? 0 : TM_ENOMEM;
}

static int parse_env(const cJSON *env, size_t i, struct tm_agent_assignment *a, char *err,
                     size_t errlen)
{
    const cJSON *e;
    int n;

    if (!env || cJSON_IsNull(env))
        return 0;
    if (!cJSON_IsObject(env))
        return fail(err, errlen, "assignments[%zu].env: must be an object of strings", i);
    n = cJSON_GetArraySize(env);
    if (n > TM_AGENT_MAX_ENV)
        return fail(err, errlen, "assignments[%zu].env: more than %d entries", i, TM_AGENT_MAX_ENV);
    if (n == 0)
        return 0;
    a->env_names = calloc((size_t)n, sizeof(char *));
    a->env_values = calloc((size_t)n, sizeof(char *));
    if (!a->env_names || !a->env_values)
        return TM_ENOMEM;
    cJSON_ArrayForEach(e, env)
    {
        if (!e->string || !env_name_ok(e->string))
            return fail(err, errlen, "assignments[%zu].env: a name is not a valid variable name", i);
        if (strncmp(e->string, "TARMAC_", 7) == 0 || strcmp(e->string, "CUDA_VISIBLE_DEVICES") == 0)
            return fail(err, errlen, "assignments[%zu].env.%.64s: reserved for the agent", i, e->string);
        if (!cJSON_IsString(e) || !e->valuestring)
            return fail(err, errlen, "assignments[%zu].env.%.64s: must be a string", i, e->string);
        a->env_names[a->env_count] = dup_str(e->string);
        a->env_values[a->env_count] = dup_str(e->valuestring);
        a->env_count++;
        if (!a->env_names[a->env_count - 1] || !a->env_values[a->env_count - 1])
            return TM_ENOMEM;
    }
    return 0;
}

static int parse_gpus(const cJSON *g, size_t i, struct tm_agent_assignment *a, char *err,
                      size_t errlen)
{
    const cJSON *e;
    size_t k = 0;

    if (!g || cJSON_IsNull(g))
        return 0;
    if (!cJSON_IsArray(g))
        return fail(err, errlen, "assignments[%zu].gpu_indices: must be an array", i);
    if (cJSON_GetArraySize(g) > TM_AGENT_MAX_GPUS)
        return fail(err, errlen, "assignments[%zu].gpu_indices: more than %d entries", i,
                    TM_AGENT_MAX_GPUS);
    cJSON_ArrayForEach(e, g)
    {
        int64_t v;
        if (!int_in(e, 0, TM_AGENT_MAX_GPUS - 1, &v))
            return fail(err, errlen, "assignments[%zu].gpu_indices[%zu]: must be an integer 0..%d", i,
                        k, TM_AGENT_MAX_GPUS - 1);
        for (size_t j = 0; j < k; j++)
            if (a->gpu_indices[j] == (int)v)
                return fail(err, errlen, "assignments[%zu].gpu_indices[%zu]: repeated", i, k);
        a->gpu_indices[k++] = (int)v;
    }
    a->gpu_count = k;
    return 0;
}

static int opt_int(const cJSON *obj, const char *key, size_t i, double hi, int64_t *ret, char *err,
                   size_t errlen)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);

    if (!v || cJSON_IsNull(v))
        return 0;
    if (!int_in(v, 0, hi, ret))
        return fail(err, errlen, "assignments[%zu].%s: must be an integer 0..%.0f", i, key, hi);
    return 0;
}

/* The assignment's rendezvous (answer.h); absent or null: none. */
static int parse_rendezvous(const cJSON *o, size_t i, struct tm_agent_rendezvous *rdv, char *err,
                            size_t errlen)
{
    const cJSON *v, *e;
    int64_t rank, nodes, gpus, port = 0;
    size_t k = 0;

    if (!o || cJSON_IsNull(o))
        return 0;
    if (!cJSON_IsObject(o))
        return fail(err, errlen, "assignments[%zu].rendezvous: must be an object", i);
    if (!int_in(cJSON_GetObjectItemCaseSensitive(o, "nodes"), 1, TM_AGENT_MAX_NODES, &nodes))
        return fail(err, errlen, "assignments[%zu].rendezvous.nodes: must be an integer 1..%d", i,
                    TM_AGENT_MAX_NODES);
    if (!int_in(cJSON_GetObjectItemCaseSensitive(o, "rank"), 0, (double)nodes - 1, &rank))
        return fail(err, errlen, "assignments[%zu].rendezvous.rank: must be an integer 0..%lld", i,
                    (long long)nodes - 1);
    if (!int_in(cJSON_GetObjectItemCaseSensitive(o, "gpus_per_node"), 0, TM_AGENT_MAX_GPUS, &gpus))
        return fail(err, errlen, "assignments[%zu].rendezvous.gpus_per_node: must be an integer 0..%d", i,
                    TM_AGENT_MAX_GPUS);
    v = cJSON_GetObjectItemCaseSensitive(o, "wait");
    if (v && !cJSON_IsNull(v)) {
        if (!cJSON_IsString(v) || !v->valuestring || strlen(v->valuestring) > 1024)
            return fail(err, errlen, "assignments[%zu].rendezvous.wait: must be a string of at most 1024 bytes or null",
                        i);
        rdv->wait = dup_str(v->valuestring);
        if (!rdv->wait)
            return TM_ENOMEM;
    }
    v = cJSON_GetObjectItemCaseSensitive(o, "barrier");
    if (v && !cJSON_IsNull(v) && !cJSON_IsBool(v))
        return fail(err, errlen, "assignments[%zu].rendezvous.barrier: must be true, false or null", i);
    if (cJSON_IsTrue(v) && !rdv->wait)
        return fail(err, errlen, "assignments[%zu].rendezvous.barrier: true needs a wait", i);
    rdv->barrier = cJSON_IsTrue(v);
    v = cJSON_GetObjectItemCaseSensitive(o, "start_in_ms");
    if (v && !cJSON_IsNull(v)) {
        int64_t in;
        if (!int_in(v, 0, 60000, &in))
            return fail(err, errlen, "assignments[%zu].rendezvous.start_in_ms: must be an integer 0..60000", i);
        rdv->start_in_ms = (int)in;
    }
    v = cJSON_GetObjectItemCaseSensitive(o, "master_port");
    if (v && !cJSON_IsNull(v) && !int_in(v, 1, 65535, &port))
        return fail(err, errlen, "assignments[%zu].rendezvous.master_port: must be an integer 1..65535", i);
    if (!port && !rdv->wait)
        return fail(err, errlen, "assignments[%zu].rendezvous.master_port: required unless wait is given", i);
    v = cJSON_GetObjectItemCaseSensitive(o, "addrs");
    if (!cJSON_IsArray(v) || cJSON_GetArraySize(v) != nodes)
        return fail(err, errlen, "assignments[%zu].rendezvous.addrs: must be an array of %lld addresses", i,
                    (long long)nodes);
    rdv->addrs = calloc((size_t)nodes, sizeof(*rdv->addrs));
    if (!rdv->addrs)
        return TM_ENOMEM;
    cJSON_ArrayForEach(e, v)
    {
        if (!cJSON_IsString(e) || !tm_ip_address_ok(e->valuestring))
            return fail(err, errlen, "assignments[%zu].rendezvous.addrs[%zu]: must be an IP address", i, k);
        snprintf(rdv->addrs[k++], TM_AGENT_ADDR_MAX, "%s", e->valuestring);
    }
    rdv->given = true;
    rdv->rank = (int)rank;
    rdv->nodes = (int)nodes;
    rdv->gpus_per_node = (int)gpus;
    rdv->master_port = (int)port;
    return 0;
}

static int parse_assignment(const cJSON *o, size_t i, struct tm_agent_assignment *a, char *err,
                            size_t errlen)
{
    const cJSON *v;
    int64_t milli = 0;
    int r;

    if (!cJSON_IsObject(o))
        return fail(err, errlen, "assignments[%zu]: must be an object", i);
    if (!int_in(cJSON_GetObjectItemCaseSensitive(o, "job_id"), 1, 9007199254740991.0, &a->job_id))
        return fail(err, errlen, "assignments[%zu].job_id: must be a positive integer", i);
    if (!int_in(cJSON_GetObjectItemCaseSensitive(o, "attempt"), 0, 2147483647.0, &a->attempt))
        return fail(err, errlen, "assignments[%zu].attempt: must be a non-negative integer", i);
    v = cJSON_GetObjectItemCaseSensitive(o, "command");
    if (!cJSON_IsString(v) || !v->valuestring || !v->valuestring[0])
        return fail(err, errlen, "assignments[%zu].command: must be a non-empty string", i);
    if (strlen(v->valuestring) > TM_AGENT_MAX_COMMAND)
        return fail(err, errlen, "assignments[%zu].command: longer than %d bytes", i,
                    TM_AGENT_MAX_COMMAND);
    a->command = dup_str(v->valuestring);
    if (!a->command)
        return TM_ENOMEM;
    r = parse_env(cJSON_GetObjectItemCaseSensitive(o, "env"), i, a, err, errlen);
    if (r == 0)
        r = opt_string(o, "image", i, &a->image, err, errlen);
    if (r == 0)
        r = opt_string(o, "checkpoint_dir", i, &a->checkpoint_dir, err, errlen);
    if (r == 0)
        r = parse_gpus(cJSON_GetObjectItemCaseSensitive(o, "gpu_indices"), i, a, err, errlen);
    if (r == 0)
        r = opt_int(o, "gpu_milli", i, 1000.0 * TM_AGENT_MAX_GPUS, &milli, err, errlen);
    if (r == 0)
        r = opt_int(o, "cpu_milli", i, 1e9, &a->cpu_milli, err, errlen);
    if (r == 0)
        r = opt_int(o, "memory_mib", i, 1e12, &a->memory_mib, err, errlen);
    if (r == 0)
        r = parse_rendezvous(cJSON_GetObjectItemCaseSensitive(o, "rendezvous"), i, &a->rdv, err, errlen);
    if (r < 0)
        return r;
    a->gpu_milli = (int)milli;
    v = cJSON_GetObjectItemCaseSensitive(o, "checkpointable");
    if (v && !cJSON_IsNull(v)) {
        if (!cJSON_IsBool(v))
            return fail(err, errlen, "assignments[%zu].checkpointable: must be true or false", i);
        a->checkpointable = cJSON_IsTrue(v);
    }
    return 0;
}

/* "stops" (answer.h); absent or null: none. */
static int parse_stops(const cJSON *list, struct tm_agent_answer *ans, char *err, size_t errlen)
{
    const cJSON *e;
    size_t i = 0;
    int n;

    if (!list || cJSON_IsNull(list))
        return 0;
    if (!cJSON_IsArray(list))
        return fail(err, errlen, "stops: must be an array");
    n = cJSON_GetArraySize(list);
    if (n > TM_AGENT_MAX_ASSIGNMENTS)
        return fail(err, errlen, "stops: more than %d entries", TM_AGENT_MAX_ASSIGNMENTS);
    if (n == 0)
        return 0;
    ans->stops = calloc((size_t)n, sizeof(*ans->stops));
    if (!ans->stops)
        return TM_ENOMEM;
    cJSON_ArrayForEach(e, list)
    {
        struct tm_agent_stop *s = &ans->stops[i];
        if (!cJSON_IsObject(e))
            return fail(err, errlen, "stops[%zu]: must be an object", i);
        if (!int_in(cJSON_GetObjectItemCaseSensitive(e, "job_id"), 1, 9007199254740991.0, &s->job_id))
            return fail(err, errlen, "stops[%zu].job_id: must be a positive integer", i);
        if (!int_in(cJSON_GetObjectItemCaseSensitive(e, "attempt"), 0, 2147483647.0, &s->attempt))
            return fail(err, errlen, "stops[%zu].attempt: must be a non-negative integer", i);
        if (!int_in(cJSON_GetObjectItemCaseSensitive(e, "stop_in_ms"), 0, TM_AGENT_MAX_STOP_IN_MS,
                    &s->stop_in_ms))
            return fail(err, errlen, "stops[%zu].stop_in_ms: must be an integer 0..%d", i,
                        TM_AGENT_MAX_STOP_IN_MS);
        ans->nstops = ++i;
    }
    return 0;
}

static int parse_node(const cJSON *n, struct tm_agent_answer *ans, char *err, size_t errlen)
{
    const cJSON *v;

    if (!n || cJSON_IsNull(n))
        return 0;
    if (!cJSON_IsObject(n))
        return fail(err, errlen, "node: must be an object");
    ans->has_node = true;
    v = cJSON_GetObjectItemCaseSensitive(n, "id");
    if (v && !int_in(v, 1, 9007199254740991.0, &ans->node_id))
        return fail(err, errlen, "node.id: must be a positive integer");
    v = cJSON_GetObjectItemCaseSensitive(n, "state");
    if (v) {
        if (!cJSON_IsString(v) || !v->valuestring || strlen(v->valuestring) >= sizeof(ans->node_state))
            return fail(err, errlen, "node.state: must be a short string");
        memcpy(ans->node_state, v->valuestring, strlen(v->valuestring) + 1);
    }
    v = cJSON_GetObjectItemCaseSensitive(n, "draining");
    if (v) {
        if (!cJSON_IsBool(v))
            return fail(err, errlen, "node.draining: must be true or false");
        ans->draining = cJSON_IsTrue(v);
    }
    return 0;
}

int tm_agent_answer_parse(const char *body, size_t len, struct tm_agent_answer *ret, char *err,
                          size_t errlen)
{
    struct tm_agent_answer ans = {0};
    cJSON *root = NULL;
    const cJSON *list, *e;
    size_t i = 0;
    int r;

    if (err && errlen)
        err[0] = '\0';
    if (!body) {
        r = fail(err, errlen, "answer: empty");
        goto out;
    }
    root = cJSON_ParseWithLength(body, len);
    if (!root || !cJSON_IsObject(root)) {
        r = fail(err, errlen, "answer: not a JSON object");
        goto out;
    }
    r = parse_node(cJSON_GetObjectItemCaseSensitive(root, "node"), &ans, err, errlen);
    if (r < 0)
        goto out;
    r = parse_stops(cJSON_GetObjectItemCaseSensitive(root, "stops"), &ans, err, errlen);
    if (r < 0)
        goto out;
    list = cJSON_GetObjectItemCaseSensitive(root, "assignments");
    if (list && !cJSON_IsNull(list)) {
        int n;
        if (!cJSON_IsArray(list)) {
            r = fail(err, errlen, "assignments: must be an array");
            goto out;
        }
        n = cJSON_GetArraySize(list);
        if (n > TM_AGENT_MAX_ASSIGNMENTS) {
            r = fail(err, errlen, "assignments: more than %d entries", TM_AGENT_MAX_ASSIGNMENTS);
            goto out;
        }
        if (n > 0) {
            ans.assignments = calloc((size_t)n, sizeof(*ans.assignments));
            if (!ans.assignments) {
                r = TM_ENOMEM;
                goto out;
            }
        }
        cJSON_ArrayForEach(e, list)
        {
            ans.count = i + 1; /* so release frees a half-parsed entry */
            r = parse_assignment(e, i, &ans.assignments[i], err, errlen);
            if (r < 0)
                goto out;
            for (size_t j = 0; j < i; j++)
                if (ans.assignments[j].job_id == ans.assignments[i].job_id) {
                    r = fail(err, errlen, "assignments[%zu].job_id: job %lld listed twice", i,
                             (long long)ans.assignments[i].job_id);
                    goto out;
                }
            i++;
        }
    }
    *ret = ans;
    ans = (struct tm_agent_answer){0};
    r = 0;
out:
    tm_agent_answer_release(&ans);
    cJSON_Delete(root);
    return r;
}

void tm_agent_answer_release(struct tm_agent_answer *a)
{
    if (!a)
        return;
    for (size_t i = 0; i < a->count; i++)
        assignment_release(&a->assignments[i]);
    free(a->assignments);
    free(a->stops);
    memset(a, 0, sizeof(*a));
}

long tm_agent_answer_find(const struct tm_agent_answer *a, int64_t job_id, int64_t attempt)
{
    for (size_t i = 0; i < a->count; i++)
        if (a->assignments[i].job_id == job_id && a->assignments[i].attempt == attempt)
            return (long)i;
    return -1;
}

const struct tm_agent_stop *tm_agent_answer_stop(const struct tm_agent_answer *a, int64_t job_id,
                                                 int64_t attempt)
{
    for (size_t i = 0; i < a->nstops; i++)
        if (a->stops[i].job_id == job_id && a->stops[i].attempt == attempt)
            return &a->stops[i];
    return NULL;
}

int tm_agent_enroll_parse(const char *body, size_t len, int64_t node_id, char **ret_token,
                          char *err, size_t errlen)
{
    cJSON *root = body ? cJSON_ParseWithLength(body, len) : NULL;
    const cJSON *tok, *id;
    int64_t got;
    int r = 0;

    if (!root || !cJSON_IsObject(root)) {
        r = fail(err, errlen, "enroll answer: not a JSON object");
        goto out;
    }
    id = cJSON_GetObjectItemCaseSensitive(root, "node_id");
    if (id && (!int_in(id, 1, 9007199254740991.0, &got) || got != node_id)) {
        r = fail(err, errlen, "enroll answer: node_id: not this node's id");
        goto out;
    }
    tok = cJSON_GetObjectItemCaseSensitive(root, "token");
    if (!cJSON_IsString(tok) || !tok->valuestring || !tok->valuestring[0] ||
        strlen(tok->valuestring) > 512 || strpbrk(tok->valuestring, "\r\n")) {
        r = fail(err, errlen, "enroll answer: token: must be a non-empty one-line string");
        goto out;
    }
    *ret_token = dup_str(tok->valuestring);
    if (!*ret_token)
        r = TM_ENOMEM;
    /* cJSON's copy of the token goes with the tree; wipe it first. */
    memset(tok->valuestring, 0, strlen(tok->valuestring));
out:
    cJSON_Delete(root);
    return r;
}
