/*
 * controller/cli/common.h: what the one-shot commands share (common.c),
 * between db.c (the direct-database forms, `tarmac db ...`), serve.c
 * (migrate and serve) and api.c (the commands that talk to the HTTP API).
 * Not for the daemon.
 */
#ifndef TM_CLI_COMMON_H
#define TM_CLI_COMMON_H

#include <getopt.h>
#include <stdbool.h>
#include <stdint.h>

#include <libpq-fe.h>

#include "controller/spec/job_spec.h"
#include "core/config.h"

/* The options every command may take; each command's getopt table lists
 * the ones it accepts (TM_CLI_DB_OPTIONS or TM_CLI_API_OPTIONS). */
struct tm_cli_common {
    const char *cmd;           /* "db jobs", "jobs": the prefix of every message */
    bool api;                  /* an API form: --database-url is refused with a pointer to db */
    const char *config_path;   /* --config */
    const char *database_url;  /* --database-url (database forms) */
    const char *url;           /* --url (API forms) */
    const char *cacert;        /* --cacert (API forms) */
    bool json;                 /* --output json */
    bool verbose;              /* --verbose (API forms): each request on stderr, never the token */
    struct tm_config cfg;      /* loaded by tm_cli_load_config() */
    bool have_cfg;
};

enum {
    TM_CLI_OPT_CONFIG = 1000,
    TM_CLI_OPT_DATABASE_URL,
    TM_CLI_OPT_OUTPUT,
    TM_CLI_OPT_HELP,
    TM_CLI_OPT_URL,
    TM_CLI_OPT_CACERT,
    TM_CLI_OPT_VERBOSE,
};

#define TM_CLI_DB_OPTIONS                                                                          \
    {"config", required_argument, NULL, TM_CLI_OPT_CONFIG},                                        \
        {"database-url", required_argument, NULL, TM_CLI_OPT_DATABASE_URL},                        \
        {"output", required_argument, NULL, TM_CLI_OPT_OUTPUT},                                    \
        {"help", no_argument, NULL, TM_CLI_OPT_HELP}, {"h", no_argument, NULL, 'h'}

/* --database-url is listed so that tm_cli_common_opt() can say where it
 * belongs instead of "unrecognized option". */
#define TM_CLI_API_OPTIONS                                                                         \
    {"url", required_argument, NULL, TM_CLI_OPT_URL},                                              \
        {"cacert", required_argument, NULL, TM_CLI_OPT_CACERT},                                    \
        {"config", required_argument, NULL, TM_CLI_OPT_CONFIG},                                    \
        {"output", required_argument, NULL, TM_CLI_OPT_OUTPUT},                                    \
        {"verbose", no_argument, NULL, TM_CLI_OPT_VERBOSE},                                        \
        {"database-url", required_argument, NULL, TM_CLI_OPT_DATABASE_URL},                        \
        {"help", no_argument, NULL, TM_CLI_OPT_HELP}, {"h", no_argument, NULL, 'h'}

extern const char tm_cli_db_help[];
extern const char tm_cli_api_help[];

/* Print "tarmac CMD: message" and a pointer to --help on stderr; returns
 * TM_EXIT_USAGE. */
int tm_cli_usage_error(const char *cmd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* The shared part of every getopt loop: the common options, a missing
 * value (':') and an unrecognized option ('?').  Returns 1 when handled, or
 * an exit code (>= 2) after printing the error.  optind must be where
 * getopt_long left it. */
int tm_cli_common_opt(struct tm_cli_common *c, int opt, const char *arg, char **argv);

/* Load --config (else TARMAC_CONFIG, else /etc/tarmac/tarmac.yaml when it
 * exists) into c->cfg with the environment applied.  required: refuse to go
 * on without one.  Returns 0 or an exit code after printing why. */
int tm_cli_load_config(struct tm_cli_common *c, bool required);

void tm_cli_common_release(struct tm_cli_common *c);

/* A blocking connection to --database-url, else TARMAC_DATABASE_URL,
 * else the configuration's (loaded when not yet); NULL after printing
 * why.  The caller finishes it with PQfinish(). */
PGconn *tm_cli_connect_db(struct tm_cli_common *c);


/* A job_spec error, named by the option the user typed; returns
 * TM_EXIT_USAGE. */
int tm_cli_spec_error(const char *cmd, const struct tm_spec_error *e);

/* Whole number in [min, max]; false when s is anything else. */
bool tm_cli_parse_long(const char *s, long min, long max, long *ret);

/*
 * Parse the options of `submit` (both forms) into spec and *ret_count,
 * validated by tm_job_spec_finish().  api: the API form (common options
 * TM_CLI_API_OPTIONS; --runtime, which the API does not take, is refused).
 * Returns -1 to go on, or an exit code to return (0 after --help, 2 after
 * printing what was wrong).
 */
int tm_cli_submit_parse(int argc, char **argv, struct tm_cli_common *c, bool api,
                        struct tm_job_spec *spec, long *ret_count);

#endif
