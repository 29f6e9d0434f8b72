/*
 * controller/replay/replay_quota.c: teams in the time replay (struct
 * tm_replay_quota): each job's team, the quota view a pass is handed
 * (tm_sched_quota, built as the live pass builds it: the running jobs'
 * borrowed marks by tm_quota_mark_borrowed(), the queue's demand kept from
 * being lent), fair share from usage decayed with a half-life
 * (tm_quota_share_advance()), and the figures per team: completion times
 * and the time within-quota demand was met within the reclaim bound.
 *
 * The quota model has one flavor (the replay's GPUs are one pool): its
 * index is 0.  A job's GPUs are whole GPUs over all its nodes.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "controller/replay/replay_pass.h"
#include "core/err.h"

struct replay_quota {
    const struct tm_replay_quota *cfg;
    int32_t nteams;              /* the model's nodes */
    int32_t *team;               /* per job */
    int64_t *qsince;             /* per job: queued since (a requeue moves it) */
    double *usage;               /* per node: decayed GPU-ms */
    int64_t *run_gpus;           /* per node: GPUs running now */
    int64_t *oldest;             /* per node: oldest within-quota queued job's
                                  * queued-since, INT64_MAX none */
    int64_t last;                /* when the guarantee state was observed */
    /* one pass's view */
    struct tm_quota_job *qjobs, *running;
    int32_t *run_job;
    int64_t *run_start, *run_id;
    struct tm_quota_answer *answers;
    struct tm_quota_usage *usage_pass;
    struct tm_sched_quota view;
};

static int64_t job_gpus(const struct rjob *rj)
{
    int64_t per = rj->tj->gpus > 0 ? rj->tj->gpus : 1;
    return per * rj->nodes;
}

int replay_quota_setup(struct replay_engine *s)
{
    const struct tm_replay_quota *c = s->cfg->teams;
    struct replay_quota *rq;
    size_t nn;

    if (!c)
        return 0;
    if (!c->quota || tm_quota_nflavors(c->quota) != 1 || !c->out || c->half_life_ms <= 0)
        return TM_EINVAL;
    nn = tm_quota_nnodes(c->quota);
    rq = calloc(1, sizeof(*rq));
    if (!rq)
        return TM_ENOMEM;
    s->rq = rq;
    rq->cfg = c;
    rq->nteams = (int32_t)nn;
    rq->team = calloc(s->njobs + 1, sizeof(*rq->team));
    rq->qsince = calloc(s->njobs + 1, sizeof(*rq->qsince));
    rq->usage = calloc(nn + 1, sizeof(*rq->usage));
    rq->run_gpus = calloc(nn + 1, sizeof(*rq->run_gpus));
    rq->oldest = calloc(nn + 1, sizeof(*rq->oldest));
    rq->qjobs = calloc(s->njobs + 1, sizeof(*rq->qjobs));
    rq->running = calloc(s->njobs + 1, sizeof(*rq->running));
    rq->run_job = calloc(s->njobs + 1, sizeof(*rq->run_job));
    rq->run_start = calloc(s->njobs + 1, sizeof(*rq->run_start));
    rq->run_id = calloc(s->njobs + 1, sizeof(*rq->run_id));
    rq->answers = calloc(s->njobs + 1, sizeof(*rq->answers));
    if (!rq->team || !rq->qsince || !rq->usage || !rq->run_gpus || !rq->oldest || !rq->qjobs ||
        !rq->running || !rq->run_job || !rq->run_start || !rq->run_id || !rq->answers)
        return TM_ENOMEM;
    memset(c->out, 0, nn * sizeof(*c->out));
    for (size_t j = 0; j < s->njobs; j++) {
        int32_t t = tm_quota_team(c->quota, s->jobs[j].tj->team);
        /* A job filed under an org's name runs on no team's quota. */
        rq->team[j] = t >= 0 ? t : (int32_t)nn - 1;
        rq->qsince[j] = s->jobs[j].submit;
    }
    for (size_t n = 0; n < nn; n++)
        rq->oldest[n] = INT64_MAX;
    rq->last = -1;
    return 0;
}

void replay_quota_release(struct replay_engine *s)
{
    struct replay_quota *rq = s->rq;

    if (!rq)
        return;
    tm_quota_usage_free(rq->usage_pass);
    free(rq->team);
    free(rq->qsince);
    free(rq->usage);
    free(rq->run_gpus);
    free(rq->oldest);
    free(rq->qjobs);
    free(rq->running);
    free(rq->run_job);
    free(rq->run_start);
    free(rq->run_id);
    free(rq->answers);
    free(rq);
    s->rq = NULL;
}

/* GPUs each team runs now, from the running jobs (a gang's first alloc
 * stands for it). */
static void count_running(struct replay_engine *s)
{
    struct replay_quota *rq = s->rq;

    memset(rq->run_gpus, 0, (size_t)rq->nteams * sizeof(*rq->run_gpus));
    for (size_t a = 0; a < s->nallocs; a++) {
        int32_t j = s->alloc_job[a];
        if (s->jobs[j].alloc == (int32_t)a)
            rq->run_gpus[rq->team[j]] += job_gpus(&s->jobs[j]);
    }
}

/* Does queued job j fit within its team's quota, what the team runs now
 * counted? */
static bool within_quota(const struct replay_engine *s, int32_t j)
{
    const struct replay_quota *rq = s->rq;
    int32_t t = rq->team[j];

    return rq->run_gpus[t] + job_gpus(&s->jobs[j]) <= tm_quota_guaranteed(rq->cfg->quota, t, 0);
}

/* Slurm's classic fair-share factor 2^(-usage share / quota share), 0..1:
 * 0.5 for a team that used exactly its share over the half-life. */
static double fair_factor(const struct replay_quota *rq, int32_t t)
{
    double key = tm_quota_fair_key(rq->cfg->quota, rq->usage, t), total = 0;

    if (isinf(key))
        return 0;
    for (int32_t n = 0; n < rq->nteams; n++)
        total += rq->usage[n];
    if (total <= 0)
        return 1;
    return exp2(-key / total);
}

/*
 * Before a pass at `now`: the guarantee's time since the last observation
 * counted, the usage decayed and advanced, and each queued job's priority
 * set from its team's fair share (rule FAIR: Slurm's multifactor fair-share
 * term, a weight of ten site levels; rule QUOTA: one level for a job within
 * its team's quota, one for a team at or below its share).
 */
void replay_quota_prepare(struct replay_engine *s, int64_t now)
{
    struct replay_quota *rq = s->rq;
    const struct tm_replay_quota *c;

    if (!rq)
        return;
    c = rq->cfg;
    if (rq->last >= 0 && now > rq->last) {
        double dt = (double)(now - rq->last);
        for (int32_t t = 0; t < rq->nteams; t++) {
            int64_t late;
            if (rq->oldest[t] == INT64_MAX)
                continue;
            c->out[t].demand_s += dt / 1000.0;
            late = rq->oldest[t] + c->bound_ms;
            late = late > rq->last ? late : rq->last;
            c->out[t].met_s += (dt - (double)(now > late ? now - late : 0)) / 1000.0;
        }
        tm_quota_share_advance(c->quota, rq->usage, rq->run_gpus, now - rq->last, c->half_life_ms);
    }
    rq->last = now;
    if (c->rule == TM_REPLAY_TEAMS_MEASURE)
        return;
    count_running(s);
    for (size_t k = 0; k < s->qlen; k++) {
        int32_t j = s->qjob[k];
        double f;
        if (j < 0)
            continue;
        f = fair_factor(rq, rq->team[j]);
        if (c->rule == TM_REPLAY_TEAMS_FAIR)
            s->q[k].priority = (int32_t)lround(10.0 * f);
        else
            s->q[k].priority = (within_quota(s, j) ? 1 : 0) + (f >= 0.5 ? 1 : 0);
    }
}

/* After a pass: which teams have within-quota demand, and since when. */
void replay_quota_observe(struct replay_engine *s, int64_t now)
{
    struct replay_quota *rq = s->rq;

    if (!rq)
        return;
    count_running(s);
    for (int32_t t = 0; t < rq->nteams; t++)
        rq->oldest[t] = INT64_MAX;
    for (size_t k = 0; k < s->qlen; k++) {
        int32_t j = s->qjob[k];
        if (j >= 0 && within_quota(s, j) && rq->qsince[j] < rq->oldest[rq->team[j]])
            rq->oldest[rq->team[j]] = rq->qsince[j];
    }
    rq->last = now;
}

void replay_quota_ended(struct replay_engine *s, int32_t j, int64_t now)
{
    struct replay_quota *rq = s->rq;

    if (!rq)
        return;
    rq->cfg->out[rq->team[j]].jobs++;
    rq->cfg->out[rq->team[j]].jct_sum_s += (double)(now - s->jobs[j].submit) / 1000.0;
}

const struct tm_sched_quota *replay_quota_view(const struct replay_engine *s, int64_t now,
                                               const struct tm_sched_job *jobs, size_t nj, int *err)
{
    struct replay_quota *rq = s->rq;
    bool ckpt;
    size_t nr = 0;

    *err = 0;
    if (!rq || rq->cfg->rule != TM_REPLAY_TEAMS_QUOTA)
        return NULL;
    /* Quotas need the whole queue's demand: the whole-queue pass only. */
    if (jobs != s->q || nj != s->nq || s->qlen != s->nq) {
        *err = TM_EINVAL;
        return NULL;
    }
    ckpt = rq->cfg->borrowers == TM_REPLAY_BORROW_CHECKPOINT;
    for (size_t a = 0; a < s->nallocs; a++) {
        int32_t j = s->alloc_job[a];
        const struct rjob *rj = &s->jobs[j];
        if (rj->alloc != (int32_t)a)
            continue;
        rq->run_job[nr] = j;
        rq->run_start[nr] = rj->start;
        rq->run_id[nr] = j;
        rq->running[nr++] = (struct tm_quota_job){
            .team = rq->team[j], .flavor = 0, .gpus = job_gpus(rj), .preemptible = true,
            .checkpointable = ckpt, .redo_gpu_ms = (now - rj->start) * job_gpus(rj)};
    }
    if (tm_quota_mark_borrowed(rq->cfg->quota, rq->running, nr, rq->run_start, rq->run_id) < 0) {
        *err = TM_ENOMEM;
        return NULL;
    }
    for (size_t k = 0; k < nj; k++) {
        int32_t j = s->qjob[k];
        rq->qjobs[k] = (struct tm_quota_job){
            .team = rq->team[j], .flavor = 0, .gpus = job_gpus(&s->jobs[j]), .preemptible = true,
            .checkpointable = ckpt};
    }
    tm_quota_usage_free(rq->usage_pass);
    rq->usage_pass = NULL;
    *err = tm_quota_usage_new(rq->cfg->quota, rq->running, nr, rq->qjobs, nj, &rq->usage_pass);
    if (*err < 0)
        return NULL;
    rq->view = (struct tm_sched_quota){
        .quota = rq->cfg->quota, .usage = rq->usage_pass, .jobs = rq->qjobs, .running = rq->running,
        .nrunning = nr, .disruption_budget = nr > INT32_MAX ? INT32_MAX : (int32_t)nr,
        .answers = rq->answers};
    return &rq->view;
}

int32_t replay_quota_victim(const struct replay_engine *s, const struct tm_sched_reclaim *rc)
{
    return s->rq->run_job[rc->victim.running];
}

void replay_quota_requeued(struct replay_engine *s, int32_t j, int64_t now)
{
    if (s->rq)
        s->rq->qsince[j] = now;
}

void replay_quota_figures(const struct replay_engine *s, struct tm_replay_stats *st)
{
    const struct replay_quota *rq = s->rq;
    double demand = 0, met = 0;

    if (!rq)
        return;
    for (int32_t t = 0; t < rq->nteams; t++) {
        demand += rq->cfg->out[t].demand_s;
        met += rq->cfg->out[t].met_s;
    }
    st->guarantee_met = demand > 0 ? met / demand : 1.0;
}
