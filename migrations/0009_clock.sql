-- The latest controller time any process wrote.  A controller whose clock
-- runs faster than real time (time_scale > 1) starts from the wall clock,
-- which is behind what its predecessor wrote; a new leader moves its clock
-- up to this before its first pass, so no timestamp it writes is older than
-- one already stored (alerts resolved before they fired, a terminated node
-- terminated again).  Each column is the newest of its kind; the indexed
-- ones answer from their index.
CREATE FUNCTION tarmac_latest_ms() RETURNS bigint LANGUAGE sql STABLE AS $$
    SELECT greatest(
        (SELECT max(at_ms) FROM decisions),
        (SELECT max(acquired_ms) FROM leader),
        (SELECT max(greatest(submitted_ms, started_ms, finished_ms, on_demand_from_ms)) FROM jobs),
        (SELECT max(greatest(requested_ms, ready_ms, terminated_ms, last_heartbeat_ms, idle_since_ms,
                             billed_from_ms, accrued_to_ms)) FROM nodes),
        (SELECT max(greatest(fired_ms, resolved_ms)) FROM alerts),
        (SELECT max(at_ms) FROM job_interruptions),
        (SELECT max(at_ms) FROM spend),
        0)
$$;
