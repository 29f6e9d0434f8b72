/*
 * controller/sched/quota_mark.c: which running jobs are borrowed, the rule
 * the live pass and the replay share (quota.h, tm_quota_mark_borrowed()).
 * Nothing is remembered between passes, so it is worked out again from
 * what runs: per team and flavor, its jobs oldest first fill its own
 * quota, and those past it are borrowed (the newest work above a quota is
 * the work that was lent).
 */
#include "controller/sched/quota.h"

#include <stdlib.h>

#include "core/err.h"

struct run_key {
    int32_t team, flavor;
    int64_t started_ms, id;
    int32_t idx;
};

static int cmp_run_key(const void *a, const void *b)
{
    const struct run_key *x = a, *y = b;

    if (x->team != y->team)
        return x->team < y->team ? -1 : 1;
    if (x->flavor != y->flavor)
        return x->flavor < y->flavor ? -1 : 1;
    if (x->started_ms != y->started_ms)
        return x->started_ms < y->started_ms ? -1 : 1;
    return x->id < y->id ? -1 : x->id > y->id;
}

int tm_quota_mark_borrowed(const struct tm_quota *q, struct tm_quota_job *running, size_t n,
                           const int64_t *started_ms, const int64_t *ids)
{
    struct run_key *keys = malloc((n + 1) * sizeof(*keys));
    int64_t sum = 0;

    if (!keys)
        return TM_ENOMEM;
    for (size_t i = 0; i < n; i++)
        keys[i] = (struct run_key){.team = running[i].team, .flavor = running[i].flavor,
                                   .started_ms = started_ms[i], .id = ids[i], .idx = (int32_t)i};
    qsort(keys, n, sizeof(*keys), cmp_run_key);
    for (size_t i = 0; i < n; i++) {
        struct tm_quota_job *r = &running[keys[i].idx];
        if (i == 0 || keys[i].team != keys[i - 1].team || keys[i].flavor != keys[i - 1].flavor)
            sum = 0;
        sum += r->gpus;
        r->borrowed = sum > tm_quota_guaranteed(q, r->team, r->flavor);
    }
    free(keys);
    return 0;
}
