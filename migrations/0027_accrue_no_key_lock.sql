-- 0027_accrue_no_key_lock: the ledger locks the billed nodes as an UPDATE
-- of their non-key columns does (FOR NO KEY UPDATE), not FOR UPDATE.
--
-- FOR UPDATE also waits for every KEY SHARE lock on the row, and a row
-- that references a node takes one on it until its transaction commits:
-- a heartbeat's GPU samples, a log batch's stream rows.  So each tick's
-- tarmac_accrue (0003, wrapped by 0006 behind the nodes' advisory lock)
-- waited behind whatever heartbeat or log batch was in flight, and under
-- a steady stream of job output the tick's duration followed the ingest's
-- transactions.  The ledger never changes a node's key, so NO KEY UPDATE
-- is the lock it needs: it still excludes another accrual and every
-- writer of the node's row, and no longer excludes rows that merely
-- reference the node.  The body is 0003's otherwise, word for word.

CREATE OR REPLACE FUNCTION tarmac_accrue_base(p_epoch bigint, p_now bigint)
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
    FOR n IN SELECT * FROM nodes WHERE NOT accrual_done AND billed_from_ms IS NOT NULL FOR NO KEY UPDATE
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
