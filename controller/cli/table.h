/*
 * controller/cli/table.h: aligned text tables for people (the API
 * commands' default output).  Cells are copied; each is cut to 60
 * characters on print so one long reason does not push every row off the
 * screen (--output json has everything).
 */
#ifndef TM_CLI_TABLE_H
#define TM_CLI_TABLE_H

#include <stddef.h>
#include <stdio.h>

struct tm_table {
    size_t ncols;
    const char *const *headers;  /* borrowed, ncols of them */
    char **cells;                /* row-major, ncells of them */
    size_t ncells, cap;
    int failed;                  /* an allocation failed: print says so */
};

/* headers: ncols column titles, borrowed for the table's life. */
void tm_table_init(struct tm_table *t, size_t ncols, const char *const *headers);

/* Append the next cell (rows fill left to right, then wrap). */
void tm_table_cell(struct tm_table *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Print headers and rows to out; "(none)" when there are no rows.
 * Returns 0, or -1 when a cell could not be stored (nothing printed). */
int tm_table_print(const struct tm_table *t, FILE *out);

void tm_table_release(struct tm_table *t);

#endif
