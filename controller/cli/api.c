/*
 * controller/cli/api.c: see cli/api.h.
 */
#include "controller/cli/api.h"

#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cjson/cJSON.h>

#include "controller/cli/cli.h"

int tm_cli_cmd_open(struct tm_cli_cmd *a)
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

void tm_cli_cmd_close(struct tm_cli_cmd *a)
{
    if (a->open) {
        tm_cli_http_release(&a->http);
        tm_cli_endpoint_release(&a->ep);
        a->open = false;
    }
}

/* The default branch of every getopt loop here. */
int tm_cli_cmd_opt(struct tm_cli_cmd *a, int opt, char **argv)
{
    return tm_cli_common_opt(&a->c, opt, optarg, argv);
}

int tm_cli_print_json(const cJSON *doc)
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

int tm_cli_print_table(struct tm_table *t)
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
const char *tm_cli_jtext(const cJSON *o, const char *key, char *buf, size_t size)
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

void tm_cli_jcell(struct tm_table *t, const cJSON *o, const char *key)
{
    char buf[32];

    tm_table_cell(t, "%s", tm_cli_jtext(o, key, buf, sizeof(buf)));
}

bool tm_cli_jnum(const cJSON *o, const char *key, int64_t *ret)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    if (!cJSON_IsNumber(v))
        return false;
    *ret = (int64_t)v->valuedouble;
    return true;
}

/* Milliseconds since the epoch (the controller's clock) as UTC. */
const char *tm_cli_fmt_ms(const cJSON *o, const char *key, char *buf, size_t size)
{
    int64_t ms;
    struct tm tm;
    time_t t;

    if (!tm_cli_jnum(o, key, &ms))
        return "-";
    t = (time_t)(ms / 1000);
    if (!gmtime_r(&t, &tm) || strftime(buf, size, "%Y-%m-%d %H:%M:%S", &tm) == 0)
        return "-";
    return buf;
}

/* Cents as dollars: 123456 -> "1234.56". */
const char *tm_cli_fmt_cents(const cJSON *o, const char *key, char *buf, size_t size)
{
    int64_t c;

    if (!tm_cli_jnum(o, key, &c))
        return "-";
    snprintf(buf, size, "%s%" PRId64 ".%02" PRId64, c < 0 ? "-" : "", (c < 0 ? -c : c) / 100,
             (c < 0 ? -c : c) % 100);
    return buf;
}

/* Whole GPUs ("4", a gang "4x2") or a share of one ("0.25"). */
const char *tm_cli_fmt_gpus(const cJSON *job, char *buf, size_t size)
{
    int64_t gpus = 0, milli = 0, nodes = 1;

    tm_cli_jnum(job, "gpus", &gpus);
    tm_cli_jnum(job, "gpu_milli", &milli);
    tm_cli_jnum(job, "nodes", &nodes);
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
bool tm_cli_query_add(char *path, size_t size, const char *name, const char *value)
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
int tm_cli_get_list(struct tm_cli_cmd *a, const char *path, long want, bool (*keep)(const cJSON *),
                    cJSON **ret_page)
{
    cJSON *all = cJSON_CreateObject(), *items = cJSON_AddArrayToObject(all, "items");
    char cursor[64] = "", page_path[TM_CLI_PATH_MAX];
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
        if ((left > 0 && left < TM_CLI_DEFAULT_LIMIT && !tm_cli_query_add(page_path, sizeof(page_path), "limit", lim)) ||
            (cursor[0] && !tm_cli_query_add(page_path, sizeof(page_path), "cursor", cursor))) {
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
int tm_cli_parse_limit(struct tm_cli_cmd *a, const char *arg, long *ret)
{
    if (!tm_cli_parse_long(arg, 1, TM_CLI_LIMIT_MAX, ret))
        return tm_cli_usage_error(a->c.cmd, "--limit: must be a whole number from 1 to %d, not \"%s\"",
                                  TM_CLI_LIMIT_MAX, arg);
    return 0;
}

/* A job or node id argument: a positive whole number. */
int tm_cli_parse_id(struct tm_cli_cmd *a, const char *what, const char *arg, char *out, size_t size)
{
    long v;
    if (!arg)
        return tm_cli_usage_error(a->c.cmd, "missing %s id", what);
    if (!tm_cli_parse_long(arg, 1, LONG_MAX, &v))
        return tm_cli_usage_error(a->c.cmd, "%s id: must be a positive whole number, not \"%s\"", what, arg);
    snprintf(out, size, "%ld", v);
    return 0;
}

void tm_cli_print_members(const cJSON *job, const char *indent)
{
    const cJSON *members = cJSON_GetObjectItemCaseSensitive(job, "members"), *m;
    char b[8][48];

    /* A job of one node has nothing to list: its node is in the job's own line. */
    if (cJSON_GetArraySize(members) < 2)
        return;
    printf("%snodes of attempt %s, by rank:\n", indent,
           tm_cli_jtext(cJSON_GetArrayItem(members, 0), "attempt", b[0], sizeof(b[0])));
    const cJSON *st = cJSON_GetObjectItemCaseSensitive(job, "state");
    bool running = cJSON_IsString(st) && strcmp(st->valuestring, "running") == 0;
    cJSON_ArrayForEach(m, members)
    {
        /* a member of an attempt that ended without its own exit recorded
         * was stopped with the rest of its gang */
        const char *ended = running ? "running" : "stopped with the gang";
        if (!cJSON_IsNumber(cJSON_GetObjectItemCaseSensitive(m, "claimed_ms")))
            ended = "not claimed yet";
        else if (!cJSON_IsNumber(cJSON_GetObjectItemCaseSensitive(m, "started_ms")))
            ended = "claimed, not started";
        if (cJSON_IsNumber(cJSON_GetObjectItemCaseSensitive(m, "exited_ms"))) {
            if (cJSON_IsNumber(cJSON_GetObjectItemCaseSensitive(m, "signal")))
                snprintf(b[4], sizeof(b[4]), "killed by signal %s",
                         tm_cli_jtext(m, "signal", b[5], sizeof(b[5])));
            else
                snprintf(b[4], sizeof(b[4]), "exit %s", tm_cli_jtext(m, "exit_code", b[5], sizeof(b[5])));
            ended = b[4];
        }
        printf("%s  rank %s  node %s  %s  %s\n", indent, tm_cli_jtext(m, "rank", b[1], sizeof(b[1])),
               tm_cli_jtext(m, "node_id", b[2], sizeof(b[2])), tm_cli_jtext(m, "address", b[3], sizeof(b[3])),
               ended);
    }
    if (cJSON_IsNumber(cJSON_GetObjectItemCaseSensitive(job, "exit_rank")))
        printf("%sfailed by rank %s (node %s): exit %s, signal %s\n", indent,
               tm_cli_jtext(job, "exit_rank", b[0], sizeof(b[0])),
               tm_cli_jtext(job, "exit_node_id", b[1], sizeof(b[1])),
               tm_cli_jtext(job, "exit_code", b[2], sizeof(b[2])), tm_cli_jtext(job, "signal", b[3], sizeof(b[3])));
}
