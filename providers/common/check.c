/*
 * providers/common/check.c: the runner of `tarmac check <cloud>` (see
 * check.h).
 */
#include "providers/common/check.h"

#include <string.h>

#include "core/err.h"

void tm_check_usage(const struct tm_check_backend *be, FILE *out)
{
    fprintf(out, "usage: tarmac check %s %s\n", be->cloud, be->usage);
}

int tm_check_parse(const struct tm_check_backend *be, int argc, char **argv,
                   const struct tm_check_option *opts, size_t nopts)
{
    if (argc < 2 || strcmp(argv[0], "check") != 0 || strcmp(argv[1], be->cloud) != 0) {
        tm_check_usage(be, stderr);
        return TM_CHECK_USAGE;
    }
    for (int i = 2; i < argc; i++) {
        const char **dst = NULL;

        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            tm_check_usage(be, stdout);
            return TM_CHECK_OK;
        }
        for (size_t k = 0; k < nopts && !dst; k++)
            if (strcmp(argv[i], opts[k].flag) == 0)
                dst = opts[k].value;
        if (!dst || i + 1 >= argc) {
            tm_check_usage(be, stderr);
            return TM_CHECK_USAGE;
        }
        *dst = argv[++i];
    }
    return -1;
}

void tm_check_finish(struct tm_check *ck, int status, const char *code, const char *message)
{
    ck->status = status;
    ck->done = true;
    snprintf(ck->code, sizeof(ck->code), "%s", code ? code : "");
    snprintf(ck->message, sizeof(ck->message), "%s", message ? message : "");
}

int tm_check_run(const struct tm_check_backend *be, void *ctx)
{
    struct tm_check ck = {.cloud = be->cloud};
    uv_loop_t loop;
    int rc, r;

    if (uv_loop_init(&loop) != 0)
        return TM_CHECK_FAILED;
    r = be->start(&ck, &loop, ctx);
    if (r == 0)
        uv_run(&loop, UV_RUN_DEFAULT);
    if (r < 0 && !ck.done) {
        fprintf(stderr, "%s check: could not start: %s\n", be->cloud, tm_strerror(r));
        rc = TM_CHECK_FAILED;
    } else if (ck.status == 0) {
        fprintf(stderr, "%s check: ok, ", be->cloud);
        be->ok_line(&ck, ctx, stderr);
        fputc('\n', stderr);
        rc = TM_CHECK_OK;
    } else if ((rc = be->failed ? be->failed(&ck, ctx) : -1) >= 0) {
        /* the cloud said it itself */
    } else if (ck.status == TM_EAUTH) {
        /* Codes and the clouds' messages never carry the secret. */
        fprintf(stderr, "%s check: authentication failed%s%s%s: %s\n", be->cloud,
                ck.code[0] ? " (" : "", ck.code, ck.code[0] ? ")" : "",
                ck.message[0] ? ck.message : "credentials refused");
        rc = TM_CHECK_AUTH;
    } else {
        fprintf(stderr, "%s check: %s%s%s%s%s%s%s\n", be->cloud, ck.what,
                ck.what[0] ? ": " : "", ck.failure[0] ? ck.failure : tm_strerror(ck.status),
                ck.code[0] ? ": " : "", ck.code, ck.message[0] ? ": " : "", ck.message);
        rc = TM_CHECK_FAILED;
    }
    if (uv_loop_close(&loop) != 0)
        rc = rc ? rc : TM_CHECK_FAILED;
    return rc;
}
