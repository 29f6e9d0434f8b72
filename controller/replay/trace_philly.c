/*
 * controller/replay/trace_philly.c: Philly's job file (82,247 jobs of
 * Microsoft's Philly cluster as the Pollux authors kept them), read when a
 * pod file has its columns: timestamp,duration,num_gpus,gpu_time,cluster.
 *
 * The file knows when a job was submitted, how long it ran, on how many
 * GPUs, and its virtual cluster (Philly's team, the unit its quotas were
 * given in).  It has no start time, no CPU or memory request and no GPU
 * model, and its rows are not in submit order.  So each job here runs at
 * once for its duration (as the synthetic trace's do), fits any model, and
 * the rows are sorted by submit time, ties in file order, so a replay sees
 * arrivals in time order whatever the file's order.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "controller/replay/trace.h"
#include "controller/replay/trace_csv.h"
#include "core/err.h"
#include "core/units.h"

static const char *const cols[] = {"timestamp", "duration", "num_gpus", "gpu_time", "cluster"};
enum { C_TIME, C_DURATION, C_GPUS, C_GPU_TIME, C_CLUSTER, C_MAX };

/* Philly's largest jobs asked for 128 GPUs; beyond 1,024 is not a job of
 * that cluster but a misread column. */
#define PHILLY_GPUS_MAX 1024
/* A year: the file's longest job ran 54 days. */
#define PHILLY_DURATION_MAX_S (366.0 * 86400)

struct row {
    struct tm_trace_job job;
    size_t line;
};

static int by_submit(const void *a, const void *b)
{
    const struct row *x = a, *y = b;

    if (x->job.submit_ms != y->job.submit_ms)
        return x->job.submit_ms < y->job.submit_ms ? -1 : 1;
    return x->line < y->line ? -1 : x->line > y->line;
}

static bool parse_seconds(const char *s, double *ret)
{
    char *end;
    double v;

    if (!*s)
        return false;
    v = strtod(s, &end);
    if (*end || end == s || !isfinite(v))
        return false;
    *ret = v;
    return true;
}

/* A gang of as few nodes of TM_TRACE_PHILLY_NODE_GPUS as hold g GPUs, its
 * GPUs spread evenly; false when they cannot be (g = 9: 2 nodes of 4.5). */
static bool shape(int64_t g, struct tm_trace_job *jb)
{
    int64_t n = (g + TM_TRACE_PHILLY_NODE_GPUS - 1) / TM_TRACE_PHILLY_NODE_GPUS;

    if (g % n != 0)
        return false;
    jb->nodes = (int32_t)n;
    jb->gpus = (int32_t)(g / n);
    jb->gpu_milli = 1000;
    return true;
}

/* One row into *out (submit time in ms since the epoch for now). */
static int read_row(char **f, const int *at, const struct trace_rows *rw, struct row *out, char *err,
                    size_t errlen)
{
    struct tm_trace_job *jb = &out->job;
    const char *path = rw->path;
    size_t line = rw->lineno;
    double dur, gpu_time;
    int64_t g;

    if (!tm_utc_datetime_parse(f[at[C_TIME]], &jb->submit_ms))
        return trace_fail(err, errlen, path, line, at[C_TIME] + 1,
                          "bad timestamp \"%s\" (YYYY-MM-DD HH:MM:SS)", f[at[C_TIME]]);
    if (!parse_seconds(f[at[C_DURATION]], &dur) || dur <= 0 || dur > PHILLY_DURATION_MAX_S)
        return trace_fail(err, errlen, path, line, at[C_DURATION] + 1,
                          "bad duration \"%s\" (seconds, above 0, at most a year)", f[at[C_DURATION]]);
    if (!trace_parse_i64(f[at[C_GPUS]], &g) || g < 1 || g > PHILLY_GPUS_MAX)
        return trace_fail(err, errlen, path, line, at[C_GPUS] + 1, "bad num_gpus \"%s\" (1..%d)",
                          f[at[C_GPUS]], PHILLY_GPUS_MAX);
    if (!shape(g, jb))
        return trace_fail(err, errlen, path, line, at[C_GPUS] + 1,
                          "num_gpus %lld does not spread evenly over nodes of %d GPUs", (long long)g,
                          TM_TRACE_PHILLY_NODE_GPUS);
    /* gpu_time is duration x num_gpus on every row; a row where it is not
     * has its columns out of place. */
    if (!parse_seconds(f[at[C_GPU_TIME]], &gpu_time) ||
        fabs(gpu_time - dur * (double)g) > 0.01 * dur * (double)g + 1)
        return trace_fail(err, errlen, path, line, at[C_GPU_TIME] + 1,
                          "gpu_time \"%s\" is not duration x num_gpus", f[at[C_GPU_TIME]]);
    if (!*f[at[C_CLUSTER]] || strlen(f[at[C_CLUSTER]]) >= TM_TRACE_NAME_MAX)
        return trace_fail(err, errlen, path, line, at[C_CLUSTER] + 1,
                          "cluster must be 1 to %d characters", TM_TRACE_NAME_MAX - 1);
    snprintf(jb->team, sizeof(jb->team), "%s", f[at[C_CLUSTER]]);
    jb->start_ms = 0;
    jb->end_ms = (int64_t)llround(dur * 1000.0);
    if (jb->end_ms < 1)
        jb->end_ms = 1;
    /* Philly says nothing of a job's kind: training, not preemptible,
     * until a replay marks some otherwise. */
    jb->qos = TM_QOS_GUARANTEED;
    jb->klass = TM_CLASS_TRAIN;
    out->line = line;
    return 0;
}

int trace_load_philly(struct tm_trace *t, char *buf, const char *path, char *err, size_t errlen)
{
    struct trace_rows rw = {.p = buf, .c = {.names = cols, .n = C_MAX}, .path = path};
    struct row *rows = NULL;
    size_t n = 0, cap = 0;
    struct tm_trace_job *jobs;
    int64_t origin = INT64_MAX;
    char *f[FIELDS_MAX];
    int r, nf;

    while ((r = trace_next_row(&rw, f, &nf, err, errlen)) > 0) {
        if (n == cap) {
            size_t ncap = cap ? cap * 2 : 4096;
            struct row *nr = realloc(rows, ncap * sizeof(*rows));
            if (!nr) {
                free(rows);
                return TM_ENOMEM;
            }
            rows = nr;
            cap = ncap;
        }
        memset(&rows[n], 0, sizeof(rows[n]));
        r = read_row(f, rw.c.at, &rw, &rows[n], err, errlen);
        if (r < 0) {
            free(rows);
            return r;
        }
        if (rows[n].job.submit_ms < origin)
            origin = rows[n].job.submit_ms;
        n++;
    }
    if (r < 0 || n == 0) {
        free(rows);
        return r < 0 ? r : trace_fail(err, errlen, path, rw.lineno ? rw.lineno : 1, 1, "no jobs");
    }
    qsort(rows, n, sizeof(*rows), by_submit);
    jobs = calloc(n, sizeof(*jobs));
    if (!jobs) {
        free(rows);
        return TM_ENOMEM;
    }
    for (size_t i = 0; i < n; i++) {
        struct tm_trace_job *jb = &jobs[i];
        int64_t run = rows[i].job.end_ms;
        *jb = rows[i].job;
        jb->submit_ms -= origin;
        jb->start_ms = jb->submit_ms;
        jb->end_ms = jb->start_ms + run;
    }
    free(rows);
    free(t->jobs);
    t->jobs = jobs;
    t->njobs = n;
    return 0;
}
