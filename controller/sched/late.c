/*
 * controller/sched/late.c: which aged jobs tied to few nodes will pass the
 * starvation bound whatever the order, so that tarmac serves the ones that
 * still can first (order_aged() in order.c).
 *
 * Jobs tied to few nodes (sched_tied()) queue for the same nodes, often
 * one at a time: on openb gpuspec25 at 64 GPUs the P100|V100 jobs asking
 * 9-16 cores fit one 16-core P100 node, whose second GPU idles for want
 * of cores.  Such a queue is a single-machine problem, and the order that
 * passes the fewest jobs over the bound is Moore and Hodgson's (1968),
 * with a job due to end by submit + bound + its length (the bound is on
 * the start): earliest due date first, and whenever the jobs taken so far
 * end after the due date of the last one taken, the longest of them is
 * dropped (it is late anyway); the dropped jobs go after the rest.
 * Here each group is the jobs whose request the same set of nodes can
 * hold; a job's length is its estimate over the copies of it those nodes
 * hold at once (by size: GPUs, cores, memory), the schedule starts now and
 * ignores the work already running, so it errs towards calling jobs on
 * time, and a job it does not mark keeps the order it had (submit order
 * moved by its estimate, narrow_shift(): earliest due date among them
 * instead passed more gpuspec33 jobs over the bound, its estimates being
 * far off).  On the held-out traces (bench/run-sched-heldout.sh) it cuts
 * the jobs past the bound where many would pass it anyway, at the price
 * of a longer longest wait (the late jobs go last), and changes nothing
 * elsewhere (bench/results/scheduler-targets-2026-12-04-c.md).
 */
#include "controller/sched/scheduler.h"

#include <stdlib.h>

#include "controller/sched/internal.h"
#include "core/err.h"

struct lj {
    int32_t j;
    struct need nd;  /* copied: the sorts below take no context */
    int64_t submit;
    int64_t id;
    uint64_t set;    /* the nodes that could hold it (a hash of their indices) */
    double work;     /* ms: estimate over the copies those nodes hold at once */
};

static int cmp_need(const struct lj *a, const struct lj *b)
{
    const struct need *x = &a->nd, *y = &b->nd;

    if (x->slots != y->slots)
        return x->slots < y->slots ? -1 : 1;
    if (x->gpus != y->gpus)
        return x->gpus < y->gpus ? -1 : 1;
    if (x->milli != y->milli)
        return x->milli < y->milli ? -1 : 1;
    if (x->cpu != y->cpu)
        return x->cpu < y->cpu ? -1 : 1;
    return x->mem < y->mem ? -1 : x->mem > y->mem;
}

static int cmp_need_q(const void *a, const void *b)
{
    int r = cmp_need(a, b);

    return r ? r : ((const struct lj *)a)->j - ((const struct lj *)b)->j;
}

/* By group, then due date (submit + work: the bound is on the start, so
 * a job is due to end by submit + bound + work), then id. */
static int cmp_due(const void *a, const void *b)
{
    const struct lj *x = a, *y = b;
    double dx = (double)x->submit + x->work, dy = (double)y->submit + y->work;

    if (x->set != y->set)
        return x->set < y->set ? -1 : 1;
    if (dx != dy)
        return dx < dy ? -1 : 1;
    return x->id < y->id ? -1 : x->id > y->id;
}

/* The nodes that could ever hold one copy of nd (by size, schedulable) as
 * a hash of their indices, and how many copies they hold at once. */
static double copies_of(const struct ctx *c, const struct need *nd, uint64_t *ret_set)
{
    uint64_t h = 1469598103934665603ull; /* FNV-1a */
    double copies = 0;

    for (size_t i = 0; i < c->nn; i++) {
        const struct tm_sched_node *no = &c->in->nodes[i];
        int32_t sl = c->ns[i].mslot;
        int64_t k;

        if (!c->ns[i].ok || sl < 0 || !(nd->slots >> sl & 1) || no->cpu_milli < nd->cpu ||
            no->memory_mib < nd->mem)
            continue;
        if (nd->gpus > 0) {
            if (no->gpus < nd->gpus)
                continue;
            k = no->gpus / nd->gpus;
        } else {
            k = (int64_t)no->gpus * (MILLI / nd->milli);
        }
        if (nd->cpu > 0 && no->cpu_milli / nd->cpu < k)
            k = no->cpu_milli / nd->cpu;
        if (nd->mem > 0 && no->memory_mib / nd->mem < k)
            k = no->memory_mib / nd->mem;
        copies += (double)k;
        h = (h ^ (uint64_t)i) * 1099511628211ull;
    }
    *ret_set = h;
    return copies;
}

/* Max-heap of indices into v by work. */
static void heap_push(int32_t *hp, size_t *n, const struct lj *v, int32_t x)
{
    size_t i = (*n)++;

    while (i > 0 && v[hp[(i - 1) / 2]].work < v[x].work) {
        hp[i] = hp[(i - 1) / 2];
        i = (i - 1) / 2;
    }
    hp[i] = x;
}

static int32_t heap_pop(int32_t *hp, size_t *n, const struct lj *v)
{
    int32_t top = hp[0], last = hp[--(*n)];
    size_t i = 0;

    for (;;) {
        size_t l = 2 * i + 1, b = i;
        double bw = v[last].work;
        if (l < *n && v[hp[l]].work > bw)
            b = l, bw = v[hp[l]].work;
        if (l + 1 < *n && v[hp[l + 1]].work > bw)
            b = l + 1;
        if (b == i)
            break;
        hp[i] = hp[b];
        i = b;
    }
    if (*n > 0)
        hp[i] = last;
    return top;
}

int sched_late_init(struct ctx *c)
{
    const struct tm_sched_input *in = c->in;
    int64_t dflt = sched_default_estimate_ms(&in->params);
    int64_t bound = tm_sched_starvation_ms(&in->params);
    struct lj *v = NULL;
    int32_t *hp = NULL;
    size_t n = 0;
    int r = TM_ENOMEM;

    for (size_t j = 0; j < in->njobs; j++)
        if (sched_is_urgent(c, (int32_t)j) && sched_tied(c, (int32_t)j))
            n++;
    if (n < 2)
        return 0; /* one job alone keeps its place */
    c->late = calloc(in->njobs, sizeof(*c->late));
    v = malloc(n * sizeof(*v));
    hp = malloc(n * sizeof(*hp));
    if (!c->late || !v || !hp)
        goto out;
    n = 0;
    for (size_t j = 0; j < in->njobs; j++)
        if (sched_is_urgent(c, (int32_t)j) && sched_tied(c, (int32_t)j))
            v[n++] = (struct lj){.j = (int32_t)j, .nd = c->needs[j], .submit = in->jobs[j].submit_ms,
                                 .id = in->jobs[j].id};
    /* The node walk once per distinct request: the queue has a few. */
    qsort(v, n, sizeof(*v), cmp_need_q);
    for (size_t a = 0, b; a < n; a = b) {
        uint64_t set;
        double copies = copies_of(c, &v[a].nd, &set);
        for (b = a; b < n && cmp_need(&v[a], &v[b]) == 0; b++) {
            const struct tm_sched_job *jb = &in->jobs[v[b].j];
            int64_t est = jb->estimate_ms > 0 ? jb->estimate_ms : dflt;
            v[b].set = set;
            /* no node holds it (need.nomatch): it never starts, so it
             * takes no time from the others */
            v[b].work = copies > 0 ? (double)est * (double)v[b].nd.nodes / copies : 0;
        }
    }
    qsort(v, n, sizeof(*v), cmp_due);
    for (size_t a = 0, b; a < n; a = b) {
        double t = (double)in->now_ms;
        size_t nh = 0;
        for (b = a; b < n && v[b].set == v[a].set; b++) {
            t += v[b].work;
            heap_push(hp, &nh, v, (int32_t)b);
            if (t > (double)(v[b].submit + bound) + v[b].work) {
                int32_t x = heap_pop(hp, &nh, v);
                c->late[v[x].j] = 1;
                t -= v[x].work;
            }
        }
    }
    r = 0;
out:
    free(v);
    free(hp);
    return r;
}

bool sched_late(const struct ctx *c, int32_t j)
{
    return c->late && c->late[j];
}
