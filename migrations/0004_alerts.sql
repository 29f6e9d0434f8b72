-- 0004_alerts: alerts, recorded and not repeated while their condition holds.
--
-- controller/alerts.c decides, each tick, which conditions hold (a pool's
-- paid GPUs used below a threshold for a while, a queue too old, spend past
-- a soft cap's warning, a provider refusing our credentials), each with a
-- stable key such as 'pool_idle:od'.  tarmac_alerts(epoch, now, holding,
-- max_attempts) makes the table agree with that set in one transaction:
-- a key not firing yet gets a new row, a firing row whose key is no longer
-- held is resolved, each with its decision.  The partial unique index on
-- key makes "firing" exist once per key, whatever the number of replicas
-- or restarts; only the leader writes (the epoch fence, as tarmac_apply).
--
-- Delivery to the webhook (controller/alert_webhook.c) is recorded in the
-- same row: attempts, delivered_ms or given_up_ms for the firing notice,
-- resolve_attempts, resolve_delivered_ms or resolve_given_up_ms for the
-- resolved one, last_error for either.  A notice neither delivered nor
-- given up, with attempts left, is returned by tarmac_alerts on every tick,
-- so a restarted or new leader picks it up (at least once).

CREATE TABLE alerts (
    id                    bigserial PRIMARY KEY,
    key                   text NOT NULL CHECK (key <> ''),
    kind                  text NOT NULL
                          CHECK (kind IN ('pool_idle', 'queue_age', 'soft_cap', 'provider_auth')),
    subject               text NOT NULL,
    -- Where its decisions are filed (decisions.subject_kind/_id): a pool,
    -- the oldest queued job, a budget ('team:x' as the API files them), a
    -- provider.
    decision_subject_kind text NOT NULL
                          CHECK (decision_subject_kind IN ('job', 'pool', 'budget', 'provider')),
    decision_subject_id   text NOT NULL,
    message               text NOT NULL,
    details               jsonb NOT NULL DEFAULT '{}'::jsonb,
    fired_ms              bigint NOT NULL,
    resolved_ms           bigint,
    delivered_ms          bigint,
    given_up_ms           bigint,
    attempts              int NOT NULL DEFAULT 0 CHECK (attempts >= 0),
    resolve_delivered_ms  bigint,
    resolve_given_up_ms   bigint,
    resolve_attempts      int NOT NULL DEFAULT 0 CHECK (resolve_attempts >= 0),
    -- The last failed attempt's error ("HTTP 500", "ETIMEDOUT"): never the
    -- webhook URL, which is a secret.
    last_error            text,
    CHECK (resolved_ms IS NULL OR resolved_ms >= fired_ms),
    CHECK (resolve_delivered_ms IS NULL OR resolved_ms IS NOT NULL)
);
CREATE UNIQUE INDEX alerts_firing ON alerts (key) WHERE resolved_ms IS NULL;
-- Notices still to send: a firing one not delivered while it fires, a
-- resolved one for an alert whose firing notice went out.
CREATE INDEX alerts_undelivered ON alerts (id)
    WHERE (resolved_ms IS NULL AND delivered_ms IS NULL AND given_up_ms IS NULL)
       OR (resolved_ms IS NOT NULL AND delivered_ms IS NOT NULL AND resolve_delivered_ms IS NULL
           AND resolve_given_up_ms IS NULL);
CREATE INDEX alerts_fired ON alerts (fired_ms);

-- p_holding: [{"key", "kind", "subject", "decision_subject_kind",
-- "decision_subject_id", "message", "details"}], the conditions holding now.
-- p_max_attempts: attempts per notice (0: no webhook, nothing pending).
-- Returns {"fired": [keys], "resolved": [keys], "pending": [notices]}, a
-- notice being the row's fields plus "state" ('firing' or 'resolved') and
-- the attempts already made for it; at most 100, oldest first.
CREATE FUNCTION tarmac_alerts(p_epoch bigint, p_now bigint, p_holding jsonb, p_max_attempts int)
RETURNS jsonb LANGUAGE plpgsql AS $$
DECLARE
    h jsonb;
    r record;
    fired jsonb := '[]'::jsonb;
    resolved jsonb := '[]'::jsonb;
    pending jsonb;
    new_id bigint;
BEGIN
    PERFORM 1 FROM leader WHERE id = 1 AND epoch = p_epoch FOR SHARE;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'leader epoch % is stale', p_epoch USING ERRCODE = 'TM001';
    END IF;

    -- Resolve first: a key that clears and holds again in one call cannot
    -- happen (one set per call), but a resolved row must not block a new one.
    FOR r IN UPDATE alerts SET resolved_ms = p_now
              WHERE resolved_ms IS NULL
                AND key NOT IN (SELECT x ->> 'key' FROM jsonb_array_elements(p_holding) x)
             RETURNING *
    LOOP
        PERFORM tarmac_decide(p_now, 'alert_resolved', r.decision_subject_kind, r.decision_subject_id,
                              'alert ' || r.key || ' cleared: ' || r.message,
                              jsonb_build_object('alert', r.id, 'key', r.key, 'fired_ms', r.fired_ms,
                                                 'lasted_ms', p_now - r.fired_ms));
        resolved := resolved || to_jsonb(r.key);
    END LOOP;

    FOR h IN SELECT value FROM jsonb_array_elements(p_holding)
    LOOP
        -- Most ticks find every key firing already: look before inserting,
        -- so they do not burn a sequence value each.
        CONTINUE WHEN EXISTS (SELECT 1 FROM alerts WHERE key = h ->> 'key' AND resolved_ms IS NULL);
        INSERT INTO alerts (key, kind, subject, decision_subject_kind, decision_subject_id, message,
                            details, fired_ms)
        VALUES (h ->> 'key', h ->> 'kind', h ->> 'subject', h ->> 'decision_subject_kind',
                h ->> 'decision_subject_id', h ->> 'message', coalesce(h -> 'details', '{}'::jsonb), p_now)
        ON CONFLICT (key) WHERE resolved_ms IS NULL DO NOTHING
        RETURNING id INTO new_id;
        IF new_id IS NOT NULL THEN
            PERFORM tarmac_decide(p_now, 'alert', h ->> 'decision_subject_kind',
                                  h ->> 'decision_subject_id', 'alert ' || (h ->> 'key') || ': ' || (h ->> 'message'),
                                  coalesce(h -> 'details', '{}'::jsonb)
                                      || jsonb_build_object('alert', new_id, 'key', h ->> 'key'));
            fired := fired || to_jsonb(h ->> 'key');
        END IF;
        new_id := NULL;
    END LOOP;

    SELECT coalesce(jsonb_agg(n ORDER BY n.id), '[]'::jsonb) INTO pending FROM (
        SELECT a.id, a.key, a.kind, a.subject, a.message, a.details, a.fired_ms, a.resolved_ms,
               CASE WHEN a.resolved_ms IS NULL THEN 'firing' ELSE 'resolved' END AS state,
               CASE WHEN a.resolved_ms IS NULL THEN a.attempts ELSE a.resolve_attempts END AS attempts
          FROM alerts a
         WHERE p_max_attempts > 0
           AND ((a.resolved_ms IS NULL AND a.delivered_ms IS NULL AND a.given_up_ms IS NULL
                 AND a.attempts < p_max_attempts)
             OR (a.resolved_ms IS NOT NULL AND a.delivered_ms IS NOT NULL
                 AND a.resolve_delivered_ms IS NULL AND a.resolve_given_up_ms IS NULL
                 AND a.resolve_attempts < p_max_attempts))
         ORDER BY a.id LIMIT 100) n;

    RETURN jsonb_build_object('fired', fired, 'resolved', resolved, 'pending', pending);
END $$;
