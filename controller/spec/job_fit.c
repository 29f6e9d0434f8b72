/*
 * controller/spec/job_fit.c: see job_fit.h.
 */
#include "controller/spec/job_fit.h"

#include <stdio.h>
#include <string.h>

#include "core/err.h"
#include "core/model.h"

/* The first way pool misses spec: 0 when it fits, else the field and
 * reason in *field / why. */
static int pool_misses(const struct tm_config *cfg, const struct tm_config_pool *pool,
                       const struct tm_job_spec *spec, const char **field, char *why, size_t size)
{
    const struct tm_config_provider *prov = tm_config_provider_find(cfg, pool->provider);
    int64_t cpu = 0, mem = 0;
    bool described = false;

    if (!tm_gpu_model_accepts(spec->gpu_model, pool->gpu_model)) {
        *field = "gpu_model";
        snprintf(why, size, "pool %s has %s GPUs", pool->name, pool->gpu_model);
        return 1;
    }
    if (spec->gpus > pool->gpus_per_node) {
        *field = "gpus";
        snprintf(why, size, "pool %s has %d GPUs per node", pool->name, pool->gpus_per_node);
        return 1;
    }
    if (pool->max_nodes > 0 && spec->nodes > pool->max_nodes) {
        *field = "nodes";
        snprintf(why, size, "pool %s has at most %d nodes", pool->name, pool->max_nodes);
        return 1;
    }
    for (size_t i = 0; prov && i < pool->ninstance_types; i++) {
        const struct tm_config_instance_type *t = tm_config_type_find(prov, pool->instance_types[i]);
        if (!t)
            continue;
        described = true;
        cpu = t->cpu_milli > cpu ? t->cpu_milli : cpu;
        mem = t->memory_mib > mem ? t->memory_mib : mem;
    }
    if (described && spec->cpu_milli > cpu) {
        *field = "cpu_milli";
        snprintf(why, size, "pool %s's largest node has %lld milli-CPU", pool->name, (long long)cpu);
        return 1;
    }
    if (described && spec->memory_mib > mem) {
        *field = "memory_mib";
        snprintf(why, size, "pool %s's largest node has %lld MiB", pool->name, (long long)mem);
        return 1;
    }
    return 0;
}

int tm_job_fit_check(const struct tm_config *cfg, const struct tm_job_spec *spec,
                     struct tm_spec_error *err)
{
    const char *field = NULL;
    char why[128] = "";
    bool named = false;

    if (!cfg || cfg->npools == 0)
        return 0;
    for (size_t i = 0; i < cfg->npools; i++) {
        const struct tm_config_pool *pool = &cfg->pools[i];
        const char *f = NULL;
        char w[128];
        if (spec->pool && strcmp(spec->pool, pool->name) != 0)
            continue;
        named = true;
        if (pool_misses(cfg, pool, spec, &f, w, sizeof(w)) == 0)
            return 0;
        if (!field) {
            field = f;
            memcpy(why, w, sizeof(why));
        }
    }
    if (!named)
        return tm_spec_fail(err, "pool", "no pool is named %s", spec->pool);
    return tm_spec_fail(err, field, "no configured pool can ever hold this job: %s", why);
}
