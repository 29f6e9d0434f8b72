-- 0022_logs: every byte of a job's output, shipped by the node agents.
--
-- A stream is one process's output: a job's attempt on one rank.  Its row
-- (job_log_streams) counts what was received (next_offset: the offset the
-- next chunk must start at), what is kept and what the cap dropped; its
-- chunks (job_log_chunks) are the index of the bytes, each (offset,
-- length), with the bytes in data (logs.store: postgres) or NULL when an
-- object store keeps them (controller/api/log_store.h).  The offset
-- accounting is here, in one transaction per batch, whatever the store:
-- a chunk is accepted only at next_offset, so nothing is stored twice and
-- no gap is left unsaid.
--
-- Who may ship: the node that opened the stream.  A stream opens with its
-- first chunk (offset 0) while the attempt is current on that node (0010's
-- tarmac_agent_attempt_current) and the rank is that node's rank among the
-- job's allocations (the order of 0020's tarmac_rendezvous).  The agent
-- ships a job's output before it reports the exit, so a stream is always
-- opened while its attempt runs; once open, the same node finishes it
-- after the attempt ended.

CREATE TABLE job_log_streams (
    job_id          bigint NOT NULL REFERENCES jobs (id) ON DELETE CASCADE,
    attempt         int NOT NULL CHECK (attempt >= 0),
    rank            int NOT NULL CHECK (rank >= 0),
    node_id         bigint NOT NULL REFERENCES nodes (id),
    next_offset     bigint NOT NULL DEFAULT 0 CHECK (next_offset >= 0),
    stored_bytes    bigint NOT NULL DEFAULT 0 CHECK (stored_bytes >= 0),
    dropped_bytes   bigint NOT NULL DEFAULT 0 CHECK (dropped_bytes >= 0),
    opened_ms       bigint NOT NULL,
    updated_ms      bigint NOT NULL,
    PRIMARY KEY (job_id, attempt, rank)
);
CREATE INDEX job_log_streams_updated ON job_log_streams (updated_ms);

CREATE TABLE job_log_chunks (
    job_id      bigint NOT NULL,
    attempt     int NOT NULL,
    rank        int NOT NULL,
    off         bigint NOT NULL CHECK (off >= 0),
    len         int NOT NULL CHECK (len > 0),
    data        bytea CHECK (data IS NULL OR length(data) = len),
    PRIMARY KEY (job_id, attempt, rank, off),
    FOREIGN KEY (job_id, attempt, rank) REFERENCES job_log_streams (job_id, attempt, rank)
        ON DELETE CASCADE
);

-- lz4 where the server has it (PostgreSQL built --with-lz4): output is
-- mostly text, and lz4 takes bytes that do not compress at a fraction of
-- pglz's cost.
DO $$
BEGIN
    ALTER TABLE job_log_chunks ALTER COLUMN data SET COMPRESSION lz4;
EXCEPTION WHEN feature_not_supported OR invalid_parameter_value THEN
    NULL;
END $$;

-- One batch of chunks from node p_node, in one transaction.  p_chunks is
-- [{"job", "attempt", "rank", "offset", "len", "data"?}] in order (data:
-- base64, absent when an object store took the bytes); p_cap is
-- logs.max_bytes_per_job.  Either every chunk is stored, one row per chunk
-- (i, its stream, next_offset after it), plus one row per chunk the cap
-- dropped (i = -1, dropped_off: its offset, for an object store to delete),
-- or nothing is, and one row names the first refused chunk (i, field,
-- message, and next_offset: what the stream expects).
--
-- The cap keeps the head (chunks starting before p_cap / 2) and the newest
-- chunks after it, dropping the oldest of those while the stream keeps more
-- than p_cap; dropped_bytes counts them, and the reader shows the gap with
-- a marker.
CREATE FUNCTION tarmac_log_ingest(p_node bigint, p_now bigint, p_chunks jsonb, p_cap bigint)
RETURNS TABLE (i int, job_id bigint, attempt int, rank int, next_offset bigint,
               field text, message text, dropped_off bigint)
LANGUAGE plpgsql AS $$
DECLARE
    c record;
    s record;
    j record;
    v_rank int;
    v_cur boolean;
    d record;
    ok_i int[] := '{}';
    ok_job bigint[] := '{}';
    ok_attempt int[] := '{}';
    ok_rank int[] := '{}';
    ok_next bigint[] := '{}';
    dr_job bigint[] := '{}';
    dr_attempt int[] := '{}';
    dr_rank int[] := '{}';
    dr_off bigint[] := '{}';
    e_i int;
    e_field text;
    e_msg text;
    e_next bigint;
    v_detail text;
    v_hint text;
BEGIN
    IF NOT EXISTS (SELECT 1 FROM nodes n WHERE n.id = p_node) THEN
        i := NULL; field := 'node'; message := 'no such node'; next_offset := 0;
        RETURN NEXT;
        RETURN;
    END IF;
    BEGIN
        FOR c IN SELECT (x ->> 'job')::bigint AS job, (x ->> 'attempt')::int AS att,
                        (x ->> 'rank')::int AS rnk, (x ->> 'offset')::bigint AS off,
                        (x ->> 'len')::int AS len, x ->> 'data' AS data, (o - 1)::int AS idx
                   FROM jsonb_array_elements(p_chunks) WITH ORDINALITY a(x, o) ORDER BY o
        LOOP
            SELECT * INTO s FROM job_log_streams t
             WHERE t.job_id = c.job AND t.attempt = c.att AND t.rank = c.rnk FOR UPDATE;
            IF NOT FOUND THEN
                SELECT jb.id, jb.attempts, jb.state INTO j FROM jobs jb WHERE jb.id = c.job;
                IF NOT FOUND THEN
                    RAISE EXCEPTION USING ERRCODE = 'TMLOG', MESSAGE = 'no such job',
                          DETAIL = 'job', HINT = c.idx || ' 0';
                END IF;
                v_cur := tarmac_agent_attempt_current(p_node, c.job, c.att);
                IF NOT v_cur AND j.attempts <> c.att THEN
                    RAISE EXCEPTION USING ERRCODE = 'TMLOG',
                          MESSAGE = 'not the job''s current attempt (' || j.attempts || '): a stale attempt ships no output',
                          DETAIL = 'attempt', HINT = c.idx || ' 0';
                END IF;
                IF NOT v_cur THEN
                    RAISE EXCEPTION USING ERRCODE = 'TMLOG',
                          MESSAGE = 'the job''s attempt does not run on this node',
                          DETAIL = 'job', HINT = c.idx || ' 0';
                END IF;
                SELECT count(*) - 1 INTO v_rank FROM job_allocations a
                 WHERE a.job_id = c.job AND a.node_id <= p_node;
                IF v_rank <> c.rnk THEN
                    RAISE EXCEPTION USING ERRCODE = 'TMLOG',
                          MESSAGE = 'this node runs rank ' || v_rank || ' of the job',
                          DETAIL = 'rank', HINT = c.idx || ' 0';
                END IF;
                IF c.off <> 0 THEN
                    RAISE EXCEPTION USING ERRCODE = 'TMLOG',
                          MESSAGE = 'nothing is stored for this stream yet: its first chunk starts at offset 0',
                          DETAIL = 'offset', HINT = c.idx || ' 0';
                END IF;
                INSERT INTO job_log_streams (job_id, attempt, rank, node_id, opened_ms, updated_ms)
                VALUES (c.job, c.att, c.rnk, p_node, p_now, p_now);
                SELECT * INTO s FROM job_log_streams t
                 WHERE t.job_id = c.job AND t.attempt = c.att AND t.rank = c.rnk FOR UPDATE;
            ELSIF s.node_id <> p_node THEN
                RAISE EXCEPTION USING ERRCODE = 'TMLOG',
                      MESSAGE = 'this output is shipped by node ' || s.node_id || ', not this one',
                      DETAIL = 'job', HINT = c.idx || ' ' || s.next_offset;
            END IF;
            IF c.off > s.next_offset THEN
                RAISE EXCEPTION USING ERRCODE = 'TMLOG',
                      MESSAGE = 'skips ahead of what is stored: the next offset is ' || s.next_offset,
                      DETAIL = 'offset', HINT = c.idx || ' ' || s.next_offset;
            END IF;
            IF c.off < s.next_offset THEN
                RAISE EXCEPTION USING ERRCODE = 'TMLOG',
                      MESSAGE = 'overlaps what is stored: the next offset is ' || s.next_offset,
                      DETAIL = 'offset', HINT = c.idx || ' ' || s.next_offset;
            END IF;
            INSERT INTO job_log_chunks (job_id, attempt, rank, off, len, data)
            VALUES (c.job, c.att, c.rnk, c.off, c.len,
                    CASE WHEN c.data IS NULL THEN NULL ELSE decode(c.data, 'base64') END);
            UPDATE job_log_streams t SET next_offset = t.next_offset + c.len,
                   stored_bytes = t.stored_bytes + c.len, updated_ms = p_now
             WHERE t.job_id = c.job AND t.attempt = c.att AND t.rank = c.rnk
             RETURNING * INTO s;
            WHILE s.stored_bytes > p_cap LOOP
                DELETE FROM job_log_chunks k
                 WHERE (k.job_id, k.attempt, k.rank, k.off) IN (
                        SELECT k2.job_id, k2.attempt, k2.rank, k2.off FROM job_log_chunks k2
                         WHERE k2.job_id = c.job AND k2.attempt = c.att AND k2.rank = c.rnk
                           AND k2.off >= p_cap / 2 AND k2.off < c.off
                         ORDER BY k2.off LIMIT 1)
                RETURNING k.off, k.len INTO d;
                EXIT WHEN NOT FOUND;
                UPDATE job_log_streams t SET stored_bytes = t.stored_bytes - d.len,
                       dropped_bytes = t.dropped_bytes + d.len
                 WHERE t.job_id = c.job AND t.attempt = c.att AND t.rank = c.rnk
                 RETURNING * INTO s;
                dr_job := dr_job || c.job;
                dr_attempt := dr_attempt || c.att;
                dr_rank := dr_rank || c.rnk;
                dr_off := dr_off || d.off;
            END LOOP;
            ok_i := ok_i || c.idx;
            ok_job := ok_job || c.job;
            ok_attempt := ok_attempt || c.att;
            ok_rank := ok_rank || c.rnk;
            ok_next := ok_next || s.next_offset;
        END LOOP;
    EXCEPTION WHEN SQLSTATE 'TMLOG' THEN
        GET STACKED DIAGNOSTICS e_msg = MESSAGE_TEXT, v_detail = PG_EXCEPTION_DETAIL,
                                v_hint = PG_EXCEPTION_HINT;
        e_field := v_detail;
        e_i := split_part(v_hint, ' ', 1)::int;
        e_next := split_part(v_hint, ' ', 2)::bigint;
        i := e_i; field := e_field; message := e_msg; next_offset := e_next;
        job_id := NULL; attempt := NULL; rank := NULL; dropped_off := NULL;
        RETURN NEXT;
        RETURN;
    END;
    FOR k IN 1 .. coalesce(array_length(ok_i, 1), 0) LOOP
        i := ok_i[k]; job_id := ok_job[k]; attempt := ok_attempt[k]; rank := ok_rank[k];
        next_offset := ok_next[k]; field := NULL; message := NULL; dropped_off := NULL;
        RETURN NEXT;
    END LOOP;
    FOR k IN 1 .. coalesce(array_length(dr_off, 1), 0) LOOP
        i := -1; job_id := dr_job[k]; attempt := dr_attempt[k]; rank := dr_rank[k];
        next_offset := NULL; field := NULL; message := NULL; dropped_off := dr_off[k];
        RETURN NEXT;
    END LOOP;
END $$;

-- Retention (logs.retention): the leader deletes, per call, the chunks of
-- at most p_batch streams last written before p_before, and those streams.
-- Returns the deleted chunks whose bytes an object store holds (data NULL),
-- for it to delete; the PostgreSQL store's go with their rows.
CREATE FUNCTION tarmac_prune_logs(p_before bigint, p_batch int)
RETURNS TABLE (job_id bigint, attempt int, rank int, off bigint)
LANGUAGE sql AS $$
    WITH s AS (SELECT t.job_id, t.attempt, t.rank FROM job_log_streams t
                WHERE t.updated_ms < p_before ORDER BY t.updated_ms LIMIT p_batch
                FOR UPDATE SKIP LOCKED),
         c AS (SELECT k.job_id, k.attempt, k.rank, k.off FROM job_log_chunks k JOIN s
                 ON k.job_id = s.job_id AND k.attempt = s.attempt AND k.rank = s.rank
                WHERE k.data IS NULL),
         d AS (DELETE FROM job_log_streams t USING s
                WHERE t.job_id = s.job_id AND t.attempt = s.attempt AND t.rank = s.rank
                RETURNING 1)
    SELECT c.job_id, c.attempt, c.rank, c.off FROM c;
$$;
