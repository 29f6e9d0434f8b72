# The node agent, controller side (issue 14): enrollment, the agent role,
# heartbeats with samples, attempt-fenced start/exit, env and image.
tm_add_test(itest_agent_api LABELS integration agent FIXTURES pg TIMEOUT 120
            COMMAND ${CMAKE_SOURCE_DIR}/tests/integration/agent_api.sh)
