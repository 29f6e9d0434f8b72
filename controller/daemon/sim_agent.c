/*
 * controller/daemon/sim_agent.c: see sim_agent.h.
 */
#include "controller/daemon/sim_agent.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>

#include <cjson/cJSON.h>

#include "controller/store/store.h"
#include "core/err.h"
#include "core/log.h"
#include "core/model.h"
#include "providers/registry.h"

#define TM_SIM_DEFAULT_RUNTIME_MS (30 * 60 * 1000)

static void on_agent_report(int status, const char *err, void *data)
{
    struct tm_call *c = data;
    if (status < 0 && status != TM_ECANCELED)
        tm_log_warn("could not record a node report", "node=%" PRId64 " error=\"%s\"", c->node_id,
                    err ? err : tm_strerror(status));
    tm_call_done(c);
}

static bool pool_is_sim(const struct tm_config *cfg, int pool)
{
    if (pool < 0)
        return false;
    const struct tm_config_provider *p = tm_config_provider_find(cfg, cfg->pools[pool].provider);
    const struct tm_provider_kind *kind = p ? tm_provider_kind_find(p->kind) : NULL;
    return kind && kind->simulated;
}

static int cmp_node_id(const void *key, const void *elem)
{
    int64_t id = *(const int64_t *)key, other = ((const struct tm_snap_node *)elem)->id;
    return id < other ? -1 : id > other;
}

/* How long a simulated node runs this attempt of a job: its given runtime,
 * else its estimate, else TM_SIM_DEFAULT_RUNTIME_MS, less the progress its
 * checkpoints kept (a job resumed after a spot notice runs the rest). */
static int64_t sim_runtime_ms(const struct tm_snap_job *job)
{
    int64_t total = job->sim_runtime_ms > 0 ? job->sim_runtime_ms
                    : job->estimate_ms > 0  ? job->estimate_ms
                                            : TM_SIM_DEFAULT_RUNTIME_MS;
    return total > job->progress_ms ? total - job->progress_ms : 0;
}

struct due_job {
    int32_t node;   /* snapshot node index */
    int32_t job;    /* snapshot job index */
};

static int cmp_due(const void *a, const void *b)
{
    const struct due_job *x = a, *y = b;
    if (x->node != y->node)
        return x->node < y->node ? -1 : 1;
    return x->job < y->job ? -1 : x->job > y->job;
}

static void sim_agent_report(const struct tm_sim_agent *a, const struct tm_snap_node *n,
                             const struct due_job *due, size_t ndue)
{
    const struct tm_snapshot *s = a->snap;
    cJSON *report = cJSON_CreateObject();
    cJSON *jobs = report ? cJSON_AddArrayToObject(report, "jobs") : NULL;

    for (size_t k = 0; jobs && k < ndue; k++) {
        const struct tm_snap_job *job = &s->jobs[due[k].job];
        int64_t runtime = sim_runtime_ms(job);
        cJSON *o = cJSON_CreateObject();
        char why[96];
        if (!o)
            break;
        snprintf(why, sizeof(why), "sim agent: ran its %" PRId64 " s", runtime / 1000);
        cJSON_AddNumberToObject(o, "id", (double)job->id);
        cJSON_AddStringToObject(o, "state", "succeeded");
        cJSON_AddStringToObject(o, "reason", why);
        cJSON_AddItemToArray(jobs, o);
        (*a->finished)++;
        tm_log_info("job finished", "job=%" PRId64 " node=%" PRId64 " runtime_s=%" PRId64, job->id,
                    n->id, runtime / 1000);
    }
    if (jobs) {
        struct tm_call *c = tm_calls_new(a->calls, -1, n->id);
        if (c && tm_store_agent_report(a->pool, n->id, a->now_ms, report, on_agent_report, c) < 0)
            tm_call_done(c);
    }
    cJSON_Delete(report);
}

void tm_sim_agent_run(const struct tm_sim_agent *a)
{
    const struct tm_snapshot *s = a->snap;
    struct due_job *due = malloc((s->njobs + 1) * sizeof(*due));
    size_t ndue = 0;

    if (!due)
        return;
    for (size_t j = 0; j < s->njobs; j++) {
        const struct tm_snap_job *job = &s->jobs[j];
        if (job->state != TM_JOB_RUNNING)
            continue;
        int64_t runtime = sim_runtime_ms(job);
        if (job->started_ms + runtime > a->now_ms)
            continue;
        const struct tm_snap_node *n = bsearch(&job->node_id, s->nodes, s->nnodes, sizeof(*s->nodes),
                                               cmp_node_id);
        if (!n || n->state != TM_NODE_READY ||
            !(a->everywhere || pool_is_sim(a->cfg, n->pool)))
            continue;
        due[ndue++] = (struct due_job){.node = (int32_t)(n - s->nodes), .job = (int32_t)j};
    }
    qsort(due, ndue, sizeof(*due), cmp_due);
    for (size_t k = 0; k < ndue;) {
        size_t end = k;
        while (end < ndue && due[end].node == due[k].node)
            end++;
        sim_agent_report(a, &s->nodes[due[k].node], due + k, end - k);
        k = end;
    }
    free(due);
}
