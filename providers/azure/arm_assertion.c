/*
 * providers/azure/arm_assertion.c: the client assertion a certificate
 * credential sends to the identity platform instead of a secret (see arm.h;
 * Microsoft identity platform "certificate credentials": a JWT with
 * aud/iss/sub/jti/nbf/exp, x5t naming the certificate).  Pure: the signer
 * is providers/common/jwt.c, the clock and the jti come from the caller.
 */
#include "providers/azure/arm.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>
#include <openssl/crypto.h>
#include <openssl/rand.h>

#include "core/err.h"
#include "providers/common/jwt.h"

static bool set(const char *s) { return s && *s; }

const char *tm_arm_auth_name(enum tm_arm_auth_mode auth)
{
    static const char *const names[TM_ARM_AUTH_MAX] = {
        [TM_ARM_AUTH_SECRET] = "client_secret",
        [TM_ARM_AUTH_MANAGED_IDENTITY] = "managed_identity",
        [TM_ARM_AUTH_CERTIFICATE] = "client_certificate",
    };

    return (unsigned)auth < TM_ARM_AUTH_MAX ? names[auth] : "unknown";
}

int tm_arm_new_jti(char buf[37])
{
    unsigned char b[16];

    if (RAND_bytes(b, sizeof(b)) != 1)
        return TM_EUNAVAIL;
    b[6] = (unsigned char)((b[6] & 0x0f) | 0x40); /* version 4 */
    b[8] = (unsigned char)((b[8] & 0x3f) | 0x80); /* RFC 4122 variant */
    snprintf(buf, 37, "%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x",
             b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12],
             b[13], b[14], b[15]);
    return 0;
}

static cJSON *header_of(const struct tm_arm_assertion *a)
{
    cJSON *h = cJSON_CreateObject();
    char *x5t = tm_jwt_b64url(a->sha1, 20);
    char *x5t256 = a->sha256 ? tm_jwt_b64url(a->sha256, 32) : NULL;
    bool ok = h && x5t && (!a->sha256 || x5t256);

    ok = ok && cJSON_AddStringToObject(h, "alg", "RS256") &&
         cJSON_AddStringToObject(h, "typ", "JWT") && cJSON_AddStringToObject(h, "x5t", x5t);
    if (ok && x5t256)
        ok = cJSON_AddStringToObject(h, "x5t#S256", x5t256) != NULL;
    free(x5t);
    free(x5t256);
    if (!ok) {
        cJSON_Delete(h);
        return NULL;
    }
    return h;
}

static cJSON *claims_of(const struct tm_arm_assertion *a)
{
    cJSON *c = cJSON_CreateObject();

    if (c && cJSON_AddStringToObject(c, "aud", a->audience) &&
        cJSON_AddNumberToObject(c, "exp", (double)(a->now + TM_ARM_ASSERTION_LIFETIME_S)) &&
        cJSON_AddStringToObject(c, "iss", a->client_id) &&
        cJSON_AddStringToObject(c, "sub", a->client_id) &&
        cJSON_AddNumberToObject(c, "nbf", (double)a->now) &&
        cJSON_AddStringToObject(c, "jti", a->jti) &&
        cJSON_AddNumberToObject(c, "iat", (double)a->now))
        return c;
    cJSON_Delete(c);
    return NULL;
}

int tm_arm_build_assertion(const struct tm_arm_assertion *a, char **ret_jwt)
{
    cJSON *h = NULL, *c = NULL;
    char *hs = NULL, *cs = NULL;
    int r = TM_ENOMEM;

    if (!a || !set(a->client_id) || !set(a->audience) || !set(a->jti) || !a->sha1 ||
        !set(a->key_pem) || a->now <= 0 || !ret_jwt)
        return TM_EINVAL;
    h = header_of(a);
    c = claims_of(a);
    hs = h ? cJSON_PrintUnformatted(h) : NULL;
    cs = c ? cJSON_PrintUnformatted(c) : NULL;
    if (hs && cs)
        r = tm_jwt_sign_rs256(a->key_pem, hs, cs, ret_jwt);
    cJSON_Delete(h);
    cJSON_Delete(c);
    free(hs);
    free(cs);
    return r;
}
