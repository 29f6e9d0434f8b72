/*
 * controller/cli/local.c: `tarmac local interrupt NODE`, the local
 * provider's interruption on demand (providers/local/, tm_local_interrupt)
 * for demos and tests: it writes the node's notice file, which its agent
 * (metadata local) sees within its poll period; the instance goes at the
 * deadline, or as soon as its agent drained.  Blocking, one-shot; it needs
 * the server's --config (the provider's state_dir), not the database.
 */
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "controller/cli/cli.h"
#include "controller/cli/common.h"
#include "core/config.h"
#include "core/err.h"
#include "core/units.h"
#include "providers/local/local_provider.h"

static const char local_help[] =
    "Usage: tarmac local interrupt NODE [--provider NAME] [--in DURATION] --config FILE\n\n"
    "Interrupt the local provider's spot node NODE now, as a cloud would: its agent\n"
    "sees the notice and drains, the instance goes after DURATION (default the\n"
    "provider's spot_notice, else 2m).\n\n"
    "Options:\n"
    "      --config FILE        configuration file (env TARMAC_CONFIG)\n"
    "      --provider NAME      the local provider (needed when there are several)\n"
    "      --in DURATION        time from the notice to the interruption, e.g. 30s\n"
    "  -h, --help               this help\n";

/* The provider of kind local named name (any when NULL and only one), or
 * NULL after printing why. */
static const struct tm_config_provider *local_provider(const struct tm_config *cfg, const char *name)
{
    const struct tm_config_provider *found = NULL;

    for (size_t i = 0; i < cfg->nproviders; i++) {
        const struct tm_config_provider *p = &cfg->providers[i];
        if (name && strcmp(p->name, name) == 0) {
            if (strcmp(p->kind, "local") != 0) {
                tm_cli_usage_error("local", "--provider: %s is of kind %s, not local", name, p->kind);
                return NULL;
            }
            return p;
        }
        if (!name && strcmp(p->kind, "local") == 0) {
            if (found) {
                tm_cli_usage_error("local", "--provider: several local providers (%s, %s): name one",
                                   found->name, p->name);
                return NULL;
            }
            found = p;
        }
    }
    if (!found)
        tm_cli_usage_error("local", name ? "--provider: no provider named %s" : "%s",
                           name ? name : "the configuration has no provider of kind local");
    return found;
}

static int local_interrupt(int argc, char **argv)
{
    static const struct option opts[] = {
        {"config", required_argument, NULL, TM_CLI_OPT_CONFIG},
        {"provider", required_argument, NULL, 'p'},
        {"in", required_argument, NULL, 'i'},
        {"help", no_argument, NULL, TM_CLI_OPT_HELP},
        {"h", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    struct tm_cli_common c = {.cmd = "local"};
    const struct tm_config_provider *p;
    const char *provider = NULL;
    int64_t in_ms = -1, now, node = 0;
    long id = 0;
    char err[512];
    int opt, r;

    optind = 1;
    while ((opt = getopt_long(argc, argv, ":h", opts, NULL)) != -1) {
        switch (opt) {
        case 'p':
            provider = optarg;
            break;
        case 'i':
            if (tm_duration_parse(optarg, &in_ms) < 0 || in_ms <= 0)
                return tm_cli_usage_error("local", "--in: must be a positive duration like 30s, not \"%s\"",
                                          optarg);
            break;
        case 'h':
        case TM_CLI_OPT_HELP:
            fputs(local_help, stdout);
            return TM_EXIT_OK;
        default:
            r = tm_cli_common_opt(&c, opt, optarg, argv);
            if (r != 1)
                return r;
        }
    }
    if (optind + 1 != argc)
        return tm_cli_usage_error("local", "interrupt takes one NODE id");
    if (!tm_cli_parse_long(argv[optind], 1, 999999999999999999L, &id))
        return tm_cli_usage_error("local", "NODE: must be a positive whole number, not \"%s\"",
                                  argv[optind]);
    node = id;
    r = tm_cli_load_config(&c, true);
    if (r != 0)
        return r;
    p = local_provider(&c.cfg, provider);
    if (!p) {
        tm_cli_common_release(&c);
        return TM_EXIT_USAGE;
    }
    if (in_ms < 0)
        in_ms = p->spot_notice_ms > 0 ? p->spot_notice_ms : 120000;
    now = tm_cli_now_ms();
    r = tm_local_interrupt(p->state_dir, node, now, now + in_ms, err, sizeof(err));
    if (r < 0) {
        fprintf(stderr, "tarmac local: %s\n", err);
        tm_cli_common_release(&c);
        return r == TM_ENOTFOUND ? TM_EXIT_USAGE : TM_EXIT_FAIL;
    }
    printf("node %" PRId64 ": interruption notice written, the instance goes in %" PRId64 " s\n", node,
           in_ms / 1000);
    tm_cli_common_release(&c);
    return TM_EXIT_OK;
}

int tm_cli_local(int argc, char **argv)
{
    if (argc < 2 || strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "--help") == 0) {
        fputs(local_help, argc < 2 ? stderr : stdout);
        return argc < 2 ? TM_EXIT_USAGE : TM_EXIT_OK;
    }
    if (strcmp(argv[1], "interrupt") != 0)
        return tm_cli_usage_error("local", "unknown verb \"%s\" (local interrupt NODE)", argv[1]);
    return local_interrupt(argc - 1, argv + 1);
}
