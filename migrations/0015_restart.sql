-- 0015_restart: consolidation by restart in the live controller (issue 17
-- item 4).  The planner may empty a node whose jobs are all preemptible but
-- not all checkpointable when the money saved exceeds the work redone
-- (controller/fleet/planner.h); controller/reconcile/moves.c writes it as
-- one op:
--   restart   the node is cordoned ('draining', as for 'move'), and in the
--             same statement each listed job leaves it through
--             tarmac_job_leaves (0006): cause 'checkpoint' for a job that
--             can checkpoint (progress kept), cause 'consolidate' for one
--             that cannot (requeued to start over, its attempt's GPU time
--             counted as lost; the next placement makes it attempt + 1).
--             Each leave is guarded on the attempt the plan saw
--             (started_ms).  Nothing leaves unless the cordon applied.  The
--             node decision ('consolidate_restart') carries the plan's
--             inputs: both sums (saving_usd, redone_usd, redone_gpu_hours)
--             and inputs.disruption, so it counts against the pool's
--             disruption budget like a move.  The tick releases the node
--             once empty (its drained-node path).
--
-- tarmac_apply is wrapped once more, as 0007 and 0010 did: the function
-- the migrations before this one made (0010 at the time of writing) is
-- renamed tarmac_apply_before_restart and applies every op it knew.
-- The wrapper applies the restart ops first, in plan order, so that the
-- cordon comes before the plan's placements (place is guarded on NOT
-- cordoned), then hands the rest to tarmac_apply_before_restart.  One transaction
-- as before; each op is guarded on the state it was computed from, so a
-- plan replayed after a crash is a no-op.

ALTER TABLE job_interruptions DROP CONSTRAINT job_interruptions_cause_check;
ALTER TABLE job_interruptions ADD CONSTRAINT job_interruptions_cause_check
    CHECK (cause IN ('checkpoint', 'interrupted', 'terminated', 'deadline', 'lost', 'unreachable', 'idle',
                     'consolidate'));

ALTER FUNCTION tarmac_apply(bigint, bigint, jsonb) RENAME TO tarmac_apply_before_restart;

CREATE FUNCTION tarmac_apply(p_epoch bigint, p_now bigint, p_plan jsonb)
RETURNS jsonb LANGUAGE plpgsql AS $$
DECLARE
    actions jsonb := coalesce(p_plan -> 'actions', '[]'::jsonb);
    a jsonb;
    j jsonb;
    ok boolean;
    applied int := 0;
    skipped int := 0;
    res jsonb;
BEGIN
    IF NOT EXISTS (SELECT 1 FROM jsonb_array_elements(actions) x WHERE x ->> 'op' = 'restart') THEN
        RETURN tarmac_apply_before_restart(p_epoch, p_now, p_plan);
    END IF;
    PERFORM tarmac_lock_nodes();
    PERFORM 1 FROM leader WHERE id = 1 AND epoch = p_epoch FOR SHARE;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'leader epoch % is stale', p_epoch USING ERRCODE = 'TM001';
    END IF;
    FOR a IN SELECT x FROM jsonb_array_elements(actions) WITH ORDINALITY AS t(x, i)
              WHERE x ->> 'op' = 'restart' ORDER BY i
    LOOP
        UPDATE nodes SET cordoned = true, state = 'draining', state_reason = a ->> 'reason'
         WHERE id = (a ->> 'node')::bigint AND state = 'ready' AND NOT cordoned;
        ok := FOUND;
        IF ok THEN
            PERFORM tarmac_decide(p_now, 'consolidate_restart', 'node', a ->> 'node', a ->> 'reason',
                                  a -> 'inputs');
            FOR j IN SELECT value FROM jsonb_array_elements(coalesce(a -> 'jobs', '[]'::jsonb))
            LOOP
                PERFORM tarmac_job_leaves((j ->> 'job')::bigint, (a ->> 'node')::bigint, p_now,
                                          CASE WHEN j ->> 'cause' = 'checkpoint' THEN 'checkpoint'
                                               ELSE 'consolidate' END,
                                          j ->> 'reason', j -> 'inputs', (j ->> 'started_ms')::bigint);
            END LOOP;
        END IF;
        IF ok THEN applied := applied + 1; ELSE skipped := skipped + 1; END IF;
    END LOOP;
    SELECT tarmac_apply_before_restart(p_epoch, p_now, jsonb_build_object('actions', coalesce(jsonb_agg(x ORDER BY i),
                                                                                  '[]'::jsonb)))
      INTO res
      FROM jsonb_array_elements(actions) WITH ORDINALITY AS t(x, i)
     WHERE x ->> 'op' <> 'restart';
    RETURN res || jsonb_build_object('applied', applied + (res ->> 'applied')::int,
                                     'skipped', skipped + (res ->> 'skipped')::int);
END $$;
