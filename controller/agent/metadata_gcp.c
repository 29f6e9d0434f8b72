/*
 * controller/agent/metadata_gcp.c: the Compute Engine metadata server.
 *
 * Two items, each its own poll: instance/preempted (FALSE, then TRUE when
 * the Spot or preemptible VM is being preempted: about 30 s before hard
 * off) and instance/maintenance-event (NONE, or TERMINATE_ON_HOST_MAINTENANCE
 * before maintenance that stops the VM, as it does for GPU VMs; live
 * migration is no notice).  Every request carries Metadata-Flavor: Google.
 *
 * The first read of each item is plain, so a value already set when the
 * agent starts is seen at once; after that the read waits for a change
 * (wait_for_change=true, timeout_sec = the period), and a wait that ended
 * normally is followed at once by the next.  http_uv gives no ETag, so
 * there is no last_etag: a change between two waits is read when the next
 * wait times out, at most one period later.
 */
#include "controller/agent/metadata_internal.h"

#include <stdio.h>
#include <string.h>

#include "core/clock.h"
#include "core/err.h"

#define GCP_PREEMPT_GRACE_MS 30000
#define GCP_SLACK_MS 5000L

enum { SLOT_PREEMPTED, SLOT_MAINTENANCE, SLOT_N };

static const char *const items[] = {
    [SLOT_PREEMPTED] = "preempted",
    [SLOT_MAINTENANCE] = "maintenance-event",
};

static void poll_slot(struct tm_md_watch *w, int slot);

static void on_item(struct tm_md_watch *w, int slot, const struct tm_http_response *resp,
                    uint64_t started_ms)
{
    struct tm_md_notice n = {.cloud = "gcp"};
    const char *field = NULL;
    bool on = false;
    int r;

    if (resp->status < 0 || resp->http_status != 200) {
        md_down(w, items[slot], resp);
        return;
    }
    md_up(w);
    if (slot == SLOT_PREEMPTED)
        r = tm_md_parse_gcp_preempted(resp->body, resp->body_len, &on, &field);
    else
        r = tm_md_parse_gcp_maintenance(resp->body, resp->body_len, &on, &field);
    if (r < 0) {
        md_bad(w, slot, items[slot], field);
        return;
    }
    md_sound(w, slot);
    if (on && !w->active[slot]) {
        w->gen[slot]++;
        if (slot == SLOT_PREEMPTED) {
            snprintf(n.action, sizeof(n.action), "preempt");
            n.deadline_ms = tm_wall_ms() + GCP_PREEMPT_GRACE_MS;
        } else {
            snprintf(n.action, sizeof(n.action), "maintenance-terminate");
        }
        snprintf(n.event_id, sizeof(n.event_id), "gcp:%s:%u", items[slot], w->gen[slot]);
        w->active[slot] = true;
        md_notice(w, &n);
    } else if (!on) {
        w->active[slot] = false;
    }
    /* A wait that lasted its course: wait again now.  A quick answer (the
     * first read, or a server that ignores wait_for_change) waits for the
     * timer, so a misbehaving server cannot make us spin. */
    if (w->waited[slot] && uv_now(w->loop) - started_ms >= w->period_ms / 2)
        poll_slot(w, slot);
    w->waited[slot] = true;
}

static void poll_slot(struct tm_md_watch *w, int slot)
{
    static const char *const headers[] = {"Metadata-Flavor: Google", NULL};
    char url[MD_URL_MAX];
    unsigned wait_s = (unsigned)((w->period_ms + 999) / 1000);

    if (w->busy[slot] || w->stopped)
        return;
    if (!w->waited[slot]) {
        snprintf(url, sizeof(url), "%s/computeMetadata/v1/instance/%s", w->base, items[slot]);
        md_send(w, slot, "GET", url, headers, NULL, GCP_SLACK_MS, on_item);
        return;
    }
    snprintf(url, sizeof(url), "%s/computeMetadata/v1/instance/%s?wait_for_change=true&timeout_sec=%u",
             w->base, items[slot], wait_s);
    md_send(w, slot, "GET", url, headers, NULL, (long)wait_s * 1000 + GCP_SLACK_MS, on_item);
}

static void poll_gcp(struct tm_md_watch *w)
{
    for (int slot = 0; slot < SLOT_N; slot++)
        poll_slot(w, slot);
}

const struct md_service tm_md_gcp = {
    .kind = "gcp",
    .default_base = "http://metadata.google.internal",
    .address = {.path = "/computeMetadata/v1/instance/network-interfaces/0/ip",
                .header = "Metadata-Flavor: Google"},
    .poll = poll_gcp,
};
