# The controller end to end: the real binary, the run's PostgreSQL cluster
# and the simulated cloud in its own schema.
foreach(t migrate bad_input e2e leader kill9 db_outage apply_actions)
  tm_add_test(itest_${t} LABELS integration foundation FIXTURES pg TIMEOUT 240
              COMMAND ${CMAKE_SOURCE_DIR}/tests/integration/${t}.sh)
endforeach()
tm_add_c_test(test_reconcile ${CMAKE_SOURCE_DIR}/tests/unit/reconcile/test_reconcile.c LABELS unit foundation LINK tarmac_reconcile)
tm_add_c_test(test_model ${CMAKE_SOURCE_DIR}/tests/unit/core/test_model.c LABELS unit foundation LINK tarmac_core)
