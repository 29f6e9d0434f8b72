/*
 * controller/reconcile/alerts.h: which alert conditions hold now, a pure function.
 *
 * Input: the tick's snapshot (controller/reconcile/reconcile.h), the configuration's
 * alerts section, what each provider's last call answered, the state this
 * function carried from the previous tick, and now (the controller's clock).
 * Output: the set of conditions holding now, each with a stable key (kind
 * and subject, "pool_idle:od"), a message with the numbers, and details;
 * and the state for the next tick.  No I/O, no clock, no globals.
 *
 * Recording ("not repeated while the condition holds") and delivery are the
 * alerter's (controller/daemon/alert_webhook.h): a key that starts holding fires
 * once, a key that stops holding is resolved, and only a later return fires
 * again.  The conditions:
 *
 *   pool_idle:<pool>       the pool is paid for (at least one billed node)
 *                          and its GPU utilisation has stayed below
 *                          pool_utilisation_below_percent at every tick for
 *                          pool_utilisation_for.  Utilisation as docs/measuring.md
 *                          defines it, at the instant of the tick: GPU milli
 *                          allocated to jobs on the pool's billed nodes over
 *                          the GPU milli of those nodes (booting nodes are
 *                          paid and hold nothing, so they count as idle).
 *                          Heartbeat samples are not used: the snapshot does
 *                          not carry them.
 *   queue_age:<class>      the oldest queued job of the class has waited
 *                          longer than queue_age_above.
 *   soft_cap:<team|org>:<scope>  a soft (hard = false) monthly cap whose
 *                          ledger spend this month reached warn_percent of
 *                          the cap (spent, not projected: an alert is a fact).
 *   provider_auth:<provider>  the provider's last list call failed with
 *                          TM_EAUTH (credentials refused).
 *   gpu_idle:<job>         a running job's allocated GPUs all stayed below
 *                          idle_gpu.threshold for idle_gpu.window, from
 *                          the node agents' samples (tm_reconcile_idle_jobs).
 *   pool_no_show:<pool>    agent.no_show_alert_after or more nodes of the
 *                          pool in a row were given up on without ever
 *                          sending a heartbeat (tm_reconcile_no_show: a
 *                          wrong agent.controller_url, a firewall, a
 *                          broken bootstrap).  Holds until a node of the
 *                          pool heartbeats, so it fires once per episode.
 *   mass_silence:<provider>  so many of the provider's nodes are silent at
 *                          once that the pass holds them back
 *                          (tm_reconcile_mass_silence; needs
 *                          pool_real_agent and hearing_since_ms below).
 *
 * A threshold of 0 (or false) turns its condition off.
 */
#ifndef TM_ALERTS_H
#define TM_ALERTS_H

#include <stddef.h>
#include <stdint.h>

#include <cjson/cJSON.h>

#include "core/model.h"
#include "controller/reconcile/reconcile.h"
#include "core/config.h"

enum tm_alert_kind {
    TM_ALERT_POOL_IDLE,
    TM_ALERT_QUEUE_AGE,
    TM_ALERT_SOFT_CAP,
    TM_ALERT_PROVIDER_AUTH,
    TM_ALERT_GPU_IDLE,
    TM_ALERT_POOL_NO_SHOW,
    TM_ALERT_MASS_SILENCE,
    TM_ALERT_KIND_MAX,
};

#define TM_ALERT_KEY_MAX (TM_ID_MAX + 32)

struct tm_alert {
    enum tm_alert_kind kind;
    char key[TM_ALERT_KEY_MAX];       /* "<kind>:<subject>", stable while it holds */
    char subject[TM_ID_MAX + 8];      /* pool, class, "team:x" / "org:x", provider */
    /* Where its decisions are filed: decisions.subject_kind is one of job,
     * pool, budget, provider (the queue has no kind of its own: its
     * decision goes to the oldest queued job). */
    const char *decision_subject_kind;
    char decision_subject_id[TM_ID_MAX + 8];
    char message[320];
    cJSON *details;                   /* owned: the numbers behind the message */
};

struct tm_alert_set {
    struct tm_alert *items;
    size_t n;
};

/* Carried from one tick to the next: for each configured pool, since when
 * its paid GPUs have been used below the threshold (0: not below now).  A
 * zero-initialised state is the start (after a restart the window starts
 * again: the alert fires pool_utilisation_for later than it could). */
struct tm_alert_state {
    int64_t *pool_below_since_ms;
    size_t npools;
};

struct tm_alert_input {
    const struct tm_config *cfg;
    const struct tm_snapshot *snap;
    /* One per cfg->providers: the status of its last list call (0, or a
     * negative TM_E* code); NULL when none is known. */
    const int *provider_status;
    int64_t now_ms;
    /* As the reconcile pass is given them (reconcile.h): mass_silence
     * holds only with pool_real_agent set. */
    const bool *pool_real_agent;
    int64_t hearing_since_ms;
};

/* Evaluate.  prev may be NULL or zeroed (first tick).  On success fills
 * *ret_set (release with tm_alert_set_release) and *ret_next (release with
 * tm_alert_state_release; pass it as prev next time) and returns 0; on
 * failure (TM_ENOMEM) writes neither. */
int tm_alerts_evaluate(const struct tm_alert_input *in, const struct tm_alert_state *prev,
                       struct tm_alert_set *ret_set, struct tm_alert_state *ret_next);

void tm_alert_set_release(struct tm_alert_set *set);
void tm_alert_state_release(struct tm_alert_state *state);

/* "pool_idle", "queue_age", "soft_cap", "provider_auth", "gpu_idle", "mass_silence". */
const char *tm_alert_kind_name(enum tm_alert_kind kind);

/* The set as tarmac_alerts' p_holding array (migrations/0004_alerts.sql);
 * caller frees with cJSON_Delete.  NULL when out of memory. */
cJSON *tm_alert_set_to_json(const struct tm_alert_set *set);

#endif
