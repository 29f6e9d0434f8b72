/*
 * controller/api/agent_join.c: POST /v1/agent/join (docs/openapi.yaml, tag
 * agent; docs/owned.md), how a machine tarmac does not buy becomes a node
 * of an owned pool.  The machine sends a join token (spent once), a node
 * key of its own making (only its hash is kept, on the node) and its
 * hardware; it gets an agent token bound to its new node.  A machine that
 * comes back proves the same key and gets its node back, with a fresh
 * agent token, spending no use; a report unlike the one it joined with
 * cordons the node (tarmac_agent_join, migrations/0028_owned.sql).
 *
 * Refusals name the field and write nothing: a bad body (400), a pool that
 * is not owned or unknown (400 pool), a machine of another shape than the
 * pool declares (400 hardware), a wrong, revoked, expired or spent token
 * (401 join_token), a token for another pool or a pool with max_nodes
 * machines already (403 pool).  No token yet to
 * limit by, so joins share enrollment's bucket per client address, and a
 * refused one counts in enrollment's log line for that address (auth.c).
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>
#include <libpq-fe.h>
#include <openssl/crypto.h>

#include "controller/api/internal.h"
#include "controller/api/request.h"
#include "controller/api/resources.h"
#include "controller/spec/join_body.h"
#include "controller/spec/token.h"
#include "core/config.h"
#include "core/err.h"

/* $15, the shape's message, comes back with the outcome: the refusal for
 * a wrong shape is known only once the statement said it is no rejoin. */
static const char join_sql[] =
    "SELECT outcome, node_id, $15::text FROM tarmac_agent_join($1, $2, $3, $4, $5::jsonb, $6::int,"
    " $7, $8::bigint, $9::bigint, $10::bigint, $11, $12, $13::boolean, $14::int)";

/* What each refusal of tarmac_agent_join answers. */
static const struct {
    const char *outcome;
    int status;
    const char *field;
    const char *message;
} refusals[] = {
    {"token", 401, "join_token", "unknown join token (and no node has this node key)"},
    {"revoked", 401, "join_token", "the join token was revoked"},
    {"expired", 401, "join_token", "the join token expired"},
    {"spent", 401, "join_token", "the join token has no uses left"},
    {"pool", 403, "pool", "the join token (or this machine's node) belongs to another pool"},
    {"full", 403, "pool", "the pool has max_nodes machines already"},
    {"gone", 403, "node_key", "this machine's node was terminated: move node_key out of the work "
                              "folder to join afresh with a join token"},
};

static void on_join(const struct tm_pg_reply *reply, void *data)
{
    struct api_call *c = data;
    char body[256];
    PGresult *res;

    if (!tm_api_reply_ok(c, reply))
        return;
    res = reply->results[0];
    const char *outcome = PQntuples(res) == 1 ? PQgetvalue(res, 0, 0) : "";
    if (strcmp(outcome, "shape") == 0) {
        tm_api_enroll_failed(c, 0);
        tm_api_fail(c, 400, "hardware", PQgetvalue(res, 0, 2));
        return;
    }
    for (size_t i = 0; i < sizeof(refusals) / sizeof(refusals[0]); i++)
        if (strcmp(outcome, refusals[i].outcome) == 0) {
            tm_api_enroll_failed(c, 0);
            tm_api_fail(c, refusals[i].status, refusals[i].field, refusals[i].message);
            return;
        }
    if (PQgetisnull(res, 0, 1)) {
        tm_api_fail(c, 500, NULL, "the join left no node");
        return;
    }
    int n = snprintf(body, sizeof(body), "{\"node_id\":%s,\"token\":\"%s\",\"rejoined\":%s,\"cordoned\":%s}",
                     PQgetvalue(res, 0, 1), c->secret, strcmp(outcome, "joined") == 0 ? "false" : "true",
                     strcmp(outcome, "changed") == 0 ? "true" : "false");
    OPENSSL_cleanse(c->secret, sizeof(c->secret));
    tm_api_reply(c, strcmp(outcome, "joined") == 0 ? 201 : 200, body, (size_t)n);
    OPENSSL_cleanse(body, sizeof(body));
}

/* The pool of the body, owned: NULL after answering c. */
static const struct tm_config_pool *join_pool(struct api_call *c, const char *name)
{
    const struct tm_config *cfg = tm_api_config(c);
    const struct tm_config_pool *pool = cfg ? tm_config_pool_find(cfg, name) : NULL;

    /* A server started without a configuration (tests) has no pools. */
    if (!pool) {
        tm_api_fail(c, 400, "pool", "no such pool");
        return NULL;
    }
    if (!pool->owned) {
        tm_api_fail(c, 400, "pool", "not an owned pool: tarmac launches its nodes itself");
        return NULL;
    }
    return pool;
}

void tm_api_agent_join(struct api_call *c)
{
    struct tm_spec_error err = {0};
    struct tm_join_body b;
    const char *body;
    size_t len;
    cJSON *root = NULL;
    char key_hash[TM_TOKEN_HASH_LEN + 1], token_hash[TM_TOKEN_HASH_LEN + 1];
    char agent_hash[TM_TOKEN_HASH_LEN + 1], token[TM_TOKEN_LEN + 1], hw[256];
    char now[24], gpus[16], cpu[24], mem[24], price[24], addr[64], max[16];
    bool have_token;
    int r;

    if (!tm_api_body(c, &body, &len)) {
        tm_api_call_free(c);
        return;
    }
    if (!tm_api_enroll_take(c)) {
        tm_api_fail(c, 429, NULL, "too many join attempts from this address; retry later");
        return;
    }
    if (tm_join_parse(body, len, &b, &root, &err) < 0) {
        tm_api_fail_spec(c, &err);
        return;
    }
    const struct tm_config_pool *pool = join_pool(c, b.pool);
    char why[256] = "";
    bool shape_ok = pool && tm_join_shape_ok(pool, &b.hw, why, sizeof(why));
    /* The key and the token are the caller's proofs: only hashes go on. */
    have_token = b.join_token != NULL;
    r = tm_token_hash(b.node_key, strlen(b.node_key), key_hash);
    if (r == 0 && have_token)
        r = tm_token_hash(b.join_token, strlen(b.join_token), token_hash);
    OPENSSL_cleanse((char *)b.node_key, strlen(b.node_key));
    if (have_token)
        OPENSSL_cleanse((char *)b.join_token, strlen(b.join_token));
    snprintf(addr, sizeof(addr), "%s", b.address ? b.address : "");
    cJSON_Delete(root);
    if (!pool)
        return;
    if (r < 0 || !tm_join_hardware_json(&b.hw, hw, sizeof(hw)) || tm_token_generate(token) < 0 ||
        tm_token_hash(token, TM_TOKEN_LEN, agent_hash) < 0) {
        OPENSSL_cleanse(token, sizeof(token));
        tm_api_fail(c, 500, NULL, "could not make a token");
        return;
    }
    snprintf(c->secret, sizeof(c->secret), "%s", token);
    OPENSSL_cleanse(token, sizeof(token));
    fmt_i64(now, sizeof(now), tm_api_now_ms(c));
    fmt_i64(gpus, sizeof(gpus), b.hw.gpus);
    fmt_i64(cpu, sizeof(cpu), (int64_t)b.hw.cpus * 1000);
    fmt_i64(mem, sizeof(mem), b.hw.memory_mib);
    fmt_i64(price, sizeof(price), pool->cost_uusd_per_node_hour);
    fmt_i64(max, sizeof(max), pool->max_nodes);
    const char *params[] = {now, pool->name, have_token ? token_hash : NULL, key_hash, hw, gpus,
                            b.hw.gpu_model[0] ? b.hw.gpu_model : pool->gpu_model, cpu, mem, price,
                            agent_hash, addr[0] ? addr : NULL, shape_ok ? "true" : "false", max, why};
    tm_api_query(c, join_sql, 15, params, on_join);
    OPENSSL_cleanse(key_hash, sizeof(key_hash));
    OPENSSL_cleanse(token_hash, sizeof(token_hash));
}
