/*
 * controller/daemon/quotas.h: the daemon's side of team quotas: it hands
 * the API the whole-set check (the scheduler's quota model, which the API
 * may not include) and publishes each pass's usage view to it, saying an
 * overcommit once when it appears or changes.
 */
#ifndef TM_DAEMON_QUOTAS_H
#define TM_DAEMON_QUOTAS_H

/* Before the API serves. */
void tm_daemon_quotas_start(void);
/* After each reconcile pass: the plan's quota_view (NULL: none set). */
void tm_daemon_quotas_publish(const char *view_json);

#endif
