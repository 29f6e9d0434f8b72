/*
 * tests/unit/daemon/test_alert_webhook.c: the alerter's pure helpers, reached by
 * including the .c (as h2o's unit tests do): the retry schedule (doubling,
 * capped, no overflow at the most attempts the configuration allows), the
 * body a webhook receives, and its times.  Delivery itself is exercised on
 * the real binary by tests/integration/alerts.sh.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "controller/daemon/alert_webhook.c"

static void test_backoff_doubles_and_caps(void **state)
{
    struct tm_config_alerts cfg = {.webhook_backoff_ms = 200};
    (void)state;
    /* Waits after attempts 1, 2, 3, ...: 200, 400, 800 ms, ... */
    assert_int_equal(backoff_ms(&cfg, 1), 200);
    assert_int_equal(backoff_ms(&cfg, 2), 400);
    assert_int_equal(backoff_ms(&cfg, 3), 800);
    assert_int_equal(backoff_ms(&cfg, 15), 200 * 16384);
    assert_int_equal(backoff_ms(&cfg, 16), ALERT_BACKOFF_CAP_MS);
    assert_int_equal(backoff_ms(&cfg, 100), ALERT_BACKOFF_CAP_MS);
    cfg.webhook_backoff_ms = ALERT_BACKOFF_CAP_MS; /* the configuration's largest */
    assert_int_equal(backoff_ms(&cfg, 1), ALERT_BACKOFF_CAP_MS);
    assert_int_equal(backoff_ms(&cfg, 100), ALERT_BACKOFF_CAP_MS);
}

static void test_iso_time(void **state)
{
    char out[32];
    (void)state;
    iso_time(INT64_C(1764400000123), out);
    assert_string_equal(out, "2025-11-29T07:06:40.123Z");
    iso_time(0, out);
    assert_string_equal(out, "1970-01-01T00:00:00.000Z");
}

/* A row of tarmac_alerts' pending list becomes the documented body. */
static void test_body(void **state)
{
    static const char row_json[] =
        "{\"id\": 7, \"key\": \"pool_idle:od\", \"kind\": \"pool_idle\", \"subject\": \"od\","
        " \"message\": \"pool od: 12.5% ...\", \"details\": {\"utilisation_percent\": 12.5},"
        " \"fired_ms\": 1764400000123, \"resolved_ms\": 1764400060000, \"state\": \"resolved\","
        " \"attempts\": 0}";
    struct tm_config cfg = {.cluster = "prod"};
    struct tm_alerter al = {.cfg = &cfg};
    cJSON *row = cJSON_Parse(row_json);
    (void)state;
    assert_non_null(row);

    for (int resolved = 0; resolved <= 1; resolved++) {
        char *body = notice_body(&al, row, resolved);
        assert_non_null(body);
        cJSON *b = cJSON_Parse(body);
        assert_non_null(b);
        assert_int_equal((int)cJSON_GetObjectItem(b, "id")->valuedouble, 7);
        assert_string_equal(cJSON_GetObjectItem(b, "alert")->valuestring, "pool_idle:od");
        assert_string_equal(cJSON_GetObjectItem(b, "kind")->valuestring, "pool_idle");
        assert_string_equal(cJSON_GetObjectItem(b, "subject")->valuestring, "od");
        assert_string_equal(cJSON_GetObjectItem(b, "state")->valuestring, resolved ? "resolved" : "firing");
        assert_string_equal(cJSON_GetObjectItem(b, "message")->valuestring, "pool od: 12.5% ...");
        assert_true(cJSON_GetObjectItem(cJSON_GetObjectItem(b, "details"), "utilisation_percent")->valuedouble == 12.5);
        assert_string_equal(cJSON_GetObjectItem(b, "fired_at")->valuestring, "2025-11-29T07:06:40.123Z");
        if (resolved)
            assert_string_equal(cJSON_GetObjectItem(b, "resolved_at")->valuestring, "2025-11-29T07:07:40.000Z");
        else
            assert_true(cJSON_IsNull(cJSON_GetObjectItem(b, "resolved_at")));
        assert_string_equal(cJSON_GetObjectItem(b, "cluster")->valuestring, "prod");
        assert_int_equal(cJSON_GetArraySize(b), 10);
        cJSON_Delete(b);
        free(body);
    }
    cJSON_Delete(row);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_backoff_doubles_and_caps),
        cmocka_unit_test(test_iso_time),
        cmocka_unit_test(test_body),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
