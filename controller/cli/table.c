/*
 * controller/cli/table.c: see cli/table.h.
 */
#include "controller/cli/table.h"

#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#define CELL_MAX 60

void tm_table_init(struct tm_table *t, size_t ncols, const char *const *headers)
{
    *t = (struct tm_table){.ncols = ncols, .headers = headers};
}

void tm_table_cell(struct tm_table *t, const char *fmt, ...)
{
    va_list ap;
    char *s = NULL;
    int n;

    if (t->failed)
        return;
    if (t->ncells == t->cap) {
        size_t cap = t->cap ? t->cap * 2 : 64;
        char **p = realloc(t->cells, cap * sizeof(*p));
        if (!p) {
            t->failed = 1;
            return;
        }
        t->cells = p;
        t->cap = cap;
    }
    va_start(ap, fmt);
    n = vasprintf(&s, fmt, ap);
    va_end(ap);
    if (n < 0) {
        t->failed = 1;
        return;
    }
    /* A control character from the server (a newline in a reason) would
     * break the row apart. */
    for (char *p = s; *p; p++)
        if ((unsigned char)*p < ' ')
            *p = ' ';
    t->cells[t->ncells++] = s;
}

/* Display width of the first max characters of s (UTF-8 continuation
 * bytes take no column). */
static size_t width(const char *s, size_t max, size_t *ret_bytes)
{
    size_t w = 0, i = 0;

    for (; s[i]; i++) {
        if (((unsigned char)s[i] & 0xC0) == 0x80)
            continue;
        if (w == max)
            break;
        w++;
    }
    *ret_bytes = i;
    return w;
}

int tm_table_print(const struct tm_table *t, FILE *out)
{
    size_t *w, bytes;

    if (t->failed)
        return -1;
    w = calloc(t->ncols, sizeof(*w));
    if (!w)
        return -1;
    for (size_t c = 0; c < t->ncols; c++)
        w[c] = strlen(t->headers[c]);
    for (size_t i = 0; i < t->ncells; i++) {
        size_t cw = width(t->cells[i], CELL_MAX, &bytes);
        if (cw > w[i % t->ncols])
            w[i % t->ncols] = cw;
    }
    for (size_t c = 0; c < t->ncols; c++)
        fprintf(out, "%-*s%s", c + 1 < t->ncols ? (int)w[c] : 0, t->headers[c], c + 1 < t->ncols ? "  " : "\n");
    for (size_t i = 0; i < t->ncells; i++) {
        size_t c = i % t->ncols;
        size_t cw = width(t->cells[i], CELL_MAX, &bytes);
        fwrite(t->cells[i], 1, bytes, out);
        if (c + 1 < t->ncols)
            fprintf(out, "%*s  ", (int)(w[c] - cw), "");
        else
            fputc('\n', out);
    }
    if (t->ncells % t->ncols)
        fputc('\n', out);
    if (t->ncells == 0)
        fprintf(out, "(none)\n");
    free(w);
    return 0;
}

void tm_table_release(struct tm_table *t)
{
    for (size_t i = 0; i < t->ncells; i++)
        free(t->cells[i]);
    free(t->cells);
    *t = (struct tm_table){0};
}
