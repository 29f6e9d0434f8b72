/*
 * core/sched_policies.h: the scheduling policies, one row each, as data.
 *
 * X(ID, name) gives the enum value TM_POLICY_<ID> (controller/sched/
 * scheduler.h), the name configurations and replays use, and the policy's
 * file, controller/sched/<name>.c, which fills the hooks of struct
 * sched_policy in sched_<name>.  The rows live here, below sched/, so that
 * the configuration loader (core/config.c) checks scheduler.policy against
 * the same list the scheduler's table is built from, without including
 * anything above core/.  Adding a policy is that file and one row here.
 */
#ifndef TM_SCHED_POLICIES_H
#define TM_SCHED_POLICIES_H

#define TM_SCHED_POLICIES(X)                                                        \
    X(FIFO, fifo)         /* strict submit order, first-fit, head blocks: baseline */ \
    X(BACKFILL, backfill) /* FIFO + EASY backfill on estimates: baseline */           \
    X(TARMAC, tarmac)     /* the product: see controller/sched/tarmac.c */        \
    X(MULTIFACTOR, multifactor) /* EASY on Slurm's multifactor priority: baseline */

#endif
