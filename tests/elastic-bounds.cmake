# Known answers for the elastic replay's lower bound and floor with CPU
# and memory counted (controller/replay/elastic.c).
tm_add_c_test(test_elastic_bounds ${CMAKE_SOURCE_DIR}/tests/unit/replay/test_elastic_bounds.c
              LABELS unit elastic TIMEOUT 30 LINK tarmac_replay_lib)
