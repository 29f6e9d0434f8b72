/*
 * controller/sched/quota_internal.h: the quota model's and a pass's usage
 * as the quota_*.c files share them; callers use quota.h.
 */
#ifndef TM_SCHED_QUOTA_INTERNAL_H
#define TM_SCHED_QUOTA_INTERNAL_H

#include "controller/sched/quota.h"

struct tm_quota {
    size_t nnodes;   /* teams and orgs, the no-quota team last */
    size_t nflavors;
    char **names;    /* per node */
    int32_t *parent; /* per node: its org, -1 the fleet */
    bool *is_org;
    double *weight;
    /* Per node x flavor, [node * nflavors + flavor]. */
    int64_t *own;     /* guaranteed, the node's own */
    int64_t *subtree; /* own plus its teams' */
    int64_t *borrow_limit;
    int64_t *lend_limit;
    /* Per flavor. */
    char **flavor_names;
    int64_t *fleet;
    int64_t *free_pool;  /* fleet GPUs under no quota */
    int64_t *overcommit; /* quotas above the fleet */
    bool *np_borrow;
    int64_t *quota_total; /* per node: subtree quota over all flavors */
    int64_t quota_sum;    /* over the top-level nodes */
};

struct tm_quota_usage {
    const struct tm_quota *q;
    int64_t *used;      /* per node x flavor: GPUs its subtree runs */
    int64_t *queued;    /* per team x flavor: GPUs its queued jobs ask */
    bool *reclaimed;    /* per node x flavor: its quota was reclaimed this pass */
    bool *stopped;      /* per running job: a victim of this pass */
    size_t nrunning;
    /* Scratch for the flows (struct quota_flow), per node: the reason the
     * functions that only read a usage still may not share one between
     * threads. */
    int64_t *over;
    int64_t *spare;
    int64_t *acc;             /* per node: what it lends (tm_quota_lent()) */
    struct offer_row *rows;   /* 2 x (nodes + 1): offers of a level, sorted */
};

/* One offer of idle quota at a level: node -1 is the free pool. */
struct offer_row {
    int32_t node;
    int64_t gpus;
};

/* Each node's flow for one flavor: how far its subtree runs above what
 * its own quota and its teams' lending cover (over), and the idle quota it
 * offers the level above (spare); the fleet's shortfall is what the
 * borrowing asks beyond the free pool and the top nodes' spare.  lend:
 * the offer to new borrowers (idle quota its owner's queue wants, or that
 * this pass reclaimed, is not offered) rather than what holds now. */
struct quota_flow {
    int64_t *over;  /* per node */
    int64_t *spare; /* per node */
    int64_t shortfall;
};

static inline size_t quota_at(const struct tm_quota *q, int32_t node, int32_t flavor)
{
    return (size_t)node * q->nflavors + (size_t)flavor;
}

/* Flows of flavor f with `delta` GPUs added to team's usage (team -1:
 * none).  over and spare have room for q->nnodes. */
void quota_flow(const struct tm_quota_usage *u, int32_t flavor, int32_t team, int64_t delta,
                bool lend, struct quota_flow *fl);
/* How far the flows break the limits along team's chain: the team's and
 * its org's borrowing above their limits, plus the fleet's shortfall. */
int64_t quota_excess(const struct tm_quota *q, int32_t flavor, int32_t team,
                     const struct quota_flow *fl);

#endif
