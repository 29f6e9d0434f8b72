/*
 * controller/daemon/decision_log.h: the log lines of a pass's plan, one per action,
 * written so that a standing state is said once.
 *
 * Most actions happen once (a placement, a launch).  Four describe a state
 * that lasts over many passes: "wait" (a job held), "budget" (a launch or
 * job refused by a cap), "launch_refused" (a pool at its maximum, no
 * capacity) and "silence_hold" (a provider's nodes silent at once).  With
 * thousands of jobs held by a hard cap, a line for each on every tick
 * filled 80 MB of log in three minutes.  So a standing action is
 * logged at info only when it was not in the previous pass's plan (the same
 * op, kind, key and subject), at debug otherwise; the decisions table keeps
 * its own rules (tarmac_apply).
 */
#ifndef TM_DECISION_LOG_H
#define TM_DECISION_LOG_H

#include <stddef.h>

#include <cjson/cJSON.h>

struct tm_decision_log {
    char **prev;   /* the previous pass's standing actions, sorted */
    size_t nprev;
};

/* Log every action of a plan's "actions" array; remember its standing ones. */
void tm_decision_log_write(struct tm_decision_log *l, const cJSON *actions);
void tm_decision_log_release(struct tm_decision_log *l);

#endif
