/*
 * core/config_reservation.c: a pool's `reservations:` (config.h's struct
 * tm_config_reservation), the rules every cloud shares.  How an id is
 * spelled, and which keys a cloud that says nothing needs, are its kind's
 * (check_pools in providers/KIND/KIND_config.c), run after these.
 */
#include <stdio.h>
#include <string.h>

#include "core/config_internal.h"
#include "core/err.h"
#include "core/units.h"

static const struct cfg_field cfg_reservation_fields[] = {
    {.key = "id", .type = CFG_STR, .offset = CFG_OFF(tm_config_reservation, id),
     .flags = CFG_REQUIRED | CFG_NAME},
    {.key = "block", .type = CFG_BOOL, .offset = CFG_OFF(tm_config_reservation, block),
     .def = "false"},
    {.key = "instance_type", .type = CFG_STR,
     .offset = CFG_OFF(tm_config_reservation, instance_type), .flags = CFG_NAME},
    {.key = "zone", .type = CFG_STR, .offset = CFG_OFF(tm_config_reservation, zone),
     .flags = CFG_NAME},
    {.key = "count", .type = CFG_INT, .offset = CFG_OFF(tm_config_reservation, count), .def = "0",
     .min = 0, .max = 100000},
    {.key = "start", .type = CFG_STR, .offset = CFG_OFF(tm_config_reservation, start)},
    {.key = "end", .type = CFG_STR, .offset = CFG_OFF(tm_config_reservation, end)},
};
const struct cfg_section tm_cfg_reservation_section = {
    .fields = cfg_reservation_fields, .nfields = CFG_NFIELDS(cfg_reservation_fields),
    .size = sizeof(struct tm_config_reservation)};

/* "2026-12-08 00:00:00", with a T between and a Z after allowed (EC2
 * writes its dates so): true and ms. */
static bool resv_parse_date(const char *s, int64_t *ret)
{
    char buf[32];
    size_t n = strlen(s);

    if (n == 0 || n >= sizeof(buf))
        return false;
    memcpy(buf, s, n + 1);
    if (buf[n - 1] == 'Z')
        buf[n - 1] = '\0';
    return tm_utc_datetime_parse(buf, ret);
}

static int resv_check_dates(struct cfg_ctx *c, struct tm_config_reservation *r, size_t i, size_t k)
{
    if (r->start && !resv_parse_date(r->start, &r->start_ms)) {
        tm_cfg_path_set(c, "pools[%zu].reservations[%zu].start", i, k);
        return tm_cfg_fail_at(c, "expected a UTC date and time such as \"2026-12-08 00:00:00\"");
    }
    if (r->end && !resv_parse_date(r->end, &r->end_ms)) {
        tm_cfg_path_set(c, "pools[%zu].reservations[%zu].end", i, k);
        return tm_cfg_fail_at(c, "expected a UTC date and time such as \"2026-12-08 00:00:00\"");
    }
    if (r->start && r->end && r->end_ms <= r->start_ms) {
        tm_cfg_path_set(c, "pools[%zu].reservations[%zu].end", i, k);
        return tm_cfg_fail_at(c, "%s is not after start (%s)", r->end, r->start);
    }
    return 0;
}

/* A pool can run only its own shape: a stated type must be one of its. */
static int resv_check_type(struct cfg_ctx *c, const struct tm_config_pool *pool,
                      const struct tm_config_reservation *r, size_t i, size_t k)
{
    bool type_ok = !r->instance_type, zone_ok = !r->zone;

    for (size_t t = 0; !type_ok && t < pool->ninstance_types; t++)
        type_ok = strcmp(pool->instance_types[t], r->instance_type) == 0;
    for (size_t z = 0; !zone_ok && z < pool->nzones; z++)
        zone_ok = strcmp(pool->zones[z], r->zone) == 0;
    if (!type_ok) {
        tm_cfg_path_set(c, "pools[%zu].reservations[%zu].instance_type", i, k);
        return tm_cfg_fail_at(c, "\"%s\" is not one of the pool's instance_types", r->instance_type);
    }
    if (!zone_ok) {
        tm_cfg_path_set(c, "pools[%zu].reservations[%zu].zone", i, k);
        return tm_cfg_fail_at(c, "\"%s\" is not one of the pool's zones", r->zone);
    }
    return 0;
}

/* Whether id is named before (pool i, reservation k) anywhere in the file. */
static bool resv_named_before(const struct tm_config *cfg, const char *id, size_t i, size_t k,
                         size_t *at_i, size_t *at_k)
{
    for (size_t p = 0; p <= i; p++)
        for (size_t q = 0; q < cfg->pools[p].nreservations && (p < i || q < k); q++)
            if (strcmp(cfg->pools[p].reservations[q].id, id) == 0) {
                *at_i = p;
                *at_k = q;
                return true;
            }
    return false;
}

/* Two blocks of one pool whose stated terms overlap are one purchase
 * written twice, or a typo: either way the pool's capacity would be
 * counted twice for the overlap. */
static int resv_check_overlap(struct cfg_ctx *c, const struct tm_config_pool *pool, size_t i, size_t k)
{
    const struct tm_config_reservation *r = &pool->reservations[k];

    if (!r->block || !r->start || !r->end)
        return 0;
    for (size_t q = 0; q < k; q++) {
        const struct tm_config_reservation *o = &pool->reservations[q];

        if (!o->block || !o->start || !o->end || r->start_ms >= o->end_ms ||
            o->start_ms >= r->end_ms)
            continue;
        if (r->instance_type && o->instance_type && strcmp(r->instance_type, o->instance_type) != 0)
            continue;
        if (r->zone && o->zone && strcmp(r->zone, o->zone) != 0)
            continue;
        tm_cfg_path_set(c, "pools[%zu].reservations[%zu].start", i, k);
        return tm_cfg_fail_at(c, "the block overlaps pools[%zu].reservations[%zu] (%s to %s)", i,
                              q, o->start, o->end);
    }
    return 0;
}

int tm_cfg_check_reservations(struct cfg_ctx *c, struct tm_config *cfg)
{
    for (size_t i = 0; i < cfg->npools; i++) {
        struct tm_config_pool *pool = &cfg->pools[i];

        const struct tm_config_provider *prov = tm_config_provider_find(cfg, pool->provider);
        const struct tm_config_kind *kind = prov ? tm_config_kind_find(prov->kind) : NULL;

        if (pool->nreservations > 0 && kind && !kind->reservations) {
            tm_cfg_path_set(c, "pools[%zu].reservations", i);
            return tm_cfg_fail_at(c, "kind \"%s\" cannot launch into reservations", kind->name);
        }
        for (size_t k = 0; k < pool->nreservations; k++) {
            struct tm_config_reservation *r = &pool->reservations[k];
            size_t at_i, at_k;

            if (resv_named_before(cfg, r->id, i, k, &at_i, &at_k)) {
                tm_cfg_path_set(c, "pools[%zu].reservations[%zu].id", i, k);
                return tm_cfg_fail_at(c, "reservation \"%s\" is already named by "
                                      "pools[%zu].reservations[%zu]", r->id, at_i, at_k);
            }
            if (resv_check_dates(c, r, i, k) < 0 || resv_check_type(c, pool, r, i, k) < 0 ||
                resv_check_overlap(c, pool, i, k) < 0)
                return TM_EINVAL;
        }
    }
    return 0;
}
