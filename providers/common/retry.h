/*
 * providers/common/retry.h: the retry budget every cloud client spends on
 * one call (EC2, Compute Engine, ARM), and the auth gate they keep: a failed attempt that may pass
 * (throttled, unavailable, a reset) is tried again after a sleep, as long
 * as the call has attempts and sleep left.  The sleep is the server's
 * Retry-After when it sent one, else full jitter, a uniform draw between
 * zero and an exponential ceiling: many controllers throttled at the same
 * moment must not come back at the same moment.
 *
 * The auth gate: credentials the cloud refused close it for a cool-down,
 * and while it is closed calls fail with TM_EAUTH without a request, so a
 * wrong key costs one refusal, not one per tick.
 *
 * Pure: no clock, no loop; the client keeps the count and the sum and
 * passes its clock's now.
 */
#ifndef TM_PROVIDER_RETRY_H
#define TM_PROVIDER_RETRY_H

#include <stdbool.h>
#include <stdint.h>

/* One call's budget, defaults filled by the client. */
struct tm_retry_budget {
    unsigned max_attempts;         /* requests per call, the first included */
    uint64_t max_total_delay_ms;   /* sum of the sleeps per call */
};

/* A full-jitter sleep before attempt n + 1 (n >= 1 failures so far):
 * uniform in [0, min(cap, base * 2^(n-1))]; *state is the caller's
 * xorshift state (jitter only, nothing secret depends on it). */
uint64_t tm_retry_backoff_ms(uint64_t base_ms, uint64_t cap_ms, unsigned n, uint64_t *state);

/* An HTTP Retry-After value (seconds, or an HTTP date against now_s) in
 * ms; 0 when absent, unreadable, past, or a day or more away. */
uint64_t tm_retry_after_ms(const char *value, int64_t now_s);

/* Whether a call that failed its attempts-th attempt, having slept
 * spent_ms, gets another: true with *wait_ms (after_ms when the server
 * asked, else backoff_ms, cut to what the budget has left), false when the
 * attempts or the sleep are spent, or the server asks for more sleep than
 * is left (better said now than after sleeping past the budget). */
bool tm_retry_next(const struct tm_retry_budget *b, unsigned attempts, uint64_t spent_ms,
                   uint64_t after_ms, uint64_t backoff_ms, uint64_t *wait_ms);

struct tm_auth_gate {
    bool closed;
    uint64_t until;                /* the cool-down's end, on the client's clock */
    uint64_t cooldown_ms;
};

/* Close the gate after a refusal, for cooldown_ms from now.  Returns
 * whether it was open, so the refusal is logged once. */
bool tm_auth_gate_close(struct tm_auth_gate *g, uint64_t now);

/* Open it: an answer came back, or the credentials changed. */
void tm_auth_gate_open(struct tm_auth_gate *g);

/* Whether it still holds calls back at now (closed and cooling down). */
bool tm_auth_gate_holds(const struct tm_auth_gate *g, uint64_t now);

/* Whether a call may go at now: the gate open, or its cool-down over, in
 * which case this call probes and the cool-down restarts for the others
 * (the gate opens when the probe is answered). */
bool tm_auth_gate_pass(struct tm_auth_gate *g, uint64_t now);

#endif
