/*
 * controller/fleet/offers.c: the offers behind a planner launch (see
 * offers.h).
 */
#include "controller/fleet/offers.h"

#include <stdlib.h>
#include <string.h>

const char *tm_offer_status_name(enum tm_offer_status s)
{
    static const char *const names[TM_OFFER_STATUS_MAX] = {"chosen", "short", "dearer"};
    return (unsigned)s < TM_OFFER_STATUS_MAX ? names[s] : "?";
}

/* Whether (type, zone, spot) is among the cells no pool offers. */
static bool unoffered(const struct tm_planner_input *in, int32_t type, int32_t zone, bool spot)
{
    for (size_t i = 0; i < in->nunoffered && i < in->nshortages; i++) {
        const struct tm_planner_shortage *s = &in->shortages[i];
        if (s->type == type && s->zone == zone && s->spot == spot)
            return true;
    }
    return false;
}

/* One offer of type t on capacity spot, or false when t has no price
 * there or no zone offers it. */
static bool offer_of(const struct tm_planner_input *in, int32_t t, bool spot,
                     struct tm_planner_offer *ret)
{
    const struct tm_price_type *ty = &in->prices->types[t];
    int64_t price = spot ? ty->spot_uusd_per_hour : ty->on_demand_uusd_per_hour;
    int nz = in->prices->nzones ? (int)in->prices->nzones : 1;
    bool any_zone = false, any_free = false;
    uint32_t shorts = 0;

    if ((spot && price <= 0) || ty->gpus <= 0)
        return false;
    for (int z = 0; z < nz; z++) {
        if (unoffered(in, t, z, spot))
            continue;
        any_zone = true;
        if (tm_planner_short(in->shortages + in->nunoffered, in->nshortages - in->nunoffered, t, z,
                             spot, in->now_ms)) {
            if (z < 32)
                shorts |= 1u << z;
        } else {
            any_free = true;
        }
    }
    if (!any_zone)
        return false;
    *ret = (struct tm_planner_offer){
        .type = t, .spot = spot, .uusd_per_hour = price, .uusd_per_gpu_hour = price / ty->gpus,
        .status = any_free ? TM_OFFER_DEARER : TM_OFFER_SHORT, .short_zones = shorts};
    return true;
}

static int cmp_offer(const void *a, const void *b)
{
    const struct tm_planner_offer *x = a, *y = b;
    if (x->uusd_per_gpu_hour != y->uusd_per_gpu_hour)
        return x->uusd_per_gpu_hour < y->uusd_per_gpu_hour ? -1 : 1;
    if (x->spot != y->spot)
        return x->spot ? -1 : 1;
    return (x->type > y->type) - (x->type < y->type);
}

size_t tm_planner_offers(const struct tm_planner_input *in, const struct tm_planner_action *x,
                         struct tm_planner_offer *out, size_t max)
{
    struct tm_planner_offer all[2 * TM_PRICES_TYPES_MAX];
    size_t n = 0;

    if (!in || !in->prices || !x || x->kind != TM_PLANNER_LAUNCH || in->nunoffered > in->nshortages)
        return 0;
    for (int pass = 0; pass < 2; pass++) {
        /* pass 0: the launch's capacity; pass 1: spot, passed over by an
         * on-demand fallback */
        bool spot = pass == 0 ? x->spot : true;
        if (pass == 1 && !(x->od_fallback && !x->spot))
            break;
        for (size_t t = 0; t < in->prices->ntypes && n < 2 * TM_PRICES_TYPES_MAX; t++)
            if (offer_of(in, (int32_t)t, spot, &all[n])) {
                if (pass == 0 && (int32_t)t == x->type)
                    all[n].status = TM_OFFER_CHOSEN;
                n++;
            }
    }
    qsort(all, n, sizeof(all[0]), cmp_offer);
    if (n > max)
        n = max;
    if (n > 0)
        memcpy(out, all, n * sizeof(all[0]));
    return n;
}
