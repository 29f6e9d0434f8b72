/*
 * controller/reconcile/power.c: power saving of owned pools, the choice
 * (docs/owned.md "Power saving"); the daemon runs the commands
 * (controller/daemon/power.c) and records each change (tarmac_node_power,
 * migrations/0031_power.sql).
 *
 * Per owned pool with a suspend_command, in this order:
 *   - a resuming node whose agent heartbeat after the resume began is on
 *     again (AWAKE); one silent past resume_timeout is given up on
 *     (TIMEOUT: on, marked unreachable, so staleness takes it from there);
 *     a node left suspending with no command running (its leader died
 *     mid-command) past twice command_timeout is on again (STUCK: the next
 *     pass may suspend it again);
 *   - RESUME, first: each waiting job, in queue order, that fits no idle
 *     powered node of its pools takes the nodes already coming back that
 *     fit it, then suspended ones, as many as it has nodes;
 *   - SUSPEND: a ready, powered, uncordoned, reachable node that holds no
 *     job, has been idle suspend_after and that no waiting job fits,
 *     longest idle first.
 * Never more than power_changes_max nodes of a pool suspending or
 * resuming at once, counting those the snapshot shows and the commands
 * the daemon says still run (holds); a held node (its command runs, or
 * failed lately and backs off) is not chosen again.  Level-triggered:
 * nothing here remembers an earlier pass.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "controller/reconcile/internal.h"
#include "core/err.h"

struct power_ctx {
    const struct tm_config *cfg;
    const struct tm_snapshot *snap;
    const bool *job_waits;
    const bool *node_placed;
    const struct tm_power_hold *holds;
    size_t nholds;
    int64_t now_ms;
    struct tm_power_op *ops;
    size_t nops, cap;
    int *changing;       /* pool -> nodes suspending or resuming */
    bool *busy;          /* node -> holds an allocation */
    bool *chosen;        /* node -> an op this pass */
    bool *claimed;       /* node -> a waiting job counts on it */
    size_t *pnodes;      /* the nodes of power-saving pools, by id */
    size_t npnodes;
};

static const struct tm_power_hold *hold_of(const struct power_ctx *c, int64_t node_id)
{
    for (size_t h = 0; h < c->nholds; h++)
        if (c->holds[h].node_id == node_id)
            return &c->holds[h];
    return NULL;
}

static bool held(const struct power_ctx *c, int64_t node_id)
{
    const struct tm_power_hold *h = hold_of(c, node_id);
    return h && (h->running || h->until_ms > c->now_ms);
}

static bool pool_saves_power(const struct tm_config *cfg, int pool)
{
    return pool >= 0 && (size_t)pool < cfg->npools && cfg->pools[pool].owned &&
           cfg->pools[pool].suspend_command && cfg->pools[pool].resume_command;
}

static int add_op(struct power_ctx *c, size_t ni, enum tm_power_op_kind kind, int64_t job_id,
                  const char *reason)
{
    if (c->nops == c->cap) {
        size_t cap = c->cap ? c->cap * 2 : 8;
        struct tm_power_op *ops = realloc(c->ops, cap * sizeof(*ops));
        if (!ops)
            return TM_ENOMEM;
        c->ops = ops;
        c->cap = cap;
    }
    const struct tm_snap_node *n = &c->snap->nodes[ni];
    struct tm_power_op *op = &c->ops[c->nops++];
    memset(op, 0, sizeof(*op));
    op->node_id = n->id;
    op->pool = n->pool;
    op->kind = kind;
    op->job_id = job_id;
    snprintf(op->reason, sizeof(op->reason), "%s", reason);
    c->chosen[ni] = true;
    return 0;
}

/* Whether job j may run on node n by its shape (one node's share). */
static bool job_fits_node(const struct tm_snap_job *j, const struct tm_snap_node *n)
{
    if (j->pool >= 0 && j->pool != n->pool)
        return false;
    if (!tm_gpu_model_accepts(j->gpu_model, n->gpu_model))
        return false;
    if (j->gpus > n->gpus || (j->gpus == 0 && j->gpu_milli > 0 && n->gpus == 0))
        return false;
    return j->cpu_milli <= n->cpu_milli && j->memory_mib <= n->memory_mib;
}

/* The snapshot's nodes are sorted by id. */
static int node_at(const struct tm_snapshot *s, int64_t id)
{
    size_t lo = 0, hi = s->nnodes;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (s->nodes[mid].id < id)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < s->nnodes && s->nodes[lo].id == id ? (int)lo : -1;
}

static bool job_waiting(const struct power_ctx *c, size_t ji)
{
    const struct tm_snap_job *j = &c->snap->jobs[ji];
    return j->state == TM_JOB_QUEUED && (!c->job_waits || c->job_waits[ji]);
}

/* An idle powered node of a power-saving pool the job could start on now:
 * it waits for something else (its turn, a budget), not for power. */
static bool idle_node_fits(const struct power_ctx *c, const struct tm_snap_job *j)
{
    for (size_t k = 0; k < c->npnodes; k++) {
        size_t ni = c->pnodes[k];
        const struct tm_snap_node *n = &c->snap->nodes[ni];
        if (n->state == TM_NODE_READY && n->power == TM_POWER_ON &&
            !n->cordoned && n->unreachable_ms == 0 && !c->busy[ni] && !c->chosen[ni] &&
            !(c->node_placed && c->node_placed[ni]) && job_fits_node(j, n))
            return true;
    }
    return false;
}

static int settle_changing(struct power_ctx *c)
{
    const struct tm_snapshot *s = c->snap;
    char why[256];

    for (size_t k = 0; k < c->npnodes; k++) {
        size_t ni = c->pnodes[k];
        const struct tm_snap_node *n = &s->nodes[ni];
        const struct tm_config_pool *pool = &c->cfg->pools[n->pool];
        const struct tm_power_hold *h = hold_of(c, n->id);
        bool running = h && h->running;
        int r = 0;
        if (running && (n->power == TM_POWER_ON || n->power == TM_POWER_SUSPENDED))
            c->changing[n->pool]++; /* its command was started after the snapshot */
        if (n->power == TM_POWER_RESUMING && n->last_heartbeat_ms > n->power_since_ms) {
            r = add_op(c, ni, TM_POWER_OP_AWAKE, 0, "its agent heartbeats again after resume_command: on");
        } else if (n->power == TM_POWER_RESUMING && !running &&
                   c->now_ms - n->power_since_ms >= pool->resume_timeout_ms) {
            snprintf(why, sizeof(why),
                     "no heartbeat %" PRId64 " s after resume_command began, past the pool's "
                     "resume_timeout of %" PRId64 " s: unreachable",
                     (c->now_ms - n->power_since_ms) / 1000, pool->resume_timeout_ms / 1000);
            r = add_op(c, ni, TM_POWER_OP_TIMEOUT, 0, why);
            c->claimed[ni] = true;
        } else if (n->power == TM_POWER_SUSPENDING && !running &&
                   c->now_ms - n->power_since_ms >= 2 * pool->command_timeout_ms) {
            r = add_op(c, ni, TM_POWER_OP_STUCK, 0,
                       "suspending with no suspend_command running (the leader that ran it is gone): "
                       "on again, to be suspended anew if still idle");
        } else if (n->power == TM_POWER_SUSPENDING || n->power == TM_POWER_RESUMING) {
            c->changing[n->pool]++;
        }
        if (r < 0)
            return r;
    }
    return 0;
}

static int choose_resumes(struct power_ctx *c)
{
    const struct tm_snapshot *s = c->snap;
    char why[256];

    for (size_t ji = 0; ji < s->njobs; ji++) {
        const struct tm_snap_job *j = &s->jobs[ji];
        if (!job_waiting(c, ji) || idle_node_fits(c, j))
            continue;
        int need = j->nodes > 0 ? j->nodes : 1;
        /* Nodes already coming back count first. */
        for (size_t k = 0; k < c->npnodes && need > 0; k++) {
            size_t ni = c->pnodes[k];
            const struct tm_snap_node *n = &s->nodes[ni];
            /* Resuming, or on again this very pass (AWAKE); one given up on
             * (TIMEOUT) was claimed so as not to count. */
            bool coming = n->power == TM_POWER_RESUMING;
            if (coming && !c->claimed[ni] && job_fits_node(j, n)) {
                c->claimed[ni] = true;
                need--;
            }
        }
        for (size_t k = 0; k < c->npnodes && need > 0; k++) {
            size_t ni = c->pnodes[k];
            const struct tm_snap_node *n = &s->nodes[ni];
            if (n->power != TM_POWER_SUSPENDED || c->chosen[ni] || c->claimed[ni] ||
                !job_fits_node(j, n) || held(c, n->id))
                continue;
            const struct tm_config_pool *pool = &c->cfg->pools[n->pool];
            if (c->changing[n->pool] >= pool->power_changes_max)
                continue;
            snprintf(why, sizeof(why),
                     "job %" PRId64 " (%d x %d GPUs) waits and fits no powered node of pool %s: resumed",
                     j->id, need, j->gpus, pool->name);
            int r = add_op(c, ni, TM_POWER_OP_RESUME, j->id, why);
            if (r < 0)
                return r;
            c->claimed[ni] = true;
            c->changing[n->pool]++;
            need--;
        }
    }
    return 0;
}

static bool wanted_by_queue(const struct power_ctx *c, const struct tm_snap_node *n)
{
    for (size_t ji = 0; ji < c->snap->njobs; ji++) {
        const struct tm_snap_job *j = &c->snap->jobs[ji];
        if (job_waiting(c, ji) && (j->hold_node_id == n->id || job_fits_node(j, n)))
            return true;
    }
    return false;
}

static int choose_suspends(struct power_ctx *c)
{
    const struct tm_snapshot *s = c->snap;
    char why[256];

    for (;;) {
        /* The longest idle candidate left; a handful a pass, so a scan each. */
        int best = -1;
        for (size_t k = 0; k < c->npnodes; k++) {
            size_t ni = c->pnodes[k];
            const struct tm_snap_node *n = &s->nodes[ni];
            if (n->state != TM_NODE_READY || n->power != TM_POWER_ON ||
                n->cordoned || n->unreachable_ms != 0 || n->idle_since_ms <= 0 || c->busy[ni] ||
                c->chosen[ni] || (c->node_placed && c->node_placed[ni]) || held(c, n->id))
                continue;
            const struct tm_config_pool *pool = &c->cfg->pools[n->pool];
            if (c->now_ms - n->idle_since_ms < pool->suspend_after_ms ||
                c->changing[n->pool] >= pool->power_changes_max || c->claimed[ni])
                continue;
            if (best < 0 || n->idle_since_ms < s->nodes[best].idle_since_ms)
                best = (int)ni;
        }
        if (best < 0)
            return 0;
        const struct tm_snap_node *n = &s->nodes[best];
        const struct tm_config_pool *pool = &c->cfg->pools[n->pool];
        snprintf(why, sizeof(why),
                 "idle %" PRId64 " s, past the pool's suspend_after of %" PRId64
                 " s, and no waiting job fits it: suspended",
                 (c->now_ms - n->idle_since_ms) / 1000, pool->suspend_after_ms / 1000);
        int r = add_op(c, (size_t)best, TM_POWER_OP_SUSPEND, 0, why);
        if (r < 0)
            return r;
        c->changing[n->pool]++;
    }
}

int tm_reconcile_power(const struct tm_config *cfg, const struct tm_snapshot *snap, const bool *job_waits,
                       const bool *node_placed, const struct tm_power_hold *holds, size_t nholds,
                       int64_t now_ms, struct tm_power_op **ret_ops, size_t *ret_n)
{
    struct power_ctx c = {.cfg = cfg, .snap = snap, .job_waits = job_waits, .node_placed = node_placed,
                          .holds = holds, .nholds = nholds, .now_ms = now_ms};
    bool any = false;
    int r = 0;

    *ret_ops = NULL;
    *ret_n = 0;
    for (size_t pi = 0; pi < cfg->npools; pi++)
        any = any || pool_saves_power(cfg, (int)pi);
    if (!any)
        return 0;
    c.changing = calloc(cfg->npools, sizeof(int));
    c.busy = calloc(snap->nnodes + 1, sizeof(bool));
    c.chosen = calloc(snap->nnodes + 1, sizeof(bool));
    c.claimed = calloc(snap->nnodes + 1, sizeof(bool));
    c.pnodes = calloc(snap->nnodes + 1, sizeof(size_t));
    if (!c.changing || !c.busy || !c.chosen || !c.claimed || !c.pnodes) {
        r = TM_ENOMEM;
        goto out;
    }
    for (size_t ni = 0; ni < snap->nnodes; ni++)
        if (pool_saves_power(cfg, snap->nodes[ni].pool))
            c.pnodes[c.npnodes++] = ni;
    for (size_t a = 0; a < snap->nallocs; a++) {
        int ni = node_at(snap, snap->allocs[a].node_id);
        if (ni >= 0)
            c.busy[ni] = true;
    }
    if ((r = settle_changing(&c)) == 0 && (r = choose_resumes(&c)) == 0) {
        /* A node some waiting job fits stays on for it (claimed): it is
         * marked once here, not asked per candidate per choice. */
        for (size_t k = 0; k < c.npnodes; k++)
            c.claimed[c.pnodes[k]] = c.claimed[c.pnodes[k]] || wanted_by_queue(&c, &snap->nodes[c.pnodes[k]]);
        r = choose_suspends(&c);
    }
out:
    free(c.changing);
    free(c.busy);
    free(c.chosen);
    free(c.claimed);
    free(c.pnodes);
    if (r < 0) {
        free(c.ops);
        return r;
    }
    *ret_ops = c.ops;
    *ret_n = c.nops;
    return 0;
}

void tm_rc_power(struct pass *p, const bool *job_placed)
{
    const struct tm_snapshot *s = p->in->snap;
    bool *waits = calloc(s->njobs + 1, sizeof(bool));

    if (!waits) {
        p->err = TM_ENOMEM;
        return;
    }
    for (size_t ji = 0; ji < s->njobs; ji++)
        waits[ji] = s->jobs[ji].state == TM_JOB_QUEUED && !job_placed[ji] && !p->job_held[ji] &&
                    !p->job_leaving[ji];
    int r = tm_reconcile_power(p->cfg, s, waits, p->node_placed, p->in->power_holds, p->in->npower_holds,
                               p->in->now_ms, &p->plan.power, &p->plan.npower);
    free(waits);
    if (r < 0)
        p->err = r;
}
