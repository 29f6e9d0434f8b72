/*
 * controller/replay/replay_whole.c: the time replay's pass over the whole
 * queue (a struct replay_pass, replay_engine.h), for any policy: the
 * reference the incremental passes are compared with (--full-pass), and
 * multifactor, whose order moves as jobs age.  It keeps no state.
 */
#include "controller/replay/replay_pass.h"

/* Its state is the engine itself. */
static int whole_init(struct replay_engine *e, void **state)
{
    *state = e;
    return 1;
}

static int whole_run(void *state, int64_t now, struct tm_replay_stats *st, size_t narrived)
{
    struct replay_engine *e = state;

    (void)narrived;
    replay_ends_refresh(e, now);
    return replay_pass_whole(e, now, st);
}

const struct replay_pass replay_pass_whole_queue = {
    .name = "whole",
    .init = whole_init,
    .run = whole_run,
};
