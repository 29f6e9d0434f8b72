/*
 * controller/cli/replay_quota.c: see replay_quota.h.
 *
 * The policies, each a replay of the same trace and inventory:
 *   strict-quota  each team within its own quota, no borrowing (Philly's
 *                 virtual clusters), tarmac's order inside; always run, as
 *                 the denominator of every team's sharing ratio
 *   shared        one queue, no quotas: tarmac's policy as it is
 *   fairshare     Slurm-style multifactor with a fair-share factor from
 *                 usage decayed with the half-life; no quotas
 *   tarmac        tarmac's order with quotas, lending and reclaim, fair
 *                 share among teams competing for spare capacity
 * Quotas are measured under every policy (guarantee_met), enforced only
 * under strict-quota and tarmac.
 */
#include "controller/cli/replay_quota.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "controller/replay/quota_file.h"
#include "core/err.h"

enum { QP_STRICT, QP_SHARED, QP_FAIR, QP_TARMAC, QP_MAX };
static const char *const qp_names[QP_MAX] = {"strict-quota", "shared", "fairshare", "tarmac"};

bool replay_quota_policy_known(const char *name)
{
    for (int p = 0; p < QP_MAX; p++)
        if (strcmp(name, qp_names[p]) == 0)
            return true;
    return false;
}

static int parse_policies(const char *arg, bool *want)
{
    char buf[256], *save = NULL;

    for (int p = 0; p < QP_MAX; p++)
        want[p] = arg == NULL;
    if (!arg)
        return 0;
    if (strlen(arg) >= sizeof(buf)) {
        fprintf(stderr, "tarmac replay: --policy list too long\n");
        return TM_EINVAL;
    }
    snprintf(buf, sizeof(buf), "%s", arg);
    for (char *it = strtok_r(buf, ",", &save); it; it = strtok_r(NULL, ",", &save)) {
        int p = 0;
        while (p < QP_MAX && strcmp(it, qp_names[p]) != 0)
            p++;
        if (p == QP_MAX) {
            fprintf(stderr, "tarmac replay: unrecognized policy \"%s\" with --quotas; valid policies: "
                            "strict-quota, shared, fairshare, tarmac\n", it);
            return TM_EINVAL;
        }
        want[p] = true;
    }
    want[QP_STRICT] = true; /* the sharing ratios' denominator */
    return 0;
}

struct qrun {
    struct tm_replay_stats st;
    struct tm_replay_team_out *out;
    bool done;
};

static double team_jct(const struct qrun *r, size_t t)
{
    return r->out[t].jobs ? r->out[t].jct_sum_s / (double)r->out[t].jobs : NAN;
}

static double team_met(const struct qrun *r, size_t t)
{
    return r->out[t].demand_s > 0 ? r->out[t].met_s / r->out[t].demand_s : 1.0;
}

static void add_num(cJSON *o, const char *k, double v)
{
    if (isfinite(v))
        cJSON_AddNumberToObject(o, k, v);
    else
        cJSON_AddNullToObject(o, k);
}

static int add_result(cJSON *results, int p, const struct qrun *r, const struct qrun *strict,
                      const struct tm_quota *q, int64_t gpus)
{
    cJSON *o = cJSON_CreateObject(), *teams = cJSON_CreateArray();
    const struct tm_replay_stats *st = &r->st;
    size_t nn = tm_quota_nnodes(q);

    if (!o || !teams) {
        cJSON_Delete(o);
        cJSON_Delete(teams);
        return TM_ENOMEM;
    }
    cJSON_AddStringToObject(o, "policy", qp_names[p]);
    add_num(o, "utilisation", st->utilisation);
    add_num(o, "wait_mean_s", st->wait_mean_s);
    add_num(o, "wait_p95_s", st->wait_p95_s);
    add_num(o, "jct_mean_s", st->jct_mean_s);
    add_num(o, "starved", (double)st->starved);
    add_num(o, "unfinished", (double)st->unfinished);
    add_num(o, "gpu_hours", st->utilisation * (double)gpus * st->makespan_s / 3600.0);
    add_num(o, "redone_gpu_hours", st->redone_gpu_hours);
    add_num(o, "reclaims", (double)st->reclaims);
    add_num(o, "guarantee_met", st->guarantee_met);
    for (size_t t = 0; t < nn; t++) {
        cJSON *tj;
        if (tm_quota_is_org(q, (int32_t)t) || (r->out[t].jobs == 0 && strict->out[t].jobs == 0))
            continue;
        tj = cJSON_CreateObject();
        if (!tj)
            break;
        cJSON_AddStringToObject(tj, "team", tm_quota_name(q, (int32_t)t));
        add_num(tj, "quota_gpus", (double)tm_quota_guaranteed(q, (int32_t)t, 0));
        add_num(tj, "jobs", (double)r->out[t].jobs);
        add_num(tj, "jct_mean_s", team_jct(r, t));
        add_num(tj, "sharing_ratio", team_jct(r, t) / team_jct(strict, t));
        add_num(tj, "guarantee_met", team_met(r, t));
        cJSON_AddItemToArray(teams, tj);
    }
    cJSON_AddItemToObject(o, "teams", teams);
    cJSON_AddItemToArray(results, o);
    return 0;
}

static void print_tables(const struct qrun *runs, const struct tm_quota *q, int64_t gpus)
{
    size_t nn = tm_quota_nnodes(q);

    printf("| policy | utilisation | wait mean / p95 s | JCT mean s | starved | unfinished | "
           "GPU-hours | redone GPU-h | reclaims | guarantee met |\n");
    printf("|---|---:|---|---:|---:|---:|---:|---:|---:|---:|\n");
    for (int p = 0; p < QP_MAX; p++) {
        const struct tm_replay_stats *st = &runs[p].st;
        if (!runs[p].done)
            continue;
        printf("| %s | %.2f%% | %.0f / %.0f | %.0f | %zu | %zu | %.0f | %.1f | %zu | %.4f |\n", qp_names[p],
               100 * st->utilisation, st->wait_mean_s, st->wait_p95_s, st->jct_mean_s, st->starved,
               st->unfinished, st->utilisation * (double)gpus * st->makespan_s / 3600.0,
               st->redone_gpu_hours, st->reclaims, st->guarantee_met);
    }
    printf("\n| team | quota GPUs | jobs |");
    for (int p = 0; p < QP_MAX; p++)
        if (runs[p].done)
            printf(" %s JCT s / ratio / met |", qp_names[p]);
    printf("\n|---|---:|---:|");
    for (int p = 0; p < QP_MAX; p++)
        if (runs[p].done)
            printf("---|");
    printf("\n");
    for (size_t t = 0; t < nn; t++) {
        if (tm_quota_is_org(q, (int32_t)t) || runs[QP_STRICT].out[t].jobs + runs[QP_SHARED].out[t].jobs == 0)
            continue;
        printf("| %s | %lld | %zu |", tm_quota_name(q, (int32_t)t),
               (long long)tm_quota_guaranteed(q, (int32_t)t, 0), runs[QP_STRICT].out[t].jobs);
        for (int p = 0; p < QP_MAX; p++)
            if (runs[p].done)
                printf(" %.0f / %.2f / %.3f |", team_jct(&runs[p], t),
                       team_jct(&runs[p], t) / team_jct(&runs[QP_STRICT], t), team_met(&runs[p], t));
        printf("\n");
    }
}

/* The rows of --quotas, built into the model (and its strict twin). */
static int build_models(const struct replay_quota_opts *qo, const struct tm_trace *t, int64_t gpus,
                        struct tm_quota **full, struct tm_quota **strict)
{
    struct tm_replay_quota_rows rows = {0}, srows = {0};
    struct tm_quota_flavor fl = {.name = TM_REPLAY_QUOTA_FLAVOR, .fleet_gpus = gpus};
    char err[512] = "", over[256];
    int r;

    if (strcmp(qo->quotas, "proportional") == 0)
        r = tm_replay_quota_rows_proportional(t, gpus, &rows);
    else
        r = tm_replay_quota_rows_load(qo->quotas, &rows, err, sizeof(err));
    if (r < 0) {
        fprintf(stderr, "tarmac replay: --quotas %s: %s\n", qo->quotas,
                err[0] ? err : r == TM_EINVAL ? "no job of the trace names a team" : tm_strerror(r));
        return r == TM_ENOMEM ? r : TM_EINVAL;
    }
    r = tm_quota_build(&fl, 1, rows.rows, rows.n, full, err, sizeof(err));
    if (r == 0) {
        r = tm_replay_quota_rows_strict(&rows, &srows);
        if (r == 0)
            r = tm_quota_build(&fl, 1, srows.rows, srows.n, strict, err, sizeof(err));
        if (r < 0)
            tm_quota_free(*full);
    }
    tm_replay_quota_rows_release(&rows);
    tm_replay_quota_rows_release(&srows);
    if (r < 0) {
        fprintf(stderr, "tarmac replay: --quotas %s: %s\n", qo->quotas, err[0] ? err : tm_strerror(r));
        return r == TM_ENOMEM ? r : TM_EINVAL;
    }
    if (tm_quota_overcommit_say(*full, over, sizeof(over)) > 0)
        fprintf(stderr, "tarmac replay: %s (accepted: an overcommit)\n", over);
    return 0;
}

int replay_quota_run(const struct replay_quota_opts *qo, const struct tm_trace *t,
                     const struct tm_replay_config *base, cJSON *results)
{
    struct tm_quota *full = NULL, *strict = NULL;
    struct qrun runs[QP_MAX];
    bool want[QP_MAX];
    int64_t gpus = base->gpus;
    int r;

    memset(runs, 0, sizeof(runs));
    if (gpus <= 0) {
        fprintf(stderr, "tarmac replay: --quotas needs --gpus N (the fleet the quotas divide)\n");
        return TM_EINVAL;
    }
    if (qo->borrowers && strcmp(qo->borrowers, "checkpointable") != 0 &&
        strcmp(qo->borrowers, "preemptible") != 0) {
        fprintf(stderr, "tarmac replay: bad --borrowers \"%s\" (checkpointable or preemptible)\n",
                qo->borrowers);
        return TM_EINVAL;
    }
    if (parse_policies(qo->policies, want) < 0)
        return TM_EINVAL;
    r = build_models(qo, t, gpus, &full, &strict);
    if (r < 0)
        return r;
    for (int p = 0; p < QP_MAX && r == 0; p++) {
        struct tm_replay_config cfg = *base;
        struct tm_replay_quota tq = {
            .quota = p == QP_STRICT ? strict : full,
            .rule = p == QP_SHARED ? TM_REPLAY_TEAMS_MEASURE
                    : p == QP_FAIR ? TM_REPLAY_TEAMS_FAIR : TM_REPLAY_TEAMS_QUOTA,
            .borrowers = qo->borrowers && strcmp(qo->borrowers, "preemptible") == 0
                             ? TM_REPLAY_BORROW_PREEMPT : TM_REPLAY_BORROW_CHECKPOINT,
            .half_life_ms = qo->half_life_ms, .bound_ms = qo->bound_ms};
        if (!want[p])
            continue;
        runs[p].out = calloc(tm_quota_nnodes(full) + 1, sizeof(*runs[p].out));
        if (!runs[p].out) {
            r = TM_ENOMEM;
            break;
        }
        tq.out = runs[p].out;
        cfg.policy = p == QP_FAIR ? TM_POLICY_MULTIFACTOR : TM_POLICY_TARMAC;
        cfg.teams = &tq;
        r = tm_replay_time(t, &cfg, &runs[p].st);
        runs[p].done = r == 0;
        if (!qo->json && r == 0)
            fprintf(stderr, "tarmac replay: %s done in %.1f s\n", qp_names[p], runs[p].st.wall_s);
    }
    for (int p = 0; p < QP_MAX && r == 0; p++)
        if (runs[p].done)
            r = add_result(results, p, &runs[p], &runs[QP_STRICT], full, gpus);
    if (r == 0 && !qo->json)
        print_tables(runs, full, gpus);
    for (int p = 0; p < QP_MAX; p++)
        free(runs[p].out);
    tm_quota_free(full);
    tm_quota_free(strict);
    return r;
}
