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
#include <dirent.h>
#include <sys/stat.h>

static int replay_file(const char *path)
{
    FILE *f = fopen(path, "rb");
    char *buf = NULL;
    size_t len = 0, cap = 0;
    int r = 0;

    if (!f) {
        fprintf(stderr, "%s: could not open\n", path);
        return -1;
    }
    for (;;) {
        if (len == cap) {
            char *nb;
            cap = cap ? cap * 2 : 4096;
            nb = realloc(buf, cap);
            if (!nb) {
                r = -1;
                goto out;
            }
            buf = nb;
        }
        size_t n = fread(buf + len, 1, cap - len, f);
        if (n == 0)
            break;
        len += n;
    }
    if (ferror(f)) {
        fprintf(stderr, "%s: could not read\n", path);
        r = -1;
        goto out;
    }
    LLVMFuzzerTestOneInput((const uint8_t *)buf, len);
out:
    free(buf);
    fclose(f);
    return r;
}

/* Arguments are files or directories (not recursed into subdirectories). */
int main(int argc, char **argv)
{
    size_t count = 0;
    int failed = 0;

    for (int i = 1; i < argc; i++) {
        struct stat st;
        DIR *d;
        struct dirent *e;

        if (stat(argv[i], &st) != 0) {
            fprintf(stderr, "%s: not found\n", argv[i]);
            return 1;
        }
        if (!S_ISDIR(st.st_mode)) {
            failed |= replay_file(argv[i]) != 0;
            count++;
            continue;
        }
        d = opendir(argv[i]);
        if (!d)
            return 1;
        while ((e = readdir(d)) != NULL) {
            char path[4096];
            if (e->d_name[0] == '.')
                continue;
            snprintf(path, sizeof(path), "%s/%s", argv[i], e->d_name);
            if (stat(path, &st) != 0 || !S_ISREG(st.st_mode))
                continue;
            failed |= replay_file(path) != 0;
            count++;
        }
        closedir(d);
    }
    printf("replayed %zu inputs\n", count);
    if (count == 0) {
        fprintf(stderr, "no inputs found\n");
        return 1;
    }
    return failed ? 1 : 0;
}
#endif
