/*
 * providers/azure/azure_config.c: kind azure's keys in the configuration
 * file (core/config_kind.h): its providers[].azure section, and what Azure
 * needs before a first call (providers/azure/README.md).
 */
#include "providers/azure/azure_config.h"

#include <string.h>

#include "core/client_cert.h"
#include "core/config_kind.h"
#include "core/err.h"

/* providers[].azure (which are required: azure_check). */
static const struct cfg_field azure_fields[] = {
    {.key = "tenant_id", .type = CFG_STR, .offset = CFG_OFF(tm_config_azure, tenant_id),
     .flags = CFG_NAME},
    {.key = "subscription_id", .type = CFG_STR, .offset = CFG_OFF(tm_config_azure, subscription_id),
     .flags = CFG_NAME},
    {.key = "resource_group", .type = CFG_STR, .offset = CFG_OFF(tm_config_azure, resource_group),
     .flags = CFG_NAME},
    {.key = "client_id", .type = CFG_STR, .offset = CFG_OFF(tm_config_azure, client_id),
     .flags = CFG_NAME},
    {.key = "subnet_id", .type = CFG_STR, .offset = CFG_OFF(tm_config_azure, subnet_id)},
    {.key = "image", .type = CFG_STR, .offset = CFG_OFF(tm_config_azure, image)},
    {.key = "admin_username", .type = CFG_STR, .offset = CFG_OFF(tm_config_azure, admin_username),
     .def = "tarmac", .flags = CFG_NAME},
    {.key = "ssh_public_key", .type = CFG_STR, .offset = CFG_OFF(tm_config_azure, ssh_public_key)},
    {.key = "authority", .type = CFG_STR, .offset = CFG_OFF(tm_config_azure, authority)},
    {.key = "imds_endpoint", .type = CFG_STR, .offset = CFG_OFF(tm_config_azure, imds_endpoint)},
    {.key = "ca_file", .type = CFG_STR, .offset = CFG_OFF(tm_config_azure, ca_file)},
    {.key = "client_certificate", .type = CFG_STR,
     .offset = CFG_OFF(tm_config_azure, client_certificate)},
};
static const struct cfg_section azure_section = {
    .fields = azure_fields, .nfields = CFG_NFIELDS(azure_fields),
    .size = sizeof(struct tm_config_azure)};

/* The block: the azure: section is all of it. */
static const struct cfg_field azure_block_fields[] = {
    {.key = "azure", .type = CFG_SECTION, .offset = 0, .sub = &azure_section},
};
static const struct cfg_section azure_block = {
    .fields = azure_block_fields, .nfields = CFG_NFIELDS(azure_block_fields),
    .size = sizeof(struct tm_config_azure)};

/* azure.client_certificate: exactly one credential, and a file the
 * provider will be able to sign with (read now, checked, wiped). */
static int azure_check_client_cert(struct cfg_ctx *c, const struct tm_config_provider *p, size_t i)
{
    struct tm_client_cert cert;
    char why[512];
    int r;

    tm_cfg_path_set(c, "providers[%zu].azure.client_certificate", i);
    if (strcmp(p->credentials.source, "none") != 0)
        return tm_cfg_fail_at(c,
                              "exactly one credential: credentials.source \"%s\" names %s as well "
                              "(remove credentials, or this key)",
                              p->credentials.source,
                              strcmp(p->credentials.source, "instance_role") == 0
                                  ? "the managed identity" : "a client secret");
    r = tm_client_cert_load(tm_azure_config(p)->client_certificate, &cert, why, sizeof(why));
    if (r == TM_ENOMEM)
        return tm_cfg_nomem(c);
    if (r < 0)
        return tm_cfg_fail_at(c, "%s", why);
    tm_client_cert_release(&cert);
    return 0;
}

/* Run once the pools were checked: an azure provider's pools must name
 * sizes it describes and Azure's zones. */
static int azure_check(struct cfg_ctx *c, const struct tm_config *cfg, size_t i)
{
    const struct tm_config_provider *p = &cfg->providers[i];
    const struct tm_config_azure *az = tm_azure_config(p);
    struct { const char *key; const char *val; bool need; } req[] = {
        {"tenant_id", az->tenant_id, strcmp(p->credentials.source, "instance_role") != 0},
        {"subscription_id", az->subscription_id, true},
        {"resource_group", az->resource_group, true},
        {"subnet_id", az->subnet_id, true},
        {"image", az->image, true},
        {"ssh_public_key", az->ssh_public_key, true},
    };

    for (size_t k = 0; k < sizeof(req) / sizeof(req[0]); k++)
        if (req[k].need && (!req[k].val || !*req[k].val)) {
            /* said at the azure section, or the provider without one */
            tm_cfg_path_set(c, "providers[%zu].azure.%s", i, req[k].key);
            return tm_cfg_fail_at(c, "missing required key (kind is azure)");
        }
    if (az->client_certificate && azure_check_client_cert(c, p, i) < 0)
        return TM_EINVAL;
    if (strncmp(az->subnet_id, "/subscriptions/", 15) != 0 || !strstr(az->subnet_id, "/subnets/")) {
        tm_cfg_path_set(c, "providers[%zu].azure.subnet_id", i);
        return tm_cfg_fail_at(c, "must be a subnet resource id (/subscriptions/.../subnets/NAME)");
    }
    for (size_t t = 0; t < p->ntypes; t++)
        if (strncmp(p->types[t].name, "Standard_", 9) != 0) {
            tm_cfg_path_set(c, "providers[%zu].instance_types[%zu].name", i, t);
            return tm_cfg_fail_at(c, "\"%s\" is not an Azure VM size (Standard_...)", p->types[t].name);
        }
    for (size_t j = 0; j < cfg->npools; j++) {
        const struct tm_config_pool *pool = &cfg->pools[j];

        if (!pool->provider || strcmp(pool->provider, p->name) != 0)
            continue;
        /* Prices and GPU facts come from the file: a size it does not
         * describe is a typo or a size tarmac cannot price. */
        for (size_t t = 0; t < pool->ninstance_types; t++)
            if (!tm_config_type_find(p, pool->instance_types[t])) {
                tm_cfg_path_set(c, "pools[%zu].instance_types[%zu]", j, t);
                return tm_cfg_fail_at(c,
                                      "unknown VM size \"%s\" for azure provider \"%s\" (describe it "
                                      "in the provider's instance_types)",
                                      pool->instance_types[t], p->name);
            }
        /* Azure availability zones are "1", "2", "3" within the region. */
        for (size_t z = 0; z < pool->nzones; z++) {
            const char *zn = pool->zones[z];

            if (!(zn[0] >= '1' && zn[0] <= '3' && zn[1] == '\0')) {
                tm_cfg_path_set(c, "pools[%zu].zones[%zu]", j, z);
                return tm_cfg_fail_at(c, "unknown Azure zone \"%s\" (zones are 1, 2 or 3 of region %s)",
                                      zn, p->region);
            }
        }
    }
    return 0;
}

const struct tm_config_kind tm_config_kind_azure = {
    .name = "azure",
    .block = &azure_block,
    .check_pools = azure_check,
};
