/*
 * providers/owned/owned_provider.c: the table of an owned provider; see
 * owned_provider.h.
 */
#include "providers/owned/owned_provider.h"

#include <stdlib.h>

#include "core/err.h"
#include "core/log.h"

struct owned_provider {
    struct tm_provider base;
    uv_timer_t timer;            /* only so that close answers on the loop */
    char name[TM_ID_MAX];
    void (*done)(void *data);
    void *done_data;
};

static int owned_refuse(struct tm_provider *p, const char *what)
{
    struct owned_provider *op = p->impl;

    tm_log_error("asked to act on an owned machine: refused (a bug: owned pools are never bought "
                 "or released)", "provider=%s op=%s", op->name, what);
    return TM_EINVAL;
}

static int owned_launch(struct tm_provider *p, const struct tm_launch_request *req, tm_launch_cb cb,
                        void *data)
{
    (void)req, (void)cb, (void)data;
    return owned_refuse(p, "launch");
}

static int owned_terminate(struct tm_provider *p, const char *instance_id, tm_done_cb cb, void *data)
{
    (void)instance_id, (void)cb, (void)data;
    return owned_refuse(p, "terminate");
}

static int owned_price(struct tm_provider *p, const char *instance_type, const char *zone,
                       enum tm_capacity_type capacity, int64_t *ret_uusd_per_hour)
{
    (void)p, (void)instance_type, (void)zone, (void)capacity, (void)ret_uusd_per_hour;
    return TM_ENOTFOUND;
}

static void on_closed(uv_handle_t *h)
{
    struct owned_provider *op = h->data;

    if (op->done)
        op->done(op->done_data);
    free(op);
}

static void owned_close(struct tm_provider *p, void (*done)(void *data), void *data)
{
    struct owned_provider *op = p->impl;

    op->done = done;
    op->done_data = data;
    uv_close((uv_handle_t *)&op->timer, on_closed);
}

static const struct tm_provider_ops owned_ops = {
    .name = "owned",
    .launch = owned_launch,
    .terminate = owned_terminate,
    .list = NULL, /* no listing: heartbeats say whether its machines live */
    .price = owned_price,
    .close = owned_close,
};

int tm_owned_provider_create(uv_loop_t *loop, const struct tm_config_provider *p,
                             struct tm_provider **ret)
{
    struct owned_provider *op = calloc(1, sizeof(*op));

    if (!op)
        return TM_ENOMEM;
    op->base = (struct tm_provider){.ops = &owned_ops, .impl = op};
    tm_id_copy(op->name, p->name);
    uv_timer_init(loop, &op->timer);
    op->timer.data = op;
    *ret = &op->base;
    return 0;
}
