/*
 * controller/agent/checkpoint.c: attempt folders and the newest complete
 * checkpoint of an earlier attempt (checkpoint.h has the contract).
 */
#include <dirent.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "controller/agent/checkpoint.h"
#include "core/err.h"

#define ATTEMPT_PREFIX "attempt-"

/* N of "attempt-N" (decimal digits only, no leading zero), or -1. */
static int64_t attempt_of(const char *name)
{
    size_t plen = strlen(ATTEMPT_PREFIX);
    const char *d = name + plen;
    int64_t v = 0;

    if (strncmp(name, ATTEMPT_PREFIX, plen) != 0 || !*d || (d[0] == '0' && d[1]))
        return -1;
    for (; *d; d++) {
        if (*d < '0' || *d > '9' || v > (INT64_MAX - 9) / 10)
            return -1;
        v = v * 10 + (*d - '0');
    }
    return v;
}

int tm_agent_attempt_dir(const char *job_dir, int64_t attempt, char *out, size_t outlen)
{
    int n = snprintf(out, outlen, "%s/" ATTEMPT_PREFIX "%" PRId64, job_dir, attempt);
    return n < 0 || (size_t)n >= outlen ? TM_EINVAL : 0;
}

int tm_agent_resume_dir(const char *job_dir, int64_t attempt, char *out, size_t outlen)
{
    int64_t best = -1;
    char path[4096];
    struct stat st;
    DIR *d = opendir(job_dir);
    struct dirent *e;

    if (!d)
        return 0;
    while ((e = readdir(d)) != NULL) {
        int64_t k = attempt_of(e->d_name);
        if (k < 0 || k >= attempt || k <= best)
            continue;
        int n = snprintf(path, sizeof(path), "%s/%s/" TM_CHECKPOINT_COMPLETE, job_dir, e->d_name);
        if (n > 0 && (size_t)n < sizeof(path) && stat(path, &st) == 0 && S_ISREG(st.st_mode))
            best = k;
    }
    closedir(d);
    if (best < 0)
        return 0;
    return tm_agent_attempt_dir(job_dir, best, out, outlen) < 0 ? TM_EINVAL : 1;
}
