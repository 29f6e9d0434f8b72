/*
 * core/text.c: the growing text of text.h.
 */
#include <stdlib.h>
#include <string.h>

#include "core/text.h"

bool tm_text_add(struct tm_text *t, const char *s, size_t n)
{
    if (t->len + n + 1 > t->cap) {
        size_t cap = t->cap ? t->cap : 256;
        char *p;

        while (cap < t->len + n + 1)
            cap *= 2;
        p = realloc(t->p, cap);
        if (!p)
            return false;
        t->p = p;
        t->cap = cap;
    }
    if (n)
        memcpy(t->p + t->len, s, n);
    t->len += n;
    t->p[t->len] = '\0';
    return true;
}

void tm_text_cut(struct tm_text *t, size_t len)
{
    t->len = len;
    if (t->p)
        t->p[len] = '\0';
}
