# The price table, the fleet planner and the elastic replay
# (controller/fleet/prices.c, planner.c, elastic.c, cli/elastic.c).
# test_elastic doubles as a runner for `replay --elastic` (bench/run-elastic.sh
# uses it while the main binary does not dispatch there yet):
#   test_elastic replay --elastic --pods ... --prices ...
tm_add_c_test(test_prices ${CMAKE_SOURCE_DIR}/tests/unit/fleet/test_prices.c
              LABELS unit elastic TIMEOUT 60 LINK tarmac_fleet)
tm_add_c_test(test_planner ${CMAKE_SOURCE_DIR}/tests/unit/fleet/test_planner.c
              LABELS unit elastic TIMEOUT 60 LINK tarmac_fleet)
tm_add_c_test(test_elastic ${CMAKE_SOURCE_DIR}/tests/unit/replay/test_elastic.c
              LABELS unit elastic TIMEOUT 120)
# The planner's input built from one snapshot through the live tick's mapper
# and the elastic replay's (controller/fleet/plan_input.c): the live pass's
# planner call is caught with the linker's --wrap.
tm_add_c_test(test_plan_input ${CMAKE_SOURCE_DIR}/tests/unit/fleet/test_plan_input.c
              LABELS unit elastic TIMEOUT 60 LINK tarmac_reconcile tarmac_replay_lib)
target_link_options(test_plan_input PRIVATE -Wl,--wrap=tm_planner_run)
