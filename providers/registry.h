/*
 * providers/registry.h: the provider kinds this build knows, one row each
 * (providers/registry.c), looked up by the daemon (`tarmac serve`) and by
 * `tarmac check`.  A new cloud is a new folder under providers/ and a new
 * row here: its folder's KIND_config.c gives its configuration keys, their
 * rules and its boot time (core/config_kind.h, gathered by the build), and
 * its node-side reader is controller/agent/'s file of its name, listed in
 * TM_MD_CLOUDS (docs/adding-a-cloud.md).  A kind may also bring a
 * command of its own (`tarmac local interrupt NODE`), listed and run by
 * the binary's command table from its row.  The row's name is the one its
 * KIND_config.c gives.
 */
#ifndef TM_PROVIDER_REGISTRY_H
#define TM_PROVIDER_REGISTRY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <uv.h>

#include "core/config.h"
#include "providers/provider.h"

/* What a provider may need from the daemon to start. */
struct tm_provider_env {
    uv_loop_t *loop;
    const struct tm_config *cfg;
    const char *db_url;                   /* the controller's database */
    int64_t (*now_ms)(void *clock);       /* the controller's clock */
    void *clock;
};

/* Called once when a provider's pools were checked against its cloud:
 * status 0 sound, TM_EINVAL with reason (one line) a pool the cloud cannot
 * serve, another code when the cloud could not be asked.  reason is valid
 * only during the call. */
typedef void (*tm_provider_validated_cb)(int status, const char *reason, void *data);

struct tm_provider_kind {
    const char *name;                     /* the config's providers[].kind */
    /* Create the provider for p on env->loop: 0 and *ret (close it with
     * ops->close), or a negative code.  Errors are logged. */
    int (*create)(const struct tm_provider_env *env, const struct tm_config_provider *p,
                  struct tm_provider **ret);
    /* Optional: check the provider's pools against the cloud, on the loop.
     * 0 when cb will fire (never inside this call), else a negative code. */
    int (*validate)(struct tm_provider *p, tm_provider_validated_cb cb, void *data);
    /* Optional: `tarmac check NAME ...` (argv[0] is "check"), and the
     * arguments its usage line shows after the name. */
    int (*check_main)(int argc, char **argv);
    const char *check_usage;
    /* Optional: a command of the kind's own, `tarmac NAME ...` (argv[0]
     * is NAME), and what `tarmac --help` says it does. */
    int (*command_main)(int argc, char **argv);
    const char *command_help;
    /* Its nodes run no agent: the daemon's sim agent stands in for them. */
    bool simulated;
};

/* The row of kind name, or NULL when this build has none. */
const struct tm_provider_kind *tm_provider_kind_find(const char *name);

/* The rows, in table order: *ret_n of them. */
const struct tm_provider_kind *tm_provider_kinds(size_t *ret_n);

/* The kinds' names as a list for messages ("sim and aws"; with
 * checkable, only those with a check command) into buf. */
void tm_provider_kind_names(char *buf, size_t size, bool checkable);

#endif
