/*
 * tests/unit/providers/gcp/gcp_jwt_tool.c: print the RS256 JWT tarmac
 * builds for a key file and fixed claims, so a test can compare it with
 * google-auth-library's (tests/integration/gcp_reference_client.sh).
 *   gcp_jwt_tool KEYFILE IAT SCOPE AUDIENCE
 */
#include <stdio.h>
#include <stdlib.h>

#include "providers/gcp/gcp_auth.h"

int main(int argc, char **argv)
{
    struct tm_gcp_key key;
    char err[512], *jwt = NULL;

    if (argc != 5) {
        fprintf(stderr, "usage: gcp_jwt_tool KEYFILE IAT SCOPE AUDIENCE\n");
        return 2;
    }
    if (tm_gcp_key_load(argv[1], &key, err, sizeof(err)) < 0) {
        fprintf(stderr, "gcp_jwt_tool: %s\n", err);
        return 1;
    }
    if (tm_gcp_jwt_sign(key.private_key, key.client_email, argv[3], argv[4],
                        strtoll(argv[2], NULL, 10), &jwt) < 0) {
        fprintf(stderr, "gcp_jwt_tool: could not sign\n");
        return 1;
    }
    fputs(jwt, stdout);
    free(jwt);
    tm_gcp_key_release(&key);
    return 0;
}
