/*
 * controller/fleet/prices.c: the price table loader (the file handling and
 * messages are core/yaml_table.c's: every error names the line).
 */
#include "controller/fleet/prices.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/err.h"
#include "core/units.h"
#include "core/yaml_table.h"

static int get_long(struct tm_yaml_ctx *c, const yaml_node_t *n, const char *key, long long lo,
                    long long hi, long long *ret)
{
    const char *s = tm_yaml_scalar(n);
    char *end;
    long long v;

    if (!s)
        return tm_yaml_fail(c, n, "\"%s\" must be a number", key);
    errno = 0;
    v = strtoll(s, &end, 10);
    if (errno || end == s || *end)
        return tm_yaml_fail(c, n, "\"%s\" must be an integer, not \"%s\"", key, s);
    if (v < lo || v > hi)
        return tm_yaml_fail(c, n, "\"%s\" is %lld, outside %lld..%lld", key, v, lo, hi);
    *ret = v;
    return 0;
}

static int get_price(struct tm_yaml_ctx *c, const yaml_node_t *n, const char *key, int64_t *ret)
{
    const char *s = tm_yaml_scalar(n);

    if (!s)
        return tm_yaml_fail(c, n, "\"%s\" must be a dollar amount", key);
    if (s[0] == '-')
        return tm_yaml_fail(c, n, "negative price \"%s\" for \"%s\"", s, key);
    if (tm_price_parse(s, ret) < 0)
        return tm_yaml_fail(c, n, "bad price \"%s\" for \"%s\" (dollars, up to 6 decimals)", s,
                            key);
    return 0;
}

static int check_currency(struct tm_yaml_ctx *c, const yaml_node_t *n, const char *what)
{
    const char *s = tm_yaml_scalar(n);

    if (!s || strcmp(s, "USD") != 0)
        return tm_yaml_fail(c, n, "%s currency \"%s\" is not supported (only USD)", what,
                            s ? s : "?");
    return 0;
}

static int parse_type(struct tm_yaml_ctx *c, yaml_node_t *m, struct tm_price_type *ty)
{
    bool has_name = false, has_gpus = false, has_od = false;
    long long v;
    int r;

    if (m->type != YAML_MAPPING_NODE)
        return tm_yaml_fail(c, m, "an instance type must be a mapping");
    memset(ty, 0, sizeof(*ty));
    for (yaml_node_pair_t *p = m->data.mapping.pairs.start; p < m->data.mapping.pairs.top; p++) {
        yaml_node_t *k = yaml_document_get_node(c->doc, p->key);
        yaml_node_t *val = yaml_document_get_node(c->doc, p->value);
        const char *key = tm_yaml_scalar(k);
        if (!key)
            return tm_yaml_fail(c, k, "keys must be strings");
        if (strcmp(key, "name") == 0) {
            r = tm_yaml_get_name(c, val, key, ty->name, sizeof(ty->name));
            has_name = true;
        } else if (strcmp(key, "gpu_model") == 0) {
            r = tm_yaml_get_name(c, val, key, ty->gpu_model, sizeof(ty->gpu_model));
        } else if (strcmp(key, "gpus") == 0) {
            r = get_long(c, val, key, 1, 16, &v);
            ty->gpus = (int32_t)v;
            has_gpus = true;
        } else if (strcmp(key, "cpu_milli") == 0) {
            r = get_long(c, val, key, 1, 100000000, &v);
            ty->cpu_milli = v;
        } else if (strcmp(key, "memory_mib") == 0) {
            r = get_long(c, val, key, 1, 1000000000, &v);
            ty->memory_mib = v;
        } else if (strcmp(key, "on_demand_per_hour") == 0) {
            r = get_price(c, val, key, &ty->on_demand_uusd_per_hour);
            has_od = true;
        } else if (strcmp(key, "spot_per_hour") == 0) {
            r = get_price(c, val, key, &ty->spot_uusd_per_hour);
        } else if (strcmp(key, "capacity") == 0) {
            r = get_long(c, val, key, 0, 1000000, &v);
            ty->capacity = (unsigned)v;
        } else if (strcmp(key, "currency") == 0) {
            r = check_currency(c, val, "price");
        } else {
            return tm_yaml_fail(c, k, "unrecognized key \"%s\" in an instance type", key);
        }
        if (r < 0)
            return r;
    }
    if (!has_name)
        return tm_yaml_fail(c, m, "instance type without \"name\"");
    if (!has_gpus)
        return tm_yaml_fail(c, m, "instance type \"%s\" without \"gpus\"", ty->name);
    if (!has_od)
        return tm_yaml_fail(c, m, "instance type \"%s\" without \"on_demand_per_hour\"", ty->name);
    if (!ty->cpu_milli)
        ty->cpu_milli = 12000LL * ty->gpus;
    if (!ty->memory_mib)
        ty->memory_mib = 98304LL * ty->gpus;
    return 0;
}

static int parse_budget(struct tm_yaml_ctx *c, yaml_node_t *m, struct tm_budget *b)
{
    bool has_scope = false, has_name = false, has_cap = false;
    long long v;
    int r = 0;

    if (m->type != YAML_MAPPING_NODE)
        return tm_yaml_fail(c, m, "a budget must be a mapping");
    memset(b, 0, sizeof(*b));
    b->hard = true;
    b->warn_at = 0.8;
    for (yaml_node_pair_t *p = m->data.mapping.pairs.start; p < m->data.mapping.pairs.top; p++) {
        yaml_node_t *k = yaml_document_get_node(c->doc, p->key);
        yaml_node_t *val = yaml_document_get_node(c->doc, p->value);
        const char *key = tm_yaml_scalar(k), *s = tm_yaml_scalar(val);
        if (!key)
            return tm_yaml_fail(c, k, "keys must be strings");
        if (strcmp(key, "scope") == 0) {
            if (s && strcmp(s, "org") == 0)
                b->scope = TM_BUDGET_ORG;
            else if (s && strcmp(s, "team") == 0)
                b->scope = TM_BUDGET_TEAM;
            else
                return tm_yaml_fail(c, val, "unrecognized budget scope \"%s\" (org, team)",
                                    s ? s : "?");
            has_scope = true;
        } else if (strcmp(key, "name") == 0) {
            r = tm_yaml_get_name(c, val, key, b->name, sizeof(b->name));
            has_name = true;
        } else if (strcmp(key, "cap_cents") == 0) {
            r = get_long(c, val, key, 0, LLONG_MAX / 1000000, &v);
            b->cap_cents = v;
            has_cap = true;
        } else if (strcmp(key, "currency") == 0) {
            r = check_currency(c, val, "budget");
        } else if (strcmp(key, "hard") == 0) {
            if (s && strcmp(s, "true") == 0)
                b->hard = true;
            else if (s && strcmp(s, "false") == 0)
                b->hard = false;
            else
                return tm_yaml_fail(c, val, "\"hard\" must be true or false");
        } else if (strcmp(key, "warn_at") == 0) {
            char *end;
            double d;
            if (!s)
                return tm_yaml_fail(c, val, "\"warn_at\" must be a number");
            d = strtod(s, &end);
            if (end == s || *end || !(d > 0 && d <= 1))
                return tm_yaml_fail(c, val, "\"warn_at\" must be in (0, 1], not \"%s\"", s);
            b->warn_at = d;
        } else {
            return tm_yaml_fail(c, k, "unrecognized key \"%s\" in a budget", key);
        }
        if (r < 0)
            return r;
    }
    if (!has_scope || !has_name || !has_cap)
        return tm_yaml_fail(c, m, "a budget needs \"scope\", \"name\" and \"cap_cents\"");
    return 0;
}

/* tm_yaml_root_fn: out is a zeroed struct tm_price_table. */
static int parse_root(struct tm_yaml_ctx *c, yaml_node_t *root, void *out)
{
    struct tm_price_table *t = out;
    bool has_types = false;
    int r;

    if (!root || root->type != YAML_MAPPING_NODE)
        return tm_yaml_fail(c, root, "a price table must be a mapping");
    for (yaml_node_pair_t *p = root->data.mapping.pairs.start; p < root->data.mapping.pairs.top; p++) {
        yaml_node_t *k = yaml_document_get_node(c->doc, p->key);
        yaml_node_t *val = yaml_document_get_node(c->doc, p->value);
        const char *key = tm_yaml_scalar(k);
        if (!key)
            return tm_yaml_fail(c, k, "keys must be strings");
        if (strcmp(key, "currency") == 0) {
            r = check_currency(c, val, "price table");
            if (r < 0)
                return r;
        } else if (strcmp(key, "zones") == 0 || strcmp(key, "types") == 0 ||
                   strcmp(key, "budgets") == 0) {
            if (val->type != YAML_SEQUENCE_NODE)
                return tm_yaml_fail(c, val, "\"%s\" must be a list", key);
            for (yaml_node_item_t *it = val->data.sequence.items.start;
                 it < val->data.sequence.items.top; it++) {
                yaml_node_t *e = yaml_document_get_node(c->doc, *it);
                if (key[0] == 'z') {
                    if (t->nzones >= TM_PRICES_ZONES_MAX)
                        return tm_yaml_fail(c, e, "too many zones (at most %d)",
                                            TM_PRICES_ZONES_MAX);
                    r = tm_yaml_get_name(c, e, "zone", t->zones[t->nzones], TM_PRICES_NAME_MAX);
                    if (r < 0)
                        return r;
                    t->nzones++;
                } else if (key[0] == 't') {
                    if (t->ntypes >= TM_PRICES_TYPES_MAX)
                        return tm_yaml_fail(c, e, "too many instance types (at most %d)",
                                            TM_PRICES_TYPES_MAX);
                    r = parse_type(c, e, &t->types[t->ntypes]);
                    if (r < 0)
                        return r;
                    if (tm_prices_find(t, t->types[t->ntypes].name) >= 0)
                        return tm_yaml_fail(c, e, "instance type \"%s\" repeats",
                                            t->types[t->ntypes].name);
                    t->ntypes++;
                } else {
                    if (t->nbudgets >= TM_PRICES_BUDGETS_MAX)
                        return tm_yaml_fail(c, e, "too many budgets (at most %d)",
                                            TM_PRICES_BUDGETS_MAX);
                    r = parse_budget(c, e, &t->budgets[t->nbudgets]);
                    if (r < 0)
                        return r;
                    t->nbudgets++;
                }
            }
            if (key[0] == 't')
                has_types = true;
        } else {
            return tm_yaml_fail(c, k, "unrecognized key \"%s\"", key);
        }
    }
    if (!has_types || t->ntypes == 0)
        return tm_yaml_fail(c, root, "no instance types (\"types\" is missing or empty)");
    return 0;
}

int tm_prices_parse(const char *name, const char *text, size_t len, struct tm_price_table *ret,
                    char *err, size_t errlen)
{
    return tm_yaml_table_parse(name, text, len, parse_root, ret, sizeof(*ret), err, errlen);
}

int tm_prices_load(const char *path, struct tm_price_table *ret, char *err, size_t errlen)
{
    return tm_yaml_table_load(path, parse_root, ret, sizeof(*ret), err, errlen);
}

int tm_prices_find(const struct tm_price_table *t, const char *name)
{
    for (size_t i = 0; i < t->ntypes; i++)
        if (strcmp(t->types[i].name, name) == 0)
            return (int)i;
    return -1;
}

int64_t tm_price_type_per_gpu(const struct tm_price_type *ty, bool spot)
{
    int64_t p = spot ? ty->spot_uusd_per_hour : ty->on_demand_uusd_per_hour;
    return ty->gpus > 0 ? p / ty->gpus : 0;
}
