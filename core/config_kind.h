/*
 * core/config_kind.h: what a cloud brings to the configuration file, from
 * its own folder (providers/KIND/KIND_config.c, docs/adding-a-cloud.md).
 *
 * The loader (config_internal.h) reads every section by a table of rows,
 * in the manner of nginx's command tables; this header is the part of it a
 * provider kind needs: the row types, and struct tm_config_kind, its row
 * of the kinds table.  The build lists every providers/KIND/KIND_config.c file
 * (core/CMakeLists.txt generates tm_config_kinds[] from them), so core
 * names no cloud and includes nothing above it: a new cloud's keys, checks
 * and boot time come with its folder.
 *
 * A kind's keys sit beside the generic ones in each providers[] entry.
 * Those of `block` fill a struct the kind's folder defines, allocated for
 * each provider of the kind at p->kind_block: core holds it without knowing
 * what is in it.  Under a provider of another kind, a block's section row
 * (CFG_SECTION, as azure's `azure:`) is refused as soon as it is read; its
 * plain rows are read (type and limits checked) and ignored, as files
 * written for one kind and moved to another have always been, unless the
 * row is flagged CFG_KIND_ONLY: then it is refused once the file was read.
 */
#ifndef TM_CONFIG_KIND_H
#define TM_CONFIG_KIND_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/config.h"

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
    /* A kind's key that another kind's provider may not carry (it would
     * be ignored there): refused with "only used by kind ...". */
    CFG_KIND_ONLY = (1u << 2),
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

struct cfg_ctx;
struct yaml_node_s;

struct cfg_section {
    const struct cfg_field *fields;
    size_t nfields;
    size_t size; /* of one element, for CFG_LIST */
    /* Optional, for a CFG_LIST's elements: parse one (defaults included)
     * in place of the walk of fields, and free what it added beyond them
     * (called before the fields are released). */
    int (*parse_elem)(struct cfg_ctx *c, const struct cfg_section *s, void *base,
                      const struct yaml_node_s *map);
    void (*release_elem)(const struct cfg_section *s, void *base);
};

#define CFG_NFIELDS(a) (sizeof(a) / sizeof((a)[0]))
#define CFG_OFF(type, member) offsetof(struct type, member)

struct tm_config_kind {
    const char *name;                 /* providers[].kind */
    /* Optional: its keys kept in a block of its own (block->size bytes at
     * p->kind_block), read beside the generic ones (see above). */
    const struct cfg_section *block;
    /* It offers only the instance types the file describes: a provider
     * must describe one at least, and a pool may name no other. */
    bool types_closed;
    /* Its machines are not bought: tarmac never launches or terminates
     * them (providers/owned).  Copied to each provider's and pool's
     * `owned` at load, which is what the controller reads. */
    bool owned;
    /* Optional: the rules of its keys, for providers[i] (i is for paths),
     * run with the providers' own checks; and those that look at the pools
     * too, run once the pools were checked.  0, or the code of
     * tm_cfg_fail_at(). */
    int (*check)(struct cfg_ctx *c, const struct tm_config *cfg, size_t i);
    int (*check_pools)(struct cfg_ctx *c, const struct tm_config *cfg, size_t i);
    /* Optional: launch to running, what the planner assumes for p's nodes
     * (without it, TM_CONFIG_BOOT_MS_DEFAULT); kept in p->boot_ms at load. */
    int64_t (*boot_ms)(const struct tm_config_provider *p);
    /* Its provider launches into a pool's `reservations:`; a pool of a
     * kind without it may name none. */
    bool reservations;
};

/* Every kind this build knows (generated from providers/, see above). */
extern const struct tm_config_kind *const tm_config_kinds[];
extern const size_t tm_config_nkinds;

/* The kind called name, or NULL. */
const struct tm_config_kind *tm_config_kind_find(const char *name);

/* Messages for a kind's checks.  tm_cfg_path_set() names the key, as
 * "providers[%zu].state_dir"; tm_cfg_fail_at() then fails the load with
 * the file's line of that key, or of the nearest enclosing one present
 * (a missing key's mapping), and returns TM_EINVAL. */
__attribute__((format(printf, 2, 3)))
void tm_cfg_path_set(struct cfg_ctx *c, const char *fmt, ...);
__attribute__((format(printf, 2, 3)))
int tm_cfg_fail_at(struct cfg_ctx *c, const char *fmt, ...);
int tm_cfg_nomem(struct cfg_ctx *c);

#endif
