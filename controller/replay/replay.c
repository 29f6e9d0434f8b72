/*
 * controller/replay/replay.c: time-mode replay (see replay.h).
 *
 * Virtual time only: the clock jumps from event to event.  Between two
 * events the replay integrates what the figures need (GPU milli allocated,
 * free GPU milli of each model while some queued job could use it).  After
 * the events of an instant it runs one tm_sched_run() pass, the pass the live
 * controller runs, and starts what it placed.
 *
 * Estimates: with --estimates exact, the scheduler sees each job's true
 * runtime (an upper bound for backfill); by default it sees the predictor's
 * answer (controller/sched/estimate.h) from the runtimes of jobs finished earlier
 * in the replay, nothing from the future.  A running job that passes its
 * estimate gets tm_estimate_overrun() before the next pass.
 *
 * The state is struct replay_engine (replay_internal.h); the incremental EASY
 * backfill pass is replay_backfill.c, the rest (events, accounting, the
 * footprint the passes are handed, fifo's and the whole-queue passes, the
 * figures) is here: one event loop over one struct.
 */
#include "controller/replay/replay.h"

#include <math.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "controller/replay/replay_pass.h"
#include "core/err.h"

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* ---------- policy names: the scheduler's, then the oracle ---------- */

const char *tm_replay_policy_name(int p)
{
    if (p == TM_REPLAY_ORACLE)
        return "oracle";
    return tm_sched_policy_name((enum tm_sched_policy)p);
}

int tm_replay_policy_parse(const char *name)
{
    if (name && strcmp(name, "oracle") == 0)
        return TM_REPLAY_ORACLE;
    return tm_sched_policy_parse(name);
}

/* The scheduler's rows, as policy.c lists them, then the oracle. */
#define REPLAY_LISTED(id, name) ", " #name
static const char replay_policy_list[] = TM_SCHED_POLICIES(REPLAY_LISTED) ", oracle";
#undef REPLAY_LISTED

const char *tm_replay_policy_list(void)
{
    return replay_policy_list + 2;
}

/* The first pass that takes the configuration: the incremental ones
 * decline what they cannot prove equal to the whole-queue pass, which
 * takes any. */
static const struct replay_pass *const replay_passes[] = {
    &replay_pass_fifo, &replay_pass_backfill, &replay_pass_tarmac, &replay_pass_whole_queue};

static int pass_pick(struct replay_engine *s)
{
    /* Quotas and fair share need the whole queue at every pass (its
     * demand, its priorities). */
    if (s->cfg->teams && s->cfg->teams->rule != TM_REPLAY_TEAMS_MEASURE) {
        s->pass = &replay_pass_whole_queue;
        return replay_pass_whole_queue.init(s, &s->ps) < 0 ? TM_ENOMEM : 0;
    }
    for (size_t k = 0; k < sizeof(replay_passes) / sizeof(replay_passes[0]); k++) {
        void *ps = NULL;
        int r = replay_passes[k]->init(s, &ps);
        if (r < 0)
            return r;
        if (r > 0) {
            s->pass = replay_passes[k];
            s->ps = ps;
            return 0;
        }
    }
    return TM_EINVAL; /* unreached: the whole-queue pass takes any */
}

int tm_replay_time(const struct tm_trace *t, const struct tm_replay_config *cfg,
                   struct tm_replay_stats *ret)
{
    struct replay_engine s = {0};
    struct tm_replay_stats st = {0};
    double t0 = now_s();
    int r = replay_engine_setup(&s, t, cfg, &st);

    if (r == 0)
        r = pass_pick(&s);
    if (r == 0)
        r = replay_engine_run(&s, &st);
    if (r == 0)
        r = replay_engine_figures(&s, &st);
    if (r == 0) {
        st.wall_s = now_s() - t0;
        st.events_per_s = st.wall_s > 0 ? (double)st.events / st.wall_s : 0;
        *ret = st;
    }
    replay_engine_release(&s);
    return r;
}
