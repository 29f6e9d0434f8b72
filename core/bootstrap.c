/*
 * core/bootstrap.c: see bootstrap.h.
 */
#include "core/bootstrap.h"

#include <stdlib.h>
#include <string.h>

#include "core/err.h"

enum { PH_URL, PH_CA, PH_SECRET, PH_NODE, PH_POOL, PH_N };
static const char *const ph_names[PH_N] = {
    [PH_URL] = "{{controller_url}}", [PH_CA] = "{{ca_pem}}", [PH_SECRET] = "{{enroll_secret}}",
    [PH_NODE] = "{{node_id}}", [PH_POOL] = "{{pool}}",
};

/* The placeholder at s (n bytes left), or -1. */
static int placeholder_at(const char *s, size_t n)
{
    for (int i = 0; i < PH_N; i++) {
        size_t m = strlen(ph_names[i]);
        if (n >= m && memcmp(s, ph_names[i], m) == 0)
            return i;
    }
    return -1;
}

static const char *value_of(const struct tm_bootstrap_values *v, int ph)
{
    const char *s = ph == PH_URL      ? v->controller_url
                    : ph == PH_CA     ? v->ca_pem
                    : ph == PH_SECRET ? v->enroll_secret
                    : ph == PH_NODE   ? v->node_id
                                      : v->pool;
    return s ? s : "";
}

/* One pass: with out NULL, only the size. */
static size_t fill(const char *tmpl, size_t len, const struct tm_bootstrap_values *v,
                   size_t ca_len, char *out)
{
    size_t n = 0;

    for (size_t i = 0; i < len;) {
        int ph = tmpl[i] == '{' ? placeholder_at(tmpl + i, len - i) : -1;
        if (ph < 0) {
            if (out)
                out[n] = tmpl[i];
            n++;
            i++;
            continue;
        }
        if (v) {
            const char *val = value_of(v, ph);
            size_t m = strlen(val);
            if (out)
                memcpy(out + n, val, m);
            n += m;
        } else {
            n += ph == PH_CA ? ca_len : TM_BOOTSTRAP_VALUE_MAX;
        }
        i += strlen(ph_names[ph]);
    }
    return n;
}

int tm_bootstrap_fill(const char *tmpl, size_t len, const struct tm_bootstrap_values *v,
                      char **ret, size_t *ret_len)
{
    size_t n = fill(tmpl, len, v, 0, NULL);
    char *out = malloc(n + 1);

    if (!out)
        return TM_ENOMEM;
    fill(tmpl, len, v, 0, out);
    out[n] = '\0';
    *ret = out;
    *ret_len = n;
    return 0;
}

size_t tm_bootstrap_max_filled(const char *tmpl, size_t len, size_t ca_len)
{
    return fill(tmpl, len, NULL, ca_len, NULL);
}

size_t tm_bootstrap_base64_len(size_t n)
{
    return (n + 2) / 3 * 4;
}
