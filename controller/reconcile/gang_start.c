/*
 * controller/reconcile/gang_start.c: the timeout of a multi-node job's
 * start barrier (docs/multi-node.md, migrations/0021).
 *
 * No member of a job of two or more nodes starts its command until every
 * member's agent has claimed the attempt (tarmac_rendezvous answers the
 * others "wait").  A member whose node never comes would hold the rest of
 * the gang's GPUs idle for good, so once agent.gang_start_timeout has
 * passed since the first claim with some member still missing, the whole
 * gang is requeued (op gang_start_timeout): its reason names the nodes
 * that did not come.  No member has started, so nothing is lost but the
 * wait.  A silent node is also caught by staleness.c, but that takes
 * agent.unreachable_after and requeue_after; this needs no silence at all
 * (an agent that heartbeats but never hears of the job counts too).
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "controller/reconcile/internal.h"
#include "core/err.h"

/* The nodes of job id whose agents claimed (claimed true) or did not,
 * as "4, 7", into buf. */
static void gs_nodes(const struct tm_snapshot *s, int64_t id, bool claimed, char *buf, size_t size)
{
    size_t len = 0;

    buf[0] = '\0';
    for (size_t k = 0; k < s->nallocs && len + 24 < size; k++) {
        const struct tm_snap_alloc *a = &s->allocs[k];
        if (a->job_id != id || (a->claimed_ms > 0) != claimed)
            continue;
        len += (size_t)snprintf(buf + len, size - len, "%s%" PRId64, len ? ", " : "", a->node_id);
    }
}

void tm_rc_gang_start(struct pass *p)
{
    const struct tm_snapshot *s = p->in->snap;
    int64_t timeout = p->cfg->agent.gang_start_timeout_ms;
    int64_t *first;
    int *missing, *missing_node_of;

    if (s->njobs == 0 || timeout <= 0)
        return;
    first = calloc(s->njobs, sizeof(*first));
    missing = calloc(s->njobs, sizeof(*missing));
    missing_node_of = calloc(s->njobs, sizeof(*missing_node_of));
    if (!first || !missing || !missing_node_of) {
        free(first);
        free(missing);
        free(missing_node_of);
        p->err = TM_ENOMEM;
        return;
    }
    for (size_t k = 0; k < s->nallocs; k++) {
        const struct tm_snap_alloc *a = &s->allocs[k];
        int ji = tm_rc_job_index(p, a->job_id);
        if (ji < 0)
            continue;
        if (a->claimed_ms > 0) {
            if (!first[ji] || a->claimed_ms < first[ji])
                first[ji] = a->claimed_ms;
        } else if (missing[ji]++ == 0) {
            missing_node_of[ji] = (int)k;
        }
    }
    for (size_t ji = 0; ji < s->njobs && !p->err; ji++) {
        const struct tm_snap_job *j = &s->jobs[ji];
        char absent[256], came[256], why[768];

        if (j->state != TM_JOB_RUNNING || j->nodes < 2 || p->job_leaving[ji] || !first[ji] ||
            !missing[ji] || p->in->now_ms - first[ji] < timeout)
            continue;
        gs_nodes(s, j->id, false, absent, sizeof(absent));
        gs_nodes(s, j->id, true, came, sizeof(came));
        snprintf(why, sizeof(why),
                 "start barrier timed out: node(s) %s did not claim attempt %d within %" PRId64
                 " s (agent.gang_start_timeout) while node(s) %s waited; no member started; the whole "
                 "gang is requeued for attempt %d",
                 absent, j->attempts, timeout / 1000, came, j->attempts + 1);
        cJSON *a = tm_rc_action(p, "gang_start_timeout", why);
        tm_rc_put_num(p, a, "job", (double)j->id);
        tm_rc_put_num(p, a, "node", (double)s->allocs[missing_node_of[ji]].node_id);
        tm_rc_put_num(p, a, "started_ms", (double)j->started_ms);
        cJSON *in = tm_rc_inputs(p, a);
        tm_rc_put_str(p, in, "absent_nodes", absent);
        tm_rc_put_str(p, in, "waiting_nodes", came);
        tm_rc_put_num(p, in, "first_claim_ms", (double)first[ji]);
        tm_rc_put_num(p, in, "gang_start_timeout_ms", (double)timeout);
        tm_rc_put_num(p, in, "attempt", j->attempts);
        tm_rc_put_num(p, in, "next_attempt", j->attempts + 1);
        p->job_leaving[ji] = true;
    }
    free(first);
    free(missing);
    free(missing_node_of);
}
