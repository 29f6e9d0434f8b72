/*
 * core/file.c: see file.h.
 */
#include "core/file.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/crypto.h>

#include "core/err.h"

int tm_file_read(const char *path, size_t max, char **ret, size_t *ret_len, char *err,
                 size_t errlen)
{
    FILE *f = fopen(path, "rb");
    char *buf = NULL;
    size_t len = 0, cap = 0;
    int r;

    if (!f) {
        r = -errno;
        if (err && errlen)
            snprintf(err, errlen, "%s: could not open: %s", path, strerror(-r));
        return r;
    }
    for (;;) {
        size_t n;
        /* Room for one byte past the cap (to tell "too large" from
         * "exactly full") and the NUL; grown by doubling from 64 KiB. */
        if (len + 2 > cap) {
            size_t ncap = cap ? cap * 2 : 65536;
            char *nb;
            if (ncap > max + 2)
                ncap = max + 2;
            nb = realloc(buf, ncap);
            if (!nb) {
                r = TM_ENOMEM;
                goto out;
            }
            buf = nb;
            cap = ncap;
        }
        n = fread(buf + len, 1, cap - len - 1, f);
        len += n;
        if (len > max) {
            r = TM_EINVAL;
            if (err && errlen)
                snprintf(err, errlen, "%s: larger than %zu bytes", path, max);
            goto out;
        }
        if (n == 0)
            break;
    }
    if (ferror(f)) {
        r = -EIO;
        if (err && errlen)
            snprintf(err, errlen, "%s: could not read: %s", path, strerror(EIO));
        goto out;
    }
    buf[len] = '\0';
    *ret = buf;
    *ret_len = len;
    buf = NULL;
    r = 0;
out:
    free(buf);
    fclose(f);
    return r;
}

int tm_file_parse_secret(const char *path, size_t max, tm_secret_parse_fn parse, void *ret,
                         char *err, size_t errlen)
{
    char *buf = NULL, why[256];
    size_t len = 0;
    int r = tm_file_read(path, max, &buf, &len, why, sizeof(why));

    if (r < 0) {
        snprintf(err, errlen, "%s", why);
        return r == TM_ENOMEM ? r : TM_EINVAL;
    }
    r = parse(buf, len, ret, why, sizeof(why));
    OPENSSL_cleanse(buf, len);
    free(buf);
    if (r < 0)
        snprintf(err, errlen, "%s: %s", path, why);
    return r;
}
