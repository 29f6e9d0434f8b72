/*
 * controller/agent/body.h: the request bodies the agent sends (agent
 * contract, routes 1 to 4 and enrollment), built with cJSON by pure
 * functions.  Each returns a heap string (free() it) or NULL when out of
 * memory.
 */
#ifndef TM_AGENT_BODY_H
#define TM_AGENT_BODY_H

#include <stddef.h>
#include <stdint.h>

#include "controller/agent/gpu.h"
#include "controller/agent/state.h"

struct tm_agent_running {
    int64_t job_id;
    int64_t attempt;
    int pid;
};

/* heartbeat_ms: the agent's period, so that the controller knows when it
 * hears from this node next (a gang's common stop time, agent.c); 0 leaves
 * it out. */
char *tm_agent_body_heartbeat(const struct tm_gpu_info *gpus, int ngpus,
                              const struct tm_gpu_sample *samples, size_t nsamples,
                              const struct tm_agent_running *running, size_t nrunning,
                              int64_t heartbeat_ms);
/* The node's address (core/address.h) goes with the secret when known;
 * NULL leaves it out. */
char *tm_agent_body_enroll(int64_t node_id, const char *secret, const char *address);
char *tm_agent_body_start(int64_t attempt, int pid);
char *tm_agent_body_exit(const struct tm_agent_report *r);
char *tm_agent_body_interruption(const char *reason, int64_t deadline_ms);

#endif
