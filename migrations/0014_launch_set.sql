-- 0014_launch_set: a gang's set the cloud refused, given up whole as one
-- decision.
--
-- A gang (a job on several nodes) is bought whole: its node rows are
-- requested together, with member tokens sharing one stem (the set), and
-- launched in one all-or-nothing call.  When the cloud refuses the set
-- (capacity) nothing of it is kept, and the daemon gives every row up at
-- once with one action:
--   launch_set_failed  {"set": stem, "pool": name, "nodes": [ids], "reason": ...,
--                       "inputs": {...}}
--                      each node still 'requested' becomes 'terminated' with
--                      the reason; one decision 'launch_failed' about the
--                      pool (subject_id its name), its inputs naming the set
--                      ("launch_set") and the nodes given up ("nodes").
-- Every other op goes to the tarmac_apply below it, in the plan's order.
ALTER FUNCTION tarmac_apply(bigint, bigint, jsonb) RENAME TO tarmac_apply_before_sets;

CREATE FUNCTION tarmac_apply(p_epoch bigint, p_now bigint, p_plan jsonb)
RETURNS jsonb LANGUAGE plpgsql AS $$
DECLARE
    actions jsonb := coalesce(p_plan -> 'actions', '[]'::jsonb);
    a jsonb;
    applied int := 0;
    skipped int := 0;
    gone bigint[];
    res jsonb;
BEGIN
    IF NOT EXISTS (SELECT 1 FROM jsonb_array_elements(actions) x WHERE x ->> 'op' = 'launch_set_failed') THEN
        RETURN tarmac_apply_before_sets(p_epoch, p_now, p_plan);
    END IF;
    PERFORM tarmac_lock_nodes();
    PERFORM 1 FROM leader WHERE id = 1 AND epoch = p_epoch FOR SHARE;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'leader epoch % is stale', p_epoch USING ERRCODE = 'TM001';
    END IF;
    FOR a IN SELECT x FROM jsonb_array_elements(actions) WITH ORDINALITY AS t(x, i)
              WHERE x ->> 'op' = 'launch_set_failed' ORDER BY i
    LOOP
        WITH u AS (
            UPDATE nodes SET state = 'terminated', terminated_ms = p_now, state_reason = a ->> 'reason'
             WHERE id IN (SELECT (v #>> '{}')::bigint FROM jsonb_array_elements(a -> 'nodes') v)
               AND state = 'requested'
            RETURNING id)
        SELECT array_agg(id ORDER BY id) INTO gone FROM u;
        IF gone IS NOT NULL THEN
            PERFORM tarmac_decide(p_now, 'launch_failed', 'pool', a ->> 'pool', a ->> 'reason',
                                  coalesce(a -> 'inputs', '{}'::jsonb)
                                  || jsonb_build_object('launch_set', a ->> 'set', 'nodes', to_jsonb(gone)));
            applied := applied + 1;
        ELSE
            skipped := skipped + 1;
        END IF;
    END LOOP;
    SELECT tarmac_apply_before_sets(p_epoch, p_now,
                                    jsonb_build_object('actions', coalesce(jsonb_agg(x ORDER BY i), '[]'::jsonb)))
      INTO res
      FROM jsonb_array_elements(actions) WITH ORDINALITY AS t(x, i)
     WHERE x ->> 'op' <> 'launch_set_failed';
    RETURN res || jsonb_build_object('applied', applied + (res ->> 'applied')::int,
                                     'skipped', skipped + (res ->> 'skipped')::int);
END $$;
