/*
 * controller/sched/bounds.c: the time bounds every policy derives from the
 * parameters (the default estimate, the starvation bound and tarmac's
 * urgent age, aging level and lead), in one file of their own so that the
 * order, the late-job test and the reservations read them without calling
 * into each other.
 */
#include "controller/sched/scheduler.h"

#include "controller/sched/internal.h"

int64_t sched_default_estimate_ms(const struct tm_sched_params *p)
{
    return p->default_estimate_ms > 0 ? p->default_estimate_ms : TM_SCHED_DEFAULT_ESTIMATE_MS;
}

int64_t tm_sched_starvation_ms(const struct tm_sched_params *p)
{
    return p->starvation_ms > 0 ? p->starvation_ms : TM_SCHED_STARVATION_DEFAULT_MS;
}

/* Half the bound: a job promoted then still has the other half to get
 * through its reservation, which covers the longest estimate we trust. */
int64_t tm_sched_tarmac_urgent_ms(const struct tm_sched_params *p)
{
    return tm_sched_starvation_ms(p) / 2;
}

/* One level per quarter of the bound waited. */
int64_t tm_sched_tarmac_level_ms(const struct tm_sched_params *p)
{
    int64_t q = tm_sched_starvation_ms(p) / 4;

    return q > 0 ? q : 1;
}

/* Short gap-filling work and jobs tied to few models move up by at most
 * short_ms: enough to go first among jobs of about the same age, never
 * enough to pass a job by hours. */
int64_t tm_sched_tarmac_lead_ms(const struct tm_sched_params *p, const struct tm_sched_job *jb,
                                bool constrained)
{
    int64_t short_ms = p->short_ms > 0 ? p->short_ms : TM_SCHED_SHORT_DEFAULT_MS;
    int64_t dflt = sched_default_estimate_ms(p);
    int64_t est = jb->estimate_ms > 0 ? jb->estimate_ms : dflt;
    bool gapfill = est < short_ms && (jb->klass == TM_CLASS_EVAL || jb->klass == TM_CLASS_PREPROCESS ||
                                      jb->klass == TM_CLASS_INFERENCE);

    return (gapfill ? short_ms : 0) + (constrained ? short_ms / 2 : 0);
}
