/*
 * controller/fleet/spot_fit.h: interruption hazard and launch availability of
 * spot capacity per (instance type, zone), fitted from public traces
 * (../shared/traces/spot/README.md, "Can't Be Late" spot traces).
 *
 * Pure: every function takes arrays already read (controller/fleet/spot_traces.h
 * reads the files) and returns numbers; no I/O, no globals.
 *
 * Preemption traces hold, per tick of gap_seconds, the number of requested
 * instances that were up (kept running and relaunched after a loss).
 *
 *   events    preemptions, in instances: the sum of the decreases of the
 *             up count from one tick to the next
 *   up_hours  instance-hours up: sum over ticks of value x gap
 *   hazard    events / up_hours, interruptions per instance-hour: the
 *             maximum-likelihood rate of exponential lifetimes (a
 *             constant hazard), with an exact (Garwood) 95% interval for
 *             a Poisson count over that exposure.  A lifetime still
 *             running at the end of the trace is right-censored: its
 *             up-time counts, no event does, as the MLE wants.
 *
 * Availability traces hold, per tick, whether (1-node) or how many of the
 * requested (16-node) spot instances a probe obtained.
 *
 *   availability  mean over ticks of value / requested: the probability
 *                 that a spot launch finds capacity, for 1-node files;
 *                 the mean share of a 16-instance request obtained, for
 *                 16-node files
 *
 * Files of the same (provider, type, zone, instances requested) are
 * pooled: hazard = sum of events / sum of up-hours (the MLE if the hazard
 * is the same in every file), availability weighted by hours observed.
 * Different request sizes stay apart (a 4-instance file's per-instance
 * hazard is not a 1-instance file's).
 */
#ifndef TM_SPOT_FIT_H
#define TM_SPOT_FIT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define TM_SPOT_NAME_MAX 64
#define TM_SPOT_PATH_MAX 256

enum tm_spot_kind {
    TM_SPOT_PREEMPTION,
    TM_SPOT_AVAILABILITY,
};

/* What a trace file's path says, in the skypilot-spot-traces layout
 * KIND/N-node/PROVIDER-MM-DD-YYYY/ZONE_CODE.json, e.g.
 * "preemption/1-node/aws-04-22-2023/us-east-1c_v100_1.json". */
struct tm_spot_key {
    enum tm_spot_kind kind;
    int32_t nodes;                    /* instances requested at once */
    char provider[16];                /* aws, gcp */
    char run[TM_SPOT_NAME_MAX];       /* aws-04-22-2023 */
    char zone[TM_SPOT_NAME_MAX];      /* us-east-1c (the collector's account naming) */
    char code[TM_SPOT_NAME_MAX];      /* v100_1 */
    char type[TM_SPOT_NAME_MAX];      /* p3.2xlarge */
};

/* The instance type a trace's code stands for (README section 1: v100_1 =
 * p3.2xlarge, v100_8 = p3.16xlarge, k80_1 = p2.xlarge, k80_8 =
 * p2.8xlarge, intel_64 = r5.16xlarge, c3-88 = GCP c3-highcpu-88), or NULL. */
const char *tm_spot_type_of_code(const char *provider, const char *code);

/* Parse a path relative to the skypilot-spot-traces folder.  0, or
 * TM_EINVAL with err filled (the reason; the caller names the file). */
int tm_spot_key_from_path(const char *relpath, struct tm_spot_key *ret, char *err, size_t errlen);

/* Exact 95% interval for a Poisson rate with `events` (a whole number)
 * over `exposure` (> 0): [chi2(0.025; 2k)/2, chi2(0.975; 2k+2)/2] / exposure. */
void tm_spot_poisson_interval(double events, double exposure, double *ret_lo, double *ret_hi);

/* One trace file's figures. */
struct tm_spot_file_fit {
    struct tm_spot_key key;
    char path[TM_SPOT_PATH_MAX];      /* relative to skypilot-spot-traces/ */
    double gap_s;
    size_t ticks;
    double hours;                     /* ticks x gap */
    double events, up_hours;          /* preemption files */
    double share;                     /* mean value / requested */
    size_t row;                       /* set by tm_spot_fit_merge(): its row */
};

/* Fit one series of n >= 1 values (whole numbers, 0..requested) with
 * tick gap_s > 0 into ret (key and path are left as they are).  0, or
 * TM_EINVAL with err filled ("value 3.5 at index 7 is not a whole number
 * of instances", ...). */
int tm_spot_fit_series(const double *v, size_t n, double gap_s, int32_t requested,
                       struct tm_spot_file_fit *ret, char *err, size_t errlen);

/* One (provider, type, zone, nodes) row: the files of that key pooled. */
struct tm_spot_fit {
    char provider[16];
    char type[TM_SPOT_NAME_MAX];
    char zone[TM_SPOT_NAME_MAX];
    int32_t nodes;
    bool has_hazard;                  /* a preemption file with time up */
    double events, up_hours, hazard_per_hour, hazard_lo95, hazard_hi95;
    bool has_availability;            /* an availability file */
    double availability, availability_hours;
    size_t preemption_files, availability_files;
};

/* Pool files into rows sorted by (provider, type, zone, nodes); each
 * file's `row` is set.  *ret is malloc'ed (free()); TM_ENOMEM. */
int tm_spot_fit_merge(struct tm_spot_file_fit *files, size_t nfiles, struct tm_spot_fit **ret,
                      size_t *ret_n);

#endif
