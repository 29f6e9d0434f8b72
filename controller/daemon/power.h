/*
 * controller/daemon/power.h: the leader's side of power saving (owned
 * pools' suspend_command and resume_command, docs/owned.md "Power
 * saving").  The pass chooses (controller/reconcile/power.c); this runs
 * the commands through uv_spawn, never blocking the loop, kills one that
 * outlives its pool's command_timeout, records every change and its
 * result as a decision (tarmac_node_power, migrations/0031_power.sql) and
 * holds a node whose command failed off the next passes with a backoff.
 * Loop thread only.
 */
#ifndef TM_DAEMON_POWER_H
#define TM_DAEMON_POWER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <uv.h>

#include "controller/daemon/calls.h"
#include "controller/reconcile/reconcile.h"

struct tm_power_node;
struct power_run;

struct tm_power {
    uv_loop_t *loop;
    struct tm_calls *calls;    /* its cfg, pool, epoch, clock and closing; store writes count in flight */
    struct tm_power_node *nodes;
    size_t nnodes, cap;
    struct tm_power_hold *copy; /* what tm_power_holds last handed out */
    unsigned running;           /* commands whose handles are open */
    struct power_run *runs;     /* those commands */
};

/* Copy of the holds for a pass (valid until the next call); returns how
 * many, *ret the array (NULL when none or out of memory). */
size_t tm_power_holds(struct tm_power *pw, const struct tm_power_hold **ret);

/* Carry out the plan's power ops (after its commit, or for a plan with no
 * actions).  Nothing while closing. */
void tm_power_start(struct tm_power *pw, const struct tm_rc_plan *plan);

/* Kill the commands still running and close their handles (the node
 * stays suspending or resuming; the next leader's passes settle it). */
void tm_power_close(struct tm_power *pw);
/* Free what is left once the loop has ended. */
void tm_power_release(struct tm_power *pw);

#endif
