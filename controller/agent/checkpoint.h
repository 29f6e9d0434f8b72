/*
 * controller/agent/checkpoint.h: each attempt's checkpoint folder and
 * where the next attempt resumes from.
 *
 * The controller names a checkpointable job's folder on the pool's shared
 * storage, POOL_CHECKPOINT_DIR/job-ID (the answer's checkpoint_dir, the
 * same for every attempt).  The agent gives each attempt its own folder
 * inside it, JOB_DIR/attempt-N (TARMAC_CHECKPOINT_DIR; made by the agent and
 * given to the user of a job on the host, by the job in a container), so a straggler of an old attempt cannot overwrite the new one's
 * checkpoint.  A job marks a checkpoint complete by writing the file
 * COMPLETE in its folder last, after every other file of the checkpoint is
 * written and flushed (write it under another name and rename it, so it
 * appears whole); a job that rewrites its checkpoint in place removes
 * COMPLETE first.  The newest complete checkpoint is the folder of the
 * highest earlier attempt that holds COMPLETE: the agent looks for it when
 * it starts an attempt and gives it as TARMAC_RESUME_DIR.
 */
#ifndef TM_AGENT_CHECKPOINT_H
#define TM_AGENT_CHECKPOINT_H

#include <stddef.h>
#include <stdint.h>

/* The file whose presence makes an attempt's checkpoint complete. */
#define TM_CHECKPOINT_COMPLETE "COMPLETE"

/* JOB_DIR/attempt-N into out: 0, or TM_EINVAL when out is too small. */
int tm_agent_attempt_dir(const char *job_dir, int64_t attempt, char *out, size_t outlen);

/* The folder of the newest complete checkpoint of an attempt before
 * `attempt` under job_dir into out: 1 when found, 0 when none (no earlier
 * attempt, none complete, or job_dir not there yet), TM_EINVAL when out is
 * too small.  One readdir of job_dir and a stat per earlier attempt. */
int tm_agent_resume_dir(const char *job_dir, int64_t attempt, char *out, size_t outlen);

#endif
