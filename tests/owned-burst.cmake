# The burst rule (controller/fleet/burst.c): owned capacity first, the
# clouds for the overflow; known answers of never, after and cost.
tm_add_c_test(test_burst ${CMAKE_SOURCE_DIR}/tests/unit/fleet/test_burst.c
              LABELS unit owned TIMEOUT 30 LINK tarmac_fleet)
# The elastic replay with an owned fleet (controller/replay/elastic_owned.c):
# gangs placed whole, the four policies' known answers on small traces, and
# the command line's bad input.
tm_add_c_test(test_elastic_owned ${CMAKE_SOURCE_DIR}/tests/unit/replay/test_elastic_owned.c
              LABELS unit owned TIMEOUT 30)
