/*
 * controller/fleet/burst.c: the burst rule (see burst.h).
 */
#include "controller/fleet/burst.h"

#include <stdio.h>
#include <string.h>

/* the scheduler's default starvation bound (controller/sched/scheduler.h's
 * TM_SCHED_STARVATION_DEFAULT_MS; fleet/ may not include sched/) */
#define STARVATION_DEFAULT_MS (48LL * 3600 * 1000)
#define HOUR_MS 3600000.0

void tm_burst_params_default(struct tm_burst_params *p)
{
    memset(p, 0, sizeof(*p));
    p->rule = TM_BURST_COST;
    p->starvation_ms = STARVATION_DEFAULT_MS;
}

const char *tm_burst_rule_name(enum tm_burst_rule r)
{
    switch (r) {
    case TM_BURST_NEVER:
        return "never";
    case TM_BURST_AFTER:
        return "after";
    case TM_BURST_COST:
        return "cost";
    }
    return "?";
}

const char *tm_burst_choice_name(enum tm_burst_choice c)
{
    switch (c) {
    case TM_BURST_WAIT:
        return "wait";
    case TM_BURST_SPOT:
        return "spot";
    case TM_BURST_ON_DEMAND:
        return "on-demand";
    }
    return "?";
}

/* The projected owned start as text: "in N s", or "none". */
static void start_text(int64_t start, int64_t now, char *buf, size_t len)
{
    if (start == TM_BURST_NO_START)
        snprintf(buf, len, "none");
    else
        snprintf(buf, len, "in %lld s", (long long)((start > now ? start - now : 0) / 1000));
}

static void wait_for(struct tm_burst_decision *d, const char *why, const char *st)
{
    d->choice = TM_BURST_WAIT;
    d->price_per_hour = 0;
    snprintf(d->reason, sizeof(d->reason), "wait for owned capacity: projected owned start %s; %s",
             st, why);
}

void tm_burst_decide(const struct tm_burst_params *p, const struct tm_burst_job *j, int64_t now_ms,
                     int64_t owned_start_ms, const struct tm_burst_offer *o,
                     struct tm_burst_decision *d)
{
    bool spot = j->preemptible && o->spot_per_gpu_hour > 0;
    double per_gpu = spot ? o->spot_per_gpu_hour : o->on_demand_per_gpu_hour;
    int64_t cloud_start = now_ms + (o->boot_ms > 0 ? o->boot_ms : 0);
    int32_t gpus = j->gpus > 0 ? j->gpus : 1;
    char st[48], why[200];

    memset(d, 0, sizeof(*d));
    d->owned_start_ms = owned_start_ms;
    start_text(owned_start_ms, now_ms, st, sizeof(st));
    if (p->rule == TM_BURST_NEVER) {
        wait_for(d, "burst: never", st);
        return;
    }
    if (per_gpu <= 0) {
        wait_for(d, "the cloud offers no fitting type", st);
        return;
    }
    if (owned_start_ms <= now_ms) {
        wait_for(d, "it starts now", st);
        return;
    }
    if (p->rule == TM_BURST_AFTER) {
        int64_t waited = now_ms - j->submit_ms;
        if (waited < p->after_ms) {
            snprintf(why, sizeof(why), "waited %lld s of %lld s", (long long)(waited / 1000),
                     (long long)(p->after_ms / 1000));
            wait_for(d, why, st);
            return;
        }
        snprintf(why, sizeof(why), "waited %lld s, the constant wait is %lld s",
                 (long long)(waited / 1000), (long long)(p->after_ms / 1000));
    } else {
        double value = p->wait_value_per_hour > 0 ? p->wait_value_per_hour : o->on_demand_per_gpu_hour;
        int64_t est = j->estimate_ms > 0 ? j->estimate_ms : 1;
        double ratio = per_gpu * gpus / value;
        int64_t budget = (int64_t)(ratio * (double)(est + (cloud_start - now_ms)));
        if (owned_start_ms <= cloud_start) {
            wait_for(d, "no later than a boot from now", st);
            return;
        }
        if (owned_start_ms == TM_BURST_NO_START)
            snprintf(why, sizeof(why), "(owned capacity gives it no start)");
        else if (p->starvation_ms > 0 &&
                 owned_start_ms > j->submit_ms + p->starvation_ms - (cloud_start - now_ms))
            snprintf(why, sizeof(why), "passes the starvation bound (%lld s from submission)",
                     (long long)(p->starvation_ms / 1000));
        else if (j->deadline_ms > 0 && owned_start_ms > j->deadline_ms - est)
            snprintf(why, sizeof(why), "misses its deadline (in %lld s) by its estimate %lld s",
                     (long long)((j->deadline_ms - now_ms) / 1000), (long long)(est / 1000));
        else if (owned_start_ms - j->submit_ms > budget)
            snprintf(why, sizeof(why),
                     "passes its waiting budget (%lld s from submission: price / value of waiting "
                     "%.2f x (estimate + boot))",
                     (long long)(budget / 1000), ratio);
        else {
            snprintf(why, sizeof(why), "within its waiting budget (%lld s from submission)",
                     (long long)(budget / 1000));
            wait_for(d, why, st);
            return;
        }
    }
    d->choice = spot ? TM_BURST_SPOT : TM_BURST_ON_DEMAND;
    d->price_per_hour = per_gpu * gpus;
    snprintf(d->reason, sizeof(d->reason), "burst %s at $%.2f/h: projected owned start %s %s",
             tm_burst_choice_name(d->choice), d->price_per_hour, st, why);
}
