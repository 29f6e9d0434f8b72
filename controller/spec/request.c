/*
 * controller/spec/request.c: see request.h.
 */
#include "controller/spec/request.h"

#include <stdbool.h>
#include <string.h>
#include <strings.h>

#include "controller/spec/job_spec.h"

int tm_request_path_match(const char *pattern, const char *path, size_t len, int64_t *ret_id,
                          char *name, size_t name_size, const char **ret_param)
{
    const char *p = pattern, *s = path, *end = path + len;
    const char *bad = NULL;

    while (*p) {
        if (*p == '{') {
            const char *close = strchr(p, '}');
            const char *seg_end = memchr(s, '/', (size_t)(end - s));
            size_t n;
            if (!close)
                return 0;
            if (!seg_end)
                seg_end = end;
            n = (size_t)(seg_end - s);
            if (n == 0)
                return 0;
            if (strncmp(p, "{id}", 4) == 0) {
                int64_t v = 0;
                bool ok = n <= 18;
                for (size_t i = 0; ok && i < n; i++) {
                    if (s[i] < '0' || s[i] > '9')
                        ok = false;
                    else
                        v = v * 10 + (s[i] - '0');
                }
                if (!ok || v <= 0)
                    bad = bad ? bad : "id";
                else
                    *ret_id = v;
            } else {
                if (n >= name_size || memchr(s, '\0', n)) {
                    bad = bad ? bad : "name";
                } else {
                    memcpy(name, s, n);
                    name[n] = '\0';
                    if (!tm_job_spec_name_ok(name))
                        bad = bad ? bad : "name";
                }
            }
            p = close + 1;
            s = seg_end;
        } else {
            if (s >= end || *s != *p)
                return 0;
            p++;
            s++;
        }
    }
    if (s != end)
        return 0;
    if (bad) {
        *ret_param = bad;
        return -1;
    }
    return 1;
}


bool tm_request_json_type(const char *v, size_t len)
{
    const char *end = v + len;
    static const char json[] = "application/json";

    if (len < sizeof(json) - 1 || strncasecmp(v, json, sizeof(json) - 1) != 0)
        return false;
    v += sizeof(json) - 1;
    while (v < end && (*v == ' ' || *v == '\t'))
        v++;
    if (v == end)
        return true;
    if (*v != ';')
        return false;
    for (const char *c = v; c + 8 <= end; c++)
        if (strncasecmp(c, "charset=", 8) == 0) {
            const char *cs = c + 8;
            size_t n = (size_t)(end - cs);
            if (n && *cs == '"')
                cs++, n -= n >= 2 ? 2 : 1;
            return (n == 5 && strncasecmp(cs, "utf-8", 5) == 0) ||
                   (n == 4 && strncasecmp(cs, "utf8", 4) == 0);
        }
    return true;
}
