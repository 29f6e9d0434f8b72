# providers/sim: the simulated cloud.
tm_add_c_test(test_simcloud ${CMAKE_SOURCE_DIR}/tests/unit/test_simcloud.c
              LABELS unit foundation)
