/*
 * controller/api/request.c: the parts of a request every route reads (the query
 * string, path parameters, limit and cursor) and the usual answers (one
 * row, a page).
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>
#include <libpq-fe.h>
#include <openssl/crypto.h>

#include "controller/api/internal.h"
#include "controller/api/request.h"
#include "controller/api/rows.h"
#include "controller/spec/json_body.h"
#include "core/err.h"
#include "core/log.h"
#include "core/model.h"

void tm_api_reply_one(struct api_call *c, PGresult *res, int status, const char *what)
{
    if (PQntuples(res) < 1 || PQgetisnull(res, 0, 0)) {
        char msg[64];
        snprintf(msg, sizeof(msg), "no such %s", what);
        tm_api_fail(c, 404, NULL, msg);
        return;
    }
    tm_api_reply(c, status, PQgetvalue(res, 0, 0), (size_t)PQgetlength(res, 0, 0));
}

void tm_api_reply_page(struct api_call *c, PGresult *res)
{
    int n = PQntuples(res);
    int shown = n > (int)c->limit ? (int)c->limit : n;
    size_t size = 64, len = 0;
    char *buf;

    for (int i = 0; i < shown; i++)
        size += (size_t)PQgetlength(res, i, 1) + 1;
    buf = malloc(size);
    if (!buf) {
        tm_api_fail(c, 500, NULL, "out of memory");
        return;
    }
    len += (size_t)snprintf(buf, size, "{\"items\":[");
    for (int i = 0; i < shown; i++) {
        size_t l = (size_t)PQgetlength(res, i, 1);
        if (i)
            buf[len++] = ',';
        memcpy(buf + len, PQgetvalue(res, i, 1), l);
        len += l;
    }
    if (n > shown)
        len += (size_t)snprintf(buf + len, size - len, "],\"next_cursor\":\"%s\"}",
                                PQgetvalue(res, shown - 1, 0));
    else
        len += (size_t)snprintf(buf + len, size - len, "],\"next_cursor\":null}");
    tm_api_reply(c, 200, buf, len);
    free(buf);
}

/* ---- query strings -------------------------------------------------------- */

/* Percent-decode s[0..n) into out; false when malformed or too long. */
static bool url_decode(const char *s, size_t n, char *out, size_t size)
{
    size_t k = 0;

    for (size_t i = 0; i < n; i++) {
        char ch = s[i];
        if (ch == '%') {
            int hi, lo;
            if (i + 2 >= n)
                return false;
            hi = OPENSSL_hexchar2int((unsigned char)s[i + 1]);
            lo = OPENSSL_hexchar2int((unsigned char)s[i + 2]);
            if (hi < 0 || lo < 0)
                return false;
            ch = (char)(hi * 16 + lo);
            i += 2;
        } else if (ch == '+') {
            ch = ' ';
        }
        if (ch == '\0' || k + 1 >= size)
            return false;
        out[k++] = ch;
    }
    out[k] = '\0';
    return true;
}

int tm_api_parse_query(struct api_call *c, struct api_qp *qp, size_t nqp, struct tm_spec_error *err)
{
    const char *q, *end;
    size_t len;

    if (!tm_api_query_string(c, &q, &len))
        return TM_ECANCELED;
    if (len > 4096)
        return tm_spec_fail(err, "query", "query string longer than 4096 bytes");
    end = q + len;
    while (q < end) {
        const char *amp = memchr(q, '&', (size_t)(end - q));
        const char *seg_end = amp ? amp : end;
        const char *eq = memchr(q, '=', (size_t)(seg_end - q));
        char key[64], value[256];
        size_t i;

        if (seg_end == q) {
            q = seg_end + 1;
            continue;
        }
        if (!url_decode(q, (size_t)((eq ? eq : seg_end) - q), key, sizeof(key)))
            return tm_spec_fail(err, "query", "malformed query string");
        if (!url_decode(eq ? eq + 1 : seg_end, eq ? (size_t)(seg_end - eq - 1) : 0, value,
                        sizeof(value)))
            return tm_spec_fail(err, key, "malformed or too long a value");
        /* The same text rule as a body's strings: a value that the
         * database would refuse, or a log would print raw, stops here. */
        if (!tm_json_text_ok(key, strlen(key)) || !tm_json_text_ok(value, strlen(value)))
            return tm_spec_fail(err, "query", "must be UTF-8 text without control characters");
        for (i = 0; i < nqp; i++)
            if (strcmp(qp[i].name, key) == 0)
                break;
        if (i == nqp) {
            for (char *p = key; *p; p++)
                if (*p < ' ' || *p >= 127)
                    *p = '?';
            return tm_spec_fail(err, key, "unrecognized query parameter");
        }
        if (qp[i].set)
            return tm_spec_fail(err, key, "given more than once");
        qp[i].set = true;
        memcpy(qp[i].value, value, sizeof(value));
        q = amp ? amp + 1 : end;
    }
    return 0;
}

bool tm_api_parse_pos(const char *s, int64_t max, int64_t *ret)
{
    char *end;
    long long v;

    /* Digits only: strtoll would also take leading spaces and a sign. */
    if (*s < '0' || *s > '9')
        return false;
    v = strtoll(s, &end, 10);
    if (*end || v <= 0 || v > max)
        return false;
    *ret = v;
    return true;
}

/* limit and cursor, common to every list. */
int tm_api_page_params(struct api_call *c, const struct api_qp *limit, const struct api_qp *cursor,
                       char *cursor_buf, size_t size, struct tm_spec_error *err)
{
    int64_t v;

    c->limit = DEFAULT_PAGE < tm_api_max_list(c) ? DEFAULT_PAGE : tm_api_max_list(c);
    if (limit->set) {
        if (!tm_api_parse_pos(limit->value, tm_api_max_list(c), &v))
            return tm_spec_fail(err, "limit", "must be a whole number from 1 to %u",
                                tm_api_max_list(c));
        c->limit = (unsigned)v;
    }
    cursor_buf[0] = '\0';
    if (cursor->set) {
        if (!tm_api_parse_pos(cursor->value, INT64_MAX, &v))
            return tm_spec_fail(err, "cursor", "must be a next_cursor value from a previous page");
        fmt_i64(cursor_buf, size, v);
    }
    return 0;
}

void tm_api_on_one(const struct tm_pg_reply *reply, void *data)
{
    struct api_call *c = data;

    if (!tm_api_reply_ok(c, reply))
        return;
    tm_api_reply_one(c, reply->results[0], 200, c->flag ? "pool" : c->route->pattern[4] == 'j' ? "job" : "node");
}

void tm_api_on_page(const struct tm_pg_reply *reply, void *data)
{
    struct api_call *c = data;

    if (!tm_api_reply_ok(c, reply))
        return;
    tm_api_reply_page(c, reply->results[0]);
}

/* The team an engineer token is confined to, NULL for every other role. */
const char *tm_api_engineer_team(const struct api_call *c)
{
    return c->role == TM_ROLE_ENGINEER ? c->team : NULL;
}
