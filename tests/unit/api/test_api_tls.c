/*
 * tests/unit/api/test_api_tls.c: the API's TLS context (controller/api/tls.c)
 * without a server or the openssl CLI: keys and a self-signed certificate
 * are made here with OpenSSL, written as PEM files to a scratch directory,
 * and loaded.  What a good pair gives (TLS 1.2 minimum, ALPN h2 then
 * http/1.1, checked by an in-memory handshake) and how each bad file is
 * refused: by key name and path, with a reason, never with key material.
 * tests/integration/api_tls.sh covers the same on the real binary.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>

#include "controller/api/tls.h"
#include "core/err.h"

static char dir[] = "/tmp/tarmac-tls-unit.XXXXXX";
static char cert_pem[256], key_pem[256], other_key_pem[256], enc_key_pem[256], junk_pem[256],
    missing_pem[256];

static void path(char *buf, const char *name)
{
    snprintf(buf, 256, "%s/%s", dir, name);
}

static void write_key(const char *file, EVP_PKEY *key, const EVP_CIPHER *cipher)
{
    FILE *f = fopen(file, "w");

    assert_non_null(f);
    assert_int_equal(PEM_write_PrivateKey(f, key, cipher, (unsigned char *)"passphrase", 10, NULL,
                                          NULL), 1);
    fclose(f);
}

static int setup(void **state)
{
    EVP_PKEY *key = EVP_EC_gen("P-256"), *other = EVP_EC_gen("P-256");
    X509 *x = X509_new();
    X509_NAME *name;
    FILE *f;
    (void)state;

    assert_non_null(mkdtemp(dir));
    path(cert_pem, "cert.pem");
    path(key_pem, "key.pem");
    path(other_key_pem, "other.pem");
    path(enc_key_pem, "encrypted.pem");
    path(junk_pem, "junk.pem");
    path(missing_pem, "missing.pem");
    assert_non_null(key);
    assert_non_null(other);
    assert_non_null(x);
    X509_set_version(x, 2);
    ASN1_INTEGER_set(X509_get_serialNumber(x), 1);
    X509_gmtime_adj(X509_getm_notBefore(x), -60);
    X509_gmtime_adj(X509_getm_notAfter(x), 3600);
    X509_set_pubkey(x, key);
    name = X509_get_subject_name(x);
    X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC, (const unsigned char *)"127.0.0.1", -1, -1, 0);
    X509_set_issuer_name(x, name);
    assert_true(X509_sign(x, key, EVP_sha256()) > 0);
    f = fopen(cert_pem, "w");
    assert_non_null(f);
    assert_int_equal(PEM_write_X509(f, x), 1);
    fclose(f);
    write_key(key_pem, key, NULL);
    write_key(other_key_pem, other, NULL);
    write_key(enc_key_pem, key, EVP_aes_256_cbc());
    f = fopen(junk_pem, "w");
    assert_non_null(f);
    fputs("this is not a PEM file\n", f);
    fclose(f);
    X509_free(x);
    EVP_PKEY_free(key);
    EVP_PKEY_free(other);
    return 0;
}

static int teardown(void **state)
{
    const char *names[] = {cert_pem, key_pem, other_key_pem, enc_key_pem, junk_pem};
    (void)state;

    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
        unlink(names[i]);
    rmdir(dir);
    return 0;
}

/* The base64 lines of the key file: none may appear in an error. */
static void assert_no_key_in(const char *text, const char *key_file)
{
    char line[256];
    FILE *f = fopen(key_file, "r");

    assert_non_null(f);
    assert_null(strstr(text, "PRIVATE KEY"));
    while (fgets(line, sizeof(line), f)) {
        line[strcspn(line, "\n")] = '\0';
        if (strlen(line) >= 16 && !strstr(line, "-----"))
            assert_null(strstr(text, line));
    }
    fclose(f);
}

/* load must fail naming key_name and file, the reason containing reason. */
static void assert_refused(const char *cert, const char *key, const char *key_name,
                           const char *file, const char *reason)
{
    SSL_CTX *ctx = (SSL_CTX *)0x1;
    char err[512], want[300];

    assert_int_equal(tm_api_tls_load(cert, key, &ctx, err, sizeof(err)), TM_EINVAL);
    assert_ptr_equal(ctx, (SSL_CTX *)0x1); /* untouched on failure */
    snprintf(want, sizeof(want), "%s: %s: ", key_name, file);
    if (strncmp(err, want, strlen(want)) != 0)
        fail_msg("error \"%s\" does not start with \"%s\"", err, want);
    if (!strstr(err, reason))
        fail_msg("error \"%s\" lacks \"%s\"", err, reason);
    assert_no_key_in(err, key_pem);
    assert_no_key_in(err, other_key_pem);
}

/* Handshake a client offering protos (ALPN wire format) with server_ctx,
 * in memory; returns the protocol chosen ("" for none). */
static void handshake(SSL_CTX *server_ctx, const unsigned char *protos, unsigned len, char *chosen,
                      size_t size)
{
    SSL_CTX *client_ctx = SSL_CTX_new(TLS_client_method());
    SSL *client, *server;
    BIO *cb, *sb;
    const unsigned char *p = NULL;
    unsigned plen = 0;
    int done = 0;

    assert_non_null(client_ctx);
    SSL_CTX_set_verify(client_ctx, SSL_VERIFY_NONE, NULL); /* trust is the integration test's */
    assert_int_equal(SSL_CTX_set_alpn_protos(client_ctx, protos, len), 0);
    client = SSL_new(client_ctx);
    server = SSL_new(server_ctx);
    assert_int_equal(BIO_new_bio_pair(&cb, 0, &sb, 0), 1);
    SSL_set_bio(client, cb, cb);
    SSL_set_bio(server, sb, sb);
    SSL_set_connect_state(client);
    SSL_set_accept_state(server);
    for (int i = 0; i < 100 && done != 3; i++) {
        if (!(done & 1) && SSL_do_handshake(client) == 1)
            done |= 1;
        if (!(done & 2) && SSL_do_handshake(server) == 1)
            done |= 2;
    }
    assert_int_equal(done, 3);
    SSL_get0_alpn_selected(server, &p, &plen);
    snprintf(chosen, size, "%.*s", (int)plen, p ? (const char *)p : "");
    SSL_free(client);
    SSL_free(server);
    SSL_CTX_free(client_ctx);
}

static void test_good_pair(void **state)
{
    SSL_CTX *ctx = NULL;
    char err[512] = "", chosen[32];
    static const unsigned char both[] = "\x08http/1.1\x02h2", http1[] = "\x08http/1.1";
    (void)state;

    assert_int_equal(tm_api_tls_load(cert_pem, key_pem, &ctx, err, sizeof(err)), 0);
    assert_non_null(ctx);
    assert_int_equal(SSL_CTX_get_min_proto_version(ctx), TLS1_2_VERSION);
    /* The server's order wins: h2 though the client listed it last. */
    handshake(ctx, both, sizeof(both) - 1, chosen, sizeof(chosen));
    assert_string_equal(chosen, "h2");
    handshake(ctx, http1, sizeof(http1) - 1, chosen, sizeof(chosen));
    assert_string_equal(chosen, "http/1.1");
    SSL_CTX_free(ctx);
}

static void test_refused(void **state)
{
    (void)state;
    assert_refused(cert_pem, other_key_pem, "api.tls_key_file", other_key_pem,
                   "does not match the certificate in");
    assert_refused(missing_pem, key_pem, "api.tls_cert_file", missing_pem,
                   "No such file or directory");
    assert_refused(cert_pem, missing_pem, "api.tls_key_file", missing_pem,
                   "No such file or directory");
    assert_refused(junk_pem, key_pem, "api.tls_cert_file", junk_pem, "not a PEM certificate chain");
    assert_refused(cert_pem, junk_pem, "api.tls_key_file", junk_pem,
                   "not an unencrypted PEM private key");
    assert_refused(cert_pem, enc_key_pem, "api.tls_key_file", enc_key_pem,
                   "not an unencrypted PEM private key");
    /* The key where the certificate belongs: named, never shown. */
    assert_refused(key_pem, key_pem, "api.tls_cert_file", key_pem, "not a PEM certificate chain");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_good_pair),
        cmocka_unit_test(test_refused),
    };

    return cmocka_run_group_tests(tests, setup, teardown);
}
