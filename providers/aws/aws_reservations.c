/*
 * providers/aws/aws_reservations.c: see aws_reservations.h.
 */
#include "providers/aws/aws_reservations.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/err.h"
#include "core/log.h"

#define IDS_MAX 1000 /* DescribeCapacityReservations takes this many ids at most */

struct check_op {
    struct aws_reservations *ar;
    const struct tm_provider_pool *pools;
    size_t npools;
    void (*cb)(int status, const char *reason, void *data);
    void *data;
};

static int ask(struct aws_reservations *ar, tm_ec2_cb cb, void *data)
{
    const char *ids[IDS_MAX];
    size_t n = 0;
    char *body = NULL;
    int r;

    for (size_t i = 0; i < ar->rs.n && n < IDS_MAX; i++)
        ids[n++] = ar->rs.v[i].id;
    r = tm_ec2_build_describe_capacity_reservations(ids, n, 0, NULL, &body);
    if (r < 0)
        return r;
    return tm_ec2_call(ar->ec2, TM_EC2_DESCRIBE_CAPACITY_RESERVATIONS, body,
                       TM_EC2_RETRY_AMBIGUOUS, cb, data);
}

static void ended(struct aws_reservations *ar, const struct tm_reservation *r, const char *why)
{
    struct tm_provider_notice *n;

    /* The pool goes on with its fallback, or waits: said once, here, and
     * as a decision by the controller. */
    tm_log_warn("aws reservation ended, not launching into it again",
                "provider=%s pool=%s reservation=%s state=%s reason=\"%s\"", ar->provider, r->pool,
                r->id, r->state, why);
    if (ar->nnotices == sizeof(ar->notices) / sizeof(ar->notices[0]))
        return;
    n = &ar->notices[ar->nnotices++];
    snprintf(n->kind, sizeof(n->kind), "reservation_ended");
    tm_id_copy(n->pool, r->pool);
    tm_id_copy(n->subject, r->id);
    snprintf(n->state, sizeof(n->state), "%s", r->state);
    snprintf(n->reason, sizeof(n->reason), "aws says reservation %s is %s: pool %s launches no "
             "more into it%s", r->id, r->state, r->pool,
             r->only ? " (and buys nothing past its reservations)" : "");
}

size_t aws_reservations_notices(struct aws_reservations *ar, struct tm_provider_notice *out,
                                size_t max)
{
    size_t n = ar->nnotices < max ? ar->nnotices : max;

    memcpy(out, ar->notices, n * sizeof(*out));
    memmove(ar->notices, ar->notices + n, (ar->nnotices - n) * sizeof(*out));
    ar->nnotices -= n;
    return n;
}

/* EC2 refuses the whole call when one id is unknown and names it in the
 * message: that reservation is gone. */
static void not_found(struct aws_reservations *ar, const struct tm_ec2_reply *reply)
{
    if (strncmp(reply->error_code, "InvalidCapacityReservationId", 28) != 0)
        return;
    for (size_t i = 0; i < ar->rs.n; i++) {
        struct tm_reservation *r = &ar->rs.v[i];

        if (r->ended || !strstr(reply->error_message, r->id))
            continue;
        snprintf(r->state, sizeof(r->state), "not-found");
        r->ended = true;
        ended(ar, r, reply->error_message);
    }
}

static void lay_over(struct aws_reservations *ar, const struct tm_ec2_reply *reply)
{
    uint64_t now = uv_now(ar->loop);
    char why[256];

    for (size_t i = 0; i < reply->nreservations; i++) {
        const struct tm_ec2_capacity_reservation *c = &reply->reservations[i];
        const struct tm_reservation_fact f = {
            .id = c->id, .type = c->instance_type, .zone = c->zone, .state = c->state,
            .total = c->total, .available = c->available, .start_ms = c->start_ms,
            .end_ms = c->end_ms, .block = c->block,
        };

        if (tm_reservations_heard(&ar->rs, &f, now, why, sizeof(why)) == 1)
            ended(ar, tm_reservations_find(&ar->rs, c->id), why);
    }
}

static void on_refresh(int status, const struct tm_ec2_reply *reply, void *data)
{
    struct aws_reservations *ar = data;

    ar->inflight = false;
    if (status == TM_ECANCELED || *ar->closing)
        return;
    if (status < 0) {
        not_found(ar, reply);
        return; /* the client logged it; the rows stay as they were */
    }
    lay_over(ar, reply);
}

void aws_reservations_refresh(struct aws_reservations *ar)
{
    uint64_t now = uv_now(ar->loop);

    if (ar->rs.n == 0 || ar->inflight || *ar->closing ||
        (ar->at && now - ar->at < ar->refresh_ms))
        return;
    ar->at = now ? now : 1;
    if (ask(ar, on_refresh, ar) == 0)
        ar->inflight = true;
}

/* The first reservation that cannot serve its pool: its reason in buf. */
static const char *refusal(const struct check_op *op, char *buf, size_t size)
{
    for (size_t i = 0; i < op->ar->rs.n; i++) {
        const struct tm_reservation *r = &op->ar->rs.v[i];
        const struct tm_provider_pool *pool = tm_provider_pool_find(op->pools, op->npools, r->pool);

        if (!r->state[0]) {
            snprintf(buf, size, "pool \"%s\": reservation %s: aws did not describe it", r->pool,
                     r->id);
            return buf;
        }
        if (r->ended) {
            snprintf(buf, size, "pool \"%s\": reservation %s is %s (aws says)%s", r->pool, r->id,
                     r->state, r->block ? ": the block is over" : "");
            return buf;
        }
        if (pool && tm_reservation_mismatch(r, pool, buf, size)) {
            size_t n = strlen(buf);

            snprintf(buf + n, size - n, " (aws says %s in %s)", r->type, r->zone);
            return buf;
        }
    }
    return NULL;
}

static void on_check(int status, const struct tm_ec2_reply *reply, void *data)
{
    struct check_op *op = data;
    char reason[512];

    if (status < 0) {
        if (strncmp(reply->error_code, "InvalidCapacityReservationId", 28) == 0) {
            snprintf(reason, sizeof(reason), "a pool's reservation: aws says %s: %s",
                     reply->error_code, reply->error_message);
            op->cb(TM_EINVAL, reason, op->data);
        } else {
            snprintf(reason, sizeof(reason), "could not read the pools' reservations from aws: "
                     "%s%s%s", tm_strerror(status), reply->error_code[0] ? ": " : "",
                     reply->error_code);
            op->cb(status, reason, op->data);
        }
        free(op);
        return;
    }
    lay_over(op->ar, reply);
    op->ar->at = uv_now(op->ar->loop);
    if (refusal(op, reason, sizeof(reason)))
        op->cb(TM_EINVAL, reason, op->data);
    else
        op->cb(0, NULL, op->data);
    free(op);
}

int aws_reservations_check(struct aws_reservations *ar, const struct tm_provider_pool *pools,
                           size_t npools, void (*cb)(int status, const char *reason, void *data),
                           void *data)
{
    struct check_op *op;
    int r;

    if (ar->rs.n == 0)
        return 1;
    op = calloc(1, sizeof(*op));
    if (!op)
        return TM_ENOMEM;
    *op = (struct check_op){ar, pools, npools, cb, data};
    r = ask(ar, on_check, op);
    if (r < 0)
        free(op);
    return r;
}
