/*
 * controller/cli/replay.c: `tarmac replay`, the command line over
 * tm_replay_time() and tm_replay_packing().
 *
 *   tarmac replay --pods FILE --nodes FILE [--mode time|packing]
 *                 [--policy P,...] [--gpus N,...] [--load X,...] [--seeds N]
 *                 [--estimates predicted|exact] [--since S] [--max-runtime S]
 *                 [--starvation S] [--tune X] [--log FILE] [--json]
 *                 [--estimator keys|model] [--fallback-level 3|4]
 *   tarmac replay --pods philly.csv --gpus N,... ...  (Philly: no node list)
 *   tarmac replay --synthetic JOBS [--gpus N] ...   (generated trace)
 *
 * Lists (policies, GPU counts, loads) run every combination, one result
 * each.  Durations take tm_duration_parse() syntax: "86400", "1d", "30m".
 */
#include "controller/cli/cli.h"
#include "controller/replay/replay.h"
#include "controller/sched/estimate.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cjson/cJSON.h>

#include "controller/cli/replay_quota.h"
#include "core/err.h"
#include "core/units.h"

#define LIST_MAX 16

struct opts {
    const char *pods, *nodes, *log_path;
    bool packing, json, exact, full_pass;
    int policies[LIST_MAX];
    int npolicies;
    int32_t gpus[LIST_MAX];
    int ngpus;
    double loads[LIST_MAX];
    int nloads;
    int seeds;
    int64_t since_ms, max_runtime_ms, starvation_ms;
    double tune;
    size_t synthetic;
    int estimator;   /* tm_replay_config.estimate_fallback */
    bool keys_only;
    struct replay_quota_opts q; /* q.quotas NULL: no teams */
};

static void usage(FILE *f)
{
    fprintf(f,
            "usage: tarmac replay --pods FILE --nodes FILE [--mode time|packing]\n"
            "         [--policy P[,P...]] [--gpus N[,N...]] [--load X[,X...]] [--seeds N]\n"
            "         [--estimates predicted|exact] [--since S] [--max-runtime S]\n"
            "         [--starvation S] [--tune X] [--log FILE] [--json]\n"
            "         [--estimator keys|model] [--fallback-level 3|4]\n"
            "         [--quotas FILE|proportional [--borrowers checkpointable|preemptible]\n"
            "          [--half-life D] [--reclaim-bound D]]  (policies strict-quota, shared,\n"
            "          fairshare, tarmac)\n"
            "       tarmac replay --pods PHILLY_CSV --gpus N[,N...] [...]  (nodes of 8 GPUs)\n"
            "       tarmac replay --synthetic JOBS [--gpus N] [...]\n"
            "time-mode policies: %s; packing policies: %s\n",
            tm_replay_policy_list(), tm_pack_policy_list());
}

static int bad(const char *fmt, const char *arg)
{
    fprintf(stderr, "tarmac replay: ");
    fprintf(stderr, fmt, arg);
    fprintf(stderr, "\n");
    return 2;
}

static bool parse_double(const char *s, double *ret)
{
    char *end;
    double v;

    errno = 0;
    v = strtod(s, &end);
    if (errno || end == s || *end || !(v == v))
        return false;
    *ret = v;
    return true;
}

static bool parse_long(const char *s, long long lo, long long hi, long long *ret)
{
    char *end;
    long long v;

    errno = 0;
    v = strtoll(s, &end, 10);
    if (errno || end == s || *end || v < lo || v > hi)
        return false;
    *ret = v;
    return true;
}

/* Split a comma list into a scratch copy; returns the count or -1. */
static int split_list(const char *arg, char *buf, size_t len, char **items)
{
    int n = 0;
    char *p;

    if (strlen(arg) >= len)
        return -1;
    memcpy(buf, arg, strlen(arg) + 1);
    p = buf;
    for (;;) {
        char *c = strchr(p, ',');
        if (n >= LIST_MAX)
            return -1;
        if (c)
            *c = '\0';
        if (!*p)
            return -1;
        items[n++] = p;
        if (!c)
            break;
        p = c + 1;
    }
    return n;
}

static int parse_args(int argc, char **argv, struct opts *o, const char **ret_policy)
{
    char buf[512], *items[LIST_MAX];

    memset(o, 0, sizeof(*o));
    o->since_ms = -1;
    o->max_runtime_ms = -1;
    o->seeds = 0;
    o->keys_only = true; /* --estimator keys, the default */
    o->tune = 1.3;
    o->q.half_life_ms = 7LL * 24 * 3600 * 1000;
    o->q.bound_ms = 5LL * 60 * 1000;
    *ret_policy = NULL;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        bool takes = strcmp(a, "--json") != 0 && strcmp(a, "--help") != 0 && strcmp(a, "-h") != 0 &&
                     strcmp(a, "--full-pass") != 0;
        if (takes && !v)
            return bad("option %s needs a value", a);
        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            usage(stdout);
            return 1;
        } else if (strcmp(a, "--json") == 0) {
            o->json = true;
        } else if (strcmp(a, "--full-pass") == 0) {
            /* Not in the usage: the reference pass over the whole queue at
             * every instant (tm_replay_config.full_pass), for checks. */
            o->full_pass = true;
        } else if (strcmp(a, "--pods") == 0) {
            o->pods = v;
        } else if (strcmp(a, "--nodes") == 0) {
            o->nodes = v;
        } else if (strcmp(a, "--log") == 0) {
            o->log_path = v;
        } else if (strcmp(a, "--mode") == 0) {
            if (strcmp(v, "time") == 0)
                o->packing = false;
            else if (strcmp(v, "packing") == 0)
                o->packing = true;
            else
                return bad("unrecognized mode \"%s\" (time, packing)", v);
        } else if (strcmp(a, "--policy") == 0) {
            *ret_policy = v;
        } else if (strcmp(a, "--gpus") == 0) {
            int n = split_list(v, buf, sizeof(buf), items);
            if (n < 0)
                return bad("bad --gpus list \"%s\"", v);
            for (int k = 0; k < n; k++) {
                long long g;
                if (!parse_long(items[k], 1, 1000000, &g))
                    return bad("bad GPU count in --gpus \"%s\"", v);
                o->gpus[k] = (int32_t)g;
            }
            o->ngpus = n;
        } else if (strcmp(a, "--load") == 0) {
            int n = split_list(v, buf, sizeof(buf), items);
            if (n < 0)
                return bad("bad --load list \"%s\"", v);
            for (int k = 0; k < n; k++)
                if (!parse_double(items[k], &o->loads[k]) || o->loads[k] <= 0 || o->loads[k] > 100)
                    return bad("bad load in --load \"%s\" (a number above 0)", v);
            o->nloads = n;
        } else if (strcmp(a, "--seeds") == 0) {
            long long s;
            if (!parse_long(v, 1, 1000, &s))
                return bad("bad --seeds \"%s\" (1..1000)", v);
            o->seeds = (int)s;
        } else if (strcmp(a, "--estimates") == 0) {
            if (strcmp(v, "predicted") == 0)
                o->exact = false;
            else if (strcmp(v, "exact") == 0)
                o->exact = true;
            else
                return bad("unrecognized estimates \"%s\" (predicted, exact)", v);
        } else if (strcmp(a, "--estimator") == 0) {
            /* keys, the default: no fallback model (see sched/estimate.c
             * for why); model: the model where the keys have nothing. */
            if (strcmp(v, "keys") == 0)
                o->keys_only = true;
            else if (strcmp(v, "model") == 0)
                o->keys_only = false;
            else
                return bad("unrecognized estimator \"%s\" (keys, model)", v);
        } else if (strcmp(a, "--fallback-level") == 0) {
            /* The first key level the model stands in for. */
            if (strcmp(v, "3") == 0 || strcmp(v, "4") == 0)
                o->estimator = v[0] - '0';
            else
                return bad("bad --fallback-level \"%s\" (3: the model answers where neither the job's "
                           "name nor its team does; 4, the default with --estimator model: only where anyone's work of its "
                           "class and GPUs does not either)", v);
        } else if (strcmp(a, "--since") == 0 || strcmp(a, "--max-runtime") == 0 ||
                   strcmp(a, "--starvation") == 0) {
            int64_t ms;
            if (tm_duration_parse(v, &ms) < 0)
                return bad("bad duration \"%s\" (seconds, or e.g. 30m, 2h, 1d)", v);
            if (a[2] == 's' && a[3] == 'i')
                o->since_ms = ms;
            else if (a[2] == 'm')
                o->max_runtime_ms = ms;
            else
                o->starvation_ms = ms;
        } else if (strcmp(a, "--quotas") == 0) {
            o->q.quotas = v;
        } else if (strcmp(a, "--borrowers") == 0) {
            o->q.borrowers = v;
        } else if (strcmp(a, "--half-life") == 0 || strcmp(a, "--reclaim-bound") == 0) {
            int64_t ms;
            if (tm_duration_parse(v, &ms) < 0 || ms <= 0)
                return bad("bad duration \"%s\" (seconds above 0, or e.g. 30m, 2h, 7d)", v);
            if (a[2] == 'h')
                o->q.half_life_ms = ms;
            else
                o->q.bound_ms = ms;
        } else if (strcmp(a, "--tune") == 0) {
            if (!parse_double(v, &o->tune) || o->tune <= 0 || o->tune > 10)
                return bad("bad --tune \"%s\" (0 < X <= 10)", v);
        } else if (strcmp(a, "--synthetic") == 0) {
            long long n;
            if (!parse_long(v, 1, 10000000, &n))
                return bad("bad --synthetic \"%s\" (job count)", v);
            o->synthetic = (size_t)n;
        } else {
            usage(stderr);
            return bad("unrecognized option \"%s\"", a);
        }
        if (takes)
            i++;
    }
    if (!o->synthetic && !o->pods) {
        usage(stderr);
        return bad("%s", "--pods is required (or --synthetic JOBS)");
    }
    return 0;
}

static int parse_policies(struct opts *o, const char *arg)
{
    char buf[512], *items[LIST_MAX];
    int n;

    if (!arg) {
        int max = o->packing ? TM_PACK_MAX : TM_REPLAY_POLICY_MAX;
        for (int p = 0; p < max; p++)
            o->policies[o->npolicies++] = p;
        return 0;
    }
    n = split_list(arg, buf, sizeof(buf), items);
    if (n < 0) {
        fprintf(stderr, "tarmac replay: bad --policy list \"%s\"\n", arg);
        return 2;
    }
    for (int k = 0; k < n; k++) {
        int p = o->packing ? tm_pack_policy_parse(items[k]) : tm_replay_policy_parse(items[k]);
        if (p < 0) {
            fprintf(stderr, "tarmac replay: unrecognized %s policy \"%s\"; valid policies: %s\n",
                    o->packing ? "packing" : "time-mode", items[k],
                    o->packing ? tm_pack_policy_list() : tm_replay_policy_list());
            return 2;
        }
        o->policies[o->npolicies++] = p;
    }
    return 0;
}

static void add_num(cJSON *o, const char *k, double v)
{
    cJSON_AddNumberToObject(o, k, v);
}

static int run_packing(const struct opts *o, const struct tm_trace *t, cJSON *results)
{
    int seeds = o->seeds > 0 ? o->seeds : 10;
    int64_t gpus = 0;

    for (size_t i = 0; i < t->nnodes; i++)
        gpus += t->nodes[i].gpus;
    if (!o->json) {
        printf("mode: packing (FGD artifact method): every pod row plus random draws until arrived GPU\n"
               "demand reaches %.0f%% of capacity, shuffled, placed once, nothing departs; CPU, memory\n"
               "and GPUs enforced; inventory: the node list as is, %zu nodes, %lld GPUs; %d seeds\n\n",
               o->tune * 100, t->nnodes, (long long)gpus, seeds);
        printf("| policy | GPU allocation (mean of %d seeds) | min | max | tasks | failed | s/seed |\n",
               seeds);
        printf("|---|---:|---:|---:|---:|---:|---:|\n");
    }
    for (int k = 0; k < o->npolicies; k++) {
        double sum = 0, mn = 1e9, mx = -1e9, wall = 0;
        size_t tasks = 0, failed = 0;
        cJSON *obj = cJSON_CreateObject(), *per = cJSON_CreateArray();
        if (!obj || !per) {
            cJSON_Delete(obj);
            cJSON_Delete(per);
            return TM_ENOMEM;
        }
        for (int s = 1; s <= seeds; s++) {
            struct tm_pack_stats st;
            int r = tm_replay_packing(t, (enum tm_pack_policy)o->policies[k], (uint64_t)s, o->tune, &st);
            if (r < 0) {
                cJSON_Delete(obj);
                cJSON_Delete(per);
                return r;
            }
            sum += st.allocation;
            mn = st.allocation < mn ? st.allocation : mn;
            mx = st.allocation > mx ? st.allocation : mx;
            tasks += st.tasks;
            failed += st.failed;
            wall += st.wall_s;
            cJSON_AddItemToArray(per, cJSON_CreateNumber(st.allocation));
        }
        cJSON_AddStringToObject(obj, "policy", tm_pack_policy_name(o->policies[k]));
        cJSON_AddStringToObject(obj, "mode", "packing");
        cJSON_AddNullToObject(obj, "load");
        add_num(obj, "tune", o->tune);
        add_num(obj, "gpus", (double)gpus);
        add_num(obj, "allocation", sum / seeds);
        cJSON_AddItemToObject(obj, "allocation_per_seed", per);
        add_num(obj, "seeds", seeds);
        add_num(obj, "jobs", (double)tasks / seeds);
        add_num(obj, "failed", (double)failed / seeds);
        cJSON_AddNullToObject(obj, "utilisation");
        cJSON_AddNullToObject(obj, "utilisation_arrival");
        cJSON_AddNullToObject(obj, "idle_while_waiting_gpu_hours");
        cJSON_AddNullToObject(obj, "idle_while_waiting_fit_gpu_hours");
        cJSON_AddNullToObject(obj, "idle_while_waiting_model_gpu_hours");
        cJSON_AddNullToObject(obj, "idle_while_waiting_accepts_gpu_hours");
        cJSON_AddNullToObject(obj, "wait_p95_s");
        cJSON_AddNullToObject(obj, "wait_max_s");
        cJSON_AddNullToObject(obj, "starved");
        add_num(obj, "events_per_s", wall > 0 ? (double)tasks / wall : 0);
        cJSON_AddItemToArray(results, obj);
        if (!o->json)
            printf("| %s | %.2f%% | %.2f%% | %.2f%% | %.0f | %.0f | %.2f |\n",
                   tm_pack_policy_name(o->policies[k]), 100 * sum / seeds, 100 * mn, 100 * mx,
                   (double)tasks / seeds, (double)failed / seeds, wall / seeds);
    }
    return 0;
}

/* tarmac against fifo and backfill on the same input: the figures the
 * issue's targets are stated in. */
static void compare(const struct opts *o, const struct tm_replay_stats *all, int ngpus, int nloads,
                    int seeds, cJSON *doc)
{
    int fi = -1, bi = -1, ti = -1;
    cJSON *arr;

    for (int k = 0; k < o->npolicies; k++) {
        if (o->policies[k] == TM_POLICY_FIFO)
            fi = k;
        if (o->policies[k] == TM_POLICY_BACKFILL)
            bi = k;
        if (o->policies[k] == TM_POLICY_TARMAC)
            ti = k;
    }
    if (fi < 0 || ti < 0)
        return;
    arr = cJSON_AddArrayToObject(doc, "comparisons");
    if (!o->json) {
        printf("\ntarmac against the baselines (same input; idle = idle-while-waiting GPU-hours, "
               "fit = the fit-aware reading of docs/measuring.md (free capacity only "
               "while some queued job could be placed on it then: model, GPUs or share, CPU, memory), "
               "model = the older, looser reading (any free GPU milli of a model while a "
               "queued job could have used the model: accepts it and fits some node of it), "
               "accepts = the upper bound (a queued job accepts the model, whatever its node sizes); "
               "gain = utilisation over the arrival window, percentage points)\n\n");
        printf("| GPUs | load | tarmac idle / fifo idle, model | tarmac idle / fifo idle, accepts | "
               "tarmac idle / fifo idle, fit | "
               "tarmac idle / backfill idle, model | tarmac idle / backfill idle, accepts | "
               "idle GPU-h tarmac / backfill, fit | p95 wait s "
               "tarmac / backfill | starved fifo / backfill / tarmac | gain over fifo pp | "
               "gain over backfill pp |\n");
        printf("|---:|---:|---:|---:|---:|---:|---:|---:|---|---|---:|---:|\n");
    }
    for (int g = 0; g < ngpus; g++)
        for (int l = 0; l < nloads; l++)
            for (int sd = 0; sd < seeds; sd++) {
                size_t base = ((size_t)(g * nloads + l) * (size_t)seeds + (size_t)sd) * (size_t)o->npolicies;
                const struct tm_replay_stats *f = &all[base + (size_t)fi], *t = &all[base + (size_t)ti];
                const struct tm_replay_stats *b = bi >= 0 ? &all[base + (size_t)bi] : NULL;
                double rf = f->idle_while_waiting_model_gpu_hours > 0
                                ? t->idle_while_waiting_model_gpu_hours / f->idle_while_waiting_model_gpu_hours
                                : 0;
                double rb = b && b->idle_while_waiting_model_gpu_hours > 0
                                ? t->idle_while_waiting_model_gpu_hours / b->idle_while_waiting_model_gpu_hours
                                : 0;
                double rff = f->idle_while_waiting_fit_gpu_hours > 0
                                 ? t->idle_while_waiting_fit_gpu_hours / f->idle_while_waiting_fit_gpu_hours
                                 : 0;
                double rbf = b && b->idle_while_waiting_fit_gpu_hours > 0
                                 ? t->idle_while_waiting_fit_gpu_hours / b->idle_while_waiting_fit_gpu_hours
                                 : 0;
                double rfa = f->idle_while_waiting_accepts_gpu_hours > 0
                                 ? t->idle_while_waiting_accepts_gpu_hours / f->idle_while_waiting_accepts_gpu_hours
                                 : 0;
                double rba = b && b->idle_while_waiting_accepts_gpu_hours > 0
                                 ? t->idle_while_waiting_accepts_gpu_hours / b->idle_while_waiting_accepts_gpu_hours
                                 : 0;
                cJSON *c = cJSON_CreateObject();
                if (c) {
                    add_num(c, "gpus", t->gpus);
                    add_num(c, "load", t->load);
                    add_num(c, "seed", sd + 1);
                    add_num(c, "idle_tarmac_over_fifo", rff);
                    add_num(c, "idle_model_tarmac_over_fifo", rf);
                    add_num(c, "idle_fit_tarmac_over_fifo", rff);
                    add_num(c, "idle_accepts_tarmac_over_fifo", rfa);
                    add_num(c, "idle_fit_tarmac_gpu_hours", t->idle_while_waiting_fit_gpu_hours);
                    if (b) {
                        add_num(c, "idle_tarmac_over_backfill", rbf);
                        add_num(c, "idle_model_tarmac_over_backfill", rb);
                        add_num(c, "idle_fit_tarmac_over_backfill", rbf);
                        add_num(c, "idle_accepts_tarmac_over_backfill", rba);
                        add_num(c, "idle_fit_backfill_gpu_hours", b->idle_while_waiting_fit_gpu_hours);
                        add_num(c, "wait_p95_backfill_s", b->wait_p95_s);
                        add_num(c, "gain_over_backfill_pp", 100 * (t->utilisation_arrival - b->utilisation_arrival));
                    }
                    add_num(c, "wait_p95_tarmac_s", t->wait_p95_s);
                    add_num(c, "gain_over_fifo_pp", 100 * (t->utilisation_arrival - f->utilisation_arrival));
                    add_num(c, "starved_tarmac", (double)t->starved);
                    cJSON_AddItemToArray(arr, c);
                }
                if (!o->json)
                    printf("| %d | %.2f | %.1f%% | %.1f%% | %.1f%% | %s%.2f | %s%.2f | %.1f / %s%.1f | %.0f / %s%.0f | "
                           "%zu / %s%zu / %zu | %+.1f | %s%+.1f |\n",
                           t->gpus, t->load, 100 * rf, 100 * rfa, 100 * rff, b ? "" : "n/a ", rb,
                           b ? "" : "n/a ", rba,
                           t->idle_while_waiting_fit_gpu_hours, b ? "" : "n/a ",
                           b ? b->idle_while_waiting_fit_gpu_hours : 0,
                           t->wait_p95_s, b ? "" : "n/a ",
                           b ? b->wait_p95_s : 0, f->starved, b ? "" : "n/a ", b ? b->starved : 0,
                           t->starved, 100 * (t->utilisation_arrival - f->utilisation_arrival),
                           b ? "" : "n/a ", b ? 100 * (t->utilisation_arrival - b->utilisation_arrival) : 0);
            }
}

/* tarmac beside the fairer baseline (multifactor: EASY on Slurm's
 * multifactor priority) and the oracle (tarmac told every true runtime):
 * waits with starved counts beside them (docs/measuring.md: starvation first). */
static void compare_fair(const struct opts *o, const struct tm_replay_stats *all, int ngpus, int nloads,
                         int seeds, cJSON *doc)
{
    int ti = -1, mi = -1, oi = -1;
    cJSON *arr;

    for (int k = 0; k < o->npolicies; k++) {
        if (o->policies[k] == TM_POLICY_TARMAC)
            ti = k;
        if (o->policies[k] == TM_POLICY_MULTIFACTOR)
            mi = k;
        if (o->policies[k] == TM_REPLAY_ORACLE)
            oi = k;
    }
    if (ti < 0 || (mi < 0 && oi < 0))
        return;
    arr = cJSON_AddArrayToObject(doc, "comparisons_fair");
    if (!o->json) {
        printf("\ntarmac beside multifactor (EASY on Slurm's multifactor priority) and the oracle "
               "(tarmac told every true runtime at arrival); idle = idle-while-waiting GPU-h, fit-aware; "
               "n/a: not run\n\n");
        printf("| GPUs | load | seed | wait mean s tarmac / multifactor / oracle | "
               "p95 wait s tarmac / multifactor / oracle | starved tarmac / multifactor / oracle | "
               "idle GPU-h tarmac / multifactor / oracle | util arrival tarmac / multifactor / oracle |\n");
        printf("|---:|---:|---:|---|---|---|---|---|\n");
    }
    for (int g = 0; g < ngpus; g++)
        for (int l = 0; l < nloads; l++)
            for (int sd = 0; sd < seeds; sd++) {
                size_t base = ((size_t)(g * nloads + l) * (size_t)seeds + (size_t)sd) * (size_t)o->npolicies;
                const struct tm_replay_stats *t = &all[base + (size_t)ti];
                const struct tm_replay_stats *m = mi >= 0 ? &all[base + (size_t)mi] : NULL;
                const struct tm_replay_stats *x = oi >= 0 ? &all[base + (size_t)oi] : NULL;
                cJSON *c = cJSON_CreateObject();
                char mw[32] = "n/a", mp[32] = "n/a", ms[32] = "n/a", mid[32] = "n/a", mu[32] = "n/a";
                char xw[32] = "n/a", xp[32] = "n/a", xs[32] = "n/a", xid[32] = "n/a", xu[32] = "n/a";
                if (c) {
                    add_num(c, "gpus", t->gpus);
                    add_num(c, "load", t->load);
                    add_num(c, "seed", sd + 1);
                    add_num(c, "wait_mean_tarmac_s", t->wait_mean_s);
                    add_num(c, "wait_p95_tarmac_s", t->wait_p95_s);
                    add_num(c, "starved_tarmac", (double)t->starved);
                }
                if (m) {
                    snprintf(mw, sizeof(mw), "%.0f", m->wait_mean_s);
                    snprintf(mp, sizeof(mp), "%.0f", m->wait_p95_s);
                    snprintf(ms, sizeof(ms), "%zu", m->starved);
                    snprintf(mid, sizeof(mid), "%.1f", m->idle_while_waiting_fit_gpu_hours);
                    snprintf(mu, sizeof(mu), "%.1f%%", 100 * m->utilisation_arrival);
                    if (c) {
                        add_num(c, "wait_mean_multifactor_s", m->wait_mean_s);
                        add_num(c, "wait_p95_multifactor_s", m->wait_p95_s);
                        add_num(c, "starved_multifactor", (double)m->starved);
                    }
                }
                if (x) {
                    snprintf(xw, sizeof(xw), "%.0f", x->wait_mean_s);
                    snprintf(xp, sizeof(xp), "%.0f", x->wait_p95_s);
                    snprintf(xs, sizeof(xs), "%zu", x->starved);
                    snprintf(xid, sizeof(xid), "%.1f", x->idle_while_waiting_fit_gpu_hours);
                    snprintf(xu, sizeof(xu), "%.1f%%", 100 * x->utilisation_arrival);
                    if (c) {
                        add_num(c, "wait_mean_oracle_s", x->wait_mean_s);
                        add_num(c, "wait_p95_oracle_s", x->wait_p95_s);
                        add_num(c, "starved_oracle", (double)x->starved);
                    }
                }
                if (c)
                    cJSON_AddItemToArray(arr, c);
                if (!o->json)
                    printf("| %d | %.2f | %d | %.0f / %s / %s | %.0f / %s / %s | %zu / %s / %s | "
                           "%.1f / %s / %s | %.1f%% / %s / %s |\n",
                           t->gpus, t->load, sd + 1, t->wait_mean_s, mw, xw, t->wait_p95_s, mp, xp,
                           t->starved, ms, xs, t->idle_while_waiting_fit_gpu_hours, mid, xid,
                           100 * t->utilisation_arrival, mu, xu);
            }
}

/* ---------- estimates and reservation slips ---------- */

/* Mean |ln(estimate / runtime)| over the jobs of the given key levels. */
static double male(const struct tm_replay_stats *st, const int *levels, int n, size_t *ret_jobs)
{
    size_t jobs = 0;
    double sum = 0;

    for (int i = 0; i < n; i++) {
        jobs += st->est_jobs[levels[i]];
        sum += st->est_abslog_sum[levels[i]];
    }
    *ret_jobs = jobs;
    return jobs ? sum / (double)jobs : 0;
}

static const int LV_ALL[] = {0, 1, 2, 3, 4}, LV_FALLBACK[] = {0, 3, 4}, LV_NOSHAPE[] = {0, 4};

static void add_estimates(cJSON *obj, const struct opts *o, const struct tm_replay_stats *st, bool oracle)
{
    size_t n;

    cJSON_AddStringToObject(obj, "estimator", o->exact || oracle ? "exact" : o->keys_only ? "keys" : "model");
    add_num(obj, "slip_p50_s", st->slip_p50_s);
    add_num(obj, "slip_p95_s", st->slip_p95_s);
    add_num(obj, "estimate_male", male(st, LV_ALL, 5, &n));
    add_num(obj, "estimate_jobs", (double)n);
    add_num(obj, "estimate_fallback_male", male(st, LV_FALLBACK, 3, &n));
    add_num(obj, "estimate_fallback_jobs", (double)n);
    add_num(obj, "estimate_noshape_male", male(st, LV_NOSHAPE, 2, &n));
    add_num(obj, "estimate_noshape_jobs", (double)n);
    add_num(obj, "estimate_model_jobs", (double)st->est_model_jobs);
    {
        /* The model's own answer on every job, by the keys' level. */
        cJSON *a = cJSON_AddArrayToObject(obj, "estimate_by_key_level");
        for (int l = 0; a && l < 5; l++) {
            cJSON *r = cJSON_CreateObject();
            if (!r)
                break;
            add_num(r, "level", l);
            add_num(r, "jobs", (double)st->est_jobs[l]);
            add_num(r, "male", st->est_jobs[l] ? st->est_abslog_sum[l] / (double)st->est_jobs[l] : 0);
            add_num(r, "model_scored", (double)st->est_model_scored[l]);
            add_num(r, "model_male", st->est_model_scored[l]
                                         ? st->est_model_abslog_sum[l] / (double)st->est_model_scored[l]
                                         : 0);
            cJSON_AddItemToArray(a, r);
        }
    }
}

static void print_estimates(const struct opts *o, const struct tm_replay_stats *all, int ngpus, int nloads,
                            int seeds)
{
    size_t i = 0;

    printf("\nreservation slips and estimates (estimator: %s; slip = first start - first reservation "
           "start, over the jobs that slipped; MALE = mean |ln(estimate / runtime)| at arrival, an "
           "unknown estimate read as the default %d s; \"keys could not answer\" = neither the "
           "job's name nor its team had %d runtimes, \"no shape\" = nor anyone's work of its class "
           "and GPUs)\n\n",
           o->exact ? "exact" : o->keys_only ? "keys alone" : "keys, then the model",
           (int)(TM_SCHED_DEFAULT_ESTIMATE_MS / 1000), TM_ESTIMATE_MIN_SAMPLES);
    printf("| policy | GPUs | load | seed | wait mean / p95 s | starved | held | slipped | "
           "slip p50 / p95 / max s | MALE all (jobs) | MALE keys could not answer (jobs) | "
           "MALE no shape (jobs) | model answered |\n");
    printf("|---|---:|---:|---:|---|---:|---:|---:|---|---|---|---|---:|\n");
    for (int g = 0; g < ngpus; g++)
        for (int l = 0; l < nloads; l++)
            for (int s = 1; s <= seeds; s++)
                for (int k = 0; k < o->npolicies; k++, i++) {
                    const struct tm_replay_stats *st = &all[i];
                    size_t na, nf, ns;
                    double ma = male(st, LV_ALL, 5, &na), mf = male(st, LV_FALLBACK, 3, &nf),
                           ms = male(st, LV_NOSHAPE, 2, &ns);
                    printf("| %s | %d | %.2f | %d | %.0f / %.0f | %zu | %zu | %zu | %.0f / %.0f / %.0f | "
                           "%.3f (%zu) | %.3f (%zu) | %.3f (%zu) | %zu |\n",
                           tm_replay_policy_name(o->policies[k]), st->gpus, st->load, s, st->wait_mean_s,
                           st->wait_p95_s, st->starved, st->reserved_jobs,
                           st->reservation_slips, st->slip_p50_s, st->slip_p95_s, st->slip_max_s, ma, na,
                           mf, nf, ms, ns, st->est_model_jobs);
                }
}

static int run_time(const struct opts *o, const struct tm_trace *t, FILE *log, cJSON *results,
                    cJSON *doc)
{
    int ngpus = o->ngpus ? o->ngpus : 1, nloads = o->nloads ? o->nloads : 1;
    int seeds = o->seeds > 0 ? o->seeds : 1;
    bool header = false;
    struct tm_replay_stats *all = calloc((size_t)(ngpus * nloads * seeds * o->npolicies) + 1, sizeof(*all));
    size_t nall = 0;

    if (!all)
        return TM_ENOMEM;

    for (int g = 0; g < ngpus; g++)
        for (int l = 0; l < nloads; l++)
            for (int s = 1; s <= seeds; s++)
                for (int k = 0; k < o->npolicies; k++) {
                    bool oracle = o->policies[k] == TM_REPLAY_ORACLE;
                    struct tm_replay_config cfg = {
                        .policy = oracle ? TM_POLICY_TARMAC : (enum tm_sched_policy)o->policies[k],
                        .params = {.starvation_ms = o->starvation_ms},
                        .exact_estimates = o->exact || oracle, .since_ms = o->since_ms,
                        .max_runtime_ms = o->max_runtime_ms, .gpus = o->ngpus ? o->gpus[g] : 0,
                        .load = o->nloads ? o->loads[l] : 0, .seed = (uint64_t)s, .log = log,
                        .full_pass = o->full_pass,
                        .estimate_fallback = o->keys_only ? -1 : o->estimator ? o->estimator : TM_ESTIMATE_FALLBACK_FROM};
                    struct tm_replay_stats st;
                    cJSON *obj;
                    int r = tm_replay_time(t, &cfg, &st);
                    if (r == TM_EINVAL)
                        fprintf(stderr, "tarmac replay: nothing to replay (every job dropped, "
                                        "or an inventory without GPUs)\n");
                    if (r < 0) {
                        free(all);
                        return r;
                    }
                    all[nall++] = st;
                    if (!o->json && !header) {
                        printf("mode: time (discrete events, virtual time); inventory fixed, no launches: "
                               "%s\n",
                               o->ngpus ? "node list sampled to the GPU count keeping the model mix"
                                        : "the node list's GPU nodes as is");
                        printf("estimates: %s; starvation bound %.0f s; dropped: %zu never scheduled, "
                               "%zu before --since, %zu over --max-runtime, %zu CPU-only, "
                               "%zu fit no node",
                               o->exact ? "exact (upper bound)" : "predicted from finished jobs",
                               (double)st.starvation_ms / 1000, st.dropped_unscheduled, st.dropped_since,
                               st.dropped_runtime, st.dropped_cpu_only, st.dropped_no_node);
                        printf("\n");
                        printf("load: offered = GPU-seconds of work / (capacity x arrival span); "
                               "factor = inter-arrival multiplier\n\n");
                        printf("| policy | GPUs | nodes | load (native, factor) | jobs | util makespan | "
                               "util arrival | idle-while-waiting GPU-h (fit-aware) | "
                               "idle-while-waiting GPU-h, model reading (on slivers) | "
                               "idle-while-waiting GPU-h, accepts | "
                               "wait mean/p50/p95/p99/max s | "
                               "JCT mean s | makespan h | starved | res. slips (of held) mean/max s | "
                               "evictions (GPU-h lost) | events/s |\n");
                        printf("|---|---:|---:|---|---:|---:|---:|---:|---:|---:|---|---:|---:|---:|---|---|---:|\n");
                        header = true;
                    }
                    if (!o->json)
                        printf("| %s | %d | %zu | %.2f (%.4f, x%.4f) | %zu | %.1f%% | %.1f%% | %.1f | %.1f (%.1f) | %.1f | "
                               "%.0f / %.0f / %.0f / %.0f / %.0f | %.0f | %.1f | %zu | %zu (%zu) "
                               "%.0f/%.0f | %zu (%.1f) | %.0f |\n",
                               tm_replay_policy_name(o->policies[k]), st.gpus, st.nodes, st.load,
                               st.native_load, st.factor, st.jobs, 100 * st.utilisation,
                               100 * st.utilisation_arrival, st.idle_while_waiting_gpu_hours,
                               st.idle_while_waiting_model_gpu_hours, st.idle_sliver_gpu_hours,
                               st.idle_while_waiting_accepts_gpu_hours, st.wait_mean_s, st.wait_p50_s, st.wait_p95_s, st.wait_p99_s,
                               st.wait_max_s, st.jct_mean_s, st.makespan_s / 3600, st.starved,
                               st.reservation_slips, st.reserved_jobs, st.slip_mean_s, st.slip_max_s,
                               st.preemptions, st.preempted_gpu_hours, st.events_per_s);
                    obj = cJSON_CreateObject();
                    if (!obj) {
                        free(all);
                        return TM_ENOMEM;
                    }
                    cJSON_AddStringToObject(obj, "policy", tm_replay_policy_name(o->policies[k]));
                    cJSON_AddStringToObject(obj, "mode", "time");
                    add_num(obj, "load", st.load);
                    add_num(obj, "native_load", st.native_load);
                    add_num(obj, "arrival_factor", st.factor);
                    add_num(obj, "gpus", st.gpus);
                    add_num(obj, "nodes", (double)st.nodes);
                    add_num(obj, "seed", s);
                    cJSON_AddStringToObject(obj, "inventory",
                                            o->ngpus ? "fixed, sampled keeping the model mix"
                                                     : "fixed, node list as is");
                    cJSON_AddStringToObject(obj, "estimates", o->exact || oracle ? "exact" : "predicted");
                    add_num(obj, "utilisation", st.utilisation);
                    add_num(obj, "utilisation_arrival", st.utilisation_arrival);
                    cJSON_AddNullToObject(obj, "allocation");
                    add_num(obj, "idle_while_waiting_gpu_hours", st.idle_while_waiting_gpu_hours);
                    add_num(obj, "idle_sliver_gpu_hours", st.idle_sliver_gpu_hours);
                    add_num(obj, "window_idle_nothing_waits_gpu_hours",
                            st.window_idle_nothing_waits_gpu_hours);
                    add_num(obj, "window_idle_fit_gpu_hours", st.window_idle_fit_gpu_hours);
                    add_num(obj, "window_idle_packing_gpu_hours", st.window_idle_packing_gpu_hours);
                    add_num(obj, "window_idle_sliver_gpu_hours", st.window_idle_sliver_gpu_hours);
                    add_num(obj, "idle_while_waiting_fit_gpu_hours", st.idle_while_waiting_fit_gpu_hours);
                    add_num(obj, "idle_while_waiting_model_gpu_hours", st.idle_while_waiting_model_gpu_hours);
                    add_num(obj, "idle_while_waiting_accepts_gpu_hours",
                            st.idle_while_waiting_accepts_gpu_hours);
                    add_num(obj, "wait_mean_s", st.wait_mean_s);
                    add_num(obj, "wait_p50_s", st.wait_p50_s);
                    add_num(obj, "wait_p95_s", st.wait_p95_s);
                    add_num(obj, "wait_p99_s", st.wait_p99_s);
                    add_num(obj, "wait_max_s", st.wait_max_s);
                    add_num(obj, "jct_mean_s", st.jct_mean_s);
                    add_num(obj, "makespan_s", st.makespan_s);
                    add_num(obj, "arrival_window_s", st.arrival_window_s);
                    add_num(obj, "jobs", (double)st.jobs);
                    add_num(obj, "unfinished", (double)st.unfinished);
                    add_num(obj, "starved", (double)st.starved);
                    add_num(obj, "starvation_bound_s", (double)st.starvation_ms / 1000);
                    add_num(obj, "reserved_jobs", (double)st.reserved_jobs);
                    add_num(obj, "reservation_slips", (double)st.reservation_slips);
                    add_num(obj, "slip_mean_s", st.slip_mean_s);
                    add_num(obj, "slip_max_s", st.slip_max_s);
                    add_estimates(obj, o, &st, oracle);
                    add_num(obj, "dropped_unscheduled", (double)st.dropped_unscheduled);
                    add_num(obj, "dropped_since", (double)st.dropped_since);
                    add_num(obj, "dropped_runtime", (double)st.dropped_runtime);
                    add_num(obj, "dropped_cpu_only", (double)st.dropped_cpu_only);
                    add_num(obj, "dropped_no_node", (double)st.dropped_no_node);
                    add_num(obj, "preemptions", (double)st.preemptions);
                    add_num(obj, "preempted_gpu_hours", st.preempted_gpu_hours);
                    add_num(obj, "passes", (double)st.passes);
                    add_num(obj, "events", (double)st.events);
                    add_num(obj, "events_per_s", st.events_per_s);
                    add_num(obj, "wall_s", st.wall_s);
                    cJSON_AddItemToArray(results, obj);
                }
    compare(o, all, ngpus, nloads, seeds, doc);
    compare_fair(o, all, ngpus, nloads, seeds, doc);
    if (!o->json)
        print_estimates(o, all, ngpus, nloads, seeds);
    free(all);
    return 0;
}

/* The pods and their inventory: the node list when given; without one, a
 * trace whose jobs name their team (Philly's) gets --gpus' largest count
 * in nodes of TM_TRACE_PHILLY_NODE_GPUS, which --gpus then samples. */
static int load_trace(const struct opts *o, struct tm_trace *t, char *err, size_t errlen)
{
    int32_t gpus = 0;
    int r;

    if (o->nodes) {
        r = tm_trace_load_nodes(t, o->nodes, err, errlen);
        return r < 0 ? r : tm_trace_load_pods(t, o->pods, err, errlen);
    }
    r = tm_trace_load_pods(t, o->pods, err, errlen);
    if (r < 0)
        return r;
    if (t->njobs == 0 || !t->jobs[0].team[0]) {
        snprintf(err, errlen, "--nodes is required with an openb pod file (%s)", o->pods);
        return TM_EINVAL;
    }
    for (int k = 0; k < o->ngpus; k++)
        if (o->gpus[k] > gpus)
            gpus = o->gpus[k];
    if (gpus < TM_TRACE_PHILLY_NODE_GPUS) {
        snprintf(err, errlen, "--gpus N (at least %d) is required without --nodes: the inventory is "
                              "N/%d nodes of %d GPUs",
                 TM_TRACE_PHILLY_NODE_GPUS, TM_TRACE_PHILLY_NODE_GPUS, TM_TRACE_PHILLY_NODE_GPUS);
        return TM_EINVAL;
    }
    return tm_trace_uniform_nodes(t, (size_t)gpus / TM_TRACE_PHILLY_NODE_GPUS, TM_TRACE_PHILLY_NODE_GPUS,
                                  "philly8");
}

int tm_replay_main(int argc, char **argv)
{
    struct opts o;
    struct tm_trace t = {0};
    const char *pol = NULL;
    char err[512] = "";
    cJSON *doc = NULL, *results = NULL;
    FILE *log = NULL;
    int r, rc = 1;

    r = parse_args(argc, argv, &o, &pol);
    if (r != 0)
        return r == 1 ? 0 : r;
    o.q.policies = pol;
    o.q.json = o.json;
    if (o.q.quotas && o.packing) {
        fprintf(stderr, "tarmac replay: --quotas is for --mode time\n");
        return 2;
    }
    if (!o.q.quotas && parse_policies(&o, pol) != 0)
        return 2;
    if (o.synthetic) {
        struct tm_trace_synth sp = {.seed = 1, .jobs = o.synthetic, .jobs_per_hour = 60,
                                    .gpus = o.ngpus ? o.gpus[0] : 64};
        r = tm_trace_synthesize(&t, &sp);
        if (r < 0) {
            fprintf(stderr, "tarmac replay: could not generate a synthetic trace: %s\n", tm_strerror(r));
            return 2;
        }
    } else {
        r = load_trace(&o, &t, err, sizeof(err));
        if (r < 0) {
            fprintf(stderr, "tarmac replay: %s\n", err[0] ? err : tm_strerror(r));
            tm_trace_release(&t);
            return 2;
        }
    }
    if (o.log_path) {
        log = fopen(o.log_path, "w");
        if (!log) {
            fprintf(stderr, "tarmac replay: could not open log \"%s\": %s\n", o.log_path, strerror(errno));
            goto out;
        }
    }
    doc = cJSON_CreateObject();
    results = cJSON_CreateArray();
    if (!doc || !results) {
        cJSON_Delete(results);
        fprintf(stderr, "tarmac replay: out of memory\n");
        goto out;
    }
    cJSON_AddStringToObject(doc, "pods", o.synthetic ? "synthetic" : o.pods);
    cJSON_AddStringToObject(doc, "nodes", o.synthetic ? "synthetic" : o.nodes ? o.nodes : "uniform");
    cJSON_AddStringToObject(doc, "inventory_note",
                            "fixed inventory: no launches or terminations during replay");
    cJSON_AddItemToObject(doc, "results", results);
    if (!o.json)
        printf("trace: %s; nodes: %s\n", o.synthetic ? "synthetic" : o.pods,
               o.synthetic ? "synthetic" : o.nodes);
    if (o.q.quotas) {
        struct tm_replay_config base = {
            .params = {.starvation_ms = o.starvation_ms}, .exact_estimates = o.exact,
            .since_ms = o.since_ms, .max_runtime_ms = o.max_runtime_ms, .gpus = o.ngpus ? o.gpus[0] : 0,
            .load = o.nloads ? o.loads[0] : 0, .seed = 1, .log = log, .full_pass = o.full_pass,
            .estimate_fallback = o.keys_only ? -1 : o.estimator ? o.estimator : TM_ESTIMATE_FALLBACK_FROM};
        r = replay_quota_run(&o.q, &t, &base, results);
    } else {
        r = o.packing ? run_packing(&o, &t, results) : run_time(&o, &t, log, results, doc);
    }
    if (r == TM_EINVAL) {
        rc = 2;
        goto out;
    }
    if (r < 0) {
        fprintf(stderr, "tarmac replay: could not replay: %s\n", tm_strerror(r));
        goto out;
    }
    if (o.json) {
        char *s = cJSON_Print(doc);
        if (!s) {
            fprintf(stderr, "tarmac replay: out of memory\n");
            goto out;
        }
        printf("%s\n", s);
        cJSON_free(s);
    }
    rc = 0;
out:
    if (log)
        fclose(log);
    cJSON_Delete(doc);
    tm_trace_release(&t);
    return rc;
}
