/*
 * providers/owned/owned_config.h: kind owned's row of the configuration
 * (owned_config.c).  The kind has no provider keys of its own: what an
 * owned pool declares (its machines' shape, mixed_shapes, its cost per
 * node-hour) are pool keys, core's, refused on the pools of other kinds.
 */
#ifndef TM_OWNED_CONFIG_H
#define TM_OWNED_CONFIG_H

#include "core/config_kind.h"

extern const struct tm_config_kind tm_config_kind_owned;

#endif
