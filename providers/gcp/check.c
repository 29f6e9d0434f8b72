/*
 * providers/gcp/check.c: `tarmac check gcp`, a first conversation with
 * Compute Engine (see gcp_provider.h).  The loop, the options and the exit
 * codes are the runner's (providers/common/check.c).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <uv.h>

#include "core/err.h"
#include "core/log.h"
#include "providers/common/check.h"
#include "providers/gcp/gce.h"
#include "providers/gcp/gcp_config.h"
#include "providers/gcp/gcp_provider.h"

#define CHECK_MAX 64

struct check {
    struct tm_check *ck;
    struct tm_gce *gce;
    struct tm_gce_options go;
    const char *zones[CHECK_MAX];
    size_t nzones;
    const char *types[CHECK_MAX];
    size_t ntypes;
    size_t i;                     /* zones first, then types */
    char what[128];
};

static int ask(struct check *c);

static void finish(struct check *c, int status, const struct tm_gce_reply *reply)
{
    struct tm_check *ck = c->ck;

    tm_check_finish(ck, status, reply ? reply->error_code : NULL,
                    reply ? reply->error_message : NULL);
    if (status < 0 && status != TM_EAUTH) {
        snprintf(ck->what, sizeof(ck->what), "%s", c->what);
        if (status == TM_ENOTFOUND)
            snprintf(ck->failure, sizeof(ck->failure), "unknown to gcp");
    }
    tm_gce_close(c->gce, NULL, NULL);
}

static void on_answer(int status, const struct tm_gce_reply *reply, void *data)
{
    struct check *c = data;
    int r;

    if (status < 0) {
        finish(c, status, reply);
        return;
    }
    if (c->i >= c->nzones) {
        const struct tm_gce_machine_type *mt = &reply->machine_type;

        if (mt->gpus > 0)
            printf("%s gpus=%d model=%s accelerator=%s vcpus=%d memory_mib=%lld\n", mt->name,
                   mt->gpus, tm_gcp_gpu_model(mt->accelerator), mt->accelerator, mt->vcpus,
                   (long long)mt->memory_mib);
        else
            printf("%s gpus=0 vcpus=%d memory_mib=%lld (attach GPUs with guestAccelerators)\n",
                   mt->name, mt->vcpus, (long long)mt->memory_mib);
    } else {
        printf("zone %s status=%s\n", c->zones[c->i], reply->zone_status);
    }
    c->i++;
    r = ask(c);
    if (r == 1)
        finish(c, 0, NULL);
    else if (r < 0)
        finish(c, r, NULL);
}

static int ask(struct check *c)
{
    char *url;
    bool zone = c->i < c->nzones;

    if (c->i >= c->nzones + c->ntypes)
        return 1;
    if (zone) {
        snprintf(c->what, sizeof(c->what), "zone %s", c->zones[c->i]);
        url = tm_gce_url_zone(tm_gce_endpoint(c->gce), tm_gce_project(c->gce), c->zones[c->i]);
    } else {
        snprintf(c->what, sizeof(c->what), "machine type %s in %s",
                 c->types[c->i - c->nzones], c->zones[0]);
        url = tm_gce_url_machine_type(tm_gce_endpoint(c->gce), tm_gce_project(c->gce),
                                      c->zones[0], c->types[c->i - c->nzones]);
    }
    if (!url)
        return TM_EINVAL;
    return tm_gce_call(c->gce, zone ? TM_GCE_ZONE_GET : TM_GCE_MACHINE_TYPE_GET, "GET", url, NULL,
                       TM_GCE_RETRY_AMBIGUOUS, on_answer, c);
}

static int split(char *s, const char **out, size_t *n)
{
    char *save = NULL;

    for (char *t = strtok_r(s, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
        if (*n == CHECK_MAX)
            return -1;
        out[(*n)++] = t;
    }
    return 0;
}

static int start(struct tm_check *ck, uv_loop_t *loop, void *ctx)
{
    struct check *c = ctx;
    int r = tm_gce_create(loop, &c->go, &c->gce);

    if (r < 0)
        return r;
    c->ck = ck;
    r = ask(c);
    if (r != 0)
        finish(c, r < 0 ? r : 0, NULL);
    return 0;
}

static void ok_line(const struct tm_check *ck, void *ctx, FILE *out)
{
    const struct check *c = ctx;

    (void)ck;
    fprintf(out, "project %s, %zu zones, %zu machine types", c->go.project, c->nzones,
            c->ntypes);
}

static int failed(const struct tm_check *ck, void *ctx)
{
    const struct check *c = ctx;

    if (c->go.auth.source != TM_GCP_TOKEN_METADATA || !strstr(ck->message, "metadata server"))
        return -1;
    /* No key file and no metadata server: no credentials at all. */
    fprintf(stderr, "gcp check: authentication failed: no credentials (no --key-file or "
                    "GOOGLE_APPLICATION_CREDENTIALS, and no metadata server: %s)\n", ck->message);
    return TM_CHECK_AUTH;
}

static const struct tm_check_backend gcp_check = {
    .cloud = "gcp",
    .usage = "[--project P] [--zones Z1,Z2,...] [--machine-types T1,T2,...] [--key-file F] "
             "[--endpoint URL] [--token-url URL] [--metadata-url URL]",
    .start = start,
    .ok_line = ok_line,
    .failed = failed,
};

int tm_gcp_check_main(int argc, char **argv)
{
    struct tm_config_gcp gcfg = {0};
    struct tm_config_provider prov = {.kind_block = &gcfg};
    struct tm_gcp_key key;
    struct check c = {0};
    const char *zones_arg = NULL, *types_arg = NULL, *key_file = NULL;
    const struct tm_check_option opts[] = {
        {"--project", (const char **)&gcfg.project}, {"--zones", &zones_arg},
        {"--machine-types", &types_arg}, {"--key-file", &key_file},
        {"--endpoint", (const char **)&prov.endpoint},
        {"--token-url", (const char **)&gcfg.token_url},
        {"--metadata-url", (const char **)&gcfg.metadata_url},
    };
    char *zcopy = NULL, *tcopy = NULL;
    char err[512] = "";
    int rc, r;

    rc = tm_check_parse(&gcp_check, argc, argv, opts, sizeof(opts) / sizeof(opts[0]));
    if (rc >= 0)
        return rc;
    zcopy = strdup(zones_arg ? zones_arg : "us-central1-a");
    tcopy = strdup(types_arg ? types_arg : "");
    if (!zcopy || !tcopy || split(zcopy, c.zones, &c.nzones) < 0 ||
        split(tcopy, c.types, &c.ntypes) < 0 || c.nzones == 0) {
        fprintf(stderr, "gcp check: bad --zones or --machine-types (at most %d each)\n", CHECK_MAX);
        free(zcopy);
        free(tcopy);
        return TM_CHECK_USAGE;
    }
    prov.name = "gcp";
    prov.kind = "gcp";
    prov.credentials.source = key_file ? "file" : "none";
    prov.credentials.file = (char *)key_file;
    r = tm_gcp_resolve_auth(&prov, 0, &key, &c.go.auth, err, sizeof(err));
    if (r < 0) {
        /* A key file that cannot be used is "no credentials": exit 3. */
        fprintf(stderr, "gcp check: authentication failed: %s\n", err);
        free(zcopy);
        free(tcopy);
        return TM_CHECK_AUTH;
    }
    if (!gcfg.project)
        gcfg.project = key.project_id ? key.project_id : getenv("GOOGLE_CLOUD_PROJECT");
    if (!gcfg.project || !*gcfg.project) {
        fprintf(stderr, "gcp check: no project (use --project, a key file with project_id, "
                        "or GOOGLE_CLOUD_PROJECT)\n");
        rc = TM_CHECK_FAILED;
    } else {
        c.go.endpoint = prov.endpoint;
        c.go.project = gcfg.project;
        /* An interactive check should answer quickly, not after a long backoff. */
        c.go.retry.max_attempts = 3;
        c.go.retry.max_total_delay_ms = 3000;
        c.go.timeout_ms = 15000;
        c.go.auth_cooldown_ms = 1;
        rc = tm_check_run(&gcp_check, &c);
    }
    tm_gcp_key_release(&key);
    free(zcopy);
    free(tcopy);
    return rc;
}
