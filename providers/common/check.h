/*
 * providers/common/check.h: the one runner of `tarmac check <cloud>`.
 *
 * Every cloud's check is the same command: parse `--flag value` options
 * (`--help` prints the usage on stdout and exits 0, like every command's
 * --help; anything else unknown prints it on stderr and exits 2), run a
 * short conversation with the cloud on a loop of its own (the command has
 * nothing else to do), and end by one exit contract: 0 sound, 3 the
 * credentials refused or missing, 1 anything else, each with one line on
 * stderr that says why.  A cloud brings a table: its usage, its options,
 * how to start the conversation and what its ok line says.
 */
#ifndef TM_PROVIDER_CHECK_H
#define TM_PROVIDER_CHECK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#include <uv.h>

#include "providers/provider.h"

/* Exit codes. */
#define TM_CHECK_OK 0
#define TM_CHECK_FAILED 1
#define TM_CHECK_USAGE 2
#define TM_CHECK_AUTH 3

/* How a check ended, filled by tm_check_finish(). */
struct tm_check {
    const char *cloud;
    bool done;
    int status;                    /* 0 sound */
    char what[128];                /* what was asked when it failed, or "" */
    char failure[256];             /* a sentence in place of the status's name, or "" */
    char code[TM_ID_MAX];          /* the cloud's error code, or "" */
    char message[256];             /* the cloud's message, or "" (never a secret) */
};

/* `--flag value` into *value. */
struct tm_check_option {
    const char *flag;
    const char **value;
};

struct tm_check_backend {
    const char *cloud;             /* "aws" */
    const char *usage;             /* what follows "tarmac check aws " */
    /* Start the conversation on loop: 0 once under way (it ends with
     * tm_check_finish() and closes what it opened), or a negative code
     * when nothing was left open. */
    int (*start)(struct tm_check *ck, uv_loop_t *loop, void *ctx);
    /* The rest of the ok line after "<cloud> check: ok, ". */
    void (*ok_line)(const struct tm_check *ck, void *ctx, FILE *out);
    /* Optional: an exit code other than the contract's for this failure,
     * having printed its own line; -1 for the contract's. */
    int (*failed)(const struct tm_check *ck, void *ctx);
};

/* The usage line, on stderr. */
void tm_check_usage(const struct tm_check_backend *be, FILE *out);

/* Parse argv ("check", "<cloud>", options...) into the options: -1 when
 * the run goes on, else the exit code (0 after --help, 2 on bad usage). */
int tm_check_parse(const struct tm_check_backend *be, int argc, char **argv,
                   const struct tm_check_option *opts, size_t nopts);

/* Run the conversation and turn its end into the exit code. */
int tm_check_run(const struct tm_check_backend *be, void *ctx);

/* The conversation's end: status 0 sound; code and message from the cloud's
 * answer (may be NULL). */
void tm_check_finish(struct tm_check *ck, int status, const char *code, const char *message);

#endif
