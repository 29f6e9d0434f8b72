/*
 * core/yaml_table.h: reading a small table file (the price table,
 * the spot hazard table) through libyaml's document API, so that every node
 * carries its line and each error reads "FILE:LINE: reason".
 *
 * A loader writes only its root function; opening, the size cap, parsing
 * and the error format are here, once.
 */
#ifndef TM_YAML_TABLE_H
#define TM_YAML_TABLE_H

#include <stddef.h>
#include <yaml.h>

/* Files larger than this are refused (they are hand-written tables). */
#define TM_YAML_TABLE_FILE_MAX (4 * 1024 * 1024)

struct tm_yaml_ctx {
    const char *name;      /* file name in messages */
    yaml_document_t *doc;  /* for yaml_document_get_node() */
    char *err;
    size_t errlen;
};

/* Write "NAME:LINE: <fmt...>" to c->err (line of n, 1 without a node) and
 * return TM_EINVAL. */
int tm_yaml_fail(const struct tm_yaml_ctx *c, const yaml_node_t *n, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* n's text when it is a scalar, else NULL. */
const char *tm_yaml_scalar(const yaml_node_t *n);

/* A non-empty string that fits buf (len bytes with its NUL), copied; else
 * an error naming key. */
int tm_yaml_get_name(const struct tm_yaml_ctx *c, const yaml_node_t *n, const char *key, char *buf,
                     size_t len);

/* Fills out from the document's root; 0 or an error through tm_yaml_fail. */
typedef int (*tm_yaml_root_fn)(struct tm_yaml_ctx *c, yaml_node_t *root, void *out);

/* Parse text[0..len) as one document and run root on a zeroed scratch
 * object of size bytes, copied to *ret only on success.  name is used in
 * messages.  0, TM_EINVAL (err filled) or TM_ENOMEM. */
int tm_yaml_table_parse(const char *name, const char *text, size_t len, tm_yaml_root_fn root,
                        void *ret, size_t size, char *err, size_t errlen);

/* The same from a file: also -errno when it cannot be opened, TM_EINVAL
 * when it cannot be read or is larger than TM_YAML_TABLE_FILE_MAX. */
int tm_yaml_table_load(const char *path, tm_yaml_root_fn root, void *ret, size_t size, char *err,
                       size_t errlen);

#endif
