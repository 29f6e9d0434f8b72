/*
 * core/err.h: error codes shared by every tarmac module.
 *
 * Functions return 0 on success or a negative code.  System failures keep
 * -errno (libuv's UV_E* codes have the same values on Unix).  Project codes
 * live in a reserved range below TM_ERR_BASE so they never collide with errno.
 */
#ifndef TM_ERR_H
#define TM_ERR_H

#include <stdbool.h>

enum tm_err {
    TM_ERR_BASE = -10000,
    TM_EINVAL = TM_ERR_BASE - 1,     /* bad input from a user or a file */
    TM_ETHROTTLED = TM_ERR_BASE - 2, /* remote asked us to slow down: retry */
    TM_EQUOTA = TM_ERR_BASE - 3,     /* capacity or quota short: fall back */
    TM_EAUTH = TM_ERR_BASE - 4,      /* credentials refused: stop calling */
    TM_EBADREPLY = TM_ERR_BASE - 5,  /* a reply we could not parse */
    TM_EDB = TM_ERR_BASE - 6,        /* the database refused a statement */
    TM_ENOTFOUND = TM_ERR_BASE - 7,  /* the named object does not exist */
    TM_ECONFLICT = TM_ERR_BASE - 8,  /* state changed under us: redo */
    TM_ENOTLEADER = TM_ERR_BASE - 9, /* leadership lost or fenced */
    TM_ESCHEMA = TM_ERR_BASE - 10,   /* database schema too old or too new */
    TM_EUNAVAIL = TM_ERR_BASE - 11,  /* remote unreachable or 5xx: retry */
    TM_ENOMEM = TM_ERR_BASE - 12,    /* an allocation failed */
    TM_EBUDGET = TM_ERR_BASE - 13,   /* a hard budget cap would be passed */
    TM_ECANCELED = TM_ERR_BASE - 14, /* the operation was abandoned at shutdown */
    TM_ERR_MAX = TM_ERR_BASE - 15,
};

/* A short lower-case description of any code: tarmac's own or -errno. */
const char *tm_strerror(int err);

/* The symbolic name of a code, e.g. "TM_EQUOTA" or "ECONNREFUSED". */
const char *tm_err_name(int err);

/* Whether a caller should retry the failed operation with backoff. */
bool tm_err_retryable(int err);

#endif
