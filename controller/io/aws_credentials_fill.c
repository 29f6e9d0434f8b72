/*
 * controller/io/aws_credentials_fill.c: credentials checked where they
 * enter (aws_credentials_internal.h), for every source: the environment
 * and the instance role (aws_credentials.c) and the shared files
 * (aws_credentials_files.c) fill through here, so neither calls into the
 * other.
 */
#include "controller/io/aws_credentials_internal.h"

#include <ctype.h>
#include <stdbool.h>
#include <string.h>

#include "core/err.h"
#include "core/log.h"

/* Copy into a fixed field; false when it does not fit. */
static bool copy_field(char *dst, size_t size, const char *src)
{
    size_t n = strlen(src);

    if (n >= size)
        return false;
    memcpy(dst, src, n + 1);
    return true;
}

/* What the signer will accept, checked where the value enters, so the
 * error can name its source: an access key is [A-Za-z0-9]; secrets and
 * tokens are printable ASCII without spaces. */
static bool valid_access_key(const char *s)
{
    if (!*s)
        return false;
    for (; *s; s++) {
        if (!isalnum((unsigned char)*s))
            return false;
    }
    return true;
}

static bool valid_secret_text(const char *s)
{
    for (; *s; s++) {
        if ((unsigned char)*s <= ' ' || (unsigned char)*s >= 127)
            return false;
    }
    return true;
}

/*
 * Fill cred from three strings; the message names `where` (a variable
 * name, "FILE:LINE"), never a value.
 */
int tm_aws_credentials_fill(struct tm_aws_credentials *cred, const char *ak, const char *sk,
                            const char *token, const char *source, const char *where_ak,
                            const char *where_sk, const char *where_tok, char *err,
                            size_t errsize)
{
    if (!valid_access_key(ak) || !copy_field(cred->access_key, sizeof(cred->access_key), ak)) {
        set_err(err, errsize, "%s: access key id is not 1-127 letters and digits", where_ak);
        return TM_EINVAL;
    }
    if (!*sk || !valid_secret_text(sk) ||
        !copy_field(cred->secret_key, sizeof(cred->secret_key), sk)) {
        set_err(err, errsize, "%s: secret access key is empty, too long or not printable",
                where_sk);
        return TM_EINVAL;
    }
    if (token && (!valid_secret_text(token) ||
                  !copy_field(cred->session_token, sizeof(cred->session_token), token))) {
        set_err(err, errsize, "%s: session token is too long or not printable", where_tok);
        return TM_EINVAL;
    }
    copy_field(cred->source, sizeof(cred->source), source);
    tm_log_add_secret(cred->secret_key);
    if (cred->session_token[0])
        tm_log_add_secret(cred->session_token);
    return 0;
}
