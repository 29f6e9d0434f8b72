/*
 * controller/cli_api.c: the commands that talk to the HTTP API (see cli.h
 * for the rule, cli_client.h for where the URL and the token come from).
 *
 * Each command checks its own input first (exit 2, nothing sent), makes
 * its requests, and prints a table for people or, with --output json, the
 * API's JSON: a list as the API pages it, {"items": [...], "next_cursor":
 * ...}, with the pages this command followed joined into one; one object
 * as the API answered it.  A refusal from the server is printed as
 * "tarmac: STATUS: ERROR (field FIELD)" and exits 1.
 */
#include "controller/cli.h"

#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cjson/cJSON.h>

#include "controller/cli_client.h"
#include "controller/cli_common.h"
#include "controller/cli_http.h"
#include "controller/cli_table.h"
#include "controller/job_spec.h"
#include "controller/model.h"

#define PATH_MAX_LEN 2048
#define DEFAULT_LIMIT 100
#define LIMIT_MAX 1000000

/* One API command: its options, where it talks to, the open client. */
struct api_cmd {
    struct tm_cli_common c;
    struct tm_cli_endpoint ep;
    struct tm_cli_http http;
    bool open;
};

static int api_open(struct api_cmd *a)
{
    int r = tm_cli_endpoint_resolve(&a->c, true, &a->ep);
    if (r != 0)
        return r;
    r = tm_cli_http_init(&a->http, a->c.cmd, &a->ep, a->c.verbose);
    if (r != 0) {
        tm_cli_endpoint_release(&a->ep);
        return r;
    }
    a->open = true;
    return 0;
}

static void api_close(struct api_cmd *a)
{
    if (a->open) {
        tm_cli_http_release(&a->http);
        tm_cli_endpoint_release(&a->ep);
        a->open = false;
    }
}

/* The default branch of every getopt loop here. */
static int api_opt(struct api_cmd *a, int opt, char **argv)
{
    return tm_cli_common_opt(&a->c, opt, optarg, argv);
}

static int print_json(const cJSON *doc)
{
    char *s = cJSON_Print(doc);
    if (!s) {
        fprintf(stderr, "tarmac: out of memory\n");
        return TM_EXIT_FAIL;
    }
    printf("%s\n", s);
    free(s);
    return TM_EXIT_OK;
}

static int print_table(struct tm_table *t)
{
    int r = tm_table_print(t, stdout);
    tm_table_release(t);
    if (r < 0) {
        fprintf(stderr, "tarmac: out of memory\n");
        return TM_EXIT_FAIL;
    }
    return TM_EXIT_OK;
}

/* ---- reading the API's objects ------------------------------------------ */

/* Any scalar as text for a cell: null and missing are "-". */
static const char *jtext(const cJSON *o, const char *key, char *buf, size_t size)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);

    if (cJSON_IsString(v))
        return v->valuestring;
    if (cJSON_IsBool(v))
        return cJSON_IsTrue(v) ? "yes" : "no";
    if (cJSON_IsNumber(v)) {
        if (v->valuedouble == (double)(int64_t)v->valuedouble)
            snprintf(buf, size, "%" PRId64, (int64_t)v->valuedouble);
        else
            snprintf(buf, size, "%g", v->valuedouble);
        return buf;
    }
    return "-";
}

static bool jnum(const cJSON *o, const char *key, int64_t *ret)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    if (!cJSON_IsNumber(v))
        return false;
    *ret = (int64_t)v->valuedouble;
    return true;
}

/* Milliseconds since the epoch (the controller's clock) as UTC. */
static const char *fmt_ms(const cJSON *o, const char *key, char *buf, size_t size)
{
    int64_t ms;
    struct tm tm;
    time_t t;

    if (!jnum(o, key, &ms))
        return "-";
    t = (time_t)(ms / 1000);
    if (!gmtime_r(&t, &tm) || strftime(buf, size, "%Y-%m-%d %H:%M:%S", &tm) == 0)
        return "-";
    return buf;
}

/* Cents as dollars: 123456 -> "1234.56". */
static const char *fmt_cents(const cJSON *o, const char *key, char *buf, size_t size)
{
    int64_t c;

    if (!jnum(o, key, &c))
        return "-";
    snprintf(buf, size, "%s%" PRId64 ".%02" PRId64, c < 0 ? "-" : "", (c < 0 ? -c : c) / 100,
             (c < 0 ? -c : c) % 100);
    return buf;
}

/* Whole GPUs ("4", a gang "4x2") or a share of one ("0.25"). */
static const char *fmt_gpus(const cJSON *job, char *buf, size_t size)
{
    int64_t gpus = 0, milli = 0, nodes = 1;

    jnum(job, "gpus", &gpus);
    jnum(job, "gpu_milli", &milli);
    jnum(job, "nodes", &nodes);
    if (gpus > 0 && nodes > 1)
        snprintf(buf, size, "%" PRId64 "x%" PRId64, gpus, nodes);
    else if (gpus > 0)
        snprintf(buf, size, "%" PRId64, gpus);
    else
        snprintf(buf, size, "%g", (double)milli / 1000.0);
    return buf;
}

/* ---- lists ----------------------------------------------------------------- */

/* Append "name=value" (escaped) to a path that may already have a query. */
static bool query_add(char *path, size_t size, const char *name, const char *value)
{
    char esc[768];
    size_t n = strlen(path);

    if (!value)
        return true;
    if (!tm_cli_http_escape(value, esc, sizeof(esc)))
        return false;
    return (size_t)snprintf(path + n, size - n, "%c%s=%s", strchr(path, '?') ? '&' : '?', name, esc) <
           size - n;
}

/*
 * GET path, following next_cursor until want items (0: all) were kept;
 * keep (may be NULL) chooses which items count.  *ret_page is one page as
 * the API shapes it, {"items": [...], "next_cursor": ...}, holding every
 * page's kept items and the last page's cursor.
 *
 * Below the API's default page (100) the limit asks for exactly what is
 * left; above it the server's own page size is used, so a server
 * configured with a smaller max_list is not asked for more.  Either way a
 * page never holds more than is wanted, so the cursor stays exact.
 */
static int get_list(struct api_cmd *a, const char *path, long want, bool (*keep)(const cJSON *),
                    cJSON **ret_page)
{
    cJSON *all = cJSON_CreateObject(), *items = cJSON_AddArrayToObject(all, "items");
    char cursor[64] = "", page_path[PATH_MAX_LEN];
    long kept = 0;
    int rc = 0;

    if (!all || !items) {
        cJSON_Delete(all);
        return TM_EXIT_FAIL;
    }
    for (;;) {
        cJSON *page = NULL;
        char lim[24];
        long left = want ? want - kept : 0;

        snprintf(page_path, sizeof(page_path), "%s", path);
        snprintf(lim, sizeof(lim), "%ld", left);
        if ((left > 0 && left < DEFAULT_LIMIT && !query_add(page_path, sizeof(page_path), "limit", lim)) ||
            (cursor[0] && !query_add(page_path, sizeof(page_path), "cursor", cursor))) {
            fprintf(stderr, "tarmac %s: request too long\n", a->c.cmd);
            rc = TM_EXIT_FAIL;
            break;
        }
        if ((rc = tm_cli_http_call(&a->http, "GET", page_path, NULL, &page)) != 0)
            break;
        cJSON *pitems = cJSON_GetObjectItemCaseSensitive(page, "items");
        cJSON *next = cJSON_GetObjectItemCaseSensitive(page, "next_cursor");
        if (!cJSON_IsArray(pitems)) {
            fprintf(stderr, "tarmac %s: the API's answer has no items list\n", a->c.cmd);
            cJSON_Delete(page);
            rc = TM_EXIT_FAIL;
            break;
        }
        while (cJSON_GetArraySize(pitems) > 0) {
            cJSON *it = cJSON_DetachItemFromArray(pitems, 0);
            if (!keep || keep(it)) {
                cJSON_AddItemToArray(items, it);
                kept++;
            } else {
                cJSON_Delete(it);
            }
        }
        cJSON_DeleteItemFromObjectCaseSensitive(all, "next_cursor");
        if (cJSON_IsString(next) && strlen(next->valuestring) < sizeof(cursor)) {
            snprintf(cursor, sizeof(cursor), "%s", next->valuestring);
            cJSON_AddStringToObject(all, "next_cursor", cursor);
        } else {
            cursor[0] = '\0';
            cJSON_AddNullToObject(all, "next_cursor");
        }
        cJSON_Delete(page);
        if (!cursor[0] || (want && kept >= want))
            break;
    }
    if (rc != 0) {
        cJSON_Delete(all);
        return rc;
    }
    *ret_page = all;
    return 0;
}

/* --limit N and --all, shared by the lists. */
static int parse_limit(struct api_cmd *a, const char *arg, long *ret)
{
    if (!tm_cli_parse_long(arg, 1, LIMIT_MAX, ret))
        return tm_cli_usage_error(a->c.cmd, "--limit: must be a whole number from 1 to %d, not \"%s\"",
                                  LIMIT_MAX, arg);
    return 0;
}

/* ---- submit ------------------------------------------------------------------ */

/* The API's job body from a validated spec (field names of the contract). */
static char *job_body(const struct tm_job_spec *s)
{
    cJSON *o = cJSON_CreateObject();
    char *text;

    if (!o)
        return NULL;
    cJSON_AddStringToObject(o, "team", s->team);
    if (s->name && *s->name)
        cJSON_AddStringToObject(o, "name", s->name);
    if (s->command && *s->command)
        cJSON_AddStringToObject(o, "command", s->command);
    if (s->gpus > 0)
        cJSON_AddNumberToObject(o, "gpus", s->gpus);
    else
        cJSON_AddNumberToObject(o, "gpu_milli", s->gpu_milli);
    if (s->nodes != 1)
        cJSON_AddNumberToObject(o, "nodes", s->nodes);
    if (s->cpu_milli)
        cJSON_AddNumberToObject(o, "cpu_milli", (double)s->cpu_milli);
    if (s->memory_mib)
        cJSON_AddNumberToObject(o, "memory_mib", (double)s->memory_mib);
    if (s->gpu_model)
        cJSON_AddStringToObject(o, "gpu_model", s->gpu_model);
    if (s->pool)
        cJSON_AddStringToObject(o, "pool", s->pool);
    cJSON_AddStringToObject(o, "class", s->klass);
    if (s->priority)
        cJSON_AddNumberToObject(o, "priority", s->priority);
    cJSON_AddBoolToObject(o, "preemptible", s->preemptible);
    cJSON_AddBoolToObject(o, "checkpointable", s->checkpointable);
    /* Durations travel as whole seconds, rounded up (a 500ms estimate is
     * still an estimate). */
    if (s->runtime_estimate_ms > 0)
        cJSON_AddNumberToObject(o, "runtime_estimate_s", (double)((s->runtime_estimate_ms + 999) / 1000));
    if (s->deadline_ms > 0)
        cJSON_AddNumberToObject(o, "deadline", (double)((s->deadline_ms + 999) / 1000));
    text = cJSON_PrintUnformatted(o);
    cJSON_Delete(o);
    return text;
}

static const char *const job_short_cols[] = {"ID", "TEAM", "NAME", "GPUS", "CLASS", "PREEMPTIBLE", "STATE"};

static void job_short_row(struct tm_table *t, const cJSON *j)
{
    char b[7][32];
    tm_table_cell(t, "%s", jtext(j, "id", b[0], sizeof(b[0])));
    tm_table_cell(t, "%s", jtext(j, "team", b[1], sizeof(b[1])));
    tm_table_cell(t, "%s", jtext(j, "name", b[2], sizeof(b[2])));
    tm_table_cell(t, "%s", fmt_gpus(j, b[3], sizeof(b[3])));
    tm_table_cell(t, "%s", jtext(j, "class", b[4], sizeof(b[4])));
    tm_table_cell(t, "%s", jtext(j, "preemptible", b[5], sizeof(b[5])));
    tm_table_cell(t, "%s", jtext(j, "state", b[6], sizeof(b[6])));
}

int tm_cli_api_submit(int argc, char **argv)
{
    struct api_cmd a = {.c = {.cmd = "submit", .api = true}};
    struct tm_job_spec spec;
    cJSON *jobs = NULL;
    char *body = NULL;
    long count = 1, done = 0;
    int r, rc = TM_EXIT_OK;

    r = tm_cli_submit_parse(argc, argv, &a.c, true, &spec, &count);
    if (r >= 0)
        return r;
    body = job_body(&spec);
    jobs = cJSON_CreateArray();
    if (!body || !jobs) {
        fprintf(stderr, "tarmac submit: out of memory\n");
        rc = TM_EXIT_FAIL;
        goto out;
    }
    if ((rc = api_open(&a)) != 0)
        goto out;
    /* The API takes one job per request; --count N is N requests, and a
     * refusal stops there (the jobs already queued are printed). */
    for (; done < count; done++) {
        cJSON *job = NULL;
        if ((rc = tm_cli_http_call(&a.http, "POST", "/v1/jobs", body, &job)) != 0)
            break;
        cJSON_AddItemToArray(jobs, job);
    }
    if (rc != 0 && done > 0)
        fprintf(stderr, "tarmac submit: %ld of %ld jobs were queued before that\n", done, count);
    if (done > 0 || rc == 0) {
        if (a.c.json) {
            print_json(jobs);
        } else {
            struct tm_table t;
            tm_table_init(&t, 7, job_short_cols);
            cJSON *j;
            cJSON_ArrayForEach(j, jobs) job_short_row(&t, j);
            int pr = print_table(&t);
            rc = rc ? rc : pr;
        }
    }
out:
    cJSON_Delete(jobs);
    free(body);
    api_close(&a);
    return rc;
}

/* ---- jobs ---------------------------------------------------------------------- */

static const char *const job_cols[] = {"ID", "TEAM", "NAME", "STATE", "GPUS", "MODEL", "CLASS",
                                       "PRIO", "PREEMPTIBLE", "NODE", "ATTEMPTS", "REASON"};

static void job_row(struct tm_table *t, const cJSON *j)
{
    char b[12][32];
    tm_table_cell(t, "%s", jtext(j, "id", b[0], sizeof(b[0])));
    tm_table_cell(t, "%s", jtext(j, "team", b[1], sizeof(b[1])));
    tm_table_cell(t, "%s", jtext(j, "name", b[2], sizeof(b[2])));
    tm_table_cell(t, "%s", jtext(j, "state", b[3], sizeof(b[3])));
    tm_table_cell(t, "%s", fmt_gpus(j, b[4], sizeof(b[4])));
    tm_table_cell(t, "%s", jtext(j, "gpu_model", b[5], sizeof(b[5])));
    tm_table_cell(t, "%s", jtext(j, "class", b[6], sizeof(b[6])));
    tm_table_cell(t, "%s", jtext(j, "priority", b[7], sizeof(b[7])));
    tm_table_cell(t, "%s", jtext(j, "preemptible", b[8], sizeof(b[8])));
    tm_table_cell(t, "%s", jtext(j, "node_id", b[9], sizeof(b[9])));
    tm_table_cell(t, "%s", jtext(j, "attempts", b[10], sizeof(b[10])));
    tm_table_cell(t, "%s", jtext(j, "state_reason", b[11], sizeof(b[11])));
}

static int print_jobs(struct api_cmd *a, const cJSON *doc, bool page)
{
    struct tm_table t;
    const cJSON *j;

    if (a->c.json)
        return print_json(doc);
    tm_table_init(&t, 12, job_cols);
    if (page) {
        cJSON_ArrayForEach(j, cJSON_GetObjectItemCaseSensitive(doc, "items")) job_row(&t, j);
    } else {
        job_row(&t, doc);
    }
    return print_table(&t);
}

/* A job or node id argument: a positive whole number. */
static int parse_id(struct api_cmd *a, const char *what, const char *arg, char *out, size_t size)
{
    long v;
    if (!arg)
        return tm_cli_usage_error(a->c.cmd, "missing %s id", what);
    if (!tm_cli_parse_long(arg, 1, LONG_MAX, &v))
        return tm_cli_usage_error(a->c.cmd, "%s id: must be a positive whole number, not \"%s\"", what, arg);
    snprintf(out, size, "%ld", v);
    return 0;
}

/* `tarmac jobs show ID` and `tarmac jobs cancel ID [--reason TEXT]`. */
static int jobs_one(int argc, char **argv, bool cancel)
{
    enum { O_REASON = 1 };
    static const struct option opts[] = {TM_CLI_API_OPTIONS, {"reason", required_argument, NULL, O_REASON}, {0}};
    struct api_cmd a = {.c = {.cmd = cancel ? "jobs cancel" : "jobs show", .api = true}};
    const char *reason = NULL;
    char id[24], path[PATH_MAX_LEN];
    char *body = NULL;
    cJSON *job = NULL;
    int opt, r;

    optind = 1;
    opterr = 0;
    while ((opt = getopt_long(argc, argv, ":h", opts, NULL)) != -1) {
        if (opt == TM_CLI_OPT_HELP || opt == 'h') {
            printf("Usage: tarmac %s ID%s [options]\n\n%s\n\nOptions:\n%s", a.c.cmd,
                   cancel ? " [--reason TEXT]" : "",
                   cancel ? "Cancel a queued or running job (POST /v1/jobs/ID/cancel); prints it as changed."
                          : "Show one job (GET /v1/jobs/ID).",
                   tm_cli_api_help);
            return TM_EXIT_OK;
        }
        if (cancel && opt == O_REASON)
            reason = optarg;
        else if ((r = api_opt(&a, opt, argv)) > 1)
            return r;
    }
    if ((r = parse_id(&a, "job", optind < argc ? argv[optind] : NULL, id, sizeof(id))) != 0)
        return r;
    if (optind + 1 < argc)
        return tm_cli_usage_error(a.c.cmd, "unexpected argument \"%s\"", argv[optind + 1]);
    if (reason) {
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "reason", reason);
        body = cJSON_PrintUnformatted(o);
        cJSON_Delete(o);
        if (!body)
            return TM_EXIT_FAIL;
    }
    if ((r = api_open(&a)) == 0) {
        snprintf(path, sizeof(path), cancel ? "/v1/jobs/%s/cancel" : "/v1/jobs/%s", id);
        r = tm_cli_http_call(&a.http, cancel ? "POST" : "GET", path, body, &job);
        if (r == 0)
            r = print_jobs(&a, job, false);
    }
    cJSON_Delete(job);
    free(body);
    api_close(&a);
    return r;
}

int tm_cli_api_jobs(int argc, char **argv)
{
    enum { O_TEAM = 1, O_STATE, O_CLASS, O_LIMIT, O_ALL };
    static const struct option opts[] = {
        TM_CLI_API_OPTIONS,
        {"team", required_argument, NULL, O_TEAM}, {"state", required_argument, NULL, O_STATE},
        {"class", required_argument, NULL, O_CLASS}, {"limit", required_argument, NULL, O_LIMIT},
        {"all", no_argument, NULL, O_ALL}, {0},
    };
    struct api_cmd a = {.c = {.cmd = "jobs", .api = true}};
    const char *team = NULL, *state = NULL, *klass = NULL;
    char path[PATH_MAX_LEN] = "/v1/jobs";
    long limit = DEFAULT_LIMIT;
    cJSON *page = NULL;
    int opt, r;

    if (argc >= 2 && strcmp(argv[1], "cancel") == 0)
        return jobs_one(argc - 1, argv + 1, true);
    if (argc >= 2 && strcmp(argv[1], "show") == 0)
        return jobs_one(argc - 1, argv + 1, false);
    optind = 1;
    opterr = 0;
    while ((opt = getopt_long(argc, argv, ":h", opts, NULL)) != -1) {
        switch (opt) {
        case TM_CLI_OPT_HELP:
        case 'h':
            printf("Usage: tarmac jobs [--team T] [--state S] [--class C] [--limit N | --all] [options]\n"
                   "       tarmac jobs show ID\n"
                   "       tarmac jobs cancel ID [--reason TEXT]\n\n"
                   "List jobs, newest first (GET /v1/jobs, following its pages).  An engineer's\n"
                   "token sees its own team's jobs only.\n"
                   "      --team T             one team's jobs\n"
                   "      --state S            queued|running|succeeded|failed|preempted|cancelled\n"
                   "      --class C            train|eval|preprocess|inference|batch\n"
                   "      --limit N            at most N jobs (default %d); --all: every one\n\n"
                   "Options:\n%s",
                   DEFAULT_LIMIT, tm_cli_api_help);
            return TM_EXIT_OK;
        case O_TEAM:
            if (!tm_job_spec_name_ok(optarg))
                return tm_cli_usage_error(a.c.cmd, "--team: must be 1-63 letters, digits, '.', '_' or '-', not \"%s\"", optarg);
            team = optarg;
            break;
        case O_STATE:
            if (tm_job_state_parse(optarg) < 0)
                return tm_cli_usage_error(a.c.cmd, "--state: must be queued, running, succeeded, failed, "
                                                   "preempted or cancelled, not \"%s\"", optarg);
            state = optarg;
            break;
        case O_CLASS:
            if (tm_job_class_parse(optarg) < 0)
                return tm_cli_usage_error(a.c.cmd, "--class: must be train, eval, preprocess, inference or "
                                                   "batch, not \"%s\"", optarg);
            klass = optarg;
            break;
        case O_LIMIT:
            if ((r = parse_limit(&a, optarg, &limit)) != 0)
                return r;
            break;
        case O_ALL:
            limit = 0;
            break;
        default:
            if ((r = api_opt(&a, opt, argv)) > 1)
                return r;
        }
    }
    if (optind < argc)
        return tm_cli_usage_error(a.c.cmd, "unexpected argument \"%s\" (verbs: show, cancel)", argv[optind]);
    query_add(path, sizeof(path), "team", team);
    query_add(path, sizeof(path), "state", state);
    query_add(path, sizeof(path), "class", klass);
    if ((r = api_open(&a)) == 0 && (r = get_list(&a, path, limit, NULL, &page)) == 0)
        r = print_jobs(&a, page, true);
    cJSON_Delete(page);
    api_close(&a);
    return r;
}

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
    static const char *const cols[] = {"ID", "POOL", "STATE", "TYPE", "ZONE", "GPUS", "MODEL",
                                       "CAPACITY", "USD/H", "CORDONED", "INSTANCE", "REASON"};
    struct api_cmd a = {.c = {.cmd = "nodes", .api = true}};
    const char *pool = NULL, *state = NULL;
    char path[PATH_MAX_LEN] = "/v1/nodes";
    long limit = DEFAULT_LIMIT;
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
                   DEFAULT_LIMIT, tm_cli_api_help);
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
            if ((r = parse_limit(&a, optarg, &limit)) != 0)
                return r;
            break;
        case O_ALL:
            all = true;
            break;
        default:
            if ((r = api_opt(&a, opt, argv)) > 1)
                return r;
        }
    }
    if (optind < argc)
        return tm_cli_usage_error(a.c.cmd, "unexpected argument \"%s\"", argv[optind]);
    query_add(path, sizeof(path), "pool", pool);
    query_add(path, sizeof(path), "state", state);
    if ((r = api_open(&a)) == 0 && (r = get_list(&a, path, limit, all || state ? NULL : node_live, &page)) == 0) {
        if (a.c.json) {
            r = print_json(page);
        } else {
            struct tm_table t;
            const cJSON *n;
            tm_table_init(&t, 12, cols);
            cJSON_ArrayForEach(n, cJSON_GetObjectItemCaseSensitive(page, "items")) {
                char b[12][32];
                int64_t price = 0;
                tm_table_cell(&t, "%s", jtext(n, "id", b[0], sizeof(b[0])));
                tm_table_cell(&t, "%s", jtext(n, "pool", b[1], sizeof(b[1])));
                tm_table_cell(&t, "%s", jtext(n, "state", b[2], sizeof(b[2])));
                tm_table_cell(&t, "%s", jtext(n, "instance_type", b[3], sizeof(b[3])));
                tm_table_cell(&t, "%s", jtext(n, "zone", b[4], sizeof(b[4])));
                tm_table_cell(&t, "%s", jtext(n, "gpus", b[5], sizeof(b[5])));
                tm_table_cell(&t, "%s", jtext(n, "gpu_model", b[6], sizeof(b[6])));
                tm_table_cell(&t, "%s", jtext(n, "capacity_type", b[7], sizeof(b[7])));
                jnum(n, "price_uusd_per_hour", &price);
                tm_table_cell(&t, "%.4f", (double)price / 1e6);
                tm_table_cell(&t, "%s", jtext(n, "cordoned", b[9], sizeof(b[9])));
                tm_table_cell(&t, "%s", jtext(n, "instance_id", b[10], sizeof(b[10])));
                tm_table_cell(&t, "%s", jtext(n, "state_reason", b[11], sizeof(b[11])));
            }
            r = print_table(&t);
        }
    }
    cJSON_Delete(page);
    api_close(&a);
    return r;
}

int tm_cli_api_pools(int argc, char **argv)
{
    static const struct option opts[] = {TM_CLI_API_OPTIONS, {0}};
    static const char *const cols[] = {"NAME", "PROVIDER", "MODEL", "GPUS/NODE", "CAPACITY", "MIN",
                                       "MAX", "LIVE", "IDLE_GRACE_S", "TYPES"};
    struct api_cmd a = {.c = {.cmd = "pools", .api = true}};
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
        if ((r = api_opt(&a, opt, argv)) > 1)
            return r;
    }
    if (optind < argc)
        return tm_cli_usage_error(a.c.cmd, "unexpected argument \"%s\"", argv[optind]);
    if ((r = api_open(&a)) == 0 && (r = get_list(&a, "/v1/pools", 0, NULL, &page)) == 0) {
        if (a.c.json) {
            r = print_json(page);
        } else {
            struct tm_table t;
            const cJSON *p;
            tm_table_init(&t, 10, cols);
            cJSON_ArrayForEach(p, cJSON_GetObjectItemCaseSensitive(page, "items")) {
                char b[10][32], types[256] = "";
                int64_t grace = 0;
                const cJSON *ty;
                tm_table_cell(&t, "%s", jtext(p, "name", b[0], sizeof(b[0])));
                tm_table_cell(&t, "%s", jtext(p, "provider", b[1], sizeof(b[1])));
                tm_table_cell(&t, "%s", jtext(p, "gpu_model", b[2], sizeof(b[2])));
                tm_table_cell(&t, "%s", jtext(p, "gpus_per_node", b[3], sizeof(b[3])));
                tm_table_cell(&t, "%s", jtext(p, "capacity_type", b[4], sizeof(b[4])));
                tm_table_cell(&t, "%s", jtext(p, "min_nodes", b[5], sizeof(b[5])));
                tm_table_cell(&t, "%s", jtext(p, "max_nodes", b[6], sizeof(b[6])));
                tm_table_cell(&t, "%s", jtext(p, "live_nodes", b[7], sizeof(b[7])));
                jnum(p, "idle_grace_ms", &grace);
                tm_table_cell(&t, "%" PRId64, grace / 1000);
                cJSON_ArrayForEach(ty, cJSON_GetObjectItemCaseSensitive(p, "instance_types")) {
                    if (cJSON_IsString(ty) && strlen(types) + strlen(ty->valuestring) + 2 < sizeof(types)) {
                        if (types[0])
                            strcat(types, ",");
                        strcat(types, ty->valuestring);
                    }
                }
                tm_table_cell(&t, "%s", types);
            }
            r = print_table(&t);
        }
    }
    cJSON_Delete(page);
    api_close(&a);
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
        tm_table_cell(&t, "%s", jtext(d, "id", b[0], sizeof(b[0])));
        tm_table_cell(&t, "%s", fmt_ms(d, "at_ms", b[1], sizeof(b[1])));
        tm_table_cell(&t, "%s", jtext(d, "kind", b[2], sizeof(b[2])));
        tm_table_cell(&t, "%s:%s", jtext(d, "subject_kind", b[3], sizeof(b[3])),
                      jtext(d, "subject_id", b[4], sizeof(b[4])));
        tm_table_cell(&t, "%s", jtext(d, "reason", b[5], sizeof(b[5])));
    }
    return print_table(&t);
}

int tm_cli_api_decisions(int argc, char **argv)
{
    enum { O_SUBJECT = 1, O_KIND, O_LIMIT };
    static const struct option opts[] = {
        TM_CLI_API_OPTIONS,
        {"subject", required_argument, NULL, O_SUBJECT}, {"kind", required_argument, NULL, O_KIND},
        {"limit", required_argument, NULL, O_LIMIT}, {0},
    };
    struct api_cmd a = {.c = {.cmd = "decisions", .api = true}};
    char path[PATH_MAX_LEN] = "/v1/decisions", skind[16] = "";
    const char *sid = NULL, *kind = NULL;
    long limit = DEFAULT_LIMIT;
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
                   DEFAULT_LIMIT, tm_cli_api_help);
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
            if ((r = parse_limit(&a, optarg, &limit)) != 0)
                return r;
            break;
        default:
            if ((r = api_opt(&a, opt, argv)) > 1)
                return r;
        }
    }
    if (optind < argc)
        return tm_cli_usage_error(a.c.cmd, "unexpected argument \"%s\"", argv[optind]);
    query_add(path, sizeof(path), "kind", kind);
    query_add(path, sizeof(path), "subject_kind", sid ? skind : NULL);
    query_add(path, sizeof(path), "subject_id", sid);
    if ((r = api_open(&a)) == 0 && (r = get_list(&a, path, limit, NULL, &page)) == 0)
        r = a.c.json ? print_json(page) : print_decisions_table(cJSON_GetObjectItemCaseSensitive(page, "items"));
    cJSON_Delete(page);
    api_close(&a);
    return r;
}

/* The subject's line at the top of `why`. */
static void print_why_subject(const char *kind, const cJSON *o)
{
    char b[8][48];

    if (strcmp(kind, "job") == 0) {
        printf("job %s (team %s, %s GPUs, %s%s): %s",
               jtext(o, "id", b[0], sizeof(b[0])), jtext(o, "team", b[1], sizeof(b[1])),
               fmt_gpus(o, b[2], sizeof(b[2])), jtext(o, "class", b[3], sizeof(b[3])),
               cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(o, "preemptible")) ? ", preemptible" : "",
               jtext(o, "state", b[4], sizeof(b[4])));
        if (cJSON_IsNumber(cJSON_GetObjectItemCaseSensitive(o, "node_id")))
            printf(" on node %s", jtext(o, "node_id", b[5], sizeof(b[5])));
        printf(", submitted %s UTC\n", fmt_ms(o, "submitted_ms", b[6], sizeof(b[6])));
    } else {
        printf("node %s (pool %s, %s, %s GPUs %s, %s): %s\n",
               jtext(o, "id", b[0], sizeof(b[0])), jtext(o, "pool", b[1], sizeof(b[1])),
               jtext(o, "instance_type", b[2], sizeof(b[2])), jtext(o, "gpus", b[3], sizeof(b[3])),
               jtext(o, "gpu_model", b[4], sizeof(b[4])), jtext(o, "capacity_type", b[5], sizeof(b[5])),
               jtext(o, "state", b[6], sizeof(b[6])));
    }
    const cJSON *why = cJSON_GetObjectItemCaseSensitive(o, "state_reason");
    if (cJSON_IsString(why) && why->valuestring[0])
        printf("  now: %s\n", why->valuestring);
}

int tm_cli_api_why(int argc, char **argv)
{
    enum { O_LIMIT = 1 };
    static const struct option opts[] = {TM_CLI_API_OPTIONS, {"limit", required_argument, NULL, O_LIMIT}, {0}};
    struct api_cmd a = {.c = {.cmd = "why", .api = true}};
    char kind[8] = "", id[24], path[PATH_MAX_LEN];
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
            if ((r = parse_limit(&a, optarg, &limit)) != 0)
                return r;
        } else if ((r = api_opt(&a, opt, argv)) > 1) {
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
    if ((r = parse_id(&a, kind, v, id, sizeof(id))) != 0)
        return r;

    if ((r = api_open(&a)) != 0)
        return r;
    snprintf(path, sizeof(path), "/v1/%ss/%s", kind, id);
    if ((r = tm_cli_http_call(&a.http, "GET", path, NULL, &subject)) != 0)
        goto out;
    snprintf(path, sizeof(path), "/v1/decisions?subject_kind=%s&subject_id=%s", kind, id);
    if ((r = get_list(&a, path, limit, NULL, &page)) != 0)
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
        r = print_json(o);
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
        printf("  %s UTC  %-12s #%s\n", fmt_ms(d, "at_ms", b[0], sizeof(b[0])),
               jtext(d, "kind", b[1], sizeof(b[1])), jtext(d, "id", b[2], sizeof(b[2])));
        printf("      %s\n", jtext(d, "reason", b[0], sizeof(b[0])));
        if (in && strcmp(in, "{}") != 0 && strcmp(in, "null") != 0)
            printf("      inputs: %s\n", in);
        free(in);
    }
    if (cJSON_IsString(cJSON_GetObjectItemCaseSensitive(page, "next_cursor")))
        printf("(older decisions: --limit N)\n");
out:
    cJSON_Delete(subject);
    cJSON_Delete(page);
    api_close(&a);
    return r;
}

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
    struct api_cmd a = {.c = {.cmd = "budget set", .api = true}};
    const char *name = NULL;
    long cap = -1, warn = 80;
    bool hard = false, org = false;
    char path[PATH_MAX_LEN], esc[256];
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
            if ((r = api_opt(&a, opt, argv)) > 1)
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
    if ((r = api_open(&a)) == 0 && (r = tm_cli_http_call(&a.http, "PUT", path, body, &budget)) == 0) {
        if (a.c.json) {
            r = print_json(budget);
        } else {
            static const char *const cols[] = {"SCOPE", "KIND", "PERIOD", "CAP_USD", "HARD", "WARN_PERCENT"};
            struct tm_table t;
            char b[6][32];
            tm_table_init(&t, 6, cols);
            tm_table_cell(&t, "%s", jtext(budget, "scope", b[0], sizeof(b[0])));
            tm_table_cell(&t, "%s", jtext(budget, "scope_kind", b[1], sizeof(b[1])));
            tm_table_cell(&t, "%s", jtext(budget, "period", b[2], sizeof(b[2])));
            tm_table_cell(&t, "%s", fmt_cents(budget, "cap_cents", b[3], sizeof(b[3])));
            tm_table_cell(&t, "%s", jtext(budget, "hard", b[4], sizeof(b[4])));
            tm_table_cell(&t, "%s", jtext(budget, "warn_percent", b[5], sizeof(b[5])));
            r = print_table(&t);
        }
    }
    cJSON_Delete(budget);
    free(body);
    api_close(&a);
    return r;
}

static int budget_show(int argc, char **argv)
{
    static const struct option opts[] = {TM_CLI_API_OPTIONS, {0}};
    static const char *const cols[] = {"SCOPE", "KIND", "PERIOD", "CAP_USD", "SPENT_USD", "USED",
                                       "HARD", "WARN_PERCENT"};
    struct api_cmd a = {.c = {.cmd = "budget show", .api = true}};
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
        if ((r = api_opt(&a, opt, argv)) > 1)
            return r;
    }
    if (optind < argc)
        return tm_cli_usage_error(a.c.cmd, "unexpected argument \"%s\"", argv[optind]);
    if ((r = api_open(&a)) == 0 && (r = tm_cli_http_call(&a.http, "GET", "/v1/budgets", NULL, &list)) == 0) {
        if (a.c.json) {
            r = print_json(list);
        } else {
            struct tm_table t;
            const cJSON *bu;
            tm_table_init(&t, 8, cols);
            cJSON_ArrayForEach(bu, cJSON_GetObjectItemCaseSensitive(list, "items")) {
                char b[8][32];
                int64_t cap = 0, spent = 0;
                tm_table_cell(&t, "%s", jtext(bu, "scope", b[0], sizeof(b[0])));
                tm_table_cell(&t, "%s", jtext(bu, "scope_kind", b[1], sizeof(b[1])));
                tm_table_cell(&t, "%s", jtext(list, "period", b[2], sizeof(b[2])));
                tm_table_cell(&t, "%s", fmt_cents(bu, "cap_cents", b[3], sizeof(b[3])));
                tm_table_cell(&t, "%s", fmt_cents(bu, "spent_cents", b[4], sizeof(b[4])));
                if (jnum(bu, "cap_cents", &cap) && jnum(bu, "spent_cents", &spent) && cap > 0)
                    tm_table_cell(&t, "%.1f%%", 100.0 * (double)spent / (double)cap);
                else
                    tm_table_cell(&t, "-");
                tm_table_cell(&t, "%s", jtext(bu, "hard", b[6], sizeof(b[6])));
                tm_table_cell(&t, "%s", jtext(bu, "warn_percent", b[7], sizeof(b[7])));
            }
            r = print_table(&t);
        }
    }
    cJSON_Delete(list);
    api_close(&a);
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

int tm_cli_api_spend(int argc, char **argv)
{
    enum { O_TEAM = 1 };
    static const struct option opts[] = {TM_CLI_API_OPTIONS, {"team", required_argument, NULL, O_TEAM}, {0}};
    struct api_cmd a = {.c = {.cmd = "spend", .api = true}};
    const char *team = NULL;
    cJSON *spend = NULL;
    int opt, r;

    optind = 1;
    opterr = 0;
    while ((opt = getopt_long(argc, argv, ":h", opts, NULL)) != -1) {
        if (opt == TM_CLI_OPT_HELP || opt == 'h') {
            printf("Usage: tarmac spend [--team T] [options]\n\n"
                   "This calendar month's spend (UTC) from the ledger, per team and per pool with idle\n"
                   "spend apart, and the projection to the month's end (GET /v1/spend).  Dollars.\n"
                   "      --team T             only team T's row of the per-team list (also in json)\n\n"
                   "Options:\n%s", tm_cli_api_help);
            return TM_EXIT_OK;
        }
        if (opt == O_TEAM) {
            if (!tm_job_spec_name_ok(optarg))
                return tm_cli_usage_error(a.c.cmd, "--team: must be 1-63 letters, digits, '.', '_' or '-', not \"%s\"",
                                          optarg);
            team = optarg;
        } else if ((r = api_opt(&a, opt, argv)) > 1) {
            return r;
        }
    }
    if (optind < argc)
        return tm_cli_usage_error(a.c.cmd, "unexpected argument \"%s\"", argv[optind]);
    if ((r = api_open(&a)) != 0 || (r = tm_cli_http_call(&a.http, "GET", "/v1/spend", NULL, &spend)) != 0)
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
        r = print_json(spend);
        goto out;
    }
    char b[8][32];
    const cJSON *hours = cJSON_GetObjectItemCaseSensitive(spend, "hours_left");
    int64_t rate;
    snprintf(b[6], sizeof(b[6]), "-");
    snprintf(b[7], sizeof(b[7]), "-");
    if (jnum(spend, "rate_uusd_per_hour", &rate))
        snprintf(b[6], sizeof(b[6]), "%.2f", (double)rate / 1e6);
    if (cJSON_IsNumber(hours))
        snprintf(b[7], sizeof(b[7]), "%.1f", hours->valuedouble);
    printf("period %s (%s, calendar month UTC)\n", jtext(spend, "period", b[0], sizeof(b[0])),
           jtext(spend, "currency", b[1], sizeof(b[1])));
    printf("spent %s  (jobs %s, idle %s)  projected to month end %s  (%s USD/h for %s h left)\n\n",
           fmt_cents(spend, "total_cents", b[2], sizeof(b[2])), fmt_cents(spend, "job_cents", b[3], sizeof(b[3])),
           fmt_cents(spend, "idle_cents", b[4], sizeof(b[4])),
           fmt_cents(spend, "projected_cents", b[5], sizeof(b[5])), b[6], b[7]);
    {
        static const char *const cols[] = {"TEAM", "SPENT_USD"};
        struct tm_table t;
        const cJSON *it;
        tm_table_init(&t, 2, cols);
        cJSON_ArrayForEach(it, teams) {
            char c[2][32];
            tm_table_cell(&t, "%s", jtext(it, "team", c[0], sizeof(c[0])));
            tm_table_cell(&t, "%s", fmt_cents(it, "cents", c[1], sizeof(c[1])));
        }
        if ((r = print_table(&t)) != 0)
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
            tm_table_cell(&t, "%s", jtext(it, "pool", c[0], sizeof(c[0])));
            tm_table_cell(&t, "%s", fmt_cents(it, "job_cents", c[1], sizeof(c[1])));
            tm_table_cell(&t, "%s", fmt_cents(it, "idle_cents", c[2], sizeof(c[2])));
            tm_table_cell(&t, "%s", fmt_cents(it, "cents", c[3], sizeof(c[3])));
        }
        r = print_table(&t);
    }
out:
    cJSON_Delete(spend);
    api_close(&a);
    return r;
}
