-- 0008_apply_kept: tarmac_apply also names the nodes a 'terminate' op
-- asked to release that are still live after the plan ("kept": a guard
-- held them, e.g. a job allocated on the node since the snapshot, or a
-- state the op does not release from).  The controller calls the cloud's
-- terminate only for released nodes: before, it terminated every node of
-- the plan's terminate list, including one the database had just kept
-- alive with a job on it.
--
-- Wraps 0007's tarmac_apply (itself wrapping 0006's and 0002's), as each
-- of those did: the fence, the lock and every op stay where they are.
ALTER FUNCTION tarmac_apply(bigint, bigint, jsonb) RENAME TO tarmac_apply_moves;

CREATE FUNCTION tarmac_apply(p_epoch bigint, p_now bigint, p_plan jsonb)
RETURNS jsonb LANGUAGE plpgsql AS $$
DECLARE
    res jsonb;
    kept jsonb;
BEGIN
    res := tarmac_apply_moves(p_epoch, p_now, p_plan);
    SELECT coalesce(jsonb_agg(n.id ORDER BY n.id), '[]'::jsonb) INTO kept
      FROM nodes n
     WHERE n.id IN (SELECT (x ->> 'node')::bigint
                      FROM jsonb_array_elements(coalesce(p_plan -> 'actions', '[]'::jsonb)) x
                     WHERE x ->> 'op' = 'terminate')
       AND n.state NOT IN ('terminating', 'terminated', 'interrupted');
    RETURN res || jsonb_build_object('kept', kept);
END $$;
