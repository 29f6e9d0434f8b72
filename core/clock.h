/*
 * core/clock.h: the controller's clock.
 *
 * Milliseconds since the Unix epoch, read from the monotonic clock so it
 * never steps backwards, and optionally accelerated (the demo runs a day of
 * cloud time in minutes).  Every timestamp tarmac stores comes from here;
 * wall-clock time is used only for signing and log lines.
 */
#ifndef TM_CLOCK_H
#define TM_CLOCK_H

#include <stdbool.h>
#include <stdint.h>

struct tm_clock {
    int64_t base_epoch_ms;  /* epoch time when the clock started */
    int64_t base_mono_ms;   /* monotonic time then */
    double scale;           /* 1 = real time */
};

/* Start a clock at the current epoch time running at scale (>= 1). */
void tm_clock_init(struct tm_clock *c, double scale);
int64_t tm_clock_now_ms(const struct tm_clock *c);
/* Move the clock forward so that it reads at least ms now; true when it
 * moved.  An accelerated clock starts from the wall clock, behind what the
 * previous process wrote; never moves backwards. */
bool tm_clock_advance_to(struct tm_clock *c, int64_t ms);
/* Real milliseconds that pass while the clock advances by ms. */
int64_t tm_clock_real_ms(const struct tm_clock *c, int64_t ms);
/* The wall clock now, in ms since the epoch: for what is compared with
 * other machines' clocks (GPU samples, signatures, a deadline handed to
 * the database, a token's expiry), never for the controller's own
 * timestamps, which come from a struct tm_clock. */
int64_t tm_wall_ms(void);
/* The budget period (calendar month, UTC) holding ms, as "YYYY-MM", the
 * key the spend ledger files under; "" if ms is out of range. */
void tm_clock_period(int64_t ms, char out[16]);

#endif
