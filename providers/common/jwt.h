/*
 * providers/common/jwt.h: compact JWS signed RS256 (RSASSA-PKCS1-v1_5 with
 * SHA-256, OpenSSL EVP), shared by the clouds that exchange a signed
 * assertion for a token: GCP's service-account grant (providers/gcp/
 * gcp_auth.c) and Azure's certificate client assertion (providers/azure/
 * arm_assertion.c).  Each caller builds its own header and claims, since
 * the byte order of their keys is what the reference clients send.
 *
 * Pure: no I/O library.  The key is never copied into an error string.
 */
#ifndef TM_PROVIDER_JWT_H
#define TM_PROVIDER_JWT_H

#include <stdbool.h>
#include <stddef.h>

/* base64url without padding (RFC 7515 section 2) of len bytes, into a
 * malloc'd string; NULL when out of memory. */
char *tm_jwt_b64url(const unsigned char *data, size_t len);

/*
 * b64url(header_json) "." b64url(claims_json) "." b64url(signature), the
 * signature RS256 over the first two parts with the PEM private key
 * key_pem (other PEM blocks in it are skipped; a password-protected key
 * is refused, never prompted for).  *ret_jwt is malloc'd: the caller wipes
 * and frees it.  0, TM_EINVAL (no usable RSA key, a NULL argument),
 * TM_ENOMEM.
 */
int tm_jwt_sign_rs256(const char *key_pem, const char *header_json, const char *claims_json,
                      char **ret_jwt);

/* Whether key_pem holds an RSA private key this signer can use (loaded
 * the same way, without prompting for a password). */
bool tm_jwt_rs256_key_ok(const char *key_pem);

#endif
