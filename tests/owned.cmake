# Owned pools (docs/owned.md): machines tarmac does not buy join with a
# join token, run jobs, keep their node across a kill -9, are never
# released, and are charged idle (tests/integration/owned_join.sh).
tm_add_test(itest_owned_join LABELS integration owned FIXTURES pg TIMEOUT 180
            COMMAND ${CMAKE_SOURCE_DIR}/tests/integration/owned_join.sh)
