/*
 * providers/owned/owned_config.c: `kind: owned`, machines tarmac does not
 * buy (docs/owned.md).  Its row says so (owned), which the loader copies
 * to each of its providers and pools; the controller reads that flag, never
 * the kind's name.  region names the site; instance types would describe
 * something to buy, so none may be given.
 */
#include "providers/owned/owned_config.h"

#include "core/config_kind.h"

static int owned_check(struct cfg_ctx *c, const struct tm_config *cfg, size_t i)
{
    if (cfg->providers[i].ntypes > 0) {
        tm_cfg_path_set(c, "providers[%zu].instance_types", i);
        return tm_cfg_fail_at(c, "an owned provider buys nothing: describe its machines on its "
                                 "pools (gpu_model, gpus_per_node), not as instance types");
    }
    return 0;
}

const struct tm_config_kind tm_config_kind_owned = {
    .name = "owned",
    .owned = true,
    .check = owned_check,
    /* Nothing boots on tarmac's word: an owned machine is there or not. */
    .boot_ms = NULL,
};
