/*
 * controller/cli.h: the one-shot subcommands (`tarmac submit`, `jobs`,
 * `nodes`, `pools`, `decisions`, `summary`, `migrate`).  They run before and
 * outside any event loop, so they use libpq's blocking calls; the daemon
 * (controller.c) never does.
 *
 * Exit codes: 0 done, 1 failure (database unreachable, refused), 2 bad
 * usage or bad input (the message names the option and the problem; nothing
 * was written).
 */
#ifndef TM_CLI_H
#define TM_CLI_H

enum { TM_EXIT_OK = 0, TM_EXIT_FAIL = 1, TM_EXIT_USAGE = 2 };

int tm_cli_migrate(int argc, char **argv);
int tm_cli_submit(int argc, char **argv);
int tm_cli_jobs(int argc, char **argv);
int tm_cli_nodes(int argc, char **argv);
int tm_cli_pools(int argc, char **argv);
int tm_cli_decisions(int argc, char **argv);
int tm_cli_summary(int argc, char **argv);
int tm_cli_serve(int argc, char **argv);

#endif
