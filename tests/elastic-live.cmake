# Spot interruptions in the live controller: notices, checkpoints, requeues
# and the GPU time lost (controller/reconcile/observe.c, migrations/0006_spot.sql).
tm_add_c_test(test_reconcile_spot ${CMAKE_SOURCE_DIR}/tests/unit/reconcile/test_reconcile_spot.c
              LABELS unit elastic LINK tarmac_reconcile)
tm_add_test(itest_spot_interrupt LABELS integration elastic FIXTURES pg TIMEOUT 360
            COMMAND ${CMAKE_SOURCE_DIR}/tests/integration/spot_interrupt.sh)
tm_add_test(itest_spot_apply LABELS integration elastic FIXTURES pg TIMEOUT 120
            COMMAND ${CMAKE_SOURCE_DIR}/tests/integration/spot_apply.sh)
# A provider's fitted spot hazard table (config spot_hazards) end to end:
# spot launches in the zone of lowest hazard, the sim drawing from the table.
tm_add_test(itest_spot_zone_hazards LABELS integration elastic FIXTURES pg TIMEOUT 180
            COMMAND ${CMAKE_SOURCE_DIR}/tests/integration/spot_zone_hazards.sh)
# The live tick's launches and releases from the planner:
# forecast, hysteresis, shortage fallback, routing, pool limits.
tm_add_c_test(test_reconcile_planner ${CMAKE_SOURCE_DIR}/tests/unit/reconcile/test_reconcile_planner.c
              LABELS unit elastic LINK tarmac_reconcile)
# The live forecasters' warm start from the demand history (a new leader
# does not plan from the queue alone while its seasons fill).
tm_add_c_test(test_live_forecast ${CMAKE_SOURCE_DIR}/tests/unit/reconcile/test_live_forecast.c
              LABELS unit elastic LINK tarmac_reconcile)
tm_add_test(itest_forecast_warm LABELS integration elastic FIXTURES pg TIMEOUT 120
            COMMAND ${CMAKE_SOURCE_DIR}/tests/integration/forecast_warm.sh)
# The planner's other actions in the live tick: drain,
# move, spot substitution, deadline switch, refusals, disruption budget.
tm_add_c_test(test_reconcile_moves ${CMAKE_SOURCE_DIR}/tests/unit/reconcile/test_reconcile_moves.c
              LABELS unit elastic LINK tarmac_reconcile)
tm_add_test(itest_substitute LABELS integration elastic FIXTURES pg TIMEOUT 240
            COMMAND ${CMAKE_SOURCE_DIR}/tests/integration/substitute.sh)
tm_add_test(itest_moves_apply LABELS integration elastic FIXTURES pg TIMEOUT 120
            COMMAND ${CMAKE_SOURCE_DIR}/tests/integration/moves_apply.sh)
