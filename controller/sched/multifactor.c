/*
 * controller/sched/multifactor.c: the multifactor policy, a baseline: what
 * Slurm sites run (priority/multifactor with sched/backfill).  EASY
 * backfill exactly as backfill.c (first fit, one reservation for the first
 * blocked job, later jobs run if they do not delay it, judged on their
 * estimates as given), but the queue is ordered by Slurm's multifactor
 * priority instead of submit time: higher priority first, then submit
 * time, then id, as Slurm evaluates pending jobs.
 *
 * Slurm's formula (priority_multifactor documentation) is a sum of
 * weighted factors, each normalised to 0..1:
 *
 *   priority = W_age x age + W_size x size + W_qos x qos + site
 *
 * with the factors this queue has (no accounts, so no fair-share or
 * association factor, one partition, no TRES weights, nice 0):
 *
 *   age   min(time queued / PriorityMaxAge, 1); PriorityMaxAge 1 day
 *         (Slurm's default is 7 days; sites that care about waits cut it,
 *         and a week would let age matter only past the 48 h bound)
 *   size  GPUs asked (whole GPUs, or the share, times the gang size) /
 *         GPUs on schedulable nodes: Slurm's job size factor with TRES
 *         GPU as the resource and PriorityFavorSmall=NO (the default:
 *         large jobs favoured, so they are not passed for ever)
 *   qos   1 for non-preemptible work (QOS normal), 0 for preemptible work
 *         (a scavenger QOS), the mapping sites use for best-effort jobs
 *   site  the job's own priority x 1000 (Slurm's site factor, added as is)
 *
 * Weights: W_age 10000, W_size 1000, W_qos 1000.  Age dominates: a job
 * queued a full PriorityMaxAge outranks any fresh job whatever its size or
 * QOS, which is what keeps a large job from waiting for ever under EASY
 * (it becomes the head and holds the reservation).  Factors are computed
 * in parts per million, so the sort is exact integer arithmetic.
 */
#include "controller/sched/scheduler.h"

#include "controller/sched/internal.h"

#define MF_PPM 1000000LL
#define MF_MAX_AGE_MS (24LL * 3600 * 1000)
#define MF_W_AGE 10000LL
#define MF_W_SIZE 1000LL
#define MF_W_QOS 1000LL
#define MF_W_SITE 1000LL

/* The job's multifactor priority in parts per million of a weight unit. */
int64_t sched_multifactor_priority(const struct ctx *c, int32_t j)
{
    const struct tm_sched_job *jb = &c->in->jobs[j];
    const struct need *nd = &c->needs[j];
    int64_t age = c->in->now_ms - jb->submit_ms, age_ppm, size_ppm = 0, qos_ppm;
    int64_t milli = (int64_t)(nd->gpus > 0 ? nd->gpus * MILLI : nd->milli) * nd->nodes;

    if (age < 0)
        age = 0;
    age_ppm = age >= MF_MAX_AGE_MS ? MF_PPM : age * MF_PPM / MF_MAX_AGE_MS;
    if (c->t.all_gpus > 0) {
        size_ppm = milli * MF_PPM / (c->t.all_gpus * MILLI);
        if (size_ppm > MF_PPM)
            size_ppm = MF_PPM;
    }
    qos_ppm = jb->preemptible ? 0 : MF_PPM;
    return MF_W_AGE * age_ppm + MF_W_SIZE * size_ppm + MF_W_QOS * qos_ppm +
           MF_W_SITE * MF_PPM * (int64_t)jb->priority;
}

static void multifactor_order(const struct ctx *c, int32_t j, struct okey *k)
{
    const struct tm_sched_job *jb = &c->in->jobs[j];

    k->k[0] = -sched_multifactor_priority(c, j);
    k->k[1] = jb->submit_ms;
    k->k[2] = jb->id;
}

static bool multifactor_may_reserve(struct ctx *c, int32_t j, struct sched_pass *ps)
{
    (void)c;
    (void)j;
    (void)ps;
    return true;
}

static const char *multifactor_why_placed(const struct ctx *c, int32_t j, const struct sched_pass *ps,
                                          bool gap)
{
    (void)c;
    (void)j;
    if (ps->nreserved == 0)
        return "first fit, in multifactor priority order";
    return gap ? "backfilled: ends before the reservation" : "backfilled: leaves the reservation intact";
}

static const char *multifactor_why_reserved(const struct ctx *c, int32_t j)
{
    (void)c;
    (void)j;
    return "highest priority blocked: reserved at the earliest expected start";
}

const struct sched_policy sched_multifactor = {
    .max_reservations = 1,
    .prepare = sched_tree_init,
    .order = multifactor_order,
    .place = sched_place_firstfit,
    .may_reserve = multifactor_may_reserve,
    .why_placed = multifactor_why_placed,
    .why_reserved = multifactor_why_reserved,
};
