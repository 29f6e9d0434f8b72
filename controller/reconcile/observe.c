/*
 * controller/reconcile/observe.c: step 1 of the pass.  Each live node is
 * matched to what its provider lists (by instance id, else by launch
 * token) and marked ready, adopted or gone (its jobs requeued, the
 * attempt's GPU time lost); interruption notices cordon a node and
 * checkpoint its checkpointable jobs; instances nobody owns are orphans.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "controller/reconcile/internal.h"
#include "core/err.h"

/* Instances of one listing sorted by a key (id or token) for bsearch. */
struct inst_index {
    const char *key;
    int32_t index;
};

static int cmp_inst_index(const void *a, const void *b)
{
    return strcmp(((const struct inst_index *)a)->key, ((const struct inst_index *)b)->key);
}

static int inst_index_find(const struct inst_index *ix, size_t n, const char *key)
{
    struct inst_index k = {.key = key};
    const struct inst_index *hit;
    if (!key[0])
        return -1;
    hit = bsearch(&k, ix, n, sizeof(*ix), cmp_inst_index);
    return hit ? hit->index : -1;
}

static const struct tm_observed *observed_for(struct pass *p, int provider)
{
    if (provider < 0 || (size_t)provider >= p->in->nobserved)
        return NULL;
    return &p->in->observed[provider];
}

static void requeue_jobs_of_gone_node(struct pass *p, size_t ni, const char *state);
static void spot_notice(struct pass *p, size_t ni, int64_t notice_ms, const char *source);

static void node_gone(struct pass *p, size_t ni, const char *state, const char *reason)
{
    const struct tm_snap_node *n = &p->in->snap->nodes[ni];
    /* A gang's attempt may still run on a silent member nobody has
     * stopped yet: this member stays as it is (taking no work) until that
     * one is fenced too, then the gang leaves whole. */
    if (tm_rc_gang_waits(p, ni)) {
        p->node_ready[ni] = false;
        return;
    }
    /* Its jobs first, each with the numbers of the attempt it loses. */
    requeue_jobs_of_gone_node(p, ni, state);
    cJSON *a = tm_rc_action(p, "node_gone", reason);
    tm_rc_put_num(p, a, "node", (double)n->id);
    tm_rc_put_str(p, a, "state", state);
    cJSON *in = tm_rc_inputs(p, a);
    tm_rc_put_str(p, in, "instance_id", p->node_instance[ni]);
    tm_rc_put_str(p, in, "was", tm_node_state_name(n->state));
    p->node_gone[ni] = true;
    p->plan.gone++;
}

/* A gang's set is adopted whole or not at all: while the call that buys it
 * is in flight (or after a crash in the middle of it) the cloud may list
 * some members and not others, and a member adopted alone would be taken
 * back when the set is released.  Marks partial[ni] for each requested
 * member of a set of which some requested member has no live instance
 * listed; those rows are launched again with their own tokens instead (the
 * providers find what exists by token), and the daemon's in-flight set
 * keeps that from asking twice.  Returns NULL when out of memory. */
static bool *partial_sets(struct pass *p, struct inst_index **by_id, struct inst_index **by_token)
{
    const struct tm_snapshot *s = p->in->snap;
    bool *partial = calloc(s->nnodes + 1, sizeof(bool));
    char (*key)[TM_ID_MAX] = calloc(s->nnodes + 1, sizeof(*key));
    bool *alive = calloc(s->nnodes + 1, sizeof(bool));

    if (!partial || !key || !alive) {
        free(partial);
        partial = NULL;
        goto out;
    }
    for (size_t ni = 0; ni < s->nnodes; ni++) {
        const struct tm_snap_node *n = &s->nodes[ni];
        int prov = n->pool >= 0 ? p->pool_provider[n->pool] : -1;
        const struct tm_observed *obs = observed_for(p, prov);
        if (n->state != TM_NODE_REQUESTED || !obs)
            continue;
        tm_launch_set_key(n->token, key[ni]);
        if (!key[ni][0])
            continue;
        int hit = inst_index_find(by_id[prov], obs->n, n->instance_id);
        if (hit < 0)
            hit = inst_index_find(by_token[prov], obs->n, n->token);
        alive[ni] = hit >= 0 && obs->instances[hit].state != TM_INSTANCE_TERMINATED &&
                    obs->instances[hit].state != TM_INSTANCE_STOPPED &&
                    obs->instances[hit].state != TM_INSTANCE_STOPPING;
    }
    for (size_t ni = 0; ni < s->nnodes; ni++) {
        if (!key[ni][0])
            continue;
        for (size_t k = 0; k < s->nnodes && !partial[ni]; k++)
            partial[ni] = key[k][0] && !alive[k] && strcmp(key[k], key[ni]) == 0;
    }
out:
    free(key);
    free(alive);
    return partial;
}

/* p->node_fenced: the provider's listing confirms the node's instance
 * terminated, or a complete listing no longer has it.  Filled for every
 * node before any is given up, so that a gang's member knows whether the
 * others are fenced (tm_rc_gang_waits). */
static void fenced_scan(struct pass *p, struct inst_index **by_id, struct inst_index **by_token)
{
    const struct tm_snapshot *s = p->in->snap;

    for (size_t ni = 0; ni < s->nnodes; ni++) {
        const struct tm_snap_node *n = &s->nodes[ni];
        int prov = n->pool >= 0 ? p->pool_provider[n->pool] : -1;
        const struct tm_observed *obs = observed_for(p, prov);
        if (!obs)
            continue;
        int hit = inst_index_find(by_id[prov], obs->n, n->instance_id);
        if (hit < 0)
            hit = inst_index_find(by_token[prov], obs->n, n->token);
        p->node_fenced[ni] = hit >= 0 ? obs->instances[hit].state == TM_INSTANCE_TERMINATED : obs->complete;
    }
}

/* Whether token is the stem of a set some requested row belongs to: an
 * instance a set launch made and has not yet tagged with its member's own
 * token (EC2 CreateFleet tags the whole set with the stem first).  It is
 * the set's, not an orphan: the set's relaunch finds and tags it. */
static bool set_pending(const struct pass *p, const char *token)
{
    const struct tm_snapshot *s = p->in->snap;
    char key[TM_ID_MAX];

    if (!token[0])
        return false;
    for (size_t ni = 0; ni < s->nnodes; ni++) {
        if (s->nodes[ni].state != TM_NODE_REQUESTED)
            continue;
        tm_launch_set_key(s->nodes[ni].token, key);
        if (key[0] && strcmp(key, token) == 0)
            return true;
    }
    return false;
}

/* Per provider listed, its instances sorted by id and by launch token
 * (by_id, by_token) and a flag per instance, none matched yet
 * (ret_matched).  0 or TM_ENOMEM (what was allocated is the caller's). */
static int listings_index(struct pass *p, bool **ret_matched, struct inst_index **by_id,
                          struct inst_index **by_token)
{
    for (size_t o = 0; o < p->in->nobserved; o++) {
        const struct tm_observed *obs = &p->in->observed[o];
        ret_matched[o] = calloc(obs->n + 1, sizeof(bool));
        by_id[o] = malloc((obs->n + 1) * sizeof(**by_id));
        by_token[o] = malloc((obs->n + 1) * sizeof(**by_token));
        if (!ret_matched[o] || !by_id[o] || !by_token[o])
            return TM_ENOMEM;
        for (size_t i = 0; i < obs->n; i++) {
            by_id[o][i] = (struct inst_index){.key = obs->instances[i].id, .index = (int32_t)i};
            by_token[o][i] = (struct inst_index){.key = obs->instances[i].token, .index = (int32_t)i};
        }
        qsort(by_id[o], obs->n, sizeof(**by_id), cmp_inst_index);
        qsort(by_token[o], obs->n, sizeof(**by_token), cmp_inst_index);
    }
    return 0;
}

/* Instances with our cluster tag and no live node (matched: per provider
 * and instance, a node owns it): terminate them, but only once a complete
 * listing has shown it (never on a partial view). */
static void orphans_terminate(struct pass *p, bool *const *matched)
{
    char why[256];

    for (size_t o = 0; o < p->in->nobserved; o++) {
        const struct tm_observed *obs = &p->in->observed[o];
        if (!obs->complete)
            continue;
        for (size_t i = 0; i < obs->n; i++) {
            const struct tm_instance *c = &obs->instances[i];
            if (matched[o][i] || c->state == TM_INSTANCE_TERMINATED ||
                c->state == TM_INSTANCE_STOPPING || set_pending(p, c->token))
                continue;
            snprintf(why, sizeof(why),
                     "instance carries cluster tag but no live node owns it (token \"%s\", node %" PRId64 ")",
                     c->token, c->node_id);
            cJSON *a = tm_rc_action(p, "orphan", why);
            tm_rc_put_str(p, a, "instance_id", c->id);
            cJSON *in = tm_rc_inputs(p, a);
            tm_rc_put_str(p, in, "provider", obs->provider);
            tm_rc_put_str(p, in, "pool", c->pool);
            tm_rc_add_terminate(p, (int)o, 0, c->id);
            p->plan.orphans++;
        }
    }
}

/* Node n, part of a set seen in part: neither adopted nor given up alone
 * (its instance is not an orphan either); launched again with its token. */
static void partial_relaunch(struct pass *p, const struct tm_snap_node *n)
{
    tm_rc_add_launch(p, n->id, n->token, n->pool, n->instance_type, n->zone, n->capacity);
    if (n->pool >= 0)
        p->pending_milli[n->pool] += (int64_t)n->gpus * 1000;
}

/* Step 1: compare each live node with its provider's listing. */
void tm_rc_observe(struct pass *p, bool **ret_matched)
{
    bool *partial = NULL;
    const struct tm_snapshot *s = p->in->snap;
    char why[256];

    size_t nobs = p->in->nobserved;
    struct inst_index **by_id = calloc(nobs + 1, sizeof(*by_id));
    struct inst_index **by_token = calloc(nobs + 1, sizeof(*by_token));

    if (!by_id || !by_token) {
        p->err = TM_ENOMEM;
        goto out;
    }
    if (listings_index(p, ret_matched, by_id, by_token) < 0) {
        p->err = TM_ENOMEM;
        goto out;
    }
    partial = partial_sets(p, by_id, by_token);
    if (!partial) {
        p->err = TM_ENOMEM;
        goto out;
    }
    fenced_scan(p, by_id, by_token);
    tm_rc_fence_mark(p);

    for (size_t ni = 0; ni < s->nnodes; ni++) {
        const struct tm_snap_node *n = &s->nodes[ni];
        int prov = n->pool >= 0 ? p->pool_provider[n->pool] : -1;
        const struct tm_observed *obs = observed_for(p, prov);
        const struct tm_instance *inst = NULL;

        snprintf(p->node_instance[ni], TM_ID_MAX, "%s", n->instance_id);
        if (n->pool >= 0 && n->state != TM_NODE_TERMINATING)
            p->live[n->pool]++;
        if (!obs) {
            /* Provider not observed this pass: change nothing, but act on
             * a notice the node posted to the API. */
            if (n->notice_ms > 0 && n->state != TM_NODE_TERMINATING)
                spot_notice(p, ni, n->notice_ms, "posted to the API");
            continue;
        }
        /* By the instance id we recorded, else by the launch token tag. */
        int hit = inst_index_find(by_id[prov], obs->n, n->instance_id);
        if (hit < 0)
            hit = inst_index_find(by_token[prov], obs->n, n->token);
        if (hit >= 0) {
            inst = &obs->instances[hit];
            ret_matched[prov][hit] = true;
        }
        if (inst && partial[ni]) {
            partial_relaunch(p, n);
            continue;
        }
        if (inst)
            snprintf(p->node_instance[ni], TM_ID_MAX, "%s", inst->id);

        bool dead = inst && (inst->state == TM_INSTANCE_TERMINATED ||
                             inst->state == TM_INSTANCE_STOPPED ||
                             inst->state == TM_INSTANCE_STOPPING);
        bool absent = !inst && obs->complete;
        const char *gone_state = inst && inst->interrupted ? "interrupted" : "terminated";
        /* The earliest notice known: the cloud's, or one posted to the API. */
        int64_t notice = n->notice_ms;
        const char *notice_from = "posted to the API";
        if (inst && !dead && inst->notice_ms > 0 && (notice == 0 || inst->notice_ms < notice)) {
            notice = inst->notice_ms;
            notice_from = "in the cloud's listing";
        }

        switch (n->state) {
        case TM_NODE_REQUESTED:
        case TM_NODE_BOOTING:
            if (inst && inst->state == TM_INSTANCE_RUNNING) {
                cJSON *a = tm_rc_action(p, "node_ready", "the cloud lists the instance running");
                tm_rc_put_num(p, a, "node", (double)n->id);
                tm_rc_put_str(p, a, "instance_id", inst->id);
                tm_rc_put_str(p, tm_rc_inputs(p, a), "zone", inst->zone);
                p->node_ready[ni] = !n->cordoned;
                p->plan.ready++;
            } else if (inst && dead) {
                snprintf(why, sizeof(why), "instance %s is %s before it became ready%s", inst->id,
                         tm_instance_state_name(inst->state),
                         inst->interrupted ? " (reclaimed by the cloud)" : "");
                node_gone(p, ni, gone_state, why);
            } else if (inst && n->state == TM_NODE_REQUESTED) {
                /* Launched by a pass that died before recording the id. */
                cJSON *a = tm_rc_action(p, "adopt", "instance found by its launch token");
                tm_rc_put_num(p, a, "node", (double)n->id);
                tm_rc_put_str(p, a, "instance_id", inst->id);
            } else if (!inst && n->state == TM_NODE_REQUESTED) {
                /* Intent recorded, no instance seen: (re)launch with the same
                 * token; the provider never makes a second instance for it. */
                int pool = n->pool;
                tm_rc_add_launch(p, n->id, n->token, pool, n->instance_type, n->zone, n->capacity);
            } else if (absent && n->state == TM_NODE_BOOTING) {
                node_gone(p, ni, "terminated", "the cloud no longer lists the instance");
            }
            /* A noticed node will never take work: not pending capacity. */
            if (!p->node_gone[ni] && n->pool >= 0 && !p->node_ready[ni] && notice == 0)
                p->pending_milli[n->pool] += (int64_t)n->gpus * 1000;
            break;
        case TM_NODE_READY:
        case TM_NODE_DRAINING:
            if (dead || absent) {
                snprintf(why, sizeof(why), "instance %s %s%s", p->node_instance[ni],
                         inst ? tm_instance_state_name(inst->state) : "is no longer listed",
                         inst && inst->interrupted ? " (reclaimed by the cloud)" : "");
                node_gone(p, ni, absent ? "terminated" : gone_state, why);
            } else if (n->state == TM_NODE_READY && !n->cordoned && n->power == TM_POWER_ON) {
                /* Suspended, or on its way there or back: no work. */
                p->node_ready[ni] = true;
            }
            break;
        case TM_NODE_TERMINATING:
            if (dead && inst->state == TM_INSTANCE_TERMINATED) {
                node_gone(p, ni, gone_state,
                          n->unreachable_ms > 0 ? "fenced: the provider confirms its instance terminated, "
                                                  "so its jobs can run elsewhere"
                                                : "terminated as asked");
            } else if (absent) {
                node_gone(p, ni, "terminated",
                          n->unreachable_ms > 0 ? "fenced: the provider no longer lists its instance, "
                                                  "so its jobs can run elsewhere"
                                                : "terminated as asked (no longer listed)");
            } else if (!dead || inst->state == TM_INSTANCE_STOPPED) {
                tm_rc_add_terminate(p, prov, n->id, p->node_instance[ni]);
            }
            break;
        default:
            break;
        }
        if (notice > 0 && !p->node_gone[ni] && n->state != TM_NODE_TERMINATING)
            spot_notice(p, ni, notice, notice_from);
    }

    orphans_terminate(p, ret_matched);
out:
    free(partial);
    for (size_t o = 0; by_id && by_token && o < nobs; o++) {
        free(by_id[o]);
        free(by_token[o]);
    }
    free(by_id);
    free(by_token);
}

/* A node that is gone takes the attempts of its jobs with it: each is
 * requeued (tarmac_apply's "requeue", before the node's own action) and the
 * GPU time it ran since it last started is lost, progress from earlier
 * checkpoints excepted.  The next start is attempt attempts + 1. */
static void requeue_jobs_of_gone_node(struct pass *p, size_t ni, const char *state)
{
    const struct tm_snapshot *s = p->in->snap;
    const struct tm_snap_node *n = &s->nodes[ni];
    size_t lo, hi;
    char why[256], kept[64] = "";

    tm_rc_allocs_on_node(p, n->id, &lo, &hi);
    for (size_t k = lo; k < hi; k++) {
        int ji = tm_rc_running_job_at(p, k);
        if (ji < 0)
            continue;
        const struct tm_snap_job *j = &s->jobs[ji];
        int64_t ran = tm_rc_ran_ms(p, j), milli = tm_rc_job_gpu_milli(j), lost = ran * milli / 1000;
        if (j->progress_ms > 0)
            snprintf(kept, sizeof(kept), "; %" PRId64 " s from checkpoints kept", j->progress_ms / 1000);
        else
            kept[0] = '\0';
        snprintf(why, sizeof(why),
                 "node %" PRId64 " %s: attempt %d lost after %" PRId64 " s on %g GPUs "
                 "(%.3f GPU-hours)%s; requeued for attempt %d",
                 n->id, state, j->attempts, ran / 1000, (double)milli / 1000.0, (double)lost / 3.6e6,
                 kept, j->attempts + 1);
        cJSON *a = tm_rc_action(p, "requeue", why);
        tm_rc_put_num(p, a, "job", (double)j->id);
        tm_rc_put_num(p, a, "node", (double)n->id);
        tm_rc_put_num(p, a, "started_ms", (double)j->started_ms);
        tm_rc_put_str(p, a, "cause", state);
        cJSON *in = tm_rc_inputs(p, a);
        tm_rc_put_num(p, in, "attempt", j->attempts);
        tm_rc_put_num(p, in, "next_attempt", j->attempts + 1);
        tm_rc_put_num(p, in, "ran_ms", (double)ran);
        tm_rc_put_num(p, in, "gpu_milli", (double)milli);
        tm_rc_put_num(p, in, "lost_gpu_ms", (double)lost);
        tm_rc_put_num(p, in, "lost_gpu_hours", (double)lost / 3.6e6);
        tm_rc_put_num(p, in, "progress_ms", (double)j->progress_ms);
        if (in && !cJSON_AddBoolToObject(in, "checkpointable", j->checkpointable))
            p->err = TM_ENOMEM;
        p->job_leaving[ji] = true;
        p->plan.requeued++;
    }
}

/* A node with an interruption notice takes no new work.  Its checkpointable
 * jobs checkpoint now and requeue with the runtime done so far kept, so
 * they lose nothing; the others run on, since they may finish before the
 * cloud takes the node, and are requeued when it goes.  Level-triggered:
 * the notice is recorded once ("spot_notice"), and a checkpoint is planned
 * while a checkpointable job still runs there; tarmac_apply guards each. */
static void spot_notice(struct pass *p, size_t ni, int64_t notice_ms, const char *source)
{
    const struct tm_snapshot *s = p->in->snap;
    const struct tm_snap_node *n = &s->nodes[ni];
    size_t lo, hi;
    int nckpt = 0, nrun = 0;
    char why[256];

    p->node_ready[ni] = false;
    p->node_noticed[ni] = true;
    tm_rc_allocs_on_node(p, n->id, &lo, &hi);
    for (size_t k = lo; k < hi; k++) {
        int ji = tm_rc_running_job_at(p, k);
        if (ji >= 0 && s->jobs[ji].checkpointable)
            nckpt++;
        else if (ji >= 0)
            nrun++;
    }
    if (!n->notice_recorded) {
        snprintf(why, sizeof(why),
                 "interruption notice %" PRId64 " s ago (%s): cordoned; %d checkpointable jobs "
                 "checkpoint and requeue, %d others run until the node goes",
                 (p->in->now_ms - notice_ms) / 1000, source, nckpt, nrun);
        cJSON *a = tm_rc_action(p, "spot_notice", why);
        tm_rc_put_num(p, a, "node", (double)n->id);
        tm_rc_put_num(p, a, "notice_ms", (double)notice_ms);
        cJSON *in = tm_rc_inputs(p, a);
        tm_rc_put_str(p, in, "source", source);
        tm_rc_put_str(p, in, "instance_id", p->node_instance[ni]);
        tm_rc_put_num(p, in, "checkpointing", nckpt);
        tm_rc_put_num(p, in, "running_on", nrun);
        p->plan.noticed++;
    }
    for (size_t k = lo; k < hi; k++) {
        int ji = tm_rc_running_job_at(p, k);
        if (ji < 0 || !s->jobs[ji].checkpointable)
            continue;
        const struct tm_snap_job *j = &s->jobs[ji];
        int64_t ran = tm_rc_ran_ms(p, j);
        snprintf(why, sizeof(why),
                 "interruption notice on node %" PRId64 ": checkpointed after %" PRId64
                 " s of attempt %d, %" PRId64 " s of progress kept, nothing lost; requeued",
                 n->id, ran / 1000, j->attempts, (j->progress_ms + ran) / 1000);
        cJSON *a = tm_rc_action(p, "checkpoint", why);
        tm_rc_put_num(p, a, "job", (double)j->id);
        tm_rc_put_num(p, a, "node", (double)n->id);
        tm_rc_put_num(p, a, "started_ms", (double)j->started_ms);
        cJSON *in = tm_rc_inputs(p, a);
        tm_rc_put_num(p, in, "notice_ms", (double)notice_ms);
        tm_rc_put_num(p, in, "attempt", j->attempts);
        tm_rc_put_num(p, in, "next_attempt", j->attempts + 1);
        tm_rc_put_num(p, in, "ran_ms", (double)ran);
        tm_rc_put_num(p, in, "progress_ms", (double)(j->progress_ms + ran));
        tm_rc_put_num(p, in, "lost_gpu_ms", 0);
        p->job_leaving[ji] = true;
        p->plan.checkpointed++;
    }
}
