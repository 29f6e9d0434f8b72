/*
 * bench/bench_heartbeat.c: a closed-loop load generator for node agents'
 * heartbeats, POST /v1/nodes/{id}/heartbeat with 8 GPU samples each, on
 * bench/load_driver.c (libcurl multi, HTTP/1.1 keep-alive), loopback only.
 * Run it through bench/run-heartbeat.sh.
 *
 *   bench_heartbeat --url http://127.0.0.1:PORT --tokens FILE
 *                   [--conns 64] [--duration 20] [--max-requests 2000000]
 *                   [--warmup 1]
 *
 * FILE has one "NODE_ID AGENT_TOKEN" a line: each request is one node's
 * heartbeat with its own agent token, rotating over the nodes (a fleet of
 * simulated nodes).  An answer counts as success when it is 200.  The rest
 * (warm-up, latency, the printed summary and RESULT line) is
 * load_driver.h's.
 */
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <time.h>

#include "load_driver.h"

/* Appends to r's body at *n; false once it does not fit. */
__attribute__((format(printf, 3, 4))) static bool append(struct load_request *r, size_t *n,
                                                         const char *fmt, ...)
{
    va_list ap;
    int w;

    if (*n >= r->body_cap)
        return false;
    va_start(ap, fmt);
    w = vsnprintf(r->body + *n, r->body_cap - *n, fmt, ap);
    va_end(ap);
    if (w < 0 || (size_t)w >= r->body_cap - *n)
        return false;
    *n += (size_t)w;
    return true;
}

/* Now on the wall clock, never twice the same: the samples' key is node,
 * GPU and time, and the API refuses samples older than agent.sample_max_age. */
static int64_t fresh_ms(void)
{
    static int64_t last;
    struct timespec ts;
    int64_t now;

    clock_gettime(CLOCK_REALTIME, &ts);
    now = (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
    last = now > last ? now : last + 1;
    return last;
}

/* 8 samples stamped with fresh times. */
static int heartbeat_prepare(void *ctx, struct load_request *r)
{
    int64_t at = fresh_ms();
    size_t n = 0;
    bool ok;

    (void)ctx;
    snprintf(r->url, r->url_cap, "%s/v1/nodes/%lld/heartbeat", r->base_url, r->id);
    ok = append(r, &n, "{\"samples\":[");
    for (int g = 0; g < 8 && ok; g++)
        ok = append(r, &n,
                    "%s{\"gpu_index\":%d,\"at_ms\":%lld,\"util_percent\":%d.5,"
                    "\"memory_used_mib\":%d,\"memory_total_mib\":81920,"
                    "\"temperature_c\":41,\"power_w\":180.5}",
                    g ? "," : "", g, (long long)at, (int)((at / 10 + g) % 100), 1024 * g);
    if (!ok || !append(r, &n, "],\"running\":[]}"))
        return -1;
    return (int)n;
}

int main(int argc, char **argv)
{
    const struct load_hooks hooks = {
        .name = "bench_heartbeat",
        .usage_extra = "",
        .endpoint = "/v1/nodes/{id}/heartbeat",
        .ok_status = 200,
        .rate_label = "heartbeats/s",
        .ids_in_tokens = true,
        .prepare = heartbeat_prepare,
    };

    return load_driver_main(&hooks, argc, argv);
}
