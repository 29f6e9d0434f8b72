-- 0010_agent: the node agent's side of the database (issue 14).
--
-- Enrollment: each launch attempt of a node stores one secret's hash with
-- an expiry before the cloud call (controller/daemon/calls.c); the agent
-- trades it once, through POST /v1/agent/enroll, for an api_tokens row of
-- role 'agent' bound to its node (api_tokens.node_id).  Only hashes are
-- stored, as for API tokens (controller/spec/token.h).
--
-- Jobs gain what a real agent runs and reports: env and image (job spec),
-- and per attempt the process id, the agent's start time, the exit code or
-- signal and the tail of the output.  gpu_samples gains the rest of what
-- NVML reads.  pools gain 'local' (providers/local) and checkpoint_dir
-- (written by the pool sync; assignments derive PATH/job-<id> from it).
--
-- tarmac_agent_report (0002) stays the one path of a node's reports: this
-- file replaces it with a version that also takes, per job, the attempt
-- it is about (a report for another attempt changes nothing), exit_code,
-- signal, output_tail, and states 'lost' (the job goes back to the queue
-- through tarmac_job_leaves, cause 'lost', its attempt counted) and
-- 'stopped' (the agent checkpointed it on a notice: cause 'checkpoint').

ALTER TABLE pools DROP CONSTRAINT pools_provider_kind_check;
ALTER TABLE pools ADD CONSTRAINT pools_provider_kind_check
    CHECK (provider_kind IN ('sim', 'aws', 'gcp', 'azure', 'local'));
ALTER TABLE pools ADD COLUMN checkpoint_dir text;

ALTER TABLE api_tokens DROP CONSTRAINT api_tokens_role_check;
ALTER TABLE api_tokens ADD CONSTRAINT api_tokens_role_check
    CHECK (role IN ('admin', 'finance', 'engineer', 'viewer', 'agent'));
ALTER TABLE api_tokens ADD COLUMN node_id bigint REFERENCES nodes (id);
ALTER TABLE api_tokens ADD CONSTRAINT api_tokens_agent_node
    CHECK ((role = 'agent') = (node_id IS NOT NULL));

CREATE TABLE agent_enrollments (
    id          bigserial PRIMARY KEY,
    node_id     bigint NOT NULL REFERENCES nodes (id),
    hash        text NOT NULL UNIQUE,
    created_ms  bigint NOT NULL,
    expires_ms  bigint NOT NULL CHECK (expires_ms > created_ms),
    used_ms     bigint
);
CREATE INDEX agent_enrollments_node ON agent_enrollments (node_id);

ALTER TABLE jobs ADD COLUMN env jsonb NOT NULL DEFAULT '{}'::jsonb;
ALTER TABLE jobs ADD COLUMN image text;
ALTER TABLE jobs ADD COLUMN pid int;
ALTER TABLE jobs ADD COLUMN agent_started_ms bigint;
ALTER TABLE jobs ADD COLUMN exit_code int;
ALTER TABLE jobs ADD COLUMN exit_signal int;
ALTER TABLE jobs ADD COLUMN output_tail text CHECK (octet_length(output_tail) <= 4096);

-- A node marked unreachable (no heartbeat for agent.unreachable_after).
ALTER TABLE nodes ADD COLUMN unreachable_ms bigint;

ALTER TABLE gpu_samples ADD COLUMN uuid text;
ALTER TABLE gpu_samples ADD COLUMN memory_total_mib bigint CHECK (memory_total_mib >= 0);
ALTER TABLE gpu_samples ADD COLUMN temperature_c real;
ALTER TABLE gpu_samples ADD COLUMN power_w real;
ALTER TABLE gpu_samples ADD COLUMN processes jsonb;

ALTER TABLE job_interruptions DROP CONSTRAINT job_interruptions_cause_check;
ALTER TABLE job_interruptions ADD CONSTRAINT job_interruptions_cause_check
    CHECK (cause IN ('checkpoint', 'interrupted', 'terminated', 'deadline', 'lost', 'unreachable', 'idle'));

-- What a node's software reports: {"jobs": [{"id": 7, "state": "succeeded"
-- | "failed" | "lost", "reason": "exit 0", "attempt": 2, "exit_code": 0,
-- "signal": null, "output_tail": "..."}]}.  Unknown jobs, jobs not running
-- on this node, or (when attempt is given) another attempt than the
-- job's current one are ignored: a late report after a requeue must not
-- end the new attempt.  Returns how many jobs it ended or requeued.
CREATE OR REPLACE FUNCTION tarmac_agent_report(p_node bigint, p_now bigint, p_report jsonb)
RETURNS int LANGUAGE plpgsql AS $$
DECLARE
    r jsonb;
    n int := 0;
    st text;
    jid bigint;
    left_nodes bigint[] := ARRAY[p_node];
BEGIN
    UPDATE nodes SET last_heartbeat_ms = p_now, unreachable_ms = NULL WHERE id = p_node;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'unknown node %', p_node USING ERRCODE = 'TM003';
    END IF;
    FOR r IN SELECT value FROM jsonb_array_elements(coalesce(p_report -> 'jobs', '[]'::jsonb))
    LOOP
        st := r ->> 'state';
        jid := (r ->> 'id')::bigint;
        IF st NOT IN ('succeeded', 'failed', 'lost', 'stopped') THEN
            RAISE EXCEPTION 'job state must be succeeded, failed, lost or stopped, not %', st USING ERRCODE = 'TM004';
        END IF;
        PERFORM 1 FROM jobs
         WHERE id = jid AND state = 'running'
           AND (r ->> 'attempt' IS NULL OR attempts = (r ->> 'attempt')::int)
           AND EXISTS (SELECT 1 FROM job_allocations a WHERE a.job_id = jobs.id AND a.node_id = p_node)
           FOR UPDATE;
        CONTINUE WHEN NOT FOUND;
        -- Stopped by the agent while its attempt is still current: the
        -- agent checkpointed it on a notice from the node's metadata
        -- service before this controller's pass requeued it.  It goes back
        -- to the queue as a checkpoint would, not as a failure.
        IF st = 'stopped' THEN
            IF tarmac_job_leaves(jid, p_node, p_now, 'checkpoint',
                                 coalesce(r ->> 'reason', 'stopped by the agent of node ' || p_node),
                                 jsonb_build_object('attempt', (r ->> 'attempt')::int), NULL) THEN
                n := n + 1;
            END IF;
            CONTINUE;
        END IF;
        IF st = 'lost' THEN
            IF tarmac_job_leaves(jid, p_node, p_now, 'lost',
                                 coalesce(r ->> 'reason', 'the agent of node ' || p_node || ' lost it'),
                                 jsonb_build_object('attempt', (r ->> 'attempt')::int), NULL) THEN
                n := n + 1;
            END IF;
            CONTINUE;
        END IF;
        UPDATE jobs SET state = st, finished_ms = p_now, state_reason = coalesce(r ->> 'reason', ''),
                        exit_code = (r ->> 'exit_code')::int, exit_signal = (r ->> 'signal')::int,
                        output_tail = r ->> 'output_tail'
         WHERE id = jid;
        WITH d AS (DELETE FROM job_allocations WHERE job_id = jid RETURNING node_id)
        SELECT left_nodes || coalesce(array_agg(node_id), '{}') INTO left_nodes FROM d;
        PERFORM tarmac_decide(p_now, 'job_' || st, 'job', jid::text,
                              coalesce(r ->> 'reason', 'reported by node ' || p_node),
                              jsonb_strip_nulls(jsonb_build_object('node', p_node,
                                  'attempt', (r ->> 'attempt')::int,
                                  'exit_code', (r ->> 'exit_code')::int,
                                  'signal', (r ->> 'signal')::int)));
        n := n + 1;
    END LOOP;
    -- Only the nodes this report emptied (its own, a gang's others): a
    -- scan of every node here made concurrent heartbeats lock each
    -- other's rows in no set order and deadlock.
    UPDATE nodes SET idle_since_ms = p_now
     WHERE id = ANY (left_nodes) AND idle_since_ms IS NULL AND state IN ('ready', 'draining')
       AND NOT EXISTS (SELECT 1 FROM job_allocations a WHERE a.node_id = nodes.id);
    RETURN n;
END $$;

-- Idle GPUs are alerted too (controller/reconcile/alerts.c, gpu_idle:<job>).
ALTER TABLE alerts DROP CONSTRAINT alerts_kind_check;
ALTER TABLE alerts ADD CONSTRAINT alerts_kind_check
    CHECK (kind IN ('pool_idle', 'queue_age', 'soft_cap', 'provider_auth', 'gpu_idle'));

-- Whether (job, attempt) is the current attempt of a job running on node.
CREATE FUNCTION tarmac_agent_attempt_current(p_node bigint, p_job bigint, p_attempt int)
RETURNS boolean LANGUAGE sql STABLE AS $$
    SELECT EXISTS (SELECT 1 FROM jobs j
                    WHERE j.id = p_job AND j.state = 'running' AND j.attempts = p_attempt
                      AND EXISTS (SELECT 1 FROM job_allocations a
                                   WHERE a.job_id = j.id AND a.node_id = p_node));
$$;

-- Pruning gpu_samples (agent.sample_retention): the leader's tick deletes
-- at most p_batch of the oldest rows before p_before per call.
CREATE FUNCTION tarmac_prune_samples(p_before bigint, p_batch int)
RETURNS int LANGUAGE sql AS $$
    WITH d AS (DELETE FROM gpu_samples
                WHERE ctid IN (SELECT ctid FROM gpu_samples WHERE at_ms < p_before
                                ORDER BY at_ms LIMIT p_batch)
               RETURNING 1)
    SELECT count(*)::int FROM d;
$$;

-- The node agent's plan actions (controller/reconcile/staleness.c), applied
-- before everything else in plan order; the rest goes to 0008's function,
-- renamed tarmac_apply_kept, as 0006, 0007 and 0008 wrapped theirs.
--   node_unreachable     nodes.unreachable_ms, once, while the node is as
--                        silent as the plan saw it (decision 'node_unreachable').
--   unreachable_requeue  the job leaves its silent node (tarmac_job_leaves,
--                        cause 'unreachable'), guarded on the attempt
--                        (started_ms) and on no heartbeat since the plan.
--   gpu_idle             decision 'gpu_idle', once per job attempt.
--   idle_requeue         the idle job leaves its node (cause 'idle').
--   idle_cancel          the idle job is cancelled; its node's agent
--                        stops it once it leaves the assignments.
ALTER FUNCTION tarmac_apply(bigint, bigint, jsonb) RENAME TO tarmac_apply_kept;

CREATE FUNCTION tarmac_apply(p_epoch bigint, p_now bigint, p_plan jsonb)
RETURNS jsonb LANGUAGE plpgsql AS $$
DECLARE
    agent_ops CONSTANT text[] := ARRAY['node_unreachable', 'unreachable_requeue', 'gpu_idle',
                                       'idle_requeue', 'idle_cancel'];
    actions jsonb := coalesce(p_plan -> 'actions', '[]'::jsonb);
    a jsonb;
    ok boolean;
    applied int := 0;
    skipped int := 0;
    res jsonb;
    jid bigint;
BEGIN
    IF NOT EXISTS (SELECT 1 FROM jsonb_array_elements(actions) x WHERE x ->> 'op' = ANY (agent_ops)) THEN
        RETURN tarmac_apply_kept(p_epoch, p_now, p_plan);
    END IF;
    PERFORM tarmac_lock_nodes();
    PERFORM 1 FROM leader WHERE id = 1 AND epoch = p_epoch FOR SHARE;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'leader epoch % is stale', p_epoch USING ERRCODE = 'TM001';
    END IF;
    FOR a IN SELECT x FROM jsonb_array_elements(actions) WITH ORDINALITY AS t(x, i)
              WHERE x ->> 'op' = ANY (agent_ops) ORDER BY i
    LOOP
        ok := false;
        jid := (a ->> 'job')::bigint;
        CASE a ->> 'op'
        WHEN 'node_unreachable' THEN
            UPDATE nodes SET unreachable_ms = p_now
             WHERE id = (a ->> 'node')::bigint AND unreachable_ms IS NULL
               AND state NOT IN ('terminated', 'interrupted')
               AND coalesce(last_heartbeat_ms, 0) = coalesce((a ->> 'last_heartbeat_ms')::bigint, 0);
            ok := FOUND;
            IF ok THEN
                PERFORM tarmac_decide(p_now, 'node_unreachable', 'node', a ->> 'node', a ->> 'reason',
                                      a -> 'inputs');
            END IF;
        WHEN 'unreachable_requeue' THEN
            PERFORM 1 FROM nodes WHERE id = (a ->> 'node')::bigint
               AND coalesce(last_heartbeat_ms, 0) = coalesce((a ->> 'last_heartbeat_ms')::bigint, 0);
            IF FOUND THEN
                ok := tarmac_job_leaves(jid, (a ->> 'node')::bigint, p_now, 'unreachable',
                                        a ->> 'reason', a -> 'inputs', (a ->> 'started_ms')::bigint);
            END IF;
        WHEN 'gpu_idle' THEN
            PERFORM 1 FROM jobs WHERE id = jid AND state = 'running' AND attempts = (a ->> 'attempt')::int;
            ok := FOUND AND NOT EXISTS (
                SELECT 1 FROM decisions d WHERE d.kind = 'gpu_idle' AND d.subject_kind = 'job'
                   AND d.subject_id = jid::text AND d.inputs ->> 'attempt' = a ->> 'attempt');
            IF ok THEN
                PERFORM tarmac_decide(p_now, 'gpu_idle', 'job', jid::text, a ->> 'reason',
                                      coalesce(a -> 'inputs', '{}'::jsonb)
                                      || jsonb_build_object('attempt', (a ->> 'attempt')::int));
            END IF;
        WHEN 'idle_requeue' THEN
            ok := tarmac_job_leaves(jid, (a ->> 'node')::bigint, p_now, 'idle', a ->> 'reason',
                                    a -> 'inputs', (a ->> 'started_ms')::bigint);
        ELSE -- 'idle_cancel'
            UPDATE jobs SET state = 'cancelled', finished_ms = p_now, state_reason = a ->> 'reason'
             WHERE id = jid AND state = 'running' AND started_ms = (a ->> 'started_ms')::bigint;
            ok := FOUND;
            IF ok THEN
                DELETE FROM job_allocations WHERE job_id = jid;
                UPDATE nodes SET idle_since_ms = p_now
                 WHERE idle_since_ms IS NULL AND state IN ('ready', 'draining')
                   AND NOT EXISTS (SELECT 1 FROM job_allocations x WHERE x.node_id = nodes.id);
                PERFORM tarmac_decide(p_now, 'cancel', 'job', jid::text, a ->> 'reason', a -> 'inputs');
            END IF;
        END CASE;
        IF ok THEN applied := applied + 1; ELSE skipped := skipped + 1; END IF;
    END LOOP;
    SELECT tarmac_apply_kept(p_epoch, p_now, jsonb_build_object('actions', coalesce(jsonb_agg(x ORDER BY i),
                                                                                 '[]'::jsonb)))
      INTO res
      FROM jsonb_array_elements(actions) WITH ORDINALITY AS t(x, i)
     WHERE NOT (x ->> 'op' = ANY (agent_ops));
    RETURN res || jsonb_build_object('applied', applied + (res ->> 'applied')::int,
                                     'skipped', skipped + (res ->> 'skipped')::int);
END $$;
