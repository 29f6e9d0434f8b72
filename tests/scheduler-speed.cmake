# The scheduler's speed work keeps its decisions: the
# queue's sort against qsort().
tm_add_c_test(test_sched_order ${CMAKE_SOURCE_DIR}/tests/unit/sched/test_sched_order.c
              LABELS unit scheduler TIMEOUT 60 LINK tarmac_sched)
