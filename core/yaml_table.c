/*
 * core/yaml_table.c: see yaml_table.h.
 */
#include "core/yaml_table.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/err.h"
#include "core/file.h"

int tm_yaml_fail(const struct tm_yaml_ctx *c, const yaml_node_t *n, const char *fmt, ...)
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

const char *tm_yaml_scalar(const yaml_node_t *n)
{
    return n && n->type == YAML_SCALAR_NODE ? (const char *)n->data.scalar.value : NULL;
}

int tm_yaml_get_name(const struct tm_yaml_ctx *c, const yaml_node_t *n, const char *key, char *buf,
                     size_t len)
{
    const char *s = tm_yaml_scalar(n);

    if (!s || !*s)
        return tm_yaml_fail(c, n, "\"%s\" must be a non-empty string", key);
    if (strlen(s) >= len)
        return tm_yaml_fail(c, n, "\"%s\" is too long", key);
    memcpy(buf, s, strlen(s) + 1);
    return 0;
}

int tm_yaml_table_parse(const char *name, const char *text, size_t len, tm_yaml_root_fn root,
                        void *ret, size_t size, char *err, size_t errlen)
{
    void *t = calloc(1, size);
    struct tm_yaml_ctx c = {.name = name, .err = err, .errlen = errlen};
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
    r = root(&c, yaml_document_get_root_node(&doc), t);
    if (r == 0)
        memcpy(ret, t, size);
    yaml_document_delete(&doc);
    yaml_parser_delete(&parser);
    free(t);
    return r;
}

int tm_yaml_table_load(const char *path, tm_yaml_root_fn root, void *ret, size_t size, char *err,
                       size_t errlen)
{
    char *buf;
    size_t n;
    int r = tm_file_read(path, TM_YAML_TABLE_FILE_MAX, &buf, &n, err, errlen);

    if (r == -EIO)
        r = TM_EINVAL; /* opened but unreadable: a bad input, as a file too large is */
    if (r < 0)
        return r;
    r = tm_yaml_table_parse(path, buf, n, root, ret, size, err, errlen);
    free(buf);
    return r;
}
