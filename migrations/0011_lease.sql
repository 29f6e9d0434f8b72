-- 0011_lease: a leader that stops making progress loses leadership, and
-- POST /v1/jobs may carry an Idempotency-Key (docs/ha.md).
--
-- The advisory lock (store.c) says that the leader's session exists, not
-- that the process behind it is alive: a leader stopped by SIGSTOP, or
-- stuck in a tick, keeps it for ever.  The lease is a row with an expiry on
-- the database's clock (clock_timestamp(): the controllers' clocks may run
-- fast, and differ), renewed by the leader in the same transaction as its
-- tick's writes (tarmac_lease_renew inside the accrue and apply statements).
-- A replica that finds the lock held and the lease expired ends the holder's
-- session (tarmac_lease_break: pg_terminate_backend, which needs the same
-- role or pg_signal_backend) and takes the lock; the epoch bump then fences
-- off whatever the old leader still sends once it wakes (TM001).
CREATE TABLE leader_lease (
    id          int PRIMARY KEY CHECK (id = 1),
    epoch       bigint NOT NULL,
    holder      text NOT NULL,
    expires_at  timestamptz NOT NULL,
    renewed_at  timestamptz NOT NULL
);
INSERT INTO leader_lease (id, epoch, holder, expires_at, renewed_at)
VALUES (1, 0, '', '-infinity', '-infinity');

-- Lock and epoch in one statement: the lease row is locked first, so a
-- replica breaking an expired lease (which locks it too) never sees the
-- lock taken but the lease not yet renewed.  No rows: someone else leads.
-- The session lock outlives a failed transaction, so it is given back if
-- anything after it fails.
CREATE FUNCTION tarmac_lead(p_holder text, p_now_ms bigint, p_lease_ms int)
RETURNS TABLE (epoch bigint, acquired_ms bigint) LANGUAGE plpgsql AS $$
DECLARE
    e bigint;
    a bigint;
BEGIN
    PERFORM 1 FROM leader_lease l WHERE l.id = 1 FOR UPDATE;
    IF NOT pg_try_advisory_lock(x'746d6c656164'::bigint) THEN
        RETURN;
    END IF;
    BEGIN
        UPDATE leader l SET epoch = l.epoch + 1, holder = p_holder,
               acquired_ms = greatest(p_now_ms, tarmac_latest_ms())
         WHERE l.id = 1 RETURNING l.epoch, l.acquired_ms INTO e, a;
        UPDATE leader_lease l SET epoch = e, holder = p_holder,
               expires_at = clock_timestamp() + p_lease_ms * interval '1 millisecond',
               renewed_at = clock_timestamp()
         WHERE l.id = 1;
    EXCEPTION WHEN OTHERS THEN
        PERFORM pg_advisory_unlock(x'746d6c656164'::bigint);
        RAISE;
    END;
    epoch := e;
    acquired_ms := a;
    RETURN NEXT;
END
$$;

-- The leader's heartbeat, inside its tick's write: refused (TM001) when
-- the epoch moved on.  Keys older than a day go at the same time, a few at
-- a time (the index on created_at answers).
CREATE FUNCTION tarmac_lease_renew(p_epoch bigint, p_lease_ms int) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
    IF p_lease_ms <= 0 THEN
        RETURN;
    END IF;
    UPDATE leader_lease SET expires_at = clock_timestamp() + p_lease_ms * interval '1 millisecond',
           renewed_at = clock_timestamp()
     WHERE id = 1 AND epoch = p_epoch;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'leader epoch % is stale', p_epoch USING ERRCODE = 'TM001';
    END IF;
    DELETE FROM api_idempotency WHERE ctid IN (SELECT ctid FROM api_idempotency
        WHERE created_at < clock_timestamp() - interval '24 hours' LIMIT 1000);
END
$$;

-- A replica that does not lead: if the lease expired, end every session
-- holding the leader lock (waiting up to a second for each to go) and say
-- how many went.  0 when the lease is live or nobody holds the lock.
CREATE FUNCTION tarmac_lease_break() RETURNS int LANGUAGE plpgsql AS $$
DECLARE
    n int := 0;
    pid int;
BEGIN
    PERFORM 1 FROM leader_lease WHERE id = 1 AND expires_at < clock_timestamp() FOR UPDATE;
    IF NOT FOUND THEN
        RETURN 0;
    END IF;
    FOR pid IN SELECT l.pid FROM pg_locks l
        WHERE l.locktype = 'advisory' AND l.granted AND l.database = (SELECT oid FROM pg_database
              WHERE datname = current_database())
          AND l.classid = x'746d'::int::oid AND l.objid = x'6c656164'::int::oid AND l.objsubid = 1
          AND l.pid <> pg_backend_pid()
    LOOP
        IF pg_terminate_backend(pid, 1000) THEN
            n := n + 1;
        END IF;
    END LOOP;
    RETURN n;
END
$$;

-- Idempotency-Key of POST /v1/jobs: per token (its hash), the key, what
-- the body hashed to and the first answer.  A second request with the
-- same key and token gets that answer and creates nothing; another body
-- under the same key is refused (422).  Times are real (the database's),
-- not the controller's clock: a day means a day.
CREATE TABLE api_idempotency (
    token_hash  text NOT NULL,
    key         text NOT NULL CHECK (length(key) BETWEEN 1 AND 255),
    body_hash   text NOT NULL,
    job_id      bigint NOT NULL,
    response    text NOT NULL,
    created_at  timestamptz NOT NULL DEFAULT clock_timestamp(),
    PRIMARY KEY (token_hash, key)
);
CREATE INDEX api_idempotency_created ON api_idempotency (created_at);
