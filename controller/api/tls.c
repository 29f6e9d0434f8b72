/*
 * controller/api/tls.c: the API's TLS context.  See api/tls.h.
 *
 * The key is parsed here rather than by SSL_CTX_use_PrivateKey_file so
 * that the three ways a key file goes wrong (unreadable, not a key, not
 * this certificate's key) each get their own message: OpenSSL's file
 * loader would report a mismatch as a failure to use the file.
 */
#include "controller/api/tls.h"

#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include <h2o.h>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/x509.h>

#include "core/err.h"

/* h2 first: a client offering both gets HTTP/2.  h2o's accept looks at
 * the protocol chosen and hands the connection to its HTTP/2 or HTTP/1
 * side; no ALPN at all means HTTP/1.1.  h2o keeps this pointer. */
static const h2o_iovec_t alpn_protocols[] = {
    {H2O_STRLIT("h2")},
    {H2O_STRLIT("http/1.1")},
    {NULL, 0},
};

/* OpenSSL's reason for the oldest error in its queue (the cause; later
 * entries say which call gave up), then the queue emptied.  System errors
 * (no such file, permission) have no reason string in OpenSSL 3: their
 * code is errno, and they are given as they are.  Anything else means the
 * contents were wrong, and OpenSSL's word alone ("no start line",
 * "unsupported", "bad decrypt") would not say what was expected. */
static void ssl_reason(const char *expected, char *buf, size_t size)
{
    unsigned long e = ERR_peek_error();
    const char *reason;
    char other[256];

    if (e != 0 && ERR_SYSTEM_ERROR(e)) {
        snprintf(buf, size, "%s", strerror(ERR_GET_REASON(e)));
    } else {
        reason = e ? ERR_reason_error_string(e) : "unknown error";
        if (!reason) {
            ERR_error_string_n(e, other, sizeof(other));
            reason = other;
        }
        snprintf(buf, size, "not %s (OpenSSL: %s)", expected, reason);
    }
    ERR_clear_error();
}

/* Refuse to prompt for a passphrase: serve has no terminal to ask on, and
 * OpenSSL's default would block reading one. */
static int no_passphrase(char *buf, int size, int rwflag, void *data)
{
    (void)buf;
    (void)size;
    (void)rwflag;
    (void)data;
    return 0;
}

static int fail(const char *key, const char *path, char *err, size_t errsize)
{
    bool is_key = strcmp(key, "api.tls_key_file") == 0;
    char reason[320];

    ssl_reason(is_key ? "an unencrypted PEM private key" : "a PEM certificate chain", reason,
               sizeof(reason));
    snprintf(err, errsize, "%s: %s: %s", key, path, reason);
    return TM_EINVAL;
}

static int load_key(const char *path, EVP_PKEY **ret_key, char *err, size_t errsize)
{
    BIO *bio = BIO_new_file(path, "r");
    EVP_PKEY *key = NULL;

    if (bio)
        key = PEM_read_bio_PrivateKey(bio, NULL, no_passphrase, NULL);
    BIO_free(bio);
    if (!key)
        return fail("api.tls_key_file", path, err, errsize);
    *ret_key = key;
    return 0;
}

int tm_api_tls_load(const char *cert_file, const char *key_file, SSL_CTX **ret_ctx, char *err,
                    size_t errsize)
{
    SSL_CTX *ctx = NULL;
    EVP_PKEY *key = NULL;
    X509 *leaf;
    int r = TM_EINVAL;

    if (!cert_file || !key_file || !ret_ctx) {
        snprintf(err, errsize, "api.tls_cert_file: TLS needs both a certificate and a key");
        return TM_EINVAL;
    }
    ERR_clear_error();
    ctx = SSL_CTX_new(TLS_server_method());
    if (!ctx) {
        snprintf(err, errsize, "api.tls_cert_file: %s: could not create a TLS context", cert_file);
        goto out;
    }
    if (SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION) != 1) {
        ERR_clear_error();
        snprintf(err, errsize, "api.tls_cert_file: %s: could not require TLS 1.2", cert_file);
        goto out;
    }
    /* No TLS compression (CRIME); the server picks the cipher. */
    SSL_CTX_set_options(ctx, SSL_OP_NO_COMPRESSION | SSL_OP_CIPHER_SERVER_PREFERENCE);
    SSL_CTX_set_default_passwd_cb(ctx, no_passphrase);
    if (SSL_CTX_use_certificate_chain_file(ctx, cert_file) != 1) {
        r = fail("api.tls_cert_file", cert_file, err, errsize);
        goto out;
    }
    r = load_key(key_file, &key, err, errsize);
    if (r < 0)
        goto out;
    r = TM_EINVAL;
    leaf = SSL_CTX_get0_certificate(ctx);
    if (!leaf || X509_check_private_key(leaf, key) != 1) {
        ERR_clear_error();
        snprintf(err, errsize, "api.tls_key_file: %s: does not match the certificate in %s",
                 key_file, cert_file);
        goto out;
    }
    if (SSL_CTX_use_PrivateKey(ctx, key) != 1 || SSL_CTX_check_private_key(ctx) != 1) {
        r = fail("api.tls_key_file", key_file, err, errsize);
        goto out;
    }
    h2o_ssl_register_alpn_protocols(ctx, alpn_protocols);
    *ret_ctx = ctx;
    ctx = NULL;
    r = 0;
out:
    EVP_PKEY_free(key);
    SSL_CTX_free(ctx);
    return r;
}
