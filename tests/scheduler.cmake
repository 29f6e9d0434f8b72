# Issue 3: the scheduler, trace replay and packing.  Tests that read the
# public traces find them through TM_TRACES (../shared/traces beside the
# source tree).
set(TM_TRACES_DIR ${CMAKE_SOURCE_DIR}/../shared/traces)
tm_add_c_test(test_scheduler ${CMAKE_SOURCE_DIR}/tests/unit/test_scheduler.c
              LABELS unit scheduler TIMEOUT 120)
