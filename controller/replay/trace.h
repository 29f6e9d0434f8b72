/*
 * controller/replay/trace.h: GPU cluster traces for replay: the Alibaba openb CSV
 * loaders (node list and pod list), Philly's job file (with a team on every
 * job), and a synthetic generator.
 *
 * A trace holds a GPU model table, the nodes (inventory) and the jobs.  Job
 * shapes follow scheduler.h: gpus >= 1 whole GPUs, or gpus == 0 with a share
 * gpu_milli in 1..999, or gpus == 0 and gpu_milli == 0 for CPU-only tasks.
 * A job of whole GPUs may span `nodes` nodes with `gpus` on each (a gang);
 * nodes 0 reads as 1.
 * Times are milliseconds from the trace's own origin.
 *
 * Loaders stop at the first bad row and say where: "FILE:LINE:COLUMN: what",
 * with LINE counted from 1 (the header) and COLUMN the 1-based field number.
 * Nothing of a file that failed is kept.
 */
#ifndef TM_TRACE_H
#define TM_TRACE_H

#include <stddef.h>
#include <stdint.h>

#include "controller/sched/estimate.h"
#include "core/model.h"

#define TM_TRACE_NAME_MAX 32
#define TM_TRACE_MODELS_MAX 64

enum tm_trace_qos {
    TM_QOS_LS,         /* latency sensitive */
    TM_QOS_BE,         /* best effort: our model of preemptible work */
    TM_QOS_BURSTABLE,
    TM_QOS_GUARANTEED,
    TM_QOS_MAX,
};

struct tm_trace_job {
    char name[TM_TRACE_NAME_MAX];
    char team[TM_TRACE_NAME_MAX]; /* "" when the trace has none (openb) */
    int64_t submit_ms;
    int64_t start_ms;    /* as scheduled in the trace; -1 if never scheduled */
    int64_t end_ms;      /* deletion */
    int64_t cpu_milli;
    int64_t memory_mib;
    uint64_t model_mask; /* bits into the trace's model table; 0: any */
    int32_t gpus;        /* per node */
    int32_t gpu_milli;
    int32_t nodes;       /* gang size; 0 or 1: one node */
    enum tm_trace_qos qos;
    enum tm_job_class klass;
    bool preemptible;
};

struct tm_trace_node {
    char name[TM_TRACE_NAME_MAX];
    int64_t cpu_milli;
    int64_t memory_mib;
    int32_t gpus;
    int32_t model;       /* index into the model table; -1 for CPU-only */
};

struct tm_trace {
    char models[TM_TRACE_MODELS_MAX][TM_TRACE_NAME_MAX];
    int nmodels;
    struct tm_trace_node *nodes;
    size_t nnodes;
    struct tm_trace_job *jobs;
    size_t njobs;
};

const char *tm_trace_qos_name(enum tm_trace_qos q);

/* The runtime predictor's key for a trace job, one for every replay.  The
 * job's own name is the most specific level (the same task submitted
 * again: a replay's copies of one task share it).  The team is the job's
 * own where the trace has one (Philly's virtual cluster).  openb has none,
 * and tasks with the same CPU and memory request mostly come from one
 * deployment, so that request ("cCPU-mMEM") stands in for the team: the
 * level between the task itself and anyone's work of that shape.  The
 * team is written into buf. */
struct tm_estimate_key tm_trace_estimate_key(const struct tm_trace_job *j, char *buf, size_t len);

/* Index of a model name in t's table, adding it when absent; -1 if full. */
int tm_trace_model(struct tm_trace *t, const char *name);

/* Load an openb node list (sn,cpu_milli,memory_mib,gpu,model) into t,
 * replacing its nodes.  Returns 0, TM_EINVAL with `err` filled
 * ("FILE:LINE:COL: ..."), -errno when the file cannot be read, or
 * TM_ENOMEM. */
int tm_trace_load_nodes(struct tm_trace *t, const char *path, char *err, size_t errlen);

/* Load an openb pod list (name,cpu_milli,memory_mib,num_gpu,gpu_milli,
 * gpu_spec,qos,pod_phase,creation_time,deletion_time,scheduled_time) into
 * t, replacing its jobs.  gpu_spec names join the model table.  Errors as
 * for the node list; a negative duration (deletion before creation or
 * before scheduling) is an error.
 *
 * A file whose header has Philly's columns (timestamp,duration,num_gpus,
 * gpu_time,cluster) is read as Philly's instead: submit times from the
 * earliest row's, each job run at once for its duration (the file has no
 * start), its cluster as its team, no CPU or memory request and no GPU
 * model; a job of more than TM_TRACE_PHILLY_NODE_GPUS GPUs is a gang of
 * as few such nodes as hold it, its GPUs spread evenly (12: 2 x 6).  The
 * rows are sorted by submit time (the file's are not). */
int tm_trace_load_pods(struct tm_trace *t, const char *path, char *err, size_t errlen);

/* Philly's servers had 8 GPUs (and 2-GPU ones, not told apart in the file). */
#define TM_TRACE_PHILLY_NODE_GPUS 8

/* Give t an inventory of n identical nodes of gpus GPUs of one model
 * (for traces without a node list), replacing its nodes. */
int tm_trace_uniform_nodes(struct tm_trace *t, size_t n, int32_t gpus, const char *model);

/* Parameters of the synthetic generator; see trace.c for distributions. */
struct tm_trace_synth {
    uint64_t seed;
    size_t jobs;          /* how many jobs */
    double jobs_per_hour; /* Poisson arrival rate */
    int32_t gpus;         /* inventory size, 8-GPU nodes of one model */
};

/* Generate a trace: documented distributions, deterministic in the seed. */
int tm_trace_synthesize(struct tm_trace *t, const struct tm_trace_synth *p);

/* Free nodes and jobs; safe on a zeroed trace. */
void tm_trace_release(struct tm_trace *t);

#endif
