/*
 * controller/io/group_commit.h: one group commit for everything agents and
 * clients send many of (submissions, heartbeats, log chunks).
 *
 * A kind (struct tm_gc_kind) is one batch statement: it takes every item of
 * a batch in one transaction and answers a row per item it wrote (or
 * several, one after the other), whose first column is the item's ordinal
 * in the batch (1, 2, ...).  A caller
 * adds an item (its values for each parameter, a deadline, a callback); the
 * item goes into the open batch.  A batch is sent at once while fewer than
 * max_inflight of the kind are in flight, else it fills until one comes
 * back, so under load items share transactions and with none there is no
 * wait.  A full batch (max_items, max_bytes) is followed by another, up to
 * max_waiting unsent ones; past that tm_gc_add() refuses the item and the
 * caller handles it alone.  Batches are sent in the order they were opened
 * and items keep their order within a batch.
 *
 * Each item's callback fires exactly once, on the loop, after its batch's
 * statement has come back, or at once (from inside tm_gc_add() too) when
 * the batch cannot be sent; after tm_gc_add() returns 0 the item's data
 * belongs to its callback:
 *   - status 0, row >= 0: the statement committed and row is the item's
 *     row in res (valid during the callback only), the first of nrows when
 *     the statement answers several for an item (it must return them
 *     together: ORDER BY the ordinal);
 *   - status 0, row -1: the statement committed but wrote nothing for
 *     this item (a check in the statement refused it);
 *   - status TM_EDB: the database refused the batch as a whole; nothing
 *     of it was written, so running the item again alone is safe (the
 *     caller's way of isolating a bad item);
 *   - status < 0 with sent true: the connection broke or the deadline
 *     passed in flight: it may or may not have committed;
 *   - status < 0 with sent false: it never reached the database (the pool
 *     is down, its deadline passed while waiting, or shutdown: TM_ECANCELED).
 * Durability is the statement's own: an item is answered after its commit.
 *
 * Parameters.  TM_GC_ARRAYS: parameter k is a PostgreSQL array literal of
 * every item's values[k] (NULL: SQL NULL); the statement reads them with
 * unnest(...) WITH ORDINALITY.  TM_GC_JSON: one parameter, a JSON array of
 * the items' objects (values[0], a JSON object as text), each with "i" (its
 * ordinal) added first.  A kind with blob set takes one more parameter,
 * $nparams+1, in binary: the items' bytes (tm_gc_add_blob) one after
 * another in the items' order, so a statement that knows each item's
 * length finds its bytes there with no text encoding on either side.
 *
 * Priority.  A kind with yields set is low priority: a group commit of it
 * that was given a gate (tm_gc_set_gate) sends no batch while the gate is
 * raised; its items keep filling batches (up to max_waiting, as when its
 * slots are all in flight), and what waited goes as soon as the gate is
 * lowered.  Whoever raises the gate (the controller, around its tick)
 * thereby keeps the database's CPU for its own statements.  The hold is
 * bounded: a gate raised longer than its max_hold_ms lets everything go
 * as if lowered, and holds nothing more until it is lowered and raised
 * again, so a raise that is never lowered cannot starve a kind.  Batches
 * already in flight are not recalled, and the gate decides only when a
 * batch is sent: an item is answered after its commit as ever.
 */
#ifndef TM_GROUP_COMMIT_H
#define TM_GROUP_COMMIT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <libpq-fe.h>
#include <uv.h>

#include "controller/io/pg_uv.h"

enum tm_gc_format { TM_GC_ARRAYS, TM_GC_JSON };

#define TM_GC_MAX_PARAMS 32

struct tm_gc_kind {
    const char *name;       /* for logs and the prepared statement: "submit"; unique per pool */
    const char *sql;        /* the batch statement, $1..$nparams */
    enum tm_gc_format format;
    unsigned nparams;       /* TM_GC_JSON: 1 */
    unsigned max_items;     /* items per batch */
    size_t max_bytes;       /* parameter text per batch */
    unsigned max_inflight;  /* batches of this kind in flight at once */
    unsigned max_waiting;   /* full or filling batches not yet sent (at least 1) */
    bool blob;              /* a last, binary parameter: the items' bytes (tm_gc_add_blob) */
    /* 0: a batch in flight is bounded by its most pressed item's deadline.
     * Else a batch sent before every item's deadline gets at least this
     * long in flight: for a kind whose batches are heavy, where killing
     * one at its oldest item's deadline would throw away the work of all
     * of them for clients that only send it again. */
    uint64_t min_flight_ms;
    /* Low priority: held while the group commit's gate is raised. */
    bool yields;
};

struct tm_gc_result {
    int status;
    bool sent;
    const struct tm_pg_reply *reply; /* the batch's reply; NULL when not sent */
    PGresult *res;                   /* status 0: the statement's result */
    int row;                         /* the item's (first) row in res, -1 when none */
    int nrows;                       /* the item's rows in res, from row on */
};

typedef void (*tm_gc_cb)(const struct tm_gc_result *result, void *data);

struct tm_gc;
struct tm_gc_gate;

/* kind must outlive the group commit; loop gives the clock of deadlines. */
struct tm_gc *tm_gc_new(uv_loop_t *loop, struct tm_pg_pool *pool, const struct tm_gc_kind *kind);
/* Add one item: values has kind->nparams entries (copied).  deadline is
 * uv_now() past which it must not be sent; a batch is sent bounded by its
 * most pressed item.  0: queued, cb will fire.  Otherwise cb will not
 * fire: -EAGAIN when every batch that may wait is full, TM_ENOMEM, or
 * TM_EINVAL (a JSON item that is not an object). */
int tm_gc_add(struct tm_gc *gc, const char *const *values, uint64_t deadline, tm_gc_cb cb,
              void *data);
/* tm_gc_add for a kind with blob: the item's n bytes (copied) go after the
 * bytes of the items before it in the batch's binary parameter, and count
 * toward max_bytes.  A kind without blob takes only n 0. */
int tm_gc_add_blob(struct tm_gc *gc, const char *const *values, const void *bytes, size_t n,
                   uint64_t deadline, tm_gc_cb cb, void *data);
/* Items added and not yet answered. */
unsigned tm_gc_pending(const struct tm_gc *gc);
/* Hold gc's batches while gate is raised, when gc's kind yields (else
 * nothing changes).  gate must outlive gc or be closed first (which lets
 * go of gc). */
void tm_gc_set_gate(struct tm_gc *gc, struct tm_gc_gate *gate);

/* A gate on loop that holds for at most max_hold_ms (> 0) per raise; NULL
 * without memory. */
struct tm_gc_gate *tm_gc_gate_new(uv_loop_t *loop, uint64_t max_hold_ms);
/* Raise: from now the yielding kinds send nothing new, for at most
 * max_hold_ms.  Raising a raised gate changes nothing (its bound still
 * counts from the first raise); neither does raising one whose bound ran
 * out before it was lowered. */
void tm_gc_gate_raise(struct tm_gc_gate *gate);
/* Lower: what waited is sent now (within each kind's max_inflight). */
void tm_gc_gate_lower(struct tm_gc_gate *gate);
/* Whether the gate holds now (raised and within its bound). */
bool tm_gc_gate_holding(const struct tm_gc_gate *gate);
/* How many raises ran past max_hold_ms and were let go. */
uint64_t tm_gc_gate_expired(const struct tm_gc_gate *gate);
/* Batches of the gate's group commits in flight now. */
unsigned tm_gc_gate_inflight(const struct tm_gc_gate *gate);
/* Since the last raise, how long until none of those batches was in
 * flight any more (0: none was at the raise); while some still are, how
 * long it has been so far. */
uint64_t tm_gc_gate_drain_ms(const struct tm_gc_gate *gate);
/* Lower the gate, let go of its group commits and free it (its timer is
 * closed on the loop, so the loop must run once more). */
void tm_gc_gate_close(struct tm_gc_gate *gate);

/* Answer unsent items TM_ECANCELED (sent false) and free gc; batches in
 * flight still answer their items, then the rest is freed. */
void tm_gc_free(struct tm_gc *gc);

#endif
