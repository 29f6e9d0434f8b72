/*
 * controller/spec/token.c: see token.h.  The token's format, its hash and
 * the roles; storing tokens is store/tokens.c, the command cli/token.c.
 */
#include "controller/spec/token.h"

#include <stdio.h>
#include <string.h>

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/rand.h>

#include "core/err.h"

static const char *const role_names[TM_ROLE_MAX] = {
    [TM_ROLE_ADMIN] = "admin",
    [TM_ROLE_FINANCE] = "finance",
    [TM_ROLE_ENGINEER] = "engineer",
    [TM_ROLE_VIEWER] = "viewer",
    [TM_ROLE_AGENT] = "agent",
};

const char *tm_role_name(enum tm_role role)
{
    return (unsigned)role < TM_ROLE_MAX ? role_names[role] : "?";
}

int tm_role_parse(const char *name)
{
    for (int i = 0; i < TM_ROLE_MAX; i++)
        if (name && strcmp(name, role_names[i]) == 0)
            return i;
    return -1;
}

static void hex(const unsigned char *in, size_t n, char *out)
{
    static const char digits[] = "0123456789abcdef";

    for (size_t i = 0; i < n; i++) {
        out[2 * i] = digits[in[i] >> 4];
        out[2 * i + 1] = digits[in[i] & 15];
    }
    out[2 * n] = '\0';
}

static int random_secret(const char *prefix, char buf[TM_TOKEN_LEN + 1])
{
    unsigned char raw[32];

    if (RAND_bytes(raw, sizeof(raw)) != 1)
        return TM_ENOMEM;
    memcpy(buf, prefix, 4);
    hex(raw, sizeof(raw), buf + 4);
    OPENSSL_cleanse(raw, sizeof(raw));
    return 0;
}

int tm_token_generate(char buf[TM_TOKEN_LEN + 1])
{
    return random_secret(TM_TOKEN_PREFIX, buf);
}

int tm_enroll_secret_generate(char buf[TM_TOKEN_LEN + 1])
{
    return random_secret(TM_ENROLL_PREFIX, buf);
}

int tm_token_hash(const char *token, size_t len, char out[TM_TOKEN_HASH_LEN + 1])
{
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned int mdlen = 0;

    if (EVP_Digest(token, len, md, &mdlen, EVP_sha256(), NULL) != 1 || mdlen != 32)
        return TM_ENOMEM;
    hex(md, 32, out);
    return 0;
}

bool tm_token_hash_equal(const char *a, const char *b)
{
    if (strlen(a) != TM_TOKEN_HASH_LEN || strlen(b) != TM_TOKEN_HASH_LEN)
        return false;
    return CRYPTO_memcmp(a, b, TM_TOKEN_HASH_LEN) == 0;
}
