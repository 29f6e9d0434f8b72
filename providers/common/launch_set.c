/*
 * providers/common/launch_set.c: a gang bought whole on a cloud without an
 * all-or-nothing call (see tm_provider_launch_set_each in provider.h), and
 * the member tokens that tie a set's node rows together.
 *
 * The members go one after another, not at once: the first one's zone is
 * then known before the others are asked for, so the set lands in one zone
 * as a gang needs.  On the first failure the members made so far are
 * terminated, and only once every terminate answered does the caller hear
 * of the failure: what it is told is what the cloud holds.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/err.h"
#include "core/log.h"
#include "providers/provider.h"

#define MEMBER_SUFFIX_LEN 4 /* "g" and three digits */

void tm_launch_member_token(const char *set, unsigned k, char out[TM_ID_MAX])
{
    char buf[2 * TM_ID_MAX + 8];
    int n = snprintf(buf, sizeof(buf), "%sg%03u", set, k % 1000);
    size_t len = n > 0 ? (size_t)n : 0;

    if (len >= sizeof(buf))
        len = sizeof(buf) - 1;
    /* Truncated from the front, as tm_launch_token does: the suffix and the
     * pass's time and sequence number are what make it unique. */
    if (len >= TM_ID_MAX) {
        memcpy(out, buf + len - (TM_ID_MAX - 1), TM_ID_MAX - 1);
        out[TM_ID_MAX - 1] = '\0';
    } else {
        memcpy(out, buf, len + 1);
    }
}

void tm_launch_set_key(const char *token, char out[TM_ID_MAX])
{
    size_t len = token ? strlen(token) : 0;

    out[0] = '\0';
    /* A single launch's token ends in "-<seq>": never 'g' and three digits
     * after a digit. */
    if (len <= MEMBER_SUFFIX_LEN || len >= TM_ID_MAX || token[len - 4] != 'g' ||
        token[len - 5] < '0' || token[len - 5] > '9')
        return;
    for (size_t i = len - 3; i < len; i++)
        if (token[i] < '0' || token[i] > '9')
            return;
    memcpy(out, token, len - MEMBER_SUFFIX_LEN);
    out[len - MEMBER_SUFFIX_LEN] = '\0';
}

struct set_member {
    struct tm_launch_request req;
    char token[TM_ID_MAX];
    char pool[TM_ID_MAX];
    char cluster[TM_ID_MAX];
    char type[TM_ID_MAX];
    char *bootstrap;
};

struct set_op {
    struct tm_provider *p;
    tm_launch_set_cb cb;
    void *data;
    size_t n, next;               /* members, the one launching */
    struct set_member *m;
    struct tm_instance *made;     /* made[0..next) */
    char zone[TM_ID_MAX];         /* the set's zone once the first is made */
    int err;                      /* the failure reported once released */
    size_t terminating;           /* terminates still in flight */
};

static void set_op_free(struct set_op *op)
{
    for (size_t i = 0; i < op->n; i++)
        if (op->m[i].bootstrap) {
            /* the bootstrap carries the enrollment secret */
            memset(op->m[i].bootstrap, 0, op->m[i].req.bootstrap_len);
            free(op->m[i].bootstrap);
        }
    free(op->m);
    free(op->made);
    free(op);
}

static void set_deliver(struct set_op *op)
{
    if (op->err == 0)
        op->cb(0, op->made, op->n, op->data);
    else
        op->cb(op->err, NULL, 0, op->data);
    set_op_free(op);
}

static void on_released(int status, void *data)
{
    struct set_op *op = data;

    if (status < 0 && status != TM_ENOTFOUND)
        tm_log_warn("could not release a member of a failed launch set, the next pass finds it "
                    "by its token", "error=%s", tm_err_name(status));
    if (--op->terminating == 0)
        set_deliver(op);
}

/* A member failed: terminate the ones made, then report err. */
static void set_release(struct set_op *op, int err)
{
    size_t made = op->next;

    op->err = err;
    tm_log_warn("launch set short, releasing it whole", "members=%zu made=%zu error=%s", op->n,
                made, tm_err_name(err));
    op->terminating = 1; /* held until every terminate is started */
    for (size_t i = 0; i < made; i++) {
        op->terminating++;
        if (op->p->ops->terminate(op->p, op->made[i].id, on_released, op) < 0) {
            tm_log_warn("could not start releasing a member of a failed launch set, the next "
                        "pass finds it by its token", "instance=%s", op->made[i].id);
            op->terminating--;
        }
    }
    on_released(0, op);
}

static void on_member(int status, const struct tm_instance *inst, void *data);

/* Launch member op->next; returns what ops->launch returned. */
static int launch_next(struct set_op *op)
{
    struct set_member *m = &op->m[op->next];

    if (op->zone[0])
        m->req.zone = op->zone;
    return op->p->ops->launch(op->p, &m->req, on_member, op);
}

static void on_member(int status, const struct tm_instance *inst, void *data)
{
    struct set_op *op = data;
    int r;

    if (status < 0) {
        set_release(op, status);
        return;
    }
    op->made[op->next] = *inst;
    if (!op->zone[0] && inst->zone[0])
        snprintf(op->zone, sizeof(op->zone), "%s", inst->zone);
    if (++op->next == op->n) {
        set_deliver(op);
        return;
    }
    r = launch_next(op);
    if (r < 0)
        set_release(op, r);
}

static int copy_member(struct set_member *m, const struct tm_launch_request *r)
{
    if (!r->token || !r->pool || !r->instance_type || strlen(r->token) >= TM_ID_MAX ||
        strlen(r->pool) >= TM_ID_MAX || strlen(r->instance_type) >= TM_ID_MAX ||
        (r->cluster && strlen(r->cluster) >= TM_ID_MAX))
        return TM_EINVAL;
    m->req = *r;
    snprintf(m->token, sizeof(m->token), "%s", r->token);
    snprintf(m->pool, sizeof(m->pool), "%s", r->pool);
    snprintf(m->type, sizeof(m->type), "%s", r->instance_type);
    snprintf(m->cluster, sizeof(m->cluster), "%s", r->cluster ? r->cluster : "");
    m->req.token = m->token;
    m->req.pool = m->pool;
    m->req.instance_type = m->type;
    m->req.cluster = r->cluster ? m->cluster : NULL;
    m->req.zone = r->zone ? r->zone : "";
    m->req.bootstrap = NULL;
    if (r->bootstrap && r->bootstrap_len > 0) {
        m->bootstrap = malloc(r->bootstrap_len);
        if (!m->bootstrap)
            return TM_ENOMEM;
        memcpy(m->bootstrap, r->bootstrap, r->bootstrap_len);
        m->req.bootstrap = m->bootstrap;
    }
    return 0;
}

int tm_provider_launch_set_each(struct tm_provider *p, const struct tm_launch_set *set,
                                tm_launch_set_cb cb, void *data)
{
    struct set_op *op;
    int r = 0;

    if (!p || !set || !cb || !set->reqs || set->n == 0)
        return TM_EINVAL;
    op = calloc(1, sizeof(*op));
    if (!op)
        return TM_ENOMEM;
    op->p = p;
    op->cb = cb;
    op->data = data;
    op->n = set->n;
    op->m = calloc(set->n, sizeof(*op->m));
    op->made = calloc(set->n, sizeof(*op->made));
    if (!op->m || !op->made)
        r = TM_ENOMEM;
    for (size_t i = 0; i < set->n && r == 0; i++)
        r = copy_member(&op->m[i], &set->reqs[i]);
    /* zone pointers are copied by the first launch_next(); a set's zone is
     * the first member's (every member names the same one) */
    if (r == 0 && set->reqs[0].zone)
        snprintf(op->zone, sizeof(op->zone), "%s", set->reqs[0].zone);
    if (r == 0)
        r = launch_next(op);
    if (r < 0) {
        set_op_free(op);
        return r;
    }
    return 0;
}
