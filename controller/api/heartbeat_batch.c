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
 * per item with the columns of nodes.c's single statement.  The batching
 * itself is the group commit's (controller/io/group_commit.h): under load
 * heartbeats share statements, with none there is no wait; when every
 * batch that may wait is full, newcomers go the normal way.
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

static const char batch_sql[] =
    "SELECT i, tok_ok, state, bad, gpus, answer, err_state, err_message"
    " FROM tarmac_heartbeat_batch($1::jsonb)";

static const struct tm_gc_kind heartbeat_kind = {
    .name = "heartbeat",
    .sql = batch_sql,
    .format = TM_GC_JSON,
    .nparams = 1,
    /* 64 items: one savepoint each stays within PostgreSQL's per-backend
     * cache of 64 subtransactions (past it every snapshot gets slower). */
    .max_items = 64,
    .max_bytes = 4u << 20,
    /* As the submissions': two in flight keep a small machine's cores
     * busy while the next one fills, and leave the rest of serve's pool to
     * the tick and the other routes. */
    .max_inflight = 2,
    .max_waiting = 2,
};

struct hb_state {
    struct tm_gc *gc;
    struct tm_text item; /* the item being built, reused */
};

void *tm_api_heartbeat_state_new(void)
{
    return calloc(1, sizeof(struct hb_state));
}

void tm_api_heartbeat_state_free(void *state)
{
    struct hb_state *s = state;

    if (!s)
        return;
    tm_gc_free(s->gc);
    free(s->item.p);
    free(s);
}

/* Column k of row r, NULL when SQL NULL. */
static const char *col(PGresult *res, int r, int k)
{
    return PQgetisnull(res, r, k) ? NULL : PQgetvalue(res, r, k);
}

static void answer_row(struct api_call *c, PGresult *res, int r)
{
    const char *err = col(res, r, 6), *tok = col(res, r, 1);

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

static void on_committed(const struct tm_gc_result *r, void *data)
{
    struct api_call *c = data;

    if (r->status != 0)
        tm_api_samples_give_back(c);
    if (!c->req) {
        tm_api_call_free(c);
    } else if (r->status == 0 && r->row >= 0) {
        answer_row(c, r->res, r->row);
    } else if (r->status == 0 || r->status == TM_EDB) {
        /* No row (refused as a whole): the normal path answers. */
        tm_api_authenticate(c);
    } else if (!r->sent || r->status == TM_ENOMEM) {
        tm_api_fail(c, 503, NULL, "database unavailable");
    } else {
        tm_api_fail_db(c, r->reply);
    }
}

/* c's item in s->item: false when memory runs out. */
static bool build_item(struct hb_state *s, struct api_call *c, int64_t now_ms, const char *report,
                       const char *samples, const char *gpus)
{
    char head[320], lo[16], hi[16];
    int n;

    s->item.len = 0;
    tm_api_rendezvous_ports(c, lo, sizeof(lo), hi, sizeof(hi));
    /* The hash is hex and the role a fixed name: nothing to escape; the
     * rest is JSON as the parser wrote it. */
    n = snprintf(head, sizeof(head),
                 "{\"node\":%" PRId64 ",\"now\":%" PRId64
                 ",\"hash\":\"%s\",\"role\":\"%s\",\"port_lo\":%s,\"port_hi\":%s,\"report\":",
                 c->id, now_ms, c->hash, tm_role_name(c->role), lo, hi);
    return n > 0 && (size_t)n < sizeof(head) && tm_text_add(&s->item, head, (size_t)n) &&
           tm_text_add(&s->item, report, strlen(report)) &&
           tm_text_add(&s->item, ",\"samples\":", 11) &&
           tm_text_add(&s->item, samples, strlen(samples)) &&
           tm_text_add(&s->item, ",\"gpus\":", 8) && tm_text_add(&s->item, gpus, strlen(gpus)) &&
           tm_text_add(&s->item, "}", 1);
}

void tm_api_heartbeat_batch_add(struct api_call *c, int64_t now_ms, const char *report,
                                const char *samples, const char *gpus)
{
    struct hb_state *s = ((struct tm_api_route_states *)tm_api_route_state(c))->heartbeat;
    const char *values[1];

    if (!build_item(s, c, now_ms, report, samples, gpus)) {
        tm_api_authenticate(c);
        return;
    }
    values[0] = s->item.p;
    if (tm_api_group_add(c, &s->gc, &heartbeat_kind, values, on_committed) < 0)
        tm_api_authenticate(c);
}
