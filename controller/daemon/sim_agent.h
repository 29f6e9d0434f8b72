/*
 * controller/daemon/sim_agent.h: the sim agent, which stands in for the
 * software on simulated nodes.  A job runs for its simulated runtime, then
 * its node reports it finished through the same path a real node agent
 * uses (tarmac_agent_report), one report per node.  Until the node agent
 * exists, TARMAC_SIM_AGENT=1 (everywhere) lets it stand in on cloud nodes
 * as well, so a controller driving an emulated cloud (moto) runs its jobs
 * to the end.
 */
#ifndef TM_DAEMON_SIM_AGENT_H
#define TM_DAEMON_SIM_AGENT_H

#include <stdbool.h>
#include <stdint.h>

#include "controller/daemon/calls.h"
#include "controller/io/pg_uv.h"
#include "controller/store/store.h"
#include "core/config.h"

struct tm_sim_agent {
    const struct tm_snapshot *snap;  /* this tick's */
    int64_t now_ms;
    const struct tm_config *cfg;
    bool everywhere;                 /* cloud nodes too, not only simulated pools' */
    struct tm_pg_pool *pool;         /* the reports are written through it */
    struct tm_calls *calls;          /* each report is a call in flight */
    unsigned *finished;              /* counts the jobs reported finished */
};

/* Report every job that ran its time on a ready node.  O(J log N): one
 * pass over the jobs. */
void tm_sim_agent_run(const struct tm_sim_agent *a);

#endif
