-- 0025_apply_waits: a plan's 'wait' ops written as one statement.
--
-- A job that waits gets a 'wait' op in the plan when its reason changes
-- (controller/reconcile/schedule.c), so every arriving job brings one to
-- the next pass: with jobs arriving by the thousand a second, most of a
-- plan is waits.  0002 wrote each in its own turn of the PL/pgSQL loop (an
-- UPDATE of the job's reason, then tarmac_decide's INSERT), after every
-- wrapper since (0006 to 0021) had copied the whole action list once more
-- to hand on the ops it does not own.
--
-- tarmac_apply is wrapped once more, as 0019 and 0021 did: the function
-- the migrations before this one made is renamed tarmac_apply_before_waits
-- and applies every other op, in the plan's order, fence and locks
-- included; then this one writes the waits in one statement, with the
-- same guard and the same rows as before: the job's state_reason where
-- the job is still queued and its reason differs, and for each job so
-- changed one decision 'wait' (the op's reason and inputs), in the plan's
-- order.  After the other ops, as in a plan a job's wait comes after its
-- placement, preemption or reservation ops (a placed job has no wait).
-- A stale epoch still raises in the wrapped function, before any wait is
-- written, and rolls the whole plan back.
ALTER FUNCTION tarmac_apply(bigint, bigint, jsonb) RENAME TO tarmac_apply_before_waits;

CREATE FUNCTION tarmac_apply(p_epoch bigint, p_now bigint, p_plan jsonb)
RETURNS jsonb LANGUAGE plpgsql AS $$
DECLARE
    actions jsonb := coalesce(p_plan -> 'actions', '[]'::jsonb);
    rest jsonb;
    nwait int;
    changed int;
    res jsonb;
BEGIN
    SELECT count(*) FILTER (WHERE x ->> 'op' = 'wait'),
           coalesce(jsonb_agg(x ORDER BY i) FILTER (WHERE x ->> 'op' IS DISTINCT FROM 'wait'), '[]'::jsonb)
      INTO nwait, rest
      FROM jsonb_array_elements(actions) WITH ORDINALITY AS t(x, i);
    IF nwait = 0 THEN
        RETURN tarmac_apply_before_waits(p_epoch, p_now, p_plan);
    END IF;
    res := tarmac_apply_before_waits(p_epoch, p_now, p_plan || jsonb_build_object('actions', rest));
    WITH w AS (
        SELECT (x ->> 'job')::bigint AS job, x ->> 'reason' AS reason, x -> 'inputs' AS inputs, i
          FROM jsonb_array_elements(actions) WITH ORDINALITY AS t(x, i)
         WHERE x ->> 'op' = 'wait'
    ), u AS (
        UPDATE jobs j SET state_reason = w.reason
          FROM w
         WHERE j.id = w.job AND j.state = 'queued' AND j.state_reason IS DISTINCT FROM w.reason
        RETURNING w.job, w.reason, w.inputs, w.i
    )
    INSERT INTO decisions (at_ms, kind, subject_kind, subject_id, reason, inputs)
    SELECT p_now, 'wait', 'job', u.job::text, u.reason, coalesce(u.inputs, '{}'::jsonb)
      FROM u ORDER BY u.i;
    GET DIAGNOSTICS changed = ROW_COUNT;
    RETURN res || jsonb_build_object('applied', (res ->> 'applied')::int + changed,
                                     'skipped', (res ->> 'skipped')::int + nwait - changed);
END $$;
