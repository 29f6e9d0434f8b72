/*
 * controller/agent/agent.h: `tarmac agent`, the program on every node.
 *
 * One libuv loop drives everything; nothing on it blocks on the network:
 *
 *   enroll (once, when DIR/token is absent)
 *     -> re-adopt the jobs of DIR/state.json (pid and start time checked)
 *     -> every sample period: read the GPUs into a bounded batch
 *     -> every heartbeat period: POST the batch and the running jobs; the
 *        answer's assignments are what should run: start what does not
 *        run, stop what is no longer listed (signal, grace, SIGKILL to the
 *        whole process group)
 *     -> report each start and each exit (with the last 4 KB of output),
 *        retried with backoff until the controller has them
 *     -> on a metadata notice: POST the interruption at once, give
 *        checkpointable jobs their signal, acknowledge once none runs.
 *
 * Files under the work directory (0711: a job's user may pass through to
 * its own folder, and may list nothing): token and state.json (0600, see
 * state.h), jobs/ (0711), jobs/<job>-<attempt>.log (0600, the agent's: the
 * job writes it through the descriptor it was given), jobs/<job>-<attempt>/
 * (the job's folder and working directory, its user's while it runs; the
 * wrapper's exit status file, .status, is there), env/ (0700: container
 * jobs' env files).
 */
#ifndef TM_AGENT_H
#define TM_AGENT_H

#include <stdbool.h>
#include <stdint.h>

struct tm_agent_options {
    const char *controller_url;     /* http(s)://host:port, no trailing path */
    int64_t node_id;
    const char *work_dir;
    const char *enroll_secret;      /* needed only when DIR/token is absent */
    /* --join: the owned pool this machine joins (node_id is then what the
     * join answers) and the join token, needed only for its first join
     * (docs/owned.md); NULL both without --join. */
    const char *join_pool;
    const char *join_token;
    const char *ca_file;            /* may be NULL */
    const char *gpu_fake;           /* fake GPU file, or NULL for NVML */
    const char *metadata_kind;      /* none, or a reader's kind (metadata.h) */
    const char *metadata_url;       /* may be NULL: the provider's default */
    int64_t heartbeat_ms;
    int64_t sample_ms;
    const char *container_template; /* NULL: TM_AGENT_CONTAINER_DEFAULT */
    const char *container_stop;     /* run after the grace for a job with an image;
                                     * NULL: "docker kill {name}" with the default
                                     * template, else nothing */
    int checkpoint_signal;
    int64_t kill_grace_ms;
    /* While the controller is away, tries double from 1 s up to this
     * (default 60 s): a fleet of agents does not hammer a recovering
     * controller, and a node is heard again at most this long (plus a
     * heartbeat) after it is back. */
    int64_t retry_max_ms;
    int64_t log_cap_bytes;
    /* Who runs a job (docs/isolation.md).  An agent running as root runs
     * each job on the host under a user of its own: a UID from
     * [job_uid_first, job_uid_last] that no other job and no process
     * holds, with no passwd entry, GID job_gid (or the UID's number when
     * job_gid < 0) and no supplementary groups.  An agent not running as
     * root refuses host jobs unless jobs_as_agent_user. */
    uint32_t job_uid_first, job_uid_last;
    int64_t job_gid;
    bool jobs_as_agent_user;
    /* The node's address for its jobs' peers, sent at enrollment: NULL
     * takes 127.0.0.1 with the local metadata, the cloud's private IPv4
     * from its metadata service with aws, gcp or azure (tm_agent_address). */
    const char *advertise_addr;
};

/* The default --job-uids: above the 16-bit range that passwd files and
 * systemd's dynamic users (61184-65519) use, below the subordinate ranges
 * that user namespaces are given (100000 and up, by useradd's default). */
#define TM_AGENT_JOB_UID_FIRST 70000
#define TM_AGENT_JOB_UID_LAST 79999

/* Run until the controller says the node is gone (409: every job stopped,
 * exit 0), SIGTERM/SIGINT (jobs keep running for the next agent, exit 0),
 * or a fatal error (exit 1 after saying why: the enrollment secret
 * refused, the work directory unusable). */
int tm_agent_run(const struct tm_agent_options *o);

/* Whether a URL's host is loopback (localhost, 127.0.0.0/8, ::1). */
bool tm_agent_url_is_loopback(const char *url);

#endif
