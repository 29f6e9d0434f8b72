/*
 * controller/cli/forecast.c: `tarmac forecast`, the evaluation table over
 * a series file (the readers are fleet/forecast_series.c).
 *
 *   tarmac forecast --series FILE --time-column NAME --value-columns A,B
 *                   [--horizon-s N] [--quantile Q] [--step-s N]
 *                   [--warmup-s N] [--window N] [--json]
 *   tarmac forecast --pods FILE [--since-s N] [...]   (openb demand)
 */
#include "controller/cli/cli.h"
#include "controller/fleet/forecast.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/err.h"

struct opts {
    const char *series, *pods, *time_col, *value_cols;
    int64_t horizon_s, step_s, warmup_s, since_s;
    int32_t window;
    double quantile;
    bool json;
};

static void usage(FILE *f)
{
    fprintf(f,
            "usage: tarmac forecast --series FILE --time-column NAME --value-columns A[,B...]\n"
            "                       [--horizon-s N] [--quantile Q] [--step-s N] [--warmup-s N]\n"
            "                       [--window N] [--json]\n"
            "       tarmac forecast --pods FILE [--since-s N] [...]\n"
            "Evaluates the tarmac forecaster against naive (last value) and seasonal-naive\n"
            "(value one day earlier) on a series: the value of a row is the sum of the value\n"
            "columns; the time column holds seconds or YYYY-MM-DD HH:MM:SS.  --pods derives\n"
            "GPU demand (running + pending) per step from an openb pod list.  Each model\n"
            "forecasts --horizon-s ahead (default 240 = 180 s boot + 60 s tick, rounded up to\n"
            "whole steps) at every step after --warmup-s (default 86400); scores are the\n"
            "pinball loss of the --quantile (default 0.9) upper forecast, the MAPE (percent,\n"
            "zero actuals skipped) of the mean, and the coverage of the upper forecast.\n");
}

static int bad(const char *fmt, const char *arg)
{
    fprintf(stderr, "tarmac forecast: ");
    fprintf(stderr, fmt, arg);
    fprintf(stderr, "\n");
    return 2;
}

static bool parse_int(const char *s, long long lo, long long hi, int64_t *ret)
{
    char *end;
    long long v;

    errno = 0;
    v = strtoll(s, &end, 10);
    if (errno || end == s || *end || v < lo || v > hi)
        return false;
    *ret = v;
    return true;
}

/* 0 to run, 1 after --help, 2 on bad usage. */
static int parse_args(int argc, char **argv, struct opts *o)
{
    int64_t w;

    memset(o, 0, sizeof(*o));
    o->horizon_s = 240;
    o->step_s = 60;
    o->warmup_s = 86400;
    o->since_s = -1;
    o->quantile = 0.9;
    o->window = 2880;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;

        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            usage(stdout);
            return 1;
        }
        if (strcmp(a, "--json") == 0) {
            o->json = true;
            continue;
        }
        if (strncmp(a, "--", 2) != 0)
            return bad("unexpected argument \"%s\"", a);
        if (!v)
            return bad("option %s needs a value", a);
        i++;
        if (strcmp(a, "--series") == 0) {
            o->series = v;
        } else if (strcmp(a, "--pods") == 0) {
            o->pods = v;
        } else if (strcmp(a, "--time-column") == 0) {
            o->time_col = v;
        } else if (strcmp(a, "--value-columns") == 0) {
            o->value_cols = v;
        } else if (strcmp(a, "--horizon-s") == 0) {
            if (!parse_int(v, 0, 864000, &o->horizon_s))
                return bad("bad --horizon-s \"%s\" (seconds, 0 to 864000)", v);
        } else if (strcmp(a, "--step-s") == 0) {
            if (!parse_int(v, 1, 86400, &o->step_s))
                return bad("bad --step-s \"%s\" (seconds, 1 to 86400)", v);
        } else if (strcmp(a, "--warmup-s") == 0) {
            if (!parse_int(v, 0, 100LL * 86400 * 365, &o->warmup_s))
                return bad("bad --warmup-s \"%s\"", v);
        } else if (strcmp(a, "--since-s") == 0) {
            if (!parse_int(v, 0, 1000000000000LL, &o->since_s))
                return bad("bad --since-s \"%s\"", v);
        } else if (strcmp(a, "--window") == 0) {
            if (!parse_int(v, 1, TM_FORECAST_WINDOW_MAX, &w))
                return bad("bad --window \"%s\"", v);
            o->window = (int32_t)w;
        } else if (strcmp(a, "--quantile") == 0) {
            char *end;
            errno = 0;
            o->quantile = strtod(v, &end);
            if (errno || end == v || *end || !(o->quantile > 0.0 && o->quantile < 1.0))
                return bad("bad --quantile \"%s\" (0 < q < 1)", v);
        } else {
            return bad("unrecognized option \"%s\"", a);
        }
    }
    if (!o->series == !o->pods)
        return bad("%s", "give one of --series FILE or --pods FILE");
    if (o->series && (!o->time_col || !o->value_cols))
        return bad("%s", "--series needs --time-column and --value-columns");
    if ((o->horizon_s + o->step_s - 1) / o->step_s > TM_FORECAST_HORIZON_MAX)
        return bad("%s", "--horizon-s is more than 240 steps");
    if ((o->horizon_s + o->step_s - 1) / o->step_s * o->window > TM_FORECAST_CELLS_MAX)
        return bad("%s", "--window x horizon steps is more than 1000000 errors to keep");
    return 0;
}

static void json_string(const char *s)
{
    putchar('"');
    for (; *s; s++) {
        unsigned char ch = (unsigned char)*s;
        if (ch == '"' || ch == '\\')
            printf("\\%c", ch);
        else if (ch < 0x20)
            printf("\\u%04x", ch);
        else
            putchar(ch);
    }
    putchar('"');
}

static void json_number(double v)
{
    if (isfinite(v))
        printf("%.6g", v);
    else
        printf("null");
}

int tm_forecast_main(int argc, char **argv)
{
    struct opts o;
    struct tm_forecast_series s = {0};
    struct tm_forecast_params p;
    struct tm_forecast_score sc[TM_FORECAST_KIND_MAX];
    char err[512];
    int64_t hsteps;
    int r, rc = 2;

    r = parse_args(argc, argv, &o);
    if (r != 0)
        return r == 1 ? 0 : 2;
    if (o.series)
        r = tm_forecast_load_csv(o.series, o.time_col, o.value_cols, &s, err, sizeof(err));
    else
        r = tm_forecast_load_pods(o.pods, o.step_s * 1000, o.since_s, &s, err, sizeof(err));
    if (r < 0) {
        fprintf(stderr, "tarmac forecast: %s\n", err[0] ? err : tm_strerror(r));
        rc = r == TM_ENOMEM ? 1 : 2;
        goto out;
    }
    tm_forecast_params_default(&p);
    p.step_ms = o.step_s * 1000;
    p.window = o.window;
    p.quantile = o.quantile;
    hsteps = (o.horizon_s + o.step_s - 1) / o.step_s;
    if (hsteps < 1)
        hsteps = 1;
    p.horizon_steps = (int32_t)hsteps;
    for (int k = 0; k < TM_FORECAST_KIND_MAX; k++) {
        r = tm_forecast_evaluate((enum tm_forecast_kind)k, &p, s.t_ms, s.v, s.n,
                                 o.horizon_s * 1000, o.quantile, o.warmup_s * 1000, &sc[k]);
        if (r < 0) {
            fprintf(stderr, "tarmac forecast: could not evaluate %s on \"%s\": %s\n",
                    tm_forecast_kind_name((enum tm_forecast_kind)k), o.series ? o.series : o.pods,
                    r == TM_EINVAL ? "nothing to score (series shorter than the warm-up plus "
                                     "the horizon?)" : tm_strerror(r));
            rc = r == TM_ENOMEM ? 1 : 2;
            goto out;
        }
    }
    if (o.json) {
        printf("{\"series\":");
        json_string(o.series ? o.series : o.pods);
        printf(",\"kind\":\"%s\",\"value\":", o.series ? "csv" : "openb-pods");
        json_string(o.series ? o.value_cols : "GPUs wanted by running and pending pods");
        printf(",\"observations\":%zu,\"step_s\":%lld,\"horizon_s\":%lld,\"horizon_steps\":%lld,"
               "\"quantile\":",
               s.n, (long long)o.step_s, (long long)o.horizon_s, (long long)hsteps);
        json_number(o.quantile);
        printf(",\"warmup_s\":%lld,\"window\":%d,\"results\":[", (long long)o.warmup_s, o.window);
        for (int k = 0; k < TM_FORECAST_KIND_MAX; k++) {
            printf("%s{\"model\":\"%s\",\"pinball\":", k ? "," : "",
                   tm_forecast_kind_name((enum tm_forecast_kind)k));
            json_number(sc[k].pinball);
            printf(",\"mape\":");
            json_number(sc[k].mape);
            printf(",\"coverage\":");
            json_number(sc[k].coverage);
            printf(",\"scored\":%zu,\"mape_skipped\":%zu}", sc[k].scored, sc[k].mape_skipped);
        }
        printf("],\"tarmac_beats_seasonal_naive\":%s,\"tarmac_beats_naive\":%s}\n",
               sc[TM_FORECAST_TARMAC].pinball < sc[TM_FORECAST_SEASONAL_NAIVE].pinball ? "true" : "false",
               sc[TM_FORECAST_TARMAC].pinball < sc[TM_FORECAST_NAIVE].pinball ? "true" : "false");
    } else {
        printf("series: %s (%s), %zu observations, %zu steps scored\n",
               o.series ? o.series : o.pods,
               o.series ? o.value_cols : "openb demand: GPUs of running + pending pods", s.n,
               sc[0].scored);
        printf("step %lld s, horizon %lld s (%lld steps), quantile %g, warm-up %lld s, "
               "error window %d steps\n\n",
               (long long)o.step_s, (long long)o.horizon_s, (long long)hsteps, o.quantile,
               (long long)o.warmup_s, o.window);
        printf("| model | pinball@%g | MAPE %% | coverage |\n|---|---:|---:|---:|\n", o.quantile);
        for (int k = 0; k < TM_FORECAST_KIND_MAX; k++)
            printf("| %s | %.4f | %.2f | %.3f |\n", tm_forecast_kind_name((enum tm_forecast_kind)k),
                   sc[k].pinball, sc[k].mape, sc[k].coverage);
    }
    rc = 0;
out:
    tm_forecast_series_release(&s);
    return rc;
}
