/*
 * controller/cli/kind_command.c: the provider kinds' own commands (`tarmac
 * local interrupt NODE`), from their rows in providers/registry.c, for
 * main.c's command table, which includes cli.h alone.
 */
#include <stddef.h>

#include "controller/cli/cli.h"
#include "providers/registry.h"

bool tm_cli_kind_command(size_t i, const char **ret_name, int (**ret_run)(int argc, char **argv),
                         const char **ret_help)
{
    size_t n;
    const struct tm_provider_kind *k = tm_provider_kinds(&n);

    for (size_t j = 0; j < n; j++) {
        if (!k[j].command_main)
            continue;
        if (i-- > 0)
            continue;
        *ret_name = k[j].name;
        *ret_run = k[j].command_main;
        *ret_help = k[j].command_help;
        return true;
    }
    return false;
}
