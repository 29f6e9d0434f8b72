/*
 * controller/fleet/forecast_series.c: the series files the forecaster is
 * evaluated on (forecast.h): a strict CSV reader and the openb pod list
 * turned into a demand series.
 *
 * The CSV reader is small and strict on purpose: a series with a stray
 * quote or a blank value is more likely a broken export than data, and a
 * forecast table computed from half a file would look as good as any other.
 */
#include "controller/fleet/forecast.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/err.h"
#include "core/units.h"

#define RECORD_MAX (64 * 1024)
#define FIELDS_MAX 1024
#define VALUE_COLS_MAX 32
#define SERIES_MAX (10 * 1000 * 1000) /* samples: 19 years of minutes */

void tm_forecast_series_release(struct tm_forecast_series *s)
{
    if (!s)
        return;
    free(s->t_ms);
    free(s->v);
    memset(s, 0, sizeof(*s));
}

static int series_push(struct tm_forecast_series *s, int64_t t, double v)
{
    if (s->n == s->cap) {
        size_t cap = s->cap ? s->cap * 2 : 4096;
        int64_t *nt;
        double *nv;

        if (cap > SERIES_MAX)
            return TM_ENOMEM;
        nt = realloc(s->t_ms, cap * sizeof(*nt));
        if (!nt)
            return TM_ENOMEM;
        s->t_ms = nt;
        nv = realloc(s->v, cap * sizeof(*nv));
        if (!nv)
            return TM_ENOMEM;
        s->v = nv;
        s->cap = cap;
    }
    s->t_ms[s->n] = t;
    s->v[s->n] = v;
    s->n++;
    return 0;
}

/*
 * RFC 4180 records.  A record may span lines inside quotes; `line` is the
 * physical line it starts on.  Fields point into buf, NUL-terminated.
 */
struct csv {
    FILE *fp;
    const char *path;
    char *buf;
    char *fields[FIELDS_MAX];
    int nf;
    long line, next_line;
};

static int csv_error(const struct csv *c, long line, int col, char *err, size_t errlen,
                     const char *fmt, ...)
{
    va_list ap;
    int n;

    n = snprintf(err, errlen, "%s:%ld:%d: ", c->path, line, col);
    if (n >= 0 && (size_t)n < errlen) {
        va_start(ap, fmt);
        vsnprintf(err + n, errlen - (size_t)n, fmt, ap);
        va_end(ap);
    }
    return TM_EINVAL;
}

/* Read one record: 1, 0 at end of file, or TM_EINVAL with err filled. */
static int csv_next(struct csv *c, char *err, size_t errlen)
{
    enum { START, PLAIN, QUOTED, QUOTE_SEEN } st = START;
    size_t len = 0;
    int ch;

    c->nf = 0;
    c->line = c->next_line;
    ch = getc(c->fp);
    if (ch == EOF)
        return 0;
    c->fields[c->nf++] = c->buf;
    for (;; ch = getc(c->fp)) {
        bool end_field = false, end_record = false;

        if (ch == EOF) {
            if (st == QUOTED)
                return csv_error(c, c->line, c->nf, err, errlen, "unterminated quoted field");
            end_record = true;
        } else if (st == QUOTED) {
            if (ch == '"') {
                st = QUOTE_SEEN;
                continue;
            }
            if (ch == '\n')
                c->next_line++;
        } else if (ch == '"') {
            if (st == START) {
                st = QUOTED;
                continue;
            }
            if (st == QUOTE_SEEN) { /* "" inside quotes: one quote */
                st = QUOTED;
            } else {
                return csv_error(c, c->line, c->nf, err, errlen, "quote inside an unquoted field");
            }
        } else if (ch == ',') {
            end_field = true;
        } else if (ch == '\n' || ch == '\r') {
            if (ch == '\r') {
                int n2 = getc(c->fp);
                if (n2 != '\n')
                    return csv_error(c, c->line, c->nf, err, errlen,
                                     "carriage return not followed by a line feed");
            }
            c->next_line++;
            end_record = true;
        } else if (st == QUOTE_SEEN) {
            return csv_error(c, c->line, c->nf, err, errlen,
                             "unexpected character after a closing quote");
        } else {
            st = PLAIN;
        }
        if (end_field || end_record) {
            c->buf[len++] = '\0';
            if (end_record)
                return 1;
            if (c->nf == FIELDS_MAX)
                return csv_error(c, c->line, c->nf, err, errlen, "more than %d fields",
                                 FIELDS_MAX);
            c->fields[c->nf++] = c->buf + len;
            st = START;
            continue;
        }
        /* One byte left for the final NUL. */
        if (len + 2 > RECORD_MAX)
            return csv_error(c, c->line, c->nf, err, errlen, "record longer than %d bytes",
                             RECORD_MAX);
        c->buf[len++] = (char)ch;
        if (st == START)
            st = PLAIN;
    }
}

static int csv_open(struct csv *c, const char *path, char *err, size_t errlen)
{
    memset(c, 0, sizeof(*c));
    c->path = path;
    c->next_line = 1;
    c->buf = malloc(RECORD_MAX);
    if (!c->buf)
        return TM_ENOMEM;
    c->fp = fopen(path, "r");
    if (!c->fp) {
        int e = -errno;
        snprintf(err, errlen, "%s: could not open: %s", path, strerror(errno));
        return e;
    }
    return 0;
}

static void csv_close(struct csv *c)
{
    if (c->fp)
        fclose(c->fp);
    free(c->buf);
    c->fp = NULL;
    c->buf = NULL;
}

/* The header row, with the file named when it is missing. */
static int csv_header(struct csv *c, char *err, size_t errlen)
{
    int r = csv_next(c, err, errlen);

    if (r == 0)
        return csv_error(c, 1, 0, err, errlen, "empty file, expected a header row");
    if (r < 0 && ferror(c->fp)) {
        snprintf(err, errlen, "%s: could not read: %s", c->path, strerror(errno));
        return -EIO;
    }
    return r < 0 ? r : 0;
}

static int csv_column(const struct csv *c, const char *name)
{
    for (int i = 0; i < c->nf; i++)
        if (strcmp(c->fields[i], name) == 0)
            return i;
    return -1;
}

static bool parse_number(const char *s, double *ret)
{
    char *end;
    double v;

    errno = 0;
    v = strtod(s, &end);
    if (errno || end == s || *end || !isfinite(v))
        return false;
    *ret = v;
    return true;
}

/* "YYYY-MM-DD HH:MM:SS" (or with a T) as UTC, or decimal seconds. */
static bool parse_time(const char *s, int64_t *ret_ms)
{
    double secs;

    if (tm_utc_datetime_parse(s, ret_ms))
        return true;
    if (!parse_number(s, &secs) || fabs(secs) > 9.0e12)
        return false;
    *ret_ms = (int64_t)llround(secs * 1000.0);
    return true;
}

int tm_forecast_load_csv(const char *path, const char *time_column, const char *value_columns,
                         struct tm_forecast_series *ret, char *err, size_t errlen)
{
    struct csv c;
    struct tm_forecast_series s = {0};
    char names[1024];
    const char *vname[VALUE_COLS_MAX];
    int vcol[VALUE_COLS_MAX], nv = 0, tcol;
    int r;

    err[0] = '\0';
    r = csv_open(&c, path, err, errlen);
    if (r < 0)
        goto out;
    r = csv_header(&c, err, errlen);
    if (r < 0)
        goto out;
    r = csv_error(&c, 1, 0, err, errlen, "bad list of value columns \"%s\"", value_columns);
    if (strlen(value_columns) >= sizeof(names))
        goto out;
    memcpy(names, value_columns, strlen(value_columns) + 1);
    for (char *p = names;;) {
        char *comma = strchr(p, ',');
        if (comma)
            *comma = '\0';
        if (!*p || nv == VALUE_COLS_MAX)
            goto out;
        vname[nv++] = p;
        if (!comma)
            break;
        p = comma + 1;
    }
    tcol = csv_column(&c, time_column);
    if (tcol < 0) {
        r = csv_error(&c, 1, 0, err, errlen, "no column \"%s\" in the header", time_column);
        goto out;
    }
    for (int i = 0; i < nv; i++) {
        vcol[i] = csv_column(&c, vname[i]);
        if (vcol[i] < 0) {
            r = csv_error(&c, 1, 0, err, errlen, "no column \"%s\" in the header", vname[i]);
            goto out;
        }
    }
    for (int width = c.nf;;) {
        int64_t t;
        double sum = 0.0;

        r = csv_next(&c, err, errlen);
        if (r <= 0)
            break;
        if (c.nf != width) {
            r = csv_error(&c, c.line, c.nf < width ? c.nf : width + 1, err, errlen,
                          "%d fields, the header has %d", c.nf, width);
            goto out;
        }
        if (!parse_time(c.fields[tcol], &t)) {
            r = csv_error(&c, c.line, tcol + 1, err, errlen,
                          "bad time \"%s\" in column \"%s\" (seconds or YYYY-MM-DD HH:MM:SS)",
                          c.fields[tcol], time_column);
            goto out;
        }
        if (s.n > 0 && t < s.t_ms[s.n - 1]) {
            r = csv_error(&c, c.line, tcol + 1, err, errlen, "time goes backwards");
            goto out;
        }
        for (int i = 0; i < nv; i++) {
            double v;
            if (!parse_number(c.fields[vcol[i]], &v)) {
                r = csv_error(&c, c.line, vcol[i] + 1, err, errlen,
                              "bad number \"%s\" in column \"%s\"", c.fields[vcol[i]], vname[i]);
                goto out;
            }
            sum += v;
        }
        r = series_push(&s, t, sum);
        if (r < 0)
            goto out;
    }
    if (r < 0)
        goto out;
    if (ferror(c.fp)) {
        r = -EIO;
        snprintf(err, errlen, "%s: could not read", path);
        goto out;
    }
    if (s.n == 0) {
        r = csv_error(&c, 2, 0, err, errlen, "no data rows");
        goto out;
    }
    *ret = s;
    s = (struct tm_forecast_series){0};
    r = 0;
out:
    tm_forecast_series_release(&s);
    csv_close(&c);
    return r;
}

int tm_forecast_load_pods(const char *path, int64_t step_ms, int64_t since_s,
                          struct tm_forecast_series *ret, char *err, size_t errlen)
{
    struct csv c;
    struct tm_forecast_series s = {0};
    static const char *const need[] = {"creation_time", "deletion_time", "num_gpu", "gpu_milli"};
    int col[4];
    /* Pods as (creation ms, deletion ms, milli-GPUs), kept in integers so
     * that thousands of fractional shares add up exactly. */
    int64_t (*pods)[3] = NULL, *diff = NULL;
    size_t npods = 0, cap = 0;
    int64_t lo = INT64_MAX, hi = INT64_MIN, k0, k1, acc = 0;
    int r;

    err[0] = '\0';
    if (step_ms < 1000) {
        snprintf(err, errlen, "%s: bad step", path);
        return TM_EINVAL;
    }
    r = csv_open(&c, path, err, errlen);
    if (r < 0)
        goto out;
    r = csv_header(&c, err, errlen);
    if (r < 0)
        goto out;
    for (int i = 0; i < 4; i++) {
        col[i] = csv_column(&c, need[i]);
        if (col[i] < 0) {
            r = csv_error(&c, 1, 0, err, errlen, "no column \"%s\" in the header", need[i]);
            goto out;
        }
    }
    for (int width = c.nf;;) {
        double v[4];

        r = csv_next(&c, err, errlen);
        if (r <= 0)
            break;
        if (c.nf != width) {
            r = csv_error(&c, c.line, c.nf < width ? c.nf : width + 1, err, errlen,
                          "%d fields, the header has %d", c.nf, width);
            goto out;
        }
        for (int i = 0; i < 4; i++)
            if (!parse_number(c.fields[col[i]], &v[i]) || v[i] < 0 || v[i] > 1e12 ||
                (i >= 2 && v[i] != floor(v[i]))) {
                r = csv_error(&c, c.line, col[i] + 1, err, errlen, "bad number \"%s\" in column \"%s\"",
                              c.fields[col[i]], need[i]);
                goto out;
            }
        if (v[1] < v[0]) {
            r = csv_error(&c, c.line, col[1] + 1, err, errlen, "deletion before creation");
            goto out;
        }
        if (npods == cap) {
            size_t ncap = cap ? cap * 2 : 1024;
            void *np;
            r = TM_ENOMEM;
            if (ncap > SERIES_MAX)
                goto out;
            np = realloc(pods, ncap * sizeof(*pods));
            if (!np)
                goto out;
            pods = np;
            cap = ncap;
        }
        pods[npods][0] = llround(v[0] * 1000.0);
        pods[npods][1] = llround(v[1] * 1000.0);
        pods[npods][2] = v[2] == 1 ? (int64_t)v[3] : (int64_t)v[2] * 1000;
        if (pods[npods][1] < lo)
            lo = pods[npods][1];
        if (pods[npods][1] > hi)
            hi = pods[npods][1];
        npods++;
    }
    if (r < 0)
        goto out;
    if (npods == 0) {
        r = csv_error(&c, 2, 0, err, errlen, "no pods");
        goto out;
    }
    if (since_s >= 0)
        lo = since_s * 1000;
    /* Pod alive at T = k step iff creation <= T < deletion, i.e.
     * ceil(creation / step) <= k < ceil(deletion / step). */
    k0 = (lo + step_ms - 1) / step_ms;
    k1 = hi / step_ms;
    if (k1 < k0 || k1 - k0 + 1 > SERIES_MAX) {
        snprintf(err, errlen, "%s: demand window from %lld s to %lld s is empty or too long", path,
                 (long long)(lo / 1000), (long long)(hi / 1000));
        r = TM_EINVAL;
        goto out;
    }
    r = TM_ENOMEM;
    diff = calloc((size_t)(k1 - k0 + 2), sizeof(*diff));
    if (!diff)
        goto out;
    for (size_t i = 0; i < npods; i++) {
        int64_t a = (pods[i][0] + step_ms - 1) / step_ms, b = (pods[i][1] + step_ms - 1) / step_ms;
        if (a < k0)
            a = k0;
        if (b > k1 + 1)
            b = k1 + 1;
        if (a >= b)
            continue;
        diff[a - k0] += pods[i][2];
        diff[b - k0] -= pods[i][2];
    }
    for (int64_t k = k0; k <= k1; k++) {
        acc += diff[k - k0];
        r = series_push(&s, k * step_ms, (double)acc / 1000.0);
        if (r < 0)
            goto out;
    }
    *ret = s;
    s = (struct tm_forecast_series){0};
    r = 0;
out:
    free(diff);
    free(pods);
    tm_forecast_series_release(&s);
    csv_close(&c);
    return r;
}
