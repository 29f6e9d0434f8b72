/*
 * controller/api/tls.h: the API's TLS context, built once at start from
 * the configured PEM files (api.tls_cert_file, api.tls_key_file).
 *
 * TLS 1.2 at least, ALPN offering h2 then http/1.1 (a client without ALPN
 * gets HTTP/1.1).  The files are read before the loop runs, so reading
 * them may block; nothing here runs on the loop afterwards.  There is no
 * reload: a new certificate takes a restart.
 */
#ifndef TM_API_TLS_H
#define TM_API_TLS_H

#include <stddef.h>

#include <openssl/ssl.h>

/*
 * Load the certificate chain and the private key and check that they
 * match.  Returns 0 and *ret_ctx (release with SSL_CTX_free), or TM_EINVAL
 * with err set to one line naming the key and the file at fault:
 *   api.tls_cert_file: /etc/tarmac/cert.pem: no start line
 *   api.tls_key_file: /etc/tarmac/key.pem: does not match the certificate in /etc/tarmac/cert.pem
 * The reason is OpenSSL's, never the file's contents.  An encrypted key is
 * refused (there is no one to ask for its passphrase).  Non-logging.
 */
int tm_api_tls_load(const char *cert_file, const char *key_file, SSL_CTX **ret_ctx, char *err,
                    size_t errsize);

#endif
