/*
 * tests/unit/core/cert_pem.h: keys and self-signed certificates made with
 * OpenSSL at test time, as PEM text, for the client certificate tests
 * (core/client_cert.c, providers/azure/arm_assertion.c, the config
 * loader).  Nothing is committed that could expire or leak.  Header-only:
 * each test includes it once.
 */
#ifndef TM_TEST_CERT_PEM_H
#define TM_TEST_CERT_PEM_H

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/bio.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>

static inline char *tp_bio_text(BIO *b)
{
    char *data = NULL, *out;
    long n = BIO_get_mem_data(b, &data);

    out = malloc((size_t)n + 1);
    if (out) {
        memcpy(out, data, (size_t)n);
        out[n] = '\0';
    }
    BIO_free(b);
    return out;
}

/* RSA 2048 (the identity platform's minimum), or EC P-256 with ec set. */
static inline EVP_PKEY *tp_key(int ec)
{
    return ec ? EVP_EC_gen("P-256") : EVP_RSA_gen(2048);
}

/* The key as PEM: PKCS#8 ("PRIVATE KEY"), or traditional ("RSA PRIVATE
 * KEY") with traditional set; encrypted with pass when pass is not NULL. */
static inline char *tp_key_pem(EVP_PKEY *k, int traditional, const char *pass)
{
    BIO *b = BIO_new(BIO_s_mem());
    const EVP_CIPHER *c = pass ? EVP_aes_256_cbc() : NULL;
    int plen = pass ? (int)strlen(pass) : 0;

    if (traditional)
        PEM_write_bio_PrivateKey_traditional(b, k, c, (unsigned char *)pass, plen, NULL, NULL);
    else
        PEM_write_bio_PKCS8PrivateKey(b, k, c, (char *)pass, plen, NULL, NULL);
    return tp_bio_text(b);
}

/* A self-signed certificate for k, CN=cn, valid from now for days days
 * (negative: it expired that many days ago). */
static inline X509 *tp_cert(EVP_PKEY *k, const char *cn, long days)
{
    X509 *x = X509_new();
    X509_NAME *n;

    X509_set_version(x, 2);
    ASN1_INTEGER_set(X509_get_serialNumber(x), 1);
    if (days >= 0) {
        X509_gmtime_adj(X509_getm_notBefore(x), 0);
        X509_gmtime_adj(X509_getm_notAfter(x), days * 86400);
    } else {
        X509_gmtime_adj(X509_getm_notBefore(x), (days - 10) * 86400);
        X509_gmtime_adj(X509_getm_notAfter(x), days * 86400);
    }
    X509_set_pubkey(x, k);
    n = X509_get_subject_name(x);
    X509_NAME_add_entry_by_txt(n, "CN", MBSTRING_ASC, (const unsigned char *)cn, -1, -1, 0);
    X509_set_issuer_name(x, n);
    X509_sign(x, k, EVP_sha256());
    return x;
}

static inline char *tp_cert_pem(X509 *x)
{
    BIO *b = BIO_new(BIO_s_mem());

    PEM_write_bio_X509(b, x);
    return tp_bio_text(b);
}

/* The concatenation of the NULL-terminated list of strings, malloc'd. */
static inline char *tp_cat(const char *first, ...)
{
    va_list ap;
    size_t n = 0;
    char *out;

    va_start(ap, first);
    for (const char *s = first; s; s = va_arg(ap, const char *))
        n += strlen(s);
    va_end(ap);
    out = malloc(n + 1);
    if (!out)
        return NULL;
    out[0] = '\0';
    va_start(ap, first);
    for (const char *s = first; s; s = va_arg(ap, const char *))
        strcat(out, s);
    va_end(ap);
    return out;
}

/* Write text to path; 0 or -1. */
static inline int tp_write(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    int r;

    if (!f)
        return -1;
    r = fputs(text, f) < 0 ? -1 : 0;
    return fclose(f) == 0 ? r : -1;
}

/* The second base64 line of a PEM block (a piece of the key material that
 * no log line or error may show). */
static inline void tp_key_line(const char *pem, char *buf, size_t size)
{
    const char *p = strchr(pem, '\n');

    buf[0] = '\0';
    if (!p)
        return;
    p = strchr(p + 1, '\n');
    if (!p)
        return;
    p++;
    snprintf(buf, size, "%.*s", (int)strcspn(p, "\n"), p);
}

#endif
