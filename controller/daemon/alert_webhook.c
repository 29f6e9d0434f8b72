/*
 * controller/daemon/alert_webhook.c: see alert_webhook.h.
 *
 * Lifetimes.  A notice (one alert's firing or resolved message being
 * delivered) holds references for its backoff timer handle, its transfer in
 * flight and its row update in flight, and is freed when the last goes.
 * The alerter holds references for its HTTP client (until its close
 * callback), its record statement in flight and each live notice, and frees
 * itself when the last goes after tm_alerter_close().  Everything runs on
 * the loop thread.
 */
#include "controller/daemon/alert_webhook.h"

#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cjson/cJSON.h>

#include "controller/reconcile/alerts.h"
#include "controller/io/http_uv.h"
#include "core/err.h"
#include "core/log.h"

/* Notices delivered at once; the rest wait for a later tick. */
#define ALERT_NOTICES_MAX 32
/* Retries back off by doubling up to this (real time). */
#define ALERT_BACKOFF_CAP_MS 3600000
/* Receivers answer with a short body we do not read. */
#define ALERT_REPLY_MAX (64u << 10)
/* Notices finished while a record statement was in flight (see on_synced). */
#define ALERT_DONE_MAX 256

struct notice {
    uv_timer_t timer;           /* first member: the close callback finds the notice */
    struct tm_alerter *al;
    struct notice *prev, *next;
    int64_t id;
    bool resolved;              /* the resolved notice, else the firing one */
    bool finished;              /* delivered or given up */
    bool timer_closing;
    int attempts;               /* made so far, before a restart included */
    unsigned refs;
    char key[TM_ALERT_KEY_MAX];
    char idempotency[96];
    char *body;
};

struct done_notice {
    int64_t id;
    bool resolved;
    uint64_t seq;
};

struct tm_alerter {
    uv_loop_t *loop;
    struct tm_pg_pool *pool;
    const struct tm_config *cfg;
    tm_alerter_now_fn now;
    void *now_data;
    struct tm_http *http;
    int *provider_status;        /* one per cfg->providers */
    const bool *pool_real_agent; /* tm_alerter_silence */
    int64_t hearing_since_ms;
    struct tm_alert_state state; /* windows carried between ticks */
    struct notice *notices;
    size_t nnotices;
    struct done_notice done[ALERT_DONE_MAX];
    size_t ndone;
    uint64_t seq;                /* orders record statements and finished notices */
    bool sync_inflight;
    bool closing;
    unsigned refs;
};

static void alerter_unref(struct tm_alerter *al)
{
    if (--al->refs > 0 || !al->closing)
        return;
    tm_alert_state_release(&al->state);
    free(al->provider_status);
    free(al);
}

/* ---- notices -------------------------------------------------------------- */

static void notice_unref(struct notice *n)
{
    struct tm_alerter *al = n->al;

    if (--n->refs > 0)
        return;
    if (n->prev)
        n->prev->next = n->next;
    else
        al->notices = n->next;
    if (n->next)
        n->next->prev = n->prev;
    al->nnotices--;
    free(n->body);
    free(n);
    alerter_unref(al);
}

static void on_timer_closed(uv_handle_t *h)
{
    notice_unref((struct notice *)h);
}

static void notice_close_timer(struct notice *n)
{
    if (n->timer_closing)
        return;
    n->timer_closing = true;
    uv_close((uv_handle_t *)&n->timer, on_timer_closed);
}

static void notice_remember_done(struct tm_alerter *al, const struct notice *n)
{
    if (al->ndone == ALERT_DONE_MAX) {
        memmove(al->done, al->done + 1, (ALERT_DONE_MAX - 1) * sizeof(al->done[0]));
        al->ndone--;
    }
    al->done[al->ndone++] = (struct done_notice){.id = n->id, .resolved = n->resolved, .seq = ++al->seq};
}

static void on_recorded(const struct tm_pg_reply *reply, void *data)
{
    struct notice *n = data;
    struct tm_alerter *al = n->al;

    if (reply->status < 0 && reply->status != TM_ECANCELED)
        tm_log_warn("could not record an alert delivery, it may be sent again",
                    "alert=%s error=\"%s\"", n->key, reply->error ? reply->error : tm_strerror(reply->status));
    if (n->finished && !al->closing) {
        notice_remember_done(al, n);
        notice_close_timer(n);
    }
    notice_unref(n);
}

/* Write one attempt's outcome to the row; the finished notice leaves once
 * this is written (on_recorded), so a later record statement sees it. */
static void notice_record(struct notice *n, bool delivered, bool given_up, const char *error)
{
    struct tm_alerter *al = n->al;
    static const char firing_sql[] =
        "UPDATE alerts SET attempts = greatest(attempts, $2::int), last_error = coalesce($3, last_error),"
        " delivered_ms = coalesce(delivered_ms, $4::bigint), given_up_ms = coalesce(given_up_ms, $5::bigint)"
        " WHERE id = $1";
    static const char resolved_sql[] =
        "UPDATE alerts SET resolve_attempts = greatest(resolve_attempts, $2::int),"
        " last_error = coalesce($3, last_error),"
        " resolve_delivered_ms = coalesce(resolve_delivered_ms, $4::bigint),"
        " resolve_given_up_ms = coalesce(resolve_given_up_ms, $5::bigint) WHERE id = $1";
    char id_s[24], attempts_s[16], now_s[24];
    int64_t now = al->now(al->now_data);

    snprintf(id_s, sizeof(id_s), "%" PRId64, n->id);
    snprintf(attempts_s, sizeof(attempts_s), "%d", n->attempts);
    snprintf(now_s, sizeof(now_s), "%" PRId64, now);
    const char *params[5] = {id_s, attempts_s, error, delivered ? now_s : NULL, given_up ? now_s : NULL};
    n->refs++;
    if (tm_pg_pool_query(al->pool, n->resolved ? resolved_sql : firing_sql, 5, params, on_recorded, n) < 0) {
        tm_log_warn("could not record an alert delivery, it may be sent again", "alert=%s", n->key);
        if (n->finished)
            notice_close_timer(n);
        notice_unref(n);
    }
}

static int64_t backoff_ms(const struct tm_config_alerts *cfg, int attempts)
{
    int64_t d = cfg->webhook_backoff_ms;
    for (int i = 1; i < attempts && d < ALERT_BACKOFF_CAP_MS; i++)
        d *= 2;
    return d < ALERT_BACKOFF_CAP_MS ? d : ALERT_BACKOFF_CAP_MS;
}

static void notice_send(struct notice *n);

static void on_backoff(uv_timer_t *t)
{
    struct notice *n = (struct notice *)t;
    if (!n->al->closing)
        notice_send(n);
}

/* One attempt's outcome: status is a transport code (0 when an answer
 * came), http its status.  Retries on a connection error, a timeout, 408,
 * 429 and 5xx while attempts are left. */
static void notice_outcome(struct notice *n, int status, long http)
{
    const struct tm_config_alerts *cfg = &n->al->cfg->alerts;
    const char *state = n->resolved ? "resolved" : "firing";
    char error[64] = "";
    bool delivered = status == 0 && http >= 200 && http < 300;
    bool retryable = status < 0 || http == 408 || http == 429 || http >= 500;

    if (status < 0)
        snprintf(error, sizeof(error), "%s", tm_err_name(status));
    else if (!delivered)
        snprintf(error, sizeof(error), "HTTP %ld", http);
    if (delivered) {
        n->finished = true;
        tm_log_info("alert delivered", "alert=%s state=%s attempt=%d", n->key, state, n->attempts);
        notice_record(n, true, false, NULL);
        return;
    }
    if (!retryable || n->attempts >= cfg->webhook_attempts) {
        n->finished = true;
        tm_log_error("gave up delivering an alert", "alert=%s state=%s attempts=%d error=\"%s\"%s", n->key,
                     state, n->attempts, error, retryable ? "" : " retryable=false");
        notice_record(n, false, true, error);
        return;
    }
    int64_t wait = backoff_ms(cfg, n->attempts);
    tm_log_warn("could not deliver an alert, will retry", "alert=%s state=%s attempt=%d error=\"%s\" retry_in_ms=%" PRId64,
                n->key, state, n->attempts, error, wait);
    notice_record(n, false, false, error);
    uv_timer_start(&n->timer, on_backoff, (uint64_t)wait, 0);
}

static void on_posted(const struct tm_http_response *resp, void *data)
{
    struct notice *n = data;

    if (!n->al->closing && resp->status != TM_ECANCELED)
        notice_outcome(n, resp->status, resp->http_status);
    notice_unref(n);
}

static void notice_send(struct notice *n)
{
    struct tm_alerter *al = n->al;
    char idem[128];
    snprintf(idem, sizeof(idem), "Idempotency-Key: %s", n->idempotency);
    const char *headers[] = {"Content-Type: application/json", "User-Agent: tarmac", idem, NULL};
    struct tm_http_request req = {
        .method = "POST", .url = al->cfg->alerts.webhook_url, .headers = headers, .body = n->body,
        .body_len = strlen(n->body), .timeout_ms = (long)al->cfg->alerts.webhook_timeout_ms,
        .max_body = ALERT_REPLY_MAX,
    };

    n->attempts++;
    n->refs++;
    int r = tm_http_request(al->http, &req, on_posted, n);
    if (r < 0) {
        n->refs--;
        notice_outcome(n, r, 0);
    }
}

/* "2026-11-29T17:20:01.123Z" for a time in ms on the controller's clock. */
static void iso_time(int64_t ms, char out[32])
{
    time_t t = (time_t)(ms / 1000);
    struct tm tm;
    char base[24];
    gmtime_r(&t, &tm);
    strftime(base, sizeof(base), "%Y-%m-%dT%H:%M:%S", &tm);
    snprintf(out, 32, "%s.%03dZ", base, (int)(ms % 1000));
}

static const char *json_str(const cJSON *o, const char *name)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, name);
    return cJSON_IsString(v) ? v->valuestring : "";
}

static double json_num(const cJSON *o, const char *name)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, name);
    return cJSON_IsNumber(v) ? v->valuedouble : 0;
}

/* The webhook body for a pending row of tarmac_alerts. */
static char *notice_body(const struct tm_alerter *al, const cJSON *row, bool resolved)
{
    cJSON *b = cJSON_CreateObject();
    const cJSON *details = cJSON_GetObjectItemCaseSensitive(row, "details");
    char fired[32], res[32];
    char *out = NULL;

    iso_time((int64_t)json_num(row, "fired_ms"), fired);
    iso_time((int64_t)json_num(row, "resolved_ms"), res);
    if (b && cJSON_AddNumberToObject(b, "id", json_num(row, "id")) &&
        cJSON_AddStringToObject(b, "alert", json_str(row, "key")) &&
        cJSON_AddStringToObject(b, "kind", json_str(row, "kind")) &&
        cJSON_AddStringToObject(b, "subject", json_str(row, "subject")) &&
        cJSON_AddStringToObject(b, "state", resolved ? "resolved" : "firing") &&
        cJSON_AddStringToObject(b, "message", json_str(row, "message")) &&
        cJSON_AddItemToObject(b, "details", details ? cJSON_Duplicate(details, true) : cJSON_CreateObject()) &&
        cJSON_AddStringToObject(b, "fired_at", fired) &&
        (resolved ? cJSON_AddStringToObject(b, "resolved_at", res) != NULL
                  : cJSON_AddNullToObject(b, "resolved_at") != NULL) &&
        cJSON_AddStringToObject(b, "cluster", al->cfg->cluster))
        out = cJSON_PrintUnformatted(b);
    cJSON_Delete(b);
    return out;
}

static bool notice_live(const struct tm_alerter *al, int64_t id, bool resolved)
{
    for (const struct notice *n = al->notices; n; n = n->next)
        if (n->id == id && n->resolved == resolved)
            return true;
    return false;
}

/* Finished after the record statement with sequence number seq was sent:
 * that statement may not have seen it. */
static bool notice_done_since(const struct tm_alerter *al, int64_t id, bool resolved, uint64_t seq)
{
    for (size_t i = 0; i < al->ndone; i++)
        if (al->done[i].id == id && al->done[i].resolved == resolved && al->done[i].seq > seq)
            return true;
    return false;
}

static void notice_start(struct tm_alerter *al, const cJSON *row)
{
    bool resolved = strcmp(json_str(row, "state"), "resolved") == 0;
    struct notice *n = calloc(1, sizeof(*n));

    if (!n || !(n->body = notice_body(al, row, resolved))) {
        free(n);
        tm_log_warn("could not start an alert delivery, will retry next tick", "error=%s",
                    tm_err_name(TM_ENOMEM));
        return;
    }
    n->al = al;
    n->id = (int64_t)json_num(row, "id");
    n->resolved = resolved;
    n->attempts = (int)json_num(row, "attempts");
    n->refs = 1; /* the timer handle */
    snprintf(n->key, sizeof(n->key), "%s", json_str(row, "key"));
    snprintf(n->idempotency, sizeof(n->idempotency), "tarmac-alert-%" PRId64 "-%s", n->id,
             resolved ? "resolved" : "firing");
    uv_timer_init(al->loop, &n->timer);
    n->next = al->notices;
    if (al->notices)
        al->notices->prev = n;
    al->notices = n;
    al->nnotices++;
    al->refs++;
    notice_send(n);
}

/* ---- recording ------------------------------------------------------------ */

struct sync_req {
    struct tm_alerter *al;
    cJSON *holding;             /* what was sent, for the log lines */
    uint64_t seq;
};

static const char *holding_message(const cJSON *holding, const char *key)
{
    const cJSON *h;
    cJSON_ArrayForEach(h, holding) {
        if (strcmp(json_str(h, "key"), key) == 0)
            return json_str(h, "message");
    }
    return "";
}

static void on_synced(const struct tm_pg_reply *reply, void *data)
{
    struct sync_req *req = data;
    struct tm_alerter *al = req->al;
    cJSON *result = NULL;
    const cJSON *v;

    al->sync_inflight = false;
    if (al->closing)
        goto out;
    if (reply->status < 0) {
        if (reply->sqlstate && strcmp(reply->sqlstate, "TM001") == 0)
            tm_log_warn("alerts not recorded: leadership lost", "sqlstate=%s", reply->sqlstate);
        else if (reply->status != TM_ECANCELED)
            tm_log_warn("could not record alerts, will retry next tick", "error=\"%s\"",
                        reply->error ? reply->error : tm_strerror(reply->status));
        goto out;
    }
    if (reply->nresults != 1 || PQntuples(reply->results[0]) != 1 ||
        !(result = cJSON_Parse(PQgetvalue(reply->results[0], 0, 0)))) {
        tm_log_warn("could not record alerts, will retry next tick", "error=%s", tm_err_name(TM_EBADREPLY));
        goto out;
    }
    cJSON_ArrayForEach(v, cJSON_GetObjectItemCaseSensitive(result, "fired")) {
        if (cJSON_IsString(v))
            tm_log_warn("alert firing", "alert=%s message=\"%s\"", v->valuestring,
                        holding_message(req->holding, v->valuestring));
    }
    cJSON_ArrayForEach(v, cJSON_GetObjectItemCaseSensitive(result, "resolved")) {
        if (cJSON_IsString(v))
            tm_log_info("alert resolved", "alert=%s", v->valuestring);
    }
    cJSON_ArrayForEach(v, cJSON_GetObjectItemCaseSensitive(result, "pending")) {
        int64_t id = (int64_t)json_num(v, "id");
        bool resolved = strcmp(json_str(v, "state"), "resolved") == 0;
        if (al->nnotices >= ALERT_NOTICES_MAX)
            break;
        if (notice_live(al, id, resolved) || notice_done_since(al, id, resolved, req->seq))
            continue;
        notice_start(al, v);
    }
    /* What finished before this statement was sent, it saw. */
    size_t keep = 0;
    for (size_t i = 0; i < al->ndone; i++)
        if (al->done[i].seq > req->seq)
            al->done[keep++] = al->done[i];
    al->ndone = keep;
out:
    cJSON_Delete(result);
    cJSON_Delete(req->holding);
    free(req);
    alerter_unref(al);
}

void tm_alerter_tick(struct tm_alerter *al, const struct tm_snapshot *snap, int64_t epoch,
                     int64_t now_ms)
{
    struct tm_alert_input in = {.snap = snap, .now_ms = now_ms};
    struct tm_alert_set set = {0};
    struct tm_alert_state next = {0};
    struct sync_req *req = NULL;
    char *json = NULL;
    int r;

    if (!al || al->closing)
        return;
    in.cfg = al->cfg;
    in.provider_status = al->provider_status;
    in.pool_real_agent = al->pool_real_agent;
    in.hearing_since_ms = al->hearing_since_ms;
    r = tm_alerts_evaluate(&in, &al->state, &set, &next);
    if (r < 0) {
        tm_log_warn("could not evaluate alerts, will retry next tick", "error=%s", tm_err_name(r));
        return;
    }
    tm_alert_state_release(&al->state);
    al->state = next;
    if (al->sync_inflight)
        goto out; /* the previous tick's is still on its way */
    req = calloc(1, sizeof(*req));
    if (!req || !(req->holding = tm_alert_set_to_json(&set)) ||
        !(json = cJSON_PrintUnformatted(req->holding))) {
        tm_log_warn("could not record alerts, will retry next tick", "error=%s", tm_err_name(TM_ENOMEM));
        goto out;
    }
    char epoch_s[24], now_s[24], max_s[16];
    snprintf(epoch_s, sizeof(epoch_s), "%" PRId64, epoch);
    snprintf(now_s, sizeof(now_s), "%" PRId64, now_ms);
    snprintf(max_s, sizeof(max_s), "%d", al->cfg->alerts.webhook_url ? al->cfg->alerts.webhook_attempts : 0);
    const char *params[4] = {epoch_s, now_s, json, max_s};
    req->al = al;
    req->seq = ++al->seq;
    r = tm_pg_pool_query(al->pool, "SELECT tarmac_alerts($1, $2, $3::jsonb, $4)", 4, params, on_synced, req);
    if (r < 0) {
        tm_log_warn("could not record alerts, will retry next tick", "error=%s", tm_err_name(r));
        goto out;
    }
    al->sync_inflight = true;
    al->refs++;
    req = NULL;
out:
    if (req)
        cJSON_Delete(req->holding);
    free(req);
    free(json);
    tm_alert_set_release(&set);
}

/* ---- start and stop ------------------------------------------------------- */

void tm_alerter_silence(struct tm_alerter *al, const bool *pool_real_agent, int64_t hearing_since_ms)
{
    if (!al)
        return;
    al->pool_real_agent = pool_real_agent;
    al->hearing_since_ms = hearing_since_ms;
}

void tm_alerter_provider_status(struct tm_alerter *al, size_t provider, int status)
{
    if (al && provider < al->cfg->nproviders && status != TM_ECANCELED)
        al->provider_status[provider] = status;
}

int tm_alerter_create(uv_loop_t *loop, struct tm_pg_pool *pool, const struct tm_config *cfg,
                      tm_alerter_now_fn now, void *now_data, struct tm_alerter **ret_alerter)
{
    struct tm_alerter *al = calloc(1, sizeof(*al));
    int r;

    if (!al)
        return TM_ENOMEM;
    al->provider_status = calloc(cfg->nproviders + 1, sizeof(*al->provider_status));
    if (!al->provider_status) {
        free(al);
        return TM_ENOMEM;
    }
    r = tm_http_create(loop, &al->http);
    if (r < 0) {
        free(al->provider_status);
        free(al);
        return r;
    }
    al->loop = loop;
    al->pool = pool;
    al->cfg = cfg;
    al->now = now;
    al->now_data = now_data;
    al->refs = 1; /* the HTTP client, until its close callback */
    *ret_alerter = al;
    return 0;
}

static void on_http_closed(void *data)
{
    alerter_unref(data);
}

void tm_alerter_close(struct tm_alerter *al)
{
    if (!al || al->closing)
        return;
    al->closing = true;
    /* Each notice keeps itself until its timer handle has closed; the
     * transfers' callbacks (TM_ECANCELED) and the pool's come later. */
    for (struct notice *n = al->notices; n; n = n->next)
        notice_close_timer(n);
    tm_http_close(al->http, on_http_closed, al);
    al->http = NULL;
}
