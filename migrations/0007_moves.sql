-- 0007_moves: the planner's other actions in the live controller (issue 4,
-- the elastic fleet): drains, moves, spot substitutions, deadline switches
-- to on-demand, refusals recorded once, and the disruption budget.
--
-- Ops (controller/reconcile_moves.c emits them):
--   drain        no new work on a ready node ('draining', cordoned); the
--                tick releases it once empty (decision 'drain').
--   move         the same cordon, and in the same statement each listed
--                job checkpoints and requeues with its progress kept
--                (tarmac_job_leaves, 0006); the next scheduling pass places
--                them elsewhere and the emptied node is released (decision
--                'move').  Nothing moves unless the cordon applied, so a
--                node cordoned meanwhile by someone else keeps its jobs.
--   deadline_od  a preemptible job with a deadline runs on on-demand from
--                now (jobs.on_demand_from_ms, read by the routing); if it
--                runs on spot it leaves the node: checkpointed when it can,
--                else requeued (cause 'deadline', its attempt lost)
--                (decision 'deadline_on_demand').
--   substitute   links the spot node this plan requested (by its launch
--                token) to the on-demand node it replaces
--                (nodes.replaces_node_id); applied after request_node.
--                When the replacement is ready the tick moves the old
--                node's jobs ('move') and releases it; a replacement that
--                fails or is interrupted leaves the old node running.
--   launch_refused  a launch the planner or the pool limits refused: a
--                decision only when the refusal for that subject changes
--                kind or starts again after a quiet spell (launch_refusals
--                remembers the last one), not one row per tick.
--
-- Decisions of voluntary disruptions (idle releases by the planner, moves,
-- substitutions) carry inputs.disruption and inputs.pool; the snapshot
-- counts them per pool over the pool's disruption_interval (at most a
-- day), through the partial index below.
--
-- tarmac_apply is wrapped once more, as 0006 asks: the function 0006 made
-- (spot ops, then everything else through tarmac_apply_base) is renamed
-- tarmac_apply_spot and keeps applying every op it knew.  The wrapper takes
-- the same advisory lock and checks the same epoch fence first, applies
-- drain, move and deadline_od in plan order, hands the rest to
-- tarmac_apply_spot in plan order, then applies substitute and
-- launch_refused.  The cordons come before the plan's placements, so a job
-- placed this pass on a node drained this pass stays queued (place is
-- guarded on NOT cordoned).  The whole plan is still one transaction: a
-- crash before it commits changes nothing, and each op is guarded on the
-- state it was computed from, so a plan replayed after a crash is a no-op.

ALTER TABLE nodes ADD COLUMN replaces_node_id bigint REFERENCES nodes (id);
ALTER TABLE jobs ADD COLUMN on_demand_from_ms bigint;

-- A job requeued because it must switch to on-demand for its deadline.
ALTER TABLE job_interruptions DROP CONSTRAINT job_interruptions_cause_check;
ALTER TABLE job_interruptions ADD CONSTRAINT job_interruptions_cause_check
    CHECK (cause IN ('checkpoint', 'interrupted', 'terminated', 'deadline'));

CREATE INDEX decisions_disruption ON decisions (at_ms) WHERE inputs ? 'disruption';

CREATE TABLE launch_refusals (
    subject   text PRIMARY KEY,
    key       text NOT NULL,
    since_ms  bigint NOT NULL,
    seen_ms   bigint NOT NULL
);

ALTER FUNCTION tarmac_apply(bigint, bigint, jsonb) RENAME TO tarmac_apply_spot;

CREATE FUNCTION tarmac_apply(p_epoch bigint, p_now bigint, p_plan jsonb)
RETURNS jsonb LANGUAGE plpgsql AS $$
DECLARE
    before_ops CONSTANT text[] := ARRAY['drain', 'move', 'deadline_od'];
    after_ops CONSTANT text[] := ARRAY['substitute', 'launch_refused'];
    actions jsonb := coalesce(p_plan -> 'actions', '[]'::jsonb);
    a jsonb;
    j jsonb;
    ok boolean;
    left_ok boolean;
    prev launch_refusals%ROWTYPE;
    nid bigint;
    applied int := 0;
    skipped int := 0;
    res jsonb;
BEGIN
    PERFORM tarmac_lock_nodes();
    PERFORM 1 FROM leader WHERE id = 1 AND epoch = p_epoch FOR SHARE;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'leader epoch % is stale', p_epoch USING ERRCODE = 'TM001';
    END IF;
    -- Most passes carry none of these: hand the plan over untouched.
    IF NOT EXISTS (SELECT 1 FROM jsonb_array_elements(actions) x
                    WHERE x ->> 'op' = ANY (before_ops || after_ops)) THEN
        RETURN tarmac_apply_spot(p_epoch, p_now, p_plan);
    END IF;

    FOR a IN SELECT x FROM jsonb_array_elements(actions) WITH ORDINALITY AS t(x, i)
              WHERE x ->> 'op' = ANY (before_ops) ORDER BY i
    LOOP
        CASE a ->> 'op'
        WHEN 'drain', 'move' THEN
            UPDATE nodes SET cordoned = true, state = 'draining', state_reason = a ->> 'reason'
             WHERE id = (a ->> 'node')::bigint AND state = 'ready' AND NOT cordoned;
            ok := FOUND;
            IF ok THEN
                PERFORM tarmac_decide(p_now, a ->> 'op', 'node', a ->> 'node', a ->> 'reason', a -> 'inputs');
                FOR j IN SELECT value FROM jsonb_array_elements(coalesce(a -> 'jobs', '[]'::jsonb))
                LOOP
                    PERFORM tarmac_job_leaves((j ->> 'job')::bigint, (a ->> 'node')::bigint, p_now,
                                              'checkpoint', j ->> 'reason', j -> 'inputs',
                                              (j ->> 'started_ms')::bigint);
                END LOOP;
            END IF;
        ELSE -- 'deadline_od'
            UPDATE jobs SET on_demand_from_ms = p_now
             WHERE id = (a ->> 'job')::bigint AND state IN ('queued', 'running')
               AND on_demand_from_ms IS NULL;
            ok := FOUND;
            IF ok THEN
                PERFORM tarmac_decide(p_now, 'deadline_on_demand', 'job', a ->> 'job', a ->> 'reason',
                                      a -> 'inputs');
            END IF;
            -- Running on spot: off the node now, so that it restarts on
            -- on-demand (guarded on the attempt the plan saw).
            IF a ? 'node' THEN
                SELECT tarmac_job_leaves((a ->> 'job')::bigint, (a ->> 'node')::bigint, p_now,
                                         CASE WHEN jb.checkpointable THEN 'checkpoint' ELSE 'deadline' END,
                                         a ->> 'leave_reason', a -> 'inputs', (a ->> 'started_ms')::bigint)
                  INTO left_ok
                  FROM jobs jb WHERE jb.id = (a ->> 'job')::bigint;
                ok := ok OR coalesce(left_ok, false);
            END IF;
        END CASE;
        IF ok THEN applied := applied + 1; ELSE skipped := skipped + 1; END IF;
    END LOOP;

    SELECT tarmac_apply_spot(p_epoch, p_now, jsonb_build_object('actions', coalesce(jsonb_agg(x ORDER BY i),
                                                                                  '[]'::jsonb)))
      INTO res
      FROM jsonb_array_elements(actions) WITH ORDINALITY AS t(x, i)
     WHERE NOT (x ->> 'op' = ANY (before_ops || after_ops));

    FOR a IN SELECT x FROM jsonb_array_elements(actions) WITH ORDINALITY AS t(x, i)
              WHERE x ->> 'op' = ANY (after_ops) ORDER BY i
    LOOP
        IF a ->> 'op' = 'substitute' THEN
            -- Only the node this very plan requested, and only while the
            -- node it replaces is still a ready on-demand node in service.
            UPDATE nodes SET replaces_node_id = (a ->> 'node')::bigint
             WHERE launch_token = a ->> 'token' AND state = 'requested' AND replaces_node_id IS NULL
               AND EXISTS (SELECT 1 FROM nodes o WHERE o.id = (a ->> 'node')::bigint AND o.state = 'ready'
                             AND NOT o.cordoned AND o.capacity_type = 'on_demand')
            RETURNING id INTO nid;
            ok := nid IS NOT NULL;
            IF ok THEN
                PERFORM tarmac_decide(p_now, 'substitute', 'node', a ->> 'node', a ->> 'reason',
                                      coalesce(a -> 'inputs', '{}'::jsonb) || jsonb_build_object('by_node', nid));
            END IF;
            nid := NULL;
        ELSE -- 'launch_refused'
            SELECT * INTO prev FROM launch_refusals WHERE subject = a ->> 'subject' FOR UPDATE;
            ok := NOT FOUND OR prev.key <> a ->> 'key'
                  OR prev.seen_ms < p_now - coalesce((a ->> 'quiet_ms')::bigint, 0);
            INSERT INTO launch_refusals (subject, key, since_ms, seen_ms)
            VALUES (a ->> 'subject', a ->> 'key', p_now, p_now)
            ON CONFLICT (subject) DO UPDATE
               SET key = EXCLUDED.key, seen_ms = EXCLUDED.seen_ms,
                   since_ms = CASE WHEN ok THEN EXCLUDED.since_ms ELSE launch_refusals.since_ms END;
            IF ok THEN
                PERFORM tarmac_decide(p_now, 'launch_refused', 'pool', a ->> 'subject', a ->> 'reason',
                                      coalesce(a -> 'inputs', '{}'::jsonb) || jsonb_build_object('key', a ->> 'key'));
            END IF;
        END IF;
        IF ok THEN applied := applied + 1; ELSE skipped := skipped + 1; END IF;
    END LOOP;

    RETURN jsonb_build_object('applied', applied + (res ->> 'applied')::int,
                              'skipped', skipped + (res ->> 'skipped')::int,
                              'nodes', res -> 'nodes');
END $$;
