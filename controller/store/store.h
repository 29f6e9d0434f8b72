/*
 * controller/store/store.h: the controller's reads and writes, asynchronous on the
 * connection pool (controller/io/pg_uv.h).  Every statement is parameterised or
 * a parameterless script; the write paths are the functions of
 * migrations/0002_apply.sql, so each is one statement and one transaction.
 */
#ifndef TM_STORE_H
#define TM_STORE_H

#include <stdint.h>

#include <cjson/cJSON.h>
#include <libpq-fe.h>

#include "controller/reconcile/live_forecast.h"
#include "controller/io/pg_uv.h"
#include "controller/reconcile/reconcile.h"
#include "core/config.h"

/* status 0 and a snapshot the callee owns (release with
 * tm_snapshot_release), or a negative status with err. */
typedef void (*tm_store_snapshot_cb)(int status, struct tm_snapshot *snap, const char *err,
                                     void *data);
/* result: tarmac_apply's answer ({"applied","skipped","nodes":[{"id","token"}]}),
 * valid during the callback; sqlstate "TM001" means the epoch was stale. */
typedef void (*tm_store_apply_cb)(int status, const cJSON *result, const char *err,
                                  const char *sqlstate, void *data);
typedef void (*tm_store_done_cb)(int status, const char *err, void *data);

/* Read one consistent snapshot (REPEATABLE READ, READ ONLY). */
int tm_store_snapshot(struct tm_pg_pool *pool, const struct tm_config *cfg,
                      tm_store_snapshot_cb cb, void *data);
void tm_snapshot_release(struct tm_snapshot *snap);

/* Apply a plan's actions (a cJSON array) under the leader epoch. */
int tm_store_apply(struct tm_pg_pool *pool, int64_t epoch, int64_t now_ms, const cJSON *actions,
                   tm_store_apply_cb cb, void *data);

/* A node's report of finished jobs: the node agent path (the sim agent and
 * the HTTP heartbeat endpoint both come here). */
int tm_store_agent_report(struct tm_pg_pool *pool, int64_t node_id, int64_t now_ms,
                          const cJSON *report, tm_store_done_cb cb, void *data);

/* Append to the spend ledger what billed nodes cost since their last
 * accrual (tarmac_accrue in migrations/0003_ledger.sql), under the epoch. */
int tm_store_accrue(struct tm_pg_pool *pool, int64_t epoch, int64_t now_ms, tm_store_done_cb cb,
                    void *data);

/* The cloud accepted a launch: record the instance id and start billing. */
int tm_store_node_launched(struct tm_pg_pool *pool, int64_t node_id, const char *instance_id,
                           int64_t now_ms, tm_store_done_cb cb, void *data);

/* A node's enrollment secret for one launch attempt: only its hash
 * (tm_token_hash), valid until expires_ms and once (agent_enrollments,
 * migrations/0010_agent.sql).  Written before the cloud call. */
int tm_store_enrollment_add(struct tm_pg_pool *pool, int64_t node_id, const char *hash,
                            int64_t now_ms, int64_t expires_ms, tm_store_done_cb cb, void *data);

/* Delete at most batch gpu_samples rows older than before_ms and at most
 * batch dated after after_ms (tarmac_prune_samples, 0018): the leader's
 * tick bounds their retention whatever their date. */
int tm_store_prune_samples(struct tm_pg_pool *pool, int64_t before_ms, int64_t after_ms, int batch,
                           tm_store_done_cb cb, void *data);

/* The demand each pool saw lately, read back so that a new leader's
 * forecasters start with their seasons learned (tm_live_forecast_warm()):
 * one span per job live now or finished at or after since_ms, wanting its
 * GPUs from submission until it finished, in the pool of the node it ran
 * on last or, never started, the pool the planner routes it to.  spans
 * are valid only during the callback. */
typedef void (*tm_store_demand_history_cb)(int status, const char *err,
                                           const struct tm_demand_span *spans, size_t n,
                                           void *data);
int tm_store_demand_history(struct tm_pg_pool *pool, const struct tm_config *cfg, int64_t since_ms,
                            tm_store_demand_history_cb cb, void *data);

/* Leadership on a dedicated connection: try the session advisory lock and,
 * when it is ours, bump the epoch and take the lease for lease_ms.  cb gets status 0 with *epoch > 0 when
 * we lead, 0 with epoch 0 when someone else does.  latest_ms is then the
 * newest controller time stored (tarmac_latest_ms(), at least now_ms): an
 * accelerated clock moves up to it before the new leader's first pass. */
typedef void (*tm_store_leader_cb)(int status, int64_t epoch, int64_t latest_ms, const char *err,
                                   void *data);
int tm_store_try_lead(struct tm_pg *conn, const char *holder, int64_t now_ms, int64_t lease_ms,
                      tm_store_leader_cb cb, void *data);

/* The lease (migrations/0011_lease.sql): the leader renews it for lease_ms
 * in the same statement as its tick's writes (the _renew forms; lease_ms 0
 * renews nothing, for writes outside the tick).  A replica that finds the
 * lock held asks tm_store_break_lease(): when the lease has expired, the
 * holder's session is ended (pg_terminate_backend) and cb gets how many
 * sessions went (0: the lease is live, or nobody held the lock). */
int tm_store_apply_renew(struct tm_pg_pool *pool, int64_t epoch, int64_t now_ms, int64_t lease_ms,
                         const cJSON *actions, tm_store_apply_cb cb, void *data);
int tm_store_accrue_renew(struct tm_pg_pool *pool, int64_t epoch, int64_t now_ms, int64_t lease_ms,
                          tm_store_done_cb cb, void *data);
typedef void (*tm_store_break_cb)(int status, int ended, const char *err, void *data);
int tm_store_break_lease(struct tm_pg *conn, tm_store_break_cb cb, void *data);

/* Blocking helpers for start-up, before the loop runs. */
/* Connect with a timeout; on failure err says why (no password). */
PGconn *tm_store_connect_blocking(const char *url, char *err, size_t errsize);
/* Refuse a schema older or newer than this binary: TM_ESCHEMA with advice. */
int tm_store_check_schema(PGconn *conn, char *err, size_t errsize);
/* Upsert the configured pools into the pools table. */
int tm_store_sync_pools(PGconn *conn, const struct tm_config *cfg, int64_t now_ms, char *err,
                        size_t errsize);

#endif
