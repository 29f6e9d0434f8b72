/*
 * controller/sched/quota_share.c: fair share beyond the quotas, usage
 * decayed with a half-life and the order it gives the teams.
 */
#include <math.h>

#include "controller/sched/quota_internal.h"

double tm_quota_decay(double usage, int64_t dt_ms, int64_t half_life_ms)
{
    if (half_life_ms <= 0 || dt_ms <= 0)
        return usage;
    return usage * exp2(-(double)dt_ms / (double)half_life_ms);
}

void tm_quota_share_advance(const struct tm_quota *q, double *usage, const int64_t *running_gpus,
                            int64_t dt_ms, int64_t half_life_ms)
{
    if (dt_ms <= 0)
        return;
    for (size_t n = 0; n < q->nnodes; n++) {
        double r = running_gpus ? (double)running_gpus[n] : 0.0;

        if (q->is_org[n])
            continue;
        if (half_life_ms <= 0) {
            usage[n] += r * (double)dt_ms;
            continue;
        }
        /* Work done at s in [0, dt] weighs 2^(-(dt-s)/h) at the end: the
         * integral is r * h / ln 2 * (1 - 2^(-dt/h)). */
        double keep = exp2(-(double)dt_ms / (double)half_life_ms);
        double tau = (double)half_life_ms / log(2.0);

        usage[n] = usage[n] * keep + r * tau * -expm1(-(double)dt_ms / tau);
    }
}

double tm_quota_fair_key(const struct tm_quota *q, const double *usage, int32_t team)
{
    double share;

    if (q->quota_sum <= 0 || q->quota_total[team] <= 0)
        return INFINITY;
    share = (double)q->quota_total[team] / (double)q->quota_sum;
    return usage[team] / (q->weight[team] * share);
}

int tm_quota_fair_cmp(const struct tm_quota *q, const double *usage, int32_t a, int32_t b)
{
    double ka = tm_quota_fair_key(q, usage, a), kb = tm_quota_fair_key(q, usage, b);

    if (isinf(ka) && isinf(kb)) {
        ka = usage[a] / q->weight[a];
        kb = usage[b] / q->weight[b];
    }
    if (ka != kb)
        return ka < kb ? -1 : 1;
    return a < b ? -1 : a > b;
}

void tm_quota_proportional(const double *weights, size_t n, int64_t gpus, int64_t *out)
{
    double sum = 0;
    int64_t given = 0;

    for (size_t i = 0; i < n; i++)
        sum += weights[i] > 0 ? weights[i] : 0;
    for (size_t i = 0; i < n; i++) {
        double w = weights[i] > 0 && sum > 0 ? weights[i] / sum : 0;

        out[i] = (int64_t)floor(w * (double)gpus);
        given += out[i];
    }
    /* Largest remainders first, ties to the earlier: the rest, one each. */
    while (given < gpus && sum > 0) {
        size_t best = n;
        double rem = -1;

        for (size_t i = 0; i < n; i++) {
            double w = weights[i] > 0 ? weights[i] / sum : 0;
            double r = w * (double)gpus - (double)out[i];

            if (weights[i] > 0 && r > rem) {
                rem = r;
                best = i;
            }
        }
        out[best]++;
        given++;
    }
}
