/*
 * controller/agent/job_env.c: a job's environment and command (job_env.h).
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "controller/agent/job_env.h"
#include "core/err.h"

const char tm_agent_wrapper_script[] =
    "trap : HUP INT TERM QUIT USR1 USR2; /bin/sh -c \"$1\"; s=$?; "
    "printf '%s\\n' \"$s\" > \"$2.tmp\" && mv -f \"$2.tmp\" \"$2\"; exit \"$s\"";

void tm_strv_free(char **v)
{
    if (!v)
        return;
    for (char **p = v; *p; p++)
        free(*p);
    free(v);
}

struct strv {
    char **v;
    size_t n, cap;
    bool oom;
};

static void strv_push(struct strv *s, char *str)
{
    if (!str) {
        s->oom = true;
        return;
    }
    if (s->n + 2 > s->cap) {
        size_t cap = s->cap ? s->cap * 2 : 64;
        char **nv = realloc(s->v, cap * sizeof(char *));
        if (!nv) {
            free(str);
            s->oom = true;
            return;
        }
        s->v = nv;
        s->cap = cap;
    }
    s->v[s->n++] = str;
    s->v[s->n] = NULL;
}

static char *kv(const char *k, const char *v)
{
    size_t n = strlen(k) + strlen(v) + 2;
    char *p = malloc(n);

    if (p)
        snprintf(p, n, "%s=%s", k, v);
    return p;
}

static bool reserved(const char *entry)
{
    return strncmp(entry, "TARMAC_", 7) == 0 || strncmp(entry, "CUDA_VISIBLE_DEVICES=", 21) == 0 ||
           strncmp(entry, "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE=", 34) == 0 ||
           strncmp(entry, "MASTER_ADDR=", 12) == 0 || strncmp(entry, "MASTER_PORT=", 12) == 0;
}

/* Whether the job's env names the variable of a base entry "K=V". */
static bool overridden(const char *entry, const struct tm_agent_assignment *a)
{
    const char *eq = strchr(entry, '=');
    size_t n = eq ? (size_t)(eq - entry) : strlen(entry);

    for (size_t i = 0; i < a->env_count; i++)
        if (strlen(a->env_names[i]) == n && strncmp(entry, a->env_names[i], n) == 0)
            return true;
    return false;
}

void tm_agent_gpu_list(const struct tm_agent_assignment *a, const struct tm_gpu_info *gpus, int ngpus,
                       char *out, size_t outlen)
{
    size_t used = 0;

    if (outlen)
        out[0] = '\0';
    for (size_t i = 0; i < a->gpu_count; i++) {
        const char *uuid = NULL;
        char num[16];
        int w;

        for (int j = 0; j < ngpus; j++)
            if (gpus[j].index == a->gpu_indices[i])
                uuid = gpus[j].uuid;
        if (!uuid) {
            snprintf(num, sizeof(num), "%d", a->gpu_indices[i]);
            uuid = num;
        }
        w = snprintf(out + used, outlen - used, "%s%s", i ? "," : "", uuid);
        if (w < 0 || (size_t)w >= outlen - used)
            return; /* out is sized for 64 UUIDs; cannot happen */
        used += (size_t)w;
    }
}

/* The addresses of a's nodes in rank order, comma-separated, into a heap
 * string. */
static char *addr_list(const struct tm_agent_rendezvous *r)
{
    size_t n = 1, used = 0;
    char *out;

    for (int i = 0; i < r->nodes; i++)
        n += strlen(r->addrs[i]) + 1;
    out = malloc(n);
    if (!out)
        return NULL;
    out[0] = '\0';
    for (int i = 0; i < r->nodes; i++)
        used += (size_t)snprintf(out + used, n - used, "%s%s", i ? "," : "", r->addrs[i]);
    return out;
}

static bool job_names(const struct tm_agent_assignment *a, const char *name)
{
    for (size_t i = 0; i < a->env_count; i++)
        if (strcmp(a->env_names[i], name) == 0)
            return true;
    return false;
}

/* The multi-node variables (job_env.h); MASTER_ADDR and MASTER_PORT are
 * PyTorch's env:// names for the same two values. */
static void rendezvous_vars(struct strv *s, const struct tm_agent_assignment *a)
{
    const struct tm_agent_rendezvous *r = &a->rdv;
    char num[32], *list;

    if (!r->given || !r->master_port)
        return;
    snprintf(num, sizeof(num), "%d", r->rank);
    strv_push(s, kv("TARMAC_NODE_RANK", num));
    snprintf(num, sizeof(num), "%d", r->nodes);
    strv_push(s, kv("TARMAC_NUM_NODES", num));
    snprintf(num, sizeof(num), "%d", r->gpus_per_node);
    strv_push(s, kv("TARMAC_GPUS_PER_NODE", num));
    list = addr_list(r);
    if (!list) {
        s->oom = true;
        return;
    }
    strv_push(s, kv("TARMAC_NODE_ADDRS", list));
    free(list);
    strv_push(s, kv("TARMAC_MASTER_ADDR", r->addrs[0]));
    snprintf(num, sizeof(num), "%d", r->master_port);
    strv_push(s, kv("TARMAC_MASTER_PORT", num));
    if (a->hostfile)
        strv_push(s, kv("TARMAC_HOSTFILE", a->hostfile));
    /* a job that names its own keeps them (its env comes first and wins) */
    if (!job_names(a, "MASTER_ADDR"))
        strv_push(s, kv("MASTER_ADDR", r->addrs[0]));
    if (!job_names(a, "MASTER_PORT"))
        strv_push(s, kv("MASTER_PORT", num));
}

int tm_agent_hostfile_text(const struct tm_agent_rendezvous *r, char **ret, size_t *ret_len)
{
    size_t cap = 1, off = 0;
    char *text;

    if (!r->given || r->nodes < 1)
        return TM_EINVAL;
    for (int i = 0; i < r->nodes; i++)
        cap += strlen(r->addrs[i]) + 32;
    text = malloc(cap);
    if (!text)
        return TM_ENOMEM;
    for (int i = 0; i < r->nodes; i++)
        off += (size_t)snprintf(text + off, cap - off, "%s slots=%d\n", r->addrs[i], r->gpus_per_node);
    *ret = text;
    *ret_len = off;
    return 0;
}

/* The job's own variables, then the ones the agent sets, last so they win
 * over the base: one line each, and the same list goes to a host job's
 * environment and to a container job's env file. */
static void job_vars(struct strv *s, const struct tm_agent_assignment *a, const struct tm_gpu_info *gpus,
                     int ngpus)
{
    char list[TM_AGENT_MAX_GPUS * 100];
    char num[32];

    for (size_t i = 0; i < a->env_count; i++)
        strv_push(s, kv(a->env_names[i], a->env_values[i]));
    tm_agent_gpu_list(a, gpus, ngpus, list, sizeof(list));
    strv_push(s, kv("CUDA_VISIBLE_DEVICES", list));
    snprintf(num, sizeof(num), "%lld", (long long)a->job_id);
    strv_push(s, kv("TARMAC_JOB_ID", num));
    snprintf(num, sizeof(num), "%lld", (long long)a->attempt);
    strv_push(s, kv("TARMAC_ATTEMPT", num));
    if (a->checkpoint_dir)
        strv_push(s, kv("TARMAC_CHECKPOINT_DIR", a->checkpoint_dir));
    if (a->checkpoint_dir && a->resume_dir)
        strv_push(s, kv("TARMAC_RESUME_DIR", a->resume_dir));
    rendezvous_vars(s, a);
    if (a->gpu_count == 1 && a->gpu_milli > 0 && a->gpu_milli < 1000) {
        int pct = a->gpu_milli / 10;
        snprintf(num, sizeof(num), "%d", a->gpu_milli);
        strv_push(s, kv("TARMAC_GPU_MILLI", num));
        snprintf(num, sizeof(num), "%d", pct < 1 ? 1 : pct);
        strv_push(s, kv("CUDA_MPS_ACTIVE_THREAD_PERCENTAGE", num));
    }
}

/* base without the reserved names and (given a) those the job sets. */
static void base_vars(struct strv *s, const char *const *base, const struct tm_agent_assignment *a)
{
    for (const char *const *p = base; p && *p; p++)
        if (!reserved(*p) && (!a || !overridden(*p, a)))
            strv_push(s, strdup(*p));
}

static int strv_done(struct strv *s, char ***ret)
{
    if (!s->oom && !s->v)
        s->v = calloc(1, sizeof(char *)); /* an empty list */
    if (s->oom || !s->v) {
        tm_strv_free(s->v);
        return TM_ENOMEM;
    }
    *ret = s->v;
    return 0;
}

int tm_agent_job_env(const char *const *base, const struct tm_agent_assignment *a,
                     const struct tm_gpu_info *gpus, int ngpus, char ***ret_env)
{
    struct strv s = {0};

    base_vars(&s, base, a);
    job_vars(&s, a, gpus, ngpus);
    return strv_done(&s, ret_env);
}

int tm_agent_host_env(const char *const *base, char ***ret_env)
{
    struct strv s = {0};

    base_vars(&s, base, NULL);
    return strv_done(&s, ret_env);
}

int tm_agent_container_env_file(const struct tm_agent_assignment *a, const struct tm_gpu_info *gpus,
                                int ngpus, char **ret, size_t *ret_len)
{
    struct strv s = {0};
    char **v = NULL;
    size_t n = 0, off = 0;
    char *text;
    int r;

    job_vars(&s, a, gpus, ngpus);
    r = strv_done(&s, &v);
    if (r < 0)
        return r;
    for (char **p = v; *p; p++) {
        if (strpbrk(*p, "\r\n")) {
            tm_strv_free(v);
            return TM_EINVAL;
        }
        n += strlen(*p) + 1;
    }
    text = malloc(n + 1);
    if (!text) {
        tm_strv_free(v);
        return TM_ENOMEM;
    }
    for (char **p = v; *p; p++) {
        size_t len = strlen(*p);
        memcpy(text + off, *p, len);
        off += len;
        text[off++] = '\n';
    }
    text[off] = '\0';
    tm_strv_free(v);
    *ret = text;
    *ret_len = off;
    return 0;
}

int tm_strv_set(char ***v, const char *name, const char *value)
{
    size_t n = strlen(name), count = 0;
    char *entry = kv(name, value), **nv;

    if (!entry)
        return TM_ENOMEM;
    for (char **p = *v; *p; p++, count++)
        if (strncmp(*p, name, n) == 0 && (*p)[n] == '=') {
            free(*p);
            *p = entry;
            return 0;
        }
    nv = realloc(*v, (count + 2) * sizeof(char *));
    if (!nv) {
        free(entry);
        return TM_ENOMEM;
    }
    nv[count] = entry;
    nv[count + 1] = NULL;
    *v = nv;
    return 0;
}

char *tm_shell_quote(const char *s)
{
    size_t n = 3;
    char *out, *o;

    for (const char *p = s; *p; p++)
        n += *p == '\'' ? 4 : 1;
    out = malloc(n);
    if (!out)
        return NULL;
    o = out;
    *o++ = '\'';
    for (const char *p = s; *p; p++) {
        if (*p == '\'') {
            memcpy(o, "'\\''", 4);
            o += 4;
        } else {
            *o++ = *p;
        }
    }
    *o++ = '\'';
    *o = '\0';
    return out;
}

/* A growing string; oom sticks. */
struct buf {
    char *p;
    size_t n, cap;
    bool oom;
};

static void buf_add(struct buf *b, const char *s, size_t len)
{
    if (b->oom)
        return;
    if (b->n + len + 1 > b->cap) {
        size_t cap = (b->n + len + 1) * 2;
        char *np = realloc(b->p, cap);
        if (!np) {
            b->oom = true;
            return;
        }
        b->p = np;
        b->cap = cap;
    }
    memcpy(b->p + b->n, s, len);
    b->n += len;
    b->p[b->n] = '\0';
}

static void buf_str(struct buf *b, const char *s)
{
    buf_add(b, s, strlen(s));
}

static void buf_quoted(struct buf *b, const char *s)
{
    char *q = tm_shell_quote(s);

    if (!q) {
        b->oom = true;
        return;
    }
    buf_str(b, q);
    free(q);
}

int tm_agent_container_command(const char *tmpl, const struct tm_agent_assignment *a,
                               const struct tm_gpu_info *gpus, int ngpus, const char *env_file, char **ret)
{
    struct buf b = {0};
    char list[TM_AGENT_MAX_GPUS * 100];
    const char *p = tmpl;

    tm_agent_gpu_list(a, gpus, ngpus, list, sizeof(list));
    while (*p) {
        const char *open = strchr(p, '{'), *close;
        char name[32];
        size_t n;

        if (!open) {
            buf_str(&b, p);
            break;
        }
        buf_add(&b, p, (size_t)(open - p));
        close = strchr(open, '}');
        n = close ? (size_t)(close - open - 1) : 0;
        if (!close || n == 0 || n >= sizeof(name)) {
            free(b.p);
            return TM_EINVAL;
        }
        memcpy(name, open + 1, n);
        name[n] = '\0';
        if (strcmp(name, "image") == 0) {
            buf_quoted(&b, a->image ? a->image : "");
        } else if (strcmp(name, "command") == 0) {
            buf_quoted(&b, a->command);
        } else if (strcmp(name, "name") == 0) {
            char nm[64];
            snprintf(nm, sizeof(nm), "tarmac-%lld-%lld", (long long)a->job_id, (long long)a->attempt);
            buf_str(&b, nm);
        } else if (strcmp(name, "gpus") == 0) {
            buf_str(&b, list);
        } else if (strcmp(name, "docker_gpus") == 0) {
            if (list[0]) {
                buf_str(&b, "--gpus '\"device=");
                buf_str(&b, list);
                buf_str(&b, "\"'");
            }
        } else if (strcmp(name, "cdi_gpus") == 0) {
            const char *q = list;
            while (*q) {
                const char *comma = strchr(q, ',');
                size_t len = comma ? (size_t)(comma - q) : strlen(q);
                buf_str(&b, q == list ? "--device nvidia.com/gpu=" : " --device nvidia.com/gpu=");
                buf_add(&b, q, len);
                q += len + (comma ? 1 : 0);
            }
        } else if (strcmp(name, "env") == 0) {
            if (env_file) {
                buf_str(&b, "--env-file ");
                buf_quoted(&b, env_file);
            }
        } else if (strcmp(name, "checkpoint_dir") == 0) {
            if (a->checkpoint_dir)
                buf_quoted(&b, a->checkpoint_dir);
        } else if (strcmp(name, "hostfile") == 0) {
            if (a->hostfile)
                buf_quoted(&b, a->hostfile);
        } else if (strcmp(name, "resume_dir") == 0) {
            if (a->checkpoint_dir && a->resume_dir)
                buf_quoted(&b, a->resume_dir);
        } else {
            free(b.p);
            return TM_EINVAL;
        }
        p = close + 1;
    }
    if (b.oom || !b.p) {
        free(b.p);
        return b.oom ? TM_ENOMEM : TM_EINVAL;
    }
    *ret = b.p;
    return 0;
}
