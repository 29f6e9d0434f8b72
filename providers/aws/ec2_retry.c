/*
 * providers/aws/ec2_retry.c: the backoff of the EC2 client (see ec2.h).
 *
 * Full jitter (a uniform draw between zero and the exponential ceiling)
 * rather than equal or no jitter, because many controllers throttled at
 * the same moment must not come back at the same moment.
 */
#include "providers/aws/ec2.h"

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

uint64_t tm_ec2_backoff_ms(const struct tm_ec2_retry *retry, unsigned n, uint64_t *state)
{
    uint64_t base = retry->base_delay_ms ? retry->base_delay_ms : 100;
    uint64_t cap = retry->max_delay_ms ? retry->max_delay_ms : 5000;
    uint64_t ceiling = base;

    for (unsigned i = 1; i < n && ceiling < cap; i++)
        ceiling *= 2;
    if (ceiling > cap)
        ceiling = cap;
    return rng_next(state) % (ceiling + 1);
}

