/*
 * controller/sched/estimate.h: runtime estimates from the history of similar jobs.
 *
 * A job is described by (team, name, class, GPU milli in all).  The
 * predictor keeps the last TM_ESTIMATE_WINDOW runtimes of each of four keys,
 * from the most specific to the least:
 *
 *   1. team, name, class, GPUs    (the same job resubmitted)
 *   2. team, class, GPUs          (the team's work of that shape)
 *   3. class, GPUs                (anyone's work of that shape)
 *   4. class                      (anything of that class)
 *
 * and answers with the median of the first key that has at least
 * TM_ESTIMATE_MIN_SAMPLES runtimes; 0 when none has (unknown).  The median
 * of recent runs follows drift and is not pulled by the month-long outliers
 * GPU traces are full of.
 *
 * Fallback, off unless tm_estimator_set_fallback() turns it on
 * (`tarmac replay --estimator model`): where the keys give nothing close, that is none of
 * the levels before TM_ESTIMATE_FALLBACK_FROM (4: the class alone is not
 * close) has enough runtimes, a
 * quantile model over the job's features (class, GPUs, CPU, memory, team;
 * estimate_model.h) learned online from every finished job answers
 * instead, once it has seen TM_EMODEL_MIN_SAMPLES jobs (level
 * TM_ESTIMATE_LEVEL_MODEL).  Until then the remaining keys answer as
 * before.
 *
 * Overrun: a job still running past its estimate gets
 * tm_estimate_overrun(elapsed) = 2 x elapsed: "it will run as long again",
 * which is the median remaining life of a heavy-tailed runtime that has
 * already lasted that long, and doubles each time it is passed, so the
 * number of corrections grows only with the log of the runtime.
 *
 * The predictor is a pure in-memory structure: no I/O, no clock.
 */
#ifndef TM_ESTIMATE_H
#define TM_ESTIMATE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/model.h"

#define TM_ESTIMATE_WINDOW 32
#define TM_ESTIMATE_MIN_SAMPLES 3
/* Where the model answers when it is switched on (tm_estimator_set_fallback;
 * off by default, see estimate.c): in place of this level and the ones after
 * it.  4,
 * measured on openb (bench/results/estimate-2026-12-02.md): in place of
 * the class's median it cuts the error of those estimates and changes
 * little else; in place of (class, GPUs) too it is no better than that
 * median and moves the schedule about for nothing. */
#define TM_ESTIMATE_FALLBACK_FROM 4
/* tm_estimate_level's answer when the model answered. */
#define TM_ESTIMATE_LEVEL_MODEL 5

struct tm_estimator;

/* What identifies "similar" jobs.  team and name may be NULL; an empty
 * name counts as none (an unnamed job is nobody's resubmission). */
struct tm_estimate_key {
    const char *team;
    const char *name;
    enum tm_job_class klass;
    int32_t gpu_milli;   /* GPUs x 1000 over all nodes, or the share */
    /* The model's features only (no key level reads them); 0: not given. */
    int64_t cpu_milli;
    int64_t memory_mib;
};

/* Create an empty predictor; 0 or TM_ENOMEM.  Free with tm_estimator_free. */
int tm_estimator_new(struct tm_estimator **ret);
void tm_estimator_free(struct tm_estimator *e);

/* Record a finished job's runtime.  0 or TM_ENOMEM (the predictor is left
 * as it was).  Negative runtimes are ignored. */
int tm_estimator_observe(struct tm_estimator *e, const struct tm_estimate_key *k, int64_t runtime_ms);

/* The predicted runtime in ms, or 0 when nothing similar has finished. */
int64_t tm_estimate(const struct tm_estimator *e, const struct tm_estimate_key *k);

/* As tm_estimate(), and *ret_level (when not NULL) says which key answered:
 * 1 (the same job's own earlier runs) to 4, TM_ESTIMATE_LEVEL_MODEL for
 * the fallback model, or 0 when none did. */
int64_t tm_estimate_level(const struct tm_estimator *e, const struct tm_estimate_key *k, int *ret_level);

/* Where the model answers: in place of key levels from_level..4 (1..4),
 * or never (0: the keys alone, the older predictor).  New
 * predictors use TM_ESTIMATE_FALLBACK_FROM.  The model learns either way. */
void tm_estimator_set_fallback(struct tm_estimator *e, int from_level);

/* The fallback model's own answer, whatever the keys say; 0 while it has
 * seen too few jobs. */
int64_t tm_estimate_model(const struct tm_estimator *e, const struct tm_estimate_key *k);

/* The keys' own answer (levels 1..4 or 0 in *ret_level), as if the model
 * stood in for none: which jobs the keys could answer, for measuring. */
int64_t tm_estimate_keys(const struct tm_estimator *e, const struct tm_estimate_key *k, int *ret_level);

/* The corrected estimate for a job that has run elapsed_ms, past its
 * estimate: 2 x elapsed (at least 1 s). */
int64_t tm_estimate_overrun(int64_t elapsed_ms);

/* Expected time left for a running job: max(estimate - elapsed, elapsed),
 * at least 1 s.  The second term is the same rule as the overrun
 * correction applied before the overrun: under heavy-tailed runtimes a job
 * that has run an hour is more likely to run another hour than to end in
 * the minutes its estimate has left.  Reservations planned with it pick
 * nodes that really drain soon. */
static inline int64_t tm_estimate_remaining(int64_t estimate_ms, int64_t elapsed_ms)
{
    /* Inline: a pass asks it for every running job it reads (a few
     * thousand per event at 4,096 GPUs in the time replay's full pass). */
    int64_t left = estimate_ms - elapsed_ms;

    if (elapsed_ms < 0)
        elapsed_ms = 0;
    if (left < elapsed_ms)
        left = elapsed_ms;
    return left < 1000 ? 1000 : left;
}

/* As tm_estimate_remaining, except that an estimate from the job's own
 * earlier runs (known: tm_estimate_level 1) is taken at its word until the
 * job overruns it: estimate - elapsed. */
int64_t tm_estimate_left(int64_t estimate_ms, int64_t elapsed_ms, bool known);

#endif
