/*
 * controller/fleet/planner.c: the fleet planner (see planner.h for the rules).
 *
 * tm_planner_run is one function per step (run_deadlines ... run_releases)
 * over one struct run.  The file stays whole, long as it is, because
 * every step shares the room model (struct room, room_fit) and the budget
 * check; split, they would need a private header for one pure function.
 */
#include "controller/fleet/planner.h"

#include <math.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/err.h"

#define HOUR_MS (3600LL * 1000)
/* drain_oversized: a node is drained when its work fits a type of at most
 * 1/TM_PLANNER_DRAIN_DIV of its GPUs.  Measured on openb with sizes 1, 2, 4
 * and 8 (cost / lower bound): a half 1.60 (half-used nodes drained while
 * new work kept launching nodes), a quarter 1.43, an eighth 1.41, never
 * 1.42; the release of idle large nodes below does most of the work. */
#define TM_PLANNER_DRAIN_DIV 8

const char *tm_planner_kind_name(enum tm_planner_kind k)
{
    static const char *const names[TM_PLANNER_KIND_MAX] = {
        "launch", "terminate", "substitute", "move", "deadline_od", "refuse", "warn", "drain",
        "restart",
    };
    return (unsigned)k < TM_PLANNER_KIND_MAX ? names[k] : "?";
}

struct acts {
    struct tm_planner_action *v;
    size_t n, cap;
    int err;
};

static struct tm_planner_action *act_add(struct acts *a, enum tm_planner_kind kind, const char *fmt, ...)
{
    struct tm_planner_action *x;
    va_list ap;

    if (a->n == a->cap) {
        size_t nc = a->cap ? a->cap * 2 : 16;
        struct tm_planner_action *nv = realloc(a->v, nc * sizeof(*nv));
        if (!nv) {
            a->err = TM_ENOMEM;
            return NULL;
        }
        a->v = nv;
        a->cap = nc;
    }
    x = &a->v[a->n++];
    memset(x, 0, sizeof(*x));
    x->kind = kind;
    x->node = -1;
    x->job = -1;
    x->type = -1;
    x->count = 1;
    va_start(ap, fmt);
    vsnprintf(x->reason, sizeof(x->reason), fmt, ap);
    va_end(ap);
    return x;
}

bool tm_planner_short(const struct tm_planner_shortage *sh, size_t nsh, int32_t type, int32_t zone,
                      bool spot, int64_t now_ms)
{
    for (size_t i = 0; i < nsh; i++)
        if (sh[i].type == type && sh[i].zone == zone && sh[i].spot == spot && now_ms < sh[i].until_ms)
            return true;
    return false;
}

static int nzones(const struct tm_price_table *p)
{
    return p->nzones ? (int)p->nzones : 1;
}

/* The zone a launch of `type` goes to: the first not short, or for spot
 * with per-zone hazards the one of lowest hazard not short (the same
 * price everywhere, less work lost); -1 when every zone is short. */
static int first_zone(const struct tm_price_table *p, const double *hazard, int32_t type,
                      bool spot, const struct tm_planner_shortage *sh, size_t nsh, int64_t now)
{
    int best = -1;
    for (int z = 0; z < nzones(p); z++) {
        if (tm_planner_short(sh, nsh, type, z, spot, now))
            continue;
        if (!spot || !hazard)
            return z;
        if (best < 0 || hazard[type * nzones(p) + z] < hazard[type * nzones(p) + best])
            best = z;
    }
    return best;
}

static int64_t type_price(const struct tm_price_type *t, bool spot)
{
    return spot ? t->spot_uusd_per_hour : t->on_demand_uusd_per_hour;
}

int tm_planner_choose_type(const struct tm_price_table *prices, const double *spot_zone_hazard,
                           bool spot, int32_t milli,
                           int32_t largest_gpus, const struct tm_planner_shortage *sh, size_t nsh,
                           int64_t now_ms, int32_t *ret_zone)
{
    int32_t need = (milli + 999) / 1000;
    int best = -1, best_zone = -1;
    int64_t best_price = 0;

    if (largest_gpus < 1)
        largest_gpus = 1;
    if (need < largest_gpus)
        need = largest_gpus;
    /* The lowest price per GPU of the work the node would hold (its
     * GPUs, or all of the work when it holds all of it), among the types
     * that hold the largest job: a 1-GPU job gets a 1-GPU node unless a
     * bigger one is cheaper than that even with its idle GPUs.  Ties go to
     * the larger node (fewer boots). */
    for (size_t i = 0; i < prices->ntypes; i++) {
        const struct tm_price_type *t = &prices->types[i];
        int64_t pr = type_price(t, spot);
        int64_t held = t->gpus < need ? t->gpus : need;
        int64_t bheld = 0;
        int z;
        if (t->gpus < largest_gpus || (spot && pr <= 0))
            continue;
        z = first_zone(prices, spot_zone_hazard, (int32_t)i, spot, sh, nsh, now_ms);
        if (z < 0)
            continue;
        if (best >= 0)
            bheld = prices->types[best].gpus < need ? prices->types[best].gpus : need;
        if (best < 0 || pr * bheld < best_price * held ||
            (pr * bheld == best_price * held && t->gpus > prices->types[best].gpus)) {
            best = (int)i;
            best_price = pr;
            best_zone = z;
        }
    }
    if (best >= 0 && ret_zone)
        *ret_zone = best_zone;
    return best;
}

int64_t tm_planner_deadline_switch_ms(int64_t deadline_ms, int64_t remaining_ms, int64_t boot_ms,
                                      int64_t tick_ms)
{
    return deadline_ms - remaining_ms - boot_ms - tick_ms;
}

/* Free room of one node as the planner models it.  CPU and memory are
 * checked only for jobs that ask for them on types that state them: a job
 * the planner counts as fitting must be one the scheduler can place, or
 * it waits without a launch. */
struct room {
    int32_t free_milli;
    int32_t free_whole;
    int64_t free_cpu, free_mem;  /* INT64_MAX: not modelled */
    int pool;
    bool usable;
    bool share_known;            /* free_share is modelled */
    int32_t free_share;          /* largest free room on one partly used GPU */
};

/* What one job asks of a room. */
struct ask {
    int32_t gpus, milli;
    int64_t cpu, mem;
};

static struct room room_of_type(const struct tm_price_type *t, int pool)
{
    return (struct room){t->gpus * 1000, t->gpus, t->cpu_milli > 0 ? t->cpu_milli : INT64_MAX,
                         t->memory_mib > 0 ? t->memory_mib : INT64_MAX, pool, true, true, 0};
}

static bool room_fit(struct room *r, const struct ask *k, bool take)
{
    if (!r->usable || k->cpu > r->free_cpu || k->mem > r->free_mem)
        return false;
    if (k->gpus > 0) {
        if (r->free_whole < k->gpus)
            return false;
    } else if (r->share_known) {
        /* a share sits on one GPU: a partly used one with room, or a
         * whole free one */
        if (r->free_share < k->milli && r->free_whole < 1)
            return false;
    } else if (r->free_milli < k->milli) {
        return false;
    }
    if (!take)
        return true;
    if (r->free_cpu != INT64_MAX)
        r->free_cpu -= k->cpu;
    if (r->free_mem != INT64_MAX)
        r->free_mem -= k->mem;
    if (k->gpus > 0) {
        r->free_whole -= k->gpus;
        r->free_milli -= k->gpus * 1000;
    } else if (r->share_known) {
        r->free_milli -= k->milli;
        if (r->free_share >= k->milli) {
            r->free_share -= k->milli;
        } else {
            r->free_whole--;
            if (1000 - k->milli > r->free_share)
                r->free_share = 1000 - k->milli;
        }
    } else {
        r->free_milli -= k->milli;
        if (r->free_whole > r->free_milli / 1000)
            r->free_whole = r->free_milli / 1000;
    }
    return true;
}

#define FAILED_ASKS_MAX 32

/* Whether ask a fits wherever b fits at most: same kind (whole GPUs or a
 * share), and no smaller in any dimension. */
static bool ask_at_least(const struct ask *a, const struct ask *b)
{
    return (a->gpus > 0) == (b->gpus > 0) && a->gpus >= b->gpus && a->milli >= b->milli &&
           a->cpu >= b->cpu && a->mem >= b->mem;
}

/* A few asks that fit no room of a set of rooms that only shrink: an ask
 * at least as large as one of them fits none either, unscanned. */
struct failed_asks {
    struct ask v[FAILED_ASKS_MAX];
    size_t n;
};

static bool asks_failed(const struct failed_asks *f, const struct ask *a)
{
    for (size_t i = 0; i < f->n; i++)
        if (ask_at_least(a, &f->v[i]))
            return true;
    return false;
}

static void asks_note_failed(struct failed_asks *f, const struct ask *a)
{
    if (f->n < FAILED_ASKS_MAX)
        f->v[f->n++] = *a;
}

/* The first of rooms[0..n) to hold ask, which it takes: spot rooms first
 * (unless od_only), then on-demand ones (passes 2; passes 1: spot only).
 * -1 when none holds it. */
static ptrdiff_t room_take(struct room *rooms, size_t n, bool od_only, int passes,
                           const struct ask *ask)
{
    for (int pass = od_only ? 1 : 0; pass < passes; pass++)
        for (size_t i = 0; i < n; i++)
            if (rooms[i].pool == (pass == 0 ? TM_PLANNER_POOL_SPOT : TM_PLANNER_POOL_OD) &&
                room_fit(&rooms[i], ask, true))
                return (ptrdiff_t)i;
    return -1;
}

static int32_t smallest_type_gpus(const struct tm_price_table *pr)
{
    int32_t best = 0;
    for (size_t i = 0; i < pr->ntypes; i++)
        if (best == 0 || pr->types[i].gpus < best)
            best = pr->types[i].gpus;
    return best;
}

/* The GPUs of the smallest type that holds `k` alone (0: none does). */
static int32_t smallest_holding(const struct tm_price_table *pr, const struct ask *k)
{
    int32_t best = 0;
    for (size_t i = 0; i < pr->ntypes; i++) {
        struct room r = room_of_type(&pr->types[i], 0);
        if (room_fit(&r, k, false) && (best == 0 || pr->types[i].gpus < best))
            best = pr->types[i].gpus;
    }
    return best;
}

struct item {
    int32_t job;   /* index into jobs */
    int32_t gpus, milli;
    int64_t remaining_ms;
    struct ask ask;
    int32_t min_gpus; /* GPUs of the smallest type that holds it (CPU, memory too) */
};

static int cmp_item(const void *a, const void *b)
{
    const struct item *x = a, *y = b;
    if (x->min_gpus != y->min_gpus)
        return x->min_gpus > y->min_gpus ? -1 : 1;
    if (x->milli != y->milli)
        return x->milli > y->milli ? -1 : 1;
    return x->job < y->job ? -1 : x->job > y->job;
}

static int64_t cost_of(int64_t uusd_per_hour, int64_t ms)
{
    /* 128-bit-free: uusd/h x ms / 3.6e6 stays well inside int64 for any
     * price below $1M/h and spans below a year. */
    return uusd_per_hour / 1000 * ms / 3600 + (uusd_per_hour % 1000) * ms / HOUR_MS;
}

struct budget_state {
    struct tm_planner_budget b;
    int64_t accepted;
    bool warned;
};

/* Whether a launch costing `cost` may go ahead; emits REFUSE/WARN. */
static bool budget_ok(struct budget_state *bs, struct acts *a, int64_t cost, int32_t type, bool spot,
                      const char *tname)
{
    int64_t projected;

    if (!bs->b.active)
        return true;
    projected = bs->b.spent_uusd + bs->b.committed_uusd + bs->accepted;
    if (bs->b.hard && projected + cost > bs->b.cap_uusd) {
        struct tm_planner_action *x = act_add(
            a, TM_PLANNER_REFUSE,
            "hard cap: spent %.2f + committed %.2f + launches %.2f + this %s %s %.2f = %.2f > cap %.2f USD",
            bs->b.spent_uusd / 1e6, bs->b.committed_uusd / 1e6, bs->accepted / 1e6, tname,
            spot ? "spot" : "on-demand", cost / 1e6, (projected + cost) / 1e6, bs->b.cap_uusd / 1e6);
        if (x) {
            x->type = type;
            x->spot = spot;
            x->cost_uusd = cost;
        }
        return false;
    }
    if (!bs->b.hard && !bs->warned &&
        (double)(projected + cost) >= bs->b.warn_at * (double)bs->b.cap_uusd) {
        act_add(a, TM_PLANNER_WARN, "soft cap: projected %.2f USD passes %.0f%% of cap %.2f USD",
                (projected + cost) / 1e6, bs->b.warn_at * 100, bs->b.cap_uusd / 1e6);
        bs->warned = true;
    }
    bs->accepted += cost;
    return true;
}

/* Pack `items` (sorted largest first) plus `headroom_milli` into new nodes
 * of pool `pool`, emitting launches.  Returns GPUs launched. */
static void launch_pool(const struct tm_planner_input *in, struct acts *a, struct budget_state *bs,
                        struct item *items, size_t nitems, int32_t headroom_milli, int pool,
                        int32_t *pool_count, bool preemptible_only)
{
    const struct tm_price_table *pr = in->prices;
    const struct tm_planner_params *pp = &in->params;
    bool *done = calloc(nitems ? nitems : 1, sizeof(bool));
    size_t left = nitems, first = 0;   /* items before `first` are all done */
    int64_t left_milli = 0;            /* milli of the items not done */
    bool any_empty_ask = false;        /* an item asking 0 milli fits a full room */

    if (!done) {
        a->err = TM_ENOMEM;
        return;
    }
    for (size_t i = 0; i < nitems; i++) {
        left_milli += items[i].milli;
        if (items[i].milli <= 0)
            any_empty_ask = true;
    }
    while (left > 0 || headroom_milli > 0) {
        int32_t total = headroom_milli, largest = 1, zone = 0, type;
        int64_t use_ms = 0, cost;
        bool spot = pool == TM_PLANNER_POOL_SPOT, fell_back_od = false;
        const char *why_fb = "";
        int32_t room_milli, room_whole, held = 0, held_milli = 0, took = 0;
        size_t nheld = 0;

        /* Sorted by min_gpus, largest first: the first item not done is
         * the largest (kept incrementally: queues of 100k jobs). */
        while (first < nitems && done[first])
            first++;
        total = (int32_t)(total + left_milli);
        if (first < nitems && items[first].min_gpus > largest)
            largest = items[first].min_gpus;
        type = tm_planner_choose_type(pr, in->spot_zone_hazard, spot, total, largest, in->shortages, in->nshortages,
                                      in->now_ms, &zone);
        if (type >= 0) {
            /* Name the fallback: the cheapest choice ignoring shortages. */
            int32_t z0 = 0;
            int t0 = tm_planner_choose_type(pr, in->spot_zone_hazard, spot, total, largest, in->shortages,
                                            in->nunoffered, in->now_ms, &z0);
            if (t0 != type)
                why_fb = ", fallback: other type (short)";
            else if (z0 != zone)
                why_fb = ", fallback: other zone (short)";
        }
        /* On-demand stands in for short spot only for queued work, not
         * for forecast headroom: nodes bought ahead for spot demand sat
         * idle on on-demand while spot stayed short (configs H and I of
         * bench/run-elastic.sh; bench/results/elastic-2026-12-02-c.md). */
        if (type < 0 && spot && preemptible_only && pp->od_fallback && left > 0) {
            type = tm_planner_choose_type(pr, in->spot_zone_hazard, false, total, largest, in->shortages, in->nshortages,
                                          in->now_ms, &zone);
            if (type >= 0) {
                spot = false;
                fell_back_od = true;
                why_fb = ", fallback: on-demand (spot short everywhere)";
            }
        }
        if (type < 0) {
            act_add(a, TM_PLANNER_REFUSE, "no %s capacity for %d milli-GPU (largest job %d GPUs): "
                    "every type and zone short or too small", spot ? "spot" : "on-demand",
                    total, largest);
            break;
        }
        if (pool_count[fell_back_od ? TM_PLANNER_POOL_OD : pool] >=
            pp->max_nodes[fell_back_od ? TM_PLANNER_POOL_OD : pool]) {
            act_add(a, TM_PLANNER_REFUSE, "pool %s at its max of %d nodes",
                    fell_back_od || pool == TM_PLANNER_POOL_OD ? "on-demand" : "spot",
                    pp->max_nodes[fell_back_od ? TM_PLANNER_POOL_OD : pool]);
            break;
        }
        room_whole = pr->types[type].gpus;
        room_milli = room_whole * 1000;
        {
            struct room r = room_of_type(&pr->types[type], pool);
            for (size_t i = first; i < nitems; i++) {
                if (r.free_milli <= 0 && !any_empty_ask)
                    break; /* full: nothing more fits */
                if (done[i] || !room_fit(&r, &items[i].ask, true))
                    continue;
                done[i] = true;
                left--;
                left_milli -= items[i].milli;
                nheld++;
                held_milli += items[i].milli;
                if (items[i].remaining_ms > use_ms)
                    use_ms = items[i].remaining_ms;
            }
            held = r.free_milli;
            if (headroom_milli > 0) {
                int32_t take = headroom_milli < held ? headroom_milli : held;
                headroom_milli -= take;
                took = take;
                if (use_ms < pp->launch_use_ms)
                    use_ms = pp->launch_use_ms;
            }
        }
        if (nheld == 0 && took == 0) {
            /* the chosen type holds none of what is left (its CPU or
             * memory ask is larger than any type's) */
            act_add(a, TM_PLANNER_REFUSE, "no %s type holds the %zu jobs left (CPU or memory)",
                    spot ? "spot" : "on-demand", left);
            break;
        }
        if (use_ms <= 0)
            use_ms = pp->launch_use_ms;
        cost = cost_of(type_price(&pr->types[type], spot), pp->boot_ms + use_ms);
        if (!budget_ok(bs, a, cost, type, spot, pr->types[type].name))
            break;
        {
            struct tm_planner_action *x = act_add(
                a, TM_PLANNER_LAUNCH, "%s: %zu queued jobs (%.2f GPUs)%s on %s %s at $%.3f/GPU-h in %s%s",
                nheld ? "backlog" : "ahead of forecast", nheld, held_milli / 1000.0,
                nheld ? "" : " forecast headroom", pr->types[type].name, spot ? "spot" : "on-demand",
                (double)type_price(&pr->types[type], spot) / pr->types[type].gpus / 1e6,
                pr->nzones ? pr->zones[zone] : "default zone", why_fb);
            if (!x)
                break;
            x->type = type;
            x->zone = zone;
            x->spot = spot;
            x->od_fallback = fell_back_od;
            x->cost_uusd = cost;
        }
        pool_count[spot ? TM_PLANNER_POOL_SPOT : TM_PLANNER_POOL_OD]++;
        if (nheld == 0 && held == room_milli && headroom_milli <= 0 && left == 0)
            break;
    }
    free(done);
}

/* One tm_planner_run: its input, the actions written so far, and what the
 * steps hand each other (the modelled room of every node, the backlog per
 * pool, the pools' counts and the disruption budget left). */
struct run {
    const struct tm_planner_input *in;
    struct acts a;
    struct room *rooms;
    struct item *items[TM_PLANNER_POOL_MAX];
    size_t nitems[TM_PLANNER_POOL_MAX];
    struct item *gangs[TM_PLANNER_POOL_MAX]; /* gang members left for a set launch */
    size_t ngangs[TM_PLANNER_POOL_MAX];
    bool *force_od;            /* job index -> must start on-demand (deadline) */
    bool *skip_idle;           /* node index -> an idle node kept this run */
    int32_t pool_count[TM_PLANNER_POOL_MAX], pool_gpus[TM_PLANNER_POOL_MAX];
    int32_t backlog_milli[TM_PLANNER_POOL_MAX];
    struct budget_state bs;
    int disrupt_left;
    size_t live;
};

/* The room of every node as the planner models it, and the pools' live
 * node and GPU counts. */
static void run_rooms(struct run *r)
{
    const struct tm_planner_input *in = r->in;
    const struct tm_price_table *pr = in->prices;

    for (size_t i = 0; i < in->nnodes; i++) {
        const struct tm_planner_node *n = &in->nodes[i];
        const struct tm_price_type *t = &pr->types[n->type];
        struct room *rm = &r->rooms[i];
        int p = n->spot ? TM_PLANNER_POOL_SPOT : TM_PLANNER_POOL_OD;
        *rm = room_of_type(t, p);
        rm->usable = !n->leaving && !n->cordoned;
        if (n->ready && rm->free_cpu != INT64_MAX)
            rm->free_cpu -= n->used_cpu_milli;
        if (n->ready && rm->free_mem != INT64_MAX)
            rm->free_mem -= n->used_memory_mib;
        rm->free_milli = n->ready ? t->gpus * 1000 - n->used_milli : t->gpus * 1000;
        rm->free_whole = n->ready ? n->free_whole : t->gpus;
        rm->share_known = !n->ready || n->share_room_known;
        rm->free_share = n->ready ? n->share_free_milli : 0;
        if (!n->leaving) {
            r->pool_count[p]++;
            if (!n->cordoned)
                r->pool_gpus[p] += t->gpus;
            r->live++;
        }
    }
}

/* 1. Deadlines: the latest tick at which an on-demand start still
 * finishes in time. */
static void run_deadlines(struct run *r)
{
    const struct tm_planner_input *in = r->in;
    const struct tm_planner_params *pp = &in->params;

    for (size_t j = 0; j < in->njobs; j++) {
        const struct tm_planner_job *jb = &in->jobs[j];
        int64_t sw;
        if (!jb->deadline_ms || !jb->preemptible || (jb->running && !jb->on_spot))
            continue;
        sw = tm_planner_deadline_switch_ms(jb->deadline_ms, jb->remaining_ms, pp->boot_ms, pp->tick_ms);
        if (in->now_ms + pp->tick_ms > sw) {
            struct tm_planner_action *x = act_add(
                &r->a, TM_PLANNER_DEADLINE_OD,
                "deadline in %.0f s, %.0f s of work left, on-demand start takes %.0f s: "
                "waiting another tick would miss it", (jb->deadline_ms - in->now_ms) / 1e3,
                jb->remaining_ms / 1e3, (pp->boot_ms + pp->tick_ms) / 1e3);
            if (x)
                x->job = (int32_t)j;
            r->force_od[j] = true;
        }
    }
}

/* 2. Backlog: queued jobs that fit nowhere (largest first), per pool.
 * Returns 0 or TM_ENOMEM. */
static int run_backlog(struct run *r)
{
    const struct tm_planner_input *in = r->in;
    const struct tm_price_table *pr = in->prices;
    const struct tm_planner_params *pp = &in->params;
    struct item *all = calloc(in->njobs + 1, sizeof(*all));
    size_t nall = 0;

    if (!all)
        return TM_ENOMEM;
    for (size_t j = 0; j < in->njobs; j++) {
        const struct tm_planner_job *jb = &in->jobs[j];
        if (jb->running && !r->force_od[j])
            continue;
        all[nall] = (struct item){(int32_t)j, jb->gpus, jb->milli, jb->remaining_ms,
                                  {jb->gpus, jb->milli, jb->cpu_milli, jb->memory_mib}, 0};
        all[nall].min_gpus = smallest_holding(pr, &all[nall].ask);
        nall++;
    }
    /* Rooms only shrink in this loop, so an ask that fit nowhere keeps
     * fitting nowhere, and so does any ask at least as large: remember
     * a few (per od_only) and skip the scan of every node for them (the
     * live tick has queues of 100k jobs over 10k nodes). */
    struct failed_asks failed[2] = {{.n = 0}, {.n = 0}};
    struct failed_asks failed_soon[2] = {{.n = 0}, {.n = 0}};
    struct room *soon = NULL;  /* wait_for_ends: the rooms once work ending within a boot ends */
    if (pp->wait_for_ends) {
        soon = malloc((in->nnodes + 1) * sizeof(*soon));
        if (!soon) {
            free(all);
            return TM_ENOMEM;
        }
        memcpy(soon, r->rooms, in->nnodes * sizeof(*soon));
        for (size_t j = 0; j < in->njobs; j++) {
            const struct tm_planner_job *jb = &in->jobs[j];
            struct room *rm;
            if (!jb->running || jb->remaining_ms > pp->boot_ms || !in->nodes[jb->node].ready)
                continue;
            rm = &soon[jb->node];
            if (rm->free_cpu != INT64_MAX)
                rm->free_cpu += jb->cpu_milli;
            if (rm->free_mem != INT64_MAX)
                rm->free_mem += jb->memory_mib;
            rm->free_milli += jb->milli;
            if (jb->gpus > 0)
                rm->free_whole += jb->gpus;
            else if (jb->milli > rm->free_share)
                rm->free_share = jb->milli; /* its GPU has at least its share free */
        }
    }
    qsort(all, nall, sizeof(*all), cmp_item);
    for (size_t k = 0; k < nall; k++) {
        const struct tm_planner_job *jb = &in->jobs[all[k].job];
        bool od_only = !jb->preemptible || r->force_od[all[k].job] || !pp->spot;
        const struct ask *ask = &all[k].ask;
        ptrdiff_t at;
        int pool;
        int passes = od_only || pp->od_room_for_preemptible ? 2 : 1;
        if (asks_failed(&failed[od_only], ask))
            goto backlog;
        /* spot rooms first for preemptible work, then paid on-demand room */
        at = room_take(r->rooms, in->nnodes, od_only, passes, ask);
        if (at >= 0) {
            /* an idle node queued work is counted on is not released
             * under it (the scheduler places the job after this pass;
             * released, it would wait a boot) */
            if (in->nodes[at].jobs == 0)
                r->skip_idle[at] = true;
            if (soon) /* the room taken now is not free later either */
                (void)room_fit(&soon[at], ask, true);
            continue;
        }
        asks_note_failed(&failed[od_only], ask);
    backlog:
        if (soon && !jb->deadline_ms && jb->gang <= 1) {
            /* wait_for_ends: room that running work frees within a boot
             * starts the job no later than a new node would (a deadline
             * job or a gang does not bet on estimates); these rooms only
             * shrink too: the same shortcut */
            bool waits = false;
            if (!asks_failed(&failed_soon[od_only], ask)) {
                waits = room_take(soon, in->nnodes, od_only, passes, ask) >= 0;
                if (!waits)
                    asks_note_failed(&failed_soon[od_only], ask);
            }
            if (waits) {
                /* counted as held, as a launch for it would be: the
                 * forecast's headroom is not bought for it again */
                r->backlog_milli[od_only ? TM_PLANNER_POOL_OD : TM_PLANNER_POOL_SPOT] += all[k].milli;
                continue;
            }
        }
        pool = od_only ? TM_PLANNER_POOL_OD : TM_PLANNER_POOL_SPOT;
        if (jb->gang > 1) {
            /* bought as one set by run_gang_launches, never packed */
            r->gangs[pool][r->ngangs[pool]++] = all[k];
            r->backlog_milli[pool] += all[k].milli;
            continue;
        }
        r->items[pool][r->nitems[pool]++] = all[k];
        r->backlog_milli[pool] += all[k].milli;
    }
    free(soon);
    free(all);
    return 0;
}

/* 3a. Gangs bought whole: the members of one queued gang that fit no
 * node's room, launched as one set of the cheapest type holding a member
 * in the first zone where it is not short (a shortage remembered there
 * moves the whole set to the next zone or type), or refused whole.  Before
 * the other launches, so that the pool's max and the budget go to the
 * work that needs all its nodes at once in the order the queue has it.
 * Returns 0 or the first error (r->a.err). */
static void gang_launch_one(struct run *r, int pool, const struct item *it, int32_t count)
{
    const struct tm_planner_input *in = r->in;
    const struct tm_price_table *pr = in->prices;
    const struct tm_planner_params *pp = &in->params;
    const struct tm_planner_job *jb = &in->jobs[it->job];
    bool spot = pool == TM_PLANNER_POOL_SPOT, fell_back_od = false;
    int32_t zone = 0;
    const char *why_fb = "";
    int type = -1, side;
    int64_t use_ms, cost;
    struct tm_planner_action *x;

    /* The cheapest type holding one member (its CPU and memory too). */
    for (int pass = 0; pass < 2 && type < 0; pass++) {
        if (pass == 1) {
            if (!spot || !pp->od_fallback)
                break;
            spot = false;
            fell_back_od = true;
        }
        int64_t best_price = 0;
        for (size_t t = 0; t < pr->ntypes; t++) {
            struct room rm = room_of_type(&pr->types[t], pool);
            int64_t price = type_price(&pr->types[t], spot);
            int z;
            if (!room_fit(&rm, &it->ask, false) || (spot && price <= 0))
                continue;
            z = first_zone(pr, in->spot_zone_hazard, (int32_t)t, spot, in->shortages, in->nshortages,
                           in->now_ms);
            if (z < 0)
                continue;
            if (type < 0 || price < best_price) {
                type = (int)t;
                best_price = price;
                zone = z;
            }
        }
    }
    if (type < 0) {
        x = act_add(&r->a, TM_PLANNER_REFUSE, "gang of %d nodes: no type holds a member in a zone "
                    "with %s capacity (every one short or too small)", count,
                    pool == TM_PLANNER_POOL_SPOT ? "spot" : "on-demand");
        if (x)
            x->job = it->job;
        return;
    }
    if (fell_back_od)
        why_fb = ", fallback: on-demand (spot short everywhere)";
    else if (first_zone(pr, in->spot_zone_hazard, (int32_t)type, spot, NULL, 0, in->now_ms) != zone)
        why_fb = ", fallback: other zone (short)";
    side = spot ? TM_PLANNER_POOL_SPOT : TM_PLANNER_POOL_OD;
    if (r->pool_count[side] + count > pp->max_nodes[side]) {
        x = act_add(&r->a, TM_PLANNER_REFUSE, "gang of %d nodes: pool %s has %d of max %d nodes, "
                    "not bought in part", count, spot ? "spot" : "on-demand", r->pool_count[side],
                    pp->max_nodes[side]);
        if (x)
            x->job = it->job;
        return;
    }
    use_ms = jb->remaining_ms > 0 ? jb->remaining_ms : pp->launch_use_ms;
    cost = cost_of(type_price(&pr->types[type], spot), pp->boot_ms + use_ms) * count;
    if (!budget_ok(&r->bs, &r->a, cost, type, spot, pr->types[type].name))
        return;
    x = act_add(&r->a, TM_PLANNER_LAUNCH, "gang: job %lld needs %d nodes at once: %d x %s %s in %s, "
                "all or none%s", (long long)jb->id, count, count, pr->types[type].name,
                spot ? "spot" : "on-demand", pr->nzones ? pr->zones[zone] : "default zone", why_fb);
    if (!x)
        return;
    x->job = it->job;
    x->type = type;
    x->zone = zone;
    x->spot = spot;
    x->od_fallback = fell_back_od;
    x->cost_uusd = cost;
    x->count = count;
    r->pool_count[side] += count;
}

static int run_gang_launches(struct run *r)
{
    const struct tm_planner_input *in = r->in;

    for (int p = 0; p < TM_PLANNER_POOL_MAX && !r->a.err; p++) {
        for (size_t i = 0; i < r->ngangs[p] && !r->a.err; i++) {
            int64_t id = in->jobs[r->gangs[p][i].job].id;
            int32_t count = 0;
            bool seen = false;
            for (size_t k = 0; k < i && !seen; k++)
                seen = in->jobs[r->gangs[p][k].job].id == id;
            if (seen)
                continue; /* its set was bought with its first member */
            for (size_t k = i; k < r->ngangs[p]; k++)
                if (in->jobs[r->gangs[p][k].job].id == id)
                    count++;
            gang_launch_one(r, p, &r->gangs[p][i], count);
        }
    }
    return r->a.err;
}

/* 3. Launch for the backlog and ahead of the forecast, and the pools'
 * minimum.  Returns 0 or the first error (r->a.err). */
static int run_launches(struct run *r)
{
    const struct tm_planner_input *in = r->in;
    const struct tm_price_table *pr = in->prices;
    const struct tm_planner_params *pp = &in->params;

    for (int p = 0; p < TM_PLANNER_POOL_MAX; p++) {
        int32_t headroom = 0;
        if (p == TM_PLANNER_POOL_SPOT && !pp->spot)
            continue;
        if (in->forecast_gpus[p] >= 0) {
            int64_t want = (int64_t)ceil(in->forecast_gpus[p] - 1e-9) * 1000;
            int64_t have = (int64_t)r->pool_gpus[p] * 1000 + r->backlog_milli[p];
            if (want > have)
                headroom = (int32_t)(want - have);
        }
        if (r->pool_count[p] < pp->min_nodes[p] && headroom <= 0 && r->nitems[p] == 0) {
            int32_t z = 0;
            int t = tm_planner_choose_type(pr, in->spot_zone_hazard, p == TM_PLANNER_POOL_SPOT, 1, 1, in->shortages,
                                           in->nshortages, in->now_ms, &z);
            while (t >= 0 && r->pool_count[p] < pp->min_nodes[p]) {
                int64_t cost = cost_of(type_price(&pr->types[t], p == TM_PLANNER_POOL_SPOT),
                                       pp->boot_ms + pp->launch_use_ms);
                struct tm_planner_action *x;
                if (!budget_ok(&r->bs, &r->a, cost, t, p == TM_PLANNER_POOL_SPOT, pr->types[t].name))
                    break;
                x = act_add(&r->a, TM_PLANNER_LAUNCH, "pool minimum of %d nodes", pp->min_nodes[p]);
                if (!x)
                    break;
                x->type = t;
                x->zone = z;
                x->spot = p == TM_PLANNER_POOL_SPOT;
                x->pool_minimum = true;
                x->cost_uusd = cost;
                r->pool_count[p]++;
            }
        }
        if (r->nitems[p] || headroom > 0)
            launch_pool(in, &r->a, &r->bs, r->items[p], r->nitems[p], headroom, p, r->pool_count,
                        p == TM_PLANNER_POOL_SPOT);
        if (r->a.err)
            return r->a.err;
    }
    return 0;
}

/* 4. Substitute: an on-demand node running only preemptible work, by a
 * spot node, when the saving over the remaining runtime exceeds the cost
 * of moving (work lost plus the overlap while the spot node boots). */
static void run_substitutes(struct run *r)
{
    const struct tm_planner_input *in = r->in;
    const struct tm_price_table *pr = in->prices;
    const struct tm_planner_params *pp = &in->params;

    if (!pp->spot)
        return;
    for (size_t i = 0; i < in->nnodes && r->disrupt_left > 0; i++) {
        const struct tm_planner_node *n = &in->nodes[i];
        const struct tm_price_type *t = &pr->types[n->type];
        int64_t remaining, saving, move, od_gpu, z;
        if (n->spot || !n->ready || n->leaving || n->jobs == 0 || !n->only_preemptible ||
            !n->movable ||
            t->spot_uusd_per_hour <= 0)
            continue;
        z = first_zone(pr, in->spot_zone_hazard, n->type, true, in->shortages, in->nshortages,
                       in->now_ms);
        if (z < 0)
            continue;
        remaining = n->busy_until_ms - in->now_ms - pp->boot_ms - pp->move_cost_ms;
        if (remaining <= 0)
            continue;
        od_gpu = t->on_demand_uusd_per_hour / t->gpus;
        saving = cost_of(t->on_demand_uusd_per_hour - t->spot_uusd_per_hour, remaining);
        move = cost_of(t->spot_uusd_per_hour, pp->boot_ms) +
               cost_of(od_gpu, n->lost_if_moved_milli_ms / 1000) +
               cost_of(od_gpu * (n->used_milli) / 1000, pp->move_cost_ms);
        if (saving > move) {
            struct tm_planner_action *x = act_add(
                &r->a, TM_PLANNER_SUBSTITUTE,
                "on-demand node runs only preemptible work for %.0f s more: saving %.2f USD > "
                "moving %.2f USD", remaining / 1e3, saving / 1e6, move / 1e6);
            if (!x)
                break;
            x->node = (int32_t)i;
            x->type = n->type;
            x->zone = (int32_t)z;
            x->spot = true;
            x->cost_uusd = move;
            r->disrupt_left--;
        }
    }
}

/* 5. Consolidate: empty the least used node whose jobs are all
 * checkpointable, when they fit elsewhere and the saving pays the move.
 * Returns 0 or TM_ENOMEM. */
static int run_consolidate(struct run *r)
{
    const struct tm_planner_input *in = r->in;
    const struct tm_price_table *pr = in->prices;
    const struct tm_planner_params *pp = &in->params;
    int best = -1;

    for (size_t i = 0; i < in->nnodes; i++) {
        const struct tm_planner_node *n = &in->nodes[i];
        if (!n->ready || n->leaving || n->jobs == 0 || !n->movable)
            continue;
        if (best < 0 || n->used_milli < in->nodes[best].used_milli)
            best = (int)i;
    }
    if (best < 0 || r->disrupt_left <= 0)
        return 0;
    const struct tm_planner_node *n = &in->nodes[best];
    const struct tm_price_type *t = &pr->types[n->type];
    struct room *tmp = malloc((in->nnodes + 1) * sizeof(*tmp));
    bool fits = true;
    if (!tmp)
        return TM_ENOMEM;
    memcpy(tmp, r->rooms, in->nnodes * sizeof(*tmp));
    tmp[best].usable = false;
    for (size_t j = 0; j < in->njobs && fits; j++) {
        const struct tm_planner_job *jb = &in->jobs[j];
        bool ok = false;
        if (!jb->running || jb->node != best)
            continue;
        for (size_t i = 0; i < in->nnodes && !ok; i++)
            if ((int)i != best && in->nodes[i].ready &&
                (pp->spot || tmp[i].pool == TM_PLANNER_POOL_OD))
                ok = room_fit(&tmp[i], &(struct ask){jb->gpus, jb->milli, jb->cpu_milli,
                                                     jb->memory_mib}, true);
        fits = ok;
    }
    free(tmp);
    if (fits) {
        int64_t horizon = n->busy_until_ms - in->now_ms;
        int64_t price = type_price(t, n->spot);
        /* Credited at most the grace, and at least a tick: a node left
         * alone is released no sooner than the next pass, so a zero
         * grace (the forecast alone keeping idle nodes) does not make
         * every move worthless (the tick is the grace it had;
         * bench/results/elastic-2026-12-02-c.md). */
        int64_t credit = pp->idle_grace_ms > pp->tick_ms ? pp->idle_grace_ms : pp->tick_ms;
        int64_t saving = cost_of(price, horizon < credit ? horizon : credit);
        int64_t move = cost_of(price * n->used_milli / 1000 / t->gpus, pp->move_cost_ms) +
                       cost_of(price / t->gpus, n->lost_if_moved_milli_ms / 1000);
        if (horizon > pp->move_cost_ms && saving > move) {
            struct tm_planner_action *x = act_add(
                &r->a, TM_PLANNER_MOVE,
                "consolidate: %d jobs (%.2f GPUs) fit elsewhere; releasing saves %.2f USD > "
                "moving %.2f USD", n->jobs, n->used_milli / 1000.0, saving / 1e6, move / 1e6);
            if (x)
                x->node = best;
            r->disrupt_left--;
        }
    }
    return 0;
}

/* ---- 5a. Consolidation by restart (planner.h) ----------------------------- */

/* What emptying one node by restart would save and redo. */
struct restart_eval {
    bool ok;
    int64_t saving, redone, redone_milli_ms, horizon, extended_ms;
    int32_t restarted, moved;
};

/* Running jobs grouped by node: order[first[i] .. first[i + 1]) are the
 * indices of the jobs on node i.  Returns 0 or TM_ENOMEM. */
static int jobs_by_node(const struct tm_planner_input *in, size_t **ret_first, size_t **ret_order)
{
    size_t *first = calloc(in->nnodes + 2, sizeof(*first));
    size_t *order = malloc((in->njobs + 1) * sizeof(*order));

    if (!first || !order) {
        free(first);
        free(order);
        return TM_ENOMEM;
    }
    for (size_t j = 0; j < in->njobs; j++)
        if (in->jobs[j].running)
            first[in->jobs[j].node + 1]++;
    for (size_t i = 0; i < in->nnodes; i++)
        first[i + 1] += first[i];
    {
        size_t *at = calloc(in->nnodes + 1, sizeof(*at));
        if (!at) {
            free(first);
            free(order);
            return TM_ENOMEM;
        }
        for (size_t j = 0; j < in->njobs; j++)
            if (in->jobs[j].running) {
                size_t ni = (size_t)in->jobs[j].node;
                order[first[ni] + at[ni]++] = j;
            }
        free(at);
    }
    *ret_first = first;
    *ret_order = order;
    return 0;
}

/* Empty node `best` by restart, on scratch copies of the rooms and of the
 * nodes' expected ends (`ends`, as earlier restarts of this pass left
 * them) in tmp and tend, which hold the result when it fits. */
static struct restart_eval restart_eval(const struct run *r, int best, const size_t *ids, size_t nids,
                                        const int64_t *ends, struct room *tmp, int64_t *tend)
{
    const struct tm_planner_input *in = r->in;
    const struct tm_price_table *pr = in->prices;
    const struct tm_planner_params *pp = &in->params;
    const struct tm_planner_node *n = &in->nodes[best];
    const struct tm_price_type *t = &pr->types[n->type];
    int32_t cap = pp->restart_attempts_max > 0 ? pp->restart_attempts_max : TM_PLANNER_RESTART_ATTEMPTS_MAX;
    int64_t price = type_price(t, n->spot), extension = 0;
    struct restart_eval e = {0};

    e.horizon = n->busy_until_ms - in->now_ms;
    if (e.horizon <= 0 || nids == 0)
        return e;
    memcpy(tmp, r->rooms, in->nnodes * sizeof(*tmp));
    memcpy(tend, ends, in->nnodes * sizeof(*tend));
    tmp[best].usable = false;
    for (size_t k = 0; k < nids; k++) {
        const struct tm_planner_job *jb = &in->jobs[ids[k]];
        struct ask ak = {jb->gpus, jb->milli, jb->cpu_milli, jb->memory_mib};
        int64_t redo = jb->checkpointable ? pp->move_cost_ms : (jb->ran_ms > 0 ? jb->ran_ms : 0);
        int64_t end = in->now_ms + redo + (jb->remaining_ms > 0 ? jb->remaining_ms : 0);
        int to = -1;
        int64_t to_cost = 0;
        if (!jb->preemptible || (!jb->checkpointable && jb->attempts >= cap))
            return e;
        /* Where running longer than its own work costs least (0 where
         * its work outlasts the job's), first fit on ties. */
        for (size_t i = 0; i < in->nnodes; i++) {
            const struct tm_planner_node *o = &in->nodes[i];
            int64_t c;
            if ((int)i == best || !o->ready || (!pp->spot && tmp[i].pool != TM_PLANNER_POOL_OD) ||
                !room_fit(&tmp[i], &ak, false))
                continue;
            c = end > tend[i] ? cost_of(type_price(&pr->types[o->type], o->spot), end - tend[i]) : 0;
            if (to < 0 || c < to_cost) {
                to = (int)i;
                to_cost = c;
            }
        }
        if (to < 0)
            return e;
        room_fit(&tmp[to], &ak, true);
        if (end > tend[to]) {
            e.extended_ms += end - tend[to];
            tend[to] = end;
        }
        extension += to_cost;
        e.redone_milli_ms += (int64_t)jb->milli * redo;
        if (jb->checkpointable)
            e.moved++;
        else
            e.restarted++;
    }
    if (e.restarted == 0)
        return e; /* all checkpointable: a move's (run_consolidate) */
    e.saving = cost_of(price, e.horizon) - extension;
    /* the redone GPU-time at the node's price per GPU */
    e.redone = cost_of(price / t->gpus, e.redone_milli_ms / 1000);
    e.ok = true;
    return e;
}

/* A candidate for a restart and the most it could save net of the work
 * redone, before its jobs are fitted elsewhere. */
struct restart_cand {
    int32_t node;
    int64_t bound;
};

static int cmp_restart_cand(const void *a, const void *b)
{
    const struct restart_cand *x = a, *y = b;
    if (x->bound != y->bound)
        return x->bound > y->bound ? -1 : 1;
    return x->node < y->node ? -1 : x->node > y->node;
}

/* Per pass: at most this many restarts, each chosen among at most this
 * many fitted candidates (the live tick sees 10k nodes; each fit scans
 * them all). */
#define RESTART_NODES_MAX 4
#define RESTART_EVALS_MAX 64

/* 5a. Consolidate by restart: of the nodes whose jobs are all preemptible
 * but not all checkpointable, empty the one that saves most net of the
 * work redone when saved > redone (planner.h), then the next on what is
 * left, while the disruption budget lasts (RESTART_NODES_MAX at most).
 * Returns 0 or TM_ENOMEM. */
static int run_restart(struct run *r)
{
    const struct tm_planner_input *in = r->in;
    const struct tm_planner_params *pp = &in->params;
    size_t *first = NULL, *order = NULL;
    struct room *tmp = NULL, *keep = NULL;
    int64_t *tend = NULL, *ends = NULL, *keep_end = NULL;
    struct restart_cand *cand = NULL;
    size_t ncand = 0;
    int err;

    if (!pp->consolidate_restart || r->disrupt_left <= 0)
        return 0;
    for (size_t k = 0; k < r->a.n; k++)
        if (r->a.v[k].kind == TM_PLANNER_MOVE)
            return 0; /* its jobs took room this pass is not told of */
    err = jobs_by_node(in, &first, &order);
    if (err < 0)
        return err;
    tmp = malloc((in->nnodes + 1) * sizeof(*tmp));
    keep = malloc((in->nnodes + 1) * sizeof(*keep));
    tend = malloc((in->nnodes + 1) * sizeof(*tend));
    ends = malloc((in->nnodes + 1) * sizeof(*ends));
    keep_end = malloc((in->nnodes + 1) * sizeof(*keep_end));
    cand = malloc((in->nnodes + 1) * sizeof(*cand));
    if (!tmp || !keep || !tend || !ends || !keep_end || !cand) {
        err = TM_ENOMEM;
        goto out;
    }
    for (size_t i = 0; i < in->nnodes; i++)
        ends[i] = in->nodes[i].busy_until_ms > in->now_ms ? in->nodes[i].busy_until_ms : in->now_ms;
    /* Candidates, most promising first: at most the node's price x its
     * expected use left, less the attempts' work redone (before any fit). */
    for (size_t i = 0; i < in->nnodes; i++) {
        const struct tm_planner_node *n = &in->nodes[i];
        const struct tm_price_type *t = &in->prices->types[n->type];
        int64_t price = type_price(t, n->spot), lost = 0;
        if (!n->ready || n->leaving || n->cordoned || n->no_restart || n->jobs == 0 ||
            !n->only_preemptible || n->movable || !r->rooms[i].usable || n->busy_until_ms <= in->now_ms)
            continue;
        for (size_t k = first[i]; k < first[i + 1]; k++)
            if (!in->jobs[order[k]].checkpointable && in->jobs[order[k]].ran_ms > 0)
                lost += (int64_t)in->jobs[order[k]].milli * in->jobs[order[k]].ran_ms;
        cand[ncand++] = (struct restart_cand){(int32_t)i, cost_of(price, n->busy_until_ms - in->now_ms) -
                                                              cost_of(price / t->gpus, lost / 1000)};
    }
    qsort(cand, ncand, sizeof(*cand), cmp_restart_cand);
    for (int done = 0; r->disrupt_left > 0 && done < RESTART_NODES_MAX; done++) {
        struct restart_eval best_e = {0};
        int best = -1, tried = 0;
        for (size_t c = 0; c < ncand && tried < RESTART_EVALS_MAX; c++) {
            int i = cand[c].node;
            struct restart_eval e;
            if (best >= 0 && cand[c].bound <= best_e.saving - best_e.redone)
                break; /* none after it can do better */
            if (!r->rooms[i].usable)
                continue; /* restarted this pass */
            tried++;
            e = restart_eval(r, i, order + first[i], first[i + 1] - first[i], ends, tmp, tend);
            if (!e.ok || e.saving <= e.redone)
                continue;
            if (best < 0 || e.saving - e.redone > best_e.saving - best_e.redone) {
                best = i;
                best_e = e;
                memcpy(keep, tmp, in->nnodes * sizeof(*keep));
                memcpy(keep_end, tend, in->nnodes * sizeof(*keep_end));
            }
        }
        if (best < 0)
            break;
        const struct tm_planner_node *n = &in->nodes[best];
        const struct tm_price_type *t = &in->prices->types[n->type];
        struct tm_planner_action *x = act_add(
            &r->a, TM_PLANNER_RESTART,
            "consolidate by restart: %d jobs (%d start over, %.2f GPUs) fit elsewhere; saved %.2f "
            "node-h x %.2f - %.2f elsewhere = %.2f USD > redone %.2f GPU-h x %.2f = %.2f USD",
            best_e.restarted + best_e.moved, best_e.restarted, n->used_milli / 1000.0,
            best_e.horizon / 3.6e6, type_price(t, n->spot) / 1e6,
            (cost_of(type_price(t, n->spot), best_e.horizon) - best_e.saving) / 1e6, best_e.saving / 1e6,
            best_e.redone_milli_ms / 1000 / 3.6e6, type_price(t, n->spot) / t->gpus / 1e6,
            best_e.redone / 1e6);
        if (!x)
            break;
        x->node = best;
        x->type = n->type;
        x->spot = n->spot;
        x->cost_uusd = best_e.redone;
        x->saving_uusd = best_e.saving;
        x->redone_milli_ms = best_e.redone_milli_ms;
        x->restarted = best_e.restarted;
        /* its jobs hold their new rooms, and the nodes that take them run
         * as long as they do, for the rest of the pass */
        memcpy(r->rooms, keep, in->nnodes * sizeof(*keep));
        memcpy(ends, keep_end, in->nnodes * sizeof(*ends));
        r->rooms[best].usable = false;
        r->disrupt_left--;
    }
    err = 0;
out:
    free(first);
    free(order);
    free(tmp);
    free(keep);
    free(tend);
    free(ends);
    free(keep_end);
    free(cand);
    return err;
}

/* 5b. Drain oversized nodes: one whose work a type of at most
 * 1/TM_PLANNER_DRAIN_DIV of its GPUs would hold gets no new work, so that
 * it empties and goes instead of a large node launched for a large
 * job living on for a stream of small ones (no job is stopped; new
 * work goes to smaller nodes). */
static void run_drain_oversized(struct run *r)
{
    const struct tm_planner_input *in = r->in;
    const struct tm_price_table *pr = in->prices;

    if (!in->params.drain_oversized)
        return;
    int32_t smallest = smallest_type_gpus(pr);
    for (size_t i = 0; i < in->nnodes; i++) {
        const struct tm_planner_node *n = &in->nodes[i];
        int32_t g = pr->types[n->type].gpus, need;
        struct tm_planner_action *x;
        if (!n->ready || n->leaving || n->cordoned || n->jobs == 0 || g <= smallest)
            continue;
        need = smallest_holding(pr, &(struct ask){g - n->free_whole, 0, n->used_cpu_milli,
                                                  n->used_memory_mib});
        if (need <= 0 || need * TM_PLANNER_DRAIN_DIV > g)
            continue;
        x = act_add(&r->a, TM_PLANNER_DRAIN, "oversized: %d jobs (%.2f GPUs) on %d GPUs fit a %d-GPU "
                    "type; no new work until it empties", n->jobs, n->used_milli / 1000.0, g, need);
        if (!x)
            break;
        x->node = (int32_t)i;
        r->rooms[i].usable = false;
    }
}

/* The idle node to look at next for release: oldest idle first, past its
 * grace (a cordoned one at once), not already released, moved or kept
 * this run; -1 when none is left. */
static int run_next_idle(const struct run *r)
{
    const struct tm_planner_input *in = r->in;
    const struct tm_planner_params *pp = &in->params;
    int best = -1;

    for (size_t i = 0; i < in->nnodes; i++) {
        const struct tm_planner_node *n = &in->nodes[i];
        bool taken = r->skip_idle[i];
        if (!n->ready || n->leaving || n->jobs != 0 ||
            (!n->cordoned && in->now_ms - n->idle_since_ms < pp->idle_grace_ms))
            continue;
        for (size_t k = 0; k < r->a.n; k++)
            if ((r->a.v[k].kind == TM_PLANNER_TERMINATE || r->a.v[k].kind == TM_PLANNER_MOVE) &&
                r->a.v[k].node == (int32_t)i)
                taken = true;
        if (taken)
            continue;
        if (best < 0 || n->idle_since_ms < in->nodes[best].idle_since_ms)
            best = (int)i;
    }
    return best;
}

/* 6. Release nodes idle past their grace, oldest idle first, keeping
 * the forecast's upper quantile (hysteresis) and the pool minimum. */
static void run_releases(struct run *r)
{
    const struct tm_planner_input *in = r->in;
    const struct tm_price_table *pr = in->prices;
    const struct tm_planner_params *pp = &in->params;
    int best;

    while ((best = run_next_idle(r)) >= 0) {
        const struct tm_planner_node *n = &in->nodes[best];
        int p = n->spot ? TM_PLANNER_POOL_SPOT : TM_PLANNER_POOL_OD;
        int32_t g = pr->types[n->type].gpus;
        struct tm_planner_action *x;
        /* the node is skipped from now on through the `taken` scan */
        bool oversized = pp->drain_oversized && g > smallest_type_gpus(pr);
        bool kept_enough = pp->keep_max_ms > 0 &&
                           in->now_ms - n->idle_since_ms >= pp->keep_max_ms;
        bool forced = n->cordoned || oversized || kept_enough;
        if (r->pool_count[p] <= pp->min_nodes[p] ||
            (!forced && in->keep_gpus[p] >= 0 &&
             (double)(r->pool_gpus[p] - g) * 1000 < in->keep_gpus[p] * 1000 - 1e-6) ||
            r->disrupt_left <= 0) {
            /* kept: pool minimum, forecast (hysteresis) or disruption
             * budget; look at the other idle nodes */
            r->rooms[best].usable = false;
            r->skip_idle[best] = true;
            continue;
        }
        if (n->cordoned)
            x = act_add(&r->a, TM_PLANNER_TERMINATE, "drained and empty");
        else if (oversized)
            x = act_add(&r->a, TM_PLANNER_TERMINATE, "idle %.0f s past a grace of %.0f s; larger than "
                        "the smallest type, the forecast is kept in small nodes",
                        (in->now_ms - n->idle_since_ms) / 1e3, pp->idle_grace_ms / 1e3);
        else if (forced)
            x = act_add(&r->a, TM_PLANNER_TERMINATE, "idle %.0f s: kept for the forecast (%.1f GPUs) "
                        "for the longest a relaunch is worth (%.0f s); demand did not come",
                        (in->now_ms - n->idle_since_ms) / 1e3,
                        in->keep_gpus[p] < 0 ? 0 : in->keep_gpus[p], pp->keep_max_ms / 1e3);
        else
            x = act_add(&r->a, TM_PLANNER_TERMINATE, "idle %.0f s past a grace of %.0f s; forecast %.1f GPUs "
                        "fits without it", (in->now_ms - n->idle_since_ms) / 1e3,
                        pp->idle_grace_ms / 1e3, in->keep_gpus[p] < 0 ? 0 : in->keep_gpus[p]);
        if (!x)
            break;
        x->node = best;
        r->pool_count[p]--;
        if (!n->cordoned)
            r->pool_gpus[p] -= g;
        r->disrupt_left--;
    }
}

int tm_planner_run(const struct tm_planner_input *in, struct tm_planner_result *ret)
{
    const struct tm_price_table *pr = in->prices;
    const struct tm_planner_params *pp = &in->params;
    struct run r = {.in = in, .bs = {.b = in->budget, .warned = in->budget.warned}};
    int err;

    if (!pr || pr->ntypes == 0 || (in->nnodes && !in->nodes) || (in->njobs && !in->jobs))
        return TM_EINVAL;
    for (size_t i = 0; i < in->nnodes; i++)
        if (in->nodes[i].type < 0 || (size_t)in->nodes[i].type >= pr->ntypes)
            return TM_EINVAL;
    for (size_t j = 0; j < in->njobs; j++)
        if (in->jobs[j].running && (in->jobs[j].node < 0 || (size_t)in->jobs[j].node >= in->nnodes))
            return TM_EINVAL;
    r.rooms = calloc(in->nnodes + 1, sizeof(*r.rooms));
    r.force_od = calloc(in->njobs + 1, sizeof(*r.force_od));
    r.skip_idle = calloc(in->nnodes + 1, sizeof(*r.skip_idle));
    r.items[0] = calloc(in->njobs + 1, sizeof(struct item));
    r.items[1] = calloc(in->njobs + 1, sizeof(struct item));
    r.gangs[0] = calloc(in->njobs + 1, sizeof(struct item));
    r.gangs[1] = calloc(in->njobs + 1, sizeof(struct item));
    if (!r.rooms || !r.force_od || !r.skip_idle || !r.items[0] || !r.items[1] || !r.gangs[0] ||
        !r.gangs[1]) {
        r.a.err = TM_ENOMEM;
        goto out;
    }
    run_rooms(&r);
    run_deadlines(&r);
    err = run_backlog(&r);
    if (err < 0) {
        r.a.err = err;
        goto out;
    }
    if (run_gang_launches(&r) < 0 || run_launches(&r) < 0)
        goto out;

    r.disrupt_left = pp->disruption_nodes;
    if ((int)floor(pp->disruption_pct * (double)r.live) > r.disrupt_left)
        r.disrupt_left = (int)floor(pp->disruption_pct * (double)r.live);
    r.disrupt_left -= pp->recent_terminations;

    run_substitutes(&r);
    err = run_consolidate(&r);
    if (err < 0) {
        r.a.err = err;
        goto out;
    }
    err = run_restart(&r);
    if (err < 0) {
        r.a.err = err;
        goto out;
    }
    run_drain_oversized(&r);
    run_releases(&r);

out:
    free(r.rooms);
    free(r.force_od);
    free(r.skip_idle);
    free(r.items[0]);
    free(r.items[1]);
    free(r.gangs[0]);
    free(r.gangs[1]);
    if (r.a.err) {
        free(r.a.v);
        return r.a.err;
    }
    ret->actions = r.a.v;
    ret->nactions = r.a.n;
    return 0;
}

void tm_planner_result_release(struct tm_planner_result *r)
{
    if (!r)
        return;
    free(r->actions);
    r->actions = NULL;
    r->nactions = 0;
}
