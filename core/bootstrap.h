/*
 * core/bootstrap.h: a node's bootstrap template (pool key `bootstrap`), filled
 * per launch with {{controller_url}}, {{ca_pem}}, {{enroll_secret}},
 * {{node_id}} and {{pool}}.  Pure text: the daemon fills it
 * (controller/daemon/calls.c); config load checks that no filling can pass
 * EC2's user data limit once base64-encoded.  The filled text carries the
 * enrollment secret: callers wipe it (OPENSSL_cleanse) and never log it.
 * A bootstrap starts `tarmac agent` as root, with a work folder whose
 * parents others may search: the agent runs each job under a user of its
 * own and sets up their folders itself (docs/isolation.md).
 */
#ifndef TM_BOOTSTRAP_H
#define TM_BOOTSTRAP_H

#include <stddef.h>

/* EC2 RunInstances: UserData at most 16 KB after base64. */
#define TM_BOOTSTRAP_USERDATA_MAX 16384
/* The longest value counted for a placeholder other than {{ca_pem}}, whose
 * file's size is known (controller URL, secret, node id, pool name). */
#define TM_BOOTSTRAP_VALUE_MAX 512

struct tm_bootstrap_values {
    const char *controller_url;
    const char *ca_pem;          /* "" when none */
    const char *enroll_secret;
    const char *node_id;
    const char *pool;
};

/* Fill tmpl[0..len) into a new heap buffer (*ret, NUL-terminated, free()
 * after wiping; *ret_len bytes).  An unknown {{name}} is copied as is.
 * 0 or TM_ENOMEM. */
int tm_bootstrap_fill(const char *tmpl, size_t len, const struct tm_bootstrap_values *v,
                      char **ret, size_t *ret_len);

/* The largest filled size: each placeholder counted at its longest value
 * (ca_pem at ca_len bytes, the others at TM_BOOTSTRAP_VALUE_MAX). */
size_t tm_bootstrap_max_filled(const char *tmpl, size_t len, size_t ca_len);

/* Bytes of the base64 encoding of n bytes. */
size_t tm_bootstrap_base64_len(size_t n);

#endif
