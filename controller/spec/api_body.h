/*
 * controller/spec/api_body.h: the request bodies of the HTTP API other than a
 * job (controller/spec/job_spec.h), parsed and checked before anything touches
 * the database.  Pure functions: no I/O, no clock; the libFuzzer target
 * tests/fuzz/fuzz_api_body.c drives every one of them.
 *
 * Each returns 0, or TM_EINVAL with err naming the field ("jobs[2].state",
 * "body") and the reason.  Strings handed back point into *ret_root, which
 * the caller frees with cJSON_Delete (NULL on failure).
 */
#ifndef TM_API_BODY_H
#define TM_API_BODY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <cjson/cJSON.h>

#include "controller/spec/job_spec.h"

#define TM_API_REASON_MAX 1024     /* bytes of a free-text reason */
#define TM_API_REPORT_JOBS_MAX 1024
#define TM_API_SAMPLES_MAX 4096

/* A node's heartbeat (the node agent's contract): {"gpus": [{"index": 0,
 * "uuid": "GPU-..", "name": "..", "memory_total_mib": 81920}], "samples":
 * [{"gpu_index": 0, "at_ms": .., "util_percent": 37.5, "memory_used_mib":
 * 1024, "memory_total_mib": 81920, "temperature_c": 41, "power_w": 180.5,
 * "processes": [{"pid": 123, "used_memory_mib": 900}]}], "running":
 * [{"job_id": 7, "attempt": 2, "pid": 4242}], "heartbeat_ms": 10000}
 * (the agent's period), plus the older spellings
 * "jobs": [{"id": 7, "state": "succeeded"|"failed", "reason": "exit 0"}]
 * and samples as "gpus" entries {"index", "util_percent",
 * "memory_used_mib", "at_ms"}.  Every list optional, an empty body is a
 * bare heartbeat.  Whether an index is one of the node's GPUs only the
 * database knows: each checked entry carries "f", the field to name.  *ret_report is the document to hand
 * to tarmac_agent_report() ({"jobs": [...], "running": [{"job_id",
 * "attempt"}], "heartbeat_ms": N}: the last two for the answer's gang
 * stops, migrations/0026) and *ret_samples the samples
 * array, both unformatted JSON the caller frees with free(). */
struct tm_api_heartbeat {
    char *report;
    char *samples;   /* [{"gpu_index", "f" (its field), "util_percent", ...}] */
    char *gpus;      /* the inventory: [{"gpu_index", "f", "uuid", "name", "memory_total_mib"}] */
    size_t njobs, nsamples;
};
/* The sample times a heartbeat may carry (ms since the epoch, both
 * inclusive): a sample's "at_ms" outside them is refused naming it
 * ("samples[3].at_ms").  NULL: any time (the fuzzer, the unit tests). */
struct tm_api_sample_window {
    int64_t min_ms, max_ms;
};
int tm_api_parse_heartbeat(const char *body, size_t len, const struct tm_api_sample_window *win,
                           struct tm_api_heartbeat *ret, struct tm_spec_error *err);
void tm_api_heartbeat_release(struct tm_api_heartbeat *hb);

/* POST /v1/agent/enroll: {"node_id": N, "secret": "tme_...", "address":
 * "10.0.0.5"}, node_id and secret required; address, the node's address
 * for its jobs' peers, is an IPv4 or IPv6 address (core/address.h),
 * *ret_address NULL without one.  *ret_secret and *ret_address point into
 * *ret_root (cJSON_Delete it; the secret is wiped by the caller). */
int tm_api_parse_enroll(const char *body, size_t len, int64_t *ret_node, const char **ret_secret,
                        const char **ret_address, cJSON **ret_root, struct tm_spec_error *err);

/* POST /v1/nodes/{id}/jobs/{job}/start: {"attempt": 2, "pid": 4242}
 * (attempt required; pid -1 when absent). */
int tm_api_parse_job_start(const char *body, size_t len, int64_t *ret_attempt, int64_t *ret_pid,
                           struct tm_spec_error *err);

/* POST /v1/nodes/{id}/jobs/{job}/exit: {"attempt": 2, "exit_code": 3,
 * "signal": null, "output_tail": "..", "reason": "exited"|"stopped"|"lost"}.
 * attempt and reason required; "exited" needs exit_code or signal.
 * *ret_report is tarmac_agent_report's document for job (free()). */
#define TM_API_OUTPUT_TAIL_MAX 4096
int tm_api_parse_job_exit(const char *body, size_t len, int64_t job, char **ret_report,
                          struct tm_spec_error *err);

/* PATCH /v1/jobs/{id}: {"preemptible": true|false}, nothing else. */
int tm_api_parse_retag(const char *body, size_t len, bool *ret_preemptible,
                       struct tm_spec_error *err);

/* Bodies of the verbs (cancel, drain, cordon, interruption): empty, or
 * {"reason": "..."} plus, for an interruption notice, "in_s" (seconds
 * until the cloud takes the node, 0..86400).  allow_in says whether "in_s"
 * is accepted.  *ret_reason is copied into reason (size bytes), "" when
 * absent; *ret_in_s is -1 when absent. */
int tm_api_parse_verb(const char *body, size_t len, bool allow_in, char *reason, size_t size,
                      int64_t *ret_in_s, struct tm_spec_error *err);

/* POST /v1/nodes/{id}/interruption: the verb's body with "in_s", or the
 * node agent's "deadline_ms" (when the cloud takes the node, ms since the
 * epoch), turned into in_s against now_ms.  A deadline more than skew_ms
 * before now_ms is refused naming "deadline_ms" (a node's clock may be a
 * little behind ours; 1970 is no notice).  *ret_deadline_ms is when the
 * cloud takes the node, to the second (now_ms + in_s when in_s was
 * given): the same notice repeated names the same deadline. */
int tm_api_parse_notice(const char *body, size_t len, int64_t now_ms, int64_t skew_ms, char *reason,
                        size_t size, int64_t *ret_in_s, int64_t *ret_deadline_ms,
                        struct tm_spec_error *err);

/* PUT /v1/budgets/{name}: {"cap_cents": 500000, "period": "month",
 * "hard": true, "warn_percent": 80} plus, optionally, "scope_kind": "team"
 * (the default) or "org", and "currency": "USD" (the only one).  cap_cents,
 * period, hard and warn_percent are required; cap_cents is 0 to
 * TM_API_CAP_CENTS_MAX, warn_percent 1 to 100. */
#define TM_API_CAP_CENTS_MAX 1000000000000000LL /* $10 trillion: past it, a typo */
struct tm_api_budget {
    int64_t cap_cents;
    int warn_percent;
    bool hard;
    bool org;       /* scope_kind "org" */
};
int tm_api_parse_budget(const char *body, size_t len, struct tm_api_budget *ret,
                        struct tm_spec_error *err);

#endif
