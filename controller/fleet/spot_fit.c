/*
 * controller/fleet/spot_fit.c: the spot hazard and availability fits (see
 * spot_fit.h).  Pure.
 */
#include "controller/fleet/spot_fit.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/err.h"

static const struct {
    const char *provider, *code, *type;
} codes[] = {
    /* README section 1, "Instance types"; k80 per the collector script
     * (p2.2xlarge, in the upstream README, does not exist). */
    {"aws", "v100_1", "p3.2xlarge"},
    {"aws", "v100_8", "p3.16xlarge"},
    {"aws", "k80_1", "p2.xlarge"},
    {"aws", "k80_8", "p2.8xlarge"},
    {"aws", "intel_64", "r5.16xlarge"},
    {"gcp", "c3-88", "c3-highcpu-88"},
};

const char *tm_spot_type_of_code(const char *provider, const char *code)
{
    for (size_t i = 0; i < sizeof(codes) / sizeof(codes[0]); i++)
        if (strcmp(codes[i].provider, provider) == 0 && strcmp(codes[i].code, code) == 0)
            return codes[i].type;
    return NULL;
}

static int say(char *err, size_t errlen, const char *msg, const char *arg)
{
    if (err && errlen)
        snprintf(err, errlen, msg, arg);
    return TM_EINVAL;
}

/* Copy the n bytes at s into dst (TM_SPOT_NAME_MAX or `cap` bytes). */
static bool copy_part(char *dst, size_t cap, const char *s, size_t n)
{
    if (n == 0 || n >= cap)
        return false;
    memcpy(dst, s, n);
    dst[n] = '\0';
    return true;
}

int tm_spot_key_from_path(const char *relpath, struct tm_spot_key *ret, char *err, size_t errlen)
{
    struct tm_spot_key k;
    const char *part[4], *p = relpath;
    size_t len[4];
    const char *us, *type;
    char nodes_s[16], *end;
    long nodes;

    memset(&k, 0, sizeof(k));
    for (int i = 0; i < 4; i++) {
        const char *slash = strchr(p, '/');
        part[i] = p;
        len[i] = slash ? (size_t)(slash - p) : strlen(p);
        if ((i < 3) != (slash != NULL))
            return say(err, errlen, "%s", "the path is not KIND/N-node/PROVIDER-DATE/ZONE_TYPE.json");
        if (slash)
            p = slash + 1;
    }
    if (len[0] == 10 && strncmp(part[0], "preemption", 10) == 0)
        k.kind = TM_SPOT_PREEMPTION;
    else if (len[0] == 12 && strncmp(part[0], "availability", 12) == 0)
        k.kind = TM_SPOT_AVAILABILITY;
    else
        return say(err, errlen, "%s", "the path is neither under preemption/ nor availability/");
    if (len[1] < 6 || strncmp(part[1] + len[1] - 5, "-node", 5) != 0 ||
        !copy_part(nodes_s, sizeof(nodes_s), part[1], len[1] - 5))
        return say(err, errlen, "%s", "the second folder is not N-node");
    nodes = strtol(nodes_s, &end, 10);
    if (*end || nodes < 1 || nodes > 1000)
        return say(err, errlen, "%s", "the second folder is not N-node");
    k.nodes = (int32_t)nodes;
    if (!copy_part(k.run, sizeof(k.run), part[2], len[2]) || !strchr(k.run, '-') ||
        !copy_part(k.provider, sizeof(k.provider), k.run, (size_t)(strchr(k.run, '-') - k.run)))
        return say(err, errlen, "%s", "the run folder is not PROVIDER-DATE");
    if (len[3] < 6 || strcmp(part[3] + len[3] - 5, ".json") != 0)
        return say(err, errlen, "%s", "the name does not end in .json");
    us = memchr(part[3], '_', len[3]);
    if (!us || !copy_part(k.zone, sizeof(k.zone), part[3], (size_t)(us - part[3])) ||
        !copy_part(k.code, sizeof(k.code), us + 1, (size_t)(part[3] + len[3] - 5 - (us + 1))))
        return say(err, errlen, "%s", "the file name is not ZONE_TYPE.json");
    type = tm_spot_type_of_code(k.provider, k.code);
    if (!type) {
        if (err && errlen)
            snprintf(err, errlen, "unrecognized instance code \"%s\" for %s (known: "
                     "controller/fleet/spot_fit.c)", k.code, k.provider);
        return TM_EINVAL;
    }
    snprintf(k.type, sizeof(k.type), "%s", type);
    *ret = k;
    return 0;
}

/* P(X <= k) for X ~ Poisson(mu), summed in log space (k up to thousands). */
static double poisson_cdf(double k, double mu)
{
    double s = 0;
    if (mu <= 0)
        return 1;
    for (double i = 0; i <= k; i++)
        s += exp(-mu + i * log(mu) - lgamma(i + 1));
    return s > 1 ? 1 : s;
}

/* The mu at which poisson_cdf(k, mu) = target (it falls as mu grows). */
static double solve_mu(double k, double target)
{
    double lo = 0, hi = k + 20 * sqrt(k + 1) + 50;
    for (int it = 0; it < 200; it++) {
        double mid = (lo + hi) / 2;
        if (poisson_cdf(k, mid) > target)
            lo = mid;
        else
            hi = mid;
    }
    return (lo + hi) / 2;
}

void tm_spot_poisson_interval(double events, double exposure, double *ret_lo, double *ret_hi)
{
    double k = floor(events + 0.5);
    /* lower: P(X >= k | mu) = 0.025, i.e. P(X <= k - 1 | mu) = 0.975 */
    double lo = k > 0 ? solve_mu(k - 1, 0.975) : 0;
    double hi = solve_mu(k, 0.025);
    *ret_lo = exposure > 0 ? lo / exposure : 0;
    *ret_hi = exposure > 0 ? hi / exposure : 0;
}

int tm_spot_fit_series(const double *v, size_t n, double gap_s, int32_t requested,
                       struct tm_spot_file_fit *ret, char *err, size_t errlen)
{
    double up = 0, events = 0;

    if (n == 0)
        return say(err, errlen, "%s", "\"data\" is empty");
    if (!(gap_s > 0) || !isfinite(gap_s))
        return say(err, errlen, "%s", "\"gap_seconds\" must be a positive number");
    for (size_t i = 0; i < n; i++) {
        if (!isfinite(v[i]) || v[i] < 0 || v[i] != floor(v[i]) || v[i] > requested) {
            if (err && errlen)
                snprintf(err, errlen, "value %g at index %zu is not a whole number of instances "
                                      "in 0..%d", v[i], i, (int)requested);
            return TM_EINVAL;
        }
        up += v[i];
        if (i > 0 && v[i] < v[i - 1])
            events += v[i - 1] - v[i];
    }
    ret->gap_s = gap_s;
    ret->ticks = n;
    ret->hours = (double)n * gap_s / 3600;
    ret->events = events;
    ret->up_hours = up * gap_s / 3600;
    ret->share = up / (double)n / requested;
    return 0;
}

static int cmp_key(const struct tm_spot_key *a, const struct tm_spot_key *b)
{
    int c = strcmp(a->provider, b->provider);
    if (!c)
        c = strcmp(a->type, b->type);
    if (!c)
        c = strcmp(a->zone, b->zone);
    if (!c)
        c = (a->nodes > b->nodes) - (a->nodes < b->nodes);
    return c;
}

static int cmp_index(const void *a, const void *b, void *arg)
{
    const struct tm_spot_file_fit *files = arg;
    size_t x = *(const size_t *)a, y = *(const size_t *)b;
    int c = cmp_key(&files[x].key, &files[y].key);
    if (c)
        return c;
    return (x > y) - (x < y); /* stable: the files' own order within a key */
}

int tm_spot_fit_merge(struct tm_spot_file_fit *files, size_t nfiles, struct tm_spot_fit **ret,
                      size_t *ret_n)
{
    struct tm_spot_fit *rows = calloc(nfiles + 1, sizeof(*rows));
    size_t *idx = calloc(nfiles + 1, sizeof(*idx));
    size_t n = 0;

    if (!rows || !idx) {
        free(rows);
        free(idx);
        return TM_ENOMEM;
    }
    for (size_t i = 0; i < nfiles; i++)
        idx[i] = i;
    qsort_r(idx, nfiles, sizeof(*idx), cmp_index, files);
    for (size_t a = 0; a < nfiles;) {
        struct tm_spot_fit *r = &rows[n];
        const struct tm_spot_key *k = &files[idx[a]].key;
        double avail_sum = 0;
        size_t b = a;

        snprintf(r->provider, sizeof(r->provider), "%s", k->provider);
        snprintf(r->type, sizeof(r->type), "%s", k->type);
        snprintf(r->zone, sizeof(r->zone), "%s", k->zone);
        r->nodes = k->nodes;
        for (; b < nfiles && cmp_key(&files[idx[b]].key, k) == 0; b++) {
            struct tm_spot_file_fit *f = &files[idx[b]];
            f->row = n;
            if (f->key.kind == TM_SPOT_PREEMPTION) {
                r->events += f->events;
                r->up_hours += f->up_hours;
                r->preemption_files++;
            } else {
                avail_sum += f->share * f->hours;
                r->availability_hours += f->hours;
                r->availability_files++;
            }
        }
        r->has_hazard = r->up_hours > 0;
        if (r->has_hazard) {
            r->hazard_per_hour = r->events / r->up_hours;
            tm_spot_poisson_interval(r->events, r->up_hours, &r->hazard_lo95, &r->hazard_hi95);
        }
        r->has_availability = r->availability_hours > 0;
        if (r->has_availability)
            r->availability = avail_sum / r->availability_hours;
        n++;
        a = b;
    }
    free(idx);
    *ret = rows;
    *ret_n = n;
    return 0;
}
