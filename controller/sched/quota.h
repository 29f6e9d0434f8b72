/*
 * controller/sched/quota.h: team GPU quotas, a pure module of the scheduler.
 *
 * The live controller and the replay call the same functions, so a replay
 * figure about quotas is a figure about the controller.  Nothing here reads
 * a clock, does I/O or keeps state between calls beyond the objects the
 * caller holds.  docs/quotas.md says what is guaranteed and what is lent.
 *
 * The model is a tree of two levels under the fleet: orgs, then teams (a
 * team with no org hangs from the fleet directly).  Every node has, per
 * flavor (a GPU model or pool group, a string key):
 *   - a guaranteed quota N (whole GPUs, >= 0): its own;
 *   - a borrowing limit: how far above its subtree's quota S (N plus its
 *     children's S) its subtree may run on others' idle quota
 *     (TM_QUOTA_UNLIMITED by default);
 *   - a lending limit: how much of its subtree's idle quota the others may
 *     use (TM_QUOTA_UNLIMITED: all of it, the default).
 * GPUs of the fleet under no quota are a free pool anyone may borrow.  A
 * team borrows first inside its org (the org's own quota, then its
 * siblings' idle quota), then from the fleet (the free pool, other orgs'
 * and org-less teams' idle quota) within its org's borrowing limit.
 *
 * One pass, as the scheduler or replay runs it:
 *
 *   tm_quota_build(flavors, rows) -> q            (once per quota change)
 *   tm_quota_usage_new(q, running, queued) -> u   (once per pass)
 *   for each queued job, in the scheduler's order:
 *       tm_quota_admit(q, u, job, &ans)
 *       WITHIN / BORROW: place it; if placed, tm_quota_take(q, u, job, &ans)
 *       RECLAIM: tm_quota_reclaim(q, u, running, job, &budget, victims)
 *                stop the victims, the job waits for their GPUs
 *       WAIT: skip it, ans.why says why
 *   tm_quota_usage_free(u)
 */
#ifndef TM_SCHED_QUOTA_H
#define TM_SCHED_QUOTA_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* A borrowing or lending limit that does not bind. */
#define TM_QUOTA_UNLIMITED INT64_MAX
/* The lenders an answer names at most (the rest are summed in the last). */
#define TM_QUOTA_LENDERS_MAX 8
/* Room for an error or a `why` line. */
#define TM_QUOTA_WHY_MAX 200

/* A flavor the fleet has: the keys quotas may name. */
struct tm_quota_flavor {
    const char *name;
    int64_t fleet_gpus;  /* GPUs of this flavor in the fleet */
    /* The pool lets work that is neither preemptible nor checkpointable
     * borrow; such work is then never reclaimed (the lender waits). */
    bool nonpreemptible_borrow;
};

/* One quota as an admin gave it (the API's body, a YAML file's entry):
 * the numbers as given, so that build can name a fractional or negative
 * one.  A name that another row gives as its org is an org; its own row,
 * if any, gives the org's own quota. */
struct tm_quota_row {
    const char *team;       /* team or org */
    const char *org;        /* NULL or "": none */
    const char *flavor;
    double gpus;            /* guaranteed, whole, >= 0 */
    double borrowing_limit; /* NAN: unlimited */
    double lending_limit;   /* NAN: all of the idle quota */
    double weight;          /* fair-share weight, > 0; NAN: 1 */
};

struct tm_quota;

/*
 * Validate the rows against the flavors and build the model.  0 and *ret
 * (release with tm_quota_free()); TM_EINVAL with err naming the row and
 * field ("quotas[2].gpus: 1.5 is not a whole number of GPUs"), *ret left
 * alone; or TM_ENOMEM.  Refused: a negative or fractional count or limit,
 * an unknown flavor, the same team and flavor twice, a team in two orgs,
 * an org that contains itself or a cycle of orgs, more than two levels, a
 * weight <= 0.  Accepted: quotas adding up to more than the fleet (see
 * tm_quota_overcommit()).
 */
int tm_quota_build(const struct tm_quota_flavor *flavors, size_t nflavors,
                   const struct tm_quota_row *rows, size_t nrows, struct tm_quota **ret,
                   char *err, size_t errlen);
void tm_quota_free(struct tm_quota *q);

/* Teams and orgs (the nodes) are numbered 0..tm_quota_nnodes()-1, in the
 * order their names first appear in the rows.  One extra team, named
 * TM_QUOTA_NO_TEAM, with no quota, stands for every job of a team that
 * has no quota: such work only borrows and may be reclaimed. */
#define TM_QUOTA_NO_TEAM "(no quota)"
size_t tm_quota_nnodes(const struct tm_quota *q);
size_t tm_quota_nflavors(const struct tm_quota *q);
const char *tm_quota_name(const struct tm_quota *q, int32_t node);
const char *tm_quota_flavor_name(const struct tm_quota *q, int32_t flavor);
bool tm_quota_is_org(const struct tm_quota *q, int32_t node);
/* The node's org, -1 when it hangs from the fleet. */
int32_t tm_quota_parent(const struct tm_quota *q, int32_t node);
/* A team's index: the TM_QUOTA_NO_TEAM team for NULL or an unknown name,
 * -1 for an org's name (orgs run no jobs). */
int32_t tm_quota_team(const struct tm_quota *q, const char *name);
/* A flavor's index, -1 unknown. */
int32_t tm_quota_flavor(const struct tm_quota *q, const char *name);
/* The node's own guaranteed quota, and its subtree's (own plus teams'). */
int64_t tm_quota_guaranteed(const struct tm_quota *q, int32_t node, int32_t flavor);
int64_t tm_quota_subtree(const struct tm_quota *q, int32_t node, int32_t flavor);
/* GPUs by which the quotas of a flavor exceed the fleet's, 0 when they
 * fit; and the sum over flavors, for the one line said at start and in
 * `quota show`. */
int64_t tm_quota_overcommit(const struct tm_quota *q, int32_t flavor);
int64_t tm_quota_overcommit_total(const struct tm_quota *q);
/* That line, "quotas exceed the fleet: H100 by 16 GPUs, A100 by 4 GPUs",
 * or "" when they fit; returns its length (truncated to len - 1). */
size_t tm_quota_overcommit_say(const struct tm_quota *q, char *buf, size_t len);

/* A job as quotas see it, running or queued. */
struct tm_quota_job {
    int32_t team;      /* tm_quota_team() */
    int32_t flavor;    /* tm_quota_flavor(); a job on no quota'd flavor is
                        * not the module's business: the caller skips it */
    int64_t gpus;      /* whole GPUs, over all its nodes */
    bool borrowed;     /* running: admitted as TM_QUOTA_BORROW */
    bool preemptible;
    bool checkpointable;
    int64_t redo_gpu_ms; /* running: GPU-time since its last checkpoint or
                          * start, redone if it is stopped */
};

/*
 * Mark the running jobs (flavor >= 0) past their team's own quota as
 * borrowed: per team and flavor, oldest first (started_ms, then ids) fill
 * the quota, and those past it are borrowed.  What the caller remembers of
 * how a job was admitted is not needed: the newest work above a quota is
 * the work that was lent.  0 or TM_ENOMEM.
 */
int tm_quota_mark_borrowed(const struct tm_quota *q, struct tm_quota_job *running, size_t n,
                           const int64_t *started_ms, const int64_t *ids);

/* The usage of one pass: what runs per node and flavor, what the queue
 * still wants within quota, and the pass's reclaims.  Held by the caller
 * for one pass. */
struct tm_quota_usage;

/*
 * Sum the running jobs and the queued jobs' demand (queued may be NULL).
 * A team's idle quota that its own queued jobs want is not lent: the owner
 * comes first, so quota freed by a reclaim is not lent again to another
 * borrower before the owner's job starts.  0, TM_EINVAL (a team or flavor
 * out of range, gpus < 0) or TM_ENOMEM.
 */
int tm_quota_usage_new(const struct tm_quota *q, const struct tm_quota_job *running,
                       size_t nrunning, const struct tm_quota_job *queued, size_t nqueued,
                       struct tm_quota_usage **ret);
void tm_quota_usage_free(struct tm_quota_usage *u);
/* GPUs the node's subtree runs of a flavor, and how many of them are above
 * its subtree's quota (borrowed); for `quota show` and /metrics. */
int64_t tm_quota_used(const struct tm_quota_usage *u, int32_t node, int32_t flavor);
int64_t tm_quota_borrowing(const struct tm_quota_usage *u, int32_t node, int32_t flavor);
/* Idle quota of the node (a team's, or an org's lent outside it) that
 * others run on now: the borrowing of each level taken from the offers in
 * the order a new borrower's is (tm_quota_admit()'s lenders). */
int64_t tm_quota_lent(const struct tm_quota_usage *u, int32_t node, int32_t flavor);

enum tm_quota_verdict {
    TM_QUOTA_WITHIN,  /* within its team's quota: start it */
    TM_QUOTA_BORROW,  /* on others' idle quota: start it, mark it borrowed */
    TM_QUOTA_RECLAIM, /* within its team's quota, which others hold: reclaim */
    TM_QUOTA_WAIT,    /* waits on quota: why says on what */
};
const char *tm_quota_verdict_name(enum tm_quota_verdict v);

/* Whose idle quota a borrowing job runs on: node -1 is the free pool. */
struct tm_quota_lender {
    int32_t node;
    int64_t gpus;
};

struct tm_quota_answer {
    enum tm_quota_verdict verdict;
    int64_t borrowed_gpus; /* above its team's quota */
    struct tm_quota_lender lenders[TM_QUOTA_LENDERS_MAX];
    size_t nlenders;
    /* WAIT and RECLAIM: "waits on quota: team a uses 16 of 16 GPUs of
     * H100; borrowing limit 8 reached"; others: what it runs on. */
    char why[TM_QUOTA_WHY_MAX];
};

/* May the queued job start now, and as what.  The usage is not changed.
 * 0, or TM_EINVAL for a job whose team or flavor is out of range. */
int tm_quota_admit(const struct tm_quota *q, const struct tm_quota_usage *u,
                   const struct tm_quota_job *job, struct tm_quota_answer *ans);
/* The job admitted by ans started: count it (and no longer as queued). */
void tm_quota_take(const struct tm_quota *q, struct tm_quota_usage *u,
                   const struct tm_quota_job *job, const struct tm_quota_answer *ans);

/* A running borrowed job to stop so that a team gets its quota back. */
struct tm_quota_victim {
    int32_t running;     /* index into the running jobs of tm_quota_usage_new() */
    int32_t for_team;    /* the team whose quota it held */
    bool checkpoint;     /* checkpointed before it stops: nothing redone */
    int64_t redo_gpu_ms; /* GPU-time redone: 0 when checkpointed */
};

/*
 * The job got TM_QUOTA_RECLAIM: choose the running borrowed jobs to stop,
 * checkpointable ones first, then preemptible ones by least GPU-time
 * redone; never one that is neither, never one whose team would not be
 * borrowing, at most *budget of them (the pass's disruption budget, which
 * is decreased).  running and nrunning are those given to
 * tm_quota_usage_new().  The victims are counted as stopped in u, and the
 * team's idle quota of that flavor is lent to nobody else for the rest of
 * the pass.  When the budget stops the choice before the job's quota is
 * free, the victims chosen still stop (the job's quota is freed over the
 * next passes; its queued demand keeps it from being lent meanwhile) and
 * *complete is false.  Returns the number of victims written to out
 * (room for *budget of them), 0 with why set when none can be reclaimed,
 * or TM_EINVAL.
 */
int tm_quota_reclaim(const struct tm_quota *q, struct tm_quota_usage *u,
                     const struct tm_quota_job *running, size_t nrunning,
                     const struct tm_quota_job *job, int32_t *budget,
                     struct tm_quota_victim *out, bool *complete, char *why, size_t whylen);

/*
 * Fair share beyond quota.  Usage is GPU-milliseconds decayed with a
 * half-life (Slurm's PriorityDecayHalfLife): over dt in which a team ran r
 * GPUs, usage' = usage * 2^(-dt/h) + r * integral_0^dt 2^(-(dt-s)/h) ds,
 * the exact value, so that advancing by a then b equals advancing by a+b.
 * usage and running_gpus have one entry per node (orgs are ignored).
 * half_life_ms <= 0: no decay (plain sum).
 */
void tm_quota_share_advance(const struct tm_quota *q, double *usage, const int64_t *running_gpus,
                            int64_t dt_ms, int64_t half_life_ms);
/* usage * 2^(-dt/h): the decay alone. */
double tm_quota_decay(double usage, int64_t dt_ms, int64_t half_life_ms);
/* The order among teams competing for spare capacity: < 0 when team a
 * goes before team b.  Lower usage / (weight x quota share) first, where a
 * team's quota share is its quota over all flavors divided by the sum of
 * all teams' quotas; teams with no quota after every team with one, among
 * themselves by usage / weight; then by index. */
int tm_quota_fair_cmp(const struct tm_quota *q, const double *usage, int32_t a, int32_t b);
/* The key itself, usage / (weight x share); +inf for a team of no quota. */
double tm_quota_fair_key(const struct tm_quota *q, const double *usage, int32_t team);

/* Whole-GPU quotas in proportion to weights (each team's GPU-hours in a
 * trace, say), adding up to gpus exactly: the floor of each share, then
 * one more GPU each by largest remainder, ties to the earlier.  A weight
 * <= 0 gets 0; all of them <= 0: all 0. */
void tm_quota_proportional(const double *weights, size_t n, int64_t gpus, int64_t *out);

#endif
