/*
 * controller/replay/trace.c: openb CSV loaders and the synthetic generator.
 *
 * The openb files are plain CSV without quoting; we still refuse a quote
 * rather than misread one.  Each file is read whole (trace_csv.h's cap
 * bounds a wrong path pointing at something huge), split in lines, and
 * each row is checked field by field so an error names its file, line and
 * column.  A pod file with Philly's columns goes to trace_philly.c.
 */
#include "controller/replay/trace.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "controller/replay/trace_csv.h"
#include "core/err.h"
#include "core/file.h"

static const char *const qos_names[TM_QOS_MAX] = {"LS", "BE", "Burstable", "Guaranteed"};

const char *tm_trace_qos_name(enum tm_trace_qos q)
{
    return (unsigned)q < TM_QOS_MAX ? qos_names[q] : "unknown";
}

struct tm_estimate_key tm_trace_estimate_key(const struct tm_trace_job *j, char *buf, size_t len)
{
    if (j->team[0])
        snprintf(buf, len, "%s", j->team);
    else
        snprintf(buf, len, "c%lld-m%lld", (long long)j->cpu_milli, (long long)j->memory_mib);
    return (struct tm_estimate_key){.team = buf,
                                    .name = j->name[0] ? j->name : NULL,
                                    .klass = j->klass,
                                    .gpu_milli = j->gpus > 0 ? j->gpus * 1000 : j->gpu_milli,
                                    .cpu_milli = j->cpu_milli,
                                    .memory_mib = j->memory_mib};
}

int tm_trace_model(struct tm_trace *t, const char *name)
{
    for (int i = 0; i < t->nmodels; i++)
        if (strcmp(t->models[i], name) == 0)
            return i;
    if (t->nmodels >= TM_TRACE_MODELS_MAX || strlen(name) >= TM_TRACE_NAME_MAX)
        return -1;
    snprintf(t->models[t->nmodels], TM_TRACE_NAME_MAX, "%s", name);
    return t->nmodels++;
}

int trace_fail(char *err, size_t errlen, const char *path, size_t line, int col, const char *fmt, ...)
{
    va_list ap;
    int n;

    if (!err || errlen == 0)
        return TM_EINVAL;
    n = snprintf(err, errlen, "%s:%zu:%d: ", path, line, col);
    if (n < 0 || (size_t)n >= errlen)
        return TM_EINVAL;
    va_start(ap, fmt);
    vsnprintf(err + n, errlen - (size_t)n, fmt, ap);
    va_end(ap);
    return TM_EINVAL;
}

/* Split one line in place at commas; returns the field count or -1 when
 * there are more than FIELDS_MAX. */
static int split(char *line, char **fields)
{
    int n = 0;
    char *p = line;

    for (;;) {
        char *c = strchr(p, ',');
        if (n >= FIELDS_MAX)
            return -1;
        fields[n++] = p;
        if (!c)
            break;
        *c = '\0';
        p = c + 1;
    }
    return n;
}

bool trace_parse_i64(const char *s, int64_t *ret)
{
    char *end;
    long long v;

    if (!*s)
        return false;
    errno = 0;
    v = strtoll(s, &end, 10);
    if (errno || *end || end == s)
        return false;
    *ret = v;
    return true;
}

static int header(struct trace_cols *c, char **f, int nf, const char *path, char *err, size_t errlen)
{
    for (int i = 0; i < c->n; i++) {
        c->at[i] = -1;
        for (int k = 0; k < nf; k++)
            if (strcmp(f[k], c->names[i]) == 0)
                c->at[i] = k;
        if (c->at[i] < 0)
            return trace_fail(err, errlen, path, 1, nf + 1, "missing column \"%s\"", c->names[i]);
    }
    return 0;
}

bool trace_has_columns(const char *buf, const char *const *names, int n)
{
    const char *end = buf + strcspn(buf, "\r\n");

    for (int i = 0; i < n; i++) {
        size_t nl = strlen(names[i]);
        bool found = false;
        for (const char *p = buf; !found && p <= end; p += strcspn(p, ",\r\n") + 1)
            found = strcspn(p, ",\r\n") == nl && memcmp(p, names[i], nl) == 0;
        if (!found)
            return false;
    }
    return true;
}

/* Iterate lines: strips "\r\n", skips a trailing empty line. */
static char *next_line(char **p)
{
    char *s = *p, *e;

    if (!s || !*s)
        return NULL;
    e = strchr(s, '\n');
    if (e) {
        *e = '\0';
        *p = e + 1;
    } else {
        *p = s + strlen(s);
    }
    if (e && e > s && e[-1] == '\r')
        e[-1] = '\0';
    else if (!e && *s && s[strlen(s) - 1] == '\r')
        s[strlen(s) - 1] = '\0';
    return s;
}

int trace_next_row(struct trace_rows *rw, char **f, int *nf, char *err, size_t errlen)
{
    char *line;
    int r;

    while ((line = next_line(&rw->p))) {
        rw->lineno++;
        if (!*line && !*rw->p)
            return 0;
        if (strchr(line, '"'))
            return trace_fail(err, errlen, rw->path, rw->lineno, 1, "quoted fields are not supported");
        *nf = split(line, f);
        if (*nf < 0)
            return trace_fail(err, errlen, rw->path, rw->lineno, FIELDS_MAX + 1, "too many fields");
        if (rw->lineno == 1) {
            r = header(&rw->c, f, *nf, rw->path, err, errlen);
            if (r < 0)
                return r;
            continue;
        }
        for (int i = 0; i < rw->c.n; i++)
            if (rw->c.at[i] >= *nf)
                return trace_fail(err, errlen, rw->path, rw->lineno, *nf + 1, "missing field \"%s\"",
                            rw->c.names[i]);
        return 1;
    }
    return 0;
}

static const char *const node_cols[] = {"sn", "cpu_milli", "memory_mib", "gpu", "model"};
enum { NC_SN, NC_CPU, NC_MEM, NC_GPU, NC_MODEL, NC_MAX };

int tm_trace_load_nodes(struct tm_trace *t, const char *path, char *err, size_t errlen)
{
    char *buf = NULL, *f[FIELDS_MAX];
    size_t len, n = 0, cap = 0;
    struct tm_trace_node *nodes = NULL;
    struct trace_rows rw = {.c = {.names = node_cols, .n = NC_MAX}, .path = path};
    const int *at = rw.c.at;
    struct tm_trace saved_models = {0};
    int r, nf;

    memcpy(saved_models.models, t->models, sizeof(t->models));
    saved_models.nmodels = t->nmodels;
    r = tm_file_read(path, TRACE_FILE_MAX, &buf, &len, err, errlen);
    if (r < 0)
        return r;
    rw.p = buf;
    while ((r = trace_next_row(&rw, f, &nf, err, errlen)) > 0) {
        struct tm_trace_node nd = {0};
        int64_t v;

        if (strlen(f[at[NC_SN]]) >= TM_TRACE_NAME_MAX) {
            r = trace_fail(err, errlen, path, rw.lineno, at[NC_SN] + 1, "name too long");
            goto out;
        }
        snprintf(nd.name, sizeof(nd.name), "%s", f[at[NC_SN]]);
        if (!trace_parse_i64(f[at[NC_CPU]], &nd.cpu_milli) || nd.cpu_milli < 0) {
            r = trace_fail(err, errlen, path, rw.lineno, at[NC_CPU] + 1, "bad number \"%s\" for cpu_milli",
                     f[at[NC_CPU]]);
            goto out;
        }
        if (!trace_parse_i64(f[at[NC_MEM]], &nd.memory_mib) || nd.memory_mib < 0) {
            r = trace_fail(err, errlen, path, rw.lineno, at[NC_MEM] + 1, "bad number \"%s\" for memory_mib",
                     f[at[NC_MEM]]);
            goto out;
        }
        if (!trace_parse_i64(f[at[NC_GPU]], &v) || v < 0 || v > 16) {
            r = trace_fail(err, errlen, path, rw.lineno, at[NC_GPU] + 1, "bad GPU count \"%s\" (0..16)",
                     f[at[NC_GPU]]);
            goto out;
        }
        nd.gpus = (int32_t)v;
        nd.model = -1;
        if (nd.gpus > 0) {
            if (!*f[at[NC_MODEL]]) {
                r = trace_fail(err, errlen, path, rw.lineno, at[NC_MODEL] + 1, "GPU node without a model");
                goto out;
            }
            nd.model = tm_trace_model(t, f[at[NC_MODEL]]);
            if (nd.model < 0) {
                r = trace_fail(err, errlen, path, rw.lineno, at[NC_MODEL] + 1, "too many GPU models");
                goto out;
            }
        }
        if (n == cap) {
            size_t ncap = cap ? cap * 2 : 1024;
            struct tm_trace_node *nn = realloc(nodes, ncap * sizeof(*nodes));
            if (!nn) {
                r = TM_ENOMEM;
                goto out;
            }
            nodes = nn;
            cap = ncap;
        }
        nodes[n++] = nd;
    }
    if (r < 0)
        goto out;
    if (rw.lineno == 0) {
        r = trace_fail(err, errlen, path, 1, 1, "empty file");
        goto out;
    }
    free(t->nodes);
    t->nodes = nodes;
    t->nnodes = n;
    nodes = NULL;
    r = 0;
out:
    if (r < 0) {
        memcpy(t->models, saved_models.models, sizeof(t->models));
        t->nmodels = saved_models.nmodels;
    }
    free(nodes);
    free(buf);
    return r;
}

static const char *const pod_cols[] = {"name", "cpu_milli", "memory_mib", "num_gpu", "gpu_milli",
                                       "gpu_spec", "qos", "creation_time", "deletion_time",
                                       "scheduled_time"};
enum { PC_NAME, PC_CPU, PC_MEM, PC_NGPU, PC_MILLI, PC_SPEC, PC_QOS, PC_CREATE, PC_DELETE, PC_SCHED,
       PC_MAX };
/* A pod file with these columns is Philly's, not openb's. */
static const char *const philly_cols[] = {"timestamp", "duration", "num_gpus", "gpu_time", "cluster"};

static int parse_spec(struct tm_trace *t, char *spec, uint64_t *ret)
{
    uint64_t mask = 0;
    char *s = spec;

    while (*s) {
        char *bar = strchr(s, '|');
        int m;
        if (bar)
            *bar = '\0';
        if (!*s)
            return -1;
        m = tm_trace_model(t, s);
        if (m < 0)
            return -1;
        mask |= 1ull << m;
        if (!bar)
            break;
        s = bar + 1;
    }
    *ret = mask;
    return 0;
}

int tm_trace_load_pods(struct tm_trace *t, const char *path, char *err, size_t errlen)
{
    char *buf = NULL, *f[FIELDS_MAX];
    size_t len, n = 0, cap = 0;
    struct tm_trace_job *jobs = NULL;
    struct trace_rows rw = {.c = {.names = pod_cols, .n = PC_MAX}, .path = path};
    const int *at = rw.c.at;
    char saved[TM_TRACE_MODELS_MAX][TM_TRACE_NAME_MAX];
    int saved_n = t->nmodels;
    int r, nf;

    memcpy(saved, t->models, sizeof(saved));
    r = tm_file_read(path, TRACE_FILE_MAX, &buf, &len, err, errlen);
    if (r < 0)
        return r;
    if (trace_has_columns(buf, philly_cols, 5)) {
        r = trace_load_philly(t, buf, path, err, errlen);
        free(buf);
        return r;
    }
    rw.p = buf;
    while ((r = trace_next_row(&rw, f, &nf, err, errlen)) > 0) {
        struct tm_trace_job jb = {.nodes = 1};
        int64_t ngpu, milli, create, del, sched = -1;
        int q;
#define NUM(col, var, what)                                                                          \
    do {                                                                                             \
        if (!trace_parse_i64(f[at[col]], &(var)) || (var) < 0) {                                           \
            r = trace_fail(err, errlen, path, rw.lineno, at[col] + 1, "bad number \"%s\" for %s",          \
                     f[at[col]], what);                                                              \
            goto out;                                                                                \
        }                                                                                            \
    } while (0)
        if (strlen(f[at[PC_NAME]]) >= TM_TRACE_NAME_MAX) {
            r = trace_fail(err, errlen, path, rw.lineno, at[PC_NAME] + 1, "name too long");
            goto out;
        }
        snprintf(jb.name, sizeof(jb.name), "%s", f[at[PC_NAME]]);
        NUM(PC_CPU, jb.cpu_milli, "cpu_milli");
        NUM(PC_MEM, jb.memory_mib, "memory_mib");
        NUM(PC_NGPU, ngpu, "num_gpu");
        NUM(PC_MILLI, milli, "gpu_milli");
        NUM(PC_CREATE, create, "creation_time");
        NUM(PC_DELETE, del, "deletion_time");
        if (*f[at[PC_SCHED]])
            NUM(PC_SCHED, sched, "scheduled_time");
#undef NUM
        if (ngpu > 16) {
            r = trace_fail(err, errlen, path, rw.lineno, at[PC_NGPU] + 1, "num_gpu %lld above 16",
                     (long long)ngpu);
            goto out;
        }
        if (milli > 1000 || (ngpu == 1 && milli == 0)) {
            r = trace_fail(err, errlen, path, rw.lineno, at[PC_MILLI] + 1,
                     "gpu_milli %lld out of range for num_gpu %lld", (long long)milli, (long long)ngpu);
            goto out;
        }
        if (del < create) {
            r = trace_fail(err, errlen, path, rw.lineno, at[PC_DELETE] + 1,
                     "negative duration: deletion_time %lld before creation_time %lld",
                     (long long)del, (long long)create);
            goto out;
        }
        if (sched >= 0 && (del < sched || sched < create)) {
            r = trace_fail(err, errlen, path, rw.lineno, at[del < sched ? PC_DELETE : PC_SCHED] + 1,
                     "negative duration: scheduled_time %lld outside creation %lld .. deletion %lld",
                     (long long)sched, (long long)create, (long long)del);
            goto out;
        }
        /* Shapes as scheduler.h wants them: a share is gpus 0 + milli. */
        if (ngpu == 1 && milli < 1000) {
            jb.gpus = 0;
            jb.gpu_milli = (int32_t)milli;
        } else if (ngpu >= 1) {
            jb.gpus = (int32_t)ngpu;
            jb.gpu_milli = 1000;
        } else {
            jb.gpus = 0;
            jb.gpu_milli = 0;
        }
        if (*f[at[PC_SPEC]] && parse_spec(t, f[at[PC_SPEC]], &jb.model_mask) < 0) {
            r = trace_fail(err, errlen, path, rw.lineno, at[PC_SPEC] + 1, "bad gpu_spec");
            goto out;
        }
        q = -1;
        for (int k = 0; k < TM_QOS_MAX; k++)
            if (strcmp(f[at[PC_QOS]], qos_names[k]) == 0)
                q = k;
        if (q < 0) {
            r = trace_fail(err, errlen, path, rw.lineno, at[PC_QOS] + 1,
                     "unrecognized qos \"%s\" (LS, BE, Burstable, Guaranteed)", f[at[PC_QOS]]);
            goto out;
        }
        jb.qos = (enum tm_trace_qos)q;
        /* Modelling choices, not in the trace: best effort is preemptible
         * batch work; latency-sensitive tasks are inference; the rest train. */
        jb.preemptible = jb.qos == TM_QOS_BE;
        jb.klass = jb.qos == TM_QOS_BE   ? TM_CLASS_BATCH
                   : jb.qos == TM_QOS_LS ? TM_CLASS_INFERENCE
                                         : TM_CLASS_TRAIN;
        jb.submit_ms = create * 1000;
        jb.end_ms = del * 1000;
        jb.start_ms = sched >= 0 ? sched * 1000 : -1;
        if (n == cap) {
            size_t ncap = cap ? cap * 2 : 4096;
            struct tm_trace_job *nj = realloc(jobs, ncap * sizeof(*jobs));
            if (!nj) {
                r = TM_ENOMEM;
                goto out;
            }
            jobs = nj;
            cap = ncap;
        }
        jobs[n++] = jb;
    }
    if (r < 0)
        goto out;
    if (rw.lineno == 0) {
        r = trace_fail(err, errlen, path, 1, 1, "empty file");
        goto out;
    }
    free(t->jobs);
    t->jobs = jobs;
    t->njobs = n;
    jobs = NULL;
    r = 0;
out:
    if (r < 0) {
        memcpy(t->models, saved, sizeof(saved));
        t->nmodels = saved_n;
    }
    free(jobs);
    free(buf);
    return r;
}

/* ---------- synthetic generator ---------- */

static uint64_t splitmix(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* Uniform in (0, 1). */
static double unif(uint64_t *s)
{
    return ((double)(splitmix(s) >> 11) + 0.5) / 9007199254740992.0;
}

/*
 * Distributions (chosen to resemble the openb trace, see the traces README):
 *  - arrivals: Poisson, exponential gaps of mean 1/jobs_per_hour;
 *  - GPUs: 45% a share of one GPU (gpu_milli uniform over 100, 150, ... 950),
 *    48% one GPU, 3% two, 2% four, 2% eight;
 *  - runtime: log-normal, median 600 s, sigma 1.8 (so p90 about 6,000 s as
 *    in openb), clipped to 1 s .. 1 day;
 *  - CPU: 6 cores per GPU (a share counts as one), memory 24 GiB per GPU;
 *  - 40% best effort (preemptible, class batch); of the rest 60% train,
 *    15% eval, 10% preprocess, 15% inference;
 *  - inventory: gpus / 8 nodes of 8 GPUs, model "S8", 96 cores, 384 GiB.
 * The trace's start and end equal the generated runtime (it ran at once).
 */
int tm_trace_synthesize(struct tm_trace *t, const struct tm_trace_synth *p)
{
    uint64_t s = p->seed ? p->seed : 1;
    size_t nn;
    struct tm_trace_job *jobs = NULL;
    struct tm_trace_node *nodes = NULL;
    double clock_s = 0;
    int model;

    if (!p->jobs || p->jobs_per_hour <= 0 || p->gpus < 8)
        return TM_EINVAL;
    nn = (size_t)p->gpus / 8;
    jobs = calloc(p->jobs, sizeof(*jobs));
    nodes = calloc(nn, sizeof(*nodes));
    if (!jobs || !nodes) {
        free(jobs);
        free(nodes);
        return TM_ENOMEM;
    }
    model = tm_trace_model(t, "S8");
    if (model < 0) {
        free(jobs);
        free(nodes);
        return TM_EINVAL;
    }
    for (size_t i = 0; i < nn; i++) {
        snprintf(nodes[i].name, sizeof(nodes[i].name), "synth-node-%04zu", i);
        nodes[i].cpu_milli = 96000;
        nodes[i].memory_mib = 393216;
        nodes[i].gpus = 8;
        nodes[i].model = model;
    }
    for (size_t j = 0; j < p->jobs; j++) {
        struct tm_trace_job *jb = &jobs[j];
        double u = unif(&s), run_s;
        int per;
        clock_s += -log(unif(&s)) * 3600.0 / p->jobs_per_hour;
        snprintf(jb->name, sizeof(jb->name), "synth-%06zu", j);
        jb->nodes = 1;
        if (u < 0.45) {
            jb->gpus = 0;
            jb->gpu_milli = 100 + 50 * (int32_t)(splitmix(&s) % 18);
        } else {
            jb->gpus = u < 0.93 ? 1 : u < 0.96 ? 2 : u < 0.98 ? 4 : 8;
            jb->gpu_milli = 1000;
        }
        per = jb->gpus > 0 ? jb->gpus : 1;
        jb->cpu_milli = 6000LL * per;
        jb->memory_mib = 24576LL * per;
        /* Box-Muller for the log-normal. */
        run_s = 600.0 * exp(1.8 * sqrt(-2.0 * log(unif(&s))) * cos(2 * M_PI * unif(&s)));
        if (run_s < 1)
            run_s = 1;
        if (run_s > 86400)
            run_s = 86400;
        jb->submit_ms = (int64_t)(clock_s * 1000);
        jb->start_ms = jb->submit_ms;
        jb->end_ms = jb->start_ms + (int64_t)(run_s * 1000);
        u = unif(&s);
        if (u < 0.4) {
            jb->qos = TM_QOS_BE;
            jb->preemptible = true;
            jb->klass = TM_CLASS_BATCH;
        } else {
            double v = unif(&s);
            jb->qos = TM_QOS_LS;
            jb->klass = v < 0.6 ? TM_CLASS_TRAIN : v < 0.75 ? TM_CLASS_EVAL
                        : v < 0.85 ? TM_CLASS_PREPROCESS : TM_CLASS_INFERENCE;
        }
    }
    free(t->jobs);
    free(t->nodes);
    t->jobs = jobs;
    t->njobs = p->jobs;
    t->nodes = nodes;
    t->nnodes = nn;
    return 0;
}

int tm_trace_uniform_nodes(struct tm_trace *t, size_t n, int32_t gpus, const char *model)
{
    struct tm_trace_node *nodes;
    int m = tm_trace_model(t, model);

    if (m < 0 || n == 0 || gpus < 1)
        return TM_EINVAL;
    nodes = calloc(n, sizeof(*nodes));
    if (!nodes)
        return TM_ENOMEM;
    for (size_t i = 0; i < n; i++) {
        snprintf(nodes[i].name, sizeof(nodes[i].name), "%s-%05zu", model, i);
        /* Room for any CPU and memory request: these traces have none. */
        nodes[i].cpu_milli = 128000;
        nodes[i].memory_mib = 1048576;
        nodes[i].gpus = gpus;
        nodes[i].model = m;
    }
    free(t->nodes);
    t->nodes = nodes;
    t->nnodes = n;
    return 0;
}

void tm_trace_release(struct tm_trace *t)
{
    if (!t)
        return;
    free(t->jobs);
    free(t->nodes);
    t->jobs = NULL;
    t->nodes = NULL;
    t->njobs = 0;
    t->nnodes = 0;
}
