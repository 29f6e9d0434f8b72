/*
 * controller/daemon/controller.h: `tarmac serve`, the daemon.
 *
 * One libuv loop drives everything: the reconcile timer, the PostgreSQL pool
 * and the leader's dedicated connection (controller/io/pg_uv.c), the providers
 * (providers/provider.h) and the signals.  Each tick:
 *
 *   leader?  -- no: try the advisory lock (tm_store_try_lead); standby if held
 *      |
 *   list every provider's instances (cluster tag)      observed
 *   read one snapshot of the database                  desired
 *   report finished jobs of simulated nodes            (sim agent)
 *   tm_reconcile() -> plan                             pure
 *   tarmac_apply(epoch, now, plan)                     one transaction, fenced
 *   launch / terminate                                 after the commit
 *
 * A tick never overlaps the previous one.  SIGINT/SIGTERM stop taking work,
 * let the tick in flight and the cloud calls in flight finish (abandoned
 * after a deadline: the next leader's tick repairs whatever they left), close
 * every handle and return from the loop; uv_loop_close() then returns 0.
 */
#ifndef TM_CONTROLLER_H
#define TM_CONTROLLER_H

#include <stdbool.h>
#include <stdint.h>

#include <uv.h>

#include "core/config.h"

struct tm_controller_options {
    bool exit_when_idle;     /* stop at the first pass with no job queued or running and no node live */
    int64_t max_wall_ms;     /* stop after this much real time; 0 = never */
};

struct tm_controller_stats {
    unsigned ticks, passes, placed, requested, ready, released, gone, orphans, finished;
    unsigned launches, launch_errors, terminates;
    bool was_leader;
};

/* Run the daemon until a signal (or an option) stops it.  cfg must be
 * loaded and validated, the database migrated.  Returns 0 after a clean stop
 * (uv_loop_close returned 0), else a negative code; err says why. */
int tm_controller_run(const struct tm_config *cfg, const struct tm_controller_options *opts,
                      struct tm_controller_stats *ret_stats, char *err, size_t errsize);

#endif
