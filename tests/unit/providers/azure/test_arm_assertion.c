/*
 * tests/unit/providers/azure/test_arm_assertion.c: the client assertion of
 * a certificate credential (providers/azure/arm_assertion.c): header
 * {"alg":"RS256","typ":"JWT","x5t","x5t#S256"} with the certificate's
 * thumbprints, claims aud/exp/iss/sub/nbf/jti/iat as MSAL orders them, a
 * signature the certificate's public key verifies (OpenSSL EVP); the token
 * form around it; jti values that are UUIDs and differ; missing fields
 * refused; the GCP grant, signed by the same shared signer, unchanged.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cjson/cJSON.h>
#include <cmocka.h>

#include "../../core/cert_pem.h"
#include "core/client_cert.h"
#include "core/err.h"
#include "providers/azure/arm.h"
#include "providers/common/jwt.h"

static EVP_PKEY *key;
static X509 *cert;
static struct tm_client_cert cc;

static int setup(void **state)
{
    char *k, *c, *t, err[256];
    int r;

    (void)state;
    key = tp_key(0);
    cert = tp_cert(key, "tarmac-app", 30);
    k = tp_key_pem(key, 0, NULL);
    c = tp_cert_pem(cert);
    t = tp_cat(k, c, NULL);
    r = tm_client_cert_parse(t, strlen(t), &cc, err, sizeof(err));
    free(k);
    free(c);
    free(t);
    return r;
}

static int teardown(void **state)
{
    (void)state;
    tm_client_cert_release(&cc);
    X509_free(cert);
    EVP_PKEY_free(key);
    return 0;
}

/* base64url back to bytes (test side: OpenSSL's decoder after mapping). */
static unsigned char *unb64url(const char *s, size_t n, size_t *ret_len)
{
    size_t m = n + 4;
    char *t = calloc(1, m + 1);
    unsigned char *out = calloc(1, m);
    int len;

    memcpy(t, s, n);
    for (size_t i = 0; i < n; i++)
        t[i] = t[i] == '-' ? '+' : t[i] == '_' ? '/' : t[i];
    while (n % 4)
        t[n++] = '=';
    len = EVP_DecodeBlock(out, (unsigned char *)t, (int)n);
    assert_true(len >= 0);
    /* EVP_DecodeBlock counts the padding's zero bytes too. */
    for (size_t i = strlen(t); i > 0 && t[i - 1] == '='; i--)
        len--;
    free(t);
    *ret_len = (size_t)len;
    return out;
}

struct parts {
    char *header, *claims;
    unsigned char *sig;
    size_t siglen;
    size_t signed_len;           /* bytes of "h.c" */
};

static void split(const char *jwt, struct parts *p)
{
    const char *d1 = strchr(jwt, '.'), *d2 = d1 ? strchr(d1 + 1, '.') : NULL;
    size_t n;

    assert_non_null(d2);
    assert_null(strchr(d2 + 1, '.'));
    p->header = (char *)unb64url(jwt, (size_t)(d1 - jwt), &n);
    p->header[n] = '\0';
    p->claims = (char *)unb64url(d1 + 1, (size_t)(d2 - d1 - 1), &n);
    p->claims[n] = '\0';
    p->sig = unb64url(d2 + 1, strlen(d2 + 1), &p->siglen);
    p->signed_len = (size_t)(d2 - jwt);
}

static void parts_free(struct parts *p)
{
    free(p->header);
    free(p->claims);
    free(p->sig);
}

static struct tm_arm_assertion params(void)
{
    struct tm_arm_assertion a = {
        .client_id = "client-1",
        .audience = "https://login.microsoftonline.com/tenant-1/oauth2/v2.0/token",
        .jti = "0b6a3c2e-8f1d-4c55-9e1a-2d3f4b5c6d7e",
        .now = 1796000000,
        .sha1 = cc.sha1,
        .sha256 = cc.sha256,
        .key_pem = cc.key_pem,
    };
    return a;
}

static void test_header_claims_signature(void **state)
{
    struct tm_arm_assertion a = params();
    struct parts p;
    char *jwt = NULL, *x5t = tm_jwt_b64url(cc.sha1, 20), *x5t256 = tm_jwt_b64url(cc.sha256, 32);
    char want[512];
    EVP_MD_CTX *ctx = EVP_MD_CTX_new();
    unsigned char d[32];
    unsigned n = 0;

    (void)state;
    assert_int_equal(tm_arm_build_assertion(&a, &jwt), 0);
    split(jwt, &p);
    snprintf(want, sizeof(want), "{\"alg\":\"RS256\",\"typ\":\"JWT\",\"x5t\":\"%s\",\"x5t#S256\":\"%s\"}",
             x5t, x5t256);
    assert_string_equal(p.header, want);
    assert_string_equal(p.claims,
                        "{\"aud\":\"https://login.microsoftonline.com/tenant-1/oauth2/v2.0/token\","
                        "\"exp\":1796000600,\"iss\":\"client-1\",\"sub\":\"client-1\","
                        "\"nbf\":1796000000,\"jti\":\"0b6a3c2e-8f1d-4c55-9e1a-2d3f4b5c6d7e\","
                        "\"iat\":1796000000}");
    /* x5t is SHA-1 of the certificate's DER, as X509_digest computes it. */
    assert_int_equal(X509_digest(cert, EVP_sha1(), d, &n), 1);
    assert_int_equal(n, 20);
    {
        char *mine = tm_jwt_b64url(d, 20);

        assert_string_equal(mine, x5t);
        assert_int_equal(strlen(mine), 27);
        free(mine);
    }
    /* The certificate's public key verifies the signature... */
    assert_int_equal(p.siglen, 256);
    assert_int_equal(EVP_DigestVerifyInit(ctx, NULL, EVP_sha256(), NULL, X509_get0_pubkey(cert)), 1);
    assert_int_equal(EVP_DigestVerify(ctx, p.sig, p.siglen, (const unsigned char *)jwt,
                                      p.signed_len), 1);
    /* ... and not once a byte of the claims changes. */
    jwt[p.signed_len - 3] ^= 1;
    EVP_MD_CTX_reset(ctx);
    assert_int_equal(EVP_DigestVerifyInit(ctx, NULL, EVP_sha256(), NULL, X509_get0_pubkey(cert)), 1);
    assert_int_not_equal(EVP_DigestVerify(ctx, p.sig, p.siglen, (const unsigned char *)jwt,
                                          p.signed_len), 1);
    EVP_MD_CTX_free(ctx);
    parts_free(&p);
    free(jwt);

    /* Without the SHA-256 thumbprint the header has x5t only. */
    a.sha256 = NULL;
    assert_int_equal(tm_arm_build_assertion(&a, &jwt), 0);
    split(jwt, &p);
    assert_null(strstr(p.header, "x5t#S256"));
    assert_non_null(strstr(p.header, "\"x5t\""));
    parts_free(&p);
    free(jwt);
    free(x5t);
    free(x5t256);
}

static void test_form(void **state)
{
    char *body = NULL;

    (void)state;
    assert_int_equal(tm_arm_build_assertion_form("client-1", "aa.bb.cc", TM_ARM_SCOPE, &body), 0);
    assert_string_equal(body, "client_id=client-1&scope=https%3A%2F%2Fmanagement.azure.com%2F.default"
                              "&grant_type=client_credentials&client_assertion_type=urn%3Aietf%3A"
                              "params%3Aoauth%3Aclient-assertion-type%3Ajwt-bearer"
                              "&client_assertion=aa.bb.cc");
    assert_null(strstr(body, "client_secret"));
    free(body);
    assert_int_equal(tm_arm_build_assertion_form("client-1", "", TM_ARM_SCOPE, &body), TM_EINVAL);
}

static void test_jti(void **state)
{
    char a[37], b[37];

    (void)state;
    assert_int_equal(tm_arm_new_jti(a), 0);
    assert_int_equal(tm_arm_new_jti(b), 0);
    assert_int_equal(strlen(a), 36);
    assert_string_not_equal(a, b);
    assert_true(a[8] == '-' && a[13] == '-' && a[18] == '-' && a[23] == '-');
    assert_int_equal(a[14], '4');
    assert_non_null(strchr("89ab", a[19]));
}

static void test_refused(void **state)
{
    struct tm_arm_assertion a;
    char *jwt = NULL;

    (void)state;
    a = params();
    a.client_id = "";
    assert_int_equal(tm_arm_build_assertion(&a, &jwt), TM_EINVAL);
    a = params();
    a.audience = NULL;
    assert_int_equal(tm_arm_build_assertion(&a, &jwt), TM_EINVAL);
    a = params();
    a.jti = NULL;
    assert_int_equal(tm_arm_build_assertion(&a, &jwt), TM_EINVAL);
    a = params();
    a.sha1 = NULL;
    assert_int_equal(tm_arm_build_assertion(&a, &jwt), TM_EINVAL);
    a = params();
    a.key_pem = "-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n";
    assert_int_equal(tm_arm_build_assertion(&a, &jwt), TM_EINVAL);
    assert_null(jwt);
    assert_string_equal(tm_arm_auth_name(TM_ARM_AUTH_CERTIFICATE), "client_certificate");
}

/* The shared signer: the GCP grant keeps its bytes (google-auth-library's
 * header, its claim order), and a password-protected key is refused, not
 * prompted for. */
static void test_shared_signer(void **state)
{
    char *enc = tp_key_pem(key, 0, "pw-1234"), *jwt = NULL;
    struct parts p;

    (void)state;
    assert_int_equal(tm_jwt_sign_rs256(cc.key_pem, "{\"alg\":\"RS256\"}", "{\"a\":1}", &jwt), 0);
    split(jwt, &p);
    assert_string_equal(p.header, "{\"alg\":\"RS256\"}");
    assert_string_equal(p.claims, "{\"a\":1}");
    parts_free(&p);
    free(jwt);
    jwt = NULL;
    assert_false(tm_jwt_rs256_key_ok(enc));
    assert_int_equal(tm_jwt_sign_rs256(enc, "{}", "{}", &jwt), TM_EINVAL);
    assert_null(jwt);
    assert_true(tm_jwt_rs256_key_ok(cc.key_pem));
    free(enc);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_header_claims_signature),
        cmocka_unit_test(test_form),
        cmocka_unit_test(test_jti),
        cmocka_unit_test(test_refused),
        cmocka_unit_test(test_shared_signer),
    };

    return cmocka_run_group_tests(tests, setup, teardown);
}
