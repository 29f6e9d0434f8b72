-- 0012_heartbeat_batch: the heartbeat route's group commit (issue 14).
--
-- The fast path of POST /v1/nodes/{id}/heartbeat (controller/api/
-- heartbeat_batch.c) gathers the heartbeats that arrive while earlier
-- ones are in flight and hands them to this function as one jsonb array,
-- one statement and one transaction for all of them:
--   [{"i": 1, "node": 7, "now": ms, "hash": "<sha-256 of the token>",
--     "role": "agent", "report": {"jobs": [...]}, "samples": [...],
--     "gpus": [...]}, ...]
-- (report, samples and gpus as tm_api_parse_heartbeat made them).  Each
-- item does what the single statement of nodes.c does, with the same
-- answer columns, one row per item keyed by "i":
--   tok_ok  the token still holds (known, not revoked, same role, an
--           agent's own node); false: nothing was done for the item
--   state   the node's state (NULL: no such node)
--   bad     the first sample or GPU index the node lacks (nothing stored)
--   gpus    the node's GPUs (for that message)
--   answer  the route's 200 body when the node was live, else NULL
--   err_state, err_message  the item failed: its savepoint was rolled
--           back, the other items stand; the route runs it again alone
-- Items go in node id order, so that two batches in flight lock their
-- nodes' rows in one order and do not deadlock each other; each has its
-- own savepoint (a plpgsql exception block).  The route bounds a batch to
-- 64 items, within PostgreSQL's cache of 64 subtransactions a backend.
-- Generic plans (plan_cache_mode, for this call and the functions it
-- calls): every statement here looks rows up by key, and a custom plan
-- made afresh for each item was some 40% of the function's CPU time
-- (measured: backend CPU ticks for 8 batches of 49 items, 45 against 21).
CREATE FUNCTION tarmac_heartbeat_batch(p_items jsonb)
RETURNS TABLE (i int, tok_ok boolean, state text, bad text, gpus int, answer text,
               err_state text, err_message text)
LANGUAGE plpgsql SET plan_cache_mode = force_generic_plan AS $$
DECLARE
    it record;
    n record;
    v_node bigint;
    v_now bigint;
    nsamples bigint;
    finished int;
BEGIN
    FOR it IN SELECT x, (x ->> 'i')::int AS idx, (x ->> 'node')::bigint AS node
                FROM jsonb_array_elements(p_items) x ORDER BY 3, 2
    LOOP
        i := it.idx;
        tok_ok := NULL; state := NULL; bad := NULL; gpus := NULL; answer := NULL;
        err_state := NULL; err_message := NULL;
        v_node := it.node;
        v_now := (it.x ->> 'now')::bigint;
        BEGIN
            tok_ok := EXISTS (SELECT 1 FROM api_tokens t
                               WHERE t.hash = it.x ->> 'hash' AND NOT t.revoked
                                 AND t.role = it.x ->> 'role'
                                 AND (t.role <> 'agent' OR t.node_id = v_node));
            IF NOT tok_ok THEN
                RETURN NEXT;
                CONTINUE;
            END IF;
            SELECT nd.id, nd.state, nd.gpus, nd.cordoned, nd.pool INTO n FROM nodes nd WHERE nd.id = v_node;
            IF NOT FOUND THEN
                RETURN NEXT;
                CONTINUE;
            END IF;
            state := n.state;
            gpus := n.gpus;
            SELECT v.x ->> 'f' INTO bad
              FROM (SELECT s.x, s.o FROM jsonb_array_elements(it.x -> 'samples') WITH ORDINALITY s(x, o)
                    UNION ALL
                    SELECT g.x, g.o + 100000 FROM jsonb_array_elements(it.x -> 'gpus') WITH ORDINALITY g(x, o)) v
             WHERE (v.x ->> 'gpu_index')::int >= n.gpus ORDER BY v.o LIMIT 1;
            IF bad IS NOT NULL OR n.state IN ('terminated', 'interrupted') THEN
                RETURN NEXT;
                CONTINUE;
            END IF;
            WITH s AS (INSERT INTO gpu_samples (node_id, gpu_index, at_ms, util_percent, memory_used_mib,
                           uuid, memory_total_mib, temperature_c, power_w, processes)
                       SELECT v_node, (x ->> 'gpu_index')::int, coalesce((x ->> 'at_ms')::bigint, v_now),
                              (x ->> 'util_percent')::real, (x ->> 'memory_used_mib')::bigint, x ->> 'uuid',
                              (x ->> 'memory_total_mib')::bigint, (x ->> 'temperature_c')::real,
                              (x ->> 'power_w')::real, x -> 'processes'
                         FROM jsonb_array_elements(it.x -> 'samples') x
                       ON CONFLICT DO NOTHING RETURNING 1)
            SELECT count(*) INTO nsamples FROM s;
            finished := tarmac_agent_report(v_node, v_now, it.x -> 'report');
            -- As nodes.c's statement answers; the node as read before the
            -- report (which changes no state), jobs this report named left
            -- out of the assignments.
            answer := json_build_object(
                'node', json_build_object('id', n.id, 'state', n.state,
                                          'draining', n.state = 'draining' OR n.cordoned),
                'finished', finished, 'samples', nsamples,
                'assignments', (SELECT coalesce(json_agg(json_build_object('job_id', j.id,
                    'attempt', j.attempts, 'command', j.command, 'env', j.env, 'image', j.image,
                    'gpu_indices', (SELECT coalesce(json_agg(b ORDER BY b), '[]'::json)
                                      FROM generate_series(0, 15) b WHERE a.gpu_mask & (1 << b) <> 0),
                    'gpu_milli', a.gpu_milli, 'cpu_milli', a.cpu_milli, 'memory_mib', a.memory_mib,
                    'checkpointable', j.checkpointable,
                    'checkpoint_dir', CASE WHEN j.checkpointable AND p.checkpoint_dir IS NOT NULL
                                           THEN p.checkpoint_dir || '/job-' || j.id END) ORDER BY j.id),
                    '[]'::json)
                    FROM job_allocations a JOIN jobs j ON j.id = a.job_id AND j.state = 'running'
                    LEFT JOIN pools p ON p.name = n.pool
                   WHERE a.node_id = v_node
                     AND j.id NOT IN (SELECT (x ->> 'id')::bigint
                                        FROM jsonb_array_elements(it.x -> 'report' -> 'jobs') x)))::text;
            RETURN NEXT;
        EXCEPTION WHEN OTHERS THEN
            tok_ok := true; state := NULL; bad := NULL; gpus := NULL; answer := NULL;
            err_state := SQLSTATE;
            err_message := SQLERRM;
            RETURN NEXT;
        END;
    END LOOP;
END $$;
