/*
 * controller/agent/jobs.c: the job processes (agent.h, job_env.h).
 *
 * A job is /bin/sh -c WRAPPER in a new session (UV_PROCESS_DETACHED), so
 * its pid is its process group and every signal goes to the group: a
 * grandchild is stopped with its parents.  The agent's own child exits
 * come from libuv's SIGCHLD handling; a job re-adopted after a restart is
 * no longer our child, so the one-second tick checks its pid and start
 * time, and its wrapper's status file says how it ended.
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <openssl/crypto.h>

#include "controller/agent/body.h"
#include "controller/agent/checkpoint.h"
#include "controller/agent/internal.h"
#include "controller/agent/job_env.h"
#include "controller/agent/logtail.h"
#include "core/err.h"
#include "core/log.h"

struct tm_agent_job *tm_agent_job_find(struct tm_agent *ag, int64_t job_id, int64_t attempt)
{
    for (struct tm_agent_job *j = ag->jobs; j; j = j->next)
        if (j->job_id == job_id && j->attempt == attempt)
            return j;
    return NULL;
}

size_t tm_agent_jobs_running(const struct tm_agent *ag)
{
    size_t n = 0;

    for (const struct tm_agent_job *j = ag->jobs; j; j = j->next)
        n += !j->exited;
    return n;
}

static void on_job_closed(uv_handle_t *h)
{
    struct tm_agent_job *j = h->data;

    if (--j->closing == 0) {
        free(j->container_kill);
        free(j);
    }
}

/* A fire-and-forget helper process (the container stop command). */
struct helper {
    uv_process_t proc;
};

static void on_helper_closed(uv_handle_t *h)
{
    free(h->data);
}

static void on_helper_exit(uv_process_t *p, int64_t status, int sig)
{
    /* nonzero is usual: the container had already gone */
    if (status != 0 || sig != 0)
        tm_log_debug("the container stop command failed", "exit_code=%lld signal=%d", (long long)status, sig);
    uv_close((uv_handle_t *)p, on_helper_closed);
}

static void run_helper(uv_loop_t *loop, const char *cmd)
{
    struct helper *h = calloc(1, sizeof(*h));
    char *args[] = {"/bin/sh", "-c", (char *)cmd, NULL};
    uv_process_options_t po;
    int r;

    if (!h)
        return;
    memset(&po, 0, sizeof(po));
    po.file = args[0];
    po.args = args;
    po.exit_cb = on_helper_exit;
    h->proc.data = h;
    r = uv_spawn(loop, &h->proc, &po);
    if (r < 0) {
        tm_log_warn("could not run the container stop command", "err=%s", uv_strerror(r));
        uv_close((uv_handle_t *)&h->proc, on_helper_closed);
    }
}

/* Unlink j from the agent's list and close its handles; freed when both
 * close callbacks have run. */
static void job_release(struct tm_agent_job *j)
{
    struct tm_agent *ag = j->agent;

    for (struct tm_agent_job **p = &ag->jobs; *p; p = &(*p)->next)
        if (*p == j) {
            *p = j->next;
            break;
        }
    if (j->uid_lock >= 0) {
        close(j->uid_lock);
        j->uid_lock = -1;
    }
    j->closing = 1; /* the grace timer always exists */
    if (j->child) {
        j->closing++;
        uv_close((uv_handle_t *)&j->proc, on_job_closed);
    }
    uv_close((uv_handle_t *)&j->grace, on_job_closed);
}

/* The wrapper's exit status file: 1 and *ret when present. */
static int read_status(const char *path, int *ret)
{
    char buf[32];
    ssize_t n;
    /* the job's user owns the folder: never follow a link it left */
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);

    if (fd < 0)
        return 0;
    n = read(fd, buf, sizeof(buf) - 1);
    close(fd);
    if (n <= 0)
        return 0;
    buf[n] = '\0';
    *ret = (int)strtol(buf, NULL, 10);
    return 1;
}

/* A shell says 128+N for a command killed by signal N: report it as the
 * signal (an `exit 130` of its own reads the same; see README). */
static void fill_code(struct tm_agent_report *r, int status, int term_signal)
{
    if (term_signal) {
        r->signal = term_signal;
    } else if (status > 128 && status <= 128 + 64) {
        r->signal = status - 128;
    } else {
        r->has_code = true;
        r->exit_code = status;
    }
}

/* The job's leader is gone: report how it ended, clean up what remains. */
static void job_ended(struct tm_agent_job *j, bool known, int status, int term_signal)
{
    struct tm_agent *ag = j->agent;
    struct tm_agent_report r;
    int st;

    memset(&r, 0, sizeof(r));
    r.job_id = j->job_id;
    r.attempt = j->attempt;
    if (!known && read_status(j->status_path, &st)) {
        known = true;
        status = st;
        term_signal = 0;
    }
    if (known) {
        fill_code(&r, status, term_signal);
        snprintf(r.reason, sizeof(r.reason), "%s", j->stopping[0] ? j->stopping : "exited");
    } else {
        /* re-adopted, and killed before its wrapper could write: unknown */
        snprintf(r.reason, sizeof(r.reason), "%s", j->stopping[0] ? j->stopping : "lost");
    }
    if (ag->o.log_cap_bytes > 0)
        tm_agent_ship_cap(ag, j);
    tm_agent_log_tail(j->log_path, j->log_dropped, r.tail, sizeof(r.tail));
    tm_agent_ship_end(ag, j->job_id, j->attempt);
    /* Whatever of the group outlived its leader (a background child) goes too. */
    if (j->pid > 1)
        kill(-j->pid, SIGKILL);
    /* A stopped container job: its client may have died first (the shell
     * between it and the wrapper does on SIGTERM), and a killed client
     * leaves its container running, so stop the container by name. */
    if (j->container_kill && j->stopping[0])
        run_helper(ag->loop, j->container_kill);
    j->exited = true;
    uv_timer_stop(&j->grace);
    tm_agent_cgroup_remove(j);
    unlink(j->status_path);
    tm_agent_job_dir_close(j);
    tm_log_info("job ended", "job=%lld attempt=%lld reason=%s exit_code=%d signal=%d",
                (long long)j->job_id, (long long)j->attempt, r.reason, r.has_code ? r.exit_code : -1,
                r.signal);
    tm_agent_remember_done(ag, j->job_id, j->attempt);
    if (!j->stale)
        tm_agent_add_report(ag, &r);
    job_release(j);
    tm_agent_save_state(ag);
    tm_agent_job_gone(ag);
}

static bool group_alive(const struct tm_agent_job *j)
{
    return j->pid > 1 && kill(-j->pid, 0) == 0;
}

/* The leader exited during a stop: poll the group until it is empty or
 * the grace is over, then report the end as the leader gave it. */
static void on_drain(uv_timer_t *t)
{
    struct tm_agent_job *j = t->data;

    if (group_alive(j) && uv_now(j->agent->loop) < j->drain_until)
        return;
    uv_timer_stop(t);
    if (group_alive(j))
        tm_log_warn("job outlived its grace period, killing its process group",
                    "job=%lld attempt=%lld pid=%d", (long long)j->job_id, (long long)j->attempt, j->pid);
    job_ended(j, true, j->leader_status, j->leader_signal);
}

static void on_exit_cb(uv_process_t *p, int64_t exit_status, int term_signal)
{
    struct tm_agent_job *j = p->data;

    /* A stop signals the whole group, and the shell that runs the job's
     * command may die of it at once while the program it started still
     * writes its checkpoint: give the group what is left of the grace
     * before the rest of it is killed. */
    if (j->stopping[0] && j->grace_armed && group_alive(j)) {
        uint64_t left = uv_timer_get_due_in(&j->grace);

        j->leader_exited = true;
        j->leader_status = (int)exit_status;
        j->leader_signal = term_signal;
        j->drain_until = uv_now(j->agent->loop) + left;
        uv_timer_stop(&j->grace);
        uv_timer_start(&j->grace, on_drain, 50, 50);
        return;
    }
    job_ended(j, true, (int)exit_status, term_signal);
}

static void on_grace(uv_timer_t *t)
{
    struct tm_agent_job *j = t->data;

    tm_log_warn("job outlived its grace period, killing its process group",
                "job=%lld attempt=%lld pid=%d", (long long)j->job_id, (long long)j->attempt, j->pid);
    if (j->pid > 1)
        kill(-j->pid, SIGKILL);
}

void tm_agent_job_stop(struct tm_agent_job *j, int sig, const char *reason)
{
    if (j->exited)
        return;
    if (!j->stopping[0] || strcmp(reason, j->stopping) != 0)
        snprintf(j->stopping, sizeof(j->stopping), "%s", reason);
    if (j->pid > 1 && kill(-j->pid, sig) != 0 && errno != ESRCH)
        tm_log_warn("could not signal job", "job=%lld pid=%d err=%s", (long long)j->job_id, j->pid,
                    strerror(errno));
    if (j->leader_exited) {
        /* draining: on_drain reports the end once the group is gone */
        if (sig == SIGKILL)
            j->drain_until = 0;
    } else if (sig == SIGKILL) {
        uv_timer_stop(&j->grace);
    } else if (!j->grace_armed) {
        j->grace_armed = true;
        uv_timer_start(&j->grace, on_grace, (uint64_t)j->agent->o.kill_grace_ms, 0);
    }
    tm_agent_save_state(j->agent);
}

static struct tm_agent_job *job_new(struct tm_agent *ag, int64_t job_id, int64_t attempt)
{
    struct tm_agent_job *j = calloc(1, sizeof(*j));

    if (!j)
        return NULL;
    j->agent = ag;
    j->job_id = job_id;
    j->attempt = attempt;
    j->uid_lock = -1;
    snprintf(j->dir, sizeof(j->dir), "%.3800s/%lld-%lld", ag->jobs_dir, (long long)job_id, (long long)attempt);
    snprintf(j->log_path, sizeof(j->log_path), "%.3800s.log", j->dir);
    /* in the job's folder: the wrapper writes it as the job's user */
    snprintf(j->status_path, sizeof(j->status_path), "%.3800s/.status", j->dir);
    snprintf(j->env_file, sizeof(j->env_file), "%.3800s/%lld-%lld.env", ag->env_dir, (long long)job_id,
             (long long)attempt);
    uv_timer_init(ag->loop, &j->grace);
    j->grace.data = j;
    j->next = ag->jobs;
    ag->jobs = j;
    return j;
}

static bool job_sets(const struct tm_agent_assignment *a, const char *name)
{
    for (size_t i = 0; i < a->env_count; i++)
        if (strcmp(a->env_names[i], name) == 0)
            return true;
    return false;
}

/* The checkpoint folder (made with its parents when missing) and what is
 * in it become the job's user's: an attempt resumes from what an earlier
 * one, under another UID, wrote there, and the earlier one's leftovers can
 * no longer write into it.  uid 0: the job runs as the agent's own user,
 * who made the folder and owns it already. */
static int checkpoint_dir_own(const char *path, uint32_t uid, uint32_t gid)
{
    char buf[PATH_MAX];

    if (snprintf(buf, sizeof(buf), "%s", path) >= (int)sizeof(buf) || buf[0] != '/')
        return UV_EINVAL;
    for (char *p = buf + 1; *p; p++) {
        if (*p != '/')
            continue;
        *p = '\0';
        /* chmod too: the agent's umask (077 from the bootstrap) applies */
        if (mkdir(buf, 0755) == 0)
            chmod(buf, 0755);
        else if (errno != EEXIST)
            return -errno;
        *p = '/';
    }
    if (mkdir(buf, 0700) != 0 && errno != EEXIST)
        return -errno;
    return uid ? tm_agent_tree_own(buf, uid, gid) : 0;
}

/* A job that could not be started: report exit 127 with why as its tail,
 * as a shell does for a command it cannot run. */
static void report_unstartable(struct tm_agent *ag, const struct tm_agent_assignment *a, const char *why)
{
    struct tm_agent_report r;

    memset(&r, 0, sizeof(r));
    r.job_id = a->job_id;
    r.attempt = a->attempt;
    r.has_code = true;
    r.exit_code = 127;
    snprintf(r.reason, sizeof(r.reason), "exited");
    snprintf(r.tail, sizeof(r.tail), "tarmac agent: %s\n", why);
    tm_utf8_clean(r.tail, strlen(r.tail));
    tm_log_error("could not start job", "job=%lld attempt=%lld err=\"%s\"", (long long)a->job_id,
                 (long long)a->attempt, why);
    tm_agent_remember_done(ag, a->job_id, a->attempt);
    tm_agent_add_report(ag, &r);
    tm_agent_save_state(ag);
}

/* All of text to fd: 0, or -errno. */
static int write_all(int fd, const char *text, size_t len)
{
    for (size_t off = 0; off < len;) {
        ssize_t w = write(fd, text + off, len - off);
        if (w < 0 && errno != EINTR)
            return -errno;
        if (w > 0)
            off += (size_t)w;
    }
    return 0;
}

/* The rendezvous hostfile in the job's folder (the agent's file, 0644:
 * the job's user reads it; a container job's template mounts it with
 * {hostfile}).  0 or -errno. */
static int write_hostfile(const struct tm_agent_assignment *a)
{
    char *text = NULL;
    size_t len = 0;
    int fd, r;

    r = tm_agent_hostfile_text(&a->rdv, &text, &len);
    if (r < 0)
        return r == TM_ENOMEM ? -ENOMEM : -EINVAL;
    (void)unlink(a->hostfile);
    fd = open(a->hostfile, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0644);
    r = fd < 0 ? -errno : 0;
    if (r == 0)
        r = write_all(fd, text, len);
    if (fd >= 0 && fchmod(fd, 0644) != 0 && r == 0)
        r = -errno;
    if (fd >= 0 && close(fd) != 0 && r == 0)
        r = -errno;
    free(text);
    return r;
}

/* The host side of a container job: the env file (0600, in the agent's
 * env/ folder) and the filled template; a job on the host: its user, its
 * environment with HOME in its folder, its checkpoint folder made its
 * own.  0, or -1 with why said. */
static int job_prepare(struct tm_agent *ag, struct tm_agent_job *j, const struct tm_agent_assignment *a,
                       char ***env, char **cmd, char *why, size_t whylen)
{
    const char *tmpl = ag->o.container_template ? ag->o.container_template : TM_AGENT_CONTAINER_DEFAULT;
    char *text = NULL;
    size_t len = 0;
    int fd, r;

    if (a->image) {
        j->uid = 0;
        if (tm_agent_container_env_file(a, ag->last.info, ag->last.count, &text, &len) < 0) {
            snprintf(why, whylen, "a container job's variables cannot be written to an env file "
                                  "(a value holds a line break)");
            return -1;
        }
        fd = open(j->env_file, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
        r = fd < 0 ? -errno : 0;
        if (r == 0)
            r = write_all(fd, text, len);
        if (fd >= 0 && close(fd) != 0 && r == 0)
            r = -errno;
        OPENSSL_cleanse(text, len);
        free(text);
        if (r < 0) {
            snprintf(why, whylen, "could not write the env file %.160s: %s", j->env_file, uv_strerror(r));
            return -1;
        }
        if (tm_agent_container_command(tmpl, a, ag->last.info, ag->last.count, j->env_file, cmd) < 0) {
            snprintf(why, whylen, "the container template has an unknown {placeholder}");
            return -1;
        }
        if (tm_agent_host_env((const char *const *)ag->base_env, env) < 0) {
            snprintf(why, whylen, "out of memory");
            return -1;
        }
    } else {
        if (ag->switch_users) {
            if (tm_agent_job_uid_pick(ag, &j->uid, &j->uid_lock) < 0) {
                snprintf(why, whylen, "no free UID in --job-uids %u-%u", (unsigned)ag->o.job_uid_first,
                         (unsigned)ag->o.job_uid_last);
                return -1;
            }
            j->gid = ag->o.job_gid >= 0 ? (uint32_t)ag->o.job_gid : j->uid;
        } else if (!ag->o.jobs_as_agent_user) {
            snprintf(why, whylen, "the agent does not run as root, so it cannot run the job under a user "
                                  "of its own (see --jobs-as-agent-user)");
            return -1;
        }
        if (tm_agent_job_env((const char *const *)ag->base_env, a, ag->last.info, ag->last.count, env) < 0 ||
            (!job_sets(a, "HOME") && tm_strv_set(env, "HOME", j->dir) < 0)) {
            snprintf(why, whylen, "out of memory");
            return -1;
        }
        if (a->checkpoint_dir) {
            r = checkpoint_dir_own(a->checkpoint_dir, j->uid, j->gid);
            if (r < 0) {
                snprintf(why, whylen, "could not give the checkpoint folder %.160s to the job's user: %s",
                         a->checkpoint_dir, uv_strerror(r));
                return -1;
            }
        }
        /* the earlier attempt's checkpoint, written under its own UID, is
         * read by this one's; its leftovers can no longer change it */
        if (j->uid && a->resume_dir) {
            r = tm_agent_tree_own(a->resume_dir, j->uid, j->gid);
            if (r < 0) {
                snprintf(why, whylen, "could not give the checkpoint %.160s to the job's user: %s",
                         a->resume_dir, uv_strerror(r));
                return -1;
            }
        }
    }
    r = tm_agent_job_dir_open(j);
    if (r < 0) {
        snprintf(why, whylen, "could not make the job's folder %.160s: %s", j->dir, uv_strerror(r));
        return -1;
    }
    if (a->hostfile) {
        r = write_hostfile(a);
        if (r < 0) {
            snprintf(why, whylen, "could not write the hostfile %.160s: %s", a->hostfile, uv_strerror(r));
            return -1;
        }
    }
    return 0;
}

int tm_agent_job_start(struct tm_agent *ag, const struct tm_agent_assignment *a)
{
    uv_process_options_t po;
    uv_stdio_container_t stdio[3];
    struct tm_agent_job *j;
    char **env = NULL;
    char *cmd = NULL;
    char *args[7];
    char why[256];
    int fd = -1, r;

    /* Each attempt checkpoints into a folder of its own and resumes from
     * the newest complete checkpoint of an earlier one, looked for now on
     * the pool's shared storage (checkpoint.h). */
    struct tm_agent_assignment own = *a;
    char attempt_dir[4096], resume[4096], hostfile[PATH_MAX + 16];
    own.resume_dir = NULL;
    if (a->checkpoint_dir) {
        if (tm_agent_attempt_dir(a->checkpoint_dir, a->attempt, attempt_dir, sizeof(attempt_dir)) < 0)
            return TM_EINVAL;
        own.checkpoint_dir = attempt_dir;
        if (tm_agent_resume_dir(a->checkpoint_dir, a->attempt, resume, sizeof(resume)) == 1)
            own.resume_dir = resume;
    }
    a = &own;
    j = job_new(ag, a->job_id, a->attempt);
    if (!j)
        return TM_ENOMEM;
    /* a job of any number of nodes has one (job_env.h) */
    if (a->rdv.given && a->rdv.master_port) {
        snprintf(hostfile, sizeof(hostfile), "%s/hostfile", j->dir);
        own.hostfile = hostfile;
    }
    j->checkpointable = a->checkpointable;
    j->gpu_mask = tm_agent_gpu_mask(a);
    if (a->image) {
        const char *stop = ag->o.container_stop;
        if (!stop && !ag->o.container_template)
            stop = "docker kill {name}";
        if (stop && stop[0] && tm_agent_container_command(stop, a, ag->last.info, ag->last.count, NULL,
                                                          &j->container_kill) < 0)
            j->container_kill = NULL;
    }
    if (job_prepare(ag, j, a, &env, &cmd, why, sizeof(why)) < 0)
        goto unstartable;
    unlink(j->status_path);
    /* The agent's file (0600): the job writes it only through this
     * descriptor, and cannot open its own log or any other by name. */
    fd = open(j->log_path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (fd < 0) {
        snprintf(why, sizeof(why), "could not open log %.160s: %s", j->log_path, strerror(errno));
        goto unstartable;
    }
    /* Its output ships from the start (log_ship.c), under its rank. */
    tm_agent_ship_open(ag, j->job_id, j->attempt, a->rdv.given ? a->rdv.rank : 0);
    args[0] = "/bin/sh";
    args[1] = "-c";
    args[2] = (char *)tm_agent_wrapper_script;
    args[3] = "tarmac-job";
    args[4] = cmd ? cmd : a->command;
    /* relative to its folder, the wrapper's working directory (entered
     * before the user switch), so it is written even where a folder above
     * is closed to the job's user */
    args[5] = ".status";
    args[6] = NULL;
    memset(&po, 0, sizeof(po));
    memset(stdio, 0, sizeof(stdio));
    stdio[0].flags = UV_IGNORE;
    stdio[1].flags = UV_INHERIT_FD;
    stdio[1].data.fd = fd;
    stdio[2].flags = UV_INHERIT_FD;
    stdio[2].data.fd = fd;
    po.file = args[0];
    po.args = args;
    po.env = env;
    po.cwd = j->dir;
    po.flags = UV_PROCESS_DETACHED;
    if (j->uid) {
        /* libuv drops the supplementary groups (setgroups(0)) before
         * setgid and setuid in the child. */
        po.flags |= UV_PROCESS_SETUID | UV_PROCESS_SETGID;
        po.uid = (uv_uid_t)j->uid;
        po.gid = (uv_gid_t)j->gid;
    }
    po.stdio_count = 3;
    po.stdio = stdio;
    po.exit_cb = on_exit_cb;
    j->proc.data = j;
    r = uv_spawn(ag->loop, &j->proc, &po);
    if (r < 0) {
        /* libuv leaves the handle to close even on failure */
        snprintf(why, sizeof(why), "could not spawn /bin/sh: %s", uv_strerror(r));
        j->child = true;
        goto unstartable;
    }
    j->child = true;
    j->pid = j->proc.pid;
    if (tm_proc_start_time(j->pid, &j->start_time) != 0)
        j->start_time = 0; /* already gone: its exit callback follows */
    tm_agent_cgroup_job(ag, j, a);
    close(fd);
    tm_strv_free(env);
    free(cmd);
    tm_log_info("job started", "job=%lld attempt=%lld pid=%d uid=%u gpus=%zu%s", (long long)a->job_id,
                (long long)a->attempt, j->pid, (unsigned)(j->uid ? j->uid : geteuid()), a->gpu_count,
                a->image ? " container=yes" : "");
    tm_agent_save_state(ag);
    tm_agent_report_start(ag, j);
    return 0;

unstartable:
    if (fd >= 0)
        close(fd);
    tm_strv_free(env);
    free(cmd);
    tm_agent_job_dir_close(j);
    j->exited = true;
    job_release(j);
    report_unstartable(ag, a, why);
    return 0;
}

int tm_agent_jobs_adopt(struct tm_agent *ag, const struct tm_agent_state *st)
{
    for (size_t i = 0; i < st->njobs; i++) {
        const struct tm_agent_state_job *sj = &st->jobs[i];
        uint64_t now_start = 0;
        bool alive = tm_proc_start_time(sj->pid, &now_start) == 0;
        struct tm_agent_job *j = job_new(ag, sj->job_id, sj->attempt);

        if (!j)
            return TM_ENOMEM;
        j->pid = sj->pid;
        j->start_time = sj->start_time;
        j->checkpointable = sj->checkpointable;
        j->log_dropped = sj->log_dropped;
        j->start_reported = sj->start_reported; /* else the tick sends it (idempotent) */
        snprintf(j->stopping, sizeof(j->stopping), "%s", sj->stopping);
        if (tm_agent_adopt_decide(sj, alive, now_start) == TM_ADOPT_KEEP) {
            tm_agent_job_uid_adopt(j);
            tm_log_info("job re-adopted", "job=%lld attempt=%lld pid=%d", (long long)j->job_id,
                        (long long)j->attempt, j->pid);
            continue;
        }
        /* Gone (or its pid now names another process): the status file
         * tells whether it finished; else it is lost. */
        tm_log_warn("job not re-adopted: its process is gone or is another one",
                    "job=%lld attempt=%lld pid=%d", (long long)j->job_id, (long long)j->attempt, j->pid);
        j->pid = 0; /* never signal a pid that may be someone else's now */
        job_ended(j, false, 0, 0);
    }
    return 0;
}

void tm_agent_jobs_tick(struct tm_agent *ag)
{
    struct tm_agent_job *j = ag->jobs, *next;

    for (; j; j = next) {
        next = j->next;
        if (j->exited)
            continue;
        if (ag->o.log_cap_bytes > 0) {
            int r = tm_agent_ship_cap(ag, j);
            if (r == 1)
                tm_log_warn("job output passed the log cap, older output dropped",
                            "job=%lld attempt=%lld cap=%lld dropped=%lld", (long long)j->job_id,
                            (long long)j->attempt, (long long)ag->o.log_cap_bytes,
                            (long long)j->log_dropped);
        }
        if (!j->child) {
            uint64_t st = 0;
            if (tm_proc_start_time(j->pid, &st) != 0 || st != j->start_time)
                job_ended(j, false, 0, 0);
        }
    }
}

void tm_agent_jobs_close(struct tm_agent *ag)
{
    /* The jobs keep running (a new session each): only our handles go.
     * libuv would reap a child whose handle is closed, so nothing zombies. */
    while (ag->jobs) {
        struct tm_agent_job *j = ag->jobs;
        j->exited = true;
        uv_timer_stop(&j->grace);
        job_release(j);
    }
}

/* ---- start reports ------------------------------------------------------ */

struct start_ctx {
    struct tm_agent *ag;
    int64_t job_id, attempt;
};

static void on_start_report(const struct tm_http_response *resp, void *data)
{
    struct start_ctx *c = data;
    struct tm_agent *ag = c->ag;
    struct tm_agent_job *j = ag->shutting_down ? NULL : tm_agent_job_find(ag, c->job_id, c->attempt);

    free(c);
    if (!j)
        return;
    j->start_inflight = false;
    if (resp->status == 0 && resp->http_status >= 200 && resp->http_status < 300) {
        j->start_reported = true;
        tm_agent_save_state(ag);
    } else if (resp->status == 0 && resp->http_status == 409) {
        tm_log_warn("the controller refused this attempt as stale, killing it", "job=%lld attempt=%lld",
                    (long long)j->job_id, (long long)j->attempt);
        j->start_reported = true;
        j->stale = true;
        tm_agent_job_stop(j, SIGKILL, "stopped");
    } else if (resp->status == 0 && resp->http_status >= 400 && resp->http_status < 500 &&
               resp->http_status != 401 && resp->http_status != 403 && resp->http_status != 429) {
        tm_log_error("start report refused", "job=%lld http=%ld", (long long)j->job_id, resp->http_status);
        j->start_reported = true; /* the heartbeat's running list still carries it */
    }
    /* else: retried by the tick */
}

void tm_agent_report_start(struct tm_agent *ag, struct tm_agent_job *j)
{
    struct start_ctx *c;
    char url[1024];
    char *body;

    if (j->start_reported || j->start_inflight || j->exited || ag->shutting_down)
        return;
    c = malloc(sizeof(*c));
    body = tm_agent_body_start(j->attempt, j->pid);
    if (!c || !body) {
        free(c);
        free(body);
        return;
    }
    *c = (struct start_ctx){ag, j->job_id, j->attempt};
    tm_agent_url(ag, url, sizeof(url), "/v1/nodes/%lld/jobs/%lld/start", (long long)ag->o.node_id,
            (long long)j->job_id);
    if (tm_agent_post(ag, url, body, on_start_report, c) == 0)
        j->start_inflight = true;
    else
        free(c);
    free(body);
}
