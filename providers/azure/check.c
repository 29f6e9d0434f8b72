/*
 * providers/azure/check.c: `tarmac check azure`, a first conversation with ARM.
 *
 * It reads the provider's section of the configuration file, gets a token
 * exactly as the provider does, lists the resource group's VMs (so the
 * subscription, the group and the role assignment are proven), and looks
 * the pools' VM sizes and zones up in Resource SKUs for the region.  The
 * loop, the options and the exit codes are the runner's
 * (providers/common/check.c).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <openssl/crypto.h>
#include <uv.h>

#include "core/config.h"
#include "core/err.h"
#include "core/log.h"
#include "providers/azure/arm.h"
#include "providers/azure/azure_provider.h"
#include "providers/azure/azure_config.h"
#include "providers/common/check.h"
#include "providers/common/jwt.h"

#define CHECK_MAX_SIZES 64
#define CHECK_MAX_PAGES 100
#define SKU_API_VERSION "2021-07-01"

struct want {
    char size[TM_ID_MAX];
    char zones[64];               /* the pool's zones, "1,2" */
    bool found;
};

struct check {
    struct tm_check *run;
    struct tm_arm *arm;
    struct tm_arm_options ao;
    const struct tm_config_provider *prov;
    struct want want[CHECK_MAX_SIZES];
    size_t nwant;
    unsigned pages;
    size_t vms;
    char failure[256];
};

static void finish(struct check *ck, int status, const struct tm_arm_reply *reply)
{
    tm_check_finish(ck->run, status, reply ? reply->error_code : NULL,
                    reply ? reply->error_message : NULL);
    snprintf(ck->run->failure, sizeof(ck->run->failure), "%s", ck->failure);
    tm_arm_close(ck->arm, NULL, NULL);
}

static int ask_skus(struct check *ck, const char *next);

static void on_skus(int status, const struct tm_arm_reply *reply, void *data)
{
    struct check *ck = data;
    struct tm_arm_sku *skus = NULL;
    size_t n = 0;
    char *next = NULL, err[256];
    int r;

    if (status < 0) {
        finish(ck, status, reply);
        return;
    }
    r = tm_arm_parse_skus(reply->body, reply->body_len, ck->prov->region, &skus, &n, &next, err,
                          sizeof(err));
    if (r < 0) {
        snprintf(ck->failure, sizeof(ck->failure), "%s", err);
        finish(ck, r, NULL);
        return;
    }
    for (size_t i = 0; i < n; i++)
        for (size_t w = 0; w < ck->nwant; w++) {
            struct want *x = &ck->want[w];

            if (strcmp(skus[i].name, x->size) != 0 || x->found)
                continue;
            x->found = true;
            printf("%s zones=%s%s\n", x->size, skus[i].zones[0] ? skus[i].zones : "-",
                   skus[i].restricted ? " restricted" : "");
            if (skus[i].restricted && !ck->failure[0])
                snprintf(ck->failure, sizeof(ck->failure),
                         "VM size %s is restricted for this subscription in %s", x->size,
                         ck->prov->region);
            /* Every zone a pool names must offer the size. */
            for (char *z = x->zones; *z; z++) {
                if (*z == ',')
                    continue;
                if (!strchr(skus[i].zones, *z) && !ck->failure[0])
                    snprintf(ck->failure, sizeof(ck->failure),
                             "VM size %s is not offered in zone %c of %s (zones: %s)", x->size,
                             *z, ck->prov->region, skus[i].zones[0] ? skus[i].zones : "none");
            }
        }
    free(skus);
    if (next && ++ck->pages < CHECK_MAX_PAGES) {
        r = ask_skus(ck, next);
        free(next);
        if (r < 0)
            finish(ck, r, NULL);
        return;
    }
    free(next);
    for (size_t w = 0; w < ck->nwant; w++)
        if (!ck->want[w].found && !ck->failure[0])
            snprintf(ck->failure, sizeof(ck->failure), "VM size %s is unknown to azure in %s",
                     ck->want[w].size, ck->prov->region);
    finish(ck, ck->failure[0] ? TM_EINVAL : 0, NULL);
}

static int ask_skus(struct check *ck, const char *next)
{
    char path[512];

    if (next)
        return tm_arm_call(ck->arm, TM_ARM_LIST_SKUS, "GET", next, NULL, TM_ARM_RETRY_AMBIGUOUS,
                           on_skus, ck);
    snprintf(path, sizeof(path), "/subscriptions/%s/providers/Microsoft.Compute/skus?"
             "api-version=%s&%%24filter=location%%20eq%%20%%27%s%%27",
             tm_azure_config(ck->prov)->subscription_id, SKU_API_VERSION, ck->prov->region);
    return tm_arm_call(ck->arm, TM_ARM_LIST_SKUS, "GET", path, NULL, TM_ARM_RETRY_AMBIGUOUS,
                       on_skus, ck);
}

static void on_list(int status, const struct tm_arm_reply *reply, void *data)
{
    struct check *ck = data;
    struct tm_arm_vm *vms = NULL;
    char *next = NULL, err[256];
    int r;

    if (status < 0) {
        finish(ck, status, reply);
        return;
    }
    r = tm_arm_parse_vm_list(reply->body, reply->body_len, &vms, &ck->vms, &next, err,
                             sizeof(err));
    free(vms);
    free(next);
    if (r < 0) {
        snprintf(ck->failure, sizeof(ck->failure), "%s", err);
        finish(ck, r, NULL);
        return;
    }
    r = ask_skus(ck, NULL);
    if (r < 0)
        finish(ck, r, NULL);
}

static void want_add(struct check *ck, const char *size, const char *zones)
{
    for (size_t i = 0; i < ck->nwant; i++)
        if (strcmp(ck->want[i].size, size) == 0) {
            size_t at = strlen(ck->want[i].zones);

            if (zones[0] && at + strlen(zones) + 2 < sizeof(ck->want[i].zones))
                snprintf(ck->want[i].zones + at, sizeof(ck->want[i].zones) - at, "%s%s",
                         at ? "," : "", zones);
            return;
        }
    if (ck->nwant < CHECK_MAX_SIZES) {
        snprintf(ck->want[ck->nwant].size, TM_ID_MAX, "%s", size);
        snprintf(ck->want[ck->nwant].zones, sizeof(ck->want[0].zones), "%s", zones);
        ck->nwant++;
    }
}

static int start(struct tm_check *run, uv_loop_t *loop, void *ctx)
{
    struct check *ck = ctx;
    char path[512];
    int r = tm_arm_create(loop, &ck->ao, &ck->arm);

    if (r < 0)
        return r;
    ck->run = run;
    r = tm_arm_vms_path(tm_azure_config(ck->prov)->subscription_id, tm_azure_config(ck->prov)->resource_group, path,
                        sizeof(path) - 32);
    if (r == 0) {
        size_t len = strlen(path);
        snprintf(path + len, sizeof(path) - len, "?api-version=" TM_ARM_API_VERSION);
        r = tm_arm_call(ck->arm, TM_ARM_LIST_VMS, "GET", path, NULL, TM_ARM_RETRY_AMBIGUOUS,
                        on_list, ck);
    }
    if (r < 0)
        finish(ck, r, NULL);
    return 0;
}

static void ok_line(const struct tm_check *run, void *ctx, FILE *out)
{
    const struct check *ck = ctx;

    (void)run;
    fprintf(out, "subscription %s, resource group %s (%zu VMs), region %s, %zu VM sizes",
            tm_azure_config(ck->prov)->subscription_id, tm_azure_config(ck->prov)->resource_group, ck->vms,
            ck->prov->region, ck->nwant);
}

static const struct tm_check_backend azure_check = {
    .cloud = "azure",
    .usage = "--config FILE [--provider NAME] [--vm-sizes S1,S2,...]",
    .start = start,
    .ok_line = ok_line,
};

int tm_azure_check_main(int argc, char **argv)
{
    const char *config = NULL, *provider = NULL, *sizes = NULL;
    const struct tm_check_option opts[] = {
        {"--config", &config}, {"--provider", &provider}, {"--vm-sizes", &sizes},
    };
    struct tm_config cfg = {0};
    struct check ck = {0};
    struct tm_arm_options *ao = &ck.ao;
    char err[512] = "", why[600] = "";
    struct tm_azure_credential cred = {0};
    int rc, r;

    rc = tm_check_parse(&azure_check, argc, argv, opts, sizeof(opts) / sizeof(opts[0]));
    if (rc >= 0)
        return rc;
    if (!config)
        config = getenv("TARMAC_CONFIG");
    if (!config) {
        tm_check_usage(&azure_check, stderr);
        return TM_CHECK_USAGE;
    }
    r = tm_config_load(config, &cfg, err, sizeof(err));
    if (r < 0) {
        fprintf(stderr, "azure check: %s\n", err[0] ? err : tm_strerror(r));
        return TM_CHECK_FAILED;
    }
    for (size_t i = 0; i < cfg.nproviders && !ck.prov; i++)
        if (strcmp(cfg.providers[i].kind, "azure") == 0 &&
            (!provider || strcmp(cfg.providers[i].name, provider) == 0))
            ck.prov = &cfg.providers[i];
    if (!ck.prov) {
        fprintf(stderr, "azure check: no azure provider%s%s in %s\n", provider ? " named " : "",
                provider ? provider : "", config);
        tm_config_release(&cfg);
        return TM_CHECK_FAILED;
    }
    if (sizes) {
        char *copy = strdup(sizes), *save = NULL;

        for (char *t = copy ? strtok_r(copy, ",", &save) : NULL; t; t = strtok_r(NULL, ",", &save))
            want_add(&ck, t, "");
        free(copy);
    } else {
        for (size_t i = 0; i < cfg.npools; i++) {
            const struct tm_config_pool *pl = &cfg.pools[i];
            char zones[64] = "";

            if (!pl->provider || strcmp(pl->provider, ck.prov->name) != 0)
                continue;
            for (size_t z = 0; z < pl->nzones; z++) {
                size_t at = strlen(zones);

                snprintf(zones + at, sizeof(zones) - at, "%s%s", at ? "," : "", pl->zones[z]);
            }
            for (size_t t = 0; t < pl->ninstance_types; t++)
                want_add(&ck, pl->instance_types[t], zones);
        }
    }
    r = tm_azure_credential_read(ck.prov, &cred, why, sizeof(why));
    if (r < 0) {
        fprintf(stderr, "azure check: authentication failed: %s\n", why);
        tm_config_release(&cfg);
        return TM_CHECK_AUTH;
    }
    ao->endpoint = ck.prov->endpoint ? ck.prov->endpoint : getenv("TARMAC_AZURE_ENDPOINT");
    ao->authority = tm_azure_config(ck.prov)->authority;
    ao->imds = tm_azure_config(ck.prov)->imds_endpoint;
    ao->tenant = tm_azure_config(ck.prov)->tenant_id;
    ao->client_id = tm_azure_config(ck.prov)->client_id ? tm_azure_config(ck.prov)->client_id : getenv("AZURE_CLIENT_ID");
    ao->client_secret = cred.secret;
    ao->client_cert = cred.auth == TM_ARM_AUTH_CERTIFICATE ? &cred.cert : NULL;
    ao->auth = cred.auth;
    ao->ca_file = tm_azure_config(ck.prov)->ca_file;
    /* An interactive check should answer quickly, not after a long backoff. */
    ao->retry.max_attempts = 3;
    ao->retry.max_total_delay_ms = 3000;
    ao->timeout_ms = 15000;
    if (cred.auth == TM_ARM_AUTH_CERTIFICATE) {
        char *x5t = tm_jwt_b64url(cred.cert.sha1, sizeof(cred.cert.sha1));

        /* Which certificate Azure must have registered for the app. */
        fprintf(stderr, "azure check: client certificate %s, x5t %s%s\n", cred.cert.subject,
                x5t ? x5t : "-",
                cred.cert.not_after && cred.cert.not_after < (int64_t)time(NULL)
                    ? " (expired: the identity platform will refuse it)" : "");
        free(x5t);
    }
    rc = tm_check_run(&azure_check, &ck);
    tm_azure_credential_release(&cred);
    tm_config_release(&cfg);
    return rc;
}
