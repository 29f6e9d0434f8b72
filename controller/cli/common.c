/*
 * controller/cli/common.c: what every command shares (common.h): the options and
 * their help, the configuration, the blocking database connection, the
 * clock, and the parser of `submit`'s options, which `db submit` and the
 * API's submit share.
 */
#include "controller/cli/cli.h"
#include "controller/cli/common.h"

#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cjson/cJSON.h>
#include <libpq-fe.h>

#include "controller/daemon/controller.h"
#include "controller/io/pg_uv.h"
#include "controller/sched/scheduler.h"
#include "controller/spec/job_fit.h"
#include "controller/spec/job_spec.h"
#include "controller/store/migrate.h"
#include "controller/store/store.h"
#include "core/model.h"
#include "core/clock.h"
#include "core/config.h"
#include "core/err.h"
#include "core/log.h"

const char tm_cli_db_help[] =
    "      --config FILE        configuration file (env TARMAC_CONFIG)\n"
    "      --database-url URL   PostgreSQL URL (env TARMAC_DATABASE_URL; else the config's)\n"
    "      --output table|json  output format (default table)\n"
    "  -h, --help               this help\n";

const char tm_cli_api_help[] =
    "      --url URL            the API (env TARMAC_URL; else the client config's url; else\n"
    "                           http(s)://LISTEN of --config FILE; else http://127.0.0.1:8080)\n"
    "      --cacert FILE        CA bundle for an https URL (env TARMAC_CA_FILE)\n"
    "      --config FILE        the server's configuration, for its listen address\n"
    "      --output table|json  output format (default table; json is the API's answer)\n"
    "      --verbose            each request and answer status on stderr (never the token)\n"
    "  -h, --help               this help\n"
    "The token comes from TARMAC_TOKEN, else the client config (TARMAC_CLIENT_CONFIG,\n"
    "default ~/.config/tarmac/client.yaml: keys url, token or token_file, ca_file).\n";

int tm_cli_usage_error(const char *cmd, const char *fmt, ...)
{
    va_list ap;
    fprintf(stderr, "tarmac %s: ", cmd);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fprintf(stderr, "\nTry \"tarmac %s --help\".\n", cmd);
    return TM_EXIT_USAGE;
}

int tm_cli_common_opt(struct tm_cli_common *c, int opt, const char *arg, char **argv)
{
    switch (opt) {
    case ':':
        return tm_cli_usage_error(c->cmd, "option %s needs a value", argv[optind - 1]);
    case '?':
        return tm_cli_usage_error(c->cmd, "unrecognized option \"%s\"", argv[optind - 1]);
    case TM_CLI_OPT_CONFIG:
        c->config_path = arg;
        return 1;
    case TM_CLI_OPT_DATABASE_URL:
        /* The API forms list --database-url only to say this. */
        if (c->api) {
            static const char *const with_db[] = {"submit", "jobs", "nodes", "pools", "decisions"};
            for (size_t i = 0; i < sizeof(with_db) / sizeof(with_db[0]); i++)
                if (strcmp(c->cmd, with_db[i]) == 0)
                    return tm_cli_usage_error(c->cmd, "--database-url: this command talks to the API "
                                                      "(--url); \"tarmac db %s\" reads the database directly",
                                              c->cmd);
            return tm_cli_usage_error(c->cmd, "--database-url: this command talks to the API (--url)");
        }
        c->database_url = arg;
        return 1;
    case TM_CLI_OPT_URL:
        c->url = arg;
        return 1;
    case TM_CLI_OPT_CACERT:
        c->cacert = arg;
        return 1;
    case TM_CLI_OPT_VERBOSE:
        c->verbose = true;
        return 1;
    case TM_CLI_OPT_OUTPUT:
        if (strcmp(arg, "json") == 0)
            c->json = true;
        else if (strcmp(arg, "table") == 0)
            c->json = false;
        else
            return tm_cli_usage_error(c->cmd, "--output: must be \"table\" or \"json\", not \"%s\"", arg);
        return 1;
    default:
        return tm_cli_usage_error(c->cmd, "unrecognized option");
    }
}

int tm_cli_load_config(struct tm_cli_common *c, bool required)
{
    char err[512];
    const char *path = tm_config_path(c->config_path);

    if (!path) {
        if (required) {
            fprintf(stderr, "tarmac %s: no configuration: give --config FILE or set TARMAC_CONFIG\n", c->cmd);
            return TM_EXIT_USAGE;
        }
        return 0;
    }
    if (tm_config_load(path, &c->cfg, err, sizeof(err)) < 0 ||
        tm_config_apply_env(&c->cfg, err, sizeof(err)) < 0) {
        fprintf(stderr, "tarmac %s: invalid configuration: %s\n", c->cmd, err);
        return TM_EXIT_USAGE;
    }
    c->have_cfg = true;
    return 0;
}

static const char *database_url(struct tm_cli_common *c)
{
    if (c->database_url)
        return c->database_url;
    if (getenv("TARMAC_DATABASE_URL") && *getenv("TARMAC_DATABASE_URL"))
        return getenv("TARMAC_DATABASE_URL");
    if (c->have_cfg)
        return c->cfg.database_url;
    return NULL;
}

PGconn *tm_cli_connect_db(struct tm_cli_common *c)
{
    char err[1024];
    const char *url;
    PGconn *conn;

    if (!c->have_cfg && tm_cli_load_config(c, false) != 0)
        return NULL;
    url = database_url(c);
    if (!url) {
        fprintf(stderr, "tarmac %s: no database: give --database-url, set TARMAC_DATABASE_URL or --config\n",
                c->cmd);
        return NULL;
    }
    conn = tm_store_connect_blocking(url, err, sizeof(err));
    if (!conn)
        fprintf(stderr, "tarmac %s: %s\n", c->cmd, err);
    return conn;
}

void tm_cli_common_release(struct tm_cli_common *c)
{
    if (c->have_cfg)
        tm_config_release(&c->cfg);
}

/* ---- submit ------------------------------------------------------------ */

bool tm_cli_parse_long(const char *s, long min, long max, long *ret)
{
    char *end;
    long v;
    errno = 0;
    v = strtol(s, &end, 10);
    if (errno || end == s || *end || v < min || v > max)
        return false;
    *ret = v;
    return true;
}

/* Options of `tarmac submit` and the job field (controller/spec/job_spec.h)
 * each one sets: the CLI and the API validate with the same rules. */
static const struct {
    const char *option;
    const char *field;
} submit_fields[] = {
    {"team", "team"}, {"name", "name"}, {"command", "command"}, {"gpus", "gpus"},
    {"gpu-milli", "gpu_milli"}, {"nodes", "nodes"}, {"cpu-milli", "cpu_milli"},
    {"memory-mib", "memory_mib"}, {"gpu-model", "gpu_model"}, {"pool", "pool"},
    {"class", "class"}, {"priority", "priority"}, {"estimate", "runtime_estimate_s"},
    {"runtime", "sim_runtime"}, {"deadline", "deadline"}, {"env", "env"}, {"image", "image"},
};

/* A job_spec error, named by the option the user typed. */
int tm_cli_spec_error(const char *cmd, const struct tm_spec_error *e)
{
    const char *name = e->field;
    for (size_t i = 0; i < sizeof(submit_fields) / sizeof(submit_fields[0]); i++)
        if (strcmp(submit_fields[i].field, e->field) == 0)
            name = submit_fields[i].option;
    return tm_cli_usage_error(cmd, "--%s: %s", name, e->message);
}

int tm_cli_submit_parse(int argc, char **argv, struct tm_cli_common *c, bool api,
                        struct tm_job_spec *spec, long *ret_count)
{
    enum { O_FIELD = 1, O_PRE = O_FIELD + 32, O_CKPT, O_COUNT };
    static const struct option db_common[] = {TM_CLI_DB_OPTIONS}, api_common[] = {TM_CLI_API_OPTIONS};
    enum { NFIELDS = sizeof(submit_fields) / sizeof(submit_fields[0]) };
    struct option opts[NFIELDS + 4 + sizeof(api_common) / sizeof(api_common[0])];
    const struct option *common = api ? api_common : db_common;
    size_t ncommon = api ? sizeof(api_common) / sizeof(api_common[0]) : sizeof(db_common) / sizeof(db_common[0]);
    size_t nopt = 0;
    struct tm_spec_error serr;
    long count = 1;
    int opt, r;

    for (size_t i = 0; i < ncommon; i++)
        opts[nopt++] = common[i];
    for (size_t i = 0; i < NFIELDS; i++)
        opts[nopt++] = (struct option){submit_fields[i].option, required_argument, NULL, O_FIELD + (int)i};
    opts[nopt++] = (struct option){"preemptible", no_argument, NULL, O_PRE};
    opts[nopt++] = (struct option){"checkpointable", no_argument, NULL, O_CKPT};
    opts[nopt++] = (struct option){"count", required_argument, NULL, O_COUNT};
    opts[nopt] = (struct option){0};
    tm_job_spec_init(spec);

    optind = 1;
    opterr = 0;
    while ((opt = getopt_long(argc, argv, ":h", opts, NULL)) != -1) {
        if (opt == TM_CLI_OPT_HELP || opt == 'h') {
            printf("Usage: tarmac %s --team TEAM (--gpus N | --gpu-milli M) [options]\n\n"
                   "Queue a job (or --count copies)%s.  Nothing is written when any field is invalid.\n\n"
                   "Job:\n"
                   "      --team TEAM          owning team (required)\n"
                   "      --gpus N             whole GPUs per node, 1..16\n"
                   "      --gpu-milli M        a share of one GPU, 1..999 milli-GPU\n"
                   "      --nodes N            gang size (nodes, all or nothing), default 1\n"
                   "      --gpu-model M[|M2]   acceptable GPU models (default any)\n"
                   "      --pool POOL          pin to one pool\n"
                   "      --class C            train|eval|preprocess|inference|batch (default train)\n"
                   "      --priority N         -1000..1000, default 0\n"
                   "      --preemptible        may run on spot capacity and be restarted\n"
                   "      --checkpointable     can checkpoint and resume\n"
                   "      --estimate DUR       runtime estimate (90s, 15m, 2h, 1d)\n"
                   "%s"
                   "      --deadline DUR       finish within DUR from now\n"
                   "      --cpu-milli N, --memory-mib N, --name NAME, --command CMD\n"
                   "      --env NAME=VALUE     the job's environment on its node (repeat; at most 64)\n"
                   "      --image IMAGE        run the command in this container image\n"
                   "      --count N            submit N identical jobs, 1..10000\n\n"
                   "Options:\n%s",
                   c->cmd, api ? " through the API (POST /v1/jobs, one request per job)" : " straight into the database",
                   api ? "" : "      --runtime DUR        how long a simulated node runs it (sim only)\n",
                   api ? tm_cli_api_help : tm_cli_db_help);
            if (api)
                printf("--output json prints a JSON array of the jobs as the API returned them.\n");
            return TM_EXIT_OK;
        }
        if (opt >= O_FIELD && opt < O_FIELD + (int)NFIELDS) {
            if (api && strcmp(submit_fields[opt - O_FIELD].field, "sim_runtime") == 0)
                return tm_cli_usage_error(c->cmd, "--runtime: the API takes no simulated runtime (a simulated "
                                                  "node runs a job for its --estimate); \"tarmac db submit\" does");
            if (tm_job_spec_set_text(spec, submit_fields[opt - O_FIELD].field, optarg, &serr) < 0)
                return tm_cli_spec_error(c->cmd, &serr);
        } else if (opt == O_PRE) {
            spec->preemptible = true;
        } else if (opt == O_CKPT) {
            spec->checkpointable = true;
        } else if (opt == O_COUNT) {
            if (!tm_cli_parse_long(optarg, 1, 10000, &count))
                return tm_cli_usage_error(c->cmd, "--count: must be a whole number from 1 to 10000, not \"%s\"", optarg);
        } else if ((r = tm_cli_common_opt(c, opt, optarg, argv)) > 1) {
            return r;
        }
    }
    if (optind < argc)
        return tm_cli_usage_error(c->cmd, "unexpected argument \"%s\"", argv[optind]);
    if (tm_job_spec_finish(spec, &serr) < 0)
        return tm_cli_spec_error(c->cmd, &serr);
    *ret_count = count;
    return -1;
}
