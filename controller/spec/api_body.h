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

/* A node's heartbeat: {"jobs": [{"id": 7, "state": "succeeded"|"failed",
 * "reason": "exit 0"}], "gpus": [{"index": 0, "util_percent": 93.5,
 * "memory_used_mib": 61000, "at_ms": 1764400000000}]}; both lists optional,
 * an empty body is a bare heartbeat.  *ret_report is the document to hand
 * to tarmac_agent_report() ({"jobs": [...]}) and *ret_samples the samples
 * array, both unformatted JSON the caller frees with free(). */
struct tm_api_heartbeat {
    char *report;
    char *samples;
    size_t njobs, nsamples;
};
int tm_api_parse_heartbeat(const char *body, size_t len, struct tm_api_heartbeat *ret,
                           struct tm_spec_error *err);
void tm_api_heartbeat_release(struct tm_api_heartbeat *hb);

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
