# The heartbeat's group commit (heartbeat figure): many nodes at
# once with samples, exact stored counts, bad items refused alone.
tm_add_test(itest_agent_heartbeat_batch LABELS integration agent FIXTURES pg TIMEOUT 120
            COMMAND ${CMAKE_SOURCE_DIR}/tests/integration/agent_heartbeat_batch.sh)
