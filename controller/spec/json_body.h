/*
 * controller/spec/json_body.h: the one reader of JSON that a client sends, strict
 * where cJSON is lenient.  Pure: no I/O, no clock.
 *
 * cJSON, which every module uses to walk a document, accepts leading zeros
 * ("01"), raw control characters and bytes that are not UTF-8 inside
 * strings, a byte-order mark, and keeps a string only up to an escaped NUL
 * ("fro\u0000zen" reads as "fro"), so a team name or a budget's key could
 * be cut silently.  So a body is first read with jansson, a well-kept
 * strict parser (RFC 8259 grammar and numbers, UTF-8 only), and then its
 * strings are checked for what JSON allows but
 * tarmac does not: NUL, and control characters other than tab, newline and
 * carriage return (they would reach logs and terminals).  Only a document
 * that passes is handed to cJSON.  Repeated keys are left to each body's
 * reader, which refuses them naming the field (jansson would keep the last
 * and say only "body"); those readers are also why a NUL hidden in the
 * first of two repeated keys, which jansson's tree no longer holds, is no
 * hole: the repeat itself is refused.
 */
#ifndef TM_JSON_BODY_H
#define TM_JSON_BODY_H

#include <stddef.h>

#include <cjson/cJSON.h>

#include "controller/spec/spec_error.h"

/* Parse one JSON document (any value at the top) strictly.  0 with *ret the
 * cJSON tree (caller frees with cJSON_Delete); TM_EINVAL with err naming
 * "body" (malformed: the reason and byte offset) or the field whose string
 * holds a refused character ("team", "jobs[2].reason"); TM_ENOMEM. */
int tm_json_body_parse(const char *text, size_t len, cJSON **ret, struct tm_spec_error *err);

/* The same without the reason: NULL when malformed or refused. */
cJSON *tm_json_parse_strict(const char *text, size_t len);

/* A client's key as a field name an error may echo: prefix (as given, e.g.
 * "jobs[2].") then key with every byte outside printable ASCII as '?';
 * an empty key reads "". */
void tm_spec_field_name(char *out, size_t size, const char *prefix, const char *key);

/* Whether s (n bytes) is valid UTF-8 without NUL or control characters
 * other than tab, newline and carriage return: the rule for a string in a
 * body, and for a decoded path segment or query value. */
bool tm_json_text_ok(const char *s, size_t n);

#endif
