-- 0020_rendezvous: what the members of a job find each other with.
--
-- Every node reports its address when its agent enrolls (nodes.address: an
-- IPv4 or IPv6 address the API checked; NULL for nodes enrolled before).
-- Every assignment of the heartbeat answer carries, beside the job, its
-- rendezvous (tarmac_rendezvous below):
--   {"rank": R, "nodes": N, "gpus_per_node": G, "addrs": ["10.0.0.5", ...],
--    "master_port": P, "wait": null}
-- Ranks follow the members' node ids (the same order for every member and
-- every heartbeat while the allocation stands); rank 0's node is the
-- master.  Its port is picked here, the first time any member's heartbeat
-- asks, from the range the API passes (agent.rendezvous_ports), and kept in
-- rendezvous_ports for the job's attempt: the primary key (node, port)
-- makes a port given twice on one node impossible, whatever heartbeats
-- race; a row whose job no longer runs that attempt on that node is free
-- again.  When the range is full on rank 0's node, or a member's address is
-- unknown, master_port is null and "wait" says why: the agents start no
-- member until it clears, and the reason is recorded once per attempt as
-- the decision 'rendezvous_wait' on the job (tarmac why).
--
-- tarmac_heartbeat_batch (0012) is replaced to add the rendezvous to its
-- answer, as controller/api/nodes.c's single statement does; each item
-- now also carries "port_lo" and "port_hi".

ALTER TABLE nodes ADD COLUMN address text;

CREATE TABLE rendezvous_ports (
    node_id     bigint NOT NULL REFERENCES nodes (id),
    port        int NOT NULL CHECK (port > 0 AND port < 65536),
    job_id      bigint NOT NULL REFERENCES jobs (id) ON DELETE CASCADE,
    attempt     int NOT NULL,
    PRIMARY KEY (node_id, port),
    UNIQUE (job_id)
);

CREATE FUNCTION tarmac_rendezvous(p_job bigint, p_attempt int, p_node bigint, p_now bigint,
                                  p_lo int, p_hi int)
RETURNS json LANGUAGE plpgsql AS $$
DECLARE
    v_rank int;
    v_n int;
    v_gpus int;
    v_master bigint;
    v_addrs text[];
    v_missing bigint;
    v_port int;
    v_wait text;
    cand int;
BEGIN
    SELECT array_agg(n.address ORDER BY a.node_id), count(*),
           min(a.node_id),
           min(a.node_id) FILTER (WHERE n.address IS NULL)
      INTO v_addrs, v_n, v_master, v_missing
      FROM job_allocations a JOIN nodes n ON n.id = a.node_id
     WHERE a.job_id = p_job;
    IF v_n IS NULL OR v_n = 0 THEN
        RETURN NULL;
    END IF;
    SELECT count(*) - 1 INTO v_rank FROM job_allocations a WHERE a.job_id = p_job AND a.node_id <= p_node;
    SELECT count(*) INTO v_gpus FROM job_allocations a, generate_series(0, 15) b
     WHERE a.job_id = p_job AND a.node_id = p_node AND a.gpu_mask & (1 << b) <> 0;
    -- A job of one node talks to itself: loopback serves where its node
    -- enrolled before addresses were kept.
    IF v_n = 1 AND v_missing IS NOT NULL THEN
        v_addrs := ARRAY['127.0.0.1'];
        v_missing := NULL;
    END IF;
    IF v_missing IS NOT NULL THEN
        v_wait := 'node ' || v_missing || ' has not reported its address (its agent enrolled before addresses were kept)';
    ELSE
        SELECT r.port INTO v_port FROM rendezvous_ports r
         WHERE r.job_id = p_job AND r.attempt = p_attempt AND r.node_id = v_master;
        IF v_port IS NULL AND p_lo IS NOT NULL AND p_hi IS NOT NULL AND p_lo <= p_hi THEN
            -- This job's row of an earlier attempt, and the rows on the
            -- master's node of attempts that no longer run there.
            DELETE FROM rendezvous_ports r WHERE r.job_id = p_job;
            DELETE FROM rendezvous_ports r WHERE r.node_id = v_master
               AND NOT EXISTS (SELECT 1 FROM jobs j JOIN job_allocations a ON a.job_id = j.id
                                WHERE j.id = r.job_id AND j.state = 'running'
                                  AND j.attempts = r.attempt AND a.node_id = r.node_id);
            FOR cand IN SELECT g FROM generate_series(p_lo, p_hi) g
                         WHERE NOT EXISTS (SELECT 1 FROM rendezvous_ports r
                                            WHERE r.node_id = v_master AND r.port = g)
                         ORDER BY g
            LOOP
                INSERT INTO rendezvous_ports (node_id, port, job_id, attempt)
                VALUES (v_master, cand, p_job, p_attempt) ON CONFLICT DO NOTHING;
                -- Ours, or a member's heartbeat in another transaction
                -- took one for this job first: either way, it is the job's.
                SELECT r.port INTO v_port FROM rendezvous_ports r
                 WHERE r.job_id = p_job AND r.attempt = p_attempt AND r.node_id = v_master;
                EXIT WHEN v_port IS NOT NULL;
            END LOOP;
        END IF;
        IF v_port IS NULL THEN
            v_wait := 'no free rendezvous port on node ' || v_master || ' (agent.rendezvous_ports '
                      || coalesce(p_lo::text, '?') || '-' || coalesce(p_hi::text, '?')
                      || ' all held by other jobs whose rank 0 runs there)';
        END IF;
    END IF;
    IF v_wait IS NOT NULL AND NOT EXISTS (
            SELECT 1 FROM decisions d WHERE d.subject_kind = 'job' AND d.subject_id = p_job::text
               AND d.kind = 'rendezvous_wait' AND (d.inputs ->> 'attempt')::int = p_attempt) THEN
        PERFORM tarmac_decide(p_now, 'rendezvous_wait', 'job', p_job::text,
                              'its members wait to start: ' || v_wait,
                              jsonb_build_object('attempt', p_attempt, 'master_node', v_master,
                                                 'port_lo', p_lo, 'port_hi', p_hi));
    END IF;
    RETURN json_build_object('rank', v_rank, 'nodes', v_n, 'gpus_per_node', coalesce(v_gpus, 0),
                             'addrs', to_json(v_addrs), 'master_port', v_port, 'wait', v_wait);
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
