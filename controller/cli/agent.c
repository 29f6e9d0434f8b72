/*
 * controller/cli/agent.c: `tarmac agent`, the entry of the node agent
 * (controller/agent/agent.h): options, then the agent's own loop.
 */
#include <getopt.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/crypto.h>

#include "controller/agent/agent.h"
#include "controller/agent/logtail.h"
#include "controller/agent/metadata.h"
#include "controller/cli/cli.h"
#include "core/address.h"
#include "core/err.h"
#include "core/file.h"
#include "core/log.h"
#include "core/units.h"

static const char agent_help[] =
    "Usage: tarmac agent --controller URL --node-id N --work-dir DIR [options]\n"
    "       tarmac agent --join URL --pool POOL --join-token-file FILE --work-dir DIR [options]\n"
    "\n"
    "Run the node agent: enroll once, heartbeat with GPU samples, run the jobs\n"
    "placed on this node, report their exits, forward interruption notices.\n"
    "\n"
    "  --controller URL          the controller API (https://..., or http:// on loopback)\n"
    "  --node-id N               this node's id\n"
    "  --work-dir DIR            token, state.json and jobs/ live here\n"
    "  --enroll-secret-file FILE the single-use enrollment secret (or TARMAC_ENROLL_SECRET)\n"
    "  --join URL                join an owned pool at this controller (docs/owned.md);\n"
    "                            no --node-id: the join gives it, and DIR/node_key keeps it\n"
    "  --pool POOL               with --join: the owned pool\n"
    "  --join-token-file FILE    with --join: the join token (tarmac join-token create),\n"
    "                            needed for the first join only\n"
    "  --ca-file PEM             CA bundle for the controller's certificate\n"
    "  --allow-insecure-http     allow plain http to a host that is not loopback\n"
    "  --gpu-fake FILE           read GPUs from a fake file instead of NVML\n"
    "  --metadata KIND           none, or the cloud whose notices to read (default none)\n"
    "  --metadata-url URL        the metadata service address (tests)\n"
    "  --heartbeat-period D      default 10s\n"
    "  --sample-period D         default 10s\n"
    "  --container-template T    command for jobs with an image (see controller/agent/README.md)\n"
    "  --container-stop-template T  run after the grace for a job with an image\n"
    "                            (default \"docker kill {name}\" with the default template)\n"
    "  --checkpoint-signal SIG   default TERM\n"
    "  --kill-grace D            default 30s\n"
    "  --retry-max D             longest wait between tries while the controller is away\n"
    "                            (default 60s, 1s .. 10m)\n"
    "  --log-cap BYTES           per-job log cap (default 64 MiB)\n"
    "  --job-uids FIRST-LAST     UIDs for jobs' own users (default 70000-79999; root only)\n"
    "  --advertise-addr IP       this node's address for its jobs' peers (default: the cloud's\n"
    "                            private IPv4 from --metadata, 127.0.0.1 with local)\n"
    "  --job-gid GID             one group for every job (default: a group per job, its UID)\n"
    "  --jobs-as-agent-user      without root: run jobs as the agent's user, unisolated\n"
    "  --log-level LEVEL         debug|info|warn|error\n";

enum {
    OPT_CONTROLLER = 1,
    OPT_NODE,
    OPT_DIR,
    OPT_SECRET_FILE,
    OPT_CA,
    OPT_INSECURE,
    OPT_FAKE,
    OPT_MD,
    OPT_MD_URL,
    OPT_HB,
    OPT_SAMPLE,
    OPT_TEMPLATE,
    OPT_CKPT,
    OPT_STOP_TEMPLATE,
    OPT_GRACE,
    OPT_RETRY_MAX,
    OPT_LOGCAP,
    OPT_LOGLEVEL,
    OPT_JOB_UIDS,
    OPT_JOB_GID,
    OPT_AS_AGENT,
    OPT_ADVERTISE,
    OPT_JOIN,
    OPT_POOL,
    OPT_JOIN_TOKEN_FILE,
    OPT_HELP,
};

static const struct {
    const char *name;
    int sig;
} signals[] = {
    {"TERM", SIGTERM}, {"INT", SIGINT}, {"HUP", SIGHUP}, {"USR1", SIGUSR1}, {"USR2", SIGUSR2},
    {"QUIT", SIGQUIT}, {"KILL", SIGKILL},
};

/* FIRST-LAST: UIDs above 0 (never root) and below (uid_t)-1. */
static int parse_uid_range(const char *s, uint32_t *first, uint32_t *last)
{
    char *end;
    long long a, b;

    a = strtoll(s, &end, 10);
    if (end == s || *end != '-')
        return -1;
    s = end + 1;
    b = strtoll(s, &end, 10);
    if (end == s || *end || a < 1 || b < a || b >= 4294967295LL)
        return -1;
    *first = (uint32_t)a;
    *last = (uint32_t)b;
    return 0;
}

static int parse_signal(const char *s)
{
    char *end;
    long n;

    if (strncmp(s, "SIG", 3) == 0)
        s += 3;
    for (size_t i = 0; i < sizeof(signals) / sizeof(signals[0]); i++)
        if (strcmp(s, signals[i].name) == 0)
            return signals[i].sig;
    n = strtol(s, &end, 10);
    if (*s && !*end && n > 0 && n < 65)
        return (int)n;
    return -1;
}

static int usage_error(const char *fmt, const char *arg)
{
    fprintf(stderr, "tarmac agent: ");
    fprintf(stderr, fmt, arg);
    fprintf(stderr, "\nRun \"tarmac agent --help\" for the options.\n");
    return TM_EXIT_USAGE;
}

static int duration(const char *opt, const char *arg, int64_t min_ms, int64_t *ret)
{
    if (tm_duration_parse(arg, ret) != 0 || *ret < min_ms) {
        fprintf(stderr, "tarmac agent: bad duration for %s: \"%s\" (e.g. 10s, 500ms, 1m)\n", opt, arg);
        return TM_EXIT_USAGE;
    }
    return 0;
}

static const struct option agent_opts[] = {
    {"controller", required_argument, NULL, OPT_CONTROLLER},
    {"node-id", required_argument, NULL, OPT_NODE},
    {"work-dir", required_argument, NULL, OPT_DIR},
    {"enroll-secret-file", required_argument, NULL, OPT_SECRET_FILE},
    {"ca-file", required_argument, NULL, OPT_CA},
    {"allow-insecure-http", no_argument, NULL, OPT_INSECURE},
    {"gpu-fake", required_argument, NULL, OPT_FAKE},
    {"metadata", required_argument, NULL, OPT_MD},
    {"metadata-url", required_argument, NULL, OPT_MD_URL},
    {"heartbeat-period", required_argument, NULL, OPT_HB},
    {"sample-period", required_argument, NULL, OPT_SAMPLE},
    {"container-template", required_argument, NULL, OPT_TEMPLATE},
    {"checkpoint-signal", required_argument, NULL, OPT_CKPT},
    {"container-stop-template", required_argument, NULL, OPT_STOP_TEMPLATE},
    {"kill-grace", required_argument, NULL, OPT_GRACE},
    {"retry-max", required_argument, NULL, OPT_RETRY_MAX},
    {"log-cap", required_argument, NULL, OPT_LOGCAP},
    {"log-level", required_argument, NULL, OPT_LOGLEVEL},
    {"job-uids", required_argument, NULL, OPT_JOB_UIDS},
    {"job-gid", required_argument, NULL, OPT_JOB_GID},
    {"jobs-as-agent-user", no_argument, NULL, OPT_AS_AGENT},
    {"advertise-addr", required_argument, NULL, OPT_ADVERTISE},
    {"join", required_argument, NULL, OPT_JOIN},
    {"pool", required_argument, NULL, OPT_POOL},
    {"join-token-file", required_argument, NULL, OPT_JOIN_TOKEN_FILE},
    {"help", no_argument, NULL, OPT_HELP},
    {NULL, 0, NULL, 0},
};

/* What the command line gives besides the agent's options. */
struct agent_args {
    const char *secret_file;
    const char *join_url;
    const char *join_token_file;
    bool insecure;
};

/* One option of the command line into *o or *a: -1 to go on, else the
 * exit code (after --help, or a usage error). */
static int parse_option(int opt, char **argv, struct tm_agent_options *o, struct agent_args *a)
{
    char *end;
    int r;

    switch (opt) {
    case OPT_CONTROLLER: o->controller_url = optarg; break;
    case OPT_NODE:
        o->node_id = strtoll(optarg, &end, 10);
        if (!*optarg || *end || o->node_id <= 0)
            return usage_error("--node-id: must be a positive integer, got \"%s\"", optarg);
        break;
    case OPT_DIR: o->work_dir = optarg; break;
    case OPT_SECRET_FILE: a->secret_file = optarg; break;
    case OPT_CA: o->ca_file = optarg; break;
    case OPT_INSECURE: a->insecure = true; break;
    case OPT_FAKE: o->gpu_fake = optarg; break;
    case OPT_MD:
        if (strcmp(optarg, "none") != 0 && !tm_md_kind_known(optarg)) {
            char kinds[128], fmt[192];

            tm_md_kind_names(kinds, sizeof(kinds));
            snprintf(fmt, sizeof(fmt), "--metadata: expected none|%s, got \"%%s\"", kinds);
            return usage_error(fmt, optarg);
        }
        o->metadata_kind = optarg;
        break;
    case OPT_MD_URL: o->metadata_url = optarg; break;
    case OPT_HB:
        if ((r = duration("--heartbeat-period", optarg, 100, &o->heartbeat_ms)))
            return r;
        break;
    case OPT_SAMPLE:
        if ((r = duration("--sample-period", optarg, 100, &o->sample_ms)))
            return r;
        break;
    case OPT_TEMPLATE: o->container_template = optarg; break;
    case OPT_STOP_TEMPLATE: o->container_stop = optarg; break;
    case OPT_CKPT:
        o->checkpoint_signal = parse_signal(optarg);
        if (o->checkpoint_signal < 0)
            return usage_error("--checkpoint-signal: unrecognized signal \"%s\"", optarg);
        break;
    case OPT_GRACE:
        if ((r = duration("--kill-grace", optarg, 0, &o->kill_grace_ms)))
            return r;
        break;
    case OPT_RETRY_MAX:
        if ((r = duration("--retry-max", optarg, 1000, &o->retry_max_ms)))
            return r;
        if (o->retry_max_ms > 600000)
            return usage_error("--retry-max: at most 10m, got \"%s\"", optarg);
        break;
    case OPT_LOGCAP:
        o->log_cap_bytes = strtoll(optarg, &end, 10);
        if (!*optarg || *end || o->log_cap_bytes < 2 * TM_AGENT_TAIL_MAX)
            return usage_error("--log-cap: must be a byte count of at least 8192, got \"%s\"", optarg);
        break;
    case OPT_LOGLEVEL:
        if (tm_log_level_parse(optarg) < 0)
            return usage_error("--log-level: expected debug|info|warn|error, got \"%s\"", optarg);
        tm_log_set_level((enum tm_log_level)tm_log_level_parse(optarg));
        break;
    case OPT_JOB_UIDS:
        if (parse_uid_range(optarg, &o->job_uid_first, &o->job_uid_last) != 0)
            return usage_error("--job-uids: expected FIRST-LAST, UIDs from 1 to 4294967294 with "
                               "FIRST <= LAST, got \"%s\"", optarg);
        break;
    case OPT_JOB_GID:
        o->job_gid = strtoll(optarg, &end, 10);
        if (!*optarg || *end || o->job_gid <= 0 || o->job_gid >= 4294967295LL)
            return usage_error("--job-gid: must be a GID from 1 to 4294967294, got \"%s\"", optarg);
        break;
    case OPT_AS_AGENT: o->jobs_as_agent_user = true; break;
    case OPT_ADVERTISE:
        if (!tm_ip_address_ok(optarg))
            return usage_error("--advertise-addr: must be an IPv4 or IPv6 address, not a host name, got \"%s\"",
                               optarg);
        o->advertise_addr = optarg;
        break;
    case OPT_JOIN: a->join_url = optarg; break;
    case OPT_POOL: o->join_pool = optarg; break;
    case OPT_JOIN_TOKEN_FILE: a->join_token_file = optarg; break;
    case OPT_HELP:
    case 'h': fputs(agent_help, stdout); return TM_EXIT_OK;
    case ':': return usage_error("%s needs a value", argv[optind - 1]);
    default: return usage_error("unrecognized option \"%s\"", argv[optind - 1]);
    }
    return -1;
}

/* The options the agent cannot run without, and a controller URL that
 * keeps the token out of the clear: 0, or the exit code after printing. */
static int check_options(const struct tm_agent_options *o, bool insecure)
{
    if (!o->controller_url)
        return usage_error("%s", "--controller (or --join) is required");
    if (!o->node_id && !o->join_pool)
        return usage_error("%s", "--node-id is required");
    if (!o->work_dir)
        return usage_error("%s", "--work-dir is required");
    if (strncmp(o->controller_url, "https://", 8) != 0) {
        if (strncmp(o->controller_url, "http://", 7) != 0)
            return usage_error("--controller: expected an http:// or https:// URL, got \"%s\"",
                               o->controller_url);
        if (!tm_agent_url_is_loopback(o->controller_url) && !insecure)
            return usage_error("--controller: plain http to \"%s\" would send the token in the clear; "
                               "use https with --ca-file, or --allow-insecure-http",
                               o->controller_url);
    }
    return 0;
}

/* --join's rules: its URL is the controller's, a pool goes with it, and it
 * replaces --node-id and the enrollment secret (the join token is read as
 * the secret is, from its own file).  0, or the exit code after printing. */
static int join_options(struct tm_agent_options *o, struct agent_args *a)
{
    if (!a->join_url) {
        if (o->join_pool || a->join_token_file)
            return usage_error("%s", "--pool and --join-token-file go with --join");
        return 0;
    }
    if (o->controller_url)
        return usage_error("%s", "--join and --controller: give one (--join is the controller's URL)");
    if (o->node_id)
        return usage_error("%s", "--join and --node-id: a joining machine is given its node");
    if (a->secret_file)
        return usage_error("%s", "--join and --enroll-secret-file: give --join-token-file");
    if (!o->join_pool)
        return usage_error("%s", "--pool is required with --join");
    o->controller_url = a->join_url;
    a->secret_file = a->join_token_file;
    return 0;
}

/* The enrollment secret, from secret_file (its first line) else
 * TARMAC_ENROLL_SECRET, into *ret (NULL when none or empty; free it):
 * 0, or the exit code after printing. */
static int read_secret(const char *secret_file, char **ret)
{
    char *secret = NULL;

    if (secret_file) {
        size_t len = 0;
        char err[256];
        if (tm_file_read(secret_file, 4096, &secret, &len, err, sizeof(err)) != 0) {
            fprintf(stderr, "tarmac agent: --enroll-secret-file: %s\n", err);
            return TM_EXIT_USAGE;
        }
        secret[strcspn(secret, "\r\n")] = '\0';
    } else if (getenv("TARMAC_ENROLL_SECRET")) {
        secret = strdup(getenv("TARMAC_ENROLL_SECRET"));
        if (!secret)
            return TM_EXIT_FAIL;
    }
    /* Jobs inherit the environment: the secret must not reach them. */
    unsetenv("TARMAC_ENROLL_SECRET");
    if (secret && !secret[0]) {
        free(secret);
        secret = NULL;
    }
    *ret = secret;
    return 0;
}

int tm_cli_agent(int argc, char **argv)
{
    struct tm_agent_options o = {
        .metadata_kind = "none",
        .heartbeat_ms = 10000,
        .sample_ms = 10000,
        .checkpoint_signal = SIGTERM,
        .kill_grace_ms = 30000,
        .retry_max_ms = 60000,
        .log_cap_bytes = TM_AGENT_LOG_CAP_DEFAULT,
        .job_uid_first = TM_AGENT_JOB_UID_FIRST,
        .job_uid_last = TM_AGENT_JOB_UID_LAST,
        .job_gid = -1,
    };
    struct agent_args a = {0};
    char *secret = NULL;
    int opt, r;

    optind = 1;
    opterr = 0;
    while ((opt = getopt_long(argc, argv, ":h", agent_opts, NULL)) != -1) {
        r = parse_option(opt, argv, &o, &a);
        if (r >= 0)
            return r;
    }
    if (optind < argc)
        return usage_error("unexpected argument \"%s\"", argv[optind]);
    r = join_options(&o, &a);
    if (r != 0)
        return r;
    r = check_options(&o, a.insecure);
    if (r != 0)
        return r;
    r = read_secret(a.secret_file, &secret);
    if (r != 0)
        return r;
    if (secret)
        tm_log_add_secret(secret);
    o.enroll_secret = secret;
    if (a.join_url) {
        o.join_token = secret;
        o.enroll_secret = NULL;
    }
    r = tm_agent_run(&o);
    if (secret) {
        OPENSSL_cleanse(secret, strlen(secret));
        free(secret);
    }
    return r == 0 ? TM_EXIT_OK : TM_EXIT_FAIL;
}
