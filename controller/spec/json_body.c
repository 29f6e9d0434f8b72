/*
 * controller/spec/json_body.c: see json_body.h.
 */
#include "controller/spec/json_body.h"

#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <jansson.h>

#include "core/err.h"

/* A control character a string may not hold: C0 but tab, LF, CR; and DEL. */
static bool refused_control(unsigned char c)
{
    return (c < 0x20 && c != '\t' && c != '\n' && c != '\r') || c == 0x7f;
}

bool tm_json_text_ok(const char *s, size_t n)
{
    const unsigned char *p = (const unsigned char *)s;
    size_t i = 0;

    while (i < n) {
        unsigned char c = p[i];
        size_t more;
        unsigned cp, min;
        if (c < 0x80) {
            if (refused_control(c))
                return false;
            i++;
            continue;
        }
        /* RFC 3629: shortest form only, no surrogates, nothing past U+10FFFF. */
        if (c >= 0xc2 && c <= 0xdf) {
            more = 1, cp = c & 0x1f, min = 0x80;
        } else if (c >= 0xe0 && c <= 0xef) {
            more = 2, cp = c & 0x0f, min = 0x800;
        } else if (c >= 0xf0 && c <= 0xf4) {
            more = 3, cp = c & 0x07, min = 0x10000;
        } else {
            return false;
        }
        if (n - i <= more)
            return false;
        for (size_t k = 1; k <= more; k++) {
            if ((p[i + k] & 0xc0) != 0x80)
                return false;
            cp = (cp << 6) | (p[i + k] & 0x3f);
        }
        if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
            return false;
        i += more + 1;
    }
    return true;
}

void tm_spec_field_name(char *out, size_t size, const char *prefix, const char *key)
{
    size_t k = (size_t)snprintf(out, size, "%s", prefix);

    for (const char *p = key ? key : ""; *p && k + 1 < size; p++)
        out[k++] = (*p >= ' ' && *p < 127) ? *p : '?';
    if (k < size)
        out[k] = '\0';
    /* An empty key still needs a name the client can see. */
    if ((!key || !*key) && k + 3 <= size)
        snprintf(out + k, size - k, "\"\"");
}

/* Find the first string (value or key) that breaks the text rule. */
static bool check_strings(const json_t *v, const char *path, struct tm_spec_error *err)
{
    char sub[64];

    if (json_is_string(v)) {
        if (tm_json_text_ok(json_string_value(v), json_string_length(v)))
            return true;
        tm_spec_fail(err, *path ? path : "body",
                     memchr(json_string_value(v), '\0', json_string_length(v))
                         ? "must not contain a NUL character"
                         : "must not contain control characters");
        return false;
    }
    if (json_is_object(v)) {
        const char *key;
        json_t *item;
        json_object_foreach((json_t *)v, key, item) {
            char prefix[64];
            snprintf(prefix, sizeof(prefix), "%s%s", path, *path ? "." : "");
            tm_spec_field_name(sub, sizeof(sub), prefix, key);
            if (!tm_json_text_ok(key, strlen(key))) {
                tm_spec_fail(err, sub, "a field name must not contain control characters");
                return false;
            }
            if (!check_strings(item, sub, err))
                return false;
        }
        return true;
    }
    if (json_is_array(v)) {
        for (size_t i = 0; i < json_array_size(v); i++) {
            snprintf(sub, sizeof(sub), "%s[%zu]", path, i);
            if (!check_strings(json_array_get(v, i), sub, err))
                return false;
        }
    }
    return true;
}

/* How deep arrays and objects nest in v (a scalar is 0); jansson bounds
 * it (2048), so the recursion is bounded too. */
static size_t nesting(const json_t *v)
{
    size_t deepest = 0;

    if (json_is_object(v)) {
        const char *key;
        json_t *item;
        json_object_foreach((json_t *)v, key, item) {
            size_t d = nesting(item);
            deepest = d > deepest ? d : deepest;
        }
        return deepest + 1;
    }
    if (json_is_array(v)) {
        for (size_t i = 0; i < json_array_size(v); i++) {
            size_t d = nesting(json_array_get(v, i));
            deepest = d > deepest ? d : deepest;
        }
        return deepest + 1;
    }
    return 0;
}

/* jansson 2.14 (Debian 12) is not safe when an allocation fails inside its
 * lexer: lex_save() drops strbuffer_append_byte()'s failure and the lexer
 * then writes past its buffer or asserts (akheron/jansson#362, still open;
 * seen here under tests/unit/alloc_fail).  Heap corruption in the
 * controller is worse than a crash, which the next reconcile repairs, so
 * jansson's allocations that fail end the process with a clear line. */
static pthread_once_t jansson_hooked = PTHREAD_ONCE_INIT;

static void *jansson_malloc(size_t size)
{
    static const char msg[] = "tarmac: out of memory inside jansson's JSON lexer, which cannot "
                              "recover from it (akheron/jansson#362); stopping\n";
    void *p = malloc(size);
    if (!p) {
        (void)!write(2, msg, sizeof(msg) - 1);
        abort();
    }
    return p;
}

static void jansson_hook(void)
{
    json_set_alloc_funcs(jansson_malloc, free);
}

/* jansson's message quotes the input near the error; keep it printable. */
static void printable(char *s)
{
    for (; *s; s++)
        if ((unsigned char)*s < ' ' || (unsigned char)*s >= 127)
            *s = '?';
}

int tm_json_body_parse(const char *text, size_t len, cJSON **ret, struct tm_spec_error *err)
{
    json_error_t jerr;
    json_t *doc;
    const char *end = NULL;
    cJSON *root;
    bool ok, deep;

    *ret = NULL;
    pthread_once(&jansson_hooked, jansson_hook);
    /* Integers as reals: a huge count is then the field's range error, not
     * a parse error; NUL allowed here only to be found and named below. */
    doc = json_loadb(text, len, JSON_DECODE_ANY | JSON_ALLOW_NUL |
                                    JSON_DECODE_INT_AS_REAL, &jerr);
    if (!doc) {
        /* An empty text: jansson could not even set up its lexer. */
        if (json_error_code(&jerr) == json_error_out_of_memory || jerr.text[0] == '\0')
            return tm_spec_fail_nomem(err);
        printable(jerr.text);
        return tm_spec_fail(err, "body", "malformed JSON at byte %d: %s", jerr.position, jerr.text);
    }
    ok = check_strings(doc, "", err);
    deep = nesting(doc) > CJSON_NESTING_LIMIT;
    json_decref(doc);
    if (!ok)
        return TM_EINVAL;
    root = cJSON_ParseWithLengthOpts(text, len, &end, 0);
    /* jansson read it; cJSON failing here is its depth limit or memory. */
    if (!root && deep)
        return tm_spec_fail(err, "body", "malformed JSON (nested too deeply)");
    if (!root)
        return tm_spec_fail_nomem(err);
    *ret = root;
    return 0;
}

cJSON *tm_json_parse_strict(const char *text, size_t len)
{
    cJSON *root;
    return tm_json_body_parse(text, len, &root, NULL) == 0 ? root : NULL;
}
