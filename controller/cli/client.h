/*
 * controller/cli/client.h: where the API commands send their requests and
 * with which token, resolved once per command from flags, the environment
 * and the client configuration file.
 *
 * URL: --url, else TARMAC_URL, else the client file's `url`, else
 * http(s)://LISTEN from the server configuration given with --config
 * (https when it names a certificate; a wildcard host becomes loopback),
 * else http://127.0.0.1:8080.
 * Token: TARMAC_TOKEN, else the client file's `token` or `token_file`.
 * CA bundle (https only): --cacert, else TARMAC_CA_FILE, else the file's
 * `ca_file`, else the system's.
 *
 * The client file is TARMAC_CLIENT_CONFIG (which must then exist), else
 * ~/.config/tarmac/client.yaml when it exists: YAML, one mapping of the
 * keys url, token, token_file and ca_file.  Like ssh with a private key, a
 * file holding a token (the client file with `token`, or a token_file) that
 * its group or others may read is refused, saying how to fix it.
 *
 * The token is a secret: it is never printed, wiped from memory on release.
 */
#ifndef TM_CLI_CLIENT_H
#define TM_CLI_CLIENT_H

#include "controller/cli/common.h"

struct tm_cli_endpoint {
    char *url;       /* base, "http://host:port" with no trailing '/' */
    char *token;     /* NULL when none was found */
    char *ca_file;   /* NULL: the system's CA bundle */
};

/*
 * Resolve c's target into *ret_ep.  need_token: a command that sends one
 * (all of them today) refuses to go on without it.  Returns 0, or an exit
 * code (TM_EXIT_USAGE) after printing why on stderr; on failure *ret_ep is
 * left empty.  Release with tm_cli_endpoint_release().
 */
int tm_cli_endpoint_resolve(const struct tm_cli_common *c, bool need_token,
                            struct tm_cli_endpoint *ret_ep);

/* Free and wipe; accepts an empty endpoint. */
void tm_cli_endpoint_release(struct tm_cli_endpoint *ep);

#endif
