/*
 * controller/agent/state.c: the state file and re-adoption (state.h).
 */
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "controller/agent/state.h"
#include "core/err.h"
#include "core/file.h"

static cJSON *job_json(const struct tm_agent_state_job *j)
{
    cJSON *o = cJSON_CreateObject();

    if (!o)
        return NULL;
    cJSON_AddNumberToObject(o, "job_id", (double)j->job_id);
    cJSON_AddNumberToObject(o, "attempt", (double)j->attempt);
    cJSON_AddNumberToObject(o, "pid", j->pid);
    cJSON_AddNumberToObject(o, "start_time", (double)j->start_time);
    cJSON_AddBoolToObject(o, "checkpointable", j->checkpointable);
    cJSON_AddBoolToObject(o, "start_reported", j->start_reported);
    cJSON_AddStringToObject(o, "stopping", j->stopping);
    cJSON_AddNumberToObject(o, "log_dropped", (double)j->log_dropped);
    return o;
}

static cJSON *report_json(const struct tm_agent_report *r)
{
    cJSON *o = cJSON_CreateObject();

    if (!o)
        return NULL;
    cJSON_AddNumberToObject(o, "job_id", (double)r->job_id);
    cJSON_AddNumberToObject(o, "attempt", (double)r->attempt);
    if (r->has_code)
        cJSON_AddNumberToObject(o, "exit_code", r->exit_code);
    else
        cJSON_AddNullToObject(o, "exit_code");
    if (r->signal)
        cJSON_AddNumberToObject(o, "signal", r->signal);
    else
        cJSON_AddNullToObject(o, "signal");
    cJSON_AddStringToObject(o, "reason", r->reason);
    cJSON_AddStringToObject(o, "output_tail", r->tail);
    return o;
}

int tm_agent_state_write(const char *path, const struct tm_agent_state *st)
{
    cJSON *root = cJSON_CreateObject(), *jobs, *reps, *done;
    char tmp[4096];
    char *text = NULL;
    int fd = -1, r = 0;
    size_t len, off = 0;

    if (!root)
        return -ENOMEM;
    jobs = cJSON_AddArrayToObject(root, "jobs");
    reps = cJSON_AddArrayToObject(root, "reports");
    done = cJSON_AddArrayToObject(root, "done");
    if (!jobs || !reps || !done) {
        r = -ENOMEM;
        goto out;
    }
    for (size_t i = 0; i < st->njobs; i++)
        if (!cJSON_AddItemToArray(jobs, job_json(&st->jobs[i]))) {
            r = -ENOMEM;
            goto out;
        }
    for (size_t i = 0; i < st->nreports; i++)
        if (!cJSON_AddItemToArray(reps, report_json(&st->reports[i]))) {
            r = -ENOMEM;
            goto out;
        }
    for (size_t i = 0; i < st->ndone; i++) {
        double pair[2] = {(double)st->done[i].job_id, (double)st->done[i].attempt};
        if (!cJSON_AddItemToArray(done, cJSON_CreateDoubleArray(pair, 2))) {
            r = -ENOMEM;
            goto out;
        }
    }
    text = cJSON_PrintUnformatted(root);
    if (!text) {
        r = -ENOMEM;
        goto out;
    }
    snprintf(tmp, sizeof(tmp), "%s.tmp", path);
    fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0) {
        r = -errno;
        goto out;
    }
    len = strlen(text);
    while (off < len) {
        ssize_t w = write(fd, text + off, len - off);
        if (w < 0) {
            if (errno == EINTR)
                continue;
            r = -errno;
            goto out;
        }
        off += (size_t)w;
    }
    if (fsync(fd) != 0 || close(fd) != 0) {
        fd = -1;
        r = -errno;
        goto out;
    }
    fd = -1;
    if (rename(tmp, path) != 0)
        r = -errno;
out:
    if (fd >= 0)
        close(fd);
    free(text);
    cJSON_Delete(root);
    return r;
}

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

static bool get_int(const cJSON *o, const char *key, double lo, double hi, int64_t *ret)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);

    if (!cJSON_IsNumber(v) || !isfinite(v->valuedouble) || v->valuedouble != floor(v->valuedouble) ||
        v->valuedouble < lo || v->valuedouble > hi)
        return false;
    *ret = (int64_t)v->valuedouble;
    return true;
}

static bool get_str(const cJSON *o, const char *key, char *out, size_t outlen)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);

    if (!cJSON_IsString(v) || !v->valuestring || strlen(v->valuestring) >= outlen)
        return false;
    memcpy(out, v->valuestring, strlen(v->valuestring) + 1);
    return true;
}

static int parse_job(const cJSON *o, size_t i, struct tm_agent_state_job *j, char *err, size_t errlen)
{
    int64_t v;

    if (!cJSON_IsObject(o) || !get_int(o, "job_id", 1, 9e15, &j->job_id) ||
        !get_int(o, "attempt", 0, 2147483647.0, &j->attempt) || !get_int(o, "pid", 1, 4194304, &v))
        return bad(err, errlen, "jobs[%zu]: job_id, attempt or pid missing or out of range", i);
    j->pid = (int)v;
    if (!get_int(o, "start_time", 0, 9e15, &v))
        return bad(err, errlen, "jobs[%zu].start_time: must be a non-negative integer", i);
    j->start_time = (uint64_t)v;
    j->checkpointable = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(o, "checkpointable"));
    j->start_reported = !cJSON_IsFalse(cJSON_GetObjectItemCaseSensitive(o, "start_reported"));
    if (!get_str(o, "stopping", j->stopping, sizeof(j->stopping)))
        j->stopping[0] = '\0';
    if (!get_int(o, "log_dropped", 0, 9e18, &j->log_dropped))
        j->log_dropped = 0;
    return 0;
}

static int parse_report(const cJSON *o, size_t i, struct tm_agent_report *r, char *err, size_t errlen)
{
    int64_t v;

    if (!cJSON_IsObject(o) || !get_int(o, "job_id", 1, 9e15, &r->job_id) ||
        !get_int(o, "attempt", 0, 2147483647.0, &r->attempt) ||
        !get_str(o, "reason", r->reason, sizeof(r->reason)))
        return bad(err, errlen, "reports[%zu]: job_id, attempt or reason missing or bad", i);
    if (get_int(o, "exit_code", -2147483648.0, 2147483647.0, &v)) {
        r->has_code = true;
        r->exit_code = (int)v;
    }
    if (get_int(o, "signal", 1, 128, &v))
        r->signal = (int)v;
    if (!get_str(o, "output_tail", r->tail, sizeof(r->tail)))
        r->tail[0] = '\0';
    return 0;
}

int tm_agent_state_parse(const char *body, size_t len, struct tm_agent_state *ret, char *err,
                         size_t errlen)
{
    struct tm_agent_state st = {0};
    cJSON *root = cJSON_ParseWithLength(body, len);
    const cJSON *jobs, *reps, *done, *e;
    int r = 0;

    if (!root || !cJSON_IsObject(root)) {
        r = bad(err, errlen, "not a JSON object");
        goto out;
    }
    jobs = cJSON_GetObjectItemCaseSensitive(root, "jobs");
    reps = cJSON_GetObjectItemCaseSensitive(root, "reports");
    done = cJSON_GetObjectItemCaseSensitive(root, "done");
    if ((jobs && !cJSON_IsArray(jobs)) || (reps && !cJSON_IsArray(reps)) || (done && !cJSON_IsArray(done))) {
        r = bad(err, errlen, "jobs, reports and done must be arrays");
        goto out;
    }
    if (cJSON_GetArraySize(done) > 0) {
        st.done = calloc((size_t)cJSON_GetArraySize(done), sizeof(*st.done));
        if (!st.done) {
            r = TM_ENOMEM;
            goto out;
        }
    }
    cJSON_ArrayForEach(e, done)
    {
        const cJSON *a = cJSON_GetArrayItem(e, 0), *b = cJSON_GetArrayItem(e, 1);
        if (!cJSON_IsArray(e) || !cJSON_IsNumber(a) || !cJSON_IsNumber(b)) {
            r = bad(err, errlen, "done[%zu]: must be [job_id, attempt]", st.ndone);
            goto out;
        }
        st.done[st.ndone].job_id = (int64_t)a->valuedouble;
        st.done[st.ndone].attempt = (int64_t)b->valuedouble;
        st.ndone++;
    }
    if (cJSON_GetArraySize(jobs) > 0) {
        st.jobs = calloc((size_t)cJSON_GetArraySize(jobs), sizeof(*st.jobs));
        if (!st.jobs) {
            r = TM_ENOMEM;
            goto out;
        }
    }
    if (cJSON_GetArraySize(reps) > 0) {
        st.reports = calloc((size_t)cJSON_GetArraySize(reps), sizeof(*st.reports));
        if (!st.reports) {
            r = TM_ENOMEM;
            goto out;
        }
    }
    cJSON_ArrayForEach(e, jobs)
    {
        r = parse_job(e, st.njobs, &st.jobs[st.njobs], err, errlen);
        if (r < 0)
            goto out;
        st.njobs++;
    }
    cJSON_ArrayForEach(e, reps)
    {
        r = parse_report(e, st.nreports, &st.reports[st.nreports], err, errlen);
        if (r < 0)
            goto out;
        st.nreports++;
    }
    *ret = st;
    st = (struct tm_agent_state){0};
out:
    tm_agent_state_release(&st);
    cJSON_Delete(root);
    return r;
}

int tm_agent_state_read(const char *path, struct tm_agent_state *ret, char *err, size_t errlen)
{
    char *body = NULL;
    size_t len = 0;
    int r = tm_file_read(path, 64 << 20, &body, &len, err, errlen);

    if (r == -ENOENT) {
        memset(ret, 0, sizeof(*ret));
        return 0;
    }
    if (r < 0)
        return r;
    r = tm_agent_state_parse(body, len, ret, err, errlen);
    free(body);
    return r;
}

void tm_agent_state_release(struct tm_agent_state *st)
{
    if (!st)
        return;
    free(st->jobs);
    free(st->reports);
    free(st->done);
    memset(st, 0, sizeof(*st));
}

int tm_proc_stat_start_time(const char *stat, uint64_t *ret)
{
    const char *p = strrchr(stat, ')');
    char state;
    int field;

    if (!p || p[1] != ' ')
        return TM_EBADREPLY;
    p += 2; /* now at field 3, the state */
    state = *p;
    for (field = 3; field < 22; field++) {
        p = strchr(p, ' ');
        if (!p)
            return TM_EBADREPLY;
        p++;
    }
    if (*p < '0' || *p > '9')
        return TM_EBADREPLY;
    errno = 0;
    *ret = strtoull(p, NULL, 10);
    if (errno)
        return TM_EBADREPLY;
    return state == 'Z' || state == 'X' ? -ESRCH : 0;
}

int tm_proc_start_time(int pid, uint64_t *ret)
{
    char path[64], buf[1024];
    ssize_t n;
    int fd;

    snprintf(path, sizeof(path), "/proc/%d/stat", pid);
    fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return errno == ENOENT ? -ESRCH : -errno;
    n = read(fd, buf, sizeof(buf) - 1);
    close(fd);
    if (n <= 0)
        return -ESRCH;
    buf[n] = '\0';
    return tm_proc_stat_start_time(buf, ret);
}

enum tm_adopt tm_agent_adopt_decide(const struct tm_agent_state_job *j, bool alive, uint64_t now_start)
{
    if (!alive || j->pid <= 0)
        return TM_ADOPT_LOST;
    return now_start == j->start_time ? TM_ADOPT_KEEP : TM_ADOPT_LOST;
}
