/*
 * controller/api/logs.c: a job's output (docs/logs.md).
 *
 *   POST /v1/nodes/{id}/logs   the agent's batch of chunks, through the
 *                              group commit (tarmac_log_ingest_batch,
 *                              migrations/0024_log_ingest_batch.sql)
 *   GET  /v1/jobs/{id}/logs    the bytes as written, from an offset, with a
 *                              follow mode that waits for more
 *
 * Where the bytes live is the log store's business (log_store.h); the
 * offsets are the index's, always in PostgreSQL.  A refused batch stores
 * nothing and answers 409 naming the first refused chunk's field
 * ("chunks[2].offset") with the offset its stream expects, so the agent
 * resumes from there: nothing is stored twice, no gap is left unsaid.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>
#include <libpq-fe.h>

#include "controller/api/internal.h"
#include "controller/api/log_store.h"
#include "controller/api/request.h"
#include "controller/api/resources.h"
#include "controller/io/group_commit.h"
#include "controller/spec/log_chunks.h"
#include "core/err.h"
#include "core/log.h"
#include "core/text.h"

#define LOGS_MAX_CHUNK_DEFAULT 65536
#define LOGS_CAP_DEFAULT (INT64_C(64) << 20)
#define LOGS_FOLLOW_DEFAULT_MS 30000
/* Bytes one read answers at most: a client pages through the rest. */
#define LOGS_READ_MAX (4u << 20)
/* How often a follow looks for more. */
#define LOGS_FOLLOW_POLL_MS 300

/* Per server (the routes' state): the store, opened on first use
 * (logs.store), and the group commits of ingest
 * (controller/io/group_commit.h), NULL until first use: the index rows
 * with their bytes (an inline store), or for an object store the checks
 * before its put and the rows after. */
struct logs_state {
    struct tm_log_store *store;
    struct tm_gc *gc_inline, *gc_check, *gc_index;
};

static struct logs_state *logs_state(struct api_call *c)
{
    struct tm_api_route_states *s = tm_api_route_state(c);
    struct logs_state *ls;

    if (!s)
        return NULL;
    if (!s->logs)
        s->logs = calloc(1, sizeof(struct logs_state));
    ls = s->logs;
    if (ls && !ls->store && tm_log_store_open(tm_api_loop(c), tm_api_pool(c), tm_api_config(c), &ls->store) < 0)
        ls->store = NULL;
    return ls;
}

static struct tm_log_store *log_store(struct api_call *c)
{
    struct logs_state *ls = logs_state(c);

    return ls ? ls->store : NULL;
}

void tm_api_logs_state_free(void *state)
{
    struct logs_state *ls = state;

    if (!ls)
        return;
    tm_gc_free(ls->gc_inline);
    tm_gc_free(ls->gc_check);
    tm_gc_free(ls->gc_index);
    tm_log_store_free(ls->store);
    free(ls);
}

/* ---- ingest ---------------------------------------------------------------- */

/* The batches of every node that arrive while earlier ones are in flight
 * go in one statement and one transaction, each in its own savepoint
 * (tarmac_log_ingest_batch, migrations/0024_log_ingest_batch.sql).
 * Columns: the item's ordinal, the chunk (-1: one the cap dropped), its
 * stream, next_offset, the field and message of a refusal, dropped_off,
 * and err_state of an item that failed. */
#define INGEST_COLS "SELECT i, k, job_id, attempt, rank, next_offset, field, message, dropped_off, err_state"

/* Two batches in flight, as for submissions: both of a small machine's
 * cores on inserts while the next batch fills, and the rest of serve's
 * pool left to the tick and the other routes (an agent's batch waits, a
 * tick must not).  At most 16 items (within PostgreSQL's 64 cached
 * subtransactions, a savepoint an item) and 1 MiB: a batch of output is
 * heavy, and one sent is let finish (min_flight_ms) rather than thrown
 * away at its oldest item's deadline, so the batches in flight when the
 * tick's gate is raised (yields) are what the tick waits out: small ones
 * finish sooner.  Past max_waiting full batches (20 MiB) an agent is told
 * to retry later, so the output serve holds is bounded. */
static const struct tm_gc_kind ingest_inline_kind = {
    .name = "log_inline",
    .sql = INGEST_COLS " FROM tarmac_log_ingest_batch($1::jsonb, $2::bytea, false)",
    .format = TM_GC_JSON,
    .nparams = 1,
    .max_items = 16,
    .max_bytes = 1u << 20,
    .max_inflight = 2,
    .max_waiting = 20,
    .blob = true,
    .min_flight_ms = 30000,
    .yields = true,
};

/* An object store's: the checks first, so that a chunk the index refuses
 * never reaches the bucket; then, once the bytes are there, the rows. */
static const struct tm_gc_kind ingest_check_kind = {
    .name = "log_check",
    .sql = INGEST_COLS " FROM tarmac_log_ingest_batch($1::jsonb, NULL, true)",
    .format = TM_GC_JSON,
    .nparams = 1,
    .max_items = 32,
    .max_bytes = 1u << 20,
    .max_inflight = 2,
    .max_waiting = 4,
    .min_flight_ms = 30000,
    .yields = true,
};

static const struct tm_gc_kind ingest_index_kind = {
    .name = "log_index",
    .sql = INGEST_COLS " FROM tarmac_log_ingest_batch($1::jsonb, NULL, false)",
    .format = TM_GC_JSON,
    .nparams = 1,
    .max_items = 32,
    .max_bytes = 1u << 20,
    .max_inflight = 2,
    .max_waiting = 4,
    .min_flight_ms = 30000,
    .yields = true,
};

enum { COL_I, COL_K, COL_JOB, COL_ATTEMPT, COL_RANK, COL_NEXT, COL_FIELD, COL_MESSAGE, COL_DROPPED, COL_ERR };

struct ingest {
    struct api_call *c;
    struct logs_state *ls;
    struct tm_log_store *store;
    struct tm_log_batch b;
    char *item;            /* the group commit's JSON item: node, now, cap, chunks */
    struct tm_log_key *dropped;
    size_t ndropped;
};

static void ingest_free(struct ingest *in)
{
    tm_log_batch_release(&in->b);
    free(in->item);
    free(in->dropped);
    free(in);
}

/* {"node":N,"now":MS,"cap":BYTES,"chunks":[[job,attempt,rank,offset,len],...]} */
static char *ingest_item(struct api_call *c, const struct tm_log_batch *b)
{
    const struct tm_config *cfg = tm_api_config(c);
    struct tm_text t = {0};
    char head[160];
    int n = snprintf(head, sizeof(head), "{\"node\":%" PRId64 ",\"now\":%" PRId64 ",\"cap\":%" PRId64 ",\"chunks\":[",
                     c->id, tm_api_now_ms(c), cfg ? cfg->logs.max_bytes_per_job : LOGS_CAP_DEFAULT);
    bool ok = n > 0 && (size_t)n < sizeof(head) && tm_text_add(&t, head, (size_t)n);

    for (size_t i = 0; ok && i < b->n; i++) {
        const struct tm_log_chunk_in *k = &b->chunks[i];
        n = snprintf(head, sizeof(head), "%s[%" PRId64 ",%" PRId64 ",%" PRId64 ",%" PRId64 ",%zu]", i ? "," : "",
                     k->job, k->attempt, k->rank, k->offset, k->len);
        ok = n > 0 && (size_t)n < sizeof(head) && tm_text_add(&t, head, (size_t)n);
    }
    ok = ok && tm_text_add(&t, "]}", 2);
    if (!ok) {
        free(t.p);
        return NULL;
    }
    return t.p;
}

/* Add in's item (and bytes) to the group commit of kind, made on first
 * use, bounded by the call's deadline. */
static int ingest_add(struct ingest *in, struct tm_gc **slot, const struct tm_gc_kind *kind, const void *bytes,
                      size_t n, tm_gc_cb cb)
{
    const char *values[] = {in->item};

    if (!*slot) {
        if (!(*slot = tm_gc_new(tm_api_loop(in->c), tm_api_pool(in->c), kind)))
            return TM_ENOMEM;
        tm_gc_set_gate(*slot, tm_api_gc_gate(in->c));
    }
    return tm_gc_add_blob(*slot, values, bytes, n, uv_now(tm_api_loop(in->c)) + tm_api_time_left(in->c), cb, in);
}

/* A batch that could not be queued: nothing of it was stored. */
static void ingest_refuse_queue(struct ingest *in, int r)
{
    struct api_call *c = in->c;

    ingest_free(in);
    if (r == -EAGAIN)
        tm_api_fail(c, 503, NULL, "the controller is busy storing output; retry later");
    else
        tm_api_fail(c, 503, NULL, "out of memory; try again");
}

/* The start of every ingest callback: false (the call answered or freed,
 * in freed) unless the item has rows to read or, row -1, none. */
static bool ingest_result_ok(struct ingest *in, const struct tm_gc_result *r)
{
    struct api_call *c = in->c;

    if (!c->req) {
        tm_api_call_free(c);
        ingest_free(in);
        return false;
    }
    if (r->status < 0) {
        /* A batch refused whole stored nothing; a failure in flight may
         * have stored it, and the agent's resend is then told the next
         * offset: retry later, either way. */
        struct tm_pg_reply rep = {.status = r->status == TM_EDB || r->status == TM_ENOMEM ? -ECONNRESET
                                                                                          : r->status};
        if (r->status == TM_EDB)
            tm_log_warn("could not store log chunks", "node=%" PRId64 " err=\"%s\"", c->id,
                        r->reply && r->reply->error ? r->reply->error : "-");
        ingest_free(in);
        tm_api_fail_db(c, &rep);
        return false;
    }
    if (r->row >= 0 && !PQgetisnull(r->res, r->row, COL_ERR)) {
        tm_log_warn("could not store log chunks", "node=%" PRId64 " sqlstate=%s err=\"%s\"", c->id,
                    PQgetvalue(r->res, r->row, COL_ERR), PQgetvalue(r->res, r->row, COL_MESSAGE));
        ingest_free(in);
        tm_api_fail(c, 503, NULL, "the controller could not store the chunks; retry later");
        return false;
    }
    return true;
}

/* A refused item: 404 for the node or a job that is none, else 409 naming
 * the chunk's field with the offset its stream expects; in is freed and
 * the call answered.  false when the row is no refusal. */
static bool ingest_refused(struct ingest *in, PGresult *res, int row)
{
    struct api_call *c = in->c;
    char field[64], body[512];
    cJSON *o;
    char *text = NULL;
    int status = 409;

    if (PQgetisnull(res, row, COL_FIELD))
        return false;
    if (strcmp(PQgetvalue(res, row, COL_FIELD), "node") == 0) {
        ingest_free(in);
        tm_api_fail(c, 404, NULL, "no such node");
        return true;
    }
    snprintf(field, sizeof(field), "chunks[%s].%s", PQgetvalue(res, row, COL_K), PQgetvalue(res, row, COL_FIELD));
    if (strcmp(PQgetvalue(res, row, COL_MESSAGE), "no such job") == 0)
        status = 404;
    o = cJSON_CreateObject();
    if (o && cJSON_AddStringToObject(o, "error", PQgetvalue(res, row, COL_MESSAGE)) &&
        cJSON_AddStringToObject(o, "field", field) &&
        cJSON_AddNumberToObject(o, "next_offset", strtod(PQgetvalue(res, row, COL_NEXT), NULL)))
        text = cJSON_PrintUnformatted(o);
    cJSON_Delete(o);
    ingest_free(in);
    if (!text) {
        tm_api_fail(c, 503, NULL, "out of memory; try again");
        return true;
    }
    snprintf(body, sizeof(body), "%s", text);
    free(text);
    tm_api_reply(c, status, body, strlen(body));
    return true;
}

static void on_forgotten(int status, const char *message, void *data)
{
    struct ingest *in = data;

    if (status < 0)
        tm_log_warn("could not delete the bytes of log chunks past the cap", "store=%s chunks=%zu err=\"%s\"",
                    in->store->ops->name, in->ndropped, message ? message : tm_strerror(status));
    ingest_free(in);
}

/* The index rows committed (or the item was refused): answer, then let an
 * object store delete the bytes the cap dropped. */
static void on_ingest(const struct tm_gc_result *r, void *data)
{
    struct ingest *in = data;
    struct api_call *c = in->c;
    struct tm_text out = {0};
    bool ok;

    if (!ingest_result_ok(in, r))
        return;
    if (r->row < 0) {
        /* Every item has a row: none means the statement went wrong. */
        ingest_free(in);
        tm_api_fail(c, 503, NULL, "the controller could not store the chunks; retry later");
        return;
    }
    if (ingest_refused(in, r->res, r->row))
        return;
    in->dropped = calloc((size_t)(unsigned)r->nrows, sizeof(*in->dropped));
    ok = tm_text_add(&out, "{\"chunks\":[", 11);
    for (int row = r->row; ok && row < r->row + r->nrows; row++) {
        char line[192];
        int n;
        if (strcmp(PQgetvalue(r->res, row, COL_K), "-1") == 0) {
            if (in->dropped)
                in->dropped[in->ndropped++] = (struct tm_log_key){
                    strtoll(PQgetvalue(r->res, row, COL_JOB), NULL, 10),
                    (int32_t)strtol(PQgetvalue(r->res, row, COL_ATTEMPT), NULL, 10),
                    (int32_t)strtol(PQgetvalue(r->res, row, COL_RANK), NULL, 10),
                    strtoll(PQgetvalue(r->res, row, COL_DROPPED), NULL, 10)};
            continue;
        }
        n = snprintf(line, sizeof(line), "%s{\"job\":%s,\"attempt\":%s,\"rank\":%s,\"next_offset\":%s}",
                     out.p[out.len - 1] == '[' ? "" : ",", PQgetvalue(r->res, row, COL_JOB),
                     PQgetvalue(r->res, row, COL_ATTEMPT), PQgetvalue(r->res, row, COL_RANK),
                     PQgetvalue(r->res, row, COL_NEXT));
        ok = tm_text_add(&out, line, (size_t)n);
    }
    ok = ok && tm_text_add(&out, "]}", 2);
    in->c = NULL;
    if (ok)
        tm_api_reply(c, 200, out.p, out.len);
    else
        tm_api_fail(c, 503, NULL, "out of memory; try again");
    free(out.p);
    if (in->ndropped && !in->store->ops->inline_bytes && in->store->ops->forget &&
        in->store->ops->forget(in->store, in->dropped, in->ndropped, on_forgotten, in) == 0)
        return;
    ingest_free(in);
}

static void on_put(int status, const char *message, void *data)
{
    struct ingest *in = data;
    int r;

    if (!in->c->req) {
        tm_api_call_free(in->c);
        ingest_free(in);
        return;
    }
    if (status < 0) {
        tm_log_warn("could not store log chunks", "store=%s node=%" PRId64 " err=\"%s\"", in->store->ops->name,
                    in->c->id, message ? message : tm_strerror(status));
        tm_api_fail(in->c, 503, NULL, "the log store did not take the chunks; retry later");
        ingest_free(in);
        return;
    }
    r = ingest_add(in, &in->ls->gc_index, &ingest_index_kind, NULL, 0, on_ingest);
    if (r < 0)
        ingest_refuse_queue(in, r);
}

/* An object store's checks came back: if they passed, its bytes, before
 * the index rows that name them. */
static void on_checked(const struct tm_gc_result *r, void *data)
{
    struct ingest *in = data;
    struct api_call *c = in->c;
    struct tm_log_piece *p;
    int rc;

    if (!ingest_result_ok(in, r))
        return;
    if (r->row >= 0 && ingest_refused(in, r->res, r->row))
        return;
    p = calloc(in->b.n, sizeof(*p));
    if (!p || tm_log_batch_decode(&in->b) < 0) {
        free(p);
        ingest_free(in);
        tm_api_fail(c, 503, NULL, "out of memory; try again");
        return;
    }
    for (size_t i = 0; i < in->b.n; i++)
        p[i] = (struct tm_log_piece){{in->b.chunks[i].job, (int32_t)in->b.chunks[i].attempt,
                                      (int32_t)in->b.chunks[i].rank, in->b.chunks[i].offset},
                                     in->b.chunks[i].data, in->b.chunks[i].len};
    rc = in->store->ops->put(in->store, p, in->b.n, on_put, in);
    free(p);
    if (rc < 0) {
        ingest_free(in);
        tm_api_fail(c, 503, NULL, "the log store did not take the chunks; retry later");
    }
}

void tm_api_logs_ingest(struct api_call *c)
{
    const struct tm_config *cfg = tm_api_config(c);
    struct tm_spec_error err = {0};
    struct ingest *in;
    const char *body;
    size_t len;
    bool too_large = false;
    int r;

    if (!tm_api_body(c, &body, &len)) {
        tm_api_call_free(c);
        return;
    }
    in = calloc(1, sizeof(*in));
    if (!in) {
        tm_api_fail(c, 503, NULL, "out of memory; try again");
        return;
    }
    r = tm_log_batch_parse(body, len, cfg ? (size_t)cfg->logs.max_chunk : LOGS_MAX_CHUNK_DEFAULT, &in->b,
                           &too_large, &err);
    if (r < 0) {
        free(in);
        /* A chunk over logs.max_chunk is a 400 like a body over the
         * server's limit (the core turns every 413 into that answer). */
        (void)too_large;
        tm_api_fail_spec(c, &err);
        return;
    }
    in->c = c;
    in->ls = logs_state(c);
    in->store = in->ls ? in->ls->store : NULL;
    in->item = in->store ? ingest_item(c, &in->b) : NULL;
    if (!in->item) {
        const char *why = in->store ? "out of memory; try again" : "the log store is not available";
        ingest_free(in);
        tm_api_fail(c, 503, NULL, why);
        return;
    }
    if (!in->store->ops->inline_bytes) {
        r = ingest_add(in, &in->ls->gc_check, &ingest_check_kind, NULL, 0, on_checked);
    } else if (tm_log_batch_decode(&in->b) < 0) {
        r = TM_ENOMEM;
    } else {
        /* The bytes go to PostgreSQL as bytes.  The group commit copied
         * them: the body's tree and the decoded copy can go now. */
        r = ingest_add(in, &in->ls->gc_inline, &ingest_inline_kind, in->b.bytes, in->b.nbytes, on_ingest);
        if (r == 0)
            tm_log_batch_release(&in->b);
    }
    if (r < 0)
        ingest_refuse_queue(in, r);
}

/* ---- read ------------------------------------------------------------------ */

struct piece {
    int64_t off;
    size_t len;
    unsigned char *data;   /* NULL until fetched from an object store */
};

struct reader {
    uv_timer_t timer;      /* first: the close callback frees the reader */
    struct api_call *c;
    struct tm_log_store *store;
    int64_t attempt;       /* 0: the latest */
    int64_t rank;
    int64_t offset;        /* -1: from tail */
    int64_t tail;          /* -1: none */
    bool follow;
    uint64_t follow_until;
    bool timer_open;
    /* The answer being built. */
    struct piece *pieces;
    size_t npieces, next_get;
    int64_t from, next_offset, dropped;
    int64_t attempt_seen;
    bool ended;
};

static void reader_closed(uv_handle_t *h)
{
    free(h->data);
}

static void reader_pieces_free(struct reader *rd)
{
    for (size_t i = 0; i < rd->npieces; i++)
        free(rd->pieces[i].data);
    free(rd->pieces);
    rd->pieces = NULL;
    rd->npieces = rd->next_get = 0;
}

static void reader_free(struct reader *rd)
{
    reader_pieces_free(rd);
    if (rd->timer_open) {
        rd->timer.data = rd;
        uv_close((uv_handle_t *)&rd->timer, reader_closed);
    } else {
        free(rd);
    }
}

static void reader_query(struct reader *rd);

static void reader_answer(struct reader *rd, bool follow_limit)
{
    struct api_call *c = rd->c;
    struct tm_text out = {0};
    int64_t pos = rd->from, end = rd->from;
    char next[24], dropped[24], attempt[24];
    bool ok = true;

    for (size_t i = 0; ok && i < rd->npieces; i++) {
        const struct piece *p = &rd->pieces[i];
        int64_t skip;
        if (p->off > pos) {
            char marker[160];
            int n = snprintf(marker, sizeof(marker),
                             "\n[tarmac: %" PRId64 " bytes dropped here: the output passed logs.max_bytes_per_job]\n",
                             p->off - pos);
            ok = tm_text_add(&out, marker, (size_t)n);
            pos = p->off;
        }
        skip = pos - p->off;
        if (ok && skip < (int64_t)p->len)
            ok = tm_text_add(&out, (const char *)p->data + skip, p->len - (size_t)skip);
        pos = p->off + (int64_t)p->len;
        end = pos;
    }
    if (!ok) {
        free(out.p);
        tm_api_fail(c, 503, NULL, "out of memory; try again");
        reader_free(rd);
        return;
    }
    fmt_i64(next, sizeof(next), end);
    fmt_i64(dropped, sizeof(dropped), rd->dropped);
    fmt_i64(attempt, sizeof(attempt), rd->attempt_seen);
    const char *headers[] = {
        "x-tarmac-next-offset", next,
        "x-tarmac-attempt", attempt,
        "x-tarmac-dropped-bytes", dropped,
        "x-tarmac-log-end", rd->ended && end >= rd->next_offset ? "true" : "false",
        "x-tarmac-follow", follow_limit ? "limit" : "done",
    };
    tm_api_reply_bytes(c, 200, "application/octet-stream", out.p ? out.p : "", out.len, headers,
                       rd->follow ? 5 : 4);
    free(out.p);
    rd->c = NULL;
    reader_free(rd);
}

static void on_timer(uv_timer_t *t)
{
    struct reader *rd = t->data;

    if (!rd->c->req) {
        tm_api_call_free(rd->c);
        rd->c = NULL;
        reader_free(rd);
        return;
    }
    if (tm_api_closing(rd->c) || uv_now(tm_api_loop(rd->c)) >= rd->follow_until) {
        reader_answer(rd, true);
        return;
    }
    reader_query(rd);
}

static void get_next(struct reader *rd);

static void on_got(int status, const char *message, const unsigned char *bytes, size_t len, void *data)
{
    struct reader *rd = data;
    struct piece *p = &rd->pieces[rd->next_get];

    if (!rd->c->req) {
        tm_api_call_free(rd->c);
        rd->c = NULL;
        reader_free(rd);
        return;
    }
    if (status < 0 || len != p->len) {
        tm_log_warn("could not read log chunk bytes", "store=%s err=\"%s\"", rd->store->ops->name,
                    status < 0 ? (message ? message : tm_strerror(status)) : "length differs from the index");
        tm_api_fail(rd->c, 503, NULL, "the log store did not answer; retry later");
        rd->c = NULL;
        reader_free(rd);
        return;
    }
    p->data = malloc(len ? len : 1);
    if (!p->data) {
        tm_api_fail(rd->c, 503, NULL, "out of memory; try again");
        rd->c = NULL;
        reader_free(rd);
        return;
    }
    memcpy(p->data, bytes, len);
    rd->next_get++;
    get_next(rd);
}

/* Fetch the bytes an object store holds, one chunk after another. */
static void get_next(struct reader *rd)
{
    while (rd->next_get < rd->npieces && rd->pieces[rd->next_get].data)
        rd->next_get++;
    if (rd->next_get == rd->npieces) {
        reader_answer(rd, false);
        return;
    }
    {
        struct piece *p = &rd->pieces[rd->next_get];
        struct tm_log_key key = {rd->c->id, (int32_t)rd->attempt_seen, (int32_t)rd->rank, p->off};
        if (!rd->store || !rd->store->ops->get ||
            rd->store->ops->get(rd->store, &key, p->len, on_got, rd) < 0) {
            tm_api_fail(rd->c, 503, NULL, "the log store did not answer; retry later");
            rd->c = NULL;
            reader_free(rd);
        }
    }
}

/* Columns: team, state, attempts, nodes, the attempt read, the stream's
 * next_offset and dropped_bytes (NULL: nothing shipped yet), the offset
 * read from, then one row per chunk (off, len, data) or one row of NULLs. */
static const char read_sql[] =
    "WITH j AS (SELECT id, team, state, attempts, nodes, coalesce($2::int, attempts) AS att"
    "   FROM jobs WHERE id = $1),"
    " s AS (SELECT t.* FROM job_log_streams t, j"
    "   WHERE t.job_id = j.id AND t.attempt = j.att AND t.rank = $3::int),"
    " o AS (SELECT CASE WHEN $5::bigint IS NOT NULL"
    "   THEN greatest(0, coalesce((SELECT next_offset FROM s), 0) - $5::bigint) ELSE $4::bigint END AS off)"
    " SELECT j.team, j.state, j.attempts, j.nodes, j.att, (SELECT next_offset FROM s),"
    "  (SELECT dropped_bytes FROM s), (SELECT off FROM o), k.off, k.len, k.data"
    " FROM j LEFT JOIN LATERAL (SELECT c.off, c.len, c.data FROM job_log_chunks c, s"
    "   WHERE c.job_id = s.job_id AND c.attempt = s.attempt AND c.rank = s.rank"
    "     AND c.off + c.len > (SELECT off FROM o) ORDER BY c.off LIMIT $6) k ON true"
    " ORDER BY k.off";

static void on_read(const struct tm_pg_reply *reply, void *data)
{
    struct reader *rd = data;
    struct api_call *c = rd->c;
    PGresult *res;
    int rows;
    int64_t attempts, nodes, next;
    char msg[192];

    if (!tm_api_reply_ok(c, reply)) {
        rd->c = NULL;
        reader_free(rd);
        return;
    }
    res = reply->results[0];
    rows = PQntuples(res);
    /* Another team's job is, to an engineer, no job at all. */
    if (rows == 0 || (c->role == TM_ROLE_ENGINEER && strcmp(PQgetvalue(res, 0, 0), c->team) != 0)) {
        tm_api_fail(c, 404, NULL, "no such job");
        rd->c = NULL;
        reader_free(rd);
        return;
    }
    attempts = strtoll(PQgetvalue(res, 0, 2), NULL, 10);
    nodes = strtoll(PQgetvalue(res, 0, 3), NULL, 10);
    rd->attempt_seen = strtoll(PQgetvalue(res, 0, 4), NULL, 10);
    if (attempts == 0) {
        tm_api_fail(c, 404, "attempt", "the job has not run yet: it has no output");
        rd->c = NULL;
        reader_free(rd);
        return;
    }
    if (rd->attempt_seen > attempts) {
        snprintf(msg, sizeof(msg), "the job has run %" PRId64 " attempt(s) so far", attempts);
        tm_api_fail(c, 404, "attempt", msg);
        rd->c = NULL;
        reader_free(rd);
        return;
    }
    if (rd->rank >= nodes) {
        snprintf(msg, sizeof(msg), "the job runs on %" PRId64 " node(s): ranks 0 to %" PRId64, nodes, nodes - 1);
        tm_api_fail(c, 404, "rank", msg);
        rd->c = NULL;
        reader_free(rd);
        return;
    }
    next = PQgetisnull(res, 0, 5) ? 0 : strtoll(PQgetvalue(res, 0, 5), NULL, 10);
    rd->next_offset = next;
    rd->dropped = PQgetisnull(res, 0, 6) ? 0 : strtoll(PQgetvalue(res, 0, 6), NULL, 10);
    rd->from = strtoll(PQgetvalue(res, 0, 7), NULL, 10);
    rd->ended = rd->attempt_seen < attempts || strcmp(PQgetvalue(res, 0, 1), "running") != 0;
    if (rd->from > next) {
        snprintf(msg, sizeof(msg), "past the end of the output stored so far (%" PRId64 " bytes)", next);
        tm_api_fail(c, 400, "offset", msg);
        rd->c = NULL;
        reader_free(rd);
        return;
    }
    if (PQgetisnull(res, 0, 8)) {
        /* Nothing past the offset yet: a follow waits for more, unless the
         * attempt has ended (nothing more will come). */
        if (rd->follow && !rd->ended) {
            /* The next look starts where this one did (tail resolved). */
            rd->offset = rd->from;
            rd->tail = -1;
            if (!rd->timer_open) {
                uv_timer_init(tm_api_loop(c), &rd->timer);
                rd->timer.data = rd;
                rd->timer_open = true;
            }
            uv_timer_start(&rd->timer, on_timer, LOGS_FOLLOW_POLL_MS, 0);
            return;
        }
        reader_answer(rd, false);
        return;
    }
    rd->pieces = calloc((size_t)(unsigned)rows, sizeof(*rd->pieces));
    if (!rd->pieces) {
        tm_api_fail(c, 503, NULL, "out of memory; try again");
        rd->c = NULL;
        reader_free(rd);
        return;
    }
    for (int r = 0; r < rows; r++) {
        struct piece *p = &rd->pieces[rd->npieces++];
        p->off = strtoll(PQgetvalue(res, r, 8), NULL, 10);
        p->len = (size_t)strtoll(PQgetvalue(res, r, 9), NULL, 10);
        if (!PQgetisnull(res, r, 10)) {
            size_t n = 0;
            unsigned char *b = PQunescapeBytea((const unsigned char *)PQgetvalue(res, r, 10), &n);
            p->data = b && n == p->len ? malloc(n ? n : 1) : NULL;
            if (p->data)
                memcpy(p->data, b, n);
            if (b)
                PQfreemem(b);
            if (!p->data) {
                tm_api_fail(c, 503, NULL, "could not read the stored output; retry later");
                rd->c = NULL;
                reader_free(rd);
                return;
            }
        }
    }
    get_next(rd);
}

static void reader_query(struct reader *rd)
{
    const struct tm_config *cfg = tm_api_config(rd->c);
    int64_t max_chunk = cfg ? cfg->logs.max_chunk : LOGS_MAX_CHUNK_DEFAULT;
    char id[24], attempt[24], rank[24], offset[24], tail[24], limit[24];

    fmt_i64(id, sizeof(id), rd->c->id);
    fmt_i64(attempt, sizeof(attempt), rd->attempt);
    fmt_i64(rank, sizeof(rank), rd->rank);
    fmt_i64(offset, sizeof(offset), rd->offset);
    fmt_i64(tail, sizeof(tail), rd->tail);
    fmt_i64(limit, sizeof(limit), (int64_t)LOGS_READ_MAX / max_chunk > 0 ? (int64_t)LOGS_READ_MAX / max_chunk : 1);
    reader_pieces_free(rd);
    /* A follow's statements are bounded by the request timeout each. */
    if (rd->follow)
        tm_api_hold(rd->c, tm_api_config(rd->c) && tm_api_config(rd->c)->api.request_timeout_ms > 0
                               ? (uint64_t)tm_api_config(rd->c)->api.request_timeout_ms
                               : 5000);
    const char *params[] = {id, rd->attempt > 0 ? attempt : NULL, rank, rd->offset >= 0 ? offset : "0",
                            rd->tail >= 0 ? tail : NULL, limit};
    /* Not tm_api_query(): its callback gets the call, this one the reader. */
    if (tm_api_time_left(rd->c) == 0 ||
        tm_pg_pool_query_until(tm_api_pool(rd->c), read_sql, 6, params, tm_api_time_left(rd->c), on_read, rd) < 0) {
        tm_api_fail(rd->c, 503, NULL, "database unavailable");
        rd->c = NULL;
        reader_free(rd);
    }
}

static bool qp_whole(const struct api_qp *qp, int64_t min, int64_t max, int64_t *ret)
{
    char *end;
    long long v;

    if (!qp->value[0] || qp->value[0] == '-' || qp->value[0] == '+')
        return false;
    v = strtoll(qp->value, &end, 10);
    if (*end || v < min || v > max)
        return false;
    *ret = v;
    return true;
}

void tm_api_logs_read(struct api_call *c)
{
    struct api_qp qp[] = {{.name = "attempt"}, {.name = "rank"}, {.name = "offset"}, {.name = "tail"},
                          {.name = "follow"}};
    struct tm_spec_error err = {0};
    const struct tm_config *cfg = tm_api_config(c);
    struct reader *rd;
    int r = tm_api_parse_query(c, qp, 5, &err);

    if (r == TM_ECANCELED) {
        tm_api_call_free(c);
        return;
    }
    rd = calloc(1, sizeof(*rd));
    if (!rd) {
        tm_api_fail(c, 503, NULL, "out of memory; try again");
        return;
    }
    rd->offset = 0;
    rd->tail = -1;
    if (r == 0 && qp[0].set && !qp_whole(&qp[0], 1, INT32_MAX, &rd->attempt))
        r = tm_spec_fail(&err, "attempt", "must be a positive whole number");
    if (r == 0 && qp[1].set && !qp_whole(&qp[1], 0, 1023, &rd->rank))
        r = tm_spec_fail(&err, "rank", "must be a whole number from 0 to 1023");
    if (r == 0 && qp[2].set && !qp_whole(&qp[2], 0, INT64_C(1) << 50, &rd->offset))
        r = tm_spec_fail(&err, "offset", "must be a whole number of bytes from 0");
    if (r == 0 && qp[3].set && !qp_whole(&qp[3], 0, INT64_C(1) << 50, &rd->tail))
        r = tm_spec_fail(&err, "tail", "must be a whole number of bytes from 0");
    if (r == 0 && qp[2].set && qp[3].set)
        r = tm_spec_fail(&err, "tail", "give offset or tail, not both");
    if (r == 0 && qp[4].set) {
        if (strcmp(qp[4].value, "true") == 0)
            rd->follow = true;
        else if (strcmp(qp[4].value, "false") != 0)
            r = tm_spec_fail(&err, "follow", "must be true or false");
    }
    if (r < 0) {
        free(rd);
        tm_api_fail_spec(c, &err);
        return;
    }
    if (rd->tail >= 0)
        rd->offset = -1;
    rd->c = c;
    rd->store = log_store(c);
    rd->follow_until = uv_now(tm_api_loop(c)) +
                       (uint64_t)(cfg && cfg->logs.follow_limit_ms > 0 ? cfg->logs.follow_limit_ms
                                                                        : LOGS_FOLLOW_DEFAULT_MS);
    reader_query(rd);
}
