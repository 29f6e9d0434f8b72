-- 0003_ledger: the spend ledger is written.
--
-- tarmac_accrue(epoch, now) appends to spend (append-only, 0001) what each
-- billed node has cost since it was last accrued.  A slice (one tick long)
-- is valued in micro-dollars and split by the GPU share each team's jobs
-- hold on the node now (accurate to the tick); what no job holds is idle
-- time charged to the pool.  The ledger holds whole cents: each (node,
-- team) keeps its sub-cent remainder in spend_carry, so a team using a
-- sliver of a GPU for seconds at a time is still charged, and no money is
-- created or lost: charged cents plus carried remainders equal the node's
-- exact cost.  A terminated node gets its last slice, then is done.  Fenced
-- by the leader epoch like every other write of the tick.

ALTER TABLE nodes ADD COLUMN accrued_to_ms bigint;
ALTER TABLE nodes ADD COLUMN accrual_done boolean NOT NULL DEFAULT false;
CREATE INDEX nodes_accrual ON nodes (id) WHERE NOT accrual_done AND billed_from_ms IS NOT NULL;
CREATE INDEX spend_node ON spend (node_id);

-- Sub-cent remainders, in micro-dollars; team '' is the pool's idle time.
CREATE TABLE spend_carry (
    node_id bigint NOT NULL REFERENCES nodes (id),
    team    text NOT NULL,
    uusd    numeric NOT NULL CHECK (uusd >= 0 AND uusd < 10000),
    PRIMARY KEY (node_id, team)
);

CREATE FUNCTION tarmac_charge(p_node bigint, p_pool text, p_team text, p_at bigint, p_period text,
                              p_uusd numeric)
RETURNS int LANGUAGE plpgsql AS $$
DECLARE
    total numeric;
    cents bigint;
BEGIN
    SELECT p_uusd + coalesce((SELECT uusd FROM spend_carry
                               WHERE node_id = p_node AND team = coalesce(p_team, '')), 0)
      INTO total;
    cents := floor(total / 10000);
    INSERT INTO spend_carry (node_id, team, uusd) VALUES (p_node, coalesce(p_team, ''), total - cents * 10000)
    ON CONFLICT (node_id, team) DO UPDATE SET uusd = EXCLUDED.uusd;
    IF cents > 0 THEN
        INSERT INTO spend (at_ms, period, node_id, pool, team, kind, cents)
        VALUES (p_at, p_period, p_node, p_pool, p_team, CASE WHEN p_team IS NULL THEN 'idle' ELSE 'job' END,
                cents);
        RETURN 1;
    END IF;
    RETURN 0;
END $$;

CREATE FUNCTION tarmac_accrue(p_epoch bigint, p_now bigint)
RETURNS int LANGUAGE plpgsql AS $$
DECLARE
    n record;
    t record;
    since bigint;
    upto bigint;
    slice numeric;
    assigned numeric;
    part numeric;
    per text;
    rows int := 0;
BEGIN
    PERFORM 1 FROM leader WHERE id = 1 AND epoch = p_epoch FOR SHARE;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'leader epoch % is stale', p_epoch USING ERRCODE = 'TM001';
    END IF;
    FOR n IN SELECT * FROM nodes WHERE NOT accrual_done AND billed_from_ms IS NOT NULL FOR UPDATE
    LOOP
        since := coalesce(n.accrued_to_ms, n.billed_from_ms);
        upto := least(p_now, coalesce(n.terminated_ms, p_now));
        IF upto > since THEN
            -- micro-dollars per hour x ms / 3.6e6 ms per hour
            slice := n.price_uusd_per_hour::numeric * (upto - since) / 3600000;
            per := to_char(to_timestamp(since / 1000.0) AT TIME ZONE 'UTC', 'YYYY-MM');
            assigned := 0;
            FOR t IN SELECT j.team,
                            sum(a.gpu_milli::numeric * length(replace(a.gpu_mask::bit(16)::text, '0', '')))
                                AS milli
                       FROM job_allocations a JOIN jobs j ON j.id = a.job_id
                      WHERE a.node_id = n.id GROUP BY j.team ORDER BY j.team
            LOOP
                part := least(slice - assigned, slice * t.milli / (n.gpus * 1000.0));
                assigned := assigned + part;
                rows := rows + tarmac_charge(n.id, n.pool, t.team, upto, per, part);
            END LOOP;
            rows := rows + tarmac_charge(n.id, n.pool, NULL, upto, per, slice - assigned);
        END IF;
        UPDATE nodes SET accrued_to_ms = greatest(upto, since),
                         accrual_done = (terminated_ms IS NOT NULL AND greatest(upto, since) >= terminated_ms)
         WHERE id = n.id;
    END LOOP;
    RETURN rows;
END $$;
