-- 0021_gang: a multi-node job lives and dies whole (docs/multi-node.md).
--
-- job_members: one row per node of a job's attempt, written the first
-- time that node's agent is handed the assignment (its heartbeat asks for
-- the rendezvous: the member has "claimed" it), with its rank, then its
-- start and its exit.  It outlives the allocations, so the API and the CLI
-- can still say which nodes ran an attempt once it has ended.
--
-- The start barrier: tarmac_rendezvous (0020) is replaced with the same
-- signature and answer, plus "barrier": while any node of a job of two or
-- more nodes has not claimed the current attempt, every member's answer
-- carries "wait" (naming the nodes not come yet) and "barrier": true, and
-- no agent starts the command.  Once the last member has claimed, every
-- member is told to start 500 ms after that claim ("start_in_ms": how long
-- from this answer), so that the members start together, not each at its
-- next heartbeat.  A member's claim takes the job's row FOR SHARE, and
-- the reconcile pass's timeout (op gang_start_timeout below) takes it FOR
-- UPDATE, so a gang requeued for a missing node can never hand the go to a
-- member in the same moment.
--
-- Whole-gang ends: tarmac_agent_report (0010) is replaced.  For a job with
-- members of more than one node, a member that exits 0 is recorded and the
-- job runs on until every member has exited 0; a member that fails (exit
-- non-zero, or killed by a signal) ends the job failed at once with its
-- code, its rank and its node (jobs.exit_rank, jobs.exit_node_id): the
-- allocations go, so the other members' agents stop them (SIGTERM, then
-- SIGKILL after their --kill-grace, to the whole process group and job
-- user).  Their own later reports are for an attempt no longer current and
-- change nothing, so the first failure is the one kept.  'lost' and
-- 'stopped' requeue the whole gang as before (tarmac_job_leaves).  Jobs
-- without member rows (the sim agent's) end on one report, as before.
--
-- tarmac_apply is wrapped once more, as 0010, 0015, 0017 and 0019 did:
--   gang_start_timeout  some member never claimed the attempt within
--                       agent.gang_start_timeout of the first claim
--                       (controller/reconcile/gang_start.c): the job leaves
--                       its nodes whole (tarmac_job_leaves, cause
--                       'gang_start', decision 'requeue' naming the nodes
--                       that did not come), guarded on the attempt
--                       (started_ms) and on a member still missing.

CREATE TABLE job_members (
    job_id      bigint NOT NULL REFERENCES jobs (id) ON DELETE CASCADE,
    attempt     int NOT NULL,
    node_id     bigint NOT NULL REFERENCES nodes (id),
    rank        int NOT NULL CHECK (rank >= 0),
    nodes       int NOT NULL CHECK (nodes > rank),
    claimed_ms  bigint NOT NULL,
    started_ms  bigint,
    exited_ms   bigint,
    exit_code   int,
    exit_signal int,
    PRIMARY KEY (job_id, attempt, node_id)
);

ALTER TABLE jobs ADD COLUMN exit_rank int;
ALTER TABLE jobs ADD COLUMN exit_node_id bigint;

ALTER TABLE job_interruptions DROP CONSTRAINT job_interruptions_cause_check;
ALTER TABLE job_interruptions ADD CONSTRAINT job_interruptions_cause_check
    CHECK (cause IN ('checkpoint', 'interrupted', 'terminated', 'deadline', 'lost', 'unreachable', 'idle',
                     'consolidate', 'gang_start'));

CREATE OR REPLACE FUNCTION tarmac_rendezvous(p_job bigint, p_attempt int, p_node bigint, p_now bigint,
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
    v_absent text;
    v_barrier boolean := false;
    v_start_in bigint;
    cand int;
BEGIN
    SELECT array_agg(n.address ORDER BY a.node_id), count(*),
           min(a.node_id),
           min(a.node_id) FILTER (WHERE n.address IS NULL)
      INTO v_addrs, v_n, v_master, v_missing
      FROM job_allocations a JOIN nodes n ON n.id = a.node_id
     WHERE a.job_id = p_job;
    IF v_n IS NULL OR v_n = 0 OR NOT EXISTS (SELECT 1 FROM job_allocations a
                                              WHERE a.job_id = p_job AND a.node_id = p_node) THEN
        -- The job left this node since the answer's row was read (a
        -- requeue in between): hold the start, the next answer drops it.
        RETURN json_build_object('rank', 0, 'nodes', 1, 'gpus_per_node', 0, 'addrs', json_build_array('127.0.0.1'),
                                 'master_port', NULL, 'wait', 'attempt ' || p_attempt || ' no longer runs here',
                                 'barrier', true);
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
    -- The claim and the start barrier.  Once every node has claimed, the
    -- attempt is released for good: no lock, no write.
    IF NOT EXISTS (SELECT 1 FROM job_members m
                    WHERE m.job_id = p_job AND m.attempt = p_attempt AND m.node_id = p_node)
       OR (v_n > 1 AND EXISTS (SELECT 1 FROM job_allocations a WHERE a.job_id = p_job
                                 AND NOT EXISTS (SELECT 1 FROM job_members m WHERE m.job_id = p_job
                                                    AND m.attempt = p_attempt AND m.node_id = a.node_id))) THEN
        PERFORM 1 FROM jobs j WHERE j.id = p_job AND j.state = 'running' AND j.attempts = p_attempt FOR SHARE;
        IF NOT FOUND THEN
            RETURN json_build_object('rank', v_rank, 'nodes', v_n, 'gpus_per_node', coalesce(v_gpus, 0),
                                     'addrs', to_json(v_addrs), 'master_port', NULL,
                                     'wait', 'attempt ' || p_attempt || ' is no longer current', 'barrier', true);
        END IF;
        INSERT INTO job_members (job_id, attempt, node_id, rank, nodes, claimed_ms)
        VALUES (p_job, p_attempt, p_node, v_rank, v_n, p_now) ON CONFLICT DO NOTHING;
        IF v_n > 1 THEN
            SELECT string_agg(a.node_id::text, ', ' ORDER BY a.node_id) INTO v_absent
              FROM job_allocations a WHERE a.job_id = p_job
               AND NOT EXISTS (SELECT 1 FROM job_members m WHERE m.job_id = p_job
                                  AND m.attempt = p_attempt AND m.node_id = a.node_id);
            IF v_absent IS NOT NULL THEN
                v_barrier := true;
                v_wait := coalesce(v_wait || '; ', '') || 'start barrier: waiting for node(s) ' || v_absent
                          || ' to claim attempt ' || p_attempt;
            END IF;
        END IF;
    END IF;
    -- Released: the members start together, 500 ms after the last claim
    -- (a waiting member asks every 200 ms, so each hears of the go before
    -- then), each told how long to hold from its own answer rather than a
    -- time on a clock the nodes may not share.
    IF v_n > 1 AND NOT v_barrier AND v_wait IS NULL THEN
        SELECT max(m.claimed_ms) + 500 - p_now INTO v_start_in FROM job_members m
         WHERE m.job_id = p_job AND m.attempt = p_attempt;
        IF v_start_in > 0 THEN
            v_barrier := true;
            v_wait := 'start barrier: every member claimed attempt ' || p_attempt
                      || '; the gang starts together in ' || v_start_in || ' ms';
        ELSE
            v_start_in := NULL;
        END IF;
    END IF;
    RETURN json_build_object('rank', v_rank, 'nodes', v_n, 'gpus_per_node', coalesce(v_gpus, 0),
                             'addrs', to_json(v_addrs), 'master_port', v_port, 'wait', v_wait,
                             'barrier', v_barrier, 'start_in_ms', v_start_in);
END $$;

-- 0010's report, with the members of a gang ending one by one (above).
CREATE OR REPLACE FUNCTION tarmac_agent_report(p_node bigint, p_now bigint, p_report jsonb)
RETURNS int LANGUAGE plpgsql AS $$
DECLARE
    r jsonb;
    n int := 0;
    st text;
    jid bigint;
    cur int;
    m record;
    why text;
    rank_of int;
    left_nodes bigint[] := ARRAY[p_node];
BEGIN
    UPDATE nodes SET last_heartbeat_ms = p_now, unreachable_ms = NULL WHERE id = p_node;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'unknown node %', p_node USING ERRCODE = 'TM003';
    END IF;
    FOR r IN SELECT value FROM jsonb_array_elements(coalesce(p_report -> 'jobs', '[]'::jsonb))
    LOOP
        st := r ->> 'state';
        jid := (r ->> 'id')::bigint;
        IF st NOT IN ('succeeded', 'failed', 'lost', 'stopped') THEN
            RAISE EXCEPTION 'job state must be succeeded, failed, lost or stopped, not %', st USING ERRCODE = 'TM004';
        END IF;
        SELECT attempts INTO cur FROM jobs
         WHERE id = jid AND state = 'running'
           AND (r ->> 'attempt' IS NULL OR attempts = (r ->> 'attempt')::int)
           AND EXISTS (SELECT 1 FROM job_allocations a WHERE a.job_id = jobs.id AND a.node_id = p_node)
           FOR UPDATE;
        CONTINUE WHEN NOT FOUND;
        IF st = 'stopped' THEN
            IF tarmac_job_leaves(jid, p_node, p_now, 'checkpoint',
                                 coalesce(r ->> 'reason', 'stopped by the agent of node ' || p_node),
                                 jsonb_build_object('attempt', (r ->> 'attempt')::int), NULL) THEN
                n := n + 1;
            END IF;
            CONTINUE;
        END IF;
        IF st = 'lost' THEN
            IF tarmac_job_leaves(jid, p_node, p_now, 'lost',
                                 coalesce(r ->> 'reason', 'the agent of node ' || p_node || ' lost it'),
                                 jsonb_build_object('attempt', (r ->> 'attempt')::int), NULL) THEN
                n := n + 1;
            END IF;
            CONTINUE;
        END IF;
        why := coalesce(r ->> 'reason', 'reported by node ' || p_node);
        rank_of := NULL;
        SELECT mm.rank, mm.nodes INTO m FROM job_members mm
         WHERE mm.job_id = jid AND mm.attempt = cur AND mm.node_id = p_node;
        IF FOUND AND m.nodes > 1 THEN
            UPDATE job_members SET exited_ms = p_now, exit_code = (r ->> 'exit_code')::int,
                                   exit_signal = (r ->> 'signal')::int
             WHERE job_id = jid AND attempt = cur AND node_id = p_node AND exited_ms IS NULL;
            IF st = 'succeeded' THEN
                -- Done here; the job ends once every member is.
                IF EXISTS (SELECT 1 FROM job_allocations a WHERE a.job_id = jid
                              AND NOT EXISTS (SELECT 1 FROM job_members x WHERE x.job_id = jid
                                                 AND x.attempt = cur AND x.node_id = a.node_id
                                                 AND x.exited_ms IS NOT NULL AND x.exit_code = 0)) THEN
                    n := n + 1;
                    CONTINUE;
                END IF;
                why := 'every member of the gang (' || m.nodes || ' nodes) exited 0';
            ELSE
                rank_of := m.rank;
                why := 'rank ' || m.rank || ' (node ' || p_node || ') ' || why
                       || ': the job fails and its other members are stopped';
            END IF;
        END IF;
        UPDATE jobs SET state = st, finished_ms = p_now, state_reason = why,
                        exit_code = (r ->> 'exit_code')::int, exit_signal = (r ->> 'signal')::int,
                        output_tail = r ->> 'output_tail', exit_rank = rank_of,
                        exit_node_id = CASE WHEN rank_of IS NOT NULL THEN p_node END
         WHERE id = jid;
        WITH d AS (DELETE FROM job_allocations WHERE job_id = jid RETURNING node_id)
        SELECT left_nodes || coalesce(array_agg(node_id), '{}') INTO left_nodes FROM d;
        PERFORM tarmac_decide(p_now, 'job_' || st, 'job', jid::text, why,
                              jsonb_strip_nulls(jsonb_build_object('node', p_node,
                                  'attempt', (r ->> 'attempt')::int,
                                  'exit_code', (r ->> 'exit_code')::int,
                                  'signal', (r ->> 'signal')::int,
                                  'rank', rank_of)));
        n := n + 1;
    END LOOP;
    UPDATE nodes SET idle_since_ms = p_now
     WHERE id = ANY (left_nodes) AND idle_since_ms IS NULL AND state IN ('ready', 'draining')
       AND NOT EXISTS (SELECT 1 FROM job_allocations a WHERE a.node_id = nodes.id);
    RETURN n;
END $$;

-- Every node of a job with its rank, for the API (JOB_JSON): the running
-- attempt's allocations (ranks in node id order, as tarmac_rendezvous
-- gives them), or, once the job no longer runs, the nodes of its last
-- attempt that claimed it.
CREATE FUNCTION tarmac_job_members(p_job bigint)
RETURNS json LANGUAGE sql STABLE AS $$
    SELECT coalesce(json_agg(json_build_object('rank', x.rank, 'node_id', x.node_id, 'address', n.address,
                                               'attempt', x.attempt, 'claimed_ms', x.claimed_ms,
                                               'started_ms', x.started_ms, 'exited_ms', x.exited_ms,
                                               'exit_code', x.exit_code, 'signal', x.exit_signal)
                             ORDER BY x.rank), '[]'::json)
      FROM (SELECT (row_number() OVER (ORDER BY a.node_id) - 1)::int AS rank, a.node_id, j.attempts AS attempt,
                   m.claimed_ms, m.started_ms, m.exited_ms, m.exit_code, m.exit_signal
              FROM jobs j JOIN job_allocations a ON a.job_id = j.id
              LEFT JOIN job_members m ON m.job_id = j.id AND m.attempt = j.attempts AND m.node_id = a.node_id
             WHERE j.id = p_job AND j.state = 'running'
            UNION ALL
            SELECT m.rank, m.node_id, m.attempt, m.claimed_ms, m.started_ms, m.exited_ms, m.exit_code, m.exit_signal
              FROM jobs j JOIN job_members m ON m.job_id = j.id AND m.attempt = j.attempts
             WHERE j.id = p_job AND j.state <> 'running') x
      JOIN nodes n ON n.id = x.node_id;
$$;

ALTER FUNCTION tarmac_apply(bigint, bigint, jsonb) RENAME TO tarmac_apply_before_gang;

CREATE FUNCTION tarmac_apply(p_epoch bigint, p_now bigint, p_plan jsonb)
RETURNS jsonb LANGUAGE plpgsql AS $$
DECLARE
    actions jsonb := coalesce(p_plan -> 'actions', '[]'::jsonb);
    a jsonb;
    ok boolean;
    applied int := 0;
    skipped int := 0;
    res jsonb;
    jid bigint;
BEGIN
    IF NOT EXISTS (SELECT 1 FROM jsonb_array_elements(actions) x WHERE x ->> 'op' = 'gang_start_timeout') THEN
        RETURN tarmac_apply_before_gang(p_epoch, p_now, p_plan);
    END IF;
    PERFORM tarmac_lock_nodes();
    PERFORM 1 FROM leader WHERE id = 1 AND epoch = p_epoch FOR SHARE;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'leader epoch % is stale', p_epoch USING ERRCODE = 'TM001';
    END IF;
    FOR a IN SELECT x FROM jsonb_array_elements(actions) WITH ORDINALITY AS t(x, i)
              WHERE x ->> 'op' = 'gang_start_timeout' ORDER BY i
    LOOP
        jid := (a ->> 'job')::bigint;
        ok := false;
        -- The job's row first (FOR UPDATE, as a claim takes it FOR SHARE):
        -- a member that claims after this sees the attempt gone.
        PERFORM 1 FROM jobs j WHERE j.id = jid AND j.state = 'running'
           AND j.started_ms = (a ->> 'started_ms')::bigint
           AND EXISTS (SELECT 1 FROM job_allocations x WHERE x.job_id = j.id
                          AND NOT EXISTS (SELECT 1 FROM job_members m WHERE m.job_id = j.id
                                             AND m.attempt = j.attempts AND m.node_id = x.node_id))
           FOR UPDATE;
        IF FOUND THEN
            ok := tarmac_job_leaves(jid, (a ->> 'node')::bigint, p_now, 'gang_start', a ->> 'reason',
                                    a -> 'inputs', (a ->> 'started_ms')::bigint);
        END IF;
        IF ok THEN
            applied := applied + 1;
        ELSE
            skipped := skipped + 1;
        END IF;
    END LOOP;
    SELECT tarmac_apply_before_gang(p_epoch, p_now, jsonb_build_object('actions', coalesce(jsonb_agg(x ORDER BY i),
                                                                                 '[]'::jsonb)))
      INTO res
      FROM jsonb_array_elements(actions) WITH ORDINALITY AS t(x, i)
     WHERE x ->> 'op' <> 'gang_start_timeout';
    RETURN res || jsonb_build_object('applied', applied + (res ->> 'applied')::int,
                                     'skipped', skipped + (res ->> 'skipped')::int);
END $$;
