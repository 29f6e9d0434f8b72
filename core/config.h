/*
 * core/config.h: the tarmac configuration file (YAML, parsed with libyaml).
 *
 * The file is parsed, then validated, then normalised.  Each section is
 * described by one declarative table in config.c (key, type, offset, default,
 * limits), so code, defaults and config/tarmac.example.yaml agree.
 *
 * Invariants once tm_config_load*() has returned 0:
 *   - every string field the file may omit is either NULL (documented below)
 *     or a heap copy owned by the struct tm_config;
 *   - defaults are applied, every value is within its documented limits;
 *   - nproviders >= 1, npools >= 1, names are unique, every pool names an
 *     existing provider and (for sim providers) existing instance types whose
 *     gpu_model and gpus agree with the pool;
 *   - a provider's spot_hazards table, when the file names one, is loaded
 *     (the file is read once, here: nothing reads it per tick).
 *
 * Durations are milliseconds.  Prices are integer micro-dollars per hour
 * ("32.77" in the file becomes 32770000), converted without floating point.
 *
 * Secrets never live in this file: credentials only say where they come
 * from.  A password inside database.url is registered with
 * tm_log_add_secret() so that log lines redact it.
 */
#ifndef TM_CONFIG_H
#define TM_CONFIG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct tm_spot_hazards;
struct tm_config_kind;

struct tm_config_instance_type {  /* an instance type the provider offers */
    char *name;                   /* e.g. "sim.8x-a100" or "p4d.24xlarge" */
    int gpus;                     /* > 0 */
    char *gpu_model;              /* e.g. "A100" */
    int64_t cpu_milli;            /* allocatable, > 0 */
    int64_t memory_mib;           /* > 0 */
    int64_t on_demand_uusd_per_hour; /* micro-dollars per hour, e.g. "32.77" */
    int64_t spot_uusd_per_hour;   /* 0 = no spot offered */
    int capacity;                 /* sim only: max instances alive, 0 = unlimited */
};

struct tm_config_credentials {
    char *source;                 /* "none" | "env" | "file" | "instance_role" */
    char *file;                   /* path of a credentials file, may be NULL */
    char *profile;                /* profile name inside it, may be NULL */
};

struct tm_config_provider {
    char *name;
    char *kind;                   /* a kind of core/config_kind.h's table */
    char *region;                 /* required, any name for sim */
    char *endpoint;               /* may be NULL: the provider's default */
    struct tm_config_credentials credentials;
    /* Launch to running, what the planner assumes for this provider's
     * nodes: its kind's (struct tm_config_kind's boot_ms), else
     * TM_CONFIG_BOOT_MS_DEFAULT; filled at load. */
    int64_t boot_ms;
    /* The kind's own block: a struct its folder defines and fills from
     * the keys of its rows' block (providers/KIND/KIND_config.h reads it);
     * NULL for a kind without one. */
    void *kind_block;
    const struct tm_config_kind *kind_row; /* whose block it is; set before it is made */
    /* The defaults of its pools' spot_hazard and spot_notice (any kind:
     * the planner and the sim read them through the pools). */
    double spot_hazard_per_hour;  /* interruptions per node-hour, default 0 */
    int64_t spot_notice_ms;       /* notice before interruption, default 120 s */
    struct tm_config_instance_type *types;
    size_t ntypes;
    /* Key spot_hazards: a fitted hazard table (`tarmac spot-fit --yaml`,
     * core/spot_hazards.h) for this provider's account, may be NULL.  It
     * is loaded and checked with the configuration and read through
     * tm_config_spot_hazard(); spot_hazards is NULL without a file. */
    char *spot_hazards_file;
    struct tm_spot_hazards *spot_hazards;
    /* Fencing: a confirmed terminate stops every process of the node
     * (default true); false: its silent nodes wait agent.fence_after. */
    bool fence;
    /* Its kind's `owned` (core/config_kind.h): machines tarmac does not
     * buy; filled at load, fence then false (no terminate can fence). */
    bool owned;
};

/* One reservation a pool launches into before anything else: capacity
 * bought ahead (a cloud's capacity reservation, or a block with a fixed
 * start and end).  The file names it; what it leaves out the cloud says
 * (providers/common/reservations.h), and a cloud that says nothing (the
 * sim) needs it all.  How an id is spelled is its kind's rule
 * (check_pools). */
struct tm_config_reservation {
    char *id;                     /* required: "cr-0123456789abcdef0" on AWS */
    bool block;                   /* a capacity block: its own market, ends with its term */
    char *instance_type;          /* NULL: the cloud says */
    char *zone;                   /* NULL: the cloud says */
    int count;                    /* instances, 0: the cloud says */
    char *start, *end;            /* "YYYY-MM-DD HH:MM:SS" UTC (a T and a Z allowed), NULL: the cloud says */
    int64_t start_ms, end_ms;     /* parsed at load, 0 when absent */
};

/* The boot time a kind that says none is taken to have. */
#define TM_CONFIG_BOOT_MS_DEFAULT 180000

struct tm_config_pool {
    char *name;
    char *provider;               /* provider name, must exist */
    char **zones;                 /* >= 1 */
    size_t nzones;
    char **instance_types;        /* >= 1; for sim providers each must exist */
    size_t ninstance_types;
    char *gpu_model;              /* must agree with every listed type */
    int gpus_per_node;            /* must agree with every listed type */
    char *capacity_type;          /* "on_demand" | "spot" | "spot_then_on_demand" */
    int min_nodes, max_nodes;     /* 0 <= min <= max <= 10000 */
    int64_t idle_grace_ms;        /* default 10 min */
    double spot_hazard_per_hour;  /* spot interruptions per node-hour (the sim draws them), for
                                   * the cells its provider's spot_hazards table lacks;
                                   * default the provider's */
    int64_t spot_notice_ms;       /* notice before a spot interruption; default the provider's */
    /* Disruption budget: at most max(disruption_nodes, disruption_pct % of
     * the pool's live nodes) voluntary disruptions (idle releases, moves,
     * substitutions) per disruption_interval.  Neither key set: no limit
     * (disruption_limited false). */
    int disruption_nodes;         /* default 0 */
    double disruption_pct;        /* percent, 0 .. 100; default 0 */
    int64_t disruption_interval_ms; /* default 10 min, 1 s .. 1 day */
    bool disruption_limited;      /* disruption_nodes or disruption_pct was given */
    bool drain_oversized;         /* the planner drains oversized nodes; default false */
    /* The node agent. */
    char *bootstrap_file;         /* key bootstrap: a template (core/bootstrap.h), may be NULL */
    char *bootstrap;              /* its text, read at load; NULL without a file */
    size_t bootstrap_len;
    char *checkpoint_dir;         /* jobs checkpoint under PATH/job-<id>; may be NULL */
    char *idle_job_action;        /* report | requeue | cancel, default report */
    /* Consolidation by restart: the planner may stop this pool's
     * preemptible jobs that cannot checkpoint and start them elsewhere when
     * the saving exceeds the work redone.  Default true; set it on a pool
     * without preemptible work and it does nothing (said once at start). */
    bool consolidate_restart;
    bool consolidate_restart_set; /* the key was given (normalise()) */
    /* A gang's set goes into it: EC2 cluster placement group, GCP compact
     * resource policy (its name or URL); NULL: none. */
    char *placement_group;
    /* A pool group: pools (usually on different clouds) whose work is one
     * queue.  The planner sees the group's types on every member's cloud
     * at once and buys the cheapest offer with capacity; members agree on
     * gpu_model and gpus_per_node (checked at load).  NULL: the pool is
     * planned with the other ungrouped pools of its gpu_model. */
    char *group;
    /* Owned pools (a provider of an owned kind, docs/owned.md): machines
     * that join with a join token.  owned is filled at load from the
     * provider; the rest are refused on other pools.  zones and
     * instance_types may be left out there: load fills ["owned"]. */
    bool owned;
    /* A joining machine must match gpu_model and gpus_per_node exactly
     * (false, default); true: any model, 1 .. gpus_per_node GPUs. */
    bool mixed_shapes;
    int64_t cost_uusd_per_node_hour;           /* required on an owned pool */
    int64_t suspended_cost_uusd_per_node_hour; /* a suspended node's rate; default 0 */
    /* Power saving (owned pools only, docs/owned.md "Power saving"): the
     * leader runs suspend_command on a node idle past suspend_after and
     * resume_command on a suspended one the queue needs, each as argv
     * with the node's name and address appended (and in TARMAC_NODE_*),
     * killed past command_timeout; at most power_changes_max nodes of the
     * pool suspending or resuming at once; a resumed node has
     * resume_timeout to heartbeat again.  NULL commands: no power saving. */
    char **suspend_command;
    size_t nsuspend_command;
    char **resume_command;
    size_t nresume_command;
    int64_t suspend_after_ms;     /* default 30m */
    int power_changes_max;        /* default 1 */
    int64_t resume_timeout_ms;    /* default 10m */
    int64_t command_timeout_ms;   /* default 1m */
    /* Reserved capacity (docs/clouds.md): launches go into these first;
     * when none has room the pool buys as capacity_type says, unless
     * reservation_fallback is false (then the launch waits for room). */
    struct tm_config_reservation *reservations;
    size_t nreservations;
    bool reservation_fallback;    /* default true */
};

/* agent: the node agents' side of the controller (enrollment, staleness). */
struct tm_config_agent {
    char *controller_url;         /* what bootstraps tell agents; may be NULL (then no template) */
    char *ca_file;                /* PEM the agent trusts ({{ca_pem}}); may be NULL */
    char *ca_pem;                 /* its text, read at load; NULL without a file */
    int64_t enroll_ttl_ms;        /* an enrollment secret's life, default 30 min */
    int64_t unreachable_after_ms; /* no heartbeat for this long: unreachable, default 2 min */
    int64_t requeue_after_ms;     /* ... its jobs requeued, default 5 min */
    int64_t terminate_after_ms;   /* ... its instance terminated, default 15 min */
    int64_t boot_allowance_ms;    /* a node never heard from: counted from its request, default 10 min */
    int64_t sample_retention_ms;  /* gpu_samples older than this are pruned, default 7 d */
    /* Fencing (controller/reconcile/staleness.c): a silent node whose
     * instance cannot be terminated through a provider has its jobs
     * requeued only after this long, default 30 min, at least requeue_after. */
    int64_t fence_after_ms;
    /* Bounded telemetry: what a node's clock may differ from ours (sample
     * times ahead of now, an interruption deadline behind it), default
     * 2 min; how old a sample may be when it arrives, default 6 h (the
     * agent's backlog after an outage). */
    int64_t clock_skew_ms;
    int64_t sample_max_age_ms;
    /* The shortest --sample-period the fleet's agents run with, default
     * 1 s: a node may store one sample per GPU per period, beyond a burst
     * that holds an agent's whole backlog (controller/api/sample_budget.c). */
    int64_t min_sample_period_ms;
    /* Pools whose launched nodes never enroll (controller/reconcile/no_show.c):
     * after k such nodes in a row, the pool's next launch waits
     * no_show_backoff x 2^(k-1), at most no_show_backoff_max; after
     * no_show_alert_after in a row, alert pool_no_show.  0 turns each off. */
    int64_t no_show_backoff_ms;     /* default 1 min */
    int64_t no_show_backoff_max_ms; /* default 1 h, at least no_show_backoff */
    int no_show_alert_after;        /* default 3 */
    /* Mass silence (controller/reconcile/staleness.c): when at least
     * mass_silence_min_nodes of a provider's nodes that have spoken, and at
     * least mass_silence_share of them, are silent at once, the silence is
     * taken for the controller's or the network's, not the nodes': none of
     * them is marked unreachable, requeued or terminated for it.
     * min_nodes 0 turns the guard off. */
    double mass_silence_share;    /* default 0.55, 0.05 .. 1 */
    int mass_silence_min_nodes;   /* default 3, 0 .. 100000 */
    /* Multi-node rendezvous (docs/multi-node.md, migrations/0020): the
     * ports a job's rank-0 node may be given as TARMAC_MASTER_PORT, never
     * one port to two running jobs on one node. */
    int rendezvous_port_min;      /* default 29500, 1024 .. 65535 */
    int rendezvous_port_max;      /* default 29999, at least the min */
    /* A multi-node job's start barrier (docs/multi-node.md, migrations/0021):
     * no member starts until every member's agent has claimed the
     * attempt; when one has not this long after the first did, the whole
     * gang is requeued (controller/reconcile/gang_start.c). */
    int64_t gang_start_timeout_ms; /* default 5 min, 1 s .. 1 day */
};

/* idle_gpu: allocated GPUs whose samples stay below threshold for window. */
struct tm_config_idle_gpu {
    double threshold_percent;     /* default 5 */
    int64_t window_ms;            /* default 30 min */
};

/* logs.s3: the bucket of logs.store: s3 (controller/api/log_store_s3.c).
 * No key in the file: credentials names where they come from (the aws
 * provider's chain: env, file, instance_role). */
struct tm_config_logs_s3 {
    char *bucket;                 /* required with logs.store: s3 */
    char *endpoint;               /* scheme://host[:port]; default AWS_ENDPOINT_URL_S3,
                                   * AWS_ENDPOINT_URL, else https://s3.REGION.amazonaws.com */
    char *region;                 /* default AWS_REGION, AWS_DEFAULT_REGION, the profile's */
    char *prefix;                 /* put before every object name, default "tarmac-logs/" */
    struct tm_config_credentials credentials;
    int64_t timeout_ms;           /* one request, default 60 s */
};

/* logs: every byte of a job's output (docs/logs.md, controller/api/log_store.h). */
struct tm_config_logs {
    char *store;                  /* where the bytes go: "postgres" (default) or "s3" */
    int64_t max_bytes_per_job;    /* per job, attempt and rank: past it the head and the
                                   * tail are kept with a marker, default 64 MiB */
    int64_t retention_ms;         /* output last written longer ago is pruned, default 14 d */
    int64_t max_chunk;            /* bytes of one chunk an agent sends, default 64 KiB */
    int64_t follow_limit_ms;      /* a follow request is answered after this at the latest,
                                   * default 30 s */
    struct tm_config_logs_s3 s3;
};

/* api: the HTTP server's TLS and limits (controller/api/server.h). */
struct tm_config_api {
    char *tls_cert_file;          /* PEM chain; with tls_key_file, serve HTTPS; may be NULL */
    char *tls_key_file;           /* PEM private key; both or neither */
    char *metrics_token_file;     /* bearer token /metrics then requires; may be NULL (public) */
    int64_t max_body_bytes;       /* default 256 KiB, 1 KiB .. 64 MiB */
    unsigned max_list;            /* items per page at most, default 1000 */
    double rate_per_s;            /* key rate_per_token: requests/s per token, default 100 */
    double burst;                 /* token bucket size, default 200 */
    int64_t request_timeout_ms;   /* a request's deadline, default 5 s (docs/ha.md) */
    /* Enrollment (POST /v1/agent/enroll, no token yet): a bucket per
     * client address, defaults 2/s and 50. */
    double enroll_rate_per_s;
    double enroll_burst;
};

/* alerts: conditions and where they go (controller/reconcile/alerts.h).  A threshold
 * of 0 turns its condition off. */
struct tm_config_alerts {
    char *webhook_url;            /* http(s) URL, may be NULL (alerts only recorded); a secret */
    int64_t webhook_timeout_ms;   /* per attempt, default 5 s */
    int webhook_attempts;         /* per alert, default 5 */
    int64_t webhook_backoff_ms;   /* first retry delay, doubling; default 2 s */
    double pool_util_below_percent; /* a paid pool's GPU utilisation below this ... */
    int64_t pool_util_for_ms;     /* ... for this long (default 15 min) */
    int64_t queue_age_above_ms;   /* oldest queued job older than this */
    bool soft_cap;                /* spend past a soft cap's warning threshold, default true */
    bool provider_auth;           /* a provider refusing our credentials, default true */
};

/* The live demand forecast (controller/reconcile/live_forecast.c). */
struct tm_config_forecast {
    double quantile;              /* provisioning quantile, default 0.9, 0.5..0.999 */
    int64_t history_ms;           /* warm start: demand history read at leadership,
                                   * default 8 d (a weekly season and a day), 0: none */
};

/* How a pool group holding owned and cloud pools sends its queued work
 * to the clouds (controller/fleet/burst.h has the rule, docs/owned.md the
 * words). */
enum tm_config_burst {
    TM_CONFIG_BURST_COST = 0, /* tarmac's: waiting weighed against buying (default) */
    TM_CONFIG_BURST_NEVER,    /* owned capacity only */
    TM_CONFIG_BURST_AFTER,    /* a constant wait, then the clouds */
};

/* pool_groups[]: a group's own settings; its members name it with
 * pools[].group.  A group no entry names has the defaults. */
struct tm_config_pool_group {
    char *name;                   /* required; some pool's group */
    char *burst;                  /* "never", "cost" (default) or "after DURATION";
                                   * "after" when given as {after: DURATION} */
    bool burst_mapping;           /* burst was the mapping {after: DURATION} */
    enum tm_config_burst burst_rule;  /* burst, parsed */
    int64_t burst_after_ms;       /* TM_CONFIG_BURST_AFTER: the wait */
    /* The cost rule's value of an hour of one job's waiting, in
     * micro-dollars; 0 (default): the on-demand price of one GPU-hour. */
    int64_t wait_value_uusd_per_hour;
};

struct tm_config {
    char *path;                   /* file it came from (or the name given) */
    char *database_url;           /* required unless TARMAC_DATABASE_URL is set */
    unsigned database_pool_size;  /* default 4, 1..64 */
    int64_t database_leader_lease_ms; /* database.leader_lease, default 15 s (docs/ha.md) */
    char *listen;                 /* "host:port", default "127.0.0.1:8080" */
    char *cluster;                /* cluster tag value, required, [a-z0-9-]{1,40} */
    int64_t tick_interval_ms;     /* default 5 s, 100 ms .. 10 min */
    double time_scale;            /* demo clock acceleration, default 1, 1..10000 */
    char *log_level;              /* debug|info|warn|error, default info */
    char *scheduler_policy;       /* fifo|backfill|tarmac, default tarmac */
    int64_t starvation_ms;        /* default 1 h */
    struct tm_config_api api;
    struct tm_config_alerts alerts;
    struct tm_config_forecast forecast;
    struct tm_config_agent agent;
    struct tm_config_idle_gpu idle_gpu;
    struct tm_config_logs logs;
    struct tm_config_provider *providers;
    size_t nproviders;            /* >= 1 */
    struct tm_config_pool *pools;
    size_t npools;                /* >= 1 */
    struct tm_config_pool_group *pool_groups;
    size_t npool_groups;
};

/* The configuration file every command reads without --config or
 * TARMAC_CONFIG, when it exists. */
#define TM_CONFIG_DEFAULT_PATH "/etc/tarmac/tarmac.yaml"

/* Which file to read: given (a --config option) when not NULL, else
 * TARMAC_CONFIG, else TM_CONFIG_DEFAULT_PATH when it exists; NULL when
 * none of them names one. */
const char *tm_config_path(const char *given);

/*
 * Load and validate a file.  On success fills *ret_cfg (caller releases it
 * with tm_config_release()).  On failure *ret_cfg is untouched, the return is
 * TM_EINVAL (bad content), TM_ENOMEM or -errno (I/O), and err receives one
 * line such as
 *   tarmac.yaml:12: key "pools[1].max_nodes": must be at least min_nodes (2)
 * err may be NULL when errsize is 0.
 *
 * The environment is not consulted here, except that database.url may be
 * absent when TARMAC_DATABASE_URL is set; call tm_config_apply_env() next.
 */
int tm_config_load(const char *path, struct tm_config *ret_cfg,
                   char *err, size_t errsize);

/* Same as tm_config_load() on text[0..len); name stands for the file name in
 * messages and in cfg->path. */
int tm_config_load_string(const char *text, size_t len, const char *name,
                          struct tm_config *ret_cfg, char *err, size_t errsize);

/* TARMAC_DATABASE_URL and TARMAC_LISTEN override the file, validated the same
 * way.  On failure cfg is left unchanged and TM_EINVAL is returned. */
int tm_config_apply_env(struct tm_config *cfg, char *err, size_t errsize);

/* Free everything cfg owns and zero it.  Safe on a zeroed or released cfg. */
void tm_config_release(struct tm_config *cfg);

/* Lookups by name; NULL when absent.  The pointers live as long as cfg. */
const struct tm_config_pool *tm_config_pool_find(const struct tm_config *cfg,
                                                 const char *name);
const struct tm_config_provider *tm_config_provider_find(const struct tm_config *cfg,
                                                         const char *name);
/* pool_groups[] entry for a group name (NULL name or none: NULL). */
const struct tm_config_pool_group *tm_config_pool_group_find(const struct tm_config *cfg,
                                                             const char *name);
const struct tm_config_instance_type *tm_config_type_find(const struct tm_config_provider *p,
                                                          const char *name);

/* How many of pool's (instance type, zone) cells, or of `type`'s alone
 * when it is not NULL, its provider's spot_hazards table gives a hazard
 * for; 0 without a table.  serve warns at start when a spot pool's
 * provider has a table that fits none of them (zone names that are not
 * the account's, say); the planner picks a spot zone by hazard only for
 * a type the table fits in some zone of the pool. */
size_t tm_config_spot_cells_fitted(const struct tm_config *cfg, const struct tm_config_pool *pool,
                                   const char *type);

/* The spot interruption hazard, per node-hour, of pool's nodes of
 * instance type `type` in `zone`: the hazard_per_hour of the 1-node row
 * for (type, zone) in the pool's provider's spot_hazards table, else (no
 * table, no such row, or a row with availability only) the pool's
 * spot_hazard_per_hour, or, when that is 0 (unknown), the highest hazard
 * the table fits for `type` in the pool's other zones (0 if none).
 * *ret_fitted (may be NULL) says whether the table gave the cell's own. */
double tm_config_spot_hazard(const struct tm_config *cfg, const struct tm_config_pool *pool,
                             const char *type, const char *zone, bool *ret_fitted);

#endif
