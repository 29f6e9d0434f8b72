/*
 * controller/sched/note.c: what the pass says of each job (the verdict,
 * the node, the expected start and why), and a reservation with its note.
 * The policies' hooks write notes as the pass does, so these live apart
 * from the pass: a policy file calls here, never into scheduler.c.
 */
#include "controller/sched/scheduler.h"

#include "controller/sched/internal.h"

void sched_note(struct ctx *c, int32_t j, enum tm_sched_verdict v, int32_t node, int64_t start,
                const char *why)
{
    struct tm_sched_note *n = &c->r.notes[j];

    n->job = j;
    n->verdict = v;
    n->node = node;
    n->start_ms = start;
    n->why = why;
}

int sched_reserve_noted(struct ctx *c, int32_t j, struct sched_pass *ps, const char *why)
{
    size_t before = c->r.nreservations;
    int r = sched_reserve(c, j, &ps->linked);

    if (r == 2) {
        sched_note(c, j, TM_SCHED_PLACED, c->r.placements[c->r.nplacements - 1].node, c->in->now_ms,
                   "placed now by evicting preemptible work on loan");
    } else if (r == 1) {
        ps->nreserved++;
        sched_note(c, j, TM_SCHED_RESERVED, c->r.reservations[before].node,
                   c->r.reservations[before].start_ms, why);
    }
    return r;
}
