/*
 * providers/gcp/gcp_auth.h: OAuth 2.0 access tokens for Compute Engine.
 *
 * Two sources, chosen by the provider's credentials.source:
 *   file (or none with GOOGLE_APPLICATION_CREDENTIALS set): a service-account
 *        JSON key file.  A JWT signed RS256 (OpenSSL EVP) with claims
 *        {"iss","scope","aud","exp","iat"} in that order, header
 *        {"alg":"RS256"}, exactly as google-auth-library builds it
 *        (signed by providers/common/jwt.c), is
 *        exchanged at the token endpoint (grant_type jwt-bearer).  The
 *        endpoint is configurable (tests); the JWT's aud stays the real
 *        token URL unless token_audience is set.
 *   instance_role (or none without the variable): the metadata server,
 *        GET .../computeMetadata/v1/instance/service-accounts/default/token
 *        with Metadata-Flavor: Google.
 * Workload identity federation (external_account key files) is not
 * supported: such a file is refused naming its "type".
 *
 * Tokens are cached and refreshed refresh_margin_ms before they expire,
 * in the background and by any get inside the margin.  The private key and
 * every token are registered with tm_log_add_secret() and wiped with
 * OPENSSL_cleanse() when released; no error string carries either.
 */
#ifndef TM_GCP_AUTH_H
#define TM_GCP_AUTH_H

#include <stddef.h>
#include <stdint.h>

#include <uv.h>

#define TM_GCP_TOKEN_URL "https://oauth2.googleapis.com/token"
#define TM_GCP_METADATA_URL "http://metadata.google.internal"
#define TM_GCP_SCOPE "https://www.googleapis.com/auth/compute"
#define TM_GCP_TOKEN_MAX 4096

struct tm_http;

/* A parsed service-account key file. */
struct tm_gcp_key {
    char *client_email;
    char *private_key;            /* PEM */
    char *private_key_id;         /* may be NULL */
    char *project_id;             /* may be NULL */
};

/*
 * Parse a key file's text.  0 and *ret (release it), or TM_EINVAL with err
 * naming the field and the problem (`"private_key": not a PEM private key`,
 * `not JSON: ...`, `"type" is "external_account": workload identity
 * federation is not supported`), or TM_ENOMEM.  The key is checked to load
 * with OpenSSL, so a truncated PEM is refused here, not at first use.
 */
int tm_gcp_key_parse(const char *json, size_t len, struct tm_gcp_key *ret, char *err,
                     size_t errsize);
/* The same from a file (at most 64 KiB); err starts with the path. */
int tm_gcp_key_load(const char *path, struct tm_gcp_key *ret, char *err, size_t errsize);
void tm_gcp_key_release(struct tm_gcp_key *key);

/*
 * The signed assertion for iss/scope/aud at iat (exp = iat + 3600) into a
 * malloc'd string (caller wipes and frees).  0, TM_EINVAL (bad key), TM_ENOMEM.
 */
int tm_gcp_jwt_sign(const char *pem, const char *iss, const char *scope, const char *aud,
                    int64_t iat, char **ret_jwt);

/*
 * Parse a token endpoint's or metadata server's answer
 * {"access_token","expires_in","token_type"}: 0 with the token copied to
 * tok and its lifetime in seconds, or TM_EBADREPLY with err (no token in it).
 */
int tm_gcp_token_parse(const char *body, size_t len, char *tok, size_t toksize,
                       int64_t *ret_expires_in, char *err, size_t errsize);

enum tm_gcp_token_source {
    TM_GCP_TOKEN_KEY,             /* service-account key */
    TM_GCP_TOKEN_METADATA,        /* metadata server */
};

struct tm_gcp_token_options {
    enum tm_gcp_token_source source;
    const struct tm_gcp_key *key; /* TM_GCP_TOKEN_KEY: copied */
    const char *token_url;        /* NULL: TM_GCP_TOKEN_URL */
    const char *audience;         /* NULL: TM_GCP_TOKEN_URL */
    const char *metadata_url;     /* NULL: TM_GCP_METADATA_URL */
    const char *scope;            /* NULL: TM_GCP_SCOPE */
    long timeout_ms;              /* per request; 0 = 10 s */
    int64_t refresh_margin_ms;    /* 0 = 5 min */
};

struct tm_gcp_tokens;

/*
 * Called once per get, on the loop, never from inside tm_gcp_tokens_get().
 * status 0: token valid during the call.  Else TM_EAUTH (the endpoint
 * refused the key), TM_EUNAVAIL / -ETIMEDOUT / -ECONNREFUSED (unreachable:
 * retryable), TM_EBADREPLY, TM_ECANCELED; error says why, without a secret.
 */
typedef void (*tm_gcp_token_cb)(int status, const char *token, const char *error, void *data);

int tm_gcp_tokens_create(uv_loop_t *loop, struct tm_http *http,
                         const struct tm_gcp_token_options *opts, struct tm_gcp_tokens **ret);
int tm_gcp_tokens_get(struct tm_gcp_tokens *t, tm_gcp_token_cb cb, void *data);
/* Forget the cached token (the API answered 401 with it). */
void tm_gcp_tokens_invalidate(struct tm_gcp_tokens *t);
/* Tokens fetched so far (tests watch caching and refresh). */
unsigned tm_gcp_tokens_fetches(const struct tm_gcp_tokens *t);
/* Fail pending gets with TM_ECANCELED and free once the timers are closed.
 * Close the tm_http first (so no fetch is in flight), then this. */
void tm_gcp_tokens_close(struct tm_gcp_tokens *t, void (*done)(void *data), void *data);

#endif
