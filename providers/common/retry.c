/*
 * providers/common/retry.c: the retry budget of one cloud call and the
 * auth gate (see retry.h).
 */
#include "providers/common/retry.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static uint64_t rng_next(uint64_t *s)
{
    /* xorshift64*: jitter only, nothing secret depends on it. */
    uint64_t x = *s ? *s : 0x9E3779B97F4A7C15ull;

    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    *s = x;
    return x * 0x2545F4914F6CDD1Dull;
}

uint64_t tm_retry_backoff_ms(uint64_t base_ms, uint64_t cap_ms, unsigned n, uint64_t *state)
{
    uint64_t ceiling = base_ms;

    for (unsigned i = 1; i < n && ceiling < cap_ms; i++)
        ceiling *= 2;
    if (ceiling > cap_ms)
        ceiling = cap_ms;
    return rng_next(state) % (ceiling + 1);
}

uint64_t tm_retry_after_ms(const char *value, int64_t now_s)
{
    char *end;
    long long v;
    struct tm tmv;

    if (!value || !*value)
        return 0;
    errno = 0;
    v = strtoll(value, &end, 10);
    if (!errno && end != value && *end == '\0')
        return v > 0 && v < 86400 ? (uint64_t)v * 1000 : 0;
    memset(&tmv, 0, sizeof(tmv));
    if (strptime(value, "%a, %d %b %Y %H:%M:%S GMT", &tmv)) {
        int64_t at = (int64_t)timegm(&tmv);

        return at > now_s && at - now_s < 86400 ? (uint64_t)(at - now_s) * 1000 : 0;
    }
    return 0;
}

bool tm_retry_next(const struct tm_retry_budget *b, unsigned attempts, uint64_t spent_ms,
                   uint64_t after_ms, uint64_t backoff_ms, uint64_t *wait_ms)
{
    uint64_t left;

    if (attempts >= b->max_attempts || spent_ms >= b->max_total_delay_ms)
        return false;
    left = b->max_total_delay_ms - spent_ms;
    if (after_ms) {
        if (after_ms > left)
            return false;
        *wait_ms = after_ms;
        return true;
    }
    *wait_ms = backoff_ms < left ? backoff_ms : left;
    return true;
}

bool tm_auth_gate_close(struct tm_auth_gate *g, uint64_t now)
{
    bool was_open = !g->closed;

    g->closed = true;
    g->until = now + g->cooldown_ms;
    return was_open;
}

void tm_auth_gate_open(struct tm_auth_gate *g)
{
    g->closed = false;
}

bool tm_auth_gate_holds(const struct tm_auth_gate *g, uint64_t now)
{
    return g->closed && now < g->until;
}

bool tm_auth_gate_pass(struct tm_auth_gate *g, uint64_t now)
{
    if (!g->closed)
        return true;
    if (now < g->until)
        return false;
    g->until = now + g->cooldown_ms;
    return true;
}
