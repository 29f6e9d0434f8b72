/*
 * tests/fuzz/fuzz_gcp_json.c: Compute Engine and token answers through
 * every parser (providers/gcp/gce_json.c, gcp_auth.c).
 *
 * Built as a libFuzzer target (TM_FUZZ=ON, clang) and, with
 * TM_FUZZ_REPLAY, as a plain program that replays the corpus in ctest.
 * Properties beyond "no crash, no leak": a failure is TM_EBADREPLY or
 * TM_ENOMEM and names the call; a success hands back counts that match the
 * arrays, non-empty NUL-terminated ids, and known states.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/err.h"
#include "providers/gcp/gce.h"
#include "providers/gcp/gcp_auth.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *body = (const char *)data;
    struct tm_gce_reply er = {0};
    char tok[TM_GCP_TOKEN_MAX], err[256];
    int64_t ttl;

    for (int c = 0; c < TM_GCE_CALL_MAX; c++) {
        struct tm_gce_reply r;
        int s;

        err[0] = '\0';
        s = tm_gce_parse_reply((enum tm_gce_call)c, body, size, &r, err, sizeof(err));
        if (s == 0) {
            if ((r.ninstances && !r.instances) || (r.nops && !r.ops))
                abort();
            for (size_t i = 0; i < r.ninstances; i++) {
                const struct tm_instance *x = &r.instances[i].inst;

                if (!x->id[0] || strnlen(x->id, TM_ID_MAX) == TM_ID_MAX ||
                    strnlen(x->token, TM_ID_MAX) == TM_ID_MAX || x->state >= TM_INSTANCE_STATE_MAX)
                    abort();
            }
            for (size_t i = 0; i < r.nops; i++)
                if (!r.ops[i].name[0] || !r.ops[i].status[0])
                    abort();
            tm_gce_reply_release(&r);
        } else if (s != TM_EBADREPLY && s != TM_ENOMEM) {
            abort();
        } else if (!strstr(err, tm_gce_call_name((enum tm_gce_call)c))) {
            abort(); /* every failure names the call */
        }
    }
    if (tm_gce_parse_error(body, size, &er) == 0)
        (void)tm_gce_error_map(er.error_code, 400);
    if (tm_gcp_token_parse(body, size, tok, sizeof(tok), &ttl, err, sizeof(err)) == 0 &&
        (!tok[0] || ttl < 1))
        abort();
    return 0;
}

#ifdef TM_FUZZ_REPLAY
#include "tests/fuzz/replay_main.h"
#endif
