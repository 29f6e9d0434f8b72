/*
 * providers/gcp/check.c: `tarmac check gcp`, a first conversation with
 * Compute Engine (see gcp_provider.h).  Its own loop: the command is
 * short-lived and has nothing else to do.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <uv.h>

#include "core/err.h"
#include "core/log.h"
#include "providers/gcp/gce.h"
#include "providers/gcp/gcp_provider.h"

#define CHECK_MAX 64

struct check {
    struct tm_gce *gce;
    const char *zones[CHECK_MAX];
    size_t nzones;
    const char *types[CHECK_MAX];
    size_t ntypes;
    size_t i;                     /* zones first, then types */
    int status;
    bool done;
    char what[128];
    char code[TM_ID_MAX];
    char message[256];
};

static void usage(void)
{
    fprintf(stderr, "usage: tarmac check gcp [--project P] [--zones Z1,Z2,...] "
                    "[--machine-types T1,T2,...] [--key-file F] [--endpoint URL] "
                    "[--token-url URL] [--metadata-url URL]\n");
}

static void on_closed(void *data) { (void)data; }

static int ask(struct check *ck);

static void finish(struct check *ck, int status, const struct tm_gce_reply *reply)
{
    ck->status = status;
    ck->done = true;
    if (reply) {
        snprintf(ck->code, sizeof(ck->code), "%s", reply->error_code);
        snprintf(ck->message, sizeof(ck->message), "%s", reply->error_message);
    }
    tm_gce_close(ck->gce, on_closed, ck);
}

static void on_answer(int status, const struct tm_gce_reply *reply, void *data)
{
    struct check *ck = data;
    int r;

    if (status < 0) {
        finish(ck, status, reply);
        return;
    }
    if (ck->i >= ck->nzones) {
        const struct tm_gce_machine_type *mt = &reply->machine_type;

        if (mt->gpus > 0)
            printf("%s gpus=%d model=%s accelerator=%s vcpus=%d memory_mib=%lld\n", mt->name,
                   mt->gpus, tm_gcp_gpu_model(mt->accelerator), mt->accelerator, mt->vcpus,
                   (long long)mt->memory_mib);
        else
            printf("%s gpus=0 vcpus=%d memory_mib=%lld (attach GPUs with guestAccelerators)\n",
                   mt->name, mt->vcpus, (long long)mt->memory_mib);
    } else {
        printf("zone %s status=%s\n", ck->zones[ck->i], reply->zone_status);
    }
    ck->i++;
    r = ask(ck);
    if (r == 1)
        finish(ck, 0, NULL);
    else if (r < 0)
        finish(ck, r, NULL);
}

static int ask(struct check *ck)
{
    char *url;
    bool zone = ck->i < ck->nzones;

    if (ck->i >= ck->nzones + ck->ntypes)
        return 1;
    if (zone) {
        snprintf(ck->what, sizeof(ck->what), "zone %s", ck->zones[ck->i]);
        url = tm_gce_url_zone(tm_gce_endpoint(ck->gce), tm_gce_project(ck->gce), ck->zones[ck->i]);
    } else {
        snprintf(ck->what, sizeof(ck->what), "machine type %s in %s",
                 ck->types[ck->i - ck->nzones], ck->zones[0]);
        url = tm_gce_url_machine_type(tm_gce_endpoint(ck->gce), tm_gce_project(ck->gce),
                                      ck->zones[0], ck->types[ck->i - ck->nzones]);
    }
    if (!url)
        return TM_EINVAL;
    return tm_gce_call(ck->gce, zone ? TM_GCE_ZONE_GET : TM_GCE_MACHINE_TYPE_GET, "GET", url, NULL,
                       TM_GCE_RETRY_AMBIGUOUS, on_answer, ck);
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

int tm_gcp_check_main(int argc, char **argv)
{
    struct tm_config_provider prov = {0};
    struct tm_gce_options go = {0};
    struct tm_gcp_key key;
    struct check ck = {0};
    const char *zones_arg = NULL, *types_arg = NULL, *key_file = NULL;
    char *zcopy = NULL, *tcopy = NULL;
    char err[512] = "";
    uv_loop_t loop;
    int rc = 1, r;

    if (argc < 2 || strcmp(argv[0], "check") != 0 || strcmp(argv[1], "gcp") != 0) {
        usage();
        return 2;
    }
    for (int i = 2; i < argc; i++) {
        const char **dst = NULL;

        if (strcmp(argv[i], "--project") == 0)
            dst = (const char **)&prov.project;
        else if (strcmp(argv[i], "--zones") == 0)
            dst = &zones_arg;
        else if (strcmp(argv[i], "--machine-types") == 0)
            dst = &types_arg;
        else if (strcmp(argv[i], "--key-file") == 0)
            dst = &key_file;
        else if (strcmp(argv[i], "--endpoint") == 0)
            dst = (const char **)&prov.endpoint;
        else if (strcmp(argv[i], "--token-url") == 0)
            dst = (const char **)&prov.token_url;
        else if (strcmp(argv[i], "--metadata-url") == 0)
            dst = (const char **)&prov.metadata_url;
        if (!dst || i + 1 >= argc) {
            usage();
            return 2;
        }
        *dst = argv[++i];
    }
    zcopy = strdup(zones_arg ? zones_arg : "us-central1-a");
    tcopy = strdup(types_arg ? types_arg : "");
    if (!zcopy || !tcopy || split(zcopy, ck.zones, &ck.nzones) < 0 ||
        split(tcopy, ck.types, &ck.ntypes) < 0 || ck.nzones == 0) {
        fprintf(stderr, "gcp check: bad --zones or --machine-types (at most %d each)\n", CHECK_MAX);
        free(zcopy);
        free(tcopy);
        return 2;
    }
    prov.name = "gcp";
    prov.kind = "gcp";
    prov.credentials.source = key_file ? "file" : "none";
    prov.credentials.file = (char *)key_file;
    r = tm_gcp_resolve_auth(&prov, 0, &key, &go.auth, err, sizeof(err));
    if (r < 0) {
        /* A key file that cannot be used is "no credentials": exit 3. */
        fprintf(stderr, "gcp check: authentication failed: %s\n", err);
        free(zcopy);
        free(tcopy);
        return 3;
    }
    if (!prov.project)
        prov.project = key.project_id ? key.project_id : getenv("GOOGLE_CLOUD_PROJECT");
    if (!prov.project || !*prov.project) {
        fprintf(stderr, "gcp check: no project (use --project, a key file with project_id, "
                        "or GOOGLE_CLOUD_PROJECT)\n");
        tm_gcp_key_release(&key);
        free(zcopy);
        free(tcopy);
        return 1;
    }
    go.endpoint = prov.endpoint;
    go.project = prov.project;
    go.retry.max_attempts = 3;
    go.retry.max_total_delay_ms = 3000;
    go.timeout_ms = 15000;
    go.auth_cooldown_ms = 1;
    if (uv_loop_init(&loop) != 0) {
        tm_gcp_key_release(&key);
        free(zcopy);
        free(tcopy);
        return 1;
    }
    r = tm_gce_create(&loop, &go, &ck.gce);
    if (r == 0) {
        r = ask(&ck);
        if (r != 0)
            finish(&ck, r < 0 ? r : 0, NULL);
        uv_run(&loop, UV_RUN_DEFAULT);
    }
    if (r < 0 && !ck.done) {
        fprintf(stderr, "gcp check: could not start: %s\n", tm_strerror(r));
    } else if (ck.status == 0) {
        fprintf(stderr, "gcp check: ok, project %s, %zu zones, %zu machine types\n",
                go.project, ck.nzones, ck.ntypes);
        rc = 0;
    } else if (go.auth.source == TM_GCP_TOKEN_METADATA && strstr(ck.message, "metadata server")) {
        /* No key file and no metadata server: no credentials at all. */
        fprintf(stderr, "gcp check: authentication failed: no credentials (no --key-file or "
                        "GOOGLE_APPLICATION_CREDENTIALS, and no metadata server: %s)\n", ck.message);
        rc = 3;
    } else if (ck.status == TM_EAUTH) {
        fprintf(stderr, "gcp check: authentication failed%s%s%s: %s\n", ck.code[0] ? " (" : "",
                ck.code, ck.code[0] ? ")" : "", ck.message[0] ? ck.message : "credentials refused");
        rc = 3;
    } else {
        fprintf(stderr, "gcp check: %s: %s%s%s%s%s\n", ck.what,
                ck.status == TM_ENOTFOUND ? "unknown to gcp" : tm_strerror(ck.status),
                ck.code[0] ? ": " : "", ck.code, ck.message[0] ? ": " : "", ck.message);
        rc = 1;
    }
    if (uv_loop_close(&loop) != 0)
        rc = rc ? rc : 1;
    tm_gcp_key_release(&key);
    free(zcopy);
    free(tcopy);
    return rc;
}
