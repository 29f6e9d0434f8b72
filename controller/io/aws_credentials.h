/*
 * controller/io/aws_credentials.h: where AWS credentials, region and endpoint
 * come from, resolved as the AWS tools do.
 *
 * The chain, in order (config `credentials.source` may restrict it to one):
 *   1. env:           AWS_ACCESS_KEY_ID + AWS_SECRET_ACCESS_KEY (+ AWS_SESSION_TOKEN)
 *   2. file:          shared credentials file (opts->credentials_file, else
 *                     AWS_SHARED_CREDENTIALS_FILE, else ~/.aws/credentials),
 *                     section [PROFILE]; then the config file (opts->config_file,
 *                     else AWS_CONFIG_FILE, else ~/.aws/config), section
 *                     [profile PROFILE] or [default].  A key found in the
 *                     credentials file wins.  Profile: opts->profile, else
 *                     AWS_PROFILE, else "default".
 *   3. instance_role: IMDSv2 at opts->imds_endpoint, else
 *                     AWS_EC2_METADATA_SERVICE_ENDPOINT, else http://169.254.169.254:
 *                     PUT /latest/api/token, GET .../iam/security-credentials/
 *                     (role name), GET .../iam/security-credentials/ROLE (JSON).
 * With the full chain, a source that is absent (no variables, no file, no
 * profile) moves on to the next; a source that is present but broken
 * (malformed file, half the keys) is an error and stops the chain, because
 * silently falling through to another identity is worse than failing.
 *
 * Files are small local reads done synchronously inside the call that
 * starts a resolution (startup, `check aws`), bounded to 64 KiB.  IMDS is
 * asynchronous through tm_http on the loop.  Every secret key and session
 * token loaded is registered with tm_log_add_secret(); every copy we hold is
 * wiped with OPENSSL_cleanse() when released.  Error strings never contain
 * a secret: they name the source, the file and line, the key name.
 */
#ifndef TM_AWS_CREDENTIALS_H
#define TM_AWS_CREDENTIALS_H

#include <stddef.h>
#include <stdint.h>

#include <uv.h>

#include "core/sigv4.h"

struct tm_http;
struct tm_config_credentials;

enum tm_aws_cred_source {
    TM_AWS_CRED_CHAIN = 0,       /* "none" or absent: the full chain */
    TM_AWS_CRED_ENV,             /* "env" */
    TM_AWS_CRED_FILE,            /* "file" */
    TM_AWS_CRED_INSTANCE_ROLE,   /* "instance_role" */
    TM_AWS_CRED_SOURCE_MAX,
};

/* Parse a config `credentials.source` (NULL means the chain); TM_EINVAL if unknown. */
int tm_aws_cred_source_parse(const char *name, enum tm_aws_cred_source *ret_source);

/* Every pointer may be NULL (= the default described above); strings are
 * copied by the calls that take the struct, so it may live on the stack. */
struct tm_aws_credential_options {
    enum tm_aws_cred_source source;
    const char *credentials_file;  /* config credentials.file */
    const char *config_file;
    const char *profile;           /* config credentials.profile */
    const char *imds_endpoint;     /* "http://127.0.0.1:PORT" in tests */
    int64_t refresh_margin_ms;     /* refresh this long before Expiration; 0 = 5 min */
    long imds_timeout_ms;          /* per IMDS request; 0 = 2 s */
};

/* Fill opts from a provider's config credentials (c may be NULL).  opts
 * borrows c's strings.  Returns 0 or TM_EINVAL for an unknown source. */
int tm_aws_credential_options_from_config(const struct tm_config_credentials *c,
                                          struct tm_aws_credential_options *ret_opts);

/*
 * Called exactly once, on the loop, never from inside the call that started
 * the work.  status is 0 and cred valid, or a negative code with a message
 * in error (no secrets in it): TM_ENOTFOUND (no source in the chain had
 * credentials), TM_EINVAL (a malformed file or environment), TM_EAUTH (IMDS
 * refused us), TM_EBADREPLY (IMDS answered something we cannot use),
 * TM_EUNAVAIL / -ETIMEDOUT / -ECONNREFUSED (IMDS unreachable: retryable),
 * TM_ECANCELED (closed first).  cred and error are valid only during the
 * callback: copy what you keep (and wipe your copy when done).
 */
typedef void (*tm_aws_credentials_cb)(int status, const struct tm_aws_credentials *cred,
                                      const char *error, void *data);

/* One-shot resolution through the chain.  http may be NULL when the chain
 * cannot reach IMDS (source env or file); then instance_role is skipped. */
int tm_aws_credentials_resolve(uv_loop_t *loop, struct tm_http *http,
                               const struct tm_aws_credential_options *opts,
                               tm_aws_credentials_cb cb, void *data);

/*
 * Synchronous parts of the chain, for `check aws` and tests.  Return 0 and
 * fill ret_cred, TM_ENOTFOUND when the source is absent, TM_EINVAL when it is
 * broken; err (may be NULL) receives a message that names file:line.
 */
int tm_aws_credentials_from_env(struct tm_aws_credentials *ret_cred, char *err, size_t errsize);
int tm_aws_credentials_from_files(const struct tm_aws_credential_options *opts,
                                  struct tm_aws_credentials *ret_cred, char *err, size_t errsize);

/*
 * A cached credential source for a long-running provider.  The first get
 * resolves through the chain; credentials with an expiry (instance role)
 * are refreshed in the background refresh_margin_ms before they expire,
 * and a get inside the margin starts or joins a refresh.  If a refresh
 * fails while the cached set has not yet expired, get still answers with
 * the cached set (and the failure is logged); after expiry it fails.
 * Several gets during one refresh share it.
 */
struct tm_aws_credential_provider;

int tm_aws_credential_provider_create(uv_loop_t *loop, struct tm_http *http,
                                      const struct tm_aws_credential_options *opts,
                                      struct tm_aws_credential_provider **ret_provider);

/* Ask for credentials; cb fires later on the loop (even when cached). */
int tm_aws_credential_provider_get(struct tm_aws_credential_provider *p,
                                   tm_aws_credentials_cb cb, void *data);

/* Times a set was fetched (tests watch the background refresh). */
unsigned tm_aws_credential_provider_fetches(const struct tm_aws_credential_provider *p);

/*
 * Fail pending gets with TM_ECANCELED, stop the refresh timer and wipe the
 * cache.  The object is freed once its handles are closed and any IMDS
 * request in flight has come back (tm_http always calls back; closing the
 * tm_http cancels it at once); done (may be NULL) fires then.  Close the
 * provider before the tm_http it uses.
 */
void tm_aws_credential_provider_close(struct tm_aws_credential_provider *p,
                                      void (*done)(void *data), void *data);

/*
 * Region: config_region if set, else AWS_REGION, else AWS_DEFAULT_REGION,
 * else `region` of the profile in the config file (opts gives file and
 * profile; may be NULL).  TM_ENOTFOUND when none; TM_EINVAL for a bad file
 * or a region that does not fit out.
 */
int tm_aws_region_resolve(const char *config_region, const struct tm_aws_credential_options *opts,
                          char *out, size_t size, char *err, size_t errsize);

/*
 * EC2 endpoint URL: config_endpoint if set, else AWS_ENDPOINT_URL_EC2, else
 * AWS_ENDPOINT_URL, else "https://ec2.REGION.amazonaws.com".  Trailing '/'
 * removed.  TM_EINVAL if the result would not fit, has no http:// or
 * https:// scheme, or region is needed and is NULL/empty or not [a-z0-9-].
 */
int tm_aws_endpoint_resolve(const char *config_endpoint, const char *region, char *out,
                            size_t size);

#endif
