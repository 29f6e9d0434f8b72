/*
 * tests/unit/alloc_fail/alloc_fail.c: see alloc_fail.h.
 */
#include "tests/unit/alloc_fail/alloc_fail.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

void *__real_malloc(size_t size);
void *__real_calloc(size_t n, size_t size);
void *__real_realloc(void *p, size_t size);
char *__real_strdup(const char *s);
char *__real_strndup(const char *s, size_t n);
int __real_vasprintf(char **ret, const char *fmt, va_list ap);

void *__wrap_malloc(size_t size);
void *__wrap_calloc(size_t n, size_t size);
void *__wrap_realloc(void *p, size_t size);
char *__wrap_strdup(const char *s);
char *__wrap_strndup(const char *s, size_t n);
int __wrap_vasprintf(char **ret, const char *fmt, va_list ap);

static size_t fail_at;
static size_t counted;
static int failed;

void tm_alloc_fail_at(size_t n)
{
    fail_at = n;
    counted = 0;
    failed = 0;
}

size_t tm_alloc_count(void)
{
    return counted;
}

int tm_alloc_failed(void)
{
    return failed;
}

/* Whether this allocation is the one to fail. */
static int should_fail(void)
{
    counted++;
    if (fail_at != 0 && counted == fail_at) {
        failed = 1;
        errno = ENOMEM;
        return 1;
    }
    return 0;
}

void *__wrap_malloc(size_t size)
{
    return should_fail() ? NULL : __real_malloc(size);
}

void *__wrap_calloc(size_t n, size_t size)
{
    return should_fail() ? NULL : __real_calloc(n, size);
}

/* realloc(p, 0) frees in glibc: not an allocation that can fail. */
void *__wrap_realloc(void *p, size_t size)
{
    if (size != 0 && should_fail())
        return NULL;
    return __real_realloc(p, size);
}

char *__wrap_strdup(const char *s)
{
    return should_fail() ? NULL : __real_strdup(s);
}

char *__wrap_strndup(const char *s, size_t n)
{
    return should_fail() ? NULL : __real_strndup(s, n);
}

int __wrap_vasprintf(char **ret, const char *fmt, va_list ap)
{
    if (should_fail()) {
        *ret = NULL;
        return -1;
    }
    return __real_vasprintf(ret, fmt, ap);
}

static void *hook_malloc(size_t size)
{
    return __wrap_malloc(size);
}

void tm_alloc_hook_libraries(void)
{
    cJSON_Hooks hooks = {.malloc_fn = hook_malloc, .free_fn = free};
    cJSON_InitHooks(&hooks);
}
