/*
 * controller/cli/fleet.c: `tarmac nodes`, `pools`, `decisions` and `why`
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

/* ---- nodes and pools --------------------------------------------------------- */

static bool node_live(const cJSON *n)
{
    const cJSON *s = cJSON_GetObjectItemCaseSensitive(n, "state");
    return !cJSON_IsString(s) ||
           (strcmp(s->valuestring, "terminated") != 0 && strcmp(s->valuestring, "interrupted") != 0);
}

int tm_cli_api_nodes(int argc, char **argv)
{
    enum { O_POOL = 1, O_STATE, O_LIMIT, O_ALL };
    static const struct option opts[] = {
        TM_CLI_API_OPTIONS,
        {"pool", required_argument, NULL, O_POOL}, {"state", required_argument, NULL, O_STATE},
        {"limit", required_argument, NULL, O_LIMIT}, {"all", no_argument, NULL, O_ALL}, {0},
    };
    static const char *const cols[] = {"ID", "POOL", "STATE", "POWER", "TYPE", "ZONE", "GPUS", "MODEL",
                                       "CAPACITY", "USD/H", "CORDONED", "INSTANCE", "ADDRESS", "REASON"};
    struct tm_cli_cmd a = {.c = {.cmd = "nodes", .api = true}};
    const char *pool = NULL, *state = NULL;
    char path[TM_CLI_PATH_MAX] = "/v1/nodes";
    long limit = TM_CLI_DEFAULT_LIMIT;
    bool all = false;
    cJSON *page = NULL;
    int opt, r;

    optind = 1;
    opterr = 0;
    while ((opt = getopt_long(argc, argv, ":h", opts, NULL)) != -1) {
        switch (opt) {
        case TM_CLI_OPT_HELP:
        case 'h':
            printf("Usage: tarmac nodes [--pool P] [--state S] [--all] [--limit N] [options]\n\n"
                   "List live nodes, newest first (GET /v1/nodes); terminated and interrupted ones\n"
                   "with --all or --state.\n"
                   "      --pool P             one pool's nodes\n"
                   "      --state S            requested|booting|ready|draining|terminating|terminated|interrupted\n"
                   "      --all                include terminated and interrupted nodes\n"
                   "      --limit N            at most N nodes (default %d)\n\n"
                   "Options:\n%s",
                   TM_CLI_DEFAULT_LIMIT, tm_cli_api_help);
            return TM_EXIT_OK;
        case O_POOL:
            if (!tm_job_spec_name_ok(optarg))
                return tm_cli_usage_error(a.c.cmd, "--pool: not a pool name: \"%s\"", optarg);
            pool = optarg;
            break;
        case O_STATE:
            if (tm_node_state_parse(optarg) < 0)
                return tm_cli_usage_error(a.c.cmd, "--state: must be requested, booting, ready, draining, "
                                                   "terminating, terminated or interrupted, not \"%s\"", optarg);
            state = optarg;
            break;
        case O_LIMIT:
            if ((r = tm_cli_parse_limit(&a, optarg, &limit)) != 0)
                return r;
            break;
        case O_ALL:
            all = true;
            break;
        default:
            if ((r = tm_cli_cmd_opt(&a, opt, argv)) > 1)
                return r;
        }
    }
    if (optind < argc)
        return tm_cli_usage_error(a.c.cmd, "unexpected argument \"%s\"", argv[optind]);
    tm_cli_query_add(path, sizeof(path), "pool", pool);
    tm_cli_query_add(path, sizeof(path), "state", state);
    if ((r = tm_cli_cmd_open(&a)) == 0 && (r = tm_cli_get_list(&a, path, limit, all || state ? NULL : node_live, &page)) == 0) {
        if (a.c.json) {
            r = tm_cli_print_json(page);
        } else {
            struct tm_table t;
            const cJSON *n;
            tm_table_init(&t, 14, cols);
            cJSON_ArrayForEach(n, cJSON_GetObjectItemCaseSensitive(page, "items")) {
                int64_t price = 0;
                tm_cli_jcell(&t, n, "id");
                tm_cli_jcell(&t, n, "pool");
                tm_cli_jcell(&t, n, "state");
                tm_cli_jcell(&t, n, "power");
                tm_cli_jcell(&t, n, "instance_type");
                tm_cli_jcell(&t, n, "zone");
                tm_cli_jcell(&t, n, "gpus");
                tm_cli_jcell(&t, n, "gpu_model");
                tm_cli_jcell(&t, n, "capacity_type");
                tm_cli_jnum(n, "price_uusd_per_hour", &price);
                tm_table_cell(&t, "%.4f", (double)price / 1e6);
                tm_cli_jcell(&t, n, "cordoned");
                tm_cli_jcell(&t, n, "instance_id");
                tm_cli_jcell(&t, n, "address");
                tm_cli_jcell(&t, n, "state_reason");
            }
            r = tm_cli_print_table(&t);
        }
    }
    cJSON_Delete(page);
    tm_cli_cmd_close(&a);
    return r;
}

int tm_cli_api_pools(int argc, char **argv)
{
    static const struct option opts[] = {TM_CLI_API_OPTIONS, {0}};
    static const char *const cols[] = {"NAME", "PROVIDER", "MODEL", "GPUS/NODE", "CAPACITY", "MIN",
                                       "MAX", "LIVE", "IDLE_GRACE_S", "TYPES"};
    struct tm_cli_cmd a = {.c = {.cmd = "pools", .api = true}};
    cJSON *page = NULL;
    int opt, r;

    optind = 1;
    opterr = 0;
    while ((opt = getopt_long(argc, argv, ":h", opts, NULL)) != -1) {
        if (opt == TM_CLI_OPT_HELP || opt == 'h') {
            printf("Usage: tarmac pools [options]\n\nList pools by name (GET /v1/pools).\n\nOptions:\n%s",
                   tm_cli_api_help);
            return TM_EXIT_OK;
        }
        if ((r = tm_cli_cmd_opt(&a, opt, argv)) > 1)
            return r;
    }
    if (optind < argc)
        return tm_cli_usage_error(a.c.cmd, "unexpected argument \"%s\"", argv[optind]);
    if ((r = tm_cli_cmd_open(&a)) == 0 && (r = tm_cli_get_list(&a, "/v1/pools", 0, NULL, &page)) == 0) {
        if (a.c.json) {
            r = tm_cli_print_json(page);
        } else {
            struct tm_table t;
            const cJSON *p;
            tm_table_init(&t, 10, cols);
            cJSON_ArrayForEach(p, cJSON_GetObjectItemCaseSensitive(page, "items")) {
                char types[256] = "";
                int64_t grace = 0;
                const cJSON *ty;
                tm_cli_jcell(&t, p, "name");
                tm_cli_jcell(&t, p, "provider");
                tm_cli_jcell(&t, p, "gpu_model");
                tm_cli_jcell(&t, p, "gpus_per_node");
                tm_cli_jcell(&t, p, "capacity_type");
                tm_cli_jcell(&t, p, "min_nodes");
                tm_cli_jcell(&t, p, "max_nodes");
                tm_cli_jcell(&t, p, "live_nodes");
                tm_cli_jnum(p, "idle_grace_ms", &grace);
                tm_table_cell(&t, "%" PRId64, grace / 1000);
                cJSON_ArrayForEach(ty, cJSON_GetObjectItemCaseSensitive(p, "instance_types")) {
                    size_t len = strlen(types);
                    if (cJSON_IsString(ty) && len + strlen(ty->valuestring) + 2 < sizeof(types))
                        snprintf(types + len, sizeof(types) - len, "%s%s", len ? "," : "",
                                 ty->valuestring);
                }
                tm_table_cell(&t, "%s", types);
            }
            r = tm_cli_print_table(&t);
        }
    }
    cJSON_Delete(page);
    tm_cli_cmd_close(&a);
    return r;
}

/* ---- decisions and why --------------------------------------------------------- */

static const char *const decision_kinds[] = {"job", "node", "pool", "instance", "budget", "provider"};

static bool subject_kind_ok(const char *k)
{
    for (size_t i = 0; i < sizeof(decision_kinds) / sizeof(decision_kinds[0]); i++)
        if (strcmp(k, decision_kinds[i]) == 0)
            return true;
    return false;
}

static int print_decisions_table(const cJSON *items)
{
    static const char *const cols[] = {"ID", "AT (UTC)", "KIND", "SUBJECT", "REASON"};
    struct tm_table t;
    const cJSON *d;

    tm_table_init(&t, 5, cols);
    cJSON_ArrayForEach(d, items) {
        char b[6][32];
        tm_cli_jcell(&t, d, "id");
        tm_table_cell(&t, "%s", tm_cli_fmt_ms(d, "at_ms", b[1], sizeof(b[1])));
        tm_cli_jcell(&t, d, "kind");
        tm_table_cell(&t, "%s:%s", tm_cli_jtext(d, "subject_kind", b[3], sizeof(b[3])),
                      tm_cli_jtext(d, "subject_id", b[4], sizeof(b[4])));
        tm_cli_jcell(&t, d, "reason");
    }
    return tm_cli_print_table(&t);
}

int tm_cli_api_decisions(int argc, char **argv)
{
    enum { O_SUBJECT = 1, O_KIND, O_LIMIT };
    static const struct option opts[] = {
        TM_CLI_API_OPTIONS,
        {"subject", required_argument, NULL, O_SUBJECT}, {"kind", required_argument, NULL, O_KIND},
        {"limit", required_argument, NULL, O_LIMIT}, {0},
    };
    struct tm_cli_cmd a = {.c = {.cmd = "decisions", .api = true}};
    char path[TM_CLI_PATH_MAX] = "/v1/decisions", skind[16] = "";
    const char *sid = NULL, *kind = NULL;
    long limit = TM_CLI_DEFAULT_LIMIT;
    cJSON *page = NULL;
    int opt, r;

    optind = 1;
    opterr = 0;
    while ((opt = getopt_long(argc, argv, ":h", opts, NULL)) != -1) {
        switch (opt) {
        case TM_CLI_OPT_HELP:
        case 'h':
            printf("Usage: tarmac decisions [--subject KIND:ID] [--kind K] [--limit N] [options]\n\n"
                   "The controller's decisions with their reasons, newest first (GET /v1/decisions).\n"
                   "\"tarmac why job ID\" shows one job's (or node's) in full.\n"
                   "      --subject KIND:ID    about job:ID, node:ID, pool:NAME, instance:ID, budget:..., provider:NAME\n"
                   "      --kind K             one kind of decision (place, launch, terminate, ...)\n"
                   "      --limit N            at most N (default %d)\n\n"
                   "Options:\n%s",
                   TM_CLI_DEFAULT_LIMIT, tm_cli_api_help);
            return TM_EXIT_OK;
        case O_SUBJECT: {
            const char *colon = strchr(optarg, ':');
            size_t kl = colon ? (size_t)(colon - optarg) : 0;
            if (!colon || kl == 0 || kl >= sizeof(skind) || !colon[1])
                return tm_cli_usage_error(a.c.cmd, "--subject: must be KIND:ID such as job:42 or node:7, not \"%s\"",
                                          optarg);
            memcpy(skind, optarg, kl);
            skind[kl] = '\0';
            if (!subject_kind_ok(skind))
                return tm_cli_usage_error(a.c.cmd, "--subject: kind must be job, node, pool, instance, budget or "
                                                   "provider, not \"%s\"", skind);
            sid = colon + 1;
            break;
        }
        case O_KIND:
            kind = optarg;
            break;
        case O_LIMIT:
            if ((r = tm_cli_parse_limit(&a, optarg, &limit)) != 0)
                return r;
            break;
        default:
            if ((r = tm_cli_cmd_opt(&a, opt, argv)) > 1)
                return r;
        }
    }
    if (optind < argc)
        return tm_cli_usage_error(a.c.cmd, "unexpected argument \"%s\"", argv[optind]);
    tm_cli_query_add(path, sizeof(path), "kind", kind);
    tm_cli_query_add(path, sizeof(path), "subject_kind", sid ? skind : NULL);
    tm_cli_query_add(path, sizeof(path), "subject_id", sid);
    if ((r = tm_cli_cmd_open(&a)) == 0 && (r = tm_cli_get_list(&a, path, limit, NULL, &page)) == 0)
        r = a.c.json ? tm_cli_print_json(page) : print_decisions_table(cJSON_GetObjectItemCaseSensitive(page, "items"));
    cJSON_Delete(page);
    tm_cli_cmd_close(&a);
    return r;
}

/* The subject's line at the top of `why`. */
static void print_why_subject(const char *kind, const cJSON *o)
{
    char b[8][48];

    if (strcmp(kind, "job") == 0) {
        printf("job %s (team %s, %s GPUs, %s%s): %s",
               tm_cli_jtext(o, "id", b[0], sizeof(b[0])), tm_cli_jtext(o, "team", b[1], sizeof(b[1])),
               tm_cli_fmt_gpus(o, b[2], sizeof(b[2])), tm_cli_jtext(o, "class", b[3], sizeof(b[3])),
               cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(o, "preemptible")) ? ", preemptible" : "",
               tm_cli_jtext(o, "state", b[4], sizeof(b[4])));
        if (cJSON_IsNumber(cJSON_GetObjectItemCaseSensitive(o, "node_id")))
            printf(" on node %s", tm_cli_jtext(o, "node_id", b[5], sizeof(b[5])));
        printf(", submitted %s UTC\n", tm_cli_fmt_ms(o, "submitted_ms", b[6], sizeof(b[6])));
    } else {
        printf("node %s (pool %s, %s, %s GPUs %s, %s): %s\n",
               tm_cli_jtext(o, "id", b[0], sizeof(b[0])), tm_cli_jtext(o, "pool", b[1], sizeof(b[1])),
               tm_cli_jtext(o, "instance_type", b[2], sizeof(b[2])), tm_cli_jtext(o, "gpus", b[3], sizeof(b[3])),
               tm_cli_jtext(o, "gpu_model", b[4], sizeof(b[4])), tm_cli_jtext(o, "capacity_type", b[5], sizeof(b[5])),
               tm_cli_jtext(o, "state", b[6], sizeof(b[6])));
    }
    const cJSON *why = cJSON_GetObjectItemCaseSensitive(o, "state_reason");
    if (cJSON_IsString(why) && why->valuestring[0])
        printf("  now: %s\n", why->valuestring);
    if (strcmp(kind, "job") == 0)
        tm_cli_print_members(o, "  ");
}

int tm_cli_api_why(int argc, char **argv)
{
    enum { O_LIMIT = 1 };
    static const struct option opts[] = {TM_CLI_API_OPTIONS, {"limit", required_argument, NULL, O_LIMIT}, {0}};
    struct tm_cli_cmd a = {.c = {.cmd = "why", .api = true}};
    char kind[8] = "", id[24], path[TM_CLI_PATH_MAX];
    const char *args[2] = {NULL, NULL};
    long limit = 20;
    cJSON *subject = NULL, *page = NULL;
    int opt, r, nargs = 0;

    optind = 1;
    opterr = 0;
    while ((opt = getopt_long(argc, argv, ":h", opts, NULL)) != -1) {
        if (opt == TM_CLI_OPT_HELP || opt == 'h') {
            printf("Usage: tarmac why job ID | node ID [--limit N] [options]\n"
                   "       tarmac why job:ID | node:ID\n\n"
                   "Why a job waits or runs where it does, why a node was launched or released:\n"
                   "the job or node as it is now (GET /v1/jobs/ID or /v1/nodes/ID), then the\n"
                   "controller's decisions about it, newest first, each with its reason and the\n"
                   "numbers it was made from (GET /v1/decisions?subject_kind=..&subject_id=..).\n"
                   "      --limit N            at most N decisions (default 20)\n"
                   "--output json prints {\"job\"|\"node\": the object, \"decisions\": the page}.\n\n"
                   "Options:\n%s",
                   tm_cli_api_help);
            return TM_EXIT_OK;
        }
        if (opt == O_LIMIT) {
            if ((r = tm_cli_parse_limit(&a, optarg, &limit)) != 0)
                return r;
        } else if ((r = tm_cli_cmd_opt(&a, opt, argv)) > 1) {
            return r;
        }
    }
    for (; optind < argc; optind++) {
        if (nargs == 2)
            return tm_cli_usage_error(a.c.cmd, "unexpected argument \"%s\"", argv[optind]);
        args[nargs++] = argv[optind];
    }
    /* "job 12" or "job:12". */
    const char *v = args[1];
    size_t kl;
    if (nargs == 1 && args[0] && strchr(args[0], ':')) {
        kl = (size_t)(strchr(args[0], ':') - args[0]);
        v = strchr(args[0], ':') + 1;
    } else if (nargs == 2) {
        kl = strlen(args[0]);
    } else {
        return tm_cli_usage_error(a.c.cmd, "say what about: \"why job ID\" or \"why node ID\"");
    }
    if (!((kl == 3 && strncmp(args[0], "job", 3) == 0) || (kl == 4 && strncmp(args[0], "node", 4) == 0)))
        return tm_cli_usage_error(a.c.cmd, "must be \"job ID\" or \"node ID\", not \"%s\"", args[0]);
    memcpy(kind, args[0], kl);
    kind[kl] = '\0';
    if ((r = tm_cli_parse_id(&a, kind, v, id, sizeof(id))) != 0)
        return r;

    if ((r = tm_cli_cmd_open(&a)) != 0)
        return r;
    snprintf(path, sizeof(path), "/v1/%ss/%s", kind, id);
    if ((r = tm_cli_http_call(&a.http, "GET", path, NULL, &subject)) != 0)
        goto out;
    snprintf(path, sizeof(path), "/v1/decisions?subject_kind=%s&subject_id=%s", kind, id);
    if ((r = tm_cli_get_list(&a, path, limit, NULL, &page)) != 0)
        goto out;
    if (a.c.json) {
        cJSON *o = cJSON_CreateObject();
        if (!o) {
            r = TM_EXIT_FAIL;
            goto out;
        }
        cJSON_AddItemToObject(o, kind, subject);
        cJSON_AddItemToObject(o, "decisions", page);
        subject = page = NULL;
        r = tm_cli_print_json(o);
        cJSON_Delete(o);
        goto out;
    }
    print_why_subject(kind, subject);
    const cJSON *items = cJSON_GetObjectItemCaseSensitive(page, "items"), *d;
    if (cJSON_GetArraySize(items) == 0) {
        printf("no decisions about %s %s yet\n", kind, id);
        goto out;
    }
    printf("decisions, newest first:\n");
    cJSON_ArrayForEach(d, items) {
        char b[3][48];
        const cJSON *inputs = cJSON_GetObjectItemCaseSensitive(d, "inputs");
        char *in = inputs ? cJSON_PrintUnformatted(inputs) : NULL;
        printf("  %s UTC  %-12s #%s\n", tm_cli_fmt_ms(d, "at_ms", b[0], sizeof(b[0])),
               tm_cli_jtext(d, "kind", b[1], sizeof(b[1])), tm_cli_jtext(d, "id", b[2], sizeof(b[2])));
        printf("      %s\n", tm_cli_jtext(d, "reason", b[0], sizeof(b[0])));
        if (in && strcmp(in, "{}") != 0 && strcmp(in, "null") != 0)
            printf("      inputs: %s\n", in);
        free(in);
    }
    if (cJSON_IsString(cJSON_GetObjectItemCaseSensitive(page, "next_cursor")))
        printf("(older decisions: --limit N)\n");
out:
    cJSON_Delete(subject);
    cJSON_Delete(page);
    tm_cli_cmd_close(&a);
    return r;
}
