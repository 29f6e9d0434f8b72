/*
 * controller/cli/check.c: `tarmac check KIND ...`, each kind's command from
 * its row in providers/registry.c.
 */
#include <stdio.h>
#include <string.h>

#include "controller/cli/cli.h"
#include "providers/registry.h"

int tm_cli_check(int argc, char **argv)
{
    const struct tm_provider_kind *kind = argc >= 2 ? tm_provider_kind_find(argv[1]) : NULL;
    char names[128];

    if (kind && kind->check_main)
        return kind->check_main(argc, argv);
    if (argc >= 2 && strcmp(argv[1], "config") == 0)
        return tm_cli_check_config(argc, argv);
    if (argc >= 2 && (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0)) {
        size_t n;
        const struct tm_provider_kind *k = tm_provider_kinds(&n);
        const char *lead = "Usage:";

        for (size_t i = 0; i < n; i++)
            if (k[i].check_main) {
                printf("%s tarmac check %s %s\n", lead, k[i].name, k[i].check_usage);
                lead = "      ";
            }
        printf("%s tarmac check config [--config FILE]\n", lead);
        printf("\nResolve credentials as the controller does, call the cloud and print what it\n"
               "offers.  Exit 0 ok, 3 authentication failed, 1 other failure.  check config\n"
               "validates the configuration alone and lists each queue's offers, cheapest first.\n");
        return TM_EXIT_OK;
    }
    tm_provider_kind_names(names, sizeof(names), true);
    fprintf(stderr, "tarmac check: unrecognized provider \"%s\" (valid: %s)\n",
            argc >= 2 ? argv[1] : "", names);
    return TM_EXIT_USAGE;
}
