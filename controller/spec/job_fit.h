/*
 * controller/spec/job_fit.h: whether any configured pool could ever hold a job,
 * checked at submit so that a job no pool can run is refused with the
 * reason instead of waiting for ever.  Pure: the configuration in, a
 * verdict out.
 */
#ifndef TM_JOB_FIT_H
#define TM_JOB_FIT_H

#include "controller/spec/job_spec.h"
#include "core/config.h"

/* 0 when some pool of cfg could hold spec at its largest: its GPU model
 * accepted, its GPUs on one node, its nodes within max_nodes, its CPU and
 * memory within the pool's largest instance type (where the provider
 * describes its types).  A pool with max_nodes 0 is off for now, not
 * unable: its shape still counts, and nodes is checked only against a
 * positive maximum.  TM_EINVAL with err naming the field of the nearest
 * miss ("gpus", "nodes", "cpu_milli", "memory_mib", "gpu_model", "pool")
 * and why.  No pools configured, or cfg NULL: 0 (nothing to check). */
int tm_job_fit_check(const struct tm_config *cfg, const struct tm_job_spec *spec,
                     struct tm_spec_error *err);

#endif
