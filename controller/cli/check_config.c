/*
 * controller/cli/check_config.c: `tarmac check config`: load and validate a
 * configuration as `serve` would (nothing is contacted), then print each
 * planning queue (a pool group, or the ungrouped pools of one GPU model)
 * with its offers cheapest first per capacity type: the order in which
 * the planner tries clouds, types and zones.
 */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "controller/cli/api.h"
#include "controller/cli/cli.h"
#include "controller/cli/common.h"
#include "controller/cli/table.h"
#include "core/config.h"

struct offer {
    const struct tm_config_pool *pool;
    const struct tm_config_instance_type *type;
    int64_t uusd_per_hour;
};

static int cmp_offer(const void *a, const void *b)
{
    const struct offer *x = a, *y = b;
    int64_t px = x->uusd_per_hour / x->type->gpus, py = y->uusd_per_hour / y->type->gpus;
    return (px > py) - (px < py);
}

static bool same_queue(const struct tm_config_pool *a, const struct tm_config_pool *b)
{
    if (a->group || b->group)
        return a->group && b->group && strcmp(a->group, b->group) == 0;
    return strcmp(a->gpu_model, b->gpu_model) == 0;
}

/* One queue's offers on one capacity: every (pool, listed type the
 * provider describes) whose pool buys that capacity. */
static int print_offers(const struct tm_config *cfg, size_t first, bool spot)
{
    static const char *const cols[] = {"CAPACITY", "PROVIDER", "KIND", "TYPE", "POOL", "ZONES",
                                       "USD_PER_H", "USD_PER_GPU_H"};
    struct offer *o = calloc(cfg->npools * 64 + 1, sizeof(*o));
    size_t n = 0;
    struct tm_table t;

    if (!o)
        return TM_EXIT_FAIL;
    for (size_t pi = first; pi < cfg->npools; pi++) {
        const struct tm_config_pool *pool = &cfg->pools[pi];
        const struct tm_config_provider *prov = tm_config_provider_find(cfg, pool->provider);
        bool od = strcmp(pool->capacity_type, "on_demand") == 0;
        bool both = strcmp(pool->capacity_type, "spot_then_on_demand") == 0;
        if (!same_queue(pool, &cfg->pools[first]) || (spot ? od : !(od || both)))
            continue;
        for (size_t k = 0; prov && k < pool->ninstance_types && n < cfg->npools * 64; k++) {
            const struct tm_config_instance_type *ty = tm_config_type_find(prov, pool->instance_types[k]);
            int64_t price = ty ? (spot ? ty->spot_uusd_per_hour : ty->on_demand_uusd_per_hour) : 0;
            if (ty && ty->gpus > 0 && (price > 0 || !spot))
                o[n++] = (struct offer){pool, ty, price};
        }
    }
    qsort(o, n, sizeof(*o), cmp_offer);
    tm_table_init(&t, 8, cols);
    for (size_t k = 0; k < n; k++) {
        const struct tm_config_provider *prov = tm_config_provider_find(cfg, o[k].pool->provider);
        char zones[256] = "";
        for (size_t z = 0; z < o[k].pool->nzones; z++) {
            size_t len = strlen(zones);
            snprintf(zones + len, sizeof(zones) - len, "%s%s", z ? "," : "", o[k].pool->zones[z]);
        }
        tm_table_cell(&t, "%s", spot ? "spot" : "on_demand");
        tm_table_cell(&t, "%s", o[k].pool->provider);
        tm_table_cell(&t, "%s", prov ? prov->kind : "?");
        tm_table_cell(&t, "%s", o[k].type->name);
        tm_table_cell(&t, "%s", o[k].pool->name);
        tm_table_cell(&t, "%s", zones);
        tm_table_cell(&t, "%.4f", (double)o[k].uusd_per_hour / 1e6);
        tm_table_cell(&t, "%.4f", (double)o[k].uusd_per_hour / 1e6 / o[k].type->gpus);
    }
    free(o);
    return tm_cli_print_table(&t);
}

int tm_cli_check_config(int argc, char **argv)
{
    static const struct option opts[] = {
        {"config", required_argument, NULL, TM_CLI_OPT_CONFIG},
        {"help", no_argument, NULL, TM_CLI_OPT_HELP}, {"h", no_argument, NULL, 'h'}, {0},
    };
    struct tm_cli_common c = {.cmd = "check config"};
    int opt, r;

    optind = 1;
    opterr = 0;
    while ((opt = getopt_long(argc - 1, argv + 1, ":h", opts, NULL)) != -1) {
        if (opt == TM_CLI_OPT_HELP || opt == 'h') {
            printf("Usage: tarmac check config [--config FILE]\n\n"
                   "Load and validate the configuration as serve does (nothing is contacted;\n"
                   "exit 2 with the file, line and key when it is invalid), then list each\n"
                   "planning queue (a pool group, or the ungrouped pools of one GPU model) with\n"
                   "its offers cheapest first per GPU-hour: spot, then on-demand.\n"
                   "      --config FILE        configuration file (env TARMAC_CONFIG)\n");
            return TM_EXIT_OK;
        }
        if ((r = tm_cli_common_opt(&c, opt, optarg, argv + 1)) != 1)
            return r;
    }
    if (optind < argc - 1)
        return tm_cli_usage_error(c.cmd, "unexpected argument \"%s\"", argv[optind + 1]);
    if ((r = tm_cli_load_config(&c, true)) != 0)
        return r;
    const struct tm_config *cfg = &c.cfg;
    printf("configuration valid: %zu providers, %zu pools\n", cfg->nproviders, cfg->npools);
    r = TM_EXIT_OK;
    for (size_t pi = 0; pi < cfg->npools && r == TM_EXIT_OK; pi++) {
        bool seen = false;
        for (size_t k = 0; k < pi; k++)
            seen = seen || same_queue(&cfg->pools[k], &cfg->pools[pi]);
        if (seen)
            continue;
        printf("\nqueue %s%s (%s, %d GPUs per node):\n", cfg->pools[pi].group ? "group " : "model ",
               cfg->pools[pi].group ? cfg->pools[pi].group : cfg->pools[pi].gpu_model,
               cfg->pools[pi].gpu_model, cfg->pools[pi].gpus_per_node);
        r = print_offers(cfg, pi, true);
        if (r == TM_EXIT_OK)
            r = print_offers(cfg, pi, false);
    }
    tm_cli_common_release(&c);
    return r;
}
