/*
 * controller/api/server_core.h: the server core's own state, shared by its
 * files and by no route: server.c (listening, shutdown), call.c (calls
 * and their answers),
 * dispatch.c (routing a request to its route), auth.c (bearer tokens, the
 * authentication cache, rate limits, the scrape token) and too_large.c
 * (the 413 -> 400 filter).  The routes see only internal.h.
 */
#ifndef TM_API_SERVER_CORE_H
#define TM_API_SERVER_CORE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <h2o.h>
#include <openssl/ssl.h>

#include "controller/api/internal.h"
#include "controller/api/server.h"
#include "controller/spec/token.h"
#include "core/clock.h"

#define RATE_SLOTS 1024
#define RATE_PROBE 8
/* Recently authenticated tokens (see auth_cache_get): room for a fleet's
 * agents (10,000 nodes, each its own token, heartbeating every 10 s) with
 * a probe window, so that two tokens on one slot do not evict each other
 * on every request and send both through the lookup statement. */
#define AUTH_SLOTS 16384
#define AUTH_PROBE 8
#define AUTH_TTL_MS 60000

struct api_conn {
    uv_tcp_t tcp; /* first: h2o hands back this pointer on close */
    struct tm_api *api;
};

struct api_handler {
    h2o_handler_t super;
    struct tm_api *api;
};

struct rate_slot {
    char key[17];
    double tokens;
    uint64_t last_ms;
};

/* Enrollment's bucket per client address (auth.c), with what its log
 * line has still to say: one line per address per ENROLL_LOG_MS. */
#define ENROLL_SLOTS 1024
#define ENROLL_PROBE 8
#define ENROLL_LOG_MS 60000
struct enroll_slot {
    char addr[48];        /* "" when empty */
    double tokens;
    uint64_t last_ms;
    uint64_t logged_ms;   /* 0: nothing logged yet */
    uint64_t failed, throttled; /* since the last line */
};

struct auth_slot {
    char hash[TM_TOKEN_HASH_LEN + 1]; /* "" when empty */
    enum tm_role role;
    char team[64];
    char token_name[64];
    int64_t token_node;
    uint64_t until_ms;
};

enum close_step { CLOSE_NONE, CLOSE_DRAINING, CLOSE_DISPOSED, CLOSE_FREEING };

struct tm_api {
    uv_loop_t *loop;
    struct tm_pg_pool *pool;
    struct tm_api_limits limits;
    struct tm_clock own_clock;
    const struct tm_clock *clock;
    h2o_globalconf_t conf;
    h2o_context_t ctx;
    h2o_accept_ctx_t accept_ctx;
    SSL_CTX *ssl_ctx;   /* owned; NULL for plain HTTP */
    /* api.metrics_token_file: /metrics then needs this bearer token.  Only
     * its hash is kept (tm_token_hash, as for API tokens), compared in
     * constant time. */
    bool metrics_token;
    char metrics_hash[TM_TOKEN_HASH_LEN + 1];
    const struct tm_config *cfg; /* borrowed from the daemon; NULL when started without one */
    uv_tcp_t listener;
    uv_timer_t timer;   /* shutdown steps */
    int port;
    unsigned nconns, ncalls;
    bool listener_closed;
    enum close_step step;
    void (*done)(void *data);
    void *done_data;
    /* server.c's drain check, called by call.c as each call goes */
    void (*on_call_freed)(struct tm_api *api);
    struct tm_api_stats stats;
    const struct tm_fleet_stats *fleet; /* the controller's, borrowed; NULL when none */
    struct tm_gc_gate *gc_gate;         /* the controller's, borrowed; NULL when none */
    struct rate_slot rate[RATE_SLOTS];
    struct auth_slot auth[AUTH_SLOTS];
    struct enroll_slot enroll[ENROLL_SLOTS];
    const struct tm_api_routes *routes;   /* the daemon's: the server names no route */
    void *route_state;                    /* routes->state_new()'s, one per server */
};

/* call.c: count an answer by its status; answer {"error", "field"}
 * (header values are not copied by h2o: only literals); a heap call for
 * req that outlives it safely (internal.h, "Lifetimes"). */
void tm_api_count_status(struct tm_api *api, int status);
void tm_api_send_error(struct tm_api *api, h2o_req_t *req, int status, const char *field,
                       const char *message);
struct api_call *tm_api_call_new(struct tm_api *api, h2o_req_t *req, const struct api_route *route);

/* dispatch.c: h2o's handler of every request. */
int tm_api_on_req(h2o_handler_t *self, h2o_req_t *req);

/* auth.c */
/* "Bearer <token>": the token, or NULL. */
const char *tm_api_bearer(const h2o_req_t *req, size_t *ret_len);
/* Fill c's role, team and name from the cache; false when c->hash was not
 * authenticated within AUTH_TTL_MS. */
bool tm_api_auth_cache_get(struct tm_api *api, struct api_call *c);
/* Take one request from hash's bucket; false when it is empty. */
bool tm_api_rate_take_hash(struct tm_api *api, const char *hash);
/* Whether req carries the scrape token, when api.metrics_token_file set one. */
bool tm_api_metrics_authorized(const struct tm_api *api, const h2o_req_t *req);

/* too_large.c: rewrite h2o's own 413 into the API's 400 on path. */
void tm_api_add_too_large_filter(h2o_pathconf_t *path, struct tm_api *api);

#endif
