/*
 * controller/api/routes.c: the work of each API route (see
 * docs/openapi.yaml).  Every statement is parameterised; JSON answers are
 * built by PostgreSQL (json_build_object), so a row has one spelling
 * everywhere.  Writes are single statements (data-modifying CTEs or the
 * functions of migrations/0002_apply.sql), so each is one transaction and
 * writes its decision with it.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>
#include <libpq-fe.h>
#include <openssl/crypto.h>

#include "controller/api/dashboard.h"
#include "controller/api/internal.h"
#include "controller/api/metrics.h"
#include "controller/api/routes.h"
#include "controller/spec/api_body.h"
#include "controller/spec/job_fit.h"
#include "controller/spec/json_body.h"
#include "core/model.h"
#include "core/err.h"
#include "core/log.h"

#define JOB_JSON                                                                                   \
    "json_build_object('id', j.id, 'team', j.team, 'name', j.name, 'command', j.command,"         \
    " 'gpus', j.gpus, 'gpu_milli', j.gpu_milli, 'nodes', j.nodes, 'cpu_milli', j.cpu_milli,"      \
    " 'memory_mib', j.memory_mib, 'gpu_model', j.gpu_model, 'pool', j.pool, 'class', j.class,"    \
    " 'priority', j.priority, 'preemptible', j.preemptible, 'checkpointable', j.checkpointable,"  \
    " 'runtime_estimate_s', j.runtime_estimate_ms / 1000, 'deadline_ms', j.deadline_ms,"          \
    " 'state', j.state, 'state_reason', j.state_reason, 'attempts', j.attempts,"                  \
    " 'node_id', j.node_id, 'submitted_ms', j.submitted_ms, 'started_ms', j.started_ms,"          \
    " 'finished_ms', j.finished_ms)::text"

#define NODE_JSON                                                                                  \
    "json_build_object('id', n.id, 'pool', n.pool, 'instance_id', n.instance_id, 'zone', n.zone," \
    " 'instance_type', n.instance_type, 'gpus', n.gpus, 'gpu_model', n.gpu_model,"                \
    " 'cpu_milli', n.cpu_milli, 'memory_mib', n.memory_mib, 'capacity_type', n.capacity_type,"    \
    " 'state', n.state, 'state_reason', n.state_reason, 'cordoned', n.cordoned,"                  \
    " 'price_uusd_per_hour', n.price_uusd_per_hour, 'requested_ms', n.requested_ms,"              \
    " 'ready_ms', n.ready_ms, 'idle_since_ms', n.idle_since_ms, 'terminated_ms', n.terminated_ms,"\
    " 'last_heartbeat_ms', n.last_heartbeat_ms)::text"

#define POOL_JSON                                                                                  \
    "json_build_object('name', p.name, 'provider', p.provider, 'provider_kind', p.provider_kind," \
    " 'region', p.region, 'zones', p.zones, 'instance_types', p.instance_types,"                  \
    " 'gpu_model', p.gpu_model, 'gpus_per_node', p.gpus_per_node,"                                \
    " 'capacity_type', p.capacity_type, 'min_nodes', p.min_nodes, 'max_nodes', p.max_nodes,"      \
    " 'idle_grace_ms', p.idle_grace_ms, 'live_nodes', (SELECT count(*) FROM nodes x"              \
    "   WHERE x.pool = p.name AND x.state NOT IN ('terminated', 'interrupted')))::text"

#define DECISION_JSON                                                                              \
    "json_build_object('id', d.id, 'at_ms', d.at_ms, 'kind', d.kind,"                             \
    " 'subject_kind', d.subject_kind, 'subject_id', d.subject_id, 'reason', d.reason,"            \
    " 'inputs', d.inputs)::text"

#define DEFAULT_PAGE 100

static void fmt_i64(char *buf, size_t size, int64_t v)
{
    snprintf(buf, size, "%" PRId64, v);
}

/* The first row's first column as a JSON answer, or 404. */
static void reply_one(struct api_call *c, PGresult *res, int status, const char *what)
{
    if (PQntuples(res) < 1 || PQgetisnull(res, 0, 0)) {
        char msg[64];
        snprintf(msg, sizeof(msg), "no such %s", what);
        api_fail(c, 404, NULL, msg);
        return;
    }
    api_reply(c, status, PQgetvalue(res, 0, 0), (size_t)PQgetlength(res, 0, 0));
}

/* Rows of (id, json), one more than the page: {"items": [...],
 * "next_cursor": "<id>" | null}. */
static void reply_page(struct api_call *c, PGresult *res)
{
    int n = PQntuples(res);
    int shown = n > (int)c->limit ? (int)c->limit : n;
    size_t size = 64, len = 0;
    char *buf;

    for (int i = 0; i < shown; i++)
        size += (size_t)PQgetlength(res, i, 1) + 1;
    buf = malloc(size);
    if (!buf) {
        api_fail(c, 500, NULL, "out of memory");
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
    api_reply(c, 200, buf, len);
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

int api_parse_query(struct api_call *c, struct api_qp *qp, size_t nqp, struct tm_spec_error *err)
{
    const char *q, *end;
    size_t len;

    if (!api_query_string(c, &q, &len))
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

bool api_parse_pos(const char *s, int64_t max, int64_t *ret)
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
static int page_params(struct api_call *c, const struct api_qp *limit, const struct api_qp *cursor,
                       char *cursor_buf, size_t size, struct tm_spec_error *err)
{
    int64_t v;

    c->limit = DEFAULT_PAGE < api_max_list(c) ? DEFAULT_PAGE : api_max_list(c);
    if (limit->set) {
        if (!api_parse_pos(limit->value, api_max_list(c), &v))
            return tm_spec_fail(err, "limit", "must be a whole number from 1 to %u",
                                api_max_list(c));
        c->limit = (unsigned)v;
    }
    cursor_buf[0] = '\0';
    if (cursor->set) {
        if (!api_parse_pos(cursor->value, INT64_MAX, &v))
            return tm_spec_fail(err, "cursor", "must be a next_cursor value from a previous page");
        fmt_i64(cursor_buf, size, v);
    }
    return 0;
}

/* ---- health and readiness (/metrics: api/metrics.c) --------------------- */

static void r_healthz(struct api_call *c)
{
    static const char ok[] = "{\"status\":\"ok\"}";
    api_reply(c, 200, ok, sizeof(ok) - 1);
}

static void r_readyz(struct api_call *c)
{
    static const char ready[] = "{\"status\":\"ready\"}";

    if (api_closing(c)) {
        api_fail(c, 503, NULL, "shutting down");
    } else if (api_pool_connected(c) == 0) {
        api_fail(c, 503, NULL, "database unavailable");
    } else {
        api_reply(c, 200, ready, sizeof(ready) - 1);
    }
}

/* ---- jobs ----------------------------------------------------------------- */

#define SUBMIT_NPARAMS 17
static const char submit_sql[] =
    "WITH chk AS (SELECT"
    " (SELECT count(*) FROM pools WHERE $10::text IS NULL OR name = $10) AS pools,"
    " (SELECT count(*) FROM pools WHERE $9::text IS NULL"
    "   OR gpu_model = ANY (string_to_array($9, '|'))) AS models,"
    " (SELECT coalesce(max(gpus_per_node), 0) FROM pools WHERE ($10::text IS NULL OR name = $10)"
    "   AND ($9::text IS NULL OR gpu_model = ANY (string_to_array($9, '|')))) AS max_gpus,"
    " (SELECT coalesce(string_agg(DISTINCT gpu_model, ', '), '') FROM pools) AS known_models,"
    " (SELECT coalesce(string_agg(name, ', ' ORDER BY name), '') FROM pools) AS known_pools),"
    " ins AS (INSERT INTO jobs (team, name, command, gpus, gpu_milli, nodes, cpu_milli,"
    "   memory_mib, gpu_model, pool, class, priority, preemptible, checkpointable,"
    "   runtime_estimate_ms, deadline_ms, submitted_ms)"
    "  SELECT $1, $2, $3, $4::int, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14,"
    "   nullif($15::bigint, 0), nullif($16::bigint, 0), $17"
    "  FROM chk WHERE chk.pools > 0 AND chk.models > 0 AND $4::int <= chk.max_gpus"
    "  RETURNING *)"
    " SELECT (SELECT " JOB_JSON " FROM ins j), chk.pools, chk.models, chk.max_gpus,"
    " chk.known_models, chk.known_pools FROM chk";

struct submit_ctx {
    char gpus[16], pool[64], model[TM_JOB_MODEL_MAX + 1];
};

static void on_submit(const struct tm_pg_reply *reply, void *data)
{
    struct api_call *c = data;
    PGresult *res;
    char msg[192];

    if (!api_reply_ok(c, reply))
        return;
    res = reply->results[0];
    if (PQntuples(res) == 1 && !PQgetisnull(res, 0, 0)) {
        api_reply(c, 201, PQgetvalue(res, 0, 0), (size_t)PQgetlength(res, 0, 0));
        return;
    }
    /* The same checks and words as `tarmac submit`. */
    if (strcmp(PQgetvalue(res, 0, 1), "0") == 0) {
        snprintf(msg, sizeof(msg), "unknown pool (known: %s)", PQgetvalue(res, 0, 5));
        api_fail(c, 400, "pool", msg);
    } else if (strcmp(PQgetvalue(res, 0, 2), "0") == 0) {
        snprintf(msg, sizeof(msg), "no pool offers this GPU model (known: %s)",
                 PQgetvalue(res, 0, 4));
        api_fail(c, 400, "gpu_model", msg);
    } else {
        snprintf(msg, sizeof(msg), "more GPUs per node than any matching pool offers (%s)",
                 PQgetvalue(res, 0, 3));
        api_fail(c, 400, "gpus", msg);
    }
}

/* The statement's 17 parameters as text, in submit_sql's order; the
 * strings point into spec and s. */
struct submit_text {
    char gpus[16], milli[16], nodes[16], cpu[24], mem[24], prio[16], est[24], dl[24], now[24];
};

static void submit_params(const struct tm_job_spec *spec, int64_t now, struct submit_text *s,
                          const char *params[SUBMIT_NPARAMS])
{
    snprintf(s->gpus, sizeof(s->gpus), "%d", spec->gpus);
    snprintf(s->milli, sizeof(s->milli), "%d", spec->gpu_milli);
    snprintf(s->nodes, sizeof(s->nodes), "%d", spec->nodes);
    fmt_i64(s->cpu, sizeof(s->cpu), spec->cpu_milli);
    fmt_i64(s->mem, sizeof(s->mem), spec->memory_mib);
    snprintf(s->prio, sizeof(s->prio), "%d", spec->priority);
    fmt_i64(s->est, sizeof(s->est), spec->runtime_estimate_ms);
    fmt_i64(s->dl, sizeof(s->dl), spec->deadline_ms ? now + spec->deadline_ms : 0);
    fmt_i64(s->now, sizeof(s->now), now);
    const char *p[SUBMIT_NPARAMS] = {spec->team, spec->name, spec->command, s->gpus, s->milli,
                                     s->nodes, s->cpu, s->mem, spec->gpu_model, spec->pool,
                                     spec->klass, s->prio, spec->preemptible ? "t" : "f",
                                     spec->checkpointable ? "t" : "f", s->est, s->dl, s->now};
    memcpy(params, p, sizeof(p));
}

static void r_jobs_submit(struct api_call *c)
{
    struct tm_job_spec spec;
    struct tm_spec_error err = {0};
    cJSON *root = NULL;
    const char *body;
    size_t len;
    struct submit_text text;
    const char *params[SUBMIT_NPARAMS];

    if (!api_body(c, &body, &len)) {
        api_call_free(c);
        return;
    }
    if (tm_job_spec_parse_json(body, len, &spec, &root, &err) < 0) {
        api_fail_spec(c, &err);
        return;
    }
    if (c->role == TM_ROLE_ENGINEER && strcmp(spec.team, c->team) != 0) {
        cJSON_Delete(root);
        api_fail(c, 403, "team", "an engineer token submits for its own team only");
        return;
    }
    if (tm_job_fit_check(api_config(c), &spec, &err) < 0) {
        cJSON_Delete(root);
        api_fail_spec(c, &err);
        return;
    }
    submit_params(&spec, api_now_ms(c), &text, params);
    /* pg_uv copies the parameters: the document can go now. */
    api_query(c, submit_sql, SUBMIT_NPARAMS, params, on_submit);
    cJSON_Delete(root);
}

/*
 * The fast path of POST /v1/jobs: group commit.  A call whose token is in
 * api.c's authentication cache, whose body parses and whose checks pass
 * here (an engineer's team, the token's rate) becomes one row of a batch;
 * one statement inserts the whole batch (arrays of each column, unnest),
 * checking each row's token again (known, not revoked, same role and
 * team) and that some pool takes the job.  A batch is sent at once while
 * fewer than BATCH_INFLIGHT are in flight, else it fills until one comes
 * back, so under load rows share statements and with none there is no
 * wait.  Each row the statement did not insert, and every row of a batch
 * the database refused as a whole, goes back to the normal path
 * (api_authenticate, then r_jobs_submit), which gives that call exactly
 * the answer it would have had: 401, 403, 400 with its reason, or 201 if
 * the refusal was another row's.  Nothing of a refused row was written,
 * so running it again is safe.  A full batch sends its newcomers the
 * normal way.  The column buffers are reused (pg_uv copies parameters),
 * each bounded by BATCH_BYTES in all.  A refused row goes through
 * the token's rate bucket twice (here, then in the normal path).
 */
#define BATCH_COLS (SUBMIT_NPARAMS + 3)
#define BATCH_ROWS 256
#define BATCH_BYTES (4u << 20)
/* Two batches in flight keep both of a small machine's cores on inserts
 * while the next batch fills (bench/run-api.sh: 1, 2 and 3 measured, 2
 * best) and leave the rest of serve's pool (pool_size, default 4) to the
 * tick and the other routes. */
#define BATCH_INFLIGHT 2

struct bbuf {
    char *p;
    size_t len, cap;
};

struct api_batch {
    struct api_call *calls[BATCH_ROWS];
    unsigned n;
    unsigned inflight;
    size_t bytes;
    struct bbuf col[BATCH_COLS];
};

struct batch_flight {
    struct api_batch *b;
    unsigned n;
    struct api_call *calls[];
};

static const char batch_sql[] =
    "WITH r AS (SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::int[], $5::int[],"
    "   $6::int[], $7::bigint[], $8::bigint[], $9::text[], $10::text[], $11::text[], $12::int[],"
    "   $13::boolean[], $14::boolean[], $15::bigint[], $16::bigint[], $17::bigint[], $18::text[],"
    "   $19::text[], $20::text[])"
    "  WITH ORDINALITY AS r(team, name, command, gpus, gpu_milli, nodes, cpu_milli, memory_mib,"
    "   gpu_model, pool, class, priority, preemptible, checkpointable, est, dl, now, hash, role,"
    "   tteam, i)),"
    " ok AS (SELECT nextval('jobs_id_seq'::regclass) AS id, r.* FROM r"
    "  WHERE EXISTS (SELECT 1 FROM api_tokens t WHERE t.hash = r.hash AND NOT t.revoked"
    "    AND t.role = r.role AND coalesce(t.team, '') = r.tteam)"
    "  AND EXISTS (SELECT 1 FROM pools p WHERE (r.pool IS NULL OR p.name = r.pool)"
    "    AND (r.gpu_model IS NULL OR p.gpu_model = ANY (string_to_array(r.gpu_model, '|')))"
    "    AND r.gpus <= p.gpus_per_node)),"
    " ins AS (INSERT INTO jobs (id, team, name, command, gpus, gpu_milli, nodes, cpu_milli,"
    "   memory_mib, gpu_model, pool, class, priority, preemptible, checkpointable,"
    "   runtime_estimate_ms, deadline_ms, submitted_ms)"
    "  SELECT id, team, name, command, gpus, gpu_milli, nodes, cpu_milli, memory_mib, gpu_model,"
    "   pool, class, priority, preemptible, checkpointable, nullif(est, 0), nullif(dl, 0), now"
    "  FROM ok ORDER BY i RETURNING *)"
    " SELECT ok.i, " JOB_JSON " FROM ok JOIN ins j ON j.id = ok.id";

static void *api_batch_new(void)
{
    return calloc(1, sizeof(struct api_batch));
}

static void api_batch_free(void *state)
{
    struct api_batch *b = state;

    if (!b)
        return;
    for (unsigned i = 0; i < BATCH_COLS; i++)
        free(b->col[i].p);
    free(b);
}

static bool bbuf_add(struct bbuf *buf, const char *s, size_t n)
{
    if (buf->len + n + 2 > buf->cap) {
        size_t cap = buf->cap ? buf->cap : 1024;
        char *p;
        while (cap < buf->len + n + 2)
            cap *= 2;
        p = realloc(buf->p, cap);
        if (!p)
            return false;
        buf->p = p;
        buf->cap = cap;
    }
    memcpy(buf->p + buf->len, s, n);
    buf->len += n;
    buf->p[buf->len] = '\0';
    return true;
}

/* One array element: NULL, or the value quoted with '"' and '\' escaped. */
static bool bbuf_elem(struct bbuf *buf, const char *v)
{
    if (!bbuf_add(buf, buf->len ? "," : "{", 1))
        return false;
    if (!v)
        return bbuf_add(buf, "NULL", 4);
    if (!bbuf_add(buf, "\"", 1))
        return false;
    for (const char *s = v; *s;) {
        size_t n = strcspn(s, "\"\\");
        if (!bbuf_add(buf, s, n))
            return false;
        s += n;
        if (*s) {
            char esc[2] = {'\\', *s};
            if (!bbuf_add(buf, esc, 2))
                return false;
            s++;
        }
    }
    return bbuf_add(buf, "\"", 1);
}

static void batch_send(struct api_batch *b);

static void on_batch(const struct tm_pg_reply *reply, void *data)
{
    struct batch_flight *f = data;
    struct api_batch *b = f->b;

    b->inflight--;
    if (reply->status == TM_EDB)
        tm_log_warn("api batch refused, its rows go one by one", "rows=%u error=\"%s\" sqlstate=%s",
                    f->n, reply->error ? reply->error : "-", reply->sqlstate ? reply->sqlstate : "-");
    if (reply->status < 0 && reply->status != TM_EDB) {
        /* It may or may not have committed: no retry, as for one job. */
        for (unsigned i = 0; i < f->n; i++) {
            if (f->calls[i]->req)
                api_fail_db(f->calls[i], reply);
            else
                api_call_free(f->calls[i]);
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
                if (c->req)
                    api_reply(c, 201, PQgetvalue(res, r, 1), (size_t)PQgetlength(res, r, 1));
                else
                    api_call_free(c);
            }
        }
        /* Not inserted: the normal path answers (see above). */
        for (unsigned i = 0; i < f->n; i++) {
            struct api_call *c = f->calls[i];
            if (!c)
                continue;
            if (c->req)
                api_authenticate(c);
            else
                api_call_free(c);
        }
    }
    free(f);
    if (b->n > 0 && b->inflight < BATCH_INFLIGHT)
        batch_send(b);
}

static void batch_reset(struct api_batch *b)
{
    for (unsigned i = 0; i < BATCH_COLS; i++) {
        b->col[i].len = 0;
        if (b->col[i].p)
            b->col[i].p[0] = '\0';
    }
    b->n = 0;
    b->bytes = 0;
}

static void batch_send(struct api_batch *b)
{
    struct batch_flight *f = malloc(sizeof(*f) + b->n * sizeof(f->calls[0]));
    const char *params[BATCH_COLS];
    bool ok = f != NULL;
    int r = -1;

    for (unsigned i = 0; ok && i < BATCH_COLS; i++) {
        ok = bbuf_add(&b->col[i], "}", 1);
        params[i] = b->col[i].p;
    }
    if (ok) {
        f->b = b;
        f->n = b->n;
        memcpy(f->calls, b->calls, b->n * sizeof(f->calls[0]));
        r = tm_pg_pool_query(api_pool(b->calls[0]), batch_sql, BATCH_COLS, params, on_batch, f);
    }
    if (r < 0) {
        tm_log_warn("api could not queue a statement", "route=\"/v1/jobs\" rows=%u error=\"%s\"",
                    b->n, ok ? tm_strerror(r) : "out of memory");
        for (unsigned i = 0; i < b->n; i++)
            api_fail(b->calls[i], 503, NULL, "database unavailable");
        free(f);
    } else {
        b->inflight++;
    }
    batch_reset(b);
}

/* Append one row; false (and the batch as it was) when it does not fit. */
static bool batch_add(struct api_batch *b, struct api_call *c, const char *const *params)
{
    size_t len[BATCH_COLS], bytes = 0;
    const char *row[BATCH_COLS];
    bool ok = true;

    if (b->n >= BATCH_ROWS)
        return false;
    memcpy(row, params, SUBMIT_NPARAMS * sizeof(row[0]));
    row[SUBMIT_NPARAMS] = c->hash;
    row[SUBMIT_NPARAMS + 1] = tm_role_name(c->role);
    row[SUBMIT_NPARAMS + 2] = c->team;
    for (unsigned i = 0; i < BATCH_COLS; i++)
        bytes += row[i] ? 2 * strlen(row[i]) + 4 : 5;
    if (b->bytes + bytes > BATCH_BYTES)
        return false;
    for (unsigned i = 0; i < BATCH_COLS; i++)
        len[i] = b->col[i].len;
    for (unsigned i = 0; ok && i < BATCH_COLS; i++)
        ok = bbuf_elem(&b->col[i], row[i]);
    if (!ok) {
        for (unsigned i = 0; i < BATCH_COLS; i++) {
            b->col[i].len = len[i];
            if (b->col[i].p)
                b->col[i].p[len[i]] = '\0';
        }
        return false;
    }
    b->calls[b->n++] = c;
    b->bytes += bytes;
    return true;
}

static void r_jobs_submit_fast(struct api_call *c)
{
    struct api_batch *b = api_route_state(c);
    struct tm_job_spec spec;
    struct tm_spec_error err = {0};
    cJSON *root = NULL;
    const char *body;
    size_t len;
    struct submit_text text;
    const char *params[SUBMIT_NPARAMS];

    if (!api_body(c, &body, &len)) {
        api_call_free(c);
        return;
    }
    /* Anything but the plain case: the normal path answers it, in order
     * (authentication first). */
    if (tm_job_spec_parse_json(body, len, &spec, &root, &err) < 0) {
        api_authenticate(c);
        return;
    }
    if ((c->role == TM_ROLE_ENGINEER && strcmp(spec.team, c->team) != 0) ||
        tm_job_fit_check(api_config(c), &spec, &err) < 0 || !api_rate_take(c)) {
        cJSON_Delete(root);
        api_authenticate(c);
        return;
    }
    submit_params(&spec, api_now_ms(c), &text, params);
    if (!batch_add(b, c, params)) {
        cJSON_Delete(root);
        api_authenticate(c);
        return;
    }
    cJSON_Delete(root);
    if (b->inflight < BATCH_INFLIGHT)
        batch_send(b);
}

static void on_one(const struct tm_pg_reply *reply, void *data)
{
    struct api_call *c = data;

    if (!api_reply_ok(c, reply))
        return;
    reply_one(c, reply->results[0], 200, c->flag ? "pool" : c->route->pattern[4] == 'j' ? "job" : "node");
}

static void on_page(const struct tm_pg_reply *reply, void *data)
{
    struct api_call *c = data;

    if (!api_reply_ok(c, reply))
        return;
    reply_page(c, reply->results[0]);
}

/* The team an engineer token is confined to, NULL for every other role. */
static const char *engineer_team(const struct api_call *c)
{
    return c->role == TM_ROLE_ENGINEER ? c->team : NULL;
}

static void r_jobs_get(struct api_call *c)
{
    char id[24];

    fmt_i64(id, sizeof(id), c->id);
    /* An engineer sees its own team's jobs only; another team's job is
     * answered 404 like a missing one, so its existence does not leak. */
    const char *params[] = {id, engineer_team(c)};
    api_query(c, "SELECT " JOB_JSON " FROM jobs j WHERE j.id = $1"
              " AND ($2::text IS NULL OR j.team = $2)", 2, params, on_one);
}

static void r_jobs_list(struct api_call *c)
{
    struct api_qp qp[] = {{.name = "state"}, {.name = "team"}, {.name = "class"}, {.name = "preemptible"}, {.name = "limit"}, {.name = "cursor"}};
    struct tm_spec_error err = {0};
    char cursor[24], limit[16];
    int r = api_parse_query(c, qp, 6, &err);

    if (r == TM_ECANCELED) {
        api_call_free(c);
        return;
    }
    if (r == 0 && qp[0].set && tm_job_state_parse(qp[0].value) < 0)
        r = tm_spec_fail(&err, "state",
                         "must be queued, running, succeeded, failed, preempted or cancelled");
    if (r == 0 && qp[1].set && !tm_job_spec_name_ok(qp[1].value))
        r = tm_spec_fail(&err, "team", "must be 1-63 letters, digits, '.', '_' or '-'");
    if (r == 0 && qp[2].set && tm_job_class_parse(qp[2].value) < 0)
        r = tm_spec_fail(&err, "class", "must be train, eval, preprocess, inference or batch");
    if (r == 0 && qp[3].set && strcmp(qp[3].value, "true") != 0 && strcmp(qp[3].value, "false") != 0)
        r = tm_spec_fail(&err, "preemptible", "must be true or false");
    if (r == 0)
        r = page_params(c, &qp[4], &qp[5], cursor, sizeof(cursor), &err);
    if (r < 0) {
        api_fail_spec(c, &err);
        return;
    }
    snprintf(limit, sizeof(limit), "%u", c->limit + 1);
    const char *params[] = {qp[0].set ? qp[0].value : NULL, qp[1].set ? qp[1].value : NULL,
                            qp[2].set ? qp[2].value : NULL, qp[3].set ? qp[3].value : NULL,
                            cursor[0] ? cursor : NULL, limit, engineer_team(c)};
    api_query(c,
              "SELECT j.id, " JOB_JSON " FROM jobs j"
              " WHERE ($1::text IS NULL OR j.state = $1) AND ($2::text IS NULL OR j.team = $2)"
              " AND ($3::text IS NULL OR j.class = $3) AND ($4::boolean IS NULL OR j.preemptible = $4)"
              " AND ($5::bigint IS NULL OR j.id < $5) AND ($7::text IS NULL OR j.team = $7)"
              " ORDER BY j.id DESC LIMIT $6",
              7, params, on_page);
}

/* Cancel and retag answer the same way: the job's team and state before,
 * and the changed row when the change applied. */
static void on_job_change(const struct tm_pg_reply *reply, void *data)
{
    struct api_call *c = data;
    PGresult *res;
    char msg[128];

    if (!api_reply_ok(c, reply))
        return;
    res = reply->results[0];
    if (PQntuples(res) != 1 || PQgetisnull(res, 0, 0)) {
        api_fail(c, 404, NULL, "no such job");
        return;
    }
    /* Another team's job is, to an engineer, no job at all. */
    if (c->role == TM_ROLE_ENGINEER && strcmp(PQgetvalue(res, 0, 0), c->team) != 0) {
        api_fail(c, 404, NULL, "no such job");
        return;
    }
    if (PQgetisnull(res, 0, 2)) {
        snprintf(msg, sizeof(msg), "job is %s: %s", PQgetvalue(res, 0, 1),
                 c->flag ? "only a queued job can be retagged"
                         : "only a queued or running job can be cancelled");
        api_fail(c, 409, NULL, msg);
        return;
    }
    api_reply(c, 200, PQgetvalue(res, 0, 2), (size_t)PQgetlength(res, 0, 2));
}

static const char cancel_sql[] =
    "WITH b AS (SELECT id, team, state FROM jobs WHERE id = $1 FOR UPDATE),"
    " u AS (UPDATE jobs SET state = 'cancelled', finished_ms = $2, state_reason = $3"
    "   WHERE id = $1 AND ($4::text IS NULL OR team = $4) AND state IN ('queued', 'running')"
    "   RETURNING *),"
    " d AS (DELETE FROM job_allocations WHERE job_id IN (SELECT id FROM u) RETURNING node_id),"
    " n AS (UPDATE nodes SET idle_since_ms = $2 WHERE idle_since_ms IS NULL"
    "   AND state IN ('ready', 'draining') AND id IN (SELECT node_id FROM d)"
    "   AND NOT EXISTS (SELECT 1 FROM job_allocations a WHERE a.node_id = nodes.id AND a.job_id <> $1)"
    "   RETURNING id),"
    " dec AS (SELECT tarmac_decide($2, 'cancel', 'job', u.id::text, $3,"
    "   jsonb_build_object('by', $5::text, 'was', (SELECT state FROM b))) FROM u)"
    " SELECT (SELECT team FROM b), (SELECT state FROM b), (SELECT " JOB_JSON " FROM u j),"
    " (SELECT count(*) FROM dec), (SELECT count(*) FROM n)";

static void r_jobs_cancel(struct api_call *c)
{
    struct tm_spec_error err = {0};
    char reason[TM_API_REASON_MAX + 128], why[TM_API_REASON_MAX + 1], id[24], now[24];
    const char *body;
    size_t len;

    if (!api_body(c, &body, &len)) {
        api_call_free(c);
        return;
    }
    if (tm_api_parse_verb(body, len, false, why, sizeof(why), NULL, &err) < 0) {
        api_fail_spec(c, &err);
        return;
    }
    snprintf(reason, sizeof(reason), "cancelled by %s%s%s", c->token_name, why[0] ? ": " : "", why);
    fmt_i64(id, sizeof(id), c->id);
    fmt_i64(now, sizeof(now), api_now_ms(c));
    const char *params[] = {id, now, reason, c->role == TM_ROLE_ENGINEER ? c->team : NULL,
                            c->token_name};
    c->flag = false;
    api_query(c, cancel_sql, 5, params, on_job_change);
}

static const char retag_sql[] =
    "WITH b AS (SELECT id, team, state FROM jobs WHERE id = $1 FOR UPDATE),"
    " u AS (UPDATE jobs SET preemptible = $2::boolean"
    "   WHERE id = $1 AND ($3::text IS NULL OR team = $3) AND state = 'queued' RETURNING *),"
    " dec AS (SELECT tarmac_decide($4, 'retag', 'job', u.id::text,"
    "   'preemptible set to ' || $2::boolean::text || ' by ' || $5::text,"
    "   jsonb_build_object('by', $5::text, 'preemptible', $2::boolean)) FROM u)"
    " SELECT (SELECT team FROM b), (SELECT state FROM b), (SELECT " JOB_JSON " FROM u j),"
    " (SELECT count(*) FROM dec)";

static void r_jobs_retag(struct api_call *c)
{
    struct tm_spec_error err = {0};
    const char *body;
    size_t len;
    bool pre = false;
    char id[24], now[24];

    if (!api_body(c, &body, &len)) {
        api_call_free(c);
        return;
    }
    if (tm_api_parse_retag(body, len, &pre, &err) < 0) {
        api_fail_spec(c, &err);
        return;
    }
    fmt_i64(id, sizeof(id), c->id);
    fmt_i64(now, sizeof(now), api_now_ms(c));
    const char *params[] = {id, pre ? "true" : "false",
                            c->role == TM_ROLE_ENGINEER ? c->team : NULL, now, c->token_name};
    c->flag = true;
    api_query(c, retag_sql, 5, params, on_job_change);
}

/* ---- pools and nodes ------------------------------------------------------ */

static void r_pools_list(struct api_call *c)
{
    struct api_qp qp[] = {{.name = "limit"}, {.name = "cursor"}};
    struct tm_spec_error err = {0};
    int r = api_parse_query(c, qp, 2, &err);
    char limit[16], offset[24], cursor[24];

    if (r == TM_ECANCELED) {
        api_call_free(c);
        return;
    }
    if (r == 0)
        r = page_params(c, &qp[0], &qp[1], cursor, sizeof(cursor), &err);
    if (r < 0) {
        api_fail_spec(c, &err);
        return;
    }
    /* Pools have names, not ids: the cursor is a position. */
    snprintf(limit, sizeof(limit), "%u", c->limit + 1);
    snprintf(offset, sizeof(offset), "%s", cursor[0] ? cursor : "0");
    const char *params[] = {limit, offset};
    api_query(c,
              "SELECT $2::bigint + row_number() OVER (ORDER BY p.name), " POOL_JSON
              " FROM pools p ORDER BY p.name LIMIT $1 OFFSET $2",
              2, params, on_page);
}

static void r_pools_get(struct api_call *c)
{
    const char *params[] = {c->name};
    c->flag = true;
    api_query(c, "SELECT " POOL_JSON " FROM pools p WHERE p.name = $1", 1, params, on_one);
}

static void r_nodes_list(struct api_call *c)
{
    struct api_qp qp[] = {{.name = "pool"}, {.name = "state"}, {.name = "limit"}, {.name = "cursor"}};
    struct tm_spec_error err = {0};
    char cursor[24], limit[16];
    int r = api_parse_query(c, qp, 4, &err);

    if (r == TM_ECANCELED) {
        api_call_free(c);
        return;
    }
    if (r == 0 && qp[0].set && !tm_job_spec_name_ok(qp[0].value))
        r = tm_spec_fail(&err, "pool", "must be a pool name");
    if (r == 0 && qp[1].set && tm_node_state_parse(qp[1].value) < 0)
        r = tm_spec_fail(&err, "state",
                         "must be requested, booting, ready, draining, terminating, terminated or interrupted");
    if (r == 0)
        r = page_params(c, &qp[2], &qp[3], cursor, sizeof(cursor), &err);
    if (r < 0) {
        api_fail_spec(c, &err);
        return;
    }
    snprintf(limit, sizeof(limit), "%u", c->limit + 1);
    const char *params[] = {qp[0].set ? qp[0].value : NULL, qp[1].set ? qp[1].value : NULL,
                            cursor[0] ? cursor : NULL, limit};
    api_query(c,
              "SELECT n.id, " NODE_JSON " FROM nodes n"
              " WHERE ($1::text IS NULL OR n.pool = $1) AND ($2::text IS NULL OR n.state = $2)"
              " AND ($3::bigint IS NULL OR n.id < $3) ORDER BY n.id DESC LIMIT $4",
              4, params, on_page);
}

static void r_nodes_get(struct api_call *c)
{
    char id[24];

    fmt_i64(id, sizeof(id), c->id);
    const char *params[] = {id};
    api_query(c, "SELECT " NODE_JSON " FROM nodes n WHERE n.id = $1", 1, params, on_one);
}

/* Drain, cordon and interruption notices: (state before, changed row). */
static void on_node_change(const struct tm_pg_reply *reply, void *data)
{
    struct api_call *c = data;
    PGresult *res;
    char msg[96];

    if (!api_reply_ok(c, reply))
        return;
    res = reply->results[0];
    if (PQntuples(res) != 1 || PQgetisnull(res, 0, 0)) {
        api_fail(c, 404, NULL, "no such node");
        return;
    }
    if (PQgetisnull(res, 0, 1)) {
        snprintf(msg, sizeof(msg), "node is %s: nothing to change", PQgetvalue(res, 0, 0));
        api_fail(c, 409, NULL, msg);
        return;
    }
    api_reply(c, 200, PQgetvalue(res, 0, 1), (size_t)PQgetlength(res, 0, 1));
}

static const char drain_sql[] =
    "WITH b AS (SELECT id, state FROM nodes WHERE id = $1 FOR UPDATE),"
    " u AS (UPDATE nodes SET cordoned = true,"
    "   state = CASE WHEN $5::boolean AND state = 'ready' THEN 'draining' ELSE state END,"
    "   state_reason = $3"
    "   WHERE id = $1 AND state IN ('requested', 'booting', 'ready', 'draining') RETURNING *),"
    " dec AS (SELECT tarmac_decide($2, CASE WHEN $5::boolean THEN 'drain' ELSE 'cordon' END,"
    "   'node', u.id::text, $3, jsonb_build_object('by', $4::text)) FROM u)"
    " SELECT (SELECT state FROM b), (SELECT " NODE_JSON " FROM u n), (SELECT count(*) FROM dec)";

static void node_verb(struct api_call *c, bool drain)
{
    struct tm_spec_error err = {0};
    char reason[TM_API_REASON_MAX + 128], why[TM_API_REASON_MAX + 1], id[24], now[24];
    const char *body;
    size_t len;

    if (!api_body(c, &body, &len)) {
        api_call_free(c);
        return;
    }
    if (tm_api_parse_verb(body, len, false, why, sizeof(why), NULL, &err) < 0) {
        api_fail_spec(c, &err);
        return;
    }
    snprintf(reason, sizeof(reason), "%s by %s%s%s", drain ? "drained" : "cordoned",
             c->token_name, why[0] ? ": " : "", why);
    fmt_i64(id, sizeof(id), c->id);
    fmt_i64(now, sizeof(now), api_now_ms(c));
    const char *params[] = {id, now, reason, c->token_name, drain ? "true" : "false"};
    api_query(c, drain_sql, 5, params, on_node_change);
}

static void r_nodes_drain(struct api_call *c)
{
    node_verb(c, true);
}

static void r_nodes_cordon(struct api_call *c)
{
    node_verb(c, false);
}

static const char interruption_sql[] =
    "WITH b AS (SELECT id, state FROM nodes WHERE id = $1 FOR UPDATE),"
    " u AS (UPDATE nodes SET cordoned = true, state_reason = $3"
    "   WHERE id = $1 AND state NOT IN ('terminated', 'interrupted') RETURNING *),"
    " dec AS (SELECT tarmac_decide($2, 'interruption_notice', 'node', u.id::text, $3,"
    "   jsonb_build_object('by', $4::text, 'in_s', $5::bigint)) FROM u)"
    " SELECT (SELECT state FROM b), (SELECT " NODE_JSON " FROM u n), (SELECT count(*) FROM dec)";

static void r_nodes_interruption(struct api_call *c)
{
    struct tm_spec_error err = {0};
    char reason[TM_API_REASON_MAX + 128], why[TM_API_REASON_MAX + 1], id[24], now[24], in[24];
    const char *body;
    size_t len;
    int64_t in_s = -1;

    if (!api_body(c, &body, &len)) {
        api_call_free(c);
        return;
    }
    if (tm_api_parse_verb(body, len, true, why, sizeof(why), &in_s, &err) < 0) {
        api_fail_spec(c, &err);
        return;
    }
    snprintf(reason, sizeof(reason), "interruption notice%s%s", why[0] ? ": " : "", why);
    fmt_i64(id, sizeof(id), c->id);
    fmt_i64(now, sizeof(now), api_now_ms(c));
    fmt_i64(in, sizeof(in), in_s);
    const char *params[] = {id, now, reason, c->token_name, in_s >= 0 ? in : NULL};
    api_query(c, interruption_sql, 5, params, on_node_change);
}

/* The node agent path: tarmac_agent_report() (the same function the sim
 * agent calls), with the GPU samples in the same statement.  A node that is
 * terminated or interrupted reports nothing more: its heartbeat changes no
 * row (a late report must not finish jobs already requeued elsewhere) and
 * answers 409, counted in tarmac_http_requests_total{code="409"}.  Columns:
 * the node's state (NULL: no such node), then the answer when it was live. */
static const char heartbeat_sql[] =
    "WITH n AS (SELECT state FROM nodes WHERE id = $1),"
    " live AS (SELECT 1 FROM n WHERE state NOT IN ('terminated', 'interrupted')),"
    " s AS (INSERT INTO gpu_samples (node_id, gpu_index, at_ms, util_percent, memory_used_mib)"
    "  SELECT $1, (x ->> 'index')::int, coalesce((x ->> 'at_ms')::bigint, $2),"
    "   (x ->> 'util_percent')::real, (x ->> 'memory_used_mib')::bigint"
    "  FROM jsonb_array_elements($4::jsonb) x WHERE EXISTS (SELECT 1 FROM live)"
    "  ON CONFLICT DO NOTHING RETURNING 1)"
    " SELECT (SELECT state FROM n), CASE WHEN EXISTS (SELECT 1 FROM live) THEN"
    " json_build_object('node', $1::bigint, 'finished', tarmac_agent_report($1, $2, $3::jsonb),"
    " 'samples', (SELECT count(*) FROM s))::text END";

static void on_heartbeat(const struct tm_pg_reply *reply, void *data)
{
    struct api_call *c = data;
    PGresult *res;

    if (!c->req) {
        api_call_free(c);
        return;
    }
    if (reply->status < 0) {
        if (reply->sqlstate && strcmp(reply->sqlstate, "TM003") == 0)
            api_fail(c, 404, NULL, "no such node");
        else
            api_fail_db(c, reply);
        return;
    }
    res = reply->results[0];
    if (PQntuples(res) < 1 || PQgetisnull(res, 0, 0)) {
        api_fail(c, 404, NULL, "no such node");
        return;
    }
    if (PQgetisnull(res, 0, 1)) {
        char msg[96];
        snprintf(msg, sizeof(msg), "node %" PRId64 " is %s: its heartbeats are refused", c->id,
                 PQgetvalue(res, 0, 0));
        api_fail(c, 409, "id", msg);
        return;
    }
    api_reply(c, 200, PQgetvalue(res, 0, 1), (size_t)PQgetlength(res, 0, 1));
}

static void r_nodes_heartbeat(struct api_call *c)
{
    struct tm_spec_error err = {0};
    struct tm_api_heartbeat hb = {0};
    const char *body;
    size_t len;
    char id[24], now[24];

    if (!api_body(c, &body, &len)) {
        api_call_free(c);
        return;
    }
    if (tm_api_parse_heartbeat(body, len, &hb, &err) < 0) {
        api_fail_spec(c, &err);
        return;
    }
    fmt_i64(id, sizeof(id), c->id);
    fmt_i64(now, sizeof(now), api_now_ms(c));
    const char *params[] = {id, now, hb.report, hb.samples};
    api_query(c, heartbeat_sql, 4, params, on_heartbeat);
    tm_api_heartbeat_release(&hb);
}

/* ---- decisions ------------------------------------------------------------ */

static const char *const subject_kinds[] = {"job", "node", "pool", "instance", "budget",
                                            "provider"};

static bool printable(const char *s, size_t max)
{
    size_t n = strlen(s);

    if (n == 0 || n > max)
        return false;
    for (; *s; s++)
        if ((unsigned char)*s < ' ' || *s == 127)
            return false;
    return true;
}

static void r_decisions_list(struct api_call *c)
{
    struct api_qp qp[] = {{.name = "kind"}, {.name = "subject_kind"}, {.name = "subject_id"}, {.name = "since_ms"}, {.name = "limit"},
                      {.name = "cursor"}};
    struct tm_spec_error err = {0};
    char cursor[24], limit[16], since[24];
    int64_t v;
    int r = api_parse_query(c, qp, 6, &err);

    if (r == TM_ECANCELED) {
        api_call_free(c);
        return;
    }
    if (r == 0 && qp[0].set && !printable(qp[0].value, 64))
        r = tm_spec_fail(&err, "kind", "must be a decision kind such as place or launch");
    if (r == 0 && qp[1].set) {
        bool ok = false;
        for (size_t i = 0; i < sizeof(subject_kinds) / sizeof(subject_kinds[0]); i++)
            ok = ok || strcmp(qp[1].value, subject_kinds[i]) == 0;
        if (!ok)
            r = tm_spec_fail(&err, "subject_kind",
                             "must be job, node, pool, instance, budget or provider");
    }
    if (r == 0 && qp[2].set && !printable(qp[2].value, 128))
        r = tm_spec_fail(&err, "subject_id", "must be 1-128 printable characters");
    since[0] = '\0';
    if (r == 0 && qp[3].set) {
        if (!api_parse_pos(qp[3].value, INT64_MAX, &v))
            r = tm_spec_fail(&err, "since_ms", "must be a positive integer (ms since the epoch)");
        else
            fmt_i64(since, sizeof(since), v);
    }
    if (r == 0)
        r = page_params(c, &qp[4], &qp[5], cursor, sizeof(cursor), &err);
    if (r < 0) {
        api_fail_spec(c, &err);
        return;
    }
    snprintf(limit, sizeof(limit), "%u", c->limit + 1);
    const char *params[] = {qp[0].set ? qp[0].value : NULL, qp[1].set ? qp[1].value : NULL,
                            qp[2].set ? qp[2].value : NULL, since[0] ? since : NULL,
                            cursor[0] ? cursor : NULL, limit, engineer_team(c)};
    /* An engineer does not see decisions about other teams' jobs, nor
     * about budgets other than its team's (as GET /v1/budgets). */
    api_query(c,
              "SELECT d.id, " DECISION_JSON " FROM decisions d"
              " WHERE ($1::text IS NULL OR d.kind = $1) AND ($2::text IS NULL OR d.subject_kind = $2)"
              " AND ($3::text IS NULL OR d.subject_id = $3) AND ($4::bigint IS NULL OR d.at_ms >= $4)"
              " AND ($5::bigint IS NULL OR d.id < $5)"
              " AND ($7::text IS NULL OR d.subject_kind <> 'job' OR EXISTS (SELECT 1 FROM jobs jj"
              "   WHERE jj.id = CASE WHEN d.subject_id ~ '^[0-9]{1,18}$' THEN d.subject_id::bigint END"
              "   AND jj.team = $7))"
              " AND ($7::text IS NULL OR d.subject_kind <> 'budget' OR d.subject_id = 'team:' || $7)"
              " ORDER BY d.id DESC LIMIT $6",
              7, params, on_page);
}

/* ---- budgets and spend ---------------------------------------------------- */

/* The calendar month (UTC) of $1 (ms since the epoch): its 'YYYY-MM' as
 * the spend ledger spells it, and its first and last instant in ms. */
#define MONTH_CTE                                                                                  \
    "per AS (SELECT to_char(t, 'YYYY-MM') AS p,"                                                  \
    "   (extract(epoch FROM date_trunc('month', t)) * 1000)::bigint AS start_ms,"                 \
    "   (extract(epoch FROM date_trunc('month', t) + interval '1 month') * 1000)::bigint AS end_ms" \
    "  FROM (SELECT to_timestamp($1::bigint / 1000.0) AT TIME ZONE 'UTC' AS t) x)"

#define BUDGET_JSON                                                                                \
    "json_build_object('scope_kind', b.scope_kind, 'scope', b.scope, 'period', b.period,"         \
    " 'cap_cents', b.cap_cents, 'currency', b.currency, 'warn_percent', b.warn_percent,"          \
    " 'hard', b.hard, 'updated_ms', b.updated_ms)"

/* A team is known when a job or a token (revoked ones too) names it: a
 * budget for a team nobody has mentioned is a typo, refused.  An org scope
 * is any name. */
static const char budget_put_sql[] =
    "WITH k AS (SELECT $2::text = 'org' OR EXISTS (SELECT 1 FROM jobs WHERE team = $1)"
    "   OR EXISTS (SELECT 1 FROM api_tokens WHERE team = $1) AS ok),"
    " u AS (INSERT INTO budgets (scope_kind, scope, period, cap_cents, currency, warn_percent,"
    "   hard, updated_ms)"
    "  SELECT $2, $1, 'month', $3::bigint, 'USD', $4::int, $5::boolean, $6::bigint FROM k WHERE k.ok"
    "  ON CONFLICT (scope_kind, scope, period) DO UPDATE SET cap_cents = EXCLUDED.cap_cents,"
    "   currency = EXCLUDED.currency, warn_percent = EXCLUDED.warn_percent, hard = EXCLUDED.hard,"
    "   updated_ms = EXCLUDED.updated_ms RETURNING *),"
    " dec AS (SELECT tarmac_decide($6::bigint, 'budget_set', 'budget', u.scope_kind || ':' || u.scope,"
    "   'budget set by ' || $7::text || ': ' || u.cap_cents || ' cents a month, '"
    "   || CASE WHEN u.hard THEN 'hard' ELSE 'soft' END || ', warn at ' || u.warn_percent || '%',"
    "   jsonb_build_object('by', $7::text, 'cap_cents', u.cap_cents, 'hard', u.hard,"
    "   'warn_percent', u.warn_percent)) FROM u)"
    " SELECT (SELECT ok FROM k), (SELECT " BUDGET_JSON "::text FROM u b), (SELECT count(*) FROM dec)";

static void on_budget_put(const struct tm_pg_reply *reply, void *data)
{
    struct api_call *c = data;
    PGresult *res;

    if (!api_reply_ok(c, reply))
        return;
    res = reply->results[0];
    if (PQntuples(res) != 1 || strcmp(PQgetvalue(res, 0, 0), "t") != 0) {
        api_fail(c, 400, "team",
                 "unknown team: no job and no token names it (scope_kind \"org\" for an org)");
        return;
    }
    if (PQgetisnull(res, 0, 1)) {
        api_fail(c, 500, NULL, "the budget was not written");
        return;
    }
    api_reply(c, 200, PQgetvalue(res, 0, 1), (size_t)PQgetlength(res, 0, 1));
}

static void r_budgets_put(struct api_call *c)
{
    struct tm_spec_error err = {0};
    struct tm_api_budget b;
    const char *body;
    size_t len;
    char cap[24], warn[16], now[24];

    if (!api_body(c, &body, &len)) {
        api_call_free(c);
        return;
    }
    if (tm_api_parse_budget(body, len, &b, &err) < 0) {
        api_fail_spec(c, &err);
        return;
    }
    fmt_i64(cap, sizeof(cap), b.cap_cents);
    snprintf(warn, sizeof(warn), "%d", b.warn_percent);
    fmt_i64(now, sizeof(now), api_now_ms(c));
    const char *params[] = {c->name, b.org ? "org" : "team", cap, warn, b.hard ? "true" : "false",
                            now, c->token_name};
    api_query(c, budget_put_sql, 7, params, on_budget_put);
}

/* The one-row, one-column answer built by PostgreSQL. */
static void on_document(const struct tm_pg_reply *reply, void *data)
{
    struct api_call *c = data;

    if (!api_reply_ok(c, reply))
        return;
    reply_one(c, reply->results[0], 200, "document");
}

/* Every budget (an engineer: its team's only) with what was spent against
 * it this month: a team's job spend, or for an org everything, idle too. */
static const char budgets_sql[] =
    "WITH " MONTH_CTE
    " SELECT json_build_object('period', per.p, 'items', coalesce((SELECT json_agg(x.doc"
    "   ORDER BY x.scope_kind, x.scope) FROM (SELECT b.scope_kind, b.scope,"
    "   (" BUDGET_JSON "::jsonb || jsonb_build_object('spent_cents', (SELECT coalesce(sum(s.cents), 0)"
    "    FROM spend s WHERE s.period = per.p AND (b.scope_kind = 'org' OR s.team = b.scope)))) AS doc"
    "   FROM budgets b WHERE $2::text IS NULL OR (b.scope_kind = 'team' AND b.scope = $2)) x),"
    "   '[]'::json))::text FROM per";

static void r_budgets_list(struct api_call *c)
{
    char now[24];

    fmt_i64(now, sizeof(now), api_now_ms(c));
    const char *params[] = {now, engineer_team(c)};
    api_query(c, budgets_sql, 2, params, on_document);
}

/* Spend so far this calendar month from the ledger, per team and per pool
 * with idle apart, and a projection to the month's end: spend so far plus
 * the current rate (the hourly prices of the billed nodes) times the hours
 * left.  1 cent = 10^4 micro-dollars.  An engineer sees its team's rows
 * only, and no fleet-wide idle, rate or projection. */
static const char spend_sql[] =
    "WITH " MONTH_CTE ","
    " s AS (SELECT sp.* FROM spend sp, per WHERE sp.period = per.p"
    "   AND ($2::text IS NULL OR sp.team = $2)),"
    " t AS (SELECT coalesce(sum(cents), 0) AS total FROM s),"
    " rate AS (SELECT coalesce(sum(price_uusd_per_hour), 0)::numeric AS uusd FROM nodes"
    "   WHERE state IN ('booting', 'ready', 'draining', 'terminating'))"
    " SELECT json_build_object('period', per.p, 'currency', 'USD', 'now_ms', $1::bigint,"
    " 'month_start_ms', per.start_ms, 'month_end_ms', per.end_ms,"
    " 'total_cents', t.total,"
    " 'job_cents', (SELECT coalesce(sum(cents), 0) FROM s WHERE kind = 'job'),"
    " 'idle_cents', CASE WHEN $2::text IS NULL THEN"
    "   (SELECT coalesce(sum(cents), 0) FROM s WHERE kind = 'idle') END,"
    " 'teams', coalesce((SELECT json_agg(json_build_object('team', q.team, 'cents', q.c)"
    "   ORDER BY q.team) FROM (SELECT team, sum(cents) AS c FROM s WHERE kind = 'job'"
    "   GROUP BY team) q), '[]'::json),"
    " 'pools', coalesce((SELECT json_agg(json_build_object('pool', q.pool, 'job_cents', q.jc,"
    "   'idle_cents', q.ic, 'cents', q.jc + q.ic) ORDER BY q.pool) FROM (SELECT pool,"
    "   coalesce(sum(cents) FILTER (WHERE kind = 'job'), 0) AS jc,"
    "   coalesce(sum(cents) FILTER (WHERE kind = 'idle'), 0) AS ic FROM s GROUP BY pool) q),"
    "   '[]'::json),"
    " 'rate_uusd_per_hour', CASE WHEN $2::text IS NULL THEN rate.uusd END,"
    " 'hours_left', round((per.end_ms - $1::bigint)::numeric / 3600000, 6),"
    " 'projected_cents', CASE WHEN $2::text IS NULL THEN t.total"
    "   + round(rate.uusd * greatest(per.end_ms - $1::bigint, 0) / 36000000000) END)::text"
    " FROM per, t, rate";

static void r_spend(struct api_call *c)
{
    char now[24];

    fmt_i64(now, sizeof(now), api_now_ms(c));
    const char *params[] = {now, engineer_team(c)};
    api_query(c, spend_sql, 2, params, on_document);
}

/* ---- the table ------------------------------------------------------------ */

/* Who may do what; docs/openapi.yaml says the same under x-tarmac-roles and
 * the tests hold the two together. */
static const struct api_route api_routes[] = {
    {"GET", "/healthz", API_PUBLIC, r_healthz, NULL},
    {"GET", "/readyz", API_PUBLIC, r_readyz, NULL},
    {"GET", "/metrics", API_PUBLIC | API_SCRAPE, api_metrics, NULL},
    {"POST", "/v1/jobs", API_ADMIN | API_ENGINEER, r_jobs_submit, r_jobs_submit_fast},
    {"GET", "/v1/jobs", API_READERS, r_jobs_list, NULL},
    {"GET", "/v1/jobs/{id}", API_READERS, r_jobs_get, NULL},
    {"PATCH", "/v1/jobs/{id}", API_ADMIN | API_ENGINEER, r_jobs_retag, NULL},
    {"POST", "/v1/jobs/{id}/cancel", API_ADMIN | API_ENGINEER, r_jobs_cancel, NULL},
    {"GET", "/v1/pools", API_READERS, r_pools_list, NULL},
    {"GET", "/v1/pools/{name}", API_READERS, r_pools_get, NULL},
    {"GET", "/v1/nodes", API_READERS, r_nodes_list, NULL},
    {"GET", "/v1/nodes/{id}", API_READERS, r_nodes_get, NULL},
    {"POST", "/v1/nodes/{id}/drain", API_ADMIN, r_nodes_drain, NULL},
    {"POST", "/v1/nodes/{id}/cordon", API_ADMIN, r_nodes_cordon, NULL},
    {"POST", "/v1/nodes/{id}/heartbeat", API_ADMIN, r_nodes_heartbeat, NULL},
    {"POST", "/v1/nodes/{id}/interruption", API_ADMIN, r_nodes_interruption, NULL},
    {"GET", "/v1/decisions", API_READERS, r_decisions_list, NULL},
    {"PUT", "/v1/budgets/{name}", API_ADMIN | API_FINANCE, r_budgets_put, NULL},
    {"GET", "/v1/budgets", API_READERS, r_budgets_list, NULL},
    {"GET", "/v1/spend", API_READERS, r_spend, NULL},
    {"GET", "/v1/timeseries", API_READERS, api_timeseries, NULL},
    {"GET", "/", API_PUBLIC, api_dashboard_page, NULL},
    {"GET", "/dashboard.js", API_PUBLIC, api_dashboard_js, NULL},
    {"GET", "/dashboard.css", API_PUBLIC, api_dashboard_css, NULL},
    {NULL, NULL, 0, NULL, NULL},
};

const struct tm_api_routes tm_api_v1_routes = {
    .table = api_routes,
    .state_new = api_batch_new,
    .state_free = api_batch_free,
};
