/*
 * providers/local/interrupt.c: `tarmac local interrupt NODE`, the local
 * provider's interruption on demand (tm_local_interrupt) for demos and
 * tests: it writes the node's notice file, which its agent (metadata
 * local) sees within its poll period; the instance goes at the deadline,
 * or as soon as its agent drained.  Blocking, one-shot; it needs the
 * server's --config (the provider's state_dir), not the database.  The
 * registry's row for kind local names it (command_main), so `tarmac local`
 * reaches it without the controller naming the kind; it reads only the
 * provider's name, kind, spot_notice_ms and state_dir.
 *
 * Its messages and exit codes are every command's (controller/cli/cli.h:
 * 0 done, 1 failed, 2 bad usage), written here because a provider may not
 * include the CLI's headers.
 */
#include <errno.h>
#include <stdbool.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/clock.h"
#include "core/config.h"
#include "core/err.h"
#include "core/units.h"
#include "providers/local/local_config.h"
#include "providers/local/local_provider.h"

#define KIND "local"

enum { EXIT_OK = 0, EXIT_FAIL = 1, EXIT_USAGE = 2 };
enum { OPT_CONFIG = 1000, OPT_HELP };

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

static int usage_error(const char *fmt, ...)
{
    va_list ap;

    fprintf(stderr, "tarmac " KIND ": ");
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fprintf(stderr, "\nTry \"tarmac " KIND " --help\".\n");
    return EXIT_USAGE;
}

/* The file tm_config_path() names into *cfg: 0, or EXIT_USAGE after
 * printing why. */
static int load_config(const char *given, struct tm_config *cfg)
{
    const char *path = tm_config_path(given);
    char err[512];

    if (!path) {
        fprintf(stderr, "tarmac " KIND ": no configuration: give --config FILE or set TARMAC_CONFIG\n");
        return EXIT_USAGE;
    }
    if (tm_config_load(path, cfg, err, sizeof(err)) < 0 || tm_config_apply_env(cfg, err, sizeof(err)) < 0) {
        fprintf(stderr, "tarmac " KIND ": invalid configuration: %s\n", err);
        return EXIT_USAGE;
    }
    return 0;
}

/* NODE: a positive whole number into *ret, or false. */
static bool parse_node(const char *s, int64_t *ret)
{
    char *end;
    long long v;

    errno = 0;
    v = strtoll(s, &end, 10);
    if (errno || end == s || *end || v < 1 || v > 999999999999999999LL)
        return false;
    *ret = v;
    return true;
}

/* The provider of kind local named name (any when NULL and only one), or
 * NULL after printing why. */
static const struct tm_config_provider *local_provider(const struct tm_config *cfg, const char *name)
{
    const struct tm_config_provider *found = NULL;

    for (size_t i = 0; i < cfg->nproviders; i++) {
        const struct tm_config_provider *p = &cfg->providers[i];
        if (name && strcmp(p->name, name) == 0) {
            if (strcmp(p->kind, KIND) != 0) {
                usage_error("--provider: %s is of kind %s, not local", name, p->kind);
                return NULL;
            }
            return p;
        }
        if (!name && strcmp(p->kind, KIND) == 0) {
            if (found) {
                usage_error("--provider: several local providers (%s, %s): name one", found->name, p->name);
                return NULL;
            }
            found = p;
        }
    }
    if (!found)
        usage_error(name ? "--provider: no provider named %s" : "%s",
                    name ? name : "the configuration has no provider of kind " KIND);
    return found;
}

static int local_interrupt(int argc, char **argv)
{
    static const struct option opts[] = {
        {"config", required_argument, NULL, OPT_CONFIG},
        {"provider", required_argument, NULL, 'p'},
        {"in", required_argument, NULL, 'i'},
        {"help", no_argument, NULL, OPT_HELP},
        {"h", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    struct tm_config cfg = {0};
    const struct tm_config_provider *p;
    const char *config = NULL, *provider = NULL;
    int64_t in_ms = -1, now, node = 0;
    char err[512];
    int opt, r;

    optind = 1;
    while ((opt = getopt_long(argc, argv, ":h", opts, NULL)) != -1) {
        switch (opt) {
        case OPT_CONFIG:
            config = optarg;
            break;
        case 'p':
            provider = optarg;
            break;
        case 'i':
            if (tm_duration_parse(optarg, &in_ms) < 0 || in_ms <= 0)
                return usage_error("--in: must be a positive duration like 30s, not \"%s\"", optarg);
            break;
        case 'h':
        case OPT_HELP:
            fputs(local_help, stdout);
            return EXIT_OK;
        case ':':
            return usage_error("option %s needs a value", argv[optind - 1]);
        case '?':
            return usage_error("unrecognized option \"%s\"", argv[optind - 1]);
        default:
            return usage_error("unrecognized option");
        }
    }
    if (optind + 1 != argc)
        return usage_error("interrupt takes one NODE id");
    if (!parse_node(argv[optind], &node))
        return usage_error("NODE: must be a positive whole number, not \"%s\"", argv[optind]);
    r = load_config(config, &cfg);
    if (r != 0)
        return r;
    p = local_provider(&cfg, provider);
    if (!p) {
        tm_config_release(&cfg);
        return EXIT_USAGE;
    }
    if (in_ms < 0)
        in_ms = p->spot_notice_ms > 0 ? p->spot_notice_ms : 120000;
    now = tm_wall_ms();
    r = tm_local_interrupt(tm_local_config(p)->state_dir, node, now, now + in_ms, err, sizeof(err));
    tm_config_release(&cfg);
    if (r < 0) {
        fprintf(stderr, "tarmac " KIND ": %s\n", err);
        return r == TM_ENOTFOUND ? EXIT_USAGE : EXIT_FAIL;
    }
    printf("node %" PRId64 ": interruption notice written, the instance goes in %" PRId64 " s\n", node,
           in_ms / 1000);
    return EXIT_OK;
}

int tm_local_command_main(int argc, char **argv)
{
    if (argc < 2 || strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "--help") == 0) {
        fputs(local_help, argc < 2 ? stderr : stdout);
        return argc < 2 ? EXIT_USAGE : EXIT_OK;
    }
    if (strcmp(argv[1], "interrupt") != 0)
        return usage_error("unknown verb \"%s\" (local interrupt NODE)", argv[1]);
    return local_interrupt(argc - 1, argv + 1);
}
