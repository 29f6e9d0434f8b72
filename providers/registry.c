/*
 * providers/registry.c: one row per provider kind; see registry.h.
 */
#include "providers/registry.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "providers/aws/aws_provider.h"
#include "providers/azure/azure_provider.h"
#include "providers/gcp/gcp_provider.h"
#include "providers/local/local_provider.h"
#include "providers/owned/owned_provider.h"
#include "providers/sim/sim_provider.h"

static int sim_create(const struct tm_provider_env *env, const struct tm_config_provider *p,
                      struct tm_provider **ret)
{
    struct tm_simcloud_params params;
    int r = tm_sim_params_from_config(env->cfg, p, &params);

    if (r < 0)
        return r;
    /* TARMAC_SIMCLOUD_URL: the simulated cloud in a database of its own,
     * so that a failover test loses tarmac's database but not the cloud
     * (tests/integration/ha_failover.sh); by default it shares tarmac's. */
    const char *url = getenv("TARMAC_SIMCLOUD_URL");
    return tm_sim_provider_create_pg(env->loop, &params, url && *url ? url : env->db_url, env->now_ms,
                                     env->clock, ret);
}

static int aws_create(const struct tm_provider_env *env, const struct tm_config_provider *p,
                      struct tm_provider **ret)
{
    return tm_aws_provider_create(env->loop, env->cfg, p, ret);
}

static int gcp_create(const struct tm_provider_env *env, const struct tm_config_provider *p,
                      struct tm_provider **ret)
{
    return tm_gcp_provider_create(env->loop, env->cfg, p, ret);
}

static int azure_create(const struct tm_provider_env *env, const struct tm_config_provider *p,
                        struct tm_provider **ret)
{
    return tm_azure_provider_create(env->loop, env->cfg, p, ret);
}

static int local_create(const struct tm_provider_env *env, const struct tm_config_provider *p,
                        struct tm_provider **ret)
{
    return tm_local_provider_create(env->loop, p, env->now_ms, env->clock, ret);
}

static int owned_create(const struct tm_provider_env *env, const struct tm_config_provider *p,
                        struct tm_provider **ret)
{
    return tm_owned_provider_create(env->loop, p, ret);
}

static const struct tm_provider_kind kinds[] = {
    {.name = "sim", .create = sim_create, .simulated = true},
    {.name = "aws", .create = aws_create, .validate = tm_aws_validate_pools,
     .check_main = tm_aws_check_main, .check_usage = "[--region R] [--instance-types T1,T2,...]"},
    {.name = "gcp", .create = gcp_create, .validate = tm_gcp_validate_pools,
     .check_main = tm_gcp_check_main,
     .check_usage = "[--project P] [--zones Z1,...] [--machine-types T1,...] [--key-file F]"},
    {.name = "azure", .create = azure_create, .check_main = tm_azure_check_main,
     .check_usage = "--config FILE [--provider NAME] [--vm-sizes S1,S2,...]"},
    {.name = "local", .create = local_create, .command_main = tm_local_command_main,
     .command_help = "interrupt a local provider's spot node on demand (local interrupt NODE)"},
    /* Machines that join with a join token; never launched or released
     * (the configuration's owned flag, providers/owned/owned_config.c). */
    {.name = "owned", .create = owned_create},
};
#define NKINDS (sizeof(kinds) / sizeof(kinds[0]))

const struct tm_provider_kind *tm_provider_kind_find(const char *name)
{
    for (size_t i = 0; name && i < NKINDS; i++)
        if (strcmp(kinds[i].name, name) == 0)
            return &kinds[i];
    return NULL;
}

const struct tm_provider_kind *tm_provider_kinds(size_t *ret_n)
{
    *ret_n = NKINDS;
    return kinds;
}

void tm_provider_kind_names(char *buf, size_t size, bool checkable)
{
    size_t n = 0, len = 0, total = 0;

    for (size_t i = 0; i < NKINDS; i++)
        total += !checkable || kinds[i].check_main;
    if (size)
        buf[0] = '\0';
    for (size_t i = 0; i < NKINDS; i++) {
        if (checkable && !kinds[i].check_main)
            continue;
        const char *sep = n == 0 ? "" : n + 1 == total ? " and " : ", ";
        int w = snprintf(buf + len, size > len ? size - len : 0, "%s%s", sep, kinds[i].name);
        if (w > 0)
            len += (size_t)w;
        n++;
    }
}
