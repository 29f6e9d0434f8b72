# The node agent end to end: `tarmac serve` with the local provider, real
# `tarmac agent` processes running real shell jobs, a real PostgreSQL
# (tests/lib/agent_e2e.sh).  Short timeouts keep the set to about 3 minutes.
tm_add_test(itest_agent_jobs LABELS integration agent FIXTURES pg TIMEOUT 120
            COMMAND ${CMAKE_SOURCE_DIR}/tests/integration/agent_jobs.sh)
tm_add_test(itest_agent_kill LABELS integration agent FIXTURES pg TIMEOUT 120
            COMMAND ${CMAKE_SOURCE_DIR}/tests/integration/agent_kill.sh)
tm_add_test(itest_agent_restart LABELS integration agent FIXTURES pg TIMEOUT 180
            COMMAND ${CMAKE_SOURCE_DIR}/tests/integration/agent_restart.sh)
foreach(cloud aws gcp azure)
  tm_add_test(itest_agent_notice_${cloud} LABELS integration agent FIXTURES pg TIMEOUT 120
              COMMAND ${CMAKE_SOURCE_DIR}/tests/integration/agent_notice.sh ${cloud})
endforeach()
