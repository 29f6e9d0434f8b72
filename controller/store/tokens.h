/*
 * controller/store/tokens.h: API tokens in the database (api_tokens).  Only
 * a token's hash is stored (spec/token.h has the format and the hash).
 */
#ifndef TM_STORE_TOKENS_H
#define TM_STORE_TOKENS_H

#include <stddef.h>
#include <stdint.h>

#include <libpq-fe.h>

#include "controller/spec/token.h"

/* Blocking (CLI only, never on the loop).  Create a token named name and
 * hand it back in ret_token (TM_TOKEN_LEN + 1 bytes); only its hash is
 * stored.  team is required for engineers, optional otherwise.  Returns 0,
 * TM_EINVAL (bad name, role or team; err says which), TM_ECONFLICT (name
 * taken) or TM_EDB. */
int tm_token_create(PGconn *conn, const char *name, const char *role, const char *team,
                    int64_t now_ms, char ret_token[TM_TOKEN_LEN + 1], char *err, size_t errsize);
/* Revoke by name: 0, TM_ENOTFOUND or TM_EDB. */
int tm_token_revoke(PGconn *conn, const char *name, char *err, size_t errsize);

#endif
