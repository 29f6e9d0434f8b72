/*
 * providers/azure/check.c: `tarmac check azure`, a first conversation with ARM.
 *
 * It reads the provider's section of the configuration file, gets a token
 * exactly as the provider does, lists the resource group's VMs (so the
 * subscription, the group and the role assignment are proven), and looks
 * the pools' VM sizes and zones up in Resource SKUs for the region.  Its own
 * loop: the command is short-lived and has nothing else to do.
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
    struct tm_arm *arm;
    const struct tm_config_provider *prov;
    struct want want[CHECK_MAX_SIZES];
    size_t nwant;
    int status;
    bool done;
    unsigned pages;
    size_t vms;
    char code[TM_ID_MAX];
    char message[256];
    char failure[256];
};

static void usage(void)
{
    fprintf(stderr, "usage: tarmac check azure --config FILE [--provider NAME] "
                    "[--vm-sizes S1,S2,...]\n");
}

static void finish(struct check *ck, int status, const struct tm_arm_reply *reply)
{
    ck->status = status;
    ck->done = true;
    if (reply) {
        snprintf(ck->code, sizeof(ck->code), "%s", reply->error_code);
        snprintf(ck->message, sizeof(ck->message), "%s", reply->error_message);
    }
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
             ck->prov->azure.subscription_id, SKU_API_VERSION, ck->prov->region);
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

int tm_azure_check_main(int argc, char **argv)
{
    const char *config = NULL, *provider = NULL, *sizes = NULL;
    struct tm_config cfg = {0};
    struct tm_arm_options ao = {0};
    struct check ck = {0};
    char err[512] = "", why[600] = "", path[512];
    struct tm_azure_credential cred = {0};
    uv_loop_t loop;
    int rc = 1, r;

    if (argc < 2 || strcmp(argv[0], "check") != 0 || strcmp(argv[1], "azure") != 0) {
        usage();
        return 2;
    }
    for (int i = 2; i < argc; i++) {
        const char **dst = NULL;

        if (strcmp(argv[i], "--config") == 0)
            dst = &config;
        else if (strcmp(argv[i], "--provider") == 0)
            dst = &provider;
        else if (strcmp(argv[i], "--vm-sizes") == 0)
            dst = &sizes;
        if (!dst || i + 1 >= argc) {
            usage();
            return 2;
        }
        *dst = argv[++i];
    }
    if (!config)
        config = getenv("TARMAC_CONFIG");
    if (!config) {
        usage();
        return 2;
    }
    r = tm_config_load(config, &cfg, err, sizeof(err));
    if (r < 0) {
        fprintf(stderr, "azure check: %s\n", err[0] ? err : tm_strerror(r));
        return 1;
    }
    for (size_t i = 0; i < cfg.nproviders && !ck.prov; i++)
        if (strcmp(cfg.providers[i].kind, "azure") == 0 &&
            (!provider || strcmp(cfg.providers[i].name, provider) == 0))
            ck.prov = &cfg.providers[i];
    if (!ck.prov) {
        fprintf(stderr, "azure check: no azure provider%s%s in %s\n", provider ? " named " : "",
                provider ? provider : "", config);
        tm_config_release(&cfg);
        return 1;
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
        return 3;
    }
    ao.endpoint = ck.prov->endpoint ? ck.prov->endpoint : getenv("TARMAC_AZURE_ENDPOINT");
    ao.authority = ck.prov->azure.authority;
    ao.imds = ck.prov->azure.imds_endpoint;
    ao.tenant = ck.prov->azure.tenant_id;
    ao.client_id = ck.prov->azure.client_id ? ck.prov->azure.client_id : getenv("AZURE_CLIENT_ID");
    ao.client_secret = cred.secret;
    ao.client_cert = cred.auth == TM_ARM_AUTH_CERTIFICATE ? &cred.cert : NULL;
    ao.auth = cred.auth;
    ao.ca_file = ck.prov->azure.ca_file;
    /* An interactive check should answer quickly, not after a long backoff. */
    ao.retry.max_attempts = 3;
    ao.retry.max_total_delay_ms = 3000;
    ao.timeout_ms = 15000;
    if (cred.auth == TM_ARM_AUTH_CERTIFICATE) {
        char *x5t = tm_jwt_b64url(cred.cert.sha1, sizeof(cred.cert.sha1));

        /* Which certificate Azure must have registered for the app. */
        fprintf(stderr, "azure check: client certificate %s, x5t %s%s\n", cred.cert.subject,
                x5t ? x5t : "-",
                cred.cert.not_after && cred.cert.not_after < (int64_t)time(NULL)
                    ? " (expired: the identity platform will refuse it)" : "");
        free(x5t);
    }
    if (uv_loop_init(&loop) != 0) {
        tm_config_release(&cfg);
        tm_azure_credential_release(&cred);
        return 1;
    }
    r = tm_arm_create(&loop, &ao, &ck.arm);
    tm_azure_credential_release(&cred);
    if (r == 0) {
        r = tm_arm_vms_path(ck.prov->azure.subscription_id, ck.prov->azure.resource_group, path,
                            sizeof(path) - 32);
        if (r == 0) {
            size_t len = strlen(path);
            snprintf(path + len, sizeof(path) - len, "?api-version=" TM_ARM_API_VERSION);
            r = tm_arm_call(ck.arm, TM_ARM_LIST_VMS, "GET", path, NULL, TM_ARM_RETRY_AMBIGUOUS,
                            on_list, &ck);
        }
        if (r < 0)
            finish(&ck, r, NULL);
        uv_run(&loop, UV_RUN_DEFAULT);
    }
    if (r < 0 && !ck.done) {
        fprintf(stderr, "azure check: could not start: %s\n", tm_strerror(r));
    } else if (ck.status == 0) {
        fprintf(stderr, "azure check: ok, subscription %s, resource group %s (%zu VMs), region %s, "
                "%zu VM sizes\n", ck.prov->azure.subscription_id, ck.prov->azure.resource_group,
                ck.vms, ck.prov->region, ck.nwant);
        rc = 0;
    } else if (ck.status == TM_EAUTH) {
        /* Codes and Azure's messages never carry the secret or the token. */
        fprintf(stderr, "azure check: authentication failed%s%s%s: %s\n", ck.code[0] ? " (" : "",
                ck.code, ck.code[0] ? ")" : "",
                ck.message[0] ? ck.message : "credentials refused");
        rc = 3;
    } else {
        fprintf(stderr, "azure check: %s%s%s%s%s\n",
                ck.failure[0] ? ck.failure : tm_strerror(ck.status), ck.code[0] ? ": " : "",
                ck.code, ck.message[0] ? ": " : "", ck.message);
        rc = 1;
    }
    if (uv_loop_close(&loop) != 0)
        rc = rc ? rc : 1;
    tm_config_release(&cfg);
    return rc;
}
