/*
 * controller/spec/spec_error.c: see spec_error.h.
 */
#include "controller/spec/spec_error.h"

#include <stdarg.h>
#include <stdio.h>

#include "core/err.h"

int tm_spec_fail(struct tm_spec_error *err, const char *field, const char *fmt, ...)
{
    va_list ap;

    if (!err)
        return TM_EINVAL;
    snprintf(err->field, sizeof(err->field), "%s", field);
    va_start(ap, fmt);
    vsnprintf(err->message, sizeof(err->message), fmt, ap);
    va_end(ap);
    return TM_EINVAL;
}

int tm_spec_fail_nomem(struct tm_spec_error *err)
{
    if (err) {
        snprintf(err->field, sizeof(err->field), "body");
        snprintf(err->message, sizeof(err->message), "out of memory while reading it");
        err->nomem = true;
    }
    return TM_ENOMEM;
}
