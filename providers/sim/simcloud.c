/*
 * providers/sim/simcloud.c: the pure model of a simulated cloud.
 *
 * Rows live in one growing array in launch order; a hash index maps tokens
 * to rows (tokens are remembered forever, as idempotency demands), and a
 * list of active rows (not yet gone from listings) keeps list, terminate,
 * capacity and next-event scans proportional to the live fleet rather than
 * to every launch a long replay ever made.
 */
#include "providers/sim/simcloud.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/err.h"

#define MS_PER_HOUR 3600000.0

struct tm_simcloud {
    struct tm_simcloud_params params;
    struct tm_sim_instance *rows;
    size_t nrows, rows_cap;
    size_t *active;            /* indices into rows, in launch order */
    size_t nactive, active_cap;
    size_t *slots;             /* token hash index: row index + 1, 0 = empty */
    size_t *id_slots;          /* instance id hash index, the same shape */
    size_t nslots;             /* a power of two, kept under half full */
};

/* FNV-1a: a stable 64-bit hash of a string (stable across runs and hosts,
 * which the derived ids and fates depend on). */
static uint64_t hash_str(const char *s)
{
    uint64_t h = 14695981039346656037ull;

    for (; *s; s++) {
        h ^= (unsigned char)*s;
        h *= 1099511628211ull;
    }
    return h;
}

/* splitmix64: one step is a good enough mixer to turn (seed, token) into
 * an independent uniform draw. */
static uint64_t mix64(uint64_t x)
{
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}


static void copy_id(char dst[TM_ID_MAX], const char *src)
{
    snprintf(dst, TM_ID_MAX, "%s", src ? src : "");
}

/* a + b saturating at TM_SIM_NEVER, so "never" stays never. */
static int64_t add_sat(int64_t a, int64_t b)
{
    if (a == TM_SIM_NEVER || b == TM_SIM_NEVER)
        return TM_SIM_NEVER;
    if (b > 0 && a > INT64_MAX - b)
        return TM_SIM_NEVER;
    return a + b;
}

static int64_t min64(int64_t a, int64_t b) { return a < b ? a : b; }

void tm_simcloud_params_init(struct tm_simcloud_params *p)
{
    memset(p, 0, sizeof(*p));
    p->boot_delay_ms = 90000;
    p->spot_hazard_per_hour = 0;
    p->spot_notice_ms = 120000;
    p->shutdown_ms = 30000;
    p->retention_ms = 3600000;
    p->seed = 1;
}

const struct tm_sim_type *tm_sim_type_find(const struct tm_simcloud_params *p, const char *name)
{
    if (!name)
        return NULL;
    for (size_t i = 0; i < p->ntypes && i < TM_SIM_TYPES_MAX; i++)
        if (strcmp(p->types[i].name, name) == 0)
            return &p->types[i];
    return NULL;
}

/* Whether zone is one of the cloud's zones (the default "sim-a" when the
 * params name none). */
static bool zone_known(const struct tm_simcloud_params *p, const char *zone)
{
    if (p->nzones == 0)
        return strcmp(zone, "sim-a") == 0;
    for (size_t i = 0; i < p->nzones && i < TM_SIM_ZONES_MAX; i++)
        if (strcmp(p->zones[i], zone) == 0)
            return true;
    return false;
}

void tm_sim_spot_for_pool(const struct tm_simcloud_params *p, const char *pool,
                          double *ret_hazard_per_hour, int64_t *ret_notice_ms)
{
    *ret_hazard_per_hour = p->spot_hazard_per_hour;
    *ret_notice_ms = p->spot_notice_ms;
    for (size_t i = 0; pool && pool[0] && i < p->npools && i < TM_SIM_POOLS_MAX; i++) {
        if (strcmp(p->pools[i].pool, pool) == 0) {
            *ret_hazard_per_hour = p->pools[i].hazard_per_hour;
            *ret_notice_ms = p->pools[i].notice_ms;
            return;
        }
    }
}

void tm_sim_spot_for_launch(const struct tm_simcloud_params *p, const char *pool, const char *type,
                            const char *zone, double *ret_hazard_per_hour, int64_t *ret_notice_ms)
{
    const struct tm_sim_type *t = tm_sim_type_find(p, type);

    tm_sim_spot_for_pool(p, pool, ret_hazard_per_hour, ret_notice_ms);
    for (size_t z = 0; t && zone && z < p->nzones && z < TM_SIM_ZONES_MAX; z++) {
        const struct tm_sim_cell_spot *c = &p->cells[t - p->types][z];
        if (strcmp(p->zones[z], zone) == 0) {
            if (c->set)
                *ret_hazard_per_hour = c->hazard_per_hour;
            return;
        }
    }
}

/* Whether a spot launch of token at now finds no capacity in pool: a
 * uniform draw from (seed, token, now), salted so that it is independent
 * of the lifetime draw of the same token. */
static bool spot_launch_fails(const struct tm_simcloud_params *p, const char *pool,
                              const char *token, int64_t now_ms)
{
    double failure = 0, u;
    uint64_t x;

    for (size_t i = 0; pool && pool[0] && i < p->npools && i < TM_SIM_POOLS_MAX; i++)
        if (strcmp(p->pools[i].pool, pool) == 0) {
            failure = p->pools[i].launch_failure;
            break;
        }
    if (!(failure > 0))
        return false;
    x = mix64(p->seed ^ mix64(hash_str(token) ^ 0x5370a7ca9ac17e5dull) ^ mix64((uint64_t)now_ms));
    u = (double)(x >> 11) * 0x1.0p-53; /* [0, 1) */
    return u < failure;
}

/* Lifetime of a spot instance launched with token: exponential with rate
 * hazard per hour, from a draw that depends on (seed, token) only. */
static int64_t spot_lifetime_ms(const struct tm_simcloud_params *p, double hazard_per_hour,
                                const char *token)
{
    uint64_t x = mix64(p->seed ^ mix64(hash_str(token)));
    /* 53 random bits into (0, 1]: never 0, so log() stays finite. */
    double u = (double)((x >> 11) + 1) * 0x1.0p-53;
    double ms;

    if (!(hazard_per_hour > 0))
        return TM_SIM_NEVER;
    ms = -log(u) / hazard_per_hour * MS_PER_HOUR;
    if (ms >= 9.0e18)
        return TM_SIM_NEVER;
    return (int64_t)llround(ms);
}

int tm_sim_instance_plan(const struct tm_simcloud_params *p, const struct tm_launch_request *req,
                         int64_t now_ms, struct tm_sim_instance *ret)
{
    struct tm_sim_instance row;
    const struct tm_sim_type *type;
    const char *zone = req->zone;

    if (!req->token || !req->token[0] || !tm_id_fits(req->token) || !req->cluster ||
        !tm_id_fits(req->cluster) || !req->instance_type || !tm_id_fits(req->instance_type))
        return TM_EINVAL;
    if ((req->pool && !tm_id_fits(req->pool)) || (zone && !tm_id_fits(zone)))
        return TM_EINVAL;
    if (req->capacity != TM_CAPACITY_SPOT && req->capacity != TM_CAPACITY_ON_DEMAND)
        return TM_EINVAL;
    type = tm_sim_type_find(p, req->instance_type);
    if (!type)
        return TM_ENOTFOUND;
    if (!zone || !zone[0]) {
        /* Spread launches over zones, the same way for the same token. */
        if (p->nzones == 0)
            zone = "sim-a";
        else
            zone = p->zones[hash_str(req->token) % p->nzones];
    } else if (!zone_known(p, zone)) {
        return TM_ENOTFOUND;
    }
    if (req->capacity == TM_CAPACITY_SPOT && type->spot_uusd_per_hour <= 0)
        return TM_EQUOTA;
    if (req->capacity == TM_CAPACITY_SPOT && spot_launch_fails(p, req->pool, req->token, now_ms))
        return TM_EQUOTA;

    memset(&row, 0, sizeof(row));
    snprintf(row.id, sizeof(row.id), "sim-%016" PRIx64, hash_str(req->token));
    copy_id(row.token, req->token);
    copy_id(row.cluster, req->cluster);
    copy_id(row.pool, req->pool);
    row.node_id = req->node_id;
    copy_id(row.instance_type, req->instance_type);
    copy_id(row.zone, zone);
    row.capacity = req->capacity;
    row.launched_ms = now_ms;
    row.ready_ms = add_sat(now_ms, p->boot_delay_ms > 0 ? p->boot_delay_ms : 0);
    row.terminate_requested_ms = TM_SIM_NEVER;
    row.interrupt_ms = TM_SIM_NEVER;
    row.notice_ms = TM_SIM_NEVER;
    if (req->capacity == TM_CAPACITY_SPOT) {
        double hazard;
        int64_t notice;

        tm_sim_spot_for_launch(p, req->pool, req->instance_type, zone, &hazard, &notice);
        row.interrupt_ms = add_sat(now_ms, spot_lifetime_ms(p, hazard, req->token));
        if (row.interrupt_ms != TM_SIM_NEVER) {
            if (notice < 0)
                notice = 0;

            /* A notice cannot come before the instance exists. */
            row.notice_ms = row.interrupt_ms - notice < now_ms ? now_ms : row.interrupt_ms - notice;
        }
    }
    *ret = row;
    return 0;
}

const struct tm_sim_reservation *tm_sim_reservation_find(const struct tm_simcloud_params *p,
                                                         const char *id)
{
    for (size_t i = 0; id && i < p->nreservations; i++)
        if (strcmp(p->reservations[i].id, id) == 0)
            return &p->reservations[i];
    return NULL;
}

int tm_sim_reservation_plan(const struct tm_simcloud_params *p, const struct tm_launch_request *req,
                            const char *id, int64_t now_ms, struct tm_sim_instance *ret)
{
    const struct tm_sim_reservation *r = tm_sim_reservation_find(p, id);
    struct tm_launch_request q;
    int64_t last;
    int rc;

    if (!r)
        return TM_ENOTFOUND;
    if (!req->instance_type || strcmp(req->instance_type, r->instance_type) != 0 ||
        (req->zone && req->zone[0] && strcmp(req->zone, r->zone) != 0))
        return TM_EINVAL;
    last = r->block ? r->end_ms - TM_SIM_BLOCK_END_MS : r->end_ms;
    if (now_ms < r->start_ms || now_ms >= last)
        return TM_EQUOTA;
    q = *req;
    q.zone = r->zone;
    q.capacity = TM_CAPACITY_ON_DEMAND;
    rc = tm_sim_instance_plan(p, &q, now_ms, ret);
    if (rc < 0)
        return rc;
    copy_id(ret->reservation, r->id);
    if (r->block) {
        /* The block's end takes its instances back, as a reclaim would. */
        double hazard;
        int64_t notice;

        tm_sim_spot_for_pool(p, req->pool, &hazard, &notice);
        ret->interrupt_ms = last;
        ret->notice_ms = last - notice < now_ms ? now_ms : last - notice;
    }
    return 0;
}

int64_t tm_sim_instance_end_ms(const struct tm_simcloud_params *p, const struct tm_sim_instance *row)
{
    int64_t shutdown = p->shutdown_ms > 0 ? p->shutdown_ms : 0;

    return min64(add_sat(row->terminate_requested_ms, shutdown), row->interrupt_ms);
}

/* Interrupted: the cloud took it back before anyone asked to terminate it. */
static bool interrupted_by(const struct tm_sim_instance *row, int64_t now_ms)
{
    return row->interrupt_ms <= now_ms && row->interrupt_ms < row->terminate_requested_ms;
}

bool tm_sim_instance_alive(const struct tm_simcloud_params *p, const struct tm_sim_instance *row,
                           int64_t now_ms)
{
    return now_ms < tm_sim_instance_end_ms(p, row);
}

static int64_t gone_ms(const struct tm_simcloud_params *p, const struct tm_sim_instance *row)
{
    return add_sat(tm_sim_instance_end_ms(p, row), p->retention_ms > 0 ? p->retention_ms : 0);
}

/* The instance at now, gone or not. */
static void fill_view(const struct tm_simcloud_params *p, const struct tm_sim_instance *row,
                      int64_t now_ms, struct tm_instance *ret)
{
    struct tm_instance v;
    int64_t end = tm_sim_instance_end_ms(p, row);

    memset(&v, 0, sizeof(v));
    copy_id(v.id, row->id);
    copy_id(v.token, row->token);
    copy_id(v.pool, row->pool);
    copy_id(v.instance_type, row->instance_type);
    copy_id(v.zone, row->zone);
    v.node_id = row->node_id;
    v.capacity = row->capacity;
    v.launched_ms = row->launched_ms;
    if (now_ms >= end)
        v.state = TM_INSTANCE_TERMINATED;
    else if (now_ms >= row->terminate_requested_ms)
        v.state = TM_INSTANCE_STOPPING;
    else if (now_ms >= row->ready_ms)
        v.state = TM_INSTANCE_RUNNING;
    else
        v.state = TM_INSTANCE_PENDING;
    v.interrupted = interrupted_by(row, now_ms);
    /* The notice shows only while the interruption is still the instance's
     * fate, i.e. it was not terminated by request first. */
    if (row->notice_ms <= now_ms && row->interrupt_ms < row->terminate_requested_ms)
        v.notice_ms = row->notice_ms;
    *ret = v;
}

bool tm_sim_instance_view(const struct tm_simcloud_params *p, const struct tm_sim_instance *row,
                          int64_t now_ms, struct tm_instance *ret)
{
    fill_view(p, row, now_ms, ret);
    return now_ms < gone_ms(p, row);
}

int64_t tm_sim_instance_next_event_ms(const struct tm_simcloud_params *p,
                                      const struct tm_sim_instance *row, int64_t now_ms)
{
    int64_t end = tm_sim_instance_end_ms(p, row);
    int64_t cand[3] = {row->ready_ms, row->notice_ms, end};
    int64_t best = TM_SIM_NEVER;

    for (size_t i = 0; i < 3; i++) {
        /* Nothing happens to an instance after it ended. */
        if (cand[i] > now_ms && cand[i] <= end && cand[i] < best)
            best = cand[i];
    }
    return best;
}

/* ---- rows as text ---- */

static void put_i64(char buf[TM_ID_MAX], const char **field, int64_t v)
{
    if (v == TM_SIM_NEVER) {
        buf[0] = '\0';
        *field = NULL;
        return;
    }
    snprintf(buf, TM_ID_MAX, "%" PRId64, v);
    *field = buf;
}

void tm_sim_instance_to_row(const struct tm_sim_instance *row, struct tm_sim_row_text *ret)
{
    const char *strs[] = {row->id, row->token, row->cluster, row->pool};
    size_t i;

    for (i = 0; i < 4; i++) {
        copy_id(ret->buf[i], strs[i]);
        ret->fields[i] = ret->buf[i];
    }
    snprintf(ret->buf[4], TM_ID_MAX, "%" PRId64, row->node_id);
    ret->fields[4] = ret->buf[4];
    copy_id(ret->buf[5], row->instance_type);
    ret->fields[5] = ret->buf[5];
    copy_id(ret->buf[6], row->zone);
    ret->fields[6] = ret->buf[6];
    copy_id(ret->buf[7], tm_capacity_type_name(row->capacity));
    ret->fields[7] = ret->buf[7];
    put_i64(ret->buf[8], &ret->fields[8], row->launched_ms);
    put_i64(ret->buf[9], &ret->fields[9], row->ready_ms);
    put_i64(ret->buf[10], &ret->fields[10], row->terminate_requested_ms);
    put_i64(ret->buf[11], &ret->fields[11], row->interrupt_ms);
    put_i64(ret->buf[12], &ret->fields[12], row->notice_ms);
    copy_id(ret->buf[13], row->reservation);
    ret->fields[13] = row->reservation[0] ? ret->buf[13] : NULL;
}

static int get_str(char dst[TM_ID_MAX], const char *field)
{
    if (!tm_id_fits(field))
        return TM_EBADREPLY;
    copy_id(dst, field);
    return 0;
}

/* Decimal int64; NULL means TM_SIM_NEVER when nullable. */
static int get_i64(int64_t *dst, const char *field, bool nullable)
{
    char *end;
    long long v;

    if (!field) {
        if (!nullable)
            return TM_EBADREPLY;
        *dst = TM_SIM_NEVER;
        return 0;
    }
    if (!field[0])
        return TM_EBADREPLY;
    errno = 0;
    v = strtoll(field, &end, 10);
    if (errno || *end)
        return TM_EBADREPLY;
    *dst = v;
    return 0;
}

int tm_sim_instance_from_row(const char *const fields[TM_SIM_ROW_NFIELDS],
                             struct tm_sim_instance *ret)
{
    struct tm_sim_instance row;
    int cap;
    int r = 0;

    memset(&row, 0, sizeof(row));
    r |= get_str(row.id, fields[0]);
    r |= get_str(row.token, fields[1]);
    r |= get_str(row.cluster, fields[2]);
    r |= get_str(row.pool, fields[3]);
    r |= get_i64(&row.node_id, fields[4], false);
    r |= get_str(row.instance_type, fields[5]);
    r |= get_str(row.zone, fields[6]);
    r |= get_i64(&row.launched_ms, fields[8], false);
    r |= get_i64(&row.ready_ms, fields[9], false);
    r |= get_i64(&row.terminate_requested_ms, fields[10], true);
    r |= get_i64(&row.interrupt_ms, fields[11], true);
    r |= get_i64(&row.notice_ms, fields[12], true);
    if (fields[13])
        r |= get_str(row.reservation, fields[13]);
    if (r)
        return TM_EBADREPLY;
    cap = fields[7] ? tm_capacity_type_parse(fields[7]) : -1;
    if (cap != TM_CAPACITY_SPOT && cap != TM_CAPACITY_ON_DEMAND)
        return TM_EBADREPLY;
    row.capacity = (enum tm_capacity_type)cap;
    *ret = row;
    return 0;
}

/* ---- the in-memory store ---- */

int tm_simcloud_create(const struct tm_simcloud_params *params, struct tm_simcloud **ret_sc)
{
    struct tm_simcloud *sc;

    if (params->ntypes > TM_SIM_TYPES_MAX || params->nzones > TM_SIM_ZONES_MAX ||
        params->npools > TM_SIM_POOLS_MAX || params->nreservations > TM_SIM_RESERVATIONS_MAX)
        return TM_EINVAL;
    for (size_t i = 0; i < params->ntypes; i++) {
        if (!params->types[i].name[0])
            return TM_EINVAL;
        for (size_t j = 0; j < i; j++)
            if (strcmp(params->types[i].name, params->types[j].name) == 0)
                return TM_EINVAL;
    }
    sc = calloc(1, sizeof(*sc));
    if (!sc)
        return TM_ENOMEM;
    sc->params = *params;
    *ret_sc = sc;
    return 0;
}

struct tm_simcloud *tm_simcloud_free(struct tm_simcloud *sc)
{
    if (!sc)
        return NULL;
    free(sc->rows);
    free(sc->active);
    free(sc->slots);
    free(sc->id_slots);
    free(sc);
    return NULL;
}

const struct tm_simcloud_params *tm_simcloud_params(const struct tm_simcloud *sc)
{
    return &sc->params;
}

/* The slot for token: the one holding it, or the empty one where it would
 * go.  nslots > 0. */
static size_t *slot_for(const struct tm_simcloud *sc, const char *token)
{
    size_t mask = sc->nslots - 1;
    size_t i = (size_t)hash_str(token) & mask;

    while (sc->slots[i] && strcmp(sc->rows[sc->slots[i] - 1].token, token) != 0)
        i = (i + 1) & mask;
    return &sc->slots[i];
}

/* The same for instance ids: the elastic replay looks every node up by id
 * at every tick, and a scan of every row ever launched made that replay
 * quadratic in its length. */
static size_t *id_slot_for(const struct tm_simcloud *sc, const char *id)
{
    size_t mask = sc->nslots - 1;
    size_t i = (size_t)hash_str(id) & mask;

    while (sc->id_slots[i] && strcmp(sc->rows[sc->id_slots[i] - 1].id, id) != 0)
        i = (i + 1) & mask;
    return &sc->id_slots[i];
}

/* Index row i under its token and id; the first row keeps an id two rows
 * share, as the scan this replaced found it. */
static void index_row(struct tm_simcloud *sc, size_t i)
{
    size_t *id = id_slot_for(sc, sc->rows[i].id);

    *slot_for(sc, sc->rows[i].token) = i + 1;
    if (!*id)
        *id = i + 1;
}

static int index_grow(struct tm_simcloud *sc)
{
    size_t n = sc->nslots ? sc->nslots * 2 : 64;
    size_t *slots = calloc(n, sizeof(*slots));
    size_t *id_slots = calloc(n, sizeof(*id_slots));

    if (!slots || !id_slots) {
        free(slots);
        free(id_slots);
        return TM_ENOMEM;
    }
    free(sc->slots);
    free(sc->id_slots);
    sc->slots = slots;
    sc->id_slots = id_slots;
    sc->nslots = n;
    for (size_t i = 0; i < sc->nrows; i++)
        index_row(sc, i);
    return 0;
}

static void *grow(void *p, size_t *cap, size_t size)
{
    size_t n = *cap ? *cap * 2 : 16;
    void *q;

    if (n > SIZE_MAX / size)
        return NULL;
    q = realloc(p, n * size);
    if (q)
        *cap = n;
    return q;
}

const struct tm_sim_instance *tm_simcloud_find_token(const struct tm_simcloud *sc, const char *token)
{
    size_t slot;

    if (!sc->nslots || !token)
        return NULL;
    slot = *slot_for(sc, token);
    return slot ? &sc->rows[slot - 1] : NULL;
}

const struct tm_sim_instance *tm_simcloud_find(const struct tm_simcloud *sc, const char *id)
{
    size_t slot;

    if (!sc->nslots || !id)
        return NULL;
    slot = *id_slot_for(sc, id);
    return slot ? &sc->rows[slot - 1] : NULL;
}

/* Drop rows gone from listings at now from the active list. */
static void compact(struct tm_simcloud *sc, int64_t now_ms)
{
    size_t k = 0;

    for (size_t i = 0; i < sc->nactive; i++) {
        const struct tm_sim_instance *row = &sc->rows[sc->active[i]];

        if (now_ms < gone_ms(&sc->params, row))
            sc->active[k++] = sc->active[i];
    }
    sc->nactive = k;
}

unsigned tm_simcloud_count_alive(struct tm_simcloud *sc, const char *instance_type, int64_t now_ms)
{
    unsigned n = 0;

    compact(sc, now_ms);
    for (size_t i = 0; i < sc->nactive; i++) {
        const struct tm_sim_instance *row = &sc->rows[sc->active[i]];

        /* A reservation's instances run on capacity held for it. */
        if (strcmp(row->instance_type, instance_type) == 0 && !row->reservation[0] &&
            tm_sim_instance_alive(&sc->params, row, now_ms))
            n++;
    }
    return n;
}

/* The instances of reservation id alive at now. */
static unsigned count_reserved(struct tm_simcloud *sc, const char *id, int64_t now_ms)
{
    unsigned n = 0;

    compact(sc, now_ms);
    for (size_t i = 0; i < sc->nactive; i++) {
        const struct tm_sim_instance *row = &sc->rows[sc->active[i]];

        if (strcmp(row->reservation, id) == 0 && tm_sim_instance_alive(&sc->params, row, now_ms))
            n++;
    }
    return n;
}

/* A launch into reservation id, or the open market when id is NULL. */
static int launch(struct tm_simcloud *sc, const struct tm_launch_request *req, const char *id,
                  int64_t now_ms, struct tm_instance *ret)
{
    const struct tm_sim_instance *old;
    const struct tm_sim_type *type;
    struct tm_sim_instance row;
    int r;

    /* A token seen before wins over everything else, capacity included:
     * a retried launch must find its instance, not a quota error. */
    old = req->token ? tm_simcloud_find_token(sc, req->token) : NULL;
    if (old) {
        /* Even when gone from listings it is the same (terminated) one. */
        if (ret)
            fill_view(&sc->params, old, now_ms, ret);
        return 0;
    }
    if (id) {
        r = tm_sim_reservation_plan(&sc->params, req, id, now_ms, &row);
        if (r < 0)
            return r;
        if (count_reserved(sc, id, now_ms) >= tm_sim_reservation_find(&sc->params, id)->count)
            return TM_EQUOTA;
    } else {
        r = tm_sim_instance_plan(&sc->params, req, now_ms, &row);
        if (r < 0)
            return r;
        type = tm_sim_type_find(&sc->params, row.instance_type);
        if (type->capacity && tm_simcloud_count_alive(sc, type->name, now_ms) >= type->capacity)
            return TM_EQUOTA;
    }

    if (sc->nrows == sc->rows_cap) {
        struct tm_sim_instance *rows = grow(sc->rows, &sc->rows_cap, sizeof(*rows));

        if (!rows)
            return TM_ENOMEM;
        sc->rows = rows;
    }
    if (sc->nactive == sc->active_cap) {
        size_t *active = grow(sc->active, &sc->active_cap, sizeof(*active));

        if (!active)
            return TM_ENOMEM;
        sc->active = active;
    }
    if ((sc->nrows + 1) * 2 > sc->nslots) {
        r = index_grow(sc);
        if (r < 0)
            return r;
    }
    sc->rows[sc->nrows] = row;
    index_row(sc, sc->nrows);
    sc->active[sc->nactive++] = sc->nrows;
    sc->nrows++;
    if (ret)
        tm_sim_instance_view(&sc->params, &row, now_ms, ret);
    return 0;
}

int tm_simcloud_launch(struct tm_simcloud *sc, const struct tm_launch_request *req,
                       int64_t now_ms, struct tm_instance *ret)
{
    return launch(sc, req, NULL, now_ms, ret);
}

int tm_simcloud_launch_reserved(struct tm_simcloud *sc, const struct tm_launch_request *req,
                                const char *id, int64_t now_ms, struct tm_instance *ret)
{
    return id ? launch(sc, req, id, now_ms, ret) : TM_EINVAL;
}

int tm_simcloud_terminate(struct tm_simcloud *sc, const char *id, int64_t now_ms)
{
    if (!id)
        return TM_EINVAL;
    compact(sc, now_ms);
    for (size_t i = 0; i < sc->nactive; i++) {
        struct tm_sim_instance *row = &sc->rows[sc->active[i]];

        if (strcmp(row->id, id) != 0)
            continue;
        /* Keep the first request: a repeat must not delay the shutdown. */
        if (row->terminate_requested_ms == TM_SIM_NEVER)
            row->terminate_requested_ms = now_ms;
        return 0;
    }
    return TM_ENOTFOUND;
}

int tm_simcloud_list(struct tm_simcloud *sc, const char *cluster, int64_t now_ms,
                     struct tm_instance **ret_list, size_t *ret_n)
{
    struct tm_instance *list = NULL;
    size_t n = 0;

    if (!cluster)
        return TM_EINVAL;
    compact(sc, now_ms);
    if (sc->nactive) {
        list = malloc(sc->nactive * sizeof(*list));
        if (!list)
            return TM_ENOMEM;
    }
    for (size_t i = 0; i < sc->nactive; i++) {
        const struct tm_sim_instance *row = &sc->rows[sc->active[i]];

        if (strcmp(row->cluster, cluster) == 0 &&
            tm_sim_instance_view(&sc->params, row, now_ms, &list[n]))
            n++;
    }
    if (n == 0) {
        free(list);
        list = NULL;
    }
    *ret_list = list;
    *ret_n = n;
    return 0;
}

int tm_simcloud_price(const struct tm_simcloud_params *p, const char *instance_type,
                      const char *zone, enum tm_capacity_type capacity, int64_t *ret_uusd_per_hour)
{
    const struct tm_sim_type *type = tm_sim_type_find(p, instance_type);

    if (!type)
        return TM_ENOTFOUND;
    if (zone && zone[0] && !zone_known(p, zone))
        return TM_ENOTFOUND;
    switch (capacity) {
    case TM_CAPACITY_ON_DEMAND:
        *ret_uusd_per_hour = type->on_demand_uusd_per_hour;
        return 0;
    case TM_CAPACITY_SPOT:
        if (type->spot_uusd_per_hour <= 0)
            return TM_ENOTFOUND;
        *ret_uusd_per_hour = type->spot_uusd_per_hour;
        return 0;
    default:
        return TM_ENOTFOUND;
    }
}

int64_t tm_simcloud_next_event_ms(struct tm_simcloud *sc, int64_t now_ms)
{
    int64_t best = TM_SIM_NEVER;

    compact(sc, now_ms);
    for (size_t i = 0; i < sc->nactive; i++)
        best = min64(best, tm_sim_instance_next_event_ms(&sc->params, &sc->rows[sc->active[i]], now_ms));
    return best;
}
