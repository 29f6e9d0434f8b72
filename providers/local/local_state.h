/*
 * providers/local/local_state.h: the local provider's state folder, which
 * is its "cloud": one folder per instance under STATE_DIR/nodes/, holding
 *
 *   instance.json   the record (below), written whole by rename
 *   bootstrap.sh    the node's filled bootstrap (0600: it holds the
 *                   enrollment secret until the agent has spent it)
 *   gpus.json       the fake GPU source the agent samples (agent contract)
 *   work/           the agent's work directory (token, state.json, jobs/)
 *   agent.log       the agent's stdout and stderr
 *   notice.json     an interruption notice, when one was raised
 *                   (tm_local_interrupt(); `metadata: local` agents watch it)
 *   ack             written by the agent once drained (the notice's event id)
 *
 * Everything a listing needs is in these files, so a controller that
 * restarts lists exactly the nodes it had.  No loop, no libuv here.
 */
#ifndef TM_LOCAL_STATE_H
#define TM_LOCAL_STATE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "providers/provider.h"

#define TM_LOCAL_PATH_MAX 512
#define TM_LOCAL_DIR_MAX 400  /* a node folder: state_dir (<= 256) + "/nodes/" + an id */

struct tm_local_record {
    struct tm_instance inst;      /* id, token, pool, type, zone, node_id, capacity, launched_ms */
    char cluster[TM_ID_MAX];
    pid_t pid;                    /* the bootstrap shell, exec'd into the agent; 0 before spawn */
    int64_t terminate_ms;         /* terminate requested, 0 if not */
    int64_t terminated_ms;        /* gone, 0 while alive */
    int64_t notice_ms;            /* interruption notice seen, 0 if none */
    bool interrupted;
};

/* The instance id for a launch token: "local-N-HHHHHHHH" (N the node id,
 * H a hash of the token), so a token always names the same folder. */
void tm_local_instance_id(int64_t node_id, const char *token, char *buf, size_t size);

/* STATE_DIR/nodes/ID[/name] into buf; TM_EINVAL when it does not fit. */
int tm_local_path(const char *state_dir, const char *id, const char *name, char *buf, size_t size);

/* Read and write instance.json.  Read: 0, -ENOENT, or TM_EBADREPLY (a
 * damaged record).  Write: through a temporary file and rename. */
int tm_local_record_read(const char *state_dir, const char *id, struct tm_local_record *ret);
int tm_local_record_write(const char *state_dir, const struct tm_local_record *rec);

/* Write data to path (mode) whole, through a temporary file and rename. */
int tm_local_write_file(const char *path, const char *data, size_t len, unsigned mode);

/* The fake GPU source of the agent contract: gpus entries at util percent,
 * and at busy_util_percent while a job holds one (none when 0). */
int tm_local_write_gpus(const char *path, int64_t node_id, int gpus, const char *model,
                        double util_percent, double busy_util_percent);

/* A notice for the node of instance id: notice.json with the action,
 * deadline and event id, as metadata_local.c reads it.  notice_ms is
 * recorded too, so listings carry the notice time. */
int tm_local_notice_write(const char *state_dir, const char *id, const char *action,
                          int64_t notice_ms, int64_t deadline_ms);
/* 0 and the notice's times; -ENOENT when none; *ret_acked when the agent
 * acknowledged it (it has drained). */
int tm_local_notice_read(const char *state_dir, const char *id, int64_t *ret_notice_ms,
                         int64_t *ret_deadline_ms, bool *ret_acked);

/* Every process of the node: those whose environment names its folder
 * (TM_LOCAL_NODE_DIR, set by the provider and inherited), and every
 * process in their sessions (the agent's jobs: own process groups, same
 * session).  Sends sig to each; returns how many there were, or -errno
 * when /proc cannot be read.  sig 0 only counts. */
int tm_local_signal_node(const char *node_dir, int sig);

#endif
