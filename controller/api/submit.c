/*
 * controller/api/submit.c: POST /v1/jobs: the checked insert of one job, and the
 * fast path, which joins concurrent submits into one statement through the
 * group commit.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <time.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>
#include <libpq-fe.h>

#include "controller/api/internal.h"
#include "controller/api/request.h"
#include "controller/api/resources.h"
#include "controller/api/rows.h"
#include "controller/spec/api_body.h"
#include "controller/spec/job_fit.h"
#include "controller/spec/json_body.h"
#include "controller/spec/token.h"
#include "core/clock.h"
#include "core/err.h"
#include "core/log.h"
#include "core/model.h"


/* ---- jobs ----------------------------------------------------------------- */

#define SUBMIT_NPARAMS 17
/* The checks every submit makes, as a CTE "chk"; $18 is the request's
 * deadline in ms since the Unix epoch, checked on the database's clock: a
 * statement that reaches the server after its client was answered 503
 * (docs/ha.md) inserts nothing. */
#define SUBMIT_CHK                                                                              \
    "chk AS (SELECT"                                                                            \
    " (SELECT count(*) FROM pools WHERE $10::text IS NULL OR name = $10) AS pools,"             \
    " (SELECT count(*) FROM pools WHERE $9::text IS NULL"                                       \
    "   OR gpu_model = ANY (string_to_array($9, '|'))) AS models,"                              \
    " (SELECT coalesce(max(gpus_per_node), 0) FROM pools WHERE ($10::text IS NULL OR name = $10)" \
    "   AND ($9::text IS NULL OR gpu_model = ANY (string_to_array($9, '|')))) AS max_gpus,"     \
    " (SELECT coalesce(string_agg(DISTINCT gpu_model, ', '), '') FROM pools) AS known_models,"  \
    " (SELECT coalesce(string_agg(name, ', ' ORDER BY name), '') FROM pools) AS known_pools,"   \
    " clock_timestamp() < to_timestamp($18::bigint / 1000.0) AS in_time)"
/* ENV and IMAGE: the parameters holding the job's env (jsonb text or
 * NULL) and image, numbered after each statement's own. */
#define SUBMIT_INS(ENV, IMAGE)                                                                  \
    " ins AS (INSERT INTO jobs (team, name, command, gpus, gpu_milli, nodes, cpu_milli,"        \
    "   memory_mib, gpu_model, pool, class, priority, preemptible, checkpointable,"             \
    "   runtime_estimate_ms, deadline_ms, submitted_ms, env, image)"                            \
    "  SELECT $1, $2, $3, $4::int, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14,"                \
    "   nullif($15::bigint, 0), nullif($16::bigint, 0), $17,"                                   \
    "   coalesce(" ENV "::jsonb, '{}'::jsonb), " IMAGE "::text"                                 \
    "  FROM chk WHERE chk.pools > 0 AND chk.models > 0 AND $4::int <= chk.max_gpus AND chk.in_time"
#define SUBMIT_OUT " chk.pools, chk.models, chk.max_gpus, chk.known_models, chk.known_pools, chk.in_time"

static const char submit_sql[] =
    "WITH " SUBMIT_CHK "," SUBMIT_INS("$19", "$20") "  RETURNING *)"
    " SELECT (SELECT " JOB_JSON " FROM ins j)," SUBMIT_OUT " FROM chk";

/* With an Idempotency-Key ($19 the token's hash, $20 the key, $21 the
 * body's hash; $22 and $23 the env and image): an earlier answer under the same key and token (prev)
 * means no insert; a new job records its answer in the same statement.
 * Two concurrent requests with one key: the second's insert of the key
 * collides (23505) and rolls its job back; it is then run again, and
 * finds the first's answer. */
static const char submit_idem_sql[] =
    "WITH prev AS (SELECT body_hash, response FROM api_idempotency"
    "   WHERE token_hash = $19 AND key = $20), " SUBMIT_CHK ","
    SUBMIT_INS("$22", "$23") " AND NOT EXISTS (SELECT 1 FROM prev) RETURNING *),"
    " doc AS (SELECT j.id, " JOB_JSON "::text AS d FROM ins j),"
    " rec AS (INSERT INTO api_idempotency (token_hash, key, body_hash, job_id, response)"
    "  SELECT $19, $20, $21, id, d FROM doc RETURNING 1)"
    " SELECT (SELECT d FROM doc)," SUBMIT_OUT ", (SELECT body_hash FROM prev),"
    " (SELECT response FROM prev), (SELECT count(*) FROM rec) FROM chk";

/* The request's deadline as wall-clock ms, for the database's clock. */
static int64_t wall_deadline_ms(const struct api_call *c)
{
    return tm_wall_ms() + (int64_t)tm_api_time_left(c);
}

static void on_submit(const struct tm_pg_reply *reply, void *data)
{
    struct api_call *c = data;
    PGresult *res;
    char msg[192];

    if (c->req && c->flag && reply->status == TM_EDB && reply->sqlstate &&
        strcmp(reply->sqlstate, "23505") == 0) {
        /* The same key raced with itself and the other committed first:
         * once more, to read its answer. */
        if (c->limit == 0) {
            c->limit = 1;
            tm_api_jobs_submit(c);
        } else {
            tm_api_fail(c, 409, "Idempotency-Key", "a request with this key is in progress; retry");
        }
        return;
    }
    if (!tm_api_reply_ok(c, reply))
        return;
    res = reply->results[0];
    if (PQntuples(res) == 1 && !PQgetisnull(res, 0, 0)) {
        tm_api_reply(c, 201, PQgetvalue(res, 0, 0), (size_t)PQgetlength(res, 0, 0));
        return;
    }
    if (c->flag && PQnfields(res) >= 10 && !PQgetisnull(res, 0, 7)) {
        const char *body;
        size_t len;
        char hash[TM_TOKEN_HASH_LEN + 1];

        if (!tm_api_body(c, &body, &len) || tm_token_hash(body, len, hash) < 0 ||
            strcmp(hash, PQgetvalue(res, 0, 7)) != 0) {
            tm_api_fail(c, 422, "Idempotency-Key",
                        "this key was used with a different request body in the last 24 hours");
            return;
        }
        /* The first answer again, and nothing created (docs/openapi.yaml). */
        h2o_add_header_by_str(&c->req->pool, &c->req->res.headers, H2O_STRLIT("idempotent-replayed"),
                              0, NULL, H2O_STRLIT("true"));
        tm_api_reply(c, 201, PQgetvalue(res, 0, 8), (size_t)PQgetlength(res, 0, 8));
        return;
    }
    if (PQgetvalue(res, 0, 6)[0] != 't') {
        tm_api_fail(c, 503, NULL, "the database did not answer within api.request_timeout; retry later");
        return;
    }
    /* The same checks and words as `tarmac submit`. */
    if (strcmp(PQgetvalue(res, 0, 1), "0") == 0) {
        snprintf(msg, sizeof(msg), "unknown pool (known: %s)", PQgetvalue(res, 0, 5));
        tm_api_fail(c, 400, "pool", msg);
    } else if (strcmp(PQgetvalue(res, 0, 2), "0") == 0) {
        snprintf(msg, sizeof(msg), "no pool offers this GPU model (known: %s)",
                 PQgetvalue(res, 0, 4));
        tm_api_fail(c, 400, "gpu_model", msg);
    } else {
        snprintf(msg, sizeof(msg), "more GPUs per node than any matching pool offers (%s)",
                 PQgetvalue(res, 0, 3));
        tm_api_fail(c, 400, "gpus", msg);
    }
}

/* The statement's 17 parameters as text, in submit_sql's order; the
 * strings point into spec and s. */
struct submit_text {
    char gpus[16], milli[16], nodes[16], cpu[24], mem[24], prio[16], est[24], dl[24], now[24];
    char until[24];
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

/* The Idempotency-Key header: absent (0), valid (1, copied into key), or
 * refused (-1, answered 400). */
static int idempotency_key(struct api_call *c, char key[256])
{
    ssize_t i;
    h2o_iovec_t v;

    if (!c->req)
        return 0;
    i = h2o_find_header_by_str(&c->req->headers, H2O_STRLIT("idempotency-key"), -1);
    if (i < 0)
        return 0;
    v = c->req->headers.entries[i].value;
    if (v.len == 0 || v.len > 255 ||
        h2o_find_header_by_str(&c->req->headers, H2O_STRLIT("idempotency-key"), i) >= 0) {
        tm_api_fail(c, 400, "Idempotency-Key", "must be given once, 1 to 255 characters");
        return -1;
    }
    for (size_t k = 0; k < v.len; k++) {
        if (v.base[k] < 0x21 || v.base[k] > 0x7e) {
            tm_api_fail(c, 400, "Idempotency-Key", "must be printable ASCII without spaces");
            return -1;
        }
    }
    memcpy(key, v.base, v.len);
    key[v.len] = '\0';
    return 1;
}

/* Whether the request carries an Idempotency-Key (the fast path leaves
 * those to the normal one). */
static bool has_idempotency_key(const struct api_call *c)
{
    return c->req && h2o_find_header_by_str(&c->req->headers, H2O_STRLIT("idempotency-key"), -1) >= 0;
}

void tm_api_jobs_submit(struct api_call *c)
{
    struct tm_job_spec spec;
    struct tm_spec_error err = {0};
    cJSON *root = NULL;
    const char *body;
    size_t len;
    struct submit_text text;
    const char *params[SUBMIT_NPARAMS + 6];
    char key[256], body_hash[TM_TOKEN_HASH_LEN + 1];
    int k;

    if (!tm_api_body(c, &body, &len)) {
        tm_api_call_free(c);
        return;
    }
    if ((k = idempotency_key(c, key)) < 0)
        return;
    if (tm_job_spec_parse_json(body, len, &spec, &root, &err) < 0) {
        tm_api_fail_spec(c, &err);
        return;
    }
    if (c->role == TM_ROLE_ENGINEER && strcmp(spec.team, c->team) != 0) {
        cJSON_Delete(root);
        tm_api_fail(c, 403, "team", "an engineer token submits for its own team only");
        return;
    }
    if (tm_job_fit_check(tm_api_config(c), &spec, &err) < 0) {
        cJSON_Delete(root);
        tm_api_fail_spec(c, &err);
        return;
    }
    submit_params(&spec, tm_api_now_ms(c), &text, params);
    fmt_i64(text.until, sizeof(text.until), wall_deadline_ms(c));
    params[SUBMIT_NPARAMS] = text.until;
    /* env and image (the node agent's) follow each statement's own. */
    char *env = spec.env ? cJSON_PrintUnformatted(spec.env) : NULL;
    if (spec.env && !env) {
        cJSON_Delete(root);
        tm_api_fail(c, 500, NULL, "out of memory");
        return;
    }
    /* pg_uv copies the parameters: the document can go now. */
    if (k == 1 && tm_token_hash(body, len, body_hash) == 0) {
        c->flag = true;
        params[SUBMIT_NPARAMS + 1] = c->hash;
        params[SUBMIT_NPARAMS + 2] = key;
        params[SUBMIT_NPARAMS + 3] = body_hash;
        params[SUBMIT_NPARAMS + 4] = env;
        params[SUBMIT_NPARAMS + 5] = spec.image;
        tm_api_query(c, submit_idem_sql, SUBMIT_NPARAMS + 6, params, on_submit);
    } else {
        params[SUBMIT_NPARAMS + 1] = env;
        params[SUBMIT_NPARAMS + 2] = spec.image;
        tm_api_query(c, submit_sql, SUBMIT_NPARAMS + 3, params, on_submit);
    }
    free(env);
    cJSON_Delete(root);
}

/*
 * The fast path of POST /v1/jobs, through the group commit
 * (controller/io/group_commit.h).  A call whose token is in api.c's
 * authentication cache, whose body parses and whose checks pass here (an
 * engineer's team, the token's rate) becomes one item of a batch; one
 * statement inserts the whole batch (arrays of each column, unnest),
 * checking each row's token again (known, not revoked, same role and
 * team) and that some pool takes the job, and answers each call after
 * its commit.  Each row the statement did not insert, and every row of a
 * batch the database refused as a whole, goes back to the normal path
 * (tm_api_authenticate, then tm_api_jobs_submit), which gives that call
 * exactly the answer it would have had: 401, 403, 400 with its reason, or
 * 201 if the refusal was another row's.  Nothing of a refused row was
 * written, so running it again is safe.  When every batch that may wait
 * is full, newcomers go the normal way.  A refused row goes through the
 * token's rate bucket twice (here, then in the normal path).
 */
#define BATCH_COLS (SUBMIT_NPARAMS + 4)

/* tarmac_submit_batch() (migrations/0023_submit_batch.sql) inserts the
 * rows that pass the checks above and returns each with its ordinal; a
 * PL/pgSQL function, so its statement is planned once per connection.
 * The row's document is made here, from the same template as every other
 * route's. */
static const char batch_sql[] =
    "SELECT b.i, " JOB_JSON " FROM tarmac_submit_batch($1::text[], $2::text[], $3::text[],"
    " $4::int[], $5::int[], $6::int[], $7::bigint[], $8::bigint[], $9::text[], $10::text[],"
    " $11::text[], $12::int[], $13::boolean[], $14::boolean[], $15::bigint[], $16::bigint[],"
    " $17::bigint[], $18::text[], $19::text[], $20::text[], $21::bigint[]) AS b(i, job),"
    " LATERAL (SELECT (b.job).*) j";

static const struct tm_gc_kind submit_kind = {
    .name = "submit",
    .sql = batch_sql,
    .format = TM_GC_ARRAYS,
    .nparams = BATCH_COLS,
    .max_items = 256,
    .max_bytes = 4u << 20,
    /* Two batches in flight keep both of a small machine's cores on inserts
     * while the next batch fills, and leave the rest of serve's pool
     * (pool_size, default 4) to the tick and the other routes. */
    .max_inflight = 2,
    .max_waiting = 2,
};

struct submit_state {
    struct tm_gc *gc;
};

void *tm_api_submit_state_new(void)
{
    return calloc(1, sizeof(struct submit_state));
}

void tm_api_submit_state_free(void *state)
{
    struct submit_state *s = state;

    if (!s)
        return;
    tm_gc_free(s->gc);
    free(s);
}

static void on_committed(const struct tm_gc_result *r, void *data)
{
    struct api_call *c = data;

    if (!c->req) {
        tm_api_call_free(c);
    } else if (r->status == 0 && r->row >= 0) {
        tm_api_reply(c, 201, PQgetvalue(r->res, r->row, 1), (size_t)PQgetlength(r->res, r->row, 1));
    } else if (r->status == 0 || r->status == TM_EDB) {
        /* Not inserted: the normal path answers (see above). */
        tm_api_authenticate(c);
    } else if (!r->sent || r->status == TM_ENOMEM) {
        tm_api_fail(c, 503, NULL, "database unavailable");
    } else {
        /* It may or may not have committed: no retry, as for one job. */
        tm_api_fail_db(c, r->reply);
    }
}

void tm_api_jobs_submit_fast(struct api_call *c)
{
    struct submit_state *s = ((struct tm_api_route_states *)tm_api_route_state(c))->submit;
    struct tm_job_spec spec;
    struct tm_spec_error err = {0};
    cJSON *root = NULL;
    const char *body;
    size_t len;
    struct submit_text text;
    const char *params[BATCH_COLS];

    if (!tm_api_body(c, &body, &len)) {
        tm_api_call_free(c);
        return;
    }
    /* Anything but the plain case: the normal path answers it, in order
     * (authentication first).  An Idempotency-Key is not plain. */
    if (has_idempotency_key(c)) {
        tm_api_authenticate(c);
        return;
    }
    if (tm_job_spec_parse_json(body, len, &spec, &root, &err) < 0) {
        tm_api_authenticate(c);
        return;
    }
    /* The batch carries no env or image: such a job takes the normal path. */
    if (spec.env || spec.image ||
        (c->role == TM_ROLE_ENGINEER && strcmp(spec.team, c->team) != 0) ||
        tm_job_fit_check(tm_api_config(c), &spec, &err) < 0 || !tm_api_rate_take(c)) {
        cJSON_Delete(root);
        tm_api_authenticate(c);
        return;
    }
    submit_params(&spec, tm_api_now_ms(c), &text, params);
    fmt_i64(text.until, sizeof(text.until), wall_deadline_ms(c));
    params[SUBMIT_NPARAMS] = c->hash;
    params[SUBMIT_NPARAMS + 1] = tm_role_name(c->role);
    params[SUBMIT_NPARAMS + 2] = c->team;
    params[SUBMIT_NPARAMS + 3] = text.until;
    /* The group commit copies the values: the document can go now. */
    if (tm_api_group_add(c, &s->gc, &submit_kind, params, on_committed) < 0)
        tm_api_authenticate(c);
    cJSON_Delete(root);
}
