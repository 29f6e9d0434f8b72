/*
 * providers/local/local_provider.h: `kind: local`, nodes that are
 * `tarmac agent` processes on this machine (providers/local/README.md).
 *
 * launch writes the node's filled bootstrap to STATE_DIR/nodes/ID/ and runs
 * it with /bin/sh in a session (so a process group) of its own, with
 *   TARMAC_BIN             this binary (/proc/self/exe)
 *   TARMAC_AGENT_WORK_DIR  STATE_DIR/nodes/ID/work
 *   TARMAC_GPU_FAKE        STATE_DIR/nodes/ID/gpus.json (the type's GPUs at
 *                          the provider's gpu_util_percent)
 *   TARMAC_METADATA        the provider's metadata key (local, aws, gcp, azure, none)
 *   TARMAC_METADATA_URL    file://STATE_DIR/nodes/ID/notice.json for local,
 *                          METADATA_URL/n/NODE_ID for the three clouds' fakes
 *   TARMAC_AGENT_ARGS      the provider's agent_args
 *   TM_LOCAL_NODE_DIR      the node's folder: marks its processes (not TARMAC_*,
 *                          which the agent keeps from its jobs)
 * and nothing else of the controller's environment but PATH, HOME, LANG,
 * TMPDIR and TZ (the controller's may hold database and cloud secrets).
 *
 * The instance's record is written to the folder, so listings (complete:
 * every folder of this cluster) survive a controller restart, and a second
 * launch with the same token answers the same instance without starting
 * anything.  terminate sends SIGTERM to every process of the node (the agent
 * and its jobs), SIGKILL to those left after 10 s, and the instance is
 * terminated once none is left.  A spot node interrupted on demand
 * (tm_local_interrupt) is listed with its notice time, and is killed and
 * listed as interrupted at the deadline, or as soon as its agent
 * acknowledged the notice (it drained).
 *
 * Calls follow providers/provider.h: 0 and a callback later (a zero timer),
 * or a negative code and none.  launch statuses: 0; TM_ENOTFOUND (type not
 * described); TM_EQUOTA (spot not offered for the type, or its capacity
 * used); TM_EINVAL (no bootstrap: the pool needs `bootstrap:`); -errno
 * (the state folder could not be written or the shell not started).
 */
#ifndef TM_LOCAL_PROVIDER_H
#define TM_LOCAL_PROVIDER_H

#include <stddef.h>
#include <stdint.h>

#include <uv.h>

#include "providers/provider.h"

struct tm_config_provider;

/* The provider for p (kind local): its keys are copied.  now_ms(clock) is
 * the controller's clock for every stored time. */
int tm_local_provider_create(uv_loop_t *loop, const struct tm_config_provider *p,
                             int64_t (*now_ms)(void *clock), void *clock,
                             struct tm_provider **ret);

/* Raise an interruption notice for node node_id of state_dir: the node's
 * agent (metadata local) sees it within its poll period, the listing
 * carries it, and the instance goes at deadline_ms (wall clock, ms).
 * 0; TM_ENOTFOUND (no live node with that id, err says so), -errno. */
int tm_local_interrupt(const char *state_dir, int64_t node_id, int64_t now_ms, int64_t deadline_ms,
                       char *err, size_t errlen);

/* `tarmac local interrupt NODE ...` (interrupt.c; argv[0] is "local"), the
 * kind's own command in its registry row.  0 done, 1 the notice could not
 * be written, 2 bad usage or no such live local node. */
int tm_local_command_main(int argc, char **argv);

#endif
