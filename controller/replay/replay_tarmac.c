/*
 * controller/replay/replay_tarmac.c: the time replay's tarmac pass,
 * incremental (see replay_internal.h).  Each pass is handed a subset S of
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
#include "controller/replay/replay_internal.h"

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

int replay_tq_init(struct sim *s, const size_t *arr)
{
    const struct tm_replay_config *cfg = s->cfg;
    struct tm_sched_job *rep = NULL;
    struct tm_sched_input in = {0};
    int32_t *g = NULL;
    int r = TM_ENOMEM;

    /* The proof reads tarmac's rules as they are with jobs of one node,
     * priority 0 (what enqueue() hands) and levels of a quarter bound;
     * align_ends reads estimates in placement as well. */
    if (cfg->policy != TM_POLICY_TARMAC || cfg->full_pass || cfg->params.align_ends ||
        tm_sched_starvation_ms(&cfg->params) % 4 != 0)
        return 0;
    s->tq_traits = calloc(s->nshapes + 1, sizeof(*s->tq_traits));
    rep = calloc(s->nshapes + 1, sizeof(*rep));
    s->tq_og = malloc((s->njobs + 1) * sizeof(*s->tq_og));
    s->tq_mark = calloc(s->njobs + 1, sizeof(*s->tq_mark));
    s->tq_count = calloc(2 * s->nshapes + 1, sizeof(*s->tq_count));
    s->tq_gin = calloc(2 * s->nshapes + 1, sizeof(*s->tq_gin));
    s->tq_ggen = calloc(2 * s->nshapes + 1, sizeof(*s->tq_ggen));
    s->tq_rgen = calloc(2 * s->nshapes + 1, sizeof(*s->tq_rgen));
    s->tq_reach = calloc(2 * s->nshapes + 1, sizeof(*s->tq_reach));
    s->tq_e = calloc(2 * s->nshapes + 1, sizeof(*s->tq_e));
    s->tq_new = malloc((s->njobs + 1) * sizeof(*s->tq_new));
    s->tq_soon = malloc((2 * s->nnodes + 1) * sizeof(*s->tq_soon));
    s->tq_freed = malloc((s->nnodes + 1) * sizeof(*s->tq_freed));
    s->tq_freed_at = calloc(s->nnodes + 1, sizeof(*s->tq_freed_at));
    s->tq_lf = malloc((2 * s->nshapes * TQ_LEADS + 1) * sizeof(*s->tq_lf));
    s->tq_lfgen = calloc(2 * s->nshapes * TQ_LEADS + 1, sizeof(*s->tq_lfgen));
    if (!s->rank)
        s->rank = malloc((s->njobs + 1) * sizeof(*s->rank));
    g = malloc((s->njobs + 1) * sizeof(*g));
    if (!s->tq_traits || !rep || !s->tq_og || !s->tq_mark || !s->tq_count || !s->tq_gin || !s->tq_ggen ||
        !s->tq_rgen || !s->tq_reach || !s->tq_e || !s->tq_new || !s->tq_soon || !s->tq_freed ||
        !s->tq_freed_at || !s->tq_lf || !s->tq_lfgen || !s->rank || !g)
        goto out;
    /* Tied and constrained are the request's and the nodes' (fixed in
     * this replay): one job per shape asks the scheduler. */
    for (size_t j = 0; j < s->njobs; j++) {
        const struct tm_trace_job *tj = s->jobs[j].tj;
        rep[s->jobs[j].shape] = (struct tm_sched_job){
            .cpu_milli = tj->cpu_milli, .memory_mib = tj->memory_mib, .model_mask = tj->model_mask,
            .gpus = tj->gpus, .gpu_milli = tj->gpus > 0 ? MILLI : tj->gpu_milli, .nodes = 1};
        s->tq_og[j] = -1;
    }
    in.jobs = rep;
    in.njobs = s->nshapes;
    in.nodes = s->nodes;
    in.nnodes = s->nnodes;
    in.policy = cfg->policy;
    in.params = cfg->params;
    r = tm_sched_job_traits(&in, s->tq_traits);
    if (r < 0)
        goto out;
    for (size_t k = 0; k < s->njobs; k++) {
        const struct rjob *rj = &s->jobs[arr[k]];
        s->rank[arr[k]] = (int32_t)k;
        g[k] = rj->shape * 2 + (rj->tj->preemptible ? 1 : 0);
    }
    r = tm_seqindex_init(&s->qgrp, g, s->njobs, s->nshapes * 2);
    if (r == 0)
        r = replay_rl_init(&s->tq_lists, s->njobs, TQ_GROUPS);
    if (r == 0)
        r = replay_rl_init(&s->tq_gl, s->njobs, 2 * s->nshapes * TQ_LEADS);
    if (r < 0)
        goto out;
    s->tq_glinit = true;
    for (int k = 0; k < TQ_GROUPS; k++)
        s->tq_cu[k] = s->tq_cl[k] = -1;
    s->tq = true;
out:
    free(rep);
    free(g);
    return r;
}

void replay_tq_release(struct sim *s)
{
    free(s->tq_traits);
    free(s->tq_og);
    free(s->tq_mark);
    free(s->tq_count);
    free(s->tq_gin);
    free(s->tq_ggen);
    free(s->tq_rgen);
    free(s->tq_reach);
    free(s->tq_e);
    free(s->tq_new);
    free(s->tq_soon);
    free(s->tq_freed);
    free(s->tq_freed_at);
    free(s->tq_lf);
    free(s->tq_lfgen);
    if (s->tq)
        replay_rl_release(&s->tq_lists);
    if (s->tq_glinit)
        replay_rl_release(&s->tq_gl);
}

/* A rank's place in a list walk: the end (-1) after every rank. */
static inline int32_t rpos(int32_t r)
{
    return r < 0 ? INT32_MAX : r;
}

static int64_t rank_submit(const struct sim *s, int32_t r)
{
    return s->jobs[s->arr[r]].submit;
}

void replay_tq_add(struct sim *s, int32_t j)
{
    const struct rjob *rj = &s->jobs[j];
    const struct tm_sched_traits *tr = &s->tq_traits[rj->shape];
    int32_t r = s->rank[j], og = -1;
    int64_t lead;

    tm_seqindex_set(&s->qgrp, (size_t)r, rj->estimate > 0 ? rj->estimate : TM_SEQ_MAX);
    s->tq_count[s->qgrp.group[r]]++;
    s->tq_new[s->tq_nnew++] = j;
    if (tr->tied)
        s->tq_ntied++;
    if (tr->tied && rj->tj->model_mask)
        s->tq_nnarrow++;
    if (s->tq_off)
        return;
    lead = tm_sched_tarmac_lead_ms(&s->cfg->params, &s->q[rj->qpos], tr->constrained);
    for (int k = 0; k < s->tq_ngroups && og < 0; k++)
        if (s->tq_tied[k] == tr->tied && s->tq_lead[k] == lead)
            og = k;
    if (og < 0) {
        if (s->tq_ngroups == TQ_GROUPS) {
            s->tq_off = true; /* whole-queue passes from now on */
            return;
        }
        int l = 0;
        while (l < s->tq_nleads && s->tq_leads[l] != lead)
            l++;
        if (l == s->tq_nleads) {
            if (l == TQ_LEADS) {
                s->tq_off = true; /* whole-queue passes from now on */
                return;
            }
            s->tq_leads[s->tq_nleads++] = lead;
        }
        og = s->tq_ngroups++;
        s->tq_tied[og] = tr->tied;
        s->tq_lead[og] = lead;
        s->tq_lidx[og] = l;
        if (lead > s->tq_maxlead)
            s->tq_maxlead = lead;
    }
    s->tq_og[j] = og;
    replay_rl_insert(&s->tq_gl, s->qgrp.group[r] * TQ_LEADS + s->tq_lidx[og], r);
    replay_rl_insert(&s->tq_lists, og, r);
    /* A job older than a cursor's: the cursor steps back to it and the
     * next pass walks it forward again (a requeued job; arrivals are the
     * newest). */
    if (r < rpos(s->tq_cu[og]))
        s->tq_cu[og] = r;
    if (r < rpos(s->tq_cl[og]))
        s->tq_cl[og] = r;
}

void replay_tq_remove(struct sim *s, int32_t j)
{
    const struct rjob *rj = &s->jobs[j];
    int32_t r = s->rank[j], og = s->tq_og[j];

    tm_seqindex_set(&s->qgrp, (size_t)r, TM_SEQ_ABSENT);
    s->tq_count[s->qgrp.group[r]]--;
    if (s->tq_traits[rj->shape].tied)
        s->tq_ntied--;
    if (s->tq_traits[rj->shape].tied && rj->tj->model_mask)
        s->tq_nnarrow--;
    if (og < 0)
        return;
    if (s->tq_cu[og] == r)
        s->tq_cu[og] = s->tq_lists.next[r];
    if (s->tq_cl[og] == r)
        s->tq_cl[og] = s->tq_lists.next[r];
    replay_rl_remove(&s->tq_gl, s->qgrp.group[r] * TQ_LEADS + s->tq_lidx[og], r);
    replay_rl_remove(&s->tq_lists, og, r);
    s->tq_og[j] = -1;
}

void replay_tq_freed(struct sim *s, int32_t i)
{
    /* tq_pass + 1: the next pass's list (the pass counts itself first). */
    if (s->tq_freed_at[i] != s->tq_pass + 1) {
        s->tq_freed_at[i] = s->tq_pass + 1;
        s->tq_freed[s->tq_nfreed++] = i;
    }
}

/* How many jobs of request sh node i could hold now, each beside the
 * others, reservations aside. */
static int64_t tq_room(const struct sim *s, const struct shape *sh, int32_t i)
{
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
static int tq_take(struct sim *s, struct tq_input *in, int32_t r)
{
    int32_t j = (int32_t)s->arr[r];
    const struct rjob *rj = &s->jobs[j];
    int32_t g = s->qgrp.group[r];

    if (replay_bq_room(s, in->n) < 0)
        return TM_ENOMEM;
    s->bq[in->n] = s->q[rj->qpos];
    s->bqpos[in->n++] = rj->qpos;
    s->tq_mark[j] = s->tq_gen;
    if (s->tq_ggen[g] != s->tq_gen) {
        s->tq_ggen[g] = s->tq_gen;
        s->tq_gin[g] = 0;
    }
    s->tq_gin[g]++;
    if (s->tq_traits[rj->shape].tied)
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

static struct tq_pos tq_pos_of(const struct sim *s, int32_t r, const struct tq_ages *a)
{
    int32_t j = (int32_t)s->arr[r];
    const struct rjob *rj = &s->jobs[j];
    struct tq_pos p = {tq_tier(rj->submit, s->tq_traits[rj->shape].tied, a), r};

    if (p.tier >= 2)
        p.key = rj->submit - s->tq_lead[s->tq_og[j]];
    return p;
}

/* The key of rank r, first of group og's segment of tier `tier`. */
static int64_t tq_seg_key(const struct sim *s, int32_t r, int og, int tier)
{
    return tier <= 1 ? r : rank_submit(s, r) - s->tq_lead[og];
}

/* Merge the lists' segments [from[og], to[og]) by key, taking jobs until
 * the input holds `want` and then those with the key of the last one
 * taken (*last).  Returns 1 when the segments are exhausted, 0 when cut,
 * < 0. */
static int tq_merge(struct sim *s, int32_t *from, const int32_t *to, int tier, size_t want,
                    struct tq_input *in, struct tq_pos *last)
{
    bool any = false;
    int64_t key[TQ_GROUPS]; /* each segment's first key; INT64_MAX: none */
    int rc;

    /* Each segment's key is read once per job it gives, not once per job
     * taken from any (its job's submit time is a load that misses). */
    for (int og = 0; og < s->tq_ngroups; og++)
        key[og] = from[og] == to[og] || (tier == 0 && !s->tq_tied[og]) || (tier == 1 && s->tq_tied[og])
                      ? INT64_MAX
                      : tq_seg_key(s, from[og], og, tier);
    for (;;) {
        int best = -1;
        int64_t bk = 0;
        for (int og = 0; og < s->tq_ngroups; og++)
            if (key[og] != INT64_MAX && (best < 0 || key[og] < bk)) {
                best = og;
                bk = key[og];
            }
        if (best < 0)
            return 1;
        if (tier > 0 && in->n >= want && any && (tier == 1 || bk != last->key))
            return 0;
        rc = tq_take(s, in, from[best]);
        if (rc < 0)
            return rc;
        from[best] = s->tq_lists.next[from[best]];
        key[best] = from[best] == to[best] ? INT64_MAX : tq_seg_key(s, from[best], best, tier);
        *last = (struct tq_pos){tier, bk};
        any = true;
    }
}

/* The head of the queue in tarmac's order, at least `want` jobs if the
 * queue has them, into s->bq; *cut: where it ends.  0 or < 0. */
static int tq_head(struct sim *s, size_t want, struct tq_input *in, struct tq_pos *cut)
{
    int32_t from[TQ_GROUPS], to[TQ_GROUPS];
    int rc = 1;

    memset(in, 0, sizeof(*in));
    *cut = (struct tq_pos){0, -1}; /* before every job: none taken */
    s->tq_gen++;
    for (int tier = 0; tier < 4 && rc == 1; tier++) {
        for (int og = 0; og < s->tq_ngroups; og++) {
            from[og] = tier <= 1 ? s->tq_lists.head[og] : tier == 2 ? s->tq_cu[og] : s->tq_cl[og];
            to[og] = tier <= 1 ? s->tq_cu[og] : tier == 2 ? s->tq_cl[og] : -1;
        }
        if (tier == 2)
            in->all_aged = true;
        rc = tq_merge(s, from, to, tier, want, in, cut);
    }
    in->nhead = in->n;
    return rc < 0 ? rc : 0;
}

static bool tq_marked(const struct sim *s, int32_t r)
{
    return s->tq_mark[s->arr[r]] == s->tq_gen;
}

/* List gl's first job left out (-1 none).  The walk past the input's
 * jobs is kept for the rest of the try: within a try the input only
 * grows. */
static int32_t tq_lfirst(struct sim *s, size_t gl)
{
    int32_t r = s->tq_lfgen[gl] == s->tq_gen ? s->tq_lf[gl] : s->tq_gl.head[gl];

    while (r >= 0 && tq_marked(s, r))
        r = s->tq_gl.next[r];
    s->tq_lfgen[gl] = s->tq_gen;
    s->tq_lf[gl] = r;
    return r;
}

/* The job left out after rank r in r's list (-1 none). */
static int32_t tq_lnext(const struct sim *s, int32_t r)
{
    for (r = s->tq_gl.next[r]; r >= 0 && tq_marked(s, r);)
        r = s->tq_gl.next[r];
    return r;
}

/* Group g's jobs (request x preemptible) the input does not hold, by
 * arrival rank: a merge of its lists, one per lead. */
struct tq_walk {
    int32_t at[TQ_LEADS];
};

static void tq_walk_init(struct sim *s, size_t g, struct tq_walk *w)
{
    for (int l = 0; l < s->tq_nleads; l++)
        w->at[l] = tq_lfirst(s, g * TQ_LEADS + (size_t)l);
}

/* The walk's next job left out (-1 none). */
static int32_t tq_walk_next(const struct sim *s, struct tq_walk *w)
{
    int best = -1;
    int32_t r;

    for (int l = 0; l < s->tq_nleads; l++)
        if (w->at[l] >= 0 && (best < 0 || w->at[l] < w->at[best]))
            best = l;
    if (best < 0)
        return -1;
    r = w->at[best];
    w->at[best] = tq_lnext(s, r);
    return r;
}

/* Add group g's jobs left out up to `upto` in the order (ties
 * included): within a lead's list the order is arrival's, so each list
 * is walked up to its first job past `upto`. */
static int tq_extras(struct sim *s, size_t g, struct tq_pos upto, const struct tq_ages *a, struct tq_input *in)
{
    for (int l = 0; l < s->tq_nleads; l++) {
        int32_t r = tq_lfirst(s, g * TQ_LEADS + (size_t)l);
        while (r >= 0 && pos_le(tq_pos_of(s, r, a), upto)) {
            int32_t next = tq_lnext(s, r);
            int rc = tq_take(s, in, r);
            if (rc < 0)
                return rc;
            r = next;
        }
    }
    return 0;
}

/* Where group g must reach to hold its e-th job left out (by arrival):
 * that job's place, or *at if further already. */
static void tq_extend(struct sim *s, size_t g, int32_t e, const struct tq_ages *a, struct tq_pos *at)
{
    struct tq_walk w;
    int32_t r, m = -1;

    tq_walk_init(s, g, &w);
    while (e-- > 0 && (r = tq_walk_next(s, &w)) >= 0)
        m = r;
    if (m >= 0) {
        struct tq_pos p = tq_pos_of(s, m, a);
        if (!pos_le(p, *at))
            *at = p;
    }
}

/* Group g's first job in the order that the input leaves out and its
 * place: the least among its lists' first ones.  -1 none. */
static int32_t tq_first_out(struct sim *s, size_t g, const struct tq_ages *a, struct tq_pos *ret)
{
    int32_t best = -1;

    for (int l = 0; l < s->tq_nleads; l++) {
        int32_t r = tq_lfirst(s, g * TQ_LEADS + (size_t)l);
        if (r >= 0) {
            struct tq_pos p = tq_pos_of(s, r, a);
            if (best < 0 || !pos_le(*ret, p)) {
                *ret = p;
                best = r;
            }
        }
    }
    return best;
}

/* Group g's first job left out by arrival (-1 none). */
static int32_t tq_first_arrived_out(struct sim *s, size_t g)
{
    struct tq_walk w;

    tq_walk_init(s, g, &w);
    return tq_walk_next(s, &w);
}

/* The probe of group g, just before its first job left out (rank r at
 * place at): the group's request and preemptibility and its least
 * estimate queued, so that it sorts before every job of the group left
 * out (the same key or an earlier tier, the least work of its group, the
 * odd id below r's even one).  0 or < 0. */
static int tq_probe(struct sim *s, size_t *n, size_t g, int32_t r, struct tq_pos at)
{
    const struct rjob *rj = &s->jobs[s->arr[r]];
    struct tm_sched_job *p;
    int64_t est;
    int rc = replay_bq_room(s, *n);

    if (rc < 0)
        return rc;
    p = &s->bq[*n];
    *p = s->q[rj->qpos];
    est = tm_seqindex_min(&s->qgrp, g);
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
        p->submit_ms = at.key + tm_sched_tarmac_lead_ms(&s->cfg->params, p, s->tq_traits[rj->shape].constrained);
    s->bqpos[(*n)++] = -1 - (int32_t)g;
    return 0;
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
static bool tq_aged_quiet(struct sim *s, const struct tm_sched_result *r, const struct tq_input *in,
                          int32_t maxres, int64_t now)
{
    int32_t flexible = 0;
    int64_t *soon = s->tq_soon;

    if (s->tq_nnarrow > 0 || maxres > TQ_RES_MAX)
        return false;
    for (size_t k = 0; k < r->nreservations; k++)
        if ((size_t)r->reservations[k].job < in->nhead &&
            !s->tq_traits[s->jobs[s->qjob[s->bqpos[r->reservations[k].job]]].shape].tied)
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
        int64_t est = s->bq[pl->job].estimate_ms, e = est > 0 ? now + est : INT64_MAX;
        for (int w = 0; w < 2; w++)
            if (e > soon[2 * pl->node + w])
                soon[2 * pl->node + w] = e;
    }
    for (size_t x = 0; x < s->nactive; x++)
        for (int pre = 0; pre < 2; pre++) {
            size_t g = (size_t)s->active[x] * 2 + (size_t)pre;
            const struct shape *sh = &s->shapes[s->active[x]];
            int32_t m = tq_first_arrived_out(s, g);
            int64_t best[TQ_RES_MAX];
            int nb = 0;
            if (m < 0 || rank_submit(s, m) > now - tm_sched_tarmac_urgent_ms(&s->cfg->params))
                continue; /* none of g aged is left out: they go by arrival */
            if (flexible < s->tq_traits[s->active[x]].flexible_limit)
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
                best[maxres - 1] > tm_sched_tarmac_risk_deadline(&s->cfg->params, rank_submit(s, m)))
                return false;
        }
    return true;
}

/* Whether the pass over the input (real jobs first, then probes) decided
 * what the pass over the whole queue would; see the proof above.
 * *ret_grow: the groups whose probe was placed or reserved for get a
 * longer reach (1), or the head a longer length (0), or neither helps
 * (-1). */
static bool tq_proved(struct sim *s, const struct tm_sched_result *r, const struct tq_input *in,
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
        else if ((size_t)r->reservations[k].job < in->nhead)
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
    if (in->ntied != s->tq_ntied)
        return false;
    return in->all_aged || tq_aged_quiet(s, r, in, maxres, now);
}

/* Walk each list's cursors forward to now's ages. */
static void tq_cursors(struct sim *s, const struct tq_ages *a)
{
    for (int og = 0; og < s->tq_ngroups; og++) {
        int32_t *cu = &s->tq_cu[og], *cl = &s->tq_cl[og];
        while (*cu >= 0 && rank_submit(s, *cu) <= a->aged)
            *cu = s->tq_lists.next[*cu];
        if (rpos(*cl) < rpos(*cu))
            *cl = *cu;
        while (*cl >= 0 && rank_submit(s, *cl) <= a->level1)
            *cl = s->tq_lists.next[*cl];
    }
}

/* Group g's probe was placed or reserved for: the group's part of the
 * input reaches over its next e jobs left out, e = 1 at first in a pass
 * and four times more at each time after. */
static void tq_reach(struct sim *s, size_t g, const struct tq_ages *a, struct tq_pos cut)
{
    if (s->tq_rgen[g] != s->tq_pass) {
        s->tq_rgen[g] = s->tq_pass;
        s->tq_reach[g] = cut;
        s->tq_e[g] = 1;
    } else if (s->tq_e[g] < INT32_MAX / 4) {
        s->tq_e[g] *= 4;
    }
    tq_extend(s, g, s->tq_e[g], a, &s->tq_reach[g]);
}

/* Each group with jobs left out that the nodes freed since the last pass
 * could hold reaches over as many of them (at most TQ_FREED_REACH) from
 * the first try on: without, its probe would be placed and the pass run
 * again. */
static void tq_seed(struct sim *s, size_t nfreed, const struct tq_ages *a, struct tq_pos cut)
{
    for (size_t x = 0; x < s->nactive; x++) {
        const struct shape *sh = &s->shapes[s->active[x]];
        int64_t k = 0;
        for (size_t f = 0; f < nfreed && k < TQ_FREED_REACH; f++)
            k += tq_room(s, sh, s->tq_freed[f]);
        if (k == 0)
            continue;
        for (int pre = 0; pre < 2; pre++) {
            size_t g = (size_t)s->active[x] * 2 + (size_t)pre;
            int32_t inside = s->tq_ggen[g] == s->tq_gen ? s->tq_gin[g] : 0;
            if (s->tq_count[g] <= inside)
                continue;
            s->tq_rgen[g] = s->tq_pass;
            s->tq_reach[g] = cut;
            s->tq_e[g] = k < TQ_FREED_REACH ? (int32_t)k : TQ_FREED_REACH;
            tq_extend(s, g, s->tq_e[g], a, &s->tq_reach[g]);
        }
    }
}

int replay_pass_tarmac(struct sim *s, int64_t now, struct tm_replay_stats *st)
{
    struct tm_sched_input si = {.policy = s->cfg->policy, .params = s->cfg->params};
    int32_t maxres = tm_sched_max_reservations(&si);
    struct tq_ages a = {now - tm_sched_tarmac_urgent_ms(&s->cfg->params),
                        now - tm_sched_tarmac_level_ms(&s->cfg->params)};
    size_t want = s->cfg->tarmac_head > 0 ? s->cfg->tarmac_head : TQ_HEAD;
    size_t nnew = s->tq_nnew, nfreed = s->tq_nfreed;
    bool first = true;

    /* Jobs queued and nodes freed from here on (evictions the pass makes)
     * are the next pass's. */
    s->tq_nnew = 0;
    s->tq_nfreed = 0;
    s->tq_pass++;
    if (s->tq_off)
        return replay_pass_whole(s, now, st);
    tq_cursors(s, &a);
    for (;;) {
        struct tm_sched_result r = {0};
        struct tq_input in;
        struct tq_pos cut;
        size_t n;
        bool held = true, blocked;
        int grow, rc = tq_head(s, want, &in, &cut);
        if (rc < 0)
            return rc;
        if (in.n >= s->nq)
            break;
        if (first)
            tq_seed(s, nfreed, &a, cut);
        first = false;
        /* Groups that reach past the head, their jobs up to there. */
        for (size_t x = 0; x < s->nactive && rc == 0; x++)
            for (int pre = 0; pre < 2 && rc == 0; pre++) {
                size_t g = (size_t)s->active[x] * 2 + (size_t)pre;
                if (s->tq_rgen[g] == s->tq_pass && !pos_le(s->tq_reach[g], cut))
                    rc = tq_extras(s, g, s->tq_reach[g], &a, &in);
            }
        /* The jobs queued since the last pass: an arrival that fits is
         * started by the pass, and with it in the input one run proves it
         * (without, many more passes ran twice; adding each group's first
         * job left out as well cost more than it saved). */
        for (size_t k = 0; k < nnew && rc == 0; k++) {
            int32_t j = s->tq_new[k];
            if (s->jobs[j].qpos >= 0 && s->tq_mark[j] != s->tq_gen)
                rc = tq_take(s, &in, s->rank[j]);
        }
        if (rc < 0)
            return rc;
        for (size_t k = 0; k < s->nheld && held; k++) {
            int32_t j = s->held[k];
            held = s->jobs[j].qpos < 0 || s->tq_mark[j] == s->tq_gen;
        }
        if (!held) {
            want *= 4;
            continue;
        }
        n = in.n;
        for (size_t x = 0; x < s->nactive && rc == 0; x++)
            for (int pre = 0; pre < 2 && rc == 0; pre++) {
                size_t g = (size_t)s->active[x] * 2 + (size_t)pre;
                int32_t inside = s->tq_ggen[g] == s->tq_gen ? s->tq_gin[g] : 0, m;
                struct tq_pos at;
                if (s->tq_count[g] <= inside)
                    continue;
                m = tq_first_out(s, g, &a, &at);
                rc = m < 0 ? TM_EINVAL /* counted but absent: a bug */ : tq_probe(s, &n, g, m, at);
            }
        if (rc < 0)
            return rc;
        rc = replay_sched_once(s, now, s->bq, n, &r);
        if (rc < 0)
            return rc;
        if (tq_proved(s, &r, &in, maxres, now, &grow)) {
            r.nnotes = in.n;
            return replay_pass_apply(s, now, st, s->bq, in.n, s->bqpos, &r, &blocked);
        }
        /* A probe placed or reserved for: its group's next jobs left out
         * would have been, so the group reaches for them (e of each, four
         * times more on each try); anything else, a longer head. */
        if (grow > 0) {
            for (size_t k = 0; k < r.nplacements; k++)
                if ((size_t)r.placements[k].job >= in.n)
                    tq_reach(s, (size_t)(-1 - s->bqpos[r.placements[k].job]), &a, cut);
            for (size_t k = 0; k < r.nreservations; k++)
                if ((size_t)r.reservations[k].job >= in.n)
                    tq_reach(s, (size_t)(-1 - s->bqpos[r.reservations[k].job]), &a, cut);
        } else {
            want *= 4;
        }
        tm_sched_result_release(&r);
        if (grow < 0)
            break;
    }
    return replay_pass_whole(s, now, st);
}
