/*
 * controller/cli/quota.c: `tarmac quota set|show|rm` (through the API; see
 * cli/api.h and docs/quotas.md).
 *
 * Numbers go to the server as given (1.5 and -2 included): the server
 * checks them with the whole set and names the field, so the CLI and the
 * API say the same thing about the same input.
 */
#include "controller/cli/cli.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "controller/cli/api.h"
#include "controller/cli/common.h"
#include "controller/spec/job_spec.h"
#include "core/model.h"

/* A number as typed, any finite value: the server judges it. */
static bool parse_number(const char *s, double *ret)
{
    char *end;

    errno = 0;
    *ret = strtod(s, &end);
    return s[0] && !*end && errno == 0 && isfinite(*ret);
}

static int print_quota(const cJSON *q)
{
    static const char *const cols[] = {"TEAM", "FLAVOR", "GPUS", "BORROWING_LIMIT", "LENDING_LIMIT",
                                       "ORG", "WEIGHT"};
    struct tm_table t;

    tm_table_init(&t, 7, cols);
    tm_cli_jcell(&t, q, "team");
    tm_cli_jcell(&t, q, "flavor");
    tm_cli_jcell(&t, q, "gpus");
    tm_cli_jcell(&t, q, "borrowing_limit");
    tm_cli_jcell(&t, q, "lending_limit");
    tm_cli_jcell(&t, q, "org");
    tm_cli_jcell(&t, q, "weight");
    return tm_cli_print_table(&t);
}

static const char set_help[] =
    "Usage: tarmac quota set TEAM --gpus N [--flavor F] [--borrowing-limit N]\n"
    "                       [--lending-limit N] [--org ORG] [--weight W] [options]\n\n"
    "Set (create or replace) team TEAM's guaranteed GPUs of one flavor, a GPU model\n"
    "or a pool group (PUT /v1/quotas/TEAM).  Roles admin and finance.\n"
    "      --gpus N             guaranteed GPUs, whole, >= 0\n"
    "      --flavor F           GPU model or pool group; may be left out when the\n"
    "                           fleet has one\n"
    "      --borrowing-limit N  GPUs it may run above its quota on others' idle\n"
    "                           quota (default unlimited)\n"
    "      --lending-limit N    GPUs of its idle quota others may use (default all)\n"
    "      --org ORG            the org it belongs to (one level of orgs)\n"
    "      --weight W           its weight in fair share, > 0 (default 1)\n\n"
    "Options:\n%s";

static int quota_set(int argc, char **argv)
{
    enum { O_GPUS = 1, O_FLAVOR, O_BORROW, O_LEND, O_ORG, O_WEIGHT };
    static const struct option opts[] = {
        TM_CLI_API_OPTIONS,
        {"gpus", required_argument, NULL, O_GPUS}, {"flavor", required_argument, NULL, O_FLAVOR},
        {"borrowing-limit", required_argument, NULL, O_BORROW},
        {"lending-limit", required_argument, NULL, O_LEND}, {"org", required_argument, NULL, O_ORG},
        {"weight", required_argument, NULL, O_WEIGHT}, {0},
    };
    static const char *const names[] = {"", "--gpus", "--flavor", "--borrowing-limit",
                                        "--lending-limit", "--org", "--weight"};
    struct tm_cli_cmd a = {.c = {.cmd = "quota set", .api = true}};
    double num[7] = {NAN, NAN, NAN, NAN, NAN, NAN, NAN};
    const char *flavor = NULL, *org = NULL, *team;
    char path[TM_CLI_PATH_MAX], esc[256];
    char *body = NULL;
    cJSON *o = NULL, *quota = NULL;
    int opt, r;

    optind = 1;
    opterr = 0;
    while ((opt = getopt_long(argc, argv, ":h", opts, NULL)) != -1) {
        switch (opt) {
        case TM_CLI_OPT_HELP:
        case 'h':
            printf(set_help, tm_cli_api_help);
            return TM_EXIT_OK;
        case O_GPUS:
        case O_BORROW:
        case O_LEND:
        case O_WEIGHT:
            if (!parse_number(optarg, &num[opt]))
                return tm_cli_usage_error(a.c.cmd, "%s: must be a number, not \"%s\"", names[opt], optarg);
            break;
        case O_FLAVOR:
        case O_ORG:
            if (!tm_job_spec_name_ok(optarg))
                return tm_cli_usage_error(a.c.cmd, "%s: must be 1-63 letters, digits, '.', '_' or '-', "
                                          "not \"%s\"", names[opt], optarg);
            *(opt == O_FLAVOR ? &flavor : &org) = optarg;
            break;
        default:
            if ((r = tm_cli_cmd_opt(&a, opt, argv)) > 1)
                return r;
        }
    }
    if (optind >= argc)
        return tm_cli_usage_error(a.c.cmd, "missing TEAM");
    team = argv[optind];
    if (optind + 1 < argc)
        return tm_cli_usage_error(a.c.cmd, "unexpected argument \"%s\"", argv[optind + 1]);
    if (!tm_job_spec_name_ok(team))
        return tm_cli_usage_error(a.c.cmd, "TEAM: must be 1-63 letters, digits, '.', '_' or '-', not \"%s\"", team);
    if (isnan(num[O_GPUS]))
        return tm_cli_usage_error(a.c.cmd, "--gpus: required");
    o = cJSON_CreateObject();
    if (o) {
        cJSON_AddNumberToObject(o, "gpus", num[O_GPUS]);
        if (flavor)
            cJSON_AddStringToObject(o, "flavor", flavor);
        if (!isnan(num[O_BORROW]))
            cJSON_AddNumberToObject(o, "borrowing_limit", num[O_BORROW]);
        if (!isnan(num[O_LEND]))
            cJSON_AddNumberToObject(o, "lending_limit", num[O_LEND]);
        if (org)
            cJSON_AddStringToObject(o, "org", org);
        if (!isnan(num[O_WEIGHT]))
            cJSON_AddNumberToObject(o, "weight", num[O_WEIGHT]);
        body = cJSON_PrintUnformatted(o);
        cJSON_Delete(o);
    }
    if (!body || !tm_cli_http_escape(team, esc, sizeof(esc))) {
        free(body);
        return TM_EXIT_FAIL;
    }
    snprintf(path, sizeof(path), "/v1/quotas/%s", esc);
    if ((r = tm_cli_cmd_open(&a)) == 0 && (r = tm_cli_http_call(&a.http, "PUT", path, body, &quota)) == 0)
        r = a.c.json ? tm_cli_print_json(quota) : print_quota(quota);
    cJSON_Delete(quota);
    free(body);
    tm_cli_cmd_close(&a);
    return r;
}

static int quota_rm(int argc, char **argv)
{
    enum { O_FLAVOR = 1 };
    static const struct option opts[] = {TM_CLI_API_OPTIONS, {"flavor", required_argument, NULL, O_FLAVOR},
                                         {0}};
    struct tm_cli_cmd a = {.c = {.cmd = "quota rm", .api = true}};
    const char *flavor = NULL;
    char path[TM_CLI_PATH_MAX], esc[256], fesc[256];
    cJSON *res = NULL;
    int opt, r;

    optind = 1;
    opterr = 0;
    while ((opt = getopt_long(argc, argv, ":h", opts, NULL)) != -1) {
        if (opt == TM_CLI_OPT_HELP || opt == 'h') {
            printf("Usage: tarmac quota rm TEAM [--flavor F] [options]\n\n"
                   "Remove team TEAM's quota of flavor F, or all of its quotas (DELETE\n"
                   "/v1/quotas/TEAM).  Refused while the team borrows.  Roles admin and finance.\n\n"
                   "Options:\n%s", tm_cli_api_help);
            return TM_EXIT_OK;
        }
        if (opt == O_FLAVOR) {
            if (!tm_job_spec_name_ok(optarg))
                return tm_cli_usage_error(a.c.cmd, "--flavor: must be 1-63 letters, digits, '.', '_' or "
                                          "'-', not \"%s\"", optarg);
            flavor = optarg;
        } else if ((r = tm_cli_cmd_opt(&a, opt, argv)) > 1) {
            return r;
        }
    }
    if (optind >= argc)
        return tm_cli_usage_error(a.c.cmd, "missing TEAM");
    if (optind + 1 < argc)
        return tm_cli_usage_error(a.c.cmd, "unexpected argument \"%s\"", argv[optind + 1]);
    if (!tm_job_spec_name_ok(argv[optind]))
        return tm_cli_usage_error(a.c.cmd, "TEAM: must be 1-63 letters, digits, '.', '_' or '-', not \"%s\"",
                                  argv[optind]);
    if (!tm_cli_http_escape(argv[optind], esc, sizeof(esc)) ||
        (flavor && !tm_cli_http_escape(flavor, fesc, sizeof(fesc))))
        return TM_EXIT_FAIL;
    snprintf(path, sizeof(path), "/v1/quotas/%s%s%s", esc, flavor ? "?flavor=" : "", flavor ? fesc : "");
    if ((r = tm_cli_cmd_open(&a)) == 0 && (r = tm_cli_http_call(&a.http, "DELETE", path, NULL, &res)) == 0) {
        if (a.c.json)
            r = tm_cli_print_json(res);
        else
            printf("removed %d quota(s) of team %s\n",
                   (int)cJSON_GetNumberValue(cJSON_GetObjectItem(res, "removed")), argv[optind]);
    }
    cJSON_Delete(res);
    tm_cli_cmd_close(&a);
    return r;
}

/* The quotas, then the lines of the usage that have no quota row of their
 * own (an org's teams together, teams without a quota that borrow). */
static int print_quotas(const cJSON *list)
{
    static const char *const cols[] = {"TEAM", "FLAVOR", "ORG", "QUOTA", "USED", "BORROWED", "LENT",
                                       "BORROWING_LIMIT", "LENDING_LIMIT", "WEIGHT"};
    const char *over = cJSON_GetStringValue(cJSON_GetObjectItem(list, "overcommit"));
    const char *error = cJSON_GetStringValue(cJSON_GetObjectItem(list, "error"));
    const cJSON *q, *u;
    struct tm_table t;

    tm_table_init(&t, 10, cols);
    cJSON_ArrayForEach(q, cJSON_GetObjectItem(list, "items")) {
        tm_cli_jcell(&t, q, "team");
        tm_cli_jcell(&t, q, "flavor");
        tm_cli_jcell(&t, q, "org");
        tm_cli_jcell(&t, q, "gpus");
        tm_cli_jcell(&t, q, "used");
        tm_cli_jcell(&t, q, "borrowed");
        tm_cli_jcell(&t, q, "lent");
        tm_cli_jcell(&t, q, "borrowing_limit");
        tm_cli_jcell(&t, q, "lending_limit");
        tm_cli_jcell(&t, q, "weight");
    }
    cJSON_ArrayForEach(u, cJSON_GetObjectItem(list, "usage")) {
        const char *team = cJSON_GetStringValue(cJSON_GetObjectItem(u, "team"));
        const char *flavor = cJSON_GetStringValue(cJSON_GetObjectItem(u, "flavor"));
        bool listed = false;
        cJSON_ArrayForEach(q, cJSON_GetObjectItem(list, "items")) {
            const char *qt = cJSON_GetStringValue(cJSON_GetObjectItem(q, "team"));
            const char *qf = cJSON_GetStringValue(cJSON_GetObjectItem(q, "flavor"));
            listed = listed || (team && flavor && qt && qf && !strcmp(team, qt) && !strcmp(flavor, qf));
        }
        if (listed)
            continue;
        tm_cli_jcell(&t, u, "team");
        tm_cli_jcell(&t, u, "flavor");
        tm_cli_jcell(&t, u, "org");
        tm_cli_jcell(&t, u, "quota");
        tm_cli_jcell(&t, u, "used");
        tm_cli_jcell(&t, u, "borrowed");
        tm_cli_jcell(&t, u, "lent");
        tm_table_cell(&t, "-");
        tm_table_cell(&t, "-");
        tm_table_cell(&t, "-");
    }
    int r = tm_cli_print_table(&t);
    if (over)
        printf("\novercommit: %s\n", over);
    if (error)
        printf("\nrefused by the scheduler, which runs without quotas: %s\n", error);
    if (!cJSON_IsArray(cJSON_GetObjectItem(list, "usage")))
        printf("\n(usage: none yet; the leader publishes it each pass)\n");
    return r;
}

static int quota_show(int argc, char **argv)
{
    static const struct option opts[] = {TM_CLI_API_OPTIONS, {0}};
    struct tm_cli_cmd a = {.c = {.cmd = "quota show", .api = true}};
    cJSON *list = NULL;
    int opt, r;

    optind = 1;
    opterr = 0;
    while ((opt = getopt_long(argc, argv, ":h", opts, NULL)) != -1) {
        if (opt == TM_CLI_OPT_HELP || opt == 'h') {
            printf("Usage: tarmac quota show [options]\n\n"
                   "Every quota with what its team uses, borrows and lends as of the last pass\n"
                   "(GET /v1/quotas), and the overcommit when the quotas exceed the fleet.\n\n"
                   "Options:\n%s", tm_cli_api_help);
            return TM_EXIT_OK;
        }
        if ((r = tm_cli_cmd_opt(&a, opt, argv)) > 1)
            return r;
    }
    if (optind < argc)
        return tm_cli_usage_error(a.c.cmd, "unexpected argument \"%s\"", argv[optind]);
    if ((r = tm_cli_cmd_open(&a)) == 0 && (r = tm_cli_http_call(&a.http, "GET", "/v1/quotas", NULL, &list)) == 0)
        r = a.c.json ? tm_cli_print_json(list) : print_quotas(list);
    cJSON_Delete(list);
    tm_cli_cmd_close(&a);
    return r;
}

int tm_cli_api_quota(int argc, char **argv)
{
    if (argc >= 2 && strcmp(argv[1], "set") == 0)
        return quota_set(argc - 1, argv + 1);
    if (argc >= 2 && strcmp(argv[1], "show") == 0)
        return quota_show(argc - 1, argv + 1);
    if (argc >= 2 && strcmp(argv[1], "rm") == 0)
        return quota_rm(argc - 1, argv + 1);
    if (argc >= 2 && (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0)) {
        printf("Usage: tarmac quota set TEAM --gpus N [--flavor F] [--borrowing-limit N] ...\n"
               "       tarmac quota show\n"
               "       tarmac quota rm TEAM [--flavor F]\n\n"
               "Set, list or remove teams' guaranteed GPU quotas (docs/quotas.md).\n"
               "\"tarmac quota set --help\" for the options.\n");
        return TM_EXIT_OK;
    }
    if (argc >= 2)
        return tm_cli_usage_error("quota", "unrecognized verb \"%s\" (valid: set, show, rm)", argv[1]);
    return tm_cli_usage_error("quota", "missing verb (valid: set, show, rm)");
}
