-- 0030_reservation: a pool's reservation that ended in the cloud, as a
-- decision.
--
-- A provider notices on its own, at a refresh, that the cloud now calls
-- one of its pools' reservations cancelled, expired or failed (or no
-- longer knows it): the pool launches no more into it from then on.  The
-- controller hands that on as a plan of 'reservation_ended' ops
-- (controller/daemon/calls.c, tm_calls_notices), each {pool, reason,
-- inputs: {subject: the reservation's id, state: the cloud's word}},
-- recorded as one decision 'reservation_ended' about the pool.  Nothing
-- else changes: the pool's nodes in the reservation are the cloud's to
-- take back, and their going is seen as any node's.
--
-- tarmac_apply is wrapped once more, as 0019, 0021 and 0025 did: the
-- function the migrations before this one made is renamed
-- tarmac_apply_before_reservation and applies every other op, its epoch
-- fence included (a stale epoch raises there, before any decision here is
-- written, and rolls the whole plan back).
ALTER FUNCTION tarmac_apply(bigint, bigint, jsonb) RENAME TO tarmac_apply_before_reservation;

CREATE FUNCTION tarmac_apply(p_epoch bigint, p_now bigint, p_plan jsonb)
RETURNS jsonb LANGUAGE plpgsql AS $$
DECLARE
    actions jsonb := coalesce(p_plan -> 'actions', '[]'::jsonb);
    rest jsonb;
    nended int;
    res jsonb;
BEGIN
    SELECT count(*) FILTER (WHERE x ->> 'op' = 'reservation_ended'),
           coalesce(jsonb_agg(x ORDER BY i) FILTER (WHERE x ->> 'op' IS DISTINCT FROM 'reservation_ended'),
                    '[]'::jsonb)
      INTO nended, rest
      FROM jsonb_array_elements(actions) WITH ORDINALITY AS t(x, i);
    IF nended = 0 THEN
        RETURN tarmac_apply_before_reservation(p_epoch, p_now, p_plan);
    END IF;
    res := tarmac_apply_before_reservation(p_epoch, p_now, p_plan || jsonb_build_object('actions', rest));
    INSERT INTO decisions (at_ms, kind, subject_kind, subject_id, reason, inputs)
    SELECT p_now, 'reservation_ended', 'pool', x ->> 'pool', x ->> 'reason',
           coalesce(x -> 'inputs', '{}'::jsonb)
      FROM jsonb_array_elements(actions) WITH ORDINALITY AS t(x, i)
     WHERE x ->> 'op' = 'reservation_ended'
     ORDER BY i;
    RETURN res || jsonb_build_object('applied', (res ->> 'applied')::int + nended);
END $$;
