/*
 * controller/api/resources.h: one function per route, each defined in its
 * resource's file (submit.c, jobs.c, nodes.c, decisions.c, money.c) and
 * named by the table in routes.c.  Each follows the contract of
 * internal.h (struct api_route).
 */
#ifndef TM_API_RESOURCES_H
#define TM_API_RESOURCES_H

#include "controller/api/internal.h"


/* submit.c: POST /v1/jobs, with the fast path through the group commit,
 * whose state is the routes' state (tm_api_routes.state_new/state_free). */
void tm_api_jobs_submit(struct api_call *c);
void tm_api_jobs_submit_fast(struct api_call *c);
void *tm_api_submit_state_new(void);
void tm_api_submit_state_free(void *state);

/* jobs.c */
void tm_api_jobs_get(struct api_call *c);
void tm_api_jobs_list(struct api_call *c);
void tm_api_jobs_cancel(struct api_call *c);
void tm_api_jobs_retag(struct api_call *c);

/* nodes.c: pools and nodes. */
void tm_api_pools_list(struct api_call *c);
void tm_api_pools_get(struct api_call *c);
void tm_api_nodes_list(struct api_call *c);
void tm_api_nodes_get(struct api_call *c);
void tm_api_nodes_drain(struct api_call *c);
void tm_api_nodes_cordon(struct api_call *c);
/* POST /v1/nodes/{id}/uncordon: work may come again (nodes.c). */
void tm_api_nodes_uncordon(struct api_call *c);
void tm_api_nodes_interruption(struct api_call *c);
void tm_api_nodes_heartbeat(struct api_call *c);
void tm_api_nodes_heartbeat_fast(struct api_call *c);
/* One heartbeat's answer from the columns of its statement or batch row
 * (nodes.c): tok_ok false sends it through the normal path. */
void tm_api_heartbeat_answer(struct api_call *c, bool tok_ok, const char *state, const char *bad,
                             const char *gpus, const char *answer, size_t answer_len);
/* agent.rendezvous_port_min and _max as text (their defaults without a
 * configuration), for the heartbeat's rendezvous (migrations/0020). */
void tm_api_rendezvous_ports(const struct api_call *c, char *lo, size_t lolen, char *hi, size_t hilen);

/* heartbeat_batch.c: the heartbeat's group commit (fast path).  add takes
 * the parsed heartbeat (JSON texts, copied) and ends the call exactly once. */
void tm_api_heartbeat_batch_add(struct api_call *c, int64_t now_ms, const char *report,
                                const char *samples, const char *gpus);
void *tm_api_heartbeat_state_new(void);
void tm_api_heartbeat_state_free(void *state);

/* sample_budget.c: the GPU samples a node may store per period, a token
 * bucket per node (the charge kept in c->samples_taken).  take: false
 * when n is over the budget (nothing taken; logged once per node per
 * minute), after giving back what c took before; give_back: the samples
 * were not stored; gpus: the node's GPU count from an answer (the
 * budget's rate is one sample per GPU per agent.min_sample_period). */
void *tm_api_sample_budget_new(void);
void tm_api_sample_budget_free(void *state);
bool tm_api_samples_take(struct api_call *c, size_t n);
void tm_api_samples_give_back(struct api_call *c);
void tm_api_samples_gpus(struct api_call *c, const char *gpus);

/* routes.c: the routes' state, one part per group-commit user. */
struct tm_api_route_states {
    void *submit;
    void *heartbeat;
    void *samples; /* sample_budget.c */
    void *logs;    /* logs.c: its store and ingest queue, made on first use */
};

/* logs.c: a job's output, shipped by the agents (docs/logs.md). */
void tm_api_logs_ingest(struct api_call *c);
void tm_api_logs_read(struct api_call *c);
void tm_api_logs_state_free(void *state);

/* agent.c: the node agent's enrollment and job reports. */
void tm_api_agent_enroll(struct api_call *c);
/* POST /v1/agent/join: an owned machine joins its pool (agent_join.c). */
void tm_api_agent_join(struct api_call *c);
void tm_api_agent_job_start(struct api_call *c);
void tm_api_agent_job_exit(struct api_call *c);

/* decisions.c */
void tm_api_decisions_list(struct api_call *c);

/* money.c: budgets and spend. */
void tm_api_budgets_put(struct api_call *c);
void tm_api_budgets_list(struct api_call *c);
/* quotas.c: team GPU quotas (quotas.h). */
void tm_api_quotas_put(struct api_call *c);
void tm_api_quotas_delete(struct api_call *c);
void tm_api_quotas_list(struct api_call *c);
void tm_api_spend(struct api_call *c);

#endif
