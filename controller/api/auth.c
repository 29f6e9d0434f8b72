/*
 * controller/api/auth.c: who may call: the bearer token, its lookup and the
 * authentication cache, the rate limit per token, and the scrape token
 * of /metrics.  See server.c for the hot path that the cache serves.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <openssl/crypto.h>

#include "controller/api/internal.h"
#include "controller/api/server_core.h"
#include "controller/spec/token.h"
#include "core/err.h"
#include "core/log.h"

/* ---- rate limit --------------------------------------------------------- */

/* A token bucket per token, keyed by 64 bits of its hash, in a fixed table:
 * a full probe window forgets its least recently used entry, which can only
 * make a limit more generous, never block a good client. */
bool tm_api_rate_take_hash(struct tm_api *api, const char *hash)
{
    uint64_t now = uv_now(api->loop), h = 1469598103934665603ull;
    struct rate_slot *slot = NULL, *oldest = NULL;
    unsigned start;

    for (int i = 0; i < 16; i++)
        h = (h ^ (unsigned char)hash[i]) * 1099511628211ull;
    start = (unsigned)(h % RATE_SLOTS);
    for (unsigned i = 0; i < RATE_PROBE; i++) {
        struct rate_slot *s = &api->rate[(start + i) % RATE_SLOTS];
        if (strncmp(s->key, hash, 16) == 0) {
            slot = s;
            break;
        }
        if (!oldest || s->last_ms < oldest->last_ms || s->key[0] == '\0')
            oldest = s;
    }
    if (!slot) {
        slot = oldest;
        memcpy(slot->key, hash, 16);
        slot->key[16] = '\0';
        slot->tokens = api->limits.burst;
        slot->last_ms = now;
    }
    slot->tokens += (double)(now - slot->last_ms) * api->limits.rate_per_s / 1000.0;
    if (slot->tokens > api->limits.burst)
        slot->tokens = api->limits.burst;
    slot->last_ms = now;
    if (slot->tokens < 1.0)
        return false;
    slot->tokens -= 1.0;
    return true;
}

/* ---- enrollment: a bucket per client address ----------------------------- */

/* The client's address as the key: IPv6 by its /64, which one host
 * usually holds whole; "unknown" when the connection cannot say. */
static void peer_key(const struct api_call *c, char *out, size_t size)
{
    struct sockaddr_storage ss;
    socklen_t n = 0;

    snprintf(out, size, "unknown");
    if (!c->req || !c->req->conn || !c->req->conn->callbacks->get_peername)
        return;
    n = c->req->conn->callbacks->get_peername(c->req->conn, (struct sockaddr *)&ss);
    if (n == 0)
        return;
    if (ss.ss_family == AF_INET) {
        uv_ip4_name((const struct sockaddr_in *)&ss, out, size);
    } else if (ss.ss_family == AF_INET6) {
        struct sockaddr_in6 *a = (struct sockaddr_in6 *)&ss;
        bool mapped = IN6_IS_ADDR_V4MAPPED(&a->sin6_addr);
        if (!mapped)
            memset(&a->sin6_addr.s6_addr[8], 0, 8);
        uv_ip6_name(a, out, size);
        size_t len = strlen(out);
        if (!mapped && len + 4 < size)
            snprintf(out + len, size - len, "/64");
    }
}

static struct enroll_slot *enroll_slot(struct tm_api *api, const char *key, uint64_t now)
{
    uint64_t h = 1469598103934665603ull;
    struct enroll_slot *oldest = NULL;

    for (const char *p = key; *p; p++)
        h = (h ^ (unsigned char)*p) * 1099511628211ull;
    for (unsigned i = 0; i < ENROLL_PROBE; i++) {
        struct enroll_slot *s = &api->enroll[(h + i) % ENROLL_SLOTS];
        if (strcmp(s->addr, key) == 0)
            return s;
        if (!oldest || s->addr[0] == '\0' || (oldest->addr[0] != '\0' && s->last_ms < oldest->last_ms))
            oldest = s;
    }
    /* A full window forgets its least recently used address: that can
     * only make a limit more generous. */
    *oldest = (struct enroll_slot){.tokens = api->limits.enroll_burst, .last_ms = now};
    snprintf(oldest->addr, sizeof(oldest->addr), "%s", key);
    return oldest;
}

/* One line per address per ENROLL_LOG_MS: an attack of thousands of
 * attempts is one line a minute, with its counts. */
static void enroll_log(struct enroll_slot *s, int64_t node, uint64_t now)
{
    if (s->logged_ms != 0 && now - s->logged_ms < ENROLL_LOG_MS)
        return;
    tm_log_warn("api refused enrollment attempts",
                "addr=%s node=%" PRId64 " wrong_secret=%" PRIu64 " rate_limited=%" PRIu64 " period_s=%d",
                s->addr, node, s->failed, s->throttled, ENROLL_LOG_MS / 1000);
    s->logged_ms = now;
    s->failed = 0;
    s->throttled = 0;
}

bool tm_api_enroll_take(struct api_call *c)
{
    struct tm_api *api = c->api;
    uint64_t now = uv_now(api->loop);
    char key[64];
    struct enroll_slot *s;

    peer_key(c, key, sizeof(key));
    s = enroll_slot(api, key, now);
    s->tokens += (double)(now - s->last_ms) * api->limits.enroll_rate_per_s / 1000.0;
    if (s->tokens > api->limits.enroll_burst)
        s->tokens = api->limits.enroll_burst;
    s->last_ms = now;
    if (s->tokens >= 1.0) {
        s->tokens -= 1.0;
        return true;
    }
    s->throttled++;
    enroll_log(s, 0, now);
    return false;
}

void tm_api_enroll_failed(struct api_call *c, int64_t node)
{
    struct tm_api *api = c->api;
    uint64_t now = uv_now(api->loop);
    char key[64];
    struct enroll_slot *s;

    peer_key(c, key, sizeof(key));
    s = enroll_slot(api, key, now);
    s->failed++;
    enroll_log(s, node, now);
}

/* ---- authentication ----------------------------------------------------- */

/*
 * The authentication cache.  A route with a fast path (POST /v1/jobs) skips
 * the separate lookup for a token authenticated within AUTH_TTL_MS: its
 * role, team and name come from here for the checks made before the
 * statement (role, rate, an engineer's team), and the route's one statement
 * checks the token again (hash known, not revoked, same role and team), so
 * a revoked token is still refused by the next request; the cache is
 * never the proof.  Open addressing by the hash over AUTH_PROBE slots; a
 * full window evicts its expired or soonest-expiring entry.  The hashes
 * are SHA-256 of the tokens, as in api_tokens.
 */
static unsigned auth_index(const char *hash)
{
    uint64_t h = 1469598103934665603ull;

    for (int i = 0; i < 16; i++)
        h = (h ^ (unsigned char)hash[i]) * 1099511628211ull;
    return (unsigned)(h % AUTH_SLOTS);
}

/* The slot holding hash within its probe window, or NULL. */
static struct auth_slot *auth_find(struct tm_api *api, const char *hash)
{
    unsigned start = auth_index(hash);

    for (unsigned i = 0; i < AUTH_PROBE; i++) {
        struct auth_slot *s = &api->auth[(start + i) % AUTH_SLOTS];
        if (s->hash[0] != '\0' && tm_token_hash_equal(s->hash, hash))
            return s;
    }
    return NULL;
}

bool tm_api_auth_cache_get(struct tm_api *api, struct api_call *c)
{
    struct auth_slot *s = auth_find(api, c->hash);

    if (!s || uv_now(api->loop) >= s->until_ms)
        return false;
    c->role = s->role;
    memcpy(c->team, s->team, sizeof(c->team));
    memcpy(c->token_name, s->token_name, sizeof(c->token_name));
    c->token_node = s->token_node;
    return true;
}

static void auth_cache_put(struct tm_api *api, const struct api_call *c)
{
    struct auth_slot *s = auth_find(api, c->hash);

    if (!s) {
        unsigned start = auth_index(c->hash);
        for (unsigned i = 0; i < AUTH_PROBE; i++) {
            struct auth_slot *t = &api->auth[(start + i) % AUTH_SLOTS];
            if (t->hash[0] == '\0') {
                s = t;
                break;
            }
            if (!s || t->until_ms < s->until_ms)
                s = t;
        }
    }
    memcpy(s->hash, c->hash, sizeof(s->hash));
    s->role = c->role;
    memcpy(s->team, c->team, sizeof(s->team));
    memcpy(s->token_name, c->token_name, sizeof(s->token_name));
    s->token_node = c->token_node;
    s->until_ms = uv_now(api->loop) + AUTH_TTL_MS;
}

void tm_api_auth_forget(struct api_call *c)
{
    struct auth_slot *s = auth_find(c->api, c->hash);

    if (s)
        OPENSSL_cleanse(s, sizeof(*s));
}

bool tm_api_rate_take(struct api_call *c)
{
    return tm_api_rate_take_hash(c->api, c->hash);
}

void *tm_api_route_state(const struct api_call *c)
{
    return c->api->route_state;
}

/* An agent token also brings its node's state: a token whose node has
 * ended (terminated, interrupted) is refused, so an agent that outlived
 * its node cannot act for it. */
static const char auth_sql[] =
    "SELECT t.name, t.role, coalesce(t.team, ''), t.hash, t.node_id, n.state"
    " FROM api_tokens t LEFT JOIN nodes n ON n.id = t.node_id WHERE t.hash = $1 AND NOT t.revoked";

/* An agent token is bound to its node: the route must be one of a node's
 * ({id} of /v1/nodes/{id}/...) and {id} its own.  false: c answered. */
static bool agent_binding_ok(struct api_call *c)
{
    char msg[128];

    if (c->role != TM_ROLE_AGENT)
        return true;
    if (strncmp(c->route->pattern, "/v1/nodes/{id}/", 15) != 0 || c->id != c->token_node) {
        snprintf(msg, sizeof(msg), "this agent token is bound to node %" PRId64, c->token_node);
        tm_api_fail(c, 403, NULL, msg);
        return false;
    }
    return true;
}

static void on_auth(const struct tm_pg_reply *reply, void *data)
{
    struct api_call *c = data;
    PGresult *res;
    int role;

    if (!tm_api_reply_ok(c, reply))
        return;
    res = reply->results[0];
    if (PQntuples(res) != 1 || !tm_token_hash_equal(PQgetvalue(res, 0, 3), c->hash)) {
        tm_api_auth_forget(c);
        tm_api_fail(c, 401, "Authorization", "unknown or revoked token");
        return;
    }
    role = tm_role_parse(PQgetvalue(res, 0, 1));
    if (role < 0) {
        tm_api_auth_forget(c);
        tm_api_fail(c, 401, "Authorization", "unknown or revoked token");
        return;
    }
    c->role = (enum tm_role)role;
    snprintf(c->token_name, sizeof(c->token_name), "%s", PQgetvalue(res, 0, 0));
    snprintf(c->team, sizeof(c->team), "%s", PQgetvalue(res, 0, 2));
    c->token_node = PQgetisnull(res, 0, 4) ? 0 : strtoll(PQgetvalue(res, 0, 4), NULL, 10);
    if (c->role == TM_ROLE_AGENT && !PQgetisnull(res, 0, 5) &&
        (strcmp(PQgetvalue(res, 0, 5), "terminated") == 0 ||
         strcmp(PQgetvalue(res, 0, 5), "interrupted") == 0)) {
        char msg[128];
        snprintf(msg, sizeof(msg), "node %" PRId64 " is %s: its agent token is refused", c->token_node,
                 PQgetvalue(res, 0, 5));
        tm_api_fail(c, 409, "id", msg);
        return;
    }
    /* Cached for the fast paths only (the heartbeat), whose statement
     * checks the token and its node again; every other route looks the
     * token up, and so sees its node's state. */
    auth_cache_put(c->api, c);
    if (!(c->route->roles & (1u << c->role))) {
        char msg[128];
        snprintf(msg, sizeof(msg), "the %s role may not %s %s", tm_role_name(c->role),
                 c->route->method, c->route->pattern);
        tm_api_fail(c, 403, NULL, msg);
        return;
    }
    if (!agent_binding_ok(c))
        return;
    if (!tm_api_rate_take_hash(c->api, c->hash)) {
        tm_api_fail(c, 429, "Authorization", "rate limit exceeded for this token");
        return;
    }
    c->route->fn(c);
}

/* "Bearer <token>": the token, or NULL. */
const char *tm_api_bearer(const h2o_req_t *req, size_t *ret_len)
{
    ssize_t i = h2o_find_header(&req->headers, H2O_TOKEN_AUTHORIZATION, -1);
    const char *v;
    size_t n;

    if (i < 0)
        return NULL;
    v = req->headers.entries[i].value.base;
    n = req->headers.entries[i].value.len;
    if (n < 8 || strncasecmp(v, "Bearer ", 7) != 0)
        return NULL;
    v += 7;
    n -= 7;
    while (n && *v == ' ') {
        v++;
        n--;
    }
    while (n && v[n - 1] == ' ')
        n--;
    if (n == 0 || n > 256)
        return NULL;
    *ret_len = n;
    return v;
}

/* The scrape token, when api.metrics_token_file set one. */
bool tm_api_metrics_authorized(const struct tm_api *api, const h2o_req_t *req)
{
    char hash[TM_TOKEN_HASH_LEN + 1];
    size_t n = 0;
    const char *tok = tm_api_bearer(req, &n);
    bool ok;

    if (!api->metrics_token)
        return true;
    if (!tok || tm_token_hash(tok, n, hash) < 0)
        return false;
    ok = tm_token_hash_equal(hash, api->metrics_hash);
    OPENSSL_cleanse(hash, sizeof(hash));
    return ok;
}

void tm_api_authenticate(struct api_call *c)
{
    const char *params[] = {c->hash};

    tm_api_query(c, auth_sql, 1, params, on_auth);
}
