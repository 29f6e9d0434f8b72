/*
 * core/text.h: a growing NUL-terminated text, for the bodies and
 * statement parameters built piece by piece (the API's group-commit items,
 * the group commit's array parameters, the agent's log batches).
 */
#ifndef TM_CORE_TEXT_H
#define TM_CORE_TEXT_H

#include <stdbool.h>
#include <stddef.h>

/* Zeroed when empty; the owner frees p when done. */
struct tm_text {
    char *p;
    size_t len, cap;
};

/* Append n bytes of s, keeping p NUL-terminated; false (t unchanged) when
 * memory runs out. */
bool tm_text_add(struct tm_text *t, const char *s, size_t n);

/* Back to its first len bytes (len at most t->len). */
void tm_text_cut(struct tm_text *t, size_t len);

#endif
