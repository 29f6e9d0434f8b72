/*
 * tests/fuzz/fuzz_ec2_xml.c: EC2 answers through every parser.
 *
 * Built two ways: as a libFuzzer target (TM_FUZZ=ON, clang), and with
 * TM_FUZZ_REPLAY as a plain program that feeds every file of a corpus
 * directory through the same entry point, so ctest replays the corpus with
 * any compiler on every run.
 *
 * Properties checked beyond "no crash, no leak": a failure is TM_EBADREPLY
 * or TM_ENOMEM and names the action; a success hands back counts that
 * match the arrays and NUL-terminated fields.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/err.h"
#include "providers/aws/ec2.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *body = (const char *)data;
    struct tm_ec2_reply err_reply = {0};

    for (int a = 0; a < TM_EC2_ACTION_MAX; a++) {
        struct tm_ec2_reply r;
        char err[256] = "";
        int s = tm_ec2_parse_reply((enum tm_ec2_action)a, body, size, &r, err, sizeof(err));

        if (s == 0) {
            if ((r.ninstances && !r.instances) || (r.ntypes && !r.types) ||
                (r.nprices && !r.prices) || (r.nstatuses && !r.statuses) ||
                (r.nfleet_instances && !r.fleet_instances) ||
                (r.nfleet_errors && !r.fleet_errors) || (r.nreservations && !r.reservations))
                abort();
            for (size_t i = 0; i < r.ninstances; i++)
                if (strnlen(r.instances[i].inst.id, TM_ID_MAX) == TM_ID_MAX ||
                    r.instances[i].inst.id[0] == '\0')
                    abort();
            tm_ec2_reply_release(&r);
        } else if (s != TM_EBADREPLY && s != TM_ENOMEM) {
            abort();
        } else if (!strstr(err, tm_ec2_action_name((enum tm_ec2_action)a))) {
            abort(); /* every failure names the action */
        }
    }
    if (tm_ec2_parse_error(body, size, &err_reply) == 0 && err_reply.error_code[0] == '\0')
        abort();
    (void)tm_ec2_error_map(err_reply.error_code, 400);
    return 0;
}

#ifdef TM_FUZZ_REPLAY
#include "tests/fuzz/replay_main.h"
#endif
