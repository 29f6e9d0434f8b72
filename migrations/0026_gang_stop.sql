-- 0026_gang_stop: a gang's members are stopped together (docs/multi-node.md,
-- "Stopping together").
--
-- An attempt of a job of two or more nodes stops (a checkpoint or another
-- requeue, a member failed, a node lost, a cancel) by leaving every
-- member's assignments at once; but each agent hears that only at its own
-- next heartbeat, up to a heartbeat period after another member's.  A
-- checkpointable gang's ranks must enter their collective save together,
-- so each member is told a common stop time instead, far enough ahead that
-- every member's agent has heard it by then, and signals its member at
-- that moment, whether the controller is still reachable or not.
--
-- Telling the members to ask faster (as the start barrier does) cannot
-- serve here: a running member does not know its gang is stopping until it
-- asks, and every running member asking every 200 ms would multiply the
-- heartbeats of the whole fleet.  A common time costs no extra heartbeat;
-- the price is a stop later by at most one heartbeat period and a slack.
--
-- nodes.heartbeat_ms: the node's agent's --heartbeat-period, as its
-- heartbeat says ("heartbeat_ms"); NULL for an agent that does not say
-- (10 s, the agent's default, is assumed).  A stop waits for at most a
-- minute of it, so that one agent claiming a long period (or a long
-- period set by mistake) cannot hold its gangs' stops for long.
--
-- gang_stops: one row per stopped attempt of a gang, written by the first
-- member's heartbeat that still runs it once the attempt no longer runs
-- there (tarmac_gang_stops below), so that every stop path (requeue,
-- failure, cancel, fencing) is covered without each knowing of it.  Its
-- stop_at_ms is computed then, once, and every member is answered the same:
--   the latest next heartbeat expected of the members still to hear (their
--   last heartbeat plus their period), plus a slack of 1 s and a tenth of
--   that period for the network and the database;
-- members whose expected heartbeat is already past that slack (a node lost
-- or silent) are not waited for: they stop when they hear, if ever.  So
-- the first member to hear computes the same time as the controller would
-- have at the stop itself: the other members have not heartbeated since.
--
-- tarmac_heartbeat_batch (0020) is replaced with the same answer plus
-- "stops"; nodes.c's single statement adds the same, from the same
-- function.

ALTER TABLE nodes ADD COLUMN heartbeat_ms int CHECK (heartbeat_ms > 0);

CREATE TABLE gang_stops (
    job_id      bigint NOT NULL REFERENCES jobs (id) ON DELETE CASCADE,
    attempt     int NOT NULL,
    heard_ms    bigint NOT NULL,
    stop_at_ms  bigint NOT NULL,
    PRIMARY KEY (job_id, attempt)
);

-- The answer's "stops": for every job the heartbeat says runs here
-- (p_report -> 'running', [{"job_id", "attempt"}]) that is a member of a
-- gang's attempt no longer running on this node, {"job_id", "attempt",
-- "stop_in_ms"} while its common stop time is still ahead (counted from
-- this answer, so the nodes' clocks need not agree).  Past it, or for a
-- job of one node, nothing: the agent stops the job at once, as ever.
-- p_report -> 'heartbeat_ms' updates the node's period.
CREATE FUNCTION tarmac_gang_stops(p_node bigint, p_now bigint, p_report jsonb)
RETURNS json LANGUAGE plpgsql AS $$
DECLARE
    v_period int := (p_report ->> 'heartbeat_ms')::int;
    r record;
    v_at bigint;
    v_out json[] := '{}';
BEGIN
    IF v_period IS NOT NULL THEN
        UPDATE nodes SET heartbeat_ms = v_period WHERE id = p_node AND heartbeat_ms IS DISTINCT FROM v_period;
    END IF;
    FOR r IN SELECT DISTINCT m.job_id, m.attempt
               FROM jsonb_array_elements(coalesce(p_report -> 'running', '[]'::jsonb)) x
               JOIN job_members m ON m.job_id = (x ->> 'job_id')::bigint AND m.attempt = (x ->> 'attempt')::bigint
                                 AND m.node_id = p_node AND m.nodes > 1
              WHERE jsonb_typeof(x -> 'attempt') = 'number'
                AND NOT EXISTS (SELECT 1 FROM jobs j JOIN job_allocations a ON a.job_id = j.id
                                 WHERE j.id = m.job_id AND j.state = 'running' AND j.attempts = m.attempt
                                   AND a.node_id = p_node)
    LOOP
        -- Once per attempt: a second member's heartbeat in another
        -- transaction waits on the key and then reads the first's row.
        INSERT INTO gang_stops (job_id, attempt, heard_ms, stop_at_ms)
        SELECT r.job_id, r.attempt, p_now,
               greatest(p_now, coalesce(max(e.due + 1000 + e.period / 10), p_now))
          FROM (SELECT n.last_heartbeat_ms + least(coalesce(n.heartbeat_ms, 10000), 60000) AS due,
                       least(coalesce(n.heartbeat_ms, 10000), 60000) AS period
                  FROM job_members o JOIN nodes n ON n.id = o.node_id
                 WHERE o.job_id = r.job_id AND o.attempt = r.attempt AND o.node_id <> p_node
                   AND o.exited_ms IS NULL AND n.last_heartbeat_ms IS NOT NULL
                   AND n.state NOT IN ('terminated', 'interrupted')) e
         WHERE e.due + 1000 + e.period / 10 > p_now
        ON CONFLICT DO NOTHING;
        SELECT s.stop_at_ms INTO v_at FROM gang_stops s WHERE s.job_id = r.job_id AND s.attempt = r.attempt;
        IF v_at > p_now THEN
            v_out := v_out || json_build_object('job_id', r.job_id, 'attempt', r.attempt,
                                                'stop_in_ms', v_at - p_now);
        END IF;
    END LOOP;
    RETURN array_to_json(v_out);
END $$;

CREATE OR REPLACE FUNCTION tarmac_heartbeat_batch(p_items jsonb)
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
                                           THEN p.checkpoint_dir || '/job-' || j.id END,
                    'rendezvous', tarmac_rendezvous(j.id, j.attempts, v_node, v_now,
                                                    (it.x ->> 'port_lo')::int, (it.x ->> 'port_hi')::int))
                    ORDER BY j.id),
                    '[]'::json)
                    FROM job_allocations a JOIN jobs j ON j.id = a.job_id AND j.state = 'running'
                    LEFT JOIN pools p ON p.name = n.pool
                   WHERE a.node_id = v_node
                     AND j.id NOT IN (SELECT (x ->> 'id')::bigint
                                        FROM jsonb_array_elements(it.x -> 'report' -> 'jobs') x)),
                'stops', tarmac_gang_stops(v_node, v_now, it.x -> 'report'))::text;
            RETURN NEXT;
        EXCEPTION WHEN OTHERS THEN
            tok_ok := true; state := NULL; bad := NULL; gpus := NULL; answer := NULL;
            err_state := SQLSTATE;
            err_message := SQLERRM;
            RETURN NEXT;
        END;
    END LOOP;
END $$;
