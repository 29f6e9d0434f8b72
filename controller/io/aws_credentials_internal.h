/*
 * controller/io/aws_credentials_internal.h: what aws_credentials.c (the
 * environment source, the instance-role provider) and aws_credentials_files.c
 * (the shared files, region and endpoint) share.  Not for other files.
 */
#ifndef TM_AWS_CREDENTIALS_INTERNAL_H
#define TM_AWS_CREDENTIALS_INTERNAL_H

#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>

#include "controller/io/aws_credentials.h"

/* A message into err[0..size), when err is given. */
static inline void set_err(char *err, size_t size, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static inline void set_err(char *err, size_t size, const char *fmt, ...)
{
    va_list ap;

    if (!err || size == 0)
        return;
    va_start(ap, fmt);
    vsnprintf(err, size, fmt, ap);
    va_end(ap);
}

/* A non-empty environment variable, or NULL. */
static inline const char *env_get(const char *name)
{
    const char *v = getenv(name);

    return v && *v ? v : NULL;
}

/*
 * Fill cred from three strings (access key, secret, optional session
 * token) after checking them; source says where they came from.  The
 * message names where_ak/where_sk/where_tok (a
 * variable name, "FILE:LINE"), never a value.  Returns 0 or TM_EINVAL.
 */
int tm_aws_credentials_fill(struct tm_aws_credentials *cred, const char *ak, const char *sk,
                            const char *token, const char *source, const char *where_ak,
                            const char *where_sk, const char *where_tok, char *err,
                            size_t errsize);

#endif
