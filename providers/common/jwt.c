/*
 * providers/common/jwt.c: RS256 compact JWS (see jwt.h).
 */
#include "providers/common/jwt.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/bio.h>
#include <openssl/crypto.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>

#include "core/err.h"

char *tm_jwt_b64url(const unsigned char *data, size_t len)
{
    size_t cap = 4 * ((len + 2) / 3) + 1;
    char *out = malloc(cap);
    int n;

    if (!out)
        return NULL;
    n = EVP_EncodeBlock((unsigned char *)out, data, (int)len);
    while (n > 0 && out[n - 1] == '=')
        n--;
    out[n] = '\0';
    for (char *p = out; *p; p++)
        *p = *p == '+' ? '-' : *p == '/' ? '_' : *p;
    return out;
}

/* OpenSSL's default asks on the terminal for an encrypted key's password:
 * a daemon must fail instead. */
static int no_password(char *buf, int size, int rwflag, void *u)
{
    (void)buf;
    (void)size;
    (void)rwflag;
    (void)u;
    return -1;
}

static EVP_PKEY *load_rsa_key(const char *pem)
{
    BIO *bio = BIO_new_mem_buf(pem, -1);
    EVP_PKEY *k = bio ? PEM_read_bio_PrivateKey(bio, NULL, no_password, NULL) : NULL;

    BIO_free(bio);
    ERR_clear_error();
    if (k && EVP_PKEY_base_id(k) != EVP_PKEY_RSA) {
        EVP_PKEY_free(k);
        k = NULL;
    }
    return k;
}

bool tm_jwt_rs256_key_ok(const char *key_pem)
{
    EVP_PKEY *k = key_pem ? load_rsa_key(key_pem) : NULL;

    EVP_PKEY_free(k);
    return k != NULL;
}

int tm_jwt_sign_rs256(const char *key_pem, const char *header_json, const char *claims_json,
                      char **ret_jwt)
{
    char *h64 = NULL, *p64 = NULL, *s64 = NULL, *input = NULL, *jwt = NULL;
    unsigned char *sig = NULL;
    size_t siglen = 0, inlen;
    EVP_PKEY *pk = NULL;
    EVP_MD_CTX *ctx = NULL;
    int r = TM_ENOMEM;

    if (!key_pem || !header_json || !claims_json || !ret_jwt)
        return TM_EINVAL;
    h64 = tm_jwt_b64url((const unsigned char *)header_json, strlen(header_json));
    p64 = tm_jwt_b64url((const unsigned char *)claims_json, strlen(claims_json));
    if (!h64 || !p64)
        goto out;
    inlen = strlen(h64) + 1 + strlen(p64);
    input = malloc(inlen + 1);
    if (!input)
        goto out;
    snprintf(input, inlen + 1, "%s.%s", h64, p64);
    r = TM_EINVAL;
    pk = load_rsa_key(key_pem);
    ctx = EVP_MD_CTX_new();
    if (!pk || !ctx || EVP_DigestSignInit(ctx, NULL, EVP_sha256(), NULL, pk) != 1 ||
        EVP_DigestSign(ctx, NULL, &siglen, (const unsigned char *)input, inlen) != 1)
        goto out;
    r = TM_ENOMEM;
    sig = malloc(siglen);
    if (!sig)
        goto out;
    r = TM_EINVAL;
    if (EVP_DigestSign(ctx, sig, &siglen, (const unsigned char *)input, inlen) != 1)
        goto out;
    r = TM_ENOMEM;
    s64 = tm_jwt_b64url(sig, siglen);
    if (!s64)
        goto out;
    jwt = malloc(inlen + 1 + strlen(s64) + 1);
    if (!jwt)
        goto out;
    snprintf(jwt, inlen + 1 + strlen(s64) + 1, "%s.%s", input, s64);
    *ret_jwt = jwt;
    r = 0;
out:
    ERR_clear_error();
    free(h64);
    free(p64);
    free(input);
    free(sig);
    free(s64);
    EVP_MD_CTX_free(ctx);
    EVP_PKEY_free(pk);
    return r;
}
