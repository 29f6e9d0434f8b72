/*
 * controller/cli/jobs.c: `tarmac submit` and `tarmac jobs` (list, show, cancel, retag)
 * (through the API; see cli/api.h).
 */
#include "controller/cli/cli.h"

#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cjson/cJSON.h>
#include <openssl/rand.h>

#include "controller/cli/api.h"
#include "controller/cli/common.h"
#include "controller/spec/job_spec.h"
#include "core/model.h"

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
    if (s->env)
        cJSON_AddItemToObject(o, "env", cJSON_Duplicate(s->env, 1));
    if (s->image)
        cJSON_AddStringToObject(o, "image", s->image);
    text = cJSON_PrintUnformatted(o);
    cJSON_Delete(o);
    return text;
}

static const char *const job_short_cols[] = {"ID", "TEAM", "NAME", "GPUS", "CLASS", "PREEMPTIBLE", "STATE"};

static void job_short_row(struct tm_table *t, const cJSON *j)
{
    char b[7][32];
    tm_table_cell(t, "%s", tm_cli_jtext(j, "id", b[0], sizeof(b[0])));
    tm_table_cell(t, "%s", tm_cli_jtext(j, "team", b[1], sizeof(b[1])));
    tm_table_cell(t, "%s", tm_cli_jtext(j, "name", b[2], sizeof(b[2])));
    tm_table_cell(t, "%s", tm_cli_fmt_gpus(j, b[3], sizeof(b[3])));
    tm_table_cell(t, "%s", tm_cli_jtext(j, "class", b[4], sizeof(b[4])));
    tm_table_cell(t, "%s", tm_cli_jtext(j, "preemptible", b[5], sizeof(b[5])));
    tm_table_cell(t, "%s", tm_cli_jtext(j, "state", b[6], sizeof(b[6])));
}

/* 128 random bits as hex: unique per invocation. */
static void idem_key_base(char *out, size_t size)
{
    unsigned char raw[16];
    static const char hexd[] = "0123456789abcdef";

    if (RAND_bytes(raw, sizeof(raw)) != 1) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        snprintf(out, size, "t%lld-%ld-%d", (long long)ts.tv_sec, ts.tv_nsec, (int)getpid());
        return;
    }
    for (size_t i = 0; i < sizeof(raw) && 2 * i + 2 < size; i++) {
        out[2 * i] = hexd[raw[i] >> 4];
        out[2 * i + 1] = hexd[raw[i] & 15];
        out[2 * i + 2] = '\0';
    }
}

int tm_cli_api_submit(int argc, char **argv)
{
    struct tm_cli_cmd a = {.c = {.cmd = "submit", .api = true}};
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
    if ((rc = tm_cli_cmd_open(&a)) != 0)
        goto out;
    /* The API takes one job per request; --count N is N requests, and a
     * refusal stops there (the jobs already queued are printed). */
    /* One Idempotency-Key per invocation (and job of --count): its retries
     * through a failover then queue each job once. */
    char key_base[40], key[64];
    idem_key_base(key_base, sizeof(key_base));
    for (; done < count; done++) {
        cJSON *job = NULL;
        snprintf(key, sizeof(key), "%s-%ld", key_base, done + 1);
        if ((rc = tm_cli_http_call_idem(&a.http, "POST", "/v1/jobs", body, key, &job)) != 0)
            break;
        cJSON_AddItemToArray(jobs, job);
    }
    if (rc != 0 && done > 0)
        fprintf(stderr, "tarmac submit: %ld of %ld jobs were queued before that\n", done, count);
    if (done > 0 || rc == 0) {
        if (a.c.json) {
            tm_cli_print_json(jobs);
        } else {
            struct tm_table t;
            tm_table_init(&t, 7, job_short_cols);
            cJSON *j;
            cJSON_ArrayForEach(j, jobs) job_short_row(&t, j);
            int pr = tm_cli_print_table(&t);
            rc = rc ? rc : pr;
        }
    }
out:
    cJSON_Delete(jobs);
    free(body);
    tm_cli_cmd_close(&a);
    return rc;
}

/* ---- jobs ---------------------------------------------------------------------- */

static const char *const job_cols[] = {"ID", "TEAM", "NAME", "STATE", "GPUS", "MODEL", "CLASS",
                                       "PRIO", "PREEMPTIBLE", "NODE", "ATTEMPTS", "REASON"};

static void job_row(struct tm_table *t, const cJSON *j)
{
    char b[12][32];
    tm_table_cell(t, "%s", tm_cli_jtext(j, "id", b[0], sizeof(b[0])));
    tm_table_cell(t, "%s", tm_cli_jtext(j, "team", b[1], sizeof(b[1])));
    tm_table_cell(t, "%s", tm_cli_jtext(j, "name", b[2], sizeof(b[2])));
    tm_table_cell(t, "%s", tm_cli_jtext(j, "state", b[3], sizeof(b[3])));
    tm_table_cell(t, "%s", tm_cli_fmt_gpus(j, b[4], sizeof(b[4])));
    tm_table_cell(t, "%s", tm_cli_jtext(j, "gpu_model", b[5], sizeof(b[5])));
    tm_table_cell(t, "%s", tm_cli_jtext(j, "class", b[6], sizeof(b[6])));
    tm_table_cell(t, "%s", tm_cli_jtext(j, "priority", b[7], sizeof(b[7])));
    tm_table_cell(t, "%s", tm_cli_jtext(j, "preemptible", b[8], sizeof(b[8])));
    tm_table_cell(t, "%s", tm_cli_jtext(j, "node_id", b[9], sizeof(b[9])));
    tm_table_cell(t, "%s", tm_cli_jtext(j, "attempts", b[10], sizeof(b[10])));
    tm_table_cell(t, "%s", tm_cli_jtext(j, "state_reason", b[11], sizeof(b[11])));
}

static int print_jobs(struct tm_cli_cmd *a, const cJSON *doc, bool page)
{
    struct tm_table t;
    const cJSON *j;

    if (a->c.json)
        return tm_cli_print_json(doc);
    tm_table_init(&t, 12, job_cols);
    if (page) {
        cJSON_ArrayForEach(j, cJSON_GetObjectItemCaseSensitive(doc, "items")) job_row(&t, j);
    } else {
        job_row(&t, doc);
    }
    return tm_cli_print_table(&t);
}

enum job_verb { JOB_SHOW, JOB_CANCEL, JOB_RETAG, JOB_VERB_MAX };

static const struct {
    const char *cmd, *usage, *what, *method, *path;
} job_verbs[JOB_VERB_MAX] = {
    [JOB_SHOW] = {"jobs show", "", "Show one job (GET /v1/jobs/ID).", "GET", "/v1/jobs/%s"},
    [JOB_CANCEL] = {"jobs cancel", " [--reason TEXT]",
                    "Cancel a queued or running job (POST /v1/jobs/ID/cancel); prints it as changed.",
                    "POST", "/v1/jobs/%s/cancel"},
    [JOB_RETAG] = {"jobs retag", " --preemptible | --no-preemptible",
                   "Change the preemptible tag of a queued job (PATCH /v1/jobs/ID); prints it as changed.",
                   "PATCH", "/v1/jobs/%s"},
};

/* `tarmac jobs show|cancel|retag ID ...`: one job, by id. */
static int jobs_one(int argc, char **argv, enum job_verb verb)
{
    enum { O_REASON = 1, O_PRE, O_NOPRE };
    static const struct option opts[] = {
        TM_CLI_API_OPTIONS, {"reason", required_argument, NULL, O_REASON},
        {"preemptible", no_argument, NULL, O_PRE}, {"no-preemptible", no_argument, NULL, O_NOPRE}, {0},
    };
    struct tm_cli_cmd a = {.c = {.cmd = job_verbs[verb].cmd, .api = true}};
    const char *reason = NULL;
    int preemptible = -1;
    char id[24], path[TM_CLI_PATH_MAX];
    char *body = NULL;
    cJSON *job = NULL, *o = NULL;
    int opt, r;

    optind = 1;
    opterr = 0;
    while ((opt = getopt_long(argc, argv, ":h", opts, NULL)) != -1) {
        if (opt == TM_CLI_OPT_HELP || opt == 'h') {
            printf("Usage: tarmac %s ID%s [options]\n\n%s\n\nOptions:\n%s", a.c.cmd, job_verbs[verb].usage,
                   job_verbs[verb].what, tm_cli_api_help);
            return TM_EXIT_OK;
        }
        if (verb == JOB_CANCEL && opt == O_REASON)
            reason = optarg;
        else if (verb == JOB_RETAG && (opt == O_PRE || opt == O_NOPRE))
            preemptible = opt == O_PRE;
        else if (opt == O_REASON || opt == O_PRE || opt == O_NOPRE)
            return tm_cli_usage_error(a.c.cmd, "unrecognized option \"%s\"", argv[optind - 1]);
        else if ((r = tm_cli_cmd_opt(&a, opt, argv)) > 1)
            return r;
    }
    if ((r = tm_cli_parse_id(&a, "job", optind < argc ? argv[optind] : NULL, id, sizeof(id))) != 0)
        return r;
    if (optind + 1 < argc)
        return tm_cli_usage_error(a.c.cmd, "unexpected argument \"%s\"", argv[optind + 1]);
    if (verb == JOB_RETAG && preemptible < 0)
        return tm_cli_usage_error(a.c.cmd, "say --preemptible or --no-preemptible");
    if (reason || verb == JOB_RETAG) {
        o = cJSON_CreateObject();
        if (reason)
            cJSON_AddStringToObject(o, "reason", reason);
        else
            cJSON_AddBoolToObject(o, "preemptible", preemptible);
        body = cJSON_PrintUnformatted(o);
        cJSON_Delete(o);
        if (!body)
            return TM_EXIT_FAIL;
    }
    if ((r = tm_cli_cmd_open(&a)) == 0) {
        snprintf(path, sizeof(path), job_verbs[verb].path, id);
        r = tm_cli_http_call(&a.http, job_verbs[verb].method, path, body, &job);
        if (r == 0)
            r = print_jobs(&a, job, false);
        if (r == 0 && !a.c.json)
            tm_cli_print_members(job, "");
    }
    cJSON_Delete(job);
    free(body);
    tm_cli_cmd_close(&a);
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
    struct tm_cli_cmd a = {.c = {.cmd = "jobs", .api = true}};
    const char *team = NULL, *state = NULL, *klass = NULL;
    char path[TM_CLI_PATH_MAX] = "/v1/jobs";
    long limit = TM_CLI_DEFAULT_LIMIT;
    cJSON *page = NULL;
    int opt, r;

    if (argc >= 2 && strcmp(argv[1], "show") == 0)
        return jobs_one(argc - 1, argv + 1, JOB_SHOW);
    if (argc >= 2 && strcmp(argv[1], "cancel") == 0)
        return jobs_one(argc - 1, argv + 1, JOB_CANCEL);
    if (argc >= 2 && strcmp(argv[1], "retag") == 0)
        return jobs_one(argc - 1, argv + 1, JOB_RETAG);
    optind = 1;
    opterr = 0;
    while ((opt = getopt_long(argc, argv, ":h", opts, NULL)) != -1) {
        switch (opt) {
        case TM_CLI_OPT_HELP:
        case 'h':
            printf("Usage: tarmac jobs [--team T] [--state S] [--class C] [--limit N | --all] [options]\n"
                   "       tarmac jobs show ID\n"
                   "       tarmac jobs cancel ID [--reason TEXT]\n"
                   "       tarmac jobs retag ID --preemptible | --no-preemptible\n\n"
                   "List jobs, newest first (GET /v1/jobs, following its pages).  An engineer's\n"
                   "token sees its own team's jobs only.\n"
                   "      --team T             one team's jobs\n"
                   "      --state S            queued|running|succeeded|failed|preempted|cancelled\n"
                   "      --class C            train|eval|preprocess|inference|batch\n"
                   "      --limit N            at most N jobs (default %d); --all: every one\n\n"
                   "Options:\n%s",
                   TM_CLI_DEFAULT_LIMIT, tm_cli_api_help);
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
            if ((r = tm_cli_parse_limit(&a, optarg, &limit)) != 0)
                return r;
            break;
        case O_ALL:
            limit = 0;
            break;
        default:
            if ((r = tm_cli_cmd_opt(&a, opt, argv)) > 1)
                return r;
        }
    }
    if (optind < argc)
        return tm_cli_usage_error(a.c.cmd, "unexpected argument \"%s\" (verbs: show, cancel, retag)", argv[optind]);
    tm_cli_query_add(path, sizeof(path), "team", team);
    tm_cli_query_add(path, sizeof(path), "state", state);
    tm_cli_query_add(path, sizeof(path), "class", klass);
    if ((r = tm_cli_cmd_open(&a)) == 0 && (r = tm_cli_get_list(&a, path, limit, NULL, &page)) == 0)
        r = print_jobs(&a, page, true);
    cJSON_Delete(page);
    tm_cli_cmd_close(&a);
    return r;
}
