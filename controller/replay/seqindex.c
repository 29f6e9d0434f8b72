/*
 * controller/replay/seqindex.c: per-group min trees over a fixed order
 * (see seqindex.h).  Each group's members are its positions in ascending
 * order; a bottom-up tree of 2 x tsize values over them (leaves past the
 * last member hold TM_SEQ_ABSENT) answers "next at most t" by climbing to
 * the first subtree on the right whose minimum qualifies, then descending.
 */
#include "controller/replay/seqindex.h"

#include <stdlib.h>
#include <string.h>

#include "core/err.h"

void tm_seqindex_release(struct tm_seqindex *x)
{
    free(x->group);
    free(x->slot);
    free(x->moff);
    free(x->members);
    free(x->toff);
    free(x->tsize);
    free(x->tree);
    memset(x, 0, sizeof(*x));
}

int tm_seqindex_init(struct tm_seqindex *x, const int32_t *group, size_t n, size_t ngroups)
{
    size_t total = 0;

    memset(x, 0, sizeof(*x));
    x->n = n;
    x->ngroups = ngroups;
    x->group = malloc((n + 1) * sizeof(*x->group));
    x->slot = malloc((n + 1) * sizeof(*x->slot));
    x->moff = calloc(ngroups + 1, sizeof(*x->moff));
    x->members = malloc((n + 1) * sizeof(*x->members));
    x->toff = malloc((ngroups + 1) * sizeof(*x->toff));
    x->tsize = malloc((ngroups + 1) * sizeof(*x->tsize));
    if (!x->group || !x->slot || !x->moff || !x->members || !x->toff || !x->tsize)
        goto fail;
    memcpy(x->group, group, n * sizeof(*group));
    for (size_t p = 0; p < n; p++)
        x->moff[group[p] + 1]++;
    for (size_t g = 0; g < ngroups; g++)
        x->moff[g + 1] += x->moff[g];
    {
        int32_t *fill = malloc((ngroups + 1) * sizeof(*fill));
        if (!fill)
            goto fail;
        memcpy(fill, x->moff, ngroups * sizeof(*fill));
        for (size_t p = 0; p < n; p++) {
            int32_t g = group[p];
            x->slot[p] = fill[g] - x->moff[g];
            x->members[fill[g]++] = (int32_t)p;
        }
        free(fill);
    }
    for (size_t g = 0; g < ngroups; g++) {
        int32_t cnt = x->moff[g + 1] - x->moff[g], sz = 1;
        while (sz < cnt)
            sz *= 2;
        x->tsize[g] = sz;
        x->toff[g] = total;
        total += 2 * (size_t)sz;
    }
    x->tree = malloc((total + 1) * sizeof(*x->tree));
    if (!x->tree)
        goto fail;
    for (size_t k = 0; k < total; k++)
        x->tree[k] = TM_SEQ_ABSENT;
    return 0;
fail:
    tm_seqindex_release(x);
    return TM_ENOMEM;
}

void tm_seqindex_set(struct tm_seqindex *x, size_t pos, int64_t v)
{
    int32_t g = x->group[pos];
    int64_t *t = x->tree + x->toff[g];
    size_t i = (size_t)x->tsize[g] + (size_t)x->slot[pos];

    t[i] = v;
    for (i /= 2; i >= 1; i /= 2) {
        int64_t m = t[2 * i] < t[2 * i + 1] ? t[2 * i] : t[2 * i + 1];
        if (t[i] == m)
            break; /* nothing above changes */
        t[i] = m;
    }
}

int32_t tm_seqindex_slot_at(const struct tm_seqindex *x, size_t g, size_t from)
{
    const int32_t *m = x->members + x->moff[g];
    int32_t lo = 0, hi = x->moff[g + 1] - x->moff[g];

    while (lo < hi) {
        int32_t mid = lo + (hi - lo) / 2;
        if ((size_t)m[mid] < from)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

int32_t tm_seqindex_next_slot(const struct tm_seqindex *x, size_t g, int32_t slot, int64_t t)
{
    int32_t cnt = x->moff[g + 1] - x->moff[g];
    const int64_t *tr = x->tree + x->toff[g];
    size_t sz = (size_t)x->tsize[g], i;

    if (slot >= cnt)
        return -1;
    i = sz + (size_t)slot;
    if (tr[i] > t) {
        /* Up until a left child whose right sibling qualifies. */
        for (;;) {
            while (i & 1)
                i /= 2;
            if (i == 0)
                return -1;
            i++;
            if (tr[i] <= t)
                break;
        }
        while (i < sz)
            i = tr[2 * i] <= t ? 2 * i : 2 * i + 1;
    }
    return (int32_t)(i - sz);
}

int64_t tm_seqindex_next(const struct tm_seqindex *x, size_t g, size_t from, int64_t t)
{
    int32_t k = tm_seqindex_next_slot(x, g, tm_seqindex_slot_at(x, g, from), t);

    return k < 0 ? -1 : tm_seqindex_pos(x, g, k);
}
