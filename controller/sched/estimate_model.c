/*
 * controller/sched/estimate_model.c: online quantile regression of
 * log-runtime on one-hot job features (see estimate_model.h for the choice).
 */
#include "controller/sched/estimate_model.h"

#include <math.h>
#include <string.h>

/* Step sizes in log(seconds), per weight: eta = ETA0 / (1 + updates / 8),
 * a Robbins-Monro 1/n schedule (a new bucket reaches its level in tens of
 * jobs, then settles like a sample quantile), down to a floor that keeps
 * a settled weight following drift, at a quarter of a percent of the
 * runtime per job; at the floor the answer's noise is about 5%. */
#define ETA0 1.0
#define ETA_DECAY 8.0
#define ETA_MIN 0.005
#define NACTIVE 6

#define OFF_CLASS 1
#define OFF_GPU (OFF_CLASS + TM_CLASS_MAX)
#define OFF_CPU (OFF_GPU + TM_EMODEL_GPU_BUCKETS)
#define OFF_MEM (OFF_CPU + TM_EMODEL_CPU_BUCKETS)
#define OFF_TEAM (OFF_MEM + TM_EMODEL_MEM_BUCKETS)

_Static_assert(OFF_TEAM + TM_EMODEL_TEAM_BUCKETS == TM_EMODEL_NW, "feature layout");

void tm_emodel_init(struct tm_emodel *m)
{
    memset(m, 0, sizeof(*m));
}

static int clampi(int v, int lo, int hi)
{
    return v < lo ? lo : v > hi ? hi : v;
}

static int gpu_bucket(int32_t milli)
{
    int32_t g = milli / 1000;

    if (milli <= 0)
        return 0;
    if (milli < 1000)
        return 1;
    if (g <= 1)
        return 2;
    if (g == 2)
        return 3;
    if (g <= 4)
        return 4;
    if (g <= 8)
        return 5;
    return g <= 16 ? 6 : 7;
}

/* Bucket 0 is "not given"; then one per doubling from `unit`. */
static int log_bucket(int64_t v, double unit, int nb)
{
    if (v <= 0)
        return 0;
    return clampi((int)floor(log2((double)v / unit)) + 1, 1, nb - 1);
}

static int team_bucket(const char *team)
{
    uint32_t h = 2166136261u;

    if (!team || !team[0])
        return 0;
    for (const unsigned char *s = (const unsigned char *)team; *s; s++) {
        h ^= *s;
        h *= 16777619u;
    }
    return 1 + (int)(h % (TM_EMODEL_TEAM_BUCKETS - 1));
}

/* The active feature of each group: NACTIVE weight indices. */
static void features(const struct tm_estimate_key *k, int f[NACTIVE])
{
    f[0] = 0;
    f[1] = OFF_CLASS + clampi((int)k->klass, 0, TM_CLASS_MAX - 1);
    f[2] = OFF_GPU + gpu_bucket(k->gpu_milli);
    f[3] = OFF_CPU + log_bucket(k->cpu_milli, 250.0, TM_EMODEL_CPU_BUCKETS);
    f[4] = OFF_MEM + log_bucket(k->memory_mib, 256.0, TM_EMODEL_MEM_BUCKETS);
    f[5] = OFF_TEAM + team_bucket(k->team);
}

static double raw(const struct tm_emodel *m, const int f[NACTIVE])
{
    double y = 0;

    for (int i = 0; i < NACTIVE; i++)
        y += m->w[f[i]];
    return y;
}

void tm_emodel_observe(struct tm_emodel *m, const struct tm_estimate_key *k, int64_t runtime_ms)
{
    int f[NACTIVE];
    double y, g;

    if (runtime_ms < 0)
        return;
    features(k, f);
    /* log seconds, at least 1 s: the scheduler plans in seconds. */
    y = log(runtime_ms < 1000 ? 1.0 : (double)runtime_ms / 1000.0);
    if (m->n++ == 0) {
        m->w[0] = y; /* start at the first runtime, not at 1 s */
        m->updates[0]++;
        return;
    }
    /* Subgradient of the pinball loss in the prediction. */
    g = y > raw(m, f) ? TM_EMODEL_TAU : y < raw(m, f) ? -(1.0 - TM_EMODEL_TAU) : 0.0;
    if (g == 0.0)
        return;
    for (int i = 0; i < NACTIVE; i++) {
        double eta = ETA0 / (1.0 + (double)m->updates[f[i]] / ETA_DECAY);
        if (eta < ETA_MIN)
            eta = ETA_MIN;
        m->w[f[i]] += eta * g / NACTIVE;
        if (m->updates[f[i]] < UINT32_MAX)
            m->updates[f[i]]++;
    }
}

int64_t tm_emodel_predict(const struct tm_emodel *m, const struct tm_estimate_key *k)
{
    int f[NACTIVE];
    double s;

    if (m->n < TM_EMODEL_MIN_SAMPLES)
        return 0;
    features(k, f);
    /* Clamp to a year: exp of a runaway weight must not overflow int64. */
    s = exp(fmin(raw(m, f), log(365.0 * 86400.0)));
    return s < 1.0 ? 1000 : llround(s * 1000.0);
}
