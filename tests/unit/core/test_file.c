/*
 * tests/unit/core/test_file.c: tm_file_read (core/file.c), the whole-file reader
 * of the trace, spot trace and table loaders: the size cap at its exact
 * edge, a missing file, an empty one, an endless device.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "core/err.h"
#include "core/file.h"

static char path[64];

static int setup(void **state)
{
    int fd;
    (void)state;
    snprintf(path, sizeof(path), "/tmp/tm-file-XXXXXX");
    fd = mkstemp(path);
    if (fd < 0)
        return -1;
    close(fd);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    unlink(path);
    return 0;
}

static void write_bytes(size_t n)
{
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    for (size_t i = 0; i < n; i++)
        fputc('a' + (int)(i % 26), f);
    fclose(f);
}

/* Exactly the cap is read (NUL-terminated, past the 64 KiB first
 * buffer); one byte more is refused, naming the file and the cap. */
static void test_cap_edge(void **state)
{
    char *buf = NULL, err[256];
    size_t len = 0;
    (void)state;
    write_bytes(200000);
    assert_int_equal(tm_file_read(path, 200000, &buf, &len, err, sizeof(err)), 0);
    assert_int_equal(len, 200000);
    assert_int_equal(buf[len], '\0');
    assert_int_equal(buf[199999], 'a' + 199999 % 26);
    free(buf);
    buf = NULL;
    assert_int_equal(tm_file_read(path, 199999, &buf, &len, err, sizeof(err)), TM_EINVAL);
    assert_null(buf);
    assert_non_null(strstr(err, path));
    assert_non_null(strstr(err, "larger than 199999 bytes"));
}

static void test_empty_missing_endless(void **state)
{
    char *buf = NULL, err[256];
    size_t len = 7;
    (void)state;
    write_bytes(0);
    assert_int_equal(tm_file_read(path, 10, &buf, &len, err, sizeof(err)), 0);
    assert_int_equal(len, 0);
    assert_int_equal(buf[0], '\0');
    free(buf);
    buf = NULL;
    assert_int_equal(tm_file_read("/nonexistent/tm-file", 10, &buf, &len, err, sizeof(err)),
                     -ENOENT);
    assert_null(buf);
    assert_non_null(strstr(err, "/nonexistent/tm-file: could not open"));
    /* A character device with no end: refused at the cap, not read whole. */
    assert_int_equal(tm_file_read("/dev/zero", 100000, &buf, &len, NULL, 0), TM_EINVAL);
    assert_null(buf);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_cap_edge),
        cmocka_unit_test(test_empty_missing_endless),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
