/* providers/common/settings.c: see settings.h. */
#include "providers/common/settings.h"

#include <errno.h>
#include <stdlib.h>

#include "core/log.h"

uint64_t tm_provider_env_u64(const char *name, uint64_t dflt)
{
    const char *s = getenv(name);
    char *end;
    unsigned long long v;

    if (!s || !*s)
        return dflt;
    errno = 0;
    v = strtoull(s, &end, 10);
    if (errno || *end) {
        tm_log_warn("ignoring a malformed setting", "name=%s", name);
        return dflt;
    }
    return v;
}
