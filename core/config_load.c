/*
 * core/config_load.c: load the configuration from a file, a buffer or the
 * environment, and release it (the lookups of config.h: config_lookup.c).
 */
#include "core/config_internal.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/err.h"
#include "core/spot_hazards.h"

/* ---- loading ------------------------------------------------------------- */

/* libyaml's reader errors carry a byte offset instead of a mark. */
static size_t cfg_line_of_offset(const char *text, size_t len, size_t offset)
{
    size_t line = 1;

    for (size_t i = 0; i < offset && i < len; i++)
        if (text[i] == '\n')
            line++;
    return line;
}

static int cfg_syntax_error(struct cfg_ctx *c, const yaml_parser_t *parser, const char *text,
                            size_t len)
{
    size_t line;

    if (parser->error == YAML_MEMORY_ERROR)
        return tm_cfg_nomem(c);
    if (parser->error == YAML_READER_ERROR)
        line = cfg_line_of_offset(text, len, parser->problem_offset);
    else
        line = parser->problem_mark.line + 1;
    if (c->err && c->errsize > 0) {
        if (parser->context)
            snprintf(c->err, c->errsize, "%s:%zu: syntax error: %s %s (line %zu)", c->name, line,
                     parser->problem ? parser->problem : "invalid YAML", parser->context,
                     parser->context_mark.line + 1);
        else
            snprintf(c->err, c->errsize, "%s:%zu: syntax error: %s", c->name, line,
                     parser->problem ? parser->problem : "invalid YAML");
    }
    return TM_EINVAL;
}

int tm_config_load_string(const char *text, size_t len, const char *name,
                          struct tm_config *ret_cfg, char *err, size_t errsize)
{
    struct tm_config cfg = {0};
    struct cfg_ctx c = {.name = name ? name : "<config>", .err = err, .errsize = errsize};
    yaml_parser_t parser;
    yaml_document_t doc, extra;
    bool have_parser = false, have_doc = false, have_extra = false;
    int r;

    if (err && errsize > 0)
        err[0] = '\0';
    if (!text)
        len = 0;
    if (len > CFG_FILE_MAX) {
        r = TM_EINVAL;
        if (err && errsize > 0)
            snprintf(err, errsize, "%s:1: file is larger than %u bytes", c.name, CFG_FILE_MAX);
        goto out;
    }
    if (!yaml_parser_initialize(&parser)) {
        r = tm_cfg_nomem(&c);
        goto out;
    }
    have_parser = true;
    yaml_parser_set_input_string(&parser, (const unsigned char *)(text ? text : ""), len);
    if (!yaml_parser_load(&parser, &doc)) {
        r = cfg_syntax_error(&c, &parser, text, len);
        goto out;
    }
    have_doc = true;
    c.doc = &doc;
    c.root = yaml_document_get_root_node(&doc);
    if (!c.root) {
        r = tm_cfg_fail(&c, NULL, "the file holds no configuration");
        goto out;
    }
    /* A second document would be silently ignored; say so instead. */
    if (!yaml_parser_load(&parser, &extra)) {
        r = cfg_syntax_error(&c, &parser, text, len);
        goto out;
    }
    have_extra = true;
    if (yaml_document_get_root_node(&extra)) {
        r = tm_cfg_fail(&c, yaml_document_get_root_node(&extra),
                        "more than one YAML document; a configuration is one document");
        goto out;
    }

    cfg.path = tm_cfg_strdup(c.name);
    if (!cfg.path) {
        r = tm_cfg_nomem(&c);
        goto out;
    }
    tm_cfg_provider_section(); /* the kinds' rows, before the first use */
    r = tm_cfg_apply_defaults(&c, &tm_cfg_root_section, &cfg);
    if (r < 0)
        goto out;
    r = tm_cfg_parse_mapping(&c, &tm_cfg_root_section, &cfg, c.root);
    if (r < 0)
        goto out;
    r = tm_cfg_validate(&c, &cfg);
    if (r < 0)
        goto out;
    r = tm_cfg_normalise(&c, &cfg);
    if (r < 0)
        goto out;

    *ret_cfg = cfg; /* hand over only on success */
    cfg = (struct tm_config){0};
    r = 0;
out:
    tm_config_release(&cfg);
    if (have_extra)
        yaml_document_delete(&extra);
    if (have_doc)
        yaml_document_delete(&doc);
    if (have_parser)
        yaml_parser_delete(&parser);
    return r;
}

const char *tm_config_path(const char *given)
{
    FILE *probe;

    if (given)
        return given;
    if (getenv("TARMAC_CONFIG"))
        return getenv("TARMAC_CONFIG");
    probe = fopen(TM_CONFIG_DEFAULT_PATH, "r");
    if (!probe)
        return NULL;
    fclose(probe);
    return TM_CONFIG_DEFAULT_PATH;
}

int tm_config_load(const char *path, struct tm_config *ret_cfg, char *err, size_t errsize)
{
    FILE *f = NULL;
    char *buf = NULL;
    size_t len = 0;
    int r;

    if (err && errsize > 0)
        err[0] = '\0';
    f = fopen(path, "rb");
    if (!f) {
        r = -errno;
        if (err && errsize > 0)
            snprintf(err, errsize, "%s: could not open: %s", path, strerror(-r));
        goto out;
    }
    /* One byte more than the limit tells "too large" from "exactly full". */
    buf = tm_cfg_calloc(1, CFG_FILE_MAX + 1);
    if (!buf) {
        r = TM_ENOMEM;
        if (err && errsize > 0)
            snprintf(err, errsize, "%s: out of memory", path);
        goto out;
    }
    len = fread(buf, 1, CFG_FILE_MAX + 1, f);
    if (ferror(f)) {
        r = -EIO;
        if (err && errsize > 0)
            snprintf(err, errsize, "%s: could not read: %s", path, strerror(EIO));
        goto out;
    }
    r = tm_config_load_string(buf, len, path, ret_cfg, err, errsize);
out:
    free(buf);
    if (f)
        fclose(f);
    return r;
}

int tm_config_apply_env(struct tm_config *cfg, char *err, size_t errsize)
{
    const char *url = getenv("TARMAC_DATABASE_URL");
    const char *listen = getenv("TARMAC_LISTEN");
    char *new_url = NULL, *new_listen = NULL;
    int r = 0;

    if (err && errsize > 0)
        err[0] = '\0';
    /* An empty variable is treated as unset, as shells make that easy. */
    if (url && *url) {
        bool ctl = false;
        for (const char *p = url; *p; p++)
            ctl |= (unsigned char)*p < 0x20 || *p == 0x7f;
        if (ctl || strlen(url) > CFG_STRING_MAX) {
            r = TM_EINVAL;
            if (err && errsize > 0)
                snprintf(err, errsize,
                         "environment TARMAC_DATABASE_URL: must be at most %d bytes without "
                         "control characters",
                         CFG_STRING_MAX);
            goto out;
        }
        new_url = tm_cfg_strdup(url);
        if (!new_url) {
            r = TM_ENOMEM;
            goto out;
        }
    }
    if (listen && *listen) {
        if (!tm_cfg_listen_ok(listen)) {
            r = TM_EINVAL;
            if (err && errsize > 0)
                snprintf(err, errsize,
                         "environment TARMAC_LISTEN: bad address \"%.128s\": expected host:port "
                         "with port 0 to 65535",
                         listen);
            goto out;
        }
        new_listen = tm_cfg_strdup(listen);
        if (!new_listen) {
            r = TM_ENOMEM;
            goto out;
        }
    }
    if (!new_url && !cfg->database_url) {
        r = TM_EINVAL;
        if (err && errsize > 0)
            snprintf(err, errsize, "%s: database.url is not set and TARMAC_DATABASE_URL is empty",
                     cfg->path ? cfg->path : "<config>");
        goto out;
    }
    if (new_url) {
        r = tm_cfg_register_db_secret(new_url);
        if (r < 0)
            goto out;
        free(cfg->database_url);
        cfg->database_url = new_url;
        new_url = NULL;
    }
    if (new_listen) {
        free(cfg->listen);
        cfg->listen = new_listen;
        new_listen = NULL;
    }
out:
    if (r == TM_ENOMEM && err && errsize > 0)
        snprintf(err, errsize, "environment: out of memory");
    free(new_url);
    free(new_listen);
    return r;
}

void tm_config_release(struct tm_config *cfg)
{
    if (!cfg)
        return;
    /* The one member the field tables do not describe: a loaded table. */
    for (size_t i = 0; cfg->providers && i < cfg->nproviders; i++)
        free(cfg->providers[i].spot_hazards);
    for (size_t i = 0; i < cfg->npools; i++)
        free(cfg->pools[i].bootstrap);
    free(cfg->agent.ca_pem);
    tm_cfg_provider_section();
    tm_cfg_release_section(&tm_cfg_root_section, cfg);
    free(cfg->path);
    *cfg = (struct tm_config){0};
}
