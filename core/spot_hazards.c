/*
 * core/spot_hazards.c: the hazard table loader (see spot_hazards.h;
 * the file handling and messages are core/yaml_table.c's).
 */
#include "core/spot_hazards.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/err.h"
#include "core/yaml_table.h"

static int get_double(struct tm_yaml_ctx *c, const yaml_node_t *n, const char *key, double lo,
                      double hi, double *ret)
{
    const char *s = tm_yaml_scalar(n);
    char *end;
    double v;

    if (!s)
        return tm_yaml_fail(c, n, "\"%s\" must be a number", key);
    errno = 0;
    v = strtod(s, &end);
    if (errno || end == s || *end || !isfinite(v))
        return tm_yaml_fail(c, n, "\"%s\" must be a number, not \"%s\"", key, s);
    if (v < lo || v > hi)
        return tm_yaml_fail(c, n, "\"%s\" is %g, outside %g..%g", key, v, lo, hi);
    *ret = v;
    return 0;
}

static int parse_row(struct tm_yaml_ctx *c, yaml_node_t *m, struct tm_spot_hazard *h)
{
    /* reported by spot-fit, kept in the file for the reader */
    static const char *const info[] = {"provider", "events", "up_hours", "hazard_low95",
                                       "hazard_high95", "availability_hours", "sources"};
    bool has_type = false, has_zone = false;
    double v;
    int r = 0;

    if (m->type != YAML_MAPPING_NODE)
        return tm_yaml_fail(c, m, "each entry of \"hazards\" must be a mapping");
    memset(h, 0, sizeof(*h));
    h->nodes = 1;
    for (yaml_node_pair_t *p = m->data.mapping.pairs.start; p < m->data.mapping.pairs.top; p++) {
        yaml_node_t *k = yaml_document_get_node(c->doc, p->key);
        yaml_node_t *val = yaml_document_get_node(c->doc, p->value);
        const char *key = tm_yaml_scalar(k);
        bool known = false;

        if (!key)
            return tm_yaml_fail(c, k, "keys must be strings");
        if (strcmp(key, "type") == 0) {
            r = tm_yaml_get_name(c, val, key, h->type, sizeof(h->type));
            has_type = true;
        } else if (strcmp(key, "zone") == 0) {
            r = tm_yaml_get_name(c, val, key, h->zone, sizeof(h->zone));
            has_zone = true;
        } else if (strcmp(key, "nodes") == 0) {
            r = get_double(c, val, key, 1, 1000, &v);
            if (r == 0 && v != floor(v))
                r = tm_yaml_fail(c, val, "\"nodes\" must be a whole number");
            h->nodes = (int32_t)v;
        } else if (strcmp(key, "hazard_per_hour") == 0) {
            r = get_double(c, val, key, 0, 100, &h->hazard_per_hour);
            h->has_hazard = true;
        } else if (strcmp(key, "availability") == 0) {
            r = get_double(c, val, key, 0, 1, &h->availability);
            h->has_availability = true;
        } else {
            for (size_t i = 0; i < sizeof(info) / sizeof(info[0]); i++)
                known = known || strcmp(key, info[i]) == 0;
            if (!known)
                return tm_yaml_fail(c, k, "unrecognized key \"%s\"", key);
        }
        if (r < 0)
            return r;
    }
    if (!has_type || !has_zone)
        return tm_yaml_fail(c, m, "an entry needs \"type\" and \"zone\"");
    if (!h->has_hazard && !h->has_availability)
        return tm_yaml_fail(c, m, "%s %s: needs \"hazard_per_hour\" or \"availability\"", h->type,
                            h->zone);
    return 0;
}

/* tm_yaml_root_fn: out is a zeroed struct tm_spot_hazards. */
static int parse_root(struct tm_yaml_ctx *c, yaml_node_t *root, void *out)
{
    struct tm_spot_hazards *t = out;
    bool seen = false;

    if (!root || root->type != YAML_MAPPING_NODE)
        return tm_yaml_fail(c, root, "the file must be a mapping with \"hazards\"");
    for (yaml_node_pair_t *p = root->data.mapping.pairs.start; p < root->data.mapping.pairs.top; p++) {
        yaml_node_t *k = yaml_document_get_node(c->doc, p->key);
        yaml_node_t *val = yaml_document_get_node(c->doc, p->value);
        const char *key = tm_yaml_scalar(k);

        if (!key || strcmp(key, "hazards") != 0)
            return tm_yaml_fail(c, k, "unrecognized key \"%s\"", key ? key : "?");
        if (val->type != YAML_SEQUENCE_NODE)
            return tm_yaml_fail(c, val, "\"hazards\" must be a list");
        seen = true;
        for (yaml_node_item_t *it = val->data.sequence.items.start; it < val->data.sequence.items.top;
             it++) {
            yaml_node_t *e = yaml_document_get_node(c->doc, *it);
            struct tm_spot_hazard *h;
            int r;
            if (t->n == TM_SPOT_HAZARDS_MAX)
                return tm_yaml_fail(c, e, "more than %d entries", TM_SPOT_HAZARDS_MAX);
            h = &t->rows[t->n];
            r = parse_row(c, e, h);
            if (r < 0)
                return r;
            for (size_t q = 0; q < t->n; q++)
                if (strcmp(t->rows[q].type, h->type) == 0 && strcmp(t->rows[q].zone, h->zone) == 0 &&
                    t->rows[q].nodes == h->nodes)
                    return tm_yaml_fail(c, e, "%s %s (%d nodes) is named twice", h->type, h->zone,
                                (int)h->nodes);
            t->n++;
        }
    }
    if (!seen)
        return tm_yaml_fail(c, root, "no \"hazards\" list");
    return 0;
}

int tm_spot_hazards_parse(const char *name, const char *text, size_t len,
                          struct tm_spot_hazards *ret, char *err, size_t errlen)
{
    return tm_yaml_table_parse(name, text, len, parse_root, ret, sizeof(*ret), err, errlen);
}

int tm_spot_hazards_load(const char *path, struct tm_spot_hazards *ret, char *err, size_t errlen)
{
    return tm_yaml_table_load(path, parse_root, ret, sizeof(*ret), err, errlen);
}

const struct tm_spot_hazard *tm_spot_hazards_find(const struct tm_spot_hazards *h, const char *type,
                                                  const char *zone)
{
    for (size_t i = 0; h && i < h->n; i++)
        if (h->rows[i].nodes == 1 && strcmp(h->rows[i].type, type) == 0 &&
            strcmp(h->rows[i].zone, zone) == 0)
            return &h->rows[i];
    return NULL;
}

bool tm_spot_hazards_fitted(const struct tm_spot_hazards *h, const char *type, const char *zone,
                            double *ret_hazard_per_hour)
{
    const struct tm_spot_hazard *r = tm_spot_hazards_find(h, type, zone);

    if (!r || !r->has_hazard)
        return false;
    if (ret_hazard_per_hour)
        *ret_hazard_per_hour = r->hazard_per_hour;
    return true;
}
