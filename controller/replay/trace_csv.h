/*
 * controller/replay/trace_csv.h: the CSV reading the trace loaders share
 * (trace.c for openb, trace_philly.c for Philly): rows split at commas,
 * columns found by name in the header, errors as "FILE:LINE:COLUMN: what".
 */
#ifndef TM_TRACE_CSV_H
#define TM_TRACE_CSV_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct tm_trace;

/* The traces are a few MiB; the cap bounds a wrong path pointing at
 * something huge. */
#define TRACE_FILE_MAX (512u << 20)
#define FIELDS_MAX 32

/* The columns a loader wants, by name; at[] is filled from the header. */
struct trace_cols {
    const char *const *names;
    int n;
    int at[FIELDS_MAX];
};

/* The rows of a trace file after its header, each with every named column. */
struct trace_rows {
    char *p;                      /* the rest of the file */
    size_t lineno;                /* of the row just read; 0 before the first */
    struct trace_cols c;
    const char *path;
};

/* Fill err with "PATH:LINE:COL: " and the message; returns TM_EINVAL. */
int trace_fail(char *err, size_t errlen, const char *path, size_t line, int col, const char *fmt, ...)
    __attribute__((format(printf, 6, 7)));

/* A whole decimal integer, optionally signed; no spaces, no fraction. */
bool trace_parse_i64(const char *s, int64_t *ret);

/* The next data row: 1 with its fields in f (*nf of them), 0 at the end,
 * or < 0 with err naming the line and column.  The header row is read into
 * rw->c on the way; quoted fields are refused (the traces have none, and a
 * quote would be a sign of another format). */
int trace_next_row(struct trace_rows *rw, char **f, int *nf, char *err, size_t errlen);

/* Whether the first line of buf has every one of names[0..n) as a column. */
bool trace_has_columns(const char *buf, const char *const *names, int n);

/* Load a Philly job file (timestamp,duration,num_gpus,gpu_time,cluster)
 * from buf, whose first line trace_has_columns() matched, into t,
 * replacing its jobs; buf is split in place. */
int trace_load_philly(struct tm_trace *t, char *buf, const char *path, char *err, size_t errlen);

#endif
