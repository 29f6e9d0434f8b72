/*
 * controller/main.c: the `tarmac` binary, one subcommand per verb.
 */
#include <stdio.h>
#include <string.h>

#include "controller/cli/cli.h"

/* `tarmac replay`: the scheduler's replay, or with --elastic the fleet's
 * (launches, prices, spot) on the same inputs. */
static int replay_main(int argc, char **argv)
{
    for (int i = 1; i < argc; i++)
        if (strcmp(argv[i], "--elastic") == 0)
            return tm_elastic_main(argc, argv);
    return tm_replay_main(argc, argv);
}

static const struct {
    const char *name;
    int (*run)(int argc, char **argv);
    const char *what;
} commands[] = {
    {"serve", tm_cli_serve, "run the controller (reconcile loop, leader election)"},
    {"migrate", tm_cli_migrate, "apply database migrations and record the configured pools"},
    {"submit", tm_cli_api_submit, "queue a job (or --count N)"},
    {"jobs", tm_cli_api_jobs, "list jobs; jobs show|cancel|retag ID"},
    {"nodes", tm_cli_api_nodes, "list nodes"},
    {"pools", tm_cli_api_pools, "list pools"},
    {"decisions", tm_cli_api_decisions, "show decisions and their reasons"},
    {"logs", tm_cli_api_logs, "a job's output as written (logs ID [--attempt N] [--rank R] [--follow] [--tail N])"},
    {"why", tm_cli_api_why, "why a job waits or runs, why a node exists (why job ID | node ID)"},
    {"budget", tm_cli_api_budget, "set or show monthly budget caps (budget set NAME | show)"},
    {"quota", tm_cli_api_quota, "set, show or remove team GPU quotas (quota set TEAM | show | rm TEAM)"},
    {"spend", tm_cli_api_spend, "this month's spend per team, pool and provider, and its projection"},
    {"db", tm_cli_db, "the same straight against PostgreSQL: db submit|jobs|nodes|pools|decisions|summary"},
    {"token", tm_token_main, "create or revoke API tokens (token create|revoke)"},
    {"join-token", tm_join_token_main, "tokens machines join an owned pool with (join-token create|list|revoke)"},
    {"check", tm_cli_check, "check cloud credentials and offerings (check aws), or a config (check config)"},
    {"forecast", tm_forecast_main, "evaluate the demand forecaster on a series"},
    {"replay", replay_main, "replay a GPU cluster trace (--elastic: with the fleet planner)"},
    {"spot-fit", tm_spot_fit_main, "fit spot interruption hazards and availability from traces"},
    {"agent", tm_cli_agent, "run the node agent (jobs, GPU samples, notices) against the API"},
};
#define NCOMMANDS (sizeof(commands) / sizeof(commands[0]))

/* The command named name: the table's, else a provider kind's own (its
 * registry row's), or NULL. */
static int (*find_command(const char *name))(int argc, char **argv)
{
    const char *kname, *help;
    int (*run)(int argc, char **argv);

    for (size_t i = 0; i < NCOMMANDS; i++)
        if (strcmp(name, commands[i].name) == 0)
            return commands[i].run;
    for (size_t i = 0; tm_cli_kind_command(i, &kname, &run, &help); i++)
        if (strcmp(name, kname) == 0)
            return run;
    return NULL;
}

static void usage(FILE *out)
{
    const char *name, *what;
    int (*run)(int argc, char **argv);

    fprintf(out, "Usage: tarmac COMMAND [options]\n\nCommands:\n");
    for (size_t i = 0; i < NCOMMANDS; i++)
        fprintf(out, "  %-10s %s\n", commands[i].name, commands[i].what);
    for (size_t i = 0; tm_cli_kind_command(i, &name, &run, &what); i++)
        fprintf(out, "  %-10s %s\n", name, what);
    fprintf(out, "\nsubmit, jobs, logs, nodes, pools, decisions, why, budget, quota and spend talk to the HTTP API\n"
                 "(--url or TARMAC_URL, a token in TARMAC_TOKEN or ~/.config/tarmac/client.yaml).\n"
                 "\"tarmac db VERB\" does the same straight against PostgreSQL (--config or\n"
                 "--database-url), for operators and while the API is down; summary is only there.\n"
                 "migrate, serve and token need the server's --config.\n"
                 "\nRun \"tarmac COMMAND --help\" for a command's options.\n");
}

int main(int argc, char **argv)
{
    int (*run)(int argc, char **argv);

    if (argc < 2) {
        usage(stderr);
        return TM_EXIT_USAGE;
    }
    if (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "help") == 0) {
        usage(stdout);
        return TM_EXIT_OK;
    }
    run = find_command(argv[1]);
    if (run)
        return run(argc - 1, argv + 1);
    if (strcmp(argv[1], "summary") == 0) {
        fprintf(stderr, "tarmac: \"summary\" reads the database: run \"tarmac db summary\"\n");
        return TM_EXIT_USAGE;
    }
    fprintf(stderr, "tarmac: unrecognized command \"%s\"\n", argv[1]);
    usage(stderr);
    return TM_EXIT_USAGE;
}
