-- 0018_bounded_telemetry: GPU samples pruned whatever their date, and an
-- interruption notice decided once per deadline.
--
-- Pruning (agent.sample_retention): the API refuses samples dated more
-- than agent.clock_skew ahead of its clock (controller/api/nodes.c), but
-- rows stored before that check, or under a clock that later stepped
-- back, may be dated in the future, where pruning by age never reaches
-- them.  This form deletes, per call, at most p_batch of the oldest rows
-- before p_before and at most p_batch of the newest rows after p_after
-- (the leader passes its clock plus agent.clock_skew): a table holding
-- rows from 2100 or 9999 drains over a few ticks like any backlog.  The
-- two-argument form stays for a controller of the previous version
-- during an upgrade.
CREATE FUNCTION tarmac_prune_samples(p_before bigint, p_batch int, p_after bigint)
RETURNS int LANGUAGE sql AS $$
    WITH d AS (DELETE FROM gpu_samples
                WHERE ctid IN (SELECT o.ctid FROM (SELECT ctid FROM gpu_samples WHERE at_ms < p_before
                                                   ORDER BY at_ms LIMIT p_batch) o
                               UNION ALL
                               SELECT f.ctid FROM (SELECT ctid FROM gpu_samples WHERE at_ms > p_after
                                                   ORDER BY at_ms DESC LIMIT p_batch) f)
               RETURNING 1)
    SELECT count(*)::int FROM d;
$$;

-- The deadline of the node's last interruption notice (ms since the epoch,
-- to the second; 0 when the notice gave none): the agent repeats a notice
-- until it is acknowledged and the cloud's metadata keeps announcing it,
-- so a notice naming the deadline already recorded (within 2 s) changes
-- the node's reason but writes no second decision.
ALTER TABLE nodes ADD COLUMN notice_deadline_ms bigint;
