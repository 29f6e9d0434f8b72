/*
 * controller/api/internal.h: what the server core (server.c, call.c) and the
 * routes' files share.  Not for other modules.  Calls run one way: the
 * routes call the server; the server reaches them only through the
 * tm_api_routes it is given.
 *
 * A route's fn runs once the caller is authenticated, allowed and within
 * its rate (public routes: at once).  It must end the call exactly once:
 * tm_api_reply()/tm_api_fail*() now, or tm_api_query() with a callback
 * that does, after checking c->req (NULL: the client left; just
 * tm_api_call_free()).
 */
#ifndef TM_API_INTERNAL_H
#define TM_API_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <h2o.h>

#include "controller/api/server.h"
#include "controller/io/group_commit.h"
#include "controller/spec/job_spec.h"
#include "controller/spec/token.h"
#include "core/text.h"

/* Role bits of a route (1 << enum tm_role), plus public. */
#define API_ADMIN (1u << TM_ROLE_ADMIN)
#define API_FINANCE (1u << TM_ROLE_FINANCE)
#define API_ENGINEER (1u << TM_ROLE_ENGINEER)
#define API_VIEWER (1u << TM_ROLE_VIEWER)
#define API_READERS (API_ADMIN | API_FINANCE | API_ENGINEER | API_VIEWER)
/* A node agent's token: only for its own node's {id} (auth.c checks the
 * binding before the route runs). */
#define API_AGENT (1u << TM_ROLE_AGENT)
#define API_PUBLIC (1u << 8)
/* With API_PUBLIC: public unless api.metrics_token_file names a token,
 * which the request must then carry as its bearer token (/metrics). */
#define API_SCRAPE (1u << 9)

struct api_call;

struct api_route {
    const char *method;   /* "GET", "POST", "PATCH" */
    const char *pattern;  /* "/v1/jobs/{id}/cancel": {id} a positive integer, {name} a name */
    unsigned roles;
    void (*fn)(struct api_call *c);
    /* Optional: runs instead of the authentication statement when the
     * token was authenticated recently (c->role, team and token_name come
     * from the cache).  The cache is a hint, never proof: fast must have
     * its own statement check the token again (known, not revoked, same
     * role and team), or hand the call to tm_api_authenticate(). */
    void (*fast)(struct api_call *c);
};

struct tm_api_routes {
    const struct api_route *table;   /* terminated by a route with a NULL method */
    void *(*state_new)(void);
    void (*state_free)(void *state);
};

/* Answers by status code, API_CODE_MIN..API_CODE_MAX (others are not
 * counted by code). */
#define API_CODE_MIN 100
#define API_CODE_MAX 599
struct tm_api_stats {
    uint64_t requests, ok, client_errors, server_errors, denied, throttled;
    uint64_t by_code[API_CODE_MAX - API_CODE_MIN + 1];
};

struct call_ref;

struct api_call {
    struct tm_api *api;
    h2o_req_t *req;           /* NULL once the client is gone */
    struct call_ref *ref;
    const struct api_route *route;
    int64_t id;               /* {id} */
    char name[64];            /* {name} */
    char hash[TM_TOKEN_HASH_LEN + 1];
    enum tm_role role;
    char team[64];            /* the token's team, "" when none */
    char token_name[64];
    int64_t token_node;       /* an agent token's node, else 0 */
    /* A secret the answer will carry (a fresh agent token), wiped when
     * the call is freed. */
    char secret[160];
    /* Route scratch. */
    unsigned limit;
    bool flag;
    uint64_t deadline;        /* uv_now() past which it answers 503 (api.request_timeout) */
    /* GPU samples this call took from its node's budget (sample_budget.c),
     * given back if they are not stored. */
    unsigned samples_taken;
};

void tm_api_reply(struct api_call *c, int status, const char *json, size_t len);
void tm_api_fail(struct api_call *c, int status, const char *field, const char *message);
void tm_api_fail_spec(struct api_call *c, const struct tm_spec_error *err);
void tm_api_fail_db(struct api_call *c, const struct tm_pg_reply *reply);
/* The start of every query callback: false (and c is answered or freed)
 * when the client went away or the database refused; true to go on. */
bool tm_api_reply_ok(struct api_call *c, const struct tm_pg_reply *reply);
void tm_api_call_free(struct api_call *c);
/* Queue a statement whose callback gets c; on failure answers 503 and
 * returns < 0 (the call is then over). */
int tm_api_query(struct api_call *c, const char *sql, int nparams, const char *const *params,
                 tm_pg_cb cb);
int64_t tm_api_now_ms(const struct api_call *c);
/* Milliseconds before c's deadline (api.request_timeout), 0 once past:
 * every statement of a call is bounded by it (tm_pg_pool_query_until). */
uint64_t tm_api_time_left(const struct api_call *c);
/* The configuration the server was started with (pools, for the submit
 * check), or NULL. */
const struct tm_config *tm_api_config(const struct api_call *c);
unsigned tm_api_max_list(const struct api_call *c);
/* The server's loop (timers of a route that waits: logs.c's follow). */
uv_loop_t *tm_api_loop(const struct api_call *c);
/* Move c's deadline to ms from now: a route that holds its request open on
 * purpose (a follow) keeps its later statements within their bound. */
void tm_api_hold(struct api_call *c, uint64_t ms);
/* Answer bytes of any type with extra headers: nheaders (name, value)
 * pairs in headers[0 .. 2 * nheaders), copied. */
void tm_api_reply_bytes(struct api_call *c, int status, const char *ctype, const char *body, size_t len,
                        const char *const *headers, size_t nheaders);
struct tm_pg_pool *tm_api_pool(const struct api_call *c);
/* Add c's item to the group commit of kind held in *slot (a route
 * state's, NULL until first use, freed with tm_gc_free), bounded by c's
 * deadline: 0, and cb (data: c) ends the call; < 0, not queued, and the
 * caller still owns c (-EAGAIN: every batch is full). */
int tm_api_group_add(struct api_call *c, struct tm_gc **slot, const struct tm_gc_kind *kind,
                     const char *const *values, tm_gc_cb cb);
/* The gate the server's yielding group commits wait on
 * (tm_api_set_gc_gate), or NULL; a route that makes its own group commit
 * hands it to tm_gc_set_gate. */
struct tm_gc_gate *tm_api_gc_gate(const struct api_call *c);
const struct tm_api_stats *tm_api_get_stats(const struct api_call *c);
/* The controller's counters (tm_api_set_fleet_stats), or NULL. */
const struct tm_fleet_stats *tm_api_fleet_stats(const struct api_call *c);
uint64_t tm_api_pool_connected(const struct api_call *c);
bool tm_api_closing(const struct api_call *c);
/* The request body / query string (without '?'); false when the client
 * is gone. */
bool tm_api_body(const struct api_call *c, const char **ret, size_t *ret_len);
bool tm_api_query_string(const struct api_call *c, const char **ret, size_t *ret_len);
/* One query parameter a route accepts; tm_api_parse_query() fills value
 * (percent-decoded) and set. */
struct api_qp {
    const char *name;
    char value[256];
    bool set;
};
/* Parse the query string into qp[0..nqp): an unknown, repeated or
 * malformed parameter fills err naming it and returns < 0; TM_ECANCELED
 * when the client is gone (free the call). */
int tm_api_parse_query(struct api_call *c, struct api_qp *qp, size_t nqp,
                       struct tm_spec_error *err);
/* A whole number from 1 to max, digits only. */
bool tm_api_parse_pos(const char *s, int64_t max, int64_t *ret);
/* The normal path: look the token up, check role and rate, then run the
 * route's fn.  For a fast path that cannot finish the call itself. */
void tm_api_authenticate(struct api_call *c);
/* Take one request from the token's rate bucket; false when it is empty. */
bool tm_api_rate_take(struct api_call *c);
/* Enrollment (a public route, no token yet): take one attempt from the
 * client address's bucket (api.enroll_rate_per_address, api.enroll_burst);
 * false when it is empty (the caller answers 429).  enroll_failed counts
 * a refused secret.  Both log once per address per minute, with counts
 * and the node asked for, never the secret. */
bool tm_api_enroll_take(struct api_call *c);
void tm_api_enroll_failed(struct api_call *c, int64_t node);
/* Forget a cached authentication (the token failed a check). */
void tm_api_auth_forget(struct api_call *c);
/* The state the server's routes keep (their tm_api_routes.state_new()'s). */
void *tm_api_route_state(const struct api_call *c);
/* Public routes answer text too (metrics). */
void tm_api_reply_text(struct api_call *c, int status, const char *ctype, const char *text,
                       size_t len);

#endif
