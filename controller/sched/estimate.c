/*
 * controller/sched/estimate.c: the runtime predictor (see estimate.h).
 *
 * One open-addressing hash table maps a key string to a ring of recent
 * runtimes.  Keys are built as "level|team|name|class|gpus" with the parts a
 * level does not use left empty, so the four levels share one table.
 * Beside it, the fallback model (estimate_model.c) learns from the same
 * observations; tm_estimate_level() asks it at the first level it stands
 * in for.
 */
#include "controller/sched/estimate.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "controller/sched/estimate_model.h"
#include "core/err.h"

#define KEY_MAX 256

/* Most keys of level 1 (a job's own name) are seen once: a run ID or a
 * generated name is never submitted again.  So a key's first runtime
 * lives in the slot and its ring is allocated at the second: with the
 * ring inline, a trace of uniquely named jobs paid a whole ring per job,
 * and every probe of the table read a slot of that size. */
struct slot {
    char *key;
    int64_t *ring;  /* TM_ESTIMATE_WINDOW of them; NULL while n <= 1 */
    int64_t first;  /* the only runtime while ring is NULL */
    uint32_t n;     /* runtimes seen, capped at the window for reading */
    uint32_t next;  /* ring write position */
};

struct tm_estimator {
    struct slot *slots;
    size_t cap;     /* power of two */
    size_t used;
    struct tm_emodel model;  /* the fallback: fixed size */
    int fallback_from;       /* 0: no fallback */
};

static uint64_t fnv1a(const char *s)
{
    uint64_t h = 1469598103934665603ull;

    for (; *s; s++) {
        h ^= (unsigned char)*s;
        h *= 1099511628211ull;
    }
    return h;
}

int tm_estimator_new(struct tm_estimator **ret)
{
    struct tm_estimator *e = calloc(1, sizeof(*e));

    if (!e)
        return TM_ENOMEM;
    e->cap = 256;
    /* The model learns from the start but answers only when asked
     * (tm_estimator_set_fallback): on openb it does not make reservations
     * slip less, and it passed jobs over the starvation bound in a cell
     * where the keys alone passed none (bench/results/estimate-2026-12-02.md);
     * starvation comes first (docs/measuring.md). */
    e->fallback_from = 0;
    tm_emodel_init(&e->model);
    e->slots = calloc(e->cap, sizeof(*e->slots));
    if (!e->slots) {
        free(e);
        return TM_ENOMEM;
    }
    *ret = e;
    return 0;
}

void tm_estimator_free(struct tm_estimator *e)
{
    if (!e)
        return;
    for (size_t i = 0; i < e->cap; i++) {
        free(e->slots[i].key);
        free(e->slots[i].ring);
    }
    free(e->slots);
    free(e);
}

static struct slot *find(const struct tm_estimator *e, const char *key)
{
    size_t mask = e->cap - 1;

    for (size_t i = fnv1a(key) & mask;; i = (i + 1) & mask) {
        struct slot *s = &e->slots[i];
        if (!s->key || strcmp(s->key, key) == 0)
            return s;
    }
}

static int rehash(struct tm_estimator *e)
{
    struct tm_estimator n = {.cap = e->cap * 2};

    n.slots = calloc(n.cap, sizeof(*n.slots));
    if (!n.slots)
        return TM_ENOMEM;
    for (size_t i = 0; i < e->cap; i++)
        if (e->slots[i].key)
            *find(&n, e->slots[i].key) = e->slots[i];
    free(e->slots);
    e->slots = n.slots;
    e->cap = n.cap;
    return 0;
}

/* Level 1 is the most specific.  Returns false when the level needs a
 * part the key lacks. */
static bool make_key(const struct tm_estimate_key *k, int level, char *buf, size_t len)
{
    const char *team = k->team ? k->team : "";
    const char *name = k->name ? k->name : "";
    int n;

    switch (level) {
    case 1:
        /* No name, or an empty one: not a resubmission of anything. */
        if (!k->name || !k->name[0])
            return false;
        n = snprintf(buf, len, "1|%s|%s|%d|%d", team, name, (int)k->klass, (int)k->gpu_milli);
        break;
    case 2:
        if (!k->team)
            return false;
        n = snprintf(buf, len, "2|%s||%d|%d", team, (int)k->klass, (int)k->gpu_milli);
        break;
    case 3:
        n = snprintf(buf, len, "3|||%d|%d", (int)k->klass, (int)k->gpu_milli);
        break;
    default:
        n = snprintf(buf, len, "4|||%d|", (int)k->klass);
        break;
    }
    /* A key cut short would merge different jobs: skip the level. */
    return n > 0 && (size_t)n < len;
}

int tm_estimator_observe(struct tm_estimator *e, const struct tm_estimate_key *k, int64_t runtime_ms)
{
    char key[KEY_MAX];

    if (runtime_ms < 0)
        return 0;
    /* First the keys: on TM_ENOMEM the model has not moved either. */
    for (int level = 1; level <= 4; level++) {
        struct slot *s;
        if (!make_key(k, level, key, sizeof(key)))
            continue;
        if ((e->used + 1) * 2 > e->cap && rehash(e) < 0)
            return TM_ENOMEM;
        s = find(e, key);
        if (!s->key) {
            s->key = strdup(key);
            if (!s->key)
                return TM_ENOMEM;
            e->used++;
        }
        if (s->n == 0) {
            s->first = runtime_ms;
            s->n = 1;
            continue;
        }
        if (!s->ring) {
            s->ring = malloc(TM_ESTIMATE_WINDOW * sizeof(*s->ring));
            if (!s->ring)
                return TM_ENOMEM;
            s->ring[0] = s->first;
            s->next = 1;
        }
        s->ring[s->next] = runtime_ms;
        s->next = (s->next + 1) % TM_ESTIMATE_WINDOW;
        if (s->n < TM_ESTIMATE_WINDOW)
            s->n++;
    }
    tm_emodel_observe(&e->model, k, runtime_ms);
    return 0;
}

void tm_estimator_set_fallback(struct tm_estimator *e, int from_level)
{
    e->fallback_from = from_level >= 1 && from_level <= 4 ? from_level : 0;
}

int64_t tm_estimate_model(const struct tm_estimator *e, const struct tm_estimate_key *k)
{
    return tm_emodel_predict(&e->model, k);
}

/* The median of v[0..n), n at most the window: sorted in place by
 * insertion, inline (qsort()'s callback was a twentieth of a saturated
 * replay, which asks two estimates of every job at its arrival). */
static int64_t median(int64_t *v, uint32_t n)
{
    for (uint32_t i = 1; i < n; i++) {
        int64_t x = v[i];
        uint32_t y = i;
        while (y > 0 && v[y - 1] > x) {
            v[y] = v[y - 1];
            y--;
        }
        v[y] = x;
    }
    return v[n / 2];
}

int64_t tm_estimate(const struct tm_estimator *e, const struct tm_estimate_key *k)
{
    return tm_estimate_level(e, k, NULL);
}

/* The first answer from key `level` on, the model standing in at level
 * `from` (0: never). */
static int64_t answer(const struct tm_estimator *e, const struct tm_estimate_key *k, int from,
                      int *ret_level)
{
    char key[KEY_MAX];

    if (ret_level)
        *ret_level = 0;

    for (int level = 1; level <= 4; level++) {
        const struct slot *s;
        int64_t v[TM_ESTIMATE_WINDOW];
        if (level == from) {
            int64_t m = tm_emodel_predict(&e->model, k);
            if (m > 0) {
                if (ret_level)
                    *ret_level = TM_ESTIMATE_LEVEL_MODEL;
                return m;
            }
        }
        if (!make_key(k, level, key, sizeof(key)))
            continue;
        s = find(e, key);
        if (!s->key || s->n < TM_ESTIMATE_MIN_SAMPLES)
            continue;
        memcpy(v, s->ring ? s->ring : &s->first, s->n * sizeof(v[0]));
        if (ret_level)
            *ret_level = level;
        {
            int64_t m = median(v, s->n);
            return m > 0 ? m : 1;
        }
    }
    return 0;
}

int64_t tm_estimate_level(const struct tm_estimator *e, const struct tm_estimate_key *k, int *ret_level)
{
    return answer(e, k, e->fallback_from, ret_level);
}

int64_t tm_estimate_keys(const struct tm_estimator *e, const struct tm_estimate_key *k, int *ret_level)
{
    return answer(e, k, 0, ret_level);
}

int64_t tm_estimate_overrun(int64_t elapsed_ms)
{
    if (elapsed_ms < 500)
        return 1000;
    return elapsed_ms > INT64_MAX / 2 ? INT64_MAX / 2 : 2 * elapsed_ms;
}

int64_t tm_estimate_left(int64_t estimate_ms, int64_t elapsed_ms, bool known)
{
    int64_t left = estimate_ms - elapsed_ms;

    if (known && left > 0)
        return left < 1000 ? 1000 : left;
    return tm_estimate_remaining(estimate_ms, elapsed_ms);
}
