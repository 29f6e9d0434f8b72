/*
 * controller/replay/elastic.c: the elastic replay (see elastic.h).
 *
 * Discrete events in virtual time: job arrivals, job ends, the simulated
 * cloud's boot completions, spot notices and interruptions, and a fleet
 * tick every tick_ms.  After the events of an instant the scheduler
 * places the queue; at each tick the fleet policy plans.
 *
 * Why one long file: every step (the cloud's events, placement,
 * the three fleet policies, the bounds, the accounting) reads and writes
 * the one struct fleet_replay below through some twenty small helpers
 * (launch, terminate, stop_job, node_end, price_of, ...).  Split, those would
 * become external symbols behind a private header for a model that is
 * read as one discrete-event simulation; tm_elastic_run is instead cut
 * into one function per phase of an instant.
 */
#include "controller/replay/elastic.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "controller/sched/estimate.h"
#include "controller/fleet/forecast.h"
#include "controller/fleet/plan_input.h"
#include "controller/fleet/planner.h"
#include "controller/replay/elastic_view.h"
#include "controller/sched/scheduler.h"
#include "core/err.h"
#include "providers/sim/simcloud.h"

#define HOUR_MS (3600LL * 1000)
#define DAY_MS (24 * HOUR_MS)
#define MONTH_MS (30 * DAY_MS)
#define NEVER INT64_MAX
/* tarmac's idle grace: none, because the forecast's upper quantile keeps
 * the nodes demand will want again (hysteresis, for at most a boot:
 * keep_max_ms), and queued work the planner counts on an idle node keeps
 * it (planner.c run_backlog).  A grace only added a tick: an emptied
 * node went at the second tick, now at the first
 * (bench/results/elastic-2026-12-02-c.md).
 * The moves' credit stays a tick (planner.c run_consolidate). */
#define TARMAC_GRACE_MS 0
/* tarmac keeps a preemptible, non-checkpointable job off spot when its
 * expected loss to interruptions, hazard x estimate / 2, passes this share
 * of its work */
#define SPOT_LOSS_MAX 0.10
/* a job restarted from a checkpoint redoes this much (restore) */
#define CKPT_RESTORE_MS (60 * 1000)

const char *tm_elastic_policy_name(enum tm_elastic_policy p)
{
    static const char *const n[TM_ELASTIC_POLICY_MAX] = {"static", "reactive", "tarmac", "oracle"};
    return (unsigned)p < TM_ELASTIC_POLICY_MAX ? n[p] : "?";
}

int tm_elastic_policy_parse(const char *name)
{
    for (int i = 0; i < TM_ELASTIC_POLICY_MAX; i++)
        if (strcmp(name, tm_elastic_policy_name((enum tm_elastic_policy)i)) == 0)
            return i;
    return -1;
}

/* tarmac's planner and scheduler: tarmac itself, and the oracle, which
 * differs only in what it is told at arrival (arrivals()). */
static bool tarmac_like(enum tm_elastic_policy p)
{
    return p == TM_ELASTIC_TARMAC || p == TM_ELASTIC_ORACLE;
}

void tm_elastic_config_default(struct tm_elastic_config *c)
{
    memset(c, 0, sizeof(*c));
    c->policy = TM_ELASTIC_TARMAC;
    c->since_ms = -1;
    c->max_runtime_ms = -1;
    c->boot_ms = 180 * 1000;
    c->notice_ms = 120 * 1000;
    c->copies = 1;
    c->tick_ms = 30 * 1000;
    c->idle_grace_ms = 600 * 1000;
    c->seed = 1;
    c->consolidate_restart = true;
}

enum { J_FUTURE, J_QUEUED, J_RUNNING, J_DONE };
enum { N_BOOTING, N_READY, N_GONE };

struct ejob {
    const struct tm_trace_job *tj;
    int64_t submit, runtime, estimate, deadline;
    int64_t cpu, mem;
    int32_t gpus, gpu_milli, milli;
    bool preemptible, ckpt, force_od;
    bool known; /* estimate from the same task's own earlier runs */
    int state;
    int64_t first_start, start, progress; /* progress: checkpointed work */
    int node;
    uint32_t mask;
    int32_t amilli;
    bool loaned;
    int attempts; /* attempts ended, checkpointed or not (started = this + 1 while running) */
};

struct enode {
    char id[TM_ID_MAX];
    int type, zone;
    bool spot;
    int64_t launched, ready, notice, interrupt;
    int state;
    bool leaving, noticed;
    int64_t idle_since;
    int njobs;
    int32_t used_milli;
    int replace;   /* substitute: index of the on-demand node this spot node replaces, -1 */
    bool cordoned; /* drained by the planner: no new work */
};

/* One elastic replay's state: the simulated cloud and its nodes, the
 * jobs, the fleet policy's forecasts and budget, and the figures. */
struct fleet_replay {
    const struct tm_elastic_config *cfg;
    const struct tm_price_table *pr;
    struct tm_simcloud *cloud;
    struct tm_simcloud_params cp;
    struct ejob *jobs;
    size_t njobs;
    size_t *order;   /* by submit */
    size_t next_arrival;
    size_t *queued, nqueued;
    size_t *running, nrunning;
    struct enode *nodes;
    size_t nnodes, capnodes;
    struct tm_estimator *est;
    struct tm_forecast *fc[TM_PLANNER_POOL_MAX];
    struct tm_planner_shortage shortages[64];
    size_t nshort;
    int64_t term_times[4096];
    size_t nterm;
    int64_t now;
    struct tm_elastic_stats st;
    bool budget_on;
    struct tm_budget budget;
    bool warned;
    int64_t token_seq;
    int32_t max_type_gpus;
    bool queue_grew;  /* a job joined the queue since the last planning pass */
    bool spot_pools;  /* spot launches name their (type, zone) pool (cfg->hazards) */
    double spot_hazard; /* the hazard tarmac's spot routing assumes */
    /* Per (spot type, zone) hazard, [t x nzones + z], with --hazards: tarmac's
     * planner launches spot in the zone of lowest hazard (the baselines
     * keep table order, as hazard-blind autoscalers do). */
    double *zone_hazard;
    /* The run's accounting: each finished job's wait, and how many finished. */
    double *waits;
    size_t nwaits, done;
};

static int64_t price_of(const struct fleet_replay *s, const struct enode *n)
{
    const struct tm_price_type *t = &s->pr->types[n->type];
    return n->spot ? t->spot_uusd_per_hour : t->on_demand_uusd_per_hour;
}

static int64_t node_end(const struct fleet_replay *s, const struct enode *n)
{
    const struct tm_sim_instance *row = tm_simcloud_find(s->cloud, n->id);
    return row ? tm_sim_instance_end_ms(&s->cp, row) : NEVER;
}

static double spent_between(const struct fleet_replay *s, int64_t a, int64_t b)
{
    double uusd = 0;
    for (size_t i = 0; i < s->nnodes; i++) {
        const struct enode *n = &s->nodes[i];
        int64_t lo = n->launched > a ? n->launched : a;
        int64_t e = node_end(s, n);
        int64_t hi = e < b ? e : b;
        if (hi > lo)
            uusd += (double)price_of(s, n) * (double)(hi - lo) / HOUR_MS;
    }
    return uusd;
}

/* Paid GPU-hours from s->now to `until` that did no work, by cause
 * (elastic.h); the fleet does not change in between. */
static void account_waste(struct fleet_replay *s, int64_t until)
{
    double h = (double)(until - s->now) / HOUR_MS;

    if (h <= 0)
        return;
    for (size_t i = 0; i < s->nnodes; i++) {
        const struct enode *n = &s->nodes[i];
        int32_t g = s->pr->types[n->type].gpus;
        if (n->state == N_GONE || node_end(s, n) <= s->now)
            continue;
        if (n->state == N_BOOTING)
            s->st.booting_gpu_hours += g * h;
        else if (n->njobs == 0)
            s->st.empty_gpu_hours += g * h;
        else
            s->st.free_on_busy_gpu_hours += (g - n->used_milli / 1000.0) * h;
    }
}

/* The pool a launch names in the simulated cloud: with a hazard table,
 * one spot pool per (type, zone), which tm_elastic_run() gives the
 * table's hazard and launch failure; otherwise "spot" and "od", which take
 * the cloud-wide hazard. */
static void spot_pool_name(const struct fleet_replay *s, int type, int zone, bool spot, char *buf, size_t len)
{
    if (spot && s->spot_pools)
        snprintf(buf, len, "spot-t%d-z%d", type, zone);
    else
        snprintf(buf, len, "%s", spot ? "spot" : "od");
}

/* One simulated-cloud pool per spot (type, zone) of the price table,
 * with the hazard table's figures where it names the cell. */
static int setup_spot_pools(struct fleet_replay *s)
{
    const struct tm_elastic_config *c = s->cfg;
    double sum = 0;
    size_t cells = 0;

    s->spot_hazard = c->hazard_per_hour;
    if (!c->spot || !c->hazards)
        return 0;
    s->spot_pools = true;
    {
        size_t nz = s->pr->nzones ? s->pr->nzones : 1;
        s->zone_hazard = malloc((s->pr->ntypes * nz + 1) * sizeof(*s->zone_hazard));
        if (!s->zone_hazard)
            return TM_ENOMEM;
        for (size_t k = 0; k < s->pr->ntypes * nz; k++)
            s->zone_hazard[k] = c->hazard_per_hour;
    }
    for (size_t t = 0; t < s->pr->ntypes; t++) {
        if (s->pr->types[t].spot_uusd_per_hour <= 0)
            continue;
        for (size_t z = 0; z < s->cp.nzones; z++) {
            const struct tm_spot_hazard *h =
                tm_spot_hazards_find(c->hazards, s->pr->types[t].name, s->cp.zones[z]);
            struct tm_sim_pool_spot *p;
            if (s->cp.npools == TM_SIM_POOLS_MAX)
                return TM_EINVAL; /* more spot (type, zone) cells than the cloud models */
            p = &s->cp.pools[s->cp.npools++];
            spot_pool_name(s, (int)t, (int)z, true, p->pool, sizeof(p->pool));
            p->hazard_per_hour = h && h->has_hazard ? h->hazard_per_hour : c->hazard_per_hour;
            p->launch_failure = h && h->has_availability ? 1 - h->availability : 0;
            s->zone_hazard[t * (s->pr->nzones ? s->pr->nzones : 1) + z] = p->hazard_per_hour;
            p->notice_ms = c->notice_ms;
            sum += p->hazard_per_hour;
            cells++;
        }
    }
    if (cells)
        s->spot_hazard = sum / (double)cells;
    return 0;
}

static int launch(struct fleet_replay *s, int type, int zone, bool spot, const char *reason)
{
    struct tm_launch_request req;
    char token[TM_ID_MAX], pool[TM_ID_MAX];
    struct tm_instance inst;
    const struct tm_sim_instance *row;
    struct enode *n;
    int r;

    if (s->nnodes == s->capnodes) {
        size_t nc = s->capnodes ? s->capnodes * 2 : 64;
        struct enode *nv = realloc(s->nodes, nc * sizeof(*nv));
        if (!nv)
            return TM_ENOMEM;
        s->nodes = nv;
        s->capnodes = nc;
    }
    snprintf(token, sizeof(token), "el-%lld", (long long)++s->token_seq);
    spot_pool_name(s, type, zone, spot, pool, sizeof(pool));
    req = (struct tm_launch_request){.cluster = "elastic", .pool = pool,
                                     .node_id = s->token_seq, .token = token,
                                     .instance_type = s->pr->types[type].name,
                                     .zone = s->cp.zones[zone],
                                     .capacity = spot ? TM_CAPACITY_SPOT : TM_CAPACITY_ON_DEMAND};
    r = tm_simcloud_launch(s->cloud, &req, s->now, &inst);
    if (r == TM_EQUOTA) {
        /* Forget expired shortages first: the list only grew before, and
         * once 64 were recorded new ones were dropped, so a zone short
         * again was tried at every pass (seen once launches could fail
         * for want of spot capacity, with --hazards). */
        size_t w = 0;
        for (size_t k = 0; k < s->nshort; k++)
            if (s->shortages[k].until_ms > s->now)
                s->shortages[w++] = s->shortages[k];
        s->nshort = w;
        if (s->nshort < sizeof(s->shortages) / sizeof(s->shortages[0]))
            s->shortages[s->nshort++] = (struct tm_planner_shortage){type, zone, spot, s->now + 30 * 60 * 1000};
        if (spot && s->spot_pools) {
            s->st.spot_shortages++;
            if (s->cfg->log)
                fprintf(s->cfg->log, "%.0f %s launch %s spot in %s failed: no spot capacity (%s)\n",
                        s->now / 1e3, tm_elastic_policy_name(s->cfg->policy), s->pr->types[type].name,
                        s->cp.zones[zone], reason);
        }
        return r;
    }
    if (r < 0)
        return r;
    row = tm_simcloud_find(s->cloud, inst.id);
    n = &s->nodes[s->nnodes++];
    memset(n, 0, sizeof(*n));
    snprintf(n->id, sizeof(n->id), "%s", inst.id);
    n->type = type;
    n->zone = zone;
    n->spot = spot;
    n->launched = row->launched_ms;
    n->ready = row->ready_ms;
    n->interrupt = row->interrupt_ms;
    n->notice = row->notice_ms;
    n->state = N_BOOTING;
    n->replace = -1;
    n->idle_since = n->ready;
    s->st.launches++;
    if (spot && zone >= 0 && zone < TM_PRICES_ZONES_MAX)
        s->st.spot_launches_by_zone[zone]++;
    if (s->cfg->log)
        fprintf(s->cfg->log, "%.0f %s launch %s %s %s: %s\n", s->now / 1e3,
                tm_elastic_policy_name(s->cfg->policy), n->id, s->pr->types[type].name,
                spot ? "spot" : "on-demand", reason);
    return 0;
}

static void terminate(struct fleet_replay *s, size_t i, const char *reason)
{
    struct enode *n = &s->nodes[i];
    if (n->state == N_GONE || n->leaving)
        return;
    tm_simcloud_terminate(s->cloud, n->id, s->now);
    n->leaving = true;
    s->st.terminations++;
    if (s->nterm < sizeof(s->term_times) / sizeof(s->term_times[0]))
        s->term_times[s->nterm++] = s->now;
    else {
        memmove(s->term_times, s->term_times + 1, (s->nterm - 1) * sizeof(int64_t));
        s->term_times[s->nterm - 1] = s->now;
    }
    if (s->cfg->log)
        fprintf(s->cfg->log, "%.0f %s terminate %s: %s\n", s->now / 1e3,
                tm_elastic_policy_name(s->cfg->policy), n->id, reason);
}

static void remove_running(struct fleet_replay *s, size_t j)
{
    for (size_t k = 0; k < s->nrunning; k++)
        if (s->running[k] == j) {
            s->running[k] = s->running[--s->nrunning];
            return;
        }
}

static void enqueue(struct fleet_replay *s, size_t j)
{
    s->queue_grew = true;
    s->queued[s->nqueued++] = j;
    s->jobs[j].state = J_QUEUED;
}

/* Stop a running job: checkpointed (keep progress) or lost. */
static void stop_job(struct fleet_replay *s, size_t j, bool checkpoint)
{
    struct ejob *jb = &s->jobs[j];
    struct enode *n = &s->nodes[jb->node];
    int64_t ran = s->now - jb->start;

    jb->attempts++;
    if (checkpoint) {
        /* a restart from a checkpoint costs the restore time again */
        jb->progress += ran;
        jb->progress -= jb->progress < CKPT_RESTORE_MS ? jb->progress : CKPT_RESTORE_MS;
    } else {
        s->st.lost_gpu_hours += (double)jb->milli / 1000 * (double)ran / HOUR_MS;
        /* It ran `ran` already: under heavy tails it runs as long again. */
        if (jb->estimate < tm_estimate_overrun(ran))
            jb->estimate = tm_estimate_overrun(ran);
    }
    n->njobs--;
    n->used_milli -= jb->amilli * __builtin_popcount(jb->mask);
    if (n->njobs == 0)
        n->idle_since = s->now;
    remove_running(s, j);
    jb->node = -1;
    enqueue(s, j);
}

/* Stop a running job that cannot checkpoint so that it starts over
 * elsewhere (consolidation by restart): its attempt's work is redone, a
 * figure of its own beside the GPU-hours interruptions lose. */
static void restart_job(struct fleet_replay *s, size_t j)
{
    double lost = s->st.lost_gpu_hours;

    stop_job(s, j, false);
    s->st.redone_gpu_hours += s->st.lost_gpu_hours - lost;
    s->st.lost_gpu_hours = lost;
    s->st.restarted_jobs++;
}

static int32_t job_mask(struct fleet_replay *s, const struct ejob *jb)
{
    if (!jb->preemptible || jb->force_od || !s->cfg->spot)
        return 1;
    if (s->cfg->policy == TM_ELASTIC_STATIC)
        return 3; /* static: its fleet is on-demand; anything runs anywhere */
    if (s->cfg->policy == TM_ELASTIC_REACTIVE)
        return 2; /* reactive: preemptible work goes to the spot pool */
    if (tarmac_like(s->cfg->policy) && s->spot_hazard > 0 && !jb->ckpt) {
        /* Expected loss on spot: a job of T hours loses about h T / 2 of
         * its work per attempt; keep long jobs off spot when that exceeds
         * 10% of it (the spot discount pays for little rework at a 65%
         * saving once the restarts also delay it). */
        int64_t e = jb->estimate > 0 ? jb->estimate : TM_SCHED_DEFAULT_ESTIMATE_MS;
        if (s->spot_hazard * (double)e / HOUR_MS / 2 > SPOT_LOSS_MAX)
            return 1;
    }
    return 3;
}

/* The order the scheduler sees the nodes in.  reactive and static: launch
 * order (first fit takes the first).  tarmac: smaller types first, launch
 * order within a type, and this order is each node's rank for the
 * scheduler's elastic preference: work lands on the smallest, oldest node
 * with room, and a large node launched for a large job is left to empty
 * once that job ends.  A global order by the estimated end of each node's
 * work was tried too: it helps only where jobs recur, and costs on the
 * single trace, where the estimates of unique jobs are too rough; the
 * known ends of recurring tasks are used per job instead (align_ends). */
static size_t *order_nodes(struct fleet_replay *s)
{
    size_t *ord = malloc((s->nnodes + 1) * sizeof(*ord));
    size_t n = 0;
    int32_t below = 0;

    if (!ord)
        return NULL;
    if (!tarmac_like(s->cfg->policy)) {
        for (size_t i = 0; i < s->nnodes; i++)
            ord[i] = i;
        return ord;
    }
    /* one pass per distinct size, ascending (a handful of types) */
    while (n < s->nnodes) {
        int32_t next = INT32_MAX;
        for (size_t i = 0; i < s->nnodes; i++) {
            int32_t g = s->pr->types[s->nodes[i].type].gpus;
            if (g > below && g < next)
                next = g;
        }
        if (next == INT32_MAX)
            break; /* cannot happen with types of 1+ GPUs (prices.c) */
        for (size_t i = 0; i < s->nnodes; i++)
            if (s->pr->types[s->nodes[i].type].gpus == next)
                ord[n++] = i;
        below = next;
    }
    for (size_t i = 0; n < s->nnodes && i < s->nnodes; i++)
        if (s->pr->types[s->nodes[i].type].gpus <= 0)
            ord[n++] = i;
    return ord;
}

/* A running job's expected time left.  A known estimate counts the
 * checkpointed progress as done; the heavy-tail rule for the others keeps
 * the figures it was measured with (it looks at the whole estimate). */
static int64_t time_left(const struct ejob *jb, int64_t est, int64_t now)
{
    if (jb->known)
        return tm_estimate_left(est - jb->progress, now - jb->start, true);
    return tm_estimate_remaining(est, now - jb->start);
}

/* The elastic replay's adapter to the scheduler: the ready nodes (in
 * order_nodes()'s order), the queue and the running jobs handed to one
 * tm_sched_run() pass, and its placements and evictions applied to the
 * jobs and the nodes.  The time replay has its own (replay_engine.c):
 * its nodes are fixed and its pass incremental, these come and go. */
static int sched_place_queue(struct fleet_replay *s)
{
    struct tm_sched_node *sn = NULL;
    int32_t *nidx = NULL;
    struct tm_sched_job *sj = NULL;
    struct tm_sched_alloc *sa = NULL;
    struct tm_sched_result r = {0};
    size_t nn = 0, na = 0;
    int rc = 0;

    if (s->nqueued == 0)
        return 0;
    sn = calloc(s->nnodes + 1, sizeof(*sn));
    nidx = calloc(s->nnodes + 1, sizeof(*nidx));
    sj = calloc(s->nqueued + 1, sizeof(*sj));
    sa = calloc(s->nrunning + 1, sizeof(*sa));
    if (!sn || !nidx || !sj || !sa) {
        rc = TM_ENOMEM;
        goto out;
    }
    {
        int32_t *map = calloc(s->nnodes + 1, sizeof(*map));
        if (!map) {
            rc = TM_ENOMEM;
            goto out;
        }
        size_t *ord = order_nodes(s);
        if (!ord) {
            free(map);
            rc = TM_ENOMEM;
            goto out;
        }
        for (size_t i = 0; i < s->nnodes; i++)
            map[i] = -1;
        for (size_t oi = 0; oi < s->nnodes; oi++) {
            size_t i = ord[oi];
            struct enode *n = &s->nodes[i];
            const struct tm_price_type *t = &s->pr->types[n->type];
            if (n->state != N_READY)
                continue;
            map[i] = (int32_t)nn;
            nidx[nn] = (int32_t)i;
            sn[nn] = (struct tm_sched_node){.id = (int64_t)i, .cpu_milli = t->cpu_milli,
                                            .memory_mib = t->memory_mib, .gpus = t->gpus,
                                            .model = n->spot ? 1 : 0, .spot = n->spot,
                                            .schedulable = !n->leaving && !n->cordoned,
                                            .rank = (int64_t)nn};
            nn++;
        }
        free(ord);
        for (size_t k = 0; k < s->nrunning; k++) {
            struct ejob *jb = &s->jobs[s->running[k]];
            int64_t left = jb->runtime - jb->progress - (s->now - jb->start);
            int64_t est = jb->estimate > 0 ? jb->estimate : TM_SCHED_DEFAULT_ESTIMATE_MS;
            sa[na++] = (struct tm_sched_alloc){
                .job_id = (int64_t)s->running[k], .node = map[jb->node], .gpu_mask = jb->mask,
                .gpu_milli = jb->amilli, .cpu_milli = jb->cpu, .memory_mib = jb->mem,
                .end_ms = s->now + time_left(jb, est, s->now),
                .preemptible = jb->preemptible, .loaned = jb->loaned};
            (void)left;
        }
        free(map);
    }
    if (nn == 0)
        goto out;
    for (size_t k = 0; k < s->nqueued; k++) {
        struct ejob *jb = &s->jobs[s->queued[k]];
        sj[k] = (struct tm_sched_job){.id = (int64_t)s->queued[k], .submit_ms = jb->submit,
                                      .estimate_ms = jb->estimate, .cpu_milli = jb->cpu,
                                      .memory_mib = jb->mem, .model_mask = (uint64_t)job_mask(s, jb),
                                      .gpus = jb->gpus, .gpu_milli = jb->gpu_milli, .nodes = 1,
                                      .klass = jb->tj->klass, .preemptible = jb->preemptible,
                                      .estimate_known = jb->known};
    }
    {
        /* tarmac places with the live tick's scheduler policy and
         * parameters (reconcile/schedule.c); the baselines with EASY backfill's
         * first fit in launch order, as common schedulers do. */
        bool tarmac = tarmac_like(s->cfg->policy);
        struct tm_sched_input in = {.jobs = sj, .njobs = s->nqueued, .nodes = sn, .nnodes = nn,
                                    .allocs = sa, .nallocs = na, .now_ms = s->now,
                                    .policy = tarmac ? TM_POLICY_TARMAC : TM_POLICY_BACKFILL,
                                    .params = {.short_ms = 30 * 60000, .align_ends = tarmac,
                                               .elastic = tarmac}};
        bool *gone;
        rc = tm_sched_run(&in, &r);
        if (rc < 0)
            goto out;
        gone = calloc(s->nqueued + 1, sizeof(*gone));
        if (!gone) {
            rc = TM_ENOMEM;
            goto out;
        }
        for (size_t p = 0; p < r.nplacements; p++) {
            const struct tm_sched_placement *pl = &r.placements[p];
            size_t j = s->queued[pl->job];
            struct ejob *jb = &s->jobs[j];
            struct enode *n = &s->nodes[nidx[pl->node]];
            gone[pl->job] = true;
            jb->state = J_RUNNING;
            jb->node = nidx[pl->node];
            jb->mask = pl->gpu_mask;
            jb->amilli = pl->gpu_milli;
            jb->loaned = pl->loaned;
            jb->start = s->now;
            if (jb->first_start < 0)
                jb->first_start = s->now;
            n->njobs++;
            n->used_milli += pl->gpu_milli * __builtin_popcount(pl->gpu_mask);
            s->running[s->nrunning++] = j;
        }
        {
            size_t w = 0;
            for (size_t k = 0; k < s->nqueued; k++)
                if (!gone[k])
                    s->queued[w++] = s->queued[k];
            s->nqueued = w;
        }
        free(gone);
        /* Preemptible work on loan in a reserved hole gives it back the
         * moment the owner starts there (tarmac_apply's preempt op live):
         * a checkpoint if it can, else requeued with its work lost. */
        for (size_t k = 0; k < r.npreemptions; k++) {
            size_t j = (size_t)sa[r.preemptions[k].alloc].job_id;
            if (s->jobs[j].state == J_RUNNING) {
                stop_job(s, j, s->jobs[j].ckpt);
                s->st.evictions++;
            }
        }
    }
out:
    tm_sched_result_release(&r);
    free(sn);
    free(nidx);
    free(sj);
    free(sa);
    return rc;
}

static void observe_forecast(struct fleet_replay *s)
{
    double d[TM_PLANNER_POOL_MAX] = {0, 0};
    if (!s->fc[0])
        return;
    /* running work counts in the pool it runs in */
    for (size_t k = 0; k < s->nrunning; k++) {
        struct ejob *jb = &s->jobs[s->running[k]];
        d[s->nodes[jb->node].spot ? 1 : 0] += jb->milli / 1000.0;
    }
    for (size_t k = 0; k < s->nqueued; k++) {
        struct ejob *jb = &s->jobs[s->queued[k]];
        d[s->cfg->spot && jb->preemptible && (job_mask(s, jb) & 2) ? 1 : 0] += jb->milli / 1000.0;
    }
    for (int p = 0; p < TM_PLANNER_POOL_MAX; p++)
        if (s->fc[p])
            tm_forecast_observe(s->fc[p], s->now, d[p]);
}

/* tarmac's own planner settings: the fitted zone hazards, a short grace
 * with the forecast keeping what demand will want again, moves, drains
 * and a disruption budget. */
static void plan_tarmac_params(struct fleet_replay *s, struct tm_planner_input *in)
{
    const struct tm_elastic_config *c = s->cfg;

    in->spot_zone_hazard = s->zone_hazard;
    /* A short grace: the forecast's upper quantile keeps the nodes
     * that demand will want again (hysteresis), the rest go soon. */
    in->params.idle_grace_ms = TARMAC_GRACE_MS;
    in->params.move_cost_ms = 60 * 1000;
    in->params.disruption_nodes = 2;
    in->params.disruption_pct = 0.1;
    in->params.drain_oversized = true;
    /* Preemptible work that cannot checkpoint may be started over
     * elsewhere when that saves more than it redoes (planner.h). */
    in->params.consolidate_restart = c->consolidate_restart;
    /* Queued work that fits room expected to free within a boot waits
     * for it instead of a launch (planner.h wait_for_ends).  A bet on
     * the estimates with a bounded loss: a running job counts as ending
     * only while its expected time left is under a boot, and the
     * heavy-tail rule makes that at least its time run so far, so one
     * that overruns stops counting within a boot of run time and the
     * launch follows.  It is cheaper on every shape but one, at the
     * price of longer waits for the few jobs it holds back
     * (bench/results/elastic-2026-12-02-c.md). */
    in->params.wait_for_ends = true;
    /* The forecast keeps an idle node for at most a boot: keeping it
     * longer costs more than launching again when the demand comes
     * (ski rental; bench/results/elastic-2026-11-29-c.md). */
    in->params.keep_max_ms = c->boot_ms;
    {
        int64_t since = s->now - 10 * 60 * 1000;
        int32_t recent = 0;
        for (size_t k = 0; k < s->nterm; k++)
            if (s->term_times[k] > since)
                recent++;
        in->params.recent_terminations = recent;
    }
    for (int p = 0; p < TM_PLANNER_POOL_MAX; p++) {
        double mean, upper;
        if (s->fc[p] && tm_forecast_predict(s->fc[p], c->boot_ms + c->tick_ms, 0.9, &mean,
                                            &upper) == 0)
        {
            /* launch ahead for the expected demand, keep for the
             * upper quantile.  Launching for the upper quantile too
             * shortens waits but costs more than it saves, and on the
             * Helios series more than the reactive scaler. */
            in->forecast_gpus[p] = mean;
            /* as the live tick (reconcile/fleet.c): an upper quantile
             * below the mean keeps what the mean launched */
            in->keep_gpus[p] = upper > mean ? upper : mean;
        }
    }
}

/* The month's hard or soft cap as the planner sees it: spent so far, and
 * what the live nodes commit to until they could be released. */
static void plan_budget(struct fleet_replay *s, struct tm_planner_input *in, const struct tm_planner_node *pn,
                        const int32_t *nmap, size_t nn)
{
    const struct tm_elastic_config *c = s->cfg;

    int64_t month0 = s->now / MONTH_MS * MONTH_MS;
    int64_t committed = 0;
    in->budget.active = true;
    in->budget.hard = s->budget.hard;
    in->budget.cap_uusd = s->budget.cap_cents * 10000;
    in->budget.warn_at = s->budget.warn_at;
    in->budget.warned = s->warned;
    in->budget.spent_uusd = (int64_t)spent_between(s, month0, s->now);
    for (size_t i = 0; i < nn; i++) {
        struct enode *n = &s->nodes[nmap[i]];
        int64_t until = pn[i].busy_until_ms > s->now + c->idle_grace_ms
                            ? pn[i].busy_until_ms : s->now + c->idle_grace_ms;
        if (until > month0 + MONTH_MS)
            until = month0 + MONTH_MS;
        if (!n->leaving)
            committed += price_of(s, n) / 1000 * (until - s->now) / 3600;
    }
    in->budget.committed_uusd = committed;
}

/* Carry out one of the planner's actions in the simulated fleet. */
static int apply_action(struct fleet_replay *s, const struct tm_planner_action *x, const int32_t *nmap,
                        const size_t *jmap)
{
    const struct tm_elastic_config *c = s->cfg;
    int rc = 0;

    switch (x->kind) {
    case TM_PLANNER_LAUNCH:
        rc = launch(s, x->type, x->zone, x->spot, x->reason);
        if (rc == TM_EQUOTA)
            rc = 0;
        break;
    case TM_PLANNER_TERMINATE:
        terminate(s, (size_t)nmap[x->node], x->reason);
        break;
    case TM_PLANNER_SUBSTITUTE:
        if (launch(s, x->type, x->zone, true, x->reason) == 0) {
            s->nodes[s->nnodes - 1].replace = nmap[x->node];
            s->st.substitutions++;
        }
        break;
    case TM_PLANNER_MOVE: {
        size_t ni = (size_t)nmap[x->node];
        for (size_t q = s->nrunning; q-- > 0;)
            if (s->jobs[s->running[q]].node == (int)ni)
                stop_job(s, s->running[q], true);
        /* emptied: release it now (its jobs fit elsewhere) */
        terminate(s, ni, "consolidated: jobs checkpointed and moved");
        s->st.moves++;
        if (c->log)
            fprintf(c->log, "%.0f tarmac move %s: %s\n", s->now / 1e3, s->nodes[ni].id, x->reason);
        break;
    }
    case TM_PLANNER_RESTART: {
        size_t ni = (size_t)nmap[x->node];
        for (size_t q = s->nrunning; q-- > 0;) {
            size_t j = s->running[q];
            if (s->jobs[j].node != (int)ni)
                continue;
            if (s->jobs[j].ckpt)
                stop_job(s, j, true);
            else
                restart_job(s, j);
        }
        /* emptied: release it now, as a move does */
        terminate(s, ni, "consolidated by restart");
        s->st.restarts++;
        if (c->log)
            fprintf(c->log, "%.0f %s restart %s: %s\n", s->now / 1e3, tm_elastic_policy_name(c->policy),
                    s->nodes[ni].id, x->reason);
        break;
    }
    case TM_PLANNER_DEADLINE_OD: {
        size_t j = jmap[x->job];
        s->jobs[j].force_od = true;
        if (s->jobs[j].state == J_RUNNING && s->nodes[s->jobs[j].node].spot)
            stop_job(s, j, s->jobs[j].ckpt);
        break;
    }
    case TM_PLANNER_DRAIN:
        s->nodes[nmap[x->node]].cordoned = true;
        s->st.drains++;
        if (c->log)
            fprintf(c->log, "%.0f %s drain %s: %s\n", s->now / 1e3, tm_elastic_policy_name(c->policy),
                    s->nodes[nmap[x->node]].id, x->reason);
        break;
    case TM_PLANNER_REFUSE:
        s->st.refusals++;
        if (c->log)
            fprintf(c->log, "%.0f %s refuse: %s\n", s->now / 1e3, tm_elastic_policy_name(c->policy),
                    x->reason);
        break;
    case TM_PLANNER_WARN:
        s->warned = true;
        if (c->log)
            fprintf(c->log, "%.0f %s warn: %s\n", s->now / 1e3, tm_elastic_policy_name(c->policy),
                    x->reason);
        break;
    default:
        break;
    }
    return rc;
}

static int plan(struct fleet_replay *s)
{
    const struct tm_elastic_config *c = s->cfg;
    size_t nv = s->nqueued + s->nrunning;
    struct tm_elastic_view_node *en = calloc(s->nnodes + 1, sizeof(*en));
    struct tm_elastic_view_job *ej = calloc(nv + 1, sizeof(*ej));
    struct tm_plan_view_node *vn = calloc(s->nnodes + 1, sizeof(*vn));
    struct tm_plan_view_job *vj = calloc(nv + 1, sizeof(*vj));
    struct tm_planner_node *pn = calloc(s->nnodes + 1, sizeof(*pn));
    int32_t *pmap = calloc(s->nnodes + 1, sizeof(*pmap));
    int32_t *nmap = calloc(s->nnodes + 1, sizeof(*nmap));
    struct tm_planner_job *pj = calloc(nv + 1, sizeof(*pj));
    size_t *vjob = calloc(nv + 1, sizeof(*vjob)); /* view job -> sim job */
    size_t *pview = calloc(nv + 1, sizeof(*pview)); /* planner job -> view job */
    size_t *jmap = calloc(nv + 1, sizeof(*jmap));
    struct tm_planner_input in;
    struct tm_planner_result res = {0};
    size_t nn = 0, nj = 0, npj = 0;
    int rc = 0;

    if (!en || !ej || !vn || !vj || !pn || !pmap || !nmap || !pj || !vjob || !pview || !jmap) {
        rc = TM_ENOMEM;
        goto out;
    }
    memset(&in, 0, sizeof(in));
    /* The simulation's live nodes and its running, then queued, jobs as
     * the replay's mapper reads them (elastic_view.h). */
    for (size_t i = 0; i < s->nnodes; i++) {
        struct enode *n = &s->nodes[i];
        pmap[i] = -1;
        if (n->state == N_GONE)
            continue;
        pmap[i] = (int32_t)nn;
        nmap[nn] = (int32_t)i;
        en[nn++] = (struct tm_elastic_view_node){
            .id = (int64_t)i, .type = n->type, .zone = n->zone, .spot = n->spot,
            .ready = n->state == N_READY, .leaving = n->leaving, .cordoned = n->cordoned,
            .idle_since_ms = n->idle_since};
    }
    for (size_t i = 0; i < s->nnodes; i++)
        if (s->nodes[i].state != N_GONE && s->nodes[i].replace >= 0 && pmap[s->nodes[i].replace] >= 0)
            en[pmap[s->nodes[i].replace]].replaced = true;
    for (size_t k = 0; k < s->nrunning + s->nqueued; k++) {
        bool running = k < s->nrunning;
        size_t j = running ? s->running[k] : s->queued[k - s->nrunning];
        const struct ejob *jb = &s->jobs[j];
        vjob[nj] = j;
        ej[nj++] = (struct tm_elastic_view_job){
            .id = (int64_t)j, .node = running ? pmap[jb->node] : -1, .mask = jb->mask,
            .amilli = jb->amilli, .gpus = jb->gpus, .gpu_milli = jb->gpu_milli, .cpu_milli = jb->cpu,
            .memory_mib = jb->mem, .preemptible = jb->preemptible, .checkpointable = jb->ckpt,
            .spot_ok = !running && (job_mask(s, jb) & 2), .stops = jb->attempts, .start_ms = jb->start,
            .estimate_ms = jb->estimate, .deadline_ms = jb->deadline};
        if (running)
            ej[nj - 1].left_ms = time_left(jb, jb->estimate > 0 ? jb->estimate : TM_SCHED_DEFAULT_ESTIMATE_MS,
                                           s->now);
    }
    tm_elastic_view(s->now, en, nn, ej, nj, vn, vj);
    {
        struct tm_plan_view v = {.now_ms = s->now, .prices = s->pr, .nodes = vn, .nnodes = nn,
                                 .jobs = vj, .njobs = nj};
        rc = tm_plan_input_build(&v, pn, pj, &npj, pview);
        if (rc < 0)
            goto out;
    }
    for (size_t k = 0; k < npj; k++)
        jmap[k] = vjob[pview[k]];
    in.now_ms = s->now;
    in.prices = s->pr;
    in.nodes = pn;
    in.nnodes = nn;
    in.jobs = pj;
    in.njobs = npj;
    in.forecast_gpus[0] = in.forecast_gpus[1] = -1;
    in.keep_gpus[0] = in.keep_gpus[1] = -1;
    in.shortages = s->shortages;
    in.nshortages = s->nshort;
    in.params.boot_ms = c->boot_ms;
    in.params.tick_ms = c->tick_ms;
    in.params.idle_grace_ms = c->idle_grace_ms;
    in.params.max_nodes[0] = in.params.max_nodes[1] = 100000;
    in.params.disruption_nodes = 1000000;
    in.params.spot = c->spot;
    in.params.od_fallback = true;
    in.params.od_room_for_preemptible = tarmac_like(c->policy);
    in.params.move_cost_ms = 365 * DAY_MS; /* reactive: never moves */
    in.params.launch_use_ms = c->idle_grace_ms;
    if (tarmac_like(c->policy))
        plan_tarmac_params(s, &in);
    if (s->budget_on)
        plan_budget(s, &in, pn, nmap, nn);
    rc = tm_planner_run(&in, &res);
    if (rc < 0)
        goto out;
    for (size_t k = 0; k < res.nactions && rc >= 0; k++)
        rc = apply_action(s, &res.actions[k], nmap, jmap);
out:
    tm_planner_result_release(&res);
    free(en);
    free(ej);
    free(vn);
    free(vj);
    free(pn);
    free(pmap);
    free(nmap);
    free(pj);
    free(vjob);
    free(pview);
    free(jmap);
    return rc;
}

/* Hard cap guard: stop every node when the next tick would pass the cap. */
static void budget_guard(struct fleet_replay *s)
{
    int64_t month0, cap;
    double spent, rate = 0;

    if (!s->budget_on || !s->budget.hard)
        return;
    month0 = s->now / MONTH_MS * MONTH_MS;
    cap = s->budget.cap_cents * 10000;
    spent = spent_between(s, month0, s->now);
    for (size_t i = 0; i < s->nnodes; i++)
        if (s->nodes[i].state != N_GONE && node_end(s, &s->nodes[i]) > s->now)
            rate += (double)price_of(s, &s->nodes[i]);
    if (spent + rate * (double)(s->cfg->tick_ms + s->cp.shutdown_ms) / HOUR_MS > (double)cap) {
        for (size_t q = s->nrunning; q-- > 0;)
            stop_job(s, s->running[q], s->jobs[s->running[q]].ckpt);
        for (size_t i = 0; i < s->nnodes; i++)
            if (s->nodes[i].state != N_GONE)
                terminate(s, i, "hard budget cap: the next tick would pass it");
    }
}

static bool alive_now(const struct fleet_replay *s)
{
    for (size_t i = 0; i < s->nnodes; i++)
        if (s->nodes[i].state != N_GONE && node_end(s, &s->nodes[i]) > s->now)
            return true;
    return false;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}


/* The resources the floor covers, each in whole units: GPUs, CPU cores,
 * GiB of memory. */
enum { DIM_GPU, DIM_CPU, DIM_MEM, DIMS };

static int64_t type_units(const struct tm_price_type *ty, int dim)
{
    return dim == DIM_GPU ? ty->gpus : dim == DIM_CPU ? ty->cpu_milli / 1000 : ty->memory_mib / 1024;
}

/* The price of a type in a pool, micro-dollars per hour; 0: not offered
 * there (a spot price of 0).  The spot pool falls back to on-demand when
 * no type of the table offers spot, as the replay's launches do. */
static int64_t pool_price(const struct tm_price_table *pr, size_t t, bool spot)
{
    bool any_spot = false;

    if (!spot)
        return pr->types[t].on_demand_uusd_per_hour;
    for (size_t k = 0; k < pr->ntypes; k++)
        any_spot |= pr->types[k].spot_uusd_per_hour > 0;
    return any_spot ? pr->types[t].spot_uusd_per_hour : pr->types[t].on_demand_uusd_per_hour;
}

/* Floor, one resource: cheapest cover of u units of `dim` by the table's
 * types (any number of each), for u = 0..maxu. */
static double *cover_table(const struct tm_price_table *pr, bool spot, int dim, int64_t maxu)
{
    double *c = malloc(((size_t)maxu + 1) * sizeof(double));
    if (!c)
        return NULL;
    c[0] = 0;
    for (int64_t u = 1; u <= maxu; u++) {
        double best = INFINITY;
        for (size_t t = 0; t < pr->ntypes; t++) {
            int64_t p = pool_price(pr, t, spot), have = type_units(&pr->types[t], dim);
            int64_t rest = u - have;
            double v;
            if (p <= 0 || have <= 0)
                continue;
            v = (double)p + (rest > 0 ? c[rest] : 0);
            if (v < best)
                best = v;
        }
        c[u] = best;
    }
    return c;
}

/* Lower bound of one job, micro-dollars (docs/measuring.md): its runtime at its
 * dominant share (the largest of its GPU, CPU and memory shares) of the
 * cheapest type that holds it, in its pool.  A type holds it when its
 * GPUs, CPU and memory are each at least the job's.  Exported for the
 * known-answer tests through tm_elastic_job_bound(). */
static double job_bound(const struct tm_price_table *pr, bool spot, int32_t milli, int64_t cpu,
                        int64_t mem, int64_t runtime_ms)
{
    double best = INFINITY;

    for (size_t t = 0; t < pr->ntypes; t++) {
        const struct tm_price_type *ty = &pr->types[t];
        int64_t p = pool_price(pr, t, spot);
        double share;
        if (p <= 0 || ty->gpus <= 0 || (int64_t)ty->gpus * 1000 < milli || ty->cpu_milli < cpu ||
            ty->memory_mib < mem)
            continue;
        share = (double)milli / 1000.0 / ty->gpus;
        if (ty->cpu_milli > 0 && (double)cpu / (double)ty->cpu_milli > share)
            share = (double)cpu / (double)ty->cpu_milli;
        if (ty->memory_mib > 0 && (double)mem / (double)ty->memory_mib > share)
            share = (double)mem / (double)ty->memory_mib;
        if ((double)p * share < best)
            best = (double)p * share;
    }
    return best == INFINITY ? 0 : best * (double)runtime_ms / HOUR_MS;
}

double tm_elastic_job_bound_usd(const struct tm_price_table *pr, bool spot, int32_t gpu_milli,
                                int64_t cpu_milli, int64_t memory_mib, int64_t runtime_ms)
{
    return job_bound(pr, spot, gpu_milli, cpu_milli, memory_mib, runtime_ms) / 1e6;
}

/* Floor rate of one pool's demand (GPU milli, CPU milli, memory MiB),
 * micro-dollars per hour: the largest over GPUs, CPU and memory of the
 * cheapest set of nodes holding that resource alone.  No set cheaper than
 * that holds all three, so it stays a floor; it is the cheapest set
 * holding all three whenever one resource binds, as it does on these
 * tables, where CPU and memory scale with GPUs. */
static double floor_rate(double *const cov[DIMS], const int64_t dem[DIMS])
{
    int64_t u[DIMS] = {(dem[DIM_GPU] + 999) / 1000, (dem[DIM_CPU] + 999) / 1000, (dem[DIM_MEM] + 1023) / 1024};
    double r = 0;

    for (int d = 0; d < DIMS; d++)
        if (cov[d][u[d]] > r)
            r = cov[d][u[d]];
    return r;
}

double tm_elastic_floor_rate_usd(const struct tm_price_table *pr, bool spot, int32_t gpu_milli,
                                 int64_t cpu_milli, int64_t memory_mib)
{
    int64_t dem[DIMS] = {gpu_milli, cpu_milli, memory_mib};
    int64_t maxu[DIMS] = {gpu_milli / 1000 + 2, cpu_milli / 1000 + 2, memory_mib / 1024 + 2};
    double *cov[DIMS] = {NULL, NULL, NULL}, r = -1;

    for (int d = 0; d < DIMS; d++)
        if (!(cov[d] = cover_table(pr, spot, d, maxu[d])))
            goto out;
    r = floor_rate(cov, dem) / 1e6;
out:
    for (int d = 0; d < DIMS; d++)
        free(cov[d]);
    return r;
}

struct dev {
    int64_t t;
    int32_t milli;
    int64_t cpu, mem;
    int pool;
};

static int cmp_dev(const void *a, const void *b)
{
    const struct dev *x = a, *y = b;
    return x->t < y->t ? -1 : x->t > y->t;
}

static int bounds(struct fleet_replay *s)
{
    const struct tm_price_table *pr = s->pr;
    struct dev *ev = malloc((2 * s->njobs + 1) * sizeof(*ev));
    int64_t cur[2][DIMS] = {{0}}, peak[2][DIMS] = {{0}};
    double *cov[2][DIMS] = {{NULL}}, floor_uusd = 0, lb = 0;
    size_t ne = 0;
    int r = TM_ENOMEM;

    if (!ev)
        return TM_ENOMEM;
    for (size_t j = 0; j < s->njobs; j++) {
        const struct ejob *jb = &s->jobs[j];
        int pool = s->cfg->spot && jb->preemptible ? 1 : 0;
        lb += job_bound(pr, pool == 1, jb->milli, jb->cpu, jb->mem, jb->runtime);
        ev[ne++] = (struct dev){jb->submit, jb->milli, jb->cpu, jb->mem, pool};
        ev[ne++] = (struct dev){jb->submit + jb->runtime, -jb->milli, -jb->cpu, -jb->mem, pool};
    }
    qsort(ev, ne, sizeof(*ev), cmp_dev);
    for (size_t k = 0; k < ne; k++) {
        int64_t d[DIMS] = {ev[k].milli, ev[k].cpu, ev[k].mem};
        for (int x = 0; x < DIMS; x++) {
            cur[ev[k].pool][x] += d[x];
            if (cur[ev[k].pool][x] > peak[ev[k].pool][x])
                peak[ev[k].pool][x] = cur[ev[k].pool][x];
        }
    }
    for (int p = 0; p < 2; p++)
        for (int x = 0; x < DIMS; x++) {
            int64_t m = peak[0][x] > peak[1][x] ? peak[0][x] : peak[1][x];
            m = (x == DIM_MEM ? m / 1024 : m / 1000) + 2;
            cov[p][x] = cover_table(pr, p == 1 && s->cfg->spot, x, m);
            if (!cov[p][x])
                goto out;
        }
    memset(cur, 0, sizeof(cur));
    for (size_t k = 0; k < ne; k++) {
        int64_t d[DIMS] = {ev[k].milli, ev[k].cpu, ev[k].mem};
        for (int x = 0; x < DIMS; x++)
            cur[ev[k].pool][x] += d[x];
        if (k + 1 < ne && ev[k + 1].t > ev[k].t) {
            double rate = floor_rate(cov[0], cur[0]) + floor_rate(cov[1], cur[1]);
            floor_uusd += rate * (double)(ev[k + 1].t - ev[k].t) / HOUR_MS;
        }
    }
    s->st.lower_bound_usd = lb / 1e6;
    s->st.floor_usd = floor_uusd / 1e6;
    r = 0;
out:
    free(ev);
    for (int p = 0; p < 2; p++)
        for (int x = 0; x < DIMS; x++)
            free(cov[p][x]);
    return r;
}

static int64_t static_peak_gpus(struct fleet_replay *s)
{
    struct dev *ev = malloc((2 * s->njobs + 1) * sizeof(*ev));
    int64_t cur = 0, peak = 0;
    size_t ne = 0;
    if (!ev)
        return -1;
    for (size_t j = 0; j < s->njobs; j++) {
        ev[ne++] = (struct dev){.t = s->jobs[j].submit, .milli = s->jobs[j].milli};
        ev[ne++] = (struct dev){.t = s->jobs[j].submit + s->jobs[j].runtime, .milli = -s->jobs[j].milli};
    }
    qsort(ev, ne, sizeof(*ev), cmp_dev);
    for (size_t k = 0; k < ne; k++) {
        cur += ev[k].milli;
        if (cur > peak)
            peak = cur;
    }
    free(ev);
    return (peak + 999) / 1000;
}

static struct fleet_replay *g_cmp_replay;

static int cmp_submit(const void *a, const void *b)
{
    const struct ejob *x = &g_cmp_replay->jobs[*(const size_t *)a];
    const struct ejob *y = &g_cmp_replay->jobs[*(const size_t *)b];
    if (x->submit != y->submit)
        return x->submit < y->submit ? -1 : 1;
    return *(const size_t *)a < *(const size_t *)b ? -1 : 1;
}

static int load_jobs(struct fleet_replay *s, const struct tm_trace *t)
{
    const struct tm_elastic_config *c = s->cfg;
    int64_t lo = INT64_MAX, hi = INT64_MIN, maxcpu = 0, maxmem = 0;
    size_t n = 0;

    for (size_t i = 0; i < s->pr->ntypes; i++) {
        if (s->pr->types[i].gpus > s->max_type_gpus)
            s->max_type_gpus = s->pr->types[i].gpus;
        if (s->pr->types[i].cpu_milli > maxcpu)
            maxcpu = s->pr->types[i].cpu_milli;
        if (s->pr->types[i].memory_mib > maxmem)
            maxmem = s->pr->types[i].memory_mib;
    }
    s->jobs = calloc(t->njobs * (size_t)c->copies + 1, sizeof(*s->jobs));
    if (!s->jobs)
        return TM_ENOMEM;
    for (size_t i = 0; i < t->njobs; i++) {
        const struct tm_trace_job *tj = &t->jobs[i];
        bool ok = tj->start_ms >= 0 && (tj->gpus > 0 || tj->gpu_milli > 0) &&
                  (c->since_ms < 0 || tj->submit_ms >= c->since_ms) &&
                  (c->max_runtime_ms < 0 || tj->end_ms - tj->start_ms <= c->max_runtime_ms) &&
                  tj->gpus <= s->max_type_gpus && tj->cpu_milli <= maxcpu && tj->memory_mib <= maxmem &&
                  tj->nodes <= 1;
        if (!ok) {
            s->st.dropped++;
            continue;
        }
        if (tj->submit_ms < lo)
            lo = tj->submit_ms;
        if (tj->submit_ms > hi)
            hi = tj->submit_ms;
    }
    for (int k = 0; k < c->copies; k++)
        for (size_t i = 0; i < t->njobs; i++) {
            const struct tm_trace_job *tj = &t->jobs[i];
            struct ejob *jb;
            bool ok = tj->start_ms >= 0 && (tj->gpus > 0 || tj->gpu_milli > 0) &&
                      (c->since_ms < 0 || tj->submit_ms >= c->since_ms) &&
                      (c->max_runtime_ms < 0 || tj->end_ms - tj->start_ms <= c->max_runtime_ms) &&
                      tj->gpus <= s->max_type_gpus && tj->cpu_milli <= maxcpu &&
                      tj->memory_mib <= maxmem && tj->nodes <= 1;
            if (!ok)
                continue;
            jb = &s->jobs[n++];
            jb->tj = tj;
            jb->submit = tj->submit_ms;
            if (k > 0 && hi > lo)
                jb->submit = lo + (tj->submit_ms - lo + (int64_t)k * 7 * DAY_MS) % (hi - lo + 1);
            jb->runtime = tj->end_ms - tj->start_ms;
            if (jb->runtime < 1000)
                jb->runtime = 1000;
            jb->cpu = tj->cpu_milli;
            jb->mem = tj->memory_mib;
            jb->gpus = tj->gpus;
            jb->gpu_milli = tj->gpus > 0 ? 1000 : tj->gpu_milli;
            jb->milli = tj->gpus > 0 ? tj->gpus * 1000 : tj->gpu_milli;
            jb->preemptible = tj->preemptible;
            jb->ckpt = c->ckpt == TM_CKPT_ALL || (c->ckpt == TM_CKPT_BE && tj->preemptible);
            jb->deadline = c->deadline_slack > 0 && tj->preemptible
                               ? jb->submit + (int64_t)(c->deadline_slack * (double)jb->runtime) : 0;
            jb->state = J_FUTURE;
            jb->first_start = -1;
            jb->node = -1;
        }
    s->njobs = n;
    if (n == 0)
        return TM_EINVAL;
    s->order = malloc(n * sizeof(size_t));
    s->queued = malloc(n * sizeof(size_t));
    s->running = malloc(n * sizeof(size_t));
    if (!s->order || !s->queued || !s->running)
        return TM_ENOMEM;
    for (size_t i = 0; i < n; i++)
        s->order[i] = i;
    g_cmp_replay = s;
    qsort(s->order, n, sizeof(size_t), cmp_submit);
    g_cmp_replay = NULL;
    return 0;
}

/* The predictor's key: the trace task's own name, then class and GPUs.
 * The CPU and memory request that the scheduler's replay adds between them
 * (tm_trace_estimate_key's team) is left out here: on openb it moved
 * nothing, except where the spot-loss rule reads the estimates (hazards,
 * nothing checkpointable), and there it cost. */
static struct tm_estimate_key key_of(const struct ejob *jb, char *buf, size_t len)
{
    struct tm_estimate_key k = tm_trace_estimate_key(jb->tj, buf, len);

    k.team = NULL;
    return k;
}

static void fleet_replay_free(struct fleet_replay *s)
{
    tm_simcloud_free(s->cloud);
    tm_estimator_free(s->est);
    tm_forecast_free(s->fc[0]);
    tm_forecast_free(s->fc[1]);
    free(s->jobs);
    free(s->order);
    free(s->queued);
    free(s->running);
    free(s->nodes);
    free(s->zone_hazard);
    free(s->waits);
}

/* The simulated cloud's parameters from the price table and the replay's
 * configuration: one type per priced type, the table's zones (one "sim-a"
 * without any). */
static void fleet_replay_cloud_params(struct fleet_replay *s)
{
    const struct tm_elastic_config *cfg = s->cfg;

    tm_simcloud_params_init(&s->cp);
    for (size_t i = 0; i < s->pr->ntypes && i < TM_SIM_TYPES_MAX; i++) {
        struct tm_sim_type *st = &s->cp.types[s->cp.ntypes++];
        snprintf(st->name, sizeof(st->name), "%s", s->pr->types[i].name);
        st->gpus = s->pr->types[i].gpus;
        snprintf(st->gpu_model, sizeof(st->gpu_model), "%s", s->pr->types[i].gpu_model);
        st->cpu_milli = s->pr->types[i].cpu_milli;
        st->memory_mib = s->pr->types[i].memory_mib;
        st->on_demand_uusd_per_hour = s->pr->types[i].on_demand_uusd_per_hour;
        st->spot_uusd_per_hour = s->pr->types[i].spot_uusd_per_hour;
        st->capacity = s->pr->types[i].capacity;
    }
    if (s->pr->nzones == 0) {
        snprintf(s->cp.zones[0], sizeof(s->cp.zones[0]), "sim-a");
        s->cp.nzones = 1;
    } else {
        for (size_t z = 0; z < s->pr->nzones && z < TM_SIM_ZONES_MAX; z++)
            snprintf(s->cp.zones[z], sizeof(s->cp.zones[z]), "%s", s->pr->zones[z]);
        s->cp.nzones = s->pr->nzones < TM_SIM_ZONES_MAX ? s->pr->nzones : TM_SIM_ZONES_MAX;
    }
    s->cp.boot_delay_ms = cfg->boot_ms;
    s->cp.spot_hazard_per_hour = cfg->spot ? cfg->hazard_per_hour : 0;
    s->cp.spot_notice_ms = cfg->notice_ms;
    s->cp.shutdown_ms = 0;
    s->cp.seed = cfg->seed;
}

/* Everything a run needs before its first event: the org budget, the
 * cloud, the estimator, the jobs, the forecasters (tarmac) and the
 * bounds.  Returns 0 or a negative code; s is freed by fleet_replay_free either
 * way. */
static int fleet_replay_init(struct fleet_replay *s, const struct tm_trace *t, const struct tm_elastic_config *cfg)
{
    int rc;

    memset(s, 0, sizeof(*s));
    s->cfg = cfg;
    s->pr = cfg->prices;
    for (size_t b = 0; b < s->pr->nbudgets; b++)
        if (s->pr->budgets[b].scope == TM_BUDGET_ORG) {
            s->budget = s->pr->budgets[b];
            s->budget_on = true;
            break;
        }
    fleet_replay_cloud_params(s);
    rc = setup_spot_pools(s);
    if (rc < 0)
        return rc;
    rc = tm_simcloud_create(&s->cp, &s->cloud);
    if (rc < 0)
        return rc;
    rc = tm_estimator_new(&s->est);
    if (rc < 0)
        return rc;
    rc = load_jobs(s, t);
    if (rc < 0)
        return rc;
    if (tarmac_like(cfg->policy)) {
        struct tm_forecast_params fp;
        tm_forecast_params_default(&fp);
        fp.horizon_steps = (int32_t)((cfg->boot_ms + cfg->tick_ms) / fp.step_ms + 1);
        for (int p = 0; p < (cfg->spot ? 2 : 1); p++) {
            rc = tm_forecast_new(TM_FORECAST_TARMAC, &fp, &s->fc[p]);
            if (rc < 0)
                return rc;
        }
    }
    rc = bounds(s);
    if (rc < 0)
        return rc;
    s->waits = malloc(s->njobs * sizeof(double));
    if (!s->waits)
        return TM_ENOMEM;
    return 0;
}

/* The static policy's fleet, launched once: enough of the largest type
 * (the cheaper on ties) for the trace's peak. */
static int launch_static(struct fleet_replay *s)
{
    int64_t g = static_peak_gpus(s);
    int big = 0;
    int rc;

    for (size_t i = 1; i < s->pr->ntypes; i++)
        if (s->pr->types[i].gpus > s->pr->types[big].gpus ||
            (s->pr->types[i].gpus == s->pr->types[big].gpus &&
             s->pr->types[i].on_demand_uusd_per_hour < s->pr->types[big].on_demand_uusd_per_hour))
            big = (int)i;
    for (int64_t k = 0; k < (g + s->pr->types[big].gpus - 1) / s->pr->types[big].gpus; k++) {
        rc = launch(s, big, (int)(k % (int64_t)s->cp.nzones), false, "static: enough for the peak");
        if (rc < 0)
            return rc;
    }
    return 0;
}

/* The time of the next event: an arrival, a job's end, a boot, a notice
 * or a node's end; NEVER when none is pending. */
static int64_t next_event(const struct fleet_replay *s)
{
    int64_t next = NEVER;

    if (s->next_arrival < s->njobs)
        next = s->jobs[s->order[s->next_arrival]].submit;
    for (size_t k = 0; k < s->nrunning; k++) {
        const struct ejob *jb = &s->jobs[s->running[k]];
        int64_t e = jb->start + jb->runtime - jb->progress;
        if (e < next)
            next = e;
    }
    for (size_t i = 0; i < s->nnodes; i++) {
        const struct enode *n = &s->nodes[i];
        int64_t e;
        if (n->state == N_GONE)
            continue;
        if (n->state == N_BOOTING && n->ready < next)
            next = n->ready;
        if (!n->noticed && n->notice != NEVER && n->notice > s->now - 1 && n->notice < next)
            next = n->notice;
        e = node_end(s, n);
        if (e < next)
            next = e;
    }
    return next;
}

/* Node events at s->now: boots completed (a substitute's replaced node
 * handing over its jobs), notices (checkpoints, doomed jobs requeued
 * under tarmac) and nodes that end (their jobs stopped, interruptions
 * counted). */
static void node_events(struct fleet_replay *s)
{
    const struct tm_elastic_config *cfg = s->cfg;

    for (size_t i = 0; i < s->nnodes; i++) {
        struct enode *n = &s->nodes[i];
        if (n->state == N_GONE)
            continue;
        if (n->state == N_BOOTING && n->ready <= s->now && node_end(s, n) > s->now) {
            n->state = N_READY;
            n->idle_since = s->now;
            if (n->replace >= 0) {
                /* the substitute is up: move the replaced node's jobs */
                struct enode *old = &s->nodes[n->replace];
                for (size_t q = s->nrunning; q-- > 0;)
                    if (s->jobs[s->running[q]].node == n->replace)
                        stop_job(s, s->running[q], s->jobs[s->running[q]].ckpt);
                if (old->state != N_GONE)
                    terminate(s, (size_t)n->replace, "substituted by spot");
                n->replace = -1;
            }
        }
        if (!n->noticed && n->notice != NEVER && n->notice <= s->now) {
            n->noticed = true;
            n->leaving = true;
            for (size_t q = s->nrunning; q-- > 0;) {
                struct ejob *jb = &s->jobs[s->running[q]];
                if (jb->node != (int)i)
                    continue;
                if (jb->ckpt)
                    stop_job(s, s->running[q], true);
                else if (tarmac_like(cfg->policy) &&
                         jb->start + jb->runtime - jb->progress > n->interrupt)
                    stop_job(s, s->running[q], false); /* doomed: requeue at once */
            }
        }
        if (node_end(s, n) <= s->now) {
            bool intr = n->interrupt != NEVER && n->interrupt <= s->now;
            for (size_t q = s->nrunning; q-- > 0;)
                if (s->jobs[s->running[q]].node == (int)i)
                    stop_job(s, s->running[q], false);
            if (intr) {
                s->st.interruptions++;
                if (n->zone >= 0 && n->zone < TM_PRICES_ZONES_MAX)
                    s->st.interruptions_by_zone[n->zone]++;
            }
            n->state = N_GONE;
        }
    }
}

/* Jobs that finish at s->now: their node freed, their GPU-hours, wait and
 * deadline counted, their runtime taught to the estimator.  Returns 0 or
 * a negative code. */
static int completions(struct fleet_replay *s)
{
    int rc;

    for (size_t q = s->nrunning; q-- > 0;) {
        size_t j = s->running[q];
        struct ejob *jb = &s->jobs[j];
        if (jb->start + jb->runtime - jb->progress <= s->now) {
            struct enode *n = &s->nodes[jb->node];
            char kb[64];
            struct tm_estimate_key k = key_of(jb, kb, sizeof(kb));
            n->njobs--;
            n->used_milli -= jb->amilli * __builtin_popcount(jb->mask);
            if (n->njobs == 0)
                n->idle_since = s->now;
            s->running[q] = s->running[--s->nrunning];
            jb->state = J_DONE;
            jb->node = -1;
            s->done++;
            s->st.useful_gpu_hours += (double)jb->milli / 1000 * (double)jb->runtime / HOUR_MS;
            if (jb->preemptible)
                s->st.be_gpu_hours += (double)jb->milli / 1000 * (double)jb->runtime / HOUR_MS;
            s->waits[s->nwaits++] = (double)(jb->first_start - jb->submit) / 1e3;
            if (jb->deadline) {
                s->st.deadlines++;
                if (s->now > jb->deadline)
                    s->st.deadlines_missed++;
            }
            rc = tm_estimator_observe(s->est, &k, jb->runtime);
            if (rc < 0)
                return rc;
        }
    }
    return 0;
}

/* Jobs submitted by s->now join the queue.  An estimate from the task's
 * own earlier runs (level 1: the same trace task again, as --copies
 * submits it) is known, and tarmac places the job by its expected end
 * (align_ends). */
static void arrivals(struct fleet_replay *s)
{
    while (s->next_arrival < s->njobs && s->jobs[s->order[s->next_arrival]].submit <= s->now) {
        size_t j = s->order[s->next_arrival++];
        char kb[64];
        struct tm_estimate_key k = key_of(&s->jobs[j], kb, sizeof(kb));
        int lvl;
        s->jobs[j].estimate = tm_estimate_level(s->est, &k, &lvl);
        s->jobs[j].known = lvl == 1;
        s->st.known_estimates += s->jobs[j].known;
        /* The oracle is told the truth, and trusts it (align_ends). */
        if (s->cfg->policy == TM_ELASTIC_ORACLE) {
            s->jobs[j].estimate = s->jobs[j].runtime > 0 ? s->jobs[j].runtime : 1;
            s->jobs[j].known = true;
        }
        enqueue(s, j);
    }
}

/* One planning pass of the fleet policy, then the scheduler over what it
 * changed.  Returns 0 or a negative code. */
static int plan_and_schedule(struct fleet_replay *s)
{
    int rc = plan(s);
    if (rc < 0)
        return rc;
    return sched_place_queue(s);
}

/* The most nodes alive (not leaving) at once. */
static void count_peak(struct fleet_replay *s)
{
    size_t alive = 0;
    for (size_t i = 0; i < s->nnodes; i++)
        if (s->nodes[i].state != N_GONE && !s->nodes[i].leaving)
            alive++;
    if (alive > s->st.peak_nodes)
        s->st.peak_nodes = alive;
}

/* The end of the replay: every node released, then cost, paid GPU-hours,
 * the worst month's overshoot, and the waits. */
static void finish(struct fleet_replay *s)
{
    const struct tm_elastic_config *cfg = s->cfg;

    for (size_t i = 0; i < s->nnodes; i++)
        if (s->nodes[i].state != N_GONE)
            terminate(s, i, "replay over");
    {
        double cost = 0, paid = 0;
        for (size_t i = 0; i < s->nnodes; i++) {
            struct enode *n = &s->nodes[i];
            int64_t e = node_end(s, n);
            if (e == NEVER)
                e = s->now;
            cost += (double)price_of(s, n) * (double)(e - n->launched) / HOUR_MS;
            paid += (double)s->pr->types[n->type].gpus * (double)(e - n->launched) / HOUR_MS;
        }
        s->st.cost_usd = cost / 1e6;
        s->st.paid_gpu_hours = paid;
    }
    if (s->budget_on) {
        /* overshoot: the worst month */
        for (int64_t m = 0; m <= s->now / MONTH_MS; m++) {
            double sp = spent_between(s, m * MONTH_MS, (m + 1) * MONTH_MS) / 1e4;
            double over = sp - (double)s->budget.cap_cents;
            if (over > s->st.budget_overshoot_cents)
                s->st.budget_overshoot_cents = over;
        }
    }
    s->st.jobs = s->njobs;
    s->st.unfinished = s->njobs - s->done;
    if (s->nwaits) {
        double sum = 0;
        size_t longer = 0;
        qsort(s->waits, s->nwaits, sizeof(double), cmp_double);
        for (size_t k = 0; k < s->nwaits; k++) {
            sum += s->waits[k];
            if (s->waits[k] > cfg->boot_ms / 1e3)
                longer++;
        }
        s->st.wait_mean_s = sum / (double)s->nwaits;
        s->st.waited_longer_than_boot_share = (double)longer / (double)s->nwaits;
        s->st.wait_p99_s = s->waits[(size_t)((double)(s->nwaits - 1) * 0.99)];
    }
}

int tm_elastic_run(const struct tm_trace *t, const struct tm_elastic_config *cfg,
                   struct tm_elastic_stats *ret)
{
    struct fleet_replay s;
    struct timespec w0, w1;
    int64_t next_tick, t0, last_submit;
    int rc;

    if (!t || !cfg || !cfg->prices || cfg->prices->ntypes == 0 || cfg->copies < 1 || cfg->tick_ms <= 0)
        return TM_EINVAL;
    clock_gettime(CLOCK_MONOTONIC, &w0);
    rc = fleet_replay_init(&s, t, cfg);
    if (rc < 0)
        goto out;
    t0 = s.jobs[s.order[0]].submit - cfg->boot_ms;
    last_submit = s.jobs[s.order[s.njobs - 1]].submit;
    s.now = t0;
    next_tick = t0;
    if (cfg->policy == TM_ELASTIC_STATIC) {
        rc = launch_static(&s);
        if (rc < 0)
            goto out;
    }
    for (;;) {
        int64_t next;
        size_t refused = s.st.refusals;
        if (s.done == s.njobs)
            break;
        next = next_event(&s);
        if (cfg->policy != TM_ELASTIC_STATIC && next_tick < next)
            next = next_tick;
        if (next == NEVER) {
            if (s.nqueued == 0)
                break;
            next = next_tick;
        }
        if (next < s.now)
            next = s.now;
        account_waste(&s, next);
        s.now = next;
        node_events(&s);
        rc = completions(&s);
        if (rc < 0)
            goto out;
        arrivals(&s);
        budget_guard(&s);
        rc = sched_place_queue(&s);
        if (rc < 0)
            goto out;
        if (s.now >= next_tick) {
            observe_forecast(&s);
            if (cfg->policy != TM_ELASTIC_STATIC) {
                refused = s.st.refusals;
                rc = plan_and_schedule(&s);
                if (rc < 0)
                    goto out;
            }
            s.queue_grew = false;
            next_tick = s.now + cfg->tick_ms;
            if (cfg->policy != TM_ELASTIC_STATIC && s.budget_on && s.st.refusals > refused &&
                s.nrunning == 0 && !alive_now(&s))
                next_tick = (s.now / MONTH_MS + 1) * MONTH_MS; /* the cap holds until next month */
        }
        else if (cfg->policy != TM_ELASTIC_STATIC && s.queue_grew && s.nqueued > 0) {
            /* A submission (or a requeue) that found no room starts a pass
             * at once, as in the controller, where it enqueues its pool
             * (the live controller: NOTIFY enqueues a pool id) instead of waiting
             * for the next tick. */
            s.queue_grew = false;
            rc = plan_and_schedule(&s);
            if (rc < 0)
                goto out;
        }
        if (s.next_arrival >= s.njobs && s.now > last_submit + 400 * DAY_MS)
            break; /* what is left cannot run (budgets): counted unfinished */
        count_peak(&s);
    }
    finish(&s);
    clock_gettime(CLOCK_MONOTONIC, &w1);
    s.st.wall_s = (double)(w1.tv_sec - w0.tv_sec) + (double)(w1.tv_nsec - w0.tv_nsec) / 1e9;
    *ret = s.st;
    rc = 0;
out:
    fleet_replay_free(&s);
    return rc;
}
