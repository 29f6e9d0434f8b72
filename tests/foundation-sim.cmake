# providers/sim: the simulated cloud.
tm_add_c_test(test_simcloud ${CMAKE_SOURCE_DIR}/tests/unit/providers/sim/test_simcloud.c
              LABELS unit foundation LINK tarmac_simcloud)
tm_add_c_test(test_sim_provider ${CMAKE_SOURCE_DIR}/tests/unit/providers/sim/test_sim_provider.c
              LABELS integration foundation FIXTURES pg)
