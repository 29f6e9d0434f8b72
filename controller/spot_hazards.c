/*
 * controller/spot_hazards.c: the hazard table loader (see spot_hazards.h;
 * libyaml document API, so every node carries its line for messages, as in
 * prices.c).
 */
#include "controller/spot_hazards.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <yaml.h>

#include "core/err.h"

#define HAZARDS_FILE_MAX (4 * 1024 * 1024)

struct hctx {
    const char *name;
    yaml_document_t *doc;
    char *err;
    size_t errlen;
};

static int fail(struct hctx *c, const yaml_node_t *n, const char *fmt, ...)
{
    char msg[256];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    if (c->err && c->errlen)
        snprintf(c->err, c->errlen, "%s:%lu: %s", c->name,
                 n ? (unsigned long)n->start_mark.line + 1 : 1UL, msg);
    return TM_EINVAL;
}

static const char *scalar(const yaml_node_t *n)
{
    return n && n->type == YAML_SCALAR_NODE ? (const char *)n->data.scalar.value : NULL;
}

static int get_double(struct hctx *c, const yaml_node_t *n, const char *key, double lo, double hi,
                      double *ret)
{
    const char *s = scalar(n);
    char *end;
    double v;

    if (!s)
        return fail(c, n, "\"%s\" must be a number", key);
    errno = 0;
    v = strtod(s, &end);
    if (errno || end == s || *end || !isfinite(v))
        return fail(c, n, "\"%s\" must be a number, not \"%s\"", key, s);
    if (v < lo || v > hi)
        return fail(c, n, "\"%s\" is %g, outside %g..%g", key, v, lo, hi);
    *ret = v;
    return 0;
}

static int get_name(struct hctx *c, const yaml_node_t *n, const char *key, char *buf, size_t len)
{
    const char *s = scalar(n);

    if (!s || !*s)
        return fail(c, n, "\"%s\" must be a non-empty string", key);
    if (strlen(s) >= len)
        return fail(c, n, "\"%s\" is too long", key);
    memcpy(buf, s, strlen(s) + 1);
    return 0;
}

static int parse_row(struct hctx *c, yaml_node_t *m, struct tm_spot_hazard *h)
{
    /* reported by spot-fit, kept in the file for the reader */
    static const char *const info[] = {"provider", "events", "up_hours", "hazard_low95",
                                       "hazard_high95", "availability_hours", "sources"};
    bool has_type = false, has_zone = false;
    double v;
    int r = 0;

    if (m->type != YAML_MAPPING_NODE)
        return fail(c, m, "each entry of \"hazards\" must be a mapping");
    memset(h, 0, sizeof(*h));
    h->nodes = 1;
    for (yaml_node_pair_t *p = m->data.mapping.pairs.start; p < m->data.mapping.pairs.top; p++) {
        yaml_node_t *k = yaml_document_get_node(c->doc, p->key);
        yaml_node_t *val = yaml_document_get_node(c->doc, p->value);
        const char *key = scalar(k);
        bool known = false;

        if (!key)
            return fail(c, k, "keys must be strings");
        if (strcmp(key, "type") == 0) {
            r = get_name(c, val, key, h->type, sizeof(h->type));
            has_type = true;
        } else if (strcmp(key, "zone") == 0) {
            r = get_name(c, val, key, h->zone, sizeof(h->zone));
            has_zone = true;
        } else if (strcmp(key, "nodes") == 0) {
            r = get_double(c, val, key, 1, 1000, &v);
            if (r == 0 && v != floor(v))
                r = fail(c, val, "\"nodes\" must be a whole number");
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
                return fail(c, k, "unrecognized key \"%s\"", key);
        }
        if (r < 0)
            return r;
    }
    if (!has_type || !has_zone)
        return fail(c, m, "an entry needs \"type\" and \"zone\"");
    if (!h->has_hazard && !h->has_availability)
        return fail(c, m, "%s %s: needs \"hazard_per_hour\" or \"availability\"", h->type, h->zone);
    return 0;
}

static int parse_root(struct hctx *c, yaml_node_t *root, struct tm_spot_hazards *t)
{
    bool seen = false;

    if (!root || root->type != YAML_MAPPING_NODE)
        return fail(c, root, "the file must be a mapping with \"hazards\"");
    for (yaml_node_pair_t *p = root->data.mapping.pairs.start; p < root->data.mapping.pairs.top; p++) {
        yaml_node_t *k = yaml_document_get_node(c->doc, p->key);
        yaml_node_t *val = yaml_document_get_node(c->doc, p->value);
        const char *key = scalar(k);

        if (!key || strcmp(key, "hazards") != 0)
            return fail(c, k, "unrecognized key \"%s\"", key ? key : "?");
        if (val->type != YAML_SEQUENCE_NODE)
            return fail(c, val, "\"hazards\" must be a list");
        seen = true;
        for (yaml_node_item_t *it = val->data.sequence.items.start; it < val->data.sequence.items.top;
             it++) {
            yaml_node_t *e = yaml_document_get_node(c->doc, *it);
            struct tm_spot_hazard *h;
            int r;
            if (t->n == TM_SPOT_HAZARDS_MAX)
                return fail(c, e, "more than %d entries", TM_SPOT_HAZARDS_MAX);
            h = &t->rows[t->n];
            r = parse_row(c, e, h);
            if (r < 0)
                return r;
            for (size_t q = 0; q < t->n; q++)
                if (strcmp(t->rows[q].type, h->type) == 0 && strcmp(t->rows[q].zone, h->zone) == 0 &&
                    t->rows[q].nodes == h->nodes)
                    return fail(c, e, "%s %s (%d nodes) is named twice", h->type, h->zone,
                                (int)h->nodes);
            t->n++;
        }
    }
    if (!seen)
        return fail(c, root, "no \"hazards\" list");
    return 0;
}

int tm_spot_hazards_parse(const char *name, const char *text, size_t len,
                          struct tm_spot_hazards *ret, char *err, size_t errlen)
{
    struct tm_spot_hazards *t = calloc(1, sizeof(*t));
    struct hctx c = {.name = name, .err = err, .errlen = errlen};
    yaml_parser_t parser;
    yaml_document_t doc;
    int r;

    if (!t)
        return TM_ENOMEM;
    if (!yaml_parser_initialize(&parser)) {
        free(t);
        return TM_ENOMEM;
    }
    yaml_parser_set_input_string(&parser, (const unsigned char *)text, len);
    if (!yaml_parser_load(&parser, &doc)) {
        if (err && errlen)
            snprintf(err, errlen, "%s:%lu: %s", name, (unsigned long)parser.problem_mark.line + 1,
                     parser.problem ? parser.problem : "malformed YAML");
        yaml_parser_delete(&parser);
        free(t);
        return TM_EINVAL;
    }
    c.doc = &doc;
    r = parse_root(&c, yaml_document_get_root_node(&doc), t);
    if (r == 0)
        *ret = *t;
    yaml_document_delete(&doc);
    yaml_parser_delete(&parser);
    free(t);
    return r;
}

int tm_spot_hazards_load(const char *path, struct tm_spot_hazards *ret, char *err, size_t errlen)
{
    FILE *f = fopen(path, "rb");
    char *buf;
    size_t n;
    int r;

    if (!f) {
        r = -errno;
        if (err && errlen)
            snprintf(err, errlen, "%s: could not open: %s", path, strerror(-r));
        return r;
    }
    buf = malloc(HAZARDS_FILE_MAX);
    if (!buf) {
        fclose(f);
        return TM_ENOMEM;
    }
    n = fread(buf, 1, HAZARDS_FILE_MAX, f);
    if (ferror(f) || n == HAZARDS_FILE_MAX) {
        fclose(f);
        free(buf);
        if (err && errlen)
            snprintf(err, errlen, "%s:1: could not read (or larger than %d bytes)", path,
                     HAZARDS_FILE_MAX);
        return TM_EINVAL;
    }
    fclose(f);
    r = tm_spot_hazards_parse(path, buf, n, ret, err, errlen);
    free(buf);
    return r;
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
