/*
 * providers/common/settings.h: the environment knobs every provider reads
 * for its tests (retry budgets, timeouts: TARMAC_AWS_MAX_ATTEMPTS, ...).
 */
#ifndef TM_PROVIDER_SETTINGS_H
#define TM_PROVIDER_SETTINGS_H

#include <stdint.h>

/* $name as a whole decimal number; dflt when unset or empty, and dflt with
 * one warning naming the variable when it is not a number. */
uint64_t tm_provider_env_u64(const char *name, uint64_t dflt);

#endif
