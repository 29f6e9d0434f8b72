/*
 * tests/fuzz/fuzz_metadata.c: metadata service answers through every
 * parser of controller/agent/metadata.h.
 *
 * Built as a libFuzzer target (TM_FUZZ=ON, clang) and, with TM_FUZZ_REPLAY,
 * as a plain program replaying the corpus in ctest.  Properties beyond "no
 * crash, no leak": a failure is TM_EBADREPLY and names a field; a success
 * gives NUL-terminated fields, a known cloud, a non-empty action and
 * event_id, and (Azure) a count within the array.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "controller/agent/metadata.h"
#include "core/err.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_notice(const struct tm_md_notice *n, const char *cloud)
{
    if (!memchr(n->cloud, '\0', sizeof(n->cloud)) || !memchr(n->action, '\0', sizeof(n->action)) ||
        !memchr(n->event_id, '\0', sizeof(n->event_id)))
        abort();
    if (strcmp(n->cloud, cloud) != 0 || !n->action[0] || !n->event_id[0] || n->deadline_ms < 0)
        abort();
}

static void check_fail(int r, const char *field)
{
    if (r != TM_EBADREPLY || !field || !field[0])
        abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *body = (const char *)data;
    struct tm_md_notice n;
    struct tm_md_azure_doc doc;
    const char *field;
    char text[256];
    int64_t ms;
    bool on;
    int r;

    field = NULL;
    r = tm_md_parse_aws_instance_action(body, size, &n, &field);
    r == 0 ? check_notice(&n, "aws") : check_fail(r, field);
    field = NULL;
    r = tm_md_parse_aws_rebalance(body, size, &n, &field);
    r == 0 ? check_notice(&n, "aws") : check_fail(r, field);
    field = NULL;
    r = tm_md_parse_gcp_preempted(body, size, &on, &field);
    if (r < 0)
        check_fail(r, field);
    field = NULL;
    r = tm_md_parse_gcp_maintenance(body, size, &on, &field);
    if (r < 0)
        check_fail(r, field);
    field = NULL;
    r = tm_md_parse_azure_events(body, size, 1, &doc, &field);
    if (r == 0) {
        if (doc.n > TM_MD_AZURE_EVENTS_MAX || doc.incarnation < 0)
            abort();
        for (size_t i = 0; i < doc.n; i++) {
            char ack[512];
            check_notice(&doc.events[i], "azure");
            if (tm_md_azure_ack_body(doc.events[i].event_id, ack, sizeof(ack)) <= 0)
                abort(); /* every reported id must be acknowledgeable */
        }
    } else {
        check_fail(r, field);
    }
    field = NULL;
    r = tm_md_parse_local_notice(body, size, &n, &field);
    r == 0 ? check_notice(&n, "local") : check_fail(r, field);
    /* The date readers take C strings. */
    if (size < sizeof(text)) {
        memcpy(text, body, size);
        text[size] = '\0';
        (void)tm_md_parse_iso8601(text, &ms);
        (void)tm_md_parse_rfc1123(text, &ms);
    }
    return 0;
}

#ifdef TM_FUZZ_REPLAY
#include "tests/fuzz/replay_main.h"
#endif
