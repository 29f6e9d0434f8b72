/*
 * providers/common/reservations.h: a provider's reserved capacity, what
 * the launch engine offers before anything else.
 *
 * A pool names its reservations in the file (core/config.h's struct
 * tm_config_reservation); the provider keeps one row per reservation, the
 * file's statements first, overwritten by what the cloud says each time it
 * is asked (tm_reservations_heard).  A row is offered to a launch of its
 * pool while it is usable: not ended (cancelled, expired, failed: never
 * launched into again), active by the cloud's word (or not yet heard of,
 * for a cloud that says nothing), inside its term, of the launch's type and
 * zone, with room, and not refused for capacity lately
 * (tm_reservations_note_full: until the next answer from the cloud, or a
 * while).  A block's instances are taken back before its end (EC2 begins
 * 30 minutes before), so a block is not offered in that window.
 */
#ifndef TM_PROVIDER_RESERVATIONS_H
#define TM_PROVIDER_RESERVATIONS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/config.h"
#include "providers/common/pools.h"
#include "providers/provider.h"

/* The window before a block's end in which nothing is launched into it. */
#define TM_RESERVATION_BLOCK_END_MS (30LL * 60 * 1000)
/* How long a reservation refused for capacity is not offered, at most. */
#define TM_RESERVATION_FULL_MS (5LL * 60 * 1000)

struct tm_reservation {
    char id[TM_ID_MAX];
    char pool[TM_ID_MAX];
    char type[TM_ID_MAX];         /* "" not known */
    char zone[TM_ID_MAX];         /* "" not known */
    int total;                    /* -1 not known */
    int available;                /* -1 not known */
    int64_t start_ms, end_ms;     /* wall clock; 0 not known (end 0: open-ended) */
    bool block;
    bool only;                    /* its pool buys nothing past its reservations */
    char state[32];               /* the cloud's word ("active", "cancelled", ...); "" not heard */
    bool ended;                   /* never offered again */
    uint64_t full_until;          /* provider clock: not offered before */
};

struct tm_reservations {
    struct tm_reservation *v;
    size_t n;
};

/* What a cloud said about one reservation (fields it did not give: ""
 * and -1 / 0 as in the row). */
struct tm_reservation_fact {
    const char *id;
    const char *type, *zone, *state;
    int total, available;
    int64_t start_ms, end_ms;
    bool block;
};

/* The reservations of cfg's pools whose provider is provider: 0 and *ret
 * (free with tm_reservations_free, also on failure), or TM_ENOMEM. */
int tm_reservations_copy(const struct tm_config *cfg, const char *provider,
                         struct tm_reservations *ret);
void tm_reservations_free(struct tm_reservations *rs);

/* The row of id, or NULL. */
struct tm_reservation *tm_reservations_find(struct tm_reservations *rs, const char *id);

/* Whether r can take a launch of type (and zone, "" any) now: wall_ms the
 * wall clock, now_ms the provider's. */
bool tm_reservation_usable(const struct tm_reservation *r, const char *type, const char *zone,
                           int64_t wall_ms, uint64_t now_ms);

/* The cloud's answer for f->id, laid over the row.  Returns 1 when the row
 * has just ended (why says so in one line: "cr-... cancelled"), 0 else,
 * TM_ENOTFOUND when no row has that id. */
int tm_reservations_heard(struct tm_reservations *rs, const struct tm_reservation_fact *f,
                          uint64_t now_ms, char *why, size_t whysize);

/* The cloud refused a launch into id for capacity: not offered until the
 * next answer or TM_RESERVATION_FULL_MS. */
void tm_reservations_note_full(struct tm_reservations *rs, const char *id, uint64_t now_ms);

/* Whether r's (cloud-said or stated) type and zone fit pool: NULL, or a
 * one-line reason naming what differs. */
const char *tm_reservation_mismatch(const struct tm_reservation *r,
                                    const struct tm_provider_pool *pool, char *buf, size_t size);

#endif
