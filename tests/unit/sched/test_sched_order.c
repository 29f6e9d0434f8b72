/*
 * tests/unit/sched/test_sched_order.c: sched_order() (order.c), the sort
 * every pass runs over its queue, against qsort() with the same total
 * order, on random keys with many ties, already sorted, reversed and
 * nearly sorted input of every size up to a few thousand.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "controller/sched/scheduler.h"
#include "controller/sched/internal.h"

/* The keys the fake policy hands out, by job index. */
static struct okey *want_keys;

static void fake_order(const struct ctx *c, int32_t j, struct okey *k)
{
    (void)c;
    memcpy(k->k, want_keys[j].k, sizeof(k->k));
}

static const struct sched_policy fake_policy = {.order = fake_order};

static int ref_cmp(const void *a, const void *b)
{
    const struct okey *x = a, *y = b;

    for (int i = 0; i < 5; i++)
        if (x->k[i] != y->k[i])
            return x->k[i] < y->k[i] ? -1 : 1;
    return x->idx < y->idx ? -1 : x->idx > y->idx;
}

static uint64_t rnd(uint64_t *x)
{
    *x ^= *x << 13;
    *x ^= *x >> 7;
    *x ^= *x << 17;
    return *x;
}

/* Input shapes: 0 random with few distinct values (ties down to idx),
 * 1 sorted, 2 reversed, 3 sorted then a few swapped. */
static void fill(struct okey *v, size_t n, int shape, uint64_t *x)
{
    for (size_t j = 0; j < n; j++) {
        memset(&v[j], 0, sizeof(v[j]));
        v[j].idx = (int32_t)j;
        for (int i = 0; i < 5; i++)
            v[j].k[i] = (int64_t)(rnd(x) % (i == 2 ? 50 : 3)) - 1;
    }
    if (shape == 0)
        return;
    qsort(v, n, sizeof(*v), ref_cmp);
    for (size_t j = 0; j < n; j++)
        v[j].idx = (int32_t)j;
    if (shape == 2)
        for (size_t j = 0; j < n / 2; j++) {
            struct okey t = v[j];
            v[j] = v[n - 1 - j];
            v[n - 1 - j] = t;
        }
    if (shape == 3)
        for (size_t s = 0; n > 1 && s < n / 20 + 1; s++) {
            size_t a = rnd(x) % n, b = rnd(x) % n;
            struct okey t = v[a];
            v[a] = v[b];
            v[b] = t;
        }
    for (size_t j = 0; j < n; j++)
        v[j].idx = (int32_t)j;
}

static void test_order_matches_qsort(void **state)
{
    uint64_t x = 88172645463325252ull;
    size_t sizes[] = {0, 1, 2, 3, 15, 16, 17, 31, 32, 33, 100, 257, 1000, 4097};

    (void)state;
    for (size_t si = 0; si < sizeof(sizes) / sizeof(sizes[0]); si++) {
        size_t n = sizes[si];
        for (int shape = 0; shape < 4; shape++) {
            struct tm_sched_input in = {.njobs = n};
            struct ctx c = {.in = &in, .pol = &fake_policy};
            struct okey *got = calloc(n + 1, sizeof(*got));
            struct okey *ref = calloc(n + 1, sizeof(*ref));
            assert_non_null(got);
            assert_non_null(ref);
            want_keys = calloc(n + 1, sizeof(*want_keys));
            assert_non_null(want_keys);
            fill(want_keys, n, shape, &x);
            memcpy(ref, want_keys, n * sizeof(*ref));
            qsort(ref, n, sizeof(*ref), ref_cmp);
            sched_order(&c, got);
            for (size_t j = 0; j < n; j++) {
                assert_int_equal(got[j].idx, ref[j].idx);
                assert_memory_equal(got[j].k, ref[j].k, sizeof(got[j].k));
            }
            free(want_keys);
            free(got);
            free(ref);
        }
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_order_matches_qsort),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
