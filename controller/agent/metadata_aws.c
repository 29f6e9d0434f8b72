/*
 * controller/agent/metadata_aws.c: EC2 instance metadata, IMDSv2.
 *
 * A session token first (PUT /latest/api/token with the TTL header; IMDSv2-
 * only instances answer 401 to anything without one), kept until a minute
 * before its TTL or until a 401; then each period the two items that carry
 * notices, in parallel: spot/instance-action (404 while no interruption is
 * scheduled) and events/recommendations/rebalance (404 while none).
 * The token is a credential of sorts: it is never logged.
 */
#include "controller/agent/metadata_internal.h"

#include <ctype.h>
#include <stdio.h>
#include <string.h>

#include "core/err.h"

#define AWS_TOKEN_TTL_S 21600
#define AWS_TIMEOUT_MS 5000L

enum { SLOT_TOKEN, SLOT_ACTION, SLOT_REBALANCE };

static const char *const items[] = {
    [SLOT_TOKEN] = "api/token",
    [SLOT_ACTION] = "spot/instance-action",
    [SLOT_REBALANCE] = "events/recommendations/rebalance",
};

static void get_items(struct tm_md_watch *w);

static bool token_ok(const char *body, size_t len, size_t max)
{
    if (len == 0 || len >= max)
        return false;
    for (size_t i = 0; i < len; i++)
        if (!isgraph((unsigned char)body[i]))
            return false;
    return true;
}

static void on_token(struct tm_md_watch *w, int slot, const struct tm_http_response *resp,
                     uint64_t started_ms)
{
    if (resp->status < 0 || resp->http_status != 200) {
        md_down(w, items[slot], resp);
        return;
    }
    md_up(w);
    if (!token_ok(resp->body, resp->body_len, sizeof(w->token))) {
        md_bad(w, slot, items[slot], "token");
        return;
    }
    md_sound(w, slot);
    memcpy(w->token, resp->body, resp->body_len);
    w->token[resp->body_len] = '\0';
    w->token_ms = started_ms;
    get_items(w);
}

static void on_item(struct tm_md_watch *w, int slot, const struct tm_http_response *resp,
                    uint64_t started_ms)
{
    struct tm_md_notice n;
    const char *field = NULL;
    int r;

    if (resp->status < 0) {
        md_down(w, items[slot], resp);
        return;
    }
    md_up(w);
    if (resp->http_status == 401) {
        w->token[0] = '\0'; /* expired or revoked: the next poll asks again */
        return;
    }
    if (resp->http_status == 404) {
        md_sound(w, slot);
        return;
    }
    if (resp->http_status != 200) {
        md_down(w, items[slot], resp);
        return;
    }
    if (slot == SLOT_ACTION)
        r = tm_md_parse_aws_instance_action(resp->body, resp->body_len, &n, &field);
    else
        r = tm_md_parse_aws_rebalance(resp->body, resp->body_len, &n, &field);
    if (r < 0) {
        md_bad(w, slot, items[slot], field);
        return;
    }
    md_sound(w, slot);
    md_notice(w, &n);
}

static void get_items(struct tm_md_watch *w)
{
    char url[MD_URL_MAX], auth[sizeof(w->token) + 40];
    const char *headers[] = {auth, NULL};

    snprintf(auth, sizeof(auth), "X-aws-ec2-metadata-token: %s", w->token);
    for (int slot = SLOT_ACTION; slot <= SLOT_REBALANCE; slot++) {
        if (w->busy[slot])
            continue;
        snprintf(url, sizeof(url), "%s/latest/meta-data/%s", w->base, items[slot]);
        md_send(w, slot, "GET", url, headers, NULL, AWS_TIMEOUT_MS, on_item);
    }
}

static void poll_aws(struct tm_md_watch *w)
{
    char url[MD_URL_MAX];
    static const char *const headers[] = {
        "X-aws-ec2-metadata-token-ttl-seconds: " "21600", NULL};
    uint64_t now = uv_now(w->loop);

    if (w->busy[SLOT_TOKEN])
        return;
    if (!w->token[0] || now - w->token_ms > (AWS_TOKEN_TTL_S - 60) * 1000ull) {
        w->token[0] = '\0';
        snprintf(url, sizeof(url), "%s/latest/api/token", w->base);
        md_send(w, SLOT_TOKEN, "PUT", url, headers, NULL, AWS_TIMEOUT_MS, on_token);
        return;
    }
    get_items(w);
}

const struct md_service tm_md_aws = {
    .kind = "aws",
    .default_base = "http://169.254.169.254",
    /* IMDSv2: a session token first. */
    .address = {.path = "/latest/meta-data/local-ipv4", .token_path = "/latest/api/token",
                .token_ask = "X-aws-ec2-metadata-token-ttl-seconds: 300",
                .token_header = "X-aws-ec2-metadata-token: "},
    .poll = poll_aws,
};
