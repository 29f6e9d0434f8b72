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
 * Files under the work directory: token (0600), state.json (see state.h),
 * jobs/<job>-<attempt>.log and .status (the wrapper's exit status).
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
    const char *ca_file;            /* may be NULL */
    const char *gpu_fake;           /* fake GPU file, or NULL for NVML */
    const char *metadata_kind;      /* none|aws|gcp|azure|local */
    const char *metadata_url;       /* may be NULL: the provider's default */
    int64_t heartbeat_ms;
    int64_t sample_ms;
    const char *container_template; /* NULL: TM_AGENT_CONTAINER_DEFAULT */
    const char *container_stop;     /* run after the grace for a job with an image;
                                     * NULL: "docker kill {name}" with the default
                                     * template, else nothing */
    int checkpoint_signal;
    int64_t kill_grace_ms;
    int64_t log_cap_bytes;
};

/* Run until the controller says the node is gone (409: every job stopped,
 * exit 0), SIGTERM/SIGINT (jobs keep running for the next agent, exit 0),
 * or a fatal error (exit 1 after saying why: the enrollment secret
 * refused, the work directory unusable). */
int tm_agent_run(const struct tm_agent_options *o);

/* Whether a URL's host is loopback (localhost, 127.0.0.0/8, ::1). */
bool tm_agent_url_is_loopback(const char *url);

#endif
