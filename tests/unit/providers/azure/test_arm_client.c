/*
 * tests/unit/providers/azure/test_arm_client.c: the ARM client on a loop
 * against the loopback fake (tests/lib/azure_fake.py over HTTPS): the token
 * fetched once and shared by concurrent calls, fetched again after the
 * cloud refuses it, 429 + Retry-After honoured, 5xx retried within the
 * budget and then reported, a wrong secret closing the auth gate so that
 * no further request is sent; a client certificate's assertion accepted
 * (and a fresh one after a 401), an unregistered certificate refused with
 * AADSTS700027 and the gate closed.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>
#include <uv.h>

#include "core/client_cert.h"
#include "core/err.h"
#include "core/log.h"
#include "providers/azure/arm.h"

static char url[256], ca[512], secret[128], pid[32], dir[256], client_pem[512], other_pem[512];

static int setup(void **state)
{
    char cmd[1024], line[512];
    FILE *f;

    (void)state;
    snprintf(dir, sizeof(dir), "/tmp/tm-arm-client.%d", (int)getpid());
    snprintf(cmd, sizeof(cmd), "%s/tests/lib/azure_fixture.sh start %s", TM_SOURCE_DIR, dir);
    f = popen(cmd, "r");
    if (!f)
        return -1;
    while (fgets(line, sizeof(line), f)) {
        line[strcspn(line, "\n")] = '\0';
        if (!strncmp(line, "AZURE_FAKE_URL=", 15))
            snprintf(url, sizeof(url), "%.*s", (int)sizeof(url) - 1, line + 15);
        else if (!strncmp(line, "AZURE_FAKE_CA=", 14))
            snprintf(ca, sizeof(ca), "%.*s", (int)sizeof(ca) - 1, line + 14);
        else if (!strncmp(line, "AZURE_FAKE_SECRET=", 18))
            snprintf(secret, sizeof(secret), "%.*s", (int)sizeof(secret) - 1, line + 18);
        else if (!strncmp(line, "AZURE_FAKE_CLIENT_CERT=", 23))
            snprintf(client_pem, sizeof(client_pem), "%.*s", (int)sizeof(client_pem) - 1, line + 23);
        else if (!strncmp(line, "AZURE_FAKE_OTHER_CERT=", 22))
            snprintf(other_pem, sizeof(other_pem), "%.*s", (int)sizeof(other_pem) - 1, line + 22);
        else if (!strncmp(line, "AZURE_FAKE_PID=", 15))
            snprintf(pid, sizeof(pid), "%.*s", (int)sizeof(pid) - 1, line + 15);
    }
    return pclose(f) == 0 && url[0] && pid[0] ? 0 : -1;
}

static int teardown(void **state)
{
    char cmd[600];

    (void)state;
    snprintf(cmd, sizeof(cmd), "kill %s; rm -rf %s", pid, dir);
    return system(cmd) == 0 ? 0 : -1;
}

static void ctl(const char *what, const char *json)
{
    char cmd[1024];

    snprintf(cmd, sizeof(cmd), "curl -sS -o /dev/null --cacert %s -X POST --data '%s' %s/__fake/%s",
             ca, json, url, what);
    assert_int_equal(system(cmd), 0);
}

struct result {
    int status;
    long http;
    unsigned attempts;
    int done;
    char code[64];
    char message[256];
};

static void on_done(int status, const struct tm_arm_reply *reply, void *data)
{
    struct result *r = data;

    r->status = status;
    r->http = reply->http_status;
    r->attempts = reply->attempts;
    snprintf(r->code, sizeof(r->code), "%s", reply->error_code);
    snprintf(r->message, sizeof(r->message), "%s", reply->error_message);
    r->done++;
}

static struct tm_arm *make(uv_loop_t *loop, const char *sec)
{
    struct tm_arm_options o = {
        .endpoint = url, .authority = url, .tenant = "tenant-1", .client_id = "client-1",
        .client_secret = sec, .auth = TM_ARM_AUTH_SECRET, .ca_file = ca,
        .retry = {.max_attempts = 4, .max_total_delay_ms = 5000, .base_delay_ms = 10,
                  .max_delay_ms = 50},
        .poll_ms = 50, .seed = 3,
    };
    struct tm_arm *arm = NULL;

    assert_int_equal(tm_arm_create(loop, &o, &arm), 0);
    return arm;
}

static const char *LIST =
    "/subscriptions/sub-1/resourceGroups/rg-1/providers/Microsoft.Compute/virtualMachines"
    "?api-version=2024-07-01";

static void run_calls(uv_loop_t *loop, struct tm_arm *arm, struct result *r, int n)
{
    for (int i = 0; i < n; i++) {
        memset(&r[i], 0, sizeof(r[i]));
        assert_int_equal(tm_arm_call(arm, TM_ARM_LIST_VMS, "GET", LIST, NULL,
                                     TM_ARM_RETRY_AMBIGUOUS, on_done, &r[i]), 0);
        assert_int_equal(r[i].done, 0); /* never from inside the call */
    }
    for (int spins = 0; spins < 1000; spins++) {
        int all = 1;

        for (int i = 0; i < n; i++)
            all &= r[i].done == 1;
        if (all)
            return;
        uv_run(loop, UV_RUN_ONCE);
    }
    fail_msg("calls did not finish");
}

static void close_arm(uv_loop_t *loop, struct tm_arm *arm)
{
    tm_arm_close(arm, NULL, NULL);
    uv_run(loop, UV_RUN_DEFAULT);
}

static void test_token_cached(void **state)
{
    uv_loop_t loop;
    struct tm_arm *arm;
    struct tm_arm_stats st;
    struct result r[4];

    (void)state;
    uv_loop_init(&loop);
    arm = make(&loop, secret);
    /* Four at once: one discovery, one token, shared. */
    run_calls(&loop, arm, r, 4);
    for (int i = 0; i < 4; i++)
        assert_int_equal(r[i].status, 0);
    run_calls(&loop, arm, r, 2);
    tm_arm_get_stats(arm, &st);
    assert_int_equal(st.tokens_fetched, 1);
    assert_int_equal(st.requests, 6);
    /* The cloud refuses the token (revoked, expired early): one fresh try. */
    ctl("expire_tokens", "{}");
    run_calls(&loop, arm, r, 1);
    assert_int_equal(r[0].status, 0);
    tm_arm_get_stats(arm, &st);
    assert_int_equal(st.tokens_fetched, 2);
    close_arm(&loop, arm);
    uv_loop_close(&loop);
}

static void test_short_lived_token_refreshed(void **state)
{
    uv_loop_t loop;
    struct tm_arm *arm;
    struct tm_arm_stats st;
    struct result r[1];

    (void)state;
    ctl("control", "{\"token_ttl\": 2}");
    uv_loop_init(&loop);
    arm = make(&loop, secret);
    run_calls(&loop, arm, r, 1);
    /* Half of a 2 s lifetime left: fetched again before it is used. */
    usleep(1100 * 1000);
    uv_update_time(&loop);
    run_calls(&loop, arm, r, 1);
    assert_int_equal(r[0].status, 0);
    tm_arm_get_stats(arm, &st);
    assert_int_equal(st.tokens_fetched, 2);
    ctl("control", "{\"token_ttl\": 3600}");
    close_arm(&loop, arm);
    uv_loop_close(&loop);
}

static void test_throttle_and_5xx(void **state)
{
    uv_loop_t loop;
    struct tm_arm *arm;
    struct tm_arm_stats st;
    struct result r[1];

    (void)state;
    uv_loop_init(&loop);
    arm = make(&loop, secret);
    ctl("control", "{\"throttle\": 1, \"fail5xx\": 1}");
    run_calls(&loop, arm, r, 1);
    assert_int_equal(r[0].status, 0);
    assert_int_equal(r[0].attempts, 3);
    tm_arm_get_stats(arm, &st);
    assert_true(st.delay_ms >= 1000); /* Retry-After: 1 honoured */
    /* More 5xx than the attempt budget: reported as unavailable. */
    ctl("control", "{\"fail5xx\": 10}");
    run_calls(&loop, arm, r, 1);
    assert_int_equal(r[0].status, TM_EUNAVAIL);
    assert_int_equal(r[0].attempts, 4);
    assert_int_equal(r[0].http, 503);
    ctl("control", "{\"fail5xx\": 0}");
    close_arm(&loop, arm);
    uv_loop_close(&loop);
}

static void test_wrong_secret_stops_calls(void **state)
{
    uv_loop_t loop;
    struct tm_arm *arm;
    struct tm_arm_stats st;
    struct result r[1];

    (void)state;
    uv_loop_init(&loop);
    arm = make(&loop, "not-the-secret");
    run_calls(&loop, arm, r, 1);
    assert_int_equal(r[0].status, TM_EAUTH);
    assert_true(tm_arm_auth_blocked(arm));
    run_calls(&loop, arm, r, 1);
    assert_int_equal(r[0].status, TM_EAUTH);
    tm_arm_get_stats(arm, &st);
    assert_int_equal(st.requests, 0);  /* no ARM request went out */
    assert_int_equal(st.auth_refusals, 1);
    close_arm(&loop, arm);
    uv_loop_close(&loop);
}

/* A certificate credential: the client assertion the fake verifies (its
 * signature against the registered certificate, x5t, aud, iss/sub, exp, a
 * fresh jti each fetch). */
static struct tm_arm *make_cert(uv_loop_t *loop, const char *pem_path)
{
    struct tm_client_cert cert;
    char err[512];
    struct tm_arm_options o = {
        .endpoint = url, .authority = url, .tenant = "tenant-1", .client_id = "client-1",
        .auth = TM_ARM_AUTH_CERTIFICATE, .client_cert = &cert, .ca_file = ca,
        .retry = {.max_attempts = 4, .max_total_delay_ms = 5000, .base_delay_ms = 10,
                  .max_delay_ms = 50},
        .poll_ms = 50, .seed = 5,
    };
    struct tm_arm *arm = NULL;

    if (tm_client_cert_load(pem_path, &cert, err, sizeof(err)) != 0)
        fail_msg("%s", err);
    assert_int_equal(tm_arm_create(loop, &o, &arm), 0);
    tm_client_cert_release(&cert);  /* the client keeps its own copy */
    return arm;
}

static void test_certificate(void **state)
{
    uv_loop_t loop;
    struct tm_arm *arm;
    struct tm_arm_stats st;
    struct result r[2];

    (void)state;
    assert_true(client_pem[0] != '\0');
    uv_loop_init(&loop);
    arm = make_cert(&loop, client_pem);
    /* The client's copy of the key stays registered with the log after the
     * caller's copy is released (the registry holds each string once). */
    {
        struct tm_client_cert cert;
        char err[512], *line;
        size_t n;

        assert_int_equal(tm_client_cert_load(client_pem, &cert, err, sizeof(err)), 0);
        n = strlen(cert.key_pem) + 16;
        line = malloc(n);
        snprintf(line, n, "key=%s", cert.key_pem);
        tm_client_cert_release(&cert);
        tm_log_redact(line, n);
        assert_null(strstr(line, "BEGIN PRIVATE KEY"));
        free(line);
    }
    run_calls(&loop, arm, r, 2);
    assert_int_equal(r[0].status, 0);
    assert_int_equal(r[1].status, 0);
    /* The token refused by ARM: a new assertion (a new jti, or the fake
     * would refuse the replay) gets a new token. */
    ctl("expire_tokens", "{}");
    run_calls(&loop, arm, r, 1);
    assert_int_equal(r[0].status, 0);
    tm_arm_get_stats(arm, &st);
    assert_int_equal(st.tokens_fetched, 2);
    assert_false(tm_arm_auth_blocked(arm));
    close_arm(&loop, arm);
    uv_loop_close(&loop);
}

static void test_unregistered_certificate_stops_calls(void **state)
{
    uv_loop_t loop;
    struct tm_arm *arm;
    struct tm_arm_stats st;
    struct result r[1];

    (void)state;
    uv_loop_init(&loop);
    arm = make_cert(&loop, other_pem);
    run_calls(&loop, arm, r, 1);
    assert_int_equal(r[0].status, TM_EAUTH);
    assert_string_equal(r[0].code, "invalid_client");
    assert_non_null(strstr(r[0].message, "AADSTS700027"));
    assert_true(tm_arm_auth_blocked(arm));
    run_calls(&loop, arm, r, 1);
    assert_int_equal(r[0].status, TM_EAUTH);
    tm_arm_get_stats(arm, &st);
    assert_int_equal(st.requests, 0);
    assert_int_equal(st.tokens_fetched, 0);
    close_arm(&loop, arm);
    uv_loop_close(&loop);
}

static void test_managed_identity(void **state)
{
    struct tm_arm_options o = {
        .endpoint = url, .imds = url, .auth = TM_ARM_AUTH_MANAGED_IDENTITY, .ca_file = ca,
        .poll_ms = 50,
    };
    uv_loop_t loop;
    struct tm_arm *arm = NULL;
    struct tm_arm_stats st;
    struct result r[2];

    (void)state;
    uv_loop_init(&loop);
    assert_int_equal(tm_arm_create(&loop, &o, &arm), 0);
    run_calls(&loop, arm, r, 2);
    assert_int_equal(r[0].status, 0);
    assert_int_equal(r[1].status, 0);
    tm_arm_get_stats(arm, &st);
    assert_int_equal(st.tokens_fetched, 1);
    close_arm(&loop, arm);
    uv_loop_close(&loop);
}

/* A PUT whose allocation fails in the async operation, and one refused at
 * once: both TM_EQUOTA with Azure's code, after the operation was followed. */
static void test_put_capacity_errors(void **state)
{
    struct tm_arm_vm_params p = {
        .name = "tm-c-1", .location = "eastus", .zone = "1", .vm_size = "Standard_NC24ads_A100_v4",
        .spot = true,
        .subnet_id = "/subscriptions/sub-1/resourceGroups/rg-1/providers/Microsoft.Network/"
                     "virtualNetworks/v/subnets/d",
        .image = "Canonical:ubuntu:22_04-lts:latest", .admin_username = "tarmac",
        .ssh_public_key = "ssh-ed25519 AAAA k", .cluster = "c", .pool = "p", .node = "1",
        .token = "t",
    };
    const char *path = "/subscriptions/sub-1/resourceGroups/rg-1/providers/Microsoft.Compute/"
                       "virtualMachines/tm-c-1?api-version=2024-07-01";
    uv_loop_t loop;
    struct tm_arm *arm;
    struct tm_arm_stats st;
    struct result r = {0};
    char *body = NULL;

    (void)state;
    assert_int_equal(tm_arm_build_vm(&p, &body), 0);
    ctl("control", "{\"capacity\": {\"Standard_NC24ads_A100_v4/1/Spot\": 0}, "
                   "\"short_mode\": \"async\", \"op_delay\": 0.1}");
    uv_loop_init(&loop);
    arm = make(&loop, secret);
    assert_int_equal(tm_arm_call(arm, TM_ARM_PUT_VM, "PUT", path, body,
                                 TM_ARM_RETRY_AMBIGUOUS | TM_ARM_FOLLOW_ASYNC, on_done, &r), 0);
    while (!r.done)
        uv_run(&loop, UV_RUN_ONCE);
    assert_int_equal(r.status, TM_EQUOTA);
    assert_string_equal(r.code, "ZonalAllocationFailed");
    tm_arm_get_stats(arm, &st);
    assert_true(st.polls >= 1);
    memset(&r, 0, sizeof(r));
    assert_int_equal(tm_arm_call(arm, TM_ARM_DELETE_VM, "DELETE", path, NULL,
                                 TM_ARM_RETRY_AMBIGUOUS | TM_ARM_FOLLOW_ASYNC, on_done, &r), 0);
    while (!r.done)
        uv_run(&loop, UV_RUN_ONCE);
    assert_int_equal(r.status, 0);
    ctl("control", "{\"short_mode\": \"sync\"}");
    memset(&r, 0, sizeof(r));
    assert_int_equal(tm_arm_call(arm, TM_ARM_PUT_VM, "PUT", path, body,
                                 TM_ARM_RETRY_AMBIGUOUS | TM_ARM_FOLLOW_ASYNC, on_done, &r), 0);
    while (!r.done)
        uv_run(&loop, UV_RUN_ONCE);
    assert_int_equal(r.status, TM_EQUOTA);
    assert_int_equal(r.http, 409);
    assert_string_equal(r.code, "ZonalAllocationFailed");
    /* A core quota: OperationNotAllowed, a shortage too. */
    ctl("control", "{\"capacity\": {}, \"short_mode\": \"async\", \"quota_exceeded\": true}");
    memset(&r, 0, sizeof(r));
    assert_int_equal(tm_arm_call(arm, TM_ARM_PUT_VM, "PUT", path, body,
                                 TM_ARM_RETRY_AMBIGUOUS | TM_ARM_FOLLOW_ASYNC, on_done, &r), 0);
    while (!r.done)
        uv_run(&loop, UV_RUN_ONCE);
    assert_int_equal(r.status, TM_EQUOTA);
    assert_string_equal(r.code, "OperationNotAllowed");
    ctl("control", "{\"quota_exceeded\": false}");
    free(body);
    close_arm(&loop, arm);
    uv_loop_close(&loop);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_token_cached),
        cmocka_unit_test(test_short_lived_token_refreshed),
        cmocka_unit_test(test_throttle_and_5xx),
        cmocka_unit_test(test_wrong_secret_stops_calls),
        cmocka_unit_test(test_certificate),
        cmocka_unit_test(test_unregistered_certificate_stops_calls),
        cmocka_unit_test(test_managed_identity),
        cmocka_unit_test(test_put_capacity_errors),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
