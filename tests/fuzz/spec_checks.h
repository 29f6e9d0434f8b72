/*
 * tests/fuzz/spec_checks.h: the properties every fuzz target of the API's
 * input holds its parsers to.  Static functions, one copy per target.
 */
#ifndef TM_FUZZ_SPEC_CHECKS_H
#define TM_FUZZ_SPEC_CHECKS_H

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "controller/spec/job_spec.h"
#include "controller/spec/json_body.h"
#include "core/err.h"

/* Text the database takes: UTF-8, no NUL, no stray control bytes. */
static inline bool text_ok(const char *s)
{
    return !s || tm_json_text_ok(s, strlen(s));
}

/* Every refusal names a field and a reason, in printable text. */
static inline void check_err(int r, const struct tm_spec_error *err)
{
    if (r == 0)
        return;
    if (r != TM_EINVAL && r != TM_ENOMEM)
        abort();
    if (err->field[0] == '\0' || err->message[0] == '\0' || !text_ok(err->message))
        abort();
}

#endif
