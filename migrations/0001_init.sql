-- 0001_init: tarmac's data model (see DESIGN.md "Data model").
--
-- Times are bigint milliseconds since the Unix epoch on the controller's clock
-- (the demo accelerates that clock, so timestamptz would lie).  Money is
-- integer: prices in micro-dollars per hour, spend and budgets in cents.
-- States are CHECKed against the exact sets in controller/model.h.

CREATE TABLE leader (
    id          int PRIMARY KEY CHECK (id = 1),
    epoch       bigint NOT NULL CHECK (epoch >= 0),
    holder      text NOT NULL,
    acquired_ms bigint NOT NULL
);
INSERT INTO leader (id, epoch, holder, acquired_ms) VALUES (1, 0, '', 0);

CREATE TABLE pools (
    name            text PRIMARY KEY CHECK (name ~ '^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$'),
    provider        text NOT NULL,
    provider_kind   text NOT NULL CHECK (provider_kind IN ('sim', 'aws', 'gcp', 'azure')),
    region          text NOT NULL,
    zones           text[] NOT NULL CHECK (cardinality(zones) >= 1),
    instance_types  text[] NOT NULL CHECK (cardinality(instance_types) >= 1),
    gpu_model       text NOT NULL,
    gpus_per_node   int NOT NULL CHECK (gpus_per_node > 0 AND gpus_per_node <= 16),
    capacity_type   text NOT NULL CHECK (capacity_type IN ('on_demand', 'spot', 'spot_then_on_demand')),
    min_nodes       int NOT NULL CHECK (min_nodes >= 0),
    max_nodes       int NOT NULL CHECK (max_nodes >= min_nodes),
    idle_grace_ms   bigint NOT NULL CHECK (idle_grace_ms >= 0),
    updated_ms      bigint NOT NULL
);

CREATE TABLE nodes (
    id                  bigserial PRIMARY KEY,
    pool                text NOT NULL REFERENCES pools (name),
    launch_token        text NOT NULL UNIQUE,
    instance_id         text UNIQUE,
    zone                text NOT NULL,
    instance_type       text NOT NULL,
    gpus                int NOT NULL CHECK (gpus > 0 AND gpus <= 16),
    gpu_model           text NOT NULL,
    cpu_milli           bigint NOT NULL CHECK (cpu_milli > 0),
    memory_mib          bigint NOT NULL CHECK (memory_mib > 0),
    capacity_type       text NOT NULL CHECK (capacity_type IN ('on_demand', 'spot')),
    state               text NOT NULL CHECK (state IN ('requested', 'booting', 'ready', 'draining',
                                                       'terminating', 'terminated', 'interrupted')),
    state_reason        text NOT NULL DEFAULT '',
    price_uusd_per_hour bigint NOT NULL CHECK (price_uusd_per_hour >= 0),
    cordoned            boolean NOT NULL DEFAULT false,
    requested_ms        bigint NOT NULL,
    billed_from_ms      bigint,
    ready_ms            bigint,
    idle_since_ms       bigint,
    terminated_ms       bigint,
    last_heartbeat_ms   bigint,
    CHECK (billed_from_ms IS NULL OR billed_from_ms >= requested_ms),
    CHECK (terminated_ms IS NULL OR state IN ('terminated', 'interrupted'))
);
-- The tick reads every node that is not gone; gone nodes are history.
CREATE INDEX nodes_live ON nodes (pool, state) WHERE state NOT IN ('terminated', 'interrupted');

CREATE TABLE jobs (
    id                  bigserial PRIMARY KEY,
    team                text NOT NULL CHECK (team ~ '^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$'),
    name                text NOT NULL DEFAULT '',
    command             text NOT NULL DEFAULT '',
    gpus                int NOT NULL CHECK (gpus >= 0 AND gpus <= 16),
    gpu_milli           int NOT NULL CHECK (gpu_milli >= 1 AND gpu_milli <= 1000),
    nodes               int NOT NULL DEFAULT 1 CHECK (nodes >= 1 AND nodes <= 1024),
    cpu_milli           bigint NOT NULL DEFAULT 0 CHECK (cpu_milli >= 0),
    memory_mib          bigint NOT NULL DEFAULT 0 CHECK (memory_mib >= 0),
    gpu_model           text,
    pool                text REFERENCES pools (name),
    class               text NOT NULL DEFAULT 'train'
                        CHECK (class IN ('train', 'eval', 'preprocess', 'inference', 'batch')),
    priority            int NOT NULL DEFAULT 0 CHECK (priority BETWEEN -1000 AND 1000),
    preemptible         boolean NOT NULL DEFAULT false,
    checkpointable      boolean NOT NULL DEFAULT false,
    runtime_estimate_ms bigint CHECK (runtime_estimate_ms > 0),
    -- What a simulated node runs the job for (sim agent); NULL for real work.
    sim_runtime_ms      bigint CHECK (sim_runtime_ms > 0),
    deadline_ms         bigint,
    state               text NOT NULL DEFAULT 'queued'
                        CHECK (state IN ('queued', 'running', 'succeeded', 'failed', 'preempted', 'cancelled')),
    state_reason        text NOT NULL DEFAULT '',
    attempts            int NOT NULL DEFAULT 0 CHECK (attempts >= 0),
    node_id             bigint REFERENCES nodes (id),
    submitted_ms        bigint NOT NULL,
    started_ms          bigint,
    finished_ms         bigint,
    -- A reservation is sticky: a blocked job keeps the node it was promised
    -- and the start first promised until it runs.
    hold_node_id        bigint REFERENCES nodes (id),
    hold_start_ms       bigint,
    -- A job asks for whole GPUs, or for a share of exactly one GPU.
    CHECK ((gpus >= 1 AND gpu_milli = 1000) OR (gpus = 0 AND gpu_milli < 1000 AND nodes = 1)),
    CHECK (state <> 'running' OR (node_id IS NOT NULL AND started_ms IS NOT NULL))
);
CREATE INDEX jobs_active ON jobs (state, submitted_ms) WHERE state IN ('queued', 'running');
CREATE INDEX jobs_node ON jobs (node_id) WHERE state = 'running';
CREATE INDEX jobs_team ON jobs (team, submitted_ms);
-- History for runtime estimates: finished jobs of the same shape.
CREATE INDEX jobs_history ON jobs (team, name, class, gpus, finished_ms) WHERE state = 'succeeded';

-- A running job's hold on one node (a gang holds one row per node).
CREATE TABLE job_allocations (
    job_id      bigint NOT NULL REFERENCES jobs (id) ON DELETE CASCADE,
    node_id     bigint NOT NULL REFERENCES nodes (id),
    gpu_mask    int NOT NULL CHECK (gpu_mask > 0 AND gpu_mask < 65536),
    gpu_milli   int NOT NULL CHECK (gpu_milli >= 1 AND gpu_milli <= 1000),
    cpu_milli   bigint NOT NULL CHECK (cpu_milli >= 0),
    memory_mib  bigint NOT NULL CHECK (memory_mib >= 0),
    -- Preemptible work on capacity reserved for non-preemptible work: it
    -- may be evicted when the owner can start.
    loaned      boolean NOT NULL DEFAULT false,
    PRIMARY KEY (job_id, node_id)
);
CREATE INDEX job_allocations_node ON job_allocations (node_id);

CREATE TABLE gpu_samples (
    node_id         bigint NOT NULL REFERENCES nodes (id),
    gpu_index       int NOT NULL CHECK (gpu_index >= 0 AND gpu_index < 16),
    at_ms           bigint NOT NULL,
    util_percent    real NOT NULL CHECK (util_percent >= 0 AND util_percent <= 100),
    memory_used_mib bigint NOT NULL CHECK (memory_used_mib >= 0),
    PRIMARY KEY (node_id, gpu_index, at_ms)
);
CREATE INDEX gpu_samples_at ON gpu_samples (at_ms);

CREATE TABLE prices (
    provider        text NOT NULL,
    region          text NOT NULL,
    zone            text NOT NULL,
    instance_type   text NOT NULL,
    capacity_type   text NOT NULL CHECK (capacity_type IN ('on_demand', 'spot')),
    uusd_per_hour   bigint NOT NULL CHECK (uusd_per_hour >= 0),
    observed_ms     bigint NOT NULL,
    PRIMARY KEY (provider, region, zone, instance_type, capacity_type)
);

CREATE TABLE budgets (
    scope_kind      text NOT NULL CHECK (scope_kind IN ('org', 'team')),
    scope           text NOT NULL,
    period          text NOT NULL DEFAULT 'month' CHECK (period IN ('month')),
    cap_cents       bigint NOT NULL CHECK (cap_cents >= 0),
    currency        text NOT NULL DEFAULT 'USD' CHECK (currency ~ '^[A-Z]{3}$'),
    warn_percent    int NOT NULL DEFAULT 80 CHECK (warn_percent BETWEEN 1 AND 100),
    hard            boolean NOT NULL DEFAULT true,
    updated_ms      bigint NOT NULL,
    PRIMARY KEY (scope_kind, scope, period)
);

-- Append-only ledger of node time in cents, attributed to teams by GPU
-- share; idle time is charged to the pool (team NULL, kind 'idle').
CREATE TABLE spend (
    id          bigserial PRIMARY KEY,
    at_ms       bigint NOT NULL,
    period      text NOT NULL CHECK (period ~ '^[0-9]{4}-[0-9]{2}$'),
    node_id     bigint NOT NULL REFERENCES nodes (id),
    pool        text NOT NULL REFERENCES pools (name),
    team        text,
    kind        text NOT NULL CHECK (kind IN ('job', 'idle')),
    cents       bigint NOT NULL CHECK (cents >= 0),
    CHECK ((kind = 'job') = (team IS NOT NULL))
);
CREATE INDEX spend_period ON spend (period, team);
CREATE FUNCTION spend_append_only() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'spend is an append-only ledger: % refused', TG_OP;
END $$;
CREATE TRIGGER spend_append_only BEFORE UPDATE OR DELETE ON spend
    FOR EACH ROW EXECUTE FUNCTION spend_append_only();

CREATE TABLE decisions (
    id              bigserial PRIMARY KEY,
    at_ms           bigint NOT NULL,
    kind            text NOT NULL,
    subject_kind    text NOT NULL CHECK (subject_kind IN ('job', 'node', 'pool', 'instance', 'budget', 'provider')),
    subject_id      text NOT NULL,
    reason          text NOT NULL,
    inputs          jsonb NOT NULL DEFAULT '{}'::jsonb
);
CREATE INDEX decisions_at ON decisions (at_ms);
CREATE INDEX decisions_subject ON decisions (subject_kind, subject_id, at_ms);

CREATE TABLE api_tokens (
    id          bigserial PRIMARY KEY,
    name        text NOT NULL UNIQUE,
    role        text NOT NULL CHECK (role IN ('admin', 'finance', 'engineer', 'viewer')),
    team        text,
    hash        text NOT NULL UNIQUE,
    created_ms  bigint NOT NULL,
    revoked     boolean NOT NULL DEFAULT false,
    CHECK (role <> 'engineer' OR team IS NOT NULL)
);
