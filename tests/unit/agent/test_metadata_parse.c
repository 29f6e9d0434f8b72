/*
 * tests/unit/agent/test_metadata_parse.c: the metadata answers with known
 * results (controller/agent/metadata_parse.c); linked with the parser
 * library alone, so it needs no loop and no network.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "controller/agent/metadata.h"
#include "core/err.h"

#define S(x) x, strlen(x)

/* 2026-11-29T16:22:00Z */
#define T_1622 1795969320000LL

static void test_dates(void **state)
{
    int64_t ms = 0;

    assert_int_equal(tm_md_parse_iso8601("2026-11-29T16:22:00Z", &ms), 0);
    assert_int_equal(ms, T_1622);
    assert_int_equal(tm_md_parse_iso8601("2026-11-29T16:22:00.250Z", &ms), 0);
    assert_int_equal(ms, T_1622);
    assert_int_equal(tm_md_parse_iso8601("2026-11-29T16:22:00+00:00", &ms), 0);
    assert_int_equal(tm_md_parse_iso8601("2026-11-29 16:22:00Z", &ms), TM_EBADREPLY);
    assert_int_equal(tm_md_parse_iso8601("2026-13-29T16:22:00Z", &ms), TM_EBADREPLY);
    assert_int_equal(tm_md_parse_iso8601("2026-11-29T16:22:00", &ms), TM_EBADREPLY);
    assert_int_equal(tm_md_parse_iso8601("+026-11-29T16:22:00Z", &ms), TM_EBADREPLY);
    assert_int_equal(tm_md_parse_iso8601("", &ms), TM_EBADREPLY);

    assert_int_equal(tm_md_parse_rfc1123("Sun, 29 Nov 2026 16:22:00 GMT", &ms), 0);
    assert_int_equal(ms, T_1622);
    assert_int_equal(tm_md_parse_rfc1123("Sun, 29 Nov 2026 16:22:00 UTC", &ms), TM_EBADREPLY);
    assert_int_equal(tm_md_parse_rfc1123("Sun, 29 Foo 2026 16:22:00 GMT", &ms), TM_EBADREPLY);
    assert_int_equal(tm_md_parse_rfc1123("Sun, 29 Nov 2026 16:22:00 GMT x", &ms), TM_EBADREPLY);
    assert_int_equal(tm_md_parse_rfc1123("onF, 29 Nov 2026 16:22:00 GMT", &ms), TM_EBADREPLY);
}

static void test_aws_instance_action(void **state)
{
    struct tm_md_notice n;
    const char *field = NULL;

    assert_int_equal(tm_md_parse_aws_instance_action(
                         S("{\"action\": \"terminate\", \"time\": \"2026-11-29T16:22:00Z\"}"), &n,
                         &field),
                     0);
    assert_string_equal(n.cloud, "aws");
    assert_string_equal(n.action, "terminate");
    assert_int_equal(n.deadline_ms, T_1622);
    assert_string_equal(n.event_id, "aws:instance-action:terminate:2026-11-29T16:22:00Z");

    assert_int_equal(tm_md_parse_aws_instance_action(
                         S("{\"action\":\"hibernate\",\"time\":\"2026-11-29T16:22:00Z\"}"), &n,
                         &field),
                     0);
    assert_string_equal(n.action, "hibernate");

    /* Wrong action, wrong type, missing time, truncated, not an object. */
    assert_int_equal(tm_md_parse_aws_instance_action(
                         S("{\"action\":\"reboot\",\"time\":\"2026-11-29T16:22:00Z\"}"), &n, &field),
                     TM_EBADREPLY);
    assert_string_equal(field, "action");
    assert_int_equal(tm_md_parse_aws_instance_action(S("{\"action\":7,\"time\":\"x\"}"), &n, &field),
                     TM_EBADREPLY);
    assert_string_equal(field, "action");
    assert_int_equal(tm_md_parse_aws_instance_action(S("{\"action\":\"stop\"}"), &n, &field),
                     TM_EBADREPLY);
    assert_string_equal(field, "time");
    assert_int_equal(tm_md_parse_aws_instance_action(S("{\"action\":\"stop\",\"time\":\"2026-11"),
                                                     &n, &field),
                     TM_EBADREPLY);
    assert_string_equal(field, "instance-action");
    assert_int_equal(tm_md_parse_aws_instance_action(S("<html>404 - Not Found</html>"), &n, &field),
                     TM_EBADREPLY);
    assert_string_equal(field, "instance-action");
    assert_int_equal(tm_md_parse_aws_instance_action(NULL, 0, &n, NULL), TM_EBADREPLY);
}

static void test_aws_rebalance(void **state)
{
    struct tm_md_notice n;
    const char *field = NULL;

    assert_int_equal(tm_md_parse_aws_rebalance(S("{\"noticeTime\":\"2026-11-29T16:10:00Z\"}"), &n,
                                               &field),
                     0);
    assert_string_equal(n.action, "rebalance");
    assert_int_equal(n.deadline_ms, 0);
    assert_string_equal(n.event_id, "aws:rebalance:2026-11-29T16:10:00Z");
    assert_int_equal(tm_md_parse_aws_rebalance(S("{\"noticeTime\":null}"), &n, &field),
                     TM_EBADREPLY);
    assert_string_equal(field, "noticeTime");
}

static void test_gcp(void **state)
{
    const char *field = NULL;
    bool on = true;

    assert_int_equal(tm_md_parse_gcp_preempted(S("FALSE"), &on, &field), 0);
    assert_false(on);
    assert_int_equal(tm_md_parse_gcp_preempted(S("TRUE\n"), &on, &field), 0);
    assert_true(on);
    assert_int_equal(tm_md_parse_gcp_preempted(S("TRU"), &on, &field), TM_EBADREPLY);
    assert_string_equal(field, "preempted");
    assert_int_equal(tm_md_parse_gcp_preempted(S(""), &on, &field), TM_EBADREPLY);
    assert_int_equal(tm_md_parse_gcp_preempted("TRUE\0x", 6, &on, &field), TM_EBADREPLY);

    assert_int_equal(tm_md_parse_gcp_maintenance(S("NONE"), &on, &field), 0);
    assert_false(on);
    assert_int_equal(tm_md_parse_gcp_maintenance(S("MIGRATE_ON_HOST_MAINTENANCE"), &on, &field), 0);
    assert_false(on);
    assert_int_equal(tm_md_parse_gcp_maintenance(S("TERMINATE_ON_HOST_MAINTENANCE"), &on, &field),
                     0);
    assert_true(on);
    assert_int_equal(tm_md_parse_gcp_maintenance(S("SOMETHING"), &on, &field), TM_EBADREPLY);
    assert_string_equal(field, "maintenance-event");
}

static const char azure_doc[] =
    "{\"DocumentIncarnation\": 2, \"Events\": ["
    "{\"EventId\": \"C7061BAC-AFDC-4513-B24B-AA5F13A16123\", \"EventStatus\": \"Scheduled\","
    " \"EventType\": \"Preempt\", \"ResourceType\": \"VirtualMachine\", \"Resources\": [\"vm_1\"],"
    " \"NotBefore\": \"Sun, 29 Nov 2026 16:22:00 GMT\", \"Description\": \"x\","
    " \"EventSource\": \"Platform\", \"DurationInSeconds\": -1},"
    "{\"EventId\": \"F0000000-0000-0000-0000-000000000001\", \"EventStatus\": \"Scheduled\","
    " \"EventType\": \"Freeze\", \"NotBefore\": \"Sun, 29 Nov 2026 16:22:00 GMT\"},"
    "{\"EventId\": \"A0000000-0000-0000-0000-000000000002\", \"EventStatus\": \"Started\","
    " \"EventType\": \"Terminate\", \"NotBefore\": \"\"}]}";

static void test_azure(void **state)
{
    struct tm_md_azure_doc doc;
    const char *field = NULL;
    char body[128];

    assert_int_equal(tm_md_parse_azure_events(S(azure_doc), 42, &doc, &field), 0);
    assert_int_equal(doc.incarnation, 2);
    assert_int_equal(doc.n, 2); /* Freeze skipped */
    assert_string_equal(doc.events[0].cloud, "azure");
    assert_string_equal(doc.events[0].action, "preempt");
    assert_string_equal(doc.events[0].event_id, "C7061BAC-AFDC-4513-B24B-AA5F13A16123");
    assert_int_equal(doc.events[0].deadline_ms, T_1622);
    assert_string_equal(doc.events[1].action, "terminate");
    assert_int_equal(doc.events[1].deadline_ms, 42); /* started: now */

    assert_int_equal(tm_md_parse_azure_events(S("{\"DocumentIncarnation\":0,\"Events\":[]}"), 0,
                                              &doc, &field),
                     0);
    assert_int_equal(doc.n, 0);

    assert_int_equal(tm_md_parse_azure_events(S("{\"Events\":[]}"), 0, &doc, &field), TM_EBADREPLY);
    assert_string_equal(field, "DocumentIncarnation");
    assert_int_equal(tm_md_parse_azure_events(S("{\"DocumentIncarnation\":1,\"Events\":{}}"), 0,
                                              &doc, &field),
                     TM_EBADREPLY);
    assert_string_equal(field, "Events");
    assert_int_equal(tm_md_parse_azure_events(
                         S("{\"DocumentIncarnation\":1,\"Events\":[{\"EventId\":\"a\","
                           "\"EventType\":\"Preempt\",\"EventStatus\":\"Scheduled\"},"
                           "{\"EventType\":\"Preempt\",\"EventStatus\":\"Scheduled\"}]}"),
                         0, &doc, &field),
                     TM_EBADREPLY);
    assert_string_equal(field, "Events[1].EventId");
    assert_int_equal(tm_md_parse_azure_events(
                         S("{\"DocumentIncarnation\":1,\"Events\":[{\"EventId\":\"a\","
                           "\"EventType\":\"Preempt\",\"EventStatus\":\"Scheduled\","
                           "\"NotBefore\":\"tomorrow\"}]}"),
                         0, &doc, &field),
                     TM_EBADREPLY);
    assert_string_equal(field, "Events[0].NotBefore");
    assert_int_equal(tm_md_parse_azure_events(
                         S("{\"DocumentIncarnation\":1,\"Events\":[{\"EventId\":\"a\\\"b\","
                           "\"EventType\":\"Preempt\",\"EventStatus\":\"Scheduled\"}]}"),
                         0, &doc, &field),
                     TM_EBADREPLY);
    assert_string_equal(field, "Events[0].EventId");
    /* Truncated in the middle of the array. */
    assert_int_equal(tm_md_parse_azure_events(azure_doc, 120, 0, &doc, &field), TM_EBADREPLY);
    assert_string_equal(field, "scheduledevents");

    assert_int_equal(tm_md_azure_ack_body("C7061BAC", body, sizeof(body)),
                     (int)strlen("{\"StartRequests\":[{\"EventId\":\"C7061BAC\"}]}"));
    assert_string_equal(body, "{\"StartRequests\":[{\"EventId\":\"C7061BAC\"}]}");
    assert_int_equal(tm_md_azure_ack_body("a\"b", body, sizeof(body)), TM_EINVAL);
    assert_int_equal(tm_md_azure_ack_body("C7061BAC", body, 10), TM_EINVAL);
}

static void test_local(void **state)
{
    struct tm_md_notice n;
    const char *field = NULL;

    assert_int_equal(tm_md_parse_local_notice(
                         S("{\"action\":\"terminate\",\"deadline_ms\":1795969320000,"
                           "\"event_id\":\"local:7:1\"}"),
                         &n, &field),
                     0);
    assert_string_equal(n.cloud, "local");
    assert_string_equal(n.action, "terminate");
    assert_int_equal(n.deadline_ms, T_1622);
    assert_string_equal(n.event_id, "local:7:1");
    assert_int_equal(tm_md_parse_local_notice(S("{\"action\":\"preempt\"}"), &n, &field), 0);
    assert_string_equal(n.event_id, "local:preempt");
    assert_int_equal(n.deadline_ms, 0);
    assert_int_equal(tm_md_parse_local_notice(S("{\"action\":\"x\",\"deadline_ms\":\"soon\"}"), &n,
                                              &field),
                     TM_EBADREPLY);
    assert_string_equal(field, "deadline_ms");
    assert_int_equal(tm_md_parse_local_notice(S("{\"deadline_ms\":1}"), &n, &field), TM_EBADREPLY);
    assert_string_equal(field, "action");
    assert_int_equal(tm_md_parse_local_notice(S("{\"action\":\"x\",\"event_id\":\"\"}"), &n, &field),
                     TM_EBADREPLY);
    assert_string_equal(field, "event_id");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_dates),      cmocka_unit_test(test_aws_instance_action),
        cmocka_unit_test(test_aws_rebalance), cmocka_unit_test(test_gcp),
        cmocka_unit_test(test_azure),      cmocka_unit_test(test_local),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
