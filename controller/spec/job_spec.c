/*
 * controller/spec/job_spec.c: see job_spec.h.  Pure: no I/O, no clock.
 */
#include "controller/spec/job_spec.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "controller/spec/image_ref.h"
#include "controller/spec/json_body.h"
#include "core/model.h"
#include "core/err.h"
#include "core/units.h"

/* The one place each message is written, so CLI and API say the same. */
#define MSG_TEAM "must be 1-63 letters, digits, '.', '_' or '-'"
#define MSG_GPUS "must be a whole number from 1 to 16"
#define MSG_MILLI "must be a share from 1 to 999 milli-GPU"
#define MSG_NODES "must be a whole number from 1 to 1024"
#define MSG_CPU "must be a non-negative integer up to 100000000"
#define MSG_MEM "must be a non-negative integer up to 1073741824"
#define MSG_CLASS "must be train, eval, preprocess, inference or batch"
#define MSG_PRIO "must be an integer from -1000 to 1000"
#define MSG_DUR "must be a positive duration such as 90s, 15m, 2h"
#define MSG_EST_S "must be a positive whole number of seconds up to 31536000"
#define MSG_DEADLINE_S "must be a positive whole number of seconds up to 315360000, or a duration such as 2h"
#define MSG_MODEL "must be GPU model names (letters, digits, '.', '_', '-') separated by '|'"
#define MSG_POOL "must be a pool name: 1-63 letters, digits, '.', '_' or '-'"

void tm_job_spec_init(struct tm_job_spec *spec)
{
    *spec = (struct tm_job_spec){
        .name = "",
        .command = "",
        .gpus = -1,
        .gpu_milli = -1,
        .nodes = 1,
        .klass = "train",
    };
}

void tm_job_spec_release(struct tm_job_spec *spec)
{
    if (spec->env_owned)
        cJSON_Delete(spec->env);
    spec->env = NULL;
    spec->env_owned = false;
}

static bool env_name_ok(const char *s)
{
    if (!((*s >= 'A' && *s <= 'Z') || (*s >= 'a' && *s <= 'z') || *s == '_'))
        return false;
    for (const char *p = s + 1; *p; p++)
        if (!((*p >= 'A' && *p <= 'Z') || (*p >= 'a' && *p <= 'z') || (*p >= '0' && *p <= '9') ||
              *p == '_'))
            return false;
    return strlen(s) <= 255;
}

/* Names a job may not set, and why.  Each steers something that is not
 * the job's own: the node agent's variables, the GPU share it sets, or the
 * NVIDIA container runtime, whose privileged hook reads NVIDIA_* from the
 * container's environment (NVIDIA_VISIBLE_DEVICES=all would hand the job
 * every GPU of the node).  Names that steer a shell, a loader or a runtime
 * client (PATH, LD_*, DOCKER_*, other CUDA_*) are not refused: the agent
 * gives them only to the job's own processes (under the job's own user, or
 * inside its container through an env file), never to its own processes
 * or to the runtime's client (docs/isolation.md). */
static const struct {
    const char *name;
    bool prefix;
    const char *why;
} env_refused_names[] = {
    {"TARMAC_", true, "set by the node agent itself: a job may not set it"},
    {"CUDA_VISIBLE_DEVICES", false, "set by the node agent itself: a job may not set it"},
    {"CUDA_MPS_", true, "steers the GPU share the node agent sets: a job may not set it"},
    {"NVIDIA_", true, "steers the NVIDIA container runtime on the host: a job may not set it"},
};

static const char *env_refused(const char *name)
{
    for (size_t i = 0; i < sizeof(env_refused_names) / sizeof(env_refused_names[0]); i++) {
        size_t n = strlen(env_refused_names[i].name);
        if (env_refused_names[i].prefix ? strncmp(name, env_refused_names[i].name, n) == 0
                                        : strcmp(name, env_refused_names[i].name) == 0)
            return env_refused_names[i].why;
    }
    return NULL;
}

/* The name echoed in a field: only a checked name, else "env". */
static int env_fail(struct tm_spec_error *err, const char *name, const char *msg)
{
    char field[300];

    if (name && env_name_ok(name)) {
        snprintf(field, sizeof(field), "env.%s", name);
        return tm_spec_fail(err, field, "%s", msg);
    }
    return tm_spec_fail(err, "env", "%s", msg);
}

int tm_job_spec_set_env(struct tm_job_spec *spec, cJSON *env, struct tm_spec_error *err)
{
    size_t n = 0, bytes = 0;

    if (!cJSON_IsObject(env))
        return tm_spec_fail(err, "env", "must be an object of string values");
    for (const cJSON *a = env->child; a; a = a->next) {
        const char *name = a->string ? a->string : "";
        const char *why;
        if (!env_name_ok(name))
            return env_fail(err, NULL, "names must match ^[A-Za-z_][A-Za-z0-9_]*$ (at most 255 bytes)");
        why = env_refused(name);
        if (why)
            return env_fail(err, name, why);
        if (!cJSON_IsString(a) || !a->valuestring)
            return env_fail(err, name, "must be a string");
        for (const cJSON *b = a->next; b; b = b->next)
            if (b->string && strcmp(b->string, name) == 0)
                return env_fail(err, name, "given more than once");
        if (++n > TM_JOB_ENV_MAX)
            return tm_spec_fail(err, "env", "at most %d entries", TM_JOB_ENV_MAX);
        bytes += strlen(name) + strlen(a->valuestring);
        if (bytes > TM_JOB_ENV_BYTES)
            return tm_spec_fail(err, "env", "at most %d bytes of names and values in all",
                                TM_JOB_ENV_BYTES);
    }
    if (spec->env_owned && spec->env != env)
        cJSON_Delete(spec->env);
    spec->env = env;
    spec->env_owned = false;
    return 0;
}

/* "NAME=VALUE" from the command line, added to the spec's own env. */
static int env_add_text(struct tm_job_spec *spec, const char *text, struct tm_spec_error *err)
{
    const char *eq = strchr(text, '=');
    char name[256];
    cJSON *env = spec->env_owned ? spec->env : NULL;
    bool fresh = false;
    int r;

    if (!eq || eq == text || (size_t)(eq - text) >= sizeof(name))
        return tm_spec_fail(err, "env", "must be NAME=VALUE");
    memcpy(name, text, (size_t)(eq - text));
    name[eq - text] = '\0';
    if (!env) {
        env = spec->env ? cJSON_Duplicate(spec->env, 1) : cJSON_CreateObject();
        fresh = true;
    }
    if (!env || !cJSON_AddStringToObject(env, name, eq + 1)) {
        if (fresh)
            cJSON_Delete(env);
        return tm_spec_fail(err, "env", "out of memory");
    }
    r = tm_job_spec_set_env(spec, env, err);
    if (r < 0) {
        if (fresh)
            cJSON_Delete(env);
        else
            cJSON_Delete(cJSON_DetachItemFromObjectCaseSensitive(env, name));
        return r;
    }
    spec->env_owned = true;
    return 0;
}

bool tm_job_spec_name_ok(const char *s)
{
    size_t n = strlen(s);

    if (n == 0 || n > 63)
        return false;
    for (size_t i = 0; i < n; i++) {
        char ch = s[i];
        bool ok = (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
                  (i > 0 && (ch == '.' || ch == '_' || ch == '-'));
        if (!ok)
            return false;
    }
    return true;
}

/* "A100" or "A100|H100": each alternative a name. */
static bool model_ok(const char *s)
{
    char part[64];
    size_t n = strlen(s);
    const char *p = s;

    if (n == 0 || n > TM_JOB_MODEL_MAX)
        return false;
    for (;;) {
        const char *bar = strchr(p, '|');
        size_t len = bar ? (size_t)(bar - p) : strlen(p);
        if (len == 0 || len >= sizeof(part))
            return false;
        memcpy(part, p, len);
        part[len] = '\0';
        if (!tm_job_spec_name_ok(part))
            return false;
        if (!bar)
            return true;
        p = bar + 1;
    }
}

static bool text_ok(const char *s, size_t max)
{
    return strlen(s) <= max;
}

static bool parse_i64(const char *s, int64_t min, int64_t max, int64_t *ret)
{
    char *end;
    long long v;

    errno = 0;
    v = strtoll(s, &end, 10);
    if (errno || end == s || *end || v < min || v > max)
        return false;
    *ret = v;
    return true;
}

static bool duration_ok(const char *s, int64_t max_ms, int64_t *ret_ms)
{
    int64_t ms;

    if (tm_duration_parse(s, &ms) < 0 || ms <= 0 || ms > max_ms)
        return false;
    *ret_ms = ms;
    return true;
}

int tm_job_spec_set_text(struct tm_job_spec *spec, const char *field, const char *text,
                         struct tm_spec_error *err)
{
    int64_t v;

    if (strcmp(field, "team") == 0) {
        if (!tm_job_spec_name_ok(text))
            return tm_spec_fail(err, field, MSG_TEAM);
        spec->team = text;
    } else if (strcmp(field, "name") == 0) {
        if (!text_ok(text, TM_JOB_NAME_MAX))
            return tm_spec_fail(err, field, "must be at most %d bytes", TM_JOB_NAME_MAX);
        spec->name = text;
    } else if (strcmp(field, "command") == 0) {
        if (!text_ok(text, TM_JOB_COMMAND_MAX))
            return tm_spec_fail(err, field, "must be at most %d bytes", TM_JOB_COMMAND_MAX);
        spec->command = text;
    } else if (strcmp(field, "image") == 0) {
        int ok = strlen(text) <= TM_JOB_IMAGE_MAX ? tm_image_ref_check(text) : 0;
        if (ok < 0)
            return tm_spec_fail_nomem(err);
        if (ok == 0)
            return tm_spec_fail(err, field,
                                "must be an image reference such as registry.example:5000/team/image:tag "
                                "or team/image@sha256:<hex> (ASCII, lower-case path, at most %d bytes)",
                                TM_JOB_IMAGE_MAX);
        spec->image = text;
    } else if (strcmp(field, "env") == 0) {
        return env_add_text(spec, text, err);
    } else if (strcmp(field, "gpus") == 0) {
        if (!parse_i64(text, 1, 16, &v))
            return tm_spec_fail(err, field, MSG_GPUS);
        spec->gpus = (int)v;
    } else if (strcmp(field, "gpu_milli") == 0) {
        if (!parse_i64(text, 1, 999, &v))
            return tm_spec_fail(err, field, MSG_MILLI);
        spec->gpu_milli = (int)v;
    } else if (strcmp(field, "nodes") == 0) {
        if (!parse_i64(text, 1, 1024, &v))
            return tm_spec_fail(err, field, MSG_NODES);
        spec->nodes = (int)v;
    } else if (strcmp(field, "cpu_milli") == 0) {
        if (!parse_i64(text, 0, TM_JOB_CPU_MILLI_MAX, &v))
            return tm_spec_fail(err, field, MSG_CPU);
        spec->cpu_milli = v;
    } else if (strcmp(field, "memory_mib") == 0) {
        if (!parse_i64(text, 0, TM_JOB_MEMORY_MIB_MAX, &v))
            return tm_spec_fail(err, field, MSG_MEM);
        spec->memory_mib = v;
    } else if (strcmp(field, "gpu_model") == 0) {
        if (!model_ok(text))
            return tm_spec_fail(err, field, MSG_MODEL);
        spec->gpu_model = text;
    } else if (strcmp(field, "pool") == 0) {
        if (!tm_job_spec_name_ok(text))
            return tm_spec_fail(err, field, MSG_POOL);
        spec->pool = text;
    } else if (strcmp(field, "class") == 0) {
        if (tm_job_class_parse(text) < 0)
            return tm_spec_fail(err, field, MSG_CLASS);
        spec->klass = text;
    } else if (strcmp(field, "priority") == 0) {
        if (!parse_i64(text, -1000, 1000, &v))
            return tm_spec_fail(err, field, MSG_PRIO);
        spec->priority = (int)v;
    } else if (strcmp(field, "runtime_estimate_s") == 0) {
        if (!duration_ok(text, (int64_t)TM_JOB_ESTIMATE_S_MAX * 1000, &spec->runtime_estimate_ms))
            return tm_spec_fail(err, field, MSG_DUR);
    } else if (strcmp(field, "sim_runtime") == 0) {
        if (!duration_ok(text, (int64_t)TM_JOB_ESTIMATE_S_MAX * 1000, &spec->sim_runtime_ms))
            return tm_spec_fail(err, field, MSG_DUR);
    } else if (strcmp(field, "deadline") == 0) {
        if (!duration_ok(text, (int64_t)TM_JOB_DEADLINE_S_MAX * 1000, &spec->deadline_ms))
            return tm_spec_fail(err, field, MSG_DUR);
    } else {
        return tm_spec_fail(err, field, "unrecognized field");
    }
    return 0;
}

int tm_job_spec_finish(struct tm_job_spec *spec, struct tm_spec_error *err)
{
    if (!spec->team)
        return tm_spec_fail(err, "team", "required");
    /* A container job's variables travel in an env file, one NAME=VALUE a
     * line, which docker and podman read without any quoting. */
    if (spec->image && spec->env)
        for (const cJSON *a = spec->env->child; a; a = a->next)
            if (cJSON_IsString(a) && a->valuestring && strpbrk(a->valuestring, "\r\n"))
                return env_fail(err, a->string, "a container job's value cannot hold a line break");
    if (spec->gpus < 0 && spec->gpu_milli < 0)
        return tm_spec_fail(err, "gpus", "gpus or gpu_milli: one is required");
    /* Even gpus with gpu_milli 1000, which a job read back shows: two ways
     * to say one thing invite the mistake of a share that means nothing. */
    if (spec->gpus >= 0 && spec->gpu_milli >= 0)
        return tm_spec_fail(err, "gpu_milli", "gpus and gpu_milli: give one, not both");
    if (spec->gpus <= 0 && spec->nodes > 1)
        return tm_spec_fail(err, "nodes", "a fractional-GPU job runs on one node");
    /* The stored pair: whole GPUs carry a full share each. */
    if (spec->gpus > 0) {
        spec->gpu_milli = 1000;
    } else {
        spec->gpus = 0;
    }
    return 0;
}

/* ---- JSON ---------------------------------------------------------------- */

/* An integer-valued JSON number within [min, max].  cJSON keeps numbers as
 * doubles; refuse fractions, NaN and magnitudes a double cannot hold
 * exactly rather than rounding them. */
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

enum json_field {
    F_TEAM, F_NAME, F_COMMAND, F_GPUS, F_MILLI, F_NODES, F_CPU, F_MEM, F_MODEL, F_POOL,
    F_CLASS, F_PRIO, F_PRE, F_CKPT, F_EST, F_DEADLINE, F_ENV, F_IMAGE, F_MAX,
};

static const char *const json_names[F_MAX] = {
    [F_TEAM] = "team", [F_NAME] = "name", [F_COMMAND] = "command", [F_GPUS] = "gpus",
    [F_MILLI] = "gpu_milli", [F_NODES] = "nodes", [F_CPU] = "cpu_milli", [F_MEM] = "memory_mib",
    [F_MODEL] = "gpu_model", [F_POOL] = "pool", [F_CLASS] = "class", [F_PRIO] = "priority",
    [F_PRE] = "preemptible", [F_CKPT] = "checkpointable", [F_EST] = "runtime_estimate_s",
    [F_DEADLINE] = "deadline", [F_ENV] = "env", [F_IMAGE] = "image",
};

static int json_field(struct tm_job_spec *spec, enum json_field f, const cJSON *v,
                      struct tm_spec_error *err)
{
    const char *name = json_names[f];
    int64_t n;

    /* null stands for "not given" where the field is optional. */
    if (cJSON_IsNull(v) && (f == F_MODEL || f == F_POOL || f == F_DEADLINE || f == F_EST ||
                            f == F_IMAGE || f == F_ENV))
        return 0;
    switch (f) {
    case F_ENV:
        return tm_job_spec_set_env(spec, (cJSON *)v, err);
    case F_IMAGE:
    case F_TEAM:
    case F_NAME:
    case F_COMMAND:
    case F_MODEL:
    case F_POOL:
    case F_CLASS:
        if (!cJSON_IsString(v) || !v->valuestring)
            return tm_spec_fail(err, name, "must be a string");
        return tm_job_spec_set_text(spec, name, v->valuestring, err);
    case F_PRE:
    case F_CKPT:
        if (!cJSON_IsBool(v))
            return tm_spec_fail(err, name, "must be true or false");
        if (f == F_PRE)
            spec->preemptible = cJSON_IsTrue(v);
        else
            spec->checkpointable = cJSON_IsTrue(v);
        return 0;
    case F_GPUS:
        if (!json_int(v, 1, 16, &n))
            return tm_spec_fail(err, name, MSG_GPUS);
        spec->gpus = (int)n;
        return 0;
    case F_MILLI:
        /* 1000 is what whole-GPU jobs store; accept it back from a client
         * that echoes a job it read, but only together with gpus. */
        if (!json_int(v, 1, 1000, &n))
            return tm_spec_fail(err, name, MSG_MILLI);
        spec->gpu_milli = (int)n;
        return 0;
    case F_NODES:
        if (!json_int(v, 1, 1024, &n))
            return tm_spec_fail(err, name, MSG_NODES);
        spec->nodes = (int)n;
        return 0;
    case F_CPU:
        if (!json_int(v, 0, TM_JOB_CPU_MILLI_MAX, &n))
            return tm_spec_fail(err, name, MSG_CPU);
        spec->cpu_milli = n;
        return 0;
    case F_MEM:
        if (!json_int(v, 0, TM_JOB_MEMORY_MIB_MAX, &n))
            return tm_spec_fail(err, name, MSG_MEM);
        spec->memory_mib = n;
        return 0;
    case F_PRIO:
        if (!json_int(v, -1000, 1000, &n))
            return tm_spec_fail(err, name, MSG_PRIO);
        spec->priority = (int)n;
        return 0;
    case F_EST:
        if (!json_int(v, 1, TM_JOB_ESTIMATE_S_MAX, &n))
            return tm_spec_fail(err, name, MSG_EST_S);
        spec->runtime_estimate_ms = n * 1000;
        return 0;
    case F_DEADLINE:
        if (cJSON_IsString(v) && v->valuestring) {
            if (!duration_ok(v->valuestring, (int64_t)TM_JOB_DEADLINE_S_MAX * 1000,
                             &spec->deadline_ms))
                return tm_spec_fail(err, name, MSG_DEADLINE_S);
            return 0;
        }
        if (!json_int(v, 1, TM_JOB_DEADLINE_S_MAX, &n))
            return tm_spec_fail(err, name, MSG_DEADLINE_S);
        spec->deadline_ms = n * 1000;
        return 0;
    case F_MAX:
        break;
    }
    return tm_spec_fail(err, name, "unrecognized field");
}

int tm_job_spec_parse_json(const char *body, size_t len, struct tm_job_spec *spec,
                           cJSON **ret_root, struct tm_spec_error *err)
{
    struct tm_job_spec s;
    cJSON *root = NULL;
    unsigned seen = 0;
    int r = TM_EINVAL;

    *ret_root = NULL;
    tm_job_spec_init(&s);
    if (!body || len == 0) {
        tm_spec_fail(err, "body", "a JSON object is required");
        goto out;
    }
    if ((r = tm_json_body_parse(body, len, &root, err)) < 0)
        goto out;
    r = TM_EINVAL;
    if (!cJSON_IsObject(root)) {
        tm_spec_fail(err, "body", "must be a JSON object");
        goto out;
    }
    for (const cJSON *it = root->child; it; it = it->next) {
        enum json_field f = F_MAX;
        for (int i = 0; i < F_MAX; i++) {
            if (it->string && strcmp(it->string, json_names[i]) == 0) {
                f = (enum json_field)i;
                break;
            }
        }
        if (f == F_MAX) {
            /* The field name comes from the client: keep it printable. */
            char name[48];
            size_t k = 0;
            for (const char *p = it->string ? it->string : ""; *p && k < sizeof(name) - 1; p++)
                name[k++] = (*p >= ' ' && *p < 127) ? *p : '?';
            name[k] = '\0';
            tm_spec_fail(err, k ? name : "\"\"", "unrecognized field");
            goto out;
        }
        /* cJSON keeps both copies of a repeated key; which one counts would
         * be a guess, so refuse it. */
        if (seen & (1u << f)) {
            tm_spec_fail(err, json_names[f], "given more than once");
            goto out;
        }
        seen |= 1u << f;
        r = json_field(&s, f, it, err);
        if (r < 0)
            goto out;
        r = TM_EINVAL;
    }
    /* Echoed gpu_milli 1000 is only meaningful with whole GPUs. */
    if (s.gpu_milli == 1000 && s.gpus < 0) {
        tm_spec_fail(err, "gpu_milli", MSG_MILLI);
        goto out;
    }
    r = tm_job_spec_finish(&s, err);
    if (r < 0)
        goto out;
    *spec = s;
    *ret_root = root;
    root = NULL;
out:
    cJSON_Delete(root);
    return r;
}
