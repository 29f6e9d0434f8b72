/*
 * core/client_cert.c: a PEM file with an RSA key and its certificate
 * (see client_cert.h).
 */
#include "core/client_cert.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <openssl/bio.h>
#include <openssl/crypto.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>

#include "core/err.h"
#include "core/file.h"

#define MAX_CERTS 16

void tm_client_cert_release(struct tm_client_cert *cert)
{
    if (!cert)
        return;
    if (cert->key_pem)
        OPENSSL_clear_free(cert->key_pem, strlen(cert->key_pem));
    memset(cert, 0, sizeof(*cert));
}

struct blocks {
    EVP_PKEY *key;
    X509 *certs[MAX_CERTS];
    size_t ncerts;
    bool encrypted;               /* a password-protected key was seen */
    bool not_rsa;                 /* a key of another type was seen */
};

static void blocks_release(struct blocks *b)
{
    EVP_PKEY_free(b->key);
    for (size_t i = 0; i < b->ncerts; i++)
        X509_free(b->certs[i]);
    memset(b, 0, sizeof(*b));
}

/* One PEM block: a key, a certificate, or something we ignore (a CRL, DH
 * parameters).  TM_EINVAL with err when a key or certificate block does
 * not decode. */
static int take_block(struct blocks *b, const char *name, const char *header,
                      const unsigned char *der, long len, char *err, size_t errsize)
{
    const unsigned char *p = der;
    EVP_CIPHER_INFO cipher;

    if (strcmp(name, "CERTIFICATE") == 0) {
        X509 *x = d2i_X509(NULL, &p, len);

        if (!x) {
            snprintf(err, errsize, "a CERTIFICATE block does not decode (bad or truncated PEM)");
            return TM_EINVAL;
        }
        if (b->ncerts == MAX_CERTS) {
            X509_free(x);
            snprintf(err, errsize, "more than %d certificates", MAX_CERTS);
            return TM_EINVAL;
        }
        b->certs[b->ncerts++] = x;
        return 0;
    }
    if (strcmp(name, "ENCRYPTED PRIVATE KEY") == 0) {
        b->encrypted = true;
        return 0;
    }
    if (strcmp(name, "PRIVATE KEY") != 0 && strcmp(name, "RSA PRIVATE KEY") != 0) {
        /* "EC PRIVATE KEY" and friends: a key, but not one RS256 can use. */
        if (strstr(name, "PRIVATE KEY"))
            b->not_rsa = true;
        return 0;
    }
    /* Traditional encryption: "Proc-Type: 4,ENCRYPTED" plus DEK-Info. */
    if (header && *header && PEM_get_EVP_CIPHER_INFO((char *)header, &cipher) &&
        cipher.cipher) {
        b->encrypted = true;
        return 0;
    }
    if (b->key) {
        snprintf(err, errsize, "more than one private key");
        return TM_EINVAL;
    }
    b->key = d2i_AutoPrivateKey(NULL, &p, len);
    if (!b->key) {
        snprintf(err, errsize, "the private key does not decode (bad or truncated PEM)");
        return TM_EINVAL;
    }
    if (EVP_PKEY_base_id(b->key) != EVP_PKEY_RSA) {
        EVP_PKEY_free(b->key);
        b->key = NULL;
        b->not_rsa = true;
    }
    return 0;
}

/* Every block of the text; a block that is not complete PEM is refused
 * (PEM_read_bio answers "no start line" only at a clean end). */
static int read_blocks(const char *text, size_t len, struct blocks *b, char *err, size_t errsize)
{
    BIO *bio = BIO_new_mem_buf(text, (int)len);
    int r = 0;

    if (!bio)
        return TM_ENOMEM;
    ERR_clear_error();
    for (;;) {
        char *name = NULL, *header = NULL;
        unsigned char *der = NULL;
        long dlen = 0;
        unsigned long e;

        if (!PEM_read_bio(bio, &name, &header, &der, &dlen)) {
            e = ERR_peek_last_error();
            if (ERR_GET_LIB(e) != ERR_LIB_PEM || ERR_GET_REASON(e) != PEM_R_NO_START_LINE) {
                snprintf(err, errsize, "not complete PEM (truncated or bad base64)");
                r = TM_EINVAL;
            }
            break;
        }
        r = take_block(b, name, header, der, dlen, err, errsize);
        OPENSSL_free(name);
        OPENSSL_free(header);
        OPENSSL_clear_free(der, (size_t)dlen);
        if (r < 0)
            break;
    }
    ERR_clear_error();
    BIO_free(bio);
    return r;
}

static char *key_to_pem(EVP_PKEY *key)
{
    BIO *bio = BIO_new(BIO_s_secmem());
    char *data = NULL, *out = NULL;
    long n;

    if (!bio)
        return NULL;
    if (PEM_write_bio_PrivateKey(bio, key, NULL, NULL, 0, NULL, NULL) == 1) {
        n = BIO_get_mem_data(bio, &data);
        out = n > 0 ? malloc((size_t)n + 1) : NULL;
        if (out) {
            memcpy(out, data, (size_t)n);
            out[n] = '\0';
        }
    }
    BIO_free(bio);
    return out;
}

static int describe(X509 *x, struct tm_client_cert *c)
{
    unsigned char *der = NULL;
    int n = i2d_X509(x, &der);
    const ASN1_TIME *na = X509_get0_notAfter(x);
    struct tm tmv;
    int r = TM_ENOMEM;

    if (n <= 0)
        return TM_ENOMEM;
    if (EVP_Digest(der, (size_t)n, c->sha1, NULL, EVP_sha1(), NULL) == 1 &&
        EVP_Digest(der, (size_t)n, c->sha256, NULL, EVP_sha256(), NULL) == 1)
        r = 0;
    OPENSSL_free(der);
    X509_NAME_oneline(X509_get_subject_name(x), c->subject, (int)sizeof(c->subject));
    memset(&tmv, 0, sizeof(tmv));
    c->not_after = na && ASN1_TIME_to_tm(na, &tmv) == 1 ? (int64_t)timegm(&tmv) : 0;
    return r;
}

int tm_client_cert_parse(const char *text, size_t len, struct tm_client_cert *ret, char *err,
                         size_t errsize)
{
    struct blocks b = {0};
    struct tm_client_cert c = {0};
    X509 *leaf = NULL;
    int r;

    if (!text || !ret || len > TM_CLIENT_CERT_FILE_MAX) {
        snprintf(err, errsize, "no text, or larger than %d bytes", TM_CLIENT_CERT_FILE_MAX);
        return TM_EINVAL;
    }
    r = read_blocks(text, len, &b, err, errsize);
    if (r < 0)
        goto out;
    r = TM_EINVAL;
    if (!b.key) {
        snprintf(err, errsize, "%s",
                 b.encrypted ? "the private key is password-protected (not supported: export "
                               "it without a password, e.g. openssl pkey -in FILE)"
                 : b.not_rsa ? "the private key is not RSA (RS256 needs an RSA key)"
                             : "no private key in the file (expected PEM: a PRIVATE KEY and its "
                               "CERTIFICATE)");
        goto out;
    }
    if (b.ncerts == 0) {
        snprintf(err, errsize, "no certificate in the file (expected PEM: a PRIVATE KEY and "
                               "its CERTIFICATE)");
        goto out;
    }
    for (size_t i = 0; i < b.ncerts && !leaf; i++)
        if (X509_check_private_key(b.certs[i], b.key) == 1)
            leaf = b.certs[i];
    ERR_clear_error();
    if (!leaf) {
        snprintf(err, errsize, "the private key does not match the certificate%s",
                 b.ncerts > 1 ? "s" : "");
        goto out;
    }
    r = describe(leaf, &c);
    if (r == 0) {
        c.key_pem = key_to_pem(b.key);
        r = c.key_pem ? 0 : TM_ENOMEM;
    }
    if (r < 0)
        goto out;
    *ret = c;
out:
    blocks_release(&b);
    return r;
}

static int parse_any(const char *buf, size_t len, void *ret, char *why, size_t whylen)
{
    return tm_client_cert_parse(buf, len, ret, why, whylen);
}

int tm_client_cert_load(const char *path, struct tm_client_cert *ret, char *err, size_t errsize)
{
    return tm_file_parse_secret(path, TM_CLIENT_CERT_FILE_MAX, parse_any, ret, err, errsize);
}
