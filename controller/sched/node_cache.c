/*
 * controller/sched/node_cache.c: the nodes as a pass loaded them, kept by
 * the caller between passes (struct tm_sched_footprint.cache), so that a
 * pass loads only the nodes whose free capacity changed since the last.
 *
 * What a node's load reads that never changes (its size, model, the
 * model slots and their maxima) is kept as loaded; what changes (free
 * CPU, memory and GPU milli, and each slot's free total) is read again
 * from the footprint for the nodes touched.  The pass then works on the
 * cache's nodes in place: the first change to a node in a pass saves its
 * state (sched_node_save()) and the end of the pass puts it back, so the
 * cache again holds the nodes as loaded.  Debug builds check every cached
 * load against a fresh one (scheduler.c), so a caller that misses a touch,
 * or a change the pass does not save, fails its tests instead of
 * scheduling on stale capacity.
 *
 * Beside the nodes it keeps their best-fit buckets (buckets.c) as loaded:
 * a touched node moves between them when it is read again, and a node the
 * pass changed goes back into them when its state does.  Debug builds
 * check those against a fresh build as well (sched_buckets_init()).
 */
#include "controller/sched/scheduler.h"

#include <stdlib.h>
#include <string.h>

#include "controller/sched/internal.h"
#include "core/err.h"

struct tm_sched_node_cache {
    const struct tm_sched_node *nodes; /* what it was loaded from */
    size_t nn;
    bool loaded;
    struct nst *ns;  /* as the load leaves them (before the pass) */
    int32_t *sum;    /* each node's gpu_free_sum as loaded */
    uint8_t *touched;
    int32_t *tlist;
    size_t ntouched;
    struct sched_node_totals t;
    /* A pass works on ns itself: what it changes is put back after it
     * (sched_node_cache_return()) from the first state it changed. */
    uint32_t gen, *saved; /* saved[i] == gen: node i's state is in undo */
    int32_t *undo_node;
    struct nst *undo;
    size_t nundo;
    /* The best-fit buckets of ns as loaded (buckets.c), once a pass
     * built them; NULL until then. */
    struct sched_buckets *bk;
};

int tm_sched_node_cache_new(size_t nnodes, struct tm_sched_node_cache **ret)
{
    struct tm_sched_node_cache *nc = calloc(1, sizeof(*nc));

    *ret = NULL;
    if (!nc)
        return TM_ENOMEM;
    nc->nn = nnodes;
    nc->ns = calloc(nnodes + 1, sizeof(*nc->ns));
    nc->sum = calloc(nnodes + 1, sizeof(*nc->sum));
    nc->touched = calloc(nnodes + 1, sizeof(*nc->touched));
    nc->tlist = malloc((nnodes + 1) * sizeof(*nc->tlist));
    nc->saved = calloc(nnodes + 1, sizeof(*nc->saved));
    nc->undo_node = malloc((nnodes + 1) * sizeof(*nc->undo_node));
    nc->undo = malloc((nnodes + 1) * sizeof(*nc->undo));
    if (!nc->ns || !nc->sum || !nc->touched || !nc->tlist || !nc->saved || !nc->undo_node || !nc->undo) {
        tm_sched_node_cache_free(nc);
        return TM_ENOMEM;
    }
    *ret = nc;
    return 0;
}

void tm_sched_node_cache_touch(struct tm_sched_node_cache *nc, size_t i)
{
    if (i < nc->nn && !nc->touched[i]) {
        nc->touched[i] = 1;
        nc->tlist[nc->ntouched++] = (int32_t)i;
    }
}

void tm_sched_node_cache_free(struct tm_sched_node_cache *nc)
{
    if (!nc)
        return;
    free(nc->ns);
    free(nc->sum);
    free(nc->touched);
    free(nc->tlist);
    free(nc->saved);
    free(nc->undo_node);
    free(nc->undo);
    sched_buckets_free(nc->bk);
    free(nc);
}

/* Node i's free CPU, memory and GPU milli from the caller's footprint
 * (trusted; a GPU held past 1000 counts as none free), and its GPU
 * summary when the footprint has one. */
void sched_nst_from_footprint(struct nst *s, const struct tm_sched_footprint *fp, size_t i)
{
    const int16_t *used = &fp->gpu_used[i * TM_NODE_GPUS_MAX];

    s->cpu = fp->cpu_free[i];
    s->mem = fp->mem_free[i];
    for (int g = 0; g < s->gpus; g++)
        s->free[g] = (int16_t)(used[g] > MILLI ? 0 : MILLI - used[g]);
    if (fp->gpus_full) {
        s->full = fp->gpus_full[i];
        s->maxfree = fp->gpu_free_max[i];
    }
}

static void untouch_all(struct tm_sched_node_cache *nc)
{
    for (size_t k = 0; k < nc->ntouched; k++)
        nc->touched[nc->tlist[k]] = 0;
    nc->ntouched = 0;
}

/* Node i's changing part, read again from the footprint. */
static void refresh(struct tm_sched_node_cache *nc, const struct tm_sched_footprint *fp, size_t i)
{
    struct nst *s = &nc->ns[i];

    sched_buckets_node_out(nc->bk, s, (int32_t)i);
    sched_nst_from_footprint(s, fp, i);
    sched_buckets_node_in(nc->bk, s, (int32_t)i);
    if (s->ok && s->mslot >= 0)
        nc->t.slot_free[s->mslot] += fp->gpu_free_sum[i] - nc->sum[i];
    nc->sum[i] = fp->gpu_free_sum[i];
}

bool sched_node_cache_restore(struct ctx *c)
{
    const struct tm_sched_input *in = c->in;
    const struct tm_sched_footprint *fp = in->footprint;
    struct tm_sched_node_cache *nc = fp ? fp->cache : NULL;

    if (!nc || !nc->loaded || !fp->gpus_full || nc->nodes != in->nodes || nc->nn != in->nnodes)
        return false;
    for (size_t k = 0; k < nc->ntouched; k++)
        refresh(nc, fp, (size_t)nc->tlist[k]);
    untouch_all(nc);
    if (++nc->gen == 0) {
        memset(nc->saved, 0, nc->nn * sizeof(*nc->saved));
        nc->gen = 1;
    }
    nc->nundo = 0;
    c->ns = nc->ns;
    c->ns_cache = nc;
    c->kept_buckets = &nc->bk;
    c->t = nc->t;
    return true;
}

void sched_node_save(struct ctx *c, int32_t i)
{
    struct tm_sched_node_cache *nc = c->ns_cache;

    if (!nc || nc->saved[i] == nc->gen)
        return;
    /* each node at most once a pass: nn entries suffice */
    nc->saved[i] = nc->gen;
    nc->undo_node[nc->nundo] = i;
    nc->undo[nc->nundo++] = nc->ns[i];
}

void sched_node_cache_return(struct ctx *c)
{
    struct tm_sched_node_cache *nc = c->ns_cache;

    for (size_t k = 0; k < nc->nundo; k++)
        nc->ns[nc->undo_node[k]] = nc->undo[k];
    nc->nundo = 0;
    sched_buckets_return(c);
    c->ns = NULL;
    c->ns_cache = NULL;
    c->kept_buckets = NULL;
}

void sched_node_cache_store(const struct ctx *c)
{
    const struct tm_sched_input *in = c->in;
    const struct tm_sched_footprint *fp = in->footprint;
    struct tm_sched_node_cache *nc = fp ? fp->cache : NULL;

    if (!nc || !fp->gpus_full || nc->nn != in->nnodes)
        return;
    memcpy(nc->ns, c->ns, nc->nn * sizeof(*nc->ns));
    sched_buckets_free(nc->bk); /* of the nodes as they were */
    nc->bk = NULL;
    for (size_t i = 0; i < nc->nn; i++)
        nc->sum[i] = fp->gpu_free_sum[i];
    nc->t = c->t;
    nc->nodes = in->nodes;
    nc->loaded = true;
    untouch_all(nc);
}
