/*
 * controller/api/server.h: the HTTP API (h2o, libuv flavour) on the controller's
 * loop.  Versioned under /v1, JSON in and out, described by
 * docs/openapi.yaml (the tests check the server against it).
 *
 * Every request but GET /healthz, /readyz and /metrics carries
 * "Authorization: Bearer <token>" (controller/spec/token.h).  The token's hash
 * is looked up on each request, so a revoked token stops at once; POST
 * /v1/jobs batches submissions and checks role, rate and team against a
 * 60 s cache first, but its INSERT verifies every row's token again (known,
 * not revoked, same role and team), so the cache never admits a revoked
 * token.  Answers:
 * 401 no, malformed, unknown or revoked token; 403 a role the route does
 * not allow, or an engineer acting on another team's job; 429 past the
 * token's request rate; 400 bad input, with nothing written.  Every error
 * body is {"error": "<reason>", "field": "<name>"} ("field" is null when no
 * field is at fault).
 *
 * Nothing blocks: each request is one or two parameterised statements on
 * the pg_uv pool (auth, then the work), answered from the query callback.
 * A client that goes away first is noticed (the request's memory pool is
 * disposed) and its answer dropped.
 */
#ifndef TM_API_H
#define TM_API_H

#include <stddef.h>
#include <stdint.h>

#include <uv.h>

#include "controller/io/pg_uv.h"
#include "core/clock.h"
#include "core/config.h"

struct tm_api;
struct tm_fleet_stats;
struct tm_gc_gate;

struct tm_api_limits {
    size_t max_body_bytes;  /* larger bodies: 400 field "body"; default 256 KiB */
    unsigned max_list;      /* most items per page; default 1000 (default page 100) */
    double rate_per_s;      /* requests per second per token, refilled; default 100 */
    double burst;           /* bucket size; default 200 */
    unsigned request_timeout_ms; /* a request's deadline: then 503 + Retry-After; default 5 s */
    double enroll_rate_per_s;    /* enrollments per second per client address; default 2 */
    double enroll_burst;         /* their bucket size; default 50 */
};

/* The defaults above. */
void tm_api_limits_default(struct tm_api_limits *limits);

/* The routes a server answers, and the state they keep per server; the
 * server calls state_new() at start and state_free() when it is closed
 * (both optional).  Defined in internal.h, for the routes' files. */
struct tm_api_routes;

/*
 * Serve routes (borrowed; tm_api_v1_routes in routes.h is tarmac's) and
 * listen on cfg->listen ("host:port"; host an IPv4 or [IPv6] literal,
 * "localhost", or "*" for every address) with the limits in cfg->api, and
 * serve on loop with the database pool (borrowed: it must outlive the
 * API).  With cfg->api.tls_cert_file (and tls_key_file) set it serves
 * HTTPS only (controller/api/tls.h), the files read here, before
 * anything listens.  Returns 0 and *ret_api, or a negative code
 * (-EADDRINUSE, TM_EINVAL for an address or a certificate we cannot use,
 * TM_ENOMEM) after logging why ("api.tls_cert_file: <path>: <reason>");
 * nothing is left open on failure.
 */
int tm_api_start(uv_loop_t *loop, struct tm_pg_pool *pool, const struct tm_api_routes *routes,
                 const struct tm_config *cfg, struct tm_api **ret_api);

/* The same with an explicit address (port 0 picks a free port: see
 * tm_api_port) and limits (NULL for the defaults).  For tests and tools. */
int tm_api_start_listen(uv_loop_t *loop, struct tm_pg_pool *pool, const struct tm_api_routes *routes,
                        const char *listen, const struct tm_api_limits *limits,
                        struct tm_api **ret_api);

/* The port actually bound. */
int tm_api_port(const struct tm_api *api);

/* Use the controller's clock for the times the API stores (submitted_ms,
 * finished_ms, decisions), so that an accelerated demo clock agrees.  The
 * clock is borrowed.  Without it the API keeps its own clock at the
 * configured time_scale. */
void tm_api_set_clock(struct tm_api *api, const struct tm_clock *clock);

/* The controller's in-process counters (controller/api/fleet_stats.h), shown
 * by /metrics once set: ticks, leadership, provider calls and errors.
 * Borrowed and read only on the loop thread, so it must outlive the API.
 * NULL (the default) leaves those families out. */
void tm_api_set_fleet_stats(struct tm_api *api, const struct tm_fleet_stats *stats);

/* For a server started without a configuration (tm_api_start_listen): the
 * one its handlers read (pools for quotas' flavors, agent settings), or
 * NULL again.  Borrowed: it must outlive the API or be unset first. */
void tm_api_set_config(struct tm_api *api, const struct tm_config *cfg);

/* The gate the low-priority group commits wait on (the kinds that yield:
 * log ingest), raised by the controller while its tick runs.  Borrowed:
 * closing it first lets go of the API's group commits.  NULL (the
 * default): nothing is held. */
void tm_api_set_gc_gate(struct tm_api *api, struct tm_gc_gate *gate);

/*
 * Stop: close the listener, ask open connections to finish (idle
 * keep-alive connections are closed at once, requests in flight are
 * answered first), then free everything.  done(data) fires on the loop
 * once every handle the API owned is closed.  The pool must still be open
 * until then (close the API first, then the pool): statements in flight
 * are answered before done fires.  A NULL api, or a second close, is a
 * no-op (done is not called).
 */
void tm_api_close(struct tm_api *api, void (*done)(void *data), void *data);

#endif
