/*
 * controller/fleet/prices.h: the price table the fleet planner and the elastic
 * replay read: instance types (GPUs, CPU, memory, on-demand and spot
 * prices), zones, and finance's budgets.
 *
 * Money is integer micro-dollars (uusd) throughout; budgets are in cents as
 * finance writes them.  The file is YAML:
 *
 *   currency: USD                 # the only currency accepted
 *   zones: [a, b]                 # optional; one zone "sim-a" when absent
 *   types:
 *     - name: g8                  # required, unique
 *       gpus: 8                   # 1..16
 *       gpu_model: G              # optional
 *       cpu_milli: 96000          # optional; default 12000 per GPU
 *       memory_mib: 786432        # optional; default 98304 per GPU
 *       on_demand_per_hour: 32.00 # dollars per instance-hour, >= 0, required
 *       spot_per_hour: 11.20      # optional; absent or 0: no spot offered
 *       capacity: 0               # optional; instances at once, 0 unlimited
 *   budgets:
 *     - scope: org | team
 *       name: ml                  # required
 *       cap_cents: 100000         # per calendar month
 *       currency: USD             # optional; anything else is refused
 *       hard: true                # hard: refuse; soft: warn
 *       warn_at: 0.8              # warning threshold, fraction of the cap
 *
 * Errors name the file, the line and the reason: "FILE:LINE: reason".
 * Unknown keys are errors.  Prices are parsed as decimals exactly, never
 * through floating point, by tm_price_parse() (core/units.h: 1 to 7
 * digits of dollars, optionally a point and 1 to 6 more, no sign), the
 * grammar the configuration's prices have.
 */
#ifndef TM_PRICES_H
#define TM_PRICES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define TM_PRICES_TYPES_MAX 32
#define TM_PRICES_ZONES_MAX 16
#define TM_PRICES_BUDGETS_MAX 32
#define TM_PRICES_NAME_MAX 64

struct tm_price_type {
    char name[TM_PRICES_NAME_MAX];
    char gpu_model[TM_PRICES_NAME_MAX];
    int32_t gpus;
    int64_t cpu_milli;
    int64_t memory_mib;
    int64_t on_demand_uusd_per_hour;
    int64_t spot_uusd_per_hour;   /* 0: no spot */
    unsigned capacity;            /* 0: unlimited */
    /* The cloud (config provider name) that sells the type, when one
     * table holds several clouds' types (a pool group); "" otherwise.
     * Not read from the YAML: the live tick fills it. */
    char provider[TM_PRICES_NAME_MAX];
};

enum tm_budget_scope {
    TM_BUDGET_ORG,
    TM_BUDGET_TEAM,
    TM_BUDGET_SCOPE_MAX,
};

struct tm_budget {
    enum tm_budget_scope scope;
    char name[TM_PRICES_NAME_MAX];
    int64_t cap_cents;            /* per calendar month */
    bool hard;
    double warn_at;               /* fraction of the cap, 0 < warn_at <= 1 */
};

struct tm_price_table {
    struct tm_price_type types[TM_PRICES_TYPES_MAX];
    size_t ntypes;
    char zones[TM_PRICES_ZONES_MAX][TM_PRICES_NAME_MAX];
    size_t nzones;
    struct tm_budget budgets[TM_PRICES_BUDGETS_MAX];
    size_t nbudgets;
};

/* Load a price table from path.  0; TM_EINVAL with err filled
 * ("FILE:LINE: reason"); -errno when the file cannot be read. */
int tm_prices_load(const char *path, struct tm_price_table *ret, char *err, size_t errlen);

/* The same from a buffer; name is used in messages. */
int tm_prices_parse(const char *name, const char *text, size_t len, struct tm_price_table *ret,
                    char *err, size_t errlen);

/* Index of a type by name, or -1. */
int tm_prices_find(const struct tm_price_table *t, const char *name);

/* Price per GPU-hour of a type, in micro-dollars (rounded down); spot
 * returns 0 when the type offers none. */
int64_t tm_price_type_per_gpu(const struct tm_price_type *ty, bool spot);

#endif
