/*
 * controller/api/log_store_s3.c: logs.store: s3.  Each chunk's bytes are one
 * object (tm_log_object_name) in the logs.s3 bucket; PostgreSQL keeps the
 * index rows with data NULL (log_store.h).
 *
 * Order of writes: the index checks the chunks first (logs.c: the node's,
 * the current attempt, the offset the stream expects), so a chunk it
 * refuses writes nothing here; then put, then the ingest transaction, so a
 * row never names an object that was not written.  A crash between the
 * last two, or an index that then refuses what it passed (a resend that
 * won the race), leaves an object no row names; it is never served, the
 * chunk that the stream accepts at that offset later overwrites it, and
 * the retention sweeps the rest (forget, below).

 * put never overwrites an object a row already names: it first reads the
 * streams' next_offset and skips each chunk that starts before it.  Such a
 * chunk is a resend of what the index holds (an agent that restarted after
 * the ingest committed but before it heard so) that the index is about to
 * refuse as an overlap; its bytes are the same, its boundaries need not be,
 * and overwriting the object would make it disagree with its row.
 *
 * forget deletes the objects of the rows the cap or the retention dropped;
 * when a stream's row is gone too (the retention took the whole stream), it
 * also lists the stream's name prefix and deletes whatever is left there:
 * the objects a crash or a refused batch left unnamed.
 *
 * Credentials come from the aws provider's chain (controller/io/
 * aws_credentials.h) configured by logs.s3.credentials; keys never appear
 * in the configuration file, a log line or an error.
 */
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <libpq-fe.h>

#include "controller/api/log_store.h"
#include "controller/io/aws_credentials.h"
#include "controller/io/http_uv.h"
#include "controller/io/pg_uv.h"
#include "controller/io/s3.h"
#include "core/err.h"
#include "core/log.h"

#define S3S_NAME_MAX 320
#define S3S_DELETE_MAX 1000
#define S3S_MSG_MAX 512

struct s3_store {
    struct tm_log_store base; /* first: the interface casts */
    struct tm_http *http;
    struct tm_s3 *s3;
    struct tm_aws_credential_provider *creds;
    char *prefix;
};

int tm_log_object_name(char *buf, size_t size, const char *prefix, const struct tm_log_key *key)
{
    return snprintf(buf, size, "%s%" PRId64 "-%" PRId32 "-%" PRId32 "-%020" PRId64, prefix ? prefix : "",
                    key->job, key->attempt, key->rank, key->offset);
}

static void s3s_name(const struct s3_store *st, const struct tm_log_key *k, char *buf, size_t size)
{
    tm_log_object_name(buf, size, st->prefix, k);
}

/* The arrays of (job, attempt, rank) as PostgreSQL array literals. */
static int s3s_stream_params(const struct tm_log_key *keys, size_t n, char **ret_jobs, char **ret_att,
                             char **ret_rank)
{
    size_t cap = n * 24 + 3;
    char *j = malloc(cap), *a = malloc(cap), *r = malloc(cap);
    size_t lj = 0, la = 0, lr = 0;

    if (!j || !a || !r) {
        free(j);
        free(a);
        free(r);
        return TM_ENOMEM;
    }
    j[lj++] = a[la++] = r[lr++] = '{';
    for (size_t i = 0; i < n; i++) {
        lj += (size_t)snprintf(j + lj, cap - lj, "%s%" PRId64, i ? "," : "", keys[i].job);
        la += (size_t)snprintf(a + la, cap - la, "%s%" PRId32, i ? "," : "", keys[i].attempt);
        lr += (size_t)snprintf(r + lr, cap - lr, "%s%" PRId32, i ? "," : "", keys[i].rank);
    }
    snprintf(j + lj, cap - lj, "}");
    snprintf(a + la, cap - la, "}");
    snprintf(r + lr, cap - lr, "}");
    *ret_jobs = j;
    *ret_att = a;
    *ret_rank = r;
    return 0;
}

/* ---- put --------------------------------------------------------------- */

struct s3s_put {
    struct s3_store *st;
    struct tm_log_piece *pieces; /* our copy of the array; the bytes stay the caller's */
    size_t n, pending;
    int status;
    char message[S3S_MSG_MAX];
    tm_log_done_cb done;
    void *data;
};

static void put_finish(struct s3s_put *p)
{
    p->done(p->status, p->status < 0 ? p->message : NULL, p->data);
    free(p->pieces);
    free(p);
}

static void on_put_object(const struct tm_s3_result *res, void *data)
{
    struct s3s_put *p = data;

    if (res->status < 0 && p->status == 0) {
        p->status = res->status;
        snprintf(p->message, sizeof(p->message), "%s", res->error ? res->error : tm_strerror(res->status));
    }
    if (--p->pending == 0)
        put_finish(p);
}

/* The streams' next offsets are known: write each chunk not yet indexed. */
static void on_put_offsets(const struct tm_pg_reply *reply, void *data)
{
    struct s3s_put *p = data;
    PGresult *res;
    int rows;

    if (reply->status < 0) {
        p->status = reply->status;
        snprintf(p->message, sizeof(p->message), "could not read the streams' offsets: %s",
                 reply->error ? reply->error : tm_strerror(reply->status));
        put_finish(p);
        return;
    }
    res = reply->results[0];
    rows = PQntuples(res);
    p->pending = 1; /* held until every put has started */
    for (size_t i = 0; i < p->n; i++) {
        const struct tm_log_piece *pc = &p->pieces[i];
        char name[S3S_NAME_MAX];
        bool indexed = false;
        int r;

        for (int k = 0; k < rows && !indexed; k++) {
            if (strtoll(PQgetvalue(res, k, 0), NULL, 10) == pc->key.job &&
                strtol(PQgetvalue(res, k, 1), NULL, 10) == pc->key.attempt &&
                strtol(PQgetvalue(res, k, 2), NULL, 10) == pc->key.rank &&
                pc->key.offset < strtoll(PQgetvalue(res, k, 3), NULL, 10))
                indexed = true;
        }
        if (indexed)
            continue;
        s3s_name(p->st, &pc->key, name, sizeof(name));
        r = tm_s3_put(p->st->s3, name, pc->data, pc->len, on_put_object, p);
        if (r < 0) {
            if (p->status == 0) {
                p->status = r;
                snprintf(p->message, sizeof(p->message), "s3 put %s: %s", name, tm_strerror(r));
            }
            break;
        }
        p->pending++;
    }
    if (--p->pending == 0)
        put_finish(p);
}

static int s3s_put(struct tm_log_store *s, const struct tm_log_piece *pieces, size_t n, tm_log_done_cb done,
                   void *data)
{
    struct s3_store *st = (struct s3_store *)s;
    struct s3s_put *p;
    struct tm_log_key *keys;
    char *jobs = NULL, *att = NULL, *rank = NULL;
    int r;

    if (!pieces || n == 0 || !done)
        return TM_EINVAL;
    p = calloc(1, sizeof(*p));
    keys = calloc(n, sizeof(*keys));
    if (!p || !keys || !(p->pieces = malloc(n * sizeof(*pieces)))) {
        if (p)
            free(p->pieces);
        free(p);
        free(keys);
        return TM_ENOMEM;
    }
    memcpy(p->pieces, pieces, n * sizeof(*pieces));
    p->st = st;
    p->n = n;
    p->done = done;
    p->data = data;
    for (size_t i = 0; i < n; i++)
        keys[i] = pieces[i].key;
    r = s3s_stream_params(keys, n, &jobs, &att, &rank);
    free(keys);
    if (r == 0) {
        const char *params[] = {jobs, att, rank};

        r = tm_pg_pool_query(st->base.pool,
                             "SELECT t.job_id, t.attempt, t.rank, t.next_offset FROM job_log_streams t"
                             " JOIN unnest($1::bigint[], $2::int[], $3::int[]) u(j, a, r)"
                             " ON t.job_id = u.j AND t.attempt = u.a AND t.rank = u.r",
                             3, params, on_put_offsets, p);
    }
    free(jobs);
    free(att);
    free(rank);
    if (r < 0) {
        free(p->pieces);
        free(p);
    }
    return r;
}

/* ---- get --------------------------------------------------------------- */

struct s3s_get {
    size_t len;
    tm_log_get_cb cb;
    void *data;
};

static void on_get_object(const struct tm_s3_result *res, void *data)
{
    struct s3s_get *g = data;

    if (res->status < 0)
        g->cb(res->status, res->error, NULL, 0, g->data);
    else
        g->cb(0, NULL, (const unsigned char *)res->body, res->body_len, g->data);
    free(g);
}

static int s3s_get(struct tm_log_store *s, const struct tm_log_key *key, size_t len, tm_log_get_cb cb,
                   void *data)
{
    struct s3_store *st = (struct s3_store *)s;
    struct s3s_get *g;
    char name[S3S_NAME_MAX];
    int r;

    if (!key || !cb)
        return TM_EINVAL;
    g = calloc(1, sizeof(*g));
    if (!g)
        return TM_ENOMEM;
    g->len = len;
    g->cb = cb;
    g->data = data;
    s3s_name(st, key, name, sizeof(name));
    /* One byte more than the row says, so that an object longer than its
     * row shows as a length mismatch rather than as a cut answer. */
    r = tm_s3_get(st->s3, name, 0, 0, len + 1, on_get_object, g);
    if (r < 0)
        free(g);
    return r;
}

/* ---- forget ------------------------------------------------------------ */

struct s3s_forget {
    struct s3_store *st;
    char **names;           /* the rows' objects, then each swept stream's */
    size_t nnames, next;    /* deleted up to next */
    char **sweep;           /* stream name prefixes whose rows are gone */
    size_t nsweep, sweep_at;
    int status;
    char message[S3S_MSG_MAX];
    tm_log_done_cb done;
    void *data;
};

static void forget_step(struct s3s_forget *f);

static void forget_names_free(struct s3s_forget *f)
{
    for (size_t i = 0; i < f->nnames; i++)
        free(f->names[i]);
    free(f->names);
    f->names = NULL;
    f->nnames = f->next = 0;
}

static void forget_finish(struct s3s_forget *f)
{
    f->done(f->status, f->status < 0 ? f->message : NULL, f->data);
    forget_names_free(f);
    for (size_t i = 0; i < f->nsweep; i++)
        free(f->sweep[i]);
    free(f->sweep);
    free(f);
}

static void forget_fail(struct s3s_forget *f, int status, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static void forget_fail(struct s3s_forget *f, int status, const char *fmt, ...)
{
    va_list ap;

    f->status = status;
    va_start(ap, fmt);
    vsnprintf(f->message, sizeof(f->message), fmt, ap);
    va_end(ap);
    forget_finish(f);
}

static void on_deleted(const struct tm_s3_result *res, void *data)
{
    struct s3s_forget *f = data;

    if (res->status < 0) {
        forget_fail(f, res->status, "%s", res->error ? res->error : tm_strerror(res->status));
        return;
    }
    forget_step(f);
}

/* One page of a swept stream: delete it, then list again until empty. */
static void on_swept_page(const struct tm_s3_result *res, void *data)
{
    struct s3s_forget *f = data;

    if (res->status < 0) {
        forget_fail(f, res->status, "%s", res->error ? res->error : tm_strerror(res->status));
        return;
    }
    if (res->nkeys == 0) {
        f->sweep_at++;
        forget_step(f);
        return;
    }
    f->names = calloc(res->nkeys, sizeof(*f->names));
    if (!f->names) {
        forget_fail(f, TM_ENOMEM, "out of memory");
        return;
    }
    for (size_t i = 0; i < res->nkeys; i++) {
        f->names[i] = strdup(res->keys[i]);
        if (!f->names[i]) {
            f->nnames = i;
            forget_fail(f, TM_ENOMEM, "out of memory");
            return;
        }
    }
    f->nnames = res->nkeys;
    f->next = 0;
    forget_step(f);
}

/* Delete what is listed in names, 1000 a request; then sweep the next
 * stream, if any; then answer. */
static void forget_step(struct s3s_forget *f)
{
    int r;

    if (f->next < f->nnames) {
        size_t k = f->nnames - f->next < S3S_DELETE_MAX ? f->nnames - f->next : S3S_DELETE_MAX;

        r = tm_s3_delete(f->st->s3, (const char *const *)f->names + f->next, k, on_deleted, f);
        if (r < 0) {
            forget_fail(f, r, "s3 delete: %s", tm_strerror(r));
            return;
        }
        f->next += k;
        return;
    }
    forget_names_free(f);
    if (f->sweep_at < f->nsweep) {
        r = tm_s3_list(f->st->s3, f->sweep[f->sweep_at], NULL, 0, on_swept_page, f);
        if (r < 0)
            forget_fail(f, r, "s3 list %s: %s", f->sweep[f->sweep_at], tm_strerror(r));
        return;
    }
    forget_finish(f);
}

/* Which of the keys' streams have no row left: sweep their prefixes. */
static void on_gone_streams(const struct tm_pg_reply *reply, void *data)
{
    struct s3s_forget *f = data;
    PGresult *res;
    int rows;

    if (reply->status < 0) {
        /* The rows' objects go anyway; objects no row named stay in the
         * bucket (never served), so say so. */
        tm_log_warn("could not tell which log streams are gone; unindexed objects stay",
                    "err=\"%s\"", reply->error ? reply->error : tm_strerror(reply->status));
        forget_step(f);
        return;
    }
    res = reply->results[0];
    rows = PQntuples(res);
    f->sweep = rows > 0 ? calloc((size_t)rows, sizeof(*f->sweep)) : NULL;
    for (int k = 0; f->sweep && k < rows; k++) {
        char prefix[S3S_NAME_MAX];

        snprintf(prefix, sizeof(prefix), "%s%s-%s-%s-", f->st->prefix, PQgetvalue(res, k, 0),
                 PQgetvalue(res, k, 1), PQgetvalue(res, k, 2));
        f->sweep[f->nsweep] = strdup(prefix);
        if (f->sweep[f->nsweep])
            f->nsweep++;
    }
    forget_step(f);
}

static int s3s_forget(struct tm_log_store *s, const struct tm_log_key *keys, size_t n, tm_log_done_cb done,
                      void *data)
{
    struct s3_store *st = (struct s3_store *)s;
    struct s3s_forget *f;
    char *jobs = NULL, *att = NULL, *rank = NULL;
    int r;

    if (!keys || n == 0 || !done)
        return TM_EINVAL;
    f = calloc(1, sizeof(*f));
    if (!f || !(f->names = calloc(n, sizeof(*f->names)))) {
        free(f);
        return TM_ENOMEM;
    }
    f->st = st;
    f->done = done;
    f->data = data;
    for (size_t i = 0; i < n; i++) {
        char name[S3S_NAME_MAX];

        s3s_name(st, &keys[i], name, sizeof(name));
        f->names[i] = strdup(name);
        if (!f->names[i]) {
            f->nnames = i;
            forget_names_free(f);
            free(f);
            return TM_ENOMEM;
        }
    }
    f->nnames = n;
    r = s3s_stream_params(keys, n, &jobs, &att, &rank);
    if (r == 0) {
        const char *params[] = {jobs, att, rank};

        r = tm_pg_pool_query(st->base.pool,
                             "SELECT DISTINCT u.j, u.a, u.r FROM unnest($1::bigint[], $2::int[], $3::int[]) u(j, a, r)"
                             " WHERE NOT EXISTS (SELECT 1 FROM job_log_streams t"
                             "  WHERE t.job_id = u.j AND t.attempt = u.a AND t.rank = u.r)",
                             3, params, on_gone_streams, f);
    }
    free(jobs);
    free(att);
    free(rank);
    if (r < 0) {
        forget_names_free(f);
        free(f);
    }
    return r;
}

/* ---- open and free ------------------------------------------------------ */

static void http_closed(void *data)
{
    (void)data;
}

static void creds_closed(void *data)
{
    struct tm_http *http = data;

    tm_http_close(http, http_closed, NULL);
}

static void s3s_free(struct tm_log_store *s)
{
    struct s3_store *st = (struct s3_store *)s;

    tm_s3_close(st->s3);
    if (st->creds)
        tm_aws_credential_provider_close(st->creds, creds_closed, st->http);
    else if (st->http)
        tm_http_close(st->http, NULL, NULL);
    free(st->prefix);
    free(st);
}

static int cred_get(void *source, tm_s3_cred_cb cb, void *data)
{
    return tm_aws_credential_provider_get(source, cb, data);
}

static const struct tm_log_store_ops s3_store_ops = {
    .name = "s3",
    .inline_bytes = false,
    .put = s3s_put,
    .get = s3s_get,
    .forget = s3s_forget,
    .free = s3s_free,
};

/* The endpoint as the AWS tools pick it: the setting, AWS_ENDPOINT_URL_S3,
 * AWS_ENDPOINT_URL, else AWS's own for the region. */
static void s3s_endpoint(const char *config_endpoint, const char *region, char *out, size_t size)
{
    const char *e = config_endpoint;

    if (!e || !*e)
        e = getenv("AWS_ENDPOINT_URL_S3");
    if (!e || !*e)
        e = getenv("AWS_ENDPOINT_URL");
    if (e && *e)
        snprintf(out, size, "%s", e);
    else
        snprintf(out, size, "https://s3.%s.amazonaws.com", region);
}

static int s3s_open(uv_loop_t *loop, struct tm_pg_pool *pool, const struct tm_config *cfg,
                    struct tm_log_store **ret)
{
    const struct tm_config_logs_s3 *c = cfg ? &cfg->logs.s3 : NULL;
    struct tm_aws_credential_options co;
    struct s3_store *st;
    char region[64], endpoint[512], err[256] = "";
    int r;

    if (!c || !c->bucket) {
        tm_log_error("could not open the log store", "logs.store=s3 err=\"logs.s3.bucket is not set\"");
        return TM_EINVAL;
    }
    r = tm_aws_credential_options_from_config(&c->credentials, &co);
    if (r < 0) {
        tm_log_error("could not open the log store", "logs.store=s3 err=\"logs.s3.credentials.source: unknown\"");
        return r;
    }
    if (c->timeout_ms > 0)
        co.imds_timeout_ms = c->timeout_ms < 2000 ? c->timeout_ms : 2000;
    r = tm_aws_region_resolve(c->region, &co, region, sizeof(region), err, sizeof(err));
    if (r < 0) {
        tm_log_error("could not open the log store", "logs.store=s3 err=\"logs.s3.region: %s\"",
                     err[0] ? err : "not set, and no AWS_REGION or profile region");
        return TM_EINVAL;
    }
    s3s_endpoint(c->endpoint, region, endpoint, sizeof(endpoint));
    st = calloc(1, sizeof(*st));
    if (!st)
        return TM_ENOMEM;
    st->base.ops = &s3_store_ops;
    st->base.loop = loop;
    st->base.pool = pool;
    st->prefix = strdup(c->prefix ? c->prefix : "");
    r = st->prefix ? tm_http_create(loop, &st->http) : TM_ENOMEM;
    if (r == 0) {
        struct tm_s3_options o = {
            .endpoint = endpoint,
            .region = region,
            .bucket = c->bucket,
            .timeout_ms = c->timeout_ms,
        };

        r = tm_s3_create(loop, st->http, &o, &st->s3, err, sizeof(err));
        if (r < 0)
            tm_log_error("could not open the log store", "logs.store=s3 err=\"logs.s3.%s\"", err);
    }
    if (r == 0)
        r = tm_aws_credential_provider_create(loop, st->http, &co, &st->creds);
    if (r < 0) {
        s3s_free(&st->base);
        return r;
    }
    tm_s3_set_credential_source(st->s3, cred_get, st->creds);
    tm_log_info("log store open", "logs.store=s3 bucket=%s endpoint=%s region=%s prefix=%s", c->bucket, endpoint,
                region, st->prefix);
    *ret = &st->base;
    return 0;
}

const struct tm_log_store_kind tm_log_store_s3 = {"s3", s3s_open};
