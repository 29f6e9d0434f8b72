# The burst rule (controller/fleet/burst.c): owned capacity first, the
# clouds for the overflow; known answers of never, after and cost.
tm_add_c_test(test_burst ${CMAKE_SOURCE_DIR}/tests/unit/fleet/test_burst.c
              LABELS unit owned TIMEOUT 30 LINK tarmac_fleet)
