/*
 * controller/api/text.c: the growing text buffer of internal.h, which
 * heartbeat_batch.c builds its group-commit items in.
 */
#include <stdlib.h>
#include <string.h>

#include "controller/api/internal.h"

bool tm_api_text_add(struct tm_api_text *t, const char *s, size_t n)
{
    if (t->len + n + 2 > t->cap) {
        size_t cap = t->cap ? t->cap : 1024;
        char *p;

        while (cap < t->len + n + 2)
            cap *= 2;
        p = realloc(t->p, cap);
        if (!p)
            return false;
        t->p = p;
        t->cap = cap;
    }
    memcpy(t->p + t->len, s, n);
    t->len += n;
    t->p[t->len] = '\0';
    return true;
}
