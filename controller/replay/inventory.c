/*
 * controller/replay/inventory.c: the replays' node inventory: a trace's
 * node list sampled to a GPU count keeping its GPU-model mix (see
 * tm_replay_sample_nodes in replay.h).  Seeded, so a replay's inventory is
 * the same on every run.
 */
#include "controller/replay/replay.h"

#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>

#include "core/err.h"

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

int tm_replay_sample_nodes(const struct tm_trace *t, int32_t gpus, uint64_t seed,
                           struct tm_trace_node **ret, size_t *ret_n)
{
    int64_t per_model[TM_TRACE_MODELS_MAX] = {0}, target[TM_TRACE_MODELS_MAX] = {0};
    int64_t have[TM_TRACE_MODELS_MAX] = {0}, total = 0, sum = 0;
    uint64_t *order = NULL; /* (random key << 20 | node index) */
    bool *taken = NULL;
    struct tm_trace_node *out = NULL;
    size_t n = 0;
    uint64_t st = seed * 0x9e3779b97f4a7c15ull + 7;
    int r = TM_ENOMEM;

    if (gpus <= 0 || t->nnodes == 0 || t->nnodes >= (1u << 20))
        return TM_EINVAL;
    for (size_t i = 0; i < t->nnodes; i++)
        if (t->nodes[i].gpus > 0 && t->nodes[i].model >= 0) {
            per_model[t->nodes[i].model] += t->nodes[i].gpus;
            total += t->nodes[i].gpus;
        }
    if (total == 0 || gpus > total)
        return TM_EINVAL;
    order = malloc(t->nnodes * sizeof(*order));
    taken = calloc(t->nnodes, sizeof(*taken));
    out = calloc(t->nnodes, sizeof(*out));
    if (!order || !taken || !out)
        goto out;
    /* Largest remainders: each model's share of the GPUs, in whole GPUs. */
    {
        int64_t assigned = 0;
        double rem[TM_TRACE_MODELS_MAX];
        for (int m = 0; m < t->nmodels; m++) {
            double exact = (double)gpus * (double)per_model[m] / (double)total;
            target[m] = (int64_t)exact;
            rem[m] = exact - (double)target[m];
            assigned += target[m];
        }
        while (assigned < gpus) {
            int best = -1;
            for (int m = 0; m < t->nmodels; m++)
                if (per_model[m] > target[m] && (best < 0 || rem[m] > rem[best]))
                    best = m;
            if (best < 0)
                break;
            target[best]++;
            rem[best] = -1;
            assigned++;
        }
    }
    /* A seeded random order of the nodes, larger nodes first within it so a
     * model's target is met with its typical node size. */
    for (size_t i = 0; i < t->nnodes; i++) {
        uint64_t z = st += 0x9e3779b97f4a7c15ull;
        z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
        z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
        z ^= z >> 31;
        order[i] = ((uint64_t)(16 - t->nodes[i].gpus) << 59) | ((z >> 25) << 20) | i;
    }
    qsort(order, t->nnodes, sizeof(*order), cmp_u64);
    /* Pass 1: fill each model up to its target without passing it. */
    for (size_t k = 0; k < t->nnodes; k++) {
        size_t i = order[k] & 0xfffff;
        const struct tm_trace_node *nd = &t->nodes[i];
        if (nd->gpus <= 0 || nd->model < 0)
            continue;
        if (have[nd->model] + nd->gpus <= target[nd->model]) {
            have[nd->model] += nd->gpus;
            sum += nd->gpus;
            taken[i] = true;
        }
    }
    /* Pass 2: fill the rest with what fits, models still absent first,
     * then the model furthest below its target. */
    for (int pass = 0; pass < 2 && sum < gpus; pass++) {
        bool progress = true;
        while (sum < gpus && progress) {
            size_t pick = (size_t)-1;
            double pick_gap = -1e18;
            progress = false;
            for (size_t k = 0; k < t->nnodes; k++) {
                size_t i = order[k] & 0xfffff;
                const struct tm_trace_node *nd = &t->nodes[i];
                double gap;
                if (taken[i] || nd->gpus <= 0 || nd->model < 0 || sum + nd->gpus > gpus)
                    continue;
                if (pass == 0 && have[nd->model] > 0)
                    continue;
                gap = (double)(target[nd->model] - have[nd->model]);
                if (gap > pick_gap) {
                    pick_gap = gap;
                    pick = i;
                }
            }
            if (pick != (size_t)-1) {
                taken[pick] = true;
                have[t->nodes[pick].model] += t->nodes[pick].gpus;
                sum += t->nodes[pick].gpus;
                progress = true;
            }
        }
    }
    for (size_t i = 0; i < t->nnodes; i++)
        if (taken[i])
            out[n++] = t->nodes[i];
    *ret = out;
    *ret_n = n;
    out = NULL;
    r = 0;
out:
    free(order);
    free(taken);
    free(out);
    return r;
}
