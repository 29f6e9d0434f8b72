/*
 * tests/fuzz/replay_main.h: the corpus replayer every fuzz target shares.
 *
 * A target defines LLVMFuzzerTestOneInput() and, under TM_FUZZ_REPLAY,
 * includes this file once: it becomes a plain program (any compiler, no
 * libFuzzer) that feeds each file named on the command line, or each file
 * of each directory named, to the target.  ctest runs it over the committed
 * corpus on every build, so a crash the fuzzer once found stays fixed.
 * Exit status: 0, or 1 when an input could not be read or none was found.
 */
#ifndef TM_FUZZ_REPLAY_MAIN_H
#define TM_FUZZ_REPLAY_MAIN_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

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
