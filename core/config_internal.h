/*
 * core/config_internal.h: what the parts of the configuration loader share;
 * no file outside core/config*.c includes it.
 *
 * The loader is four files, one per stage of its work:
 *   config.c        the schema: one static table per section (struct
 *                   cfg_field, in the manner of nginx's command tables):
 *                   key, type, offsetof, default written in file syntax, and
 *                   limits; config/tarmac.example.yaml documents these rows.
 *   config_table.c  the table engine: messages with file, line and key path,
 *                   scalar parsers, and the walk that parses a mapping by its
 *                   table, applies defaults and releases memory, so the three
 *                   cannot drift apart.
 *   config_check.c  the rules that span keys (unique names, references from
 *                   pools to providers and types, min <= max), the spot
 *                   hazard tables they name, and normalisation.
 *   config_load.c   libyaml's document API (which remembers where each node
 *                   started), load from a file, a buffer or the environment,
 *                   release, and the lookups of config.h.
 *
 * Order of work: parse (types, ranges, unknown and duplicate keys, per
 * table), then validate, then normalise (fill values a pool may leave to its
 * instance types).  The result is handed to the caller only when all three
 * succeed.
 */
#ifndef TM_CONFIG_INTERNAL_H
#define TM_CONFIG_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <yaml.h>

#include "core/config.h"
#include "core/units.h"

/* A configuration file is written by a person; anything larger is a mistake
 * (or an attack on the parser), and it bounds libyaml's memory use. */
#define CFG_FILE_MAX (1024u * 1024u)
#define CFG_PATH_MAX 256
#define CFG_FIELDS_MAX 32
#define CFG_NAME_MAX 64
#define CFG_STRING_MAX 4096

#define CFG_SEC (1000LL)
#define CFG_MIN (60LL * CFG_SEC)
#define CFG_HOUR (60LL * CFG_MIN)
#define CFG_DAY (24LL * CFG_HOUR)
#define CFG_UUSD 1000000LL

enum cfg_type {
    CFG_STR,      /* char * */
    CFG_INT,      /* int, [min, max] */
    CFG_UINT,     /* unsigned, [min, max] */
    CFG_I64,      /* int64_t, [min, max] */
    CFG_U64,      /* uint64_t, any value */
    CFG_DOUBLE,   /* double, [dmin, dmax] */
    CFG_DURATION, /* int64_t milliseconds, [min, max] */
    CFG_PRICE,    /* int64_t micro-dollars, [min, max] */
    CFG_BOOL,     /* bool: true or false */
    CFG_STRLIST,  /* char ** plus size_t count at count_offset, [min, max] entries */
    CFG_SECTION,  /* a nested mapping whose fields are relative to offset */
    CFG_LIST,     /* an array of sub->size structs plus size_t count, [min, max] entries */
};

enum cfg_flags {
    CFG_REQUIRED = (1u << 0), /* the key must be present and not null */
    CFG_NAME = (1u << 1),     /* [A-Za-z0-9._-]{1,64}: names, zones, models */
};

struct cfg_section;

struct cfg_field {
    const char *key;
    enum cfg_type type;
    size_t offset;
    const char *def;             /* default in file syntax; NULL = none */
    int64_t min, max;            /* integers, durations (ms), prices, list lengths */
    double dmin, dmax;           /* CFG_DOUBLE */
    unsigned flags;
    const char *const *choices;  /* CFG_STR: the allowed values, NULL-terminated */
    const struct cfg_section *sub;
    size_t count_offset;         /* CFG_LIST, CFG_STRLIST */
};

struct cfg_section {
    const struct cfg_field *fields;
    size_t nfields;
    size_t size; /* of one element, for CFG_LIST */
};

#define CFG_NFIELDS(a) (sizeof(a) / sizeof((a)[0]))
#define CFG_OFF(type, member) offsetof(struct type, member)

/* State of one load: where messages go and the key path being parsed. */
struct cfg_ctx {
    const char *name;
    yaml_document_t *doc;
    const yaml_node_t *root;
    char *err;
    size_t errsize;
    char path[CFG_PATH_MAX];
    size_t pathlen;
};

/* The root of the schema (config.c). */
extern const struct cfg_section tm_cfg_root_section;

/* ---- config_table.c: allocation (fault-injectable), messages, scalars, the walk ---- */

int tm_cfg_apply_defaults(struct cfg_ctx *c, const struct cfg_section *s, void *base);
void *tm_cfg_calloc(size_t n, size_t size);
__attribute__((format(printf, 3, 4)))
int tm_cfg_fail(struct cfg_ctx *c, const yaml_node_t *at, const char *fmt, ...);
bool tm_cfg_is_digit(char ch);
const yaml_node_t *tm_cfg_node(struct cfg_ctx *c, int index);
int tm_cfg_nomem(struct cfg_ctx *c);
bool tm_cfg_parse_i64(const char *s, int64_t *ret);
int tm_cfg_parse_mapping(struct cfg_ctx *c, const struct cfg_section *s, void *base,
                         const yaml_node_t *map);
__attribute__((format(printf, 2, 3)))
void tm_cfg_path_set(struct cfg_ctx *c, const char *fmt, ...);
void tm_cfg_release_section(const struct cfg_section *s, void *base);
size_t tm_cfg_seq_len(const yaml_node_t *seq);
char *tm_cfg_strdup(const char *s);
char *tm_cfg_strndup(const char *s, size_t n);

/* ---- config_check.c: cross-key rules and normalisation ---- */

bool tm_cfg_listen_ok(const char *s);
int tm_cfg_normalise(struct cfg_ctx *c, struct tm_config *cfg);
int tm_cfg_register_db_secret(const char *url);
int tm_cfg_validate(struct cfg_ctx *c, struct tm_config *cfg);

#endif
