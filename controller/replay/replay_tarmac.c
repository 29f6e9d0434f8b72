/*
 * controller/replay/replay_tarmac.c: the time replay's tarmac pass,
 * incremental (a struct replay_pass, replay_engine.h).  Each pass is handed a subset S of
 * the queue, the head of tarmac's order and a few jobs further on, plus
 * one probe per group (request x preemptible) with jobs left out, and its
 * result is kept only when it proves that the jobs left out would have
 * done nothing; otherwise S grows, and at worst the whole queue is
 * passed.  test_replay_incremental compares it with the whole-queue pass,
 * decision for decision.
 *
 * Why the proof holds.  A pass considers the jobs one at a time in its
 * order.  A job changes what the pass does for later jobs only if it is
 * placed or reserved for, or if it is the first blocked one
 * (tarmac_finish()); the notes aside, which the log keeps only for the
 * jobs a pass was handed.  The pass's inputs read from the whole queue
 * (tarmac_queue_inputs(): the smallest CPU, memory and share asked, the
 * models constrained jobs want) only ask whether some queued job has a
 * given request, and every request left out has its probe.  So the pass
 * over S decides as the whole queue's if every job o left out, at its
 * turn, would be neither placed nor reserved for, and the first blocked
 * job is in S.  For o, of group G:
 *
 *  - placement.  G's probe has o's request and preemptibility, the least
 *    estimate of G's queued jobs (a shorter estimate fills every gap a
 *    longer one does) and no lead for being short, and sorts just before
 *    G's first job left out (the same key or an earlier tier, the least
 *    work of G, an odd id below that job's even one): before o.  If the
 *    probe is not placed and its search for a node read every candidate
 *    (tm_sched_note.partial false), no node could hold G's request there;
 *    from there on the pass only takes capacity and adds reservations
 *    (no evictions: a pass that evicts is redone whole), so none can at
 *    o's turn either;
 *  - reservation.  tarmac_may_reserve() answers yes only for a job aged
 *    past half the bound, one that held a reservation (all of those are
 *    in S), or one tied to few nodes; and only while the pass has made
 *    fewer than tm_sched_max_reservations().  So either the head alone
 *    made that many (two or more, so not only tarmac_finish()'s), or no
 *    aged and no tied job is left out;
 *  - the first blocked job is one of the head's (r.first_blocked): every
 *    job left out comes after the head.
 *
 * Gangs: a request includes its node count, so a gang's probe is a gang
 * of that size, placed all or nothing; its members are alike, so the
 * search that places them one by one fails only when fewer nodes than
 * its size could hold one, and later ones cannot either.  A gang
 * reserved for holds one reservation per node, and tarmac's cap counts
 * jobs (res_first()).
 *
 * S is the head, at least a given length of tarmac's order taken from
 * lists kept by arrival (aged tied jobs all, the aged rest by submit
 * time, then level 1 and level 0 by submit time less the lead, merged
 * across the lists: order.c says the order, scheduler.h exports its
 * parts; at a cut every job with the same key is taken, so the head is
 * closed under the order's last tie-breaks), the jobs queued since the
 * last pass, and for some groups their next jobs left out: from the
 * first try, as many as the nodes freed since the last pass could hold
 * (at most TQ_FREED_REACH), and for each group whose probe was placed or
 * reserved for in an earlier try of this pass, one (or the first try's
 * number), then four times more each try.  A try that fails for another
 * reason quadruples the head.  Each group's jobs left out are found on
 * lists by arrival, one per lead, where the order is arrival's: the walk
 * passes only the input's jobs.
 */
#include "controller/replay/replay_pass.h"

#include <stdlib.h>
#include <string.h>

#include "core/err.h"

/* The head's first length (tm_replay_config.tarmac_head).  A try costs
 * about its length, and under a deep queue nearly every first try proves,
 * however short the head, so a short head is cheap.  Much shorter loses on
 * traces whose held and aged jobs lie deep (openb): they take more tries. */
#define TQ_HEAD 32
/* The most jobs of a group the nodes freed since the last pass add to
 * its first try (tq_seed()). */
#ifndef TQ_FREED_REACH
#define TQ_FREED_REACH 8
#endif
/* Order groups the pass keeps apart: tied or not by each lead tarmac
 * gives (two or four values); more turn it off. */
#define TQ_GROUPS 16
/* Distinct leads (tm_sched_tarmac_lead_ms(): 0, half short_ms, short_ms,
 * one and a half). */
#define TQ_LEADS 4
/* The most reservations a pass may make for tq_aged_quiet() to reason
 * about them (tarmac's default is 8). */
#define TQ_RES_MAX 64

/* A place in tarmac's order (pos_le()). */
struct tq_pos { int tier; int64_t key; };

/* The pass's state: the queue as lists by arrival rank, one per order
 * group (tied or not, lead), with per list the first job not aged past
 * half the bound (cu) and the first below level 1 (cl); the queue by
 * arrival rank and estimate per group of qgrp (request x preemptible)
 * and per group its queued jobs. */
struct tarmac_pass {
    struct replay_engine *eng;
    bool off;                                  /* whole-queue passes from now on */
    int32_t *rank;                             /* per job: index in arr */
    struct tm_seqindex qgrp;
    struct tm_sched_traits *traits;            /* per shape */
    int32_t *og;                               /* per job: order group, -1 none */
    struct ranklist lists;
    bool listsinit;
    int ngroups;
    bool tied[TQ_GROUPS];
    int64_t lead[TQ_GROUPS];
    int32_t cu[TQ_GROUPS], cl[TQ_GROUPS];
    int32_t *count;                            /* per qgrp group */
    size_t ntied;                              /* queued tied jobs */
    uint32_t *mark, gen;                       /* per job: in the pass of gen */
    int32_t *gin;                              /* per qgrp group: in the pass */
    uint32_t *ggen;
    int64_t maxlead;
    /* per qgrp group, in pass `pass` (rgen): how far in the order its
     * part of the pass's input reaches, and how many jobs it reached for */
    uint32_t pass, *rgen;
    struct tq_pos *reach;
    int32_t *reach_n;
    int32_t *queued;                           /* jobs queued since the last pass */
    size_t nqueued;
    /* qgrp's groups split by lead: list g * TQ_LEADS + l holds group g's
     * queued jobs of lead l by arrival, which within it is tarmac's order;
     * per list, in the pass's try lfgen, a rank no later than its first
     * job left out (lf) */
    int nleads;
    int64_t leads[TQ_LEADS];
    int lidx[TQ_GROUPS];                       /* per order group: its lead's index */
    struct ranklist gl;
    bool glinit;
    int32_t *lf;
    uint32_t *lfgen;
    size_t nnarrow;                            /* queued narrow jobs (tied, a model_mask) */
    int64_t *soon;                             /* per node x 2: when it empties (tq_aged_quiet()) */
    /* Nodes where a job ended or was evicted since the last pass, once
     * each (freed_at: the pass that listed them) */
    int32_t *freed;
    uint32_t *freed_at;
    size_t nfreed;
    struct replay_input in;                    /* the jobs handed to the pass */
};

static void tq_release(void *state)
{
    struct tarmac_pass *tp = state;

    if (!tp)
        return;
    free(tp->rank);
    tm_seqindex_release(&tp->qgrp);
    free(tp->traits);
    free(tp->og);
    free(tp->mark);
    free(tp->count);
    free(tp->gin);
    free(tp->ggen);
    free(tp->rgen);
    free(tp->reach);
    free(tp->reach_n);
    free(tp->queued);
    free(tp->soon);
    free(tp->freed);
    free(tp->freed_at);
    free(tp->lf);
    free(tp->lfgen);
    if (tp->listsinit)
        replay_rl_release(&tp->lists);
    if (tp->glinit)
        replay_rl_release(&tp->gl);
    replay_input_release(&tp->in);
    free(tp);
}

static int tq_init_state(struct tarmac_pass *tp)
{
    struct replay_engine *s = tp->eng;
    const struct tm_replay_config *cfg = s->cfg;
    struct tm_sched_job *rep = NULL;
    struct tm_sched_input in = {0};
    int r = TM_ENOMEM;

    tp->traits = calloc(s->nshapes + 1, sizeof(*tp->traits));
    rep = calloc(s->nshapes + 1, sizeof(*rep));
    tp->og = malloc((s->njobs + 1) * sizeof(*tp->og));
    tp->mark = calloc(s->njobs + 1, sizeof(*tp->mark));
    tp->count = calloc(2 * s->nshapes + 1, sizeof(*tp->count));
    tp->gin = calloc(2 * s->nshapes + 1, sizeof(*tp->gin));
    tp->ggen = calloc(2 * s->nshapes + 1, sizeof(*tp->ggen));
    tp->rgen = calloc(2 * s->nshapes + 1, sizeof(*tp->rgen));
    tp->reach = calloc(2 * s->nshapes + 1, sizeof(*tp->reach));
    tp->reach_n = calloc(2 * s->nshapes + 1, sizeof(*tp->reach_n));
    tp->queued = malloc((s->njobs + 1) * sizeof(*tp->queued));
    tp->soon = malloc((2 * s->nnodes + 1) * sizeof(*tp->soon));
    tp->freed = malloc((s->nnodes + 1) * sizeof(*tp->freed));
    tp->freed_at = calloc(s->nnodes + 1, sizeof(*tp->freed_at));
    tp->lf = malloc((2 * s->nshapes * TQ_LEADS + 1) * sizeof(*tp->lf));
    tp->lfgen = calloc(2 * s->nshapes * TQ_LEADS + 1, sizeof(*tp->lfgen));
    tp->rank = malloc((s->njobs + 1) * sizeof(*tp->rank));
    if (!tp->traits || !rep || !tp->og || !tp->mark || !tp->count || !tp->gin || !tp->ggen ||
        !tp->rgen || !tp->reach || !tp->reach_n || !tp->queued || !tp->soon || !tp->freed ||
        !tp->freed_at || !tp->lf || !tp->lfgen || !tp->rank)
        goto out;
    /* Tied and constrained are the request's and the nodes' (fixed in
     * this replay): one job per shape asks the scheduler. */
    for (size_t j = 0; j < s->njobs; j++) {
        const struct tm_trace_job *tj = s->jobs[j].tj;
        rep[s->jobs[j].shape] = (struct tm_sched_job){
            .cpu_milli = tj->cpu_milli, .memory_mib = tj->memory_mib, .model_mask = tj->model_mask,
            .gpus = tj->gpus, .gpu_milli = tj->gpus > 0 ? MILLI : tj->gpu_milli, .nodes = s->jobs[j].nodes};
        tp->og[j] = -1;
    }
    in.jobs = rep;
    in.njobs = s->nshapes;
    in.nodes = s->nodes;
    in.nnodes = s->nnodes;
    in.policy = cfg->policy;
    in.params = cfg->params;
    r = tm_sched_job_traits(&in, tp->traits);
    if (r < 0)
        goto out;
    r = replay_rank_index(s, tp->rank, &tp->qgrp);
    if (r == 0) {
        r = replay_rl_init(&tp->lists, s->njobs, TQ_GROUPS);
        tp->listsinit = true;
    }
    if (r == 0) {
        r = replay_rl_init(&tp->gl, s->njobs, 2 * s->nshapes * TQ_LEADS);
        tp->glinit = true;
    }
    if (r < 0)
        goto out;
    for (int k = 0; k < TQ_GROUPS; k++)
        tp->cu[k] = tp->cl[k] = -1;
out:
    free(rep);
    return r;
}

/* The proof reads tarmac's rules as they are with priority 0 (what the
 * engine queues) and levels of a quarter bound; align_ends reads
 * estimates in placement as well. */
static int tq_init(struct replay_engine *s, void **state)
{
    const struct tm_replay_config *cfg = s->cfg;
    struct tarmac_pass *tp;
    int r;

    if (cfg->policy != TM_POLICY_TARMAC || cfg->full_pass || cfg->params.align_ends ||
        tm_sched_starvation_ms(&cfg->params) % 4 != 0)
        return 0;
    tp = calloc(1, sizeof(*tp));
    if (!tp)
        return TM_ENOMEM;
    tp->eng = s;
    r = tq_init_state(tp);
    if (r < 0) {
        tq_release(tp);
        return r;
    }
    *state = tp;
    return 1;
}

/* A rank's place in a list walk: the end (-1) after every rank. */
static inline int32_t rpos(int32_t r)
{
    return r < 0 ? INT32_MAX : r;
}

static int64_t rank_submit(const struct tarmac_pass *tp, int32_t r)
{
    const struct replay_engine *s = tp->eng;

    return s->jobs[s->arr[r]].submit;
}

static void tq_queued(void *state, int32_t j)
{
    struct tarmac_pass *tp = state;
    struct replay_engine *s = tp->eng;
    const struct rjob *rj = &s->jobs[j];
    const struct tm_sched_traits *tr = &tp->traits[rj->shape];
    int32_t r = tp->rank[j], og = -1;
    int64_t lead;

    tm_seqindex_set(&tp->qgrp, (size_t)r, rj->estimate > 0 ? rj->estimate : TM_SEQ_MAX);
    tp->count[tp->qgrp.group[r]]++;
    tp->queued[tp->nqueued++] = j;
    if (tr->tied)
        tp->ntied++;
    if (tr->tied && rj->tj->model_mask)
        tp->nnarrow++;
    if (tp->off)
        return;
    lead = tm_sched_tarmac_lead_ms(&s->cfg->params, &s->q[rj->qpos], tr->constrained);
    for (int k = 0; k < tp->ngroups && og < 0; k++)
        if (tp->tied[k] == tr->tied && tp->lead[k] == lead)
            og = k;
    if (og < 0) {
        if (tp->ngroups == TQ_GROUPS) {
            tp->off = true; /* whole-queue passes from now on */
            return;
        }
        int l = 0;
        while (l < tp->nleads && tp->leads[l] != lead)
            l++;
        if (l == tp->nleads) {
            if (l == TQ_LEADS) {
                tp->off = true; /* whole-queue passes from now on */
                return;
            }
            tp->leads[tp->nleads++] = lead;
        }
        og = tp->ngroups++;
        tp->tied[og] = tr->tied;
        tp->lead[og] = lead;
        tp->lidx[og] = l;
        if (lead > tp->maxlead)
            tp->maxlead = lead;
    }
    tp->og[j] = og;
    replay_rl_insert(&tp->gl, tp->qgrp.group[r] * TQ_LEADS + tp->lidx[og], r);
    replay_rl_insert(&tp->lists, og, r);
    /* A job older than a cursor's: the cursor steps back to it and the
     * next pass walks it forward again (a requeued job; arrivals are the
     * newest). */
    if (r < rpos(tp->cu[og]))
        tp->cu[og] = r;
    if (r < rpos(tp->cl[og]))
        tp->cl[og] = r;
}

static void tq_dequeued(void *state, int32_t j)
{
    struct tarmac_pass *tp = state;
    struct replay_engine *s = tp->eng;
    const struct rjob *rj = &s->jobs[j];
    int32_t r = tp->rank[j], og = tp->og[j];

    tm_seqindex_set(&tp->qgrp, (size_t)r, TM_SEQ_ABSENT);
    tp->count[tp->qgrp.group[r]]--;
    if (tp->traits[rj->shape].tied)
        tp->ntied--;
    if (tp->traits[rj->shape].tied && rj->tj->model_mask)
        tp->nnarrow--;
    if (og < 0)
        return;
    if (tp->cu[og] == r)
        tp->cu[og] = tp->lists.next[r];
    if (tp->cl[og] == r)
        tp->cl[og] = tp->lists.next[r];
    replay_rl_remove(&tp->gl, tp->qgrp.group[r] * TQ_LEADS + tp->lidx[og], r);
    replay_rl_remove(&tp->lists, og, r);
    tp->og[j] = -1;
}

static void tq_node_freed(void *state, int32_t i)
{
    struct tarmac_pass *tp = state;

    /* pass + 1: the next pass's list (the pass counts itself first). */
    if (tp->freed_at[i] != tp->pass + 1) {
        tp->freed_at[i] = tp->pass + 1;
        tp->freed[tp->nfreed++] = i;
    }
}

/* How many jobs of request sh node i could hold now, each beside the
 * others, reservations aside. */
static int64_t tq_room(const struct tarmac_pass *tp, const struct shape *sh, int32_t i)
{
    const struct replay_engine *s = tp->eng;
    const struct tm_sched_node *n = &s->nodes[i];
    int64_t c = INT32_MAX;

    if (!n->schedulable || (sh->mask && !(sh->mask >> n->model & 1)))
        return 0;
    if (sh->cpu > 0 && s->node_cpu_free[i] / sh->cpu < c)
        c = s->node_cpu_free[i] / sh->cpu;
    if (sh->mem > 0 && s->node_mem_free[i] / sh->mem < c)
        c = s->node_mem_free[i] / sh->mem;
    if (sh->gpus > 0 && s->gpus_full[i] / sh->gpus < c)
        c = s->gpus_full[i] / sh->gpus;
    if (sh->gpus == 0 && sh->milli > 0)
        c = s->gpu_free_max[i] < sh->milli ? 0 : s->gpu_free_sum[i] / sh->milli < c ? s->gpu_free_sum[i] / sh->milli : c;
    return c > 0 ? c : 0;
}

/* What the pass's input holds. */
struct tq_input {
    size_t n;           /* real jobs */
    size_t nhead;       /* of which the head, first */
    size_t ntied;       /* tied jobs among them */
    bool all_aged;      /* every aged job is in the head */
};

/* Append the queued job at arrival rank r to the pass's input. */
static int tq_take(struct tarmac_pass *tp, struct tq_input *in, int32_t r)
{
    struct replay_engine *s = tp->eng;
    int32_t j = (int32_t)s->arr[r];
    const struct rjob *rj = &s->jobs[j];
    int32_t g = tp->qgrp.group[r];

    if (replay_input_add(s, &tp->in, &in->n, j) < 0)
        return TM_ENOMEM;
    tp->mark[j] = tp->gen;
    if (tp->ggen[g] != tp->gen) {
        tp->ggen[g] = tp->gen;
        tp->gin[g] = 0;
    }
    tp->gin[g]++;
    if (tp->traits[rj->shape].tied)
        in->ntied++;
    return 0;
}

/* A place in tarmac's order at a pass: the tier (0 aged and tied, 1 the
 * aged rest, 2 level 1, 3 level 0) and the key within it (aged: the
 * arrival rank, which is submit order; else submit time less the lead),
 * ties left to the pass's later keys (struct tq_pos). */
static bool pos_le(struct tq_pos a, struct tq_pos b)
{
    return a.tier != b.tier ? a.tier < b.tier : a.key <= b.key;
}

struct tq_ages {
    int64_t aged, level1; /* submitted at or before: aged, level 1 or more */
};

static int tq_tier(int64_t submit, bool tied, const struct tq_ages *a)
{
    if (submit <= a->aged)
        return tied ? 0 : 1;
    return submit <= a->level1 ? 2 : 3;
}

static struct tq_pos tq_pos_of(const struct tarmac_pass *tp, int32_t r, const struct tq_ages *a)
{
    const struct replay_engine *s = tp->eng;
    int32_t j = (int32_t)s->arr[r];
    const struct rjob *rj = &s->jobs[j];
    struct tq_pos p = {tq_tier(rj->submit, tp->traits[rj->shape].tied, a), r};

    if (p.tier >= 2)
        p.key = rj->submit - tp->lead[tp->og[j]];
    return p;
}

/* The key of rank r, first of group og's segment of tier `tier`. */
static int64_t tq_seg_key(const struct tarmac_pass *tp, int32_t r, int og, int tier)
{
    return tier <= 1 ? r : rank_submit(tp, r) - tp->lead[og];
}

/* Merge the lists' segments [from[og], to[og]) by key, taking jobs until
 * the input holds `want` and then those with the key of the last one
 * taken (*last).  Returns 1 when the segments are exhausted, 0 when cut,
 * < 0. */
static int tq_merge(struct tarmac_pass *tp, int32_t *from, const int32_t *to, int tier, size_t want,
                    struct tq_input *in, struct tq_pos *last)
{
    bool any = false;
    int64_t key[TQ_GROUPS]; /* each segment's first key; INT64_MAX: none */
    int rc;

    /* Each segment's key is read once per job it gives, not once per job
     * taken from any (its job's submit time is a load that misses). */
    for (int og = 0; og < tp->ngroups; og++)
        key[og] = from[og] == to[og] || (tier == 0 && !tp->tied[og]) || (tier == 1 && tp->tied[og])
                      ? INT64_MAX
                      : tq_seg_key(tp, from[og], og, tier);
    for (;;) {
        int best = -1;
        int64_t bk = 0;
        for (int og = 0; og < tp->ngroups; og++)
            if (key[og] != INT64_MAX && (best < 0 || key[og] < bk)) {
                best = og;
                bk = key[og];
            }
        if (best < 0)
            return 1;
        if (tier > 0 && in->n >= want && any && (tier == 1 || bk != last->key))
            return 0;
        rc = tq_take(tp, in, from[best]);
        if (rc < 0)
            return rc;
        from[best] = tp->lists.next[from[best]];
        key[best] = from[best] == to[best] ? INT64_MAX : tq_seg_key(tp, from[best], best, tier);
        *last = (struct tq_pos){tier, bk};
        any = true;
    }
}

/* The head of the queue in tarmac's order, at least `want` jobs if the
 * queue has them, into tp->in.jobs; *cut: where it ends.  0 or < 0. */
static int tq_head(struct tarmac_pass *tp, size_t want, struct tq_input *in, struct tq_pos *cut)
{
    int32_t from[TQ_GROUPS], to[TQ_GROUPS];
    int rc = 1;

    memset(in, 0, sizeof(*in));
    *cut = (struct tq_pos){0, -1}; /* before every job: none taken */
    tp->gen++;
    for (int tier = 0; tier < 4 && rc == 1; tier++) {
        for (int og = 0; og < tp->ngroups; og++) {
            from[og] = tier <= 1 ? tp->lists.head[og] : tier == 2 ? tp->cu[og] : tp->cl[og];
            to[og] = tier <= 1 ? tp->cu[og] : tier == 2 ? tp->cl[og] : -1;
        }
        if (tier == 2)
            in->all_aged = true;
        rc = tq_merge(tp, from, to, tier, want, in, cut);
    }
    in->nhead = in->n;
    return rc < 0 ? rc : 0;
}

static bool tq_marked(const struct tarmac_pass *tp, int32_t r)
{
    const struct replay_engine *s = tp->eng;

    return tp->mark[s->arr[r]] == tp->gen;
}

/* List gl's first job left out (-1 none).  The walk past the input's
 * jobs is kept for the rest of the try: within a try the input only
 * grows. */
static int32_t tq_lfirst(struct tarmac_pass *tp, size_t gl)
{
    int32_t r = tp->lfgen[gl] == tp->gen ? tp->lf[gl] : tp->gl.head[gl];

    while (r >= 0 && tq_marked(tp, r))
        r = tp->gl.next[r];
    tp->lfgen[gl] = tp->gen;
    tp->lf[gl] = r;
    return r;
}

/* The job left out after rank r in r's list (-1 none). */
static int32_t tq_lnext(const struct tarmac_pass *tp, int32_t r)
{
    for (r = tp->gl.next[r]; r >= 0 && tq_marked(tp, r);)
        r = tp->gl.next[r];
    return r;
}

/* Group g's jobs (request x preemptible) the input does not hold, by
 * arrival rank: a merge of its lists, one per lead. */
struct tq_walk {
    int32_t at[TQ_LEADS];
};

static void tq_walk_init(struct tarmac_pass *tp, size_t g, struct tq_walk *w)
{
    for (int l = 0; l < tp->nleads; l++)
        w->at[l] = tq_lfirst(tp, g * TQ_LEADS + (size_t)l);
}

/* The walk's next job left out (-1 none). */
static int32_t tq_walk_next(const struct tarmac_pass *tp, struct tq_walk *w)
{
    int best = -1;
    int32_t r;

    for (int l = 0; l < tp->nleads; l++)
        if (w->at[l] >= 0 && (best < 0 || w->at[l] < w->at[best]))
            best = l;
    if (best < 0)
        return -1;
    r = w->at[best];
    w->at[best] = tq_lnext(tp, r);
    return r;
}

/* Add group g's jobs left out up to `upto` in the order (ties
 * included): within a lead's list the order is arrival's, so each list
 * is walked up to its first job past `upto`. */
static int tq_extras(struct tarmac_pass *tp, size_t g, struct tq_pos upto, const struct tq_ages *a, struct tq_input *in)
{
    for (int l = 0; l < tp->nleads; l++) {
        int32_t r = tq_lfirst(tp, g * TQ_LEADS + (size_t)l);
        while (r >= 0 && pos_le(tq_pos_of(tp, r, a), upto)) {
            int32_t next = tq_lnext(tp, r);
            int rc = tq_take(tp, in, r);
            if (rc < 0)
                return rc;
            r = next;
        }
    }
    return 0;
}

/* Where group g must reach to hold its e-th job left out (by arrival):
 * that job's place, or *at if further already. */
static void tq_extend(struct tarmac_pass *tp, size_t g, int32_t e, const struct tq_ages *a, struct tq_pos *at)
{
    struct tq_walk w;
    int32_t r, m = -1;

    tq_walk_init(tp, g, &w);
    while (e-- > 0 && (r = tq_walk_next(tp, &w)) >= 0)
        m = r;
    if (m >= 0) {
        struct tq_pos p = tq_pos_of(tp, m, a);
        if (!pos_le(p, *at))
            *at = p;
    }
}

/* Group g's first job in the order that the input leaves out and its
 * place: the least among its lists' first ones.  -1 none. */
static int32_t tq_first_out(struct tarmac_pass *tp, size_t g, const struct tq_ages *a, struct tq_pos *ret)
{
    int32_t best = -1;

    for (int l = 0; l < tp->nleads; l++) {
        int32_t r = tq_lfirst(tp, g * TQ_LEADS + (size_t)l);
        if (r >= 0) {
            struct tq_pos p = tq_pos_of(tp, r, a);
            if (best < 0 || !pos_le(*ret, p)) {
                *ret = p;
                best = r;
            }
        }
    }
    return best;
}

/* Group g's first job left out by arrival (-1 none). */
static int32_t tq_first_arrived_out(struct tarmac_pass *tp, size_t g)
{
    struct tq_walk w;

    tq_walk_init(tp, g, &w);
    return tq_walk_next(tp, &w);
}

/* The probe of group g, just before its first job left out (rank r at
 * place at): the group's request and preemptibility and its least
 * estimate queued, so that it sorts before every job of the group left
 * out (the same key or an earlier tier, the least work of its group, the
 * odd id below r's even one).  0 or < 0. */
static int tq_probe(struct tarmac_pass *tp, size_t *n, size_t g, int32_t r, struct tq_pos at)
{
    struct replay_engine *s = tp->eng;
    const struct rjob *rj = &s->jobs[s->arr[r]];
    struct tm_sched_job *p;
    int64_t est;
    int rc = replay_input_room(&tp->in, *n);

    if (rc < 0)
        return rc;
    p = &tp->in.jobs[*n];
    *p = s->q[rj->qpos];
    est = tm_seqindex_min(&tp->qgrp, g);
    p->estimate_ms = est >= TM_SEQ_MAX ? 0 : est;
    p->estimate_known = false;
    p->klass = TM_CLASS_TRAIN; /* no lead for being short */
    p->hold_node = 0;
    p->hold_start_ms = 0;
    p->id = 2 * (int64_t)s->arr[r] - 1;
    /* Aged: r's submit time.  Else r's key plus the probe's own lead (at
     * most r's, the same request): no younger than r, so in r's tier or
     * an earlier one. */
    if (at.tier >= 2)
        p->submit_ms = at.key + tm_sched_tarmac_lead_ms(&s->cfg->params, p, tp->traits[rj->shape].constrained);
    tp->in.pos[(*n)++] = -1 - (int32_t)g;
    return 0;
}

/* Whether reservation k is its job's first: a gang's reservations, one
 * per node, come one after another (reserve.c), and tarmac's cap counts
 * jobs. */
static bool res_first(const struct tm_sched_result *r, size_t k)
{
    return k == 0 || r->reservations[k].job != r->reservations[k - 1].job;
}

/* Whether no aged job left out would reserve though the pass's
 * reservations are below the most: each is flexible (no tied job is left
 * out) and held none, so once the head made a flexible reservation
 * (the job's tm_sched_traits.flexible_limit of them)
 * tarmac_may_reserve() asks only whether it is at risk, its start later
 * than tm_sched_tarmac_risk_deadline().  That start is no later than when
 * one of the maxres nodes able to hold its request that empty first
 * (their jobs, and this pass's placements, ended by their expected ends;
 * loans count as ended for non-preemptible work) is empty: fewer than
 * maxres nodes are reserved.  The start may move past a node narrow jobs
 * want (a penalty of hours): not with narrow jobs queued.  The earliest
 * submitted aged job of each group left out has the earliest deadline. */
static bool tq_aged_quiet(struct tarmac_pass *tp, const struct tm_sched_result *r, const struct tq_input *in,
                          int32_t maxres, int64_t now)
{
    struct replay_engine *s = tp->eng;
    int32_t flexible = 0;
    int64_t *soon = tp->soon;

    if (tp->nnarrow > 0 || maxres > TQ_RES_MAX)
        return false;
    /* A gang reserved holds several nodes, so maxres nodes bound no
     * longer holds: not proved (the head grows). */
    for (size_t k = 0; k < r->nreservations; k++)
        if (!res_first(r, k))
            return false;
    for (size_t k = 0; k < r->nreservations; k++)
        if ((size_t)r->reservations[k].job < in->nhead &&
            !tp->traits[s->jobs[s->qjob[tp->in.pos[r->reservations[k].job]]].shape].tied)
            flexible++;
    if (flexible < 1)
        return false;
    /* When each node empties, with and without its loans. */
    for (size_t i = 0; i < s->nnodes; i++) {
        soon[2 * i] = s->gpu_end[i] > now ? s->gpu_end[i] : now;
        soon[2 * i + 1] = s->gpu_end_kept[i] > now ? s->gpu_end_kept[i] : now;
    }
    for (size_t k = 0; k < r->nplacements; k++) {
        const struct tm_sched_placement *pl = &r->placements[k];
        int64_t est = tp->in.jobs[pl->job].estimate_ms, e = est > 0 ? now + est : INT64_MAX;
        for (int w = 0; w < 2; w++)
            if (e > soon[2 * pl->node + w])
                soon[2 * pl->node + w] = e;
    }
    for (size_t x = 0; x < s->nactive; x++)
        for (int pre = 0; pre < 2; pre++) {
            size_t g = (size_t)s->active[x] * 2 + (size_t)pre;
            const struct shape *sh = &s->shapes[s->active[x]];
            int32_t m = tq_first_arrived_out(tp, g);
            int64_t best[TQ_RES_MAX];
            int nb = 0;
            if (m < 0 || rank_submit(tp, m) > now - tm_sched_tarmac_urgent_ms(&s->cfg->params))
                continue; /* none of g aged is left out: they go by arrival */
            if (sh->nodes > 1)
                return false; /* a gang starts once several nodes empty */
            if (flexible < tp->traits[s->active[x]].flexible_limit)
                return false; /* a job of g may reserve still */
            for (size_t i = 0; i < s->nnodes; i++) {
                const struct tm_sched_node *n = &s->nodes[i];
                int64_t t = soon[2 * i + (pre ? 0 : 1)];
                int b;
                if (!n->schedulable || n->gpus < (sh->gpus > 0 ? sh->gpus : 1) || n->cpu_milli < sh->cpu ||
                    n->memory_mib < sh->mem || (sh->mask && !(sh->mask >> n->model & 1)))
                    continue;
                /* the maxres least, in order */
                if (nb == maxres && t >= best[nb - 1])
                    continue;
                b = nb < maxres ? nb++ : nb - 1;
                while (b > 0 && best[b - 1] > t) {
                    best[b] = best[b - 1];
                    b--;
                }
                best[b] = t;
            }
            if (nb < maxres ||
                best[maxres - 1] > tm_sched_tarmac_risk_deadline(&s->cfg->params, rank_submit(tp, m)))
                return false;
        }
    return true;
}

/* Whether the pass over the input (real jobs first, then probes) decided
 * what the pass over the whole queue would; see the proof above.
 * *ret_grow: the groups whose probe was placed or reserved for get a
 * longer reach (1), or the head a longer length (0), or neither helps
 * (-1). */
static bool tq_proved(struct tarmac_pass *tp, const struct tm_sched_result *r, const struct tq_input *in,
                      int32_t maxres, int64_t now, int *ret_grow)
{
    size_t nres = 0;

    *ret_grow = 0;
    if (r->npreemptions > 0) {
        *ret_grow = -1;
        return false;
    }
    for (size_t k = 0; k < r->nplacements; k++)
        if ((size_t)r->placements[k].job >= in->n)
            *ret_grow = 1;
    for (size_t k = 0; k < r->nreservations; k++) {
        if ((size_t)r->reservations[k].job >= in->n)
            *ret_grow = 1;
        else if ((size_t)r->reservations[k].job < in->nhead && res_first(r, k))
            nres++;
    }
    if (*ret_grow)
        return false;
    for (size_t k = in->n; k < r->nnotes; k++)
        if (r->notes[k].partial)
            return false;
    if (r->first_blocked < 0 || (size_t)r->first_blocked >= in->nhead)
        return false;
    if (nres >= (size_t)maxres && nres >= 2)
        return true;
    if (in->ntied != tp->ntied)
        return false;
    return in->all_aged || tq_aged_quiet(tp, r, in, maxres, now);
}

/* Walk each list's cursors forward to now's ages. */
static void tq_cursors(struct tarmac_pass *tp, const struct tq_ages *a)
{
    for (int og = 0; og < tp->ngroups; og++) {
        int32_t *cu = &tp->cu[og], *cl = &tp->cl[og];
        while (*cu >= 0 && rank_submit(tp, *cu) <= a->aged)
            *cu = tp->lists.next[*cu];
        if (rpos(*cl) < rpos(*cu))
            *cl = *cu;
        while (*cl >= 0 && rank_submit(tp, *cl) <= a->level1)
            *cl = tp->lists.next[*cl];
    }
}

/* Group g's probe was placed or reserved for: the group's part of the
 * input reaches over its next e jobs left out, e = 1 at first in a pass
 * and four times more at each time after. */
static void tq_reach(struct tarmac_pass *tp, size_t g, const struct tq_ages *a, struct tq_pos cut)
{
    if (tp->rgen[g] != tp->pass) {
        tp->rgen[g] = tp->pass;
        tp->reach[g] = cut;
        tp->reach_n[g] = 1;
    } else if (tp->reach_n[g] < INT32_MAX / 4) {
        tp->reach_n[g] *= 4;
    }
    tq_extend(tp, g, tp->reach_n[g], a, &tp->reach[g]);
}

/* Each group with jobs left out that the nodes freed since the last pass
 * could hold reaches over as many of them (at most TQ_FREED_REACH) from
 * the first try on: without, its probe would be placed and the pass run
 * again. */
static void tq_seed(struct tarmac_pass *tp, size_t nfreed, const struct tq_ages *a, struct tq_pos cut)
{
    struct replay_engine *s = tp->eng;

    for (size_t x = 0; x < s->nactive; x++) {
        const struct shape *sh = &s->shapes[s->active[x]];
        int64_t k = 0;
        for (size_t f = 0; f < nfreed && k < TQ_FREED_REACH; f++)
            k += tq_room(tp, sh, tp->freed[f]);
        if (k == 0)
            continue;
        for (int pre = 0; pre < 2; pre++) {
            size_t g = (size_t)s->active[x] * 2 + (size_t)pre;
            int32_t inside = tp->ggen[g] == tp->gen ? tp->gin[g] : 0;
            if (tp->count[g] <= inside)
                continue;
            tp->rgen[g] = tp->pass;
            tp->reach[g] = cut;
            tp->reach_n[g] = k < TQ_FREED_REACH ? (int32_t)k : TQ_FREED_REACH;
            tq_extend(tp, g, tp->reach_n[g], a, &tp->reach[g]);
        }
    }
}

static int tq_run(void *state, int64_t now, struct tm_replay_stats *st, size_t narrived)
{
    struct tarmac_pass *tp = state;
    struct replay_engine *s = tp->eng;
    struct tm_sched_input si = {.policy = s->cfg->policy, .params = s->cfg->params};
    int32_t maxres = tm_sched_max_reservations(&si);
    struct tq_ages a = {now - tm_sched_tarmac_urgent_ms(&s->cfg->params),
                        now - tm_sched_tarmac_level_ms(&s->cfg->params)};
    size_t want = s->cfg->tarmac_head > 0 ? s->cfg->tarmac_head : TQ_HEAD;
    size_t nnew = tp->nqueued, nfreed = tp->nfreed;
    bool first = true;

    (void)narrived;
    replay_ends_refresh(s, now);
    /* Jobs queued and nodes freed from here on (evictions the pass makes)
     * are the next pass's. */
    tp->nqueued = 0;
    tp->nfreed = 0;
    tp->pass++;
    if (tp->off)
        return replay_pass_whole(s, now, st);
    tq_cursors(tp, &a);
    for (;;) {
        struct tm_sched_result r = {0};
        struct tq_input in;
        struct tq_pos cut;
        size_t n;
        bool held = true, blocked;
        int grow, rc = tq_head(tp, want, &in, &cut);
        if (rc < 0)
            return rc;
        if (in.n >= s->nq)
            break;
        if (first)
            tq_seed(tp, nfreed, &a, cut);
        first = false;
        /* Groups that reach past the head, their jobs up to there. */
        for (size_t x = 0; x < s->nactive && rc == 0; x++)
            for (int pre = 0; pre < 2 && rc == 0; pre++) {
                size_t g = (size_t)s->active[x] * 2 + (size_t)pre;
                if (tp->rgen[g] == tp->pass && !pos_le(tp->reach[g], cut))
                    rc = tq_extras(tp, g, tp->reach[g], &a, &in);
            }
        /* The jobs queued since the last pass: an arrival that fits is
         * started by the pass, and with it in the input one run proves it
         * (without, many more passes ran twice; adding each group's first
         * job left out as well cost more than it saved). */
        for (size_t k = 0; k < nnew && rc == 0; k++) {
            int32_t j = tp->queued[k];
            if (s->jobs[j].qpos >= 0 && tp->mark[j] != tp->gen)
                rc = tq_take(tp, &in, tp->rank[j]);
        }
        if (rc < 0)
            return rc;
        for (size_t k = 0; k < s->nheld && held; k++) {
            int32_t j = s->held[k];
            held = s->jobs[j].qpos < 0 || tp->mark[j] == tp->gen;
        }
        if (!held) {
            want *= 4;
            continue;
        }
        n = in.n;
        for (size_t x = 0; x < s->nactive && rc == 0; x++)
            for (int pre = 0; pre < 2 && rc == 0; pre++) {
                size_t g = (size_t)s->active[x] * 2 + (size_t)pre;
                int32_t inside = tp->ggen[g] == tp->gen ? tp->gin[g] : 0, m;
                struct tq_pos at;
                if (tp->count[g] <= inside)
                    continue;
                m = tq_first_out(tp, g, &a, &at);
                rc = m < 0 ? TM_EINVAL /* counted but absent: a bug */ : tq_probe(tp, &n, g, m, at);
            }
        if (rc < 0)
            return rc;
        rc = replay_sched_once(s, now, tp->in.jobs, n, &r);
        if (rc < 0)
            return rc;
        if (tq_proved(tp, &r, &in, maxres, now, &grow)) {
            r.nnotes = in.n;
            return replay_pass_apply(s, now, st, tp->in.jobs, in.n, tp->in.pos, &r, &blocked);
        }
        /* A probe placed or reserved for: its group's next jobs left out
         * would have been, so the group reaches for them (e of each, four
         * times more on each try); anything else, a longer head. */
        if (grow > 0) {
            for (size_t k = 0; k < r.nplacements; k++)
                if ((size_t)r.placements[k].job >= in.n)
                    tq_reach(tp, (size_t)(-1 - tp->in.pos[r.placements[k].job]), &a, cut);
            for (size_t k = 0; k < r.nreservations; k++)
                if ((size_t)r.reservations[k].job >= in.n)
                    tq_reach(tp, (size_t)(-1 - tp->in.pos[r.reservations[k].job]), &a, cut);
        } else {
            want *= 4;
        }
        tm_sched_result_release(&r);
        if (grow < 0)
            break;
    }
    return replay_pass_whole(s, now, st);
}

const struct replay_pass replay_pass_tarmac = {
    .name = "tarmac",
    .init = tq_init,
    .release = tq_release,
    .queued = tq_queued,
    .dequeued = tq_dequeued,
    .node_freed = tq_node_freed,
    .run = tq_run,
};
