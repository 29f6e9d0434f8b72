/*
 * providers/local/local_state.c: the files of the local provider's state
 * folder (see local_state.h), and finding a node's processes in /proc.
 */
#include "providers/local/local_state.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "core/err.h"
#include "core/file.h"
#include "core/model.h"

void tm_local_instance_id(int64_t node_id, const char *token, char *buf, size_t size)
{
    uint32_t h = 2166136261u; /* FNV-1a: a name, not a secret */

    for (const char *s = token ? token : ""; *s; s++) {
        h ^= (unsigned char)*s;
        h *= 16777619u;
    }
    snprintf(buf, size, "local-%lld-%08x", (long long)node_id, (unsigned)h);
}

int tm_local_path(const char *state_dir, const char *id, const char *name, char *buf, size_t size)
{
    int w;

    if (name)
        w = snprintf(buf, size, "%s/nodes/%s/%s", state_dir, id, name);
    else if (id)
        w = snprintf(buf, size, "%s/nodes/%s", state_dir, id);
    else
        w = snprintf(buf, size, "%s/nodes", state_dir);
    return w < 0 || (size_t)w >= size ? TM_EINVAL : 0;
}

int tm_local_write_file(const char *path, const char *data, size_t len, unsigned mode)
{
    char tmp[TM_LOCAL_PATH_MAX + 8];
    size_t done = 0;
    int fd, r = 0;

    if (snprintf(tmp, sizeof(tmp), "%s.tmp", path) >= (int)sizeof(tmp))
        return TM_EINVAL;
    fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, (mode_t)mode);
    if (fd < 0)
        return -errno;
    fchmod(fd, (mode_t)mode); /* whatever the umask */
    while (done < len) {
        ssize_t w = write(fd, data + done, len - done);
        if (w < 0) {
            if (errno == EINTR)
                continue;
            r = -errno;
            break;
        }
        done += (size_t)w;
    }
    if (close(fd) < 0 && r == 0)
        r = -errno;
    if (r == 0 && rename(tmp, path) < 0)
        r = -errno;
    if (r < 0)
        unlink(tmp);
    return r;
}

/* ---- instance.json ------------------------------------------------------- */

static bool get_str(const cJSON *o, const char *k, char *dst, size_t size)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);

    if (!cJSON_IsString(v) || strlen(v->valuestring) >= size)
        return false;
    memcpy(dst, v->valuestring, strlen(v->valuestring) + 1);
    return true;
}

static bool get_i64(const cJSON *o, const char *k, int64_t *dst)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);

    if (!cJSON_IsNumber(v))
        return false;
    *dst = (int64_t)v->valuedouble;
    return true;
}

/* Node id's file name, parsed (NULL when it is not JSON); < 0 when it could
 * not be read. */
static int read_json(const char *state_dir, const char *id, const char *name, cJSON **ret)
{
    char path[TM_LOCAL_PATH_MAX], *text = NULL;
    size_t len;
    int r = tm_local_path(state_dir, id, name, path, sizeof(path));

    if (r == 0)
        r = tm_file_read(path, 64 * 1024, &text, &len, NULL, 0);
    if (r < 0)
        return r;
    *ret = cJSON_ParseWithLength(text, len);
    free(text);
    return 0;
}

int tm_local_record_read(const char *state_dir, const char *id, struct tm_local_record *ret)
{
    struct tm_local_record rec = {0};
    char cap[32];
    int64_t pid = 0;
    cJSON *root;
    int r;

    r = read_json(state_dir, id, "instance.json", &root);
    if (r < 0)
        return r;
    r = TM_EBADREPLY;
    if (!cJSON_IsObject(root))
        goto out;
    if (!get_str(root, "id", rec.inst.id, sizeof(rec.inst.id)) ||
        !get_str(root, "token", rec.inst.token, sizeof(rec.inst.token)) ||
        !get_str(root, "cluster", rec.cluster, sizeof(rec.cluster)) ||
        !get_str(root, "pool", rec.inst.pool, sizeof(rec.inst.pool)) ||
        !get_str(root, "instance_type", rec.inst.instance_type, sizeof(rec.inst.instance_type)) ||
        !get_str(root, "zone", rec.inst.zone, sizeof(rec.inst.zone)) ||
        !get_str(root, "capacity", cap, sizeof(cap)) ||
        !get_i64(root, "node_id", &rec.inst.node_id) ||
        !get_i64(root, "launched_ms", &rec.inst.launched_ms) || !get_i64(root, "pid", &pid) ||
        !get_i64(root, "terminate_ms", &rec.terminate_ms) ||
        !get_i64(root, "terminated_ms", &rec.terminated_ms) ||
        !get_i64(root, "notice_ms", &rec.notice_ms))
        goto out;
    rec.inst.capacity = strcmp(cap, "spot") == 0 ? TM_CAPACITY_SPOT : TM_CAPACITY_ON_DEMAND;
    rec.interrupted = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(root, "interrupted"));
    rec.pid = (pid_t)pid;
    *ret = rec;
    r = 0;
out:
    cJSON_Delete(root);
    return r;
}

int tm_local_record_write(const char *state_dir, const struct tm_local_record *rec)
{
    char path[TM_LOCAL_PATH_MAX], *text;
    cJSON *o = cJSON_CreateObject();
    int r = TM_ENOMEM;

    if (!o)
        return TM_ENOMEM;
    if (!cJSON_AddStringToObject(o, "id", rec->inst.id) ||
        !cJSON_AddStringToObject(o, "token", rec->inst.token) ||
        !cJSON_AddStringToObject(o, "cluster", rec->cluster) ||
        !cJSON_AddStringToObject(o, "pool", rec->inst.pool) ||
        !cJSON_AddNumberToObject(o, "node_id", (double)rec->inst.node_id) ||
        !cJSON_AddStringToObject(o, "instance_type", rec->inst.instance_type) ||
        !cJSON_AddStringToObject(o, "zone", rec->inst.zone) ||
        !cJSON_AddStringToObject(o, "capacity", tm_capacity_type_name(rec->inst.capacity)) ||
        !cJSON_AddNumberToObject(o, "launched_ms", (double)rec->inst.launched_ms) ||
        !cJSON_AddNumberToObject(o, "pid", (double)rec->pid) ||
        !cJSON_AddNumberToObject(o, "terminate_ms", (double)rec->terminate_ms) ||
        !cJSON_AddNumberToObject(o, "terminated_ms", (double)rec->terminated_ms) ||
        !cJSON_AddNumberToObject(o, "notice_ms", (double)rec->notice_ms) ||
        !cJSON_AddBoolToObject(o, "interrupted", rec->interrupted))
        goto out;
    text = cJSON_Print(o);
    if (!text)
        goto out;
    r = tm_local_path(state_dir, rec->inst.id, "instance.json", path, sizeof(path));
    if (r == 0)
        r = tm_local_write_file(path, text, strlen(text), 0644);
    cJSON_free(text);
out:
    cJSON_Delete(o);
    return r;
}

/* ---- gpus.json and notice.json -------------------------------------------- */

int tm_local_write_gpus(const char *path, int64_t node_id, int gpus, const char *model,
                        double util_percent, double busy_util_percent)
{
    cJSON *root = cJSON_CreateObject(), *arr;
    char uuid[64], name[96], *text;
    int r = TM_ENOMEM;

    if (!root)
        return TM_ENOMEM;
    arr = cJSON_AddArrayToObject(root, "gpus");
    if (!arr)
        goto out;
    for (int i = 0; i < gpus; i++) {
        cJSON *g = cJSON_CreateObject();

        if (!g || !cJSON_AddItemToArray(arr, g))
            goto out;
        snprintf(uuid, sizeof(uuid), "GPU-local-%lld-%d", (long long)node_id, i);
        snprintf(name, sizeof(name), "Fake %s", model);
        if (!cJSON_AddStringToObject(g, "uuid", uuid) || !cJSON_AddStringToObject(g, "name", name) ||
            !cJSON_AddNumberToObject(g, "util_percent", util_percent) ||
            !cJSON_AddNumberToObject(g, "memory_used_mib", util_percent > 0 ? 1024 : 0) ||
            !cJSON_AddNumberToObject(g, "memory_total_mib", 81920) ||
            !cJSON_AddNumberToObject(g, "temperature_c", 30 + util_percent / 2) ||
            !cJSON_AddNumberToObject(g, "power_w", 60 + util_percent * 3))
            goto out;
        /* the agent reports it for a GPU that a job of its holds (gpu.h) */
        if (busy_util_percent > 0 && !cJSON_AddNumberToObject(g, "busy_util_percent", busy_util_percent))
            goto out;
    }
    text = cJSON_PrintUnformatted(root);
    if (!text)
        goto out;
    r = tm_local_write_file(path, text, strlen(text), 0644);
    cJSON_free(text);
out:
    cJSON_Delete(root);
    return r;
}

int tm_local_notice_write(const char *state_dir, const char *id, const char *action,
                          int64_t notice_ms, int64_t deadline_ms)
{
    char path[TM_LOCAL_PATH_MAX], text[512];
    struct stat st;
    int w, r;

    r = tm_local_path(state_dir, id, NULL, path, sizeof(path));
    if (r < 0)
        return r;
    if (stat(path, &st) < 0)
        return -errno;
    r = tm_local_path(state_dir, id, "notice.json", path, sizeof(path));
    if (r < 0)
        return r;
    w = snprintf(text, sizeof(text),
                 "{\"action\":\"%s\",\"notice_ms\":%lld,\"deadline_ms\":%lld,"
                 "\"event_id\":\"local:%s:%lld\"}\n",
                 action, (long long)notice_ms, (long long)deadline_ms, id, (long long)notice_ms);
    if (w < 0 || (size_t)w >= sizeof(text))
        return TM_EINVAL;
    return tm_local_write_file(path, text, (size_t)w, 0644);
}

int tm_local_notice_read(const char *state_dir, const char *id, int64_t *ret_notice_ms,
                         int64_t *ret_deadline_ms, bool *ret_acked)
{
    char path[TM_LOCAL_PATH_MAX];
    int64_t notice = 0, deadline = 0;
    cJSON *root;
    int r;

    r = read_json(state_dir, id, "notice.json", &root);
    if (r < 0)
        return r;
    if (!cJSON_IsObject(root) || !get_i64(root, "deadline_ms", &deadline)) {
        cJSON_Delete(root);
        return TM_EBADREPLY;
    }
    get_i64(root, "notice_ms", &notice);
    cJSON_Delete(root);
    *ret_notice_ms = notice;
    *ret_deadline_ms = deadline;
    r = tm_local_path(state_dir, id, "ack", path, sizeof(path));
    *ret_acked = r == 0 && access(path, F_OK) == 0;
    return 0;
}

/* ---- processes ----------------------------------------------------------- */

/* Field 6 of /proc/PID/stat, or -1 for a zombie (it is gone, only not yet
 * reaped); the command may hold spaces and parentheses, so read after the
 * last ')'. */
static pid_t session_of(pid_t pid)
{
    char path[64], buf[1024], *p, state = 0;
    long sid = -1;
    size_t n;
    FILE *f;

    snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
    f = fopen(path, "re");
    if (!f)
        return -1;
    n = fread(buf, 1, sizeof(buf) - 1, f);
    fclose(f);
    buf[n] = '\0';
    p = strrchr(buf, ')');
    if (!p || sscanf(p + 1, " %c %*d %*d %ld", &state, &sid) != 2 || state == 'Z' || state == 'X')
        return -1;
    return (pid_t)sid;
}

static bool has_marker(pid_t pid, const char *marker, size_t mlen)
{
    char path[64], *env = NULL;
    size_t len = 0;
    bool hit = false;

    snprintf(path, sizeof(path), "/proc/%d/environ", (int)pid);
    if (tm_file_read(path, 1 << 20, &env, &len, NULL, 0) < 0)
        return false;
    for (size_t i = 0; i < len; i += strlen(env + i) + 1)
        if (strncmp(env + i, marker, mlen) == 0 && env[i + mlen] == '\0') {
            hit = true;
            break;
        }
    free(env);
    return hit;
}

#define SCAN_MAX 4096

int tm_local_signal_node(const char *node_dir, int sig)
{
    char marker[TM_LOCAL_PATH_MAX + 32];
    pid_t pids[SCAN_MAX], sids[SCAN_MAX], sessions[64];
    size_t np = 0, ns = 0, mlen;
    int count = 0;
    struct dirent *de;
    DIR *d;

    mlen = (size_t)snprintf(marker, sizeof(marker), "TM_LOCAL_NODE_DIR=%s", node_dir);
    if (mlen >= sizeof(marker))
        return TM_EINVAL;
    d = opendir("/proc");
    if (!d)
        return -errno;
    while ((de = readdir(d)) && np < SCAN_MAX) {
        char *end;
        long pid = strtol(de->d_name, &end, 10);

        if (*end || pid <= 1 || pid == getpid())
            continue;
        pids[np] = (pid_t)pid;
        sids[np] = session_of((pid_t)pid);
        if (sids[np] < 0)
            continue; /* gone or a zombie */
        if (has_marker((pid_t)pid, marker, mlen) && ns < 64) {
            bool dup = false;
            for (size_t k = 0; k < ns; k++)
                dup |= sessions[k] == sids[np];
            if (!dup && sids[np] > 1 && sids[np] != getsid(0))
                sessions[ns++] = sids[np];
            /* A marked process outside a session of its own is counted
             * below through its marker: give it a pseudo session. */
            if (sids[np] <= 1 || sids[np] == getsid(0))
                sids[np] = -2;
        }
        np++;
    }
    closedir(d);
    for (size_t i = 0; i < np; i++) {
        bool mine = sids[i] == -2;

        for (size_t k = 0; !mine && k < ns; k++)
            mine = sids[i] == sessions[k];
        if (!mine)
            continue;
        if (sig == 0 || kill(pids[i], sig) == 0 || errno != ESRCH)
            count++;
    }
    return count;
}
