/*
 * tests/lib/snap_fixture.h: the configuration and snapshot that the pure
 * reconcile pass (and the alert evaluation, which reads the same snapshot)
 * is tested and benchmarked with.  Header only; include it from targets that
 * link tarmac_lib.
 *
 * The YAML pieces are string literals, to be pasted into a file's own
 * configuration between its own sections:
 *
 *     static const char config_yaml[] =
 *         SNAP_FIXTURE_YAML_HEAD("unit")
 *         "providers:\n"
 *         SNAP_FIXTURE_YAML_SIM("sim", "r1")
 *         "pools:\n"
 *         "  - {name: od, provider: sim, ...}\n";
 *
 * Each test keeps its own struct fixture, starting with the members below;
 * SNAP_FIXTURE_INIT() loads the configuration into it and points its
 * snapshot at its arrays.
 */
#ifndef SNAP_FIXTURE_H
#define SNAP_FIXTURE_H

#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "controller/reconcile/reconcile.h"
#include "core/config.h"

/* The database line (never connected to) and the cluster's name. */
#define SNAP_FIXTURE_YAML_HEAD(cluster)                                      \
    "database: {url: \"postgresql:///x\"}\n"                                 \
    "cluster: " cluster "\n"

/* The 8-GPU A100 instance type, as an entry of a provider's instance_types. */
#define SNAP_FIXTURE_YAML_SIM_8X                                             \
    "      - {name: sim.8x, gpus: 8, gpu_model: A100, cpu_milli: 96000, memory_mib: 1000000," \
    "         on_demand_price: \"32.00\", spot_price: \"10.00\"}\n"

/* A sim provider called name in region offering only sim.8x, as an entry
 * of providers. */
#define SNAP_FIXTURE_YAML_SIM(name, region)                                  \
    "  - name: " name "\n"                                                   \
    "    kind: sim\n"                                                        \
    "    region: " region "\n"                                               \
    "    instance_types:\n"                                                  \
    SNAP_FIXTURE_YAML_SIM_8X

/*
 * The members every fixture starts with: the configuration and a snapshot
 * over arrays of 8 nodes, 16 jobs and nallocs allocations.  A test's own
 * members follow (as PyObject_HEAD):
 *
 *     struct fixture {
 *         SNAP_FIXTURE_MEMBERS(8);
 *         SNAP_FIXTURE_PASS_MEMBERS;
 *         size_t nobserved;
 *     };
 */
#define SNAP_FIXTURE_MEMBERS(nallocs)                                        \
    struct tm_config cfg;                                                    \
    struct tm_snap_node nodes[8];                                            \
    struct tm_snap_job jobs[16];                                             \
    struct tm_snap_alloc allocs[nallocs];                                    \
    struct tm_snapshot snap

/* What a reconcile pass reads besides the snapshot (one provider's listing
 * over up to 8 instances) and the plan it writes. */
#define SNAP_FIXTURE_PASS_MEMBERS                                            \
    struct tm_instance inst[8];                                              \
    struct tm_observed obs;                                                  \
    struct tm_rc_plan plan

/*
 * Load yaml (a test's config_yaml, named unit.yaml in errors) into *cfg, and
 * make *snap an empty epoch-1 snapshot over the caller's nodes, jobs and
 * allocs arrays (their counts stay 0).  Returns 0, or -1 with the
 * configuration's error on stderr.  The caller releases *cfg with
 * tm_config_release() once this returned 0.
 */
static inline int snap_fixture_init(struct tm_config *cfg, const char *yaml,
                                    struct tm_snapshot *snap, struct tm_snap_node *nodes,
                                    struct tm_snap_job *jobs, struct tm_snap_alloc *allocs)
{
    char err[256];

    if (tm_config_load_string(yaml, strlen(yaml), "unit.yaml", cfg, err, sizeof(err)) < 0) {
        fprintf(stderr, "config: %s\n", err);
        return -1;
    }
    snap->epoch = 1;
    snap->nodes = nodes;
    snap->jobs = jobs;
    snap->allocs = allocs;
    return 0;
}

/* A complete, so far empty, listing of provider "sim" over the caller's
 * instance array. */
static inline struct tm_observed snap_fixture_observed(const struct tm_instance *inst)
{
    return (struct tm_observed){.provider = "sim", .complete = true, .instances = inst};
}

/* snap_fixture_init() on a fixture f (a pointer to a struct that starts with
 * SNAP_FIXTURE_MEMBERS), which the caller has zeroed. */
#define SNAP_FIXTURE_INIT(f, yaml)                                           \
    snap_fixture_init(&(f)->cfg, (yaml), &(f)->snap, (f)->nodes, (f)->jobs, (f)->allocs)

/* The same, for a fixture with SNAP_FIXTURE_PASS_MEMBERS too: its obs is
 * also made snap_fixture_observed() over its inst. */
#define SNAP_FIXTURE_PASS_INIT(f, yaml)                                      \
    ((f)->obs = snap_fixture_observed((f)->inst), SNAP_FIXTURE_INIT(f, yaml))

/* Release what a fixture set up by SNAP_FIXTURE_PASS_INIT() holds: the
 * last plan (if any) and the configuration. */
static inline void snap_fixture_pass_release(struct tm_rc_plan *plan, struct tm_config *cfg)
{
    tm_rc_plan_release(plan);
    tm_config_release(cfg);
}

#define SNAP_FIXTURE_PASS_RELEASE(f) snap_fixture_pass_release(&(f)->plan, &(f)->cfg)

/* Actions of a plan whose "op" is op: how many, and the k-th (NULL when
 * there are fewer). */
static inline int snap_fixture_count_op(const cJSON *actions, const char *op)
{
    int n = 0;
    const cJSON *a;
    cJSON_ArrayForEach(a, actions) {
        const cJSON *o = cJSON_GetObjectItemCaseSensitive(a, "op");
        if (cJSON_IsString(o) && strcmp(o->valuestring, op) == 0)
            n++;
    }
    return n;
}

static inline const cJSON *snap_fixture_nth_op(const cJSON *actions, const char *op, int k)
{
    const cJSON *a;
    cJSON_ArrayForEach(a, actions) {
        const cJSON *o = cJSON_GetObjectItemCaseSensitive(a, "op");
        if (cJSON_IsString(o) && strcmp(o->valuestring, op) == 0 && k-- == 0)
            return a;
    }
    return NULL;
}

#endif
