/*
 * controller/cli/http.h: the API commands' HTTP client, libcurl's easy
 * interface (a one-shot command may block; the daemon uses http_uv.c).
 *
 * One struct tm_cli_http per command, reused for each request so the
 * connection is kept alive across pages.  The token travels only in the
 * Authorization header: never printed, not with --verbose, and wiped from
 * memory on release.  Redirects are not followed (a token must not follow
 * a Location elsewhere); only http and https are spoken; an https server's
 * certificate is always verified (against the endpoint's ca_file when one
 * is given).  A 429 (past the token's request rate; nothing was done) is
 * waited out as its Retry-After says and the request sent again, up to a
 * minute.
 */
#ifndef TM_CLI_HTTP_H
#define TM_CLI_HTTP_H

#include <stdbool.h>

#include <cjson/cJSON.h>

#include "controller/cli/client.h"

struct tm_cli_http {
    const char *cmd;                     /* for messages */
    const struct tm_cli_endpoint *ep;    /* borrowed */
    bool verbose;
    void *curl;                          /* CURL * */
    struct curl_slist *headers;          /* the Authorization one holds the token */
};

/* Returns 0, or TM_EXIT_FAIL after printing why. */
int tm_cli_http_init(struct tm_cli_http *h, const char *cmd, const struct tm_cli_endpoint *ep,
                     bool verbose);

/*
 * METHOD ep->url + path (path starts with '/', query included, already
 * escaped), with body as JSON when not NULL.  On a 2xx answer with a JSON
 * body, *ret_json receives it (caller frees with cJSON_Delete) and the
 * return is 0.  Otherwise the problem is printed on stderr, for an answer
 * from the server as
 *   tarmac: STATUS: ERROR (field FIELD)
 * and the return is TM_EXIT_FAIL.
 */
int tm_cli_http_call(struct tm_cli_http *h, const char *method, const char *path, const char *body,
                     cJSON **ret_json);
/* The same with an Idempotency-Key header (docs/ha.md): the request is then
 * also sent again, with the same key, when the server cannot be reached or
 * answers 503 (a database failover), which the key makes safe. */
int tm_cli_http_call_idem(struct tm_cli_http *h, const char *method, const char *path,
                          const char *body, const char *idem_key, cJSON **ret_json);

/* GET path as bytes of any type (a job's output): on a 2xx answer
 * *ret_body (malloc'd, NUL-terminated past *ret_len; caller frees) and 0;
 * else the problem printed as above and TM_EXIT_FAIL.  The answer's
 * headers stay readable with tm_cli_http_header() until the next request. */
int tm_cli_http_get_bytes(struct tm_cli_http *h, const char *path, char **ret_body, size_t *ret_len);
/* A header of the last answer (name case-insensitive), or NULL. */
const char *tm_cli_http_header(struct tm_cli_http *h, const char *name);

/* Percent-encode s as one query value into out; false when it does not fit. */
bool tm_cli_http_escape(const char *s, char *out, size_t size);

void tm_cli_http_release(struct tm_cli_http *h);

#endif
