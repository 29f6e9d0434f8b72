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
-- The route bounds a batch to 16 items (32 for an object store's rows),
-- within PostgreSQL's cache of 64 subtransactions a backend.  Generic
-- plans, as for the heartbeats: every statement here looks rows up by key.

-- A stream's chunks of one item, counted in one UPDATE of its row: a row
-- updated twice in a transaction has its foreign keys checked again at the
-- second (PostgreSQL re-checks a row its own transaction wrote), and that
-- check holds a KEY SHARE lock on the job's and the node's rows until the
-- commit, in the way of the tick's FOR UPDATE of the nodes (tarmac_accrue)
-- for as long as the batch runs.  p_bytes were just stored, the last
-- chunk at p_last_off, on a row that held p_stored; the cap (0022's rule:
-- keep the head, chunks starting before p_cap / 2, and the newest,
-- dropping the oldest of the rest, never the last chunk stored) runs
-- here, before that one UPDATE.  Returns the offsets dropped.
CREATE FUNCTION tarmac_log_stream_add(p_job bigint, p_att int, p_rnk int, p_stored bigint,
                                      p_bytes bigint, p_last_off bigint, p_now bigint, p_cap bigint)
RETURNS SETOF bigint LANGUAGE plpgsql SET plan_cache_mode = force_generic_plan AS $$
DECLARE
    d record;
    v_stored bigint := p_stored + p_bytes;
    v_dropped bigint := 0;
BEGIN
    WHILE v_stored > p_cap LOOP
        DELETE FROM job_log_chunks x
         WHERE (x.job_id, x.attempt, x.rank, x.off) IN (
                SELECT x2.job_id, x2.attempt, x2.rank, x2.off FROM job_log_chunks x2
                 WHERE x2.job_id = p_job AND x2.attempt = p_att AND x2.rank = p_rnk
                   AND x2.off >= p_cap / 2 AND x2.off < p_last_off
                 ORDER BY x2.off LIMIT 1)
        RETURNING x.off, x.len INTO d;
        EXIT WHEN NOT FOUND;
        v_stored := v_stored - d.len;
        v_dropped := v_dropped + d.len;
        RETURN NEXT d.off;
    END LOOP;
    UPDATE job_log_streams t SET next_offset = t.next_offset + p_bytes, stored_bytes = v_stored,
           dropped_bytes = t.dropped_bytes + v_dropped, updated_ms = p_now
     WHERE t.job_id = p_job AND t.attempt = p_att AND t.rank = p_rnk;
END $$;

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
    -- The stream the item's last chunks went to, not yet counted in its
    -- row (tarmac_log_stream_add): its key, what its row said, and since.
    v_sjob bigint;
    v_satt int;
    v_srnk int;
    v_snext bigint;
    v_sstored bigint;
    v_sbytes bigint;
    v_slast bigint;
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
        v_sjob := NULL;
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
                IF v_sjob IS NOT NULL AND (v_sjob, v_satt, v_srnk) IS DISTINCT FROM (c.job, c.att, c.rnk) THEN
                    FOR d IN SELECT o.off FROM tarmac_log_stream_add(v_sjob, v_satt, v_srnk, v_sstored, v_sbytes,
                                                                     v_slast, v_now, v_cap) o(off) LOOP
                        dr_job := dr_job || v_sjob; dr_attempt := dr_attempt || v_satt;
                        dr_rank := dr_rank || v_srnk; dr_off := dr_off || d.off;
                    END LOOP;
                    v_sjob := NULL;
                END IF;
                IF v_sjob IS NULL THEN
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
                    v_sjob := c.job; v_satt := c.att; v_srnk := c.rnk;
                    v_snext := s.next_offset; v_sstored := s.stored_bytes; v_sbytes := 0;
                END IF;
                IF c.off > v_snext THEN
                    RAISE EXCEPTION USING ERRCODE = 'TMLOG',
                          MESSAGE = 'skips ahead of what is stored: the next offset is ' || v_snext,
                          DETAIL = 'offset', HINT = c.idx || ' ' || v_snext;
                END IF;
                IF c.off < v_snext THEN
                    RAISE EXCEPTION USING ERRCODE = 'TMLOG',
                          MESSAGE = 'overlaps what is stored: the next offset is ' || v_snext,
                          DETAIL = 'offset', HINT = c.idx || ' ' || v_snext;
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
                v_snext := v_snext + c.len;
                v_sbytes := v_sbytes + c.len;
                v_slast := c.off;
                ok_k := ok_k || c.idx;
                ok_job := ok_job || c.job;
                ok_attempt := ok_attempt || c.att;
                ok_rank := ok_rank || c.rnk;
                ok_next := ok_next || v_snext;
            END LOOP;
            IF v_sjob IS NOT NULL THEN
                FOR d IN SELECT o.off FROM tarmac_log_stream_add(v_sjob, v_satt, v_srnk, v_sstored, v_sbytes,
                                                                 v_slast, v_now, v_cap) o(off) LOOP
                    dr_job := dr_job || v_sjob; dr_attempt := dr_attempt || v_satt;
                    dr_rank := dr_rank || v_srnk; dr_off := dr_off || d.off;
                END LOOP;
                v_sjob := NULL;
            END IF;
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
