#include "core/model.h"

#include <stdlib.h>
#include <string.h>

#include "core/err.h"

static const char *const job_states[TM_JOB_STATE_MAX] = {
    "queued", "running", "succeeded", "failed", "preempted", "cancelled",
};
static const char *const node_states[TM_NODE_STATE_MAX] = {
    "requested", "booting", "ready", "draining", "terminating", "terminated", "interrupted",
};
static const char *const job_classes[TM_CLASS_MAX] = {
    "train", "eval", "preprocess", "inference", "batch",
};
static const char *const capacity_types[TM_CAPACITY_MAX] = {
    "on_demand", "spot", "spot_then_on_demand",
};

static const char *const node_powers[] = {"on", "suspending", "suspended", "resuming"};

static int lookup(const char *const *names, int n, const char *name)
{
    if (!name)
        return -1;
    for (int i = 0; i < n; i++)
        if (strcmp(names[i], name) == 0)
            return i;
    return -1;
}

const char *tm_job_state_name(enum tm_job_state s)
{
    return (unsigned)s < TM_JOB_STATE_MAX ? job_states[s] : "unknown";
}

const char *tm_node_state_name(enum tm_node_state s)
{
    return (unsigned)s < TM_NODE_STATE_MAX ? node_states[s] : "unknown";
}

const char *tm_node_power_name(enum tm_node_power p)
{
    return (unsigned)p < TM_POWER_MAX ? node_powers[p] : "unknown";
}

const char *tm_job_class_name(enum tm_job_class c)
{
    return (unsigned)c < TM_CLASS_MAX ? job_classes[c] : "unknown";
}

const char *tm_capacity_type_name(enum tm_capacity_type c)
{
    return (unsigned)c < TM_CAPACITY_MAX ? capacity_types[c] : "unknown";
}

int tm_job_state_parse(const char *name) { return lookup(job_states, TM_JOB_STATE_MAX, name); }
int tm_node_state_parse(const char *name) { return lookup(node_states, TM_NODE_STATE_MAX, name); }
int tm_node_power_parse(const char *name) { return lookup(node_powers, TM_POWER_MAX, name); }
int tm_job_class_parse(const char *name) { return lookup(job_classes, TM_CLASS_MAX, name); }
int tm_capacity_type_parse(const char *name) { return lookup(capacity_types, TM_CAPACITY_MAX, name); }

bool tm_node_state_billed(enum tm_node_state s)
{
    return s == TM_NODE_BOOTING || s == TM_NODE_READY || s == TM_NODE_DRAINING ||
           s == TM_NODE_TERMINATING;
}

bool tm_gpu_model_accepts(const char *job_models, const char *node_model)
{
    size_t nlen = strlen(node_model);
    const char *p = job_models;

    if (!p || !*p)
        return true;
    while (*p) {
        const char *bar = strchr(p, '|');
        size_t len = bar ? (size_t)(bar - p) : strlen(p);
        if (len == nlen && strncmp(p, node_model, len) == 0)
            return true;
        if (!bar)
            break;
        p = bar + 1;
    }
    return false;
}
