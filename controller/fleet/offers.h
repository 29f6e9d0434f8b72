/*
 * controller/fleet/offers.h: the offers behind one planner launch, ranked
 * as the planner ranks them, so that its decision can say which cloud it
 * chose and what it passed over at what price.
 *
 * One offer is one type of the planner's price table on one capacity
 * (spot or on-demand): a type of one cloud when the table joins several
 * (struct tm_price_type.provider).  Its status is CHOSEN (the launch's),
 * SHORT (every zone it is offered in is remembered short: passed over
 * however cheap), or DEARER (had capacity, cost more per GPU-hour).  Pure:
 * prices, shortages and now in, a list out.
 */
#ifndef TM_FLEET_OFFERS_H
#define TM_FLEET_OFFERS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "controller/fleet/planner.h"

enum tm_offer_status {
    TM_OFFER_CHOSEN,
    TM_OFFER_SHORT,
    TM_OFFER_DEARER,
    TM_OFFER_STATUS_MAX,
};

const char *tm_offer_status_name(enum tm_offer_status s);

struct tm_planner_offer {
    int32_t type;                  /* index into prices->types */
    bool spot;
    int64_t uusd_per_hour;
    int64_t uusd_per_gpu_hour;
    enum tm_offer_status status;
    uint32_t short_zones;          /* bit z: zone z offered and remembered short */
};

/* The offers a launch x of tm_planner_run(in) was chosen among, cheapest
 * per GPU-hour first (ties in table order): every type priced on x's
 * capacity, and for an on-demand fallback of preemptible work the spot
 * offers too.  Cells in[0..nunoffered) of the shortages are not offers.
 * Writes at most max entries to out and returns how many. */
size_t tm_planner_offers(const struct tm_planner_input *in, const struct tm_planner_action *x,
                         struct tm_planner_offer *out, size_t max);

#endif
