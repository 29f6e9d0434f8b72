-- 0023_submit_batch: the submissions' batch statement as a function.
--
-- The fast path of POST /v1/jobs (controller/api/submit.c) hands a batch
-- of jobs to this function through the group commit (controller/io/
-- group_commit.c): one array a column, one element a job, all inserted in
-- one statement and one transaction.  As a PL/pgSQL function its statement
-- is parsed and planned once per connection, not once per batch.
--
-- Each element is inserted when its token still holds (known, not
-- revoked, same role and team), some pool takes the job and its deadline
-- (p_until, wall-clock ms) has not passed on the database's clock; the
-- others are left out, and the route runs them again alone, which gives
-- each the answer it would have had.  One row per inserted job: its
-- ordinal in the arrays (1, 2, ...) and the row as stored.
--
-- Each inserted row's id is drawn in the CTE ok, so ok and ins hold the
-- same ids: both sorted by id pair each ordinal with its row without a
-- join (a join of the two CTEs is planned as a nested loop, quadratic in
-- the batch).
CREATE FUNCTION tarmac_submit_batch(
    p_team text[], p_name text[], p_command text[], p_gpus int[], p_gpu_milli int[],
    p_nodes int[], p_cpu_milli bigint[], p_memory_mib bigint[], p_gpu_model text[],
    p_pool text[], p_class text[], p_priority int[], p_preemptible boolean[],
    p_checkpointable boolean[], p_est bigint[], p_dl bigint[], p_now bigint[],
    p_hash text[], p_role text[], p_tteam text[], p_until bigint[])
RETURNS TABLE (i bigint, job jobs) LANGUAGE plpgsql AS $$
#variable_conflict use_column
BEGIN
    RETURN QUERY
    WITH r AS (
        SELECT * FROM unnest(p_team, p_name, p_command, p_gpus, p_gpu_milli, p_nodes,
                             p_cpu_milli, p_memory_mib, p_gpu_model, p_pool, p_class,
                             p_priority, p_preemptible, p_checkpointable, p_est, p_dl, p_now,
                             p_hash, p_role, p_tteam, p_until)
            WITH ORDINALITY AS r(team, name, command, gpus, gpu_milli, nodes, cpu_milli,
                                 memory_mib, gpu_model, pool, class, priority, preemptible,
                                 checkpointable, est, dl, now, hash, role, tteam, until, i)),
    ok AS (
        SELECT nextval('jobs_id_seq'::regclass) AS id, r.* FROM r
         WHERE clock_timestamp() < to_timestamp(r.until / 1000.0)
           AND EXISTS (SELECT 1 FROM api_tokens t WHERE t.hash = r.hash AND NOT t.revoked
                          AND t.role = r.role AND coalesce(t.team, '') = r.tteam)
           AND EXISTS (SELECT 1 FROM pools p WHERE (r.pool IS NULL OR p.name = r.pool)
                          AND (r.gpu_model IS NULL
                               OR p.gpu_model = ANY (string_to_array(r.gpu_model, '|')))
                          AND r.gpus <= p.gpus_per_node)),
    ins AS (
        INSERT INTO jobs AS j (id, team, name, command, gpus, gpu_milli, nodes, cpu_milli,
                               memory_mib, gpu_model, pool, class, priority, preemptible,
                               checkpointable, runtime_estimate_ms, deadline_ms, submitted_ms)
        SELECT id, team, name, command, gpus, gpu_milli, nodes, cpu_milli, memory_mib,
               gpu_model, pool, class, priority, preemptible, checkpointable, nullif(est, 0),
               nullif(dl, 0), now
          FROM ok ORDER BY ok.i
        RETURNING j.id, j AS row)
    SELECT a.i[k], b.row[k]
      FROM (SELECT array_agg(ok.i ORDER BY ok.id) AS i FROM ok) a,
           (SELECT array_agg(ins.row ORDER BY ins.id) AS row FROM ins) b,
           generate_subscripts(a.i, 1) k;
END $$;
