/*
 * controller/cli/logs.c: `tarmac logs ID [--attempt N] [--rank R]
 * [--follow] [--tail N]`: a job's output as it was written (GET
 * /v1/jobs/{id}/logs, docs/logs.md), to stdout byte for byte.
 *
 * The API answers at most a few MiB per request and says where the next
 * one starts (X-Tarmac-Next-Offset); this follows those pages until an
 * empty one, or with --follow until the attempt has ended and everything
 * it wrote is out (X-Tarmac-Log-End), each request held open by the server
 * while nothing new has come (logs.follow_limit).
 */
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "controller/cli/api.h"
#include "controller/cli/cli.h"

static bool whole_arg(const char *s, int64_t min, int64_t max, int64_t *ret)
{
    char *end;
    long long v;

    if (!s[0] || s[0] == '-' || s[0] == '+')
        return false;
    v = strtoll(s, &end, 10);
    if (*end || v < min || v > max)
        return false;
    *ret = v;
    return true;
}

int tm_cli_api_logs(int argc, char **argv)
{
    enum { O_ATTEMPT = 1, O_RANK, O_FOLLOW, O_TAIL };
    static const struct option opts[] = {
        TM_CLI_API_OPTIONS,
        {"attempt", required_argument, NULL, O_ATTEMPT}, {"rank", required_argument, NULL, O_RANK},
        {"follow", no_argument, NULL, O_FOLLOW}, {"tail", required_argument, NULL, O_TAIL}, {0},
    };
    struct tm_cli_cmd a = {.c = {.cmd = "logs", .api = true}};
    int64_t id = 0, attempt = 0, rank = 0, tail = -1, offset = 0;
    bool follow = false;
    int opt, r;

    optind = 1;
    opterr = 0;
    while ((opt = getopt_long(argc, argv, ":hf", opts, NULL)) != -1) {
        switch (opt) {
        case TM_CLI_OPT_HELP:
        case 'h':
            printf("Usage: tarmac logs ID [--attempt N] [--rank R] [--follow] [--tail N] [options]\n\n"
                   "A job's output (stdout and stderr as written), byte for byte\n"
                   "(GET /v1/jobs/ID/logs).  By default the latest attempt's rank 0.\n"
                   "      --attempt N          that attempt (1 is the first)\n"
                   "      --rank R             that node of a multi-node job (0 .. nodes-1)\n"
                   "  -f, --follow             keep printing as the job writes, until its attempt ends\n"
                   "      --tail N             from the last N bytes only\n\n"
                   "Options:\n%s",
                   tm_cli_api_help);
            return TM_EXIT_OK;
        case O_ATTEMPT:
            if (!whole_arg(optarg, 1, INT32_MAX, &attempt))
                return tm_cli_usage_error(a.c.cmd, "--attempt: must be a positive whole number, not \"%s\"", optarg);
            break;
        case O_RANK:
            if (!whole_arg(optarg, 0, 1023, &rank))
                return tm_cli_usage_error(a.c.cmd, "--rank: must be a whole number from 0 to 1023, not \"%s\"",
                                          optarg);
            break;
        case 'f':
        case O_FOLLOW:
            follow = true;
            break;
        case O_TAIL:
            if (!whole_arg(optarg, 0, INT64_C(1) << 50, &tail))
                return tm_cli_usage_error(a.c.cmd, "--tail: must be a whole number of bytes, not \"%s\"", optarg);
            break;
        default:
            if ((r = tm_cli_cmd_opt(&a, opt, argv)) > 1)
                return r;
        }
    }
    if (optind >= argc)
        return tm_cli_usage_error(a.c.cmd, "which job? (tarmac logs ID)");
    if (!whole_arg(argv[optind], 1, INT64_C(999999999999999999), &id))
        return tm_cli_usage_error(a.c.cmd, "ID: must be a positive whole number, not \"%s\"", argv[optind]);
    if (optind + 1 < argc)
        return tm_cli_usage_error(a.c.cmd, "unexpected argument \"%s\"", argv[optind + 1]);
    if ((r = tm_cli_cmd_open(&a)) != 0) {
        tm_cli_cmd_close(&a);
        return r;
    }
    for (bool first = true;; first = false) {
        char path[TM_CLI_PATH_MAX], num[24];
        const char *next, *end, *att;
        char *body = NULL;
        size_t len = 0;

        snprintf(path, sizeof(path), "/v1/jobs/%" PRId64 "/logs", id);
        if (attempt > 0) {
            snprintf(num, sizeof(num), "%" PRId64, attempt);
            tm_cli_query_add(path, sizeof(path), "attempt", num);
        }
        snprintf(num, sizeof(num), "%" PRId64, rank);
        tm_cli_query_add(path, sizeof(path), "rank", num);
        if (first && tail >= 0) {
            snprintf(num, sizeof(num), "%" PRId64, tail);
            tm_cli_query_add(path, sizeof(path), "tail", num);
        } else {
            snprintf(num, sizeof(num), "%" PRId64, offset);
            tm_cli_query_add(path, sizeof(path), "offset", num);
        }
        if (follow)
            tm_cli_query_add(path, sizeof(path), "follow", "true");
        r = tm_cli_http_get_bytes(&a.http, path, &body, &len);
        if (r != 0)
            break;
        next = tm_cli_http_header(&a.http, "X-Tarmac-Next-Offset");
        end = tm_cli_http_header(&a.http, "X-Tarmac-Log-End");
        att = tm_cli_http_header(&a.http, "X-Tarmac-Attempt");
        if (len && fwrite(body, 1, len, stdout) != len) {
            free(body);
            r = TM_EXIT_FAIL;
            break;
        }
        free(body);
        fflush(stdout);
        if (!next || !whole_arg(next, 0, INT64_C(1) << 62, &offset)) {
            fprintf(stderr, "tarmac logs: the server's answer has no X-Tarmac-Next-Offset\n");
            r = TM_EXIT_FAIL;
            break;
        }
        /* The same attempt on every page, even if the job starts another. */
        if (attempt == 0 && att)
            whole_arg(att, 1, INT32_MAX, &attempt);
        if (end && strcmp(end, "true") == 0 && len == 0)
            break;
        if (!follow && len == 0)
            break;
    }
    tm_cli_cmd_close(&a);
    return r;
}
