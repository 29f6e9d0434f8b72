/*
 * tests/integration/test_gcp_client.c: the token cache and the GCE client
 * on a real loop against the loopback fake (tests/lib/gcp_fake.py), which
 * this binary starts and stops.
 *
 *   - a token is fetched once, served from the cache, refreshed in the
 *     background before it expires (fake TTL 3 s, margin 2 s), fetched
 *     anew after invalidate; a key the endpoint does not know: TM_EAUTH;
 *     the metadata server's token (Metadata-Flavor: Google);
 *   - 429 and 503 are retried with backoff inside the budget (attempt and
 *     delay counts), and past the budget the error comes back;
 *   - a 403 closes the auth gate: the next call fails with TM_EAUTH
 *     without a request.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <unistd.h>

#include <cmocka.h>
#include <uv.h>

#include "controller/io/http_uv.h"
#include "core/err.h"
#include "providers/gcp/gce.h"
#include "providers/gcp/gcp_auth.h"
#include "tests/lib/gcp_fake_proc.h"

static char other_path[300];

static void sh(const char *cmd)
{
    if (system(cmd) != 0)
        fail_msg("command failed: %s", cmd);
}

static void control(const char *json)
{
    char cmd[1024];

    snprintf(cmd, sizeof(cmd), "curl -s -o /dev/null -X POST --data '%s' "
             "http://127.0.0.1:%d/__fake/control", json, gcp_fake.port);
    sh(cmd);
}

static int setup(void **state)
{
    (void)state;
    if (gcp_fake_start("gcpclient", "--token-ttl 3") < 0)
        return -1;
    /* Another key of the same account, which the fake does not know. */
    return gcp_fake_make_key("other.json", other_path, sizeof(other_path));
}

static int teardown(void **state)
{
    (void)state;
    gcp_fake_stop();
    return 0;
}

/* ---- tokens ------------------------------------------------------------- */

struct tok_result {
    int status;
    bool done;
    char token[256];
};

static void on_tok(int status, const char *token, const char *error, void *data)
{
    struct tok_result *r = data;

    (void)error;
    r->status = status;
    r->done = true;
    snprintf(r->token, sizeof(r->token), "%s", token ? token : "");
}

static void run_until(uv_loop_t *loop, bool *flag)
{
    for (int i = 0; i < 2000 && !*flag; i++)
        uv_run(loop, UV_RUN_ONCE);
}

static void on_sleep(uv_timer_t *t) { *(bool *)t->data = true; }

static void sleep_on(uv_loop_t *loop, uint64_t ms)
{
    uv_timer_t t;
    bool done = false;

    uv_timer_init(loop, &t);
    t.data = &done;
    uv_timer_start(&t, on_sleep, ms, 0);
    run_until(loop, &done);
    uv_close((uv_handle_t *)&t, NULL);
    uv_run(loop, UV_RUN_NOWAIT);
}

static void on_closed(void *data) { *(bool *)data = true; }

static void get_token(uv_loop_t *loop, struct tm_gcp_tokens *t, struct tok_result *r)
{
    memset(r, 0, sizeof(*r));
    assert_int_equal(tm_gcp_tokens_get(t, on_tok, r), 0);
    assert_false(r->done); /* never inside the call, even when cached */
    run_until(loop, &r->done);
    assert_true(r->done);
}

static void test_tokens(void **state)
{
    uv_loop_t loop;
    struct tm_http *http;
    struct tm_gcp_tokens *t;
    struct tm_gcp_key key, other;
    struct tok_result a, b;
    char url[128], err[256];
    struct tm_gcp_token_options o = {.source = TM_GCP_TOKEN_KEY, .refresh_margin_ms = 2000};
    bool closed = false;

    (void)state;
    assert_int_equal(tm_gcp_key_load(gcp_fake.key_path, &key, err, sizeof(err)), 0);
    assert_int_equal(tm_gcp_key_load(other_path, &other, err, sizeof(err)), 0);
    snprintf(url, sizeof(url), "http://127.0.0.1:%d/token", gcp_fake.port);
    o.token_url = url;
    o.key = &key;
    uv_loop_init(&loop);
    assert_int_equal(tm_http_create(&loop, &http), 0);
    assert_int_equal(tm_gcp_tokens_create(&loop, http, &o, &t), 0);
    get_token(&loop, t, &a);
    assert_int_equal(a.status, 0);
    assert_int_equal(tm_gcp_tokens_fetches(t), 1);
    get_token(&loop, t, &b);
    assert_string_equal(a.token, b.token);           /* from the cache */
    assert_int_equal(tm_gcp_tokens_fetches(t), 1);
    sleep_on(&loop, 1600);                            /* 3 s TTL - 2 s margin */
    assert_int_equal(tm_gcp_tokens_fetches(t), 2);    /* refreshed in the background */
    get_token(&loop, t, &b);
    assert_string_not_equal(a.token, b.token);
    assert_int_equal(tm_gcp_tokens_fetches(t), 2);
    tm_gcp_tokens_invalidate(t);
    get_token(&loop, t, &b);
    assert_int_equal(tm_gcp_tokens_fetches(t), 3);
    tm_http_close(http, NULL, NULL);
    uv_run(&loop, UV_RUN_NOWAIT);
    tm_gcp_tokens_close(t, on_closed, &closed);
    run_until(&loop, &closed);

    /* A key the endpoint does not know. */
    o.key = &other;
    closed = false;
    assert_int_equal(tm_http_create(&loop, &http), 0);
    assert_int_equal(tm_gcp_tokens_create(&loop, http, &o, &t), 0);
    get_token(&loop, t, &a);
    assert_int_equal(a.status, TM_EAUTH);
    tm_http_close(http, NULL, NULL);
    uv_run(&loop, UV_RUN_NOWAIT);
    tm_gcp_tokens_close(t, on_closed, &closed);
    run_until(&loop, &closed);

    /* The metadata server (on GCP itself): GET with Metadata-Flavor. */
    {
        char md[128];
        struct tm_gcp_token_options mo = {.source = TM_GCP_TOKEN_METADATA};

        snprintf(md, sizeof(md), "http://127.0.0.1:%d", gcp_fake.port);
        mo.metadata_url = md;
        closed = false;
        assert_int_equal(tm_http_create(&loop, &http), 0);
        assert_int_equal(tm_gcp_tokens_create(&loop, http, &mo, &t), 0);
        get_token(&loop, t, &a);
        assert_int_equal(a.status, 0);
        assert_int_equal(strncmp(a.token, "ya29.", 5), 0);
        assert_int_equal(tm_gcp_tokens_fetches(t), 1);
        tm_http_close(http, NULL, NULL);
        uv_run(&loop, UV_RUN_NOWAIT);
        tm_gcp_tokens_close(t, on_closed, &closed);
        run_until(&loop, &closed);
    }
    uv_run(&loop, UV_RUN_DEFAULT);
    assert_int_equal(uv_loop_close(&loop), 0);
    tm_gcp_key_release(&key);
    tm_gcp_key_release(&other);
}

/* ---- the client --------------------------------------------------------- */

struct call_result {
    int status;
    bool done;
    unsigned attempts;
    char code[64];
};

static void on_call(int status, const struct tm_gce_reply *reply, void *data)
{
    struct call_result *r = data;

    r->status = status;
    r->done = true;
    r->attempts = reply->attempts;
    snprintf(r->code, sizeof(r->code), "%s", reply->error_code);
}

static void zone_get(uv_loop_t *loop, struct tm_gce *gce, const char *project,
                     struct call_result *r)
{
    char *url = tm_gce_url_zone(tm_gce_endpoint(gce), project, "us-central1-a");

    memset(r, 0, sizeof(*r));
    assert_int_equal(tm_gce_call(gce, TM_GCE_ZONE_GET, "GET", url, NULL, TM_GCE_RETRY_AMBIGUOUS,
                                 on_call, r), 0);
    run_until(loop, &r->done);
    assert_true(r->done);
}

static void test_client(void **state)
{
    uv_loop_t loop;
    struct tm_gce *gce;
    struct tm_gcp_key key;
    struct tm_gce_options o = {0};
    struct tm_gce_stats st;
    struct call_result r;
    char url[128], ep[128], err[256];
    bool closed = false;

    (void)state;
    assert_int_equal(tm_gcp_key_load(gcp_fake.key_path, &key, err, sizeof(err)), 0);
    snprintf(url, sizeof(url), "http://127.0.0.1:%d/token", gcp_fake.port);
    snprintf(ep, sizeof(ep), "http://127.0.0.1:%d/compute/v1", gcp_fake.port);
    o.endpoint = ep;
    o.project = "tarmac-test";
    o.auth = (struct tm_gcp_token_options){.source = TM_GCP_TOKEN_KEY, .key = &key,
                                           .token_url = url};
    o.retry = (struct tm_gce_retry){.max_attempts = 4, .max_total_delay_ms = 2000,
                                    .base_delay_ms = 20, .max_delay_ms = 200};
    o.seed = 7;
    uv_loop_init(&loop);
    assert_int_equal(tm_gce_create(&loop, &o, &gce), 0);
    zone_get(&loop, gce, "tarmac-test", &r);
    assert_int_equal(r.status, 0);
    assert_int_equal(r.attempts, 1);
    /* Two 429s and a 503: retried, the fourth attempt answers. */
    control("{\"throttle\": 2, \"fail5xx\": 1}");
    zone_get(&loop, gce, "tarmac-test", &r);
    assert_int_equal(r.status, 0);
    assert_int_equal(r.attempts, 4);
    tm_gce_get_stats(gce, &st);
    assert_int_equal(st.retries, 3);
    assert_true(st.delay_ms <= 2000);
    /* Past the budget: the error comes back. */
    control("{\"throttle\": 10}");
    zone_get(&loop, gce, "tarmac-test", &r);
    assert_int_equal(r.status, TM_ETHROTTLED);
    assert_int_equal(r.attempts, 4);
    assert_string_equal(r.code, "rateLimitExceeded");
    control("{\"throttle\": 0}");
    /* 403 (a project we may not use): the gate closes, no more requests. */
    zone_get(&loop, gce, "not-ours", &r);
    assert_int_equal(r.status, TM_EAUTH);
    assert_true(tm_gce_auth_blocked(gce));
    tm_gce_get_stats(gce, &st);
    zone_get(&loop, gce, "tarmac-test", &r);
    assert_int_equal(r.status, TM_EAUTH);
    assert_int_equal(r.attempts, 0);
    {
        struct tm_gce_stats st2;

        tm_gce_get_stats(gce, &st2);
        assert_int_equal(st2.requests, st.requests);
        assert_int_equal(st2.auth_refusals, st.auth_refusals + 1);
    }
    tm_gce_close(gce, on_closed, &closed);
    run_until(&loop, &closed);
    uv_run(&loop, UV_RUN_DEFAULT);
    assert_int_equal(uv_loop_close(&loop), 0);
    tm_gcp_key_release(&key);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_tokens),
        cmocka_unit_test(test_client),
    };

    return cmocka_run_group_tests(tests, setup, teardown);
}
