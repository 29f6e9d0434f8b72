/*
 * tests/unit/sched/test_estimate_model.c: the runtime predictor's fallback
 * model (controller/sched/estimate_model.h) and where the predictor uses it.
 * Known answers from synthetic data with a clear dependence on GPU count.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "controller/sched/estimate.h"
#include "controller/sched/estimate_model.h"

/* A fixed LCG: the same synthetic history on every machine. */
static uint32_t lcg(uint32_t *s)
{
    *s = *s * 1664525u + 1013904223u;
    return *s >> 8;
}

static double unit(uint32_t *s)
{
    return (double)(lcg(s) & 0xffffff) / (double)0x1000000;
}

static const char *const TEAMS[] = {"vision", "nlp", "speech", "ads", "infra"};
static const int32_t GPUS[] = {1, 2, 4, 8};

/* Runtime = 600 s x GPUs x e^noise, noise uniform in [-0.4, 0.4]: the
 * class, CPU, memory and team carry no information. */
static void synth(uint32_t *seed, struct tm_estimate_key *k, int64_t *runtime_ms)
{
    int32_t g = GPUS[lcg(seed) % 4];

    *k = (struct tm_estimate_key){.team = TEAMS[lcg(seed) % 5],
                                  .klass = (enum tm_job_class)(lcg(seed) % TM_CLASS_MAX),
                                  .gpu_milli = g * 1000,
                                  .cpu_milli = 1000 * (1 + (int64_t)(lcg(seed) % 32)),
                                  .memory_mib = 1024 * (1 + (int64_t)(lcg(seed) % 64))};
    *runtime_ms = (int64_t)(600000.0 * g * exp(0.8 * unit(seed) - 0.4));
}

static void train(struct tm_emodel *m, uint32_t seed, int n)
{
    for (int i = 0; i < n; i++) {
        struct tm_estimate_key k;
        int64_t rt;
        synth(&seed, &k, &rt);
        tm_emodel_observe(m, &k, rt);
    }
}

/* The model learns runtime ~ GPUs from 3000 jobs: for any class, team, CPU
 * and memory, within 25% of 600 s x GPUs. */
static void test_learns_gpu_dependence(void **state)
{
    struct tm_emodel m;
    uint32_t probe = 99;

    (void)state;
    tm_emodel_init(&m);
    train(&m, 1, 3000);
    for (int i = 0; i < 200; i++) {
        struct tm_estimate_key k;
        int64_t rt, want, got;
        synth(&probe, &k, &rt);
        want = 600000 * (int64_t)(k.gpu_milli / 1000);
        got = tm_emodel_predict(&m, &k);
        if (fabs(log((double)got / (double)want)) > log(1.25))
            fail_msg("gpus %d class %d team %s: predicted %lld ms, want about %lld", k.gpu_milli / 1000,
                     (int)k.klass, k.team, (long long)got, (long long)want);
    }
    {
        struct tm_estimate_key one = {.klass = TM_CLASS_TRAIN, .gpu_milli = 1000, .cpu_milli = 8000,
                                      .memory_mib = 32768, .team = "nlp"};
        struct tm_estimate_key eight = one;
        double ratio;
        eight.gpu_milli = 8000;
        ratio = (double)tm_emodel_predict(&m, &eight) / (double)tm_emodel_predict(&m, &one);
        if (ratio < 6.0 || ratio > 10.5)
            fail_msg("8 GPUs / 1 GPU = %.2f, want about 8", ratio);
    }
}

/* Pinball loss at tau = 0.5: the median of a skewed sample, not its mean.
 * Runtimes log-uniform over [100 s, 10,000 s]: median 1,000 s, mean 2,150 s. */
static void test_median(void **state)
{
    struct tm_emodel m;
    struct tm_estimate_key k = {.klass = TM_CLASS_BATCH, .gpu_milli = 1000};
    uint32_t seed = 7;
    int64_t got;

    (void)state;
    tm_emodel_init(&m);
    for (int i = 0; i < 5000; i++)
        tm_emodel_observe(&m, &k, (int64_t)(1000.0 * pow(10.0, 2.0 + 2.0 * unit(&seed))));
    got = tm_emodel_predict(&m, &k);
    if (got < 850000 || got > 1180000)
        fail_msg("predicted %lld ms, want the median, about 1,000,000", (long long)got);
}

/* Nothing before TM_EMODEL_MIN_SAMPLES jobs. */
static void test_min_samples(void **state)
{
    struct tm_emodel m;
    struct tm_estimate_key k = {.klass = TM_CLASS_TRAIN, .gpu_milli = 1000};

    (void)state;
    tm_emodel_init(&m);
    assert_int_equal(tm_emodel_predict(&m, &k), 0);
    for (int i = 0; i < TM_EMODEL_MIN_SAMPLES - 1; i++)
        tm_emodel_observe(&m, &k, 60000);
    assert_int_equal(tm_emodel_predict(&m, &k), 0);
    tm_emodel_observe(&m, &k, -5); /* ignored */
    assert_int_equal(tm_emodel_predict(&m, &k), 0);
    tm_emodel_observe(&m, &k, 60000);
    assert_int_equal(tm_emodel_predict(&m, &k), 60000); /* the first runtime, never moved */
}

/* The predictor asks the model only where the keys have nothing close. */
static void test_fallback_only_when_keys_empty(void **state)
{
    struct tm_estimator *e = NULL;
    /* EVAL jobs seen only on 1 GPU; 8-GPU EVAL work is new to the keys. */
    struct tm_estimate_key eval1 = {.klass = TM_CLASS_EVAL, .gpu_milli = 1000, .team = "vision"};
    struct tm_estimate_key eval8 = {.klass = TM_CLASS_EVAL, .gpu_milli = 8000, .team = "newteam"};
    struct tm_estimate_key train4 = {.klass = TM_CLASS_TRAIN, .gpu_milli = 4000, .team = "vision"};
    struct tm_estimate_key named = {.klass = TM_CLASS_TRAIN, .gpu_milli = 8000, .team = "vision",
                                    .name = "resnet"};
    int lvl = -1;
    int64_t got;

    (void)state;
    assert_int_equal(tm_estimator_new(&e), 0);
    /* Off by default: the keys alone answer, however much the model saw. */
    {
        struct tm_estimator *off;

        assert_int_equal(tm_estimator_new(&off), 0);
        for (int i = 0; i < 64; i++)
            assert_int_equal(tm_estimator_observe(off, &eval1, 300000), 0);
        assert_int_equal(tm_estimate_level(off, &eval8, &lvl), 300000);
        assert_int_equal(lvl, 4);
        tm_estimator_free(off);
    }
    tm_estimator_set_fallback(e, TM_ESTIMATE_FALLBACK_FROM);
    /* Before the model has seen enough, the keys answer as before. */
    for (int i = 0; i < 3; i++)
        assert_int_equal(tm_estimator_observe(e, &eval1, 300000), 0);
    assert_int_equal(tm_estimate_level(e, &eval8, &lvl), 300000);
    assert_int_equal(lvl, 4);
    assert_int_equal(tm_estimate_model(e, &eval8), 0);
    /* TRAIN work: runtime 600 s x GPUs. */
    for (int i = 0; i < 400; i++) {
        struct tm_estimate_key k = {.klass = TM_CLASS_TRAIN, .gpu_milli = GPUS[i % 4] * 1000,
                                    .team = TEAMS[i % 5]};
        assert_int_equal(tm_estimator_observe(e, &k, 600000 * GPUS[i % 4]), 0);
    }
    for (int i = 0; i < 5; i++) {
        assert_int_equal(tm_estimator_observe(e, &eval1, 300000), 0);
        assert_int_equal(tm_estimator_observe(e, &named, 1234000), 0);
    }
    /* The keys answer: the job's own runs, then its team's of that shape. */
    assert_int_equal(tm_estimate_level(e, &named, &lvl), 1234000);
    assert_int_equal(lvl, 1);
    assert_int_equal(tm_estimate_level(e, &train4, &lvl), 2400000);
    assert_int_equal(lvl, 2);
    assert_int_equal(tm_estimate_level(e, &eval1, &lvl), 300000);
    assert_int_equal(lvl, 2);
    /* A new team's 4-GPU TRAIN job: anyone's work of that shape is close
     * enough, the model is not asked. */
    {
        struct tm_estimate_key stranger = train4;
        stranger.team = "newteam";
        assert_int_equal(tm_estimate_level(e, &stranger, &lvl), 2400000);
        assert_int_equal(lvl, 3);
    }
    /* Nothing close for 8-GPU EVAL work of a new team: the model answers,
     * with the EVAL level (300 s on 1 GPU) times the 8-GPU factor it
     * learned from TRAIN work, about 2,400 s, where the class alone would
     * say 300 s. */
    got = tm_estimate_level(e, &eval8, &lvl);
    assert_int_equal(lvl, TM_ESTIMATE_LEVEL_MODEL);
    assert_int_equal(got, tm_estimate_model(e, &eval8));
    if (got < 1200000 || got > 4800000)
        fail_msg("8-GPU EVAL: model says %lld ms, want about 2,400,000", (long long)got);
    /* The keys alone, for measuring, and the older predictor. */
    assert_int_equal(tm_estimate_keys(e, &eval8, &lvl), 300000);
    assert_int_equal(lvl, 4);
    tm_estimator_set_fallback(e, 0);
    assert_int_equal(tm_estimate_level(e, &eval8, &lvl), 300000);
    assert_int_equal(lvl, 4);
    /* Standing in for (class, GPUs) too: nothing there either for 8-GPU
     * EVAL work, the same answer. */
    tm_estimator_set_fallback(e, 3);
    assert_int_equal(tm_estimate_level(e, &eval8, &lvl), got);
    assert_int_equal(lvl, TM_ESTIMATE_LEVEL_MODEL);
    tm_estimator_free(e);
}

/* Bounded memory: a fixed struct whatever the history; a hundred thousand
 * distinct teams and absurd requests neither grow it nor write past it,
 * and every answer stays between 1 s and a year. */
static void test_memory_bounded(void **state)
{
    struct {
        uint8_t before[64];
        struct tm_emodel m;
        uint8_t after[64];
    } box;
    uint32_t seed = 3;

    (void)state;
    assert_true(sizeof(struct tm_emodel) <= 1024);
    memset(&box, 0xa5, sizeof(box));
    tm_emodel_init(&box.m);
    for (int i = 0; i < 100000; i++) {
        char team[32];
        struct tm_estimate_key k = {.team = team,
                                    .klass = (enum tm_job_class)(lcg(&seed) % (TM_CLASS_MAX + 3)),
                                    .gpu_milli = (int32_t)(lcg(&seed) % 1000000) - 1000,
                                    .cpu_milli = (int64_t)lcg(&seed) * 1000000 - 5,
                                    .memory_mib = (int64_t)lcg(&seed) << 20};
        int64_t p;
        snprintf(team, sizeof(team), "team-%d", i);
        tm_emodel_observe(&box.m, &k, i % 7 == 0 ? INT64_MAX / 2 : (int64_t)(lcg(&seed) % 100));
        p = tm_emodel_predict(&box.m, &k);
        if (i >= TM_EMODEL_MIN_SAMPLES && (p < 1000 || p > 366LL * 86400 * 1000))
            fail_msg("observation %d: predicted %lld ms", i, (long long)p);
    }
    for (size_t i = 0; i < sizeof(box.before); i++) {
        assert_int_equal(box.before[i], 0xa5);
        assert_int_equal(box.after[i], 0xa5);
    }
}

/* Deterministic: the same history gives the same model, bit for bit. */
static void test_deterministic(void **state)
{
    struct tm_emodel a, b;

    (void)state;
    tm_emodel_init(&a);
    tm_emodel_init(&b);
    train(&a, 42, 2000);
    train(&b, 42, 2000);
    assert_memory_equal(&a, &b, sizeof(a));
    train(&b, 43, 1);
    assert_memory_not_equal(&a, &b, sizeof(a));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_learns_gpu_dependence),
        cmocka_unit_test(test_median),
        cmocka_unit_test(test_min_samples),
        cmocka_unit_test(test_fallback_only_when_keys_empty),
        cmocka_unit_test(test_memory_bounded),
        cmocka_unit_test(test_deterministic),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
