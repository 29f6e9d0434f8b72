# The scheduler, trace replay and packing.  Tests that read the
# public traces find them at ${TM_SOURCE_DIR}/../shared/traces (ctest sets
# TM_SOURCE_DIR) and skip when they are absent.
tm_add_c_test(test_scheduler ${CMAKE_SOURCE_DIR}/tests/unit/sched/test_scheduler.c
              LABELS unit scheduler TIMEOUT 120 LINK tarmac_sched)
# A pass given the replay's footprint of the running jobs against the same
# pass reading the allocs, on random snapshots.
tm_add_c_test(test_sched_footprint ${CMAKE_SOURCE_DIR}/tests/unit/sched/test_sched_footprint.c
              LABELS unit scheduler TIMEOUT 120 LINK tarmac_sched)
tm_add_c_test(test_trace ${CMAKE_SOURCE_DIR}/tests/unit/replay/test_trace.c
              LABELS unit scheduler TIMEOUT 120 LINK tarmac_replay_lib)
tm_add_c_test(test_replay ${CMAKE_SOURCE_DIR}/tests/unit/replay/test_replay.c
              LABELS unit scheduler TIMEOUT 300)
# The replay's incremental passes against the full pass, decision for decision.
tm_add_c_test(test_replay_incremental ${CMAKE_SOURCE_DIR}/tests/unit/replay/test_replay_incremental.c
              LABELS unit scheduler TIMEOUT 120 LINK tarmac_replay_lib)
# Gangs in the time replay: known answers, every policy, incremental and full.
tm_add_c_test(test_replay_gang ${CMAKE_SOURCE_DIR}/tests/unit/replay/test_replay_gang.c
              LABELS unit scheduler TIMEOUT 120 LINK tarmac_replay_lib)
