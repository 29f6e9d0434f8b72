/*
 * controller/replay/replay_ranks.c: what the incremental passes keep
 * beside the engine's queue (replay_engine.h): lists of jobs by arrival
 * rank, the index by rank and estimate per request group, and the
 * buffer of jobs a pass hands tm_sched_run().
 */
#include "controller/replay/replay_engine.h"

#include <stdlib.h>
#include <string.h>

#include "core/err.h"

/* Rank r into list g, in rank order (arrivals come in rank order: the
 * walk back is empty unless a job is requeued). */
void replay_rl_insert(struct ranklist *l, int32_t g, int32_t r)
{
    int32_t a = l->tail[g];

    while (a >= 0 && a > r)
        a = l->prev[a];
    l->prev[r] = a;
    l->next[r] = a >= 0 ? l->next[a] : l->head[g];
    if (a >= 0)
        l->next[a] = r;
    else
        l->head[g] = r;
    if (l->next[r] >= 0)
        l->prev[l->next[r]] = r;
    else
        l->tail[g] = r;
}

void replay_rl_remove(struct ranklist *l, int32_t g, int32_t r)
{
    if (l->prev[r] >= 0)
        l->next[l->prev[r]] = l->next[r];
    else
        l->head[g] = l->next[r];
    if (l->next[r] >= 0)
        l->prev[l->next[r]] = l->prev[r];
    else
        l->tail[g] = l->prev[r];
}

int replay_rl_init(struct ranklist *l, size_t n, size_t ngroups)
{
    l->next = malloc((n + 1) * sizeof(*l->next));
    l->prev = malloc((n + 1) * sizeof(*l->prev));
    l->head = malloc((ngroups + 1) * sizeof(*l->head));
    l->tail = malloc((ngroups + 1) * sizeof(*l->tail));
    if (!l->next || !l->prev || !l->head || !l->tail)
        return TM_ENOMEM;
    memset(l->head, 0xff, (ngroups + 1) * sizeof(*l->head));
    memset(l->tail, 0xff, (ngroups + 1) * sizeof(*l->tail));
    return 0;
}

void replay_rl_release(struct ranklist *l)
{
    free(l->next);
    free(l->prev);
    free(l->head);
    free(l->tail);
}


int replay_input_room(struct replay_input *in, size_t n)
{
    if (n == in->cap) {
        size_t cap = in->cap ? 2 * in->cap : 256;
        struct tm_sched_job *q = realloc(in->jobs, cap * sizeof(*q));
        int32_t *qp;
        if (!q)
            return TM_ENOMEM;
        in->jobs = q;
        qp = realloc(in->pos, cap * sizeof(*qp));
        if (!qp)
            return TM_ENOMEM;
        in->pos = qp;
        in->cap = cap;
    }
    return 0;
}

void replay_input_release(struct replay_input *in)
{
    free(in->jobs);
    free(in->pos);
    *in = (struct replay_input){0};
}

int replay_input_add(const struct replay_engine *s, struct replay_input *in, size_t *n, int32_t j)
{
    int32_t qpos = s->jobs[j].qpos;

    if (replay_input_room(in, *n) < 0)
        return TM_ENOMEM;
    in->jobs[*n] = s->q[qpos];
    in->pos[(*n)++] = qpos;
    return 0;
}

int replay_rank_index(const struct replay_engine *s, int32_t *rank, struct tm_seqindex *qgrp)
{
    int32_t *g = calloc(s->njobs + 1, sizeof(*g));
    int r;

    if (!g)
        return TM_ENOMEM;
    for (size_t k = 0; k < s->njobs; k++) {
        const struct rjob *rj = &s->jobs[s->arr[k]];
        rank[s->arr[k]] = (int32_t)k;
        g[k] = rj->shape * 2 + (rj->tj->preemptible ? 1 : 0);
    }
    r = tm_seqindex_init(qgrp, g, s->njobs, s->nshapes * 2);
    free(g);
    return r;
}
