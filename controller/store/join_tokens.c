/*
 * controller/store/join_tokens.c: see join_tokens.h.  Every statement is
 * parameterised.
 */
#include "controller/store/join_tokens.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/crypto.h>

#include "core/err.h"

int tm_join_token_create(PGconn *conn, const char *pool, int64_t ttl_ms, int uses, int64_t now_ms,
                         char ret_token[TM_TOKEN_LEN + 1], int64_t *ret_id, char *err, size_t errsize)
{
    char token[TM_TOKEN_LEN + 1], hash[TM_TOKEN_HASH_LEN + 1], now_s[24], exp_s[24], uses_s[16];
    PGresult *res = NULL;
    int r;

    r = tm_token_generate(token);
    if (r < 0) {
        snprintf(err, errsize, "could not generate a random token");
        return r;
    }
    r = tm_token_hash(token, TM_TOKEN_LEN, hash);
    if (r < 0) {
        snprintf(err, errsize, "could not hash the token");
        goto out;
    }
    snprintf(now_s, sizeof(now_s), "%" PRId64, now_ms);
    snprintf(exp_s, sizeof(exp_s), "%" PRId64, now_ms + ttl_ms);
    snprintf(uses_s, sizeof(uses_s), "%d", uses);
    const char *params[] = {pool, hash, now_s, exp_s, uses_s};
    /* The pool must be known to the database: a token for a pool the
     * controller never recorded could never be spent. */
    res = PQexecParams(conn,
                       "INSERT INTO join_tokens (pool, hash, created_ms, expires_ms, uses_left)"
                       " SELECT name, $2, $3, $4, $5 FROM pools WHERE name = $1 RETURNING id",
                       5, NULL, params, NULL, NULL, 0);
    if (PQresultStatus(res) != PGRES_TUPLES_OK) {
        snprintf(err, errsize, "could not store the join token: %s", PQresultErrorMessage(res));
        err[strcspn(err, "\n")] = '\0';
        r = TM_EDB;
        goto out;
    }
    if (PQntuples(res) != 1) {
        snprintf(err, errsize,
                 "--pool: pool \"%s\" is not in the database yet (tarmac serve records the "
                 "configuration's pools when it starts)",
                 pool);
        r = TM_ENOTFOUND;
        goto out;
    }
    *ret_id = strtoll(PQgetvalue(res, 0, 0), NULL, 10);
    memcpy(ret_token, token, sizeof(token));
    r = 0;
out:
    OPENSSL_cleanse(token, sizeof(token));
    OPENSSL_cleanse(hash, sizeof(hash));
    PQclear(res);
    return r;
}

int tm_join_token_revoke(PGconn *conn, int64_t id, int64_t now_ms, char *err, size_t errsize)
{
    char id_s[24], now_s[24];
    int r = 0;

    snprintf(id_s, sizeof(id_s), "%" PRId64, id);
    snprintf(now_s, sizeof(now_s), "%" PRId64, now_ms);
    const char *params[] = {id_s, now_s};
    PGresult *res = PQexecParams(conn,
                                 "UPDATE join_tokens SET revoked_ms = coalesce(revoked_ms, $2)"
                                 " WHERE id = $1 RETURNING id",
                                 2, NULL, params, NULL, NULL, 0);
    if (PQresultStatus(res) != PGRES_TUPLES_OK) {
        snprintf(err, errsize, "could not revoke the join token: %s", PQresultErrorMessage(res));
        err[strcspn(err, "\n")] = '\0';
        r = TM_EDB;
    } else if (PQntuples(res) == 0) {
        snprintf(err, errsize, "--id: no join token %s", id_s);
        r = TM_ENOTFOUND;
    }
    PQclear(res);
    return r;
}
