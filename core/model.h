/*
 * core/model.h: the states and kinds of tarmac's data model, with the
 * exact strings the database stores (migrations CHECK the same sets).
 *
 * Times are int64_t milliseconds.  In the live controller they are wall-clock
 * (Unix epoch, possibly accelerated in the demo); in replay they are virtual.
 */
#ifndef TM_MODEL_H
#define TM_MODEL_H

#include <stdbool.h>
#include <stdint.h>

enum tm_job_state {
    TM_JOB_QUEUED,
    TM_JOB_RUNNING,
    TM_JOB_SUCCEEDED,
    TM_JOB_FAILED,
    TM_JOB_PREEMPTED,
    TM_JOB_CANCELLED,
    TM_JOB_STATE_MAX,
};

enum tm_node_state {
    TM_NODE_REQUESTED,   /* row written, launch not yet confirmed by the cloud */
    TM_NODE_BOOTING,     /* the cloud accepted the launch */
    TM_NODE_READY,       /* listed running: jobs may be placed */
    TM_NODE_DRAINING,    /* no new jobs; released when empty */
    TM_NODE_TERMINATING, /* terminate asked, not yet confirmed */
    TM_NODE_TERMINATED,
    TM_NODE_INTERRUPTED, /* the cloud took it back (spot) */
    TM_NODE_STATE_MAX,
};

/* An owned node's power (nodes.power, migrations/0031_power.sql): only
 * an "on" node takes work; power saving moves the others. */
enum tm_node_power {
    TM_POWER_ON,
    TM_POWER_SUSPENDING, /* suspend_command running */
    TM_POWER_SUSPENDED,  /* off: silence expected, the suspended rate billed */
    TM_POWER_RESUMING,   /* resume_command ran: waiting for a heartbeat */
    TM_POWER_MAX,
};

enum tm_job_class {
    TM_CLASS_TRAIN,
    TM_CLASS_EVAL,
    TM_CLASS_PREPROCESS,
    TM_CLASS_INFERENCE,
    TM_CLASS_BATCH,
    TM_CLASS_MAX,
};

enum tm_capacity_type {
    TM_CAPACITY_ON_DEMAND,
    TM_CAPACITY_SPOT,
    TM_CAPACITY_SPOT_THEN_ON_DEMAND,
    TM_CAPACITY_MAX,
};

const char *tm_job_state_name(enum tm_job_state s);
const char *tm_node_state_name(enum tm_node_state s);
const char *tm_node_power_name(enum tm_node_power p);
const char *tm_job_class_name(enum tm_job_class c);
const char *tm_capacity_type_name(enum tm_capacity_type c);

/* Each parser returns the enum value or -1 when the name is not one of ours. */
int tm_job_state_parse(const char *name);
int tm_node_state_parse(const char *name);
int tm_node_power_parse(const char *name);
int tm_job_class_parse(const char *name);
int tm_capacity_type_parse(const char *name);

/* Whether a node in this state costs money (the cloud bills it). */
bool tm_node_state_billed(enum tm_node_state s);

/* Whether a job may run on a node of this GPU model: job_models is NULL,
 * "" (any) or a '|'-separated list.  The reconcile pass and the submit
 * check (spec/job_fit.c) both ask it. */
bool tm_gpu_model_accepts(const char *job_models, const char *node_model);

#endif
