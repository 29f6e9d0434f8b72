/*
 * controller/spec/join_body.h: POST /v1/agent/join (docs/openapi.yaml,
 * docs/owned.md), the body an owned machine joins its pool with, and the
 * rule its hardware is held to: pure, so the fuzz and unit tests reach
 * them without a server.
 *
 *   {"pool": "dgx", "node_key": "...", "join_token": "...",
 *    "address": "10.0.0.5",
 *    "hardware": {"gpus": 8, "gpu_model": "H100", "gpu_memory_mib": 81559,
 *                 "cpus": 128, "memory_mib": 2063000}}
 *
 * join_token is left out when the machine rejoins with its node key only.
 */
#ifndef TM_SPEC_JOIN_BODY_H
#define TM_SPEC_JOIN_BODY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <cjson/cJSON.h>

#include "controller/spec/spec_error.h"
#include "core/config.h"

/* A machine's hardware as its agent reads it (NVML or the fake source for
 * the GPUs, the system for CPUs and memory). */
struct tm_join_hardware {
    int gpus;                 /* 0 .. 16 */
    char gpu_model[64];
    int64_t gpu_memory_mib;   /* per GPU */
    int cpus;
    int64_t memory_mib;
};

struct tm_join_body {
    const char *pool;         /* these point into the parsed document */
    const char *node_key;
    const char *join_token;   /* NULL: a rejoin by node key alone */
    const char *address;      /* NULL: none given */
    struct tm_join_hardware hw;
};

/* Parse body: 0 with *ret filled and *ret_root to cJSON_Delete (after the
 * caller wiped the secrets), or TM_EINVAL with err naming the field. */
int tm_join_parse(const char *body, size_t len, struct tm_join_body *ret, cJSON **ret_root,
                  struct tm_spec_error *err);

/* Whether hw fits pool's declared shape: exactly gpus_per_node GPUs of
 * gpu_model, or with mixed_shapes 1 .. gpus_per_node of gpu_model.  false
 * with why (one line naming the difference, as "pool dgx wants 8 x H100,
 * machine has 4 x A100"). */
bool tm_join_shape_ok(const struct tm_config_pool *pool, const struct tm_join_hardware *hw, char *why,
                      size_t size);

/* The report as the node keeps it (nodes.hardware): a JSON object in buf,
 * keys sorted, so that two equal reports are equal text.  false when buf
 * is too small. */
bool tm_join_hardware_json(const struct tm_join_hardware *hw, char *buf, size_t size);

#endif
