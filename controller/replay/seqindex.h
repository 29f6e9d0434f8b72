/*
 * controller/replay/seqindex.h: items in a fixed order (the replay's
 * arrival order), split into groups, each item holding a value; "the
 * first item of group g at or after position p whose value is at most T"
 * in O(log n).
 *
 * The time replay's incremental backfill pass (replay.c, pass_backfill())
 * keeps one per request shape and preemptibility, valued by the queued
 * job's estimate (TM_SEQ_ABSENT once it leaves the queue), to find the few
 * queued jobs of a shape that a pass could start without walking the
 * queue.  Private to controller/replay/.
 */
#ifndef TM_REPLAY_SEQINDEX_H
#define TM_REPLAY_SEQINDEX_H

#include <stddef.h>
#include <stdint.h>

/* An item not in the set (never arrived, or left the queue). */
#define TM_SEQ_ABSENT INT64_MAX
/* The largest value a present item may hold. */
#define TM_SEQ_MAX (INT64_MAX - 1)

struct tm_seqindex {
    size_t n;          /* items, positions 0..n */
    size_t ngroups;
    int32_t *group;    /* per position: its group */
    int32_t *slot;     /* per position: its index within the group */
    int32_t *moff;     /* per group: first index into members (ngroups + 1) */
    int32_t *members;  /* the groups' positions, ascending within each */
    size_t *toff;      /* per group: its min-tree in tree[] */
    int32_t *tsize;    /* per group: leaves, a power of two */
    int64_t *tree;
};

/* group[p] for every position p < n; every value starts TM_SEQ_ABSENT.
 * Returns 0 or TM_ENOMEM (x is then released). */
int tm_seqindex_init(struct tm_seqindex *x, const int32_t *group, size_t n, size_t ngroups);
void tm_seqindex_release(struct tm_seqindex *x);
void tm_seqindex_set(struct tm_seqindex *x, size_t pos, int64_t v);
/* The first position >= from in group g whose value is <= t, or -1. */
int64_t tm_seqindex_next(const struct tm_seqindex *x, size_t g, size_t from, int64_t t);
/* The same by slot (a member's index within its group), for a walk
 * through one group without a search per step: the first slot of group g
 * whose position is >= from; the first slot >= slot whose value is <= t,
 * or -1; a slot's position. */
int32_t tm_seqindex_slot_at(const struct tm_seqindex *x, size_t g, size_t from);
int32_t tm_seqindex_next_slot(const struct tm_seqindex *x, size_t g, int32_t slot, int64_t t);
/* The least value in group g (TM_SEQ_ABSENT when it has none present). */
static inline int64_t tm_seqindex_min(const struct tm_seqindex *x, size_t g)
{
    return x->tree[x->toff[g] + 1];
}
static inline int64_t tm_seqindex_pos(const struct tm_seqindex *x, size_t g, int32_t slot)
{
    return x->members[x->moff[g] + slot];
}

#endif
