/*
 * controller/cli/api.h: what the commands that talk to the HTTP API share
 * (cli/jobs.c, cli/fleet.c, cli/budget.c; see cli.h for which commands
 * those are, cli/client.h for where the URL and the token come from).
 *
 * Each command checks its own input first (exit 2, nothing sent), makes
 * its requests, and prints a table for people or, with --output json, the
 * API's JSON: a list as the API pages it, {"items": [...], "next_cursor":
 * ...}, with the pages this command followed joined into one; one object
 * as the API answered it.  A refusal from the server is printed as
 * "tarmac: STATUS: ERROR (field FIELD)" and exits 1.
 */
#ifndef TM_CLI_API_H
#define TM_CLI_API_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <cjson/cJSON.h>

#include "controller/cli/client.h"
#include "controller/cli/common.h"
#include "controller/cli/http.h"
#include "controller/cli/table.h"

#define TM_CLI_PATH_MAX 2048        /* a request's path and query */
#define TM_CLI_DEFAULT_LIMIT 100    /* the API's default page, and the lists' default --limit */
#define TM_CLI_LIMIT_MAX 1000000

/* One API command: its options, where it talks to, the open client. */
struct tm_cli_cmd {
    struct tm_cli_common c;     /* .cmd and .api = true set by the command */
    struct tm_cli_endpoint ep;
    struct tm_cli_http http;
    bool open;
};

/* Resolve the endpoint and start the client, once the options are parsed.
 * Returns 0 or an exit code after printing why. */
int tm_cli_cmd_open(struct tm_cli_cmd *a);

/* Accepts a command that was never opened. */
void tm_cli_cmd_close(struct tm_cli_cmd *a);

/* The default branch of every getopt loop (tm_cli_common_opt()). */
int tm_cli_cmd_opt(struct tm_cli_cmd *a, int opt, char **argv);

/* doc as indented JSON on stdout; 0 or TM_EXIT_FAIL. */
int tm_cli_print_json(const cJSON *doc);

/* Print t on stdout and release it; 0 or TM_EXIT_FAIL. */
int tm_cli_print_table(struct tm_table *t);

/* o[key] as cell text: a string as is, a whole number without a fraction,
 * true/false as yes/no, null or missing as "-".  buf holds numbers. */
const char *tm_cli_jtext(const cJSON *o, const char *key, char *buf, size_t size);
/* o[key] as the next cell of t, in tm_cli_jtext()'s words. */
void tm_cli_jcell(struct tm_table *t, const cJSON *o, const char *key);
bool tm_cli_jnum(const cJSON *o, const char *key, int64_t *ret);
/* o[key], ms since the epoch, as "YYYY-MM-DD HH:MM:SS" (UTC), or "-". */
const char *tm_cli_fmt_ms(const cJSON *o, const char *key, char *buf, size_t size);
/* o[key], cents, as dollars "1234.56", or "-". */
const char *tm_cli_fmt_cents(const cJSON *o, const char *key, char *buf, size_t size);
/* A job's nodes with their ranks (its "members": the running attempt's,
 * or the last attempt's), one line each after indent, and the rank whose
 * exit failed a gang; nothing for a job with no members. */
void tm_cli_print_members(const cJSON *job, const char *indent);
/* A job's GPUs: "4", a gang "4x2", a share "0.25". */
const char *tm_cli_fmt_gpus(const cJSON *job, char *buf, size_t size);

/* Append "name=value" (value escaped; nothing when value is NULL) to path,
 * which may already hold a query.  false when it does not fit. */
bool tm_cli_query_add(char *path, size_t size, const char *name, const char *value);

/*
 * GET path, following next_cursor until want items (0: all) were kept;
 * keep (may be NULL) chooses which items count.  *ret_page (caller frees
 * with cJSON_Delete) is shaped as one page of the API, {"items": [...],
 * "next_cursor": ...}: every page's kept items, the last page's cursor.
 * Returns 0 or an exit code after printing why.
 */
int tm_cli_get_list(struct tm_cli_cmd *a, const char *path, long want, bool (*keep)(const cJSON *),
                    cJSON **ret_page);

/* --limit N: 1..TM_CLI_LIMIT_MAX.  0, or TM_EXIT_USAGE after printing. */
int tm_cli_parse_limit(struct tm_cli_cmd *a, const char *arg, long *ret);

/* A job or node id argument (what: "job", "node") into out as digits.
 * 0, or TM_EXIT_USAGE after printing. */
int tm_cli_parse_id(struct tm_cli_cmd *a, const char *what, const char *arg, char *out, size_t size);

#endif
