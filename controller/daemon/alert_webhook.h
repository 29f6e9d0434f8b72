/*
 * controller/daemon/alert_webhook.h: the alerter records alerts and delivers them
 * to the webhook, on the loop, never blocking.
 *
 * Each leader tick, tm_alerter_tick() evaluates the conditions on the
 * tick's snapshot (controller/reconcile/alerts.h) and sends the set holding now to
 * tarmac_alerts() (migrations/0004_alerts.sql) through the pool, under the
 * leader epoch: a key starting to hold gets a row and an "alert" decision, a
 * key no longer holding is resolved with an "alert_resolved" decision, and a
 * key still holding writes nothing.  So an alert is sent once per firing
 * whatever the number of ticks, replicas or restarts.
 *
 * tarmac_alerts answers the notices still to send (firing, not delivered;
 * resolved, its firing notice delivered), oldest first.  Each is POSTed as
 * application/json
 *   {"id", "alert": key, "kind", "subject", "state": "firing"|"resolved",
 *    "message", "details", "fired_at", "resolved_at", "cluster"}
 * with an Idempotency-Key header ("tarmac-alert-<id>-<state>"), through
 * controller/http_uv (libcurl multi), webhook_timeout per attempt.  A
 * connection error, a timeout, 408, 429 or 5xx is retried after
 * webhook_backoff, doubling (capped at an hour), up to webhook_attempts in
 * all; another answer gives up at once.  Each attempt's outcome is written
 * to the row (attempts, delivered_ms, given_up_ms, last_error: "HTTP 500",
 * "ETIMEDOUT", never the URL), so a notice whose series was cut short by a
 * stop or a crash is resumed by the next leader with the attempts left: at
 * least once (receivers dedupe on the Idempotency-Key).
 *
 * The webhook URL is a secret (it carries its credential in the path): it
 * is given to libcurl and nowhere else, not to logs, errors or decisions.
 * With no URL configured alerts are only recorded.
 */
#ifndef TM_ALERT_WEBHOOK_H
#define TM_ALERT_WEBHOOK_H

#include <stddef.h>
#include <stdint.h>

#include <uv.h>

#include "controller/io/pg_uv.h"
#include "controller/reconcile/reconcile.h"
#include "core/config.h"

struct tm_alerter;

/* The controller's clock, for delivered_ms and the like. */
typedef int64_t (*tm_alerter_now_fn)(void *data);

/* Start an alerter on loop, writing through pool.  cfg and pool must outlive
 * it (close it before the pool).  Returns 0, TM_ENOMEM or TM_EUNAVAIL
 * (libcurl would not start). */
int tm_alerter_create(uv_loop_t *loop, struct tm_pg_pool *pool, const struct tm_config *cfg,
                      tm_alerter_now_fn now, void *now_data, struct tm_alerter **ret_alerter);

/* What provider i (index in cfg->providers) answered its latest call: 0 or
 * a negative code.  TM_ECANCELED (a stop) is ignored. */
void tm_alerter_provider_status(struct tm_alerter *al, size_t provider, int status);

/* What the reconcile pass is given about node agents, for mass_silence:
 * pool_real_agent (per config pool, must outlive the alerter; NULL: none)
 * and since when the leader could hear (controller.c). */
void tm_alerter_silence(struct tm_alerter *al, const bool *pool_real_agent, int64_t hearing_since_ms);

/* One leader tick: evaluate on snap (read during the call only), record
 * under epoch, deliver what is pending.  A tick that finds the previous
 * tick's record still in flight evaluates (keeping its windows) but does
 * not record.  Never fails: errors are logged and the next tick retries. */
void tm_alerter_tick(struct tm_alerter *al, const struct tm_snapshot *snap, int64_t epoch,
                     int64_t now_ms);

/* Stop: cancel backoff timers and transfers in flight (their notices stay
 * pending in the database for the next leader).  The alerter frees itself
 * once its last handle has closed and its last database callback has
 * fired; close the pool after this call.  NULL is accepted. */
void tm_alerter_close(struct tm_alerter *al);

#endif
