/*
 * controller/sched/estimate_model.h: the runtime predictor's fallback, an
 * online quantile regression over a job's features.
 *
 * Why this model.  Debian's packaged learners do not fit: libxgboost 1.7.4
 * has no quantile objective (reg:quantileerror came in 2.0), trains in batch
 * from a DMatrix (memory grows with the history, a full refit per finished
 * job) and is C++ with OpenMP; liblinear has no pinball loss.  What the
 * fallback needs is small, online, bounded and deterministic, so it is
 * written here: a linear model of log-runtime, fitted by stochastic
 * (sub)gradient descent on the pinball loss at quantile TM_EMODEL_TAU
 * (the median by default, the same statistic as the keys' answers).
 *
 * Features, all one-hot buckets (an additive model in log space: runtime
 * is a product of one factor per feature):
 *
 *   bias
 *   class                          (TM_CLASS_MAX buckets)
 *   GPUs: none, a share, 1, 2, 3-4, 5-8, 9-16, more
 *   CPU cores: unknown, then log2 buckets from 1/4 core to 256+
 *   memory: unknown, then log2 buckets from 256 MiB to 256 GiB+
 *   team: none, then a hash of the name into 31 buckets
 *
 * One-hot buckets need no scaling, learn a dependence of any shape on
 * each feature (the GPU count's is rarely a straight line) and leave a
 * bucket never seen at 0, so the others answer for it.  Each observation
 * moves the active weights by eta x tau (the runtime was above the
 * prediction) or eta x (1 - tau) (below), divided among the active
 * features; eta decays per weight as 1/(1 + updates/8) (Robbins-Monro)
 * to a floor, so rare buckets learn fast and common ones settle without
 * ceasing to follow drift.  The model starts at the first runtime seen.
 *
 * Measured on openb (bench/results/estimate-2026-12-02.md): where the keys
 * answer, their medians beat it (the job's own team's history knows more
 * than an additive model); where they do not, it is as good as the
 * class-and-GPUs median and better than the class alone.  An interaction
 * group class x GPUs was tried and gained nothing there.
 *
 * Memory: a fixed array of TM_EMODEL_NW weights and counters, whatever the
 * history.  Deterministic: plain arithmetic in arrival order, no random
 * draws.  Pure: no I/O, no clock.
 */
#ifndef TM_ESTIMATE_MODEL_H
#define TM_ESTIMATE_MODEL_H

#include <stdint.h>

#include "controller/sched/estimate.h"

#define TM_EMODEL_TAU 0.5
/* Observations before the model answers at all. */
#define TM_EMODEL_MIN_SAMPLES 32

#define TM_EMODEL_GPU_BUCKETS 8
#define TM_EMODEL_CPU_BUCKETS 12
#define TM_EMODEL_MEM_BUCKETS 12
#define TM_EMODEL_TEAM_BUCKETS 32
#define TM_EMODEL_NW (1 + TM_CLASS_MAX + TM_EMODEL_GPU_BUCKETS + TM_EMODEL_CPU_BUCKETS + \
                      TM_EMODEL_MEM_BUCKETS + TM_EMODEL_TEAM_BUCKETS)

struct tm_emodel {
    double w[TM_EMODEL_NW];     /* log(runtime in s) per active feature */
    uint32_t updates[TM_EMODEL_NW];
    uint64_t n;                 /* observations */
};

/* An empty model (also what a zeroed struct is). */
void tm_emodel_init(struct tm_emodel *m);

/* Learn from one finished job; negative runtimes are ignored. */
void tm_emodel_observe(struct tm_emodel *m, const struct tm_estimate_key *k, int64_t runtime_ms);

/* The predicted runtime in ms (at least 1 s), or 0 before
 * TM_EMODEL_MIN_SAMPLES observations. */
int64_t tm_emodel_predict(const struct tm_emodel *m, const struct tm_estimate_key *k);

#endif
