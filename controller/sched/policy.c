/*
 * controller/sched/policy.c: the policy table, built from the rows of
 * TM_SCHED_POLICIES (scheduler.h): the names, the list the CLI and the
 * configuration's checks print, and each policy's hooks.  Nothing here
 * names a policy: a new one is a file and a row.
 */
#include "controller/sched/scheduler.h"

#include <string.h>

#include "controller/sched/internal.h"

#define POLICY_ROW(id, name) [TM_POLICY_##id] = &sched_##name,
static const struct sched_policy *const policies[TM_POLICY_MAX] = {TM_SCHED_POLICIES(POLICY_ROW)};
#undef POLICY_ROW

#define POLICY_NAME(id, name) [TM_POLICY_##id] = #name,
static const char *const policy_names[TM_POLICY_MAX] = {TM_SCHED_POLICIES(POLICY_NAME)};
#undef POLICY_NAME

/* ", fifo, backfill, tarmac": the list is this less its first two bytes. */
#define POLICY_LISTED(id, name) ", " #name
static const char policy_list[] = TM_SCHED_POLICIES(POLICY_LISTED);
#undef POLICY_LISTED

const char *tm_sched_policy_name(enum tm_sched_policy p)
{
    return (unsigned)p < TM_POLICY_MAX ? policy_names[p] : "unknown";
}

int tm_sched_policy_parse(const char *name)
{
    if (!name)
        return -1;
    for (int i = 0; i < TM_POLICY_MAX; i++)
        if (strcmp(policy_names[i], name) == 0)
            return i;
    return -1;
}

const char *tm_sched_policy_list(void)
{
    return policy_list + 2;
}

const struct sched_policy *sched_policy_of(enum tm_sched_policy p)
{
    return (unsigned)p < TM_POLICY_MAX ? policies[p] : NULL;
}
