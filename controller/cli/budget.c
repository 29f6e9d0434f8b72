/*
 * controller/cli/budget.c: `tarmac budget set|show` and `tarmac spend`
 * (through the API; see cli/api.h).
 */
#include "controller/cli/cli.h"

#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cjson/cJSON.h>

#include "controller/cli/api.h"
#include "controller/cli/common.h"
#include "controller/spec/job_spec.h"
#include "core/model.h"

/* ---- budgets and spend ----------------------------------------------------------- */

static int budget_set(int argc, char **argv)
{
    enum { O_CAP = 1, O_PERIOD, O_HARD, O_SOFT, O_WARN, O_ORG };
    static const struct option opts[] = {
        TM_CLI_API_OPTIONS,
        {"cap-cents", required_argument, NULL, O_CAP}, {"period", required_argument, NULL, O_PERIOD},
        {"hard", no_argument, NULL, O_HARD}, {"soft", no_argument, NULL, O_SOFT},
        {"warn-percent", required_argument, NULL, O_WARN}, {"org", no_argument, NULL, O_ORG}, {0},
    };
    struct tm_cli_cmd a = {.c = {.cmd = "budget set", .api = true}};
    const char *name = NULL;
    long cap = -1, warn = 80;
    bool hard = false, org = false;
    char path[TM_CLI_PATH_MAX], esc[256];
    char *body = NULL;
    cJSON *o = NULL, *budget = NULL;
    int opt, r;

    optind = 1;
    opterr = 0;
    while ((opt = getopt_long(argc, argv, ":h", opts, NULL)) != -1) {
        switch (opt) {
        case TM_CLI_OPT_HELP:
        case 'h':
            printf("Usage: tarmac budget set NAME --cap-cents N [--hard | --soft] [--warn-percent P]\n"
                   "                            [--period month] [--org] [options]\n\n"
                   "Set (create or replace) the monthly budget of team NAME, or with --org of the\n"
                   "whole org NAME, in US cents (PUT /v1/budgets/NAME).  Roles admin and finance.\n"
                   "      --cap-cents N        the cap, 0 .. 10^15 cents\n"
                   "      --hard               never spend past it: work that would waits\n"
                   "      --soft               warn only (the default)\n"
                   "      --warn-percent P     warn at P%% of the cap, 1..100 (default 80)\n"
                   "      --period month       the only period today\n\n"
                   "Options:\n%s",
                   tm_cli_api_help);
            return TM_EXIT_OK;
        case O_CAP:
            if (!tm_cli_parse_long(optarg, 0, 1000000000000000L, &cap))
                return tm_cli_usage_error(a.c.cmd, "--cap-cents: must be a whole number of cents from 0 to "
                                                   "10^15, not \"%s\"", optarg);
            break;
        case O_PERIOD:
            if (strcmp(optarg, "month") != 0)
                return tm_cli_usage_error(a.c.cmd, "--period: must be \"month\", not \"%s\"", optarg);
            break;
        case O_HARD: hard = true; break;
        case O_SOFT: hard = false; break;
        case O_ORG: org = true; break;
        case O_WARN:
            if (!tm_cli_parse_long(optarg, 1, 100, &warn))
                return tm_cli_usage_error(a.c.cmd, "--warn-percent: must be a whole number from 1 to 100, not \"%s\"",
                                          optarg);
            break;
        default:
            if ((r = tm_cli_cmd_opt(&a, opt, argv)) > 1)
                return r;
        }
    }
    if (optind >= argc)
        return tm_cli_usage_error(a.c.cmd, "missing NAME (the team, or with --org the org)");
    name = argv[optind];
    if (optind + 1 < argc)
        return tm_cli_usage_error(a.c.cmd, "unexpected argument \"%s\"", argv[optind + 1]);
    if (!tm_job_spec_name_ok(name))
        return tm_cli_usage_error(a.c.cmd, "NAME: must be 1-63 letters, digits, '.', '_' or '-', not \"%s\"", name);
    if (cap < 0)
        return tm_cli_usage_error(a.c.cmd, "--cap-cents: required");
    o = cJSON_CreateObject();
    if (o) {
        cJSON_AddNumberToObject(o, "cap_cents", (double)cap);
        cJSON_AddStringToObject(o, "period", "month");
        cJSON_AddBoolToObject(o, "hard", hard);
        cJSON_AddNumberToObject(o, "warn_percent", (double)warn);
        cJSON_AddStringToObject(o, "scope_kind", org ? "org" : "team");
        body = cJSON_PrintUnformatted(o);
        cJSON_Delete(o);
    }
    if (!body || !tm_cli_http_escape(name, esc, sizeof(esc))) {
        free(body);
        return TM_EXIT_FAIL;
    }
    snprintf(path, sizeof(path), "/v1/budgets/%s", esc);
    if ((r = tm_cli_cmd_open(&a)) == 0 && (r = tm_cli_http_call(&a.http, "PUT", path, body, &budget)) == 0) {
        if (a.c.json) {
            r = tm_cli_print_json(budget);
        } else {
            static const char *const cols[] = {"SCOPE", "KIND", "PERIOD", "CAP_USD", "HARD", "WARN_PERCENT"};
            struct tm_table t;
            char b[6][32];
            tm_table_init(&t, 6, cols);
            tm_cli_jcell(&t, budget, "scope");
            tm_cli_jcell(&t, budget, "scope_kind");
            tm_cli_jcell(&t, budget, "period");
            tm_table_cell(&t, "%s", tm_cli_fmt_cents(budget, "cap_cents", b[3], sizeof(b[3])));
            tm_cli_jcell(&t, budget, "hard");
            tm_cli_jcell(&t, budget, "warn_percent");
            r = tm_cli_print_table(&t);
        }
    }
    cJSON_Delete(budget);
    free(body);
    tm_cli_cmd_close(&a);
    return r;
}

static int budget_show(int argc, char **argv)
{
    static const struct option opts[] = {TM_CLI_API_OPTIONS, {0}};
    static const char *const cols[] = {"SCOPE", "KIND", "PERIOD", "CAP_USD", "SPENT_USD", "USED",
                                       "HARD", "WARN_PERCENT"};
    struct tm_cli_cmd a = {.c = {.cmd = "budget show", .api = true}};
    cJSON *list = NULL;
    int opt, r;

    optind = 1;
    opterr = 0;
    while ((opt = getopt_long(argc, argv, ":h", opts, NULL)) != -1) {
        if (opt == TM_CLI_OPT_HELP || opt == 'h') {
            printf("Usage: tarmac budget show [options]\n\n"
                   "Every budget with its spend this calendar month, UTC (GET /v1/budgets).  An\n"
                   "engineer's token sees its own team's only.\n\nOptions:\n%s", tm_cli_api_help);
            return TM_EXIT_OK;
        }
        if ((r = tm_cli_cmd_opt(&a, opt, argv)) > 1)
            return r;
    }
    if (optind < argc)
        return tm_cli_usage_error(a.c.cmd, "unexpected argument \"%s\"", argv[optind]);
    if ((r = tm_cli_cmd_open(&a)) == 0 && (r = tm_cli_http_call(&a.http, "GET", "/v1/budgets", NULL, &list)) == 0) {
        if (a.c.json) {
            r = tm_cli_print_json(list);
        } else {
            struct tm_table t;
            const cJSON *bu;
            tm_table_init(&t, 8, cols);
            cJSON_ArrayForEach(bu, cJSON_GetObjectItemCaseSensitive(list, "items")) {
                char b[8][32];
                int64_t cap = 0, spent = 0;
                tm_cli_jcell(&t, bu, "scope");
                tm_cli_jcell(&t, bu, "scope_kind");
                tm_cli_jcell(&t, list, "period");
                tm_table_cell(&t, "%s", tm_cli_fmt_cents(bu, "cap_cents", b[3], sizeof(b[3])));
                tm_table_cell(&t, "%s", tm_cli_fmt_cents(bu, "spent_cents", b[4], sizeof(b[4])));
                if (tm_cli_jnum(bu, "cap_cents", &cap) && tm_cli_jnum(bu, "spent_cents", &spent) && cap > 0)
                    tm_table_cell(&t, "%.1f%%", 100.0 * (double)spent / (double)cap);
                else
                    tm_table_cell(&t, "-");
                tm_cli_jcell(&t, bu, "hard");
                tm_cli_jcell(&t, bu, "warn_percent");
            }
            r = tm_cli_print_table(&t);
        }
    }
    cJSON_Delete(list);
    tm_cli_cmd_close(&a);
    return r;
}

int tm_cli_api_budget(int argc, char **argv)
{
    if (argc >= 2 && strcmp(argv[1], "set") == 0)
        return budget_set(argc - 1, argv + 1);
    if (argc >= 2 && strcmp(argv[1], "show") == 0)
        return budget_show(argc - 1, argv + 1);
    if (argc >= 2 && (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0)) {
        printf("Usage: tarmac budget set NAME --cap-cents N [--hard | --soft] [--warn-percent P] ...\n"
               "       tarmac budget show\n\n"
               "Set a team's (or the org's) monthly cap, or list the caps with this month's spend.\n"
               "\"tarmac budget set --help\" for the options.\n");
        return TM_EXIT_OK;
    }
    if (argc >= 2)
        return tm_cli_usage_error("budget", "unrecognized verb \"%s\" (valid: set, show)", argv[1]);
    return tm_cli_usage_error("budget", "missing verb (valid: set, show)");
}

/* Spend by cloud (a pool group's members are on several): one row per
 * provider, kind beside it. */
static int print_spend_providers(const cJSON *spend)
{
    static const char *const cols[] = {"PROVIDER", "KIND", "JOBS_USD", "IDLE_USD", "TOTAL_USD"};
    struct tm_table t;
    const cJSON *it;

    printf("\n");
    tm_table_init(&t, 5, cols);
    cJSON_ArrayForEach(it, cJSON_GetObjectItemCaseSensitive(spend, "providers")) {
        char c[5][32];
        tm_table_cell(&t, "%s", tm_cli_jtext(it, "provider", c[0], sizeof(c[0])));
        tm_table_cell(&t, "%s", tm_cli_jtext(it, "provider_kind", c[1], sizeof(c[1])));
        tm_table_cell(&t, "%s", tm_cli_fmt_cents(it, "job_cents", c[2], sizeof(c[2])));
        tm_table_cell(&t, "%s", tm_cli_fmt_cents(it, "idle_cents", c[3], sizeof(c[3])));
        tm_table_cell(&t, "%s", tm_cli_fmt_cents(it, "cents", c[4], sizeof(c[4])));
    }
    return tm_cli_print_table(&t);
}

int tm_cli_api_spend(int argc, char **argv)
{
    enum { O_TEAM = 1 };
    static const struct option opts[] = {TM_CLI_API_OPTIONS, {"team", required_argument, NULL, O_TEAM}, {0}};
    struct tm_cli_cmd a = {.c = {.cmd = "spend", .api = true}};
    const char *team = NULL;
    cJSON *spend = NULL;
    int opt, r;

    optind = 1;
    opterr = 0;
    while ((opt = getopt_long(argc, argv, ":h", opts, NULL)) != -1) {
        if (opt == TM_CLI_OPT_HELP || opt == 'h') {
            printf("Usage: tarmac spend [--team T] [options]\n\n"
                   "This calendar month's spend (UTC) from the ledger, per team, per pool and per\n"
                   "provider (cloud), with idle spend apart, and the projection to the month's end\n"
                   "(GET /v1/spend).  Dollars.\n"
                   "      --team T             only team T's row of the per-team list (also in json)\n\n"
                   "Options:\n%s", tm_cli_api_help);
            return TM_EXIT_OK;
        }
        if (opt == O_TEAM) {
            if (!tm_job_spec_name_ok(optarg))
                return tm_cli_usage_error(a.c.cmd, "--team: must be 1-63 letters, digits, '.', '_' or '-', not \"%s\"",
                                          optarg);
            team = optarg;
        } else if ((r = tm_cli_cmd_opt(&a, opt, argv)) > 1) {
            return r;
        }
    }
    if (optind < argc)
        return tm_cli_usage_error(a.c.cmd, "unexpected argument \"%s\"", argv[optind]);
    if ((r = tm_cli_cmd_open(&a)) != 0 || (r = tm_cli_http_call(&a.http, "GET", "/v1/spend", NULL, &spend)) != 0)
        goto out;
    cJSON *teams = cJSON_GetObjectItemCaseSensitive(spend, "teams");
    if (team && cJSON_IsArray(teams)) {
        for (int i = cJSON_GetArraySize(teams) - 1; i >= 0; i--) {
            const cJSON *t = cJSON_GetObjectItemCaseSensitive(cJSON_GetArrayItem(teams, i), "team");
            if (!cJSON_IsString(t) || strcmp(t->valuestring, team) != 0)
                cJSON_DeleteItemFromArray(teams, i);
        }
    }
    if (a.c.json) {
        r = tm_cli_print_json(spend);
        goto out;
    }
    char b[8][32];
    const cJSON *hours = cJSON_GetObjectItemCaseSensitive(spend, "hours_left");
    int64_t rate;
    snprintf(b[6], sizeof(b[6]), "-");
    snprintf(b[7], sizeof(b[7]), "-");
    if (tm_cli_jnum(spend, "rate_uusd_per_hour", &rate))
        snprintf(b[6], sizeof(b[6]), "%.2f", (double)rate / 1e6);
    if (cJSON_IsNumber(hours))
        snprintf(b[7], sizeof(b[7]), "%.1f", hours->valuedouble);
    printf("period %s (%s, calendar month UTC)\n", tm_cli_jtext(spend, "period", b[0], sizeof(b[0])),
           tm_cli_jtext(spend, "currency", b[1], sizeof(b[1])));
    printf("spent %s  (jobs %s, idle %s)  projected to month end %s  (%s USD/h for %s h left)\n\n",
           tm_cli_fmt_cents(spend, "total_cents", b[2], sizeof(b[2])), tm_cli_fmt_cents(spend, "job_cents", b[3], sizeof(b[3])),
           tm_cli_fmt_cents(spend, "idle_cents", b[4], sizeof(b[4])),
           tm_cli_fmt_cents(spend, "projected_cents", b[5], sizeof(b[5])), b[6], b[7]);
    {
        static const char *const cols[] = {"TEAM", "SPENT_USD"};
        struct tm_table t;
        const cJSON *it;
        tm_table_init(&t, 2, cols);
        cJSON_ArrayForEach(it, teams) {
            char c[2][32];
            tm_table_cell(&t, "%s", tm_cli_jtext(it, "team", c[0], sizeof(c[0])));
            tm_table_cell(&t, "%s", tm_cli_fmt_cents(it, "cents", c[1], sizeof(c[1])));
        }
        if ((r = tm_cli_print_table(&t)) != 0)
            goto out;
    }
    if (!team) {
        static const char *const cols[] = {"POOL", "JOBS_USD", "IDLE_USD", "TOTAL_USD"};
        struct tm_table t;
        const cJSON *it;
        printf("\n");
        tm_table_init(&t, 4, cols);
        cJSON_ArrayForEach(it, cJSON_GetObjectItemCaseSensitive(spend, "pools")) {
            char c[4][32];
            tm_table_cell(&t, "%s", tm_cli_jtext(it, "pool", c[0], sizeof(c[0])));
            tm_table_cell(&t, "%s", tm_cli_fmt_cents(it, "job_cents", c[1], sizeof(c[1])));
            tm_table_cell(&t, "%s", tm_cli_fmt_cents(it, "idle_cents", c[2], sizeof(c[2])));
            tm_table_cell(&t, "%s", tm_cli_fmt_cents(it, "cents", c[3], sizeof(c[3])));
        }
        if ((r = tm_cli_print_table(&t)) != 0)
            goto out;
        r = print_spend_providers(spend);
    }
out:
    cJSON_Delete(spend);
    tm_cli_cmd_close(&a);
    return r;
}
