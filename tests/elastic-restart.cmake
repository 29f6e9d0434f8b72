# Consolidation by restart: the planner's known answers
# (controller/fleet/planner.c run_restart), the live tick's "restart" op
# (controller/reconcile/moves.c, migrations/0015_restart.sql) and the
# elastic replay's redone GPU-hours (controller/replay/elastic.c).
tm_add_c_test(test_planner_restart ${CMAKE_SOURCE_DIR}/tests/unit/fleet/test_planner_restart.c
              LABELS unit elastic TIMEOUT 60 LINK tarmac_fleet)
tm_add_c_test(test_reconcile_restart ${CMAKE_SOURCE_DIR}/tests/unit/reconcile/test_reconcile_restart.c
              LABELS unit elastic LINK tarmac_reconcile)
tm_add_test(itest_restart_apply LABELS integration elastic FIXTURES pg TIMEOUT 120
            COMMAND ${CMAKE_SOURCE_DIR}/tests/integration/restart_apply.sh)
