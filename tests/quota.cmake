# Team GPU quotas (controller/sched/quota.h): known answers, linked with
# the scheduler's library alone.
tm_add_c_test(test_quota ${CMAKE_SOURCE_DIR}/tests/unit/sched/test_quota.c
              LABELS unit quota TIMEOUT 60 LINK tarmac_sched)
