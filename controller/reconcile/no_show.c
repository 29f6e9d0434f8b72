/*
 * controller/reconcile/no_show.c: pools whose launched nodes never enroll.
 *
 * A node of a pool with a real agent that never sends a first heartbeat is
 * given up on (staleness.c marks it unreachable once its boot allowance
 * and agent.unreachable_after have run out) and, with nothing else to
 * stop it, the planner launches another for the same queue: a wrong
 * agent.controller_url, a firewall or a broken bootstrap would buy a node
 * every cycle for as long as the work waits.  So the pool backs off: after
 * k such nodes in a row, its next launch waits until the newest was given
 * up on plus agent.no_show_backoff x 2^(k-1), at most
 * agent.no_show_backoff_max.  A node of the pool that heartbeats ends the
 * run, and the next launch goes at once.
 *
 * Nothing is remembered between passes: the run is read from the
 * snapshot (tm_snap_no_show: the nodes given up on without a heartbeat,
 * newer than the pool's newest node that heartbeated), so a restarted
 * controller continues the backoff where it was.  The hold's end is fixed
 * by the run, not by now, so every pass of one hold names the same end:
 * the apply keeps one launch_held decision per pool and end, and the
 * waiting jobs' reason changes once per hold.  The alert after
 * agent.no_show_alert_after nodes in a row is alerts.c's (pool_no_show).
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "controller/reconcile/internal.h"
#include "core/err.h"

void tm_reconcile_no_show(const struct tm_config *cfg, const struct tm_snapshot *snap, int pool,
                          struct tm_no_show_hold *out)
{
    int64_t heard = 0; /* the pool's newest live node that heartbeated */

    memset(out, 0, sizeof(*out));
    size_t any = 0;
    while (any < snap->nno_shows && snap->no_shows[any].pool != pool)
        any++;
    if (any == snap->nno_shows)
        return; /* the common case: no scan of the nodes */
    for (size_t i = 0; i < snap->nnodes; i++)
        if (snap->nodes[i].pool == pool && snap->nodes[i].last_heartbeat_ms > 0 && snap->nodes[i].id > heard)
            heard = snap->nodes[i].id;
    for (size_t i = 0; i < snap->nno_shows; i++) {
        const struct tm_snap_no_show *x = &snap->no_shows[i];
        /* The snapshot's read stops the run at the newest node that
         * heartbeated; a live one says the same here. */
        if (x->pool != pool || x->node_id < heard)
            continue;
        out->streak++;
        if (x->node_id > out->last_node_id) {
            out->last_node_id = x->node_id;
            out->last_given_up_ms = x->given_up_ms;
        }
        if (out->first_given_up_ms == 0 || x->given_up_ms < out->first_given_up_ms)
            out->first_given_up_ms = x->given_up_ms;
    }
    int64_t base = cfg->agent.no_show_backoff_ms, cap = cfg->agent.no_show_backoff_max_ms;
    if (out->streak == 0 || base <= 0)
        return;
    int64_t d = base;
    for (int k = 1; k < out->streak && d < cap; k++)
        d *= 2;
    out->delay_ms = d < cap ? d : cap;
    out->until_ms = out->last_given_up_ms + out->delay_ms;
}

void tm_rc_no_show_init(struct pass *p)
{
    size_t np = p->cfg->npools;

    p->no_show = calloc(np + 1, sizeof(*p->no_show));
    p->no_show_said = calloc(np + 1, sizeof(bool));
    if (!p->no_show || !p->no_show_said) {
        p->err = TM_ENOMEM;
        return;
    }
    for (size_t pi = 0; pi < np; pi++)
        tm_reconcile_no_show(p->cfg, p->in->snap, (int)pi, &p->no_show[pi]);
}

static bool pool_held(const struct pass *p, int pi)
{
    return p->no_show && pi >= 0 && (size_t)pi < p->cfg->npools && p->no_show[pi].until_ms > 0 &&
           p->in->now_ms < p->no_show[pi].until_ms;
}

/* "12:04:05 UTC": the hold's end for people (the decision's inputs carry it in ms). */
static void fmt_clock(int64_t ms, char *out, size_t size)
{
    time_t t = (time_t)(ms / 1000);
    struct tm tm;

    if (!gmtime_r(&t, &tm) || strftime(out, size, "%H:%M:%S UTC", &tm) == 0)
        snprintf(out, size, "%" PRId64 " ms", ms);
}

/* "45 s", "8 min", "1 h 30 min". */
static void fmt_span(int64_t ms, char *out, size_t size)
{
    int64_t s = ms / 1000;
    if (s < 120)
        snprintf(out, size, "%" PRId64 " s", s);
    else if (s < 7200)
        snprintf(out, size, "%" PRId64 " min", s / 60);
    else
        snprintf(out, size, "%" PRId64 " h %" PRId64 " min", s / 3600, (s % 3600) / 60);
}

/* "pool od: 3 nodes launched in a row never enrolled; next launch held
 * until 12:04:05 UTC (backoff 4 min)" */
static void hold_text(const struct pass *p, int pi, char *out, size_t size)
{
    const struct tm_no_show_hold *h = &p->no_show[pi];
    char until[32], span[32];

    fmt_clock(h->until_ms, until, sizeof(until));
    fmt_span(h->delay_ms, span, sizeof(span));
    snprintf(out, size, "pool %s: %d node%s launched in a row never enrolled (no heartbeat before "
             "the boot allowance ran out); next launch held until %s (backoff %s)",
             p->cfg->pools[pi].name, h->streak, h->streak == 1 ? "" : "s", until, span);
}

bool tm_rc_launch_held(struct pass *p, int pi)
{
    char why[256];

    if (!pool_held(p, pi))
        return false;
    if (p->no_show_said[pi] || p->err)
        return true;
    p->no_show_said[pi] = true;
    const struct tm_no_show_hold *h = &p->no_show[pi];
    hold_text(p, pi, why, sizeof(why));
    cJSON *a = tm_rc_action(p, "launch_held", why);
    tm_rc_put_str(p, a, "pool", p->cfg->pools[pi].name);
    cJSON *in = tm_rc_inputs(p, a);
    tm_rc_put_str(p, in, "pool", p->cfg->pools[pi].name);
    tm_rc_put_num(p, in, "no_shows", h->streak);
    tm_rc_put_num(p, in, "last_node", (double)h->last_node_id);
    tm_rc_put_num(p, in, "last_given_up_ms", (double)h->last_given_up_ms);
    tm_rc_put_num(p, in, "backoff_ms", (double)h->delay_ms);
    tm_rc_put_num(p, in, "until_ms", (double)h->until_ms);
    tm_rc_put_num(p, in, "no_show_backoff_ms", (double)p->cfg->agent.no_show_backoff_ms);
    tm_rc_put_num(p, in, "no_show_backoff_max_ms", (double)p->cfg->agent.no_show_backoff_max_ms);
    tm_rc_put_num(p, in, "boot_allowance_ms", (double)p->cfg->agent.boot_allowance_ms);
    tm_rc_put_num(p, in, "demand_gpus", (double)p->demand_milli[pi] / 1000.0);
    tm_rc_put_num(p, in, "live_nodes", p->live[pi]);
    return true;
}

void tm_rc_no_show_why(const struct pass *p, const struct tm_snap_job *j, char *why, size_t size)
{
    char hold[256], before[256];
    int pi = tm_rc_job_route(p->cfg, j);

    if (!pool_held(p, pi))
        return;
    hold_text(p, pi, hold, sizeof(hold));
    snprintf(before, sizeof(before), "%s", why);
    snprintf(why, size, "%s; %s", hold, before);
}
