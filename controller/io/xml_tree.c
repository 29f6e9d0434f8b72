/*
 * controller/io/xml_tree.c: see xml_tree.h.
 */
#include "controller/io/xml_tree.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <expat.h>

#include "core/err.h"

#define XML_MAX_DEPTH 64
#define XML_MAX_NODES (1u << 20)
#define XML_MAX_TEXT (16u << 20)

static int text_reserve(struct tm_xdoc *d, size_t more)
{
    size_t want = d->len + more + 1;
    size_t cap;
    char *p;

    if (want <= d->tcap)
        return 0;
    if (want > XML_MAX_TEXT)
        return TM_EBADREPLY;
    cap = d->tcap ? d->tcap : 4096;
    while (cap < want)
        cap *= 2;
    p = realloc(d->text, cap);
    if (!p)
        return TM_ENOMEM;
    d->text = p;
    d->tcap = cap;
    return 0;
}

static void stop(struct tm_xdoc *d, const char *why)
{
    if (!d->fail)
        d->fail = why;
    XML_StopParser(d->parser, XML_FALSE);
}

/* Element names may carry a prefix ("ec2:item"): keep the local part. */
static const char *local_name(const char *name)
{
    const char *colon = strrchr(name, ':');

    return colon ? colon + 1 : name;
}

static void XMLCALL on_start(void *ud, const XML_Char *name, const XML_Char **attrs)
{
    struct tm_xdoc *d = ud;
    const char *local = local_name(name);
    size_t nlen = strlen(local);
    struct tm_xnode *x;
    int idx, r;

    (void)attrs;
    if (d->fail)
        return;
    if (d->depth >= XML_MAX_DEPTH) {
        stop(d, "elements nested too deep");
        return;
    }
    if (d->n >= XML_MAX_NODES) {
        stop(d, "too many elements");
        return;
    }
    if (d->n == d->cap) {
        size_t cap = d->cap ? d->cap * 2 : 256;
        struct tm_xnode *p = realloc(d->nodes, cap * sizeof(*p));

        if (!p) {
            stop(d, "out of memory");
            return;
        }
        d->nodes = p;
        d->cap = cap;
    }
    if ((r = text_reserve(d, nlen)) < 0) {
        stop(d, r == TM_ENOMEM ? "out of memory" : "answer too large");
        return;
    }
    idx = (int)d->n++;
    x = &d->nodes[idx];
    x->name = d->len;
    memcpy(d->text + d->len, local, nlen + 1);
    d->len += nlen + 1;
    x->text = 0;
    x->text_len = 0;
    x->parent = d->cur;
    x->first = x->last = x->next = -1;
    if (d->cur >= 0) {
        struct tm_xnode *p = &d->nodes[d->cur];

        if (p->last >= 0)
            d->nodes[p->last].next = idx;
        else
            p->first = idx;
        p->last = idx;
    } else if (d->n > 1) {
        stop(d, "more than one root element");
        return;
    }
    d->cur = idx;
    d->depth++;
}

static void XMLCALL on_end(void *ud, const XML_Char *name)
{
    struct tm_xdoc *d = ud;

    (void)name;
    if (d->fail || d->cur < 0)
        return;
    d->cur = d->nodes[d->cur].parent;
    d->depth--;
}

/*
 * Character data of the open element.  Only what sits directly in a leaf
 * matters to us; text chunks of one element arrive in pieces and must be
 * contiguous, so a chunk that does not extend the element's current text
 * (the element had children in between) starts it anew.
 */
static void XMLCALL on_text(void *ud, const XML_Char *s, int len)
{
    struct tm_xdoc *d = ud;
    struct tm_xnode *x;

    if (d->fail || d->cur < 0 || len <= 0)
        return;
    x = &d->nodes[d->cur];
    if (x->first >= 0)
        return; /* whitespace between children */
    int r = text_reserve(d, (size_t)len);
    if (r < 0) {
        stop(d, r == TM_ENOMEM ? "out of memory" : "answer too large");
        return;
    }
    if (x->text == 0 || x->text + x->text_len + 1 != d->len) {
        x->text = d->len;
        x->text_len = 0;
    } else {
        d->len--; /* drop the NUL: we extend the same string */
    }
    memcpy(d->text + d->len, s, (size_t)len);
    d->len += (size_t)len;
    d->text[d->len++] = '\0';
    x->text_len += (size_t)len;
}

static void XMLCALL on_doctype(void *ud, const XML_Char *name, const XML_Char *sysid,
                               const XML_Char *pubid, int has_internal_subset)
{
    (void)name;
    (void)sysid;
    (void)pubid;
    (void)has_internal_subset;
    stop(ud, "a DOCTYPE is not allowed");
}

static void XMLCALL on_entity_decl(void *ud, const XML_Char *name, int is_param,
                                   const XML_Char *value, int value_len, const XML_Char *base,
                                   const XML_Char *sysid, const XML_Char *pubid,
                                   const XML_Char *notation)
{
    (void)name;
    (void)is_param;
    (void)value;
    (void)value_len;
    (void)base;
    (void)sysid;
    (void)pubid;
    (void)notation;
    stop(ud, "entity declarations are not allowed");
}

void tm_xdoc_release(struct tm_xdoc *d)
{
    free(d->nodes);
    free(d->text);
    memset(d, 0, sizeof(*d));
}

int tm_xdoc_parse(struct tm_xdoc *d, const char *body, size_t len, char *err, size_t errsize)
{
    XML_Parser p;
    int r = 0;

    memset(d, 0, sizeof(*d));
    d->cur = -1;
    if (len > XML_MAX_TEXT || len > (size_t)INT32_MAX) {
        snprintf(err, errsize, "answer too large (%zu bytes)", len);
        return TM_EBADREPLY;
    }
    p = XML_ParserCreate("UTF-8");
    if (!p) {
        snprintf(err, errsize, "out of memory");
        return TM_ENOMEM;
    }
    d->parser = p;
    /* Offset 0 means "no text", so the buffer starts with a spare byte. */
    if (text_reserve(d, 1) < 0) {
        XML_ParserFree(p);
        snprintf(err, errsize, "out of memory");
        return TM_ENOMEM;
    }
    d->text[0] = '\0';
    d->len = 1;
    XML_SetUserData(p, d);
    XML_SetElementHandler(p, on_start, on_end);
    XML_SetCharacterDataHandler(p, on_text);
    XML_SetStartDoctypeDeclHandler(p, on_doctype);
    XML_SetEntityDeclHandler(p, on_entity_decl);
    if (XML_Parse(p, body ? body : "", (int)len, XML_TRUE) != XML_STATUS_OK) {
        if (d->fail)
            snprintf(err, errsize, "%s", d->fail);
        else
            snprintf(err, errsize, "line %lu: %s", (unsigned long)XML_GetCurrentLineNumber(p),
                     XML_ErrorString(XML_GetErrorCode(p)));
        r = strcmp(d->fail ? d->fail : "", "out of memory") == 0 ||
                    (!d->fail && XML_GetErrorCode(p) == XML_ERROR_NO_MEMORY)
                ? TM_ENOMEM
                : TM_EBADREPLY;
    } else if (d->n == 0) {
        snprintf(err, errsize, "no root element");
        r = TM_EBADREPLY;
    }
    XML_ParserFree(p);
    d->parser = NULL;
    if (r < 0)
        tm_xdoc_release(d);
    return r;
}

const char *tm_xdoc_name(const struct tm_xdoc *d, int i)
{
    return d->text + d->nodes[i].name;
}

/* The text of element i; "" when it has none. */
const char *tm_xdoc_text(const struct tm_xdoc *d, int i)
{
    if (i < 0 || d->nodes[i].text == 0)
        return "";
    return d->text + d->nodes[i].text;
}

int tm_xdoc_child(const struct tm_xdoc *d, int parent, const char *name)
{
    if (parent < 0)
        return -1;
    for (int c = d->nodes[parent].first; c >= 0; c = d->nodes[c].next)
        if (strcmp(tm_xdoc_name(d, c), name) == 0)
            return c;
    return -1;
}

/* Follow "a/b/c" from parent. */
int tm_xdoc_path(const struct tm_xdoc *d, int parent, const char *path)
{
    char part[64];
    const char *p = path;
    int cur = parent;

    while (cur >= 0 && *p) {
        size_t n = strcspn(p, "/");

        if (n >= sizeof(part))
            return -1;
        memcpy(part, p, n);
        part[n] = '\0';
        cur = tm_xdoc_child(d, cur, part);
        p += n;
        if (*p == '/')
            p++;
    }
    return cur;
}

const char *tm_xdoc_get(const struct tm_xdoc *d, int parent, const char *path)
{
    return tm_xdoc_text(d, tm_xdoc_path(d, parent, path));
}

/* Copy path's text into a fixed field; too long is a bad reply. */
int tm_xdoc_copy(const struct tm_xdoc *d, int parent, const char *path, char *dst, size_t size)
{
    const char *s = tm_xdoc_get(d, parent, path);
    size_t n = strlen(s);

    if (n >= size)
        return TM_EBADREPLY;
    memcpy(dst, s, n + 1);
    return 0;
}

/* Copy, cutting what does not fit (messages, descriptions). */
void tm_xdoc_copy_cut(const struct tm_xdoc *d, int parent, const char *path, char *dst, size_t size)
{
    snprintf(dst, size, "%s", tm_xdoc_get(d, parent, path));
}

size_t tm_xdoc_count_items(const struct tm_xdoc *d, int set)
{
    size_t n = 0;

    if (set < 0)
        return 0;
    for (int c = d->nodes[set].first; c >= 0; c = d->nodes[c].next)
        if (strcmp(tm_xdoc_name(d, c), "item") == 0)
            n++;
    return n;
}

int tm_xdoc_first_item(const struct tm_xdoc *d, int set)
{
    if (set < 0)
        return -1;
    for (int c = d->nodes[set].first; c >= 0; c = d->nodes[c].next)
        if (strcmp(tm_xdoc_name(d, c), "item") == 0)
            return c;
    return -1;
}

int tm_xdoc_next_item(const struct tm_xdoc *d, int item)
{
    for (int c = d->nodes[item].next; c >= 0; c = d->nodes[c].next)
        if (strcmp(tm_xdoc_name(d, c), "item") == 0)
            return c;
    return -1;
}
