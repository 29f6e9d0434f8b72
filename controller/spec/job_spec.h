/*
 * controller/spec/job_spec.h: what a job asks for, and the one set of rules that
 * decides whether the ask is valid.  `tarmac submit` (options) and the HTTP
 * API (a JSON body) both fill a struct tm_job_spec and apply the same checks
 * with the same messages, so a job refused by one is refused by the other.
 *
 * The rules mirror the CHECK constraints of migrations/0001_init.sql (jobs):
 * whole GPUs 1..16 with gpu_milli 1000, or a share of one GPU (1..999 milli,
 * gpus 0, one node); priority -1000..1000; a known class; a team name of
 * 1-63 letters, digits, '.', '_', '-'.  On top of the schema they refuse
 * values no real job has (a year-long estimate, a petabyte of memory).
 *
 * Which pool or GPU model exists is a question for the database; those
 * checks live with the statement that inserts (see api_jobs.c).
 *
 * Strings in a spec are borrowed: from argv for the CLI, from the parsed
 * cJSON document for the API.  They live as long as their source.
 *
 * Errors fill a struct tm_spec_error: field is the name a client used
 * ("gpus", "jobs[2].state", "body"), message a short lower-case reason
 * without a full stop, e.g. "must be a whole number from 1 to 16".
 */
#ifndef TM_JOB_SPEC_H
#define TM_JOB_SPEC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <cjson/cJSON.h>

#include "controller/spec/spec_error.h"

#define TM_JOB_NAME_MAX 200             /* bytes */
#define TM_JOB_COMMAND_MAX 8192         /* bytes */
/* A job's environment (what the node agent adds to the command's): at most
 * TM_JOB_ENV_MAX entries of names ^[A-Za-z_][A-Za-z0-9_]*$ and string
 * values, TM_JOB_ENV_BYTES in all (names and values); TARMAC_*,
 * CUDA_VISIBLE_DEVICES, CUDA_MPS_* and NVIDIA_* are refused (job_spec.c
 * says why), and a container job's values hold no line break.  `image`
 * must be an image reference (image_ref.h). */
#define TM_JOB_ENV_MAX 64
#define TM_JOB_ENV_BYTES 32768
#define TM_JOB_IMAGE_MAX 512            /* bytes of a container image reference */
#define TM_JOB_MODEL_MAX 255            /* "A100|H100|..." */
#define TM_JOB_CPU_MILLI_MAX 100000000  /* 100k cores */
#define TM_JOB_MEMORY_MIB_MAX 1073741824 /* 1 PiB */
#define TM_JOB_ESTIMATE_S_MAX 31536000  /* one year */
#define TM_JOB_DEADLINE_S_MAX 315360000 /* ten years */

struct tm_job_spec {
    const char *team;          /* required */
    const char *name;          /* default "" */
    const char *command;       /* default "" */
    int gpus;                  /* 1..16, or 0 for a share; -1 while unset */
    int gpu_milli;             /* 1..999 for a share, 1000 for whole GPUs; -1 while unset */
    int nodes;                 /* gang size, default 1 */
    int64_t cpu_milli;         /* default 0 */
    int64_t memory_mib;        /* default 0 */
    const char *gpu_model;     /* NULL = any; "A100" or "A100|H100" */
    const char *pool;          /* NULL = any */
    const char *klass;         /* default "train" */
    int priority;              /* default 0 */
    bool preemptible;
    bool checkpointable;
    int64_t runtime_estimate_ms; /* 0 = none */
    int64_t sim_runtime_ms;      /* 0 = none (simulated nodes only) */
    int64_t deadline_ms;         /* relative to submission, 0 = none */
    /* A JSON object of string values, checked by tm_job_spec_set_env();
     * NULL = none.  Borrowed (the parse's document) unless env_owned
     * (built by set_text("env", "K=V")): tm_job_spec_release() frees it. */
    cJSON *env;
    bool env_owned;
    const char *image;           /* container image, NULL = none (the command runs on the host) */
};

/* Free what the spec owns (an env built from text); the spec stays valid
 * without it. */
void tm_job_spec_release(struct tm_job_spec *spec);

/* Check env (a JSON object) against the bounds above and set it
 * (borrowed).  The field of an error is "env" or "env.NAME". */
int tm_job_spec_set_env(struct tm_job_spec *spec, cJSON *env, struct tm_spec_error *err);

/* Defaults, with gpus and gpu_milli unset. */
void tm_job_spec_init(struct tm_job_spec *spec);

/*
 * Set one field from text (a command-line value).  field is the API name
 * ("team", "gpus", "gpu_milli", "nodes", "cpu_milli", "memory_mib",
 * "gpu_model", "pool", "class", "priority", "runtime_estimate_s" (a
 * duration such as "90s" or "2h" here), "deadline" (a duration),
 * "sim_runtime" (a duration), "name", "command", "image", "env" (one
 * "NAME=VALUE", added to the spec's own env; repeat for more)).  text is
 * borrowed.
 * Returns 0, or TM_EINVAL with err filled (field and message).
 */
int tm_job_spec_set_text(struct tm_job_spec *spec, const char *field, const char *text,
                         struct tm_spec_error *err);

/*
 * The rules between fields, once every field is set: team given; one of
 * gpus and gpu_milli, not both; a share runs on one node.  Normalises
 * gpus/gpu_milli to the stored pair (whole: gpus, 1000; share: 0, milli).
 * Returns 0 or TM_EINVAL with err filled.
 */
int tm_job_spec_finish(struct tm_job_spec *spec, struct tm_spec_error *err);

/*
 * Parse a JSON request body into spec (tm_job_spec_init() first is not
 * needed).  The body must be one JSON object whose fields are the ones
 * above, with JSON types: numbers for counts (integers only), booleans for
 * preemptible/checkpointable, strings otherwise; "deadline" and
 * "runtime_estimate_s" take whole seconds (deadline also a duration
 * string); null means "not given" for the optional gpu_model, pool,
 * deadline and runtime_estimate_s.  Unknown or repeated fields are refused.
 * On success *ret_root holds the document the spec's strings point into
 * (caller frees it with cJSON_Delete); on failure it is NULL.
 */
int tm_job_spec_parse_json(const char *body, size_t len, struct tm_job_spec *spec,
                           cJSON **ret_root, struct tm_spec_error *err);

/* Whether s is a team or pool name: 1-63 letters, digits, '.', '_', '-',
 * starting with a letter or digit (the schema's pattern). */
bool tm_job_spec_name_ok(const char *s);

#endif
