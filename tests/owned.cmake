# Owned pools (docs/owned.md): machines tarmac does not buy join with a
# join token, run jobs, keep their node across a kill -9, are never
# released, and are charged idle (tests/integration/owned_join.sh).
tm_add_test(itest_owned_join LABELS integration owned FIXTURES pg TIMEOUT 180
            COMMAND ${CMAKE_SOURCE_DIR}/tests/integration/owned_join.sh)
# Owned first, the clouds for the overflow: a full owned pool bursts one
# job to a local cloud pool of its group, which is released after its
# grace while the owned node stays (tests/integration/owned_burst.sh).
tm_add_test(itest_owned_burst LABELS integration owned FIXTURES pg TIMEOUT 180
            COMMAND ${CMAKE_SOURCE_DIR}/tests/integration/owned_burst.sh)
# The same rules without a database: an owned pool in a pool group with a
# sim cloud through tm_reconcile (never released, never bought into, its
# work placed on its nodes) and the configuration's owned-pool checks.
tm_add_c_test(test_reconcile_owned ${CMAKE_SOURCE_DIR}/tests/unit/reconcile/test_reconcile_owned.c
              LABELS unit owned TIMEOUT 30 LINK tarmac_reconcile)
# A join's pure parts: the body (fields refused by name), the shape rule
# and its message, the hardware as kept, the GPU model from a GPU's name.
tm_add_c_test(test_join ${CMAKE_SOURCE_DIR}/tests/unit/agent/test_join.c
              LABELS unit owned TIMEOUT 30 LINK tarmac_agent tarmac_spec)
# Power saving's choice without a database: which idle owned nodes are
# suspended, within power_changes_max, which suspended one a waiting job
# resumes, resumes settled or given up, and the pool keys' checks.
tm_add_c_test(test_reconcile_power ${CMAKE_SOURCE_DIR}/tests/unit/reconcile/test_reconcile_power.c
              LABELS unit owned TIMEOUT 30 LINK tarmac_reconcile)
# Power saving with real joined agents: idle machines suspended one at a
# time by a script that stops their agent, billed at the suspended rate,
# one resumed for a job; a hanging and a failing suspend_command bounded,
# reported and retried (tests/integration/owned_power.sh).
tm_add_test(itest_owned_power LABELS integration owned FIXTURES pg TIMEOUT 240
            COMMAND ${CMAKE_SOURCE_DIR}/tests/integration/owned_power.sh)
# Owned first, the clouds for the overflow: a pool group's burst rule
# through tm_reconcile (a job waits for owned capacity or bursts, with the
# reason; never; after a constant wait) and pool_groups' checks.
tm_add_c_test(test_reconcile_burst ${CMAKE_SOURCE_DIR}/tests/unit/reconcile/test_reconcile_burst.c
              LABELS unit owned TIMEOUT 30 LINK tarmac_reconcile)
