/*
 * controller/spec/spec_error.h: the error every reader in spec/ fills: the
 * field a client used ("gpus", "jobs[2].state", "body") and a short
 * lower-case reason without a full stop.  Its own file so that the body
 * reader (json_body.c) and the spec readers fill it without calling into
 * each other.
 */
#ifndef TM_SPEC_ERROR_H
#define TM_SPEC_ERROR_H

#include <stdbool.h>

struct tm_spec_error {
    char field[64];
    char message[192];
    bool nomem;         /* the server ran out of memory: not the client's fault */
};

/* Fill err; returns TM_EINVAL, so callers can `return tm_spec_fail(...)`. */
int tm_spec_fail(struct tm_spec_error *err, const char *field, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* Fill err for an allocation that failed while reading a body (field
 * "body"); returns TM_ENOMEM, which the API answers with 503, not 400 (err->nomem). */
int tm_spec_fail_nomem(struct tm_spec_error *err);

#endif
