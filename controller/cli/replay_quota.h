/*
 * controller/cli/replay_quota.h: `tarmac replay --quotas FILE|proportional`
 * (replay_quota.c): the trace replayed under each team policy in one
 * process, figures per policy and per team.  Called by replay.c only.
 */
#ifndef TM_CLI_REPLAY_QUOTA_H
#define TM_CLI_REPLAY_QUOTA_H

#include <stdbool.h>
#include <stdint.h>
#include <cjson/cJSON.h>

#include "controller/replay/replay.h"

struct replay_quota_opts {
    const char *quotas;      /* a YAML file, or "proportional" */
    const char *policies;    /* NULL: all four */
    const char *borrowers;   /* checkpointable (default) | preemptible */
    int64_t half_life_ms;    /* fair share's decay */
    int64_t bound_ms;        /* the reclaim bound guarantee_met is judged by */
    bool json;
};

/* Is name one of the team policies (strict-quota, shared, fairshare, tarmac)? */
bool replay_quota_policy_known(const char *name);
/* The replays, printed (a table unless json) and added to results.  base:
 * the replay's configuration but for the policy and teams.  0, TM_EINVAL
 * (a bad --quotas or --policy: said on stderr) or TM_ENOMEM. */
int replay_quota_run(const struct replay_quota_opts *qo, const struct tm_trace *t,
                     const struct tm_replay_config *base, cJSON *results);

#endif
