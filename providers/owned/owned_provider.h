/*
 * providers/owned/owned_provider.h: the provider of `kind: owned`.  Its
 * machines join by themselves (`tarmac agent --join`, a join token,
 * controller/api/agent_join.c), so it has nothing to launch, terminate or
 * list: the controller never asks it to (the pools' owned flag keeps them
 * out of the planner and of every release), and the table answers
 * TM_EINVAL if something did.  It has no list: its nodes' liveness is
 * their heartbeats, not a cloud's listing.
 */
#ifndef TM_OWNED_PROVIDER_H
#define TM_OWNED_PROVIDER_H

#include <uv.h>

#include "core/config.h"
#include "providers/provider.h"

/* 0 and *ret (close it with ops->close), or TM_ENOMEM. */
int tm_owned_provider_create(uv_loop_t *loop, const struct tm_config_provider *p,
                             struct tm_provider **ret);

#endif
