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
               "         [--json]\n");
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

/* What the command line names beside the replay's configuration. */
struct elastic_args {
    const char *pods, *prices, *policies, *log, *hazards;
    bool json;
};

/* Option a with its value val, into *base or *o: 0, or the exit status
 * of a bad value (2), or -1 for an option it does not know. */
static int option_value(struct tm_elastic_config *base, struct elastic_args *o, const char *a, const char *val)
{
    double v;

    if (strcmp(a, "--pods") == 0) {
        o->pods = val;
    } else if (strcmp(a, "--nodes") == 0) {
        /* accepted for the same inputs as replay; the fleet is elastic */
    } else if (strcmp(a, "--prices") == 0) {
        o->prices = val;
    } else if (strcmp(a, "--log") == 0) {
        o->log = val;
    } else if (strcmp(a, "--policy") == 0) {
        o->policies = val;
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
        if (strcmp(val, "on") == 0)
            base->spot = true;
        else if (strcmp(val, "off") == 0)
            base->spot = false;
        else
            return bad("bad --spot \"%s\" (off, on)", val);
    } else if (strcmp(a, "--consolidate-restart") == 0) {
        if (strcmp(val, "on") == 0)
            base->consolidate_restart = true;
        else if (strcmp(val, "off") == 0)
            base->consolidate_restart = false;
        else
            return bad("bad --consolidate-restart \"%s\" (off, on)", val);
    } else if (strcmp(a, "--hazard") == 0) {
        if (!num(val, 0, 100, &v))
            return bad("bad --hazard \"%s\" (interruptions per node-hour, 0..100)", val);
        base->hazard_per_hour = v;
    } else if (strcmp(a, "--hazards") == 0) {
        o->hazards = val;
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
    } else if (strcmp(a, "--checkpointable") == 0) {
        if (strcmp(val, "none") == 0)
            base->ckpt = TM_CKPT_NONE;
        else if (strcmp(val, "be") == 0)
            base->ckpt = TM_CKPT_BE;
        else if (strcmp(val, "all") == 0)
            base->ckpt = TM_CKPT_ALL;
        else
            return bad("bad --checkpointable \"%s\" (none, be, all)", val);
    } else {
        return -1;
    }
    return 0;
}

/* --policy's list into pol[0..*npol).  0 or 2 (a bad name). */
static int policies_parse(const char *policies, int *pol, int *npol)
{
    char buf[128], *p, *c;

    if (strlen(policies) >= sizeof(buf))
        return bad("bad --policy \"%s\"", policies);
    memcpy(buf, policies, strlen(policies) + 1);
    p = buf;
    for (;;) {
        int k;
        c = strchr(p, ',');
        if (c)
            *c = '\0';
        k = tm_elastic_policy_parse(p);
        if (k < 0 || *npol >= TM_ELASTIC_POLICY_MAX)
            return bad("unrecognized policy \"%s\" (static, reactive, tarmac, oracle)", p);
        pol[(*npol)++] = k;
        if (!c)
            break;
        p = c + 1;
    }
    return 0;
}

/* --hazards FILE, which must name some (type, zone) of the price table
 * (a table for other names is a mistake, not "no change").  0 or 2. */
static int hazards_load(const char *path, const struct tm_price_table *prices, const char *prices_path,
                        struct tm_spot_hazards **ret)
{
    struct tm_spot_hazards *hazards = malloc(sizeof(*hazards));
    char err[512];
    size_t used = 0;
    int rc;

    if (!hazards)
        return bad("%s", tm_strerror(TM_ENOMEM));
    rc = tm_spot_hazards_load(path, hazards, err, sizeof(err));
    if (rc < 0) {
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

/* The command line into *base and *o: 0, or the exit status to return
 * (*done: --help answered). */
static int args_parse(int argc, char **argv, struct tm_elastic_config *base, struct elastic_args *o, bool *done)
{
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *val = i + 1 < argc ? argv[i + 1] : NULL;
        int rc;
        if (strcmp(a, "--elastic") == 0)
            continue;
        if (strcmp(a, "--json") == 0) {
            o->json = true;
            continue;
        }
        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            usage(stdout);
            *done = true;
            return 0;
        }
        if (!val)
            return bad("option %s needs a value", a);
        i++;
        rc = option_value(base, o, a, val);
        if (rc < 0) {
            usage(stderr);
            return bad("unrecognized option \"%s\"", a);
        }
        if (rc > 0)
            return rc;
    }
    if (!o->pods || !o->prices) {
        usage(stderr);
        return 2;
    }
    return 0;
}

int tm_elastic_main(int argc, char **argv)
{
    struct tm_elastic_config base;
    struct tm_price_table prices;
    struct tm_spot_hazards *hazards = NULL;
    struct tm_trace trace;
    struct elastic_args o = {.policies = "static,reactive,tarmac,oracle"};
    const char *hazards_path;
    bool json, done = false;
    int pol[TM_ELASTIC_POLICY_MAX], npol = 0;
    char err[512];
    cJSON *arr = NULL;
    int rc = 0;

    tm_elastic_config_default(&base);
    rc = args_parse(argc, argv, &base, &o, &done);
    if (rc != 0 || done)
        return rc;
    json = o.json;
    hazards_path = o.hazards;
    rc = policies_parse(o.policies, pol, &npol);
    if (rc != 0)
        return rc;
    rc = tm_prices_load(o.prices, &prices, err, sizeof(err));
    if (rc < 0) {
        fprintf(stderr, "tarmac replay --elastic: %s\n", err);
        return 2;
    }
    if (hazards_path) {
        rc = hazards_load(hazards_path, &prices, o.prices, &hazards);
        if (rc != 0)
            return rc;
        base.hazards = hazards;
    }
    memset(&trace, 0, sizeof(trace));
    rc = tm_trace_load_pods(&trace, o.pods, err, sizeof(err));
    if (rc < 0) {
        fprintf(stderr, "tarmac replay --elastic: %s\n", rc == TM_EINVAL ? err : tm_strerror(rc));
        tm_trace_release(&trace);
        free(hazards);
        return 2;
    }
    base.prices = &prices;
    if (o.log) {
        base.log = fopen(o.log, "w");
        if (!base.log) {
            tm_trace_release(&trace);
            free(hazards);
            return bad("could not open log \"%s\"", o.log);
        }
    }
    if (json)
        arr = cJSON_CreateArray();
    else
        printf("%-9s %10s %9s %6s %6s %6s %7s %8s %8s %6s %5s %8s %8s %5s %6s\n", "policy", "cost_usd",
               "$/useGPUh", "xLB", "xfloor", "util", "wait_s", "p99_s", ">boot%", "intr", "lost%",
               "lost_gh", "redone_gh", "dlmis", "over_c");
    for (int k = 0; k < npol; k++) {
        struct tm_elastic_config c = base;
        struct tm_elastic_stats st;
        c.policy = (enum tm_elastic_policy)pol[k];
        rc = tm_elastic_run(&trace, &c, &st);
        if (rc < 0) {
            fprintf(stderr, "tarmac replay --elastic: could not replay %s: %s\n",
                    tm_elastic_policy_name(c.policy), tm_strerror(rc));
            rc = 1;
            goto out;
        }
        if (json) {
            cJSON_AddItemToArray(arr, result_json(&c, &st, &prices, hazards_path));
        } else {
            result_row(&c, &st);
        }
    }
    if (json) {
        /* One document with a "results" array, as `tarmac replay --json`. */
        cJSON *doc = cJSON_CreateObject();
        char *s = NULL;
        if (doc && cJSON_AddItemToObject(doc, "results", arr)) {
            arr = NULL;
            s = cJSON_Print(doc);
        }
        cJSON_Delete(doc);
        if (s) {
            printf("%s\n", s);
            free(s);
        }
    }
    rc = 0;
out:
    cJSON_Delete(arr);
    if (base.log)
        fclose(base.log);
    tm_trace_release(&trace);
    free(hazards);
    return rc;
}
