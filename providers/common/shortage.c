/* providers/common/shortage.c: the shortage memory (see shortage.h). */
#include "providers/common/shortage.h"

#include <stdio.h>
#include <string.h>

#include "core/log.h"

#define SHORTAGE_TTL_DEFAULT_MS (10 * 60 * 1000)

void tm_shortages_init(struct tm_shortages *m, const char *cloud, const char *type_key,
                       const char *provider, uint64_t ttl_ms)
{
    memset(m, 0, sizeof(*m));
    m->cloud = cloud;
    m->type_key = type_key;
    m->provider = provider;
    m->ttl_ms = ttl_ms ? ttl_ms : SHORTAGE_TTL_DEFAULT_MS;
}

static struct tm_shortage *find(const struct tm_shortages *m, uint64_t now, const char *type,
                                const char *zone, enum tm_capacity_type capacity)
{
    for (size_t i = 0; i < TM_SHORTAGE_MAX; i++) {
        const struct tm_shortage *s = &m->e[i];

        if (s->until > now && s->capacity == capacity && strcmp(s->type, type) == 0 &&
            strcmp(s->zone, zone) == 0)
            return (struct tm_shortage *)s;
    }
    return NULL;
}

bool tm_shortages_has(const struct tm_shortages *m, uint64_t now, const char *type,
                      const char *zone, enum tm_capacity_type capacity)
{
    return type && find(m, now, type, zone ? zone : "", capacity) != NULL;
}

void tm_shortages_note(struct tm_shortages *m, uint64_t now, const char *type, const char *zone,
                       enum tm_capacity_type capacity, const char *code)
{
    struct tm_shortage *s;
    char msg[64];

    if (!zone)
        zone = "";
    if (!type || !tm_id_fits(type) || !tm_id_fits(zone))
        return;
    s = find(m, now, type, zone, capacity);
    if (!s) {
        /* An expired slot, else the one that expires first. */
        s = &m->e[0];
        for (size_t i = 0; i < TM_SHORTAGE_MAX; i++) {
            if (m->e[i].until <= now) {
                s = &m->e[i];
                break;
            }
            if (m->e[i].until < s->until)
                s = &m->e[i];
        }
        snprintf(s->type, sizeof(s->type), "%s", type);
        snprintf(s->zone, sizeof(s->zone), "%s", zone);
        s->capacity = capacity;
    }
    s->until = now + m->ttl_ms;
    snprintf(msg, sizeof(msg), "%s capacity short, remembered", m->cloud);
    tm_log_info(msg, "provider=%s %s=%s zone=%s market=%s code=%s for_s=%llu", m->provider,
                m->type_key, type, *zone ? zone : "-", tm_capacity_type_name(capacity),
                code && *code ? code : "-", (unsigned long long)(m->ttl_ms / 1000));
}
