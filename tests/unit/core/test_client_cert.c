/*
 * tests/unit/core/test_client_cert.c: core/client_cert.c reads a PEM file of
 * an RSA key and its certificate: the thumbprints are the certificate's
 * DER digests, the key it hands back signs what the certificate verifies;
 * a chain after the leaf is fine; and it refuses, saying why without
 * quoting the key: no key, no certificate, a key that does not match, a
 * password-protected key, an EC key, truncated PEM, a corrupt block, an
 * unreadable path.  Links tarmac_core alone.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "cert_pem.h"
#include "core/client_cert.h"
#include "core/err.h"

struct fx {
    EVP_PKEY *key, *other;
    X509 *cert, *other_cert;
    char *key_pem, *cert_pem, *other_key_pem, *other_cert_pem;
};

static struct fx fx;

static int setup(void **state)
{
    (void)state;
    fx.key = tp_key(0);
    fx.other = tp_key(0);
    fx.cert = tp_cert(fx.key, "tarmac-app", 30);
    fx.other_cert = tp_cert(fx.other, "someone-else", 30);
    fx.key_pem = tp_key_pem(fx.key, 0, NULL);
    fx.cert_pem = tp_cert_pem(fx.cert);
    fx.other_key_pem = tp_key_pem(fx.other, 0, NULL);
    fx.other_cert_pem = tp_cert_pem(fx.other_cert);
    return fx.key && fx.other && fx.key_pem && fx.cert_pem ? 0 : -1;
}

static int teardown(void **state)
{
    (void)state;
    EVP_PKEY_free(fx.key);
    EVP_PKEY_free(fx.other);
    X509_free(fx.cert);
    X509_free(fx.other_cert);
    free(fx.key_pem);
    free(fx.cert_pem);
    free(fx.other_key_pem);
    free(fx.other_cert_pem);
    return 0;
}

static int parse(const char *text, struct tm_client_cert *c, char *err, size_t errsize)
{
    err[0] = '\0';
    memset(c, 0, sizeof(*c));
    return tm_client_cert_parse(text, strlen(text), c, err, errsize);
}

/* Refused, the reason holding want and no line of the key. */
static void expect_refused(const char *text, const char *want)
{
    struct tm_client_cert c;
    char err[512], line[128];

    assert_int_equal(parse(text, &c, err, sizeof(err)), TM_EINVAL);
    if (!strstr(err, want))
        fail_msg("reason \"%s\" does not say \"%s\"", err, want);
    tp_key_line(fx.key_pem, line, sizeof(line));
    assert_true(strlen(line) > 40);
    assert_null(strstr(err, line));
    assert_null(c.key_pem);         /* *ret untouched on failure */
}

static void test_good(void **state)
{
    struct tm_client_cert c;
    unsigned char sha1[20], sha256[32];
    unsigned n = 0;
    char err[256];
    char *text = tp_cat(fx.key_pem, fx.cert_pem, NULL);

    (void)state;
    assert_int_equal(parse(text, &c, err, sizeof(err)), 0);
    assert_int_equal(X509_digest(fx.cert, EVP_sha1(), sha1, &n), 1);
    assert_memory_equal(c.sha1, sha1, 20);
    assert_int_equal(X509_digest(fx.cert, EVP_sha256(), sha256, &n), 1);
    assert_memory_equal(c.sha256, sha256, 32);
    assert_non_null(strstr(c.subject, "CN=tarmac-app"));
    assert_true(c.not_after > (int64_t)time(NULL) + 29 * 86400);
    assert_non_null(strstr(c.key_pem, "-----BEGIN PRIVATE KEY-----"));
    /* The key handed back is the certificate's. */
    {
        BIO *b = BIO_new_mem_buf(c.key_pem, -1);
        EVP_PKEY *k = PEM_read_bio_PrivateKey(b, NULL, NULL, NULL);

        assert_non_null(k);
        assert_int_equal(X509_check_private_key(fx.cert, k), 1);
        EVP_PKEY_free(k);
        BIO_free(b);
    }
    tm_client_cert_release(&c);
    assert_null(c.key_pem);
    tm_client_cert_release(&c);     /* twice is fine */
    free(text);

    /* Certificate first, traditional RSA key after, a chain certificate
     * in between: the leaf is the one matching the key. */
    {
        char *trad = tp_key_pem(fx.key, 1, NULL);

        text = tp_cat(fx.other_cert_pem, fx.cert_pem, "\n", trad, NULL);
        assert_int_equal(parse(text, &c, err, sizeof(err)), 0);
        assert_memory_equal(c.sha256, sha256, 32);
        tm_client_cert_release(&c);
        free(text);
        free(trad);
    }
}

static void test_refused(void **state)
{
    char *t;

    (void)state;
    expect_refused("", "no private key");
    expect_refused("hello, not PEM at all\n", "no private key");
    expect_refused(fx.cert_pem, "no private key");
    expect_refused(fx.key_pem, "no certificate");

    t = tp_cat(fx.key_pem, fx.other_cert_pem, NULL);
    expect_refused(t, "does not match");
    free(t);

    {
        char *enc8 = tp_key_pem(fx.key, 0, "pw-1234"), *enct = tp_key_pem(fx.key, 1, "pw-1234");

        assert_non_null(strstr(enc8, "ENCRYPTED PRIVATE KEY"));
        assert_non_null(strstr(enct, "Proc-Type: 4,ENCRYPTED"));
        t = tp_cat(enc8, fx.cert_pem, NULL);
        expect_refused(t, "password-protected");
        free(t);
        t = tp_cat(enct, fx.cert_pem, NULL);
        expect_refused(t, "password-protected");
        free(t);
        free(enc8);
        free(enct);
    }
    {
        EVP_PKEY *ec = tp_key(1);
        X509 *ecx = tp_cert(ec, "ec", 30);
        char *ekp = tp_key_pem(ec, 0, NULL), *ecp = tp_cert_pem(ecx);

        t = tp_cat(ekp, ecp, NULL);
        expect_refused(t, "not RSA");
        free(t);
        free(ekp);
        free(ecp);
        X509_free(ecx);
        EVP_PKEY_free(ec);
    }
    /* Truncated in the middle of the certificate, and of the key. */
    t = tp_cat(fx.key_pem, fx.cert_pem, NULL);
    t[strlen(fx.key_pem) + strlen(fx.cert_pem) / 2] = '\0';
    expect_refused(t, "not complete PEM");
    t[strlen(fx.key_pem) / 2] = '\0';
    expect_refused(t, "not complete PEM");
    free(t);
    /* A block whose base64 is fine but whose DER is not a certificate. */
    expect_refused("-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n",
                   "CERTIFICATE block does not decode");
    t = tp_cat(fx.key_pem, fx.key_pem, fx.cert_pem, NULL);
    expect_refused(t, "more than one private key");
    free(t);
}

static void test_load(void **state)
{
    struct tm_client_cert c = {0};
    char path[128], err[512];
    char *t = tp_cat(fx.key_pem, fx.cert_pem, NULL);

    (void)state;
    snprintf(path, sizeof(path), "/tmp/tm-client-cert.%d.pem", (int)getpid());
    assert_int_equal(tp_write(path, t), 0);
    assert_int_equal(tm_client_cert_load(path, &c, err, sizeof(err)), 0);
    tm_client_cert_release(&c);
    assert_int_equal(tp_write(path, fx.key_pem), 0);
    assert_int_equal(tm_client_cert_load(path, &c, err, sizeof(err)), TM_EINVAL);
    assert_true(strncmp(err, path, strlen(path)) == 0);
    assert_non_null(strstr(err, "no certificate"));
    unlink(path);
    assert_int_equal(tm_client_cert_load(path, &c, err, sizeof(err)), TM_EINVAL);
    assert_non_null(strstr(err, "could not open"));
    free(t);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_good),
        cmocka_unit_test(test_refused),
        cmocka_unit_test(test_load),
    };

    return cmocka_run_group_tests(tests, setup, teardown);
}
