/*
 * core/config_internal.h: what the parts of the configuration loader share;
 * no file outside core/config*.c includes it.
 *
 * The loader is five files, one per stage of its work:
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
 *                   and release; it calls config_check.c, never the reverse.
 *   config_lookup.c the lookups of config.h, which the checks use too.
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
#include "core/config_kind.h"
#include "core/units.h"

/* A configuration file is written by a person; anything larger is a mistake
 * (or an attack on the parser), and it bounds libyaml's memory use. */
#define CFG_FILE_MAX (1024u * 1024u)
#define CFG_PATH_MAX 256
/* Keys of one section (a pool has over 32): tm_cfg_parse_parts refuses a
 * table with more rather than writing past its arrays. */
#define CFG_FIELDS_MAX 64
/* A provider's tables: the generic rows, its kind's block, every other kind's. */
#define CFG_KINDS_MAX 16
#define CFG_PARTS_MAX (2 + CFG_KINDS_MAX)
#define CFG_NAME_MAX 64
#define CFG_STRING_MAX 4096


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
/* The schema's provider rows with every kind's (config.c), once. */
const struct cfg_section *tm_cfg_provider_section(void);
bool tm_cfg_is_digit(char ch);
const yaml_node_t *tm_cfg_node(struct cfg_ctx *c, int index);
bool tm_cfg_parse_i64(const char *s, int64_t *ret);
int tm_cfg_parse_mapping(struct cfg_ctx *c, const struct cfg_section *s, void *base,
                         const yaml_node_t *map);
/* One table and the memory its offsets are into. */
struct cfg_part {
    const struct cfg_section *s;
    void *base;
};
int tm_cfg_parse_parts(struct cfg_ctx *c, const struct cfg_part *part, size_t nparts,
                       size_t nrequired, const struct cfg_section *names, const yaml_node_t *map);
void tm_cfg_release_section(const struct cfg_section *s, void *base);
size_t tm_cfg_seq_len(const yaml_node_t *seq);
char *tm_cfg_strdup(const char *s);
char *tm_cfg_strndup(const char *s, size_t n);

/* ---- config_reservation.c: a pool's reservations ---- */
extern const struct cfg_section tm_cfg_reservation_section;
/* Their dates parsed, end after start, no id twice in the file, no two
 * blocks of a pool overlapping. */
int tm_cfg_check_reservations(struct cfg_ctx *c, struct tm_config *cfg);
/* ---- config_pool_group.c: pool_groups[] ---- */
extern const struct cfg_section tm_cfg_pool_group_section;
/* Each entry's burst parsed; names unique and some pool's group; a burst
 * rule only on a group that holds both owned and cloud pools.  After
 * normalisation (pools[].owned is known then). */
int tm_cfg_check_pool_groups(struct cfg_ctx *c, struct tm_config *cfg);

/* ---- config_check.c: cross-key rules and normalisation ---- */

bool tm_cfg_listen_ok(const char *s);
int tm_cfg_normalise(struct cfg_ctx *c, struct tm_config *cfg);
int tm_cfg_register_db_secret(const char *url);
int tm_cfg_validate(struct cfg_ctx *c, struct tm_config *cfg);

#endif
