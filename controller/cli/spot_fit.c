/*
 * controller/cli/spot_fit.c: `tarmac spot-fit`, the fitted spot hazards
 * and availabilities of the public traces as a table, as JSON, or as the
 * hazard table the elastic replay reads (core/spot_hazards.h).
 *
 *   tarmac spot-fit --traces DIR [--provider aws|gcp] [--json | --yaml]
 *
 * DIR is ../shared/traces/spot (or its skypilot-spot-traces folder).
 * The YAML carries its provenance in comments: the command, the date, the
 * upstream repository and commit (README section 1) and, per row, the
 * files it pooled.
 */
#include "controller/fleet/spot_traces.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <cjson/cJSON.h>

#include "controller/cli/cli.h"
#include "core/err.h"

/* Where the files this reader's layout comes from were taken
 * (../shared/traces/spot/README.md, section 1). */
#define UPSTREAM "skypilot-org/spot-traces @ 221da1ab9bdfe7966da296265d7694d52dc0c5a6 " \
                 "(2024-03-31; data added in 714f4bce637eb668a5824335b373f6687c0d37c7)"

enum format { TABLE, JSON, YAML };

static void usage(FILE *f)
{
    fprintf(f, "usage: tarmac spot-fit --traces DIR [--provider aws|gcp] [--json | --yaml]\n\n"
               "Fit the spot interruption hazard (preemptions per instance-hour, exponential\n"
               "lifetimes) and the launch availability per instance type and zone from the\n"
               "\"Can't Be Late\" spot traces under DIR (../shared/traces/spot).  --yaml writes\n"
               "the hazard table that `tarmac replay --elastic --hazards FILE` reads.\n");
}

static void print_table(const struct tm_spot_fit *rows, size_t n, const char *provider)
{
    printf("%-8s %-14s %-14s %5s %8s %8s %8s %7s %9s %6s %8s %s\n", "provider", "type", "zone",
           "nodes", "hazard/h", "lo95", "hi95", "events", "up_h", "avail", "avail_h", "files");
    for (size_t i = 0; i < n; i++) {
        const struct tm_spot_fit *r = &rows[i];
        char hz[3][16] = {"-", "-", "-"}, av[16] = "-";
        if (provider && strcmp(provider, r->provider) != 0)
            continue;
        if (r->has_hazard) {
            snprintf(hz[0], sizeof(hz[0]), "%.4f", r->hazard_per_hour);
            snprintf(hz[1], sizeof(hz[1]), "%.4f", r->hazard_lo95);
            snprintf(hz[2], sizeof(hz[2]), "%.4f", r->hazard_hi95);
        }
        if (r->has_availability)
            snprintf(av, sizeof(av), "%.3f", r->availability);
        printf("%-8s %-14s %-14s %5d %8s %8s %8s %7.0f %9.1f %6s %8.1f %zu+%zu\n", r->provider,
               r->type, r->zone, (int)r->nodes, hz[0], hz[1], hz[2], r->events, r->up_hours, av,
               r->availability_hours, r->preemption_files, r->availability_files);
    }
}

static int print_json(const struct tm_spot_fit *rows, size_t n, const struct tm_spot_file_fit *files,
                      size_t nfiles, const char *root, const char *provider)
{
    cJSON *doc = cJSON_CreateObject(), *arr = cJSON_CreateArray(), *farr = cJSON_CreateArray();
    char *s;

    if (!doc || !arr || !farr) {
        cJSON_Delete(doc);
        cJSON_Delete(arr);
        cJSON_Delete(farr);
        return TM_ENOMEM;
    }
    cJSON_AddStringToObject(doc, "traces", root);
    cJSON_AddStringToObject(doc, "upstream", UPSTREAM);
    cJSON_AddItemToObject(doc, "fits", arr);
    cJSON_AddItemToObject(doc, "files", farr);
    for (size_t i = 0; i < n; i++) {
        const struct tm_spot_fit *r = &rows[i];
        cJSON *o, *src;
        if (provider && strcmp(provider, r->provider) != 0)
            continue;
        o = cJSON_CreateObject();
        cJSON_AddItemToArray(arr, o);
        cJSON_AddStringToObject(o, "provider", r->provider);
        cJSON_AddStringToObject(o, "type", r->type);
        cJSON_AddStringToObject(o, "zone", r->zone);
        cJSON_AddNumberToObject(o, "nodes", r->nodes);
        if (r->has_hazard) {
            cJSON_AddNumberToObject(o, "hazard_per_hour", r->hazard_per_hour);
            cJSON_AddNumberToObject(o, "hazard_low95", r->hazard_lo95);
            cJSON_AddNumberToObject(o, "hazard_high95", r->hazard_hi95);
            cJSON_AddNumberToObject(o, "events", r->events);
            cJSON_AddNumberToObject(o, "up_hours", r->up_hours);
        }
        if (r->has_availability) {
            cJSON_AddNumberToObject(o, "availability", r->availability);
            cJSON_AddNumberToObject(o, "availability_hours", r->availability_hours);
        }
        src = cJSON_AddArrayToObject(o, "sources");
        for (size_t f = 0; f < nfiles; f++)
            if (files[f].row == i)
                cJSON_AddItemToArray(src, cJSON_CreateString(files[f].path));
    }
    for (size_t f = 0; f < nfiles; f++) {
        const struct tm_spot_file_fit *x = &files[f];
        cJSON *o;
        if (provider && strcmp(provider, x->key.provider) != 0)
            continue;
        o = cJSON_CreateObject();
        cJSON_AddItemToArray(farr, o);
        cJSON_AddStringToObject(o, "path", x->path);
        cJSON_AddStringToObject(o, "kind", x->key.kind == TM_SPOT_PREEMPTION ? "preemption" : "availability");
        cJSON_AddStringToObject(o, "type", x->key.type);
        cJSON_AddStringToObject(o, "zone", x->key.zone);
        cJSON_AddNumberToObject(o, "nodes", x->key.nodes);
        cJSON_AddNumberToObject(o, "gap_seconds", x->gap_s);
        cJSON_AddNumberToObject(o, "ticks", (double)x->ticks);
        cJSON_AddNumberToObject(o, "share", x->share);
        if (x->key.kind == TM_SPOT_PREEMPTION) {
            cJSON_AddNumberToObject(o, "events", x->events);
            cJSON_AddNumberToObject(o, "up_hours", x->up_hours);
        }
    }
    s = cJSON_Print(doc);
    cJSON_Delete(doc);
    if (!s)
        return TM_ENOMEM;
    printf("%s\n", s);
    free(s);
    return 0;
}

static void print_yaml(const struct tm_spot_fit *rows, size_t n, const struct tm_spot_file_fit *files,
                       size_t nfiles, int argc, char **argv, const char *provider)
{
    char date[32];
    time_t now = time(NULL);
    struct tm tmv;

    gmtime_r(&now, &tmv);
    strftime(date, sizeof(date), "%Y-%m-%d", &tmv);
    printf("# Spot interruption hazards and launch availability per (instance type, zone),\n"
           "# fitted from the public \"Can't Be Late\" (NSDI '24) spot traces.\n#\n"
           "# Generated by: tarmac");
    for (int i = 0; i < argc; i++)
        printf(" %s", argv[i]);
    printf("\n# Date: %s (UTC)\n", date);
    printf("# Source: ../shared/traces/spot/skypilot-spot-traces/ (byte copies of\n"
           "#   %s;\n"
           "#   see ../shared/traces/spot/README.md section 1).  Trace files are not copied here.\n",
           UPSTREAM);
    printf("#\n"
           "# hazard_per_hour: preemptions (decreases of the instances-up count) / instance-hours\n"
           "#   up, the exponential-lifetime MLE; hazard_low95/high95 its exact Poisson interval.\n"
           "# availability: share of probes (1-node) or of a 16-instance request (16-node) that\n"
           "#   got spot capacity.  Files of one (type, zone, nodes) are pooled.\n"
           "# Zones are the collector's account naming (not AZ IDs): do not join them with\n"
           "# another account's zones by name.  nodes: instances requested at once; the\n"
           "# elastic replay reads only rows of 1 (core/spot_hazards.h).\n");
    printf("hazards:\n");
    for (size_t i = 0; i < n; i++) {
        const struct tm_spot_fit *r = &rows[i];
        bool first = true;
        if (provider && strcmp(provider, r->provider) != 0)
            continue;
        printf("  # from:");
        for (size_t f = 0; f < nfiles; f++)
            if (files[f].row == i)
                printf(" %s", files[f].path);
        printf("\n  - provider: %s\n    type: %s\n    zone: %s\n    nodes: %d\n", r->provider, r->type,
               r->zone, (int)r->nodes);
        if (r->has_hazard)
            printf("    hazard_per_hour: %.4f\n    hazard_low95: %.4f\n    hazard_high95: %.4f\n"
                   "    events: %.0f\n    up_hours: %.2f\n",
                   r->hazard_per_hour, r->hazard_lo95, r->hazard_hi95, r->events, r->up_hours);
        if (r->has_availability)
            printf("    availability: %.4f\n    availability_hours: %.2f\n", r->availability,
                   r->availability_hours);
        printf("    sources: [");
        for (size_t f = 0; f < nfiles; f++)
            if (files[f].row == i) {
                printf("%s\"%s\"", first ? "" : ", ", files[f].path);
                first = false;
            }
        printf("]\n");
    }
}

int tm_spot_fit_main(int argc, char **argv)
{
    const char *traces = NULL, *provider = NULL;
    enum format fmt = TABLE;
    struct tm_spot_file_fit *files = NULL;
    struct tm_spot_fit *rows = NULL;
    size_t nfiles = 0, nrows = 0;
    char err[1024];
    int rc;

    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--json") == 0) {
            fmt = JSON;
        } else if (strcmp(a, "--yaml") == 0) {
            fmt = YAML;
        } else if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            usage(stdout);
            return TM_EXIT_OK;
        } else if ((strcmp(a, "--traces") == 0 || strcmp(a, "--provider") == 0) && i + 1 < argc) {
            if (a[2] == 't')
                traces = argv[++i];
            else
                provider = argv[++i];
        } else {
            fprintf(stderr, "tarmac spot-fit: unrecognized option \"%s\"\n", a);
            usage(stderr);
            return TM_EXIT_USAGE;
        }
    }
    if (!traces) {
        usage(stderr);
        return TM_EXIT_USAGE;
    }
    rc = tm_spot_traces_fit(traces, &files, &nfiles, err, sizeof(err));
    if (rc < 0) {
        fprintf(stderr, "tarmac spot-fit: %s\n", rc == TM_EINVAL ? err : tm_strerror(rc));
        return rc == TM_EINVAL ? TM_EXIT_USAGE : TM_EXIT_FAIL;
    }
    rc = tm_spot_fit_merge(files, nfiles, &rows, &nrows);
    if (rc < 0) {
        fprintf(stderr, "tarmac spot-fit: %s\n", tm_strerror(rc));
        free(files);
        return TM_EXIT_FAIL;
    }
    if (fmt == TABLE)
        print_table(rows, nrows, provider);
    else if (fmt == YAML)
        print_yaml(rows, nrows, files, nfiles, argc, argv, provider);
    else
        rc = print_json(rows, nrows, files, nfiles, traces, provider);
    free(rows);
    free(files);
    if (rc < 0) {
        fprintf(stderr, "tarmac spot-fit: %s\n", tm_strerror(rc));
        return TM_EXIT_FAIL;
    }
    return TM_EXIT_OK;
}
