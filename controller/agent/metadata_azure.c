/*
 * controller/agent/metadata_azure.c: Azure Scheduled Events.
 *
 * One GET of the document each period (Metadata: true; the first call also
 * enables the service for the VM, which may take a while to answer events),
 * each Preempt or Terminate event in it reported once by its EventId, and
 * tm_md_watch_ack() posting StartRequests for an event so the platform
 * may go ahead before NotBefore once the node has drained.
 */
#include "controller/agent/metadata_internal.h"

#include <stdio.h>
#include <string.h>

#include "core/clock.h"
#include "core/err.h"
#include "core/log.h"

#define AZURE_PATH "/metadata/scheduledevents?api-version=2020-07-01"
#define AZURE_TIMEOUT_MS 5000L

enum { SLOT_EVENTS, SLOT_ACK };

static const char *const headers[] = {"Metadata: true", "Content-Type: application/json", NULL};

static void on_events(struct tm_md_watch *w, int slot, const struct tm_http_response *resp,
                      uint64_t started_ms)
{
    struct tm_md_azure_doc doc;
    const char *field = NULL;

    if (resp->status < 0 || resp->http_status != 200) {
        md_down(w, "scheduledevents", resp);
        return;
    }
    md_up(w);
    if (tm_md_parse_azure_events(resp->body, resp->body_len, tm_wall_ms(), &doc, &field) < 0) {
        md_bad(w, slot, "scheduledevents", field);
        return;
    }
    md_sound(w, slot);
    for (size_t i = 0; i < doc.n && !w->stopped; i++)
        md_notice(w, &doc.events[i]);
}

static void on_ack(struct tm_md_watch *w, int slot, const struct tm_http_response *resp,
                   uint64_t started_ms)
{
    if (resp->status < 0 || resp->http_status < 200 || resp->http_status > 299) {
        md_down(w, "StartRequests", resp);
        return;
    }
    md_up(w);
    tm_log_info("acknowledged the scheduled event", "kind=azure http_status=%ld",
                resp->http_status);
}

static void poll_azure(struct tm_md_watch *w)
{
    char url[MD_URL_MAX];

    if (w->busy[SLOT_EVENTS])
        return;
    snprintf(url, sizeof(url), "%s" AZURE_PATH, w->base);
    md_send(w, SLOT_EVENTS, "GET", url, headers, NULL, AZURE_TIMEOUT_MS, on_events);
}

static int ack_azure(struct tm_md_watch *w, const struct tm_md_notice *n)
{
    char url[MD_URL_MAX], body[256];

    if (tm_md_azure_ack_body(n->event_id, body, sizeof(body)) < 0)
        return TM_EINVAL;
    snprintf(url, sizeof(url), "%s" AZURE_PATH, w->base);
    /* Several acks may be in flight: the slot's busy flag is not checked. */
    return md_send(w, SLOT_ACK, "POST", url, headers, body, AZURE_TIMEOUT_MS, on_ack);
}

const struct md_service tm_md_azure = {
    .kind = "azure",
    .default_base = "http://169.254.169.254",
    .address = {.path = "/metadata/instance/network/interface/0/ipv4/ipAddress/0/privateIpAddress"
                        "?api-version=2021-02-01&format=text",
                .header = "Metadata: true"},
    .poll = poll_azure,
    .ack = ack_azure,
};
