/*
 * controller/spec/join_body.c: see join_body.h.
 */
#include "controller/spec/join_body.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "controller/spec/json_body.h"
#include "core/address.h"
#include "core/err.h"

#define JOIN_GPUS_MAX 16 /* what a node row holds (nodes.gpus) */

static bool num(const cJSON *item, double min, double max, int64_t *ret)
{
    double d;

    if (!cJSON_IsNumber(item))
        return false;
    d = item->valuedouble;
    if (!isfinite(d) || d != floor(d) || d < min || d > max)
        return false;
    *ret = (int64_t)d;
    return true;
}

/* A name as the configuration's (letters, digits, '.', '_', '-'). */
static bool name_ok(const char *s, size_t max)
{
    size_t n = s ? strlen(s) : 0;

    if (n == 0 || n > max)
        return false;
    for (size_t i = 0; i < n; i++) {
        char ch = s[i];
        if (!((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
              ch == '.' || ch == '_' || ch == '-'))
            return false;
    }
    return true;
}

static int parse_hardware(const cJSON *h, struct tm_join_hardware *hw, struct tm_spec_error *err)
{
    bool seen[5] = {false};
    int64_t v;

    if (!cJSON_IsObject(h))
        return tm_spec_fail(err, "hardware", "must be an object");
    for (const cJSON *m = h->child; m; m = m->next) {
        char field[64];
        tm_spec_field_name(field, sizeof(field), "hardware.", m->string);
        if (strcmp(m->string, "gpus") == 0 && !seen[0]) {
            if (!num(m, 0, 1024, &v))
                return tm_spec_fail(err, field, "must be a whole number of GPUs");
            hw->gpus = (int)v;
            seen[0] = true;
        } else if (strcmp(m->string, "gpu_model") == 0 && !seen[1]) {
            if (!cJSON_IsString(m) || !name_ok(m->valuestring, sizeof(hw->gpu_model) - 1))
                return tm_spec_fail(err, field, "must be a model name (letters, digits, '.', '_', '-')");
            snprintf(hw->gpu_model, sizeof(hw->gpu_model), "%s", m->valuestring);
            seen[1] = true;
        } else if (strcmp(m->string, "gpu_memory_mib") == 0 && !seen[2]) {
            if (!num(m, 0, 1 << 30, &hw->gpu_memory_mib))
                return tm_spec_fail(err, field, "must be a whole number of MiB");
            seen[2] = true;
        } else if (strcmp(m->string, "cpus") == 0 && !seen[3]) {
            if (!num(m, 1, 1 << 20, &v))
                return tm_spec_fail(err, field, "must be a whole number of CPUs, at least 1");
            hw->cpus = (int)v;
            seen[3] = true;
        } else if (strcmp(m->string, "memory_mib") == 0 && !seen[4]) {
            if (!num(m, 1, (double)(1LL << 40), &hw->memory_mib))
                return tm_spec_fail(err, field, "must be a whole number of MiB, at least 1");
            seen[4] = true;
        } else {
            return tm_spec_fail(err, field, "unrecognized or repeated field");
        }
    }
    static const char *const need[] = {"hardware.gpus", "hardware.gpu_model",
                                       "hardware.gpu_memory_mib", "hardware.cpus",
                                       "hardware.memory_mib"};
    for (size_t k = 0; k < 5; k++)
        if (!seen[k] && !(k == 1 && hw->gpus == 0))
            return tm_spec_fail(err, need[k], "required");
    return 0;
}

static int join_member(const cJSON *m, struct tm_join_body *b, struct tm_spec_error *err)
{
    char field[64];

    tm_spec_field_name(field, sizeof(field), "", m->string);
    if (strcmp(m->string, "pool") == 0 && !b->pool) {
        if (!cJSON_IsString(m) || !name_ok(m->valuestring, 64))
            return tm_spec_fail(err, "pool", "must be a pool name");
        b->pool = m->valuestring;
    } else if (strcmp(m->string, "node_key") == 0 && !b->node_key) {
        /* Never echoed, whatever it holds. */
        if (!cJSON_IsString(m) || strlen(m->valuestring) < 32 || strlen(m->valuestring) > 256)
            return tm_spec_fail(err, "node_key", "must be a string of 32-256 bytes");
        b->node_key = m->valuestring;
    } else if (strcmp(m->string, "join_token") == 0 && !b->join_token) {
        if (!cJSON_IsString(m) || strlen(m->valuestring) == 0 || strlen(m->valuestring) > 256)
            return tm_spec_fail(err, "join_token", "must be a string of 1-256 bytes");
        b->join_token = m->valuestring;
    } else if (strcmp(m->string, "address") == 0 && !b->address) {
        if (!cJSON_IsString(m) || !tm_ip_address_ok(m->valuestring))
            return tm_spec_fail(err, "address", "must be an IPv4 or IPv6 address, not a host name");
        b->address = m->valuestring;
    } else if (strcmp(m->string, "hardware") == 0) {
        return parse_hardware(m, &b->hw, err);
    } else {
        return tm_spec_fail(err, field, "unrecognized or repeated field");
    }
    return 0;
}

int tm_join_parse(const char *body, size_t len, struct tm_join_body *ret, cJSON **ret_root,
                  struct tm_spec_error *err)
{
    struct tm_join_body b = {0};
    cJSON *root = NULL;
    bool hw = false;
    int r;

    *ret_root = NULL;
    if (!body || len == 0)
        return tm_spec_fail(err, "body", "a JSON object is required");
    r = tm_json_body_parse(body, len, &root, err);
    if (r < 0)
        return r;
    if (!cJSON_IsObject(root)) {
        cJSON_Delete(root);
        return tm_spec_fail(err, "body", "must be a JSON object");
    }
    for (const cJSON *m = root->child; r == 0 && m; m = m->next) {
        if (strcmp(m->string, "hardware") == 0 && hw) {
            r = tm_spec_fail(err, "hardware", "given more than once");
            break;
        }
        hw = hw || strcmp(m->string, "hardware") == 0;
        r = join_member(m, &b, err);
    }
    if (r == 0 && !b.pool)
        r = tm_spec_fail(err, "pool", "required");
    if (r == 0 && !b.node_key)
        r = tm_spec_fail(err, "node_key", "required");
    if (r == 0 && !hw)
        r = tm_spec_fail(err, "hardware", "required");
    if (r < 0) {
        cJSON_Delete(root);
        return r;
    }
    *ret = b;
    *ret_root = root;
    return 0;
}

bool tm_join_shape_ok(const struct tm_config_pool *pool, const struct tm_join_hardware *hw, char *why,
                      size_t size)
{
    bool model = hw->gpus > 0 && strcmp(hw->gpu_model, pool->gpu_model) == 0;
    bool count = pool->mixed_shapes ? hw->gpus >= 1 && hw->gpus <= pool->gpus_per_node
                                    : hw->gpus == pool->gpus_per_node;

    if (model && count && hw->gpus <= JOIN_GPUS_MAX)
        return true;
    snprintf(why, size, "pool %s wants %s%d x %s, machine has %d x %s", pool->name,
             pool->mixed_shapes ? "1 to " : "", pool->gpus_per_node, pool->gpu_model, hw->gpus,
             hw->gpus > 0 ? hw->gpu_model : "no GPU");
    return false;
}

bool tm_join_hardware_json(const struct tm_join_hardware *hw, char *buf, size_t size)
{
    int n = snprintf(buf, size,
                     "{\"cpus\": %d, \"gpu_memory_mib\": %lld, \"gpu_model\": \"%s\", \"gpus\": %d, "
                     "\"memory_mib\": %lld}",
                     hw->cpus, (long long)hw->gpu_memory_mib, hw->gpu_model, hw->gpus,
                     (long long)hw->memory_mib);
    return n > 0 && (size_t)n < size;
}
