/*
 * core/config_table.c: the table engine of the configuration loader:
 * messages that name the file, line and key path, the scalar parsers, and
 * the walk that parses a mapping by its table, applies defaults and
 * releases memory.
 */
#include "core/config_internal.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/err.h"

/*
 * Allocation failures are injected by tests that #include the loader's
 * files with TM_CONFIG_FAULT_INJECTION defined (SQLite's countdown
 * allocator): the allocation numbered cfg_fault_countdown fails.  libyaml's
 * own allocations are not covered.
 */
#ifdef TM_CONFIG_FAULT_INJECTION
static long cfg_fault_countdown = -1;

static bool cfg_fault(void)
{
    if (cfg_fault_countdown < 0)
        return false;
    return cfg_fault_countdown-- == 0;
}
#else
static bool cfg_fault(void)
{
    return false;
}
#endif

void *tm_cfg_calloc(size_t n, size_t size)
{
    if (cfg_fault())
        return NULL;
    return calloc(n, size);
}

char *tm_cfg_strdup(const char *s)
{
    if (cfg_fault())
        return NULL;
    return strdup(s);
}

char *tm_cfg_strndup(const char *s, size_t n)
{
    if (cfg_fault())
        return NULL;
    return strndup(s, n);
}

/* ---- messages ---------------------------------------------------------- */

static size_t cfg_node_line(const yaml_node_t *node)
{
    return node ? node->start_mark.line + 1 : 1;
}

/* Write "FILE:LINE: key \"PATH\": REASON" (or without the key part at the
 * top level) and return TM_EINVAL, so callers can `return tm_cfg_fail(...)`. */
static int cfg_failv(struct cfg_ctx *c, const yaml_node_t *at, const char *fmt, va_list ap)
{
    int n;

    if (!c->err || c->errsize == 0)
        return TM_EINVAL;
    if (c->pathlen > 0)
        n = snprintf(c->err, c->errsize, "%s:%zu: key \"%s\": ", c->name, cfg_node_line(at),
                     c->path);
    else
        n = snprintf(c->err, c->errsize, "%s:%zu: ", c->name, cfg_node_line(at));
    if (n >= 0 && (size_t)n < c->errsize)
        vsnprintf(c->err + n, c->errsize - (size_t)n, fmt, ap);
    return TM_EINVAL;
}

__attribute__((format(printf, 3, 4)))
int tm_cfg_fail(struct cfg_ctx *c, const yaml_node_t *at, const char *fmt, ...)
{
    va_list ap;
    int r;

    va_start(ap, fmt);
    r = cfg_failv(c, at, fmt, ap);
    va_end(ap);
    return r;
}

/* The node the key path c->path names ("providers[0].azure.subnet_id"),
 * or the deepest one of its enclosing keys that the file has; *ret_whole
 * says whether the whole path was found. */
static const yaml_node_t *cfg_path_node(struct cfg_ctx *c, bool *ret_whole)
{
    const yaml_node_t *at = c->root;
    const char *p = c->path;

    *ret_whole = false;
    while (at && *p) {
        const yaml_node_t *next = NULL;

        if (*p == '[') {
            char *end;
            unsigned long long i = strtoull(p + 1, &end, 10);

            if (*end != ']')
                return at;
            if (at->type == YAML_SEQUENCE_NODE && i < tm_cfg_seq_len(at))
                next = tm_cfg_node(c, at->data.sequence.items.start[i]);
            p = end + 1;
        } else {
            size_t n = strcspn(p, ".[");

            for (yaml_node_pair_t *kv = at->type == YAML_MAPPING_NODE ? at->data.mapping.pairs.start
                                                                         : NULL;
                 kv && kv < at->data.mapping.pairs.top && !next; kv++) {
                const yaml_node_t *k = tm_cfg_node(c, kv->key);
                if (k->type == YAML_SCALAR_NODE && k->data.scalar.length == n &&
                    memcmp(k->data.scalar.value, p, n) == 0)
                    next = tm_cfg_node(c, kv->value);
            }
            p += n;
        }
        if (*p == '.')
            p++;
        if (!next)
            return at;
        at = next;
    }
    *ret_whole = true;
    return at;
}

int tm_cfg_fail_at(struct cfg_ctx *c, const char *fmt, ...)
{
    bool whole;
    const yaml_node_t *at = cfg_path_node(c, &whole);
    va_list ap;
    int r;

    va_start(ap, fmt);
    r = cfg_failv(c, at, fmt, ap);
    va_end(ap);
    return r;
}

int tm_cfg_nomem(struct cfg_ctx *c)
{
    if (c->err && c->errsize > 0)
        snprintf(c->err, c->errsize, "%s: out of memory", c->name);
    return TM_ENOMEM;
}

/* Key paths are built as parsing descends: "pools[1].max_nodes".  Bytes
 * from the file that could garble a terminal are shown as '?'. */
static size_t cfg_path_push_key(struct cfg_ctx *c, const char *key)
{
    size_t old = c->pathlen;
    size_t room = sizeof(c->path) - 1;

    if (c->pathlen > 0 && c->pathlen < room)
        c->path[c->pathlen++] = '.';
    for (const char *p = key; *p && c->pathlen < room; p++) {
        unsigned char ch = (unsigned char)*p;
        c->path[c->pathlen++] = (ch < 0x20 || ch == 0x7f || ch == '"') ? '?' : (char)ch;
    }
    c->path[c->pathlen] = '\0';
    return old;
}

static size_t cfg_path_push_index(struct cfg_ctx *c, size_t i)
{
    size_t old = c->pathlen;
    int n = snprintf(c->path + c->pathlen, sizeof(c->path) - c->pathlen, "[%zu]", i);

    if (n > 0)
        c->pathlen += (size_t)n;
    if (c->pathlen >= sizeof(c->path))
        c->pathlen = sizeof(c->path) - 1;
    return old;
}

static void cfg_path_pop(struct cfg_ctx *c, size_t len)
{
    c->pathlen = len;
    c->path[len] = '\0';
}

/* Set the path outright, for checks that run after parsing. */
__attribute__((format(printf, 2, 3)))
void tm_cfg_path_set(struct cfg_ctx *c, const char *fmt, ...)
{
    va_list ap;
    int n;

    va_start(ap, fmt);
    n = vsnprintf(c->path, sizeof(c->path), fmt, ap);
    va_end(ap);
    if (n < 0)
        n = 0;
    c->pathlen = (size_t)n < sizeof(c->path) ? (size_t)n : sizeof(c->path) - 1;
    c->path[c->pathlen] = '\0';
}

static const char *cfg_node_kind(const yaml_node_t *node)
{
    switch (node->type) {
    case YAML_MAPPING_NODE:
        return "a mapping";
    case YAML_SEQUENCE_NODE:
        return "a sequence";
    default:
        return "a scalar";
    }
}

static const char *cfg_type_noun(enum cfg_type t)
{
    switch (t) {
    case CFG_STR:
        return "a string";
    case CFG_INT:
    case CFG_UINT:
    case CFG_I64:
    case CFG_U64:
        return "an integer";
    case CFG_DOUBLE:
        return "a number";
    case CFG_DURATION:
        return "a duration";
    case CFG_PRICE:
        return "a price";
    case CFG_BOOL:
        return "true or false";
    case CFG_STRLIST:
    case CFG_LIST:
        return "a sequence";
    case CFG_SECTION:
        return "a mapping";
    }
    return "a value";
}

/* Milliseconds in the largest unit that divides them, for limits in
 * messages ("must be between 100ms and 10m"). */
static void cfg_format_duration(int64_t ms, char *buf, size_t size)
{
    static const struct { int64_t ms; const char *unit; } units[] = {
        {CFG_DAY, "d"}, {CFG_HOUR, "h"}, {CFG_MIN, "m"}, {CFG_SEC, "s"},
    };

    for (size_t i = 0; i < sizeof(units) / sizeof(units[0]); i++)
        if (ms != 0 && ms % units[i].ms == 0) {
            snprintf(buf, size, "%lld%s", (long long)(ms / units[i].ms), units[i].unit);
            return;
        }
    snprintf(buf, size, "%lldms", (long long)ms);
}

static void cfg_format_price(int64_t uusd, char *buf, size_t size)
{
    snprintf(buf, size, "%lld.%06lld", (long long)(uusd / CFG_UUSD), (long long)(uusd % CFG_UUSD));
}

/* ---- scalar parsers ----------------------------------------------------- */

bool tm_cfg_is_digit(char ch)
{
    return ch >= '0' && ch <= '9';
}

/* Decimal only: YAML 1.1's 0x, 0o, 1_000 and 1:30 forms are typos more often
 * than intent in this file.  Returns false on garbage or overflow. */
bool tm_cfg_parse_i64(const char *s, int64_t *ret)
{
    bool neg = false;
    uint64_t v = 0;
    uint64_t limit;

    if (*s == '-' || *s == '+')
        neg = *s++ == '-';
    if (!tm_cfg_is_digit(*s))
        return false;
    limit = neg ? (uint64_t)INT64_MAX + 1 : (uint64_t)INT64_MAX;
    for (; *s; s++) {
        if (!tm_cfg_is_digit(*s))
            return false;
        if (v > (limit - (uint64_t)(*s - '0')) / 10)
            return false;
        v = v * 10 + (uint64_t)(*s - '0');
    }
    /* -(INT64_MIN) does not fit, so negate in unsigned arithmetic. */
    *ret = neg ? (int64_t)(0 - v) : (int64_t)v;
    return true;
}

static bool cfg_parse_u64(const char *s, uint64_t *ret)
{
    uint64_t v = 0;

    if (*s == '+')
        s++;
    if (!tm_cfg_is_digit(*s))
        return false;
    for (; *s; s++) {
        if (!tm_cfg_is_digit(*s))
            return false;
        if (v > (UINT64_MAX - (uint64_t)(*s - '0')) / 10)
            return false;
        v = v * 10 + (uint64_t)(*s - '0');
    }
    *ret = v;
    return true;
}

static bool cfg_parse_double(const char *s, double *ret)
{
    char *end;
    double v;

    /* strtod also takes "inf", "nan" and hex floats; allow only what a person
     * writes for a rate or a factor. */
    for (const char *p = s; *p; p++)
        if (!tm_cfg_is_digit(*p) && !strchr("+-.eE", *p))
            return false;
    if (!*s)
        return false;
    errno = 0;
    v = strtod(s, &end);
    if (*end != '\0' || errno == ERANGE || !isfinite(v))
        return false;
    *ret = v;
    return true;
}

/* ---- table-driven parsing ------------------------------------------------ */

static char *cfg_field_ptr(void *base, const struct cfg_field *f)
{
    return (char *)base + f->offset;
}

static bool cfg_name_ok(const char *s)
{
    size_t n = strlen(s);

    if (n == 0 || n > CFG_NAME_MAX)
        return false;
    for (; *s; s++)
        if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') || tm_cfg_is_digit(*s) ||
              *s == '.' || *s == '_' || *s == '-'))
            return false;
    return true;
}

static int cfg_check_choice(struct cfg_ctx *c, const struct cfg_field *f, const char *s,
                            const yaml_node_t *at)
{
    char list[256];
    size_t used = 0;

    for (const char *const *ch = f->choices; *ch; ch++)
        if (strcmp(*ch, s) == 0)
            return 0;
    list[0] = '\0';
    for (const char *const *ch = f->choices; *ch; ch++) {
        int n = snprintf(list + used, sizeof(list) - used, "%s%s", used ? ", " : "", *ch);
        if (n < 0 || (size_t)n >= sizeof(list) - used)
            break;
        used += (size_t)n;
    }
    return tm_cfg_fail(c, at, "unrecognized value \"%.64s\", expected one of: %s", s, list);
}

static int cfg_check_string(struct cfg_ctx *c, const struct cfg_field *f, const char *s,
                            const yaml_node_t *at)
{
    if (f->choices)
        return cfg_check_choice(c, f, s, at);
    if (f->flags & CFG_NAME) {
        if (!cfg_name_ok(s))
            return tm_cfg_fail(c, at, "bad name \"%.64s\": expected 1 to %d of A-Z a-z 0-9 . _ -", s,
                               CFG_NAME_MAX);
        return 0;
    }
    if (!*s)
        return tm_cfg_fail(c, at, "must not be empty");
    if (strlen(s) > CFG_STRING_MAX)
        return tm_cfg_fail(c, at, "is longer than %d bytes", CFG_STRING_MAX);
    for (const char *p = s; *p; p++)
        if ((unsigned char)*p < 0x20 || *p == 0x7f)
            return tm_cfg_fail(c, at, "must not contain control characters");
    return 0;
}

/* Convert one scalar and store it.  Also used for defaults, with at == NULL:
 * a default that fails here is a bug in the tables, caught by every test. */
static int cfg_set_scalar(struct cfg_ctx *c, const struct cfg_field *f, void *base,
                          const char *s, const yaml_node_t *at)
{
    char *slot = cfg_field_ptr(base, f);
    char lo[32], hi[32];
    int64_t v = 0;
    int r;

    switch (f->type) {
    case CFG_STR: {
        char *copy;

        r = cfg_check_string(c, f, s, at);
        if (r < 0)
            return r;
        copy = tm_cfg_strdup(s);
        if (!copy)
            return tm_cfg_nomem(c);
        free(*(char **)slot);
        *(char **)slot = copy;
        return 0;
    }
    case CFG_INT:
    case CFG_UINT:
    case CFG_I64:
        if (!tm_cfg_parse_i64(s, &v))
            return tm_cfg_fail(c, at, "expected an integer, got \"%.64s\"", s);
        if (v < f->min || v > f->max)
            return tm_cfg_fail(c, at, "must be between %lld and %lld, got %lld", (long long)f->min,
                               (long long)f->max, (long long)v);
        if (f->type == CFG_INT)
            *(int *)slot = (int)v;
        else if (f->type == CFG_UINT)
            *(unsigned *)slot = (unsigned)v;
        else
            *(int64_t *)slot = v;
        return 0;
    case CFG_U64: {
        uint64_t u;

        if (!cfg_parse_u64(s, &u))
            return tm_cfg_fail(c, at, "expected an integer from 0 to %llu, got \"%.64s\"",
                               (unsigned long long)UINT64_MAX, s);
        *(uint64_t *)slot = u;
        return 0;
    }
    case CFG_DOUBLE: {
        double d;

        if (!cfg_parse_double(s, &d))
            return tm_cfg_fail(c, at, "expected a number, got \"%.64s\"", s);
        if (d < f->dmin || d > f->dmax)
            return tm_cfg_fail(c, at, "must be between %g and %g, got %g", f->dmin, f->dmax, d);
        *(double *)slot = d;
        return 0;
    }
    case CFG_DURATION:
        if (tm_duration_parse(s, &v) < 0)
            return tm_cfg_fail(c, at,
                               "bad duration \"%.64s\": expected seconds or a number with a unit "
                               "(ms, s, m, h, d) such as 90s or 15m",
                               s);
        if (v < f->min || v > f->max) {
            cfg_format_duration(f->min, lo, sizeof(lo));
            cfg_format_duration(f->max, hi, sizeof(hi));
            return tm_cfg_fail(c, at, "must be between %s and %s, got \"%.64s\"", lo, hi, s);
        }
        *(int64_t *)slot = v;
        return 0;
    case CFG_PRICE: {
        const char *why = tm_price_problem(s, &v);

        if (why)
            return tm_cfg_fail(c, at, "bad price \"%.64s\": %s", s, why);
        if (v < f->min || v > f->max) {
            cfg_format_price(f->min, lo, sizeof(lo));
            cfg_format_price(f->max, hi, sizeof(hi));
            return tm_cfg_fail(c, at, "must be between %s and %s", lo, hi);
        }
        *(int64_t *)slot = v;
        return 0;
    }
    case CFG_BOOL:
        /* YAML 1.2's core schema: true/false only, not yes/no/on/off. */
        if (strcmp(s, "true") == 0 || strcmp(s, "false") == 0) {
            *(bool *)slot = s[0] == 't';
            return 0;
        }
        return tm_cfg_fail(c, at, "expected true or false, got \"%.64s\"", s);
    case CFG_STRLIST:
    case CFG_SECTION:
    case CFG_LIST:
        break;
    }
    return tm_cfg_fail(c, at, "internal error: field type %d is not a scalar", (int)f->type);
}

int tm_cfg_apply_defaults(struct cfg_ctx *c, const struct cfg_section *s, void *base)
{
    for (size_t i = 0; i < s->nfields; i++) {
        const struct cfg_field *f = &s->fields[i];
        int r = 0;

        if (f->type == CFG_SECTION)
            r = tm_cfg_apply_defaults(c, f->sub, cfg_field_ptr(base, f));
        else if (f->def)
            r = cfg_set_scalar(c, f, base, f->def, NULL);
        if (r < 0)
            return r;
    }
    return 0;
}

/* The free side of the tables: whatever parsing may have stored. */
void tm_cfg_release_section(const struct cfg_section *s, void *base)
{
    for (size_t i = 0; i < s->nfields; i++) {
        const struct cfg_field *f = &s->fields[i];
        char *slot = cfg_field_ptr(base, f);

        switch (f->type) {
        case CFG_STR:
            free(*(char **)slot);
            *(char **)slot = NULL;
            break;
        case CFG_STRLIST: {
            char **list = *(char ***)slot;
            size_t *count = (size_t *)((char *)base + f->count_offset);

            for (size_t j = 0; list && j < *count; j++)
                free(list[j]);
            free(list);
            *(char ***)slot = NULL;
            *count = 0;
            break;
        }
        case CFG_SECTION:
            tm_cfg_release_section(f->sub, slot);
            break;
        case CFG_LIST: {
            char *arr = *(char **)slot;
            size_t *count = (size_t *)((char *)base + f->count_offset);

            for (size_t j = 0; arr && j < *count; j++) {
                if (f->sub->release_elem)
                    f->sub->release_elem(f->sub, arr + j * f->sub->size);
                tm_cfg_release_section(f->sub, arr + j * f->sub->size);
            }
            free(arr);
            *(char **)slot = NULL;
            *count = 0;
            break;
        }
        default:
            break;
        }
    }
}

const yaml_node_t *tm_cfg_node(struct cfg_ctx *c, int index)
{
    return yaml_document_get_node(c->doc, index);
}

/* Plain "", "~" and "null" mean "no value", as in YAML 1.1's core schema;
 * quoted, they are strings. */
static bool cfg_is_null(const yaml_node_t *n)
{
    const char *v;

    if (n->type != YAML_SCALAR_NODE || n->data.scalar.style != YAML_PLAIN_SCALAR_STYLE)
        return false;
    v = (const char *)n->data.scalar.value;
    return n->data.scalar.length == 0 || strcmp(v, "~") == 0 || strcmp(v, "null") == 0 ||
           strcmp(v, "Null") == 0 || strcmp(v, "NULL") == 0;
}

int tm_cfg_parse_mapping(struct cfg_ctx *c, const struct cfg_section *s, void *base,
                         const yaml_node_t *map);

size_t tm_cfg_seq_len(const yaml_node_t *seq)
{
    return (size_t)(seq->data.sequence.items.top - seq->data.sequence.items.start);
}

/* Entry counts of lists: null or absent is an empty list. */
static int cfg_check_count(struct cfg_ctx *c, const struct cfg_field *f, size_t n,
                           const yaml_node_t *at)
{
    if ((int64_t)n < f->min)
        return tm_cfg_fail(c, at, "must have at least %lld %s", (long long)f->min,
                           f->min == 1 ? "entry" : "entries");
    if ((int64_t)n > f->max)
        return tm_cfg_fail(c, at, "must have at most %lld entries, got %zu", (long long)f->max, n);
    return 0;
}

static int cfg_parse_strlist(struct cfg_ctx *c, const struct cfg_field *f, void *base,
                             const yaml_node_t *node)
{
    char ***slot = (char ***)cfg_field_ptr(base, f);
    size_t *count = (size_t *)((char *)base + f->count_offset);
    size_t n = 0;
    int r;

    if (!cfg_is_null(node) && node->type != YAML_SEQUENCE_NODE)
        return tm_cfg_fail(c, node, "expected a sequence, got %s", cfg_node_kind(node));
    if (node->type == YAML_SEQUENCE_NODE)
        n = tm_cfg_seq_len(node);
    r = cfg_check_count(c, f, n, node);
    if (r < 0 || n == 0)
        return r;
    *slot = tm_cfg_calloc(n, sizeof(char *));
    if (!*slot)
        return tm_cfg_nomem(c);
    for (size_t i = 0; i < n; i++) {
        const yaml_node_t *item = tm_cfg_node(c, node->data.sequence.items.start[i]);
        size_t mark = cfg_path_push_index(c, i);
        const char *v;

        if (item->type != YAML_SCALAR_NODE || cfg_is_null(item))
            return tm_cfg_fail(c, item, "expected a string, got %s",
                               cfg_is_null(item) ? "null" : cfg_node_kind(item));
        v = (const char *)item->data.scalar.value;
        if (strlen(v) != item->data.scalar.length)
            return tm_cfg_fail(c, item, "must not contain NUL bytes");
        r = cfg_check_string(c, f, v, item);
        if (r < 0)
            return r;
        for (size_t j = 0; j < i; j++)
            if (strcmp((*slot)[j], v) == 0)
                return tm_cfg_fail(c, item, "duplicate value \"%s\"", v);
        (*slot)[i] = tm_cfg_strdup(v);
        if (!(*slot)[i])
            return tm_cfg_nomem(c);
        *count = i + 1; /* so release frees exactly what was stored */
        cfg_path_pop(c, mark);
    }
    return 0;
}

static int cfg_parse_list(struct cfg_ctx *c, const struct cfg_field *f, void *base,
                          const yaml_node_t *node)
{
    char **slot = (char **)cfg_field_ptr(base, f);
    size_t *count = (size_t *)((char *)base + f->count_offset);
    size_t n = 0;
    int r;

    if (!cfg_is_null(node) && node->type != YAML_SEQUENCE_NODE)
        return tm_cfg_fail(c, node, "expected a sequence, got %s", cfg_node_kind(node));
    if (node->type == YAML_SEQUENCE_NODE)
        n = tm_cfg_seq_len(node);
    r = cfg_check_count(c, f, n, node);
    if (r < 0 || n == 0)
        return r;
    *slot = tm_cfg_calloc(n, f->sub->size);
    if (!*slot)
        return tm_cfg_nomem(c);
    /* Zeroed elements release cleanly, so the whole array counts at once. */
    *count = n;
    for (size_t i = 0; i < n; i++) {
        const yaml_node_t *item = tm_cfg_node(c, node->data.sequence.items.start[i]);
        void *elem = *slot + i * f->sub->size;
        size_t mark = cfg_path_push_index(c, i);

        if (f->sub->parse_elem) {
            r = f->sub->parse_elem(c, f->sub, elem, item);
        } else {
            r = tm_cfg_apply_defaults(c, f->sub, elem);
            if (r == 0)
                r = tm_cfg_parse_mapping(c, f->sub, elem, item);
        }
        if (r < 0)
            return r;
        cfg_path_pop(c, mark);
    }
    return 0;
}

static int cfg_check_required(struct cfg_ctx *c, const struct cfg_section *s, const bool *seen,
                              const yaml_node_t *map);

static int cfg_parse_value(struct cfg_ctx *c, const struct cfg_field *f, void *base,
                           const yaml_node_t *node)
{
    const char *v;

    switch (f->type) {
    case CFG_SECTION:
        if (cfg_is_null(node))
            return cfg_check_required(c, f->sub, NULL, node);
        return tm_cfg_parse_mapping(c, f->sub, cfg_field_ptr(base, f), node);
    case CFG_LIST:
        return cfg_parse_list(c, f, base, node);
    case CFG_STRLIST:
        return cfg_parse_strlist(c, f, base, node);
    default:
        break;
    }
    if (node->type != YAML_SCALAR_NODE)
        return tm_cfg_fail(c, node, "expected %s, got %s", cfg_type_noun(f->type),
                           cfg_node_kind(node));
    if (cfg_is_null(node)) {
        /* No value: keep the default, unless one is required. */
        if (f->flags & CFG_REQUIRED)
            return tm_cfg_fail(c, node, "must not be empty");
        return 0;
    }
    v = (const char *)node->data.scalar.value;
    if (strlen(v) != node->data.scalar.length)
        return tm_cfg_fail(c, node, "must not contain NUL bytes");
    return cfg_set_scalar(c, f, base, v, node);
}

/* Missing required keys, including those of sections left out entirely.
 * seen is NULL when the whole section is absent. */
static int cfg_check_required(struct cfg_ctx *c, const struct cfg_section *s, const bool *seen,
                              const yaml_node_t *map)
{
    for (size_t i = 0; i < s->nfields; i++) {
        const struct cfg_field *f = &s->fields[i];
        size_t mark;
        int r = 0;

        if (seen && seen[i])
            continue;
        mark = cfg_path_push_key(c, f->key);
        if (f->flags & CFG_REQUIRED)
            r = tm_cfg_fail(c, map, "missing required key");
        else if (f->type == CFG_SECTION)
            r = cfg_check_required(c, f->sub, NULL, map);
        if (r < 0)
            return r;
        cfg_path_pop(c, mark);
    }
    return 0;
}

static int cfg_unknown_key(struct cfg_ctx *c, const struct cfg_section *s, const yaml_node_t *at)
{
    char list[512];
    size_t used = 0;

    list[0] = '\0';
    for (size_t i = 0; i < s->nfields; i++) {
        int n = snprintf(list + used, sizeof(list) - used, "%s%s", used ? ", " : "",
                         s->fields[i].key);
        if (n < 0 || (size_t)n >= sizeof(list) - used)
            break;
        used += (size_t)n;
    }
    return tm_cfg_fail(c, at, "unknown key, expected one of: %s", list);
}

int tm_cfg_parse_mapping(struct cfg_ctx *c, const struct cfg_section *s, void *base,
                         const yaml_node_t *map)
{
    const struct cfg_part part = {s, base};

    return tm_cfg_parse_parts(c, &part, 1, 1, s, map);
}

/* Each key into the first part whose table has it: one mapping that
 * several tables describe (a provider's generic keys, its kind's block,
 * and the plain rows of the other kinds, read to be ignored).  The first
 * nrequired parts have their required keys checked; an unknown key is
 * said with the keys of names. */
int tm_cfg_parse_parts(struct cfg_ctx *c, const struct cfg_part *part, size_t nparts,
                       size_t nrequired, const struct cfg_section *names, const yaml_node_t *map)
{
    bool seen[CFG_PARTS_MAX][CFG_FIELDS_MAX] = {{false}};
    size_t first_line[CFG_PARTS_MAX][CFG_FIELDS_MAX] = {{0}};
    int r = 0;

    if (map->type != YAML_MAPPING_NODE)
        return tm_cfg_fail(c, map, "expected a mapping, got %s", cfg_node_kind(map));
    if (nparts > CFG_PARTS_MAX)
        nparts = CFG_PARTS_MAX;
    for (size_t w = 0; w < nparts; w++)
        if (part[w].s->nfields > CFG_FIELDS_MAX)
            return tm_cfg_fail(c, map, "internal: a table of %zu keys, more than %d", part[w].s->nfields,
                               CFG_FIELDS_MAX);
    for (yaml_node_pair_t *p = map->data.mapping.pairs.start; p < map->data.mapping.pairs.top;
         p++) {
        const yaml_node_t *key = tm_cfg_node(c, p->key);
        const yaml_node_t *value = tm_cfg_node(c, p->value);
        const char *k;
        size_t i = 0, w, mark;

        if (key->type != YAML_SCALAR_NODE)
            return tm_cfg_fail(c, key, "keys must be strings, got %s", cfg_node_kind(key));
        k = (const char *)key->data.scalar.value;
        for (w = 0; w < nparts; w++) {
            for (i = 0; i < part[w].s->nfields; i++)
                if (strcmp(part[w].s->fields[i].key, k) == 0 && strlen(k) == key->data.scalar.length)
                    break;
            if (i < part[w].s->nfields)
                break;
        }
        mark = cfg_path_push_key(c, k);
        if (w == nparts)
            return cfg_unknown_key(c, names, key);
        if (seen[w][i])
            return tm_cfg_fail(c, key, "duplicate key (first set at line %zu)", first_line[w][i]);
        seen[w][i] = true;
        first_line[w][i] = cfg_node_line(key);
        r = cfg_parse_value(c, &part[w].s->fields[i], part[w].base, value);
        if (r < 0)
            return r;
        cfg_path_pop(c, mark);
    }
    for (size_t w = 0; r == 0 && w < nrequired && w < nparts; w++)
        r = cfg_check_required(c, part[w].s, seen[w], map);
    return r;
}
