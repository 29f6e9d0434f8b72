/*
 * controller/api/request.h: what the routes' files share besides the server
 * (internal.h): the usual answers to a statement (one row, a page), the
 * list parameters limit and cursor, and the team an engineer is confined
 * to.  Query strings and path parameters are parsed by request.c too
 * (tm_api_parse_query, tm_api_parse_pos in internal.h, which the server
 * shares).
 */
#ifndef TM_API_REQUEST_H
#define TM_API_REQUEST_H

#include <inttypes.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <libpq-fe.h>

#include "controller/api/internal.h"


/* v in decimal into buf (for statement parameters). */
static inline void fmt_i64(char *buf, size_t size, int64_t v)
{
    snprintf(buf, size, "%" PRId64, v);
}
/* The first row's first column as a JSON answer with status, or 404 "no
 * such <what>". */
void tm_api_reply_one(struct api_call *c, PGresult *res, int status, const char *what);
/* Rows of (id, json), one more than the page (c->limit): {"items": [...],
 * "next_cursor": "<id>" | null}. */
void tm_api_reply_page(struct api_call *c, PGresult *res);
/* limit and cursor, common to every list: sets c->limit and cursor_buf
 * ("" when no cursor); < 0 with err filled when either is malformed. */
int tm_api_page_params(struct api_call *c, const struct api_qp *limit, const struct api_qp *cursor,
                       char *cursor_buf, size_t size, struct tm_spec_error *err);
/* Query callbacks: one row (404 when none; the route names the kind) or
 * a page of rows. */
void tm_api_on_one(const struct tm_pg_reply *reply, void *data);
void tm_api_on_page(const struct tm_pg_reply *reply, void *data);
/* The team an engineer token is confined to, NULL for every other role. */
const char *tm_api_engineer_team(const struct api_call *c);

#endif
