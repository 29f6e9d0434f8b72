-- 0002_apply: the two write paths of the controller, as functions so each is
-- one parameterised statement and one transaction.
--
-- tarmac_apply(epoch, now, plan) applies a reconcile plan.  It first checks
-- the leader epoch (a fence: a controller that lost leadership, or one paused
-- past its lease, cannot write a stale plan), then applies each action under
-- a guard on the state the plan was computed from, so a concurrent change
-- (a job cancelled through the API, a node cordoned) makes the action a
-- no-op instead of an error.  Every applied action writes its decision.
-- Actions: place (a job on one node, or a gang on several, all or none),
-- wait, reserve (sticky), preempt (loaned preemptible work), request_node,
-- adopt, node_ready, node_gone, launch_failed, terminate, orphan, budget.
--
-- tarmac_agent_report(node, now, report) is what a node's software reports
-- (heartbeat, finished jobs).  The sim agent and the future HTTP endpoint
-- both call it: one path.

CREATE FUNCTION tarmac_decide(p_now bigint, p_kind text, p_subject_kind text,
                              p_subject_id text, p_reason text, p_inputs jsonb)
RETURNS void LANGUAGE sql AS $$
    INSERT INTO decisions (at_ms, kind, subject_kind, subject_id, reason, inputs)
    VALUES (p_now, p_kind, p_subject_kind, p_subject_id, p_reason, coalesce(p_inputs, '{}'::jsonb));
$$;

-- Give a node's jobs back to the queue; returns how many.
CREATE FUNCTION tarmac_requeue_node_jobs(p_node bigint, p_now bigint, p_why text)
RETURNS int LANGUAGE plpgsql AS $$
DECLARE
    j record;
    n int := 0;
BEGIN
    FOR j IN SELECT jb.id, jb.attempts FROM jobs jb
             WHERE jb.state = 'running'
               AND EXISTS (SELECT 1 FROM job_allocations a WHERE a.job_id = jb.id AND a.node_id = p_node)
             FOR UPDATE
    LOOP
        DELETE FROM job_allocations WHERE job_id = j.id;
        UPDATE jobs SET state = 'queued', node_id = NULL, started_ms = NULL,
                        state_reason = p_why
         WHERE id = j.id;
        -- A gang's other nodes become idle when this job leaves them.
        UPDATE nodes SET idle_since_ms = p_now
         WHERE idle_since_ms IS NULL AND state IN ('ready', 'draining')
           AND NOT EXISTS (SELECT 1 FROM job_allocations a WHERE a.node_id = nodes.id);
        PERFORM tarmac_decide(p_now, 'requeue', 'job', j.id::text, p_why,
                              jsonb_build_object('node', p_node, 'attempts', j.attempts));
        n := n + 1;
    END LOOP;
    RETURN n;
END $$;

CREATE FUNCTION tarmac_apply(p_epoch bigint, p_now bigint, p_plan jsonb)
RETURNS jsonb LANGUAGE plpgsql AS $$
DECLARE
    a jsonb;
    al jsonb;
    op text;
    ok boolean;
    cnt int;
    applied int := 0;
    skipped int := 0;
    new_nodes jsonb := '[]'::jsonb;
    nid bigint;
    tok text;
    jid bigint;
BEGIN
    PERFORM 1 FROM leader WHERE id = 1 AND epoch = p_epoch FOR SHARE;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'leader epoch % is stale', p_epoch USING ERRCODE = 'TM001';
    END IF;

    FOR a IN SELECT value FROM jsonb_array_elements(coalesce(p_plan -> 'actions', '[]'::jsonb))
    LOOP
        op := a ->> 'op';
        ok := false;
        CASE op
        WHEN 'place' THEN
            jid := (a ->> 'job')::bigint;
            -- All of a gang's nodes must still be ready, or none is used.
            SELECT count(*) INTO cnt FROM jsonb_array_elements(a -> 'allocs') x
             WHERE NOT EXISTS (SELECT 1 FROM nodes n WHERE n.id = (x ->> 'node')::bigint
                                 AND n.state = 'ready' AND NOT n.cordoned);
            IF cnt = 0 THEN
                UPDATE jobs SET state = 'running', node_id = (a -> 'allocs' -> 0 ->> 'node')::bigint,
                                started_ms = p_now, attempts = attempts + 1, state_reason = '',
                                hold_node_id = NULL, hold_start_ms = NULL
                 WHERE id = jid AND state = 'queued';
                ok := FOUND;
            END IF;
            IF ok THEN
                FOR al IN SELECT value FROM jsonb_array_elements(a -> 'allocs') LOOP
                    INSERT INTO job_allocations (job_id, node_id, gpu_mask, gpu_milli, cpu_milli,
                                                 memory_mib, loaned)
                    VALUES (jid, (al ->> 'node')::bigint, (al ->> 'gpu_mask')::int,
                            (al ->> 'gpu_milli')::int, (al ->> 'cpu_milli')::bigint,
                            (al ->> 'memory_mib')::bigint, coalesce((al ->> 'loaned')::boolean, false));
                    UPDATE nodes SET idle_since_ms = NULL WHERE id = (al ->> 'node')::bigint;
                END LOOP;
                PERFORM tarmac_decide(p_now, 'place', 'job', jid::text, a ->> 'reason', a -> 'inputs');
            END IF;

        WHEN 'wait' THEN
            -- A waiting job's reason is recorded once per change, not per tick.
            UPDATE jobs SET state_reason = a ->> 'reason'
             WHERE id = (a ->> 'job')::bigint AND state = 'queued'
               AND state_reason IS DISTINCT FROM a ->> 'reason';
            ok := FOUND;
            IF ok THEN
                PERFORM tarmac_decide(p_now, 'wait', 'job', a ->> 'job', a ->> 'reason', a -> 'inputs');
            END IF;

        WHEN 'reserve' THEN
            -- A blocked job keeps the node it was promised, and the start
            -- first promised, until it runs (sticky reservations).
            UPDATE jobs SET hold_node_id = (a ->> 'node')::bigint,
                            hold_start_ms = coalesce(hold_start_ms, (a ->> 'start_ms')::bigint)
             WHERE id = (a ->> 'job')::bigint AND state = 'queued'
               AND hold_node_id IS DISTINCT FROM (a ->> 'node')::bigint;
            ok := FOUND;
            IF ok THEN
                PERFORM tarmac_decide(p_now, 'reserve', 'job', a ->> 'job', a ->> 'reason', a -> 'inputs');
            END IF;

        WHEN 'preempt' THEN
            -- Loaned preemptible work leaves capacity its owner can now use.
            jid := (a ->> 'job')::bigint;
            DELETE FROM job_allocations WHERE job_id = jid
               AND EXISTS (SELECT 1 FROM jobs WHERE id = jid AND state = 'running' AND preemptible);
            ok := FOUND;
            IF ok THEN
                UPDATE jobs SET state = 'queued', node_id = NULL, started_ms = NULL,
                                state_reason = a ->> 'reason'
                 WHERE id = jid;
                UPDATE nodes SET idle_since_ms = p_now
                 WHERE idle_since_ms IS NULL AND state IN ('ready', 'draining')
                   AND NOT EXISTS (SELECT 1 FROM job_allocations x WHERE x.node_id = nodes.id);
                PERFORM tarmac_decide(p_now, 'preempt', 'job', jid::text, a ->> 'reason', a -> 'inputs');
            END IF;

        WHEN 'request_node' THEN
            INSERT INTO nodes (pool, launch_token, zone, instance_type, gpus, gpu_model, cpu_milli,
                               memory_mib, capacity_type, state, state_reason, price_uusd_per_hour,
                               requested_ms)
            VALUES (a ->> 'pool', a ->> 'token', a ->> 'zone', a ->> 'instance_type',
                    (a ->> 'gpus')::int, a ->> 'gpu_model', (a ->> 'cpu_milli')::bigint,
                    (a ->> 'memory_mib')::bigint, a ->> 'capacity_type', 'requested',
                    a ->> 'reason', (a ->> 'price_uusd_per_hour')::bigint, p_now)
            ON CONFLICT (launch_token) DO NOTHING
            RETURNING id, launch_token INTO nid, tok;
            ok := nid IS NOT NULL;
            IF ok THEN
                new_nodes := new_nodes || jsonb_build_object('id', nid, 'token', tok);
                PERFORM tarmac_decide(p_now, 'launch', 'node', nid::text, a ->> 'reason', a -> 'inputs');
            END IF;
            nid := NULL;

        WHEN 'adopt' THEN
            UPDATE nodes SET instance_id = a ->> 'instance_id', state = 'booting',
                             billed_from_ms = coalesce(billed_from_ms, p_now)
             WHERE id = (a ->> 'node')::bigint AND state = 'requested';
            ok := FOUND;
            IF ok THEN
                PERFORM tarmac_decide(p_now, 'adopt', 'node', a ->> 'node', a ->> 'reason', a -> 'inputs');
            END IF;

        WHEN 'node_ready' THEN
            UPDATE nodes SET state = 'ready', ready_ms = p_now, idle_since_ms = p_now,
                             instance_id = coalesce(instance_id, a ->> 'instance_id'),
                             billed_from_ms = coalesce(billed_from_ms, p_now), state_reason = ''
             WHERE id = (a ->> 'node')::bigint AND state IN ('requested', 'booting');
            ok := FOUND;
            IF ok THEN
                PERFORM tarmac_decide(p_now, 'ready', 'node', a ->> 'node', a ->> 'reason', a -> 'inputs');
            END IF;

        WHEN 'node_gone' THEN
            -- The cloud no longer runs it (terminated, interrupted, lost):
            -- record that and give its jobs back to the queue.
            UPDATE nodes SET state = a ->> 'state', terminated_ms = p_now, idle_since_ms = NULL,
                             billed_from_ms = coalesce(billed_from_ms, requested_ms),
                             state_reason = a ->> 'reason'
             WHERE id = (a ->> 'node')::bigint AND state NOT IN ('terminated', 'interrupted');
            ok := FOUND;
            IF ok THEN
                PERFORM tarmac_decide(p_now, a ->> 'state', 'node', a ->> 'node', a ->> 'reason', a -> 'inputs');
                PERFORM tarmac_requeue_node_jobs((a ->> 'node')::bigint, p_now,
                                                 'node ' || (a ->> 'node') || ' ' || (a ->> 'state'));
            END IF;

        WHEN 'launch_failed' THEN
            UPDATE nodes SET state = 'terminated', terminated_ms = p_now, state_reason = a ->> 'reason'
             WHERE id = (a ->> 'node')::bigint AND state = 'requested';
            ok := FOUND;
            IF ok THEN
                PERFORM tarmac_decide(p_now, 'launch_failed', 'node', a ->> 'node', a ->> 'reason', a -> 'inputs');
            END IF;

        WHEN 'terminate' THEN
            -- Only an empty node is released; a job placed since the
            -- snapshot keeps it alive.
            UPDATE nodes SET state = 'terminating', state_reason = a ->> 'reason'
             WHERE id = (a ->> 'node')::bigint
               AND state IN ('requested', 'booting', 'ready', 'draining')
               AND NOT EXISTS (SELECT 1 FROM job_allocations x WHERE x.node_id = nodes.id);
            ok := FOUND;
            IF ok THEN
                PERFORM tarmac_decide(p_now, 'terminate', 'node', a ->> 'node', a ->> 'reason', a -> 'inputs');
            END IF;

        WHEN 'budget' THEN
            -- A launch or job start refused by a hard cap, or a soft cap's
            -- warning: recorded with its numbers, a warning once per scope
            -- and month, a refusal at most once per scope every 15 minutes.
            ok := NOT EXISTS (
                SELECT 1 FROM decisions d
                 WHERE d.kind = a ->> 'kind' AND d.subject_kind = 'budget'
                   AND d.subject_id = a ->> 'scope'
                   AND CASE WHEN a ->> 'kind' = 'budget_warn'
                            THEN d.inputs ->> 'period' = a -> 'inputs' ->> 'period'
                            ELSE d.at_ms > p_now - 900000 END);
            IF ok THEN
                PERFORM tarmac_decide(p_now, a ->> 'kind', 'budget', a ->> 'scope', a ->> 'reason', a -> 'inputs');
            END IF;

        WHEN 'orphan' THEN
            PERFORM tarmac_decide(p_now, 'terminate_orphan', 'instance', a ->> 'instance_id',
                                  a ->> 'reason', a -> 'inputs');
            ok := true;

        ELSE
            RAISE EXCEPTION 'unrecognized plan action: %', op USING ERRCODE = 'TM002';
        END CASE;

        IF ok THEN applied := applied + 1; ELSE skipped := skipped + 1; END IF;
    END LOOP;

    RETURN jsonb_build_object('applied', applied, 'skipped', skipped, 'nodes', new_nodes);
END $$;

-- What a node's software reports: {"jobs": [{"id": 7, "state": "succeeded",
-- "reason": "exit 0"}]}.  Unknown jobs, or jobs not running on this node, are
-- ignored (a late report after a requeue must not end the new attempt).
CREATE FUNCTION tarmac_agent_report(p_node bigint, p_now bigint, p_report jsonb)
RETURNS int LANGUAGE plpgsql AS $$
DECLARE
    r jsonb;
    n int := 0;
    st text;
BEGIN
    UPDATE nodes SET last_heartbeat_ms = p_now WHERE id = p_node;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'unknown node %', p_node USING ERRCODE = 'TM003';
    END IF;
    FOR r IN SELECT value FROM jsonb_array_elements(coalesce(p_report -> 'jobs', '[]'::jsonb))
    LOOP
        st := r ->> 'state';
        IF st NOT IN ('succeeded', 'failed') THEN
            RAISE EXCEPTION 'job state must be succeeded or failed, not %', st USING ERRCODE = 'TM004';
        END IF;
        UPDATE jobs SET state = st, finished_ms = p_now, state_reason = coalesce(r ->> 'reason', '')
         WHERE id = (r ->> 'id')::bigint AND state = 'running'
           AND EXISTS (SELECT 1 FROM job_allocations a WHERE a.job_id = jobs.id AND a.node_id = p_node);
        IF FOUND THEN
            DELETE FROM job_allocations WHERE job_id = (r ->> 'id')::bigint;
            PERFORM tarmac_decide(p_now, 'job_' || st, 'job', r ->> 'id',
                                  coalesce(r ->> 'reason', 'reported by node ' || p_node),
                                  jsonb_build_object('node', p_node));
            n := n + 1;
        END IF;
    END LOOP;
    UPDATE nodes SET idle_since_ms = p_now
     WHERE idle_since_ms IS NULL AND state IN ('ready', 'draining')
       AND NOT EXISTS (SELECT 1 FROM job_allocations a WHERE a.node_id = nodes.id);
    RETURN n;
END $$;
