# The node agent end to end: `tarmac serve` with the local provider, real
# `tarmac agent` processes running real shell jobs, a real PostgreSQL
# (tests/lib/agent_e2e.sh).  Short timeouts keep the set to about 3 minutes.
tm_add_test(itest_agent_jobs LABELS integration agent FIXTURES pg TIMEOUT 120
            COMMAND ${CMAKE_SOURCE_DIR}/tests/integration/agent_jobs.sh)
tm_add_test(itest_agent_kill LABELS integration agent FIXTURES pg TIMEOUT 120
            COMMAND ${CMAKE_SOURCE_DIR}/tests/integration/agent_kill.sh)
tm_add_test(itest_agent_restart LABELS integration agent FIXTURES pg TIMEOUT 180
            COMMAND ${CMAKE_SOURCE_DIR}/tests/integration/agent_restart.sh)
# A notice from each metadata fake drains the node and the checkpointed job
# resumes elsewhere.  The agent signals its checkpointable jobs at once, so
# their exit ("stopped", attempt still current) may reach the API before
# the reconcile pass requeues them: tarmac_agent_report then requeues them
# as a checkpoint (cause 'checkpoint'), not as a failure.
foreach(cloud aws gcp azure)
  tm_add_test(itest_agent_notice_${cloud} LABELS integration agent FIXTURES pg TIMEOUT 120
              COMMAND ${CMAKE_SOURCE_DIR}/tests/integration/agent_notice.sh ${cloud})
endforeach()
# A job on a shared node tries to read the agent's token and state, another
# job's environment and log, `tarmac serve`'s environment, and to signal
# another job: every attempt fails and no secret reaches its files.
tm_add_test(itest_agent_isolation LABELS integration agent FIXTURES pg TIMEOUT 120
            COMMAND ${CMAKE_SOURCE_DIR}/tests/integration/agent_isolation.sh)
# Fencing a silent node before its jobs run again (controller/reconcile/
# staleness.c): a gang whose member's agent is killed -9 is requeued whole
# only once that member's process is gone, each attempt in its own
# checkpoint folder; a node that cannot be fenced waits agent.fence_after,
# and its returning agent kills the stale job before starting anything;
# tarmac_apply's fence op on its own (guards, kept, replay).
tm_add_test(itest_fence_apply LABELS integration agent FIXTURES pg TIMEOUT 60
            COMMAND ${CMAKE_SOURCE_DIR}/tests/integration/fence_apply.sh)
tm_add_test(itest_fence_gang LABELS integration agent FIXTURES pg TIMEOUT 120
            COMMAND ${CMAKE_SOURCE_DIR}/tests/integration/fence_gang.sh)
tm_add_test(itest_fence_return LABELS integration agent FIXTURES pg TIMEOUT 120
            COMMAND ${CMAKE_SOURCE_DIR}/tests/integration/fence_return.sh)
# Multi-node rendezvous (docs/multi-node.md): a 3-node job's ranks meet
# through TARMAC_MASTER_ADDR and TARMAC_MASTER_PORT, a job of one node is
# rank 0 of 1; tarmac_rendezvous's ranks and port choice on their own
# (range full, never a port twice on a node, freed when the job ends).
tm_add_test(itest_agent_rendezvous LABELS integration agent FIXTURES pg TIMEOUT 120
            COMMAND ${CMAKE_SOURCE_DIR}/tests/integration/agent_rendezvous.sh)
tm_add_test(itest_rendezvous_ports LABELS integration agent FIXTURES pg TIMEOUT 60
            COMMAND ${CMAKE_SOURCE_DIR}/tests/integration/rendezvous_ports.sh)
# A gang lives and dies whole (docs/multi-node.md, migrations/0021): a
# member that exits 3 fails the job naming its rank and the others (and
# their grandchildren) are killed; a member done early waits for the rest;
# cancel stops every member; a member whose agent never claims the job
# gets the gang requeued whole past agent.gang_start_timeout, with no
# member started.
tm_add_test(itest_gang_lifecycle LABELS integration agent FIXTURES pg TIMEOUT 180
            COMMAND ${CMAKE_SOURCE_DIR}/tests/integration/gang_lifecycle.sh)
tm_add_test(itest_gang_barrier LABELS integration agent FIXTURES pg TIMEOUT 150
            COMMAND ${CMAKE_SOURCE_DIR}/tests/integration/gang_barrier.sh)
# A gang is stopped together (migrations/0026): with the agents' 3 s
# heartbeats spread 1 s apart, a checkpointable 3-node gang's ranks all get
# the checkpoint signal at the common stop time, well within the 2 s its
# agents hear of it apart; a member whose agent never hears does not hold
# the others' stop (a cancel).
tm_add_test(itest_gang_stop LABELS integration agent FIXTURES pg TIMEOUT 150
            COMMAND ${CMAKE_SOURCE_DIR}/tests/integration/gang_stop.sh)
# Every byte of a job's output (docs/logs.md): 20 MB of binary output read
# back whole after its node was released, --follow to the job's end, an
# agent killed -9 mid-output and restarted (no gap, no duplicate), another
# team's engineer refused, and the bad input of the ingest and the read.
tm_add_test(itest_agent_logs LABELS integration agent FIXTURES pg TIMEOUT 240
            COMMAND ${CMAKE_SOURCE_DIR}/tests/integration/agent_logs.sh)
# The per-job cap (head, tail and a marker) and the retention, with a small cap.
tm_add_test(itest_agent_logs_cap LABELS integration agent FIXTURES pg TIMEOUT 120
            COMMAND ${CMAKE_SOURCE_DIR}/tests/integration/agent_logs_cap.sh)
