-- 0017_fence: a silent node is fenced before its jobs are placed again
-- (controller/reconcile/staleness.c).
--
--   fence  the node becomes 'terminating' with its jobs still allocated to
--          it, guarded on its state (booting, ready or draining) and on no
--          heartbeat since the plan (last_heartbeat_ms as the plan saw
--          it), decision 'fence' with the plan's reason and inputs.  The
--          controller then terminates its instance through the provider;
--          the jobs leave only once the provider's listing confirms the
--          instance terminated (the pass's node_gone, which requeues them,
--          as for any node that goes).  A fence the guard refused is named
--          in "kept", as 0008 does for 'terminate', so the controller never
--          terminates a node whose agent spoke again since the snapshot.
--
-- tarmac_apply is wrapped once more, as 0007, 0010 and 0015 did: the
-- function the migrations before this one made is renamed
-- tarmac_apply_before_fence and applies every op it knew.  The wrapper
-- applies the fence ops first, in plan order, then hands the rest over.
-- One transaction as before; each op is guarded on the state it was
-- computed from, so a plan replayed after a crash is a no-op.

ALTER FUNCTION tarmac_apply(bigint, bigint, jsonb) RENAME TO tarmac_apply_before_fence;

CREATE FUNCTION tarmac_apply(p_epoch bigint, p_now bigint, p_plan jsonb)
RETURNS jsonb LANGUAGE plpgsql AS $$
DECLARE
    actions jsonb := coalesce(p_plan -> 'actions', '[]'::jsonb);
    a jsonb;
    ok boolean;
    applied int := 0;
    skipped int := 0;
    kept jsonb := '[]'::jsonb;
    res jsonb;
BEGIN
    IF NOT EXISTS (SELECT 1 FROM jsonb_array_elements(actions) x WHERE x ->> 'op' = 'fence') THEN
        RETURN tarmac_apply_before_fence(p_epoch, p_now, p_plan);
    END IF;
    PERFORM tarmac_lock_nodes();
    PERFORM 1 FROM leader WHERE id = 1 AND epoch = p_epoch FOR SHARE;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'leader epoch % is stale', p_epoch USING ERRCODE = 'TM001';
    END IF;
    FOR a IN SELECT x FROM jsonb_array_elements(actions) WITH ORDINALITY AS t(x, i)
              WHERE x ->> 'op' = 'fence' ORDER BY i
    LOOP
        UPDATE nodes SET state = 'terminating', state_reason = a ->> 'reason', idle_since_ms = NULL
         WHERE id = (a ->> 'node')::bigint AND state IN ('booting', 'ready', 'draining')
           AND coalesce(last_heartbeat_ms, 0) = coalesce((a ->> 'last_heartbeat_ms')::bigint, 0);
        ok := FOUND;
        IF ok THEN
            PERFORM tarmac_decide(p_now, 'fence', 'node', a ->> 'node', a ->> 'reason', a -> 'inputs');
            applied := applied + 1;
        ELSE
            skipped := skipped + 1;
            IF NOT EXISTS (SELECT 1 FROM nodes WHERE id = (a ->> 'node')::bigint AND state = 'terminating') THEN
                kept := kept || to_jsonb((a ->> 'node')::bigint);
            END IF;
        END IF;
    END LOOP;
    SELECT tarmac_apply_before_fence(p_epoch, p_now, jsonb_build_object('actions', coalesce(jsonb_agg(x ORDER BY i),
                                                                                  '[]'::jsonb)))
      INTO res
      FROM jsonb_array_elements(actions) WITH ORDINALITY AS t(x, i)
     WHERE x ->> 'op' <> 'fence';
    RETURN res || jsonb_build_object('applied', applied + (res ->> 'applied')::int,
                                     'skipped', skipped + (res ->> 'skipped')::int,
                                     'kept', coalesce(res -> 'kept', '[]'::jsonb) || kept);
END $$;
