/*
 * controller/cli/elastic.c: `tarmac replay --elastic`, the command line over
 * tm_elastic_run().
 *
 *   tarmac replay --elastic --pods FILE --prices FILE [--nodes FILE]
 *          [--since S] [--max-runtime S] [--boot-s N] [--spot off|on]
 *          [--hazard X] [--hazards FILE] [--notice-s N] [--copies K] [--policy P[,P...]]
 *          [--tick-s N] [--grace-s N] [--checkpointable none|be|all]
 *          [--deadline-slack X] [--consolidate-restart on|off] [--seed N]
 *          [--log FILE] [--json]
 *   tarmac replay --elastic --pods FILE --prices FILE --owned-gpus N [--owned-cost X]
 *          [--cloud-type NAME] [--policy owned-only,zero-wait,constant-wait,tarmac]
 *          [--burst-wait S] [--wait-value X] [--starvation S] [--spot off|on]
 *          [--boot-s N] [--tick-s N] [--grace-s N] [--since S] [--max-runtime S]
 *          [--log FILE] [--json]
 *
 * With --owned-gpus the fleet is an owned one of N GPUs (8-GPU nodes,
 * charged X dollars per GPU-hour whether used or not) with the clouds for
 * the overflow (controller/replay/elastic_owned.h): --cloud-type names the
 * 8-GPU type of the price table bought (default the first 8-GPU type),
 * --burst-wait is constant-wait's wait, --wait-value the dollars an hour of
 * a waiting GPU is worth to tarmac's cost rule (default the type's
 * on-demand price per GPU-hour), --starvation the bound (default 48 h).
 *
 * --consolidate-restart off keeps tarmac and the oracle from restarting
 * preemptible work that cannot checkpoint (the figures without
 * consolidation by restart, measured in the same binary).
 *
 * Every policy runs on the same input in the same process; one result each.
 * --hazards FILE (core/spot_hazards.h) gives each spot (type, zone)
 * of the price table that the file names its own hazard and launch
 * availability; the others keep --hazard.
 */
#include "controller/cli/cli.h"
#include "controller/replay/elastic.h"
#include "controller/replay/elastic_owned.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cjson/cJSON.h>

#include "core/model.h"
#include "core/err.h"
#include "core/units.h"

static void usage(FILE *f)
{
    fprintf(f, "usage: tarmac replay --elastic --pods FILE --prices FILE [--nodes FILE]\n"
               "         [--since S] [--max-runtime S] [--boot-s N] [--spot off|on] [--hazard X]\n"
               "         [--hazards FILE] [--notice-s N] [--copies K] [--policy static,reactive,tarmac,oracle]\n"
               "         [--tick-s N] [--grace-s N] [--checkpointable none|be|all]\n"
               "         [--deadline-slack X] [--consolidate-restart on|off] [--seed N] [--log FILE]\n"
               "         [--json]\n"
               "       tarmac replay --elastic --pods FILE --prices FILE --owned-gpus N [--owned-cost X]\n"
               "         [--cloud-type NAME] [--policy owned-only,zero-wait,constant-wait,tarmac]\n"
               "         [--burst-wait S] [--wait-value X] [--starvation S] [--spot off|on]\n"
               "         [--boot-s N] [--tick-s N] [--grace-s N] [--since S] [--max-runtime S]\n"
               "         [--log FILE] [--json]\n");
}

static int bad(const char *fmt, const char *arg)
{
    fprintf(stderr, "tarmac replay --elastic: ");
    fprintf(stderr, fmt, arg);
    fprintf(stderr, "\n");
    return 2;
}

static bool num(const char *s, double lo, double hi, double *ret)
{
    char *end;
    double v;
    errno = 0;
    v = strtod(s, &end);
    if (errno || end == s || *end || !(v >= lo && v <= hi))
        return false;
    *ret = v;
    return true;
}

/* One policy's result as --json prints it. */
static cJSON *result_json(const struct tm_elastic_config *c, const struct tm_elastic_stats *st,
                          const struct tm_price_table *prices, const char *hazards_path)
{
    cJSON *o = cJSON_CreateObject();

    cJSON_AddStringToObject(o, "policy", tm_elastic_policy_name(c->policy));
    cJSON_AddBoolToObject(o, "spot", c->spot);
    cJSON_AddBoolToObject(o, "consolidate_restart", c->consolidate_restart);
    cJSON_AddNumberToObject(o, "hazard", c->hazard_per_hour);
    if (hazards_path)
        cJSON_AddStringToObject(o, "hazards", hazards_path);
    cJSON_AddNumberToObject(o, "boot_s", (double)c->boot_ms / 1e3);
    cJSON_AddNumberToObject(o, "copies", c->copies);
    cJSON_AddNumberToObject(o, "jobs", (double)st->jobs);
    cJSON_AddNumberToObject(o, "dropped", (double)st->dropped);
    cJSON_AddNumberToObject(o, "unfinished", (double)st->unfinished);
    cJSON_AddNumberToObject(o, "cost_usd", st->cost_usd);
    cJSON_AddNumberToObject(o, "usd_per_useful_gpu_hour",
                            st->useful_gpu_hours > 0 ? st->cost_usd / st->useful_gpu_hours : 0);
    cJSON_AddNumberToObject(o, "lower_bound_usd", st->lower_bound_usd);
    cJSON_AddNumberToObject(o, "floor_usd", st->floor_usd);
    cJSON_AddNumberToObject(o, "cost_ratio",
                            st->lower_bound_usd > 0 ? st->cost_usd / st->lower_bound_usd : 0);
    cJSON_AddNumberToObject(o, "floor_ratio", st->floor_usd > 0 ? st->cost_usd / st->floor_usd : 0);
    cJSON_AddNumberToObject(o, "paid_utilisation",
                            st->paid_gpu_hours > 0 ? st->useful_gpu_hours / st->paid_gpu_hours : 0);
    cJSON_AddNumberToObject(o, "wait_mean_s", st->wait_mean_s);
    cJSON_AddNumberToObject(o, "wait_p99_s", st->wait_p99_s);
    cJSON_AddNumberToObject(o, "waited_longer_than_boot_share", st->waited_longer_than_boot_share);
    cJSON_AddNumberToObject(o, "interruptions", (double)st->interruptions);
    cJSON_AddNumberToObject(o, "lost_gpu_hours", st->lost_gpu_hours);
    cJSON_AddNumberToObject(o, "be_gpu_hours", st->be_gpu_hours);
    cJSON_AddNumberToObject(o, "deadlines", (double)st->deadlines);
    cJSON_AddNumberToObject(o, "deadlines_missed", (double)st->deadlines_missed);
    cJSON_AddNumberToObject(o, "budget_overshoot_cents", st->budget_overshoot_cents);
    cJSON_AddNumberToObject(o, "launches", (double)st->launches);
    cJSON_AddNumberToObject(o, "terminations", (double)st->terminations);
    cJSON_AddNumberToObject(o, "substitutions", (double)st->substitutions);
    cJSON_AddNumberToObject(o, "moves", (double)st->moves);
    cJSON_AddNumberToObject(o, "restarts", (double)st->restarts);
    cJSON_AddNumberToObject(o, "restarted_jobs", (double)st->restarted_jobs);
    cJSON_AddNumberToObject(o, "redone_gpu_hours", st->redone_gpu_hours);
    cJSON_AddNumberToObject(o, "drains", (double)st->drains);
    cJSON_AddNumberToObject(o, "refusals", (double)st->refusals);
    cJSON_AddNumberToObject(o, "peak_nodes", (double)st->peak_nodes);
    cJSON_AddNumberToObject(o, "known_estimates", (double)st->known_estimates);
    cJSON_AddNumberToObject(o, "evictions", (double)st->evictions);
    cJSON_AddNumberToObject(o, "spot_shortages", (double)st->spot_shortages);
    {
        cJSON *bl = cJSON_AddArrayToObject(o, "spot_launches_by_zone");
        cJSON *bi = cJSON_AddArrayToObject(o, "interruptions_by_zone");
        for (size_t z = 0; z < (prices->nzones ? prices->nzones : 1); z++) {
            cJSON_AddItemToArray(bl, cJSON_CreateNumber((double)st->spot_launches_by_zone[z]));
            cJSON_AddItemToArray(bi, cJSON_CreateNumber((double)st->interruptions_by_zone[z]));
        }
    }
    cJSON_AddNumberToObject(o, "paid_gpu_hours", st->paid_gpu_hours);
    cJSON_AddNumberToObject(o, "useful_gpu_hours", st->useful_gpu_hours);
    cJSON_AddNumberToObject(o, "booting_gpu_hours", st->booting_gpu_hours);
    cJSON_AddNumberToObject(o, "empty_gpu_hours", st->empty_gpu_hours);
    cJSON_AddNumberToObject(o, "free_on_busy_gpu_hours", st->free_on_busy_gpu_hours);
    cJSON_AddNumberToObject(o, "wall_s", st->wall_s);
    return o;
}

/* One policy's result as a table row. */
static void result_row(const struct tm_elastic_config *c, const struct tm_elastic_stats *st)
{
    printf("%-9s %10.0f %9.2f %6.3f %6.3f %6.3f %7.0f %8.0f %8.2f %6zu %5.1f %8.1f %8.1f %5zu %6.0f\n",
           tm_elastic_policy_name(c->policy), st->cost_usd,
           st->useful_gpu_hours > 0 ? st->cost_usd / st->useful_gpu_hours : 0,
           st->lower_bound_usd > 0 ? st->cost_usd / st->lower_bound_usd : 0,
           st->floor_usd > 0 ? st->cost_usd / st->floor_usd : 0,
           st->paid_gpu_hours > 0 ? st->useful_gpu_hours / st->paid_gpu_hours : 0,
           st->wait_mean_s, st->wait_p99_s, st->waited_longer_than_boot_share * 100,
           st->interruptions, st->be_gpu_hours > 0 ? 100 * st->lost_gpu_hours / st->be_gpu_hours : 0,
           st->lost_gpu_hours, st->redone_gpu_hours, st->deadlines_missed, st->budget_overshoot_cents);
    fflush(stdout);
}

/* What the command line asked for, beside the replay's own settings. */
struct elastic_args {
    struct tm_elastic_config base;
    const char *pods, *prices_path, *policies, *log_path, *hazards_path;
    bool json;
    int pol[TM_ELASTIC_POLICY_MAX], npol;
    /* --owned-gpus: the owned-fleet replay (elastic_owned.h) */
    struct tm_owned_config owned;
    const char *cloud_type;
    int opol[TM_OWNED_POLICY_MAX], nopol;
};

/* An on/off or named choice: its index in names, or -1. */
static int choice(const char *val, const char *const *names, int n)
{
    for (int k = 0; k < n; k++)
        if (strcmp(val, names[k]) == 0)
            return k;
    return -1;
}

/* One option that takes a value; 0, or the exit code (message written). */
static int parse_option(struct elastic_args *ea, const char *a, const char *val)
{
    static const char *const offon[] = {"off", "on"};
    static const char *const ckpt[] = {"none", "be", "all"};
    struct tm_elastic_config *base = &ea->base;
    double v;
    int k;

    if (strcmp(a, "--pods") == 0) {
        ea->pods = val;
    } else if (strcmp(a, "--nodes") == 0) {
        /* accepted for the same inputs as replay; the fleet is elastic */
    } else if (strcmp(a, "--prices") == 0) {
        ea->prices_path = val;
    } else if (strcmp(a, "--log") == 0) {
        ea->log_path = val;
    } else if (strcmp(a, "--policy") == 0) {
        ea->policies = val;
    } else if (strcmp(a, "--since") == 0 || strcmp(a, "--max-runtime") == 0) {
        int64_t ms;
        if (tm_duration_parse(val, &ms) < 0)
            return bad("bad duration \"%s\" (seconds, or e.g. 30m, 2h, 1d)", val);
        if (a[2] == 's')
            base->since_ms = ms;
        else
            base->max_runtime_ms = ms;
    } else if (strcmp(a, "--boot-s") == 0) {
        if (!num(val, 0, 86400, &v))
            return bad("bad --boot-s \"%s\" (0..86400)", val);
        base->boot_ms = (int64_t)(v * 1000);
    } else if (strcmp(a, "--notice-s") == 0) {
        if (!num(val, 0, 3600, &v))
            return bad("bad --notice-s \"%s\" (0..3600)", val);
        base->notice_ms = (int64_t)(v * 1000);
    } else if (strcmp(a, "--tick-s") == 0) {
        if (!num(val, 1, 3600, &v))
            return bad("bad --tick-s \"%s\" (1..3600)", val);
        base->tick_ms = (int64_t)(v * 1000);
    } else if (strcmp(a, "--grace-s") == 0) {
        if (!num(val, 0, 86400, &v))
            return bad("bad --grace-s \"%s\" (0..86400)", val);
        base->idle_grace_ms = (int64_t)(v * 1000);
    } else if (strcmp(a, "--spot") == 0) {
        if ((k = choice(val, offon, 2)) < 0)
            return bad("bad --spot \"%s\" (off, on)", val);
        base->spot = k == 1;
    } else if (strcmp(a, "--consolidate-restart") == 0) {
        if ((k = choice(val, offon, 2)) < 0)
            return bad("bad --consolidate-restart \"%s\" (off, on)", val);
        base->consolidate_restart = k == 1;
    } else if (strcmp(a, "--hazard") == 0) {
        if (!num(val, 0, 100, &v))
            return bad("bad --hazard \"%s\" (interruptions per node-hour, 0..100)", val);
        base->hazard_per_hour = v;
    } else if (strcmp(a, "--hazards") == 0) {
        ea->hazards_path = val;
    } else if (strcmp(a, "--copies") == 0) {
        if (!num(val, 1, 64, &v) || v != (int)v)
            return bad("bad --copies \"%s\" (1..64)", val);
        base->copies = (int)v;
    } else if (strcmp(a, "--seed") == 0) {
        if (!num(val, 0, 1e15, &v))
            return bad("bad --seed \"%s\"", val);
        base->seed = (uint64_t)v;
    } else if (strcmp(a, "--deadline-slack") == 0) {
        if (!num(val, 1, 1000, &v))
            return bad("bad --deadline-slack \"%s\" (>= 1: deadline = submit + X x runtime)", val);
        base->deadline_slack = v;
    } else if (strcmp(a, "--owned-gpus") == 0) {
        if (!num(val, 8, 1e7, &v) || v != (int32_t)v || (int32_t)v % TM_OWNED_NODE_GPUS)
            return bad("bad --owned-gpus \"%s\" (a multiple of 8, at least 8: 8-GPU owned nodes)", val);
        ea->owned.owned_gpus = (int32_t)v;
    } else if (strcmp(a, "--owned-cost") == 0) {
        if (!num(val, 0, 1e6, &v))
            return bad("bad --owned-cost \"%s\" (dollars per owned GPU-hour, >= 0)", val);
        ea->owned.owned_usd_per_gpu_hour = v;
    } else if (strcmp(a, "--wait-value") == 0) {
        if (!num(val, 0, 1e6, &v) || v <= 0)
            return bad("bad --wait-value \"%s\" (dollars an hour of a job's waiting is worth, > 0)", val);
        ea->owned.wait_value_per_hour = v;
    } else if (strcmp(a, "--cloud-type") == 0) {
        ea->cloud_type = val;
    } else if (strcmp(a, "--burst-wait") == 0 || strcmp(a, "--starvation") == 0) {
        int64_t ms;
        if (tm_duration_parse(val, &ms) < 0 || ms < 0)
            return bad("bad duration \"%s\" (seconds, or e.g. 30m, 2h, 1d)", val);
        if (a[2] == 'b')
            ea->owned.burst_wait_ms = ms;
        else
            ea->owned.starvation_ms = ms;
    } else if (strcmp(a, "--checkpointable") == 0) {
        static const enum tm_elastic_ckpt kinds[] = {TM_CKPT_NONE, TM_CKPT_BE, TM_CKPT_ALL};
        if ((k = choice(val, ckpt, 3)) < 0)
            return bad("bad --checkpointable \"%s\" (none, be, all)", val);
        base->ckpt = kinds[k];
    } else {
        usage(stderr);
        return bad("unrecognized option \"%s\"", a);
    }
    return 0;
}

/* --policy's comma-separated names into ea->pol (ea->opol with
 * --owned-gpus); 0 or the exit code. */
static int parse_policies(struct elastic_args *ea)
{
    bool owned = ea->owned.owned_gpus > 0;
    char buf[128], *p, *c;

    if (strlen(ea->policies) >= sizeof(buf))
        return bad("bad --policy \"%s\"", ea->policies);
    memcpy(buf, ea->policies, strlen(ea->policies) + 1);
    for (p = buf;; p = c + 1) {
        int k;
        c = strchr(p, ',');
        if (c)
            *c = '\0';
        if (owned) {
            k = tm_owned_policy_parse(p);
            if (k < 0 || ea->nopol >= TM_OWNED_POLICY_MAX)
                return bad("unrecognized policy \"%s\" with --owned-gpus (owned-only, zero-wait, "
                           "constant-wait, tarmac)", p);
            ea->opol[ea->nopol++] = k;
        } else {
            k = tm_elastic_policy_parse(p);
            if (k < 0 || ea->npol >= TM_ELASTIC_POLICY_MAX)
                return bad("unrecognized policy \"%s\" (static, reactive, tarmac, oracle)", p);
            ea->pol[ea->npol++] = k;
        }
        if (!c)
            return 0;
    }
}

/* The command line into ea: -1 to go on, else the exit code. */
static int parse_args(int argc, char **argv, struct elastic_args *ea)
{
    tm_elastic_config_default(&ea->base);
    tm_owned_config_default(&ea->owned);
    ea->policies = NULL;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *val = i + 1 < argc ? argv[i + 1] : NULL;
        int r;

        if (strcmp(a, "--elastic") == 0)
            continue;
        if (strcmp(a, "--json") == 0) {
            ea->json = true;
            continue;
        }
        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            usage(stdout);
            return 0;
        }
        if (!val)
            return bad("option %s needs a value", a);
        i++;
        if ((r = parse_option(ea, a, val)) != 0)
            return r;
    }
    if (!ea->pods || !ea->prices_path) {
        usage(stderr);
        return 2;
    }
    if (!ea->policies)
        ea->policies = ea->owned.owned_gpus > 0 ? "owned-only,zero-wait,constant-wait,tarmac"
                                                : "static,reactive,tarmac,oracle";
    if (ea->owned.owned_gpus <= 0 && (ea->cloud_type || ea->owned.owned_usd_per_gpu_hour > 0))
        return bad("%s needs --owned-gpus", ea->cloud_type ? "--cloud-type" : "--owned-cost");
    return parse_policies(ea) ? 2 : -1;
}

/* --hazards' table, which must name some (type, zone) of the prices: a
 * table for other names is a mistake, not "no change".  0 or the exit
 * code; *ret NULL without the option. */
static int load_hazards(const char *path, const char *prices_path, const struct tm_price_table *prices,
                        struct tm_spot_hazards **ret)
{
    struct tm_spot_hazards *hazards;
    char err[512];
    size_t used = 0;

    *ret = NULL;
    if (!path)
        return 0;
    hazards = malloc(sizeof(*hazards));
    if (!hazards)
        return bad("%s", tm_strerror(TM_ENOMEM));
    if (tm_spot_hazards_load(path, hazards, err, sizeof(err)) < 0) {
        free(hazards);
        return bad("%s", err);
    }
    for (size_t t = 0; t < prices->ntypes; t++)
        for (size_t z = 0; z < (prices->nzones ? prices->nzones : 1); z++)
            if (tm_spot_hazards_find(hazards, prices->types[t].name, prices->nzones ? prices->zones[z] : "sim-a"))
                used++;
    if (used == 0) {
        free(hazards);
        fprintf(stderr, "tarmac replay --elastic: %s names no (type, zone) of %s\n", path, prices_path);
        return 2;
    }
    *ret = hazards;
    return 0;
}

/* {"results": arr} on stdout; takes arr. */
static void print_results(cJSON *arr)
{
    cJSON *doc = cJSON_CreateObject();
    char *s = NULL;

    if (doc && cJSON_AddItemToObject(doc, "results", arr)) {
        arr = NULL;
        s = cJSON_Print(doc);
    }
    cJSON_Delete(doc);
    cJSON_Delete(arr);
    if (s) {
        printf("%s\n", s);
        free(s);
    }
}

/* Each policy replayed on the trace, as a table or one JSON document
 * with a "results" array (as `tarmac replay --json`); 0 or 1. */
static int run_policies(const struct elastic_args *ea, const struct tm_trace *trace,
                        const struct tm_price_table *prices)
{
    cJSON *arr = NULL;
    int rc = 0;

    if (ea->json)
        arr = cJSON_CreateArray();
    else
        printf("%-9s %10s %9s %6s %6s %6s %7s %8s %8s %6s %5s %8s %8s %5s %6s\n", "policy", "cost_usd",
               "$/useGPUh", "xLB", "xfloor", "util", "wait_s", "p99_s", ">boot%", "intr", "lost%",
               "lost_gh", "redone_gh", "dlmis", "over_c");
    for (int k = 0; k < ea->npol; k++) {
        struct tm_elastic_config c = ea->base;
        struct tm_elastic_stats st;
        c.policy = (enum tm_elastic_policy)ea->pol[k];
        rc = tm_elastic_run(trace, &c, &st);
        if (rc < 0) {
            fprintf(stderr, "tarmac replay --elastic: could not replay %s: %s\n",
                    tm_elastic_policy_name(c.policy), tm_strerror(rc));
            cJSON_Delete(arr);
            return 1;
        }
        if (ea->json)
            cJSON_AddItemToArray(arr, result_json(&c, &st, prices, ea->hazards_path));
        else
            result_row(&c, &st);
    }
    if (ea->json)
        print_results(arr);
    return 0;
}

/* The 8-GPU type --cloud-type names (default the table's first 8-GPU
 * type); its index, or -1 with the message written. */
static int cloud_type_of(const char *name, const struct tm_price_table *prices)
{
    for (size_t t = 0; t < prices->ntypes; t++)
        if (name ? strcmp(prices->types[t].name, name) == 0 : prices->types[t].gpus == TM_OWNED_NODE_GPUS) {
            if (prices->types[t].gpus != TM_OWNED_NODE_GPUS) {
                bad("--cloud-type \"%s\" has not 8 GPUs (owned and bought nodes are 8-GPU nodes)",
                    name);
                return -1;
            }
            return (int)t;
        }
    if (name)
        bad("--cloud-type \"%s\" is not a type of the price table", name);
    else
        bad("%s", "the price table has no 8-GPU type (--cloud-type)");
    return -1;
}

/* One owned-fleet policy's result as --json prints it: the keys other
 * tools read (policy, cloud_usd, owned_utilisation, jct_mean_s, jct_p95_s,
 * wait_mean_s, burst_jobs, starved), then the rest. */
static cJSON *owned_json(const struct tm_owned_config *c, const struct tm_owned_stats *st,
                         const struct tm_price_table *prices)
{
    cJSON *o = cJSON_CreateObject();

    cJSON_AddStringToObject(o, "policy", tm_owned_policy_name(c->policy));
    cJSON_AddNumberToObject(o, "cloud_usd", st->cloud_usd);
    cJSON_AddNumberToObject(o, "owned_utilisation", st->owned_utilisation);
    cJSON_AddNumberToObject(o, "jct_mean_s", st->jct_mean_s);
    cJSON_AddNumberToObject(o, "jct_p95_s", st->jct_p95_s);
    cJSON_AddNumberToObject(o, "wait_mean_s", st->wait_mean_s);
    cJSON_AddNumberToObject(o, "burst_jobs", (double)st->burst_jobs);
    cJSON_AddNumberToObject(o, "starved", (double)st->starved);
    cJSON_AddNumberToObject(o, "owned_usd", st->owned_usd);
    cJSON_AddNumberToObject(o, "owned_gpus", c->owned_gpus);
    cJSON_AddStringToObject(o, "cloud_type", prices->types[c->cloud_type].name);
    cJSON_AddNumberToObject(o, "burst_wait_s", c->policy == TM_OWNED_CONSTANT_WAIT
                                                   ? (double)c->burst_wait_ms / 1e3 : 0);
    cJSON_AddNumberToObject(o, "spot_bursts", (double)st->spot_bursts);
    cJSON_AddNumberToObject(o, "launches", (double)st->launches);
    cJSON_AddNumberToObject(o, "jobs", (double)st->jobs);
    cJSON_AddNumberToObject(o, "dropped", (double)st->dropped);
    cJSON_AddNumberToObject(o, "unfinished", (double)st->unfinished);
    cJSON_AddNumberToObject(o, "owned_gpu_hours", st->owned_gpu_hours);
    cJSON_AddNumberToObject(o, "cloud_gpu_hours", st->cloud_gpu_hours);
    cJSON_AddNumberToObject(o, "cloud_paid_gpu_hours", st->cloud_paid_gpu_hours);
    cJSON_AddNumberToObject(o, "gang_gpu_hours_share", st->gang_gpu_hours_share);
    cJSON_AddNumberToObject(o, "span_h", st->span_h);
    cJSON_AddNumberToObject(o, "wall_s", st->wall_s);
    return o;
}

/* Each owned-fleet policy replayed on the trace, as a table or one JSON
 * document with a "results" array; 0 or 1 (2: a bad --cloud-type). */
static int run_owned(struct elastic_args *ea, const struct tm_trace *trace,
                     const struct tm_price_table *prices)
{
    cJSON *arr = NULL;
    int type = cloud_type_of(ea->cloud_type, prices);

    if (type < 0)
        return 2;
    if (ea->json)
        arr = cJSON_CreateArray();
    else
        printf("%-13s %12s %9s %10s %10s %9s %8s %7s %12s\n", "policy", "cloud_usd", "owned_util",
               "jct_mean_s", "jct_p95_s", "wait_s", "bursts", "starved", "owned_usd");
    for (int k = 0; k < ea->nopol; k++) {
        struct tm_owned_config c = ea->owned;
        struct tm_owned_stats st;
        int rc;
        c.policy = (enum tm_owned_policy)ea->opol[k];
        c.prices = prices;
        c.cloud_type = type;
        c.boot_ms = ea->base.boot_ms;
        c.tick_ms = ea->base.tick_ms;
        c.idle_grace_ms = ea->base.idle_grace_ms;
        c.spot = ea->base.spot;
        c.since_ms = ea->base.since_ms;
        c.max_runtime_ms = ea->base.max_runtime_ms;
        c.log = ea->base.log;
        rc = tm_owned_run(trace, &c, &st);
        if (rc < 0) {
            fprintf(stderr, "tarmac replay --elastic: could not replay %s: %s\n",
                    tm_owned_policy_name(c.policy), tm_strerror(rc));
            cJSON_Delete(arr);
            return 1;
        }
        if (ea->json)
            cJSON_AddItemToArray(arr, owned_json(&c, &st, prices));
        else
            printf("%-13s %12.0f %9.3f %10.0f %10.0f %9.0f %8zu %7zu %12.0f\n",
                   tm_owned_policy_name(c.policy), st.cloud_usd, st.owned_utilisation, st.jct_mean_s,
                   st.jct_p95_s, st.wait_mean_s, st.burst_jobs, st.starved, st.owned_usd);
        fflush(stdout);
    }
    if (ea->json)
        print_results(arr);
    return 0;
}

int tm_elastic_main(int argc, char **argv)
{
    struct elastic_args ea = {0};
    struct tm_price_table prices;
    struct tm_spot_hazards *hazards = NULL;
    struct tm_trace trace;
    char err[512];
    int rc;

    if ((rc = parse_args(argc, argv, &ea)) >= 0)
        return rc;
    rc = tm_prices_load(ea.prices_path, &prices, err, sizeof(err));
    if (rc < 0) {
        fprintf(stderr, "tarmac replay --elastic: %s\n", err);
        return 2;
    }
    if ((rc = load_hazards(ea.hazards_path, ea.prices_path, &prices, &hazards)) != 0)
        return rc;
    ea.base.hazards = hazards;
    memset(&trace, 0, sizeof(trace));
    rc = tm_trace_load_pods(&trace, ea.pods, err, sizeof(err));
    if (rc < 0) {
        fprintf(stderr, "tarmac replay --elastic: %s\n", rc == TM_EINVAL ? err : tm_strerror(rc));
        tm_trace_release(&trace);
        free(hazards);
        return 2;
    }
    ea.base.prices = &prices;
    if (ea.log_path) {
        ea.base.log = fopen(ea.log_path, "w");
        if (!ea.base.log) {
            tm_trace_release(&trace);
            free(hazards);
            return bad("could not open log \"%s\"", ea.log_path);
        }
    }
    rc = ea.owned.owned_gpus > 0 ? run_owned(&ea, &trace, &prices) : run_policies(&ea, &trace, &prices);
    if (ea.base.log)
        fclose(ea.base.log);
    tm_trace_release(&trace);
    free(hazards);
    return rc;
}
