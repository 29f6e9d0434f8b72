/*
 * core/client_cert.h: a client certificate credential, one PEM file that
 * holds an RSA private key and its certificate (the form `az login
 * --service-principal --certificate` and @azure/identity's
 * ClientCertificateCredential take).
 *
 * The file is read with OpenSSL's PEM reader block by block: every
 * certificate is kept until the one whose public key matches the private
 * key is found (a chain after the leaf is allowed), anything else is
 * ignored.  Refused, with a reason that never quotes the key:
 *   - a file that cannot be read, or larger than TM_CLIENT_CERT_FILE_MAX;
 *   - a block that is not complete PEM (truncated, bad base64);
 *   - no private key, a password-protected one (not supported: export it
 *     without a password), or one that is not RSA (RS256 needs RSA);
 *   - no certificate, or none that matches the key.
 *
 * Here because the configuration loader refuses a bad file at load, under
 * the key that names it, and the providers read the same file with the
 * same rules.  No I/O library; OpenSSL only.
 */
#ifndef TM_CLIENT_CERT_H
#define TM_CLIENT_CERT_H

#include <stddef.h>
#include <stdint.h>

#define TM_CLIENT_CERT_FILE_MAX (256 * 1024)

struct tm_client_cert {
    /* The private key re-encoded as unencrypted PKCS#8 PEM: a secret,
     * wiped by release.  Not registered with tm_log_add_secret() here:
     * the log's registry holds each string once, so whoever keeps a copy
     * for long (the ARM client) registers and removes its own. */
    char *key_pem;
    unsigned char sha1[20];       /* SHA-1 of the certificate's DER (JWT x5t) */
    unsigned char sha256[32];     /* SHA-256 of it (x5t#S256) */
    char subject[256];            /* the certificate's subject, one line */
    int64_t not_after;            /* the certificate's notAfter, Unix seconds */
};

/*
 * Parse the file's text.  0 and *ret (release it), TM_EINVAL with err
 * saying what is wrong, or TM_ENOMEM.  *ret is written only on success.
 */
int tm_client_cert_parse(const char *text, size_t len, struct tm_client_cert *ret, char *err,
                         size_t errsize);

/* The same from a file; err starts with the path.  The text read is wiped
 * before it is freed. */
int tm_client_cert_load(const char *path, struct tm_client_cert *ret, char *err, size_t errsize);

/* Wipe and free; NULL and a released struct are fine. */
void tm_client_cert_release(struct tm_client_cert *cert);

#endif
