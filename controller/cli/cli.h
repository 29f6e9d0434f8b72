/*
 * controller/cli/cli.h: the one-shot subcommands of `tarmac`.
 *
 * Two families, one rule: the commands people and scripts use day to day
 * (`submit`, `jobs`, `nodes`, `pools`, `decisions`, `why`, `budget`,
 * `spend`) talk to the HTTP API with a bearer token (cli/api.c); the same
 * reads and the submit straight against PostgreSQL, for operators and for
 * when the API is down, are under `tarmac db ...` (db.c, blocking
 * libpq).  `migrate` and `serve` need the server's configuration.  None of
 * them runs inside the daemon's loop, so they may block; the daemon
 * (controller.c) never does.
 *
 * Exit codes: 0 done, 1 failure (database or API unreachable, refused by the
 * server), 2 bad usage or bad input found before anything was sent (the
 * message names the option and the problem; nothing was written).
 */
#ifndef TM_CLI_H
#define TM_CLI_H

#include <stdbool.h>
#include <stddef.h>

enum { TM_EXIT_OK = 0, TM_EXIT_FAIL = 1, TM_EXIT_USAGE = 2 };

/* Direct database forms, `tarmac db VERB` (cli/db.c). */
int tm_cli_db(int argc, char **argv);
int tm_cli_submit(int argc, char **argv);
int tm_cli_jobs(int argc, char **argv);
int tm_cli_nodes(int argc, char **argv);
int tm_cli_pools(int argc, char **argv);
int tm_cli_decisions(int argc, char **argv);
int tm_cli_summary(int argc, char **argv);

/* The server's own commands (cli/serve.c): `migrate` applies the schema
 * and records the pools; `serve` runs the daemon (daemon/controller.h). */
int tm_cli_migrate(int argc, char **argv);
int tm_cli_serve(int argc, char **argv);

/* Through the API (cli/api.c). */
int tm_cli_api_submit(int argc, char **argv);
int tm_cli_api_jobs(int argc, char **argv);
int tm_cli_api_nodes(int argc, char **argv);
int tm_cli_api_pools(int argc, char **argv);
int tm_cli_api_decisions(int argc, char **argv);
int tm_cli_api_why(int argc, char **argv);
/* cli/logs.c: `tarmac logs ID`, a job's output (docs/logs.md). */
int tm_cli_api_logs(int argc, char **argv);
int tm_cli_api_budget(int argc, char **argv);
int tm_cli_api_quota(int argc, char **argv);
int tm_cli_api_spend(int argc, char **argv);

/* `tarmac token create|revoke|list ...` (cli/token.c). */
int tm_token_main(int argc, char **argv);
/* `tarmac join-token create|list|revoke` (join_token.c). */
int tm_join_token_main(int argc, char **argv);

/* `tarmac check KIND ...`: a provider kind's own check of credentials and
 * offerings (the kinds with one in providers/registry.c). */
int tm_cli_check(int argc, char **argv);
/* `tarmac check config`: validate a configuration, list each queue's offers. */
int tm_cli_check_config(int argc, char **argv);

/* The offline tools (cli/replay.c, elastic.c, forecast.c, spot_fit.c). */
/* `tarmac replay --elastic ...`: argv[0] is "replay" (or "elastic");
 * "--elastic" is accepted anywhere.  Exit status 0 ok, 2 bad usage or
 * input, 1 a failure while running. */
int tm_elastic_main(int argc, char **argv);

/* `tarmac forecast` (argv[0] is "forecast").  Exit codes: 0 done, 1 failure
 * (file unreadable, out of memory), 2 bad usage or bad input. */
int tm_forecast_main(int argc, char **argv);

/* `tarmac replay ...`: argv[0] is "replay".  Returns the exit status:
 * 0 ok, 2 bad usage or bad input, 1 a failure while running. */
int tm_replay_main(int argc, char **argv);

/* `tarmac spot-fit --traces DIR [--provider P] [--json | --yaml]`
 * (controller/cli/spot_fit.c).  Exit status 0 ok, 2 bad usage or input,
 * 1 a failure while running. */
int tm_spot_fit_main(int argc, char **argv);

/* `tarmac agent ...`: the node agent (cli/agent.c, controller/agent/).
 * Exit status 0 when stopped or the node is gone, 1 on a fatal error,
 * 2 bad usage. */
int tm_cli_agent(int argc, char **argv);

/* The provider kinds' own commands, `tarmac KIND ...` (a row's
 * command_main in providers/registry.h; kind_command.c), in the
 * registry's order: the i-th one's name, entry point and the line
 * `tarmac --help` shows for it; false past the last. */
bool tm_cli_kind_command(size_t i, const char **ret_name, int (**ret_run)(int argc, char **argv),
                         const char **ret_help);

#endif
