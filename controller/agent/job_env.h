/*
 * controller/agent/job_env.h: what a job's process is given, built by pure
 * functions from an assignment and the node's GPUs (no I/O, no loop), so
 * the unit tests check each variable with known answers.
 *
 * Environment of a job run on the host: the agent's own environment
 * without TARMAC_* (the enrollment secret must never reach a job) and
 * without the CUDA and MASTER_ variables set below, then the job's env, then
 *   CUDA_VISIBLE_DEVICES   the UUIDs of gpu_indices, comma-separated ("" for
 *                          a job placed on no GPU, so it sees none)
 *   TARMAC_JOB_ID, TARMAC_ATTEMPT
 *   TARMAC_CHECKPOINT_DIR  when checkpoint_dir is given (jobs.c sets it to
 *                          the attempt's own folder, checkpoint.h)
 *   TARMAC_RESUME_DIR      with it, when resume_dir is set: the newest
 *                          complete checkpoint of an earlier attempt
 *   with the answer's rendezvous (answer.h), for a job of any number of
 *   nodes, one included:
 *   TARMAC_NODE_RANK, TARMAC_NUM_NODES, TARMAC_GPUS_PER_NODE
 *   TARMAC_NODE_ADDRS      the nodes' addresses in rank order, comma-separated
 *   TARMAC_MASTER_ADDR, TARMAC_MASTER_PORT  rank 0's address and port
 *   TARMAC_HOSTFILE        when the agent wrote one (a->hostfile): one
 *                          "ADDR slots=G" line per node (tm_agent_hostfile_text)
 *   MASTER_ADDR, MASTER_PORT  the same two values, for PyTorch's env://
 *   TARMAC_GPU_MILLI and CUDA_MPS_ACTIVE_THREAD_PERCENTAGE (= milli / 10,
 *                          at least 1) for a fractional share (one GPU,
 *                          gpu_milli below 1000)
 *
 * The process: /bin/sh -c WRAPPER with the command (or the filled container
 * template) as $1 and the status file as $2.  The wrapper runs the command
 * in a child shell, then writes its exit status to the status file, so an
 * agent restarted after kill -9 learns how a re-adopted job ended.  It
 * catches (does not ignore) the stop signals so it outlives the command
 * when the whole group is signalled; caught signals reset at exec, so the
 * command sees them with their default actions.
 */
#ifndef TM_AGENT_JOB_ENV_H
#define TM_AGENT_JOB_ENV_H

#include <stddef.h>

#include "controller/agent/answer.h"
#include "controller/agent/gpu.h"

/* The default --container-template (docker with the NVIDIA toolkit).  The
 * image comes after "--" (docker and podman end their options there), and
 * the spec admits only image references, which never start with '-'. */
#define TM_AGENT_CONTAINER_DEFAULT                                                                 \
    "docker run --rm --name {name} {docker_gpus} {env} -- {image} /bin/sh -c {command}"

/* Build the environment into *ret_env, a NULL-terminated heap array of
 * "K=V" strings (free with tm_strv_free).  base is the agent's environ.
 * gpus holds the node's GPUs; an index without a GPU there maps to its
 * number, so a job still sees which device it got.  0 or TM_ENOMEM. */
int tm_agent_job_env(const char *const *base, const struct tm_agent_assignment *a,
                     const struct tm_gpu_info *gpus, int ngpus, char ***ret_env);

/* The host side of a container job (the wrapper shell and the runtime's
 * client): base without the reserved names, none of the job's variables,
 * which reach the container only, through its env file.  0 or TM_ENOMEM. */
int tm_agent_host_env(const char *const *base, char ***ret_env);

/* A container job's env file: the job's variables and the agent's (the
 * list above, without the base), one NAME=VALUE a line, as docker's and
 * podman's --env-file read it (no quoting: a value holding a line break
 * cannot be written -> TM_EINVAL; the spec refuses those).  *ret is a heap
 * string of *ret_len bytes. */
int tm_agent_container_env_file(const struct tm_agent_assignment *a, const struct tm_gpu_info *gpus,
                                int ngpus, char **ret, size_t *ret_len);

/* Set NAME=VALUE in a heap list built above, replacing an entry of that
 * name.  0 or TM_ENOMEM. */
int tm_strv_set(char ***v, const char *name, const char *value);

/* a's GPU indices as a mask, bit i for index i (indices past 31 left out). */
uint32_t tm_agent_gpu_mask(const struct tm_agent_assignment *a);

/* The UUIDs of a's GPUs, comma-separated, into out ("" with none). */
void tm_agent_gpu_list(const struct tm_agent_assignment *a, const struct tm_gpu_info *gpus, int ngpus,
                       char *out, size_t outlen);

/* Fill the container template for a (a->image set): {image} and {command}
 * shell-quoted, {name} (tarmac-JOB-ATTEMPT), {gpus} (the UUID list),
 * {docker_gpus} (--gpus '"device=U1,U2"' or nothing), {cdi_gpus}
 * (--device nvidia.com/gpu=U per GPU, podman), {env} ("--env-file
 * 'ENV_FILE'", or nothing when env_file is NULL), {checkpoint_dir},
 * {resume_dir} and {hostfile} (quoted, or "").  An unknown {placeholder} -> TM_EINVAL.  *ret is a
 * heap string. */
int tm_agent_container_command(const char *tmpl, const struct tm_agent_assignment *a,
                               const struct tm_gpu_info *gpus, int ngpus, const char *env_file,
                               char **ret);

/* The hostfile of a rendezvous, as MPI's and DeepSpeed's launchers read
 * it: "ADDR slots=GPUS_PER_NODE\n" per node in rank order.  *ret is a heap
 * string of *ret_len bytes.  0, TM_EINVAL (no rendezvous), TM_ENOMEM. */
int tm_agent_hostfile_text(const struct tm_agent_rendezvous *r, char **ret, size_t *ret_len);

/* Single-quote s for /bin/sh into a heap string. */
char *tm_shell_quote(const char *s);

/* The wrapper script of the header comment. */
extern const char tm_agent_wrapper_script[];

void tm_strv_free(char **v);

#endif
