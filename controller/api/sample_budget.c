/*
 * controller/api/sample_budget.c: how many GPU samples a node may store.
 *
 * A node's agent samples each GPU once per --sample-period, so a node
 * makes at most (its GPUs) / agent.min_sample_period samples a second;
 * after an outage it sends its backlog, at most its ring of 2048 samples
 * (controller/agent/internal.h), in batches 200 ms apart.  The budget is
 * a token bucket per node with exactly that rate and a burst of
 * TM_API_SAMPLES_MAX (4096, one heartbeat's most), which holds the whole
 * backlog with room to spare: an agent never meets the bound, a token
 * that sends more gets 429 (with Retry-After) and stores nothing of that
 * heartbeat.  The agent keeps its samples on a 429 and retries later.
 *
 * Samples taken for a heartbeat the database did not store (it was
 * away, the batch went alone through the normal path) are given back,
 * so that the retries of an outage do not spend the budget its backlog
 * needs afterwards.  Refusals are logged once per node per minute with
 * their count, not per request.
 *
 * The table is per server (per API replica) and in memory: a node's
 * budget is per replica, and a restart starts every node full.  A fixed
 * table with a probe window, as auth.c's rate limits: a full window
 * forgets its least recently used node, which can only make a budget more
 * generous.  The clock is the API's (an accelerated demo clock refills
 * faster, never slower).
 */
#include <inttypes.h>
#include <stdlib.h>

#include "controller/api/internal.h"
#include "controller/api/resources.h"
#include "controller/spec/api_body.h"
#include "core/config.h"
#include "core/log.h"

#define SB_SLOTS 16384
#define SB_PROBE 8
#define SB_GPUS_MAX 16 /* a node's most GPUs, before an answer tells its own */
#define SB_BURST ((double)TM_API_SAMPLES_MAX)
#define SB_LOG_PERIOD_MS 60000
#define SB_PERIOD_DEFAULT_MS 1000

struct sb_slot {
    int64_t node; /* 0: empty */
    double tokens;
    int64_t last_ms;
    int64_t logged_ms;  /* the last refusal logged */
    uint64_t refused;   /* heartbeats refused since that line */
    unsigned gpus;
};

struct sb_table {
    struct sb_slot slot[SB_SLOTS];
};

void *tm_api_sample_budget_new(void)
{
    return calloc(1, sizeof(struct sb_table));
}

void tm_api_sample_budget_free(void *state)
{
    free(state);
}

static struct sb_table *table(const struct api_call *c)
{
    return ((struct tm_api_route_states *)tm_api_route_state(c))->samples;
}

/* Node's slot; create: take the window's empty or least recently used one
 * (a fresh slot is full).  NULL when absent and not create. */
static struct sb_slot *find(struct sb_table *t, int64_t node, int64_t now, bool create)
{
    uint64_t h = (uint64_t)node * 11400714819323198485ull;
    unsigned start = (unsigned)(h >> 50) % SB_SLOTS;
    struct sb_slot *oldest = NULL;

    for (unsigned i = 0; i < SB_PROBE; i++) {
        struct sb_slot *s = &t->slot[(start + i) % SB_SLOTS];
        if (s->node == node)
            return s;
        if (!oldest || s->node == 0 || (oldest->node != 0 && s->last_ms < oldest->last_ms))
            oldest = s;
    }
    if (!create)
        return NULL;
    *oldest = (struct sb_slot){.node = node, .tokens = SB_BURST, .last_ms = now, .gpus = SB_GPUS_MAX};
    return oldest;
}

static int64_t period_ms(const struct api_call *c)
{
    const struct tm_config *cfg = tm_api_config(c);

    return cfg && cfg->agent.min_sample_period_ms > 0 ? cfg->agent.min_sample_period_ms
                                                     : SB_PERIOD_DEFAULT_MS;
}

static void refill(const struct api_call *c, struct sb_slot *s, int64_t now)
{
    if (now > s->last_ms)
        s->tokens += (double)(now - s->last_ms) * s->gpus / (double)period_ms(c);
    if (s->tokens > SB_BURST)
        s->tokens = SB_BURST;
    s->last_ms = now > s->last_ms ? now : s->last_ms;
}

void tm_api_samples_give_back(struct api_call *c)
{
    struct sb_table *t = table(c);
    struct sb_slot *s;

    if (!t || c->samples_taken == 0)
        return;
    s = find(t, c->id, tm_api_now_ms(c), false);
    if (s) {
        s->tokens += c->samples_taken;
        if (s->tokens > SB_BURST)
            s->tokens = SB_BURST;
    }
    c->samples_taken = 0;
}

bool tm_api_samples_take(struct api_call *c, size_t n)
{
    struct sb_table *t = table(c);
    int64_t now = tm_api_now_ms(c);
    struct sb_slot *s;

    tm_api_samples_give_back(c);
    if (!t || n == 0)
        return true;
    s = find(t, c->id, now, true);
    refill(c, s, now);
    if ((double)n <= s->tokens) {
        s->tokens -= (double)n;
        c->samples_taken = (unsigned)n;
        return true;
    }
    s->refused++;
    if (s->logged_ms == 0 || now - s->logged_ms >= SB_LOG_PERIOD_MS) {
        tm_log_warn("api refused GPU samples over the node's budget (429)",
                    "node=%" PRId64 " samples=%zu budget_per_s=%.3g burst=%.0f refused=%" PRIu64
                    " period_s=%d",
                    c->id, n, s->gpus * 1000.0 / (double)period_ms(c), SB_BURST, s->refused,
                    SB_LOG_PERIOD_MS / 1000);
        s->logged_ms = now;
        s->refused = 0;
    }
    return false;
}

void tm_api_samples_gpus(struct api_call *c, const char *gpus)
{
    struct sb_table *t = table(c);
    struct sb_slot *s;
    long n;

    if (!t || !gpus)
        return;
    s = find(t, c->id, tm_api_now_ms(c), false);
    n = strtol(gpus, NULL, 10);
    if (s)
        refill(c, s, tm_api_now_ms(c)); /* what accrued so far, at the old rate */
    if (s)
        s->gpus = n < 1 ? 1 : n > SB_GPUS_MAX ? SB_GPUS_MAX : (unsigned)n;
}
