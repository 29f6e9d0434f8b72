/*
 * controller/replay/replay_pass.h: the time replay's pass objects (struct
 * replay_pass, replay_engine.h), one per file: replay.c picks the one a
 * configuration runs.  Not for other folders.
 */
#ifndef TM_REPLAY_PASS_H
#define TM_REPLAY_PASS_H

#include "controller/replay/replay_engine.h"

/* fifo, incremental: the queue head and a few behind it (replay_fifo.c). */
extern const struct replay_pass replay_pass_fifo;
/* EASY backfill, incremental: the prefix and the jobs that could still
 * start (replay_backfill.c). */
extern const struct replay_pass replay_pass_backfill;
/* tarmac, incremental: a head of its order proven to decide as the whole
 * queue would (replay_tarmac.c). */
extern const struct replay_pass replay_pass_tarmac;
/* Any policy over the whole queue: multifactor, the reference
 * (--full-pass), and what the others decline (replay_whole.c).  The
 * oracle is tarmac told every runtime: tarmac's pass. */
extern const struct replay_pass replay_pass_whole_queue;

#endif
