-- 0019_no_show: pools whose launched nodes never enroll
-- (controller/reconcile/no_show.c).
--
-- A node given up on without ever sending a heartbeat (unreachable_ms set,
-- last_heartbeat_ms NULL) is a launch that never enrolled.  Each snapshot
-- reads, per pool, those newer than the pool's newest node that did
-- heartbeat (controller/store/store.c); the two partial indexes keep that
-- read to the few rows it needs however many nodes the table holds.
--
-- The pass holds the pool's launches for a backoff and says so with one op:
--   launch_held  decision 'launch_held' on the pool, once per hold: a hold
--                is named by its end (inputs.until_ms), the same in every
--                pass of one hold, so a pass that repeats it records
--                nothing.
-- The alert after agent.no_show_alert_after such nodes in a row is
-- 'pool_no_show:<pool>' (controller/reconcile/alerts.c), through
-- tarmac_alerts (0004) like the others.
--
-- tarmac_apply is wrapped once more, as 0010 and 0015 did: the function
-- the migrations before this one made is renamed
-- tarmac_apply_before_no_show and applies every op it knew; this one
-- records the launch_held ops and hands it the rest, in one transaction.

CREATE INDEX nodes_no_show ON nodes (pool, id)
    WHERE unreachable_ms IS NOT NULL AND last_heartbeat_ms IS NULL;
CREATE INDEX nodes_heard ON nodes (pool, id) WHERE last_heartbeat_ms IS NOT NULL;

ALTER TABLE alerts DROP CONSTRAINT alerts_kind_check;
ALTER TABLE alerts ADD CONSTRAINT alerts_kind_check
    CHECK (kind IN ('pool_idle', 'queue_age', 'soft_cap', 'provider_auth', 'gpu_idle', 'mass_silence',
                    'pool_no_show'));

ALTER FUNCTION tarmac_apply(bigint, bigint, jsonb) RENAME TO tarmac_apply_before_no_show;

CREATE FUNCTION tarmac_apply(p_epoch bigint, p_now bigint, p_plan jsonb)
RETURNS jsonb LANGUAGE plpgsql AS $$
DECLARE
    actions jsonb := coalesce(p_plan -> 'actions', '[]'::jsonb);
    a jsonb;
    ok boolean;
    applied int := 0;
    skipped int := 0;
    res jsonb;
BEGIN
    IF NOT EXISTS (SELECT 1 FROM jsonb_array_elements(actions) x WHERE x ->> 'op' = 'launch_held') THEN
        RETURN tarmac_apply_before_no_show(p_epoch, p_now, p_plan);
    END IF;
    PERFORM 1 FROM leader WHERE id = 1 AND epoch = p_epoch FOR SHARE;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'leader epoch % is stale', p_epoch USING ERRCODE = 'TM001';
    END IF;
    FOR a IN SELECT x FROM jsonb_array_elements(actions) WITH ORDINALITY AS t(x, i)
              WHERE x ->> 'op' = 'launch_held' ORDER BY i
    LOOP
        ok := NOT EXISTS (
            SELECT 1 FROM decisions d
             WHERE d.kind = 'launch_held' AND d.subject_kind = 'pool' AND d.subject_id = a ->> 'pool'
               AND d.inputs ->> 'until_ms' = a -> 'inputs' ->> 'until_ms');
        IF ok THEN
            PERFORM tarmac_decide(p_now, 'launch_held', 'pool', a ->> 'pool', a ->> 'reason', a -> 'inputs');
            applied := applied + 1;
        ELSE
            skipped := skipped + 1;
        END IF;
    END LOOP;
    SELECT tarmac_apply_before_no_show(p_epoch, p_now, jsonb_build_object('actions', coalesce(jsonb_agg(x ORDER BY i),
                                                                                    '[]'::jsonb)))
      INTO res
      FROM jsonb_array_elements(actions) WITH ORDINALITY AS t(x, i)
     WHERE x ->> 'op' <> 'launch_held';
    RETURN res || jsonb_build_object('applied', applied + (res ->> 'applied')::int,
                                     'skipped', skipped + (res ->> 'skipped')::int);
END $$;
