/*
 * controller/api/heartbeat_answer.c: what a heartbeat's statement gave,
 * turned into its answer, and the rendezvous port range the statement
 * reads: shared by the single statement (nodes.c) and the batch
 * (heartbeat_batch.c), which both call here and not into each other.
 */
#include <inttypes.h>
#include <stdio.h>

#include "controller/api/internal.h"
#include "controller/api/resources.h"
#include "core/config.h"

/* agent.rendezvous_port_min and _max when the server was started without
 * a configuration (the unit tests). */
#define RENDEZVOUS_PORT_MIN_DEFAULT 29500
#define RENDEZVOUS_PORT_MAX_DEFAULT 29999

/* One heartbeat's answer from its columns (the single statement's or its
 * row of the batch, heartbeat_batch.c): state NULL for no such node. */
void tm_api_heartbeat_answer(struct api_call *c, bool tok_ok, const char *state, const char *bad,
                             const char *gpus, const char *answer, size_t answer_len)
{
    if (!answer)
        tm_api_samples_give_back(c); /* nothing of it was stored */
    if (!tok_ok) {
        /* The fast path's cached token no longer holds: the normal path
         * answers (401 for a revoked token, 403 for another node). */
        tm_api_auth_forget(c);
        tm_api_authenticate(c);
        return;
    }
    if (!state) {
        tm_api_fail(c, 404, NULL, "no such node");
        return;
    }
    if (bad) {
        char msg[96];
        snprintf(msg, sizeof(msg), "node %" PRId64 " has %s GPUs: not one of its GPU indices", c->id,
                 gpus ? gpus : "?");
        tm_api_fail(c, 400, bad, msg);
        return;
    }
    if (!answer) {
        char msg[96];
        snprintf(msg, sizeof(msg), "node %" PRId64 " is %s: its heartbeats are refused", c->id, state);
        tm_api_fail(c, 409, "id", msg);
        return;
    }
    tm_api_samples_gpus(c, gpus);
    tm_api_reply(c, 200, answer, answer_len);
}

void tm_api_rendezvous_ports(const struct api_call *c, char *lo, size_t lolen, char *hi, size_t hilen)
{
    const struct tm_config *cfg = tm_api_config(c);

    snprintf(lo, lolen, "%d", cfg && cfg->agent.rendezvous_port_min > 0 ? cfg->agent.rendezvous_port_min
                                                                         : RENDEZVOUS_PORT_MIN_DEFAULT);
    snprintf(hi, hilen, "%d", cfg && cfg->agent.rendezvous_port_max > 0 ? cfg->agent.rendezvous_port_max
                                                                         : RENDEZVOUS_PORT_MAX_DEFAULT);
}
