# The README's run command: its PostgreSQL setup path from a clone in a 0700
# folder (scripts/demo_db.sh), and the refusals it gives.  It starts its own
# clusters, so it needs no fixture.
tm_add_test(itest_demo_setup LABELS integration foundation slow TIMEOUT 240
            COMMAND ${CMAKE_SOURCE_DIR}/tests/integration/demo_setup.sh)

# The README's run command on the local provider, shortened
# (TARMAC_DEMO_SHORT=1, about 45 s each): real agents and jobs, the two-node
# exchange, the spot job's resume from its checkpoint on another node, the
# closing table; as the user ctest runs as, and (as root) as a plain user.
# slow: they stay out of the ASan pass (scripts/test.sh).
tm_add_test(itest_demo_local LABELS integration foundation slow TIMEOUT 240 FIXTURES pg
            COMMAND ${CMAKE_SOURCE_DIR}/tests/integration/demo_local.sh)
tm_add_test(itest_demo_local_user LABELS integration foundation slow TIMEOUT 240 FIXTURES pg
            COMMAND ${CMAKE_SOURCE_DIR}/tests/integration/demo_local.sh user)
set_tests_properties(itest_demo_local_user PROPERTIES SKIP_RETURN_CODE 77)
