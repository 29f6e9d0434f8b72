/*
 * controller/store/tokens.c: see tokens.h.  Every statement is parameterised.
 */
#include "controller/store/tokens.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include <openssl/crypto.h>

#include "controller/spec/job_spec.h"
#include "core/err.h"

int tm_token_create(PGconn *conn, const char *name, const char *role, const char *team,
                    int64_t now_ms, char ret_token[TM_TOKEN_LEN + 1], char *err, size_t errsize)
{
    char token[TM_TOKEN_LEN + 1], hash[TM_TOKEN_HASH_LEN + 1], now_s[24];
    PGresult *res = NULL;
    int r;

    if (!name || !tm_job_spec_name_ok(name)) {
        snprintf(err, errsize, "--name: must be 1-63 letters, digits, '.', '_' or '-'");
        return TM_EINVAL;
    }
    if (tm_role_parse(role) < 0) {
        snprintf(err, errsize, "--role: must be admin, finance, engineer or viewer, not \"%s\"",
                 role ? role : "");
        return TM_EINVAL;
    }
    if (tm_role_parse(role) == TM_ROLE_AGENT) {
        snprintf(err, errsize, "--role: agent tokens are minted by enrollment (POST /v1/agent/enroll)");
        return TM_EINVAL;
    }
    if (team && !tm_job_spec_name_ok(team)) {
        snprintf(err, errsize, "--team: must be 1-63 letters, digits, '.', '_' or '-', not \"%s\"",
                 team);
        return TM_EINVAL;
    }
    if (!team && tm_role_parse(role) == TM_ROLE_ENGINEER) {
        snprintf(err, errsize, "--team: required for an engineer token");
        return TM_EINVAL;
    }
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
    const char *params[] = {name, role, team, hash, now_s};
    res = PQexecParams(conn,
                       "INSERT INTO api_tokens (name, role, team, hash, created_ms)"
                       " VALUES ($1, $2, $3, $4, $5) ON CONFLICT (name) DO NOTHING RETURNING id",
                       5, NULL, params, NULL, NULL, 0);
    if (PQresultStatus(res) != PGRES_TUPLES_OK) {
        snprintf(err, errsize, "could not store the token: %s", PQresultErrorMessage(res));
        err[strcspn(err, "\n")] = '\0';
        r = TM_EDB;
        goto out;
    }
    if (PQntuples(res) != 1) {
        snprintf(err, errsize, "a token named \"%s\" exists already", name);
        r = TM_ECONFLICT;
        goto out;
    }
    memcpy(ret_token, token, sizeof(token));
    r = 0;
out:
    OPENSSL_cleanse(token, sizeof(token));
    PQclear(res);
    return r;
}

int tm_token_revoke(PGconn *conn, const char *name, char *err, size_t errsize)
{
    const char *params[] = {name};
    PGresult *res = PQexecParams(conn,
                                 "UPDATE api_tokens SET revoked = true WHERE name = $1 RETURNING id",
                                 1, NULL, params, NULL, NULL, 0);
    int r = 0;

    if (PQresultStatus(res) != PGRES_TUPLES_OK) {
        snprintf(err, errsize, "could not revoke the token: %s", PQresultErrorMessage(res));
        err[strcspn(err, "\n")] = '\0';
        r = TM_EDB;
    } else if (PQntuples(res) == 0) {
        snprintf(err, errsize, "no token named \"%s\"", name ? name : "");
        r = TM_ENOTFOUND;
    }
    PQclear(res);
    return r;
}
