/*
 * tests/unit/alloc_fail/alloc_fail.h: make the Nth allocation fail, in the
 * manner of SQLite's test harness (its "malloc failure" tests).
 *
 * The test binary is linked with -Wl,--wrap for malloc, calloc, realloc,
 * strdup, strndup and vasprintf, so every allocation that tarmac's own code
 * (the static libraries linked into the binary) makes goes through
 * alloc_fail.c.  cJSON is pointed at the same functions through its hooks;
 * jansson already allocates through spec/json_body.c's wrapper, which calls
 * malloc; libyaml and expat allocate for themselves and are not counted.
 */
#ifndef TM_TEST_ALLOC_FAIL_H
#define TM_TEST_ALLOC_FAIL_H

#include <stddef.h>

/* Fail the nth counted allocation from now on (1 = the next one), and only
 * that one; 0 turns failure off.  Resets the counter. */
void tm_alloc_fail_at(size_t n);
/* Counted allocations since the last tm_alloc_fail_at(). */
size_t tm_alloc_count(void);
/* Whether the armed failure has happened. */
int tm_alloc_failed(void);
/* Route cJSON's allocations through the counter. */
void tm_alloc_hook_libraries(void);

#endif
