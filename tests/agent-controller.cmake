# The node agent, controller side: enrollment, the agent role,
# heartbeats with samples, attempt-fenced start/exit, env and image.
tm_add_test(itest_agent_api LABELS integration agent FIXTURES pg TIMEOUT 120
            COMMAND ${CMAKE_SOURCE_DIR}/tests/integration/agent_api.sh)
# The pure pass's known answers: staleness transitions and idle GPUs.
tm_add_c_test(test_agent_staleness ${CMAKE_SOURCE_DIR}/tests/unit/agent/test_staleness.c
              LABELS unit agent LINK tarmac_reconcile)
# A pool whose nodes never enroll: the backoff, its decisions and the alert
# in the pure pass, then end to end with agents given a wrong controller URL.
tm_add_c_test(test_agent_no_show ${CMAKE_SOURCE_DIR}/tests/unit/reconcile/test_no_show.c
              LABELS unit agent LINK tarmac_reconcile)
tm_add_test(itest_agent_no_show LABELS integration agent FIXTURES pg TIMEOUT 120
            COMMAND ${CMAKE_SOURCE_DIR}/tests/integration/agent_no_show.sh)
# The daemon's bootstrap (enrollment rows before the launch, no secret in
# any log, decision or listing, the 16 KB user data limit at config load)
# and gpu_samples pruning.
tm_add_test(itest_agent_bootstrap LABELS integration agent FIXTURES pg TIMEOUT 120
            COMMAND ${CMAKE_SOURCE_DIR}/tests/integration/agent_bootstrap.sh)
tm_add_c_test(test_agent_bootstrap ${CMAKE_SOURCE_DIR}/tests/unit/agent/test_bootstrap.c
              LABELS unit agent LINK tarmac_core)
# tarmac_apply's node agent ops and sample pruning on a real database.
tm_add_test(itest_agent_apply LABELS integration agent FIXTURES pg TIMEOUT 60
            COMMAND ${CMAKE_SOURCE_DIR}/tests/integration/agent_apply.sh)
# Silence the controller could not hear (its database away, a new leader)
# is not held against the nodes; many nodes silent at once are held back
# (mass silence), one silent node among many is still handled.
tm_add_c_test(test_reconcile_silence ${CMAKE_SOURCE_DIR}/tests/unit/reconcile/test_reconcile_silence.c
              LABELS unit agent LINK tarmac_reconcile)
# A gang's start barrier past agent.gang_start_timeout: the whole gang is
# requeued, naming the nodes that did not come (gang_start.c).
tm_add_c_test(test_reconcile_gang_start ${CMAKE_SOURCE_DIR}/tests/unit/reconcile/test_reconcile_gang_start.c
              LABELS unit agent LINK tarmac_reconcile)
# The control plane goes away for longer than agent.requeue_after (the
# database cut off; `tarmac serve` stopped) and comes back: with real
# agents, no job is requeued and no job process stopped.
tm_add_test(itest_silence_db_outage LABELS integration agent FIXTURES pg TIMEOUT 150
            COMMAND ${CMAKE_SOURCE_DIR}/tests/integration/silence_outage.sh db)
tm_add_test(itest_silence_restart LABELS integration agent FIXTURES pg TIMEOUT 150
            COMMAND ${CMAKE_SOURCE_DIR}/tests/integration/silence_outage.sh restart)
# tarmac_apply's silence_hold: one decision per episode.
tm_add_test(itest_silence_apply LABELS integration agent FIXTURES pg TIMEOUT 60
            COMMAND ${CMAKE_SOURCE_DIR}/tests/integration/silence_apply.sh)
