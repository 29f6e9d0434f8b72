/*
 * controller/io/group_commit.c: the group commit (group_commit.h).
 *
 * Open batches form a FIFO: items go into the last one, the first one is
 * sent when a slot is free, as a prepared statement (each connection plans
 * the kind's statement once).  pg_uv copies a statement's parameters when it
 * is queued, so a batch's text buffers are reused at once; what waits for
 * the reply is a flight: the items' callbacks and nothing else.  When a
 * flight comes back the next batch is sent before its items are answered,
 * so an item a callback adds can never overtake one that was waiting.
 *
 * A gate keeps the group commits that yield to it in a list, to send what
 * they held when it opens again (lowered, or its bound ran out).
 */
#include "controller/io/group_commit.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/err.h"
#include "core/log.h"
#include "core/text.h"

struct gc_item {
    tm_gc_cb cb;
    void *data;
    uint64_t deadline;
};

struct gc_batch {
    struct gc_batch *next;
    unsigned n;
    size_t bytes;
    struct tm_text *param;   /* kind->nparams */
    struct tm_text blob;     /* kind->blob: the items' bytes */
    struct gc_item *items;   /* kind->max_items */
};

struct gc_flight {
    struct tm_gc *gc;
    unsigned n;
    struct gc_item items[];
};

struct tm_gc {
    uv_loop_t *loop;
    struct tm_pg_pool *pool;
    const struct tm_gc_kind *kind;
    struct gc_batch *head, *tail; /* open batches, oldest first */
    struct gc_batch *spare;       /* one emptied batch kept for reuse */
    unsigned nwaiting;
    unsigned inflight;
    unsigned pending;             /* items added, not yet answered */
    bool freed;                   /* tm_gc_free() ran: free when the last flight is back */
    bool answering;               /* inside on_flight: gc must outlive its loop */
    struct tm_gc_gate *gate;      /* kind->yields: the gate it waits on, or NULL */
    char stmt[48];                /* the prepared statement's name */
};

enum gate_state {
    GATE_OPEN,
    GATE_HELD,    /* raised, within its bound */
    GATE_SPENT,   /* raised past its bound: open until lowered */
};

struct tm_gc_gate {
    uv_timer_t timer;             /* first: the close callback frees the gate */
    uint64_t max_hold_ms;
    enum gate_state state;
    uint64_t expired;
    unsigned inflight;            /* batches of its group commits in flight */
    uint64_t raised_at;           /* uv_now() of the last raise */
    uint64_t drain_ms;            /* from the last raise until inflight was 0 */
    bool draining;                /* raised, and batches still in flight */
    struct tm_gc **gcs;           /* the yielding group commits; NULL slots are free */
    size_t ngcs;
};

static bool gc_held(const struct tm_gc *gc)
{
    return gc->gate && gc->gate->state == GATE_HELD;
}

/* One of gc's batches came back: the gate's in-flight count, and when it
 * reaches none after a raise, how long that took. */
static void gate_flight_back(struct tm_gc *gc)
{
    struct tm_gc_gate *g = gc->gate;

    if (!g || g->inflight == 0)
        return;
    if (--g->inflight == 0 && g->draining) {
        g->draining = false;
        g->drain_ms = uv_now(g->timer.loop) - g->raised_at;
    }
}

static void batch_free(const struct tm_gc_kind *kind, struct gc_batch *b)
{
    if (!b)
        return;
    for (unsigned k = 0; b->param && k < kind->nparams; k++)
        free(b->param[k].p);
    free(b->blob.p);
    free(b->param);
    free(b->items);
    free(b);
}

static struct gc_batch *batch_new(struct tm_gc *gc)
{
    struct gc_batch *b = gc->spare;

    if (b) {
        gc->spare = NULL;
        return b;
    }
    b = calloc(1, sizeof(*b));
    if (!b)
        return NULL;
    b->param = calloc(gc->kind->nparams, sizeof(b->param[0]));
    b->items = calloc(gc->kind->max_items, sizeof(b->items[0]));
    if (!b->param || !b->items) {
        batch_free(gc->kind, b);
        return NULL;
    }
    return b;
}

static void batch_recycle(struct tm_gc *gc, struct gc_batch *b)
{
    for (unsigned k = 0; k < gc->kind->nparams; k++)
        tm_text_cut(&b->param[k], 0);
    tm_text_cut(&b->blob, 0);
    b->n = 0;
    b->bytes = 0;
    b->next = NULL;
    if (gc->spare)
        batch_free(gc->kind, b);
    else
        gc->spare = b;
}

/* One array element: NULL, or the value quoted with '"' and '\' escaped. */
static bool array_elem(struct tm_text *t, const char *v)
{
    if (!tm_text_add(t, t->len ? "," : "{", 1))
        return false;
    if (!v)
        return tm_text_add(t, "NULL", 4);
    if (!tm_text_add(t, "\"", 1))
        return false;
    for (const char *s = v; *s;) {
        size_t n = strcspn(s, "\"\\");
        if (!tm_text_add(t, s, n))
            return false;
        s += n;
        if (*s) {
            char esc[2] = {'\\', *s};
            if (!tm_text_add(t, esc, 2))
                return false;
            s++;
        }
    }
    return tm_text_add(t, "\"", 1);
}

/* The item's object with "i" first: {"i":N,<rest>. */
static bool json_elem(struct tm_text *t, unsigned ordinal, const char *v)
{
    char head[32];
    const char *rest = v + 1;
    int n;

    while (*rest == ' ' || *rest == '\t' || *rest == '\n' || *rest == '\r')
        rest++;
    n = snprintf(head, sizeof(head), "%s{\"i\":%u%s", t->len ? "," : "[", ordinal,
                 *rest == '}' ? "" : ",");
    return n > 0 && (size_t)n < sizeof(head) && tm_text_add(t, head, (size_t)n) &&
           tm_text_add(t, rest, strlen(rest));
}

/* Append the item's values; false (and b as it was) when they do not fit. */
static bool batch_append(const struct tm_gc_kind *kind, struct gc_batch *b,
                         const char *const *values, const void *blob, size_t nblob)
{
    size_t before[TM_GC_MAX_PARAMS], bytes = nblob, blob_before = b->blob.len;
    bool ok = true;

    for (unsigned k = 0; k < kind->nparams; k++)
        before[k] = b->param[k].len;
    if (kind->format == TM_GC_JSON)
        ok = json_elem(&b->param[0], b->n + 1, values[0]);
    else
        for (unsigned k = 0; ok && k < kind->nparams; k++)
            ok = array_elem(&b->param[k], values[k]);
    if (ok && nblob)
        ok = tm_text_add(&b->blob, blob, nblob);
    for (unsigned k = 0; k < kind->nparams; k++)
        bytes += b->param[k].len - before[k];
    /* The first item of a batch always goes: one too big for any batch is
     * refused by the statement, not starved here. */
    if (!ok || (b->n > 0 && b->bytes + bytes > kind->max_bytes)) {
        for (unsigned k = 0; k < kind->nparams; k++)
            tm_text_cut(&b->param[k], before[k]);
        tm_text_cut(&b->blob, blob_before);
        return false;
    }
    b->bytes += bytes;
    return true;
}

static void answer(struct tm_gc *gc, const struct gc_item *it, const struct tm_gc_result *r)
{
    gc->pending--;
    it->cb(r, it->data);
}

static void gc_release(struct tm_gc *gc);
static void send_next(struct tm_gc *gc);

static void on_flight(const struct tm_pg_reply *reply, void *data)
{
    struct gc_flight *f = data;
    struct tm_gc *gc = f->gc;
    struct tm_gc_result r = {.status = reply->status, .sent = true, .reply = reply, .row = -1};
    int *rows = NULL; /* per item: its first row, then how many */

    gc->inflight--;
    gate_flight_back(gc);
    gc->answering = true;
    if (reply->status == TM_EDB)
        tm_log_warn("group commit: batch refused as a whole",
                    "kind=%s items=%u error=\"%s\" sqlstate=%s", gc->kind->name, f->n,
                    reply->error ? reply->error : "-", reply->sqlstate ? reply->sqlstate : "-");
    /* What waited goes now, before any callback can add more. */
    if (!gc->freed)
        send_next(gc);
    if (reply->status == 0 && reply->nresults > 0) {
        r.res = reply->results[reply->nresults - 1];
        rows = malloc(2 * f->n * sizeof(rows[0]));
        if (rows) {
            for (unsigned i = 0; i < f->n; i++) {
                rows[2 * i] = -1;
                rows[2 * i + 1] = 0;
            }
            for (int k = 0; k < PQntuples(r.res); k++) {
                char *end;
                long i = strtol(PQgetvalue(r.res, k, 0), &end, 10) - 1;
                if (*end != '\0' || i < 0 || (unsigned long)i >= f->n)
                    continue;
                if (rows[2 * i] < 0)
                    rows[2 * i] = k;
                rows[2 * i + 1]++;
            }
        } else {
            /* Committed, but no memory to say which row is whose: each
             * item fails as one whose batch may have been written. */
            r.status = TM_ENOMEM;
        }
    }
    for (unsigned i = 0; i < f->n; i++) {
        r.row = rows ? rows[2 * i] : -1;
        r.nrows = rows ? rows[2 * i + 1] : 0;
        answer(gc, &f->items[i], &r);
    }
    free(rows);
    free(f);
    gc->answering = false;
    if (gc->freed)
        gc_release(gc);
}

/* Answer every item of b with status, unsent. */
static void fail_batch(struct tm_gc *gc, struct gc_batch *b, int status)
{
    struct tm_gc_result r = {.status = status, .sent = false, .row = -1};

    for (unsigned i = 0; i < b->n; i++)
        answer(gc, &b->items[i], &r);
}

/* Send the oldest open batch while a slot is free. */
static void send_next(struct tm_gc *gc)
{
    while (gc->head && gc->inflight < gc->kind->max_inflight && !gc_held(gc)) {
        struct gc_batch *b = gc->head;
        const struct tm_gc_kind *kind = gc->kind;
        struct gc_flight *f;
        const char *params[TM_GC_MAX_PARAMS + 1];
        int lengths[TM_GC_MAX_PARAMS + 1] = {0}, formats[TM_GC_MAX_PARAMS + 1] = {0};
        uint64_t now = uv_now(gc->loop), left = UINT64_MAX;
        int r = 0;

        gc->head = b->next;
        if (!gc->head)
            gc->tail = NULL;
        gc->nwaiting--;
        f = malloc(sizeof(*f) + b->n * sizeof(f->items[0]));
        for (unsigned k = 0; f && k < kind->nparams; k++) {
            if (!tm_text_add(&b->param[k], kind->format == TM_GC_JSON ? "]" : "}", 1))
                r = TM_ENOMEM;
            params[k] = b->param[k].p;
        }
        if (!f)
            r = TM_ENOMEM;
        /* The batch waits no longer than its most pressed item may. */
        for (unsigned i = 0; i < b->n; i++) {
            uint64_t l = b->items[i].deadline > now ? b->items[i].deadline - now : 0;
            if (l < left)
                left = l;
        }
        if (r == 0 && left == 0)
            r = -ETIMEDOUT;
        if (left < kind->min_flight_ms)
            left = kind->min_flight_ms;
        /* A database the pool knows is gone: an answer now, not at the deadline. */
        if (r == 0 && tm_pg_pool_down(gc->pool))
            r = TM_EUNAVAIL;
        if (r == 0) {
            f->gc = gc;
            f->n = b->n;
            memcpy(f->items, b->items, b->n * sizeof(f->items[0]));
            if (kind->blob && b->blob.len > INT32_MAX)
                r = TM_EINVAL;
            else if (kind->blob) {
                /* No bytes at all is an empty bytea, not SQL NULL. */
                params[kind->nparams] = b->blob.p ? b->blob.p : "";
                lengths[kind->nparams] = (int)b->blob.len;
                formats[kind->nparams] = 1;
                r = tm_pg_pool_query_prepared_bin_until(gc->pool, gc->stmt, kind->sql, (int)kind->nparams + 1,
                                                        params, lengths, formats, left, on_flight, f);
            } else
                r = tm_pg_pool_query_prepared_until(gc->pool, gc->stmt, kind->sql, (int)kind->nparams,
                                                    params, left, on_flight, f);
        }
        if (r < 0) {
            tm_log_warn("group commit: could not queue a statement", "kind=%s items=%u error=\"%s\"",
                        kind->name, b->n, tm_strerror(r));
            free(f);
            fail_batch(gc, b, r);
        } else {
            gc->inflight++;
            if (gc->gate)
                gc->gate->inflight++;
        }
        batch_recycle(gc, b);
    }
}

struct tm_gc *tm_gc_new(uv_loop_t *loop, struct tm_pg_pool *pool, const struct tm_gc_kind *kind)
{
    struct tm_gc *gc;

    if (!loop || !pool || !kind || !kind->sql || kind->nparams == 0 || kind->nparams > TM_GC_MAX_PARAMS || kind->max_items == 0 ||
        kind->max_inflight == 0 || (kind->format == TM_GC_JSON && kind->nparams != 1))
        return NULL;
    gc = calloc(1, sizeof(*gc));
    if (!gc)
        return NULL;
    gc->loop = loop;
    gc->pool = pool;
    gc->kind = kind;
    snprintf(gc->stmt, sizeof(gc->stmt), "tm_gc_%.32s", kind->name ? kind->name : "batch");
    return gc;
}

int tm_gc_add(struct tm_gc *gc, const char *const *values, uint64_t deadline, tm_gc_cb cb,
              void *data)
{
    return tm_gc_add_blob(gc, values, NULL, 0, deadline, cb, data);
}

int tm_gc_add_blob(struct tm_gc *gc, const char *const *values, const void *bytes, size_t n,
                   uint64_t deadline, tm_gc_cb cb, void *data)
{
    const struct tm_gc_kind *kind = gc->kind;
    unsigned max_waiting = kind->max_waiting ? kind->max_waiting : 1;
    struct gc_batch *b = gc->tail;

    if (kind->format == TM_GC_JSON && (!values[0] || values[0][0] != '{'))
        return TM_EINVAL;
    if (n && (!kind->blob || !bytes))
        return TM_EINVAL;
    if (!b || b->n >= kind->max_items || !batch_append(kind, b, values, bytes, n)) {
        if (gc->nwaiting >= max_waiting)
            return -EAGAIN;
        b = batch_new(gc);
        if (!b)
            return TM_ENOMEM;
        if (!batch_append(kind, b, values, bytes, n)) {
            batch_recycle(gc, b);
            return TM_ENOMEM;
        }
        if (gc->tail)
            gc->tail->next = b;
        else
            gc->head = b;
        gc->tail = b;
        gc->nwaiting++;
    }
    b->items[b->n++] = (struct gc_item){.cb = cb, .data = data, .deadline = deadline};
    gc->pending++;
    send_next(gc);
    return 0;
}

unsigned tm_gc_pending(const struct tm_gc *gc)
{
    return gc ? gc->pending : 0;
}

static void gc_release(struct tm_gc *gc)
{
    if (gc->inflight > 0 || gc->answering)
        return;
    batch_free(gc->kind, gc->spare);
    free(gc);
}

/* ---- the gate ---------------------------------------------------------- */

static void gate_forget(struct tm_gc *gc)
{
    struct tm_gc_gate *g = gc->gate;

    for (unsigned k = 0; g && k < gc->inflight; k++)
        gate_flight_back(gc);
    for (size_t i = 0; g && i < g->ngcs; i++)
        if (g->gcs[i] == gc)
            g->gcs[i] = NULL;
    gc->gate = NULL;
}

void tm_gc_set_gate(struct tm_gc *gc, struct tm_gc_gate *gate)
{
    struct tm_gc **slot = NULL;

    if (!gc || !gc->kind->yields || gc->gate == gate)
        return;
    gate_forget(gc);
    if (!gate)
        return;
    for (size_t i = 0; i < gate->ngcs && !slot; i++)
        if (!gate->gcs[i])
            slot = &gate->gcs[i];
    if (!slot) {
        struct tm_gc **grown = realloc(gate->gcs, (gate->ngcs + 1) * sizeof(gate->gcs[0]));
        /* Without memory the kind goes ungated: never held, never lost. */
        if (!grown)
            return;
        gate->gcs = grown;
        slot = &gate->gcs[gate->ngcs++];
    }
    *slot = gc;
    gc->gate = gate;
    gate->inflight += gc->inflight;
}

/* Send what every yielding group commit held.  A callback of an item
 * that fails at once may free a group commit: its slot turns NULL. */
static void gate_open(struct tm_gc_gate *g, enum gate_state to)
{
    g->state = to;
    uv_timer_stop(&g->timer);
    for (size_t i = 0; i < g->ngcs; i++)
        if (g->gcs[i] && !g->gcs[i]->freed)
            send_next(g->gcs[i]);
}

static void on_gate_expired(uv_timer_t *t)
{
    struct tm_gc_gate *g = (struct tm_gc_gate *)t;

    g->expired++;
    tm_log_debug("group commit: gate held past its bound, let go", "max_hold_ms=%" PRIu64, g->max_hold_ms);
    gate_open(g, GATE_SPENT);
}

struct tm_gc_gate *tm_gc_gate_new(uv_loop_t *loop, uint64_t max_hold_ms)
{
    struct tm_gc_gate *g;

    if (!loop || max_hold_ms == 0)
        return NULL;
    g = calloc(1, sizeof(*g));
    if (!g)
        return NULL;
    uv_timer_init(loop, &g->timer);
    g->max_hold_ms = max_hold_ms;
    return g;
}

void tm_gc_gate_raise(struct tm_gc_gate *gate)
{
    if (!gate || gate->state != GATE_OPEN)
        return;
    gate->state = GATE_HELD;
    gate->raised_at = uv_now(gate->timer.loop);
    gate->draining = gate->inflight > 0;
    gate->drain_ms = 0;
    uv_timer_start(&gate->timer, on_gate_expired, gate->max_hold_ms, 0);
}

void tm_gc_gate_lower(struct tm_gc_gate *gate)
{
    if (gate)
        gate_open(gate, GATE_OPEN);
}

bool tm_gc_gate_holding(const struct tm_gc_gate *gate)
{
    return gate && gate->state == GATE_HELD;
}

uint64_t tm_gc_gate_expired(const struct tm_gc_gate *gate)
{
    return gate ? gate->expired : 0;
}

unsigned tm_gc_gate_inflight(const struct tm_gc_gate *gate)
{
    return gate ? gate->inflight : 0;
}

uint64_t tm_gc_gate_drain_ms(const struct tm_gc_gate *gate)
{
    if (!gate)
        return 0;
    if (gate->draining)
        return uv_now(gate->timer.loop) - gate->raised_at;
    return gate->drain_ms;
}

static void on_gate_closed(uv_handle_t *h)
{
    free(h);
}

void tm_gc_gate_close(struct tm_gc_gate *gate)
{
    if (!gate)
        return;
    gate_open(gate, GATE_OPEN);
    for (size_t i = 0; i < gate->ngcs; i++)
        if (gate->gcs[i])
            gate->gcs[i]->gate = NULL;
    free(gate->gcs);
    gate->gcs = NULL;
    gate->ngcs = 0;
    uv_close((uv_handle_t *)&gate->timer, on_gate_closed);
}

void tm_gc_free(struct tm_gc *gc)
{
    if (!gc)
        return;
    gate_forget(gc);
    gc->freed = true;
    while (gc->head) {
        struct gc_batch *b = gc->head;
        gc->head = b->next;
        fail_batch(gc, b, TM_ECANCELED);
        batch_free(gc->kind, b);
    }
    gc->tail = NULL;
    gc->nwaiting = 0;
    gc_release(gc);
}
