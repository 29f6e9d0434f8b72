/*
 * controller/reconcile/schedule.c: step 2 of the pass, the adapter to
 * controller/sched/: the snapshot's queued jobs, ready nodes and
 * allocations become the scheduler's input, its placements and notes
 * become plan ops.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "controller/reconcile/internal.h"
#include "controller/sched/scheduler.h"
#include "core/err.h"

/* Step 2: run the scheduler over the ready nodes. */

/* A queued preemptible job with a deadline whose on-demand start cannot
 * wait another tick.  The planner switches such a job (TM_PLANNER_DEADLINE_OD)
 * only when it is still unplaced after scheduling; seen here first, it is
 * offered on-demand pools alone in the same pass instead of starting on
 * spot and being taken off it one pass later.  Same rule and inputs as the
 * planner's: its estimate (or the default use), the slowest boot of the
 * on-demand pools it may use, one tick. */
static bool deadline_due(const struct pass *p, const struct tm_snap_job *j)
{
    int64_t boot = 0, e;
    if (!j->deadline_ms || !j->preemptible || j->on_demand_from_ms > 0)
        return false;
    for (size_t pi = 0; pi < p->cfg->npools; pi++) {
        const struct tm_config_pool *pool = &p->cfg->pools[pi];
        if (strcmp(pool->capacity_type, "on_demand") == 0 && tm_rc_pool_accepts(pool, (int)pi, j) &&
            tm_rc_pool_boot_ms(p->cfg, pool) > boot)
            boot = tm_rc_pool_boot_ms(p->cfg, pool);
    }
    e = tm_rc_job_estimate(p->est, j);
    return p->in->now_ms + p->cfg->tick_interval_ms >
           tm_planner_deadline_switch_ms(j->deadline_ms, e > 0 ? e : TM_RC_DEFAULT_USE_MS, boot,
                                         p->cfg->tick_interval_ms);
}

/* Nodes a spot substitute is on its way to replace (linked, not gone).
 * Such a node takes no new work meanwhile: its jobs move to the
 * substitute once that is ready, and one started in between (perhaps one
 * that cannot checkpoint) would keep the on-demand node paid for to its
 * end.  Marks subbed[node index]. */
static void mark_substituted(const struct pass *p, bool *subbed)
{
    const struct tm_snapshot *s = p->in->snap;
    for (size_t ri = 0; ri < s->nnodes; ri++) {
        const struct tm_snap_node *r = &s->nodes[ri];
        int oi = r->replaces_node_id ? tm_rc_node_index(p, r->replaces_node_id) : -1;
        if (oi >= 0 && !p->node_gone[ri] && r->state != TM_NODE_TERMINATING)
            subbed[oi] = true;
    }
}

/* One "place" action per job, with every node of a gang inside it, so
 * tarmac_apply places all of it or none.  first/by_job: each job's
 * placements (tm_rc_schedule's counting sort). */
static void emit_placements(struct pass *p, const struct tm_sched_result *rs,
                            const struct tm_sched_job *jobs, const int32_t *job_of,
                            const int32_t *node_of, const char *const *why_of, const size_t *first,
                            const size_t *by_job, bool *job_placed)
{
    const struct tm_snapshot *s = p->in->snap;
    char why[256];

    for (size_t k = 0; k < rs->nplacements; k++) {
        const struct tm_sched_placement *pl = &rs->placements[k];
        if (job_placed[job_of[pl->job]])
            continue;
        const struct tm_snap_job *j = &s->jobs[job_of[pl->job]];
        const char *why_text = why_of[pl->job] ? why_of[pl->job] : "placed";
        snprintf(why, sizeof(why), "%s: %s", tm_sched_policy_name(p->in->policy), why_text);
        cJSON *a = tm_rc_action(p, "place", why);
        tm_rc_put_num(p, a, "job", (double)j->id);
        cJSON *arr = a ? cJSON_AddArrayToObject(a, "allocs") : NULL;
        if (a && !arr)
            p->err = TM_ENOMEM;
        cJSON *in_o = tm_rc_inputs(p, a);
        tm_rc_put_num(p, in_o, "gpus", j->gpus);
        tm_rc_put_num(p, in_o, "gpu_milli", j->gpu_milli);
        tm_rc_put_num(p, in_o, "waited_ms", (double)(p->in->now_ms - j->submitted_ms));
        tm_rc_put_num(p, in_o, "estimate_s", (double)(jobs[pl->job].estimate_ms / 1000));
        if (j->estimate_ms <= 0 && jobs[pl->job].estimate_ms > 0)
            tm_rc_put_str(p, in_o, "estimate_from",
                          jobs[pl->job].estimate_known ? "earlier runs of this job" : "history of similar jobs");
        for (size_t m = first[pl->job]; m < first[pl->job + 1] && arr; m++) {
            const struct tm_sched_placement *q = &rs->placements[by_job[m]];
            const struct tm_snap_node *n = &s->nodes[node_of[q->node]];
            cJSON *o = cJSON_CreateObject();
            if (!o) {
                p->err = TM_ENOMEM;
                break;
            }
            cJSON_AddItemToArray(arr, o);
            tm_rc_put_num(p, o, "node", (double)n->id);
            tm_rc_put_num(p, o, "gpu_mask", q->gpu_mask);
            tm_rc_put_num(p, o, "gpu_milli", q->gpu_milli);
            tm_rc_put_num(p, o, "cpu_milli", (double)j->cpu_milli);
            tm_rc_put_num(p, o, "memory_mib", (double)j->memory_mib);
            if (q->loaned && !cJSON_AddTrueToObject(o, "loaned"))
                p->err = TM_ENOMEM;
            p->node_busy[node_of[q->node]] = true;
            p->node_placed[node_of[q->node]] = true;
        }
        job_placed[job_of[pl->job]] = true;
        p->plan.placed++;
    }
}

/* The rest of the scheduler's answer: evictions of loaned work (first in
 * the plan's order after placements is fine: the apply guards each on the
 * state it was computed from), new reservations, and why the others wait. */
static void emit_holds_and_waits(struct pass *p, const struct tm_sched_result *rs,
                                 const int32_t *job_of, const int32_t *node_of,
                                 const int32_t *alloc_of, const bool *job_placed)
{
    const struct tm_snapshot *s = p->in->snap;
    char why[512];

    for (size_t k = 0; k < rs->npreemptions; k++) {
        const struct tm_sched_preemption *pe = &rs->preemptions[k];
        const struct tm_snap_alloc *al = &s->allocs[alloc_of[pe->alloc]];
        const struct tm_snap_job *owner = &s->jobs[job_of[pe->job]];
        snprintf(why, sizeof(why), "loaned capacity returned to job %" PRId64 " it was reserved for",
                 owner->id);
        cJSON *a = tm_rc_action(p, "preempt", why);
        tm_rc_put_num(p, a, "job", (double)al->job_id);
        cJSON *in_o = tm_rc_inputs(p, a);
        tm_rc_put_num(p, in_o, "node", (double)al->node_id);
        tm_rc_put_num(p, in_o, "for_job", (double)owner->id);
        p->plan.preempted++;
    }
    for (size_t k = 0; k < rs->nreservations; k++) {
        const struct tm_sched_reservation *rv = &rs->reservations[k];
        const struct tm_snap_job *j = &s->jobs[job_of[rv->job]];
        const struct tm_snap_node *n = &s->nodes[node_of[rv->node]];
        if (job_placed[job_of[rv->job]] || j->hold_node_id == n->id)
            continue;
        snprintf(why, sizeof(why), "reserved node %" PRId64 " from %" PRId64 " s from now", n->id,
                 (rv->start_ms - p->in->now_ms) / 1000);
        cJSON *a = tm_rc_action(p, "reserve", why);
        tm_rc_put_num(p, a, "job", (double)j->id);
        tm_rc_put_num(p, a, "node", (double)n->id);
        tm_rc_put_num(p, a, "start_ms", (double)rv->start_ms);
        p->plan.reserved++;
    }
    for (size_t q = 0; q < rs->nnotes; q++) {
        const struct tm_sched_note *note = &rs->notes[q];
        if (note->verdict == TM_SCHED_PLACED || job_placed[job_of[note->job]])
            continue;
        const struct tm_snap_job *j = &s->jobs[job_of[note->job]];
        snprintf(why, sizeof(why), "%s: %s", tm_sched_verdict_name(note->verdict),
                 note->why ? note->why : "");
        tm_rc_no_show_why(p, j, why, sizeof(why));
        /* kept off the clouds by its group's burst rule (burst.c) */
        int64_t owned_start = 0;
        if (tm_rc_burst_waits(p, (size_t)job_of[note->job]))
            owned_start = tm_rc_burst_wait_why(p, (size_t)job_of[note->job], why, sizeof(why));
        p->plan.waiting++;
        /* A reason is recorded when it changes, not every pass: a queue of
         * 100k jobs must not rewrite 100k rows per tick. */
        if (strcmp(why, j->reason) == 0)
            continue;
        cJSON *a = tm_rc_action(p, "wait", why);
        tm_rc_put_num(p, a, "job", (double)j->id);
        cJSON *in_o = tm_rc_inputs(p, a);
        tm_rc_put_str(p, in_o, "policy", tm_sched_policy_name(p->in->policy));
        /* The budget is checked first (a job it holds never gets here):
         * a job that waits here on quota is one its budget admits. */
        if (note->verdict == TM_SCHED_WAIT_QUOTA)
            tm_rc_put_str(p, in_o, "held_by", "quota");
        if (note->start_ms > 0)
            tm_rc_put_num(p, in_o, "reserved_start_ms", (double)note->start_ms);
        if (owned_start > 0 && owned_start != TM_BURST_NO_START)
            tm_rc_put_num(p, in_o, "projected_owned_start_ms", (double)owned_start);
    }
}

/* The running allocations on the nodes the pass hands the scheduler
 * (sched_node: snapshot node -> sched node, -1 none), each with its
 * expected end; every node holding one is marked busy.  Returns how many. */
static size_t sched_allocs(struct pass *p, const int32_t *sched_node, struct tm_sched_alloc *allocs,
                           int32_t *alloc_of)
{
    const struct tm_snapshot *s = p->in->snap;
    const struct tm_estimator *est = p->est;
    size_t na = 0;

    for (size_t a = 0; a < s->nallocs; a++) {
        const struct tm_snap_alloc *al = &s->allocs[a];
        int ni = tm_rc_node_index(p, al->node_id);
        int32_t sn = ni >= 0 ? sched_node[ni] : -1;
        if (ni >= 0)
            p->node_busy[ni] = true;
        if (sn < 0)
            continue;
        int ji = tm_rc_job_index(p, al->job_id);
        int64_t end = p->in->now_ms + 3600000;
        bool pre = false;
        if (ji >= 0) {
            const struct tm_snap_job *j = &s->jobs[ji];
            bool known;
            int64_t e = tm_rc_job_estimate_known(est, j, &known);
            pre = j->preemptible;
            if (e > 0)
                end = p->in->now_ms + tm_estimate_left(e, p->in->now_ms - j->started_ms, known);
        }
        alloc_of[na] = (int32_t)a;
        allocs[na++] = (struct tm_sched_alloc){
            .job_id = al->job_id, .node = sn, .gpu_mask = al->gpu_mask,
            .gpu_milli = al->gpu_milli, .cpu_milli = al->cpu_milli,
            .memory_mib = al->memory_mib, .end_ms = end, .preemptible = pre,
            .loaned = al->loaned,
        };
    }
    return na;
}

/* The queued jobs not held back, each with the pools it may use as its
 * model mask and the node it holds (sched_node as above).  Returns how
 * many. */
static size_t sched_jobs(struct pass *p, const int32_t *sched_node, struct tm_sched_job *jobs, int32_t *job_of)
{
    const struct tm_snapshot *s = p->in->snap;
    const struct tm_estimator *est = p->est;
    size_t nj = 0;

    for (size_t ji = 0; ji < s->njobs; ji++) {
        const struct tm_snap_job *j = &s->jobs[ji];
        uint64_t mask = 0;
        if (j->state != TM_JOB_QUEUED || p->job_held[ji])
            continue;
        bool od_only = deadline_due(p, j);
        for (size_t pi = 0; pi < p->cfg->npools && pi < 63; pi++)
            if (tm_rc_pool_accepts(&p->cfg->pools[pi], (int)pi, j) &&
                (!od_only || strcmp(p->cfg->pools[pi].capacity_type, "on_demand") == 0))
                mask |= 1ull << pi;
        if (!mask)
            mask = 1ull << 63; /* no pool can take it: a model no node has */
        /* A held node that is gone or no longer schedulable: no hold. */
        int hn = j->hold_node_id ? tm_rc_node_index(p, j->hold_node_id) : -1;
        int32_t hold = hn >= 0 && sched_node[hn] >= 0 ? sched_node[hn] + 1 : 0;
        bool known;
        int64_t e = tm_rc_job_estimate_known(est, j, &known);
        jobs[nj] = (struct tm_sched_job){
            .id = j->id, .submit_ms = j->submitted_ms, .estimate_ms = e, .estimate_known = known,
            .cpu_milli = j->cpu_milli, .memory_mib = j->memory_mib, .model_mask = mask,
            .gpus = j->gpus, .gpu_milli = j->gpus > 0 ? 1000 : j->gpu_milli, .nodes = j->nodes,
            .priority = j->priority, .klass = j->klass, .preemptible = j->preemptible,
            .hold_node = hold, .hold_start_ms = hold ? j->hold_start_ms : 0,
        };
        job_of[nj++] = (int32_t)ji;
    }
    return nj;
}

void tm_rc_schedule(struct pass *p, bool *job_placed)
{
    const struct tm_snapshot *s = p->in->snap;
    struct tm_sched_job *jobs = NULL;
    struct tm_sched_node *nodes = NULL;
    struct tm_sched_alloc *allocs = NULL;
    int32_t *node_of = NULL;   /* sched node index -> snapshot node index */
    int32_t *job_of = NULL;    /* sched job index -> snapshot job index */
    int32_t *sched_node = NULL;/* snapshot node index -> sched node index */
    int32_t *alloc_of = NULL;  /* sched alloc index -> snapshot alloc index */
    bool *subbed = NULL;       /* snapshot node index -> a spot substitute is coming */
    const char **why_of = NULL;/* sched job index -> its note's reason */
    size_t *first = NULL;      /* sched job index -> its first entry in by_job */
    size_t *by_job = NULL;     /* placement indices grouped by job, in order */
    struct tm_sched_result res = {0};
    struct rc_quota rq = {0};
    size_t nj = 0, nn = 0, na = 0;
    int r;

    jobs = calloc(s->njobs + 1, sizeof(*jobs));
    job_of = calloc(s->njobs + 1, sizeof(*job_of));
    nodes = calloc(s->nnodes + 1, sizeof(*nodes));
    node_of = calloc(s->nnodes + 1, sizeof(*node_of));
    sched_node = calloc(s->nnodes + 1, sizeof(*sched_node));
    subbed = calloc(s->nnodes + 1, sizeof(*subbed));
    allocs = calloc(s->nallocs + 1, sizeof(*allocs));
    alloc_of = calloc(s->nallocs + 1, sizeof(*alloc_of));
    if (!jobs || !job_of || !nodes || !node_of || !sched_node || !allocs || !alloc_of || !subbed) {
        p->err = TM_ENOMEM;
        goto out;
    }
    mark_substituted(p, subbed);

    /* The scheduler's "model" is the pool: a pool has one GPU model and one
     * capacity type, so a job's mask says which pools it may use. */
    for (size_t ni = 0; ni < s->nnodes; ni++) {
        const struct tm_snap_node *n = &s->nodes[ni];
        sched_node[ni] = -1;
        if (!p->node_ready[ni] || p->node_gone[ni] || n->pool < 0 || n->pool >= 63)
            continue;
        /* The elastic placement's preference: owned nodes first (they
         * are paid for whether or not work runs, and never released: work
         * gathered there lets bought nodes empty and go), then the
         * smallest nodes, then the oldest (ids grow with launches), as the
         * elastic replay. */
        bool bought = !p->cfg->pools[n->pool].owned;
        nodes[nn] = (struct tm_sched_node){
            .id = n->id, .cpu_milli = n->cpu_milli, .memory_mib = n->memory_mib,
            .gpus = n->gpus, .model = n->pool, .spot = n->capacity == TM_CAPACITY_SPOT,
            .schedulable = !subbed[ni],
            .rank = ((int64_t)bought << 56) + ((int64_t)n->gpus << 40) + (n->id & ((1LL << 40) - 1)),
        };
        node_of[nn] = (int32_t)ni;
        sched_node[ni] = (int32_t)nn++;
    }
    na = sched_allocs(p, sched_node, allocs, alloc_of);
    nj = sched_jobs(p, sched_node, jobs, job_of);
    if ((r = tm_rc_quota_begin(p, &rq, jobs, job_of, nj)) < 0) {
        p->err = r;
        goto out;
    }

    struct tm_sched_input in = {
        .jobs = jobs, .njobs = nj, .nodes = nodes, .nnodes = nn, .allocs = allocs,
        .nallocs = na, .now_ms = p->in->now_ms, .policy = p->in->policy,
        .params = {.starvation_ms = p->cfg->starvation_ms, .short_ms = 30 * 60000, .align_ends = true,
                   .elastic = true},
        .quota = rq.on ? &rq.view : NULL,
    };
    r = tm_sched_run(&in, &res);
    if (r < 0) {
        p->err = r;
        goto out;
    }

    /* Each job's note and placements, found in O(1): a pass places up to
     * thousands of jobs, so no scan of every note or placement per job. */
    why_of = calloc(nj + 1, sizeof(*why_of));
    first = calloc(nj + 2, sizeof(*first));
    by_job = calloc(res.nplacements + 1, sizeof(*by_job));
    if (!why_of || !first || !by_job) {
        p->err = TM_ENOMEM;
        goto out;
    }
    for (size_t q = 0; q < res.nnotes; q++)
        if (res.notes[q].why)
            why_of[res.notes[q].job] = res.notes[q].why;
    for (size_t k = 0; k < res.nplacements; k++)
        first[res.placements[k].job + 1]++;
    for (size_t jx = 0; jx < nj; jx++)
        first[jx + 1] += first[jx];
    /* Counting sort: first[j] ends at job j's end, then shifts back to its start. */
    for (size_t k = 0; k < res.nplacements; k++)
        by_job[first[res.placements[k].job]++] = k;
    for (size_t jx = nj; jx > 0; jx--)
        first[jx] = first[jx - 1];
    first[0] = 0;

    emit_placements(p, &res, jobs, job_of, node_of, why_of, first, by_job, job_placed);
    /* The scheduler's own estimate of a blocked job's start on owned
     * capacity: its reservation there; then the burst rule (burst.c). */
    for (size_t q = 0; q < res.nnotes; q++) {
        const struct tm_sched_note *note = &res.notes[q];
        const struct tm_snap_node *n = note->node >= 0 ? &s->nodes[node_of[note->node]] : NULL;
        if (n && note->start_ms > 0 && n->pool >= 0 && p->cfg->pools[n->pool].owned)
            p->job_owned_start[job_of[note->job]] = note->start_ms;
    }
    tm_rc_burst(p, job_placed);
    tm_rc_quota_reclaims(p, &rq, &res, job_of);
    emit_holds_and_waits(p, &res, job_of, node_of, alloc_of, job_placed);
out:
    tm_rc_quota_end(p, &rq);
    tm_sched_result_release(&res);
    free(jobs);
    free(job_of);
    free(nodes);
    free(node_of);
    free(sched_node);
    free(subbed);
    free(allocs);
    free(alloc_of);
    free(why_of);
    free(first);
    free(by_job);
}
