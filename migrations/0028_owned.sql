-- 0028_owned: machines tarmac does not buy join an owned pool (docs/owned.md).
--
-- An operator makes a join token for one pool (`tarmac join-token create`):
-- only its SHA-256 is stored, as for API tokens, with its expiry, the
-- joins it has left and whether it was revoked.  A machine joins through
-- POST /v1/agent/join (controller/api/agent_join.c) with the token and a
-- node key it made itself and keeps in its work folder; the key's hash
-- goes on the node, so a machine that restarts proves the key and gets its
-- node back without a token.  Its hardware report (GPUs, model, memory per
-- GPU, CPUs, memory) is kept on the node: a later join with another report
-- cordons the node, with a decision saying what changed.
--
-- tarmac_agent_join() is the one statement of a join: every check and
-- every write of it, so that a refused join writes nothing (its outcome
-- says which field was wrong) and a join that spends a use creates exactly
-- one node.  The token's row is locked (FOR UPDATE) so that concurrent
-- joins cannot spend more uses than it has.

ALTER TABLE pools DROP CONSTRAINT pools_provider_kind_check;
ALTER TABLE pools ADD CONSTRAINT pools_provider_kind_check
    CHECK (provider_kind IN ('sim', 'aws', 'gcp', 'azure', 'local', 'owned'));

CREATE TABLE join_tokens (
    id          bigserial PRIMARY KEY,
    pool        text NOT NULL REFERENCES pools (name),
    hash        text NOT NULL UNIQUE,
    created_ms  bigint NOT NULL,
    expires_ms  bigint NOT NULL CHECK (expires_ms > created_ms),
    uses_left   int NOT NULL CHECK (uses_left >= 0),
    uses        int NOT NULL DEFAULT 0 CHECK (uses >= 0),
    revoked_ms  bigint
);

ALTER TABLE nodes ADD COLUMN node_key_hash text UNIQUE;
ALTER TABLE nodes ADD COLUMN hardware jsonb;
-- A report unlike the accepted one (hardware), kept until an operator
-- uncordons the node (POST /v1/nodes/{id}/uncordon), which accepts it.
ALTER TABLE nodes ADD COLUMN hardware_reported jsonb;
ALTER TABLE nodes ADD COLUMN join_token_id bigint REFERENCES join_tokens (id);

-- Outcomes: 'joined' (a new node, one use spent), 'rejoined' (the key's
-- node, no use spent; 'changed' when its hardware report differs and it
-- was cordoned for it), or the refusal: 'token' (unknown), 'revoked',
-- 'expired', 'spent', 'pool' (the token is for another pool, or the key's
-- node is in another pool), 'gone' (the key's node was terminated),
-- 'shape' (a new machine whose hardware does not fit the pool's declared
-- shape: the caller checked it against the configuration, p_shape_ok),
-- 'full' (the pool has p_max_nodes live nodes already).
CREATE FUNCTION tarmac_agent_join(p_now bigint, p_pool text, p_token_hash text, p_key_hash text,
                                  p_hardware jsonb, p_gpus int, p_gpu_model text,
                                  p_cpu_milli bigint, p_memory_mib bigint, p_price bigint,
                                  p_agent_hash text, p_address text, p_shape_ok boolean, p_max_nodes int,
                                  OUT outcome text, OUT node_id bigint)
LANGUAGE plpgsql AS $$
DECLARE
    t join_tokens%ROWTYPE;
    n nodes%ROWTYPE;
BEGIN
    SELECT * INTO n FROM nodes WHERE node_key_hash = p_key_hash FOR NO KEY UPDATE;
    IF FOUND THEN
        IF n.pool <> p_pool THEN
            outcome := 'pool';
            RETURN;
        END IF;
        IF n.state IN ('terminated', 'interrupted') THEN
            outcome := 'gone';
            RETURN;
        END IF;
        node_id := n.id;
        outcome := 'rejoined';
        -- The old agent tokens die with the process that held them.
        UPDATE api_tokens SET revoked = true WHERE api_tokens.node_id = n.id AND role = 'agent';
        INSERT INTO api_tokens (name, role, hash, created_ms, node_id)
        VALUES ('agent-' || n.id || '-join-' || p_now || '-' || substr(p_agent_hash, 1, 8), 'agent',
                p_agent_hash, p_now, n.id);
        IF n.hardware IS DISTINCT FROM p_hardware THEN
            outcome := 'changed';
            UPDATE nodes SET cordoned = true, hardware_reported = p_hardware WHERE id = n.id;
            PERFORM tarmac_decide(p_now, 'cordon', 'node', n.id::text,
                'cordoned: its machine reports other hardware than when it joined ('
                || coalesce(n.hardware::text, 'none') || ' then, ' || p_hardware::text
                || ' now); uncordoning it accepts the new report',
                jsonb_build_object('was', n.hardware, 'now', p_hardware));
        END IF;
        UPDATE nodes SET address = coalesce(p_address, address) WHERE id = n.id;
        PERFORM tarmac_decide(p_now, 'agent_rejoined', 'node', n.id::text,
            'the owned machine proved its node key and has its node back', '{}'::jsonb);
        RETURN;
    END IF;
    IF p_token_hash IS NULL THEN
        outcome := 'token';
        RETURN;
    END IF;
    SELECT * INTO t FROM join_tokens WHERE hash = p_token_hash FOR UPDATE;
    IF NOT FOUND THEN
        outcome := 'token';
    ELSIF t.revoked_ms IS NOT NULL THEN
        outcome := 'revoked';
    ELSIF t.expires_ms <= p_now THEN
        outcome := 'expired';
    ELSIF t.uses_left = 0 THEN
        outcome := 'spent';
    ELSIF t.pool <> p_pool THEN
        outcome := 'pool';
    ELSIF NOT p_shape_ok THEN
        outcome := 'shape';
    ELSIF (SELECT count(*) FROM nodes
            WHERE pool = p_pool AND state NOT IN ('terminated', 'interrupted')) >= p_max_nodes THEN
        outcome := 'full';
    END IF;
    IF outcome IS NOT NULL THEN
        RETURN;
    END IF;
    UPDATE join_tokens SET uses_left = uses_left - 1, uses = uses + 1 WHERE id = t.id;
    INSERT INTO nodes (pool, launch_token, zone, instance_type, gpus, gpu_model, cpu_milli,
                       memory_mib, capacity_type, state, state_reason, price_uusd_per_hour,
                       requested_ms, billed_from_ms, ready_ms, idle_since_ms, last_heartbeat_ms,
                       node_key_hash, hardware, join_token_id, address)
    VALUES (p_pool, 'join-' || substr(p_key_hash, 1, 40), 'owned', 'owned', p_gpus, p_gpu_model,
            p_cpu_milli, p_memory_mib, 'on_demand', 'ready', 'joined with a join token', p_price,
            p_now, p_now, p_now, p_now, p_now, p_key_hash, p_hardware, t.id, p_address)
    RETURNING id INTO node_id;
    INSERT INTO api_tokens (name, role, hash, created_ms, node_id)
    VALUES ('agent-' || node_id || '-join', 'agent', p_agent_hash, p_now, node_id);
    PERFORM tarmac_decide(p_now, 'node_joined', 'node', node_id::text,
        'an owned machine joined pool ' || p_pool || ' with a join token',
        jsonb_build_object('join_token_id', t.id, 'uses_left', t.uses_left - 1,
                           'hardware', p_hardware));
    outcome := 'joined';
END $$;
