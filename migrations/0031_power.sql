-- 0031_power: power saving for owned pools (docs/owned.md "Power saving").
--
-- An owned node idle past its pool's suspend_after is switched off by the
-- pool's suspend_command and switched on again by resume_command when the
-- queue needs it; the leader runs both (controller/daemon/power.c).  Its
-- power is a column beside its state, not a state: a suspended node is
-- still one of the pool's machines (ready by its join, never terminated),
-- only asleep, and every rule about states stays as it was.
--
--   on          powered; the only power that takes work
--   suspending  suspend_command is running (or was, under a leader that died)
--   suspended   off: its agent's silence is expected (no unreachable, no
--               requeue, no fencing), billed at suspended_cost_per_node_hour
--   resuming    resume_command ran or runs: back to on at its agent's first
--               heartbeat after power_since_ms, or marked unreachable past
--               the pool's resume_timeout
ALTER TABLE nodes ADD COLUMN power text NOT NULL DEFAULT 'on'
    CHECK (power IN ('on', 'suspending', 'suspended', 'resuming'));
ALTER TABLE nodes ADD COLUMN power_since_ms bigint;

-- One power change of one node: from p_from to p_to, with a decision of
-- kind p_kind naming why and the command's result.  False (nothing
-- written) when the node is not live with power p_from, or, going to
-- suspending, when it holds a job: a job placed after the pass chose the
-- node wins over the suspend.  p_price (NULL: unchanged) is the node's
-- rate from now on: the ledger is first brought up to now, so the hours
-- before the change are charged at the old rate (tarmac_accrue).  p_idle
-- restarts the node's idle time (a node back on is idle from now, not
-- from before it slept).  p_unreachable marks it unreachable now (a
-- resume that never heartbeat).  Fenced by the leader's epoch like
-- tarmac_apply.
CREATE FUNCTION tarmac_node_power(p_epoch bigint, p_now bigint, p_node bigint, p_from text, p_to text,
                                  p_price bigint, p_idle boolean, p_unreachable boolean, p_kind text,
                                  p_reason text, p_inputs jsonb)
RETURNS boolean LANGUAGE plpgsql AS $$
BEGIN
    PERFORM 1 FROM leader WHERE id = 1 AND epoch = p_epoch FOR SHARE;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'leader epoch % is stale', p_epoch USING ERRCODE = 'TM001';
    END IF;
    PERFORM tarmac_lock_nodes();
    PERFORM 1 FROM nodes WHERE id = p_node AND power = p_from
        AND state NOT IN ('terminated', 'interrupted', 'terminating')
        AND (p_to <> 'suspending' OR NOT EXISTS (SELECT 1 FROM job_allocations a WHERE a.node_id = p_node));
    IF NOT FOUND THEN
        RETURN false;
    END IF;
    IF p_price IS NOT NULL THEN
        PERFORM tarmac_accrue(p_epoch, p_now);
    END IF;
    UPDATE nodes SET power = p_to,
                     power_since_ms = CASE WHEN p_to = p_from THEN power_since_ms ELSE p_now END,
                     price_uusd_per_hour = coalesce(p_price, price_uusd_per_hour),
                     idle_since_ms = CASE WHEN p_idle THEN p_now ELSE idle_since_ms END,
                     unreachable_ms = CASE WHEN p_unreachable THEN p_now ELSE unreachable_ms END
     WHERE id = p_node;
    PERFORM tarmac_decide(p_now, p_kind, 'node', p_node::text, p_reason, p_inputs);
    RETURN true;
END $$;
