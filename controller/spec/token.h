/*
 * controller/spec/token.h: API bearer tokens.
 *
 * A token is "tmk_" followed by 64 hex digits of a fresh random 32-byte
 * value (OpenSSL RAND_bytes).  It is printed once, when created; the
 * database keeps only its SHA-256 (hex) in api_tokens.hash, so a leaked
 * table leaks no usable token.  A token is revoked by flagging its row;
 * revoked rows never authenticate.  Tokens are secrets: callers wipe their
 * copies with OPENSSL_cleanse() and never log them.
 *
 * Roles: admin (everything), finance (reads; budgets later), engineer
 * (reads; submits and changes its own team's jobs), viewer (reads), agent
 * (a node agent: bound to one node, it may call only that node's agent
 * routes; minted by POST /v1/agent/enroll in exchange for the node's
 * enrollment secret).
 *
 * Enrollment secrets ("tme_" + 64 hex digits, RAND_bytes) are generated per
 * launch attempt, stored only as their hash (tm_token_hash) with an expiry,
 * and are valid once.
 */
#ifndef TM_TOKEN_H
#define TM_TOKEN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define TM_TOKEN_PREFIX "tmk_"
#define TM_TOKEN_LEN (4 + 64)   /* prefix + hex, no terminator */
#define TM_TOKEN_HASH_LEN 64    /* hex SHA-256, no terminator */

enum tm_role {
    TM_ROLE_ADMIN,
    TM_ROLE_FINANCE,
    TM_ROLE_ENGINEER,
    TM_ROLE_VIEWER,
    TM_ROLE_AGENT,
    TM_ROLE_MAX,
};

const char *tm_role_name(enum tm_role role);
/* The role, or -1 when name is not one. */
int tm_role_parse(const char *name);

/* A new random token into buf (TM_TOKEN_LEN + 1 bytes).  0 or TM_ENOMEM
 * when the random generator fails. */
int tm_token_generate(char buf[TM_TOKEN_LEN + 1]);

#define TM_ENROLL_PREFIX "tme_"
/* A new random enrollment secret into buf (TM_TOKEN_LEN + 1 bytes, same
 * length as a token, prefix TM_ENROLL_PREFIX).  0 or TM_ENOMEM. */
int tm_enroll_secret_generate(char buf[TM_TOKEN_LEN + 1]);

/* Hex SHA-256 of token[0..len) into hex (TM_TOKEN_HASH_LEN + 1 bytes). */
int tm_token_hash(const char *token, size_t len, char hex[TM_TOKEN_HASH_LEN + 1]);

/* Constant-time comparison of two hex hashes. */
bool tm_token_hash_equal(const char *a, const char *b);

#endif
