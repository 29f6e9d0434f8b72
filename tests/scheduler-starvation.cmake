# Jobs that only a few nodes can hold start within the starvation bound
#: known answers, tarmac's pass alone.
tm_add_c_test(test_few_nodes ${CMAKE_SOURCE_DIR}/tests/unit/sched/test_few_nodes.c
              LABELS unit scheduler TIMEOUT 60 LINK tarmac_sched)
