/*
 * controller/reconcile/internal.h: what the files of the reconcile pass
 * share; nothing outside controller/reconcile/ includes it.  Calls run one
 * way: reconcile.c (tm_reconcile) -> the steps (observe.c, budgets.c,
 * schedule.c, fleet.c) -> route.c, moves.c -> pass.c; moves.c also asks
 * route.c and budgets.c for launches, and nothing calls back up.
 *
 * One pass is one struct pass: the input, the plan being written, and the
 * per-node, per-job and per-pool scratch arrays the steps hand each other.
 * Every helper records its first allocation failure in p->err and does
 * nothing once it is set, so the steps check p->err only between steps.
 */
#ifndef TM_RECONCILE_INTERNAL_H
#define TM_RECONCILE_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <cjson/cJSON.h>

#include "controller/sched/estimate.h"
#include "controller/fleet/burst.h"
#include "controller/fleet/plan_input.h"
#include "controller/fleet/planner.h"
#include "controller/fleet/prices.h"
#include "controller/reconcile/reconcile.h"

/* Lookups by id in O(log n): a pass over 100k jobs and 10k nodes must not
 * scan the snapshot once per allocation. */
struct id_index {
    int64_t id;
    int32_t index;
};

/* A cap and the projection of spend against it this month, in micro-dollars:
 * spent (ledger) + committed (running work to the end of its expected use)
 * + what this pass admits (job starts, launches). */
struct team_budget {
    const struct tm_snap_budget *b;
    int64_t cap_uusd;
    int64_t spent_uusd;
    int64_t projected_uusd;
};

struct pass {
    const struct tm_reconcile_input *in;
    const struct tm_config *cfg;
    struct tm_rc_plan plan;
    size_t launch_cap, term_cap;
    int err;
    int *pool_provider;        /* pool index -> provider index */
    int *live;                 /* pool index -> nodes requested..draining */
    int64_t *pending_milli;    /* pool index -> GPUs of nodes still booting */
    int64_t *demand_milli;     /* pool index -> GPUs wanted by unplaced jobs */
    bool *node_gone;           /* node index -> leaving this pass */
    bool *node_ready;          /* node index -> schedulable this pass */
    bool *node_busy;           /* node index -> holds an allocation now */
    bool *node_noticed;        /* node index -> has an interruption notice, staying this pass */
    bool *job_leaving;         /* job index -> checkpointed or requeued by this pass */
    struct id_index *alloc_nodes; /* allocations sorted by node id (then by index) */
    char (*node_instance)[TM_ID_MAX]; /* node index -> instance id seen */
    struct id_index *node_ids;  /* sorted by id: node id -> snapshot index */
    struct id_index *job_ids;   /* sorted by id: job id -> snapshot index */
    struct tm_estimator *est;   /* runtime estimates from the snapshot's history */
    bool *job_held;             /* job index -> held back by a team's hard cap */
    int64_t *pool_use_ms;       /* pool index -> longest estimate of its unplaced work */
    struct team_budget *teams;  /* teams with a cap */
    size_t nteams;
    struct team_budget *org;    /* the org cap, or NULL */
    /* The planner's other actions (reconcile/moves.c). */
    bool *node_placed;          /* node index -> got a placement this pass */
    bool *node_replaced;        /* node index -> a spot substitute for it is live */
    bool *job_switched;         /* job index -> switched to on-demand this pass */
    int *disrupt_left;          /* pool index -> disruptions its budget still allows (INT_MAX: no budget) */
    int *disrupt_recent;        /* pool index -> disruptions in its current interval */
    /* Fencing (staleness.c): whether a node's old processes can still run. */
    bool *node_fenced;          /* node index -> its listing confirms the instance gone */
    bool *node_unfenced;        /* node index -> its agent is silent and nothing has
                                 * stopped its processes yet */
    /* Pools whose launched nodes never enrolled (no_show.c). */
    struct tm_no_show_hold *no_show; /* pool index -> its run and hold */
    bool *no_show_said;         /* pool index -> its hold recorded this pass */
    /* Owned first (burst.c). */
    int64_t *job_owned_start;   /* job index -> start of the scheduler's reservation for it
                                 * on an owned node, 0 none (schedule.c); then the
                                 * projection the burst rule decided on */
    uint8_t *job_burst;         /* job index -> 0: the burst rule does not apply;
                                 * else 1 + its enum tm_burst_choice this pass */
};

/* What one model's planner pass is given, and where its entries came from. */
struct fleet {
    struct tm_price_table pr;
    struct tm_planner_node *nodes;
    int32_t *node_of;           /* plan node -> snapshot node */
    int32_t *plan_of;           /* snapshot node -> plan node, -1 when not in it */
    size_t nnodes;
    struct tm_planner_job *jobs;
    size_t njobs;
    /* The snapshot as the planner's input builder reads it
     * (fleet/plan_input.h): one entry per plan node, and per job its hold
     * on a plan node or its ask. */
    struct tm_plan_view_node *vnodes;
    struct tm_plan_view_job *vjobs;
    size_t nvjobs;
    struct tm_planner_shortage *shortages;
    size_t nshortages;
    bool any_shortage;
    /* Spot interruptions per node-hour of type t in zone z at
     * [t x pr.nzones + z], the planner's spot_zone_hazard, when
     * zone_hazards (some spot pool of the model has a provider with a
     * fitted table, config spot_hazards); cells no spot pool offers are
     * HUGE_VAL. */
    double spot_zone_hazard[TM_PRICES_TYPES_MAX * TM_PRICES_ZONES_MAX];
    bool zone_hazards;
};

/* Expected use of a launch or of work with no estimate. */
#define TM_RC_DEFAULT_USE_MS 3600000
/* Checkpoint plus restore of one move, as the elastic replay assumes. */
#define TM_RC_MOVE_COST_MS 60000

/* ---- plan writing (pass.c) ---------------------------------------------- */

/* Append {"op": op, "reason": reason} to the plan; NULL once p->err is set. */
cJSON *tm_rc_action(struct pass *p, const char *op, const char *reason);
/* Add a number or string member to obj (NULL obj: nothing). */
void tm_rc_put_num(struct pass *p, cJSON *obj, const char *key, double v);
void tm_rc_put_str(struct pass *p, cJSON *obj, const char *key, const char *v);
/* The action's "inputs" object, created. */
cJSON *tm_rc_inputs(struct pass *p, cJSON *a);
/* A cloud terminate to make after the plan commits. */
void tm_rc_add_terminate(struct pass *p, int provider, int64_t node_id, const char *instance_id);
/* A cloud launch to make after the plan commits (node_id 0: a new node). */
void tm_rc_add_launch(struct pass *p, int64_t node_id, const char *token, int pool,
                      const char *type, const char *zone, enum tm_capacity_type cap);

/* ---- snapshot lookups (pass.c) ----------------------------------------- */

/* p->alloc_nodes sorted, p->node_ids and p->job_ids built; once per pass,
 * before any lookup. */
void tm_rc_index_build(struct pass *p);
int tm_rc_node_index(const struct pass *p, int64_t id);
int tm_rc_job_index(const struct pass *p, int64_t id);
/* The allocations on node id: entries [*lo, *hi) of p->alloc_nodes. */
void tm_rc_allocs_on_node(const struct pass *p, int64_t id, size_t *lo, size_t *hi);
/* The running job of entry k of p->alloc_nodes, -1 if none or leaving. */
int tm_rc_running_job_at(const struct pass *p, size_t k);
int64_t tm_rc_ran_ms(const struct pass *p, const struct tm_snap_job *j);
int64_t tm_rc_job_gpu_milli(const struct tm_snap_job *j);
int64_t tm_rc_job_estimate(const struct tm_estimator *est, const struct tm_snap_job *j);
/* The same; *ret_known (when not NULL) says it came from the job's own
 * earlier runs (same team, name, class and GPUs), which the scheduler's
 * align_ends placement trusts.  An estimate the submitter gave is not. */
int64_t tm_rc_job_estimate_known(const struct tm_estimator *est, const struct tm_snap_job *j, bool *ret_known);

/* ---- pools (pass.c) ---------------------------------------------------- */

bool tm_rc_pool_is_od(const struct tm_config_pool *pool);
/* Whether a job may use a pool at all: model, size, pool pin, and
 * non-preemptible work never on spot capacity. */
bool tm_rc_pool_accepts(const struct tm_config_pool *pool, int pool_index,
                        const struct tm_snap_job *j);
/* The cheapest type of a pool for a capacity type, by price per GPU-hour. */
const struct tm_config_instance_type *tm_rc_pool_type(const struct tm_config *cfg,
                                                      const struct tm_config_pool *pool,
                                                      enum tm_capacity_type cap);
/* Boot time the planner assumes for a pool: the sim provider's, else 3 min. */
int64_t tm_rc_pool_boot_ms(const struct tm_config *cfg, const struct tm_config_pool *pool);

/* ---- the steps (observe.c, budgets.c, schedule.c, fleet.c) ------------- */

/* Step 1: compare each live node with its provider's listing;
 * ret_matched[o] is allocated here, an entry per instance of listing o. */
void tm_rc_observe(struct pass *p, bool **ret_matched);
/* staleness.c: silent nodes (after observe, before scheduling) and idle GPUs. */
void tm_rc_staleness(struct pass *p);
/* Fill p->node_unfenced from p->node_fenced (observe.c fills that first,
 * before any node_gone). */
void tm_rc_fence_mark(struct pass *p);
/* Whether a running job on node index ni also runs on another node whose
 * processes may still run (p->node_unfenced): a gang is requeued whole
 * only once every silent member is fenced. */
bool tm_rc_gang_waits(const struct pass *p, size_t ni);
void tm_rc_idle_gpus(struct pass *p);
/* gang_start.c: a gang whose start barrier waited past
 * agent.gang_start_timeout for a member is requeued whole. */
void tm_rc_gang_start(struct pass *p);
void tm_rc_drain_checkpoints(struct pass *p);
/* Spent and committed spend against every cap; fills p->teams, p->org and
 * p->job_held. */
void tm_rc_budgets(struct pass *p);
/* Step 2: the scheduler over the ready nodes; marks job_placed[job index]. */
void tm_rc_schedule(struct pass *p, bool *job_placed);
/* Power saving's ops into p->plan.power, after placements (power.c). */
void tm_rc_power(struct pass *p, const bool *job_placed);
/* Step 3: launches and releases from the planner, per GPU model, then
 * pool minimums and drained nodes. */
void tm_rc_run_planner(struct pass *p, const bool *job_placed);

/* ---- budgets (budgets.c) ----------------------------------------------- */

/* A soft cap's warning, once its projection passes warn_percent. */
void tm_rc_budget_warn(struct pass *p, const struct team_budget *tb);
/* The org's hard cap admits a launch (false: a refusal is recorded). */
bool tm_rc_launch_admitted(struct pass *p, int pi, const struct tm_config_instance_type *t,
                           enum tm_capacity_type cap);

/* ---- launches (route.c) ------------------------------------------------ */

/* The pool a queued job's new capacity comes from, -1 when none takes it. */
int tm_rc_job_route(const struct tm_config *cfg, const struct tm_snap_job *j);
/* GPUs a queued job asks of a pool, in milli-GPU. */
int64_t tm_rc_job_ask_milli(const struct tm_config_pool *pool, const struct tm_snap_job *j);
bool tm_rc_pool_lists_zone(const struct tm_config_pool *pool, const char *zone);
/* A config pool of the model for a launch the planner chose, -1 if all full. */
int tm_rc_launch_pool(struct pass *p, const bool *in_model, const char *type, const char *zone,
                      bool spot, bool fallback_od);
/* The same on one cloud's pools (provider NULL or "": any). */
int tm_rc_launch_pool_on(struct pass *p, const bool *in_model, const char *provider, const char *type,
                         const char *zone, bool spot, bool fallback_od);
/* Record a node request (token written before any cloud call); returns the
 * request_node action, owned by the plan. */
cJSON *tm_rc_request_node(struct pass *p, int pi, const struct tm_config_instance_type *t,
                          const char *zone, enum tm_capacity_type cap, const char *why,
                          double forecast_gpus, unsigned *seq);
/* The same with a token the caller made (a gang's member token). */
cJSON *tm_rc_request_node_token(struct pass *p, int pi, const struct tm_config_instance_type *t,
                                const char *zone, enum tm_capacity_type cap, const char *why,
                                double forecast_gpus, const char *token);

/* ---- gangs (gang.c) ---------------------------------------------------- */

/* A planner launch of x->count > 1 nodes: one config pool that takes the
 * whole set, `count` request_node ops in one zone whose member tokens
 * share one stem (tm_launch_member_token), so that the daemon launches
 * them as one set and a restart relaunches them together.  Refused whole
 * (no node row) when no pool has room for all or the org's cap refuses
 * one of them.  provider: the cloud whose type the planner chose (NULL or
 * "": any). */
void tm_rc_request_gang(struct pass *p, const bool *in_model, const char *provider, const char *type,
                        const char *zone,
                        bool spot, bool od_fallback, int32_t count, const char *planner_why,
                        double forecast_gpus, unsigned *seq);

/* ---- nodes that never enroll (no_show.c) ------------------------------- */

/* Each pool's run of nodes that never enrolled and its hold, from the
 * snapshot; once per pass, before scheduling. */
void tm_rc_no_show_init(struct pass *p);
/* Whether pool pi's launches wait out its backoff now; when they do, the
 * launch avoided is recorded (op launch_held, once per pass and pool; the
 * apply keeps one decision per hold). */
bool tm_rc_launch_held(struct pass *p, int pi);
/* A queued job routed to a held pool: why (size bytes) becomes the hold,
 * then what it said before. */
void tm_rc_no_show_why(const struct pass *p, const struct tm_snap_job *j, char *why, size_t size);

/* ---- owned first, the clouds for the overflow (burst.c) ---------------- */

/* After the scheduler's placements, before its wait reasons: the group's
 * burst rule for each queued job it did not place (p->job_burst). */
void tm_rc_burst(struct pass *p, const bool *job_placed);
/* The rule's decision for job index ji now; false when it does not apply. */
bool tm_rc_burst_explain(const struct pass *p, size_t ji, struct tm_burst_decision *d);
/* Whether the rule keeps job ji waiting for owned capacity this pass. */
bool tm_rc_burst_waits(const struct pass *p, size_t ji);
/* The wait reason of such a job (size bytes); returns its projected owned
 * start (TM_BURST_NO_START: none). */
int64_t tm_rc_burst_wait_why(const struct pass *p, size_t ji, char *why, size_t size);
/* The jobs the rule sent to the clouds in one planner pass's pools. */
struct rc_burst_model {
    int first;   /* the first one's job index, -1 none */
    size_t n;
};
void tm_rc_burst_model(const struct pass *p, const bool *in_model, struct rc_burst_model *bm);
/* A launch's reason: the burst behind it appended (ji: the planner's job,
 * -1 none; else bm's first); returns the job named, -1 none. */
int tm_rc_burst_launch_why(const struct pass *p, const struct rc_burst_model *bm, int ji, char *why,
                           size_t size);
/* Its figures in the launch's inputs. */
void tm_rc_burst_launch_inputs(struct pass *p, int ji, cJSON *a);

/* ---- team quotas (quotas.c) ------------------------------------------- */

/* One pass's quotas: the model built from the snapshot, the running and
 * queued jobs as the quota module sees them, and the scheduler's view. */
struct rc_quota {
    bool on;                          /* a quota is set: view is the pass's input */
    char error[TM_QUOTA_WHY_MAX];     /* the stored set refused (then off) */
    struct tm_quota *q;
    struct tm_quota_usage *usage;
    int32_t *pool_flavor;             /* config pool -> quota flavor, -1 when no quota names it */
    size_t npools;
    struct tm_quota_job *jobs;        /* per scheduler job */
    struct tm_quota_answer *answers;  /* per scheduler job */
    struct tm_quota_job *running;     /* running jobs under a named flavor */
    const struct tm_snap_job **run_snap; /* their snapshot rows */
    size_t nrunning;
    struct tm_sched_quota view;
};
/* Before the scheduler: build rq for the nj queued jobs the scheduler is
 * given (job_of: scheduler job -> snapshot job), narrowing each quota'd
 * job's pools to its flavor's.  0 (rq->on false: no quota applies) or
 * TM_ENOMEM. */
int tm_rc_quota_begin(struct pass *p, struct rc_quota *rq, struct tm_sched_job *jobs,
                      const int32_t *job_of, size_t nj);
/* The scheduler's reclaims as checkpoint or preempt ops, each within its
 * pool's disruption budget. */
void tm_rc_quota_reclaims(struct pass *p, struct rc_quota *rq, const struct tm_sched_result *res,
                          const int32_t *job_of);
/* The plan's quota view (p->plan.quota_view), then rq released. */
void tm_rc_quota_end(struct pass *p, struct rc_quota *rq);

/* ---- the planner's other actions (moves.c) ----------------------------- */

/* Per pool: disruptions in the current interval (the snapshot's decisions)
 * and how many more the budget allows.  Call once, before
 * tm_rc_run_planner(). */
void tm_rc_disruption_init(struct pass *p);
/* Take one disruption from pool pi's budget: false when it is spent. */
bool tm_rc_disruption_take(struct pass *p, int pi);
/* Mark the on-demand nodes a live spot substitute replaces, and move the
 * jobs off those whose substitute is ready (then they are released once
 * empty).  Call before the planner, after observe and schedule. */
void tm_rc_substitutes(struct pass *p);
/* Map one planner action of kind DRAIN, MOVE, SUBSTITUTE, DEADLINE_OD or
 * REFUSE to plan ops. */
void tm_rc_plan_other(struct pass *p, const bool *in_model, const struct fleet *f,
                      const struct tm_planner_input *in, const struct tm_planner_action *x, unsigned *seq);
/* A launch refused for want of room in every pool of one side of a model. */
void tm_rc_refuse(struct pass *p, const bool *in_model, bool spot, const char *key, const char *reason);

#endif
