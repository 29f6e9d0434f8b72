/*
 * controller/store/join_tokens.h: the join tokens of owned pools
 * (migrations/0028_owned.sql, docs/owned.md), blocking, for the one-shot
 * command `tarmac join-token`.  As API tokens (tokens.h): a token exists
 * in the clear only in create's answer; the table keeps its SHA-256.
 * Joins spend them (tarmac_agent_join, controller/api/agent_join.c).
 */
#ifndef TM_STORE_JOIN_TOKENS_H
#define TM_STORE_JOIN_TOKENS_H

#include <stddef.h>
#include <stdint.h>

#include <libpq-fe.h>

#include "controller/spec/token.h"

/* A new token for pool, valid ttl_ms from now_ms for uses joins: 0 with
 * the token in ret_token (shown once; cleanse it) and its id, or
 * TM_ENOTFOUND (the pool is not in the database: the controller records
 * its pools when it starts), TM_EDB; err says which. */
int tm_join_token_create(PGconn *conn, const char *pool, int64_t ttl_ms, int uses, int64_t now_ms,
                         char ret_token[TM_TOKEN_LEN + 1], int64_t *ret_id, char *err, size_t errsize);

/* Revoke token id at now_ms (a revoked token stays revoked): 0,
 * TM_ENOTFOUND or TM_EDB. */
int tm_join_token_revoke(PGconn *conn, int64_t id, int64_t now_ms, char *err, size_t errsize);

#endif
