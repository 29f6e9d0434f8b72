/*
 * controller/sched/internal.h: what the files of one scheduling pass share.
 *
 * Private to controller/sched/: the pass's context (struct ctx), a node's
 * free capacity (struct nst), a job's need (struct need), a reservation as
 * seen on one node (struct rnode), and the functions one file of the pass
 * calls in another.  scheduler.c owns the pass (tm_sched_run()); every
 * other file works on the struct ctx it is handed and keeps no state.
 */
#ifndef TM_SCHED_INTERNAL_H
#define TM_SCHED_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "controller/sched/scheduler.h"

#define MILLI 1000
#define NO_SLOT (-1)
#define INF_MS INT64_MAX
/* How many entries of one bucket tarmac inspects before giving up on it:
 * bounds the pass when many nodes have GPUs but no CPU or memory left. */
#define SCAN_MAX 256
/* Candidates tarmac scores per (model, free-GPU) bucket. */
#define CAND_PER_BUCKET 4
/* sched_projected_start()'s answers kept per pass (distinct requests). */
#define PROJ_CACHE 32
#define TM_SCHED_GAP_SAFETY 2
/* A job whose models hold at most this fraction (1/N) of the GPUs is
 * narrow: tarmac reserves for it as soon as it is blocked. */
#define TM_SCHED_NARROW_DIV 4
/* How much later a reservation may start to stay off a node that jobs
 * tied to its model wait for. */
#define TM_SCHED_PRESSURE_PENALTY_MS (6LL * 3600 * 1000)
/* Aged narrow jobs: ordered by submit + MUL x estimate, capped (see
 * narrow_shift()). */
#define TM_SCHED_NARROW_SJF_MUL 4
#define TM_SCHED_NARROW_SJF_CAP_MS (12LL * 3600 * 1000)
/* Heavy jobs (whole GPUs >= TM_SCHED_HEAVY_GPUS per node) drain at most
 * 1/TM_SCHED_DRAIN_DIV of the GPUs at a time (at least one job). */
#define TM_SCHED_HEAVY_GPUS 4
#define TM_SCHED_DRAIN_DIV 8
/* A blocked job is at risk when, reserving now, it would start later than
 * its submit time plus the bound less 1/TM_SCHED_RISK_MARGIN_DIV of the
 * bound (sched_at_risk()): 3 h at the default 48 h, about the p95 slip of
 * a reservation on gpuspec33.  A quarter of the bound let every aged heavy
 * job past the drain cap on openb default, and the p95 wait grew. */
#define TM_SCHED_RISK_MARGIN_DIV 16
/* Reservations one tarmac pass holds for heavy jobs not tied to few
 * nodes, jobs at risk aside: one per TM_SCHED_FLEXIBLE_GPUS schedulable
 * GPUs, at least one (tm_sched_tarmac_flexible_limit()); for the other
 * flexible jobs one (tarmac_may_reserve()). */
#define TM_SCHED_FLEXIBLE_GPUS 64

/* Free capacity of one node during the pass. */
struct nst {
    int64_t cpu;
    int64_t mem;
    int16_t free[TM_NODE_GPUS_MAX]; /* milli free per GPU */
    int8_t gpus;
    int8_t full;      /* GPUs with all 1000 milli free */
    int16_t maxfree;  /* largest free[] */
    int32_t mslot;    /* compact model slot */
    int32_t res;      /* reservation record, NO_SLOT if none */
    bool ok;          /* schedulable */
};

/* What a job needs on each of its nodes. */
struct need {
    int64_t cpu;
    int64_t mem;
    uint64_t slots;   /* acceptable model slots (bit per slot) */
    int32_t gpus;     /* whole GPUs */
    int32_t milli;    /* share when gpus == 0; 0 for CPU-only */
    int32_t nodes;
    bool nomatch;     /* no model has a node big enough */
};

/* A reservation as seen on one node. */
struct rnode {
    int32_t job;
    int64_t start;
    int64_t deadline;  /* gap fillers end by this: min(start, first promise) */
    bool closed;       /* tarmac, owner aged: no non-preemptible fillers */
    bool preemptible;
    struct need need;
    int32_t rel[TM_NODE_GPUS_MAX]; /* milli released on this node by start */
    int64_t rel_cpu;
    int64_t rel_mem;
};

/* What the load makes of the nodes as a whole (node_cache.c keeps it). */
struct sched_node_totals {
    uint64_t all_slots;
    int nslots;
    int32_t model_slot[TM_GPU_MODELS_MAX];
    /* per model slot: the largest node, for the no-match test */
    int32_t slot_maxg[TM_GPU_MODELS_MAX];
    int64_t slot_gpus[TM_GPU_MODELS_MAX]; /* GPUs on schedulable nodes */
    int64_t all_gpus;
    int64_t slot_maxcpu[TM_GPU_MODELS_MAX];
    int64_t slot_maxmem[TM_GPU_MODELS_MAX];
    int64_t any_maxcpu, any_maxmem;
    int64_t slot_free[TM_GPU_MODELS_MAX]; /* free GPU milli per model, kept current */
};

struct sched_policy;

struct ctx {
    const struct tm_sched_input *in;
    const struct sched_policy *pol; /* the row of in->policy */
    size_t nn;
    struct nst *ns;
    struct tm_sched_node_cache *ns_cache; /* ns is its (node_cache.c), or NULL */
    struct sched_buckets **kept_buckets;   /* the cache's slot for its buckets, or NULL */
    struct need *needs;
    struct sched_node_totals t;

    /* first-fit tree (fifo, backfill) */
    size_t tsize;
    int8_t *tfull;
    int16_t *tmax;
    int64_t *tcpu;
    int64_t *tmem;
    uint64_t *tmod;

    /* best-fit buckets (tarmac, buckets.c): with a node cache the nodes as
     * loaded in bk and those the pass changed in front lists (whead,
     * phead); without one every node in the lists */
    bool buckets;
    struct sched_buckets *bk; /* the node cache's; NULL: all in the lists */
    uint8_t *fronted;        /* per node: changed in this pass, out of bk */
    int32_t *front;          /* those nodes, nfront of them */
    size_t nfront;
    int32_t *whead; /* nslots * (TM_NODE_GPUS_MAX + 1) */
    uint32_t *wbits; /* nslots: bit k while bucket [slot][k] is not empty */
    int32_t *wnext, *wprev;
    int32_t *phead; /* nslots * MILLI */
    int32_t *pnext, *pprev; /* per node * TM_NODE_GPUS_MAX */
    uint64_t *pbits; /* nslots * 16 words */
    int64_t pressure[TM_GPU_MODELS_MAX]; /* constrained queued demand, milli */
    bool narrow_wants[TM_GPU_MODELS_MAX]; /* a narrow job (narrow()) accepts it */
    bool any_narrow;                      /* some queued job is narrow */
    int64_t strand_cpu, strand_mem;      /* smallest CPU/memory a GPU job asks */
    int32_t strand_share;                /* smallest share a queued job asks */

    /* gang bookkeeping: nodes used by the gang being placed */
    uint32_t *mark;
    uint32_t gen;
    /* best fit: a search for a node stopped at SCAN_MAX with candidates
     * left unread (tm_sched_note.partial) */
    bool scan_cut;
    /* Bumped by every change of what an earliest start reads (capacity,
     * placements, reservations, gaps): sched_projected_start()'s answers
     * keep while it stays. */
    uint64_t version;
    struct proj {
        uint64_t version;   /* 0: empty */
        struct need nd;
        uint64_t model_mask;
        int32_t hold_node;
        bool preemptible;
        int64_t start;
    } proj[PROJ_CACHE];
    int proj_next;

    /* reservation timelines: running allocs by node (reserve.c) */
    bool timeline;
    int32_t *astart;   /* nn + 1 */
    int32_t *aorder;   /* by node; within a node sorted by end once asorted */
    int64_t *aend;     /* per alloc: its expected end, never before now */
    uint8_t *asorted;  /* per node */
    uint8_t *aloaded;  /* per node, with a footprint: its aorder segment read */
    int64_t *gend;     /* per node: the latest end of its GPU holders
                        * (allocs and linked placements) */
    int64_t *gkept;    /* the same but for preemptible allocs on loan */
    int32_t *freenow;  /* nodes with no GPU work but loans past now, as */
    size_t nfreenow;   /* timeline_init() found them (gkept only rises) */
    int32_t *plhead;   /* per node: placements made in this pass */
    int32_t *plnext;   /* per placement */
    size_t plcap_links;
    struct rnode *rn;
    size_t nrn, caprn;

    struct tm_sched_result r;
    size_t capplace, capres, capprm;
    int64_t *node_end; /* align_ends: latest expected end of each node's work */
    uint8_t *late;     /* tarmac: aged tied jobs late anyway (late.c); NULL: none */
    bool loans;        /* tarmac: preemptible work may borrow reserved room */
    bool *evicted;     /* per input alloc, once preempted in this pass */
    int32_t quota_budget; /* tm_sched_quota: reclaims left in this pass */
};

/* The sort key of one queued job: k[] compared in turn, then idx. */
struct okey {
    int64_t k[5];
    int32_t idx;
};

/* What one pass has done so far, for the policy's hooks. */
struct sched_pass {
    int32_t max_reservations; /* blocked jobs that may hold one */
    int32_t nreserved;        /* reservations made so far */
    int32_t first_blocked;    /* first job left waiting without one, -1 */
    int64_t drain_gpus;       /* tarmac: GPUs reserved for heavy jobs */
    int32_t nflexible;        /* tarmac: reservations for jobs not tied to few nodes */
    bool blocked_head;        /* fifo: the queue head did not fit */
    size_t linked;            /* placements linked into the timelines */
};

/*
 * A scheduling policy: how the pass orders the queue, places one job and
 * decides whom to reserve for, and the words of its notes.  One file per
 * policy fills one of these (fifo.c, backfill.c, tarmac.c); the row of
 * TM_SCHED_POLICIES (scheduler.h) names it and gives its enum value, and
 * policy.c puts it in the table.  The pass (scheduler.c) runs, for each
 * job in order:
 *
 *   holds_back? -> place -> placed: why_placed
 *                        -> not: on_blocked? -> may_reserve? -> reserved:
 *                           why_reserved, on_reserved -> else a wait note
 *
 * and finish once after the queue.  Hooks marked optional may be NULL.
 */
struct sched_policy {
    /* Reservations one pass may hold; 0: params.max_reservations, or
     * TM_SCHED_MAX_RESERVATIONS_DEFAULT. */
    int32_t max_reservations;
    /* Builds the capacity index place() needs (sched_tree_init() or
     * sched_buckets_init()) and whatever else the policy reads from the
     * queue.  Returns 0 or TM_ENOMEM. */
    int (*prepare)(struct ctx *c);
    /* The sort key of job j (zeroed, idx set): the pass runs jobs in
     * increasing key order. */
    void (*order)(const struct ctx *c, int32_t j, struct okey *key);
    /* Places job j now, all members or none, respecting the reservations
     * when `respect`.  Returns 1 placed, 0 not, < 0 error; *ret_gap: a
     * member filled a gap before a reservation; *ret_blocked: only a
     * reservation stood in the way somewhere. */
    int (*place)(struct ctx *c, int32_t j, bool respect, bool *ret_gap, bool *ret_blocked);
    /* Optional.  Whether job j must wait without being tried (fifo: the
     * head is blocked); the hook writes its note. */
    bool (*holds_back)(struct ctx *c, int32_t j, const struct sched_pass *ps);
    /* Optional.  Job j did not fit: true when the hook has noted it and
     * the pass goes on to the next job (fifo: the head blocks the queue). */
    bool (*on_blocked)(struct ctx *c, int32_t j, struct sched_pass *ps);
    /* Optional (NULL: never reserve).  Whether blocked job j gets a
     * reservation; asked only while ps->nreserved < ps->max_reservations.
     * Not const: the answer may look at the timelines (tarmac:
     * sched_at_risk()), which are built on first use. */
    bool (*may_reserve)(struct ctx *c, int32_t j, struct sched_pass *ps);
    /* Optional.  Job j got a reservation (ps->nreserved counts it). */
    void (*on_reserved)(const struct ctx *c, int32_t j, struct sched_pass *ps);
    /* The note's text for job j placed now; gap: it fills a gap. */
    const char *(*why_placed)(const struct ctx *c, int32_t j, const struct sched_pass *ps, bool gap);
    /* The note's text for job j reserved by the pass (asked before
     * on_reserved).  Required when may_reserve is set. */
    const char *(*why_reserved)(const struct ctx *c, int32_t j);
    /* Optional.  After the queue.  Returns 0 or < 0 on error. */
    int (*finish)(struct ctx *c, struct sched_pass *ps);
};

#define TM_SCHED_POLICY_DECLARE(id, name) extern const struct sched_policy sched_##name;
TM_SCHED_POLICIES(TM_SCHED_POLICY_DECLARE)
#undef TM_SCHED_POLICY_DECLARE

static inline int popcount64(uint64_t v)
{
    return __builtin_popcountll(v);
}

/* Free capacity and its indexes (capacity.c). */
int sched_grow(void **p, size_t *cap, size_t need, size_t size);

/* The footprint's node cache (node_cache.c): restore fills c->ns and c->t
 * from it (false: not usable, load afresh); store keeps a fresh load. */
bool sched_node_cache_restore(struct ctx *c);
void sched_node_cache_store(const struct ctx *c);
/* Before the pass changes node i's state: kept to be put back when c's
 * nodes are the cache's (c->ns_cache); return puts them back. */
void sched_node_save(struct ctx *c, int32_t i);
void sched_node_cache_return(struct ctx *c);
void sched_nst_refresh(struct nst *s);
void sched_nst_from_footprint(struct nst *s, const struct tm_sched_footprint *fp, size_t i);
int64_t sched_nst_free_milli(const struct nst *s);
bool sched_nst_fits(const struct nst *s, const struct need *nd);
uint32_t sched_pick_gpus(const struct nst *s, const struct need *nd, bool tight);
int sched_tree_init(struct ctx *c);
int64_t sched_tree_find(const struct ctx *c, size_t from, const struct need *nd);

/* The best-fit buckets (buckets.c).  init builds them for the pass, or
 * takes the node cache's; del and add keep them in step around a change
 * of node i (capacity.c); return, at the end of a pass on the cache's
 * nodes once their states are back, puts the changed nodes back. */
struct sched_buckets;
struct bvec;
int sched_buckets_init(struct ctx *c);
void sched_buckets_del(struct ctx *c, int32_t i);
void sched_buckets_add(struct ctx *c, int32_t i);
void sched_buckets_return(struct ctx *c);
void sched_buckets_release(struct ctx *c);
void sched_buckets_free(struct sched_buckets *b);
/* Node i (state s) out of, or into, a cache's buckets (node_cache.c). */
void sched_buckets_node_out(struct sched_buckets *b, const struct nst *s, int32_t i);
void sched_buckets_node_in(struct sched_buckets *b, const struct nst *s, int32_t i);
/* A bucket in its order: the nodes (whole GPUs) or GPU ids, node *
 * TM_NODE_GPUS_MAX + GPU (shares), that the pass changed, the last first,
 * then the rest ascending; -1 at the end. */
struct sched_biter {
    const struct ctx *c;
    const struct bvec *vec;
    int32_t cur, at;
    bool front, gpus;
};
int32_t sched_witer_first(const struct ctx *c, int slot, int k, struct sched_biter *it);
int32_t sched_piter_first(const struct ctx *c, int slot, int f, struct sched_biter *it);
int32_t sched_biter_next(struct sched_biter *it);
int sched_pbits_next(const struct ctx *c, int slot, int from);
void sched_node_take(struct ctx *c, int32_t i, uint32_t mask, int32_t milli, const struct need *nd);
void sched_node_give(struct ctx *c, int32_t i, uint32_t mask, int32_t milli, const struct need *nd);
int sched_add_placement(struct ctx *c, int32_t job, int32_t node, uint32_t mask, int32_t milli,
                        bool loaned);

/* Timelines, reservations and loans (reserve.c). */
bool sched_is_urgent(const struct ctx *c, int32_t j);
/* Alloc a's expected end as the input gives it: end_ms, or the footprint's
 * estimate rule (struct tm_sched_footprint); not clamped to now. */
int64_t sched_alloc_end_given(const struct ctx *c, int32_t a);
int64_t sched_job_end(const struct ctx *c, int32_t j);
int64_t sched_job_end_safe(const struct ctx *c, int32_t j);
bool sched_reservation_permits(const struct ctx *c, int32_t j, int32_t i, uint32_t mask,
                               int32_t milli, bool *ret_gap, bool *ret_loan);
void sched_reservation_note_gap(struct ctx *c, int32_t i, uint32_t mask, int32_t milli,
                                const struct need *nd);
bool sched_tied(const struct ctx *c, int32_t j);
bool sched_narrow(const struct ctx *c, int32_t j);
bool sched_constrained(const struct ctx *c, int32_t j);
int sched_reserve(struct ctx *c, int32_t j, size_t *linked);
int64_t sched_projected_start(struct ctx *c, int32_t j, size_t *linked);
int sched_at_risk(struct ctx *c, int32_t j, size_t *linked);
bool sched_fragmented(const struct ctx *c, const struct need *nd);
bool sched_heavy(const struct ctx *c, int32_t j);
bool sched_heavy_capped(const struct ctx *c, int32_t j, int64_t drain_gpus);
/* Flexible reservations a tarmac pass holds before job j, flexible and
 * holding none, reserves only at risk (tarmac.c). */
int32_t sched_flexible_limit(const struct ctx *c, int32_t j);

/* Placement (place.c). */
int sched_node_end_init(struct ctx *c);
int sched_place_firstfit(struct ctx *c, int32_t j, bool respect, bool *ret_gap, bool *ret_blocked);
int sched_place_best(struct ctx *c, int32_t j, bool respect, bool *ret_gap, bool *ret_blocked);
bool sched_fits_anywhere(struct ctx *c, int32_t j);

/* tarmac: marks c->late for the aged jobs tied to few nodes that pass the
 * bound whatever the order (late.c).  0 or TM_ENOMEM. */
int sched_late_init(struct ctx *c);
/* Whether sched_late_init() marked job j (an aged tied job) late anyway. */
bool sched_late(const struct ctx *c, int32_t j);
/* The estimate a job without one is read as (params.default_estimate_ms). */
int64_t sched_default_estimate_ms(const struct tm_sched_params *p);

/* Order keys (order.c): sched_order() fills keys[0..njobs) with the
 * policy's order hook and sorts them. */
void sched_order(const struct ctx *c, struct okey *keys);
void sched_order_submit(const struct ctx *c, int32_t j, struct okey *key);
void sched_order_tarmac(const struct ctx *c, int32_t j, struct okey *key);
/* Slurm's multifactor priority of job j (multifactor.c), higher first. */
int64_t sched_multifactor_priority(const struct ctx *c, int32_t j);

/* The pass (scheduler.c). */
void sched_note(struct ctx *c, int32_t j, enum tm_sched_verdict v, int32_t node, int64_t start,
                const char *why);
/* sched_reserve() for job j, noted: placed by eviction, or reserved with
 * `why`.  Returns what sched_reserve() returned. */
int sched_reserve_noted(struct ctx *c, int32_t j, struct sched_pass *ps, const char *why);

/* The table (policy.c): the row of a valid policy. */
const struct sched_policy *sched_policy_of(enum tm_sched_policy p);

/* quota_pass.c: team quotas in the pass (tm_sched_quota), when given.
 * init: check the view and size the reclaims (0, TM_EINVAL, TM_ENOMEM).
 * admit: before placing job j: 1 when it waits on quota (noted), else 0.
 * placed: job j was placed: count it.  reclaim: job j found no room: 1
 * when it is within its quota and waits for a reclaim (noted), else 0;
 * < 0 on error. */
int sched_quota_init(struct ctx *c);
int sched_quota_admit(struct ctx *c, int32_t j);
void sched_quota_placed(struct ctx *c, int32_t j);
int sched_quota_reclaim(struct ctx *c, int32_t j);

#endif
