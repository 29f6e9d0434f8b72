-- 0006_spot: spot interruption notices in the live controller, and the
-- GPU time interruptions cost.
--
-- A node whose instance has an interruption notice (the cloud's listing, or
-- POST /v1/nodes/{id}/interruption, which cordons it and files an
-- 'interruption_notice' decision) is cordoned and its notice time recorded
-- ("spot_notice").  Its checkpointable jobs checkpoint and requeue at once
-- ("checkpoint"): the runtime done so far is kept in jobs.progress_ms, so a
-- resumed attempt runs only the rest and nothing is lost.  Its other jobs
-- run on and are requeued when the node goes ("requeue"), as are the jobs of
-- any node that goes: the GPU time of the attempt since it started is lost.
-- Every job that leaves a node this way gets a job_interruptions row, and
-- jobs.lost_gpu_ms sums its losses; the total is sum(lost_gpu_ms).
--
-- The three new plan actions are applied by tarmac_apply, which this file
-- makes a wrapper: the function 0002 created (with whatever later
-- migrations made of it) is renamed tarmac_apply_base and applies every
-- other action.  The wrapper checks the epoch fence, applies the spot
-- actions first, in plan order, then hands the rest to tarmac_apply_base in
-- plan order; reconcile.c emits them first anyway (its observe step), and
-- none depends on an action after it.  A later migration that adds an op
-- replaces tarmac_apply_base, or wraps tarmac_apply again the same way;
-- replacing tarmac_apply with a copy of 0002's body would drop these ops.
--
-- Lock order: tarmac_accrue (0003) locks every billed node in whatever
-- order its scan finds them, while a plan updates nodes in plan order; run
-- at the same time (the tick sends both), they deadlocked now and then and
-- the plan was lost for that tick, which can cost a checkpoint inside a
-- short notice.  Both now take one transaction-level advisory lock first,
-- so they run one after the other.
--
-- Crash safety: the whole plan is still one statement, one transaction.  A
-- crash before it commits leaves the notice unrecorded and the jobs running;
-- the next pass sees the notice again (level-triggered) and plans the same
-- actions, each guarded on the state it was computed from (the job still
-- running the same attempt on that node), so none applies twice.

ALTER TABLE nodes ADD COLUMN notice_ms bigint;
ALTER TABLE jobs ADD COLUMN progress_ms bigint NOT NULL DEFAULT 0 CHECK (progress_ms >= 0);
ALTER TABLE jobs ADD COLUMN lost_gpu_ms bigint NOT NULL DEFAULT 0 CHECK (lost_gpu_ms >= 0);

-- One row per job leaving a node before it finished: checkpointed at a
-- notice (nothing lost), or requeued because its node went (cause is the
-- node's state then: 'interrupted' or 'terminated').  GPU time is in
-- GPU-milliseconds (GPUs held x ms; a share counts as its fraction).
CREATE TABLE job_interruptions (
    id          bigserial PRIMARY KEY,
    job_id      bigint NOT NULL REFERENCES jobs (id) ON DELETE CASCADE,
    node_id     bigint NOT NULL REFERENCES nodes (id),
    at_ms       bigint NOT NULL,
    attempt     int NOT NULL CHECK (attempt >= 1),
    cause       text NOT NULL CHECK (cause IN ('checkpoint', 'interrupted', 'terminated')),
    ran_ms      bigint NOT NULL CHECK (ran_ms >= 0),
    kept_ms     bigint NOT NULL CHECK (kept_ms >= 0 AND kept_ms <= ran_ms),
    gpu_milli   bigint NOT NULL CHECK (gpu_milli > 0),
    lost_gpu_ms bigint NOT NULL CHECK (lost_gpu_ms >= 0)
);
CREATE INDEX job_interruptions_job ON job_interruptions (job_id);
CREATE INDEX job_interruptions_at ON job_interruptions (at_ms);

-- Job p_job leaves node p_node at p_now, before it finished: checkpointed
-- (p_cause 'checkpoint': the attempt's runtime joins progress_ms, nothing
-- lost) or lost with its node (the attempt's GPU time is lost).  Guarded:
-- the job must still run on that node, the same attempt when p_started is
-- given, and be checkpointable for a checkpoint; false when it does not.
-- p_reason NULL composes one from the numbers (tarmac_requeue_node_jobs).
-- The decision carries the applied numbers over any the plan estimated.
CREATE FUNCTION tarmac_job_leaves(p_job bigint, p_node bigint, p_now bigint, p_cause text,
                                  p_reason text, p_inputs jsonb, p_started bigint)
RETURNS boolean LANGUAGE plpgsql AS $$
DECLARE
    j jobs%ROWTYPE;
    ran bigint;
    milli bigint;
    kept bigint;
    lost bigint;
    left_nodes bigint[];
    why text;
BEGIN
    SELECT * INTO j FROM jobs
     WHERE id = p_job AND state = 'running'
       AND (p_started IS NULL OR started_ms = p_started)
       AND (p_cause <> 'checkpoint' OR checkpointable)
       AND EXISTS (SELECT 1 FROM job_allocations a WHERE a.job_id = p_job AND a.node_id = p_node)
       FOR UPDATE;
    IF NOT FOUND THEN
        RETURN false;
    END IF;
    ran := greatest(p_now - j.started_ms, 0);
    milli := CASE WHEN j.gpus > 0 THEN j.gpus::bigint * 1000 * j.nodes ELSE j.gpu_milli END;
    kept := CASE WHEN p_cause = 'checkpoint' THEN ran ELSE 0 END;
    lost := (ran - kept) * milli / 1000;
    why := coalesce(p_reason, format('node %s %s: attempt %s lost after %s s on %s GPUs (%s GPU-hours); '
                                     'requeued for attempt %s', p_node, p_cause, j.attempts, ran / 1000,
                                     (milli / 1000.0)::float8, round(lost / 3600000.0, 3), j.attempts + 1));

    WITH d AS (DELETE FROM job_allocations WHERE job_id = p_job RETURNING node_id)
    SELECT array_agg(node_id) INTO left_nodes FROM d;
    UPDATE jobs SET state = 'queued', node_id = NULL, started_ms = NULL, state_reason = why,
                    progress_ms = progress_ms + kept, lost_gpu_ms = lost_gpu_ms + lost
     WHERE id = p_job;
    INSERT INTO job_interruptions (job_id, node_id, at_ms, attempt, cause, ran_ms, kept_ms, gpu_milli,
                                   lost_gpu_ms)
    VALUES (p_job, p_node, p_now, greatest(j.attempts, 1), p_cause, ran, kept, milli, lost);
    -- The nodes it leaves empty are idle from now (a gang's others too).
    UPDATE nodes SET idle_since_ms = p_now
     WHERE id = ANY (left_nodes) AND idle_since_ms IS NULL AND state IN ('ready', 'draining')
       AND NOT EXISTS (SELECT 1 FROM job_allocations a WHERE a.node_id = nodes.id);
    PERFORM tarmac_decide(p_now, CASE WHEN p_cause = 'checkpoint' THEN 'checkpoint' ELSE 'requeue' END,
                          'job', p_job::text, why,
                          coalesce(p_inputs, '{}'::jsonb)
                          || jsonb_build_object('node', p_node, 'cause', p_cause, 'attempt', j.attempts,
                                                'next_attempt', j.attempts + 1, 'ran_ms', ran,
                                                'gpu_milli', milli, 'kept_ms', kept,
                                                'progress_ms', j.progress_ms + kept,
                                                'lost_gpu_ms', lost,
                                                'lost_gpu_hours', round(lost / 3600000.0, 6)));
    RETURN true;
END $$;

-- 0002's node_gone calls this for whatever still runs on a node that went
-- (reconcile.c requeues those jobs itself first, with its reasons): now
-- with the lost GPU time counted too.
CREATE OR REPLACE FUNCTION tarmac_requeue_node_jobs(p_node bigint, p_now bigint, p_why text)
RETURNS int LANGUAGE plpgsql AS $$
DECLARE
    jid bigint;
    cause text;
    n int := 0;
BEGIN
    SELECT CASE WHEN state = 'interrupted' THEN 'interrupted' ELSE 'terminated' END INTO cause
      FROM nodes WHERE id = p_node;
    FOR jid IN SELECT a.job_id FROM job_allocations a WHERE a.node_id = p_node ORDER BY a.job_id
    LOOP
        IF tarmac_job_leaves(jid, p_node, p_now, coalesce(cause, 'terminated'), NULL, NULL, NULL) THEN
            n := n + 1;
        END IF;
    END LOOP;
    RETURN n;
END $$;

-- The lock the plan and the ledger take before touching nodes ("tmnodes").
CREATE FUNCTION tarmac_lock_nodes() RETURNS void LANGUAGE sql AS $$
    SELECT pg_advisory_xact_lock(x'746d6e6f646573'::bigint);
$$;

ALTER FUNCTION tarmac_accrue(bigint, bigint) RENAME TO tarmac_accrue_base;

CREATE FUNCTION tarmac_accrue(p_epoch bigint, p_now bigint)
RETURNS int LANGUAGE plpgsql AS $$
BEGIN
    PERFORM tarmac_lock_nodes();
    RETURN tarmac_accrue_base(p_epoch, p_now);
END $$;

ALTER FUNCTION tarmac_apply(bigint, bigint, jsonb) RENAME TO tarmac_apply_base;

CREATE FUNCTION tarmac_apply(p_epoch bigint, p_now bigint, p_plan jsonb)
RETURNS jsonb LANGUAGE plpgsql AS $$
DECLARE
    spot_ops CONSTANT text[] := ARRAY['spot_notice', 'checkpoint', 'requeue'];
    actions jsonb := coalesce(p_plan -> 'actions', '[]'::jsonb);
    a jsonb;
    ok boolean;
    applied int := 0;
    skipped int := 0;
    res jsonb;
BEGIN
    PERFORM tarmac_lock_nodes();
    PERFORM 1 FROM leader WHERE id = 1 AND epoch = p_epoch FOR SHARE;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'leader epoch % is stale', p_epoch USING ERRCODE = 'TM001';
    END IF;
    -- Most passes carry no spot action: hand the plan over untouched.
    IF NOT EXISTS (SELECT 1 FROM jsonb_array_elements(actions) x WHERE x ->> 'op' = ANY (spot_ops)) THEN
        RETURN tarmac_apply_base(p_epoch, p_now, p_plan);
    END IF;

    FOR a IN SELECT x FROM jsonb_array_elements(actions) WITH ORDINALITY AS t(x, i)
              WHERE x ->> 'op' = ANY (spot_ops) ORDER BY i
    LOOP
        CASE a ->> 'op'
        WHEN 'spot_notice' THEN
            -- Recorded once: cordon (no new placements) and the notice time.
            UPDATE nodes SET cordoned = true, notice_ms = (a ->> 'notice_ms')::bigint,
                             state_reason = a ->> 'reason'
             WHERE id = (a ->> 'node')::bigint AND notice_ms IS NULL
               AND state IN ('requested', 'booting', 'ready', 'draining');
            ok := FOUND;
            IF ok THEN
                PERFORM tarmac_decide(p_now, 'spot_notice', 'node', a ->> 'node', a ->> 'reason',
                                      coalesce(a -> 'inputs', '{}'::jsonb)
                                      || jsonb_build_object('notice_ms', (a ->> 'notice_ms')::bigint));
            END IF;
        WHEN 'checkpoint' THEN
            ok := tarmac_job_leaves((a ->> 'job')::bigint, (a ->> 'node')::bigint, p_now, 'checkpoint',
                                    a ->> 'reason', a -> 'inputs', (a ->> 'started_ms')::bigint);
        ELSE -- 'requeue': its node is gone
            ok := tarmac_job_leaves((a ->> 'job')::bigint, (a ->> 'node')::bigint, p_now,
                                    CASE WHEN a ->> 'cause' = 'interrupted' THEN 'interrupted'
                                         ELSE 'terminated' END,
                                    a ->> 'reason', a -> 'inputs', (a ->> 'started_ms')::bigint);
        END CASE;
        IF ok THEN applied := applied + 1; ELSE skipped := skipped + 1; END IF;
    END LOOP;

    SELECT tarmac_apply_base(p_epoch, p_now, jsonb_build_object('actions', coalesce(jsonb_agg(x ORDER BY i),
                                                                                  '[]'::jsonb)))
      INTO res
      FROM jsonb_array_elements(actions) WITH ORDINALITY AS t(x, i)
     WHERE NOT (x ->> 'op' = ANY (spot_ops));
    RETURN jsonb_build_object('applied', applied + (res ->> 'applied')::int,
                              'skipped', skipped + (res ->> 'skipped')::int,
                              'nodes', res -> 'nodes');
END $$;
