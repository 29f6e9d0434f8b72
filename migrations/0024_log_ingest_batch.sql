-- 0024_log_ingest_batch: job output through the group commit, with its
-- bytes as bytes.
--
-- POST /v1/nodes/{id}/logs (controller/api/logs.c) hands each batch of
-- chunks to the group commit (controller/io/group_commit.h), which gathers
-- the batches that arrive while earlier ones are in flight into one
-- statement and one transaction:
--   p_items  [{"i": 1, "node": 7, "now": ms, "cap": bytes,
--              "chunks": [[job, attempt, rank, offset, len], ...]}, ...]
--   p_data   the chunks' bytes, every item's in order, one after another
--            (a binary bytea parameter: no base64 to decode here, no
--            jsonb to parse around it); NULL when an object store keeps
--            them (the index rows then hold no bytes)
--   p_check  true: run every check and roll the item back whatever the
--            outcome (an object store asks first, so that a chunk the
--            index refuses never reaches the bucket)
-- Each item is what 0022's tarmac_log_ingest() took in one call, with the
-- same rules (those are kept here, once: this replaces it) and in its own
-- savepoint (a plpgsql exception block): one item refused leaves the
-- others stored.  Rows, ordered by i:
--   stored: one per chunk (k: its index in the item, its stream and
--           next_offset after it), then one per chunk the cap dropped
--           (k = -1, dropped_off: its offset, for an object store to delete)
--   refused: one row, k naming the first refused chunk (NULL for the node),
--           field, message and next_offset (what the stream expects)
--   failed: one row with err_state and message (a deadlock, a bug): the
--           item was rolled back, the caller answers "retry later"
--   p_check and every check passed: no row.
-- The route bounds a batch to 32 items, within PostgreSQL's cache of 64
-- subtransactions a backend.  Generic plans, as for the heartbeats: every
-- statement here looks rows up by key.
CREATE FUNCTION tarmac_log_ingest_batch(p_items jsonb, p_data bytea, p_check boolean)
RETURNS TABLE (i int, k int, job_id bigint, attempt int, rank int, next_offset bigint,
               field text, message text, dropped_off bigint, err_state text)
LANGUAGE plpgsql SET plan_cache_mode = force_generic_plan AS $$
DECLARE
    it record;
    c record;
    s record;
    j record;
    d record;
    v_node bigint;
    v_now bigint;
    v_cap bigint;
    v_pos int := 0;
    v_next_pos int;
    v_data bytea;
    v_rank int;
    v_cur boolean;
    ok_k int[];
    ok_job bigint[];
    ok_attempt int[];
    ok_rank int[];
    ok_next bigint[];
    dr_job bigint[];
    dr_attempt int[];
    dr_rank int[];
    dr_off bigint[];
    v_detail text;
    v_hint text;
    v_msg text;
    v_state text;
BEGIN
    FOR it IN SELECT (x ->> 'i')::int AS ord, x AS item FROM jsonb_array_elements(p_items) a(x)
               ORDER BY (x ->> 'i')::int
    LOOP
        v_node := (it.item ->> 'node')::bigint;
        v_now := (it.item ->> 'now')::bigint;
        v_cap := (it.item ->> 'cap')::bigint;
        -- Where the next item's bytes begin, whatever becomes of this one.
        SELECT v_pos + coalesce(sum((e ->> 4)::int), 0) INTO v_next_pos
          FROM jsonb_array_elements(it.item -> 'chunks') e;
        ok_k := '{}'; ok_job := '{}'; ok_attempt := '{}'; ok_rank := '{}'; ok_next := '{}';
        dr_job := '{}'; dr_attempt := '{}'; dr_rank := '{}'; dr_off := '{}';
        IF NOT EXISTS (SELECT 1 FROM nodes n WHERE n.id = v_node) THEN
            i := it.ord; k := NULL; job_id := NULL; attempt := NULL; rank := NULL;
            next_offset := 0; field := 'node'; message := 'no such node'; dropped_off := NULL;
            err_state := NULL;
            RETURN NEXT;
            v_pos := v_next_pos;
            CONTINUE;
        END IF;
        BEGIN
            FOR c IN SELECT (e ->> 0)::bigint AS job, (e ->> 1)::int AS att, (e ->> 2)::int AS rnk,
                            (e ->> 3)::bigint AS off, (e ->> 4)::int AS len, (o - 1)::int AS idx
                       FROM jsonb_array_elements(it.item -> 'chunks') WITH ORDINALITY a(e, o) ORDER BY o
            LOOP
                SELECT * INTO s FROM job_log_streams t
                 WHERE t.job_id = c.job AND t.attempt = c.att AND t.rank = c.rnk FOR UPDATE;
                IF NOT FOUND THEN
                    SELECT jb.id, jb.attempts, jb.state INTO j FROM jobs jb WHERE jb.id = c.job;
                    IF NOT FOUND THEN
                        RAISE EXCEPTION USING ERRCODE = 'TMLOG', MESSAGE = 'no such job',
                              DETAIL = 'job', HINT = c.idx || ' 0';
                    END IF;
                    v_cur := tarmac_agent_attempt_current(v_node, c.job, c.att);
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
                     WHERE a.job_id = c.job AND a.node_id <= v_node;
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
                    VALUES (c.job, c.att, c.rnk, v_node, v_now, v_now);
                    SELECT * INTO s FROM job_log_streams t
                     WHERE t.job_id = c.job AND t.attempt = c.att AND t.rank = c.rnk FOR UPDATE;
                ELSIF s.node_id <> v_node THEN
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
                v_data := NULL;
                IF p_data IS NOT NULL THEN
                    IF length(p_data) < v_pos + c.len THEN
                        RAISE EXCEPTION 'the batch holds % bytes, short of its chunks'' lengths', length(p_data);
                    END IF;
                    v_data := substring(p_data FROM v_pos + 1 FOR c.len);
                END IF;
                v_pos := v_pos + c.len;
                INSERT INTO job_log_chunks (job_id, attempt, rank, off, len, data)
                VALUES (c.job, c.att, c.rnk, c.off, c.len, v_data);
                UPDATE job_log_streams t SET next_offset = t.next_offset + c.len,
                       stored_bytes = t.stored_bytes + c.len, updated_ms = v_now
                 WHERE t.job_id = c.job AND t.attempt = c.att AND t.rank = c.rnk
                 RETURNING * INTO s;
                -- The cap keeps the head (chunks starting before v_cap / 2)
                -- and the newest chunks after it (0022).
                WHILE s.stored_bytes > v_cap LOOP
                    DELETE FROM job_log_chunks x
                     WHERE (x.job_id, x.attempt, x.rank, x.off) IN (
                            SELECT x2.job_id, x2.attempt, x2.rank, x2.off FROM job_log_chunks x2
                             WHERE x2.job_id = c.job AND x2.attempt = c.att AND x2.rank = c.rnk
                               AND x2.off >= v_cap / 2 AND x2.off < c.off
                             ORDER BY x2.off LIMIT 1)
                    RETURNING x.off, x.len INTO d;
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
                ok_k := ok_k || c.idx;
                ok_job := ok_job || c.job;
                ok_attempt := ok_attempt || c.att;
                ok_rank := ok_rank || c.rnk;
                ok_next := ok_next || s.next_offset;
            END LOOP;
            IF p_check THEN
                RAISE EXCEPTION USING ERRCODE = 'TMCHK', MESSAGE = 'checked';
            END IF;
        EXCEPTION
            WHEN SQLSTATE 'TMCHK' THEN
                v_pos := v_next_pos;
                CONTINUE;
            WHEN SQLSTATE 'TMLOG' THEN
                GET STACKED DIAGNOSTICS v_msg = MESSAGE_TEXT, v_detail = PG_EXCEPTION_DETAIL,
                                        v_hint = PG_EXCEPTION_HINT;
                i := it.ord; k := split_part(v_hint, ' ', 1)::int;
                job_id := NULL; attempt := NULL; rank := NULL;
                next_offset := split_part(v_hint, ' ', 2)::bigint;
                field := v_detail; message := v_msg; dropped_off := NULL; err_state := NULL;
                RETURN NEXT;
                v_pos := v_next_pos;
                CONTINUE;
            WHEN OTHERS THEN
                GET STACKED DIAGNOSTICS v_msg = MESSAGE_TEXT, v_state = RETURNED_SQLSTATE;
                i := it.ord; k := NULL; job_id := NULL; attempt := NULL; rank := NULL;
                next_offset := NULL; field := NULL; message := v_msg; dropped_off := NULL;
                err_state := v_state;
                RETURN NEXT;
                v_pos := v_next_pos;
                CONTINUE;
        END;
        v_pos := v_next_pos;
        FOR m IN 1 .. coalesce(array_length(ok_k, 1), 0) LOOP
            i := it.ord; k := ok_k[m]; job_id := ok_job[m]; attempt := ok_attempt[m]; rank := ok_rank[m];
            next_offset := ok_next[m]; field := NULL; message := NULL; dropped_off := NULL;
            err_state := NULL;
            RETURN NEXT;
        END LOOP;
        FOR m IN 1 .. coalesce(array_length(dr_off, 1), 0) LOOP
            i := it.ord; k := -1; job_id := dr_job[m]; attempt := dr_attempt[m]; rank := dr_rank[m];
            next_offset := NULL; field := NULL; message := NULL; dropped_off := dr_off[m];
            err_state := NULL;
            RETURN NEXT;
        END LOOP;
    END LOOP;
END $$;

-- The rules live in tarmac_log_ingest_batch() now: one copy of them.
DROP FUNCTION tarmac_log_ingest(bigint, bigint, jsonb, bigint);
