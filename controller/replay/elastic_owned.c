/*
 * controller/replay/elastic_owned.c: the elastic replay with an owned fleet
 * (see elastic_owned.h).
 *
 * Discrete events in virtual time: arrivals, job ends and a tick every
 * tick_ms while a queue or a bought node needs one.  After the events of an
 * instant the owned scheduler places what fits; then (at a tick, or when a
 * job arrived) the burst rule decides for each job still queued.
 */
#include "controller/replay/elastic_owned.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "controller/fleet/burst.h"
#include "controller/sched/estimate.h"
#include "controller/sched/scheduler.h"
#include "core/err.h"

#define HOUR_MS (3600LL * 1000)
#define NEVER INT64_MAX
/* queued jobs one owned pass reads, as batch schedulers bound backfill */
#define LOOKAHEAD 500

const char *tm_owned_policy_name(enum tm_owned_policy p)
{
    static const char *const n[TM_OWNED_POLICY_MAX] = {"owned-only", "zero-wait", "constant-wait",
                                                       "tarmac"};
    return (unsigned)p < TM_OWNED_POLICY_MAX ? n[p] : "?";
}

int tm_owned_policy_parse(const char *name)
{
    for (int i = 0; i < TM_OWNED_POLICY_MAX; i++)
        if (strcmp(name, tm_owned_policy_name((enum tm_owned_policy)i)) == 0)
            return i;
    return -1;
}

void tm_owned_config_default(struct tm_owned_config *c)
{
    memset(c, 0, sizeof(*c));
    c->policy = TM_OWNED_TARMAC;
    c->boot_ms = 180 * 1000;
    c->tick_ms = 30 * 1000;
    c->idle_grace_ms = 600 * 1000;
    c->burst_wait_ms = 3600 * 1000;
    c->since_ms = -1;
    c->max_runtime_ms = -1;
}

enum { J_FUTURE, J_QUEUED, J_RUNNING, J_DONE };

struct ojob {
    const struct tm_trace_job *tj;
    int64_t submit, runtime, estimate, start, end;
    int32_t g, n;   /* GPUs per node, nodes */
    int32_t pl;     /* offset of its nodes in place[] */
    int32_t ridx;   /* index in running_owned while there */
    int64_t proj;   /* queued: the shadow of its hold in owned pass proj_pass, NEVER none */
    uint64_t proj_pass;
    int state;
    bool cloud, preemptible;
};

struct cnode {
    int64_t launched, ready, released, idle_since;
    int32_t free, njobs;
    bool spot;
};

struct ends { int64_t t; size_t j; };
struct nend { int32_t node, g; int64_t end; };

struct owned_replay {
    const struct tm_owned_config *cfg;
    struct tm_burst_params bp;
    struct tm_burst_offer offer;
    double od_node_usd, spot_node_usd;
    struct ojob *jobs;
    size_t njobs, next_arrival, done;
    int32_t *place;
    int32_t nown, *ofree;          /* owned nodes and their free GPUs */
    int64_t ofree_total;
    size_t *running_owned, nrun;
    size_t *queue, qhead, qlen, qlive; /* submit order; dead entries skipped */
    struct cnode *cn;
    size_t ncn, capcn;
    size_t *live, nlive;           /* bought nodes not released */
    struct ends *heap;
    size_t nheap;
    struct tm_estimator *est;
    int64_t now;
    int64_t starvation_ms;          /* the bound the figures count against */
    uint64_t pass;                  /* owned passes so far */
    double *jct, *wait;
    size_t nfin;
    /* scratch of a pass */
    struct ends *fl;                /* fluid projection heap */
    int64_t *tk;                    /* per owned node: when it frees enough */
    int64_t *res_t;                 /* per owned node: held until (NEVER: not held) */
    int32_t *res_spare;             /* held: GPUs free at res_t beyond the holder's */
    int32_t *have;
    struct nend *ne;                /* running jobs' (node, expected end) */
    struct tm_owned_stats st;
};

/* ---- the end-time heap ---- */

static void heap_push(struct ends *h, size_t *n, int64_t t, size_t j)
{
    size_t i = (*n)++;
    h[i] = (struct ends){t, j};
    while (i > 0 && h[(i - 1) / 2].t > h[i].t) {
        struct ends x = h[i];
        h[i] = h[(i - 1) / 2];
        h[(i - 1) / 2] = x;
        i = (i - 1) / 2;
    }
}

static struct ends heap_pop(struct ends *h, size_t *n)
{
    struct ends top = h[0];
    size_t i = 0;
    h[0] = h[--(*n)];
    for (;;) {
        size_t l = 2 * i + 1, r = l + 1, m = i;
        if (l < *n && h[l].t < h[m].t)
            m = l;
        if (r < *n && h[r].t < h[m].t)
            m = r;
        if (m == i)
            break;
        struct ends x = h[i];
        h[i] = h[m];
        h[m] = x;
        i = m;
    }
    return top;
}

static struct tm_estimate_key key_of(const struct ojob *jb, char *buf, size_t len)
{
    return tm_trace_estimate_key(jb->tj, buf, len);
}

/* A running owned job's expected end (the scheduler's reading). */
static int64_t expected_end(const struct owned_replay *s, const struct ojob *jb)
{
    int64_t est = jb->estimate > 0 ? jb->estimate : TM_SCHED_DEFAULT_ESTIMATE_MS;
    return s->now + tm_estimate_remaining(est, s->now - jb->start);
}

static int64_t estimate_of(const struct ojob *jb)
{
    return jb->estimate > 0 ? jb->estimate : TM_SCHED_DEFAULT_ESTIMATE_MS;
}

/* ---- the owned scheduler ---- */

static void start_owned(struct owned_replay *s, size_t j, const int32_t *nodes)
{
    struct ojob *jb = &s->jobs[j];
    for (int32_t k = 0; k < jb->n; k++) {
        s->place[jb->pl + k] = nodes[k];
        s->ofree[nodes[k]] -= jb->g;
    }
    s->ofree_total -= (int64_t)jb->g * jb->n;
    jb->state = J_RUNNING;
    jb->cloud = false;
    jb->start = s->now;
    jb->end = s->now + jb->runtime;
    jb->ridx = (int32_t)s->nrun;
    s->running_owned[s->nrun++] = j;
    s->qlive--;
    heap_push(s->heap, &s->nheap, jb->end, j);
}

static int cmp_nend(const void *a, const void *b)
{
    const struct nend *x = a, *y = b;
    if (x->node != y->node)
        return x->node < y->node ? -1 : 1;
    return x->end < y->end ? -1 : x->end > y->end;
}

/* The running owned jobs' (node, expected end, GPUs), sorted by node
 * then end, in s->ne; their count. */
static size_t node_ends(struct owned_replay *s)
{
    size_t m = 0;

    for (size_t r = 0; r < s->nrun; r++) {
        const struct ojob *x = &s->jobs[s->running_owned[r]];
        int64_t e = expected_end(s, x);
        for (int32_t q = 0; q < x->n; q++)
            s->ne[m++] = (struct nend){s->place[x->pl + q], x->g, e};
    }
    qsort(s->ne, m, sizeof(*s->ne), cmp_nend);
    return m;
}

/* A reservation for job j on the nodes no earlier job holds: per node the
 * time it has j's GPUs free (running jobs at their expected ends, m of
 * them in s->ne), and the n soonest such nodes held for j until the last
 * of them is free, the shadow time it returns; NEVER (nothing held) when
 * too few free enough. */
static int64_t reserve(struct owned_replay *s, const struct ojob *jb, size_t m)
{
    int64_t shadow = s->now;
    int32_t nodes[64];

    for (int32_t k = 0; k < s->nown; k++) {
        s->have[k] = s->ofree[k];
        s->tk[k] = s->ofree[k] >= jb->g ? s->now : NEVER;
    }
    for (size_t i = 0; i < m; i++) {
        int32_t k = s->ne[i].node;
        if (s->tk[k] != NEVER)
            continue;
        s->have[k] += s->ne[i].g;
        if (s->have[k] >= jb->g)
            s->tk[k] = s->ne[i].end;
    }
    for (int32_t c = 0; c < jb->n; c++) {
        int32_t bk = -1;
        for (int32_t k = 0; k < s->nown; k++) {
            bool taken = false;
            if (s->res_t[k] != NEVER || s->tk[k] == NEVER)
                continue;
            for (int32_t q = 0; q < c; q++)
                taken |= nodes[q] == k;
            if (!taken && (bk < 0 || s->tk[k] < s->tk[bk]))
                bk = k;
        }
        if (bk < 0)
            return NEVER;
        nodes[c] = bk;
        if (s->tk[bk] > shadow)
            shadow = s->tk[bk];
    }
    for (int32_t c = 0; c < jb->n; c++) {
        int32_t k = nodes[c], at = s->ofree[k];
        for (size_t i = 0; i < m; i++)
            if (s->ne[i].node == k && s->ne[i].end <= shadow)
                at += s->ne[i].g;
        s->res_t[k] = shadow;
        s->res_spare[k] = at - jb->g;
    }
    return shadow;
}

/* Nodes for j now, best fit (fewest free GPUs that hold it), on nodes held
 * for an earlier job only when j would end before that job's start or the
 * node will still have the holder's GPUs free then with j on it; false
 * when there are not enough. */
static bool pick_owned(struct owned_replay *s, const struct ojob *jb, int32_t *out)
{
    int64_t end = s->now + estimate_of(jb);

    for (int32_t c = 0; c < jb->n; c++) {
        int32_t bk = -1;
        for (int32_t k = 0; k < s->nown; k++) {
            bool taken = false;
            if (s->ofree[k] < jb->g ||
                (s->res_t[k] != NEVER && end > s->res_t[k] && s->res_spare[k] < jb->g))
                continue;
            for (int32_t q = 0; q < c; q++)
                taken |= out[q] == k;
            if (!taken && (bk < 0 || s->ofree[k] < s->ofree[bk]))
                bk = k;
        }
        if (bk < 0)
            return false;
        out[c] = bk;
    }
    return true;
}

/* Drop dead entries from the front of the queue, and compact it when
 * most of it is dead. */
static void queue_tidy(struct owned_replay *s)
{
    while (s->qhead < s->qlen && s->jobs[s->queue[s->qhead]].state != J_QUEUED)
        s->qhead++;
    if (s->qhead > 4096 && s->qhead * 2 > s->qlen) {
        size_t w = 0;
        for (size_t i = s->qhead; i < s->qlen; i++)
            if (s->jobs[s->queue[i]].state == J_QUEUED)
                s->queue[w++] = s->queue[i];
        s->qhead = 0;
        s->qlen = w;
    }
}

/* One backfill pass over the owned nodes in submit order: a job that fits
 * starts; one that does not holds the nodes that free up for it soonest
 * (while there are nodes no earlier job holds), and later jobs use held
 * nodes only if they end before the holder starts.  Each job read gets its
 * projected start (the shadow of its hold; NEVER without one). */
static void place_owned(struct owned_replay *s)
{
    int32_t nodes[64];
    size_t seen = 0, m = 0;
    bool ends_read = false;
    int32_t held = 0;

    queue_tidy(s);
    s->pass++;
    for (int32_t k = 0; k < s->nown; k++)
        s->res_t[k] = NEVER;
    for (size_t i = s->qhead; i < s->qlen && seen < LOOKAHEAD; i++) {
        size_t j = s->queue[i];
        struct ojob *jb = &s->jobs[j];
        if (jb->state != J_QUEUED)
            continue;
        seen++;
        jb->proj = NEVER;
        jb->proj_pass = s->pass;
        if (jb->n > s->nown || jb->n > 64)
            continue; /* owned capacity cannot hold it */
        if (s->ofree_total >= (int64_t)jb->g * jb->n && pick_owned(s, jb, nodes)) {
            for (int32_t c = 0; c < jb->n; c++)
                if (s->res_t[nodes[c]] != NEVER && s->now + estimate_of(jb) > s->res_t[nodes[c]])
                    s->res_spare[nodes[c]] -= jb->g; /* still there at the holder's start */
            start_owned(s, j, nodes);
            continue;
        }
        if (held + jb->n > s->nown)
            continue; /* every node is held: the rest may only fit now */
        if (!ends_read) {
            m = node_ends(s);
            ends_read = true;
        }
        jb->proj = reserve(s, jb, m);
        if (jb->proj != NEVER)
            held += jb->n;
    }
}

/* ---- the cloud ---- */

static int launch_node(struct owned_replay *s, bool spot, size_t *ret)
{
    struct cnode *n;
    if (s->ncn == s->capcn) {
        size_t nc = s->capcn ? 2 * s->capcn : 256;
        struct cnode *v = realloc(s->cn, nc * sizeof(*v));
        size_t *l = realloc(s->live, nc * sizeof(*l));
        if (v)
            s->cn = v;
        if (l)
            s->live = l;
        if (!v || !l)
            return TM_ENOMEM;
        s->capcn = nc;
    }
    n = &s->cn[s->ncn];
    *n = (struct cnode){.launched = s->now, .ready = s->now + s->cfg->boot_ms, .released = -1,
                        .idle_since = s->now + s->cfg->boot_ms, .free = TM_OWNED_NODE_GPUS,
                        .spot = spot};
    s->live[s->nlive++] = s->ncn;
    *ret = s->ncn++;
    s->st.launches++;
    return 0;
}

static void release_node(struct owned_replay *s, size_t li)
{
    struct cnode *n = &s->cn[s->live[li]];
    /* at the replay's end an idle node still serves out its grace */
    int64_t end = n->idle_since + s->cfg->idle_grace_ms > s->now ? n->idle_since + s->cfg->idle_grace_ms
                                                                  : s->now;
    n->released = end;
    s->st.cloud_usd += (n->spot ? s->spot_node_usd : s->od_node_usd) * (double)(end - n->launched) / HOUR_MS;
    s->st.cloud_paid_gpu_hours += TM_OWNED_NODE_GPUS * (double)(end - n->launched) / HOUR_MS;
    s->live[li] = s->live[--s->nlive];
}

/* Job j to the cloud: bought nodes with room (the soonest ready, then best
 * fit), new ones for the rest. */
static int burst(struct owned_replay *s, size_t j, bool spot)
{
    struct ojob *jb = &s->jobs[j];
    int64_t start = s->now;

    for (int32_t c = 0; c < jb->n; c++) {
        size_t best = SIZE_MAX;
        for (size_t li = 0; li < s->nlive; li++) {
            const struct cnode *n = &s->cn[s->live[li]];
            bool taken = false;
            if (n->spot != spot || n->free < jb->g)
                continue;
            for (int32_t q = 0; q < c; q++)
                taken |= (size_t)s->place[jb->pl + q] == s->live[li];
            if (taken)
                continue;
            if (best == SIZE_MAX || n->ready < s->cn[best].ready ||
                (n->ready == s->cn[best].ready && n->free < s->cn[best].free))
                best = s->live[li];
        }
        if (best == SIZE_MAX) {
            int rc = launch_node(s, spot, &best);
            if (rc < 0)
                return rc;
        }
        s->place[jb->pl + c] = (int32_t)best;
        s->cn[best].free -= jb->g;
        s->cn[best].njobs++;
        if (s->cn[best].ready > start)
            start = s->cn[best].ready;
    }
    s->qlive--;
    jb->state = J_RUNNING;
    jb->cloud = true;
    jb->start = start;
    jb->end = start + jb->runtime;
    heap_push(s->heap, &s->nheap, jb->end, j);
    s->st.burst_jobs++;
    s->st.spot_bursts += spot;
    return 0;
}

/* ---- the burst rule over the queue ---- */

static enum tm_burst_rule rule_of(enum tm_owned_policy p)
{
    return p == TM_OWNED_ONLY ? TM_BURST_NEVER : p == TM_OWNED_TARMAC ? TM_BURST_COST : TM_BURST_AFTER;
}

/* Each queued job's projected owned start (elastic_owned.h), and the
 * rule's decision on it, in submit order. */
static int decide_queue(struct owned_replay *s)
{
    size_t nfl = 0;
    int64_t free = s->ofree_total, t = s->now;
    bool blocked = false;

    for (size_t r = 0; r < s->nrun; r++) {
        const struct ojob *x = &s->jobs[s->running_owned[r]];
        heap_push(s->fl, &nfl, expected_end(s, x), (size_t)x->g * (size_t)x->n);
    }
    queue_tidy(s);
    for (size_t i = s->qhead; i < s->qlen; i++) {
        size_t j = s->queue[i];
        struct ojob *jb = &s->jobs[j];
        int64_t need = (int64_t)jb->g * jb->n, start;
        struct tm_burst_job bj;
        struct tm_burst_decision d;
        if (jb->state != J_QUEUED)
            continue;
        if (jb->n > s->nown) {
            start = TM_BURST_NO_START;
        } else {
            while (!blocked && free < need) {
                struct ends e;
                if (nfl == 0) {
                    blocked = true;
                    break;
                }
                e = heap_pop(s->fl, &nfl);
                free += (int64_t)e.j;
                if (e.t > t)
                    t = e.t;
            }
            start = blocked ? TM_BURST_NO_START : t;
            /* its hold, where it has one: the scheduler's own promise */
            if (jb->proj != NEVER && jb->proj_pass == s->pass)
                start = jb->proj;
        }
        bj = (struct tm_burst_job){.gpus = (int32_t)need, .submit_ms = jb->submit,
                                   .estimate_ms = estimate_of(jb), .preemptible = jb->preemptible};
        tm_burst_decide(&s->bp, &bj, s->now, start, &s->offer, &d);
        if (d.choice == TM_BURST_WAIT) {
            if (start != TM_BURST_NO_START) {
                free -= need;
                heap_push(s->fl, &nfl, start + estimate_of(jb), (size_t)need);
            }
            continue;
        }
        if (s->cfg->log)
            fprintf(s->cfg->log,
                    "%.0f %s job %zu (%d x %d GPUs, waited %lld s, estimate %lld s, runs %lld s): %s\n",
                    s->now / 1e3, tm_owned_policy_name(s->cfg->policy), j, jb->n, jb->g,
                    (long long)((s->now - jb->submit) / 1000), (long long)(estimate_of(jb) / 1000),
                    (long long)(jb->runtime / 1000), d.reason);
        {
            int rc = burst(s, j, d.choice == TM_BURST_SPOT);
            if (rc < 0)
                return rc;
        }
    }
    return 0;
}

/* ---- events ---- */

static int finish_job(struct owned_replay *s, size_t j)
{
    struct ojob *jb = &s->jobs[j];
    char kb[64];
    struct tm_estimate_key k = key_of(jb, kb, sizeof(kb));
    double gh = (double)jb->g * jb->n * (double)jb->runtime / HOUR_MS;

    for (int32_t q = 0; q < jb->n; q++) {
        int32_t x = s->place[jb->pl + q];
        if (jb->cloud) {
            s->cn[x].free += jb->g;
            if (--s->cn[x].njobs == 0)
                s->cn[x].idle_since = s->now;
        } else {
            s->ofree[x] += jb->g;
        }
    }
    if (jb->cloud) {
        s->st.cloud_gpu_hours += gh;
    } else {
        s->ofree_total += (int64_t)jb->g * jb->n;
        s->running_owned[jb->ridx] = s->running_owned[--s->nrun];
        s->jobs[s->running_owned[jb->ridx]].ridx = jb->ridx;
        s->st.owned_gpu_hours += gh;
    }
    jb->state = J_DONE;
    s->done++;
    s->jct[s->nfin] = (double)(jb->end - jb->submit) / 1e3;
    s->wait[s->nfin++] = (double)(jb->start - jb->submit) / 1e3;
    return tm_estimator_observe(s->est, &k, jb->runtime);
}

static bool arrive(struct owned_replay *s)
{
    bool any = false;
    while (s->next_arrival < s->njobs && s->jobs[s->next_arrival].submit <= s->now) {
        struct ojob *jb = &s->jobs[s->next_arrival];
        char kb[64];
        struct tm_estimate_key k = key_of(jb, kb, sizeof(kb));
        int lvl;
        jb->estimate = tm_estimate_level(s->est, &k, &lvl);
        jb->proj = NEVER;
        jb->state = J_QUEUED;
        s->queue[s->qlen++] = s->next_arrival++;
        s->qlive++;
        any = true;
    }
    return any;
}

static void release_idle(struct owned_replay *s)
{
    for (size_t li = s->nlive; li-- > 0;) {
        const struct cnode *n = &s->cn[s->live[li]];
        if (n->njobs == 0 && n->ready <= s->now && s->now - n->idle_since >= s->cfg->idle_grace_ms)
            release_node(s, li);
    }
}

/* ---- setup and figures ---- */

static int cmp_submit(const void *a, const void *b)
{
    const struct ojob *x = a, *y = b;
    if (x->submit != y->submit)
        return x->submit < y->submit ? -1 : 1;
    return x->tj < y->tj ? -1 : x->tj > y->tj;
}

static int load(struct owned_replay *s, const struct tm_trace *t)
{
    const struct tm_owned_config *c = s->cfg;
    size_t n = 0, slots = 0;
    double gang_gh = 0, all_gh = 0;

    s->jobs = calloc(t->njobs + 1, sizeof(*s->jobs));
    if (!s->jobs)
        return TM_ENOMEM;
    for (size_t i = 0; i < t->njobs; i++) {
        const struct tm_trace_job *tj = &t->jobs[i];
        struct ojob *jb;
        int32_t nodes = tj->nodes > 1 ? tj->nodes : 1;
        if (tj->start_ms < 0 || tj->gpus <= 0 || tj->gpus > TM_OWNED_NODE_GPUS ||
            (c->since_ms >= 0 && tj->submit_ms < c->since_ms) ||
            (c->max_runtime_ms >= 0 && tj->end_ms - tj->start_ms > c->max_runtime_ms)) {
            s->st.dropped++;
            continue;
        }
        jb = &s->jobs[n++];
        jb->tj = tj;
        jb->submit = tj->submit_ms;
        jb->runtime = tj->end_ms - tj->start_ms < 1000 ? 1000 : tj->end_ms - tj->start_ms;
        jb->g = tj->gpus;
        jb->n = nodes;
        jb->preemptible = tj->preemptible;
        jb->state = J_FUTURE;
        all_gh += (double)jb->g * nodes * (double)jb->runtime / HOUR_MS;
        if (nodes > 1)
            gang_gh += (double)jb->g * nodes * (double)jb->runtime / HOUR_MS;
    }
    if (n == 0)
        return TM_EINVAL;
    s->njobs = n;
    s->st.gang_gpu_hours_share = all_gh > 0 ? gang_gh / all_gh : 0;
    qsort(s->jobs, n, sizeof(*s->jobs), cmp_submit);
    for (size_t i = 0; i < n; i++) {
        s->jobs[i].pl = (int32_t)slots;
        slots += (size_t)s->jobs[i].n;
    }
    s->place = calloc(slots + 1, sizeof(*s->place));
    s->queue = malloc((n + 1) * sizeof(*s->queue));
    s->heap = malloc((n + 1) * sizeof(*s->heap));
    s->fl = malloc((n + 1) * sizeof(*s->fl));
    s->ne = malloc((slots + 1) * sizeof(*s->ne));
    s->running_owned = malloc((n + 1) * sizeof(*s->running_owned));
    s->jct = malloc((n + 1) * sizeof(double));
    s->wait = malloc((n + 1) * sizeof(double));
    if (!s->place || !s->queue || !s->heap || !s->fl || !s->ne || !s->running_owned || !s->jct || !s->wait)
        return TM_ENOMEM;
    return 0;
}

static int init(struct owned_replay *s, const struct tm_trace *t, const struct tm_owned_config *c)
{
    const struct tm_price_type *ty;

    memset(s, 0, sizeof(*s));
    s->cfg = c;
    if (!c->prices || c->cloud_type < 0 || (size_t)c->cloud_type >= c->prices->ntypes ||
        c->owned_gpus < TM_OWNED_NODE_GPUS || c->owned_gpus % TM_OWNED_NODE_GPUS || c->tick_ms <= 0)
        return TM_EINVAL;
    ty = &c->prices->types[c->cloud_type];
    if (ty->gpus != TM_OWNED_NODE_GPUS)
        return TM_EINVAL;
    s->od_node_usd = (double)ty->on_demand_uusd_per_hour / 1e6;
    s->spot_node_usd = c->spot && ty->spot_uusd_per_hour > 0 ? (double)ty->spot_uusd_per_hour / 1e6 : 0;
    s->offer = (struct tm_burst_offer){.on_demand_per_gpu_hour = s->od_node_usd / TM_OWNED_NODE_GPUS,
                                       .spot_per_gpu_hour = s->spot_node_usd / TM_OWNED_NODE_GPUS,
                                       .boot_ms = c->boot_ms};
    tm_burst_params_default(&s->bp);
    s->bp.rule = rule_of(c->policy);
    s->bp.after_ms = c->policy == TM_OWNED_ZERO_WAIT ? 0 : c->burst_wait_ms;
    s->bp.wait_value_per_hour = c->wait_value_per_hour;
    if (c->starvation_ms > 0)
        s->bp.starvation_ms = c->starvation_ms;
    /* the rule is asked once a tick: a tick early, so that no job passes
     * the bound between two */
    s->starvation_ms = s->bp.starvation_ms;
    s->bp.starvation_ms -= c->tick_ms;
    s->nown = c->owned_gpus / TM_OWNED_NODE_GPUS;
    s->ofree = malloc((size_t)s->nown * sizeof(*s->ofree));
    s->tk = malloc((size_t)s->nown * sizeof(*s->tk));
    s->res_t = malloc((size_t)s->nown * sizeof(*s->res_t));
    s->res_spare = malloc((size_t)s->nown * sizeof(*s->res_spare));
    s->have = malloc((size_t)s->nown * sizeof(*s->have));
    if (!s->ofree || !s->tk || !s->res_t || !s->res_spare || !s->have)
        return TM_ENOMEM;
    for (int32_t k = 0; k < s->nown; k++)
        s->ofree[k] = TM_OWNED_NODE_GPUS;
    s->ofree_total = c->owned_gpus;
    if (tm_estimator_new(&s->est) < 0)
        return TM_ENOMEM;
    return load(s, t);
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static void figures(struct owned_replay *s, int64_t t0)
{
    const struct tm_owned_config *c = s->cfg;
    double sum = 0, wsum = 0;
    int64_t starve = s->starvation_ms;

    while (s->nlive)
        release_node(s, s->nlive - 1);
    s->st.jobs = s->njobs;
    s->st.unfinished = s->njobs - s->done;
    s->st.starved = s->st.unfinished;
    for (size_t k = 0; k < s->nfin; k++) {
        sum += s->jct[k];
        wsum += s->wait[k];
        s->st.starved += s->wait[k] * 1e3 > (double)starve;
    }
    if (s->nfin) {
        s->st.jct_mean_s = sum / (double)s->nfin;
        s->st.wait_mean_s = wsum / (double)s->nfin;
        qsort(s->jct, s->nfin, sizeof(double), cmp_double);
        s->st.jct_p95_s = s->jct[(size_t)((double)(s->nfin - 1) * 0.95)];
    }
    s->st.span_h = (double)(s->now - t0) / HOUR_MS;
    s->st.owned_usd = c->owned_usd_per_gpu_hour * c->owned_gpus * s->st.span_h;
    s->st.owned_utilisation = s->st.span_h > 0 ? s->st.owned_gpu_hours / (c->owned_gpus * s->st.span_h) : 0;
}

static void release_all(struct owned_replay *s)
{
    tm_estimator_free(s->est);
    free(s->jobs);
    free(s->place);
    free(s->ofree);
    free(s->tk);
    free(s->res_t);
    free(s->res_spare);
    free(s->have);
    free(s->running_owned);
    free(s->queue);
    free(s->cn);
    free(s->live);
    free(s->heap);
    free(s->fl);
    free(s->ne);
    free(s->jct);
    free(s->wait);
}

/* One instant: ends, arrivals, the owned pass, then the rule (at a tick or
 * after an arrival) and idle release (at a tick). */
static int step(struct owned_replay *s, bool tick)
{
    bool changed = false, arrived;
    int rc;

    while (s->nheap && s->heap[0].t <= s->now) {
        struct ends e = heap_pop(s->heap, &s->nheap);
        if ((rc = finish_job(s, e.j)) < 0)
            return rc;
        changed = true;
    }
    arrived = arrive(s);
    /* at a tick too: the holds' shadows move as running jobs overrun
     * their estimates, and the rule reads them */
    if (changed || arrived || (tick && s->qlive && s->bp.rule != TM_BURST_NEVER))
        place_owned(s);
    if (s->bp.rule != TM_BURST_NEVER && s->qlive && (tick || arrived))
        if ((rc = decide_queue(s)) < 0)
            return rc;
    if (tick)
        release_idle(s);
    return 0;
}

int tm_owned_run(const struct tm_trace *t, const struct tm_owned_config *c, struct tm_owned_stats *ret)
{
    struct owned_replay s;
    struct timespec w0, w1;
    int64_t t0, next_tick;
    int rc;

    clock_gettime(CLOCK_MONOTONIC, &w0);
    if (!t || !c) {
        return TM_EINVAL;
    }
    rc = init(&s, t, c);
    if (rc < 0)
        goto out;
    t0 = s.jobs[0].submit;
    s.now = t0;
    next_tick = t0;
    while (s.done < s.njobs) {
        bool need_tick = (s.bp.rule != TM_BURST_NEVER && s.qlive) || s.nlive;
        int64_t next = NEVER;
        bool tick;
        if (s.next_arrival < s.njobs)
            next = s.jobs[s.next_arrival].submit;
        if (s.nheap && s.heap[0].t < next)
            next = s.heap[0].t;
        if (need_tick) {
            if (next_tick < s.now)
                next_tick = s.now;
            if (next_tick < next)
                next = next_tick;
        }
        if (next == NEVER)
            break; /* what is queued cannot run on owned capacity alone */
        s.now = next > s.now ? next : s.now;
        tick = need_tick && s.now >= next_tick;
        rc = step(&s, tick);
        if (rc < 0)
            goto out;
        if (tick)
            next_tick = s.now + c->tick_ms;
    }
    figures(&s, t0);
    clock_gettime(CLOCK_MONOTONIC, &w1);
    s.st.wall_s = (double)(w1.tv_sec - w0.tv_sec) + (double)(w1.tv_nsec - w0.tv_nsec) / 1e9;
    *ret = s.st;
    rc = 0;
out:
    release_all(&s);
    return rc;
}
