-- 0016_silence: many nodes silent at once (controller/reconcile/staleness.c,
-- mass_silence).  While a provider's silent nodes are held back, the plan
-- carries one op per provider on every pass:
--   silence_hold   decision 'silence_hold' on the provider, recorded once
--                  per episode: not when one was recorded at or after the
--                  plan's since_ms (the earliest silence counted among the
--                  held nodes, which stays put while the episode lasts).
--
-- The alert kind 'mass_silence' (controller/reconcile/alerts.c,
-- mass_silence:<provider>) fires while a provider is held back.
--
-- tarmac_apply is wrapped once more, as 0007, 0010 and 0015 did: the
-- function the migrations before this one made is renamed
-- tarmac_apply_before_silence and applies every op it knew.  One
-- transaction as before, fenced on the epoch.

ALTER TABLE alerts DROP CONSTRAINT alerts_kind_check;
ALTER TABLE alerts ADD CONSTRAINT alerts_kind_check
    CHECK (kind IN ('pool_idle', 'queue_age', 'soft_cap', 'provider_auth', 'gpu_idle', 'mass_silence'));

ALTER FUNCTION tarmac_apply(bigint, bigint, jsonb) RENAME TO tarmac_apply_before_silence;

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
    IF NOT EXISTS (SELECT 1 FROM jsonb_array_elements(actions) x WHERE x ->> 'op' = 'silence_hold') THEN
        RETURN tarmac_apply_before_silence(p_epoch, p_now, p_plan);
    END IF;
    PERFORM 1 FROM leader WHERE id = 1 AND epoch = p_epoch FOR SHARE;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'leader epoch % is stale', p_epoch USING ERRCODE = 'TM001';
    END IF;
    FOR a IN SELECT x FROM jsonb_array_elements(actions) WITH ORDINALITY AS t(x, i)
              WHERE x ->> 'op' = 'silence_hold' ORDER BY i
    LOOP
        ok := NOT EXISTS (
            SELECT 1 FROM decisions d
             WHERE d.kind = 'silence_hold' AND d.subject_kind = 'provider'
               AND d.subject_id = a ->> 'provider'
               AND d.at_ms >= coalesce((a ->> 'since_ms')::bigint, 0));
        IF ok THEN
            PERFORM tarmac_decide(p_now, 'silence_hold', 'provider', a ->> 'provider', a ->> 'reason',
                                  coalesce(a -> 'inputs', '{}'::jsonb)
                                  || jsonb_build_object('since_ms', (a ->> 'since_ms')::bigint));
        END IF;
        IF ok THEN applied := applied + 1; ELSE skipped := skipped + 1; END IF;
    END LOOP;
    SELECT tarmac_apply_before_silence(p_epoch, p_now, jsonb_build_object('actions', coalesce(jsonb_agg(x ORDER BY i),
                                                                                  '[]'::jsonb)))
      INTO res
      FROM jsonb_array_elements(actions) WITH ORDINALITY AS t(x, i)
     WHERE x ->> 'op' <> 'silence_hold';
    RETURN res || jsonb_build_object('applied', applied + (res ->> 'applied')::int,
                                     'skipped', skipped + (res ->> 'skipped')::int);
END $$;
