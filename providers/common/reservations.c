/*
 * providers/common/reservations.c: see reservations.h.
 */
#include "providers/common/reservations.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/err.h"

int tm_reservations_copy(const struct tm_config *cfg, const char *provider,
                         struct tm_reservations *ret)
{
    size_t n = 0, k = 0;

    memset(ret, 0, sizeof(*ret));
    for (size_t i = 0; i < cfg->npools; i++)
        if (strcmp(cfg->pools[i].provider, provider) == 0)
            n += cfg->pools[i].nreservations;
    if (n == 0)
        return 0;
    ret->v = calloc(n, sizeof(*ret->v));
    if (!ret->v)
        return TM_ENOMEM;
    for (size_t i = 0; i < cfg->npools; i++) {
        const struct tm_config_pool *pool = &cfg->pools[i];

        if (strcmp(pool->provider, provider) != 0)
            continue;
        for (size_t j = 0; j < pool->nreservations; j++) {
            const struct tm_config_reservation *c = &pool->reservations[j];
            struct tm_reservation *r = &ret->v[k++];

            tm_id_copy(r->id, c->id);
            tm_id_copy(r->pool, pool->name);
            tm_id_copy(r->type, c->instance_type);
            tm_id_copy(r->zone, c->zone);
            r->total = c->count > 0 ? c->count : -1;
            r->available = r->total;
            r->start_ms = c->start_ms;
            r->end_ms = c->end_ms;
            r->block = c->block;
            r->only = !pool->reservation_fallback;
        }
    }
    ret->n = k;
    return 0;
}

void tm_reservations_free(struct tm_reservations *rs)
{
    free(rs->v);
    rs->v = NULL;
    rs->n = 0;
}

struct tm_reservation *tm_reservations_find(struct tm_reservations *rs, const char *id)
{
    for (size_t i = 0; i < rs->n; i++)
        if (strcmp(rs->v[i].id, id) == 0)
            return &rs->v[i];
    return NULL;
}

bool tm_reservation_usable(const struct tm_reservation *r, const char *type, const char *zone,
                           int64_t wall_ms, uint64_t now_ms)
{
    int64_t last = r->end_ms;

    if (r->ended || (r->state[0] && strcmp(r->state, "active") != 0) || now_ms < r->full_until ||
        r->available == 0)
        return false;
    if ((r->type[0] && strcmp(r->type, type) != 0) || (zone[0] && r->zone[0] && strcmp(r->zone, zone) != 0))
        return false;
    if (r->block && last > 0)
        last -= TM_RESERVATION_BLOCK_END_MS;
    return (r->start_ms == 0 || wall_ms >= r->start_ms) && (last == 0 || wall_ms < last);
}

/* The cloud's states after which a reservation never takes an instance. */
static bool final_state(const char *state)
{
    static const char *const finals[] = {"expired", "cancelled", "failed", "payment-failed",
                                         "unsupported"};

    for (size_t i = 0; i < sizeof(finals) / sizeof(finals[0]); i++)
        if (strcmp(state, finals[i]) == 0)
            return true;
    return false;
}

int tm_reservations_heard(struct tm_reservations *rs, const struct tm_reservation_fact *f,
                          uint64_t now_ms, char *why, size_t whysize)
{
    struct tm_reservation *r = tm_reservations_find(rs, f->id);
    bool was_ended;

    (void)now_ms;
    if (!r)
        return TM_ENOTFOUND;
    was_ended = r->ended;
    if (f->type && f->type[0])
        tm_id_copy(r->type, f->type);
    if (f->zone && f->zone[0])
        tm_id_copy(r->zone, f->zone);
    if (f->total >= 0)
        r->total = f->total;
    if (f->available >= 0)
        r->available = f->available;
    if (f->start_ms > 0)
        r->start_ms = f->start_ms;
    if (f->end_ms > 0)
        r->end_ms = f->end_ms;
    r->block = r->block || f->block;
    if (f->state && f->state[0])
        snprintf(r->state, sizeof(r->state), "%s", f->state);
    /* A fresh count from the cloud is the news a refusal waited for. */
    r->full_until = 0;
    if (!was_ended && r->state[0] && final_state(r->state)) {
        r->ended = true;
        if (why && whysize)
            snprintf(why, whysize, "reservation %s of pool %s is %s: its pool stops launching into it",
                     r->id, r->pool, r->state);
        return 1;
    }
    return 0;
}

void tm_reservations_note_full(struct tm_reservations *rs, const char *id, uint64_t now_ms)
{
    struct tm_reservation *r = tm_reservations_find(rs, id);

    if (r)
        r->full_until = now_ms + TM_RESERVATION_FULL_MS;
}

const char *tm_reservation_mismatch(const struct tm_reservation *r,
                                    const struct tm_provider_pool *pool, char *buf, size_t size)
{
    bool type_ok = !r->type[0], zone_ok = !r->zone[0];

    for (size_t i = 0; !type_ok && i < pool->ntypes; i++)
        type_ok = strcmp(pool->types[i], r->type) == 0;
    for (size_t i = 0; !zone_ok && i < pool->nzones; i++)
        zone_ok = strcmp(pool->zones[i], r->zone) == 0;
    if (type_ok && zone_ok)
        return NULL;
    if (!type_ok)
        snprintf(buf, size, "pool \"%s\": reservation %s is for instance type \"%s\", not one of the "
                 "pool's instance_types", pool->name, r->id, r->type);
    else
        snprintf(buf, size, "pool \"%s\": reservation %s is in zone \"%s\", not one of the pool's zones",
                 pool->name, r->id, r->zone);
    return buf;
}
