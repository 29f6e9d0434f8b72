/*
 * controller/agent/metadata.h: the node's own word that it is about to be
 * taken away, from the cloud's instance metadata service.
 *
 * A watch polls one metadata service on the agent's loop and calls back
 * once for each new notice:
 *
 *   aws    IMDSv2: PUT /latest/api/token (X-aws-ec2-metadata-token-ttl-seconds),
 *          then GET /latest/meta-data/spot/instance-action and
 *          /latest/meta-data/events/recommendations/rebalance with
 *          X-aws-ec2-metadata-token; 404 means none.  Actions "terminate",
 *          "stop", "hibernate" (deadline = the answer's time) and "rebalance"
 *          (a recommendation: deadline 0).
 *   gcp    GET /computeMetadata/v1/instance/preempted and .../maintenance-event
 *          (Metadata-Flavor: Google), long-polled with wait_for_change=true.
 *          Actions "preempt" (deadline = now + 30 s, the documented grace)
 *          and "maintenance-terminate" (TERMINATE_ON_HOST_MAINTENANCE;
 *          deadline 0); live migration is not a notice.
 *   azure  Scheduled Events, GET /metadata/scheduledevents?api-version=2020-07-01
 *          (Metadata: true).  Events of type Preempt and Terminate give
 *          actions "preempt" and "terminate", deadline = NotBefore (or now
 *          when empty, i.e. started), event_id = EventId;
 *          tm_md_watch_ack() posts {"StartRequests":[{"EventId":...}]}.
 *   local  the local provider's fake: base_url is the path of a notice file
 *          (file:// prefix allowed) holding
 *          {"action":"terminate","deadline_ms":N,"event_id":"..."}; it is
 *          re-read every period; absent means none.
 *
 * base_url is the service's root ("http://169.254.169.254" by default for
 * aws and azure, "http://metadata.google.internal" for gcp; NULL or "" means
 * that default), so tests point a watch at a loopback fake.  Nothing
 * blocks: every request goes through controller/io/http_uv.h on loop.
 *
 * A notice is reported once per event_id for the life of the watch (a
 * notice still present at the next poll is not reported again).  A
 * malformed or truncated answer is logged once, naming the field, until a
 * sound answer comes; the watch keeps polling and never crashes on input.
 * An unreachable service is logged once likewise (no metadata service on a
 * laptop is normal).
 */
#ifndef TM_AGENT_METADATA_H
#define TM_AGENT_METADATA_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <uv.h>

struct tm_http;
struct tm_md_watch;

struct tm_md_notice {
    char cloud[8];          /* the reader's kind (tm_md_kind_known) */
    char action[32];        /* "terminate", "stop", "hibernate", "rebalance", "preempt", ... */
    int64_t deadline_ms;    /* wall clock, ms since the epoch, when the node goes; 0 unknown */
    char event_id[128];     /* unique per notice; what tm_md_watch_ack() takes */
};

typedef void (*tm_md_notice_cb)(const struct tm_md_notice *n, void *data);

/*
 * Start watching the metadata service of kind (tm_md_kind_known) at base_url, with requests on http (which must outlive the
 * watch).  cb fires on loop, never inside this call, once per new notice;
 * n is valid only during the call.  0 and *ret, or TM_EINVAL (unknown
 * kind, bad URL; logged), TM_ENOMEM.  The first poll runs at once, then
 * every period (tm_md_watch_set_period; 1 s by default).
 */
/* Whether this build has a reader for kind, and
 * their names as "aws|gcp|..." into buf (one per metadata_KIND.c). */
bool tm_md_kind_known(const char *kind);
void tm_md_kind_names(char *buf, size_t size);

int tm_md_watch_start(uv_loop_t *loop, struct tm_http *http, const char *kind,
                      const char *base_url,
                      void (*cb)(const struct tm_md_notice *n, void *data), void *data,
                      struct tm_md_watch **ret);

/* Tell the service the node is ready for the event (Azure: StartRequests,
 * so the platform may proceed early; local: writes "acked" into the notice
 * file's folder; aws and gcp: nothing to send).  0 when sent or nothing is
 * needed, TM_ENOTFOUND for an event_id never reported, TM_EINVAL. */
int tm_md_watch_ack(struct tm_md_watch *w, const char *event_id);

/* The time between polls (and the GCP long-poll's timeout_sec, rounded up
 * to whole seconds); at least 100 ms.  Takes effect from the next poll. */
void tm_md_watch_set_period(struct tm_md_watch *w, uint64_t period_ms);

/* Stop polling and free the watch; requests in flight are abandoned (their
 * answers are dropped).  NULL is allowed. */
void tm_md_watch_stop(struct tm_md_watch *w);

/* ---- pure parsers (no I/O; fuzzed by tests/fuzz/fuzz_metadata.c) ------- */

/*
 * Each parser reads one answer body of len bytes (not NUL-terminated),
 * returns 0 and fills its output, or TM_EBADREPLY and sets *ret_field
 * (may be NULL) to the static name of the field at fault, e.g. "action"
 * or "Events[2].EventId".  now_ms (wall clock) is what "immediately" means.
 */

/* AWS spot/instance-action: {"action":"terminate","time":"2026-11-29T16:22:00Z"}. */
int tm_md_parse_aws_instance_action(const char *body, size_t len, struct tm_md_notice *ret,
                                    const char **ret_field);

/* AWS events/recommendations/rebalance: {"noticeTime":"2026-11-29T16:10:00Z"}. */
int tm_md_parse_aws_rebalance(const char *body, size_t len, struct tm_md_notice *ret,
                              const char **ret_field);

/* GCP instance/preempted: "TRUE" or "FALSE" (surrounding white space allowed). */
int tm_md_parse_gcp_preempted(const char *body, size_t len, bool *ret_preempted,
                              const char **ret_field);

/* GCP instance/maintenance-event: "NONE", "MIGRATE_ON_HOST_MAINTENANCE",
 * "TERMINATE_ON_HOST_MAINTENANCE" (others are refused).  *ret_terminate
 * is true only for the last. */
int tm_md_parse_gcp_maintenance(const char *body, size_t len, bool *ret_terminate,
                                const char **ret_field);

#define TM_MD_AZURE_EVENTS_MAX 16

/* Azure Scheduled Events document: the Preempt and Terminate events in it
 * (other types are read, checked and skipped), at most TM_MD_AZURE_EVENTS_MAX. */
struct tm_md_azure_doc {
    int64_t incarnation;
    size_t n;
    struct tm_md_notice events[TM_MD_AZURE_EVENTS_MAX];
};
int tm_md_parse_azure_events(const char *body, size_t len, int64_t now_ms,
                             struct tm_md_azure_doc *ret, const char **ret_field);

/* The body of an Azure acknowledgement: {"StartRequests":[{"EventId":"ID"}]}
 * into buf; its length, or TM_EINVAL when it does not fit. */
int tm_md_azure_ack_body(const char *event_id, char *buf, size_t size);

/* The local provider's notice file: {"action":"terminate","deadline_ms":N,
 * "event_id":"..."} (deadline_ms and event_id optional; event_id defaults
 * to "local:" + action). */
int tm_md_parse_local_notice(const char *body, size_t len, struct tm_md_notice *ret,
                             const char **ret_field);

/* "2026-11-29T16:22:00Z" (AWS) into ms since the epoch. */
int tm_md_parse_iso8601(const char *s, int64_t *ret_ms);
/* "Mon, 30 Nov 2026 16:25:00 GMT" (RFC 1123, Azure) into ms since the epoch. */
int tm_md_parse_rfc1123(const char *s, int64_t *ret_ms);

#endif
