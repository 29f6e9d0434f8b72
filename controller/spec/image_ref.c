/*
 * controller/spec/image_ref.c: the image reference grammar (image_ref.h).
 *
 * The pattern is distribution/reference's ReferenceRegexp written as a
 * POSIX extended expression (its (?:...) groups become plain ones, \w
 * becomes [A-Za-z0-9_]) and matched by the C library's regex, compiled
 * once; the pieces are named as in that grammar so the two read alike.
 */
#include "controller/spec/image_ref.h"

#include <pthread.h>
#include <regex.h>
#include <stddef.h>
#include <string.h>

#include "core/err.h"

#define ALNUM "[a-z0-9]+"
#define SEPARATOR "([._]|__|[-]+)"
#define PATH_COMPONENT ALNUM "(" SEPARATOR ALNUM ")*"
#define DOMAIN_COMPONENT "([a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9])"
#define DOMAIN_NAME DOMAIN_COMPONENT "(\\." DOMAIN_COMPONENT ")*"
#define IPV6_ADDRESS "\\[[a-fA-F0-9:]+\\]"
#define DOMAIN_AND_PORT "(" DOMAIN_NAME "|" IPV6_ADDRESS ")(:[0-9]+)?"
#define NAME "(" DOMAIN_AND_PORT "/)?" PATH_COMPONENT "(/" PATH_COMPONENT ")*"
#define TAG "[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}"
#define DIGEST "[A-Za-z][A-Za-z0-9]*([-_+.][A-Za-z][A-Za-z0-9]*)*:[0-9a-fA-F]{32,}"
#define REFERENCE "^" NAME "(:" TAG ")?(@" DIGEST ")?$"

static regex_t reference_re;
static bool compiled_ok;
static pthread_once_t compile_once = PTHREAD_ONCE_INIT;

static void compile(void)
{
    compiled_ok = regcomp(&reference_re, REFERENCE, REG_EXTENDED | REG_NOSUB) == 0;
}

/* The length of the name: what precedes "@digest" and, when the last ':'
 * comes after the last '/', ":tag". */
static size_t name_length(const char *s)
{
    const char *at = strchr(s, '@');
    size_t n = at ? (size_t)(at - s) : strlen(s);

    for (size_t i = n; i-- > 0;) {
        if (s[i] == '/')
            break;
        if (s[i] == ':')
            return i;
    }
    return n;
}

int tm_image_ref_check(const char *s)
{
    /* Cheap refusals first: the regex needs a C string of ASCII. */
    for (const unsigned char *p = (const unsigned char *)s; *p; p++)
        if (*p <= ' ' || *p >= 127)
            return 0;
    if (!s[0] || name_length(s) > TM_IMAGE_NAME_MAX)
        return 0;
    pthread_once(&compile_once, compile);
    if (!compiled_ok)
        return TM_ENOMEM;
    return regexec(&reference_re, s, 0, NULL, 0) == 0;
}
