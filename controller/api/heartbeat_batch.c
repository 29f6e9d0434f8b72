/*
 * controller/api/heartbeat_batch.c: group commit of the heartbeat's fast
 * path (POST /v1/nodes/{id}/heartbeat with a token in the authentication
 * cache, nodes.c).  A fleet's agents heartbeat all the time (10,000 nodes
 * every 10 s is 1,000 a second); one statement and one transaction each
 * left the controller at a third of what PostgreSQL does with the same
 * writes by hand (bench/results/heartbeat.md).
 *
 * Each parsed heartbeat becomes one item of a jsonb array; one statement,
 * tarmac_heartbeat_batch() (migrations/0012_heartbeat_batch.sql), runs the
 * items in node id order, each in its own savepoint, and answers one row
 * per item with the columns of nodes.c's single statement.  A batch is
 * sent at once while fewer than HB_INFLIGHT are in flight, else it fills
 * until one comes back: under load heartbeats share statements, with none
 * there is no wait.  A full batch sends its newcomers the normal way.
 *
 * What an item's row says:
 *   - answered (200, 400 naming the bad GPU index, 404, 409): as the
 *     single statement would (tm_api_heartbeat_answer);
 *   - tok_ok false: the cached token no longer holds; the normal path
 *     answers (401, 403), nothing of the item was written;
 *   - err_state: that item's savepoint was rolled back (the others
 *     stand) and it runs again alone through the normal path, which gives
 *     it the answer it would have had.
 * A batch the database refused as a whole wrote nothing: every item runs
 * again through the normal path.  A batch whose connection broke may or
 * may not have committed: each call fails as a single one would.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <libpq-fe.h>

#include "controller/api/internal.h"
#include "controller/api/request.h"
#include "controller/api/resources.h"
#include "controller/io/pg_uv.h"
#include "core/err.h"
#include "core/log.h"

/* 64 items: one savepoint each stays within PostgreSQL's per-backend cache
 * of 64 subtransactions (past it every snapshot gets slower). */
#define HB_ROWS 64
#define HB_BYTES (4u << 20)
/* As submit.c's batcher: two in flight keep a small machine's cores busy
 * while the next one fills, and leave the rest of serve's pool to the
 * tick and the other routes. */
#define HB_INFLIGHT 2

struct hb_batch {
    struct api_call *calls[HB_ROWS];
    unsigned n;
    unsigned inflight;
    struct tm_api_text text; /* "[item,item" while filling */
};

struct hb_flight {
    struct hb_batch *b;
    unsigned n;
    struct api_call *calls[];
};

static const char batch_sql[] =
    "SELECT i, tok_ok, state, bad, gpus, answer, err_state, err_message"
    " FROM tarmac_heartbeat_batch($1::jsonb)";

void *tm_api_heartbeat_state_new(void)
{
    return calloc(1, sizeof(struct hb_batch));
}

void tm_api_heartbeat_state_free(void *state)
{
    struct hb_batch *b = state;

    if (!b)
        return;
    free(b->text.p);
    free(b);
}

static void batch_send(struct hb_batch *b);

/* The normal path for c: authentication, then nodes.c's single statement. */
static void alone(struct api_call *c)
{
    if (c->req)
        tm_api_authenticate(c);
    else
        tm_api_call_free(c);
}

/* Column k of row r, NULL when SQL NULL. */
static const char *col(PGresult *res, int r, int k)
{
    return PQgetisnull(res, r, k) ? NULL : PQgetvalue(res, r, k);
}

static void answer_row(struct api_call *c, PGresult *res, int r)
{
    const char *err = col(res, r, 6), *tok = col(res, r, 1);

    if (!c->req) {
        tm_api_call_free(c);
        return;
    }
    if (err) {
        const char *msg = col(res, r, 7);
        tm_api_samples_give_back(c); /* its savepoint was rolled back */
        if (strcmp(err, "TM003") == 0) {
            tm_api_fail(c, 404, NULL, "no such node");
            return;
        }
        tm_log_warn("api heartbeat refused in its batch, it goes alone",
                    "node=%" PRId64 " sqlstate=%s error=\"%s\"", c->id, err, msg ? msg : "-");
        tm_api_authenticate(c);
        return;
    }
    tm_api_heartbeat_answer(c, tok && strcmp(tok, "t") == 0, col(res, r, 2), col(res, r, 3),
                            col(res, r, 4), col(res, r, 5), (size_t)PQgetlength(res, r, 5));
}

static void on_batch(const struct tm_pg_reply *reply, void *data)
{
    struct hb_flight *f = data;
    struct hb_batch *b = f->b;

    b->inflight--;
    if (reply->status == TM_EDB)
        tm_log_warn("api heartbeat batch refused, its items go one by one",
                    "items=%u error=\"%s\" sqlstate=%s", f->n, reply->error ? reply->error : "-",
                    reply->sqlstate ? reply->sqlstate : "-");
    if (reply->status < 0 && reply->status != TM_EDB) {
        for (unsigned i = 0; i < f->n; i++) {
            tm_api_samples_give_back(f->calls[i]);
            if (f->calls[i]->req)
                tm_api_fail_db(f->calls[i], reply);
            else
                tm_api_call_free(f->calls[i]);
        }
    } else {
        if (reply->status == 0) {
            PGresult *res = reply->results[0];
            for (int r = 0; r < PQntuples(res); r++) {
                long i = strtol(PQgetvalue(res, r, 0), NULL, 10) - 1;
                struct api_call *c;
                if (i < 0 || (unsigned long)i >= f->n || !f->calls[i])
                    continue;
                c = f->calls[i];
                f->calls[i] = NULL;
                answer_row(c, res, r);
            }
        }
        /* No row (refused as a whole): the normal path answers. */
        for (unsigned i = 0; i < f->n; i++)
            if (f->calls[i])
                alone(f->calls[i]);
    }
    free(f);
    if (b->n > 0 && b->inflight < HB_INFLIGHT)
        batch_send(b);
}

static void batch_send(struct hb_batch *b)
{
    struct hb_flight *f = malloc(sizeof(*f) + b->n * sizeof(f->calls[0]));
    bool ok = f != NULL && tm_api_text_add(&b->text, "]", 1);
    int r = -1;

    if (ok) {
        const char *params[] = {b->text.p};
        f->b = b;
        f->n = b->n;
        memcpy(f->calls, b->calls, b->n * sizeof(f->calls[0]));
        /* The batch waits no longer than its most pressed item may. */
        uint64_t left = UINT64_MAX;
        for (unsigned i = 0; i < b->n; i++) {
            uint64_t l = tm_api_time_left(b->calls[i]);
            if (l < left)
                left = l;
        }
        /* A database the pool knows is gone: 503 now, not at the deadline. */
        r = left == 0                                   ? -ETIMEDOUT
            : tm_pg_pool_down(tm_api_pool(b->calls[0])) ? TM_EUNAVAIL
                      : tm_pg_pool_query_until(tm_api_pool(b->calls[0]), batch_sql, 1, params, left,
                                               on_batch, f);
    }
    if (r < 0) {
        tm_log_warn("api could not queue a statement",
                    "route=\"/v1/nodes/{id}/heartbeat\" items=%u error=\"%s\"", b->n,
                    ok ? tm_strerror(r) : "out of memory");
        for (unsigned i = 0; i < b->n; i++) {
            tm_api_samples_give_back(b->calls[i]);
            tm_api_fail(b->calls[i], 503, NULL, "database unavailable");
        }
        free(f);
    } else {
        b->inflight++;
    }
    b->n = 0;
    b->text.len = 0;
}

/* Append c's item; false (and the batch as it was) when it does not fit. */
static bool batch_add(struct hb_batch *b, struct api_call *c, int64_t now_ms, const char *report,
                      const char *samples, const char *gpus)
{
    char head[320], lo[16], hi[16];
    size_t len = b->text.len, nr = strlen(report), ns = strlen(samples), ng = strlen(gpus);
    int n;

    if (b->n >= HB_ROWS)
        return false;
    tm_api_rendezvous_ports(c, lo, sizeof(lo), hi, sizeof(hi));
    /* The hash is hex and the role a fixed name: nothing to escape; the
     * rest is JSON as the parser wrote it. */
    n = snprintf(head, sizeof(head),
                 "%s{\"i\":%u,\"node\":%" PRId64 ",\"now\":%" PRId64
                 ",\"hash\":\"%s\",\"role\":\"%s\",\"port_lo\":%s,\"port_hi\":%s,\"report\":",
                 b->n ? "," : "[", b->n + 1, c->id, now_ms, c->hash, tm_role_name(c->role), lo, hi);
    if (n < 0 || (size_t)n >= sizeof(head) || b->text.len + (size_t)n + nr + ns + ng + 32 > HB_BYTES)
        return false;
    if (!tm_api_text_add(&b->text, head, (size_t)n) || !tm_api_text_add(&b->text, report, nr) ||
        !tm_api_text_add(&b->text, ",\"samples\":", 11) || !tm_api_text_add(&b->text, samples, ns) ||
        !tm_api_text_add(&b->text, ",\"gpus\":", 8) || !tm_api_text_add(&b->text, gpus, ng) || !tm_api_text_add(&b->text, "}", 1)) {
        b->text.len = len;
        if (b->text.p)
            b->text.p[len] = '\0';
        return false;
    }
    b->calls[b->n++] = c;
    return true;
}

void tm_api_heartbeat_batch_add(struct api_call *c, int64_t now_ms, const char *report,
                                const char *samples, const char *gpus)
{
    struct hb_batch *b = ((struct tm_api_route_states *)tm_api_route_state(c))->heartbeat;

    if (!batch_add(b, c, now_ms, report, samples, gpus)) {
        tm_api_authenticate(c);
        return;
    }
    if (b->inflight < HB_INFLIGHT)
        batch_send(b);
}
