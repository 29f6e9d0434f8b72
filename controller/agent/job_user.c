/*
 * controller/agent/job_user.c: who a job runs as, and its folder
 * (internal.h; the whole picture is docs/isolation.md).
 *
 * An agent running as root runs each job on the host under a user of its
 * own, one per attempt: a UID from --job-uids with no passwd entry (as
 * systemd's DynamicUser does), so one job cannot read another's
 * /proc/PID/environ, signal its processes or open its files, and none can
 * read what is the agent's (token, state.json, logs, env files: 0600 in
 * folders of mode 0711 or 0700).  A UID is taken only while no process
 * holds it, and when the job ends whatever still runs under it is killed
 * and its folder given back to root, so the next job given that UID finds
 * nothing of the last one's.
 *
 * The /proc scans here are local and short (one stat per process); they
 * run once per job start and end, never per tick.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <fts.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "controller/agent/internal.h"
#include "core/err.h"
#include "core/log.h"

/* One folder per host for every agent on it (tm_agent_job_uid_pick). */
#define TM_AGENT_UID_LOCK_DIR "/run/tarmac/job-uids"

static bool uid_in_range(const struct tm_agent *ag, uint32_t uid)
{
    return ag->switch_users && uid >= ag->o.job_uid_first && uid <= ag->o.job_uid_last;
}

/* A process's real and effective user and real group, from its status
 * file ("Uid:\treal\teffective\tsaved\tfs"), which a process cannot hide
 * as it can the owner of its /proc folder (one that is not dumpable shows
 * root's there).  dirfd: /proc's, or AT_FDCWD with pid "/proc/N". */
static bool proc_ids(int dirfd, const char *pid, unsigned long *uid, unsigned long *euid,
                     unsigned long *gid)
{
    char path[64], buf[2048];
    const char *u, *g;
    ssize_t n;
    int fd;

    snprintf(path, sizeof(path), "%s/status", pid);
    fd = openat(dirfd, path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return false;
    n = read(fd, buf, sizeof(buf) - 1);
    close(fd);
    if (n <= 0)
        return false;
    buf[n] = '\0';
    u = strstr(buf, "\nUid:");
    g = strstr(buf, "\nGid:");
    return u && g && sscanf(u + 5, "%lu %lu", uid, euid) == 2 && sscanf(g + 5, "%lu", gid) == 1;
}

static bool process_of(int dirfd, const char *pid, uint32_t uid)
{
    unsigned long real, eff, gid;

    return proc_ids(dirfd, pid, &real, &eff, &gid) && (real == uid || eff == uid);
}

/* Call fn for every process of uid (real or effective); stops at the
 * first nonzero return, which it returns. */
static int each_process_of(uint32_t uid, int (*fn)(int pid, void *arg), void *arg)
{
    DIR *d = opendir("/proc");
    struct dirent *e;
    int r = 0;

    if (!d)
        return 0;
    while (r == 0 && (e = readdir(d)) != NULL) {
        char *end;
        long pid = strtol(e->d_name, &end, 10);

        if (*end || pid <= 1)
            continue;
        if (process_of(dirfd(d), e->d_name, uid))
            r = fn((int)pid, arg);
    }
    closedir(d);
    return r;
}

static int found(int pid, void *arg)
{
    (void)pid;
    (void)arg;
    return 1;
}

static int kill_one(int pid, void *arg)
{
    (void)arg;
    kill(pid, SIGKILL);
    return 0;
}

/* Whether every folder from path up is searchable by others: a job's user
 * must pass through them to reach its own folder. */
static bool reachable_by_others(const char *path, char *blocked, size_t blen)
{
    char buf[PATH_MAX];
    struct stat st;

    snprintf(buf, sizeof(buf), "%s", path);
    for (;;) {
        char *slash;
        if (stat(buf[0] ? buf : "/", &st) == 0 && !(st.st_mode & S_IXOTH)) {
            snprintf(blocked, blen, "%s", buf[0] ? buf : "/");
            return false;
        }
        slash = strrchr(buf, '/');
        if (!slash || slash == buf)
            break;
        *slash = '\0';
    }
    return true;
}

int tm_agent_job_user_init(struct tm_agent *ag)
{
    const struct tm_agent_options *o = &ag->o;
    char blocked[PATH_MAX];

    if (geteuid() != 0) {
        if (o->jobs_as_agent_user)
            tm_log_warn("JOBS ARE NOT ISOLATED: the agent does not run as root, and "
                        "--jobs-as-agent-user runs every job as the agent's own user: a job can read "
                        "the agent's token and every other job's environment and files, and signal "
                        "their processes",
                        "uid=%u", (unsigned)geteuid());
        else
            tm_log_warn("the agent does not run as root, so it cannot run jobs under users of their "
                        "own: jobs on the host will be refused (exit 127); run the agent as root, or "
                        "accept unisolated jobs with --jobs-as-agent-user",
                        "uid=%u", (unsigned)geteuid());
        return 0;
    }
    if (o->job_uid_first == 0 || o->job_uid_last < o->job_uid_first) {
        tm_log_error("--job-uids: not a range of UIDs above 0", "first=%u last=%u",
                     (unsigned)o->job_uid_first, (unsigned)o->job_uid_last);
        return TM_EINVAL;
    }
    ag->switch_users = true;
    if ((mkdir("/run/tarmac", 0755) != 0 && errno != EEXIST) ||
        (mkdir(TM_AGENT_UID_LOCK_DIR, 0700) != 0 && errno != EEXIST))
        tm_log_warn("could not make the folder of job UID locks: agents sharing this host may "
                    "give one UID to two jobs",
                    "folder=%s err=%s", TM_AGENT_UID_LOCK_DIR, strerror(errno));
    /* Jobs inherit it: what one job writes (in /tmp, a shared folder) is
     * its own unless it says otherwise. */
    umask(077);
    /* Start the search somewhere else on each start, so a UID is seldom
     * given again soon after an agent restart. */
    ag->uid_next = o->job_uid_first +
                   (uint32_t)(((uint64_t)time(NULL) ^ (uint64_t)getpid()) %
                              ((uint64_t)o->job_uid_last - o->job_uid_first + 1));
    if (!reachable_by_others(ag->jobs_dir, blocked, sizeof(blocked)))
        tm_log_warn("a job's user cannot reach its folder: a folder above it is not searchable by "
                    "others (chmod o+x it, or move --work-dir)",
                    "folder=%s", blocked);
    tm_log_info("jobs run under users of their own", "uids=%u-%u gid=%s", (unsigned)o->job_uid_first,
                (unsigned)o->job_uid_last, o->job_gid >= 0 ? "shared" : "per job");
    return 0;
}

/* Hold uid for a job on this host: an exclusive flock on a file named
 * for it under TM_AGENT_UID_LOCK_DIR.  Several agents share one host (the
 * local provider runs every node here) and the same --job-uids, and a UID
 * with no process yet, or none any more, looks free to all of them: the
 * lock is what keeps two jobs from one UID, where the end of one would
 * kill the other (tm_agent_job_dir_close).  The kernel drops the lock with
 * the agent, so a crash leaves nothing held.  -1 when another holds it;
 * -2 when no lock can be made here (then the check of running processes
 * alone decides, as on a host with one agent). */
static int uid_lock(uint32_t uid)
{
    char path[sizeof(TM_AGENT_UID_LOCK_DIR) + 16];
    int fd;

    snprintf(path, sizeof(path), "%s/%u", TM_AGENT_UID_LOCK_DIR, (unsigned)uid);
    fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (fd < 0)
        return -2;
    if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
        int e = errno;
        close(fd);
        return e == EWOULDBLOCK ? -1 : -2;
    }
    return fd;
}

int tm_agent_job_uid_pick(struct tm_agent *ag, uint32_t *ret, int *ret_lock)
{
    uint64_t range = (uint64_t)ag->o.job_uid_last - ag->o.job_uid_first + 1;

    for (uint64_t i = 0; i < range; i++) {
        uint32_t uid = ag->o.job_uid_first +
                       (uint32_t)(((uint64_t)ag->uid_next - ag->o.job_uid_first + i) % range);
        bool taken = false;
        int lock;

        for (const struct tm_agent_job *j = ag->jobs; j && !taken; j = j->next)
            taken = !j->exited && j->uid == uid;
        if (taken)
            continue;
        lock = uid_lock(uid);
        if (lock == -1)
            continue;
        if (each_process_of(uid, found, NULL)) {
            if (lock >= 0)
                close(lock);
            continue;
        }
        ag->uid_next = uid == ag->o.job_uid_last ? ag->o.job_uid_first : uid + 1;
        *ret = uid;
        *ret_lock = lock >= 0 ? lock : -1;
        return 0;
    }
    return TM_EQUOTA;
}

int tm_agent_job_dir_open(struct tm_agent_job *j)
{
    /* jobs/ is root's and 0711, so nobody else can have put a link here. */
    if (mkdir(j->dir, 0700) != 0 && errno != EEXIST)
        return -errno;
    if (lchown(j->dir, j->uid ? j->uid : geteuid(), j->uid ? j->gid : getegid()) != 0 ||
        chmod(j->dir, 0700) != 0)
        return -errno;
    return 0;
}

void tm_agent_job_dir_close(struct tm_agent_job *j)
{
    struct tm_agent *ag = j->agent;

    if (j->env_file[0] && unlink(j->env_file) != 0 && errno != ENOENT)
        tm_log_warn("could not remove a container job's env file", "path=%s err=%s", j->env_file,
                    strerror(errno));
    if (!j->uid || !uid_in_range(ag, j->uid))
        return;
    /* What outlived the job under its user (a daemon that left the
     * process group) goes now, before the UID can be given again; only
     * then is the UID's lock let go. */
    each_process_of(j->uid, kill_one, NULL);
    if (j->uid_lock >= 0) {
        close(j->uid_lock);
        j->uid_lock = -1;
    }
    if (j->dir[0] && (lchown(j->dir, 0, 0) != 0 || chmod(j->dir, 0700) != 0) && errno != ENOENT)
        tm_log_warn("could not take back a job's folder", "path=%s err=%s", j->dir, strerror(errno));
}

void tm_agent_job_uid_adopt(struct tm_agent_job *j)
{
    char path[64];
    unsigned long uid, euid, gid;

    snprintf(path, sizeof(path), "/proc/%d", j->pid);
    if (proc_ids(AT_FDCWD, path, &uid, &euid, &gid) && uid <= UINT32_MAX &&
        uid_in_range(j->agent, (uint32_t)uid)) {
        int lock = uid_lock((uint32_t)uid);

        j->uid = (uint32_t)uid;
        j->gid = (uint32_t)gid;
        if (lock >= 0)
            j->uid_lock = lock;
        else if (lock == -1)
            tm_log_warn("a re-adopted job's UID is held by another agent on this host", "job=%lld uid=%u",
                        (long long)j->job_id, (unsigned)uid);
    }
}

int tm_agent_tree_own(const char *path, uint32_t uid, uint32_t gid)
{
    char *paths[] = {(char *)path, NULL};
    FTS *fts = fts_open(paths, FTS_PHYSICAL | FTS_NOCHDIR, NULL);
    FTSENT *e;
    int r = 0;

    if (!fts)
        return -errno;
    while ((e = fts_read(fts)) != NULL) {
        if (e->fts_info == FTS_DP)
            continue; /* a folder, seen once on the way down */
        if (lchown(e->fts_accpath, uid, gid) != 0 && r == 0)
            r = -errno;
    }
    fts_close(fts);
    return r;
}
