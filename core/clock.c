#include "core/clock.h"

#include <time.h>

static int64_t read_ms(clockid_t id)
{
    struct timespec ts;
    clock_gettime(id, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int64_t tm_wall_ms(void)
{
    return read_ms(CLOCK_REALTIME);
}

void tm_clock_init(struct tm_clock *c, double scale)
{
    c->base_epoch_ms = read_ms(CLOCK_REALTIME);
    c->base_mono_ms = read_ms(CLOCK_MONOTONIC);
    c->scale = scale >= 1.0 ? scale : 1.0;
}

int64_t tm_clock_now_ms(const struct tm_clock *c)
{
    int64_t elapsed = read_ms(CLOCK_MONOTONIC) - c->base_mono_ms;
    return c->base_epoch_ms + (int64_t)((double)elapsed * c->scale);
}

bool tm_clock_advance_to(struct tm_clock *c, int64_t ms)
{
    int64_t now = tm_clock_now_ms(c);

    if (now >= ms)
        return false;
    c->base_epoch_ms += ms - now;
    return true;
}

int64_t tm_clock_real_ms(const struct tm_clock *c, int64_t ms)
{
    int64_t real = (int64_t)((double)ms / c->scale);
    return real > 0 ? real : 1;
}

void tm_clock_period(int64_t ms, char out[16])
{
    time_t t = (time_t)(ms / 1000);
    struct tm tm;

    if (!gmtime_r(&t, &tm) || strftime(out, 16, "%Y-%m", &tm) == 0)
        out[0] = '\0';
}
