/*
 * controller/spec/request.h: the parts of a request other than its body
 * that the API checks before a route runs: path parameters and the
 * Content-Type.  Pure, so the fuzz target tests/fuzz/fuzz_api_request.c
 * drives them with the body readers, as the server chains them.
 */
#ifndef TM_SPEC_REQUEST_H
#define TM_SPEC_REQUEST_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Match path (len bytes, as h2o decoded it) against pattern
 * ("/v1/jobs/{id}/cancel"): {id} takes a positive integer (into *ret_id),
 * {name} a pool-style name (into name, name_size bytes).  1 on a match; 0
 * when the path has another shape; -1 when it has this shape but a
 * parameter is not valid (*ret_param: "id" or "name"), so that a client
 * hears 400 naming the parameter, not "no such endpoint".  A segment is
 * taken whole: one that holds a NUL ("frozen%00x" decoded) or bytes that
 * are not a name is invalid, never cut. */
int tm_request_path_match(const char *pattern, const char *path, size_t len, int64_t *ret_id,
                          char *name, size_t name_size, const char **ret_param);

/* Whether a Content-Type value (len bytes) is JSON: application/json, any
 * case, parameters allowed but a charset other than UTF-8. */
bool tm_request_json_type(const char *value, size_t len);

#endif
