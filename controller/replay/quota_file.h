/*
 * controller/replay/quota_file.h: the time replay's team quotas, from a
 * YAML file (`tarmac replay --quotas FILE`) or in proportion to each
 * team's GPU-hours in the trace (`--quotas proportional`), as rows for
 * tm_quota_build() (controller/sched/quota.h) under one flavor, the
 * replay's GPUs.
 *
 * The file is a list of entries:
 *   - team: a          (required: a team, or an org another entry names)
 *     gpus: 64         (required: the guaranteed GPUs)
 *     borrowing_limit: 32   (optional, default unlimited)
 *     lending_limit: 16     (optional, default all of the idle quota)
 *     org: research         (optional)
 */
#ifndef TM_REPLAY_QUOTA_FILE_H
#define TM_REPLAY_QUOTA_FILE_H

#include <stddef.h>
#include <stdint.h>

#include "controller/replay/trace.h"
#include "controller/sched/quota.h"

/* The one flavor the replay's quotas are under. */
#define TM_REPLAY_QUOTA_FLAVOR "gpu"

struct tm_replay_quota_rows {
    struct tm_quota_row *rows;
    size_t n;
};

/* 0 and *ret (release with tm_replay_quota_rows_release()); TM_EINVAL with
 * err "FILE:LINE: quotas[2].gpus: ..." naming the entry and the field;
 * -errno when it cannot be opened; TM_ENOMEM. */
int tm_replay_quota_rows_load(const char *path, struct tm_replay_quota_rows *ret, char *err,
                              size_t errlen);
/* A quota per team of the trace, in proportion to its GPU-hours (the
 * jobs' runtime x GPUs, gangs counted whole), adding up to gpus
 * (tm_quota_proportional()).  0, TM_EINVAL (no job names a team) or
 * TM_ENOMEM. */
int tm_replay_quota_rows_proportional(const struct tm_trace *t, int64_t gpus,
                                      struct tm_replay_quota_rows *ret);
/* The same rows with no borrowing (borrowing_limit 0 on every row):
 * strict quotas.  0 or TM_ENOMEM. */
int tm_replay_quota_rows_strict(const struct tm_replay_quota_rows *in, struct tm_replay_quota_rows *ret);
void tm_replay_quota_rows_release(struct tm_replay_quota_rows *r);

#endif
