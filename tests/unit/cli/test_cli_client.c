/*
 * tests/unit/cli/test_cli_client.c: where the API commands send requests and
 * with which token (controller/cli/client.c), without a server: the order
 * of flags, environment and files; the client file's keys and its
 * permissions; and the escaping and table helpers the commands print with.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "controller/cli/cli.h"
#include "controller/cli/client.h"
#include "controller/cli/http.h"
#include "controller/cli/table.h"

static char dir[64];

static void put(const char *name, const char *text, mode_t mode, char *ret_path, size_t size)
{
    FILE *f;

    snprintf(ret_path, size, "%s/%s", dir, name);
    f = fopen(ret_path, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
    assert_int_equal(chmod(ret_path, mode), 0);
}

/* A clean slate: a HOME with no client file, no TARMAC_* variables. */
static int setup(void **state)
{
    (void)state;
    snprintf(dir, sizeof(dir), "/tmp/tm-cli-client.XXXXXX");
    assert_non_null(mkdtemp(dir));
    setenv("HOME", dir, 1);
    unsetenv("TARMAC_URL");
    unsetenv("TARMAC_TOKEN");
    unsetenv("TARMAC_CLIENT_CONFIG");
    unsetenv("TARMAC_CA_FILE");
    return 0;
}

static int teardown(void **state)
{
    char cmd[128];
    (void)state;
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
    assert_int_equal(system(cmd), 0);
    return 0;
}

static int resolve(const struct tm_cli_common *c, struct tm_cli_endpoint *ep)
{
    return tm_cli_endpoint_resolve(c, true, ep);
}

static void test_defaults_and_order(void **state)
{
    struct tm_cli_common c = {.cmd = "jobs", .api = true};
    struct tm_cli_endpoint ep;
    char file[256], text[512];
    (void)state;

    /* No token anywhere: refused before any request. */
    assert_int_equal(resolve(&c, &ep), TM_EXIT_USAGE);
    assert_null(ep.url);

    setenv("TARMAC_TOKEN", "tmk_env", 1);
    assert_int_equal(resolve(&c, &ep), 0);
    assert_string_equal(ep.url, "http://127.0.0.1:8080");
    assert_string_equal(ep.token, "tmk_env");
    assert_null(ep.ca_file);
    tm_cli_endpoint_release(&ep);

    /* The file's url and ca_file; TARMAC_TOKEN wins over its token. */
    snprintf(text, sizeof(text), "# mine\nurl: https://tarmac.example:8443/\ntoken: tmk_file\nca_file: /etc/ca.pem\n");
    put("client.yaml", text, 0600, file, sizeof(file));
    setenv("TARMAC_CLIENT_CONFIG", file, 1);
    assert_int_equal(resolve(&c, &ep), 0);
    assert_string_equal(ep.url, "https://tarmac.example:8443");   /* trailing '/' dropped */
    assert_string_equal(ep.token, "tmk_env");
    assert_string_equal(ep.ca_file, "/etc/ca.pem");
    tm_cli_endpoint_release(&ep);

    unsetenv("TARMAC_TOKEN");
    setenv("TARMAC_URL", "http://env:1", 1);
    setenv("TARMAC_CA_FILE", "/env/ca.pem", 1);
    assert_int_equal(resolve(&c, &ep), 0);
    assert_string_equal(ep.url, "http://env:1");
    assert_string_equal(ep.token, "tmk_file");
    assert_string_equal(ep.ca_file, "/env/ca.pem");
    tm_cli_endpoint_release(&ep);

    c.url = "http://flag:2";
    c.cacert = "/flag/ca.pem";
    assert_int_equal(resolve(&c, &ep), 0);
    assert_string_equal(ep.url, "http://flag:2");
    assert_string_equal(ep.ca_file, "/flag/ca.pem");
    tm_cli_endpoint_release(&ep);

    /* Not http(s): refused, naming where it came from. */
    c.url = "ftp://flag";
    assert_int_equal(resolve(&c, &ep), TM_EXIT_USAGE);
    c.url = "http://";
    assert_int_equal(resolve(&c, &ep), TM_EXIT_USAGE);
    /* Credentials in the URL: refused (they would be echoed in errors);
     * an '@' past the authority is only a path. */
    c.url = "http://u:s3cr3t@flag:2";
    assert_int_equal(resolve(&c, &ep), TM_EXIT_USAGE);
    c.url = "https://u@flag:2";
    assert_int_equal(resolve(&c, &ep), TM_EXIT_USAGE);
    c.url = "http://flag:2/a@b";
    assert_int_equal(resolve(&c, &ep), 0);
    tm_cli_endpoint_release(&ep);
}

static void test_file_permissions(void **state)
{
    struct tm_cli_common c = {.cmd = "jobs", .api = true};
    struct tm_cli_endpoint ep;
    char file[256], tok[256], text[512];
    (void)state;

    put("open.yaml", "url: http://x:1\ntoken: tmk_secret\n", 0644, file, sizeof(file));
    setenv("TARMAC_CLIENT_CONFIG", file, 1);
    assert_int_equal(resolve(&c, &ep), TM_EXIT_USAGE);
    assert_int_equal(chmod(file, 0640), 0);
    assert_int_equal(resolve(&c, &ep), TM_EXIT_USAGE);
    assert_int_equal(chmod(file, 0600), 0);
    assert_int_equal(resolve(&c, &ep), 0);
    assert_string_equal(ep.token, "tmk_secret");
    tm_cli_endpoint_release(&ep);

    /* Without a token, the file may be read by anyone. */
    put("url-only.yaml", "url: http://x:1\n", 0644, file, sizeof(file));
    setenv("TARMAC_CLIENT_CONFIG", file, 1);
    setenv("TARMAC_TOKEN", "tmk_env", 1);
    assert_int_equal(resolve(&c, &ep), 0);
    tm_cli_endpoint_release(&ep);
    unsetenv("TARMAC_TOKEN");

    /* token_file: its first line, and it must be private too. */
    put("tok", "tmk_from_file\n", 0604, tok, sizeof(tok));
    snprintf(text, sizeof(text), "url: http://x:1\ntoken_file: %s\n", tok);
    put("tf.yaml", text, 0644, file, sizeof(file));
    setenv("TARMAC_CLIENT_CONFIG", file, 1);
    assert_int_equal(resolve(&c, &ep), TM_EXIT_USAGE);
    assert_int_equal(chmod(tok, 0400), 0);
    assert_int_equal(resolve(&c, &ep), 0);
    assert_string_equal(ep.token, "tmk_from_file");
    tm_cli_endpoint_release(&ep);

    /* An explicit TARMAC_CLIENT_CONFIG must exist; the default need not. */
    setenv("TARMAC_CLIENT_CONFIG", "/nonexistent/client.yaml", 1);
    assert_int_equal(resolve(&c, &ep), TM_EXIT_USAGE);
}

static void test_file_refused(void **state)
{
    static const char *const bad[] = {
        "url: http://x:1\ntokn: tmk_x\n",                    /* unknown key */
        "url: http://x:1\nurl: http://y:1\n",                /* given twice */
        "- url\n",                                           /* not a mapping */
        "url: [a, b]\n",                                     /* not a string */
        "token: tmk_a\ntoken_file: /x\n",                    /* both */
        "token: \"tmk a\"\n",                                /* not a token */
        "url: \"unterminated\n",                             /* not YAML */
    };
    struct tm_cli_common c = {.cmd = "jobs", .api = true};
    struct tm_cli_endpoint ep;
    char file[256];
    (void)state;

    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        put("bad.yaml", bad[i], 0600, file, sizeof(file));
        setenv("TARMAC_CLIENT_CONFIG", file, 1);
        assert_int_equal(resolve(&c, &ep), TM_EXIT_USAGE);
        assert_null(ep.url);
        assert_null(ep.token);
    }
    /* A token that would break the header line is refused. */
    unsetenv("TARMAC_CLIENT_CONFIG");
    setenv("TARMAC_TOKEN", "tmk_a\r\nX-Evil: 1", 1);
    assert_int_equal(resolve(&c, &ep), TM_EXIT_USAGE);
    unsetenv("TARMAC_TOKEN");
}

static void test_escape(void **state)
{
    char out[32];
    (void)state;

    assert_true(tm_cli_http_escape("job:12 a&b=c/d", out, sizeof(out)));
    assert_string_equal(out, "job%3A12%20a%26b%3Dc%2Fd");
    assert_true(tm_cli_http_escape("A-z_0.9~", out, sizeof(out)));
    assert_string_equal(out, "A-z_0.9~");
    assert_false(tm_cli_http_escape("&&&&&&&&&&&", out, sizeof(out)));   /* 33 bytes needed */
}

static void test_table(void **state)
{
    static const char *const cols[] = {"ID", "REASON"};
    struct tm_table t;
    char *buf = NULL;
    size_t len = 0;
    FILE *out;
    (void)state;

    out = open_memstream(&buf, &len);
    assert_non_null(out);
    tm_table_init(&t, 2, cols);
    tm_table_cell(&t, "%d", 7);
    tm_table_cell(&t, "line one\nline two");
    tm_table_cell(&t, "%d", 12345);
    tm_table_cell(&t, "%s", "r\xc3\xa9sum\xc3\xa9");   /* 6 columns, 8 bytes */
    assert_int_equal(tm_table_print(&t, out), 0);
    tm_table_release(&t);
    fclose(out);
    assert_string_equal(buf, "ID     REASON\n"
                             "7      line one line two\n"
                             "12345  r\xc3\xa9sum\xc3\xa9\n");
    free(buf);

    out = open_memstream(&buf, &len);
    tm_table_init(&t, 2, cols);
    assert_int_equal(tm_table_print(&t, out), 0);
    tm_table_release(&t);
    fclose(out);
    assert_string_equal(buf, "ID  REASON\n(none)\n");
    free(buf);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_defaults_and_order, setup, teardown),
        cmocka_unit_test_setup_teardown(test_file_permissions, setup, teardown),
        cmocka_unit_test_setup_teardown(test_file_refused, setup, teardown),
        cmocka_unit_test(test_escape),
        cmocka_unit_test(test_table),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
