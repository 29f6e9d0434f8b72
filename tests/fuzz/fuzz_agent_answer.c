/*
 * tests/fuzz/fuzz_agent_answer.c: libFuzzer target for the agent's reading
 * of the controller's answers (controller/agent/answer.c): the heartbeat
 * answer and the enrollment answer.  A parsed answer is walked whole and
 * checked against the limits the parser promises, so a bound it forgets
 * shows up as a failed check, not only as a crash.
 *
 * Built as the fuzz target (TM_FUZZ=ON, clang) and, with TM_FUZZ_REPLAY,
 * as a plain program that ctest runs over tests/fuzz/corpus/agent_answer.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "controller/agent/answer.h"
#include "core/err.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check(int ok, const char *what)
{
    if (!ok) {
        fprintf(stderr, "fuzz_agent_answer: broken promise: %s\n", what);
        abort();
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct tm_agent_answer a;
    char err[256];
    char *tok = NULL;
    int r = tm_agent_answer_parse((const char *)data, size, &a, err, sizeof(err));

    if (r == 0) {
        check(a.count <= TM_AGENT_MAX_ASSIGNMENTS, "assignment count");
        for (size_t i = 0; i < a.count; i++) {
            const struct tm_agent_assignment *as = &a.assignments[i];
            check(as->job_id > 0 && as->attempt >= 0, "ids");
            check(as->command && as->command[0], "command");
            check(as->gpu_count <= TM_AGENT_MAX_GPUS, "gpu count");
            for (size_t k = 0; k < as->gpu_count; k++)
                check(as->gpu_indices[k] >= 0 && as->gpu_indices[k] < TM_AGENT_MAX_GPUS, "gpu index");
            check(as->env_count <= TM_AGENT_MAX_ENV, "env count");
            for (size_t k = 0; k < as->env_count; k++)
                check(strncmp(as->env_names[k], "TARMAC_", 7) != 0, "reserved env");
            check(tm_agent_answer_find(&a, as->job_id, as->attempt) >= 0, "find");
        }
        tm_agent_answer_release(&a);
    } else {
        check(r == TM_EBADREPLY || r == TM_ENOMEM, "error code");
        check(r == TM_ENOMEM || err[0] != '\0', "error names the problem");
    }
    if (tm_agent_enroll_parse((const char *)data, size, 1, &tok, err, sizeof(err)) == 0) {
        check(tok && tok[0] && !strchr(tok, '\n'), "token");
        free(tok);
    }
    return 0;
}

#ifdef TM_FUZZ_REPLAY
#include "tests/fuzz/replay_main.h"
#endif
