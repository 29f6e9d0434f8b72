/*
 * controller/reconcile/staleness.c: nodes whose agent went silent, and jobs
 * whose GPUs sit idle (the node agent's side of the pure pass).
 *
 * Staleness, for nodes of pools that run a real agent
 * (tm_reconcile_input.pool_real_agent) and are booting, ready or draining:
 * silence is counted from the last heartbeat, or, before the first, from
 * the node's request plus agent.boot_allowance.  Past
 * agent.unreachable_after the node is marked unreachable (op
 * node_unreachable, once: nodes.unreachable_ms) and takes no new work this
 * pass.  Its running jobs are placed again only once their old processes
 * cannot run any more (fencing):
 *   - a node whose provider can fence (providers[].fence, the default:
 *     terminating the instance stops every process of the node) is fenced
 *     past agent.requeue_after: op fence makes it terminating, guarded on
 *     no heartbeat since the plan, and the daemon terminates its instance.
 *     Its jobs stay allocated to it until the provider's listing confirms
 *     the instance terminated (or no longer lists it, on a complete
 *     listing); observe.c then gives the node up (node_gone) and requeues
 *     them.  Each step is level-triggered: a terminating node whose
 *     instance still runs is terminated again by every pass, so a crash
 *     anywhere in between is repaired by the next one.
 *   - a node that cannot be fenced (its provider says fence: false, or no
 *     instance is known) has its jobs requeued past agent.fence_after, a
 *     longer bound (op unreachable_requeue, guarded on the attempt and on
 *     the node still being silent, so each attempt is requeued once); its
 *     agent, if it returns, kills what it still runs before anything else
 *     (controller/agent/README.md).
 * A gang's job leaves only when every silent member is fenced or past the
 * bound (tm_rc_gang_waits), so no member of the old attempt runs beside
 * the next one.  Past agent.terminate_after an empty silent node is
 * terminated through its provider (op terminate).
 *
 * Silence is counted only while the controller could hear: never from
 * before tm_reconcile_input.hearing_since_ms (the leader's start, the end
 * of its last spell of deafness), so an outage of the database or of the
 * controller itself is not held against the nodes.  Many nodes silent at
 * once hold all of this back (mass_silence below).
 *
 * Idle GPUs: tm_reconcile_idle_jobs() (reconcile.h).  The pass files a
 * gpu_idle decision per job attempt (op gpu_idle, recorded once) and, as
 * the pool's idle_job_action says, requeues (idle_requeue) or cancels
 * (idle_cancel) the job.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "controller/reconcile/internal.h"
#include "core/err.h"
#include "core/model.h"

static bool node_watched(const struct pass *p, const struct tm_snap_node *n)
{
    /* A node powered down by power saving is silent by design, and one
     * resuming has its pool's resume_timeout instead (power.c). */
    return n->pool >= 0 && n->power == TM_POWER_ON && p->in->pool_real_agent &&
           p->in->pool_real_agent[n->pool] &&
           (n->state == TM_NODE_BOOTING || n->state == TM_NODE_READY || n->state == TM_NODE_DRAINING);
}

int64_t tm_reconcile_silence(const struct tm_config *cfg, const struct tm_snap_node *n,
                             int64_t hearing_since_ms, int64_t now_ms, enum tm_silence_from *ret_from,
                             int64_t *ret_from_ms)
{
    enum tm_silence_from what = n->last_heartbeat_ms > 0 ? TM_SILENCE_FROM_HEARTBEAT : TM_SILENCE_FROM_REQUEST;
    int64_t from = n->last_heartbeat_ms > 0 ? n->last_heartbeat_ms
                                            : n->requested_ms + cfg->agent.boot_allowance_ms;
    /* A heartbeat sent while the controller could not store it (its
     * database away, no leader) was not missed by the node. */
    if (hearing_since_ms > from) {
        from = hearing_since_ms;
        what = TM_SILENCE_FROM_HEARING;
    }
    if (ret_from)
        *ret_from = what;
    if (ret_from_ms)
        *ret_from_ms = from;
    return now_ms > from ? now_ms - from : 0;
}

/* Terminating the node's instance stops its processes, and the listing
 * says when that is done. */
static bool node_fenceable(const struct pass *p, size_t ni)
{
    const struct tm_snap_node *n = &p->in->snap->nodes[ni];
    int prov = n->pool >= 0 ? p->pool_provider[n->pool] : -1;

    return prov >= 0 && (size_t)prov < p->cfg->nproviders && p->cfg->providers[prov].fence &&
           (n->instance_id[0] || n->token[0]);
}

void tm_rc_fence_mark(struct pass *p)
{
    const struct tm_snapshot *s = p->in->snap;
    const struct tm_config_agent *ag = &p->cfg->agent;

    for (size_t ni = 0; ni < s->nnodes; ni++) {
        const struct tm_snap_node *n = &s->nodes[ni];
        if (p->node_fenced[ni])
            continue;
        if (n->state == TM_NODE_TERMINATING) {
            /* asked to go, not yet confirmed gone */
            p->node_unfenced[ni] = true;
            continue;
        }
        if (!node_watched(p, n))
            continue;
        int64_t silent = tm_reconcile_silent_ms(p->cfg, n, p->in->hearing_since_ms, p->in->now_ms);
        p->node_unfenced[ni] = silent >= ag->unreachable_after_ms &&
                               (node_fenceable(p, ni) || silent < ag->fence_after_ms);
    }
}

bool tm_rc_gang_waits(const struct pass *p, size_t ni)
{
    const struct tm_snapshot *s = p->in->snap;
    size_t lo, hi;

    tm_rc_allocs_on_node(p, s->nodes[ni].id, &lo, &hi);
    for (size_t k = lo; k < hi; k++) {
        int ji = tm_rc_running_job_at(p, k);
        if (ji < 0 || s->jobs[ji].nodes <= 1)
            continue;
        for (size_t x = 0; x < s->nallocs; x++) {
            const struct tm_snap_alloc *al = &s->allocs[x];
            if (al->job_id != s->jobs[ji].id || al->node_id == s->nodes[ni].id)
                continue;
            int other = tm_rc_node_index(p, al->node_id);
            if (other >= 0 && p->node_unfenced[other])
                return true;
        }
    }
    return false;
}

/* A node that cannot be fenced, past agent.fence_after. */
int64_t tm_reconcile_silent_ms(const struct tm_config *cfg, const struct tm_snap_node *n,
                               int64_t hearing_since_ms, int64_t now_ms)
{
    return tm_reconcile_silence(cfg, n, hearing_since_ms, now_ms, NULL, NULL);
}

/* ---- mass silence --------------------------------------------------------- */

/* Many nodes silent at once is far likelier the controller's or the
 * network's fault than as many nodes failing together (the node lifecycle
 * controller of Kubernetes stops evicting from a zone wholly disrupted for
 * the same reason).  Per provider (a cloud region, an owned site: what a
 * partition cuts off), over its watched nodes that have spoken at least
 * once: when at least agent.mass_silence_min_nodes of them, and at least
 * agent.mass_silence_share of them, are past agent.unreachable_after, none
 * of its silent nodes is marked unreachable, requeued or terminated for
 * silence; they take no new work until they speak.  Nodes never heard from
 * are left out on both sides: a pool whose nodes never enroll is not a
 * partition, and holding those back would keep paying for them.  Fewer
 * silent nodes than min_nodes are handled one by one, so a small fleet's
 * dead node is still replaced (a one-node fleet cannot tell a dead node
 * from a cut link, and its jobs would otherwise never run again).
 *
 * The pass writes op silence_hold per held provider while it holds (the
 * decision is recorded once per episode: migrations/0016_silence.sql), and
 * alerts.c raises mass_silence:<provider> from the same count.
 * mass_silence() returns, per provider index, whether it holds (NULL on
 * p->err). */
static int provider_of_pool(const struct tm_config *cfg, int pool)
{
    for (size_t i = 0; pool >= 0 && (size_t)pool < cfg->npools && i < cfg->nproviders; i++)
        if (strcmp(cfg->pools[pool].provider, cfg->providers[i].name) == 0)
            return (int)i;
    return -1;
}

void tm_reconcile_mass_silence(const struct tm_config *cfg, const struct tm_snapshot *snap,
                               const bool *pool_real_agent, const bool *skip, int64_t hearing_since_ms,
                               int64_t now_ms, struct tm_mass_silence *out)
{
    const struct tm_config_agent *ag = &cfg->agent;

    memset(out, 0, cfg->nproviders * sizeof(*out));
    for (size_t ni = 0; pool_real_agent && ni < snap->nnodes; ni++) {
        const struct tm_snap_node *n = &snap->nodes[ni];
        if (n->pool < 0 || !pool_real_agent[n->pool] || (skip && skip[ni]) || n->last_heartbeat_ms <= 0 ||
            n->power != TM_POWER_ON ||
            !(n->state == TM_NODE_BOOTING || n->state == TM_NODE_READY || n->state == TM_NODE_DRAINING))
            continue;
        int pr = provider_of_pool(cfg, n->pool);
        if (pr < 0)
            continue;
        int64_t from_ms;
        out[pr].heard++;
        if (tm_reconcile_silence(cfg, n, hearing_since_ms, now_ms, NULL, &from_ms) >= ag->unreachable_after_ms) {
            out[pr].silent++;
            if (out[pr].since_ms == 0 || from_ms < out[pr].since_ms)
                out[pr].since_ms = from_ms;
        }
    }
    for (size_t pr = 0; pr < cfg->nproviders; pr++) {
        double share = out[pr].heard > 0 ? (double)out[pr].silent / out[pr].heard : 0;
        out[pr].held = ag->mass_silence_min_nodes > 0 && out[pr].silent >= ag->mass_silence_min_nodes &&
                       share >= ag->mass_silence_share;
    }
}

static bool *mass_silence(struct pass *p)
{
    const struct tm_config_agent *ag = &p->cfg->agent;
    size_t np = p->cfg->nproviders;
    bool *held = calloc(np + 1, sizeof(*held));
    struct tm_mass_silence *ms = calloc(np + 1, sizeof(*ms));
    char why[384];

    if (!held || !ms) {
        p->err = TM_ENOMEM;
        free(held);
        free(ms);
        return NULL;
    }
    tm_reconcile_mass_silence(p->cfg, p->in->snap, p->in->pool_real_agent, p->node_gone,
                              p->in->hearing_since_ms, p->in->now_ms, ms);
    for (size_t pr = 0; pr < np && !p->err; pr++) {
        if (!ms[pr].held)
            continue;
        held[pr] = true;
        snprintf(why, sizeof(why),
                 "%d of the %d nodes of provider %s that have spoken are silent at once (%.0f%%, at "
                 "least agent.mass_silence_share of %.0f%% and agent.mass_silence_min_nodes of %d): "
                 "taken for the controller's or the network's problem, none is marked unreachable, "
                 "requeued or terminated for silence; they take no new work until they speak",
                 ms[pr].silent, ms[pr].heard, p->cfg->providers[pr].name,
                 100.0 * ms[pr].silent / ms[pr].heard, ag->mass_silence_share * 100, ag->mass_silence_min_nodes);
        cJSON *a = tm_rc_action(p, "silence_hold", why);
        tm_rc_put_str(p, a, "provider", p->cfg->providers[pr].name);
        /* The episode: from the earliest silence counted among the held
         * nodes; one decision per episode. */
        tm_rc_put_num(p, a, "since_ms", (double)ms[pr].since_ms);
        cJSON *in = tm_rc_inputs(p, a);
        tm_rc_put_num(p, in, "silent_nodes", ms[pr].silent);
        tm_rc_put_num(p, in, "watched_nodes", ms[pr].heard);
        tm_rc_put_num(p, in, "mass_silence_share", ag->mass_silence_share);
        tm_rc_put_num(p, in, "mass_silence_min_nodes", ag->mass_silence_min_nodes);
        tm_rc_put_num(p, in, "unreachable_after_ms", (double)ag->unreachable_after_ms);
        tm_rc_put_num(p, in, "hearing_since_ms", (double)p->in->hearing_since_ms);
    }
    free(ms);
    return held;
}

static const char *silence_from_text(enum tm_silence_from from)
{
    switch (from) {
    case TM_SILENCE_FROM_HEARTBEAT:
        return "its last heartbeat";
    case TM_SILENCE_FROM_REQUEST:
        return "its request plus agent.boot_allowance, never heard from";
    default:
        return "when the controller could hear again (leadership taken or database back)";
    }
}

static const char *silence_from_name(enum tm_silence_from from)
{
    switch (from) {
    case TM_SILENCE_FROM_HEARTBEAT:
        return "last_heartbeat";
    case TM_SILENCE_FROM_REQUEST:
        return "boot_allowance";
    default:
        return "hearing_since";
    }
}

/* op node_unreachable: the silence counted and where it was counted from. */
static void mark_unreachable(struct pass *p, const struct tm_snap_node *n, int64_t silent,
                             enum tm_silence_from from, int64_t from_ms)
{
    const struct tm_config_agent *ag = &p->cfg->agent;
    char why[320];

    snprintf(why, sizeof(why),
             "no heartbeat from its agent for %" PRId64 ".%01" PRId64 " s counted since %s, past "
             "agent.unreachable_after of %" PRId64 " s",
             silent / 1000, silent % 1000 / 100, silence_from_text(from), ag->unreachable_after_ms / 1000);
    cJSON *a = tm_rc_action(p, "node_unreachable", why);
    tm_rc_put_num(p, a, "node", (double)n->id);
    tm_rc_put_num(p, a, "last_heartbeat_ms", (double)n->last_heartbeat_ms);
    cJSON *in = tm_rc_inputs(p, a);
    tm_rc_put_num(p, in, "silent_ms", (double)silent);
    tm_rc_put_str(p, in, "counted_from", silence_from_name(from));
    tm_rc_put_num(p, in, "counted_from_ms", (double)from_ms);
    tm_rc_put_num(p, in, "hearing_since_ms", (double)p->in->hearing_since_ms);
    tm_rc_put_num(p, in, "unreachable_after_ms", (double)ag->unreachable_after_ms);
    p->plan.unreachable++;
}

static void requeue_stale_jobs(struct pass *p, size_t ni, int64_t silent)
{
    const struct tm_snapshot *s = p->in->snap;
    const struct tm_snap_node *n = &s->nodes[ni];
    size_t lo, hi;
    char why[320];

    if (tm_rc_gang_waits(p, ni))
        return; /* another member still runs the attempt: not yet */
    tm_rc_allocs_on_node(p, n->id, &lo, &hi);
    for (size_t k = lo; k < hi; k++) {
        int ji = tm_rc_running_job_at(p, k);
        if (ji < 0)
            continue;
        const struct tm_snap_job *j = &s->jobs[ji];
        snprintf(why, sizeof(why),
                 "node %" PRId64 " unreachable (no heartbeat for %" PRId64 " s) and cannot be fenced "
                 "(%s): past agent.fence_after of %" PRId64 " s its processes are taken as gone; "
                 "attempt %d requeued for attempt %d",
                 n->id, silent / 1000,
                 n->instance_id[0] || n->token[0] ? "its provider has fence: false" : "no instance known",
                 p->cfg->agent.fence_after_ms / 1000, j->attempts, j->attempts + 1);
        cJSON *a = tm_rc_action(p, "unreachable_requeue", why);
        tm_rc_put_num(p, a, "job", (double)j->id);
        tm_rc_put_num(p, a, "node", (double)n->id);
        tm_rc_put_num(p, a, "started_ms", (double)j->started_ms);
        tm_rc_put_num(p, a, "last_heartbeat_ms", (double)n->last_heartbeat_ms);
        cJSON *in = tm_rc_inputs(p, a);
        tm_rc_put_num(p, in, "silent_ms", (double)silent);
        tm_rc_put_num(p, in, "fence_after_ms", (double)p->cfg->agent.fence_after_ms);
        tm_rc_put_str(p, in, "fencing", "bound");
        tm_rc_put_num(p, in, "attempt", j->attempts);
        tm_rc_put_num(p, in, "next_attempt", j->attempts + 1);
        p->job_leaving[ji] = true;
        p->plan.stale_requeued++;
    }
}

/* How many running jobs are allocated on node index ni. */
static int running_jobs_on(const struct pass *p, size_t ni)
{
    size_t lo, hi;
    int count = 0;

    tm_rc_allocs_on_node(p, p->in->snap->nodes[ni].id, &lo, &hi);
    for (size_t k = lo; k < hi; k++)
        count += tm_rc_running_job_at(p, k) >= 0;
    return count;
}

/* A node whose provider can fence, past agent.requeue_after with jobs on
 * it: terminate it first; its jobs follow once the listing confirms. */
static void fence_node(struct pass *p, size_t ni, int64_t silent, int njobs)
{
    const struct tm_snap_node *n = &p->in->snap->nodes[ni];
    char why[320];

    snprintf(why, sizeof(why),
             "unreachable for %" PRId64 " s, past agent.requeue_after of %" PRId64 " s: fenced, its "
             "instance %s is terminated; its %d running jobs are requeued once the provider "
             "confirms the instance terminated",
             silent / 1000, p->cfg->agent.requeue_after_ms / 1000, p->node_instance[ni], njobs);
    cJSON *a = tm_rc_action(p, "fence", why);
    tm_rc_put_num(p, a, "node", (double)n->id);
    tm_rc_put_num(p, a, "last_heartbeat_ms", (double)n->last_heartbeat_ms);
    cJSON *in = tm_rc_inputs(p, a);
    tm_rc_put_str(p, in, "instance_id", p->node_instance[ni]);
    tm_rc_put_num(p, in, "silent_ms", (double)silent);
    tm_rc_put_num(p, in, "requeue_after_ms", (double)p->cfg->agent.requeue_after_ms);
    tm_rc_put_num(p, in, "running_jobs", njobs);
    if (p->node_instance[ni][0])
        tm_rc_add_terminate(p, p->pool_provider[n->pool], n->id, p->node_instance[ni]);
    p->node_gone[ni] = true;
    if (p->live[n->pool] > 0)
        p->live[n->pool]--;
    p->plan.stale_fenced++;
}

void tm_rc_staleness(struct pass *p)
{
    const struct tm_snapshot *s = p->in->snap;
    const struct tm_config_agent *ag = &p->cfg->agent;
    char why[256];

    bool *held = mass_silence(p);

    for (size_t ni = 0; ni < s->nnodes && held && !p->err; ni++) {
        const struct tm_snap_node *n = &s->nodes[ni];
        if (!node_watched(p, n) || p->node_gone[ni])
            continue;
        enum tm_silence_from from;
        int64_t from_ms;
        int64_t silent = tm_reconcile_silence(p->cfg, n, p->in->hearing_since_ms, p->in->now_ms, &from,
                                              &from_ms);
        if (silent < ag->unreachable_after_ms)
            continue;
        p->node_ready[ni] = false; /* no new work while it is silent */
        int pr = p->pool_provider[n->pool];
        if (n->last_heartbeat_ms > 0 && pr >= 0 && held[pr]) {
            p->plan.silence_held++; /* mass silence: not the node's fault (mass_silence) */
            continue;
        }
        if (n->unreachable_ms == 0)
            mark_unreachable(p, n, silent, from, from_ms);
        int njobs = running_jobs_on(p, ni);
        bool fenceable = node_fenceable(p, ni);
        if (njobs > 0 && fenceable && silent >= ag->requeue_after_ms) {
            fence_node(p, ni, silent, njobs);
            continue;
        }
        if (njobs > 0 && !fenceable && silent >= ag->fence_after_ms)
            requeue_stale_jobs(p, ni, silent);
        if (njobs == 0 && silent >= ag->terminate_after_ms && p->node_instance[ni][0]) {
            snprintf(why, sizeof(why), "unreachable for %" PRId64 " s, past agent.terminate_after of "
                     "%" PRId64 " s: its instance is terminated",
                     silent / 1000, ag->terminate_after_ms / 1000);
            cJSON *a = tm_rc_action(p, "terminate", why);
            tm_rc_put_num(p, a, "node", (double)n->id);
            cJSON *in = tm_rc_inputs(p, a);
            tm_rc_put_str(p, in, "instance_id", p->node_instance[ni]);
            tm_rc_put_num(p, in, "silent_ms", (double)silent);
            tm_rc_add_terminate(p, p->pool_provider[n->pool], n->id, p->node_instance[ni]);
            p->node_gone[ni] = true;
            if (p->live[n->pool] > 0)
                p->live[n->pool]--;
            p->plan.stale_terminated++;
        }
    }
    free(held);
}

/* ---- drains --------------------------------------------------------------- */

/* A draining node of a pool with real agents: its checkpointable jobs
 * checkpoint now and requeue (op checkpoint: the agent sends the
 * checkpoint signal when the job leaves its assignments, and the next
 * attempt resumes from the newest complete checkpoint under
 * PATH/job-<id>); the others run to their end.
 * Simulated pools keep draining by waiting, as the sim agent cannot
 * checkpoint. */
void tm_rc_drain_checkpoints(struct pass *p)
{
    const struct tm_snapshot *s = p->in->snap;
    char why[256];

    for (size_t ni = 0; ni < s->nnodes && !p->err; ni++) {
        const struct tm_snap_node *n = &s->nodes[ni];
        size_t lo, hi;
        if (n->state != TM_NODE_DRAINING || p->node_gone[ni] || !node_watched(p, n))
            continue;
        tm_rc_allocs_on_node(p, n->id, &lo, &hi);
        for (size_t k = lo; k < hi; k++) {
            int ji = tm_rc_running_job_at(p, k);
            if (ji < 0 || !s->jobs[ji].checkpointable)
                continue;
            const struct tm_snap_job *j = &s->jobs[ji];
            int64_t ran = tm_rc_ran_ms(p, j);
            snprintf(why, sizeof(why),
                     "node %" PRId64 " drains: checkpointed after %" PRId64 " s of attempt %d; requeued "
                     "to resume elsewhere",
                     n->id, ran / 1000, j->attempts);
            cJSON *a = tm_rc_action(p, "checkpoint", why);
            tm_rc_put_num(p, a, "job", (double)j->id);
            tm_rc_put_num(p, a, "node", (double)n->id);
            tm_rc_put_num(p, a, "started_ms", (double)j->started_ms);
            cJSON *in = tm_rc_inputs(p, a);
            tm_rc_put_num(p, in, "attempt", j->attempts);
            tm_rc_put_num(p, in, "next_attempt", j->attempts + 1);
            tm_rc_put_num(p, in, "ran_ms", (double)ran);
            tm_rc_put_str(p, in, "cause", "drain");
            p->job_leaving[ji] = true;
            p->plan.checkpointed++;
        }
    }
}

/* ---- idle GPUs ------------------------------------------------------------ */

static const struct tm_snap_gpu_use *gpu_use_find(const struct tm_snapshot *s, int64_t node, int gpu)
{
    size_t a = 0, b = s->ngpu_use;

    while (a < b) {
        size_t m = a + (b - a) / 2;
        const struct tm_snap_gpu_use *g = &s->gpu_use[m];
        if (g->node_id < node || (g->node_id == node && g->gpu_index < gpu))
            a = m + 1;
        else
            b = m;
    }
    if (a < s->ngpu_use && s->gpu_use[a].node_id == node && s->gpu_use[a].gpu_index == gpu)
        return &s->gpu_use[a];
    return NULL;
}

size_t tm_reconcile_idle_jobs(const struct tm_config *cfg, const struct tm_snapshot *s,
                              struct tm_idle_job *out, size_t max)
{
    int64_t window = cfg->idle_gpu.window_ms, end = s->samples_end_ms;
    size_t n = 0;

    if (end <= 0 || window <= 0)
        return 0;
    for (size_t j = 0; j < s->njobs && n < max; j++) {
        const struct tm_snap_job *job = &s->jobs[j];
        struct tm_idle_job idle = {.job_id = job->id, .pool = -1, .window_ms = window};
        bool idle_all = true;
        double sum = 0;
        if (job->state != TM_JOB_RUNNING || job->started_ms > end - window)
            continue;
        for (size_t k = 0; k < s->nallocs && idle_all; k++) {
            const struct tm_snap_alloc *al = &s->allocs[k];
            if (al->job_id != job->id)
                continue;
            for (int g = 0; g < 16 && idle_all; g++) {
                if (!(al->gpu_mask & (1u << g)))
                    continue;
                const struct tm_snap_gpu_use *u = gpu_use_find(s, al->node_id, g);
                /* Samples must cover the whole window, all below the threshold. */
                if (!u || u->nsamples == 0 || u->first_ms > end - window ||
                    u->max_util >= cfg->idle_gpu.threshold_percent) {
                    idle_all = false;
                    break;
                }
                if (idle.ngpus == 0 || u->max_util > idle.max_util)
                    idle.max_util = u->max_util;
                sum += u->mean_util;
                idle.ngpus++;
                idle.node_id = idle.node_id ? idle.node_id : al->node_id;
            }
        }
        if (!idle_all || idle.ngpus == 0)
            continue;
        idle.mean_util = sum / idle.ngpus;
        for (size_t ni = 0; ni < s->nnodes; ni++)
            if (s->nodes[ni].id == idle.node_id)
                idle.pool = s->nodes[ni].pool;
        idle.attempt = job->attempts;
        idle.started_ms = job->started_ms;
        out[n++] = idle;
    }
    return n;
}

void tm_rc_idle_gpus(struct pass *p)
{
    const struct tm_snapshot *s = p->in->snap;
    struct tm_idle_job *idle = malloc((s->njobs + 1) * sizeof(*idle));
    size_t n;
    char why[320];

    if (!idle) {
        p->err = TM_ENOMEM;
        return;
    }
    n = tm_reconcile_idle_jobs(p->cfg, s, idle, s->njobs);
    for (size_t i = 0; i < n && !p->err; i++) {
        const struct tm_idle_job *x = &idle[i];
        int ji = tm_rc_job_index(p, x->job_id);
        if (ji < 0 || p->job_leaving[ji])
            continue;
        const char *action = x->pool >= 0 && p->cfg->pools[x->pool].idle_job_action
                                 ? p->cfg->pools[x->pool].idle_job_action
                                 : "report";
        snprintf(why, sizeof(why),
                 "job %" PRId64 " holds %d GPUs on node %" PRId64 " below %g%% for %" PRId64
                 " s (highest %.1f%%, mean %.1f%%); pool action: %s",
                 x->job_id, x->ngpus, x->node_id, p->cfg->idle_gpu.threshold_percent,
                 x->window_ms / 1000, x->max_util, x->mean_util, action);
        cJSON *a = tm_rc_action(p, "gpu_idle", why);
        tm_rc_put_num(p, a, "job", (double)x->job_id);
        tm_rc_put_num(p, a, "attempt", x->attempt);
        cJSON *in = tm_rc_inputs(p, a);
        tm_rc_put_num(p, in, "node", (double)x->node_id);
        tm_rc_put_num(p, in, "gpus", x->ngpus);
        tm_rc_put_num(p, in, "max_util_percent", x->max_util);
        tm_rc_put_num(p, in, "mean_util_percent", x->mean_util);
        tm_rc_put_num(p, in, "threshold_percent", p->cfg->idle_gpu.threshold_percent);
        tm_rc_put_num(p, in, "window_ms", (double)x->window_ms);
        tm_rc_put_str(p, in, "action", action);
        p->plan.gpu_idle++;
        if (strcmp(action, "report") != 0) {
            cJSON *b = tm_rc_action(p, strcmp(action, "cancel") == 0 ? "idle_cancel" : "idle_requeue", why);
            tm_rc_put_num(p, b, "job", (double)x->job_id);
            tm_rc_put_num(p, b, "node", (double)x->node_id);
            tm_rc_put_num(p, b, "started_ms", (double)x->started_ms);
            p->job_leaving[ji] = true;
        }
    }
    free(idle);
}
