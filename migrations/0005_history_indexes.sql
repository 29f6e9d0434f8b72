-- 0005_history_indexes: what GET /v1/timeseries (the dashboard's history)
-- reads by time.
--
-- The history of a window is the live rows (jobs_active, nodes_live) plus
-- the rows that ended inside it.  Without these, each read scans every job
-- ever run: 1 M finished jobs took 0.4-0.5 s per scan on the 2-core dev
-- machine, two scans a read.  Partial, so a job enters the index only when
-- it finishes (an UPDATE that rewrites the row's index entries anyway):
-- submission, the hot path, pays nothing.
CREATE INDEX jobs_finished ON jobs (finished_ms) WHERE finished_ms IS NOT NULL;
CREATE INDEX nodes_terminated ON nodes (terminated_ms) WHERE terminated_ms IS NOT NULL;
