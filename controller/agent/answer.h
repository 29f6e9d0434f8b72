/*
 * controller/agent/answer.h: the controller's answers the agent reads,
 * parsed by pure functions (cJSON only: no loop, no I/O), so the fuzz target
 * tests/fuzz/fuzz_agent_answer.c links them without the rest of the agent.
 *
 * The heartbeat answer (../shared agent contract, route 1):
 *
 *   {"node":{"id":N,"state":"ready","draining":false},
 *    "assignments":[{"job_id":7,"attempt":2,"command":"...","env":{"K":"V"},
 *      "image":null,"gpu_indices":[0,1],"gpu_milli":1000,"cpu_milli":4000,
 *      "memory_mib":16384,"checkpointable":true,"checkpoint_dir":null,
 *      "rendezvous":{"rank":0,"nodes":2,"gpus_per_node":2,
 *                    "addrs":["10.0.0.5","10.0.0.6"],"master_port":29500,"wait":null}}]}
 *
 * rendezvous (migrations/0020): the job's rank among its nodes, their
 * count, the GPUs it has on each, the nodes' addresses in rank order (IP
 * addresses, exactly nodes of them), rank 0's port, and "wait": a reason
 * its members must not start yet (no port free, an address unknown), with
 * master_port null.  "barrier": true when the wait is the start barrier
 * (a member of the job has not claimed it yet, or all have and the gang
 * starts together "start_in_ms" from this answer, 0..60000; false or
 * absent otherwise).
 * Absent from an older controller: no rendezvous.
 *
 * "stops" (migrations/0026): [{"job_id":7,"attempt":2,"stop_in_ms":8400}],
 * the members of gangs this node still runs whose attempt has stopped,
 * each with the gang's common stop time counted from this answer
 * (0..3600000): the agent signals the member then, not at once, so that
 * every rank gets its signal together.  A job no longer assigned and not
 * listed here is stopped at once.  Absent from an older controller: none.
 *
 * Unknown keys are ignored (a newer controller may add some); a known key
 * of the wrong type, a value out of range or a missing job_id, attempt or
 * command refuses the whole answer, so the agent never acts on half of one.
 */
#ifndef TM_AGENT_ANSWER_H
#define TM_AGENT_ANSWER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define TM_AGENT_MAX_GPUS 64          /* GPU indices 0..63 */
#define TM_AGENT_MAX_ASSIGNMENTS 1024
#define TM_AGENT_MAX_ENV 64
#define TM_AGENT_MAX_COMMAND (256 * 1024)
#define TM_AGENT_MAX_NODES 4096       /* members of one job */
#define TM_AGENT_ADDR_MAX 46          /* INET6_ADDRSTRLEN */

struct tm_agent_rendezvous {
    bool given;                        /* false: the answer had none */
    int rank;                          /* 0 .. nodes-1 */
    int nodes;                         /* 1 .. TM_AGENT_MAX_NODES */
    int gpus_per_node;                 /* 0 .. TM_AGENT_MAX_GPUS */
    char (*addrs)[TM_AGENT_ADDR_MAX];  /* nodes entries, rank order */
    int master_port;                   /* 1 .. 65535; 0 while wait is set */
    char *wait;                        /* NULL, or why the job may not start yet */
    /* The wait is the start barrier (migrations/0021): some member of the
     * job has not claimed it yet, and the go may come at any moment. */
    bool barrier;
    /* With the barrier: every member has claimed, and the gang starts
     * together this many ms after this answer (0: not given). */
    int start_in_ms;
};

struct tm_agent_assignment {
    int64_t job_id;
    int64_t attempt;
    char *command;
    size_t env_count;
    char **env_names;
    char **env_values;
    char *image;                       /* NULL: run on the host */
    size_t gpu_count;
    int gpu_indices[TM_AGENT_MAX_GPUS];
    int gpu_milli;                     /* 0: not given; < 1000 with one GPU: a share */
    int64_t cpu_milli;                 /* 0: not given */
    int64_t memory_mib;                /* 0: not given */
    bool checkpointable;
    char *checkpoint_dir;              /* NULL when not given: the job's folder (checkpoint.h) */
    /* Not in the answer, not owned: the agent's find, when it starts the
     * attempt, of the newest complete checkpoint of an earlier one
     * (checkpoint.h, jobs.c); NULL when none. */
    char *resume_dir;
    struct tm_agent_rendezvous rdv;
    /* Not in the answer, not owned: the hostfile the agent wrote in the
     * job's folder for this attempt (jobs.c), NULL when none. */
    const char *hostfile;
};

/* A gang member's common stop (above). */
struct tm_agent_stop {
    int64_t job_id;
    int64_t attempt;
    int64_t stop_in_ms;                /* 0 .. 3600000, from this answer */
};

#define TM_AGENT_MAX_STOP_IN_MS 3600000

struct tm_agent_answer {
    bool has_node;
    int64_t node_id;
    char node_state[32];
    bool draining;
    size_t count;
    struct tm_agent_assignment *assignments;
    size_t nstops;
    struct tm_agent_stop *stops;
};

/* Parse a heartbeat answer.  0 and *ret filled (release it with
 * tm_agent_answer_release), or TM_EBADREPLY with err holding the field and
 * the problem ("assignments[2].attempt: must be a non-negative integer"),
 * or TM_ENOMEM; *ret is untouched on failure. */
int tm_agent_answer_parse(const char *body, size_t len, struct tm_agent_answer *ret, char *err,
                          size_t errlen);
void tm_agent_answer_release(struct tm_agent_answer *a);

/* The index of (job_id, attempt) in a, or -1. */
long tm_agent_answer_find(const struct tm_agent_answer *a, int64_t job_id, int64_t attempt);

/* The common stop of (job_id, attempt) in a, or NULL. */
const struct tm_agent_stop *tm_agent_answer_stop(const struct tm_agent_answer *a, int64_t job_id,
                                                 int64_t attempt);

/* Parse the enrollment answer {"node_id":N,"token":"..."} into a heap copy
 * of the token (*ret_token, free() it after wiping).  0, TM_EBADREPLY (err
 * names the field, never the token), TM_ENOMEM. */
int tm_agent_enroll_parse(const char *body, size_t len, int64_t node_id, char **ret_token,
                          char *err, size_t errlen);

#endif
