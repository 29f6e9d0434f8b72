# `tarmac local interrupt NODE` (providers/local/interrupt.c): the local
# provider's notice on demand drains the node and the checkpointed job
# resumes elsewhere, as the three clouds' notices do (agent_notice.sh).
tm_add_test(itest_agent_notice_local LABELS integration agent FIXTURES pg TIMEOUT 120
            COMMAND ${CMAKE_SOURCE_DIR}/tests/integration/agent_notice.sh local)
