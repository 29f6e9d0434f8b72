/*
 * controller/sched/quota_model.c: the quota model built from the rows an
 * admin gave, every refusal naming the row and field.
 */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/err.h"
#include "controller/sched/quota_internal.h"

static int refuse(char *err, size_t errlen, const char *fmt, ...)
{
    va_list ap;

    if (err && errlen) {
        va_start(ap, fmt);
        vsnprintf(err, errlen, fmt, ap);
        va_end(ap);
    }
    return TM_EINVAL;
}

static bool blank(const char *s)
{
    return !s || !*s;
}

/* A count as given: NAN (unset) gives dflt; else whole and >= 0. */
static int count(double v, int64_t dflt, size_t row, const char *field, int64_t *out,
                 char *err, size_t errlen)
{
    if (isnan(v)) {
        *out = dflt;
        return 0;
    }
    if (!isfinite(v) || v < 0)
        return refuse(err, errlen, "quotas[%zu].%s: %g is negative or not a number of GPUs", row,
                      field, v);
    if (v != floor(v))
        return refuse(err, errlen, "quotas[%zu].%s: %g is not a whole number of GPUs", row, field, v);
    if (v > 1e15)
        return refuse(err, errlen, "quotas[%zu].%s: %g is out of range", row, field, v);
    *out = (int64_t)v;
    return 0;
}

void tm_quota_free(struct tm_quota *q)
{
    if (!q)
        return;
    for (size_t i = 0; q->names && i < q->nnodes; i++)
        free(q->names[i]);
    for (size_t f = 0; q->flavor_names && f < q->nflavors; f++)
        free(q->flavor_names[f]);
    free(q->names);
    free(q->parent);
    free(q->is_org);
    free(q->weight);
    free(q->own);
    free(q->subtree);
    free(q->borrow_limit);
    free(q->lend_limit);
    free(q->flavor_names);
    free(q->fleet);
    free(q->free_pool);
    free(q->overcommit);
    free(q->np_borrow);
    free(q->quota_total);
    free(q);
}

static int32_t find_name(char *const *names, size_t n, const char *name)
{
    for (size_t i = 0; i < n; i++)
        if (strcmp(names[i], name) == 0)
            return (int32_t)i;
    return -1;
}

/* The node named `name`, added when new (room for it is made by the caller). */
static int32_t node_of(struct tm_quota *q, const char *name)
{
    int32_t i = find_name(q->names, q->nnodes, name);

    if (i >= 0)
        return i;
    q->names[q->nnodes] = strdup(name);
    if (!q->names[q->nnodes])
        return -1;
    q->parent[q->nnodes] = -1;
    q->weight[q->nnodes] = NAN;
    return (int32_t)q->nnodes++;
}

static int alloc_model(struct tm_quota *q, size_t maxnodes, size_t nflavors)
{
    size_t cells = maxnodes * (nflavors ? nflavors : 1);

    q->names = calloc(maxnodes, sizeof(*q->names));
    q->parent = calloc(maxnodes, sizeof(*q->parent));
    q->is_org = calloc(maxnodes, sizeof(*q->is_org));
    q->weight = calloc(maxnodes, sizeof(*q->weight));
    q->quota_total = calloc(maxnodes, sizeof(*q->quota_total));
    q->own = calloc(cells, sizeof(*q->own));
    q->subtree = calloc(cells, sizeof(*q->subtree));
    q->borrow_limit = calloc(cells, sizeof(*q->borrow_limit));
    q->lend_limit = calloc(cells, sizeof(*q->lend_limit));
    q->flavor_names = calloc(nflavors + 1, sizeof(*q->flavor_names));
    q->fleet = calloc(nflavors + 1, sizeof(*q->fleet));
    q->free_pool = calloc(nflavors + 1, sizeof(*q->free_pool));
    q->overcommit = calloc(nflavors + 1, sizeof(*q->overcommit));
    q->np_borrow = calloc(nflavors + 1, sizeof(*q->np_borrow));
    if (!q->names || !q->parent || !q->is_org || !q->weight || !q->quota_total || !q->own ||
        !q->subtree || !q->borrow_limit || !q->lend_limit || !q->flavor_names || !q->fleet ||
        !q->free_pool || !q->overcommit || !q->np_borrow)
        return TM_ENOMEM;
    for (size_t c = 0; c < cells; c++) {
        q->borrow_limit[c] = TM_QUOTA_UNLIMITED;
        q->lend_limit[c] = TM_QUOTA_UNLIMITED;
    }
    return 0;
}

static int load_flavors(struct tm_quota *q, const struct tm_quota_flavor *flavors, size_t n,
                        char *err, size_t errlen)
{
    for (size_t f = 0; f < n; f++) {
        if (blank(flavors[f].name))
            return refuse(err, errlen, "flavors[%zu].name: missing", f);
        if (flavors[f].fleet_gpus < 0)
            return refuse(err, errlen, "flavors[%zu].fleet_gpus: %lld is negative", f,
                          (long long)flavors[f].fleet_gpus);
        if (find_name(q->flavor_names, q->nflavors, flavors[f].name) >= 0)
            return refuse(err, errlen, "flavors[%zu].name: \"%s\" given twice", f,
                          flavors[f].name);
        q->flavor_names[f] = strdup(flavors[f].name);
        if (!q->flavor_names[f])
            return TM_ENOMEM;
        q->fleet[f] = flavors[f].fleet_gpus;
        q->np_borrow[f] = flavors[f].nonpreemptible_borrow;
        q->nflavors++;
    }
    return 0;
}

/* The row's own fields, before any name is linked. */
static int check_row(const struct tm_quota *q, const struct tm_quota_row *r, size_t i,
                     char *err, size_t errlen)
{
    int64_t v;
    int rc;

    if (blank(r->team))
        return refuse(err, errlen, "quotas[%zu].team: missing", i);
    if (strcmp(r->team, TM_QUOTA_NO_TEAM) == 0 || (!blank(r->org) && strcmp(r->org, TM_QUOTA_NO_TEAM) == 0))
        return refuse(err, errlen, "quotas[%zu].team: \"%s\" is a reserved name", i, TM_QUOTA_NO_TEAM);
    if (blank(r->flavor))
        return refuse(err, errlen, "quotas[%zu].flavor: missing", i);
    if (find_name(q->flavor_names, q->nflavors, r->flavor) < 0)
        return refuse(err, errlen, "quotas[%zu].flavor: unrecognized GPU model or pool group \"%s\"",
                      i, r->flavor);
    if (isnan(r->gpus))
        return refuse(err, errlen, "quotas[%zu].gpus: missing", i);
    if ((rc = count(r->gpus, 0, i, "gpus", &v, err, errlen)) ||
        (rc = count(r->borrowing_limit, 0, i, "borrowing_limit", &v, err, errlen)) ||
        (rc = count(r->lending_limit, 0, i, "lending_limit", &v, err, errlen)))
        return rc;
    if (!isnan(r->weight) && !(r->weight > 0 && isfinite(r->weight)))
        return refuse(err, errlen, "quotas[%zu].weight: %g is not a positive number", i, r->weight);
    if (!blank(r->org) && strcmp(r->org, r->team) == 0)
        return refuse(err, errlen, "quotas[%zu].org: \"%s\" contains itself", i, r->org);
    return 0;
}

/* Link row i's team to its org, its weight and its numbers. */
static int link_row(struct tm_quota *q, const struct tm_quota_row *r, size_t i, int32_t *set_by,
                    char *err, size_t errlen)
{
    int32_t t = node_of(q, r->team), f = tm_quota_flavor(q, r->flavor);

    if (t < 0)
        return TM_ENOMEM;
    if (!blank(r->org)) {
        int32_t o = node_of(q, r->org);

        if (o < 0)
            return TM_ENOMEM;
        if (q->parent[t] >= 0 && q->parent[t] != o)
            return refuse(err, errlen, "quotas[%zu].org: \"%s\" is already in org \"%s\" (quotas[%d])",
                          i, r->team, q->names[q->parent[t]], set_by[t]);
        q->parent[t] = o;
        q->is_org[o] = true;
        set_by[t] = (int32_t)i;
    }
    if (!isnan(r->weight)) {
        if (!isnan(q->weight[t]) && q->weight[t] != r->weight)
            return refuse(err, errlen, "quotas[%zu].weight: %g differs from %g given earlier for \"%s\"",
                          i, r->weight, q->weight[t], r->team);
        q->weight[t] = r->weight;
    }
    size_t c = quota_at(q, t, f);
    if (q->own[c] < 0)
        return refuse(err, errlen, "quotas[%zu]: \"%s\" has a quota of %s twice", i, r->team,
                      r->flavor);
    count(r->gpus, 0, i, "gpus", &q->own[c], err, errlen);
    count(r->borrowing_limit, TM_QUOTA_UNLIMITED, i, "borrowing_limit", &q->borrow_limit[c], err, errlen);
    count(r->lending_limit, TM_QUOTA_UNLIMITED, i, "lending_limit", &q->lend_limit[c], err, errlen);
    /* Marks the cell as given (undone in tm_quota_build). */
    q->own[c] = -1 - q->own[c];
    return 0;
}

/* Two levels: an org belongs to nobody; an org in an org is a cycle when
 * the walk comes back, else a third level. */
static int check_levels(const struct tm_quota *q, const int32_t *set_by, char *err, size_t errlen)
{
    for (size_t n = 0; n < q->nnodes; n++) {
        int32_t p = q->parent[n];

        if (p < 0 || q->parent[p] < 0)
            continue;
        int32_t x = p;
        for (size_t step = 0; x >= 0 && step <= q->nnodes; step++) {
            if (x == (int32_t)n)
                return refuse(err, errlen, "quotas[%d].org: \"%s\" is in org \"%s\", which is in \"%s\": "
                              "a cycle of orgs", set_by[n], q->names[n], q->names[p], q->names[n]);
            x = q->parent[x];
        }
        return refuse(err, errlen, "quotas[%d].org: \"%s\" is in org \"%s\", itself in org \"%s\": "
                      "orgs nest two levels at most", set_by[n], q->names[n], q->names[p],
                      q->names[q->parent[p]]);
    }
    return 0;
}

static void sum_subtrees(struct tm_quota *q)
{
    for (size_t n = 0; n < q->nnodes; n++)
        for (size_t f = 0; f < q->nflavors; f++) {
            size_t c = n * q->nflavors + f;

            q->subtree[c] += q->own[c];
            if (q->parent[n] >= 0)
                q->subtree[quota_at(q, q->parent[n], (int32_t)f)] += q->own[c];
        }
    for (size_t f = 0; f < q->nflavors; f++) {
        int64_t sum = 0;

        for (size_t n = 0; n < q->nnodes; n++)
            if (q->parent[n] < 0)
                sum += q->subtree[n * q->nflavors + f];
        q->free_pool[f] = sum < q->fleet[f] ? q->fleet[f] - sum : 0;
        q->overcommit[f] = sum > q->fleet[f] ? sum - q->fleet[f] : 0;
    }
    for (size_t n = 0; n < q->nnodes; n++) {
        for (size_t f = 0; f < q->nflavors; f++)
            q->quota_total[n] += q->subtree[n * q->nflavors + f];
        if (q->parent[n] < 0)
            q->quota_sum += q->quota_total[n];
        if (isnan(q->weight[n]))
            q->weight[n] = 1.0;
    }
}

int tm_quota_build(const struct tm_quota_flavor *flavors, size_t nflavors,
                   const struct tm_quota_row *rows, size_t nrows, struct tm_quota **ret,
                   char *err, size_t errlen)
{
    struct tm_quota *q = calloc(1, sizeof(*q));
    int32_t *set_by = calloc(2 * nrows + 1, sizeof(*set_by));
    int rc = TM_ENOMEM;

    if (!q || !set_by || (rc = alloc_model(q, 2 * nrows + 1, nflavors)) ||
        (rc = load_flavors(q, flavors, nflavors, err, errlen)))
        goto fail;
    for (size_t i = 0; i < nrows; i++)
        if ((rc = check_row(q, &rows[i], i, err, errlen)) ||
            (rc = link_row(q, &rows[i], i, set_by, err, errlen)))
            goto fail;
    if ((rc = check_levels(q, set_by, err, errlen)))
        goto fail;
    for (size_t c = 0; c < q->nnodes * q->nflavors; c++)
        if (q->own[c] < 0)
            q->own[c] = -1 - q->own[c];
    rc = TM_ENOMEM;
    if (node_of(q, TM_QUOTA_NO_TEAM) < 0)
        goto fail;
    sum_subtrees(q);
    free(set_by);
    *ret = q;
    return 0;
fail:
    free(set_by);
    tm_quota_free(q);
    return rc;
}

size_t tm_quota_nnodes(const struct tm_quota *q)
{
    return q->nnodes;
}

size_t tm_quota_nflavors(const struct tm_quota *q)
{
    return q->nflavors;
}

const char *tm_quota_name(const struct tm_quota *q, int32_t node)
{
    return node >= 0 && (size_t)node < q->nnodes ? q->names[node] : "the free pool";
}

const char *tm_quota_flavor_name(const struct tm_quota *q, int32_t flavor)
{
    return flavor >= 0 && (size_t)flavor < q->nflavors ? q->flavor_names[flavor] : "unknown";
}

bool tm_quota_is_org(const struct tm_quota *q, int32_t node)
{
    return node >= 0 && (size_t)node < q->nnodes && q->is_org[node];
}

int32_t tm_quota_parent(const struct tm_quota *q, int32_t node)
{
    return node >= 0 && (size_t)node < q->nnodes ? q->parent[node] : -1;
}

int32_t tm_quota_team(const struct tm_quota *q, const char *name)
{
    int32_t i = name ? find_name(q->names, q->nnodes, name) : -1;

    if (i >= 0 && q->is_org[i])
        return -1;
    return i >= 0 ? i : (int32_t)q->nnodes - 1;
}

int32_t tm_quota_flavor(const struct tm_quota *q, const char *name)
{
    return name ? find_name(q->flavor_names, q->nflavors, name) : -1;
}

int64_t tm_quota_guaranteed(const struct tm_quota *q, int32_t node, int32_t flavor)
{
    return q->own[quota_at(q, node, flavor)];
}

int64_t tm_quota_subtree(const struct tm_quota *q, int32_t node, int32_t flavor)
{
    return q->subtree[quota_at(q, node, flavor)];
}

int64_t tm_quota_overcommit(const struct tm_quota *q, int32_t flavor)
{
    return q->overcommit[flavor];
}

int64_t tm_quota_overcommit_total(const struct tm_quota *q)
{
    int64_t s = 0;

    for (size_t f = 0; f < q->nflavors; f++)
        s += q->overcommit[f];
    return s;
}

size_t tm_quota_overcommit_say(const struct tm_quota *q, char *buf, size_t len)
{
    size_t at = 0;

    if (len)
        buf[0] = '\0';
    for (size_t f = 0; f < q->nflavors && len; f++) {
        if (q->overcommit[f] <= 0)
            continue;
        int n = snprintf(buf + at, len - at, "%s%s by %lld GPUs", at ? ", " : "quotas exceed the fleet: ",
                         q->flavor_names[f], (long long)q->overcommit[f]);
        if (n < 0 || (size_t)n >= len - at)
            return len - 1;
        at += (size_t)n;
    }
    return at;
}
