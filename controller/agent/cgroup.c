/*
 * controller/agent/cgroup.c: a job's CPU and memory requests as cgroup v2
 * limits (cpu.max, memory.max), where this machine lets the agent write.
 *
 * cgroup v2 allows controllers in a child only when the parent holds no
 * process itself, so the agent first moves itself into a leaf
 * (<own>/tarmac-agent), then enables +cpu +memory for its children, and
 * gives each job <own>/tarmac-job-<job>-<attempt>.  Any step refused: one
 * message at start, and jobs run without limits.  The few small writes to
 * cgroupfs are not network I/O and do not block.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <unistd.h>

#include "controller/agent/internal.h"
#include "core/log.h"

static int write_file(const char *dir, const char *name, const char *text)
{
    char path[PATH_MAX + 64];
    int fd, r = 0;

    snprintf(path, sizeof(path), "%s/%s", dir, name);
    fd = open(path, O_WRONLY | O_CLOEXEC);
    if (fd < 0)
        return -errno;
    if (write(fd, text, strlen(text)) < 0)
        r = -errno;
    close(fd);
    return r;
}

void tm_agent_cgroup_init(struct tm_agent *ag)
{
    char line[PATH_MAX], leaf[PATH_MAX + 16], pid[32];
    const char *why = NULL;
    FILE *f = fopen("/proc/self/cgroup", "re");
    int r = 0;

    ag->cg_ok = false;
    if (!f) {
        why = "no /proc/self/cgroup";
        goto out;
    }
    line[0] = '\0';
    while (fgets(line, sizeof(line), f))
        if (strncmp(line, "0::", 3) == 0)
            break;
    fclose(f);
    if (strncmp(line, "0::", 3) != 0) {
        why = "not on cgroup v2";
        goto out;
    }
    line[strcspn(line, "\n")] = '\0';
    if (strlen(line + 3) + sizeof("/sys/fs/cgroup") > sizeof(ag->cg_base)) {
        why = "cgroup path too long";
        goto out;
    }
    snprintf(ag->cg_base, sizeof(ag->cg_base), "/sys/fs/cgroup%.*s",
             (int)(sizeof(ag->cg_base) - sizeof("/sys/fs/cgroup")),
             strcmp(line + 3, "/") == 0 ? "" : line + 3);
    /* A restarted agent is already in its leaf: use the parent. */
    {
        size_t n = strlen(ag->cg_base), k = strlen("/tarmac-agent");
        if (n > k && strcmp(ag->cg_base + n - k, "/tarmac-agent") == 0)
            ag->cg_base[n - k] = '\0';
    }
    {
        /* A hybrid host mounts cgroup v1 controllers under a tmpfs there:
         * a mkdir would succeed and mean nothing. */
        struct statfs fs;
        if (statfs(ag->cg_base, &fs) != 0 || (unsigned long)fs.f_type != 0x63677270UL) {
            why = "not a cgroup v2 file system";
            goto out;
        }
    }
    snprintf(leaf, sizeof(leaf), "%s/tarmac-agent", ag->cg_base);
    if (mkdir(leaf, 0755) != 0 && errno != EEXIST) {
        why = "cannot create a child cgroup";
        r = -errno;
        goto out;
    }
    snprintf(pid, sizeof(pid), "%d", (int)getpid());
    r = write_file(leaf, "cgroup.procs", pid);
    if (r < 0) {
        why = "cannot move the agent into its leaf cgroup";
        goto out;
    }
    r = write_file(ag->cg_base, "cgroup.subtree_control", "+cpu +memory");
    if (r < 0) {
        why = "cannot enable the cpu and memory controllers";
        goto out;
    }
    ag->cg_ok = true;
    tm_log_info("cgroup v2 limits on", "base=%s", ag->cg_base);
    return;
out:
    tm_log_warn("cgroup v2 is not writable here: job cpu and memory requests are not enforced",
                "why=\"%s\" err=%s", why, r < 0 ? strerror(-r) : "none");
}

void tm_agent_cgroup_job(struct tm_agent *ag, struct tm_agent_job *j, const struct tm_agent_assignment *a)
{
    char text[64];
    int r;

    j->cgroup[0] = '\0';
    if (!ag->cg_ok || (a->cpu_milli <= 0 && a->memory_mib <= 0))
        return;
    snprintf(j->cgroup, sizeof(j->cgroup), "%.3900s/tarmac-job-%lld-%lld", ag->cg_base,
             (long long)a->job_id, (long long)a->attempt);
    if (mkdir(j->cgroup, 0755) != 0 && errno != EEXIST) {
        tm_log_warn("could not create the job's cgroup, running it without limits", "job=%lld err=%s",
                    (long long)a->job_id, strerror(errno));
        j->cgroup[0] = '\0';
        return;
    }
    if (a->cpu_milli > 0) {
        /* cpu_milli thousandths of a CPU = cpu_milli * 100 us per 100 ms. */
        snprintf(text, sizeof(text), "%lld 100000", (long long)a->cpu_milli * 100);
        write_file(j->cgroup, "cpu.max", text);
    }
    if (a->memory_mib > 0) {
        snprintf(text, sizeof(text), "%lld", (long long)a->memory_mib * 1024 * 1024);
        write_file(j->cgroup, "memory.max", text);
    }
    snprintf(text, sizeof(text), "%d", j->pid);
    r = write_file(j->cgroup, "cgroup.procs", text);
    if (r < 0)
        tm_log_warn("could not move the job into its cgroup", "job=%lld err=%s", (long long)a->job_id,
                    strerror(-r));
}

void tm_agent_cgroup_remove(struct tm_agent_job *j)
{
    if (j->cgroup[0])
        rmdir(j->cgroup); /* EBUSY while a straggler lives: harmless */
}
