/*
 * core/file.h: reading a whole input file (a trace, a table) into memory,
 * with a size cap so that a wrong path (a disk image, a device) is refused
 * instead of read whole.
 */
#ifndef TM_FILE_H
#define TM_FILE_H

#include <stddef.h>

/* Read path into a NUL-terminated heap buffer: *ret (free() it), *ret_len
 * bytes before the NUL.  0; -errno when it cannot be opened or read
 * (err: "PATH: could not open: why" / "PATH: could not read: why");
 * TM_EINVAL when it holds more than max bytes ("PATH: larger than N
 * bytes"); TM_ENOMEM.  Works on pipes too (no seeking).  *ret is written
 * only on success; err may be NULL when errlen is 0. */
int tm_file_read(const char *path, size_t max, char **ret, size_t *ret_len, char *err,
                 size_t errlen);

/* Parses a secret file's bytes into ret; why names the problem (no path). */
typedef int (*tm_secret_parse_fn)(const char *buf, size_t len, void *ret, char *why,
                                  size_t whylen);

/* Read path (at most max bytes, as tm_file_read()) and hand its bytes to
 * parse; the bytes are wiped before they are freed, so a private key does
 * not linger on the heap.  A file that cannot be read is TM_EINVAL (its
 * error names the path and why) unless memory ran out; a parse error is
 * parse's, with err "PATH: why". */
int tm_file_parse_secret(const char *path, size_t max, tm_secret_parse_fn parse, void *ret,
                         char *err, size_t errlen);

#endif
