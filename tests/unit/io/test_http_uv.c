/*
 * tests/unit/io/test_http_uv.c: controller/io/http_uv.c against a loopback server.
 *
 * tests/lib/http_fixture.py runs as a child process for the whole group and
 * serves canned answers.  Each test runs its own loop and ends by closing
 * the client and asserting uv_loop_close() == 0: nothing leaked on the loop.
 */
#include <errno.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <netinet/in.h>
#include <unistd.h>

#include <cmocka.h>

#include "controller/io/http_uv.h"
#include "core/err.h"

static pid_t server_pid = -1;
static int server_stdin = -1;
static int server_port;
static int in_api; /* set while a tm_http_* call runs: callbacks must not */
static int total_calls;

struct result {
    int calls;
    int status;
    long http_status;
    char body[256];
    size_t body_len;
    char retry_after[32];
    char request_id[64];
};

static void on_resp(const struct tm_http_response *resp, void *data)
{
    struct result *res = data;

    assert_int_equal(in_api, 0);
    total_calls++;
    res->calls++;
    res->status = resp->status;
    res->http_status = resp->http_status;
    res->body_len = resp->body_len;
    assert_non_null(resp->body);
    snprintf(res->body, sizeof(res->body), "%s", resp->body);
    snprintf(res->retry_after, sizeof(res->retry_after), "%s",
             resp->retry_after ? resp->retry_after : "");
    snprintf(res->request_id, sizeof(res->request_id), "%s",
             resp->request_id ? resp->request_id : "");
}

static void on_done(void *data)
{
    (*(int *)data)++;
}

static int server_start(void **state)
{
    const char *src = getenv("TM_SOURCE_DIR");
    char script[1024];
    char line[256];
    int in[2], out[2];
    FILE *p;

    if (!src)
        src = TM_SOURCE_DIR;
    snprintf(script, sizeof(script), "%s/tests/lib/http_fixture.py", src);
    if (pipe(in) < 0 || pipe(out) < 0)
        return -1;
    server_pid = fork();
    if (server_pid < 0)
        return -1;
    if (server_pid == 0) {
        dup2(in[0], 0);
        dup2(out[1], 1);
        close(in[1]);
        close(out[0]);
        execlp("python3", "python3", script, (char *)NULL);
        _exit(127);
    }
    close(in[0]);
    close(out[1]);
    server_stdin = in[1];
    /* Look for the marker line: an interpreter wrapper may print first. */
    p = fdopen(out[0], "r");
    if (!p)
        return -1;
    while (fgets(line, sizeof(line), p)) {
        if (sscanf(line, "tm-http-fixture port=%d", &server_port) == 1)
            break;
        fprintf(stderr, "http_fixture: %s", line);
    }
    fclose(p);
    return server_port > 0 ? 0 : -1;
}

static int server_stop(void **state)
{
    if (server_stdin >= 0)
        close(server_stdin);
    if (server_pid > 0) {
        kill(server_pid, SIGTERM);
        waitpid(server_pid, NULL, 0);
    }
    return 0;
}

static void url_for(char *buf, size_t size, const char *path)
{
    snprintf(buf, size, "http://127.0.0.1:%d%s", server_port, path);
}

static int request(struct tm_http *http, const struct tm_http_request *req, struct result *res)
{
    int r;

    in_api = 1;
    r = tm_http_request(http, req, on_resp, res);
    in_api = 0;
    return r;
}

static void on_watchdog(uv_timer_t *t)
{
    *(int *)t->data = 1;
}

/* Run the loop until *count reaches want, failing after limit_ms. */
static void run_until(uv_loop_t *loop, const int *count, int want, uint64_t limit_ms)
{
    uv_timer_t watchdog;
    int expired = 0;

    uv_timer_init(loop, &watchdog);
    watchdog.data = &expired;
    uv_timer_start(&watchdog, on_watchdog, limit_ms, 0);
    while (*count < want && !expired)
        uv_run(loop, UV_RUN_ONCE);
    uv_close((uv_handle_t *)&watchdog, NULL);
    uv_run(loop, UV_RUN_NOWAIT);
    assert_false(expired);
}

static void close_and_check(uv_loop_t *loop, struct tm_http *http)
{
    int closed = 0;

    in_api = 1;
    tm_http_close(http, on_done, &closed);
    in_api = 0;
    uv_run(loop, UV_RUN_DEFAULT);
    assert_int_equal(closed, 1);
    assert_int_equal(uv_loop_close(loop), 0);
}

static struct tm_http *setup_loop(uv_loop_t *loop)
{
    struct tm_http *http = NULL;

    assert_int_equal(uv_loop_init(loop), 0);
    assert_int_equal(tm_http_create(loop, &http), 0);
    assert_non_null(http);
    return http;
}

static void test_get_ok(void **state)
{
    uv_loop_t loop;
    struct tm_http *http = setup_loop(&loop);
    struct result res = {0};
    char url[128];
    const char *headers[] = {"Accept: text/plain", NULL};
    struct tm_http_request req = {.method = "GET", .url = url, .headers = headers};

    url_for(url, sizeof(url), "/ok");
    assert_int_equal(request(http, &req, &res), 0);
    assert_int_equal(res.calls, 0); /* never from inside the call */
    assert_int_equal(tm_http_inflight(http), 1);
    run_until(&loop, &res.calls, 1, 5000);
    assert_int_equal(res.status, 0);
    assert_int_equal(res.http_status, 200);
    assert_string_equal(res.body, "ok");
    assert_string_equal(res.request_id, "req-ok-1");
    assert_string_equal(res.retry_after, "");
    assert_int_equal(tm_http_inflight(http), 0);
    close_and_check(&loop, http);
}

static void test_post_echo(void **state)
{
    uv_loop_t loop;
    struct tm_http *http = setup_loop(&loop);
    struct result res = {0};
    char url[128];
    char body[64];
    char header[64];
    const char *headers[] = {header, NULL};
    struct tm_http_request req = {.method = "POST", .url = url, .headers = headers, .body = body};

    url_for(url, sizeof(url), "/echo");
    snprintf(body, sizeof(body), "hello, world");
    snprintf(header, sizeof(header), "Content-Type: text/plain");
    req.body_len = strlen(body);
    assert_int_equal(request(http, &req, &res), 0);
    /* Everything was copied: scribbling over the request changes nothing. */
    memset(body, 'Z', sizeof(body) - 1);
    memset(header, 'Z', sizeof(header) - 1);
    memset(url, 'Z', sizeof(url) - 1);
    run_until(&loop, &res.calls, 1, 5000);
    assert_int_equal(res.status, 0);
    assert_int_equal(res.http_status, 200);
    assert_int_equal(res.body_len, 12);
    assert_string_equal(res.body, "hello, world");

    /* Other methods carry their body the same way. */
    {
        struct result put = {0};
        struct tm_http_request req_put = {.method = "PUT", .url = url, .body = "\0binary\0", .body_len = 8};

        url_for(url, sizeof(url), "/echo");
        assert_int_equal(request(http, &req_put, &put), 0);
        run_until(&loop, &put.calls, 1, 5000);
        assert_int_equal(put.status, 0);
        assert_int_equal(put.http_status, 200);
        assert_int_equal(put.body_len, 8);
    }
    close_and_check(&loop, http);
}

static void test_concurrent_100(void **state)
{
    uv_loop_t loop;
    struct tm_http *http = setup_loop(&loop);
    static struct result res[100];
    char url[128];
    struct tm_http_request req = {.method = "GET", .url = url};
    uint64_t start;
    int before = total_calls;

    memset(res, 0, sizeof(res));
    url_for(url, sizeof(url), "/slow?ms=200");
    for (int i = 0; i < 100; i++)
        assert_int_equal(request(http, &req, &res[i]), 0);
    assert_int_equal(tm_http_inflight(http), 100);
    start = uv_hrtime();
    run_until(&loop, &total_calls, before + 100, 15000);
    /* 100 x 200 ms one after another would take 20 s. */
    assert_true((uv_hrtime() - start) / 1000000 < 5000);
    for (int i = 0; i < 100; i++) {
        assert_int_equal(res[i].calls, 1);
        assert_int_equal(res[i].status, 0);
        assert_int_equal(res[i].http_status, 200);
        assert_string_equal(res[i].body, "slow");
    }
    assert_int_equal(tm_http_inflight(http), 0);
    close_and_check(&loop, http);
}

static void test_timeout(void **state)
{
    uv_loop_t loop;
    struct tm_http *http = setup_loop(&loop);
    struct result res = {0};
    char url[128];
    struct tm_http_request req = {.method = "GET", .url = url, .timeout_ms = 300};

    url_for(url, sizeof(url), "/slow?ms=3000");
    assert_int_equal(request(http, &req, &res), 0);
    run_until(&loop, &res.calls, 1, 2000);
    assert_int_equal(res.status, -ETIMEDOUT);
    assert_int_equal(res.http_status, 0);
    close_and_check(&loop, http);
}

static int closed_port(void)
{
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof(sa);
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    int port;

    assert_true(fd >= 0);
    assert_int_equal(bind(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
    assert_int_equal(getsockname(fd, (struct sockaddr *)&sa, &len), 0);
    port = ntohs(sa.sin_port);
    close(fd); /* nobody listens there now */
    return port;
}

static void test_refused(void **state)
{
    uv_loop_t loop;
    struct tm_http *http = setup_loop(&loop);
    struct result res = {0};
    char url[128];
    struct tm_http_request req = {.method = "GET", .url = url};

    snprintf(url, sizeof(url), "http://127.0.0.1:%d/ok", closed_port());
    assert_int_equal(request(http, &req, &res), 0);
    assert_int_equal(res.calls, 0);
    run_until(&loop, &res.calls, 1, 5000);
    assert_int_equal(res.status, -ECONNREFUSED);
    close_and_check(&loop, http);
}

static void test_reset(void **state)
{
    uv_loop_t loop;
    struct tm_http *http = setup_loop(&loop);
    struct result res = {0};
    char url[128];
    struct tm_http_request req = {.method = "GET", .url = url};

    url_for(url, sizeof(url), "/reset");
    assert_int_equal(request(http, &req, &res), 0);
    run_until(&loop, &res.calls, 1, 5000);
    assert_int_equal(res.status, -ECONNRESET);
    close_and_check(&loop, http);
}

static void test_body_limit(void **state)
{
    uv_loop_t loop;
    struct tm_http *http = setup_loop(&loop);
    struct result small = {0}, large = {0}, exact = {0};
    char url[128];
    struct tm_http_request req = {.method = "GET", .url = url};

    url_for(url, sizeof(url), "/big?n=100000");
    req.max_body = 1000;
    assert_int_equal(request(http, &req, &small), 0);
    req.max_body = 100000; /* exactly the size: allowed */
    assert_int_equal(request(http, &req, &exact), 0);
    req.max_body = 0; /* default 8 MiB */
    url_for(url, sizeof(url), "/big?n=3000000");
    assert_int_equal(request(http, &req, &large), 0);
    run_until(&loop, &small.calls, 1, 5000);
    run_until(&loop, &exact.calls, 1, 5000);
    run_until(&loop, &large.calls, 1, 5000);
    assert_int_equal(small.status, TM_EBADREPLY);
    assert_int_equal(exact.status, 0);
    assert_int_equal(exact.body_len, 100000);
    assert_int_equal(large.status, 0);
    assert_int_equal(large.body_len, 3000000);
    close_and_check(&loop, http);
}

static void test_503_retry_after(void **state)
{
    uv_loop_t loop;
    struct tm_http *http = setup_loop(&loop);
    struct result res = {0};
    char url[128];
    struct tm_http_request req = {.method = "GET", .url = url};

    url_for(url, sizeof(url), "/status/503");
    assert_int_equal(request(http, &req, &res), 0);
    run_until(&loop, &res.calls, 1, 5000);
    assert_int_equal(res.status, 0); /* an HTTP error is an answer */
    assert_int_equal(res.http_status, 503);
    assert_string_equal(res.retry_after, "7");
    assert_string_equal(res.request_id, "abc-123");
    close_and_check(&loop, http);
}

static void test_close_inflight(void **state)
{
    uv_loop_t loop;
    struct tm_http *http = setup_loop(&loop);
    struct result res[5] = {0};
    struct result ok = {0};
    struct result late = {0};
    char url[128];
    struct tm_http_request req = {.method = "GET", .url = url};
    int closed = 0;

    url_for(url, sizeof(url), "/ok");
    assert_int_equal(request(http, &req, &ok), 0);
    run_until(&loop, &ok.calls, 1, 5000); /* leaves a pooled connection behind */
    url_for(url, sizeof(url), "/slow?ms=3000");
    for (int i = 0; i < 5; i++)
        assert_int_equal(request(http, &req, &res[i]), 0);
    /* Let the transfers reach the server. */
    for (int i = 0; i < 20; i++) {
        uv_run(&loop, UV_RUN_NOWAIT);
        usleep(5000);
    }
    in_api = 1;
    tm_http_close(http, on_done, &closed);
    in_api = 0;
    for (int i = 0; i < 5; i++)
        assert_int_equal(res[i].calls, 0); /* not from inside tm_http_close */
    assert_int_equal(tm_http_request(http, &req, on_resp, &late), TM_ECANCELED);
    uv_run(&loop, UV_RUN_DEFAULT);
    assert_int_equal(closed, 1);
    for (int i = 0; i < 5; i++) {
        assert_int_equal(res[i].calls, 1);
        assert_int_equal(res[i].status, TM_ECANCELED);
    }
    assert_int_equal(late.calls, 0);
    assert_int_equal(uv_loop_close(&loop), 0);
}

/* A callback that closes the client it runs on. */
struct closer {
    struct tm_http *http;
    struct result res;
    int closed;
};

static void on_resp_close(const struct tm_http_response *resp, void *data)
{
    struct closer *c = data;

    on_resp(resp, &c->res);
    tm_http_close(c->http, on_done, &c->closed);
}

static void test_close_from_callback(void **state)
{
    uv_loop_t loop;
    struct tm_http *http = setup_loop(&loop);
    struct closer c = {.http = http};
    struct result other = {0};
    char url[128];
    char slow[128];
    struct tm_http_request req = {.method = "GET", .url = url};
    struct tm_http_request req_slow = {.method = "GET", .url = slow};

    url_for(url, sizeof(url), "/ok");
    url_for(slow, sizeof(slow), "/slow?ms=3000");
    assert_int_equal(request(http, &req_slow, &other), 0);
    in_api = 1;
    assert_int_equal(tm_http_request(http, &req, on_resp_close, &c), 0);
    in_api = 0;
    uv_run(&loop, UV_RUN_DEFAULT);
    assert_int_equal(c.res.calls, 1);
    assert_int_equal(c.res.status, 0);
    assert_int_equal(c.closed, 1);
    assert_int_equal(other.calls, 1);
    assert_int_equal(other.status, TM_ECANCELED);
    assert_int_equal(uv_loop_close(&loop), 0);
}

static void test_bad_arguments(void **state)
{
    uv_loop_t loop;
    struct tm_http *http = setup_loop(&loop);
    struct result res = {0};
    struct tm_http_request no_url = {.method = "GET"};
    struct tm_http_request no_body = {.method = "POST", .url = "http://127.0.0.1:1/", .body_len = 4};

    assert_int_equal(tm_http_global_init(), 0); /* idempotent */
    assert_int_equal(request(http, &no_url, &res), TM_EINVAL);
    assert_int_equal(request(http, &no_body, &res), TM_EINVAL);
    assert_int_equal(tm_http_request(http, &no_url, NULL, NULL), TM_EINVAL);
    uv_run(&loop, UV_RUN_NOWAIT);
    assert_int_equal(res.calls, 0);
    close_and_check(&loop, http);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_get_ok),
        cmocka_unit_test(test_post_echo),
        cmocka_unit_test(test_concurrent_100),
        cmocka_unit_test(test_timeout),
        cmocka_unit_test(test_refused),
        cmocka_unit_test(test_reset),
        cmocka_unit_test(test_body_limit),
        cmocka_unit_test(test_503_retry_after),
        cmocka_unit_test(test_close_inflight),
        cmocka_unit_test(test_close_from_callback),
        cmocka_unit_test(test_bad_arguments),
    };

    /* A proxy from the environment would swallow loopback requests. */
    unsetenv("http_proxy");
    unsetenv("HTTP_PROXY");
    unsetenv("all_proxy");
    unsetenv("ALL_PROXY");
    signal(SIGPIPE, SIG_IGN);
    return cmocka_run_group_tests(tests, server_start, server_stop);
}
