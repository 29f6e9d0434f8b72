/*
 * tests/fuzz/fuzz_config.c: libFuzzer target for the configuration loader.
 *
 * Built two ways from this one file: with -fsanitize=fuzzer as the fuzz
 * target (TM_FUZZ=ON, clang), and with TM_FUZZ_REPLAY defined as a plain
 * program that feeds every file of a corpus directory through the same entry
 * point, so ctest replays the corpus with any compiler on every run.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/config.h"
#include "core/err.h"
#include "core/log.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct tm_config cfg = {0};
    char err[512];
    int r;

    r = tm_config_load_string((const char *)data, size, "fuzz.yaml", &cfg, err, sizeof(err));
    if (r == 0) {
        /* Whatever loads must satisfy the header's invariants. */
        if (cfg.nproviders < 1 || cfg.npools < 1 || !cfg.cluster || !cfg.listen)
            abort();
        for (size_t i = 0; i < cfg.npools; i++) {
            const struct tm_config_pool *p = &cfg.pools[i];
            if (!tm_config_provider_find(&cfg, p->provider) || p->min_nodes > p->max_nodes ||
                !p->gpu_model || p->gpus_per_node < 1 || p->nzones < 1 ||
                p->ninstance_types < 1)
                abort();
        }
    } else if (r != TM_EINVAL && r != TM_ENOMEM) {
        abort();
    } else if (err[0] == '\0') {
        abort(); /* every failure must say why */
    }
    tm_config_release(&cfg);
    /* Secrets accumulate in the logger across inputs; start each clean. */
    tm_log_clear_secrets();
    return 0;
}

#ifdef TM_FUZZ_REPLAY
#include "tests/fuzz/replay_main.h"
#endif
