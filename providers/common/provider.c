/* providers/common/provider.c: what every provider shares. */
#include "providers/provider.h"

const char *tm_instance_state_name(enum tm_instance_state s)
{
    static const char *const names[TM_INSTANCE_STATE_MAX] = {
        "pending", "running", "stopping", "stopped", "terminated",
    };
    return (unsigned)s < TM_INSTANCE_STATE_MAX ? names[s] : "unknown";
}
